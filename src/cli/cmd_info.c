/* tfm info: what a checkpoint holds (any model kind): meta, config, parameters, training state. */
#include "cli/cli.h"
#include "cli/info.h"
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
        if (!strcmp(e->name, "decode.ensemble") && e->dtype == TFM_DT_BYTES && tfm_container_str(c, e->name))
            for (const char *t = e->data; *t; t++) putchar(*t == '\n' ? ' ' : *t);   /* member names, one line */
        else if (e->dtype == TFM_DT_BYTES) print_text(e);
        else print_value(e);
        printf("\n");
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
    info_print_parameters(&c);
    info_print_tokenizer(&c);
    print_group(&c, "run.", "run configuration (what --resume takes and checks)");
    if (tfm_container_get(&c, "adam.t")) print_group(&c, "train.", "training state (resumable)");
    else printf("training state: none (weights only)\n");
    printf("kernels here: %s (gemm %s, int8 %s; TFM_ISA=avx512|avx2|generic forces one)\n", tfm_isa_name(),
           tfm_gemm_backend(), tfm_gemm_q8_backend());
    tfm_container_free(&c);
    return 0;
}
