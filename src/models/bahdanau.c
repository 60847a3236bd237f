/* Bahdanau attention decoder (d2l Seq2SeqAttentionDecoder) on the seq2seq.h interface. The encoder,
 * state handling, logits and init are shared with the plain RNN translator (rnn_seq2seq.c). */
#include "models/rnn_impl.h"
#include <stdlib.h>
#include <string.h>

static void *bahdanau_init_state(tfm_mt_net *m, tfm_graph *g, tfm_tensor *enc, const int *src_valid, int B, int Ts,
                                 int max_steps, int cap_rows) {
    return tfm_rnn_state_new(m, g, enc, src_valid, B, Ts, max_steps, cap_rows);
}

static tfm_tensor *bahdanau_decode(tfm_mt_net *m, tfm_graph *g, void *state, const int *tgt_in, int B, int T) {
    tfm_rnn_s2s *r = m->impl;
    tfm_rnn_state *s = state;
    TFM_ASSERT(B == s->B, "bahdanau decode: %d rows, state has %d", B, s->B);
    int H = s->H, L = s->L, Ts = s->Ts, E = m->cfg.embed_size;
    tfm_tensor *keys = s->incremental ? tfm_constant(g, s->keys_buf, 3, (int[]){B, Ts, H}) : s->keys;
    tfm_tensor *pkeys = s->incremental ? tfm_constant(g, s->pkeys_buf, 3, (int[]){B, Ts, H}) : s->proj_keys;
    int *valid = tfm_arena_alloc(&g->arena, sizeof(int) * (size_t)B);
    memcpy(valid, s->valid, sizeof(int) * B);
    tfm_mask mask = {.valid_lens = valid};
    tfm_tensor *emb = tfm_rnn_embed_tm(g, &r->dec_emb, tgt_in, B, T);              /* (T,B,E) */
    tfm_tensor *hidden = tfm_rnn_state_hidden(g, s);                               /* (L,B,H) */
    tfm_tensor **outs = tfm_arena_alloc(&g->arena, sizeof(tfm_tensor *) * (size_t)T);
    r->attn_steps = tfm_arena_alloc(&g->arena, sizeof(tfm_tensor *) * (size_t)T);
    for (int t = 0; t < T; t++) {
        tfm_tensor *query = tfm_reshape3(g, tfm_slice(g, hidden, 0, L - 1, 1), B, 1, H);
        tfm_tensor *ctx = tfm_AdditiveAttention_attend(g, &r->attention, query, pkeys, keys, &mask);  /* (B,1,H) */
        r->attn_steps[t] = r->attention.weights;                                   /* (B,1,Ts) */
        tfm_tensor *parts[2] = {tfm_reshape2(g, ctx, B, H), tfm_reshape2(g, tfm_slice(g, emb, 0, t, 1), B, E)};
        tfm_tensor *x = tfm_reshape3(g, tfm_concat(g, parts, 2, 1), 1, B, H + E);
        outs[t] = tfm_GRU_forward(g, &r->dec_rnn, x, hidden, &hidden);           /* (1,B,H) */
    }
    r->attn_T = T;
    r->attn_B = B;
    r->attn_Ts = Ts;
    tfm_rnn_state_set_hidden(s, hidden);
    return tfm_rnn_logits(g, r, tfm_concat_many(g, outs, T, 0));
}

static int bahdanau_attention(tfm_mt_net *m, int b, tfm_attn_map *maps, int max) {
    tfm_rnn_s2s *r = m->impl;
    if (!r->attn_steps || r->attn_T == 0 || b < 0 || b >= r->attn_B) return 0;
    if (max < 1) return 1;
    free(r->attn_buf);
    r->attn_buf = malloc(sizeof(float) * (size_t)r->attn_T * r->attn_Ts);
    if (!r->attn_buf) return 0;
    for (int t = 0; t < r->attn_T; t++)
        memcpy(r->attn_buf + (size_t)t * r->attn_Ts, r->attn_steps[t]->data + (size_t)b * r->attn_Ts,
               sizeof(float) * r->attn_Ts);
    maps[0] = (tfm_attn_map){TFM_MAP_ENC_DEC, 0, 1, r->attn_T, r->attn_Ts, r->attn_buf};
    return 1;
}

static const tfm_mt_net_vtable bahdanau_vt = {
    "bahdanau", tfm_rnn_encode, bahdanau_init_state, bahdanau_decode, tfm_rnn_reorder, tfm_rnn_free_state,
    bahdanau_attention, tfm_rnn_init_weights, tfm_rnn_destroy, NULL, NULL,
};

tfm_mt_net *tfm_mt_bahdanau_create(const tfm_mt_config *c) { return tfm_rnn_family_create(c, 1, &bahdanau_vt); }
