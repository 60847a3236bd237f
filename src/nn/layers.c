/* Linear, Embedding, LayerNorm, PositionalEncoding, PositionWiseFFN, AddNorm. */
#include "tfm/nn.h"
#include "core/mem.h"
#include <math.h>
#include <stdlib.h>

#define NAME(suffix) tfm_name(buf, sizeof buf, name, suffix)

void tfm_Linear_init(tfm_Linear *m, tfm_params *p, const char *name, int in, int out, int bias) {
    char buf[256];
    m->W = tfm_param2(p, NAME("weight"), out, in);
    m->b = bias ? tfm_param1(p, NAME("bias"), out) : NULL;
}

tfm_tensor *tfm_Linear_forward(tfm_graph *g, const tfm_Linear *m, tfm_tensor *x) {
    return tfm_linear(g, x, m->W, m->b);
}

void tfm_Embedding_init(tfm_Embedding *m, tfm_params *p, const char *name, int num, int dim) {
    char buf[256];
    m->weight = tfm_param2(p, NAME("weight"), num, dim);
}

tfm_tensor *tfm_Embedding_forward(tfm_graph *g, const tfm_Embedding *m, const int *ids, int B, int T) {
    return tfm_embedding(g, m->weight, ids, 2, (int[]){B, T});
}

void tfm_LayerNorm_init(tfm_LayerNorm *m, tfm_params *p, const char *name, int C) {
    char buf[256];
    m->weight = tfm_param1(p, NAME("weight"), C);
    m->bias = tfm_param1(p, NAME("bias"), C);
    m->eps = 1e-5f;
}

tfm_tensor *tfm_LayerNorm_forward(tfm_graph *g, const tfm_LayerNorm *m, tfm_tensor *x) {
    return tfm_layernorm(g, x, m->weight, m->bias, m->eps);
}

static size_t pe_bytes(const tfm_PositionalEncoding *m) { return sizeof(float) * (size_t)m->max_len * m->d; }

/* m's table (max_len, d), unfilled, and div[k] = 10000^(2k/d) for 2k < d (the same for every position), which the
 * caller frees. The table is a weight block (core/mem.h): a translator's 1000 x 256 is 1000 KiB, which took 250
 * page faults to fill on 4 KiB pages. */
static double *pe_alloc(tfm_PositionalEncoding *m, int max_len, int d) {
    m->max_len = max_len;
    m->d = d;
    m->P = tfm_weights_alloc_(pe_bytes(m));
    double *div = malloc(sizeof(double) * (size_t)(d / 2 + 1));
    if (!m->P || !div) {
        free(div);
        tfm_PositionalEncoding_free(m);
        tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory (positional encoding %d x %d)", max_len, d);
        return NULL;
    }
    for (int k = 0; 2 * k < d; k++) div[k] = pow(10000.0, (double)(2 * k) / d);
    return div;
}

int tfm_PositionalEncoding_init(tfm_PositionalEncoding *m, int max_len, int d) {
    double *div = pe_alloc(m, max_len, d);
    if (!div) return -1;
    for (int pos = 0; pos < max_len; pos++)
        for (int i = 0; i < d; i += 2) {
            /* computed in double then rounded, as PyTorch computes pos / 10000^(i/d) in float32:
             * the difference is below 1e-6 for the sizes used here */
            double angle = pos / div[i / 2];
            m->P[(size_t)pos * d + i] = (float)sin(angle);
            if (i + 1 < d) m->P[(size_t)pos * d + i + 1] = (float)cos(angle);
        }
    free(div);
    return 0;
}

int tfm_PositionalEncoding_init_halves(tfm_PositionalEncoding *m, int max_len, int d) {
    double *div = pe_alloc(m, max_len, d);
    if (!div) return -1;
    int half = d / 2;
    for (int pos = 0; pos < max_len; pos++)
        for (int k = 0; k < half; k++) {   /* in double, then rounded: what numpy computes before the float cast */
            double angle = pos / div[k];
            m->P[(size_t)pos * d + k] = (float)sin(angle);
            m->P[(size_t)pos * d + half + k] = (float)cos(angle);
        }
    free(div);
    return 0;
}

void tfm_PositionalEncoding_free(tfm_PositionalEncoding *m) {
    tfm_weights_free_(m->P, pe_bytes(m));
    m->P = NULL;
}

tfm_tensor *tfm_PositionalEncoding_forward(tfm_graph *g, const tfm_PositionalEncoding *m, tfm_tensor *x,
                                           int offset) {
    int T = x->shape[1], d = tfm_last_dim(x);
    TFM_ASSERT(d == m->d && offset + T <= m->max_len, "positional encoding: T=%d+%d, d=%d vs table (%d,%d)",
               offset, T, d, m->max_len, m->d);
    tfm_tensor *P = tfm_constant(g, m->P + (size_t)offset * d, 2, (int[]){T, d});
    return tfm_add(g, x, P);
}

void tfm_PositionWiseFFN_init(tfm_PositionWiseFFN *m, tfm_params *p, const char *name, int d_in, int d_hidden,
                              int d_out, tfm_activation act) {
    char buf[256];
    tfm_Linear_init(&m->dense1, p, NAME("dense1"), d_in, d_hidden, 1);
    tfm_Linear_init(&m->dense2, p, NAME("dense2"), d_hidden, d_out, 1);
    m->act = act;
    m->dropout = 0.0f;
}

tfm_tensor *tfm_PositionWiseFFN_forward(tfm_graph *g, const tfm_PositionWiseFFN *m, tfm_tensor *x) {
    tfm_tensor *h;
    switch (m->act) {
    case TFM_ACT_GELU: h = tfm_linear_gelu(g, x, m->dense1.W, m->dense1.b); break;
    case TFM_ACT_SILU: h = tfm_silu(g, tfm_Linear_forward(g, &m->dense1, x)); break;
    case TFM_ACT_GELU_ERF: h = tfm_gelu_erf(g, tfm_Linear_forward(g, &m->dense1, x)); break;
    default: h = tfm_linear_relu(g, x, m->dense1.W, m->dense1.b); break;
    }
    return tfm_Linear_forward(g, &m->dense2, tfm_dropout(g, h, m->dropout));   /* identity at 0 */
}

void tfm_AddNorm_init(tfm_AddNorm *m, tfm_params *p, const char *name, int C, float dropout) {
    char buf[256];
    tfm_LayerNorm_init(&m->ln, p, NAME("ln"), C);
    m->dropout = dropout;
}

tfm_tensor *tfm_AddNorm_forward(tfm_graph *g, const tfm_AddNorm *m, tfm_tensor *X, tfm_tensor *Y) {
    return tfm_add_layernorm(g, X, Y, m->dropout, m->ln.weight, m->ln.bias, m->ln.eps);   /* LN(X + dropout(Y)) */
}
