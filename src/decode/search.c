/* Greedy and beam search for any tfm_mt_net (include/tfm/seq2seq.h), batched over sentences.
 *
 * Sentences are sorted by source length and cut into batches (outputs keep the caller's order).
 * Per batch: encode once, init an incremental decoder state (encoder keys/values and self-attention
 * caches live in the state, so the graph arena is reset after every step), then one decode() call
 * per output position for all live rows. Finished rows are dropped with reorder(), so the batch
 * shrinks as sentences end.
 *
 * Beam search: K rows per sentence; at each step every live row's log-softmax is added to its score
 * and the best 2K (row, token) candidates per sentence are kept; a candidate ending in <eos> becomes a
 * finished hypothesis scored logprob / lp(len), lp = ((5 + len) / 6)^alpha (GNMT, len counts the
 * tokens including <eos>); the best K others continue. A sentence stops when it has K finished
 * hypotheses or reaches max_len tokens: its live beams are then finished as they are, each scored as if
 * <eos> came next (its log-probability there is added), so every hypothesis has at most max_len tokens and
 * every score includes one <eos>. Greedy search is the same with one beam.
 *
 * Ensembles (tfm_search_nbest_ensemble): every member encodes the batch and keeps its own incremental state;
 * each step decodes every member and the search ranks by the mean of their log-softmax outputs, not
 * renormalised (Marian's weighted sum of log-probabilities with equal weights; fairseq averages probabilities
 * instead). Row reorders apply to every member's state.
 */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tfm/decode.h"
#include "core/par.h"
#include "ops/vmath.h"

typedef struct {
    float score;
    int row, tok;
} cand;

static float length_penalty(int len, float alpha) {
    return alpha == 0.0f ? 1.0f : powf((5.0f + (float)len) / 6.0f, alpha);
}

/* logsumexp of one row; log-softmax is x[v] - lse. The exponentials come from the vectorised kernel (~1 ulp,
 * summed in a fixed lane order) into scratch (V floats): libm's exp per element was a fifth of beam search. */
static float row_lse(const float *x, int V, float *scratch) {
    float mx = tfm_vmax(x, (size_t)V);
    return mx + logf(tfm_vexp_sum(scratch, x, mx, (size_t)V));
}

/* A candidate with logit x enters a full top list only if score + (x - lse) > worst. Tokens with
 * x <= worst - score + lse cannot, up to rounding; the bound is lowered by far more than the rounding of
 * those three float operations (1e-5 of the magnitudes involved), so the skip never drops a token the
 * exact test would keep and the results are those of testing every token. */
static float skip_bound(float worst, float score, float lse) {
    return worst - score + lse - (fabsf(worst) + fabsf(score) + fabsf(lse)) * 1e-5f - 1e-6f;
}

/* The model's banned tokens (config banned, e.g. an imported Marian's <pad>) can never be chosen. */
static void ban_tokens(const tfm_mt_config *c, float *logits) {
    for (int i = 0; i < c->n_banned; i++) logits[c->banned[i]] = -INFINITY;
}

typedef struct {
    int n;                     /* sentences in this batch */
    const int *sent;           /* their indices in the caller's arrays */
} batch_ref;

static int nonfinite_output(int step) {
    return tfm_set_error("the model's output is not finite (NaN or infinite logits at output token %d): the "
                         "checkpoint's weights diverged", step + 1), -1;
}

/* Encode one batch and create an incremental state with cap rows. Sources are padded to the batch's
 * longest, or to the model's pad_len (at most max_src) when it has one, as in training. */
