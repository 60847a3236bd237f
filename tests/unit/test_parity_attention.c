/* MultiHeadAttention (d_k != d_v, key valid lengths, no bias as in d2l) vs PyTorch
 * (fixture tests/fixtures/attn_small.tfm from scripts/make_gpt_fixture.py): output, attention
 * weights, and gradients of every weight and input for loss = sum(out * R). */
#include "check.h"
#include "tfm/io.h"
#include "tfm/nn.h"
#include <stdlib.h>

static tfm_container fx;
static const tfm_entry *need(const char *name) {
    const tfm_entry *e = tfm_container_get(&fx, name);
    if (!e) { printf("FAIL fixture entry %s missing\n", name); exit(1); }
    return e;
}

int main(void) {
    if (tfm_container_load(&fx, "tests/fixtures/attn_small.tfm")) {
        printf("FAIL load fixture: %s\n", tfm_last_error());
        return 1;
    }
    int H = *(int *)need("n_head")->data, dk = *(int *)need("d_k")->data, dv = *(int *)need("d_v")->data;
    const tfm_entry *q = need("queries"), *k = need("keys"), *v = need("values");
    int B = q->shape[0], Tq = q->shape[1], Dq = q->shape[2], Tk = k->shape[1];
    int Dout = need("W_o")->shape[0];
    tfm_params p;
    tfm_params_init(&p);
    tfm_MultiHeadAttention mha;
    tfm_MultiHeadAttention_init(&mha, &p, "", Dq, k->shape[2], v->shape[2], H, dk, dv, Dout, 0, 0.0f);
    tfm_tensor *qin = tfm_param(&p, "queries", 3, q->shape), *kin = tfm_param(&p, "keys", 3, k->shape),
               *vin = tfm_param(&p, "values", 3, v->shape);
    tfm_params_alloc(&p);
    const char *wn[4] = {"W_q", "W_k", "W_v", "W_o"};
    tfm_Linear *lin[4] = {&mha.W_q, &mha.W_k, &mha.W_v, &mha.W_o};
    for (int i = 0; i < 4; i++) memcpy(lin[i]->W->data, need(wn[i])->data, lin[i]->W->size * 4);
    memcpy(qin->data, q->data, q->nbytes);
    memcpy(kin->data, k->data, k->nbytes);
    memcpy(vin->data, v->data, v->nbytes);
    mha.keep_weights = 1;
    tfm_graph g;
    tfm_graph_init(&g, 1);
    tfm_mask mask = {.valid_lens = need("valid_lens")->data};
    tfm_tensor *out = tfm_MultiHeadAttention_forward(&g, &mha, qin, kin, vin, &mask);
    tfm_tensor *R = tfm_constant(&g, need("R")->data, 3, out->shape);
    tfm_backward(&g, tfm_sum(&g, tfm_mul(&g, out, R)));
    double d = max_abs_diff(out->data, need("out")->data, out->size);
    CHECK("mha parity: output (d_k != d_v, valid lens)", d <= 1e-5, "max diff %.3g", d);
    d = max_abs_diff(mha.weights->data, need("weights")->data, (size_t)B * H * Tq * Tk);
    CHECK("mha parity: attention weights", d <= 1e-6, "max diff %.3g", d);
    const char *gn[7] = {"grad.W_q", "grad.W_k", "grad.W_v", "grad.W_o", "grad.queries", "grad.keys", "grad.values"};
    tfm_tensor *gt[7] = {mha.W_q.W, mha.W_k.W, mha.W_v.W, mha.W_o.W, qin, kin, vin};
    double worst = 0;
    for (int i = 0; i < 7; i++) worst = fmax(worst, rel_err(gt[i]->grad, need(gn[i])->data, gt[i]->size));
    CHECK("mha parity: gradients of weights and inputs", worst <= 1e-4, "worst relative error %.3g", worst);
    tfm_graph_free(&g);
    tfm_params_free(&p);
    tfm_container_free(&fx);
    CHECK_EXIT();
}
