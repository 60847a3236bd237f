/* The MPI check program (built by `make MPI=1` as $(BUILD)/mpi/dist_check, run under mpirun by
 * tests/cli/mpi.sh). Modes:
 *   dist_check collectives           all-reduce == the serial rank-order sum bit for bit (several bucket
 *                                    sizes, ranges shorter than the rank count, the non-blocking form),
 *                                    equal on every rank; broadcast; sums; batch slices. Rank 0 prints
 *                                    PASS/FAIL lines (a check fails if it fails on any rank).
 *   dist_check config [--differ R]   configuration hash check; rank R gets another configuration
 *   dist_check die --rank R --how exit|kill|hang [--timeout S]
 *                                    all ranks all-reduce in a loop; rank R exits 3 / SIGKILLs itself /
 *                                    stops talking after ~1 s; the others must stop with a message
 *   dist_check write DIR              only the writer creates DIR/written.rank<r>
 *   dist_check bench --floats N --reps R [--native]   all-reduce time (rank 0 prints one line);
 *                                    --native: Open MPI's own MPI_Allreduce instead, for comparison
 * Errors: rank 0 (or the rank that sees it) prints "dist_check: <message>" on stderr, exit 1. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#ifdef TFM_MPI
#include <mpi.h>
#endif
#include "tfm/core.h"
#include "tfm/dist.h"

/* Rank r's test data: values of very different magnitudes, so the order of additions changes the bits. */
static void fill(float *x, size_t n, int rank, uint64_t salt) {
    tfm_rng g;
    tfm_rng_seed(&g, salt * 1000 + (uint64_t)rank + 1);
    for (size_t i = 0; i < n; i++) {
        float u = tfm_rng_uniform(&g) - 0.5f;
        int e = (int)(tfm_rng_u32(&g) % 24) - 12;
        x[i] = u * (float)(1 << 12) * (e >= 0 ? (float)(1 << e) : 1.0f / (float)(1 << -e)) / 4096.0f;
    }
}

/* A check that must hold on every rank: rank 0 prints it, with the number of ranks where it failed. */
static void check_all(tfm_dist *d, const char *name, int ok, const char *why) {
    int64_t bad = !ok;
    if (tfm_dist_sum_i64(d, &bad, 1)) {
        fprintf(stderr, "dist_check: %s\n", tfm_last_error());
        tfm_dist_abort(d, 1);
    }
    if (tfm_dist_is_writer(d)) CHECK(name, bad == 0, "fails on %lld rank(s); rank 0: %s", (long long)bad, ok ? "ok" : why);
}

static void die_on(tfm_dist *d, int rc) {
    if (!rc) return;
    fprintf(stderr, "dist_check: %s\n", tfm_last_error());
    tfm_dist_abort(d, 1);
}

/* The all-reduce of n floats with the given bucket size against the serial fold, bit for bit. */
static int allreduce_case(tfm_dist *d, size_t n, int nonblocking, char *why) {
    int N = tfm_dist_size(d);
    float *x = malloc(sizeof(float) * (n + 1)), *want = calloc(n + 1, sizeof(float)), *tmp = malloc(sizeof(float) * (n + 1));
    fill(x, n, tfm_dist_rank(d), n);
    for (int r = 0; r < N; r++) {   /* serial: ((g0 + g1) + g2) + ... */
        fill(tmp, n, r, n);
        for (size_t i = 0; i < n; i++) want[i] = r == 0 ? tmp[i] : want[i] + tmp[i];
    }
    int rc;
    if (nonblocking) {   /* three uneven ranges in flight at once */
        size_t a = n / 3, b = n / 2;
        rc = tfm_dist_reserve(d, n) || tfm_dist_allreduce_start(d, x, a) || tfm_dist_allreduce_start(d, x + a, b - a) || tfm_dist_allreduce_progress(d) ||
             tfm_dist_allreduce_start(d, x + b, n - b) || tfm_dist_allreduce_wait_all(d);
    } else {
        rc = tfm_dist_allreduce_sum(d, x, n);
    }
    die_on(d, rc);
    int ok = memcmp(x, want, n * sizeof(float)) == 0;
    if (!ok) {
        size_t i = 0;
        while (x[i] == want[i]) i++;
        snprintf(why, 200, "n=%zu: element %zu is %.9g, serial sum %.9g", n, i, x[i], want[i]);
    }
    /* the same bits on every rank: compare a hash of the result with rank 0's */
    char hs[32];
    uint64_t h = 0xcbf29ce484222325ull;
    const unsigned char *by = (const unsigned char *)x;
    for (size_t i = 0; i < n * sizeof(float); i++) h = (h ^ by[i]) * 0x100000001b3ull;
    snprintf(hs, sizeof hs, "%016llx", (unsigned long long)h);
    if (tfm_dist_check_config(d, hs)) {
        ok = 0;
        snprintf(why, 200, "n=%zu: results differ between ranks: %s", n, tfm_last_error());
    }
    free(x), free(want), free(tmp);
    return ok;
}

