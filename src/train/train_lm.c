/* The language-model training loop (include/tfm/train.h): random windows of the corpus, gradient
 * accumulation, warmup + cosine schedule, the shared clip + fused AdamW step, periodic evaluation and
 * checkpoints through a callback, and an exact resume from the saved state. */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
                               .eval_iters = 20, .seed = 1, .lr = 1e-3f, .min_lr = 1e-4f, .weight_decay = 0.1f,
                               .beta1 = 0.9f, .beta2 = 0.99f, .grad_clip = 1.0f};
    tfm_lm_train_state_init(st);
}

/* Forward and backward of samples [start, start+count) of the current (B,T) batch x -> y on graph g; the
 * mean loss is scaled by count/B (the slices' losses sum to the batch mean) and by 1/grad_accum. A slice
 * keys its dropout by the global sample, so the masks do not depend on how the batch is split. */
static float slice_step(tfm_gpt *m, tfm_graph *g, const tfm_lm_train_state *st, const int *x, const int *y, int start,
                        int count) {
    int B = st->batch_size, T = m->cfg.block_size;
    tfm_graph_reset(g);
    g->training = 1;
    if (count != B) g->drop_sample0 = start, g->drop_samples = count, g->drop_total = B;
    tfm_tensor *loss = tfm_cross_entropy(g, tfm_gpt_forward(g, m, x + (size_t)start * T, count, T),
                                         y + (size_t)start * T, -100, 0.0f);
    if (count != B) loss = tfm_scale(g, loss, (float)count / ((float)B * (float)st->grad_accum));
    else if (st->grad_accum > 1) loss = tfm_scale(g, loss, 1.0f / st->grad_accum);
    tfm_backward(g, loss);
    return loss->data[0];
}

/* Mean loss of one optimizer step: grad_accum micro-batches. On several ranks every rank draws the whole
 * batch and computes samples [start, start+count). */
static float accumulate(tfm_gpt *m, tfm_graph *g, const tfm_lm_data *d, const tfm_lm_train_state *st,
                        tfm_rng *batch_rng, int *x, int *y, int start, int count) {
    float loss_sum = 0;
    for (int micro = 0; micro < st->grad_accum; micro++) {
        tfm_lm_get_batch(d, 0, batch_rng, st->batch_size, m->cfg.block_size, x, y);
        loss_sum += slice_step(m, g, st, x, y, start, count);
    }
    return loss_sum;
}

/* Thread data parallelism (tfm_train_ctl.parallel): the slice is cut into k chunks, each computed on its own
 * replica (the model's weights, its own gradients) and graph by one thread with single-threaded kernels;
 * threads take chunks as they become free, so a descheduled thread holds up one chunk, not every op, and a
 * thread with no chunk left helps the others with their GEMMs (tfm_gemm_desk). The gradients are summed in
 * chunk order: the bits do not depend on which thread ran what. */
typedef struct {   /* one chunk's state; 64-byte aligned so two threads never write one cache line */
    _Alignas(64) tfm_graph g;
    tfm_gpt *net;        /* chunk 0: the model itself; the others: &rep */
    tfm_gpt rep;         /* the model's replica: its weights, this chunk's gradients */
    float loss;
} lm_chunk;

typedef struct {
    int k;
    lm_chunk *c;         /* (k) */
    tfm_params **p;      /* (k) &c[i].net->params */
    tfm_gemm_desk *desk; /* the chunks' GEMMs, shared with threads that are done */
    float norm;          /* the summed grads' norm (tfm_train_chunks_reduce) */
} lm_chunks;

static void chunks_free(lm_chunks *ch) {
    for (int i = 0; i < ch->k; i++) {
        if (ch->c[i].rep.blocks) tfm_gpt_free(&ch->c[i].rep);
        tfm_graph_free(&ch->c[i].g);
    }
    free(ch->c), free(ch->p);
    tfm_gemm_desk_free(ch->desk);
    *ch = (lm_chunks){0};
}

