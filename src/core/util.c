/* Errors, threads, RNG, clock. */
#include "tfm/core.h"
#include <errno.h>
#include <omp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <time.h>
#include <dlfcn.h>
#include <sched.h>
#include <unistd.h>

static _Thread_local char last_error[512];
static _Thread_local tfm_error_kind last_kind;

void tfm_set_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    last_kind = TFM_ERR_OTHER;
}

void tfm_set_error_kind(tfm_error_kind kind, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    last_kind = kind;
}

const char *tfm_last_error(void) { return last_error[0] ? last_error : "unknown error"; }

tfm_error_kind tfm_last_error_kind(void) { return last_kind; }

int tfm_error_in_data(void) {
    if (last_kind == TFM_ERR_OTHER) last_kind = TFM_ERR_DATA;
    return -1;
}

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

/* OMP_NUM_THREADS's first value (the variable is a comma list) if it is a positive integer, else 0. */
static int env_threads(void) {
    const char *e = getenv("OMP_NUM_THREADS");
    if (!e) return 0;
    while (*e == ' ' || *e == '\t') e++;
    char *end;
    long n = strtol(e, &end, 10);
    while (*end == ' ' || *end == '\t') end++;
    if (end == e || (*end && *end != ',') || n < 1 || n > 4096) return 0;
    return (int)n;
}

/* With binding asked for (OMP_PROC_BIND, OMP_PLACES, GOMP_CPU_AFFINITY), libgomp binds the initial thread to
 * the first OpenMP place before main: its affinity mask is then one place, not the CPUs the process was given.
 * The places' union is those CPUs (or the ones OMP_PLACES names). set: that union when binding is active
 * (returns its count), else untouched (returns 0). */
static int bound_places_cpus(cpu_set_t *set) {
    if (omp_get_proc_bind() == omp_proc_bind_false || omp_get_num_places() <= 0) return 0;
    int ids[CPU_SETSIZE];
    CPU_ZERO(set);
    for (int p = 0; p < omp_get_num_places(); p++) {
        int n = omp_get_place_num_procs(p);
        if (n <= 0 || n > CPU_SETSIZE) continue;
        omp_get_place_proc_ids(p, ids);
        for (int i = 0; i < n; i++)
            if (ids[i] >= 0 && ids[i] < CPU_SETSIZE) CPU_SET(ids[i], set);
    }
    return CPU_COUNT(set);
}

/* the CPUs this process may run on: the bound places' union, else the affinity mask, else what OpenMP says */
static int usable_cpus(void) {
    cpu_set_t set;
    int n = bound_places_cpus(&set);
    if (n > 0) return n;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0 && (n = CPU_COUNT(&set)) > 0) return n;
    n = omp_get_num_procs();
    return n > 0 ? n : 1;
}

int tfm_default_threads(void) {
    int n = env_threads();
    if (n > 0) return n;
    n = usable_cpus();
    double quota = tfm_cpu_quota();   /* 1.5 CPUs of time: 2 threads */
    if (quota > 0 && quota < n) n = (int)ceil(quota);
    return n > 0 ? n : 1;
}

int tfm_mul_size_overflow(size_t a, size_t b, size_t *out) {
    if (b && a > SIZE_MAX / b) return 1;
    *out = a * b;
    return 0;
}

int tfm_all_finite(const float *x, size_t n) {
    uint32_t bad = 0;   /* integer ops, no branch: vectorised (a float sum would be one dependent add a value) */
    for (size_t i = 0; i < n; i++) {
        uint32_t b;
        memcpy(&b, x + i, sizeof b);
        bad |= (b & 0x7f800000u) == 0x7f800000u;   /* exponent all ones: an infinity or a NaN */
    }
    return !bad;
}

int64_t tfm_mul_i64_sat(int64_t a, int64_t b) {
    if (a <= 0 || b <= 0) return 0;
    return a > INT64_MAX / b ? INT64_MAX : a * b;
}

void tfm_set_threads(int n) {
    if (n <= 0) n = tfm_default_threads();
    if (n > TFM_MAX_THREADS) n = TFM_MAX_THREADS;
    omp_set_num_threads(n);
}

int tfm_threads_short_spin(char **argv) {
    if (getenv("OMP_WAIT_POLICY") || getenv("GOMP_SPINCOUNT") || getenv("KMP_BLOCKTIME")) return 0;
    /* Both runtimes read these variables before main (setenv here would be too late). LLVM's libomp has a
     * call for it; GNU libgomp has none, so the program runs again with GOMP_SPINCOUNT in its environment. */
    void (*set_blocktime)(int);
    *(void **)&set_blocktime = dlsym(RTLD_DEFAULT, "kmp_set_blocktime");
    if (set_blocktime) {
        set_blocktime(1); /* ms */
        return 0;
    }
    if (!argv || !argv[0]) return -1;
    setenv("GOMP_SPINCOUNT", TFM_SPINCOUNT, 1);
    cpu_set_t set, bound;   /* the new image would inherit the one-place mask of a bound initial thread: give it them all */
    int widen = bound_places_cpus(&set) > 0 && sched_getaffinity(0, sizeof bound, &bound) == 0;
    if (widen) sched_setaffinity(0, sizeof set, &set);
    execv("/proc/self/exe", argv);
    if (widen) sched_setaffinity(0, sizeof bound, &bound);
    unsetenv("GOMP_SPINCOUNT");
    return -1; /* exec failed: carry on with the runtime's default spin (and binding) */
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

char *tfm_read_stream(void *file, const char *name, size_t max, size_t *len) {
    FILE *f = file;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    while (buf) {
        if (n == cap) {
            if (cap >= max) {
                free(buf);
                tfm_set_error("%s: more than %zu bytes", name, max);
                return NULL;
            }
            char *nb = realloc(buf, 2 * cap + 1);
            if (!nb) break;
            buf = nb;
            cap *= 2;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) {
            if (ferror(f)) {
                free(buf);
                tfm_set_error_kind(TFM_ERR_IO, "%s: read error: %s", name, strerror(errno));
                return NULL;
            }
            buf[n] = 0;
            *len = n;
            return buf;
        }
    }
    free(buf);
    tfm_set_error_kind(TFM_ERR_NOMEM, "%s: out of memory", name);
    return NULL;
}
