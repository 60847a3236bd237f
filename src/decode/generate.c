/* Sampling text from a GPT: the sliding-window, KV-cached generation loop (include/tfm/decode.h). */
#include <stdlib.h>
#include <string.h>

#include "tfm/decode.h"

void tfm_sample_opts_default(tfm_sample_opts *o) {
    memset(o, 0, sizeof *o);
    o->temperature = 1.0f;
    o->top_p = 1.0f;
    o->seed = 1;
}

/* The window ctx[start, n) through the cache (it holds ctx[*cstart, *cstart + cache->len) at positions 0..):
 * restarted when the window slid (positions shift); *feed: the tokens to feed it. */
static int cache_window(const tfm_gpt *m, tfm_gpt_cache *cache, int n, int *cstart, int *feed) {
    int T = m->cfg.block_size, start = n > T ? n - T : 0, len = n - start;
    if (start != *cstart || cache->len >= len) {
        cache->len = 0;
        *cstart = start;
    }
    *feed = len - cache->len;
    return *cstart + cache->len;   /* the first token to feed */
}

/* Logits of the last position of the window ctx[start, n): through the cache when there is one, else by
 * recomputing the window. */
static const float *next_logits(tfm_gpt *m, tfm_graph *g, tfm_gpt_cache *cache, const int *ctx, int n,
                                int *cstart) {
    int T = m->cfg.block_size, V = m->cfg.vocab_size;
    if (!cache) {
        int start = n > T ? n - T : 0, len = n - start;
        tfm_tensor *logits = tfm_gpt_forward(g, m, ctx + start, 1, len);
        return logits->data + (size_t)(len - 1) * V;
    }
    int feed, first = cache_window(m, cache, n, cstart, &feed);
    return tfm_gpt_forward_cached_last(g, m, cache, ctx + first, feed)->data;
}

/* Greedy's token through the screen (s->opts.screen) when the cache is in use; else -2 (take the full logits), or
 * -1 (a non-finite hidden state, with a tfm error). */
static int screened_next(tfm_gpt_stream *s, tfm_gpt *m, tfm_graph *g) {
    if (!s->use_cache || s->opts.temperature > 0 || !tfm_logit_screen_of_gpt(s->opts.screen, m)) return -2;
    int feed, first = cache_window(m, &s->cache, s->n, &s->cstart, &feed);
    tfm_tensor *h = tfm_gpt_hidden_cached_last(g, m, &s->cache, s->ctx + first, feed);   /* (1,1,C) */
    double tp = tfm_profile_begin(g);
    int best;
    int rc = tfm_logit_screen_argmax(s->opts.screen, h->data, 1, NULL, 0, s->scratch, &best);
    tfm_profile_end(g, TFM_PHASE_SEARCH, tp);
    if (rc < 0)
        return tfm_set_error("generate: the model's output is not finite (NaN or infinite hidden state at token %d): "
                             "the checkpoint's weights diverged", s->n - s->n_prompt + 1), -1;
    s->screened += rc == 0;   /* 1: a flat distribution, the full layer's fp32 logits */
    return best;
}

int tfm_gpt_stream_init(tfm_gpt_stream *s, const tfm_gpt *m, const int *prompt, int n_prompt, int max_new,
                        const tfm_sample_opts *o) {
    int V = m->cfg.vocab_size;
    memset(s, 0, sizeof *s);
    if (n_prompt < 1) return tfm_set_error("generate: the prompt must have at least one token"), -1;
    if (max_new < 0) return tfm_set_error("generate: negative number of tokens (%d)", max_new), -1;
    for (int i = 0; i < n_prompt; i++)
        if (prompt[i] < 0 || prompt[i] >= V)
            return tfm_set_error("generate: prompt token %d is %d, outside the vocabulary (%d)", i, prompt[i], V), -1;
    size_t total = (size_t)n_prompt + (size_t)max_new;
    s->ctx = malloc(sizeof(int) * total);
    s->scratch = malloc(sizeof(float) * 2 * (size_t)V);
    if (!s->ctx || !s->scratch) {
        tfm_gpt_stream_free(s);
        return tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory (generate %zu tokens)", total), -1;
    }
    memcpy(s->ctx, prompt, sizeof(int) * (size_t)n_prompt);
    s->n = s->n_prompt = n_prompt;
    s->end = (int)total;
    s->opts = *o;
    tfm_rng_seed(&s->rng, o->seed);
    s->use_cache = !o->no_cache && tfm_gpt_cache_init(&s->cache, m) == 0;
    return 0;
}

int tfm_gpt_stream_next(tfm_gpt_stream *s, tfm_gpt *m, tfm_graph *g) {
    if (s->n >= s->end) return tfm_set_error("generate: the stream has made all its %d tokens", s->end), -1;
    int saved_grad = g->grad_enabled;
    g->grad_enabled = 0;
    tfm_graph_reset(g);
    int id = screened_next(s, m, g);
    if (id != -2) {
        tfm_graph_reset(g);
        g->grad_enabled = saved_grad;
        if (id >= 0) s->ctx[s->n++] = id;
        return id;
    }
    const float *last = next_logits(m, g, s->use_cache ? &s->cache : NULL, s->ctx, s->n, &s->cstart);
    if (!tfm_all_finite(last, (size_t)m->cfg.vocab_size)) {   /* a diverged model: its samples would be noise */
        tfm_graph_reset(g);
        g->grad_enabled = saved_grad;
        return tfm_set_error("generate: the model's output is not finite (NaN or infinite logits at token %d): the "
                             "checkpoint's weights diverged", s->n - s->n_prompt + 1), -1;
    }
    double tp = tfm_profile_begin(g);
    id = tfm_sample_logits_p(last, m->cfg.vocab_size, s->opts.temperature, s->opts.top_k, s->opts.top_p, &s->rng,
                             s->scratch);
    tfm_profile_end(g, TFM_PHASE_SEARCH, tp);
    tfm_graph_reset(g);
    g->grad_enabled = saved_grad;
    s->ctx[s->n++] = id;
    return id;
}

void tfm_gpt_stream_free(tfm_gpt_stream *s) {
    if (s->use_cache) tfm_gpt_cache_free(&s->cache);
    free(s->ctx);
    free(s->scratch);
    memset(s, 0, sizeof *s);
}

int tfm_gpt_generate(tfm_gpt *m, tfm_graph *g, const int *prompt, int n_prompt, int n_new,
                     const tfm_sample_opts *o, tfm_token_fn on_token, void *user, int *out) {
    tfm_gpt_stream s;
    if (tfm_gpt_stream_init(&s, m, prompt, n_prompt, n_new, o)) return -1;
    int made = 0;
    while (made < n_new) {
        int id = tfm_gpt_stream_next(&s, m, g);
        if (id < 0) {
            made = -1;
            break;
        }
        if (out) out[made] = id;
        made++;
        if (on_token && on_token(id, user)) break;
    }
    tfm_gpt_stream_free(&s);
    return made;
}