static void *start_batch(tfm_mt_net *m, tfm_graph *g, const int *src_ids, const int *src_off, const int *sent,
                         int nb, int max_src, int max_steps, int cap, int *Ts_out) {
    int pad = m->cfg.pad_len, Ts = pad < 1 ? 1 : pad < max_src ? pad : max_src;
    for (int i = 0; i < nb; i++) {
        int len = src_off[sent[i] + 1] - src_off[sent[i]];
        if (len > max_src - 1) len = max_src - 1;
        if (len + 1 > Ts) Ts = len + 1;
    }
    int64_t need = tfm_mt_decode_elems(&m->cfg, nb, cap, Ts, max_steps);
    if (need > TFM_MAX_STEP_ELEMS)
        return tfm_set_error("decoding %d sentences x beam %d, %d source tokens, up to %d output tokens (--batch-size, "
                             "--beam, --max-src, --max-output) needs ~%.0f GiB, at most %.0f GiB: lower them", nb, cap / nb,
                             Ts, max_steps - 1, (double)need * 4 / (1 << 30), (double)TFM_MAX_STEP_ELEMS * 4 / (1 << 30)),
               NULL;
    int eos = tfm_mt_eos_id(&m->cfg), pad_id = tfm_mt_pad_id(&m->cfg);
    int *src = tfm_arena_alloc(&g->arena, sizeof(int) * (size_t)nb * Ts);
    int *valid = tfm_arena_alloc(&g->arena, sizeof(int) * (size_t)nb);
    for (int i = 0; i < nb; i++) {
        const int *ids = src_ids + src_off[sent[i]];
        int len = src_off[sent[i] + 1] - src_off[sent[i]];
        if (len > max_src - 1) len = max_src - 1;
        int *row = src + (size_t)i * Ts;
        memcpy(row, ids, sizeof(int) * (size_t)len);
        row[len] = eos;
        for (int t = len + 1; t < Ts; t++) row[t] = pad_id;
        valid[i] = len + 1;
    }
    tfm_tensor *enc = m->vt->encode(m, g, src, valid, nb, Ts);
    *Ts_out = Ts;
    return m->vt->init_state(m, g, enc, valid, nb, Ts, max_steps, cap);
}

/* The models decoded together: one, or an ensemble's members, each with its own incremental state (encoder
 * keys/values, self-attention caches) for the batch. */
typedef struct {
    tfm_mt_net *const *m;
    int n;
    void *st[TFM_MAX_ENSEMBLE];
} members;

static void free_states(members *e) {
    for (int k = 0; k < e->n; k++)
        if (e->st[k]) e->m[k]->vt->free_state(e->m[k], e->st[k]), e->st[k] = NULL;
}

/* start_batch for every member (each pads the sources its own way); 0, or -1 with nothing left to free */
static int start_members(members *e, tfm_graph *g, const int *src_ids, const int *src_off, const int *sent, int nb,
                         int max_src, int max_steps, int cap) {
    int Ts;
    for (int k = 0; k < e->n; k++) e->st[k] = NULL;
    for (int k = 0; k < e->n; k++)
        if (!(e->st[k] = start_batch(e->m[k], g, src_ids, src_off, sent, nb, max_src, max_steps, cap, &Ts)))
            return free_states(e), -1;
    return 0;
}

static void reorder_members(members *e, const int *idx, int n) {
    for (int k = 0; k < e->n; k++) e->m[k]->vt->reorder(e->m[k], e->st[k], idx, n);
}

/* One decoding step of every member for `rows` rows (prev: each row's last token): x[k] = member k's logits,
 * (rows, V) in g's arena until the next reset. */
static void decode_members(members *e, tfm_graph *g, const int *prev, int rows, float **x) {
    for (int k = 0; k < e->n; k++) x[k] = e->m[k]->vt->decode(e->m[k], g, e->st[k], prev, rows, 1)->data;
}

/* The scores the search ranks one step by, (rows, V): a single model's logits, whose log-softmax the search
 * takes itself (*normalized = 0), or an ensemble's mean log-probabilities written over x[0],
 * (sum_k (x_k - lse_k)) / n (*normalized = 1; two equal members give x - lse exactly). Rows split over nt
 * threads, each row summed in a fixed order (the same bits for any thread count); scratch: nt * V floats.
 * NULL when a member's output is not finite. */
static float *step_scores(int n, float **x, int rows, int V, int nt, float *scratch, int *normalized) {
    *normalized = n > 1;
    if (n == 1) return x[0];
    int bad = 0;
    float inv = 1.0f / (float)n;
    TFM_PAR_FOR(nt > 1 && (size_t)rows * V * n >= 65536, schedule(static) num_threads(nt) reduction(|:bad),
    for (int r = 0; r < rows; r++) {
        float *o = x[0] + (size_t)r * V, *tmp = scratch + (size_t)TFM_PAR_RANK * V;
        float lse = row_lse(o, V, tmp);
        bad |= !isfinite(lse);
        for (int v = 0; v < V; v++) o[v] -= lse;
        for (int k = 1; k < n; k++) {
            const float *xk = x[k] + (size_t)r * V;
            lse = row_lse(xk, V, tmp);
            bad |= !isfinite(lse);
            for (int v = 0; v < V; v++) o[v] += xk[v] - lse;
        }
        for (int v = 0; v < V; v++) o[v] *= inv;
    });
    return bad ? NULL : x[0];
}

/* What one batch decodes: sentences sent[0..nb) of the request, with n_models models, into out[sent[i]]. */
typedef struct {
    tfm_mt_net *const *models;
    int n_models;
    const int *src_ids, *src_off;
    const int *sent;
    int nb, max_src;
    const tfm_search_opts *o;
    tfm_hyps *out;
} batch_job;

