/* The training loop for any tfm_mt_net (include/tfm/seq2seq.h): teacher forcing, masked
 * cross-entropy (ignore_index <pad>, label smoothing), AdamW, lr schedule, gradient clipping,
 * validation loss per epoch, per-epoch checkpoints through a callback, exact --resume.
 *
 * Each batch is cut to its longest valid source and target length: the trailing pads are masked
 * keys (encoder), later positions (causal decoder) or ignored targets, so this changes nothing but
 * the cost. */
#include <limits.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tfm/kernels.h"
#include "tfm/train.h"

void tfm_mt_train_opts_default(tfm_mt_train_opts *o) {
    memset(o, 0, sizeof *o);
    o->epochs = 10;
    o->batch_size = 64;
    o->num_steps = 10;
    o->lr = 0.005f;
    o->schedule = TFM_SCHED_CONSTANT;
    o->grad_clip = 1.0f;
    o->beta1 = 0.9f;
    o->beta2 = 0.999f;
    o->eps = 1e-8f;
}

float tfm_mt_lr(const tfm_mt_train_opts *o, int it, int total, int d_model) {
    switch (o->schedule) {
    case TFM_SCHED_NOAM: return tfm_lr_noam(it, o->lr, d_model > 0 ? d_model : 1, o->warmup > 0 ? o->warmup : 1);
    case TFM_SCHED_COSINE: return tfm_lr_cosine(it, o->lr, o->min_lr, o->warmup, total);
    default: return it < o->warmup ? o->lr * (float)(it + 1) / (float)(o->warmup + 1) : o->lr;
    }
}

void tfm_mt_progress_init(tfm_mt_progress *p, uint64_t seed) {
    memset(p, 0, sizeof *p);
    tfm_rng_seed(&p->rng, seed);
    tfm_rng_seed(&p->drop_rng, seed ^ 0x9e3779b97f4a7c15ull);
}

void tfm_mt_progress_put(tfm_container *c, const tfm_mt_progress *p) {
    tfm_container_add_int(c, "train.epoch", p->epoch);
    tfm_container_add_int(c, "train.step", p->step);
    tfm_container_add_u64(c, "train.rng", p->rng.s);
    tfm_container_add_u64(c, "train.drop_rng", p->drop_rng.s);
    tfm_container_add_int(c, "train.batch", p->batch);
    tfm_container_add_u64(c, "train.epoch_rng", p->epoch_rng.s);
    tfm_container_add_int(c, "train.skipped", p->skipped);
}

int tfm_mt_progress_get(const tfm_container *c, tfm_mt_progress *p) {
    memset(p, 0, sizeof *p);
    if (tfm_container_int(c, "train.epoch", &p->epoch) || tfm_container_int(c, "train.step", &p->step) ||
        tfm_container_u64(c, "train.rng", &p->rng.s) || tfm_container_u64(c, "train.drop_rng", &p->drop_rng.s))
        return -1;
    /* written since mid-epoch checkpoints; older checkpoints are at an epoch end */
    if (tfm_container_get(c, "train.batch") &&
        (tfm_container_int(c, "train.batch", &p->batch) || tfm_container_u64(c, "train.epoch_rng", &p->epoch_rng.s) ||
         tfm_container_int(c, "train.skipped", &p->skipped)))
        return -1;
    if (p->epoch < 0 || p->step < 0 || p->batch < 0 || p->skipped < 0)
        return tfm_set_error("%s: negative train.epoch / step / batch / skipped", c->path ? c->path : "checkpoint"), -1;
    if (!p->rng.s || !p->drop_rng.s)
        return tfm_set_error("%s: train.rng / train.drop_rng is zero (xorshift would stay at zero)",
                             c->path ? c->path : "checkpoint"), -1;
    return 0;
}

/* the length every batch is padded to: the model's pad_len, at most num_steps (0: the batch's longest) */
static int pad_min(const tfm_mt_net *m, const tfm_mt_corpus *a) {
    return m->cfg.pad_len < a->num_steps ? m->cfg.pad_len : a->num_steps;
}

typedef struct {
    int *src, *valid, *tgt, *tgt_in;
    int Ts, Tt, n_tok;
} mt_batch;

