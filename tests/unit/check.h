/* Tiny test helpers shared by every unit test binary.
 * Each check prints one line "PASS name" or "FAIL name: why"; tests/run.sh counts them. */
#ifndef TFM_TEST_CHECK_H
#define TFM_TEST_CHECK_H
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int check_failures = 0;

#define CHECK(name, cond, ...)                                   \
    do {                                                         \
        if (cond) {                                              \
            printf("PASS %s\n", name);                           \
        } else {                                                 \
            check_failures++;                                    \
            printf("FAIL %s: ", name);                           \
            printf(__VA_ARGS__);                                 \
            printf("\n");                                        \
        }                                                        \
        fflush(stdout);                                          \
    } while (0)

/* max |a-b| over n floats */
static inline double max_abs_diff(const float *a, const float *b, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (!(d <= m)) m = d; /* NaN propagates as failure */
    }
    return m;
}

/* ||a-b|| / max(||b||, 1e-12) */
static inline double rel_err(const float *a, const float *b, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)a[i] - (double)b[i];
        num += d * d;
        den += (double)b[i] * b[i];
    }
    double r = sqrt(num) / (sqrt(den) > 1e-12 ? sqrt(den) : 1e-12);
    return r == r ? r : 1e30;
}

#define CHECK_EXIT() return check_failures ? 1 : 0
/* The whole file at path, malloc'd with one spare byte; *n its length. NULL if it cannot be opened. */
static inline unsigned char *check_read_file(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)len + 1);
    *n = b ? fread(b, 1, (size_t)len, f) : 0;
    fclose(f);
    return b;
}

/* A fresh directory for a test's files: $TMPDIR (or /tmp)/tfm_<name>.XXXXXX into dir. 0, or -1 after a
 * FAIL line (the caller returns 1). */
static inline int check_tmpdir(char *dir, size_t size, const char *name) {
    const char *base = getenv("TMPDIR");
    snprintf(dir, size, "%s/tfm_%s.XXXXXX", base && *base ? base : "/tmp", name);
    if (mkdtemp(dir)) return 0;
    printf("FAIL %s: cannot create a temporary directory %s\n", name, dir);
    return -1;
}
/* Remove it and everything in it (a failure is a note, not a test failure). */
static inline void check_rm_tmpdir(const char *dir) {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) printf("# could not remove %s\n", dir);
}

#endif
