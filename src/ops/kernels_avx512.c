/* AVX-512 kernels: the GEMM 12x32 micro-kernel and the vector math of ops/vmath.h on 16 lanes.
 * This file is compiled with -mavx512f -mavx2 -mfma (Makefile) and its functions are only called when
 * cpuid reports AVX-512F (ops/isa.h). Same polynomials as vmath.c (Cephes-style expf/tanhf). */
#include "ops/isa.h"
#include "ops/vmath.h"

#if defined(__AVX512F__)
const int tfm_avx512_built_ = 1;
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "ops/avx512_store.h"

/* ---------------------------------------------------------------- GEMM micro-kernels 12 x 32, 8 x 32, 6 x 32 */
/* 24 accumulators (12 rows x 2 zmm of 16 columns), 2 B vectors and a broadcast: 27 of the 32 zmm
 * registers. B: two consecutive packed 16-wide panels (b, b + 16*kc). */
#define GR(i) c##i##0, c##i##1
#define FMA_ROW(i, x)                                                                    \
    do {                                                                                 \
        __m512 av = _mm512_set1_ps(x);                                                   \
        c##i##0 = _mm512_fmadd_ps(av, b0, c##i##0);                                      \
        c##i##1 = _mm512_fmadd_ps(av, b1, c##i##1);                                      \
    } while (0)

/* C's lines of the tile, asked for before its depth loop: a C that is not in cache (a grad or an output
 * buffer last touched a step ago) then arrives during the FMAs instead of stalling the final stores. */
static inline __attribute__((always_inline)) void prefetch_tile(const float *c, ptrdiff_t ldc, int rows) {
#define PF_ROW(i) if (i < rows) { _mm_prefetch((const char *)(c + i * ldc), _MM_HINT_T0); \
                                  _mm_prefetch((const char *)(c + i * ldc + 16), _MM_HINT_T0); }
    PF_ROW(0) PF_ROW(1) PF_ROW(2) PF_ROW(3) PF_ROW(4) PF_ROW(5)
    if (rows > 6) { PF_ROW(6) PF_ROW(7) PF_ROW(8) PF_ROW(9) PF_ROW(10) PF_ROW(11) }
#undef PF_ROW
}

/* The 12-row tile with A(i,k) for rows i < 6 at a + i * rs + k * ks, for rows i >= 6 at a6 + (i-6) * rs +
 * k * ks: packed A (two 6-row panels: rs = 1, ks = 6, a6 = a + 6*kc), a row-major A read in place (rs = lda,
 * ks = 1, a6 = a + 6*lda) or a transposed one (rs = 1, ks = lda, a6 = a + 6). The same FMA chain per element
 * whichever A it reads. Rows [0, mr) are stored. */
static inline __attribute__((always_inline)) void kern12x32(int kc, const float *a, const float *a6, ptrdiff_t rs,
        ptrdiff_t ks, const float *b, float *c, ptrdiff_t ldc, int mr, int nr, float alpha, float beta) {
    const float *bb = b + (size_t)16 * kc;
    const float *p0 = a, *p3 = a + 3 * rs, *p6 = a6, *p9 = a6 + 3 * rs;
    prefetch_tile(c, ldc, mr < 12 ? mr : 12);
    __m512 GR(0), GR(1), GR(2), GR(3), GR(4), GR(5), GR(6), GR(7), GR(8), GR(9), GR(10), GR(11);
    c00 = c01 = c10 = c11 = c20 = c21 = c30 = c31 = c40 = c41 = c50 = c51 = _mm512_setzero_ps();
    c60 = c61 = c70 = c71 = c80 = c81 = c90 = c91 = c100 = c101 = c110 = c111 = _mm512_setzero_ps();
    for (int k = 0; k < kc; k++, p0 += ks, p3 += ks, p6 += ks, p9 += ks, b += 16, bb += 16) {
        __m512 b0 = _mm512_load_ps(b), b1 = _mm512_load_ps(bb);
        FMA_ROW(0, p0[0]); FMA_ROW(1, p0[rs]); FMA_ROW(2, p0[2 * rs]);
        FMA_ROW(3, p3[0]); FMA_ROW(4, p3[rs]); FMA_ROW(5, p3[2 * rs]);
        FMA_ROW(6, p6[0]); FMA_ROW(7, p6[rs]); FMA_ROW(8, p6[2 * rs]);
        FMA_ROW(9, p9[0]); FMA_ROW(10, p9[rs]); FMA_ROW(11, p9[2 * rs]);
    }
    const __m512 rows[12][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}, {c40, c41}, {c50, c51},
                                {c60, c61}, {c70, c71}, {c80, c81}, {c90, c91}, {c100, c101}, {c110, c111}};
    tfm_store_tile32(c, ldc, rows, mr < 12 ? mr : 12, nr, alpha, beta);
}

