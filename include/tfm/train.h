/* tfm train (workflow floor): optimizers, gradient clipping, learning-rate schedules, the shared training
 * step, and the two training loops shaped alike:
 *   tfm_lm_train   a GPT language model on a character corpus   (src/train/train_lm.c)
 *   tfm_mt_train   any tfm_mt_net translator on sentence pairs   (src/train/train_mt.c)
 * Both take options, an optimizer, a progress/state struct that a checkpoint carries for an exact resume,
 * a report callback (progress lines) and a checkpoint callback; both stop early once the run's global
 * optimizer step (counted from the start of the run, across resumes) reaches max_steps (0 = no limit), with
 * the state saved so that a resume continues with the same numbers. */
#ifndef TFM_TRAIN_H
#define TFM_TRAIN_H

#include <stdio.h>
#include <signal.h>

#include "tfm/bpe.h"
#include "tfm/checkpoint.h"
#include "tfm/core.h"
#include "tfm/dist.h"
#include "tfm/gpt.h"
#include "tfm/kernels.h"
#include "tfm/seq2seq.h"
#include "tfm/text.h"

/* AdamW (decoupled weight decay, PyTorch semantics). Weight decay applies only to parameters with
 * ndim >= 2 (matrices and embeddings), never to biases or norm weights. With weight_decay = 0 this
 * is Adam. Moments live in two blocks parallel to params->data. */
typedef struct {
    float beta1, beta2, eps, weight_decay;
    float *m, *v;
    size_t n;
    int t;                   /* steps taken */
    float *ema;              /* NULL, or the weights' moving average (tfm_adamw_ema_init), parallel to params->data */
    float ema_decay;
} tfm_adamw;

/* 0, or -1 with a tfm error (out of memory; an int8 model, which cannot be trained). */
TFM_API int tfm_adamw_init(tfm_adamw *o, const tfm_params *p, float beta1, float beta2, float eps, float weight_decay);
TFM_API void tfm_adamw_step(tfm_adamw *o, tfm_params *p, float lr);
/* The training loops' step: AdamW on grad * grad_scale (the same float products as scaling the grads
 * first, so the same bits as tfm_clip_grad_norm + tfm_adamw_step), and with zero_grad the grads are
 * zeroed as they are read: one pass over the parameters instead of three. */
TFM_API void tfm_adamw_step_fused(tfm_adamw *o, tfm_params *p, float lr, float grad_scale, int zero_grad);
TFM_API void tfm_adamw_free(tfm_adamw *o);
/* An exponential moving average of the weights beside the optimizer (Polyak averaging; Marian's
 * --exponential-smoothing, fairseq's --ema-decay): after every step, ema += (1 - d_t) (w - ema) with
 * d_t = min(decay, (1 + t) / (10 + t)) (t the steps taken: early on the average follows the weights, as
 * TensorFlow's ExponentialMovingAverage with num_updates). It starts as p's current weights; a checkpoint carries
 * it (adam.ema.<name>, required back by tfm_ckpt_get_adamw once enabled). 0, or -1 with a tfm error (decay not in
 * (0, 1), out of memory). */
TFM_API int tfm_adamw_ema_init(tfm_adamw *o, const tfm_params *p, float decay);
/* adam.m.<name>, adam.v.<name>, adam.t (and adam.ema.<name> with the average) in a checkpoint; o must already be
 * initialised for p (and its average enabled if the run has one). */
TFM_API void tfm_ckpt_put_adamw(tfm_container *c, const tfm_adamw *o, const tfm_params *p);
TFM_API int tfm_ckpt_get_adamw(const tfm_container *c, tfm_adamw *o, const tfm_params *p, const char *path);

/* Global L2 norm of all grads; if it exceeds max_norm (> 0), scale grads by max_norm/(norm+1e-6)
 * (torch.nn.utils.clip_grad_norm_). Returns the norm before clipping. */
TFM_API float tfm_clip_grad_norm(tfm_params *p, float max_norm);
/* The norm alone (fixed block order: the same bits for any thread count), and the factor
 * clip_grad_norm_ multiplies the grads by: max_norm / (norm + 1e-6) if norm > max_norm > 0, else 1. */
TFM_API float tfm_grad_norm(const tfm_params *p);
TFM_API float tfm_clip_coef(float norm, float max_norm);

/* Linear warmup then cosine decay (nanoGPT):
 *   it < warmup:      lr * (it+1) / (warmup+1)
 *   it > max_iters:   min_lr
 *   otherwise:        min_lr + 0.5 (1 + cos(pi (it-warmup)/(max_iters-warmup))) (lr - min_lr) */
TFM_API float tfm_lr_cosine(int it, float lr, float min_lr, int warmup, int max_iters);
/* "Noam" inverse-square-root schedule: scale * d_model^-0.5 * min((it+1)^-0.5, (it+1) warmup^-1.5) */
TFM_API float tfm_lr_noam(int it, float scale, int d_model, int warmup);

