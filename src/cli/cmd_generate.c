/* tfm generate: stream text sampled from a GPT checkpoint. */
#include "cli/cli.h"
#include "cli/rss.h"
#include "tfm/lm.h"
#include <stdlib.h>
#include <string.h>

int cmd_generate(int argc, char **argv) {
    const char *prompt = "\n";
    int tokens = 500, top_k = 0, seed = 1, threads = 0, no_cache = 0, profile = 0;
    float temperature = 1.0f;
    cli_flag flags[] = {
        {"prompt", FLAG_STR, &prompt, "text to continue (every character must be in the model's vocabulary)", 0},
        {"tokens", FLAG_INT, &tokens, "number of characters to generate", 0},
        {"temperature", FLAG_FLOAT, &temperature, "softmax temperature (0 = greedy)", 0},
        {"top-k", FLAG_INT, &top_k, "sample among the k most likely tokens (0 = all)", 0},
        {"seed", FLAG_INT, &seed, "random seed", 0},
        {"threads", FLAG_INT, &threads, "threads (0 = all cores)", 0},
        {"no-kv-cache", FLAG_BOOL, &no_cache, "recompute the whole context for every token (slow; for comparison)", 0},
        {"profile", FLAG_BOOL, &profile,
         "at the end, print time per token by op kind and phase (kv_cache, search) to stderr", 0},
    };
    cli_spec spec = {"generate",
                     "MODEL.tfm [--prompt TEXT] [--tokens N] [--temperature T] [--top-k K] [--seed S] [--profile]",
                     "Continues the prompt one character at a time, streaming to stdout. The context is the\n"
                     "last block_size characters. Keys/values of the context are cached per layer, so a token\n"
                     "costs O(context); once the context is longer than block_size the window slides and is\n"
                     "recomputed for every token (positions shift), as without the cache.\n"
                     "--profile prints, at the end, milliseconds per generated token spent in each op kind and\n"
                     "in the phases kv_cache (cache appends) and search (sampling: temperature, top-k), with\n"
                     "the untracked rest (output); the generated text is unchanged.",
                     flags, sizeof flags / sizeof *flags, 1, 1};
    const char *pos[1];
    int npos, rc = cli_parse(&spec, argc, argv, pos, &npos);
    if (rc) return rc == 1 ? 0 : rc;
    if (tokens < 0) return cli_error("generate", "--tokens must be >= 0, got %d", tokens);
    if (temperature < 0) return cli_error("generate", "--temperature must be >= 0, got %g", temperature);
    if (top_k < 0) return cli_error("generate", "--top-k must be >= 0, got %d", top_k);
    if (threads < 0) return cli_error("generate", "--threads must be >= 0, got %d", threads);
    if (!*prompt) return cli_error("generate", "--prompt must not be empty");
    tfm_set_threads(threads);
    tfm_gpt m;
    tfm_char_vocab v;
    if (tfm_gpt_load(pos[0], &m, &v, NULL, NULL)) return cli_error("generate", "%s", tfm_last_error());
    int n_prompt;
    int *prompt_ids = tfm_char_encode(&v, prompt, strlen(prompt), &n_prompt);
    if (!prompt_ids) {
        cli_error("generate", "--prompt: %s", tfm_last_error());
        tfm_gpt_free(&m);
        tfm_char_vocab_free(&v);
        return 2;
    }
    int T = m.cfg.block_size, V = m.cfg.vocab_size, total = n_prompt + tokens;
    int *ctx = malloc(sizeof(int) * total);
    float *scratch = malloc(sizeof(float) * V);
    memcpy(ctx, prompt_ids, sizeof(int) * n_prompt);
    fputs(prompt, stdout);
    fflush(stdout);
    tfm_graph g;
    tfm_graph_init(&g, 0);
    g.grad_enabled = 0;
    g.profile = profile;
    tfm_rng r;
    tfm_rng_seed(&r, (uint64_t)seed);
    tfm_gpt_cache cache;
    int use_cache = !no_cache && tfm_gpt_cache_init(&cache, &m) == 0, cstart = 0;
    double t_gen = tfm_now();
    for (int n = n_prompt; n < total; n++) {
        int start = n > T ? n - T : 0, len = n - start;
        tfm_graph_reset(&g);
        const float *last;
        if (use_cache) { /* the cache holds ctx[cstart, cstart + cache.len) at positions 0.. */
            if (start != cstart || cache.len >= len) { cache.len = 0; cstart = start; } /* window slid */
            int feed = len - cache.len;
            tfm_tensor *logits = tfm_gpt_forward_cached(&g, &m, &cache, ctx + cstart + cache.len, feed);
            last = logits->data + (size_t)(feed - 1) * V;
        } else {
            tfm_tensor *logits = tfm_gpt_forward(&g, &m, ctx + start, 1, len);
            last = logits->data + (size_t)(len - 1) * V;
        }
        double tp = tfm_profile_begin(&g);
        ctx[n] = tfm_sample_logits(last, V, temperature, top_k, &r, scratch);
        tfm_profile_end(&g, TFM_PHASE_SEARCH, tp);
        char ch[4];   /* sampled ids are < vocab_size: no tfm_char_decode (and no malloc) per token */
        fwrite(ch, 1, (size_t)tfm_utf8_encode(v.cps[ctx[n]], ch), stdout);
        fflush(stdout);
    }
    fputc('\n', stdout);
    fflush(stdout);
    t_gen = tfm_now() - t_gen;
    fprintf(stderr, "generated %d tokens in %.3f s (%.1f tok/s, %s)\n", tokens, t_gen, t_gen > 0 ? tokens / t_gen : 0.0,
            use_cache ? "KV cache" : "full recompute");
    if (profile) tfm_profile_print(&g, tokens, "token", t_gen, stderr);
    if (use_cache) tfm_gpt_cache_free(&cache);
    cli_report_rss("generate");
    free(ctx);
    free(scratch);
    free(prompt_ids);
    tfm_graph_free(&g);
    tfm_gpt_free(&m);
    tfm_char_vocab_free(&v);
    return 0;
}
