/* Instruction-set paths: every vector-math body of every path this CPU runs against a double-precision
 * reference (all tail lengths), and TFM_ISA validation. Paths the CPU lacks print NOTRUN (not tested here; tests/run.sh reports them apart from skips). */
#include "check.h"
#include "ops/isa.h"
#include "ops/vmath.h"
#include "tfm/core.h"
#include "tfm/kernels.h"
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng = 0x2545f4914f6cdd1dull;
static float frand(float lo, float hi) {
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return lo + (hi - lo) * (float)((rng >> 40) & 0xffffff) / (float)0x1000000;
}

static double gelu_ref(double x) { return 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))); }
static double gelu_d_ref(double x) {
    double u = 0.7978845608028654 * (x + 0.044715 * x * x * x), t = tanh(u);
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * 0.7978845608028654 * (1.0 + 3.0 * 0.044715 * x * x);
}

/* worst |got - ref| / (|ref| + floor + slope * |x|) over n (GELU: 1 - 2/(e+1) is accurate to ~1e-7
 * absolute, times x) */
static double worst_x(const float *got, const double *ref, const float *x, double slope, size_t n, double floor) {
    double w = 0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)got[i] - ref[i]) / (fabs(ref[i]) + floor + slope * fabs((double)x[i]));
        if (!(e <= w)) w = e;
    }
    return w;
}
static double worst(const float *got, const double *ref, size_t n, double floor) {
    return worst_x(got, ref, got, 0.0, n, floor);
}

/* the dropout hash, written out here from its definition (splitmix64's finalizer, high 32 bits) */
static uint32_t tfm_drop_hash_ref(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return (uint32_t)((z ^ (z >> 31)) >> 32);
}

