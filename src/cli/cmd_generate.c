/* tfm generate: stream text sampled from a GPT checkpoint (flags -> tfm_gpt_generate). */
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/rss.h"
#include "tfm/kernels.h"
#include "tfm/lm.h"

/* ids are < vocab_size: a table lookup, no malloc per token; the model's end token (GPT-2's <|endoftext|>)
 * stops generation unprinted */
static int put_token(int id, void *user) {
    const tfm_lm *lm = user;
    if (id == lm->eos) return 1;
    char ch[4];
    size_t n = 0;
    const char *b = tfm_lm_token_bytes(lm, id, ch, &n);
    if (b) fwrite(b, 1, n, stdout);   /* a GPT-2 token may hold part of a UTF-8 character: bytes as they come */
    fflush(stdout);
    return 0;
}

int cmd_generate(int argc, char **argv) {
    const char *prompt = "\n";
    int tokens = 500, seed = 1, threads = 0, profile = 0;
    tfm_sample_opts so;
    tfm_sample_opts_default(&so);
    cli_flag flags[] = {
        {"prompt", FLAG_STR, &prompt, "text to continue (a character model: every character in its vocabulary)", 0},
        {"tokens", FLAG_INT, &tokens, "number of tokens to generate (characters, or a GPT-2 import's BPE tokens)", 0},
        {"temperature", FLAG_FLOAT, &so.temperature, "softmax temperature (0 = greedy)", 0},
        {"top-k", FLAG_INT, &so.top_k, "sample among the k most likely tokens (0 = all)", 0},
        {"top-p", FLAG_FLOAT, &so.top_p, "sample among the most likely tokens holding this much probability (1 = all)", 0},
        {"seed", FLAG_INT, &seed, "random seed", 0},
        {"threads", FLAG_INT, &threads, CLI_THREADS_HELP, 0},
        {"no-kv-cache", FLAG_BOOL, &so.no_cache, "recompute the whole context for every token (slow; for comparison)", 0},
        {"profile", FLAG_BOOL, &profile,
         "at the end, print time per token by op kind and phase (kv_cache, search) to stderr", 0},
    };
    cli_spec spec = {"generate",
                     "MODEL.tfm [--prompt TEXT] [--tokens N] [--temperature T] [--top-k K] [--top-p P] [--seed S]",
                     "Continues the prompt one token at a time, streaming to stdout: a character (train-lm models)\n"
                     "or a GPT-2 BPE token (imported GPT-2s, which stop at <|endoftext|>). The context is the\n"
                     "last block_size tokens. Keys/values of the context are cached per layer, so a token\n"
                     "costs O(context); once the context is longer than block_size the window slides and is\n"
                     "recomputed for every token (positions shift), as without the cache.\n"
                     "--profile prints, at the end, milliseconds per generated token spent in each op kind and\n"
                     "in the phases kv_cache (cache appends) and search (sampling: temperature, top-k, top-p),\n"
                     "with the untracked rest (output); the generated text is unchanged.",
                     flags, sizeof flags / sizeof *flags, 1, 1};
    const char *pos[1];
    int npos, rc = cli_parse(&spec, argc, argv, pos, &npos);
    if (rc) return rc == 1 ? 0 : rc;
    if (tokens < 0 || tokens > 100000000) return cli_error("generate", "--tokens must be in 0..1e8, got %d", tokens);
    if (so.temperature < 0) return cli_error("generate", "--temperature must be >= 0, got %g", so.temperature);
    if (so.top_k < 0) return cli_error("generate", "--top-k must be >= 0, got %d", so.top_k);
    if (!(so.top_p > 0 && so.top_p <= 1)) return cli_error("generate", "--top-p must be in (0, 1], got %g", so.top_p);
    if (cli_check_threads("generate", threads)) return CLI_EXIT_USAGE;
    if (!*prompt) return cli_error("generate", "--prompt must not be empty");
    so.seed = (uint64_t)seed;
    tfm_set_threads(threads);
    tfm_lm lm;
    if (tfm_lm_load(&lm, pos[0])) return cli_fail("generate", "%s", tfm_last_error());
    tfm_gpt *m = &lm.model;
    int n_prompt;
    int *ids = tfm_lm_encode(&lm, prompt, strlen(prompt), &n_prompt);
    if (!ids) {
        rc = cli_error("generate", "--prompt: %s", tfm_last_error());
    } else {
        fputs(prompt, stdout);
        fflush(stdout);
        tfm_graph g;
        tfm_graph_init(&g, 0);
        g.profile = profile;
        double t = tfm_now();
        int made = n_prompt > 0 ? tfm_gpt_generate(m, &g, ids, n_prompt, tokens, &so, put_token, &lm, NULL)
                                : (tfm_set_error("--prompt: no tokens"), -1);
        t = tfm_now() - t;
        fputc('\n', stdout);
        fflush(stdout);
        if (made < 0) {
            rc = cli_fail("generate", "%s", tfm_last_error());
        } else {
            fprintf(stderr, "generated %d tokens in %.3f s (%.1f tok/s, %s)\n", made, t, t > 0 ? made / t : 0.0,
                    so.no_cache || m->cfg.attention == TFM_ATTN_SYNTHESIZER ? "full recompute" : "KV cache");
            if (profile) tfm_profile_print(&g, made, "token", t, tfm_isa_name(), stderr);
            cli_report_rss("generate");
        }
        tfm_graph_free(&g);
    }
    free(ids);
    tfm_lm_free(&lm);
    return rc;
}