/* Tokens of sentence s's forced target prefix that fit before max_len (0 without prefixes). */
static int prefix_len(const batch_job *j, int s) {
    if (!j->o->prefix_ids) return 0;
    int n = j->o->prefix_off[j->sent[s] + 1] - j->o->prefix_off[j->sent[s]];
    return n < j->o->max_len ? n : j->o->max_len;
}
static int prefix_tok(const batch_job *j, int s, int step) {
    return j->o->prefix_ids[j->o->prefix_off[j->sent[s]] + step];
}

/* out[sent] = k hypotheses: ids h[i*H .. +len[i]), scores sc[i] (allocated after the decoding loop) */
static int put_hyps(tfm_hyps *out, const int *h, int H, const int *len, const float *sc, int k) {
    int total = 0;
    for (int i = 0; i < k; i++) total += len[i];
    out->n = k;
    out->ids = malloc(sizeof(int) * (size_t)(total > 0 ? total : 1));
    out->off = malloc(sizeof(int) * (size_t)(k + 1));
    out->score = malloc(sizeof(float) * (size_t)(k > 0 ? k : 1));
    if (!out->ids || !out->off || !out->score) return tfm_hyps_free(out), -1;
    out->off[0] = 0;
    for (int i = 0; i < k; i++) {
        memcpy(out->ids + out->off[i], h + (size_t)i * H, sizeof(int) * (size_t)len[i]);
        out->off[i + 1] = out->off[i] + len[i];
        out->score[i] = sc[i];
    }
    return 0;
}


/* A screened step's choice: each row's best token (banned ones never win) from its hidden state h (rows, d)
 * into pick, as the full layer's first argmax (tfm_logit_screen). 0, or -1: h is not finite (a diverged model),
 * out of memory. */
static int screened_pick(const members *e, tfm_graph *g, const tfm_logit_screen *screen, const tfm_tensor *h,
                         int rows, int step, int *pick) {
    const tfm_mt_config *c = &e->m[0]->cfg;
    float *scratch = tfm_arena_alloc(&g->arena, sizeof(float) * tfm_logit_screen_scratch(screen, rows));
    if (!scratch) return tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory (decoding %d rows)", rows), -1;
    return tfm_logit_screen_argmax(screen, h->data, rows, c->banned, c->n_banned, scratch, pick) < 0
               ? nonfinite_output(step)
               : 0;
}

/* Greedy: each row takes its most likely token (or its prefix's); the score is the sum of the chosen tokens'
 * log-probabilities (<eos> included when the sentence ended with it) over the length penalty, or 0 with a
 * screen (the screen finds the best token without the log-softmax's normaliser). */
