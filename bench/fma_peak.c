/* The machine's FP32 FMA peak, measured: every thread runs the FMA loop of bench/fma_loop.h (the widest
 * vector FMAs the CPU has, independent, from registers) and the GFLOP/s of 1..N threads are printed.
 * This is the number "share of peak" is quoted against in docs/BENCHMARKS.md: the clock a VM's cpuinfo
 * reports (the nominal one) is not the clock the core runs at, so the peak is measured, not computed.
 *   cc -O2 -fopenmp bench/fma_peak.c -o /tmp/fma_peak && /tmp/fma_peak [seconds [threads]]     (bench/peak.sh)
 * With a thread count only that count is measured (bench/peak.sh's probes around every timed run).
 */
#include <stdio.h>
#include <stdlib.h>

#include "fma_loop.h"

int main(int argc, char **argv) {
    if (fma_init()) {
        fprintf(stderr, "fma_peak: this CPU has no AVX2+FMA\n");
        return 2;
    }
    double seconds = argc > 1 ? atof(argv[1]) : 1.0;
    int max_threads = omp_get_num_procs(), min_threads = 1;
    if (argc > 2) min_threads = max_threads = atoi(argv[2]);
    if (seconds <= 0 || max_threads < 1) {
        fprintf(stderr, "fma_peak: usage: fma_peak [seconds > 0 [threads >= 1]]\n");
        return 2;
    }
    float sink = 0;
    long iters = fma_calibrate(seconds, &sink);
    for (int t = min_threads; t <= max_threads; t++) {
        double best = 0;
        for (int rep = 0; rep < 5; rep++) {
            double g = gflops(t, iters, &sink);
            if (g > best) best = g;
        }
        printf("fma_peak: %d thread%s: %.1f GFLOP/s (best of 5 runs of %.2f s; %d-wide FMA = %d flops)\n", t,
               t > 1 ? "s" : "", best, seconds, lanes, 2 * lanes);
    }
    return sink == 12345.0f;   /* keeps the loops from being optimised away */
}
