/* tfm GPT checkpoints -> GGUF (llama.cpp's model file) in llama.cpp's "gpt2" architecture; see
 * include/tfm/interchange.h and docs/INTEROP.md.
 *
 * GGUF v3, little-endian: "GGUF", u32 version, u64 tensor count, u64 metadata count, the metadata
 * (key string, u32 type, value), the tensor infos (name, u32 n_dims, u64 dims innermost first, u32 ggml
 * type, u64 offset into the data), zero padding to general.alignment (32), the tensor data (each tensor at
 * its offset, padded to 32). Strings are u64 length + bytes.
 *
 * The gpt2 graph (llama.cpp's llm_build_gpt2) is tfm's GPT: token + learned position embeddings, pre-LN
 * blocks with fused qkv (one (3C, C) matrix: W_q rows, then W_k, then W_v) and biases, tanh GELU FFN,
 * final LayerNorm, LM head (output.weight, written as a copy of the token embedding). A tfm matrix W (out,
 * in) row-major is a ggml tensor of dims {in, out}, the same bytes. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/json.h"
#include "tfm/interchange.h"
#include "tfm/io.h"

#define GGUF_ALIGN 32
enum { G_U32 = 4, G_I32 = 5, G_F32 = 6, G_BOOL = 7, G_STRING = 8, G_ARRAY = 9 };
enum { GGML_F32 = 0, GGML_F16 = 1, GGML_Q8_0 = 8 };
#define Q8_0_BLOCK 32         /* Q8_0: blocks of 32 weights along a row, one fp16 scale each (34 bytes) */
enum { TOK_NORMAL = 1, TOK_CONTROL = 3, TOK_UNUSED = 5 };

/* ------------------------------------------------------------------ the byte buffer of header and metadata */

typedef struct {
    unsigned char *p;
    size_t len, cap;
    int oom;
    int n_kv;                /* metadata keys put */
} bytes;

static void put(bytes *b, const void *s, size_t n) {
    if (b->oom) return;
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n) cap *= 2;
        unsigned char *q = realloc(b->p, cap);
        if (!q) { b->oom = 1; return; }
        b->p = q, b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
}
/* little-endian integers (the host of every supported platform; tfm's files assume it too) */
static void put_u32(bytes *b, uint32_t v) { put(b, &v, 4); }
static void put_u64(bytes *b, uint64_t v) { put(b, &v, 8); }
static void put_str(bytes *b, const char *s, size_t n) { put_u64(b, n), put(b, s, n); }
static void put_key(bytes *b, const char *key, uint32_t type) {
    put_str(b, key, strlen(key)), put_u32(b, type), b->n_kv++;
}
static void kv_u32(bytes *b, const char *key, uint32_t v) { put_key(b, key, G_U32), put_u32(b, v); }
static void kv_f32(bytes *b, const char *key, float v) { put_key(b, key, G_F32), put(b, &v, 4); }
static void kv_bool(bytes *b, const char *key, int v) {
    unsigned char c = (unsigned char)!!v;
    put_key(b, key, G_BOOL), put(b, &c, 1);
}
static void kv_str(bytes *b, const char *key, const char *v) { put_key(b, key, G_STRING), put_str(b, v, strlen(v)); }
static void kv_array(bytes *b, const char *key, uint32_t type, uint64_t n) {
    put_key(b, key, G_ARRAY), put_u32(b, type), put_u64(b, n);
}

/* ------------------------------------------------------------------ the tokenizer */

/* GPT-2's bytes_to_unicode: the printable bytes map to themselves, the other 68 to U+0100.. in byte order. */
static void byte_chars(uint32_t cp[256]) {
    int n = 0;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        cp[b] = printable ? (uint32_t)b : (uint32_t)(256 + n++);
    }
}

static size_t utf8_put(char *o, uint32_t c) {
    if (c < 0x80) return o[0] = (char)c, 1;
    if (c < 0x800) return o[0] = (char)(0xC0 | c >> 6), o[1] = (char)(0x80 | (c & 63)), 2;
    return o[0] = (char)(0xE0 | c >> 12), o[1] = (char)(0x80 | ((c >> 6) & 63)), o[2] = (char)(0x80 | (c & 63)), 3;
}

/* The byte-level string of n bytes (each byte one character of bytes_to_unicode): out holds 3 n + 1. */
static void byte_level(const uint32_t map[256], const unsigned char *s, size_t n, char *out) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++) k += utf8_put(out + k, map[s[i]]);
    out[k] = 0;
}

