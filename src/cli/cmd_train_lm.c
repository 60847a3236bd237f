/* tfm train-lm: train a character-level GPT on a text file. */
#include "cli/cli.h"
#include "cli/rss.h"
#include "tfm/kernels.h"
#include "tfm/lm.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *data, *out, *resume, *attention;
    int n_layer, n_head, n_embd, block_size, batch_size, iters, warmup, eval_every, eval_iters, seed, threads;
    int grad_accum, stop_after, log_every, profile;
    float lr, min_lr, weight_decay, dropout, grad_clip, beta1, beta2, val_frac;
} opts;

static void format_eta(double s, char *buf, size_t n) {
    if (s < 0 || s > 1e7) s = 0;
    int h = (int)(s / 3600), m = (int)(fmod(s, 3600) / 60), sec = (int)fmod(s, 60);
    if (h) snprintf(buf, n, "%dh%02dm", h, m);
    else snprintf(buf, n, "%dm%02ds", m, sec);
}

static int validate(const opts *o) {
    const char *c = "train-lm";
    if (o->lr <= 0) return cli_error(c, "--lr must be > 0, got %g", o->lr);
    if (o->min_lr < 0 || o->min_lr > o->lr) return cli_error(c, "--min-lr must be in [0, lr], got %g", o->min_lr);
    if (o->batch_size < 1) return cli_error(c, "--batch-size must be >= 1, got %d", o->batch_size);
    if (o->iters < 1) return cli_error(c, "--iters must be >= 1, got %d", o->iters);
    if (o->warmup < 0) return cli_error(c, "--warmup must be >= 0, got %d", o->warmup);
    if (o->eval_every < 1) return cli_error(c, "--eval-every must be >= 1, got %d", o->eval_every);
    if (o->eval_iters < 1) return cli_error(c, "--eval-iters must be >= 1, got %d", o->eval_iters);
    if (o->weight_decay < 0) return cli_error(c, "--weight-decay must be >= 0, got %g", o->weight_decay);
    if (o->grad_clip < 0) return cli_error(c, "--grad-clip must be >= 0 (0 = off), got %g", o->grad_clip);
    if (o->grad_accum < 1) return cli_error(c, "--grad-accum must be >= 1, got %d", o->grad_accum);
    if (o->threads < 0) return cli_error(c, "--threads must be >= 0 (0 = all cores), got %d", o->threads);
    if (!(o->beta1 >= 0 && o->beta1 < 1) || !(o->beta2 >= 0 && o->beta2 < 1))
        return cli_error(c, "--beta1/--beta2 must be in [0,1)");
    if (!(o->val_frac > 0 && o->val_frac < 1)) return cli_error(c, "--val-frac must be in (0,1), got %g", o->val_frac);
    if (strcmp(o->attention, "causal") && strcmp(o->attention, "synthesizer"))
        return cli_error(c, "--attention must be causal or synthesizer, got '%s'", o->attention);
    return 0;
}

