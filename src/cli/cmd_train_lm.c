/* tfm train-lm: train a character-level GPT on a text file (flags -> tfm_lm_train). */
#include <math.h>
#include <string.h>
#include "cli/cli.h"
#include "cli/rss.h"
#include "tfm/kernels.h"
#include "tfm/lm.h"

#define C "train-lm"

typedef struct {   /* what the report and save callbacks need */
    const char *out; const tfm_gpt *m; const tfm_char_vocab *vocab; const tfm_adamw *opt;
    int tty, log_every;
    float loss_ema;
    double train_s;
} lm_run;

static void report(const tfm_lm_report *r, void *user) {
    lm_run *x = user;
    const char *cr = x->tty ? "\r\033[K" : "";
    char eta[32];
    x->train_s = r->train_s;
    if (r->eval) {
        fprintf(stderr, "%sstep %d: train loss %.4f, val loss %.4f\n", cr, r->step, r->train_loss, r->val_loss);
        return;
    }
    x->loss_ema = isnan(x->loss_ema) ? r->loss : 0.9f * x->loss_ema + 0.1f * r->loss;
    cli_format_eta(r->eta_s, eta, sizeof eta);
    if (x->tty || r->step % x->log_every == 0 || r->step == 1)
        fprintf(stderr, "%sstep %d/%d | loss %.4f | lr %.2e | %.0f tok/s | ETA %s%s", cr, r->step, r->steps,
                x->tty ? x->loss_ema : r->loss, r->lr, r->tokens_per_s, eta, x->tty ? "" : "\n");
}

static int save(const tfm_lm_train_state *st, void *user) {
    lm_run *x = user;
    return tfm_gpt_save(x->out, x->m, x->vocab, x->opt, st);
}

static int validate(const tfm_lm_train_state *s, int threads, float val_frac, const char *attention) {
    if (s->lr <= 0) return cli_error(C, "--lr must be > 0, got %g", s->lr);
    if (s->min_lr < 0 || s->min_lr > s->lr) return cli_error(C, "--min-lr must be in [0, lr], got %g", s->min_lr);
    if (s->batch_size < 1) return cli_error(C, "--batch-size must be >= 1, got %d", s->batch_size);
    if (s->iters < 1) return cli_error(C, "--iters must be >= 1, got %d", s->iters);
    if (s->warmup < 0 || s->eval_every < 1 || s->eval_iters < 1 || s->grad_accum < 1)
        return cli_error(C, "--warmup must be >= 0, --eval-every, --eval-iters and --grad-accum >= 1");
    if (s->weight_decay < 0) return cli_error(C, "--weight-decay must be >= 0, got %g", s->weight_decay);
    if (s->grad_clip < 0) return cli_error(C, "--grad-clip must be >= 0 (0 = off), got %g", s->grad_clip);
    if (threads < 0) return cli_error(C, "--threads must be >= 0 (0 = all cores), got %d", threads);
    if (!(s->beta1 >= 0 && s->beta1 < 1) || !(s->beta2 >= 0 && s->beta2 < 1))
        return cli_error(C, "--beta1/--beta2 must be in [0,1)");
    if (!(val_frac > 0 && val_frac < 1)) return cli_error(C, "--val-frac must be in (0,1), got %g", val_frac);
    if (strcmp(attention, "causal") && strcmp(attention, "synthesizer"))
        return cli_error(C, "--attention must be causal or synthesizer, got '%s'", attention);
    return 0;
}

