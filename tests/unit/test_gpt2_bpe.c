/* GPT-2 byte-level BPE and token maps through the library API (tests/cli/gpt2_bpe.sh compares whole files
 * with the reference): known ids, the pre-tokenizer's pieces, the byte tokens, WHATWG decoding of split
 * characters, the cache (same ids cold and warm), and bad encoder.json / merges contents.
 *   test_gpt2_bpe --classes   prints the regex classes' ranges as tests/node/regex_classes.js does */
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "check.h"
#include "text/unicode_classes.h"
#include "tfm/core.h"
#include "tfm/tokenizers.h"

#define G "tests/fixtures/gpt2/"

static int print_classes(void) {
    int (*fn[3])(uint32_t) = {tfm_uc_letter, tfm_uc_number, tfm_uc_js_space};
    const char *name[3] = {"letter", "number", "space"};
    int major = atoi(tfm_unicode_classes_version);
    const char *dot = tfm_unicode_classes_version;
    while (*dot && *dot != '.') dot++;
    printf("unicode %d.%d\n", major, *dot ? atoi(dot + 1) : 0);
    for (int k = 0; k < 3; k++) {
        printf("%s", name[k]);
        long lo = -1;
        for (uint32_t cp = 0; cp <= 0x110000; cp++) {
            int hit = cp <= 0x10FFFF && (cp < 0xD800 || cp > 0xDFFF) && fn[k](cp);
            if (hit && lo < 0) lo = cp;
            if (!hit && lo >= 0) {
                printf(" %lx-%x", lo, cp - 1);
                lo = -1;
            }
        }
        printf("\n");
    }
    return 0;
}

static int ids_equal(const int *a, int na, const int *b, int nb) {
    if (na != nb) return 0;
    for (int i = 0; i < na; i++)
        if (a[i] != b[i]) return 0;
    return 1;
}

static void check_encode(tfm_gpt2_bpe *t, const char *name, const char *text, const int *want, int n_want) {
    int n = -1;
    int *ids = tfm_gpt2_bpe_encode(t, text, strlen(text), &n);
    CHECK(name, ids && ids_equal(ids, n, want, n_want), "got %d ids (first %d), want %d", n, ids && n > 0 ? ids[0] : -1, n_want);
    free(ids);
}

static void check_decode_text(tfm_gpt2_bpe *t, const char *name, const int *ids, int n, const char *want) {
    size_t len = 0;
    char *s = tfm_gpt2_bpe_decode_text(t, ids, n, &len);
    CHECK(name, s && len == strlen(want) && !memcmp(s, want, len), "got '%s'", s ? s : tfm_last_error());
    free(s);
}

static int load_error(const char *json, const char *merges, const char *want) {
    char dir[] = "/tmp/tfm_gpt2_XXXXXX";
    if (!mkdtemp(dir)) return 0;
    char vp[64], mp[64];
    snprintf(vp, sizeof vp, "%s/encoder.json", dir);
    snprintf(mp, sizeof mp, "%s/vocab.bpe", dir);
    FILE *f = fopen(vp, "wb");
    fputs(json, f);
    fclose(f);
    f = fopen(mp, "wb");
    fputs(merges, f);
    fclose(f);
    tfm_gpt2_bpe *t = tfm_gpt2_bpe_load(vp);
    int ok = !t && strstr(tfm_last_error(), want) && !strchr(tfm_last_error(), '\n');
    if (!ok) printf("  (error was: %s)\n", t ? "none" : tfm_last_error());
    tfm_gpt2_bpe_free(t);
    unlink(vp);
    unlink(mp);
    rmdir(dir);
    return ok;
}

