/* Hugging Face model folders -> tfm checkpoints: GPT-2 (GPT2LMHeadModel) and MarianMT (MarianMTModel).
 * See include/tfm/interchange.h (what is read and checked) and docs/INTEROP.md.
 *
 * The tensors are mapped onto the model the checked config builds; each tfm parameter names the Hugging
 * Face tensor it comes from and how (copied, transposed from a Conv1D, a third of c_attn). Every tensor of
 * the file must be used exactly so (a few known buffers excepted), else the import fails naming it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tfm/checkpoint.h"
#include "tfm/interchange.h"
#include "tfm/safetensors.h"
#include "tfm/tokenizers.h"

#define MAX_TOKENIZER_FILE ((size_t)256 << 20)

typedef struct {
    const char *dir;
    char cfg_name[1024], st_name[1024];   /* DIR/config.json, DIR/model.safetensors (for errors) */
    tfm_st_file st;
    unsigned char *used;                  /* per file tensor: taken */
    const char *prefix;                   /* GPT-2: "transformer." (save_pretrained) or "" (the original files) */
    float *tmp;                           /* one tensor's elements, for transposes */
    size_t tmp_cap;
} hf_import;

/* ------------------------------------------------------------------ files */

static int join(char *buf, size_t n, const char *dir, const char *name) {
    if ((size_t)snprintf(buf, n, "%s/%s", dir, name) >= n) return tfm_set_error("%s: path too long", dir), -1;
    return 0;
}

static int is_file(const char *path) {
    struct stat s;
    return stat(path, &s) == 0 && S_ISREG(s.st_mode);
}

/* The whole file (at most max bytes), NUL-terminated; NULL with an error naming it. */
static char *read_file(const char *path, size_t max, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return tfm_set_error_kind(TFM_ERR_IO, "%s: cannot open", path), NULL;
    struct stat s;
    char *buf = NULL;
    if (fstat(fileno(f), &s) || !S_ISREG(s.st_mode)) {
        tfm_set_error("%s: not a regular file", path);
    } else if ((uint64_t)s.st_size > max) {
        tfm_set_error("%s: %lld bytes, more than the %zu this file may have", path, (long long)s.st_size, max);
    } else if (s.st_size == 0) {
        tfm_set_error("%s: empty file", path);
    } else if (!(buf = malloc((size_t)s.st_size + 1))) {
        tfm_set_error_kind(TFM_ERR_NOMEM, "%s: out of memory", path);
    } else if (fread(buf, 1, (size_t)s.st_size, f) != (size_t)s.st_size) {
        tfm_set_error_kind(TFM_ERR_IO, "%s: read error", path);
        free(buf), buf = NULL;
    } else {
        buf[s.st_size] = 0;
        *len = (size_t)s.st_size;
    }
    fclose(f);
    return buf;
}

/* A tokenizer file of DIR as a raw-bytes checkpoint entry. */
static int put_file(tfm_container *c, const char *entry, const char *dir, const char *name) {
    char path[1024];
    size_t len = 0;
    if (join(path, sizeof path, dir, name)) return -1;
    char *data = read_file(path, MAX_TOKENIZER_FILE, &len);
    if (!data) return -1;
    int shape[1] = {(int)len};
    tfm_entry *e = tfm_container_add(c, entry, TFM_DT_BYTES, 1, shape, data, len);
    free(data);
    return e ? 0 : tfm_prefix_error("%s: ", path);
}

/* ------------------------------------------------------------------ tensors */

static void shape_str(char *buf, size_t n, int ndim, const int *shape) {
    size_t k = (size_t)snprintf(buf, n, "(");
    for (int d = 0; d < ndim && k < n; d++) k += (size_t)snprintf(buf + k, n - k, d ? ",%d" : "%d", shape[d]);
    if (k < n) snprintf(buf + k, n - k, ")");
}

static const tfm_st_tensor *find(hf_import *h, const char *name) {
    for (int i = 0; i < h->st.n; i++)
        if (!strcmp(h->st.t[i].name, name)) return &h->st.t[i];
    return NULL;
}

