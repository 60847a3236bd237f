/* BPE tokenizer tests: merge order and tie rule, byte fallback, '▁' handling under every normalizer
 * setting (SentencePiece's rules), empty lines, exact round trips, invalid UTF-8, determinism,
 * .model and container round trips, and every kind of bad model file. */
#include <stdlib.h>
#include <unistd.h>

#include "check.h"
#include "text/bpe_internal.h"
#include "tfm/bpe.h"
#include "tfm/core.h"
#include "tfm/text.h"

#define DATA "../shared/data/"
#define WS "\xe2\x96\x81"

static char tmpdir[256];

static const char *tmp_path(const char *name) {
    static char path[4][512];
    static int k = 0;
    char *p = path[k++ % 4];
    snprintf(p, 512, "%s/%s", tmpdir, name);
    return p;
}

static const char *write_tmp(const char *name, const void *data, size_t n) {
    const char *p = tmp_path(name);
    FILE *f = fopen(p, "wb");
    fwrite(data, 1, n, f);
    fclose(f);
    return p;
}

static int has(const char *s, const char *sub) { return s && strstr(s, sub) != NULL; }

static tfm_bpe_learn_opts opts(int vocab) {
    tfm_bpe_learn_opts o;
    tfm_bpe_learn_opts_default(&o);
    o.vocab_size = vocab;
    o.character_coverage = 1.0f;
    return o;
}

/* encode_pieces == want (and decode of it gives back `back`) */
static void check_enc(const char *name, const tfm_bpe *m, const char *text, const char *want, const char *back) {
    char *got = tfm_bpe_encode_pieces(m, text, strlen(text));
    CHECK(name, got && !strcmp(got, want), "'%s' -> '%s', want '%s'", text, got ? got : tfm_last_error(), want);
    if (!got || !back) {
        free(got);
        return;
    }
    /* split on spaces and decode */
    char *copy = strdup(got);
    const char *p[256];
    int n = 0;
    for (char *t = strtok(copy, " "); t && n < 256; t = strtok(NULL, " ")) p[n++] = t;
    char *dec = tfm_bpe_decode_pieces(m, p, n);
    char nm[128];
    snprintf(nm, sizeof nm, "%s_decode", name);
    CHECK(nm, dec && !strcmp(dec, back), "decode('%s') = '%s', want '%s'", got, dec ? dec : "(null)", back);
    free(dec);
    free(copy);
    free(got);
}

/* ---------------------------------------------------------------- learning */
static void test_merge_order(void) {
    /* Sennrich et al.'s example: low x5, lower x2, newest x6, widest x3 */
    const char *lines[16];
    int n = 0;
    for (int i = 0; i < 5; i++) lines[n++] = "low";
    for (int i = 0; i < 2; i++) lines[n++] = "lower";
    for (int i = 0; i < 6; i++) lines[n++] = "newest";
    for (int i = 0; i < 3; i++) lines[n++] = "widest";
    /* 11 characters; 10 merges. Counts: es 9, st 9 (tie: same length, "es" < "st"), then est 9;
     * lo/ow/▁l 7 ("lo" < "ow" < "▁l": '▁' is 0xE2), low 7 ("low" < "▁lo"), ▁low 7; then 6: "ew" <
     * "ne" < "▁n"; after it ▁n (2 chars) before new (3); ▁new, ▁newest; then 3: "id" first. */
    const char *want[10] = {"es", "est", "lo", "low", WS "low", "ew", WS "n", WS "new", WS "newest", "id"};
    tfm_bpe_learn_opts o = opts(260 + 11 + 10);
    tfm_bpe m;
    int rc = tfm_bpe_learn_lines(&m, lines, n, &o);
    CHECK("bpe_learn_small", rc == 0 && m.n == 281, "rc %d n %d: %s", rc, m.n, tfm_last_error());
    if (rc) return;
    int ok = 1;
    for (int i = 0; i < 10; i++) {
        if (strcmp(m.piece[260 + i], want[i]) || m.score[260 + i] != -(float)i) ok = 0;
        if (!ok) {
            printf("  merge %d: '%s' score %g, want '%s'\n", i, m.piece[260 + i], (double)m.score[260 + i], want[i]);
            break;
        }
    }
    CHECK("bpe_merge_order", ok, "merges differ from the hand-computed order");
    CHECK("bpe_layout", !strcmp(m.piece[0], "<pad>") && !strcmp(m.piece[1], "<s>") && !strcmp(m.piece[2], "</s>") &&
                            !strcmp(m.piece[3], "<unk>") && m.pad_id == 0 && m.bos_id == 1 && m.eos_id == 2 &&
                            m.unk_id == 3 && tfm_bpe_has_tfm_specials(&m) && !strcmp(m.piece[4], "<0x00>") && !strcmp(m.piece[259], "<0xFF>") &&
                            m.byte_id[0x41] == 4 + 0x41 && m.type[270] == TFM_PIECE_NORMAL && m.score[270] == -10.0f,
          "special / byte / character layout");
    /* characters by frequency: e 17, then w and '▁' 16 each (ties by code point) */
    CHECK("bpe_chars_by_frequency", !strcmp(m.piece[270], "e") && !strcmp(m.piece[271], "w") && !strcmp(m.piece[272], WS),
          "first characters '%s' '%s' '%s'", m.piece[270], m.piece[271], m.piece[272]);
    check_enc("bpe_encode_learned", &m, "lowest newer", WS "low est " WS "new e r", "lowest newer");
    tfm_bpe_free(&m);
}

