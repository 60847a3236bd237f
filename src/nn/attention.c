/* Scaled dot-product attention and multi-head attention. */
#include "tfm/nn.h"
#include <math.h>
#include <stdlib.h>

/* The fused op whenever no weights are kept and attention dropout is inactive (tfm_attention itself picks
 * the tiled flash kernel or, for training on short sequences, its materialised strided-GEMM variant). */
static int fused_ok(const tfm_graph *g, const tfm_MultiHeadAttention *m, int Tk) {
    return !g->exact_attention && !m->keep_weights &&   /* exact_attention: TFM_EXACT_ATTENTION=1, tests */
           (m->dropout <= 0.0f || !g->training || tfm_attention_supports_dropout(g, Tk));
}

tfm_tensor *tfm_scaled_dot_product_attention(tfm_graph *g, tfm_tensor *q, tfm_tensor *k, tfm_tensor *v,
                                             const tfm_mask *mask, float dropout, tfm_tensor **weights_out) {
    int d = tfm_last_dim(q);
    tfm_tensor *scores = tfm_scale(g, tfm_matmul(g, q, k, 0, 1), 1.0f / sqrtf((float)d)); /* (N,Tq,Tk) */
    tfm_tensor *w = tfm_masked_softmax(g, scores, mask);
    if (weights_out) *weights_out = w;
    return tfm_matmul(g, tfm_dropout(g, w, dropout), v, 0, 0);                             /* (N,Tq,dv) */
}

void tfm_MultiHeadAttention_init(tfm_MultiHeadAttention *m, tfm_params *p, const char *name, int query_size,
                                 int key_size, int value_size, int n_head, int d_k, int d_v, int d_out,
                                 int bias, float dropout) {
    char buf[256];
    tfm_Linear_init(&m->W_q, p, tfm_name(buf, sizeof buf, name, "W_q"), query_size, n_head * d_k, bias);
    tfm_Linear_init(&m->W_k, p, tfm_name(buf, sizeof buf, name, "W_k"), key_size, n_head * d_k, bias);
    tfm_Linear_init(&m->W_v, p, tfm_name(buf, sizeof buf, name, "W_v"), value_size, n_head * d_v, bias);
    tfm_Linear_init(&m->W_o, p, tfm_name(buf, sizeof buf, name, "W_o"), n_head * d_v, d_out, bias);
    m->n_head = n_head;
    m->d_k = d_k;
    m->d_v = d_v;
    m->dropout = dropout;
    m->keep_weights = 0;
    m->weights = NULL;
}

tfm_tensor *tfm_split_heads(tfm_graph *g, tfm_tensor *x, int n_head) {
    int B = x->shape[0], T = x->shape[1], d = tfm_last_dim(x) / n_head;
    return tfm_permute(g, tfm_reshape4(g, x, B, T, n_head, d), 0, 2, 1, 3);   /* (B,H,T,d) */
}

tfm_tensor *tfm_merge_heads(tfm_graph *g, tfm_tensor *x) {
    int B = x->shape[0], H = x->shape[1], T = x->shape[2], d = x->shape[3];
    return tfm_reshape3(g, tfm_permute(g, x, 0, 2, 1, 3), B, T, H * d);       /* (B,T,H*d) */
}

void tfm_MultiHeadAttention_project_kv(tfm_graph *g, const tfm_MultiHeadAttention *m, tfm_tensor *keys,
                                       tfm_tensor *values, tfm_tensor **K, tfm_tensor **V) {
    *K = tfm_split_heads(g, tfm_Linear_forward(g, &m->W_k, keys), m->n_head);
    *V = tfm_split_heads(g, tfm_Linear_forward(g, &m->W_v, values), m->n_head);
}

