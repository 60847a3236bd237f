/* Private helpers shared by the op implementations in src/ops/. */
#ifndef TFM_OP_IMPL_H
#define TFM_OP_IMPL_H
#include "tfm/core.h"
#include "core/graph_impl.h"
#include "core/par.h"
#include <omp.h>
#include <stddef.h>
#include <string.h>
#include "tfm/kernels.h"
#include "tfm/ops.h"

/* Calls the op's backward kernel: accumulates into the grads of n->in[]. */
void tfm_op_backward(tfm_node *n);

/* Backward: does the op assign in[k]'s grad (fresh, tfm_backward) rather than add to it? As a GEMM beta. */
static inline int tfm_bw_fresh(const tfm_node *n, int k) { return (int)(n->fresh >> k) & 1; }
static inline float tfm_bw_beta(const tfm_node *n, int k) { return tfm_bw_fresh(n, k) ? 0.0f : 1.0f; }

/* Does any input track grad (so the output must, and a node is recorded)? */
/* Chunk for schedule(dynamic) over n independent rows: about 8 chunks per thread, so a thread the OS
 * deschedules holds up only its current chunk. Rows are computed independently, so results do not
 * depend on which thread takes which chunk. */
static inline int tfm_dyn_chunk(size_t n) {
    size_t c = n / ((size_t)omp_get_max_threads() * 8);
    return c < 1 ? 1 : c > 1 << 20 ? 1 << 20 : (int)c;
}

static inline int tfm_any_grad(const tfm_graph *g, tfm_tensor **in, int n) {
    if (!g->grad_enabled) return 0;
    for (int i = 0; i < n; i++)
        if (in[i] && in[i]->grad) return 1;
    return 0;
}

/* Dropout's counter-based RNG: with a 64-bit key drawn from g->rng per op (tfm_drop_key), element i is
 * kept iff tfm_drop_hash(key + i) >= p * 2^32. Fused ops that include a dropout draw the same key and
 * bits as tfm_dropout would, so fusing changes no number; a backward regenerates the mask. */
static inline uint32_t tfm_drop_hash(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return (uint32_t)((z ^ (z >> 31)) >> 32);
}
/* v if keep, else +0: v is computed whatever keep says and its bits cleared when dropped, a select the
 * compiler vectorises (it may not hoist a multiply out from under a condition: it could trap) */
static inline float tfm_keep_or_zero(float v, uint8_t keep) {
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    u &= 0u - (uint32_t)(keep != 0);
    memcpy(&v, &u, sizeof v);
    return v;
}
static inline uint64_t tfm_drop_key(tfm_graph *g) {
    uint64_t hi = tfm_rng_u32(&g->rng);
    return (hi << 32) | tfm_rng_u32(&g->rng);
}
/* The global-batch element offset of a dropout over `size` elements of this graph's slice (see
 * tfm_graph.drop_samples): 0 unless the graph computes a slice. Added to the key. */
static inline uint64_t tfm_drop_offset(const tfm_graph *g, size_t size) {
    if (g->drop_samples <= 0) return 0;
    TFM_ASSERT(size % (size_t)g->drop_samples == 0, "dropout over %zu elements: not sample-major for a slice of %ld samples",
               size, g->drop_samples);
    return (uint64_t)g->drop_sample0 * (size / (size_t)g->drop_samples);
}
static inline uint32_t tfm_drop_thresh(float p) { return (uint32_t)((double)p * 4294967296.0); }

/* Profile bracket for forward kernels: time is added to g->op_time[op]. */
#define OP_BEGIN(g) double op_t0_ = (g)->profile ? tfm_now() : 0
#define OP_END(g, op) do { if ((g)->profile) (g)->op_time[op] += tfm_now() - op_t0_; } while (0)

/* out[c] += sum_r m[r*cols + c]. Threads split the columns, so the summation order is fixed
 * (deterministic for any thread count). */
void tfm_add_column_sums(const float *m, int rows, int cols, float *out);

/* Backward kernels, one per op (defined next to their forward). */
void tfm_bw_matmul(tfm_node *n);
void tfm_bw_linear(tfm_node *n);
void tfm_bw_add(tfm_node *n);
void tfm_bw_sub(tfm_node *n);
void tfm_bw_mul(tfm_node *n);
void tfm_bw_scale(tfm_node *n);
void tfm_bw_add_scalar(tfm_node *n);
void tfm_bw_unary(tfm_node *n);      /* gelu relu tanh sigmoid exp square */
void tfm_bw_reduce(tfm_node *n);     /* sum mean */
void tfm_bw_dropout(tfm_node *n);
void tfm_bw_embedding(tfm_node *n);
void tfm_bw_layernorm(tfm_node *n);
void tfm_bw_softmax(tfm_node *n);
void tfm_bw_cross_entropy(tfm_node *n);
void tfm_bw_sym_kl(tfm_node *n);
void tfm_bw_permute(tfm_node *n);
void tfm_bw_concat(tfm_node *n);
void tfm_bw_slice(tfm_node *n);
void tfm_bw_add_outer(tfm_node *n);   /* broadcast.c */
void tfm_bw_linear_act(tfm_node *n);  /* matmul.c: linear_gelu, linear_relu */
void tfm_bw_add_layernorm(tfm_node *n); /* norm.c */
void tfm_bw_rows(tfm_node *n);          /* shape.c: gather_rows, scatter_rows */
void tfm_bw_attention(tfm_node *n);   /* attention.c (fused, flash-style) */
#endif
