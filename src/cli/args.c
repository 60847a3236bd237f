/* Flag parsing shared by every command. */
#include "cli/cli.h"
#include "tfm/core.h"
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void cli_vprint_error(const char *cmd, const char *fmt, va_list ap) {
    fprintf(stderr, "tfm %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
}

int cli_error(const char *cmd, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    cli_vprint_error(cmd, fmt, ap);
    va_end(ap);
    return CLI_EXIT_USAGE;
}

int cli_stderr_is_tty(void) { return isatty(2); }

static const char *type_meta(cli_flag_type t) {
    switch (t) {
    case FLAG_INT: return "N";
    case FLAG_FLOAT: return "X";
    case FLAG_STR: return "S";
    default: return "";
    }
}

/* " (default V)", with control characters in a string default written as C escapes (\\n) so the
 * help stays one line a flag. */
static void format_default(const cli_flag *fl, char *buf, size_t n) {
    if (fl->type == FLAG_INT) snprintf(buf, n, " (default %d)", *(int *)fl->dst);
    else if (fl->type == FLAG_FLOAT) snprintf(buf, n, " (default %g)", *(float *)fl->dst);
    if (fl->type != FLAG_STR || !*(const char **)fl->dst) return;
    const char *v = *(const char **)fl->dst;
    size_t k = (size_t)snprintf(buf, n, " (default ");
    for (; *v && k + 8 < n; v++) {
        unsigned char c = (unsigned char)*v;
        if (c == '\n') k += (size_t)snprintf(buf + k, n - k, "\\n");
        else if (c == '\t') k += (size_t)snprintf(buf + k, n - k, "\\t");
        else if (c < 32 || c == 127) k += (size_t)snprintf(buf + k, n - k, "\\x%02x", c);
        else buf[k++] = (char)c;
    }
    snprintf(buf + k, n - k, ")");
}

void cli_usage(const cli_spec *s, FILE *f) {
    fprintf(f, "usage: tfm %s %s\n", s->cmd, s->synopsis);
    if (s->description) fprintf(f, "\n%s\n", s->description);
    if (s->n_flags) fprintf(f, "\noptions:\n");
    for (int i = 0; i < s->n_flags; i++) {
        const cli_flag *fl = &s->flags[i];
        char left[64];
        snprintf(left, sizeof left, "--%s %s", fl->name, type_meta(fl->type));
        char def[96] = "";
        if (!strstr(fl->help, "(default")) format_default(fl, def, sizeof def);   /* the help may state its own */
        fprintf(f, "  %-24s %s%s\n", left, fl->help, def);
    }
    fprintf(f, "  %-24s %s\n", "--help", "show this help");
}

int cli_parse_int(const char *s, int *out) {
    errno = 0;
    char *end;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < INT_MIN || v > INT_MAX) return -1;
    *out = (int)v;
    return 0;
}

int cli_parse_float(const char *s, float *out) {
    errno = 0;
    char *end;
    double v = strtod(s, &end);
    if (errno || end == s || *end || v != v || v > 3.4e38 || v < -3.4e38) return -1;
    *out = (float)v;
    return 0;
}

int cli_parse(cli_spec *s, int argc, char **argv, const char **pos, int *n_pos) {
    *n_pos = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            cli_usage(s, stdout);
            return 1;
        }
        if (a[0] == '-' && a[1] == '-' && a[2]) {
            const char *name = a + 2;
            const char *eq = strchr(name, '=');
            size_t len = eq ? (size_t)(eq - name) : strlen(name);
            cli_flag *fl = NULL;
            for (int k = 0; k < s->n_flags; k++)
                if (strlen(s->flags[k].name) == len && !strncmp(s->flags[k].name, name, len)) fl = &s->flags[k];
            if (!fl) {
                cli_unknown_flag(s, name, len);
                return CLI_EXIT_USAGE;
            }
            fl->seen = 1;
            if (fl->type == FLAG_BOOL) {   /* --flag, or --flag=1 / --flag=0 (to turn off a preset's) */
                if (eq && strcmp(eq + 1, "0") && strcmp(eq + 1, "1")) {
                    cli_error(s->cmd, "flag --%s takes no value (or =0 / =1)", fl->name);
                    return CLI_EXIT_USAGE;
                }
                *(int *)fl->dst = !eq || eq[1] == '1';
                continue;
            }
            const char *val = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
            if (!val) {
                cli_error(s->cmd, "flag --%s needs a value", fl->name);
                return CLI_EXIT_USAGE;
            }
            if (fl->type == FLAG_INT && cli_parse_int(val, (int *)fl->dst)) {
                cli_error(s->cmd, "flag --%s: '%s' is not an integer", fl->name, val);
                return CLI_EXIT_USAGE;
            }
            if (fl->type == FLAG_FLOAT && cli_parse_float(val, (float *)fl->dst)) {
                cli_error(s->cmd, "flag --%s: '%s' is not a number", fl->name, val);
                return CLI_EXIT_USAGE;
            }
            if (fl->type == FLAG_STR) *(const char **)fl->dst = val;
            continue;
        }
        if (*n_pos >= s->max_pos) {
            cli_error(s->cmd, "unexpected argument '%s' (see tfm %s --help)", a, s->cmd);
            return CLI_EXIT_USAGE;
        }
        pos[(*n_pos)++] = a;
    }
    if (*n_pos < s->min_pos) {
        cli_error(s->cmd, "missing argument: usage: tfm %s %s", s->cmd, s->synopsis);
        return CLI_EXIT_USAGE;
    }
    return 0;
}

int cli_flag_seen(const cli_spec *s, const char *name) {
    for (int i = 0; i < s->n_flags; i++)
        if (!strcmp(s->flags[i].name, name)) return s->flags[i].seen;
    return 0;
}
