/* RNN sequence-to-sequence (d2l Seq2SeqEncoder / Seq2SeqDecoder) on the seq2seq.h interface, and the
 * pieces the Bahdanau decoder (bahdanau.c) shares: encoder, time-major embedding, logits, decoder
 * state (training tensors or malloc'd incremental buffers), reorder, init, destroy. */
#include "models/rnn_impl.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static tfm_rnn_s2s *R(tfm_mt_net *m) { return m->impl; }

tfm_tensor *tfm_swap01(tfm_graph *g, tfm_tensor *x) {
    int a = x->shape[0], b = x->shape[1], c = x->shape[2];
    return tfm_reshape3(g, tfm_permute(g, tfm_reshape4(g, x, a, b, c, 1), 1, 0, 2, 3), b, a, c);
}

tfm_tensor *tfm_rnn_embed_tm(tfm_graph *g, const tfm_Embedding *e, const int *ids, int B, int T) {
    int *t_ids = tfm_arena_alloc(&g->arena, sizeof(int) * (size_t)B * T);
    for (int t = 0; t < T; t++)
        for (int b = 0; b < B; b++) t_ids[t * B + b] = ids[b * T + t];
    return tfm_embedding(g, e->weight, t_ids, 2, (int[]){T, B});
}

tfm_tensor *tfm_rnn_logits(tfm_graph *g, const tfm_rnn_s2s *r, tfm_tensor *out_tm) {
    return tfm_swap01(g, tfm_Linear_forward(g, &r->dense, out_tm));
}

/* Encoder output handed to init_state: [top-layer outputs (Ts,B,H) ; final hidden state (L,B,H)]
 * stacked on axis 0 -> (Ts+L, B, H). */
tfm_tensor *tfm_rnn_encode(tfm_mt_net *m, tfm_graph *g, const int *src, const int *src_valid, int B, int Ts) {
    (void)src_valid;   /* d2l's encoder runs over the padding too; the decoders mask it */
    tfm_rnn_s2s *r = R(m);
    tfm_tensor *hn, *out = tfm_GRU_forward(g, &r->enc_rnn, tfm_rnn_embed_tm(g, &r->enc_emb, src, B, Ts), NULL, &hn);
    tfm_tensor *parts[2] = {out, hn};
    return tfm_concat(g, parts, 2, 0);
}


tfm_rnn_state *tfm_rnn_state_new(tfm_mt_net *m, tfm_graph *g, tfm_tensor *enc, const int *src_valid, int B, int Ts,
                                 int max_steps, int cap_rows) {
    tfm_rnn_s2s *r = R(m);
    int L = m->cfg.n_layer, H = m->cfg.hidden_size;
    TFM_ASSERT(enc->ndim == 3 && enc->shape[0] == Ts + L && enc->shape[1] == B, "rnn init_state: bad encoder output");
    tfm_tensor *enc_tm = tfm_slice(g, enc, 0, 0, Ts), *hn = tfm_slice(g, enc, 0, Ts, L);
    tfm_tensor *keys = NULL, *pkeys = NULL;
    if (r->bahdanau) {
        keys = tfm_swap01(g, enc_tm);                                   /* (B,Ts,H) */
        pkeys = tfm_Linear_forward(g, &r->attention.W_k, keys);
    }
    tfm_rnn_state *s;
    int cap = B;
    if (max_steps == 0) {
        s = tfm_arena_calloc(&g->arena, sizeof *s);
        s->valid = tfm_arena_alloc(&g->arena, sizeof(int) * (size_t)B);
        s->enc_tm = enc_tm;
        s->hidden = hn;
        s->keys = keys;
        s->proj_keys = pkeys;
    } else {
        cap = cap_rows > B ? cap_rows : B;
        s = calloc(1, sizeof *s);
        if (!s) return tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory (decoder state)"), NULL;
        s->incremental = 1;
        s->valid = malloc(sizeof(int) * 2 * (size_t)cap);   /* + cap ints of reorder scratch */
        size_t row = (size_t)(r->bahdanau ? Ts : 1) * H;
        s->h_buf = malloc(sizeof(float) * L * cap * H);
        s->scratch = malloc(sizeof(float) * cap * (row > (size_t)L * H ? row : (size_t)L * H));
        if (r->bahdanau) {
            s->keys_buf = malloc(sizeof(float) * cap * row);
            s->pkeys_buf = malloc(sizeof(float) * cap * row);
        } else {
            s->ctx_buf = malloc(sizeof(float) * cap * H);
        }
        if (!s->valid || !s->h_buf || !s->scratch || (r->bahdanau ? !s->keys_buf || !s->pkeys_buf : !s->ctx_buf)) {
            tfm_rnn_free_state(m, s);   /* a search gets NULL: -1 with this error */
            return tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory (decoder state, %d rows)", cap), NULL;
        }
        memcpy(s->h_buf, hn->data, sizeof(float) * hn->size);
        if (r->bahdanau) {
            memcpy(s->keys_buf, keys->data, sizeof(float) * keys->size);
            memcpy(s->pkeys_buf, pkeys->data, sizeof(float) * pkeys->size);
        } else {
            memcpy(s->ctx_buf, enc_tm->data + (size_t)(Ts - 1) * B * H, sizeof(float) * B * H);
        }
    }
    s->B = B;
    s->Ts = Ts;
    s->L = L;
    s->H = H;
    s->cap = cap;
    for (int b = 0; b < B; b++) s->valid[b] = src_valid ? src_valid[b] : Ts;
    return s;
}

