/* The encoder-decoder Transformer (d2l's TransformerEncoder / TransformerDecoder) behind the
 * tfm_mt_net interface (include/tfm/seq2seq.h).
 *
 *   encoder: X = dropout(PE(embedding(src) * sqrt(d))); N blocks of
 *            Y = AddNorm1(X, MHA(X,X,X, src_valid)); X = AddNorm2(Y, FFN(Y))
 *   decoder: X = dropout(PE(embedding(tgt_in) * sqrt(d), offset t)); N blocks of
 *            X2 = MHA1(X, keys/values = all positions <= current (causal));  Y = AddNorm1(X, X2)
 *            Y2 = MHA2(Y, enc, enc, src_valid);  Z = AddNorm2(Y, Y2);  X = AddNorm3(Z, FFN(Z))
 *            logits = dense(X)
 *   pre_ln:  X = X + dropout(sublayer(LN(X))) with the AddNorm's LayerNorm, and a final LayerNorm
 *            (encoder.ln_f / decoder.ln_f) at the end of each stack.
 * MHA projections have no bias (d2l); FFN and the output layer do.
 * Imported MarianMT models (config attn_bias, ffn_act, pos_halves, no_embed_scale; include/tfm/seq2seq.h) add
 * biases to the attention projections, another FFN activation, sines-then-cosines positions and, if their
 * config says so, unscaled embeddings: Marian is the post-LN Transformer otherwise.
 *
 * Incremental decoding keeps, per decoder layer, the projected self-attention keys/values of every
 * earlier position in a cache (one slot per row: rows x H x max_steps x d_k) and the encoder keys/values
 * computed once (one slot per sentence: B x H x Ts x d_k, read by all of its beams through the row ->
 * slot index), so a step costs O(t) work. The attention reads both caches in place (tfm_attention_kv);
 * reorder remaps slots and copies only the self-attention prefix of a second child of one parent
 * (include/tfm/nn.h).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tfm/nn.h"
#include "tfm/seq2seq.h"

typedef struct {
    tfm_MultiHeadAttention attention;
    tfm_AddNorm addnorm1, addnorm2;
    tfm_PositionWiseFFN ffn;
} enc_block;

typedef struct {
    tfm_MultiHeadAttention attention1, attention2;
    tfm_AddNorm addnorm1, addnorm2, addnorm3;
    tfm_PositionWiseFFN ffn;
} dec_block;

typedef struct {
    tfm_Embedding enc_emb, dec_emb;
    tfm_PositionalEncoding pe;
    enc_block *eb;
    dec_block *db;
    tfm_LayerNorm enc_lnf, dec_lnf;   /* pre_ln only */
    tfm_Linear dense;
    int last_B;                       /* batch rows of the last forward (for attention maps) */
} tf_impl;

typedef struct {
    int incremental;
    int B, Ts, cap, max_steps, t;
    /* training */
    tfm_tensor *enc;                  /* (B,Ts,d), or (n,d) on packed rows */
    const int *src_valid;
    const struct tf_packing *src_pack, *tgt_pack;   /* tf_loss: packed rows, else NULL */
    /* incremental */
    int *valid, *valid_tmp;           /* cap: source valid length per row; reorder scratch */
    tfm_kv_cache self_kv;             /* per layer, one slot per row: cap x H x max_steps x d_k */
    tfm_kv_cache enc_kv;              /* per layer, one slot per sentence: B x H x Ts x d_k; rows share it */
    tfm_graph *g;                     /* the graph whose spare block holds both caches (given back at free) */
    void *block;
    size_t block_bytes;
} tf_state;

#define IMPL(m) ((tf_impl *)(m)->impl)

static void set_keep(tfm_mt_net *m) {
    tf_impl *t = IMPL(m);
    for (int l = 0; l < m->cfg.n_layer; l++) {
        t->eb[l].attention.keep_weights = m->keep_attention;
        t->db[l].attention1.keep_weights = m->keep_attention;
        t->db[l].attention2.keep_weights = m->keep_attention;
    }
}

/* The valid positions of a padded (B,T) batch, b-major: rows[i] = b*T + t and pos[i] = t for t < len[b]. */
typedef struct tf_packing {
    int B, T, n, side;   /* side: 0 source, 1 target (tfm_graph.drop_row0) */
    int *rows, *pos;
} tf_packing;

