/* tfm info: what a checkpoint holds (any model kind): meta, config, parameters, training state. */
#include "cli/cli.h"
#include "tfm/checkpoint.h"
#include "tfm/bpe.h"
#include "tfm/core.h"
#include "tfm/io.h"
#include "tfm/kernels.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void print_value(const tfm_entry *e) {
    if (e->dtype == TFM_DT_BYTES) {
        printf("%s", (const char *)e->data);
    } else if (e->nbytes == 4) {
        if (e->dtype == TFM_DT_I32) printf("%d", *(const int *)e->data);
        else printf("%g", *(const float *)e->data);
    } else {
        printf("(%zu values)", e->nbytes / 4);
    }
}

/* A stored text as text: its first line (a multi-line text: and how many lines); binary bytes by their count. */
static void print_text(const tfm_entry *e) {
    const char *t = e->data;
    size_t n = strnlen(t, e->nbytes), line = strcspn(t, "\n");
    if (n < e->nbytes - (e->nbytes > 0) || !tfm_utf8_valid(t, n)) {
        printf("(%zu bytes)", e->nbytes);
        return;
    }
    if (line >= n) {
        printf("%s", t);
        return;
    }
    int lines = 1;
    for (size_t k = 0; k < n; k++) lines += t[k] == '\n' && k + 1 < n;
    printf("%.*s ... (%d lines)", (int)line, t, lines);
}

/* config fields that one architecture does not use (the config stores every field) */
static int unused_by(const char *arch, const char *field) {
    static const char *transformer_only = " d_model n_head ffn pre_ln max_len share_embeddings ";
    static const char *rnn_only = " embed_size hidden_size ";
    char key[80];
    snprintf(key, sizeof key, " %s ", field);
    if (!strcmp(arch, "transformer")) return strstr(rnn_only, key) != NULL;
    if (!strcmp(arch, "rnn") || !strcmp(arch, "bahdanau")) return strstr(transformer_only, key) != NULL;
    return 0;
}

static void print_group(const tfm_container *c, const char *prefix, const char *title) {
    size_t pl = strlen(prefix);
    int any = 0;
    const char *arch = tfm_container_get(c, "meta.arch") ? (const char *)tfm_container_get(c, "meta.arch")->data : "";
    for (int i = 0; i < c->n; i++) {
        const tfm_entry *e = &c->e[i];
        if (strncmp(e->name, prefix, pl)) continue;
        if (!strcmp(prefix, "config.") && unused_by(arch, e->name + pl)) continue;
        if (!any) printf("%s:\n", title);
        any = 1;
        if (!strcmp(prefix, "config.") && !strcmp(e->name + pl, "max_len") && e->dtype == TFM_DT_I32) {
            /* the position table; the model's sentence length is the --max-len it was trained with */
            int ml = 0;
            const tfm_entry *t = tfm_container_get(c, "train.max_len");
            const tfm_entry *r = tfm_container_get(c, "run.max-len");
            if (t && t->dtype == TFM_DT_I32) ml = *(const int *)t->data;
            else if (r && r->dtype == TFM_DT_BYTES) ml = atoi((const char *)r->data);
            if (ml > 0) printf("  %-22s %d (trained sentences, --max-len; position table %d)\n", "max_len", ml, *(const int *)e->data);
            else printf("  %-22s %d\n", "position_table", *(const int *)e->data);
            continue;
        }
        printf("  %-22s ", e->name + pl);
        if (e->dtype == TFM_DT_BYTES) print_text(e);
        else print_value(e);
        printf("\n");
    }
}

/* The tokenizer by kind and size: characters, word vocabularies (with their preprocessing), or a BPE model. */
static void print_tokenizer(const tfm_container *c) {
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

int cmd_info(int argc, char **argv) {
    cli_spec spec = {"info", "MODEL.tfm", "Prints the model kind, its config, the parameter count and the saved training state.",
                     NULL, 0, 1, 1};
    const char *pos[1];
    int npos, rc = cli_parse(&spec, argc, argv, pos, &npos);
    if (rc) return rc == 1 ? 0 : rc;
    tfm_container c;
    if (tfm_container_load(&c, pos[0])) {
        tfm_container_free(&c);
        return cli_fail("info", "%s", tfm_last_error());
    }
    const tfm_entry *kind = tfm_container_get(&c, "meta.kind");
    if (!kind || kind->dtype != TFM_DT_BYTES) {
        tfm_container_free(&c);
        return cli_error("info", "%s: not a tfm model checkpoint (no meta.kind entry)", pos[0]), CLI_EXIT_DATA;
    }
    printf("%s\n", pos[0]);
    print_group(&c, "meta.", "model");
    print_group(&c, "config.", "config");
    print_group(&c, "decode.", "decoding settings (translate, the library and serve use them by default)");
    size_t n_params = 0, n_q8 = 0, bytes = 0;
    int n_tensors = 0, t_q8 = 0;
    for (int i = 0; i < c.n; i++) {
        const tfm_entry *e = &c.e[i];
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
    print_tokenizer(&c);
    print_group(&c, "run.", "run configuration (what --resume takes and checks)");
    if (tfm_container_get(&c, "adam.t")) print_group(&c, "train.", "training state (resumable)");
    else printf("training state: none (weights only)\n");
    printf("kernels here: %s (gemm %s, int8 %s; TFM_ISA=avx512|avx2|generic forces one)\n", tfm_isa_name(),
           tfm_gemm_backend(), tfm_gemm_q8_backend());
    tfm_container_free(&c);
    return 0;
}
