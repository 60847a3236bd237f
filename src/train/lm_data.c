/* Character corpora, random batches, loss estimation. */
#include "tfm/train.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int tfm_lm_data_load(tfm_lm_data *d, const char *path, const char *vocab_chars, float train_frac, int block_size) {
    memset(d, 0, sizeof *d);
    size_t len;
    char *text = tfm_read_text_file(path, &len);
    if (!text) return -1;
    int rc = vocab_chars ? tfm_char_vocab_from_string(&d->vocab, vocab_chars)
                         : tfm_char_vocab_build(&d->vocab, text, len);
    if (rc) {
        free(text);
        return -1;
    }
    d->ids = tfm_char_encode(&d->vocab, text, len, &d->n);
    free(text);
    if (!d->ids) {
        tfm_prefix_error("%s: ", path);
        tfm_lm_data_free(d);
        return tfm_error_in_data();   /* a character outside the checkpoint's vocabulary */
    }
    d->n_train = (int)((double)d->n * train_frac);
    int n_val = d->n - d->n_train;
    if (d->n_train <= block_size || n_val <= block_size) {   /* both splits: get_batch draws from each */
        tfm_set_error("%s: corpus too short: %d characters give %d train / %d validation tokens, each split needs "
                      "at least block_size+1 = %lld", path, d->n, d->n_train, n_val, (long long)block_size + 1);
        tfm_lm_data_free(d);
        return tfm_error_in_data();
    }
    return 0;
}

void tfm_lm_data_free(tfm_lm_data *d) {
    tfm_char_vocab_free(&d->vocab);
    free(d->ids);
    d->ids = NULL;
}

void tfm_lm_get_batch(const tfm_lm_data *d, int split, tfm_rng *r, int B, int T, int *x, int *y) {
    int lo = split ? d->n_train : 0, hi = split ? d->n : d->n_train;
    uint32_t span = (uint32_t)(hi - lo - T);  /* start offsets 0..span-1 keep T+1 tokens inside */
    for (int b = 0; b < B; b++) {
        int s = lo + (int)(tfm_rng_u32(r) % span);
        memcpy(x + (size_t)b * T, d->ids + s, sizeof(int) * (size_t)T);
        memcpy(y + (size_t)b * T, d->ids + s + 1, sizeof(int) * (size_t)T);
    }
}

float tfm_lm_estimate_loss(tfm_gpt *m, tfm_graph *g, const tfm_lm_data *d, int split, int n_batches, int B,
                           int T, uint64_t seed) {
    tfm_rng r;
    tfm_rng_seed(&r, seed);
    int *x = malloc(sizeof(int) * (size_t)B * T * 2), *y = x ? x + (size_t)B * T : NULL;
    if (!x) return tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory (%d x %d batch)", B, T), NAN;
    int saved_grad = g->grad_enabled, saved_train = g->training;
    g->grad_enabled = 0;
    g->training = 0;
    double total = 0;
    for (int i = 0; i < n_batches; i++) {
        tfm_graph_reset(g);
        tfm_lm_get_batch(d, split, &r, B, T, x, y);
        total += tfm_cross_entropy(g, tfm_gpt_forward(g, m, x, B, T), y, -100, 0.0f)->data[0];
    }
    g->grad_enabled = saved_grad;
    g->training = saved_train;
    free(x);
    return (float)(total / n_batches);
}

int tfm_lm_step_check(const tfm_gpt_config *c, int batch_size) {
    int64_t need = tfm_gpt_step_elems(c, batch_size, c->block_size);
    if (need <= TFM_MAX_STEP_ELEMS) return 0;
    return tfm_set_error("--batch-size %d x --block-size %d: one training step needs ~%.0f GiB of activations, at most "
                         "%.0f GiB (lower --batch-size and raise --grad-accum, or lower --block-size)", batch_size,
                         c->block_size, (double)need * 4 / (1 << 30), (double)TFM_MAX_STEP_ELEMS * 4 / (1 << 30)), -1;
}
