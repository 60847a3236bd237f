/* safetensors interchange: the strict JSON parser, export -> import -> export round trips of every model
 * kind (bit for bit), every bad-input case of the reader (one-line error naming the file and the tensor,
 * nothing written), and the import of files written by the PyTorch twins (tests/fixtures/twin_*.safetensors,
 * made by scripts/safetensors_check.py) reproducing the twins' logits.
 *
 * Tool mode for scripts/safetensors_check.py:
 *   test_safetensors --logits MODEL.tfm IN.tfm OUT.tfm
 * IN holds x (B,T) for a GPT, or src (B,Ts), src_valid (B), tgt_in (B,Tt) for a translator; OUT gets the
 * logits of tfm's forward (inference mode). */
#include "check.h"
#include "core/json.h"
#include "tfm/interchange.h"
#include "tfm/safetensors.h"
#include "tfm/train.h"
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static char tmpdir[256];

static const char *tmp(const char *name) {
    static char buf[8][512];
    static int k;
    k = (k + 1) % 8;
    snprintf(buf[k], sizeof buf[k], "%s/%s", tmpdir, name);
    return buf[k];
}

static int same_bytes(const char *a, const char *b) {
    size_t na = 0, nb = 0;
    unsigned char *x = check_read_file(a, &na), *y = check_read_file(b, &nb);
    int same = x && y && na == nb && !memcmp(x, y, na);
    free(x), free(y);
    return same;
}

static int exists(const char *p) { return access(p, F_OK) == 0; }

/* ------------------------------------------------------------------ JSON */

static void test_json(void) {
    const char *good[] = {"{}", " [ ] ", "{\"a\":[1,-2,3.5e-3,true,false,null],\"b\":{\"c\":\"x\\u00e9\\ud83d\\ude00\\n\"}}",
                          "\"\xc3\xa9\"", "0", "-0.5E+2"};
    int ok = 1;
    for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
        tfm_json *j = tfm_json_parse(good[i], strlen(good[i]));
        if (!j) printf("# rejected %s: %s\n", good[i], tfm_last_error()), ok = 0;
        tfm_json_free(j);
    }
    CHECK("json: valid documents parse", ok, "see above");
    tfm_json *j = tfm_json_parse(good[2], strlen(good[2]));
    const tfm_json *c = j ? tfm_json_get(tfm_json_get(j, "b"), "c") : NULL;
    CHECK("json: escapes and surrogate pairs decode to UTF-8", c && !strcmp(c->text, "x\xc3\xa9\xf0\x9f\x98\x80\n"),
          "got '%s'", c ? c->text : "(null)");
    int v = 0;
    CHECK("json: integers", j && !tfm_json_int(tfm_json_get(j, "a")->child->next, &v) && v == -2, "got %d", v);
    tfm_json_free(j);

    const char *bad[] = {"", "{", "{\"a\":1,}", "[1,]", "{\"a\" 1}", "{\"a\":1}x", "\"abc", "\"\\x\"", "\"\\ud800\"",
                         "\"\\udc00\"", "\"a\x01\"", "\"\xff\"", "\"\xc0\xaf\"", "01", "1.", "-", "+1", "tru",
                         "{\"a\":1,\"a\":2}", "\"\\u0000\"", "{1:2}", "[1 2]", "\"\\u12\""};
    ok = 1;
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        tfm_json *b = tfm_json_parse(bad[i], strlen(bad[i]));
        if (b || !strstr(tfm_last_error(), "invalid JSON at byte")) printf("# accepted or no position: '%s'\n", bad[i]), ok = 0;
        tfm_json_free(b);
    }
    CHECK("json: malformed documents are rejected with a byte position", ok, "see above");

    char deep[200];
    memset(deep, '[', 100);
    memset(deep + 100, ']', 100);
    j = tfm_json_parse(deep, sizeof deep);
    CHECK("json: nesting deeper than the limit is rejected", !j && strstr(tfm_last_error(), "too deep"), "%s",
          tfm_last_error());
    tfm_json_free(j);
    uint64_t u;
    tfm_json big = {.type = TFM_JSON_NUMBER, .text = "18446744073709551616", .len = 20};
    tfm_json max = {.type = TFM_JSON_NUMBER, .text = "18446744073709551615", .len = 20};
    CHECK("json: u64 overflow is detected", tfm_json_u64(&big, &u) && !tfm_json_u64(&max, &u) && u == UINT64_MAX, "wrong");
    tfm_json frac = {.type = TFM_JSON_NUMBER, .text = "1e3", .len = 3};
    CHECK("json: a non-integer literal is not an integer", tfm_json_u64(&frac, &u), "accepted");
}

