/* tfm ops: differentiable operations on tensors. Each records one node on the graph's tape
 * (when grad is tracked) and has a backward kernel; every backward is checked against finite
 * differences in tests/unit/test_gradcheck.c.
 *
 * Shapes are written (B,T,C)-style. All tensors are contiguous row-major float32.
 */
#ifndef TFM_OPS_H
#define TFM_OPS_H

#include "tfm/core.h"

/* C = op(A) @ op(B). a: (...,M,K) (or (...,K,M) if trans_a); b: (...,K,N) (or (...,N,K) if trans_b).
 * Leading (batch) dims of a and b must match, or b may be 2-D and is then shared by every batch. */
TFM_API tfm_tensor *tfm_matmul(tfm_graph *g, tfm_tensor *a, tfm_tensor *b, int trans_a, int trans_b);
/* y = x W^T + b, PyTorch layout: x (...,in), W (out,in), bias (out) or NULL -> (...,out). A W held in int8
 * (W->q8, an int8 model) is multiplied by tfm_gemm_q8 when y tracks no grad (inference), else by its
 * dequantized floats; the same for linear_gelu/relu below and for tfm_matmul(a, W, 0, 1) with a 2-D W. */
TFM_API tfm_tensor *tfm_linear(tfm_graph *g, tfm_tensor *x, tfm_tensor *W, tfm_tensor *bias);
/* Weights packed once for decoding. tfm_linear and its fused variants multiply by W through tfm_gemm,
 * which packs W into 16-wide panels on every call; during decoding (few rows per call, the same weights
 * for thousands of calls) that packing is a large share of the time. tfm_weight_packs_init sets aside room
 * for every 2-D parameter's packed copy (as much memory again as those weights); a graph whose `packs` points
 * at the set multiplies by the packed copy (tfm_gemm_pb: the same bits), which the first tfm_linear of more
 * than one row that reads W makes (one thread packs; another that meets it half made multiplies unpacked that
 * once: the same bits; a one-row product reads W as it is, tfm_gemm's GEMV, and makes no copy), so a weight no
 * GEMM reads (greedy with the screen never multiplies by the tied output layer), or only one-row products read
 * (a decoder's weights under greedy batches of one), is never packed and its room never touched. The copies do not follow the weights: tfm_weight_packs_refresh marks
 * them stale after the weights changed (train-mt's validation; each is packed again at its next use), and it
 * must not run while a graph decodes with the set. An OpenBLAS build packs nothing (the set is empty), nor is
 * a weight held in int8 (tensor q8, tfm quantize) packed: tfm_linear multiplies by its int8 form. */
typedef struct tfm_weight_packs {
    int n;
    const tfm_tensor **t;     /* the weights (tfm_linear finds W by its data pointer) */
    float **packed;           /* tfm_gemm_pack_b(1, out, in, W) of each, all in one block: */
    float *block;             /* one mapping (huge pages where the kernel gives them: fewer first-touch faults) */
    size_t block_bytes;
    int *state;               /* each weight's copy: 0 not made, 1 being made, 2 made */
} tfm_weight_packs;
TFM_API int tfm_weight_packs_init(tfm_weight_packs *p, const tfm_params *params);   /* 0, or -1 (out of memory) */
/* One set over the weights of several models (an ensemble decoding on one graph). */
TFM_API int tfm_weight_packs_init_many(tfm_weight_packs *p, const tfm_params *const *params, int n_params);
TFM_API void tfm_weight_packs_refresh(tfm_weight_packs *p);
TFM_API void tfm_weight_packs_free(tfm_weight_packs *p);
/* Linear weights that will never change, held once: every parameter of p whose dotted name contains `part`
 * ("blocks.": a Transformer's or a GPT's blocks) and that can be held has its values rewritten in place into the
 * packed layout (W->packed; W->data becomes NULL), through one scratch copy, so a model loaded for inference
 * needs neither a second copy nor its fresh memory. tfm_linear multiplies by them (from 2 rows the same bits as
 * by the floats; one row by a GEMV over the panels, to float accuracy); nothing else can read them, and they take
 * no grad. Only a 2-D fp32 W whose rows fill whole 16-wide panels (out % 16 == 0: the packed copy is then
 * exactly its size) and whose values start 64-byte aligned (as the kernels read panels) can be held; an OpenBLAS
 * build holds none. tfm_weight_packs_init skips held weights. How many were held, or -1 (out of memory: none). */
