/* generate.c: sample text from a language model trained by `tfm train-lm` (or train_lm.c), streamed as it
 * is made.
 *
 *   cc generate.c $(pkg-config --cflags --libs tfm) -o generate
 *   ./generate MODEL.tfm PROMPT [TOKENS [TEMPERATURE [TOP_K [TOP_P [SEED]]]]]
 *
 * Defaults: 200 tokens, temperature 1, top-k 0 (all), top-p 1 (off), seed 1: the defaults of
 * `tfm generate`, which prints the same text for the same settings. One object (the model, its tokenizer,
 * its threads) and one call, with a callback that receives the text as soon as it is final. */
#include <stdio.h>
#include <stdlib.h>

#include <tfm/generator.h>

static int print_piece(const char *text, size_t len, void *user) {
    (void)user;
    fwrite(text, 1, len, stdout);
    fflush(stdout);
    return 0;   /* non-zero would stop the generation */
}

int main(int argc, char **argv) {
    if (argc < 3 || argc > 8) {
        fprintf(stderr, "usage: %s MODEL.tfm PROMPT [TOKENS [TEMPERATURE [TOP_K [TOP_P [SEED]]]]]\n", argv[0]);
        return 2;
    }
    tfm_generate_options o;
    tfm_generate_options_default(&o);
    o.max_tokens = argc > 3 ? atoi(argv[3]) : 200;
    if (argc > 4) o.temperature = (float)atof(argv[4]);   /* 0 = greedy */
    if (argc > 5) o.top_k = atoi(argv[5]);
    if (argc > 6) o.top_p = (float)atof(argv[6]);
    if (argc > 7) o.seed = strtoull(argv[7], NULL, 10);
    tfm_generator *g = tfm_generator_load(argv[1], NULL);   /* NULL: default params (all CPUs) */
    if (!g) {
        fprintf(stderr, "generate: %s\n", tfm_last_error());
        return 1;
    }
    fputs(argv[2], stdout);
    tfm_generation out;
    int rc = tfm_generator_generate(g, argv[2], &o, print_piece, NULL, &out);
    if (rc) {
        fprintf(stderr, "\ngenerate: %s\n", tfm_last_error());
    } else {
        putchar('\n');
        tfm_generation_free(&out);
    }
    tfm_generator_free(g);
    return rc ? 1 : 0;
}