static void path_suite(tfm_isa isa) {
    const tfm_vmath_table *t = tfm_vmath_for(isa);
    const char *nm = tfm_isa_str(isa);
    enum { NMAX = 70 };
    float x[NMAX + 1], y[NMAX + 1], z[NMAX + 1], bias[NMAX];
    double ref[NMAX];
    double w_exp = 0, w_tanh = 0, w_sig = 0, w_gelu = 0, w_geld = 0, w_sum = 0, w_dot = 0, w_es = 0;
    int max_ok = 1, tail_ok = 1, bias_ok = 1, find_ok = 1, interval_ok = 1, index_ok = 1;
    for (size_t n = 0; n <= NMAX; n++) {
        for (size_t i = 0; i < n; i++) { x[i] = frand(-12.0f, 12.0f); z[i] = frand(-1.0f, 1.0f); }
        x[n] = y[n] = 777.0f; /* must stay untouched */
        t->exp(y, x, n);
        for (size_t i = 0; i < n; i++) ref[i] = exp((double)x[i]);
        double e = worst(y, ref, n, 1e-30); w_exp = e > w_exp ? e : w_exp;
        t->tanh(y, x, n);
        for (size_t i = 0; i < n; i++) ref[i] = tanh((double)x[i]);
        e = worst(y, ref, n, 1e-6); w_tanh = e > w_tanh ? e : w_tanh;
        t->sigmoid(y, x, n);
        for (size_t i = 0; i < n; i++) ref[i] = 1.0 / (1.0 + exp(-(double)x[i]));
        e = worst(y, ref, n, 1e-6); w_sig = e > w_sig ? e : w_sig;
        t->gelu(y, x, NULL, 0, n);
        for (size_t i = 0; i < n; i++) ref[i] = gelu_ref(x[i]);
        e = worst_x(y, ref, x, 1.0, n, 1e-5); w_gelu = e > w_gelu ? e : w_gelu;
        for (size_t i = 0; i < n; i++) y[i] = 1.0f;
        t->gelu_backward(y, z, x, n, 1);
        for (size_t i = 0; i < n; i++) ref[i] = 1.0 + z[i] * gelu_d_ref(x[i]);
        e = worst_x(y, ref, x, 1.0, n, 1e-5); w_geld = e > w_geld ? e : w_geld;
        tail_ok &= x[n] == 777.0f && y[n] == 777.0f;
        /* reductions */
        double s = 0, sa = 0, d = 0, da = 0, mx = -INFINITY;
        for (size_t i = 0; i < n; i++) {
            s += x[i]; sa += fabs(x[i]); d += (double)x[i] * z[i]; da += fabs((double)x[i] * z[i]);
            mx = x[i] > mx ? x[i] : mx;
        }
        {   /* the screen's interval step against doubles (ids 3, 10, ... banned), then index_ge exactly */
            float a[NMAX + 1], u[NMAX], v[NMAX], w[NMAX];
            double lo_ref = -INFINITY;
            for (size_t i = 0; i < n; i++) {
                a[i] = i % 7 == 3 ? -INFINITY : x[i];
                u[i] = frand(0, 3), v[i] = frand(0, 1e-2f), w[i] = frand(0, 2);
            }
            a[n] = 777.0f;
            float cw = 0.01f, cx = 5.0f, cr = 2e-6f, up_ref[NMAX];
            for (size_t i = 0; i < n; i++) {
                double B = (double)cw * u[i] + (double)cx * v[i] + (double)cr * (fabs(a[i]) + w[i]) + 1e-30;
                up_ref[i] = a[i] == -INFINITY ? -INFINITY : (float)(a[i] + B);
                if (a[i] != -INFINITY && a[i] - B > lo_ref) lo_ref = a[i] - B;
            }
            float lo = t->interval(a, u, v, w, cw, cx, cr, n);
            interval_ok &= fabs(lo - lo_ref) <= 1e-6 * (fabs(lo_ref) + 1) || (n == 0 && lo == -INFINITY) ||
                           (lo == -INFINITY && lo_ref == -INFINITY);
            for (size_t i = 0; i < n; i++)
                interval_ok &= up_ref[i] == -INFINITY ? a[i] == -INFINITY : fabs(a[i] - up_ref[i]) <= 1e-6 * (fabs(up_ref[i]) + 1);
            interval_ok &= a[n] == 777.0f;
            int idx[NMAX], want[NMAX];
            float thr = frand(-13.0f, 13.0f);
            size_t k = 0, got = t->index_ge(x, n, thr, idx);
            for (size_t i = 0; i < n; i++)
                if (x[i] >= thr) want[k++] = (int)i;
            index_ok &= got == k && !memcmp(idx, want, sizeof(int) * k);
        }
        for (int q = 0; q < 4; q++) {   /* find_gt: thresholds below, among and above the values */
            float thr = q == 3 ? 13.0f : frand(-13.0f, 13.0f);
            size_t first = n;
            for (size_t i = 0; i < n && first == n; i++)
                if (x[i] > thr) first = i;
            find_ok &= t->find_gt(x, n, thr) == first;
        }
        if (n) {
            max_ok &= t->max(x, n) == (float)mx;
            e = fabs(t->sum(x, n) - s) / sa; w_sum = e > w_sum ? e : w_sum;
            e = fabs(t->dot(x, z, n) - d) / (da + 1e-30); w_dot = e > w_dot ? e : w_dot;
            double es = 0;
            float sum = t->exp_sum(y, x, (float)mx, n);
            for (size_t i = 0; i < n; i++) { ref[i] = exp((double)(x[i] - (float)mx)); es += ref[i]; }
            e = worst(y, ref, n, 1e-30); w_es = e > w_es ? e : w_es;
            e = fabs(sum - es) / es / 10; w_es = e > w_es ? e : w_es; /* the sum: 10x looser */
        }
    }
    /* GELU with a bias over rows of C = 19 (a tail in every row): x gets x + bias in place */
    {
        const int C = 19, R = 3;
        float xb[3 * 19], x0[3 * 19], yb[3 * 19];
        for (int i = 0; i < C; i++) bias[i] = frand(-1, 1);
        for (int i = 0; i < R * C; i++) x0[i] = xb[i] = frand(-4, 4);
        t->gelu(yb, xb, bias, C, (size_t)R * C);
        for (int i = 0; i < R * C; i++) {
            float pre = x0[i] + bias[i % C];
            bias_ok &= xb[i] == pre && fabs(yb[i] - gelu_ref(pre)) <= 1e-6 * (fabs(gelu_ref(pre)) + fabsf(pre) + 1e-5);
        }
    }
    /* GELU saving its derivative (linear_gelu's forward): y and GELU' of x + bias, bit for bit what gelu and
     * gelu_backward (dy = 1) of the same path give; rows of 19 (tails) and 24, and one bias-free span */
    int save_d_ok = 1;
    for (int C = 19; C <= 24; C += 5) {
        const int R = 3;
        float xs[3 * 24], pre[3 * 24], ys[3 * 24 + 1], yr[3 * 24], dr[3 * 24], ones[3 * 24];
        for (int i = 0; i < C; i++) bias[i] = frand(-1, 1);
        for (int i = 0; i < R * C; i++) { xs[i] = frand(-6, 6); pre[i] = xs[i] + bias[i % C]; ones[i] = 1.0f; }
        ys[R * C] = 777.0f;
        t->gelu_save_d(ys, xs, bias, C, (size_t)R * C);
        t->gelu(yr, pre, NULL, 0, (size_t)R * C);
        t->gelu_backward(dr, ones, pre, (size_t)R * C, 0);
        save_d_ok &= !memcmp(ys, yr, sizeof(float) * R * C) && !memcmp(xs, dr, sizeof(float) * R * C) && ys[R * C] == 777.0f;
        for (int i = 0; i < R * C; i++) xs[i] = pre[i];
        t->gelu_save_d(ys, xs, NULL, 0, (size_t)R * C);
        save_d_ok &= !memcmp(ys, yr, sizeof(float) * R * C) && !memcmp(xs, dr, sizeof(float) * R * C);
    }
    /* dot_rows: every row's dot exactly as dot computes it (a decoding query's scores) */
    int dot_rows_ok = 1;
    {   /* 0..35 rows: the AVX2 path's blocks of 4, the AVX-512 path's blocks of 16 (its reduction of 16 sums at
         * once) and the rows after them; lengths with and without tails */
        enum { MAXR = 35, LD = 73 };
        float Y[MAXR * LD], sr[MAXR + 1];
        for (int i = 0; i < MAXR * LD; i++) Y[i] = frand(-2, 2);
        for (int rows = 0; rows <= MAXR; rows++)
            for (size_t n = 1; n <= 70; n += 23) {
                sr[rows] = 777.0f;
                t->dot_rows(sr, z, Y, LD, rows, n);
                for (int r = 0; r < rows; r++) dot_rows_ok &= sr[r] == t->dot(z, Y + r * LD, n);
                dot_rows_ok &= sr[rows] == 777.0f;
            }
    }
    /* drop_keep: the keep mask of consecutive keys, bit for bit the scalar hash; keys across 2^64 */
    int keep_ok = 1;
    {
        static const uint64_t keys[] = {0, 12345, 0xFFFFFFFFFFFFFFF0ull, 0x9E3779B97F4A7C15ull};
        static const uint32_t ths[] = {0, 429496729u, 2147483648u, 4294967295u};
        uint8_t kp[72];
        for (int a = 0; a < 4; a++)
            for (int q = 0; q < 4; q++)
                for (size_t n = 0; n <= 70; n += 7) {
                    memset(kp, 7, sizeof kp);
                    t->drop_keep(kp, keys[a], ths[q], n);
                    for (size_t i = 0; i < n; i++) keep_ok &= kp[i] == (tfm_drop_hash_ref(keys[a] + i) >= ths[q]);
                    keep_ok &= kp[n] == 7;
                }
    }
    char name[96];
#define REPORT(what, cond, ...) do { snprintf(name, sizeof name, "vmath_%s_%s", nm, what); CHECK(name, cond, __VA_ARGS__); } while (0)
    REPORT("exp", w_exp < 4e-7, "worst rel err %g", w_exp);
    REPORT("tanh", w_tanh < 4e-7, "worst rel err %g", w_tanh);
    REPORT("sigmoid", w_sig < 4e-7, "worst rel err %g", w_sig);
    REPORT("gelu", w_gelu < 1e-6, "worst rel err %g", w_gelu);
    REPORT("gelu_backward", w_geld < 2e-6, "worst rel err %g", w_geld);
    REPORT("gelu_bias_rows", bias_ok, "bias rows wrong");
    REPORT("gelu_save_d_equals_gelu_and_backward", save_d_ok, "y or GELU' differs from gelu / gelu_backward");
    REPORT("tails_untouched", tail_ok, "wrote past n");
    REPORT("max", max_ok, "wrong max");
    REPORT("find_gt", find_ok, "wrong first index above the threshold");
    REPORT("interval", interval_ok, "an upper end or the largest lower end off, a banned id changed, or wrote past n");
    REPORT("index_ge", index_ok, "wrong indices at or above the threshold");
    REPORT("sum", w_sum < 1e-6, "worst err/sum|x| %g", w_sum);
    REPORT("dot", w_dot < 1e-6, "worst err/sum|xz| %g", w_dot);
    REPORT("drop_keep_equals_hash", keep_ok, "a keep byte differs from the scalar hash, or wrote past n");
    REPORT("dot_rows_equal_dot", dot_rows_ok, "a row's dot differs from dot, or wrote past the rows");
    REPORT("exp_sum", w_es < 4e-7, "worst rel err %g", w_es);
}

