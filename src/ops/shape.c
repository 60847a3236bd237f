/* Data movement: permute, concat, slice (copies with backward). */
#include "ops/op_impl.h"
#include <stdint.h>
#include <string.h>

/* out.shape[i] = x.shape[perm[i]]; if back, accumulate dout into dx instead. */
static void permute_kernel(float *dst, const float *src, const int *xs, const int *perm, int back) {
    size_t xstride[4] = {(size_t)xs[1] * xs[2] * xs[3], (size_t)xs[2] * xs[3], (size_t)xs[3], 1};
    int os[4] = {xs[perm[0]], xs[perm[1]], xs[perm[2]], xs[perm[3]]};
    size_t st[4] = {xstride[perm[0]], xstride[perm[1]], xstride[perm[2]], xstride[perm[3]]};
    TFM_PAR_FOR((size_t)os[0] * os[1] * os[2] * os[3] >= 16384, collapse(2) schedule(static),
    for (int a = 0; a < os[0]; a++)
        for (int b = 0; b < os[1]; b++) {
            size_t o = ((size_t)a * os[1] + b) * os[2] * os[3];
            for (int c = 0; c < os[2]; c++)
                for (int d = 0; d < os[3]; d++, o++) {
                    size_t i = a * st[0] + b * st[1] + c * st[2] + d * st[3];
                    if (back) dst[i] += src[o];
                    else dst[o] = src[i];
                }
        });
}

tfm_tensor *tfm_permute(tfm_graph *g, tfm_tensor *x, int p0, int p1, int p2, int p3) {
    OP_BEGIN(g);
    TFM_ASSERT(x->ndim == 4, "permute needs a 4-D tensor");
    int perm[4] = {p0, p1, p2, p3};
    int shape[4] = {x->shape[p0], x->shape[p1], x->shape[p2], x->shape[p3]};
    tfm_tensor *out = tfm_tensor_new(g, 4, shape, tfm_any_grad(g, &x, 1));
    permute_kernel(out->data, x->data, x->shape, perm, 0);
    tfm_node *n = tfm_graph_push(g, TFM_OP_PERMUTE, out, 1, &x);
    if (n) memcpy(n->ip, perm, sizeof perm);
    OP_END(g, TFM_OP_PERMUTE);
    return out;
}

void tfm_bw_permute(tfm_node *n) { permute_kernel(n->in[0]->grad, n->out->grad, n->in[0]->shape, n->ip, 1); }

/* Split a shape at axis into outer (product before) and inner (product from axis on). */
static void outer_inner(const tfm_tensor *t, int axis, size_t *outer, size_t *inner) {
    *outer = tfm_shape_size(axis, t->shape);
    *inner = t->size / (*outer ? *outer : 1);
}

tfm_tensor *tfm_concat(tfm_graph *g, tfm_tensor **xs, int n, int axis) {
    OP_BEGIN(g);
    TFM_ASSERT(n >= 1 && n <= 4, "concat: 1..4 tensors");
    tfm_tensor *x0 = xs[0];
    if (axis < 0) axis += x0->ndim;
    int shape[TFM_MAX_DIMS];
    memcpy(shape, x0->shape, sizeof shape);
    shape[axis] = 0;
    for (int i = 0; i < n; i++) {
        TFM_ASSERT(xs[i]->ndim == x0->ndim, "concat: ranks differ");
        for (int d = 0; d < x0->ndim; d++)
            TFM_ASSERT(d == axis || xs[i]->shape[d] == x0->shape[d], "concat: dim %d differs", d);
        shape[axis] += xs[i]->shape[axis];
    }
    tfm_tensor *out = tfm_tensor_new(g, x0->ndim, shape, tfm_any_grad(g, xs, n));
    size_t outer, oinner;
    outer_inner(out, axis, &outer, &oinner);
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        size_t o, inner;
        outer_inner(xs[i], axis, &o, &inner);
        for (size_t r = 0; r < outer; r++)
            memcpy(out->data + r * oinner + off, xs[i]->data + r * inner, inner * sizeof(float));
        off += inner;
    }
    tfm_node *node = tfm_graph_push(g, TFM_OP_CONCAT, out, n, xs);
    if (node) node->ip[0] = axis;
    OP_END(g, TFM_OP_CONCAT);
    return out;
}

void tfm_bw_concat(tfm_node *n) {
    size_t outer, oinner, off = 0;
    outer_inner(n->out, n->ip[0], &outer, &oinner);
    for (int i = 0; i < n->n_in; i++) {
        tfm_tensor *x = n->in[i];
        size_t o, inner;
        outer_inner(x, n->ip[0], &o, &inner);
        if (x->grad)
            for (size_t r = 0; r < outer; r++) {
                const float *src = n->out->grad + r * oinner + off;
                float *dst = x->grad + r * inner;
                for (size_t j = 0; j < inner; j++) dst[j] += src[j];
            }
        off += inner;
    }
}

