/* Training logs: a minimal JSON-lines reader for flat objects (docs/LOGS.md) and the loss / BLEU /
 * learning-rate curves drawn from them (tfm plot). */
#include "tfm/eval.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tfm/core.h"
#include "tfm/text.h"

/* ---------------------------------------------------------------- JSON (one line) */
typedef struct {
    const char *s;      /* the line */
    size_t i;           /* cursor */
    const char *err;    /* first error (static text) */
} json_cursor;

#define JSON_MAX_DEPTH 32

static void skip_ws(json_cursor *c) {
    while (c->s[c->i] == ' ' || c->s[c->i] == '\t' || c->s[c->i] == '\r' || c->s[c->i] == '\n') c->i++;
}

static int fail(json_cursor *c, const char *what) {
    if (!c->err) c->err = what;
    return -1;
}

static int hexval(char h) {
    return h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
}

/* A string at the cursor; its decoded ASCII text (non-ASCII escapes as '?') goes to out (truncated to
 * outn - 1 bytes, *truncated set). */
static int parse_string(json_cursor *c, char *out, size_t outn, int *truncated) {
    size_t o = 0;
    *truncated = 0;
    if (c->s[c->i] != '"') return fail(c, "expected a string");
    c->i++;
    for (;;) {
        unsigned char ch = (unsigned char)c->s[c->i];
        char put;
        if (!ch) return fail(c, "unterminated string");
        if (ch < 0x20) return fail(c, "control character in a string");
        c->i++;
        if (ch == '"') break;
        if (ch == '\\') {
            char e = c->s[c->i++];
            switch (e) {
            case '"': case '\\': case '/': put = e; break;
            case 'b': put = '\b'; break;
            case 'f': put = '\f'; break;
            case 'n': put = '\n'; break;
            case 'r': put = '\r'; break;
            case 't': put = '\t'; break;
            case 'u': {
                int v = 0;
                for (int k = 0; k < 4; k++) {
                    int h = hexval(c->s[c->i]);
                    if (h < 0) return fail(c, "bad \\u escape in a string");
                    v = v * 16 + h;
                    c->i++;
                }
                put = v < 0x80 ? (char)v : '?';
                break;
            }
            default: return fail(c, "bad escape in a string");
            }
        } else {
            put = (char)ch;
        }
        if (o + 1 < outn) out[o++] = put;
        else *truncated = 1;
    }
    if (outn) out[o] = 0;
    return 0;
}

/* A JSON number (or Python's NaN / Infinity / -Infinity) at the cursor. */
static int parse_number(json_cursor *c, double *v) {
    const char *p = c->s + c->i;
    static const char *const specials[] = {"NaN", "Infinity", "-Infinity"};
    static const double special_vals[] = {NAN, INFINITY, -INFINITY};
    for (int k = 0; k < 3; k++)
        if (!strncmp(p, specials[k], strlen(specials[k]))) {
            *v = special_vals[k];
            c->i += strlen(specials[k]);
            return 0;
        }
    size_t j = 0;
    if (p[j] == '-') j++;
    if (p[j] == '0') j++;
    else if (p[j] >= '1' && p[j] <= '9') while (p[j] >= '0' && p[j] <= '9') j++;
    else return fail(c, "bad value (expected a number, string, true, false, null, object or array)");
    if (p[j] == '.') {
        j++;
        if (!(p[j] >= '0' && p[j] <= '9')) return fail(c, "bad number (digit expected after '.')");
        while (p[j] >= '0' && p[j] <= '9') j++;
    }
    if (p[j] == 'e' || p[j] == 'E') {
        j++;
        if (p[j] == '+' || p[j] == '-') j++;
        if (!(p[j] >= '0' && p[j] <= '9')) return fail(c, "bad number (digit expected in the exponent)");
        while (p[j] >= '0' && p[j] <= '9') j++;
    }
    *v = strtod(p, NULL);  /* the grammar above is a subset of strtod's */
    c->i += j;
    return 0;
}

static int parse_value(json_cursor *c, int depth, double *num, int *is_num);

/* An object or array value nested in the record: parsed for validity, its contents ignored. */
static int skip_container(json_cursor *c, int depth) {
    char open = c->s[c->i], close = open == '{' ? '}' : ']';
    if (depth >= JSON_MAX_DEPTH) return fail(c, "nested too deeply");
    c->i++;
    skip_ws(c);
    if (c->s[c->i] == close) {
        c->i++;
        return 0;
    }
    for (;;) {
        double d;
        int isn, trunc;
        char key[8];
        skip_ws(c);
        if (open == '{') {
            if (parse_string(c, key, sizeof key, &trunc)) return -1;
            skip_ws(c);
            if (c->s[c->i++] != ':') return fail(c, "expected ':' after a key");
            skip_ws(c);
        }
        if (parse_value(c, depth + 1, &d, &isn)) return -1;
        skip_ws(c);
        char ch = c->s[c->i++];
        if (ch == close) return 0;
        if (ch != ',') return fail(c, open == '{' ? "expected ',' or '}' in an object" : "expected ',' or ']' in an array");
    }
}

