/* tfm train-lm: progress lines, the checkpoint callback, flag range checks (src/cli/train_lm.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
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
        const tfm_lm_data *d = x->d;   /* loss per character = loss per piece * pieces / characters */
        if (x->bpe)
            fprintf(stderr, "%sstep %d: train loss %.4f, val loss %.4f per BPE piece (per character: train %.4f, val %.4f)\n",
                    cr, r->step, r->train_loss, r->val_loss, r->train_loss * d->n_train / (double)d->chars_train,
                    r->val_loss * (d->n - d->n_train) / (double)d->chars_val);
        else
            fprintf(stderr, "%sstep %d: train loss %.4f, val loss %.4f\n", cr, r->step, r->train_loss, r->val_loss);
        return;
    }
    /* the console and the --log-file print the same loss: the mean over the steps since the previous line */
    x->log_loss += r->loss, x->log_n++;
    int line = (x->log_every > 0 && r->step % x->log_every == 0) || r->step == 1, n = x->log_n;
    float mean = (float)(x->log_loss / x->log_n);
    if (line) {
        if (tfm_lm_log_report(x->log, r, mean)) cli_stop_log_failed(x->log_path);
        x->log_loss = 0, x->log_n = 0;
    }
    cli_format_eta(r->eta_s, eta, sizeof eta);
    if (x->tty || line)
        fprintf(stderr, "%sstep %d/%d | loss %.4f (mean of %d) | lr %.2e | %.0f tok/s | ETA %s%s", cr, r->step, r->steps,
                mean, n, r->lr, r->tokens_per_s, eta, x->tty ? "" : "\n");
}

int lm_save(const tfm_lm_train_state *st, void *user) {
    lm_run *x = user;
    if (tfm_gpt_save_tok(x->out, x->m, x->vocab, x->bpe, x->opt, st, x->run)) return -1;
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


int lm_learn_bpe(const char *data, float val_frac, int vocab_size, int block_size, tfm_bpe **bpe, tfm_lm_data *d) {
    if (vocab_size < 1) return cli_error(C, "--tokenizer bpe needs --vocab-size N (e.g. 512: 260 + the characters + merges)");
    if (!(val_frac > 0 && val_frac < 1)) return cli_error(C, "--val-frac must be in (0,1), got %g", val_frac);
    if (!(*bpe = calloc(1, sizeof **bpe))) return cli_error(C, "out of memory"), CLI_EXIT_ERROR;
    int learned = !tfm_lm_bpe_learn(*bpe, data, 1.0f - val_frac, vocab_size);
    if (!learned || tfm_lm_data_load_bpe(d, data, *bpe, 1.0f - val_frac, block_size)) {
        /* a --vocab-size the text cannot give is the flag's fault (2); an unreadable file is 74 / 65 */
        int rc = !learned && tfm_last_error_kind() == TFM_ERR_OTHER ? cli_error(C, "%s", tfm_last_error())
                                                                     : cli_fail(C, "%s", tfm_last_error());
        tfm_bpe_free(*bpe), free(*bpe), *bpe = NULL;
        return rc;
    }
    fprintf(stderr, "learned a BPE model of %d pieces from %s: %.3f pieces per character (train), %d train / %d "
            "validation pieces\n", (*bpe)->n, data, (double)d->n_train / (double)d->chars_train, d->n_train, d->n - d->n_train);
    return 0;
}

int lm_check_tokenizer(const char *tokenizer, int vocab_size) {
    if (strcmp(tokenizer, "char") && strcmp(tokenizer, "bpe")) return cli_error(C, "--tokenizer: unknown '%s' (char, bpe)", tokenizer);
    if (vocab_size && strcmp(tokenizer, "bpe")) return cli_error(C, "--vocab-size needs --tokenizer bpe");
    if (vocab_size < 0 || vocab_size > 1000000) return cli_error(C, "--vocab-size must be in 1..1000000, got %d", vocab_size);
    return 0;
}

int lm_load_data(const char *data, const char *tokenizer, int vocab_size, float val_frac, int block_size,
                 const tfm_char_vocab *vocab, tfm_bpe **bpe, tfm_lm_data *d) {
    int rc = 0;
    if (*bpe) rc = tfm_lm_data_load_bpe(d, data, *bpe, 1.0f - val_frac, block_size);   /* a resumed BPE model */
    else if (!vocab->n && !strcmp(tokenizer, "bpe")) return lm_learn_bpe(data, val_frac, vocab_size, block_size, bpe, d);
    else rc = tfm_lm_data_load(d, data, vocab->n ? vocab->chars : NULL, 1.0f - val_frac, block_size);
    return rc ? cli_fail(C, "%s", tfm_last_error()) : 0;
}

void lm_free(tfm_gpt *m, tfm_adamw *opt, tfm_char_vocab *vocab, tfm_bpe *bpe, tfm_lm_data *d) {
    tfm_adamw_free(opt);
    tfm_gpt_free(m);
    tfm_char_vocab_free(vocab);
    if (bpe) tfm_bpe_free(bpe), free(bpe);
    tfm_lm_data_free(d);
}