/* ---------------------------------------------------------------- the shared training step */
/* After the backward of a step: clip coefficient from the global grad norm (grad_clip > 0), then fused
 * AdamW at lr on the clipped grads, which it then releases for the next step (tfm_params_release_grad:
 * the next backward assigns them; tfm_params_settle_grad, which this step and the reductions below call
 * first, zeroes any that no backward wrote). Times the clip and optimizer phases when g->profile. Both
 * training loops call this; before the first step of a run they zero the grads (tfm_train_zero_grad). */
TFM_API void tfm_train_zero_grad(tfm_graph *g, tfm_params *p);
/* Thread data parallelism, after the chunks (begun at t0 = tfm_profile_begin(g)): their wall time goes to
 * the profile, then grads of p += the k replicas' grads (summed in replica order, so the bits do not depend
 * on which thread ran which chunk), which are then released for the next step. A replica may be p itself (its
 * chunk computed straight into p's grads, which saves reading and zeroing one copy of the gradients): it is
 * skipped. Returns the global grad norm of the sum (tfm_grad_norm's bits, computed block by block as the sum
 * is formed), for tfm_train_step_norm; stale once anything else changes the grads (a distributed sum). */
TFM_API float tfm_train_chunks_reduce(tfm_graph *g, double t0, tfm_params *p, tfm_params *const *reps, int k);
/* Thread data parallelism's per-chunk state: *chunks = k zeroed 64-byte-aligned elements of `size` bytes
 * (a multiple of 64), *params = k pointers, *desk = a GEMM desk of k slots for tfm_train_chunks_run (free
 * it with tfm_gemm_desk_free); 0, or -1 (out of memory, tfm error, nothing allocated). */
TFM_API int tfm_train_chunks_alloc(void **chunks, size_t size, tfm_params ***params, tfm_gemm_desk **desk, int k);
/* A chunk's graph is tfm_graph_init_worker(chunk, g); tfm_profile_merge moves its --profile times into g. */
/* Runs run(ctx, i) for the k chunks i of a step on tfm_get_threads() threads (each chunk on one thread,
 * its kernels single-threaded, threads taking chunks as they become free). With a desk
 * (tfm_gemm_desk_new(k), kernels.h), a thread that has no chunk left helps the others with their GEMMs
 * until every chunk is done; NULL: it waits. */
typedef void (*tfm_chunk_fn)(void *ctx, int i);
TFM_API void tfm_train_chunks_run(tfm_gemm_desk *desk, int k, tfm_chunk_fn run, void *ctx);
/* Chunk c of k of the samples [start, start + count): [*c0, *c0 + *cn), sizes differing by at most one. */
TFM_API void tfm_train_chunk(int start, int count, int k, int c, int *c0, int *cn);
/* Returns 0; or, when the global grad norm is not finite, -1 without touching the weights or the optimizer
 * (the grads are zeroed for the next step), so a non-finite gradient never reaches a checkpoint. After a 0,
 * p->grad is released (see above): call tfm_params_settle_grad before reading it after the next backward. */
TFM_API int tfm_train_step(tfm_graph *g, tfm_params *p, tfm_adamw *opt, float lr, float grad_clip);
/* The same with p's global grad norm already known (tfm_train_chunks_reduce returns it, with the bits
 * tfm_grad_norm gives), or NULL: computed here. */
TFM_API int tfm_train_step_norm(tfm_graph *g, tfm_params *p, tfm_adamw *opt, float lr, float grad_clip, const float *known);

/* Before any checkpoint save: the weights, and the AdamW moments when opt is not NULL, all finite (and the
 * second moments >= 0). 0, or -1 with an error naming the tensor, the value and its index (a diverged run: the
 * loops then stop without saving). */
TFM_API int tfm_train_check_saveable(const tfm_params *p, const tfm_adamw *opt);
/* The check both loops make before any save (periodic, evaluation, --keep-best, stop, end of run): the weights
 * and moments (tfm_train_check_saveable), then `loss`, the loss the weights to be saved give (an evaluation's,
 * or one sample's), finite: weights can be finite and still give NaN (huge values overflow a layer norm).
 * loss_what names that loss in the message. 0, or -1 with "step N: <what is not finite>: the weights diverged
 * (not saved); try a lower --lr". */
TFM_API int tfm_train_check_before_save(int step, const tfm_params *p, const tfm_adamw *opt, const char *loss_what,
                                        float loss);

