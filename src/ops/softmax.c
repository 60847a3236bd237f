/* Softmax, masked softmax (causal / valid lengths) and fused softmax + cross-entropy. */
#include "ops/op_impl.h"
#include "ops/vmath.h"
#include <math.h>
#include <string.h>

#define MASK_VALUE (-1e6f) /* d2l's masked_softmax fill */

/* Number of visible keys for row r of x viewed as (n_batch, n_heads, Tq, Tk). */
static inline int visible_keys(const tfm_mask *m, int r, int Tq, int Tk) {
    int lim = Tk;
    if (!m) return lim;
    int q = r % Tq;
    if (m->causal) lim = q + 1 + (Tk - Tq);
    if (m->valid_lens) {
        int H = m->n_heads > 0 ? m->n_heads : 1;
        int b = r / (H * Tq);
        int v = m->per_query ? m->valid_lens[b * Tq + q] : m->valid_lens[b];
        if (v < lim) lim = v;
    }
    return lim < 0 ? 0 : lim;
}

/* One row: y = softmax over the first lim entries; hidden entries get exp(MASK_VALUE - max) (0 unless the
 * whole row is hidden, which gives the uniform row d2l's masked_softmax gives). */
static void softmax_row(float *yr, const float *xr, int lim, int Tk) {
    if (lim <= 0) {
        for (int j = 0; j < Tk; j++) yr[j] = 1.0f / Tk;
        return;
    }
    float mx = tfm_vmax(xr, (size_t)lim);
    if (lim < Tk && mx < MASK_VALUE) mx = MASK_VALUE;
    float s = tfm_vexp_sum(yr, xr, mx, (size_t)lim);
    if (lim < Tk) {
        float h = tfm_expf(MASK_VALUE - mx);
        for (int j = lim; j < Tk; j++) yr[j] = h;
        s += h * (Tk - lim);
    }
    float inv = 1.0f / s;
    for (int j = 0; j < Tk; j++) yr[j] *= inv;
}

void tfm_softmax_rows(float *y, const float *x, int rows, int Tq, int Tk, const tfm_mask *m) {
    TFM_PAR_FOR((size_t)rows * Tk >= 8192, schedule(dynamic, tfm_dyn_chunk(rows)),
    for (int r = 0; r < rows; r++) {
        softmax_row(y + (size_t)r * Tk, x + (size_t)r * Tk, visible_keys(m, r, Tq, Tk), Tk);
    });
}

tfm_tensor *tfm_masked_softmax(tfm_graph *g, tfm_tensor *x, const tfm_mask *m) {
    OP_BEGIN(g);
    int Tk = tfm_last_dim(x), rows = (int)tfm_rows(x), Tq = x->ndim >= 2 ? x->shape[x->ndim - 2] : 1;
    tfm_tensor *out = tfm_tensor_new(g, x->ndim, x->shape, tfm_any_grad(g, &x, 1));
    tfm_softmax_rows(out->data, x->data, rows, Tq, Tk, m);
    tfm_node *n = tfm_graph_push(g, TFM_OP_SOFTMAX, out, 1, &x);
    if (n && m) { /* masked scores get no gradient: record the mask */
        tfm_mask *mc = tfm_arena_alloc(&g->arena, sizeof *mc);
        *mc = *m;
        if (m->valid_lens) {
            int H = m->n_heads > 0 ? m->n_heads : 1, nb = rows / (H * Tq);
            size_t cnt = (size_t)nb * (m->per_query ? Tq : 1);
            int *vl = tfm_arena_alloc(&g->arena, cnt * sizeof(int));
            memcpy(vl, m->valid_lens, cnt * sizeof(int));
            mc->valid_lens = vl;
        }
        n->aux = mc;
    }
    OP_END(g, TFM_OP_SOFTMAX);
    return out;
}

tfm_tensor *tfm_softmax(tfm_graph *g, tfm_tensor *x) { return tfm_masked_softmax(g, x, NULL); }

