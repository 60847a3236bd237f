/* Request bodies -> checked structs (request.h). Every field is checked for type, range and encoding here;
 * the handlers (api.c) only check what needs the loaded models (language pairs, the beam). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <cjson/cJSON.h>

#include "http/request.h"
#include "tfm/text.h"

int http_fail(http_error *e, int status, const char *param, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    e->status = status;
    snprintf(e->param, sizeof e->param, "%s", param ? param : "");
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    return -1;
}

const char *http_quote(const char *s, char *out, size_t n) {
    size_t k = 0;
    for (size_t i = 0; s[i];) {
        unsigned char c = (unsigned char)s[i];
        size_t len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;   /* from the lead byte */
        if (strnlen(s + i, len) < len || tfm_utf8_first_invalid(s + i, len) >= 0) len = 1, c = 0;   /* not a character */
        if (k + len >= n) break;
        if (c < 0x20 || c == 0x7F) out[k++] = '?', i += len;
        else memcpy(out + k, s + i, len), k += len, i += len;
    }
    out[k] = 0;
    return out;
}

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

http_body_kind http_body_kind_of(const char *ct, const char *body, size_t n) {
    if (!ct || !ct[0] || !strncasecmp(ct, "application/json", 16)) return BODY_JSON;
    if (strncasecmp(ct, "application/x-www-form-urlencoded", 33)) return BODY_UNSUPPORTED;
    size_t i = 0;
    while (i < n && is_space(body[i])) i++;
    return i < n && body[i] == '{' ? BODY_JSON : BODY_FORM;
}

/* Code points of valid UTF-8 s. */
static long chars_of(const char *s) {
    long n = 0;
    for (; *s; s++) n += ((unsigned char)*s & 0xC0) != 0x80;
    return n;
}

/* A copy of a text field: valid UTF-8, no NUL, at most max_chars code points (max_chars < 0: any). */
static char *text_field(const char *s, size_t len, const char *name, long max_chars, const char *flag, http_error *e) {
    if (memchr(s, 0, len)) return http_fail(e, 400, name, "%s contains a NUL byte", name), NULL;
    long bad = tfm_utf8_first_invalid(s, len);
    if (bad >= 0) return http_fail(e, 400, name, "%s is not valid UTF-8 (byte %ld)", name, bad + 1), NULL;
    char *c = malloc(len + 1);
    if (!c) return http_fail(e, 500, name, "out of memory"), NULL;
    memcpy(c, s, len);
    c[len] = 0;
    long nc = chars_of(c);
    if (max_chars >= 0 && nc > max_chars) {
        free(c);
        return http_fail(e, 400, name, "%s has %ld characters, the limit is %ld (%s)", name, nc, max_chars, flag), NULL;
    }
    return c;
}

/* ---------------------------------------------------------------- JSON */
static cJSON *parse_object(const char *body, size_t n, http_error *e) {
    if (n == 0) return http_fail(e, 400, "", "empty body (expected a JSON object)"), NULL;
    const char *end = NULL;
    cJSON *j = cJSON_ParseWithLengthOpts(body, n, &end, 0);
    if (!j) {
        long at = end && end >= body && end <= body + n ? (long)(end - body) + 1 : 0;
        return http_fail(e, 400, "", "invalid JSON (at byte %ld)", at), NULL;
    }
    while (end && end < body + n && is_space(*end)) end++;
    if (end && end < body + n && *end) {
        cJSON_Delete(j);
        return http_fail(e, 400, "", "invalid JSON: bytes after the object (at byte %ld)", (long)(end - body) + 1), NULL;
    }
    if (!cJSON_IsObject(j)) {
        cJSON_Delete(j);
        return http_fail(e, 400, "", "the body must be a JSON object"), NULL;
    }
    return j;
}

static const cJSON *field(const cJSON *o, const char *name) {
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(o, name);
    return f && !cJSON_IsNull(f) ? f : NULL;   /* null = absent */
}

/* An optional string field: 0 (absent: *out NULL), or -1 with e. */
static int json_str(const cJSON *o, const char *name, long max_chars, const char *flag, char **out, http_error *e) {
    const cJSON *f = field(o, name);
    *out = NULL;
    if (!f) return 0;
    if (!cJSON_IsString(f)) return http_fail(e, 400, name, "Invalid request: %s must be a string", name);
    return (*out = text_field(f->valuestring, strlen(f->valuestring), name, max_chars, flag, e)) ? 0 : -1;
}

