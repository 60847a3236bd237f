/* tfm_gemm_bf16 (src/ops/gemm_bf16.c): the bfloat16 rounding, the emulation against a reference written
 * out from the definition (pairs, k+1 first, blocks of TFM_BF16_KC, the C update), and the AVX512_BF16
 * hardware against the emulation, bit for bit. */
#include "check.h"
#include "tfm/kernels.h"
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ops/isa.h"

static uint64_t rng = 0x2545F4914F6CDD1Dull;
static float frand(void) {
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return (float)((rng >> 40) & 0xffffff) / (float)0x800000 - 1.0f; /* [-1, 1) */
}
static float *rand_buf(size_t n) {
    float *p = malloc(sizeof(float) * (n ? n : 1));
    for (size_t i = 0; i < n; i++) p[i] = frand() * (i % 7 == 0 ? 37.0f : 1.0f);
    return p;
}
static uint32_t bits(float x) { uint32_t u; memcpy(&u, &x, 4); return u; }
static float from_bits(uint32_t u) { float x; memcpy(&x, &u, 4); return x; }

static void rounding_suite(void) {
    /* nearest even: 1 + 2^-8 is halfway between 1 and 1 + 2^-7 -> 1 (even); 1 + 3 * 2^-8 -> 1 + 2^-6 */
    CHECK("bf16_round_tie_to_even_down", tfm_bf16_round(1.0f + 0x1p-8f) == 1.0f, "got %a", tfm_bf16_round(1.0f + 0x1p-8f));
    CHECK("bf16_round_tie_to_even_up", tfm_bf16_round(1.0f + 3 * 0x1p-8f) == 1.0f + 0x1p-6f, "got %a",
          tfm_bf16_round(1.0f + 3 * 0x1p-8f));
    CHECK("bf16_round_above_half", tfm_bf16_round(1.0f + 0x1p-8f + 0x1p-20f) == 1.0f + 0x1p-7f, "got %a",
          tfm_bf16_round(1.0f + 0x1p-8f + 0x1p-20f));
    CHECK("bf16_round_exact", tfm_bf16_round(-3.5f) == -3.5f, "got %a", tfm_bf16_round(-3.5f));
    CHECK("bf16_round_overflow_to_inf", isinf(tfm_bf16_round(3.4028235e38f)), "got %a", tfm_bf16_round(3.4028235e38f));
    CHECK("bf16_round_inf", tfm_bf16_round(-INFINITY) == -INFINITY, "got %a", tfm_bf16_round(-INFINITY));
    CHECK("bf16_round_nan", isnan(tfm_bf16_round(NAN)) && isnan(tfm_bf16_round(from_bits(0x7f800001u))),
          "a NaN did not stay a NaN");
    CHECK("bf16_round_denormal_to_signed_zero",
          bits(tfm_bf16_round(from_bits(0x80000001u))) == 0x80000000u && bits(tfm_bf16_round(0x1p-130f)) == 0,
          "got %08x", bits(tfm_bf16_round(from_bits(0x80000001u))));
}

/* C = alpha bf16(op(A)) bf16(op(B)) + beta C (or + bias) from the definition, one element at a time */
static void reference(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
                      int ldb, const float *bias, float beta, float *C, int ldc) {
    int nb = (K + TFM_BF16_KC - 1) / TFM_BF16_KC, kcb = K > 0 ? (K + nb - 1) / nb : 0;
    kcb = (kcb + 1) & ~1;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            float *c = C + (size_t)i * ldc + j;
            if (bias) *c = bias[j];
            if (K == 0 && !bias) *c = beta == 0.0f ? 0.0f : beta * *c;
            for (int pc = 0; pc < K; pc += kcb) {
                int kc = K - pc < kcb ? K - pc : kcb;
                float acc = 0.0f;
                for (int k = pc; k < pc + kc; k += 2) {
                    float a0 = tfm_bf16_round(ta ? A[(size_t)k * lda + i] : A[(size_t)i * lda + k]);
                    float b0 = tfm_bf16_round(tb ? B[(size_t)j * ldb + k] : B[(size_t)k * ldb + j]);
                    float a1 = 0.0f, b1 = 0.0f;
                    if (k + 1 < pc + kc) {
                        a1 = tfm_bf16_round(ta ? A[(size_t)(k + 1) * lda + i] : A[(size_t)i * lda + k + 1]);
                        b1 = tfm_bf16_round(tb ? B[(size_t)j * ldb + k + 1] : B[(size_t)(k + 1) * ldb + j]);
                    }
                    acc = fmaf(a1, b1, acc);
                    acc = fmaf(a0, b0, acc);
                }
                float be = pc > 0 || bias ? 1.0f : beta;
                *c = be == 0.0f ? alpha * acc : be == 1.0f ? fmaf(alpha, acc, *c) : fmaf(alpha, acc, be * *c);
            }
        }
}

