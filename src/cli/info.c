/* tfm info's summaries of a checkpoint: its tokenizer and its parameters (declared in src/cli/info.h). */
#include <stdio.h>
#include <string.h>

#include "cli/info.h"
#include "tfm/bpe.h"
#include "tfm/checkpoint.h"
#include "tfm/core.h"
#include "tfm/kernels.h"

/* The tokenizer by kind and size: characters, word vocabularies (with their preprocessing), or a BPE model. */
void info_print_tokenizer(const tfm_container *c) {
    const tfm_entry *chars = tfm_container_get(c, "tokenizer.chars"), *kind = tfm_container_get(c, "tokenizer.kind");
    const tfm_entry *src = tfm_container_get(c, "tokenizer.src_vocab"), *tgt = tfm_container_get(c, "tokenizer.tgt_vocab");
    const char *k = kind && kind->dtype == TFM_DT_BYTES ? (const char *)kind->data : NULL;
    if (chars) {
        int count = 0;
        for (size_t i = 0; i < chars->nbytes; i++) count += (((const unsigned char *)chars->data)[i] & 0xC0) != 0x80;
        printf("tokenizer: characters, %d of them\n", count - (chars->nbytes > 0 && !((const char *)chars->data)[chars->nbytes - 1]));
    }
    if (tfm_container_get(c, TFM_BPE_ENTRY)) {
        tfm_bpe b;
        if (!tfm_bpe_from_container(&b, c, NULL)) {
            printf("tokenizer: BPE (tfm bpe, SentencePiece model), %d pieces%s\n", b.n,
                   src ? ", the vocabulary of both sides" : "");
            tfm_bpe_free(&b);
        } else {
            printf("tokenizer: BPE, unreadable: %s\n", tfm_last_error());
        }
    } else if (k && (!strcmp(k, "gpt2") || !strcmp(k, "marian"))) {   /* an import's tokenizer files (raw bytes) */
        printf("tokenizer: %s (imported)", k);
        for (int i = 0; i < c->n; i++)
            if (!strncmp(c->e[i].name, "tokenizer.", 10) && strcmp(c->e[i].name, "tokenizer.kind"))
                printf(", %s %zu bytes", c->e[i].name + 10, c->e[i].nbytes);
        printf("\n");
    } else if (src && tgt) {
        int ns = 0, nt = 0;
        for (size_t i = 0; i < src->nbytes; i++) ns += ((const char *)src->data)[i] == '\n';
        for (size_t i = 0; i < tgt->nbytes; i++) nt += ((const char *)tgt->data)[i] == '\n';
        printf("tokenizer: words (--preprocess %s), vocabularies of %d source / %d target entries\n", k ? k : "?",
               ns + (src->nbytes > 1), nt + (tgt->nbytes > 1));
    }
}

/* The parameter count and the weights' precision (int8 tensors and their scales). */
void info_print_parameters(const tfm_container *c) {
    size_t n_params = 0, n_q8 = 0, bytes = 0;
    int n_tensors = 0, t_q8 = 0;
    for (int i = 0; i < c->n; i++) {
        const tfm_entry *e = &c->e[i];
        if (!strncmp(e->name, TFM_Q8_SCALE_PREFIX, strlen(TFM_Q8_SCALE_PREFIX))) bytes += e->nbytes;
        if (strncmp(e->name, "param.", 6)) continue;
        size_t n = e->dtype == TFM_DT_I8 ? e->nbytes : e->nbytes / 4;
        n_params += n, bytes += e->nbytes, n_tensors++;
        if (e->dtype == TFM_DT_I8) n_q8 += n, t_q8++;
    }
    printf("parameters: %zu in %d tensors\n", n_params, n_tensors);
    if (t_q8)
        printf("precision: int8 (tfm quantize): %d of %d tensors, %.1f%% of the parameters, one fp32 scale per row; "
               "%.2f MiB of weights (fp32: %.2f MiB)\n", t_q8, n_tensors, 100.0 * (double)n_q8 / (double)n_params,
               bytes / 1048576.0, n_params * 4 / 1048576.0);
    else
        printf("precision: fp32\n");
}
