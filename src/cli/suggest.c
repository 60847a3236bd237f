/* Did you mean: the flag an unknown --name probably meant (cli.h, cli_suggest_flag), and the error line. */
#include <string.h>

#include "cli/cli.h"

static const cli_flag *find_flag(const cli_spec *s, const char *name, size_t len) {
    for (int k = 0; k < s->n_flags; k++)
        if (strlen(s->flags[k].name) == len && !strncmp(s->flags[k].name, name, len)) return &s->flags[k];
    return NULL;
}

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

void cli_unknown_flag(const cli_spec *s, const char *name, size_t len) {
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

