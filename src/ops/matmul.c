/* matmul (batched, either operand transposed) and linear (x W^T + b), via tfm_gemm. */
#include "ops/op_impl.h"
#include "ops/vmath.h"
#include "core/mem.h"
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ip: 0 trans_a, 1 trans_b, 2 M, 3 N, 4 K, 5 batch, 6 b_shared (b is 2-D, used by every batch) */
tfm_tensor *tfm_matmul(tfm_graph *g, tfm_tensor *a, tfm_tensor *b, int ta, int tb) {
    OP_BEGIN(g);
    TFM_ASSERT(a->ndim >= 2 && b->ndim >= 2, "matmul: operands must be at least 2-D");
    int ar = a->shape[a->ndim - 2], ac = a->shape[a->ndim - 1];
    int br = b->shape[b->ndim - 2], bc = b->shape[b->ndim - 1];
    int M = ta ? ac : ar, K = ta ? ar : ac;
    int Kb = tb ? bc : br, N = tb ? br : bc;
    TFM_ASSERT(K == Kb, "matmul: inner dims %d vs %d", K, Kb);
    int batch = (int)(a->size / ((size_t)ar * ac));
    int shared = b->ndim == 2;
    TFM_ASSERT(shared || (size_t)batch * br * bc == b->size, "matmul: batch dims differ");
    int shape[TFM_MAX_DIMS];
    for (int i = 0; i < a->ndim - 2; i++) shape[i] = a->shape[i];
    shape[a->ndim - 2] = M;
    shape[a->ndim - 1] = N;
    tfm_tensor *in[2] = {a, b};
    tfm_tensor *out = tfm_tensor_new(g, a->ndim, shape, tfm_any_grad(g, in, 2));
    int q8 = shared && !ta && tb && b->q8 && !out->grad;   /* an int8 weight (a tied output layer), inference */
    TFM_ASSERT(q8 || b->data, "matmul: %s holds no float values (an int8 model loaded for inference)",
               b->name ? b->name : "the weight");
    if (q8)
        tfm_gemm_q8(batch * M, a->data, ac, b->q8, NULL, out->data, N);
    else if (shared && !ta) /* one big GEMM: stack the batches along M */
        tfm_gemm(0, tb, batch * M, N, K, 1.0f, a->data, ac, b->data, bc, 0.0f, out->data, N);
    else
        tfm_gemm_batched(batch, ta, tb, M, N, K, 1.0f, a->data, ac, (size_t)ar * ac, b->data, bc,
                         shared ? 0 : (size_t)br * bc, 0.0f, out->data, N, (size_t)M * N);
    tfm_node *n = tfm_graph_push(g, TFM_OP_MATMUL, out, 2, in);
    if (n) {
        n->ip[0] = ta; n->ip[1] = tb; n->ip[2] = M; n->ip[3] = N; n->ip[4] = K;
        n->ip[5] = batch; n->ip[6] = shared;
    }
    OP_END(g, TFM_OP_MATMUL);
    return out;
}

/* Gradient of C = op(A) op(B) for one batch, accumulated (beta = 1). */
static void matmul_grad_a(int ta, int tb, int M, int N, int K, const float *dC, const float *B, float *dA) {
    int ldb = tb ? K : N;
    if (!ta) tfm_gemm(0, !tb, M, K, N, 1.0f, dC, N, B, ldb, 1.0f, dA, K);   /* dA(M,K) = dC op(B)^T */
    else tfm_gemm(tb, 1, K, M, N, 1.0f, B, ldb, dC, N, 1.0f, dA, M);        /* dA(K,M) = op(B) dC^T */
}
static void matmul_grad_b(int ta, int tb, int M, int N, int K, const float *dC, const float *A, float *dB,
                          int rows) {
    int lda = ta ? M : K;
    (void)M;
    if (!tb) tfm_gemm(!ta, 0, K, N, rows, 1.0f, A, lda, dC, N, 1.0f, dB, N);  /* dB(K,N) = op(A)^T dC */
    else tfm_gemm(1, ta, N, K, rows, 1.0f, dC, N, A, lda, 1.0f, dB, K);       /* dB(N,K) = dC^T op(A) */
}

