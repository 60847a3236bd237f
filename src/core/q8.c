/* int8 weights (tfm quantize): row quantization, int8 copies of fp32 rows (src/core/q8.h) and parameters held
 * in int8 (include/tfm/core.h). */
#include "core/q8.h"
#include "core/mem.h"
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* Symmetric quantization to [-levels, levels] (127: int8, 63: the 7-bit activations of tfm_q7_quantize_row).
 * SSE2 (every x86-64) does 16 values a step with the same arithmetic: clamping x * inv to +-levels before
 * cvtps2dq (nearest, ties to even, as rintf) gives what rounding then clamping gives. */
static inline __attribute__((always_inline)) float quantize_levels(const float *x, int n, int8_t *q,
                                                                   const float levels) {
    float amax = 0.0f;
    int finite = 1, i = 0;
#if defined(__SSE2__)
    const __m128 sign = _mm_set1_ps(-0.0f), big = _mm_set1_ps(FLT_MAX);
    __m128 vmax = _mm_setzero_ps();
    for (; i + 4 <= n; i += 4) {
        __m128 a = _mm_andnot_ps(sign, _mm_loadu_ps(x + i));
        finite &= _mm_movemask_ps(_mm_cmple_ps(a, big)) == 0xF;   /* NaN and infinities fail */
        vmax = _mm_max_ps(vmax, a);
    }
    float m4[4];
    _mm_storeu_ps(m4, vmax);
    for (int k = 0; k < 4; k++) amax = m4[k] > amax ? m4[k] : amax;
#endif
    for (; i < n; i++) {
        float a = fabsf(x[i]);
        if (!(a <= FLT_MAX)) finite = 0;   /* NaN or an infinity */
        else if (a > amax) amax = a;
    }
    if (!finite || amax < TFM_Q8_TINY) {
        memset(q, 0, (size_t)n);
        return finite ? 0.0f : NAN;
    }
    float inv = levels / amax;   /* |x[i] * inv| <= levels up to one rounding: the clamp never moves a value by more */
    i = 0;
#if defined(__SSE2__)
    const __m128 vi = _mm_set1_ps(inv), hi = _mm_set1_ps(levels), lo = _mm_set1_ps(-levels);
#define Q4(o) _mm_cvtps_epi32(_mm_min_ps(_mm_max_ps(_mm_mul_ps(_mm_loadu_ps(x + i + (o)), vi), lo), hi))
    for (; i + 16 <= n; i += 16) {
        __m128i ab = _mm_packs_epi32(Q4(0), Q4(4)), cd = _mm_packs_epi32(Q4(8), Q4(12));
        _mm_storeu_si128((__m128i *)(q + i), _mm_packs_epi16(ab, cd));
    }
#undef Q4
#endif
    for (; i < n; i++) {
        float v = rintf(x[i] * inv);   /* nearest, ties to even: the vector kernels' cvtps2dq */
        q[i] = (int8_t)(v > levels ? levels : v < -levels ? -levels : v);
    }
    return amax / levels;
}

float tfm_q8_quantize_row(const float *x, int n, int8_t *q) { return quantize_levels(x, n, q, 127.0f); }
float tfm_q7_quantize_row(const float *x, int n, int8_t *q) { return quantize_levels(x, n, q, 63.0f); }

int tfm_params_n_q8(const tfm_params *p) {
    int n = 0;
    for (int i = 0; p->q8 && i < p->n; i++) n += p->q8[i].q != NULL;
    return n;
}

/* ---------------------------------------------------------------- the pool */
/* A parameter set's int8 weights and their panels come from blocks of whole 2 MiB huge pages (core/mem.h), used
 * one after the other like an arena's chunks. Each weight on its own would be an allocation of 4 KiB pages (a
 * 4 x 128 GPT's are 16-64 KB, GPT-2 small's attention matrices 590 KB), and on this project's VMs a 4 KiB page's
 * first touch costs ~10 us: GPT-2 small in int8 took ~9,000 page faults to load and ~6,000 more for the panels of
 * its first long prompt. Fresh blocks are zero (q's padding and the panels' rely on it); bytes are never reused,
 * and all of them go when the parameter set is freed (a weight replaced or freed before leaves its bytes). */