/* What the caller of a training loop controls while it runs (both loops; all fields 0/NULL = off). */
typedef struct {
    const volatile sig_atomic_t *stop;   /* when *stop becomes non-zero (e.g. set by a SIGINT handler the
                                            caller owns), the loop finishes the current step, saves, returns */
    const volatile sig_atomic_t *stop_self;   /* the same, set by the caller's own callbacks (a failed log write) */
    int save_every;          /* > 0: save (through the loop's callback) every N optimizer steps */
    int skip_nonfinite;      /* batches whose loss or grad norm is not finite that are skipped (no update)
                                before the run stops with an error naming the step */
    tfm_dist *dist;          /* data parallel across the ranks of mpirun (docs/DISTRIBUTED.md); NULL or one
                                rank: one process. The batch size stays global: every rank draws the whole
                                batch, computes its slice, the gradients are summed, every rank makes the same
                                update; only rank 0 reports and saves. */
    int parallel;            /* how the threads share a step (tfm_parallel, below) */
    int bf16;                /* --precision bf16: the linear layers' GEMMs take bfloat16 operands, fp32 sums
                                (tfm_graph.gemm_bf16); weights, optimizer state and evaluation stay fp32 */
    /* The loops' notes (a skipped non-finite batch, the ranks' parameter check), one line each without the
     * newline; NULL: none. The library prints nothing itself. */
    void (*note)(const char *line, void *user);
    void *note_user;
} tfm_train_ctl;
/* Has either stop flag been raised? */
TFM_API int tfm_train_stop_requested(const tfm_train_ctl *ctl);
/* ctl->note(formatted line) when there is a note callback. */
TFM_API void tfm_train_note(const tfm_train_ctl *ctl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* TFM_PARALLEL_BATCH: thread data parallelism. The (rank's) batch is cut into one chunk per thread, each
 * computed by one thread with single-threaded kernels on its own replica of the model (shared weights, its
 * own gradients) and graph; the gradients are summed in chunk order, so the bits depend on the thread
 * count, never on scheduling. One barrier per micro-batch instead of several per op: faster on 2 cores and
 * no slower than one thread when another program takes a core (docs/BENCHMARKS.md). TFM_PARALLEL_OPS: the
 * threads split every op. TFM_PARALLEL_AUTO (0): batch with >= 2 threads and >= 2 samples per rank, else ops. */
typedef enum { TFM_PARALLEL_AUTO = 0, TFM_PARALLEL_OPS = 1, TFM_PARALLEL_BATCH = 2 } tfm_parallel;
/* The number of chunks a step of `slice` samples is cut into (0: the ops are split instead). */
TFM_API int tfm_train_chunks(int parallel, int threads, int slice);

/* Checkpoint files around PATH (src/train/ckpt_files.c). Removes PATH.tmp.<pid> files left by processes
 * that no longer run (a kill during a save); returns how many were removed. */
TFM_API int tfm_ckpt_remove_stale_tmp(const char *path);
/* --keep-last: hard-links PATH to PATH-without-.tfm.step<step>.tfm, then removes all but the newest
 * keep such files. 0, or -1 with a tfm error naming the file. */
TFM_API int tfm_ckpt_keep_step(const char *path, int step, int keep);
/* A file beside PATH: PATH without a final .tfm, then suffix (".step12.tfm", train-mt --ema-decay's ".ema.tfm"),
 * into out (n bytes). */
TFM_API void tfm_ckpt_sibling(const char *path, const char *suffix, char *out, size_t n);

/* The complete configuration of a run as (name, value) text pairs, stored as run.<name> entries in every
 * checkpoint so that --resume takes everything from it and can refuse a flag that would change the run
 * (src/train/run_config.c). The CLI builds it from its flag table: a new flag is registered by being in
 * the table. Data files are recorded as "data:<flag>" = tfm_file_fingerprint. */
typedef struct {
    char **name, **value;
    int n, cap;
} tfm_run_config;
/* Adds or replaces name = value (copied). 0, or -1 (out of memory). */
TFM_API int tfm_run_config_set(tfm_run_config *c, const char *name, const char *value);
TFM_API const char *tfm_run_config_find(const tfm_run_config *c, const char *name);   /* NULL if absent */
TFM_API void tfm_run_config_free(tfm_run_config *c);
TFM_API void tfm_run_config_put(tfm_container *k, const tfm_run_config *c);
TFM_API int tfm_run_config_get(const tfm_container *k, tfm_run_config *c);   /* empty for older checkpoints */
TFM_API int tfm_run_config_load(tfm_run_config *c, const char *path);        /* the run.* entries of a checkpoint */
/* "N bytes, fnv1a64 HEX" of a file's contents. 0, or -1 with a tfm error naming the file. */
TFM_API int tfm_file_fingerprint(const char *path, char *buf, size_t n);

/* ---------------------------------------------------------------- data parallel (src/train/dist_train.c) */
/* d if it has more than one rank, else NULL (the loops then run exactly the one-process code). */
TFM_API tfm_dist *tfm_train_dist(const tfm_train_ctl *ctl);
/* Start of a run on every rank: the configuration (every run.* pair and the step it starts from) must hash
 * equally on every rank, then rank 0's parameters and AdamW state go to all. 0 or -1 (tfm error). */
TFM_API int tfm_train_dist_start(tfm_dist *d, const tfm_run_config *run, long step, tfm_params *p, tfm_adamw *opt);
/* After this rank's backward: loss[0] (this rank's share of the step's loss; the sum over ranks is the
 * global loss) and *stop (the local stop request) become the sums over ranks (stop: any rank asked); when
 * the summed loss is finite the gradient block is summed too. Profiled as dist_wait (a barrier, only with
 * g->profile) and allreduce. 0 or -1 (a collective failed: a rank died or hangs). */
TFM_API int tfm_train_dist_reduce(tfm_graph *g, tfm_dist *d, tfm_params *p, double *loss, int *stop);
/* Every rank gets rank 0's value of v (a save's or a validation's result). -1 if the collective failed
 * (then *v is -1 too). */
TFM_API int tfm_train_dist_agree(tfm_dist *d, int *v);
/* The end of a run: every rank hashes its parameters (FNV-1a 64 of the bytes, written to hash as 16 hex
 * digits) and the hashes must be equal; -1 with "parameters differ between ranks ..." otherwise. */
TFM_API int tfm_train_dist_check_params(tfm_dist *d, const tfm_params *p, char *hash, size_t n);

/* ---------------------------------------------------------------- language models (src/train/lm_data.c, train_lm.c) */
/* A corpus split into train (first frac) and validation (rest): characters, or BPE pieces. */
typedef struct {
    tfm_char_vocab vocab;    /* character corpora (empty for BPE: tfm_lm_data_load_bpe) */
    int *ids;                /* all tokens */
    int n;
    int n_train;             /* ids[0..n_train) train, ids[n_train..n) validation */
    long chars_train, chars_val;   /* characters (code points) behind each split: loss per character =
                                      loss per token * tokens / characters (equal for a character corpus) */
} tfm_lm_data;

/* Reads PATH (UTF-8 text), builds the vocabulary (or uses `vocab` if given, e.g. on --resume),
 * encodes, splits. Errors (named file): unreadable, empty, binary, invalid UTF-8, or a split
 * shorter than block_size + 1 tokens. */
TFM_API int tfm_lm_data_load(tfm_lm_data *d, const char *path, const char *vocab_chars, float train_frac,
                             int block_size);
TFM_API void tfm_lm_data_free(tfm_lm_data *d);
/* The same through a BPE model (train-lm --tokenizer bpe): the text is cut at the first line start after
 * train_frac of its characters, and each part encoded with tfm_bpe_encode_text. */
TFM_API int tfm_lm_data_load_bpe(tfm_lm_data *d, const char *path, const tfm_bpe *bpe, float train_frac, int block_size);
/* A BPE model of vocab_size pieces (tfm_bpe_learn_lines) learned from the lines of the first train_frac of the
 * text at path (the part tfm_lm_data_load_bpe trains on). 0, or -1 with a tfm error naming the file. */
TFM_API int tfm_lm_bpe_learn(tfm_bpe *bpe, const char *path, float train_frac, int vocab_size);
/* B random windows of T+1 tokens from the split (0 train, 1 val): x (B,T) inputs, y (B,T) next tokens. */
TFM_API void tfm_lm_get_batch(const tfm_lm_data *d, int split, tfm_rng *r, int B, int T, int *x, int *y);
/* 0 if a training step of batch_size rows of block_size tokens fits TFM_MAX_STEP_ELEMS (tfm_gpt_step_elems),
 * else -1 with an error naming --batch-size and --block-size. tfm_lm_train calls it before allocating. */
TFM_API int tfm_lm_step_check(const tfm_gpt_config *c, int batch_size);
/* Mean loss over n_batches random batches of the split (eval mode, no grad); NAN with a tfm error if out
 * of memory. */
TFM_API float tfm_lm_estimate_loss(tfm_gpt *m, tfm_graph *g, const tfm_lm_data *d, int split, int n_batches, int B,
                           int T, uint64_t seed);

/* Training hyperparameters and progress, stored in checkpoints so --resume continues exactly. */
typedef struct {
    int iters, batch_size, grad_accum, warmup, eval_every, eval_iters, seed;
    float lr, min_lr, weight_decay, beta1, beta2, grad_clip;
    int iter;                /* iterations completed */
    uint64_t batch_rng, dropout_rng;
    float last_val_loss;
} tfm_lm_train_state;

/* The bounds of train-lm's hyperparameters, the same on the command line and in a checkpoint's train.*:
 * iters and warmup, batch size, micro-batches a step, and the batches an evaluation averages (each evaluation
 * runs 2 x eval_iters forward passes of a batch: the bound keeps one evaluation within a few thousand steps). */
#define TFM_LM_MAX_ITERS 100000000
#define TFM_LM_MAX_BATCH 65536
#define TFM_LM_MAX_GRAD_ACCUM 65536
#define TFM_LM_MAX_EVAL_ITERS 10000
/* Range and cross checks of a training state for a model config (B*T bounded, eval_every >= 1,
 * grad_accum and eval_iters small enough not to hang, finite lr > 0, betas in [0,1), RNG states
 * non-zero, iter <= iters, ...): 0, or -1 with a one-line tfm error naming the field
 * ("train.grad_accum must be in 1..65536, got 2147483647"). Used on load and for train-lm's flags (one set of
 * bounds: a run the flags accept is a checkpoint the loader accepts). */
TFM_API int tfm_lm_train_state_check(const tfm_lm_train_state *st, const tfm_gpt_config *cfg);

/* Checkpoint: config, tokenizer, params; and when opt/st are given, optimizer and training state. */
TFM_API int tfm_gpt_save(const tfm_gpt *m, const tfm_char_vocab *v, const tfm_adamw *opt, const tfm_lm_train_state *st,
                 const char *path);
/* The same with the run configuration (run.* entries; run may be NULL). */
TFM_API int tfm_gpt_save_run(const tfm_gpt *m, const tfm_char_vocab *v, const tfm_adamw *opt, const tfm_lm_train_state *st,
                     const tfm_run_config *run, const char *path);
/* Loads model and vocabulary; if opt/st are non-NULL, also the training state (error if absent).
 * opt is initialised here. v may be NULL: the model only, whatever its tokenizer (tokenizer.chars, or an
 * imported GPT-2's tokenizer.kind "gpt2" entries, read by the caller). With v, a checkpoint without a
 * character vocabulary is an error naming its tokenizer.kind. */
TFM_API int tfm_gpt_load(tfm_gpt *m, tfm_char_vocab *v, tfm_adamw *opt, tfm_lm_train_state *st, const char *path);
/* The same from an already loaded container (path: for error messages). A BPE language model is refused by
 * these two (their callers hold a character vocabulary): tfm_gpt_load_tok reads both kinds. */
TFM_API int tfm_gpt_get(tfm_gpt *m, tfm_char_vocab *v, tfm_adamw *opt, tfm_lm_train_state *st, const tfm_container *c,
                const char *path);
/* BPE language models: tokenizer.kind "bpe" and tokenizer.bpe (the SentencePiece model) instead of
 * tokenizer.chars. save_tok stores bpe when it is non-NULL, else v's characters. load_tok reads either kind:
 * *bpe = NULL and v filled for a character model, else *bpe malloc'd (free with tfm_bpe_free + free) and v
 * empty. */
TFM_API int tfm_gpt_save_tok(const tfm_gpt *m, const tfm_char_vocab *v, const tfm_bpe *bpe, const tfm_adamw *opt,
                             const tfm_lm_train_state *st, const tfm_run_config *run, const char *path);
TFM_API int tfm_gpt_load_tok(tfm_gpt *m, tfm_char_vocab *v, tfm_bpe **bpe, tfm_adamw *opt, tfm_lm_train_state *st,
                             const char *path);
TFM_API int tfm_gpt_get_tok(tfm_gpt *m, tfm_char_vocab *v, tfm_bpe **bpe, tfm_adamw *opt, tfm_lm_train_state *st,
                            const tfm_container *c, const char *path);

/* Progress report of tfm_lm_train: every step (eval 0), and after each evaluation (eval 1, train/val losses). */
typedef struct {
    int step, steps;         /* steps done (this and earlier runs), total */
    float loss, lr;          /* this step's loss (mean over micro-batches), its learning rate */
    float tokens_per_s, eta_s;
    int eval;                /* 1: an evaluation line (train_loss, val_loss set) */
    float train_loss, val_loss;
    double train_s;          /* seconds spent in the training steps of this run so far */
} tfm_lm_report;
typedef void (*tfm_lm_report_fn)(const tfm_lm_report *r, void *user);
/* Called after each evaluation and when a max_steps stop ends the run, with the state to save
 * (st->batch_rng / dropout_rng up to date): usually tfm_gpt_save(m, vocab, opt, st, path). Non-zero
 * stops training with that error. */
typedef int (*tfm_lm_save_fn)(const tfm_lm_train_state *st, void *user);

/* Start a fresh run with the hyperparameters already in st: iter 0, no val loss yet, the batch and dropout
 * RNGs seeded from st->seed (as train-lm always has). */
TFM_API void tfm_lm_train_state_init(tfm_lm_train_state *st);
/* train-lm's defaults (iters 2000, batch 12, grad_accum 1, warmup 100, eval every 500 over 20 batches,
 * seed 1, lr 1e-3 -> 1e-4, weight decay 0.1, betas 0.9 / 0.99, grad clip 1), then _init. */
TFM_API void tfm_lm_train_state_default(tfm_lm_train_state *st);
/* Train m on d from st->iter to st->iters (cosine schedule with warmup, grad accumulation, clipping,
 * fused AdamW); evaluate every st->eval_every steps and at the end; max_steps > 0 stops (evaluating and
 * saving) once st->iter, the run's global step counted across resumes, reaches max_steps. opt initialised for m->params (or restored by tfm_gpt_load). profile: print the
 * op/phase times per step at the end to stderr. Returns the number of steps run, or -1 with a tfm error
 * (loss not finite, save failed). */
TFM_API int tfm_lm_train(tfm_gpt *m, const tfm_lm_data *d, tfm_adamw *opt, tfm_lm_train_state *st, int max_steps,
                 int profile, const tfm_train_ctl *ctl, tfm_lm_report_fn report, tfm_lm_save_fn save, void *user);

/* ---------------------------------------------------------------- training (src/train/train_mt.c) */
typedef enum { TFM_SCHED_NOAM = 0, TFM_SCHED_COSINE, TFM_SCHED_CONSTANT } tfm_sched_kind;
/* TOKENS: mean cross-entropy over the valid target tokens of the batch.
 * D2L:    d2l's MaskedSoftmaxCELoss + l.sum(): per sentence the sum of its valid-token losses divided by
 *         the batch's target length Tt, summed over the batch (= token mean * n_tokens / Tt). Tt is
 *         num_steps, as in the book, when the model pads to it (tfm_mt_config.pad_len), else the batch's
 *         longest target. With gradient clipping this gives different updates from TOKENS; it is what the
 *         d2l recipes train with. */
typedef enum { TFM_LOSS_TOKENS = 0, TFM_LOSS_D2L = 1 } tfm_loss_norm;

struct tfm_mt_progress;
typedef struct {
    int epochs, batch_size, num_steps;   /* num_steps: padded length of source and target */
    float lr;                /* peak lr (constant/cosine) or Noam scale */
    int schedule;            /* tfm_sched_kind */
    int warmup;              /* steps */
    float min_lr;            /* cosine floor */
    float label_smoothing, grad_clip, weight_decay;
    float beta1, beta2, eps;
    uint64_t seed;
    int bucket;              /* tfm_batches_make bucket factor (0 = no bucketing) */
    int loss_norm;           /* tfm_loss_norm: how the batch loss is normalised before backward */
    int log_every;           /* steps between progress lines (0: one per epoch) */
    int quiet;
    int profile;             /* at the end, print time per op kind and phase per step to stderr */
    int max_steps;           /* > 0: stop once prog->step, the run's global optimizer step counted across
                                resumes, reaches it (on_epoch is called with the position inside the
                                epoch, prog->batch) */
    tfm_train_ctl ctl;       /* stop flag, --save-every, --skip-nonfinite */
    /* issue 10 */
    int max_tokens;          /* > 0: token-budget batches (tfm_batches_by_tokens) instead of batch_size */
    int valid_every;         /* > 0: call validate every N steps as well as after each epoch */
    /* Validation hook (NULL: none), called after each epoch (before on_epoch) and every valid_every steps,
     * with the user pointer of tfm_mt_train: 0 continue, 1 stop training now (--patience; on_epoch still
     * saves, inside an epoch with its position, so a resume continues there), -1 error. */
    int (*validate)(const struct tfm_mt_progress *p, int epoch, void *user);
    /* issue 35 */
    float rdrop;             /* > 0: R-Drop with this alpha (tfm_mt_net_rdrop_loss: two passes per batch); 0: one */
    float ema_decay;         /* > 0: the optimizer keeps an average of the weights (tfm_adamw_ema_init); 0: none */
    /* Called (NULL: never) with tfm_mt_train's user pointer at the start of every epoch, the one a resume continues
     * included, before its batches are made: it may rewrite the training arrays in place (the same n and
     * num_steps; BPE-dropout's segmentation of the epoch, tfm_mt_corpus_bpe_dropout). 0, or -1 with an error. */
    int (*epoch_data)(int epoch, void *user);
} tfm_mt_train_opts;
TFM_API void tfm_mt_train_opts_default(tfm_mt_train_opts *o);
/* lr of step `it` (0-based) for these options; total = total number of steps (cosine). */
TFM_API float tfm_mt_lr(const tfm_mt_train_opts *o, int it, int total, int d_model);

/* Training state carried by a checkpoint for --resume. */
typedef struct tfm_mt_progress {
    int epoch;               /* epochs completed */
    int step;                /* optimizer steps taken */
    tfm_rng rng;             /* batch shuffling RNG after `epoch` epochs */
    tfm_rng drop_rng;        /* dropout RNG */
    int batch;               /* batches of epoch `epoch` already done (a mid-epoch checkpoint), else 0 */
    tfm_rng epoch_rng;       /* the shuffling RNG at the start of epoch `epoch`: the same batches again */
    int skipped;             /* non-finite batches skipped so far (--skip-nonfinite) */
} tfm_mt_progress;

/* Token-budget batches of n sentence pairs (src/train/batching.c), as fairseq / Marian: pairs sorted by
 * max(src_len, tgt_len) (ties in random order when rng != NULL), cut greedily so that
 * rows x that length <= max_tokens (source and target tokens of the padded batch, padding included),
 * then the batch order shuffled (rng). The number of batches does not depend on rng. A pair longer
 * than max_tokens is an error. */
TFM_API int tfm_batches_by_tokens(tfm_batches *b, int n, const int *src_len, const int *tgt_len, int max_tokens,
                          tfm_rng *rng);

/* ---------------------------------------------------------------- validation (src/train/validate.c) */
/* --keep-best / --patience: the best score so far and the validations since it. */
typedef struct {
    float best;              /* -inf before the first validation */
    int best_step;           /* step of the best score, -1 before */
    int n_bad;               /* validations since the last improvement */
    int patience;            /* stop after this many validations without improvement (0 = never) */
} tfm_early_stop;
enum { TFM_VALID_IMPROVED = 1, TFM_VALID_STOP = 2 };
TFM_API void tfm_early_stop_init(tfm_early_stop *e, int patience);
/* One validation: TFM_VALID_IMPROVED when score is finite and strictly above the best (the best is then
 * updated), else TFM_VALID_STOP once patience validations in a row did not improve, else 0. */
TFM_API int tfm_early_stop_update(tfm_early_stop *e, float score, int step);

/* Progress callback (called every log_every steps and at the end of each epoch). */
typedef struct {
    int epoch, epochs, step, total_steps;
    float loss;              /* mean token loss since the last report */
    float lr, tokens_per_s, eta_s;
    float valid_loss;        /* < 0 if none / not at the end of an epoch */
    int end_of_epoch;
} tfm_mt_report;
typedef void (*tfm_mt_report_fn)(const tfm_mt_report *r, void *user);
/* Called after each epoch, every ctl.save_every steps, and at a stop (max_steps or *ctl.stop) to save a
 * checkpoint (p->batch > 0: inside an epoch); non-zero return stops training with error. */
typedef int (*tfm_mt_epoch_fn)(const tfm_mt_progress *p, void *user);

/* --log-file (src/train/mt_log.c): one JSON object per line as docs/LOGS.md describes ("event" "train"
 * with step, epoch, loss, lr, tokens_per_s; "valid" with valid_loss, valid_bleu, valid_chrf, best_bleu
 * and the checkpoint written, if any), non-finite values as null, flushed per line. f NULL: nothing. Each
 * returns 0, or -1 when the line could not be written (errno: why; a full disk), so a caller can stop the run
 * instead of losing the log silently. */
TFM_API int tfm_mt_log_report(FILE *f, const tfm_mt_report *r);
TFM_API int tfm_mt_log_valid(FILE *f, int step, int epoch, float valid_loss, float valid_bleu, float valid_chrf,
                     float best_bleu, const char *checkpoint);
/* train-lm's lines in the same schema: a progress report as "train" (step, loss = the mean given since the
 * previous line, lr, tokens_per_s); an evaluation (r->eval) as "valid" (loss = train loss, valid_loss). */
TFM_API int tfm_lm_log_report(FILE *f, const tfm_lm_report *r, float loss);

/* Train m on the arrays (teacher forcing, masked CE with ignore_index <pad>, label smoothing, AdamW,
 * schedule, clipping). valid may be NULL. opt must be initialised for m->params (and may carry
 * restored moments); prog carries the state to resume from (zeroed + seeded for a fresh run:
 * tfm_mt_progress_init). Returns 0, or -1 with a tfm error. */
TFM_API void tfm_mt_progress_init(tfm_mt_progress *p, uint64_t seed);
/* 0 if the largest batch of `a` under o (--batch-size rows, or --max-tokens) fits TFM_MAX_STEP_ELEMS
 * (tfm_mt_step_elems on the longest source and target row), else -1 with an error naming the flags.
 * tfm_mt_train calls it before allocating. */
TFM_API int tfm_mt_step_check(const tfm_mt_config *c, const tfm_mt_corpus *a, const tfm_mt_train_opts *o);
TFM_API int tfm_mt_train(tfm_mt_net *m, const tfm_mt_corpus *train, const tfm_mt_corpus *valid,
                 const tfm_mt_train_opts *o, tfm_adamw *opt, tfm_mt_progress *prog, tfm_mt_report_fn report,
                 tfm_mt_epoch_fn on_epoch, void *user);
/* Mean token loss (no label smoothing, no dropout) over a data set. */
TFM_API float tfm_mt_eval_loss(tfm_mt_net *m, tfm_graph *g, const tfm_mt_corpus *data, int batch_size);

/* train.* entries for --resume */
TFM_API void tfm_mt_progress_put(tfm_container *c, const tfm_mt_progress *p);
TFM_API int tfm_mt_progress_get(const tfm_container *c, tfm_mt_progress *p);

/* The model of a translator whose vocabularies are set: cfg with their sizes, created and initialised
 * from seed. On error t is freed. Used by both builders below. */
TFM_API int tfm_mt_model_create(tfm_mt_model *t, const tfm_mt_config *cfg, uint64_t seed);
/* A fresh translator: vocabularies of p's sides (tokens seen >= min_freq times), cfg with their sizes,
 * the model built (tfm_mt_net_create) and initialised from seed. 0, or -1 with a tfm error. */
TFM_API int tfm_mt_model_build(tfm_mt_model *t, const tfm_parallel_text *p, int tok_kind, int min_freq,
                         const tfm_mt_config *cfg, uint64_t seed);
/* A fresh translator on raw text (src/train/mt_bpe.c): bpe (must have the tfm specials, see tfm_bpe_vocab)
 * becomes both vocabularies and is owned by t from then on (freed with it, also on failure). */
TFM_API int tfm_mt_model_build_bpe(tfm_mt_model *t, tfm_bpe *bpe, const tfm_mt_config *cfg, uint64_t seed);
/* p (loaded with TFM_TOK_BPE: one raw line per side) encoded with t->bpe into padded arrays. */
TFM_API int tfm_mt_corpus_from_text_bpe(const tfm_parallel_text *p, const tfm_mt_model *t, int num_steps, tfm_mt_corpus *a);
/* p through t's vocabularies (or t->bpe) into padded training arrays of num_steps tokens (truncation
 * counted in a). */
TFM_API int tfm_mt_corpus_from_text(const tfm_parallel_text *p, const tfm_mt_model *t, int num_steps, tfm_mt_corpus *a);
/* BPE-dropout (train-mt --bpe-dropout, src/train/mt_bpe.c): the arrays of a raw-text corpus p, built before by
 * tfm_mt_corpus_from_text (a->n == p->n), rewritten in place with each sentence segmented by tfm_bpe_encode_dropout with
 * probability p_drop and the key tfm_bpe_dropout_key(seed, epoch, 2 * pair + side): a new segmentation per epoch,
 * the same for the same seed and epoch whatever the thread count. Sentences longer than a->num_steps are cut
 * (a->n_truncated_* count them). enc: n_enc encoders (tfm_bpe_encoder_new), at most that many threads, each using
 * its own: kept from epoch to epoch, they allocate nothing once warm; NULL: one made and freed per call. 0, or -1
 * with an error. */
TFM_API int tfm_mt_corpus_bpe_dropout(const tfm_parallel_text *p, const tfm_mt_model *t, float p_drop, uint64_t seed,
                                      int epoch, tfm_bpe_encoder *const *enc, int n_enc, tfm_mt_corpus *a);
/* Translation checkpoints with training state (src/train/mt_checkpoint.c): the translator (tfm_mt_model_put),
 * the AdamW moments, train.epoch/step/rng/drop_rng, train.max_len = o->num_steps and train.seed = o->seed. */
TFM_API int tfm_mt_save(const tfm_mt_model *t, const tfm_adamw *opt, const tfm_mt_progress *p, const tfm_mt_train_opts *o,
                const char *path);
TFM_API int tfm_mt_save_run(const tfm_mt_model *t, const tfm_adamw *opt, const tfm_mt_progress *p, const tfm_mt_train_opts *o,
                    const tfm_run_config *run, const char *path);   /* with run.* entries (run may be NULL) */
/* t's model with `weights` (a block parallel to its parameters, e.g. tfm_adamw.ema) in place of its own and no
 * optimizer or training state: a model for translate, with `note` as meta.ema. swap (params.total floats) holds
 * t's own weights meanwhile; they are back when this returns. 0, or -1 with a tfm error. */
TFM_API int tfm_mt_save_weights(tfm_mt_model *t, const float *weights, float *swap, const char *note,
                                const char *path);
/* The reverse: t, p, and opt initialised with o's beta1/beta2/eps/weight_decay and the saved moments.
 * 0, or -1 with a tfm error naming the file. */
TFM_API int tfm_mt_resume(tfm_mt_model *t, tfm_adamw *opt, tfm_mt_progress *p, const tfm_mt_train_opts *o,
                  const char *path);

#endif
