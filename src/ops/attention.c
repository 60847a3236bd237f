/* Fused multi-head attention (flash-attention style, for CPU).
 *
 * out[b,i,h,:] = sum_j softmax_j(scale * q[b,i,h,:] . k[b,h,j,:]) v[b,h,j,:], with the causal and
 * valid-length masks of tfm_mask. Q and the output stay in the (B,T,H*d) layout the projections produce,
 * K/V are read either in that layout or head-major (B,H,T,d) (a KV cache): no permute copies.
 *
 * Forward: per (batch, head) and query row, keys are visited in tiles of TILE; only one tile of scores
 * exists at a time, combined with an online softmax (running max and sum). Only the row logsumexp is
 * saved. Backward recomputes the probabilities tile by tile from the logsumexp:
 *   p = exp(s - lse), dV_j += p_j dO_i, dp_j = dO_i . v_j, ds_j = p_j (dp_j - dO_i . O_i),
 *   dQ_i += scale ds_j k_j, dK_j += scale ds_j q_i.
 * One thread owns a whole (batch, head): no atomics, and the same bits for any thread count.
 *
 * Masked semantics equal tfm_masked_softmax (d2l): hidden keys get weight exp(-1e6 - max) = 0; a row
 * with no visible key attends uniformly to all keys (and passes no gradient to q or k).
 */
#include "ops/op_impl.h"
#include "ops/vmath.h"
#include "ops/isa.h"
#include "ops/avx2_transpose.h"
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#if TFM_X86
#include <immintrin.h>
#endif

#define TILE 64
#define TFM_ATTN_MAT_MAX_TK 128
/* without grad (a prompt, a window recomputed when generation slides past the block, a long source) up to this
 * many keys: 2x faster than the tiled kernel's row-by-row P V at 256 x 256 (a 4 x 128 GPT's window), and P's
 * scratch stays H x 1 MiB at most */
#define TFM_ATTN_MAT_MAX_TK_INFER 512
#define TFM_ATTN_KEEP_P_MAX ((size_t)1 << 24) /* floats (64 MiB) of P an op keeps for its backward */

typedef struct {
    float *data, *grad;
    size_t sb, sh, st; /* strides of batch, head, position (the feature stride is 1) */
    const int *row;    /* batch row -> slot of a KV cache (tfm_attention_kv, forward only), or NULL */
} view;

/* start of (batch b, head h) */
static inline size_t view_at(const view *x, int b, int h) {
    return (size_t)(x->row ? x->row[b] : b) * x->sb + (size_t)h * x->sh;
}

static view make_view(tfm_tensor *t, int heads_first, int H, int T, int d) {
    view v = {t->data, t->grad, 0, 0, 0, NULL};
    if (heads_first) { v.sb = (size_t)H * T * d; v.sh = (size_t)T * d; v.st = (size_t)d; }
    else { v.sb = (size_t)T * H * d; v.sh = (size_t)d; v.st = (size_t)H * d; }
    return v;
}

typedef struct {
    int B, H, Tq, Tk, dk, dv;
    float scale;
    view q, k, v, o;
    const float *lse;
    float *probs;       /* materialised variant: P of every entry, (B,H,Tq,ldp), kept from the forward for
                           the backward (NULL: the backward recomputes it) */
    const tfm_mask *mask;
    int drop;           /* attention dropout (per-batch-entry variant only) */
    uint64_t key;       /* its counter-based RNG key (the same bits tfm_dropout draws; the backward
                           regenerates the mask from it) */
    uint32_t thresh;
    float dscale;       /* 1 / (1 - p) */
    int fresh;          /* backward, per-entry variant: bit 0/1/2 set: write q's / k's / v's grad instead of
                           adding to it (tfm_bw_fresh; the grad holds nothing yet) */
} attn_args;

static int visible(const attn_args *a, int b, int i) {
    const tfm_mask *m = a->mask;
    int lim = a->Tk;
    if (!m) return lim;
    if (m->causal) lim = i + 1 + (a->Tk - a->Tq);
    if (m->valid_lens) {
        int vl = m->per_query ? m->valid_lens[b * a->Tq + i] : m->valid_lens[b];
        if (vl < lim) lim = vl;
    }
    return lim < 0 ? 0 : lim;
}

/* Scratch of the calling thread (tfm_thread_scratch), split among its OpenMP workers; grown outside
 * parallel regions, then reused: no malloc in steady state. */
static float *thread_scratch(size_t per_thread, int nt) {
    float *buf = tfm_thread_scratch(TFM_SCRATCH_ATTENTION, per_thread * (size_t)nt);
    if (!buf) tfm_fatal("out of memory (attention scratch)");
    return buf;
}

static size_t per_thread_floats(const attn_args *a) {
    return ((size_t)a->dk * a->Tk + (size_t)a->dv * a->Tk + 4 * TILE + 16 + 15) & ~(size_t)15;
}

/* Kt[c][j] = k[b,h,j,c] (and the same for V when vt is non-NULL) */
static void gather_t(const view *x, int b, int h, int T, int d, float *xt) {
    const float *base = x->data + view_at(x, b, h);
    for (int j = 0; j < T; j++) {
        const float *row = base + j * x->st;
        for (int c = 0; c < d; c++) xt[(size_t)c * T + j] = row[c];
    }
}

/* 16 or 8 floats as one value (GCC/clang generic vectors); v16u/v8u: the unaligned, aliasing views in memory. The
 * kernels below take the width W as a constant: 16 on the AVX-512 path (one register), 8 elsewhere (one AVX2
 * register, two SSE ones): GCC keeps an array of 64-byte vectors in registers only where each is one register, and
 * on AVX2 stored them to the stack at every key (measured: over half of attention's decoding time). */
typedef float v16f __attribute__((vector_size(64)));
typedef float v16u __attribute__((vector_size(64), aligned(4), may_alias));
typedef float v8f __attribute__((vector_size(32)));
typedef float v8u __attribute__((vector_size(32), aligned(4), may_alias));

/* s[0 .. W nv) = sum over c < dk of (q[c] * scale) * Kt[c][0 .. W nv), the nv vectors of s in registers across
 * c; every element adds in c order, a multiply then an add (two statements: no FMA contraction under clang
 * either), the bits of the scalar loop whatever W. */
#define SCORE_COLUMNS(vf, vu, W)                                                                                    \
    do {                                                                                                            \
        vf acc[64 / W];                                                                                             \
        for (int k = 0; k < nv; k++) acc[k] = (vf){0};                                                              \
        for (int c = 0; c < dk; c++) {                                                                              \
            float qc = q[c] * scale;                                                                                \
            const float *row = Kt + (size_t)c * Tk;                                                                 \
            for (int k = 0; k < nv; k++) {                                                                          \
                vf t = *(const vu *)(row + W * k) * qc;                                                             \
                acc[k] = acc[k] + t;                                                                                \
            }                                                                                                       \
        }                                                                                                           \
        for (int k = 0; k < nv; k++) *(vu *)(s + W * k) = acc[k];                                                   \
    } while (0)
static inline __attribute__((always_inline)) void score_columns(float *s, const float *q, const float *Kt, int Tk,
                                                                 int dk, float scale, const int nv, const int W) {
    if (W == 16) SCORE_COLUMNS(v16f, v16u, 16);
    else SCORE_COLUMNS(v8f, v8u, 8);
}

/* s[0..n) = scale * q . k_j for keys j0..j0+n: 64, 32, 16 (or 8) keys at a time, then single keys */
static inline __attribute__((always_inline)) void scores(float *s, const float *q, const float *Kt, int Tk, int dk,
                                                          int j0, int n, float scale, const int W) {
    int jj = 0;
    for (; jj + 64 <= n; jj += 64) score_columns(s + jj, q, Kt + j0 + jj, Tk, dk, scale, 64 / W, W);
    if (jj + 32 <= n) score_columns(s + jj, q, Kt + j0 + jj, Tk, dk, scale, 32 / W, W), jj += 32;
    if (jj + 16 <= n) score_columns(s + jj, q, Kt + j0 + jj, Tk, dk, scale, 16 / W, W), jj += 16;
    if (W == 8 && jj + 8 <= n) score_columns(s + jj, q, Kt + j0 + jj, Tk, dk, scale, 1, W), jj += 8;
    for (; jj < n; jj++) {
        float acc = 0.0f;
        for (int c = 0; c < dk; c++) {
            float t = q[c] * scale * Kt[(size_t)c * Tk + j0 + jj];
            acc += t;
        }
        s[jj] = acc;
    }
}