void tfm_bw_matmul(tfm_node *n) {
    tfm_tensor *a = n->in[0], *b = n->in[1], *c = n->out;
    int ta = n->ip[0], tb = n->ip[1], M = n->ip[2], N = n->ip[3], K = n->ip[4], batch = n->ip[5];
    int shared = n->ip[6];
    size_t sa = (size_t)M * K, sb = shared ? 0 : (size_t)K * N, sc = (size_t)M * N;
    /* Many small independent GEMMs (attention heads): one thread per batch entry (each writes only its
     * own grad slice, so the result is the same for any thread count); big ones thread inside tfm_gemm. */
    int par = batch > 1 && (size_t)M * N * K <= ((size_t)1 << 21) && tfm_get_threads() > 1;
    if (a->grad) {
        if (shared && !ta) matmul_grad_a(0, tb, batch * M, N, K, c->grad, b->data, a->grad);
        else {
            TFM_PAR_FOR(par, schedule(static),
            for (int i = 0; i < batch; i++) {
                matmul_grad_a(ta, tb, M, N, K, c->grad + i * sc, b->data + i * sb, a->grad + i * sa);
            });
        }
    }
    if (b->grad) {
        if (shared && !ta) matmul_grad_b(0, tb, batch * M, N, K, c->grad, a->data, b->grad, batch * M);
        else if (shared) /* every batch entry accumulates into the one dB: keep the order */
            for (int i = 0; i < batch; i++)
                matmul_grad_b(ta, tb, M, N, K, c->grad + i * sc, a->data + i * sa, b->grad, M);
        else {
            TFM_PAR_FOR(par, schedule(static),
            for (int i = 0; i < batch; i++) {
                matmul_grad_b(ta, tb, M, N, K, c->grad + i * sc, a->data + i * sa, b->grad + i * sb, M);
            });
        }
    }
}

/* Checks x (...,in), W (out,in), bias (out) or NULL and makes the (...,out) output of linear-like
 * ops; in[] receives {x, W, bias} for the node. */
static tfm_tensor *linear_output(tfm_graph *g, const char *op, tfm_tensor *x, tfm_tensor *W, tfm_tensor *bias,
                                 tfm_tensor **in) {
    int in_f = tfm_last_dim(x), out_f = W->shape[0];
    TFM_ASSERT(W->ndim == 2 && W->shape[1] == in_f, "%s: x last dim %d, W is (%d,%d)", op, in_f, W->shape[0],
               W->shape[1]);
    TFM_ASSERT(!bias || (int)bias->size == out_f, "%s: bias size %zu != %d", op, bias ? bias->size : 0, out_f);
    int shape[TFM_MAX_DIMS];
    memcpy(shape, x->shape, sizeof shape);
    shape[x->ndim - 1] = out_f;
    in[0] = x;
    in[1] = W;
    in[2] = bias;
    return tfm_tensor_new(g, x->ndim, shape, tfm_any_grad(g, in, 3));
}

/* ---------------------------------------------------------------- weights packed for decoding */
int tfm_weight_packs_init(tfm_weight_packs *p, const tfm_params *params) {
    return tfm_weight_packs_init_many(p, &params, 1);
}

/* a 2-D weight with float values (not int8, not held packed already) */
static int packable(const tfm_tensor *W) { return W->ndim == 2 && W->data && !W->q8; }

int tfm_weight_packs_init_many(tfm_weight_packs *p, const tfm_params *const *params, int n_params) {
    memset(p, 0, sizeof *p);
    if (!tfm_gemm_packed_b_floats(1, 1)) return 0; /* the OpenBLAS build: nothing to pack */
    int n = 0;
    for (int k = 0; k < n_params; k++)   /* int8 weights are not packed (tfm_gemm_q8), nor held ones */
        for (int i = 0; i < params[k]->n; i++) n += packable(params[k]->t[i]);
    if (!n) return 0;
    p->t = calloc((size_t)n, sizeof *p->t);
    p->packed = calloc((size_t)n, sizeof *p->packed);
    p->state = calloc((size_t)n, sizeof *p->state);   /* nothing packed until used */
    if (!p->t || !p->packed || !p->state) goto fail;
    size_t total = 0;   /* floats; each copy starts 64-aligned: the kernels load B panels aligned */
    for (int k = 0; k < n_params; k++)
        for (int i = 0; i < params[k]->n; i++) {
            const tfm_tensor *W = params[k]->t[i];
            if (!packable(W)) continue;
            p->t[p->n++] = W;
            total += (tfm_gemm_packed_b_floats(W->shape[0], W->shape[1]) + 15) / 16 * 16;
        }
    p->block_bytes = sizeof(float) * total;
    if (!(p->block = tfm_weights_alloc_(p->block_bytes))) goto fail;
    size_t off = 0;
    for (int i = 0; i < p->n; i++) {
        p->packed[i] = p->block + off;
        off += (tfm_gemm_packed_b_floats(p->t[i]->shape[0], p->t[i]->shape[1]) + 15) / 16 * 16;
    }
    return 0;
fail:
    tfm_weight_packs_free(p);
    return -1;
}

