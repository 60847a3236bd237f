/* The AVX-512 VNNI tile of the int8 GEMM (src/ops/gemm_q8.c), written once and compiled twice: natively by
 * src/ops/kernels_q8_avx512.c (-mavx512f -mavx512bw -mavx512vnni; run only where cpuid reports them) and
 * by tests/unit/test_gemm_q8.c against SIMDe's portable versions of the same intrinsics, so the kernel's
 * logic (indexing, tile shapes, the compensation term, the sums) is checked on CPUs without AVX-512 too.
 * The includer provides the intrinsics and defines Q8V_NAME, Q8V_PANEL_NAME and Q8V_PANEL_ROW_NAME (the entry
 * points' names).
 *
 * vpdpbusd multiplies unsigned bytes by signed bytes and adds each group of four products to an int32 lane
 * (no intermediate saturation, unlike vpmaddubsw). The activations arrive unsigned (the 7-bit q + 64, 1..127: the
 * caller takes 64 sum(w) off), and every partial sum stays below 2^31 (K <= TFM_Q8_MAX_COLS: 65536 * 127 * 127 <
 * 2^31), so the result is the exact integer dot product of the bytes. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* lanes of four __m512i summed: {sum v0, sum v1, sum v2, sum v3} */
static inline __attribute__((always_inline)) __m128i q8v_sum4(__m512i v0, __m512i v1, __m512i v2, __m512i v3) {
    __m256i h0 = _mm256_add_epi32(_mm512_castsi512_si256(v0), _mm512_extracti64x4_epi64(v0, 1));
    __m256i h1 = _mm256_add_epi32(_mm512_castsi512_si256(v1), _mm512_extracti64x4_epi64(v1, 1));
    __m256i h2 = _mm256_add_epi32(_mm512_castsi512_si256(v2), _mm512_extracti64x4_epi64(v2, 1));
    __m256i h3 = _mm256_add_epi32(_mm512_castsi512_si256(v3), _mm512_extracti64x4_epi64(v3, 1));
    __m256i s = _mm256_hadd_epi32(_mm256_hadd_epi32(h0, h1), _mm256_hadd_epi32(h2, h3));
    return _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
}

/* out[i*4 + j] = sum_{k < kb} u[i*lda + k] * w[j*ldw + k] for i < MR, j < NR, u the bytes of a read as unsigned
 * (kb a multiple of 64; the rows of a and w 64-byte aligned). MR, NR are constants after inlining: the
 * accumulators stay in registers. */
static inline __attribute__((always_inline)) void q8v_tile(const int MR, const int NR, int kb, const int8_t *a,
                                                           size_t lda, const int8_t *w, size_t ldw, int32_t *out) {
    __m512i acc[4][4];
    for (int i = 0; i < MR; i++)
        for (int j = 0; j < NR; j++) acc[i][j] = _mm512_setzero_si512();
    for (int k = 0; k < kb; k += 64) {
        __m512i wv[4];
        for (int j = 0; j < NR; j++) wv[j] = _mm512_load_si512((const void *)(w + (size_t)j * ldw + k));
        for (int i = 0; i < MR; i++) {
            __m512i u = _mm512_load_si512((const void *)(a + (size_t)i * lda + k));
            for (int j = 0; j < NR; j++) acc[i][j] = _mm512_dpbusd_epi32(acc[i][j], u, wv[j]);
        }
    }
    const __m512i z = _mm512_setzero_si512();
    for (int i = 0; i < MR; i++)
        _mm_storeu_si128((__m128i *)(out + 4 * i),
                         q8v_sum4(acc[i][0], NR > 1 ? acc[i][1] : z, NR > 2 ? acc[i][2] : z, NR > 3 ? acc[i][3] : z));
}

#define Q8V_VARIANT(MR, NR)                                                                                  \
    static void q8v_tile_##MR##x##NR(int kb, const int8_t *a, size_t lda, const int8_t *w, size_t ldw,      \
                                     int32_t *out) {                                                        \
        q8v_tile(MR, NR, kb, a, lda, w, ldw, out);                                                          \
    }
Q8V_VARIANT(4, 4) Q8V_VARIANT(4, 3) Q8V_VARIANT(4, 2) Q8V_VARIANT(4, 1)
#undef Q8V_VARIANT

/* The tile entry point: 4 rows, nr 1..4 columns; out is 4 x 4 int32 (columns >= nr unspecified). Single rows (a
 * decoding step's GEMV) take the panel row below for a small weight, else gemm_q8.c's AVX2 row kernel (path_row and
 * q8_row_panels there). */
