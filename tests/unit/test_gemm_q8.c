/* The int8 GEMM (src/ops/gemm_q8.c): the weights' 8-bit and the activations' 7-bit row quantization (every path
 * against the definition, bit for bit) and their error bounds; the integer products of every path (portable, AVX2,
 * AVX-512 VNNI natively where the CPU has it and, on any CPU, the same kernel source compiled against SIMDe's
 * portable intrinsics) against exact integer sums on ragged shapes and at the saturation extremes, where 8-bit
 * activations shifted to unsigned would saturate vpmaddubsw; the scaled float result against its formula, the same
 * bits on every path and thread count, through the row tiles and the panels; NaN, zero and tiny rows; int8
 * parameters (tfm_params_quantize / set_q8) and tfm_linear on them. */
#include "check.h"
#include "tfm/kernels.h"
#include "tfm/ops.h"
#include <float.h>
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/q8.h"
#include "ops/isa.h"

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint32_t next_u32(void) {
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return (uint32_t)(rng >> 32);
}
static float frand(void) { return (float)(next_u32() >> 8) / (float)(1 << 23) - 1.0f; } /* [-1, 1) */
static int8_t qrand(void) { return (int8_t)((int)(next_u32() % 255) - 127); }          /* [-127, 127] */
static int8_t urand(void) { return (int8_t)(next_u32() % 128); }   /* an activation byte as the kernels read it: 0..127 */
static uint32_t bits(float x) { uint32_t u; memcpy(&u, &x, 4); return u; }
static int ld_of(int cols) { return (cols + TFM_Q8_ALIGN - 1) / TFM_Q8_ALIGN * TFM_Q8_ALIGN; }

/* a weight from rows x cols bytes (64-byte aligned, zero-padded rows) */
static tfm_q8_weight make_weight(int rows, int cols, const int8_t *q, const float *scale) {
    tfm_q8_weight w = {rows, cols, ld_of(cols), NULL, NULL, NULL, NULL, 0, NULL};
    w.q = aligned_alloc(64, (size_t)rows * w.ld);
    w.scale = malloc(sizeof(float) * rows);
    w.sum = malloc(sizeof(int32_t) * rows);
    memset(w.q, 0, (size_t)rows * w.ld);
    for (int r = 0; r < rows; r++) {
        int32_t s = 0;
        for (int c = 0; c < cols; c++) s += w.q[(size_t)r * w.ld + c] = q[(size_t)r * cols + c];
        w.sum[r] = s;
        w.scale[r] = scale ? scale[r] : 1.0f;
    }
    return w;
}
static void free_weight(tfm_q8_weight *w) { tfm_q8_weight_free_panels_(w), free(w->q), free(w->scale), free(w->sum); }

/* activations as the kernels read them (unsigned bytes): M rows of ld bytes, 64-byte aligned, zero beyond cols */
static int8_t *make_acts(int M, int cols, const int8_t *q) {
    int ld = ld_of(cols);
    int8_t *a = aligned_alloc(64, (size_t)M * ld);
    memset(a, 0, (size_t)M * ld);
    for (int i = 0; i < M; i++) memcpy(a + (size_t)i * ld, q + (size_t)i * cols, (size_t)cols);
    return a;
}

static void reference_dot(int M, int N, int K, const int8_t *qa, const int8_t *qw, int64_t *ref) {
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            int64_t s = 0;
            for (int k = 0; k < K; k++) s += (int64_t)(uint8_t)qa[(size_t)i * K + k] * qw[(size_t)j * K + k];
            ref[(size_t)i * N + j] = s;
        }
}

static const tfm_q8_path PATHS[] = {TFM_Q8_GENERIC, TFM_Q8_AVX2, TFM_Q8_VNNI};

#if TFM_X86
#include <immintrin.h>
/* The pitfall on this CPU's own vpmaddubsw (before SIMDe is included below: these are the real intrinsics), 32
 * bytes of the extremes: an 8-bit activation of 127 shifted to unsigned (255) saturates; the 7-bit form's largest
 * byte (127) does not */
TFM_TARGET_AVX2 static void hw_pitfall(void) {
    int8_t a[32], w[32];
    for (int k = 0; k < 32; k++) a[k] = 127, w[k] = 127;
    __m256i av = _mm256_loadu_si256((const __m256i *)a), wv = _mm256_loadu_si256((const __m256i *)w);
    __m256i ones = _mm256_set1_epi16(1);
    __m256i shifted = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_xor_si256(av, _mm256_set1_epi8((char)0x80)), wv), ones);
    __m256i seven = _mm256_madd_epi16(_mm256_maddubs_epi16(av, wv), ones);
    int32_t s[8], t[8];
    _mm256_storeu_si256((__m256i *)s, shifted);
    _mm256_storeu_si256((__m256i *)t, seven);
    /* each lane: 4 products; shifted: 2 pairs of 255 * 127 = 64770 -> saturated 32767; 7-bit: 2 * 127 * 127 */
    CHECK("q8_hw_vpmaddubsw_shifted_8bit_saturates", s[0] == 2 * 32767, "lane 0 = %d", s[0]);
    CHECK("q8_hw_vpmaddubsw_7bit_form_exact", t[0] == 4 * 127 * 127 && t[7] == 4 * 127 * 127, "lane 0 = %d", t[0]);
}
#endif

/* ---------------------------------------------------------------- VNNI kernel under SIMDe */
/* The kernel source of kernels_q8_avx512.c, compiled here against SIMDe's portable AVX-512 intrinsics
 * (Debian libsimde-dev), so its logic runs on any CPU. Included last: its aliases rename the intrinsics. */
