/* The int8 GEMM at decoding shapes, every path this CPU runs, beside the fp32 GEMM on the same weight:
 *
 *   build/bench/bench_gemm_q8 [--rounds R] [--ms T]       (make bench-bin; one thread)
 *
 * Shapes (M x N x K, M activation rows against an N x K weight, as tfm_linear calls them): the Multi30k recipe
 * model's decoder at greedy batch 32 and beam 4 x 32 (d_model 256, FFN 1024, vocabulary 8000), a few rows, and the
 * 4 x 128 GPT's 256-token window (a prompt, or the window generation recomputes once it slides).
 * Columns, in G multiply-adds per second (medians over R rounds, each configuration for about T ms a round, the
 * configurations in turn within a round):
 *   fp32        tfm_gemm_pb on the weight packed once (as tfm_linear decodes with tfm_weight_packs)
 *   <path> rows tfm_gemm_q8's row tiles on that path (4-row calls: the layout one-row steps read)
 *   <path>      tfm_gemm_q8 on that path (from 5 rows: W's panels, core/q8.h; also greedy's screen)
 * The CPU and the paths are printed; the numbers depend on the machine's load (run it on a quiet machine). */
#include "bench_clock.h"
#include "core/q8.h"
#include "ops/isa.h"
#include "tfm/kernels.h"
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int M, N, K;
    const float *A;
    float *C;
    const float *W, *Wp;      /* the weight, and packed for tfm_gemm_pb */
    const tfm_q8_weight *w;
} shape;

enum { FP32, ROWS, FULL };

/* one call of configuration kind on path */
static void run(int kind, tfm_q8_path path, const shape *s) {
    switch (kind) {
    case FP32: tfm_gemm_pb(0, 1, s->M, s->N, s->K, 1.0f, s->A, s->K, s->W, s->K, s->Wp, 0.0f, s->C, s->N); break;
    case ROWS:
        for (int m = 0; m < s->M; m += 4)
            tfm_gemm_q8_path_(path, 1, s->M - m < 4 ? s->M - m : 4, s->A + (size_t)m * s->K, s->K, s->w, NULL,
                              s->C + (size_t)m * s->N, s->N);
        break;
    default: tfm_gemm_q8_path_(path, 1, s->M, s->A, s->K, s->w, NULL, s->C, s->N); break;
    }
}

int main(int argc, char **argv) {
    int rounds = 5;
    double ms = 150;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--ms") && i + 1 < argc) ms = atof(argv[++i]);
        else {
            fprintf(stderr, "usage: bench_gemm_q8 [--rounds R] [--ms T]\n");
            return 2;
        }
    }
    if (rounds < 1 || rounds > 99 || ms <= 0) {
        fprintf(stderr, "bench_gemm_q8: --rounds 1..99, --ms > 0\n");
        return 2;
    }
    omp_set_num_threads(1);
    static const int shapes[][3] = {{4, 256, 256},    {8, 256, 256},     {32, 256, 256}, {32, 1024, 256},
                                    {32, 256, 1024},  {32, 8000, 256},   {128, 256, 256}, {128, 1024, 256},
                                    {128, 256, 1024}, {128, 8000, 256}, {256, 128, 128}, {256, 512, 128}, {256, 128, 512}};
    /* configurations: fp32, then per supported path its row tiles and tfm_gemm_q8 */
    int kinds[16], paths[16], n = 0;
    char names[16][32];
    kinds[n] = FP32, paths[n] = 0, snprintf(names[n++], 32, "fp32");
    for (int p = TFM_Q8_PATHS - 1; p >= 0; p--) {
        if (!tfm_q8_path_supported((tfm_q8_path)p)) continue;
        kinds[n] = ROWS, paths[n] = p, snprintf(names[n++], 32, "%s rows", tfm_q8_path_name((tfm_q8_path)p));
        kinds[n] = FULL, paths[n] = p, snprintf(names[n++], 32, "%s", tfm_q8_path_name((tfm_q8_path)p));
    }
    printf("# bench_gemm_q8: 1 thread, %d rounds of ~%.0f ms per configuration; G multiply-adds/s, medians\n", rounds,
           ms);
    printf("# int8 path in use: %s, fp32 GEMM: %s\n", tfm_gemm_q8_backend(), tfm_gemm_backend());
    printf("%-16s", "M x N x K");
    for (int c = 0; c < n; c++) printf(" %16s", names[c]);
    printf("\n");
    for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++) {
        int M = shapes[si][0], N = shapes[si][1], K = shapes[si][2];
        float *A = malloc(sizeof(float) * M * K), *W = malloc(sizeof(float) * N * K), *C = malloc(sizeof(float) * M * N);
        if (!A || !W || !C) return fprintf(stderr, "bench_gemm_q8: out of memory\n"), 1;
        srand(1);
        for (int i = 0; i < M * K; i++) A[i] = (float)rand() / (float)RAND_MAX - 0.5f;
        for (int i = 0; i < N * K; i++) W[i] = (float)rand() / (float)RAND_MAX - 0.5f;
        /* 64-byte aligned: the kernels load its panels aligned */
        float *Wp = aligned_alloc(64, sizeof(float) * ((tfm_gemm_packed_b_floats(N, K) + 15) / 16 * 16 + 16));
        tfm_q8_weight w;
        memset(&w, 0, sizeof w);
        if (!Wp || tfm_q8_weight_quantize_(&w, W, N, K, (size_t)K))
            return fprintf(stderr, "bench_gemm_q8: out of memory\n"), 1;
        tfm_gemm_pack_b(1, N, K, W, K, Wp);
        shape s = {M, N, K, A, C, W, Wp, &w};
        double gmacs[16][99], macs = (double)M * N * K;
        for (int c = 0; c < n; c++) run(kinds[c], (tfm_q8_path)paths[c], &s);   /* warm-up; makes the panels */
        for (int r = 0; r < rounds; r++)
            for (int c = 0; c < n; c++) {
                long reps = 0;
                double t0 = bench_now(), t;
                do run(kinds[c], (tfm_q8_path)paths[c], &s), reps++;
                while ((t = bench_now() - t0) < ms * 1e-3);
                gmacs[c][r] = macs * (double)reps / t * 1e-9;
            }
        char label[32];
        snprintf(label, sizeof label, "%d x %d x %d", M, N, K);
        printf("%-16s", label);
        for (int c = 0; c < n; c++) {
            qsort(gmacs[c], (size_t)rounds, sizeof(double), bench_by_value);
            printf(" %16.1f", gmacs[c][rounds / 2]);
        }
        printf("\n");
        tfm_q8_weight_free_(&w);
        free(A), free(W), free(Wp), free(C);
    }
    return 0;
}
