/* The fast paths of issue 5 against the exact ones:
 *   - vectorised exp/tanh/GELU vs libm;
 *   - fused linear+bias+GELU / +ReLU and AddNorm (LayerNorm(x + dropout(y))) vs the compositions they
 *     replace (values and grads; ReLU and AddNorm bit for bit, dropout bits included);
 *   - fused (flash-style) attention vs the exact path (scores, masked softmax, weights @ V, permutes):
 *     causal, per-batch and per-query valid lengths (including an empty row), both K/V layouts;
 *     values <= 1e-5, grads <= 1e-4 relative; and finite differences of the fused op itself;
 *   - GPT KV-cache decoding vs full recompute (logits <= 1e-5) for several steps;
 *   - no malloc after warm-up: arena chunk count constant from step 2 of GPT training. */
#include "check.h"
#include "ops/vmath.h"
#include "tfm/gpt.h"
#include "tfm/nn.h"
#include "tfm/train.h"
#include <stdlib.h>

static tfm_rng rng;
static int force_tiled;   /* the attention tests run each case with g->attention_tiled 0 and 1 */
static int force_recompute; /* ... and the materialised variant with g->attention_recompute 0, 1 and -1 */

static void fill(float *x, size_t n, float s) {
    for (size_t i = 0; i < n; i++) x[i] = s * tfm_rng_normal(&rng);
}

static void test_vmath(void) {
    enum { N = 20001 };
    float *x = malloc(N * sizeof(float)), *y = malloc(N * sizeof(float));
    for (int i = 0; i < N; i++) x[i] = -30.0f + 60.0f * i / (N - 1);
    tfm_vexp(y, x, N);
    double worst = 0;
    for (int i = 0; i < N; i++) {
        double r = fabs(y[i] - exp(x[i])) / exp(x[i]);
        if (r > worst) worst = r;
    }
    CHECK("vexp relative error <= 3e-7", worst <= 3e-7, "%g", worst);
    tfm_vtanh(y, x, N);
    worst = 0;
    for (int i = 0; i < N; i++) {
        double d = fabs(y[i] - tanh(x[i]));
        if (d > worst) worst = d;
    }
    CHECK("vtanh abs error <= 3e-7", worst <= 3e-7, "%g", worst);
    for (int i = 0; i < N; i++) x[i] = -0.6f + 1.2f * i / (N - 1);
    tfm_vtanh(y, x, N);
    worst = 0;
    for (int i = 0; i < N; i++)
        if (x[i] != 0) {
            double r = fabs(y[i] - tanh(x[i])) / fabs(tanh(x[i]));
            if (r > worst) worst = r;
        }
    CHECK("vtanh relative error near 0 <= 1e-6", worst <= 1e-6, "%g", worst);
    free(x);
    free(y);
}

/* ---------------------------------------------------------------- linear + gelu */
/* Fused ops against the compositions they replace, on a training graph (dropout active), the same
 * graph seed for both. x, y: (2,5,12); W (12,12), b (12); ln weight/bias (12). */
typedef enum { FUSE_LINEAR_GELU, FUSE_LINEAR_RELU, FUSE_ADD_LN, FUSE_ADD_LN_DROP } fuse_case;

static tfm_tensor *fused_or_composed(tfm_graph *g, fuse_case c, int fused, tfm_tensor **t) {
    tfm_tensor *x = t[0], *y = t[1], *W = t[2], *b = t[3], *w = t[4], *lb = t[5];
    switch (c) {
    case FUSE_LINEAR_GELU: return fused ? tfm_linear_gelu(g, x, W, b) : tfm_gelu(g, tfm_linear(g, x, W, b));
    case FUSE_LINEAR_RELU: return fused ? tfm_linear_relu(g, x, W, b) : tfm_relu(g, tfm_linear(g, x, W, b));
    default: {
        float p = c == FUSE_ADD_LN_DROP ? 0.3f : 0.0f;
        return fused ? tfm_add_layernorm(g, x, y, p, w, lb, 1e-5f)
                     : tfm_layernorm(g, tfm_add(g, tfm_dropout(g, y, p), x), w, lb, 1e-5f);
    }
    }
}

