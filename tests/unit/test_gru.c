/* GRU layer semantics beyond the gradient checks: the gate equations of PyTorch nn.GRU for one step
 * computed by hand, zero initial state, inter-layer dropout (only between layers, only in training),
 * and h_n equal to the last outputs of each layer. */
#include "check.h"
#include "tfm/decode.h"
#include "tfm/rnn.h"
#include "tfm/train.h"
#include <stdlib.h>

static float sigm(float x) { return 1.0f / (1.0f + expf(-x)); }

int main(void) {
    tfm_set_threads(1);
    tfm_rng r;
    tfm_rng_seed(&r, 11);
    /* one layer, one step, by hand */
    {
        tfm_params p;
        tfm_params_init(&p);
        tfm_GRU gru;
        int I = 3, H = 2, B = 2;
        tfm_GRU_init(&gru, &p, "rnn", I, H, 1, 0.0f);
        tfm_params_alloc(&p);
        for (size_t i = 0; i < p.total; i++) p.data[i] = 0.5f * tfm_rng_normal(&r);
        float x[6], h0[4];
        for (int i = 0; i < 6; i++) x[i] = tfm_rng_normal(&r);
        for (int i = 0; i < 4; i++) h0[i] = tfm_rng_normal(&r);
        tfm_graph g;
        tfm_graph_init(&g, 1);
        g.grad_enabled = 0;
        tfm_tensor *hn, *out = tfm_GRU_forward(&g, &gru, tfm_constant(&g, x, 3, (int[]){1, B, I}),
                                               tfm_constant(&g, h0, 3, (int[]){1, B, H}), &hn);
        double err = 0;
        for (int b = 0; b < B; b++) {
            float gi[6], gh[6];
            for (int k = 0; k < 3 * H; k++) {
                gi[k] = gru.b_ih[0]->data[k];
                gh[k] = gru.b_hh[0]->data[k];
                for (int j = 0; j < I; j++) gi[k] += gru.W_ih[0]->data[k * I + j] * x[b * I + j];
                for (int j = 0; j < H; j++) gh[k] += gru.W_hh[0]->data[k * H + j] * h0[b * H + j];
            }
            for (int j = 0; j < H; j++) {
                float rr = sigm(gi[j] + gh[j]), z = sigm(gi[H + j] + gh[H + j]);
                float n = tanhf(gi[2 * H + j] + rr * gh[2 * H + j]);
                float h = (1 - z) * n + z * h0[b * H + j];
                err = fmax(err, fabs(h - out->data[b * H + j]));
            }
        }
        CHECK("gru: PyTorch gate equations (r, z, n; rows ordered r,z,n)", err < 1e-6, "max error %.3g", err);
        CHECK("gru: h_n of one step equals the output", max_abs_diff(hn->data, out->data, 4) == 0, "differs");
        tfm_graph_free(&g);
        tfm_params_free(&p);
    }
    /* two layers, dropout 0.5 */
    {
        tfm_params p;
        tfm_params_init(&p);
        tfm_GRU gru;
        int T = 4, B = 3, I = 5, H = 6;
        tfm_GRU_init(&gru, &p, "rnn", I, H, 2, 0.5f);
        tfm_params_alloc(&p);
        tfm_GRU_init_weights(&gru, &r);
        CHECK("gru: parameter names follow nn.GRU",
              tfm_params_find(&p, "rnn.weight_ih_l1") && tfm_params_find(&p, "rnn.bias_hh_l0") &&
                  tfm_params_find(&p, "rnn.weight_ih_l0")->shape[0] == 3 * H &&
                  tfm_params_find(&p, "rnn.weight_ih_l0")->shape[1] == I,
              "names/shapes wrong");
        float x[4 * 3 * 5];
        for (int i = 0; i < T * B * I; i++) x[i] = tfm_rng_normal(&r);
        tfm_graph g;
        tfm_graph_init(&g, 3);
        g.grad_enabled = 0;
        tfm_tensor *hn_e, *out_e = tfm_GRU_forward(&g, &gru, tfm_constant(&g, x, 3, (int[]){T, B, I}), NULL, &hn_e);
        g.training = 1;
        tfm_tensor *hn_t, *out_t = tfm_GRU_forward(&g, &gru, tfm_constant(&g, x, 3, (int[]){T, B, I}), NULL, &hn_t);
        CHECK("gru: h_n[top] = last output (eval)", max_abs_diff(hn_e->data + B * H, out_e->data + (T - 1) * B * H, B * H) == 0,
              "differs");
        CHECK("gru: h_n[0] is unaffected by inter-layer dropout", max_abs_diff(hn_e->data, hn_t->data, B * H) < 1e-6,
              "layer 0 changed by dropout");
        CHECK("gru: inter-layer dropout changes the top layer in training", max_abs_diff(out_e->data, out_t->data, T * B * H) > 1e-3,
              "top layer unchanged");
        tfm_graph_free(&g);
        tfm_params_free(&p);
    }
    CHECK_EXIT();
}
