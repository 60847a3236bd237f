/* Every op's backward against central finite differences.
 * For an op y = f(x1..xn) we take loss = sum(y * R) with a fixed random R, compute d loss / d xi by
 * tfm_backward and by (loss(x+h) - loss(x-h)) / 2h in float64-accumulated float32, and require the
 * relative error (norm of difference / norm) below 2e-2 (float32 forward, h = 1e-2). */
#include "check.h"
#include "tfm/core.h"
#include "tfm/ops.h"
#include <stdlib.h>

#define MAXIN 4
typedef tfm_tensor *(*build_fn)(tfm_graph *g, tfm_tensor **in);

static tfm_rng rng;

static tfm_tensor *leaf(tfm_params *p, const char *name, int ndim, const int *shape, float scale) {
    tfm_tensor *t = tfm_param(p, name, ndim, shape);
    (void)scale;
    return t;
}

/* loss = sum(f(in) * R) */
static double eval_loss(tfm_graph *g, build_fn f, tfm_tensor **in, const float *R, int backward) {
    tfm_graph_reset(g);
    tfm_tensor *y = f(g, in);
    double s = 0;
    for (size_t i = 0; i < y->size; i++) s += (double)y->data[i] * R[i];
    if (backward) {
        tfm_tensor *Rt = tfm_constant(g, (float *)R, y->ndim, y->shape);
        tfm_tensor *loss = tfm_sum(g, tfm_mul(g, y, Rt));
        tfm_backward(g, loss);
    }
    return s;
}

/* shapes: n inputs each with ndim/shape; scale of random init; training flag for dropout */
static void gradcheck(const char *name, build_fn f, int n, int ndims[], int shapes[][4], float init_scale) {
    tfm_params p;
    tfm_params_init(&p);
    tfm_tensor *in[MAXIN];
    char nm[32];
    for (int i = 0; i < n; i++) {
        snprintf(nm, sizeof nm, "in%d", i);
        in[i] = leaf(&p, nm, ndims[i], shapes[i], init_scale);
    }
    tfm_params_alloc(&p);
    for (size_t i = 0; i < p.total; i++) p.data[i] = init_scale * tfm_rng_normal(&rng);
    tfm_graph g;
    tfm_graph_init(&g, 7);
    /* output size: run once */
    tfm_tensor *y0 = f(&g, in);
    size_t ny = y0->size;
    float *R = malloc(ny * sizeof(float));
    for (size_t i = 0; i < ny; i++) R[i] = tfm_rng_normal(&rng);
    tfm_rng saved = g.rng;
    /* twice, with the arena filled with junk in between: the second backward's tensors sit where the
     * first one's were, so an op that adds to a grad it should assign (tfm_node.fresh) or leaves part of
     * it unwritten reads junk, not the zeros of new memory */
    eval_loss(&g, f, in, R, 1);
    tfm_graph_reset(&g);
    while (g.arena.used_total < g.arena.peak) {
        float *junk = tfm_arena_alloc(&g.arena, 64);
        for (int i = 0; i < 16; i++) junk[i] = 7.0f;
    }
    g.rng = saved;
    tfm_params_zero_grad(&p);
    eval_loss(&g, f, in, R, 1);
    double worst = 0;
    const float h = 1e-2f;
    for (int k = 0; k < n; k++) {
        double num2 = 0, den2 = 0;
        for (size_t i = 0; i < in[k]->size; i++) {
            float old = in[k]->data[i];
            in[k]->data[i] = old + h;
            g.rng = saved;
            double lp = eval_loss(&g, f, in, R, 0);
            in[k]->data[i] = old - h;
            g.rng = saved;
            double lm = eval_loss(&g, f, in, R, 0);
            in[k]->data[i] = old;
            double fd = (lp - lm) / (2 * h), an = in[k]->grad[i];
            num2 += (fd - an) * (fd - an);
            den2 += fd * fd;
        }
        double rel = sqrt(num2) / (sqrt(den2) > 1e-6 ? sqrt(den2) : 1e-6);
        if (rel > worst || rel != rel) worst = rel;
    }
    CHECK(name, worst < 2e-2, "relative gradient error %.3g", worst);
    free(R);
    tfm_graph_free(&g);
    tfm_params_free(&p);
}

