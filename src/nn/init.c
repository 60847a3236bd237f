/* Weight initialisers and parameter naming. */
#include "tfm/nn.h"
#include <math.h>
#include <stdio.h>

void tfm_init_normal(tfm_tensor *t, tfm_rng *r, float std) {
    for (size_t i = 0; i < t->size; i++) t->data[i] = std * tfm_rng_normal(r);
}

void tfm_init_const(tfm_tensor *t, float v) {
    for (size_t i = 0; i < t->size; i++) t->data[i] = v;
}

void tfm_init_uniform(tfm_tensor *t, tfm_rng *r, float bound) {
    for (size_t i = 0; i < t->size; i++) t->data[i] = bound * (2.0f * tfm_rng_uniform(r) - 1.0f);
}

void tfm_init_xavier(tfm_tensor *t, tfm_rng *r) {
    int fan_out = t->shape[0], fan_in = t->ndim > 1 ? (int)(t->size / t->shape[0]) : 1;
    tfm_init_uniform(t, r, sqrtf(6.0f / (float)(fan_in + fan_out)));
}

const char *tfm_name(char *buf, size_t n, const char *prefix, const char *suffix) {
    if (prefix && *prefix) snprintf(buf, n, "%s.%s", prefix, suffix);
    else snprintf(buf, n, "%s", suffix);
    return buf;
}