#if __has_include(<simde/x86/avx512.h>)
#define HAVE_SIMDE 1
#define SIMDE_ENABLE_NATIVE_ALIASES
/* SIMDe's 512-bit types are plain vector types here; clang warns that passing them without AVX-512 enabled
 * has another ABI than with it (-Wpsabi): true, and irrelevant inside this one file */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"
#include <simde/x86/avx512.h>
#define Q8V_NAME emu_tile_vnni
#define Q8V_PANEL_NAME emu_panel_tile_vnni
#define Q8V_PANEL_ROW_NAME emu_panel_row_vnni
#include "ops/q8_vnni_body.h"
#pragma GCC diagnostic pop
#else
#define HAVE_SIMDE 0
#endif

#if HAVE_SIMDE
/* acc's rows in whole 4-row tiles (M / 4 * 4 of them; the driver gives single rows to the AVX2 row kernel, checked
 * through the avx512-vnni path) from a tile function, with the tile shapes the driver uses for the VNNI path */
typedef void (*tile_fn)(int, int, int, const int8_t *, size_t, const int8_t *, size_t, int32_t *);
static void dot_with_tile(tile_fn tile, int M, const int8_t *qa, const tfm_q8_weight *w, int32_t *acc) {
    int32_t out[16];
    for (int i = 0; i + 4 <= M;) {
        const int mr = 4;
        for (int j = 0; j < w->rows; j += 4) {
            int nr = w->rows - j < 4 ? w->rows - j : 4;
            tile(mr, nr, w->ld, qa + (size_t)i * w->ld, (size_t)w->ld, w->q + (size_t)j * w->ld, (size_t)w->ld, out);
            for (int r = 0; r < mr; r++)
                for (int c = 0; c < nr; c++) acc[(size_t)(i + r) * w->rows + j + c] = out[4 * r + c];
        }
        i += mr;
    }
}

/* acc (M x N) from the VNNI panel tile, as gemm_q8.c drives it: the rows in whole 8-row tiles, W's panels */
static void dot_with_panel_tile(int M, const int8_t *qa, const tfm_q8_weight *w, int32_t *acc) {
    const int8_t *panels = tfm_q8_weight_panels_(w);
    int Mp = (M + 7) / 8 * 8, groups = tfm_q8_panel_groups(w);
    int8_t *u = aligned_alloc(64, (size_t)Mp * w->ld);
    for (size_t t = 0; t < (size_t)Mp * w->ld; t++) u[t] = t < (size_t)M * w->ld ? qa[t] : 0;
    int32_t out[8 * 16];
    for (int i = 0; i < M; i += 8)
        for (int j = 0; j < w->rows; j += 16) {
            emu_panel_tile_vnni(groups, u + (size_t)i * w->ld, (size_t)w->ld,
                                panels + (size_t)(j / 16) * groups * TFM_Q8_PANEL_GROUP, out);
            for (int r = 0; r < 8 && i + r < M; r++)
                for (int c = 0; c < 16 && j + c < w->rows; c++)
                    acc[(size_t)(i + r) * w->rows + j + c] = out[16 * r + c];
        }
    free(u);
}

/* acc (M x N) from the VNNI panel row, as gemm_q8.c drives it for single rows: each row alone, 64 columns (4
 * panels) a call, the last call with the panels left */
static void dot_with_panel_row(int M, const int8_t *qa, const tfm_q8_weight *w, int32_t *acc) {
    const int8_t *panels = tfm_q8_weight_panels_(w);
    int groups = tfm_q8_panel_groups(w);
    int32_t out[64];
    for (int i = 0; i < M; i++)
        for (int j = 0; j < w->rows; j += 64) {
            int np = (w->rows - j + 15) / 16 < 4 ? (w->rows - j + 15) / 16 : 4;
            const int8_t *p = panels + (size_t)(j / 16) * groups * TFM_Q8_PANEL_GROUP;
            emu_panel_row_vnni(groups, np, qa + (size_t)i * w->ld, p, out);
            for (int c = 0; c < 64 && j + c < w->rows; c++) acc[(size_t)i * w->rows + j + c] = out[c];
        }
}
#endif

/* every path's integer products equal the exact sums; name says which data. With quiet, no CHECK line: the
 * bit p + 1 of the result is set if path p (3: VNNI's row tile under SIMDe, 4: its panel tile, 5: its panel row)
 * differed (a "#" line says where). */
static const char *const SIMDE_PATHS[] = {"avx512-vnni-simde", "avx512-vnni-panels-simde",
                                          "avx512-vnni-panel-row-simde"};
static int check_dot(const char *name, int M, int N, int K, const int8_t *qa, const int8_t *qw, int quiet) {
    int failed = 0;
    tfm_q8_weight w = make_weight(N, K, qw, NULL);
    int8_t *a = make_acts(M, K, qa);
    int64_t *ref = malloc(sizeof(int64_t) * M * N);
    int32_t *acc = malloc(sizeof(int32_t) * M * N);
    reference_dot(M, N, K, qa, qw, ref);
    char label[160];
    for (int p = 0; p < 3 + 3 * HAVE_SIMDE; p++) {
        const char *pn = p < 3 ? tfm_q8_path_name(PATHS[p]) : SIMDE_PATHS[p - 3];
        snprintf(label, sizeof label, "q8_dot_%s_%s", pn, name);
        if (p < 3 && !tfm_q8_path_supported(PATHS[p])) continue;   /* reported once in main */
        memset(acc, 0x55, sizeof(int32_t) * M * N);
#if HAVE_SIMDE
        if (p == 3) dot_with_tile(emu_tile_vnni, M, a, &w, acc);
        else if (p == 4) dot_with_panel_tile(M, a, &w, acc);
        else if (p == 5) dot_with_panel_row(M, a, &w, acc);
        else
#endif
            tfm_q8_dot_path_(PATHS[p], M, a, w.ld, &w, acc);
        int bad = -1, checked = (p == 3 ? M / 4 * 4 : M) * N;
        for (int i = 0; i < checked && bad < 0; i++)
            if (acc[i] != ref[i]) bad = i;
        if (bad >= 0) failed |= 2 << p;
        if (quiet && bad >= 0)
            printf("# %s: M=%d N=%d K=%d: element %d is %d, exact %lld\n", label, M, N, K, bad, acc[bad], (long long)ref[bad]);
        else if (!quiet)
            CHECK(label, bad < 0, "M=%d N=%d K=%d: element %d is %d, exact %lld", M, N, K, bad, bad < 0 ? 0 : acc[bad],
                  bad < 0 ? 0LL : (long long)ref[bad]);
    }
    free(ref), free(acc), free(a);
    free_weight(&w);
    return failed;
}

