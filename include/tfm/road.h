/* tfm road: the attention chapter before the Transformer.
 *   (tfm_add_outer, the broadcast sum q_i + k_j that additive attention needs, is an op: ops.h);
 *   - AdditiveAttention (d2l 11.3): scores w_v^T tanh(W_q q + W_k k), masked softmax, dropout, @ values;
 *   - Nadaraya-Watson kernel regression (d2l's attention-pooling toy problem), non-parametric and with a
 *     learnable kernel width trained by SGD through the autodiff tape.
 */
#ifndef TFM_ROAD_H
#define TFM_ROAD_H

#include "tfm/nn.h"

/* ---------------------------------------------------------------- AdditiveAttention */
typedef struct {
    tfm_Linear W_q, W_k, w_v;    /* "<name>.W_q.weight" (h,q_in), "<name>.W_k.weight" (h,k_in), "<name>.w_v.weight" (1,h) */
    float dropout;
    tfm_tensor *weights;         /* last attention weights (B,Tq,Tk), valid until the graph is reset */
} tfm_AdditiveAttention;
TFM_API void tfm_AdditiveAttention_init(tfm_AdditiveAttention *m, tfm_params *p, const char *name, int query_size,
                                int key_size, int num_hiddens, float dropout);
/* queries (B,Tq,q_in), keys (B,Tk,k_in), values (B,Tk,dv) -> (B,Tq,dv). mask: key valid lengths (per batch
 * row or per query) or NULL. */
TFM_API tfm_tensor *tfm_AdditiveAttention_forward(tfm_graph *g, tfm_AdditiveAttention *m, tfm_tensor *queries,
                                          tfm_tensor *keys, tfm_tensor *values, const tfm_mask *mask);
/* The same with keys already projected by W_k (B,Tk,h): decoders project the encoder outputs once. */
TFM_API tfm_tensor *tfm_AdditiveAttention_attend(tfm_graph *g, tfm_AdditiveAttention *m, tfm_tensor *queries,
                                         tfm_tensor *proj_keys, tfm_tensor *values, const tfm_mask *mask);

/* ---------------------------------------------------------------- Nadaraya-Watson kernel regression */
typedef struct {
    int n_train, n_test;
    float *x_train, *y_train;    /* n_train, x sorted ascending */
    float *x_test, *y_truth;     /* n_test, noise-free truth f(x) = 2 sin(x) + x^0.8 */
} tfm_kr_data;
/* d2l's toy problem: n_train inputs uniform in [0,5) sorted, y = f(x) + N(0, 0.5); x_test = 0, 0.1, ... */
TFM_API void tfm_kr_data_make(tfm_kr_data *d, int n_train, int n_test, uint64_t seed);
TFM_API void tfm_kr_data_free(tfm_kr_data *d);
/* Gaussian-kernel attention pooling: weights[i,j] = softmax_j(-((xq_i - xk_j) w)^2 / 2), pred_i =
 * sum_j weights[i,j] yk_j. weights (nq x nk) may be NULL. w = 1 is the non-parametric estimator. */
TFM_API void tfm_kr_predict(const float *xq, int nq, const float *xk, const float *yk, int nk, float w, float *pred,
                    float *weights);
/* The parametric version trained as d2l does: every training input is a query whose keys/values are the
 * other n-1 training pairs; loss = sum of squared errors (nn.MSELoss(reduction="none").sum());
 * full-batch SGD on w. w starts at U[0,1) from seed. losses[epoch] receives each epoch's loss
 * (before the step). Returns the learned w. */
TFM_API float tfm_kr_train(const tfm_kr_data *d, int epochs, float lr, uint64_t seed, float *losses);
/* Mean squared error of pred against truth. */
TFM_API double tfm_kr_mse(const float *pred, const float *truth, int n);

#endif
