/* What train-lm and train-mt share around their loops (src/cli/train_run.c): the SIGINT/SIGTERM stop flag
 * (owned here, passed to the library as a pointer), the message after a clean stop, peak RSS. */
#ifndef TFM_CLI_TRAIN_RUN_H
#define TFM_CLI_TRAIN_RUN_H
#include <signal.h>

#include "cli/cli.h"
#include "tfm/train.h"

/* Installs the handlers and returns the flag they set (the signal number). A second SIGINT while the first
 * signal is being handled exits at once (128 + signal) without touching the last checkpoint; a repeated
 * SIGTERM is ignored (a batch system and mpirun may both send one). */
const volatile sig_atomic_t *cli_stop_install(void);
/* A --log-file line could not be written (a full disk): the run stops at the end of the step with a checkpoint,
 * as on SIGTERM, and cli_stop_report says why and exits 74 (a log write is checked like a checkpoint save). Call
 * right after the failed write (errno). */
void cli_stop_log_failed(const char *path);
/* The end of a run: closes the log (f may be NULL); if that fails or a log write failed before, says so and
 * returns 74, else rc. Once rc is non-zero (already reported), only closes. */
int cli_log_close(const char *cmd, FILE *f, const char *path, int rc);
/* --resume PATH of the other family (want: "gpt" for train-lm, "seq2seq" for train-mt): the error naming the
 * command to use (returns 2); 0 otherwise, also when PATH cannot be read (the loader says why). */
int cli_resume_kind(const char *cmd, const char *path, const char *want);
/* Removes stale OUT.tmp.<pid> files of killed runs (and says so). */
void cli_clean_stale(const char *cmd, const char *out);
/* A library note (tfm_train_ctl.note): the line on stderr. */
void cli_note(const char *line, void *user);
/* After a stop by signal: "stopped by SIGINT: saved OUT at step S (epoch E); resume with: HINT OUT" and the
 * exit code 128 + signal (after a failed log write: its reason, and 74); 0 if no stop. epoch < 0: not printed. */
int cli_stop_report(const char *cmd, const char *out, int step, int epoch, const char *hint);

/* The run configuration (src/cli/run_flags.c): every flag of spec except those in safe (" a b c "), and for
 * the flags in data (paths) also data:<flag> = the file's size and FNV-1a hash. Prints and returns 2 on error. */
int cli_run_config_build(const char *cmd, const cli_spec *spec, const char *safe, const char *data, tfm_run_config *rc);
/* A resume: flags not given take the stored values; a given flag that differs is an error naming both values
 * unless it is in changeable (" a b ");
 * a data file whose contents differ is an error unless allow_new_data (then logged). Prints; returns 2. */
int cli_run_config_resume(const char *cmd, cli_spec *spec, const char *safe, const char *changeable,
                          const char *data, const tfm_run_config *stored, int allow_new_data, const char *path);
/* After the checkpoint is loaded and the flags hold the values the run will use (its config.* and train.*): every
 * stored run.* value must equal them (flags in safe and data are skipped, and given flags in changeable). One
 * source of truth: a run.* string that says something else than the run does is refused. Prints; returns 2. */
int cli_run_config_match(const char *cmd, const cli_spec *spec, const char *safe, const char *changeable,
                         const char *data, const tfm_run_config *stored, const char *path);
/* "CMD config: --flag value ..." on stderr */
void cli_run_config_print(const char *cmd, const tfm_run_config *rc);

/* The threads per process (tfm_set_threads), and under mpirun with MPI=1 (src/cli/train_dist.c) the ranks:
 * *d (NULL: one process, always so without MPI=1 or without mpirun); TFM_DIST_TIMEOUT sets the collectives'
 * timeout. Returns cli_dist_quiet(*d), or -1 with the error printed. */
int cli_dist_open(const char *cmd, int threads, tfm_dist **d);
int cli_dist_quiet(const tfm_dist *d);   /* 1 on ranks other than 0: they print no progress, write no file */
/* Before training on several ranks: batch (> 0) must split evenly (tfm_dist_slice), the configuration hashes
 * must be equal, then rank 0's weights and moments go to all (tfm_train_dist_start). 0, or 2 (printed by
 * rank 0). */
int cli_dist_sync(const char *cmd, tfm_dist *d, const tfm_run_config *run, long step, int batch, tfm_params *p,
                  tfm_adamw *opt);
/* "NLtfm CMD: <tfm_last_error()>" on rank 0, or on any rank when the communication failed there. */
void cli_dist_error(const char *cmd, const tfm_dist *d, const char *nl);
/* A training loop's error (cli_dist_error), told with the last good checkpoint: "...; the last good checkpoint:
 * OUT (step N)" when this run saved one (saved_step >= 0), else the checkpoint it resumed from (resume, at
 * resume_step), else that it saved none. */
void cli_train_error(const char *cmd, const tfm_dist *d, const char *nl, const char *out, int saved_step,
                     const char *resume, int resume_step);
/* The end of a command: finalize, or stop every rank when this one lost its peers. Returns rc. */
int cli_dist_close(tfm_dist *d, int rc);
/* --parallel auto|batch|ops -> *parallel (tfm_parallel); 0, or the usage exit code after a one-line error. */
int cli_parallel(const char *cmd, const char *value, int *parallel);
/* "2 threads, each a chunk of the batch" / "2 threads splitting each op" / "1 thread" for the start-up line. */
const char *cli_threads_str(char *buf, size_t n, int parallel, int slice);
/* --precision fp32|bf16 -> *bf16 (0/1), or a one-line error naming the flag */
int cli_precision(const char *cmd, const char *value, int *bf16);
/* the start-up line's GEMM part: the kernel path, and with bf16 how the bf16 GEMMs run */
const char *cli_gemm_str(char *buf, size_t n, int bf16);
#endif