tfm_tensor *tfm_MultiHeadAttention_attend(tfm_graph *g, tfm_MultiHeadAttention *m, tfm_tensor *queries,
                                          tfm_tensor *K, tfm_tensor *V, const tfm_mask *mask) {
    int B = queries->shape[0], Tq = queries->shape[1], H = m->n_head, Tk = K->shape[2];
    if (fused_ok(g, m, Tk)) { /* Q stays (B,Tq,H*d_k); K, V are head-major; output is (B,Tq,H*d_v) */
        m->weights = NULL;
        tfm_tensor *out = tfm_attention_dropout(g, tfm_Linear_forward(g, &m->W_q, queries), K, V, H, 1, mask,
                                                1.0f / sqrtf((float)m->d_k), m->dropout);
        return tfm_Linear_forward(g, &m->W_o, out);
    }
    tfm_tensor *Q = tfm_split_heads(g, tfm_Linear_forward(g, &m->W_q, queries), H);   /* (B,H,Tq,d_k) */
    tfm_mask mk = {0};
    if (mask) mk = *mask;
    mk.n_heads = H;
    tfm_tensor *w = NULL;
    tfm_tensor *out = tfm_scaled_dot_product_attention(
        g, tfm_reshape3(g, Q, B * H, Tq, m->d_k), tfm_reshape3(g, K, B * H, Tk, m->d_k),
        tfm_reshape3(g, V, B * H, Tk, m->d_v), &mk, m->dropout, m->keep_weights ? &w : NULL);
    m->weights = w;
    out = tfm_merge_heads(g, tfm_reshape4(g, out, B, H, Tq, m->d_v));                   /* (B,Tq,H*d_v) */
    return tfm_Linear_forward(g, &m->W_o, out);
}

tfm_tensor *tfm_MultiHeadAttention_forward(tfm_graph *g, tfm_MultiHeadAttention *m, tfm_tensor *queries,
                                           tfm_tensor *keys, tfm_tensor *values, const tfm_mask *mask) {
    if (fused_ok(g, m, keys->shape[1])) { /* everything stays in the (B,T,H*d) layout of the projections: no permutes */
        m->weights = NULL;
        tfm_tensor *out = tfm_attention_dropout(g, tfm_Linear_forward(g, &m->W_q, queries),
                                                tfm_Linear_forward(g, &m->W_k, keys), tfm_Linear_forward(g, &m->W_v, values),
                                                m->n_head, 0, mask, 1.0f / sqrtf((float)m->d_k), m->dropout);
        return tfm_Linear_forward(g, &m->W_o, out);
    }
    tfm_tensor *K, *V;
    tfm_MultiHeadAttention_project_kv(g, m, keys, values, &K, &V);
    return tfm_MultiHeadAttention_attend(g, m, queries, K, V, mask);
}

tfm_tensor *tfm_MultiHeadAttention_forward_packed(tfm_graph *g, tfm_MultiHeadAttention *m, int B, tfm_tensor *xq,
                                                  const int *q_rows, int Tq, tfm_tensor *xkv, const int *kv_rows,
                                                  int Tk, const tfm_mask *mask) {
    int nq = (int)tfm_rows(xq), H = m->n_head;
    if (fused_ok(g, m, Tk)) { /* project the packed rows, pad only for the attention kernel */
        tfm_tensor *q = tfm_Linear_forward(g, &m->W_q, xq), *k = tfm_Linear_forward(g, &m->W_k, xkv),
                   *v = tfm_Linear_forward(g, &m->W_v, xkv);
        q = tfm_scatter_rows(g, q, q_rows, 3, (int[]){B, Tq, tfm_last_dim(q)});
        k = tfm_scatter_rows(g, k, kv_rows, 3, (int[]){B, Tk, tfm_last_dim(k)});
        v = tfm_scatter_rows(g, v, kv_rows, 3, (int[]){B, Tk, tfm_last_dim(v)});
        m->weights = NULL;
        tfm_tensor *out = tfm_attention_dropout(g, q, k, v, H, 0, mask, 1.0f / sqrtf((float)m->d_k), m->dropout);
        return tfm_Linear_forward(g, &m->W_o, tfm_gather_rows(g, out, q_rows, nq));
    }
    /* exact path (weights kept, attention dropout on long keys, TFM_EXACT_ATTENTION): pad the inputs */
    int C = tfm_last_dim(xq);
    tfm_tensor *Xq = tfm_scatter_rows(g, xq, q_rows, 3, (int[]){B, Tq, C});
    tfm_tensor *Xkv = xkv == xq && kv_rows == q_rows ? Xq
                                                     : tfm_scatter_rows(g, xkv, kv_rows, 3, (int[]){B, Tk, tfm_last_dim(xkv)});
    return tfm_gather_rows(g, tfm_MultiHeadAttention_forward(g, m, Xq, Xkv, Xkv, mask), q_rows, nq);
}