/* An optional number in [lo, hi] (integral if integer); def when absent. */
static int json_num(const cJSON *o, const char *name, double lo, double hi, int integer, double def, double *out,
                    http_error *e) {
    const cJSON *f = field(o, name);
    *out = def;
    if (!f) return 0;
    double v = f->valuedouble;
    if (!cJSON_IsNumber(f) || !(v >= lo && v <= hi) || (integer && v != floor(v)))
        return integer ? http_fail(e, 400, name, "%s must be an integer in %.0f..%.0f", name, lo, hi)
                       : http_fail(e, 400, name, "%s must be a number in [%g, %g]", name, lo, hi);
    *out = v;
    return 0;
}

static int json_bool(const cJSON *o, const char *name, int *out, http_error *e) {
    const cJSON *f = field(o, name);
    *out = 0;
    if (!f) return 0;
    if (!cJSON_IsBool(f)) return http_fail(e, 400, name, "%s must be true or false", name);
    *out = cJSON_IsTrue(f);
    return 0;
}

/* q: a string or an array of strings. */
static int json_q(const cJSON *o, const http_limits *lim, http_translate_req *r, http_error *e) {
    const cJSON *q = field(o, "q");
    if (!q) return http_fail(e, 400, "q", "Invalid request: missing q parameter");
    int n = cJSON_IsString(q) ? 1 : cJSON_IsArray(q) ? cJSON_GetArraySize(q) : -1;
    if (n < 0) return http_fail(e, 400, "q", "Invalid request: q must be a string or an array of strings");
    if (n > lim->max_items)
        return http_fail(e, 400, "q", "q has %d items, the limit is %d (--max-items)", n, lim->max_items);
    r->q_array = cJSON_IsArray(q);
    if (!(r->q = calloc((size_t)(n > 0 ? n : 1), sizeof(char *)))) return http_fail(e, 500, "q", "out of memory");
    const cJSON *it = r->q_array ? q->child : q;
    for (int i = 0; i < n; i++, it = it->next) {
        char name[32];
        snprintf(name, sizeof name, r->q_array ? "q[%d]" : "q", i);
        if (!cJSON_IsString(it)) return http_fail(e, 400, "q", "Invalid request: %s must be a string", name);
        if (!(r->q[i] = text_field(it->valuestring, strlen(it->valuestring), name, lim->max_chars, "--max-chars", e)))
            return -1;
        r->n_q = i + 1;
    }
    return 0;
}

static int translate_json(const char *body, size_t n, const http_limits *lim, http_translate_req *r, http_error *e) {
    cJSON *o = parse_object(body, n, e);
    if (!o) return -1;
    char *format = NULL;
    double alt;
    int rc = json_q(o, lim, r, e) || json_str(o, "source", 64, "", &r->source, e) ||
             json_str(o, "target", 64, "", &r->target, e) || json_str(o, "format", 64, "", &format, e) ||
             json_num(o, "alternatives", 0, 64, 1, 0, &alt, e) || json_str(o, "api_key", 1024, "", &r->api_key, e) ? -1 : 0;
    if (!rc) r->alternatives = (int)alt;
    char q[48];
    if (!rc && format && strcmp(format, "text"))
        rc = http_fail(e, 400, "format", "format '%s' is not supported (only 'text')", http_quote(format, q, sizeof q));
    free(format);
    cJSON_Delete(o);
    return rc;
}

/* ---------------------------------------------------------------- forms */
static int hex(char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* Decode s[0..n) of a form ('+' = space, %XX) into out (n + 1 bytes); its length, or -1 on a bad escape. */
static long form_decode(const char *s, size_t n, char *out) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '+') {
            out[k++] = ' ';
        } else if (s[i] == '%') {
            if (i + 2 >= n || hex(s[i + 1]) < 0 || hex(s[i + 2]) < 0) return -1;
            out[k++] = (char)(hex(s[i + 1]) * 16 + hex(s[i + 2]));
            i += 2;
        } else {
            out[k++] = s[i];
        }
    }
    out[k] = 0;
    return (long)k;
}