static void test_fused_equal(fuse_case c, const char *name, double tol_out, double tol_grad) {
    tfm_params p;
    tfm_params_init(&p);
    tfm_tensor *t[6] = {tfm_param(&p, "x", 3, (int[]){2, 5, 12}), tfm_param(&p, "y", 3, (int[]){2, 5, 12}),
                        tfm_param2(&p, "W", 12, 12), tfm_param1(&p, "b", 12), tfm_param1(&p, "w", 12),
                        tfm_param1(&p, "lb", 12)};
    tfm_params_alloc(&p);
    fill(p.data, p.total, 1.0f);
    float R[120];
    fill(R, 120, 1.0f);
    float out[2][120], *grad[2];
    tfm_graph g;
    for (int k = 0; k < 2; k++) {
        tfm_graph_init(&g, 5);
        g.training = 1;
        tfm_params_zero_grad(&p);
        tfm_tensor *y = fused_or_composed(&g, c, k, t);
        tfm_backward(&g, tfm_sum(&g, tfm_mul(&g, y, tfm_constant(&g, R, y->ndim, y->shape))));
        memcpy(out[k], y->data, sizeof out[k]);
        grad[k] = malloc(p.total * sizeof(float));
        memcpy(grad[k], p.grad, p.total * sizeof(float));
        tfm_graph_free(&g);
    }
    char what[96];
    snprintf(what, sizeof what, "%s forward == composition", name);
    CHECK(what, max_abs_diff(out[1], out[0], 120) <= tol_out, "%g", max_abs_diff(out[1], out[0], 120));
    snprintf(what, sizeof what, "%s grads == composition", name);
    CHECK(what, rel_err(grad[1], grad[0], p.total) <= tol_grad, "%g", rel_err(grad[1], grad[0], p.total));
    for (int k = 0; k < 2; k++) free(grad[k]);
    tfm_params_free(&p);
}

/* ---------------------------------------------------------------- attention */
typedef struct {
    const char *name;
    int B, Tq, Tk, H, d, self, kv_heads_first;
    tfm_mask mask;
    float dropout;   /* attention dropout, training mode */
} attn_case;

/* Multi-head attention through tfm_MultiHeadAttention with the fused path (mode 2) or the exact one (0). */
static void run_mha(const attn_case *c, int mode, float **out, float **grad, size_t *n_out, size_t *n_grad) {
    tfm_params p;
    tfm_params_init(&p);
    tfm_MultiHeadAttention m;
    int C = c->H * c->d;
    tfm_MultiHeadAttention_init(&m, &p, "a", C, C, C, c->H, c->d, c->d, C, 1, c->dropout);
    tfm_tensor *q = tfm_param(&p, "q", 3, (int[]){c->B, c->Tq, C});
    tfm_tensor *kv = tfm_param(&p, "kv", 3, (int[]){c->B, c->Tk, C});
    tfm_params_alloc(&p);
    tfm_rng saved = rng;
    fill(p.data, p.total, 0.5f);
    tfm_graph g;
    tfm_graph_init(&g, 1);
    g.training = c->dropout > 0;
    tfm_params_zero_grad(&p);
    g.exact_attention = !mode;
    g.attention_tiled = force_tiled;
    g.attention_recompute = force_recompute;
    tfm_tensor *y;
    if (c->self) y = tfm_MultiHeadAttention_forward(&g, &m, q, q, q, &c->mask);
    else if (c->kv_heads_first) {
        tfm_tensor *K, *V;
        tfm_MultiHeadAttention_project_kv(&g, &m, kv, kv, &K, &V);
        y = tfm_MultiHeadAttention_attend(&g, &m, q, K, V, &c->mask);
    } else y = tfm_MultiHeadAttention_forward(&g, &m, q, kv, kv, &c->mask);
    float *R = malloc(y->size * sizeof(float));
    fill(R, y->size, 1.0f);
    tfm_backward(&g, tfm_sum(&g, tfm_mul(&g, y, tfm_constant(&g, R, y->ndim, y->shape))));
    *n_out = y->size;
    *n_grad = p.total;
    *out = malloc(y->size * sizeof(float));
    memcpy(*out, y->data, y->size * sizeof(float));
    *grad = malloc(p.total * sizeof(float));
    memcpy(*grad, p.grad, p.total * sizeof(float));
    free(R);
    rng = saved;
    tfm_graph_free(&g);
    tfm_params_free(&p);
}