static void test_classes(void) {
    const char *lines[4] = {"Sofa. Sofa. Sofa.", "a1 a1 a1 a1", "Sofa.", "x"};
    tfm_bpe_learn_opts o = opts(1000);
    tfm_bpe m;
    /* ask for too much, read how many pieces the text allows, learn exactly that many */
    int rc = tfm_bpe_learn_lines(&m, lines, 4, &o), most = 0;
    const char *at = strstr(tfm_last_error(), "yields at most ");
    CHECK("bpe_class_too_large", rc == -1 && at && sscanf(at, "yields at most %d", &most) == 1 && most > 268,
          "%s", rc ? tfm_last_error() : "learned");
    if (!rc) tfm_bpe_free(&m);
    o.vocab_size = most;
    rc = tfm_bpe_learn_lines(&m, lines, 4, &o);
    int mixed = 0, has_sofa = 0;
    for (int i = 260; !rc && i < m.n; i++) {
        if ((strchr(m.piece[i], '.') || strchr(m.piece[i], '1')) && strcspn(m.piece[i], ".1") != 0) mixed = 1;
        has_sofa |= !strcmp(m.piece[i], WS "Sofa");
    }
    CHECK("bpe_no_mixed_classes", rc == 0 && !mixed && has_sofa, "%s",
          rc ? tfm_last_error() : mixed ? "a piece mixes letters with . or 1" : "no piece for Sofa");
    if (!rc) tfm_bpe_free(&m);
}

static void test_learn_errors(void) {
    const char *lines[2] = {"abc def", "xyz"};
    tfm_bpe m;
    tfm_bpe_learn_opts o = opts(260 + 3);
    CHECK("bpe_vocab_below_alphabet", tfm_bpe_learn_lines(&m, lines, 2, &o) == -1 &&
                                          has(tfm_last_error(), "smaller than the 260 special and byte pieces + 10 characters"),
          "%s", tfm_last_error());
    o.vocab_size = 100;
    CHECK("bpe_vocab_below_specials", tfm_bpe_learn_lines(&m, lines, 2, &o) == -1 && has(tfm_last_error(), "smaller"),
          "%s", tfm_last_error());
    o.vocab_size = 2000000;
    CHECK("bpe_vocab_absurd", tfm_bpe_learn_lines(&m, lines, 2, &o) == -1 && has(tfm_last_error(), "too large (at most"),
          "%s", tfm_last_error());
    o.vocab_size = 5000;
    CHECK("bpe_vocab_beyond_text", tfm_bpe_learn_lines(&m, lines, 2, &o) == -1 && has(tfm_last_error(), "yields at most"),
          "%s", tfm_last_error());
    const char *empty[2] = {"", ""};
    o.vocab_size = 300;
    CHECK("bpe_learn_no_text", tfm_bpe_learn_lines(&m, empty, 2, &o) == -1 && has(tfm_last_error(), "empty"), "%s",
          tfm_last_error());
    /* invalid UTF-8 in a file: named with its line */
    const char *bad = write_tmp("bad.txt", "fine\nalso fine\nbad \xc3\x28 byte\n", 27);
    o.vocab_size = 300;
    char want[600];
    snprintf(want, sizeof want, "%s:3: invalid UTF-8", bad);
    CHECK("bpe_learn_invalid_utf8", tfm_bpe_learn_files(&m, &bad, 1, &o) == -1 && has(tfm_last_error(), want), "%s",
          tfm_last_error());
    const char *missing = tmp_path("missing.txt");
    CHECK("bpe_learn_missing_file", tfm_bpe_learn_files(&m, &missing, 1, &o) == -1 && has(tfm_last_error(), "missing.txt"),
          "%s", tfm_last_error());
}

