/* Output checks shared by the commands: stdout write errors, --out that is one of the inputs (cli.h). */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"

int cli_finish_stdout(const char *cmd, int rc) {
    errno = 0;
    int bad = fflush(stdout) != 0;
    int err = errno;
    if (!bad && !ferror(stdout)) return rc;
    fprintf(stderr, "tfm %s: cannot write standard output: %s\n", cmd, err ? strerror(err) : "write error");
    return rc ? rc : 1;
}

int cli_check_out_not_input(const char *cmd, const char *out, const char *const *inputs, int n) {
    struct stat so, si;
    if (stat(out, &so)) return 0;   /* does not exist yet: cannot be an input */
    for (int i = 0; i < n; i++)
        if (inputs[i] && !stat(inputs[i], &si) && si.st_dev == so.st_dev && si.st_ino == so.st_ino)
            return cli_error(cmd, "--out %s is the input file %s: refusing to overwrite it", out, inputs[i]);
    return 0;
}