void tfm_gemm_kern12x32_avx512(int kc, const float *a, const float *b, float *c, ptrdiff_t ldc, int mr, int nr,
                               float alpha, float beta) {
    kern12x32(kc, a, a + (size_t)6 * kc, 1, 6, b, c, ldc, mr, nr, alpha, beta);
}
void tfm_gemm_kern12x32_rows_avx512(int kc, const float *a, ptrdiff_t lda, const float *b, float *c, ptrdiff_t ldc,
                                    int nr, float alpha, float beta) {
    kern12x32(kc, a, a + 6 * lda, lda, 1, b, c, ldc, 12, nr, alpha, beta);
}
void tfm_gemm_kern12x32_cols_avx512(int kc, const float *a, ptrdiff_t lda, const float *b, float *c, ptrdiff_t ldc,
                                    int nr, float alpha, float beta) {
    kern12x32(kc, a, a + 6, 1, lda, b, c, ldc, 12, nr, alpha, beta);
}

/* 8 x 32: 7 or 8 rows left under the 12-row tiles (packed A: rows 0-5 in the first 6-row panel, 6-7 in the
 * second), 16 accumulators: two thirds of a 12-row tile's time instead of all of it (M = 128 = 10 x 12 + 8). */
void tfm_gemm_kern8x32_avx512(int kc, const float *a, const float *b, float *c, ptrdiff_t ldc, int mr, int nr,
                              float alpha, float beta) {
    const float *bb = b + (size_t)16 * kc, *a6 = a + (size_t)6 * kc;
    prefetch_tile(c, ldc, mr < 8 ? mr : 8);
    __m512 GR(0), GR(1), GR(2), GR(3), GR(4), GR(5), GR(6), GR(7);
    c00 = c01 = c10 = c11 = c20 = c21 = c30 = c31 = c40 = c41 = c50 = c51 = c60 = c61 = c70 = c71 = _mm512_setzero_ps();
    for (int k = 0; k < kc; k++, a += 6, a6 += 6, b += 16, bb += 16) {
        __m512 b0 = _mm512_load_ps(b), b1 = _mm512_load_ps(bb);
        FMA_ROW(0, a[0]); FMA_ROW(1, a[1]); FMA_ROW(2, a[2]); FMA_ROW(3, a[3]); FMA_ROW(4, a[4]); FMA_ROW(5, a[5]);
        FMA_ROW(6, a6[0]); FMA_ROW(7, a6[1]);
    }
    const __m512 rows[8][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31},
                               {c40, c41}, {c50, c51}, {c60, c61}, {c70, c71}};
    tfm_store_tile32(c, ldc, rows, mr < 8 ? mr : 8, nr, alpha, beta);
}

/* 6 x 32: the rows left under a 12-row tile (at most 6; reads one A panel), 12 accumulators. */
void tfm_gemm_kern6x32_avx512(int kc, const float *a, const float *b, float *c, ptrdiff_t ldc, int mr, int nr,
                              float alpha, float beta) {
    const float *bb = b + (size_t)16 * kc;
    prefetch_tile(c, ldc, mr < 6 ? mr : 6);
    __m512 GR(0), GR(1), GR(2), GR(3), GR(4), GR(5);
    c00 = c01 = c10 = c11 = c20 = c21 = c30 = c31 = c40 = c41 = c50 = c51 = _mm512_setzero_ps();
    for (int k = 0; k < kc; k++, a += 6, b += 16, bb += 16) {
        __m512 b0 = _mm512_load_ps(b), b1 = _mm512_load_ps(bb);
        FMA_ROW(0, a[0]); FMA_ROW(1, a[1]); FMA_ROW(2, a[2]); FMA_ROW(3, a[3]); FMA_ROW(4, a[4]); FMA_ROW(5, a[5]);
    }
    const __m512 rows[6][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}, {c40, c41}, {c50, c51}};
    tfm_store_tile32(c, ldc, rows, mr < 6 ? mr : 6, nr, alpha, beta);
}

