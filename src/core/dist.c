/* Data-parallel communication (include/tfm/dist.h): the single-process version, and with -DTFM_MPI
 * (make MPI=1) the Open MPI one.
 *
 * The all-reduce is a reduce-scatter followed by an allgather, per bucket of the buffer: the bucket is cut
 * into N chunks, chunk j belongs to rank j; an alltoall sends every rank's piece of chunk j to rank j,
 * which adds the N pieces in rank order (the same fold a serial loop over ranks does), and an allgather
 * hands the summed chunks back. Each rank sends and receives 2(N-1)/N of the bucket, like a ring
 * all-reduce, but the order of the additions is fixed, so the result is the same for any bucket size and
 * equal on every rank. Every collective is non-blocking and waited for with a timeout. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tfm/core.h"
#include "tfm/dist.h"

#ifdef TFM_MPI
#include <mpi.h>
#define MAX_PENDING 1024   /* buckets in flight at once (a 4 GB gradient block in 4 MB buckets) */

/* One bucket in flight: phase 1 = alltoall of the pieces running, 2 = allgather of the sums running. */
typedef struct {
    float *buf;            /* the bucket (inside the caller's buffer) */
    float *recv;           /* N pieces of this rank's chunk (scratch) */
    int phase;
    MPI_Request req;
} pending;
#endif

struct tfm_dist {
    int rank, size;
    size_t bucket;         /* floats per bucket */
    double timeout;        /* seconds */
#ifdef TFM_MPI
    MPI_Comm comm;         /* every collective but the all-reduce's allgathers */
    MPI_Comm comm_ag;      /* the allgathers: posted as alltoalls finish, so in their own sequence */
    int owns_init;         /* this object called MPI_Init */
    float *scratch;        /* receive space for the buckets in flight */
    size_t scratch_cap, scratch_used;
    pending *pend;
    int n_pend, n_reduced; /* buckets started; of those, the first n_reduced have their allgather posted */
    int *cnt, *off;        /* MAX_PENDING x size chunk lengths and offsets, kept while in flight */
    int *rcnt, *roff;      /* MAX_PENDING x size: receive counts (all = own chunk) and offsets */
#endif
};

int tfm_dist_rank(const tfm_dist *d) { return d->rank; }
int tfm_dist_size(const tfm_dist *d) { return d->size; }
int tfm_dist_is_writer(const tfm_dist *d) { return d->rank == 0; }
size_t tfm_dist_bucket_floats(const tfm_dist *d) { return d->bucket; }

uint64_t tfm_dist_hash(const char *s) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
    return h;
}

static void apply_opts(tfm_dist *d, const tfm_dist_opts *o) {
    size_t bytes = o && o->bucket_bytes ? o->bucket_bytes : (size_t)8 << 20;
    if (bytes < 4096) bytes = 4096;
    if (bytes > ((size_t)1 << 30)) bytes = (size_t)1 << 30;   /* chunk counts stay far below INT_MAX */
    d->bucket = bytes / sizeof(float);
    d->timeout = o && o->timeout_s > 0 ? o->timeout_s : 300.0;
}

/* ---------------------------------------------------------------- splitting a batch (pure) */
int tfm_dist_slice(const tfm_dist *d, int B, int *start, int *count) {
    if (B <= 0) return tfm_set_error("--batch-size %d must be positive", B), -1;
    if (B % d->size)
        return tfm_set_error("--batch-size %d is not divisible by the %d ranks (use a multiple of %d)", B, d->size,
                             d->size), -1;
    *count = B / d->size;
    *start = d->rank * *count;
    return 0;
}

/* bounds[r] for r = 1..ranks-1: the first sample whose midpoint lies past r/ranks of the total weight. */
void tfm_dist_split_weighted(const int *w, int n, int ranks, int *bounds) {
    double total = 0, before = 0;
    for (int i = 0; i < n; i++) total += w[i];
    int k = 0;
    bounds[0] = 0;
    for (int r = 1; r < ranks; r++) {
        double target = total * r / ranks;
        while (k < n && before + 0.5 * w[k] <= target) before += w[k++];
        bounds[r] = k;
    }
    bounds[ranks] = n;
}

#ifndef TFM_MPI
/* ================================================================ one process */
int tfm_dist_is_mpi(void) { return 0; }

