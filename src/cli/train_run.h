/* What train-lm and train-mt share around their library runs (src/cli/train_run.c, train_dist.c): the
 * SIGINT/SIGTERM stop flag (owned here, passed to the library as a pointer), stale temporary files, the ranks
 * under mpirun. */
#ifndef TFM_CLI_TRAIN_RUN_H
#define TFM_CLI_TRAIN_RUN_H
#include <signal.h>

#include "cli/cli.h"
#include "tfm/train.h"

/* Installs the handlers and returns the flag they set (the signal number). A second SIGINT while the first
 * signal is being handled exits at once (128 + signal) without touching the last checkpoint; a repeated
 * SIGTERM is ignored (a batch system and mpirun may both send one). */
const volatile sig_atomic_t *cli_stop_install(void);
/* Removes stale OUT.tmp.<pid> files of killed runs (and says so). */
void cli_clean_stale(const char *cmd, const char *out);

/* The threads per process (tfm_set_threads), and under mpirun with MPI=1 (src/cli/train_dist.c) the ranks:
 * *d (NULL: one process, always so without MPI=1 or without mpirun); TFM_DIST_TIMEOUT sets the collectives'
 * timeout. Returns cli_dist_quiet(*d), or -1 with the error printed. */
int cli_dist_open(const char *cmd, int threads, tfm_dist **d);
int cli_dist_quiet(const tfm_dist *d);   /* 1 on ranks other than 0: they print no progress, write no file */
/* The end of a command: finalize, or stop every rank when this one lost its peers. Returns rc. */
int cli_dist_close(tfm_dist *d, int rc);
#endif
