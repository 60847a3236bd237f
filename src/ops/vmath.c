/* Vectorised exp / tanh / GELU and row reductions: AVX-512 bodies (kernels_avx512.c), AVX2+FMA bodies
 * (target attributes, below) and portable bodies, one table per path chosen at run time (ops/isa.h). Polynomials after Cephes (expf: range reduction by ln2 in two parts, degree-5
 * polynomial; tanhf: odd polynomial below 0.625, 1 - 2/(exp(2|x|)+1) above). */
#include "ops/vmath.h"
#include "ops/op_impl.h"
#include "ops/isa.h"
#include <math.h>
#include <string.h>


/* ---------------------------------------------------------------- portable scalar bodies */
float tfm_expf(float x) {
    if (x != x) return x;   /* NaN: propagate (the (int) cast below would be undefined) */
    if (x < VM_EXP_LO) return 0.0f;
    if (x > VM_EXP_HI) x = VM_EXP_HI;
    float fx = nearbyintf(x * VM_LOG2E);
    float r = x - fx * VM_LN2_HI;
    r = r - fx * VM_LN2_LO;
    float z = r * r;
    float y = ((((VM_P0 * r + VM_P1) * r + VM_P2) * r + VM_P3) * r + VM_P4) * r + VM_P5;
    y = y * z + r + 1.0f;
    return ldexpf(y, (int)fx);
}

static inline float tanh_s(float x) {
    float a = fabsf(x);
    if (a < 0.625f) {
        float z = x * x;
        return ((((VM_T0 * z + VM_T1) * z + VM_T2) * z + VM_T3) * z + VM_T4) * z * x + x;
    }
    float t = 1.0f - 2.0f / (tfm_expf(2.0f * a) + 1.0f);
    return x < 0 ? -t : t;
}

static inline float gelu_s(float x) { return 0.5f * x * (1.0f + tanh_s(VM_GELU_K * (x + VM_GELU_C * x * x * x))); }
static inline float gelu_d_s(float x) {
    float t = tanh_s(VM_GELU_K * (x + VM_GELU_C * x * x * x));
    return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * VM_GELU_K * (1.0f + 3.0f * VM_GELU_C * x * x);
}

#if defined(__x86_64__) || defined(__i386__)
#define HAVE_X86 1
#include <immintrin.h>
#define AVX2 __attribute__((target("avx2,fma")))

AVX2 static inline __m256 exp8(__m256 x) {
    __m256 lo_mask = _mm256_cmp_ps(x, _mm256_set1_ps(VM_EXP_LO), _CMP_GE_OQ);
    x = _mm256_min_ps(x, _mm256_set1_ps(VM_EXP_HI));
    x = _mm256_max_ps(x, _mm256_set1_ps(VM_EXP_LO));
    __m256 fx = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(VM_LOG2E)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(fx, _mm256_set1_ps(VM_LN2_HI), x);
    r = _mm256_fnmadd_ps(fx, _mm256_set1_ps(VM_LN2_LO), r);
    __m256 z = _mm256_mul_ps(r, r);
    __m256 y = _mm256_fmadd_ps(_mm256_set1_ps(VM_P0), r, _mm256_set1_ps(VM_P1));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(VM_P2));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(VM_P3));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(VM_P4));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(VM_P5));
    y = _mm256_fmadd_ps(y, z, _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(fx), _mm256_set1_epi32(127)), 23);
    y = _mm256_mul_ps(y, _mm256_castsi256_ps(e));
    return _mm256_and_ps(y, lo_mask);
}

AVX2 static inline __m256 tanh8(__m256 x) {
    __m256 sign = _mm256_and_ps(x, _mm256_set1_ps(-0.0f));
    __m256 a = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), x);
    /* small: odd polynomial */
    __m256 z = _mm256_mul_ps(x, x);
    __m256 p = _mm256_fmadd_ps(_mm256_set1_ps(VM_T0), z, _mm256_set1_ps(VM_T1));
    p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(VM_T2));
    p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(VM_T3));
    p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(VM_T4));
    __m256 small = _mm256_fmadd_ps(_mm256_mul_ps(p, z), x, x);
    /* large: 1 - 2/(exp(2a)+1), with the sign of x */
    __m256 e = exp8(_mm256_add_ps(a, a));
    __m256 big = _mm256_sub_ps(_mm256_set1_ps(1.0f),
                               _mm256_div_ps(_mm256_set1_ps(2.0f), _mm256_add_ps(e, _mm256_set1_ps(1.0f))));
    big = _mm256_or_ps(big, sign);
    __m256 is_small = _mm256_cmp_ps(a, _mm256_set1_ps(0.625f), _CMP_LT_OQ);
    return _mm256_blendv_ps(big, small, is_small);
}

