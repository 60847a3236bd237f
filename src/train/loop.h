/* The pieces of a training loop both trainers share (train_lm.c, train_mt.c): the pool of chunks of thread data
 * parallelism, the update with its non-finite policy, the check before a save agreed by every rank, and the
 * end-of-run check that every rank holds the same parameters. Private to src/train (src/train/loop.c). */
#ifndef TFM_TRAIN_LOOP_H
#define TFM_TRAIN_LOOP_H

#include "tfm/train.h"

/* ---------------------------------------------------------------- the chunk pool */
/* Thread data parallelism (tfm_train_ctl.parallel): k chunks of a batch, each on its own graph and network, run
 * by one thread each with single-threaded kernels (tfm_train_chunks_run). Chunk 0 runs on the model itself, into
 * its gradients (released by the optimizer step), so the sum adds k - 1 buffers into them instead of k into
 * zeros; the others run on replicas (the model's weights, their own gradients). The gradients are summed in
 * chunk order (tfm_train_chunks_reduce): the bits do not depend on which thread ran what. */
typedef struct {   /* one chunk; 64-byte aligned so two threads never write one cache line */
    _Alignas(64) tfm_graph g;
    void *net;         /* chunk 0: the model itself; the others: a replica */
    double loss;       /* the chunk's share of the step's loss, written by the trainer */
} tfm_train_chunk_slot;

/* What the pool needs of a model family. */
typedef struct {
    void *(*replica)(void *model);       /* a network computing with model's weights (NULL with a tfm error) */
    void (*free_replica)(void *net);
    tfm_params *(*params)(void *net);
} tfm_train_net_ops;

typedef struct {
    int k;                        /* chunks; 0: none (one graph, the threads split each op) */
    tfm_train_chunk_slot *c;      /* (k) */
    tfm_params **p;               /* (k) the chunks' parameters */
    tfm_gemm_desk *desk;          /* the chunks' GEMMs, shared with threads that are done */
    float norm;                   /* the summed grads' norm (tfm_train_chunks_reduce) */
    const tfm_train_net_ops *ops;
} tfm_train_pool;

/* k chunks on model with worker graphs of g (k 0: an empty pool). 0, or -1 with a tfm error. */
int tfm_train_pool_init(tfm_train_pool *pl, const tfm_train_net_ops *ops, void *model, const tfm_graph *g, int k);
void tfm_train_pool_free(tfm_train_pool *pl);
/* The chunks' op profiles merged into g's (--profile). */
void tfm_train_pool_profile(tfm_train_pool *pl, tfm_graph *g);

/* --profile's table (tfm_profile_print of g over `steps` steps and `wall` seconds, then the arena's peak) as
 * ctl->note lines: the library writes nothing itself; without a note callback, nothing. */
void tfm_train_note_profile(const tfm_train_ctl *ctl, const tfm_graph *g, long steps, double wall);

/* ---------------------------------------------------------------- one step */
/* A training loop's graph: dropout RNG, profiling, the GEMM precision its chunks' worker graphs inherit, and the
 * gradients of intermediate tensors recycled (nothing reads one after the backward). */
void tfm_train_graph_init(tfm_graph *g, tfm_rng rng, int profile, int bf16);
/* The update of a step whose backward is done: a non-finite loss, or a non-finite gradient norm (norm: the chunks'
 * summed norm, or NULL to compute it), skips it with the gradients zeroed (no NaN reaches the weights or a
 * checkpoint); else clip + AdamW at lr (tfm_train_step_norm). Returns 1 when the step was skipped, else 0. */
int tfm_train_update(tfm_graph *g, tfm_params *p, tfm_adamw *opt, float lr, float grad_clip, const float *norm,
                     float loss);
/* --skip-nonfinite for a skipped step (step: its 1-based number; loss: the step's, to say what was not finite):
 * one more skipped batch past ctl->skip_nonfinite is -1 with the error, else 0 after a note (on the writer). */
int tfm_train_skip(const tfm_train_ctl *ctl, int step, float loss, int *skipped, int writer);

/* ---------------------------------------------------------------- several ranks */
/* tfm_train_check_before_save (what: the loss's description), and on several ranks rank 0's verdict for all.
 * 0, or -1 with the error. */
int tfm_train_check_before_save_all(tfm_dist *dist, int step, const tfm_params *p, const tfm_adamw *opt,
                                    const char *what, float loss);
/* At the end of a run that ended with rc (0 or -1): on several ranks, that every rank holds the same parameters
 * (a note with their hash on rank 0). Returns rc, or -1 when they differ. */
int tfm_train_check_ranks(const tfm_train_ctl *ctl, tfm_dist *dist, const tfm_params *p, int rc);

#endif
