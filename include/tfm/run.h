/* tfm run (workflow floor, src/train/run_*.c): whole training runs in one call, what `tfm train-lm` and
 * `tfm train-mt` do: read the data, build the model (or take it from the checkpoint being resumed), check every
 * file before any work, train with evaluation, validation and checkpoints, and say what happens through
 * callbacks (the library prints nothing).
 *
 * Every option of a run is a field of a plain struct (tfm_lm_run_opts, tfm_mt_run_opts) described by a table
 * (tfm_lm_run_fields, tfm_mt_run_fields): its name (the CLI flag, the run.* key, Python's keyword with '_'), its
 * type, its class (below) and one line of help. The CLI's flags, the Python package's arguments, the run
 * configuration stored in every checkpoint and the resume rules all come from that one table.
 *
 *     tfm_lm_run_opts o;
 *     tfm_lm_run_opts_default(&o);                 // train-lm's defaults (nanoGPT's char-level recipe)
 *     o.data = "input.txt", o.out = "lm.tfm", o.iters = 500;
 *     tfm_run_result r;
 *     if (tfm_lm_run(&o, NULL, &r)) fprintf(stderr, "%s\n", tfm_last_error());
 */
#ifndef TFM_RUN_H
#define TFM_RUN_H

#include <signal.h>
#include <stddef.h>

#include "tfm/export.h"
#include "tfm/train.h"

/* ---------------------------------------------------------------- fields */
typedef enum { TFM_FIELD_INT, TFM_FIELD_FLOAT, TFM_FIELD_STR, TFM_FIELD_BOOL } tfm_field_type;
typedef enum {
    TFM_FIELD_FIXED = 0,     /* part of the run: stored as run.<name>; a resume takes it, and refuses another value */
    TFM_FIELD_CHANGEABLE,    /* stored; a resume takes it unless given (the run's length, checkpoint frequency) */
    TFM_FIELD_DATA,          /* a data file: stored with its fingerprint (run.data:<name>); a resume may find it
                                elsewhere, but its contents must be the run's unless allow_new_data is set */
    TFM_FIELD_LOCAL,         /* not part of the run (files written, threads, logging): never stored */
} tfm_field_class;
typedef struct {
    const char *name;        /* "n-layer": the CLI flag and the run.* key; Python's keyword is n_layer */
    tfm_field_type type;     /* int, float, const char * (NULL = unset), int 0/1 */
    tfm_field_class cls;
    size_t offset;           /* of the value in the options struct */
    const char *help;        /* what it means, one line (--help, man page, Python docstrings) */
} tfm_field;

/* The index of the field called name (also with '_' for '-'), or -1. */
TFM_API int tfm_field_find(const tfm_field *f, int n, const char *name);
/* Set a field of opts from text, as strictly as the command line parses it ("1e-3" for a float, "12" for an
 * int: no trailing garbage, in range of the type; a bool is "0" or "1"). A string field points INTO text, which
 * must outlive opts' use. 0, or -1 with "--NAME: 'TEXT' is not a number" style error. */
TFM_API int tfm_field_parse(const tfm_field *f, void *opts, const char *text);
/* The field's value as text: the shortest form that parses back to the same value ("" for an unset string). */
TFM_API void tfm_field_format(const tfm_field *f, const void *opts, char *buf, size_t n);

/* ---------------------------------------------------------------- the run configuration of a run */
/* Every stored field (all but LOCAL) of opts into rc as name = value, and for DATA fields that are set also
 * "data:<name>" = tfm_file_fingerprint of the file. 0, or -1 with an error naming the field. */
TFM_API int tfm_run_config_from(const tfm_field *f, int n, const void *opts, tfm_run_config *rc);
/* A resume: every stored field that was not given (given[i] == 0; given NULL: none) takes the stored value
 * (parsed as strictly as the command line: an edited "abc" is refused, naming the checkpoint); a given FIXED
 * field whose value differs is refused, naming both values; a DATA file whose contents differ from the stored
 * fingerprint is refused unless allow_new_data (then *new_data is set to the field's index, else -1).
 * String values point into stored, which must outlive opts' use. 0, or -1 with a one-line error. */
TFM_API int tfm_run_config_resume(const tfm_field *f, int n, void *opts, const unsigned char *given,
                                  const tfm_run_config *stored, int allow_new_data, const char *path, int *new_data);
/* After the checkpoint is loaded and opts hold what the run really trains with (its config and training state):
 * every stored value must equal them (LOCAL and DATA fields skipped, and given CHANGEABLE ones). A run.* value
 * that says something else than the run does is refused (an edited or corrupt checkpoint). 0 or -1. */
TFM_API int tfm_run_config_match(const tfm_field *f, int n, const void *opts, const unsigned char *given,
                                 const tfm_run_config *stored, const char *path);