/* tanh(K (x + C x^3)) as 1 - 2/(exp(2u)+1) only: GELU needs tanh to an absolute ~2e-7, not relative
 * accuracy near 0, so the polynomial branch of tanh8 is skipped (one exp, one division). */
AVX2 static inline __m256 gelu_inner8(__m256 x) {
    __m256 x2 = _mm256_mul_ps(x, x);
    __m256 u = _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(2.0f * VM_GELU_K), x),
                             _mm256_fmadd_ps(_mm256_set1_ps(VM_GELU_C), x2, _mm256_set1_ps(1.0f)));
    __m256 e = exp8(_mm256_min_ps(u, _mm256_set1_ps(VM_EXP_HI)));
    return _mm256_sub_ps(_mm256_set1_ps(1.0f), _mm256_div_ps(_mm256_set1_ps(2.0f), _mm256_add_ps(e, _mm256_set1_ps(1.0f))));
}

/* load/store n < 8 trailing elements with a lane mask (lanes >= n read as pad, never touched in memory) */
static const int32_t tail_lanes[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
AVX2 static inline __m256i tail_mask8(size_t n) { return _mm256_loadu_si256((const __m256i *)(tail_lanes + 8 - n)); }
AVX2 static inline __m256 load_tail(const float *x, size_t n, float pad) {
    __m256i m = tail_mask8(n);
    __m256 v = _mm256_maskload_ps(x, m);   /* masked lanes read as +0 */
    return pad == 0.0f ? v : _mm256_blendv_ps(_mm256_set1_ps(pad), v, _mm256_castsi256_ps(m));
}
AVX2 static inline void store_tail(float *y, __m256 v, size_t n) { _mm256_maskstore_ps(y, tail_mask8(n), v); }
AVX2 static inline float hsum8(__m256 v) { /* fixed order: (0+4)+(2+6) + (1+5)+(3+7) */
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
    return _mm_cvtss_f32(s);
}
AVX2 static inline float hmax8(__m256 v) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_shuffle_ps(s, s, 1));
    return _mm_cvtss_f32(s);
}

AVX2 static float vexp_sum_avx2(float *y, const float *x, float sub, size_t n) {
    __m256 acc = _mm256_setzero_ps(), s = _mm256_set1_ps(sub);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), s));
        _mm256_storeu_ps(y + i, e);
        acc = _mm256_add_ps(acc, e);
    }
    if (i < n) { /* the padding lanes' exponentials are dropped before the sum */
        __m256 e = _mm256_and_ps(exp8(_mm256_sub_ps(load_tail(x + i, n - i, 0.0f), s)),
                                 _mm256_castsi256_ps(tail_mask8(n - i)));
        store_tail(y + i, e, n - i);
        acc = _mm256_add_ps(acc, e);
    }
    return hsum8(acc);
}

AVX2 static void vexp_avx2(float *y, const float *x, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, exp8(_mm256_loadu_ps(x + i)));
    if (i < n) store_tail(y + i, exp8(load_tail(x + i, n - i, 0.0f)), n - i);
}

AVX2 static void vtanh_avx2(float *y, const float *x, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, tanh8(_mm256_loadu_ps(x + i)));
    if (i < n) store_tail(y + i, tanh8(load_tail(x + i, n - i, 0.0f)), n - i);
}

AVX2 static inline __m256 sigmoid8(__m256 x) {
    __m256 e = exp8(_mm256_sub_ps(_mm256_setzero_ps(), x));
    return _mm256_div_ps(_mm256_set1_ps(1.0f), _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}
AVX2 static void vsigmoid_avx2(float *y, const float *x, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, sigmoid8(_mm256_loadu_ps(x + i)));
    if (i < n) store_tail(y + i, sigmoid8(load_tail(x + i, n - i, 0.0f)), n - i);
}

