/* Files around a checkpoint (include/tfm/train.h): stale PATH.tmp.<pid> files of killed saves, and the
 * --keep-last copies PATH.step<N>.tfm (hard links: no second write, and each one complete). */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include "tfm/train.h"

/* dir and base name of path (dir "." when there is no slash) */
static void split_path(const char *path, char *dir, size_t ndir, const char **base) {
    const char *slash = strrchr(path, '/');
    if (!slash) {
        snprintf(dir, ndir, ".");
        *base = path;
    } else {
        snprintf(dir, ndir, "%.*s", slash == path ? 1 : (int)(slash - path), path);
        *base = slash + 1;
    }
}

/* a decimal number filling all of s (> 0, fits a long) */
static long parse_num(const char *s, const char *end_expected) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (end == s || errno || v <= 0 || strcmp(end, end_expected)) return -1;
    for (const char *q = s; q < end; q++)
        if (*q < '0' || *q > '9') return -1;
    return v;
}

int tfm_ckpt_remove_stale_tmp(const char *path) {
    char dir[4096];
    const char *base;
    split_path(path, dir, sizeof dir, &base);
    DIR *d = opendir(dir);
    if (!d) return 0;
    size_t nb = strlen(base);
    int removed = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, base, nb) || strncmp(e->d_name + nb, ".tmp.", 5)) continue;
        long pid = parse_num(e->d_name + nb + 5, "");
        if (pid <= 0 || pid == (long)getpid()) continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue;   /* still running (or not ours to ask) */
        char full[8192];
        snprintf(full, sizeof full, "%s/%s", dir, e->d_name);
        if (unlink(full) == 0) removed++;
    }
    closedir(d);
    return removed;
}

static int cmp_long(const void *a, const void *b) {
    long x = *(const long *)a, y = *(const long *)b;
    return (x > y) - (x < y);
}

void tfm_ckpt_sibling(const char *path, const char *suffix, char *out, size_t n) {
    size_t len = strlen(path);
    int cut = len > 4 && !strcmp(path + len - 4, ".tfm") ? 4 : 0;
    snprintf(out, n, "%.*s%s", (int)(len - cut), path, suffix);
}

int tfm_ckpt_keep_step(const char *path, int step, int keep) {
    char stem[4096], name[8192], dir[4096], suffix[32];
    tfm_ckpt_sibling(path, "", stem, sizeof stem);
    snprintf(suffix, sizeof suffix, ".step%d.tfm", step);
    tfm_ckpt_sibling(path, suffix, name, sizeof name);
    unlink(name);
    if (link(path, name)) return tfm_set_error_kind(TFM_ERR_IO, "%s: cannot link %s: %s", path, name, strerror(errno)), -1;
    const char *base;
    split_path(stem, dir, sizeof dir, &base);
    DIR *d = opendir(dir);
    if (!d) return tfm_set_error_kind(TFM_ERR_IO, "%s: cannot list %s: %s", path, dir, strerror(errno)), -1;
    size_t nb = strlen(base), count = 0, cap = 16;
    long *steps = malloc(sizeof(long) * cap);
    struct dirent *e;
    while (steps && (e = readdir(d))) {
        if (strncmp(e->d_name, base, nb) || strncmp(e->d_name + nb, ".step", 5)) continue;
        long s = parse_num(e->d_name + nb + 5, ".tfm");
        if (s <= 0) continue;
        if (count == cap) {
            long *more = realloc(steps, sizeof(long) * (cap *= 2));
            if (!more) break;
            steps = more;
        }
        steps[count++] = s;
    }
    closedir(d);
    if (!steps) return tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory"), -1;
    qsort(steps, count, sizeof *steps, cmp_long);
    for (size_t i = 0; keep > 0 && i + (size_t)keep < count; i++) {
        snprintf(name, sizeof name, "%s.step%ld.tfm", stem, steps[i]);
        unlink(name);
    }
    free(steps);
    return 0;
}
