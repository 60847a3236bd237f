/* Tensors, parameter sets, graph-owned tensors and views. */
#include "tfm/core.h"
#include "core/mem.h"
#include "core/q8.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

size_t tfm_shape_size(int ndim, const int *shape) {
    size_t n = 1;
    for (int i = 0; i < ndim; i++) n *= (size_t)shape[i];
    return n;
}

int tfm_same_shape(const tfm_tensor *a, const tfm_tensor *b) {
    if (a->ndim != b->ndim) return 0;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i]) return 0;
    return 1;
}

const char *tfm_shape_str(const tfm_tensor *t, char *buf, size_t n) {
    size_t k = 0;
    k += snprintf(buf + k, n - k, "(");
    for (int i = 0; i < t->ndim && k < n; i++) k += snprintf(buf + k, n - k, i ? ",%d" : "%d", t->shape[i]);
    if (k < n) snprintf(buf + k, n - k, ")");
    return buf;
}

static void set_shape(tfm_tensor *t, int ndim, const int *shape) {
    TFM_ASSERT(ndim >= 1 && ndim <= TFM_MAX_DIMS, "tensor rank %d not in 1..%d", ndim, TFM_MAX_DIMS);
    t->ndim = ndim;
    for (int i = 0; i < ndim; i++) {
        TFM_ASSERT(shape[i] >= 0, "negative dimension %d", shape[i]);
        t->shape[i] = shape[i];
    }
    for (int i = ndim; i < TFM_MAX_DIMS; i++) t->shape[i] = 1;
    t->size = tfm_shape_size(ndim, shape);
}

/* ---------------------------------------------------------------- parameters */
void tfm_params_init(tfm_params *p) { memset(p, 0, sizeof *p); }

tfm_tensor *tfm_param(tfm_params *p, const char *name, int ndim, const int *shape) {
    TFM_ASSERT(!p->data, "tfm_param(%s) after tfm_params_alloc", name);
    TFM_ASSERT(!tfm_params_find(p, name), "duplicate parameter name %s", name);
    if (p->n == p->cap) {
        p->cap = p->cap ? 2 * p->cap : 32;
        p->t = realloc(p->t, sizeof *p->t * p->cap);
        if (!p->t) tfm_fatal("out of memory");
    }
    tfm_tensor *t = calloc(1, sizeof *t);
    if (!t) tfm_fatal("out of memory");
    set_shape(t, ndim, shape);
    t->name = strdup(name);
    p->t[p->n++] = t;
    p->total += t->size;
    return t;
}

tfm_tensor *tfm_param1(tfm_params *p, const char *name, int d0) { return tfm_param(p, name, 1, &d0); }
tfm_tensor *tfm_param2(tfm_params *p, const char *name, int d0, int d1) {
    int s[2] = {d0, d1};
    return tfm_param(p, name, 2, s);
}

int tfm_params_alloc(tfm_params *p) {
    p->data_floats = p->total ? p->total : 1;
    size_t bytes = p->data_floats * sizeof(float);
    p->data = tfm_weights_alloc_(bytes);   /* huge pages where it pays: decoding streams through it */
    p->grad = p->data ? calloc(1, bytes) : NULL;
    if (!p->data || !p->grad) {
        tfm_weights_free_(p->data, bytes);
        p->data = NULL;
        return tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory: %zu parameters (2 x %.1f MiB)", p->total, bytes / 1048576.0), -1;
    }
    size_t off = 0;
    for (int i = 0; i < p->n; i++) {
        p->t[i]->data = p->data + off;
        p->t[i]->grad = p->grad + off;
        off += p->t[i]->size;
    }
    return 0;
}

/* Not on the hot path: the training loops zero once per run, then release the grads after each step. */
void tfm_params_zero_grad(tfm_params *p) {
    memset(p->grad, 0, p->total * sizeof(float));
    for (int i = 0; i < p->n; i++) p->t[i]->grad_unzeroed = 0;
}

/* A parameter's grad_unzeroed flag is the graph tensors' own: tfm_backward hands a flagged grad to its
 * first writer to assign, or zeroes it right before the first op that adds to it. */
void tfm_params_release_grad(tfm_params *p) {
    for (int i = 0; i < p->n; i++) p->t[i]->grad_unzeroed = 1;
}

void tfm_params_settle_grad(tfm_params *p) {
    for (int i = 0; i < p->n; i++) tfm_tensor_zero_grad_once(p->t[i]);
}

