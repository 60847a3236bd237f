/* Token-budget batches (train-mt --max-tokens), as fairseq and Marian make them: sentences sorted by length
 * (ties in a random order), cut greedily so that rows x longest sentence stays within the budget on both
 * sides (the padded tensor the step runs on), then the batches shuffled. */
#include <stdlib.h>
#include <string.h>

#include "tfm/train.h"

static void shuffle(int *a, int n, tfm_rng *r) {   /* Fisher-Yates */
    for (int i = n - 1; i > 0; i--) {
        int j = (int)(tfm_rng_u32(r) % (uint32_t)(i + 1));
        int t = a[i];
        a[i] = a[j];
        a[j] = t;
    }
}

static int key(const int *src_len, const int *tgt_len, int i) {
    return src_len[i] > tgt_len[i] ? src_len[i] : tgt_len[i];
}

/* stable counting sort of idx[0..n) by key, keys in 0..max_key */
static int sort_by_key(int *idx, int n, const int *src_len, const int *tgt_len, int max_key) {
    int *count = calloc((size_t)max_key + 2, sizeof *count), *tmp = malloc(sizeof(int) * (size_t)(n + 1));
    if (!count || !tmp) return free(count), free(tmp), -1;
    for (int i = 0; i < n; i++) count[key(src_len, tgt_len, idx[i]) + 1]++;
    for (int k = 0; k <= max_key; k++) count[k + 1] += count[k];
    for (int i = 0; i < n; i++) tmp[count[key(src_len, tgt_len, idx[i])]++] = idx[i];
    memcpy(idx, tmp, sizeof(int) * (size_t)n);
    free(count);
    free(tmp);
    return 0;
}

int tfm_batches_by_tokens(tfm_batches *b, int n, const int *src_len, const int *tgt_len, int max_tokens,
                          tfm_rng *rng) {
    memset(b, 0, sizeof *b);
    if (n < 0 || max_tokens < 1) return tfm_set_error("batches: invalid arguments (n=%d max_tokens=%d)", n, max_tokens), -1;
    int max_key = 0;
    for (int i = 0; i < n; i++) {
        int k = key(src_len, tgt_len, i);
        if (k < 0) return tfm_set_error("batches: negative length at %d", i), -1;
        if (k > max_tokens)
            return tfm_set_error("sentence pair %d has %d tokens, more than --max-tokens %d", i + 1, k, max_tokens), -1;
        if (k > max_key) max_key = k;
    }
    b->idx = malloc(sizeof(int) * (size_t)(n + 1));
    b->off = malloc(sizeof(int) * (size_t)(n + 2));
    int *order = malloc(sizeof(int) * (size_t)(n + 1)), *tmp = malloc(sizeof(int) * (size_t)(n + 1));
    if (!b->idx || !b->off || !order || !tmp) goto oom;
    for (int i = 0; i < n; i++) b->idx[i] = i;
    if (rng) shuffle(b->idx, n, rng);
    if (sort_by_key(b->idx, n, src_len, tgt_len, max_key)) goto oom;
    int nb = 0, rows = 0;   /* greedy cut: keys ascend, so the newest sentence is the batch's longest */
    for (int i = 0; i < n; i++) {
        int k = key(src_len, tgt_len, b->idx[i]);
        if (rows && (long long)(rows + 1) * (k > 0 ? k : 1) > max_tokens) {
            b->off[++nb] = i;
            rows = 0;
        }
        if (!rows) b->off[nb] = i;
        rows++;
    }
    if (rows) nb++;
    b->off[nb] = n;
    for (int k = 0; k < nb; k++) order[k] = k;
    if (rng) shuffle(order, nb, rng);
    int *new_off = malloc(sizeof(int) * (size_t)(nb + 1));
    if (!new_off) goto oom;
    for (int k = 0, o = 0; k < nb; k++) {
        int s = b->off[order[k]], cnt = b->off[order[k] + 1] - s;
        memcpy(tmp + o, b->idx + s, sizeof(int) * (size_t)cnt);
        new_off[k] = o;
        o += cnt;
    }
    new_off[nb] = n;
    if (n) memcpy(b->idx, tmp, sizeof(int) * (size_t)n);
    free(b->off);
    b->off = new_off;
    b->n_batches = nb;
    free(order);
    free(tmp);
    return 0;
oom:
    free(order);
    free(tmp);
    tfm_batches_free(b);
    return tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory making batches"), -1;
}