static void dot_suite(void) {
    /* ragged shapes: K across the 32- and 64-byte chunks (and odd and even counts of 4-byte groups), rows across the
     * 4-row and 4/2-column tiles, columns across panels (16) and the driver's column blocks (64) */
    static const int Ms[] = {1, 2, 3, 4, 5, 7, 9, 17}, Ns[] = {1, 2, 3, 5, 8, 17, 40, 64, 65, 130},
                     Ks[] = {1, 31, 32, 33, 64, 65, 130, 300};
    int total = 0, failed = 0;
    for (size_t a = 0; a < sizeof Ms / sizeof *Ms; a++)
        for (size_t b = 0; b < sizeof Ns / sizeof *Ns; b++)
            for (size_t c = 0; c < sizeof Ks / sizeof *Ks; c++) {
                int M = Ms[a], N = Ns[b], K = Ks[c];
                int8_t *qa = malloc((size_t)M * K), *qw = malloc((size_t)N * K);
                for (int i = 0; i < M * K; i++) qa[i] = urand();
                for (int i = 0; i < N * K; i++) qw[i] = qrand();
                failed |= check_dot("ragged", M, N, K, qa, qw, 1);
                total++;
                free(qa), free(qw);
            }
    char label[80];
    for (int p = 0; p < 3 + 3 * HAVE_SIMDE; p++) {
        if (p < 3 && !tfm_q8_path_supported(PATHS[p])) continue;
        snprintf(label, sizeof label, "q8_dot_%s_ragged_%d_shapes_exact", p < 3 ? tfm_q8_path_name(PATHS[p]) : SIMDE_PATHS[p - 3], total);
        CHECK(label, !(failed & (2 << p)), "see the lines above");
    }
}

/* Emulation of vpmaddubsw on one pair: u8 * s8 + u8 * s8, saturated to int16 (the instruction's definition) */
static int32_t maddubs_pair(uint8_t u0, int8_t s0, uint8_t u1, int8_t s1) {
    int32_t v = (int32_t)u0 * s0 + (int32_t)u1 * s1;
    return v > 32767 ? 32767 : v < -32768 ? -32768 : v;
}

/* The extremes: every pair of products at +-2 * 127 * 127 (activation bytes 127, weights +-127), and K at
 * TFM_Q8_MAX_COLS where the sums come closest to 2^31. 8-bit activations shifted to unsigned (a + 128 against
 * signed w) would saturate vpmaddubsw on them; the 7-bit bytes cannot. */
static void extremes_suite(void) {
    const int K = 256, M = 4, N = 4;
    int8_t *qa = malloc(M * K), *qw = malloc(N * K);
    /* activation rows: all 127, 127/0 alternating, 0/127 in pairs, all 0; weights: +127, -127, +-127 in pairs of
     * equal sign, alternating */
    for (int k = 0; k < K; k++) {
        int8_t u[4] = {127, (int8_t)(k % 2 ? 0 : 127), (int8_t)((k / 2) % 2 ? 127 : 0), 0};
        int8_t v[4] = {127, -127, (int8_t)((k / 2) % 2 ? -127 : 127), (int8_t)(k % 2 ? -127 : 127)};
        for (int r = 0; r < 4; r++) qa[r * K + k] = u[r], qw[r * K + k] = v[r];
    }
    check_dot("extremes", M, N, K, qa, qw, 0);
    int8_t *qa8 = malloc(2 * M * K);   /* the same rows twice: 8 rows, the panels (5 rows and more) */
    memcpy(qa8, qa, (size_t)M * K), memcpy(qa8 + M * K, qa, (size_t)M * K);
    check_dot("extremes_8_rows", 2 * M, N, K, qa8, qw, 0);
    free(qa8);
    /* the pitfall, shown: 8-bit activations of 127 (row 0's values as signed 8-bit), shifted, saturate here */
    int64_t exact = 0, shifted = 0, wsum = 0;
    for (int k = 0; k < K; k += 2) {
        exact += 127 * (int64_t)qw[k] + 127 * (int64_t)qw[k + 1];
        shifted += maddubs_pair(255, qw[k], 255, qw[k + 1]);
    }
    for (int k = 0; k < K; k++) wsum += qw[k];
    shifted -= 128 * wsum;
    CHECK("q8_shifted_8bit_maddubs_saturates_on_extremes", shifted != exact,
          "the shifted form gave the exact %lld: the extremes do not reach the saturation", (long long)exact);
    printf("#   exact %lld, shifted 8-bit vpmaddubsw form %lld (saturated pairs)\n", (long long)exact, (long long)shifted);
    /* 7-bit bytes: no pair saturates, for every pair of values */
    int worst = 0, exact_all = 1;
    for (int u0 = 0; u0 <= 127; u0++)
        for (int w0 = -127; w0 <= 127; w0++) {
            int p = 2 * u0 * w0;
            exact_all &= maddubs_pair((uint8_t)u0, (int8_t)w0, (uint8_t)u0, (int8_t)w0) == p;
            if (abs(p) > worst) worst = abs(p);
        }
    CHECK("q8_7bit_pairs_fit_int16", exact_all && worst == 2 * 127 * 127, "worst pair %d", worst);
    free(qa), free(qw);
    /* the longest rows allowed, at the extremes: 127 * 127 over 65536 columns, and 127 * -127 */
    const int KM = TFM_Q8_MAX_COLS;
    int8_t *la = malloc(2 * (size_t)KM), *lw = malloc(2 * (size_t)KM);
    for (int k = 0; k < KM; k++) la[k] = 127, la[KM + k] = (int8_t)(k % 2 ? 127 : 0), lw[k] = 127, lw[KM + k] = -127;
    check_dot("max_cols_extremes", 2, 2, KM, la, lw, 0);
    int8_t *l5 = malloc(5 * (size_t)KM);   /* 5 rows (the panels) */
    for (int r = 0; r < 5; r++) memcpy(l5 + (size_t)r * KM, la + (size_t)(r % 2) * KM, (size_t)KM);
    check_dot("max_cols_extremes_5_rows", 5, 2, KM, l5, lw, 0);
    free(l5), free(la), free(lw);
}


