/* Parameter blocks in and out of a container (see include/tfm/checkpoint.h). The optimizer moments
 * (tfm_ckpt_put_adamw, src/train/optim.c) are blocks parallel to the parameters, saved the same way. */
#include "tfm/checkpoint.h"
#include "core/q8.h"
#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

void tfm_ckpt_put_block(tfm_container *c, const char *prefix, const tfm_params *p, const float *block) {
    char name[300];
    for (int i = 0; i < p->n; i++) {
        const tfm_tensor *t = p->t[i];
        snprintf(name, sizeof name, "%s%s", prefix, t->name);
        if (!tfm_container_add_f32(c, name, t->ndim, t->shape, block + (t->data - p->data)))
            tfm_fatal("checkpoint: cannot add %s: %s", name, tfm_last_error());
    }
}

/* x[0..n) (entry `name`'s values) all finite (and >= 0 if nonneg); else an error naming the entry and the first
 * bad index */
static int check_floats(const float *x, size_t n, const char *name, int nonneg, const char *path) {
    if (!nonneg && tfm_all_finite(x, n)) return 0;   /* the vector pass; the loop finds the first bad one */
    for (size_t i = 0; i < n; i++) {
        float v;
        memcpy(&v, x + i, sizeof v);
        if (!isfinite(v) || (nonneg && v < 0))
            return tfm_set_error("%s: entry '%s' holds %s value %g at index %zu", path, name,
                                 isfinite(v) ? "a negative" : "a non-finite", (double)v, i),
                   -1;
    }
    return 0;
}

static int check_values(const tfm_entry *e, int nonneg, const char *path) {
    return check_floats(e->data, e->nbytes / sizeof(float), e->name, nonneg, path);
}

/* entry e (named name) is present, F32 and of tensor t's shape */
static int check_f32_shape(const tfm_entry *e, const tfm_tensor *t, const char *name, const char *path) {
    if (!e) return tfm_set_error("%s: entry '%s' missing", path, name), -1;
    int ok = e->dtype == TFM_DT_F32 && e->ndim == t->ndim;
    for (int d = 0; ok && d < t->ndim; d++) ok = e->shape[d] == t->shape[d];
    if (!ok || e->nbytes != t->size * sizeof(float))
        return tfm_set_error("%s: entry '%s' has the wrong type or shape", path, name), -1;
    return 0;
}

/* ... and holds tensor t's values: finite (non-negative if nonneg) */
static int check_f32_entry(const tfm_entry *e, const tfm_tensor *t, const char *name, int nonneg, const char *path) {
    return check_f32_shape(e, t, name, path) ? -1 : check_values(e, nonneg, path);
}

int tfm_ckpt_check_block(const tfm_params *p, const float *block, const char *what, int nonneg) {
    for (int k = 0; k < p->n; k++) {
        const tfm_tensor *t = p->t[k];
        const float *x = block + (t->data - p->data);
        if (tfm_all_finite(x, t->size) && !nonneg) continue;
        for (size_t i = 0; i < t->size; i++)
            if (!isfinite(x[i]) || (nonneg && x[i] < 0))
                return tfm_set_error("%s '%s' holds %g at index %zu", what, t->name, (double)x[i], i), -1;
    }
    return 0;
}

/* Check every tensor first (presence, shape, finite values), then copy: a bad file leaves the
 * destination untouched. nonneg: values must also be >= 0 (Adam's second moments). */
int tfm_ckpt_get_block(const tfm_container *c, const char *prefix, const tfm_params *p, float *block,
                       const char *path, int nonneg) {
    char name[300];
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < p->n; i++) {
            const tfm_tensor *t = p->t[i];
            snprintf(name, sizeof name, "%s%s", prefix, t->name);
            const tfm_entry *e = tfm_container_get(c, name);
            if (pass == 0) {
                if (check_f32_entry(e, t, name, nonneg, path)) return -1;
            } else {
                memcpy(block + (t->data - p->data), e->data, t->size * sizeof(float));
            }
        }
    return 0;
}

/* A parameter held in int8 (t->q8): param.<name> i8 (rows, cols) without the kernels' row padding, and
 * qscale.<name> f32 (rows). */
