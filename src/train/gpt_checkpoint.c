/* A GPT's training checkpoint: the model's entries (src/models/gpt_checkpoint.c) plus the optimizer and the
 * training state (entry names in include/tfm/checkpoint.h). */
#include "tfm/checkpoint.h"
#include "tfm/tokenizers.h"
#include "tfm/train.h"
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int tfm_gpt_save(const tfm_gpt *m, const tfm_char_vocab *v, const tfm_adamw *opt, const tfm_lm_train_state *st,
                 const char *path) {
    return tfm_gpt_save_run(m, v, opt, st, NULL, path);
}

int tfm_gpt_save_run(const tfm_gpt *m, const tfm_char_vocab *v, const tfm_adamw *opt, const tfm_lm_train_state *st,
                     const tfm_run_config *run, const char *path) {
    return tfm_gpt_save_tok(m, v, NULL, opt, st, run, path);
}

int tfm_gpt_save_tok(const tfm_gpt *m, const tfm_char_vocab *v, const tfm_bpe *bpe, const tfm_adamw *opt,
                     const tfm_lm_train_state *st, const tfm_run_config *run, const char *path) {
    tfm_container c;
    tfm_container_init(&c);
    if (tfm_gpt_put(&c, m, v, bpe)) return tfm_container_free(&c), -1;
    if (opt && st) {
        tfm_ckpt_put_adamw(&c, opt, &m->params);
        int ints[] = {st->iters, st->batch_size, st->grad_accum, st->warmup, st->eval_every, st->eval_iters,
                      st->seed, st->iter};
        const char *in[] = {"iters", "batch_size", "grad_accum", "warmup", "eval_every", "eval_iters", "seed", "iter"};
        float fl[] = {st->lr, st->min_lr, st->weight_decay, st->beta1, st->beta2, st->grad_clip, st->last_val_loss};
        const char *fn[] = {"lr", "min_lr", "weight_decay", "beta1", "beta2", "grad_clip", "val_loss"};
        char name[64];
        for (size_t i = 0; i < sizeof ints / sizeof *ints; i++) {
            snprintf(name, sizeof name, "train.%s", in[i]);
            tfm_container_add_int(&c, name, ints[i]);
        }
        for (size_t i = 0; i < sizeof fl / sizeof *fl; i++) {
            snprintf(name, sizeof name, "train.%s", fn[i]);
            tfm_container_add_float(&c, name, fl[i]);
        }
        tfm_container_add_u64(&c, "train.rng", st->batch_rng);   /* the layout of train-mt's checkpoints */
        tfm_container_add_u64(&c, "train.drop_rng", st->dropout_rng);
    }
    if (run) tfm_run_config_put(&c, run);
    int rc = tfm_container_save(&c, path);
    tfm_container_free(&c);
    return rc;
}