/* ---------------------------------------------------------------- dropout keep masks, 16 keys a step */
/* a * c mod 2^64 in each 64-bit lane, from 32x32->64 products (AVX-512F has no 64-bit multiply) */
static inline __m512i mul64_const16(__m512i a, uint64_t c) {
    const __m512i clo = _mm512_set1_epi64((long long)(c & 0xffffffffu)), chi = _mm512_set1_epi64((long long)(c >> 32));
    __m512i cross = _mm512_add_epi64(_mm512_mul_epu32(_mm512_srli_epi64(a, 32), clo), _mm512_mul_epu32(a, chi));
    return _mm512_add_epi64(_mm512_mul_epu32(a, clo), _mm512_slli_epi64(cross, 32));
}
/* tfm_drop_hash (ops/op_impl.h) of 8 keys; the 32-bit results are the lanes' high halves */
static inline __m512i drop_hash8(__m512i z) {
    z = mul64_const16(_mm512_xor_si512(z, _mm512_srli_epi64(z, 30)), 0xBF58476D1CE4E5B9ull);
    z = mul64_const16(_mm512_xor_si512(z, _mm512_srli_epi64(z, 27)), 0x94D049BB133111EBull);
    return _mm512_xor_si512(z, _mm512_srli_epi64(z, 31));
}
/* keep[i] = hash(key + i) >= thresh for 16 consecutive keys from z (lanes key..key+7) */
static inline __m128i drop_keep16(__m512i z, __m512i th) {
    const __m512i eight = _mm512_set1_epi64(8);
    const __m512i odd = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
    __m512i h = _mm512_permutex2var_epi32(drop_hash8(z), odd, drop_hash8(_mm512_add_epi64(z, eight)));
    __mmask16 keep = _mm512_cmpge_epu32_mask(h, th);
    return _mm512_cvtepi32_epi8(_mm512_maskz_mov_epi32(keep, _mm512_set1_epi32(1)));
}
void tfm_vdrop_keep_avx512(uint8_t *keep, uint64_t key, uint32_t thresh, size_t n) {
    const __m512i th = _mm512_set1_epi32((int)thresh), sixteen = _mm512_set1_epi64(16);
    __m512i z = _mm512_add_epi64(_mm512_set1_epi64((long long)key), _mm512_set_epi64(7, 6, 5, 4, 3, 2, 1, 0));
    size_t i = 0;
    for (; i + 16 <= n; i += 16, z = _mm512_add_epi64(z, sixteen))
        _mm_storeu_si128((__m128i *)(keep + i), drop_keep16(z, th));
    if (i < n) {   /* the last n % 16 keys: computed for 16, stored for the rest */
        uint8_t t[16];
        _mm_storeu_si128((__m128i *)t, drop_keep16(z, th));
        memcpy(keep + i, t, n - i);
    }
}

/* ---------------------------------------------------------------- vector math on 16 lanes */
#define S1(x) _mm512_set1_ps(x)

static inline __m512 exp16(__m512 x) {
    __mmask16 lo = _mm512_cmp_ps_mask(x, S1(VM_EXP_LO), _CMP_GE_OQ);
    x = _mm512_min_ps(x, S1(VM_EXP_HI));
    x = _mm512_max_ps(x, S1(VM_EXP_LO));
    __m512 fx = _mm512_roundscale_ps(_mm512_mul_ps(x, S1(VM_LOG2E)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(fx, S1(VM_LN2_HI), x);
    r = _mm512_fnmadd_ps(fx, S1(VM_LN2_LO), r);
    __m512 z = _mm512_mul_ps(r, r);
    __m512 y = _mm512_fmadd_ps(S1(VM_P0), r, S1(VM_P1));
    y = _mm512_fmadd_ps(y, r, S1(VM_P2));
    y = _mm512_fmadd_ps(y, r, S1(VM_P3));
    y = _mm512_fmadd_ps(y, r, S1(VM_P4));
    y = _mm512_fmadd_ps(y, r, S1(VM_P5));
    y = _mm512_fmadd_ps(y, z, _mm512_add_ps(r, S1(1.0f)));
    __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(fx), _mm512_set1_epi32(127)), 23);
    y = _mm512_mul_ps(y, _mm512_castsi512_ps(e));
    return _mm512_maskz_mov_ps(lo, y);
}

