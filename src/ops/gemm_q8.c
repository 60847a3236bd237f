/* tfm_gemm_q8: the GEMM of int8 models (include/tfm/kernels.h, tfm quantize).
 *
 *   C[i][j] = (float)acc_ij * (sa_i * sw_j) (+ bias_j),   acc_ij = sum_k qa_ik qw_jk   (int32, exact)
 *
 * qw, sw: the weight's int8 rows and per-row scales (tfm_q8_weight, zero-padded rows of ld bytes, q in [-127,
 * 127]); qa, sa: each activation row quantized on the fly to 7 bits (tfm_q7_quantize_row: q in [-63, 63], scale
 * amax / 63), into a per-thread scratch buffer. The kernels read an activation as the unsigned byte u = q + 64
 * (1..127) and sum u * w; the shift comes back out exactly, acc = sum u w - 64 sum w (the row sum of w is stored
 * with the weight). The layout is row-major on both sides: a tile of 4 activation rows x nr weight rows runs
 * along k in vector-wide chunks and sums each accumulator's lanes at the end; a single row (a decoding step)
 * takes the weight rows one after another, so all of W is one sequential stream. From 5 rows a step (a batch, a beam)
 * the AVX2 and VNNI paths read W in panels instead (core/q8.h; "panels" below), which reuse every weight vector
 * for 4 (AVX2) or 8 (VNNI) activation rows and 16 weight rows at once, with no horizontal sums.
 *
 * Paths (ops/isa.h): portable C; AVX2; AVX-512 VNNI (src/ops/kernels_q8_avx512.c). Each computes the exact
 * integer sums, and the scaling above is the same scalar code for all, so every path and every thread count
 * gives the same bits.
 *
 * Why 7 bits (the AVX2 pitfall): vpmaddubsw multiplies unsigned by signed bytes and adds adjacent pairs into
 * int16 with saturation. Full 8-bit activations shifted to unsigned (a + 128, up to 255) against 8-bit weights
 * reach 2 * 255 * 127 = 64770 in a pair and saturate. With u <= 127 a pair is at most 2 * 127 * 127 = 32258 <
 * 32767: nothing saturates and one vpmaddubsw + vpmaddwd by ones makes 32 exact products, with no per-product sign
 * fix-up (the other way out, |a| * sign(a) w, costs a vpsignb per product vector: about 1.7x fp32's multiply-adds
 * per second on Zen 3 against 2.5x). PyTorch's x86 dynamic quantization (fbgemm, reduce_range) makes the same
 * choice. One activation format on every path keeps the bits equal across CPUs. test_gemm_q8 feeds the extremes
 * (every pair at 2 * 127 * 127) and shows that the 8-bit shifted form would saturate on them. */
#include "tfm/kernels.h"
#include "core/par.h"
#include "core/mem.h"
#include "core/q8.h"
#include "ops/isa.h"
#include <float.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#if TFM_X86
#include <immintrin.h>
#endif

/* Multiply-adds per thread before another thread is used (as tfm_gemm). */
#define Q8_MIN_WORK (1 << 18)
/* tfm_gemm_q8 on AVX2 and VNNI takes W's panels from this many rows up (fewer: a step that streams the weights,
 * which the row layout reads with fewer instructions), once they are made (q8_panels_pay) */
#define Q8_PANEL_ROWS 5
/* an activation byte is q + 64 (q in [-63, 63]): 1..127, unsigned for vpmaddubsw and vpdpbusd */
#define Q7_OFFSET 64
/* the panels' row tiles are at most this many rows (VNNI's); activation buffers hold multiples of it */
#define PANEL_TILE_ROWS_MAX TFM_Q8_VNNI_PANEL_ROWS
static size_t panel_padded_rows(int M) {
    return (size_t)(M + PANEL_TILE_ROWS_MAX - 1) / PANEL_TILE_ROWS_MAX * PANEL_TILE_ROWS_MAX;
}
/* A thread's block of C: up to Q8_RB rows x Q8_CB columns (whole 4 x 4 tiles). */
#define Q8_RB 16
#define Q8_CB 64

/* out[4 i + j] = sum_{k < kb} u[i lda + k] w[j ldw + k], u the activation bytes read as unsigned (0..127) */
typedef void (*q8_tile_fn)(int mr, int nr, int kb, const int8_t *a, size_t lda, const int8_t *w, size_t ldw,
                           int32_t *out);

/* out[j] = sum_{k < kb} u[k] w[j ldw + k] for j < n (n <= Q8_CB): one activation row against a block's columns in
 * one call (a small model's decoding step is mostly call overhead when each tile of 4 columns is a call) */
typedef void (*q8_row_fn)(int n, int kb, const int8_t *a, const int8_t *w, size_t ldw, int32_t *out);

/* ---------------------------------------------------------------- portable */
static void row_c(int n, int kb, const int8_t *a, const int8_t *w, size_t ldw, int32_t *out) {
    for (int j = 0; j < n; j++) {
        const uint8_t *x = (const uint8_t *)a;
        const int8_t *y = w + (size_t)j * ldw;
        int32_t s = 0;
        for (int k = 0; k < kb; k++) s += (int32_t)x[k] * y[k];
        out[j] = s;
    }
}

static void tile_c(int mr, int nr, int kb, const int8_t *a, size_t lda, const int8_t *w, size_t ldw, int32_t *out) {
    for (int i = 0; i < mr; i++)
        for (int j = 0; j < nr; j++) {
            const uint8_t *x = (const uint8_t *)a + (size_t)i * lda;
            const int8_t *y = w + (size_t)j * ldw;
            int32_t s = 0;
            for (int k = 0; k < kb; k++) s += (int32_t)x[k] * y[k];
            out[4 * i + j] = s;
        }
}