static tf_packing tf_pack(tfm_graph *g, const int *len, int B, int T, int side) {
    tf_packing p = {B, T, 0, side, NULL, NULL};
    for (int b = 0; b < B; b++) p.n += len[b];
    p.rows = tfm_arena_alloc(&g->arena, sizeof(int) * (size_t)(p.n > 0 ? p.n : 1));
    p.pos = tfm_arena_alloc(&g->arena, sizeof(int) * (size_t)(p.n > 0 ? p.n : 1));
    for (int b = 0, i = 0; b < B; b++)
        for (int t = 0; t < len[b]; t++, i++) p.rows[i] = b * T + t, p.pos[i] = t;
    return p;
}

/* Data parallel (tfm_graph.drop_row0): a row-wise dropout on packed rows keys its elements from the slice's
 * first global row of that side, so swap the row offsets in around it (attention keeps the sample ones). */
typedef struct { long s0, n; } drop_saved;
static drop_saved rows_begin(tfm_graph *g, const tf_packing *p, int side) {
    drop_saved sv = {g->drop_sample0, g->drop_samples};
    if (p && g->drop_samples > 0) g->drop_sample0 = g->drop_row0[side], g->drop_samples = p->n > 0 ? p->n : 1;
    return sv;
}
static void rows_end(tfm_graph *g, drop_saved sv) { g->drop_sample0 = sv.s0, g->drop_samples = sv.n; }

/* embeddings * sqrt(d_model), unless the config says not to scale them (no_embed_scale) */
static tfm_tensor *embed_scale(tfm_graph *g, const tfm_mt_net *m, tfm_tensor *x) {
    return m->cfg.no_embed_scale ? x : tfm_scale(g, x, sqrtf((float)m->cfg.d_model));
}

/* embed() on the packed positions: (n, d), row i = embedding(ids[rows[i]]) * sqrt(d) + PE(pos[i]) */
static tfm_tensor *embed_packed(tfm_graph *g, tfm_mt_net *m, const tfm_Embedding *e, const int *ids,
                                const tf_packing *p) {
    int d = m->cfg.d_model;
    int *id = tfm_arena_alloc(&g->arena, sizeof(int) * (size_t)(p->n > 0 ? p->n : 1));
    float *pe = tfm_arena_alloc(&g->arena, sizeof(float) * (size_t)p->n * d);
    const float *P = IMPL(m)->pe.P;
    TFM_ASSERT(p->T <= IMPL(m)->pe.max_len, "positional encoding: T=%d > table %d", p->T, IMPL(m)->pe.max_len);
    for (int i = 0; i < p->n; i++) {
        id[i] = ids[p->rows[i]];
        memcpy(pe + (size_t)i * d, P + (size_t)p->pos[i] * d, sizeof(float) * (size_t)d);
    }
    tfm_tensor *x = embed_scale(g, m, tfm_embedding(g, e->weight, id, 1, (int[]){p->n}));
    x = tfm_add(g, x, tfm_constant(g, pe, 2, (int[]){p->n, d}));
    drop_saved sv = rows_begin(g, p, p->side);
    x = tfm_dropout(g, x, m->cfg.dropout);
    rows_end(g, sv);
    return x;
}

/* Self- or cross-attention on padded (B,T,d) tensors, or on packed rows when q (and kv) packings are given. */
static tfm_tensor *mha(tfm_graph *g, tfm_MultiHeadAttention *a, tfm_tensor *xq, const tf_packing *pq,
                       tfm_tensor *xkv, const tf_packing *pkv, const tfm_mask *mask) {
    if (!pq) return tfm_MultiHeadAttention_forward(g, a, xq, xkv, xkv, mask);
    return tfm_MultiHeadAttention_forward_packed(g, a, pq->B, xq, pq->rows, pq->T, xkv, pkv->rows, pkv->T, mask);
}

/* embedding * sqrt(d) + positional encoding (from `offset`), dropout */
static tfm_tensor *embed(tfm_graph *g, tfm_mt_net *m, const tfm_Embedding *e, const int *ids, int B, int T,
                         int offset) {
    tfm_tensor *x = embed_scale(g, m, tfm_Embedding_forward(g, e, ids, B, T));
    x = tfm_PositionalEncoding_forward(g, &IMPL(m)->pe, x, offset);
    return tfm_dropout(g, x, m->cfg.dropout);
}

/* The FFN; on packed rows its activation dropout keys its elements like the row-wise dropouts around it */
static tfm_tensor *ffn_rows(tfm_graph *g, const tfm_PositionWiseFFN *f, tfm_tensor *x, const tf_packing *p) {
    drop_saved sv = rows_begin(g, p, p ? p->side : 0);
    x = tfm_PositionWiseFFN_forward(g, f, x);
    rows_end(g, sv);
    return x;
}