void tfm_weight_packs_refresh(tfm_weight_packs *p) {
    for (int i = 0; i < p->n; i++) __atomic_store_n(&p->state[i], 0, __ATOMIC_RELEASE);   /* packed at next use */
}

void tfm_weight_packs_free(tfm_weight_packs *p) {
    tfm_weights_free_(p->block, p->block_bytes);
    free(p->packed);
    free(p->t);
    free(p->state);
    memset(p, 0, sizeof *p);
}

/* can W be held packed: 2-D floats whose packed copy is exactly its size, 64-byte aligned as the kernels read
 * panels (a parameter's place in its block follows the sizes before it) */
static int holdable(const tfm_tensor *W) {
    return W->ndim == 2 && W->data && !W->q8 && tfm_gemm_packed_b_floats(W->shape[0], W->shape[1]) == W->size &&
           (uintptr_t)W->data % 64 == 0;
}

/* W packed over its own values through scratch (W->size floats) */
static void hold(tfm_tensor *W, float *scratch) {
    memcpy(scratch, W->data, sizeof(float) * W->size);
    tfm_gemm_pack_b(1, W->shape[0], W->shape[1], scratch, W->shape[1], W->data);
    W->packed = W->data;
    W->data = NULL;
}

int tfm_params_hold_packed(tfm_params *p, const char *part) {
    size_t most = 0;
    for (int i = 0; i < p->n; i++)
        if (holdable(p->t[i]) && strstr(p->t[i]->name, part) && p->t[i]->size > most) most = p->t[i]->size;
    if (!most) return 0;
    float *scratch = tfm_weights_alloc_(sizeof(float) * most);   /* one for all, on huge pages from 512 KiB */
    if (!scratch) return -1;
    int n = 0;
    for (int i = 0; i < p->n; i++)
        if (holdable(p->t[i]) && strstr(p->t[i]->name, part)) hold(p->t[i], scratch), n++;
    tfm_weights_free_(scratch, sizeof(float) * most);
    return n;
}

/* copy i of p if made; else made here when `make` (its first use), or NULL (not to be made now, or another thread
 * is making it: the caller multiplies unpacked) */