/* dx_j += y_j (dy_j - sum_k dy_k y_k) over visible keys; hidden scores were replaced, so get 0. */
void tfm_bw_softmax(tfm_node *n) {
    tfm_tensor *x = n->in[0], *y = n->out;
    const tfm_mask *m = n->aux;
    int Tk = tfm_last_dim(x), rows = (int)tfm_rows(x), Tq = x->ndim >= 2 ? x->shape[x->ndim - 2] : 1;
    TFM_PAR_FOR((size_t)rows * Tk >= 8192, schedule(dynamic, tfm_dyn_chunk(rows)),
    for (int r = 0; r < rows; r++) {
        const float *yr = y->data + (size_t)r * Tk, *dy = y->grad + (size_t)r * Tk;
        float *dx = x->grad + (size_t)r * Tk;
        int lim = visible_keys(m, r, Tq, Tk);
        float dot = tfm_vdot(dy, yr, (size_t)Tk);
        for (int j = 0; j < lim; j++) dx[j] += yr[j] * (dy[j] - dot);
    });
}

/* ---------------------------------------------------------------- cross-entropy */
#define CE_CHUNK 512 /* vocabulary slice exponentiated at a time (stack scratch) */

/* saved: per-row logsumexp; aux: targets copy; ip[0] rows, ip[1] ignore_index, ip[2] count; fp[0] eps */
tfm_tensor *tfm_cross_entropy(tfm_graph *g, tfm_tensor *logits, const int *targets, int ignore_index,
                              float label_smoothing) {
    OP_BEGIN(g);
    int V = tfm_last_dim(logits), rows = (int)tfm_rows(logits);
    float eps = label_smoothing;
    tfm_tensor *out = tfm_tensor_new(g, 1, (int[]){1}, tfm_any_grad(g, &logits, 1));
    float *lse = tfm_arena_alloc(&g->arena, sizeof(float) * rows);
    float *row_loss = tfm_arena_alloc(&g->arena, sizeof(float) * rows);
    for (int r = 0; r < rows; r++)
        TFM_ASSERT(targets[r] == ignore_index || (targets[r] >= 0 && targets[r] < V),
                   "cross_entropy: target %d not in [0,%d)", targets[r], V);
    TFM_PAR_FOR((size_t)rows * V >= 8192, schedule(dynamic, tfm_dyn_chunk(rows)),
    for (int r = 0; r < rows; r++) {
        const float *x = logits->data + (size_t)r * V;
        float tmp[CE_CHUNK];
        float mx = tfm_vmax(x, (size_t)V), s = 0, sum_x = eps != 0.0f ? tfm_vsum(x, (size_t)V) : 0.0f;
        for (int v0 = 0; v0 < V; v0 += CE_CHUNK) {
            int len = V - v0 < CE_CHUNK ? V - v0 : CE_CHUNK;
            s += tfm_vexp_sum(tmp, x + v0, mx, (size_t)len);
        }
        lse[r] = mx + logf(s);
        if (targets[r] == ignore_index) row_loss[r] = 0;
        else row_loss[r] = (1.0f - eps) * (lse[r] - x[targets[r]]) + eps * (lse[r] - sum_x / V);
    });
    int count = 0;
    double total = 0;
    for (int r = 0; r < rows; r++)
        if (targets[r] != ignore_index) {
            count++;
            total += row_loss[r];
        }
    out->data[0] = count ? (float)(total / count) : 0.0f;
    tfm_node *n = tfm_graph_push(g, TFM_OP_CROSS_ENTROPY, out, 1, &logits);
    if (n) {
        int *t = tfm_arena_alloc(&g->arena, sizeof(int) * rows);
        memcpy(t, targets, sizeof(int) * rows);
        n->aux = t;
        n->saved = lse;
        n->ip[0] = rows; n->ip[1] = ignore_index; n->ip[2] = count;
        n->fp[0] = eps;
    }
    OP_END(g, TFM_OP_CROSS_ENTROPY);
    return out;
}