/* name = fmt with the path's name; 0 (and a NOTRUN line) if this CPU cannot run the path */
static int path_check_named(char *name, size_t size, const char *fmt, tfm_isa isa) {
    snprintf(name, size, fmt, tfm_isa_str(isa));
    if (tfm_isa_supported(isa)) return 1;
    printf("NOTRUN %s: this CPU does not support it (not tested here)\n", name);
    return 0;
}

/* AdamW on every path against the portable body (same bits with gcc; clang may contract into FMAs) */
static void adamw_suite(void) {
    enum { N = 203 };
    float w0[N], g0[N], m0[N], v0[N];
    for (int i = 0; i < N; i++) {
        w0[i] = frand(-1, 1); g0[i] = frand(-0.1f, 0.1f); m0[i] = frand(-0.01f, 0.01f); v0[i] = frand(0, 1e-3f);
    }
    float rw[N], rg[N], rm[N], rv[N];
    const tfm_adamw_coef k = {0.9f, 0.95f, 1e-8f, 0.999f, 1e-3f, 0.3f, 0.7f, 1};
    memcpy(rw, w0, sizeof w0); memcpy(rg, g0, sizeof g0); memcpy(rm, m0, sizeof m0); memcpy(rv, v0, sizeof v0);
    tfm_vmath_for(TFM_ISA_GENERIC)->adamw(rw, rg, rm, rv, N, &k);
    /* the portable body against a direct evaluation of the formula */
    double worst_ref = 0;
    for (int i = 0; i < N; i++) {
        double gi = (double)g0[i] * 0.7, mi = 0.9 * m0[i] + 0.1 * gi, vi = 0.95 * v0[i] + 0.05 * gi * gi;
        double wi = w0[i] * 0.999 - 1e-3 * mi / (sqrt(vi) / 0.3 + 1e-8);
        double e = fabs(rw[i] - wi) / (fabs(wi) + 1e-6);
        worst_ref = e > worst_ref ? e : worst_ref;
    }
    CHECK("adamw_generic_formula", worst_ref < 1e-5, "worst rel err %g", worst_ref);
    for (int isa = 1; isa < TFM_ISA_COUNT; isa++) {
        char name[64];
        if (!path_check_named(name, sizeof name, "adamw_%s_matches_generic", (tfm_isa)isa)) continue;
        float w[N], g[N], m[N], v[N];
        memcpy(w, w0, sizeof w0); memcpy(g, g0, sizeof g0); memcpy(m, m0, sizeof m0); memcpy(v, v0, sizeof v0);
        tfm_vmath_for((tfm_isa)isa)->adamw(w, g, m, v, N, &k);
        int zeroed = 1;
        for (int i = 0; i < N; i++) zeroed &= g[i] == 0.0f;
        /* within 2 ulps of the values' sizes (|m| < 0.01: ulp 9.3e-10; v < 1e-3: ulp 1.2e-10; w < 1: 6e-8) */
        CHECK(name, zeroed && max_abs_diff(w, rw, N) <= 1.2e-7 && max_abs_diff(m, rm, N) <= 1.9e-9 &&
                        max_abs_diff(v, rv, N) <= 2.4e-10, "w diff %g, m diff %g, v diff %g, grads zeroed %d",
              max_abs_diff(w, rw, N), max_abs_diff(m, rm, N), max_abs_diff(v, rv, N), zeroed);
    }
}

