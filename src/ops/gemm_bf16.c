/* GEMM with bfloat16 operands and fp32 accumulation (--precision bf16): tfm_gemm_bf16 in tfm/kernels.h.
 *
 * The arithmetic is that of the AVX512_BF16 instruction VDPBF16PS, which every path reproduces bit for bit:
 *   - each operand is rounded to bfloat16 (the upper 16 bits of its float: round to nearest even; a
 *     denormal becomes a zero of its sign; a NaN stays a NaN), see tfm_bf16_round;
 *   - depth k is taken in pairs (k, k+1), an odd K padded with a zero; per pair and output element
 *     c = c + a(k+1) b(k+1), then c = c + a(k) b(k), each rounded once (fp32). A product of two bfloat16
 *     values is exact in fp32, so that is the same as an FMA, and the portable path needs no FMA unit;
 *   - depth is cut into blocks of at most TFM_BF16_KC (even) values; a block's sums start from zero and
 *     update C as the fp32 kernels do: C = alpha c (beta 0), fma(alpha, c, C) (beta 1, and every block
 *     after the first), fma(alpha, c, beta C) (other beta); a bias seeds C and counts as beta 1.
 * Measured on a Zen 5 (1.6 million random lanes): VDPBF16PS gives exactly these bits, k+1 before k.
 * Where the hardware rounds a denormal product or sum to zero (it flushes them) the emulation keeps it:
 * the two paths can differ only below 2^-126.
 *
 * Layout: C in 12 x 32 tiles. op(B) is packed per depth block into 32-wide panels of pairs (one 32-bit
 * word per column and pair: bfloat16 of k+1 in the high half, of k in the low half; floats in the
 * emulation), op(A) into 12-row panels (each row's pairs together); both zero padded, so every tile is
 * full and only C's stores are masked. Threads take row panels of C; each C element is computed by one
 * thread in a fixed order: the same bits for any thread count. */
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ops/isa.h"
#include "core/par.h"
#include "tfm/core.h"
#include "tfm/kernels.h"

#define BM 12   /* tile rows */
#define BN 32   /* tile columns */

typedef struct {
    int ta, tb, M, N, K;
    float alpha, beta;
    const float *A, *B, *bias;
    float *C;
    int lda, ldb, ldc;
} bf16_args;

