/* tfm dist (core floor): data-parallel communication between processes (Open MPI).
 *
 * Built without MPI (the default) every function is the single-process version: one rank, rank 0,
 * collectives are no-ops that succeed. `make MPI=1` compiles src/core/dist.c with -DTFM_MPI and links
 * Open MPI; the same calls then run across the ranks of `mpirun -np N`.
 *
 * Semantics the training step relies on (docs/DISTRIBUTED.md):
 *   - tfm_dist_allreduce_sum is deterministic and equal on every rank: element i becomes
 *     ((g_0[i] + g_1[i]) + g_2[i]) + ... + g_{N-1}[i], summed left to right in rank order in float,
 *     whatever the bucket size (a reduce-scatter by alltoall, where the owner of a chunk adds the N
 *     pieces in rank order, then an allgather). Same N and inputs: same bits.
 *   - Every collective waits with a timeout (opts.timeout_s): when a rank dies or hangs the others
 *     return -1 with a one-line message instead of blocking forever (the communicator uses
 *     MPI_ERRORS_RETURN, so MPI errors come back as -1 too). After a -1 call tfm_dist_abort.
 *   - Rank 0 is the only writer (tfm_dist_is_writer): progress lines, checkpoints, outputs.
 *
 * Functions that can fail return -1 and set tfm_last_error(). No global state: everything lives in
 * the tfm_dist object (MPI itself is process-wide: init once per process). */
#ifndef TFM_DIST_H
#define TFM_DIST_H

#include "tfm/export.h"

#include <stddef.h>
#include <stdint.h>

typedef struct tfm_dist tfm_dist;

typedef struct {
    size_t bucket_bytes;   /* all-reduce bucket size; 0: 8 MB. Clamped to 4 KB .. 1 GB, whole floats */
    double timeout_s;      /* longest wait in one collective before giving up; 0: 300 s */
} tfm_dist_opts;
/* The defaults: 8 MB buckets, 300 s timeout (what 0 means in each field). */
TFM_API void tfm_dist_opts_default(tfm_dist_opts *o);

/* Start (MPI_Init_thread, MPI_THREAD_FUNNELED; only the thread that calls tfm_dist functions may use
 * MPI, OpenMP workers never do). argc/argv may be NULL. opts NULL: defaults. NULL on error. */
TFM_API tfm_dist *tfm_dist_init(int *argc, char ***argv, const tfm_dist_opts *opts);
/* Free (after a barrier); the object that initialised MPI also calls MPI_Finalize, so with several
 * objects in one process free that one last. NULL is a no-op. */
TFM_API void tfm_dist_finalize(tfm_dist *d);
/* Stop every rank now (MPI_Abort with code; exit(code) without MPI). For a rank that hit an error
 * the others cannot know about, or after a collective returned -1. */
TFM_API void tfm_dist_abort(tfm_dist *d, int code) __attribute__((noreturn));

TFM_API int tfm_dist_rank(const tfm_dist *d);
TFM_API int tfm_dist_size(const tfm_dist *d);
TFM_API int tfm_dist_is_writer(const tfm_dist *d);   /* rank 0 */
TFM_API int tfm_dist_is_mpi(void);                   /* built with MPI=1 */
TFM_API size_t tfm_dist_bucket_floats(const tfm_dist *d);

/* ---------------------------------------------------------------- start-of-run checks */
/* Every rank hashes its configuration string (64-bit FNV-1a); all hashes are gathered and compared
 * with rank 0's. A mismatch fails on every rank with "configuration differs between ranks: rank R
 * has hash ... , rank 0 has ..." naming the lowest differing rank. */
TFM_API uint64_t tfm_dist_hash(const char *s);
TFM_API int tfm_dist_check_config(tfm_dist *d, const char *config);
/* Rank 0's n floats (the parameter block) to every rank, in buckets. */
TFM_API int tfm_dist_broadcast(tfm_dist *d, float *buf, size_t n);
/* Rank 0's bytes (RNG states, small structs) to every rank. */
TFM_API int tfm_dist_broadcast_bytes(tfm_dist *d, void *buf, size_t n);
TFM_API int tfm_dist_barrier(tfm_dist *d);

/* ---------------------------------------------------------------- gradients */
/* In place: buf (n floats, e.g. the contiguous gradient block) becomes the sum over ranks, bucket by
 * bucket. Deterministic, see above. */
TFM_API int tfm_dist_allreduce_sum(tfm_dist *d, float *buf, size_t n);
/* Non-blocking form (overlap with the backward pass): start the all-reduce of a contiguous range
 * (any length; callers use the buckets of a layer's grads as they become final) and return at once;
 * tfm_dist_allreduce_wait_all finishes every started range, in the order started. The ranges must not
 * overlap and must not be touched until wait_all returns. Same bits as tfm_dist_allreduce_sum. Ranges
 * in flight at once need scratch: tfm_dist_reserve(d, n_total) once at warm-up covers up to 64 ranges
 * of n_total floats in all (without it, start grows the scratch only while nothing is in flight, else
 * it fails). Open MPI has no progress thread: transfers advance inside tfm_dist calls, so a caller
 * that wants overlap calls tfm_dist_allreduce_progress between layers. */
TFM_API int tfm_dist_reserve(tfm_dist *d, size_t n_floats);
TFM_API int tfm_dist_allreduce_start(tfm_dist *d, float *buf, size_t n);
TFM_API int tfm_dist_allreduce_progress(tfm_dist *d);   /* test the buckets in flight; 0 or -1 */
TFM_API int tfm_dist_allreduce_wait_all(tfm_dist *d);

/* ---------------------------------------------------------------- losses, counts */
/* In place: v[0..n) becomes the sum over ranks, summed in rank order in double (an allgather then a
 * local fold: the same bits on every rank). For evaluation loss sums and token counts (exact in
 * double below 2^53). */
TFM_API int tfm_dist_sum_f64(tfm_dist *d, double *v, int n);
TFM_API int tfm_dist_sum_i64(tfm_dist *d, int64_t *v, int n);

/* ---------------------------------------------------------------- splitting a global batch */
/* The slice of a global batch of B samples this rank computes: samples [*start, *start + *count).
 * B must be divisible by the number of ranks (-1 and "--batch-size B is not divisible by the N
 * ranks" otherwise): every rank then has the same shapes, the same number of dropout calls and the
 * same work. */
TFM_API int tfm_dist_slice(const tfm_dist *d, int B, int *start, int *count);
/* For token-bucketed translation batches: split samples 0..n-1 with weights w (tokens per sample) into
 * `ranks` contiguous slices of nearly equal total weight: rank r gets [bounds[r], bounds[r+1]), with
 * bounds[0] = 0, bounds[ranks] = n. Contiguous, so each rank's samples keep their global order and
 * index (what dropout keys need). A rank may get no sample when n < ranks. Pure function. */
TFM_API void tfm_dist_split_weighted(const int *w, int n, int ranks, int *bounds);

#endif
