/* tfm train-lm's callbacks and flag checks (src/cli/train_lm_flags.c); the command: cmd_train_lm.c. */
#ifndef TFM_CLI_TRAIN_LM_H
#define TFM_CLI_TRAIN_LM_H
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

void lm_report(const tfm_lm_report *r, void *user);
int lm_save(const tfm_lm_train_state *st, void *user);
/* Range checks of every numeric flag, naming it (printed; returns 2). */
int lm_validate(const tfm_lm_train_state *s, int threads, float val_frac, const char *attention, int log_every, int max_steps,
                const tfm_train_ctl *ctl, int keep_last);
#endif
