/* Text tests: UTF-8, file reading errors, char tokenizer, d2l/Moses tokenizers, detokenizer, word
 * vocabulary, parallel corpus loading (and every error case), truncate/pad, batching. */
#include <stdlib.h>
#include <unistd.h>

#include "check.h"
#include "tfm/core.h"
#include "tfm/eval.h"
#include "tfm/text.h"

#define DATA "../shared/data/"

static char tmpdir[256];

static const char *write_tmp(const char *name, const char *data, size_t n) {
    static char path[4][512];
    static int k = 0;
    char *p = path[k++ % 4];
    snprintf(p, 512, "%s/%s", tmpdir, name);
    FILE *f = fopen(p, "wb");
    fwrite(data, 1, n, f);
    fclose(f);
    return p;
}

/* string literal -> file (length from sizeof, so embedded NULs count) */
#define WRITE(name, lit) write_tmp(name, lit, sizeof(lit) - 1)

static int has(const char *s, const char *sub) { return s && strstr(s, sub) != NULL; }

static int toks_are(const tfm_toklist *t, const char *const *want, int n) {
    if (t->n != n) return 0;
    for (int i = 0; i < n; i++)
        if (strcmp(t->tok[i], want[i])) return 0;
    return 1;
}

static void print_toks(const tfm_toklist *t) {
    printf("  [");
    for (int i = 0; i < t->n; i++) printf("%s'%s'", i ? ", " : "", t->tok[i]);
    printf("]\n");
}

/* ---------------------------------------------------------------- UTF-8 */
static void test_utf8(void) {
    CHECK("utf8_valid_ascii_latin_cjk_emoji", tfm_utf8_valid("a\xc3\xa9\xe4\xb8\xad\xf0\x9f\x98\x80", 10), "rejected");
    CHECK("utf8_overlong", !tfm_utf8_valid("\xc0\x80", 2) && !tfm_utf8_valid("\xe0\x80\xaf", 3), "accepted");
    CHECK("utf8_surrogate", !tfm_utf8_valid("\xed\xa0\x80", 3), "accepted");
    CHECK("utf8_too_big", !tfm_utf8_valid("\xf4\x90\x80\x80", 4) && !tfm_utf8_valid("\xf5\x80\x80\x80", 4), "accepted");
    CHECK("utf8_truncated", !tfm_utf8_valid("ab\xc3", 3) && tfm_utf8_first_invalid("ab\xc3", 3) == 2, "wrong");
    CHECK("utf8_stray_continuation", tfm_utf8_first_invalid("abc\x80", 4) == 3, "wrong");
    int ok = 1;
    for (uint32_t cp = 1; cp < 0x110000; cp += (cp < 0x800 ? 1 : 37)) {
        if (cp >= 0xD800 && cp <= 0xDFFF) continue;
        char buf[4];
        uint32_t back;
        int k = tfm_utf8_encode(cp, buf);
        ok &= k > 0 && tfm_utf8_decode(buf, (size_t)k, &back) == k && back == cp;
    }
    CHECK("utf8_roundtrip", ok, "encode/decode mismatch");
    size_t n;
    char *low = tfm_utf8_lower("ÀÉÎÕÜ ÆØÞ ŁŃŸŽ ĲĹ İ ΑΣΩ ПРИВЕТ Ё ẞ Straße ×", strlen("ÀÉÎÕÜ ÆØÞ ŁŃŸŽ ĲĹ İ ΑΣΩ ПРИВЕТ Ё ẞ Straße ×"), &n);
    CHECK("utf8_lower_table", !strcmp(low, "àéîõü æøþ łńÿž ĳĺ i\xcc\x87 ασω привет ё ß straße ×"), "got '%s'", low);
    free(low);
}