static int chunks_init(lm_chunks *ch, tfm_gpt *m, const tfm_graph *g, int k) {   /* k <= the slice (tfm_train_chunks) */
    *ch = (lm_chunks){0};
    if (k <= 0) return 0;
    if (tfm_train_chunks_alloc((void **)&ch->c, sizeof *ch->c, &ch->p, &ch->desk, k)) return -1;
    ch->k = k;
    for (int i = 0; i < k; i++) {
        lm_chunk *c = &ch->c[i];
        tfm_graph_init_worker(&c->g, g);
        /* chunk 0 computes into the model's own grads (released by the optimizer step), so the chunks' sum
         * adds k - 1 buffers into them instead of k into zeros: the same bits, a third less memory traffic */
        if (i > 0 && tfm_gpt_replica_init(&c->rep, m)) return chunks_free(ch), -1;
        c->net = i == 0 ? m : &c->rep;
        ch->p[i] = &c->net->params;
        if (i > 0) tfm_params_zero_grad(ch->p[i]);
    }
    return 0;
}

static void chunks_profile(lm_chunks *ch, tfm_graph *g) {
    tfm_graph *gs[ch->k];
    for (int i = 0; i < ch->k; i++) gs[i] = &ch->c[i].g;
    tfm_profile_merge(g, gs, ch->k);
}

typedef struct {   /* one micro-batch's chunks (tfm_train_chunks_run) */
    lm_chunks *ch;
    const tfm_lm_train_state *st;
    const int *x, *y;
    int start, count;
    tfm_rng drop;   /* every chunk draws the same dropout keys (its samples' part of the masks) */
} lm_micro;

static void run_chunk(void *ctx, int i) {
    lm_micro *mb = ctx;
    lm_chunk *c = &mb->ch->c[i];
    int c0, cn;
    tfm_train_chunk(mb->start, mb->count, mb->ch->k, i, &c0, &cn);
    c->g.rng = mb->drop;
    c->loss += slice_step(c->net, &c->g, mb->st, mb->x, mb->y, c0, cn);
}

static float accumulate_chunks(lm_chunks *ch, tfm_gpt *m, tfm_graph *g, const tfm_lm_data *d, const tfm_lm_train_state *st,
                               tfm_rng *batch_rng, int *x, int *y, int start, int count) {
    int k = ch->k;
    double tp = tfm_profile_begin(g);
    for (int i = 0; i < k; i++) ch->c[i].loss = 0;
    for (int micro = 0; micro < st->grad_accum; micro++) {
        tfm_lm_get_batch(d, 0, batch_rng, st->batch_size, m->cfg.block_size, x, y);
        lm_micro mb = {ch, st, x, y, start, count, g->rng};
        tfm_train_chunks_run(ch->desk, k, run_chunk, &mb);
        g->rng = ch->c[0].g.rng;
    }
    ch->norm = tfm_train_chunks_reduce(g, tp, &m->params, ch->p, k);
    float loss = 0;
    for (int i = 0; i < k; i++) loss += ch->c[i].loss;
    return loss;
}

/* tfm_lm_estimate_loss split across ranks: the same batches, each rank its slice, one sum at the end */
static int estimate_split(tfm_gpt *m, tfm_graph *g, const tfm_lm_data *d, const tfm_lm_train_state *st,
                          tfm_dist *dist, uint64_t seed, float *train_loss, float *val_loss) {
    int B = st->batch_size, T = m->cfg.block_size, start, count;
    if (tfm_dist_slice(dist, B, &start, &count)) return -1;
    int *x = malloc(sizeof(int) * (size_t)B * T * 2), *y = x ? x + (size_t)B * T : NULL;
    if (!x) return tfm_set_error("out of memory (%d x %d batch)", B, T), -1;
    int saved_grad = g->grad_enabled, saved_train = g->training;
    g->grad_enabled = 0;
    g->training = 0;
    double sum[2] = {0, 0};
    for (int split = 0; split < 2; split++) {
        tfm_rng r;
        tfm_rng_seed(&r, seed + (uint64_t)split);
        for (int i = 0; i < st->eval_iters; i++) {
            tfm_graph_reset(g);
            tfm_lm_get_batch(d, split, &r, B, T, x, y);
            float mean = tfm_cross_entropy(g, tfm_gpt_forward(g, m, x + (size_t)start * T, count, T),
                                           y + (size_t)start * T, -100, 0.0f)->data[0];
            sum[split] += (double)mean * count / B;
        }
    }
    g->grad_enabled = saved_grad;
    g->training = saved_train;
    free(x);
    if (tfm_dist_sum_f64(dist, sum, 2)) return -1;
    *train_loss = (float)(sum[0] / st->eval_iters);
    *val_loss = (float)(sum[1] / st->eval_iters);
    return 0;
}