/* ---------------------------------------------------------------- quantization */
/* tfm_q8_quantize_row's definition, one value at a time (its SSE2 loop must give these bits) */
static float ref_quantize_row(const float *x, int n, int8_t *q) {
    float amax = 0.0f;
    for (int i = 0; i < n; i++) {
        if (!isfinite(x[i])) return memset(q, 0, (size_t)n), NAN;
        amax = fabsf(x[i]) > amax ? fabsf(x[i]) : amax;
    }
    if (amax < TFM_Q8_TINY) return memset(q, 0, (size_t)n), 0.0f;
    float inv = 127.0f / amax;
    for (int i = 0; i < n; i++) {
        float v = rintf(x[i] * inv);
        q[i] = (int8_t)(v > 127.0f ? 127 : v < -127.0f ? -127 : (int)v);
    }
    return amax / 127.0f;
}

static void quantize_suite(void) {
    static const int ns[] = {1, 7, 8, 9, 31, 32, 33, 64, 100, 257};
    int same_ref = 1, bound = 1, no128 = 1;
    int8_t q0[320], qr[320];
    for (size_t t = 0; t < sizeof ns / sizeof *ns; t++)
        for (int rep = 0; rep < 20; rep++) {
            int n = ns[t];
            float x[257];
            float mag = rep % 4 == 0 ? 1e-3f : rep % 4 == 1 ? 1.0f : rep % 4 == 2 ? 300.0f : 1e20f;
            for (int i = 0; i < n; i++) x[i] = frand() * mag;
            if (rep == 5) for (int i = 0; i < n; i++) x[i] = (float)((i % 9) - 4) + 0.5f;   /* ties (amax 4.5..) */
            if (rep == 6) x[0] = 127.0f, x[n - 1] = n > 1 ? 0.5f : 127.0f;                  /* inv = 1: exact ties */
            float s0 = tfm_q8_quantize_row(x, n, q0), sr = ref_quantize_row(x, n, qr);
            same_ref &= bits(s0) == bits(sr) && !memcmp(q0, qr, (size_t)n);
            for (int i = 0; i < n; i++) {
                no128 &= q0[i] != -128;
                float err = fabsf(x[i] - s0 * (float)q0[i]);
                if (!(err <= s0 * 0.5f * (1 + 1e-5f) + 1e-30f)) bound = 0;
            }
        }
    CHECK("q8_quantize_row_equals_definition", same_ref, "tfm_q8_quantize_row differs from rounding one value at a time");
    CHECK("q8_quantize_dequantize_error_le_half_scale", bound, "|x - s q| > s / 2");
    CHECK("q8_quantize_never_minus_128", no128, "a -128");
    /* ties go to even: with amax 127 the scale is 1 and 0.5 -> 0, 1.5 -> 2, 2.5 -> 2, -2.5 -> -2 */
    float t[6] = {127.0f, 0.5f, 1.5f, 2.5f, -2.5f, -127.0f};
    int8_t qt[6];
    float st = tfm_q8_quantize_row(t, 6, qt);
    CHECK("q8_quantize_ties_to_even", st == 1.0f && qt[1] == 0 && qt[2] == 2 && qt[3] == 2 && qt[4] == -2 && qt[5] == -127,
          "scale %g q %d %d %d %d", st, qt[1], qt[2], qt[3], qt[4]);
    /* special rows, on every path of the activations' quantizer (bytes q + 64): zero, tiny (below TFM_Q8_TINY),
     * NaN, infinity */
    float z[40] = {0}, tiny[40], nanr[40], infr[40];
    for (int i = 0; i < 40; i++) tiny[i] = 1e-31f * (float)(i % 3), nanr[i] = infr[i] = (float)i;
    nanr[37] = NAN, infr[3] = -INFINITY;
    int special = 1;
    for (size_t p = 0; p < 3; p++) {
        if (!tfm_q8_path_supported(PATHS[p])) continue;
        int8_t q[64];
        special &= tfm_q7_quantize_row_path_(PATHS[p], z, 40, 64, q) == 0.0f && q[0] == 64 && q[63] == 64;
        special &= tfm_q7_quantize_row_path_(PATHS[p], tiny, 40, 64, q) == 0.0f && q[2] == 64;
        special &= isnan(tfm_q7_quantize_row_path_(PATHS[p], nanr, 40, 64, q)) && q[5] == 64;
        special &= isnan(tfm_q7_quantize_row_path_(PATHS[p], infr, 40, 64, q)) && q[5] == 64;
    }
    /* tfm_q8_quantize_row itself: a NaN or an infinity in its vector part or its tail */
    for (int at = 0; at < 39; at += 12) {   /* 0, 12, 24 (vector part), 36 (tail of 39) */
        int8_t q[40];
        float r[40];
        memcpy(r, infr, sizeof r);
        r[3] = 1.0f, r[at] = at % 2 ? NAN : INFINITY;
        special &= isnan(tfm_q8_quantize_row(r, 39, q)) && q[5] == 0 && q[38] == 0;
    }
    special &= tfm_q8_quantize_row(z, 40, q0) == 0.0f && tfm_q8_quantize_row(tiny, 40, q0) == 0.0f && q0[2] == 0;
    CHECK("q8_quantize_zero_tiny_nan_inf_rows", special, "a special row was not zeros with scale 0 / NaN");
}

