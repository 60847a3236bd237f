/* The int8 GEMM with 7-bit activations (src/ops/gemm_q8.c; private to the library): greedy's int8 screen of the
 * output layer runs it on decoding steps of 5 rows and more (src/decode/screen.c), where a step is bound by
 * arithmetic.
 *
 * It reads W's panels (tfm_q8_weight_panels_, core/q8.h: 16 rows x 4 k a group), as tfm_gemm_q8 does on AVX2 from
 * 5 rows up: one broadcast of an activation row's 4 bytes times two vectors of a panel gives 16 rows' partial sums
 * (vpmaddubsw, then vpmaddwd by ones). tfm_gemm_q8 keeps 8-bit activations exact with the sign trick,
 * |a| * (sign(a) w), a vpsignb per vector; here an activation goes in unsigned as q + 64 with q in [-63, 63] (7
 * bits, step amax / 63: tfm_q7_quantize_row, core/q8.h), so a pair sums at most 2 * 127 * 127 = 32258 < 32767 with
 * the 8-bit weights unchanged and nothing saturates; the shift comes back out exactly: acc - 64 * sum(w). On Zen 3:
 * about 2.5x fp32's multiply-adds per second against the sign trick's 1.7x (a 32 x 8000 x 256 step). */
#ifndef TFM_OPS_GEMM_Q8_PANELS_H
#define TFM_OPS_GEMM_Q8_PANELS_H
#include "ops/isa.h"
#include "tfm/core.h"
#include <stddef.h>

/* C (M, w->rows) = acc_ij * (sa_i * sw_j) (+ bias_j), acc_ij = sum_k q7(a_i)_k qw_jk exact in int32: the rows of
 * A (lda apart) quantized by tfm_q7_quantize_row; w's panels (tfm_q8_weight_panels_, core/q8.h) made at the first
 * call. Threads as tfm_gemm_q8; every path (portable, AVX2) and thread count gives the same bits. */
void tfm_gemm_q8_panels(int M, const float *A, int lda, const tfm_q8_weight *w, const float *bias, float *C, int ldc);
/* the same on a given (supported) path with nt threads (0: the default count), for tests */
void tfm_gemm_q8_panels_path_(tfm_q8_path path, int nt, int M, const float *A, int lda, const tfm_q8_weight *w,
                              const float *bias, float *C, int ldc);

#endif
