/* tfm train-mt's flags and the helpers its command file calls (src/cli/train_mt_flags.c, train_mt_output.c). */
#ifndef TFM_CLI_TRAIN_MT_H
#define TFM_CLI_TRAIN_MT_H
#include "cli/cli.h"
#include "tfm/translator.h"
#include "tfm/train.h"

typedef struct {
    const char *tsv, *src, *tgt, *valid_src, *valid_tgt, *out, *resume, *arch, *preprocess, *schedule, *dump, *loss_norm;
    int num_examples, min_freq, max_len, d_model, n_head, n_layer, ffn, batch_size, epochs, warmup, seed, threads;
    int embed_size, hidden_size, pre_ln, bucket, log_every, d2l_examples, pe_len, dump_only, profile;
    int max_steps, save_every, keep_last, skip_nonfinite, allow_new_data;
    float dropout, label_smoothing, lr, min_lr, grad_clip, weight_decay, beta1, beta2;
    /* issue 10 (train_mt_model.c): subwords, tied embeddings, init, token batches */
    const char *tokenizer, *bpe_model, *init;
    int vocab_size, share_embeddings, max_tokens, pad_to_max_len;
    /* issue 10 (train_mt_valid.c): validation that drives training, JSON-lines log */
    int valid_every, keep_best, patience;
    const char *log_file;
    const char *parallel;        /* --parallel (NULL: auto) */
    const char *precision;       /* --precision (NULL: fp32) */
    /* stored with the model for translate, the library and serve: decoding settings and the language pair */
    int decode_beam;
    float decode_alpha;
    const char *src_lang, *tgt_lang;
    const char *preset;          /* --preset (train_mt_preset.c); NULL until mt_preset_apply resolves it */
    int allow_truncation;        /* --allow-truncation: train even if more than 5% of the pairs are cut */
    char threads_line[96];       /* the start-up line's threads part (cli_threads_str) */
    char gemm_line[96];          /* and its GEMM part (cli_gemm_str) */
} mt_opts;

/* Range checks naming the flag (printed; returns the exit status), and the library structs the flags fill in. */
int mt_check(const mt_opts *o);
/* --resume PATH: the stored run configuration of PATH into the flags not given (--out defaults to PATH); a
 * given flag that differs, or different data without --allow-new-data, is an error (printed; returns the
 * exit status). */
int mt_resume_config(cli_spec *spec, mt_opts *o, tfm_run_config *stored);
void mt_train_opts(const mt_opts *o, tfm_mt_train_opts *to);
/* --resume: the checkpoint's translator, optimizer and progress (tfm_mt_resume); the flags then take the values
 * the model was built with (architecture, sizes, dropout, tokenizer, padding), and every stored run.* value must
 * equal them (cli_run_config_match). 0, or the exit status (printed; tr / opt may hold the model: free them). */
int mt_resume(const cli_spec *spec, mt_opts *o, const tfm_run_config *stored, const tfm_mt_train_opts *to,
              tfm_mt_model *tr, tfm_adamw *opt, tfm_mt_progress *prog);
void mt_model_config(const mt_opts *o, tfm_s2s_config *cf);
/* issue 10's flags (train_mt_model.c): all = base flags + them (all has room for n_base + 24); returns the
 * count. mt_check_model checks them (2 on error); mt_corpus_kind: the tokenizer kind corpora load with. */
int mt_flags_join(const cli_flag *base, int n_base, mt_opts *o, cli_flag *all);
int mt_check_model(const mt_opts *o);
/* --decode-beam / --decode-alpha / --src-lang / --tgt-lang into the model's stored settings. */
void mt_model_settings(const mt_opts *o, tfm_mt_model *tr);
int mt_corpus_kind(const mt_opts *o);
/* A fresh translator (word vocabularies, or a BPE model learned from p / read from --bpe-model) and its
 * optimizer. Prints the error; returns 0 or 2. */
int mt_build(const mt_opts *o, const tfm_parallel_text *p, const tfm_mt_train_opts *to, tfm_mt_model *tr,
             tfm_adamw *opt);
/* Validation with BLEU, --keep-best, --patience, --log-file (train_mt_valid.c). */
typedef struct {
    tfm_mt_model *tr;
    const tfm_nmt_arrays *valid;     /* NULL: no validation */
    char *buf[2], **src, **ref;      /* raw validation lines */
    int n, batch_size, max_len, keep_best, stopped;
    char best_path[4096];
    FILE *log;
    const char *log_path;            /* --log-file, for messages */
    tfm_early_stop es;
    tfm_graph g;                     /* the validation loss */
    tfm_translator *dec;             /* a view of tr that decodes the validation sources (made at the first
                                        validation, when threads are set; its packed weights refreshed at each) */
} mt_valid;
/* Reads the raw validation files, opens the log, sets to->max_tokens / valid_every / validate (= fn). 0 or 2. */
int mt_valid_open(mt_valid *v, const mt_opts *o, tfm_mt_model *tr, const tfm_nmt_arrays *valid,
                  tfm_mt_train_opts *to, int (*fn)(const struct tfm_mt_progress *, int, void *));