int tfm_params_share_data(tfm_params *replica, const tfm_params *src) {
    if (replica->n != src->n || replica->total != src->total || !replica->data || !src->data)
        return tfm_set_error("replica: %d tensors / %zu floats, the model %d / %zu", replica->n, replica->total, src->n,
                             src->total), -1;
    for (int i = 0; i < src->n; i++)
        if (strcmp(replica->t[i]->name, src->t[i]->name) || !tfm_same_shape(replica->t[i], src->t[i]))
            return tfm_set_error("replica: tensor %d is %s, the model's %s", i, replica->t[i]->name, src->t[i]->name), -1;
    tfm_weights_free_(replica->data, replica->data_floats * sizeof(float));
    replica->data = NULL;   /* not ours: tfm_params_free leaves it alone */
    for (int i = 0; i < src->n; i++) replica->t[i]->data = src->t[i]->data, replica->t[i]->q8 = src->t[i]->q8,
        replica->t[i]->packed = src->t[i]->packed;
    return 0;
}

tfm_tensor *tfm_params_find(const tfm_params *p, const char *name) {
    for (int i = 0; i < p->n; i++)
        if (!strcmp(p->t[i]->name, name)) return p->t[i];
    return NULL;
}

void tfm_params_free(tfm_params *p) {
    tfm_params_free_q8_(p);
    for (int i = 0; i < p->n; i++) {
        free((char *)p->t[i]->name);
        free(p->t[i]);
    }
    free(p->t);
    tfm_weights_free_(p->data, p->data_floats * sizeof(float));
    free(p->grad);
    memset(p, 0, sizeof *p);
}

/* ---------------------------------------------------------------- graph tensors */
tfm_tensor *tfm_tensor_new(tfm_graph *g, int ndim, const int *shape, int want_grad) {
    tfm_tensor *t = tfm_arena_alloc(&g->arena, sizeof *t);
    memset(t, 0, sizeof *t);
    set_shape(t, ndim, shape);
    t->data = tfm_arena_alloc(&g->arena, t->size * sizeof(float));
    if (want_grad && g->grad_enabled) tfm_tensor_alloc_grad(g, t);
    return t;
}

void tfm_tensor_alloc_grad(tfm_graph *g, tfm_tensor *t) {
    t->grad = tfm_arena_alloc(&g->arena, t->size * sizeof(float));
    t->grad_unzeroed = 1;
}

void tfm_tensor_zero_grad_once(tfm_tensor *t) {
    if (t->view_of) t = t->view_of;
    if (!t->grad_unzeroed) return;
    t->grad_unzeroed = 0;
    size_t bytes = t->size * sizeof(float);
    if (bytes < ((size_t)1 << 18)) { memset(t->grad, 0, bytes); return; }
    /* large gradient buffers are zeroed by all threads of an op-parallel step */
    char *p = (char *)t->grad;
    size_t nb = (bytes + 65535) / 65536;
#pragma omp parallel for schedule(static)
    for (size_t b = 0; b < nb; b++) {
        size_t off = b * 65536;
        memset(p + off, 0, off + 65536 < bytes ? 65536 : bytes - off);
    }
}

tfm_tensor *tfm_new1(tfm_graph *g, int d0) { return tfm_tensor_new(g, 1, &d0, 0); }
tfm_tensor *tfm_new2(tfm_graph *g, int d0, int d1) {
    int s[2] = {d0, d1};
    return tfm_tensor_new(g, 2, s, 0);
}
tfm_tensor *tfm_new3(tfm_graph *g, int d0, int d1, int d2) {
    int s[3] = {d0, d1, d2};
    return tfm_tensor_new(g, 3, s, 0);
}
tfm_tensor *tfm_new4(tfm_graph *g, int d0, int d1, int d2, int d3) {
    int s[4] = {d0, d1, d2, d3};
    return tfm_tensor_new(g, 4, s, 0);
}

tfm_tensor *tfm_constant(tfm_graph *g, float *data, int ndim, const int *shape) {
    tfm_tensor *t = tfm_arena_alloc(&g->arena, sizeof *t);
    memset(t, 0, sizeof *t);
    set_shape(t, ndim, shape);
    t->data = data;
    return t;
}

tfm_tensor *tfm_reshape(tfm_graph *g, tfm_tensor *x, int ndim, const int *shape) {
    tfm_tensor *t = tfm_arena_alloc(&g->arena, sizeof *t);
    *t = *x;
    t->view_of = x->view_of ? x->view_of : x;
    t->grad_unzeroed = 0;
    set_shape(t, ndim, shape);
    TFM_ASSERT(t->size == x->size, "reshape: %zu elements into %zu", x->size, t->size);
    return t;
}
tfm_tensor *tfm_reshape2(tfm_graph *g, tfm_tensor *x, int d0, int d1) {
    int s[2] = {d0, d1};
    return tfm_reshape(g, x, 2, s);
}
tfm_tensor *tfm_reshape3(tfm_graph *g, tfm_tensor *x, int d0, int d1, int d2) {
    int s[3] = {d0, d1, d2};
    return tfm_reshape(g, x, 3, s);
}
tfm_tensor *tfm_reshape4(tfm_graph *g, tfm_tensor *x, int d0, int d1, int d2, int d3) {
    int s[4] = {d0, d1, d2, d3};
    return tfm_reshape(g, x, 4, s);
}
