/* tfm export --format gguf, read back by a GGUF reader written here from the format's description
 * (independent of src/models/gguf.c): header, metadata of llama.cpp's gpt2 architecture, the tokenizer of a
 * character model (byte-level tokens, merges within multi-byte characters), every tensor's shape and bytes
 * (f32: the parameters bit for bit, the qkv rows W_q | W_k | W_v; f16: each half the nearest to its value,
 * ties to even, checked by decoding the halves around it), offsets aligned to 32. llama.cpp itself runs the files in
 * tests/cli/gguf.sh. */
#include "check.h"
#include "tfm/interchange.h"
#include "tfm/train.h"
#include <stdint.h>

static char tmpdir[256];

typedef struct {
    const unsigned char *p, *end;
    int bad;
} rd;

static uint64_t u(rd *r, int n) {
    uint64_t v = 0;
    if (r->p + n > r->end) return r->bad = 1, 0;
    for (int i = 0; i < n; i++) v |= (uint64_t)r->p[i] << (8 * i);
    r->p += n;
    return v;
}

/* a string as a NUL-terminated copy in buf (truncated) */
static void str(rd *r, char *buf, size_t cap) {
    uint64_t n = u(r, 8);
    if (r->bad || n > (uint64_t)(r->end - r->p)) {
        r->bad = 1;
        buf[0] = 0;
        return;
    }
    size_t k = n < cap - 1 ? (size_t)n : cap - 1;
    memcpy(buf, r->p, k);
    buf[k] = 0;
    r->p += n;
}

typedef struct {
    char key[64];
    int type;
    uint64_t u;              /* integer / bool values */
    float f;
    char s[64];              /* string values */
    int arr_type;
    uint64_t arr_n;
    const unsigned char *arr; /* array start */
} kv;

static void skip_value(rd *r, int type) {
    static const int size[13] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    char tmp[8];
    if (type == 8) str(r, tmp, sizeof tmp);
    else if (type == 9) {
        int t = (int)u(r, 4);
        uint64_t n = u(r, 8);
        for (uint64_t i = 0; i < n && !r->bad; i++) skip_value(r, t);
    } else if (type >= 0 && type < 13) u(r, size[type]);
    else r->bad = 1;
}

typedef struct {
    char name[64];
    int ndim, type;
    uint64_t dims[4], offset;
} tinfo;

typedef struct {
    kv kvs[64];
    int n_kv;
    tinfo t[256];
    int n_t;
    const unsigned char *data;
} gguf;

static int parse(const unsigned char *b, size_t n, gguf *g) {
    rd r = {b, b + n, 0};
    if (n < 24 || memcmp(b, "GGUF", 4)) return -1;
    r.p += 4;
    if (u(&r, 4) != 3) return -1;
    uint64_t nt = u(&r, 8), nkv = u(&r, 8);
    if (nt > 256 || nkv > 64) return -1;
    g->n_kv = (int)nkv, g->n_t = (int)nt;
    for (int i = 0; i < g->n_kv && !r.bad; i++) {
        kv *k = &g->kvs[i];
        str(&r, k->key, sizeof k->key);
        k->type = (int)u(&r, 4);
        if (k->type == 8) str(&r, k->s, sizeof k->s);
        else if (k->type == 9) {
            const unsigned char *at = r.p;
            k->arr_type = (int)u(&r, 4);
            k->arr_n = u(&r, 8);
            k->arr = r.p;
            r.p = at;
            skip_value(&r, 9);
        } else if (k->type == 6) {
            uint32_t x = (uint32_t)u(&r, 4);
            memcpy(&k->f, &x, 4);
        } else k->u = u(&r, k->type == 7 ? 1 : 4);
    }
    for (int i = 0; i < g->n_t && !r.bad; i++) {
        tinfo *t = &g->t[i];
        str(&r, t->name, sizeof t->name);
        t->ndim = (int)u(&r, 4);
        for (int d = 0; d < t->ndim && d < 4; d++) t->dims[d] = u(&r, 8);
        t->type = (int)u(&r, 4);
        t->offset = u(&r, 8);
    }
    size_t head = (size_t)(r.p - b);
    g->data = b + (head + 31) / 32 * 32;
    return r.bad ? -1 : 0;
}

static const kv *get(const gguf *g, const char *key) {
    for (int i = 0; i < g->n_kv; i++)
        if (!strcmp(g->kvs[i].key, key)) return &g->kvs[i];
    return NULL;
}

static const tinfo *tensor(const gguf *g, const char *name) {
    for (int i = 0; i < g->n_t; i++)
        if (!strcmp(g->t[i].name, name)) return &g->t[i];
    return NULL;
}

/* IEEE half -> double, exactly */
static double half(uint16_t h) {
    int e = (h >> 10) & 31, m = h & 1023;
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(1024 + m, e - 25);
    return h & 0x8000 ? -v : v;
}