static int translate_form(const char *body, size_t n, const http_limits *lim, http_translate_req *r, http_error *e) {
    char *key = malloc(n + 1), *val = malloc(n + 1);
    int rc = key && val ? 0 : http_fail(e, 500, "", "out of memory");
    if (!rc && !(r->q = calloc((size_t)lim->max_items + 1, sizeof(char *)))) rc = http_fail(e, 500, "", "out of memory");
    for (size_t i = 0; !rc && i < n;) {   /* key=value&key=value ... */
        size_t end = i;
        while (end < n && body[end] != '&') end++;
        size_t eq = i;
        while (eq < end && body[eq] != '=') eq++;
        long kl = form_decode(body + i, eq - i, key);
        long vl = eq < end ? form_decode(body + eq + 1, end - eq - 1, val) : (val[0] = 0, 0);
        if (kl < 0 || vl < 0) {
            rc = http_fail(e, 400, "", "malformed form body (a bad %%-escape near byte %zu)", i + 1);
            break;
        }
        char **dst = !strcmp(key, "source") ? &r->source : !strcmp(key, "target") ? &r->target
                   : !strcmp(key, "api_key") ? &r->api_key : NULL;
        if (!strcmp(key, "q")) {
            if (r->n_q == lim->max_items)
                rc = http_fail(e, 400, "q", "q has more than %d items, the limit (--max-items)", lim->max_items);
            else if (!(r->q[r->n_q] = text_field(val, (size_t)vl, "q", lim->max_chars, "--max-chars", e))) rc = -1;
            else r->n_q++;
        } else if (dst) {
            free(*dst);
            if (!(*dst = text_field(val, (size_t)vl, key, 64, "", e))) rc = -1;
        } else if (!strcmp(key, "alternatives")) {
            char *endp;
            long a = strtol(val, &endp, 10);
            if (!val[0] || *endp || a < 0 || a > 64) rc = http_fail(e, 400, "alternatives", "alternatives must be an integer in 0..64");
            else r->alternatives = (int)a;
        } else if (!strcmp(key, "format") && strcmp(val, "text")) {
            char q[48];
            if (tfm_utf8_first_invalid(val, (size_t)vl) >= 0 || memchr(val, 0, (size_t)vl))
                rc = http_fail(e, 400, "format", "format is not valid UTF-8 text");
            else
                rc = http_fail(e, 400, "format", "format '%s' is not supported (only 'text')", http_quote(val, q, sizeof q));
        }
        i = end + 1;
    }
    if (!rc && r->n_q == 0) rc = http_fail(e, 400, "q", "Invalid request: missing q parameter");
    r->q_array = r->n_q > 1;   /* repeated q fields: a batch */
    free(key), free(val);
    return rc;
}

int http_parse_translate(const char *body, size_t n, http_body_kind kind, const http_limits *lim, http_translate_req *r,
                         http_error *e) {
    memset(r, 0, sizeof *r);
    memset(e, 0, sizeof *e);
    int rc = kind == BODY_JSON ? translate_json(body, n, lim, r, e)
             : kind == BODY_FORM ? translate_form(body, n, lim, r, e)
             : http_fail(e, 415, "", "unsupported Content-Type: send application/json or application/x-www-form-urlencoded");
    if (!rc && !r->source) rc = http_fail(e, 400, "source", "Invalid request: missing source parameter");
    if (!rc && !r->target) rc = http_fail(e, 400, "target", "Invalid request: missing target parameter");
    if (rc) http_translate_req_free(r);
    return rc;
}

void http_translate_req_free(http_translate_req *r) {
    for (int i = 0; r->q && i < r->n_q; i++) free(r->q[i]);
    free(r->q), free(r->source), free(r->target), free(r->api_key);
    memset(r, 0, sizeof *r);
}

/* ---------------------------------------------------------------- completions */
static int completion_stop(const cJSON *o, http_completion_req *r, http_error *e) {
    const cJSON *s = field(o, "stop");
    if (!s) return 0;
    int n = cJSON_IsString(s) ? 1 : cJSON_IsArray(s) ? cJSON_GetArraySize(s) : -1;
    if (n < 0 || n > TFM_MAX_STOP)
        return http_fail(e, 400, "stop", "stop must be a string or an array of at most %d strings", TFM_MAX_STOP);
    const cJSON *it = cJSON_IsArray(s) ? s->child : s;
    for (int i = 0; i < n; i++, it = it->next) {
        if (!cJSON_IsString(it) || !it->valuestring[0] || strlen(it->valuestring) > 1024)
            return http_fail(e, 400, "stop", "stop strings must be non-empty strings of at most 1024 bytes");
        if (!(r->stop_buf[i] = text_field(it->valuestring, strlen(it->valuestring), "stop", -1, "", e))) return -1;
        r->o.stop[i] = r->stop_buf[i];
    }
    return 0;
}