#if TFM_X86
/* ---------------------------------------------------------------- AVX2 */
/* {sum v0, sum v1, sum v2, sum v3} */
TFM_TARGET_AVX2 static inline __m128i sum4_avx2(__m256i v0, __m256i v1, __m256i v2, __m256i v3) {
    __m256i s = _mm256_hadd_epi32(_mm256_hadd_epi32(v0, v1), _mm256_hadd_epi32(v2, v3));
    return _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
}

/* One activation row against NR adjacent weight rows (a decoding step's GEMV), the rows read one after another:
 * the weight is one sequential stream, which the prefetchers follow better than NR rows side by side
 * (this path on Zen 5: GPT-2 small's weights 19.6 -> 34 GB/s in a slow phase of the VM, 32 -> 36 in a fast one).
 * Two accumulators a row. */
TFM_TARGET_AVX2 static inline __attribute__((always_inline)) void row_avx2(const int NR, int kb, const int8_t *a,
                                                                            const int8_t *w, size_t ldw,
                                                                            int32_t *out) {
    const __m256i ones = _mm256_set1_epi16(1), z = _mm256_setzero_si256();
    __m256i acc[4];
    for (int j = 0; j < NR; j++) {
        const int8_t *r = w + (size_t)j * ldw;
        __m256i s0 = z, s1 = z;
        for (int k = 0; k < kb; k += 64) {   /* kb: a multiple of 64 */
            __m256i p0 = _mm256_maddubs_epi16(_mm256_load_si256((const __m256i *)(a + k)),
                                              _mm256_load_si256((const __m256i *)(r + k)));
            __m256i p1 = _mm256_maddubs_epi16(_mm256_load_si256((const __m256i *)(a + k + 32)),
                                              _mm256_load_si256((const __m256i *)(r + k + 32)));
            s0 = _mm256_add_epi32(s0, _mm256_madd_epi16(p0, ones));
            s1 = _mm256_add_epi32(s1, _mm256_madd_epi16(p1, ones));
        }
        acc[j] = _mm256_add_epi32(s0, s1);
    }
    _mm_storeu_si128((__m128i *)out, sum4_avx2(acc[0], NR > 1 ? acc[1] : z, NR > 2 ? acc[2] : z, NR > 3 ? acc[3] : z));
}

/* out[i*4 + j] = sum_k u[i][k] w[j][k] for i < MR, j < NR, 32 bytes of k at a time: a vpmaddubsw (pairs, at most
 * 2 * 127 * 127: exact) and a vpmaddwd by ones per product vector. */
TFM_TARGET_AVX2 static inline __attribute__((always_inline)) void tile_avx2(const int MR, const int NR, int kb,
                                                                             const int8_t *a, size_t lda,
                                                                             const int8_t *w, size_t ldw,
                                                                             int32_t *out) {
    __m256i acc[4][4];
    const __m256i ones = _mm256_set1_epi16(1);
    for (int i = 0; i < MR; i++)
        for (int j = 0; j < NR; j++) acc[i][j] = _mm256_setzero_si256();
    for (int k = 0; k < kb; k += 32) {
        __m256i wv[4];
        for (int j = 0; j < NR; j++) wv[j] = _mm256_load_si256((const __m256i *)(w + (size_t)j * ldw + k));
        for (int i = 0; i < MR; i++) {
            __m256i av = _mm256_load_si256((const __m256i *)(a + (size_t)i * lda + k));   /* u: 0..127 */
            for (int j = 0; j < NR; j++)
                acc[i][j] = _mm256_add_epi32(acc[i][j], _mm256_madd_epi16(_mm256_maddubs_epi16(av, wv[j]), ones));
        }
    }
    const __m256i z = _mm256_setzero_si256();
    for (int i = 0; i < MR; i++)
        _mm_storeu_si128((__m128i *)(out + 4 * i),
                         sum4_avx2(acc[i][0], NR > 1 ? acc[i][1] : z, NR > 2 ? acc[i][2] : z, NR > 3 ? acc[i][3] : z));
}

#define Q8_AVX2_VARIANT(MR, NR)                                                                               \
    TFM_TARGET_AVX2 static void tile_avx2_##MR##x##NR(int kb, const int8_t *a, size_t lda, const int8_t *w,   \
                                                      size_t ldw, int32_t *out) {                             \
        tile_avx2(MR, NR, kb, a, lda, w, ldw, out);                                                           \
    }
/* 4 rows x 2 columns (8 accumulators, 2 weight vectors, a, ones, a product: 13 of the 16 ymm) */
Q8_AVX2_VARIANT(4, 2) Q8_AVX2_VARIANT(4, 1)
#undef Q8_AVX2_VARIANT

/* 4 rows (nr 1..2); single rows go through row_avx2_span */
static void tile_avx2_any(int mr, int nr, int kb, const int8_t *a, size_t lda, const int8_t *w, size_t ldw,
                          int32_t *out) {
    (void)mr;
    (nr == 2 ? tile_avx2_4x2 : tile_avx2_4x1)(kb, a, lda, w, ldw, out);
}

