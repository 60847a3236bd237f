/* tfm kernels: raw float-array compute, no graph. The ops in ops.h call these; tests and benchmarks
 * call them directly. Forward/backward pairs take matching arguments (llm.c style).
 */
#ifndef TFM_KERNELS_H
#define TFM_KERNELS_H

#include "tfm/core.h"
#include "tfm/export.h"

#include <stddef.h>

/* The one GEMM entry point used everywhere:
 *   C = alpha * op(A) @ op(B) + beta * C
 * op(A) is (M,K): A is stored (M,K) with row stride lda, or (K,M) if trans_a.
 * op(B) is (K,N): B is stored (K,N) with row stride ldb, or (N,K) if trans_b.
 * C is (M,N) with row stride ldc. beta == 0 means C is overwritten (never read).
 * Threaded internally with OpenMP over output blocks. Deterministic for a fixed thread count. */
TFM_API void tfm_gemm(int trans_a, int trans_b, int M, int N, int K, float alpha,
              const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc);

/* A B that many GEMMs multiply (weights while decoding) packed once: tfm_gemm_pack_b writes op(B) (K,N)
 * into the tfm_gemm_packed_b_floats(N, K) floats of Bp in the layout tfm_gemm packs B to on every call,
 * and tfm_gemm_pb then skips that packing: the same bits as tfm_gemm with B (which it still reads where
 * M or N is 1: a GEMV). B may be NULL with Bp (a weight held only packed, !trans_a): then one row is a GEMV
 * over the panels and anything larger goes through the tiles. The OpenBLAS build has no packed layout: the
 * size is 0 and tfm_gemm_pb ignores Bp (nothing is held there). */
TFM_API size_t tfm_gemm_packed_b_floats(int N, int K);
TFM_API void tfm_gemm_pack_b(int trans_b, int N, int K, const float *B, int ldb, float *Bp);
TFM_API void tfm_gemm_pb(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A, int lda,
                 const float *B, int ldb, const float *Bp, float beta, float *C, int ldc);

/* C = alpha op(A) op(B) + bias, bias one value per column of C (a linear layer's forward); Bp as in
 * tfm_gemm_pb (or NULL). The same bits as copying bias into every row of C and calling tfm_gemm with
 * beta 1, without that separate pass over C. */
TFM_API void tfm_gemm_bias(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A, int lda,
                   const float *B, int ldb, const float *Bp, const float *bias, float *C, int ldc);

/* Batched: `batch` independent GEMMs; operand i starts at A + i*stride_a etc. (stride 0 = shared). */
TFM_API void tfm_gemm_batched(int batch, int trans_a, int trans_b, int M, int N, int K, float alpha,
                      const float *A, int lda, size_t stride_a, const float *B, int ldb, size_t stride_b,
                      float beta, float *C, int ldc, size_t stride_c);

/* GEMM work sharing between the threads of a data-parallel region (the training loops' chunks): each
 * thread runs its own items (a chunk's forward and backward) with single-threaded kernels, and a thread
 * with nothing left helps the others finish their GEMMs instead of waiting for them at the barrier (the
 * chunks finish at different times: a thread the OS deschedules, another program on the machine).
 *   before the region:  tfm_gemm_desk_open(d, items)
 *   per item, in it:    tfm_gemm_share_begin(d, omp_get_thread_num()); ...the item...; tfm_gemm_share_end(d)
 *   after a thread's items: tfm_gemm_help(d, omp_get_thread_num())   (returns once every item is done)
 * Between begin and end, this thread's tfm_gemm calls (single-threaded, M >= 48 rows, >= 2^20
 * multiply-adds) pack op(B) once and post their C in row blocks that any thread of the desk may compute;
 * the results are the same bits whoever computes a block. The desk is set per thread (thread-local),
 * for the duration of an item only. A desk serves at most `slots` threads (numbered 0..slots-1). */
typedef struct tfm_gemm_desk tfm_gemm_desk;
TFM_API tfm_gemm_desk *tfm_gemm_desk_new(int slots);   /* NULL: out of memory */
TFM_API void tfm_gemm_desk_free(tfm_gemm_desk *d);
TFM_API void tfm_gemm_desk_open(tfm_gemm_desk *d, int items);
TFM_API void tfm_gemm_share_begin(tfm_gemm_desk *d, int slot);
TFM_API void tfm_gemm_share_end(tfm_gemm_desk *d);
TFM_API void tfm_gemm_help(tfm_gemm_desk *d, int slot);
TFM_API long tfm_gemm_desk_helped(const tfm_gemm_desk *d);   /* row blocks computed by helping threads so far */