static int evaluate(tfm_gpt *m, tfm_graph *g, const tfm_lm_data *d, tfm_lm_train_state *st, tfm_dist *dist,
                    tfm_lm_report *r) {
    uint64_t eval_seed = (uint64_t)st->seed * 1000003u + 7;
    int B = st->batch_size, T = m->cfg.block_size, bf16 = g->gemm_bf16, rc = 0;
    g->gemm_bf16 = 0;   /* losses are measured in fp32 whatever the training precision */
    if (dist) {
        rc = estimate_split(m, g, d, st, dist, eval_seed, &r->train_loss, &r->val_loss);
    } else {
        r->train_loss = tfm_lm_estimate_loss(m, g, d, 0, st->eval_iters, B, T, eval_seed);
        r->val_loss = tfm_lm_estimate_loss(m, g, d, 1, st->eval_iters, B, T, eval_seed + 1);
    }
    g->gemm_bf16 = bf16;
    if (rc) return -1;
    st->last_val_loss = r->val_loss;
    r->eval = 1;
    return 0;
}

/* Before any save (periodic, evaluation, stop, end of run): tfm_train_check_before_save with the loss the weights
 * give: the evaluation's when this step evaluated, else that of one validation sequence (a forward pass of
 * block_size tokens). On several ranks rank 0's verdict holds for all. 0, or -1 with the error: nothing is saved. */
static int check_before_save(tfm_gpt *m, tfm_graph *g, const tfm_lm_data *d, const tfm_lm_train_state *st,
                             const tfm_adamw *opt, const tfm_lm_report *r, tfm_dist *dist) {
    char what[96] = "the evaluation's loss (train + validation)";
    float loss = r->train_loss + r->val_loss;
    if (!r->eval) {
        int bf16 = g->gemm_bf16;
        g->gemm_bf16 = 0;
        loss = tfm_lm_estimate_loss(m, g, d, 1, 1, 1, m->cfg.block_size, (uint64_t)st->seed * 1000003u + 11);
        g->gemm_bf16 = bf16;
        snprintf(what, sizeof what, "the loss of a validation sequence under the new weights");
    }
    int bad = tfm_train_check_before_save(st->iter, &m->params, opt, what, loss), agreed = bad;
    if (!dist) return bad;
    if (tfm_train_dist_agree(dist, &agreed)) return -1;
    if (agreed && !bad)
        tfm_set_error("step %d: rank 0 found the weights diverged (not saved; its message is on rank 0's stderr)",
                      st->iter);
    return agreed ? -1 : 0;
}