/* Column sums (bias grads) on every path: a row-order float sum from out's old value, so every path and
 * block width must give exactly the sequential loop's bits; full 64-wide blocks and a ragged one. */
static void colsum_suite(void) {
    enum { R = 37, LD = 203 };
    static float m[R * LD], ref[LD];
    for (int i = 0; i < R * LD; i++) m[i] = frand(-1, 1);
    for (int c = 0; c < LD; c++) ref[c] = frand(-1, 1);
    float out0[LD];
    memcpy(out0, ref, sizeof ref);
    for (int r = 0; r < R; r++)
        for (int c = 0; c < LD; c++) ref[c] += m[r * LD + c];
    for (int isa = 0; isa < TFM_ISA_COUNT; isa++) {
        char name[64];
        if (!path_check_named(name, sizeof name, "colsum_%s_equals_row_order_sum", (tfm_isa)isa)) continue;
        float out[LD];
        memcpy(out, out0, sizeof out);
        for (int c0 = 0; c0 < LD; c0 += TFM_COLSUM_W)
            tfm_vmath_for((tfm_isa)isa)->colsum(m + c0, R, LD, LD - c0 < TFM_COLSUM_W ? LD - c0 : TFM_COLSUM_W, out + c0);
        CHECK(name, !memcmp(out, ref, sizeof out), "max diff %g", max_abs_diff(out, ref, LD));
    }
}