/* Decoding (one query a (batch, head)): pull the visible K and V rows of entry bh into L2 while entry bh - 1 is
 * computed. A decoding step's caches (every row's, head's and layer's keys and values) outgrow L2, and one
 * entry's rows are too few for the hardware prefetcher to find the stream before they are read. */
static inline void prefetch_kv_rows(const attn_args *a, int bh) {
#if TFM_X86
    if (bh >= a->B * a->H) return;
    int b = bh / a->H, h = bh % a->H, lim = visible(a, b, 0);
    const char *k = (const char *)(a->k.data + view_at(&a->k, b, h)), *v = (const char *)(a->v.data + view_at(&a->v, b, h));
    size_t kb = (size_t)a->dk * sizeof(float), vb = (size_t)a->dv * sizeof(float);
    for (int j = 0; j < lim; j++) {
        const char *kr = k + (size_t)j * a->k.st * sizeof(float), *vr = v + (size_t)j * a->v.st * sizeof(float);
        for (size_t o = 0; o < kb; o += 64) _mm_prefetch(kr + o, _MM_HINT_T1);
        for (size_t o = 0; o < vb; o += 64) _mm_prefetch(vr + o, _MM_HINT_T1);
    }
#else
    (void)a, (void)bh;
#endif
}

/* o[0 .. W nv) += sum over keys jj < n of p[jj] * V row jj, the nv vectors of o held in registers across the
 * keys. Each element adds its terms in key order, a multiply then an add (two statements: no FMA contraction
 * under clang either), so every path, width and column split gives the same bits. */
#define PV_COLUMNS(vf, vu, W)                                                                                       \
    do {                                                                                                            \
        vf acc[64 / W];                                                                                             \
        for (int k = 0; k < nv; k++) acc[k] = *(const vu *)(o + W * k);                                             \
        for (int jj = 0; jj < n; jj++) {                                                                            \
            const float *vr = V + (size_t)jj * st;                                                                  \
            for (int k = 0; k < nv; k++) {                                                                          \
                vf t = *(const vu *)(vr + W * k) * p[jj];                                                           \
                acc[k] = acc[k] + t;                                                                                \
            }                                                                                                       \
        }                                                                                                           \
        for (int k = 0; k < nv; k++) *(vu *)(o + W * k) = acc[k];                                                   \
    } while (0)
static inline __attribute__((always_inline)) void pv_columns(float *o, const float *p, const float *V, size_t st,
                                                              int n, const int nv, const int W) {
    if (W == 16) PV_COLUMNS(v16f, v16u, 16);
    else PV_COLUMNS(v8f, v8u, 8);
}

/* o[0..dv) += sum_jj p[jj] * V[jj * st + c]: 64, 32, 16 (or 8) columns at a time, then single columns */
static inline __attribute__((always_inline)) void accumulate_pv(float *o, const float *p, const float *V, size_t st,
                                                                 int n, int dv, const int W) {
    int c = 0;
    for (; c + 64 <= dv; c += 64) pv_columns(o + c, p, V + c, st, n, 64 / W, W);
    if (c + 32 <= dv) pv_columns(o + c, p, V + c, st, n, 32 / W, W), c += 32;
    if (c + 16 <= dv) pv_columns(o + c, p, V + c, st, n, 16 / W, W), c += 16;
    if (W == 8 && c + 8 <= dv) pv_columns(o + c, p, V + c, st, n, 1, W), c += 8;
    for (; c < dv; c++)
        for (int jj = 0; jj < n; jj++) {
            float t = p[jj] * V[(size_t)jj * st + c];
            o[c] += t;
        }
}

static inline __attribute__((always_inline)) void attn_forward_bh(const attn_args *a, float *lse, float *Kt, int bh,
                                                                   const int W) {
    int b = bh / a->H, h = bh % a->H, Tk = a->Tk, dk = a->dk, dv = a->dv;
    float *s = Kt + (size_t)(dk + dv) * Tk;
    /* few queries (decoding): dot products on K rows; otherwise transpose K once for all queries */
    int direct = a->Tq <= 2;
    if (direct && a->Tq == 1) prefetch_kv_rows(a, bh + 1);
    if (!direct) gather_t(&a->k, b, h, Tk, dk, Kt);
    const float *Kb = a->k.data + view_at(&a->k, b, h);
    const float *Vb = a->v.data + view_at(&a->v, b, h);
    for (int i = 0; i < a->Tq; i++) {
        const float *qi = a->q.data + b * a->q.sb + h * a->q.sh + i * a->q.st;
        float *o = a->o.data + b * a->o.sb + h * a->o.sh + i * a->o.st;
        int lim = visible(a, b, i);
        for (int c = 0; c < dv; c++) o[c] = 0.0f;
        if (lim == 0) { /* uniform over all keys */
            for (int j = 0; j < Tk; j++)
                for (int c = 0; c < dv; c++) o[c] += Vb[j * a->v.st + c];
            for (int c = 0; c < dv; c++) o[c] /= Tk;
            lse[(size_t)bh * a->Tq + i] = NAN;
            continue;
        }
        float m = -INFINITY, l = 0.0f;
        for (int j0 = 0; j0 < lim; j0 += TILE) {
            int n = lim - j0 < TILE ? lim - j0 : TILE;
            if (direct) {
                tfm_vdot_rows(s, qi, Kb + (size_t)j0 * a->k.st, a->k.st, n, (size_t)dk);
                for (int jj = 0; jj < n; jj++) s[jj] *= a->scale;
            } else {
                scores(s, qi, Kt, Tk, dk, j0, n, a->scale, W);
            }
            float mt = tfm_vmax(s, (size_t)n), mnew = mt > m ? mt : m;
            float corr = tfm_expf(m - mnew);
            l = l * corr + tfm_vexp_sum(s, s, mnew, (size_t)n);
            if (corr != 1.0f)
                for (int c = 0; c < dv; c++) o[c] *= corr;
            accumulate_pv(o, s, Vb + (size_t)j0 * a->v.st, a->v.st, n, dv, W);
            m = mnew;
        }
        float inv = 1.0f / l;
        for (int c = 0; c < dv; c++) o[c] *= inv;
        lse[(size_t)bh * a->Tq + i] = m + logf(l);
    }
}
#define ARGS_ATTN_FORWARD const attn_args *a, float *lse, float *Kt, int bh
#define PASS_ATTN_FORWARD a, lse, Kt, bh
typedef void (*attn_forward_fn)(ARGS_ATTN_FORWARD);
static void attn_forward_c(ARGS_ATTN_FORWARD) { attn_forward_bh(PASS_ATTN_FORWARD, 8); }
#if TFM_X86
TFM_TARGET_AVX2 static void attn_forward_avx2(ARGS_ATTN_FORWARD) { attn_forward_bh(PASS_ATTN_FORWARD, 8); }
TFM_TARGET_AVX512 static void attn_forward_avx512(ARGS_ATTN_FORWARD) { attn_forward_bh(PASS_ATTN_FORWARD, 16); }
static const attn_forward_fn attn_forward_paths[TFM_ISA_COUNT] = {attn_forward_c, attn_forward_avx2, attn_forward_avx512};
#else
static const attn_forward_fn attn_forward_paths[TFM_ISA_COUNT] = {attn_forward_c, attn_forward_c, attn_forward_c};
#endif

static void attn_forward(const attn_args *a, float *lse, int nt) {
    size_t per = per_thread_floats(a);
    float *buf = thread_scratch(per, nt);
    int nbh = a->B * a->H;
    size_t work = (size_t)nbh * a->Tq * a->Tk * (a->dk + a->dv);
    const attn_forward_fn one = attn_forward_paths[tfm_isa_active()];
    TFM_PAR_FOR(nt > 1 && work >= 65536, schedule(dynamic, 1) num_threads(nt),
    for (int bh = 0; bh < nbh; bh++) {
        one(a, lse, buf + per * TFM_PAR_RANK, bh);
    });
}

/* Backward, flash-attention-2 style, per (batch, head): for a block of up to QB query rows and a tile of
 * TILE keys, the probabilities P and score gradients dS of that tile are formed (one tile of the score
 * matrix, in scratch), then dV_j += sum_i P_ij dO_i and dK_j += sum_i dS_ij q_i run key-major (the
 * accumulators stay in registers) and dQ_i += sum_j dS_ij k_j query-major. */
#define QB 64
#define MAXD 256