/* ---------------------------------------------------------------- the whole GEMM */
/* C[i][j] = (float)acc * (sa * sw) + bias, from exact sums of the rows quantized by tfm_q7_quantize_row */
static void reference_gemm(int M, const float *A, int lda, const tfm_q8_weight *W, const float *bias, float *C,
                           int ldc) {
    int K = W->cols;
    int8_t *q = malloc((size_t)K);
    for (int i = 0; i < M; i++) {
        float sa = tfm_q7_quantize_row(A + (size_t)i * lda, K, q);
        for (int j = 0; j < W->rows; j++) {
            int64_t s = 0;
            for (int k = 0; k < K; k++) s += (int64_t)q[k] * W->q[(size_t)j * W->ld + k];
            float scale = sa * W->scale[j];
            float y = (float)(int32_t)s * scale;
            if (bias) y += bias[j];
            C[(size_t)i * ldc + j] = y;
        }
    }
    free(q);
}

/* tfm_gemm_q8_path_ on each of PATHS the CPU has, at 1 and 2 threads, with and without the bias, against
 * reference_gemm, bit for bit (C's gap past N left alone); each twice: from a weight without panels (a first call:
 * the row tiles below 64 rows) at 1 and 2 threads, then twice more (from 5 rows: the panels, made by the first). Returns 1 if every
 * 1-thread result matched; *threads_same &= the 2-thread ones; a "#" line names each mismatch. */
static int against_reference(const char *label, int M, const float *A, int lda, tfm_q8_weight *w, const float *bias,
                             int ldc, int *threads_same) {
    const int N = w->rows, K = w->cols;
    float *ref = malloc(sizeof(float) * M * ldc), *C = malloc(sizeof(float) * M * ldc);
    int all_same = 1;
    for (int b = 0; b < 2; b++) {
        reference_gemm(M, A, lda, w, b ? bias : NULL, ref, ldc);
        for (int p = 0; p < 3; p++) {
            if (!tfm_q8_path_supported(PATHS[p])) continue;
            for (int call = 0; call < 4; call++) {
                int nt = 1 + call % 2;
                if (call < 2) tfm_q8_weight_free_panels_(w), w->many_row_calls = 0;   /* rows at 1, 2 threads */
                for (int i = 0; i < M * ldc; i++) C[i] = -7.0f;
                int panels = w->panels != NULL;
                tfm_gemm_q8_path_(PATHS[p], nt, M, A, lda, w, b ? bias : NULL, C, ldc);
                int ok = 1;
                for (int i = 0; i < M; i++)
                    for (int j = 0; j < ldc; j++) {
                        float want = j < N ? ref[(size_t)i * ldc + j] : -7.0f;   /* the gap left alone */
                        ok &= bits(C[(size_t)i * ldc + j]) == bits(want);
                    }
                if (!ok) printf("# %sM=%d N=%d K=%d bias=%d path %s threads %d (%s) differs\n", label, M, N, K, b,
                                tfm_q8_path_name(PATHS[p]), nt, panels ? "panels" : "made now or rows");
                *(nt == 1 ? &all_same : threads_same) &= ok;
            }
        }
    }
    free(ref), free(C);
    return all_same;
}