static void put_q8(tfm_container *c, const tfm_tensor *t) {
    const tfm_q8_weight *w = t->q8;
    char name[300];
    snprintf(name, sizeof name, "param.%s", t->name);
    tfm_entry *e = tfm_container_add(c, name, TFM_DT_I8, 2, t->shape, NULL, (size_t)w->rows * w->cols);
    if (!e) tfm_fatal("checkpoint: cannot add %s: %s", name, tfm_last_error());
    for (int r = 0; r < w->rows; r++)
        memcpy((int8_t *)e->data + (size_t)r * w->cols, w->q + (size_t)r * w->ld, (size_t)w->cols);
    snprintf(name, sizeof name, TFM_Q8_SCALE_PREFIX "%s", t->name);
    if (!tfm_container_add_f32(c, name, 1, &w->rows, w->scale))
        tfm_fatal("checkpoint: cannot add %s: %s", name, tfm_last_error());
}

void tfm_ckpt_put_params(tfm_container *c, const tfm_params *p) {
    char name[300];
    for (int i = 0; i < p->n; i++) {
        const tfm_tensor *t = p->t[i];
        if (t->q8) {
            put_q8(c, t);
            continue;
        }
        snprintf(name, sizeof name, "param.%s", t->name);
        if (!tfm_container_add_f32(c, name, t->ndim, t->shape, t->data))
            tfm_fatal("checkpoint: cannot add %s: %s", name, tfm_last_error());
    }
}

int64_t tfm_ckpt_stored_params(const tfm_container *c) {
    int64_t n = 0;
    for (int i = 0; i < c->n; i++) {
        const tfm_entry *e = &c->e[i];
        if (strncmp(e->name, "param.", 6)) continue;
        if (e->dtype == TFM_DT_F32) n += (int64_t)(e->nbytes / 4);
        else if (e->dtype == TFM_DT_I8) n += (int64_t)e->nbytes;
    }
    return n;
}

int tfm_ckpt_n_q8(const tfm_container *c) {
    int n = 0;
    for (int i = 0; i < c->n; i++) n += !strncmp(c->e[i].name, "param.", 6) && c->e[i].dtype == TFM_DT_I8;
    return n;
}

/* q, entry e's int8 values: none is -128 */
static int check_int8_values(const tfm_entry *e, const int8_t *q, const char *path) {
    for (size_t i = 0; i < e->nbytes; i++)
        if (q[i] == -128)
            return tfm_set_error("%s: entry '%s' holds -128 at index %zu (int8 weights are in [-127, 127])", path,
                                 e->name, i), -1;
    return 0;
}

/* An int8 parameter's entries, checked before anything is copied (a deferred one's values: when read):
 * param.<name> i8 with the parameter's 2-D shape, values in [-127, 127] (symmetric, as tfm quantize writes
 * them), at most TFM_Q8_MAX_COLS columns;
 * qscale.<name> f32 (rows), every scale finite and >= 0. */
static int check_q8(const tfm_container *c, const tfm_tensor *t, const tfm_entry *e, const char *path) {
    int ok = t->ndim == 2 && e->ndim == 2 && e->shape[0] == t->shape[0] && e->shape[1] == t->shape[1];
    if (!ok) return tfm_set_error("%s: entry '%s' has the wrong type or shape (int8 is for 2-D weights)", path, e->name), -1;
    if (t->shape[1] > TFM_Q8_MAX_COLS)
        return tfm_set_error("%s: entry '%s' has %d columns, int8 weights at most %d", path, e->name, t->shape[1],
                             TFM_Q8_MAX_COLS), -1;
    if (!e->deferred && check_int8_values(e, e->data, path)) return -1;   /* a deferred one: when read (get_q8) */
    char name[300];
    snprintf(name, sizeof name, TFM_Q8_SCALE_PREFIX "%s", t->name);
    const tfm_entry *s = tfm_container_get(c, name);
    if (!s) return tfm_set_error("%s: entry '%s' missing (the scales of int8 '%s')", path, name, e->name), -1;
    if (s->dtype != TFM_DT_F32 || s->ndim != 1 || s->shape[0] != t->shape[0])
        return tfm_set_error("%s: entry '%s' has the wrong type or shape (want f32 (%d): one scale per row)", path,
                             name, t->shape[0]), -1;
    return check_values(s, 1, path);
}

/* the int8 parameters of p from the file, after every check passed (a deferred entry is read and checked here,
 * one at a time: the file's int8 weights are never all in memory twice); for an inference loader
 * (c->int8_only) without their float values */
