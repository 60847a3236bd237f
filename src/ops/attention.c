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
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#define TILE 64
#define TFM_ATTN_MAT_MAX_TK 128

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
    const tfm_mask *mask;
    int drop;           /* attention dropout (per-batch-entry variant only) */
    uint64_t key;       /* its counter-based RNG key (the same bits tfm_dropout draws; the backward
                           regenerates the mask from it) */
    uint32_t thresh;
    float dscale;       /* 1 / (1 - p) */
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

/* s[0..n) = scale * q . k_j for keys j0..j0+n */
static inline void scores(float *s, const float *q, const float *Kt, int Tk, int dk, int j0, int n, float scale) {
    for (int jj = 0; jj < n; jj++) s[jj] = 0.0f;
    for (int c = 0; c < dk; c++) {
        float qc = q[c] * scale;
        const float *row = Kt + (size_t)c * Tk + j0;
        for (int jj = 0; jj < n; jj++) s[jj] += qc * row[jj];
    }
}

static inline __attribute__((always_inline)) void attn_forward_bh(const attn_args *a, float *lse, float *Kt, int bh) {
    int b = bh / a->H, h = bh % a->H, Tk = a->Tk, dk = a->dk, dv = a->dv;
    float *s = Kt + (size_t)(dk + dv) * Tk;
    /* few queries (decoding): dot products on K rows; otherwise transpose K once for all queries */
    int direct = a->Tq <= 2;
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
            if (direct)
                for (int jj = 0; jj < n; jj++) s[jj] = a->scale * tfm_vdot(qi, Kb + (size_t)(j0 + jj) * a->k.st, (size_t)dk);
            else scores(s, qi, Kt, Tk, dk, j0, n, a->scale);
            float mt = tfm_vmax(s, (size_t)n), mnew = mt > m ? mt : m;
            float corr = tfm_expf(m - mnew);
            l = l * corr + tfm_vexp_sum(s, s, mnew, (size_t)n);
            if (corr != 1.0f)
                for (int c = 0; c < dv; c++) o[c] *= corr;
            for (int jj = 0; jj < n; jj++) {
                const float *vr = Vb + (size_t)(j0 + jj) * a->v.st;
                float p = s[jj];
                for (int c = 0; c < dv; c++) o[c] += p * vr[c];
            }
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
static void attn_forward_c(ARGS_ATTN_FORWARD) { attn_forward_bh(PASS_ATTN_FORWARD); }
#if TFM_X86
TFM_TARGET_AVX2 static void attn_forward_avx2(ARGS_ATTN_FORWARD) { attn_forward_bh(PASS_ATTN_FORWARD); }
TFM_TARGET_AVX512 static void attn_forward_avx512(ARGS_ATTN_FORWARD) { attn_forward_bh(PASS_ATTN_FORWARD); }
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
#pragma omp parallel for schedule(dynamic, 1) num_threads(nt) if (nt > 1 && work >= 65536)
    for (int bh = 0; bh < nbh; bh++) one(a, lse, buf + per * omp_get_thread_num(), bh);
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

static inline __attribute__((always_inline)) void attn_backward_bh(const attn_args *a, float *Kt, int bh) {
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
                    scores(pr, qi, Kt, Tk, dk, j0, cnt, a->scale);
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
static void attn_backward_c(ARGS_ATTN_BACKWARD) { attn_backward_bh(PASS_ATTN_BACKWARD); }
#if TFM_X86
TFM_TARGET_AVX2 static void attn_backward_avx2(ARGS_ATTN_BACKWARD) { attn_backward_bh(PASS_ATTN_BACKWARD); }
TFM_TARGET_AVX512 static void attn_backward_avx512(ARGS_ATTN_BACKWARD) { attn_backward_bh(PASS_ATTN_BACKWARD); }
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
#pragma omp parallel for schedule(dynamic, 1) num_threads(nt) if (nt > 1 && work >= 32768)
    for (int bh = 0; bh < nbh; bh++) one(a, buf + per * omp_get_thread_num(), bh);
}

/* ---------------------------------------------------------------- per-batch-entry variant
 * For short sequences with grad tracked (training), whole (Tq,Tk) score blocks of one batch entry through
 * strided batched GEMMs are faster on a CPU than the row-by-row tiled kernel. The
 * forward forms S = scale Q K^T and P = masked softmax(S) for one batch entry's H heads in per-thread
 * scratch, O = P V straight into the (B,T,H*d) layout, and saves only the row logsumexp, like the tiled
 * kernel: no (B,H,Tq,Tk) tensor is kept. The backward recomputes that entry's P = exp(S - lse) (one more
 * batched GEMM), regenerates the dropout mask from its key, then dP = dO V^T, dV += P^T dO,
 * dS = scale * P (dP - rowsum(dP P)) on visible keys, dQ += dS K, dK += dS^T Q. One thread per batch entry
 * (the GEMMs inside run single-threaded), so results do not depend on the thread count. */

/* S = scale Q K^T for batch entry b, all heads: (H, Tq, Tk) */
static void block_scores(const attn_args *a, int b, float *S) {
    size_t hs = (size_t)a->Tq * a->Tk;
    tfm_gemm_batched(a->H, 0, 1, a->Tq, a->Tk, a->dk, a->scale, a->q.data + b * a->q.sb, (int)a->q.st, a->q.sh,
                     a->k.data + b * a->k.sb, (int)a->k.st, a->k.sh, 0.0f, S, a->Tk, hs);
}

/* Scores -> probabilities in place. Forward (lse_out): the d2l masked softmax, saving each row's
 * logsumexp (NAN for a row with no visible key, which is uniform). Backward: exp(S - lse) from the saved
 * values. Hidden keys get exp(-1e6 - max) (0 unless every visible score is below -1e6). */
static void block_probs(const attn_args *a, int b, float *P, float *lse_out) {
    int Tq = a->Tq, Tk = a->Tk;
    size_t hs = (size_t)Tq * Tk;
    for (int h = 0; h < a->H; h++)
        for (int i = 0; i < Tq; i++) {
            float *row = P + h * hs + (size_t)i * Tk;
            size_t li = ((size_t)b * a->H + h) * Tq + i;
            int lim = visible(a, b, i);
            if (lim <= 0) {
                for (int j = 0; j < Tk; j++) row[j] = 1.0f / Tk;
                if (lse_out) lse_out[li] = NAN;
                continue;
            }
            if (!lse_out) {
                float l = a->lse[li], hid = lim < Tk ? tfm_expf(-1e6f - l) : 0.0f;
                tfm_vexp_sum(row, row, l, (size_t)lim);
                for (int j = lim; j < Tk; j++) row[j] = hid;
                continue;
            }
            float mx = tfm_vmax(row, (size_t)lim);
            if (lim < Tk && mx < -1e6f) mx = -1e6f;
            float sum = tfm_vexp_sum(row, row, mx, (size_t)lim);
            float hid = lim < Tk ? tfm_expf(-1e6f - mx) : 0.0f;
            for (int j = lim; j < Tk; j++) row[j] = hid;
            sum += hid * (Tk - lim);
            float inv = 1.0f / sum;
            for (int j = 0; j < Tk; j++) row[j] *= inv;
            lse_out[li] = mx + logf(sum);
        }
}

/* Pd = dropout(P) for batch entry b: element order (b,h,i,j), as tfm_dropout on (B*H,Tq,Tk). With g
 * non-NULL, also g *= the same mask and scale (the backward's dP). */
static void block_dropout(const attn_args *a, int b, const float *P, float *Pd, float *g) {
    size_t n = (size_t)a->H * a->Tq * a->Tk, base = (size_t)b * n;
    for (size_t x = 0; x < n; x++) {
        int k = tfm_drop_hash(a->key + base + x) >= a->thresh;
        Pd[x] = k ? P[x] * a->dscale : 0.0f;
        if (g) g[x] = k ? g[x] * a->dscale : 0.0f;
    }
}

static void mat_forward(const attn_args *a, float *lse, int nt) {
    int H = a->H, Tq = a->Tq, Tk = a->Tk;
    size_t hs = (size_t)Tq * Tk, blk = (size_t)H * hs + 16, per = (a->drop ? 2 : 1) * blk;
    float *buf = thread_scratch(per, nt);
#pragma omp parallel for schedule(dynamic, 1) num_threads(nt) if (nt > 1 && a->B > 1)
    for (int b = 0; b < a->B; b++) {
        float *P = buf + per * omp_get_thread_num(), *Pv = P;
        block_scores(a, b, P);
        block_probs(a, b, P, lse);
        if (a->drop) block_dropout(a, b, P, Pv = P + blk, NULL);
        tfm_gemm_batched(H, 0, 0, Tq, a->dv, Tk, 1.0f, Pv, Tk, hs, a->v.data + b * a->v.sb, (int)a->v.st, a->v.sh,
                         0.0f, a->o.data + b * a->o.sb, (int)a->o.st, a->o.sh);
    }
}

static void mat_backward(const attn_args *a, int nt) {
    int H = a->H, Tq = a->Tq, Tk = a->Tk;
    size_t hs = (size_t)Tq * Tk, blk = (size_t)H * hs + 16, per = (a->drop ? 3 : 2) * blk;
    float *buf = thread_scratch(per, nt);
#pragma omp parallel for schedule(dynamic, 1) num_threads(nt) if (nt > 1 && a->B > 1)
    for (int b = 0; b < a->B; b++) {
        float *P = buf + per * omp_get_thread_num(), *dS = P + blk, *Pv = P;
        block_scores(a, b, P);
        block_probs(a, b, P, NULL);
        const float *dO = a->o.grad + b * a->o.sb;
        int ost = (int)a->o.st;
        /* dP = dO V^T */
        tfm_gemm_batched(H, 0, 1, Tq, Tk, a->dv, 1.0f, dO, ost, a->o.sh, a->v.data + b * a->v.sb, (int)a->v.st,
                         a->v.sh, 0.0f, dS, Tk, hs);
        if (a->drop) block_dropout(a, b, P, Pv = dS + blk, dS); /* the dropped weights, and dP through the mask */
        if (a->v.grad) /* dV += P^T dO (P after dropout) */
            tfm_gemm_batched(H, 1, 0, Tk, a->dv, Tq, 1.0f, Pv, Tk, hs, dO, ost, a->o.sh, 1.0f,
                             a->v.grad + b * a->v.sb, (int)a->v.st, a->v.sh);
        for (int h = 0; h < H; h++)
            for (int i = 0; i < Tq; i++) {
                const float *p = P + h * hs + (size_t)i * Tk;
                float *d = dS + h * hs + (size_t)i * Tk;
                int lim = visible(a, b, i);
                float dot = tfm_vdot(d, p, (size_t)Tk), sc = a->scale;
                for (int j = 0; j < lim; j++) d[j] = sc * p[j] * (d[j] - dot);
                for (int j = lim > 0 ? lim : 0; j < Tk; j++) d[j] = 0.0f;
            }
        if (a->q.grad) /* dQ += dS K */
            tfm_gemm_batched(H, 0, 0, Tq, a->dk, Tk, 1.0f, dS, Tk, hs, a->k.data + b * a->k.sb, (int)a->k.st, a->k.sh,
                             1.0f, a->q.grad + b * a->q.sb, (int)a->q.st, a->q.sh);
        if (a->k.grad) /* dK += dS^T Q */
            tfm_gemm_batched(H, 1, 0, Tk, a->dk, Tq, 1.0f, dS, Tk, hs, a->q.data + b * a->q.sb, (int)a->q.st, a->q.sh,
                             1.0f, a->k.grad + b * a->k.sb, (int)a->k.st, a->k.sh);
    }
}

/* ip: 0 n_head, 1 kv_heads_first; fp: 0 scale; saved: lse (B,H,Tq); aux: mask copy (or NULL) */
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
    if (tfm_any_grad(g, in, 3)) out->grad = tfm_arena_calloc(&g->arena, out->size * sizeof(float));
    int grad = tfm_any_grad(g, in, 3);
    /* training on short sequences: the materialised variant (see above); otherwise the tiled kernel */
    int drop = g->training && dropout > 0.0f;
    TFM_ASSERT(!drop || (dropout < 1.0f && tfm_attention_supports_dropout(g, Tk)),
               "attention: dropout %g needs the materialised variant (Tk %d <= %d)", dropout, Tk, TFM_ATTN_MAT_MAX_TK);
    int mat = (grad || drop) && Tk <= TFM_ATTN_MAT_MAX_TK && !g->attention_tiled;
    float *lse = tfm_arena_alloc(&g->arena, sizeof(float) * (size_t)B * H * Tq);
    attn_args a = {B, H, Tq, Tk, dk, dv, scale, make_view(q, 0, H, Tq, dk), make_view(k, kv_heads_first, H, Tk, dk),
                   make_view(v, kv_heads_first, H, Tk, dv), make_view(out, 0, H, Tq, dv), lse, mask,
                   0, 0, 0, 1.0f};
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
                   mask, 0, 0, 0, 1.0f};
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
                   make_view(v, hf, H, Tk, dv), make_view(out, 0, H, Tq, dv), n->saved, n->aux,
                   n->ip[3], (uint64_t)(uint32_t)n->ip[4] | (uint64_t)(uint32_t)n->ip[5] << 32, (uint32_t)n->ip[6],
                   n->fp[1]};
    if (n->ip[2]) mat_backward(&a, tfm_get_threads());
    else attn_backward(&a, tfm_get_threads());
}
