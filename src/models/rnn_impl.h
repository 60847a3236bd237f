/* Private to src/models/: the RNN translators' data and the pieces rnn_seq2seq.c shares with bahdanau.c. */
#ifndef TFM_RNN_IMPL_H
#define TFM_RNN_IMPL_H

#include "tfm/rnn.h"
#include "tfm/road.h"
#include "tfm/seq2seq.h"

/* ---------------------------------------------------------------- RNN translators (seq2seq.h interface)
 * d2l's Seq2SeqEncoder (embedding + GRU, time-major), and two decoders sharing everything else:
 *   rnn:      Seq2SeqDecoder: input = [embedding ; context], context = the encoder's top-layer output at
 *             the last source step, initial state = the encoder's final hidden state, dense to vocab.
 *   bahdanau: Seq2SeqAttentionDecoder: per step, query = previous top-layer hidden state, AdditiveAttention
 *             over the encoder outputs (masked by the source valid lengths), input = [context ; embedding].
 * Parameter names follow the PyTorch twins (scripts/gru_twin.py, scripts/bahdanau_twin.py):
 *   encoder.embedding.weight, encoder.rnn.weight_ih_l0, ..., decoder.embedding.weight, decoder.rnn.*,
 *   decoder.dense.weight/bias, decoder.attention.W_q/W_k/w_v.weight (bahdanau).
 * Built by tfm_mt_rnn_create / tfm_mt_bahdanau_create (declared in seq2seq.h). */

typedef struct {
    int bahdanau;
    tfm_Embedding enc_emb, dec_emb;
    tfm_GRU enc_rnn, dec_rnn;
    tfm_Linear dense;
    tfm_AdditiveAttention attention;   /* bahdanau only */
    /* attention weights of the last decode() call (bahdanau, keep_attention): T tensors (B,1,Ts) */
    tfm_tensor **attn_steps;
    int attn_T, attn_B, attn_Ts;
    float *attn_buf;                   /* attention(): one batch row copied out (malloc'd) */
} tfm_rnn_s2s;

/* Decoder state shared by both decoders. Training: graph tensors; incremental: malloc'd buffers
 * wrapped as constants at each step. */
typedef struct {
    int incremental, B, Ts, L, H, cap;
    tfm_tensor *enc_tm;        /* training: encoder top-layer outputs, time-major (Ts,B,H) */
    tfm_tensor *hidden;        /* training: (L,B,H) current decoder hidden state */
    tfm_tensor *keys;          /* bahdanau training: encoder outputs batch-major (B,Ts,H) */
    tfm_tensor *proj_keys;     /* bahdanau training: W_k keys (B,Ts,H) */
    int *valid;                /* (cap) source valid lengths */
    float *h_buf;              /* incremental: (L,B,H) */
    float *ctx_buf;            /* incremental rnn: (B,H) context */
    float *keys_buf, *pkeys_buf;   /* incremental bahdanau: (B,Ts,H) each */
    float *scratch;
} tfm_rnn_state;

/* Shared pieces (src/models/rnn_seq2seq.c), used by bahdanau.c. */
tfm_mt_net *tfm_rnn_family_create(const tfm_mt_config *c, int bahdanau, const tfm_mt_net_vtable *vt);
/* ids (B,T) row-major -> embeddings time-major (T,B,E) */
tfm_tensor *tfm_rnn_embed_tm(tfm_graph *g, const tfm_Embedding *e, const int *ids, int B, int T);
/* top-layer outputs (T,B,H) -> logits (B,T,V) */
tfm_tensor *tfm_rnn_logits(tfm_graph *g, const tfm_rnn_s2s *r, tfm_tensor *out_tm);
/* (T,B,C) <-> (B,T,C) */
tfm_tensor *tfm_swap01(tfm_graph *g, tfm_tensor *x);
tfm_tensor *tfm_rnn_encode(tfm_mt_net *m, tfm_graph *g, const int *src, const int *src_valid, int B, int Ts);
tfm_rnn_state *tfm_rnn_state_new(tfm_mt_net *m, tfm_graph *g, tfm_tensor *enc, const int *src_valid, int B, int Ts,
                                 int max_steps, int cap_rows);
/* decoder hidden state (L,B,H) for this step (graph tensor or constant over h_buf) and its update */
tfm_tensor *tfm_rnn_state_hidden(tfm_graph *g, tfm_rnn_state *s);
void tfm_rnn_state_set_hidden(tfm_rnn_state *s, tfm_tensor *h);
void tfm_rnn_reorder(tfm_mt_net *m, void *state, const int *idx, int n);
void tfm_rnn_free_state(tfm_mt_net *m, void *state);
void tfm_rnn_destroy(tfm_mt_net *m);
void tfm_rnn_init_weights(tfm_mt_net *m, uint64_t seed);

#endif