/* One residual sublayer. post-LN: AddNorm(X, Y); pre-LN handled by the caller. */
static tfm_tensor *pre_residual(tfm_graph *g, const tfm_AddNorm *an, tfm_tensor *x, tfm_tensor *y,
                                const tf_packing *p) {
    drop_saved sv = rows_begin(g, p, p ? p->side : 0);
    x = tfm_add(g, x, tfm_dropout(g, y, an->dropout));
    rows_end(g, sv);
    return x;
}

/* post-LN: AddNorm(X, Y) (y already computed, so its own dropouts keep their offsets) */
static tfm_tensor *add_norm(tfm_graph *g, const tfm_AddNorm *an, tfm_tensor *x, tfm_tensor *y, const tf_packing *p) {
    drop_saved sv = rows_begin(g, p, p ? p->side : 0);
    x = tfm_AddNorm_forward(g, an, x, y);
    rows_end(g, sv);
    return x;
}

/* ps: packed rows of the source (tf_loss), or NULL for the padded (B,Ts,d) encoder output */
static tfm_tensor *tf_encode_rows(tfm_mt_net *m, tfm_graph *g, const int *src, const int *src_valid, int B, int Ts,
                                  const tf_packing *ps) {
    tf_impl *t = IMPL(m);
    set_keep(m);
    t->last_B = B;
    int *vl = tfm_arena_alloc(&g->arena, sizeof(int) * (size_t)B);   /* must outlive the caller's buffer */
    memcpy(vl, src_valid, sizeof(int) * (size_t)B);
    tfm_mask mask = {.valid_lens = vl};
    tfm_tensor *x = ps ? embed_packed(g, m, &t->enc_emb, src, ps) : embed(g, m, &t->enc_emb, src, B, Ts, 0);
    /* Inference (nothing taped, no attention maps kept): a layer's intermediates die with it, so its output is
     * copied out and the arena rewound; otherwise the arena holds every layer's (60 MB for 32 long sentences,
     * each page faulted in fresh the first time). */
    int rewind = !g->grad_enabled && !m->keep_attention && !ps;
    tfm_tensor *out[2] = {NULL, NULL};
    if (rewind) out[0] = tfm_new3(g, B, Ts, m->cfg.d_model), out[1] = tfm_new3(g, B, Ts, m->cfg.d_model);
    for (int l = 0; l < m->cfg.n_layer; l++) {
        tfm_arena_pos layer_start = tfm_arena_tell(&g->arena);
        enc_block *b = &t->eb[l];
        if (m->cfg.pre_ln) {
            tfm_tensor *h = tfm_LayerNorm_forward(g, &b->addnorm1.ln, x);
            x = pre_residual(g, &b->addnorm1, x, mha(g, &b->attention, h, ps, h, ps, &mask), ps);
            h = tfm_LayerNorm_forward(g, &b->addnorm2.ln, x);
            x = pre_residual(g, &b->addnorm2, x, ffn_rows(g, &b->ffn, h, ps), ps);
        } else {
            tfm_tensor *y = add_norm(g, &b->addnorm1, x, mha(g, &b->attention, x, ps, x, ps, &mask), ps);
            x = add_norm(g, &b->addnorm2, y, ffn_rows(g, &b->ffn, y, ps), ps);
        }
        if (rewind) {   /* out[l % 2] is not this layer's input (that is out[(l - 1) % 2] or the embedding) */
            memcpy(out[l % 2]->data, x->data, sizeof(float) * x->size);
            tfm_arena_rewind(&g->arena, layer_start);
            x = out[l % 2];
        }
    }
    if (m->cfg.pre_ln) x = tfm_LayerNorm_forward(g, &t->enc_lnf, x);
    return x;
}

/* Inference encodes a batch in groups of sentences of at most this many rows (sentences x Ts) each: one layer's
 * intermediates for 32 sentences of 40 tokens are ~16 MB, every page of it fresh memory the first time, and a
 * few hundred rows keep the GEMMs as fast. Each sentence is encoded alone, so the groups change no bits. */
#define TF_ENCODE_GROUP_ROWS 384

static tfm_tensor *tf_encode(tfm_mt_net *m, tfm_graph *g, const int *src, const int *src_valid, int B, int Ts) {
    int group = TF_ENCODE_GROUP_ROWS / Ts > 0 ? TF_ENCODE_GROUP_ROWS / Ts : 1;
    if (g->grad_enabled || m->keep_attention || group >= B) return tf_encode_rows(m, g, src, src_valid, B, Ts, NULL);
    int d = m->cfg.d_model;
    tfm_tensor *enc = tfm_new3(g, B, Ts, d);
    for (int b0 = 0; b0 < B; b0 += group) {
        int nb = B - b0 < group ? B - b0 : group;
        tfm_arena_pos start = tfm_arena_tell(&g->arena);
        tfm_tensor *x = tf_encode_rows(m, g, src + (size_t)b0 * Ts, src_valid + b0, nb, Ts, NULL);
        memcpy(enc->data + (size_t)b0 * Ts * d, x->data, sizeof(float) * x->size);
        tfm_arena_rewind(&g->arena, start);
    }
    IMPL(m)->last_B = B;
    return enc;
}