static inline __attribute__((always_inline)) void tile_kv(int D, int qn, int n, const float *P, const float *dS,
                                                          const float *X, size_t xst, const float *Y, size_t yst,
                                                          float *dA, size_t ast, float *dB, size_t bst) {
    /* dA_j += sum_i P[i][j] X_i (X: dO rows), dB_j += sum_i dS[i][j] Y_i (Y: q rows) */
    for (int jj = 0; jj < n; jj++) {
        float acc_a[MAXD], acc_b[MAXD];
        for (int c = 0; c < D; c++) acc_a[c] = acc_b[c] = 0.0f;
        for (int ii = 0; ii < qn; ii++) {
            float p = P[ii * TILE + jj], ds = dS[ii * TILE + jj];
            const float *x = X + ii * xst, *y = Y + ii * yst;
            for (int c = 0; c < D; c++) {
                acc_a[c] += p * x[c];
                acc_b[c] += ds * y[c];
            }
        }
        if (dA) for (int c = 0; c < D; c++) dA[jj * ast + c] += acc_a[c];
        if (dB) for (int c = 0; c < D; c++) dB[jj * bst + c] += acc_b[c];
    }
}

static inline __attribute__((always_inline)) void tile_q(int D, int qn, int n, const float *dS, const float *K,
                                                         size_t kst, float *dQ, size_t qst) {
    for (int ii = 0; ii < qn; ii++) {
        float acc[MAXD];
        for (int c = 0; c < D; c++) acc[c] = 0.0f;
        for (int jj = 0; jj < n; jj++) {
            float ds = dS[ii * TILE + jj];
            const float *k = K + jj * kst;
            for (int c = 0; c < D; c++) acc[c] += ds * k[c];
        }
        for (int c = 0; c < D; c++) dQ[ii * qst + c] += acc[c];
    }
}

static inline __attribute__((always_inline)) void attn_backward_bh(const attn_args *a, float *Kt, int bh, const int W) {
    int b = bh / a->H, h = bh % a->H, Tk = a->Tk, dk = a->dk, dv = a->dv;
    float *Vt = Kt + (size_t)dk * Tk;
    float *P = Vt + (size_t)dv * Tk, *dS = P + QB * TILE, *Dv = dS + QB * TILE;
    int *lims = (int *)(Dv + QB);
    gather_t(&a->k, b, h, Tk, dk, Kt);
    gather_t(&a->v, b, h, Tk, dv, Vt);
    size_t kb = b * a->k.sb + h * a->k.sh, vb = b * a->v.sb + h * a->v.sh;
    size_t qb = b * a->q.sb + h * a->q.sh, ob = b * a->o.sb + h * a->o.sh;
    for (int i0 = 0; i0 < a->Tq; i0 += QB) {
        int qn = a->Tq - i0 < QB ? a->Tq - i0 : QB, jmax = 0;
        for (int ii = 0; ii < qn; ii++) {
            int i = i0 + ii, lim = visible(a, b, i);
            const float *oi = a->o.data + ob + i * a->o.st, *doi = a->o.grad + ob + i * a->o.st;
            lims[ii] = lim;
            Dv[ii] = tfm_vdot(doi, oi, (size_t)dv);
            if (lim > jmax) jmax = lim;
            if (lim == 0 && a->v.grad) /* uniform row: weights 1/Tk, no gradient to scores */
                for (int j = 0; j < Tk; j++) {
                    float *dvr = a->v.grad + vb + j * a->v.st;
                    for (int c = 0; c < dv; c++) dvr[c] += doi[c] / Tk;
                }
        }
        for (int j0 = 0; j0 < jmax; j0 += TILE) {
            int n = jmax - j0 < TILE ? jmax - j0 : TILE;
            for (int ii = 0; ii < qn; ii++) {
                int i = i0 + ii, cnt = lims[ii] - j0;
                cnt = cnt < 0 ? 0 : cnt > n ? n : cnt;
                float *pr = P + ii * TILE, *dsr = dS + ii * TILE;
                if (cnt > 0) {
                    const float *qi = a->q.data + qb + i * a->q.st, *doi = a->o.grad + ob + i * a->o.st;
                    scores(pr, qi, Kt, Tk, dk, j0, cnt, a->scale, W);
                    tfm_vexp_sum(pr, pr, a->lse[(size_t)bh * a->Tq + i], (size_t)cnt);
                    for (int jj = 0; jj < cnt; jj++) dsr[jj] = 0.0f;
                    for (int c = 0; c < dv; c++) {
                        float g = doi[c];
                        const float *row = Vt + (size_t)c * Tk + j0;
                        for (int jj = 0; jj < cnt; jj++) dsr[jj] += g * row[jj];
                    }
                    float D = Dv[ii], sc = a->scale;
                    for (int jj = 0; jj < cnt; jj++) dsr[jj] = pr[jj] * (dsr[jj] - D) * sc;
                }
                for (int jj = cnt; jj < n; jj++) pr[jj] = dsr[jj] = 0.0f;
            }
            const float *dO = a->o.grad + ob + i0 * a->o.st, *Q = a->q.data + qb + i0 * a->q.st;
            float *dV = a->v.grad ? a->v.grad + vb + j0 * a->v.st : NULL;
            float *dK = a->k.grad ? a->k.grad + kb + j0 * a->k.st : NULL;
            if (dk == 32) tile_kv(32, qn, n, P, dS, dO, a->o.st, Q, a->q.st, dV, a->v.st, dK, a->k.st);
            else tile_kv(dk, qn, n, P, dS, dO, a->o.st, Q, a->q.st, dV, a->v.st, dK, a->k.st);
            if (a->q.grad) {
                const float *K = a->k.data + kb + j0 * a->k.st;
                float *dQ = a->q.grad + qb + i0 * a->q.st;
                if (dk == 32) tile_q(32, qn, n, dS, K, a->k.st, dQ, a->q.st);
                else tile_q(dk, qn, n, dS, K, a->k.st, dQ, a->q.st);
            }
        }
    }
}
#define ARGS_ATTN_BACKWARD const attn_args *a, float *Kt, int bh
#define PASS_ATTN_BACKWARD a, Kt, bh
typedef void (*attn_backward_fn)(ARGS_ATTN_BACKWARD);
static void attn_backward_c(ARGS_ATTN_BACKWARD) { attn_backward_bh(PASS_ATTN_BACKWARD, 8); }
#if TFM_X86
TFM_TARGET_AVX2 static void attn_backward_avx2(ARGS_ATTN_BACKWARD) { attn_backward_bh(PASS_ATTN_BACKWARD, 8); }
TFM_TARGET_AVX512 static void attn_backward_avx512(ARGS_ATTN_BACKWARD) { attn_backward_bh(PASS_ATTN_BACKWARD, 16); }
static const attn_backward_fn attn_backward_paths[TFM_ISA_COUNT] = {attn_backward_c, attn_backward_avx2, attn_backward_avx512};
#else
static const attn_backward_fn attn_backward_paths[TFM_ISA_COUNT] = {attn_backward_c, attn_backward_c, attn_backward_c};
#endif

static void attn_backward(const attn_args *a, int nt) {
    size_t per = per_thread_floats(a) + 2 * QB * TILE + 2 * QB + 16;
    float *buf = thread_scratch(per, nt);
    int nbh = a->B * a->H;
    size_t work = (size_t)nbh * a->Tq * a->Tk * (a->dk + a->dv);
    int same_d = a->dk == a->dv && a->dk <= MAXD;
    TFM_ASSERT(same_d, "attention backward: d_k == d_v <= %d required", MAXD);
    const attn_backward_fn one = attn_backward_paths[tfm_isa_active()];
    TFM_PAR_FOR(nt > 1 && work >= 32768, schedule(dynamic, 1) num_threads(nt),
    for (int bh = 0; bh < nbh; bh++) {
        one(a, buf + per * TFM_PAR_RANK, bh);
    });
}

/* ---------------------------------------------------------------- per-batch-entry variant
 * For short sequences with grad tracked (training) or more than 2 queries (an encoder, a prompt), whole (Tq,Tk)
 * score blocks of one batch entry are faster on a CPU than the row-by-row tiled kernel. The forward forms S = scale Q K^T and P = masked softmax(S) for
 * one batch entry's H heads, O = P V straight into the (B,T,H*d) layout, and saves each row's logsumexp, max and
 * 1 / sum. Where keep_probs says so, P of all entries is kept in the arena for the backward (saving S = scale
 * Q K^T and the exponentials a second time); otherwise P lives in per-thread scratch and the backward
 * recomputes it from the saved max and 1 / sum with the forward's operations (the same bits). The backward then
 * regenerates the dropout mask from its key, and forms dP = dO V^T, dV += P^T dO,
 * dS = scale * P (dP - rowsum(dP P)) on visible keys, dQ += dS K, dK += dS^T Q. One thread per batch entry,
 * so results do not depend on the thread count.
 *
 * The products are small (Tk <= 128, a head's d columns), too small for tfm_gemm's packing to pay off, so
 * they go through mm() below, which reads every operand in place. Each product also skips what the mask
 * hides: a row of P is 0 past its extent (its last visible key; all Tk keys for a row that is uniform or
 * whose hidden keys keep a non-zero weight, see block_probs), so S and dP are formed only up to the
 * extents of each row block (3 rows, 6 on AVX-512; rounded up to 8 columns), P V and dS K only over them, and P^T dO and
 * dS^T Q start at the first query that sees the key block when the extents grow with the query (causal).
 * Score rows in scratch have ldp = Tk rounded up to 8 floats. */

