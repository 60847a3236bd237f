/* Embedding lookup and LayerNorm. */
#include "ops/op_impl.h"
#include <math.h>
#include <omp.h>
#include <string.h>

tfm_tensor *tfm_embedding(tfm_graph *g, tfm_tensor *table, const int *ids, int ndim, const int *shape) {
    OP_BEGIN(g);
    TFM_ASSERT(table->ndim == 2 && ndim >= 1 && ndim < TFM_MAX_DIMS, "embedding: bad shapes");
    int V = table->shape[0], C = table->shape[1];
    size_t n = tfm_shape_size(ndim, shape);
    int oshape[TFM_MAX_DIMS];
    memcpy(oshape, shape, sizeof(int) * ndim);
    oshape[ndim] = C;
    tfm_tensor *out = tfm_tensor_new(g, ndim + 1, oshape, tfm_any_grad(g, &table, 1));
    for (size_t i = 0; i < n; i++) TFM_ASSERT(ids[i] >= 0 && ids[i] < V, "embedding: id %d not in [0,%d)", ids[i], V);
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) memcpy(out->data + i * C, table->data + (size_t)ids[i] * C, sizeof(float) * C);
    tfm_node *node = tfm_graph_push(g, TFM_OP_EMBEDDING, out, 1, &table);
    if (node) {
        int *copy = tfm_arena_alloc(&g->arena, n * sizeof(int));
        memcpy(copy, ids, n * sizeof(int));
        node->aux = copy;
        node->ip[0] = (int)n;
    }
    OP_END(g, TFM_OP_EMBEDDING);
    return out;
}

/* Threads split the embedding columns, so each row of the table is summed in id order. */
void tfm_bw_embedding(tfm_node *n) {
    tfm_tensor *table = n->in[0];
    const int *ids = n->aux;
    int count = n->ip[0], C = table->shape[1];
#pragma omp parallel
    {
        int nt = omp_get_num_threads(), t = omp_get_thread_num();
        int per = (C + nt - 1) / nt, c0 = t * per, c1 = c0 + per < C ? c0 + per : C;
        for (int i = 0; i < count; i++) {
            float *dst = table->grad + (size_t)ids[i] * C;
            const float *src = n->out->grad + (size_t)i * C;
            for (int c = c0; c < c1; c++) dst[c] += src[c];
        }
    }
}

/* ---------------------------------------------------------------- layernorm */
void tfm_layernorm_forward(float *out, float *mean, float *rstd, const float *x, const float *w, const float *b,
                           int rows, int C, float eps) {
#pragma omp parallel for schedule(static)
    for (int r = 0; r < rows; r++) {
        const float *xr = x + (size_t)r * C;
        float m = 0;
        for (int c = 0; c < C; c++) m += xr[c];
        m /= C;
        float v = 0;
        for (int c = 0; c < C; c++) v += (xr[c] - m) * (xr[c] - m);
        v /= C;
        float s = 1.0f / sqrtf(v + eps);
        float *o = out + (size_t)r * C;
        for (int c = 0; c < C; c++) {
            float nrm = (xr[c] - m) * s;
            o[c] = nrm * (w ? w[c] : 1.0f) + (b ? b[c] : 0.0f);
        }
        mean[r] = m;
        rstd[r] = s;
    }
}

/* dx += rstd * (dnorm - mean(dnorm) - norm * mean(dnorm * norm)), dnorm = dout * w;
 * dw += sum_r dout * norm, db += sum_r dout. */
void tfm_layernorm_backward(float *dx, float *dw, float *db, const float *dout, const float *x, const float *w,
                            const float *mean, const float *rstd, int rows, int C) {
    if (dx) {
#pragma omp parallel for schedule(static)
        for (int r = 0; r < rows; r++) {
            const float *xr = x + (size_t)r * C, *dr = dout + (size_t)r * C;
            float m = mean[r], s = rstd[r], sum_d = 0, sum_dn = 0;
            for (int c = 0; c < C; c++) {
                float dn = dr[c] * (w ? w[c] : 1.0f);
                sum_d += dn;
                sum_dn += dn * (xr[c] - m) * s;
            }
            sum_d /= C;
            sum_dn /= C;
            float *o = dx + (size_t)r * C;
            for (int c = 0; c < C; c++) {
                float dn = dr[c] * (w ? w[c] : 1.0f);
                o[c] += s * (dn - sum_d - (xr[c] - m) * s * sum_dn);
            }
        }
    }
    if (dw || db) {
#pragma omp parallel
        {
            int nt = omp_get_num_threads(), t = omp_get_thread_num();
            int per = (C + nt - 1) / nt, c0 = t * per, c1 = c0 + per < C ? c0 + per : C;
            for (int r = 0; r < rows; r++) {
                const float *xr = x + (size_t)r * C, *dr = dout + (size_t)r * C;
                float m = mean[r], s = rstd[r];
                for (int c = c0; c < c1; c++) {
                    if (dw) dw[c] += dr[c] * (xr[c] - m) * s;
                    if (db) db[c] += dr[c];
                }
            }
        }
    }
}

tfm_tensor *tfm_layernorm(tfm_graph *g, tfm_tensor *x, tfm_tensor *w, tfm_tensor *b, float eps) {
    OP_BEGIN(g);
    int C = tfm_last_dim(x), rows = (int)tfm_rows(x);
    TFM_ASSERT((!w || (int)w->size == C) && (!b || (int)b->size == C), "layernorm: weight size != %d", C);
    tfm_tensor *in[3] = {x, w, b};
    tfm_tensor *out = tfm_tensor_new(g, x->ndim, x->shape, tfm_any_grad(g, in, 3));
    float *stats = tfm_arena_alloc(&g->arena, sizeof(float) * 2 * rows);
    tfm_layernorm_forward(out->data, stats, stats + rows, x->data, w ? w->data : NULL, b ? b->data : NULL, rows, C,
                          eps);
    tfm_node *n = tfm_graph_push(g, TFM_OP_LAYERNORM, out, 3, in);
    if (n) n->saved = stats;
    OP_END(g, TFM_OP_LAYERNORM);
    return out;
}

void tfm_bw_layernorm(tfm_node *n) {
    tfm_tensor *x = n->in[0], *w = n->in[1], *b = n->in[2];
    int C = tfm_last_dim(x), rows = (int)tfm_rows(x);
    const float *stats = n->saved;
    tfm_layernorm_backward(x->grad, w ? w->grad : NULL, b ? b->grad : NULL, n->out->grad, x->data,
                           w ? w->data : NULL, stats, stats + rows, rows, C);
}
