/* Correctness tests for tfm_gemm / tfm_gemm_batched against a naive double-precision reference. */
#include "check.h"
#include "tfm/kernels.h"
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>

#include "ops/isa.h"

/* check_one runs tfm_gemm (g_isa < 0: the process's path) or the given path's GEMM directly. */
static int g_isa = -1;

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static float frand(void) {
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return (float)((rng >> 40) & 0xffffff) / (float)0x800000 - 1.0f; /* [-1, 1) */
}
static float *rand_buf(size_t n) {
    float *p = malloc(sizeof(float) * (n ? n : 1));
    for (size_t i = 0; i < n; i++) p[i] = frand();
    return p;
}

#define SENTINEL 12345.5f

/* Element-wise check against double reference with bound tol * (|alpha| sum|a b| + |beta c|).
 * Also checks that C entries outside the M x N window (the ldc padding) were not touched.
 * Returns 1 on success; on failure writes a description into why. */
static int check_one(int ta, int tb, int M, int N, int K, float alpha, float beta, int pad_a, int pad_b,
                     int pad_c, int nan_c, char *why, size_t whylen) {
    int lda = (ta ? M : K) + pad_a, ldb = (tb ? K : N) + pad_b, ldc = N + pad_c;
    int rows_a = ta ? K : M, rows_b = tb ? N : K;
    float *A = rand_buf((size_t)rows_a * lda), *B = rand_buf((size_t)rows_b * ldb);
    size_t csz = (size_t)M * ldc;
    float *C = rand_buf(csz), *C0 = malloc(sizeof(float) * (csz ? csz : 1));
    for (int i = 0; i < M; i++)
        for (int j = 0; j < ldc; j++) {
            size_t o = (size_t)i * ldc + j;
            if (j >= N) C[o] = SENTINEL;
            else if (nan_c) C[o] = NAN;
        }
    for (size_t i = 0; i < csz; i++) C0[i] = C[i];
    if (g_isa < 0) tfm_gemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    else tfm_gemm_isa_(g_isa, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    int ok = 1;
    double tol = 2e-7 * (K + 8);
    for (int i = 0; i < M && ok; i++) {
        for (int j = 0; j < ldc && ok; j++) {
            size_t o = (size_t)i * ldc + j;
            if (j >= N) {
                if (C[o] != SENTINEL) {
                    snprintf(why, whylen, "ldc padding clobbered at (%d,%d)", i, j);
                    ok = 0;
                }
                continue;
            }
            double s = 0, sa = 0;
            for (int k = 0; k < K; k++) {
                double a = ta ? A[(size_t)k * lda + i] : A[(size_t)i * lda + k];
                double b = tb ? B[(size_t)j * ldb + k] : B[(size_t)k * ldb + j];
                s += a * b;
                sa += fabs(a * b);
            }
            double ref = alpha * s, bound = fabs(alpha) * sa;
            if (beta != 0.0f) { ref += beta * (double)C0[o]; bound += fabs(beta * (double)C0[o]); }
            double err = fabs((double)C[o] - ref);
            if (!(err <= tol * bound + 1e-30)) {
                snprintf(why, whylen,
                         "ta=%d tb=%d M=%d N=%d K=%d alpha=%g beta=%g lds+(%d,%d,%d) nanC=%d: C(%d,%d)=%g ref=%g",
                         ta, tb, M, N, K, alpha, beta, pad_a, pad_b, pad_c, nan_c, i, j, C[o], ref);
                ok = 0;
            }
        }
    }
    free(A); free(B); free(C); free(C0);
    return ok;
}

static const int small_dims[] = {0, 1, 2, 3, 5, 6, 7, 8, 13, 16, 17, 31, 33};
#define NSMALL (int)(sizeof small_dims / sizeof small_dims[0])

/* Many shapes x all transposes x alpha/beta/stride variants; one CHECK line per group. */
static void shape_suite(const char *tag) {
    static const float ab[][2] = {{1.0f, 0.0f}, {1.0f, 1.0f}, {-1.5f, 0.25f}, {0.5f, 0.0f}, {2.0f, -1.0f}};
    char name[128], why[512];
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            int ok = 1, n = 0;
            why[0] = 0;
            /* small dims, all combinations */
            for (int x = 0; x < NSMALL && ok; x++)
                for (int y = 0; y < NSMALL && ok; y++)
                    for (int z = 0; z < NSMALL && ok; z++) {
                        int v = (x + y + z) % 5;
                        ok = check_one(ta, tb, small_dims[x], small_dims[y], small_dims[z], ab[v][0], ab[v][1],
                                       (x + z) % 3, (y + z) % 2, (x + y) % 3, v == 3, why, sizeof why);
                        n++;
                    }
            /* medium / prime / block-crossing shapes */
            static const int shapes[][3] = {{37, 41, 43},  {64, 64, 32},   {97, 65, 128},  {150, 33, 257},
                                            {145, 130, 300}, {6, 16, 520}, {7, 17, 1},     {1, 384, 128},
                                            {1, 37, 300},  {384, 1, 129},  {1, 1, 77},     {2, 200, 64},
                                            {200, 2, 64},  {301, 70, 70}, {12, 3100, 20}, {5, 5, 1000},
                                            /* attention-head and ragged small shapes */
                                            {16, 16, 32},  {128, 17, 16}, {9, 128, 20},   {128, 128, 16},
                                            {129, 16, 8},  {40, 40, 129}};
            for (size_t s = 0; s < sizeof shapes / sizeof shapes[0] && ok; s++)
                for (int v = 0; v < 5 && ok; v++) {
                    ok = check_one(ta, tb, shapes[s][0], shapes[s][1], shapes[s][2], ab[v][0], ab[v][1],
                                   v == 1 ? 0 : 3, v == 2 ? 0 : 5, v, v == 0 || v == 3, why, sizeof why);
                    n++;
                }
            snprintf(name, sizeof name, "gemm_%s_ta%d_tb%d_shapes", tag, ta, tb);
            CHECK(name, ok, "%s (after %d cases)", why, n);
        }
}