static int greedy_batch(members *e, tfm_graph *g, const batch_job *j) {
    tfm_mt_net *m = e->m[0];   /* the config (vocabulary, special and banned ids) all members share */
    int nb = j->nb, max_len = j->o->max_len;
    const tfm_logit_screen *screen = e->n == 1 && !g->gemm_bf16 && tfm_logit_screen_of(j->o->screen, m) ? j->o->screen : NULL;
    if (start_members(e, g, j->src_ids, j->src_off, j->sent, nb, j->max_src, max_len + 1, nb)) return -1;
    int V = m->cfg.tgt_vocab, H = max_len + 1, nt = e->n > 1 ? tfm_get_threads() : 1;
    float *x_k[TFM_MAX_ENSEMBLE];
    int *row_sent = malloc(sizeof(int) * (size_t)nb);      /* row -> position in batch */
    int *hist = malloc(sizeof(int) * (size_t)nb * H);
    int *prev = malloc(sizeof(int) * (size_t)nb);
    int *keep = malloc(sizeof(int) * (size_t)nb);
    int *len = malloc(sizeof(int) * (size_t)nb);
    int *pick = malloc(sizeof(int) * (size_t)nb);
    float *logp = malloc(sizeof(float) * (size_t)nb), *scratch = malloc(sizeof(float) * (size_t)V * (size_t)nt);
    int rc = 0;
    if (!row_sent || !hist || !prev || !keep || !len || !pick || !logp || !scratch) {
        rc = -1, tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory (decoding %d sentences)", nb);
        goto end;
    }
    int bos = tfm_mt_bos_id(&m->cfg), eos = tfm_mt_eos_id(&m->cfg);   /* tfm's 1 / 2, or an import's */
    for (int r = 0; r < nb; r++) row_sent[r] = r, prev[r] = bos, len[r] = 0, logp[r] = 0.0f;
    int rows = nb;
    for (int step = 0; rows > 0 && step <= max_len; step++) {
        tfm_graph_reset(g);
        const int screened = screen != NULL;
        tfm_tensor *h = NULL;   /* screened: the hidden states; else each member's logits in x_k */
        if (screened) h = m->vt->decode_hidden(m, g, e->st[0], prev, rows, 1);   /* (rows,1,d) */
        else decode_members(e, g, prev, rows, x_k);                              /* (rows,1,V) each */
        double tp = tfm_profile_begin(g);
        float *scores = NULL;
        int normalized = 0;
        if (screened) {
            if ((rc = screened_pick(e, g, screen, h, rows, step, pick))) break;
        } else if (!(scores = step_scores(e->n, x_k, rows, V, nt, scratch, &normalized))) {
            rc = nonfinite_output(step);
            break;
        }
        int n_keep = 0;
        for (int r = 0; r < rows; r++) {
            float *x = scores ? scores + (size_t)r * V : NULL, lse = 0.0f;
            if (x) {
                if (!tfm_all_finite(x, (size_t)V)) rc = nonfinite_output(step);   /* a diverged model */
                /* the normaliser only feeds the score, which a screened search does not return */
                lse = normalized || screen ? 0.0f : row_lse(x, V, scratch);
                ban_tokens(&m->cfg, x);   /* after the log-softmax's normaliser, as in beam search */
            }
            int s = row_sent[r], best = 0;
            if (step < prefix_len(j, s)) {
                best = prefix_tok(j, s, step);
            } else if (!x) {
                best = pick[r];
            } else {
                best = tfm_vargmax_first(x, V);   /* finite (checked above), banned ones -inf */
            }
            if (step == max_len) best = eos;   /* cut here: scored as if it ended */
            if (x) logp[s] += x[best] - lse;
            if (best == eos) {
                len[s] = step;
            } else {
                hist[(size_t)s * H + step] = best;
                keep[n_keep] = r;
                prev[n_keep] = best;
                row_sent[n_keep] = s;
                n_keep++;
            }
        }
        tfm_profile_end(g, TFM_PHASE_SEARCH, tp);
        if (rc) break;
        tp = tfm_profile_begin(g);
        if (n_keep < rows && n_keep > 0) reorder_members(e, keep, n_keep);
        tfm_profile_end(g, TFM_PHASE_KV_CACHE, tp);
        rows = n_keep;
    }
    for (int s = 0; s < nb && !rc; s++) {
        float sc = screen ? 0.0f : logp[s] / length_penalty(len[s] + 1, j->o->alpha);
        rc = put_hyps(&j->out[j->sent[s]], hist + (size_t)s * H, H, &len[s], &sc, 1);
    }
end:
    free_states(e);
    free(row_sent), free(hist), free(prev), free(keep), free(len), free(pick), free(logp), free(scratch);
    return rc;
}

/* The best N finished hypotheses of one sentence, best first (fin_* hold N slots per sentence). */
typedef struct {
    int N, H;
    float *score;
    int *len, *hyp, *n;
} finished;

/* Offer a finished hypothesis (ids h[0..len)) with normalised score ns to sentence s's list. Ties keep the
 * earlier one first, so slot 0 is the first hypothesis with the highest score. */
static void offer(finished *f, int s, float ns, const int *h, int len) {
    float *sc = f->score + (size_t)s * f->N;
    int *ln = f->len + (size_t)s * f->N, *hy = f->hyp + (size_t)s * f->N * f->H, k = f->n[s];
    if (k == f->N && !(ns > sc[k - 1])) return;
    int pos = k < f->N ? k : f->N - 1;
    if (k < f->N) f->n[s]++;
    for (; pos > 0 && sc[pos - 1] < ns; pos--) {
        sc[pos] = sc[pos - 1];
        ln[pos] = ln[pos - 1];
        memcpy(hy + (size_t)pos * f->H, hy + (size_t)(pos - 1) * f->H, sizeof(int) * (size_t)ln[pos]);
    }
    sc[pos] = ns;
    ln[pos] = len;
    memcpy(hy + (size_t)pos * f->H, h, sizeof(int) * (size_t)len);
}

/* The best 2K (row, token) candidates of one group of K rows (a sentence's beams), best first; their count, or
 * -1 when a row's logits are not finite. normalized: the rows are log-probabilities (an ensemble's mean). With
 * a forced prefix token, that token is the only candidate of each live row. */
