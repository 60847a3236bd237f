/* A whole translation run (include/tfm/run.h, tfm_mt_run), split over src/train/run_mt*.c:
 *   run_mt_opts.c   the fields, defaults, presets and the checks of the options (naming the flag)
 *   run_mt_data.c   corpora, BPE, the model (fresh or resumed), arrays, the truncation guard, --dump-data
 *   run_mt_valid.c  validation with BLEU / chrF, --keep-best, --patience, and the --log-file lines
 *   run_mt.c        the run: resume rules, files, threads, distributed start, the loop and its callbacks */
#ifndef TFM_TRAIN_RUN_MT_H
#define TFM_TRAIN_RUN_MT_H
#include <signal.h>
#include <stdio.h>

#include "tfm/run.h"
#include "tfm/translator.h"

#define MT_MAX_FIELDS 96
#define MT_PE_LEN 1000           /* the positional table of a fresh Transformer: 1000 rows, or --max-len + 1 */
#define MT_TRUNCATION_LIMIT 0.05 /* more than this fraction of the pairs cut to --max-len: an error */

typedef struct {                 /* validation that drives training (run_mt_valid.c) */
    char *buf[2], **src, **ref;  /* the raw validation lines */
    int n;
    char best_path[4200];        /* --keep-best: OUT.best.tfm */
    tfm_early_stop es;
    tfm_graph g;                 /* the validation loss */
    tfm_translator *dec;         /* a view of the model that decodes the validation sources (made at the first
                                    validation, when threads are set; its packed weights refreshed at each) */
} mt_valid;

typedef struct {
    tfm_mt_run_opts *o;
    const tfm_run_hooks *h;
    tfm_run_result *r;
    unsigned char given[MT_MAX_FIELDS];   /* per field: set by the caller */
    tfm_run_config run, stored;
    tfm_mt_model tr;
    tfm_adamw opt;
    tfm_mt_train_opts to;
    tfm_mt_progress prog;
    tfm_parallel_text ptrain, pvalid;
    tfm_mt_corpus atrain, avalid;
    int have_valid, kind;
    int bpe_dropout_said;        /* --bpe-dropout's truncation line was printed */
    tfm_bpe_encoder **bpe_enc;   /* --bpe-dropout: one encoder per thread, reused every epoch */
    int n_bpe_enc;
    int threads_note;            /* a resume took the run's thread count, not this default: say so */        /* validation files given; the tokenizer kind the corpora load with */
    mt_valid val;
    FILE *log;                   /* --log-file (the writing rank only) */
    volatile sig_atomic_t stop;  /* set when a log write failed (the loop also reads the caller's stop) */
    float *ema_swap;             /* --ema-decay: the weights while the average is written (params.total floats) */
} mt_run;

/* run_mt_opts.c */
const tfm_field *mt_fields(int *n);
int mt_field(const char *name);              /* the index of a field (it exists) */
void mt_given(mt_run *x);                    /* x->given from the hooks, else the fields not at their defaults */
int mt_preset_apply(mt_run *x);              /* 0, or -1 (TFM_ERR_ARG) */
int mt_check_options(mt_run *x);             /* every range, naming the flag; fills x->to. 0 or -1 (TFM_ERR_ARG) */
void mt_model_config(const tfm_mt_run_opts *o, tfm_mt_config *cf);
void mt_best_path(const char *out, char *buf, size_t n);
extern const char *const MT_DUMP_SFX[6];

/* run_mt.c */
void mt_say(const mt_run *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int mt_arg_error(void);                      /* the last error as TFM_ERR_ARG: -1 */
void mt_log_failed(mt_run *x);               /* a --log-file write failed (errno): stop as on a signal */

/* run_mt_data.c: each 0, or -1 with the error set */
int mt_load_data(mt_run *x);                 /* corpora, then (fresh) the model and its optimizer, then the arrays */
int mt_resume_model(mt_run *x);              /* the checkpoint's model, optimizer and progress; options matched */
int mt_dump(mt_run *x);                      /* --dump-data PREFIX */
int mt_bpe_dropout_epoch(int epoch, void *user);   /* --bpe-dropout: tfm_mt_train_opts.epoch_data */

/* run_mt_valid.c */
int mt_valid_open(mt_run *x);                /* the raw validation lines; sets x->to.validate */
void mt_valid_close(mt_valid *v);
void mt_on_report(const tfm_mt_report *r, void *user);   /* tfm_mt_report_fn: the hook and the log line */
#endif