typedef struct q8_block {
    struct q8_block *next;
    char *mem;
    size_t cap, used;
} q8_block;

struct tfm_q8_pool {
    pthread_mutex_t lock;   /* the panels are made at first use, by whichever decoding thread needs them */
    q8_block *head;         /* the block in use, the older ones after it */
    size_t total;           /* bytes of all blocks */
};

static tfm_q8_pool *pool_new(void) {
    tfm_q8_pool *pl = calloc(1, sizeof *pl);
    if (pl && pthread_mutex_init(&pl->lock, NULL)) {
        free(pl);
        return NULL;
    }
    return pl;
}

/* bytes (64-byte aligned, zero) from the pool: the rest of the head block, else a new block of at least 2 MiB
 * and of the pool's size so far (the blocks double, as an arena's do); NULL when out of memory */
static void *pool_take(tfm_q8_pool *pl, size_t bytes) {
    bytes = (bytes + 63) & ~(size_t)63;
    void *p = NULL;
    pthread_mutex_lock(&pl->lock);
    q8_block *b = pl->head;
    if (!b || b->cap - b->used < bytes) {
        size_t cap = bytes > pl->total ? bytes : pl->total;
        cap = (cap + TFM_HUGE_PAGE - 1) / TFM_HUGE_PAGE * TFM_HUGE_PAGE;
        b = malloc(sizeof *b);
        char *mem = b ? tfm_weights_alloc_(cap) : NULL;
        if (!mem) {
            free(b);
            b = NULL;
        } else {
            *b = (q8_block){pl->head, mem, cap, 0};
            pl->head = b;
            pl->total += cap;
        }
    }
    if (b) {
        p = b->mem + b->used;
        b->used += bytes;
    }
    pthread_mutex_unlock(&pl->lock);
    return p;
}

static void pool_free(tfm_q8_pool *pl) {
    if (!pl) return;
    for (q8_block *b = pl->head, *n; b; b = n) {
        n = b->next;
        tfm_weights_free_(b->mem, b->cap);
        free(b);
    }
    pthread_mutex_destroy(&pl->lock);
    free(pl);
}

/* A weight's bytes (zero, 64-byte aligned): from its parameter set's pool, or on their own (pool NULL) */
static void *weight_take(tfm_q8_pool *pool, size_t bytes) {
    return pool ? pool_take(pool, bytes) : tfm_weights_alloc_(bytes);
}

/* weight_take's bytes of w given back: a pool's stay in it until the pool is freed */
static void weight_release(const tfm_q8_weight *w, void *p, size_t bytes) {
    if (!w->pool) tfm_weights_free_(p, bytes);
}

/* ---------------------------------------------------------------- weights */
static size_t panel_bytes(const tfm_q8_weight *w) {
    return (size_t)((w->rows + TFM_Q8_PANEL - 1) / TFM_Q8_PANEL) * (size_t)tfm_q8_panel_groups(w) * TFM_Q8_PANEL_GROUP;
}