typedef struct {
    int n;                   /* tokens (= the model's vocab_size) */
    char **tok;              /* id -> token string */
    int *type;               /* id -> TOK_* */
    int n_merges;
    char **merge;            /* "LEFT RIGHT" */
    int eos;                 /* -1: none */
} gguf_vocab;

static void vocab_free(gguf_vocab *v) {
    for (int i = 0; v->tok && i < v->n; i++) free(v->tok[i]);
    for (int i = 0; v->merge && i < v->n_merges; i++) free(v->merge[i]);
    free(v->tok), free(v->type), free(v->merge);
    memset(v, 0, sizeof *v);
}

static int vocab_alloc(gguf_vocab *v, int n, int n_merges) {
    v->n = n, v->n_merges = n_merges, v->eos = -1;
    v->tok = calloc((size_t)n, sizeof *v->tok);
    v->type = calloc((size_t)n, sizeof *v->type);
    v->merge = calloc((size_t)(n_merges > 0 ? n_merges : 1), sizeof *v->merge);
    if (v->tok && v->type && v->merge) return 0;
    return tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory (GGUF vocabulary)"), -1;
}

static int has_str(char *const *s, int n, const char *x) {
    for (int i = 0; i < n; i++)
        if (!strcmp(s[i], x)) return 1;
    return 0;
}

/* A character vocabulary: token i = the byte-level string of character i's UTF-8; merges join the bytes of
 * each multi-byte character, prefix by prefix ("b1 b2", then "b1b2 b3", ...). llama.cpp's GPT-2 tokenizer
 * then turns any text of vocabulary characters into exactly those characters: a merge's left side is a
 * character's proper prefix (it starts with a UTF-8 lead byte) and its right side a continuation byte, so no
 * merge spans two characters. */
static int char_vocab(const tfm_char_vocab *cv, gguf_vocab *v) {
    uint32_t map[256];
    byte_chars(map);
    int n_merges = 0;
    for (int i = 0; i < cv->n; i++)   /* UTF-8 length - 1 */
        n_merges += (cv->cps[i] >= 0x80) + (cv->cps[i] >= 0x800) + (cv->cps[i] >= 0x10000);
    if (vocab_alloc(v, cv->n, n_merges)) return -1;
    v->n_merges = 0;
    for (int i = 0; i < cv->n; i++) {
        unsigned char u[4];
        char buf[16], left[16], right[8], m[32];
        int len = tfm_utf8_encode((uint32_t)cv->cps[i], (char *)u);
        byte_level(map, u, (size_t)len, buf);
        v->tok[i] = strdup(buf);
        v->type[i] = TOK_NORMAL;
        if (!v->tok[i]) return tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory (GGUF vocabulary)"), -1;
        for (int k = 1; k < len; k++) {
            byte_level(map, u, (size_t)k, left);
            byte_level(map, u + k, 1, right);
            snprintf(m, sizeof m, "%s %s", left, right);
            if (has_str(v->merge, v->n_merges, m)) continue;
            if (!(v->merge[v->n_merges++] = strdup(m))) return tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory"), -1;
        }
    }
    return 0;
}

/* An imported GPT-2's tokenizer.gpt2.vocab (token -> id JSON) and tokenizer.gpt2.merges ("#version" line,
 * then "LEFT RIGHT" lines). Ids the map lacks (a padded vocabulary) become "[PAD<id>]" unused tokens; a token
 * with a character outside bytes_to_unicode (an added token: "<|endoftext|>") is a control token, and
 * "<|endoftext|>" is the end token. */
