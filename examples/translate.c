/* translate.c: translate stdin line by line with a model trained by `tfm train-mt`.
 *
 *   cc translate.c $(pkg-config --cflags --libs tfm) -o translate
 *   ./translate MODEL.tfm [BEAM] < source.txt      (no BEAM: the model's stored decoding settings)
 *
 * One object, one call: the translator owns the model, its tokenizer, the packed weights and one graph per
 * thread; tfm_translator_translate_batch takes raw lines and returns detokenized text. Lines are read in
 * batches of 64 so the batches decode in parallel. */
#define _POSIX_C_SOURCE 200809L   /* getline */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tfm/translator.h>

#define BATCH 64

int main(int argc, char **argv) {
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: %s MODEL.tfm [BEAM] < source.txt\n", argv[0]);
        return 2;
    }
    tfm_translator *t = tfm_translator_load(argv[1], NULL);   /* NULL: default params (all CPUs, batch 32) */
    if (!t) {
        fprintf(stderr, "translate: %s\n", tfm_last_error());
        return 1;
    }
    tfm_translate_options o;
    tfm_translate_options_default(&o);                       /* beam 0 = the model's stored beam */
    if (argc > 2) o.beam_size = atoi(argv[2]);
    char *lines[BATCH];
    tfm_translation out[BATCH];
    size_t cap[BATCH] = {0};
    int rc = 0, n;
    memset(lines, 0, sizeof lines);
    do {
        for (n = 0; n < BATCH && getline(&lines[n], &cap[n], stdin) >= 0; n++) lines[n][strcspn(lines[n], "\r\n")] = 0;
        if (n && tfm_translator_translate_batch(t, (const char *const *)lines, n, &o, out)) {
            fprintf(stderr, "translate: %s\n", tfm_last_error());
            rc = 1;
            break;
        }
        for (int i = 0; i < n; i++) {
            puts(out[i].hypotheses[0]);
            tfm_translation_free(&out[i]);
        }
    } while (n == BATCH);
    for (int i = 0; i < BATCH; i++) free(lines[i]);
    tfm_translator_free(t);
    return rc;
}