/* ---------------------------------------------------------------- files */
static void test_files(void) {
    size_t n;
    char *b = tfm_read_text_file("/nonexistent/x.txt", &n);
    CHECK("read_missing", !b && has(tfm_last_error(), "/nonexistent/x.txt") && !strchr(tfm_last_error(), '\n'), "%s",
          tfm_last_error());
    const char *p = WRITE("empty.txt", "");
    b = tfm_read_text_file(p, &n);
    CHECK("read_empty", !b && has(tfm_last_error(), p) && has(tfm_last_error(), "empty"), "%s", tfm_last_error());
    p = WRITE("bin.dat", "ab\0cd");
    b = tfm_read_text_file(p, &n);
    CHECK("read_binary", !b && has(tfm_last_error(), p) && has(tfm_last_error(), "binary"), "%s", tfm_last_error());
    p = WRITE("bad.txt", "ok\nfine\nbad \xff here\n");
    b = tfm_read_text_file(p, &n);
    CHECK("read_invalid_utf8_line", !b && has(tfm_last_error(), p) && has(tfm_last_error(), ":3:"), "%s", tfm_last_error());
    b = tfm_read_text_file(tmpdir, &n);
    CHECK("read_directory", !b && has(tfm_last_error(), tmpdir), "%s", tfm_last_error());
    char text[] = "a\r\nb\n\nc";
    int nl;
    char **lines = tfm_split_lines(text, strlen(text), &nl);
    CHECK("split_lines", nl == 4 && !strcmp(lines[0], "a") && !strcmp(lines[1], "b") && !lines[2][0] && !strcmp(lines[3], "c"),
          "n=%d", nl);
    free(lines);
    char text2[] = "x\ny\n";
    lines = tfm_split_lines(text2, strlen(text2), &nl);
    CHECK("split_lines_final_newline", nl == 2, "n=%d", nl);
    free(lines);
}

/* ---------------------------------------------------------------- char tokenizer */
static void test_chars(void) {
    tfm_char_vocab v;
    const char *t = "hello wörld";
    int rc = tfm_char_vocab_build(&v, t, strlen(t));
    CHECK("chars_build", rc == 0 && v.n == 9 && !strcmp(v.chars, " dehlorw\xc3\xb6"), "n=%d chars='%s'", v.n, v.chars);
    int n;
    int *ids = tfm_char_encode(&v, t, strlen(t), &n);
    char *back = ids ? tfm_char_decode(&v, ids, n) : NULL;
    CHECK("chars_roundtrip", ids && n == 11 && back && !strcmp(back, t), "n=%d back='%s'", n, back ? back : "");
    CHECK("chars_ids", ids && ids[0] == 3 && ids[5] == 0 && ids[7] == 8, "ids %d %d %d", ids ? ids[0] : -1, ids ? ids[5] : -1,
          ids ? ids[7] : -1);
    free(ids);
    free(back);
    ids = tfm_char_encode(&v, "hellx", 5, &n);
    CHECK("chars_unknown_named", !ids && has(tfm_last_error(), "'x' (U+0078)") && has(tfm_last_error(), "offset 4"), "%s",
          tfm_last_error());
    ids = tfm_char_encode(&v, "h\xc3\xa9", 3, &n);
    CHECK("chars_unknown_accent", !ids && has(tfm_last_error(), "U+00E9"), "%s", tfm_last_error());
    int bad_ids[2] = {1, 9};
    back = tfm_char_decode(&v, bad_ids, 2);
    CHECK("chars_decode_range", !back && has(tfm_last_error(), "9"), "%s", tfm_last_error());
    tfm_char_vocab v2;
    rc = tfm_char_vocab_from_string(&v2, v.chars);
    CHECK("chars_from_string", rc == 0 && v2.n == v.n && tfm_char_vocab_id(&v2, 0xF6) == 8, "rc=%d", rc);
    tfm_char_vocab_free(&v2);
    CHECK("chars_from_string_unsorted", tfm_char_vocab_from_string(&v2, "ba") < 0 && has(tfm_last_error(), "increasing"),
          "%s", tfm_last_error());
    CHECK("chars_from_string_invalid", tfm_char_vocab_from_string(&v2, "a\xff") < 0, "accepted");
    tfm_char_vocab_free(&v);
    /* the real corpus: README says 65 distinct characters */
    size_t len;
    char *shake = tfm_read_text_file(DATA "tinyshakespeare/input.txt", &len);
    if (shake) {
        rc = tfm_char_vocab_build(&v, shake, len);
        CHECK("chars_tinyshakespeare_65", rc == 0 && v.n == 65 && len == 1115394, "n=%d len=%zu", v.n, len);
        ids = tfm_char_encode(&v, shake, len, &n);
        back = ids ? tfm_char_decode(&v, ids, n) : NULL;
        CHECK("chars_tinyshakespeare_roundtrip", back && !strcmp(back, shake), "mismatch");
        free(ids);
        free(back);
        tfm_char_vocab_free(&v);
        free(shake);
    }
}

