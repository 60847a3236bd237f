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
#include "train/loop.h"

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

/* The training loss of a gathered batch: the cross-entropy, or with o->rdrop the R-Drop loss (two passes) */
static tfm_tensor *batch_loss(tfm_mt_net *m, tfm_graph *g, const mt_batch *b, int rows, const tfm_mt_train_opts *o) {
    if (o->rdrop > 0)
        return tfm_mt_net_rdrop_loss(m, g, b->src, b->valid, rows, b->Ts, b->tgt_in, b->tgt, b->Tt, o->label_smoothing,
                                     o->rdrop);
    return tfm_mt_net_loss(m, g, b->src, b->valid, rows, b->Ts, b->tgt_in, b->tgt, b->Tt, o->label_smoothing);
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
    tfm_tensor *loss = batch_loss(m, g, &b, rows, o);
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
    tfm_tensor *loss = batch_loss(m, g, &b, nb, o);
    if (o->loss_norm == TFM_LOSS_D2L) tfm_backward(g, tfm_scale(g, loss, (float)b.n_tok / b.Tt));
    else tfm_backward(g, loss);
    *n_tok = b.n_tok;
    return loss->data[0];
}

/* Thread data parallelism (tfm_train_ctl.parallel): k chunks of the (rank's part of the) batch in a pool
 * (src/train/loop.h); the chunks are the parts rank*k .. rank*k+k-1 of the batch cut into ranks*k. */
static void *net_replica(void *m) { return tfm_mt_net_replica(m); }
static void net_free(void *m) { tfm_mt_net_free(m); }
static tfm_params *net_params(void *m) { return &((tfm_mt_net *)m)->params; }
static const tfm_train_net_ops mt_net_ops = {net_replica, net_free, net_params};

typedef struct {   /* one step's chunks (tfm_train_chunks_run) */
    tfm_train_pool *ch;
    const tfm_mt_corpus *train;
    const int *bidx;
    int nb;
    const mt_slice *sl;
    const tfm_mt_train_opts *o;
    tfm_rng drop;
} mt_step_chunks;

static void run_chunk(void *ctx, int i) {
    mt_step_chunks *sc = ctx;
    tfm_train_chunk_slot *c = &sc->ch->c[i];
    c->g.rng = sc->drop;
    c->loss = slice_step(c->net, &c->g, sc->train, sc->bidx, sc->nb, &sc->sl[i], sc->o);
}

/* The chunks of one step; returns the (rank's share of the) batch's mean loss, *n_tok the batch's tokens. */
static double chunks_step(tfm_train_pool *ch, tfm_mt_net *m, tfm_graph *g, const tfm_mt_corpus *train, const int *bidx,
                          int nb, int *w, int *bounds, int ranks, int rank, const tfm_mt_train_opts *o, int *n_tok) {
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
    return tfm_train_check_before_save_all(dist, step, &m->params, opt, what, loss);
}

/* ---------------------------------------------------------------- the loop */
/* Everything one call of tfm_mt_train keeps across its epochs and steps. */
typedef struct {
    tfm_mt_net *m;
    const tfm_mt_corpus *train, *valid;
    const tfm_mt_corpus *probe;   /* its first pair: check_before_save */
    const tfm_mt_train_opts *o;
    const tfm_train_ctl *ctl;
    tfm_adamw *opt;
    tfm_mt_progress *prog;
    tfm_mt_report_fn report;
    tfm_mt_epoch_fn on_epoch;
    void *user;
    tfm_dist *dist;               /* NULL: one process */
    int writer, ranks, rank;
    int total, d_model;           /* the run's steps; the width of the noam schedule */
    int *lens, *w, *bounds;       /* per-pair lengths (batching); split_batch's scratch (ranks, chunks) */
    tfm_graph g;
    tfm_train_pool ch;
    double t0, t_steps;           /* the call's start; wall time of the training steps (without validation and
                                     reporting) */
    double loss_sum;              /* token-weighted loss since the last report */
    long tok_since, tok_total;
    int steps_this_run;
    int done;                     /* stop after this step or epoch (--max-steps, a stop request, --patience) */
    int stop_seen;                /* a rank's stop request, agreed by all (several ranks) */
    float epoch_valid;            /* the validation loss measured at the end of the epoch (rank 0), if valid_set */
    int valid_set;
} mt_loop;