/* Gather batch rows into (nb, Ts) source, (nb, Tt) target / decoder input, trimmed to the longest but at
 * least ts_min, tt_min (a rank's slice is padded to the global batch's lengths; a model with a pad_len pads
 * every batch to pad_min) */
static void gather(tfm_graph *g, const tfm_mt_corpus *a, const int *idx, int nb, mt_batch *b, int ts_min, int tt_min) {
    int S = a->num_steps;
    b->Ts = ts_min > 1 ? ts_min : 1;
    b->Tt = tt_min > 1 ? tt_min : 1;
    b->n_tok = 0;
    for (int i = 0; i < nb; i++) {
        if (a->src_valid[idx[i]] > b->Ts) b->Ts = a->src_valid[idx[i]];
        if (a->tgt_valid[idx[i]] > b->Tt) b->Tt = a->tgt_valid[idx[i]];
        b->n_tok += a->tgt_valid[idx[i]];
    }
    b->src = tfm_arena_alloc(&g->arena, sizeof(int) * (size_t)nb * b->Ts);
    b->valid = tfm_arena_alloc(&g->arena, sizeof(int) * (size_t)nb);
    b->tgt = tfm_arena_alloc(&g->arena, sizeof(int) * (size_t)nb * b->Tt);
    b->tgt_in = tfm_arena_alloc(&g->arena, sizeof(int) * (size_t)nb * b->Tt);
    for (int i = 0; i < nb; i++) {
        memcpy(b->src + (size_t)i * b->Ts, a->src + (size_t)idx[i] * S, sizeof(int) * (size_t)b->Ts);
        memcpy(b->tgt + (size_t)i * b->Tt, a->tgt + (size_t)idx[i] * S, sizeof(int) * (size_t)b->Tt);
        b->valid[i] = a->src_valid[idx[i]];
    }
    tfm_mt_shift_right(b->tgt, nb, b->Tt, b->tgt_in);
}

/* Data parallel: this rank's pairs of a global batch of nb pairs, contiguous and of nearly equal token
 * count (tfm_dist_split_weighted), and what every rank needs of the whole batch: its longest source and
 * target (the slice is padded to them, so attention dropout keys match the one-process batch), its target
 * tokens (the loss normalisation) and the global index of the slice's first source and target token. */
typedef struct {
    int lo, n;               /* pairs [lo, lo + n) of the batch; n = 0: none (the rank runs a dummy) */
    int Ts, Tt, n_tok;       /* of the whole batch */
    long row0[2];
} mt_slice;

/* The whole batch's longest source and target and its target tokens into *whole, and its cut into `parts`
 * contiguous parts of nearly equal token count (bounds[0..parts]); w is scratch of nb ints. */
static void split_batch(const tfm_mt_corpus *a, const int *idx, int nb, int *w, int *bounds, int parts, mt_slice *whole) {
    memset(whole, 0, sizeof *whole);
    for (int i = 0; i < nb; i++) {
        int j = idx[i];
        w[i] = a->src_valid[j] + a->tgt_valid[j];
        if (a->src_valid[j] > whole->Ts) whole->Ts = a->src_valid[j];
        if (a->tgt_valid[j] > whole->Tt) whole->Tt = a->tgt_valid[j];
        whole->n_tok += a->tgt_valid[j];
    }
    tfm_dist_split_weighted(w, nb, parts, bounds);
}

/* Part `part` of a batch cut by split_batch. */
static mt_slice slice_part(const mt_slice *whole, const tfm_mt_corpus *a, const int *idx, const int *bounds, int part) {
    mt_slice s = *whole;
    s.lo = bounds[part];
    s.n = bounds[part + 1] - s.lo;
    for (int i = 0; i < s.lo; i++) s.row0[0] += a->src_valid[idx[i]], s.row0[1] += a->tgt_valid[idx[i]];
    return s;
}

/* Forward and backward of one slice of the batch bidx (nb pairs) on graph g with model m (a rank's slice,
 * or a thread's chunk of it): padded to the whole batch's lengths, dropout keyed by the global pair and
 * token row, the loss scaled to this slice's share of the one-process objective. Returns that share of
 * the batch's mean loss. A slice without pairs runs the first one with weight 0 (the same RNG draws). */
