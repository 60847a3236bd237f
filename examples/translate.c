/* translate.c: translate stdin line by line with a model trained by `tfm train-mt`.
 *
 *   cc translate.c $(pkg-config --cflags --libs tfm) -o translate
 *   ./translate MODEL.tfm [BEAM] < source.txt      (BEAM 1 = greedy, the default)
 *
 * One output line per input line. tfm_translate_lines tokenizes with the model's tokenizer, maps the
 * tokens to ids, decodes with a key/value cache and joins the target tokens with spaces. */
#define _POSIX_C_SOURCE 200809L   /* getline */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tfm/decode.h>
#include <tfm/seq2seq.h>

int main(int argc, char **argv) {
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: %s MODEL.tfm [BEAM] < source.txt\n", argv[0]);
        return 2;
    }
    tfm_translator t;   /* model + source/target vocabularies + tokenizer kind */
    if (tfm_translator_load(&t, argv[1])) {
        fprintf(stderr, "translate: %s\n", tfm_last_error());
        return 1;
    }
    tfm_decode_opts opts = {.beam = argc > 2 ? atoi(argv[2]) : 1, .alpha = 0.0f, .max_len = 50};
    tfm_graph g;          /* the arena every forward pass allocates from; reused for every line */
    tfm_graph_init(&g, 0);
    char *line = NULL;
    size_t cap = 0;
    int rc = 0;
    while (getline(&line, &cap, stdin) >= 0) {
        line[strcspn(line, "\r\n")] = 0;
        const char *src = line;
        char *hyp = NULL;
        if (tfm_translate_lines(&t, &g, &src, 1, 200, 1, &opts, &hyp)) {   /* 1 line, batch of 1 */
            fprintf(stderr, "translate: %s\n", tfm_last_error());
            rc = 1;
            break;
        }
        puts(hyp);
        free(hyp);
    }
    free(line);
    tfm_graph_free(&g);
    tfm_translator_free(&t);
    return rc;
}
