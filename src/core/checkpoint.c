/* Parameter blocks in and out of a container (see include/tfm/checkpoint.h). The optimizer moments
 * (tfm_ckpt_put_adamw, src/train/optim.c) are blocks parallel to the parameters, saved the same way. */
#include "tfm/checkpoint.h"
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

/* Check every tensor first, then copy: a bad file leaves the destination untouched. */
int tfm_ckpt_get_block(const tfm_container *c, const char *prefix, const tfm_params *p, float *block,
                     const char *path) {
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
            } else {
                memcpy(block + (t->data - p->data), e->data, t->size * sizeof(float));
            }
        }
    return 0;
}

void tfm_ckpt_put_params(tfm_container *c, const tfm_params *p) { tfm_ckpt_put_block(c, "param.", p, p->data); }

int tfm_ckpt_get_params(const tfm_container *c, tfm_params *p, const char *path) {
    return tfm_ckpt_get_block(c, "param.", p, p->data, path);
}