/* ------------------------------------------------------------------ op builders */
static tfm_tensor *f_matmul_nn(tfm_graph *g, tfm_tensor **x) { return tfm_matmul(g, x[0], x[1], 0, 0); }
static tfm_tensor *f_matmul_nt(tfm_graph *g, tfm_tensor **x) { return tfm_matmul(g, x[0], x[1], 0, 1); }
static tfm_tensor *f_matmul_tn(tfm_graph *g, tfm_tensor **x) { return tfm_matmul(g, x[0], x[1], 1, 0); }
static tfm_tensor *f_matmul_tt(tfm_graph *g, tfm_tensor **x) { return tfm_matmul(g, x[0], x[1], 1, 1); }
static tfm_tensor *f_linear(tfm_graph *g, tfm_tensor **x) { return tfm_linear(g, x[0], x[1], x[2]); }
static tfm_tensor *f_linear_nb(tfm_graph *g, tfm_tensor **x) { return tfm_linear(g, x[0], x[1], NULL); }
static tfm_tensor *f_linear_relu(tfm_graph *g, tfm_tensor **x) { return tfm_linear_relu(g, x[0], x[1], x[2]); }
static tfm_tensor *f_linear_gelu(tfm_graph *g, tfm_tensor **x) { return tfm_linear_gelu(g, x[0], x[1], x[2]); }
static tfm_tensor *f_add_layernorm(tfm_graph *g, tfm_tensor **x) {
    return tfm_add_layernorm(g, x[0], x[1], 0.0f, x[2], x[3], 1e-5f);
}
static tfm_tensor *f_add_layernorm_drop(tfm_graph *g, tfm_tensor **x) {
    g->training = 1;
    tfm_tensor *y = tfm_add_layernorm(g, x[0], x[1], 0.3f, x[2], x[3], 1e-5f);
    g->training = 0;
    return y;
}
static const int rows_idx[4] = {5, 0, 3, 2};
static tfm_tensor *f_gather_rows(tfm_graph *g, tfm_tensor **x) { return tfm_gather_rows(g, x[0], rows_idx, 4); }
static tfm_tensor *f_scatter_rows(tfm_graph *g, tfm_tensor **x) {
    return tfm_scatter_rows(g, x[0], rows_idx, 3, (int[]){2, 3, 5});
}
static tfm_tensor *f_add(tfm_graph *g, tfm_tensor **x) { return tfm_add(g, x[0], x[1]); }
static tfm_tensor *f_sub(tfm_graph *g, tfm_tensor **x) { return tfm_sub(g, x[0], x[1]); }
static tfm_tensor *f_mul(tfm_graph *g, tfm_tensor **x) { return tfm_mul(g, x[0], x[1]); }
static tfm_tensor *f_scale(tfm_graph *g, tfm_tensor **x) { return tfm_add_scalar(g, tfm_scale(g, x[0], -1.7f), 0.3f); }
static tfm_tensor *f_gelu(tfm_graph *g, tfm_tensor **x) { return tfm_gelu(g, x[0]); }
static tfm_tensor *f_relu(tfm_graph *g, tfm_tensor **x) { return tfm_relu(g, x[0]); }
static tfm_tensor *f_tanh(tfm_graph *g, tfm_tensor **x) { return tfm_tanh(g, x[0]); }
static tfm_tensor *f_sigmoid(tfm_graph *g, tfm_tensor **x) { return tfm_sigmoid(g, x[0]); }
static tfm_tensor *f_silu(tfm_graph *g, tfm_tensor **x) { return tfm_silu(g, x[0]); }
static tfm_tensor *f_gelu_erf(tfm_graph *g, tfm_tensor **x) { return tfm_gelu_erf(g, x[0]); }
static tfm_tensor *f_exp(tfm_graph *g, tfm_tensor **x) { return tfm_exp(g, x[0]); }
static tfm_tensor *f_square(tfm_graph *g, tfm_tensor **x) { return tfm_square(g, x[0]); }
static tfm_tensor *f_mean(tfm_graph *g, tfm_tensor **x) { return tfm_mean(g, tfm_square(g, x[0])); }
static tfm_tensor *f_sum(tfm_graph *g, tfm_tensor **x) { return tfm_sum(g, tfm_tanh(g, x[0])); }
static tfm_tensor *f_layernorm(tfm_graph *g, tfm_tensor **x) { return tfm_layernorm(g, x[0], x[1], x[2], 1e-5f); }
static tfm_tensor *f_layernorm_plain(tfm_graph *g, tfm_tensor **x) { return tfm_layernorm(g, x[0], NULL, NULL, 1e-5f); }
static tfm_tensor *f_softmax(tfm_graph *g, tfm_tensor **x) { return tfm_softmax(g, x[0]); }
static tfm_tensor *f_softmax_causal(tfm_graph *g, tfm_tensor **x) {
    tfm_mask m = {.causal = 1, .n_heads = 2};
    return tfm_masked_softmax(g, x[0], &m);
}
static tfm_tensor *f_softmax_valid(tfm_graph *g, tfm_tensor **x) {
    static const int vl[2] = {2, 4};
    tfm_mask m = {.valid_lens = vl, .n_heads = 2};
    return tfm_masked_softmax(g, x[0], &m);
}
static tfm_tensor *f_softmax_valid_q(tfm_graph *g, tfm_tensor **x) {
    static const int vl[6] = {1, 2, 3, 4, 0, 2}; /* (B=2, Tq=3); a 0 row becomes uniform */
    tfm_mask m = {.valid_lens = vl, .per_query = 1, .n_heads = 1};
    return tfm_masked_softmax(g, x[0], &m);
}
static tfm_tensor *f_embedding(tfm_graph *g, tfm_tensor **x) {
    static const int ids[6] = {0, 3, 3, 1, 4, 0};
    return tfm_embedding(g, x[0], ids, 2, (int[]){2, 3});
}
static tfm_tensor *f_ce(tfm_graph *g, tfm_tensor **x) {
    static const int t[6] = {1, 4, -100, 0, 2, 4};
    return tfm_cross_entropy(g, x[0], t, -100, 0.0f);
}
static tfm_tensor *f_ce_ls(tfm_graph *g, tfm_tensor **x) {
    static const int t[6] = {1, 4, 0, 0, 2, 3};
    return tfm_cross_entropy(g, x[0], t, 0, 0.1f); /* ignore_index 0 = <pad> */
}
static tfm_tensor *f_sym_kl(tfm_graph *g, tfm_tensor **x) {
    static const int t[6] = {1, 4, 0, 0, 2, 3};
    return tfm_sym_kl(g, x[0], x[1], t, 0); /* rows 2, 3 ignored */
}
static tfm_tensor *f_sym_kl_wide(tfm_graph *g, tfm_tensor **x) {   /* V 600: two CE_CHUNK slices */
    static const int t[3] = {7, -1, 599};
    return tfm_sym_kl(g, tfm_scale(g, x[0], 3.0f), x[1], t, -1);
}
static tfm_tensor *f_permute(tfm_graph *g, tfm_tensor **x) { return tfm_permute(g, x[0], 0, 2, 1, 3); }
static tfm_tensor *f_permute2(tfm_graph *g, tfm_tensor **x) { return tfm_permute(g, x[0], 3, 1, 0, 2); }
static tfm_tensor *f_concat(tfm_graph *g, tfm_tensor **x) { return tfm_concat(g, x, 3, 1); }
static tfm_tensor *f_concat_last(tfm_graph *g, tfm_tensor **x) { return tfm_concat(g, x, 2, -1); }
static tfm_tensor *f_slice(tfm_graph *g, tfm_tensor **x) { return tfm_slice(g, x[0], 1, 1, 2); }
static tfm_tensor *f_reshape(tfm_graph *g, tfm_tensor **x) {
    return tfm_tanh(g, tfm_reshape2(g, tfm_scale(g, x[0], 2.0f), 4, 6));
}
/* Grads that the first writer assigns instead of adding to (tfm_node.fresh). h has several consumers:
 * the last in the forward (the first writer in the backward) is a linear, the others add to what it
 * assigned; a linear_gelu writes first through a reshape view; the adds and subs assign their inputs'
 * grads; x + x and x - x share one grad between their two inputs. */
