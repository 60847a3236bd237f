/* A whole language-model run (include/tfm/run.h): what tfm train-lm does, as one library call.
 *
 *   options checked -> files checked -> (resume: stored run configuration applied, checkpoint loaded, its values
 *   matched) -> data read (characters, or a BPE model learned from the text) -> model built -> tfm_lm_train with
 *   the log file, the progress hook and the checkpoint callback -> the result, or an error naming the last good
 *   checkpoint. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tfm/kernels.h"
#include "tfm/run.h"
#include "train/run_common.h"

/* ---------------------------------------------------------------- the fields */
#define F(member, flag, TYPE, CLASS, help) {flag, TFM_FIELD_##TYPE, TFM_FIELD_##CLASS, offsetof(tfm_lm_run_opts, member), help},
static const tfm_field LM_FIELDS[] = {
    F(data, "data", STR, DATA, "training text (UTF-8); the last --val-frac is validation")
    F(out, "out", STR, LOCAL, "checkpoint to write (atomically, at every eval and at the end)")
    F(resume, "resume", STR, LOCAL, "continue the run saved in this checkpoint exactly (--out defaults to it)")
    F(n_layer, "n-layer", INT, FIXED, "transformer blocks")
    F(n_head, "n-head", INT, FIXED, "attention heads")
    F(n_embd, "n-embd", INT, FIXED, "embedding width (divisible by n-head)")
    F(block_size, "block-size", INT, FIXED, "context length")
    F(attention, "attention", STR, FIXED, "causal | synthesizer")
    F(tokenizer, "tokenizer", STR, FIXED, "char (one token per character) | bpe (tfm's BPE learned from the training text)")
    F(vocab_size, "vocab-size", INT, FIXED, "with --tokenizer bpe: pieces (>= 260 + the text's characters)")
    F(dropout, "dropout", FLOAT, FIXED, "dropout probability")
    F(batch_size, "batch-size", INT, FIXED, "sequences per micro-batch")
    F(grad_accum, "grad-accum", INT, FIXED, "micro-batches accumulated per step")
    F(iters, "iters", INT, CHANGEABLE, "optimizer steps")
    F(lr, "lr", FLOAT, FIXED, "peak learning rate")
    F(min_lr, "min-lr", FLOAT, FIXED, "final learning rate of the cosine decay")
    F(warmup, "warmup", INT, FIXED, "linear warmup steps")
    F(weight_decay, "weight-decay", FLOAT, FIXED, "AdamW decoupled weight decay (2-D weights only)")
    F(beta1, "beta1", FLOAT, FIXED, "AdamW beta1")
    F(beta2, "beta2", FLOAT, FIXED, "AdamW beta2 (0.99: nanoGPT's char-level recipe; train-mt: 0.999)")
    F(grad_clip, "grad-clip", FLOAT, FIXED, "clip the global gradient norm (0 = off)")
    F(eval_every, "eval-every", INT, FIXED, "evaluate and checkpoint every N steps")
    F(eval_iters, "eval-iters", INT, FIXED, "batches averaged per evaluation")
    F(val_frac, "val-frac", FLOAT, FIXED, "fraction of the text held out for validation")
    F(seed, "seed", INT, FIXED, "random seed (init, batches, dropout)")
    F(threads, "threads", INT, CHANGEABLE, "threads (0 = OMP_NUM_THREADS, else the CPUs tfm may use: affinity, cgroup CPU "
      "quota); stored: a resume uses the run's count unless given (the numbers depend on it)")
    F(parallel, "parallel", STR, CHANGEABLE, "auto | batch (a chunk of the batch per thread) | ops (threads split each "
      "op); stored: a resume uses the run's unless given (the numbers depend on it)")
    F(precision, "precision", STR, FIXED, "fp32 | bf16 (linear layers' GEMMs with bfloat16 operands, fp32 sums)")
    F(log_every, "log-every", INT, LOCAL, "progress line every N steps when stderr is not a terminal (0 = none)")
    F(log_file, "log-file", STR, CHANGEABLE, "write one JSON object per log line (docs/LOGS.md; tfm plot); a resume "
      "appends to it, and to the run's log file unless given")
    F(max_steps, "max-steps", INT, LOCAL, "stop (with a checkpoint) once the run's step reaches N (0 = no limit)")
    F(profile, "profile", BOOL, LOCAL, "at the end, print time per op kind and phase per step")
    F(allow_new_data, "allow-new-data", BOOL, LOCAL, "--resume on a different --data (fine-tuning; logged)")
    F(save_every, "save-every", INT, CHANGEABLE, "also checkpoint every N steps (0 = only at evals and the end)")
    F(keep_last, "keep-last", INT, CHANGEABLE, "keep the last K checkpoints as OUT.step<N>.tfm (0 = none)")
    F(skip_nonfinite, "skip-nonfinite", INT, CHANGEABLE, "skip up to N batches with a non-finite loss/grad")
    F(overwrite, "overwrite", BOOL, LOCAL, "start a new run (no --resume) over an existing --out and a non-empty "
      "--log-file, which are refused without it (default off)")
};
#undef F
#define N_FIELDS ((int)(sizeof LM_FIELDS / sizeof LM_FIELDS[0]))

