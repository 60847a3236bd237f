/* AdamW, gradient clipping, schedules. */
#include "tfm/checkpoint.h"
#include "core/par.h"
#include "tfm/train.h"
#include "ops/vmath.h"
#include "train/grad_norm.h"
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

int tfm_adamw_init(tfm_adamw *o, const tfm_params *p, float beta1, float beta2, float eps, float weight_decay) {
    memset(o, 0, sizeof *o);
    if (tfm_params_n_q8(p))   /* the weights the kernels read would not follow the updates */
        return tfm_set_error("an int8 model (tfm quantize) is for inference only: it cannot be trained or resumed "
                             "(train or resume the fp32 checkpoint)"), -1;
    o->beta1 = beta1;
    o->beta2 = beta2;
    o->eps = eps;
    o->weight_decay = weight_decay;
    o->n = p->total;
    o->m = calloc(p->total ? p->total : 1, sizeof(float));
    o->v = calloc(p->total ? p->total : 1, sizeof(float));
    o->t = 0;
    if (!o->m || !o->v) {
        tfm_adamw_free(o);
        return tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory (optimizer state, %zu parameters)", p->total), -1;
    }
    return 0;
}

void tfm_adamw_free(tfm_adamw *o) {
    free(o->m);
    free(o->v);
    free(o->ema);
    o->m = o->v = o->ema = NULL;
}

