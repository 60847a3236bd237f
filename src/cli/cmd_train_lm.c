/* tfm train-lm: train a character-level GPT on a text file (flags -> tfm_lm_train). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "cli/cli.h"
#include "cli/rss.h"
#include "cli/train_lm.h"
#include "cli/train_run.h"
#include "tfm/kernels.h"
#include "tfm/lm.h"

#define C "train-lm"

int cmd_train_lm(int argc, char **argv) {
    const char *data = NULL, *out = NULL, *resume = NULL, *attention = "causal", *log_file = NULL, *parallel = "auto",
               *precision = "fp32", *tokenizer = "char";
    tfm_gpt_config cfg = {0, 64, 4, 4, 128, 0.0f, TFM_ATTN_CAUSAL};
    tfm_lm_train_state st;
    tfm_lm_train_state_default(&st);
    int threads = 0, max_steps = 0, log_every = 50, profile = 0, allow_new_data = 0, vocab_size = 0;
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
        {"tokenizer", FLAG_STR, &tokenizer, "char (one token per character) | bpe (tfm's BPE learned from the training text)", 0},
        {"vocab-size", FLAG_INT, &vocab_size, "with --tokenizer bpe: pieces (>= 260 + the text's characters)", 0},
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
                     "Trains a GPT (pre-LN, tied LM head) on characters or BPE pieces with AdamW, warmup + cosine\n"
                     "decay and gradient clipping. Same seed and thread count give the same numbers.",
                     flags, sizeof flags / sizeof *flags, 0, 0};
    const char *pos[1];
    int npos, rc = cli_parse(&spec, argc, argv, pos, &npos);
    if (rc) return rc == 1 ? 0 : rc;
    tfm_run_config run = {0}, stored = {0};   /* run.* entries: what --resume takes and checks */
    lm_model mo = {0};
    tfm_dist *dist = NULL;   /* the ranks under mpirun, else NULL; q: not rank 0 (prints and writes nothing) */
    int q = 0, steps = -3, start = 0;   /* -3: stopped before training (rc says why) */
    if (resume && cli_resume_kind(C, resume, "gpt")) {   /* a translation checkpoint: say which command */
        rc = CLI_EXIT_USAGE;
        goto done;
    }
    if (resume && tfm_run_config_load(resume, &stored)) {
        rc = cli_fail(C, "--resume: %s", tfm_last_error());
        goto done;
    }
    if (resume && !stored.n) cli_warn_resume_ignored(&spec, LM_SAFE LM_CHANGEABLE " data ");   /* a checkpoint from before run.* */
    if (resume &&
        (rc = cli_run_config_resume(C, &spec, LM_SAFE, LM_CHANGEABLE, " data ", &stored, allow_new_data, resume)))
        goto done;
    if (!out && resume) out = resume;
    if (!data || !out) {
        rc = cli_error(C, "%s is required", data ? "--out MODEL.tfm (or --resume MODEL.tfm)" : "--data FILE");
        goto done;
    }
    tfm_file_use files[] = {{"--data", data, TFM_FILE_IN}, {"--resume", resume, TFM_FILE_IN_PLACE},
                            {"--out", out, TFM_FILE_OUT}, {"--log-file", log_file, TFM_FILE_OUT_STREAM}};
    if ((rc = cli_run_config_build(C, &spec, LM_SAFE, " data ", &run)) ||
        (rc = lm_validate(&st, &cfg, threads, val_frac, attention, log_every, max_steps, &ctl, x.keep_last)) ||
        (rc = lm_check_tokenizer(tokenizer, vocab_size)) ||
        (rc = cli_parallel(C, parallel, &ctl.parallel)) || (rc = cli_precision(C, precision, &ctl.bf16)) ||
        (rc = cli_check_files(C, files, 4)))
        goto done;
    if ((q = cli_dist_open(C, threads, &dist)) < 0) {
        rc = CLI_EXIT_USAGE;
        goto done;
    }
    if ((rc = lm_setup(&spec, &stored, resume, data, tokenizer, vocab_size, val_frac, &cfg, &attention, &st, q, &mo)))
        goto done;
    start = st.iter, steps = cli_dist_sync(C, dist, &run, st.iter, st.batch_size, &mo.m.params, &mo.opt) ? -2 : 0;
    q = q || steps;   /* -2: the ranks disagree (printed): nothing more to say */
    if (!q) lm_print_start(&mo, data, &ctl, st.batch_size / (dist ? tfm_dist_size(dist) : 1));
    x = (lm_run){out, &mo.m, &mo.vocab, &mo.opt, cli_stderr_is_tty(), log_every, NAN, 0, x.keep_last, &run, NULL, 0, 0,
                 -1, log_file, mo.bpe, &mo.d};
    if (log_file && !q && !(x.log = fopen(log_file, "w"))) {
        rc = cli_error(C, "--log-file: cannot write %s", log_file), rc = CLI_EXIT_IO, steps = -3;
        goto done;
    }
    if (!q) cli_run_config_print(C, &run), cli_clean_stale(C, out);
    ctl.stop = cli_stop_install(), ctl.note = cli_note;
    ctl.dist = dist;
    if (!steps) steps = tfm_lm_train(&mo.m, &mo.d, &mo.opt, &st, max_steps, profile, &ctl, lm_report, lm_save, &x);
    rc = steps >= 0 && !q ? cli_stop_report(C, out, st.iter, -1, "tfm train-lm --resume") : 0;
    if (rc) {
    } else if (steps == -1) {
        cli_train_error(C, dist, x.tty ? "\n" : "", out, x.saved_step, resume, start);
        rc = cli_exit_status();   /* 74: a checkpoint could not be written; 1: a diverged run */
    } else if (steps == -2) {
        rc = CLI_EXIT_USAGE;
    } else if (q) {
    } else if (!steps) {
        fprintf(stderr, "%s is at step %d (--iters %d, --max-steps %d): nothing to do\n", resume ? resume : out, st.iter,
                st.iters, max_steps);
    } else {
        long tok = (long)steps * st.batch_size * mo.m.cfg.block_size * st.grad_accum;
        fprintf(stderr, "done: %d steps in %.1f s (%.1f ms/step, %.0f tok/s); saved %s\n", st.iter - start, x.train_s,
                1e3 * x.train_s / (steps ? steps : 1), x.train_s > 0 ? tok / x.train_s : 0.0, out);
        cli_report_rss(C);
    }
done:
    rc = cli_log_close(C, x.log, log_file, rc);
    lm_model_free(&mo);
    tfm_run_config_free(&run);
    tfm_run_config_free(&stored);
    return cli_dist_close(dist, rc);
}
