/* The tape's internals (not public API): a recorded op, appending one, and the grad buffer plan. Included by
 * the op implementations (src/ops/op_impl.h), the graph (src/core/graph.c, grad_plan.c) and white-box tests. */
#ifndef TFM_GRAPH_IMPL_H
#define TFM_GRAPH_IMPL_H

#include "tfm/core.h"

struct tfm_node {
    tfm_op op;
    tfm_tensor *out;
    tfm_tensor *in[4];
    int n_in;
    int ip[8];                /* op-specific integer parameters */
    float fp[4];              /* op-specific float parameters */
    void *saved;              /* op-specific saved buffer (arena) */
    const void *aux;          /* op-specific auxiliary data copied into the arena (ids, lengths) */
    const void *aux2;
    unsigned fresh;           /* set by tfm_backward: bit k = in[k]'s grad holds nothing yet, so the op
                                 assigns it instead of adding to it (and it was not zeroed) */
};

/* Append a node for op (returns NULL if no grad is tracked). */
tfm_node *tfm_graph_push(tfm_graph *g, tfm_op op, tfm_tensor *out, int n_in, tfm_tensor **in);
/* tfm_backward with recycle_grads: points the grads of g's intermediate tensors into g's pool. */
void tfm_grad_plan(tfm_graph *g, tfm_tensor *loss);

#endif
