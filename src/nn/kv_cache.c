/* Key/value caches for incremental decoding (include/tfm/nn.h). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tfm/nn.h"
#include "core/par.h"

static size_t layer_floats(int n_slot, int n_head, int max_len, int d) {
    return (size_t)n_slot * n_head * max_len * d;
}

size_t tfm_kv_cache_floats(int n_layer, int n_slot, int n_head, int max_len, int d) {
    if (n_layer < 1 || n_slot < 1 || n_head < 1 || max_len < 1 || d < 1) return 0;
    size_t per_layer = layer_floats(n_slot, n_head, max_len, d);
    if (per_layer > ((size_t)1 << 34) / sizeof(float) / (size_t)n_layer) return 0;
    return 2 * per_layer * (size_t)n_layer;
}

int tfm_kv_cache_init_in(tfm_kv_cache *c, float *mem, int n_layer, int n_slot, int cap_rows, int n_head,
                         int max_len, int d) {
    memset(c, 0, sizeof *c);
    if (n_layer < 1 || n_slot < 1 || cap_rows < 1 || n_head < 1 || max_len < 1 || d < 1)
        return tfm_set_error("kv cache: bad sizes"), -1;
    size_t total = tfm_kv_cache_floats(n_layer, n_slot, n_head, max_len, d);
    if (!total) return tfm_set_error("kv cache: %d rows x %d positions is too large", n_slot, max_len), -1;
    c->n_layer = n_layer;
    c->n_slot = n_slot;
    c->cap = cap_rows;
    c->n_head = n_head;
    c->max_len = max_len;
    c->d = d;
    c->own_kv = !mem;
    c->k = mem ? mem : malloc(total * sizeof(float));
    c->v = c->k ? c->k + total / 2 : NULL;
    c->slot = malloc(sizeof(int) * (size_t)cap_rows);
    c->scratch = malloc(sizeof(int) * (3 * (size_t)cap_rows + n_slot));
    if (!c->k || !c->slot || !c->scratch) {
        tfm_kv_cache_free(c);
        return tfm_set_error_kind(TFM_ERR_NOMEM, "kv cache: out of memory"), -1;
    }
    for (int r = 0; r < cap_rows; r++) c->slot[r] = r < n_slot ? r : 0;
    return 0;
}

int tfm_kv_cache_init(tfm_kv_cache *c, int n_layer, int n_slot, int cap_rows, int n_head, int max_len, int d) {
    return tfm_kv_cache_init_in(c, NULL, n_layer, n_slot, cap_rows, n_head, max_len, d);
}

void tfm_kv_cache_free(tfm_kv_cache *c) {
    if (c->own_kv) free(c->k);   /* v is the second half of the same block */
    free(c->slot);
    free(c->scratch);
    c->k = c->v = NULL;
    c->slot = c->scratch = NULL;
}

static float *slot_ptr(const tfm_kv_cache *c, float *base, int layer, int slot, int head, int pos) {
    return base + ((((size_t)layer * c->n_slot + slot) * c->n_head + head) * c->max_len + pos) * c->d;
}

void tfm_kv_cache_append(tfm_kv_cache *c, int layer, const tfm_tensor *K, const tfm_tensor *V, int rows, int pos) {
    int H = c->n_head, d = c->d;
    TFM_ASSERT(K->ndim == 3 && K->shape[0] == rows && K->shape[2] == H * d && tfm_same_shape(K, V) &&
                   rows <= c->cap && pos >= 0 && pos + K->shape[1] <= c->max_len && layer < c->n_layer,
               "kv cache append: shape mismatch (rows %d, pos %d)", rows, pos);
    int T = K->shape[1];
    size_t row = (size_t)H * d;
    for (int r = 0; r < rows; r++) {
        int s = c->slot[r];
        TFM_ASSERT(s >= 0 && s < c->n_slot, "kv cache append: row %d has no slot", r);
        for (int t = 0; t < T; t++) {
            const float *kr = K->data + ((size_t)r * T + t) * row, *vr = V->data + ((size_t)r * T + t) * row;
            for (int h = 0; h < H; h++) {
                memcpy(slot_ptr(c, c->k, layer, s, h, pos + t), kr + (size_t)h * d, sizeof(float) * (size_t)d);
                memcpy(slot_ptr(c, c->v, layer, s, h, pos + t), vr + (size_t)h * d, sizeof(float) * (size_t)d);
            }
        }
    }
}