/* Multi30k: deterministic, exact round trip, and a sane vocabulary */
static void test_multi30k(void) {
    const char *files[2] = {DATA "multi30k/train.de", DATA "multi30k/train.en"};
    if (access(files[0], R_OK) || access(files[1], R_OK)) {
        printf("SKIP bpe_multi30k: %s not found\n", files[0]);
        return;
    }
    tfm_bpe_learn_opts o = opts(4000);
    o.character_coverage = 0.9995f;
    tfm_bpe a, b;
    int ra = tfm_bpe_learn_files(&a, files, 2, &o), rb = tfm_bpe_learn_files(&b, files, 2, &o);
    CHECK("bpe_learn_multi30k", ra == 0 && rb == 0 && a.n == 4000, "%s", tfm_last_error());
    if (ra || rb) return;
    CHECK("bpe_deterministic", a.proto_len == b.proto_len && !memcmp(a.proto, b.proto, a.proto_len),
          "two runs gave different models");
    size_t len;
    char *buf = tfm_read_text_file(DATA "multi30k/val.de", &len);
    int n_lines, bad = -1, n_unk = 0;
    char **lines = buf ? tfm_split_lines(buf, len, &n_lines) : NULL;
    for (int i = 0; lines && i < n_lines && bad < 0; i++) {
        int n;
        int *ids = tfm_bpe_encode(&a, lines[i], strlen(lines[i]), &n);
        char *dec = ids ? tfm_bpe_decode(&a, ids, n) : NULL;
        if (!dec || strcmp(dec, lines[i])) bad = i;
        for (int k = 0; ids && k < n; k++) n_unk += ids[k] == a.unk_id;
        free(ids);
        free(dec);
    }
    CHECK("bpe_roundtrip_val_de", lines && bad < 0, "line %d differs", bad + 1);
    CHECK("bpe_no_unk_val_de", n_unk == 0, "%d <unk>", n_unk);
    free(lines);
    free(buf);
    tfm_bpe_free(&a);
    tfm_bpe_free(&b);
}

/* ---------------------------------------------------------------- encoding rules */
/* A model whose pieces are the given strings (plus <unk>, optional bytes), score -rank. */
static int make_model(tfm_bpe *m, const char *const *pieces, int n, int byte_fallback, int dummy, int remove_extra) {
    const char *p[600];
    float score[600];
    unsigned char type[600];
    char bytes[256][8];
    int k = 0;
    p[k] = "<unk>", score[k] = 0, type[k++] = TFM_PIECE_UNKNOWN;
    p[k] = "<s>", score[k] = 0, type[k++] = TFM_PIECE_CONTROL;
    if (byte_fallback)
        for (int b = 0; b < 256; b++) {
            snprintf(bytes[b], 8, "<0x%02X>", b);
            p[k] = bytes[b], score[k] = 0, type[k++] = TFM_PIECE_BYTE;
        }
    for (int i = 0; i < n; i++) p[k] = pieces[i], score[k] = -(float)i, type[k++] = TFM_PIECE_NORMAL;
    bpe_proto_spec s = {k, p, score, type, k, 0, 1, -1, -1, byte_fallback, 16, 1.0f, dummy, remove_extra, 0};
    size_t len;
    unsigned char *proto = bpe_proto_write(&s, &len);
    int rc = tfm_bpe_from_bytes(m, proto, len, "test model");
    free(proto);
    return rc;
}