/* A 0-sized K with beta=0 must zero C; alpha=0 must only scale C (and not read A/B). */
static void degenerate_suite(void) {
    float C[6];
    for (int i = 0; i < 6; i++) C[i] = NAN;
    tfm_gemm(0, 0, 2, 3, 0, 1.0f, NULL, 1, NULL, 3, 0.0f, C, 3);
    int ok = 1;
    for (int i = 0; i < 6; i++) ok &= C[i] == 0.0f;
    CHECK("gemm_k0_beta0_zeroes", ok, "C not zeroed");
    for (int i = 0; i < 6; i++) C[i] = (float)i;
    tfm_gemm(0, 0, 2, 3, 0, 1.0f, NULL, 1, NULL, 3, 2.0f, C, 3);
    ok = 1;
    for (int i = 0; i < 6; i++) ok &= C[i] == 2.0f * i;
    CHECK("gemm_k0_scales_by_beta", ok, "C not scaled");
    float A[4] = {NAN, NAN, NAN, NAN}, B[6] = {NAN, NAN, NAN, NAN, NAN, NAN};
    for (int i = 0; i < 6; i++) C[i] = (float)i;
    tfm_gemm(0, 0, 2, 3, 2, 0.0f, A, 2, B, 3, 0.5f, C, 3);
    ok = 1;
    for (int i = 0; i < 6; i++) ok &= C[i] == 0.5f * i;
    CHECK("gemm_alpha0_ignores_ab", ok, "C wrong");
    tfm_gemm(0, 0, 0, 3, 2, 1.0f, A, 2, B, 3, 0.5f, NULL, 3);
    tfm_gemm(0, 0, 3, 0, 2, 1.0f, A, 2, B, 3, 0.5f, NULL, 3);
    CHECK("gemm_empty_mn_noop", 1, "%s", "unreachable");
}

