/* tfm_mt_run from C (include/tfm/run.h): options set by name through the field table, a bad option named as its
 * flag (TFM_ERR_ARG), the preset over the fields not given (hooks->given NULL: those at their defaults), what the
 * run says through the hooks (messages, progress reports, BLEU validations with --keep-best), the stop flag, and
 * a resume that takes the stored run (thread count included) and refuses a changed fixed field, and a new run
 * that refuses to replace an existing checkpoint unless overwrite. */
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include "check.h"
#include "tfm/run.h"

static char dir[256], tsv[300], vsrc[300], vtgt[300], out[300];

typedef struct {
    int messages, config_line, reports, validations, wrote_best;
    char config[4096];
} seen;

static void on_message(const char *line, void *user) {
    seen *s = user;
    s->messages++;
    if (!strncmp(line, "train-mt config:", 16)) s->config_line++, snprintf(s->config, sizeof s->config, "%s", line);
}

static void on_progress(const tfm_mt_run_progress *p, void *user) {
    seen *s = user;
    if (p->r) s->reports++;
    else s->validations++, s->wrote_best += p->wrote != NULL && p->bleu == p->best_bleu && p->best_step == p->step;
}

static void write_data(void) {
    static const char *w[] = {"red", "blue", "cat", "dog", "sees", "runs", "big", "old"};
    FILE *f = fopen(tsv, "w"), *s = fopen(vsrc, "w"), *t = fopen(vtgt, "w");
    for (int i = 0; i < 96; i++) {   /* target: the source words reversed */
        const char *a = w[i % 8], *b = w[(i / 8) % 8], *c = w[(i * 5 + 3) % 8];
        fprintf(i < 80 ? f : s, i < 80 ? "%s %s %s\t" : "%s %s %s\n", a, b, c);
        fprintf(i < 80 ? f : t, "%s %s %s\n", c, b, a);
    }
    fclose(f), fclose(s), fclose(t);
}

static void base_opts(tfm_mt_run_opts *o) {
    tfm_mt_run_opts_default(o);
    o->tsv = tsv, o->out = out, o->min_freq = 1, o->d_model = 16, o->ffn = 16, o->n_layer = 1, o->batch_size = 16;
    o->epochs = 2, o->threads = 1, o->log_every = 2, o->dropout = 0;
}

static void test_fields(void) {
    int n;
    const tfm_field *f = tfm_mt_run_fields(&n);
    tfm_mt_run_opts o;
    tfm_mt_run_opts_default(&o);
    int i = tfm_field_find(f, n, "d_model"), j = tfm_field_find(f, n, "label-smoothing");
    CHECK("mt_run fields: found by flag and keyword", i >= 0 && j >= 0 && tfm_field_find(f, n, "nope") < 0, "%d %d", i, j);
    int ok = i >= 0 && j >= 0 && !tfm_field_parse(&f[i], &o, "64") && !tfm_field_parse(&f[j], &o, "0.1");
    CHECK("mt_run fields: set by name", ok && o.d_model == 64 && o.label_smoothing == 0.1f, "d_model %d", o.d_model);
    CHECK("mt_run fields: a bad value is refused naming the flag", tfm_field_parse(&f[i], &o, "6x") == -1 &&
          strstr(tfm_last_error(), "--d-model"), "%s", tfm_last_error());
    CHECK("mt_run opts size", tfm_mt_run_opts_size() == sizeof(tfm_mt_run_opts), "%zu", tfm_mt_run_opts_size());
    CHECK("mt_run about names the presets", strstr(tfm_mt_run_about(), "multi30k") != NULL, "%s", tfm_mt_run_about());
}

static void test_bad_option(void) {
    tfm_mt_run_opts o;
    base_opts(&o);
    o.lr = -1;
    tfm_run_result r;
    int rc = tfm_mt_run(&o, NULL, &r);
    CHECK("mt_run: a bad option is TFM_ERR_ARG naming the flag", rc == -1 && tfm_last_error_kind() == TFM_ERR_ARG &&
          strstr(tfm_last_error(), "--lr must be"), "rc %d: %s", rc, tfm_last_error());
    CHECK("mt_run: nothing written on a bad option", access(out, F_OK) != 0, "%s exists", out);
}