static void mark(hf_import *h, const tfm_st_tensor *t) { h->used[t - h->st.t] = 1; }

/* The tensor `name` with exactly this shape, marked used; NULL with an error naming the tensor. */
static const tfm_st_tensor *take(hf_import *h, const char *name, int ndim, const int *shape) {
    char want[64], have[64];
    shape_str(want, sizeof want, ndim, shape);
    const tfm_st_tensor *t = find(h, name);
    if (!t)
        return tfm_set_error("%s: tensor '%.200s' missing (%s needs shape %s)", h->st_name, name, h->cfg_name, want),
               NULL;
    int same = t->ndim == ndim;
    for (int d = 0; same && d < ndim; d++) same = t->shape[d] == shape[d];
    if (!same) {
        shape_str(have, sizeof have, t->ndim, t->shape);
        return tfm_set_error("%s: tensor '%.200s' has shape %s but %s needs %s", h->st_name, name, have, h->cfg_name,
                             want), NULL;
    }
    mark(h, t);
    return t;
}

/* h->tmp sized for n floats */
static float *scratch(hf_import *h, size_t n) {
    if (n > h->tmp_cap) {
        float *p = realloc(h->tmp, n * sizeof(float));
        if (!p) return tfm_set_error_kind(TFM_ERR_NOMEM, "%s: out of memory", h->st_name), NULL;
        h->tmp = p, h->tmp_cap = n;
    }
    return h->tmp;
}

/* dst <- the tensor of the same shape */
static int copy(hf_import *h, tfm_tensor *dst, const char *name) {
    const tfm_st_tensor *t = take(h, name, dst->ndim, dst->shape);
    if (!t) return -1;
    tfm_st_read_f32(t, dst->data);
    return 0;
}

/* dst (out, in) <- a Conv1D weight (in, out): y = x W + b is nn.Linear's y = x W^T + b with W transposed */
static int copy_transposed(hf_import *h, tfm_tensor *dst, const char *name) {
    int out = dst->shape[0], in = dst->shape[1];
    const tfm_st_tensor *t = take(h, name, 2, (int[]){in, out});
    float *s = t ? scratch(h, (size_t)in * out) : NULL;
    if (!s) return -1;
    tfm_st_read_f32(t, s);
    for (int o = 0; o < out; o++)
        for (int i = 0; i < in; i++) dst->data[(size_t)o * in + i] = s[(size_t)i * out + o];
    return 0;
}

/* GPT-2's c_attn (C, 3C) Conv1D: output columns [0,C) are the queries, [C,2C) the keys, [2C,3C) the values */
static int copy_qkv(hf_import *h, tfm_MultiHeadAttention *a, const char *w_name, const char *b_name) {
    int C = a->W_q.W->shape[0];
    const tfm_st_tensor *w = take(h, w_name, 2, (int[]){C, 3 * C}), *b = w ? take(h, b_name, 1, (int[]){3 * C}) : NULL;
    float *s = b ? scratch(h, (size_t)3 * C * C) : NULL;
    if (!s) return -1;
    tfm_Linear *lin[3] = {&a->W_q, &a->W_k, &a->W_v};
    tfm_st_read_f32(w, s);
    for (int k = 0; k < 3; k++)
        for (int o = 0; o < C; o++)
            for (int i = 0; i < C; i++) lin[k]->W->data[(size_t)o * C + i] = s[(size_t)i * 3 * C + k * C + o];
    tfm_st_read_f32(b, s);
    for (int k = 0; k < 3; k++) memcpy(lin[k]->b->data, s + (size_t)k * C, sizeof(float) * (size_t)C);
    return 0;
}

/* An optional tensor that must hold the same bytes as `same` (a tied copy Hugging Face may or may not
 * save): absent or equal is fine. */
static int tied_copy(hf_import *h, const char *name, const tfm_st_tensor *same, const char *why) {
    const tfm_st_tensor *t = find(h, name);
    if (!t) return 0;
    if (!take(h, name, same->ndim, same->shape)) return -1;
    if (t->dtype != same->dtype || memcmp(t->data, same->data, tfm_st_numel(t) * tfm_st_elem_size(t)))
        return tfm_set_error("%s: tensor '%.200s' differs from '%.200s' (%s)", h->st_name, name, same->name, why), -1;
    return 0;
}