static double batched_err(int batch, int ta, int tb, int M, int N, int K, size_t sa, size_t sb, float beta,
                          const float *A, int lda, const float *B, int ldb, const float *C0, const float *C,
                          int ldc, size_t sc) {
    double worst = 0;
    for (int b = 0; b < batch; b++)
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) {
                double s = 0, sabs = 0;
                for (int k = 0; k < K; k++) {
                    double a = ta ? A[b * sa + (size_t)k * lda + i] : A[b * sa + (size_t)i * lda + k];
                    double x = tb ? B[b * sb + (size_t)j * ldb + k] : B[b * sb + (size_t)k * ldb + j];
                    s += a * x;
                    sabs += fabs(a * x);
                }
                size_t o = b * sc + (size_t)i * ldc + j;
                if (beta != 0.0f) s += beta * (double)C0[o];
                double e = fabs(C[o] - s) / (sabs + 1e-30) / (K + 8);
                if (!(e <= worst)) worst = e;
            }
    return worst;
}

static void batched_suite(void) {
    char name[128];
    /* attention-like: 48 x (64x64x32), and one with shared B (stride 0) */
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++)
            for (int shared = 0; shared < 2; shared++) {
                int batch = 48, M = 64, N = 64, K = 32;
                if (shared) { batch = 7; M = 13; N = 37; K = 19; }
                int lda = (ta ? M : K) + 1, ldb = (tb ? K : N) + 2, ldc = N + 3;
                size_t sa = (size_t)(ta ? K : M) * lda + 5, sb = shared ? 0 : (size_t)(tb ? N : K) * ldb + 7;
                size_t sc = (size_t)M * ldc + 1;
                float *A = rand_buf(sa * batch), *B = rand_buf(shared ? (size_t)(tb ? N : K) * ldb : sb * batch);
                float *C = rand_buf(sc * batch), *C0 = malloc(sizeof(float) * sc * batch);
                float beta = shared ? 0.5f : 0.0f;
                if (beta == 0.0f)
                    for (size_t i = 0; i < sc * batch; i++) C[i] = NAN;
                memcpy(C0, C, sizeof(float) * sc * batch);
                tfm_gemm_batched(batch, ta, tb, M, N, K, 1.0f, A, lda, sa, B, ldb, sb, beta, C, ldc, sc);
                double e = batched_err(batch, ta, tb, M, N, K, sa, sb, beta, A, lda, B, ldb, C0, C, ldc, sc);
                snprintf(name, sizeof name, "gemm_batched_ta%d_tb%d_%s", ta, tb, shared ? "sharedB" : "attn");
                CHECK(name, e <= 2e-7, "worst scaled error %g", e);
                free(A); free(B); free(C); free(C0);
            }
    /* stride_c == 0: GEMMs accumulate into one C in order (beta = 1) */
    {
        int batch = 5, M = 9, N = 11, K = 4;
        float *A = rand_buf((size_t)batch * M * K), *B = rand_buf((size_t)batch * K * N);
        float *C = calloc((size_t)M * N, sizeof(float));
        tfm_gemm_batched(batch, 0, 0, M, N, K, 1.0f, A, K, (size_t)M * K, B, N, (size_t)K * N, 1.0f, C, N, 0);
        double worst = 0;
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) {
                double s = 0;
                for (int b = 0; b < batch; b++)
                    for (int k = 0; k < K; k++)
                        s += (double)A[(size_t)b * M * K + i * K + k] * B[(size_t)b * K * N + k * N + j];
                double e = fabs(C[i * N + j] - s);
                if (!(e <= worst)) worst = e;
            }
        CHECK("gemm_batched_stride_c0_accumulates", worst < 1e-4, "max err %g", worst);
        free(A); free(B); free(C);
    }
}