static void check_small(tfm_dist *d) {
    /* broadcast: rank 0's block reaches every rank */
    size_t n = 5000;
    float *x = malloc(n * sizeof(float)), *want = malloc(n * sizeof(float));
    fill(want, n, 0, 7);
    fill(x, n, tfm_dist_rank(d), 7);   /* other ranks start with other values */
    die_on(d, tfm_dist_broadcast(d, x, n));
    check_all(d, "broadcast of rank 0's parameter block", !memcmp(x, want, n * sizeof(float)), "differs");
    free(x), free(want);
    /* sums of losses and counts: folded in rank order, the same on every rank */
    int N = tfm_dist_size(d), me = tfm_dist_rank(d);
    double v[2] = {0.1 * (me + 1), 1e16 + me}, w[2] = {0.1, 1e16};
    for (int r = 1; r < N; r++) w[0] += 0.1 * (r + 1), w[1] += 1e16 + r;
    die_on(d, tfm_dist_sum_f64(d, v, 2));
    check_all(d, "sum_f64 (eval losses): rank-order sum", v[0] == w[0] && v[1] == w[1], "differs");
    int64_t c[2] = {me + 1, (int64_t)1 << 40};
    die_on(d, tfm_dist_sum_i64(d, c, 2));
    check_all(d, "sum_i64 (token counts)", c[0] == (int64_t)N * (N + 1) / 2 && c[1] == ((int64_t)N << 40), "wrong sum");
    /* batch slices: contiguous, in rank order, covering the global batch */
    int s = -1, k = -1, B = 12 * N;
    int ok = tfm_dist_slice(d, B, &s, &k) == 0 && s == me * 12 && k == 12;
    check_all(d, "slice of a divisible global batch", ok, "wrong slice");
    if (N > 1) {
        ok = tfm_dist_slice(d, N + 1, &s, &k) == -1 && strstr(tfm_last_error(), "not divisible by the") != NULL;
        check_all(d, "slice of an indivisible global batch is an error", ok, tfm_last_error());
    }
    check_all(d, "config hash: equal configurations pass", tfm_dist_check_config(d, "--lr 1e-3 --seed 1") == 0,
              tfm_last_error());
}

static int mode_collectives(int argc, char **argv) {
    char why[256] = "";
    /* two objects on one MPI (initialised once per process): 4 KB buckets (1024 floats: many buckets and a
     * partial last one) and the default 8 MB; the first owns MPI and is finalized last */
    tfm_dist_opts o_small = {4096, 20.0}, o_default = {0, 20.0};
    tfm_dist *ds[2];
    ds[0] = tfm_dist_init(&argc, &argv, &o_small);
    ds[1] = ds[0] ? tfm_dist_init(&argc, &argv, &o_default) : NULL;
    if (!ds[0] || !ds[1]) return fprintf(stderr, "dist_check: %s\n", tfm_last_error()), 1;
    for (int bi = 0; bi < 2; bi++) {
        tfm_dist *d = ds[bi];
        size_t sizes[] = {1, 2, 3, 1000, 1024, 1025, 3 * 1024 + 7, 300001};
        for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
            char name[128];
            snprintf(name, sizeof name, "allreduce n=%zu bucket=%zu floats: serial rank-order sum, bit for bit", sizes[si],
                     tfm_dist_bucket_floats(d));
            check_all(d, name, allreduce_case(d, sizes[si], 0, why), why);
        }
        char name[128];
        snprintf(name, sizeof name, "allreduce non-blocking (3 ranges in flight), bucket=%zu: same bits",
                 tfm_dist_bucket_floats(d));
        check_all(d, name, allreduce_case(d, 100003, 1, why), why);
    }
    check_small(ds[0]);
    int fails = check_failures;
    tfm_dist_finalize(ds[1]);
    tfm_dist_finalize(ds[0]);
    return fails ? 1 : 0;
}

