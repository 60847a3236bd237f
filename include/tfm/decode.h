/* tfm decode: buffers that persist across decoding steps (key/value caches).
 *
 * A tfm_kv_cache holds, for n_layer layers, projected keys and values in n_slot slots laid out
 * (n_slot, n_head, max_len, d) in malloc'd memory, so a decoding loop may reset its graph arena between
 * steps. Batch row r lives in slot slot[r]. Attention reads the cache in place (tfm_kv_cache_ref +
 * tfm_attention_kv: the real strides, a length and the row -> slot index), so a step never copies the
 * prefix; appending the new position of every row is O(rows*H*d).
 *
 * Rows are reordered (beam search, dropping finished sentences) by remapping slots:
 *   tfm_kv_cache_reorder  for caches that are appended to (decoder self-attention, one slot per row):
 *                         a new row takes over its parent's slot; only a second child of the same parent
 *                         gets a free slot with the parent's positions 0..len-1 copied into it.
 *   tfm_kv_cache_select   for read-only caches (encoder keys/values, one slot per sentence): rows just
 *                         point at their parent's slot and may share it; nothing is copied.
 * Neither allocates (the scratch is made by tfm_kv_cache_init).
 */
#ifndef TFM_DECODE_H
#define TFM_DECODE_H

#include "tfm/core.h"
#include "tfm/ops.h"

typedef struct {
    int n_layer, n_slot, cap, n_head, max_len, d;
    int len;                 /* positions filled (set by the user); reorder copies positions 0..len-1 */
    float *k, *v;            /* n_layer * n_slot * n_head * max_len * d each */
    int *slot;               /* cap: batch row -> slot */
    int *scratch;            /* cap + n_slot ints for reorder / select */
    long n_copied;           /* slots whose prefix reorder has copied (statistics, tests) */
} tfm_kv_cache;

/* n_slot slots, up to cap_rows batch rows (row r starts in slot r, so rows >= n_slot must be created by
 * reorder/select before use). 0, or -1 with a tfm error (out of memory / too large). */
int tfm_kv_cache_init(tfm_kv_cache *c, int n_layer, int n_slot, int cap_rows, int n_head, int max_len, int d);
void tfm_kv_cache_free(tfm_kv_cache *c);
/* Write K, V of shape (rows, T, H*d) (the layout the projections produce; graph tensors) at positions
 * pos..pos+T-1 of layer l, row r into its slot. */
void tfm_kv_cache_append(tfm_kv_cache *c, int layer, const tfm_tensor *K, const tfm_tensor *V, int rows, int pos);
/* Positions 0..len-1 of layer l for tfm_attention_kv, in place (valid until the next reorder/select). */
tfm_kv_ref tfm_kv_cache_ref(const tfm_kv_cache *c, int layer, int len);
/* new row i = old row idx[i] (i < n_new; idx values < old_rows): see above. */
void tfm_kv_cache_reorder(tfm_kv_cache *c, const int *idx, int old_rows, int n_new);
void tfm_kv_cache_select(tfm_kv_cache *c, const int *idx, int old_rows, int n_new);

#endif