/* Optimizer steps per epoch (a token batch's count does not depend on the shuffle); -1 with an error. */
static int epoch_steps(const tfm_mt_corpus *train, const tfm_mt_train_opts *o) {
    if (train->n < 1) return tfm_set_error("no training pairs"), -1;
    if (o->batch_size < 1) return tfm_set_error("batch size must be >= 1"), -1;
    if (o->max_tokens <= 0) return (int)(((int64_t)train->n + o->batch_size - 1) / o->batch_size);
    tfm_batches b0;
    if (tfm_batches_by_tokens(&b0, train->n, train->src_valid, train->tgt_valid, o->max_tokens, NULL)) return -1;
    int n = b0.n_batches;
    tfm_batches_free(&b0);
    return n;
}

/* The run's steps when the batch count changes per epoch (o->epoch_data with token batches): those taken before
 * this epoch, and this epoch's count for it and the epochs_left - 1 after it (the cosine schedule's length, the ETA) */
static int steps_now(const tfm_mt_progress *prog, int n_batches, int epochs_left) {
    int64_t t = (int64_t)prog->step - prog->batch + (int64_t)n_batches * epochs_left;
    return t > INT_MAX ? INT_MAX : (int)t;
}

/* The run's total steps into *total: those taken and those left, checked to fit the 32-bit step counters
 * (train.step, adam.t <= train.step). On the run's own data that is epochs x per_epoch; a resume on new data
 * (--allow-new-data) has another epoch length than the steps taken, and the schedule and ETA follow it. */
static int check_steps(const tfm_mt_net *m, const tfm_mt_corpus *train, const tfm_mt_train_opts *o,
                       const tfm_mt_progress *prog, int *total) {
    int per_epoch = epoch_steps(train, o);
    if (per_epoch < 0) return -1;
    if ((int64_t)o->epochs * per_epoch > INT_MAX)
        return tfm_set_error("--epochs %d x %d steps per epoch overflows the step counter (at most %d steps)",
                             o->epochs, per_epoch, INT_MAX), -1;
    if (tfm_mt_step_check(&m->cfg, train, o)) return -1;
    int64_t left = prog->epoch >= o->epochs ? 0 : (int64_t)(o->epochs - prog->epoch) * per_epoch - prog->batch;
    if ((int64_t)prog->step + left > INT_MAX)
        return tfm_set_error("train.step %d + the %lld steps left overflow the step counter (at most %d): the "
                             "checkpoint's train.step is corrupt or edited", prog->step, (long long)left, INT_MAX), -1;
    *total = (int)(prog->step + left);
    return 0;
}

static void loop_free(mt_loop *L) {
    tfm_train_pool_free(&L->ch);
    tfm_graph_free(&L->g);
    free(L->lens);
}

/* lens[i]: the longer side of pair i (tfm_batches_make's bucketing) */
static void pair_lengths(const tfm_mt_corpus *a, int *lens) {
    for (int i = 0; i < a->n; i++) lens[i] = a->src_valid[i] > a->tgt_valid[i] ? a->src_valid[i] : a->tgt_valid[i];
}

/* o->epoch_data: the epoch's training arrays (rewritten in place by the caller), then their lengths again */
static int epoch_data(const tfm_mt_train_opts *o, int epoch, void *user, const tfm_mt_corpus *train, int *lens) {
    int n = train->n, S = train->num_steps;
    if (o->epoch_data(epoch, user)) return -1;
    if (train->n != n || train->num_steps != S)
        return tfm_set_error("epoch %d: epoch_data changed the training arrays' shape", epoch + 1), -1;
    pair_lengths(train, lens);
    return 0;
}