/* d loss / d x_v = (p_v - (1-eps) [v == t] - eps / V) / count */
void tfm_bw_cross_entropy(tfm_node *n) {
    tfm_tensor *logits = n->in[0];
    const int *t = n->aux;
    const float *lse = n->saved;
    int V = tfm_last_dim(logits), rows = n->ip[0], ignore = n->ip[1], count = n->ip[2];
    float eps = n->fp[0];
    const int assign = tfm_bw_fresh(n, 0);   /* write the logits' grad (ignored rows: 0) instead of adding */
    if (!count && !assign) return;
    float d = count ? n->out->grad[0] / count : 0.0f;
    float off = d * eps / V;
    TFM_PAR_FOR((size_t)rows * V >= 8192, schedule(dynamic, tfm_dyn_chunk(rows)),
    for (int r = 0; r < rows; r++) {
        float *dx = logits->grad + (size_t)r * V;
        if (!count || t[r] == ignore) {
            if (assign) memset(dx, 0, sizeof(float) * V);
            continue;
        }
        const float *x = logits->data + (size_t)r * V;
        float tmp[CE_CHUNK];
        for (int v0 = 0; v0 < V; v0 += CE_CHUNK) {
            int len = V - v0 < CE_CHUNK ? V - v0 : CE_CHUNK;
            tfm_vexp_sum(tmp, x + v0, lse[r], (size_t)len);
            if (assign)
                for (int k = 0; k < len; k++) dx[v0 + k] = d * tmp[k] - off;
            else
                for (int k = 0; k < len; k++) dx[v0 + k] += d * tmp[k] - off;
        }
        dx[t[r]] -= d * (1.0f - eps);
    });
}

/* ---------------------------------------------------------------- symmetric KL (R-Drop) */
/* The row's log-sum-exp, by CE_CHUNK slices (tfm_cross_entropy's arithmetic). */
static float row_lse(const float *x, int V) {
    float tmp[CE_CHUNK], mx = tfm_vmax(x, (size_t)V), s = 0;
    for (int v0 = 0; v0 < V; v0 += CE_CHUNK) s += tfm_vexp_sum(tmp, x + v0, mx, (size_t)(V - v0 < CE_CHUNK ? V - v0 : CE_CHUNK));
    return mx + logf(s);
}

/* One row's KL(p||q) and KL(q||p) from the logits and their log-sum-exps: p_v = exp(a_v - la), q_v = exp(b_v - lb),
 * D_v = log p_v - log q_v; KL(p||q) = sum p D, KL(q||p) = -sum q D. */
static void row_kl(const float *a, const float *b, int V, float la, float lb, float *kl_pq, float *kl_qp) {
    float p[CE_CHUNK], q[CE_CHUNK], spq = 0, sqp = 0;
    for (int v0 = 0; v0 < V; v0 += CE_CHUNK) {
        int len = V - v0 < CE_CHUNK ? V - v0 : CE_CHUNK;
        tfm_vexp_sum(p, a + v0, la, (size_t)len);
        tfm_vexp_sum(q, b + v0, lb, (size_t)len);
        for (int k = 0; k < len; k++) {
            float d = (a[v0 + k] - la) - (b[v0 + k] - lb);
            spq += p[k] * d, sqp -= q[k] * d;
        }
    }
    *kl_pq = spq, *kl_qp = sqp;
}

