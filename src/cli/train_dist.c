/* train-lm / train-mt under mpirun (docs/DISTRIBUTED.md): start the ranks (the runs check they got the same run
 * and weights and let rank 0 alone print and write), and stop every rank on an error (src/cli/train_run.h). */
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

/* A message of the communication layer ("rank R: ...") comes from a rank that saw its peers fail: the
 * others may never reach the end, so stop them all. Other errors every rank has at the same step. */
int cli_dist_close(tfm_dist *d, int rc) {
    if (!d) return rc;
    if (rc && !strncmp(tfm_last_error(), "rank ", 5)) tfm_dist_abort(d, rc);
    tfm_dist_finalize(d);
    return rc;
}