int cmd_train_lm(int argc, char **argv) {
    opts o = {.data = NULL, .out = NULL, .resume = NULL, .attention = "causal", .n_layer = 4, .n_head = 4,
              .n_embd = 128, .block_size = 64, .batch_size = 12, .iters = 2000, .warmup = 100, .eval_every = 500,
              .eval_iters = 20, .seed = 1337, .threads = 0, .grad_accum = 1, .stop_after = 0, .log_every = 50,
              .lr = 1e-3f, .min_lr = 1e-4f, .weight_decay = 0.1f, .dropout = 0.0f, .grad_clip = 1.0f,
              .beta1 = 0.9f, .beta2 = 0.99f, .val_frac = 0.1f};
    cli_flag flags[] = {
        {"data", FLAG_STR, &o.data, "training text (UTF-8); the last --val-frac is validation", 0},
        {"out", FLAG_STR, &o.out, "checkpoint to write (atomically, at every eval and at the end)", 0},
        {"resume", FLAG_STR, &o.resume, "continue the run saved in this checkpoint exactly", 0},
        {"n-layer", FLAG_INT, &o.n_layer, "transformer blocks", 0},
        {"n-head", FLAG_INT, &o.n_head, "attention heads", 0},
        {"n-embd", FLAG_INT, &o.n_embd, "embedding width (divisible by n-head)", 0},
        {"block-size", FLAG_INT, &o.block_size, "context length", 0},
        {"attention", FLAG_STR, &o.attention, "causal | synthesizer", 0},
        {"dropout", FLAG_FLOAT, &o.dropout, "dropout probability", 0},
        {"batch-size", FLAG_INT, &o.batch_size, "sequences per micro-batch", 0},
        {"grad-accum", FLAG_INT, &o.grad_accum, "micro-batches accumulated per step", 0},
        {"iters", FLAG_INT, &o.iters, "optimizer steps", 0},
        {"lr", FLAG_FLOAT, &o.lr, "peak learning rate", 0},
        {"min-lr", FLAG_FLOAT, &o.min_lr, "final learning rate of the cosine decay", 0},
        {"warmup", FLAG_INT, &o.warmup, "linear warmup steps", 0},
        {"weight-decay", FLAG_FLOAT, &o.weight_decay, "AdamW decoupled weight decay (2-D weights only)", 0},
        {"beta1", FLAG_FLOAT, &o.beta1, "AdamW beta1", 0},
        {"beta2", FLAG_FLOAT, &o.beta2, "AdamW beta2", 0},
        {"grad-clip", FLAG_FLOAT, &o.grad_clip, "clip the global gradient norm (0 = off)", 0},
        {"eval-every", FLAG_INT, &o.eval_every, "evaluate and checkpoint every N steps", 0},
        {"eval-iters", FLAG_INT, &o.eval_iters, "batches averaged per evaluation", 0},
        {"val-frac", FLAG_FLOAT, &o.val_frac, "fraction of the text held out for validation", 0},
        {"seed", FLAG_INT, &o.seed, "random seed (init, batches, dropout)", 0},
        {"threads", FLAG_INT, &o.threads, "threads (0 = all cores)", 0},
        {"log-every", FLAG_INT, &o.log_every, "log line every N steps when not on a terminal", 0},
        {"stop-after", FLAG_INT, &o.stop_after, "stop (with a checkpoint) after N steps of this run; --resume goes on", 0},
        {"profile", FLAG_BOOL, &o.profile, "print time per op kind per step at the end", 0},
    };
    cli_spec spec = {"train-lm", "--data FILE --out MODEL.tfm [options]",
                     "Trains a character-level GPT (pre-LN, tied LM head) with AdamW, warmup + cosine decay and\n"
                     "gradient clipping. Same seed and thread count give the same numbers.",
                     flags, sizeof flags / sizeof *flags, 0, 0};
    const char *pos[1];
    int npos, rc = cli_parse(&spec, argc, argv, pos, &npos);
    if (rc) return rc == 1 ? 0 : rc;
    if (!o.data) return cli_error("train-lm", "--data FILE is required");
    if (!o.out) return cli_error("train-lm", "--out MODEL.tfm is required");
    if (validate(&o) || cli_check_writable("train-lm", o.out)) return 2;
    tfm_set_threads(o.threads);

    tfm_gpt m;
    tfm_char_vocab vocab;
    tfm_adamw opt;
    tfm_lm_train_state st = {0};
    tfm_lm_data data;
    if (o.resume) {
        if (tfm_gpt_load(o.resume, &m, &vocab, &opt, &st))
            return cli_error("train-lm", "%s", tfm_last_error());
        for (int i = 0; i < spec.n_flags; i++) /* the run's hyperparameters come from the checkpoint */
            if (flags[i].seen && strcmp(flags[i].name, "iters") && strcmp(flags[i].name, "data") &&
                strcmp(flags[i].name, "out") && strcmp(flags[i].name, "resume") && strcmp(flags[i].name, "threads") &&
                strcmp(flags[i].name, "stop-after") && strcmp(flags[i].name, "log-every") &&
                strcmp(flags[i].name, "profile"))
                fprintf(stderr, "tfm train-lm: warning: --%s ignored with --resume (the checkpoint's value is used)\n",
                        flags[i].name);
        if (cli_flag_seen(&spec, "iters")) st.iters = o.iters;
        if (tfm_lm_data_load(&data, o.data, vocab.chars, 1.0f - o.val_frac, m.cfg.block_size))
            return cli_error("train-lm", "%s", tfm_last_error());
        fprintf(stderr, "resuming %s at step %d of %d\n", o.resume, st.iter, st.iters);
    } else {
        if (tfm_lm_data_load(&data, o.data, NULL, 1.0f - o.val_frac, o.block_size))
            return cli_error("train-lm", "%s", tfm_last_error());
        tfm_gpt_config cfg = {data.vocab.n, o.block_size, o.n_layer, o.n_head, o.n_embd, o.dropout,
                              strcmp(o.attention, "synthesizer") ? TFM_ATTN_CAUSAL : TFM_ATTN_SYNTHESIZER};
        if (tfm_gpt_init(&m, &cfg)) return cli_error("train-lm", "%s", tfm_last_error());
        tfm_gpt_init_weights(&m, (uint64_t)o.seed);
        tfm_char_vocab_from_string(&vocab, data.vocab.chars);
        tfm_adamw_init(&opt, &m.params, o.beta1, o.beta2, 1e-8f, o.weight_decay);
        st = (tfm_lm_train_state){o.iters, o.batch_size, o.grad_accum, o.warmup, o.eval_every, o.eval_iters, o.seed,
                                  o.lr, o.min_lr, o.weight_decay, o.beta1, o.beta2, o.grad_clip, 0, 0, 0, NAN};
        tfm_rng r;
        tfm_rng_seed(&r, (uint64_t)o.seed * 2 + 1);
        st.batch_rng = r.s;
        tfm_rng_seed(&r, (uint64_t)o.seed * 2 + 2);
        st.dropout_rng = r.s;
    }
    const tfm_gpt_config *cfg = &m.cfg;
    int B = st.batch_size, T = cfg->block_size;
    fprintf(stderr, "gpt: %d layers, %d heads, %d wide, block %d, vocab %d, %s attention: %zu parameters\n",
            cfg->n_layer, cfg->n_head, cfg->n_embd, T, cfg->vocab_size,
            cfg->attention == TFM_ATTN_SYNTHESIZER ? "synthesizer" : "causal", m.params.total);
    fprintf(stderr, "data: %s: %d train / %d validation tokens; %d threads; gemm %s\n", o.data, data.n_train,
            data.n - data.n_train, tfm_get_threads(), tfm_gemm_backend());

    tfm_graph g;
    tfm_graph_init(&g, 0);
    g.rng.s = st.dropout_rng;
    g.profile = o.profile;
    tfm_rng batch_rng = {st.batch_rng};
    int *x = malloc(sizeof(int) * B * T * 2), *y = x + B * T;
    int tty = cli_stderr_is_tty();
    double t_start = tfm_now(), t_train = 0;
    int start_iter = st.iter, steps_this_run = 0, status = 0;
    float loss_ema = NAN;
    while (st.iter < st.iters) {
        double t0 = tfm_now();
        double tp = tfm_profile_begin(&g);
        if (steps_this_run == 0) tfm_params_zero_grad(&m.params);   /* later: the optimizer zeroes them */
        tfm_profile_end(&g, TFM_PHASE_ZERO_GRAD, tp);
        float loss_sum = 0;
        for (int micro = 0; micro < st.grad_accum; micro++) {
            tfm_graph_reset(&g);
            g.training = 1;
            tfm_lm_get_batch(&data, 0, &batch_rng, B, T, x, y);
            tfm_tensor *loss = tfm_cross_entropy(&g, tfm_gpt_forward(&g, &m, x, B, T), y, -100, 0.0f);
            if (st.grad_accum > 1) loss = tfm_scale(&g, loss, 1.0f / st.grad_accum);
            tfm_backward(&g, loss);
            loss_sum += loss->data[0];
        }
        tp = tfm_profile_begin(&g);
        float coef = tfm_clip_coef(tfm_grad_norm(&m.params), st.grad_clip);
        tfm_profile_end(&g, TFM_PHASE_CLIP, tp);
        float lr = tfm_lr_cosine(st.iter, st.lr, st.min_lr, st.warmup, st.iters);
        tp = tfm_profile_begin(&g);
        tfm_adamw_step_fused(&opt, &m.params, lr, coef, 1);   /* clipped grads, zeroed for the next step */
        tfm_profile_end(&g, TFM_PHASE_OPTIMIZER, tp);
        if (!isfinite(loss_sum)) {
            fprintf(stderr, "\ntfm train-lm: loss became %g at step %d; try a lower --lr\n", loss_sum, st.iter);
            status = 1;
            break;
        }
        st.iter++;
        steps_this_run++;
        t_train += tfm_now() - t0;
        loss_ema = isnan(loss_ema) ? loss_sum : 0.9f * loss_ema + 0.1f * loss_sum;
        double tok_s = (double)steps_this_run * B * T * st.grad_accum / t_train;
        char eta[32];
        format_eta(t_train / steps_this_run * (st.iters - st.iter), eta, sizeof eta);
        if (tty)
            fprintf(stderr, "\r\033[Kstep %d/%d | loss %.4f | lr %.2e | %.0f tok/s | ETA %s", st.iter, st.iters,
                    loss_ema, lr, tok_s, eta);
        else if (st.iter % o.log_every == 0 || st.iter == 1)
            fprintf(stderr, "step %d/%d | loss %.4f | lr %.2e | %.0f tok/s | ETA %s\n", st.iter, st.iters, loss_sum,
                    lr, tok_s, eta);
        int stop = o.stop_after > 0 && steps_this_run >= o.stop_after;
        if (st.iter % st.eval_every == 0 || st.iter == st.iters || stop) {
            uint64_t eval_seed = (uint64_t)st.seed * 1000003u + 7;
            float tl = tfm_lm_estimate_loss(&m, &g, &data, 0, st.eval_iters, B, T, eval_seed);
            float vl = tfm_lm_estimate_loss(&m, &g, &data, 1, st.eval_iters, B, T, eval_seed + 1);
            st.last_val_loss = vl;
            fprintf(stderr, "%sstep %d: train loss %.4f, val loss %.4f (%d batches)\n", tty ? "\r\033[K" : "", st.iter,
                    tl, vl, st.eval_iters);
            st.batch_rng = batch_rng.s;
            st.dropout_rng = g.rng.s;
            if (tfm_gpt_save(o.out, &m, &vocab, &opt, &st)) {
                fprintf(stderr, "tfm train-lm: %s\n", tfm_last_error());
                status = 1;
                break;
            }
        }
        if (stop) break;
    }
    if (!status) {
        double wall = tfm_now() - t_start;
        fprintf(stderr, "done: %d steps in %.1f s (%.1f ms/step, %.0f tok/s); saved %s\n", st.iter - start_iter, wall,
                1e3 * t_train / (steps_this_run ? steps_this_run : 1),
                steps_this_run ? (double)steps_this_run * B * T * st.grad_accum / t_train : 0.0, o.out);
        if (o.profile && steps_this_run) tfm_profile_print(&g, steps_this_run, "step", t_train, stderr);
        cli_report_rss("train-lm");
    }
    free(x);
    tfm_graph_free(&g);
    tfm_adamw_free(&opt);
    tfm_gpt_free(&m);
    tfm_char_vocab_free(&vocab);
    tfm_lm_data_free(&data);
    return status;
}