static int gpt2_vocab(const tfm_container *c, const char *path, int n_vocab, gguf_vocab *v) {
    const tfm_entry *ej = tfm_container_get(c, "tokenizer.gpt2.vocab");
    const tfm_entry *em = tfm_container_get(c, "tokenizer.gpt2.merges");
    if (!ej || !em || ej->dtype != TFM_DT_BYTES || em->dtype != TFM_DT_BYTES)
        return tfm_set_error("%s: tokenizer.gpt2.vocab / tokenizer.gpt2.merges missing", path), -1;
    tfm_json *j = tfm_json_parse(ej->data, ej->nbytes);
    if (!j) return tfm_prefix_error("%s: tokenizer.gpt2.vocab: ", path);
    const char *ms = em->data;
    int n_lines = 0;
    for (size_t i = 0; i < em->nbytes; i++) n_lines += ms[i] == '\n';
    int rc = -1;
    if (j->type != TFM_JSON_OBJECT) {
        tfm_set_error("%s: tokenizer.gpt2.vocab is not a JSON object", path);
    } else if (!vocab_alloc(v, n_vocab, n_lines + 1)) {
        uint32_t map[256];
        byte_chars(map);
        rc = 0;
        for (const tfm_json *m = j->child; m && !rc; m = m->next) {
            int id;
            if (tfm_json_int(m, &id) || id < 0 || id >= n_vocab || v->tok[id]) {
                rc = -1, tfm_set_error("%s: tokenizer.gpt2.vocab: token '%.40s' has a bad or repeated id "
                                       "(vocab_size %d)", path, m->key, n_vocab);
                break;
            }
            if (!(v->tok[id] = strdup(m->key))) rc = -1, tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory");
            v->type[id] = TOK_NORMAL;
            for (size_t k = 0, len = strlen(m->key); k < len && v->type[id] == TOK_NORMAL;) {
                uint32_t cp;
                int step = tfm_utf8_decode(m->key + k, len - k, &cp), byte_char = 0;
                for (int b = 0; b < 256 && !byte_char; b++) byte_char = step > 0 && map[b] == cp;
                if (!byte_char) v->type[id] = TOK_CONTROL;
                k += step > 0 ? (size_t)step : 1;
            }
            if (!strcmp(m->key, "<|endoftext|>")) v->eos = id;
        }
        for (int i = 0; i < n_vocab && !rc; i++)
            if (!v->tok[i]) {
                char pad[32];
                snprintf(pad, sizeof pad, "[PAD%d]", i);
                if (!(v->tok[i] = strdup(pad))) rc = -1, tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory");
                v->type[i] = TOK_UNUSED;
            }
        v->n_merges = 0;   /* the merges: every line but a first "#version" one and empty ones */
        for (const char *p = ms, *end = ms + em->nbytes; p < end && !rc;) {
            const char *e = memchr(p, '\n', (size_t)(end - p));
            size_t line = e ? (size_t)(e - p) : (size_t)(end - p), n = line;
            if (n && p[n - 1] == '\r') n--;
            if (n && !(p == ms && n >= 8 && !strncmp(p, "#version", 8))) {
                if (!memchr(p, ' ', n))
                    rc = -1, tfm_set_error("%s: tokenizer.gpt2.merges: a line without a space", path);
                else if (!(v->merge[v->n_merges++] = strndup(p, n)))
                    rc = -1, tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory");
            }
            p += line + 1;
        }
    }
    tfm_json_free(j);
    return rc;
}

/* ------------------------------------------------------------------ tensors */

typedef struct {
    char name[64];
    int ndim;
    uint64_t dims[2];        /* innermost first: a (out, in) matrix is {in, out} */
    int type;                /* GGML_F32 / GGML_F16 / GGML_Q8_0 */
    const float *part[3];    /* the rows, in up to three pieces written one after another (fused q|k|v) */
    size_t part_n[3];
    uint64_t offset;
} gguf_tensor;

typedef struct {
    gguf_tensor *t;
    int n;
    bytes head;              /* everything before the tensor data (without the padding) */
} gguf_file;

static size_t numel(const gguf_tensor *t) { return t->part_n[0] + t->part_n[1] + t->part_n[2]; }
static uint64_t data_bytes(const gguf_tensor *t) {
    size_t n = numel(t);
    return t->type == GGML_Q8_0 ? n / Q8_0_BLOCK * (2 + Q8_0_BLOCK) : n * (t->type == GGML_F16 ? 2 : 4);
}
static uint64_t pad_to(uint64_t x) { return (x + GGUF_ALIGN - 1) / GGUF_ALIGN * GGUF_ALIGN; }

/* The type of a tensor, as llama.cpp's converter chooses: 1-D tensors (norms, biases) and the position table stay
 * F32; matrices take outtype, and q8_0 falls back to F16 for rows that are not whole blocks of 32. */
static int tensor_type(int outtype, const char *name, int ndim, uint64_t row) {
    if (ndim != 2 || outtype == TFM_GGUF_F32 || !strcmp(name, "position_embd.weight")) return GGML_F32;
    return outtype == TFM_GGUF_Q8_0 && row % Q8_0_BLOCK == 0 ? GGML_Q8_0 : GGML_F16;
}