static int group_candidates(const tfm_mt_config *cf, float *logits, int normalized, int V, const float *score, int r0,
                            int K, int forced, float *scratch, cand *top) {
    int n_top = 0;
    for (int r = r0; r < r0 + K; r++) {
        if (score[r] == -INFINITY) continue;
        float *x = logits + (size_t)r * V;
        float lse = normalized ? 0.0f : row_lse(x, V, scratch);   /* normalized: log-probabilities already */
        if (!isfinite(lse)) return -1;   /* NaN or infinite logits */
        ban_tokens(cf, x);   /* after the log-softmax's normaliser, as Hugging Face's bad_words_ids */
        if (forced >= 0) {
            float sc = score[r] + (x[forced] - lse);
            int j = n_top++;
            while (j > 0 && top[j - 1].score < sc) top[j] = top[j - 1], j--;
            top[j] = (cand){sc, r, forced};
            continue;
        }
        for (int v = 0; v < V; v++) {
            if (n_top == 2 * K) {   /* skip ahead to the next token that may beat the worst kept */
                v += (int)tfm_vfind_gt(x + v, (size_t)(V - v), skip_bound(top[n_top - 1].score, score[r], lse));
                if (v >= V) break;
            }
            float lp = x[v] - lse;   /* log-softmax */
            float sc = score[r] + lp;
            if (n_top == 2 * K && sc <= top[n_top - 1].score) continue;
            int j = n_top < 2 * K ? n_top++ : n_top - 1;
            while (j > 0 && top[j - 1].score < sc) top[j] = top[j - 1], j--;
            top[j] = (cand){sc, r, v};
        }
    }
    return n_top;
}