/* One validation (loss, greedy BLEU, best checkpoint, log line): 0 go on, 1 stop (patience), -1 error. */
int mt_validate(mt_valid *v, const tfm_mt_progress *p, int epoch);
void mt_valid_close(mt_valid *v);
int mt_check_valid(const mt_opts *o);
/* Corpus -> text pairs (warning for skipped empty lines), and pairs -> padded arrays (note on truncation; more
 * than 5% cut: mt_check_truncation). */
int mt_load_corpus(tfm_parallel_text *p, const char *tsv, const char *src, const char *tgt, int kind, int max_pairs);
int mt_arrays(const tfm_parallel_text *p, const tfm_mt_model *t, int num_steps, tfm_nmt_arrays *a, const char *what,
              int allow_truncation);
/* More than MT_TRUNCATION_LIMIT of the pairs of a cut to --max-len: an error naming the length that keeps 99% of
 * them and the flags (--max-len, --allow-truncation); with allow a loud warning. 0, or 2 (printed). */
#define MT_TRUNCATION_LIMIT 0.05
int mt_check_truncation(const tfm_parallel_text *p, const tfm_mt_model *t, const tfm_nmt_arrays *a, const char *what,
                        int allow);
/* --preset (train_mt_preset.c): the flags not given take the preset's values (no preset: multi30k with
 * --tokenizer bpe and --arch transformer, else d2l); nothing on --resume. 0, or 2 (printed). */
int mt_preset_apply(cli_spec *spec, mt_opts *o);
/* train-mt's --help description, with the presets. */
const char *mt_about(void);
/* Every file the run reads and writes (--out, --keep-best's MODEL.best.tfm, --log-file, the --dump-data
 * files) checked before any work (cli_check_files): returns 0 or the exit status (printed). */
int mt_check_files(const mt_opts *o);
/* --keep-best's file: OUT without .tfm, then .best.tfm */
void mt_best_path(const char *out, char *buf, size_t n);
/* --dump-data PREFIX: tokens and vocabularies (valid may be NULL), each file written atomically. */
int mt_dump(const char *prefix, const tfm_parallel_text *train, const tfm_parallel_text *valid, const tfm_mt_model *t);
/* The start-up lines: data, vocabularies, parameters, threads, GEMM path (and where a --resume starts). */
void mt_print_start(mt_opts *o, const tfm_parallel_text *p, const tfm_nmt_arrays *a, const tfm_mt_model *tr,
                    const tfm_mt_train_opts *to, const tfm_mt_progress *prog);
/* --d2l-examples: translate d2l's four English sentences and print BLEU. */
void mt_d2l_examples(tfm_mt_model *t);
typedef struct {   /* what the report and save callbacks need */
    int tty;
    const char *out;
    const tfm_mt_model *tr;
    const tfm_adamw *opt;
    const tfm_mt_train_opts *to;
    int keep_last;
    const tfm_run_config *run;   /* stored as run.* in every checkpoint */
    mt_valid *val;               /* validation and the --log-file */
    int saved_step;              /* the step of the last checkpoint this run saved; -1: none yet */
    int start_step;              /* the step the run started from (a --resume's) */
} mt_run;
/* flags not stored in the run configuration; stored flags a --resume may change (the rest must match); data */
#define MT_SAFE " out resume threads parallel log-every max-steps allow-new-data profile d2l-examples dump-data dump-only log-file allow-truncation "
#define MT_CHANGEABLE " epochs save-every keep-last skip-nonfinite eval-every keep-best patience decode-beam decode-alpha src-lang tgt-lang "
#define MT_DATA " tsv src tgt valid-src valid-tgt "
/* tfm_mt_report_fn printing progress lines; user = an mt_run (or a pointer to an int "stderr is a TTY"). */
void mt_report(const tfm_mt_report *r, void *user);
/* tfm_mt_epoch_fn: the checkpoint (and its --keep-last copy); user = an mt_run. */
int mt_save(const tfm_mt_progress *p, void *user);
/* The same progress lines plus the --log-file line, and the validation hook; user = an mt_run
 * (train_mt_valid.c). */
void mt_report_run(const tfm_mt_report *r, void *user);
int mt_validate_run(const struct tfm_mt_progress *p, int epoch, void *user);
#endif