static inline __m512 abs16(__m512 x) {
    return _mm512_castsi512_ps(_mm512_and_epi32(_mm512_castps_si512(x), _mm512_set1_epi32(0x7fffffff)));
}

static inline __m512 tanh16(__m512 x) {
    __m512i sign = _mm512_and_epi32(_mm512_castps_si512(x), _mm512_set1_epi32((int)0x80000000u));
    __m512 a = abs16(x);
    __m512 z = _mm512_mul_ps(x, x);
    __m512 p = _mm512_fmadd_ps(S1(VM_T0), z, S1(VM_T1));
    p = _mm512_fmadd_ps(p, z, S1(VM_T2));
    p = _mm512_fmadd_ps(p, z, S1(VM_T3));
    p = _mm512_fmadd_ps(p, z, S1(VM_T4));
    __m512 small = _mm512_fmadd_ps(_mm512_mul_ps(p, z), x, x);
    __m512 e = exp16(_mm512_add_ps(a, a));
    __m512 big = _mm512_sub_ps(S1(1.0f), _mm512_div_ps(S1(2.0f), _mm512_add_ps(e, S1(1.0f))));
    big = _mm512_castsi512_ps(_mm512_or_epi32(_mm512_castps_si512(big), sign));
    __mmask16 is_small = _mm512_cmp_ps_mask(a, S1(0.625f), _CMP_LT_OQ);
    return _mm512_mask_blend_ps(is_small, big, small);
}

/* tanh(K (x + C x^3)) as 1 - 2/(exp(2u)+1) (see gelu_inner8 in vmath.c) */
static inline __m512 gelu_inner16(__m512 x) {
    __m512 x2 = _mm512_mul_ps(x, x);
    __m512 u = _mm512_mul_ps(_mm512_mul_ps(S1(2.0f * VM_GELU_K), x), _mm512_fmadd_ps(S1(VM_GELU_C), x2, S1(1.0f)));
    __m512 e = exp16(_mm512_min_ps(u, S1(VM_EXP_HI)));
    return _mm512_sub_ps(S1(1.0f), _mm512_div_ps(S1(2.0f), _mm512_add_ps(e, S1(1.0f))));
}
static inline __m512 gelu16_t(__m512 x, __m512 t) { /* gelu(x) from t = gelu_inner16(x) */
    return _mm512_mul_ps(_mm512_mul_ps(S1(0.5f), x), _mm512_add_ps(S1(1.0f), t));
}
static inline __m512 gelu16(__m512 x) { return gelu16_t(x, gelu_inner16(x)); }
static inline __m512 gelu_d16_t(__m512 x, __m512 t) { /* gelu'(x) from t = gelu_inner16(x) */
    __m512 one = S1(1.0f), half = S1(0.5f);
    __m512 x2 = _mm512_mul_ps(x, x);
    __m512 a = _mm512_mul_ps(half, _mm512_add_ps(one, t));
    __m512 b = _mm512_mul_ps(_mm512_mul_ps(half, x), _mm512_fnmadd_ps(t, t, one));
    __m512 c = _mm512_mul_ps(S1(VM_GELU_K), _mm512_fmadd_ps(S1(3.0f * VM_GELU_C), x2, one));
    return _mm512_fmadd_ps(b, c, a);
}
static inline __m512 gelu_d16(__m512 x) { return gelu_d16_t(x, gelu_inner16(x)); }
static inline __m512 sigmoid16(__m512 x) {
    return _mm512_div_ps(S1(1.0f), _mm512_add_ps(S1(1.0f), exp16(_mm512_sub_ps(_mm512_setzero_ps(), x))));
}

/* mask of the first n (< 16) lanes */
static inline __mmask16 tail_mask(size_t n) { return (__mmask16)((1u << n) - 1); }

/* Fixed-order horizontal sums/max: 16 -> 8 -> 4 -> 2 -> 1 by halves. */
static inline float hsum16(__m512 v) {
    __m256 h = _mm256_add_ps(_mm512_castps512_ps256(v),
                             _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
    return _mm_cvtss_f32(s);
}
static inline float hmax16(__m512 v) {
    __m256 h = _mm256_max_ps(_mm512_castps512_ps256(v),
                             _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_shuffle_ps(s, s, 1));
    return _mm_cvtss_f32(s);
}

/* y = f(x) over n elements, the tail through a masked load/store (padding lanes read 0). */
#define MAP16(F)                                                                                   \
    size_t i = 0;                                                                                  \
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, F(_mm512_loadu_ps(x + i)));                \
    if (i < n) {                                                                                   \
        __mmask16 m = tail_mask(n - i);                                                            \
        _mm512_mask_storeu_ps(y + i, m, F(_mm512_maskz_loadu_ps(m, x + i)));                        \
    }