/* shapes with ragged tiles (M % 12, N % 32), odd K, K over one depth block, ldc > N */
static const int shapes[][3] = {{1, 1, 1}, {13, 33, 7}, {12, 32, 2}, {37, 70, 300}, {64, 128, 128}, {25, 17, 513}};

static void path_suite(int hw, const char *name) {
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int v = 0; v < 12; v++) {
            int ta = v & 1, tb = (v >> 1) & 1, kind = v >> 2;   /* kind 0: beta 0, 1: beta 1, 2: bias */
            int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2], ldc = N + 3;
            float beta = kind == 1 ? 1.0f : kind == 0 ? 0.0f : 0.5f, alpha = kind == 1 ? 0.75f : 1.0f;
            float *A = rand_buf((size_t)M * K), *B = rand_buf((size_t)K * N), *bias = rand_buf((size_t)N);
            float *C1 = rand_buf((size_t)M * ldc), *C2 = malloc(sizeof(float) * (size_t)M * ldc);
            memcpy(C2, C1, sizeof(float) * (size_t)M * ldc);
            const float *bb = kind == 2 ? bias : NULL;
            reference(ta, tb, M, N, K, alpha, A, ta ? M : K, B, tb ? K : N, bb, beta, C1, ldc);
            tfm_gemm_bf16_path_(hw, ta, tb, M, N, K, alpha, A, ta ? M : K, B, tb ? K : N, bb, beta, C2, ldc);
            char nm[128];
            snprintf(nm, sizeof nm, "gemm_bf16_%s_equals_definition_%dx%dx%d_ta%d_tb%d_%s", name, M, N, K, ta, tb,
                     kind == 2 ? "bias" : kind == 1 ? "beta1" : "beta0");
            CHECK(nm, memcmp(C1, C2, sizeof(float) * (size_t)M * ldc) == 0, "results differ (or ldc padding touched)");
            free(A); free(B); free(bias); free(C1); free(C2);
        }
}

/* the result is the same for 1 and 2 threads (row panels split between threads) */
static void threads_suite(void) {
    int M = 150, N = 96, K = 300;
    float *A = rand_buf((size_t)M * K), *B = rand_buf((size_t)K * N);
    float *C1 = malloc(sizeof(float) * M * N), *C2 = malloc(sizeof(float) * M * N);
    int t = omp_get_max_threads();
    omp_set_num_threads(1);
    tfm_gemm_bf16(0, 1, M, N, K, 1.0f, A, K, B, K, NULL, 0.0f, C1, N);
    omp_set_num_threads(2);
    tfm_gemm_bf16(0, 1, M, N, K, 1.0f, A, K, B, K, NULL, 0.0f, C2, N);
    omp_set_num_threads(t);
    CHECK("gemm_bf16_same_bits_1_and_2_threads", memcmp(C1, C2, sizeof(float) * M * N) == 0, "results differ");
    /* and close to the fp32 product: bfloat16 keeps 8 significant bits */
    float *C3 = malloc(sizeof(float) * M * N);
    tfm_gemm(0, 1, M, N, K, 1.0f, A, K, B, K, 0.0f, C3, N);
    double num = 0, den = 0;
    for (int i = 0; i < M * N; i++) num += (C1[i] - C3[i]) * (double)(C1[i] - C3[i]), den += C3[i] * (double)C3[i];
    CHECK("gemm_bf16_close_to_fp32", sqrt(num / den) < 1e-2, "relative error %g", sqrt(num / den));
    free(A); free(B); free(C1); free(C2); free(C3);
}

int main(void) {
    printf("# bf16 GEMM: %s\n", tfm_bf16_hw() ? "AVX512_BF16 hardware" : "emulation");
    rounding_suite();
    path_suite(0, "emulated");
    if (tfm_bf16_hw()) path_suite(1, "avx512bf16");
    else printf("NOTRUN gemm_bf16_avx512bf16: this CPU (or the kernel path in use) has no AVX512_BF16\n");
    threads_suite();
    CHECK_EXIT();
}