size_t tfm_lm_run_opts_size(void) { return sizeof(tfm_lm_run_opts); }

const tfm_field *tfm_lm_run_fields(int *n) {
    *n = N_FIELDS;
    return LM_FIELDS;
}

void tfm_lm_run_opts_default(tfm_lm_run_opts *o) {
    memset(o, 0, sizeof *o);
    tfm_lm_train_state st;
    tfm_lm_train_state_default(&st);
    tfm_gpt_config cfg;
    tfm_gpt_config_default(&cfg);
    o->n_layer = cfg.n_layer, o->n_head = cfg.n_head, o->n_embd = cfg.n_embd, o->block_size = cfg.block_size;
    o->attention = "causal", o->tokenizer = "char", o->parallel = "auto", o->precision = "fp32";
    o->batch_size = st.batch_size, o->grad_accum = st.grad_accum, o->iters = st.iters, o->warmup = st.warmup;
    o->lr = st.lr, o->min_lr = st.min_lr, o->weight_decay = st.weight_decay, o->beta1 = st.beta1, o->beta2 = st.beta2;
    o->grad_clip = st.grad_clip, o->eval_every = st.eval_every, o->eval_iters = st.eval_iters, o->seed = st.seed;
    o->val_frac = 0.1f, o->log_every = 50;
}

/* ---------------------------------------------------------------- the run's state */
typedef struct {
    tfm_lm_run_opts *o;
    const tfm_run_hooks *h;
    tfm_run_result *r;
    tfm_gpt m;
    tfm_char_vocab vocab;    /* --tokenizer char */
    tfm_bpe *bpe;            /* --tokenizer bpe: learned from the text, or the checkpoint's */
    tfm_adamw opt;
    tfm_lm_data d;
    tfm_gpt_config cfg;
    tfm_lm_train_state st;
    tfm_train_ctl ctl;
    tfm_run_config run, stored;
    FILE *log;
    double log_loss;         /* the step losses since the last progress line */
    int log_n;
    volatile sig_atomic_t stop;   /* set when a log write failed (the loop also reads the caller's stop) */
    int threads_note;        /* a resume runs the run's thread count, not this machine's default (this) */
} lm_run;

