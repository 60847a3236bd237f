/* The recycled gradient buffers of tfm_backward (tfm_graph.recycle_grads, src/core/grad_plan.c): the same
 * bits as a buffer per tensor, for the GPT, the three translation architectures (the Transformer's encoder
 * output feeds every decoder layer; the GRUs chain a state through time) and a graph with views, a tensor
 * used twice by one node and a leaf whose grad is read afterwards; the pool is a fraction of the grads it
 * replaces and stops growing after the first step. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "core/graph_impl.h"
#include "tfm/tfm.h"

/* the floats of every intermediate grad the forward allocated: what the pool replaces */
static size_t node_grad_floats(const tfm_graph *g) {
    size_t n = 0;
    for (int i = 0; i < g->n_nodes; i++) n += g->nodes[i].out->size;
    return n;
}

/* GPT: loss and parameter grads after `steps` forward+backward passes (dropout on) */
static void gpt_grads(tfm_gpt *m, int recycle, int steps, float *out, size_t *pool_cap, size_t *grads) {
    enum { B = 3, T = 16 };
    int x[B * T], y[B * T];
    for (int i = 0; i < B * T; i++) x[i] = (i * 7 + 3) % m->cfg.vocab_size, y[i] = (i * 5 + 1) % m->cfg.vocab_size;
    tfm_graph g;
    tfm_graph_init(&g, 42);
    g.training = 1;
    g.recycle_grads = recycle;
    float *pool0 = NULL;
    for (int s = 0; s < steps; s++) {
        tfm_graph_reset(&g);
        tfm_params_zero_grad(&m->params);
        tfm_tensor *loss = tfm_cross_entropy(&g, tfm_gpt_forward(&g, m, x, B, T), y, -100, 0.0f);
        if (grads) *grads = node_grad_floats(&g);
        tfm_backward(&g, loss);
        out[0] = loss->data[0];
        if (s == 0) pool0 = g.grad_pool;
    }
    memcpy(out + 1, m->params.grad, sizeof(float) * m->params.total);
    if (pool_cap) *pool_cap = g.grad_pool == pool0 ? g.grad_pool_cap : 0;   /* 0: the pool moved after step 1 */
    tfm_graph_free(&g);
}

static void test_gpt(void) {
    tfm_gpt_config c = {.vocab_size = 29, .block_size = 16, .n_layer = 3, .n_head = 2, .n_embd = 32,
                        .dropout = 0.1f, .attention = TFM_ATTN_CAUSAL};
    tfm_gpt m;
    if (tfm_gpt_init(&m, &c)) { CHECK("grad_plan gpt init", 0, "%s", tfm_last_error()); return; }
    tfm_gpt_init_weights(&m, 3);
    size_t n = 1 + m.params.total, cap = 0, grads = 0;
    float *a = malloc(sizeof(float) * n), *b = malloc(sizeof(float) * n);
    gpt_grads(&m, 0, 3, a, NULL, NULL);
    gpt_grads(&m, 1, 3, b, &cap, &grads);
    CHECK("grad_plan gpt: loss and parameter grads bit-identical with recycled grad buffers",
          !memcmp(a, b, sizeof(float) * n), "max diff %g", max_abs_diff(a, b, n));
    CHECK("grad_plan gpt: the pool is under a quarter of the grads it replaces and stays put after step 1",
          cap > 0 && cap * 4 < grads, "pool %zu floats, grads %zu", cap, grads);
    free(a);
    free(b);
    tfm_gpt_free(&m);
}

