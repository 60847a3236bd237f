/* tfm_gemm_q8: the GEMM of int8 models (include/tfm/kernels.h, tfm quantize).
 *
 *   C[i][j] = (float)acc_ij * (sa_i * sw_j) (+ bias_j),   acc_ij = sum_k qa_ik qw_jk   (int32, exact)
 *
 * qw, sw: the weight's int8 rows and per-row scales (tfm_q8_weight, zero-padded rows of ld bytes); qa, sa:
 * each activation row quantized on the fly with the same rule (tfm_q8_quantize_row), into a per-thread
 * scratch buffer. The layout is row-major on both sides: a tile of mr activation rows x nr weight rows runs
 * along k in vector-wide chunks and sums each accumulator's lanes at the end (good for the few rows of a
 * decoding step: one row of A against all of W is a stream through W).
 *
 * Paths (ops/isa.h): portable C; AVX2; AVX-512 VNNI (src/ops/kernels_q8_avx512.c). Each computes the exact
 * integer sums, and the scaling above is the same scalar code for all, so every path and every thread
 * count gives the same bits.
 *
 * The AVX2 pitfall: vpmaddubsw multiplies unsigned by signed bytes and adds adjacent pairs into int16 with
 * saturation. With activations shifted to unsigned (a + 128, up to 255) and 8-bit weights a pair reaches
 * 2 * 255 * 127 = 64770 and saturates (7-bit weights would avoid it at the cost of half the weight
 * resolution). Here both sides stay symmetric 8-bit in [-127, 127] and the sign moves to the weight:
 * a * w = |a| * (sign(a) w), with vpsignb; then a pair is at most 2 * 127 * 127 = 32258 < 32767, so
 * nothing saturates (-128 is excluded: the quantizer never makes it, the loader refuses it, and
 * sign(-128) would overflow). vpmaddwd by ones then widens the pairs to int32. test_gemm_q8 feeds the
 * extremes (every pair at +-2 * 127 * 127) and shows that the shifted form saturates on them. */
#include "tfm/kernels.h"
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
/* A thread's block of C: up to Q8_RB rows x Q8_CB columns (whole 4 x 4 tiles). */
#define Q8_RB 16
#define Q8_CB 64

typedef void (*q8_tile_fn)(int mr, int nr, int kb, const int8_t *a, size_t lda, const int8_t *w, size_t ldw,
                           const int32_t *wsum, int32_t *out);

/* ---------------------------------------------------------------- portable */
static void tile_c(int mr, int nr, int kb, const int8_t *a, size_t lda, const int8_t *w, size_t ldw,
                   const int32_t *wsum, int32_t *out) {
    (void)wsum;
    for (int i = 0; i < mr; i++)
        for (int j = 0; j < nr; j++) {
            const int8_t *x = a + (size_t)i * lda, *y = w + (size_t)j * ldw;
            int32_t s = 0;
            for (int k = 0; k < kb; k++) s += (int32_t)x[k] * y[k];
            out[4 * i + j] = s;
        }
}

static float quantize_row_c(const float *x, int n, int pad, int8_t *q) {
    float s = tfm_q8_quantize_row(x, n, q);
    memset(q + n, 0, (size_t)(pad - n));
    return s;
}

#if TFM_X86
/* ---------------------------------------------------------------- AVX2 */
/* {sum v0, sum v1, sum v2, sum v3} */
TFM_TARGET_AVX2 static inline __m128i sum4_avx2(__m256i v0, __m256i v1, __m256i v2, __m256i v3) {
    __m256i s = _mm256_hadd_epi32(_mm256_hadd_epi32(v0, v1), _mm256_hadd_epi32(v2, v3));
    return _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
}

