/* Broadcast ops: out[b,i,j,:] = a[b,i,:] + c[b,j,:] (additive attention's q_i + k_j). */
#include "ops/op_impl.h"
#include <string.h>

tfm_tensor *tfm_add_outer(tfm_graph *g, tfm_tensor *a, tfm_tensor *c) {
    OP_BEGIN(g);
    TFM_ASSERT(a->ndim == 3 && c->ndim == 3 && a->shape[0] == c->shape[0] && a->shape[2] == c->shape[2],
               "add_outer: expected (B,Tq,h) and (B,Tk,h)");
    int B = a->shape[0], Tq = a->shape[1], Tk = c->shape[1], h = a->shape[2];
    tfm_tensor *in[2] = {a, c};
    int shape[4] = {B, Tq, Tk, h};
    tfm_tensor *out = tfm_tensor_new(g, 4, shape, tfm_any_grad(g, in, 2));
    TFM_PAR_FOR((size_t)B * Tq * Tk * h >= 16384, collapse(2) schedule(static),
    for (int b = 0; b < B; b++)
        for (int i = 0; i < Tq; i++) {
            const float *ar = a->data + ((size_t)b * Tq + i) * h;
            for (int j = 0; j < Tk; j++) {
                const float *cr = c->data + ((size_t)b * Tk + j) * h;
                float *o = out->data + (((size_t)b * Tq + i) * Tk + j) * h;
                for (int k = 0; k < h; k++) o[k] = ar[k] + cr[k];
            }
        });
    tfm_graph_push(g, TFM_OP_ADD_OUTER, out, 2, in);
    OP_END(g, TFM_OP_ADD_OUTER);
    return out;
}

void tfm_bw_add_outer(tfm_node *n) {
    tfm_tensor *a = n->in[0], *c = n->in[1], *o = n->out;
    int B = a->shape[0], Tq = a->shape[1], Tk = c->shape[1], h = a->shape[2];
    /* each thread owns one batch row: no races, fixed summation order */
    TFM_PAR_FOR((size_t)B * Tq * Tk * h >= 16384, schedule(static),
    for (int b = 0; b < B; b++)
        for (int i = 0; i < Tq; i++)
            for (int j = 0; j < Tk; j++) {
                const float *go = o->grad + (((size_t)b * Tq + i) * Tk + j) * h;
                if (a->grad) {
                    float *ga = a->grad + ((size_t)b * Tq + i) * h;
                    for (int k = 0; k < h; k++) ga[k] += go[k];
                }
                if (c->grad) {
                    float *gc = c->grad + ((size_t)b * Tk + j) * h;
                    for (int k = 0; k < h; k++) gc[k] += go[k];
                }
            });
}
