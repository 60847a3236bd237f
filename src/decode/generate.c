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

int tfm_gpt_generate(tfm_gpt *m, tfm_graph *g, const int *prompt, int n_prompt, int n_new,
                     const tfm_sample_opts *o, tfm_token_fn on_token, void *user, int *out) {
    int V = m->cfg.vocab_size;
    if (n_prompt < 1) return tfm_set_error("generate: the prompt must have at least one token"), -1;
    if (n_new < 0) return tfm_set_error("generate: negative number of tokens (%d)", n_new), -1;
    for (int i = 0; i < n_prompt; i++)
        if (prompt[i] < 0 || prompt[i] >= V)
            return tfm_set_error("generate: prompt token %d is %d, outside the vocabulary (%d)", i, prompt[i], V), -1;
    size_t total = (size_t)n_prompt + (size_t)n_new;
    int *ctx = malloc(sizeof(int) * total);
    float *scratch = malloc(sizeof(float) * 2 * (size_t)V);
    if (!ctx || !scratch) {
        free(ctx), free(scratch);
        return tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory (generate %zu tokens)", total), -1;
    }
    memcpy(ctx, prompt, sizeof(int) * (size_t)n_prompt);
    int saved_grad = g->grad_enabled;
    g->grad_enabled = 0;
    tfm_rng r;
    tfm_rng_seed(&r, o->seed);
    tfm_gpt_cache cache;
    int use_cache = !o->no_cache && tfm_gpt_cache_init(&cache, m) == 0, cstart = 0, made = 0;
    for (int n = n_prompt; n < (int)total; n++) {
        tfm_graph_reset(g);
        const float *last = next_logits(m, g, use_cache ? &cache : NULL, ctx, n, &cstart);
        if (!tfm_all_finite(last, (size_t)V)) {   /* a diverged model: its samples would be noise (all token 0) */
            tfm_set_error("generate: the model's output is not finite (NaN or infinite logits at token %d): the "
                          "checkpoint's weights diverged", n - n_prompt + 1);
            made = -1;
            break;
        }
        double tp = tfm_profile_begin(g);
        ctx[n] = tfm_sample_logits_p(last, V, o->temperature, o->top_k, o->top_p, &r, scratch);
        tfm_profile_end(g, TFM_PHASE_SEARCH, tp);
        if (out) out[made] = ctx[n];
        made++;
        if (on_token && on_token(ctx[n], user)) break;
    }
    if (use_cache) tfm_gpt_cache_free(&cache);
    tfm_graph_reset(g);
    g->grad_enabled = saved_grad;
    free(ctx);
    free(scratch);
    return made;
}
