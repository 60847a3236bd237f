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
    case TFM_OP_SQUARE: tfm_bw_unary(n); break;
    case TFM_OP_SUM: case TFM_OP_MEAN: tfm_bw_reduce(n); break;
    case TFM_OP_DROPOUT: tfm_bw_dropout(n); break;
    case TFM_OP_EMBEDDING: tfm_bw_embedding(n); break;
    case TFM_OP_LAYERNORM: tfm_bw_layernorm(n); break;
    case TFM_OP_SOFTMAX: tfm_bw_softmax(n); break;
    case TFM_OP_CROSS_ENTROPY: tfm_bw_cross_entropy(n); break;
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

void tfm_backward(tfm_graph *g, tfm_tensor *loss) {
    TFM_ASSERT(loss->size == 1 && loss->grad, "tfm_backward: loss must be a scalar that tracks grad");
    tfm_tensor_zero_grad_once(loss);
    loss->grad[0] += 1.0f;
    for (int i = g->n_nodes - 1; i >= 0; i--) {
        tfm_node *n = &g->nodes[i];
        double t0 = g->profile ? tfm_now() : 0;
        /* the grads this op reads or adds to, zeroed now rather than when the forward allocated them */
        if (n->out->grad) tfm_tensor_zero_grad_once(n->out);
        for (int k = 0; k < n->n_in; k++)
            if (n->in[k] && n->in[k]->grad) tfm_tensor_zero_grad_once(n->in[k]);
        tfm_op_backward(n);
        if (g->profile) g->op_time[n->op] += tfm_now() - t0;
    }
}