static void tf_free_state(tfm_mt_net *m, void *state);

static void *tf_init_state(tfm_mt_net *m, tfm_graph *g, tfm_tensor *enc, const int *src_valid, int B, int Ts,
                           int max_steps, int cap_rows) {
    tf_impl *t = IMPL(m);
    if (max_steps <= 0) {
        tf_state *s = tfm_arena_calloc(&g->arena, sizeof *s);
        s->B = B;
        s->Ts = Ts;
        s->enc = enc;
        int *vl = tfm_arena_alloc(&g->arena, sizeof(int) * (size_t)B);
        memcpy(vl, src_valid, sizeof(int) * (size_t)B);
        s->src_valid = vl;
        return s;
    }
    if (cap_rows < B) cap_rows = B;
    tf_state *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->incremental = 1;
    s->B = B;
    s->Ts = Ts;
    s->cap = cap_rows;
    s->max_steps = max_steps;
    int L = m->cfg.n_layer, H = m->cfg.n_head, dk = m->cfg.d_model / H;
    s->valid = malloc(sizeof(int) * (size_t)cap_rows);
    s->valid_tmp = malloc(sizeof(int) * (size_t)cap_rows);
    /* both caches in one block of g's, which the last batch's state gave back: pages already touched */
    size_t n_self = tfm_kv_cache_floats(L, cap_rows, H, max_steps, dk), n_enc = tfm_kv_cache_floats(L, B, H, Ts, dk);
    s->g = g;
    s->block = n_self && n_enc ? tfm_graph_block_take(g, sizeof(float) * (n_self + n_enc), &s->block_bytes) : NULL;
    if (!s->valid || !s->valid_tmp || !s->block ||
        tfm_kv_cache_init_in(&s->self_kv, s->block, L, cap_rows, cap_rows, H, max_steps, dk) ||
        tfm_kv_cache_init_in(&s->enc_kv, (float *)s->block + n_self, L, B, cap_rows, H, Ts, dk)) {
        if (!s->block) tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory (the KV caches of %d rows)", cap_rows);
        tf_free_state(m, s);
        return NULL;
    }
    memcpy(s->valid, src_valid, sizeof(int) * (size_t)B);
    /* encoder keys/values of every decoder layer, once per sentence (slot b = sentence b) */
    for (int l = 0; l < L; l++) {   /* K and V copied into the cache, their arena space handed back */
        tfm_arena_pos before = tfm_arena_tell(&g->arena);
        const tfm_MultiHeadAttention *a = &t->db[l].attention2;
        tfm_tensor *K = tfm_Linear_forward(g, &a->W_k, enc), *V = tfm_Linear_forward(g, &a->W_v, enc); /* (B,Ts,H*dk) */
        tfm_kv_cache_append(&s->enc_kv, l, K, V, B, 0);
        if (!g->grad_enabled) tfm_arena_rewind(&g->arena, before);
    }
    s->enc_kv.len = Ts;
    return s;
}

/* Incremental decoding: the query attends over a KV cache read in place (tfm_attention_kv: the cache's
 * strides and row -> slot index, no copy), with MHA's projections and scale (the fused kernel's numbers). */
static tfm_tensor *cached_attend(tfm_graph *g, tfm_MultiHeadAttention *a, tfm_tensor *h, const tfm_kv_ref *kv,
                                 const tfm_mask *mask) {
    a->weights = NULL;
    tfm_tensor *o = tfm_attention_kv(g, tfm_Linear_forward(g, &a->W_q, h), kv, a->n_head, mask,
                                     1.0f / sqrtf((float)a->d_k));
    return tfm_Linear_forward(g, &a->W_o, o);
}

/* Decoder self-attention of layer l. Full sequences (training, scoring): causal mask, in the (B,T,H*d)
 * layout of the projections (no permutes). Incremental: this step's keys/values are appended to the
 * layer's cache and the query attends over all cached positions. */