tfm_dist *tfm_dist_init(int *argc, char ***argv, const tfm_dist_opts *opts) {
    (void)argc, (void)argv;
    tfm_dist *d = calloc(1, sizeof *d);
    if (!d) return tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory"), NULL;
    d->rank = 0;
    d->size = 1;
    apply_opts(d, opts);
    return d;
}
void tfm_dist_finalize(tfm_dist *d) { free(d); }
void tfm_dist_abort(tfm_dist *d, int code) {
    (void)d;
    exit(code);
}
int tfm_dist_check_config(tfm_dist *d, const char *config) { return (void)d, (void)config, 0; }
int tfm_dist_broadcast(tfm_dist *d, float *buf, size_t n) { return (void)d, (void)buf, (void)n, 0; }
int tfm_dist_broadcast_bytes(tfm_dist *d, void *buf, size_t n) { return (void)d, (void)buf, (void)n, 0; }
int tfm_dist_barrier(tfm_dist *d) { return (void)d, 0; }
int tfm_dist_allreduce_sum(tfm_dist *d, float *buf, size_t n) { return (void)d, (void)buf, (void)n, 0; }
int tfm_dist_reserve(tfm_dist *d, size_t n) { return (void)d, (void)n, 0; }
int tfm_dist_allreduce_start(tfm_dist *d, float *buf, size_t n) { return (void)d, (void)buf, (void)n, 0; }
int tfm_dist_allreduce_progress(tfm_dist *d) { return (void)d, 0; }
int tfm_dist_allreduce_wait_all(tfm_dist *d) { return (void)d, 0; }
int tfm_dist_sum_f64(tfm_dist *d, double *v, int n) { return (void)d, (void)v, (void)n, 0; }
int tfm_dist_sum_i64(tfm_dist *d, int64_t *v, int n) { return (void)d, (void)v, (void)n, 0; }

#else
/* ================================================================ Open MPI */
int tfm_dist_is_mpi(void) { return 1; }

static int mpi_fail(const tfm_dist *d, int rc, const char *what) {
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS) snprintf(msg, sizeof msg, "MPI error %d", rc);
    tfm_set_error("rank %d: %s failed: %s", d->rank, what, msg);
    return -1;
}
#define MPI_TRY(d, call, what) do { int rc_ = (call); if (rc_ != MPI_SUCCESS) return mpi_fail(d, rc_, what); } while (0)

/* Wait for r, polling: spin briefly, then sleep 20 us .. 1 ms between tests (so a waiting rank leaves the
 * cores to ranks still computing). After d->timeout seconds without completion: -1, the peers are gone. */
static int wait_req(tfm_dist *d, MPI_Request *r, const char *what) {
    double t0 = tfm_now();
    long sleep_ns = 20000;
    for (int spins = 0;; spins++) {
        int done = 0;
        MPI_TRY(d, MPI_Test(r, &done, MPI_STATUS_IGNORE), what);
        if (done) return 0;
        if (spins < 200) continue;
        if (tfm_now() - t0 > d->timeout)
            return tfm_set_error("rank %d: %s: no answer from the other ranks for %g s (a rank died or hangs)",
                                 d->rank, what, d->timeout), -1;
        struct timespec ts = {0, sleep_ns};
        nanosleep(&ts, NULL);
        if (sleep_ns < 1000000) sleep_ns *= 2;
    }
}

