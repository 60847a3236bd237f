/* Instruction-set paths of the kernels (internal). The path is chosen once per process from cpuid, or
 * forced with TFM_ISA=avx512|avx2|generic, and never changes afterwards (tfm_isa_active). Tests call a
 * given path's kernels directly through the *_isa entry points. */
#ifndef TFM_OPS_ISA_H
#define TFM_OPS_ISA_H
#include <stddef.h>
#include <stdint.h>

typedef enum { TFM_ISA_GENERIC = 0, TFM_ISA_AVX2 = 1, TFM_ISA_AVX512 = 2, TFM_ISA_COUNT = 3 } tfm_isa;

/* The path in use: TFM_ISA if set (the process exits with a one-line error naming TFM_ISA if the value
 * is unknown or the CPU lacks it; tfm_isa_check reports the same as an error instead), else the best
 * the CPU supports. Thread-safe; decided on the first call. */
tfm_isa tfm_isa_active_slow_(void);
extern int tfm_isa_cache_; /* -1 until chosen, then the tfm_isa value; written once (release) */
static inline tfm_isa tfm_isa_active(void) {
    int v = __atomic_load_n(&tfm_isa_cache_, __ATOMIC_ACQUIRE);
    return v >= 0 ? (tfm_isa)v : tfm_isa_active_slow_();
}
/* 1 if this CPU (and this build) can run the path. */
int tfm_isa_supported(tfm_isa isa);
/* "generic", "avx2", "avx512"; NULL for a bad value. */
const char *tfm_isa_str(tfm_isa isa);

/* Function attributes that compile one function for a path (plain C loops inside are vectorised for
 * it; gcc at -std=c11 does not contract a*b+c into FMAs, so such loops give the same bits on every path). */
#if defined(__x86_64__) || defined(__i386__)
#define TFM_X86 1
#define TFM_TARGET_AVX2 __attribute__((target("avx2,fma")))
#define TFM_TARGET_AVX512 __attribute__((target("avx512f,avx2,fma")))
#else
#define TFM_X86 0
#define TFM_TARGET_AVX2
#define TFM_TARGET_AVX512
#endif

/* ---- AVX512_BF16 kernel (src/ops/kernels_avx512bf16.c, compiled with -mavx512bf16; call only where
 * cpuid reports AVX512_BF16 and AVX512BW): one 12 x 32 tile of tfm_gemm_bf16 from kp pairs of packed A
 * (12 x kp words: row i's pairs at a + i * kp) and B (kp x 32 words), C(i,j) updated for i < mr, j < nr as
 * the fp32 kernels do. */
extern const int tfm_avx512bf16_built_;
void tfm_gemm_bf16_tile_avx512bf16(int kp, const uint32_t *a, const uint32_t *b, float *c, ptrdiff_t ldc, int mr,
                                   int nr, float alpha, float beta);
/* Pack kc depths of `width` (12: A, 32: B) rows or columns of a tfm_gemm_bf16 operand into pair words
 * with the hardware conversion: o[r * kp + p] (A: a row's pairs together) or o[p * 32 + r] (B). along = 1: line r is contiguous in depth (x + r * ld + k;
 * kc a multiple of 32); along = 0: depth k is a line, the width values contiguous (x + k * ld + r; kc
 * even). Returns 0 (nothing written) where kc does not qualify. */
int tfm_bf16_pack_avx512bf16(int along, const float *x, ptrdiff_t ld, int width, int kc, uint32_t *o);
/* Depth block of tfm_gemm_bf16 (even) */
#define TFM_BF16_KC 256
/* tfm_gemm_bf16 on the hardware (hw = 1, needs tfm_bf16_hw()) or the emulation (hw = 0): tests */
void tfm_gemm_bf16_path_(int hw, int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A, int lda,
                         const float *B, int ldb, const float *bias, float beta, float *C, int ldc);

/* tfm_gemm on a given path (tests; the path must be supported). isa | TFM_GEMM_PACK_A_ packs op(A) even
 * where the AVX2 path would read it in place (the tests check both give the same bits). */
#define TFM_GEMM_PACK_A_ 0x100
void tfm_gemm_isa_(int isa, int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A, int lda,
                   const float *B, int ldb, float beta, float *C, int ldc);
/* The same with B held only packed (Bp from tfm_gemm_pack_b, B NULL): one row is the GEMV over the panels. */
void tfm_gemm_held_isa_(int isa, int M, int N, int K, float alpha, const float *A, int lda, const float *Bp, float beta,
                        float *C, int ldc);

/* ---- int8 GEMM (src/ops/gemm_q8.c; tfm_gemm_q8 in kernels.h). Its paths: the portable C loops, AVX2 (vpmaddubsw)
 * and AVX-512 VNNI (vpdpbusd), all on the same unsigned activation bytes (7-bit q + 64) and signed weights. Every
 * path computes the exact integer products, so they all give the same bits. */
struct tfm_q8_weight;
typedef enum { TFM_Q8_GENERIC = 0, TFM_Q8_AVX2 = 1, TFM_Q8_VNNI = 2, TFM_Q8_PATHS = 3 } tfm_q8_path;
/* The path in use: VNNI where the kernel path is avx512 and cpuid reports AVX512BW and AVX512_VNNI, else AVX2
 * where the kernel path is avx2 or avx512, else portable. */
