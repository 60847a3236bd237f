/* Finite-difference checks for the ops and modules of the road to the Transformer: the broadcast
 * add_outer op, AdditiveAttention (with valid-length masks) and a two-layer GRU (backward through time).
 * loss = sum(f(params) * R) with fixed random R; every parameter's tape gradient against central
 * differences (h = 1e-2, float32 forward, float64 accumulation); relative error below 2e-2. */
#include "check.h"
#include "tfm/decode.h"
#include "tfm/rnn.h"
#include "tfm/train.h"
#include "tfm/road.h"
#include <stdlib.h>

typedef tfm_tensor *(*fwd_fn)(tfm_graph *g, void *ctx);

static double eval(tfm_graph *g, fwd_fn f, void *ctx, float **R, size_t *nR, tfm_rng *rng, int backward) {
    tfm_graph_reset(g);
    tfm_tensor *y = f(g, ctx);
    if (!*R) {
        *nR = y->size;
        *R = malloc(sizeof(float) * y->size);
        for (size_t i = 0; i < y->size; i++) (*R)[i] = tfm_rng_normal(rng);
    }
    double s = 0;
    for (size_t i = 0; i < y->size; i++) s += (double)y->data[i] * (*R)[i];
    if (backward) {
        tfm_tensor *Rt = tfm_constant(g, *R, y->ndim, y->shape);
        tfm_backward(g, tfm_sum(g, tfm_mul(g, y, Rt)));
    }
    return s;
}

static void fdcheck(const char *name, tfm_params *p, fwd_fn f, void *ctx) {
    tfm_rng rng;
    tfm_rng_seed(&rng, 99);
    tfm_graph g;
    tfm_graph_init(&g, 5);
    float *R = NULL;
    size_t nR = 0;
    tfm_params_zero_grad(p);
    eval(&g, f, ctx, &R, &nR, &rng, 1);
    double worst = 0;
    const char *worst_name = "";
    const float h = 1e-2f;
    for (int k = 0; k < p->n; k++) {
        tfm_tensor *t = p->t[k];
        double num2 = 0, den2 = 0;
        for (size_t i = 0; i < t->size; i++) {
            float old = t->data[i];
            t->data[i] = old + h;
            double lp = eval(&g, f, ctx, &R, &nR, &rng, 0);
            t->data[i] = old - h;
            double lm = eval(&g, f, ctx, &R, &nR, &rng, 0);
            t->data[i] = old;
            double fd = (lp - lm) / (2 * h), an = t->grad[i];
            num2 += (fd - an) * (fd - an);
            den2 += fd * fd;
        }
        double rel = sqrt(num2) / (sqrt(den2) > 1e-6 ? sqrt(den2) : 1e-6);
        if (rel > worst || rel != rel) { worst = rel; worst_name = t->name; }
    }
    CHECK(name, worst < 2e-2, "relative gradient error %.3g (%s)", worst, worst_name);
    free(R);
    tfm_graph_free(&g);
}

static void randomize(tfm_params *p, uint64_t seed, float scale) {
    tfm_rng r;
    tfm_rng_seed(&r, seed);
    for (size_t i = 0; i < p->total; i++) p->data[i] = scale * tfm_rng_normal(&r);
}

/* ---- add_outer */
typedef struct { tfm_tensor *a, *c; } outer_ctx;
static tfm_tensor *f_outer(tfm_graph *g, void *v) {
    outer_ctx *o = v;
    return tfm_tanh(g, tfm_add_outer(g, o->a, o->c));
}

/* ---- additive attention */
typedef struct {
    tfm_AdditiveAttention att;
    tfm_tensor *q, *k, *v;
    const int *vl;
    int per_query;
} add_ctx;
static tfm_tensor *f_additive(tfm_graph *g, void *v) {
    add_ctx *c = v;
    tfm_mask m = {.valid_lens = c->vl, .per_query = c->per_query};
    return tfm_AdditiveAttention_forward(g, &c->att, c->q, c->k, c->v, c->vl ? &m : NULL);
}

/* ---- GRU */
typedef struct { tfm_GRU gru; tfm_tensor *x, *h0; int with_h0; } gru_ctx;
static tfm_tensor *f_gru(tfm_graph *g, void *v) {
    gru_ctx *c = v;
    tfm_tensor *hn;
    tfm_tensor *out = tfm_GRU_forward(g, &c->gru, c->x, c->with_h0 ? c->h0 : NULL, &hn);
    int n = (int)(out->size + hn->size);
    tfm_tensor *parts[2] = {tfm_reshape2(g, out, 1, (int)out->size), tfm_reshape2(g, hn, 1, (int)hn->size)};
    return tfm_reshape2(g, tfm_concat(g, parts, 2, 1), 1, n);
}

int main(void) {
    tfm_set_threads(1);   /* tiny tensors: no thread overhead */
    {
        tfm_params p;
        tfm_params_init(&p);
        outer_ctx o = {tfm_param(&p, "a", 3, (int[]){2, 3, 4}), tfm_param(&p, "c", 3, (int[]){2, 5, 4})};
        tfm_params_alloc(&p);
        randomize(&p, 1, 1.0f);
        fdcheck("grad add_outer", &p, f_outer, &o);
        tfm_params_free(&p);
    }
    for (int variant = 0; variant < 3; variant++) {
        tfm_params p;
        tfm_params_init(&p);
        add_ctx c = {0};
        tfm_AdditiveAttention_init(&c.att, &p, "att", 5, 4, 6, 0.0f);
        c.q = tfm_param(&p, "q", 3, (int[]){2, 3, 5});
        c.k = tfm_param(&p, "k", 3, (int[]){2, 4, 4});
        c.v = tfm_param(&p, "v", 3, (int[]){2, 4, 3});
        static const int vl_row[2] = {2, 4}, vl_q[6] = {1, 3, 4, 2, 2, 3};
        if (variant == 1) c.vl = vl_row;
        if (variant == 2) { c.vl = vl_q; c.per_query = 1; }
        tfm_params_alloc(&p);
        randomize(&p, 2 + variant, 0.7f);
        const char *names[3] = {"grad additive attention", "grad additive attention valid_lens",
                                "grad additive attention per-query valid_lens"};
        fdcheck(names[variant], &p, f_additive, &c);
        tfm_params_free(&p);
    }
    for (int with_h0 = 0; with_h0 < 2; with_h0++) {
        tfm_params p;
        tfm_params_init(&p);
        gru_ctx c = {0};
        tfm_GRU_init(&c.gru, &p, "rnn", 3, 4, 2, 0.0f);
        c.x = tfm_param(&p, "x", 3, (int[]){5, 2, 3});
        c.h0 = tfm_param(&p, "h0", 3, (int[]){2, 2, 4});
        c.with_h0 = with_h0;
        tfm_params_alloc(&p);
        randomize(&p, 10 + with_h0, 0.6f);
        fdcheck(with_h0 ? "grad GRU 2 layers BPTT with h0" : "grad GRU 2 layers BPTT", &p, f_gru, &c);
        tfm_params_free(&p);
    }
    CHECK_EXIT();
}