static void gemm_suite(void) {
    static const int shapes[][3] = {{1, 1, 1}, {1, 37, 130}, {3, 5, 64}, {4, 9, 33}, {7, 70, 200}, {33, 129, 257}, {64, 96, 512}};
    int all_same = 1, threads_same = 1, close = 1;
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2], lda = K + 3, ldc = N + 2;
        float *Wf = malloc(sizeof(float) * N * K), *A = malloc(sizeof(float) * M * lda), *bias = malloc(sizeof(float) * N);
        int8_t *qw = malloc((size_t)N * K);
        float *sw = malloc(sizeof(float) * N);
        for (int i = 0; i < N * K; i++) Wf[i] = frand() * (i % 11 == 0 ? 4.0f : 0.5f);
        for (int j = 0; j < N; j++) sw[j] = tfm_q8_quantize_row(Wf + (size_t)j * K, K, qw + (size_t)j * K), bias[j] = frand();
        for (int i = 0; i < M * lda; i++) A[i] = frand() * (i % 13 == 0 ? 8.0f : 1.0f);
        tfm_q8_weight w = make_weight(N, K, qw, sw);
        float *C = malloc(sizeof(float) * M * N), *F = malloc(sizeof(float) * M * N);
        all_same &= against_reference("", M, A, lda, &w, bias, ldc, &threads_same);
        /* against fp32: |C - A W^T| within the two quantization errors (a loose, shape-aware bound) */
        tfm_gemm(0, 1, M, N, K, 1.0f, A, lda, Wf, K, 0.0f, F, N);
        for (int i = 0; i < M; i++) {
            float amax = 0;
            for (int k = 0; k < K; k++) amax = fmaxf(amax, fabsf(A[(size_t)i * lda + k]));
            for (int j = 0; j < N; j++) {
                float wmax = sw[j] * 127.0f;
                double bound = 0.5 * (amax / 63.0 * wmax + wmax / 127.0 * amax) * K * 1.01 + 1e-5;
                tfm_gemm_q8_path_(TFM_Q8_GENERIC, 1, 1, A + (size_t)i * lda, lda, &w, NULL, C, N);
                close &= fabs((double)C[j] - F[(size_t)i * N + j]) <= bound;
            }
        }
        free(Wf), free(A), free(bias), free(qw), free(sw), free(C), free(F);
        free_weight(&w);
    }
    CHECK("q8_gemm_every_path_equals_formula_bits", all_same, "see the lines above");
    CHECK("q8_gemm_two_threads_same_bits", threads_same, "see the lines above");
    CHECK("q8_gemm_near_fp32_within_quantization_bound", close, "an element outside the bound");
    /* a NaN in a row makes that row NaN, the other rows stay finite; a zero row gives the bias */
    const int K = 40, N = 3;
    int8_t qw[3 * 40];
    for (int i = 0; i < N * K; i++) qw[i] = qrand();
    float sw[3] = {0.5f, 0.25f, 1.0f}, bias[3] = {1, 2, 3}, A[3 * 40], C[9];
    tfm_q8_weight w = make_weight(N, K, qw, sw);
    for (int i = 0; i < 3 * K; i++) A[i] = i < K ? frand() : i < 2 * K ? 0.0f : frand();
    A[2 * K + 7] = NAN;
    int ok = 1;
    for (size_t p = 0; p < 3; p++) {
        if (!tfm_q8_path_supported(PATHS[p])) continue;
        tfm_gemm_q8_path_(PATHS[p], 1, 3, A, K, &w, bias, C, N);
        ok &= isfinite(C[0]) && C[3] == 1 && C[4] == 2 && C[5] == 3 && isnan(C[6]) && isnan(C[8]);
    }
    CHECK("q8_gemm_nan_row_and_zero_row", ok, "C = %g .. %g %g %g .. %g", C[0], C[3], C[4], C[5], C[6]);
    free_weight(&w);
}

/* ---------------------------------------------------------------- the panels */
/* every path and thread count against reference_gemm, bit for bit; extremes = activations at
 * +-63 (every row's values +-amax) and weights at +-127 with equal signs: every vpmaddubsw pair at its largest,
 * 2 * 127 * 127 */
static int check_panels(int M, int N, int K, int extremes, int *threads_same) {
    int lda = K + 5, ldc = N + 3;
    float *A = malloc(sizeof(float) * M * lda), *bias = malloc(sizeof(float) * N), *sw = malloc(sizeof(float) * N);
    int8_t *qw = malloc((size_t)N * K);
    for (int i = 0; i < M * lda; i++) A[i] = extremes ? (i % 3 ? 2.5f : -2.5f) : frand() * (i % 13 == 0 ? 8.0f : 1.0f);
    for (int i = 0; i < N * K; i++) qw[i] = extremes ? (int8_t)(i % 3 ? 127 : -127) : qrand();
    for (int j = 0; j < N; j++) sw[j] = 0.01f + 0.001f * (float)j, bias[j] = frand();
    tfm_q8_weight w = make_weight(N, K, qw, sw);
    int ok_all = against_reference(extremes ? "panels, extremes: " : "panels: ", M, A, lda, &w, bias, ldc, threads_same);
    free_weight(&w);
    free(A), free(bias), free(sw), free(qw);
    return ok_all;
}

