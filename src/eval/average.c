/* Checkpoint averaging at the container level (include/tfm/eval.h): param.* entries are averaged,
 * adam.* / train.* / run.* (training state, run configuration) are dropped, every other entry must be identical in every input. No model code. */
#include "tfm/eval.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tfm/core.h"
#include "tfm/io.h"

static int starts_with(const char *s, const char *prefix) { return !strncmp(s, prefix, strlen(prefix)); }

/* not compared, not written: training state (tfm_is_training_entry), earlier averages' notes, and a stored
 * ensemble's member names (the mean of the weights is one model) */
static int is_dropped(const char *name) {
    return tfm_is_training_entry(name) || !strcmp(name, "meta.averaged") || !strcmp(name, "meta.ema") ||
           !strcmp(name, "decode.ensemble");
}
static int is_param(const char *name) { return starts_with(name, "param."); }

static size_t n_elems(const tfm_entry *e) { return e->nbytes / 4; }

static void shape_str(const tfm_entry *e, char *buf, size_t n) {
    size_t o = (size_t)snprintf(buf, n, "(");
    for (int d = 0; d < e->ndim && o < n; d++)
        o += (size_t)snprintf(buf + o, n - o, d ? ", %d" : "%d", e->shape[d]);
    if (o < n) snprintf(buf + o, n - o, ")");
}

static int same_shape(const tfm_entry *a, const tfm_entry *b) {
    if (a->dtype != b->dtype || a->ndim != b->ndim || a->nbytes != b->nbytes) return 0;
    for (int d = 0; d < a->ndim; d++)
        if (a->shape[d] != b->shape[d]) return 0;
    return 1;
}

/* One-line description of how b (in file bp) differs from a (in file ap); a and b have the same name. */
static void describe_difference(const tfm_entry *a, const char *ap, const tfm_entry *b, const char *bp) {
    if (a->dtype == TFM_DT_BYTES && b->dtype == TFM_DT_BYTES) {
        const char *x = a->data, *y = b->data;
        size_t i = 0, line = 1;
        while (i < a->nbytes && i < b->nbytes && x[i] == y[i]) line += x[i++] == '\n';
        tfm_set_error("%s: entry '%s' differs from %s's (first difference at line %zu)", bp, b->name, ap, line);
    } else if (same_shape(a, b) && n_elems(a) == 1) {
        char va[48], vb[48];
        if (a->dtype == TFM_DT_F32) {
            snprintf(va, sizeof va, "%.9g", (double)*(const float *)a->data);
            snprintf(vb, sizeof vb, "%.9g", (double)*(const float *)b->data);
        } else {
            snprintf(va, sizeof va, "%d", *(const int *)a->data);
            snprintf(vb, sizeof vb, "%d", *(const int *)b->data);
        }
        tfm_set_error("%s: entry '%s' is %s but %s in %s", bp, b->name, vb, va, ap);
    } else if (!same_shape(a, b)) {
        char sa[96], sb[96];
        shape_str(a, sa, sizeof sa);
        shape_str(b, sb, sizeof sb);
        tfm_set_error("%s: entry '%s' has dtype %d shape %s but dtype %d shape %s in %s", bp, b->name, b->dtype, sb,
                      a->dtype, sa, ap);
    } else {
        size_t i = 0;
        while (i < a->nbytes / 4 && ((const int *)a->data)[i] == ((const int *)b->data)[i]) i++;
        tfm_set_error("%s: entry '%s' differs from %s's (first difference at element %zu)", bp, b->name, ap, i);
    }
}

/* Adds the f32 values of e into sum; refuses a non-finite value (a diverged model). */
static int accumulate(double *sum, const tfm_entry *e, const char *path) {
    const float *v = e->data;
    for (size_t i = 0; i < n_elems(e); i++) {
        if (!isfinite(v[i])) {
            tfm_set_error("%s: entry '%s' holds a non-finite value at element %zu (diverged model?)", path, e->name, i);
            return -1;
        }
        sum[i] += (double)v[i];
    }
    return 0;
}

/* Checks that c (file path) matches base entry for entry, and adds its parameters into sums. */
static int add_checkpoint(const tfm_container *base, double **sums, const tfm_container *c, const char *path) {
    for (int i = 0; i < base->n; i++) {
        const tfm_entry *a = &base->e[i];
        if (is_dropped(a->name)) continue;
        const tfm_entry *b = tfm_container_get(c, a->name);
        if (!b) {
            tfm_set_error("%s: entry '%s' missing (present in %s)", path, a->name, base->path);
            return -1;
        }
        if (is_param(a->name) ? !same_shape(a, b) : (!same_shape(a, b) || memcmp(a->data, b->data, a->nbytes))) {
            describe_difference(a, base->path, b, path);
            return -1;
        }
        if (is_param(a->name) && accumulate(sums[i], b, path)) return -1;
    }
    for (int i = 0; i < c->n; i++)
        if (!is_dropped(c->e[i].name) && !tfm_container_get(base, c->e[i].name)) {
            tfm_set_error("%s: extra entry '%s' (not in %s)", path, c->e[i].name, base->path);
            return -1;
        }
    return 0;
}

