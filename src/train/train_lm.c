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
#include "train/loop.h"

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

/* Thread data parallelism (tfm_train_ctl.parallel): the slice is cut into k chunks in a pool (src/train/loop.h);
 * threads take chunks as they become free, so a descheduled thread holds up one chunk, not every op, and a
 * thread with no chunk left helps the others with their GEMMs (tfm_gemm_desk). */
static void *gpt_replica(void *m) {
    tfm_gpt *r = calloc(1, sizeof *r);
    if (!r) return tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory (a model replica)"), NULL;
    if (tfm_gpt_replica_init(r, m)) return free(r), NULL;
    return r;
}
static void gpt_free_replica(void *m) {
    tfm_gpt_free(m);
    free(m);
}
static tfm_params *gpt_params(void *m) { return &((tfm_gpt *)m)->params; }
static const tfm_train_net_ops gpt_ops = {gpt_replica, gpt_free_replica, gpt_params};

typedef struct {   /* one micro-batch's chunks (tfm_train_chunks_run) */
    tfm_train_pool *ch;
    const tfm_lm_train_state *st;
    const int *x, *y;
    int start, count;
    tfm_rng drop;   /* every chunk draws the same dropout keys (its samples' part of the masks) */
} lm_micro;

static void run_chunk(void *ctx, int i) {
    lm_micro *mb = ctx;
    tfm_train_chunk_slot *c = &mb->ch->c[i];
    int c0, cn;
    tfm_train_chunk(mb->start, mb->count, mb->ch->k, i, &c0, &cn);
    c->g.rng = mb->drop;
    c->loss = (float)c->loss + slice_step(c->net, &c->g, mb->st, mb->x, mb->y, c0, cn);   /* a float sum */
}

static float accumulate_chunks(tfm_train_pool *ch, tfm_gpt *m, tfm_graph *g, const tfm_lm_data *d,
                               const tfm_lm_train_state *st, tfm_rng *batch_rng, int *x, int *y, int start, int count) {
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
    for (int i = 0; i < k; i++) loss += (float)ch->c[i].loss;
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
    return tfm_train_check_before_save_all(dist, st->iter, &m->params, opt, what, loss);
}

/* ---------------------------------------------------------------- the loop */
/* Everything one call of tfm_lm_train keeps across its steps. */
typedef struct {
    tfm_gpt *m;
    const tfm_lm_data *d;
    tfm_adamw *opt;
    tfm_lm_train_state *st;
    int max_steps, profile;
    const tfm_train_ctl *ctl;
    tfm_lm_report_fn report;
    tfm_lm_save_fn save;
    void *user;
    tfm_train_ctl none;           /* ctl when none is given */
    tfm_dist *dist;               /* NULL: one process */
    int writer, start, count;     /* this rank's samples [start, start + count) of each batch */
    int *x, *y;                   /* (B,T) inputs and targets */
    tfm_graph g;
    tfm_rng batch_rng;
    tfm_train_pool ch;
    double t_train;               /* wall time of the steps (without evaluation and saving) */
    int steps, skipped;           /* steps of this call; batches skipped (--skip-nonfinite) */
} lm_loop;

static void loop_free(lm_loop *L) {
    tfm_train_pool_free(&L->ch);
    free(L->x);
    tfm_graph_free(&L->g);
}

/* The ranks' slices, the batch buffers, the graph and the chunks. 0, or -1 with a tfm error. */
static int loop_init(lm_loop *L, const tfm_train_ctl *ctl) {
    int B = L->st->batch_size, T = L->m->cfg.block_size;
    if (tfm_lm_step_check(&L->m->cfg, B)) return -1;
    L->dist = tfm_train_dist(ctl);
    L->start = 0, L->count = B, L->writer = !L->dist || tfm_dist_is_writer(L->dist);
    if (L->dist && tfm_dist_slice(L->dist, B, &L->start, &L->count)) return -1;
    L->x = malloc(sizeof(int) * (size_t)B * T * 2), L->y = L->x ? L->x + (size_t)B * T : NULL;
    if (!L->x) return tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory (%d x %d batch)", B, T), -1;
    L->ctl = ctl ? ctl : &L->none;
    tfm_train_graph_init(&L->g, (tfm_rng){L->st->dropout_rng}, L->profile, L->ctl->bf16);
    L->batch_rng = (tfm_rng){L->st->batch_rng};
    int k = tfm_train_chunks(L->ctl->parallel, tfm_get_threads(), L->count);
    if (tfm_train_pool_init(&L->ch, &gpt_ops, L->m, &L->g, k)) return loop_free(L), -1;
    return 0;
}