static double slice_step(tfm_mt_net *m, tfm_graph *g, const tfm_mt_corpus *train, const int *bidx, int nb,
                         const mt_slice *sl, const tfm_mt_train_opts *o) {
    int rows = sl->n ? sl->n : 1, pm = pad_min(m, train);
    mt_batch b;
    tfm_graph_reset(g);
    g->grad_enabled = 1;
    g->training = 1;
    gather(g, train, bidx + (sl->n ? sl->lo : 0), rows, &b, sl->Ts > pm ? sl->Ts : pm, sl->Tt > pm ? sl->Tt : pm);
    g->drop_sample0 = sl->n ? sl->lo : 0, g->drop_samples = rows, g->drop_total = nb;
    g->drop_row0[0] = sl->row0[0], g->drop_row0[1] = sl->row0[1];
    tfm_tensor *loss = tfm_mt_net_loss(m, g, b.src, b.valid, rows, b.Ts, b.tgt_in, b.tgt, b.Tt, o->label_smoothing);
    float lv = loss->data[0], mine = sl->n ? (float)b.n_tok : 0.0f;
    tfm_backward(g, tfm_scale(g, loss, o->loss_norm == TFM_LOSS_D2L ? mine / b.Tt : mine / sl->n_tok));
    return sl->n ? (double)lv * b.n_tok / sl->n_tok : 0.0;
}

/* One process, the ops split across threads: the whole batch at once. */
static double whole_step(tfm_mt_net *m, tfm_graph *g, const tfm_mt_corpus *train, const int *bidx, int nb,
                         const tfm_mt_train_opts *o, int *n_tok) {
    int pm = pad_min(m, train);
    mt_batch b;
    tfm_graph_reset(g);
    g->grad_enabled = 1;
    g->training = 1;
    gather(g, train, bidx, nb, &b, pm, pm);
    tfm_tensor *loss = tfm_mt_net_loss(m, g, b.src, b.valid, nb, b.Ts, b.tgt_in, b.tgt, b.Tt, o->label_smoothing);
    if (o->loss_norm == TFM_LOSS_D2L) tfm_backward(g, tfm_scale(g, loss, (float)b.n_tok / b.Tt));
    else tfm_backward(g, loss);
    *n_tok = b.n_tok;
    return loss->data[0];
}

/* Thread data parallelism (tfm_train_ctl.parallel): k chunks of the (rank's part of the) batch, each on its
 * own graph and model (chunk 0 on the model itself, so its gradients need no copy; the others on replicas:
 * the model's weights, their own gradients), run by one thread with single-threaded kernels; the gradients
 * are summed in chunk order. The chunks are the parts rank*k .. rank*k+k-1 of the batch cut into ranks*k. */
typedef struct {   /* 64-byte aligned: two threads never write one cache line */
    _Alignas(64) tfm_graph g;
    tfm_mt_net *rep;
    double loss;
} mt_chunk;

typedef struct {
    int k;
    mt_chunk *c;
    tfm_params **p;
    tfm_gemm_desk *desk;   /* the chunks' GEMMs, shared with threads that are done */
    float norm;          /* the summed grads' norm (tfm_train_chunks_reduce) */
} mt_chunks;

static void chunks_free(mt_chunks *ch) {
    for (int i = 0; i < ch->k; i++) {
        if (i > 0) tfm_mt_net_free(ch->c[i].rep);   /* chunk 0 runs on the model itself */
        tfm_graph_free(&ch->c[i].g);
    }
    free(ch->c), free(ch->p);
    tfm_gemm_desk_free(ch->desk);
    *ch = (mt_chunks){0};
}

static int chunks_init(mt_chunks *ch, tfm_mt_net *m, const tfm_graph *g, int k) {
    *ch = (mt_chunks){0};
    if (k <= 0) return 0;
    if (tfm_train_chunks_alloc((void **)&ch->c, sizeof *ch->c, &ch->p, &ch->desk, k)) return -1;
    ch->k = k;
    for (int i = 0; i < k; i++) {
        mt_chunk *c = &ch->c[i];
        tfm_graph_init_worker(&c->g, g);
        if (!(c->rep = i == 0 ? m : tfm_mt_net_replica(m))) return chunks_free(ch), -1;
        ch->p[i] = &c->rep->params;
        if (i > 0) tfm_params_zero_grad(ch->p[i]);   /* the model's: zeroed before the first step */
    }
    return 0;
}