static int mode_config(int argc, char **argv) {
    int differ = -1;
    for (int i = 2; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--differ")) differ = atoi(argv[i + 1]);
    tfm_dist_opts o = {0, 20.0};
    tfm_dist *d = tfm_dist_init(&argc, &argv, &o);
    if (!d) return fprintf(stderr, "dist_check: %s\n", tfm_last_error()), 1;
    const char *cfg = tfm_dist_rank(d) == differ ? "--lr 2e-3 --seed 1" : "--lr 1e-3 --seed 1";
    if (tfm_dist_check_config(d, cfg)) {
        if (tfm_dist_is_writer(d)) fprintf(stderr, "dist_check: %s\n", tfm_last_error());
        tfm_dist_finalize(d);   /* every rank saw the mismatch: a clean stop, no abort needed */
        return 1;
    }
    if (tfm_dist_is_writer(d)) printf("config ok on %d ranks\n", tfm_dist_size(d));
    tfm_dist_finalize(d);
    return 0;
}

static int mode_die(int argc, char **argv) {
    int victim = 1;
    const char *how = "exit";
    double timeout = 5;
    for (int i = 2; i + 1 < argc; i++) {
        if (!strcmp(argv[i], "--rank")) victim = atoi(argv[i + 1]);
        if (!strcmp(argv[i], "--how")) how = argv[i + 1];
        if (!strcmp(argv[i], "--timeout")) timeout = atof(argv[i + 1]);
    }
    tfm_dist_opts o = {0, timeout};
    tfm_dist *d = tfm_dist_init(&argc, &argv, &o);
    if (!d) return fprintf(stderr, "dist_check: %s\n", tfm_last_error()), 1;
    size_t n = 100000;
    float *x = calloc(n, sizeof(float));
    double t0 = tfm_now();
    for (long step = 0;; step++) {
        if (tfm_dist_rank(d) == victim && tfm_now() - t0 > 1.0) {
            if (!strcmp(how, "exit")) _exit(3);
            if (!strcmp(how, "kill")) raise(SIGKILL);
            for (;;) sleep(1);   /* hang: alive, but never joins the next collective */
        }
        if (tfm_dist_allreduce_sum(d, x, n)) {
            fprintf(stderr, "dist_check: step %ld: %s\n", step, tfm_last_error());
            tfm_dist_abort(d, 1);
        }
        if (tfm_now() - t0 > 60) break;   /* the victim never stopped: the test fails on time */
    }
    free(x);
    tfm_dist_finalize(d);
    return 0;
}

static int mode_write(int argc, char **argv) {
    const char *dir = argc > 2 ? argv[2] : ".";
    tfm_dist *d = tfm_dist_init(&argc, &argv, NULL);
    if (!d) return fprintf(stderr, "dist_check: %s\n", tfm_last_error()), 1;
    if (tfm_dist_is_writer(d)) {
        char path[4096];
        snprintf(path, sizeof path, "%s/written.rank%d", dir, tfm_dist_rank(d));
        FILE *f = fopen(path, "w");
        if (f) fprintf(f, "%d ranks\n", tfm_dist_size(d)), fclose(f);
    }
    tfm_dist_finalize(d);
    return 0;
}

/* Open MPI's MPI_Allreduce on MPI_COMM_WORLD (no order guarantee), in one call: the reference. */
static int native_allreduce(tfm_dist *d, float *x, size_t n) {
    (void)d;
#ifdef TFM_MPI
    if (MPI_Allreduce(MPI_IN_PLACE, x, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD) != MPI_SUCCESS)
        return tfm_set_error("MPI_Allreduce failed"), -1;
#else
    (void)x, (void)n;
#endif
    return 0;
}

static int mode_bench(int argc, char **argv) {
    size_t n = 1 << 20;
    int reps = 10, native = 0;
    for (int i = 2; i < argc; i++) native |= !strcmp(argv[i], "--native");
    for (int i = 2; i + 1 < argc; i++) {
        if (!strcmp(argv[i], "--floats")) n = (size_t)atol(argv[i + 1]);
        if (!strcmp(argv[i], "--reps")) reps = atoi(argv[i + 1]);
    }
    tfm_dist *d = tfm_dist_init(&argc, &argv, NULL);
    if (!d) return fprintf(stderr, "dist_check: %s\n", tfm_last_error()), 1;
    float *x = calloc(n, sizeof(float));
    int (*reduce)(tfm_dist *, float *, size_t) = native ? native_allreduce : tfm_dist_allreduce_sum;
    die_on(d, reduce(d, x, n));   /* warm-up */
    double best = 1e30, total = 0;
    for (int r = 0; r < reps; r++) {
        die_on(d, tfm_dist_barrier(d));
        double t0 = tfm_now();
        die_on(d, reduce(d, x, n));
        double t = tfm_now() - t0;
        total += t;
        if (t < best) best = t;
    }
    int N = tfm_dist_size(d);
    double bytes = (double)n * sizeof(float), bus = 2.0 * (N - 1) / N * bytes;
    if (tfm_dist_is_writer(d))
        printf("%s  ranks %d  floats %zu  MB %.2f  best ms %.3f  mean ms %.3f  busbw(best) GB/s %.3f\n", native ? "MPI_Allreduce" : "tfm_dist", N, n, bytes / 1e6,
               best * 1e3, total / reps * 1e3, bus / best / 1e9);
    free(x);
    tfm_dist_finalize(d);
    return 0;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "";
    if (!strcmp(mode, "collectives")) return mode_collectives(argc, argv);
    if (!strcmp(mode, "config")) return mode_config(argc, argv);
    if (!strcmp(mode, "die")) return mode_die(argc, argv);
    if (!strcmp(mode, "write")) return mode_write(argc, argv);
    if (!strcmp(mode, "bench")) return mode_bench(argc, argv);
    fprintf(stderr, "dist_check: unknown mode '%s' (collectives, config, die, write, bench)\n", mode);
    return 2;
}
