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

/* Logits of the last position of the window ctx[start, n): through the cache when there is one (it
 * holds ctx[*cstart, *cstart + cache->len) at positions 0..), else by recomputing the window. */
static const float *next_logits(tfm_gpt *m, tfm_graph *g, tfm_gpt_cache *cache, const int *ctx, int n,
                                int *cstart) {
    int T = m->cfg.block_size, V = m->cfg.vocab_size;
    int start = n > T ? n - T : 0, len = n - start;
    if (!cache) {
        tfm_tensor *logits = tfm_gpt_forward(g, m, ctx + start, 1, len);
        return logits->data + (size_t)(len - 1) * V;
    }
    if (start != *cstart || cache->len >= len) {   /* the window slid: positions shift, start over */
        cache->len = 0;
        *cstart = start;
    }
    int feed = len - cache->len;
    tfm_tensor *logits = tfm_gpt_forward_cached(g, m, cache, ctx + *cstart + cache->len, feed);
    return logits->data + (size_t)(feed - 1) * V;
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
    const float *last = next_logits(m, g, s->use_cache ? &s->cache : NULL, s->ctx, s->n, &s->cstart);
    if (!tfm_all_finite(last, (size_t)m->cfg.vocab_size)) {   /* a diverged model: its samples would be noise */
        tfm_graph_reset(g);
        g->grad_enabled = saved_grad;
        return tfm_set_error("generate: the model's output is not finite (NaN or infinite logits at token %d): the "
                             "checkpoint's weights diverged", s->n - s->n_prompt + 1), -1;
    }
    double tp = tfm_profile_begin(g);
    int id = tfm_sample_logits_p(last, m->cfg.vocab_size, s->opts.temperature, s->opts.top_k, s->opts.top_p, &s->rng,
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