/* GEMM with bfloat16 operands and fp32 sums (--precision bf16): C = alpha bf16(op(A)) bf16(op(B)) + beta C,
 * or + bias (one value per column; beta ignored) if bias is not NULL. Operands are rounded to bfloat16
 * (tfm_bf16_round), depth is taken in pairs, k+1 before k, each product added with one rounding: the
 * arithmetic of the AVX512_BF16 instruction VDPBF16PS, which runs it where cpuid reports AVX512_BF16 (and
 * the kernels' path is avx512); elsewhere a portable emulation gives the same bits (up to products or sums
 * below 2^-126, which the hardware flushes to zero). Threaded over row panels of C outside a parallel
 * region; the same bits for any thread count. src/ops/gemm_bf16.c */
TFM_API void tfm_gemm_bf16(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A, int lda,
                   const float *B, int ldb, const float *bias, float beta, float *C, int ldc);
/* x rounded to bfloat16 (nearest even; a denormal becomes a zero of its sign; NaN stays NaN), as a float */
TFM_API float tfm_bf16_round(float x);
/* 1 if tfm_gemm_bf16 runs on AVX512_BF16 hardware here, 0 if it runs the emulation */
TFM_API int tfm_bf16_hw(void);

/* The GEMM of int8 models (tfm quantize; W a tfm_q8_weight of N = W->rows rows of K = W->cols, core.h):
 * C (M,N) = A (M,K) W^T, A's rows (stride lda) quantized on the fly to 7 bits, one scale each (qa_i in [-63, 63],
 * sa_i = amax / 63: tfm_q8_quantize_row's rule with 63 levels), the products summed exactly in int32, then
 * scaled as
 *     C[i][j] = (float)acc_ij * (sa_i * sw_j)  (+ bias[j] if bias)      acc_ij = sum_k qa_ik qw_jk
 * in that order on every path (portable, AVX2 with vpmaddubsw, AVX-512 VNNI with vpdpbusd, chosen from
 * cpuid and TFM_ISA like the fp32 kernels): the same bits on each of them and for any thread count. 7 bits
 * because vpmaddubsw's int16 pairs cannot saturate on them (src/ops/gemm_q8.c). A row of A holding a NaN or
 * an infinity gives a row of NaN. Threaded with OpenMP over blocks of C. */
TFM_API void tfm_gemm_q8(int M, const float *A, int lda, const tfm_q8_weight *W, const float *bias, float *C, int ldc);
/* The int8 GEMM path in use: "avx512-vnni", "avx2" or "portable" (TFM_ISA=avx512 on an AVX-512 CPU without
 * VNNI: "avx2"). */
TFM_API const char *tfm_gemm_q8_backend(void);

/* Name of the GEMM path in use ("avx512", "avx2-fma", "portable", "openblas"). */
TFM_API const char *tfm_gemm_backend(void);

/* The instruction-set path of the kernels in use: "avx512", "avx2" or "generic". Chosen once per process
 * from cpuid; the environment variable TFM_ISA=avx512|avx2|generic forces one (if the CPU lacks it, the
 * first kernel call exits with a one-line error naming TFM_ISA; call tfm_isa_check first to get it as
 * an error instead). */
TFM_API const char *tfm_isa_name(void);
/* 0 if TFM_ISA is unset or names a path this CPU runs; else -1 with tfm_last_error() saying why. */
TFM_API int tfm_isa_check(void);

/* LayerNorm over rows of length C (biased variance). w, b may be NULL. mean/rstd: (rows). */
TFM_API void tfm_layernorm_forward(float *out, float *mean, float *rstd, const float *x, const float *w, const float *b,
                           int rows, int C, float eps);
/* Accumulates into dx, dw, db (each may be NULL). */
TFM_API void tfm_layernorm_backward(float *dx, float *dw, float *db, const float *dout, const float *x, const float *w,
                            const float *mean, const float *rstd, int rows, int C);

#include "tfm/ops.h"
/* Row softmax of x viewed as (rows/Tq, Tq, Tk) with an optional mask (see tfm_mask in ops.h). */
TFM_API void tfm_softmax_rows(float *y, const float *x, int rows, int Tq, int Tk, const tfm_mask *m);

#endif
