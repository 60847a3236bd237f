/* Greedy's output layer through an int8 screen (include/tfm/decode.h, tfm_logit_screen).
 *
 * Row r's logit is z_r = x . w_r + b_r (x the hidden state, d values). The screen computes
 * a_r = (x_q . w_qr) sa sw_r + b_r with tfm_gemm_q8 (x quantized symmetrically to 7 bits and w_r to 8, steps sa
 * and sw_r: |x_k - x_qk| <= ea = sa / 2, |w_rk - w_qrk| <= ew_r = sw_r / 2), so
 *
 *   |a_r - z_r| <= ea |w_r|_1 + ew_r |x_q|_1 + (float rounding of a_r),   |x_q|_1 <= |x|_1 + d ea,
 *
 * and the fp32 logit f_r the unscreened step computes is within d 2^-23 |x|_inf |w_r|_1 (+ rounding of the
 * bias add) of z_r. With B_r the sum of both bounds (doubled for margin), f_r lies in [a_r - B_r, a_r + B_r].
 * Let L = max_r (a_r - B_r): some row's f is >= L, and a row with a_r + B_r < L has f_r < L, so it is neither
 * the maximum nor tied with it. The rest (the candidates) get their fp32 logits from tfm_gemm_bias on the
 * single row, which is the unscreened one-row step's GEMV arithmetic (the same bits), and the first maximum
 * among them in id order is the first argmax of all V fp32 logits. */
#include "core/q8.h"
#include "ops/vmath.h"
#include "tfm/decode.h"
#include "tfm/kernels.h"
#include <math.h>
#include <stdlib.h>

/* Above this many candidates a row computes all V logits in fp32 instead (one GEMV beats many one-row calls). */
#define SCREEN_MAX_CANDIDATES(V) ((V) / 16 + 8)

struct tfm_logit_screen {
    const float *W, *b;      /* the model's layer: W (V, d), b (V) or NULL */
    int V, d;
    tfm_q8_weight q;         /* W in int8 */
    float *w_l1;             /* |w_r|_1 */
    float *w_err;            /* ew_r: half of row r's int8 step (its max |w| when the row is all below TFM_Q8_TINY) */
    float *b_abs;            /* |b_r| (zeros without a bias) */
};

void tfm_logit_screen_free(tfm_logit_screen *s) {
    if (!s) return;
    tfm_q8_weight_free_(&s->q);
    free(s->w_l1), free(s->w_err), free(s->b_abs);
    free(s);
}