/* q8_row_fn on AVX2 (and on VNNI CPUs: path_row): row_avx2 over the columns, 4 at a time */
TFM_TARGET_AVX2 static void row_avx2_span(int n, int kb, const int8_t *a, const int8_t *w, size_t ldw, int32_t *out) {
    int j = 0;
    for (; j + 4 <= n; j += 4) row_avx2(4, kb, a, w + (size_t)j * ldw, ldw, out + j);
    if (j == n) return;
    int32_t last[4];
    const int8_t *wj = w + (size_t)j * ldw;
    if (n - j == 3) row_avx2(3, kb, a, wj, ldw, last);
    else if (n - j == 2) row_avx2(2, kb, a, wj, ldw, last);
    else row_avx2(1, kb, a, wj, ldw, last);
    memcpy(out + j, last, sizeof(int32_t) * (size_t)(n - j));
}

/* NP panels for one row on AVX2: per 4-byte group one broadcast serves NP panels, two vpmaddubsw (the panel's 16
 * rows as two vectors of 8), their vpmaddwd by ones, 2 NP accumulators (at most 2 * 127 * 127 a pair: exact) */
TFM_TARGET_AVX2 static inline __attribute__((always_inline)) void panel_row_avx2(const int NP, int groups,
                                                                                  const int8_t *a, const int8_t *p,
                                                                                  int32_t *out) {
    const size_t stride = (size_t)groups * TFM_Q8_PANEL_GROUP;
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i lo[4], hi[4];
    for (int n = 0; n < NP; n++) lo[n] = hi[n] = _mm256_setzero_si256();
    for (int g = 0; g < groups; g++) {
        int32_t four;
        memcpy(&four, a + 4 * g, 4);
        const __m256i av = _mm256_set1_epi32(four);
        for (int n = 0; n < NP; n++) {
            const int8_t *q = p + n * stride + (size_t)g * TFM_Q8_PANEL_GROUP;
            const __m256i w0 = _mm256_load_si256((const __m256i *)q), w1 = _mm256_load_si256((const __m256i *)(q + 32));
            lo[n] = _mm256_add_epi32(lo[n], _mm256_madd_epi16(_mm256_maddubs_epi16(av, w0), ones));
            hi[n] = _mm256_add_epi32(hi[n], _mm256_madd_epi16(_mm256_maddubs_epi16(av, w1), ones));
        }
    }
    for (int n = 0; n < NP; n++) {
        _mm256_storeu_si256((__m256i *)(out + 16 * n), lo[n]);
        _mm256_storeu_si256((__m256i *)(out + 16 * n + 8), hi[n]);
    }
}
#define Q8_PANEL_ROW_VARIANT(NP)                                                                             \
    TFM_TARGET_AVX2 static void panel_row_avx2_##NP(int groups, const int8_t *a, const int8_t *p,           \
                                                    int32_t *out) {                                         \
        panel_row_avx2(NP, groups, a, p, out);                                                               \
    }
Q8_PANEL_ROW_VARIANT(1) Q8_PANEL_ROW_VARIANT(2) Q8_PANEL_ROW_VARIANT(3) Q8_PANEL_ROW_VARIANT(4)
#undef Q8_PANEL_ROW_VARIANT

/* tfm_q8_panel_row_vnni's contract on AVX2 */
static void panel_row_avx2_any(int groups, int np, const int8_t *a, const int8_t *p, int32_t *out) {
    typedef void (*row_fn)(int, const int8_t *, const int8_t *, int32_t *);
    static const row_fn rows[4] = {panel_row_avx2_1, panel_row_avx2_2, panel_row_avx2_3, panel_row_avx2_4};
    rows[np - 1](groups, a, p, out);
}

/* tfm_q7_quantize_row's arithmetic (levels 63; tfm_q8_quantize_row's with 127), 8 lanes: the same max (exact in
 * any order), the same levels / amax, the same products, rounded by cvtps2dq (nearest even, as rintf). 32 values a
 * step become bytes by two packs (saturating, but |x * inv| < levels + 0.5 always) and a lane permute. offset is
 * added to every byte (the padding's too): 64 gives the panels' unsigned activations. */
TFM_TARGET_AVX2 static inline __attribute__((always_inline)) float
quantize_levels_avx2(const float *x, int n, int pad, int8_t *q, const float levels, const int8_t offset) {
    const __m256 sign = _mm256_set1_ps(-0.0f), big = _mm256_set1_ps(FLT_MAX);
    __m256 m = _mm256_setzero_ps(), ok = _mm256_castsi256_ps(_mm256_set1_epi32(-1));
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 a = _mm256_andnot_ps(sign, _mm256_loadu_ps(x + i));
        ok = _mm256_and_ps(ok, _mm256_cmp_ps(a, big, _CMP_LE_OQ));   /* false for NaN and infinities */
        m = _mm256_max_ps(m, a);
    }
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_shuffle_ps(m4, m4, 1));
    float amax = _mm_cvtss_f32(m4);
    int finite = _mm256_movemask_ps(ok) == 0xff;
    for (; i < n; i++) {
        float a = fabsf(x[i]);
        if (!(a <= FLT_MAX)) finite = 0;
        else if (a > amax) amax = a;
    }
    if (!finite || amax < TFM_Q8_TINY) {
        memset(q, offset, (size_t)pad);
        return finite ? 0.0f : NAN;
    }
    float inv = levels / amax;
    const __m256 vinv = _mm256_set1_ps(inv);
    const __m256i voff = _mm256_set1_epi8(offset);
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    for (i = 0; i + 32 <= n; i += 32) {
        __m256i r0 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + i), vinv));
        __m256i r1 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + i + 8), vinv));
        __m256i r2 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + i + 16), vinv));
        __m256i r3 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + i + 24), vinv));
        /* packs work within 128-bit lanes: bytes come out as dwords 0,2,4,6 | 1,3,5,7 of the wanted order */
        __m256i b = _mm256_packs_epi16(_mm256_packs_epi32(r0, r1), _mm256_packs_epi32(r2, r3));
        _mm256_storeu_si256((__m256i *)(q + i), _mm256_add_epi8(_mm256_permutevar8x32_epi32(b, order), voff));
    }
    for (; i < n; i++) {
        float v = rintf(x[i] * inv);
        q[i] = (int8_t)((v > levels ? levels : v < -levels ? -levels : v) + offset);
    }
    memset(q + n, offset, (size_t)(pad - n));
    return amax / levels;
}

