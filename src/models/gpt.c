/* The decoder-only GPT. Readable in one sitting: config check, parameters, init, forward. */
#include "tfm/gpt.h"
#include "core/mem.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void tfm_gpt_config_default(tfm_gpt_config *c) {
    memset(c, 0, sizeof *c);
    c->block_size = 64, c->n_layer = 4, c->n_head = 4, c->n_embd = 128, c->attention = TFM_ATTN_CAUSAL;
}

int tfm_gpt_config_check(const tfm_gpt_config *c) {
    if (c->vocab_size < 1) return tfm_set_error("vocab_size must be >= 1, got %d", c->vocab_size), -1;
    if (c->block_size < 1) return tfm_set_error("block_size must be >= 1, got %d", c->block_size), -1;
    if (c->n_layer < 1) return tfm_set_error("n_layer must be >= 1, got %d", c->n_layer), -1;
    if (c->n_head < 1) return tfm_set_error("n_head must be >= 1, got %d", c->n_head), -1;
    if (c->n_embd < 1) return tfm_set_error("n_embd must be >= 1, got %d", c->n_embd), -1;
    if (c->n_embd % c->n_head)
        return tfm_set_error("n_embd (%d) must be divisible by n_head (%d)", c->n_embd, c->n_head), -1;
    if (!(c->dropout >= 0 && c->dropout < 1)) return tfm_set_error("dropout must be in [0,1), got %g", c->dropout), -1;
    if (c->attention != TFM_ATTN_CAUSAL && c->attention != TFM_ATTN_SYNTHESIZER)
        return tfm_set_error("unknown attention kind %d", c->attention), -1;
    if (!(c->ln_eps >= 0 && c->ln_eps < 1)) return tfm_set_error("ln_eps must be in [0,1), got %g", c->ln_eps), -1;
    if (c->n_layer > 256 || c->n_embd > 65536 || c->block_size > 1 << 20 || c->vocab_size > 1 << 24)
        return tfm_set_error("model config too large"), -1;
    return 0;
}

/* int64 arithmetic on checked ranges (n_layer <= 256, n_embd <= 2^16, block_size <= 2^20, vocab <= 2^24):
 * cannot wrap. The LM head is tied to wte. */
int64_t tfm_gpt_n_params(const tfm_gpt_config *k) {
    int64_t C = k->n_embd, T = k->block_size, V = k->vocab_size, hd = C / k->n_head;
    int64_t ffn = (4 * C * C + 4 * C) + (4 * C * C + C);                       /* dense1 + dense2 */
    int64_t attn = k->attention == TFM_ATTN_SYNTHESIZER ? 3 * (C * C + C) + hd * T + T   /* w1,W_v,W_o,w2,b2 */
                                                        : 4 * (C * C + C);             /* W_q,W_k,W_v,W_o */
    return V * C + T * C + k->n_layer * (2 * C + attn + 2 * C + ffn) + 2 * C;
}

int64_t tfm_gpt_step_elems(const tfm_gpt_config *c, int64_t B, int64_t T) {
    int64_t per_tok = (int64_t)c->n_layer * (32 * (int64_t)c->n_embd + 2 * (int64_t)c->n_head * T) + 3 * (int64_t)c->vocab_size;
    return tfm_mul_i64_sat(tfm_mul_i64_sat(B, T), per_tok);
}