static void add(gguf_file *g, int outtype, const char *name, const tfm_tensor *a, const tfm_tensor *b,
                const tfm_tensor *c) {
    gguf_tensor *t = &g->t[g->n++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    const tfm_tensor *parts[3] = {a, b, c};
    int rows = 0;
    for (int k = 0; k < 3 && parts[k]; k++) {
        t->part[k] = parts[k]->data, t->part_n[k] = parts[k]->size;
        rows += parts[k]->shape[0];   /* matrices: rows; vectors: length */
    }
    t->ndim = a->ndim;
    if (a->ndim == 2) t->dims[0] = (uint64_t)a->shape[1], t->dims[1] = (uint64_t)rows;
    else t->dims[0] = (uint64_t)rows;
    t->type = tensor_type(outtype, name, t->ndim, t->dims[0]);
}

static void add_block(gguf_file *g, int outtype, int l, const tfm_gpt_block *b) {
    char n[64];
#define ADD(suffix, x, y, z) (snprintf(n, sizeof n, "blk.%d.%s", l, suffix), add(g, outtype, n, x, y, z))
    ADD("attn_norm.weight", b->ln1.weight, NULL, NULL);
    ADD("attn_norm.bias", b->ln1.bias, NULL, NULL);
    ADD("attn_qkv.weight", b->attn.W_q.W, b->attn.W_k.W, b->attn.W_v.W);
    ADD("attn_qkv.bias", b->attn.W_q.b, b->attn.W_k.b, b->attn.W_v.b);
    ADD("attn_output.weight", b->attn.W_o.W, NULL, NULL);
    ADD("attn_output.bias", b->attn.W_o.b, NULL, NULL);
    ADD("ffn_norm.weight", b->ln2.weight, NULL, NULL);
    ADD("ffn_norm.bias", b->ln2.bias, NULL, NULL);
    ADD("ffn_up.weight", b->ffn.dense1.W, NULL, NULL);
    ADD("ffn_up.bias", b->ffn.dense1.b, NULL, NULL);
    ADD("ffn_down.weight", b->ffn.dense2.W, NULL, NULL);
    ADD("ffn_down.bias", b->ffn.dense2.b, NULL, NULL);
#undef ADD
}

/* metadata: the architecture's hyperparameters and the tokenizer */
static void put_metadata(bytes *h, const tfm_gpt_config *c, int outtype, const gguf_vocab *v, const char *name) {
    kv_str(h, "general.architecture", "gpt2");
    kv_str(h, "general.name", name);
    static const uint32_t ftype[] = {0, 1, 7};      /* llama_ftype: ALL_F32, MOSTLY_F16, MOSTLY_Q8_0 */
    kv_u32(h, "general.file_type", ftype[outtype]);
    kv_u32(h, "general.alignment", GGUF_ALIGN);
    kv_u32(h, "gpt2.context_length", (uint32_t)c->block_size);
    kv_u32(h, "gpt2.embedding_length", (uint32_t)c->n_embd);
    kv_u32(h, "gpt2.feed_forward_length", (uint32_t)(4 * c->n_embd));
    kv_u32(h, "gpt2.block_count", (uint32_t)c->n_layer);
    kv_u32(h, "gpt2.attention.head_count", (uint32_t)c->n_head);
    kv_f32(h, "gpt2.attention.layer_norm_epsilon", c->ln_eps > 0 ? c->ln_eps : 1e-5f);
    kv_str(h, "tokenizer.ggml.model", "gpt2");
    kv_str(h, "tokenizer.ggml.pre", "gpt-2");
    kv_array(h, "tokenizer.ggml.tokens", G_STRING, (uint64_t)v->n);
    for (int i = 0; i < v->n; i++) put_str(h, v->tok[i], strlen(v->tok[i]));
    kv_array(h, "tokenizer.ggml.token_type", G_I32, (uint64_t)v->n);
    for (int i = 0; i < v->n; i++) put(h, &v->type[i], 4);
    kv_array(h, "tokenizer.ggml.merges", G_STRING, (uint64_t)v->n_merges);
    for (int i = 0; i < v->n_merges; i++) put_str(h, v->merge[i], strlen(v->merge[i]));
    if (v->eos >= 0) {
        kv_u32(h, "tokenizer.ggml.bos_token_id", (uint32_t)v->eos);
        kv_u32(h, "tokenizer.ggml.eos_token_id", (uint32_t)v->eos);
    }
    kv_bool(h, "tokenizer.ggml.add_bos_token", 0);
    kv_bool(h, "tokenizer.ggml.add_eos_token", 0);
}

/* ------------------------------------------------------------------ writing */

/* float -> IEEE half, round to nearest even (overflow -> inf, as numpy's astype(float16)) */
static uint16_t f32_to_f16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000, exp = (x >> 23) & 0xff, mant = x & 0x7fffff;
    if (exp == 0xff) return (uint16_t)(sign | 0x7c00 | (mant ? 0x200 : 0));
    int e = (int)exp - 127 + 15;
    if (e >= 31) return (uint16_t)(sign | 0x7c00);
    if (e <= 0) {   /* a subnormal half: the 24-bit significand shifted right by 14 - e */
        if (e < -10) return (uint16_t)sign;
        uint32_t m = mant | 0x800000, shift = (uint32_t)(14 - e), h = m >> shift, rem = m & ((1u << shift) - 1),
                 mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (h & 1))) h++;
        return (uint16_t)(sign | h);
    }
    uint32_t h = sign | (uint32_t)e << 10 | mant >> 13, rem = mant & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) h++;   /* a carry rounds into the exponent (up to inf) */
    return (uint16_t)h;
}

