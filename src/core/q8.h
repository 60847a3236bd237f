/* int8 copies of fp32 rows (private to the library): the one place a tfm_q8_weight (include/tfm/core.h) is
 * built and freed, for a model's parameters held in int8 (q8.c: tfm_params_quantize, tfm_params_set_q8) and for
 * the greedy decoder's int8 screen of the output layer (src/decode/screen.c). */
#ifndef TFM_CORE_Q8_H
#define TFM_CORE_Q8_H
#include "tfm/core.h"
#include <stddef.h>

typedef struct tfm_q8_pool tfm_q8_pool;   /* a parameter set's int8 memory (q8.c) */

/* w = the (rows, cols) fp32 matrix x (row r at x + r * stride, stride >= cols) in int8: ld = cols rounded up
 * to TFM_Q8_ALIGN, row r quantized by tfm_q8_quantize_row into w->q + r * ld (the padding zero), its scale in
 * w->scale[r], the sum of its int8 values in w->sum[r]. q comes from tfm_weights_alloc_ (src/core/mem.h: huge
 * pages for a large matrix). A row holding a NaN or an infinity gets scale NaN (and zeros): a caller that refuses
 * those checks w->scale. 0, or -1 with a tfm error and w empty: rows or cols < 1, cols > TFM_Q8_MAX_COLS or
 * stride < cols (TFM_ERR_OTHER), too large for size_t or out of memory (TFM_ERR_NOMEM). */
int tfm_q8_weight_quantize_(tfm_q8_weight *w, const float *x, int rows, int cols, size_t stride);
/* Release w's buffers (those of an empty, zeroed w too, and its panels) and zero it. */
void tfm_q8_weight_free_(tfm_q8_weight *w);

/* w's rows laid out for the int8 GEMM of many rows (src/ops/gemm_q8.c): panels of TFM_Q8_PANEL rows, k in groups
 * of 4; group g of a panel is 64 bytes, its rows 0-7 x 4 bytes then rows 8-15 x 4 bytes (rows past w->rows and k
 * past cols zero). Made by the first call and kept in w->panels (threads may race to make it: one copy wins, the
 * others are freed, or left in the weight's pool); NULL when out of memory (the caller takes the row layout
 * instead). */
#define TFM_Q8_PANEL 16
#define TFM_Q8_PANEL_GROUP 64   /* bytes of a k group of a panel: 16 rows x 4 k */
static inline int tfm_q8_panel_groups(const tfm_q8_weight *w) { return (w->cols + 3) / 4; }   /* k groups a panel */
const int8_t *tfm_q8_weight_panels_(const tfm_q8_weight *w);
void tfm_q8_weight_free_panels_(tfm_q8_weight *w);   /* w->panels released (a weight not made here: tests) */

void tfm_params_free_q8_(tfm_params *p);   /* p's int8 copies and their table (tfm_params_free) */
/* tfm_params_set_q8 with `floats` 0: parameter i keeps no dequantized values (an inference loader, which then
 * calls tfm_params_drop_q8_floats) */
int tfm_params_set_q8_(tfm_params *p, int i, const int8_t *q, const float *scale, int floats);

/* row r of w dequantized into x (w->cols floats): scale[r] * q[r][c], the one definition of an int8 weight's values */
static inline void tfm_q8_row_floats(const tfm_q8_weight *w, int r, float *x) {
    const int8_t *q = w->q + (size_t)r * w->ld;
    const float s = w->scale[r];
    for (int c = 0; c < w->cols; c++) x[c] = s * (float)q[c];
}

/* 7 bits: tfm_q8_quantize_row's rules with TFM_Q8_ACT_LEVELS = 63 levels instead of 127 (scale amax / 63, q in
 * [-63, 63]): the activations of tfm_gemm_q8 (src/ops/gemm_q8.c), on which 8 bits would saturate vpmaddubsw. */
#define TFM_Q8_ACT_LEVELS 63
float tfm_q7_quantize_row(const float *x, int n, int8_t *q);

#endif