int tfm_gpt_init(tfm_gpt *m, const tfm_gpt_config *c) {
    if (tfm_gpt_config_check(c)) return -1;
    int64_t n = tfm_gpt_n_params(c);   /* before anything is allocated (a loader checks the file's count first) */
    if (n > TFM_MAX_PARAMS)
        return tfm_set_error("model config too large: %lld parameters (n_layer %d, n_embd %d, block_size %d, vocab %d), "
                             "at most %lld", (long long)n, c->n_layer, c->n_embd, c->block_size, c->vocab_size,
                             (long long)TFM_MAX_PARAMS), -1;
    m->cfg = *c;
    tfm_params_init(&m->params);
    tfm_params *p = &m->params;
    int C = c->n_embd, hd = C / c->n_head;
    tfm_Embedding_init(&m->wte, p, "wte", c->vocab_size, C);
    tfm_Embedding_init(&m->wpe, p, "wpe", c->block_size, C);
    m->blocks = calloc(c->n_layer, sizeof *m->blocks);
    if (!m->blocks) {
        tfm_params_free(p);
        return tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory (a GPT of %d layers)", c->n_layer), -1;
    }
    char name[128], sub[160];
    for (int l = 0; l < c->n_layer; l++) {
        tfm_gpt_block *b = &m->blocks[l];
        snprintf(name, sizeof name, "blocks.%d", l);
        tfm_LayerNorm_init(&b->ln1, p, tfm_name(sub, sizeof sub, name, "ln1"), C);
        if (c->attention == TFM_ATTN_SYNTHESIZER)
            tfm_SynthesizerAttention_init(&b->synth, p, tfm_name(sub, sizeof sub, name, "attn"), C, c->n_head,
                                          c->block_size, c->dropout);
        else
            tfm_MultiHeadAttention_init(&b->attn, p, tfm_name(sub, sizeof sub, name, "attn"), C, C, C, c->n_head,
                                        hd, hd, C, 1, c->dropout);
        tfm_LayerNorm_init(&b->ln2, p, tfm_name(sub, sizeof sub, name, "ln2"), C);
        tfm_PositionWiseFFN_init(&b->ffn, p, tfm_name(sub, sizeof sub, name, "ffn"), C, 4 * C, C, TFM_ACT_GELU);
    }
    tfm_LayerNorm_init(&m->ln_f, p, "ln_f", C);
    if (c->ln_eps > 0) {   /* else LayerNorm's own 1e-5 */
        for (int l = 0; l < c->n_layer; l++) m->blocks[l].ln1.eps = m->blocks[l].ln2.eps = c->ln_eps;
        m->ln_f.eps = c->ln_eps;
    }
    if (tfm_params_alloc(p)) {
        tfm_gpt_free(m);
        return -1;
    }
    return 0;
}

void tfm_gpt_put_config(tfm_container *c, const tfm_gpt_config *k) {
    tfm_container_add_str(c, "meta.kind", "gpt");
    tfm_container_add_str(c, "meta.arch", "gpt");
    tfm_container_add_int(c, "config.vocab_size", k->vocab_size);
    tfm_container_add_int(c, "config.block_size", k->block_size);
    tfm_container_add_int(c, "config.n_layer", k->n_layer);
    tfm_container_add_int(c, "config.n_head", k->n_head);
    tfm_container_add_int(c, "config.n_embd", k->n_embd);
    tfm_container_add_float(c, "config.dropout", k->dropout);
    tfm_container_add_str(c, "config.attention", k->attention == TFM_ATTN_SYNTHESIZER ? "synthesizer" : "causal");
    if (k->ln_eps > 0) tfm_container_add_float(c, "config.ln_eps", k->ln_eps);
}

/* GPT-2 init: N(0, 0.02) weights, zero biases, unit norms; residual projections scaled by
 * 1/sqrt(2 n_layer). */
void tfm_gpt_init_weights(tfm_gpt *m, uint64_t seed) {
    tfm_rng r;
    tfm_rng_seed(&r, seed);
    float std = 0.02f, proj_std = 0.02f / sqrtf(2.0f * m->cfg.n_layer);
    for (int i = 0; i < m->params.n; i++) {
        tfm_tensor *t = m->params.t[i];
        if (t->ndim == 1) tfm_init_const(t, 0.0f);
        else tfm_init_normal(t, &r, std);
    }
    for (int l = 0; l < m->cfg.n_layer; l++) {
        tfm_gpt_block *b = &m->blocks[l];
        tfm_init_const(b->ln1.weight, 1.0f);
        tfm_init_const(b->ln2.weight, 1.0f);
        tfm_Linear *proj = m->cfg.attention == TFM_ATTN_SYNTHESIZER ? &b->synth.W_o : &b->attn.W_o;
        tfm_init_normal(proj->W, &r, proj_std);
        tfm_init_normal(b->ffn.dense2.W, &r, proj_std);
        if (m->cfg.attention == TFM_ATTN_SYNTHESIZER) tfm_init_uniform(b->synth.w2, &r, 0.001f);
    }
    tfm_init_const(m->ln_f.weight, 1.0f);
}

int tfm_gpt_replica_init(tfm_gpt *r, const tfm_gpt *m) {
    if (tfm_gpt_init(r, &m->cfg)) return -1;
    if (tfm_params_share_data(&r->params, &m->params)) return tfm_gpt_free(r), -1;
    return 0;
}

void tfm_gpt_free(tfm_gpt *m) {
    tfm_params_free(&m->params);
    free(m->blocks);
    m->blocks = NULL;
}

int tfm_gpt_vocab_size(const tfm_gpt *m) { return m->cfg.vocab_size; }
int tfm_gpt_block_size(const tfm_gpt *m) { return m->cfg.block_size; }