/* ------------------------------------------------------------------ models */

static const char *CHARS = "\n !',.:;?abcdefghijklmnopqrstuvwxyz\xc3\xa9";   /* 36 characters (é last) */

static int save_gpt(const char *path, int attention) {
    tfm_gpt_config c = {.vocab_size = 36, .block_size = 8, .n_layer = 2, .n_head = 2, .n_embd = 16,
                        .dropout = 0.1f, .attention = attention};
    tfm_gpt m;
    tfm_char_vocab v;
    if (tfm_gpt_init(&m, &c) || tfm_char_vocab_from_string(&v, CHARS)) return printf("# %s\n", tfm_last_error()), -1;
    tfm_gpt_init_weights(&m, 7 + (uint64_t)attention);
    int rc = tfm_gpt_save(&m, &v, NULL, NULL, path);
    tfm_gpt_free(&m);
    tfm_char_vocab_free(&v);
    return rc;
}

static int save_s2s(const char *path, const char *arch) {
    tfm_mt_config c;
    tfm_mt_config_default(&c);
    snprintf(c.arch, sizeof c.arch, "%s", arch);
    c.src_vocab = 9, c.tgt_vocab = 10, c.d_model = 16, c.n_head = 2, c.ffn = 24, c.max_len = 20, c.n_layer = 2;
    c.embed_size = 6, c.hidden_size = 8, c.dropout = 0.2f, c.pre_ln = !strcmp(arch, "transformer");
    tfm_mt_model t = {0};
    if (tfm_vocab_deserialize(&t.src_vocab, "<pad>\n<bos>\n<eos>\n<unk>\na\nb\n\"q\"\n\xc3\xa9t\xc3\xa9\nz") ||
        tfm_vocab_deserialize(&t.tgt_vocab, "<pad>\n<bos>\n<eos>\n<unk>\nA\nB\nC\\\nD\tx\nE\nF"))
        return printf("# vocab: %s\n", tfm_last_error()), -1;
    t.tok_kind = TFM_TOK_MOSES;
    t.model = tfm_mt_net_create(&c);
    if (!t.model) return printf("# create: %s\n", tfm_last_error()), -1;
    t.model->vt->init_weights(t.model, 11);
    tfm_container ck;
    tfm_container_init(&ck);
    tfm_mt_model_put(&ck, &t);
    int rc = tfm_container_save(&ck, path);
    tfm_container_free(&ck);
    tfm_mt_model_free(&t);
    return rc;
}

/* A translator with a joint BPE model learned from a few lines (train-mt --tokenizer bpe), tied or not. */
static int save_s2s_bpe(const char *path, int tied) {
    const char *lines[] = {"the cat sat on the mat.", "le chat est sur le tapis.", "the dog ate the cake!",
                           "le chien a mang\xc3\xa9 le g\xc3\xa2teau !", "a cat, a dog and a mat.",
                           "un chat, un chien et un tapis."};
    tfm_bpe_learn_opts lo;
    tfm_bpe_learn_opts_default(&lo);
    lo.vocab_size = 300;
    tfm_bpe *b = calloc(1, sizeof *b);
    if (!b || tfm_bpe_learn_lines(b, lines, 6, &lo)) return printf("# bpe: %s\n", tfm_last_error()), free(b), -1;
    tfm_mt_config c;
    tfm_mt_config_default(&c);
    c.d_model = 16, c.n_head = 2, c.ffn = 24, c.max_len = 20, c.n_layer = 2, c.share_embeddings = tied;
    c.pre_ln = !tied;
    tfm_mt_model t;
    if (tfm_mt_model_build_bpe(&t, b, &c, 5)) return printf("# build: %s\n", tfm_last_error()), -1;
    tfm_container ck;
    tfm_container_init(&ck);
    tfm_mt_model_put(&ck, &t);
    int rc = tfm_container_save(&ck, path);
    tfm_container_free(&ck);
    tfm_mt_model_free(&t);
    return rc;
}

