/* Translation workflows around tfm_mt_train: a fresh translator from a corpus, and checkpoints that carry
 * the training state for an exact resume (include/tfm/train.h). */
#include <stdio.h>
#include <string.h>

#include "tfm/train.h"

int tfm_mt_model_create(tfm_mt_model *t, const tfm_mt_config *cfg, uint64_t seed) {
    tfm_mt_config c = *cfg;
    c.src_vocab = t->src_vocab.n;
    c.tgt_vocab = t->tgt_vocab.n;
    t->model = tfm_mt_net_create(&c);
    if (!t->model) {
        tfm_mt_model_free(t);
        return -1;
    }
    t->model->vt->init_weights(t->model, seed);
    return 0;
}

int tfm_mt_model_build(tfm_mt_model *t, const tfm_parallel_text *p, int tok_kind, int min_freq,
                         const tfm_mt_config *cfg, uint64_t seed) {
    memset(t, 0, sizeof *t);
    t->tok_kind = tok_kind;
    if (tfm_vocab_build(&t->src_vocab, p->src, p->n, min_freq) ||
        tfm_vocab_build(&t->tgt_vocab, p->tgt, p->n, min_freq)) {
        tfm_mt_model_free(t);
        return -1;
    }
    return tfm_mt_model_create(t, cfg, seed);
}

int tfm_mt_corpus_from_text(const tfm_parallel_text *p, const tfm_mt_model *t, int num_steps, tfm_mt_corpus *a) {
    if (t->bpe) return tfm_mt_corpus_from_text_bpe(p, t, num_steps, a);
    tfm_parallel_ids ids;
    if (tfm_parallel_encode(p, &t->src_vocab, &t->tgt_vocab, &ids)) return -1;
    int rc = tfm_mt_corpus_build(&ids, num_steps, a);
    tfm_parallel_ids_free(&ids);
    return rc;
}

int tfm_mt_save(const tfm_mt_model *t, const tfm_adamw *opt, const tfm_mt_progress *p, const tfm_mt_train_opts *o,
                const char *path) {
    return tfm_mt_save_run(t, opt, p, o, NULL, path);
}

int tfm_mt_save_run(const tfm_mt_model *t, const tfm_adamw *opt, const tfm_mt_progress *p, const tfm_mt_train_opts *o,
                    const tfm_run_config *run, const char *path) {
    tfm_container c;
    tfm_container_init(&c);
    tfm_mt_model_put(&c, t);
    tfm_ckpt_put_adamw(&c, opt, &t->model->params);
    tfm_mt_progress_put(&c, p);
    tfm_container_add_int(&c, "train.max_len", o->num_steps);
    tfm_container_add_int(&c, "train.seed", (int)o->seed);
    if (run) tfm_run_config_put(&c, run);
    int rc = tfm_container_save(&c, path);
    tfm_container_free(&c);
    return rc;
}

int tfm_mt_save_weights(tfm_mt_model *t, const float *weights, float *swap, const char *note, const char *path) {
    tfm_params *p = &t->model->params;
    memcpy(swap, p->data, p->total * sizeof(float));
    memcpy(p->data, weights, p->total * sizeof(float));
    tfm_container c;
    tfm_container_init(&c);
    tfm_mt_model_put(&c, t);
    int rc = tfm_container_add_str(&c, "meta.ema", note) ? tfm_container_save(&c, path) : -1;
    tfm_container_free(&c);
    memcpy(p->data, swap, p->total * sizeof(float));
    return rc;
}