static int beam_batch(members *e, tfm_graph *g, const batch_job *j) {
    tfm_mt_net *m = e->m[0];   /* the config (vocabulary, special and banned ids) all members share */
    const tfm_search_opts *o = j->o;
    int nb = j->nb, K = o->beam, max_len = o->max_len, V = m->cfg.tgt_vocab;
    int N = o->num_hypotheses < 1 ? 1 : o->num_hypotheses > K ? K : o->num_hypotheses;
    if (start_members(e, g, j->src_ids, j->src_off, j->sent, nb, j->max_src, max_len + 1, nb * K)) return -1;
    float *x_k[TFM_MAX_ENSEMBLE];
    int H = max_len + 1, R = nb * K;
    int *row_sent = malloc(sizeof(int) * R), *new_row_sent = malloc(sizeof(int) * R);
    float *score = malloc(sizeof(float) * R), *new_score = malloc(sizeof(float) * R);
    int *hist = malloc(sizeof(int) * (size_t)R * H), *new_hist = malloc(sizeof(int) * (size_t)R * H);
    int *prev = malloc(sizeof(int) * R), *idx = malloc(sizeof(int) * R);
    cand *tops = malloc(sizeof(cand) * 2 * K * nb);   /* the best 2K candidates of each row group */
    int *n_tops = malloc(sizeof(int) * nb), *forced = malloc(sizeof(int) * nb);
    finished fin = {N, H, malloc(sizeof(float) * (size_t)nb * N), malloc(sizeof(int) * (size_t)nb * N),
                    malloc(sizeof(int) * (size_t)nb * N * H), calloc((size_t)nb, sizeof(int))};
    int *n_fin = calloc((size_t)nb, sizeof(int)), *done = calloc((size_t)nb, sizeof(int));
    int nt = tfm_get_threads();
    float *lse_tmp = malloc(sizeof(float) * (size_t)V * (size_t)nt);   /* row_lse's scratch, one row per thread */
    int rc = 0;
    if (!row_sent || !new_row_sent || !score || !new_score || !hist || !new_hist || !prev || !idx || !tops || !n_tops ||
        !forced || !fin.score || !fin.len || !fin.hyp || !fin.n || !n_fin || !done || !lse_tmp) {
        rc = -1;
        tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory (beam search over %d sentences x beam %d)", nb, K);
        goto end;
    }
    /* expand each sentence to K rows; only the first beam is live at step 0 */
    for (int r = 0; r < R; r++) {
        idx[r] = r / K;
        row_sent[r] = r / K;
        score[r] = (r % K) ? -INFINITY : 0.0f;
        prev[r] = tfm_mt_bos_id(&m->cfg);
    }
    int eos = tfm_mt_eos_id(&m->cfg);
    double tp = tfm_profile_begin(g);
    reorder_members(e, idx, R);
    tfm_profile_end(g, TFM_PHASE_KV_CACHE, tp);
    int rows = R;
    for (int step = 0; rows > 0 && step <= max_len; step++) {
        tfm_graph_reset(g);
        decode_members(e, g, prev, rows, x_k);
        tp = tfm_profile_begin(g);
        int normalized;
        float *logits = step_scores(e->n, x_k, rows, V, nt, lse_tmp, &normalized);
        if (!logits) {   /* an ensemble member's output is not finite */
            rc = nonfinite_output(step);
            break;
        }
        /* rows come in groups of K per live sentence; groups split over threads (each group's scan is
         * sequential: the same bits for any thread count) */
        int n_groups = rows / K, bad = 0;
        if (step == max_len) {   /* the live beams end here, scored as if <eos> came next */
            for (int r = 0; r < rows; r++) {
                if (score[r] == -INFINITY) continue;
                const float *x = logits + (size_t)r * V;
                float sc = score[r] + (x[eos] - (normalized ? 0.0f : row_lse(x, V, lse_tmp)));
                if (!isfinite(sc)) rc = nonfinite_output(step);
                offer(&fin, row_sent[r], sc / length_penalty(max_len + 1, o->alpha), hist + (size_t)r * H, max_len);
            }
            tfm_profile_end(g, TFM_PHASE_SEARCH, tp);
            break;
        }
        for (int gi = 0; gi < n_groups; gi++) {
            int s = row_sent[gi * K];
            forced[gi] = step < prefix_len(j, s) ? prefix_tok(j, s, step) : -1;
        }
        TFM_PAR_FOR(nt > 1 && (size_t)rows * V >= 65536, schedule(static) num_threads(nt),
        for (int gi = 0; gi < n_groups; gi++) {
            n_tops[gi] = group_candidates(&m->cfg, logits, normalized, V, score, gi * K, K, forced[gi],
                                          lse_tmp + (size_t)TFM_PAR_RANK * V, tops + (size_t)gi * 2 * K);
        });
        for (int gi = 0; gi < n_groups && !bad; gi++) bad = n_tops[gi] < 0;
        if (bad) {   /* NaN or infinite logits: a diverged model */
            rc = nonfinite_output(step);
            break;
        }
        int n_new = 0;
        for (int r0 = 0; r0 < rows; r0 += K) {
            int s = row_sent[r0], n_top = n_tops[r0 / K];
            const cand *top = tops + (size_t)(r0 / K) * 2 * K;
            int n_live = 0;
            for (int c = 0; c < n_top && n_live < K; c++) {
                const cand *cd = &top[c];
                const int *h = hist + (size_t)cd->row * H;
                if (cd->tok == eos) {
                    if (c >= K) continue;   /* only top-K candidates may finish */
                    offer(&fin, s, cd->score / length_penalty(step + 1, o->alpha), h, step);
                    n_fin[s]++;
                    continue;
                }
                int nr = n_new + n_live;
                idx[nr] = cd->row;
                new_row_sent[nr] = s;
                new_score[nr] = cd->score;
                memcpy(new_hist + (size_t)nr * H, h, sizeof(int) * (size_t)step);
                new_hist[(size_t)nr * H + step] = cd->tok;
                n_live++;
            }
            if (n_fin[s] >= K || n_live == 0) {
                done[s] = 1;
                continue;   /* drop this sentence's rows */
            }
            for (; n_live < K; n_live++) {   /* pad the group with dead beams */
                int nr = n_new + n_live;
                idx[nr] = idx[n_new];
                new_row_sent[nr] = s;
                new_score[nr] = -INFINITY;
                memcpy(new_hist + (size_t)nr * H, new_hist + (size_t)n_new * H, sizeof(int) * (size_t)(step + 1));
            }
            n_new += K;
        }
        for (int r = 0; r < n_new; r++) prev[r] = new_hist[(size_t)r * H + step];
        int *ti = hist; hist = new_hist; new_hist = ti;
        float *tf = score; score = new_score; new_score = tf;
        ti = row_sent; row_sent = new_row_sent; new_row_sent = ti;
        tfm_profile_end(g, TFM_PHASE_SEARCH, tp);
        tp = tfm_profile_begin(g);
        if (n_new > 0) reorder_members(e, idx, n_new);
        tfm_profile_end(g, TFM_PHASE_KV_CACHE, tp);
        rows = n_new;
    }
    for (int s = 0; s < nb && !rc; s++)   /* outputs are allocated after the decoding loop */
        rc = put_hyps(&j->out[j->sent[s]], fin.hyp + (size_t)s * N * H, H, fin.len + (size_t)s * N,
                      fin.score + (size_t)s * N, fin.n[s]);
end:
    free_states(e);
    free(row_sent), free(new_row_sent), free(score), free(new_score), free(hist), free(new_hist);
    free(prev), free(idx), free(tops), free(n_tops), free(forced), free(fin.score), free(fin.len), free(fin.hyp),
        free(fin.n), free(n_fin), free(done), free(lse_tmp);
    return rc;
}