TFM_TARGET_AVX2 static float quantize_row7_avx2(const float *x, int n, int pad, int8_t *q) {
    return quantize_levels_avx2(x, n, pad, q, 63.0f, Q7_OFFSET);
}
#endif

/* ---------------------------------------------------------------- paths */
const char *tfm_q8_path_name(tfm_q8_path path) {
    return path == TFM_Q8_VNNI ? "avx512-vnni" : path == TFM_Q8_AVX2 ? "avx2" : "portable";
}

int tfm_q8_path_supported(tfm_q8_path path) {
    switch (path) {
    case TFM_Q8_GENERIC: return 1;
#if TFM_X86
    case TFM_Q8_AVX2: return tfm_isa_supported(TFM_ISA_AVX2);
    case TFM_Q8_VNNI:
        __builtin_cpu_init();
        return tfm_q8_vnni_built_ && tfm_isa_supported(TFM_ISA_AVX512) && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512vnni");
#endif
    default: return 0;
    }
}

tfm_q8_path tfm_q8_active_path(void) {
    tfm_isa isa = tfm_isa_active();
    if (isa == TFM_ISA_AVX512 && tfm_q8_path_supported(TFM_Q8_VNNI)) return TFM_Q8_VNNI;
    return isa == TFM_ISA_GENERIC ? TFM_Q8_GENERIC : TFM_Q8_AVX2;
}

const char *tfm_gemm_q8_backend(void) { return tfm_q8_path_name(tfm_q8_active_path()); }

static q8_tile_fn path_tile(tfm_q8_path path) {
#if TFM_X86
    if (path == TFM_Q8_VNNI) return tfm_q8_tile_vnni;
    if (path == TFM_Q8_AVX2) return tile_avx2_any;
#endif
    (void)path;
    return tile_c;
}

/* Single rows over a weight's rows: the AVX2 row kernel on the VNNI path too (its 4-row tiles use vpdpbusd; a small
 * weight's single rows read its panels instead, q8_row_panels below). It streams a weight from
 * memory (a generation step's GEMV, bandwidth-bound) faster on Zen 5: GPT-2 small's int8 weights, one core, ~34
 * GB/s against 20-22 for the same row order with 512-bit vpdpbusd, 512-bit vpmaddubsw or 256-bit vpdpbusd in a
 * slow phase of the VM, level in a fast one (the cause is not known); GPT-2 small's int8 generation 1.1-1.2x faster
 * in every phase. A weight in cache is faster with vpdpbusd: the Multi30k translator's one-row int8 steps are
 * 3-5% slower this way (docs/BENCHMARKS.md, Zen 5). Reading each weight row whole with vpdpbusd (row_avx2's
 * order) instead was level with this (4 x 128 GPT) or within the VM's noise of it (GPT-2 small, 1.05x;
 * bench/results/HISTORY.md, 2026-11-30): the slow reads were the 4 rows interleaved. A column-outer kernel sums
 * each column across its lanes, which costs as much as the products for short rows; the panel row does not. */
static q8_row_fn path_row(tfm_q8_path path) {
#if TFM_X86
    if (path != TFM_Q8_GENERIC) return row_avx2_span;   /* VNNI CPUs have AVX2 */
#endif
    (void)path;
    return row_c;
}

/* one row against np (1..4) consecutive panels: out[16 n + c] (tfm_q8_panel_row_vnni's contract); NULL: none */
typedef void (*q8_panel_row_fn)(int groups, int np, const int8_t *a, const int8_t *p, int32_t *out);
static q8_panel_row_fn path_panel_row(tfm_q8_path path) {
#if TFM_X86
    if (path == TFM_Q8_VNNI) return tfm_q8_panel_row_vnni;
    if (path == TFM_Q8_AVX2) return panel_row_avx2_any;
#endif
    (void)path;
    return NULL;
}

float tfm_q7_quantize_row_path_(tfm_q8_path path, const float *x, int n, int pad, int8_t *q) {
#if TFM_X86
    if (path != TFM_Q8_GENERIC) return quantize_row7_avx2(x, n, pad, q);   /* VNNI CPUs have AVX2 */
#endif
    (void)path;
    float s = tfm_q7_quantize_row(x, n, q);
    for (int i = 0; i < n; i++) q[i] = (int8_t)(q[i] + Q7_OFFSET);
    memset(q + n, Q7_OFFSET, (size_t)(pad - n));
    return s;
}

