/* Parameter blocks in and out of a container (see include/tfm/checkpoint.h). The optimizer moments
 * (tfm_ckpt_put_adamw, src/train/optim.c) are blocks parallel to the parameters, saved the same way. */
#include "tfm/checkpoint.h"
#include <math.h>
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

/* every value finite (and >= 0 if nonneg); else an error naming the entry and the first bad index */
static int check_values(const tfm_entry *e, int nonneg, const char *path) {
    const float *x = e->data;
    size_t n = e->nbytes / sizeof(float);
    for (size_t i = 0; i < n; i++) {
        float v;
        memcpy(&v, x + i, sizeof v);
        if (!isfinite(v) || (nonneg && v < 0))
            return tfm_set_error("%s: entry '%s' holds %s value %g at index %zu", path, e->name,
                                 isfinite(v) ? "a negative" : "a non-finite", (double)v, i),
                   -1;
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
                if (!e) return tfm_set_error("%s: entry '%s' missing", path, name), -1;
                int ok = e->dtype == TFM_DT_F32 && e->ndim == t->ndim;
                for (int d = 0; ok && d < t->ndim; d++) ok = e->shape[d] == t->shape[d];
                if (!ok || e->nbytes != t->size * sizeof(float))
                    return tfm_set_error("%s: entry '%s' has the wrong type or shape", path, name), -1;
                if (check_values(e, nonneg, path)) return -1;
            } else {
                memcpy(block + (t->data - p->data), e->data, t->size * sizeof(float));
            }
        }
    return 0;
}

void tfm_ckpt_put_params(tfm_container *c, const tfm_params *p) { tfm_ckpt_put_block(c, "param.", p, p->data); }

int64_t tfm_ckpt_stored_params(const tfm_container *c) {
    int64_t n = 0;
    for (int i = 0; i < c->n; i++)
        if (!strncmp(c->e[i].name, "param.", 6) && c->e[i].dtype == TFM_DT_F32) n += (int64_t)(c->e[i].nbytes / 4);
    return n;
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
     * config and meta.arch say (e.g. meta.arch edited from bahdanau to rnn) */
    for (int i = 0; i < c->n; i++) {
        const char *n = c->e[i].name;
        if (!strncmp(n, "param.", 6) && !tfm_params_find(p, n + 6))
            return tfm_set_error("%s: entry '%s' is not a parameter of this model (meta.arch or config edited?)",
                                 path, n),
                   -1;
    }
    return tfm_ckpt_get_block(c, "param.", p, p->data, path, 0);
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