static int64_t file_elems(const hf_import *h) {
    int64_t n = 0;
    for (int i = 0; i < h->st.n; i++) n += (int64_t)tfm_st_numel(&h->st.t[i]);
    return n;
}

/* A config cannot make the import allocate far more than the file holds (then the missing tensor is named). */
static int check_budget(const hf_import *h, int64_t need) {
    int64_t have = file_elems(h);
    if (need < 0 || need > 2 * have + ((int64_t)1 << 20))
        return tfm_set_error("%s: implies %lld parameters but %s holds only %lld", h->cfg_name, (long long)need,
                             h->st_name, (long long)have), -1;
    return 0;
}

static int check_all_used(const hf_import *h, const char *model) {
    for (int i = 0; i < h->st.n; i++)
        if (!h->used[i])
            return tfm_set_error("%s: tensor '%.200s' is not part of the %s model %s describes", h->st_name,
                                 h->st.t[i].name, model, h->cfg_name), -1;
    return 0;
}

/* ------------------------------------------------------------------ GPT-2 */

static int gpt2_weights(hf_import *h, tfm_gpt *m) {
    char a[256], b[256];
    const char *p = h->prefix;
#define HF(buf, ...) (snprintf(buf, sizeof buf, __VA_ARGS__), buf)
    if (copy(h, m->wte.weight, HF(a, "%swte.weight", p)) || copy(h, m->wpe.weight, HF(a, "%swpe.weight", p)))
        return -1;
    for (int l = 0; l < m->cfg.n_layer; l++) {
        tfm_gpt_block *k = &m->blocks[l];
        if (copy(h, k->ln1.weight, HF(a, "%sh.%d.ln_1.weight", p, l)) ||
            copy(h, k->ln1.bias, HF(a, "%sh.%d.ln_1.bias", p, l)) ||
            copy_qkv(h, &k->attn, HF(a, "%sh.%d.attn.c_attn.weight", p, l), HF(b, "%sh.%d.attn.c_attn.bias", p, l)) ||
            copy_transposed(h, k->attn.W_o.W, HF(a, "%sh.%d.attn.c_proj.weight", p, l)) ||
            copy(h, k->attn.W_o.b, HF(a, "%sh.%d.attn.c_proj.bias", p, l)) ||
            copy(h, k->ln2.weight, HF(a, "%sh.%d.ln_2.weight", p, l)) ||
            copy(h, k->ln2.bias, HF(a, "%sh.%d.ln_2.bias", p, l)) ||
            copy_transposed(h, k->ffn.dense1.W, HF(a, "%sh.%d.mlp.c_fc.weight", p, l)) ||
            copy(h, k->ffn.dense1.b, HF(a, "%sh.%d.mlp.c_fc.bias", p, l)) ||
            copy_transposed(h, k->ffn.dense2.W, HF(a, "%sh.%d.mlp.c_proj.weight", p, l)) ||
            copy(h, k->ffn.dense2.b, HF(a, "%sh.%d.mlp.c_proj.bias", p, l)))
            return -1;
        /* the causal-mask buffers older checkpoints saved: not weights */
        const tfm_st_tensor *t = find(h, HF(a, "%sh.%d.attn.bias", p, l));
        if (t) mark(h, t);
        if ((t = find(h, HF(a, "%sh.%d.attn.masked_bias", p, l)))) mark(h, t);
    }
    if (copy(h, m->ln_f.weight, HF(a, "%sln_f.weight", p)) || copy(h, m->ln_f.bias, HF(a, "%sln_f.bias", p)))
        return -1;
    return tied_copy(h, "lm_head.weight", find(h, HF(a, "%swte.weight", p)), "tfm's LM head is the token embedding");
#undef HF
}

/* vocab.json + merges.txt (save_pretrained), or OpenAI's encoder.json + vocab.bpe; checked by loading them
 * (include/tfm/tokenizers.h), and its ids must be the model's. */
