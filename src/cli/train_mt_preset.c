/* train-mt --preset NAME: named sets of defaults for the flags not given on the command line. d2l is the
 * d2l book's toy (600 short pairs, word tokens, a 2-layer 32-wide Transformer: the defaults of every flag);
 * multi30k is recipes/multi30k-de-en.sh's model, schedule and batching for raw text with joint BPE. Without
 * --preset, --tokenizer bpe picks multi30k (real sentences need its --max-len and model) and anything else d2l.
 * The chosen name is stored with the run, like every flag, so a resume keeps it. Also the truncation guard
 * (mt_check_truncation), which stops a run whose --max-len would cut its sentences. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/train_mt.h"

#define C "train-mt"

typedef struct {
    const char *name, *summary;
    const char *flags[40];   /* "flag", "value" pairs, NULL-terminated */
} preset;

static const preset presets[] = {
    {"d2l", "the d2l book's toy: word tokens, d_model 32, 2 layers, --max-len 10, constant lr 0.005, 10 epochs",
     {"tokenizer", "word", "preprocess", "d2l", "min-freq", "2", "max-len", "10", "d-model", "32", "n-head", "4",
      "n-layer", "2", "ffn", "64", "dropout", "0.2", "lr", "0.005", "schedule", "constant", "batch-size", "64",
      "epochs", "10", "beta2", "0.999", "init", "d2l", NULL}},
    {"multi30k", "recipes/multi30k-de-en.sh, for raw text: joint BPE 8000, tied embeddings, d_model 256,\n"
                 "            3+3 layers, FFN 1024, --max-len 64, Noam 0.5 / 1000 warmup, 2048-token batches, 14 epochs",
     {"tokenizer", "bpe", "vocab-size", "8000", "share-embeddings", "1", "init", "xavier", "d-model", "256",
      "n-head", "4", "n-layer", "3", "ffn", "1024", "dropout", "0.1", "label-smoothing", "0.1", "max-len", "64",
      "schedule", "noam", "lr", "0.5", "warmup", "1000", "beta2", "0.98", "grad-clip", "1", "max-tokens", "2048",
      "epochs", "14", NULL}},
};

const char *mt_about(void) {
    static char buf[1600];
    size_t k = (size_t)snprintf(buf, sizeof buf, "%s",
        "Train an encoder-decoder translator with teacher forcing, masked cross-entropy (label\n"
        "smoothing), Adam(W), a learning-rate schedule and gradient clipping. A checkpoint is written\n"
        "after every epoch; --resume continues it exactly.\n"
        "Presets (--preset NAME) set the flags not given on the command line:");
    for (size_t i = 0; i < sizeof presets / sizeof *presets && k < sizeof buf; i++)
        k += (size_t)snprintf(buf + k, sizeof buf - k, "\n  %-9s %s", presets[i].name, presets[i].summary);
    if (k < sizeof buf)
        snprintf(buf + k, sizeof buf - k, "\nWithout --preset: multi30k with --tokenizer bpe (raw text), else d2l. The "
                                          "defaults shown below are d2l's.");
    return buf;
}

static cli_flag *flag_named(cli_spec *spec, const char *name) {
    for (int i = 0; i < spec->n_flags; i++)
        if (!strcmp(spec->flags[i].name, name)) return &spec->flags[i];
    return NULL;
}

static void set_flag(cli_flag *f, const char *v) {
    switch (f->type) {
    case FLAG_INT:
    case FLAG_BOOL: *(int *)f->dst = atoi(v); break;
    case FLAG_FLOAT: *(float *)f->dst = strtof(v, NULL); break;
    default: *(const char **)f->dst = v; break;
    }
}

int mt_preset_apply(cli_spec *spec, mt_opts *o) {
    if (o->resume) return 0;   /* the stored run has every value, the preset's name included */
    int bpe_given = cli_flag_seen(spec, "tokenizer") && !strcmp(o->tokenizer, "bpe");
    int transformer = !strcmp(o->arch, "transformer");
    if (!o->preset) o->preset = bpe_given && transformer ? "multi30k" : "d2l";
    const preset *p = NULL;
    for (size_t i = 0; i < sizeof presets / sizeof *presets; i++)
        if (!strcmp(o->preset, presets[i].name)) p = &presets[i];
    if (!p) return cli_error(C, "--preset: unknown '%s' (d2l, multi30k; see tfm train-mt --help)", o->preset);
    if (!transformer && strcmp(p->name, "d2l"))
        return cli_error(C, "--preset %s is a Transformer recipe; --arch %s takes --preset d2l and its own flags", p->name,
                         o->arch);
    for (int i = 0; p->flags[i]; i += 2) {
        cli_flag *f = flag_named(spec, p->flags[i]);
        int bpe_only = !strcmp(p->flags[i], "vocab-size") || !strcmp(p->flags[i], "share-embeddings");
        if (f && !f->seen && !(bpe_only && strcmp(o->tokenizer, "bpe"))) set_flag(f, p->flags[i + 1]);
    }
    /* a model file fixes the vocabulary: the preset's --vocab-size does not apply */
    if (o->bpe_model && !cli_flag_seen(spec, "vocab-size")) o->vocab_size = 0;
    return 0;
}

/* the length (tokens incl. <eos>) that keeps 99% of the pairs whole, from arrays built at the longest --max-len */
static int length_p99(const tfm_parallel_text *p, const tfm_mt_model *t) {
    tfm_nmt_arrays all = {0};
    if (tfm_mt_arrays(p, t, 4096, &all)) return 0;
    int hist[4097] = {0}, need = (int)(0.99 * all.n + 0.999), seen = 0, len = 0;
    for (int i = 0; i < all.n; i++) {
        int l = all.src_valid[i] > all.tgt_valid[i] ? all.src_valid[i] : all.tgt_valid[i];
        hist[l < 4096 ? l : 4096]++;
    }
    while (len < 4096 && seen < need) seen += hist[++len];
    tfm_nmt_arrays_free(&all);
    return len;
}

int mt_check_truncation(const tfm_parallel_text *p, const tfm_mt_model *t, const tfm_nmt_arrays *a, const char *what,
                        int allow) {
    int cut = a->n_truncated_src > a->n_truncated_tgt ? a->n_truncated_src : a->n_truncated_tgt;
    if (a->n == 0 || cut <= MT_TRUNCATION_LIMIT * a->n) return 0;
    int p99 = length_p99(p, t);
    char hint[64] = "";
    if (p99 > a->num_steps) snprintf(hint, sizeof hint, " (--max-len %d keeps 99%% whole)", p99);
    if (!allow)
        return cli_error(C, "%s: --max-len %d would cut %d of %d %s sentences (%.0f%%, more than %.0f%%): raise --max-len%s, "
                         "or give --allow-truncation to train on the cut pairs", what, a->num_steps, cut, a->n,
                         a->n_truncated_src >= a->n_truncated_tgt ? "source" : "target", 100.0 * cut / a->n,
                         100 * MT_TRUNCATION_LIMIT, hint);
    fprintf(stderr, "tfm %s: WARNING: %s: --max-len %d cuts %d of %d sentences (%.0f%%): --allow-truncation given; "
            "raise --max-len%s to train on whole sentences\n", C, what, a->num_steps, cut, a->n, 100.0 * cut / a->n, hint);
    return 0;
}
