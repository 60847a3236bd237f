/* Vectorised float math for the elementwise hot loops (exp, tanh, GELU, row reductions).
 *
 * Each function has an AVX-512 body, an AVX2+FMA body and a portable body; the path is chosen once per
 * process (cpuid, or TFM_ISA; see ops/isa.h). Both use the same Cephes-style polynomials (expf:
 * ~1 ulp; tanhf: ~2 ulp), so results do not depend on libm (paths differ only by rounding: FMA, lane count). Within one process every element goes
 * through the same path whatever its position (the last partial vector is computed with its missing
 * lanes masked off), so results are independent of how callers split arrays across threads.
 *
 * None of these functions thread; callers split the work.
 */
#ifndef TFM_VMATH_H
#define TFM_VMATH_H
#include <stddef.h>
#include <stdint.h>

/* The Cephes-style constants every path's bodies share (vmath.c, kernels_avx512.c): exp's range
 * reduction (x = n ln2 + r, ln2 split in two parts) and degree-5 polynomial VM_P0..VM_P5, tanh's odd
 * polynomial VM_T0..VM_T4 below 0.625, and the GELU tanh approximation's sqrt(2/pi) and cubic coefficient. */
#define VM_EXP_HI 88.3762626647949f
#define VM_EXP_LO (-87.3365447504f)
#define VM_LOG2E 1.44269504088896341f
#define VM_LN2_HI 0.693359375f
#define VM_LN2_LO (-2.12194440e-4f)
#define VM_P0 1.9875691500E-4f
#define VM_P1 1.3981999507E-3f
#define VM_P2 8.3334519073E-3f
#define VM_P3 4.1665795894E-2f
#define VM_P4 1.6666665459E-1f
#define VM_P5 5.0000001201E-1f
#define VM_T0 (-5.70498872745E-3f)
#define VM_T1 2.06390887954E-2f
#define VM_T2 (-5.37397155531E-2f)
#define VM_T3 1.33314422036E-1f
#define VM_T4 (-3.33332819422E-1f)
#define VM_GELU_K 0.7978845608028654f
#define VM_GELU_C 0.044715f

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
/* y = GELU(v) and x = GELU'(v) in place, v = x (+ bias as in tfm_vgelu): the forward of a layer whose
 * backward then only multiplies by the saved derivative (the same bits as tfm_vgelu_backward from v). */
void tfm_vgelu_save_d(float *y, float *x, const float *bias, int C, size_t n);
/* dx[i] (+)= dy[i] * gelu'(x[i]); accumulate != 0 adds into dx. */
void tfm_vgelu_backward(float *dx, const float *dy, const float *x, size_t n, int accumulate);
/* y[i] = max(0, y[i] + bias[i % C]) in place (bias NULL: max(0, y[i])); n a multiple of C. */
void tfm_vbias_relu(float *y, const float *bias, int C, size_t n);
/* d[i] *= y[i] */
void tfm_vmul(float *d, const float *y, size_t n);
/* d[i] = y[i] > 0 ? d[i] : 0 (the ReLU backward from its output) */
void tfm_vrelu_mask(float *d, const float *y, size_t n);
/* out[c] += m[0][c] + m[1][c] + ... + m[rows-1][c] for c < w <= TFM_COLSUM_W, rows ld apart, added in row
 * order (every path gives the same bits) */
#define TFM_COLSUM_W 64
void tfm_vcolsum(const float *m, int rows, int ld, int w, float *out);
/* max of x[0..n) (n >= 1) */
float tfm_vmax(const float *x, size_t n);
/* sum of x, and sum of x*y (fixed lane order) */
float tfm_vsum(const float *x, size_t n);
float tfm_vdot(const float *x, const float *y, size_t n);
/* s[r] = tfm_vdot(x, Y + r * ldy, n) for r < rows (one call for many rows: a decoding query's scores) */
void tfm_vdot_rows(float *s, const float *x, const float *Y, size_t ldy, int rows, size_t n);
/* Dropout's keep mask: keep[i] = tfm_drop_hash(key + i) >= thresh (ops/op_impl.h), i < n */
void tfm_vdrop_keep(uint8_t *keep, uint64_t key, uint32_t thresh, size_t n);
/* the index of the first x[i] > thr, or n if there is none (a NaN is never > thr) */
size_t tfm_vfind_gt(const float *x, size_t n, float thr);
/* The interval step of greedy's int8 screen (src/decode/screen.c): with B_i = cw u[i] + cx v[i] + cr (|a[i]| + w[i])
 * + 1e-30, a[i] becomes its upper end a[i] + B_i, and the largest lower end max_i (a[i] - B_i) is returned (-inf for
 * n = 0). An a[i] of -inf (a banned id) stays -inf and has no lower end. Paths differ in rounding (FMA). */
float tfm_vinterval(float *a, const float *u, const float *v, const float *w, float cw, float cx, float cr, size_t n);
/* idx[0..k) = every i < n with x[i] >= t, ascending (a NaN never is); returns k */
size_t tfm_vindex_ge(const float *x, size_t n, float t, int *idx);
/* the index of the first maximum of x[0..n) (n >= 1; no NaN; 0 when every value is -inf): two vector passes,
 * the maximum and the first value not below it */
int tfm_vargmax_first(const float *x, int n);
/* One AdamW update (PyTorch order: decay, moments, update) of n elements:
 *   g' = g * grad_scale (g zeroed after reading if zero_grad); m = b1 m + (1-b1) g'; v = b2 v + (1-b2) g'^2;
 *   w = w * decay - step_size * m / (sqrt(v) / bc2_sqrt + eps).  The same bits on every path. */
typedef struct {
    float b1, b2, eps, decay, step_size, bc2_sqrt, grad_scale;
    int zero_grad;
} tfm_adamw_coef;
void tfm_vadamw(float *w, float *g, float *m, float *v, size_t n, const tfm_adamw_coef *k);

/* scalar helpers with the same polynomials */
float tfm_expf(float x);

/* The bodies of one instruction-set path (tests compare paths directly; see ops/isa.h). */
#include "ops/isa.h"
typedef struct {
    float (*exp_sum)(float *y, const float *x, float sub, size_t n);
    void (*exp)(float *y, const float *x, size_t n);
    void (*tanh)(float *y, const float *x, size_t n);
    void (*sigmoid)(float *y, const float *x, size_t n);
    void (*gelu)(float *y, float *x, const float *bias, int C, size_t n);
    void (*gelu_backward)(float *dx, const float *dy, const float *x, size_t n, int accumulate);
    float (*max)(const float *x, size_t n);
    float (*sum)(const float *x, size_t n);
    float (*dot)(const float *x, const float *y, size_t n);
    void (*adamw)(float *w, float *g, float *m, float *v, size_t n, const tfm_adamw_coef *k);
    size_t (*find_gt)(const float *x, size_t n, float thr);
    void (*colsum)(const float *m, int rows, int ld, int w, float *out);
    void (*gelu_save_d)(float *y, float *x, const float *bias, int C, size_t n);
    void (*dot_rows)(float *s, const float *x, const float *Y, size_t ldy, int rows, size_t n);
    void (*drop_keep)(uint8_t *keep, uint64_t key, uint32_t thresh, size_t n);
    float (*interval)(float *a, const float *u, const float *v, const float *w, float cw, float cx, float cr, size_t n);
    size_t (*index_ge)(const float *x, size_t n, float t, int *idx);
} tfm_vmath_table;
const tfm_vmath_table *tfm_vmath_for(tfm_isa isa);

#endif