/* ---------------------------------------------------------------- tokenizers */
static void test_tokenizers(void) {
    char *p = tfm_preprocess_d2l("Cours\xe2\x80\xaf!");
    CHECK("d2l_preprocess_nnbsp", p && !strcmp(p, "cours !"), "got '%s'", p);
    free(p);
    p = tfm_preprocess_d2l("Hello,World! Ça va? Oui.\xc2\xa0Non");
    CHECK("d2l_preprocess", p && !strcmp(p, "hello ,world ! ça va ? oui . non"), "got '%s'", p);
    free(p);
    tfm_toklist t;
    tfm_tokenize_d2l("Go.", &t);
    const char *w1[] = {"go", "."};
    CHECK("d2l_tokens_go", toks_are(&t, w1, 2), "wrong");
    tfm_toklist_free(&t);
    tfm_tokenize_d2l("Va !", &t);
    const char *w2[] = {"va", "!"};
    CHECK("d2l_tokens_va", toks_are(&t, w2, 2), "wrong");
    tfm_toklist_free(&t);

    tfm_tokenize_moses("Don't stop, Mr. Smith's well-known café costs 3.50€ or 1,000!", &t);
    const char *w3[] = {"Don't", "stop", ",", "Mr", ".", "Smith's", "well-known", "café", "costs", "3.50", "€", "or", "1,000", "!"};
    CHECK("moses_basic", toks_are(&t, w3, 14), "wrong");
    if (!toks_are(&t, w3, 14)) print_toks(&t);
    tfm_toklist_free(&t);
    tfm_tokenize_moses("Wait... (Zürich) l'homme 'quoted' Straße -- ok?!", &t);
    const char *w4[] = {"Wait", "...", "(", "Zürich", ")", "l'homme", "'", "quoted", "'", "Straße", "--", "ok", "?", "!"};
    CHECK("moses_runs_accents_quotes", toks_are(&t, w4, 14), "wrong");
    if (!toks_are(&t, w4, 14)) print_toks(&t);
    tfm_toklist_free(&t);
    tfm_tokenize(TFM_TOK_MOSES_LOWER, "Ein ÄPFEL.", &t);
    const char *w5[] = {"ein", "äpfel", "."};
    CHECK("moses_lower", toks_are(&t, w5, 3), "wrong");
    tfm_toklist_free(&t);
    tfm_tokenize_space(" a\tb\xc2\xa0 c  ", &t);
    const char *w6[] = {"a", "b", "c"};
    CHECK("space_tokens", toks_are(&t, w6, 3), "wrong");
    tfm_toklist_free(&t);
    tfm_tokenize_moses("   ", &t);
    CHECK("moses_empty", t.n == 0, "n=%d", t.n);
    tfm_toklist_free(&t);
    CHECK("tok_kind_names", tfm_tok_kind_parse("moses-lower") == TFM_TOK_MOSES_LOWER && tfm_tok_kind_parse("x") == -1 &&
                                !strcmp(tfm_tok_kind_name(TFM_TOK_D2L), "d2l"), "wrong");

    struct { const char *toks[8]; int n; const char *want; } cases[] = {
        {{"Hello", ",", "world", "!"}, 4, "Hello, world!"},
        {{"(", "a", ")", "b", "."}, 5, "(a) b."},
        {{"He", "said", "\"", "hi", "\"", "."}, 6, "He said \"hi\"."},
        {{"It", "'s", "ok", "..."}, 4, "It's ok..."},
        {{"\xc2\xbf", "Qué", "?"}, 3, "\xc2\xbfQué?"},
        {{"a", ";", "b", ":", "c", "%"}, 6, "a; b: c%"},
    };
    int ok = 1;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *d = tfm_detokenize(cases[i].toks, cases[i].n);
        if (strcmp(d, cases[i].want)) {
            printf("  detok %zu: '%s' want '%s'\n", i, d, cases[i].want);
            ok = 0;
        }
        free(d);
    }
    CHECK("detokenize_cases", ok, "see above");

    /* tokenize + detokenize keeps the 13a-tokenized text: BLEU(detok(tok(x)), x) ~ 100 on real data */
    size_t len;
    char *buf = tfm_read_text_file(DATA "multi30k/val.de", &len);
    if (buf) {
        int nl;
        char **lines = tfm_split_lines(buf, len, &nl);
        char **det = malloc((size_t)nl * sizeof *det);
        for (int i = 0; i < nl; i++) {
            tfm_tokenize_moses(lines[i], &t);
            det[i] = tfm_detokenize((const char *const *)t.tok, t.n);
            tfm_toklist_free(&t);
        }
        tfm_bleu_result r;
        tfm_corpus_bleu((const char *const *)det, (const char *const *)lines, nl, 0, &r);
        CHECK("detokenize_roundtrip_bleu", r.score > 99.0, "BLEU %.2f", r.score);
        for (int i = 0; i < nl; i++) free(det[i]);
        free(det);
        free(lines);
        free(buf);
    }
}

