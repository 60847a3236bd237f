/* The complete configuration of a training run, stored in its checkpoints as run.<name> text entries
 * (include/tfm/train.h): every flag that affects the numbers, and a fingerprint of every data file. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tfm/train.h"

void tfm_run_config_free(tfm_run_config *c) {
    for (int i = 0; i < c->n; i++) {
        free(c->name[i]);
        free(c->value[i]);
    }
    free(c->name);
    free(c->value);
    memset(c, 0, sizeof *c);
}

int tfm_run_config_set(tfm_run_config *c, const char *name, const char *value) {
    for (int i = 0; i < c->n; i++)
        if (!strcmp(c->name[i], name)) {
            char *v = strdup(value);
            if (!v) return tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory"), -1;
            free(c->value[i]);
            c->value[i] = v;
            return 0;
        }
    if (c->n == c->cap) {
        int cap = c->cap ? 2 * c->cap : 32;
        char **nn = realloc(c->name, sizeof(char *) * (size_t)cap);
        if (!nn) return tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory"), -1;
        c->name = nn;
        char **nv = realloc(c->value, sizeof(char *) * (size_t)cap);
        if (!nv) return tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory"), -1;
        c->value = nv;
        c->cap = cap;
    }
    c->name[c->n] = strdup(name);
    c->value[c->n] = strdup(value);
    if (!c->name[c->n] || !c->value[c->n]) {
        free(c->name[c->n]);
        free(c->value[c->n]);
        return tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory"), -1;
    }
    c->n++;
    return 0;
}

const char *tfm_run_config_find(const tfm_run_config *c, const char *name) {
    for (int i = 0; i < c->n; i++)
        if (!strcmp(c->name[i], name)) return c->value[i];
    return NULL;
}

void tfm_run_config_put(tfm_container *k, const tfm_run_config *c) {
    char name[256];
    for (int i = 0; i < c->n; i++) {
        snprintf(name, sizeof name, "run.%s", c->name[i]);
        tfm_container_add_str(k, name, c->value[i]);
    }
}

int tfm_run_config_get(const tfm_container *k, tfm_run_config *c) {
    memset(c, 0, sizeof *c);
    for (int i = 0; i < k->n; i++) {
        const tfm_entry *e = &k->e[i];
        if (strncmp(e->name, "run.", 4) || e->dtype != TFM_DT_BYTES) continue;
        char *v = malloc(e->nbytes + 1);
        if (!v) return tfm_run_config_free(c), tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory"), -1;
        memcpy(v, e->data, e->nbytes);
        v[e->nbytes] = 0;
        int rc = tfm_run_config_set(c, e->name + 4, v);
        free(v);
        if (rc) return tfm_run_config_free(c), -1;
    }
    return 0;
}

int tfm_run_config_load(tfm_run_config *c, const char *path) {
    tfm_container k;
    int rc = tfm_container_load(&k, path);
    if (!rc) rc = tfm_run_config_get(&k, c);
    tfm_container_free(&k);
    return rc ? tfm_error_in_data() : 0;
}

int tfm_file_fingerprint(const char *path, char *buf, size_t n) {
    FILE *f = fopen(path, "rb");
    if (!f) return tfm_set_error_kind(TFM_ERR_IO, "%s: cannot read: %s", path, strerror(errno)), -1;
    uint64_t h = 1469598103934665603ull;   /* FNV-1a 64 */
    unsigned long long size = 0;
    unsigned char blk[65536];
    size_t got;
    while ((got = fread(blk, 1, sizeof blk, f)) > 0) {
        for (size_t i = 0; i < got; i++) h = (h ^ blk[i]) * 1099511628211ull;
        size += got;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) return tfm_set_error_kind(TFM_ERR_IO, "%s: read error", path), -1;
    snprintf(buf, n, "%llu bytes, fnv1a64 %016llx", size, (unsigned long long)h);
    return 0;
}