/* gelu(x) from t = gelu_inner8(x) */
AVX2 static inline __m256 gelu8_t(__m256 x, __m256 t) {
    return _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(0.5f), x), _mm256_add_ps(_mm256_set1_ps(1.0f), t));
}
AVX2 static inline __m256 gelu8(__m256 x) { return gelu8_t(x, gelu_inner8(x)); }
AVX2 static void vgelu_span_avx2(float *y, const float *x, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, gelu8(_mm256_loadu_ps(x + i)));
    if (i < n) store_tail(y + i, gelu8(load_tail(x + i, n - i, 0.0f)), n - i);
}
AVX2 static void vgelu_avx2(float *y, float *x, const float *bias, int C, size_t n) {
    if (!bias) { vgelu_span_avx2(y, x, n); return; }
    for (size_t r = 0; r < n / (size_t)C; r++) {
        float *xr = x + r * C, *yr = y + r * C;
        int c = 0;
        for (; c + 8 <= C; c += 8) {
            __m256 v = _mm256_add_ps(_mm256_loadu_ps(xr + c), _mm256_loadu_ps(bias + c));
            _mm256_storeu_ps(xr + c, v);
            _mm256_storeu_ps(yr + c, gelu8(v));
        }
        if (c < C) {
            int c0 = c;
            for (; c < C; c++) xr[c] += bias[c];
            vgelu_span_avx2(yr + c0, xr + c0, (size_t)(C - c0));
        }
    }
}

/* gelu'(x) from t = gelu_inner8(x) */
AVX2 static inline __m256 gelu_d8_t(__m256 x, __m256 t) {
    __m256 one = _mm256_set1_ps(1.0f), half = _mm256_set1_ps(0.5f);
    __m256 x2 = _mm256_mul_ps(x, x);
    __m256 a = _mm256_mul_ps(half, _mm256_add_ps(one, t));
    __m256 b = _mm256_mul_ps(_mm256_mul_ps(half, x), _mm256_fnmadd_ps(t, t, one));
    __m256 c = _mm256_mul_ps(_mm256_set1_ps(VM_GELU_K), _mm256_fmadd_ps(_mm256_set1_ps(3.0f * VM_GELU_C), x2, one));
    return _mm256_fmadd_ps(b, c, a);
}
AVX2 static inline __m256 gelu_d8(__m256 x) { return gelu_d8_t(x, gelu_inner8(x)); }
AVX2 static inline void gelu_save_d8(float *y, float *x, const float *bias, size_t m) { /* m <= 8 lanes */
    __m256 v = m == 8 ? _mm256_loadu_ps(x) : load_tail(x, m, 0.0f);
    if (bias) v = _mm256_add_ps(v, m == 8 ? _mm256_loadu_ps(bias) : load_tail(bias, m, 0.0f));
    __m256 t = gelu_inner8(v), g = gelu8_t(v, t), d = gelu_d8_t(v, t);
    if (m == 8) _mm256_storeu_ps(y, g), _mm256_storeu_ps(x, d);
    else store_tail(y, g, m), store_tail(x, d, m);
}
AVX2 static void vgelu_save_d_avx2(float *y, float *x, const float *bias, int C, size_t n) {
    if (!bias) C = n ? (int)n : 1;   /* callers without a bias pass C = n (one row) */
    for (size_t r = 0; r < n / (size_t)C; r++) {
        float *xr = x + r * C, *yr = y + r * C;
        int c = 0;
        for (; c + 8 <= C; c += 8) gelu_save_d8(yr + c, xr + c, bias ? bias + c : NULL, 8);
        if (c < C) gelu_save_d8(yr + c, xr + c, bias ? bias + c : NULL, (size_t)(C - c));
    }
}
AVX2 static void vgelu_backward_avx2(float *dx, const float *dy, const float *x, size_t n, int acc) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 g = _mm256_mul_ps(_mm256_loadu_ps(dy + i), gelu_d8(_mm256_loadu_ps(x + i)));
        if (acc) g = _mm256_add_ps(g, _mm256_loadu_ps(dx + i));
        _mm256_storeu_ps(dx + i, g);
    }
    if (i < n) {
        size_t m = n - i;
        __m256 g = _mm256_mul_ps(load_tail(dy + i, m, 0.0f), gelu_d8(load_tail(x + i, m, 0.0f)));
        if (acc) g = _mm256_add_ps(g, load_tail(dx + i, m, 0.0f));
        store_tail(dx + i, g, m);
    }
}