static void test_whitespace(void) {
    const char *chars[3] = {WS, "a", "b"};
    tfm_bpe m;
    /* SentencePiece's default: remove_extra_whitespaces + add_dummy_prefix */
    if (make_model(&m, chars, 3, 0, 1, 1)) {
        CHECK("bpe_make_model", 0, "%s", tfm_last_error());
        return;
    }
    check_enc("bpe_ws_collapse", &m, "  a  b ", WS " a " WS " b", "a b");
    check_enc("bpe_ws_only_spaces", &m, "   ", "", "");
    check_enc("bpe_ws_empty", &m, "", "", "");
    check_enc("bpe_ws_leading_trailing", &m, " a ", WS " a", "a");
    tfm_bpe_free(&m);
    /* every space kept (tfm's models) */
    make_model(&m, chars, 3, 0, 1, 0);
    check_enc("bpe_ws_keep", &m, "  a  b ", WS " " WS " " WS " a " WS " " WS " b " WS, "  a  b ");
    check_enc("bpe_ws_keep_only_spaces", &m, "   ", WS " " WS " " WS " " WS, "   ");
    check_enc("bpe_ws_keep_empty", &m, "", "", "");
    tfm_bpe_free(&m);
    /* no dummy prefix */
    make_model(&m, chars, 3, 0, 0, 1);
    check_enc("bpe_ws_no_dummy", &m, " a b", "a " WS " b", "a b");
    tfm_bpe_free(&m);
    /* unknown characters without byte fallback: one piece per run, printed as its text; id <unk> */
    make_model(&m, chars, 3, 0, 1, 0);
    check_enc("bpe_unk_run", &m, "axyb", WS " a xy b", NULL);
    int n;
    int *ids = tfm_bpe_encode(&m, "axyb", 4, &n);
    CHECK("bpe_unk_run_ids", ids && n == 4 && ids[2] == m.unk_id, "n %d", n);
    free(ids);
    const char *unk[2] = {"<unk>", "a"};
    char *d = tfm_bpe_decode_pieces(&m, unk, 2);
    CHECK("bpe_decode_unk_surface", d && !strcmp(d, " \xe2\x81\x87 a"), "'%s'", d);
    free(d);
    tfm_bpe_free(&m);
}

static void test_merges_and_bytes(void) {
    /* scores: "ab" merges before "bc"; leftmost wins among equal scores */
    const char *p[6] = {WS, "a", "b", "c", "ab", "bc"};
    tfm_bpe m;
    make_model(&m, p, 6, 1, 1, 0);
    /* pieces get scores by position: "ab" (-4) beats "bc" (-5): "abc" -> ab c */
    check_enc("bpe_merge_by_score", &m, "abc", WS " ab c", "abc");
    check_enc("bpe_merge_leftmost", &m, "abab", WS " ab ab", "abab");
    /* byte fallback: '€' (E2 82 AC) and a 4-byte emoji are bytes; decoded back exactly */
    check_enc("bpe_byte_fallback", &m, "a\xe2\x82\xac", WS " a <0xE2> <0x82> <0xAC>", "a\xe2\x82\xac");
    check_enc("bpe_byte_fallback_emoji", &m, "\xf0\x9f\x98\x80", WS " <0xF0> <0x9F> <0x98> <0x80>", "\xf0\x9f\x98\x80");
    int n;
    int *ids = tfm_bpe_encode(&m, "x", 1, &n);
    CHECK("bpe_byte_ids", ids && n == 2 && ids[1] == m.byte_id['x'] && ids[1] == 2 + 'x', "n %d", n);
    free(ids);
    /* an invalid byte sequence among byte pieces decodes to U+FFFD */
    const char *bp[3] = {"<0xE2>", "<0x82>", "a"};
    char *d = tfm_bpe_decode_pieces(&m, bp, 3);
    CHECK("bpe_decode_invalid_bytes", d && !strcmp(d, "\xef\xbf\xbd\xef\xbf\xbd" "a"), "'%s'", d);
    free(d);
    /* control pieces decode to nothing; ids out of range are refused */
    int cid[3] = {1, m.byte_id['h'], m.byte_id['i']};
    d = tfm_bpe_decode(&m, cid, 3);
    CHECK("bpe_decode_control", d && !strcmp(d, "hi"), "'%s'", d);
    free(d);
    int bad[1] = {m.n};
    CHECK("bpe_decode_bad_id", !tfm_bpe_decode(&m, bad, 1) && has(tfm_last_error(), "out of range"), "%s", tfm_last_error());
    CHECK("bpe_encode_invalid_utf8", !tfm_bpe_encode_pieces(&m, "a\xff", 2) && has(tfm_last_error(), "invalid UTF-8"),
          "%s", tfm_last_error());
    tfm_bpe_free(&m);
}

