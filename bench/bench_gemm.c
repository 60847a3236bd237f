/* GEMM benchmark: tfm_gemm vs OpenBLAS cblas_sgemm (when built with -DBENCH_WITH_OPENBLAS).
 * Usage: bench_gemm [--rounds R] [--ms T] [--threads LIST e.g. 1,2] [--settle MS] [--cputime] [--only SUBSTR]
 *   --settle MS: with more than 1 thread, sleep MS ms after every timing (default 200) so the idle
 *              spinning worker threads of one library do not slow down the other's next timing.
 *   --cputime: measure the main thread's CPU time instead of wall time (only meaningful with 1 thread;
 *              useful on a shared, loaded machine). --only: run shapes whose label "case taX tbY MxNxK" contains SUBSTR.
 * For every thread count and shape, runs R rounds; each round times tfm then OpenBLAS (order
 * alternates between rounds), each for about T ms of repetitions. Prints median GFLOP/s.
 * bench/gemm.sh builds this against libopenblas and runs it. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "tfm/kernels.h"
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#ifdef BENCH_WITH_OPENBLAS
#if __has_include(<cblas.h>)
#include <cblas.h>
#else /* only the runtime library is installed (no libopenblas-dev): the two declarations used here */
enum CBLAS_ORDER { CblasRowMajor = 101, CblasColMajor = 102 };
enum CBLAS_TRANSPOSE { CblasNoTrans = 111, CblasTrans = 112 };
void cblas_sgemm(enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb, int M, int N, int K,
                 float alpha, const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc);
#endif
void openblas_set_num_threads(int);
#endif

typedef struct {
    const char *what;
    int batch, ta, tb, M, N, K;
} shape;

static const shape shapes[] = {
    {"fwd", 1, 0, 0, 768, 128, 128},     {"fwd", 1, 0, 0, 768, 512, 128},   {"fwd", 1, 0, 0, 768, 128, 512},
    {"fwd", 1, 0, 0, 768, 65, 128},      {"fwd", 1, 0, 0, 1024, 1024, 1024},
    {"x@W^T", 1, 0, 1, 768, 128, 128},   {"x@W^T", 1, 0, 1, 768, 512, 128}, {"x@W^T", 1, 0, 1, 768, 128, 512},
    {"x@W^T", 1, 0, 1, 768, 65, 128},    {"x@W^T", 1, 0, 1, 1024, 1024, 1024},
    {"dW=x^T@dy", 1, 1, 0, 128, 128, 768}, {"dW=x^T@dy", 1, 1, 0, 128, 512, 768},
    {"dW=x^T@dy", 1, 1, 0, 512, 128, 768}, {"dW=x^T@dy", 1, 1, 0, 128, 65, 768},
    {"ta", 1, 1, 0, 768, 128, 128},      {"ta", 1, 1, 0, 768, 512, 128},    {"ta", 1, 1, 0, 768, 128, 512},
    {"ta", 1, 1, 0, 768, 65, 128},       {"ta", 1, 1, 0, 1024, 1024, 1024},
    {"gemv", 1, 0, 0, 1, 384, 128},      {"gemv", 1, 0, 1, 1, 384, 128},    {"gemv", 1, 0, 1, 1, 1536, 384},
    {"attn QK^T", 48, 0, 1, 64, 64, 32}, {"attn PV", 48, 0, 0, 64, 32, 64},
};
#define NSHAPES (int)(sizeof shapes / sizeof shapes[0])