static tfm_tensor *f_fresh_fanout(tfm_graph *g, tfm_tensor **x) {
    tfm_tensor *h = tfm_tanh(g, x[0]);
    tfm_tensor *a = tfm_add(g, h, tfm_scale(g, h, 0.5f));
    tfm_tensor *act = tfm_linear_gelu(g, h, x[1], NULL);
    tfm_tensor *y = tfm_add(g, tfm_linear(g, h, x[1], x[2]), act);
    return tfm_sub(g, y, a);
}
static tfm_tensor *f_fresh_view(tfm_graph *g, tfm_tensor **x) {
    tfm_tensor *h = tfm_tanh(g, x[0]);                                       /* (2,3,4) */
    tfm_tensor *s = tfm_reshape2(g, tfm_sigmoid(g, h), 6, 4);
    tfm_tensor *y = tfm_linear_gelu(g, tfm_reshape2(g, h, 6, 4), x[1], NULL); /* h's grad through the view */
    return tfm_add(g, y, s);
}
/* the fresh-grad (assigning) backward of layernorm, AddNorm (with dropout: dropped lanes assigned 0) and
 * cross-entropy (ignored rows assigned 0; narrow and vectorised vocabularies): inputs that are
 * intermediates, whose only consumer is that op */
static tfm_tensor *f_fresh_ln(tfm_graph *g, tfm_tensor **x) {
    return tfm_layernorm(g, tfm_tanh(g, x[0]), x[1], x[2], 1e-5f);
}
static tfm_tensor *f_fresh_add_ln_drop(tfm_graph *g, tfm_tensor **x) {
    g->training = 1;
    tfm_tensor *y = tfm_add_layernorm(g, tfm_tanh(g, x[0]), tfm_sigmoid(g, x[1]), 0.3f, x[2], x[3], 1e-5f);
    g->training = 0;
    return y;
}
static tfm_tensor *f_fresh_ce(tfm_graph *g, tfm_tensor **x) {
    static const int t[4] = {1, -100, 37, 0};
    return tfm_cross_entropy(g, tfm_scale(g, x[0], 2.0f), t, -100, 0.1f);
}
static tfm_tensor *f_fresh_ce_narrow(tfm_graph *g, tfm_tensor **x) {
    static const int t[6] = {1, 4, -100, 0, 2, 4};
    return tfm_cross_entropy(g, tfm_scale(g, x[0], 2.0f), t, -100, 0.0f);
}
static tfm_tensor *f_fresh_self(tfm_graph *g, tfm_tensor **x) {
    tfm_tensor *h = tfm_tanh(g, x[0]);
    return tfm_add(g, tfm_add(g, h, h), tfm_mul(g, tfm_sub(g, h, h), h));
}
static tfm_tensor *f_dropout(tfm_graph *g, tfm_tensor **x) {
    g->training = 1;
    tfm_tensor *y = tfm_dropout(g, x[0], 0.3f);
    g->training = 0;
    return y;
}