/* ---------------------------------------------------------------- driver */
typedef struct {
    tfm_q8_path path;         /* tile, row and tile_cols are its (q8_args_of) */
    q8_tile_fn tile;          /* 4 activation rows */
    q8_row_fn row;            /* the rows left under a multiple of 4 */
    int tile_cols;            /* columns of a 4-row tile: 2 (AVX2: registers) or 4 */
    int M, N, kb;
    const int8_t *qa;         /* M rows of kb bytes, unsigned */
    const float *sa;          /* M */
    const tfm_q8_weight *W;
    int32_t shift;            /* what the activations were shifted by (64, or 0 in tests): acc = out - shift sum(w) */
    const float *bias;
    float *C;                 /* NULL: acc instead (tests) */
    int ldc;
    int32_t *acc;             /* M x N */
    q8_panel_row_fn panel_row;  /* the path's kernel for single rows over row_panels */
    const int8_t *row_panels;   /* W's panels (q8_row_panels), or NULL: single rows by row, over W's rows */
} q8_args;

/* Single rows against a small weight read its panels (made at the first call; path_panel_row): on VNNI 16 columns
 * a vpdpbusd, on AVX2 a vpmaddubsw per 8, and no sums across lanes at the end. For a weight in cache, one thread,
 * Zen 5 (a /tmp program, the two ways alternating in one process, medians of 15 rounds): VNNI 1.7-2.6x the AVX2 row
 * kernel on the 4 x 128 GPT's shapes and 1.4x on the translator's 1024 x 256, AVX2 1.1-1.5x and 1.2x. A big
 * weight's single rows stream its rows through the AVX2 row kernel (path_row) even when its panels exist: GPT-2
 * small's int8 generation after a 300-token prompt (which made them) was ~1.1x faster so (bench/results/HISTORY.md,
 * 2026-11-30). */
#define Q8_ROW_PANELS_MAX_BYTES (512 << 10)
static const int8_t *q8_row_panels(tfm_q8_path path, const tfm_q8_weight *W) {
    if (!path_panel_row(path) || (size_t)W->rows * W->ld > Q8_ROW_PANELS_MAX_BYTES) return NULL;
    return tfm_q8_weight_panels_(W);   /* NULL when out of memory: the rows then */
}

/* the driver's arguments for a path: its kernels, the rest as given (acc NULL: results scaled into C). Single rows
 * are the M % 4 left under the 4-row tiles (blocks are Q8_RB rows, a multiple of 4): only then the panels. */
static q8_args q8_args_of(tfm_q8_path path, int M, int kb, const int8_t *qa, const float *sa, const tfm_q8_weight *W,
                          int32_t shift, const float *bias, float *C, int ldc, int32_t *acc) {
    q8_args g = {path, path_tile(path), path_row(path), path == TFM_Q8_AVX2 ? 2 : 4, M, W->rows, kb, qa, sa, W, shift,
                 bias, C, ldc, acc, path_panel_row(path), M % 4 ? q8_row_panels(path, W) : NULL};
    return g;
}

/* One result from its exact sum e: into acc (integers, tests) or C[i][j] = e * (sa_i * sw_j) (+ bias_j), the
 * scalar steps of every path's stores (the row tiles', the panels' ragged edges; panel_store_avx2 does the same
 * operations 8 columns at a time) */
static inline void store_one(float *C, int ldc, int32_t *acc, int N, const float *sa, const tfm_q8_weight *w,
                             const float *bias, int i, int j, int32_t e) {
    if (!C) {
        acc[(size_t)i * N + j] = e;
        return;
    }
    float scale = sa[i] * w->scale[j];   /* sa * sw, then acc * that, then + bias: separate statements, so */
    float y = (float)e * scale;          /* no compiler fuses them into an FMA on one path only */
    if (bias) y += bias[j];
    C[(size_t)i * ldc + j] = y;
}

/* The tile's results (mr x nr at out, row stride 4; a single row up to Q8_CB long) into C (scaled) or acc
 * (integers). */
static void store_tile(const q8_args *g, int i0, int j0, int mr, int nr, const int32_t *out) {
    for (int i = 0; i < mr; i++)
        for (int j = 0; j < nr; j++)
            store_one(g->C, g->ldc, g->acc, g->N, g->sa, g->W, g->bias, i0 + i, j0 + j,
                      out[4 * i + j] - g->shift * g->W->sum[j0 + j]);
}

#if TFM_X86
/* 8 results from their exact sums e (shift sum_w taken off): e * (sa sw) (+ the bias at b), store_one's operations,
 * each rounded once: the same bits (the single-row and the panel stores) */
TFM_TARGET_AVX2 static inline __m256 scaled8_avx2(__m256i e, __m256 sa, __m256 sw, const float *b) {
    __m256 y = _mm256_mul_ps(_mm256_cvtepi32_ps(e), _mm256_mul_ps(sa, sw));
    return b ? _mm256_add_ps(y, _mm256_loadu_ps(b)) : y;
}

/* store_tile for one row of n sums into C, 8 columns at a time (scaled8_avx2), the last n % 8 by store_one */
TFM_TARGET_AVX2 static void store_row_avx2(const q8_args *g, int i, int j0, int n, const int32_t *sums) {
    const tfm_q8_weight *w = g->W;
    const __m256 sa = _mm256_set1_ps(g->sa[i]);
    const __m256i shift = _mm256_set1_epi32(g->shift);
    float *c = g->C + (size_t)i * g->ldc;
    int j = 0;
    for (; j + 8 <= n; j += 8) {
        const int col = j0 + j;
        __m256i e = _mm256_sub_epi32(_mm256_loadu_si256((const __m256i *)(sums + j)),
                                     _mm256_mullo_epi32(shift, _mm256_loadu_si256((const __m256i *)(w->sum + col))));
        _mm256_storeu_ps(c + col, scaled8_avx2(e, sa, _mm256_loadu_ps(w->scale + col), g->bias ? g->bias + col : NULL));
    }
    for (; j < n; j++)
        store_one(g->C, g->ldc, g->acc, g->N, g->sa, w, g->bias, i, j0 + j, sums[j] - g->shift * w->sum[j0 + j]);
}
#endif