static void test_run(void) {
    tfm_mt_run_opts o;
    base_opts(&o);
    o.valid_src = vsrc, o.valid_tgt = vtgt, o.keep_best = 1, o.preset = "d2l";
    seen s = {0};
    tfm_run_hooks h = {.on_message = on_message, .on_mt_progress = on_progress, .user = &s};
    tfm_run_result r;
    int rc = tfm_mt_run(&o, &h, &r);
    CHECK("mt_run: trains and saves", rc == 0 && r.steps == 10 && r.step == 10 && r.saved_step == 10 &&
          access(out, F_OK) == 0, "rc %d steps %d: %s", rc, r.steps, tfm_last_error());
    CHECK("mt_run: says its configuration, the given fields kept by the preset", s.config_line == 1 &&
          strstr(s.config, "--d-model 16 ") && strstr(s.config, "--threads 1 ") && strstr(s.config, "--preset d2l"),
          "%s", s.config);
    CHECK("mt_run: progress reports and a BLEU validation after each epoch", s.reports >= 5 && s.validations == 2,
          "%d reports, %d validations", s.reports, s.validations);
    char best[320];
    snprintf(best, sizeof best, "%s/m.best.tfm", dir);
    CHECK("mt_run: keep_best writes OUT.best.tfm on the first validation", s.wrote_best >= 1 && access(best, F_OK) == 0,
          "%d", s.wrote_best);
    CHECK("mt_run: the validation loss in the result", r.val_loss > 0 && isfinite(r.val_loss), "%g", r.val_loss);
}

static void test_stop_and_resume(void) {
    char part[320];
    snprintf(part, sizeof part, "%s/part.tfm", dir);
    tfm_mt_run_opts o;
    base_opts(&o);
    o.out = part;
    volatile sig_atomic_t stop = SIGTERM;   /* set before the run: it stops after its first step */
    tfm_run_hooks h = {.stop = &stop};
    tfm_run_result r;
    int rc = tfm_mt_run(&o, &h, &r);
    CHECK("mt_run: the stop flag ends the run with a checkpoint", rc == 0 && r.stopped_by == SIGTERM && r.steps == 1 &&
          r.saved_step == 1, "rc %d stopped_by %d steps %d", rc, r.stopped_by, r.steps);
    tfm_mt_run_opts_default(&o);   /* only the checkpoint: the stored run is continued */
    o.resume = part;
    o.threads = 0, o.log_every = 0;
    seen s = {0};
    tfm_run_hooks h2 = {.on_message = on_message, .user = &s};
    rc = tfm_mt_run(&o, &h2, &r);
    CHECK("mt_run: a resume continues the stored run to its end", rc == 0 && r.start_step == 1 && r.step == 10 &&
          o.d_model == 16 && o.threads == 1 && strstr(s.config, "--threads 1 "), "rc %d %d..%d: %s", rc, r.start_step,
          r.step, tfm_last_error());
    tfm_mt_run_opts_default(&o);
    o.resume = part, o.d_model = 32 + 32;   /* not at its default: given (hooks->given NULL) */
    rc = tfm_mt_run(&o, NULL, &r);
    CHECK("mt_run: a resume refuses a changed model field", rc == -1 && tfm_last_error_kind() == TFM_ERR_ARG &&
          strstr(tfm_last_error(), "--d-model 64 differs"), "rc %d: %s", rc, tfm_last_error());
}

/* after test_run: out holds its checkpoint */
static void test_fresh_run_guard(void) {
    tfm_mt_run_opts o;
    base_opts(&o);
    o.epochs = 1;
    tfm_run_result r;
    int rc = tfm_mt_run(&o, NULL, &r);
    CHECK("mt_run: a new run refuses an existing out (TFM_ERR_ARG naming resume and overwrite)", rc == -1 &&
          tfm_last_error_kind() == TFM_ERR_ARG && strstr(tfm_last_error(), "m.tfm exists") &&
          strstr(tfm_last_error(), "--resume") && strstr(tfm_last_error(), "--overwrite"), "rc %d: %s", rc,
          tfm_last_error());
    o.overwrite = 1;
    rc = tfm_mt_run(&o, NULL, &r);
    CHECK("mt_run: overwrite starts a new run over it", rc == 0 && r.start_step == 0 && r.steps == 5 &&
          r.saved_step == 5, "rc %d start %d steps %d: %s", rc, r.start_step, r.steps, tfm_last_error());
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/tfm_mt_run_XXXXXX");
    if (!mkdtemp(dir)) return 1;
    snprintf(tsv, sizeof tsv, "%s/t.tsv", dir), snprintf(vsrc, sizeof vsrc, "%s/v.src", dir);
    snprintf(vtgt, sizeof vtgt, "%s/v.tgt", dir), snprintf(out, sizeof out, "%s/m.tfm", dir);
    write_data();
    test_fields();
    test_bad_option();
    test_run();
    test_fresh_run_guard();
    test_stop_and_resume();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd)) {}
    return check_failures ? 1 : 0;
}