tfm_tensor *tfm_slice(tfm_graph *g, tfm_tensor *x, int axis, int start, int len) {
    OP_BEGIN(g);
    if (axis < 0) axis += x->ndim;
    TFM_ASSERT(start >= 0 && len >= 0 && start + len <= x->shape[axis], "slice: [%d,%d) out of %d", start,
               start + len, x->shape[axis]);
    int shape[TFM_MAX_DIMS];
    memcpy(shape, x->shape, sizeof shape);
    shape[axis] = len;
    tfm_tensor *out = tfm_tensor_new(g, x->ndim, shape, tfm_any_grad(g, &x, 1));
    size_t outer, xin, oin;
    outer_inner(x, axis, &outer, &xin);
    outer_inner(out, axis, &outer, &oin);
    size_t off = (size_t)start * (xin / x->shape[axis] * 1);
    if (x->shape[axis] == 0) off = 0;
    for (size_t r = 0; r < outer; r++) memcpy(out->data + r * oin, x->data + r * xin + off, oin * sizeof(float));
    tfm_node *n = tfm_graph_push(g, TFM_OP_SLICE, out, 1, &x);
    if (n) { n->ip[0] = axis; n->ip[1] = (int)off; }
    OP_END(g, TFM_OP_SLICE);
    return out;
}

void tfm_bw_slice(tfm_node *n) {
    tfm_tensor *x = n->in[0];
    size_t outer, xin, oin;
    outer_inner(x, n->ip[0], &outer, &xin);
    outer_inner(n->out, n->ip[0], &outer, &oin);
    for (size_t r = 0; r < outer; r++) {
        float *dst = x->grad + r * xin + n->ip[1];
        const float *src = n->out->grad + r * oin;
        for (size_t j = 0; j < oin; j++) dst[j] += src[j];
    }
}

/* ---------------------------------------------------------------- gather / scatter rows
 * Rows are the last dim's vectors of a tensor viewed as (R, C). gather: out[i] = x[idx[i]]; scatter:
 * out (R, C) is zero except out[idx[i]] = x[i] (idx distinct). Each is the other's backward. Used to
 * run row-wise ops on the valid positions of a padded batch only (src/models/transformer.c). */
static void copy_rows(float *dst, const float *src, const int *idx, int n, int C, int gather, int accumulate) {
    TFM_PAR_FOR((size_t)n * C >= 32768, schedule(static),
    for (int i = 0; i < n; i++) {
        float *d = dst + (size_t)(gather ? i : idx[i]) * C;
        const float *s = src + (size_t)(gather ? idx[i] : i) * C;
        if (accumulate)
            for (int c = 0; c < C; c++) d[c] += s[c];
        else
            memcpy(d, s, sizeof(float) * (size_t)C);
    });
}

static const int *rows_idx_copy(tfm_graph *g, const int *idx, int n, size_t R) {
    int *copy = tfm_arena_alloc(&g->arena, sizeof(int) * (size_t)(n > 0 ? n : 1));
    for (int i = 0; i < n; i++) {
        TFM_ASSERT(idx[i] >= 0 && (size_t)idx[i] < R, "rows: index %d not in [0,%zu)", idx[i], R);
        copy[i] = idx[i];
    }
    return copy;
}

tfm_tensor *tfm_gather_rows(tfm_graph *g, tfm_tensor *x, const int *idx, int n) {
    OP_BEGIN(g);
    int C = tfm_last_dim(x);
    const int *id = rows_idx_copy(g, idx, n, tfm_rows(x));
    tfm_tensor *out = tfm_tensor_new(g, 2, (int[]){n, C}, tfm_any_grad(g, &x, 1));
    copy_rows(out->data, x->data, id, n, C, 1, 0);
    tfm_node *nd = tfm_graph_push(g, TFM_OP_GATHER_ROWS, out, 1, &x);
    if (nd) nd->aux = id, nd->ip[0] = n;
    OP_END(g, TFM_OP_GATHER_ROWS);
    return out;
}

tfm_tensor *tfm_scatter_rows(tfm_graph *g, tfm_tensor *x, const int *idx, int ndim, const int *shape) {
    OP_BEGIN(g);
    int C = tfm_last_dim(x), n = (int)tfm_rows(x);
    TFM_ASSERT(shape[ndim - 1] == C, "scatter_rows: last dim %d vs %d", shape[ndim - 1], C);
    tfm_tensor *out = tfm_tensor_new(g, ndim, shape, tfm_any_grad(g, &x, 1));
    size_t R = tfm_rows(out);
    const int *id = rows_idx_copy(g, idx, n, R);
    uint8_t *hit = tfm_arena_calloc(&g->arena, R);   /* zero only the rows no index writes */
    for (int i = 0; i < n; i++) hit[id[i]] = 1;
    for (size_t r = 0; r < R; r++)
        if (!hit[r]) memset(out->data + r * C, 0, sizeof(float) * (size_t)C);
    copy_rows(out->data, x->data, id, n, C, 0, 0);
    tfm_node *nd = tfm_graph_push(g, TFM_OP_SCATTER_ROWS, out, 1, &x);
    if (nd) nd->aux = id, nd->ip[0] = n;
    OP_END(g, TFM_OP_SCATTER_ROWS);
    return out;
}

void tfm_bw_rows(tfm_node *n) {
    tfm_tensor *x = n->in[0];
    if (!x->grad) return;
    int C = tfm_last_dim(x);
    if (n->op == TFM_OP_GATHER_ROWS) copy_rows(x->grad, n->out->grad, n->aux, n->ip[0], C, 0, 1);
    else copy_rows(x->grad, n->out->grad, n->aux, n->ip[0], C, 1, 1);
}