/* Any value; *is_num = 1 and *num set for a number, else *is_num = 0. */
static int parse_value(json_cursor *c, int depth, double *num, int *is_num) {
    const char *p = c->s + c->i;
    char tmp[8];
    int trunc;
    *is_num = 0;
    if (*p == '"') return parse_string(c, tmp, sizeof tmp, &trunc);
    if (*p == '{' || *p == '[') return skip_container(c, depth);
    static const char *const lits[] = {"true", "false", "null"};
    for (int k = 0; k < 3; k++)
        if (!strncmp(p, lits[k], strlen(lits[k]))) {
            c->i += strlen(lits[k]);
            return 0;
        }
    if (parse_number(c, num)) return -1;
    *is_num = 1;
    return 0;
}

/* ---------------------------------------------------------------- training log */
static const char *const field_names[TFM_LOG_N_FIELDS] = {"step", "epoch", "loss", "lr", "tokens_per_s",
                                                          "valid_loss", "valid_bleu", "valid_chrf"};

const char *tfm_train_log_field_name(int f) { return f >= 0 && f < TFM_LOG_N_FIELDS ? field_names[f] : "?"; }

static int field_index(const char *key) {
    for (int f = 0; f < TFM_LOG_N_FIELDS; f++)
        if (!strcmp(key, field_names[f])) return f;
    return -1;
}

/* One line into rec (TFM_LOG_N_FIELDS values, NAN where absent or not a number) and given (1 where the key is
 * present, whatever its value). Returns 0 or -1 with c->err set. */
static int parse_record(json_cursor *c, double *rec, int *given) {
    for (int f = 0; f < TFM_LOG_N_FIELDS; f++) rec[f] = NAN, given[f] = 0;
    skip_ws(c);
    if (c->s[c->i] != '{') return fail(c, "expected a JSON object ('{')");
    c->i++;
    skip_ws(c);
    if (c->s[c->i] == '}') {
        c->i++;
    } else {
        for (;;) {
            char key[32];
            int trunc, is_num;
            double v;
            skip_ws(c);
            if (parse_string(c, key, sizeof key, &trunc)) return -1;
            skip_ws(c);
            if (c->s[c->i] != ':') return fail(c, "expected ':' after a key");
            c->i++;
            skip_ws(c);
            if (parse_value(c, 1, &v, &is_num)) return -1;
            int f = trunc ? -1 : field_index(key);
            if (f >= 0) given[f] = 1;
            if (f >= 0 && is_num) rec[f] = v;  /* strings, booleans, null: no value */
            skip_ws(c);
            char ch = c->s[c->i];
            if (ch == '}') {
                c->i++;
                break;
            }
            if (ch != ',') return fail(c, "expected ',' or '}' after a value");
            c->i++;
        }
    }
    skip_ws(c);
    if (c->s[c->i]) return fail(c, "unexpected text after the object");
    return 0;
}

void tfm_train_log_free(tfm_train_log *log) {
    for (int f = 0; f < TFM_LOG_N_FIELDS; f++) free(log->v[f]);
    memset(log, 0, sizeof *log);
}