/* longest first, then by index (qsort_r: the lengths come as context, no global) */
static int by_len(const void *a, const void *b, void *lens) {
    int ia = *(const int *)a, ib = *(const int *)b;
    int la = ((const int *)lens)[ia], lb = ((const int *)lens)[ib];
    return la != lb ? (la > lb ? -1 : 1) : (ia > ib) - (ia < ib);
}

static int decode_batch(tfm_graph *g, const batch_job *j) {
    members e = {j->models, j->n_models, {0}};
    tfm_graph_reset(g);
    int rc = j->o->beam == 1 ? greedy_batch(&e, g, j) : beam_batch(&e, g, j);
    tfm_graph_reset(g);
    return rc;
}

/* One batch of sentences per thread, each thread on its own worker graph with single-threaded kernels
 * (longest batches first, handed out one at a time, so a slow thread holds up one batch, not half). The
 * kernels give the same bits for any thread count, so the outputs equal those of the serial loop. */
static int decode_batches_parallel(tfm_graph *g, tfm_graph *const *workers, int k, const batch_job *all,
                                   int batch_size) {
    int n = all->nb, n_batches = (n + batch_size - 1) / batch_size, failed = 0;
    char err[512] = "";
    for (int i = 0; i < k; i++) workers[i]->grad_enabled = 0, workers[i]->training = 0, workers[i]->profile = g->profile;
    double tp = tfm_profile_begin(g);
#pragma omp parallel num_threads(k)
    {
        omp_set_num_threads(1);   /* this thread's batches: their kernels run on it alone */
        tfm_graph *w = workers[omp_get_thread_num()];
#pragma omp for schedule(dynamic, 1)
        for (int b = 0; b < n_batches; b++) {
            int stop;
#pragma omp atomic read
            stop = failed;
            if (stop) continue;
            batch_job j = *all;
            j.sent = all->sent + b * batch_size;
            j.nb = n - b * batch_size < batch_size ? n - b * batch_size : batch_size;
            if (decode_batch(w, &j)) {
#pragma omp critical(tfm_decode_error)
                if (!err[0]) snprintf(err, sizeof err, "%s", tfm_last_error()[0] ? tfm_last_error() : "out of memory");
#pragma omp atomic write
                failed = 1;
            }
        }
    }
    tfm_profile_end(g, TFM_PHASE_CHUNKS, tp);
    if (g->profile) tfm_profile_merge(g, workers, k);
    if (failed && err[0]) tfm_set_error("%s", err);
    return failed ? -1 : 0;
}

void tfm_search_opts_default(tfm_search_opts *o) {
    memset(o, 0, sizeof *o);
    o->beam = 1;
    o->max_len = 50;
    o->num_hypotheses = 1;
}

void tfm_hyps_free(tfm_hyps *h) {
    if (!h) return;
    free(h->ids), free(h->off), free(h->score);
    memset(h, 0, sizeof *h);
}

/* The first config field in which two models' outputs differ in meaning (NULL: none). */
static const char *output_difference(const tfm_mt_config *a, const tfm_mt_config *b) {
    if (a->tgt_vocab != b->tgt_vocab) return "tgt_vocab";
    if (tfm_mt_bos_id(a) != tfm_mt_bos_id(b)) return "bos_id";
    if (tfm_mt_eos_id(a) != tfm_mt_eos_id(b)) return "eos_id";
    if (tfm_mt_pad_id(a) != tfm_mt_pad_id(b)) return "pad_id";
    if (a->n_banned != b->n_banned) return "banned";
    for (int i = 0; i < a->n_banned && i < TFM_MT_MAX_BANNED; i++)
        if (a->banned[i] != b->banned[i]) return "banned";
    return NULL;
}

/* Can models decode together: 1..TFM_MAX_ENSEMBLE of them, with one target vocabulary and the same special and
 * banned ids? 0, or -1 with an error naming the member and the field. */
static int check_members(tfm_mt_net *const *ms, int n) {
    if (n < 1 || n > TFM_MAX_ENSEMBLE)
        return tfm_set_error_kind(TFM_ERR_ARG, "ensemble: %d models, must be 1..%d", n, TFM_MAX_ENSEMBLE), -1;
    for (int k = 1; k < n; k++) {
        const char *bad = output_difference(&ms[0]->cfg, &ms[k]->cfg);
        if (bad)
            return tfm_set_error_kind(TFM_ERR_ARG, "ensemble: model %d differs from model 1 in config.%s: the members "
                                      "must share the target vocabulary", k + 1, bad), -1;
    }
    return 0;
}