static tfm_tensor *dec_self_attention(tfm_graph *g, tf_state *s, dec_block *b, int l, tfm_tensor *h) {
    if (!s->incremental) {
        tfm_mask causal = {.causal = 1};
        return mha(g, &b->attention1, h, s->tgt_pack, h, s->tgt_pack, &causal);
    }
    tfm_MultiHeadAttention *a = &b->attention1;
    tfm_tensor *K = tfm_Linear_forward(g, &a->W_k, h), *V = tfm_Linear_forward(g, &a->W_v, h);   /* (B,1,H*dk) */
    double tp = tfm_profile_begin(g);
    tfm_kv_cache_append(&s->self_kv, l, K, V, s->B, s->t);
    tfm_profile_end(g, TFM_PHASE_KV_CACHE, tp);
    tfm_kv_ref kv = tfm_kv_cache_ref(&s->self_kv, l, s->t + 1);
    return cached_attend(g, a, h, &kv, NULL);
}

/* Encoder-decoder attention of layer l: keys/values from the encoder output (projected here for full
 * sequences, cached once per sentence when incremental). */
static tfm_tensor *dec_cross_attention(tfm_graph *g, tf_state *s, dec_block *b, int l, tfm_tensor *h,
                                       const tfm_mask *src_mask) {
    if (!s->incremental) return mha(g, &b->attention2, h, s->tgt_pack, s->enc, s->src_pack, src_mask);
    tfm_kv_ref kv = tfm_kv_cache_ref(&s->enc_kv, l, s->Ts);   /* each row reads its sentence's slot */
    return cached_attend(g, &b->attention2, h, &kv, src_mask);
}

/* The decoder up to its output layer: (B,T,d) (tf_decode's logits = dense(this)). */
static tfm_tensor *tf_decode_hidden(tfm_mt_net *m, tfm_graph *g, void *state, const int *tgt_in, int B, int T) {
    tf_impl *t = IMPL(m);
    tf_state *s = state;
    set_keep(m);
    t->last_B = B;
    TFM_ASSERT(B == s->B, "transformer decode: %d rows but the state has %d", B, s->B);
    int offset = s->incremental ? s->t : 0;
    if (s->incremental)
        TFM_ASSERT(T == 1 && s->t < s->max_steps, "transformer decode: incremental step T=%d t=%d max=%d", T, s->t,
                   s->max_steps);
    tfm_tensor *x = s->tgt_pack ? embed_packed(g, m, &t->dec_emb, tgt_in, s->tgt_pack)
                                : embed(g, m, &t->dec_emb, tgt_in, B, T, offset);
    tfm_mask src_mask = {.valid_lens = s->incremental ? s->valid : s->src_valid};
    if (s->incremental) {   /* the mask must be stable while tensors may be read: copy to the arena */
        int *vl = tfm_arena_alloc(&g->arena, sizeof(int) * (size_t)B);
        memcpy(vl, s->valid, sizeof(int) * (size_t)B);
        src_mask.valid_lens = vl;
    }
    for (int l = 0; l < m->cfg.n_layer; l++) {
        dec_block *b = &t->db[l];
        if (m->cfg.pre_ln) {
            tfm_tensor *h = tfm_LayerNorm_forward(g, &b->addnorm1.ln, x);
            x = pre_residual(g, &b->addnorm1, x, dec_self_attention(g, s, b, l, h), s->tgt_pack);
            h = tfm_LayerNorm_forward(g, &b->addnorm2.ln, x);
            x = pre_residual(g, &b->addnorm2, x, dec_cross_attention(g, s, b, l, h, &src_mask), s->tgt_pack);
            h = tfm_LayerNorm_forward(g, &b->addnorm3.ln, x);
            x = pre_residual(g, &b->addnorm3, x, ffn_rows(g, &b->ffn, h, s->tgt_pack), s->tgt_pack);
        } else {
            tfm_tensor *y = add_norm(g, &b->addnorm1, x, dec_self_attention(g, s, b, l, x), s->tgt_pack);
            tfm_tensor *z = add_norm(g, &b->addnorm2, y, dec_cross_attention(g, s, b, l, y, &src_mask), s->tgt_pack);
            x = add_norm(g, &b->addnorm3, z, ffn_rows(g, &b->ffn, z, s->tgt_pack), s->tgt_pack);
        }
    }
    if (m->cfg.pre_ln) x = tfm_LayerNorm_forward(g, &t->dec_lnf, x);
    if (s->incremental) {
        s->t++;
        s->self_kv.len = s->t;
    }
    return x;
}

static tfm_tensor *tf_decode(tfm_mt_net *m, tfm_graph *g, void *state, const int *tgt_in, int B, int T) {
    return tfm_Linear_forward(g, &IMPL(m)->dense, tf_decode_hidden(m, g, state, tgt_in, B, T));
}

static void tf_output_layer(const tfm_mt_net *m, const tfm_tensor **W, const tfm_tensor **b) {
    *W = IMPL(m)->dense.W;
    *b = IMPL(m)->dense.b;
}

