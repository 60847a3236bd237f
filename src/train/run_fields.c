/* The fields of a run's options (include/tfm/run.h): parsing and formatting their values, and the run
 * configuration built from them, with the rules of a resume. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tfm/run.h"

#define VALUE(f, opts, type) ((type *)((char *)(opts) + (f)->offset))
#define CVALUE(f, opts, type) ((const type *)((const char *)(opts) + (f)->offset))

int tfm_field_find(const tfm_field *f, int n, const char *name) {
    char key[64];
    snprintf(key, sizeof key, "%s", name);
    for (char *p = key; *p; p++) *p = *p == '_' ? '-' : *p;
    for (int i = 0; i < n; i++)
        if (!strcmp(f[i].name, key)) return i;
    return -1;
}

static int parse_int(const char *s, int *out) {
    errno = 0;
    char *end;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < INT_MIN || v > INT_MAX) return -1;
    *out = (int)v;
    return 0;
}

static int parse_float(const char *s, float *out) {
    errno = 0;
    char *end;
    float v = strtof(s, &end);
    if (end == s || *end || (errno == ERANGE && isinf(v))) return -1;
    *out = v;
    return 0;
}

int tfm_field_parse(const tfm_field *f, void *opts, const char *text) {
    switch (f->type) {
    case TFM_FIELD_INT:
        if (!parse_int(text, VALUE(f, opts, int))) return 0;
        return tfm_set_error("--%s: '%.40s' is not an integer", f->name, text), -1;
    case TFM_FIELD_FLOAT:
        if (!parse_float(text, VALUE(f, opts, float))) return 0;
        return tfm_set_error("--%s: '%.40s' is not a number", f->name, text), -1;
    case TFM_FIELD_BOOL:
        if (strcmp(text, "0") && strcmp(text, "1")) return tfm_set_error("--%s: '%.40s' is not 0 or 1", f->name, text), -1;
        *VALUE(f, opts, int) = text[0] == '1';
        return 0;
    default:
        *VALUE(f, opts, const char *) = *text ? text : NULL;
        return 0;
    }
}

void tfm_field_format(const tfm_field *f, const void *opts, char *buf, size_t n) {
    switch (f->type) {
    case TFM_FIELD_INT: snprintf(buf, n, "%d", *CVALUE(f, opts, int)); break;
    case TFM_FIELD_FLOAT: {   /* the shortest of %g / %.9g that reads back as the same float */
        float v = *CVALUE(f, opts, float);
        snprintf(buf, n, "%g", v);
        if (strtof(buf, NULL) != v) snprintf(buf, n, "%.9g", v);
        break;
    }
    case TFM_FIELD_BOOL: snprintf(buf, n, "%d", *CVALUE(f, opts, int) ? 1 : 0); break;
    default: snprintf(buf, n, "%s", *CVALUE(f, opts, char *) ? *CVALUE(f, opts, char *) : ""); break;
    }
}

int tfm_run_config_from(const tfm_field *f, int n, const void *opts, tfm_run_config *rc) {
    char buf[4200], key[96];
    for (int i = 0; i < n; i++) {
        if (f[i].cls == TFM_FIELD_LOCAL) continue;
        tfm_field_format(&f[i], opts, buf, sizeof buf);
        if (tfm_run_config_set(rc, f[i].name, buf)) return -1;
        if (f[i].cls != TFM_FIELD_DATA || !*buf) continue;
        char abs[4200];   /* the path as given, and resolved: a resume from another directory finds it */
        snprintf(key, sizeof key, "path:%s", f[i].name);
        if (buf[0] != '/' && realpath(buf, abs) && tfm_run_config_set(rc, key, abs)) return -1;
        snprintf(key, sizeof key, "data:%s", f[i].name);
        if (tfm_file_fingerprint(buf, buf, sizeof buf) || tfm_run_config_set(rc, key, buf))
            return tfm_prefix_error("--%s: ", f[i].name);
    }
    return 0;
}