static void test_roundtrip_tricky(void) {
    const char *lines[3] = {"hello world", "the cat sat", "hello cat"};
    tfm_bpe_learn_opts o = opts(285);
    tfm_bpe m;
    if (tfm_bpe_learn_lines(&m, lines, 3, &o)) {
        CHECK("bpe_learn_tricky", 0, "%s", tfm_last_error());
        return;
    }
    const char *tricky[] = {"", " ", "   ", " hello ", "hello  world", "\thello\t", "a\xe2\x96\x81" "b",
                            WS, " " WS " ", "Grüße, 世界! \xf0\x9f\x98\x80", "\r", "x\r"};
    int ok = 1;
    for (size_t i = 0; i < sizeof tricky / sizeof tricky[0]; i++) {
        int n;
        int *ids = tfm_bpe_encode(&m, tricky[i], strlen(tricky[i]), &n);
        char *d = ids ? tfm_bpe_decode(&m, ids, n) : NULL;
        int unk = 0;
        for (int k = 0; ids && k < n; k++) unk |= ids[k] == m.unk_id;
        if (!d || strcmp(d, tricky[i]) || unk) {
            printf("  '%s' -> '%s'%s\n", tricky[i], d ? d : "(null)", unk ? " (has <unk>)" : "");
            ok = 0;
        }
        free(ids);
        free(d);
    }
    CHECK("bpe_roundtrip_tricky", ok, "decode(encode(x)) != x or <unk> produced");
    tfm_bpe_free(&m);
}

/* ---------------------------------------------------------------- files */
static void test_files(void) {
    const char *lines[3] = {"hello world", "the cat sat", "hello cat"};
    tfm_bpe_learn_opts o = opts(285);
    tfm_bpe m, l, c2;
    if (tfm_bpe_learn_lines(&m, lines, 3, &o)) {
        CHECK("bpe_learn_files_model", 0, "%s", tfm_last_error());
        return;
    }
    const char *path = tmp_path("m.model");
    int rc = tfm_bpe_save(&m, path);
    int rl = rc ? -1 : tfm_bpe_load(&l, path);
    CHECK("bpe_save_load", rc == 0 && rl == 0 && l.n == m.n && l.proto_len == m.proto_len &&
                               !memcmp(l.proto, m.proto, m.proto_len) && l.literal_ws_bytes == 1 &&
                               l.remove_extra_whitespaces == 0 && l.add_dummy_prefix == 1,
          "%s", tfm_last_error());
    if (!rl) tfm_bpe_free(&l);
    /* inside a container, next to other entries; tfm_bpe_load also reads the checkpoint */
    tfm_container c;
    tfm_container_init(&c);
    tfm_container_add_int(&c, "config.x", 7);
    tfm_bpe_to_container(&m, &c, NULL);
    const char *cpath = tmp_path("ck.tfm");
    rc = tfm_container_save(&c, cpath);
    tfm_container_free(&c);
    rl = rc ? -1 : tfm_bpe_load(&c2, cpath);
    char *e1 = tfm_bpe_encode_pieces(&m, "hello cat", 9), *e2 = rl ? NULL : tfm_bpe_encode_pieces(&c2, "hello cat", 9);
    CHECK("bpe_container_roundtrip", rl == 0 && e1 && e2 && !strcmp(e1, e2) && c2.proto_len == m.proto_len, "%s",
          tfm_last_error());
    free(e1);
    free(e2);
    if (!rl) tfm_bpe_free(&c2);
    tfm_container_init(&c);
    tfm_container_add_int(&c, "config.x", 7);
    CHECK("bpe_container_missing", tfm_bpe_from_container(&l, &c, NULL) == -1 && has(tfm_last_error(), "tokenizer.bpe"),
          "%s", tfm_last_error());
    tfm_container_free(&c);

    /* bad files: each refused with the file named */
    char want[600];
    const char *trunc = write_tmp("trunc.model", m.proto, m.proto_len / 2);
    snprintf(want, sizeof want, "%s: not a valid SentencePiece model", trunc);
    CHECK("bpe_load_truncated", tfm_bpe_load(&l, trunc) == -1 && has(tfm_last_error(), want), "%s", tfm_last_error());
    const char *text = write_tmp("foreign.model", "just some text\nin a file\n", 25);
    CHECK("bpe_load_foreign_text", tfm_bpe_load(&l, text) == -1 && has(tfm_last_error(), text), "%s", tfm_last_error());
    unsigned char junk[64];
    for (int i = 0; i < 64; i++) junk[i] = (unsigned char)(i * 37 + 11);
    const char *jp = write_tmp("junk.model", junk, 64);
    CHECK("bpe_load_foreign_binary", tfm_bpe_load(&l, jp) == -1 && has(tfm_last_error(), jp), "%s", tfm_last_error());
    const char *ep = write_tmp("empty.model", "", 0);
    CHECK("bpe_load_empty", tfm_bpe_load(&l, ep) == -1 && has(tfm_last_error(), "empty"), "%s", tfm_last_error());
    CHECK("bpe_load_missing", tfm_bpe_load(&l, tmp_path("nope.model")) == -1 && has(tfm_last_error(), "nope.model"),
          "%s", tfm_last_error());
    /* cut anywhere: refused without a crash (only a cut between the trainer and normalizer specs
     * still holds a complete model) */
    int cuts = 0, refused = 0;
    for (size_t cut = 0; cut < m.proto_len; cut += 3, cuts++) {
        if (tfm_bpe_from_bytes(&l, m.proto, cut, "cut") == 0) tfm_bpe_free(&l);
        else refused++;
    }
    CHECK("bpe_load_every_cut", refused >= cuts - 2, "refused %d of %d cuts", refused, cuts);
    tfm_bpe_free(&m);
}

