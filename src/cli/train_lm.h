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
    int saved_step;              /* the step of the last checkpoint this run saved; -1: none yet */
} lm_run;

void lm_report(const tfm_lm_report *r, void *user);
int lm_save(const tfm_lm_train_state *st, void *user);
/* Range checks of every numeric flag, naming it (printed; returns 2). */
int lm_validate(const tfm_lm_train_state *s, const tfm_gpt_config *cfg, int threads, float val_frac,
                const char *attention, int log_every, int max_steps, const tfm_train_ctl *ctl, int keep_last);
#endif