/* ---------------------------------------------------------------- rounding */
static inline uint32_t f2u(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}
static inline float u2f(uint32_t u) {
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}
/* the bfloat16 bits of x (VCVTNEPS2BF16: nearest even, denormals to zero, NaN quiet) */
static inline uint32_t bf16_bits(float x) {
    uint32_t u = f2u(x);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (u >> 16) | 0x40u;   /* NaN */
    if ((u & 0x7f800000u) == 0) return (u >> 16) & 0x8000u;          /* zero, denormal */
    return (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
}
float tfm_bf16_round(float x) { return u2f(bf16_bits(x) << 16); }

/* ---------------------------------------------------------------- packing */
static inline float opA(const bf16_args *g, int i, int k) {
    return g->ta ? g->A[(size_t)k * g->lda + i] : g->A[(size_t)i * g->lda + k];
}
static inline float opB(const bf16_args *g, int k, int j) {
    return g->tb ? g->B[(size_t)j * g->ldb + k] : g->B[(size_t)k * g->ldb + j];
}

/* One pair word: bfloat16 of hi (depth k+1) in the high half, of lo (depth k) in the low half. */
static inline uint32_t pair_word(float lo, float hi) { return bf16_bits(hi) << 16 | bf16_bits(lo); }

/* op(A) rows [i0, i0+BM) x depth [pc, pc+kc) -> BM rows x kp = ceil(kc/2) pair words (rows past M and
 * the pad depth are zero). The emulation's floats are the words' two halves (lo, hi) widened. */
static void pack_a(const bf16_args *g, int hw, int i0, int pc, int kc, uint32_t *o) {
    const int kp = (kc + 1) / 2, mr = g->M - i0 < BM ? g->M - i0 : BM;
    if (hw && mr == BM) {   /* whole panels: the hardware conversion (the same bits) */
        const float *x = g->ta ? g->A + (size_t)pc * g->lda + i0 : g->A + (size_t)i0 * g->lda + pc;
        if (tfm_bf16_pack_avx512bf16(!g->ta, x, g->lda, BM, kc, o)) return;
    }
    for (int p = 0; p < kp; p++) {
        const int k = pc + 2 * p, has_hi = 2 * p + 1 < kc;
        for (int i = 0; i < BM; i++)
            o[(size_t)i * kp + p] = i < mr ? pair_word(opA(g, i0 + i, k), has_hi ? opA(g, i0 + i, k + 1) : 0.0f) : 0;
    }
}

/* op(B) depth [pc, pc+kc) x columns [j0, j0+BN) -> kp pairs x BN words */
static void pack_b(const bf16_args *g, int hw, int pc, int kc, int j0, uint32_t *o) {
    const int kp = (kc + 1) / 2, nr = g->N - j0 < BN ? g->N - j0 : BN;
    if (hw && nr == BN) {
        const float *x = g->tb ? g->B + (size_t)j0 * g->ldb + pc : g->B + (size_t)pc * g->ldb + j0;
        if (tfm_bf16_pack_avx512bf16(g->tb, x, g->ldb, BN, kc, o)) return;
    }
    for (int p = 0; p < kp; p++) {
        const int k = pc + 2 * p, has_hi = 2 * p + 1 < kc;
        uint32_t *row = o + (size_t)p * BN;
        for (int j = 0; j < nr; j++) row[j] = pair_word(opB(g, k, j0 + j), has_hi ? opB(g, k + 1, j0 + j) : 0.0f);
        for (int j = nr; j < BN; j++) row[j] = 0;
    }
}

/* ---------------------------------------------------------------- C update (as the fp32 kernels') */
static inline void update_c(float *c, float acc, float alpha, float beta) {
    if (beta == 0.0f) *c = alpha * acc;
    else if (beta == 1.0f) *c = fmaf(alpha, acc, *c);
    else *c = fmaf(alpha, acc, beta * *c);
}

/* ---------------------------------------------------------------- the emulation's tile */
/* acc[i][j] over kp pairs, k+1 first: plain multiplies and adds (the products are exact), vectorised over
 * the 32 columns on any path. */
#define EMU_TILE_BODY                                                                                  \
    for (int p = 0; p < kp; p++) {                                                                     \
        const uint32_t *b = bp + (size_t)p * BN, *a = ap + p;                                          \
        float b0[BN], b1[BN];                                                                          \
        for (int j = 0; j < BN; j++) {                                                                 \
            b0[j] = u2f(b[j] << 16);                                                                   \
            b1[j] = u2f(b[j] & 0xffff0000u);                                                           \
        }                                                                                              \
        for (int i = 0; i < BM; i++) {                                                                 \
            const uint32_t w = a[(size_t)i * kp];                                                      \
            const float a0 = u2f(w << 16), a1 = u2f(w & 0xffff0000u);                                  \
            for (int j = 0; j < BN; j++) {                                                             \
                float t = acc[i][j] + a1 * b1[j];                                                      \
                acc[i][j] = t + a0 * b0[j];                                                            \
            }                                                                                          \
        }                                                                                              \
    }
typedef void (*emu_tile_fn)(int kp, const uint32_t *ap, const uint32_t *bp, float acc[BM][BN]);
static void emu_tile_c(int kp, const uint32_t *ap, const uint32_t *bp, float acc[BM][BN]) { EMU_TILE_BODY }
#if TFM_X86
TFM_TARGET_AVX2 static void emu_tile_avx2(int kp, const uint32_t *ap, const uint32_t *bp, float acc[BM][BN]) {
    EMU_TILE_BODY
}
TFM_TARGET_AVX512 static void emu_tile_avx512(int kp, const uint32_t *ap, const uint32_t *bp, float acc[BM][BN]) {
    EMU_TILE_BODY
}
#endif

static void tile_emulated(tfm_isa isa, int kp, const uint32_t *ap, const uint32_t *bp, float *c, ptrdiff_t ldc,
                          int mr, int nr, float alpha, float beta) {
    float acc[BM][BN];
    memset(acc, 0, sizeof acc);
#if TFM_X86
    emu_tile_fn f = isa == TFM_ISA_AVX512 ? emu_tile_avx512 : isa == TFM_ISA_AVX2 ? emu_tile_avx2 : emu_tile_c;
#else
    emu_tile_fn f = emu_tile_c;
    (void)isa;
#endif
    f(kp, ap, bp, acc);
    for (int i = 0; i < mr; i++)
        for (int j = 0; j < nr; j++) update_c(c + (size_t)i * ldc + j, acc[i][j], alpha, beta);
}

/* ---------------------------------------------------------------- driver */
static size_t kc_of(int K) {   /* even depth blocks of at most TFM_BF16_KC, as equal as possible */
    int nb = (K + TFM_BF16_KC - 1) / TFM_BF16_KC, kc = (K + nb - 1) / nb;
    return (size_t)((kc + 1) & ~1);
}

/* the C rows [i0, i0+BM) x all columns, depth block [pc, pc+kc), B's panels of that block in bpk */
static void row_panel(const bf16_args *g, int hw, tfm_isa isa, int i0, int pc, int kc, const uint32_t *bpk,
                      uint32_t *apk, float beta) {
    const int kp = (kc + 1) / 2, mr = g->M - i0 < BM ? g->M - i0 : BM;
    pack_a(g, hw, i0, pc, kc, apk);
    for (int j0 = 0; j0 < g->N; j0 += BN) {
        const int nr = g->N - j0 < BN ? g->N - j0 : BN;
        const uint32_t *bp = bpk + (size_t)(j0 / BN) * kp * BN;
        float *c = g->C + (size_t)i0 * g->ldc + j0;
        if (hw) tfm_gemm_bf16_tile_avx512bf16(kp, apk, bp, c, g->ldc, mr, nr, g->alpha, beta);
        else tile_emulated(isa, kp, apk, bp, c, g->ldc, mr, nr, g->alpha, beta);
    }
}

static void gemm_bf16_run(const bf16_args *g, int hw, tfm_isa isa) {
    if (g->M <= 0 || g->N <= 0) return;
    if (g->K <= 0 || g->alpha == 0.0f) {   /* nothing to multiply: C = bias, or beta C, as tfm_gemm makes it */
        if (g->bias)
            tfm_gemm_bias(g->ta, g->tb, g->M, g->N, 0, g->alpha, g->A, g->lda, g->B, g->ldb, NULL, g->bias, g->C,
                          g->ldc);
        else tfm_gemm(g->ta, g->tb, g->M, g->N, 0, g->alpha, g->A, g->lda, g->B, g->ldb, g->beta, g->C, g->ldc);
        return;
    }
    if (g->bias)
        for (int i = 0; i < g->M; i++) memcpy(g->C + (size_t)i * g->ldc, g->bias, sizeof(float) * (size_t)g->N);
    const int kcb = (int)kc_of(g->K), kpb = (kcb + 1) / 2, npanels = (g->N + BN - 1) / BN;
    const int mpanels = (g->M + BM - 1) / BM;
    uint32_t *bpk = (uint32_t *)tfm_thread_scratch(TFM_SCRATCH_BF16_B, (size_t)npanels * kpb * BN);
    if (!bpk) abort();
    const int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
    for (int pc = 0; pc < g->K; pc += kcb) {
        const int kc = g->K - pc < kcb ? g->K - pc : kcb, kp = (kc + 1) / 2;
        const float beta = pc > 0 || g->bias ? 1.0f : g->beta;
        for (int q = 0; q < npanels; q++) pack_b(g, hw, pc, kc, q * BN, bpk + (size_t)q * kp * BN);
        TFM_PAR_FOR(threads > 1 && mpanels > 1, schedule(dynamic, 1) num_threads(threads),
        for (int r = 0; r < mpanels; r++) {
            uint32_t *apk = (uint32_t *)tfm_thread_scratch(TFM_SCRATCH_BF16_A, (size_t)kpb * BM);
            if (!apk) abort();
            row_panel(g, hw, isa, r * BM, pc, kc, bpk, apk, beta);
        });
    }
}

int tfm_bf16_hw(void) {
#if TFM_X86
    return tfm_isa_active() == TFM_ISA_AVX512 && tfm_avx512bf16_built_ && __builtin_cpu_supports("avx512bf16") &&
           __builtin_cpu_supports("avx512bw");
#else
    return 0;
#endif
}

void tfm_gemm_bf16_path_(int hw, int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A, int lda,
                         const float *B, int ldb, const float *bias, float beta, float *C, int ldc) {
    bf16_args g = {trans_a, trans_b, M, N, K, alpha, beta, A, B, bias, C, lda, ldb, ldc};
    gemm_bf16_run(&g, hw, tfm_isa_active());
}

void tfm_gemm_bf16(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A, int lda,
                   const float *B, int ldb, const float *bias, float beta, float *C, int ldc) {
    tfm_gemm_bf16_path_(tfm_bf16_hw(), trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, bias, beta, C, ldc);
}