const int8_t *tfm_q8_weight_panels_(const tfm_q8_weight *w) {
    int8_t *have = __atomic_load_n(&w->panels, __ATOMIC_ACQUIRE);
    if (have) return have;
    const size_t bytes = panel_bytes(w), group = TFM_Q8_PANEL_GROUP, groups = (size_t)tfm_q8_panel_groups(w);
    int8_t *p = weight_take(w->pool, bytes);   /* zeroed: rows of the last panel past w->rows */
    if (!p) return NULL;
    for (int r = 0; r < w->rows; r++) {   /* row r: panel r / 16, half (r % 16) / 8, 4 bytes at (r % 8) * 4 */
        const int8_t *q = w->q + (size_t)r * w->ld;   /* zero from cols up to ld >= 4 * groups */
        int8_t *dst = p + (size_t)(r / TFM_Q8_PANEL) * groups * group + (size_t)(r % 16 / 8 * 32 + r % 8 * 4);
        for (size_t g = 0; g < groups; g++) memcpy(dst + g * group, q + 4 * g, 4);
    }
    tfm_q8_weight *mw = (tfm_q8_weight *)w;   /* the panels are a cache of q: filled in once, under a CAS */
    if (__atomic_compare_exchange_n(&mw->panels, &have, p, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) return p;
    weight_release(w, p, bytes);   /* another thread's copy won */
    return have;
}

void tfm_q8_weight_free_panels_(tfm_q8_weight *w) {
    weight_release(w, w->panels, panel_bytes(w));
    w->panels = NULL;
}

void tfm_q8_weight_free_(tfm_q8_weight *w) {
    if (w->panels) tfm_q8_weight_free_panels_(w);
    weight_release(w, w->q, (size_t)w->rows * w->ld);
    free(w->scale);
    free(w->sum);
    memset(w, 0, sizeof *w);
}

/* w holding rows * ld zeroed int8 bytes (tfm_weights_alloc_, or from pool when not NULL: the padding stays zero),
 * rows scales and rows sums (unset); 0, or -1 with a tfm error and w empty */
static int q8_weight_alloc(tfm_q8_weight *w, int rows, int cols, tfm_q8_pool *pool) {
    memset(w, 0, sizeof *w);
    if (rows < 1 || cols < 1 || cols > TFM_Q8_MAX_COLS)
        return tfm_set_error("int8 weights of %d x %d: need a row and 1 to %d columns", rows, cols, TFM_Q8_MAX_COLS),
               -1;
    int ld = (cols + TFM_Q8_ALIGN - 1) / TFM_Q8_ALIGN * TFM_Q8_ALIGN;   /* no overflow: cols <= TFM_Q8_MAX_COLS */
    if ((size_t)rows > SIZE_MAX / (size_t)ld || (size_t)rows > SIZE_MAX / sizeof(float))
        return tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory (int8 weights: %d x %d exceed size_t)", rows, cols), -1;
    w->rows = rows, w->cols = cols, w->ld = ld;   /* before the allocation: tfm_q8_weight_free_ needs the size */
    w->pool = pool;
    w->q = weight_take(pool, (size_t)rows * ld);   /* 64-aligned rows (ld is a multiple of 64) */
    w->scale = malloc(sizeof(float) * (size_t)rows);
    w->sum = malloc(sizeof(int32_t) * (size_t)rows);
    if (!w->q || !w->scale || !w->sum) {
        tfm_q8_weight_free_(w);
        return tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory (int8 weights: %d x %d)", rows, cols), -1;
    }
    return 0;
}

/* the VNNI kernel's compensation term: the sum of n int8 values (exact: n <= TFM_Q8_MAX_COLS) */
static int32_t q8_row_sum(const int8_t *q, int n) {
    int32_t s = 0;
    for (int c = 0; c < n; c++) s += q[c];
    return s;
}

static int quantize_weight(tfm_q8_weight *w, const float *x, int rows, int cols, size_t stride, tfm_q8_pool *pool) {
    if (cols > 0 && stride < (size_t)cols) {
        memset(w, 0, sizeof *w);
        return tfm_set_error("int8 weights of %d x %d: a row stride of %zu", rows, cols, stride), -1;
    }
    if (q8_weight_alloc(w, rows, cols, pool)) return -1;
    for (int r = 0; r < rows; r++) {
        int8_t *q = w->q + (size_t)r * w->ld;
        w->scale[r] = tfm_q8_quantize_row(x + (size_t)r * stride, cols, q);
        w->sum[r] = q8_row_sum(q, cols);
    }
    return 0;
}

int tfm_q8_weight_quantize_(tfm_q8_weight *w, const float *x, int rows, int cols, size_t stride) {
    return quantize_weight(w, x, rows, cols, stride, NULL);
}

/* the checks both entry points share: a 2-D parameter whose rows fit the kernels' exact int32 sums, and p's
 * table of int8 copies and their pool */
static int q8_param_ready(tfm_params *p, int i) {
    const tfm_tensor *t = p->t[i];
    if (t->ndim != 2 || t->shape[0] < 1 || t->shape[1] < 1)
        return tfm_set_error("parameter '%s': only a 2-D weight can be held in int8", t->name), 0;
    if (t->shape[1] > TFM_Q8_MAX_COLS)
        return tfm_set_error("parameter '%s': %d columns, int8 weights have at most %d", t->name, t->shape[1],
                             TFM_Q8_MAX_COLS), 0;
    if (!p->q8 && !(p->q8 = calloc((size_t)p->n, sizeof *p->q8)))
        return tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory (int8 weights)"), 0;
    if (!p->q8_pool && !(p->q8_pool = pool_new()))
        return tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory (int8 weights)"), 0;
    return 1;
}

/* w becomes parameter i's int8 copy (replacing any earlier one) and, with `floats`, the parameter's values its
 * dequantized ones (tfm_q8_row_floats, as tfm_embedding's int8 rows) */
static void q8_hold(tfm_params *p, int i, const tfm_q8_weight *w, int floats) {
    tfm_tensor *t = p->t[i];
    tfm_q8_weight_free_(&p->q8[i]);
    p->q8[i] = *w;
    for (int r = 0; floats && r < w->rows; r++) tfm_q8_row_floats(w, r, t->data + (size_t)r * w->cols);
    t->q8 = &p->q8[i];
}

static int has_floats(const tfm_tensor *t) {
    if (t->data) return 1;
    return tfm_set_error("parameter '%s': holds no float values (an int8 model loaded for inference)", t->name), 0;
}

int tfm_params_set_q8_(tfm_params *p, int i, const int8_t *q, const float *scale, int floats) {
    if (!q8_param_ready(p, i) || (floats && !has_floats(p->t[i]))) return -1;
    const tfm_tensor *t = p->t[i];
    int rows = t->shape[0], cols = t->shape[1];
    tfm_q8_weight w;
    if (q8_weight_alloc(&w, rows, cols, p->q8_pool)) return tfm_prefix_error("parameter '%s': ", t->name);
    for (int r = 0; r < rows; r++) {
        const int8_t *src = q + (size_t)r * cols;
        memcpy(w.q + (size_t)r * w.ld, src, (size_t)cols);
        w.scale[r] = scale[r];
        w.sum[r] = q8_row_sum(src, cols);
    }
    q8_hold(p, i, &w, floats);
    return 0;
}

int tfm_params_set_q8(tfm_params *p, int i, const int8_t *q, const float *scale) {
    return tfm_params_set_q8_(p, i, q, scale, 1);
}

int tfm_params_quantize(tfm_params *p, int i) {
    if (!q8_param_ready(p, i) || !has_floats(p->t[i])) return -1;
    const tfm_tensor *t = p->t[i];
    tfm_q8_weight w;
    if (quantize_weight(&w, t->data, t->shape[0], t->shape[1], (size_t)t->shape[1], p->q8_pool))
        return tfm_prefix_error("parameter '%s': ", t->name);
    for (int r = 0; r < w.rows; r++)
        if (isnan(w.scale[r])) {
            tfm_q8_weight_free_(&w);
            return tfm_set_error("parameter '%s' holds a non-finite value in row %d: cannot quantize it", t->name, r),
                   -1;
        }
    q8_hold(p, i, &w, 1);
    return 0;
}

int tfm_params_drop_q8_floats(tfm_params *p) {
    size_t keep = 0;
    for (int i = 0; i < p->n; i++) keep += p->t[i]->q8 ? 0 : p->t[i]->size;
    if (!p->data || keep == p->total) return 0;
    if (!keep) keep = 1;
    float *block = tfm_weights_alloc_(keep * sizeof(float));
    if (!block) return tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory: %zu float parameters", keep), -1;
    size_t off = 0;
    for (int i = 0; i < p->n; i++) {
        tfm_tensor *t = p->t[i];
        if (t->q8) {
            t->data = NULL;
            continue;
        }
        memcpy(block + off, t->data, t->size * sizeof(float));
        t->data = block + off;
        off += t->size;
    }
    tfm_weights_free_(p->data, p->data_floats * sizeof(float));
    p->data = block, p->data_floats = keep;
    return 0;
}

void tfm_params_free_q8_(tfm_params *p) {
    for (int i = 0; p->q8 && i < p->n; i++) tfm_q8_weight_free_(&p->q8[i]);
    free(p->q8);
    p->q8 = NULL;
    pool_free(p->q8_pool);
    p->q8_pool = NULL;
}