int tfm_search_nbest(tfm_mt_net *m, tfm_graph *g, tfm_graph *const *workers, int n_workers, const int *src_ids,
                     const int *src_off, int n, int max_src, int batch_size, const tfm_search_opts *o, tfm_hyps *out) {
    return tfm_search_nbest_ensemble(&m, 1, g, workers, n_workers, src_ids, src_off, n, max_src, batch_size, o, out);
}

int tfm_search_nbest_ensemble(tfm_mt_net *const *models, int n_models, tfm_graph *g, tfm_graph *const *workers,
                              int n_workers, const int *src_ids, const int *src_off, int n, int max_src, int batch_size,
                              const tfm_search_opts *o, tfm_hyps *out) {
    for (int i = 0; i < n; i++) memset(&out[i], 0, sizeof out[i]);
    if (check_members(models, n_models)) return -1;
    tfm_search_opts op = *o;
    if (op.beam < 1) op.beam = 1;
    if (op.max_len < 1) op.max_len = 1;
    if (op.num_hypotheses < 1) op.num_hypotheses = 1;
    if (op.num_hypotheses > op.beam) op.num_hypotheses = op.beam;
    if (max_src < 2) max_src = 2;
    if (batch_size < 1) batch_size = 1;
    for (int k = 0; k < n_models; k++) {   /* e.g. a positional-encoding table bounds both sides */
        int max_pos = tfm_mt_net_max_positions(models[k]);
        if (max_pos > 0) {
            if (max_src > max_pos) max_src = max_pos;
            if (op.max_len + 1 > max_pos) op.max_len = max_pos - 1;
        }
    }
    int *order = malloc(sizeof(int) * (size_t)(n > 0 ? n : 1));
    int *lens = malloc(sizeof(int) * (size_t)(n > 0 ? n : 1));
    if (!order || !lens) {
        free(order), free(lens);
        return tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory (decoding %d sentences)", n), -1;
    }
    for (int i = 0; i < n; i++) order[i] = i, lens[i] = src_off[i + 1] - src_off[i];
    qsort_r(order, (size_t)n, sizeof(int), by_len, lens);
    int n_batches = (n + batch_size - 1) / batch_size, nt = tfm_get_threads();
    int k = n_workers < n_batches ? n_workers : n_batches;
    if (k > nt) k = nt;
    batch_job all = {models, n_models, src_ids, src_off, order, n, max_src, &op, out};
    int rc = 0;
    if (k >= 2) {
        rc = decode_batches_parallel(g, workers, k, &all, batch_size);
    } else {   /* one batch (or one worker): every op split over the threads */
        int saved_grad = g->grad_enabled, saved_train = g->training;
        g->grad_enabled = 0;
        g->training = 0;
        for (int i0 = 0; i0 < n && !rc; i0 += batch_size) {
            batch_job j = all;
            j.sent = order + i0;
            j.nb = n - i0 < batch_size ? n - i0 : batch_size;
            rc = decode_batch(g, &j);
        }
        g->grad_enabled = saved_grad;
        g->training = saved_train;
    }
    if (rc)
        for (int i = 0; i < n; i++) tfm_hyps_free(&out[i]);
    free(order);
    free(lens);
    return rc;
}

int tfm_search_ids_par(tfm_mt_net *m, tfm_graph *g, tfm_graph *const *workers, int n_workers, const int *src_ids,
                       const int *src_off, int n, int max_src, int batch_size, const tfm_search_opts *o, int **out,
                       int *out_len) {
    tfm_search_opts op = *o;
    op.num_hypotheses = 1;
    tfm_hyps *h = calloc((size_t)(n > 0 ? n : 1), sizeof *h);
    for (int i = 0; i < n; i++) out[i] = NULL, out_len[i] = 0;
    if (!h) return tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory (decoding %d sentences)", n), -1;
    int rc = tfm_search_nbest(m, g, workers, n_workers, src_ids, src_off, n, max_src, batch_size, &op, h);
    for (int i = 0; i < n && !rc; i++) {   /* the best hypothesis' ids: the hypotheses' buffer, handed over */
        out_len[i] = h[i].n > 0 ? h[i].off[1] : 0;
        out[i] = h[i].ids;
        h[i].ids = NULL;
        tfm_hyps_free(&h[i]);
    }
    free(h);
    return rc;
}

int tfm_search_ids(tfm_mt_net *m, tfm_graph *g, const int *src_ids, const int *src_off, int n, int max_src,
                   int batch_size, const tfm_search_opts *o, int **out, int *out_len) {
    return tfm_search_ids_par(m, g, NULL, 0, src_ids, src_off, n, max_src, batch_size, o, out, out_len);
}