static void round_trip(const char *kind) {
    char a_tfm[64], a_st[64], b_tfm[64], b_st[64], name[160];
    snprintf(a_tfm, sizeof a_tfm, "%s_a.tfm", kind), snprintf(a_st, sizeof a_st, "%s_a.safetensors", kind);
    snprintf(b_tfm, sizeof b_tfm, "%s_b.tfm", kind), snprintf(b_st, sizeof b_st, "%s_b.safetensors", kind);
    const char *A = tmp(a_tfm), *AS = tmp(a_st), *B = tmp(b_tfm), *BS = tmp(b_st);
    int rc = !strcmp(kind, "gpt") ? save_gpt(A, TFM_ATTN_CAUSAL)
           : !strcmp(kind, "synthesizer") ? save_gpt(A, TFM_ATTN_SYNTHESIZER)
           : !strncmp(kind, "bpe", 3) ? save_s2s_bpe(A, !strcmp(kind, "bpe-tied")) : save_s2s(A, kind);
    snprintf(name, sizeof name, "%s: export", kind);
    CHECK(name, !rc && !tfm_export_safetensors(A, AS), "%s", tfm_last_error());
    snprintf(name, sizeof name, "%s: import", kind);
    CHECK(name, !tfm_import_safetensors(AS, B), "%s", tfm_last_error());
    snprintf(name, sizeof name, "%s: imported checkpoint is byte-identical to the original (weights, config, tokenizer)", kind);
    CHECK(name, same_bytes(A, B), "files differ");
    snprintf(name, sizeof name, "%s: export -> import -> export gives the same bytes", kind);
    CHECK(name, !tfm_export_safetensors(B, BS) && same_bytes(AS, BS), "%s", tfm_last_error());
}

/* ------------------------------------------------------------------ bad input */

/* Rewrite src's header: replace the first `from` by `to` (from == NULL: keep), re-pad; write the data
 * buffer cut to data_len bytes (SIZE_MAX: all). header_len != 0 overrides the length field. */
static void rewrite(const char *src, const char *dst, const char *from, const char *to, size_t data_len,
                    uint64_t header_len) {
    size_t n;
    unsigned char *b = check_read_file(src, &n);
    if (!b) printf("FAIL rewrite: cannot read %s\n", src), exit(1);
    uint64_t hl = 0;
    for (int k = 7; k >= 0; k--) hl = hl << 8 | b[k];
    char *h = calloc(hl + strlen(to ? to : "") + 16, 1);
    memcpy(h, b + 8, hl);
    if (from) {
        char *p = strstr(h, from);
        if (!p) printf("# rewrite: '%s' not in header\n", from), exit(1);
        size_t fl = strlen(from), tl = strlen(to);
        memmove(p + tl, p + fl, strlen(p + fl) + 1);
        memcpy(p, to, tl);
    }
    size_t len = strlen(h);
    while ((8 + len) % 8) h[len++] = ' ';
    uint64_t field = header_len ? header_len : len;
    unsigned char lb[8];
    for (int k = 0; k < 8; k++) lb[k] = (unsigned char)(field >> (8 * k));
    size_t dl = n - 8 - hl;
    if (data_len < dl) dl = data_len;
    FILE *f = fopen(dst, "wb");
    fwrite(lb, 1, 8, f);
    fwrite(h, 1, len, f);
    fwrite(b + 8 + hl, 1, dl, f);
    fclose(f);
    free(h), free(b);
}

