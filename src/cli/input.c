/* Reading text input a line at a time (translate's stdin and --prefix-file). */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "tfm/text.h"

int cli_stdin_ready(void) {
#ifdef __GLIBC__
    if (stdin->_IO_read_ptr < stdin->_IO_read_end) return 1;   /* bytes already buffered by stdio */
#endif
    struct pollfd p = {0, POLLIN, 0};
    return poll(&p, 1, 0) > 0 && (p.revents & POLLIN);
}

/* One line of f without its line end into *buf; 0, 1 at end of file, or an exit status (NUL, bad UTF-8). */
int cli_read_line(const char *cmd, FILE *f, const char *name, long line_no, char **buf) {
    size_t cap = 0;
    *buf = NULL;
    ssize_t len = getline(buf, &cap, f);
    if (len < 0) {
        free(*buf), *buf = NULL;
        return 1;
    }
    while (len > 0 && ((*buf)[len - 1] == '\n' || (*buf)[len - 1] == '\r')) (*buf)[--len] = 0;
    long bad = (size_t)len != strlen(*buf) ? -2 : tfm_utf8_first_invalid(*buf, (size_t)len);
    if (bad == -1) return 0;
    free(*buf), *buf = NULL;
    if (bad == -2) return cli_error(cmd, "%s:%ld: NUL byte in input", name, line_no), CLI_EXIT_DATA;
    return cli_error(cmd, "%s:%ld: invalid UTF-8 at byte %ld", name, line_no, bad + 1), CLI_EXIT_DATA;
}
