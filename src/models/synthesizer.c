/* Dense synthesizer attention (Tay et al. 2020; the CS224N minGPT assignment variant):
 * the attention logits of each position come from the token itself, not from query-key products:
 *   A = relu(X W1 + b1) W2 + b2      per head: (B,H,T,d) @ (d,block_size) -> (B,H,T,block_size)
 *   A = A[..., :T], causal mask, softmax, dropout, then A @ (X W_v), heads merged, W_o. */
#include "tfm/gpt.h"

void tfm_SynthesizerAttention_init(tfm_SynthesizerAttention *s, tfm_params *p, const char *name, int n_embd,
                                   int n_head, int block_size, float dropout) {
    char buf[256];
    int d = n_embd / n_head;
    tfm_Linear_init(&s->w1, p, tfm_name(buf, sizeof buf, name, "w1"), n_embd, n_embd, 1);
    s->w2 = tfm_param2(p, tfm_name(buf, sizeof buf, name, "w2"), d, block_size);
    s->b2 = tfm_param1(p, tfm_name(buf, sizeof buf, name, "b2"), block_size);
    tfm_Linear_init(&s->W_v, p, tfm_name(buf, sizeof buf, name, "W_v"), n_embd, n_embd, 1);
    tfm_Linear_init(&s->W_o, p, tfm_name(buf, sizeof buf, name, "W_o"), n_embd, n_embd, 1);
    s->n_head = n_head;
    s->block_size = block_size;
    s->dropout = dropout;
}

tfm_tensor *tfm_SynthesizerAttention_forward(tfm_graph *g, const tfm_SynthesizerAttention *s, tfm_tensor *x) {
    int B = x->shape[0], T = x->shape[1], C = x->shape[2], H = s->n_head, d = C / H, L = s->block_size;
    tfm_tensor *h = tfm_split_heads(g, tfm_relu(g, tfm_Linear_forward(g, &s->w1, x)), H);   /* (B,H,T,d) */
    tfm_tensor *A = tfm_matmul(g, tfm_reshape2(g, h, B * H * T, d), s->w2, 0, 0);         /* (BHT,L) */
    A = tfm_add(g, A, s->b2);
    A = tfm_slice(g, tfm_reshape3(g, A, B * H, T, L), 2, 0, T);                            /* (BH,T,T) */
    tfm_mask causal = {.causal = 1, .n_heads = H};
    tfm_tensor *w = tfm_dropout(g, tfm_masked_softmax(g, A, &causal), s->dropout);
    tfm_tensor *v = tfm_split_heads(g, tfm_Linear_forward(g, &s->W_v, x), H);               /* (B,H,T,d) */
    tfm_tensor *y = tfm_matmul(g, w, tfm_reshape3(g, v, B * H, T, d), 0, 0);               /* (BH,T,d) */
    y = tfm_merge_heads(g, tfm_reshape4(g, y, B, H, T, d));                                /* (B,T,C) */
    return tfm_Linear_forward(g, &s->W_o, y);
}
