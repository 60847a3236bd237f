/* generate.c: sample text from a character-level GPT trained by `tfm train-lm` (or train_lm.c).
 *
 *   cc generate.c $(pkg-config --cflags --libs tfm) -o generate
 *   ./generate MODEL.tfm PROMPT [TOKENS [TEMPERATURE [TOP_K [TOP_P [SEED]]]]]
 *
 * Defaults: 200 tokens, temperature 1, top-k 0 (all), top-p 1 (off), seed 1: the defaults of
 * `tfm generate`, which prints the same text for the same settings. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tfm/decode.h>
#include <tfm/train.h>

int main(int argc, char **argv) {
    if (argc < 3 || argc > 8) {
        fprintf(stderr, "usage: %s MODEL.tfm PROMPT [TOKENS [TEMPERATURE [TOP_K [TOP_P [SEED]]]]]\n", argv[0]);
        return 2;
    }
    const char *prompt = argv[2];
    int n_new = argc > 3 ? atoi(argv[3]) : 200;
    tfm_sample_opts o;
    tfm_sample_opts_default(&o);
    if (argc > 4) o.temperature = (float)atof(argv[4]);   /* 0 = greedy */
    if (argc > 5) o.top_k = atoi(argv[5]);
    if (argc > 6) o.top_p = (float)atof(argv[6]);
    if (argc > 7) o.seed = strtoull(argv[7], NULL, 10);

    tfm_gpt m;
    tfm_char_vocab vocab;   /* the model's characters: id = rank of the code point */
    if (tfm_gpt_load(argv[1], &m, &vocab, NULL, NULL)) {   /* no optimizer / training state */
        fprintf(stderr, "generate: %s\n", tfm_last_error());
        return 1;
    }
    int rc = 1, n_prompt = 0;
    int *prompt_ids = tfm_char_encode(&vocab, prompt, strlen(prompt), &n_prompt);
    int *out = malloc((size_t)(n_new > 0 ? n_new : 1) * sizeof *out);
    tfm_graph g;
    tfm_graph_init(&g, 0);
    if (!prompt_ids || !out) {
        fprintf(stderr, "generate: prompt: %s\n", prompt_ids ? "out of memory" : tfm_last_error());
    } else {
        /* no per-token callback: collect the ids in out, decode them at the end */
        int made = tfm_gpt_generate(&m, &g, prompt_ids, n_prompt, n_new, &o, NULL, NULL, out);
        char *text = made >= 0 ? tfm_char_decode(&vocab, out, made) : NULL;
        if (text) {
            printf("%s%s\n", prompt, text);
            rc = 0;
        } else {
            fprintf(stderr, "generate: %s\n", tfm_last_error());
        }
        free(text);
    }
    tfm_graph_free(&g);
    free(out);
    free(prompt_ids);
    tfm_gpt_free(&m);
    tfm_char_vocab_free(&vocab);
    return rc;
}
