/* train-lm / train-mt: clean stops on SIGINT and SIGTERM (include: src/cli/train_run.h). */
#define _POSIX_C_SOURCE 200809L
#include "cli/train_run.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "tfm/train.h"

static volatile sig_atomic_t stop_signal;   /* the CLI's flag; the library only reads it through a pointer */

/* A second SIGINT (Ctrl-C pressed again) leaves at once; the last complete checkpoint stays. A repeated
 * SIGTERM does not: batch systems and mpirun may each deliver one (Slurm signals every process of the job,
 * mpirun then forwards its own), and SIGTERM's escalation is SIGKILL anyway. */
static void on_signal(int sig) {
    if (stop_signal && sig == SIGINT) _exit(128 + sig);
    if (!stop_signal) stop_signal = sig;
}

const volatile sig_atomic_t *cli_stop_install(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    return &stop_signal;
}

void cli_clean_stale(const char *cmd, const char *out) {
    int n = tfm_ckpt_remove_stale_tmp(out);
    if (n > 0) fprintf(stderr, "tfm %s: removed %d stale %s.tmp.* file%s of an interrupted save\n", cmd, n, out, n == 1 ? "" : "s");
}