static void expect_bad(const char *name, const char *file, const char *needle1, const char *needle2) {
    const char *out = tmp("bad_out.tfm");
    unlink(out);
    int rc = tfm_import_safetensors(file, out);
    const char *e = tfm_last_error();
    int ok = rc == -1 && strstr(e, file) && strstr(e, needle1) && (!needle2 || strstr(e, needle2)) &&
             !strchr(e, '\n') && !exists(out);
    printf("# %s\n", e);
    CHECK(name, ok, "rc %d, output %s, error '%s' (want '%s'%s%s)", rc, exists(out) ? "written" : "absent", e,
          needle1, needle2 ? ", '" : "", needle2 ? needle2 : "");
}

static void bad_input(void) {
    char G[512], X[512];
    snprintf(G, sizeof G, "%s", tmp("gpt_a.safetensors"));   /* from round_trip("gpt") */
    snprintf(X, sizeof X, "%s", tmp("bad.safetensors"));
    rewrite(G, X, NULL, NULL, SIZE_MAX, (uint64_t)1 << 40);
    expect_bad("bad: huge header length", X, "header length 1099511627776 exceeds", NULL);
    {   /* truncated inside the header */
        size_t n;
        unsigned char *b = check_read_file(G, &n);
        FILE *f = fopen(X, "wb");
        fwrite(b, 1, 100, f);
        fclose(f);
        free(b);
    }
    expect_bad("bad: file truncated inside the header", X, "runs past the end of the file", NULL);
    {
        FILE *f = fopen(X, "wb");
        fwrite("\x10\0\0", 1, 3, f);
        fclose(f);
    }
    expect_bad("bad: file shorter than the length field", X, "truncated", NULL);
    rewrite(G, X, NULL, NULL, 1000, 0);
    expect_bad("bad: file truncated inside the data (offsets past the end)", X, "run past the data buffer",
               "tensor '");
    rewrite(G, X, "\"data_offsets\":[2304,2816]", "\"data_offsets\":[2304,99999999]", SIZE_MAX, 0);
    expect_bad("bad: offsets past the end", X, "tensor 'wpe.weight'", "run past the data buffer");
    rewrite(G, X, "\"wpe.weight\":{\"dtype\":\"F32\",\"shape\":[8,16],\"data_offsets\":[2304,2816]}",
            "\"wpe.weight\":{\"dtype\":\"F32\",\"shape\":[8,16],\"data_offsets\":[1792,2304]}", SIZE_MAX, 0);
    expect_bad("bad: overlapping tensors", X, "overlap", "'wte.weight'");
    rewrite(G, X, "\"wpe.weight\":{\"dtype\":\"F32\"", "\"wpe.weight\":{\"dtype\":\"F64\"", SIZE_MAX, 0);
    expect_bad("bad: wrong dtype", X, "tensor 'wpe.weight'", "dtype 'F64' not supported");
    rewrite(G, X, "\"wpe.weight\":{\"dtype\":\"F32\"", "\"wpe.weight\":{\"dtype\":\"F16\"", SIZE_MAX, 0);
    expect_bad("bad: F16 with an F32 tensor's span", X, "tensor 'wpe.weight'", "span 512 bytes but F16 shape needs 256");
    rewrite(G, X, "\"wpe.weight\":{\"dtype\":\"F32\",\"shape\":[8,16]", "\"wpe.weight\":{\"dtype\":\"F32\",\"shape\":[16,8]",
            SIZE_MAX, 0);
    expect_bad("bad: wrong shape (right size)", X, "tensor 'wpe.weight' has shape (16,8) but the config needs (8,16)",
               NULL);
    rewrite(G, X, "\"wpe.weight\":{\"dtype\":\"F32\",\"shape\":[8,16]", "\"wpe.weight\":{\"dtype\":\"F32\",\"shape\":[8,17]",
            SIZE_MAX, 0);
    expect_bad("bad: shape that does not match its byte range", X, "tensor 'wpe.weight'", "span 512 bytes but F32 shape needs 544");
    rewrite(G, X, "\"wpe.weight\":{\"dtype\":\"F32\",\"shape\":[8,16]", "\"wpe.weight\":{\"dtype\":\"F32\",\"shape\":[0,16]",
            SIZE_MAX, 0);
    expect_bad("bad: zero dim", X, "tensor 'wpe.weight'", "shape dim 0");
    rewrite(G, X, "\"wpe.weight\":{\"dtype\":\"F32\",\"shape\":[8,16]",
            "\"wpe.weight\":{\"dtype\":\"F32\",\"shape\":[2147483647,2147483647,2147483647,2147483647]", SIZE_MAX, 0);
    expect_bad("bad: element count overflow", X, "tensor 'wpe.weight'", "overflows");
    rewrite(G, X, "\"wpe.weight\":{", "\"wpe.weight\":{\"extra\":1,", SIZE_MAX, 0);
    expect_bad("bad: unknown field in a tensor description", X, "tensor 'wpe.weight'", "unknown field 'extra'");
    rewrite(G, X, "\"wpe.weight\":{\"dtype\":\"F32\",\"shape\":[8,16]", "\"wpe.weight\":{\"dtype\":\"F32\",\"shape\":[8,16",
            SIZE_MAX, 0);
    expect_bad("bad: invalid JSON", X, "header: invalid JSON at byte", NULL);
    rewrite(G, X, "\"wpe.weight\"", "\"wte.weight\"", SIZE_MAX, 0);
    expect_bad("bad: duplicate tensor name", X, "duplicate key", NULL);
    rewrite(G, X, "\"wpe.weight\"", "\"wpe.weights\"", SIZE_MAX, 0);
    expect_bad("bad: unknown tensor", X, "tensor 'wpe.weights' is not a parameter", NULL);
    rewrite(G, X, "\"tfm.kind\":\"gpt\"", "\"tfm.kind\":\"cnn\"", SIZE_MAX, 0);
    expect_bad("bad: unknown tfm.kind", X, "unknown tfm.kind 'cnn'", NULL);
    rewrite(G, X, "\\\"n_layer\\\":2", "\\\"n_layer\\\":3", SIZE_MAX, 0);
    expect_bad("bad: config describes more layers than the file has (missing tensor)", X,
               "tensor 'blocks.2.ln1.weight' missing", "needs shape (16)");
    rewrite(G, X, "\\\"n_embd\\\":16", "\\\"n_embd\\\":4096", SIZE_MAX, 0);
    expect_bad("bad: config implies far more parameters than the file holds (checked before building)", X,
               "tfm.config implies", "parameters but the file holds only");
    rewrite(G, X, "\\\"n_embd\\\":16", "\\\"n_embd\\\":15", SIZE_MAX, 0);
    expect_bad("bad: config rejected", X, "tfm.config", NULL);
    rewrite(G, X, "\"tfm.tokenizer.chars\":\"\\n", "\"tfm.tokenizer.chars\":\"", SIZE_MAX, 0);
    expect_bad("bad: tokenizer does not match vocab_size", X, "35 characters but vocab_size is 36", NULL);

    /* a missing tensor with a consistent layout: rewrite through the writer */
    tfm_st_file f;
    if (tfm_st_load(&f, G)) {
        CHECK("bad: reload good file", 0, "%s", tfm_last_error());
        return;
    }
    tfm_st_tensor *t = malloc(sizeof *t * (size_t)f.n);
    int k = 0;
    float *bufs[256] = {0};
    for (int i = 0; i < f.n; i++) {
        if (!strcmp(f.t[i].name, "blocks.1.ffn.dense1.bias")) continue;
        t[k] = f.t[i];
        bufs[k] = malloc(tfm_st_numel(&f.t[i]) * 4);
        tfm_st_read_f32(&f.t[i], bufs[k]);
        t[k].data = bufs[k];
        k++;
    }
    int rc = tfm_st_save(t, k, f.meta, f.n_meta, X);
    CHECK("bad: writer accepts a subset", !rc, "%s", tfm_last_error());
    expect_bad("bad: missing tensor", X, "tensor 'blocks.1.ffn.dense1.bias' missing", NULL);
    for (int i = 0; i < k; i++) free(bufs[i]);
    free(t);
    tfm_st_free(&f);
    expect_bad("bad: file does not exist", tmp("nope.safetensors"), "cannot open", NULL);
}