static void tf_reorder(tfm_mt_net *m, void *state, const int *idx, int n) {
    (void)m;
    tf_state *s = state;
    TFM_ASSERT(s->incremental && n <= s->cap, "transformer reorder: n=%d cap=%d", n, s->cap);
    for (int i = 0; i < n; i++) {
        TFM_ASSERT(idx[i] >= 0 && idx[i] < s->B, "transformer reorder: idx %d not in 0..%d", idx[i], s->B - 1);
        s->valid_tmp[i] = s->valid[idx[i]];
    }
    memcpy(s->valid, s->valid_tmp, sizeof(int) * (size_t)n);
    tfm_kv_cache_reorder(&s->self_kv, idx, s->B, n);   /* copies only the prefixes of second children */
    tfm_kv_cache_select(&s->enc_kv, idx, s->B, n);     /* rows -> sentence slots: never copies */
    s->B = n;
}

static void tf_free_state(tfm_mt_net *m, void *state) {
    (void)m;
    tf_state *s = state;
    if (!s || !s->incremental) return;
    free(s->valid);
    free(s->valid_tmp);
    tfm_kv_cache_free(&s->self_kv);
    tfm_kv_cache_free(&s->enc_kv);
    tfm_graph_block_give(s->g, s->block, s->block_bytes);
    free(s);
}

static int add_map(tfm_attn_map *maps, int max, int k, int kind, int layer, const tfm_MultiHeadAttention *a,
                   int b, int B) {
    if (!a->weights) return k;
    if (k < max) {
        const tfm_tensor *w = a->weights;   /* (B*H, Tq, Tk) */
        int H = w->shape[0] / B;
        maps[k].kind = kind;
        maps[k].layer = layer;
        maps[k].n_head = H;
        maps[k].Tq = w->shape[1];
        maps[k].Tk = w->shape[2];
        maps[k].w = w->data + (size_t)b * H * w->shape[1] * w->shape[2];
    }
    return k + 1;
}

static int tf_attention(tfm_mt_net *m, int b, tfm_attn_map *maps, int max) {
    tf_impl *t = IMPL(m);
    int k = 0, L = m->cfg.n_layer, B = t->last_B;
    if (b < 0 || b >= B) return 0;
    for (int l = 0; l < L; l++) k = add_map(maps, max, k, TFM_MAP_ENC_SELF, l, &t->eb[l].attention, b, B);
    for (int l = 0; l < L; l++) k = add_map(maps, max, k, TFM_MAP_DEC_SELF, l, &t->db[l].attention1, b, B);
    for (int l = 0; l < L; l++) k = add_map(maps, max, k, TFM_MAP_ENC_DEC, l, &t->db[l].attention2, b, B);
    return k;
}

/* d2l's xavier_init_weights for Linear weights (biases keep PyTorch's default U(+-1/sqrt(in))),
 * embeddings N(0,1), LayerNorm weight 1 bias 0. */
static void init_linear(tfm_Linear *l, tfm_rng *r) {
    tfm_init_xavier(l->W, r);
    if (l->b) tfm_init_uniform(l->b, r, 1.0f / sqrtf((float)l->W->shape[1]));
}
static void init_ln(tfm_LayerNorm *ln) {
    tfm_init_const(ln->weight, 1.0f);
    tfm_init_const(ln->bias, 0.0f);
}
static void init_mha(tfm_MultiHeadAttention *a, tfm_rng *r) {
    init_linear(&a->W_q, r);
    init_linear(&a->W_k, r);
    init_linear(&a->W_v, r);
    init_linear(&a->W_o, r);
}

static void init_embedding(tfm_tensor *w, int kind, tfm_rng *r) {
    if (kind == TFM_INIT_XAVIER) tfm_init_xavier(w, r);
    else tfm_init_normal(w, r, 1.0f);
}

/* cfg.init (tfm_init_kind) decides the embeddings; with shared embeddings the one matrix is drawn once
 * and the output layer's bias only. */
