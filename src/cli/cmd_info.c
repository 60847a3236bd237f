/* tfm info: what a checkpoint holds (any model kind): meta, config, parameters, training state. */
#include "cli/cli.h"
#include "tfm/core.h"
#include "tfm/io.h"
#include "tfm/kernels.h"
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

static void print_group(const tfm_container *c, const char *prefix, const char *title) {
    size_t pl = strlen(prefix);
    int any = 0;
    for (int i = 0; i < c->n; i++) {
        const tfm_entry *e = &c->e[i];
        if (strncmp(e->name, prefix, pl)) continue;
        if (!any) printf("%s:\n", title);
        any = 1;
        printf("  %-22s ", e->name + pl);
        if (e->dtype == TFM_DT_BYTES && e->nbytes > 60) printf("(%zu bytes of text)", e->nbytes);
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
    size_t n_params = 0;
    int n_tensors = 0;
    for (int i = 0; i < c.n; i++)
        if (!strncmp(c.e[i].name, "param.", 6)) {
            n_params += c.e[i].nbytes / 4;
            n_tensors++;
        }
    printf("parameters: %zu in %d tensors\n", n_params, n_tensors);
    for (int i = 0; i < c.n; i++)
        if (!strncmp(c.e[i].name, "tokenizer.", 10)) {
            const tfm_entry *e = &c.e[i];
            int count = 0;
            if (!strcmp(e->name, "tokenizer.kind") || !strncmp(e->name, "tokenizer.gpt2.", 15) ||
                !strncmp(e->name, "tokenizer.marian.", 17)) {   /* an import's kind / files (raw bytes) */
                if (strcmp(e->name, "tokenizer.kind")) printf("%s: %zu bytes\n", e->name, e->nbytes);
                else printf("tokenizer: %.40s\n", (const char *)e->data);
            } else if (!strcmp(e->name, "tokenizer.chars")) { /* count UTF-8 characters */
                for (size_t k = 0; k < e->nbytes; k++) count += (((const unsigned char *)e->data)[k] & 0xC0) != 0x80;
                printf("tokenizer: %d characters\n", count);
            } else {
                for (size_t k = 0; k < e->nbytes; k++) count += ((const char *)e->data)[k] == '\n';
                printf("%s: %d entries\n", e->name, count + (e->nbytes > 0));
            }
        }
    print_group(&c, "run.", "run configuration (what --resume takes and checks)");
    if (tfm_container_get(&c, "adam.t")) print_group(&c, "train.", "training state (resumable)");
    else printf("training state: none (weights only)\n");
    printf("kernels here: %s (gemm %s; TFM_ISA=avx512|avx2|generic forces one)\n", tfm_isa_name(), tfm_gemm_backend());
    tfm_container_free(&c);
    return 0;
}
