/* Errors, threads, RNG, clock. */
#include "tfm/core.h"
#include <omp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <time.h>

static _Thread_local char last_error[512];

void tfm_set_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
}

const char *tfm_last_error(void) { return last_error[0] ? last_error : "unknown error"; }

int tfm_prefix_error(const char *fmt, ...) {
    char old[sizeof last_error];
    snprintf(old, sizeof old, "%s", tfm_last_error());
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n < sizeof last_error) snprintf(last_error + n, sizeof last_error - (size_t)n, "%s", old);
    return -1;
}

void tfm_fatal(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "tfm: internal error: ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    abort();
}

void tfm_set_threads(int n) {
    if (n <= 0) n = omp_get_num_procs();
    omp_set_num_threads(n);
}

int tfm_get_threads(void) { return omp_get_max_threads(); }

/* splitmix64 seeding, xorshift64* stream */
void tfm_rng_seed(tfm_rng *r, uint64_t seed) {
    uint64_t z = seed + 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    r->s = (z ^ (z >> 31)) | 1;
}

uint32_t tfm_rng_u32(tfm_rng *r) {
    r->s ^= r->s >> 12;
    r->s ^= r->s << 25;
    r->s ^= r->s >> 27;
    return (uint32_t)((r->s * 0x2545F4914F6CDD1Dull) >> 32);
}

float tfm_rng_uniform(tfm_rng *r) { return (tfm_rng_u32(r) >> 8) * (1.0f / 16777216.0f); }

float tfm_rng_normal(tfm_rng *r) {
    float u1 = tfm_rng_uniform(r), u2 = tfm_rng_uniform(r);
    if (u1 < 1e-12f) u1 = 1e-12f;
    return sqrtf(-2.0f * logf(u1)) * cosf(6.2831853071795864f * u2);
}

double tfm_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}
