/* Token-budget batches (tfm_batches_by_tokens): no batch over the budget on either side (padding
 * included), every pair exactly once, deterministic for a seed, different orders for different epochs,
 * the batch count independent of the shuffle, and a pair longer than the budget refused. */
#include <stdlib.h>

#include "check.h"
#include "tfm/train.h"

enum { N = 1000, MAXLEN = 40 };

static int worst_batch(const tfm_batches *b, const int *sl, const int *tl) {
    int worst = 0;
    for (int k = 0; k < b->n_batches; k++) {
        int ms = 0, mt = 0, rows = b->off[k + 1] - b->off[k];
        for (int i = b->off[k]; i < b->off[k + 1]; i++) {
            if (sl[b->idx[i]] > ms) ms = sl[b->idx[i]];
            if (tl[b->idx[i]] > mt) mt = tl[b->idx[i]];
        }
        if (rows * ms > worst) worst = rows * ms;
        if (rows * mt > worst) worst = rows * mt;
    }
    return worst;
}

int main(void) {
    int *sl = malloc(sizeof(int) * N), *tl = malloc(sizeof(int) * N), *seen = calloc(N, sizeof(int));
    tfm_rng r;
    tfm_rng_seed(&r, 7);
    for (int i = 0; i < N; i++) sl[i] = 1 + (int)(tfm_rng_u32(&r) % MAXLEN), tl[i] = 1 + (int)(tfm_rng_u32(&r) % MAXLEN);
    int budgets[] = {40, 97, 500, 4096};
    for (int q = 0; q < 4; q++) {
        tfm_rng a;
        tfm_rng_seed(&a, 1);
        tfm_batches b;
        int rc = tfm_batches_by_tokens(&b, N, sl, tl, budgets[q], &a);
        int worst = rc ? -1 : worst_batch(&b, sl, tl), once = !rc;
        memset(seen, 0, sizeof(int) * N);
        for (int i = 0; !rc && i < N; i++) seen[b.idx[i]]++;
        for (int i = 0; !rc && i < N; i++) once &= seen[i] == 1;
        char name[64];
        snprintf(name, sizeof name, "max-tokens %d: no batch over the budget", budgets[q]);
        CHECK(name, !rc && worst <= budgets[q] && worst > budgets[q] / 2, "worst %d", worst);
        snprintf(name, sizeof name, "max-tokens %d: every pair once", budgets[q]);
        CHECK(name, once && b.off[b.n_batches] == N, "rc %d", rc);
        tfm_batches_free(&b);
    }
    tfm_rng a, c;
    tfm_rng_seed(&a, 3);
    tfm_rng_seed(&c, 3);
    tfm_batches b1, b2, b3, b0;
    tfm_batches_by_tokens(&b1, N, sl, tl, 500, &a);
    tfm_batches_by_tokens(&b2, N, sl, tl, 500, &c);
    tfm_batches_by_tokens(&b3, N, sl, tl, 500, &a);   /* the next epoch */
    tfm_batches_by_tokens(&b0, N, sl, tl, 500, NULL);
    CHECK("max-tokens: same seed, same batches", b1.n_batches == b2.n_batches &&
          !memcmp(b1.idx, b2.idx, sizeof(int) * N) && !memcmp(b1.off, b2.off, sizeof(int) * (size_t)(b1.n_batches + 1)),
          "differ");
    CHECK("max-tokens: next epoch, other order", memcmp(b1.idx, b3.idx, sizeof(int) * N) != 0, "same order");
    CHECK("max-tokens: batch count independent of the shuffle", b1.n_batches == b3.n_batches &&
          b1.n_batches == b0.n_batches, "%d %d %d", b1.n_batches, b3.n_batches, b0.n_batches);
    tfm_batches_free(&b1), tfm_batches_free(&b2), tfm_batches_free(&b3), tfm_batches_free(&b0);
    tfm_batches bx;
    int rc = tfm_batches_by_tokens(&bx, N, sl, tl, 30, NULL);
    CHECK("max-tokens: a pair over the budget is refused", rc == -1 && strstr(tfm_last_error(), "--max-tokens 30"),
          "rc %d: %s", rc, tfm_last_error());
    free(sl), free(tl), free(seen);
    return check_failures ? 1 : 0;
}
