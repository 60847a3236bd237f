/* The autodiff tape: nodes appended by ops during the forward pass, replayed in reverse by
 * tfm_backward(). */
#include "tfm/core.h"
#include "ops/op_impl.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *op_names[TFM_OP_COUNT] = {
    [TFM_OP_MATMUL] = "matmul", [TFM_OP_LINEAR] = "linear", [TFM_OP_ADD] = "add", [TFM_OP_SUB] = "sub",
    [TFM_OP_MUL] = "mul", [TFM_OP_SCALE] = "scale", [TFM_OP_ADD_SCALAR] = "add_scalar",
    [TFM_OP_EMBEDDING] = "embedding", [TFM_OP_LAYERNORM] = "layernorm", [TFM_OP_GELU] = "gelu",
    [TFM_OP_RELU] = "relu", [TFM_OP_TANH] = "tanh", [TFM_OP_SIGMOID] = "sigmoid", [TFM_OP_EXP] = "exp",
    [TFM_OP_SQUARE] = "square", [TFM_OP_SOFTMAX] = "softmax", [TFM_OP_DROPOUT] = "dropout",
    [TFM_OP_CROSS_ENTROPY] = "cross_entropy", [TFM_OP_PERMUTE] = "permute", [TFM_OP_CONCAT] = "concat",
    [TFM_OP_SLICE] = "slice", [TFM_OP_SUM] = "sum", [TFM_OP_MEAN] = "mean", [TFM_OP_ATTENTION] = "attention",
    [TFM_OP_ADD_OUTER] = "add_outer", [TFM_OP_LINEAR_GELU] = "linear_gelu",
};

const char *tfm_op_name(tfm_op op) { return op >= 0 && op < TFM_OP_COUNT && op_names[op] ? op_names[op] : "?"; }

void tfm_graph_init(tfm_graph *g, uint64_t seed) {
    memset(g, 0, sizeof *g);
    tfm_arena_init(&g->arena, 1u << 22);
    g->grad_enabled = 1;
    tfm_rng_seed(&g->rng, seed);
}

void tfm_graph_reset(tfm_graph *g) {
    tfm_arena_reset(&g->arena);
    g->n_nodes = 0;
}

void tfm_graph_free(tfm_graph *g) {
    tfm_arena_free(&g->arena);
    free(g->nodes);
    g->nodes = NULL;
}

tfm_node *tfm_graph_push(tfm_graph *g, tfm_op op, tfm_tensor *out, int n_in, tfm_tensor **in) {
    if (!g->grad_enabled || !out->grad) return NULL;
    if (g->n_nodes == g->cap_nodes) {
        g->cap_nodes = g->cap_nodes ? 2 * g->cap_nodes : 256;
        g->nodes = realloc(g->nodes, sizeof *g->nodes * g->cap_nodes);
        if (!g->nodes) tfm_fatal("out of memory (graph tape)");
    }
    tfm_node *n = &g->nodes[g->n_nodes++];
    memset(n, 0, sizeof *n);
    n->op = op;
    n->out = out;
    n->n_in = n_in;
    for (int i = 0; i < n_in; i++) n->in[i] = in[i];
    return n;
}

void tfm_backward(tfm_graph *g, tfm_tensor *loss) {
    TFM_ASSERT(loss->size == 1 && loss->grad, "tfm_backward: loss must be a scalar that tracks grad");
    loss->grad[0] += 1.0f;
    for (int i = g->n_nodes - 1; i >= 0; i--) {
        tfm_node *n = &g->nodes[i];
        double t0 = g->profile ? tfm_now() : 0;
        tfm_op_backward(n);
        if (g->profile) g->op_time[n->op] += tfm_now() - t0;
    }
}

void tfm_graph_print(const tfm_graph *g, void *file) {
    FILE *f = file ? file : stdout;
    char b1[64], b2[64];
    for (int i = 0; i < g->n_nodes; i++) {
        const tfm_node *n = &g->nodes[i];
        fprintf(f, "%4d %-14s -> %-16s <-", i, tfm_op_name(n->op), tfm_shape_str(n->out, b1, sizeof b1));
        for (int k = 0; k < n->n_in; k++)
            if (n->in[k]) fprintf(f, " %s%s", n->in[k]->name ? n->in[k]->name : "", tfm_shape_str(n->in[k], b2, sizeof b2));
        fputc('\n', f);
    }
}
