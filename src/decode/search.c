/* Greedy and beam search for any tfm_encdec (include/tfm/seq2seq.h), batched over sentences.
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
 * hypotheses or reaches max_len (its live beams are then finished as they are).
 */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tfm/decode.h"
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
static void ban_tokens(const tfm_s2s_config *c, float *logits) {
    for (int i = 0; i < c->n_banned; i++) logits[c->banned[i]] = -INFINITY;
}

typedef struct {
    int n;                     /* sentences in this batch */
    const int *sent;           /* their indices in the caller's arrays */
} batch_ref;

static int *dup_ids(const int *ids, int n) {
    int *p = malloc(sizeof(int) * (size_t)(n > 0 ? n : 1));
    if (p && n > 0) memcpy(p, ids, sizeof(int) * (size_t)n);
    return p;
}

/* Encode one batch and create an incremental state with cap rows. Sources are padded to the batch's
 * longest, or to the model's pad_len (at most max_src) when it has one, as in training. */
static void *start_batch(tfm_encdec *m, tfm_graph *g, const int *src_ids, const int *src_off, const int *sent,
                         int nb, int max_src, int max_steps, int cap, int *Ts_out) {
    int pad = m->cfg.pad_len, Ts = pad < 1 ? 1 : pad < max_src ? pad : max_src;
    for (int i = 0; i < nb; i++) {
        int len = src_off[sent[i] + 1] - src_off[sent[i]];
        if (len > max_src - 1) len = max_src - 1;
        if (len + 1 > Ts) Ts = len + 1;
    }
    int64_t need = tfm_s2s_decode_elems(&m->cfg, nb, cap, Ts, max_steps);
    if (need > TFM_MAX_STEP_ELEMS)
        return tfm_set_error("decoding %d sentences x beam %d, %d source tokens, up to %d output tokens (--batch-size, "
                             "--beam, --max-src, --max-output) needs ~%.0f GiB, at most %.0f GiB: lower them", nb, cap / nb,
                             Ts, max_steps - 1, (double)need * 4 / (1 << 30), (double)TFM_MAX_STEP_ELEMS * 4 / (1 << 30)),
               NULL;
    int eos = tfm_s2s_eos_id(&m->cfg), pad_id = tfm_s2s_pad_id(&m->cfg);
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

static int greedy_batch(tfm_encdec *m, tfm_graph *g, const int *src_ids, const int *src_off, const int *sent,
                        int nb, int max_src, int max_len, int **out, int *out_len) {
    int Ts;
    void *st = start_batch(m, g, src_ids, src_off, sent, nb, max_src, max_len + 1, nb, &Ts);
    if (!st) return -1;
    int V = m->cfg.tgt_vocab;
    int *row_sent = malloc(sizeof(int) * (size_t)nb);      /* row -> position in batch */
    int *hist = malloc(sizeof(int) * (size_t)nb * (max_len + 1));
    int *prev = malloc(sizeof(int) * (size_t)nb);
    int *keep = malloc(sizeof(int) * (size_t)nb);
    int *len = malloc(sizeof(int) * (size_t)nb);
    if (!row_sent || !hist || !prev || !keep || !len) {
        free(row_sent), free(hist), free(prev), free(keep), free(len);
        m->vt->free_state(m, st);
        return tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory (decoding %d sentences)", nb), -1;
    }
    int bos = tfm_s2s_bos_id(&m->cfg), eos = tfm_s2s_eos_id(&m->cfg);
    for (int r = 0; r < nb; r++) row_sent[r] = r, prev[r] = bos, len[r] = 0;
    int rows = nb, rc = 0;
    for (int step = 0; rows > 0 && step <= max_len; step++) {
        tfm_graph_reset(g);
        tfm_tensor *logits = m->vt->decode(m, g, st, prev, rows, 1);   /* (rows,1,V) */
        double tp = tfm_profile_begin(g);
        int n_keep = 0;
        for (int r = 0; r < rows; r++) {
            float *x = logits->data + (size_t)r * V;
            ban_tokens(&m->cfg, x);
            int best = 0;
            for (int v = 1; v < V; v++)
                if (x[v] > x[best]) best = v;
            int s = row_sent[r];
            if (best == eos || step == max_len) {
                len[s] = step;
            } else {
                hist[(size_t)s * (max_len + 1) + step] = best;
                keep[n_keep] = r;
                prev[n_keep] = best;
                row_sent[n_keep] = s;
                n_keep++;
            }
        }
        tfm_profile_end(g, TFM_PHASE_SEARCH, tp);
        tp = tfm_profile_begin(g);
        if (n_keep < rows && n_keep > 0) m->vt->reorder(m, st, keep, n_keep);
        tfm_profile_end(g, TFM_PHASE_KV_CACHE, tp);
        rows = n_keep;
    }
    m->vt->free_state(m, st);
    for (int s = 0; s < nb; s++) {   /* outputs are allocated after the decoding loop */
        out[sent[s]] = dup_ids(hist + (size_t)s * (max_len + 1), len[s]);
        out_len[sent[s]] = len[s];
        if (!out[sent[s]]) rc = -1;
    }
    free(row_sent), free(hist), free(prev), free(keep), free(len);
    return rc;
}

static int beam_batch(tfm_encdec *m, tfm_graph *g, const int *src_ids, const int *src_off, const int *sent, int nb,
                      int max_src, const tfm_decode_opts *o, int **out, int *out_len) {
    int K = o->beam, max_len = o->max_len, V = m->cfg.tgt_vocab, Ts;
    void *st = start_batch(m, g, src_ids, src_off, sent, nb, max_src, max_len + 1, nb * K, &Ts);
    if (!st) return -1;
    int H = max_len + 1, R = nb * K;
    int *row_sent = malloc(sizeof(int) * R), *new_row_sent = malloc(sizeof(int) * R);
    float *score = malloc(sizeof(float) * R), *new_score = malloc(sizeof(float) * R);
    int *hist = malloc(sizeof(int) * (size_t)R * H), *new_hist = malloc(sizeof(int) * (size_t)R * H);
    int *prev = malloc(sizeof(int) * R), *idx = malloc(sizeof(int) * R);
    cand *tops = malloc(sizeof(cand) * 2 * K * nb);   /* the best 2K candidates of each row group */
    int *n_tops = malloc(sizeof(int) * nb);
    /* finished: best hypothesis per sentence (copied to out[] after the decoding loop) */
    float *best_score = malloc(sizeof(float) * nb);
    int *best_hyp = malloc(sizeof(int) * (size_t)nb * H), *best_len = calloc((size_t)nb, sizeof(int));
    int *n_fin = calloc((size_t)nb, sizeof(int)), *done = calloc((size_t)nb, sizeof(int));
    int nt = tfm_get_threads();
    float *lse_tmp = malloc(sizeof(float) * (size_t)V * (size_t)nt);   /* row_lse's scratch, one row per thread */
    int rc = 0;
    if (!row_sent || !new_row_sent || !score || !new_score || !hist || !new_hist || !prev || !idx || !tops || !n_tops ||
        !best_score || !best_hyp || !best_len || !n_fin || !done || !lse_tmp) {
        rc = -1;
        tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory (beam search over %d sentences x beam %d)", nb, K);
        goto end;
    }
    for (int s = 0; s < nb; s++) {
        best_score[s] = -INFINITY;
        out[sent[s]] = NULL;
        out_len[sent[s]] = 0;
    }
    /* expand each sentence to K rows; only the first beam is live at step 0 */
    for (int r = 0; r < R; r++) {
        idx[r] = r / K;
        row_sent[r] = r / K;
        score[r] = (r % K) ? -INFINITY : 0.0f;
        prev[r] = tfm_s2s_bos_id(&m->cfg);
    }
    int eos = tfm_s2s_eos_id(&m->cfg);
    double tp = tfm_profile_begin(g);
    m->vt->reorder(m, st, idx, R);
    tfm_profile_end(g, TFM_PHASE_KV_CACHE, tp);
    int rows = R;
    for (int step = 0; rows > 0 && step <= max_len; step++) {
        tfm_graph_reset(g);
        tfm_tensor *logits = m->vt->decode(m, g, st, prev, rows, 1);
        tp = tfm_profile_begin(g);
        /* rows come in groups of K per live sentence: the best 2K (row, token) candidates of each group,
         * groups split over threads (each group's scan is sequential: the same bits for any thread count) */
        int n_groups = rows / K;
#pragma omp parallel for schedule(static) num_threads(nt) if (nt > 1 && (size_t)rows * V >= 65536)
        for (int gi = 0; gi < n_groups; gi++) {
            cand *top = tops + (size_t)gi * 2 * K;
            float *scratch = lse_tmp + (size_t)omp_get_thread_num() * V;
            int n_top = 0;
            for (int r = gi * K; r < gi * K + K; r++) {
                if (score[r] == -INFINITY) continue;
                float *x = logits->data + (size_t)r * V;
                float lse = row_lse(x, V, scratch);
                ban_tokens(&m->cfg, x);   /* after the log-softmax's normaliser, as Hugging Face's bad_words_ids */
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
            n_tops[gi] = n_top;
        }
        int n_new = 0;
        for (int r0 = 0; r0 < rows; r0 += K) {
            int s = row_sent[r0], n_top = n_tops[r0 / K];
            const cand *top = tops + (size_t)(r0 / K) * 2 * K;
            int n_live = 0;
            for (int j = 0; j < n_top && n_live < K; j++) {
                const cand *c = &top[j];
                const int *h = hist + (size_t)c->row * H;
                if (c->tok == eos || step == max_len) {
                    int len = c->tok == eos ? step : step + 1;
                    float ns = c->score / length_penalty(len + 1, o->alpha);
                    if (c->tok == eos && j >= K) continue;   /* only top-K candidates may finish */
                    if (ns > best_score[s]) {
                        int *ids = best_hyp + (size_t)s * H;
                        memcpy(ids, h, sizeof(int) * (size_t)step);
                        if (len > step) ids[step] = c->tok;
                        best_len[s] = len;
                        best_score[s] = ns;
                    }
                    n_fin[s]++;
                    continue;
                }
                int nr = n_new + n_live;
                idx[nr] = c->row;
                new_row_sent[nr] = s;
                new_score[nr] = c->score;
                memcpy(new_hist + (size_t)nr * H, h, sizeof(int) * (size_t)step);
                new_hist[(size_t)nr * H + step] = c->tok;
                n_live++;
            }
            if (n_fin[s] >= K || step == max_len || n_live == 0) {
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
        if (n_new > 0) m->vt->reorder(m, st, idx, n_new);
        tfm_profile_end(g, TFM_PHASE_KV_CACHE, tp);
        rows = n_new;
    }
    for (int s = 0; s < nb; s++) {   /* outputs are allocated after the decoding loop */
        out[sent[s]] = dup_ids(best_hyp + (size_t)s * H, best_len[s]);
        out_len[sent[s]] = best_len[s];
        if (!out[sent[s]]) rc = -1;
    }
end:
    m->vt->free_state(m, st);
    free(row_sent), free(new_row_sent), free(score), free(new_score), free(hist), free(new_hist);
    free(prev), free(idx), free(tops), free(n_tops), free(best_score), free(best_hyp), free(best_len), free(n_fin),
        free(done), free(lse_tmp);
    return rc;
}

/* longest first, then by index (qsort_r: the lengths come as context, no global) */
static int by_len(const void *a, const void *b, void *lens) {
    int ia = *(const int *)a, ib = *(const int *)b;
    int la = ((const int *)lens)[ia], lb = ((const int *)lens)[ib];
    return la != lb ? (la > lb ? -1 : 1) : (ia > ib) - (ia < ib);
}

static int decode_batch(tfm_encdec *m, tfm_graph *g, const int *src_ids, const int *src_off, const int *sent, int nb,
                        int max_src, const tfm_decode_opts *op, int **out, int *out_len) {
    tfm_graph_reset(g);
    int rc = op->beam == 1 ? greedy_batch(m, g, src_ids, src_off, sent, nb, max_src, op->max_len, out, out_len)
                           : beam_batch(m, g, src_ids, src_off, sent, nb, max_src, op, out, out_len);
    tfm_graph_reset(g);
    return rc;
}

/* One batch of sentences per thread, each thread on its own worker graph with single-threaded kernels
 * (longest batches first, handed out one at a time, so a slow thread holds up one batch, not half). The
 * kernels give the same bits for any thread count, so the outputs equal those of the serial loop. */
static int decode_batches_parallel(tfm_encdec *m, tfm_graph *g, tfm_graph *const *workers, int k, const int *src_ids,
                                   const int *src_off, const int *order, int n, int max_src, int batch_size,
                                   const tfm_decode_opts *op, int **out, int *out_len) {
    int n_batches = (n + batch_size - 1) / batch_size, failed = 0;
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
            int i0 = b * batch_size, nb = n - i0 < batch_size ? n - i0 : batch_size;
            if (decode_batch(m, w, src_ids, src_off, order + i0, nb, max_src, op, out, out_len)) {
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

int tfm_translate_ids_par(tfm_encdec *m, tfm_graph *g, tfm_graph *const *workers, int n_workers, const int *src_ids,
                          const int *src_off, int n, int max_src, int batch_size, const tfm_decode_opts *o, int **out,
                          int *out_len) {
    tfm_decode_opts op = *o;
    if (op.beam < 1) op.beam = 1;
    if (op.max_len < 1) op.max_len = 1;
    if (max_src < 2) max_src = 2;
    if (batch_size < 1) batch_size = 1;
    int max_pos = tfm_encdec_max_positions(m);   /* e.g. a positional-encoding table bounds both sides */
    if (max_pos > 0) {
        if (max_src > max_pos) max_src = max_pos;
        if (op.max_len + 1 > max_pos) op.max_len = max_pos - 1;
    }
    int *order = malloc(sizeof(int) * (size_t)(n > 0 ? n : 1));
    int *lens = malloc(sizeof(int) * (size_t)(n > 0 ? n : 1));
    if (!order || !lens) {
        free(order), free(lens);
        return -1;
    }
    for (int i = 0; i < n; i++) order[i] = i, lens[i] = src_off[i + 1] - src_off[i], out[i] = NULL, out_len[i] = 0;
    qsort_r(order, (size_t)n, sizeof(int), by_len, lens);
    int n_batches = (n + batch_size - 1) / batch_size, nt = tfm_get_threads();
    int k = n_workers < n_batches ? n_workers : n_batches;
    if (k > nt) k = nt;
    int rc = 0;
    if (k >= 2) {
        rc = decode_batches_parallel(m, g, workers, k, src_ids, src_off, order, n, max_src, batch_size, &op, out, out_len);
    } else {   /* one batch (or one worker): every op split over the threads */
        int saved_grad = g->grad_enabled, saved_train = g->training;
        g->grad_enabled = 0;
        g->training = 0;
        for (int i0 = 0; i0 < n && !rc; i0 += batch_size) {
            int nb = n - i0 < batch_size ? n - i0 : batch_size;
            rc = decode_batch(m, g, src_ids, src_off, order + i0, nb, max_src, &op, out, out_len);
        }
        g->grad_enabled = saved_grad;
        g->training = saved_train;
    }
    free(order);
    free(lens);
    return rc;
}

int tfm_translate_ids(tfm_encdec *m, tfm_graph *g, const int *src_ids, const int *src_off, int n, int max_src,
                      int batch_size, const tfm_decode_opts *o, int **out, int *out_len) {
    return tfm_translate_ids_par(m, g, NULL, 0, src_ids, src_off, n, max_src, batch_size, o, out, out_len);
}

static int grow_ids(int **ids, int *cap, int need) {
    if (need <= *cap) return 0;
    int c = *cap;
    while (c < need) c *= 2;
    int *p = realloc(*ids, sizeof(int) * (size_t)c);
    if (!p) return tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory"), -1;
    *ids = p;
    *cap = c;
    return 0;
}

int tfm_translate_lines(tfm_translator *t, tfm_graph *g, const char *const *lines, int n, int max_src, int batch_size,
                        const tfm_decode_opts *o, char **hyps) {
    return tfm_translate_lines_par(t, g, NULL, 0, lines, n, max_src, batch_size, o, hyps);
}

int tfm_translate_lines_par(tfm_translator *t, tfm_graph *g, tfm_graph *const *workers, int n_workers,
                            const char *const *lines, int n, int max_src, int batch_size, const tfm_decode_opts *o,
                            char **hyps) {
    tfm_set_error("%s", "");   /* a failure below that sets no message is reported as out of memory */
    int *off = malloc(sizeof(int) * (size_t)(n + 1));
    int cap = 1024, total = 0, rc = 0;
    int *ids = calloc((size_t)cap, sizeof(int));
    int **out = calloc((size_t)(n > 0 ? n : 1), sizeof(int *));
    int *out_len = calloc((size_t)(n > 0 ? n : 1), sizeof(int));
    if (!off || !ids || !out || !out_len) {
        rc = -1;
        goto end;
    }
    off[0] = 0;
    for (int i = 0; i < n; i++) {
        tfm_toklist tl;
        if (t->bpe || t->marian) {   /* raw text: subword ids (an imported MarianMT: its vocab.json's) */
            int k = 0, *e = t->marian ? tfm_marian_encode(t->marian, lines[i], strlen(lines[i]), &k)
                                      : tfm_bpe_encode(t->bpe, lines[i], strlen(lines[i]), &k);
            if (!e || grow_ids(&ids, &cap, total + k)) {
                free(e);
                rc = -1;
                goto end;
            }
            memcpy(ids + total, e, sizeof(int) * (size_t)k);
            free(e);
            total += k;
            off[i + 1] = total;
            continue;
        }
        if (tfm_tokenize((tfm_tok_kind)t->tok_kind, lines[i], &tl)) {
            rc = -1;
            goto end;
        }
        if (total + tl.n > cap) {
            while (total + tl.n > cap) cap *= 2;
            int *p = realloc(ids, sizeof(int) * (size_t)cap);
            if (!p) {
                tfm_toklist_free(&tl);
                rc = -1;
                goto end;
            }
            ids = p;
        }
        for (int k = 0; k < tl.n; k++) ids[total++] = tfm_vocab_id(&t->src_vocab, tl.tok[k]);
        off[i + 1] = total;
        tfm_toklist_free(&tl);
    }
    if (tfm_translate_ids_par(t->model, g, workers, n_workers, ids, off, n, max_src, batch_size, o, out, out_len)) {
        rc = -1;
        goto end;
    }
    for (int i = 0; i < n; i++) {
        if (t->bpe || t->marian) {   /* detokenized: pieces joined, the whitespace marker -> ' ', bytes -> UTF-8 */
            hyps[i] = t->marian ? tfm_marian_decode(t->marian, out[i], out_len[i])
                                : tfm_bpe_decode(t->bpe, out[i], out_len[i]);
            if (!hyps[i]) {
                rc = -1;
                goto end;
            }
            continue;
        }
        size_t len = 1;
        for (int k = 0; k < out_len[i]; k++) {
            const char *s = tfm_vocab_token(&t->tgt_vocab, out[i][k]);
            len += strlen(s ? s : "") + 1;
        }
        if (t->tok_kind == TFM_TOK_MOSES || t->tok_kind == TFM_TOK_MOSES_LOWER) {   /* detokenize */
            const char **tv = malloc(sizeof(char *) * (size_t)(out_len[i] > 0 ? out_len[i] : 1));
            if (!tv) {
                rc = -1;
                goto end;
            }
            for (int k = 0; k < out_len[i]; k++) {
                const char *s = tfm_vocab_token(&t->tgt_vocab, out[i][k]);
                tv[k] = s ? s : "";
            }
            hyps[i] = tfm_detokenize(tv, out_len[i]);
            free(tv);
            if (!hyps[i]) {
                rc = -1;
                goto end;
            }
            continue;
        }
        char *h = malloc(len), *p = h;
        if (!h) {
            rc = -1;
            goto end;
        }
        *p = 0;
        for (int k = 0; k < out_len[i]; k++) {
            const char *s = tfm_vocab_token(&t->tgt_vocab, out[i][k]);
            size_t l = strlen(s ? s : "");
            if (k) *p++ = ' ';
            memcpy(p, s ? s : "", l);
            p += l;
        }
        *p = 0;
        hyps[i] = h;
    }
end:
    if (out)
        for (int i = 0; i < n; i++) free(out[i]);
    free(out);
    free(out_len);
    free(off);
    free(ids);
    if (rc && !strcmp(tfm_last_error(), "unknown error"))
        tfm_set_error_kind(TFM_ERR_NOMEM, "translation failed (out of memory)");
    else if (rc)
        tfm_prefix_error("translation failed: ");
    return rc;
}