tfm_dist *tfm_dist_init(int *argc, char ***argv, const tfm_dist_opts *opts) {
    int inited = 0, provided = 0;
    MPI_Initialized(&inited);
    if (!inited) {
        if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
            return tfm_set_error("MPI_Init_thread failed"), NULL;
    } else {
        MPI_Query_thread(&provided);
    }
    if (provided < MPI_THREAD_FUNNELED) return tfm_set_error("MPI provides no MPI_THREAD_FUNNELED support"), NULL;
    tfm_dist *d = calloc(1, sizeof *d);
    if (!d) return tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory"), NULL;
    d->owns_init = !inited;
    apply_opts(d, opts);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    if (MPI_Comm_dup(MPI_COMM_WORLD, &d->comm) != MPI_SUCCESS) {
        free(d);
        return tfm_set_error("MPI_Comm_dup failed"), NULL;
    }
    if (MPI_Comm_dup(MPI_COMM_WORLD, &d->comm_ag) != MPI_SUCCESS) {
        MPI_Comm_free(&d->comm);
        free(d);
        return tfm_set_error("MPI_Comm_dup failed"), NULL;
    }
    MPI_Comm_set_errhandler(d->comm, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(d->comm_ag, MPI_ERRORS_RETURN);
    MPI_Comm_rank(d->comm, &d->rank);
    MPI_Comm_size(d->comm, &d->size);
    size_t per = (size_t)MAX_PENDING * d->size;
    d->pend = calloc(MAX_PENDING, sizeof *d->pend);
    d->cnt = malloc(4 * per * sizeof(int));
    if (!d->pend || !d->cnt) {
        tfm_dist_finalize(d);
        return tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory"), NULL;
    }
    d->off = d->cnt + per;
    d->rcnt = d->off + per;
    d->roff = d->rcnt + per;
    return d;
}

void tfm_dist_finalize(tfm_dist *d) {
    if (!d) return;
    if (d->comm != MPI_COMM_NULL) {
        tfm_dist_barrier(d);   /* best effort: no rank tears down while others still talk */
        MPI_Comm_free(&d->comm);
        MPI_Comm_free(&d->comm_ag);
    }
    int owns = d->owns_init;
    free(d->scratch);
    free(d->pend);
    free(d->cnt);
    free(d);
    if (owns) MPI_Finalize();
}

void tfm_dist_abort(tfm_dist *d, int code) {
    fflush(stdout);
    fflush(stderr);
    MPI_Abort(d ? d->comm : MPI_COMM_WORLD, code);
    exit(code);   /* not reached */
}

int tfm_dist_barrier(tfm_dist *d) {
    MPI_Request r;
    MPI_TRY(d, MPI_Ibarrier(d->comm, &r), "barrier");
    return wait_req(d, &r, "barrier");
}

int tfm_dist_check_config(tfm_dist *d, const char *config) {
    uint64_t mine = tfm_dist_hash(config);
    uint64_t stack[64], *all = d->size <= 64 ? stack : malloc(sizeof(uint64_t) * d->size);
    if (!all) return tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory"), -1;
    MPI_Request r;
    int rc = MPI_Iallgather(&mine, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, d->comm, &r);
    rc = rc != MPI_SUCCESS ? mpi_fail(d, rc, "configuration check") : wait_req(d, &r, "configuration check");
    for (int i = 1; rc == 0 && i < d->size; i++)
        if (all[i] != all[0]) {
            tfm_set_error("configuration differs between ranks: rank %d has hash %016llx, rank 0 has %016llx "
                          "(every rank must get the same flags and data)",
                          i, (unsigned long long)all[i], (unsigned long long)all[0]);
            rc = -1;
        }
    if (all != stack) free(all);
    return rc;
}

int tfm_dist_broadcast_bytes(tfm_dist *d, void *buf, size_t n) {
    for (size_t lo = 0; lo < n; lo += (size_t)1 << 30) {
        size_t len = n - lo < ((size_t)1 << 30) ? n - lo : (size_t)1 << 30;
        MPI_Request r;
        MPI_TRY(d, MPI_Ibcast((char *)buf + lo, (int)len, MPI_BYTE, 0, d->comm, &r), "broadcast");
        if (wait_req(d, &r, "broadcast")) return -1;
    }
    return 0;
}

int tfm_dist_broadcast(tfm_dist *d, float *buf, size_t n) {
    return tfm_dist_broadcast_bytes(d, buf, n * sizeof(float));
}

/* ---------------------------------------------------------------- all-reduce */
int tfm_dist_reserve(tfm_dist *d, size_t n) {
    /* a bucket of len floats needs N * ceil(len/N) < len + N: slack for n/bucket buckets plus 64 ranges */
    size_t need = n + (size_t)d->size * (n / d->bucket + 64);
    if (need <= d->scratch_cap) return 0;
    if (d->n_pend) return tfm_set_error("rank %d: all-reduce scratch grown while buckets are in flight", d->rank), -1;
    float *s = realloc(d->scratch, need * sizeof(float));
    if (!s) return tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory (all-reduce scratch of %zu floats)", need), -1;
    d->scratch = s;
    d->scratch_cap = need;
    return 0;
}

/* Post the alltoall of one bucket (n <= d->bucket floats). */
static int start_bucket(tfm_dist *d, float *buf, size_t n) {
    int N = d->size, me = d->rank, k = d->n_pend;
    if (k == MAX_PENDING) return tfm_set_error("rank %d: more than %d all-reduce buckets in flight", d->rank, k), -1;
    int *cnt = d->cnt + (size_t)k * N, *off = d->off + (size_t)k * N;
    int *rcnt = d->rcnt + (size_t)k * N, *roff = d->roff + (size_t)k * N;
    for (int j = 0; j < N; j++) {
        off[j] = (int)((size_t)j * n / N);
        cnt[j] = (int)((size_t)(j + 1) * n / N) - off[j];
    }
    size_t mine = (size_t)cnt[me];
    if (d->scratch_used + mine * N > d->scratch_cap) {
        if (d->n_pend) return tfm_set_error("rank %d: all-reduce scratch too small: call tfm_dist_reserve", d->rank), -1;
        if (tfm_dist_reserve(d, mine * N)) return -1;
    }
    for (int j = 0; j < N; j++) {
        rcnt[j] = (int)mine;
        roff[j] = (int)(j * mine);
    }
    pending *p = &d->pend[k];
    p->buf = buf;
    p->recv = d->scratch + d->scratch_used;
    p->phase = 1;
    MPI_TRY(d, MPI_Ialltoallv(buf, cnt, off, MPI_FLOAT, p->recv, rcnt, roff, MPI_FLOAT, d->comm, &p->req),
            "all-reduce (alltoall)");
    d->scratch_used += mine * N;
    d->n_pend++;
    return 0;
}

int tfm_dist_allreduce_start(tfm_dist *d, float *buf, size_t n) {
    if (d->size == 1) return 0;
    for (size_t lo = 0; lo < n; lo += d->bucket)
        if (start_bucket(d, buf + lo, n - lo < d->bucket ? n - lo : d->bucket)) return -1;
    return 0;
}

/* The pieces of this rank's chunk are in; add them in rank order into buf, then post the allgather. */
static int reduce_bucket(tfm_dist *d, int k) {
    int N = d->size, me = d->rank;
    pending *p = &d->pend[k];
    int *cnt = d->cnt + (size_t)k * N, *off = d->off + (size_t)k * N;
    size_t m = (size_t)cnt[me];
    float *out = p->buf + off[me];
    const float *rv = p->recv;
    for (size_t i = 0; i < m; i++) {
        float acc = rv[i];
        for (int j = 1; j < N; j++) acc += rv[(size_t)j * m + i];
        out[i] = acc;
    }
    p->phase = 2;
    d->n_reduced++;
    MPI_TRY(d, MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_FLOAT, p->buf, cnt, off, MPI_FLOAT, d->comm_ag, &p->req),
            "all-reduce (allgather)");
    return 0;
}