/* The new metadata of BPE and tied translators: missing or malformed -> one line naming the file and field.
 * Each case edits the export of round_trip("bpe") (P) or round_trip("bpe-tied") (T). */
static void bad_bpe_tied(void) {
    static const struct {
        int tied;
        const char *from, *to, *label, *want;
    } cases[] = {
        {0, "\"tfm.tokenizer.bpe\":", "\"tfm.tokenizer.bpX\":", "bad bpe: tfm.tokenizer.bpe missing",
         "__metadata__ has no 'tfm.tokenizer.bpe'"},
        {0, "\"tfm.tokenizer.bpe\":\"", "\"tfm.tokenizer.bpe\":\"!", "bad bpe: tfm.tokenizer.bpe not base64",
         "tfm.tokenizer.bpe: not base64"},
        {0, "\"tfm.tokenizer.bpe\":\"", "\"tfm.tokenizer.bpe\":\"AAAA", "bad bpe: tfm.tokenizer.bpe not a SentencePiece model",
         "tfm.tokenizer.bpe: not a valid SentencePiece"},
        {0, "<unk>\\n<0x00>", "<unk>\\n<0xZZ>", "bad bpe: pieces differ from the vocabulary",
         "tfm.tokenizer.bpe: the model's pieces are not"},
        {0, "\"tfm.tokenizer.kind\":\"bpe\"", "\"tfm.tokenizer.kind\":\"moses\"",
         "bad bpe: tfm.tokenizer.bpe with another tokenizer.kind", "tfm.tokenizer.bpe given but"},
        {1, "\"tfm.tied_weights\":", "\"tfm.tied_weightz\":", "bad tied: tfm.tied_weights missing", "no 'tfm.tied_weights'"},
        {1, "\"decoder.dense.weight\\\":\\\"shared", "\"decoder.dense.weight\\\":\\\"sharex",
         "bad tied: tfm.tied_weights maps to another tensor", "tfm.tied_weights must map"},
        {1, "\"tfm.tied_weights\":\"{", "\"tfm.tied_weights\":\"{{", "bad tied: tfm.tied_weights not JSON",
         "tfm.tied_weights: invalid JSON"},
        {1, "\\\"share_embeddings\\\":1", "\\\"share_embeddings\\\":0", "bad tied: tied weights but share_embeddings 0",
         "tfm.tied_weights given but tfm.config has share_embeddings 0"},
        {1, "\\\"share_embeddings\\\":1", "\\\"share_embeddings\\\":2", "bad tied: share_embeddings out of range",
         "tfm.config: config share_embeddings must be in 0..1"},
        {0, "\\\"share_embeddings\\\":0", "\\\"share_embeddings\\\":1", "bad tied: share_embeddings 1 without tfm.tied_weights",
         "no 'tfm.tied_weights'"},
        {1, "\"shared.embedding.weight\":{", "\"encoder.embedding.weight\":{", "bad tied: the shared tensor under an untied name",
         "tensor 'encoder.embedding.weight' is not a parameter"},
    };
    char P[512], T[512], X[512];
    snprintf(P, sizeof P, "%s", tmp("bpe_a.safetensors"));   /* from round_trip("bpe") */
    snprintf(T, sizeof T, "%s", tmp("bpe-tied_a.safetensors"));
    snprintf(X, sizeof X, "%s", tmp("bad.safetensors"));
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        rewrite(cases[i].tied ? T : P, X, cases[i].from, cases[i].to, SIZE_MAX, 0);
        expect_bad(cases[i].label, X, cases[i].want, NULL);
    }
}