int tfm_lm_train(tfm_gpt *m, const tfm_lm_data *d, tfm_adamw *opt, tfm_lm_train_state *st, int max_steps,
                 int profile, const tfm_train_ctl *ctl, tfm_lm_report_fn report, tfm_lm_save_fn save, void *user) {
    int B = st->batch_size, T = m->cfg.block_size;
    if (tfm_lm_step_check(&m->cfg, B)) return -1;
    tfm_dist *dist = tfm_train_dist(ctl);   /* NULL: one process */
    int start = 0, count = B, writer = !dist || tfm_dist_is_writer(dist);
    if (dist && tfm_dist_slice(dist, B, &start, &count)) return -1;
    int *x = malloc(sizeof(int) * (size_t)B * T * 2), *y = x ? x + (size_t)B * T : NULL;
    if (!x) return tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory (%d x %d batch)", B, T), -1;
    tfm_graph g;
    tfm_graph_init(&g, 0);
    g.rng.s = st->dropout_rng;
    g.profile = profile;
    tfm_rng batch_rng = {st->batch_rng};
    tfm_train_ctl none = {0};
    if (!ctl) ctl = &none;
    g.gemm_bf16 = ctl->bf16;   /* the chunks' worker graphs inherit it */
    g.recycle_grads = 1;   /* nothing reads an intermediate tensor's grad after the backward */
    lm_chunks ch;
    if (chunks_init(&ch, m, &g, tfm_train_chunks(ctl->parallel, tfm_get_threads(), count))) {
        free(x);
        tfm_graph_free(&g);
        return -1;
    }
    double t_train = 0;
    int steps = 0, rc = 0;
    int skipped = 0;
    while (st->iter < st->iters && !(max_steps > 0 && st->iter >= max_steps)) {
        double t0 = tfm_now();
        if (steps == 0) tfm_train_zero_grad(&g, &m->params);   /* later: the optimizer step releases them */
        float loss = ch.k ? accumulate_chunks(&ch, m, &g, d, st, &batch_rng, x, y, start, count)
                          : accumulate(m, &g, d, st, &batch_rng, x, y, start, count);
        int stop_req = tfm_train_stop_requested(ctl);
        if (dist) {   /* the global loss, any rank's stop request, the summed gradients */
            double l = loss;
            if (tfm_train_dist_reduce(&g, dist, &m->params, &l, &stop_req)) {
                rc = -1;
                break;
            }
            loss = (float)l;
        }
        float lr = tfm_lr_cosine(st->iter, st->lr, st->min_lr, st->warmup, st->iters);
        /* the non-finite check comes before the update and before any save: no NaN reaches a checkpoint */
        int bad = !isfinite(loss);
        if (bad) tfm_train_zero_grad(&g, &m->params);
        else bad = tfm_train_step_norm(&g, &m->params, opt, lr, st->grad_clip, ch.k && !dist ? &ch.norm : NULL) != 0;
        if (bad && ++skipped > ctl->skip_nonfinite) {
            tfm_set_error("step %d: %s is not finite (%d such batches, --skip-nonfinite %d); try a lower --lr",
                          st->iter + 1, isfinite(loss) ? "gradient norm" : "loss",
                          skipped, ctl->skip_nonfinite);
            rc = -1;
            break;
        }
        if (bad && writer) tfm_train_note(ctl, "step %d: non-finite %s, batch skipped (%d of --skip-nonfinite %d)", st->iter + 1,
                         isfinite(loss) ? "gradient norm" : "loss", skipped, ctl->skip_nonfinite);
        st->iter++;
        steps++;
        t_train += tfm_now() - t0;
        tfm_lm_report r = {st->iter, st->iters, loss, lr, (float)((double)steps * B * T * st->grad_accum / t_train),
                           (float)(t_train / steps * (st->iters - st->iter)), 0, NAN, NAN, t_train};
        if (report && writer) report(&r, user);
        int at_max = max_steps > 0 && st->iter >= max_steps;   /* the run's global step, across resumes */
        int stop = at_max || (dist ? stop_req : tfm_train_stop_requested(ctl));
        int eval = st->iter % st->eval_every == 0 || st->iter == st->iters || at_max;
        if (eval && evaluate(m, &g, d, st, dist, &r)) {
            rc = -1;
            break;
        }
        if (eval && report && writer) report(&r, user);
        if (eval || stop || (ctl->save_every > 0 && st->iter % ctl->save_every == 0)) {
            st->batch_rng = batch_rng.s;
            st->dropout_rng = g.rng.s;
            if (save && check_before_save(m, &g, d, st, opt, &r, dist)) {
                rc = -1;
                break;
            }
            int failed = save && writer && save(st, user);   /* rank 0 alone writes */
            if (dist && tfm_train_dist_agree(dist, &failed) == 0 && failed && !writer)
                tfm_set_error("rank 0 could not save the checkpoint (its message is on rank 0's stderr)");
            if (failed) {
                rc = -1;
                break;
            }
        }
        if (stop) break;
    }
    char hash[32];
    if (!rc && dist && tfm_train_dist_check_params(dist, &m->params, hash, sizeof hash)) rc = -1;
    else if (!rc && dist && writer)
        tfm_train_note(ctl, "%d ranks: parameters identical on every rank (fnv1a64 %s)", tfm_dist_size(dist), hash);
    if (ch.k && profile) chunks_profile(&ch, &g);
    if (!rc && profile && steps && writer) tfm_profile_print(&g, steps, "step", t_train, tfm_isa_name(), stderr);
    chunks_free(&ch);
    free(x);
    tfm_graph_free(&g);
    return rc ? -1 : steps;
}
