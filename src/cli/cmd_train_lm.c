/* tfm train-lm: train a GPT on a text file. Flag parsing (the flags are the fields of tfm_lm_run_opts) plus one
 * library call, tfm_lm_run (src/train/run_lm.c); this file prints what the run says. */
#include <string.h>

#include "cli/cli.h"
#include "cli/rss.h"
#include "cli/run_cli.h"
#include "cli/train_run.h"

#define C "train-lm"

int cmd_train_lm(int argc, char **argv) {
    tfm_lm_run_opts o;
    tfm_lm_run_opts_default(&o);
    int n;
    const tfm_field *fields = tfm_lm_run_fields(&n);
    cli_flag flags[64];
    unsigned char given[64];
    if (n > 64) return cli_error(C, "internal: %d fields", n);
    cli_flags_from_fields(fields, n, &o, flags);
    cli_spec spec = {C, "--data FILE --out MODEL.tfm [options]",
                     "Trains a GPT (pre-LN, tied LM head) on a text file, one token per character or BPE pieces\n"
                     "(--tokenizer bpe), with AdamW, warmup + cosine decay and gradient clipping. Same seed and\n"
                     "thread count give the same numbers.",
                     flags, n, 0, 0};
    const char *pos[1];
    int npos, rc = cli_parse(&spec, argc, argv, pos, &npos);
    if (rc) return rc == 1 ? 0 : rc;
    cli_given(&spec, given);
    tfm_dist *dist;   /* the ranks under mpirun, else NULL; quiet: not rank 0 (prints and writes nothing) */
    int quiet = cli_dist_open(C, o.threads, &dist);
    if (quiet < 0) return CLI_EXIT_USAGE;
    cli_run_view view = {cli_stderr_is_tty()};
    tfm_run_hooks h = {cli_run_message, quiet ? NULL : cli_lm_progress, cli_stop_install(), given, dist, &view, NULL};
    tfm_run_result r;
    int failed = tfm_lm_run(&o, &h, &r);
    if (failed && quiet && strncmp(tfm_last_error(), "rank ", 5)) return cli_dist_close(dist, cli_exit_status());
    if (!failed && quiet) return cli_dist_close(dist, 0);   /* rank 0 says how the run ended */
    rc = cli_run_end(C, failed, &r, o.out, "tfm train-lm --resume", -1, view.tty && r.steps ? "\n" : "");
    if (!rc && !quiet && !r.steps)
        fprintf(stderr, "%s is at step %d (--iters %d, --max-steps %d): nothing to do\n", o.resume ? o.resume : o.out,
                r.step, o.iters, o.max_steps);
    else if (!rc && !quiet && !r.stopped_by) {
        fprintf(stderr, "done: %d steps in %.1f s (%.1f ms/step, %.0f tok/s); saved %s\n", r.steps, r.train_s,
                1e3 * r.train_s / r.steps, r.train_s > 0 ? r.tokens / r.train_s : 0.0, o.out);
        cli_report_rss(C);
    }
    return cli_dist_close(dist, rc);
}
