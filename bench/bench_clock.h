/* What the bench programs share: a monotonic clock in seconds and a qsort order for doubles. */
#ifndef TFM_BENCH_CLOCK_H
#define TFM_BENCH_CLOCK_H
#include <time.h>

static inline double bench_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static inline int bench_by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

#endif
