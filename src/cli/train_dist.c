/* train-lm / train-mt under mpirun (docs/DISTRIBUTED.md): start the ranks, check they got the same run and
 * weights, let rank 0 alone print and write, and stop every rank on an error (src/cli/train_run.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/train_run.h"

/* Started by mpirun (Open MPI, or a PMI launcher)? A tfm built with MPI=1 but run alone stays one process
 * and never initialises MPI. */
static int under_launcher(void) {
    return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMIX_RANK") || getenv("PMI_SIZE");
}

int cli_dist_open(const char *cmd, int threads, tfm_dist **d) {
    tfm_set_threads(threads);
    *d = NULL;
    if (!tfm_dist_is_mpi() || !under_launcher()) return 0;
    const char *t = getenv("TFM_DIST_TIMEOUT");   /* seconds a rank waits for the others (default 600) */
    tfm_dist_opts o = {0, t ? atof(t) : 600.0};
    if (!(o.timeout_s > 0)) return cli_error(cmd, "TFM_DIST_TIMEOUT must be a number of seconds > 0, got '%s'", t), -1;
    if (!(*d = tfm_dist_init(NULL, NULL, &o))) return cli_error(cmd, "%s", tfm_last_error()), -1;
    return cli_dist_quiet(*d);
}

int cli_dist_quiet(const tfm_dist *d) { return d && !tfm_dist_is_writer(d); }

int cli_dist_sync(const char *cmd, tfm_dist *d, const tfm_run_config *run, long step, int batch, tfm_params *p,
                  tfm_adamw *opt) {
    int start, count;
    if (!d || tfm_dist_size(d) < 2) return 0;
    if ((batch <= 0 || tfm_dist_slice(d, batch, &start, &count) == 0) && tfm_train_dist_start(d, run, step, p, opt) == 0)
        return 0;
    if (tfm_dist_is_writer(d)) cli_error(cmd, "%s", tfm_last_error());
    return CLI_EXIT_USAGE;
}

void cli_dist_error(const char *cmd, const tfm_dist *d, const char *nl) {
    if (!cli_dist_quiet(d) || !strncmp(tfm_last_error(), "rank ", 5))
        fprintf(stderr, "%stfm %s: %s\n", nl, cmd, tfm_last_error());
}

void cli_train_error(const char *cmd, const tfm_dist *d, const char *nl, const char *out, int saved_step,
                     const char *resume, int resume_step) {
    char err[512];
    snprintf(err, sizeof err, "%s", tfm_last_error());
    tfm_error_kind kind = tfm_last_error_kind();
    if (saved_step >= 0) tfm_set_error_kind(kind, "%s; the last good checkpoint: %s (step %d)", err, out, saved_step);
    else if (resume)
        tfm_set_error_kind(kind, "%s; this run saved nothing: the last good checkpoint is %s (step %d)", err, resume,
                           resume_step);
    else tfm_set_error_kind(kind, "%s; this run saved no checkpoint", err);
    cli_dist_error(cmd, d, nl);
}

/* A message of the communication layer ("rank R: ...") comes from a rank that saw its peers fail: the
 * others may never reach the end, so stop them all. Other errors every rank has at the same step. */
int cli_dist_close(tfm_dist *d, int rc) {
    if (!d) return rc;
    if (rc && !strncmp(tfm_last_error(), "rank ", 5)) tfm_dist_abort(d, rc);
    tfm_dist_finalize(d);
    return rc;
}
