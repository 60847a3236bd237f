/* Two GPT checkpoints generating in one process, in alternating rounds: int8 against fp32 (issue 34) where a
 * VM's speed drifts between processes faster than farm-bench's pairs of whole runs can follow.
 *
 *   build/bench/gen_pair A.tfm B.tfm [--tokens N] [--prompt TEXT] [--rounds R] [--threads T]
 *   (defaults: 256 tokens after "ROMEO:", 21 rounds, 1 thread; make bench-bin)
 *
 * Each round generates greedily with A, then B (every other round B first, so a drift within a round favours
 * neither), through the library's generator, as `tfm generate --temperature 0` does: the same prompt, the KV
 * cache, the window recomputed per token once the context passes the block. Before the rounds each model
 * generates once, not counted (its graph and scratch grown, greedy's screen made): these are warm, steady-state
 * figures, where `tfm generate` as a process also pays its first window's fresh memory. Printed: each model's
 * median tokens/s with min-max, and the median of the rounds' ratios A/B (tokens/s) with min-max. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_clock.h"
#include <tfm/generator.h>
#include <tfm/kernels.h>

static double tokens_per_s(tfm_generator *g, const char *prompt, int tokens) {
    tfm_generate_options o;
    tfm_generate_options_default(&o);
    o.max_tokens = tokens;
    o.temperature = 0.0f;
    tfm_generation out;
    double t0 = bench_now();
    if (tfm_generator_generate(g, prompt, &o, NULL, NULL, &out)) {
        fprintf(stderr, "gen_pair: %s\n", tfm_last_error());
        exit(1);
    }
    double t = bench_now() - t0;
    int n = out.n_tokens;
    tfm_generation_free(&out);
    return n / t;
}

static void print_row(const char *label, double *v, int n, int digits) {
    qsort(v, (size_t)n, sizeof *v, bench_by_value);
    printf("  %-40s %10.*f   %.*f-%.*f\n", label, digits, v[n / 2], digits, v[0], digits, v[n - 1]);
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: gen_pair A.tfm B.tfm [--tokens N] [--prompt TEXT] [--rounds R] [--threads T]\n");
        return 2;
    }
    const char *prompt = "ROMEO:";
    int tokens = 256, rounds = 21, threads = 1;
    for (int i = 3; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--tokens")) tokens = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--prompt")) prompt = argv[i + 1];
        else if (!strcmp(argv[i], "--rounds")) rounds = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--threads")) threads = atoi(argv[i + 1]);
        else {
            fprintf(stderr, "gen_pair: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if (tokens < 1 || rounds < 1 || rounds > 1000 || threads < 1) {
        fprintf(stderr, "gen_pair: --tokens, --rounds (at most 1000) and --threads must be positive\n");
        return 2;
    }
    tfm_generator_params p;
    tfm_generator_params_default(&p);
    p.threads = threads;
    tfm_generator *g[2];
    for (int k = 0; k < 2; k++)
        if (!(g[k] = tfm_generator_load(argv[1 + k], &p))) {
            fprintf(stderr, "gen_pair: %s\n", tfm_last_error());
            return 1;
        }
    for (int k = 0; k < 2; k++) tokens_per_s(g[k], prompt, tokens);   /* warm-up, not counted */
    double *rate = malloc(sizeof(double) * 3 * (size_t)rounds);
    if (!rate) return 1;
    double *ra = rate, *rb = rate + rounds, *ratio = rate + 2 * rounds;
    for (int r = 0; r < rounds; r++) {
        int first = r % 2;
        double t[2];
        t[first] = tokens_per_s(g[first], prompt, tokens);
        t[!first] = tokens_per_s(g[!first], prompt, tokens);
        ra[r] = t[0], rb[r] = t[1], ratio[r] = t[0] / t[1];
    }
    printf("# gen_pair: %d tokens after \"%s\", greedy, %d thread(s), %d alternating rounds; kernels %s\n", tokens,
           prompt, threads, rounds, tfm_isa_name());
    printf("  %-40s %10s   %s\n", "", "median", "min-max");
    char label[64];
    snprintf(label, sizeof label, "A %.36s tok/s", argv[1]);
    print_row(label, ra, rounds, 1);
    snprintf(label, sizeof label, "B %.36s tok/s", argv[2]);
    print_row(label, rb, rounds, 1);
    print_row("A/B (each round's ratio)", ratio, rounds, 3);
    free(rate);
    for (int k = 0; k < 2; k++) tfm_generator_free(g[k]);
    return 0;
}
