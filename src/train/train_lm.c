/* The language-model training loop (include/tfm/train.h): random windows of the corpus, gradient
 * accumulation, warmup + cosine schedule, the shared clip + fused AdamW step, periodic evaluation and
 * checkpoints through a callback, and an exact resume from the saved state. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "tfm/kernels.h"
#include "tfm/train.h"

void tfm_lm_train_state_init(tfm_lm_train_state *st) {
    tfm_rng r;
    st->iter = 0;
    st->last_val_loss = NAN;
    tfm_rng_seed(&r, (uint64_t)st->seed * 2 + 1);
    st->batch_rng = r.s;
    tfm_rng_seed(&r, (uint64_t)st->seed * 2 + 2);
    st->dropout_rng = r.s;
}

void tfm_lm_train_state_default(tfm_lm_train_state *st) {
    *st = (tfm_lm_train_state){.iters = 2000, .batch_size = 12, .grad_accum = 1, .warmup = 100, .eval_every = 500,
                               .eval_iters = 20, .seed = 1337, .lr = 1e-3f, .min_lr = 1e-4f, .weight_decay = 0.1f,
                               .beta1 = 0.9f, .beta2 = 0.99f, .grad_clip = 1.0f};
    tfm_lm_train_state_init(st);
}

/* Mean loss of one optimizer step: grad_accum micro-batches, each loss scaled by 1/grad_accum. */
static float accumulate(tfm_gpt *m, tfm_graph *g, const tfm_lm_data *d, const tfm_lm_train_state *st,
                        tfm_rng *batch_rng, int *x, int *y) {
    int B = st->batch_size, T = m->cfg.block_size;
    float loss_sum = 0;
    for (int micro = 0; micro < st->grad_accum; micro++) {
        tfm_graph_reset(g);
        g->training = 1;
        tfm_lm_get_batch(d, 0, batch_rng, B, T, x, y);
        tfm_tensor *loss = tfm_cross_entropy(g, tfm_gpt_forward(g, m, x, B, T), y, -100, 0.0f);
        if (st->grad_accum > 1) loss = tfm_scale(g, loss, 1.0f / st->grad_accum);
        tfm_backward(g, loss);
        loss_sum += loss->data[0];
    }
    return loss_sum;
}

static void evaluate(tfm_gpt *m, tfm_graph *g, const tfm_lm_data *d, tfm_lm_train_state *st, tfm_lm_report *r) {
    uint64_t eval_seed = (uint64_t)st->seed * 1000003u + 7;
    int B = st->batch_size, T = m->cfg.block_size;
    r->train_loss = tfm_lm_estimate_loss(m, g, d, 0, st->eval_iters, B, T, eval_seed);
    r->val_loss = tfm_lm_estimate_loss(m, g, d, 1, st->eval_iters, B, T, eval_seed + 1);
    st->last_val_loss = r->val_loss;
    r->eval = 1;
}

int tfm_lm_train(tfm_gpt *m, const tfm_lm_data *d, tfm_adamw *opt, tfm_lm_train_state *st, int max_steps,
                 int profile, const tfm_train_ctl *ctl, tfm_lm_report_fn report, tfm_lm_save_fn save, void *user) {
    int B = st->batch_size, T = m->cfg.block_size;
    if (tfm_lm_step_check(&m->cfg, B)) return -1;
    int *x = malloc(sizeof(int) * (size_t)B * T * 2), *y = x ? x + (size_t)B * T : NULL;
    if (!x) return tfm_set_error("out of memory (%d x %d batch)", B, T), -1;
    tfm_graph g;
    tfm_graph_init(&g, 0);
    g.rng.s = st->dropout_rng;
    g.profile = profile;
    tfm_rng batch_rng = {st->batch_rng};
    double t_train = 0;
    int steps = 0, rc = 0;
    tfm_train_ctl none = {0};
    if (!ctl) ctl = &none;
    int skipped = 0;
    while (st->iter < st->iters) {
        double t0 = tfm_now();
        if (steps == 0) tfm_train_zero_grad(&g, &m->params);   /* later: the optimizer step zeroes them */
        float loss = accumulate(m, &g, d, st, &batch_rng, x, y);
        float lr = tfm_lr_cosine(st->iter, st->lr, st->min_lr, st->warmup, st->iters);
        /* the non-finite check comes before the update and before any save: no NaN reaches a checkpoint */
        int bad = !isfinite(loss);
        if (bad) tfm_train_zero_grad(&g, &m->params);
        else bad = tfm_train_step(&g, &m->params, opt, lr, st->grad_clip) != 0;
        if (bad && ++skipped > ctl->skip_nonfinite) {
            tfm_set_error("step %d: %s is not finite (%d such batches, --skip-nonfinite %d); try a lower --lr; "
                          "the last checkpoint is from before it", st->iter + 1, isfinite(loss) ? "gradient norm" : "loss",
                          skipped, ctl->skip_nonfinite);
            rc = -1;
            break;
        }
        if (bad) fprintf(stderr, "step %d: non-finite %s, batch skipped (%d of --skip-nonfinite %d)\n", st->iter + 1,
                         isfinite(loss) ? "gradient norm" : "loss", skipped, ctl->skip_nonfinite);
        st->iter++;
        steps++;
        t_train += tfm_now() - t0;
        tfm_lm_report r = {st->iter, st->iters, loss, lr, (float)((double)steps * B * T * st->grad_accum / t_train),
                           (float)(t_train / steps * (st->iters - st->iter)), 0, NAN, NAN, t_train};
        if (report) report(&r, user);
        int stop = (max_steps > 0 && steps >= max_steps) || (ctl->stop && *ctl->stop);
        int eval = st->iter % st->eval_every == 0 || st->iter == st->iters || (max_steps > 0 && steps >= max_steps);
        if (eval) {
            evaluate(m, &g, d, st, &r);
            if (report) report(&r, user);
        }
        if (eval || stop || (ctl->save_every > 0 && st->iter % ctl->save_every == 0)) {
            st->batch_rng = batch_rng.s;
            st->dropout_rng = g.rng.s;
            if (save && save(st, user)) {
                rc = -1;
                break;
            }
        }
        if (stop) break;
    }
    if (!rc && profile && steps) tfm_profile_print(&g, steps, "step", t_train, tfm_isa_name(), stderr);
    free(x);
    tfm_graph_free(&g);
    return rc ? -1 : steps;
}