static void panels_suite(void) {
    /* the 7-bit row: every path's bytes are tfm_q7_quantize_row's + 64 (padding 64), within half a step */
    int same = 1, bound = 1;
    float x[77];
    int8_t q[128], r[128];
    for (int t = 0; t < 200; t++) {
        int n = 1 + t % 77;
        for (int i = 0; i < n; i++) x[i] = frand() * (t % 5 == 0 ? 1e-3f : 3.0f);
        float s = tfm_q7_quantize_row(x, n, r);
        for (int i = 0; i < n; i++) bound &= r[i] >= -63 && r[i] <= 63 && fabsf(x[i] - s * r[i]) <= s * 0.5f * (1 + 1e-5f);
        for (size_t pi = 0; pi < 3; pi++) {
            if (!tfm_q8_path_supported(PATHS[pi])) continue;
            memset(q, 0, sizeof q);
            float sp = tfm_q7_quantize_row_path_(PATHS[pi], x, n, 128, q);
            same &= bits(sp) == bits(s);
            for (int i = 0; i < 128; i++) same &= q[i] == (int8_t)(i < n ? r[i] + 64 : 64);
        }
    }
    CHECK("q7_quantize_row_every_path_same_bytes", same, "a path's bytes or scale differ");
    CHECK("q7_quantize_row_within_half_step", bound, "a value outside [-63, 63] or off by more than scale / 2");
    float z[20] = {0};
    z[3] = NAN;
    CHECK("q7_quantize_nan_row", isnan(tfm_q7_quantize_row(z, 20, r)) && r[3] == 0, "not NaN / zeros");
    static const int shapes[][3] = {{1, 1, 1}, {3, 17, 3}, {4, 16, 4}, {5, 33, 63}, {8, 40, 65}, {13, 47, 130},
                                    {32, 100, 256}, {37, 16, 257}};
    int ok = 1, threads_same = 1;
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
        ok &= check_panels(shapes[s][0], shapes[s][1], shapes[s][2], 0, &threads_same);
    CHECK("q8_panels_every_path_equals_formula_bits", ok, "see the lines above");
    CHECK("q8_panels_two_threads_same_bits", threads_same, "see the lines above");
    /* the panels made lazily by racing threads: one copy, the same for all, laid out as core/q8.h says */
    {
        enum { R = 37, K = 70, T = 4 };
        int8_t qw[R * K];
        for (int i = 0; i < R * K; i++) qw[i] = qrand();
        tfm_q8_weight w = make_weight(R, K, qw, NULL);
        const int8_t *got[T];
#pragma omp parallel for num_threads(T)
        for (int t = 0; t < T; t++) got[t] = tfm_q8_weight_panels_(&w);
        int one = got[0] != NULL && got[0] == w.panels, layout = 1;
        for (int t = 1; t < T; t++) one &= got[t] == got[0];
        for (int r = 0; r < 48 && one; r++)   /* 3 panels: rows past 37 zero */
            for (int k = 0; k < 72; k++) {
                const int8_t *at = got[0] + (size_t)(r / 16) * 18 * 64 + (size_t)(k / 4) * 64 + r % 16 / 8 * 32 +
                                   r % 8 * 4 + k % 4;
                layout &= *at == (r < R && k < K ? qw[r * K + k] : 0);
            }
        CHECK("q8_panels_made_once_by_racing_threads", one, "threads got different panels");
        if (tfm_q8_path_supported(TFM_Q8_AVX2)) {
            /* a big weight's (over 512 KiB): tfm_gemm_q8 makes them at a second call of 5+ rows */
            enum { RB = 600, KB = 1024 };
            int8_t *qb = malloc((size_t)RB * KB);
            for (int i = 0; i < RB * KB; i++) qb[i] = qrand();
            tfm_q8_weight w2 = make_weight(RB, KB, qb, NULL);
            float *A = malloc(sizeof(float) * 6 * KB), *C = malloc(sizeof(float) * 6 * RB);
            for (int i = 0; i < 6 * KB; i++) A[i] = frand();
            tfm_gemm_q8_path_(TFM_Q8_AVX2, 1, 1, A, KB, &w2, NULL, C, RB);
            tfm_gemm_q8_path_(TFM_Q8_AVX2, 1, 4, A, KB, &w2, NULL, C, RB);
            tfm_gemm_q8_path_(TFM_Q8_AVX2, 1, 6, A, KB, &w2, NULL, C, RB);
            int after_one = w2.panels != NULL;
            tfm_gemm_q8_path_(TFM_Q8_AVX2, 1, 6, A, KB, &w2, NULL, C, RB);
            free(A), free(C), free(qb);
            /* a small weight's: at its first single row */
            tfm_q8_weight w3 = make_weight(R, K, qw, NULL);
            float A3[K], C3[R];
            for (int i = 0; i < K; i++) A3[i] = frand();
            tfm_gemm_q8_path_(TFM_Q8_AVX2, 1, 1, A3, K, &w3, NULL, C3, R);
            CHECK("q8_panels_of_a_small_weight_made_by_its_first_single_row", w3.panels != NULL, "no panels");
            free_weight(&w3);
            CHECK("q8_panels_made_at_the_second_gemm_of_5_rows", !after_one && w2.panels != NULL,
                  "after one call: %d, after two: %d", after_one, w2.panels != NULL);
            free_weight(&w2);
        }
        CHECK("q8_panels_layout", layout, "a byte is not where core/q8.h puts it");
        free_weight(&w);
    }
    threads_same = 1;
    CHECK("q8_panels_extremes_do_not_saturate", check_panels(9, 35, 256, 1, &threads_same) && threads_same,
          "see the lines above");
}

/* ---------------------------------------------------------------- int8 parameters and tfm_linear */
static void params_suite(void) {
    tfm_params p;
    tfm_params_init(&p);
    tfm_tensor *W = tfm_param2(&p, "lin.weight", 6, 70), *b = tfm_param1(&p, "lin.bias", 6);
    tfm_tensor *v = tfm_param1(&p, "norm.weight", 70);
    tfm_params_alloc(&p);
    for (size_t i = 0; i < W->size; i++) W->data[i] = frand();
    for (int i = 0; i < 6; i++) b->data[i] = frand();
    float orig[6 * 70];
    memcpy(orig, W->data, sizeof orig);
    CHECK("q8_params_refuse_1d", tfm_params_quantize(&p, 2) == -1 && strstr(tfm_last_error(), "norm.weight") && v->q8 == NULL,
          "err=%s", tfm_last_error());
    CHECK("q8_params_quantize", tfm_params_quantize(&p, 0) == 0 && W->q8 && tfm_params_n_q8(&p) == 1, "%s", tfm_last_error());
    int deq = 1;
    for (int r = 0; r < 6; r++)
        for (int c = 0; c < 70; c++) {
            float x = W->data[r * 70 + c];
            deq &= x == W->q8->scale[r] * (float)W->q8->q[r * W->q8->ld + c];
            deq &= fabsf(x - orig[r * 70 + c]) <= W->q8->scale[r] * 0.5f * (1 + 1e-5f);
        }
    CHECK("q8_params_data_is_dequantized_within_half_scale", deq, "data is not scale * q");
    /* tfm_linear without grad multiplies by the int8 weight (= tfm_gemm_q8 bits), with grad by the floats */
    tfm_graph g;
    tfm_graph_init(&g, 1);
    g.grad_enabled = 0;
    float xs[2 * 70], want[2 * 6];
    for (int i = 0; i < 140; i++) xs[i] = frand();
    tfm_tensor *x = tfm_constant(&g, xs, 2, (int[]){2, 70});
    tfm_tensor *y = tfm_linear(&g, x, W, b);
    tfm_gemm_q8(2, xs, 70, W->q8, b->data, want, 6);
    CHECK("q8_linear_uses_int8_gemm", !memcmp(y->data, want, sizeof want), "y differs from tfm_gemm_q8");
    g.grad_enabled = 1;
    tfm_graph_reset(&g);
    x = tfm_constant(&g, xs, 2, (int[]){2, 70});
    tfm_tensor *y2 = tfm_linear(&g, x, W, b);
    tfm_gemm(0, 1, 2, 6, 70, 1.0f, xs, 70, W->data, 70, 0.0f, want, 6);
    for (int i = 0; i < 12; i++) want[i] += b->data[i % 6];
    CHECK("q8_linear_with_grad_uses_dequantized_floats", y2->grad && max_abs_diff(y2->data, want, 12) < 1e-5, "differs");
    tfm_graph_free(&g);
    tfm_params_free(&p);
}

