/* GPT checkpoints (entry names in include/tfm/checkpoint.h). */
#include "tfm/checkpoint.h"
#include "tfm/tokenizers.h"
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
    tfm_gpt_put_config(&c, k);
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

/* tokenizer.chars, the character vocabulary of vocab_size characters (a checkpoint with another tokenizer,
 * an imported GPT-2, is named as such) */
static int get_chars(const tfm_container *cp, const char *path, tfm_char_vocab *v, int vocab_size) {
    const char *kind = tfm_container_get(cp, "tokenizer.kind") ? tfm_container_str(cp, "tokenizer.kind") : NULL;
    if (kind && !tfm_container_get(cp, "tokenizer.chars"))
        return tfm_set_error("%s: the model's tokenizer is '%.40s', not a character vocabulary", path, kind), -1;
    const char *chars = tfm_container_str(cp, "tokenizer.chars");
    if (!chars) return -1;
    if (tfm_char_vocab_from_string(v, chars)) return tfm_prefix_error("%s: bad tokenizer: ", path);
    if (v->n != vocab_size) {
        tfm_set_error("%s: tokenizer has %d characters but config.vocab_size is %d", path, v->n, vocab_size);
        tfm_char_vocab_free(v);
        return -1;
    }
    return 0;
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
    if (v) memset(v, 0, sizeof *v);
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
    if (tfm_container_get(cp, "config.ln_eps") && tfm_container_float(cp, "config.ln_eps", &cfg.ln_eps)) goto done;
    if (tfm_gpt_config_check(&cfg)) {
        tfm_prefix_error("%s: bad config: ", path);
        goto done;
    }
    if (v) {   /* v NULL: the model only, whatever its tokenizer (an imported GPT-2's is read by tfm_lm_load) */
        const tfm_entry *tk = tfm_container_get(cp, "tokenizer.kind");
        const char *tok_kind = tk ? tfm_container_str(cp, "tokenizer.kind") : "char";
        if (!tok_kind) goto done;
        if (strcmp(tok_kind, "char") && strcmp(tok_kind, "bpe") && strcmp(tok_kind, "gpt2")) {
            tfm_set_error("%s: tokenizer.kind must be char, bpe or gpt2, got '%.40s'", path, tok_kind);
            goto done;
        }
        if (!strcmp(tok_kind, "bpe") ? get_bpe(cp, path, cfg.vocab_size, bpe) : get_chars(cp, path, v, cfg.vocab_size))
            goto done;
    }
    if (tfm_ckpt_check_param_budget(cp, tfm_gpt_n_params(&cfg), path)) {
        if (v) tfm_char_vocab_free(v);
        goto done;
    }
    if (tfm_gpt_init(m, &cfg)) {   /* out of memory (the config was checked above) */
        tfm_prefix_error("%s: ", path);
        if (v) tfm_char_vocab_free(v);
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
    if (v) tfm_char_vocab_free(v);
done:
    if (rc && bpe && *bpe) tfm_bpe_free(*bpe), free(*bpe), *bpe = NULL;
    return rc;
}

/* ---------------------------------------------------------------- a GPT with whichever tokenizer */

/* tokenizer.kind "gpt2": the byte-level BPE of an imported GPT-2; its ids must be the model's */
static int get_gpt2(tfm_lm *lm, const tfm_container *c, const char *path) {
    const tfm_entry *v = tfm_container_get(c, "tokenizer.gpt2.vocab");
    const tfm_entry *m = tfm_container_get(c, "tokenizer.gpt2.merges");
    if (!v || !m || v->dtype != TFM_DT_BYTES || m->dtype != TFM_DT_BYTES)
        return tfm_set_error("%s: tokenizer.gpt2.vocab / .merges missing (tokenizer.kind 'gpt2')", path), -1;
    char vn[600], mn[600];
    snprintf(vn, sizeof vn, "%s: tokenizer.gpt2.vocab", path);
    snprintf(mn, sizeof mn, "%s: tokenizer.gpt2.merges", path);
    lm->gpt2 = tfm_gpt2_bpe_from_bytes(v->data, v->nbytes, m->data, m->nbytes, vn, mn);
    if (!lm->gpt2) return -1;
    if (tfm_gpt2_bpe_n_vocab(lm->gpt2) > lm->model.cfg.vocab_size)
        return tfm_set_error("%s: has ids up to %d but config.vocab_size is %d", vn, tfm_gpt2_bpe_n_vocab(lm->gpt2) - 1,
                             lm->model.cfg.vocab_size), -1;
    lm->eos = tfm_gpt2_bpe_id(lm->gpt2, "<|endoftext|>");
    return 0;
}

int tfm_lm_get(tfm_lm *lm, const tfm_container *c, const char *path) {
    memset(lm, 0, sizeof *lm);
    lm->eos = -1;
    const char *kind = tfm_container_get(c, "tokenizer.kind") ? tfm_container_str(c, "tokenizer.kind") : NULL;
    int gpt2 = kind && !strcmp(kind, "gpt2");
    int rc = tfm_gpt_get(c, path, &lm->model, gpt2 ? NULL : &lm->chars, NULL, NULL);
    if (!rc && gpt2 && get_gpt2(lm, c, path)) {
        tfm_gpt2_bpe_free(lm->gpt2);
        tfm_gpt_free(&lm->model);
        rc = -1;
    }
    return rc;
}

int tfm_lm_load(tfm_lm *lm, const char *path) {
    tfm_container c;
    memset(lm, 0, sizeof *lm);
    if (tfm_container_load_except(&c, path, "adam.")) return tfm_container_free(&c), -1;
    int rc = tfm_lm_get(lm, &c, path);
    tfm_container_free(&c);
    return rc ? tfm_error_in_data() : 0;
}

void tfm_lm_free(tfm_lm *lm) {
    if (lm->gpt2) tfm_gpt2_bpe_free(lm->gpt2);
    else tfm_char_vocab_free(&lm->chars);
    tfm_gpt_free(&lm->model);
    memset(lm, 0, sizeof *lm);
}

int *tfm_lm_encode(tfm_lm *lm, const char *text, size_t len, int *n) {
    return lm->gpt2 ? tfm_gpt2_bpe_encode(lm->gpt2, text, len, n) : tfm_char_encode(&lm->chars, text, len, n);
}

const char *tfm_lm_token_bytes(const tfm_lm *lm, int id, char buf[4], size_t *len) {
    if (lm->gpt2) return (const char *)tfm_gpt2_bpe_token_bytes(lm->gpt2, id, len);
    if (id < 0 || id >= lm->chars.n) return NULL;
    *len = (size_t)tfm_utf8_encode(lm->chars.cps[id], buf);
    return buf;
}
