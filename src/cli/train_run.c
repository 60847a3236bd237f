/* train-lm / train-mt: clean stops on SIGINT and SIGTERM (include: src/cli/train_run.h). */
#define _POSIX_C_SOURCE 200809L
#include "cli/train_run.h"
#include "tfm/checkpoint.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "tfm/kernels.h"
#include "tfm/train.h"

static volatile sig_atomic_t stop_signal;   /* the CLI's flag; the library only reads it through a pointer */
#define STOP_LOG 100                        /* not a signal: a --log-file write failed (cli_stop_log_failed) */
static char stop_reason[700];

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

void cli_note(const char *line, void *user) {
    (void)user;
    fprintf(stderr, "%s\n", line);
}

void cli_stop_log_failed(const char *path) {
    if (stop_signal) return;
    snprintf(stop_reason, sizeof stop_reason, "--log-file %s: write failed (%s)", path, strerror(errno ? errno : EIO));
    stop_signal = STOP_LOG;
}

int cli_log_close(const char *cmd, FILE *f, const char *path, int rc) {
    errno = 0;
    if (!f || (!fclose(f) && stop_signal != STOP_LOG) || rc) return rc;
    if (stop_signal != STOP_LOG) cli_stop_log_failed(path);
    fprintf(stderr, "tfm %s: %s: the checkpoint is complete, the log is not\n", cmd, stop_reason);
    return CLI_EXIT_IO;
}

int cli_stop_report(const char *cmd, const char *out, int step, int epoch, const char *hint) {
    int sig = stop_signal;
    if (!sig) return 0;
    if (sig == STOP_LOG) {   /* the run stopped as on SIGTERM: its checkpoint is saved */
        fprintf(stderr, "\ntfm %s: %s: stopped, saved %s at step %d", cmd, stop_reason, out, step);
        if (epoch >= 0) fprintf(stderr, " (epoch %d)", epoch);
        fprintf(stderr, "; resume with: %s %s --log-file FILE (on a disk with room)\n", hint, out);
        return CLI_EXIT_IO;
    }
    fprintf(stderr, "\ntfm %s: stopped by %s: saved %s at step %d", cmd, sig == SIGINT ? "SIGINT" : "SIGTERM", out, step);
    if (epoch >= 0) fprintf(stderr, " (epoch %d)", epoch);
    fprintf(stderr, "; resume with: %s %s\n", hint, out);
    return 128 + sig;
}

int cli_parallel(const char *cmd, const char *value, int *parallel) {
    static const char *names[] = {"auto", "ops", "batch"};   /* in tfm_parallel order */
    for (int i = 0; i < 3; i++)
        if (!strcmp(value, names[i])) return *parallel = i, 0;
    return cli_error(cmd, "--parallel must be auto, batch or ops, got '%s'", value);
}

int cli_precision(const char *cmd, const char *value, int *bf16) {
    if (!strcmp(value, "fp32") || !strcmp(value, "bf16")) return *bf16 = value[0] == 'b', 0;
    return cli_error(cmd, "--precision must be fp32 or bf16, got '%s'", value);
}

const char *cli_gemm_str(char *buf, size_t n, int bf16) {
    if (!bf16) snprintf(buf, n, "%s", tfm_gemm_backend());
    else snprintf(buf, n, "%s; linear layers with bf16 operands (%s)", tfm_gemm_backend(),
                  tfm_bf16_hw() ? "AVX512_BF16" : "emulated: this CPU has no AVX512_BF16");
    return buf;
}

const char *cli_threads_str(char *buf, size_t n, int parallel, int slice) {
    int t = tfm_get_threads(), k = tfm_train_chunks(parallel, t, slice);
    if (k) snprintf(buf, n, "%d threads, each a chunk of the batch (--parallel batch: %d chunks)", t, k);
    else snprintf(buf, n, "%d thread%s%s", t, t == 1 ? "" : "s", t > 1 ? " splitting each op (--parallel ops)" : "");
    return buf;
}

int cli_resume_kind(const char *cmd, const char *path, const char *want) {
    char kind[32];
    if (tfm_checkpoint_kind(path, kind, sizeof kind) || !strcmp(kind, want)) return 0;   /* unreadable: said later */
    const char *other = !strcmp(kind, "gpt") ? "train-lm" : !strcmp(kind, "seq2seq") ? "train-mt" : NULL;
    if (other)
        return cli_error(cmd, "--resume %s: is %s, not a %s model: continue it with tfm %s --resume", path,
                         tfm_checkpoint_kind_desc(kind), strcmp(want, "gpt") ? "translation" : "language", other);
    return cli_error(cmd, "--resume %s: is %s", path, tfm_checkpoint_kind_desc(kind));
}