/* The ranks, the chunks, the graph and the per-pair lengths of a checked run. 0, or -1 with a tfm error. */
static int loop_init(mt_loop *L) {
    const tfm_mt_corpus *train = L->train;
    L->dist = tfm_train_dist(L->ctl);
    L->writer = !L->dist || tfm_dist_is_writer(L->dist);
    L->ranks = L->dist ? tfm_dist_size(L->dist) : 1, L->rank = L->dist ? tfm_dist_rank(L->dist) : 0;
    int k = tfm_train_chunks(L->ctl->parallel, tfm_get_threads(), INT_MAX);   /* a token batch's pairs vary */
    size_t parts = (size_t)L->ranks * (k ? (size_t)k : 1);
    L->lens = malloc(sizeof(int) * ((size_t)train->n * 2 + parts + 3));
    if (!L->lens) return tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory"), -1;
    L->w = L->lens + train->n, L->bounds = L->w + train->n + 1;
    pair_lengths(train, L->lens);
    tfm_train_graph_init(&L->g, L->prog->drop_rng, L->o->profile, L->ctl->bf16);
    if (tfm_train_pool_init(&L->ch, &mt_net_ops, L->m, &L->g, k)) return loop_free(L), -1;
    L->d_model = L->m->cfg.d_model > 0 ? L->m->cfg.d_model : L->m->cfg.hidden_size;
    L->t0 = tfm_now();
    L->done = L->o->max_steps > 0 && L->prog->step >= L->o->max_steps;
    L->epoch_valid = NAN;
    L->probe = L->valid && L->valid->n > 0 ? L->valid : train;
    return 0;
}

/* Forward and backward of batch bidx (nb pairs): on the chunks, this rank's slice, or the whole batch. Returns
 * the step's mean loss (on several ranks: this rank's share of it), *n_tok its target tokens (of the global batch
 * on several ranks). */
static double forward_backward(mt_loop *L, const int *bidx, int nb, int *n_tok) {
    if (L->ch.k)
        return chunks_step(&L->ch, L->m, &L->g, L->train, bidx, nb, L->w, L->bounds, L->ranks, L->rank, L->o, n_tok);
    if (!L->dist) return whole_step(L->m, &L->g, L->train, bidx, nb, L->o, n_tok);
    mt_slice sl;
    split_batch(L->train, bidx, nb, L->w, L->bounds, L->ranks, &sl);
    sl = slice_part(&sl, L->train, bidx, L->bounds, L->rank);
    *n_tok = sl.n_tok;
    return slice_step(L->m, &L->g, L->train, bidx, nb, &sl, L->o);
}

/* A progress report (rank 0), with the validation loss at the end of an epoch. */
static void report_progress(mt_loop *L, int epoch, int last, float lr) {
    const tfm_mt_train_opts *o = L->o;
    double now = tfm_now();
    tfm_mt_report r = {0};
    r.epoch = epoch + 1;
    r.epochs = o->epochs;
    r.step = L->prog->step;
    r.total_steps = L->total;
    r.loss = L->tok_since ? (float)(L->loss_sum / L->tok_since) : 0.0f;
    r.lr = lr;
    r.tokens_per_s = now > L->t0 ? (float)(L->tok_total / (now - L->t0)) : 0.0f;
    double per_step = (now - L->t0) / L->steps_this_run;
    r.eta_s = (float)(per_step * (L->total - L->prog->step));
    r.valid_loss = -1;
    if (last) {
        r.end_of_epoch = 1;
        if (L->valid && L->valid->n > 0)
            L->epoch_valid = r.valid_loss = tfm_mt_eval_loss(L->m, &L->g, L->valid, o->batch_size), L->valid_set = 1;
    }
    L->report(&r, L->user);
    L->loss_sum = 0;
    L->tok_since = 0;
}