int tfm_train_log_load(tfm_train_log *log, const char *path) {
    memset(log, 0, sizeof *log);
    size_t len;
    char *buf = tfm_read_text_file(path, &len);
    if (!buf) return -1;
    int n_lines;
    char **lines = tfm_split_lines(buf, len, &n_lines);
    int rc = -1;
    if (!lines) {
        tfm_set_error_kind(TFM_ERR_NOMEM, "%s: out of memory", path);
        goto done;
    }
    for (int f = 0; f < TFM_LOG_N_FIELDS; f++)
        if (!(log->v[f] = malloc(((size_t)n_lines + 1) * sizeof(float)))) {
            tfm_set_error_kind(TFM_ERR_NOMEM, "%s: out of memory", path);
            goto done;
        }
    for (int i = 0; i < n_lines; i++) {
        json_cursor c = {lines[i], 0, NULL};
        skip_ws(&c);
        if (!lines[i][c.i]) continue;  /* blank line */
        c.i = 0;
        double rec[TFM_LOG_N_FIELDS];
        int given[TFM_LOG_N_FIELDS];
        if (parse_record(&c, rec, given)) {
            tfm_set_error("%s:%d: column %zu: %s", path, i + 1, c.i + 1, c.err);
            goto done;
        }
        log->n_lines++;
        for (int f = 0; f < TFM_LOG_N_FIELDS; f++)   /* the curves are floats: a larger value cannot be drawn */
            if (isfinite(rec[f]) && fabs(rec[f]) > FLT_MAX) {
                tfm_set_error("%s:%d: \"%s\" %g is beyond what a plot can draw (|x| <= %g)", path, i + 1,
                              field_names[f], rec[f], (double)FLT_MAX);
                goto done;
            }
        if (!isfinite(rec[TFM_LOG_STEP])) continue;  /* no step: not a point of any curve */
        for (int f = 0; f < TFM_LOG_N_FIELDS; f++) log->n_undrawn += given[f] && !isfinite(rec[f]);
        for (int f = 0; f < TFM_LOG_N_FIELDS; f++) log->v[f][log->n] = (float)rec[f];
        log->n++;
    }
    if (!log->n) {
        tfm_set_error("%s: no line has a numeric \"step\" (%d JSON lines read): nothing to plot", path, log->n_lines);
        goto done;
    }
    rc = 0;
done:
    if (rc) tfm_train_log_free(log), tfm_error_in_data();
    free(lines);
    free(buf);
    return rc;
}

/* ---------------------------------------------------------------- plot */
/* The (step, value) points of one field where the value is finite, packed into x/y. */
static int pack(const tfm_train_log *log, int field, float *x, float *y) {
    int k = 0;
    for (int i = 0; i < log->n; i++)
        if (isfinite(log->v[field][i])) {
            x[k] = log->v[TFM_LOG_STEP][i];
            y[k++] = log->v[field][i];
        }
    return k;
}

int tfm_train_log_plot(const tfm_train_log *log, const char *svg_path, const char *title) {
    static const struct {
        int panel, field;
        const char *label;
        tfm_series_style style;
    } curves[] = {
        {0, TFM_LOG_LOSS, "train loss", TFM_SERIES_LINE},
        {0, TFM_LOG_VALID_LOSS, "valid loss", TFM_SERIES_LINE_MARKERS},
        {1, TFM_LOG_VALID_BLEU, "valid BLEU", TFM_SERIES_LINE_MARKERS},
        {1, TFM_LOG_VALID_CHRF, "valid chrF2", TFM_SERIES_LINE_MARKERS},
        {2, TFM_LOG_LR, "learning rate", TFM_SERIES_LINE},
    };
    enum { N_CURVES = sizeof curves / sizeof curves[0] };
    static const char *const ylabels[3] = {"loss", "BLEU / chrF2", "learning rate"};
    float xmin = INFINITY, xmax = -INFINITY;  /* one step axis for every panel */
    for (int i = 0; i < log->n; i++)
        for (size_t k = 0; k < N_CURVES; k++)
            if (isfinite(log->v[curves[k].field][i]) && isfinite(log->v[TFM_LOG_STEP][i])) {
                xmin = fminf(xmin, log->v[TFM_LOG_STEP][i]);
                xmax = fmaxf(xmax, log->v[TFM_LOG_STEP][i]);
            }
    float *xy = malloc(2 * (size_t)N_CURVES * ((size_t)log->n + 1) * sizeof *xy);
    if (!xy) {
        tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory plotting '%s'", svg_path);
        return -1;
    }
    tfm_series series[N_CURVES];
    tfm_line_panel panels[3];
    int n_panels = 0, n_series = 0;
    for (int p = 0; p < 3; p++) {
        int first = n_series;
        for (int k = 0; k < N_CURVES; k++) {
            if (curves[k].panel != p) continue;
            float *x = xy + 2 * (size_t)k * ((size_t)log->n + 1), *y = x + log->n + 1;
            int n = pack(log, curves[k].field, x, y);
            if (n) series[n_series++] = (tfm_series){curves[k].label, x, y, n, curves[k].style};
        }
        if (n_series == first) continue;
        panels[n_panels++] = (tfm_line_panel){series + first, n_series - first, {NULL, "step", ylabels[p], 480, 360}, xmin, xmax};
    }
    int rc = -1;
    if (!n_panels)
        tfm_set_error("no loss, valid_loss, valid_bleu, valid_chrf or lr values to plot (%d records with a step)", log->n);
    else
        rc = tfm_svg_line_panels(svg_path, panels, n_panels, title);
    free(xy);
    return rc;
}
