/* AdamW, gradient clipping, schedules. */
#include "tfm/train.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

void tfm_adamw_init(tfm_adamw *o, const tfm_params *p, float beta1, float beta2, float eps, float weight_decay) {
    o->beta1 = beta1;
    o->beta2 = beta2;
    o->eps = eps;
    o->weight_decay = weight_decay;
    o->n = p->total;
    o->m = calloc(p->total ? p->total : 1, sizeof(float));
    o->v = calloc(p->total ? p->total : 1, sizeof(float));
    if (!o->m || !o->v) tfm_fatal("out of memory (optimizer state)");
    o->t = 0;
}

void tfm_adamw_free(tfm_adamw *o) {
    free(o->m);
    free(o->v);
    o->m = o->v = NULL;
}

void tfm_adamw_step(tfm_adamw *o, tfm_params *p, float lr) {
    o->t++;
    /* bias corrections in double, as PyTorch computes them in Python floats */
    float bc1 = (float)(1.0 - pow(o->beta1, o->t)), bc2_sqrt = (float)sqrt(1.0 - pow(o->beta2, o->t));
    float step_size = lr / bc1;
    float b1 = o->beta1, b2 = o->beta2, eps = o->eps;
    for (int k = 0; k < p->n; k++) {
        tfm_tensor *t = p->t[k];
        size_t off = (size_t)(t->data - p->data);
        float *m = o->m + off, *v = o->v + off, *w = t->data, *g = t->grad;
        float decay = t->ndim >= 2 ? 1.0f - lr * o->weight_decay : 1.0f;
        long n = (long)t->size;
#pragma omp parallel for schedule(static) if (n > 16384)
        for (long i = 0; i < n; i++) {  /* PyTorch order: decay, moments, update */
            m[i] = b1 * m[i] + (1.0f - b1) * g[i];
            v[i] = b2 * v[i] + (1.0f - b2) * g[i] * g[i];
            w[i] *= decay;
            w[i] -= step_size * m[i] / (sqrtf(v[i]) / bc2_sqrt + eps);
        }
    }
}

float tfm_clip_grad_norm(tfm_params *p, float max_norm) {
    double s = 0;
    for (size_t i = 0; i < p->total; i++) s += (double)p->grad[i] * p->grad[i];
    float norm = (float)sqrt(s);
    if (max_norm > 0 && norm > max_norm) {
        float c = max_norm / (norm + 1e-6f);
        for (size_t i = 0; i < p->total; i++) p->grad[i] *= c;
    }
    return norm;
}

float tfm_lr_cosine(int it, float lr, float min_lr, int warmup, int max_iters) {
    if (it < warmup) return lr * (float)(it + 1) / (float)(warmup + 1);
    if (it > max_iters) return min_lr;
    if (max_iters <= warmup) return lr;
    double ratio = (double)(it - warmup) / (double)(max_iters - warmup);
    return (float)(min_lr + 0.5 * (1.0 + cos(M_PI * ratio)) * (lr - min_lr));
}

float tfm_lr_noam(int it, float scale, int d_model, int warmup) {
    double step = it + 1;
    double a = 1.0 / sqrt(step), b = step * pow((double)warmup, -1.5);
    return (float)(scale / sqrt((double)d_model) * (a < b ? a : b));
}