static void test_token_map(void) {
    tfm_token_map m;
    const char *j = "{\"a\": 0, \"\\u0120b\":2 , \"\\ud83d\\ude00\": 1, \"q\\\"\\\\\\/\\n\": 3}";
    int rc = tfm_token_map_parse(&m, j, strlen(j), "t.json");
    CHECK("token_map_escapes", !rc && m.n == 4 && tfm_token_map_id(&m, "\xc4\xa0" "b", 3) == 2 &&
          tfm_token_map_id(&m, "\xf0\x9f\x98\x80", 4) == 1 && tfm_token_map_id(&m, "q\"\\/\n", 5) == 3 &&
          !strcmp(tfm_token_map_token(&m, 0), "a") && tfm_token_map_token(&m, 4) == NULL,
          "rc %d n %d: %s", rc, m.n, rc ? tfm_last_error() : "");
    if (!rc) tfm_token_map_free(&m);
    struct { const char *json, *err; } bad[] = {
        {"{\"a\": 0, \"a\": 1}", "token 'a' appears twice"},
        {"{\"a\": 0, \"b\": 0}", "id 0 is given to two tokens"},
        {"{\"a\": -1}", "negative id"},
        {"{\"a\": 1.5}", "expected an integer id"},
        {"{\"a\": 99999999}", "id above 16777215"},
        {"{\"a\": 5000}", "ids must be dense"},
        {"{\"\\ud800\": 0}", "high surrogate without its low half"},
        {"{\"\\udc00\": 0}", "lone low surrogate"},
        {"{\"\\u0000\": 0}", "NUL character"},
        {"{\"\": 0}", "empty token"},
        {"{\"\xc3\x28\": 0}", "not valid UTF-8"},
        {"{\"a\" 0}", "expected ':'"},
        {"{\"a\": 0", "expected ',' or '}'"},
        {"{\"a\": 0} x", "unexpected data after the object"},
        {"[1]", "expected '{'"},
        {"{}", "no tokens"},
        {"{\"a\": 0, \"b", "string not closed"},
        {"{\"\\x\": 0}", "unknown escape"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char name[64];
        snprintf(name, sizeof name, "token_map_bad_%zu", i);
        rc = tfm_token_map_parse(&m, bad[i].json, strlen(bad[i].json), "t.json");
        CHECK(name, rc && strstr(tfm_last_error(), bad[i].err) && !strncmp(tfm_last_error(), "t.json: ", 8),
              "'%s': %s", bad[i].json, rc ? tfm_last_error() : "accepted");
        if (!rc) tfm_token_map_free(&m);
    }
}

/* tfm_bpe_map_to_vocab on a committed unigram model: strict by default, <unk> on request */
static void test_vocab_map(void) {
    tfm_bpe m;
    if (tfm_bpe_load(&m, "tests/fixtures/unigram/m30k_identity.model")) {
        CHECK("vocab_map_model", 0, "%s", tfm_last_error());
        return;
    }
    /* vocab.json of every piece but "▁the" (which is not control), ids reversed, "<unk>" kept */
    size_t cap = 64 + (size_t)m.n * 40, k = 0;
    char *json = malloc(cap);
    int the = tfm_bpe_piece_id(&m, "\xe2\x96\x81the", 6);
    json[k++] = '{';
    for (int i = 0; i < m.n; i++) {
        if (i == the) continue;
        k += (size_t)snprintf(json + k, cap - k, "%s\"", k > 1 ? ", " : "");
        for (const char *c = m.piece[i]; *c; c++) {   /* JSON-escape " and \ */
            if (*c == '"' || *c == '\\') json[k++] = '\\';
            json[k++] = *c;
        }
        k += (size_t)snprintf(json + k, cap - k, "\": %d", m.n - 1 - i);
    }
    json[k++] = '}';
    tfm_token_map v;
    int rc = tfm_token_map_parse(&v, json, k, "vocab.json");
    CHECK("vocab_map_parse", rc == 0 && the > 0 && m.type[the] == TFM_PIECE_NORMAL, "%s", tfm_last_error());
    if (!rc) {
        int *strict = tfm_bpe_map_to_vocab(&m, &v, 0, "m.model", "vocab.json");
        CHECK("vocab_map_strict_missing", !strict && strstr(tfm_last_error(), "vocab.json: piece '\xe2\x96\x81the' (id") &&
                                              strstr(tfm_last_error(), "of m.model) is missing"), "%s", tfm_last_error());
        free(strict);
        int *lax = tfm_bpe_map_to_vocab(&m, &v, 1, "m.model", "vocab.json");
        int unk = tfm_token_map_id(&v, "<unk>", 5);
        CHECK("vocab_map_missing_to_unk", lax && unk >= 0 && lax[the] == unk && lax[the + 1] == m.n - 2 - the,
              "%s", lax ? "wrong ids" : tfm_last_error());
        free(lax);
        tfm_token_map_free(&v);
    }
    free(json);
    tfm_bpe_free(&m);
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "--classes")) return print_classes();
    test_token_map();
    test_vocab_map();
    tfm_gpt2_bpe *t = tfm_gpt2_bpe_load(G "encoder.json");
    CHECK("gpt2_load", t != NULL, "%s", tfm_last_error());
    if (!t) CHECK_EXIT();
    CHECK("gpt2_n_vocab", tfm_gpt2_bpe_n_vocab(t) == 50257, "%d", tfm_gpt2_bpe_n_vocab(t));
    CHECK("gpt2_endoftext_id", tfm_gpt2_bpe_id(t, "<|endoftext|>") == 50256, "%d", tfm_gpt2_bpe_id(t, "<|endoftext|>"));
    size_t n;
    const unsigned char *b = tfm_gpt2_bpe_token_bytes(t, 198, &n);
    CHECK("gpt2_token_bytes_newline", b && n == 1 && b[0] == '\n', "id 198");
    b = tfm_gpt2_bpe_token_bytes(t, 995, &n);
    CHECK("gpt2_token_bytes_space_world", b && n == 6 && !memcmp(b, " world", 6), "id 995");
    CHECK("gpt2_token_string", !strcmp(tfm_gpt2_bpe_token(t, 995), "\xc4\xa0world"), "%s", tfm_gpt2_bpe_token(t, 995));
    CHECK("gpt2_token_bytes_range", !tfm_gpt2_bpe_token_bytes(t, 50257, &n) && !tfm_gpt2_bpe_token_bytes(t, -1, &n), "ids out of range have bytes");

    /* ids from gpt-3-encoder (tests/fixtures/gpt2/hand_cases.ids) */
    int hello[] = {15496, 995};
    check_encode(t, "gpt2_encode_hello_world", "Hello world", hello, 2);
    int cold_n, warm_n;
    const char *txt = "I'm sure they've   seen 1234 \xf0\x9f\x98\x80 caf\xc3\xa9s\n\n";
    int *cold = tfm_gpt2_bpe_encode(t, txt, strlen(txt), &cold_n);
    int *warm = tfm_gpt2_bpe_encode(t, txt, strlen(txt), &warm_n);
    CHECK("gpt2_cache_same_ids", cold && warm && ids_equal(cold, cold_n, warm, warm_n), "cold %d warm %d", cold_n, warm_n);
    size_t len;
    char *back = cold ? tfm_gpt2_bpe_decode(t, cold, cold_n, &len) : NULL;
    CHECK("gpt2_roundtrip", back && len == strlen(txt) && !memcmp(back, txt, len), "%s", back ? back : "");
    free(back);
    free(cold);
    free(warm);
    int empty_n = -1;
    int *empty = tfm_gpt2_bpe_encode(t, "", 0, &empty_n);
    CHECK("gpt2_empty", empty && empty_n == 0, "n %d", empty_n);
    free(empty);
    CHECK("gpt2_invalid_utf8", !tfm_gpt2_bpe_encode(t, "a\xc3(", 3, &empty_n) && strstr(tfm_last_error(), "invalid UTF-8"),
          "%s", tfm_last_error());

    /* the pieces of the regex */
    const char *s = "Hello  world's\t\tend  ";
    size_t np;
    size_t *sp = tfm_gpt2_pretokenize(s, strlen(s), &np);
    /* two tabs before a letter: \s+(?!\S) takes the first, \s+ the second */
    const char *want[] = {"Hello", " ", " world", "'s", "\t", "\t", "end", "  "};
    int ok = sp && np == 8;
    for (size_t i = 0; ok && i < np; i++)
        ok = sp[2 * i + 1] - sp[2 * i] == strlen(want[i]) && !memcmp(s + sp[2 * i], want[i], strlen(want[i]));
    CHECK("gpt2_pretokenize_pieces", ok, "%zu pieces", np);
    free(sp);

    /* decode as TextDecoder: id 12520 is " " + F0 9F (a space and the start of an emoji) */
    size_t n1, n2;
    const unsigned char *p1 = tfm_gpt2_bpe_token_bytes(t, 12520, &n1), *p2 = tfm_gpt2_bpe_token_bytes(t, 11, &n2);
    CHECK("gpt2_partial_token", p1 && n1 == 3 && !memcmp(p1, " \xf0\x9f", 3) && p2 && n2 == 1 && p2[0] == ',', "%zu", n1);
    int partial[] = {12520, 11};   /* F0 9F then ',': one U+FFFD for the maximal subpart, then ',' */
    check_decode_text(t, "gpt2_decode_maximal_subpart", partial, 2, " \xef\xbf\xbd,");
    int range[] = {15496, 50257};
    CHECK("gpt2_decode_range", !tfm_gpt2_bpe_decode(t, range, 2, &len) && strstr(tfm_last_error(), "id 50257 is not a token"),
          "%s", tfm_last_error());
    tfm_gpt2_bpe_free(t);

    /* bad merges (a one-byte-token vocabulary: the 256 byte characters + merges) */
    CHECK("gpt2_missing_bytes", load_error("{\"a\": 0}", "#version: 0.2\n", "of byte 0x00 is missing"), "wrong error");
    CHECK("gpt2_missing_file", !tfm_gpt2_bpe_load("/nonexistent/encoder.json") && strstr(tfm_last_error(), "no encoder.json or vocab.json"),
          "%s", tfm_last_error());
    CHECK_EXIT();
}
