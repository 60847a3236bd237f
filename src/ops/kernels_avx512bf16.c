/* The AVX512_BF16 tile of tfm_gemm_bf16 (src/ops/gemm_bf16.c has the arithmetic and the packed layout).
 * Compiled with -mavx512bf16 (Makefile); called only where cpuid reports AVX512_BF16 and AVX512BW. */
#include "ops/isa.h"

#if defined(__AVX512BF16__) && defined(__AVX512BW__)
const int tfm_avx512bf16_built_ = 1;
#include <immintrin.h>

#include "ops/avx512_store.h"

/* 24 accumulators (12 rows x 2 zmm of 16 columns), 2 B vectors (16 columns x one pair each) and a
 * broadcast pair word (row i's pairs at a + i * kp): per pair, VDPBF16PS adds a(k+1) b(k+1), then
 * a(k) b(k), to each lane. */
#define ROW(i)                                                                                  \
    do {                                                                                        \
        __m512bh av = (__m512bh)_mm512_set1_epi32((int)a[(size_t)(i) * kp + p]);                \
        acc[i][0] = _mm512_dpbf16_ps(acc[i][0], av, b0);                                        \
        acc[i][1] = _mm512_dpbf16_ps(acc[i][1], av, b1);                                        \
    } while (0)

void tfm_gemm_bf16_tile_avx512bf16(int kp, const uint32_t *a, const uint32_t *b, float *c, ptrdiff_t ldc, int mr,
                                   int nr, float alpha, float beta) {
    __m512 acc[12][2];
    for (int i = 0; i < 12; i++) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
    for (int p = 0; p < kp; p++, b += 32) {
        const __m512bh b0 = (__m512bh)_mm512_loadu_si512(b), b1 = (__m512bh)_mm512_loadu_si512(b + 16);
        ROW(0); ROW(1); ROW(2); ROW(3); ROW(4); ROW(5);
        ROW(6); ROW(7); ROW(8); ROW(9); ROW(10); ROW(11);
    }
    tfm_store_tile32(c, ldc, (const __m512(*)[2])acc, mr < 12 ? mr : 12, nr, alpha, beta);
}

/* ---------------------------------------------------------------- packing with VCVTNE2PS2BF16 */
/* 32 consecutive floats x -> 16 pair words (x[2p+1] high, x[2p] low): the bfloat16 sequence in order */
static inline __m512i pairs_along(const float *x) {
    return (__m512i)_mm512_cvtne2ps_pbh(_mm512_loadu_ps(x + 16), _mm512_loadu_ps(x));
}
/* n <= 16 consecutive floats of two rows lo (depth k) and hi (k+1) -> n pair words */
static inline __m512i pairs_across(const float *lo, const float *hi, __mmask16 m) {
    const __m512i idx = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8,
                                         23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    __m512i v = (__m512i)_mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps(m, hi), _mm512_maskz_loadu_ps(m, lo));
    return _mm512_permutexvar_epi16(idx, v);
}

/* 16 x 16 words: r[i][c] -> r[c][i] (pairs of rows, then of 64-bit halves, then 128-bit lanes) */
static inline void transpose16(__m512i r[16]) {
    __m512i t[16];
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
    }
    for (int b = 0; b < 16; b += 4) {   /* r[b + j], lane L: column 4L + j of rows b..b+3 */
        r[b] = _mm512_unpacklo_epi64(t[b], t[b + 2]);
        r[b + 1] = _mm512_unpackhi_epi64(t[b], t[b + 2]);
        r[b + 2] = _mm512_unpacklo_epi64(t[b + 1], t[b + 3]);
        r[b + 3] = _mm512_unpackhi_epi64(t[b + 1], t[b + 3]);
    }
    for (int j = 0; j < 4; j++) {   /* column 4L + j = lane L of r[j], r[4+j], r[8+j], r[12+j] */
        __m512i u0 = _mm512_shuffle_i32x4(r[j], r[4 + j], _MM_SHUFFLE(1, 0, 1, 0));
        __m512i u1 = _mm512_shuffle_i32x4(r[j], r[4 + j], _MM_SHUFFLE(3, 2, 3, 2));
        __m512i u2 = _mm512_shuffle_i32x4(r[8 + j], r[12 + j], _MM_SHUFFLE(1, 0, 1, 0));
        __m512i u3 = _mm512_shuffle_i32x4(r[8 + j], r[12 + j], _MM_SHUFFLE(3, 2, 3, 2));
        t[j] = _mm512_shuffle_i32x4(u0, u2, _MM_SHUFFLE(2, 0, 2, 0));
        t[4 + j] = _mm512_shuffle_i32x4(u0, u2, _MM_SHUFFLE(3, 1, 3, 1));
        t[8 + j] = _mm512_shuffle_i32x4(u1, u3, _MM_SHUFFLE(2, 0, 2, 0));
        t[12 + j] = _mm512_shuffle_i32x4(u1, u3, _MM_SHUFFLE(3, 1, 3, 1));
    }
    for (int i = 0; i < 16; i++) r[i] = t[i];
}