int cmd_train_lm(int argc, char **argv) {
    const char *data = NULL, *out = NULL, *resume = NULL, *attention = "causal";
    tfm_gpt_config cfg = {0, 64, 4, 4, 128, 0.0f, TFM_ATTN_CAUSAL};
    tfm_lm_train_state st;
    tfm_lm_train_state_default(&st);
    int threads = 0, stop_after = 0, log_every = 50, profile = 0;
    float val_frac = 0.1f;
    cli_flag flags[] = {
        {"data", FLAG_STR, &data, "training text (UTF-8); the last --val-frac is validation", 0},
        {"out", FLAG_STR, &out, "checkpoint to write (atomically, at every eval and at the end)", 0},
        {"resume", FLAG_STR, &resume, "continue the run saved in this checkpoint exactly", 0},
        {"n-layer", FLAG_INT, &cfg.n_layer, "transformer blocks", 0},
        {"n-head", FLAG_INT, &cfg.n_head, "attention heads", 0},
        {"n-embd", FLAG_INT, &cfg.n_embd, "embedding width (divisible by n-head)", 0},
        {"block-size", FLAG_INT, &cfg.block_size, "context length", 0},
        {"attention", FLAG_STR, &attention, "causal | synthesizer", 0},
        {"dropout", FLAG_FLOAT, &cfg.dropout, "dropout probability", 0},
        {"batch-size", FLAG_INT, &st.batch_size, "sequences per micro-batch", 0},
        {"grad-accum", FLAG_INT, &st.grad_accum, "micro-batches accumulated per step", 0},
        {"iters", FLAG_INT, &st.iters, "optimizer steps", 0},
        {"lr", FLAG_FLOAT, &st.lr, "peak learning rate", 0},
        {"min-lr", FLAG_FLOAT, &st.min_lr, "final learning rate of the cosine decay", 0},
        {"warmup", FLAG_INT, &st.warmup, "linear warmup steps", 0},
        {"weight-decay", FLAG_FLOAT, &st.weight_decay, "AdamW decoupled weight decay (2-D weights only)", 0},
        {"beta1", FLAG_FLOAT, &st.beta1, "AdamW beta1", 0},
        {"beta2", FLAG_FLOAT, &st.beta2, "AdamW beta2", 0},
        {"grad-clip", FLAG_FLOAT, &st.grad_clip, "clip the global gradient norm (0 = off)", 0},
        {"eval-every", FLAG_INT, &st.eval_every, "evaluate and checkpoint every N steps", 0},
        {"eval-iters", FLAG_INT, &st.eval_iters, "batches averaged per evaluation", 0},
        {"val-frac", FLAG_FLOAT, &val_frac, "fraction of the text held out for validation", 0},
        {"seed", FLAG_INT, &st.seed, "random seed (init, batches, dropout)", 0},
        {"threads", FLAG_INT, &threads, "threads (0 = all cores)", 0},
        {"log-every", FLAG_INT, &log_every, "log line every N steps when not on a terminal", 0},
        {"stop-after", FLAG_INT, &stop_after, "stop (with a checkpoint) after N steps of this run; --resume goes on", 0},
        {"profile", FLAG_BOOL, &profile, "print time per op kind per step at the end", 0},
    };
    cli_spec spec = {C, "--data FILE --out MODEL.tfm [options]",
                     "Trains a character-level GPT (pre-LN, tied LM head) with AdamW, warmup + cosine decay and\n"
                     "gradient clipping. Same seed and thread count give the same numbers.",
                     flags, sizeof flags / sizeof *flags, 0, 0};
    const char *pos[1];
    int npos, rc = cli_parse(&spec, argc, argv, pos, &npos);
    if (rc) return rc == 1 ? 0 : rc;
    if (!data) return cli_error(C, "--data FILE is required");
    if (!out) return cli_error(C, "--out MODEL.tfm is required");
    if (validate(&st, threads, val_frac, attention) || cli_check_writable(C, out)) return 2;
    if (log_every < 1) log_every = 1;
    tfm_set_threads(threads);
    tfm_gpt m;
    tfm_char_vocab vocab;
    tfm_adamw opt;
    tfm_lm_data d;
    int iters = st.iters;
    if (resume) {
        if (tfm_gpt_load(resume, &m, &vocab, &opt, &st)) return cli_error(C, "%s", tfm_last_error());
        cli_warn_resume_ignored(&spec, " iters data out resume threads stop-after log-every profile ");
        if (cli_flag_seen(&spec, "iters")) st.iters = iters;
        if (tfm_lm_data_load(&d, data, vocab.chars, 1.0f - val_frac, m.cfg.block_size))
            return cli_error(C, "%s", tfm_last_error());
        fprintf(stderr, "resuming %s at step %d of %d\n", resume, st.iter, st.iters);
    } else {
        if (tfm_lm_data_load(&d, data, NULL, 1.0f - val_frac, cfg.block_size)) return cli_error(C, "%s", tfm_last_error());
        cfg.vocab_size = d.vocab.n;
        cfg.attention = strcmp(attention, "synthesizer") ? TFM_ATTN_CAUSAL : TFM_ATTN_SYNTHESIZER;
        if (tfm_gpt_init(&m, &cfg)) return cli_error(C, "%s", tfm_last_error());
        tfm_gpt_init_weights(&m, (uint64_t)st.seed);
        if (tfm_char_vocab_from_string(&vocab, d.vocab.chars) ||
            tfm_adamw_init(&opt, &m.params, st.beta1, st.beta2, 1e-8f, st.weight_decay))
            return cli_error(C, "%s", tfm_last_error());
        tfm_lm_train_state_init(&st);
    }
    fprintf(stderr, "gpt: %d layers, %d heads, %d wide, block %d, vocab %d, %s attention: %zu parameters\n",
            m.cfg.n_layer, m.cfg.n_head, m.cfg.n_embd, m.cfg.block_size, m.cfg.vocab_size,
            m.cfg.attention == TFM_ATTN_SYNTHESIZER ? "synthesizer" : "causal", m.params.total);
    fprintf(stderr, "data: %s: %d train / %d validation tokens; %d threads; gemm %s\n", data, d.n_train,
            d.n - d.n_train, tfm_get_threads(), tfm_gemm_backend());
    lm_run x = {out, &m, &vocab, &opt, cli_stderr_is_tty(), log_every, NAN, 0};
    int start = st.iter, steps = tfm_lm_train(&m, &d, &opt, &st, stop_after, profile, report, save, &x);
    if (steps < 0) {
        fprintf(stderr, "%stfm %s: %s\n", x.tty ? "\n" : "", C, tfm_last_error());
    } else {
        long tok = (long)steps * st.batch_size * m.cfg.block_size * st.grad_accum;
        fprintf(stderr, "done: %d steps in %.1f s (%.1f ms/step, %.0f tok/s); saved %s\n", st.iter - start, x.train_s,
                1e3 * x.train_s / (steps ? steps : 1), x.train_s > 0 ? tok / x.train_s : 0.0, out);
        cli_report_rss(C);
    }
    tfm_adamw_free(&opt);
    tfm_gpt_free(&m);
    tfm_char_vocab_free(&vocab);
    tfm_lm_data_free(&d);
    return steps < 0;
}