/* saved: per row la, lb, KL(p||q), KL(q||p) (4 floats); aux: targets copy; ip[0] rows, ip[1] ignore, ip[2] count */
tfm_tensor *tfm_sym_kl(tfm_graph *g, tfm_tensor *a, tfm_tensor *b, const int *targets, int ignore_index) {
    OP_BEGIN(g);
    TFM_ASSERT(a->size == b->size && tfm_last_dim(a) == tfm_last_dim(b), "sym_kl: a and b must have one shape");
    int V = tfm_last_dim(a), rows = (int)tfm_rows(a);
    tfm_tensor *in[2] = {a, b};
    tfm_tensor *out = tfm_tensor_new(g, 1, (int[]){1}, tfm_any_grad(g, in, 2));
    float *st = tfm_arena_alloc(&g->arena, sizeof(float) * 4 * (size_t)(rows > 0 ? rows : 1));
    TFM_PAR_FOR((size_t)rows * V >= 8192, schedule(dynamic, tfm_dyn_chunk(rows)),
    for (int r = 0; r < rows; r++) {
        float *s = st + 4 * (size_t)r;
        if (targets[r] == ignore_index) {
            s[0] = s[1] = s[2] = s[3] = 0;
            continue;
        }
        const float *ar = a->data + (size_t)r * V, *br = b->data + (size_t)r * V;
        s[0] = row_lse(ar, V), s[1] = row_lse(br, V);
        row_kl(ar, br, V, s[0], s[1], &s[2], &s[3]);
    });
    int count = 0;
    double total = 0;
    for (int r = 0; r < rows; r++)
        if (targets[r] != ignore_index) count++, total += 0.5 * ((double)st[4 * r + 2] + st[4 * r + 3]);
    out->data[0] = count ? (float)(total / count) : 0.0f;
    tfm_node *n = tfm_graph_push(g, TFM_OP_SYM_KL, out, 2, in);
    if (n) {
        int *t = tfm_arena_alloc(&g->arena, sizeof(int) * (size_t)(rows > 0 ? rows : 1));
        memcpy(t, targets, sizeof(int) * (size_t)rows);
        n->aux = t;
        n->saved = st;
        n->ip[0] = rows, n->ip[1] = ignore_index, n->ip[2] = count;
    }
    OP_END(g, TFM_OP_SYM_KL);
    return out;
}

/* f = 0.5 sum_v (p_v - q_v) D_v with D = log p - log q. Through the log-softmax:
 *   df/da_k = 0.5 (p_k (D_k - KL(p||q)) + p_k - q_k),   df/db_k = 0.5 (q_k (-D_k - KL(q||p)) + q_k - p_k). */
void tfm_bw_sym_kl(tfm_node *n) {
    tfm_tensor *a = n->in[0], *b = n->in[1];
    const int *t = n->aux;
    const float *st = n->saved;
    int V = tfm_last_dim(a), rows = n->ip[0], ignore = n->ip[1], count = n->ip[2];
    if (!count) return;
    float d = 0.5f * n->out->grad[0] / count;
    TFM_PAR_FOR((size_t)rows * V >= 8192, schedule(dynamic, tfm_dyn_chunk(rows)),
    for (int r = 0; r < rows; r++) {
        if (t[r] == ignore) continue;
        const float *s = st + 4 * (size_t)r, *ar = a->data + (size_t)r * V, *br = b->data + (size_t)r * V;
        float *ga = a->grad ? a->grad + (size_t)r * V : NULL, *gb = b->grad ? b->grad + (size_t)r * V : NULL;
        float p[CE_CHUNK], q[CE_CHUNK];
        for (int v0 = 0; v0 < V; v0 += CE_CHUNK) {
            int len = V - v0 < CE_CHUNK ? V - v0 : CE_CHUNK;
            tfm_vexp_sum(p, ar + v0, s[0], (size_t)len);
            tfm_vexp_sum(q, br + v0, s[1], (size_t)len);
            for (int k = 0; k < len; k++) {
                float dk = (ar[v0 + k] - s[0]) - (br[v0 + k] - s[1]);
                if (ga) ga[v0 + k] += d * (p[k] * (dk - s[2]) + p[k] - q[k]);
                if (gb) gb[v0 + k] += d * (q[k] * (-dk - s[3]) + q[k] - p[k]);
            }
        }
    });
}
