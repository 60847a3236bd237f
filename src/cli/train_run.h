/* What train-lm and train-mt share around their loops (src/cli/train_run.c): the SIGINT/SIGTERM stop flag
 * (owned here, passed to the library as a pointer), the message after a clean stop, peak RSS. */
#ifndef TFM_CLI_TRAIN_RUN_H
#define TFM_CLI_TRAIN_RUN_H
#include <signal.h>

/* Installs the handlers and returns the flag they set (the signal number). A second SIGINT/SIGTERM while
 * the first is being handled exits at once (128 + signal) without touching the last checkpoint. */
const volatile sig_atomic_t *cli_stop_install(void);
/* Removes stale OUT.tmp.<pid> files of killed runs (and says so). */
void cli_clean_stale(const char *cmd, const char *out);
/* After a stop by signal: "stopped by SIGINT: saved OUT at step S (epoch E); resume with: HINT" and the
 * exit code 128 + signal; 0 if no signal arrived. epoch < 0: not printed. */
int cli_stop_report(const char *cmd, const char *out, int step, int epoch, const char *hint);
#endif