/* Inside an epoch, after step prog->step: validation (--eval-every) and a checkpoint (--save-every, a stop).
 * 1 when the run stops here (L->done), 0 to go on, -1 on an error. */
static int checkpoint_inside_epoch(mt_loop *L, int epoch, int stop_now) {
    const tfm_mt_train_opts *o = L->o;
    tfm_mt_progress *prog = L->prog;
    int early = 0;   /* validation asked to stop (--patience) */
    int save_every = L->ctl->save_every > 0 && prog->step % L->ctl->save_every == 0;
    int validate_now = o->validate && o->valid_every > 0 && prog->step % o->valid_every == 0;
    int save_now = L->on_epoch && (stop_now || save_every);
    if ((validate_now || save_now) && check_before_save(L->m, &L->g, L->probe, L->opt, NULL, prog->step, L->dist))
        return -1;
    if (validate_now) {
        prog->drop_rng = L->g.rng;
        int v = on_writer(L->dist, L->writer ? o->validate(prog, epoch + 1, L->user) : 0);
        if (v < 0) return L->done = 1, -1;
        early = v > 0;
    }
    if (!(stop_now || early || save_every)) return 0;
    prog->drop_rng = L->g.rng;   /* a checkpoint inside the epoch: prog->batch says where */
    int rc = L->on_epoch && on_writer(L->dist, L->writer ? L->on_epoch(prog, L->user) : 0) ? -1 : 0;
    if (stop_now || early || rc) L->done = 1;
    return rc ? -1 : L->done;
}

/* Step bi of the epoch's batches: forward and backward, the ranks' sum, the update, the report and what follows
 * the step inside the epoch. 1 when the epoch's batches end here (its last batch, or L->done), 0 to go on, -1 on an
 * error. */
static int train_batch(mt_loop *L, const tfm_batches *bt, int bi, int epoch) {
    const tfm_mt_train_opts *o = L->o;
    tfm_mt_progress *prog = L->prog;
    double t_step = tfm_now();
    int nb = bt->off[bi + 1] - bt->off[bi], n_tok;
    if (L->steps_this_run == 0) tfm_train_zero_grad(&L->g, &L->m->params);   /* later: the step releases them */
    double l = forward_backward(L, bt->idx + bt->off[bi], nb, &n_tok);
    float lv = (float)l;
    int stop_req = tfm_train_stop_requested(L->ctl);
    if (L->dist) {   /* the global loss, any rank's stop request, the summed gradients */
        if (tfm_train_dist_reduce(&L->g, L->dist, &L->m->params, &l, &stop_req)) return -1;
        lv = (float)l;
        L->stop_seen = stop_req;
    }
    float lr = tfm_mt_lr(o, prog->step, L->total, L->d_model);
    int bad = tfm_train_update(&L->g, &L->m->params, L->opt, lr, o->grad_clip,
                               L->ch.k && !L->dist ? &L->ch.norm : NULL, lv);
    L->t_steps += tfm_now() - t_step;
    prog->step++;
    prog->batch = bi + 1;
    L->steps_this_run++;
    if (bad && tfm_train_skip(L->ctl, prog->step, lv, &prog->skipped, L->writer)) return -1;
    if (!bad) {
        L->loss_sum += (double)lv * n_tok;
        L->tok_since += n_tok;
        L->tok_total += n_tok;
    }
    int last = bi == bt->n_batches - 1;
    int stop_now = (o->max_steps > 0 && prog->step >= o->max_steps) ||
                   (L->dist ? stop_req : tfm_train_stop_requested(L->ctl));
    if (L->report && L->writer && ((o->log_every > 0 && prog->step % o->log_every == 0) || last || stop_now))
        report_progress(L, epoch, last, lr);
    if (last) return 1;   /* the epoch's validation and checkpoint: end_epoch */
    return checkpoint_inside_epoch(L, epoch, stop_now);
}