static int gpt2_tokenizer(const char *dir, tfm_container *c, int n_model) {
    static const char *const pairs[2][2] = {{"vocab.json", "merges.txt"}, {"encoder.json", "vocab.bpe"}};
    char p0[1024], p1[1024];
    for (int k = 0; k < 2; k++) {
        if (join(p0, sizeof p0, dir, pairs[k][0]) || join(p1, sizeof p1, dir, pairs[k][1])) return -1;
        if (!is_file(p0) || !is_file(p1)) continue;
        tfm_container_add_str(c, "tokenizer.kind", "gpt2");
        if (put_file(c, "tokenizer.gpt2.vocab", dir, pairs[k][0]) ||
            put_file(c, "tokenizer.gpt2.merges", dir, pairs[k][1]))
            return -1;
        const tfm_entry *v = tfm_container_get(c, "tokenizer.gpt2.vocab");
        const tfm_entry *m = tfm_container_get(c, "tokenizer.gpt2.merges");
        tfm_gpt2_bpe *t = tfm_gpt2_bpe_from_bytes(v->data, v->nbytes, m->data, m->nbytes, p0, p1);
        if (!t) return -1;
        int n = tfm_gpt2_bpe_n_vocab(t);
        tfm_gpt2_bpe_free(t);
        if (n > n_model)
            return tfm_set_error("%s: has ids up to %d but config.json's vocab_size is %d", p0, n - 1, n_model), -1;
        return 0;
    }
    return tfm_set_error("%s: no GPT-2 tokenizer (vocab.json + merges.txt, or encoder.json + vocab.bpe)", dir), -1;
}

static int import_gpt2(hf_import *h, const tfm_hf_config *hc, const char *out) {
    tfm_gpt_config c = {hc->vocab_size, hc->max_positions, hc->n_layer, hc->n_head, hc->d_model, hc->dropout,
                        TFM_ATTN_CAUSAL, hc->ln_eps == 1e-5f ? 0.0f : hc->ln_eps};
    if (tfm_gpt_config_check(&c)) return tfm_prefix_error("%s: ", h->cfg_name);
    h->prefix = find(h, "transformer.wte.weight") ? "transformer." : "";
    if (check_budget(h, tfm_gpt_n_params(&c))) return -1;
    tfm_gpt m;
    if (tfm_gpt_init(&m, &c)) return tfm_prefix_error("%s: ", h->cfg_name);
    tfm_container ck;
    tfm_container_init(&ck);
    int rc = -1;
    if (!gpt2_weights(h, &m) && !check_all_used(h, "gpt2")) {
        tfm_st_free(&h->st);   /* the weights are in m now: the file's copy is not needed */
        tfm_gpt_put_config(&ck, &c);
        if (!gpt2_tokenizer(h->dir, &ck, c.vocab_size)) {
            tfm_ckpt_put_params(&ck, &m.params);
            rc = tfm_container_save(&ck, out);
        }
    }
    tfm_container_free(&ck);
    tfm_gpt_free(&m);
    return rc;
}

/* ------------------------------------------------------------------ MarianMT */

/* tfm parameter `tfm` <- the file's tensor `hf` (the same layout: nn.Linear, LayerNorm, Embedding) */
static int pcopy(hf_import *h, tfm_params *P, const char *tfm, const char *hf) {
    tfm_tensor *dst = tfm_params_find(P, tfm);
    TFM_ASSERT(dst, "hf import: the model has no parameter %s", tfm);
    return copy(h, dst, hf);
}

/* tfm's TFM.weight / TFM.bias <- HF.weight / HF.bias, for each (tfm, hf) suffix pair */
static int pcopy_wb(hf_import *h, tfm_params *P, const char *tfm, const char *hf, const char *const (*pairs)[2],
                    int n) {
    char a[256], b[256];
    static const char *const wb[2] = {"weight", "bias"};
    for (int k = 0; k < n; k++)
        for (int j = 0; j < 2; j++) {
            snprintf(a, sizeof a, "%s%s%s.%s", tfm, *pairs[k][0] ? "." : "", pairs[k][0], wb[j]);
            snprintf(b, sizeof b, "%s%s%s.%s", hf, *pairs[k][1] ? "." : "", pairs[k][1], wb[j]);
            if (pcopy(h, P, a, b)) return -1;
        }
    return 0;
}