AVX2 static float vmax_avx2(const float *x, size_t n) {
    __m256 m = _mm256_set1_ps(-INFINITY);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) m = _mm256_max_ps(m, _mm256_loadu_ps(x + i));
    if (i < n) m = _mm256_max_ps(m, load_tail(x + i, n - i, -INFINITY));
    return hmax8(m);
}
AVX2 static float vsum_avx2(const float *x, size_t n) {
    __m256 s = _mm256_setzero_ps();
    size_t i = 0;
    for (; i + 8 <= n; i += 8) s = _mm256_add_ps(s, _mm256_loadu_ps(x + i));
    if (i < n) s = _mm256_add_ps(s, load_tail(x + i, n - i, 0.0f));
    return hsum8(s);
}
AVX2 static size_t vfind_gt_avx2(const float *x, size_t n, float thr) {
    const __m256 t = _mm256_set1_ps(thr);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        int m = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + i), t, _CMP_GT_OQ));
        if (m) return i + (size_t)__builtin_ctz((unsigned)m);
    }
    for (; i < n; i++)
        if (x[i] > thr) return i;
    return n;
}
AVX2 static float vinterval_avx2(float *a, const float *u, const float *v, const float *w, float cw, float cx,
                                 float cr, size_t n);
AVX2 static size_t vindex_ge_avx2(const float *x, size_t n, float t, int *idx) {
    const __m256 vt = _mm256_set1_ps(t);
    size_t i = 0, k = 0;
    for (; i + 8 <= n; i += 8)
        for (unsigned m = (unsigned)_mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + i), vt, _CMP_GE_OQ)); m;
             m &= m - 1)
            idx[k++] = (int)(i + (size_t)__builtin_ctz(m));
    for (; i < n; i++)
        if (x[i] >= t) idx[k++] = (int)i;
    return k;
}
AVX2 static float vdot_avx2(const float *x, const float *y, size_t n) {
    __m256 s = _mm256_setzero_ps();
    size_t i = 0;
    for (; i + 8 <= n; i += 8) s = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), s);
    if (i < n) s = _mm256_fmadd_ps(load_tail(x + i, n - i, 0.0f), load_tail(y + i, n - i, 0.0f), s);
    return hsum8(s);
}
#endif

/* ---------------------------------------------------------------- portable bodies */
static float vexp_sum_c(float *y, const float *x, float sub, size_t n) {
    float acc[8] = {0};
    for (size_t i = 0; i < n; i++) {
        y[i] = tfm_expf(x[i] - sub);
        acc[i & 7] += y[i];
    }
    return ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
}
static void vexp_c(float *y, const float *x, size_t n) {
    for (size_t i = 0; i < n; i++) y[i] = tfm_expf(x[i]);
}
static void vtanh_c(float *y, const float *x, size_t n) {
    for (size_t i = 0; i < n; i++) y[i] = tanh_s(x[i]);
}
static void vsigmoid_c(float *y, const float *x, size_t n) {
    for (size_t i = 0; i < n; i++) y[i] = 1.0f / (1.0f + tfm_expf(-x[i]));
}
static void vgelu_c(float *y, float *x, const float *bias, int C, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (bias) x[i] += bias[i % (size_t)C];
        y[i] = gelu_s(x[i]);
    }
}
static void vgelu_save_d_c(float *y, float *x, const float *bias, int C, size_t n) {
    for (size_t i = 0; i < n; i++) {
        float v = bias ? x[i] + bias[i % (size_t)C] : x[i];
        y[i] = gelu_s(v);
        x[i] = gelu_d_s(v);
    }
}
static void vgelu_backward_c(float *dx, const float *dy, const float *x, size_t n, int accumulate) {
    for (size_t i = 0; i < n; i++) {
        float g = dy[i] * gelu_d_s(x[i]);
        dx[i] = accumulate ? dx[i] + g : g;
    }
}
static float vmax_c(const float *x, size_t n) {
    float m = -INFINITY;
    for (size_t i = 0; i < n; i++) m = x[i] > m ? x[i] : m;
    return m;
}
static size_t vfind_gt_c(const float *x, size_t n, float thr) {
    for (size_t i = 0; i < n; i++)
        if (x[i] > thr) return i;
    return n;
}
static float vinterval_c(float *a, const float *u, const float *v, const float *w, float cw, float cx, float cr,
                         size_t n) {
    float L = -INFINITY;
    for (size_t i = 0; i < n; i++) {
        float ai = a[i];
        if (ai == -INFINITY) continue;   /* banned */
        float B = cw * u[i] + cx * v[i] + cr * (fabsf(ai) + w[i]) + 1e-30f;
        float lo = ai - B;
        L = lo > L ? lo : L;
        a[i] = ai + B;
    }
    return L;
}
static size_t vindex_ge_c(const float *x, size_t n, float t, int *idx) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (x[i] >= t) idx[k++] = (int)i;
    return k;
}
static float vsum_c(const float *x, size_t n) {
    float acc[8] = {0};
    for (size_t i = 0; i < n; i++) acc[i & 7] += x[i];
    return ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
}
static float vdot_c(const float *x, const float *y, size_t n) {
    float acc[8] = {0};
    for (size_t i = 0; i < n; i++) acc[i & 7] += x[i] * y[i];
    return ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
}