/* ---------------------------------------------------------------- vocabulary */
static void test_vocab(void) {
    tfm_toklist lists[2];
    tfm_tokenize_space("b a c a b d", &lists[0]);
    tfm_tokenize_space("a e <unk> b", &lists[1]);
    /* counts: a 3, b 3, c 1, d 1, e 1, <unk> 1 */
    tfm_vocab v;
    tfm_vocab_build(&v, lists, 2, 1);
    const char *want[] = {"<pad>", "<bos>", "<eos>", "<unk>", "a", "b", "c", "d", "e"};
    int ok = v.n == 9;
    for (int i = 0; ok && i < 9; i++) ok &= !strcmp(v.tok[i], want[i]);
    CHECK("vocab_order_reserved_freq_alpha", ok, "n=%d", v.n);
    CHECK("vocab_lookup", tfm_vocab_id(&v, "c") == 6 && tfm_vocab_id(&v, "zzz") == TFM_UNK && tfm_vocab_find(&v, "zzz") == -1 &&
                              tfm_vocab_id(&v, "<eos>") == TFM_EOS && !strcmp(tfm_vocab_token(&v, 5), "b") &&
                              !tfm_vocab_token(&v, 9) && !tfm_vocab_token(&v, -1), "wrong");
    char *s = tfm_vocab_serialize(&v);
    tfm_vocab v2;
    int rc = tfm_vocab_deserialize(&v2, s);
    ok = rc == 0 && v2.n == v.n;
    for (int i = 0; ok && i < v.n; i++) ok &= !strcmp(v.tok[i], v2.tok[i]) && tfm_vocab_id(&v2, v.tok[i]) == i;
    CHECK("vocab_serialize_roundtrip", ok && !strncmp(s, "<pad>\n<bos>\n<eos>\n<unk>\na\n", 24), "rc=%d", rc);
    tfm_vocab_free(&v2);
    free(s);
    tfm_vocab_free(&v);
    tfm_vocab_build(&v, lists, 2, 2);
    CHECK("vocab_min_freq", v.n == 6 && tfm_vocab_id(&v, "c") == TFM_UNK, "n=%d", v.n);
    tfm_vocab_free(&v);
    tfm_toklist_free(&lists[0]);
    tfm_toklist_free(&lists[1]);
    CHECK("vocab_deser_missing_reserved", tfm_vocab_deserialize(&v2, "<pad>\n<bos>\na") < 0 && has(tfm_last_error(), "<eos>"),
          "%s", tfm_last_error());
    CHECK("vocab_deser_duplicate", tfm_vocab_deserialize(&v2, "<pad>\n<bos>\n<eos>\n<unk>\nx\ny\nx") < 0 &&
                                       has(tfm_last_error(), "'x'"), "%s", tfm_last_error());
    CHECK("vocab_deser_empty_token", tfm_vocab_deserialize(&v2, "<pad>\n<bos>\n<eos>\n<unk>\n\nx") < 0, "accepted");
    CHECK("vocab_deser_bad_utf8", tfm_vocab_deserialize(&v2, "<pad>\n<bos>\n<eos>\n<unk>\n\xff") < 0, "accepted");

    /* a large real vocabulary: every token maps back to itself through the hash table */
    tfm_parallel_text p;
    if (tfm_parallel_load_files(&p, DATA "multi30k/train.de", DATA "multi30k/train.en", TFM_TOK_MOSES, 0) == 0) {
        tfm_vocab_build(&v, p.src, p.n, 1);
        ok = v.n > 15000;
        for (int i = 0; i < v.n; i++) ok &= tfm_vocab_id(&v, v.tok[i]) == i;
        CHECK("vocab_large_lookup", ok && p.n == 29000, "n=%d pairs=%d", v.n, p.n);
        tfm_vocab v3;
        tfm_vocab_build(&v3, p.src, p.n, 1);
        ok = v3.n == v.n;
        for (int i = 0; ok && i < v.n; i++) ok &= !strcmp(v.tok[i], v3.tok[i]);
        CHECK("vocab_deterministic", ok, "two builds differ");
        tfm_vocab_free(&v3);
        tfm_vocab_free(&v);
        tfm_parallel_text_free(&p);
    }
}

