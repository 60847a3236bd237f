/* A whole translation run (include/tfm/run.h): what tfm train-mt does, as one library call.
 *
 *   preset -> (resume: stored run configuration applied) -> options and files checked -> threads -> (resume:
 *   checkpoint loaded, its values matched) -> corpora, model (fresh), arrays -> --dump-data -> ranks in step ->
 *   validation and log opened -> tfm_mt_train with the progress hook and the checkpoint callback -> the result,
 *   or an error naming the last good checkpoint. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "tfm/kernels.h"
#include "train/run_common.h"
#include "train/run_mt.h"

static int is_writer(const mt_run *x) { return !x->h || !x->h->dist || tfm_dist_is_writer(x->h->dist); }

void mt_say(const mt_run *x, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    tfm_run_vsay(x->h, fmt, ap);
    va_end(ap);
}

static void note(const char *line, void *user) { mt_say(user, "%s", line); }

int mt_arg_error(void) { return tfm_run_arg_error(); }

void mt_log_failed(mt_run *x) {   /* right after the failed write (errno) */
    if (x->r->log_failed) return;
    snprintf(x->r->log_error, sizeof x->r->log_error, "--log-file %s: write failed (%s)", x->o->log_file,
             strerror(errno ? errno : EIO));
    x->r->log_failed = 1;
    x->stop = 1;
}

/* ---------------------------------------------------------------- before any work */
/* --allow-new-data: each data file whose contents are not the run's, said with both fingerprints */
static void say_new_data(mt_run *x) {
    int n;
    const tfm_field *f = mt_fields(&n);
    char key[96], now[128];
    for (int i = 0; i < n; i++) {
        const char *path = f[i].cls == TFM_FIELD_DATA ? *(const char **)((char *)x->o + f[i].offset) : NULL, *fp;
        snprintf(key, sizeof key, "data:%s", f[i].name);
        if (!path || !(fp = tfm_run_config_find(&x->stored, key)) || tfm_file_fingerprint(path, now, sizeof now) ||
            !strcmp(now, fp))
            continue;
        mt_say(x, "tfm train-mt: --allow-new-data: --%s %s (%s) replaces the run's data (%s)", f[i].name, path, now, fp);
    }
}

/* --resume: the stored run configuration into the options not given (--out defaults to the checkpoint) */
static int resume_config(mt_run *x) {
    tfm_mt_run_opts *o = x->o;
    char kind[32];
    if (!tfm_checkpoint_kind(o->resume, kind, sizeof kind) && strcmp(kind, "seq2seq")) {
        if (!strcmp(kind, "gpt"))
            return tfm_set_error_kind(TFM_ERR_ARG, "--resume %s: is %s, not a translation model: continue it with tfm "
                                      "train-lm --resume", o->resume, tfm_checkpoint_kind_desc(kind)), -1;
        return tfm_set_error_kind(TFM_ERR_ARG, "--resume %s: is %s", o->resume, tfm_checkpoint_kind_desc(kind)), -1;
    }
    if (tfm_run_config_load(&x->stored, o->resume)) return tfm_prefix_error("--resume: ");
    if (!o->out) o->out = o->resume;
    int n, new_data;
    const tfm_field *f = mt_fields(&n);
    if (tfm_run_config_resume(f, n, o, x->given, &x->stored, o->allow_new_data, o->resume, &new_data))
        return tfm_last_error_kind() == TFM_ERR_OTHER ? mt_arg_error() : -1;
    if (new_data >= 0) say_new_data(x);
    return 0;
}

/* The thread count is part of the run (the numbers depend on it): 0 stored as the count it means here; a resume
 * that takes the run's count says so when it is not this machine's default. */
static void set_threads(mt_run *x) {   /* said with the start-up lines */
    x->threads_note = tfm_run_resolve_threads(&x->o->threads, x->given[mt_field("threads")], x->o->resume, &x->stored);
}

static int prepare(mt_run *x) {
    mt_given(x);
    if (mt_preset_apply(x) || (x->o->resume && resume_config(x)) || mt_check_options(x)) return -1;
    set_threads(x);
    int n;
    const tfm_field *f = mt_fields(&n);
    return tfm_run_config_from(f, n, x->o, &x->run);
}

/* ---------------------------------------------------------------- the loop */
/* --ema-decay: OUT.ema.tfm beside OUT */
static int save_ema(mt_run *x, int step) {
    char path[4200], what[160];
    tfm_ckpt_sibling(x->o->out, ".ema.tfm", path, sizeof path);
    snprintf(what, sizeof what, "exponential moving average of the weights, decay %g, at step %d", x->opt.ema_decay,
             step);
    return tfm_mt_save_weights(&x->tr, x->opt.ema, x->ema_swap, what, path);
}

static int on_save(const tfm_mt_progress *p, void *user) {   /* after every epoch, every --save-every, at a stop */
    mt_run *x = user;
    if (tfm_mt_save_run(&x->tr, &x->opt, p, &x->to, &x->run, x->o->out)) return -1;
    if (x->opt.ema && save_ema(x, p->step)) return -1;
    x->r->saved_step = p->step;
    return x->o->keep_last > 0 ? tfm_ckpt_keep_step(x->o->out, p->step, x->o->keep_last) : 0;
}

/* The start-up lines: data, vocabularies, parameters, threads, GEMM path, where a resume starts, the run's
 * configuration, stale temporary files removed. */