static tfm_tensor *block_forward(tfm_graph *g, const tfm_gpt_config *c, tfm_gpt_block *b, tfm_tensor *x) {
    tfm_tensor *h = tfm_LayerNorm_forward(g, &b->ln1, x);
    if (c->attention == TFM_ATTN_SYNTHESIZER) {
        h = tfm_SynthesizerAttention_forward(g, &b->synth, h);
    } else {
        tfm_mask causal = {.causal = 1};
        h = tfm_MultiHeadAttention_forward(g, &b->attn, h, h, h, &causal);
    }
    x = tfm_add(g, x, tfm_dropout(g, h, c->dropout));
    h = tfm_PositionWiseFFN_forward(g, &b->ffn, tfm_LayerNorm_forward(g, &b->ln2, x));
    return tfm_add(g, x, tfm_dropout(g, h, c->dropout));
}

tfm_tensor *tfm_gpt_forward(tfm_graph *g, tfm_gpt *m, const int *idx, int B, int T) {
    const tfm_gpt_config *c = &m->cfg;
    TFM_ASSERT(T >= 1 && T <= c->block_size, "gpt_forward: T=%d not in 1..block_size=%d", T, c->block_size);
    int *pos = tfm_arena_alloc(&g->arena, sizeof(int) * T);
    for (int t = 0; t < T; t++) pos[t] = t;
    tfm_tensor *tok = tfm_Embedding_forward(g, &m->wte, idx, B, T);                  /* (B,T,C) */
    tfm_tensor *pe = tfm_embedding(g, m->wpe.weight, pos, 1, &T);                    /* (T,C) */
    tfm_tensor *x = tfm_dropout(g, tfm_add(g, tok, pe), c->dropout);
    for (int l = 0; l < c->n_layer; l++) x = block_forward(g, c, &m->blocks[l], x);
    x = tfm_LayerNorm_forward(g, &m->ln_f, x);
    return tfm_matmul(g, x, m->wte.weight, 0, 1);                                     /* (B,T,V) */
}

/* ---------------------------------------------------------------- KV-cached inference */
/* K and V in one block on huge pages (core/mem.h), at least one 2 MiB page even for a small model: appending
 * a token writes 2 * n_layer rows of C floats, and on 4 KiB pages a small model faults in a fresh page every
 * few tokens (~10 us each on a VM: most of the cache's time per token for the 4 x 128 GPT). */
static size_t cache_bytes(const tfm_gpt_cache *c) {
    size_t bytes = 2 * (size_t)c->n_layer * c->max_len * c->C * sizeof(float);
    return bytes < TFM_HUGE_PAGE ? TFM_HUGE_PAGE : bytes;
}

int tfm_gpt_cache_init(tfm_gpt_cache *c, const tfm_gpt *m) {
    memset(c, 0, sizeof *c);
    if (m->cfg.attention != TFM_ATTN_CAUSAL) return tfm_set_error("KV cache needs causal attention"), -1;
    c->n_layer = m->cfg.n_layer;
    c->C = m->cfg.n_embd;
    c->max_len = m->cfg.block_size;
    size_t n = (size_t)c->n_layer * c->max_len * c->C;
    c->k = tfm_weights_alloc_(cache_bytes(c));
    if (!c->k) {
        memset(c, 0, sizeof *c);
        return tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory (KV cache of %zu floats)", 2 * n), -1;
    }
    c->v = c->k + n;
    return 0;
}

void tfm_gpt_cache_free(tfm_gpt_cache *c) {
    tfm_weights_free_(c->k, cache_bytes(c));   /* v is the second half of the block */
    c->k = c->v = NULL;
}

/* The cached forward up to the final layer norm. last: only the last fed position goes through the final block
 * past its keys and values (every position's are still appended): its queries, attention, output projection and
 * FFN for one row instead of T, and the result is that row (1,1,C), all a prompt or a recomputed window needs for
 * the next token. */