static int get_q8(const tfm_container *c, tfm_params *p, const char *path) {
    char name[300];
    for (int i = 0; i < p->n; i++) {
        snprintf(name, sizeof name, "param.%s", p->t[i]->name);
        const tfm_entry *e = tfm_container_get(c, name);
        if (!e || e->dtype != TFM_DT_I8) continue;
        snprintf(name, sizeof name, TFM_Q8_SCALE_PREFIX "%s", p->t[i]->name);
        const tfm_entry *s = tfm_container_get(c, name);
        int8_t *read = e->deferred ? malloc(e->nbytes ? e->nbytes : 1) : NULL;
        if (e->deferred && !read)
            return tfm_set_error_kind(TFM_ERR_NOMEM, "%s: out of memory reading '%s'", path, e->name), -1;
        int rc = e->deferred && (tfm_container_read(c, e, read) || check_int8_values(e, read, path));
        if (!rc && tfm_params_set_q8_(p, i, read ? read : e->data, s->data, !c->int8_only))
            rc = tfm_prefix_error("%s: ", path);
        free(read);
        if (rc) return -1;
    }
    return 0;
}

int tfm_ckpt_check_param_budget(const tfm_container *c, int64_t need, const char *path) {
    int64_t have = tfm_ckpt_stored_params(c);
    if (need < 0 || need > have)
        return tfm_set_error("%s: the config implies %lld parameters but the file holds %lld (config edited or "
                             "corrupt)", path, (long long)need, (long long)have),
               -1;
    return 0;
}

int tfm_ckpt_get_params(const tfm_container *c, tfm_params *p, const char *path) {
    /* every param.* entry must belong to the model: an extra one means the file is not what the
     * config and meta.arch say (e.g. meta.arch edited from bahdanau to rnn); every qscale.* entry must be
     * the scales of an int8 param.* entry */
    const size_t ls = strlen(TFM_Q8_SCALE_PREFIX);
    for (int i = 0; i < c->n; i++) {
        const tfm_entry *e = &c->e[i];
        const char *n = e->name;
        const tfm_tensor *t = !strncmp(n, "param.", 6) ? tfm_params_find(p, n + 6) : NULL;
        if (!strncmp(n, "param.", 6) && !t)
            return tfm_set_error("%s: entry '%s' is not a parameter of this model (meta.arch or config edited?)",
                                 path, n),
                   -1;
        if (t && e->dtype == TFM_DT_I8 && check_q8(c, t, e, path)) return -1;
        if (!strncmp(n, TFM_Q8_SCALE_PREFIX, ls)) {
            char pn[300];
            snprintf(pn, sizeof pn, "param.%s", n + ls);
            const tfm_entry *q = tfm_container_get(c, pn);
            if (!q || q->dtype != TFM_DT_I8)
                return tfm_set_error("%s: entry '%s' scales no int8 parameter ('%s' %s)", path, n, pn,
                                     q ? "is not int8" : "missing"), -1;
        }
    }
    /* the float32 parameters (an int8 entry is skipped there: checked above) */
    char name[300];
    for (int pass = 0; pass < 2; pass++) {
        /* after every check: the int8 parameters first, so an inference loader (c->int8_only) moves the float
         * ones to their own block before any value is read into the full one (no page of it touched) */
        if (pass == 1 && get_q8(c, p, path)) return -1;
        if (pass == 1 && c->int8_only && tfm_params_drop_q8_floats(p)) return tfm_prefix_error("%s: ", path);
        for (int i = 0; i < p->n; i++) {
            const tfm_tensor *t = p->t[i];
            snprintf(name, sizeof name, "param.%s", t->name);
            const tfm_entry *e = tfm_container_get(c, name);
            if (e && e->dtype == TFM_DT_I8) continue;
            if (pass == 0) {
                if (e && e->deferred ? check_f32_shape(e, t, name, path) : check_f32_entry(e, t, name, 0, path))
                    return -1;
            } else if (e->deferred) {   /* read into the tensor, then its values checked there */
                if (tfm_container_read(c, e, t->data) || check_floats(t->data, t->size, name, 0, path)) return -1;
            } else {
                memcpy(t->data, e->data, t->size * sizeof(float));
            }
        }
    }
    return 0;
}

int tfm_checkpoint_kind(const char *path, char *kind, size_t n) {
    tfm_container c;
    int rc = tfm_container_load_except(&c, path, "adam.");
    const char *k = rc ? NULL : tfm_container_str(&c, "meta.kind");
    if (k) snprintf(kind, n, "%s", k);
    tfm_container_free(&c);
    return k ? 0 : -1;
}

const char *tfm_checkpoint_kind_desc(const char *kind) {
    if (!strcmp(kind, "gpt")) return "a language model (train-lm)";
    if (!strcmp(kind, "seq2seq")) return "a translation model (train-mt)";
    return "not a model of train-lm or train-mt";
}