static void say(const lm_run *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(const lm_run *x, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    tfm_run_vsay(x->h, fmt, ap);
    va_end(ap);
}

static void note(const char *line, void *user) { say(user, "%s", line); }

static int arg_error(void) { return tfm_run_arg_error(); }   /* an invalid option: the CLI's usage error */

/* tfm_lm_train_state_check names the checkpoint field ("train.batch_size must be ..."); here, name the flag */
static int state_error(void) {
    const char *e = tfm_last_error();
    if (strncmp(e, "train.", 6)) return arg_error();
    char name[64], msg[600];
    size_t k = strcspn(e + 6, " ");
    snprintf(name, sizeof name, "%.*s", (int)(k < sizeof name ? k : sizeof name - 1), e + 6);
    for (char *p = name; *p; p++) *p = *p == '_' ? '-' : *p;
    const char *rest = e + 6 + k, *cfg = strstr(rest, "config.block_size");   /* its flag: --block-size */
    if (cfg) snprintf(msg, sizeof msg, "--%s%.*s--block-size%s", name, (int)(cfg - rest), rest, cfg + 17);
    else snprintf(msg, sizeof msg, "--%s%s", name, rest);
    return tfm_set_error_kind(TFM_ERR_ARG, "%s", msg), -1;
}

/* The options into the loop's structs; each range checked, naming the flag. */
static int check_options(lm_run *x) {
    tfm_lm_run_opts *o = x->o;
    tfm_lm_train_state *s = &x->st;
    tfm_lm_train_state_default(s);
    s->iters = o->iters, s->batch_size = o->batch_size, s->grad_accum = o->grad_accum, s->warmup = o->warmup;
    s->eval_every = o->eval_every, s->eval_iters = o->eval_iters, s->seed = o->seed, s->lr = o->lr;
    s->min_lr = o->min_lr, s->weight_decay = o->weight_decay, s->beta1 = o->beta1, s->beta2 = o->beta2;
    s->grad_clip = o->grad_clip;
    tfm_lm_train_state_init(s);
    x->cfg = (tfm_gpt_config){.block_size = o->block_size, .n_layer = o->n_layer, .n_head = o->n_head,
                              .n_embd = o->n_embd, .dropout = o->dropout, .attention = TFM_ATTN_CAUSAL};
#define BAD(...) return tfm_set_error_kind(TFM_ERR_ARG, __VA_ARGS__), -1
    if (!o->data) BAD("--data FILE is required");
    if (!o->out) BAD("--out MODEL.tfm (or --resume MODEL.tfm) is required");
    if (tfm_lm_train_state_check(s, &x->cfg)) return state_error();   /* the loader's bounds: one set for both */
    if (o->log_every < 0) BAD("--log-every must be >= 0, got %d", o->log_every);
    if (o->max_steps < 0) BAD("--max-steps must be >= 0 (0 = no limit), got %d", o->max_steps);
    if (o->save_every < 0 || o->keep_last < 0 || o->skip_nonfinite < 0)
        BAD("--save-every, --keep-last and --skip-nonfinite must be >= 0");
    if (o->threads < 0 || o->threads > TFM_MAX_THREADS)
        BAD("--threads must be in 0..%d (0 = OMP_NUM_THREADS, else the CPUs tfm may use), got %d", TFM_MAX_THREADS,
            o->threads);
    if (!(o->val_frac > 0 && o->val_frac < 1)) BAD("--val-frac must be in (0,1), got %g", o->val_frac);
    if (!o->attention || (strcmp(o->attention, "causal") && strcmp(o->attention, "synthesizer")))
        BAD("--attention must be causal or synthesizer, got '%s'", o->attention ? o->attention : "");
    if (!o->tokenizer || (strcmp(o->tokenizer, "char") && strcmp(o->tokenizer, "bpe")))
        BAD("--tokenizer: unknown '%s' (char, bpe)", o->tokenizer ? o->tokenizer : "");
    if (o->vocab_size && strcmp(o->tokenizer, "bpe")) BAD("--vocab-size needs --tokenizer bpe");
    if (o->vocab_size < 0 || o->vocab_size > 1000000) BAD("--vocab-size must be in 1..1000000, got %d", o->vocab_size);
    static const char *par[] = {"auto", "ops", "batch"};   /* in tfm_parallel order */
    int p = 0;
    while (p < 3 && (!o->parallel || strcmp(o->parallel, par[p]))) p++;
    if (p == 3) BAD("--parallel must be auto, batch or ops, got '%s'", o->parallel ? o->parallel : "");
    if (!o->precision || (strcmp(o->precision, "fp32") && strcmp(o->precision, "bf16")))
        BAD("--precision must be fp32 or bf16, got '%s'", o->precision ? o->precision : "");
#undef BAD
    x->cfg.attention = strcmp(o->attention, "synthesizer") ? TFM_ATTN_CAUSAL : TFM_ATTN_SYNTHESIZER;
    x->ctl.parallel = p, x->ctl.bf16 = o->precision[0] == 'b', x->ctl.save_every = o->save_every;
    x->ctl.skip_nonfinite = o->skip_nonfinite;
    return 0;
}

/* ---------------------------------------------------------------- model and data */
static int learn_bpe(lm_run *x) {
    tfm_lm_run_opts *o = x->o;
    if (o->vocab_size < 1)
        return tfm_set_error_kind(TFM_ERR_ARG, "--tokenizer bpe needs --vocab-size N (e.g. 512: 260 + the characters "
                                  "+ merges)"), -1;
    if (!(x->bpe = calloc(1, sizeof *x->bpe))) return tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory"), -1;
    int learned = !tfm_lm_bpe_learn(x->bpe, o->data, 1.0f - o->val_frac, o->vocab_size);
    if (!learned || tfm_lm_data_load_bpe(&x->d, o->data, x->bpe, 1.0f - o->val_frac, x->cfg.block_size)) {
        if (!learned && tfm_last_error_kind() == TFM_ERR_OTHER) arg_error();   /* a --vocab-size the text cannot give */
        tfm_bpe_free(x->bpe), free(x->bpe), x->bpe = NULL;
        return -1;
    }
    say(x, "learned a BPE model of %d pieces from %s: %.3f pieces per character (train), %d train / %d validation "
        "pieces", x->bpe->n, o->data, (double)x->d.n_train / (double)x->d.chars_train, x->d.n_train, x->d.n - x->d.n_train);
    return 0;
}

/* The text as tokens: with the resumed model's tokenizer, else the options' (characters, or BPE learned here). */
static int load_data(lm_run *x) {
    float frac = 1.0f - x->o->val_frac;
    if (x->bpe) return tfm_lm_data_load_bpe(&x->d, x->o->data, x->bpe, frac, x->cfg.block_size);
    if (!x->vocab.n && !strcmp(x->o->tokenizer, "bpe")) return learn_bpe(x);
    return tfm_lm_data_load(&x->d, x->o->data, x->vocab.n ? x->vocab.chars : NULL, frac, x->cfg.block_size);
}

/* --resume: the checkpoint's model and state; the options then hold what it trains with (one source of truth),
 * which every stored run.* value must equal */
static int resume_model(lm_run *x) {
    tfm_lm_run_opts *o = x->o;
    int iters = x->st.iters, f_iters = tfm_field_find(LM_FIELDS, N_FIELDS, "iters");
    if (tfm_gpt_load_tok(&x->m, &x->vocab, &x->bpe, &x->opt, &x->st, o->resume)) return tfm_prefix_error("--resume: ");
    if (x->h && x->h->given && x->h->given[f_iters]) x->st.iters = iters;
    x->cfg = x->m.cfg;
    o->n_layer = x->cfg.n_layer, o->n_head = x->cfg.n_head, o->n_embd = x->cfg.n_embd;
    o->block_size = x->cfg.block_size, o->dropout = x->cfg.dropout;
    o->attention = x->cfg.attention == TFM_ATTN_SYNTHESIZER ? "synthesizer" : "causal";
    tfm_lm_train_state *s = &x->st;
    o->iters = s->iters, o->batch_size = s->batch_size, o->grad_accum = s->grad_accum, o->warmup = s->warmup;
    o->eval_every = s->eval_every, o->eval_iters = s->eval_iters, o->seed = s->seed, o->lr = s->lr, o->min_lr = s->min_lr;
    o->weight_decay = s->weight_decay, o->beta1 = s->beta1, o->beta2 = s->beta2, o->grad_clip = s->grad_clip;
    if (tfm_run_config_match(LM_FIELDS, N_FIELDS, o, x->h ? x->h->given : NULL, &x->stored, o->resume)) return arg_error();
    if (load_data(x)) return -1;
    say(x, "resuming %s at step %d of %d", o->resume, s->iter, s->iters);
    if (x->threads_note)
        say(x, "--threads %d: the run's thread count (this machine's default is %d; the numbers depend on it, give "
            "--threads N to change it)", o->threads, x->threads_note);
    return 0;
}

static int build_model(lm_run *x) {
    if (load_data(x)) return -1;
    x->cfg.vocab_size = x->bpe ? x->bpe->n : x->d.vocab.n;
    if (tfm_gpt_init(&x->m, &x->cfg)) return arg_error();   /* a bad config: the options' */
    tfm_gpt_init_weights(&x->m, (uint64_t)x->st.seed);
    if ((!x->bpe && tfm_char_vocab_from_string(&x->vocab, x->d.vocab.chars)) ||
        tfm_adamw_init(&x->opt, &x->m.params, x->st.beta1, x->st.beta2, 1e-8f, x->st.weight_decay))
        return -1;
    return 0;
}

/* ---------------------------------------------------------------- the loop's callbacks */
static void log_failed(lm_run *x) {   /* right after the failed write (errno) */
    if (x->r->log_failed) return;
    snprintf(x->r->log_error, sizeof x->r->log_error, "--log-file %s: write failed (%s)", x->o->log_file,
             strerror(errno ? errno : EIO));
    x->r->log_failed = 1;
    x->stop = 1;
}

static void on_report(const tfm_lm_report *r, void *user) {
    lm_run *x = user;
    tfm_lm_progress p = {r, NAN, 0, 0, NAN, NAN};
    x->r->train_s = r->train_s;
    if (r->eval) {
        if (tfm_lm_log_report(x->log, r, r->train_loss)) log_failed(x);
        if (x->bpe) {   /* loss per character = loss per piece * pieces / characters */
            p.train_per_char = (float)(r->train_loss * x->d.n_train / (double)x->d.chars_train);
            p.val_per_char = (float)(r->val_loss * (x->d.n - x->d.n_train) / (double)x->d.chars_val);
        }
    } else {   /* the console and the --log-file say the same loss: the mean since the previous line */
        x->log_loss += r->loss, x->log_n++;
        p.line = (x->o->log_every > 0 && r->step % x->o->log_every == 0) || r->step == 1;
        p.mean_loss = (float)(x->log_loss / x->log_n), p.n_mean = x->log_n;
        if (p.line && tfm_lm_log_report(x->log, r, p.mean_loss)) log_failed(x);
        if (p.line) x->log_loss = 0, x->log_n = 0;
    }
    if (x->h && x->h->on_lm_progress) x->h->on_lm_progress(&p, x->h->user);
}

static int on_save(const tfm_lm_train_state *st, void *user) {
    lm_run *x = user;
    if (tfm_gpt_save_tok(&x->m, &x->vocab, x->bpe, &x->opt, st, &x->run, x->o->out)) return -1;
    x->r->saved_step = st->iter;
    return x->o->keep_last > 0 ? tfm_ckpt_keep_step(x->o->out, st->iter, x->o->keep_last) : 0;
}

/* ---------------------------------------------------------------- the run */
static void say_start(lm_run *x) {
    const tfm_gpt_config *c = &x->m.cfg;
    char par[96], gemm[128], line[4096];
    int slice = x->st.batch_size / (x->h && x->h->dist ? tfm_dist_size(x->h->dist) : 1);
    say(x, "gpt: %d layers, %d heads, %d wide, block %d, vocab %d (%s), %s attention: %zu parameters", c->n_layer,
        c->n_head, c->n_embd, c->block_size, c->vocab_size, x->bpe ? "BPE pieces" : "characters",
        c->attention == TFM_ATTN_SYNTHESIZER ? "synthesizer" : "causal", x->m.params.total);
    say(x, "data: %s: %d train / %d validation tokens; %s; gemm %s", x->o->data, x->d.n_train, x->d.n - x->d.n_train,
        tfm_run_threads_str(par, sizeof par, x->ctl.parallel, slice), tfm_run_gemm_str(gemm, sizeof gemm, x->ctl.bf16));
    tfm_run_config_line(&x->run, "train-lm", line, sizeof line);
    say(x, "%s", line);
    int n = tfm_ckpt_remove_stale_tmp(x->o->out);
    if (n > 0) say(x, "tfm train-lm: removed %d stale %s.tmp.* file%s of an interrupted save", n, x->o->out, n == 1 ? "" : "s");
}

/* The thread count is part of the run (the numbers depend on it): 0 stored as the count it means here; a resume
 * that takes the run's count says so when it is not this machine's default. */
static void resolve_threads(lm_run *x) {
    int f = tfm_field_find(LM_FIELDS, N_FIELDS, "threads");
    x->threads_note = tfm_run_resolve_threads(&x->o->threads, x->h && x->h->given && x->h->given[f], x->o->resume,
                                              &x->stored);
}

/* The resume's stored run configuration applied to the options not given, and the files checked. */
static int prepare(lm_run *x) {
    tfm_lm_run_opts *o = x->o;
    char kind[32];
    if (o->resume && !tfm_checkpoint_kind(o->resume, kind, sizeof kind) && strcmp(kind, "gpt"))
        return tfm_set_error_kind(TFM_ERR_ARG, "--resume %s: is %s, not a language model%s", o->resume,
                                  tfm_checkpoint_kind_desc(kind), strcmp(kind, "seq2seq") ? "" :
                                  ": continue it with tfm train-mt --resume"), -1;
    if (o->resume && tfm_run_config_load(&x->stored, o->resume)) return tfm_prefix_error("--resume: ");
    int new_data = -1;
    if (o->resume && tfm_run_config_resume(LM_FIELDS, N_FIELDS, o, x->h ? x->h->given : NULL, &x->stored,
                                           o->allow_new_data, o->resume, &new_data))
        return tfm_last_error_kind() == TFM_ERR_OTHER ? arg_error() : -1;
    char now[128] = "", was[128] = "";
    if (new_data >= 0 && !tfm_file_fingerprint(o->data, now, sizeof now))   /* said once, with both contents */
        snprintf(was, sizeof was, "%s", tfm_run_config_find(&x->stored, "data:data"));
    if (new_data >= 0) say(x, "tfm train-lm: --allow-new-data: --data %s (%s) replaces the run's data (%s)", o->data, now, was);
    if (!o->out && o->resume) o->out = o->resume;
    if (check_options(x)) return -1;
    resolve_threads(x);
    tfm_file_use files[] = {{"--data", o->data, TFM_FILE_IN}, {"--resume", o->resume, TFM_FILE_IN_PLACE},
                            {"--out", o->out, TFM_FILE_OUT}, {"--log-file", o->log_file, TFM_FILE_OUT_STREAM}};
    if (tfm_check_files(files, 4)) return tfm_last_error_kind() == TFM_ERR_IO ? -1 : arg_error();
    if (!o->resume && !o->overwrite && tfm_run_check_fresh("gpt", o->out, o->log_file)) return -1;
    return tfm_run_config_from(LM_FIELDS, N_FIELDS, o, &x->run);
}

static int train(lm_run *x) {
    tfm_dist *dist = x->h ? x->h->dist : NULL;
    int writer = !dist || tfm_dist_is_writer(dist);
    if (dist && tfm_dist_size(dist) > 1) {
        int start, count;
        if (tfm_dist_slice(dist, x->st.batch_size, &start, &count) || tfm_train_dist_start(dist, &x->run, x->st.iter,
                                                                                         &x->m.params, &x->opt))
            return arg_error();
    }
    say_start(x);
    if (x->o->log_file && writer && !(x->log = fopen(x->o->log_file, x->o->resume ? "a" : "w")))
        return tfm_set_error_kind(TFM_ERR_IO, "--log-file: cannot write %s", x->o->log_file), -1;
    x->ctl.stop = x->h ? x->h->stop : NULL, x->ctl.stop_self = &x->stop, x->ctl.dist = dist;
    x->ctl.note = note, x->ctl.note_user = x;
    x->r->start_step = x->r->step = x->st.iter;
    int steps = tfm_lm_train(&x->m, &x->d, &x->opt, &x->st, x->o->max_steps, x->o->profile, &x->ctl, on_report,
                             on_save, x);
    x->r->step = x->st.iter;
    x->r->val_loss = x->st.last_val_loss;
    errno = 0;
    if (x->log && fclose(x->log) && !x->r->log_failed) log_failed(x);
    x->log = NULL;
    if (steps < 0) return tfm_run_last_good_error(x->r, x->o->out, x->o->resume);
    x->r->steps = steps;
    x->r->stopped_by = x->r->log_failed || !x->h || !x->h->stop ? 0 : *x->h->stop;
    x->r->tokens = (long)steps * x->st.batch_size * x->m.cfg.block_size * x->st.grad_accum;
    return 0;
}

int tfm_lm_run(tfm_lm_run_opts *o, const tfm_run_hooks *hooks, tfm_run_result *r) {
    lm_run x;
    memset(&x, 0, sizeof x);
    memset(r, 0, sizeof *r);
    r->saved_step = -1, r->val_loss = NAN;
    x.o = o, x.h = hooks, x.r = r;
    int saved_threads = tfm_get_threads(), rc = prepare(&x);
    if (!rc) {
        tfm_set_threads(o->threads);
        rc = (o->resume ? resume_model(&x) : build_model(&x)) || train(&x) ? -1 : 0;
    }
    tfm_set_threads(saved_threads);
    if (x.log) fclose(x.log);
    tfm_adamw_free(&x.opt);
    tfm_gpt_free(&x.m);
    tfm_char_vocab_free(&x.vocab);
    if (x.bpe) tfm_bpe_free(x.bpe), free(x.bpe);
    tfm_lm_data_free(&x.d);
    tfm_run_config_free(&x.run);
    tfm_run_config_free(&x.stored);
    return rc;
}
