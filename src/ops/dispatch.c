/* Op enum -> backward kernel, and tfm_backward: the tape replayed in reverse through them. */
#include "ops/op_impl.h"

void tfm_op_backward(tfm_node *n) {
    switch (n->op) {
    case TFM_OP_MATMUL: tfm_bw_matmul(n); break;
    case TFM_OP_LINEAR: tfm_bw_linear(n); break;
    case TFM_OP_ADD: tfm_bw_add(n); break;
    case TFM_OP_SUB: tfm_bw_sub(n); break;
    case TFM_OP_MUL: tfm_bw_mul(n); break;
    case TFM_OP_SCALE: tfm_bw_scale(n); break;
    case TFM_OP_ADD_SCALAR: tfm_bw_add_scalar(n); break;
    case TFM_OP_GELU: case TFM_OP_RELU: case TFM_OP_TANH: case TFM_OP_SIGMOID: case TFM_OP_EXP:
    case TFM_OP_SQUARE: case TFM_OP_SILU: case TFM_OP_GELU_ERF: tfm_bw_unary(n); break;
    case TFM_OP_SUM: case TFM_OP_MEAN: tfm_bw_reduce(n); break;
    case TFM_OP_DROPOUT: tfm_bw_dropout(n); break;
    case TFM_OP_EMBEDDING: tfm_bw_embedding(n); break;
    case TFM_OP_LAYERNORM: tfm_bw_layernorm(n); break;
    case TFM_OP_SOFTMAX: tfm_bw_softmax(n); break;
    case TFM_OP_CROSS_ENTROPY: tfm_bw_cross_entropy(n); break;
    case TFM_OP_SYM_KL: tfm_bw_sym_kl(n); break;
    case TFM_OP_PERMUTE: tfm_bw_permute(n); break;
    case TFM_OP_CONCAT: tfm_bw_concat(n); break;
    case TFM_OP_SLICE: tfm_bw_slice(n); break;
    case TFM_OP_ADD_OUTER: tfm_bw_add_outer(n); break;
    case TFM_OP_LINEAR_GELU:
    case TFM_OP_LINEAR_RELU: tfm_bw_linear_act(n); break;
    case TFM_OP_ADD_LAYERNORM: tfm_bw_add_layernorm(n); break;
    case TFM_OP_GATHER_ROWS:
    case TFM_OP_SCATTER_ROWS: tfm_bw_rows(n); break;
    case TFM_OP_ATTENTION: tfm_bw_attention(n); break;
    default: tfm_fatal("no backward for op %s", tfm_op_name(n->op));
    }
}

/* Ops whose backward writes every element of in[k]'s grad and can assign it (tfm_bw_fresh) instead of
 * adding to it. */
static int bw_can_assign(const tfm_node *n, int k) {
    switch (n->op) {
    case TFM_OP_LINEAR: case TFM_OP_LINEAR_GELU: case TFM_OP_LINEAR_RELU: return k <= 1;   /* x and W (dW GEMM) */
    case TFM_OP_ADD: case TFM_OP_SUB: return n->in[k]->size == n->out->size;   /* not a broadcast bias (a column sum) */
    case TFM_OP_LAYERNORM: return k == 0;
    case TFM_OP_ADD_LAYERNORM: return k <= 1;
    case TFM_OP_CROSS_ENTROPY: return k == 0;
    case TFM_OP_ATTENTION: return n->ip[2] && k <= 2;   /* the per-entry variant writes all of q, k, v's grads */
    default: return 0;
    }
}

static tfm_tensor *grad_owner(tfm_tensor *t) { return t->view_of ? t->view_of : t; }

/* Does in[k]'s grad buffer also belong to the output or to another input of n (x + x)? */
static int grad_shared(const tfm_node *n, int k) {
    const tfm_tensor *o = grad_owner(n->in[k]);
    if (grad_owner(n->out) == o) return 1;
    for (int j = 0; j < n->n_in; j++)
        if (j != k && n->in[j] && grad_owner(n->in[j]) == o) return 1;
    return 0;
}

/* The grads n reads or adds to, made ready right before its backward: a grad that holds nothing yet is
 * either zeroed now (not when the forward allocated it, when its lines would be cold again by now) or,
 * when n's backward writes all of it and is its first writer (the last consumer in the forward), left
 * to n to assign: no zeroing, and no read of zeros. */
static void grads_ready(tfm_node *n) {
    n->fresh = 0;
    if (n->out->grad) tfm_tensor_zero_grad_once(n->out);
    for (int k = 0; k < n->n_in; k++) {
        tfm_tensor *t = n->in[k];
        if (!t || !t->grad) continue;
        tfm_tensor *o = grad_owner(t);
        if (o->grad_unzeroed && bw_can_assign(n, k) && !grad_shared(n, k)) {
            o->grad_unzeroed = 0;
            n->fresh |= 1u << k;
        } else {
            tfm_tensor_zero_grad_once(t);
        }
    }
}

void tfm_backward(tfm_graph *g, tfm_tensor *loss) {
    TFM_ASSERT(loss->size == 1 && loss->grad, "tfm_backward: loss must be a scalar that tracks grad");
    if (g->recycle_grads) tfm_grad_plan(g, loss);
    tfm_tensor_zero_grad_once(loss);
    loss->grad[0] += 1.0f;
    for (int i = g->n_nodes - 1; i >= 0; i--) {
        tfm_node *n = &g->nodes[i];
        double t0 = g->profile ? tfm_now() : 0;
        grads_ready(n);
        tfm_op_backward(n);
        if (g->profile) g->op_time[n->op] += tfm_now() - t0;
    }
}
