/* Private helpers shared by the op implementations in src/ops/. */
#ifndef TFM_OP_IMPL_H
#define TFM_OP_IMPL_H
#include "tfm/core.h"
#include "tfm/kernels.h"
#include "tfm/ops.h"

/* Calls the op's backward kernel: accumulates into the grads of n->in[]. */
void tfm_op_backward(tfm_node *n);

/* Does any input track grad (so the output must, and a node is recorded)? */
static inline int tfm_any_grad(const tfm_graph *g, tfm_tensor **in, int n) {
    if (!g->grad_enabled) return 0;
    for (int i = 0; i < n; i++)
        if (in[i] && in[i]->grad) return 1;
    return 0;
}

/* Profile bracket for forward kernels: time is added to g->op_time[op]. */
#define OP_BEGIN(g) double op_t0_ = (g)->profile ? tfm_now() : 0
#define OP_END(g, op) do { if ((g)->profile) (g)->op_time[op] += tfm_now() - op_t0_; } while (0)

/* out[c] += sum_r m[r*cols + c]. Threads split the columns, so the summation order is fixed
 * (deterministic for any thread count). */
void tfm_add_column_sums(const float *m, int rows, int cols, float *out);

/* Backward kernels, one per op (defined next to their forward). */
void tfm_bw_matmul(tfm_node *n);
void tfm_bw_linear(tfm_node *n);
void tfm_bw_add(tfm_node *n);
void tfm_bw_sub(tfm_node *n);
void tfm_bw_mul(tfm_node *n);
void tfm_bw_scale(tfm_node *n);
void tfm_bw_add_scalar(tfm_node *n);
void tfm_bw_unary(tfm_node *n);      /* gelu relu tanh sigmoid exp square */
void tfm_bw_reduce(tfm_node *n);     /* sum mean */
void tfm_bw_dropout(tfm_node *n);
void tfm_bw_embedding(tfm_node *n);
void tfm_bw_layernorm(tfm_node *n);
void tfm_bw_softmax(tfm_node *n);
void tfm_bw_cross_entropy(tfm_node *n);
void tfm_bw_permute(tfm_node *n);
void tfm_bw_concat(tfm_node *n);
void tfm_bw_slice(tfm_node *n);
void tfm_bw_add_outer(tfm_node *n);   /* broadcast.c */
void tfm_bw_linear_gelu(tfm_node *n); /* matmul.c */
void tfm_bw_attention(tfm_node *n);   /* attention.c (fused, flash-style) */
#endif