static void say_start(mt_run *x) {
    const tfm_mt_run_opts *o = x->o;
    char par[96], gemm[96], line[4096];
    mt_say(x, "%s: %d pairs (%d lines read), vocab %d src / %d tgt, %zu parameters (%s), %s, gemm %s",
           o->tsv ? o->tsv : o->src, x->atrain.n, x->ptrain.n_lines, x->tr.src_vocab.n, x->tr.tgt_vocab.n,
           x->tr.model->params.total, x->tr.model->cfg.arch, tfm_run_threads_str(par, sizeof par, x->to.ctl.parallel,
           x->atrain.n), tfm_run_gemm_str(gemm, sizeof gemm, x->to.ctl.bf16));
    if (o->resume)   /* epochs as the progress lines count them: the one the next step belongs to */
        mt_say(x, "resuming %s at step %d (epoch %d, %s)", o->resume, x->prog.step, x->prog.epoch + 1,
               x->prog.batch > 0 ? "inside it" : "from its start");
    if (x->threads_note)
        mt_say(x, "--threads %d: the run's thread count (this machine's default is %d; the numbers depend on it, give "
               "--threads N to change it)", o->threads, x->threads_note);
    tfm_run_config_line(&x->run, "train-mt", line, sizeof line);
    mt_say(x, "%s", line);
    if (x->opt.ema) {
        char path[4200];
        tfm_ckpt_sibling(o->out, ".ema.tfm", path, sizeof path);
        mt_say(x, "--ema-decay %g: the weights' moving average goes to %s at every checkpoint", x->opt.ema_decay, path);
    }
    int n = tfm_ckpt_remove_stale_tmp(o->out);
    if (n > 0) mt_say(x, "tfm train-mt: removed %d stale %s.tmp.* file%s of an interrupted save", n, o->out, n == 1 ? "" : "s");
}


static int train(mt_run *x) {
    tfm_mt_run_opts *o = x->o;
    tfm_dist *dist = x->h ? x->h->dist : NULL;
    if (dist && tfm_dist_size(dist) > 1 &&
        tfm_train_dist_start(dist, &x->run, x->prog.step, &x->tr.model->params, &x->opt))
        return mt_arg_error();
    say_start(x);
    if (o->log_file && is_writer(x) && !(x->log = fopen(o->log_file, o->resume ? "a" : "w")))
        return tfm_set_error_kind(TFM_ERR_IO, "--log-file: cannot write %s", o->log_file), -1;
    if (mt_valid_open(x)) return -1;
    if (x->opt.ema && !(x->ema_swap = malloc(x->tr.model->params.total * sizeof(float) + 1)))
        return tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory (--ema-decay)"), -1;
    x->to.ctl.stop = x->h ? x->h->stop : NULL, x->to.ctl.stop_self = &x->stop, x->to.ctl.dist = dist;
    x->to.ctl.note = note, x->to.ctl.note_user = x;
    if (o->bpe_dropout > 0) x->to.epoch_data = mt_bpe_dropout_epoch;   /* exact BPE for validation and translation */
    x->r->start_step = x->r->step = x->prog.step;
    if (x->prog.epoch >= o->epochs || (o->max_steps > 0 && x->prog.step >= o->max_steps)) {
        mt_say(x, "%s is at epoch %d, step %d (--epochs %d, --max-steps %d): nothing to do", o->resume ? o->resume : o->out,
               x->prog.epoch, x->prog.step, o->epochs, o->max_steps);
        return 0;
    }
    double t0 = tfm_now();
    int rc = tfm_mt_train(x->tr.model, &x->atrain, x->have_valid ? &x->avalid : NULL, &x->to, &x->opt, &x->prog,
                          mt_on_report, on_save, x);
    x->r->train_s = tfm_now() - t0;   /* the loop's time, its validations and checkpoints included */
    x->r->step = x->prog.step;
    x->r->epoch = x->prog.batch > 0 ? x->prog.epoch + 1 : x->prog.epoch;
    errno = 0;
    if (x->log && fclose(x->log) && !x->r->log_failed) mt_log_failed(x);
    x->log = NULL;
    if (rc) return tfm_run_last_good_error(x->r, x->o->out, x->o->resume);
    x->r->steps = x->prog.step - x->r->start_step;
    x->r->stopped_by = x->r->log_failed || !x->h || !x->h->stop ? 0 : *x->h->stop;
    return 0;
}

static int run(mt_run *x) {
    if (x->o->resume && mt_resume_model(x)) return -1;
    if (mt_load_data(x)) return -1;
    if (x->o->dump_data && (mt_dump(x) || x->o->dump_only)) return x->o->dump_only ? 0 : -1;
    return train(x);
}

int tfm_mt_run(tfm_mt_run_opts *o, const tfm_run_hooks *hooks, tfm_run_result *r) {
    mt_run *x = calloc(1, sizeof *x);
    memset(r, 0, sizeof *r);
    r->saved_step = -1, r->val_loss = NAN;
    if (!x) return tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory"), -1;
    x->o = o, x->h = hooks, x->r = r;
    int saved_threads = tfm_get_threads(), rc = prepare(x);
    if (!rc) {
        tfm_set_threads(o->threads);
        tfm_mt_progress_init(&x->prog, x->to.seed);
        rc = run(x);
    }
    tfm_set_threads(saved_threads);
    if (x->log) fclose(x->log);
    mt_valid_close(&x->val);
    for (int i = 0; x->bpe_enc && i < x->n_bpe_enc; i++) tfm_bpe_encoder_free(x->bpe_enc[i]);
    free(x->bpe_enc);
    tfm_mt_corpus_free(&x->atrain);
    tfm_mt_corpus_free(&x->avalid);
    tfm_parallel_text_free(&x->ptrain);
    tfm_parallel_text_free(&x->pvalid);
    if (x->opt.m) tfm_adamw_free(&x->opt);
    free(x->ema_swap);
    tfm_mt_model_free(&x->tr);
    tfm_run_config_free(&x->run);
    tfm_run_config_free(&x->stored);
    free(x);
    return rc;
}