static int marian_attn(hf_import *h, tfm_params *P, const char *tfm, const char *hf) {
    static const char *const pairs[4][2] = {{"W_q", "q_proj"}, {"W_k", "k_proj"}, {"W_v", "v_proj"},
                                            {"W_o", "out_proj"}};
    return pcopy_wb(h, P, tfm, hf, pairs, 4);
}

static int marian_ffn(hf_import *h, tfm_params *P, const char *tfm, const char *hf) {
    static const char *const pairs[2][2] = {{"dense1", "fc1"}, {"dense2", "fc2"}};
    return pcopy_wb(h, P, tfm, hf, pairs, 2);
}

static int layer_norm(hf_import *h, tfm_params *P, const char *tfm, const char *hf) {
    static const char *const pairs[1][2] = {{"", ""}};
    return pcopy_wb(h, P, tfm, hf, pairs, 1);
}

/* An optional stored copy of the sinusoidal table (older checkpoints saved embed_positions): it must be
 * Marian's table, which tfm computes (tfm_PositionalEncoding_init_halves), to 1e-6. */
static int check_positions(hf_import *h, const char *name, int max_len, int d) {
    const tfm_st_tensor *t = find(h, name);
    if (!t) return 0;
    if (!take(h, name, 2, (int[]){max_len, d})) return -1;
    tfm_PositionalEncoding pe;
    float *s = scratch(h, (size_t)max_len * d);
    if (!s || tfm_PositionalEncoding_init_halves(&pe, max_len, d)) return -1;
    tfm_st_read_f32(t, s);
    size_t bad = (size_t)-1;
    for (size_t i = 0; i < (size_t)max_len * d && bad == (size_t)-1; i++)
        if (!(fabsf(s[i] - pe.P[i]) <= 1e-6f)) bad = i;
    tfm_PositionalEncoding_free(&pe);
    if (bad != (size_t)-1)
        return tfm_set_error("%s: tensor '%.200s' is not Marian's sinusoidal table (position %zu, feature %zu)",
                             h->st_name, name, bad / (size_t)d, bad % (size_t)d), -1;
    return 0;
}

/* The token embeddings, the output layer and its bias (final_logits_bias; absent = zeros, as Hugging Face
 * loads it). Shared: one matrix, which every tied copy in the file must equal. */
static int marian_embeddings(hf_import *h, tfm_mt_net *m) {
    const tfm_mt_config *c = &m->cfg;
    tfm_params *P = &m->params;
    tfm_tensor *bias = tfm_params_find(P, "decoder.dense.bias");   /* zeros (the model is built zeroed) */
    const tfm_st_tensor *flb = find(h, "final_logits_bias");
    if (flb) {
        if (!take(h, "final_logits_bias", 2, (int[]){1, c->tgt_vocab})) return -1;
        tfm_st_read_f32(flb, bias->data);
    }
    if (c->share_embeddings) {
        static const char *const names[4] = {"model.shared.weight", "model.encoder.embed_tokens.weight",
                                             "model.decoder.embed_tokens.weight", "lm_head.weight"};
        int k = 0;
        while (k < 4 && !find(h, names[k])) k++;
        if (k == 4) k = 0;   /* none: take() names the first */
        tfm_tensor *E = tfm_params_find(P, "shared.embedding.weight");
        if (copy(h, E, names[k])) return -1;
        const tfm_st_tensor *src = find(h, names[k]);
        for (int j = k + 1; j < 4; j++)
            if (tied_copy(h, names[j], src, "the model shares one embedding matrix")) return -1;
        return 0;
    }
    if (copy(h, tfm_params_find(P, "encoder.embedding.weight"), "model.encoder.embed_tokens.weight") ||
        copy(h, tfm_params_find(P, "decoder.embedding.weight"), "model.decoder.embed_tokens.weight"))
        return -1;
    tfm_tensor *W = tfm_params_find(P, "decoder.dense.weight"), *D = tfm_params_find(P, "decoder.embedding.weight");
    memcpy(W->data, D->data, sizeof(float) * W->size);   /* lm_head is tied to the decoder's embedding */
    return tied_copy(h, "lm_head.weight", find(h, "model.decoder.embed_tokens.weight"),
                     "tie_word_embeddings: the output layer is the target embedding");
}