/* ------------------------------------------------------------------ logits (twin fixtures, tool mode) */

/* Logits of the model in path on the inputs in `in` (see the file comment). NULL with a message on error. */
static float *model_logits(const char *path, const tfm_container *in, size_t *n) {
    tfm_container c;
    if (tfm_container_load(&c, path)) return tfm_container_free(&c), NULL;
    const char *kind = tfm_container_str(&c, "meta.kind");
    int is_gpt = kind && !strcmp(kind, "gpt");
    tfm_container_free(&c);
    tfm_graph g;
    tfm_graph_init(&g, 1);
    g.grad_enabled = 0;
    float *out = NULL;
    if (is_gpt) {
        tfm_gpt m;
        tfm_char_vocab v;
        const tfm_entry *x = tfm_container_get(in, "x");
        if (!x || x->ndim != 2) return tfm_set_error("input: need x (B,T)"), NULL;
        if (tfm_gpt_load(&m, &v, NULL, NULL, path)) return NULL;
        tfm_tensor *l = tfm_gpt_forward(&g, &m, x->data, x->shape[0], x->shape[1]);
        out = malloc(l->size * sizeof(float));
        memcpy(out, l->data, l->size * sizeof(float));
        *n = l->size;
        tfm_gpt_free(&m);
        tfm_char_vocab_free(&v);
    } else {
        tfm_mt_model t;
        const tfm_entry *s = tfm_container_get(in, "src"), *sv = tfm_container_get(in, "src_valid"),
                        *ti = tfm_container_get(in, "tgt_in");
        if (!s || !sv || !ti || s->ndim != 2 || ti->ndim != 2) return tfm_set_error("input: need src, src_valid, tgt_in"), NULL;
        if (tfm_mt_model_load(&t, path)) return NULL;
        tfm_tensor *l = tfm_mt_net_forward(t.model, &g, s->data, sv->data, s->shape[0], s->shape[1], ti->data,
                                           ti->shape[1]);
        out = malloc(l->size * sizeof(float));
        memcpy(out, l->data, l->size * sizeof(float));
        *n = l->size;
        tfm_mt_model_free(&t);
    }
    tfm_graph_free(&g);
    return out;
}

