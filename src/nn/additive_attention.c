/* d2l's AdditiveAttention: scores[b,i,j] = w_v . tanh(W_q q_i + W_k k_j), masked softmax over j,
 * dropout, weights @ values. W_q, W_k, w_v have no bias. */
#include "tfm/road.h"

void tfm_AdditiveAttention_init(tfm_AdditiveAttention *m, tfm_params *p, const char *name, int query_size,
                                int key_size, int num_hiddens, float dropout) {
    char buf[256];
    tfm_Linear_init(&m->W_k, p, tfm_name(buf, sizeof buf, name, "W_k"), key_size, num_hiddens, 0);
    tfm_Linear_init(&m->W_q, p, tfm_name(buf, sizeof buf, name, "W_q"), query_size, num_hiddens, 0);
    tfm_Linear_init(&m->w_v, p, tfm_name(buf, sizeof buf, name, "w_v"), num_hiddens, 1, 0);
    m->dropout = dropout;
    m->weights = NULL;
}

tfm_tensor *tfm_AdditiveAttention_attend(tfm_graph *g, tfm_AdditiveAttention *m, tfm_tensor *queries,
                                         tfm_tensor *proj_keys, tfm_tensor *values, const tfm_mask *mask) {
    int B = queries->shape[0], Tq = queries->shape[1], Tk = proj_keys->shape[1];
    tfm_tensor *q = tfm_Linear_forward(g, &m->W_q, queries);                     /* (B,Tq,h) */
    tfm_tensor *features = tfm_tanh(g, tfm_add_outer(g, q, proj_keys));         /* (B,Tq,Tk,h) */
    tfm_tensor *scores = tfm_reshape3(g, tfm_Linear_forward(g, &m->w_v, features), B, Tq, Tk);
    tfm_mask mk = {0};
    if (mask) mk = *mask;
    mk.causal = 0;
    mk.n_heads = 1;
    m->weights = tfm_masked_softmax(g, scores, &mk);                            /* (B,Tq,Tk) */
    return tfm_matmul(g, tfm_dropout(g, m->weights, m->dropout), values, 0, 0); /* (B,Tq,dv) */
}

tfm_tensor *tfm_AdditiveAttention_forward(tfm_graph *g, tfm_AdditiveAttention *m, tfm_tensor *queries,
                                          tfm_tensor *keys, tfm_tensor *values, const tfm_mask *mask) {
    return tfm_AdditiveAttention_attend(g, m, queries, tfm_Linear_forward(g, &m->W_k, keys), values, mask);
}
