/* tfm train-mt's flags and the helpers its command file calls (src/cli/train_mt_flags.c, train_mt_output.c). */
#ifndef TFM_CLI_TRAIN_MT_H
#define TFM_CLI_TRAIN_MT_H
#include "cli/cli.h"
#include "tfm/train.h"

typedef struct {
    const char *tsv, *src, *tgt, *valid_src, *valid_tgt, *out, *arch, *preprocess, *schedule, *dump, *loss_norm;
    int num_examples, min_freq, max_len, d_model, n_head, n_layer, ffn, batch_size, epochs, warmup, seed, threads;
    int embed_size, hidden_size, pre_ln, resume, bucket, log_every, d2l_examples, pe_len, dump_only, profile;
    int max_steps, save_every, keep_last, skip_nonfinite, allow_new_data;
    float dropout, label_smoothing, lr, min_lr, grad_clip, weight_decay, beta2;
} mt_opts;

/* Range checks naming the flag (printed; returns 2), and the library structs the flags fill in. */
int mt_check(const mt_opts *o);
/* --resume: the stored run configuration of --out into the flags not given; a given flag that differs, or
 * different data without --allow-new-data, is an error (printed; returns 2). */
int mt_resume_config(cli_spec *spec, const mt_opts *o, tfm_run_config *stored);
void mt_train_opts(const mt_opts *o, tfm_mt_train_opts *to);
void mt_model_config(const mt_opts *o, tfm_s2s_config *cf);
/* Corpus -> text pairs (warning for skipped empty lines), and pairs -> padded arrays (note on truncation). */
int mt_load_corpus(tfm_parallel_text *p, const char *tsv, const char *src, const char *tgt, int kind, int max_pairs);
int mt_arrays(const tfm_parallel_text *p, const tfm_translator *t, int num_steps, tfm_nmt_arrays *a, const char *what);
/* --dump-data PREFIX: tokens and vocabularies (valid may be NULL). */
int mt_dump(const char *prefix, const tfm_parallel_text *train, const tfm_parallel_text *valid, const tfm_translator *t);
/* --d2l-examples: translate d2l's four English sentences and print BLEU. */
void mt_d2l_examples(tfm_translator *t);
typedef struct {   /* what the report and save callbacks need */
    int tty;
    const char *out;
    const tfm_translator *tr;
    const tfm_adamw *opt;
    const tfm_mt_train_opts *to;
    int keep_last;
    const tfm_run_config *run;   /* stored as run.* in every checkpoint */
} mt_run;
/* flags not stored in the run configuration; stored flags a --resume may change (the rest must match); data */
#define MT_SAFE " out resume threads log-every max-steps allow-new-data profile d2l-examples dump-data dump-only "
#define MT_CHANGEABLE " epochs save-every keep-last skip-nonfinite "
#define MT_DATA " tsv src tgt valid-src valid-tgt "
/* tfm_mt_report_fn printing progress lines; user = an mt_run (or a pointer to an int "stderr is a TTY"). */
void mt_report(const tfm_mt_report *r, void *user);
/* tfm_mt_epoch_fn: the checkpoint (and its --keep-last copy); user = an mt_run. */
int mt_save(const tfm_mt_progress *p, void *user);
#endif
