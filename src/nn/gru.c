/* Multi-layer GRU composed from differentiable ops (see include/tfm/rnn.h). */
#include "tfm/rnn.h"
#include <math.h>
#include <stdio.h>
#include <string.h>

tfm_tensor *tfm_concat_many(tfm_graph *g, tfm_tensor **xs, int n, int axis) {
    while (n > 1) {
        int m = 0;
        for (int i = 0; i < n; i += 4) {
            int k = n - i < 4 ? n - i : 4;
            xs[m++] = k == 1 ? xs[i] : tfm_concat(g, xs + i, k, axis);
        }
        n = m;
    }
    return xs[0];
}

void tfm_GRU_init(tfm_GRU *m, tfm_params *p, const char *name, int input_size, int hidden_size, int num_layers,
                  float dropout) {
    TFM_ASSERT(num_layers >= 1 && num_layers <= TFM_GRU_MAX_LAYERS, "GRU: num_layers %d out of range", num_layers);
    memset(m, 0, sizeof *m);
    m->input_size = input_size;
    m->hidden_size = hidden_size;
    m->num_layers = num_layers;
    m->dropout = dropout;
    char buf[256], sfx[32];
    int H = hidden_size;
    for (int l = 0; l < num_layers; l++) {
        int in = l == 0 ? input_size : H;
        snprintf(sfx, sizeof sfx, "weight_ih_l%d", l);
        m->W_ih[l] = tfm_param2(p, tfm_name(buf, sizeof buf, name, sfx), 3 * H, in);
        snprintf(sfx, sizeof sfx, "weight_hh_l%d", l);
        m->W_hh[l] = tfm_param2(p, tfm_name(buf, sizeof buf, name, sfx), 3 * H, H);
        snprintf(sfx, sizeof sfx, "bias_ih_l%d", l);
        m->b_ih[l] = tfm_param1(p, tfm_name(buf, sizeof buf, name, sfx), 3 * H);
        snprintf(sfx, sizeof sfx, "bias_hh_l%d", l);
        m->b_hh[l] = tfm_param1(p, tfm_name(buf, sizeof buf, name, sfx), 3 * H);
    }
}

void tfm_GRU_init_weights(tfm_GRU *m, tfm_rng *r) {
    float bound = 1.0f / sqrtf((float)m->hidden_size);
    for (int l = 0; l < m->num_layers; l++) {
        tfm_init_xavier(m->W_ih[l], r);
        tfm_init_xavier(m->W_hh[l], r);
        tfm_init_uniform(m->b_ih[l], r, bound);
        tfm_init_uniform(m->b_hh[l], r, bound);
    }
}

tfm_tensor *tfm_GRU_cell(tfm_graph *g, const tfm_GRU *m, int layer, tfm_tensor *x, tfm_tensor *gi, tfm_tensor *h) {
    int H = m->hidden_size;
    if (!gi) gi = tfm_linear(g, x, m->W_ih[layer], m->b_ih[layer]);               /* (B,3H) */
    tfm_tensor *gh = tfm_linear(g, h, m->W_hh[layer], m->b_hh[layer]);             /* (B,3H) */
    tfm_tensor *rz = tfm_sigmoid(g, tfm_add(g, tfm_slice(g, gi, 1, 0, 2 * H), tfm_slice(g, gh, 1, 0, 2 * H)));
    tfm_tensor *r = tfm_slice(g, rz, 1, 0, H), *z = tfm_slice(g, rz, 1, H, H);
    tfm_tensor *n = tfm_tanh(g, tfm_add(g, tfm_slice(g, gi, 1, 2 * H, H), tfm_mul(g, r, tfm_slice(g, gh, 1, 2 * H, H))));
    return tfm_add(g, n, tfm_mul(g, z, tfm_sub(g, h, n)));                          /* n + z (h - n) */
}

tfm_tensor *tfm_GRU_forward(tfm_graph *g, const tfm_GRU *m, tfm_tensor *X, tfm_tensor *h0, tfm_tensor **h_n) {
    TFM_ASSERT(X->ndim == 3 && X->shape[2] == m->input_size, "GRU: input must be (T,B,%d)", m->input_size);
    int T = X->shape[0], B = X->shape[1], H = m->hidden_size, L = m->num_layers;
    tfm_tensor **steps = tfm_arena_alloc(&g->arena, sizeof(tfm_tensor *) * (size_t)(T > L ? T : L));
    tfm_tensor *last[TFM_GRU_MAX_LAYERS];
    tfm_tensor *in = X;
    for (int l = 0; l < L; l++) {
        tfm_tensor *h;
        if (h0) {
            h = tfm_reshape2(g, tfm_slice(g, h0, 0, l, 1), B, H);
        } else {
            h = tfm_new2(g, B, H);
            memset(h->data, 0, sizeof(float) * h->size);
        }
        if (l > 0) in = tfm_dropout_time_major(g, in, m->dropout);   /* (T,B,in): keyed by global sample */
        int in_size = in->shape[2];
        tfm_tensor *gi_all = tfm_linear(g, tfm_reshape2(g, in, T * B, in_size), m->W_ih[l], m->b_ih[l]); /* (TB,3H) */
        for (int t = 0; t < T; t++) {
            tfm_tensor *gi = tfm_slice(g, gi_all, 0, t * B, B);
            h = tfm_GRU_cell(g, m, l, NULL, gi, h);
            steps[t] = tfm_reshape3(g, h, 1, B, H);
        }
        last[l] = steps[T - 1];
        in = tfm_concat_many(g, steps, T, 0);                              /* (T,B,H) */
    }
    if (h_n) *h_n = tfm_concat_many(g, last, L, 0);
    return in;
}
