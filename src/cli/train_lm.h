/* tfm train-lm's callbacks and flag checks (src/cli/train_lm_flags.c); the command: cmd_train_lm.c. */
#ifndef TFM_CLI_TRAIN_LM_H
#define TFM_CLI_TRAIN_LM_H
#include "cli/cli.h"
#include "tfm/train.h"

typedef struct {   /* what the report and save callbacks need */
    const char *out; const tfm_gpt *m; const tfm_char_vocab *vocab; const tfm_adamw *opt;
    int tty, log_every;
    float loss_ema;
    double train_s;
    int keep_last;           /* --keep-last K: OUT.step<N>.tfm copies */
    const tfm_run_config *run;   /* stored as run.* in every checkpoint */
    FILE *log;                   /* --log-file (NULL: none) */
    double log_loss;             /* sum of the step losses since the last log-file line */
    int log_n;
    int saved_step;              /* the step of the last checkpoint this run saved; -1: none yet */
    const char *log_path;        /* --log-file, for messages */
    const tfm_bpe *bpe;          /* --tokenizer bpe (saved with the model), else NULL */
    const tfm_lm_data *d;        /* the corpus: its tokens per character turn a loss per piece into one per character */
} lm_run;
/* The corpus: through the checkpoint's tokenizer on --resume (vocab filled or *bpe set), else a BPE model
 * learned from it (--tokenizer bpe) or its characters. 0, or the exit status after a one-line error. */
int lm_load_data(const char *data, const char *tokenizer, int vocab_size, float val_frac, int block_size,
                 const tfm_char_vocab *vocab, tfm_bpe **bpe, tfm_lm_data *d);
void lm_free(tfm_gpt *m, tfm_adamw *opt, tfm_char_vocab *vocab, tfm_bpe *bpe, tfm_lm_data *d);
/* --tokenizer bpe: a BPE model of vocab_size pieces learned from the train part of data (printed), and the
 * corpus encoded with it. 0, or the exit status after a one-line error. */
int lm_check_tokenizer(const char *tokenizer, int vocab_size);   /* --tokenizer / --vocab-size: 0 or 2 (printed) */
int lm_learn_bpe(const char *data, float val_frac, int vocab_size, int block_size, tfm_bpe **bpe, tfm_lm_data *d);

/* flags not stored in the run configuration, and stored flags a --resume may change (the rest must match) */
#define LM_SAFE " out resume threads parallel max-steps log-every log-file profile allow-new-data "
#define LM_CHANGEABLE " iters save-every keep-last skip-nonfinite "

typedef struct {   /* what the run trains (all zero: nothing allocated) */
    tfm_gpt m;
    tfm_char_vocab vocab;    /* --tokenizer char */
    tfm_bpe *bpe;            /* --tokenizer bpe: learned from the text, or the checkpoint's (else NULL) */
    tfm_adamw opt;
    tfm_lm_data d;
} lm_model;
/* The model, vocabulary, optimizer and data (train_lm_setup.c): loaded from --resume, after which the flags
 * (cfg, attention, st) hold the values the checkpoint trains with and every stored run.* value must equal them
 * (cli_run_config_match); or built from the flags. 0, or the exit status (printed); mo is freed by lm_model_free
 * either way. */
int lm_setup(const cli_spec *spec, const tfm_run_config *stored, const char *resume, const char *data,
             const char *tokenizer, int vocab_size, float val_frac, tfm_gpt_config *cfg, const char **attention,
             tfm_lm_train_state *st, int quiet, lm_model *mo);
void lm_model_free(lm_model *mo);
/* The start-up lines: model shape, data, threads, GEMM path. */
void lm_print_start(const lm_model *mo, const char *data, const tfm_train_ctl *ctl, int slice);

void lm_report(const tfm_lm_report *r, void *user);
int lm_save(const tfm_lm_train_state *st, void *user);
/* Range checks of every numeric flag, naming it (printed; returns 2). */
int lm_validate(const tfm_lm_train_state *s, const tfm_gpt_config *cfg, int threads, float val_frac,
                const char *attention, int log_every, int max_steps, const tfm_train_ctl *ctl, int keep_last);
#endif