void tfm_vexp_avx512(float *y, const float *x, size_t n) { MAP16(exp16) }
void tfm_vtanh_avx512(float *y, const float *x, size_t n) { MAP16(tanh16) }
void tfm_vsigmoid_avx512(float *y, const float *x, size_t n) { MAP16(sigmoid16) }
static void gelu_span(float *y, const float *x, size_t n) { MAP16(gelu16) }

float tfm_vexp_sum_avx512(float *y, const float *x, float sub, size_t n) {
    __m512 acc = _mm512_setzero_ps(), s = S1(sub);
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 e = exp16(_mm512_sub_ps(_mm512_loadu_ps(x + i), s));
        _mm512_storeu_ps(y + i, e);
        acc = _mm512_add_ps(acc, e);
    }
    if (i < n) {
        __mmask16 m = tail_mask(n - i);
        __m512 e = _mm512_maskz_mov_ps(m, exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), s)));
        _mm512_mask_storeu_ps(y + i, m, e);
        acc = _mm512_add_ps(acc, e);
    }
    return hsum16(acc);
}

void tfm_vgelu_avx512(float *y, float *x, const float *bias, int C, size_t n) {
    if (!bias) { gelu_span(y, x, n); return; }
    for (size_t r = 0; r < n / (size_t)C; r++) {
        float *xr = x + r * C, *yr = y + r * C;
        int c = 0;
        for (; c + 16 <= C; c += 16) {
            __m512 v = _mm512_add_ps(_mm512_loadu_ps(xr + c), _mm512_loadu_ps(bias + c));
            _mm512_storeu_ps(xr + c, v);
            _mm512_storeu_ps(yr + c, gelu16(v));
        }
        if (c < C) {
            __mmask16 m = tail_mask((size_t)(C - c));
            __m512 v = _mm512_add_ps(_mm512_maskz_loadu_ps(m, xr + c), _mm512_maskz_loadu_ps(m, bias + c));
            _mm512_mask_storeu_ps(xr + c, m, v);
            _mm512_mask_storeu_ps(yr + c, m, gelu16(v));
        }
    }
}

void tfm_vgelu_save_d_avx512(float *y, float *x, const float *bias, int C, size_t n) {
    if (!bias) C = n ? (int)n : 1;   /* callers without a bias pass C = n (one row) */
    for (size_t r = 0; r < n / (size_t)C; r++) {
        float *xr = x + r * C, *yr = y + r * C;
        for (int c = 0; c < C; c += 16) {
            __mmask16 m = C - c >= 16 ? (__mmask16)0xFFFF : tail_mask((size_t)(C - c));
            __m512 v = _mm512_maskz_loadu_ps(m, xr + c);
            if (bias) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, bias + c));
            __m512 t = gelu_inner16(v);
            _mm512_mask_storeu_ps(yr + c, m, gelu16_t(v, t));
            _mm512_mask_storeu_ps(xr + c, m, gelu_d16_t(v, t));
        }
    }
}

void tfm_vgelu_backward_avx512(float *dx, const float *dy, const float *x, size_t n, int acc) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 g = _mm512_mul_ps(_mm512_loadu_ps(dy + i), gelu_d16(_mm512_loadu_ps(x + i)));
        if (acc) g = _mm512_add_ps(g, _mm512_loadu_ps(dx + i));
        _mm512_storeu_ps(dx + i, g);
    }
    if (i < n) {
        __mmask16 m = tail_mask(n - i);
        __m512 g = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, dy + i), gelu_d16(_mm512_maskz_loadu_ps(m, x + i)));
        if (acc) g = _mm512_add_ps(g, _mm512_maskz_loadu_ps(m, dx + i));
        _mm512_mask_storeu_ps(dx + i, m, g);
    }
}