tfm_kv_ref tfm_kv_cache_ref(const tfm_kv_cache *c, int layer, int len) {
    TFM_ASSERT(layer < c->n_layer && len >= 1 && len <= c->max_len, "kv cache ref: layer %d len %d", layer, len);
    size_t sh = (size_t)c->max_len * c->d, sb = sh * c->n_head, off = (size_t)layer * c->n_slot * sb;
    return (tfm_kv_ref){c->k + off, c->v + off, c->slot, sb, sh, (size_t)c->d, len, c->d};
}

/* positions 0..len-1 of every layer and head: slot from[i] -> slot to[i], i < n (distinct targets, and
 * no target is a source: the copies are independent, so threads split them) */
static void copy_slots(tfm_kv_cache *c, const int *from, const int *to, int n) {
    size_t seg = sizeof(float) * (size_t)c->len * c->d;
    int L = c->n_layer, nt = tfm_get_threads();
    size_t bytes = 2 * seg * (size_t)n * L * c->n_head;
    TFM_PAR_FOR(nt > 1 && bytes >= (1u << 18), collapse(2) schedule(static) num_threads(nt),
    for (int i = 0; i < n; i++)
        for (int l = 0; l < L; l++)
            for (int h = 0; h < c->n_head; h++) {
                memcpy(slot_ptr(c, c->k, l, to[i], h, 0), slot_ptr(c, c->k, l, from[i], h, 0), seg);
                memcpy(slot_ptr(c, c->v, l, to[i], h, 0), slot_ptr(c, c->v, l, from[i], h, 0), seg);
            });
    c->n_copied += n;
}

void tfm_kv_cache_reorder(tfm_kv_cache *c, const int *idx, int old_rows, int n_new) {
    TFM_ASSERT(n_new <= c->cap && n_new <= c->n_slot && old_rows <= c->cap, "kv cache reorder: %d rows, cap %d",
               n_new, c->cap);
    int *ns = c->scratch, *from = ns + c->cap, *to = from + c->cap;   /* new row -> slot; copies */
    int *owner = to + c->cap;                                         /* slot -> new row or -1 */
    for (int s = 0; s < c->n_slot; s++) owner[s] = -1;
    for (int i = 0; i < n_new; i++) {   /* the first child keeps its parent's slot */
        TFM_ASSERT(idx[i] >= 0 && idx[i] < old_rows, "kv cache reorder: index %d", idx[i]);
        int p = c->slot[idx[i]];
        if (owner[p] < 0) owner[p] = i, ns[i] = p;
        else ns[i] = -1 - p;
    }
    /* further children: a slot no new row owns (its old contents are dead), with the parent's prefix.
     * Parents' slots are owned, so no copy overwrites a source. */
    int n_copy = 0;
    for (int i = 0, f = 0; i < n_new; i++) {
        if (ns[i] >= 0) continue;
        while (owner[f] >= 0) f++;   /* n_new <= n_slot: a free slot exists */
        owner[f] = i;
        from[n_copy] = -1 - ns[i];
        to[n_copy++] = f;
        ns[i] = f;
    }
    if (c->len > 0 && n_copy > 0) copy_slots(c, from, to, n_copy);
    memcpy(c->slot, ns, sizeof(int) * (size_t)n_new);
}

void tfm_kv_cache_select(tfm_kv_cache *c, const int *idx, int old_rows, int n_new) {
    TFM_ASSERT(n_new <= c->cap && old_rows <= c->cap, "kv cache select: %d rows, cap %d", n_new, c->cap);
    int *ns = c->scratch;
    for (int i = 0; i < n_new; i++) {
        TFM_ASSERT(idx[i] >= 0 && idx[i] < old_rows, "kv cache select: index %d", idx[i]);
        ns[i] = c->slot[idx[i]];
    }
    memcpy(c->slot, ns, sizeof(int) * (size_t)n_new);
}
