/* What the two whole runs say and decide alike (src/train/run_common.h). */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "tfm/checkpoint.h"
#include "tfm/kernels.h"
#include "train/run_common.h"

void tfm_run_vsay(const tfm_run_hooks *h, const char *fmt, va_list ap) {
    if (!h || !h->on_message || (h->dist && !tfm_dist_is_writer(h->dist))) return;
    char line[1024];
    vsnprintf(line, sizeof line, fmt, ap);
    h->on_message(line, h->user);
}

int tfm_run_arg_error(void) {
    char m[600];
    snprintf(m, sizeof m, "%s", tfm_last_error());
    return tfm_set_error_kind(TFM_ERR_ARG, "%s", m), -1;
}

const char *tfm_run_threads_str(char *buf, size_t n, int parallel, int slice) {
    int t = tfm_get_threads(), k = tfm_train_chunks(parallel, t, slice);
    if (k) snprintf(buf, n, "%d threads, each a chunk of the batch (--parallel batch: %d chunks)", t, k);
    else snprintf(buf, n, "%d thread%s%s", t, t == 1 ? "" : "s", t > 1 ? " splitting each op (--parallel ops)" : "");
    return buf;
}

const char *tfm_run_gemm_str(char *buf, size_t n, int bf16) {
    if (!bf16) snprintf(buf, n, "%s", tfm_gemm_backend());
    else snprintf(buf, n, "%s; linear layers with bf16 operands (%s)", tfm_gemm_backend(),
                  tfm_bf16_hw() ? "AVX512_BF16" : "emulated: this CPU has no AVX512_BF16");
    return buf;
}

int tfm_run_resolve_threads(int *threads, int given, const char *resume, const tfm_run_config *stored) {
    int dflt = tfm_default_threads();
    int from_run = resume && !given && tfm_run_config_find(stored, "threads");
    if (!*threads) *threads = dflt;
    return from_run && *threads != dflt ? dflt : 0;
}

void tfm_run_config_line(const tfm_run_config *run, const char *cmd, char *line, size_t n) {
    size_t k = (size_t)snprintf(line, n, "%s config:", cmd);
    for (int i = 0; i < run->n && k < n; i++)
        if (strncmp(run->name[i], "data:", 5) && strncmp(run->name[i], "path:", 5) && *run->value[i])
            k += (size_t)snprintf(line + k, n - k, " --%s %s", run->name[i], run->value[i]);
}

int tfm_run_last_good_error(const tfm_run_result *r, const char *out, const char *resume) {
    char err[600];
    snprintf(err, sizeof err, "%s", tfm_last_error());
    tfm_error_kind kind = tfm_last_error_kind();
    if (r->saved_step >= 0)
        tfm_set_error_kind(kind, "%s; the last good checkpoint: %s (step %d)", err, out, r->saved_step);
    else if (resume)
        tfm_set_error_kind(kind, "%s; this run saved nothing: the last good checkpoint is %s (step %d)", err, resume,
                           r->start_step);
    else tfm_set_error_kind(kind, "%s; this run saved no checkpoint", err);
    return -1;
}

/* A regular file of at least one byte: what a fresh run would replace (an empty file holds no work; a device or
 * FIFO, e.g. --log-file /dev/stderr, is not replaced). */
static int holds_work(const char *path) {
    struct stat st;
    return path && !stat(path, &st) && S_ISREG(st.st_mode) && st.st_size > 0;
}

/* A checkpoint of kind that holds a run configuration: what --resume continues. Its kind into k[n] ("": none). */
static int is_run_of(const char *path, const char *kind, char *k, size_t n) {
    tfm_run_config c;
    if (tfm_checkpoint_kind(path, k, n)) k[0] = 0;
    if (strcmp(k, kind) || tfm_run_config_load(&c, path)) return 0;
    int has_run = c.n > 0;
    tfm_run_config_free(&c);
    return has_run;
}

int tfm_run_check_fresh(const char *kind, const char *out, const char *log_file) {
    char k[32];
    if (holds_work(out)) {
        if (is_run_of(out, kind, k, sizeof k))
            return tfm_set_error_kind(TFM_ERR_ARG, "--out %s exists (a checkpoint of an earlier run): continue it "
                                      "with --resume %s, or pass --overwrite to start a new run over it", out, out), -1;
        return tfm_set_error_kind(TFM_ERR_ARG, "--out %s exists (%s%s): pass --overwrite to replace it, or choose "
                                  "another --out", out, *k ? tfm_checkpoint_kind_desc(k) : "not a tfm checkpoint",
                                  *k && !strcmp(k, kind) ? " with no run to resume" : ""), -1;
    }
    if (holds_work(log_file))
        return tfm_set_error_kind(TFM_ERR_ARG, "--log-file %s exists and is not empty (the log of an earlier run): "
                                  "pass --overwrite to start a new log over it, or choose another --log-file (a "
                                  "--resume appends to it)", log_file), -1;
    return 0;
}