static int quantize_rows(tfm_logit_screen *s) {
    int V = s->V, d = s->d;
    if (tfm_q8_weight_quantize_(&s->q, s->W, V, d, (size_t)d))   /* huge pages: read once a step */
        return tfm_prefix_error("the output layer's int8 screen: ");
    s->w_l1 = malloc(sizeof(float) * (size_t)V);
    s->w_err = malloc(sizeof(float) * (size_t)V);
    s->b_abs = malloc(sizeof(float) * (size_t)V);
    if (!s->w_l1 || !s->w_err || !s->b_abs)
        return tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory (the output layer's int8 screen: %d x %d)", V, d), -1;
    for (int r = 0; r < V; r++) {
        const float *w = s->W + (size_t)r * d;
        float sc = s->q.scale[r];
        if (isnan(sc)) return tfm_set_error("the output layer holds a non-finite value in row %d", r), -1;
        double l1 = 0.0;
        float amax = 0.0f;   /* finite: the quantizer returned a number */
        for (int k = 0; k < d; k++) {
            float a = fabsf(w[k]);
            l1 += a;
            amax = a > amax ? a : amax;
        }
        s->w_l1[r] = (float)(l1 * (1.0 + 1e-6));
        s->w_err[r] = sc > 0.0f ? sc * 0.5f : amax;
        s->b_abs[r] = s->b ? fabsf(s->b[r]) : 0.0f;
    }
    return 0;
}

/* the screen of an output layer W (V, d) with bias b (V) or NULL */
static tfm_logit_screen *screen_of_layer(const tfm_tensor *W, const tfm_tensor *b) {
    if (W->q8 || W->ndim != 2 || W->shape[1] > TFM_Q8_MAX_COLS || (b && (int)b->size != W->shape[0]))
        return tfm_set_error("the output layer is held in int8 or has an unexpected shape: no screen"), NULL;
    tfm_logit_screen *s = calloc(1, sizeof *s);
    if (!s) return tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory (the output layer's screen)"), NULL;
    s->W = W->data, s->b = b ? b->data : NULL, s->V = W->shape[0], s->d = W->shape[1];
    if (quantize_rows(s)) {
        tfm_logit_screen_free(s);
        return NULL;
    }
    return s;
}

tfm_logit_screen *tfm_logit_screen_new(const tfm_mt_net *m) {
    if (!m || !m->vt->decode_hidden || !m->vt->output_layer)
        return tfm_set_error("%s: no int8 screen of the output layer for this architecture", m ? m->vt->arch : "NULL"),
               NULL;
    const tfm_tensor *W, *b;
    m->vt->output_layer(m, &W, &b);
    return screen_of_layer(W, b);
}

tfm_logit_screen *tfm_logit_screen_new_gpt(const tfm_gpt *m) {
    if (!m) return tfm_set_error("no GPT to screen"), NULL;
    return screen_of_layer(m->wte.weight, NULL);
}

int tfm_logit_screen_of_gpt(const tfm_logit_screen *s, const tfm_gpt *m) {
    return s && m && !m->wte.weight->q8 && s->W == m->wte.weight->data && !s->b;
}

int tfm_logit_screen_of(const tfm_logit_screen *s, const tfm_mt_net *m) {
    if (!s || !m || !m->vt->output_layer) return 0;
    const tfm_tensor *W, *b;
    m->vt->output_layer(m, &W, &b);
    return W->data == s->W && (b ? b->data : NULL) == s->b && !W->q8;
}

size_t tfm_logit_screen_scratch(const tfm_logit_screen *s, int rows) { return (size_t)rows * s->V + (size_t)s->V; }

/* f_r as the unscreened one-row step computes it (tfm_linear -> tfm_gemm_bias / tfm_gemm with M = 1). */
static void fp32_logits(const tfm_logit_screen *s, const float *x, int r0, int n, float *out) {
    const float *W = s->W + (size_t)r0 * s->d;
    if (s->b) tfm_gemm_bias(0, 1, 1, n, s->d, 1.0f, x, s->d, W, s->d, NULL, s->b + r0, out, n);
    else tfm_gemm(0, 1, 1, n, s->d, 1.0f, x, s->d, W, s->d, 0.0f, out, n);
}

/* One row: a (V) the int8 logits (overwritten), made with activations of `levels` steps each side (tfm_gemm_q8's
 * 63), cand (V ints) scratch. Returns the best id; *fell_back = 1 when the row took all V fp32 logits instead. */
static int screen_row(const tfm_logit_screen *s, const float *x, double levels, float *a, const int *banned,
                      int n_banned, int *cand, int *fell_back) {
    const int V = s->V, d = s->d;
    double l1 = 0.0, amax = 0.0;
    for (int k = 0; k < d; k++) {   /* x is finite (checked by the caller): no libm fmax needed */
        double a = fabs(x[k]);
        l1 += a;
        amax = a > amax ? a : amax;
    }
    double ea = amax / levels >= TFM_Q8_TINY ? amax / (2 * levels) : amax;   /* the activation's half step */
    /* B_r = 2 (cw |w_r|_1 + cx ew_r + 1e-6 (|a_r| + |b_r|)): the factor 2 also covers this float arithmetic */
    const float cw = (float)(2.0 * (ea + d * 0x1p-23 * amax)), cx = (float)(2.0 * (l1 + d * ea)), cr = 2e-6f;
    for (int i = 0; i < n_banned; i++) a[banned[i]] = -INFINITY;
    /* a[r] becomes the upper bound a_r + B_r; L the best lower bound */
    float L = tfm_vinterval(a, s->w_l1, s->w_err, s->b_abs, cw, cx, cr, (size_t)V);
    int n = (int)tfm_vindex_ge(a, (size_t)V, L, cand);   /* never a banned one: -inf < L */
    if (n == 0) return 0;   /* every id banned: the full loop's answer */
    if (n > SCREEN_MAX_CANDIDATES(V)) {
        *fell_back = 1;
        fp32_logits(s, x, 0, V, a);
        for (int i = 0; i < n_banned; i++) a[banned[i]] = -INFINITY;
        return tfm_vargmax_first(a, V);
    }
    int best = cand[0];
    float fb;
    fp32_logits(s, x, best, 1, &fb);
    for (int i = 1; i < n; i++) {   /* in id order, a strictly larger one wins: the first maximum */
        float f;
        fp32_logits(s, x, cand[i], 1, &f);
        if (f > fb) best = cand[i], fb = f;
    }
    return best;
}

int tfm_logit_screen_argmax(const tfm_logit_screen *s, const float *h, int rows, const int *banned, int n_banned,
                            float *scratch, int *best) {
    const int V = s->V, d = s->d;
    for (int r = 0; r < rows; r++)
        if (!tfm_all_finite(h + (size_t)r * d, (size_t)d)) return -1;
    float *a = scratch;
    int *cand = (int *)(scratch + (size_t)rows * V);   /* V ints (tfm_logit_screen_scratch) */
    tfm_gemm_q8(rows, h, d, &s->q, s->b, a, V);
    int fell_back = 0;
    for (int r = 0; r < rows; r++) {
        int fb = 0;
        best[r] = screen_row(s, h + (size_t)r * d, TFM_Q8_ACT_LEVELS, a + (size_t)r * V, banned, n_banned, cand, &fb);
        fell_back += fb;
    }
    return fell_back;
}
