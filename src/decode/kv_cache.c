/* Key/value caches for incremental decoding (include/tfm/decode.h). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tfm/decode.h"

int tfm_kv_cache_init(tfm_kv_cache *c, int n_layer, int cap_rows, int n_head, int max_len, int d) {
    memset(c, 0, sizeof *c);
    if (n_layer < 1 || cap_rows < 1 || n_head < 1 || max_len < 1 || d < 1)
        return tfm_set_error("kv cache: bad sizes"), -1;
    size_t per_layer = (size_t)cap_rows * n_head * max_len * d;
    if (per_layer > ((size_t)1 << 34) / sizeof(float) / (size_t)n_layer)
        return tfm_set_error("kv cache: %d rows x %d positions is too large", cap_rows, max_len), -1;
    c->n_layer = n_layer;
    c->cap = cap_rows;
    c->n_head = n_head;
    c->max_len = max_len;
    c->d = d;
    c->k = malloc(per_layer * n_layer * sizeof(float));
    c->v = malloc(per_layer * n_layer * sizeof(float));
    c->tmp = malloc(per_layer * sizeof(float));
    if (!c->k || !c->v || !c->tmp) {
        tfm_kv_cache_free(c);
        return tfm_set_error("kv cache: out of memory"), -1;
    }
    return 0;
}

void tfm_kv_cache_free(tfm_kv_cache *c) {
    free(c->k);
    free(c->v);
    free(c->tmp);
    c->k = c->v = c->tmp = NULL;
}

static float *row_ptr(const tfm_kv_cache *c, float *base, int layer, int row, int head, int pos) {
    return base + ((((size_t)layer * c->cap + row) * c->n_head + head) * c->max_len + pos) * c->d;
}

void tfm_kv_cache_append(tfm_kv_cache *c, int layer, const tfm_tensor *K, const tfm_tensor *V, int rows, int pos) {
    int T = K->shape[2], H = c->n_head, d = c->d;
    TFM_ASSERT(K->ndim == 4 && K->shape[0] == rows && K->shape[1] == H && K->shape[3] == d && rows <= c->cap &&
                   pos + T <= c->max_len && layer < c->n_layer && tfm_same_shape(K, V),
               "kv cache append: shape mismatch (rows %d, pos %d, T %d)", rows, pos, T);
    for (int r = 0; r < rows; r++)
        for (int h = 0; h < H; h++) {
            size_t src = (((size_t)r * H + h) * T) * d;
            memcpy(row_ptr(c, c->k, layer, r, h, pos), K->data + src, sizeof(float) * (size_t)T * d);
            memcpy(row_ptr(c, c->v, layer, r, h, pos), V->data + src, sizeof(float) * (size_t)T * d);
        }
}

void tfm_kv_cache_view(tfm_graph *g, const tfm_kv_cache *c, int layer, int rows, int len, tfm_tensor **K,
                       tfm_tensor **V) {
    int H = c->n_head, d = c->d;
    TFM_ASSERT(rows <= c->cap && len <= c->max_len && layer < c->n_layer, "kv cache view: out of range");
    if (len == c->max_len) {   /* full rows are already contiguous */
        *K = tfm_constant(g, row_ptr(c, c->k, layer, 0, 0, 0), 4, (int[]){rows, H, len, d});
        *V = tfm_constant(g, row_ptr(c, c->v, layer, 0, 0, 0), 4, (int[]){rows, H, len, d});
        return;
    }
    *K = tfm_new4(g, rows, H, len, d);
    *V = tfm_new4(g, rows, H, len, d);
    for (int r = 0; r < rows; r++)
        for (int h = 0; h < H; h++) {
            size_t dst = (((size_t)r * H + h) * len) * d;
            memcpy((*K)->data + dst, row_ptr(c, c->k, layer, r, h, 0), sizeof(float) * (size_t)len * d);
            memcpy((*V)->data + dst, row_ptr(c, c->v, layer, r, h, 0), sizeof(float) * (size_t)len * d);
        }
}

void tfm_kv_cache_reorder(tfm_kv_cache *c, const int *idx, int old_rows, int n_new) {
    TFM_ASSERT(n_new <= c->cap && old_rows <= c->cap, "kv cache reorder: %d rows, cap %d", n_new, c->cap);
    int H = c->n_head, d = c->d, len = c->len;
    if (len <= 0) return;
    size_t seg = (size_t)len * d;
    for (int pass = 0; pass < 2; pass++) {
        float *base = pass ? c->v : c->k;
        for (int l = 0; l < c->n_layer; l++) {
            for (int i = 0; i < n_new; i++) {
                TFM_ASSERT(idx[i] >= 0 && idx[i] < old_rows, "kv cache reorder: index %d", idx[i]);
                for (int h = 0; h < H; h++)
                    memcpy(c->tmp + ((size_t)i * H + h) * seg, row_ptr(c, base, l, idx[i], h, 0), seg * sizeof(float));
            }
            for (int i = 0; i < n_new; i++)
                for (int h = 0; h < H; h++)
                    memcpy(row_ptr(c, base, l, i, h, 0), c->tmp + ((size_t)i * H + h) * seg, seg * sizeof(float));
        }
    }
}
