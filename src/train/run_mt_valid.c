/* A translation run's validation that drives training. After each epoch (and every --eval-every steps): the
 * validation loss, greedy BLEU (and chrF2) of the raw validation sources against the raw references (tfm bleu's
 * metric), a best checkpoint (--keep-best: OUT.best.tfm, weights and tokenizer, written atomically), --patience
 * (the rule: tfm_early_stop_update, src/train/validate.c); and the --log-file lines of the loop's reports. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tfm/eval.h"
#include "train/run_mt.h"

static char **read_lines(const char *path, char **buf, int *n) {
    size_t len;
    if (!(*buf = tfm_read_text_file(path, &len))) return NULL;
    char **l = tfm_split_lines(*buf, len, n);
    if (!l) tfm_set_error_kind(TFM_ERR_NOMEM, "%s: out of memory", path);
    return l;
}

/* The decoder of the validation sources: a translator over the model being trained, made at the first
 * validation (threads are set by then); later validations re-pack the weights training moved. */
static int valid_decoder(mt_run *x) {
    mt_valid *v = &x->val;
    if (v->dec) return tfm_translator_weights_changed(v->dec), 0;
    tfm_translator_params p;
    tfm_translator_params_default(&p);
    p.threads = tfm_get_threads();
    p.max_batch_size = x->o->batch_size;
    return (v->dec = tfm_translator_view(&x->tr, &p)) ? 0 : -1;
}

/* Greedy translations of the validation sources (the model's stored decoding settings are not used: greedy
 * BLEU is what the run compares across validations). */
static int valid_translate(mt_run *x, char **hyp) {
    mt_valid *v = &x->val;
    tfm_translate_options o;
    tfm_translate_options_default(&o);
    o.beam_size = 1;
    o.length_penalty = 0;
    o.max_decoding_length = 2 * x->o->max_len;
    o.max_input_length = x->o->max_len;
    tfm_translation *r = calloc((size_t)v->n + 1, sizeof *r);
    int rc = !r ? -1 : tfm_translator_translate_batch(v->dec, (const char *const *)v->src, v->n, &o, r);
    for (int i = 0; r && i < v->n; i++) {
        if (!rc) hyp[i] = r[i].hypotheses[0], r[i].hypotheses[0] = NULL;   /* handed over */
        tfm_translation_free(&r[i]);
    }
    free(r);
    return rc;
}

/* BLEU and chrF2 of greedy translations of the validation sources */
static int valid_scores(mt_run *x, tfm_bleu_result *b, tfm_chrf_result *c) {
    mt_valid *v = &x->val;
    char **hyp = calloc((size_t)v->n + 1, sizeof *hyp);
    int rc = !hyp ? (tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory"), -1) : valid_translate(x, hyp);
    if (!rc) rc = tfm_corpus_bleu((const char *const *)hyp, (const char *const *)v->ref, v->n, 0, b);
    if (!rc) rc = tfm_corpus_chrf((const char *const *)hyp, (const char *const *)v->ref, v->n, 0, c);
    for (int i = 0; hyp && i < v->n; i++) free(hyp[i]);
    free(hyp);
    return rc;
}

static int save_best(mt_run *x) {
    tfm_container c;
    tfm_container_init(&c);
    tfm_mt_model_put(&c, &x->tr);
    int rc = tfm_container_save(&c, x->val.best_path);
    tfm_container_free(&c);
    return rc ? tfm_prefix_error("--keep-best: ") : 0;
}

/* tfm_mt_train_opts.validate: 0 go on, 1 stop (patience), -1 error */
static int validate(const tfm_mt_progress *p, int epoch, void *user) {
    mt_run *x = user;
    mt_valid *v = &x->val;
    int writer = !x->h || !x->h->dist || tfm_dist_is_writer(x->h->dist);
    if (valid_decoder(x)) return tfm_prefix_error("validation: ");
    float loss = tfm_mt_eval_loss(x->tr.model, &v->g, &x->avalid, x->o->batch_size);
    if (isnan(loss) && tfm_last_error_kind() == TFM_ERR_NOMEM) return tfm_prefix_error("validation: ");
    tfm_bleu_result b;
    tfm_chrf_result c;
    if (valid_scores(x, &b, &c)) return tfm_prefix_error("validation: ");
    float bleu = (float)b.score;
    int flags = tfm_early_stop_update(&v->es, bleu, p->step);
    const char *wrote = NULL;
    if ((flags & TFM_VALID_IMPROVED) && x->o->keep_best && writer) {
        if (save_best(x)) return -1;
        wrote = v->best_path;
    }
    tfm_mt_run_progress rp = {NULL, p->step, epoch, loss, bleu, c.score, v->es.best, v->es.best_step, wrote};
    if (x->h && x->h->on_mt_progress) x->h->on_mt_progress(&rp, x->h->user);
    if (tfm_mt_log_valid(x->log, p->step, epoch, loss, bleu, (float)c.score, v->es.best, wrote)) mt_log_failed(x);
    if (!(flags & TFM_VALID_STOP)) return 0;
    mt_say(x, "stopping: %d validations without a better BLEU (--patience %d)", v->es.n_bad, v->es.patience);
    return 1;
}

int mt_valid_open(mt_run *x) {
    mt_valid *v = &x->val;
    tfm_graph_init(&v->g, 0);
    tfm_early_stop_init(&v->es, x->o->patience);
    mt_best_path(x->o->out, v->best_path, sizeof v->best_path);
    if (!x->have_valid) return 0;
    int ns = 0, nt = 0;
    v->src = read_lines(x->o->valid_src, &v->buf[0], &ns);
    v->ref = v->src ? read_lines(x->o->valid_tgt, &v->buf[1], &nt) : NULL;
    if (!v->ref) return -1;
    v->n = ns < nt ? ns : nt;
    x->to.validate = validate;
    return 0;
}

void mt_valid_close(mt_valid *v) {
    free(v->src);
    free(v->ref);
    free(v->buf[0]);
    free(v->buf[1]);
    tfm_translator_free(v->dec);
    tfm_graph_free(&v->g);
    memset(v, 0, sizeof *v);
}

void mt_on_report(const tfm_mt_report *r, void *user) {
    mt_run *x = user;
    if (r->valid_loss >= 0) x->r->val_loss = r->valid_loss;
    tfm_mt_run_progress p = {r, r->step, r->epoch, r->valid_loss, NAN, NAN, NAN, -1, NULL};
    if (x->h && x->h->on_mt_progress) x->h->on_mt_progress(&p, x->h->user);
    if (tfm_mt_log_report(x->log, r)) mt_log_failed(x);
}