/* translation: loss and parameter grads of one teacher-forced batch (dropout on) */
static void s2s_grads(tfm_mt_net *m, int recycle, float *out) {
    enum { B = 3, Ts = 6, Tt = 5 };   /* three lengths: padding on both sides */
    int src[B * Ts] = {4, 5, 6, 7, 8, TFM_EOS, 9, 10, TFM_EOS, TFM_PAD, TFM_PAD, TFM_PAD,
                       11, 12, 4, TFM_EOS, TFM_PAD, TFM_PAD}, valid[B] = {6, 3, 4};
    int tgt[B * Tt] = {6, 7, 8, 9, TFM_EOS, 12, TFM_EOS, TFM_PAD, TFM_PAD, TFM_PAD, 5, 4, 11, TFM_EOS, TFM_PAD};
    int tgt_in[B * Tt];
    tfm_mt_shift_right(tgt, B, Tt, tgt_in);
    tfm_graph g;
    tfm_graph_init(&g, 11);
    g.training = 1;
    g.recycle_grads = recycle;
    tfm_params_zero_grad(&m->params);
    tfm_tensor *loss = tfm_mt_net_loss(m, &g, src, valid, B, Ts, tgt_in, tgt, Tt, 0.1f);
    tfm_backward(&g, loss);
    out[0] = loss->data[0];
    memcpy(out + 1, m->params.grad, sizeof(float) * m->params.total);
    tfm_graph_free(&g);
}

static void test_translators(void) {
    const char *arch[] = {"transformer", "rnn", "bahdanau"};
    for (int i = 0; i < 3; i++) {
        tfm_mt_config sc;
        tfm_mt_config_default(&sc);
        snprintf(sc.arch, sizeof sc.arch, "%s", arch[i]);
        sc.src_vocab = sc.tgt_vocab = 13;
        sc.d_model = 16, sc.ffn = 32, sc.n_layer = 2, sc.embed_size = 8, sc.hidden_size = 16, sc.dropout = 0.1f;
        tfm_mt_net *m = tfm_mt_net_create(&sc);
        char name[128];
        snprintf(name, sizeof name, "grad_plan %s: loss and parameter grads bit-identical with recycled grad buffers",
                 arch[i]);
        if (!m) { CHECK(name, 0, "%s", tfm_last_error()); continue; }
        m->vt->init_weights(m, 5);
        size_t n = 1 + m->params.total;
        float *a = malloc(sizeof(float) * n), *b = malloc(sizeof(float) * n);
        s2s_grads(m, 0, a);
        s2s_grads(m, 1, b);
        CHECK(name, !memcmp(a, b, sizeof(float) * n), "max diff %g", max_abs_diff(a, b, n));
        free(a);
        free(b);
        tfm_mt_net_free(m);
    }
}

/* A leaf x (its grad read after the backward), views of intermediates, h + h, a tensor used by three
 * nodes: x's grad and the loss equal with and without recycling. */
static void small_graph(int recycle, float *out) {
    tfm_graph g;
    tfm_graph_init(&g, 1);
    g.recycle_grads = recycle;
    int shape[2] = {4, 6};
    tfm_tensor *x = tfm_tensor_new(&g, 2, shape, 1);
    for (int i = 0; i < 24; i++) x->data[i] = 0.1f * (float)(i % 7) - 0.3f;
    tfm_tensor *h = tfm_tanh(&g, x);                                   /* used by three nodes */
    tfm_tensor *v = tfm_reshape3(&g, tfm_add(&g, h, h), 2, 2, 6);      /* h + h, then a view */
    tfm_tensor *s = tfm_sigmoid(&g, v);
    tfm_tensor *w = tfm_reshape2(&g, s, 4, 6);
    tfm_tensor *loss = tfm_mean(&g, tfm_square(&g, tfm_mul(&g, w, h)));
    tfm_backward(&g, loss);
    out[0] = loss->data[0];
    memcpy(out + 1, x->grad, sizeof(float) * 24);
    tfm_graph_free(&g);
}

static void test_views_and_leaves(void) {
    float a[25], b[25];
    small_graph(0, a);
    small_graph(1, b);
    CHECK("grad_plan: a leaf's grad and the loss bit-identical through views, h + h and shared inputs",
          !memcmp(a, b, sizeof a), "max diff %g", max_abs_diff(a, b, 25));
}

int main(void) {
    tfm_set_threads(2);
    test_gpt();
    test_translators();
    test_views_and_leaves();
    return check_failures ? 1 : 0;
}
