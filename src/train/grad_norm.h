/* The global grad norm's blocks (optim.c), shared with the chunks' gradient sum (step.c), which computes
 * them while each block of the summed gradient is still in cache. */
#ifndef TFM_TRAIN_GRAD_NORM_H
#define TFM_TRAIN_GRAD_NORM_H
#include <stddef.h>

/* Sum of squares in fixed blocks of TFM_NORM_BLOCK elements (partials in double, summed in block order):
 * the same bits for any thread count and whichever loop computes the blocks. */
#define TFM_NORM_BLOCK 16384 /* a multiple of 8 (the lanes of tfm_grad_sq_block) */
double tfm_grad_sq_block(const float *g, size_t i0, size_t i1);   /* i0 a multiple of 8 */
/* sqrt of the partials' sum in block order; part holds one partial per block */
float tfm_grad_norm_of_parts(const double *part, size_t nb);
/* n partials (stack for up to 1024, else malloc; NULL when out of memory), and their release */
double *tfm_grad_parts_get(double *stack, size_t n);
void tfm_grad_parts_put(double *stack, double *part);
#endif