/* Bitwise reproducibility: same call twice, and 1 vs 2 threads, give identical bits. */
static void determinism_suite(void) {
    static const int shapes[][3] = {{768, 128, 128}, {300, 257, 520}, {1, 384, 128}, {64, 64, 32}, {130, 1, 300}};
    int max_t = omp_get_max_threads();
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int tr = 0; tr < 4; tr++) {
            int ta = tr & 1, tb = tr >> 1, M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
            float *A = rand_buf((size_t)M * K), *B = rand_buf((size_t)K * N);
            float *C1 = malloc(sizeof(float) * M * N), *C2 = malloc(sizeof(float) * M * N);
            float *C3 = malloc(sizeof(float) * M * N);
            omp_set_num_threads(2);
            tfm_gemm(ta, tb, M, N, K, 1.0f, A, ta ? M : K, B, tb ? K : N, 0.0f, C1, N);
            tfm_gemm(ta, tb, M, N, K, 1.0f, A, ta ? M : K, B, tb ? K : N, 0.0f, C2, N);
            omp_set_num_threads(1);
            tfm_gemm(ta, tb, M, N, K, 1.0f, A, ta ? M : K, B, tb ? K : N, 0.0f, C3, N);
            omp_set_num_threads(max_t);
            char name[96];
            snprintf(name, sizeof name, "gemm_deterministic_%dx%dx%d_ta%d_tb%d", M, N, K, ta, tb);
            CHECK(name, memcmp(C1, C2, sizeof(float) * M * N) == 0, "two runs differ");
            snprintf(name, sizeof name, "gemm_thread_invariant_%dx%dx%d_ta%d_tb%d", M, N, K, ta, tb);
            CHECK(name, memcmp(C1, C3, sizeof(float) * M * N) == 0, "1 vs 2 threads differ");
            free(A); free(B); free(C1); free(C2); free(C3);
        }
}

/* tfm_gemm_bias (C = alpha op(A) op(B) + bias) against copying the bias into C's rows and tfm_gemm with
 * beta 1, bit for bit: GEMV shapes (M or N = 1), narrow edge columns, K split into KC blocks, every
 * layout, 1 and 2 threads, with and without B packed in advance. */
static void bias_suite(void) {
    static const int shapes[][3] = {{384, 128, 128}, {1, 384, 128}, {130, 1, 300}, {37, 45, 300}, {13, 57, 7},
                                    {385, 65, 512}};
    int max_t = omp_get_max_threads();
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int t = 0; t < 8; t++) {
            int ta = t & 1, tb = (t >> 1) & 1, packed = t >> 2, M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
            float *A = rand_buf((size_t)M * K), *B = rand_buf((size_t)K * N), *bias = rand_buf((size_t)N);
            float *C1 = rand_buf((size_t)M * N), *C2 = rand_buf((size_t)M * N);
            size_t pf = tfm_gemm_packed_b_floats(N, K);
            float *Bp = packed && pf ? aligned_alloc(64, (pf * sizeof(float) + 63) / 64 * 64) : NULL;
            if (Bp) tfm_gemm_pack_b(tb, N, K, B, tb ? K : N, Bp);
            omp_set_num_threads(t % 3 == 1 ? 1 : (max_t > 1 ? max_t : 2));
            for (int i = 0; i < M; i++) memcpy(C1 + (size_t)i * N, bias, sizeof(float) * N);
            tfm_gemm(ta, tb, M, N, K, 1.5f, A, ta ? M : K, B, tb ? K : N, 1.0f, C1, N);
            tfm_gemm_bias(ta, tb, M, N, K, 1.5f, A, ta ? M : K, B, tb ? K : N, Bp, bias, C2, N);
            omp_set_num_threads(max_t);
            char name[96];
            snprintf(name, sizeof name, "gemm_bias_equals_seeded_c_%dx%dx%d_ta%d_tb%d%s", M, N, K, ta, tb,
                     packed ? "_packed_b" : "");
            CHECK(name, memcmp(C1, C2, sizeof(float) * M * N) == 0, "results differ");
            free(A); free(B); free(bias); free(C1); free(C2); free(Bp);
        }
}

#ifndef TFM_USE_OPENBLAS
/* The AVX-512 12x32, 8x32 and 6x32 tiles do per element what the AVX2 6x16 kernel does: both paths give the
 * same bits. M = 78 = 72 + 6 and 13, 37, 64 leave 6, 1, 1 and 4 rows under the 12-row tiles (the 6x32
 * kernel), M = 128 and 19 leave 8 and 7 (the 8x32 kernel), M = 33 leaves 9 (a 12-row tile, 9 stored). */