static int tool_logits(const char *model, const char *in_path, const char *out_path) {
    tfm_container in, out;
    if (tfm_container_load(&in, in_path)) return fprintf(stderr, "%s\n", tfm_last_error()), 1;
    size_t n;
    float *l = model_logits(model, &in, &n);
    if (!l) return fprintf(stderr, "%s\n", tfm_last_error()), 1;
    tfm_container_init(&out);
    int shape[1] = {(int)n};
    tfm_container_add_f32(&out, "logits", 1, shape, l);
    int rc = tfm_container_save(&out, out_path);
    free(l);
    tfm_container_free(&out);
    tfm_container_free(&in);
    return rc ? (fprintf(stderr, "%s\n", tfm_last_error()), 1) : 0;
}

/* tests/fixtures/twin_KIND.safetensors were written by the PyTorch twins; twin_logits.tfm holds, per kind,
 * the inputs (KIND.x or KIND.src/src_valid/tgt_in) and the twin's logits (KIND.logits). */
static void twin_fixtures(void) {
    const char *kinds[] = {"gpt", "synthesizer", "transformer", "rnn", "bahdanau", "bpe", "bpe_tied"};
    tfm_container fx;
    if (tfm_container_load(&fx, "tests/fixtures/twin_logits.tfm")) {
        CHECK("twin fixtures: load tests/fixtures/twin_logits.tfm", 0, "%s", tfm_last_error());
        tfm_container_free(&fx);
        return;
    }
    for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++) {
        char st[128], name[200], key[64];
        snprintf(st, sizeof st, "tests/fixtures/twin_%s.safetensors", kinds[k]);
        const char *out = tmp("twin.tfm");
        snprintf(name, sizeof name, "twin %s: tfm import of the PyTorch-written file", kinds[k]);
        int ok = !tfm_import_safetensors(st, out);
        CHECK(name, ok, "%s", tfm_last_error());
        if (!ok) continue;
        tfm_container in;
        tfm_container_init(&in);
        const char *fields[] = {"x", "src", "src_valid", "tgt_in"};
        for (int i = 0; i < 4; i++) {
            snprintf(key, sizeof key, "%s.%s", kinds[k], fields[i]);
            const tfm_entry *e = tfm_container_get(&fx, key);
            if (e) tfm_container_add(&in, fields[i], e->dtype, e->ndim, e->shape, e->data, e->nbytes);
        }
        snprintf(key, sizeof key, "%s.logits", kinds[k]);
        const tfm_entry *want = tfm_container_get(&fx, key);
        size_t n = 0;
        float *got = model_logits(out, &in, &n);
        snprintf(name, sizeof name, "twin %s: tfm reproduces the twin's logits (max |diff| <= 1e-5)", kinds[k]);
        double d = got && want && want->nbytes == n * 4 ? max_abs_diff(got, want->data, n) : 1e9;
        CHECK(name, d <= 1e-5, "max |diff| %.3g (%s)", d, got ? "compared" : tfm_last_error());
        free(got);
        tfm_container_free(&in);
    }
    tfm_container_free(&fx);
}

