/* The C update of the AVX-512 GEMM tiles, shared by the fp32 kernels (src/ops/kernels_avx512.c) and the
 * bfloat16 tile (kernels_avx512bf16.c), both compiled with -mavx512f: C = alpha x (beta 0),
 * fma(alpha, x, C) (beta 1), fma(alpha, x, beta C) (other beta), on the lanes of mask m; per element the
 * update every tfm_gemm path makes. */
#ifndef TFM_OPS_AVX512_STORE_H
#define TFM_OPS_AVX512_STORE_H
#include <immintrin.h>

static inline void tfm_store16(float *cr, __m512 x, __mmask16 m, float alpha, float beta) {
    const __m512 va = _mm512_set1_ps(alpha);
    if (beta == 0.0f) _mm512_mask_storeu_ps(cr, m, _mm512_mul_ps(va, x));
    else if (beta == 1.0f) _mm512_mask_storeu_ps(cr, m, _mm512_fmadd_ps(va, x, _mm512_maskz_loadu_ps(m, cr)));
    else
        _mm512_mask_storeu_ps(cr, m, _mm512_fmadd_ps(va, x, _mm512_mul_ps(_mm512_set1_ps(beta), _mm512_maskz_loadu_ps(m, cr))));
}

/* rows [0, mr) of a tile 32 wide (acc[i][0]: columns 0-15, acc[i][1]: 16-31), the first nr columns */
static inline void tfm_store_tile32(float *c, ptrdiff_t ldc, const __m512 (*acc)[2], int mr, int nr, float alpha,
                                    float beta) {
    const __mmask16 m0 = nr >= 16 ? 0xFFFF : (__mmask16)((1u << nr) - 1);
    const __mmask16 m1 = nr >= 32 ? 0xFFFF : nr <= 16 ? 0 : (__mmask16)((1u << (nr - 16)) - 1);
    for (int i = 0; i < mr; i++) {
        tfm_store16(c + i * ldc, acc[i][0], m0, alpha, beta);
        if (m1) tfm_store16(c + i * ldc + 16, acc[i][1], m1, alpha, beta);
    }
}
#endif