/* A parameter set's int8 weights and their panels come from its pool (huge-page blocks, src/core/q8.c): the
 * weights do not overlap, are 64-byte aligned, and a GEMM through them (rows and panels, every path) gives the
 * bits of the same weight held alone; tfm_params_free releases the pool (ASan's leak check in make test). */
static void pool_suite(void) {
    enum { NW = 3, M = 70 };
    static const int shapes[NW][2] = {{33, 70}, {40, 200}, {17, 130}};
    tfm_params p;
    tfm_params_init(&p);
    tfm_tensor *W[NW];
    for (int k = 0; k < NW; k++) W[k] = tfm_param2(&p, k == 0 ? "a.weight" : k == 1 ? "b.weight" : "c.weight",
                                                   shapes[k][0], shapes[k][1]);
    tfm_params_alloc(&p);
    for (size_t i = 0; i < p.total; i++) p.data[i] = frand();
    int ok = 1, same = 1;
    for (int k = 0; k < NW; k++) ok &= tfm_params_quantize(&p, k) == 0;
    const char *lo[NW], *hi[NW];
    for (int k = 0; ok && k < NW; k++) {
        const tfm_q8_weight *w = W[k]->q8;
        ok &= w->pool != NULL && w->pool == p.q8_pool && (uintptr_t)w->q % 64 == 0;
        lo[k] = (const char *)w->q, hi[k] = lo[k] + (size_t)w->rows * w->ld;
        for (int j = 0; j < k; j++) ok &= hi[k] <= lo[j] || hi[j] <= lo[k];
    }
    float *A = malloc(sizeof(float) * M * 200), *C = malloc(sizeof(float) * M * 40), *R = malloc(sizeof(float) * M * 40);
    for (int i = 0; i < M * 200; i++) A[i] = frand();
    for (int k = 0; ok && k < NW; k++) {
        const tfm_q8_weight *w = W[k]->q8;
        int8_t *q = malloc((size_t)w->rows * w->cols);
        for (int r = 0; r < w->rows; r++) memcpy(q + (size_t)r * w->cols, w->q + (size_t)r * w->ld, (size_t)w->cols);
        tfm_q8_weight alone = make_weight(w->rows, w->cols, q, w->scale);
        for (int pth = 0; pth < 3; pth++) {
            if (!tfm_q8_path_supported(PATHS[pth])) continue;
            for (int m = 1; m <= M; m += M - 1) {   /* one row (the row kernel), then 70 (the panels) */
                tfm_gemm_q8_path_(PATHS[pth], 1, m, A, w->cols, w, NULL, C, w->rows);
                tfm_gemm_q8_path_(PATHS[pth], 1, m, A, w->cols, &alone, NULL, R, w->rows);
                same &= !memcmp(C, R, sizeof(float) * (size_t)m * w->rows);
            }
        }
        ok &= !tfm_q8_path_supported(TFM_Q8_AVX2) || (w->panels != NULL && (uintptr_t)w->panels % 64 == 0);
        free_weight(&alone);
        free(q);
    }
    CHECK("q8_params_pool_holds_weights_apart_aligned_with_panels", ok, "a weight outside the pool, misaligned, "
          "overlapping another, or without panels after a 70-row GEMM");
    CHECK("q8_params_pool_gemm_equals_weight_alone_bits", same, "a pooled weight's GEMM differs");
    free(A), free(C), free(R);
    tfm_params_free(&p);
    CHECK("q8_params_pool_released_with_the_parameters", p.q8_pool == NULL && p.q8 == NULL, "still attached");
}

int main(void) {
    for (size_t p = 0; p < 3; p++)
        if (!tfm_q8_path_supported(PATHS[p]))
            printf("NOTRUN q8_path_%s: this CPU (or build) lacks it (not tested here natively)\n", tfm_q8_path_name(PATHS[p]));
#if !HAVE_SIMDE
    printf("SKIP q8_vnni_simde: SIMDe headers missing (apt-get install libsimde-dev)\n");
#endif
    quantize_suite();
    dot_suite();
    extremes_suite();
#if TFM_X86
    if (tfm_q8_path_supported(TFM_Q8_AVX2)) hw_pitfall();
#endif
    gemm_suite();
    panels_suite();
    params_suite();
    pool_suite();
    printf("# int8 GEMM path in use: %s\n", tfm_gemm_q8_backend());
    return check_failures ? 1 : 0;
}
