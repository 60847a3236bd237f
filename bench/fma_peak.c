/* The machine's FP32 FMA peak, measured: every thread runs a loop of independent 8-wide FMAs (AVX2+FMA;
 * 12 accumulators: more than the FMA latency x the FMA ports (4 x 2 on Zen 3), and with the two constants
 * they fit the 16 ymm registers, so nothing spills and the loop is bound by FMA throughput alone) and the GFLOP/s of 1..N threads are printed, one FMA = 2 flops x 8 lanes.
 * This is the number "share of peak" is quoted against in docs/BENCHMARKS.md: the clock a VM's cpuinfo
 * reports (the nominal one) is not the clock the core runs at, so the peak is measured, not computed.
 *   cc -O2 -fopenmp bench/fma_peak.c -o /tmp/fma_peak && /tmp/fma_peak [seconds]     (bench/peak.sh)
 */
#include <immintrin.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

#define ACC 12

#define FMA4(x) x##0 = _mm256_fmadd_ps(x##0, a, b), x##1 = _mm256_fmadd_ps(x##1, a, b), \
                x##2 = _mm256_fmadd_ps(x##2, a, b), x##3 = _mm256_fmadd_ps(x##3, a, b)

/* ACC (12) accumulators in registers, written out: a compiler keeps an array of them in memory */
__attribute__((target("avx2,fma"))) static float fma_loop(long iters, float seed) {
#define INIT4(x, k) x##0 = _mm256_set1_ps(seed + k), x##1 = _mm256_set1_ps(seed + k + 1), \
                    x##2 = _mm256_set1_ps(seed + k + 2), x##3 = _mm256_set1_ps(seed + k + 3)
    __m256 INIT4(p, 0), INIT4(q, 4), INIT4(r, 8);   /* distinct: no two chains are the same */
    const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
    for (long it = 0; it < iters; it++) {
        FMA4(p);
        FMA4(q);
        FMA4(r);
    }
    __m256 t = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(p0, p1), _mm256_add_ps(p2, p3)),
                             _mm256_add_ps(_mm256_add_ps(q0, q1), _mm256_add_ps(q2, q3)));
    t = _mm256_add_ps(t, _mm256_add_ps(_mm256_add_ps(r0, r1), _mm256_add_ps(r2, r3)));
    float out[8];
    _mm256_storeu_ps(out, t);
    return out[0];
}

/* GFLOP/s of `threads` threads, each running iters iterations at once (the slowest thread's time) */
static double gflops(int threads, long iters, float *sink) {
    double t0 = omp_get_wtime();
    float sum = 0;
#pragma omp parallel num_threads(threads) reduction(+ : sum)
    sum += fma_loop(iters, (float)omp_get_thread_num());
    double dt = omp_get_wtime() - t0;
    *sink += sum;
    return (double)threads * (double)iters * ACC * 8 * 2 / dt * 1e-9;
}

int main(int argc, char **argv) {
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) {
        fprintf(stderr, "fma_peak: this CPU has no AVX2+FMA\n");
        return 2;
    }
    double seconds = argc > 1 ? atof(argv[1]) : 1.0;
    int max_threads = omp_get_num_procs();
    float sink = 0;
    long iters = 1000000;
    while (1) {   /* calibrate: one thread's loop takes about `seconds` */
        double t0 = omp_get_wtime();
        sink += fma_loop(iters, 1.0f);
        double dt = omp_get_wtime() - t0;
        if (dt > 0.2 * seconds) {
            iters = (long)((double)iters * seconds / dt);
            break;
        }
        iters *= 4;
    }
    for (int t = 1; t <= max_threads; t++) {
        double best = 0;
        for (int rep = 0; rep < 5; rep++) {
            double g = gflops(t, iters, &sink);
            if (g > best) best = g;
        }
        printf("fma_peak: %d thread%s: %.1f GFLOP/s (best of 5 runs of %.2f s; 8-wide FMA = 16 flops)\n", t,
               t > 1 ? "s" : "", best, seconds);
    }
    return sink == 12345.0f;   /* keeps the loops from being optimised away */
}