/* AdamW: one plain loop compiled for each path (vectorised by the compiler; no FMA contraction in
 * ISO C mode, so every path gives the same bits). */
static inline __attribute__((always_inline)) void adamw_body(float *restrict w, float *restrict g, float *restrict m,
                                                              float *restrict v, size_t n, const tfm_adamw_coef *k) {
    const float b1 = k->b1, b2 = k->b2, eps = k->eps, decay = k->decay, step_size = k->step_size;
    const float bc2_sqrt = k->bc2_sqrt, grad_scale = k->grad_scale;
    if (k->zero_grad) {
        for (size_t i = 0; i < n; i++) {
            float gi = g[i] * grad_scale;
            g[i] = 0.0f;
            float mi = b1 * m[i] + (1.0f - b1) * gi;
            float vi = b2 * v[i] + (1.0f - b2) * gi * gi;
            m[i] = mi;
            v[i] = vi;
            w[i] = w[i] * decay - step_size * mi / (sqrtf(vi) / bc2_sqrt + eps);
        }
    } else {
        for (size_t i = 0; i < n; i++) {
            float gi = g[i] * grad_scale;
            float mi = b1 * m[i] + (1.0f - b1) * gi;
            float vi = b2 * v[i] + (1.0f - b2) * gi * gi;
            m[i] = mi;
            v[i] = vi;
            w[i] = w[i] * decay - step_size * mi / (sqrtf(vi) / bc2_sqrt + eps);
        }
    }
}
static void vadamw_c(float *w, float *g, float *m, float *v, size_t n, const tfm_adamw_coef *k) {
    adamw_body(w, g, m, v, n, k);
}
#ifdef HAVE_X86
TFM_TARGET_AVX2 static void vadamw_avx2(float *w, float *g, float *m, float *v, size_t n, const tfm_adamw_coef *k) {
    adamw_body(w, g, m, v, n, k);
}
TFM_TARGET_AVX512 static void vadamw_avx512(float *w, float *g, float *m, float *v, size_t n,
                                            const tfm_adamw_coef *k) {
    adamw_body(w, g, m, v, n, k);
}
#endif

/* Column sums of a block of at most TFM_COLSUM_W columns: the block's running sums stay in registers
 * down the rows (a full block has a constant width, so the compiler keeps acc[] in vector registers)
 * instead of a load and a store of out per row. Only adds, in row order: the same bits on every path. */
static inline __attribute__((always_inline)) void colsum_body(const float *restrict m, int rows, int ld, int w,
                                                               float *restrict out) {
    float acc[TFM_COLSUM_W];
    if (w == TFM_COLSUM_W) {
        for (int c = 0; c < TFM_COLSUM_W; c++) acc[c] = out[c];
        for (int r = 0; r < rows; r++)
            for (int c = 0; c < TFM_COLSUM_W; c++) acc[c] += m[(size_t)r * ld + c];
        for (int c = 0; c < TFM_COLSUM_W; c++) out[c] = acc[c];
        return;
    }
    for (int c = 0; c < w; c++) acc[c] = out[c];
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < w; c++) acc[c] += m[(size_t)r * ld + c];
    for (int c = 0; c < w; c++) out[c] = acc[c];
}
static void vcolsum_c(const float *m, int rows, int ld, int w, float *out) { colsum_body(m, rows, ld, w, out); }
#ifdef HAVE_X86
TFM_TARGET_AVX2 static void vcolsum_avx2(const float *m, int rows, int ld, int w, float *out) {
    colsum_body(m, rows, ld, w, out);
}
TFM_TARGET_AVX512 static void vcolsum_avx512(const float *m, int rows, int ld, int w, float *out) {
    colsum_body(m, rows, ld, w, out);
}
#endif