/* A stored relative data path not found from here: the resolved path stored beside it, if it can be read. */
static void find_data_again(const tfm_field *f, void *opts, const tfm_run_config *stored) {
    char key[96];
    const char *path = *CVALUE(f, opts, char *);
    snprintf(key, sizeof key, "path:%s", f->name);
    const char *abs = tfm_run_config_find(stored, key);
    if (path && abs && access(path, R_OK) && !access(abs, R_OK)) *VALUE(f, opts, const char *) = abs;
}

/* A DATA field's file against the fingerprint stored for it: 0 the same (or nothing to compare), 1 different,
 * -1 unreadable (error set). */
static int data_differs(const tfm_field *f, const void *opts, const tfm_run_config *stored, int is_given,
                        const char *ckpt, char *buf, size_t n) {
    char key[96];
    snprintf(key, sizeof key, "data:%s", f->name);
    const char *fp = tfm_run_config_find(stored, key), *path = *CVALUE(f, opts, char *);
    if (!fp || !path) return 0;
    if (tfm_file_fingerprint(path, buf, n)) {   /* a stored path is relative to where the run started */
        if (!is_given)
            tfm_set_error("--resume %s: --%s %s (the run's, stored in the checkpoint) cannot be read from here; give "
                          "--%s PATH to name it", ckpt, f->name, path, f->name);
        return -1;
    }
    if (!strcmp(buf, fp)) return 0;
    return tfm_set_error("--resume: --%s %s is not the data of the run (%s; the checkpoint's: %s); allow_new_data "
                         "(--allow-new-data) to train on it anyway", f->name, path, buf, fp), 1;
}

int tfm_run_config_resume(const tfm_field *f, int n, void *opts, const unsigned char *given,
                          const tfm_run_config *stored, int allow_new_data, const char *path, int *new_data) {
    char buf[4200];
    if (new_data) *new_data = -1;
    for (int i = 0; i < n; i++) {
        const char *v = tfm_run_config_find(stored, f[i].name);
        if (f[i].cls == TFM_FIELD_LOCAL || !v) continue;
        int is_given = given && given[i];
        tfm_field_format(&f[i], opts, buf, sizeof buf);
        if (!is_given && tfm_field_parse(&f[i], opts, v))
            return tfm_set_error("--resume: %s: run.%s '%.40s' is not a value of --%s (the checkpoint is edited or "
                                 "corrupt)", path, f[i].name, v, f[i].name), -1;
        if (is_given && f[i].cls == TFM_FIELD_FIXED && strcmp(buf, v))
            return tfm_set_error("--resume: --%s %s differs from the checkpoint's --%s %s (a resume continues the "
                                 "stored run; only --threads, --log-every, the length and checkpoint flags may "
                                 "change)", f[i].name, buf, f[i].name, v), -1;
        if (f[i].cls != TFM_FIELD_DATA) continue;
        if (!is_given) find_data_again(&f[i], opts, stored);
        int d = data_differs(&f[i], opts, stored, is_given, path, buf, sizeof buf);
        if (d < 0 || (d > 0 && !allow_new_data)) return -1;
        if (d > 0 && new_data) *new_data = i;
    }
    return 0;
}

int tfm_run_config_match(const tfm_field *f, int n, const void *opts, const unsigned char *given,
                         const tfm_run_config *stored, const char *path) {
    char buf[4200];
    for (int i = 0; i < n; i++) {
        const char *v = tfm_run_config_find(stored, f[i].name);
        if (!v || f[i].cls == TFM_FIELD_LOCAL || f[i].cls == TFM_FIELD_DATA ||
            (given && given[i] && f[i].cls == TFM_FIELD_CHANGEABLE))
            continue;
        tfm_field_format(&f[i], opts, buf, sizeof buf);
        if (strcmp(buf, v))
            return tfm_set_error("--resume: %s: run.%s is %.40s but the model and training state it holds say %.40s "
                                 "(config.* / train.* / run.* edited or corrupt)", path, f[i].name, v, buf), -1;
    }
    return 0;
}
