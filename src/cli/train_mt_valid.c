/* train-mt: validation that drives training. After each epoch (and every --eval-every steps): validation
 * loss, greedy BLEU (and chrF2) of the raw validation sources against the raw references (tfm bleu's metric), a best
 * checkpoint (--keep-best: MODEL.best.tfm, weights and tokenizer, written atomically), --patience, and the
 * JSON-lines log (--log-file). The keep-best / patience rule: tfm_early_stop_update (src/train/validate.c). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli/train_mt.h"
#include "cli/train_run.h"
#include "tfm/decode.h"
#include "tfm/eval.h"

#define C "train-mt"

int mt_check_valid(const mt_opts *o) {
    if (o->valid_every < 0) return cli_error(C, "--eval-every must be >= 0, got %d", o->valid_every);
    if (o->patience < 0) return cli_error(C, "--patience must be >= 0, got %d", o->patience);
    if (!o->valid_src && (o->keep_best || o->patience || o->valid_every))
        return cli_error(C, "--%s needs --valid-src and --valid-tgt",
                         o->keep_best ? "keep-best" : o->patience ? "patience" : "eval-every");
    return 0;
}

static char **read_lines(const char *path, char **buf, int *n) {
    size_t len;
    if (!(*buf = tfm_read_text_file(path, &len))) return NULL;
    char **l = tfm_split_lines(*buf, len, n);
    if (!l) tfm_set_error("%s: out of memory", path);
    return l;
}

int mt_valid_open(mt_valid *v, const mt_opts *o, tfm_mt_model *tr, const tfm_nmt_arrays *valid,
                  tfm_mt_train_opts *to, int (*fn)(const struct tfm_mt_progress *, int, void *)) {
    memset(v, 0, sizeof *v);
    tfm_graph_init(&v->g, 0);
    to->max_tokens = o->max_tokens;
    to->valid_every = o->valid_every;
    tfm_early_stop_init(&v->es, o->patience);
    v->tr = tr;
    v->keep_best = o->keep_best;
    v->batch_size = o->batch_size;
    v->max_len = o->max_len;
    mt_best_path(o->out, v->best_path, sizeof v->best_path);
    v->log_path = o->log_file;
    if (o->log_file && !(v->log = fopen(o->log_file, "w")))
        return cli_error(C, "--log-file: cannot write %s", o->log_file), CLI_EXIT_IO;
    if (!valid) return 0;
    int ns = 0, nt = 0;
    v->src = read_lines(o->valid_src, &v->buf[0], &ns);
    v->ref = v->src ? read_lines(o->valid_tgt, &v->buf[1], &nt) : NULL;
    if (!v->ref) return cli_fail(C, "%s", tfm_last_error());
    v->n = ns < nt ? ns : nt;
    v->valid = valid;
    to->validate = fn;
    return 0;
}

/* The decoder of the validation sources: a translator over the model being trained, made at the first
 * validation (threads are set by then); later validations re-pack the weights training moved. */
static int valid_decoder(mt_valid *v) {
    if (v->dec) return tfm_translator_weights_changed(v->dec), 0;
    tfm_translator_params p;
    tfm_translator_params_default(&p);
    p.threads = tfm_get_threads();
    p.max_batch_size = v->batch_size;
    return (v->dec = tfm_translator_view(v->tr, &p)) ? 0 : -1;
}

/* Greedy translations of the validation sources (the model's stored decoding settings are not used: greedy
 * BLEU is what the run compares across validations). */
static int valid_translate(mt_valid *v, char **hyp) {
    tfm_translate_options o;
    tfm_translate_options_default(&o);
    o.beam_size = 1;
    o.length_penalty = 0;
    o.max_decoding_length = 2 * v->max_len;
    o.max_input_length = v->max_len;
    tfm_translation *r = calloc((size_t)v->n + 1, sizeof *r);
    int rc = !r ? -1 : tfm_translator_translate_batch(v->dec, (const char *const *)v->src, v->n, &o, r);
    for (int i = 0; r && i < v->n; i++) {
        if (!rc) hyp[i] = r[i].hypotheses[0], r[i].hypotheses[0] = NULL;   /* handed over */
        tfm_translation_free(&r[i]);
    }
    free(r);
    return rc;
}

int mt_validate(mt_valid *v, const tfm_mt_progress *p, int epoch) {
    if (valid_decoder(v)) return tfm_prefix_error("validation: ");
    float loss = tfm_mt_eval_loss(v->tr->model, &v->g, v->valid, v->batch_size), bleu = 0;
    if (isnan(loss) && tfm_last_error_kind() == TFM_ERR_NOMEM) return tfm_prefix_error("validation: ");
    char **hyp = calloc((size_t)v->n + 1, sizeof *hyp);
    tfm_bleu_result r;
    tfm_chrf_result cr;
    int rc = !hyp ? -1 : valid_translate(v, hyp);
    if (!rc) rc = tfm_corpus_bleu((const char *const *)hyp, (const char *const *)v->ref, v->n, 0, &r);
    if (!rc) rc = tfm_corpus_chrf((const char *const *)hyp, (const char *const *)v->ref, v->n, 0, &cr);
    for (int i = 0; hyp && i < v->n; i++) free(hyp[i]);
    free(hyp);
    if (rc) return tfm_prefix_error("validation: ");
    bleu = (float)r.score;
    int flags = tfm_early_stop_update(&v->es, bleu, p->step);
    const char *wrote = NULL;
    if ((flags & TFM_VALID_IMPROVED) && v->keep_best) {
        tfm_container c;
        tfm_container_init(&c);
        tfm_mt_model_put(&c, v->tr);
        rc = tfm_container_save(&c, v->best_path);
        tfm_container_free(&c);
        if (rc) return tfm_prefix_error("--keep-best: ");
        wrote = v->best_path;
    }
    fprintf(stderr, "valid at step %d: loss %.4f  BLEU %.2f  chrF2 %.2f  (best BLEU %.2f at step %d)%s%s\n", p->step,
            loss, bleu, cr.score, v->es.best, v->es.best_step, wrote ? "  wrote " : "", wrote ? wrote : "");
    if (tfm_mt_log_valid(v->log, p->step, epoch, loss, bleu, (float)cr.score, v->es.best, wrote))
        cli_stop_log_failed(v->log_path);
    if (flags & TFM_VALID_STOP) {
        fprintf(stderr, "stopping: %d validations without a better BLEU (--patience %d)\n", v->es.n_bad, v->es.patience);
        v->stopped = 1;
        return 1;
    }
    return 0;
}

void mt_valid_close(mt_valid *v) {
    free(v->src);
    free(v->ref);
    free(v->buf[0]);
    free(v->buf[1]);
    if (v->log) fclose(v->log);
    tfm_translator_free(v->dec);
    tfm_graph_free(&v->g);
    memset(v, 0, sizeof *v);
}

void mt_report_run(const tfm_mt_report *r, void *user) {
    const mt_run *x = user;
    mt_report(r, user);
    if (tfm_mt_log_report(x->val->log, r)) cli_stop_log_failed(x->val->log_path);
}

int mt_validate_run(const struct tfm_mt_progress *p, int epoch, void *user) {
    return mt_validate(((const mt_run *)user)->val, p, epoch);
}