/* After an epoch's last step: validation (--patience may stop) and the epoch's checkpoint. 0, or -1 on an error. */
static int end_epoch(mt_loop *L, int epoch) {
    const tfm_mt_train_opts *o = L->o;
    tfm_mt_progress *prog = L->prog;
    prog->epoch = epoch + 1;
    prog->batch = 0;
    prog->drop_rng = L->g.rng;
    if ((o->validate || L->on_epoch) &&
        check_before_save(L->m, &L->g, L->probe, L->opt, L->valid_set ? &L->epoch_valid : NULL, prog->step, L->dist))
        return -1;
    if (o->validate) {
        int v = on_writer(L->dist, L->writer ? o->validate(prog, epoch + 1, L->user) : 0);
        if (v < 0) return -1;
        if (v > 0) L->done = 1;   /* --patience: save this epoch's checkpoint, then stop */
    }
    if (L->on_epoch && on_writer(L->dist, L->writer ? L->on_epoch(prog, L->user) : 0)) return -1;
    if ((o->max_steps > 0 && prog->step >= o->max_steps) || (L->dist ? L->stop_seen : tfm_train_stop_requested(L->ctl)))
        L->done = 1;
    return 0;
}

/* One epoch: shuffle into batches (a mid-epoch checkpoint: the same shuffle again from the epoch's RNG, then skip
 * the batches done), their steps, then end_epoch. 0, or -1 on an error. */
static int run_epoch(mt_loop *L, int epoch) {
    const tfm_mt_train_opts *o = L->o;
    const tfm_mt_corpus *train = L->train;
    tfm_mt_progress *prog = L->prog;
    if (prog->batch > 0) prog->rng = prog->epoch_rng;
    else prog->epoch_rng = prog->rng;
    if (o->epoch_data && epoch_data(o, epoch, L->user, train, L->lens)) return -1;
    L->valid_set = 0;
    tfm_batches bt;
    if (o->max_tokens > 0 ? tfm_batches_by_tokens(&bt, train->n, train->src_valid, train->tgt_valid, o->max_tokens,
                                                  &prog->rng)
                          : tfm_batches_make(&bt, train->n, o->batch_size, L->lens, o->bucket, &prog->rng))
        return -1;
    if (prog->batch >= bt.n_batches) prog->batch = 0;
    if (o->epoch_data) L->total = steps_now(prog, bt.n_batches, o->epochs - epoch);
    int rc = 0;
    for (int bi = prog->batch; bi < bt.n_batches && !rc; bi++) rc = train_batch(L, &bt, bi, epoch);
    tfm_batches_free(&bt);
    if (rc < 0) return -1;
    return L->done ? 0 : end_epoch(L, epoch);
}

/* --profile: time per op kind and phase per step, as notes (rank 0). */
static void print_profile(mt_loop *L) {
    if (!L->o->profile || !L->steps_this_run || !L->writer) return;
    if (L->ch.k) tfm_train_pool_profile(&L->ch, &L->g);
    tfm_train_note_profile(L->ctl, &L->g, L->steps_this_run, L->t_steps);
}

int tfm_mt_train(tfm_mt_net *m, const tfm_mt_corpus *train, const tfm_mt_corpus *valid,
                 const tfm_mt_train_opts *o, tfm_adamw *opt, tfm_mt_progress *prog, tfm_mt_report_fn report,
                 tfm_mt_epoch_fn on_epoch, void *user) {
    mt_loop L = {.m = m, .train = train, .valid = valid, .o = o, .ctl = &o->ctl, .opt = opt, .prog = prog,
                 .report = report, .on_epoch = on_epoch, .user = user};
    if (check_steps(m, train, o, prog, &L.total) || loop_init(&L)) return -1;
    int rc = 0;
    for (int epoch = prog->epoch; epoch < o->epochs && !rc && !L.done; epoch++) rc = run_epoch(&L, epoch);
    rc = tfm_train_check_ranks(L.ctl, L.dist, &m->params, rc);
    print_profile(&L);
    loop_free(&L);
    return rc;
}
