/* Exit statuses and output checks shared by the commands: library errors -> exit status, a writable --out,
 * stdout write errors, the files of a command (cli.h). */
#include <errno.h>
#include <stdarg.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "tfm/core.h"

int cli_exit_status(void) {
    switch (tfm_last_error_kind()) {
    case TFM_ERR_DATA: return CLI_EXIT_DATA;
    case TFM_ERR_IO: return CLI_EXIT_IO;
    case TFM_ERR_ARG: return CLI_EXIT_USAGE;
    default: return CLI_EXIT_ERROR;
    }
}

int cli_fail(const char *cmd, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    cli_vprint_error(cmd, fmt, ap);
    va_end(ap);
    return cli_exit_status();
}

int cli_check_threads(const char *cmd, int threads) {
    if (threads >= 0 && threads <= TFM_MAX_THREADS) return 0;
    return cli_error(cmd, "--threads must be in 0..%d (0 = OMP_NUM_THREADS, else the CPUs tfm may use), got %d",
                     TFM_MAX_THREADS, threads);
}

int cli_check_range(const char *cmd, const char *flag, int v, int lo, int hi) {
    if (v >= lo && v <= hi) return 0;
    return cli_error(cmd, "--%s must be in %d..%d, got %d", flag, lo, hi, v);
}

int cli_check_files(const char *cmd, const tfm_file_use *files, int n) {
    if (!tfm_check_files(files, n)) return 0;
    cli_error(cmd, "%s", tfm_last_error());
    return tfm_last_error_kind() == TFM_ERR_IO ? CLI_EXIT_IO : CLI_EXIT_USAGE;
}

int cli_finish_stdout(const char *cmd, int rc) {
    errno = 0;
    int bad = fflush(stdout) != 0;
    int err = errno;
    if (!bad && !ferror(stdout)) return rc;
    fprintf(stderr, "tfm %s: cannot write standard output: %s\n", cmd, err ? strerror(err) : "write error");
    return rc ? rc : CLI_EXIT_IO;
}

int cli_make_dir(const char *cmd, const char *flag, const char *path) {
    char buf[4096];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf)
        return cli_error(cmd, "%s %.64s...: path too long", flag, path), CLI_EXIT_USAGE;
    for (char *p = buf + 1;; p++) {   /* each prefix ending at a '/', then the whole path */
        int end = !*p;
        if (*p != '/' && !end) continue;
        *p = 0;
        struct stat st;
        if (mkdir(buf, 0777) && errno != EEXIST) {
            cli_error(cmd, "%s %s: cannot create directory %s: %s", flag, path, buf, strerror(errno));
            return CLI_EXIT_IO;
        }
        if (stat(buf, &st) || !S_ISDIR(st.st_mode)) {
            cli_error(cmd, "%s %s: %s is not a directory", flag, path, buf);
            return CLI_EXIT_IO;
        }
        if (end) return 0;
        *p = '/';
    }
}
