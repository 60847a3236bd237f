/* tfm nn: the named building blocks of the chapter, each a struct of parameters plus _init/_forward.
 * Names follow d2l / PyTorch: Linear, Embedding, LayerNorm, PositionalEncoding, MultiHeadAttention,
 * PositionWiseFFN, AddNorm. Parameter names are dotted paths ("blocks.0.attn.W_q.weight") so checkpoints
 * and PyTorch fixtures line up one to one. Every model (GPT, Transformer, Bahdanau) uses these; there
 * is no second copy of attention, FFN or norm code.
 */
#ifndef TFM_NN_H
#define TFM_NN_H

#include "tfm/core.h"
#include "tfm/ops.h"

/* Weight init helpers (used by models' init_weights). */
TFM_API void tfm_init_normal(tfm_tensor *t, tfm_rng *r, float std);
TFM_API void tfm_init_const(tfm_tensor *t, float v);
/* PyTorch nn.Linear default: U(-1/sqrt(in), 1/sqrt(in)) */
TFM_API void tfm_init_uniform(tfm_tensor *t, tfm_rng *r, float bound);
/* Xavier/Glorot uniform (d2l's init for seq2seq) */
TFM_API void tfm_init_xavier(tfm_tensor *t, tfm_rng *r);

/* ---------------------------------------------------------------- Linear: y = x W^T + b */
typedef struct {
    tfm_tensor *W;   /* (out, in) "<name>.weight" */
    tfm_tensor *b;   /* (out) "<name>.bias", or NULL */
} tfm_Linear;
TFM_API void tfm_Linear_init(tfm_Linear *m, tfm_params *p, const char *name, int in, int out, int bias);
TFM_API tfm_tensor *tfm_Linear_forward(tfm_graph *g, const tfm_Linear *m, tfm_tensor *x);  /* (...,in) -> (...,out) */

/* ---------------------------------------------------------------- Embedding */
typedef struct {
    tfm_tensor *weight;  /* (num, dim) "<name>.weight" */
} tfm_Embedding;
TFM_API void tfm_Embedding_init(tfm_Embedding *m, tfm_params *p, const char *name, int num, int dim);
TFM_API tfm_tensor *tfm_Embedding_forward(tfm_graph *g, const tfm_Embedding *m, const int *ids, int B, int T); /* (B,T,dim) */

/* ---------------------------------------------------------------- LayerNorm */
typedef struct {
    tfm_tensor *weight, *bias;   /* (C) */
    float eps;
} tfm_LayerNorm;
TFM_API void tfm_LayerNorm_init(tfm_LayerNorm *m, tfm_params *p, const char *name, int C);
TFM_API tfm_tensor *tfm_LayerNorm_forward(tfm_graph *g, const tfm_LayerNorm *m, tfm_tensor *x);

/* ---------------------------------------------------------------- PositionalEncoding (sinusoidal)
 * P[pos, 2i] = sin(pos / 10000^(2i/d)), P[pos, 2i+1] = cos(pos / 10000^(2i/d)). No parameters. */
typedef struct {
    float *P;        /* (max_len, d) */
    int max_len, d;
} tfm_PositionalEncoding;
TFM_API int tfm_PositionalEncoding_init(tfm_PositionalEncoding *m, int max_len, int d);   /* -1: out of memory */
/* MarianMT's layout (Hugging Face's MarianSinusoidalPositionalEmbedding): the same angles, sines in the
 * first half of the vector and cosines in the second: P[pos, k] = sin(pos / 10000^(2k/d)),
 * P[pos, d/2 + k] = cos(pos / 10000^(2k/d)), k < d/2 (d even). */
TFM_API int tfm_PositionalEncoding_init_halves(tfm_PositionalEncoding *m, int max_len, int d);
TFM_API void tfm_PositionalEncoding_free(tfm_PositionalEncoding *m);
/* x (B,T,d) + P[offset : offset+T]; dropout applied by the caller. */
TFM_API tfm_tensor *tfm_PositionalEncoding_forward(tfm_graph *g, const tfm_PositionalEncoding *m, tfm_tensor *x, int offset);

/* ---------------------------------------------------------------- attention scoring */
/* d2l's DotProductAttention: softmax(mask(Q K^T / sqrt(d))) (dropout) V.
 * q (N,Tq,d), k (N,Tk,d), v (N,Tk,dv) where N = B*H; mask rows follow tfm_mask (n_heads = H).
 * If weights_out is non-NULL it receives the (N,Tq,Tk) attention weights (before dropout). */
TFM_API tfm_tensor *tfm_scaled_dot_product_attention(tfm_graph *g, tfm_tensor *q, tfm_tensor *k, tfm_tensor *v,
                                             const tfm_mask *mask, float dropout, tfm_tensor **weights_out);