/* one query's dot products with many rows, each exactly as the path's vdot computes it */
static void vdot_rows_c(float *s, const float *x, const float *Y, size_t ldy, int rows, size_t n) {
    for (int r = 0; r < rows; r++) s[r] = vdot_c(x, Y + (size_t)r * ldy, n);
}
#ifdef HAVE_X86
/* four rows at a time: four independent accumulator chains (a decoding step's keys come from memory, and one
 * chain of dependent FMAs a key left the loads waiting), each row's sums in vdot_avx2's order */
AVX2 static void vdot_rows_avx2(float *s, const float *x, const float *Y, size_t ldy, int rows, size_t n) {
    int r = 0;
    for (; r + 4 <= rows; r += 4) {
        const float *y0 = Y + (size_t)r * ldy, *y1 = y0 + ldy, *y2 = y1 + ldy, *y3 = y2 + ldy;
        __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
        size_t i = 0;
        for (; i + 8 <= n; i += 8) {
            __m256 xv = _mm256_loadu_ps(x + i);
            s0 = _mm256_fmadd_ps(xv, _mm256_loadu_ps(y0 + i), s0);
            s1 = _mm256_fmadd_ps(xv, _mm256_loadu_ps(y1 + i), s1);
            s2 = _mm256_fmadd_ps(xv, _mm256_loadu_ps(y2 + i), s2);
            s3 = _mm256_fmadd_ps(xv, _mm256_loadu_ps(y3 + i), s3);
        }
        if (i < n) {
            __m256 xv = load_tail(x + i, n - i, 0.0f);
            s0 = _mm256_fmadd_ps(xv, load_tail(y0 + i, n - i, 0.0f), s0);
            s1 = _mm256_fmadd_ps(xv, load_tail(y1 + i, n - i, 0.0f), s1);
            s2 = _mm256_fmadd_ps(xv, load_tail(y2 + i, n - i, 0.0f), s2);
            s3 = _mm256_fmadd_ps(xv, load_tail(y3 + i, n - i, 0.0f), s3);
        }
        s[r] = hsum8(s0), s[r + 1] = hsum8(s1), s[r + 2] = hsum8(s2), s[r + 3] = hsum8(s3);
    }
    for (; r < rows; r++) s[r] = vdot_avx2(x, Y + (size_t)r * ldy, n);
}
static void vdot_rows_avx512(float *s, const float *x, const float *Y, size_t ldy, int rows, size_t n) {
    tfm_vdot_rows_avx512(s, x, Y, ldy, rows, n);
}
#endif

/* dropout keep masks: the counter-based hash (tfm_drop_hash) of consecutive keys */
static void vdrop_keep_c(uint8_t *keep, uint64_t key, uint32_t thresh, size_t n) {
    for (size_t i = 0; i < n; i++) keep[i] = tfm_drop_hash(key + i) >= thresh;
}
#ifdef HAVE_X86
/* a * c mod 2^64 in each 64-bit lane, from 32x32->64 products (AVX2 has no 64-bit multiply) */
AVX2 static inline __m256i mul64_const(__m256i a, uint64_t c) {
    const __m256i clo = _mm256_set1_epi64x((long long)(c & 0xffffffffu)), chi = _mm256_set1_epi64x((long long)(c >> 32));
    __m256i cross = _mm256_add_epi64(_mm256_mul_epu32(_mm256_srli_epi64(a, 32), clo), _mm256_mul_epu32(a, chi));
    return _mm256_add_epi64(_mm256_mul_epu32(a, clo), _mm256_slli_epi64(cross, 32));
}
/* tfm_drop_hash of 4 keys; the 32-bit results are the lanes' high halves */
AVX2 static inline __m256i drop_hash4(__m256i z) {
    z = mul64_const(_mm256_xor_si256(z, _mm256_srli_epi64(z, 30)), 0xBF58476D1CE4E5B9ull);
    z = mul64_const(_mm256_xor_si256(z, _mm256_srli_epi64(z, 27)), 0x94D049BB133111EBull);
    return _mm256_xor_si256(z, _mm256_srli_epi64(z, 31));
}
AVX2 static void vdrop_keep_avx2(uint8_t *keep, uint64_t key, uint32_t thresh, size_t n) {
    const __m256i four = _mm256_set1_epi64x(4), flip = _mm256_set1_epi32((int)0x80000000u);
    const __m256i th = _mm256_xor_si256(_mm256_set1_epi32((int)thresh), flip);
    __m256i z = _mm256_add_epi64(_mm256_set1_epi64x((long long)key), _mm256_set_epi64x(3, 2, 1, 0));
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i h0 = drop_hash4(z), h1 = drop_hash4(_mm256_add_epi64(z, four));
        z = _mm256_add_epi64(z, _mm256_add_epi64(four, four));
        /* the high halves in key order: (0,1,4,5 | 2,3,6,7), then 64-bit pairs reordered to 0..7 */
        __m256i h = _mm256_castps_si256(
            _mm256_shuffle_ps(_mm256_castsi256_ps(h0), _mm256_castsi256_ps(h1), _MM_SHUFFLE(3, 1, 3, 1)));
        h = _mm256_permute4x64_epi64(h, _MM_SHUFFLE(3, 1, 2, 0));
        /* h >= thresh (unsigned) = !(thresh > h), compared with the sign bits flipped */
        __m256i below = _mm256_cmpgt_epi32(th, _mm256_xor_si256(h, flip));
        unsigned bits = ~(unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(below));
        for (int t = 0; t < 8; t++) keep[i + t] = (uint8_t)((bits >> t) & 1u);
    }
    vdrop_keep_c(keep + i, key + i, thresh, n - i);
}
#endif