tfm_tensor *tfm_rnn_state_hidden(tfm_graph *g, tfm_rnn_state *s) {
    if (!s->incremental) return s->hidden;
    return tfm_constant(g, s->h_buf, 3, (int[]){s->L, s->B, s->H});
}

void tfm_rnn_state_set_hidden(tfm_rnn_state *s, tfm_tensor *h) {
    if (s->incremental) memcpy(s->h_buf, h->data, sizeof(float) * h->size);
    else s->hidden = h;
}

/* rows of `per` floats: buf[i] = old buf[idx[i]], for `groups` groups of B rows (the L layers) */
static void gather_rows(float *buf, float *scratch, int groups, int B_old, int n, const int *idx, size_t per) {
    for (int l = 0; l < groups; l++)
        for (int i = 0; i < n; i++)
            memcpy(scratch + ((size_t)l * n + i) * per, buf + ((size_t)l * B_old + idx[i]) * per, per * sizeof(float));
    memcpy(buf, scratch, sizeof(float) * groups * n * per);
}

void tfm_rnn_reorder(tfm_mt_net *m, void *state, const int *idx, int n) {
    (void)m;
    tfm_rnn_state *s = state;
    TFM_ASSERT(s->incremental && n <= s->cap, "rnn reorder: %d rows > capacity %d", n, s->cap);
    int *v = s->valid + s->cap;   /* scratch allocated with valid: no malloc per step */
    for (int i = 0; i < n; i++) v[i] = s->valid[idx[i]];
    memcpy(s->valid, v, sizeof(int) * n);
    gather_rows(s->h_buf, s->scratch, s->L, s->B, n, idx, (size_t)s->H);
    if (s->ctx_buf) gather_rows(s->ctx_buf, s->scratch, 1, s->B, n, idx, (size_t)s->H);
    if (s->keys_buf) {
        gather_rows(s->keys_buf, s->scratch, 1, s->B, n, idx, (size_t)s->Ts * s->H);
        gather_rows(s->pkeys_buf, s->scratch, 1, s->B, n, idx, (size_t)s->Ts * s->H);
    }
    s->B = n;
}

void tfm_rnn_free_state(tfm_mt_net *m, void *state) {
    (void)m;
    tfm_rnn_state *s = state;
    if (!s || !s->incremental) return;
    free(s->valid);
    free(s->h_buf);
    free(s->ctx_buf);
    free(s->keys_buf);
    free(s->pkeys_buf);
    free(s->scratch);
    free(s);
}

void tfm_rnn_init_weights(tfm_mt_net *m, uint64_t seed) {
    tfm_rnn_s2s *r = R(m);
    tfm_rng rng;
    tfm_rng_seed(&rng, seed);
    /* PyTorch defaults (embedding N(0,1), Linear bias U(+-1/sqrt(in))) with d2l's init_seq2seq:
     * Xavier-uniform Linear and GRU weights */
    tfm_init_normal(r->enc_emb.weight, &rng, 1.0f);
    tfm_init_normal(r->dec_emb.weight, &rng, 1.0f);
    tfm_GRU_init_weights(&r->enc_rnn, &rng);
    tfm_GRU_init_weights(&r->dec_rnn, &rng);
    tfm_init_xavier(r->dense.W, &rng);
    tfm_init_uniform(r->dense.b, &rng, 1.0f / sqrtf((float)m->cfg.hidden_size));
    if (r->bahdanau) {
        tfm_init_xavier(r->attention.W_q.W, &rng);
        tfm_init_xavier(r->attention.W_k.W, &rng);
        tfm_init_xavier(r->attention.w_v.W, &rng);
    }
}

void tfm_rnn_destroy(tfm_mt_net *m) {
    if (!m) return;
    tfm_rnn_s2s *r = R(m);
    if (r) free(r->attn_buf);
    free(r);
    tfm_params_free(&m->params);
    free(m);
}