/* hand-made ModelProto variants */
static void pb_varint(bpe_buf *b, uint64_t v) {
    do {
        unsigned char c = (unsigned char)(v & 0x7f);
        v >>= 7;
        if (v) c |= 0x80;
        bpe_buf_put(b, &c, 1);
    } while (v);
}
static void pb_bytes(bpe_buf *b, int field, const void *s, size_t n) {
    pb_varint(b, (uint64_t)field << 3 | 2);
    pb_varint(b, n);
    bpe_buf_put(b, s, n);
}
static void pb_int(bpe_buf *b, int field, int v) {
    pb_varint(b, (uint64_t)field << 3);
    pb_varint(b, (uint64_t)(int64_t)v);
}

static int load_variant(tfm_bpe *m, int model_type, const char *rule, int charsmap, int unk) {
    bpe_buf out = {0}, sub = {0};
    const char *pieces[3] = {"<unk>", "a", "b"};
    for (int i = 0; i < 3; i++) {
        sub.n = 0;
        pb_bytes(&sub, 1, pieces[i], strlen(pieces[i]));
        pb_int(&sub, 3, i == 0 && unk ? TFM_PIECE_UNKNOWN : TFM_PIECE_NORMAL);
        pb_bytes(&out, 1, sub.p, sub.n);
    }
    sub.n = 0;
    if (model_type) pb_int(&sub, 3, model_type);
    pb_bytes(&out, 2, sub.p, sub.n);
    sub.n = 0;
    if (rule) pb_bytes(&sub, 1, rule, strlen(rule));
    if (charsmap) pb_bytes(&sub, 2, "\x04\x00\x00\x00" "abcdefgh", 12);
    pb_bytes(&out, 3, sub.p, sub.n);
    int rc = tfm_bpe_from_bytes(m, out.p, out.n, "variant.model");
    free(out.p);
    free(sub.p);
    return rc;
}