TFM_API int tfm_params_hold_packed(tfm_params *p, const char *part);

/* gelu(x W^T + b) as one op: bias and GELU are applied in one vectorised pass right after the GEMM
 * (the pre-activation is kept for the backward, which overwrites it with its gradient: one backward
 * per forward, as everywhere in tfm). */
TFM_API tfm_tensor *tfm_linear_gelu(tfm_graph *g, tfm_tensor *x, tfm_tensor *W, tfm_tensor *bias);
/* relu(x W^T + b), fused: no pre-activation tensor is kept (the backward masks by the output). */
TFM_API tfm_tensor *tfm_linear_relu(tfm_graph *g, tfm_tensor *x, tfm_tensor *W, tfm_tensor *bias);

/* Elementwise. tfm_add/tfm_sub broadcast b over a's leading dims when b's shape equals a's trailing
 * dims (e.g. (B,T,C) + (T,C) or (B,T,C) + (C)). tfm_mul requires equal shapes. */
TFM_API tfm_tensor *tfm_add(tfm_graph *g, tfm_tensor *a, tfm_tensor *b);
TFM_API tfm_tensor *tfm_sub(tfm_graph *g, tfm_tensor *a, tfm_tensor *b);
TFM_API tfm_tensor *tfm_mul(tfm_graph *g, tfm_tensor *a, tfm_tensor *b);
TFM_API tfm_tensor *tfm_scale(tfm_graph *g, tfm_tensor *x, float s);
TFM_API tfm_tensor *tfm_add_scalar(tfm_graph *g, tfm_tensor *x, float s);
TFM_API tfm_tensor *tfm_gelu(tfm_graph *g, tfm_tensor *x);      /* tanh approximation (PyTorch approximate='tanh') */
TFM_API tfm_tensor *tfm_relu(tfm_graph *g, tfm_tensor *x);
TFM_API tfm_tensor *tfm_tanh(tfm_graph *g, tfm_tensor *x);
TFM_API tfm_tensor *tfm_sigmoid(tfm_graph *g, tfm_tensor *x);
TFM_API tfm_tensor *tfm_exp(tfm_graph *g, tfm_tensor *x);
TFM_API tfm_tensor *tfm_square(tfm_graph *g, tfm_tensor *x);
/* Activations of imported models (Hugging Face's ACT2FN): silu/swish x*sigmoid(x), and the exact GELU
 * 0.5 x (1 + erf(x/sqrt 2)) (PyTorch approximate='none'). */
TFM_API tfm_tensor *tfm_silu(tfm_graph *g, tfm_tensor *x);
TFM_API tfm_tensor *tfm_gelu_erf(tfm_graph *g, tfm_tensor *x);

/* Reductions to a scalar (shape (1)). */
TFM_API tfm_tensor *tfm_sum(tfm_graph *g, tfm_tensor *x);
TFM_API tfm_tensor *tfm_mean(tfm_graph *g, tfm_tensor *x);

/* out[..., :] = table[ids[...], :]. table (V,C); ids has tfm_shape_size(ndim,shape) entries, each in [0,V).
 * ids are copied. Result shape (shape..., C). */
TFM_API tfm_tensor *tfm_embedding(tfm_graph *g, tfm_tensor *table, const int *ids, int ndim, const int *shape);

/* LayerNorm over the last dim (biased variance, like PyTorch). w, b: (C) or NULL. */
TFM_API tfm_tensor *tfm_layernorm(tfm_graph *g, tfm_tensor *x, tfm_tensor *w, tfm_tensor *b, float eps);

/* d2l's AddNorm as one op: LayerNorm(x + dropout(y, p)) over the last dim (w, b: (C) or NULL). Same
 * numbers as tfm_layernorm(tfm_add(tfm_dropout(y, p), x)) (same dropout bits), with one saved (rows, C)
 * buffer instead of three intermediate tensors, their grads and a mask. */