/* Fields tfm does not implement: refused when asked for, not ignored. */
static int completion_unsupported(const cJSON *o, http_error *e) {
    const cJSON *f;
    if ((f = field(o, "n")) && !(cJSON_IsNumber(f) && f->valuedouble == 1))
        return http_fail(e, 400, "n", "n must be 1 (one completion per request)");
    if ((f = field(o, "best_of")) && !(cJSON_IsNumber(f) && f->valuedouble == 1))
        return http_fail(e, 400, "best_of", "best_of must be 1");
    if ((f = field(o, "echo")) && !cJSON_IsFalse(f)) return http_fail(e, 400, "echo", "echo is not supported");
    if ((f = field(o, "logprobs")) && !(cJSON_IsNumber(f) && f->valuedouble == 0))
        return http_fail(e, 400, "logprobs", "logprobs is not supported");
    if ((f = field(o, "suffix"))) return http_fail(e, 400, "suffix", "suffix is not supported");
    return 0;
}

int http_parse_completion(const char *body, size_t n, http_body_kind kind, const http_limits *lim,
                          http_completion_req *r, http_error *e) {
    memset(r, 0, sizeof *r);
    memset(e, 0, sizeof *e);
    tfm_generate_options_default(&r->o);
    if (kind != BODY_JSON) return http_fail(e, 415, "", "unsupported Content-Type: send application/json");
    cJSON *o = parse_object(body, n, e);
    if (!o) return -1;
    const cJSON *p = field(o, "prompt");
    if (p && cJSON_IsArray(p) && cJSON_GetArraySize(p) == 1) p = p->child;
    double max_tokens, temperature, top_p, top_k, seed;
    int rc = completion_unsupported(o, e);
    if (!rc && !p) rc = http_fail(e, 400, "prompt", "missing prompt");
    else if (!rc && !cJSON_IsString(p)) rc = http_fail(e, 400, "prompt", "prompt must be a string (or an array of one string)");
    else if (!rc && !p->valuestring[0]) rc = http_fail(e, 400, "prompt", "prompt must not be empty");
    else if (!rc && !(r->prompt = text_field(p->valuestring, strlen(p->valuestring), "prompt", lim->max_chars, "--max-chars", e)))
        rc = -1;
    if (!rc && (json_str(o, "model", 64, "", &r->model, e) ||
                json_num(o, "max_tokens", 0, 1e9, 1, 16, &max_tokens, e) ||
                json_num(o, "temperature", 0, 100, 0, 1, &temperature, e) || json_num(o, "top_p", 0, 1, 0, 1, &top_p, e) ||
                json_num(o, "top_k", 0, 1e9, 1, 0, &top_k, e) || json_num(o, "seed", 0, 9007199254740992.0, 1, 1, &seed, e) ||
                json_bool(o, "stream", &r->stream, e) || completion_stop(o, r, e)))
        rc = -1;
    if (!rc && max_tokens > lim->max_tokens)
        rc = http_fail(e, 400, "max_tokens", "max_tokens %.0f is over the limit of %d (--max-tokens)", max_tokens, lim->max_tokens);
    if (!rc && top_p <= 0) rc = http_fail(e, 400, "top_p", "top_p must be in (0, 1]");
    if (!rc) {
        r->o.max_tokens = (int)max_tokens, r->o.temperature = (float)temperature, r->o.top_p = (float)top_p;
        r->o.top_k = (int)top_k, r->o.seed = (uint64_t)seed;
    }
    cJSON_Delete(o);
    if (rc) http_completion_req_free(r);
    return rc;
}

void http_completion_req_free(http_completion_req *r) {
    for (int i = 0; i < TFM_MAX_STOP; i++) free(r->stop_buf[i]);
    free(r->model), free(r->prompt);
    memset(r, 0, sizeof *r);
}