static tfm_tensor *hidden_cached(tfm_graph *g, tfm_gpt *m, tfm_gpt_cache *c, const int *idx, int T, int last) {
    const tfm_gpt_config *cfg = &m->cfg;
    int L0 = c->len, C = cfg->n_embd, H = cfg->n_head;
    TFM_ASSERT(T >= 1 && L0 + T <= c->max_len, "gpt_forward_cached: %d + %d positions > block_size %d", L0, T,
               c->max_len);
    int grad = g->grad_enabled;
    g->grad_enabled = 0;
    int *pos = tfm_arena_alloc(&g->arena, sizeof(int) * T);
    for (int t = 0; t < T; t++) pos[t] = L0 + t;
    tfm_tensor *x = tfm_add(g, tfm_Embedding_forward(g, &m->wte, idx, 1, T), tfm_embedding(g, m->wpe.weight, pos, 1, &T));
    tfm_mask causal = {.causal = 1};   /* query i sees keys up to L0 + i, the last query every key */
    /* Nothing is taped, so a block's intermediate tensors are dead once its output exists: that output goes to one
     * of two buffers and the arena is rewound to where the block began. A prompt's or window's working set is one
     * block's, not n_layer's (the 4 x 128 GPT's 256-token window ~1.7 MB instead of ~7 MB). */
    float *out[2] = {tfm_arena_alloc(&g->arena, sizeof(float) * T * C), tfm_arena_alloc(&g->arena, sizeof(float) * T * C)};
    tfm_arena_pos block_start = tfm_arena_tell(&g->arena);
    for (int l = 0; l < cfg->n_layer; l++) {
        tfm_gpt_block *b = &m->blocks[l];
        tfm_MultiHeadAttention *a = &b->attn;
        tfm_tensor *h = tfm_LayerNorm_forward(g, &b->ln1, x);
        tfm_tensor *k = tfm_Linear_forward(g, &a->W_k, h);
        tfm_tensor *v = tfm_Linear_forward(g, &a->W_v, h);
        if (last && T > 1 && l == cfg->n_layer - 1) {   /* from here on, the last position only */
            h = tfm_slice(g, h, 1, T - 1, 1);
            x = tfm_slice(g, x, 1, T - 1, 1);
        }
        tfm_tensor *q = tfm_Linear_forward(g, &a->W_q, h);
        float *kl = c->k + (size_t)l * c->max_len * C, *vl = c->v + (size_t)l * c->max_len * C;
        double tp = tfm_profile_begin(g);
        memcpy(kl + (size_t)L0 * C, k->data, sizeof(float) * T * C);
        memcpy(vl + (size_t)L0 * C, v->data, sizeof(float) * T * C);
        tfm_profile_end(g, TFM_PHASE_KV_CACHE, tp);
        int shape[3] = {1, L0 + T, C};
        tfm_tensor *K = tfm_constant(g, kl, 3, shape), *V = tfm_constant(g, vl, 3, shape);
        h = tfm_attention(g, q, K, V, H, 0, &causal, 1.0f / sqrtf((float)a->d_k));
        x = tfm_add(g, x, tfm_Linear_forward(g, &a->W_o, h));
        x = tfm_add(g, x, tfm_PositionWiseFFN_forward(g, &b->ffn, tfm_LayerNorm_forward(g, &b->ln2, x)));
        memcpy(out[l % 2], x->data, sizeof(float) * x->size);
        int rows = x->shape[1];
        tfm_arena_rewind(&g->arena, block_start);
        x = tfm_constant(g, out[l % 2], 3, (int[3]){1, rows, C});
    }
    x = tfm_LayerNorm_forward(g, &m->ln_f, x);
    c->len = L0 + T;
    g->grad_enabled = grad;
    return x;
}

tfm_tensor *tfm_gpt_hidden_cached(tfm_graph *g, tfm_gpt *m, tfm_gpt_cache *c, const int *idx, int T) {
    return hidden_cached(g, m, c, idx, T, 0);
}

tfm_tensor *tfm_gpt_hidden_cached_last(tfm_graph *g, tfm_gpt *m, tfm_gpt_cache *c, const int *idx, int T) {
    return hidden_cached(g, m, c, idx, T, 1);
}

/* logits (1,R,V) of hidden states x (1,R,C): the output layer, wte tied */
static tfm_tensor *output_layer(tfm_graph *g, tfm_gpt *m, tfm_tensor *x) {
    int grad = g->grad_enabled;
    g->grad_enabled = 0;
    tfm_tensor *logits = tfm_matmul(g, x, m->wte.weight, 0, 1);
    g->grad_enabled = grad;
    return logits;
}

tfm_tensor *tfm_gpt_forward_cached(tfm_graph *g, tfm_gpt *m, tfm_gpt_cache *c, const int *idx, int T) {
    return output_layer(g, m, hidden_cached(g, m, c, idx, T, 0));
}

tfm_tensor *tfm_gpt_forward_cached_last(tfm_graph *g, tfm_gpt *m, tfm_gpt_cache *c, const int *idx, int T) {
    return output_layer(g, m, hidden_cached(g, m, c, idx, T, 1));
}
