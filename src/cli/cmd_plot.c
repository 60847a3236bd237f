/* tfm plot LOG.jsonl --out curves.svg: loss, BLEU and learning-rate curves of a JSON-lines training log. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/train_run.h"
#include "tfm/core.h"
#include "tfm/eval.h"

int cmd_plot(int argc, char **argv) {
    const char *out = NULL, *title = NULL;
    cli_flag flags[] = {
        {"out", FLAG_STR, &out, "SVG file to write (required)", 0},
        {"title", FLAG_STR, &title, "figure title (default: the log's file name)", 0},
    };
    cli_spec spec = {
        "plot", "LOG.jsonl --out curves.svg [--title TEXT]",
        "Draws the curves of a training log written with --log-file (one JSON object a line, see\n"
        "docs/LOGS.md) against the step: train and validation loss, validation BLEU (and chrF2), and\n"
        "the learning rate, one panel each where the log has values. Missing keys are fine.",
        flags, (int)(sizeof flags / sizeof flags[0]), 1, 1,
    };
    const char *pos[1];
    int n_pos;
    int rc = cli_parse(&spec, argc, argv, pos, &n_pos);
    if (rc) return rc == 1 ? 0 : rc;
    if (!out) return cli_error("plot", "--out FILE.svg is required");
    tfm_file_use files[] = {{"LOG.jsonl", pos[0], TFM_FILE_IN}, {"--out", out, TFM_FILE_OUT}};
    if ((rc = cli_check_files("plot", files, 2))) return rc;
    cli_clean_stale("plot", out);
    tfm_train_log log;
    if (tfm_train_log_load(&log, pos[0])) return cli_fail("plot", "%s", tfm_last_error());
    const char *slash = strrchr(pos[0], '/');
    if (tfm_train_log_plot(&log, out, title ? title : slash ? slash + 1 : pos[0])) {
        rc = cli_fail("plot", "%s: %s", pos[0], tfm_last_error());
    } else {
        int best = -1;
        for (int i = 0; i < log.n; i++)
            if (isfinite(log.v[TFM_LOG_VALID_BLEU][i]) && (best < 0 || log.v[TFM_LOG_VALID_BLEU][i] > log.v[TFM_LOG_VALID_BLEU][best]))
                best = i;
        printf("wrote %s: %d records, steps %g..%g", out, log.n, (double)log.v[TFM_LOG_STEP][0],
               (double)log.v[TFM_LOG_STEP][log.n - 1]);
        if (best >= 0)
            printf(", best valid BLEU %.2f at step %g", (double)log.v[TFM_LOG_VALID_BLEU][best],
                   (double)log.v[TFM_LOG_STEP][best]);
        if (log.n_undrawn)   /* a diverged run logs null losses: say they are missing from the curves */
            printf("; %d value%s null, NaN or Infinity, not drawn", log.n_undrawn, log.n_undrawn == 1 ? "" : "s");
        printf("\n");
    }
    tfm_train_log_free(&log);
    return rc;
}