static void isa_equal_suite(void) {
    if (!tfm_isa_supported(TFM_ISA_AVX512)) {
        printf("NOTRUN gemm_avx512_equals_avx2: this CPU lacks AVX-512F (not tested here)\n");
        return;
    }
    static const int shapes[][3] = {{768, 128, 128}, {300, 257, 520}, {13, 64, 7}, {64, 64, 32}, {37, 100, 300},
                                    {78, 96, 40}, {128, 128, 384}, {19, 64, 33}, {33, 48, 16}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int tr = 0; tr < 4; tr++) {
            int ta = tr & 1, tb = tr >> 1, M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
            float *A = rand_buf((size_t)M * K), *B = rand_buf((size_t)K * N);
            float *C1 = rand_buf((size_t)M * N), *C2 = malloc(sizeof(float) * M * N);
            memcpy(C2, C1, sizeof(float) * M * N);
            tfm_gemm_isa_(TFM_ISA_AVX2, ta, tb, M, N, K, 1.5f, A, ta ? M : K, B, tb ? K : N, 0.5f, C1, N);
            tfm_gemm_isa_(TFM_ISA_AVX512, ta, tb, M, N, K, 1.5f, A, ta ? M : K, B, tb ? K : N, 0.5f, C2, N);
            char name[96];
            snprintf(name, sizeof name, "gemm_avx512_equals_avx2_%dx%dx%d_ta%d_tb%d", M, N, K, ta, tb);
            CHECK(name, memcmp(C1, C2, sizeof(float) * M * N) == 0, "results differ");
            free(A); free(B); free(C1); free(C2);
        }
}

/* One row against a B held only packed (a decoding step's GEMV over the panels): the AVX-512 path (16-wide, in
 * chunks of 64 panels) gives the AVX2 path's bits, and both are x W^T within float rounding. Shapes: one depth
 * block, several (K > 256), a last group of fewer than 4 panels, more than one chunk (N > 1024), weights under and
 * over the 2 MiB from which the loops prefetch (1000 x 600 and 2100 x 600), beta 0 and 1. */
static void held_gemv_suite(void) {
    if (!tfm_gemm_packed_b_floats(1, 1)) return;   /* an OpenBLAS build packs nothing */
    static const int shapes[][2] = {{384, 128}, {80, 300}, {1000, 600}, {2100, 600}, {7, 33}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int b1 = 0; b1 < 2; b1++) {
            int N = shapes[s][0], K = shapes[s][1];
            float *x = rand_buf((size_t)K), *W = rand_buf((size_t)N * K), *y0 = rand_buf((size_t)N);
            float *Bp = aligned_alloc(64, (tfm_gemm_packed_b_floats(N, K) * sizeof(float) + 63) / 64 * 64);
            float *y[3];
            tfm_gemm_pack_b(1, N, K, W, K, Bp);
            double worst = 0;
            int same = 1;
            for (int isa = 0; isa < 3; isa++) {
                y[isa] = malloc(sizeof(float) * N);
                memcpy(y[isa], y0, sizeof(float) * N);
                if (!tfm_isa_supported((tfm_isa)isa)) continue;
                tfm_gemm_held_isa_(isa, 1, N, K, 1.5f, x, K, Bp, b1 ? 1.0f : 0.0f, y[isa], N);
                for (int n = 0; n < N; n++) {
                    double r = (b1 ? y0[n] : 0.0), a = b1 ? fabs(y0[n]) : 0.0;
                    for (int k = 0; k < K; k++) r += 1.5 * x[k] * W[(size_t)n * K + k], a += fabs(1.5 * x[k] * W[(size_t)n * K + k]);
                    worst = fmax(worst, fabs(y[isa][n] - r) / (a + 1e-30));
                }
            }
            if (tfm_isa_supported(TFM_ISA_AVX512))
                same = !memcmp(y[TFM_ISA_AVX2], y[TFM_ISA_AVX512], sizeof(float) * N);
            char name[96];
            snprintf(name, sizeof name, "gemm_held_gemv_avx512_equals_avx2_1x%dx%d_beta%d", N, K, b1);
            CHECK(name, same, "the AVX-512 and AVX2 GEMVs differ");
            snprintf(name, sizeof name, "gemm_held_gemv_within_rounding_1x%dx%d_beta%d", N, K, b1);
            CHECK(name, worst < 1e-5, "worst error relative to sum |terms| %g", worst);
            for (int isa = 0; isa < 3; isa++) free(y[isa]);
            free(x), free(W), free(y0), free(Bp);
        }
}