static int marian_weights(hf_import *h, tfm_mt_net *m) {
    tfm_params *P = &m->params;
    char t[256], f[256];
    if (marian_embeddings(h, m)) return -1;
    const char *e = "model.encoder.layers", *d = "model.decoder.layers";
#define T(...) (snprintf(t, sizeof t, __VA_ARGS__), t)
#define F(...) (snprintf(f, sizeof f, __VA_ARGS__), f)
    for (int l = 0; l < m->cfg.n_layer; l++)
        if (marian_attn(h, P, T("encoder.blocks.%d.attention", l), F("%s.%d.self_attn", e, l)) ||
            layer_norm(h, P, T("encoder.blocks.%d.addnorm1.ln", l), F("%s.%d.self_attn_layer_norm", e, l)) ||
            marian_ffn(h, P, T("encoder.blocks.%d.ffn", l), F("%s.%d", e, l)) ||
            layer_norm(h, P, T("encoder.blocks.%d.addnorm2.ln", l), F("%s.%d.final_layer_norm", e, l)) ||
            marian_attn(h, P, T("decoder.blocks.%d.attention1", l), F("%s.%d.self_attn", d, l)) ||
            layer_norm(h, P, T("decoder.blocks.%d.addnorm1.ln", l), F("%s.%d.self_attn_layer_norm", d, l)) ||
            marian_attn(h, P, T("decoder.blocks.%d.attention2", l), F("%s.%d.encoder_attn", d, l)) ||
            layer_norm(h, P, T("decoder.blocks.%d.addnorm2.ln", l), F("%s.%d.encoder_attn_layer_norm", d, l)) ||
            marian_ffn(h, P, T("decoder.blocks.%d.ffn", l), F("%s.%d", d, l)) ||
            layer_norm(h, P, T("decoder.blocks.%d.addnorm3.ln", l), F("%s.%d.final_layer_norm", d, l)))
            return -1;
#undef T
#undef F
    return check_positions(h, "model.encoder.embed_positions.weight", m->cfg.max_len, m->cfg.d_model) ||
           check_positions(h, "model.decoder.embed_positions.weight", m->cfg.max_len, m->cfg.d_model);
}

/* source.spm, target.spm, vocab.json (one vocabulary: tokenizer_config.json's separate_vocabs must be false) */
static int marian_tokenizer(const char *dir, tfm_container *c, int n_model) {
    char path[1024];
    size_t len;
    if (join(path, sizeof path, dir, "tokenizer_config.json")) return -1;
    if (is_file(path)) {
        char *s = read_file(path, TFM_HF_MAX_CONFIG, &len);
        if (!s) return -1;
        int separate = strstr(s, "\"separate_vocabs\": true") || strstr(s, "\"separate_vocabs\":true");
        free(s);
        if (separate)
            return tfm_set_error("%s: separate_vocabs true (a target_vocab.json) is not supported", path), -1;
    }
    tfm_container_add_str(c, "tokenizer.kind", "marian");
    static const char *const entries[3] = {"tokenizer.marian.source", "tokenizer.marian.target",
                                           "tokenizer.marian.vocab"};
    static const char *const files[3] = {"source.spm", "target.spm", "vocab.json"};
    const tfm_entry *e[3];
    for (int k = 0; k < 3; k++)
        if (put_file(c, entries[k], dir, files[k]) || !(e[k] = tfm_container_get(c, entries[k]))) return -1;
    char nm[3][1024];
    for (int k = 0; k < 3; k++)
        if (join(nm[k], sizeof nm[k], dir, files[k])) return -1;
    const char *const np[3] = {nm[0], nm[1], nm[2]};
    tfm_marian_tok *t = tfm_marian_tok_from_bytes(e[0]->data, e[0]->nbytes, e[1]->data, e[1]->nbytes, e[2]->data,
                                                  e[2]->nbytes, n_model, np);
    int ok = t != NULL;
    tfm_marian_tok_free(t);
    return ok ? 0 : -1;
}