/* R whole lines of length kc (a multiple of 32), line r at x + r * ld: into o[r * kp + p] (rows = 1, the A
 * panel's layout) or o[p * R + r] (the B panel's; R = 32: two 16 x 16 transposes per 32 depths) */
static void pack_along(const float *x, ptrdiff_t ld, int R, int kc, int rows, uint32_t *o) {
    const int kp = kc / 2;
    if (rows) {
        for (int r = 0; r < R; r++)
            for (int k = 0; k < kc; k += 32) _mm512_storeu_si512(o + (size_t)r * kp + k / 2, pairs_along(x + r * ld + k));
        return;
    }
    for (int k = 0; k < kc; k += 32) {
        uint32_t *ok = o + (size_t)(k / 2) * R;
        for (int h = 0; h < R; h += 16) {
            __m512i v[16];
            for (int r = 0; r < 16; r++) v[r] = pairs_along(x + (h + r) * ld + k);
            transpose16(v);
            for (int p = 0; p < 16; p++) _mm512_storeu_si512(ok + p * R + h, v[p]);
        }
    }
}

/* kc (even) depths of W columns stored along a row (depth k at x + k * ld): into o[p * W + c] (B, W = 32)
 * or, for A (W = 12), o[c * kp + p] */
static void pack_across(const float *x, ptrdiff_t ld, int W, int kc, uint32_t *o) {
    const int kp = kc / 2;
    if (W == 32) {
        for (int k = 0; k < kc; k += 2, o += W) {
            const float *lo = x + k * ld, *hi = lo + ld;
            _mm512_storeu_si512(o, pairs_across(lo, hi, 0xFFFF));
            _mm512_storeu_si512(o + 16, pairs_across(lo + 16, hi + 16, 0xFFFF));
        }
        return;
    }
    uint32_t t[16];
    for (int k = 0; k < kc; k += 2) {
        _mm512_storeu_si512(t, pairs_across(x + k * ld, x + (k + 1) * ld, (__mmask16)((1u << W) - 1)));
        for (int c = 0; c < W; c++) o[(size_t)c * kp + k / 2] = t[c];
    }
}

int tfm_bf16_pack_avx512bf16(int along, const float *x, ptrdiff_t ld, int width, int kc, uint32_t *o) {
    if (along) {
        if (kc % 32) return 0;
        pack_along(x, ld, width, kc, width == 12, o);
    } else {
        if (kc % 2) return 0;
        pack_across(x, ld, width, kc, o);
    }
    return 1;
}
#else
#include <stdlib.h>
const int tfm_avx512bf16_built_ = 0;
int tfm_bf16_pack_avx512bf16(int along, const float *x, ptrdiff_t ld, int width, int kc, uint32_t *o) {
    (void)along; (void)x; (void)ld; (void)width; (void)kc; (void)o;
    abort();
}
void tfm_gemm_bf16_tile_avx512bf16(int kp, const uint32_t *a, const uint32_t *b, float *c, ptrdiff_t ldc, int mr,
                                   int nr, float alpha, float beta) {
    (void)kp; (void)a; (void)b; (void)c; (void)ldc; (void)mr; (void)nr; (void)alpha; (void)beta;
    abort();
}
#endif