int tfm_adamw_ema_init(tfm_adamw *o, const tfm_params *p, float decay) {
    if (!(decay > 0.0f && decay < 1.0f)) return tfm_set_error("EMA decay must be in (0, 1), got %g", (double)decay), -1;
    free(o->ema);
    o->ema = malloc((p->total ? p->total : 1) * sizeof(float));
    if (!o->ema) return tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory (the weights' average)"), -1;
    memcpy(o->ema, p->data, p->total * sizeof(float));
    o->ema_decay = decay;
    return 0;
}

/* ema[i0, i1) moves (1 - d) of the way to the weights (elementwise: no dependence on threads or blocks) */
static void ema_update(float *restrict ema, const float *restrict w, size_t n, float d) {
    const float a = 1.0f - d;
    for (size_t i = 0; i < n; i++) ema[i] += a * (w[i] - ema[i]);
}

/* One parallel region over the flat parameter block: threads take fixed blocks of ADAMW_BLOCK elements
 * dynamically (a descheduled thread holds up one block) and walk the tensors overlapping each (weight decay
 * depends on the tensor). Elementwise, so the result does not depend on the thread count or schedule; the
 * inner loop is tfm_vadamw (vectorised for the CPU's instruction-set path). */
#define ADAMW_BLOCK 32768
void tfm_adamw_step(tfm_adamw *o, tfm_params *p, float lr) { tfm_adamw_step_fused(o, p, lr, 1.0f, 0); }

void tfm_adamw_step_fused(tfm_adamw *o, tfm_params *p, float lr, float grad_scale, int zero_grad) {
    o->t++;
    /* bias corrections in double, as PyTorch computes them in Python floats */
    float bc1 = (float)(1.0 - pow(o->beta1, o->t)), bc2_sqrt = (float)sqrt(1.0 - pow(o->beta2, o->t));
    float step_size = lr / bc1;
    float b1 = o->beta1, b2 = o->beta2, eps = o->eps, wd = o->weight_decay;
    const float warm = (float)((1.0 + o->t) / (10.0 + o->t)), ema_d = o->ema_decay < warm ? o->ema_decay : warm;
    size_t total = p->total;
    const size_t nblk = (total + ADAMW_BLOCK - 1) / ADAMW_BLOCK;
    TFM_PAR_FOR(total > 32768, schedule(dynamic, 1),
    for (size_t bi = 0; bi < nblk; bi++) {
        size_t lo = bi * ADAMW_BLOCK, hi = lo + ADAMW_BLOCK < total ? lo + ADAMW_BLOCK : total;
        for (int k = 0; k < p->n; k++) {
            tfm_tensor *t = p->t[k];
            size_t off = (size_t)(t->data - p->data), end = off + t->size;
            if (end <= lo || off >= hi) continue;
            size_t i0 = off > lo ? off : lo, i1 = end < hi ? end : hi;
            float decay = t->ndim >= 2 ? 1.0f - lr * wd : 1.0f;
            const tfm_adamw_coef coef = {b1, b2, eps, decay, step_size, bc2_sqrt, grad_scale, zero_grad};
            tfm_vadamw(p->data + i0, p->grad + i0, o->m + i0, o->v + i0, i1 - i0, &coef); /* ops/vmath.h */
        }
        if (o->ema) ema_update(o->ema + lo, p->data + lo, hi - lo, ema_d);   /* the block is still in cache */
    });
}

typedef double v2d __attribute__((vector_size(16)));
typedef float v4f __attribute__((vector_size(16)));
float tfm_clip_coef(float norm, float max_norm) {
    return max_norm > 0 && norm > max_norm ? max_norm / (norm + 1e-6f) : 1.0f;
}

float tfm_clip_grad_norm(tfm_params *p, float max_norm) {
    float norm = tfm_grad_norm(p), c = tfm_clip_coef(norm, max_norm);
    if (c != 1.0f) {
        float *g = p->grad;
        size_t total = p->total;
        TFM_PAR_FOR(total > 32768, schedule(dynamic, 32768),
        for (size_t i = 0; i < total; i++) {
            g[i] *= c;
        });
    }
    return norm;
}

double tfm_grad_sq_block(const float *gr, size_t i0, size_t i1) {
    /* acc[k] sums the squares of the elements i with i % 8 == k, in order (i0 is a multiple of 8): acc[2j] and
     * acc[2j + 1] are the lanes of a[j]. Four 2-lane vectors (not two 4-lane ones, which the baseline x86-64
     * build split into halves kept on the stack: a store and a reload in every add's chain) */
    v2d a[4] = {{0, 0}, {0, 0}, {0, 0}, {0, 0}};
    size_t i = i0;
    for (; i + 8 <= i1; i += 8)
        for (int h = 0; h < 2; h++) {
#ifdef __SSE2__   /* one conversion for two floats (GCC converts the generic vectors one float at a time) */
            __m128 x = _mm_loadu_ps(gr + i + 4 * h);
            v2d lo = (v2d)_mm_cvtps_pd(x), hi = (v2d)_mm_cvtps_pd(_mm_movehl_ps(x, x));
#else
            v4f x;
            memcpy(&x, gr + i + 4 * h, sizeof x);
            v2d lo = {x[0], x[1]}, hi = {x[2], x[3]};
#endif
            a[2 * h] += lo * lo;
            a[2 * h + 1] += hi * hi;
        }
    double acc[8] = {a[0][0], a[0][1], a[1][0], a[1][1], a[2][0], a[2][1], a[3][0], a[3][1]};
    for (; i < i1; i++) acc[i & 7] += (double)gr[i] * gr[i];
    double s = 0;
    for (int k = 0; k < 8; k++) s += acc[k];
    return s;
}

float tfm_grad_norm_of_parts(const double *part, size_t nb) {
    double s = 0;
    for (size_t b = 0; b < nb; b++) s += part[b];
    return (float)sqrt(s);
}

double *tfm_grad_parts_get(double *stack, size_t n) { return n <= 1024 ? stack : malloc(n * sizeof(double)); }
void tfm_grad_parts_put(double *stack, double *part) {
    if (part != stack) free(part);
}

float tfm_grad_norm(const tfm_params *p) {
    size_t total = p->total, nb = (total + TFM_NORM_BLOCK - 1) / TFM_NORM_BLOCK;
    double stack[1024], *part = tfm_grad_parts_get(stack, nb);
    if (!part) tfm_fatal("out of memory (grad norm)");
    const float *gr = p->grad;
    TFM_PAR_FOR(total > 32768, schedule(dynamic, 1),
    for (size_t b = 0; b < nb; b++) {
        size_t i0 = b * TFM_NORM_BLOCK, i1 = i0 + TFM_NORM_BLOCK < total ? i0 + TFM_NORM_BLOCK : total;
        part[b] = tfm_grad_sq_block(gr, i0, i1);
    });
    float norm = tfm_grad_norm_of_parts(part, nb);
    tfm_grad_parts_put(stack, part);
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

/* Moments as two parameter-parallel blocks (adam.m.<name>, adam.v.<name>) and adam.t. */
void tfm_ckpt_put_adamw(tfm_container *c, const tfm_adamw *o, const tfm_params *p) {
    tfm_ckpt_put_block(c, "adam.m.", p, o->m);
    tfm_ckpt_put_block(c, "adam.v.", p, o->v);
    if (o->ema) tfm_ckpt_put_block(c, "adam.ema.", p, o->ema);
    tfm_container_add_int(c, "adam.t", o->t);
}

int tfm_ckpt_get_adamw(const tfm_container *c, tfm_adamw *o, const tfm_params *p, const char *path) {
    int t;
    if (tfm_container_int(c, "adam.t", &t)) return -1;
    if (t < 0) return tfm_set_error("%s: adam.t is negative", path), -1;
    if (tfm_ckpt_get_block(c, "adam.m.", p, o->m, path, 0) || tfm_ckpt_get_block(c, "adam.v.", p, o->v, path, 1))
        return -1;
    if (o->ema && tfm_ckpt_get_block(c, "adam.ema.", p, o->ema, path, 0)) return -1;
    o->t = t;
    return 0;
}