/* The tfm Transformer of a checked MarianMT config. */
static void marian_config(const tfm_hf_config *hc, tfm_mt_config *c) {
    tfm_mt_config_default(c);
    c->src_vocab = hc->vocab_size, c->tgt_vocab = hc->tgt_vocab;
    c->d_model = hc->d_model, c->n_head = hc->n_head, c->ffn = hc->ffn, c->n_layer = hc->n_layer;
    c->pre_ln = 0, c->max_len = hc->max_positions, c->dropout = hc->dropout;
    c->share_embeddings = hc->share_embeddings;
    c->attn_bias = 1, c->ffn_act = hc->act, c->pos_halves = 1, c->no_embed_scale = !hc->scale_embedding;
    c->custom_ids = 1, c->pad_id = hc->pad_id, c->bos_id = hc->bos_id, c->eos_id = hc->eos_id;
    c->n_banned = hc->n_banned;
    memcpy(c->banned, hc->banned, sizeof c->banned);
    c->gen_beam = hc->num_beams;
    /* max_length counts the decoder's start token; with a forced end token the last one is it */
    int n = hc->max_length - 1 - (hc->forced_eos_id == hc->eos_id);
    c->gen_max_len = n < 1 ? 1 : n;
}

static int import_marian(hf_import *h, const tfm_hf_config *hc, const char *out) {
    tfm_mt_config c;
    marian_config(hc, &c);
    if (tfm_mt_config_check(&c)) return tfm_prefix_error("%s: ", h->cfg_name);
    if (check_budget(h, tfm_mt_n_params(&c))) return -1;
    tfm_mt_net *m = tfm_mt_net_create(&c);
    if (!m) return tfm_prefix_error("%s: ", h->cfg_name);
    tfm_container ck;
    tfm_container_init(&ck);
    int rc = -1;
    if (!marian_weights(h, m) && !check_all_used(h, "marian")) {
        tfm_st_free(&h->st);
        tfm_mt_net_put(&ck, m);
        if (!marian_tokenizer(h->dir, &ck, c.src_vocab < c.tgt_vocab ? c.src_vocab : c.tgt_vocab)) {
            tfm_mt_put_optional_config(&ck, &m->cfg);
            rc = tfm_container_save(&ck, out);
        }
    }
    tfm_container_free(&ck);
    tfm_mt_net_free(m);
    return rc;
}

/* ------------------------------------------------------------------ entry point */

int tfm_import_hf(const char *dir, const char *out) {
    hf_import h;
    memset(&h, 0, sizeof h);
    h.dir = dir;
    if (join(h.cfg_name, sizeof h.cfg_name, dir, "config.json") || join(h.st_name, sizeof h.st_name, dir,
                                                                         "model.safetensors"))
        return -1;
    size_t len = 0;
    char *json = read_file(h.cfg_name, TFM_HF_MAX_CONFIG, &len);
    if (!json) return -1;
    tfm_hf_config hc;
    int rc = tfm_hf_config_parse(&hc, json, len, h.cfg_name);
    free(json);
    if (rc) return tfm_error_in_data();
    rc = -1;
    if (!tfm_st_load(&h.st, h.st_name)) {
        h.used = calloc((size_t)(h.st.n > 0 ? h.st.n : 1), 1);
        if (!h.used) tfm_set_error_kind(TFM_ERR_NOMEM, "%s: out of memory", h.st_name);
        else rc = hc.kind == TFM_HF_GPT2 ? import_gpt2(&h, &hc, out) : import_marian(&h, &hc, out);
    }
    tfm_st_free(&h.st);
    free(h.used);
    free(h.tmp);
    return rc ? tfm_error_in_data() : 0;   /* I/O errors (reading, saving) keep their kind */
}
