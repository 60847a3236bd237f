/* The validation loss of a GPT checkpoint over its whole validation split (the int8 quality check of
 * issue 34: an int8 model's loss against its fp32 model's, docs/INT8.md). The split is train-lm's: the last
 * --val-frac of the text (default 0.1); the loss is the mean next-token cross-entropy over every
 * consecutive window of block_size tokens in it (no sampling: the same number on every run), inference
 * mode (an int8 model runs its int8 kernels).
 *   lm_loss MODEL.tfm DATA.txt [--val-frac F] [--threads N]
 * Prints "val loss L over N tokens". */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tfm/lm.h"

static int usage(const char *why) {
    fprintf(stderr, "lm_loss: %s\nusage: lm_loss MODEL.tfm DATA.txt [--val-frac F] [--threads N]\n", why);
    return 2;
}

int main(int argc, char **argv) {
    if (argc < 3) return usage("two arguments needed");
    float val_frac = 0.1f;
    int threads = 0;
    for (int i = 3; i < argc; i++) {
        char *end = NULL;
        if (!strcmp(argv[i], "--val-frac") && i + 1 < argc) val_frac = strtof(argv[++i], &end);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = (int)strtol(argv[++i], &end, 10);
        else return usage("unknown argument");
        if (!end || *end) return usage("bad number");
    }
    if (!(val_frac > 0 && val_frac < 1)) return usage("--val-frac must be in (0, 1)");
    tfm_set_threads(threads);
    tfm_gpt m;
    tfm_char_vocab v;
    if (tfm_gpt_load(&m, &v, NULL, NULL, argv[1])) return fprintf(stderr, "lm_loss: %s\n", tfm_last_error()), 1;
    tfm_lm_data d;
    int T = m.cfg.block_size;
    if (tfm_lm_data_load(&d, argv[2], v.chars, 1.0f - val_frac, T)) return fprintf(stderr, "lm_loss: %s\n", tfm_last_error()), 1;
    enum { B = 16 };
    int *x = malloc(sizeof(int) * B * T), *y = malloc(sizeof(int) * B * T);
    int windows = (d.n - d.n_train - 1) / T;
    tfm_graph g;
    tfm_graph_init(&g, 1);
    g.grad_enabled = 0;
    double sum = 0;
    for (int w0 = 0; w0 < windows; w0 += B) {
        int b = windows - w0 < B ? windows - w0 : B;
        for (int i = 0; i < b; i++) {
            memcpy(x + i * T, d.ids + d.n_train + (size_t)(w0 + i) * T, sizeof(int) * T);
            memcpy(y + i * T, d.ids + d.n_train + (size_t)(w0 + i) * T + 1, sizeof(int) * T);
        }
        tfm_graph_reset(&g);
        sum += (double)tfm_cross_entropy(&g, tfm_gpt_forward(&g, &m, x, b, T), y, -100, 0.0f)->data[0] * b;
    }
    printf("val loss %.6f over %lld tokens (%d windows of %d)\n", windows ? sum / windows : NAN, (long long)windows * T,
           windows, T);
    tfm_graph_free(&g);
    free(x), free(y);
    tfm_lm_data_free(&d);
    tfm_char_vocab_free(&v);
    tfm_gpt_free(&m);
    return 0;
}