tfm_mt_net *tfm_rnn_family_create(const tfm_mt_config *c, int bahdanau, const tfm_mt_net_vtable *vt) {
    tfm_mt_config k = *c;   /* the family's checks, whatever c->arch says */
    snprintf(k.arch, sizeof k.arch, "%s", bahdanau ? "bahdanau" : "rnn");
    if (tfm_mt_config_check(&k)) return NULL;
    const char *bad = c->src_vocab < 1 ? "src_vocab" : c->tgt_vocab < 1 ? "tgt_vocab"
                      : c->embed_size < 1 ? "embed_size" : c->hidden_size < 1 ? "hidden_size"
                      : (c->n_layer < 1 || c->n_layer > TFM_GRU_MAX_LAYERS) ? "n_layer"
                      : !(c->dropout >= 0 && c->dropout < 1) ? "dropout" : NULL;
    if (bad) {
        tfm_set_error("%s config: %s out of range", bahdanau ? "bahdanau" : "rnn", bad);
        return NULL;
    }
    tfm_mt_net *m = calloc(1, sizeof *m);
    tfm_rnn_s2s *r = calloc(1, sizeof *r);
    if (!m || !r) {
        free(m), free(r);
        return tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory (%s model)", bahdanau ? "bahdanau" : "rnn"), NULL;
    }
    m->vt = vt;
    m->cfg = *c;
    m->impl = r;
    r->bahdanau = bahdanau;
    int E = c->embed_size, H = c->hidden_size, L = c->n_layer;
    tfm_params *p = &m->params;
    tfm_params_init(p);
    tfm_Embedding_init(&r->enc_emb, p, "encoder.embedding", c->src_vocab, E);
    tfm_GRU_init(&r->enc_rnn, p, "encoder.rnn", E, H, L, c->dropout);
    if (bahdanau) tfm_AdditiveAttention_init(&r->attention, p, "decoder.attention", H, H, H, c->dropout);
    tfm_Embedding_init(&r->dec_emb, p, "decoder.embedding", c->tgt_vocab, E);
    tfm_GRU_init(&r->dec_rnn, p, "decoder.rnn", E + H, H, L, c->dropout);
    tfm_Linear_init(&r->dense, p, "decoder.dense", H, c->tgt_vocab, 1);
    if (tfm_params_alloc(p)) {
        tfm_rnn_destroy(m);
        return NULL;
    }
    return m;
}

/* ---------------------------------------------------------------- the plain RNN decoder */
static void *rnn_init_state(tfm_mt_net *m, tfm_graph *g, tfm_tensor *enc, const int *src_valid, int B, int Ts,
                            int max_steps, int cap_rows) {
    return tfm_rnn_state_new(m, g, enc, src_valid, B, Ts, max_steps, cap_rows);
}

static tfm_tensor *rnn_decode(tfm_mt_net *m, tfm_graph *g, void *state, const int *tgt_in, int B, int T) {
    tfm_rnn_s2s *r = R(m);
    tfm_rnn_state *s = state;
    TFM_ASSERT(B == s->B, "rnn decode: %d rows, state has %d", B, s->B);
    int H = s->H;
    tfm_tensor *emb = tfm_rnn_embed_tm(g, &r->dec_emb, tgt_in, B, T);              /* (T,B,E) */
    tfm_tensor *ctx = s->incremental ? tfm_constant(g, s->ctx_buf, 2, (int[]){B, H})
                                     : tfm_reshape2(g, tfm_slice(g, s->enc_tm, 0, s->Ts - 1, 1), B, H);
    tfm_tensor *zeros = tfm_new3(g, T, B, H);
    memset(zeros->data, 0, sizeof(float) * zeros->size);
    tfm_tensor *parts[2] = {emb, tfm_add(g, zeros, ctx)};                          /* context repeated T times */
    tfm_tensor *hn, *out = tfm_GRU_forward(g, &r->dec_rnn, tfm_concat(g, parts, 2, 2), tfm_rnn_state_hidden(g, s), &hn);
    tfm_rnn_state_set_hidden(s, hn);
    return tfm_rnn_logits(g, r, out);
}

static int rnn_attention(tfm_mt_net *m, int b, tfm_attn_map *maps, int max) {
    (void)m, (void)b, (void)maps, (void)max;
    return 0;
}

static const tfm_mt_net_vtable rnn_vt = {
    "rnn", tfm_rnn_encode, rnn_init_state, rnn_decode, tfm_rnn_reorder, tfm_rnn_free_state, rnn_attention,
    tfm_rnn_init_weights, tfm_rnn_destroy, NULL, NULL,
};

tfm_mt_net *tfm_mt_rnn_create(const tfm_mt_config *c) { return tfm_rnn_family_create(c, 0, &rnn_vt); }