typedef struct {   /* one step's chunks (tfm_train_chunks_run) */
    mt_chunks *ch;
    const tfm_mt_corpus *train;
    const int *bidx;
    int nb;
    const mt_slice *sl;
    const tfm_mt_train_opts *o;
    tfm_rng drop;
} mt_step_chunks;

static void run_chunk(void *ctx, int i) {
    mt_step_chunks *sc = ctx;
    mt_chunk *c = &sc->ch->c[i];
    c->g.rng = sc->drop;
    c->loss = slice_step(c->rep, &c->g, sc->train, sc->bidx, sc->nb, &sc->sl[i], sc->o);
}

/* The chunks of one step; returns the (rank's share of the) batch's mean loss, *n_tok the batch's tokens. */
static double chunks_step(mt_chunks *ch, tfm_mt_net *m, tfm_graph *g, const tfm_mt_corpus *train, const int *bidx, int nb,
                          int *w, int *bounds, int ranks, int rank, const tfm_mt_train_opts *o, int *n_tok) {
    int k = ch->k;
    double tp = tfm_profile_begin(g);
    mt_slice whole, sl[k];
    split_batch(train, bidx, nb, w, bounds, ranks * k, &whole);
    for (int i = 0; i < k; i++) sl[i] = slice_part(&whole, train, bidx, bounds, rank * k + i);
    /* every chunk draws the same dropout keys (its pairs' part of the masks) */
    mt_step_chunks sc = {ch, train, bidx, nb, sl, o, g->rng};
    tfm_train_chunks_run(ch->desk, k, run_chunk, &sc);
    g->rng = ch->c[0].g.rng;
    ch->norm = tfm_train_chunks_reduce(g, tp, &m->params, ch->p, k);
    double loss = 0;
    for (int i = 0; i < k; i++) loss += ch->c[i].loss;
    *n_tok = whole.n_tok;
    return loss;
}

static void chunks_profile(mt_chunks *ch, tfm_graph *g) {
    tfm_graph *gs[ch->k];
    for (int i = 0; i < ch->k; i++) gs[i] = &ch->c[i].g;
    tfm_profile_merge(g, gs, ch->k);
}

float tfm_mt_eval_loss(tfm_mt_net *m, tfm_graph *g, const tfm_mt_corpus *data, int batch_size) {
    int saved_grad = g->grad_enabled, saved_train = g->training;
    g->grad_enabled = 0;
    g->training = 0;
    double sum = 0;
    long n_tok = 0;
    int *idx = malloc(sizeof(int) * (size_t)(batch_size > 0 ? batch_size : 1));
    if (!idx) {
        g->grad_enabled = saved_grad, g->training = saved_train;
        return tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory (validation batches of %d pairs)", batch_size), NAN;
    }
    for (int i0 = 0; i0 < data->n; i0 += batch_size) {
        int nb = data->n - i0 < batch_size ? data->n - i0 : batch_size;
        for (int i = 0; i < nb; i++) idx[i] = i0 + i;
        tfm_graph_reset(g);
        mt_batch b;
        gather(g, data, idx, nb, &b, pad_min(m, data), pad_min(m, data));
        tfm_tensor *loss = tfm_mt_net_loss(m, g, b.src, b.valid, nb, b.Ts, b.tgt_in, b.tgt, b.Tt, 0.0f);
        sum += (double)loss->data[0] * b.n_tok;
        n_tok += b.n_tok;
    }
    free(idx);
    tfm_graph_reset(g);
    g->grad_enabled = saved_grad;
    g->training = saved_train;
    return n_tok ? (float)(sum / n_tok) : 0.0f;
}

/* Data parallel: a callback only rank 0 runs (validation, checkpoint) has its result on every rank. */
static int on_writer(tfm_dist *d, int v) {
    if (!d) return v;
    if (tfm_train_dist_agree(d, &v)) return -1;
    if (v < 0 && !tfm_dist_is_writer(d)) tfm_set_error("rank 0 failed (its message is on rank 0's stderr)");
    return v;
}

/* Before a checkpoint or a validation (which may write --keep-best): tfm_train_check_before_save with the
 * epoch's validation loss when it was just measured (valid_loss not NULL), else the loss of the first pair of
 * `probe` (a forward pass of one pair). On several ranks rank 0's verdict holds for all. 0, or -1 with the error. */