/* F16 and BF16 tensors (Hugging Face checkpoints saved in half precision) read as the exact floats they hold */
static void half_dtypes(void) {
    static const uint16_t h[6] = {0x3c00, 0xc000, 0x0001, 0x7bff, 0x8000, 0x3555};   /* 1 -2 2^-24 65504 -0 ~1/3 */
    static const uint16_t bf[3] = {0x3f80, 0xc2f7, 0x0001};                           /* 1 -123.5 1 subnormal */
    const float want_h[6] = {1.0f, -2.0f, 5.9604644775390625e-08f, 65504.0f, -0.0f, 0.333251953125f};
    const char *head = "{\"h\":{\"dtype\":\"F16\",\"shape\":[2,3],\"data_offsets\":[0,12]},"
                       "\"b\":{\"dtype\":\"BF16\",\"shape\":[3],\"data_offsets\":[12,18]}}";
    const char *path = tmp("half.safetensors");
    FILE *f = fopen(path, "wb");
    uint64_t n = strlen(head);
    fwrite(&n, 8, 1, f), fwrite(head, 1, n, f), fwrite(h, 2, 6, f), fwrite(bf, 2, 3, f);
    fclose(f);
    tfm_st_file st;
    int ok = !tfm_st_load(&st, path) && st.n == 2;
    float got[6];
    if (ok) tfm_st_read_f32(tfm_st_find(&st, "h"), got);
    int same = ok;
    for (int i = 0; same && i < 6; i++) same = !memcmp(&got[i], &want_h[i], 4);
    CHECK("F16 tensors read exactly (normal, negative, subnormal, largest, -0)", same, "%s", ok ? "values" : tfm_last_error());
    if (ok) tfm_st_read_f32(tfm_st_find(&st, "b"), got);
    uint32_t tiny = 1u << 16;
    float t;
    memcpy(&t, &tiny, 4);
    CHECK("BF16 tensors read exactly (the top half of a float)", ok && got[0] == 1.0f && got[1] == -123.5f && got[2] == t,
          "%g %g %g", got[0], got[1], got[2]);
    tfm_st_free(&st);
}

int main(int argc, char **argv) {
    if (argc == 5 && !strcmp(argv[1], "--logits")) return tool_logits(argv[2], argv[3], argv[4]);
    if (check_tmpdir(tmpdir, sizeof tmpdir, "test_safetensors")) return 1;
    test_json();
    const char *kinds[] = {"gpt", "synthesizer", "transformer", "rnn", "bahdanau", "bpe", "bpe-tied"};
    for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++) round_trip(kinds[k]);
    bad_input();
    bad_bpe_tied();
    half_dtypes();
    twin_fixtures();
    check_rm_tmpdir(tmpdir);
    return check_failures ? 1 : 0;
}
