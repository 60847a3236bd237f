/* tfm train-lm: train a character-level GPT on a text file (flags -> tfm_lm_train). */
#include <math.h>
#include <string.h>
#include "cli/cli.h"
#include "cli/rss.h"
#include "cli/train_lm.h"
#include "cli/train_run.h"
#include "tfm/kernels.h"
#include "tfm/lm.h"

#define C "train-lm"
/* flags not stored in the run configuration, and stored flags a --resume may change (the rest must match) */
#define LM_SAFE " out resume threads parallel max-steps log-every log-file profile allow-new-data "
#define LM_CHANGEABLE " iters save-every keep-last skip-nonfinite "

int cmd_train_lm(int argc, char **argv) {
    const char *data = NULL, *out = NULL, *resume = NULL, *attention = "causal", *log_file = NULL, *parallel = "auto",
               *precision = "fp32";
    tfm_gpt_config cfg = {0, 64, 4, 4, 128, 0.0f, TFM_ATTN_CAUSAL, 0.0f};
    tfm_lm_train_state st;
    tfm_lm_train_state_default(&st);
    int threads = 0, max_steps = 0, log_every = 50, profile = 0, allow_new_data = 0;
    float val_frac = 0.1f;
    tfm_train_ctl ctl = {0};
    lm_run x = {0};
    cli_flag flags[] = {
        {"data", FLAG_STR, &data, "training text (UTF-8); the last --val-frac is validation", 0},
        {"out", FLAG_STR, &out, "checkpoint to write (atomically, at every eval and at the end)", 0},
        {"resume", FLAG_STR, &resume, "continue the run saved in this checkpoint exactly (--out defaults to it)", 0},
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
        {"beta2", FLAG_FLOAT, &st.beta2, "AdamW beta2 (0.99: nanoGPT's char-level recipe; train-mt: 0.999)", 0},
        {"grad-clip", FLAG_FLOAT, &st.grad_clip, "clip the global gradient norm (0 = off)", 0},
        {"eval-every", FLAG_INT, &st.eval_every, "evaluate and checkpoint every N steps", 0},
        {"eval-iters", FLAG_INT, &st.eval_iters, "batches averaged per evaluation", 0},
        {"val-frac", FLAG_FLOAT, &val_frac, "fraction of the text held out for validation", 0},
        {"seed", FLAG_INT, &st.seed, "random seed (init, batches, dropout)", 0},
        {"threads", FLAG_INT, &threads, CLI_THREADS_HELP, 0},
        {"parallel", FLAG_STR, &parallel, "auto | batch (a chunk of the batch per thread) | ops (threads split each op)", 0},
        {"precision", FLAG_STR, &precision, "fp32 | bf16 (linear layers' GEMMs with bfloat16 operands, fp32 sums)", 0},
        {"log-every", FLAG_INT, &log_every, "progress line every N steps when stderr is not a terminal (0 = none)", 0},
        {"log-file", FLAG_STR, &log_file, "write one JSON object per log line (docs/LOGS.md; tfm plot)", 0},
        {"max-steps", FLAG_INT, &max_steps, "stop (with a checkpoint) once the run's step reaches N (0 = no limit)", 0},
        {"profile", FLAG_BOOL, &profile, "at the end, print time per op kind and phase per step", 0},
        {"allow-new-data", FLAG_BOOL, &allow_new_data, "--resume on a different --data (fine-tuning; logged)", 0},
        {"save-every", FLAG_INT, &ctl.save_every, "also checkpoint every N steps (0 = only at evals and the end)", 0},
        {"keep-last", FLAG_INT, &x.keep_last, "keep the last K checkpoints as OUT.step<N>.tfm (0 = none)", 0},
        {"skip-nonfinite", FLAG_INT, &ctl.skip_nonfinite, "skip up to N batches with a non-finite loss/grad", 0},
    };
    cli_spec spec = {C, "--data FILE --out MODEL.tfm [options]",
                     "Trains a character-level GPT (pre-LN, tied LM head) with AdamW, warmup + cosine decay and\n"
                     "gradient clipping. Same seed and thread count give the same numbers.",
                     flags, sizeof flags / sizeof *flags, 0, 0};
    const char *pos[1];
    int npos, rc = cli_parse(&spec, argc, argv, pos, &npos);
    if (rc) return rc == 1 ? 0 : rc;
    tfm_run_config run = {0}, stored = {0};   /* run.* entries: what --resume takes and checks */
    if (resume && tfm_run_config_load(resume, &stored)) return cli_fail(C, "--resume: %s", tfm_last_error());
    if (resume && !stored.n) cli_warn_resume_ignored(&spec, LM_SAFE LM_CHANGEABLE " data ");   /* a checkpoint from before run.* */
    if (resume && (rc = cli_run_config_resume(C, &spec, LM_SAFE, LM_CHANGEABLE, " data ", &stored, allow_new_data)))
        return rc;
    if (!out && resume) out = resume;
    if (!data) return cli_error(C, "--data FILE is required");
    if (!out) return cli_error(C, "--out MODEL.tfm (or --resume MODEL.tfm) is required");
    const char *inputs[] = {data, resume && strcmp(resume, out) ? resume : NULL, out};
    if ((rc = cli_run_config_build(C, &spec, LM_SAFE, " data ", &run)) ||
        (rc = lm_validate(&st, threads, val_frac, attention, log_every, max_steps, &ctl, x.keep_last)) ||
        (rc = cli_parallel(C, parallel, &ctl.parallel)) || (rc = cli_precision(C, precision, &ctl.bf16)) ||
        (rc = cli_check_writable(C, out)) || (rc = cli_check_out_not_input(C, out, inputs, 2)) ||
        (rc = cli_check_not_input(C, "--log-file", log_file, inputs, 3)))
        return rc;
    tfm_dist *dist;   /* the ranks under mpirun, else NULL; q: not rank 0 (prints and writes nothing) */
    int q = cli_dist_open(C, threads, &dist);
    if (q < 0) return CLI_EXIT_USAGE;
    tfm_gpt m;
    tfm_char_vocab vocab;
    tfm_adamw opt;
    tfm_lm_data d;
    int iters = st.iters;
    if (resume) {
        if (tfm_gpt_load(resume, &m, &vocab, &opt, &st)) return cli_fail(C, "--resume: %s", tfm_last_error());
        if (cli_flag_seen(&spec, "iters")) st.iters = iters;
        if (tfm_lm_data_load(&d, data, vocab.chars, 1.0f - val_frac, m.cfg.block_size))
            return cli_fail(C, "%s", tfm_last_error());
        if (!q) fprintf(stderr, "resuming %s at step %d of %d\n", resume, st.iter, st.iters);
    } else {
        if (tfm_lm_data_load(&d, data, NULL, 1.0f - val_frac, cfg.block_size)) return cli_fail(C, "%s", tfm_last_error());
        cfg.vocab_size = d.vocab.n;
        cfg.attention = strcmp(attention, "synthesizer") ? TFM_ATTN_CAUSAL : TFM_ATTN_SYNTHESIZER;
        if (tfm_gpt_init(&m, &cfg)) return cli_error(C, "%s", tfm_last_error());   /* a bad config: the flags' */
        tfm_gpt_init_weights(&m, (uint64_t)st.seed);
        if (tfm_char_vocab_from_string(&vocab, d.vocab.chars) ||
            tfm_adamw_init(&opt, &m.params, st.beta1, st.beta2, 1e-8f, st.weight_decay))
            return cli_fail(C, "%s", tfm_last_error());
        tfm_lm_train_state_init(&st);
    }
    int start = st.iter, steps = cli_dist_sync(C, dist, &run, st.iter, st.batch_size, &m.params, &opt) ? -2 : 0;
    q = q || steps;   /* -2: the ranks disagree (printed): nothing more to say */
    if (!q) fprintf(stderr, "gpt: %d layers, %d heads, %d wide, block %d, vocab %d, %s attention: %zu parameters\n",
            m.cfg.n_layer, m.cfg.n_head, m.cfg.n_embd, m.cfg.block_size, m.cfg.vocab_size,
            m.cfg.attention == TFM_ATTN_SYNTHESIZER ? "synthesizer" : "causal", m.params.total);
    char par[80], gemm[96];
    if (!q) fprintf(stderr, "data: %s: %d train / %d validation tokens; %s; gemm %s\n", data, d.n_train, d.n - d.n_train,
            cli_threads_str(par, sizeof par, ctl.parallel, st.batch_size / (dist ? tfm_dist_size(dist) : 1)),
            cli_gemm_str(gemm, sizeof gemm, ctl.bf16));
    x = (lm_run){out, &m, &vocab, &opt, cli_stderr_is_tty(), log_every, NAN, 0, x.keep_last, &run, NULL, 0, 0};
    if (log_file && !q && !(x.log = fopen(log_file, "w")))
        return cli_error(C, "--log-file: cannot write %s", log_file), CLI_EXIT_IO;
    if (!q) cli_run_config_print(C, &run), cli_clean_stale(C, out);
    ctl.stop = cli_stop_install();
    ctl.dist = dist;
    if (!steps) steps = tfm_lm_train(&m, &d, &opt, &st, max_steps, profile, &ctl, lm_report, lm_save, &x);
    int sig = steps >= 0 && !q ? cli_stop_report(C, out, st.iter, -1, "tfm train-lm --resume") : 0;
    if (sig) {
    } else if (steps == -1) {
        cli_dist_error(C, dist, x.tty ? "\n" : "");
        sig = cli_exit_status();   /* 74: a checkpoint could not be written; 1: a diverged run */
    } else if (q || steps < 0) {
    } else if (!steps) {
        fprintf(stderr, "%s is at step %d (--iters %d, --max-steps %d): nothing to do\n", resume ? resume : out, st.iter,
                st.iters, max_steps);
    } else {
        long tok = (long)steps * st.batch_size * m.cfg.block_size * st.grad_accum;
        fprintf(stderr, "done: %d steps in %.1f s (%.1f ms/step, %.0f tok/s); saved %s\n", st.iter - start, x.train_s,
                1e3 * x.train_s / (steps ? steps : 1), x.train_s > 0 ? tok / x.train_s : 0.0, out);
        cli_report_rss(C);
    }
    if (x.log) fclose(x.log);
    tfm_adamw_free(&opt);
    tfm_gpt_free(&m);
    tfm_char_vocab_free(&vocab);
    tfm_lm_data_free(&d);
    tfm_run_config_free(&run);
    tfm_run_config_free(&stored);
    return cli_dist_close(dist, sig ? sig : steps < 0 ? (steps == -2 ? CLI_EXIT_USAGE : 1) : 0);
}