int tfm_lm_train_state_check(const tfm_lm_train_state *st, const tfm_gpt_config *cfg) {
#define IRANGE(f, lo, hi)                                                                                  \
    if (st->f < (lo) || st->f > (hi))                                                                      \
        return tfm_set_error("train." #f " must be in %lld..%lld, got %d", (long long)(lo), (long long)(hi), \
                             st->f), -1;
#define FRANGE(f, lo, hi, what)                                                                            \
    if (!(st->f >= (lo) && st->f hi))                                                                      \
        return tfm_set_error("train." #f " must be " what ", got %g", (double)st->f), -1;
    IRANGE(iters, 1, TFM_LM_MAX_ITERS);
    IRANGE(iter, 0, st->iters);
    IRANGE(batch_size, 1, TFM_LM_MAX_BATCH);
    if ((int64_t)st->batch_size * cfg->block_size > 1 << 28)
        return tfm_set_error("train.batch_size * config.block_size must be <= 2^28, got %d * %d", st->batch_size,
                             cfg->block_size), -1;
    IRANGE(grad_accum, 1, TFM_LM_MAX_GRAD_ACCUM);
    IRANGE(warmup, 0, TFM_LM_MAX_ITERS);
    IRANGE(eval_every, 1, INT_MAX);
    IRANGE(eval_iters, 1, TFM_LM_MAX_EVAL_ITERS);
    FRANGE(lr, 0, > 0 && st->lr < INFINITY, "> 0 and finite");
    FRANGE(min_lr, 0, <= st->lr, "in [0, train.lr]");
    FRANGE(weight_decay, 0, < INFINITY, "finite and >= 0");
    FRANGE(beta1, 0, < 1, "in [0, 1)");
    FRANGE(beta2, 0, < 1, "in [0, 1)");
    FRANGE(grad_clip, 0, < INFINITY, "finite and >= 0");
    if (!(isnan(st->last_val_loss) || (st->last_val_loss >= 0 && isfinite(st->last_val_loss))))
        return tfm_set_error("train.val_loss must be finite and >= 0 (or NaN: not measured), got %g",
                             (double)st->last_val_loss), -1;
    if (!st->batch_rng || !st->dropout_rng)
        return tfm_set_error("train.rng: an RNG state is zero (xorshift would stay at zero)"), -1;
#undef IRANGE
#undef FRANGE
    return 0;
}

static int load_state(const tfm_container *c, const char *path, const tfm_gpt_config *cfg,
                      tfm_lm_train_state *st) {
    int *ints[] = {&st->iters, &st->batch_size, &st->grad_accum, &st->warmup, &st->eval_every, &st->eval_iters,
                   &st->seed, &st->iter};
    const char *in[] = {"iters", "batch_size", "grad_accum", "warmup", "eval_every", "eval_iters", "seed", "iter"};
    float *fl[] = {&st->lr, &st->min_lr, &st->weight_decay, &st->beta1, &st->beta2, &st->grad_clip, &st->last_val_loss};
    const char *fn[] = {"lr", "min_lr", "weight_decay", "beta1", "beta2", "grad_clip", "val_loss"};
    char name[64];
    for (size_t i = 0; i < sizeof ints / sizeof *ints; i++) {
        snprintf(name, sizeof name, "train.%s", in[i]);
        if (tfm_container_int(c, name, ints[i])) return -1;
    }
    for (size_t i = 0; i < sizeof fl / sizeof *fl; i++) {
        snprintf(name, sizeof name, "train.%s", fn[i]);
        if (tfm_container_float(c, name, fl[i])) return -1;
    }
    const tfm_entry *e = tfm_container_get(c, "train.rng");
    if (e && e->dtype == TFM_DT_I32 && e->nbytes == 16) {   /* before 0.9: i32 (4), high half first */
        uint32_t r[4];
        memcpy(r, e->data, 16);
        st->batch_rng = (uint64_t)r[0] << 32 | r[1];
        st->dropout_rng = (uint64_t)r[2] << 32 | r[3];
    } else if (tfm_container_u64(c, "train.rng", &st->batch_rng) ||
               tfm_container_u64(c, "train.drop_rng", &st->dropout_rng)) {
        return -1;
    }
    if (tfm_lm_train_state_check(st, cfg)) return tfm_prefix_error("%s: ", path);
    return 0;
}

int tfm_gpt_load(tfm_gpt *m, tfm_char_vocab *v, tfm_adamw *opt, tfm_lm_train_state *st, const char *path) {
    tfm_container c;
    if (tfm_container_load_except(&c, path, opt ? NULL : "adam.")) {   /* no optimizer wanted: its state not kept */
        tfm_container_free(&c);
        return -1;
    }
    int rc = tfm_gpt_get(m, v, opt, st, &c, path);
    tfm_container_free(&c);
    return rc ? tfm_error_in_data() : 0;
}

int tfm_gpt_get(tfm_gpt *m, tfm_char_vocab *v, tfm_adamw *opt, tfm_lm_train_state *st, const tfm_container *cp,
                const char *path) {
    return tfm_gpt_get_tok(m, v, NULL, opt, st, cp, path);
}

int tfm_gpt_load_tok(tfm_gpt *m, tfm_char_vocab *v, tfm_bpe **bpe, tfm_adamw *opt, tfm_lm_train_state *st,
                     const char *path) {
    tfm_container c;
    *bpe = NULL;
    if (tfm_container_load_except(&c, path, opt ? NULL : "adam.")) {
        tfm_container_free(&c);
        return -1;
    }
    int rc = tfm_gpt_get_tok(m, v, bpe, opt, st, &c, path);
    tfm_container_free(&c);
    return rc ? tfm_error_in_data() : 0;
}

int tfm_gpt_get_tok(tfm_gpt *m, tfm_char_vocab *v, tfm_bpe **bpe, tfm_adamw *opt, tfm_lm_train_state *st,
                    const tfm_container *cp, const char *path) {
    if (tfm_gpt_get_model(m, v, bpe, cp, path)) return -1;
    if (!opt || !st) return 0;
    if (tfm_params_n_q8(&m->params)) {
        tfm_set_error("%s: an int8 model (tfm quantize) is for inference only: it cannot be trained or resumed "
                      "(resume the fp32 checkpoint)", path);
        goto fail;
    }
    tfm_lm_train_state s = {0};
    if (load_state(cp, path, &m->cfg, &s)) goto fail;
    if (tfm_adamw_init(opt, &m->params, s.beta1, s.beta2, 1e-8f, s.weight_decay)) goto fail;
    if (tfm_ckpt_get_adamw(cp, opt, &m->params, path) ||
        (opt->t > s.iter && (tfm_set_error("%s: adam.t %d exceeds train.iter %d (the optimizer cannot have taken "
                                           "more steps than the run)", path, opt->t, s.iter), 1))) {
        tfm_adamw_free(opt);
        goto fail;
    }
    *st = s;
    return 0;
fail:
    tfm_gpt_free(m);
    if (v) tfm_char_vocab_free(v);
    if (bpe && *bpe) tfm_bpe_free(*bpe), free(*bpe), *bpe = NULL;
    return -1;
}
