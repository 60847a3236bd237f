/* tfm train-lm: progress lines, the checkpoint callback, flag range checks (src/cli/train_lm.h). */
#include <math.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/train_lm.h"
#include "cli/train_run.h"

#define C "train-lm"

void lm_report(const tfm_lm_report *r, void *user) {
    lm_run *x = user;
    const char *cr = x->tty ? "\r\033[K" : "";
    char eta[32];
    x->train_s = r->train_s;
    if (r->eval) {
        if (tfm_lm_log_report(x->log, r, r->train_loss)) cli_stop_log_failed(x->log_path);
        fprintf(stderr, "%sstep %d: train loss %.4f, val loss %.4f\n", cr, r->step, r->train_loss, r->val_loss);
        return;
    }
    x->loss_ema = isnan(x->loss_ema) ? r->loss : 0.9f * x->loss_ema + 0.1f * r->loss;
    x->log_loss += r->loss, x->log_n++;
    int line = (x->log_every > 0 && r->step % x->log_every == 0) || r->step == 1;
    if (line && x->log) {
        if (tfm_lm_log_report(x->log, r, (float)(x->log_loss / x->log_n))) cli_stop_log_failed(x->log_path);
        x->log_loss = 0, x->log_n = 0;
    }
    cli_format_eta(r->eta_s, eta, sizeof eta);
    if (x->tty || line)
        fprintf(stderr, "%sstep %d/%d | loss %.4f | lr %.2e | %.0f tok/s | ETA %s%s", cr, r->step, r->steps,
                x->tty ? x->loss_ema : r->loss, r->lr, r->tokens_per_s, eta, x->tty ? "" : "\n");
}

int lm_save(const tfm_lm_train_state *st, void *user) {
    lm_run *x = user;
    if (tfm_gpt_save_run(x->out, x->m, x->vocab, x->opt, st, x->run)) return -1;
    x->saved_step = st->iter;
    return x->keep_last > 0 ? tfm_ckpt_keep_step(x->out, st->iter, x->keep_last) : 0;
}

/* tfm_lm_train_state_check's message names the checkpoint field ("train.batch_size must be ..."): on the command
 * line, name the flag ("--batch-size must be ..."). */
static int flag_error(void) {
    const char *e = tfm_last_error();
    if (strncmp(e, "train.", 6)) return cli_error(C, "%s", e);
    char name[64];
    size_t k = strcspn(e + 6, " ");
    snprintf(name, sizeof name, "%.*s", (int)(k < sizeof name ? k : sizeof name - 1), e + 6);
    for (char *p = name; *p; p++) *p = *p == '_' ? '-' : *p;
    const char *rest = e + 6 + k, *cfg = strstr(rest, "config.block_size");   /* its flag: --block-size */
    if (cfg) return cli_error(C, "--%s%.*s--block-size%s", name, (int)(cfg - rest), rest, cfg + 17);
    return cli_error(C, "--%s%s", name, rest);
}

int lm_validate(const tfm_lm_train_state *s, const tfm_gpt_config *cfg, int threads, float val_frac,
                const char *attention, int log_every, int max_steps, const tfm_train_ctl *ctl, int keep_last) {
    if (tfm_lm_train_state_check(s, cfg)) return flag_error();   /* the loader's bounds: one set for both */
    if (log_every < 0) return cli_error(C, "--log-every must be >= 0, got %d", log_every);
    if (max_steps < 0) return cli_error(C, "--max-steps must be >= 0 (0 = no limit), got %d", max_steps);
    if (ctl->save_every < 0 || keep_last < 0 || ctl->skip_nonfinite < 0)
        return cli_error(C, "--save-every, --keep-last and --skip-nonfinite must be >= 0");
    if (cli_check_threads(C, threads)) return CLI_EXIT_USAGE;
    if (!(val_frac > 0 && val_frac < 1)) return cli_error(C, "--val-frac must be in (0,1), got %g", val_frac);
    if (strcmp(attention, "causal") && strcmp(attention, "synthesizer"))
        return cli_error(C, "--attention must be causal or synthesizer, got '%s'", attention);
    return 0;
}