/* ---------------------------------------------------------------- what a run tells its caller */
/* A progress report of a translation run: the loop's report (every log_every steps and at the end of each epoch),
 * or a validation with BLEU (every eval_every steps and after each epoch when valid_src / valid_tgt are given):
 * greedy translations of the raw validation sources scored against the raw references (tfm bleu's metric). */
typedef struct tfm_mt_run_progress {
    const tfm_mt_report *r;  /* the loop's report, or NULL: this is a validation (the fields below) */
    int step, epoch;         /* the validation's step and epoch */
    float valid_loss, bleu;  /* validation loss and corpus BLEU of the greedy translations */
    double chrf;             /* their chrF2 */
    float best_bleu;         /* the best BLEU so far (this one included) and its step */
    int best_step;
    const char *wrote;       /* keep_best: the best checkpoint this validation wrote (OUT.best.tfm), else NULL */
} tfm_mt_run_progress;

/* A progress report of a language-model run: every step and every evaluation (tfm_lm_report), with the mean
 * loss since the previous progress line (the number the CLI and the --log-file print) and, for a BPE model,
 * the losses per character. */
typedef struct {
    const tfm_lm_report *r;
    float mean_loss;         /* mean step loss over n_mean steps since the previous line */
    int n_mean;
    int line;                /* 1: this step is a progress line (every log_every steps, and step 1) */
    float train_per_char, val_per_char;   /* evaluations of a BPE model: the losses per character (else NAN) */
} tfm_lm_progress;

typedef struct {
    /* The lines a run has to say (its shape and data, its configuration, a resume, notes of the loops, files
     * cleaned up), one at a time without the newline. NULL: none. */
    void (*on_message)(const char *line, void *user);
    void (*on_lm_progress)(const tfm_lm_progress *p, void *user);   /* language models; NULL: none */
    const volatile sig_atomic_t *stop;   /* non-zero (a signal number) stops the run at the end of the step
                                            with a checkpoint; NULL: never */
    const unsigned char *given;          /* per field of the options: 1 = set by the caller (a resume then checks
                                            it), 0 = a resume takes the stored value; NULL: none given */
    tfm_dist *dist;                      /* the ranks of mpirun (docs/DISTRIBUTED.md), or NULL: one process */
    void *user;
    void (*on_mt_progress)(const tfm_mt_run_progress *p, void *user);   /* translation; NULL: none */
} tfm_run_hooks;

typedef struct {
    int start_step, step;    /* the run's optimizer step (counted across resumes) at the start and the end */
    int steps;               /* steps this call made (0: nothing to do, already at the end) */
    int saved_step;          /* the step of the last checkpoint this call saved (-1: none) */
    int stopped_by;          /* the *stop value that ended the run early (0: it did not stop early) */
    int log_failed;          /* a --log-file write failed: the run stopped as on a signal (checkpoint saved) */
    int epoch;               /* translation runs: the epoch the next step belongs to */
    double train_s;          /* seconds spent in training steps */
    long tokens;             /* tokens trained on by this call */
    float val_loss;          /* the run's last validation loss (NAN: none measured yet) */
    char log_error[256];     /* log_failed: why */
} tfm_run_result;

/* ---------------------------------------------------------------- language models (src/train/run_lm.c) */
typedef struct {
    const char *data, *out, *resume;
    int n_layer, n_head, n_embd, block_size;
    const char *attention, *tokenizer;
    int vocab_size;
    float dropout;
    int batch_size, grad_accum, iters;
    float lr, min_lr;
    int warmup;
    float weight_decay, beta1, beta2, grad_clip;
    int eval_every, eval_iters;
    float val_frac;
    int seed, threads;
    const char *parallel, *precision;
    int log_every;
    const char *log_file;
    int max_steps, profile, allow_new_data, save_every, keep_last, skip_nonfinite;
    int overwrite;           /* a fresh run (no resume) may replace an existing out and a non-empty log_file; 0:
                                it refuses them before any work (a checkpoint or log of an earlier run) */
} tfm_lm_run_opts;
/* train-lm's defaults: the GPT baby config (4 layers, 4 heads, 128 wide, block 64), nanoGPT's char-level recipe
 * (batch 12, 2000 steps, lr 1e-3 -> 1e-4 cosine after 100 warmup steps, weight decay 0.1, betas 0.9/0.99,
 * clip 1, eval every 500 over 20 batches, 10% validation), seed 1, all CPUs. */