float tfm_vmax_avx512(const float *x, size_t n) {
    __m512 m = S1(-INFINITY);
    size_t i = 0;
    for (; i + 16 <= n; i += 16) m = _mm512_max_ps(m, _mm512_loadu_ps(x + i));
    if (i < n) m = _mm512_mask_max_ps(m, tail_mask(n - i), m, _mm512_maskz_loadu_ps(tail_mask(n - i), x + i));
    return hmax16(m);
}
float tfm_vsum_avx512(const float *x, size_t n) {
    __m512 s = _mm512_setzero_ps();
    size_t i = 0;
    for (; i + 16 <= n; i += 16) s = _mm512_add_ps(s, _mm512_loadu_ps(x + i));
    if (i < n) s = _mm512_add_ps(s, _mm512_maskz_loadu_ps(tail_mask(n - i), x + i));
    return hsum16(s);
}
float tfm_vdot_avx512(const float *x, const float *y, size_t n) {
    __m512 s = _mm512_setzero_ps();
    size_t i = 0;
    for (; i + 16 <= n; i += 16) s = _mm512_fmadd_ps(_mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i), s);
    if (i < n) {
        __mmask16 m = tail_mask(n - i);
        s = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, x + i), _mm512_maskz_loadu_ps(m, y + i), s);
    }
    return hsum16(s);
}

/* The sums of 16 vectors at once, lane r = hsum16(v[r]) to the bit: each level adds the lanes hsum16 adds (the
 * halves, then quarters, then pairs, then the last two), for two to four rows per instruction. After level k a
 * vector holds 2^k rows side by side; the last level leaves lane 4k + m = row 4m + k, put in order by a permute. */
