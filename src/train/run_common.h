/* What the two whole runs (src/train/run_lm.c, run_mt*.c) say and decide alike: their start-up wording, the
 * resolved thread count, the configuration line and the error that names the last good checkpoint.
 * Private to src/train (src/train/run_common.c). */
#ifndef TFM_TRAIN_RUN_COMMON_H
#define TFM_TRAIN_RUN_COMMON_H

#include <stdarg.h>
#include <stddef.h>

#include "tfm/run.h"

/* "N threads, each a chunk of the batch (...)" or "N threads splitting each op (...)": how a step is shared. */
const char *tfm_run_threads_str(char *buf, size_t n, int parallel, int slice);
/* the GEMM path ("avx2-fma"; with bf16: the linear layers' operands and whether the CPU has AVX512_BF16) */
const char *tfm_run_gemm_str(char *buf, size_t n, int bf16);
/* *threads 0 resolved to this machine's default (the count is part of the run: the numbers depend on it);
 * returns the default when a resume takes the run's stored count (not given) and it differs (to be said), else 0. */
int tfm_run_resolve_threads(int *threads, int given, const char *resume, const tfm_run_config *stored);
/* A line (printf format) to hooks->on_message, on the rank that writes (dist: rank 0 only); no hooks: nothing. */
void tfm_run_vsay(const tfm_run_hooks *h, const char *fmt, va_list ap);
/* An invalid option: the error made TFM_ERR_ARG (the CLI's usage error), keeping its message. Returns -1. */
int tfm_run_arg_error(void);
/* "<cmd> config: --name value ..." of a run's stored options (data fingerprints and resolved paths left out) */
void tfm_run_config_line(const tfm_run_config *run, const char *cmd, char *line, size_t n);
/* A fresh run (no resume, no overwrite) refuses, before any work, to replace what an earlier run left: an out
 * that is not empty (a checkpoint of kind "gpt" / "seq2seq" with a run configuration: the error says to
 * --resume it) or a non-empty log_file (NULL: none). 0, or -1 with a TFM_ERR_ARG error naming the path and the
 * remedies (--resume, --overwrite). */
int tfm_run_check_fresh(const char *kind, const char *out, const char *log_file);
/* After a failed training loop: the error kept, naming the last good checkpoint (this run's last save, else the
 * resumed checkpoint, else none). Returns -1. */
int tfm_run_last_good_error(const tfm_run_result *r, const char *out, const char *resume);

#endif