static const float *pack_made(const tfm_weight_packs *p, int i, int make) {
    int state = __atomic_load_n(&p->state[i], __ATOMIC_ACQUIRE), zero = 0;
    if (state == 2) return p->packed[i];
    if (!make || state != 0 ||
        !__atomic_compare_exchange_n(&p->state[i], &zero, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        return NULL;
    const tfm_tensor *W = p->t[i];
    tfm_gemm_pack_b(1, W->shape[0], W->shape[1], W->data, W->shape[1], p->packed[i]);
    __atomic_store_n(&p->state[i], 2, __ATOMIC_RELEASE);
    return p->packed[i];
}

/* W's packed copy if g decodes with packed weights and W is one of them, else NULL. A product of one row (a
 * decoding step of one sentence) does not make it: it reads W once either way (tfm_gemm's GEMV), so the copy
 * would cost more than it saves until a product of more rows asks for it. */
static const float *packed_weight(const tfm_graph *g, const tfm_tensor *W, int rows) {
    const tfm_weight_packs *p = g->packs;
    if (!p) return NULL;
    for (int i = 0; i < p->n; i++)
        if (p->t[i]->data == W->data) return pack_made(p, i, rows > 1);
    return NULL;
}

/* y = x W^T (+ bias, or + beta y): with W's packed copy where g has one; by W's int8 form (an int8 model)
 * where the output tracks no grad (inference; beta is 0 there) */
static void linear_gemm(const tfm_graph *g, const tfm_tensor *x, const tfm_tensor *W, const float *bias, float beta,
                        float *y, int tracks_grad) {
    int in_f = tfm_last_dim(x), out_f = W->shape[0], rows = (int)tfm_rows(x);
    if (W->q8 && !tracks_grad && beta == 0.0f) {
        tfm_gemm_q8(rows, x->data, in_f, W->q8, bias, y, out_f);
        return;
    }
    if (W->packed) {   /* held only packed (tfm_params_hold_packed): the tiles, one row a GEMV over the panels */
        TFM_ASSERT(!tracks_grad, "linear: %s is held packed for inference and takes no grad", W->name ? W->name : "W");
        if (bias) tfm_gemm_bias(0, 1, rows, out_f, in_f, 1.0f, x->data, in_f, NULL, in_f, W->packed, bias, y, out_f);
        else tfm_gemm_pb(0, 1, rows, out_f, in_f, 1.0f, x->data, in_f, NULL, in_f, W->packed, beta, y, out_f);
        return;
    }
    TFM_ASSERT(W->data, "linear: %s holds no float values (an int8 model loaded for inference)",
               W->name ? W->name : "the weight");
    if (g->gemm_bf16) {
        tfm_gemm_bf16(0, 1, rows, out_f, in_f, 1.0f, x->data, in_f, W->data, in_f, bias, beta, y, out_f);
        return;
    }
    const float *Wp = packed_weight(g, W, rows);
    if (bias) tfm_gemm_bias(0, 1, rows, out_f, in_f, 1.0f, x->data, in_f, W->data, in_f, Wp, bias, y, out_f);
    else if (Wp) tfm_gemm_pb(0, 1, rows, out_f, in_f, 1.0f, x->data, in_f, W->data, in_f, Wp, beta, y, out_f);
    else tfm_gemm(0, 1, rows, out_f, in_f, 1.0f, x->data, in_f, W->data, in_f, beta, y, out_f);
}

/* y = x W^T + b */
tfm_tensor *tfm_linear(tfm_graph *g, tfm_tensor *x, tfm_tensor *W, tfm_tensor *bias) {
    OP_BEGIN(g);
    tfm_tensor *in[3];
    tfm_tensor *y = linear_output(g, "linear", x, W, bias, in);
    linear_gemm(g, x, W, bias ? bias->data : NULL, 0.0f, y->data, y->grad != NULL);
    tfm_node *n = tfm_graph_push(g, TFM_OP_LINEAR, y, bias ? 3 : 2, in);
    if (n) n->ip[6] = g->gemm_bf16;
    OP_END(g, TFM_OP_LINEAR);
    return y;
}

/* The grads of x, W and the bias of y = x W^T + b from dy, the grad of the (pre-activation) output; x's and
 * W's are assigned when fresh (tfm_bw_fresh: W's after tfm_params_release_grad), the bias's is added to. */
static void linear_grads(tfm_node *n, const float *dy) {
    tfm_tensor *x = n->in[0], *W = n->in[1], *b = n->n_in > 2 ? n->in[2] : NULL;
    int in_f = tfm_last_dim(x), out_f = W->shape[0], rows = (int)tfm_rows(x);
    if (n->ip[6]) { /* --precision bf16: the backward's GEMMs too */
        if (x->grad)
            tfm_gemm_bf16(0, 0, rows, in_f, out_f, 1.0f, dy, out_f, W->data, in_f, NULL, tfm_bw_beta(n, 0), x->grad, in_f);
        if (W->grad) tfm_gemm_bf16(1, 0, out_f, in_f, rows, 1.0f, dy, out_f, x->data, in_f, NULL, tfm_bw_beta(n, 1), W->grad, in_f);
    } else {
        if (x->grad) tfm_gemm(0, 0, rows, in_f, out_f, 1.0f, dy, out_f, W->data, in_f, tfm_bw_beta(n, 0), x->grad, in_f);
        if (W->grad) tfm_gemm(1, 0, out_f, in_f, rows, 1.0f, dy, out_f, x->data, in_f, tfm_bw_beta(n, 1), W->grad, in_f);
    }
    if (b && b->grad) tfm_add_column_sums(dy, rows, out_f, b->grad);
}

void tfm_bw_linear(tfm_node *n) { linear_grads(n, n->out->grad); }

/* ---------------------------------------------------------------- linear + bias + GELU, fused */
/* Row chunks of the (rows, out_f) result are taken by threads dynamically (small results stay on one thread). */
/* y = act(x W^T + b), act = GELU (saved: GELU' of the pre-activation, computed with y from the same tanh,
 * so the backward only multiplies; it becomes the pre-activation's gradient in place) or ReLU (no saved
 * buffer: y > 0 exactly where the pre-activation is > 0; backward masks y->grad in place). ip[7] guards
 * against a second backward over the same forward. */
static tfm_tensor *linear_act(tfm_graph *g, tfm_op op, tfm_tensor *x, tfm_tensor *W, tfm_tensor *bias) {
    OP_BEGIN(g);
    tfm_tensor *in[3];
    tfm_tensor *y = linear_output(g, tfm_op_name(op), x, W, bias, in);
    int out_f = W->shape[0], rows = (int)tfm_rows(x);
    float *pre = op == TFM_OP_LINEAR_GELU ? tfm_arena_alloc(&g->arena, sizeof(float) * (size_t)rows * out_f) : y->data;
    linear_gemm(g, x, W, NULL, 0.0f, pre, y->grad != NULL);
    const float *b = bias ? bias->data : NULL;
    const int chunk = tfm_dyn_chunk((size_t)rows);
    TFM_PAR_FOR((size_t)rows * out_f >= 16384, schedule(dynamic, 1),
    for (int r0 = 0; r0 < rows; r0 += chunk) {
        int r1 = r0 + chunk < rows ? r0 + chunk : rows;
        size_t o = (size_t)r0 * out_f, n = (size_t)(r1 - r0) * out_f;
        if (op == TFM_OP_LINEAR_GELU && !y->grad) tfm_vgelu(y->data + o, pre + o, b, out_f, n);
        else if (op == TFM_OP_LINEAR_GELU) tfm_vgelu_save_d(y->data + o, pre + o, b, out_f, n);
        else tfm_vbias_relu(y->data + o, b, out_f, n);
    });
    tfm_node *n = tfm_graph_push(g, op, y, bias ? 3 : 2, in);
    if (n) n->ip[6] = g->gemm_bf16;
    if (n && op == TFM_OP_LINEAR_GELU) n->saved = pre;
    OP_END(g, op);
    return y;
}

tfm_tensor *tfm_linear_gelu(tfm_graph *g, tfm_tensor *x, tfm_tensor *W, tfm_tensor *bias) {
    return linear_act(g, TFM_OP_LINEAR_GELU, x, W, bias);
}

tfm_tensor *tfm_linear_relu(tfm_graph *g, tfm_tensor *x, tfm_tensor *W, tfm_tensor *bias) {
    return linear_act(g, TFM_OP_LINEAR_RELU, x, W, bias);
}

void tfm_bw_linear_act(tfm_node *n) {
    tfm_tensor *x = n->in[0], *y = n->out;
    int out_f = n->in[1]->shape[0], rows = (int)tfm_rows(x);
    TFM_ASSERT(!n->ip[7], "%s: backward called twice on one forward", tfm_op_name(n->op));
    n->ip[7] = 1;
    int gelu = n->op == TFM_OP_LINEAR_GELU;
    float *d = gelu ? n->saved : y->grad; /* GELU' (saved) or y's grad: becomes the pre-activation's grad */
    const int chunk = tfm_dyn_chunk((size_t)rows);
    TFM_PAR_FOR((size_t)rows * out_f >= 16384, schedule(dynamic, 1),
    for (int r0 = 0; r0 < rows; r0 += chunk) {
        int r1 = r0 + chunk < rows ? r0 + chunk : rows;
        size_t o = (size_t)r0 * out_f, m = (size_t)(r1 - r0) * out_f;
        if (gelu) tfm_vmul(d + o, y->grad + o, m);
        else tfm_vrelu_mask(d + o, y->data + o, m);
    });
    linear_grads(n, d);
}