/* ---------------------------------------------------------------- MultiHeadAttention
 * d2l's MultiHeadAttention with separate key/query size d_k and value size d_v per head:
 *   Q = W_q q  (H*d_k), K = W_k k (H*d_k), V = W_v v (H*d_v), heads attend independently,
 *   concat (H*d_v) -> W_o -> (d_out). */
typedef struct {
    tfm_Linear W_q, W_k, W_v, W_o;
    int n_head, d_k, d_v;
    float dropout;           /* on attention weights */
    int keep_weights;        /* store the last weights in `weights` for inspection */
    tfm_tensor *weights;     /* (B*H, Tq, Tk), valid until the graph is reset */
} tfm_MultiHeadAttention;
/* query_size/key_size/value_size: input feature sizes; d_out: output size. */
TFM_API void tfm_MultiHeadAttention_init(tfm_MultiHeadAttention *m, tfm_params *p, const char *name, int query_size,
                                 int key_size, int value_size, int n_head, int d_k, int d_v, int d_out,
                                 int bias, float dropout);
/* queries (B,Tq,query_size), keys (B,Tk,key_size), values (B,Tk,value_size) -> (B,Tq,d_out).
 * mask: causal and/or key valid lengths (n_heads is filled in here). */
TFM_API tfm_tensor *tfm_MultiHeadAttention_forward(tfm_graph *g, tfm_MultiHeadAttention *m, tfm_tensor *queries,
                                           tfm_tensor *keys, tfm_tensor *values, const tfm_mask *mask);
/* On packed rows: xq (nq, query_size) holds the valid positions q_rows[i] = b*Tq + t of a padded (B,Tq)
 * batch, xkv (nk, key_size) those of the (B,Tk) key/value batch (kv_rows; keys = values). The projections
 * run on the packed rows only; the attention kernel sees the padded (B,T,H*d) layout with zeros at the
 * padding (hidden by the mask, or discarded query rows). -> (nq, d_out), the same rows as the padded
 * forward's. */
TFM_API tfm_tensor *tfm_MultiHeadAttention_forward_packed(tfm_graph *g, tfm_MultiHeadAttention *m, int B, tfm_tensor *xq,
                                                  const int *q_rows, int Tq, tfm_tensor *xkv, const int *kv_rows,
                                                  int Tk, const tfm_mask *mask);
/* The two halves, for decoders that cache keys/values:
 * project keys/values to heads: (B,Tk,*) -> K (B,H,Tk,d_k), V (B,H,Tk,d_v) */
TFM_API void tfm_MultiHeadAttention_project_kv(tfm_graph *g, const tfm_MultiHeadAttention *m, tfm_tensor *keys,
                                       tfm_tensor *values, tfm_tensor **K, tfm_tensor **V);
/* attend with projected K (B,H,Tk,d_k), V (B,H,Tk,d_v): queries (B,Tq,query_size) -> (B,Tq,d_out) */
TFM_API tfm_tensor *tfm_MultiHeadAttention_attend(tfm_graph *g, tfm_MultiHeadAttention *m, tfm_tensor *queries,
                                          tfm_tensor *K, tfm_tensor *V, const tfm_mask *mask);
/* The fused attention op (tfm_attention) is used instead of the exact path (scores, masked softmax,
 * weights @ V, head permutes) when weights are not kept and attention dropout is inactive. Set
 * g->exact_attention = 1 (or the environment variable TFM_EXACT_ATTENTION=1 before tfm_graph_init) to
 * force the exact path for that graph (tests compare the two). */

/* (B,T,H*d) <-> (B,H,T,d) */
TFM_API tfm_tensor *tfm_split_heads(tfm_graph *g, tfm_tensor *x, int n_head);
TFM_API tfm_tensor *tfm_merge_heads(tfm_graph *g, tfm_tensor *x);

/* ---------------------------------------------------------------- PositionWiseFFN */
/* GELU is the tanh approximation (GPT-2's gelu_new); SILU (swish) and GELU_ERF (the exact GELU) serve
 * imported Hugging Face models (MarianMT's activation_function). */
typedef enum { TFM_ACT_RELU, TFM_ACT_GELU, TFM_ACT_SILU, TFM_ACT_GELU_ERF } tfm_activation;
typedef struct {
    tfm_Linear dense1, dense2;
    tfm_activation act;
    float dropout;           /* activation dropout on the hidden layer after act (training only; 0 = none,
                                what _init sets; train-mt --activation-dropout) */
} tfm_PositionWiseFFN;
TFM_API void tfm_PositionWiseFFN_init(tfm_PositionWiseFFN *m, tfm_params *p, const char *name, int d_in, int d_hidden,
                              int d_out, tfm_activation act);