static int write_zeros(FILE *f, size_t n) {
    static const char z[GGUF_ALIGN];
    return n == 0 || fwrite(z, 1, n, f) == n;
}

/* Q8_0 blocks of n floats (a multiple of 32), as llama.cpp's reference quantizer: d = max|x| / 127 (stored as a
 * half), q = x / d rounded half away from zero (C roundf). */
static int write_q8_0(FILE *f, const float *p, size_t n) {
    unsigned char blk[2 + Q8_0_BLOCK];
    for (size_t i = 0; i < n; i += Q8_0_BLOCK) {
        float amax = 0;
        for (int j = 0; j < Q8_0_BLOCK; j++) amax = fmaxf(amax, fabsf(p[i + j]));
        float d = amax / 127.0f, id = d != 0 ? 1.0f / d : 0.0f;
        uint16_t h = f32_to_f16(d);
        memcpy(blk, &h, 2);
        for (int j = 0; j < Q8_0_BLOCK; j++) blk[2 + j] = (unsigned char)(signed char)roundf(p[i + j] * id);
        if (fwrite(blk, 1, sizeof blk, f) != sizeof blk) return 0;
    }
    return 1;
}

static int write_tensor(FILE *f, const gguf_tensor *t) {
    for (int k = 0; k < 3; k++) {
        const float *p = t->part[k];
        size_t n = t->part_n[k];
        if (!n) continue;
        if (t->type == GGML_Q8_0) {   /* each part is whole rows, so whole blocks */
            if (!write_q8_0(f, p, n)) return 0;
            continue;
        }
        if (t->type == GGML_F32) {
            if (fwrite(p, 4, n, f) != n) return 0;
            continue;
        }
        uint16_t buf[4096];
        for (size_t i = 0; i < n; i += 4096) {
            size_t m = n - i < 4096 ? n - i : 4096;
            for (size_t j = 0; j < m; j++) buf[j] = f32_to_f16(p[i + j]);
            if (fwrite(buf, 2, m, f) != m) return 0;
        }
    }
    return 1;
}

static int write_gguf(FILE *f, const void *ctx) {
    const gguf_file *g = ctx;
    if (fwrite(g->head.p, 1, g->head.len, f) != g->head.len || !write_zeros(f, pad_to(g->head.len) - g->head.len))
        return 0;
    uint64_t at = 0;
    for (int i = 0; i < g->n; i++) {
        const gguf_tensor *t = &g->t[i];
        if (!write_zeros(f, (size_t)(t->offset - at)) || !write_tensor(f, t)) return 0;
        at = t->offset + data_bytes(t);
    }
    return write_zeros(f, (size_t)(pad_to(at) - at));
}