/* ---------------------------------------------------------------- corpora */
static void test_corpus(void) {
    tfm_parallel_text p;
    /* d2l's fra.txt: first pair "Go.\tVa !" -> ["go", "."] / ["va", "!"] */
    int rc = tfm_parallel_load_tsv(&p, DATA "fra-eng/fra.txt", TFM_TOK_D2L, 600);
    const char *s0[] = {"go", "."}, *t0[] = {"va", "!"}, *t1[] = {"cours", "!"};
    CHECK("fra_d2l_first_pairs", rc == 0 && p.n == 600 && toks_are(&p.src[0], s0, 2) && toks_are(&p.tgt[0], t0, 2) &&
                                     toks_are(&p.tgt[1], t1, 2), "rc=%d n=%d %s", rc, p.n, tfm_last_error());
    tfm_parallel_text_free(&p);

    const char *tsv = WRITE("c.tsv", "Hello .\tBonjour .\n\nno tab here\nx\ty\n");
    rc = tfm_parallel_load_tsv(&p, tsv, TFM_TOK_SPACE, 0);
    CHECK("tsv_no_tab_error", rc < 0 && has(tfm_last_error(), tsv) && has(tfm_last_error(), ":3:") &&
                                  has(tfm_last_error(), "tab") && !strchr(tfm_last_error(), '\n'), "%s", tfm_last_error());
    tsv = WRITE("d.tsv", "a b\tc d\n\n \t x\ny\t\t\ne\tf\textra\n");
    rc = tfm_parallel_load_tsv(&p, tsv, TFM_TOK_SPACE, 0);
    CHECK("tsv_empty_counted", rc == 0 && p.n == 2 && p.n_empty == 3 && p.n_lines == 5 && !strcmp(p.tgt[1].tok[0], "f") &&
                                   p.tgt[1].n == 1, "rc=%d n=%d empty=%d lines=%d", rc, p.n, p.n_empty, p.n_lines);
    tfm_parallel_text_free(&p);
    rc = tfm_parallel_load_tsv(&p, tsv, TFM_TOK_SPACE, 1);
    CHECK("tsv_num_examples", rc == 0 && p.n == 1, "n=%d", p.n);
    tfm_parallel_text_free(&p);
    tsv = WRITE("e.tsv", "a\tb\nc\td\xe9\n");
    rc = tfm_parallel_load_tsv(&p, tsv, TFM_TOK_SPACE, 0);
    CHECK("tsv_invalid_utf8_line", rc < 0 && has(tfm_last_error(), tsv) && has(tfm_last_error(), ":2:") &&
                                       has(tfm_last_error(), "UTF-8"), "%s", tfm_last_error());

    const char *a = WRITE("a.txt", "one\ntwo\nthree\n");
    const char *b = WRITE("b.txt", "un\ndeux\n");
    rc = tfm_parallel_load_files(&p, a, b, TFM_TOK_SPACE, 0);
    CHECK("files_line_count_mismatch", rc < 0 && has(tfm_last_error(), a) && has(tfm_last_error(), b) &&
                                           has(tfm_last_error(), " 3 ") && has(tfm_last_error(), " 2 "), "%s", tfm_last_error());
    b = WRITE("b2.txt", "un\n\ntrois\n");
    rc = tfm_parallel_load_files(&p, a, b, TFM_TOK_SPACE, 0);
    CHECK("files_empty_counted", rc == 0 && p.n == 2 && p.n_empty == 1, "rc=%d n=%d empty=%d", rc, p.n, p.n_empty);
    tfm_parallel_text_free(&p);
    b = WRITE("b3.txt", "un\n\xc3\x28\ntrois\n");
    rc = tfm_parallel_load_files(&p, a, b, TFM_TOK_SPACE, 0);
    CHECK("files_invalid_utf8_line", rc < 0 && has(tfm_last_error(), b) && has(tfm_last_error(), ":2:"), "%s",
          tfm_last_error());
    rc = tfm_parallel_load_files(&p, a, "/nonexistent/b", TFM_TOK_SPACE, 0);
    CHECK("files_missing", rc < 0 && has(tfm_last_error(), "/nonexistent/b"), "%s", tfm_last_error());

    /* real aligned files + ids */
    rc = tfm_parallel_load_files(&p, DATA "multi30k/val.de", DATA "multi30k/val.en", TFM_TOK_MOSES_LOWER, 0);
    CHECK("multi30k_val_load", rc == 0 && p.n == 1014 && p.n_empty == 0, "rc=%d n=%d %s", rc, p.n, tfm_last_error());
    if (rc == 0) {
        tfm_vocab sv, tv;
        tfm_vocab_build(&sv, p.src, p.n, 2);
        tfm_vocab_build(&tv, p.tgt, p.n, 2);
        tfm_parallel_ids ids;
        rc = tfm_parallel_encode(&p, &sv, &tv, &ids);
        int ok = rc == 0 && ids.n == p.n;
        for (int i = 0; ok && i < p.n; i++) {
            ok &= ids.src_off[i + 1] - ids.src_off[i] == p.src[i].n;
            for (int j = 0; ok && j < p.src[i].n; j++) {
                int id = ids.src_ids[ids.src_off[i] + j];
                ok &= id == TFM_UNK || !strcmp(sv.tok[id], p.src[i].tok[j]);
            }
        }
        CHECK("parallel_encode", ok, "mismatch");
        tfm_mt_corpus arr;
        rc = tfm_mt_corpus_build(&ids, 10, &arr);
        int trunc = 0;
        for (int i = 0; i < p.n; i++) trunc += p.src[i].n + 1 > 10;
        ok = rc == 0 && arr.n_truncated_src == trunc && trunc > 0;
        for (int i = 0; ok && i < p.n; i++) {
            int valid = 0;
            for (int j = 0; j < 10; j++) valid += arr.src[i * 10 + j] != TFM_PAD;
            ok &= valid == arr.src_valid[i];
        }
        CHECK("nmt_arrays_truncated_count", ok, "trunc %d vs %d", arr.n_truncated_src, trunc);
        tfm_mt_corpus_free(&arr);
        tfm_parallel_ids_free(&ids);
        tfm_vocab_free(&sv);
        tfm_vocab_free(&tv);
        tfm_parallel_text_free(&p);
    }
}