tfm_q8_path tfm_q8_active_path(void);
int tfm_q8_path_supported(tfm_q8_path path);   /* 1 if this CPU and build run it */
const char *tfm_q8_path_name(tfm_q8_path path); /* "portable", "avx2", "avx512-vnni" */
/* On a given (supported) path, for tests: an activation row as the kernels read it (tfm_q7_quantize_row's q + 64,
 * the bytes of [n, pad) 64 too; returns the scale); the raw int32 products acc[i * N + j] = sum_k u[i * lda + k]
 * w->q[j * w->ld + k] of M rows of unsigned bytes u in [0, 127] (lda a multiple of 64, rows 64-byte aligned, zero
 * beyond w->cols) and the N = w->rows weight rows; and the whole tfm_gemm_q8 with nt threads (0: the default). */
float tfm_q7_quantize_row_path_(tfm_q8_path path, const float *x, int n, int pad, int8_t *q);
void tfm_q8_dot_path_(tfm_q8_path path, int M, const int8_t *qa, int lda, const struct tfm_q8_weight *w, int32_t *acc);
void tfm_gemm_q8_path_(tfm_q8_path path, int nt, int M, const float *A, int lda, const struct tfm_q8_weight *W,
                       const float *bias, float *C, int ldc);
/* The VNNI tile (src/ops/kernels_q8_avx512.c, body in ops/q8_vnni_body.h): out[i * 4 + j] = sum_{k < kb}
 * u[i * lda + k] w[j * ldw + k] for i < mr (4), j < nr (1..4), u = a's bytes unsigned; kb a multiple of 64 (single
 * rows: gemm_q8.c's AVX2 row kernel). */
extern const int tfm_q8_vnni_built_;
void tfm_q8_tile_vnni(int mr, int nr, int kb, const int8_t *a, size_t lda, const int8_t *w, size_t ldw, int32_t *out);
/* The VNNI panel tile (the same files): out[16 i + c] = sum_{g < groups, t < 4} u[i * lda + 4 g + t] p[64 g + 4 c + t]
 * for 8 rows i of unsigned activation bytes u and the 16 rows c of one panel p (core/q8.h's layout). */
#define TFM_Q8_VNNI_PANEL_ROWS 8
void tfm_q8_panel_tile_vnni(int groups, const int8_t *a, size_t lda, const int8_t *p, int32_t *out);
/* The VNNI panel row (the same files): out[16 n + c] = sum_{g < groups, t < 4} u[4 g + t] p[n groups 64 + 64 g + 4 c +
 * t] for one row u and the np (1..4) consecutive panels at p. */
void tfm_q8_panel_row_vnni(int groups, int np, const int8_t *a, const int8_t *p, int32_t *out);

/* 1 if kernels_avx512.c was compiled with AVX-512 enabled (the Makefile's per-file flags). */
extern const int tfm_avx512_built_;

/* ---- AVX-512 kernels (src/ops/kernels_avx512.c, compiled with -mavx512f; call only when supported) */
/* GEMM micro-kernel on a 12 x 32 tile from two consecutive packed 6-row A panels (a, a + 6*kc; each
 * kc x 6, k-major) and two consecutive packed 16-wide B panels (b, b + 16*kc; each kc x 16):
 * C(i,j) = alpha * sum_k A(i,k) B(k,j) + beta * C(i,j) for i < mr (6 < mr <= 12), j < nr (16 < nr <= 32);
 * beta == 0: C is not read. Per element the same operations as the AVX2 6x16 kernel (one FMA chain over
 * k from zero, then the same update), so the tile shape never changes results. */
void tfm_gemm_kern12x32_avx512(int kc, const float *a, const float *b, float *c, ptrdiff_t ldc, int mr, int nr,
                               float alpha, float beta);
/* The same on a full 12 x 32 tile reading A in place (no packing): row-major (row i at a + i * lda) or,
 * _cols, transposed (depth k's 12 values at a + k * lda) */
void tfm_gemm_kern12x32_rows_avx512(int kc, const float *a, ptrdiff_t lda, const float *b, float *c, ptrdiff_t ldc,
                                    int nr, float alpha, float beta);
void tfm_gemm_kern12x32_cols_avx512(int kc, const float *a, ptrdiff_t lda, const float *b, float *c, ptrdiff_t ldc,
                                    int nr, float alpha, float beta);
/* The same on an 8 x 32 tile from the two A panels (rows 0-5 and 6-7: mr 7 or 8 left under the 12-row
 * tiles), and on a 6 x 32 tile from one A panel (mr <= 6). */
void tfm_gemm_kern8x32_avx512(int kc, const float *a, const float *b, float *c, ptrdiff_t ldc, int mr, int nr,
                              float alpha, float beta);
void tfm_gemm_kern6x32_avx512(int kc, const float *a, const float *b, float *c, ptrdiff_t ldc, int mr, int nr,
                              float alpha, float beta);
float tfm_vexp_sum_avx512(float *y, const float *x, float sub, size_t n);
void tfm_vdrop_keep_avx512(uint8_t *keep, uint64_t key, uint32_t thresh, size_t n);
void tfm_vexp_avx512(float *y, const float *x, size_t n);
void tfm_vtanh_avx512(float *y, const float *x, size_t n);
void tfm_vsigmoid_avx512(float *y, const float *x, size_t n);
void tfm_vgelu_avx512(float *y, float *x, const float *bias, int C, size_t n);
void tfm_vgelu_save_d_avx512(float *y, float *x, const float *bias, int C, size_t n);
void tfm_vgelu_backward_avx512(float *dx, const float *dy, const float *x, size_t n, int acc);
float tfm_vmax_avx512(const float *x, size_t n);
float tfm_vsum_avx512(const float *x, size_t n);
float tfm_vdot_avx512(const float *x, const float *y, size_t n);
void tfm_vdot_rows_avx512(float *s, const float *x, const float *Y, size_t ldy, int rows, size_t n);

#endif