static void env_suite(void) {
    const char *old = getenv("TFM_ISA");
    char *saved = old ? strdup(old) : NULL;
    setenv("TFM_ISA", "sse9", 1);
    CHECK("isa_env_unknown_rejected", tfm_isa_check() < 0 && strstr(tfm_last_error(), "TFM_ISA=sse9"),
          "got '%s'", tfm_last_error());
    int ok = 1;
    for (int i = 0; i < TFM_ISA_COUNT; i++) {
        setenv("TFM_ISA", tfm_isa_str((tfm_isa)i), 1);
        int rc = tfm_isa_check();
        ok &= tfm_isa_supported((tfm_isa)i) ? rc == 0 : rc < 0 && strstr(tfm_last_error(), "TFM_ISA=") != NULL;
    }
    CHECK("isa_env_supported_accepted_others_rejected", ok, "last error '%s'", tfm_last_error());
    if (saved) setenv("TFM_ISA", saved, 1);
    else unsetenv("TFM_ISA");
    free(saved);
    const char *name = tfm_isa_name();
    CHECK("isa_active_is_supported", name && tfm_isa_supported(tfm_isa_active()) &&
                                         (!old || !*old || !strcmp(old, name)), "active %s, TFM_ISA=%s", name, old ? old : "(unset)");
    printf("# active path: %s\n", name);
}

int main(void) {
    for (int i = 0; i < TFM_ISA_COUNT; i++) {
        if (tfm_isa_supported((tfm_isa)i)) path_suite((tfm_isa)i);
        else printf("NOTRUN vmath_%s: this CPU does not support it (not tested here)\n", tfm_isa_str((tfm_isa)i));
    }
    adamw_suite();
    colsum_suite();
    env_suite();
    return check_failures ? 1 : 0;
}
