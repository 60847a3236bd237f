/* The int8 GEMM of one activation row (a generation step) over weights that come from memory:
 *
 *   build/bench/bench_gemv_q8 [--rounds R] [--layers L]       (make bench-bin; one thread)
 *
 * L layers (default 12) of GPT-2 small's linear weights in int8 (2304 x 768, 768 x 768, 3072 x 768, 768 x 3072:
 * 7.1 MB a layer, 85 MB for 12, more than most L3 caches), one tfm_gemm_q8 of M = 1 each, as `tfm generate`
 * calls them. Per round and path, the best of 10 passes over every layer; printed: the median over R rounds of
 * the weight bytes read per second, beside a plain sequential read of the same bytes (64 bytes a load, summed).
 * The paths take turns within a round. The numbers depend on the machine's load (run it on a quiet machine). */
#include "bench_clock.h"
#include "core/q8.h"
#include "ops/isa.h"
#include "tfm/kernels.h"
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const int SHAPES[4][2] = {{2304, 768}, {768, 768}, {3072, 768}, {768, 3072}};   /* N x K a layer */

/* seconds of the best of 10 passes: path >= 0 the GEMVs on that path, -1 a plain read of the weights' bytes */
static double best_pass(int path, int n, const tfm_q8_weight *w, const float *x, float *y) {
    double best = 1e30;
    volatile uint64_t sink = 0;
    for (int rep = 0; rep < 10; rep++) {
        double t0 = bench_now();
        for (int l = 0; l < n; l++) {
            if (path >= 0) {
                tfm_gemm_q8_path_((tfm_q8_path)path, 1, 1, x, w[l].cols, &w[l], NULL, y, w[l].rows);
                continue;
            }
            const uint64_t *p = (const uint64_t *)w[l].q;
            uint64_t s = 0;
            for (size_t i = 0, words = (size_t)w[l].rows * w[l].ld / 8; i < words; i += 8) s += p[i];   /* a line a load */
            sink += s;
        }
        double dt = bench_now() - t0;
        if (dt < best) best = dt;
    }
    (void)sink;
    return best;
}

int main(int argc, char **argv) {
    int rounds = 5, layers = 12;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--layers") && i + 1 < argc) layers = atoi(argv[++i]);
        else return fprintf(stderr, "usage: bench_gemv_q8 [--rounds R] [--layers L]\n"), 2;
    }
    if (rounds < 1 || rounds > 99 || layers < 1 || layers > 48)
        return fprintf(stderr, "bench_gemv_q8: --rounds 1..99, --layers 1..48\n"), 2;
    omp_set_num_threads(1);
    int n = 4 * layers;
    tfm_q8_weight *w = calloc((size_t)n, sizeof *w);
    float *x = malloc(3072 * sizeof(float)), *y = malloc(3072 * sizeof(float));
    if (!w || !x || !y) return fprintf(stderr, "bench_gemv_q8: out of memory\n"), 1;
    for (int i = 0; i < 3072; i++) x[i] = (float)((i * 37) % 101 - 50) / 50.0f;
    double bytes = 0;
    for (int l = 0; l < n; l++) {
        int N = SHAPES[l % 4][0], K = SHAPES[l % 4][1];
        float *W = malloc((size_t)N * K * sizeof(float));
        if (!W) return fprintf(stderr, "bench_gemv_q8: out of memory\n"), 1;
        for (size_t i = 0; i < (size_t)N * K; i++) W[i] = (float)((i * 7919) % 211) / 105.0f - 1.0f;
        if (tfm_q8_weight_quantize_(&w[l], W, N, K, (size_t)K)) return fprintf(stderr, "bench_gemv_q8: %s\n", tfm_last_error()), 1;
        free(W);
        bytes += (double)N * w[l].ld;
    }
    int paths[TFM_Q8_PATHS + 1], np = 0;
    paths[np++] = -1;
    for (int p = TFM_Q8_PATHS - 1; p >= 0; p--)
        if (tfm_q8_path_supported((tfm_q8_path)p)) paths[np++] = p;
    double *gbs = malloc(sizeof(double) * (size_t)np * rounds);
    if (!gbs) return 1;
    for (int r = 0; r < rounds; r++)
        for (int c = 0; c < np; c++) gbs[(size_t)c * rounds + r] = bytes / best_pass(paths[c], n, w, x, y) / 1e9;
    printf("one-row int8 GEMM over %d layers of GPT-2 small's weights (%.1f MB), 1 thread, median of %d rounds:\n",
           layers, bytes / 1e6, rounds);
    for (int c = 0; c < np; c++) {
        qsort(gbs + (size_t)c * rounds, (size_t)rounds, sizeof(double), bench_by_value);
        printf("  %-22s %6.1f GB/s\n", paths[c] < 0 ? "plain read" : tfm_q8_path_name((tfm_q8_path)paths[c]),
               gbs[(size_t)c * rounds + rounds / 2]);
    }
    for (int l = 0; l < n; l++) tfm_q8_weight_free_(&w[l]);
    free(w), free(x), free(y), free(gbs);
    return 0;
}