static void test_model_variants(void) {
    tfm_bpe m;
    int rc = load_variant(&m, 2, "identity", 0, 1);
    CHECK("bpe_variant_ok", rc == 0 && m.n == 3 && m.unk_id == 0 && m.remove_extra_whitespaces == 1 && !m.byte_fallback &&
                                !tfm_bpe_has_tfm_specials(&m),
          "%s", tfm_last_error());
    if (!rc) {
        check_enc("bpe_variant_encode", &m, " ab  a", WS " a b " WS " a", NULL);   /* '▁' is <unk>, printed as text */
        tfm_bpe_free(&m);
    }
    rc = load_variant(&m, 0, "identity", 0, 1);   /* no model_type: unigram, SentencePiece's default */
    CHECK("bpe_variant_unigram", rc == 0 && m.model_type == TFM_SP_UNIGRAM, "%s", rc ? tfm_last_error() : "not unigram");
    if (!rc) {
        check_enc("bpe_variant_unigram_encode", &m, " ab  a", WS " a b " WS " a", NULL);   /* '▁' is <unk> */
        tfm_bpe_free(&m);
    }
    CHECK("bpe_variant_word", load_variant(&m, 3, "identity", 0, 1) == -1 &&
                                  has(tfm_last_error(), "variant.model: a SentencePiece word model; only BPE and unigram"),
          "%s", tfm_last_error());
    /* a charsmap of one trie unit that matches nothing: nmt_nfkc then changes no text */
    rc = load_variant(&m, 2, "nmt_nfkc", 1, 1);
    CHECK("bpe_variant_nfkc", rc == 0 && m.norm_trie_n == 1 && m.norm_strings_len == 4, "%s", rc ? tfm_last_error() : "charsmap");
    if (!rc) {
        check_enc("bpe_variant_nfkc_encode", &m, " ab  a", WS " a b " WS " a", NULL);
        tfm_bpe_free(&m);
    }
    CHECK("bpe_variant_nfkc_cf", load_variant(&m, 2, "nmt_nfkc_cf", 1, 1) == -1 &&
                                     has(tfm_last_error(), "normalization rule 'nmt_nfkc_cf' is not supported"),
          "%s", tfm_last_error());
    CHECK("bpe_variant_no_unk", load_variant(&m, 2, "identity", 0, 0) == -1 && has(tfm_last_error(), "no unknown piece"),
          "%s", tfm_last_error());
}

/* The accessors bindings use (tfm_bpe_new ... tfm_bpe_delete): the same answers as the struct's fields. */
static void test_accessors(void) {
    const char *lines[] = {"low lower lowest", "newer wider"};
    tfm_bpe_learn_opts o = opts(280);
    tfm_bpe *m = tfm_bpe_new();
    CHECK("tfm_bpe_new", m && tfm_bpe_size(m) == 0, "%p", (void *)m);
    if (!m) return;
    CHECK("tfm_bpe_learn_lines into tfm_bpe_new", tfm_bpe_learn_lines(m, lines, 2, &o) == 0, "%s", tfm_last_error());
    int n = tfm_bpe_size(m), ok = n == m->n && n > 260;
    for (int i = 0; ok && i < n; i++) {
        size_t len = 0;
        const char *p = tfm_bpe_piece(m, i, &len);
        ok = p == m->piece[i] && len == (size_t)m->len[i] && tfm_bpe_piece_id(m, p, len) == i;
    }
    CHECK("tfm_bpe_size and tfm_bpe_piece equal the fields, piece_id inverts them", ok, "n %d", n);
    CHECK("tfm_bpe_piece outside 0..n-1 is NULL", !tfm_bpe_piece(m, -1, NULL) && !tfm_bpe_piece(m, n, NULL), "n %d", n);
    CHECK("tfm_bpe_pad/bos/eos/unk_id", tfm_bpe_pad_id(m) == 0 && tfm_bpe_bos_id(m) == 1 && tfm_bpe_eos_id(m) == 2 &&
          tfm_bpe_unk_id(m) == 3, "%d %d %d %d", tfm_bpe_pad_id(m), tfm_bpe_bos_id(m), tfm_bpe_eos_id(m),
          tfm_bpe_unk_id(m));
    tfm_bpe_delete(m);
    tfm_bpe_delete(NULL);
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/tfm_test_bpe_%d", (int)getpid());
    char cmd[300];
    snprintf(cmd, sizeof cmd, "mkdir -p %s", tmpdir);
    if (system(cmd)) return 1;
    test_merge_order();
    test_classes();
    test_learn_errors();
    test_whitespace();
    test_merges_and_bytes();
    test_roundtrip_tricky();
    test_files();
    test_model_variants();
    test_multi30k();
    test_accessors();
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    if (system(cmd)) return 1;
    CHECK_EXIT();
}