static int check_before_save(tfm_mt_net *m, tfm_graph *g, const tfm_mt_corpus *probe, const tfm_adamw *opt,
                             const float *valid_loss, int step, tfm_dist *dist) {
    float loss;
    const char *what = "the validation loss";
    if (valid_loss) {
        loss = *valid_loss;
    } else {
        tfm_mt_corpus one = *probe;
        one.n = 1;
        int bf16 = g->gemm_bf16;
        g->gemm_bf16 = 0;
        loss = tfm_mt_eval_loss(m, g, &one, 1);
        g->gemm_bf16 = bf16;
        what = "the loss of one sentence pair under the new weights";
    }
    int bad = tfm_train_check_before_save(step, &m->params, opt, what, loss), agreed = bad;
    if (!dist) return bad;
    if (tfm_train_dist_agree(dist, &agreed)) return -1;
    if (agreed && !bad)
        tfm_set_error("step %d: rank 0 found the weights diverged (not saved; its message is on rank 0's stderr)",
                      step);
    return agreed ? -1 : 0;
}

int tfm_mt_train(tfm_mt_net *m, const tfm_mt_corpus *train, const tfm_mt_corpus *valid,
                 const tfm_mt_train_opts *o, tfm_adamw *opt, tfm_mt_progress *prog, tfm_mt_report_fn report,
                 tfm_mt_epoch_fn on_epoch, void *user) {
    if (train->n < 1) return tfm_set_error("no training pairs"), -1;
    if (o->batch_size < 1) return tfm_set_error("batch size must be >= 1"), -1;
    int steps_per_epoch = (int)(((int64_t)train->n + o->batch_size - 1) / o->batch_size);
    if (o->max_tokens > 0) {   /* the batch count of token batches does not depend on the shuffle */
        tfm_batches b0;
        if (tfm_batches_by_tokens(&b0, train->n, train->src_valid, train->tgt_valid, o->max_tokens, NULL)) return -1;
        steps_per_epoch = b0.n_batches;
        tfm_batches_free(&b0);
    }
    if ((int64_t)o->epochs * steps_per_epoch > INT_MAX)
        return tfm_set_error("--epochs %d x %d steps per epoch overflows the step counter (at most %d steps)", o->epochs,
                             steps_per_epoch, INT_MAX), -1;
    if (tfm_mt_step_check(&m->cfg, train, o)) return -1;
    int total = o->epochs * steps_per_epoch;
    /* the steps still to take must fit the 32-bit step counters (train.step, adam.t <= train.step) */
    int64_t left = prog->epoch >= o->epochs ? 0 : (int64_t)(o->epochs - prog->epoch) * steps_per_epoch - prog->batch;
    if ((int64_t)prog->step + left > INT_MAX)
        return tfm_set_error("train.step %d + the %lld steps left overflow the step counter (at most %d): the "
                             "checkpoint's train.step is corrupt or edited", prog->step, (long long)left, INT_MAX), -1;
    tfm_dist *dist = tfm_train_dist(&o->ctl);   /* NULL: one process */
    int writer = !dist || tfm_dist_is_writer(dist);
    int ranks = dist ? tfm_dist_size(dist) : 1, rank = dist ? tfm_dist_rank(dist) : 0;
    int k = tfm_train_chunks(o->ctl.parallel, tfm_get_threads(), INT_MAX);   /* a token batch's pairs vary */
    size_t parts = (size_t)ranks * (k ? (size_t)k : 1);
    int *lens = malloc(sizeof(int) * ((size_t)train->n * 2 + parts + 3));
    if (!lens) return tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory"), -1;
    int *w = lens + train->n, *bounds = w + train->n + 1;   /* split_batch's scratch (ranks, chunks) */
    for (int i = 0; i < train->n; i++)
        lens[i] = train->src_valid[i] > train->tgt_valid[i] ? train->src_valid[i] : train->tgt_valid[i];
    tfm_graph g;
    tfm_graph_init(&g, 0);
    g.rng = prog->drop_rng;
    g.profile = o->profile;
    g.gemm_bf16 = o->ctl.bf16;   /* the chunks' worker graphs inherit it */
    g.recycle_grads = 1;   /* nothing reads an intermediate tensor's grad after the backward */
    mt_chunks ch;
    if (chunks_init(&ch, m, &g, k)) {
        free(lens);
        tfm_graph_free(&g);
        return -1;
    }
    double t_steps = 0;   /* wall time of the training steps (without validation and reporting) */
    int d_model = m->cfg.d_model > 0 ? m->cfg.d_model : m->cfg.hidden_size;
    double t0 = tfm_now(), t_last = t0, loss_sum = 0;
    long tok_since = 0, tok_total = 0;
    int steps_this_run = 0, rc = 0;
    int limit = o->max_steps > 0;   /* --max-steps: stop once the run's global step reaches it */
    const tfm_train_ctl *ctl = &o->ctl;
    int done = limit && prog->step >= o->max_steps;
    int stop_seen = 0;   /* a rank's stop request, agreed by all (several ranks) */
    float epoch_valid = NAN;   /* the validation loss measured at the end of the epoch (rank 0), if valid_set */
    int valid_set = 0;
    const tfm_mt_corpus *probe = valid && valid->n > 0 ? valid : train;   /* its first pair: check_before_save */
    for (int epoch = prog->epoch; epoch < o->epochs && !rc && !done; epoch++) {
        /* a mid-epoch checkpoint: the same shuffle again from the epoch's RNG, then skip the batches done */
        if (prog->batch > 0) prog->rng = prog->epoch_rng;
        else prog->epoch_rng = prog->rng;
        tfm_batches bt;
        valid_set = 0;
        if (o->max_tokens > 0 ? tfm_batches_by_tokens(&bt, train->n, train->src_valid, train->tgt_valid, o->max_tokens,
                                                      &prog->rng)
                              : tfm_batches_make(&bt, train->n, o->batch_size, lens, o->bucket, &prog->rng)) {
            rc = -1;
            break;
        }
        if (prog->batch >= bt.n_batches) prog->batch = 0;
        for (int bi = prog->batch; bi < bt.n_batches; bi++) {
            int nb = bt.off[bi + 1] - bt.off[bi];
            double t_step = tfm_now();
            const int *bidx = bt.idx + bt.off[bi];
            if (steps_this_run == 0) tfm_train_zero_grad(&g, &m->params);   /* later: the step releases them */
            int n_tok;   /* target tokens of the step (of the global batch on several ranks) */
            double l;    /* the step's mean loss (on several ranks: this rank's share of it) */
            if (ch.k) {
                l = chunks_step(&ch, m, &g, train, bidx, nb, w, bounds, ranks, rank, o, &n_tok);
            } else if (dist) {
                mt_slice sl;
                split_batch(train, bidx, nb, w, bounds, ranks, &sl);
                sl = slice_part(&sl, train, bidx, bounds, rank);
                l = slice_step(m, &g, train, bidx, nb, &sl, o);
                n_tok = sl.n_tok;
            } else {
                l = whole_step(m, &g, train, bidx, nb, o, &n_tok);
            }
            float lv = (float)l;
            int stop_req = tfm_train_stop_requested(ctl);
            if (dist) {   /* the global loss, any rank's stop request, the summed gradients */
                if (tfm_train_dist_reduce(&g, dist, &m->params, &l, &stop_req)) {
                    rc = -1;
                    break;
                }
                lv = (float)l;
                stop_seen = stop_req;
            }
            float lr = tfm_mt_lr(o, prog->step, total, d_model);
            /* the non-finite check comes before the update and before any save: no NaN reaches a checkpoint */
            int bad = !isfinite(lv);
            if (bad) tfm_train_zero_grad(&g, &m->params);
            else bad = tfm_train_step_norm(&g, &m->params, opt, lr, o->grad_clip, ch.k && !dist ? &ch.norm : NULL) != 0;
            t_steps += tfm_now() - t_step;
            prog->step++;
            prog->batch = bi + 1;
            steps_this_run++;
            if (bad && ++prog->skipped > ctl->skip_nonfinite) {
                rc = -1;
                tfm_set_error("step %d: %s is not finite (%d such batches, --skip-nonfinite %d); try a lower --lr",
                              prog->step, isfinite(lv) ? "gradient norm" : "loss",
                              prog->skipped, ctl->skip_nonfinite);
                break;
            }
            if (bad && writer) {
                tfm_train_note(ctl, "step %d: non-finite %s, batch skipped (%d of --skip-nonfinite %d)", prog->step,
                        isfinite(lv) ? "gradient norm" : "loss", prog->skipped, ctl->skip_nonfinite);
            } else if (!bad) {
                loss_sum += (double)lv * n_tok;
                tok_since += n_tok;
                tok_total += n_tok;
            }
            int last = bi == bt.n_batches - 1;
            int stop_now = (limit && prog->step >= o->max_steps) || (dist ? stop_req : tfm_train_stop_requested(ctl));
            if (report && writer && ((o->log_every > 0 && prog->step % o->log_every == 0) || last || stop_now)) {
                double now = tfm_now();
                tfm_mt_report r = {0};
                r.epoch = epoch + 1;
                r.epochs = o->epochs;
                r.step = prog->step;
                r.total_steps = total;
                r.loss = tok_since ? (float)(loss_sum / tok_since) : 0.0f;
                r.lr = lr;
                r.tokens_per_s = now > t0 ? (float)(tok_total / (now - t0)) : 0.0f;
                double per_step = (now - t0) / steps_this_run;
                r.eta_s = (float)(per_step * (total - prog->step));
                r.valid_loss = -1;
                if (last) {
                    r.end_of_epoch = 1;
                    if (valid && valid->n > 0)
                        epoch_valid = r.valid_loss = tfm_mt_eval_loss(m, &g, valid, o->batch_size), valid_set = 1;
                }
                report(&r, user);
                loss_sum = 0;
                tok_since = 0;
                t_last = now;
            }
            if (last) break;   /* the epoch's validation and checkpoint below */
            int early = 0;   /* validation asked to stop (--patience) */
            int validate_now = o->validate && o->valid_every > 0 && prog->step % o->valid_every == 0;
            int save_now = on_epoch && (stop_now || (ctl->save_every > 0 && prog->step % ctl->save_every == 0));
            if ((validate_now || save_now) && check_before_save(m, &g, probe, opt, NULL, prog->step, dist)) {
                rc = -1;
                break;
            }
            if (validate_now) {
                prog->drop_rng = g.rng;
                int v = on_writer(dist, writer ? o->validate(prog, epoch + 1, user) : 0);
                if (v < 0) {
                    rc = -1;
                    done = 1;
                    break;
                }
                early = v > 0;
            }
            if (stop_now || early || (ctl->save_every > 0 && prog->step % ctl->save_every == 0)) {
                prog->drop_rng = g.rng;   /* a checkpoint inside the epoch: prog->batch says where */
                if (on_epoch && on_writer(dist, writer ? on_epoch(prog, user) : 0)) rc = -1;
                if (stop_now || early || rc) {
                    done = 1;
                    break;
                }
            }
        }
        tfm_batches_free(&bt);
        if (rc || done) break;
        prog->epoch = epoch + 1;
        prog->batch = 0;
        prog->drop_rng = g.rng;
        if ((o->validate || on_epoch) &&
            check_before_save(m, &g, probe, opt, valid_set ? &epoch_valid : NULL, prog->step, dist)) {
            rc = -1;
            break;
        }
        if (o->validate) {
            int v = on_writer(dist, writer ? o->validate(prog, epoch + 1, user) : 0);
            if (v < 0) rc = -1;
            if (v > 0) done = 1;   /* --patience: save this epoch's checkpoint, then stop */
        }
        if (rc) break;
        if (on_epoch && on_writer(dist, writer ? on_epoch(prog, user) : 0)) rc = -1;
        if ((limit && prog->step >= o->max_steps) || (dist ? stop_seen : tfm_train_stop_requested(ctl))) done = 1;
    }
    (void)t_last;
    char hash[32];
    if (!rc && dist && tfm_train_dist_check_params(dist, &m->params, hash, sizeof hash)) rc = -1;
    else if (!rc && dist && writer)
        tfm_train_note(ctl, "%d ranks: parameters identical on every rank (fnv1a64 %s)", tfm_dist_size(dist), hash);
    if (o->profile && steps_this_run && writer) {
        if (ch.k) chunks_profile(&ch, &g);
        tfm_profile_print(&g, steps_this_run, "step", t_steps, tfm_isa_name(), stderr);
        fprintf(stderr, "  arena: peak %.1f MiB, %zu chunk allocations\n", g.arena.peak / 1048576.0, g.arena.n_mallocs);
    }
    chunks_free(&ch);
    tfm_graph_free(&g);
    free(lens);
    return rc;
}