int tfm_mt_resume(tfm_mt_model *t, tfm_adamw *opt, tfm_mt_progress *p, const tfm_mt_train_opts *o,
                  const char *path) {
    tfm_container c;
    memset(t, 0, sizeof *t);
    memset(opt, 0, sizeof *opt);
    int rc = tfm_container_load(&c, path);
    if (!rc) rc = tfm_mt_model_get(t, &c, path);
    if (!rc && tfm_params_n_q8(&t->model->params)) {
        tfm_set_error("%s: an int8 model (tfm quantize) is for inference only: it cannot be trained or resumed "
                      "(resume the fp32 checkpoint)", path);
        rc = -1;
    }
    /* sentences of num_steps tokens plus <bos> must fit the stored positional-encoding table */
    int max_pos = rc ? 0 : tfm_mt_net_max_positions(t->model);
    if (!rc && max_pos > 0 && max_pos < o->num_steps + 1) {
        tfm_set_error("%s: config.max_len %d is shorter than --max-len %d + 1", path, max_pos, o->num_steps);
        rc = -1;
    }
    if (!rc) rc = tfm_mt_progress_get(&c, p);
    /* the run's padded length and seed, stored at every save, are the ones this resume continues with */
    int max_len = o->num_steps, seed = (int)o->seed;
    if (!rc && tfm_container_get(&c, "train.max_len") &&
        (tfm_container_int(&c, "train.max_len", &max_len) || tfm_container_int(&c, "train.seed", &seed)))
        rc = -1;
    int len_differs = max_len != o->num_steps;
    if (!rc && (len_differs || seed != (int)o->seed)) {
        tfm_set_error("%s: train.%s %d is not the run's %d (--%s): edited or corrupt", path,
                      len_differs ? "max_len" : "seed", len_differs ? max_len : seed,
                      len_differs ? o->num_steps : (int)o->seed, len_differs ? "max-len" : "seed");
        rc = -1;
    }
    if (!rc) {
        rc = tfm_adamw_init(opt, &t->model->params, o->beta1, o->beta2, o->eps, o->weight_decay);
        if (!rc && o->ema_decay > 0) rc = tfm_adamw_ema_init(opt, &t->model->params, o->ema_decay);
        if (!rc) rc = tfm_ckpt_get_adamw(&c, opt, &t->model->params, path);
        if (!rc && opt->t > p->step) {
            tfm_set_error("%s: adam.t %d exceeds train.step %d (the optimizer cannot have taken more steps than the "
                          "run)", path, opt->t, p->step);
            rc = -1;
        }
    }
    if (rc) {
        if (opt->m) tfm_adamw_free(opt);
        tfm_mt_model_free(t);
    }
    tfm_container_free(&c);
    return rc ? tfm_error_in_data() : 0;
}

/* Largest per-step activation count over the batch shapes the batcher can form. A --batch-size batch has
 * n rows of up to the longest source / target; a --max-tokens batch of r rows has at most max_tokens / r
 * tokens per row on each side (padding counted; a single pair longer than that is a batch of its own), so
 * every r from 1 to max_tokens is a candidate shape. */
typedef struct { int64_t rows; int Ts, Tt; } mt_batch_shape;
static int64_t mt_worst_step_elems(const tfm_mt_config *c, const tfm_mt_train_opts *o, int64_t n, int Ts, int Tt,
                                   mt_batch_shape *worst_shape) {
    if (o->max_tokens <= 0) {
        *worst_shape = (mt_batch_shape){o->batch_size < n ? o->batch_size : n, Ts, Tt};
        return tfm_mt_step_elems(c, worst_shape->rows, Ts, Tt);
    }
    int64_t worst = 0, r_max = o->max_tokens < n ? o->max_tokens : n;
    *worst_shape = (mt_batch_shape){1, Ts, Tt};
    for (int64_t r = 1; r <= r_max; r++) {
        int64_t per_row = o->max_tokens / r;   /* >= 1: r <= max_tokens */
        int ts = per_row < Ts && r > 1 ? (int)per_row : Ts, tt = per_row < Tt && r > 1 ? (int)per_row : Tt;
        int64_t need = tfm_mt_step_elems(c, r, ts, tt);
        if (need > worst) worst = need, *worst_shape = (mt_batch_shape){r, ts, tt};
    }
    return worst;
}

int tfm_mt_step_check(const tfm_mt_config *c, const tfm_mt_corpus *a, const tfm_mt_train_opts *o) {
    int Ts = 1, Tt = 1;   /* batches are cut to their longest row */
    for (int i = 0; i < a->n; i++) {
        if (a->src_valid[i] > Ts) Ts = a->src_valid[i];
        if (a->tgt_valid[i] > Tt) Tt = a->tgt_valid[i];
    }
    if (o->epoch_data) Ts = Tt = a->num_steps;   /* re-segmented every epoch (BPE-dropout): rows up to num_steps */
    mt_batch_shape w;
    int64_t need = mt_worst_step_elems(c, o, a->n, Ts, Tt, &w);
    if (o->rdrop > 0) need = need > INT64_MAX / 2 ? INT64_MAX : 2 * need;   /* R-Drop keeps two passes' activations */
    if (need <= TFM_MAX_STEP_ELEMS) return 0;
    return tfm_set_error("%s %d (at worst %lld pairs a batch of %d source / %d target tokens), --max-len %d: one training "
                         "step needs ~%.0f GiB of activations, at most %.0f GiB (lower --batch-size / --max-tokens or "
                         "--max-len, or the model size)", o->max_tokens > 0 ? "--max-tokens" : "--batch-size",
                         o->max_tokens > 0 ? o->max_tokens : o->batch_size, (long long)w.rows, w.Ts, w.Tt, a->num_steps,
                         (double)need * 4 / (1 << 30), (double)TFM_MAX_STEP_ELEMS * 4 / (1 << 30)), -1;
}