TFM_API tfm_tensor *tfm_add_layernorm(tfm_graph *g, tfm_tensor *x, tfm_tensor *y, float p, tfm_tensor *w, tfm_tensor *b,
                              float eps);

/* Masks for softmax over the last dim of x viewed as (n_batch, n_heads, Tq, Tk):
 *   causal:        key j is hidden from query i when j > i + (Tk - Tq)
 *   valid_lens:    key j is hidden when j >= len, len = valid_lens[b] (per batch row)
 *                  or valid_lens[b*Tq + i] when per_query is set (d2l's 2-D valid_lens)
 * Hidden scores are replaced by -1e6 before the softmax (d2l's masked_softmax), so a row with no
 * visible key becomes uniform. n_heads = 1 when x is (B,Tq,Tk). */
typedef struct {
    int causal;
    const int *valid_lens;   /* NULL: none */
    int per_query;
    int n_heads;             /* rows of x per batch entry are n_heads*Tq; 0 means 1 */
} tfm_mask;
TFM_API tfm_tensor *tfm_softmax(tfm_graph *g, tfm_tensor *x);                         /* last dim */
TFM_API tfm_tensor *tfm_masked_softmax(tfm_graph *g, tfm_tensor *x, const tfm_mask *m);

/* Fused multi-head attention softmax(scale * Q K^T, mask) V without materialising the score matrix
 * (online softmax over key tiles; the backward recomputes scores from the saved row logsumexp).
 * q (B,Tq,H*dk) -> out (B,Tq,H*dv). k, v: (B,Tk,H*dk), (B,Tk,H*dv), or with kv_heads_first
 * (B,H,Tk,dk), (B,H,Tk,dv). mask: as tfm_masked_softmax with n_heads = H (its n_heads is ignored).
 * No weights output: use the exact path for that. The row logsumexp (B,H,Tq) is saved.
 * When Tk <= 128 and grad is tracked (training on short sequences) or Tq > 2 (an encoder, a prompt; without grad
 * up to Tk 512) the tile is one batch entry's (H,Tq,Tk) block instead of a key tile: scores and probabilities formed whole (faster
 * on CPU at these sizes, and only up to each row's last visible key); with grad the probabilities (B,H,Tq,Tk rounded up to 8)
 * are kept for the backward (AVX2 and portable paths, at most 64 MiB) or recomputed there from each row's
 * saved max and sum, with the same bits. Still no permutes. g->attention_tiled = 1 disables the per-entry
 * variant, g->attention_recompute = 1 / -1 makes it always recompute / keep (tests). */
TFM_API tfm_tensor *tfm_attention(tfm_graph *g, tfm_tensor *q, tfm_tensor *k, tfm_tensor *v, int n_head,
                          int kv_heads_first, const tfm_mask *mask, float scale);
/* The same with inverted dropout p on the attention weights when g->training (the per-batch-entry
 * variant only: requires tfm_attention_supports_dropout(Tk)); the mask bits equal tfm_dropout's on the
 * (B*H,Tq,Tk) weights for the same graph RNG state, and the backward regenerates them from the key. */
TFM_API tfm_tensor *tfm_attention_dropout(tfm_graph *g, tfm_tensor *q, tfm_tensor *k, tfm_tensor *v, int n_head,
                                  int kv_heads_first, const tfm_mask *mask, float scale, float dropout);
TFM_API int tfm_attention_supports_dropout(const tfm_graph *g, int Tk);
/* Keys/values read in place from a decoding cache instead of tensors: for batch row b, head h and key
 * position j < len, the key is k + slot*sb + h*sh + j*st (feature stride 1; d_k = q's head size) and the
 * value the same offset of v (d_v = dv), with slot = row[b] (row NULL: slot = b). Rows may share a slot
 * (the encoder keys/values of one sentence read by all its beams). See tfm_kv_cache_ref (decode.h). */
typedef struct {
    const float *k, *v;
    const int *row;          /* batch row -> slot, or NULL */
    size_t sb, sh, st;       /* strides (floats) of slot, head and position */
    int len, dv;
} tfm_kv_ref;
/* tfm_attention with K/V from a tfm_kv_ref: the tiled kernel, so the same numbers as tfm_attention on a
 * contiguous copy (B,H,len,d) of the cached rows, without the copy. Inference only: q must not track grad
 * (no node is recorded). */