/* Advance the buckets in flight without blocking: finished alltoalls get their sums and allgathers, in
 * bucket order (every rank must post the allgathers in the same sequence). */
int tfm_dist_allreduce_progress(tfm_dist *d) {
    while (d->n_reduced < d->n_pend) {
        int done = 0;
        MPI_TRY(d, MPI_Test(&d->pend[d->n_reduced].req, &done, MPI_STATUS_IGNORE), "all-reduce");
        if (!done) return 0;
        if (reduce_bucket(d, d->n_reduced)) return -1;
    }
    return 0;
}

int tfm_dist_allreduce_wait_all(tfm_dist *d) {
    int rc = 0;
    while (!rc && d->n_reduced < d->n_pend)
        rc = wait_req(d, &d->pend[d->n_reduced].req, "all-reduce") || reduce_bucket(d, d->n_reduced);
    for (int k = 0; k < d->n_pend && !rc; k++) rc = wait_req(d, &d->pend[k].req, "all-reduce");
    d->n_pend = d->n_reduced = 0;
    d->scratch_used = 0;
    return rc ? -1 : 0;
}

int tfm_dist_allreduce_sum(tfm_dist *d, float *buf, size_t n) {
    if (d->size == 1) return 0;
    if (d->n_pend) return tfm_set_error("rank %d: all-reduce while non-blocking buckets are in flight", d->rank), -1;
    /* one bucket at a time: scratch of one bucket, no state across calls */
    for (size_t lo = 0; lo < n; lo += d->bucket)
        if (start_bucket(d, buf + lo, n - lo < d->bucket ? n - lo : d->bucket) || tfm_dist_allreduce_wait_all(d))
            return -1;
    return 0;
}

/* ---------------------------------------------------------------- small sums */
/* Gather every rank's n values of `bytes` each into all (size x n), then fold in rank order. */
static int gather_small(tfm_dist *d, const void *mine, void *all, int n, MPI_Datatype t) {
    MPI_Request r;
    MPI_TRY(d, MPI_Iallgather(mine, n, t, all, n, t, d->comm, &r), "sum");
    return wait_req(d, &r, "sum");
}

int tfm_dist_sum_f64(tfm_dist *d, double *v, int n) {
    if (d->size == 1 || n <= 0) return 0;
    double *all = malloc(sizeof(double) * (size_t)n * d->size);
    if (!all) return tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory"), -1;
    int rc = gather_small(d, v, all, n, MPI_DOUBLE);
    for (int i = 0; !rc && i < n; i++) {
        double acc = all[i];
        for (int j = 1; j < d->size; j++) acc += all[(size_t)j * n + i];
        v[i] = acc;
    }
    free(all);
    return rc;
}

int tfm_dist_sum_i64(tfm_dist *d, int64_t *v, int n) {
    if (d->size == 1 || n <= 0) return 0;
    int64_t *all = malloc(sizeof(int64_t) * (size_t)n * d->size);
    if (!all) return tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory"), -1;
    int rc = gather_small(d, v, all, n, MPI_INT64_T);
    for (int i = 0; !rc && i < n; i++) {
        int64_t acc = 0;
        for (int j = 0; j < d->size; j++) acc += all[(size_t)j * n + i];
        v[i] = acc;
    }
    free(all);
    return rc;
}
#endif

void tfm_dist_opts_default(tfm_dist_opts *o) {
    o->bucket_bytes = (size_t)8 << 20;
    o->timeout_s = 300;
}
