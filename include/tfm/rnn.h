/* tfm rnn: the GRU and the RNN translators of d2l's "Modern RNNs" / "Attention" chapters.
 *
 * GRU (PyTorch nn.GRU semantics and parameter layout, so weights copy one to one):
 *   r = sigmoid(W_ir x + b_ir + W_hr h + b_hr)
 *   z = sigmoid(W_iz x + b_iz + W_hz h + b_hz)
 *   n = tanh(W_in x + b_in + r * (W_hn h + b_hn))
 *   h' = (1 - z) * n + z * h
 * "<name>.weight_ih_l{k}" (3H, in_k) with rows ordered r, z, n; "<name>.weight_hh_l{k}" (3H, H);
 * "<name>.bias_ih_l{k}", "<name>.bias_hh_l{k}" (3H). Inputs are time-major (T,B,in) like nn.GRU;
 * dropout is applied to the outputs of every layer but the last (training only).
 * Backward through time comes from the autodiff tape: the GRU is composed of linear, slice, add,
 * sigmoid, tanh, mul, sub and concat nodes.
 *
 * The RNN translators built on it (rnn, bahdanau) are reached through seq2seq.h (tfm_mt_net_create); their
 * internals are private to src/models/ (src/models/rnn_impl.h).
 */
#ifndef TFM_RNN_H
#define TFM_RNN_H

#include "tfm/nn.h"

#define TFM_GRU_MAX_LAYERS 8

typedef struct {
    int input_size, hidden_size, num_layers;
    float dropout;
    tfm_tensor *W_ih[TFM_GRU_MAX_LAYERS], *W_hh[TFM_GRU_MAX_LAYERS];
    tfm_tensor *b_ih[TFM_GRU_MAX_LAYERS], *b_hh[TFM_GRU_MAX_LAYERS];
} tfm_GRU;

TFM_API void tfm_GRU_init(tfm_GRU *m, tfm_params *p, const char *name, int input_size, int hidden_size, int num_layers,
                  float dropout);
/* d2l's init_seq2seq: Xavier-uniform weights; biases keep PyTorch's default U(-1/sqrt(H), 1/sqrt(H)). */
TFM_API void tfm_GRU_init_weights(tfm_GRU *m, tfm_rng *r);
/* One step of one layer: x (B,in_k), h (B,H) -> h' (B,H). gi = W_ih x + b_ih may be precomputed
 * (pass x = NULL and gi (B,3H)). */
TFM_API tfm_tensor *tfm_GRU_cell(tfm_graph *g, const tfm_GRU *m, int layer, tfm_tensor *x, tfm_tensor *gi, tfm_tensor *h);
/* X (T,B,in), h0 (L,B,H) or NULL (zeros) -> outputs of the top layer (T,B,H); *h_n (L,B,H) if non-NULL. */
TFM_API tfm_tensor *tfm_GRU_forward(tfm_graph *g, const tfm_GRU *m, tfm_tensor *X, tfm_tensor *h0, tfm_tensor **h_n);
/* Concatenate any number of tensors along axis (a tree of tfm_concat, which takes at most 4).
 * Overwrites xs[]. */
TFM_API tfm_tensor *tfm_concat_many(tfm_graph *g, tfm_tensor **xs, int n, int axis);

#endif