/* one row's sums: vectorised where the path has AVX2 and C is the destination */
static void store_row(const q8_args *g, int i, int j0, int n, const int32_t *sums) {
#if TFM_X86
    if (g->C && g->path != TFM_Q8_GENERIC) {
        store_row_avx2(g, i, j0, n, sums);
        return;
    }
#endif
    store_tile(g, i, j0, 1, n, sums);
}

/* rows [i0, i1) x columns [j0, j1) of the result */
static void q8_block(const q8_args *g, int i0, int i1, int j0, int j1) {
    const tfm_q8_weight *W = g->W;
    int32_t out[16];
    int i = i0;
    for (; i + 4 <= i1; i += 4)
        for (int j = j0; j < j1; j += g->tile_cols) {
            int nr = j1 - j < g->tile_cols ? j1 - j : g->tile_cols;
            g->tile(4, nr, g->kb, g->qa + (size_t)i * g->kb, (size_t)g->kb, W->q + (size_t)j * W->ld, (size_t)W->ld,
                    out);
            store_tile(g, i, j, 4, nr, out);
        }
    int32_t sums[Q8_CB];
    for (; i < i1; i++) {
        if (g->row_panels) {   /* j0: a multiple of Q8_CB, whole panels */
            const int groups = tfm_q8_panel_groups(W);
            const int8_t *panels = g->row_panels + (size_t)(j0 / TFM_Q8_PANEL) * groups * TFM_Q8_PANEL_GROUP;
            g->panel_row(groups, (j1 - j0 + TFM_Q8_PANEL - 1) / TFM_Q8_PANEL, g->qa + (size_t)i * g->kb, panels, sums);
        } else
            g->row(j1 - j0, g->kb, g->qa + (size_t)i * g->kb, W->q + (size_t)j0 * W->ld, (size_t)W->ld, sums);
        store_row(g, i, j0, j1 - j0, sums);
    }
}

/* every block of C, split over nt threads (each element computed by one thread: exact sums either way) */
static void q8_run(const q8_args *g, int nt) {
    int rb = (g->M + Q8_RB - 1) / Q8_RB, cb = (g->N + Q8_CB - 1) / Q8_CB, items = rb * cb;
    if (nt > items) nt = items;
    TFM_PAR_FOR(nt > 1, schedule(static) num_threads(nt),
    for (int it = 0; it < items; it++) {
        int r = it / cb, c = it % cb;
        int i1 = (r + 1) * Q8_RB < g->M ? (r + 1) * Q8_RB : g->M, j1 = (c + 1) * Q8_CB < g->N ? (c + 1) * Q8_CB : g->N;
        q8_block(g, r * Q8_RB, i1, c * Q8_CB, j1);
    });
}

static int q8_threads(int M, int N, int K) {
    if (omp_in_parallel()) return 1;
    double work = (double)M * N * K;
    int nt = omp_get_max_threads(), by_work = (int)(work / Q8_MIN_WORK);
    return by_work < 1 ? 1 : by_work < nt ? by_work : nt;
}


/* ---------------------------------------------------------------- panels (many rows) */
/* W in panels (tfm_q8_weight_panels_, core/q8.h): an AVX2 tile of 4 rows broadcasts 4 bytes of an activation row
 * and multiplies them with two vectors of the panel (16 weight rows x 4 k), so W is read once per 16 activation
 * rows instead of once per 4 and every vpmaddubsw gives 32 products; a VNNI tile of 8 rows does the same with one
 * vector and one vpdpbusd (ops/q8_vnni_body.h). The activations are the same unsigned bytes as the row tiles'. */
#define PANEL_ROW_BLOCK 16    /* activation rows that sweep W's panels together (their C lines stay in L2) */

typedef struct {
    int M, N, groups;
    const int8_t *qa;         /* M rows rounded up to 4 (the extra ones zero: q = 0), lda bytes each */
    size_t lda;
    const float *sa;          /* M */
    const tfm_q8_weight *w;
    const int8_t *panels;
    int32_t shift;            /* what the activations were shifted by (64, or 0 in tests): acc - shift * sum(w) */
    const float *bias;
    float *C;                 /* NULL: acc instead (tests) */
    int ldc;
    int32_t *acc;             /* M x N */
} panel_args;

/* out[16 i + c] = sum_k a_ik w_ck for the tile's rows at a (lda apart) and the panel's 16 rows */
typedef void (*panel_tile_fn)(int groups, const int8_t *a, size_t lda, const int8_t *p, int32_t *out);
/* C of rows [i, i + mr) x columns [j, j + nc) from a tile's out (mr <= the tile's rows, nc <= 16) */
typedef void (*panel_store_fn)(const panel_args *g, int i, int j, int mr, int nc, const int32_t *out);
typedef struct {
    panel_tile_fn tile;
    panel_store_fn store;
    int rows;                 /* of a tile: 4, or 8 (VNNI) */
} panel_kernel;