static int use_cputime = 0; /* --cputime: time the calling thread's CPU time (1-thread runs only) */
static double now(void) {
    struct timespec t;
    clock_gettime(use_cputime ? CLOCK_THREAD_CPUTIME_ID : CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

typedef struct {
    const shape *s;
    float *A, *B, *C;
    int lda, ldb, ldc;
    size_t sa, sb, sc;
} problem;

static void run_tfm(const problem *p) {
    const shape *s = p->s;
    if (s->batch == 1)
        tfm_gemm(s->ta, s->tb, s->M, s->N, s->K, 1.0f, p->A, p->lda, p->B, p->ldb, 0.0f, p->C, p->ldc);
    else
        tfm_gemm_batched(s->batch, s->ta, s->tb, s->M, s->N, s->K, 1.0f, p->A, p->lda, p->sa, p->B, p->ldb,
                         p->sb, 0.0f, p->C, p->ldc, p->sc);
}

#ifdef BENCH_WITH_OPENBLAS
static void run_blas(const problem *p) {
    const shape *s = p->s;
    for (int b = 0; b < s->batch; b++)
        cblas_sgemm(CblasRowMajor, s->ta ? CblasTrans : CblasNoTrans, s->tb ? CblasTrans : CblasNoTrans, s->M,
                    s->N, s->K, 1.0f, p->A + b * p->sa, p->lda, p->B + b * p->sb, p->ldb, 0.0f, p->C + b * p->sc,
                    p->ldc);
}
#endif

/* GFLOP/s of running f for about ms milliseconds. */
static double time_gflops(void (*f)(const problem *), const problem *p, double ms) {
    const shape *s = p->s;
    double flops = 2.0 * s->batch * s->M * s->N * s->K;
    f(p); /* warm */
    int reps = 1;
    double t0 = now(), dt;
    f(p);
    dt = now() - t0;
    if (dt > 0) reps = (int)(ms * 1e-3 / dt) + 1;
    if (reps > 1000000) reps = 1000000;
    t0 = now();
    for (int r = 0; r < reps; r++) f(p);
    dt = now() - t0;
    return flops * reps / dt * 1e-9;
}

static int cmpd(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    int rounds = 7, settle_ms = 200;
    const char *only = NULL;
    double ms = 40;
    int threads[8] = {1, 2}, nthr = 2;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--ms") && i + 1 < argc) ms = atof(argv[++i]);
        else if (!strcmp(argv[i], "--settle") && i + 1 < argc) settle_ms = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--cputime")) use_cputime = 1;
        else if (!strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
            nthr = 0;
            for (char *t = strtok(argv[++i], ","); t && nthr < 8; t = strtok(NULL, ",")) threads[nthr++] = atoi(t);
        } else {
            fprintf(stderr, "usage: %s [--rounds R] [--ms T] [--threads 1,2] [--settle MS] [--cputime] [--only SUBSTR]\n", argv[0]);
            return 2;
        }
    }
    if (rounds < 1) rounds = 1;
    {
        double la[3] = {0, 0, 0};
        FILE *f = fopen("/proc/loadavg", "r");
        if (f) {
            if (fscanf(f, "%lf %lf %lf", &la[0], &la[1], &la[2]) != 3) la[0] = -1;
            fclose(f);
        }
        printf("# tfm backend: %s; rounds=%d, ~%.0f ms per timing; %s; GFLOP/s medians; loadavg at start %.2f\n",
               tfm_gemm_backend(), rounds, ms, use_cputime ? "thread CPU time" : "wall time", la[0]);
    }
#ifdef BENCH_WITH_OPENBLAS
    printf("%-3s %-10s %2s %2s %5s %5s %5s %5s %9s %9s %6s\n", "thr", "case", "ta", "tb", "batch", "M", "N", "K",
           "tfm", "openblas", "ratio");
#else
    printf("%-3s %-10s %2s %2s %5s %5s %5s %5s %9s\n", "thr", "case", "ta", "tb", "batch", "M", "N", "K", "tfm");
#endif
    srand(1);
    for (int ti = 0; ti < nthr; ti++) {
        int nt = threads[ti];
        omp_set_num_threads(nt);
#ifdef BENCH_WITH_OPENBLAS
        openblas_set_num_threads(nt);
#endif
        for (int si = 0; si < NSHAPES; si++) {
            const shape *s = &shapes[si];
            char label[96];
            snprintf(label, sizeof label, "%s ta%d tb%d %dx%dx%d", s->what, s->ta, s->tb, s->M, s->N, s->K);
            if (only && !strstr(label, only)) continue;
            problem p = {s, 0, 0, 0, s->ta ? s->M : s->K, s->tb ? s->K : s->N, s->N, 0, 0, 0};
            p.sa = (size_t)s->M * s->K;
            p.sb = (size_t)s->K * s->N;
            p.sc = (size_t)s->M * s->N;
            size_t na = p.sa * s->batch, nb = p.sb * s->batch, nc = p.sc * s->batch;
            p.A = malloc(na * sizeof(float));
            p.B = malloc(nb * sizeof(float));
            p.C = malloc(nc * sizeof(float));
            for (size_t i = 0; i < na; i++) p.A[i] = (float)((double)rand() / RAND_MAX - 0.5);
            for (size_t i = 0; i < nb; i++) p.B[i] = (float)((double)rand() / RAND_MAX - 0.5);
            memset(p.C, 0, nc * sizeof(float));
            double gt[64], gb[64];
            int R = rounds > 64 ? 64 : rounds;
            for (int r = 0; r < R; r++) {
#ifdef BENCH_WITH_OPENBLAS
                /* With >1 thread, each library's idle worker threads keep spinning for a while
                 * after its last call (OpenBLAS's for far longer than libgomp's) and steal a core
                 * from the other library's next timing; sleeping lets them go idle first. */
                int pause = nt > 1 ? settle_ms : 0;
                if (r & 1) {
                    gb[r] = time_gflops(run_blas, &p, ms);
                    if (pause) usleep(pause * 1000);
                    gt[r] = time_gflops(run_tfm, &p, ms);
                    if (pause) usleep(pause * 1000);
                } else {
                    gt[r] = time_gflops(run_tfm, &p, ms);
                    if (pause) usleep(pause * 1000);
                    gb[r] = time_gflops(run_blas, &p, ms);
                    if (pause) usleep(pause * 1000);
                }
#else
                (void)settle_ms;
                gt[r] = time_gflops(run_tfm, &p, ms);
                gb[r] = 0;
#endif
            }
            qsort(gt, R, sizeof(double), cmpd);
            qsort(gb, R, sizeof(double), cmpd);
            double mt = gt[R / 2], mb = gb[R / 2];
#ifdef BENCH_WITH_OPENBLAS
            printf("%-3d %-10s %2d %2d %5d %5d %5d %5d %9.1f %9.1f %5.0f%%\n", nt, s->what, s->ta, s->tb, s->batch,
                   s->M, s->N, s->K, mt, mb, 100.0 * mt / mb);
#else
            (void)mb;
            printf("%-3d %-10s %2d %2d %5d %5d %5d %5d %9.1f\n", nt, s->what, s->ta, s->tb, s->batch, s->M, s->N,
                   s->K, mt);
#endif
            fflush(stdout);
            free(p.A); free(p.B); free(p.C);
        }
    }
    return 0;
}