static void tf_init_weights(tfm_mt_net *m, uint64_t seed) {
    tf_impl *t = IMPL(m);
    tfm_rng r;
    tfm_rng_seed(&r, seed);
    init_embedding(t->enc_emb.weight, m->cfg.init, &r);
    if (!m->cfg.share_embeddings) init_embedding(t->dec_emb.weight, m->cfg.init, &r);
    for (int l = 0; l < m->cfg.n_layer; l++) {
        enc_block *e = &t->eb[l];
        init_mha(&e->attention, &r);
        init_ln(&e->addnorm1.ln);
        init_ln(&e->addnorm2.ln);
        init_linear(&e->ffn.dense1, &r);
        init_linear(&e->ffn.dense2, &r);
    }
    for (int l = 0; l < m->cfg.n_layer; l++) {
        dec_block *d = &t->db[l];
        init_mha(&d->attention1, &r);
        init_mha(&d->attention2, &r);
        init_ln(&d->addnorm1.ln);
        init_ln(&d->addnorm2.ln);
        init_ln(&d->addnorm3.ln);
        init_linear(&d->ffn.dense1, &r);
        init_linear(&d->ffn.dense2, &r);
    }
    if (m->cfg.pre_ln) {
        init_ln(&t->enc_lnf);
        init_ln(&t->dec_lnf);
    }
    if (m->cfg.share_embeddings) tfm_init_uniform(t->dense.b, &r, 1.0f / sqrtf((float)t->dense.W->shape[1]));
    else init_linear(&t->dense, &r);
}

static void tf_destroy(tfm_mt_net *m) {
    if (!m) return;
    tf_impl *t = IMPL(m);
    if (t) {
        tfm_PositionalEncoding_free(&t->pe);
        free(t->eb);
        free(t->db);
        free(t);
    }
    tfm_params_free(&m->params);
    free(m);
}

/* Training loss on packed rows: every row-wise op (embedding, projections, AddNorm, FFN, the output layer,
 * the cross-entropy) runs on the valid source and target positions only; attention pads its inputs
 * (tfm_MultiHeadAttention_forward_packed). Pad positions never influence valid ones in the padded
 * forward (masked keys, causal mask, ignored targets), so this is the same loss. NULL (caller falls back
 * to the padded forward) when attention maps are kept or a row is not "tokens, then only <pad>". */
static tfm_tensor *tf_train_logits(tfm_mt_net *m, tfm_graph *g, const int *src, const int *src_valid, int B, int Ts,
                                   const int *tgt_in, const int *tgt, int Tt, const int **targets) {
    if (m->keep_attention) return NULL;
    int *tlen = tfm_arena_alloc(&g->arena, sizeof(int) * (size_t)B);
    for (int b = 0; b < B; b++) {
        if (src_valid[b] < 1 || src_valid[b] > Ts) return NULL;
        const int *row = tgt + (size_t)b * Tt;
        int n = 0;
        while (n < Tt && row[n] != TFM_PAD) n++;
        for (int t = n; t < Tt; t++)
            if (row[t] != TFM_PAD) return NULL;
        tlen[b] = n;
    }
    tf_packing *ps = tfm_arena_alloc(&g->arena, sizeof *ps), *pt = tfm_arena_alloc(&g->arena, sizeof *pt);
    *ps = tf_pack(g, src_valid, B, Ts, 0);
    *pt = tf_pack(g, tlen, B, Tt, 1);
    tfm_tensor *enc = tf_encode_rows(m, g, src, src_valid, B, Ts, ps);
    tf_state *s = tf_init_state(m, g, enc, src_valid, B, Ts, 0, B);
    s->src_pack = ps;
    s->tgt_pack = pt;
    tfm_tensor *logits = tf_decode(m, g, s, tgt_in, B, Tt);   /* (n_tgt, V) */
    int *tp = tfm_arena_alloc(&g->arena, sizeof(int) * (size_t)(pt->n > 0 ? pt->n : 1));
    for (int i = 0; i < pt->n; i++) tp[i] = tgt[pt->rows[i]];
    *targets = tp;
    return logits;
}

/* the cross-entropy of tf_train_logits */
static tfm_tensor *tf_loss(tfm_mt_net *m, tfm_graph *g, const int *src, const int *src_valid, int B, int Ts,
                           const int *tgt_in, const int *tgt, int Tt, float label_smoothing) {
    const int *tp;
    tfm_tensor *logits = tf_train_logits(m, g, src, src_valid, B, Ts, tgt_in, tgt, Tt, &tp);
    return logits ? tfm_cross_entropy(g, logits, tp, TFM_PAD, label_smoothing) : NULL;
}

/* the positional-encoding table bounds both sides */
static int tf_max_positions(const tfm_mt_net *m) { return m->cfg.max_len; }

static const tfm_mt_net_vtable tf_vtable = {
    "transformer", tf_encode, tf_init_state, tf_decode, tf_reorder, tf_free_state, tf_attention,
    tf_init_weights, tf_destroy, tf_loss, tf_max_positions, tf_train_logits, tf_decode_hidden, tf_output_layer,
};