/* ---------------------------------------------------------------- batching */
static void test_batching(void) {
    int ids[3] = {5, 6, 7}, out[8], tr;
    int v = tfm_truncate_pad(ids, 3, 6, out, &tr);
    CHECK("truncate_pad_pad", v == 4 && out[3] == TFM_EOS && out[4] == TFM_PAD && out[5] == TFM_PAD && !tr, "v=%d", v);
    v = tfm_truncate_pad(ids, 3, 4, out, &tr);
    CHECK("truncate_pad_exact", v == 4 && out[3] == TFM_EOS && !tr, "v=%d tr=%d", v, tr);
    v = tfm_truncate_pad(ids, 3, 2, out, &tr);
    CHECK("truncate_pad_truncate_drops_eos", v == 2 && out[0] == 5 && out[1] == 6 && tr, "v=%d tr=%d", v, tr);
    v = tfm_truncate_pad(ids, 3, 3, out, &tr);
    CHECK("truncate_pad_eos_cut", v == 3 && out[2] == 7 && tr, "v=%d tr=%d", v, tr);

    enum { N = 103 };
    int len[N];
    for (int i = 0; i < N; i++) len[i] = (i * 37) % 50 + 1;
    tfm_batches b;
    tfm_batches_make(&b, N, 10, NULL, 0, NULL);
    int ok = b.n_batches == 11 && b.off[11] == N && b.off[10] == 100;
    for (int i = 0; i < N; i++) ok &= b.idx[i] == i;
    CHECK("batches_plain", ok, "wrong");
    tfm_batches_free(&b);

    tfm_rng r1, r2;
    tfm_rng_seed(&r1, 42);
    tfm_rng_seed(&r2, 42);
    tfm_batches b1, b2;
    tfm_batches_make(&b1, N, 10, len, 3, &r1);
    tfm_batches_make(&b2, N, 10, len, 3, &r2);
    int seen[N] = {0};
    ok = b1.n_batches == 11;
    for (int i = 0; i < N; i++) {
        ok &= b1.idx[i] == b2.idx[i];
        if (b1.idx[i] >= 0 && b1.idx[i] < N) seen[b1.idx[i]]++;
    }
    for (int i = 0; i < N; i++) ok &= seen[i] == 1;
    CHECK("batches_seeded_permutation", ok, "not a reproducible permutation");
    /* bucketing: the average length spread inside a batch is much smaller than without */
    double spread_b = 0, spread_r = 0;
    tfm_batches br;
    tfm_rng_seed(&r1, 42);
    tfm_batches_make(&br, N, 10, len, 0, &r1);
    for (int k = 0; k < b1.n_batches; k++) {
        int lo = 1 << 30, hi = -1, lo2 = 1 << 30, hi2 = -1;
        for (int i = b1.off[k]; i < b1.off[k + 1]; i++) {
            lo = len[b1.idx[i]] < lo ? len[b1.idx[i]] : lo;
            hi = len[b1.idx[i]] > hi ? len[b1.idx[i]] : hi;
        }
        for (int i = br.off[k]; i < br.off[k + 1]; i++) {
            lo2 = len[br.idx[i]] < lo2 ? len[br.idx[i]] : lo2;
            hi2 = len[br.idx[i]] > hi2 ? len[br.idx[i]] : hi2;
        }
        spread_b += hi - lo;
        spread_r += hi2 - lo2;
    }
    CHECK("batches_bucketing_groups_lengths", spread_b * 2 < spread_r, "spread %.0f vs %.0f", spread_b, spread_r);
    tfm_batches_free(&b1);
    tfm_batches_free(&b2);
    tfm_batches_free(&br);
    CHECK("batches_bad_args", tfm_batches_make(&b, 5, 0, NULL, 0, NULL) < 0, "accepted");
}

int main(void) {
    if (check_tmpdir(tmpdir, sizeof tmpdir, "test_text")) return 1;
    test_utf8();
    test_files();
    test_chars();
    test_tokenizers();
    test_vocab();
    test_corpus();
    test_batching();
    check_rm_tmpdir(tmpdir);
    CHECK_EXIT();
}