/* The header: magic, version, counts, metadata, tensor infos with their offsets. */
static int build_head(gguf_file *g, const tfm_gpt *m, const gguf_vocab *v, int outtype, const char *name) {
    int L = m->cfg.n_layer;
    g->t = calloc((size_t)(4 + 12 * L + 3), sizeof *g->t);
    if (!g->t) return tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory (GGUF)"), -1;
    add(g, outtype, "token_embd.weight", m->wte.weight, NULL, NULL);
    add(g, outtype, "position_embd.weight", m->wpe.weight, NULL, NULL);
    for (int l = 0; l < L; l++) add_block(g, outtype, l, &m->blocks[l]);
    add(g, outtype, "output_norm.weight", m->ln_f.weight, NULL, NULL);
    add(g, outtype, "output_norm.bias", m->ln_f.bias, NULL, NULL);
    add(g, outtype, "output.weight", m->wte.weight, NULL, NULL);   /* the tied LM head */
    bytes meta = {0}, *h = &g->head;
    put_metadata(&meta, &m->cfg, outtype, v, name);
    put(h, "GGUF", 4);
    put_u32(h, 3);
    put_u64(h, (uint64_t)g->n);
    put_u64(h, (uint64_t)meta.n_kv);
    put(h, meta.p, meta.len);
    h->oom |= meta.oom;
    free(meta.p);
    uint64_t off = 0;
    for (int i = 0; i < g->n; i++) {
        gguf_tensor *t = &g->t[i];
        t->offset = off;
        put_str(h, t->name, strlen(t->name));
        put_u32(h, (uint32_t)t->ndim);
        for (int d = 0; d < t->ndim; d++) put_u64(h, t->dims[d]);
        put_u32(h, (uint32_t)t->type);
        put_u64(h, t->offset);
        off = pad_to(off + data_bytes(t));
    }
    return h->oom ? (tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory (GGUF header)"), -1) : 0;
}

/* An output path that names the input file (the same path, or another name for the same file) */
static int same_file(const char *a, const char *b) {
    struct stat sa, sb;
    if (!strcmp(a, b)) return 1;
    return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

int tfm_export_gguf(const char *tfm_path, const char *gguf_path, int outtype) {
    if (same_file(tfm_path, gguf_path))
        return tfm_set_error("%s: the GGUF file would overwrite the input checkpoint", gguf_path), -1;
    if (outtype != TFM_GGUF_F32 && outtype != TFM_GGUF_F16 && outtype != TFM_GGUF_Q8_0)
        return tfm_set_error("unknown GGUF outtype %d", outtype), -1;
    tfm_container c;
    if (tfm_container_load_except(&c, tfm_path, "adam.")) return tfm_container_free(&c), -1;
    tfm_gpt m;
    tfm_char_vocab cv;
    gguf_vocab v;
    memset(&v, 0, sizeof v);
    gguf_file g;
    memset(&g, 0, sizeof g);
    int rc = -1, have_model = 0, have_chars = 0;
    const char *kind = tfm_container_str(&c, "meta.kind");
    if (!kind) goto done;
    if (strcmp(kind, "gpt")) {
        tfm_set_error("%s: a '%.40s' checkpoint: GGUF export takes GPT language models (train-lm, imported GPT-2)",
                      tfm_path, kind);
        goto done;
    }
    if (tfm_gpt_get_model(&m, NULL, NULL, &c, tfm_path)) goto done;
    have_model = 1;
    if (m.cfg.attention != TFM_ATTN_CAUSAL) {
        tfm_set_error("%s: synthesizer attention has no llama.cpp architecture (GGUF export takes causal GPTs)",
                      tfm_path);
        goto done;
    }
    if (tfm_container_get(&c, "tokenizer.chars")) {
        if (tfm_char_vocab_from_string(&cv, tfm_container_str(&c, "tokenizer.chars"))) {
            tfm_prefix_error("%s: tokenizer.chars: ", tfm_path);
            goto done;
        }
        have_chars = 1;
        if (cv.n != m.cfg.vocab_size) {
            tfm_set_error("%s: tokenizer has %d characters but config.vocab_size is %d", tfm_path, cv.n,
                          m.cfg.vocab_size);
            goto done;
        }
        if (char_vocab(&cv, &v)) goto done;
    } else if (gpt2_vocab(&c, tfm_path, m.cfg.vocab_size, &v)) {
        goto done;
    }
    const char *base = strrchr(tfm_path, '/');
    if (build_head(&g, &m, &v, outtype, base ? base + 1 : tfm_path)) goto done;
    rc = tfm_save_atomic(gguf_path, write_gguf, &g);
done:
    free(g.t);
    free(g.head.p);
    vocab_free(&v);
    if (have_chars) tfm_char_vocab_free(&cv);
    if (have_model) tfm_gpt_free(&m);
    tfm_container_free(&c);
    return rc ? tfm_error_in_data() : 0;
}