static inline __m512 hsum16x16(const __m512 v[16]) {
    __m512 h[8], q[4], e[2];
    for (int p = 0; p < 8; p++)   /* rows 2p | 2p+1: v[i] + v[i + 8] */
        h[p] = _mm512_add_ps(_mm512_shuffle_f32x4(v[2 * p], v[2 * p + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                             _mm512_shuffle_f32x4(v[2 * p], v[2 * p + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    for (int p = 0; p < 4; p++)   /* quarter k: row 4p + k, h[i] + h[i + 4] */
        q[p] = _mm512_add_ps(_mm512_shuffle_f32x4(h[2 * p], h[2 * p + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                             _mm512_shuffle_f32x4(h[2 * p], h[2 * p + 1], _MM_SHUFFLE(3, 1, 3, 1)));
    for (int p = 0; p < 2; p++)   /* quarter k: rows 8p + k, 8p + 4 + k, two lanes each: lanes 0 + 2, 1 + 3 */
        e[p] = _mm512_add_ps(_mm512_shuffle_ps(q[2 * p], q[2 * p + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                             _mm512_shuffle_ps(q[2 * p], q[2 * p + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    __m512 r = _mm512_add_ps(_mm512_shuffle_ps(e[0], e[1], _MM_SHUFFLE(2, 0, 2, 0)),   /* e[0] + e[1] */
                             _mm512_shuffle_ps(e[0], e[1], _MM_SHUFFLE(3, 1, 3, 1)));
    return _mm512_permutexvar_ps(_mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15), r);
}

/* s[r] = tfm_vdot_avx512(x, Y + r ldy, n) for r < rows, the same bits: 16 rows at a time, each row's FMAs in
 * vdot's order into its own accumulator (a decoding step's keys: 16 independent chains instead of one, and one
 * reduction for 16 sums instead of 16) */
void tfm_vdot_rows_avx512(float *s, const float *x, const float *Y, size_t ldy, int rows, size_t n) {
    int r = 0;
    for (; r + 16 <= rows; r += 16) {
        const float *y = Y + (size_t)r * ldy;
        __m512 acc[16];
#pragma GCC unroll 16
        for (int j = 0; j < 16; j++) acc[j] = _mm512_setzero_ps();
        size_t i = 0;
        for (; i + 16 <= n; i += 16) {
            __m512 xv = _mm512_loadu_ps(x + i);
#pragma GCC unroll 16
            for (int j = 0; j < 16; j++) acc[j] = _mm512_fmadd_ps(xv, _mm512_loadu_ps(y + (size_t)j * ldy + i), acc[j]);
        }
        if (i < n) {
            __mmask16 m = tail_mask(n - i);
            __m512 xv = _mm512_maskz_loadu_ps(m, x + i);
#pragma GCC unroll 16
            for (int j = 0; j < 16; j++)
                acc[j] = _mm512_fmadd_ps(xv, _mm512_maskz_loadu_ps(m, y + (size_t)j * ldy + i), acc[j]);
        }
        _mm512_storeu_ps(s + r, hsum16x16(acc));
    }
    for (; r < rows; r++) s[r] = tfm_vdot_avx512(x, Y + (size_t)r * ldy, n);
}

#else
/* Not compiled with AVX-512 flags (not x86, or built without the Makefile's per-file flags):
 * tfm_isa_supported(TFM_ISA_AVX512) is then 0, so these are never called; they exist so the tables link. */
const int tfm_avx512_built_ = 0;
#include <stdlib.h>
#define NOPE abort()
void tfm_gemm_kern12x32_avx512(int kc, const float *a, const float *b, float *c, ptrdiff_t ldc, int mr, int nr,
                               float alpha, float beta) {
    (void)kc; (void)a; (void)b; (void)c; (void)ldc; (void)mr; (void)nr; (void)alpha; (void)beta; NOPE;
}
void tfm_gemm_kern8x32_avx512(int kc, const float *a, const float *b, float *c, ptrdiff_t ldc, int mr, int nr,
                              float alpha, float beta) {
    (void)kc; (void)a; (void)b; (void)c; (void)ldc; (void)mr; (void)nr; (void)alpha; (void)beta; NOPE;
}
void tfm_gemm_kern6x32_avx512(int kc, const float *a, const float *b, float *c, ptrdiff_t ldc, int mr, int nr,
                              float alpha, float beta) {
    (void)kc; (void)a; (void)b; (void)c; (void)ldc; (void)mr; (void)nr; (void)alpha; (void)beta; NOPE;
}
void tfm_gemm_kern12x32_rows_avx512(int kc, const float *a, ptrdiff_t lda, const float *b, float *c, ptrdiff_t ldc,
                                    int nr, float alpha, float beta) {
    (void)kc; (void)a; (void)lda; (void)b; (void)c; (void)ldc; (void)nr; (void)alpha; (void)beta; NOPE;
}
void tfm_gemm_kern12x32_cols_avx512(int kc, const float *a, ptrdiff_t lda, const float *b, float *c, ptrdiff_t ldc,
                                    int nr, float alpha, float beta) {
    (void)kc; (void)a; (void)lda; (void)b; (void)c; (void)ldc; (void)nr; (void)alpha; (void)beta; NOPE;
}
void tfm_vdrop_keep_avx512(uint8_t *keep, uint64_t key, uint32_t thresh, size_t n) {
    (void)keep; (void)key; (void)thresh; (void)n; NOPE;
}
float tfm_vexp_sum_avx512(float *y, const float *x, float sub, size_t n) { (void)y; (void)x; (void)sub; (void)n; NOPE; }
void tfm_vexp_avx512(float *y, const float *x, size_t n) { (void)y; (void)x; (void)n; NOPE; }
void tfm_vtanh_avx512(float *y, const float *x, size_t n) { (void)y; (void)x; (void)n; NOPE; }
void tfm_vsigmoid_avx512(float *y, const float *x, size_t n) { (void)y; (void)x; (void)n; NOPE; }
void tfm_vgelu_avx512(float *y, float *x, const float *bias, int C, size_t n) { (void)y; (void)x; (void)bias; (void)C; (void)n; NOPE; }
void tfm_vgelu_save_d_avx512(float *y, float *x, const float *bias, int C, size_t n) {
    (void)y; (void)x; (void)bias; (void)C; (void)n; NOPE;
}
void tfm_vgelu_backward_avx512(float *dx, const float *dy, const float *x, size_t n, int acc) {
    (void)dx; (void)dy; (void)x; (void)n; (void)acc; NOPE;
}
float tfm_vmax_avx512(const float *x, size_t n) { (void)x; (void)n; NOPE; }
float tfm_vsum_avx512(const float *x, size_t n) { (void)x; (void)n; NOPE; }
float tfm_vdot_avx512(const float *x, const float *y, size_t n) { (void)x; (void)y; (void)n; NOPE; }
void tfm_vdot_rows_avx512(float *s, const float *x, const float *Y, size_t ldy, int rows, size_t n) {
    (void)s; (void)x; (void)Y; (void)ldy; (void)rows; (void)n; NOPE;
}
#endif
