/* The CLI side of the library's training runs (include/tfm/run.h): flags made from a run's fields, the hooks
 * that print what a run says, and a run's result as an exit status. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/run_cli.h"
#include "cli/rss.h"
#include "cli/train_run.h"

int cli_flags_from_fields(const tfm_field *f, int n, void *opts, cli_flag *out) {
    static const cli_flag_type type[] = {FLAG_INT, FLAG_FLOAT, FLAG_STR, FLAG_BOOL};   /* tfm_field_type order */
    for (int i = 0; i < n; i++) out[i] = (cli_flag){f[i].name, type[f[i].type], (char *)opts + f[i].offset, f[i].help, 0};
    return n;
}

void cli_given(const cli_spec *spec, unsigned char *given) {
    for (int i = 0; i < spec->n_flags; i++) given[i] = (unsigned char)(spec->flags[i].seen != 0);
}

void cli_run_message(const char *line, void *user) {
    (void)user;
    fprintf(stderr, "%s\n", line);
}

void cli_lm_progress(const tfm_lm_progress *p, void *user) {
    const cli_run_view *v = user;
    const tfm_lm_report *r = p->r;
    const char *cr = v->tty ? "\r\033[K" : "";
    char eta[32];
    if (r->eval && !isnan(p->train_per_char)) {
        fprintf(stderr, "%sstep %d: train loss %.4f, val loss %.4f per BPE piece (per character: train %.4f, val %.4f)\n",
                cr, r->step, r->train_loss, r->val_loss, p->train_per_char, p->val_per_char);
    } else if (r->eval) {
        fprintf(stderr, "%sstep %d: train loss %.4f, val loss %.4f\n", cr, r->step, r->train_loss, r->val_loss);
    } else if (v->tty || p->line) {
        cli_format_eta(r->eta_s, eta, sizeof eta);
        fprintf(stderr, "%sstep %d/%d | loss %.4f (mean of %d) | lr %.2e | %.0f tok/s | ETA %s%s", cr, r->step, r->steps,
                p->mean_loss, p->n_mean, r->lr, r->tokens_per_s, eta, v->tty ? "" : "\n");
    }
}

int cli_run_end(const char *cmd, int failed, const tfm_run_result *r, const char *out, const char *hint, int epoch,
                const char *nl) {
    if (failed) {
        fprintf(stderr, "%stfm %s: %s\n", nl, cmd, tfm_last_error());
        return cli_exit_status();
    }
    if (r->log_failed) {   /* the run stopped as on SIGTERM: its checkpoint is saved */
        fprintf(stderr, "\ntfm %s: %s: stopped, saved %s at step %d", cmd, r->log_error, out, r->step);
        if (epoch >= 0) fprintf(stderr, " (epoch %d)", epoch);
        fprintf(stderr, "; resume with: %s %s --log-file FILE (on a disk with room)\n", hint, out);
        return CLI_EXIT_IO;
    }
    if (r->stopped_by) {
        fprintf(stderr, "\ntfm %s: stopped by %s: saved %s at step %d", cmd, r->stopped_by == SIGINT ? "SIGINT" : "SIGTERM",
                out, r->step);
        if (epoch >= 0) fprintf(stderr, " (epoch %d)", epoch);
        fprintf(stderr, "; resume with: %s %s\n", hint, out);
        return 128 + r->stopped_by;
    }
    return 0;
}

void cli_mt_progress(const tfm_mt_run_progress *p, void *user) {
    const cli_run_view *v = user;
    const tfm_mt_report *r = p->r;
    const char *cr = v->tty ? "\r\033[K" : "";
    char eta[32];
    if (!r) {   /* a validation */
        fprintf(stderr, "valid at step %d: loss %.4f  BLEU %.2f  chrF2 %.2f  (best BLEU %.2f at step %d)%s%s\n", p->step,
                p->valid_loss, p->bleu, p->chrf, p->best_bleu, p->best_step, p->wrote ? "  wrote " : "",
                p->wrote ? p->wrote : "");
        return;
    }
    cli_format_eta(r->eta_s, eta, sizeof eta);
    if (r->end_of_epoch) {
        fprintf(stderr, "%sepoch %d/%d  step %d/%d  loss %.4f", cr, r->epoch, r->epochs, r->step, r->total_steps, r->loss);
        if (r->valid_loss >= 0) fprintf(stderr, "  valid loss %.4f", r->valid_loss);
        fprintf(stderr, "  lr %.2e  %.0f tok/s  ETA %s\n", r->lr, r->tokens_per_s, eta);
    } else {
        fprintf(stderr, "%sepoch %d/%d  step %d/%d  loss %.4f  lr %.2e  %.0f tok/s  ETA %s%s", cr, r->epoch, r->epochs,
                r->step, r->total_steps, r->loss, r->lr, r->tokens_per_s, eta, v->tty ? "" : "\n");
    }
    fflush(stderr);
}
