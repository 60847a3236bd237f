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

static int parse_int(const char *s, int *out) {
    errno = 0;
    char *end;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < INT_MIN || v > INT_MAX) return -1;
    *out = (int)v;
    return 0;
}

static int parse_float(const char *s, float *out) {
    errno = 0;
    char *end;
    double v = strtod(s, &end);
    if (errno || end == s || *end || v != v || v > 3.4e38 || v < -3.4e38) return -1;
    *out = (float)v;
    return 0;
}

/* ---------------------------------------------------------------- did you mean */
/* The other family's name for a flag: train-lm and train-mt keep their reference configs' names (nanoGPT's,
 * d2l's / Vaswani's), and generate / translate theirs; a flag of one given to the other gets the name here. */
static const struct { const char *given, *meant, *why; } other_family[] = {
    {"epochs", "iters", "train-lm counts the run in optimizer steps"},
    {"num-epochs", "iters", "train-lm counts the run in optimizer steps"},
    {"iters", "epochs", "train-mt counts the run in passes over the corpus; --max-steps stops it at a step"},
    {"max-iters", "iters", NULL},
    {"n-embd", "d-model", "the translators' width"},
    {"d-model", "n-embd", "the GPT's width"},
    {"block-size", "max-len", "train-mt's sentence length"},
    {"max-len", "block-size", "train-lm's context length"},
    {"max-tokens", "tokens", "generate's length in tokens"},
    {"tokens", "max-output", "the decoding limit of translate and attention"},
    {"max-output", "tokens", "generate's length in tokens"},
    {"num-beams", "beam", NULL},
    {"beam-size", "beam", NULL},
    {"data", "tsv", "a parallel corpus: --tsv FILE or --src FILE --tgt FILE"},
    {"tsv", "data", "train-lm's text file"},
    {"src", "data", "train-lm's text file"},
    {"out-dir", "out", NULL},
    {"output", "out", NULL},
    {"o", "out", NULL},
};

/* Optimal string alignment distance (Levenshtein with adjacent transpositions) of a[0..la) and b; names are
 * short (<= 63 bytes: longer ones are too far from any flag to matter). */
static int edit_distance(const char *a, size_t la, const char *b) {
    size_t lb = strlen(b);
    if (la > 63 || lb > 63) return 99;
    int d[64][64];
    for (size_t i = 0; i <= la; i++) d[i][0] = (int)i;
    for (size_t j = 0; j <= lb; j++) d[0][j] = (int)j;
    for (size_t i = 1; i <= la; i++)
        for (size_t j = 1; j <= lb; j++) {
            int c = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (d[i - 1][j] + 1 < c) c = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < c) c = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < c)
                c = d[i - 2][j - 2] + 1;
            d[i][j] = c;
        }
    return d[la][lb];
}

/* Are a (la bytes) and b the same '-'-separated words in another order ("lr-min" and "min-lr")? */
static int same_words(const char *a, size_t la, const char *b) {
    if (strlen(b) != la) return 0;
    for (const char *w = a; w < a + la;) {   /* every word of a is a word of b (same length: then b has no other) */
        const char *e = memchr(w, '-', (size_t)(a + la - w));
        size_t n = e ? (size_t)(e - w) : (size_t)(a + la - w);
        int found = 0;
        for (const char *v = b; *v && !found;) {
            size_t m = strcspn(v, "-");
            found = m == n && !strncmp(v, w, n);
            v += m + (v[m] == '-');
        }
        if (!found) return 0;
        w += n + 1;
    }
    return 1;
}

static const cli_flag *find_flag(const cli_spec *s, const char *name, size_t len) {
    for (int k = 0; k < s->n_flags; k++)
        if (strlen(s->flags[k].name) == len && !strncmp(s->flags[k].name, name, len)) return &s->flags[k];
    return NULL;
}

/* The flag an unknown --name probably meant (NULL: none close): the same name with '-' for '_' and in
 * lower case, the other family's name (*why: a note, may be NULL), the same words in another order
 * (--lr-min: --min-lr), else the nearest name by edit distance
 * (at most 1 edit for names up to 4 characters, 2 up to 8, 3 beyond). */
const char *cli_suggest_flag(const cli_spec *s, const char *name, size_t len, const char **why) {
    char norm[64];
    *why = NULL;
    if (len >= sizeof norm) return NULL;
    for (size_t i = 0; i < len; i++) {
        char c = name[i];
        norm[i] = c == '_' ? '-' : (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c;
    }
    norm[len] = 0;
    const cli_flag *f = find_flag(s, norm, len);
    if (f) return f->name;
    for (size_t i = 0; i < sizeof other_family / sizeof *other_family; i++)
        if (!strcmp(norm, other_family[i].given) && (f = find_flag(s, other_family[i].meant, strlen(other_family[i].meant)))) {
            *why = other_family[i].why;
            return f->name;
        }
    for (int k = 0; k < s->n_flags; k++)
        if (same_words(norm, len, s->flags[k].name)) return s->flags[k].name;
    int best = 99;
    for (int k = 0; k < s->n_flags; k++) {
        int d = edit_distance(norm, len, s->flags[k].name);
        if (d < best) best = d, f = &s->flags[k];
    }
    int limit = len <= 4 ? 1 : len <= 8 ? 2 : 3;
    return f && best <= limit ? f->name : NULL;
}

static void unknown_flag(const cli_spec *s, const char *name, size_t len) {
    const char *why, *meant = cli_suggest_flag(s, name, len, &why);
    if (!meant) {
        cli_error(s->cmd, "unknown flag --%.*s (see tfm %s --help)", (int)len, name, s->cmd);
    } else if (why) {
        cli_error(s->cmd, "unknown flag --%.*s: did you mean --%s? (%s; see tfm %s --help)", (int)len, name, meant, why,
                  s->cmd);
    } else {
        cli_error(s->cmd, "unknown flag --%.*s: did you mean --%s? (see tfm %s --help)", (int)len, name, meant, s->cmd);
    }
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
            cli_flag *fl = (cli_flag *)find_flag(s, name, len);
            if (!fl) {
                unknown_flag(s, name, len);
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
            if (fl->type == FLAG_INT && parse_int(val, (int *)fl->dst)) {
                cli_error(s->cmd, "flag --%s: '%s' is not an integer", fl->name, val);
                return CLI_EXIT_USAGE;
            }
            if (fl->type == FLAG_FLOAT && parse_float(val, (float *)fl->dst)) {
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