static void test_attention_equal(void) {
    static const int vl_batch[3] = {5, 0, 2}, vl_query[3 * 4] = {1, 2, 3, 4, 4, 4, 0, 1, 7, 7, 7, 7};
    attn_case cases[] = {
        {"causal self-attention", 2, 9, 9, 2, 8, 1, 0, {.causal = 1}, 0.0f},
        {"causal self-attention, T > tile", 1, 150, 150, 2, 32, 1, 0, {.causal = 1}, 0.0f},
        {"cross-attention, per-batch valid lens (one empty)", 3, 4, 7, 2, 4, 0, 0, {.valid_lens = vl_batch}, 0.0f},
        {"cross-attention, per-query valid lens", 3, 4, 7, 2, 4, 0, 0, {.valid_lens = vl_query, .per_query = 1}, 0.0f},
        {"head-major K/V, valid lens", 3, 4, 7, 2, 4, 0, 1, {.valid_lens = vl_batch}, 0.0f},
        {"head-major K/V, causal + valid lens", 3, 4, 7, 2, 32, 0, 1, {.causal = 1, .valid_lens = vl_batch}, 0.0f},
        {"self-attention, attention dropout 0.3 (same masks)", 2, 9, 9, 2, 8, 1, 0, {.causal = 1}, 0.3f},
        {"head-major K/V, valid lens, dropout 0.3", 3, 4, 7, 2, 4, 0, 1, {.valid_lens = vl_query, .per_query = 1}, 0.3f},
        /* the materialised variant's mask skipping: d a multiple of 8 (register blocks only) and not (a
         * scalar tail), T not a multiple of 3 or 8, extents that grow (causal) and that do not (per-query
         * lens with an empty row), Tq != Tk */
        {"causal self-attention, GPT-like (T 64, d 32)", 2, 64, 64, 4, 32, 1, 0, {.causal = 1}, 0.0f},
        {"causal self-attention, T 23, d 12, dropout 0.2", 2, 23, 23, 3, 12, 1, 0, {.causal = 1}, 0.2f},
        {"cross-attention, per-query valid lens, d 16", 3, 4, 7, 2, 16, 0, 0, {.valid_lens = vl_query, .per_query = 1}, 0.0f},
        {"cross-attention, per-batch valid lens, d 40", 3, 5, 7, 2, 40, 0, 0, {.valid_lens = vl_batch}, 0.0f},
        {"head-major K/V, causal Tq < Tk + valid lens, d 24", 3, 4, 7, 2, 24, 0, 1, {.causal = 1, .valid_lens = vl_batch}, 0.1f},
    };
    /* with grad tracked and Tk <= 128 the op materialises P (kept for the backward, or recomputed there)
     * unless forced tiled */
    static const char *variant[3] = {"materialised", "materialised, recomputed", "tiled"};
    for (size_t i = 0; i < 3 * sizeof cases / sizeof *cases; i++) {
        const attn_case *c = &cases[i / 3];
        int v = i % 3;
        float *o0, *o1, *g0, *g1;
        size_t no, ng;
        run_mha(c, 0, &o0, &g0, &no, &ng);
        force_tiled = v == 2;
        force_recompute = v == 1;
        run_mha(c, 1, &o1, &g1, &no, &ng);
        force_tiled = force_recompute = 0;
        char name[200];
        snprintf(name, sizeof name, "fused attention (%s) == exact (%s): values", variant[v], c->name);
        double scale = 1;
        for (size_t j = 0; j < no; j++) scale = fabs(o0[j]) > scale ? fabs(o0[j]) : scale;
        CHECK(name, max_abs_diff(o1, o0, no) <= 1e-5 * scale, "max diff %g (max |value| %g)", max_abs_diff(o1, o0, no),
              scale);
        snprintf(name, sizeof name, "fused attention (%s) == exact (%s): grads", variant[v], c->name);
        CHECK(name, rel_err(g1, g0, ng) <= 1e-4, "rel err %g", rel_err(g1, g0, ng));
        free(o0), free(o1), free(g0), free(g1);
    }
    /* the backward recomputes P with the forward's operations (the row's saved max and 1 / sum): the same
     * bits as keeping it */
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        float *o[2], *gr[2];
        size_t no, ng;
        for (int keep = 0; keep < 2; keep++) {
            force_recompute = keep ? -1 : 1;
            run_mha(&cases[i], 1, &o[keep], &gr[keep], &no, &ng);
        }
        force_recompute = 0;
        char name[200];
        snprintf(name, sizeof name, "fused attention, P recomputed == P kept, bit for bit (%s)", cases[i].name);
        CHECK(name, !memcmp(o[0], o[1], no * sizeof(float)) && !memcmp(gr[0], gr[1], ng * sizeof(float)),
              "values differ by %g, grads by %g", max_abs_diff(o[0], o[1], no), max_abs_diff(gr[0], gr[1], ng));
        for (int k = 0; k < 2; k++) free(o[k]), free(gr[k]);
    }
}

