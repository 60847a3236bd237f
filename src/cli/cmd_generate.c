/* tfm generate: stream text sampled from a GPT checkpoint (flags -> tfm_gpt_generate). */
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/rss.h"
#include "tfm/kernels.h"
#include "tfm/generator.h"

static int put_text(const char *text, size_t len, void *user) {
    (void)user;
    fwrite(text, 1, len, stdout);
    fflush(stdout);
    return 0;
}

int cmd_generate(int argc, char **argv) {
    const char *prompt = "\n";
    int tokens = 500, seed = 1, threads = 0, profile = 0, no_cache = 0;
    tfm_generate_options so;
    tfm_generate_options_default(&so);
    cli_flag flags[] = {
        {"prompt", FLAG_STR, &prompt, "text to continue (a character model: every character must be in its vocabulary)", 0},
        {"tokens", FLAG_INT, &tokens, "tokens to generate (characters, or a BPE model's pieces)", 0},
        {"temperature", FLAG_FLOAT, &so.temperature, "softmax temperature (0 = greedy)", 0},
        {"top-k", FLAG_INT, &so.top_k, "sample among the k most likely tokens (0 = all)", 0},
        {"top-p", FLAG_FLOAT, &so.top_p, "sample among the most likely tokens holding this much probability (1 = all)", 0},
        {"seed", FLAG_INT, &seed, "random seed", 0},
        {"threads", FLAG_INT, &threads, CLI_THREADS_HELP, 0},
        {"no-kv-cache", FLAG_BOOL, &no_cache, "recompute the whole context for every token (slow; for comparison)", 0},
        {"profile", FLAG_BOOL, &profile,
         "at the end, print time per token by op kind and phase (kv_cache, search) to stderr", 0},
    };
    cli_spec spec = {"generate",
                     "MODEL.tfm [--prompt TEXT] [--tokens N] [--temperature T] [--top-k K] [--top-p P] [--seed S]",
                     "Continues the prompt one token (character or BPE piece) at a time, streaming raw text to\n"
                     "stdout in whole UTF-8 characters. The context is the last block_size tokens. Keys/values of the context are cached per layer, so a token\n"
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
    so.max_tokens = tokens;
    tfm_generator_params gp;
    tfm_generator_params_default(&gp);
    gp.threads = threads, gp.profile = profile, gp.no_kv_cache = no_cache;
    tfm_generator *gen = tfm_generator_load(pos[0], &gp);
    if (!gen) return cli_fail("generate", "%s", tfm_last_error());
    if (tfm_generator_count_tokens(gen, prompt) < 0) {
        rc = cli_error("generate", "--prompt: %s", tfm_last_error());
    } else {
        fputs(prompt, stdout);
        fflush(stdout);
        tfm_generation out;
        double t = tfm_now();
        int fail = tfm_generator_generate(gen, prompt, &so, put_text, NULL, &out);
        t = tfm_now() - t;
        fputc('\n', stdout);
        fflush(stdout);
        if (fail) {
            rc = cli_fail("generate", "%s", tfm_last_error());
        } else {
            int full = no_cache || tfm_generator_model(gen)->cfg.attention == TFM_ATTN_SYNTHESIZER;
            fprintf(stderr, "generated %d tokens in %.3f s (%.1f tok/s, %s)\n", out.n_tokens, t,
                    t > 0 ? out.n_tokens / t : 0.0, full ? "full recompute" : "KV cache");
            if (profile) tfm_generator_print_profile(gen, out.n_tokens, t, stderr);
            cli_report_rss("generate");
            tfm_generation_free(&out);
        }
    }
    tfm_generator_free(gen);
    return rc;
}
