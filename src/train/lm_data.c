/* Character corpora, random batches, loss estimation. */
#include "tfm/train.h"
#include <limits.h>
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
    d->chars_train = d->n_train, d->chars_val = n_val;
    if (d->n_train <= block_size || n_val <= block_size) {   /* both splits: get_batch draws from each */
        tfm_set_error("%s: corpus too short: %d characters give %d train / %d validation tokens, each split needs "
                      "at least block_size+1 = %lld", path, d->n, d->n_train, n_val, (long long)block_size + 1);
        tfm_lm_data_free(d);
        return tfm_error_in_data();
    }
    return 0;
}

static long count_chars(const char *s, size_t n) {   /* code points of valid UTF-8 */
    long k = 0;
    for (size_t i = 0; i < n; i++) k += ((unsigned char)s[i] & 0xC0) != 0x80;
    return k;
}

/* the byte offset of the first line start after train_frac of the text's characters (len if none) */
static size_t train_cut(const char *text, size_t len, float train_frac) {
    long want = (long)((double)count_chars(text, len) * train_frac), k = 0;
    size_t i = 0;
    for (; i < len && k < want; i++) k += ((unsigned char)text[i] & 0xC0) != 0x80;
    const char *nl = memchr(text + i, '\n', len - i);
    return nl ? (size_t)(nl - text) + 1 : len;
}

int tfm_lm_data_load_bpe(tfm_lm_data *d, const char *path, const tfm_bpe *bpe, float train_frac, int block_size) {
    memset(d, 0, sizeof *d);
    size_t len;
    char *text = tfm_read_text_file(path, &len);
    if (!text) return -1;
    size_t cut = train_cut(text, len, train_frac);
    int nt = 0, nv = 0, *tr = tfm_bpe_encode_text(bpe, text, cut, &nt);
    int *va = tr ? tfm_bpe_encode_text(bpe, text + cut, len - cut, &nv) : NULL;
    d->chars_train = count_chars(text, cut), d->chars_val = count_chars(text + cut, len - cut);
    free(text);
    if (!va || (int64_t)nt + nv > INT_MAX || !(d->ids = malloc(sizeof(int) * ((size_t)nt + (size_t)nv)))) {
        if (va) tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory (%d + %d tokens)", nt, nv);
        free(tr), free(va);
        return tfm_prefix_error("%s: ", path);
    }
    memcpy(d->ids, tr, sizeof(int) * (size_t)nt);
    memcpy(d->ids + nt, va, sizeof(int) * (size_t)nv);
    free(tr), free(va);
    d->n = nt + nv, d->n_train = nt;
    if (nt <= block_size || nv <= block_size) {
        tfm_set_error("%s: corpus too short: %d train / %d validation BPE tokens, each split needs at least "
                      "block_size+1 = %lld", path, nt, nv, (long long)block_size + 1);
        tfm_lm_data_free(d);
        return tfm_error_in_data();
    }
    return 0;
}

int tfm_lm_bpe_learn(tfm_bpe *bpe, const char *path, float train_frac, int vocab_size) {
    size_t len;
    char *text = tfm_read_text_file(path, &len);
    if (!text) return -1;
    text[train_cut(text, len, train_frac)] = 0;   /* the train part only */
    int n = 0;
    char **lines = tfm_split_lines(text, strlen(text), &n);
    if (!lines) return free(text), tfm_set_error_kind(TFM_ERR_NOMEM, "%s: out of memory", path), -1;
    tfm_bpe_learn_opts o;
    tfm_bpe_learn_opts_default(&o);
    o.vocab_size = vocab_size;
    o.character_coverage = 1.0f;   /* every character of the text a piece: the model writes what it read */
    int rc = tfm_bpe_learn_lines(bpe, (const char *const *)lines, n, &o);
    free(lines), free(text);
    return rc ? tfm_prefix_error("%s: --vocab-size %d: ", path, vocab_size) : 0;
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