TFM_API tfm_tensor *tfm_PositionWiseFFN_forward(tfm_graph *g, const tfm_PositionWiseFFN *m, tfm_tensor *x);

/* ---------------------------------------------------------------- AddNorm: LayerNorm(dropout(Y) + X) */
typedef struct {
    tfm_LayerNorm ln;
    float dropout;
} tfm_AddNorm;
TFM_API void tfm_AddNorm_init(tfm_AddNorm *m, tfm_params *p, const char *name, int C, float dropout);
TFM_API tfm_tensor *tfm_AddNorm_forward(tfm_graph *g, const tfm_AddNorm *m, tfm_tensor *X, tfm_tensor *Y);

/* Join a prefix and a suffix into a parameter name: "blocks.0" + "attn" -> "blocks.0.attn". */
TFM_API const char *tfm_name(char *buf, size_t n, const char *prefix, const char *suffix);

/* ---------------------------------------------------------------- KV cache (src/nn/kv_cache.c)
 * Buffers that persist across decoding steps (key/value caches).
 *
 * A tfm_kv_cache holds, for n_layer layers, projected keys and values in n_slot slots laid out
 * (n_slot, n_head, max_len, d) outside the graph's arena (malloc'd, or a block the caller gives:
 * tfm_kv_cache_init_in), so a decoding loop may reset its arena between steps. Batch row r lives in slot
 * slot[r]. Attention reads the cache in place (tfm_kv_cache_ref + tfm_attention_kv: the real strides, a
 * length and the row -> slot index), so a step never copies the prefix; appending the new position of every
 * row is O(rows*H*d).
 *
 * Rows are reordered (beam search, dropping finished sentences) by remapping slots:
 *   tfm_kv_cache_reorder  for caches that are appended to (decoder self-attention, one slot per row):
 *                         a new row takes over its parent's slot; only a second child of the same parent
 *                         gets a free slot with the parent's positions 0..len-1 copied into it.
 *   tfm_kv_cache_select   for read-only caches (encoder keys/values, one slot per sentence): rows just
 *                         point at their parent's slot and may share it; nothing is copied.
 * Neither allocates (the scratch is made by tfm_kv_cache_init).
 */
typedef struct {
    int n_layer, n_slot, cap, n_head, max_len, d;
    int len;                 /* positions filled (set by the user); reorder copies positions 0..len-1 */
    float *k, *v;            /* n_layer * n_slot * n_head * max_len * d each */
    int *slot;               /* cap: batch row -> slot */
    int *scratch;            /* cap + n_slot ints for reorder / select */
    long n_copied;           /* slots whose prefix reorder has copied (statistics, tests) */
    int own_kv;              /* k and v were malloc'd by init (else the caller's memory) */
} tfm_kv_cache;

/* n_slot slots, up to cap_rows batch rows (row r starts in slot r, so rows >= n_slot must be created by
 * reorder/select before use). 0, or -1 with a tfm error (out of memory / too large). */
TFM_API int tfm_kv_cache_init(tfm_kv_cache *c, int n_layer, int n_slot, int cap_rows, int n_head, int max_len, int d);
/* The same in the caller's memory: mem holds tfm_kv_cache_floats(...) floats (k, then v); NULL: malloc'd. */
TFM_API int tfm_kv_cache_init_in(tfm_kv_cache *c, float *mem, int n_layer, int n_slot, int cap_rows, int n_head,
                                 int max_len, int d);
/* The floats of k and v together (0 when too large: init refuses those) */
TFM_API size_t tfm_kv_cache_floats(int n_layer, int n_slot, int n_head, int max_len, int d);
TFM_API void tfm_kv_cache_free(tfm_kv_cache *c);
/* Write K, V of shape (rows, T, H*d) (the layout the projections produce; graph tensors) at positions
 * pos..pos+T-1 of layer l, row r into its slot. */
TFM_API void tfm_kv_cache_append(tfm_kv_cache *c, int layer, const tfm_tensor *K, const tfm_tensor *V, int rows, int pos);
/* Positions 0..len-1 of layer l for tfm_attention_kv, in place (valid until the next reorder/select). */
TFM_API tfm_kv_ref tfm_kv_cache_ref(const tfm_kv_cache *c, int layer, int len);
/* new row i = old row idx[i] (i < n_new; idx values < old_rows): see above. */
TFM_API void tfm_kv_cache_reorder(tfm_kv_cache *c, const int *idx, int old_rows, int n_new);
TFM_API void tfm_kv_cache_select(tfm_kv_cache *c, const int *idx, int old_rows, int n_new);


#endif
