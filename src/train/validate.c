/* Validation that drives training (train-mt --valid-*, --keep-best, --patience):
 * the keep-best / patience decision as a pure function (the BLEU itself: src/train/run_mt_valid.c). */
#include <math.h>
#include <stdlib.h>

#include "tfm/train.h"

void tfm_early_stop_init(tfm_early_stop *e, int patience) {
    e->best = -INFINITY;
    e->best_step = -1;
    e->n_bad = 0;
    e->patience = patience;
}

int tfm_early_stop_update(tfm_early_stop *e, float score, int step) {
    if (isfinite(score) && score > e->best) {   /* strictly better: a tie keeps the earlier checkpoint */
        e->best = score;
        e->best_step = step;
        e->n_bad = 0;
        return TFM_VALID_IMPROVED;
    }
    e->n_bad++;
    return e->patience > 0 && e->n_bad >= e->patience ? TFM_VALID_STOP : 0;
}
