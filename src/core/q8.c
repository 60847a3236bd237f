/* int8 weights (tfm quantize): row quantization and parameters held in int8 (include/tfm/core.h). */
#include "tfm/core.h"
#include "core/mem.h"
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

float tfm_q8_quantize_row(const float *x, int n, int8_t *q) {
    float amax = 0.0f;
    int finite = 1;
    for (int i = 0; i < n; i++) {
        float a = fabsf(x[i]);
        if (!(a <= FLT_MAX)) finite = 0;   /* NaN or an infinity */
        else if (a > amax) amax = a;
    }
    if (!finite || amax < TFM_Q8_TINY) {
        memset(q, 0, (size_t)n);
        return finite ? 0.0f : NAN;
    }
    float inv = 127.0f / amax;   /* |x[i] * inv| <= 127 up to one rounding: the clamp never moves a value by more */
    for (int i = 0; i < n; i++) {
        float v = rintf(x[i] * inv);   /* nearest, ties to even: the vector kernels' cvtps2dq */
        q[i] = (int8_t)(v > 127.0f ? 127 : v < -127.0f ? -127 : (int)v);
    }
    return amax / 127.0f;
}

int tfm_params_n_q8(const tfm_params *p) {
    int n = 0;
    for (int i = 0; p->q8 && i < p->n; i++) n += p->q8[i].q != NULL;
    return n;
}

static void q8_weight_free(tfm_q8_weight *w) {
    tfm_weights_free_(w->q, (size_t)w->rows * w->ld);
    free(w->scale);
    free(w->sum);
    memset(w, 0, sizeof *w);
}

/* the checks both entry points share: a 2-D parameter whose rows fit the kernels' exact int32 sums */
static int q8_shape_ok(const tfm_params *p, int i) {
    const tfm_tensor *t = p->t[i];
    if (t->ndim != 2 || t->shape[0] < 1 || t->shape[1] < 1)
        return tfm_set_error("parameter '%s': only a 2-D weight can be held in int8", t->name), 0;
    if (t->shape[1] > TFM_Q8_MAX_COLS)
        return tfm_set_error("parameter '%s': %d columns, int8 weights have at most %d", t->name, t->shape[1],
                             TFM_Q8_MAX_COLS), 0;
    return 1;
}

int tfm_params_set_q8(tfm_params *p, int i, const int8_t *q, const float *scale) {
    if (!q8_shape_ok(p, i)) return -1;
    tfm_tensor *t = p->t[i];
    int rows = t->shape[0], cols = t->shape[1], ld = (cols + TFM_Q8_ALIGN - 1) / TFM_Q8_ALIGN * TFM_Q8_ALIGN;
    if (!p->q8 && !(p->q8 = calloc((size_t)p->n, sizeof *p->q8)))
        return tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory (int8 weights)"), -1;
    tfm_q8_weight *w = &p->q8[i];
    q8_weight_free(w);
    t->q8 = NULL;
    w->rows = rows, w->cols = cols, w->ld = ld;   /* before the allocation: q8_weight_free needs the size */
    w->q = tfm_weights_alloc_((size_t)rows * ld);   /* 64-aligned rows (ld is a multiple of 64) */
    w->scale = malloc(sizeof(float) * (size_t)rows);
    w->sum = malloc(sizeof(int32_t) * (size_t)rows);
    if (!w->q || !w->scale || !w->sum) {
        q8_weight_free(w);
        return tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory (parameter '%s' in int8: %d x %d)", t->name, rows,
                                  cols), -1;
    }
    memcpy(w->scale, scale, sizeof(float) * (size_t)rows);
    for (int r = 0; r < rows; r++) {
        int8_t *dst = w->q + (size_t)r * ld;
        const int8_t *src = q + (size_t)r * cols;
        memcpy(dst, src, (size_t)cols);
        memset(dst + cols, 0, (size_t)(ld - cols));
        int32_t s = 0;
        float *x = t->data + (size_t)r * cols;
        for (int c = 0; c < cols; c++) {
            s += src[c];
            x[c] = scale[r] * (float)src[c];
        }
        w->sum[r] = s;
    }
    t->q8 = w;
    return 0;
}

int tfm_params_quantize(tfm_params *p, int i) {
    if (!q8_shape_ok(p, i)) return -1;
    const tfm_tensor *t = p->t[i];
    int rows = t->shape[0], cols = t->shape[1];
    int8_t *q = malloc((size_t)rows * cols);
    float *scale = malloc(sizeof(float) * (size_t)rows);
    int rc = -1;
    if (!q || !scale) {
        tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory (quantizing parameter '%s')", t->name);
        goto done;
    }
    for (int r = 0; r < rows; r++) {
        scale[r] = tfm_q8_quantize_row(t->data + (size_t)r * cols, cols, q + (size_t)r * cols);
        if (isnan(scale[r])) {
            tfm_set_error("parameter '%s' holds a non-finite value in row %d: cannot quantize it", t->name, r);
            goto done;
        }
    }
    rc = tfm_params_set_q8(p, i, q, scale);
done:
    free(q);
    free(scale);
    return rc;
}

void tfm_params_free_q8_(tfm_params *p) {
    for (int i = 0; p->q8 && i < p->n; i++) q8_weight_free(&p->q8[i]);
    free(p->q8);
    p->q8 = NULL;
}