/* The evaluation, on the steps it is due, and a checkpoint (evaluation, stop, --save-every). 0, or -1 on an error. */
static int evaluate_and_save(lm_loop *L, tfm_lm_report *r, int at_max, int stop) {
    tfm_lm_train_state *st = L->st;
    int eval = st->iter % st->eval_every == 0 || st->iter == st->iters || at_max;
    if (eval && evaluate(L->m, &L->g, L->d, st, L->dist, r)) return -1;
    if (eval && L->report && L->writer) L->report(r, L->user);
    if (!(eval || stop || (L->ctl->save_every > 0 && st->iter % L->ctl->save_every == 0))) return 0;
    st->batch_rng = L->batch_rng.s;
    st->dropout_rng = L->g.rng.s;
    if (L->save && check_before_save(L->m, &L->g, L->d, st, L->opt, r, L->dist)) return -1;
    int failed = L->save && L->writer && L->save(st, L->user);   /* rank 0 alone writes */
    if (L->dist && tfm_train_dist_agree(L->dist, &failed) == 0 && failed && !L->writer)
        tfm_set_error("rank 0 could not save the checkpoint (its message is on rank 0's stderr)");
    return failed ? -1 : 0;
}

/* One optimizer step: grad_accum micro-batches forward and backward, the ranks' sum, the update, the report, then
 * evaluate_and_save. 1 when the run stops here (--max-steps, a stop request), 0 to go on, -1 on an error. */
static int lm_step(lm_loop *L) {
    tfm_gpt *m = L->m;
    tfm_lm_train_state *st = L->st;
    int B = st->batch_size, T = m->cfg.block_size;
    double t0 = tfm_now();
    if (L->steps == 0) tfm_train_zero_grad(&L->g, &m->params);   /* later: the optimizer step releases them */
    float loss = L->ch.k ? accumulate_chunks(&L->ch, m, &L->g, L->d, st, &L->batch_rng, L->x, L->y, L->start, L->count)
                         : accumulate(m, &L->g, L->d, st, &L->batch_rng, L->x, L->y, L->start, L->count);
    int stop_req = tfm_train_stop_requested(L->ctl);
    if (L->dist) {   /* the global loss, any rank's stop request, the summed gradients */
        double l = loss;
        if (tfm_train_dist_reduce(&L->g, L->dist, &m->params, &l, &stop_req)) return -1;
        loss = (float)l;
    }
    float lr = tfm_lr_cosine(st->iter, st->lr, st->min_lr, st->warmup, st->iters);
    int bad = tfm_train_update(&L->g, &m->params, L->opt, lr, st->grad_clip, L->ch.k && !L->dist ? &L->ch.norm : NULL,
                               loss);
    if (bad && tfm_train_skip(L->ctl, st->iter + 1, loss, &L->skipped, L->writer)) return -1;
    st->iter++;
    L->steps++;
    L->t_train += tfm_now() - t0;
    tfm_lm_report r = {st->iter, st->iters, loss, lr, (float)((double)L->steps * B * T * st->grad_accum / L->t_train),
                       (float)(L->t_train / L->steps * (st->iters - st->iter)), 0, NAN, NAN, L->t_train};
    if (L->report && L->writer) L->report(&r, L->user);
    int at_max = L->max_steps > 0 && st->iter >= L->max_steps;   /* the run's global step, across resumes */
    int stop = at_max || (L->dist ? stop_req : tfm_train_stop_requested(L->ctl));
    if (evaluate_and_save(L, &r, at_max, stop)) return -1;
    return stop;
}

int tfm_lm_train(tfm_gpt *m, const tfm_lm_data *d, tfm_adamw *opt, tfm_lm_train_state *st, int max_steps,
                 int profile, const tfm_train_ctl *ctl, tfm_lm_report_fn report, tfm_lm_save_fn save, void *user) {
    lm_loop L = {.m = m, .d = d, .opt = opt, .st = st, .max_steps = max_steps, .profile = profile, .report = report,
                 .save = save, .user = user};
    if (loop_init(&L, ctl)) return -1;
    int rc = 0;
    while (!rc && st->iter < st->iters && !(max_steps > 0 && st->iter >= max_steps)) rc = lm_step(&L);
    rc = tfm_train_check_ranks(L.ctl, L.dist, &m->params, rc < 0 ? -1 : 0);
    if (L.ch.k && profile) tfm_train_pool_profile(&L.ch, &L.g);
    if (!rc && profile && L.steps && L.writer) tfm_train_note_profile(L.ctl, &L.g, L.steps, L.t_train);
    loop_free(&L);
    return rc ? -1 : L.steps;
}