/* C(i,j) = alpha ((C(i,j) if acc) + sum_{k0 <= k < k1} a(i,k) B[k*ldb + j]), i < m, j < n,
 * a(i,k) = A[i*rsa + k*csa]. Each element: C (or 0), then the k terms in order, then one multiply by alpha
 * (1 leaves it exact; S = scale Q K^T passes the scale, rounded as the exact path rounds scale * (q . k)). */
#define MM_ARGS int m, int n, int k0, int k1, const float *A, ptrdiff_t rsa, ptrdiff_t csa, const float *B, \
                ptrdiff_t ldb, float *C, ptrdiff_t ldc, int acc, float alpha
typedef void (*mm_fn)(MM_ARGS);

static void mm_c(MM_ARGS) {
    for (int i = 0; i < m; i++) {
        float *c = C + i * ldc;
        if (!acc) for (int j = 0; j < n; j++) c[j] = 0.0f;
        for (int k = k0; k < k1; k++) {
            const float a = A[i * rsa + k * csa], *b = B + k * ldb;
            for (int j = 0; j < n; j++) c[j] += a * b[j];
        }
        if (alpha != 1.0f) for (int j = 0; j < n; j++) c[j] *= alpha;
    }
}

/* rows per block: the unit of the mask skipping, and of the register block: AVX2 3 x 4 accumulators + 3
 * broadcasts + 1 B vector = 16 ymm; AVX-512 6 rows (the callers' blocks on that path are 6 rows high, so
 * a 32-wide product has 12 independent FMA chains, not 6: enough to cover the FMA latency). A taller
 * block computes a few more entries past a row's mask; they are overwritten or multiplied by exact
 * zeros, so the block height changes no result. */
#define MM_ROWS 3
#define MM_ROWS_AVX512 6

#if TFM_X86
/* One block of R rows x W*NV columns (W lanes per vector; R, NV constants after inlining, so c[][] lives in
 * registers): the body of mm_block_avx2 and mm_block_avx512. LOADU(p, v) / STOREU(p, x, v) load and store
 * vector v of a row (AVX-512: the last one under the block's lane mask). */
#define MM_BLOCK_BODY(V, ROWS, W, LOADU, ZERO, SET1, FMADD, MUL, STOREU)                                  \
    V c[ROWS][4];                                                                                      \
    if (!acc) /* C's lines (an output in the arena, not in cache) arrive during the FMAs */             \
        for (int r = 0; r < R; r++)                                                                    \
            for (int v = 0; v < NV; v += 64 / (int)sizeof(float) / W)                                  \
                _mm_prefetch((const char *)(C + r * ldc + W * v), _MM_HINT_T0);                        \
    for (int r = 0; r < R; r++)                                                                        \
        for (int v = 0; v < NV; v++) c[r][v] = acc ? LOADU(C + r * ldc + W * v, v) : ZERO();           \
    for (int k = k0; k < k1; k++) {                                                                    \
        const float *b = B + k * ldb;                                                                  \
        V a[ROWS];                                                                                     \
        for (int r = 0; r < R; r++) a[r] = SET1(A[r * rsa + k * csa]);                                 \
        for (int v = 0; v < NV; v++) {                                                                 \
            V bv = LOADU(b + W * v, v);                                                                \
            for (int r = 0; r < R; r++) c[r][v] = FMADD(a[r], bv, c[r][v]);                           \
        }                                                                                              \
    }                                                                                                  \
    const V al = SET1(alpha);                                                                          \
    for (int r = 0; r < R; r++)                                                                        \
        for (int v = 0; v < NV; v++) STOREU(C + r * ldc + W * v, MUL(c[r][v], al), v);
#define MM_BLOCK_ARGS int R, int NV, int k0, int k1, const float *A, ptrdiff_t rsa, ptrdiff_t csa, const float *B, \
                      ptrdiff_t ldb, float *C, ptrdiff_t ldc, int acc, float alpha
/* the blocks of one row count r, 1 to 4 vectors wide (the switch in mm_avx2 / mm_avx512) */
#define MM_CASES(r) MM_CASE(r, 1); MM_CASE(r, 2); MM_CASE(r, 3); MM_CASE(r, 4)

#define MM_LOAD8(p, v) _mm256_loadu_ps(p)
#define MM_STORE8(p, x, v) _mm256_storeu_ps(p, x)
TFM_TARGET_AVX2 static inline __attribute__((always_inline)) void mm_block_avx2(MM_BLOCK_ARGS) {
    MM_BLOCK_BODY(__m256, MM_ROWS, 8, MM_LOAD8, _mm256_setzero_ps, _mm256_set1_ps, _mm256_fmadd_ps, _mm256_mul_ps,
                  MM_STORE8)
}

TFM_TARGET_AVX2 static void mm_avx2(MM_ARGS) {
    for (int i0 = 0; i0 < m; i0 += MM_ROWS) {
        const int R = m - i0 < MM_ROWS ? m - i0 : MM_ROWS;
        const float *Ai = A + i0 * rsa;
        float *Ci = C + i0 * ldc;
        int j0 = 0;
        for (; j0 + 8 <= n; j0 += 32) {
            const int nv = (n - j0) / 8 < 4 ? (n - j0) / 8 : 4;
#define MM_CASE(r, v) case (r) * 8 + (v): mm_block_avx2(r, v, k0, k1, Ai, rsa, csa, B + j0, ldb, Ci + j0, ldc, acc, alpha); break
            switch (R * 8 + nv) { MM_CASES(1); MM_CASES(2); MM_CASES(3); }
#undef MM_CASE
            if (nv < 4) { j0 += 8 * nv; break; }
        }
        for (int r = 0; r < R; r++) /* the last n % 8 columns */
            for (int j = j0; j < n; j++) {
                float t = acc ? Ci[r * ldc + j] : 0.0f;
                for (int k = k0; k < k1; k++) t = fmaf(Ai[r * rsa + k * csa], B[k * ldb + j], t);
                Ci[r * ldc + j] = t * alpha;
            }
    }
}

/* The AVX-512 path: R rows x 16*NV columns per block (R <= 6, NV <= 4: up to 24 zmm accumulators, 6
 * broadcasts and a B vector); a row's last vector is loaded and stored under the lane mask `last` (the
 * n % 16 columns of the row's end, all 16 before it), so a masked lane is never read or written. Every
 * element is the same chain of FMAs over k as on the AVX2 path: the same bits. */
#define MM_LOAD16(p, v) _mm512_maskz_loadu_ps((v) == NV - 1 ? last : (__mmask16)0xffff, p)
#define MM_STORE16(p, x, v) _mm512_mask_storeu_ps(p, (v) == NV - 1 ? last : (__mmask16)0xffff, x)
TFM_TARGET_AVX512 static inline __attribute__((always_inline)) void mm_block_avx512(MM_BLOCK_ARGS, __mmask16 last) {
    MM_BLOCK_BODY(__m512, MM_ROWS_AVX512, 16, MM_LOAD16, _mm512_setzero_ps, _mm512_set1_ps, _mm512_fmadd_ps,
                  _mm512_mul_ps, MM_STORE16)
}

TFM_TARGET_AVX512 static void mm_avx512(MM_ARGS) {
    for (int i0 = 0; i0 < m; i0 += MM_ROWS_AVX512) {
        const int R = m - i0 < MM_ROWS_AVX512 ? m - i0 : MM_ROWS_AVX512;
        const float *Ai = A + i0 * rsa;
        float *Ci = C + i0 * ldc;
        for (int j0 = 0; j0 < n; j0 += 64) {
            const int left = n - j0, nv = left >= 64 ? 4 : (left + 15) / 16;
            const __mmask16 last = left >= 64 || left % 16 == 0 ? (__mmask16)0xffff : (__mmask16)((1u << (left % 16)) - 1);
#define MM_CASE(r, v) case (r) * 8 + (v): mm_block_avx512(r, v, k0, k1, Ai, rsa, csa, B + j0, ldb, Ci + j0, ldc, acc, alpha, last); break
            switch (R * 8 + nv) { MM_CASES(1); MM_CASES(2); MM_CASES(3); MM_CASES(4); MM_CASES(5); MM_CASES(6); }
#undef MM_CASE
        }
    }
}