/* h is x rounded to the nearest half, ties to the even one: no neighbour of h is closer to x (checked by
 * decoding the halves, not by converting x) */
static int nearest_half(float x, uint16_t h) {
    double d = fabs(half(h) - x);
    for (int k = -1; k <= 1; k += 2) {
        uint16_t n = (uint16_t)(h + k);
        if ((n & 0x7c00) == 0x7c00 || (n ^ h) & 0x8000) continue;   /* past the finite range or the sign */
        double dn = fabs(half(n) - x);
        if (dn < d || (dn == d && (h & 1))) return 0;
    }
    return isfinite(half(h));
}

/* the tensor's values equal src[0..n) (f32 bit for bit, or f16 rounded to nearest even) */
static int same_values(const gguf *g, const tinfo *t, const float *src, size_t n, size_t at) {
    const unsigned char *p = g->data + t->offset + at * (t->type == 1 ? 2 : 4);
    for (size_t i = 0; i < n; i++) {
        if (t->type == 0) {
            if (memcmp(p + 4 * i, &src[i], 4)) return 0;
        } else {
            uint16_t h = (uint16_t)(p[2 * i] | p[2 * i + 1] << 8);
            if (!nearest_half(src[i], h)) return 0;
        }
    }
    return 1;
}

static void check_file(const char *model, int f16) {
    char path[512], label[200];
    snprintf(path, sizeof path, "%s/m%d.gguf", tmpdir, f16);
    snprintf(label, sizeof label, "gguf %s: export", f16 ? "f16" : "f32");
    CHECK(label, !tfm_export_gguf(model, path, f16 ? TFM_GGUF_F16 : TFM_GGUF_F32), "%s", tfm_last_error());
    size_t n = 0;
    unsigned char *b = check_read_file(path, &n);
    static gguf g;
    memset(&g, 0, sizeof g);
    snprintf(label, sizeof label, "gguf %s: a GGUF v3 file that parses to its end", f16 ? "f16" : "f32");
    CHECK(label, b && !parse(b, n, &g), "%zu bytes", n);
    tfm_gpt m;
    tfm_char_vocab v;
    if (!b || tfm_gpt_load(&m, &v, NULL, NULL, model)) return free(b);
    const tfm_gpt_config *c = &m.cfg;
    const kv *arch = get(&g, "general.architecture"), *ctx = get(&g, "gpt2.context_length"),
             *emb = get(&g, "gpt2.embedding_length"), *ff = get(&g, "gpt2.feed_forward_length"),
             *blk = get(&g, "gpt2.block_count"), *hd = get(&g, "gpt2.attention.head_count"),
             *eps = get(&g, "gpt2.attention.layer_norm_epsilon"), *ft = get(&g, "general.file_type"),
             *tm = get(&g, "tokenizer.ggml.model"), *pre = get(&g, "tokenizer.ggml.pre"),
             *toks = get(&g, "tokenizer.ggml.tokens"), *abos = get(&g, "tokenizer.ggml.add_bos_token");
    snprintf(label, sizeof label, "gguf %s: gpt2 metadata (context, widths, blocks, heads, eps, file type)",
             f16 ? "f16" : "f32");
    CHECK(label, arch && !strcmp(arch->s, "gpt2") && ctx && ctx->u == (uint64_t)c->block_size && emb &&
                     emb->u == (uint64_t)c->n_embd && ff && ff->u == (uint64_t)(4 * c->n_embd) && blk &&
                     blk->u == (uint64_t)c->n_layer && hd && hd->u == (uint64_t)c->n_head && eps && eps->f == 1e-5f &&
                     ft && ft->u == (uint64_t)f16,
          "metadata differs");
    snprintf(label, sizeof label, "gguf %s: tokenizer gpt2 / gpt-2, one token per character, no BOS added",
             f16 ? "f16" : "f32");
    CHECK(label, tm && !strcmp(tm->s, "gpt2") && pre && !strcmp(pre->s, "gpt-2") && toks && toks->arr_type == 8 &&
                     toks->arr_n == (uint64_t)v.n && abos && abos->u == 0,
          "tokenizer metadata differs");
    /* token 1 of tinyshakespeare's vocabulary is ' ': the byte-level 'Ġ' (U+0120) */
    if (toks && toks->arr_n > 1) {
        rd r = {toks->arr, b + n, 0};
        char t0[16], t1[16];
        str(&r, t0, sizeof t0), str(&r, t1, sizeof t1);
        snprintf(label, sizeof label, "gguf %s: characters as byte-level tokens ('\\n' -> U+010A, ' ' -> U+0120)",
                 f16 ? "f16" : "f32");
        CHECK(label, v.cps[0] == '\n' && v.cps[1] == ' ' && !strcmp(t0, "\xc4\x8a") && !strcmp(t1, "\xc4\xa0"),
              "got '%s' '%s'", t0, t1);
    }
    int ok = g.n_t == 3 + 12 * c->n_layer + 2, aligned = 1;
    for (int i = 0; i < g.n_t; i++) aligned &= g.t[i].offset % 32 == 0;
    const tinfo *te = tensor(&g, "token_embd.weight"), *out = tensor(&g, "output.weight"),
                *qkv = tensor(&g, "blk.1.attn_qkv.weight"), *qb = tensor(&g, "blk.0.attn_qkv.bias"),
                *up = tensor(&g, "blk.0.ffn_up.weight"), *norm = tensor(&g, "output_norm.weight");
    int C = c->n_embd;
    const tfm_gpt_block *b0 = &m.blocks[0], *b1 = &m.blocks[1];
    ok = ok && te && out && qkv && qb && up && norm && te->dims[0] == (uint64_t)C && te->dims[1] == (uint64_t)c->vocab_size &&
         qkv->dims[0] == (uint64_t)C && qkv->dims[1] == (uint64_t)(3 * C) && up->dims[0] == (uint64_t)C &&
         up->dims[1] == (uint64_t)(4 * C) && norm->type == 0 && qb->type == 0 && te->type == f16 && qkv->type == f16;
    snprintf(label, sizeof label, "gguf %s: %d tensors, dims innermost first, vectors f32, matrices %s, aligned",
             f16 ? "f16" : "f32", g.n_t, f16 ? "f16" : "f32");
    CHECK(label, ok && aligned, "layout differs");
    if (ok) {
        size_t CC = (size_t)C * C;
        int same = same_values(&g, te, m.wte.weight->data, m.wte.weight->size, 0) &&
                   same_values(&g, out, m.wte.weight->data, m.wte.weight->size, 0) &&
                   same_values(&g, qkv, b1->attn.W_q.W->data, CC, 0) && same_values(&g, qkv, b1->attn.W_k.W->data, CC, CC) &&
                   same_values(&g, qkv, b1->attn.W_v.W->data, CC, 2 * CC) &&
                   same_values(&g, qb, b0->attn.W_v.b->data, (size_t)C, 2 * (size_t)C) &&
                   same_values(&g, up, b0->ffn.dense1.W->data, b0->ffn.dense1.W->size, 0) &&
                   same_values(&g, norm, m.ln_f.weight->data, (size_t)C, 0);
        snprintf(label, sizeof label, "gguf %s: tensor bytes = the parameters%s (embeddings, tied output, qkv = W_q|W_k|W_v, "
                 "biases, FFN, norms)", f16 ? "f16" : "f32", f16 ? " rounded as _Float16" : "");
        CHECK(label, same, "values differ");
    }
    tfm_gpt_free(&m);
    tfm_char_vocab_free(&v);
    free(b);
}