/* y = (acc - shift sum_w) * (sa sw) (+ bias), store_one's steps, for a panel tile's out (row stride 16) */
static void panel_store_c(const panel_args *g, int i0, int j0, int mr, int nc, const int32_t *out) {
    for (int i = 0; i < mr; i++)
        for (int j = 0; j < nc; j++)
            store_one(g->C, g->ldc, g->acc, g->N, g->sa, g->w, g->bias, i0 + i, j0 + j,
                      out[16 * i + j] - g->shift * g->w->sum[j0 + j]);
}

#if TFM_X86
/* one activation row's 4 bytes (broadcast) times the panel's two vectors, into that row's 16 sums */
#define PANEL_ROW(I, C0, C1)                                                                                  \
    {                                                                                                         \
        int32_t four;                                                                                         \
        memcpy(&four, a + (I) * lda, 4);                                                                      \
        __m256i av = _mm256_set1_epi32(four);                                                                 \
        C0 = _mm256_add_epi32(C0, _mm256_madd_epi16(_mm256_maddubs_epi16(av, b0), ones));                     \
        C1 = _mm256_add_epi32(C1, _mm256_madd_epi16(_mm256_maddubs_epi16(av, b1), ones));                     \
    }
/* 4 activation rows x 16 weight rows: 8 accumulators, 2 weight vectors, a broadcast, ones and a product (14 ymm) */
TFM_TARGET_AVX2 static void panel_tile_avx2(int groups, const int8_t *a, size_t lda, const int8_t *p, int32_t *out) {
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i c00 = _mm256_setzero_si256(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00, c31 = c00;
    for (int g = 0; g < groups; g++, a += 4, p += TFM_Q8_PANEL_GROUP) {
        __m256i b0 = _mm256_load_si256((const __m256i *)p), b1 = _mm256_load_si256((const __m256i *)(p + 32));
        PANEL_ROW(0, c00, c01) PANEL_ROW(1, c10, c11) PANEL_ROW(2, c20, c21) PANEL_ROW(3, c30, c31)
    }
    _mm256_store_si256((__m256i *)(out + 0), c00), _mm256_store_si256((__m256i *)(out + 8), c01);
    _mm256_store_si256((__m256i *)(out + 16), c10), _mm256_store_si256((__m256i *)(out + 24), c11);
    _mm256_store_si256((__m256i *)(out + 32), c20), _mm256_store_si256((__m256i *)(out + 40), c21);
    _mm256_store_si256((__m256i *)(out + 48), c30), _mm256_store_si256((__m256i *)(out + 56), c31);
}
#undef PANEL_ROW

/* panel_store_c's arithmetic 8 columns at a time (scaled8_avx2) */
TFM_TARGET_AVX2 static void panel_store_avx2(const panel_args *g, int i0, int j0, int mr, int nc, const int32_t *out) {
    if (nc < TFM_Q8_PANEL || !g->C) {
        panel_store_c(g, i0, j0, mr, nc, out);
        return;
    }
    const tfm_q8_weight *w = g->w;
    for (int h = 0; h < 2; h++) {
        const int j = j0 + 8 * h;
        __m256i shift =
            _mm256_mullo_epi32(_mm256_loadu_si256((const __m256i *)(w->sum + j)), _mm256_set1_epi32(g->shift));
        const __m256 sw = _mm256_loadu_ps(w->scale + j);
        const float *b = g->bias ? g->bias + j : NULL;
        for (int i = 0; i < mr; i++) {
            __m256i e = _mm256_sub_epi32(_mm256_load_si256((const __m256i *)(out + 16 * i + 8 * h)), shift);
            _mm256_storeu_ps(g->C + (size_t)(i0 + i) * g->ldc + j, scaled8_avx2(e, _mm256_set1_ps(g->sa[i0 + i]), sw, b));
        }
    }
}
#endif

/* the panels [pn0, pn1) for every row: PANEL_ROW_BLOCK rows at a time sweep them, a panel (groups * 64 bytes, 4
 * KiB for 256 columns) reread from L1 by each tile of rows */
static void panels_range(const panel_kernel *k, const panel_args *g, int pn0, int pn1) {
    int32_t out[PANEL_TILE_ROWS_MAX * TFM_Q8_PANEL] __attribute__((aligned(64)));
    for (int i0 = 0; i0 < g->M; i0 += PANEL_ROW_BLOCK)
        for (int pn = pn0; pn < pn1; pn++) {
            const int8_t *panel = g->panels + (size_t)pn * g->groups * TFM_Q8_PANEL_GROUP;
            int j = pn * TFM_Q8_PANEL, nc = g->N - j < TFM_Q8_PANEL ? g->N - j : TFM_Q8_PANEL;
            for (int i = i0; i < g->M && i < i0 + PANEL_ROW_BLOCK; i += k->rows) {
                k->tile(g->groups, g->qa + (size_t)i * g->lda, g->lda, panel, out);
                k->store(g, i, j, g->M - i < k->rows ? g->M - i : k->rows, nc, out);
            }
        }
}

/* the panel kernel of a path (AVX2 or VNNI; the portable path tiles rows) */
static panel_kernel panel_kernel_of(tfm_q8_path path) {
#if TFM_X86
    if (path == TFM_Q8_VNNI) return (panel_kernel){tfm_q8_panel_tile_vnni, panel_store_avx2, TFM_Q8_VNNI_PANEL_ROWS};
    return (panel_kernel){panel_tile_avx2, panel_store_avx2, 4};
#else
    (void)path;
    return (panel_kernel){NULL, panel_store_c, 4};
#endif
}

/* every panel, split over nt threads in contiguous ranges (exact sums: the same bits whatever the split); qa
 * holds whole tiles (rows M.. set by the caller) */
static void panels_run(const panel_kernel *k, const panel_args *g, int nt) {
    int panels = (g->N + TFM_Q8_PANEL - 1) / TFM_Q8_PANEL;
    if (nt > panels) nt = panels;
    TFM_PAR_FOR(nt > 1, schedule(static) num_threads(nt),
    for (int t = 0; t < nt; t++) {
        panels_range(k, g, (int)((long long)panels * t / nt), (int)((long long)panels * (t + 1) / nt));
    });
}

/* The panels' GEMM on AVX2 or VNNI. qa: M rows of lda bytes (unsigned), in a buffer of panel_padded_rows(M)
 * rows (rows M.. are set here; their results are not stored). 0, or -1 when the panels cannot be made (the
 * caller tiles rows instead). */
static int q8_panels(tfm_q8_path path, int M, int8_t *qa, size_t lda, const float *sa, const tfm_q8_weight *w,
                     int32_t shift, const float *bias, float *C, int ldc, int32_t *acc, int nt) {
    const int8_t *panels = path == TFM_Q8_GENERIC ? NULL : tfm_q8_weight_panels_(w);
    if (!panels) return -1;
    memset(qa + (size_t)M * lda, 0, panel_padded_rows(M) * lda - (size_t)M * lda);
    const panel_kernel k = panel_kernel_of(path);
    panel_args g = {M, w->rows, tfm_q8_panel_groups(w), qa, lda, sa, w, panels, shift, bias, C, ldc, acc};
    panels_run(&k, &g, nt);
    return 0;
}

/* The panels are a second copy of the weight, so tfm_gemm_q8 makes them when they pay: at a call of
 * Q8_PANEL_BIG_ROWS rows or more (its arithmetic dwarfs one pass over the weight) or at the second call of
 * Q8_PANEL_ROWS or more (a batch or a beam: every decoding step is one). A GPT prompt of a few tokens before
 * one-row generation never makes a big weight's (a small weight's are made by its first single row: q8_row_panels). */
#define Q8_PANEL_BIG_ROWS 64
static int q8_panels_pay(const tfm_q8_weight *w, int M) {
    if (M < Q8_PANEL_ROWS) return 0;
    if (M >= Q8_PANEL_BIG_ROWS || __atomic_load_n(&w->panels, __ATOMIC_ACQUIRE)) return 1;
    return __atomic_add_fetch(&((tfm_q8_weight *)w)->many_row_calls, 1, __ATOMIC_RELAXED) >= 2;
}

void tfm_q8_dot_path_(tfm_q8_path path, int M, const int8_t *qa, int lda, const tfm_q8_weight *w, int32_t *acc) {
    TFM_ASSERT(lda == w->ld, "tfm_q8_dot_path_: lda %d, weight rows of %d bytes", lda, w->ld);
    if (path != TFM_Q8_GENERIC && M >= Q8_PANEL_ROWS) {   /* as tfm_gemm_q8 does, in a buffer of whole tiles */
        int8_t *q4 = aligned_alloc(64, panel_padded_rows(M) * (size_t)lda);
        TFM_ASSERT(q4 != NULL, "tfm_q8_dot_path_: out of memory");
        memcpy(q4, qa, (size_t)M * lda);
        int rc = q8_panels(path, M, q4, (size_t)lda, NULL, w, 0, NULL, NULL, 0, acc, 1);
        free(q4);
        if (rc == 0) return;
    }
    q8_args g = q8_args_of(path, M, lda, qa, NULL, w, 0, NULL, NULL, 0, acc);
    q8_run(&g, 1);
}

void tfm_gemm_q8_path_(tfm_q8_path path, int nt, int M, const float *A, int lda, const tfm_q8_weight *W,
                       const float *bias, float *C, int ldc) {
    if (M <= 0 || W->rows <= 0) return;
    int K = W->cols, kb = W->ld;
    /* the quantized rows (kb bytes each, 64-byte aligned; whole panel tiles) and their scales, in the thread's
     * scratch */
    size_t qbytes = panel_padded_rows(M) * kb;
    float *buf = tfm_thread_scratch(TFM_SCRATCH_Q8, qbytes / sizeof(float) + (size_t)M);
    if (!buf) tfm_fatal("int8 GEMM: out of memory (%d x %d activations)", M, K);
    int8_t *qa = (int8_t *)buf;
    float *sa = buf + qbytes / sizeof(float);
    if (nt <= 0) nt = q8_threads(M, W->rows, K);
    TFM_PAR_FOR(nt > 1 && M >= 8, schedule(static) num_threads(nt),
    for (int i = 0; i < M; i++) {
        sa[i] = tfm_q7_quantize_row_path_(path, A + (size_t)i * lda, K, kb, qa + (size_t)i * kb);
    });
    if (q8_panels_pay(W, M) && !q8_panels(path, M, qa, (size_t)kb, sa, W, Q7_OFFSET, bias, C, ldc, NULL, nt)) return;
    q8_args g = q8_args_of(path, M, kb, qa, sa, W, Q7_OFFSET, bias, C, ldc, NULL);
    q8_run(&g, nt);
}

void tfm_gemm_q8(int M, const float *A, int lda, const tfm_q8_weight *W, const float *bias, float *C, int ldc) {
    tfm_gemm_q8_path_(tfm_q8_active_path(), 0, M, A, lda, W, bias, C, ldc);
}