#endif

static inline int round8(int n) { return (n + 7) & ~7; }

/* The per-batch-entry variant's helpers are inlined into each instruction-set path's entry function
 * (mat_forward_entry, mat_backward_entry), so their plain loops (softmax rows, dS) are compiled for AVX2 /
 * AVX-512 there; only adds, multiplies and copies, so the same bits on every path. */
#define INLINE_ALL inline __attribute__((always_inline))

/* Xt[c*ldp + j] = x[b,h,j,c] for j < T, 0 for T <= j < ldp: a head's K or V transposed (one column from
 * every row: a strided element at a time, or below, 8 x 8 blocks through registers) */
#define GATHER_ARGS const view *x, int b, int h, int T, int d, int ldp, float *xt
typedef void (*gather_fn)(GATHER_ARGS);
/* rows j0 <= j < T one element at a time, and the padding */
static inline void gather_t_rows(const float *base, size_t st, int j0, int T, int d, int ldp, float *xt) {
    for (int c = 0; c < d; c++) {
        float *o = xt + (size_t)c * ldp;
        for (int j = j0; j < T; j++) o[j] = base[j * st + c];
        for (int j = T; j < ldp; j++) o[j] = 0.0f;
    }
}
static void gather_t_pad_c(GATHER_ARGS) { gather_t_rows(x->data + view_at(x, b, h), x->st, 0, T, d, ldp, xt); }

/* The kernels of one instruction-set path: mm, the transposing gather, mm's row block. */
typedef struct {
    mm_fn mm;
    gather_fn gather;
    int rows;
} mat_kernels;
static const mat_kernels mat_kernels_c = {mm_c, gather_t_pad_c, MM_ROWS};

#if TFM_X86
TFM_TARGET_AVX2 static void gather_t_pad_avx2(GATHER_ARGS) {
    const float *base = x->data + view_at(x, b, h);
    int j0 = 0, c8 = d / 8 * 8;
    for (; j0 + 8 <= T; j0 += 8) {
        for (int c0 = 0; c0 < c8; c0 += 8) {
            __m256 r[8];
            for (int t = 0; t < 8; t++) r[t] = _mm256_loadu_ps(base + (size_t)(j0 + t) * x->st + c0);
            tfm_tr8x8(r);
            for (int t = 0; t < 8; t++) _mm256_storeu_ps(xt + (size_t)(c0 + t) * ldp + j0, r[t]);
        }
        for (int c = c8; c < d; c++)
            for (int j = j0; j < j0 + 8; j++) xt[(size_t)c * ldp + j] = base[j * x->st + c];
    }
    gather_t_rows(base, x->st, j0, T, d, ldp, xt); /* the last T % 8 rows and the padding */
}
static const mat_kernels mat_kernels_avx2 = {mm_avx2, gather_t_pad_avx2, MM_ROWS};
static const mat_kernels mat_kernels_avx512 = {mm_avx512, gather_t_pad_avx2, MM_ROWS_AVX512};
#endif

/* Per-entry scratch: P, dS (backward), dropped P (dropout) as (H, Tq, ldp); one head's K^T or V^T; the
 * rows' visible-key counts (Tq: the mask is the same for every head) and extents (H, Tq). */
typedef struct {
    int ldp;
    size_t hs; /* Tq * ldp */
    float *P, *dS, *Pd, *Xt;
    int *lim, *ext;
} mat_scratch;

static int max_d(const attn_args *a) { return a->dk > a->dv ? a->dk : a->dv; }

/* P of one batch entry's heads, in floats */
static size_t entry_probs_floats(const attn_args *a) { return (size_t)a->H * a->Tq * round8(a->Tk); }

/* scratch per thread; P is in it unless the forward keeps it (a->probs) */
static size_t mat_scratch_floats(const attn_args *a, int backward) {
    size_t blocks = (a->probs ? 0 : 1) + backward + a->drop;
    return (entry_probs_floats(a) * blocks + (size_t)max_d(a) * round8(a->Tk) + (size_t)(1 + a->H) * a->Tq +
            ((size_t)a->Tk + 3) / 4 + 16 + 15) & ~(size_t)15;   /* the last: one row's dropout keep bytes */
}

static mat_scratch mat_scratch_at(const attn_args *a, int b, int backward, float *buf) {
    mat_scratch m;
    m.ldp = round8(a->Tk);
    m.hs = (size_t)a->Tq * m.ldp;
    size_t all = entry_probs_floats(a);
    if (a->probs) m.P = a->probs + (size_t)b * all;
    else m.P = buf, buf += all;
    m.dS = backward ? buf : NULL;
    m.Pd = a->drop ? buf + all * backward : m.P;
    m.Xt = buf + all * (backward + a->drop);
    m.lim = (int *)(m.Xt + (size_t)max_d(a) * m.ldp);
    m.ext = m.lim + a->Tq;
    return m;
}

/* the largest of x[i0..i0+R) */
static int max_of(const int *x, int R) {
    int mx = 0;
    for (int r = 0; r < R; r++) mx = x[r] > mx ? x[r] : mx;
    return mx;
}

/* The first row whose x exceeds j0 when x never decreases along the rows (else 0: every row). */
static int first_row_past(const int *x, int T, int j0, int grows) {
    if (!grows) return 0;
    int i = 0;
    while (i < T && x[i] <= j0) i++;
    return i;
}

static int never_decreases(const int *x, int T) {
    for (int i = 1; i < T; i++)
        if (x[i] < x[i - 1]) return 0;
    return 1;
}

/* A row's extent: its L visible keys, or all Tk where it is uniform (L <= 0) or its hidden keys keep a
 * non-zero weight hid. */
static int row_extent(int L, int Tk, float hid) { return L <= 0 || hid != 0.0f ? Tk : L; }

/* ms->lim[i] = the keys query i of entry b sees */
static INLINE_ALL void entry_limits(const attn_args *a, int b, const mat_scratch *ms) {
    for (int i = 0; i < a->Tq; i++) ms->lim[i] = visible(a, b, i);
}

/* The per-entry variant saves three values per row (B,H,Tq) one after the other in n->saved: the row's
 * logsumexp, its max m and 1 / sum (m, inv below), from which the backward recomputes P with the
 * forward's own operations: the same bits as the P the forward formed. */
static size_t rows_all(const attn_args *a) { return (size_t)a->B * a->H * a->Tq; }
static size_t saved_floats(const attn_args *a, int mat) { return rows_all(a) * (mat ? 3 : 1); }

/* A hidden key's exp(-1e6 - m) in a row of L visible keys with max m (0 unless every visible score is below
 * -1e6; its weight is this times 1 / sum). */
static inline float hidden_exp(int L, int Tk, float m) { return L > 0 && L < Tk ? tfm_expf(-1e6f - m) : 0.0f; }

/* rows block_probs takes at a time (the GPT step's attention: 4 rows -3%, 8 rows -4 to -6%, 16 rows -2%) */
#define SOFTMAX_ROWS 8

/* Scores -> probabilities for head h of batch entry b, rows of S (first lim[i] columns valid) in place: the
 * d2l masked softmax, exp(s - m) / sum. Forward (save): m and sum from the row, saved with the logsumexp
 * (NAN for a row with no visible key, which is uniform); backward: m and 1 / sum from the saved values.
 * Hidden keys get hidden_exp / sum; a row's extent is lim, or Tk where that weight is not 0 or the row is
 * uniform. */