#ifdef HAVE_X86
/* vinterval_c 8 lanes at a time (B with FMAs: the caller's margin covers the rounding); the tail by the loop */
AVX2 static float vinterval_avx2(float *a, const float *u, const float *v, const float *w, float cw, float cx,
                                 float cr, size_t n) {
    const __m256 vcw = _mm256_set1_ps(cw), vcx = _mm256_set1_ps(cx), vcr = _mm256_set1_ps(cr);
    const __m256 tiny = _mm256_set1_ps(1e-30f), ninf = _mm256_set1_ps(-INFINITY), sign = _mm256_set1_ps(-0.0f);
    __m256 L = ninf;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 ai = _mm256_loadu_ps(a + i);
        __m256 B = _mm256_mul_ps(vcr, _mm256_add_ps(_mm256_andnot_ps(sign, ai), _mm256_loadu_ps(w + i)));
        B = _mm256_add_ps(_mm256_fmadd_ps(vcw, _mm256_loadu_ps(u + i), _mm256_fmadd_ps(vcx, _mm256_loadu_ps(v + i), B)),
                          tiny);
        L = _mm256_max_ps(L, _mm256_sub_ps(ai, B));   /* banned: -inf - inf = -inf */
        __m256 banned = _mm256_cmp_ps(ai, ninf, _CMP_EQ_OQ);
        _mm256_storeu_ps(a + i, _mm256_blendv_ps(_mm256_add_ps(ai, B), ninf, banned));   /* not -inf + inf */
    }
    float l = hmax8(L), rest = vinterval_c(a + i, u + i, v + i, w + i, cw, cx, cr, n - i);
    return rest > l ? rest : l;
}
#endif

/* ---------------------------------------------------------------- one table per path */
#define VMATH_TABLE(sfx) {vexp_sum##sfx, vexp##sfx, vtanh##sfx, vsigmoid##sfx, vgelu##sfx, \
                          vgelu_backward##sfx, vmax##sfx, vsum##sfx, vdot##sfx, vadamw##sfx, vfind_gt##sfx, \
                          vcolsum##sfx, vgelu_save_d##sfx, vdot_rows##sfx, vdrop_keep##sfx, vinterval##sfx,      \
                          vindex_ge##sfx}
#ifdef HAVE_X86
#define vexp_sum_avx512 tfm_vexp_sum_avx512
#define vexp_avx512 tfm_vexp_avx512
#define vtanh_avx512 tfm_vtanh_avx512
#define vsigmoid_avx512 tfm_vsigmoid_avx512
#define vgelu_avx512 tfm_vgelu_avx512
#define vgelu_backward_avx512 tfm_vgelu_backward_avx512
#define vgelu_save_d_avx512 tfm_vgelu_save_d_avx512
#define vmax_avx512 tfm_vmax_avx512
#define vsum_avx512 tfm_vsum_avx512
#define vdot_avx512 tfm_vdot_avx512
#define vdrop_keep_avx512 tfm_vdrop_keep_avx512
#define vfind_gt_avx512 vfind_gt_avx2   /* a scan that stops early: 8 lanes are enough */
#define vinterval_avx512 vinterval_avx2   /* the screen's per-row passes: a small part of a step */
#define vindex_ge_avx512 vindex_ge_avx2
static const tfm_vmath_table tables[TFM_ISA_COUNT] = {VMATH_TABLE(_c), VMATH_TABLE(_avx2), VMATH_TABLE(_avx512)};
#else
static const tfm_vmath_table tables[TFM_ISA_COUNT] = {VMATH_TABLE(_c), VMATH_TABLE(_c), VMATH_TABLE(_c)};
#endif