tfm_mt_net *tfm_mt_transformer_create(const tfm_mt_config *c) {
    if (tfm_mt_config_check(c)) return NULL;
    if (c->d_model % c->n_head)
        return tfm_set_error("d_model (%d) must be divisible by n_head (%d)", c->d_model, c->n_head), NULL;
    if (c->d_model % 2) return tfm_set_error("d_model must be even (positional encoding), got %d", c->d_model), NULL;
    tfm_mt_net *m = calloc(1, sizeof *m);
    tf_impl *t = calloc(1, sizeof *t);
    if (!m || !t) {
        free(m), free(t);
        return tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory (transformer)"), NULL;
    }
    m->vt = &tf_vtable;
    m->cfg = *c;
    m->impl = t;
    int d = c->d_model, H = c->n_head, hd = d / H, L = c->n_layer;
    float p = c->dropout, pa = tfm_mt_attention_dropout(c);
    tfm_params_init(&m->params);
    tfm_params *P = &m->params;
    t->eb = calloc((size_t)L, sizeof *t->eb);
    t->db = calloc((size_t)L, sizeof *t->db);
    if (!t->eb || !t->db) {
        tf_destroy(m);
        return tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory (transformer, %d layers)", L), NULL;
    }
    char name[128], sub[192];
    tfm_Embedding_init(&t->enc_emb, P, c->share_embeddings ? "shared.embedding" : "encoder.embedding", c->src_vocab,
                       d);
    for (int l = 0; l < L; l++) {
        enc_block *b = &t->eb[l];
        snprintf(name, sizeof name, "encoder.blocks.%d", l);
        tfm_MultiHeadAttention_init(&b->attention, P, tfm_name(sub, sizeof sub, name, "attention"), d, d, d, H, hd,
                                    hd, d, c->attn_bias, pa);
        tfm_AddNorm_init(&b->addnorm1, P, tfm_name(sub, sizeof sub, name, "addnorm1"), d, p);
        tfm_PositionWiseFFN_init(&b->ffn, P, tfm_name(sub, sizeof sub, name, "ffn"), d, c->ffn, d,
                                 (tfm_activation)c->ffn_act);
        b->ffn.dropout = c->activation_dropout;
        tfm_AddNorm_init(&b->addnorm2, P, tfm_name(sub, sizeof sub, name, "addnorm2"), d, p);
    }
    if (c->pre_ln) tfm_LayerNorm_init(&t->enc_lnf, P, "encoder.ln_f", d);
    if (c->share_embeddings) t->dec_emb.weight = t->enc_emb.weight;   /* tied: one parameter */
    else tfm_Embedding_init(&t->dec_emb, P, "decoder.embedding", c->tgt_vocab, d);
    for (int l = 0; l < L; l++) {
        dec_block *b = &t->db[l];
        snprintf(name, sizeof name, "decoder.blocks.%d", l);
        tfm_MultiHeadAttention_init(&b->attention1, P, tfm_name(sub, sizeof sub, name, "attention1"), d, d, d, H,
                                    hd, hd, d, c->attn_bias, pa);
        tfm_AddNorm_init(&b->addnorm1, P, tfm_name(sub, sizeof sub, name, "addnorm1"), d, p);
        tfm_MultiHeadAttention_init(&b->attention2, P, tfm_name(sub, sizeof sub, name, "attention2"), d, d, d, H,
                                    hd, hd, d, c->attn_bias, pa);
        tfm_AddNorm_init(&b->addnorm2, P, tfm_name(sub, sizeof sub, name, "addnorm2"), d, p);
        tfm_PositionWiseFFN_init(&b->ffn, P, tfm_name(sub, sizeof sub, name, "ffn"), d, c->ffn, d,
                                 (tfm_activation)c->ffn_act);
        b->ffn.dropout = c->activation_dropout;
        tfm_AddNorm_init(&b->addnorm3, P, tfm_name(sub, sizeof sub, name, "addnorm3"), d, p);
    }
    if (c->pre_ln) tfm_LayerNorm_init(&t->dec_lnf, P, "decoder.ln_f", d);
    if (c->share_embeddings) {   /* logits = x E^T + b: the gradients of all three uses add up in E */
        t->dense.W = t->enc_emb.weight;
        t->dense.b = tfm_param1(P, "decoder.dense.bias", c->tgt_vocab);
    } else {
        tfm_Linear_init(&t->dense, P, "decoder.dense", d, c->tgt_vocab, 1);
    }
    int pe = c->pos_halves ? tfm_PositionalEncoding_init_halves(&t->pe, c->max_len, d)
                           : tfm_PositionalEncoding_init(&t->pe, c->max_len, d);
    if (tfm_params_alloc(P) || pe) {
        tf_destroy(m);
        return NULL;
    }
    return m;
}
