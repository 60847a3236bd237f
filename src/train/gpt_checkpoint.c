/* GPT checkpoints (entry names in include/tfm/checkpoint.h). */
#include "tfm/checkpoint.h"
#include "tfm/train.h"
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int tfm_gpt_save(const char *path, const tfm_gpt *m, const tfm_char_vocab *v, const tfm_adamw *opt,
                 const tfm_lm_train_state *st) {
    return tfm_gpt_save_run(path, m, v, opt, st, NULL);
}

int tfm_gpt_save_run(const char *path, const tfm_gpt *m, const tfm_char_vocab *v, const tfm_adamw *opt,
                     const tfm_lm_train_state *st, const tfm_run_config *run) {
    return tfm_gpt_save_tok(path, m, v, NULL, opt, st, run);
}

int tfm_gpt_save_tok(const char *path, const tfm_gpt *m, const tfm_char_vocab *v, const tfm_bpe *bpe,
                     const tfm_adamw *opt, const tfm_lm_train_state *st, const tfm_run_config *run) {
    tfm_container c;
    tfm_container_init(&c);
    const tfm_gpt_config *k = &m->cfg;
    tfm_container_add_str(&c, "meta.kind", "gpt");
    tfm_container_add_str(&c, "meta.arch", "gpt");
    tfm_container_add_int(&c, "config.vocab_size", k->vocab_size);
    tfm_container_add_int(&c, "config.block_size", k->block_size);
    tfm_container_add_int(&c, "config.n_layer", k->n_layer);
    tfm_container_add_int(&c, "config.n_head", k->n_head);
    tfm_container_add_int(&c, "config.n_embd", k->n_embd);
    tfm_container_add_float(&c, "config.dropout", k->dropout);
    tfm_container_add_str(&c, "config.attention", k->attention == TFM_ATTN_SYNTHESIZER ? "synthesizer" : "causal");
    if (bpe) {
        tfm_container_add_str(&c, "tokenizer.kind", "bpe");
        tfm_bpe_to_container(bpe, &c, NULL);
    } else {
        tfm_container_add_str(&c, "tokenizer.chars", v->chars);
    }
    tfm_ckpt_put_params(&c, &m->params);
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

int tfm_gpt_load(const char *path, tfm_gpt *m, tfm_char_vocab *v, tfm_adamw *opt, tfm_lm_train_state *st) {
    tfm_container c;
    if (tfm_container_load_except(&c, path, opt ? NULL : "adam.")) {   /* no optimizer wanted: its state not kept */
        tfm_container_free(&c);
        return -1;
    }
    int rc = tfm_gpt_get(&c, path, m, v, opt, st);
    tfm_container_free(&c);
    return rc ? tfm_error_in_data() : 0;
}


int tfm_gpt_get(const tfm_container *cp, const char *path, tfm_gpt *m, tfm_char_vocab *v, tfm_adamw *opt,
                tfm_lm_train_state *st) {
    return tfm_gpt_get_tok(cp, path, m, v, NULL, opt, st);
}

int tfm_gpt_load_tok(const char *path, tfm_gpt *m, tfm_char_vocab *v, tfm_bpe **bpe, tfm_adamw *opt,
                     tfm_lm_train_state *st) {
    tfm_container c;
    *bpe = NULL;
    if (tfm_container_load_except(&c, path, opt ? NULL : "adam.")) {
        tfm_container_free(&c);
        return -1;
    }
    int rc = tfm_gpt_get_tok(&c, path, m, v, bpe, opt, st);
    tfm_container_free(&c);
    return rc ? tfm_error_in_data() : 0;
}

/* tokenizer.kind "bpe": the model of tokenizer.bpe into *bpe, its size checked against config.vocab_size */
static int get_bpe(const tfm_container *cp, const char *path, int vocab_size, tfm_bpe **bpe) {
    if (!bpe)
        return tfm_set_error("%s: a BPE language model (tokenizer.kind 'bpe'): this reader takes character models "
                             "only (use tfm_gpt_load_tok)", path), -1;
    tfm_bpe *b = calloc(1, sizeof *b);
    if (!b) return tfm_set_error_kind(TFM_ERR_NOMEM, "%s: out of memory", path), -1;
    if (tfm_bpe_from_container(b, cp, NULL)) return free(b), tfm_prefix_error("%s: bad tokenizer: ", path);
    if (b->n != vocab_size || !b->byte_fallback) {
        tfm_set_error("%s: tokenizer.bpe has %d pieces%s but config.vocab_size is %d", path, b->n,
                      b->byte_fallback ? "" : " and no byte fallback", vocab_size);
        tfm_bpe_free(b), free(b);
        return -1;
    }
    *bpe = b;
    return 0;
}

int tfm_gpt_get_tok(const tfm_container *cp, const char *path, tfm_gpt *m, tfm_char_vocab *v, tfm_bpe **bpe,
                    tfm_adamw *opt, tfm_lm_train_state *st) {
    int rc = -1;
    memset(v, 0, sizeof *v);
    if (bpe) *bpe = NULL;
    const char *kind = tfm_container_str(cp, "meta.kind");
    if (!kind) goto done;
    if (strcmp(kind, "gpt")) {
        if (!strcmp(kind, "seq2seq"))
            tfm_set_error("%s: is a translation model (train-mt; meta.kind 'seq2seq'), not a GPT language model: use "
                          "tfm translate, or tfm train-mt --resume", path);
        else
            tfm_set_error("%s: is a '%.40s' checkpoint, not a GPT language model", path, kind);
        goto done;
    }
    tfm_gpt_config cfg = {0};
    const char *attn = tfm_container_str(cp, "config.attention");
    if (tfm_container_int(cp, "config.vocab_size", &cfg.vocab_size) ||
        tfm_container_int(cp, "config.block_size", &cfg.block_size) ||
        tfm_container_int(cp, "config.n_layer", &cfg.n_layer) || tfm_container_int(cp, "config.n_head", &cfg.n_head) ||
        tfm_container_int(cp, "config.n_embd", &cfg.n_embd) || tfm_container_float(cp, "config.dropout", &cfg.dropout) ||
        !attn)
        goto done;
    if (strcmp(attn, "synthesizer") && strcmp(attn, "causal")) {
        tfm_set_error("%s: config.attention must be causal or synthesizer, got '%.40s'", path, attn);
        goto done;
    }
    cfg.attention = !strcmp(attn, "synthesizer") ? TFM_ATTN_SYNTHESIZER : TFM_ATTN_CAUSAL;
    if (tfm_gpt_config_check(&cfg)) {
        tfm_prefix_error("%s: bad config: ", path);
        goto done;
    }
    const tfm_entry *tk = tfm_container_get(cp, "tokenizer.kind");
    const char *tok_kind = tk ? tfm_container_str(cp, "tokenizer.kind") : "char";
    if (!tok_kind) goto done;
    if (strcmp(tok_kind, "char") && strcmp(tok_kind, "bpe")) {
        tfm_set_error("%s: tokenizer.kind must be char or bpe, got '%.40s'", path, tok_kind);
        goto done;
    }
    const char *chars = strcmp(tok_kind, "bpe") ? tfm_container_str(cp, "tokenizer.chars") : NULL;
    if (!strcmp(tok_kind, "bpe")) {
        if (get_bpe(cp, path, cfg.vocab_size, bpe)) goto done;
    } else if (!chars) {
        goto done;
    } else if (tfm_char_vocab_from_string(v, chars)) {
        tfm_prefix_error("%s: bad tokenizer: ", path);
        goto done;
    }
    if (chars && v->n != cfg.vocab_size) {
        tfm_set_error("%s: tokenizer has %d characters but config.vocab_size is %d", path, v->n, cfg.vocab_size);
        tfm_char_vocab_free(v);
        goto done;
    }
    if (tfm_ckpt_check_param_budget(cp, tfm_gpt_n_params(&cfg), path)) {
        tfm_char_vocab_free(v);
        goto done;
    }
    if (tfm_gpt_init(m, &cfg)) {   /* out of memory (the config was checked above) */
        tfm_prefix_error("%s: ", path);
        tfm_char_vocab_free(v);
        goto done;
    }
    if (tfm_ckpt_get_params(cp, &m->params, path)) goto fail_model;
    if (opt && st && tfm_params_n_q8(&m->params)) {
        tfm_set_error("%s: an int8 model (tfm quantize) is for inference only: it cannot be trained or resumed "
                      "(resume the fp32 checkpoint)", path);
        goto fail_model;
    }
    if (opt && st) {
        tfm_lm_train_state s = {0};
        if (load_state(cp, path, &cfg, &s)) goto fail_model;
        if (tfm_adamw_init(opt, &m->params, s.beta1, s.beta2, 1e-8f, s.weight_decay)) goto fail_model;
        if (tfm_ckpt_get_adamw(cp, opt, &m->params, path) ||
            (opt->t > s.iter && (tfm_set_error("%s: adam.t %d exceeds train.iter %d (the optimizer cannot have taken "
                                               "more steps than the run)", path, opt->t, s.iter), 1))) {
            tfm_adamw_free(opt);
            goto fail_model;
        }
        *st = s;
    }
    rc = 0;
    goto done;
fail_model:
    tfm_gpt_free(m);
    tfm_char_vocab_free(v);
done:
    if (rc && bpe && *bpe) tfm_bpe_free(*bpe), free(*bpe), *bpe = NULL;
    return rc;
}
