/* Vectorised float math for the elementwise hot loops (exp, tanh, GELU, row reductions).
 *
 * Each function has an AVX2+FMA body (compiled with a target attribute, chosen at run time with
 * __builtin_cpu_supports) and a portable body. Both use the same Cephes-style polynomials (expf:
 * ~1 ulp; tanhf: ~2 ulp), so results do not depend on libm. Within one process every element goes
 * through the same path whatever its position (the last partial vector is computed on a padded
 * copy), so results are independent of how callers split arrays across threads.
 *
 * None of these functions thread; callers split the work.
 */
#ifndef TFM_VMATH_H
#define TFM_VMATH_H
#include <stddef.h>

/* y[i] = exp(x[i] - sub); returns sum of y (float, fixed lane order). y may alias x. */
float tfm_vexp_sum(float *y, const float *x, float sub, size_t n);
/* y[i] = exp(x[i]) */
void tfm_vexp(float *y, const float *x, size_t n);
/* y[i] = tanh(x[i]) */
void tfm_vtanh(float *y, const float *x, size_t n);
/* y[i] = 1 / (1 + exp(-x[i])) */
void tfm_vsigmoid(float *y, const float *x, size_t n);
/* GELU (tanh approximation). If bias is non-NULL, x is (rows of length C) and first gets x += bias
 * in place (x is then the pre-activation); n must be a multiple of C. bias NULL: C ignored. */
void tfm_vgelu(float *y, float *x, const float *bias, int C, size_t n);
/* dx[i] (+)= dy[i] * gelu'(x[i]); accumulate != 0 adds into dx. */
void tfm_vgelu_backward(float *dx, const float *dy, const float *x, size_t n, int accumulate);
/* y[i] = max(0, y[i] + bias[i % C]) in place (bias NULL: max(0, y[i])); n a multiple of C. */
void tfm_vbias_relu(float *y, const float *bias, int C, size_t n);
/* d[i] = y[i] > 0 ? d[i] : 0 (the ReLU backward from its output) */
void tfm_vrelu_mask(float *d, const float *y, size_t n);
/* max of x[0..n) (n >= 1) */
float tfm_vmax(const float *x, size_t n);
/* sum of x, and sum of x*y (fixed lane order) */
float tfm_vsum(const float *x, size_t n);
float tfm_vdot(const float *x, const float *y, size_t n);
/* scalar helpers with the same polynomials */
float tfm_expf(float x);

#endif