const tfm_vmath_table *tfm_vmath_for(tfm_isa isa) { return &tables[(unsigned)isa < TFM_ISA_COUNT ? isa : 0]; }
static inline const tfm_vmath_table *vm(void) { return &tables[tfm_isa_active()]; }

/* ---------------------------------------------------------------- public entry points */
float tfm_vexp_sum(float *y, const float *x, float sub, size_t n) { return vm()->exp_sum(y, x, sub, n); }
void tfm_vexp(float *y, const float *x, size_t n) { vm()->exp(y, x, n); }
void tfm_vtanh(float *y, const float *x, size_t n) { vm()->tanh(y, x, n); }
void tfm_vsigmoid(float *y, const float *x, size_t n) { vm()->sigmoid(y, x, n); }
void tfm_vgelu(float *y, float *x, const float *bias, int C, size_t n) { vm()->gelu(y, x, bias, C, n); }
void tfm_vgelu_save_d(float *y, float *x, const float *bias, int C, size_t n) { vm()->gelu_save_d(y, x, bias, C, n); }
void tfm_vgelu_backward(float *dx, const float *dy, const float *x, size_t n, int accumulate) {
    vm()->gelu_backward(dx, dy, x, n, accumulate);
}
float tfm_vmax(const float *x, size_t n) { return vm()->max(x, n); }
float tfm_vsum(const float *x, size_t n) { return vm()->sum(x, n); }
float tfm_vdot(const float *x, const float *y, size_t n) { return vm()->dot(x, y, n); }
size_t tfm_vfind_gt(const float *x, size_t n, float thr) { return vm()->find_gt(x, n, thr); }
float tfm_vinterval(float *a, const float *u, const float *v, const float *w, float cw, float cx, float cr, size_t n) {
    return vm()->interval(a, u, v, w, cw, cx, cr, n);
}
size_t tfm_vindex_ge(const float *x, size_t n, float t, int *idx) { return vm()->index_ge(x, n, t, idx); }
int tfm_vargmax_first(const float *x, int n) {
    float m = tfm_vmax(x, (size_t)n);
    size_t i = tfm_vfind_gt(x, (size_t)n, nextafterf(m, -INFINITY));   /* x[i] > the float below m: x[i] == m */
    return i < (size_t)n ? (int)i : 0;
}
void tfm_vdrop_keep(uint8_t *keep, uint64_t key, uint32_t thresh, size_t n) { vm()->drop_keep(keep, key, thresh, n); }
void tfm_vdot_rows(float *s, const float *x, const float *Y, size_t ldy, int rows, size_t n) {
    vm()->dot_rows(s, x, Y, ldy, rows, n);
}
void tfm_vcolsum(const float *m, int rows, int ld, int w, float *out) { vm()->colsum(m, rows, ld, w, out); }
void tfm_vadamw(float *w, float *g, float *m, float *v, size_t n, const tfm_adamw_coef *k) {
    vm()->adamw(w, g, m, v, n, k);
}

/* Plain loops: gcc and clang vectorise these at -O3 (no transcendental to approximate). */
void tfm_vbias_relu(float *y, const float *bias, int C, size_t n) {
    if (bias)
        for (size_t r = 0; r < n; r += (size_t)C)
            for (int c = 0; c < C; c++) {
                float v = y[r + c] + bias[c];
                y[r + c] = v > 0 ? v : 0.0f;
            }
    else
        for (size_t i = 0; i < n; i++) y[i] = y[i] > 0 ? y[i] : 0.0f;
}

void tfm_vmul(float *d, const float *y, size_t n) {
    for (size_t i = 0; i < n; i++) d[i] *= y[i];
}

void tfm_vrelu_mask(float *d, const float *y, size_t n) {
    for (size_t i = 0; i < n; i++) d[i] = y[i] > 0 ? d[i] : 0.0f;
}