static INLINE_ALL void block_probs(const attn_args *a, int b, int h, const mat_scratch *ms, float *save) {
    int Tq = a->Tq, Tk = a->Tk;
    float *P = ms->P + h * ms->hs;
    const int *lim = ms->lim;
    int *ext = ms->ext + h * Tq;
    const size_t nr = rows_all(a), l0 = ((size_t)b * a->H + h) * Tq;   /* row i's saved values: l0 + i */
    /* SOFTMAX_ROWS rows at a time, each step for all of them before the next: a row's max, exponentials, sum
     * and scale are one chain of latencies, the rows' chains are independent (the same arithmetic per row) */
    for (int i0 = 0; i0 < Tq; i0 += SOFTMAX_ROWS) {
        const int R = Tq - i0 < SOFTMAX_ROWS ? Tq - i0 : SOFTMAX_ROWS;
        float m[SOFTMAX_ROWS], inv[SOFTMAX_ROWS], eh[SOFTMAX_ROWS];
        for (int r = 0; r < R; r++) {
            int i = i0 + r, L = lim[i];
            size_t li = l0 + i;
            if (L <= 0) continue;
            if (save) {
                m[r] = tfm_vmax(P + (size_t)i * ms->ldp, (size_t)L);
                if (L < Tk && m[r] < -1e6f) m[r] = -1e6f;
            } else {
                m[r] = a->lse[nr + li];
                inv[r] = a->lse[2 * nr + li];
            }
        }
        for (int r = 0; r < R; r++) {
            int i = i0 + r, L = lim[i];
            if (L <= 0) continue;
            float *row = P + (size_t)i * ms->ldp;
            eh[r] = hidden_exp(L, Tk, m[r]);
            float sum = tfm_vexp_sum(row, row, m[r], (size_t)L) + eh[r] * (Tk - L);
            if (save) {
                size_t li = l0 + i;
                inv[r] = 1.0f / sum;
                save[li] = m[r] + logf(sum);
                save[nr + li] = m[r];
                save[2 * nr + li] = inv[r];
            }
        }
        for (int r = 0; r < R; r++) {
            int i = i0 + r, L = lim[i];
            float *row = P + (size_t)i * ms->ldp;
            if (L <= 0) {
                size_t li = l0 + i;
                for (int j = 0; j < Tk; j++) row[j] = 1.0f / Tk;
                if (save) save[li] = save[nr + li] = save[2 * nr + li] = NAN;
                ext[i] = row_extent(L, Tk, 0.0f);
                continue;
            }
            for (int j = 0; j < round8(L); j++) row[j] *= inv[r];   /* whole vectors: the entries past L are set next */
            float hid = eh[r] * inv[r];
            for (int j = L; j < Tk; j++) row[j] = hid;
            ext[i] = row_extent(L, Tk, hid);
        }
    }
}

/* out[j] = keep[j] ? in[j] * sc : +0 */
static INLINE_ALL void drop_select(float *out, const float *in, const uint8_t *keep, float sc, int n) {
    for (int j = 0; j < n; j++) out[j] = tfm_keep_or_zero(in[j] * sc, keep[j]);
}

/* Pd = dropout(P) for batch entry b: element order (b,h,i,j), as tfm_dropout on (B*H,Tq,Tk). With g
 * non-NULL, also g *= the same mask and scale (the backward's dP). */
static INLINE_ALL void block_dropout(const attn_args *a, int b, const mat_scratch *ms, float *g) {
    size_t x = (size_t)b * a->H * a->Tq * a->Tk;
    uint8_t *keep = (uint8_t *)(ms->lim + a->Tq + a->H * a->Tq);   /* Tk bytes after the extents */
    for (int hi = 0; hi < a->H * a->Tq; hi++, x += a->Tk) {
        size_t o = (size_t)hi * ms->ldp;
        tfm_vdrop_keep(keep, a->key + x, a->thresh, (size_t)a->Tk);
        drop_select(ms->Pd + o, ms->P + o, keep, a->dscale, a->Tk);
        if (g) drop_select(g + o, g + o, keep, a->dscale, a->Tk);
    }
}

/* S = scale Q K^T for head h of batch entry b up to each row block's visible keys (ms->lim set), then the masked
 * softmax (forward: save receives each row's values, block_probs; backward: from the saved ones). */
static INLINE_ALL void head_probs(const attn_args *a, int b, int h, const mat_scratch *ms, const mat_kernels *kx,
                                  float *save) {
    int Tq = a->Tq, Tk = a->Tk, dk = a->dk, rows = kx->rows;
    const int *lim = ms->lim;
    kx->gather(&a->k, b, h, Tk, dk, ms->ldp, ms->Xt);
    const float *Q = a->q.data + b * a->q.sb + h * a->q.sh;
    float *S = ms->P + h * ms->hs;
    for (int i0 = 0; i0 < Tq; i0 += rows) {
        int R = Tq - i0 < rows ? Tq - i0 : rows, w = round8(max_of(lim + i0, R));
        /* scale (q . k), as the exact path rounds it (not q . (scale k)) */
        kx->mm(R, w, 0, dk, Q + i0 * a->q.st, (ptrdiff_t)a->q.st, 1, ms->Xt, ms->ldp, S + i0 * ms->ldp, ms->ldp, 0,
               a->scale);
    }
    block_probs(a, b, h, ms, save);
}

/* P for every head of batch entry b */
static INLINE_ALL void block_probs_all(const attn_args *a, int b, const mat_scratch *ms, const mat_kernels *kx,
                                       float *save) {
    entry_limits(a, b, ms);
    for (int h = 0; h < a->H; h++) head_probs(a, b, h, ms, kx, save);
}

/* The backward over a kept P: each row's visible keys and extent, as block_probs found them. */
static INLINE_ALL void kept_probs_limits(const attn_args *a, int b, const mat_scratch *ms) {
    const size_t nr = rows_all(a);
    entry_limits(a, b, ms);
    for (int h = 0; h < a->H; h++)
        for (int i = 0; i < a->Tq; i++) {
            size_t li = ((size_t)b * a->H + h) * a->Tq + i;
            int L = ms->lim[i];
            ms->ext[h * a->Tq + i] = row_extent(L, a->Tk, hidden_exp(L, a->Tk, a->lse[nr + li]) * a->lse[2 * nr + li]);
        }
}

/* O = P V for head h of batch entry b, over each row block's extent */
static INLINE_ALL void head_output(const attn_args *a, int b, int h, const mat_scratch *ms, const mat_kernels *kx) {
    int Tq = a->Tq, rows = kx->rows;
    const int *ext = ms->ext + h * Tq;
    const float *P = ms->Pd + h * ms->hs, *V = a->v.data + view_at(&a->v, b, h);
    float *O = a->o.data + b * a->o.sb + h * a->o.sh;
    for (int i0 = 0; i0 < Tq; i0 += rows) {
        int R = Tq - i0 < rows ? Tq - i0 : rows;
        kx->mm(R, a->dv, 0, max_of(ext + i0, R), P + i0 * ms->ldp, ms->ldp, 1, V, (ptrdiff_t)a->v.st, O + i0 * a->o.st,
               (ptrdiff_t)a->o.st, 0, 1.0f);
    }
}

/* The forward of batch entry b (head < 0: every head, with dropout when asked), or of one head alone (no dropout:
 * fewer entries than threads, one (entry, head) a thread); the same operations per head either way. */
static INLINE_ALL void mat_forward_entry(const attn_args *a, float *lse, float *buf, const mat_kernels *kx, int b,
                                         int head) {
    mat_scratch ms = mat_scratch_at(a, b, 0, buf);
    if (head >= 0) {
        entry_limits(a, b, &ms);
        head_probs(a, b, head, &ms, kx, lse);
        head_output(a, b, head, &ms, kx);
        return;
    }
    block_probs_all(a, b, &ms, kx, lse);
    if (a->drop) block_dropout(a, b, &ms, NULL);
    for (int h = 0; h < a->H; h++) head_output(a, b, h, &ms, kx);
}
#define MAT_FWD_ARGS const attn_args *a, float *lse, float *buf, int b, int head
typedef void (*mat_fwd_fn)(MAT_FWD_ARGS);
static void mat_forward_c(MAT_FWD_ARGS) { mat_forward_entry(a, lse, buf, &mat_kernels_c, b, head); }
#if TFM_X86
TFM_TARGET_AVX2 static void mat_forward_avx2(MAT_FWD_ARGS) { mat_forward_entry(a, lse, buf, &mat_kernels_avx2, b, head); }
TFM_TARGET_AVX512 static void mat_forward_avx512(MAT_FWD_ARGS) {
    mat_forward_entry(a, lse, buf, &mat_kernels_avx512, b, head);
}
static const mat_fwd_fn mat_forward_paths[TFM_ISA_COUNT] = {mat_forward_c, mat_forward_avx2, mat_forward_avx512};
#else
static const mat_fwd_fn mat_forward_paths[TFM_ISA_COUNT] = {mat_forward_c, mat_forward_c, mat_forward_c};
#endif