int main(void) {
    tfm_rng_seed(&rng, 1234);
    tfm_set_threads(2);
#define GC(name, fn, n, scale, ...)                                \
    do {                                                           \
        int shp[MAXIN][4] = __VA_ARGS__;                           \
        int nd[MAXIN];                                             \
        for (int i = 0; i < MAXIN; i++) {                          \
            nd[i] = 0;                                             \
            while (nd[i] < 4 && shp[i][nd[i]]) nd[i]++;            \
        }                                                          \
        gradcheck(name, fn, n, nd, shp, scale);                    \
    } while (0)
    GC("grad matmul (batched)", f_matmul_nn, 2, 1.0f, {{2, 3, 4}, {2, 4, 5}});
    GC("grad matmul b^T", f_matmul_nt, 2, 1.0f, {{2, 3, 4}, {2, 5, 4}});
    GC("grad matmul a^T", f_matmul_tn, 2, 1.0f, {{2, 4, 3}, {2, 4, 5}});
    GC("grad matmul a^T b^T", f_matmul_tt, 2, 1.0f, {{2, 4, 3}, {2, 5, 4}});
    GC("grad matmul shared 2-D b", f_matmul_nn, 2, 1.0f, {{2, 3, 4}, {4, 5}});
    GC("grad matmul shared 2-D b^T, a^T", f_matmul_tt, 2, 1.0f, {{2, 4, 3}, {5, 4}});
    GC("grad linear", f_linear, 3, 1.0f, {{2, 3, 4}, {5, 4}, {5}});
    GC("grad linear no bias", f_linear_nb, 2, 1.0f, {{3, 4}, {5, 4}});
    GC("grad add", f_add, 2, 1.0f, {{2, 3, 4}, {2, 3, 4}});
    GC("grad add broadcast", f_add, 2, 1.0f, {{2, 3, 4}, {3, 4}});
    GC("grad sub broadcast", f_sub, 2, 1.0f, {{2, 3, 4}, {4}});
    GC("grad mul", f_mul, 2, 1.0f, {{2, 3, 4}, {2, 3, 4}});
    GC("grad scale/add_scalar", f_scale, 1, 1.0f, {{3, 5}});
    GC("grad gelu", f_gelu, 1, 1.5f, {{4, 6}});
    GC("grad relu", f_relu, 1, 1.0f, {{4, 6}});
    GC("grad tanh", f_tanh, 1, 1.0f, {{4, 6}});
    GC("grad sigmoid", f_sigmoid, 1, 1.0f, {{4, 6}});
    GC("grad silu", f_silu, 1, 1.5f, {{4, 6}});
    GC("grad gelu_erf", f_gelu_erf, 1, 1.5f, {{4, 6}});
    GC("grad exp", f_exp, 1, 0.5f, {{4, 6}});
    GC("grad square", f_square, 1, 1.0f, {{4, 6}});
    GC("grad mean", f_mean, 1, 1.0f, {{4, 6}});
    GC("grad sum", f_sum, 1, 1.0f, {{4, 6}});
    GC("grad layernorm", f_layernorm, 3, 1.0f, {{2, 3, 8}, {8}, {8}});
    GC("grad layernorm no affine", f_layernorm_plain, 1, 1.0f, {{3, 8}});
    GC("grad softmax", f_softmax, 1, 1.0f, {{3, 5}});
    GC("grad masked softmax causal", f_softmax_causal, 1, 1.0f, {{2, 2, 3, 4}});
    GC("grad masked softmax valid_lens", f_softmax_valid, 1, 1.0f, {{2, 2, 3, 4}});
    GC("grad masked softmax per-query lens", f_softmax_valid_q, 1, 1.0f, {{2, 3, 4}});
    GC("grad embedding", f_embedding, 1, 1.0f, {{5, 3}});
    GC("grad cross-entropy ignore_index", f_ce, 1, 1.0f, {{6, 5}});
    GC("grad cross-entropy label smoothing", f_ce_ls, 1, 1.0f, {{6, 5}});
    GC("grad sym_kl (R-Drop) ignore_index", f_sym_kl, 2, 1.0f, {{6, 5}, {6, 5}});
    GC("grad sym_kl (R-Drop) wide rows", f_sym_kl_wide, 2, 1.0f, {{3, 600}, {3, 600}});
    GC("grad permute (0,2,1,3)", f_permute, 1, 1.0f, {{2, 3, 4, 5}});
    GC("grad permute (3,1,0,2)", f_permute2, 1, 1.0f, {{2, 3, 4, 5}});
    GC("grad concat axis 1", f_concat, 3, 1.0f, {{2, 1, 3}, {2, 2, 3}, {2, 3, 3}});
    GC("grad concat last axis", f_concat_last, 2, 1.0f, {{2, 3, 2}, {2, 3, 4}});
    GC("grad slice", f_slice, 1, 1.0f, {{2, 4, 3}});
    GC("grad reshape view", f_reshape, 1, 1.0f, {{2, 3, 4}});
    GC("grad dropout", f_dropout, 1, 1.0f, {{4, 6}});
    GC("grad assigned by its first writer, then added to", f_fresh_fanout, 3, 1.0f, {{2, 3, 4}, {4, 4}, {4}});
    GC("grad assigned through a reshape view", f_fresh_view, 2, 1.0f, {{2, 3, 4}, {4, 4}});
    GC("grad of x + x (one grad, two inputs)", f_fresh_self, 1, 1.0f, {{3, 5}});
    GC("grad assigned by layernorm", f_fresh_ln, 3, 1.0f, {{2, 3, 12}, {12}, {12}});
    GC("grad assigned by AddNorm with dropout", f_fresh_add_ln_drop, 4, 1.0f, {{2, 3, 12}, {2, 3, 12}, {12}, {12}});
    GC("grad assigned by cross-entropy (ignored row), vectorised vocabulary", f_fresh_ce, 1, 1.0f, {{4, 1100}});
    GC("grad assigned by cross-entropy, narrow vocabulary", f_fresh_ce_narrow, 1, 1.0f, {{6, 5}});
    GC("grad linear_relu (fused)", f_linear_relu, 3, 3.0f, /* wide pre-activations: rarely within h of the kink */ {{2, 3, 4}, {5, 4}, {5}});
    GC("grad linear_gelu (fused)", f_linear_gelu, 3, 1.0f, {{2, 3, 4}, {5, 4}, {5}});
    GC("grad add_layernorm (AddNorm)", f_add_layernorm, 4, 1.0f, {{2, 3, 8}, {2, 3, 8}, {8}, {8}});
    GC("grad gather_rows", f_gather_rows, 1, 1.0f, {{2, 3, 5}});
    GC("grad scatter_rows", f_scatter_rows, 1, 1.0f, {{4, 5}});
    GC("grad add_layernorm with dropout", f_add_layernorm_drop, 4, 1.0f, {{2, 3, 8}, {2, 3, 8}, {8}, {8}});
    CHECK_EXIT();
}