/* The AVX2 path reads op(A) in place (no packing), row-major or transposed, wherever the tile is a full 6 rows and the
 * column range has no narrow edge tile; it must give the bits of the packed path. Shapes: ragged last
 * panels (M % 6), N with and without narrow edges (N % 16 in 1..8 packs, 9..15 and 0 read in place), K
 * split into KC blocks (K > 256), lda > K, beta 0 / 1 / other, 1 and 2 threads. */
static void direct_a_suite(void) {
    if (!tfm_isa_supported(TFM_ISA_AVX2)) {
        printf("NOTRUN gemm_direct_a_equals_packed: this CPU lacks AVX2+FMA (not tested here)\n");
        return;
    }
    static const int shapes[][3] = {{768, 128, 128}, {384, 384, 128}, {13, 57, 7}, {37, 45, 300},
                                    {300, 100, 520}, {64, 64, 32}, {6, 16, 1}, {385, 128, 512},
                                    {32, 64, 40}, {35, 48, 24}, {2, 32, 16}, {8, 25, 9}};
    static const float betas[] = {0.0f, 1.0f, 0.5f};
    int max_t = omp_get_max_threads();
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int t = 0; t < 6; t++) {
            int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2], tb = t & 1, ta = t >= 3;
            int lda = (ta ? M : K) + (t % 3 == 2 ? 5 : 0);
            float *A = rand_buf((size_t)(ta ? K : M) * lda), *B = rand_buf((size_t)K * N);
            float *C1 = rand_buf((size_t)M * N), *C2 = malloc(sizeof(float) * M * N);
            float beta = betas[t % 3];
            memcpy(C2, C1, sizeof(float) * M * N);
            omp_set_num_threads(t % 3 == 1 ? 1 : (max_t > 1 ? max_t : 2));
            tfm_gemm_isa_(TFM_ISA_AVX2, ta, tb, M, N, K, 1.5f, A, lda, B, tb ? K : N, beta, C1, N);
            tfm_gemm_isa_(TFM_ISA_AVX2 | TFM_GEMM_PACK_A_, ta, tb, M, N, K, 1.5f, A, lda, B, tb ? K : N, beta, C2, N);
            omp_set_num_threads(max_t);
            char name[96];
            snprintf(name, sizeof name, "gemm_direct_a_equals_packed_%dx%dx%d_ta%d_tb%d_lda%d_beta%g", M, N, K, ta, tb,
                     lda, beta);
            CHECK(name, memcmp(C1, C2, sizeof(float) * M * N) == 0, "results differ");
            free(A); free(B); free(C1); free(C2);
        }
}
#endif

int main(void) {
    printf("# backend: %s, threads: %d\n", tfm_gemm_backend(), omp_get_max_threads());
    CHECK("gemm_backend_name",
          !strcmp(tfm_gemm_backend(), "avx2-fma") || !strcmp(tfm_gemm_backend(), "portable") ||
              !strcmp(tfm_gemm_backend(), "avx512") ||
              !strcmp(tfm_gemm_backend(), "openblas"),
          "unexpected backend %s", tfm_gemm_backend());
    int max_t = omp_get_max_threads();
    omp_set_num_threads(max_t > 1 ? max_t : 2);
    shape_suite("default");
    omp_set_num_threads(1);
    shape_suite("1thread");
    omp_set_num_threads(max_t);
    degenerate_suite();
    batched_suite();
    determinism_suite();
    bias_suite();
#ifndef TFM_USE_OPENBLAS
    /* every instruction-set path this CPU runs, called directly */
    for (int isa = 0; isa < TFM_ISA_COUNT; isa++) {
        if (!tfm_isa_supported((tfm_isa)isa)) {
            printf("NOTRUN gemm_isa_%s: this CPU does not support it (not tested here)\n", tfm_isa_str((tfm_isa)isa));
            continue;
        }
        g_isa = isa;
        shape_suite(tfm_isa_str((tfm_isa)isa));
        g_isa = -1;
    }
    isa_equal_suite();
    held_gemv_suite();
    direct_a_suite();
#endif
    CHECK_EXIT();
}
