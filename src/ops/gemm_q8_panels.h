/* The int8 GEMM of many rows on AVX2 without VNNI (src/ops/gemm_q8.c; private to the library): greedy's int8
 * screen of the output layer runs it on decoding steps of more than a few rows (src/decode/screen.c).
 *
 * tfm_gemm_q8 multiplies with |a| * (sign(a) w), which keeps 8-bit activations exact but costs a vpsignb per
 * product and reads W row by row (made for a step of one row). Here W's rows are laid out in panels of 16 rows,
 * k in groups of 4 (the 64 bytes of group g of a panel: 8 rows x 4 k, then the next 8 rows x 4 k), so one
 * broadcast of an activation row's 4 bytes times two vectors of W gives 16 rows' partial sums (vpmaddubsw, then
 * vpmaddwd by ones): about twice fp32's multiply-adds per cycle on Zen 3 instead of 0.7x.
 *
 * vpmaddubsw takes its first operand unsigned, so an activation goes in as q + 64 with q in [-63, 63]: 7 bits,
 * step amax / 63 (tfm_q7_quantize_row, core/q8.h). A pair then sums at most 2 * 127 * 127 = 32258 < 32767 with the 8-bit
 * weights unchanged: nothing saturates. The shift comes back out exactly: acc - 64 * sum(w). */
#ifndef TFM_OPS_GEMM_Q8_PANELS_H
#define TFM_OPS_GEMM_Q8_PANELS_H
#include "ops/isa.h"
#include "tfm/core.h"
#include <stddef.h>

#define TFM_Q8_PANEL 16   /* rows of W a panel */
typedef struct {
    const tfm_q8_weight *w;   /* the int8 weight laid out (its scale and sum are read from it) */
    int groups;               /* k groups of 4: ceil(cols / 4) */
    int8_t *p;                /* ceil(rows / 16) panels of groups * 64 bytes; rows beyond w->rows zero */
    size_t bytes;
} tfm_q8_panels;

/* p = w's rows in panels; w must outlive p. 0, or -1 with a tfm error (out of memory). */
int tfm_q8_panels_make(tfm_q8_panels *p, const tfm_q8_weight *w);
void tfm_q8_panels_free(tfm_q8_panels *p);   /* and zero it; an empty one too */

/* C (M, w->rows) = acc_ij * (sa_i * sw_j) (+ bias_j), acc_ij = sum_k q7(a_i)_k qw_jk exact in int32: the rows of
 * A (lda apart) quantized by tfm_q7_quantize_row, W = p's weight. Threads as tfm_gemm_q8; every path (portable,
 * AVX2) and thread count gives the same bits. */
void tfm_gemm_q8_panels(int M, const float *A, int lda, const tfm_q8_panels *p, const float *bias, float *C, int ldc);
/* the same on a given (supported) path with nt threads (0: the default count), for tests */
void tfm_gemm_q8_panels_path_(tfm_q8_path path, int nt, int M, const float *A, int lda, const tfm_q8_panels *p,
                              const float *bias, float *C, int ldc);

#endif