/* out[i*4 + j] = sum_k a[i][k] w[j][k] for i < MR, j < NR, 32 bytes of k at a time (see the top). */
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
        if (MR == 1) {   /* a GEMV streams W: fetch the next tile's rows (one tile ahead), 2 lines a step */
            const char *next = (const char *)w + (size_t)NR * ldw + (size_t)NR * k;
            __builtin_prefetch(next);
            __builtin_prefetch(next + 64);
        }
        for (int j = 0; j < NR; j++) wv[j] = _mm256_load_si256((const __m256i *)(w + (size_t)j * ldw + k));
        for (int i = 0; i < MR; i++) {
            __m256i av = _mm256_load_si256((const __m256i *)(a + (size_t)i * lda + k));
            __m256i aa = _mm256_abs_epi8(av);                                          /* |a|: 0..127 */
            for (int j = 0; j < NR; j++) {
                __m256i p = _mm256_maddubs_epi16(aa, _mm256_sign_epi8(wv[j], av));     /* pairs: |.| <= 32258 */
                acc[i][j] = _mm256_add_epi32(acc[i][j], _mm256_madd_epi16(p, ones));
            }
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
/* 4 rows x 2 columns (8 accumulators, 2 weight vectors, a, |a|, ones, a product: 14 of the 16 ymm) and
 * single rows x 4 columns (a decoding step's one row) */
Q8_AVX2_VARIANT(4, 2) Q8_AVX2_VARIANT(4, 1) Q8_AVX2_VARIANT(1, 4) Q8_AVX2_VARIANT(1, 3) Q8_AVX2_VARIANT(1, 2)
Q8_AVX2_VARIANT(1, 1)
#undef Q8_AVX2_VARIANT

/* mr 1 (nr 1..4) or 4 (nr 1..2) */
static void tile_avx2_any(int mr, int nr, int kb, const int8_t *a, size_t lda, const int8_t *w, size_t ldw,
                          const int32_t *wsum, int32_t *out) {
    (void)wsum;
    if (mr == 4) (nr == 2 ? tile_avx2_4x2 : tile_avx2_4x1)(kb, a, lda, w, ldw, out);
    else if (nr == 4) tile_avx2_1x4(kb, a, lda, w, ldw, out);
    else if (nr == 3) tile_avx2_1x3(kb, a, lda, w, ldw, out);
    else (nr == 2 ? tile_avx2_1x2 : tile_avx2_1x1)(kb, a, lda, w, ldw, out);
}

/* tfm_q8_quantize_row's arithmetic, 8 lanes: the same max (exact in any order), the same 127 / amax, the
 * same products, rounded by cvtps2dq (nearest even, as rintf). 32 values a step become bytes by two packs
 * (saturating, but |x * inv| < 127.5 always) and a lane permute. */
TFM_TARGET_AVX2 static float quantize_row_avx2(const float *x, int n, int pad, int8_t *q) {
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
        memset(q, 0, (size_t)pad);
        return finite ? 0.0f : NAN;
    }
    float inv = 127.0f / amax;
    const __m256 vinv = _mm256_set1_ps(inv);
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    for (i = 0; i + 32 <= n; i += 32) {
        __m256i r0 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + i), vinv));
        __m256i r1 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + i + 8), vinv));
        __m256i r2 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + i + 16), vinv));
        __m256i r3 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + i + 24), vinv));
        /* packs work within 128-bit lanes: bytes come out as dwords 0,2,4,6 | 1,3,5,7 of the wanted order */
        __m256i b = _mm256_packs_epi16(_mm256_packs_epi32(r0, r1), _mm256_packs_epi32(r2, r3));
        _mm256_storeu_si256((__m256i *)(q + i), _mm256_permutevar8x32_epi32(b, order));
    }
    for (; i < n; i++) {
        float v = rintf(x[i] * inv);
        q[i] = (int8_t)(v > 127.0f ? 127 : v < -127.0f ? -127 : (int)v);
    }
    memset(q + n, 0, (size_t)(pad - n));
    return amax / 127.0f;
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

float tfm_q8_quantize_row_path_(tfm_q8_path path, const float *x, int n, int pad, int8_t *q) {
#if TFM_X86
    if (path != TFM_Q8_GENERIC) return quantize_row_avx2(x, n, pad, q);   /* VNNI CPUs have AVX2 */
#endif
    (void)path;
    return quantize_row_c(x, n, pad, q);
}

/* ---------------------------------------------------------------- driver */
typedef struct {
    q8_tile_fn tile;
    int tile_cols;            /* columns of a 4-row tile: 2 (AVX2: registers) or 4 */
    int M, N, kb;
    const int8_t *qa;         /* M rows of kb bytes */
    const float *sa;          /* M */
    const tfm_q8_weight *W;
    const float *bias;
    float *C;                 /* NULL: acc instead (tests) */
    int ldc;
    int32_t *acc;             /* M x N */
} q8_args;