/* q8_0 blocks of a row-major src (n floats from element at of tensor t): each block of 32 has the half nearest to
 * max|x| / 127 as its scale d and q = roundf(x / d) (llama.cpp's reference quantizer), so |q dh - x| <= d / 2 +
 * 127 |dh - d| with dh the stored half */
static int same_q8_0(const gguf *g, const tinfo *t, const float *src, size_t n, size_t at, double *max_err) {
    const unsigned char *p = g->data + t->offset + at / 32 * 34;
    for (size_t i = 0; i < n; i += 32, p += 34) {
        float amax = 0;
        for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(src[i + j]));
        float d = amax / 127.0f;
        uint16_t h = (uint16_t)(p[0] | p[1] << 8);
        if (!nearest_half(d, h)) return 0;
        double dh = half(h);
        for (int j = 0; j < 32; j++) {
            int q = (signed char)p[2 + j];
            if (q != (int)roundf(src[i + j] * (d != 0 ? 1.0f / d : 0.0f))) return 0;
            double e = fabs(q * dh - src[i + j]);
            if (e > d / 2.0 + 127 * fabs(dh - d) + 1e-12) return 0;
            if (e > *max_err) *max_err = e;
        }
    }
    return 1;
}

/* --outtype q8_0 on the tinyshakespeare fixture (width 48): rows of 48 are not whole blocks of 32, so those
 * matrices fall back to f16; ffn_down (rows of 192) is q8_0; the position table and the vectors stay f32 */