/* Central differences of loss = sum(attention(q,k,v) * R) w.r.t. q, k, v (double-checked in float). */
static void test_attention_fd_one(void) {
    int B = 2, T = 5, H = 2, d = 3, C = H * d;
    static const int vl[2] = {4, 2};
    tfm_mask mask = {.causal = 1, .valid_lens = vl};
    tfm_params p;
    tfm_params_init(&p);
    tfm_tensor *q = tfm_param(&p, "q", 3, (int[]){B, T, C}), *k = tfm_param(&p, "k", 3, (int[]){B, T, C});
    tfm_tensor *v = tfm_param(&p, "v", 3, (int[]){B, T, C});
    tfm_params_alloc(&p);
    fill(p.data, p.total, 1.0f);
    float R[2 * 5 * 6];
    fill(R, sizeof R / sizeof *R, 1.0f);
    tfm_graph g;
    tfm_graph_init(&g, 1);
    g.attention_tiled = force_tiled;
    tfm_params_zero_grad(&p);
    tfm_tensor *y = tfm_attention(&g, q, k, v, H, 0, &mask, 0.7f);
    tfm_backward(&g, tfm_sum(&g, tfm_mul(&g, y, tfm_constant(&g, R, 3, y->shape))));
    double num2 = 0, den2 = 0;
    const float h = 1e-2f;
    for (size_t i = 0; i < p.total; i++) {
        float x0 = p.data[i];
        double l[2];
        for (int s = 0; s < 2; s++) {
            p.data[i] = x0 + (s ? -h : h);
            tfm_graph_reset(&g);
            g.grad_enabled = 0;
            tfm_tensor *yy = tfm_attention(&g, q, k, v, H, 0, &mask, 0.7f);
            g.grad_enabled = 1;
            l[s] = 0;
            for (size_t j = 0; j < yy->size; j++) l[s] += (double)yy->data[j] * R[j];
        }
        p.data[i] = x0;
        double fd = (l[0] - l[1]) / (2 * h), an = p.grad[i];
        num2 += (fd - an) * (fd - an);
        den2 += an * an;
    }
    double err = sqrt(num2 / (den2 > 1e-24 ? den2 : 1e-24));
    char name[120];
    snprintf(name, sizeof name, "fused attention (%s) backward vs finite differences (causal + valid lens)",
             force_tiled ? "tiled" : "materialised");
    CHECK(name, err < 2e-2, "rel err %g", err);
    tfm_graph_free(&g);
    tfm_params_free(&p);
}

static void test_attention_fd(void) {
    for (int t = 0; t < 2; t++) {
        force_tiled = t;
        test_attention_fd_one();
    }
    force_tiled = 0;
}

/* ---------------------------------------------------------------- GPT */
static void gpt_make(tfm_gpt *m, int block) {
    tfm_gpt_config cfg = {13, block, 2, 2, 16, 0.0f, TFM_ATTN_CAUSAL, 0.0f};
    tfm_gpt_init(m, &cfg);
    tfm_gpt_init_weights(m, 5);
    for (size_t i = 0; i < m->params.total; i++) m->params.data[i] += 0.05f * tfm_rng_normal(&rng);
}

