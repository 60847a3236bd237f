/* Released parameter grads (tfm_params_release_grad / tfm_params_settle_grad, src/core/tensor.c): after a
 * release the next backward's first writer of each grad assigns it (a linear's dW GEMM with beta 0) and the
 * grads no backward wrote are zeroed by the settle. Whatever the released buffers held (here NaN), the
 * grads after backward + settle equal those after zero + backward bit for bit: a weight used by two
 * linears, a bias, an unused parameter, two accumulated backwards, and the GPT through tfm_train_step. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "core/graph_impl.h"
#include "tfm/tfm.h"

enum { N = 5, D = 6 };

typedef struct {
    tfm_params p;
    tfm_tensor *W, *tied, *b, *unused;
} small_model;

static void small_init(small_model *m) {
    tfm_params_init(&m->p);
    m->W = tfm_param2(&m->p, "W", D, D);
    m->tied = tfm_param2(&m->p, "tied", D, D);
    m->b = tfm_param1(&m->p, "b", D);
    m->unused = tfm_param2(&m->p, "unused", 3, D);
    if (tfm_params_alloc(&m->p)) abort();
    for (size_t i = 0; i < m->p.total; i++) m->p.data[i] = 0.05f * (float)((i * 37) % 23) - 0.5f;
}

/* loss = sum(R * tied(tied(W x + b))) for input pattern s; returns the graph's nodes' fresh bits for W's
 * linear (bit 0) and for each use of `tied` (bits 1, 2) */
static unsigned small_backward(small_model *m, int s) {
    tfm_graph g;
    tfm_graph_init(&g, 1);
    float x[N * D], r[N * D];
    for (int i = 0; i < N * D; i++) x[i] = 0.1f * (float)((i * 5 + s) % 11) - 0.4f, r[i] = 0.3f - 0.07f * (float)(i % 9);
    int shape[2] = {N, D};
    tfm_tensor *h = tfm_linear(&g, tfm_constant(&g, x, 2, shape), m->W, m->b);
    tfm_tensor *y = tfm_linear(&g, tfm_tanh(&g, tfm_linear(&g, h, m->tied, NULL)), m->tied, NULL);
    tfm_backward(&g, tfm_sum(&g, tfm_mul(&g, y, tfm_constant(&g, r, 2, shape))));
    unsigned bits = 0;
    for (int i = 0, uses = 0; i < g.n_nodes; i++) {
        const tfm_node *n = &g.nodes[i];
        if (n->op != TFM_OP_LINEAR) continue;
        if (n->in[1] == m->W) bits |= (n->fresh >> 1 & 1u);
        else bits |= (n->fresh >> 1 & 1u) << (1 + uses++);
    }
    tfm_graph_free(&g);
    return bits;
}

static void test_small(void) {
    small_model m;
    small_init(&m);
    size_t n = m.p.total;
    float *want = malloc(sizeof(float) * n);
    tfm_params_zero_grad(&m.p);
    small_backward(&m, 0);
    small_backward(&m, 1);
    memcpy(want, m.p.grad, sizeof(float) * n);

    for (size_t i = 0; i < n; i++) m.p.grad[i] = NAN;   /* what a released grad may hold */
    tfm_params_release_grad(&m.p);
    unsigned first = small_backward(&m, 0), second = small_backward(&m, 1);
    tfm_params_settle_grad(&m.p);
    CHECK("release: grads after two backwards + settle equal zero + two backwards, bit for bit",
          !memcmp(want, m.p.grad, sizeof(float) * n), "max diff %g", max_abs_diff(want, m.p.grad, n));
    int zero = 1;
    for (size_t i = 0; i < m.unused->size; i++) zero &= m.unused->grad[i] == 0.0f && !signbit(m.unused->grad[i]);
    CHECK("release: an unused parameter's grad is +0 after the settle", zero, "first %g", m.unused->grad[0]);
    CHECK("release: the first backward's linear assigns W's grad, and one of the two uses of a tied weight",
          first == (1u | 4u), "fresh bits %#x", first);   /* the later use is the first writer */
    CHECK("release: the second backward adds to every grad", second == 0, "fresh bits %#x", second);
    free(want);
    tfm_params_free(&m.p);
}

/* The GPT: `steps` of backward + tfm_train_step (which settles, then releases) give the weights that zero +
 * backward + AdamW give, bit for bit. */
static void gpt_train(tfm_gpt *m, int released, int steps) {
    enum { B = 3, T = 12 };
    int x[B * T], y[B * T];
    tfm_adamw opt;
    if (tfm_adamw_init(&opt, &m->params, 0.9f, 0.99f, 1e-8f, 0.1f)) abort();
    tfm_graph g;
    tfm_graph_init(&g, 5);
    g.training = 1;
    tfm_train_zero_grad(&g, &m->params);
    for (int s = 0; s < steps; s++) {
        for (int i = 0; i < B * T; i++) x[i] = (i * 7 + s) % m->cfg.vocab_size, y[i] = (i * 3 + 2 * s) % m->cfg.vocab_size;
        tfm_graph_reset(&g);
        tfm_backward(&g, tfm_cross_entropy(&g, tfm_gpt_forward(&g, m, x, B, T), y, -100, 0.0f));
        if (released) {
            tfm_train_step(&g, &m->params, &opt, 1e-2f, 1.0f);
        } else {
            float coef = tfm_clip_coef(tfm_grad_norm(&m->params), 1.0f);
            tfm_adamw_step_fused(&opt, &m->params, 1e-2f, coef, 1);   /* zeroes the grads */
        }
    }
    tfm_graph_free(&g);
    tfm_adamw_free(&opt);
}

static void test_gpt_steps(void) {
    tfm_gpt_config c = {.vocab_size = 23, .block_size = 12, .n_layer = 2, .n_head = 2, .n_embd = 16,
                        .attention = TFM_ATTN_CAUSAL};
    tfm_gpt a, b;
    if (tfm_gpt_init(&a, &c) || tfm_gpt_init(&b, &c)) { CHECK("release gpt init", 0, "%s", tfm_last_error()); return; }
    tfm_gpt_init_weights(&a, 9);
    tfm_gpt_init_weights(&b, 9);
    gpt_train(&a, 0, 4);
    gpt_train(&b, 1, 4);
    size_t n = a.params.total;
    CHECK("release: 4 GPT steps through tfm_train_step (released grads) give the weights of zeroed grads",
          !memcmp(a.params.data, b.params.data, sizeof(float) * n), "max diff %g",
          max_abs_diff(a.params.data, b.params.data, n));
    int flagged = 1;
    for (int i = 0; i < b.params.n; i++) flagged &= b.params.t[i]->grad_unzeroed == 1;
    CHECK("release: tfm_train_step leaves every grad released", flagged, "%d tensors", b.params.n);
    tfm_gpt_free(&a);
    tfm_gpt_free(&b);
}

int main(void) {
    tfm_set_threads(2);
    test_small();
    test_gpt_steps();
    return check_failures ? 1 : 0;
}