/* The tile's results (mr x nr at out, row stride 4) into C (scaled) or acc (integers). */
static void store_tile(const q8_args *g, int i0, int j0, int mr, int nr, const int32_t *out) {
    for (int i = 0; i < mr; i++)
        for (int j = 0; j < nr; j++) {
            int32_t s = out[4 * i + j];
            if (!g->C) {
                g->acc[(size_t)(i0 + i) * g->N + j0 + j] = s;
                continue;
            }
            float scale = g->sa[i0 + i] * g->W->scale[j0 + j];   /* sa * sw, then acc * that, then + bias: */
            float y = (float)s * scale;                           /* separate statements, so no compiler */
            if (g->bias) y += g->bias[j0 + j];                    /* fuses them into an FMA on one path only */
            g->C[(size_t)(i0 + i) * g->ldc + j0 + j] = y;
        }
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
                    W->sum + j, out);
            store_tile(g, i, j, 4, nr, out);
        }
    for (; i < i1; i++)
        for (int j = j0; j < j1; j += 4) {
            int nr = j1 - j < 4 ? j1 - j : 4;
            g->tile(1, nr, g->kb, g->qa + (size_t)i * g->kb, (size_t)g->kb, W->q + (size_t)j * W->ld, (size_t)W->ld,
                    W->sum + j, out);
            store_tile(g, i, j, 1, nr, out);
        }
}

/* every block of C, split over nt threads (each element computed by one thread: exact sums either way) */
static void q8_run(const q8_args *g, int nt) {
    int rb = (g->M + Q8_RB - 1) / Q8_RB, cb = (g->N + Q8_CB - 1) / Q8_CB, items = rb * cb;
    if (nt > items) nt = items;
#pragma omp parallel for schedule(static) num_threads(nt) if (nt > 1)
    for (int it = 0; it < items; it++) {
        int r = it / cb, c = it % cb;
        int i1 = (r + 1) * Q8_RB < g->M ? (r + 1) * Q8_RB : g->M, j1 = (c + 1) * Q8_CB < g->N ? (c + 1) * Q8_CB : g->N;
        q8_block(g, r * Q8_RB, i1, c * Q8_CB, j1);
    }
}

static int q8_threads(int M, int N, int K) {
    if (omp_in_parallel()) return 1;
    double work = (double)M * N * K;
    int nt = omp_get_max_threads(), by_work = (int)(work / Q8_MIN_WORK);
    return by_work < 1 ? 1 : by_work < nt ? by_work : nt;
}

void tfm_q8_dot_path_(tfm_q8_path path, int M, const int8_t *qa, int lda, const tfm_q8_weight *w, int32_t *acc) {
    q8_args g = {path_tile(path), path == TFM_Q8_AVX2 ? 2 : 4, M, w->rows, lda, qa, NULL, w, NULL, NULL, 0, acc};
    TFM_ASSERT(lda == w->ld, "tfm_q8_dot_path_: lda %d, weight rows of %d bytes", lda, w->ld);
    q8_run(&g, 1);
}

void tfm_gemm_q8_path_(tfm_q8_path path, int nt, int M, const float *A, int lda, const tfm_q8_weight *W,
                       const float *bias, float *C, int ldc) {
    if (M <= 0 || W->rows <= 0) return;
    int K = W->cols, kb = W->ld;
    /* the quantized rows (kb bytes each, 64-byte aligned) and their scales, in the thread's scratch */
    size_t qbytes = (size_t)M * kb;
    float *buf = tfm_thread_scratch(TFM_SCRATCH_Q8, qbytes / sizeof(float) + (size_t)M);
    if (!buf) tfm_fatal("int8 GEMM: out of memory (%d x %d activations)", M, K);
    int8_t *qa = (int8_t *)buf;
    float *sa = buf + qbytes / sizeof(float);
    if (nt <= 0) nt = q8_threads(M, W->rows, K);
#pragma omp parallel for schedule(static) num_threads(nt) if (nt > 1 && M >= 8)
    for (int i = 0; i < M; i++) sa[i] = tfm_q8_quantize_row_path_(path, A + (size_t)i * lda, K, kb, qa + (size_t)i * kb);
    q8_args g = {path_tile(path), path == TFM_Q8_AVX2 ? 2 : 4, M, W->rows, kb, qa, sa, W, bias, C, ldc, NULL};
    q8_run(&g, nt);
}

void tfm_gemm_q8(int M, const float *A, int lda, const tfm_q8_weight *W, const float *bias, float *C, int ldc) {
    tfm_gemm_q8_path_(tfm_q8_active_path(), 0, M, A, lda, W, bias, C, ldc);
}