/* The output is a new file, not one of the inputs (the one check of every tfm command: tfm_check_files). */
static int check_files(const char *out, const char *const *inputs, int n) {
    tfm_file_use *f = malloc(sizeof *f * ((size_t)n + 1));
    if (!f) return tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory"), -1;
    for (int k = 0; k < n; k++) f[k] = (tfm_file_use){"input checkpoint", inputs[k], TFM_FILE_IN};
    f[n] = (tfm_file_use){"the average", out, TFM_FILE_OUT};
    int rc = tfm_check_files(f, n + 1);
    free(f);
    return rc;
}

/* The output: base's kept entries in order, parameters replaced by sum / n, plus meta.averaged. */
static int build_output(tfm_container *out, const tfm_container *base, double *const *sums, const char *const *inputs,
                        int n) {
    for (int i = 0; i < base->n; i++) {
        const tfm_entry *a = &base->e[i];
        if (is_dropped(a->name)) continue;
        if (!is_param(a->name)) {
            if (!tfm_container_add(out, a->name, a->dtype, a->ndim, a->shape, a->data, a->nbytes)) return -1;
            continue;
        }
        tfm_entry *e = tfm_container_add(out, a->name, TFM_DT_F32, a->ndim, a->shape, NULL, a->nbytes);
        if (!e) return -1;
        float *v = e->data;
        for (size_t j = 0; j < n_elems(a); j++) v[j] = (float)(sums[i][j] / n);
    }
    size_t len = 64;
    for (int k = 0; k < n; k++) len += strlen(inputs[k]) + 1;
    char *note = malloc(len);
    if (!note) {
        tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory");
        return -1;
    }
    size_t o = (size_t)snprintf(note, len, "mean of %d checkpoints:", n);
    for (int k = 0; k < n; k++) {  /* file names without their directories */
        const char *slash = strrchr(inputs[k], '/');
        o += (size_t)snprintf(note + o, len - o, " %s", slash ? slash + 1 : inputs[k]);
    }
    int rc = tfm_container_add_str(out, "meta.averaged", note) ? 0 : -1;
    free(note);
    return rc;
}

int tfm_checkpoint_average(const char *const *inputs, int n, const char *out_path) {
    if (n < 2) {
        tfm_set_error("averaging needs at least two checkpoints (got %d)", n);
        return -1;
    }
    if (check_files(out_path, inputs, n)) return -1;
    tfm_container base, c, out;
    tfm_container_init(&c);
    tfm_container_init(&out);
    if (tfm_container_load(&base, inputs[0])) return -1;
    int rc = -1, n_params = 0;
    double **sums = calloc((size_t)base.n + 1, sizeof *sums);
    if (!sums) {
        tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (int i = 0; i < base.n; i++) {
        const tfm_entry *a = &base.e[i];
        if (!is_param(a->name)) continue;
        if (a->dtype != TFM_DT_F32) {
            tfm_set_error("%s: entry '%s' is not float32%s", inputs[0], a->name,
                          a->dtype == TFM_DT_I8 ? " (an int8 model: average the fp32 checkpoints, then quantize)" : "");
            goto done;
        }
        sums[i] = calloc(n_elems(a) + 1, sizeof **sums);
        if (!sums[i]) {
            tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory (%s: entry '%s')", inputs[0], a->name);
            goto done;
        }
        if (accumulate(sums[i], a, inputs[0])) goto done;
        n_params++;
    }
    if (!n_params) {
        tfm_set_error("%s: no param.* entries (not a tfm model checkpoint)", inputs[0]);
        goto done;
    }
    for (int k = 1; k < n; k++) {
        if (tfm_container_load(&c, inputs[k])) goto done;
        int bad = add_checkpoint(&base, sums, &c, inputs[k]);
        tfm_container_free(&c);
        if (bad) goto done;
    }
    if (build_output(&out, &base, sums, inputs, n)) goto done;
    rc = tfm_container_save(&out, out_path);
done:
    if (rc) tfm_error_in_data();   /* inputs that differ, non-finite or missing entries (I/O errors stay I/O) */
    for (int i = 0; sums && i < base.n; i++) free(sums[i]);
    free(sums);
    tfm_container_free(&base);
    tfm_container_free(&c);
    tfm_container_free(&out);
    return rc;
}