void Q8V_NAME(int mr, int nr, int kb, const int8_t *a, size_t lda, const int8_t *w, size_t ldw, int32_t *out) {
    typedef void (*tile_fn)(int, const int8_t *, size_t, const int8_t *, size_t, int32_t *);
    static const tile_fn tiles[4] = {q8v_tile_4x1, q8v_tile_4x2, q8v_tile_4x3, q8v_tile_4x4};
    (void)mr;   /* 4 */
    tiles[nr - 1](kb, a, lda, w, ldw, out);
}

/* The panel tile: 8 rows of unsigned activation bytes (lda apart; q + 64) against one panel of W (core/q8.h: a 64-byte group is 16 weight rows x 4 k, row c's 4
 * bytes at 4c, so a group is one vector whose lane c belongs to row c). Per group and row: one broadcast of the
 * row's 4 bytes and one vpdpbusd into that row's 16 sums; 8 rows keep 8 independent accumulators, which hides
 * vpdpbusd's latency. No horizontal sums: lane c of row i's accumulator is out[16 i + c]. */
void Q8V_PANEL_NAME(int groups, const int8_t *a, size_t lda, const int8_t *p, int32_t *out) {
    __m512i acc[8];
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++) acc[i] = _mm512_setzero_si512();
    for (int g = 0; g < groups; g++, a += 4, p += 64) {
        const __m512i w = _mm512_load_si512((const void *)p);
#pragma GCC unroll 8
        for (int i = 0; i < 8; i++) {
            int32_t four;
            memcpy(&four, a + (size_t)i * lda, 4);
            acc[i] = _mm512_dpbusd_epi32(acc[i], _mm512_set1_epi32(four), w);
        }
    }
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++) _mm512_storeu_si512((void *)(out + 16 * i), acc[i]);
}

/* NP panels (consecutive, groups * 64 bytes each) for one row: two accumulators a panel (even and odd groups), so
 * 2 NP vpdpbusd chains run at once and one broadcast of the row's 4 bytes serves NP panels */
static inline __attribute__((always_inline)) void q8v_panel_row(const int NP, int groups, const int8_t *a,
                                                                const int8_t *p, int32_t *out) {
    const size_t stride = (size_t)groups * 64;
    __m512i even[4], odd[4];
    for (int n = 0; n < NP; n++) even[n] = odd[n] = _mm512_setzero_si512();
    int g = 0;
    for (; g + 2 <= groups; g += 2) {
        int32_t f0, f1;
        memcpy(&f0, a + 4 * g, 4);
        memcpy(&f1, a + 4 * g + 4, 4);
        const __m512i a0 = _mm512_set1_epi32(f0), a1 = _mm512_set1_epi32(f1);
        for (int n = 0; n < NP; n++) {
            const int8_t *q = p + n * stride + (size_t)g * 64;
            even[n] = _mm512_dpbusd_epi32(even[n], a0, _mm512_load_si512((const void *)q));
            odd[n] = _mm512_dpbusd_epi32(odd[n], a1, _mm512_load_si512((const void *)(q + 64)));
        }
    }
    if (g < groups) {
        int32_t f0;
        memcpy(&f0, a + 4 * g, 4);
        const __m512i a0 = _mm512_set1_epi32(f0);
        for (int n = 0; n < NP; n++) {
            const int8_t *q = p + n * stride + (size_t)g * 64;
            even[n] = _mm512_dpbusd_epi32(even[n], a0, _mm512_load_si512((const void *)q));
        }
    }
    for (int n = 0; n < NP; n++) _mm512_storeu_si512((void *)(out + 16 * n), _mm512_add_epi32(even[n], odd[n]));
}

#define Q8V_ROW_VARIANT(NP)                                                                                  \
    static void q8v_panel_row_##NP(int groups, const int8_t *a, const int8_t *p, int32_t *out) {            \
        q8v_panel_row(NP, groups, a, p, out);                                                               \
    }
Q8V_ROW_VARIANT(1) Q8V_ROW_VARIANT(2) Q8V_ROW_VARIANT(3) Q8V_ROW_VARIANT(4)
#undef Q8V_ROW_VARIANT

/* The panel row: one row of unsigned activation bytes a against np (1..4) consecutive panels at p: out[16 n + c] =
 * sum_{g < groups, t < 4} a[4 g + t] p[n groups 64 + 64 g + 4 c + t] (a decoding step's GEMV over a small weight:
 * no horizontal sums, unlike a row kernel) */
void Q8V_PANEL_ROW_NAME(int groups, int np, const int8_t *a, const int8_t *p, int32_t *out) {
    typedef void (*row_fn)(int, const int8_t *, const int8_t *, int32_t *);
    static const row_fn rows[4] = {q8v_panel_row_1, q8v_panel_row_2, q8v_panel_row_3, q8v_panel_row_4};
    rows[np - 1](groups, a, p, out);
}
