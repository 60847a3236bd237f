/* The FMA loops of the peak measurements (bench/fma_peak.c, bench/peak_steps.c): every thread runs a loop of
 * independent FMAs of the widest vector the CPU has (16-wide AVX-512 where cpuid reports it, else 8-wide
 * AVX2+FMA; 12 accumulators: more than the FMA latency x the FMA ports (4 x 2 on Zen 3 to 5), and with the
 * two constants they fit the 16 ymm registers, so nothing spills and the loop is bound by FMA throughput
 * alone); one FMA = 2 flops x lanes. The loops touch no memory: a probe between training steps leaves
 * the caches as the step left them. */
#ifndef TFM_BENCH_FMA_LOOP_H
#define TFM_BENCH_FMA_LOOP_H
#include <immintrin.h>
#include <omp.h>

#define ACC 12

/* One loop per vector width: ACC (12) accumulators in registers, written out (a compiler keeps an array of
 * them in memory); V is the vector type, SET1 and FMA its intrinsics, SUM stores the lanes' sum. */
#define FMA4(x) x##0 = FMA(x##0, a, b), x##1 = FMA(x##1, a, b), x##2 = FMA(x##2, a, b), x##3 = FMA(x##3, a, b)
#define INIT4(x, k) x##0 = SET1(seed + k), x##1 = SET1(seed + k + 1), x##2 = SET1(seed + k + 2), \
                    x##3 = SET1(seed + k + 3)
#define FMA_LOOP_BODY(V, ADD, STORE, LANES)                                                              \
    V INIT4(p, 0), INIT4(q, 4), INIT4(r, 8); /* distinct: no two chains are the same */                   \
    const V a = SET1(0.999999f), b = SET1(1e-7f);                                                        \
    for (long it = 0; it < iters; it++) {                                                                \
        FMA4(p);                                                                                         \
        FMA4(q);                                                                                         \
        FMA4(r);                                                                                         \
    }                                                                                                    \
    V t = ADD(ADD(ADD(p0, p1), ADD(p2, p3)), ADD(ADD(q0, q1), ADD(q2, q3)));                             \
    t = ADD(t, ADD(ADD(r0, r1), ADD(r2, r3)));                                                           \
    float out[LANES];                                                                                    \
    STORE(out, t);                                                                                       \
    return out[0];

#define SET1 _mm256_set1_ps
#define FMA _mm256_fmadd_ps
__attribute__((target("avx2,fma"))) static float fma_loop8(long iters, float seed) {
    FMA_LOOP_BODY(__m256, _mm256_add_ps, _mm256_storeu_ps, 8)
}
#undef SET1
#undef FMA

/* 16-wide (AVX-512): a core with 512-bit FMA units (Zen 5, Intel server cores) does twice the flops per
 * FMA instruction; on one that splits them in two halves (Zen 4) the 16-wide peak equals the 8-wide one. */
#define SET1 _mm512_set1_ps
#define FMA _mm512_fmadd_ps
__attribute__((target("avx512f"))) static float fma_loop16(long iters, float seed) {
    FMA_LOOP_BODY(__m512, _mm512_add_ps, _mm512_storeu_ps, 16)
}
#undef SET1
#undef FMA

static int lanes = 8;   /* the widest FMA this CPU runs: fma_init sets it */

/* 0, or -1 if the CPU has no AVX2+FMA; picks 16-wide FMAs where it has AVX-512 */
static int fma_init(void) {
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) return -1;
    if (__builtin_cpu_supports("avx512f")) lanes = 16;
    return 0;
}

static float fma_loop(long iters, float seed) {
    return lanes == 16 ? fma_loop16(iters, seed) : fma_loop8(iters, seed);
}

/* GFLOP/s of `threads` threads, each running iters iterations at once (the slowest thread's time) */
static double gflops(int threads, long iters, float *sink) {
    double t0 = omp_get_wtime();
    float sum = 0;
#pragma omp parallel num_threads(threads) reduction(+ : sum)
    sum += fma_loop(iters, (float)omp_get_thread_num());
    double dt = omp_get_wtime() - t0;
    *sink += sum;
    return (double)threads * (double)iters * ACC * lanes * 2 / dt * 1e-9;
}

/* the iterations of one thread's loop that take about `seconds` */
static long fma_calibrate(double seconds, float *sink) {
    long iters = 1000;
    while (1) {
        double t0 = omp_get_wtime();
        *sink += fma_loop(iters, 1.0f);
        double dt = omp_get_wtime() - t0;
        if (dt > 0.2 * seconds) return (long)((double)iters * seconds / dt) + 1;
        iters *= 4;
    }
}
#endif