TFM_API tfm_tensor *tfm_attention_kv(tfm_graph *g, tfm_tensor *q, const tfm_kv_ref *kv, int n_head, const tfm_mask *mask,
                             float scale);

/* Inverted dropout: zero with prob p, scale kept by 1/(1-p). Identity unless g->training && p > 0. */
TFM_API tfm_tensor *tfm_dropout(tfm_graph *g, tfm_tensor *x, float p);
/* The same for a time-major (T, B, ...) tensor (a GRU's layer input): on a graph that computes a slice of
 * the global batch (tfm_graph.drop_samples, drop_total) each element draws the bits of its place in the
 * global (T, drop_total, ...) tensor, so a sample's mask does not depend on the split; otherwise (one
 * process) it is tfm_dropout. */
TFM_API tfm_tensor *tfm_dropout_time_major(tfm_graph *g, tfm_tensor *x, float p);

/* Mean cross-entropy of logits (N,V) (or (...,V)) against targets (N entries), PyTorch semantics:
 * targets equal to ignore_index are skipped and the mean is over the rest; label smoothing eps mixes
 * the one-hot target with the uniform distribution: loss = (1-eps)*nll + eps*mean_v(-log p_v).
 * Fused log-softmax + NLL. Returns a scalar (1). */
TFM_API tfm_tensor *tfm_cross_entropy(tfm_graph *g, tfm_tensor *logits, const int *targets,
                              int ignore_index, float label_smoothing);

/* R-Drop's regulariser (Liang et al. 2021): the symmetric KL divergence 0.5 (KL(p||q) + KL(q||p)) between the
 * softmax distributions p of logits a and q of logits b (both (N,V) or (...,V), the same shape), per row
 * 0.5 sum_v (p_v - q_v)(log p_v - log q_v), averaged over the rows whose target is not ignore_index (targets:
 * N entries, as tfm_cross_entropy's; only compared with ignore_index). Gradients flow into both a and b. Returns a
 * scalar (1); 0 when every row is ignored. */
TFM_API tfm_tensor *tfm_sym_kl(tfm_graph *g, tfm_tensor *a, tfm_tensor *b, const int *targets, int ignore_index);

/* 4-D permute (copy): out.shape[i] = x.shape[perm[i]]. E.g. (B,T,H,D) -> (B,H,T,D) is {0,2,1,3}. */
TFM_API tfm_tensor *tfm_permute(tfm_graph *g, tfm_tensor *x, int p0, int p1, int p2, int p3);
/* Concatenate n tensors along axis (all other dims equal). */
TFM_API tfm_tensor *tfm_concat(tfm_graph *g, tfm_tensor **xs, int n, int axis);
/* x[..., start:start+len, ...] along axis (copy). */
TFM_API tfm_tensor *tfm_slice(tfm_graph *g, tfm_tensor *x, int axis, int start, int len);
/* Rows = vectors along the last dim (x viewed as (R, C)). gather: (n, C) with out[i] = x[idx[i]].
 * scatter: a new tensor of `shape` (last dim C), zero except row idx[i] = x[i] (idx distinct). Each is the
 * other's backward; idx is copied. Packing the valid positions of a padded batch: gather them, run
 * row-wise ops on (n, C), scatter back where a padded layout is needed (attention). */
TFM_API tfm_tensor *tfm_gather_rows(tfm_graph *g, tfm_tensor *x, const int *idx, int n);
TFM_API tfm_tensor *tfm_scatter_rows(tfm_graph *g, tfm_tensor *x, const int *idx, int ndim, const int *shape);

/* out[b,i,j,:] = a[b,i,:] + c[b,j,:]. a (B,Tq,h), c (B,Tk,h) -> (B,Tq,Tk,h). Backward sums over the
 * broadcast axis. (d2l: queries.unsqueeze(2) + keys.unsqueeze(1).) */
TFM_API tfm_tensor *tfm_add_outer(tfm_graph *g, tfm_tensor *a, tfm_tensor *c);
/* tfm_backward (core.h) replays the tape through the ops' backward kernels: src/ops/dispatch.c. */

#endif