TFM_API void tfm_lm_run_opts_default(tfm_lm_run_opts *o);
/* sizeof(tfm_lm_run_opts), for bindings that set the options by name (tfm_field_parse) without mirroring it. */
TFM_API size_t tfm_lm_run_opts_size(void);
/* The fields of tfm_lm_run_opts, in train-lm's flag order. */
TFM_API const tfm_field *tfm_lm_run_fields(int *n);
/* The whole run: the options checked (errors name the field as a flag, "--lr must be > 0"), every file checked
 * before any work (tfm_check_files), the data read and the model built, or taken from o->resume (whose stored
 * run configuration fills the fields not given and refuses given ones that differ), trained with evaluation
 * and checkpoints to o->out. A fresh run (no resume) refuses, before any work, an existing o->out or a non-empty
 * o->log_file unless o->overwrite (TFM_ERR_ARG naming the path, --resume and --overwrite): an earlier run's
 * checkpoint and log are not replaced by mistake. 0 (see r: it may have stopped early on *hooks->stop), or -1
 * with a tfm error; after a failure during training the message names the last good checkpoint. hooks NULL:
 * silent, never stopped. */
TFM_API int tfm_lm_run(tfm_lm_run_opts *o, const tfm_run_hooks *hooks, tfm_run_result *r);

/* ---------------------------------------------------------------- translation (src/train/run_mt*.c) */
typedef struct {
    const char *tsv, *src, *tgt, *valid_src, *valid_tgt, *out;   /* data: tsv, or src + tgt */
    const char *arch, *preprocess;
    int num_examples, min_freq, max_len, d_model, n_head, n_layer, ffn, pre_ln, embed_size, hidden_size;
    float dropout, label_smoothing;
    const char *loss_norm;
    float lr, min_lr;
    const char *schedule;
    int warmup, batch_size, epochs;
    float grad_clip, weight_decay, beta1, beta2;
    int bucket, seed, threads, log_every, max_steps, save_every, keep_last, allow_new_data, skip_nonfinite, profile;
    const char *resume;
    int d2l_examples;        /* the CLI's: after training, translate d2l's 4 sentences (tfm_mt_run ignores it) */
    const char *dump_data;
    int dump_only;
    const char *tokenizer;
    int vocab_size;
    const char *bpe_model;
    int share_embeddings, pad_to_max_len;
    const char *init;
    int max_tokens, eval_every, keep_best, patience;
    const char *log_file, *parallel, *precision;   /* parallel NULL: auto; precision NULL: fp32 */
    int decode_beam;
    float decode_alpha;
    const char *src_lang, *tgt_lang;
    const char *preset;      /* d2l | multi30k; NULL: multi30k for a bpe transformer, else d2l (stored resolved) */
    int allow_truncation;
    /* regularisers (issue 35; docs/RECIPES.md): the Transformer's attention-weight dropout (-1: --dropout) and FFN
     * activation dropout, BPE-dropout's merge-skip probability (--tokenizer bpe; training segmentation only) and
     * R-Drop's alpha (0: off, one pass per batch) */
    float attention_dropout, activation_dropout, bpe_dropout, rdrop;
    float ema_decay;         /* > 0: an exponential moving average of the weights, written as OUT.ema.tfm at every save */
    int overwrite;           /* as in tfm_lm_run_opts: 0 = a fresh run refuses an existing out or non-empty log_file */
} tfm_mt_run_opts;
/* train-mt's defaults: the d2l book's toy (word tokens, a 2-layer 32-wide Transformer, --max-len 10, constant lr
 * 0.005, batch 64, 10 epochs), seed 1, all CPUs. A preset (o->preset, or the one chosen without it) then sets the
 * fields not given (tfm_run_hooks.given) to its values. */
TFM_API void tfm_mt_run_opts_default(tfm_mt_run_opts *o);
/* sizeof(tfm_mt_run_opts), for bindings that set the options by name (tfm_field_parse) without mirroring it. */
TFM_API size_t tfm_mt_run_opts_size(void);
/* The fields of tfm_mt_run_opts, in train-mt's flag order. */
TFM_API const tfm_field *tfm_mt_run_fields(int *n);
/* train-mt's --help description: what it trains, and the presets. */
TFM_API const char *tfm_mt_run_about(void);
/* The whole translation run, what tfm train-mt does: the preset applied to the fields not given, the options
 * checked (errors name the flag), every file checked before any work, the corpora read (with the run's tokenizer:
 * word vocabularies, or a joint BPE model learned from the pairs or read from bpe_model), the model built or
 * taken from o->resume (whose stored run configuration fills the fields not given and refuses given ones that
 * differ), trained with validation (BLEU, keep_best's OUT.best.tfm, patience) and checkpoints to o->out. As in
 * tfm_lm_run, a fresh run refuses an existing o->out or non-empty o->log_file unless o->overwrite.
 * Progress through hooks->on_mt_progress, lines through on_message. hooks->given NULL: the fields whose value
 * differs from tfm_mt_run_opts_default count as given. 0 (see r: it may have stopped early), or -1 with a tfm
 * error; after a failure during training the message names the last good checkpoint. */
TFM_API int tfm_mt_run(tfm_mt_run_opts *o, const tfm_run_hooks *hooks, tfm_run_result *r);

#endif
