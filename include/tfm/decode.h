/* tfm decode: buffers that persist across decoding steps (key/value caches).
 *
 * A tfm_kv_cache holds, for n_layer layers, projected keys and values laid out
 * (cap_rows, n_head, max_len, d) in malloc'd memory, so a decoding loop may reset its graph arena
 * between steps. Appending the new position of every row is O(rows*H*d); a view of the first
 * `len` positions is gathered into the graph arena as contiguous (rows, H, len, d) tensors (constants,
 * no grad), which is O(len) per step: the cost of one decoding step grows linearly with t, like the
 * attention itself. Rows can be reordered (beam search, dropping finished sentences).
 */
#ifndef TFM_DECODE_H
#define TFM_DECODE_H

#include "tfm/core.h"

typedef struct {
    int n_layer, cap, n_head, max_len, d;
    int len;                 /* positions filled (informational; set by the user) */
    float *k, *v;            /* n_layer * cap * n_head * max_len * d each */
    float *tmp;              /* cap * n_head * max_len * d scratch for reorder */
} tfm_kv_cache;

/* 0, or -1 with a tfm error (out of memory / too large). */
int tfm_kv_cache_init(tfm_kv_cache *c, int n_layer, int cap_rows, int n_head, int max_len, int d);
void tfm_kv_cache_free(tfm_kv_cache *c);
/* Write K, V of shape (rows, H, T, d) (graph tensors) at positions pos..pos+T-1 of layer l. */
void tfm_kv_cache_append(tfm_kv_cache *c, int layer, const tfm_tensor *K, const tfm_tensor *V, int rows, int pos);
/* Contiguous (rows, H, len, d) copies of positions 0..len-1 of layer l, as graph constants. */
void tfm_kv_cache_view(tfm_graph *g, const tfm_kv_cache *c, int layer, int rows, int len, tfm_tensor **K,
                       tfm_tensor **V);
/* new row i = old row idx[i] (i < n_new; idx values < old_rows), positions 0..c->len-1 of every layer. */
void tfm_kv_cache_reorder(tfm_kv_cache *c, const int *idx, int old_rows, int n_new);

#endif