static void mat_forward(const attn_args *a, float *lse, int nt) {
    size_t per = mat_scratch_floats(a, 0);
    float *buf = thread_scratch(per, nt);
    const mat_fwd_fn entry = mat_forward_paths[tfm_isa_active()];
    if (nt > 1 && a->B < nt && a->H > 1 && !a->drop) {   /* a prompt, one sentence: its heads on the threads */
#pragma omp parallel for schedule(dynamic, 1) num_threads(nt)
        for (int bh = 0; bh < a->B * a->H; bh++) entry(a, lse, buf + per * omp_get_thread_num(), bh / a->H, bh % a->H);
        return;
    }
    TFM_PAR_FOR(nt > 1 && a->B > 1, schedule(dynamic, 1) num_threads(nt),
    for (int b = 0; b < a->B; b++) {
        entry(a, lse, buf + per * TFM_PAR_RANK, b, -1);
    });
}

/* dX[j] += sum_i Y(i,j) Z_i for keys j (a row block at a time), from the first query whose x exceeds the block's
 * first key: dV += P^T dO (x = extents) and dK += dS^T Q (x = visible counts). assign: dX = instead of +=
 * (a block no query sees gets zeros). */
static INLINE_ALL void keys_by_queries(const attn_args *a, const mat_scratch *ms, const mat_kernels *kx, const float *Y, const int *x,
                            const float *Z, size_t zst, float *dX, size_t xst, int d, int assign) {
    int grows = never_decreases(x, a->Tq), rows = kx->rows;
    for (int j0 = 0; j0 < a->Tk; j0 += rows) {
        int R = a->Tk - j0 < rows ? a->Tk - j0 : rows, i0 = first_row_past(x, a->Tq, j0, grows);
        if (i0 < a->Tq || assign) /* (i0 == Tq: no depth, mm writes zeros) */
            kx->mm(R, d, i0, a->Tq, Y + j0, 1, ms->ldp, Z, (ptrdiff_t)zst, dX + j0 * xst, (ptrdiff_t)xst, !assign, 1.0f);
    }
}

/* Entry b's T rows of x (the (B,T,H*d) layout: the H heads' d features side by side, span = H * d floats)
 * asked into L2 while entry b - 1 computes: the backward reads the q, k and v an entry's forward wrote long
 * before (cold lines, a row at a time). Other layouts (a KV cache's, forward only) are left alone. */
static INLINE_ALL void prefetch_entry(const view *x, int b, int T, int span) {
    if (!x->data || x->row || x->sh >= x->st) return;
    const char *p = (const char *)(x->data + view_at(x, b, 0));
    for (int t = 0; t < T; t++)
        for (size_t o = 0; o < (size_t)span * sizeof(float); o += 64)
            __builtin_prefetch(p + (size_t)t * x->st * sizeof(float) + o, 0, 2);   /* prefetcht1 */
}

static INLINE_ALL void mat_backward_entry(const attn_args *a, float *buf, const mat_kernels *kx, int b) {
    int H = a->H, Tq = a->Tq, Tk = a->Tk, dv = a->dv, dk = a->dk, rows = kx->rows;
    mat_scratch ms = mat_scratch_at(a, b, 1, buf);
    if (b + 1 < a->B) { /* the next entry's operands, while this one computes */
        prefetch_entry(&a->q, b + 1, Tq, H * dk);
        prefetch_entry(&a->k, b + 1, Tk, H * dk);
        prefetch_entry(&a->v, b + 1, Tk, H * dv);
    }
    if (a->probs) kept_probs_limits(a, b, &ms);
    else block_probs_all(a, b, &ms, kx, NULL);
    for (int h = 0; h < H; h++) { /* dP = dO V^T over each block's extent, 0 beyond */
        const int *ext = ms.ext + h * Tq;
        const float *dO = a->o.grad + b * a->o.sb + h * a->o.sh;
        float *dP = ms.dS + h * ms.hs;
        kx->gather(&a->v, b, h, Tk, dv, ms.ldp, ms.Xt);
        for (int i0 = 0; i0 < Tq; i0 += rows) {
            int R = Tq - i0 < rows ? Tq - i0 : rows, w = round8(max_of(ext + i0, R));
            kx->mm(R, w, 0, dv, dO + i0 * a->o.st, (ptrdiff_t)a->o.st, 1, ms.Xt, ms.ldp, dP + i0 * ms.ldp, ms.ldp, 0, 1.0f);
            for (int r = 0; r < R; r++)
                for (int j = w; j < Tk; j++) dP[(i0 + r) * ms.ldp + j] = 0.0f;
        }
    }
    if (a->drop) block_dropout(a, b, &ms, ms.dS); /* the dropped weights, and dP through the mask */
    for (int h = 0; h < H; h++) {
        const float *dO = a->o.grad + b * a->o.sb + h * a->o.sh;
        if (a->v.grad) /* dV += P^T dO (P after dropout; = when fresh) */
            keys_by_queries(a, &ms, kx, ms.Pd + h * ms.hs, ms.ext + h * Tq, dO, a->o.st,
                            a->v.grad + view_at(&a->v, b, h), a->v.st, dv, a->fresh >> 2 & 1);
        const int *lim = ms.lim;
        float *dS = ms.dS + h * ms.hs;
        for (int i = 0; i < Tq; i++) { /* dS = scale P (dP - rowsum(dP P)) on visible keys */
            const float *p = ms.P + h * ms.hs + (size_t)i * ms.ldp;
            float *d = dS + (size_t)i * ms.ldp;
            /* past the row's extent P is exactly 0: the products there add nothing (+-0) to any lane */
            float dot = tfm_vdot(d, p, (size_t)ms.ext[h * Tq + i]), sc = a->scale;
            for (int j = 0; j < lim[i]; j++) d[j] = sc * p[j] * (d[j] - dot);
            for (int j = lim[i] > 0 ? lim[i] : 0; j < Tk; j++) d[j] = 0.0f;
        }
        const float *Q = a->q.data + b * a->q.sb + h * a->q.sh;
        if (a->q.grad) { /* dQ += dS K over each block's visible keys (= when fresh) */
            const float *K = a->k.data + view_at(&a->k, b, h);
            float *dQ = a->q.grad + b * a->q.sb + h * a->q.sh;
            for (int i0 = 0; i0 < Tq; i0 += rows) {
                int R = Tq - i0 < rows ? Tq - i0 : rows;
                kx->mm(R, dk, 0, max_of(lim + i0, R), dS + i0 * ms.ldp, ms.ldp, 1, K, (ptrdiff_t)a->k.st,
                   dQ + i0 * a->q.st, (ptrdiff_t)a->q.st, !(a->fresh & 1), 1.0f);
            }
        }
        if (a->k.grad) /* dK += dS^T Q (= when fresh) */
            keys_by_queries(a, &ms, kx, dS, lim, Q, a->q.st, a->k.grad + view_at(&a->k, b, h), a->k.st, dk,
                            a->fresh >> 1 & 1);
    }
}
#define MAT_BWD_ARGS const attn_args *a, float *buf, int b
typedef void (*mat_bwd_fn)(MAT_BWD_ARGS);
static void mat_backward_c(MAT_BWD_ARGS) { mat_backward_entry(a, buf, &mat_kernels_c, b); }
#if TFM_X86
TFM_TARGET_AVX2 static void mat_backward_avx2(MAT_BWD_ARGS) { mat_backward_entry(a, buf, &mat_kernels_avx2, b); }
TFM_TARGET_AVX512 static void mat_backward_avx512(MAT_BWD_ARGS) { mat_backward_entry(a, buf, &mat_kernels_avx512, b); }
static const mat_bwd_fn mat_backward_paths[TFM_ISA_COUNT] = {mat_backward_c, mat_backward_avx2, mat_backward_avx512};
#else
static const mat_bwd_fn mat_backward_paths[TFM_ISA_COUNT] = {mat_backward_c, mat_backward_c, mat_backward_c};
#endif

static void mat_backward(const attn_args *a, int nt) {
    size_t per = mat_scratch_floats(a, 1);
    float *buf = thread_scratch(per, nt);
    const mat_bwd_fn entry = mat_backward_paths[tfm_isa_active()];
    TFM_PAR_FOR(nt > 1 && a->B > 1, schedule(dynamic, 1) num_threads(nt),
    for (int b = 0; b < a->B; b++) {
        entry(a, buf + per * TFM_PAR_RANK, b);
    });
}

/* Does the per-entry variant keep P (probs floats) for the backward, or recompute it there? Kept P is
 * written in the forward and read back in the backward, long after: from memory, not cache (3 MiB for the
 * GPT's 4 layers, ~30 MiB for a Multi30k batch). Recomputing it is the forward's S = scale Q K^T and
 * exponentials once more, on data in cache. On the AVX-512 path that is the cheaper of the two (measured
 * on a Zen 5, 2 threads: the GPT step's attention 1.65 -> 1.50 ms, Multi30k within noise), so it
 * recomputes; the AVX2 and portable paths keep P (the choice measured on a Zen 3, commit 4be9dbb). Both
 * give the same bits (block_probs). */
