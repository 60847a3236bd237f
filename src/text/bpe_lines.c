/* tfm_bpe_code_lines: encode or decode a whole text, line by line (the `tfm bpe encode|decode` filter,
 * usable from any program). The input is checked completely before anything is returned, so a bad line
 * leaves the caller with nothing half-written. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/bpe_internal.h"
#include "tfm/bpe.h"
#include "tfm/core.h"
#include "tfm/text.h"

/* Lines of buf split at '\n' in place (a '\r' stays part of its line, as with spm_encode); each line
 * must be valid UTF-8 without NUL bytes. */
char **bpe_split_lines(char *buf, size_t len, const char *name, int *n_lines) {
    size_t count = 0;
    for (size_t i = 0; i < len; i++) count += buf[i] == '\n';
    if (len && buf[len - 1] != '\n') count++;
    if (count > INT_MAX) return tfm_set_error("%s: too many lines", name), NULL;
    char **lines = malloc((count ? count : 1) * sizeof *lines);
    if (!lines) return tfm_set_error_kind(TFM_ERR_NOMEM, "%s: out of memory", name), NULL;
    size_t k = 0, start = 0;
    for (size_t i = 0; i <= len && k < count; i++) {
        if (i < len && buf[i] != '\n') continue;
        buf[i] = 0;
        const char *line = buf + start;
        size_t n = i - start;
        long bad = tfm_utf8_first_invalid(line, n);
        if (memchr(line, 0, n)) {
            free(lines);
            return tfm_set_error("%s:%zu: NUL byte (expected UTF-8 text)", name, k + 1), NULL;
        }
        if (bad >= 0) {
            free(lines);
            return tfm_set_error("%s:%zu: invalid UTF-8 (byte 0x%02x)", name, k + 1, (unsigned char)line[bad]), NULL;
        }
        lines[k++] = buf + start;
        start = i + 1;
    }
    *n_lines = (int)k;
    return lines;
}

/* Split a line on spaces in place into at most cap tokens (empty tokens skipped). */
int bpe_split_spaces(char *s, char **tok, int cap) {
    int n = 0;
    char *save = NULL;
    for (char *p = strtok_r(s, " ", &save); p && n < cap; p = strtok_r(NULL, " ", &save)) tok[n++] = p;
    return n;
}

static int decode_line(const tfm_bpe *m, int ids, char *line, char **s, const char *name, int lineno) {
    size_t len = strlen(line);
    char **tok = malloc((len / 2 + 2) * sizeof *tok);
    if (!tok) return tfm_set_error_kind(TFM_ERR_NOMEM, "%s: out of memory", name), -1;
    int n = bpe_split_spaces(line, tok, (int)(len / 2 + 2)), rc = 0;
    if (ids) {
        int *v = malloc((size_t)(n ? n : 1) * sizeof *v);
        if (!v) tfm_set_error_kind(TFM_ERR_NOMEM, "%s: out of memory", name), rc = -1;
        for (int i = 0; v && i < n && !rc; i++) {
            char *end;
            errno = 0;
            long x = strtol(tok[i], &end, 10);
            if (errno || *end || end == tok[i] || x < INT_MIN || x > INT_MAX)
                tfm_set_error("%s:%d: '%s' is not an id", name, lineno, tok[i]), rc = -1;
            else v[i] = (int)x;
        }
        if (!rc && !(*s = tfm_bpe_decode(m, v, n))) rc = tfm_prefix_error("%s:%d: ", name, lineno);
        free(v);
    } else if (!(*s = tfm_bpe_decode_pieces(m, (const char *const *)tok, n))) {
        rc = tfm_prefix_error("%s:%d: ", name, lineno);
    }
    free(tok);
    return rc;
}

static int encode_line(const tfm_bpe *m, int ids, const char *line, FILE *out, const char *name, int lineno) {
    if (!ids) {
        char *s = tfm_bpe_encode_pieces(m, line, strlen(line));
        if (!s) return tfm_prefix_error("%s:%d: ", name, lineno);
        fprintf(out, "%s\n", s);
        free(s);
        return 0;
    }
    int n;
    int *v = tfm_bpe_encode(m, line, strlen(line), &n);
    if (!v) return tfm_prefix_error("%s:%d: ", name, lineno);
    for (int i = 0; i < n; i++) fprintf(out, i ? " %d" : "%d", v[i]);
    fputc('\n', out);
    free(v);
    return 0;
}

char *tfm_bpe_code_lines(const tfm_bpe *m, int decode, int ids, char *text, size_t len, const char *name,
                         size_t *out_len) {
    int n_lines = 0, rc = 0;
    char **lines = bpe_split_lines(text, len, name, &n_lines);
    if (!lines) return NULL;
    char *res = NULL;
    size_t res_len = 0;
    FILE *out = open_memstream(&res, &res_len);
    if (!out) tfm_set_error_kind(TFM_ERR_NOMEM, "%s: out of memory", name), rc = -1;
    for (int i = 0; out && i < n_lines && !rc; i++) {
        if (!decode) {
            rc = encode_line(m, ids, lines[i], out, name, i + 1);
            continue;
        }
        char *s = NULL;
        rc = decode_line(m, ids, lines[i], &s, name, i + 1);
        if (s) fprintf(out, "%s\n", s);
        free(s);
    }
    if (out && fclose(out) && !rc) {
        tfm_set_error_kind(TFM_ERR_NOMEM, "%s: out of memory", name);
        rc = -1;
    }
    free(lines);
    if (rc) {
        free(res);
        return NULL;
    }
    *out_len = res_len;
    return res;
}