static void check_q8_0(const char *model) {
    char path[512];
    snprintf(path, sizeof path, "%s/m8.gguf", tmpdir);
    CHECK("gguf q8_0: export", !tfm_export_gguf(model, path, TFM_GGUF_Q8_0), "%s", tfm_last_error());
    size_t n = 0;
    unsigned char *b = check_read_file(path, &n);
    static gguf g;
    memset(&g, 0, sizeof g);
    CHECK("gguf q8_0: a GGUF v3 file that parses to its end", b && !parse(b, n, &g), "%zu bytes", n);
    tfm_gpt m;
    tfm_char_vocab v;
    if (!b || tfm_gpt_load(&m, &v, NULL, NULL, model)) return free(b);
    const kv *ft = get(&g, "general.file_type");
    const tinfo *te = tensor(&g, "token_embd.weight"), *pe = tensor(&g, "position_embd.weight"),
                *down = tensor(&g, "blk.1.ffn_down.weight"), *norm = tensor(&g, "blk.0.ffn_norm.weight");
    int C = m.cfg.n_embd;
    CHECK("gguf q8_0: file type MOSTLY_Q8_0; ffn_down q8_0, rows of 48 f16, position table and vectors f32",
          ft && ft->u == 7 && te && te->type == 1 && pe && pe->type == 0 && down && down->type == 8 && norm &&
              norm->type == 0 && C % 32 != 0,
          "types differ (file type %llu)", ft ? (unsigned long long)ft->u : 0ULL);
    double err = 0;
    const tfm_tensor *w = m.blocks[1].ffn.dense2.W;   /* (C, 4C): rows of 4C along which the blocks run */
    CHECK("gguf q8_0: blocks = llama.cpp's rule (scale the half nearest max|x|/127, q = roundf(x/d), |q dh - x| bounded)",
          down && down->type == 8 && same_q8_0(&g, down, w->data, w->size, 0, &err) &&
              same_values(&g, te, m.wte.weight->data, m.wte.weight->size, 0),
          "values differ");
    tfm_gpt_free(&m);
    tfm_char_vocab_free(&v);
    free(b);
}

/* a vocabulary with 2-, 3- and 4-byte characters: the merges join each character's bytes, prefix by prefix */
static void check_merges(void) {
    tfm_char_vocab v;
    const char *text = "ab\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80";   /* a b é € 😀 */
    if (tfm_char_vocab_build(&v, text, strlen(text))) {
        CHECK("gguf merges: vocabulary", 0, "%s", tfm_last_error());
        return;
    }
    tfm_gpt_config cfg = {v.n, 8, 2, 2, 8, 0.0f, TFM_ATTN_CAUSAL, 0.0f};
    tfm_gpt m;
    char model[512], path[512];
    snprintf(model, sizeof model, "%s/mb.tfm", tmpdir);
    snprintf(path, sizeof path, "%s/mb.gguf", tmpdir);
    int ok = !tfm_gpt_init(&m, &cfg);
    if (ok) tfm_gpt_init_weights(&m, 1), ok = !tfm_gpt_save(&m, &v, NULL, NULL, model), tfm_gpt_free(&m);
    ok = ok && !tfm_export_gguf(model, path, TFM_GGUF_F32);
    size_t n = 0;
    unsigned char *b = ok ? check_read_file(path, &n) : NULL;
    static gguf g;
    memset(&g, 0, sizeof g);
    const kv *mg = b && !parse(b, n, &g) ? get(&g, "tokenizer.ggml.merges") : NULL;
    char all[512] = "", s[64];
    if (mg) {
        rd r = {mg->arr, b + n, 0};
        for (uint64_t i = 0; i < mg->arr_n; i++) str(&r, s, sizeof s), strcat(all, s), strcat(all, "|");
    }
    /* é C3 A9: "Ã ©"; € E2 82 AC: "â Ĥ", "âĤ ¬"; 😀 F0 9F 98 80: "ð Ł", "ðŁ ĺ", "ðŁĺ Ģ" (GPT-2's
     * bytes_to_unicode, as scripts/hf_check.py computes it) */
    const char *want = "\xc3\x83 \xc2\xa9|\xc3\xa2 \xc4\xa4|\xc3\xa2\xc4\xa4 \xc2\xac|\xc3\xb0 \xc5\x81|"
                       "\xc3\xb0\xc5\x81 \xc4\xba|\xc3\xb0\xc5\x81\xc4\xba \xc4\xa2|";
    CHECK("gguf merges: the bytes of each multi-byte character, prefix by prefix (6 merges for é € 😀)",
          mg && !strcmp(all, want), "got '%s' (%s)", all, ok ? "exported" : tfm_last_error());
    free(b);
    tfm_char_vocab_free(&v);
}

int main(void) {
    if (check_tmpdir(tmpdir, sizeof tmpdir, "test_gguf")) return 1;
    check_file("tests/fixtures/lm_shakespeare_tiny.tfm", 0);
    check_file("tests/fixtures/lm_shakespeare_tiny.tfm", 1);
    check_q8_0("tests/fixtures/lm_shakespeare_tiny.tfm");
    check_merges();
    check_rm_tmpdir(tmpdir);
    CHECK_EXIT();
}