static int keep_probs(const tfm_graph *g, size_t probs) {
    if (probs > TFM_ATTN_KEEP_P_MAX || g->attention_recompute > 0) return 0;
    return g->attention_recompute < 0 || tfm_isa_active() < TFM_ISA_AVX512;
}

/* ip: 0 n_head, 1 kv_heads_first, 2 per-entry variant; fp: 0 scale; saved: lse (B,H,Tq) (the per-entry
 * variant: and each row's max and 1 / sum, saved_floats); aux: mask copy (or NULL) */
tfm_tensor *tfm_attention(tfm_graph *g, tfm_tensor *q, tfm_tensor *k, tfm_tensor *v, int n_head,
                          int kv_heads_first, const tfm_mask *mask, float scale) {
    return tfm_attention_dropout(g, q, k, v, n_head, kv_heads_first, mask, scale, 0.0f);
}

int tfm_attention_supports_dropout(const tfm_graph *g, int Tk) { return Tk <= TFM_ATTN_MAT_MAX_TK && !g->attention_tiled; }

tfm_tensor *tfm_attention_dropout(tfm_graph *g, tfm_tensor *q, tfm_tensor *k, tfm_tensor *v, int n_head,
                                  int kv_heads_first, const tfm_mask *mask, float scale, float dropout) {
    OP_BEGIN(g);
    int H = n_head;
    TFM_ASSERT(q->ndim == 3 && q->shape[2] % H == 0, "attention: q must be (B,Tq,H*d)");
    int B = q->shape[0], Tq = q->shape[1], dk = q->shape[2] / H, Tk, dv;
    if (kv_heads_first) {
        TFM_ASSERT(k->ndim == 4 && v->ndim == 4 && k->shape[0] == B && k->shape[1] == H && k->shape[3] == dk &&
                       v->shape[0] == B && v->shape[1] == H && v->shape[2] == k->shape[2],
                   "attention: k, v must be (B,H,Tk,d)");
        Tk = k->shape[2];
        dv = v->shape[3];
    } else {
        TFM_ASSERT(k->ndim == 3 && v->ndim == 3 && k->shape[0] == B && v->shape[0] == B && k->shape[2] == H * dk &&
                       v->shape[1] == k->shape[1] && v->shape[2] % H == 0,
                   "attention: k, v must be (B,Tk,H*d)");
        Tk = k->shape[1];
        dv = v->shape[2] / H;
    }
    tfm_tensor *in[3] = {q, k, v};
    tfm_tensor *out = tfm_new3(g, B, Tq, H * dv);
    if (tfm_any_grad(g, in, 3)) tfm_tensor_alloc_grad(g, out);
    int grad = tfm_any_grad(g, in, 3);
    /* short sequences in training, or with more than 2 queries: the materialised variant (see above); otherwise
     * (long sequences, decoding steps) the tiled kernel */
    int drop = g->training && dropout > 0.0f;
    TFM_ASSERT(!drop || (dropout < 1.0f && tfm_attention_supports_dropout(g, Tk)),
               "attention: dropout %g needs the materialised variant (Tk %d <= %d)", dropout, Tk, TFM_ATTN_MAT_MAX_TK);
    int mat = (((grad || drop || Tq > 2) && Tk <= TFM_ATTN_MAT_MAX_TK) ||
               (!grad && !drop && Tq > 2 && Tk <= TFM_ATTN_MAT_MAX_TK_INFER)) && !g->attention_tiled;
    attn_args a = {B, H, Tq, Tk, dk, dv, scale, make_view(q, 0, H, Tq, dk), make_view(k, kv_heads_first, H, Tk, dk),
                   make_view(v, kv_heads_first, H, Tk, dv), make_view(out, 0, H, Tq, dv), NULL, NULL, mask,
                   0, 0, 0, 1.0f, 0};
    float *lse = tfm_arena_alloc(&g->arena, sizeof(float) * saved_floats(&a, mat));
    a.lse = lse;
    size_t probs = (size_t)B * entry_probs_floats(&a);
    if (mat && grad && keep_probs(g, probs)) a.probs = tfm_arena_alloc(&g->arena, sizeof(float) * probs);
    if (drop) {
        a.drop = 1;
        a.key = tfm_drop_key(g) + tfm_drop_offset(g, (size_t)B * H * Tq * Tk);
        a.thresh = tfm_drop_thresh(dropout);
        a.dscale = 1.0f / (1.0f - dropout);
    }
    if (mat) mat_forward(&a, lse, tfm_get_threads());
    else attn_forward(&a, lse, tfm_get_threads());
    tfm_node *n = tfm_graph_push(g, TFM_OP_ATTENTION, out, 3, in);
    if (n) {
        n->saved = lse;
        n->aux2 = a.probs;
        n->ip[0] = H;
        n->ip[1] = kv_heads_first;
        n->ip[2] = mat;
        n->ip[3] = a.drop;   /* the dropout key and threshold, for the backward to regenerate the mask */
        n->ip[4] = (int)(uint32_t)(a.key & 0xffffffffu);
        n->ip[5] = (int)(uint32_t)(a.key >> 32);
        n->ip[6] = (int)a.thresh;
        n->fp[1] = a.dscale;
        n->fp[0] = scale;
        if (mask) {
            tfm_mask *mc = tfm_arena_alloc(&g->arena, sizeof *mc);
            *mc = *mask;
            if (mask->valid_lens) {
                size_t cnt = (size_t)B * (mask->per_query ? Tq : 1);
                int *vl = tfm_arena_alloc(&g->arena, cnt * sizeof(int));
                memcpy(vl, mask->valid_lens, cnt * sizeof(int));
                mc->valid_lens = vl;
            }
            n->aux = mc;
        }
    }
    OP_END(g, TFM_OP_ATTENTION);
    return out;
}

/* K/V read in place from a cache (decoding): the tiled forward with the cache's strides and row -> slot
 * index; no node (inference only). */
tfm_tensor *tfm_attention_kv(tfm_graph *g, tfm_tensor *q, const tfm_kv_ref *kv, int n_head, const tfm_mask *mask,
                             float scale) {
    OP_BEGIN(g);
    int H = n_head;
    TFM_ASSERT(q->ndim == 3 && q->shape[2] % H == 0, "attention_kv: q must be (B,Tq,H*d)");
    TFM_ASSERT(!tfm_any_grad(g, &q, 1), "attention_kv: inference only (q tracks grad)");
    TFM_ASSERT(kv->len >= 1 && kv->dv >= 1, "attention_kv: %d keys of size %d", kv->len, kv->dv);
    int B = q->shape[0], Tq = q->shape[1], dk = q->shape[2] / H, Tk = kv->len, dv = kv->dv;
    tfm_tensor *out = tfm_new3(g, B, Tq, H * dv);
    float *lse = tfm_arena_alloc(&g->arena, sizeof(float) * (size_t)B * H * Tq);
    view k = {(float *)kv->k, NULL, kv->sb, kv->sh, kv->st, kv->row};
    view v = {(float *)kv->v, NULL, kv->sb, kv->sh, kv->st, kv->row};
    attn_args a = {B, H, Tq, Tk, dk, dv, scale, make_view(q, 0, H, Tq, dk), k, v, make_view(out, 0, H, Tq, dv), lse,
                   NULL, mask, 0, 0, 0, 1.0f, 0};
    attn_forward(&a, lse, tfm_get_threads());
    OP_END(g, TFM_OP_ATTENTION);
    return out;
}

void tfm_bw_attention(tfm_node *n) {
    tfm_tensor *q = n->in[0], *k = n->in[1], *v = n->in[2], *out = n->out;
    int H = n->ip[0], hf = n->ip[1];
    int B = q->shape[0], Tq = q->shape[1], dk = q->shape[2] / H;
    int Tk = hf ? k->shape[2] : k->shape[1], dv = out->shape[2] / H;
    attn_args a = {B, H, Tq, Tk, dk, dv, n->fp[0], make_view(q, 0, H, Tq, dk), make_view(k, hf, H, Tk, dk),
                   make_view(v, hf, H, Tk, dv), make_view(out, 0, H, Tq, dv), n->saved, (float *)n->aux2, n->aux,
                   n->ip[3], (uint64_t)(uint32_t)n->ip[4] | (uint64_t)(uint32_t)n->ip[5] << 32, (uint32_t)n->ip[6],
                   n->fp[1], (int)n->fresh};
    if (n->ip[2]) mat_backward(&a, tfm_get_threads());
    else attn_backward(&a, tfm_get_threads());
}