static void test_kv_cache(void) {
    tfm_gpt m;
    gpt_make(&m, 24);
    int ids[24];
    for (int i = 0; i < 24; i++) ids[i] = (int)(tfm_rng_u32(&rng) % 13);
    tfm_gpt_cache c;
    CHECK("gpt cache init", tfm_gpt_cache_init(&c, &m) == 0, "%s", tfm_last_error());
    tfm_graph g, gf;
    tfm_graph_init(&g, 0);
    tfm_graph_init(&gf, 0);
    g.grad_enabled = gf.grad_enabled = 0;
    double worst = 0;
    int fed = 0, steps[] = {5, 1, 1, 1, 3, 1, 1, 11}; /* prompt of 5, then tokens one by one, then chunks */
    for (size_t s = 0; s < sizeof steps / sizeof *steps; s++) {
        tfm_graph_reset(&g);
        tfm_graph_reset(&gf);
        tfm_tensor *lc = tfm_gpt_forward_cached(&g, &m, &c, ids + fed, steps[s]);
        fed += steps[s];
        tfm_tensor *lf = tfm_gpt_forward(&gf, &m, ids, 1, fed);
        double d = max_abs_diff(lc->data, lf->data + (size_t)(fed - steps[s]) * 13, (size_t)steps[s] * 13);
        if (d > worst) worst = d;
    }
    CHECK("gpt KV-cache logits == full recompute over 8 steps (<= 1e-5)", worst <= 1e-5 && fed == 24, "max diff %g",
          worst);
    /* the last fed token only (a prompt, a recomputed window): the same logits as that row of the full forward */
    double worst_last = 0;
    int feeds[] = {1, 7, 24};
    for (size_t s = 0; s < sizeof feeds / sizeof *feeds; s++) {
        c.len = 0;
        tfm_graph_reset(&g);
        tfm_graph_reset(&gf);
        tfm_tensor *lc = tfm_gpt_forward_cached_last(&g, &m, &c, ids, feeds[s]);
        tfm_tensor *lf = tfm_gpt_forward(&gf, &m, ids, 1, feeds[s]);
        double d = max_abs_diff(lc->data, lf->data + (size_t)(feeds[s] - 1) * 13, 13);
        if (lc->shape[1] != 1 || c.len != feeds[s]) d = 1;   /* one row, every key/value appended */
        if (d > worst_last) worst_last = d;
    }
    CHECK("gpt KV-cache last-token logits == the full forward's last row, cache filled (<= 1e-5)", worst_last <= 1e-5,
          "max diff %g", worst_last);
    /* and the keys/values it appended serve the next token as a full feed's would */
    tfm_graph_reset(&g);
    tfm_graph_reset(&gf);
    c.len = 0;
    tfm_gpt_forward_cached_last(&g, &m, &c, ids, 20);
    tfm_tensor *ln = tfm_gpt_forward_cached(&g, &m, &c, ids + 20, 1);
    tfm_tensor *lf = tfm_gpt_forward(&gf, &m, ids, 1, 21);
    double dn = max_abs_diff(ln->data, lf->data + (size_t)20 * 13, 13);
    CHECK("gpt KV cache after a last-token feed: the next token's logits == full forward (<= 1e-5)", dn <= 1e-5,
          "max diff %g", dn);
    tfm_gpt_cache_free(&c);
    tfm_graph_free(&g);
    tfm_graph_free(&gf);
    tfm_gpt_free(&m);
}

static void test_no_malloc_after_warmup(void) {
    tfm_gpt m;
    gpt_make(&m, 16);
    tfm_adamw opt;
    tfm_adamw_init(&opt, &m.params, 0.9f, 0.99f, 1e-8f, 0.1f);
    tfm_graph g;
    tfm_graph_init(&g, 3);
    g.training = 1;
    int x[4 * 16], y[4 * 16];
    size_t mallocs_step2 = 0;
    int cap2 = 0, ok = 1;
    for (int step = 1; step <= 6; step++) {
        for (int i = 0; i < 64; i++) x[i] = (int)(tfm_rng_u32(&rng) % 13), y[i] = (int)(tfm_rng_u32(&rng) % 13);
        tfm_graph_reset(&g);
        tfm_params_zero_grad(&m.params);
        tfm_tensor *loss = tfm_cross_entropy(&g, tfm_gpt_forward(&g, &m, x, 4, 16), y, -100, 0.0f);
        tfm_backward(&g, loss);
        tfm_clip_grad_norm(&m.params, 1.0f);
        tfm_adamw_step(&opt, &m.params, 1e-3f);
        if (step == 2) mallocs_step2 = g.arena.n_mallocs, cap2 = g.cap_nodes;
        if (step > 2 && (g.arena.n_mallocs != mallocs_step2 || g.cap_nodes != cap2)) ok = 0;
    }
    CHECK("gpt training: arena n_mallocs and tape capacity constant after step 2", ok, "n_mallocs %zu -> %zu",
          mallocs_step2, g.arena.n_mallocs);
    tfm_graph_free(&g);
    tfm_adamw_free(&opt);
    tfm_gpt_free(&m);
}

int main(void) {
    tfm_rng_seed(&rng, 42);
    test_vmath();
    test_fused_equal(FUSE_LINEAR_GELU, "linear_gelu", 1e-6, 1e-5);
    test_fused_equal(FUSE_LINEAR_RELU, "linear_relu", 0, 0);
    test_fused_equal(FUSE_ADD_LN, "add_layernorm", 0, 0);
    test_fused_equal(FUSE_ADD_LN_DROP, "add_layernorm with dropout", 0, 0);
    test_attention_equal();
    test_attention_fd();
    test_kv_cache();
    test_no_malloc_after_warmup();
    return check_failures ? 1 : 0;
}
