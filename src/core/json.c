/* Strict JSON parser and string writer (see src/core/json.h). Recursive descent; the recursion depth is
 * bounded by TFM_JSON_MAX_DEPTH, the number of values by TFM_JSON_MAX_VALUES, so hostile input cannot
 * exhaust the stack or (beyond a bounded factor of its size) the heap. */
#include "core/json.h"
#include "tfm/core.h"
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const unsigned char *s;
    size_t n, i;
    int n_values;
    int failed;
} parser;

static int fail(parser *p, const char *what) {
    if (!p->failed) tfm_set_error("invalid JSON at byte %zu: %s", p->i, what);
    p->failed = 1;
    return -1;
}

static void skip_ws(parser *p) {
    while (p->i < p->n && (p->s[p->i] == ' ' || p->s[p->i] == '\t' || p->s[p->i] == '\n' || p->s[p->i] == '\r'))
        p->i++;
}

static tfm_json *new_value(parser *p, tfm_json_type t) {
    if (++p->n_values > TFM_JSON_MAX_VALUES) return fail(p, "too many values"), NULL;
    tfm_json *v = calloc(1, sizeof *v);
    if (!v) return fail(p, "out of memory"), NULL;
    v->type = t;
    return v;
}

/* Length of the valid UTF-8 sequence at s (n bytes left), or 0 if invalid (overlong, surrogate, > U+10FFFF). */
static int utf8_seq(const unsigned char *s, size_t n) {
    unsigned c = s[0];
    int len;
    uint32_t cp;
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) len = 2, cp = c & 0x1F;
    else if (c >= 0xE0 && c <= 0xEF) len = 3, cp = c & 0x0F;
    else if (c >= 0xF0 && c <= 0xF4) len = 4, cp = c & 0x07;
    else return 0;
    if ((size_t)len > n) return 0;
    for (int k = 1; k < len; k++) {
        if ((s[k] & 0xC0) != 0x80) return 0;
        cp = cp << 6 | (s[k] & 0x3F);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)) || (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return len;
}

static int hex4(parser *p, uint32_t *out) {
    if (p->n - p->i < 4) return fail(p, "truncated \\u escape");
    uint32_t v = 0;
    for (int k = 0; k < 4; k++) {
        unsigned c = p->s[p->i + k];
        int d = c >= '0' && c <= '9' ? (int)c - '0' : c >= 'a' && c <= 'f' ? (int)c - 'a' + 10
              : c >= 'A' && c <= 'F' ? (int)c - 'A' + 10 : -1;
        if (d < 0) return fail(p, "bad hex digit in \\u escape");
        v = v << 4 | (uint32_t)d;
    }
    p->i += 4;
    *out = v;
    return 0;
}

static size_t put_utf8(char *o, uint32_t cp) {
    if (cp < 0x80) return o[0] = (char)cp, 1;
    if (cp < 0x800) return o[0] = (char)(0xC0 | cp >> 6), o[1] = (char)(0x80 | (cp & 0x3F)), 2;
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | cp >> 12), o[1] = (char)(0x80 | ((cp >> 6) & 0x3F)), o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | cp >> 18), o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3F)), o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* p->s[p->i] == '"'. Decoded text is never longer than the literal, so one allocation suffices. */
static char *parse_string(parser *p, size_t *len) {
    size_t start = ++p->i, end = start;
    while (end < p->n && p->s[end] != '"') end += p->s[end] == '\\' ? 2 : 1;
    if (end >= p->n) return fail(p, "unterminated string"), NULL;
    char *out = malloc(end - start + 1);
    if (!out) return fail(p, "out of memory"), NULL;
    size_t o = 0;
    while (p->s[p->i] != '"') {
        unsigned c = p->s[p->i];
        if (c < 0x20) goto bad_ctrl;
        if (c != '\\') {
            int k = utf8_seq(p->s + p->i, p->n - p->i);
            if (!k) goto bad_utf8;
            memcpy(out + o, p->s + p->i, (size_t)k);
            o += (size_t)k, p->i += (size_t)k;
            continue;
        }
        c = p->s[++p->i];
        p->i++;
        const char *simple = strchr("\"\\/bfnrt", (int)c);
        if (c && simple) {
            out[o++] = "\"\\/\b\f\n\r\t"[simple - "\"\\/bfnrt"];
            continue;
        }
        if (c != 'u') {
            p->i--;
            fail(p, "bad escape");
            goto err;
        }
        uint32_t cp, lo;
        if (hex4(p, &cp)) goto err;
        if (cp >= 0xDC00 && cp <= 0xDFFF) { fail(p, "lone low surrogate"); goto err; }
        if (cp >= 0xD800 && cp <= 0xDBFF) {
            if (p->n - p->i < 2 || p->s[p->i] != '\\' || p->s[p->i + 1] != 'u') { fail(p, "lone high surrogate"); goto err; }
            p->i += 2;
            if (hex4(p, &lo)) goto err;
            if (lo < 0xDC00 || lo > 0xDFFF) { fail(p, "bad surrogate pair"); goto err; }
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        }
        if (cp == 0) { fail(p, "NUL character in string"); goto err; }
        o += put_utf8(out + o, cp);
    }
    p->i++;
    out[o] = 0;
    *len = o;
    return out;
bad_ctrl:
    fail(p, "control character in string");
    goto err;
bad_utf8:
    fail(p, "invalid UTF-8 in string");
err:
    free(out);
    return NULL;
}

static int digits(parser *p) {
    size_t s = p->i;
    while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') p->i++;
    return p->i > s ? 0 : fail(p, "bad number");
}

static tfm_json *parse_number(parser *p) {
    size_t start = p->i;
    if (p->s[p->i] == '-') p->i++;
    if (p->i < p->n && p->s[p->i] == '0') p->i++;
    else if (digits(p)) return NULL;
    if (p->i < p->n && p->s[p->i] == '.') {
        p->i++;
        if (digits(p)) return NULL;
    }
    if (p->i < p->n && (p->s[p->i] == 'e' || p->s[p->i] == 'E')) {
        p->i++;
        if (p->i < p->n && (p->s[p->i] == '+' || p->s[p->i] == '-')) p->i++;
        if (digits(p)) return NULL;
    }
    tfm_json *v = new_value(p, TFM_JSON_NUMBER);
    if (!v) return NULL;
    v->len = p->i - start;
    v->text = malloc(v->len + 1);
    if (!v->text) return free(v), fail(p, "out of memory"), NULL;
    memcpy(v->text, p->s + start, v->len);
    v->text[v->len] = 0;
    return v;
}

static tfm_json *parse_value(parser *p, int depth);

static int cmp_key(const void *a, const void *b) {
    return strcmp((*(const tfm_json *const *)a)->key, (*(const tfm_json *const *)b)->key);
}

/* No two members of an object share a key: sort the members by key (O(n log n), an object may have
 * millions of members in a hostile file) and compare neighbours. */
static int check_unique_keys(parser *p, const tfm_json *obj) {
    if (obj->n < 2) return 0;
    const tfm_json **m = malloc((size_t)obj->n * sizeof *m);
    if (!m) return fail(p, "out of memory");
    int k = 0;
    for (const tfm_json *c = obj->child; c; c = c->next) m[k++] = c;
    qsort(m, (size_t)k, sizeof *m, cmp_key);
    int rc = 0;
    for (int i = 1; i < k && !rc; i++)
        if (!strcmp(m[i - 1]->key, m[i]->key)) {
            tfm_set_error("invalid JSON at byte %zu (the end of an object): duplicate key '%.100s'", p->i, m[i]->key);
            p->failed = 1, rc = -1;
        }
    free(m);
    return rc;
}

/* Parse the members / elements of an object or array after its opening bracket. */
static tfm_json *parse_container(parser *p, int depth, int is_obj) {
    if (depth >= TFM_JSON_MAX_DEPTH) return fail(p, "nesting too deep"), NULL;
    tfm_json *v = new_value(p, is_obj ? TFM_JSON_OBJECT : TFM_JSON_ARRAY);
    if (!v) return NULL;
    char close = is_obj ? '}' : ']';
    tfm_json **tail = &v->child;
    p->i++;
    skip_ws(p);
    if (p->i < p->n && p->s[p->i] == close) return p->i++, v;
    for (;;) {
        char *key = NULL;
        size_t klen = 0;
        if (is_obj) {
            skip_ws(p);
            if (p->i >= p->n || p->s[p->i] != '"') { fail(p, "expected a string key"); goto err; }
            if (!(key = parse_string(p, &klen))) goto err;
            skip_ws(p);
            if (p->i >= p->n || p->s[p->i] != ':') { free(key); fail(p, "expected ':'"); goto err; }
            p->i++;
        }
        tfm_json *c = parse_value(p, depth + 1);
        if (!c) { free(key); goto err; }
        c->key = key;
        *tail = c, tail = &c->next;
        v->n++;
        skip_ws(p);
        if (p->i < p->n && p->s[p->i] == ',') { p->i++; continue; }
        if (p->i < p->n && p->s[p->i] == close) {
            p->i++;
            if (is_obj && check_unique_keys(p, v)) goto err;
            return v;
        }
        fail(p, is_obj ? "expected ',' or '}'" : "expected ',' or ']'");
        goto err;
    }
err:
    tfm_json_free(v);
    return NULL;
}

static tfm_json *literal(parser *p, const char *word, tfm_json_type t) {
    size_t k = strlen(word);
    if (p->n - p->i < k || memcmp(p->s + p->i, word, k)) return fail(p, "unexpected character"), NULL;
    p->i += k;
    return new_value(p, t);
}

static tfm_json *parse_value(parser *p, int depth) {
    skip_ws(p);
    if (p->i >= p->n) return fail(p, "unexpected end"), NULL;
    unsigned c = p->s[p->i];
    if (c == '{' || c == '[') return parse_container(p, depth, c == '{');
    if (c == '"') {
        size_t len;
        char *s = parse_string(p, &len);
        if (!s) return NULL;
        tfm_json *v = new_value(p, TFM_JSON_STRING);
        if (!v) return free(s), NULL;
        v->text = s, v->len = len;
        return v;
    }
    if (c == '-' || (c >= '0' && c <= '9')) return parse_number(p);
    if (c == 't') return literal(p, "true", TFM_JSON_TRUE);
    if (c == 'f') return literal(p, "false", TFM_JSON_FALSE);
    if (c == 'n') return literal(p, "null", TFM_JSON_NULL);
    return fail(p, "unexpected character"), NULL;
}

tfm_json *tfm_json_parse(const char *s, size_t n) {
    parser p = {(const unsigned char *)s, n, 0, 0, 0};
    tfm_json *v = parse_value(&p, 0);
    if (!v) return NULL;
    skip_ws(&p);
    if (p.i != p.n) {
        fail(&p, "trailing characters after the value");
        tfm_json_free(v);
        return NULL;
    }
    return v;
}

void tfm_json_free(tfm_json *v) {
    while (v) {
        tfm_json *next = v->next;
        tfm_json_free(v->child);   /* depth-bounded recursion */
        free(v->text);
        free(v->key);
        free(v);
        v = next;
    }
}

const tfm_json *tfm_json_get(const tfm_json *obj, const char *key) {
    if (!obj || obj->type != TFM_JSON_OBJECT) return NULL;
    for (const tfm_json *m = obj->child; m; m = m->next)
        if (!strcmp(m->key, key)) return m;
    return NULL;
}

int tfm_json_u64(const tfm_json *v, uint64_t *out) {
    if (!v || v->type != TFM_JSON_NUMBER || v->text[0] == '-') return -1;
    uint64_t x = 0;
    for (size_t i = 0; i < v->len; i++) {
        unsigned d = (unsigned char)v->text[i] - '0';
        if (d > 9) return -1;   /* fraction or exponent */
        if (x > (UINT64_MAX - d) / 10) return -1;
        x = x * 10 + d;
    }
    *out = x;
    return 0;
}

int tfm_json_int(const tfm_json *v, int *out) {
    uint64_t x;
    int neg = v && v->type == TFM_JSON_NUMBER && v->text[0] == '-';
    if (neg) {
        tfm_json tmp = *v;
        tmp.text = v->text + 1, tmp.len = v->len - 1;
        if (tfm_json_u64(&tmp, &x) || x > (uint64_t)1 << 31) return -1;
        *out = (int)(-(int64_t)x);
        return 0;
    }
    if (tfm_json_u64(v, &x) || x > 0x7fffffff) return -1;
    *out = (int)x;
    return 0;
}

int tfm_json_float(const tfm_json *v, float *out) {
    if (!v || v->type != TFM_JSON_NUMBER) return -1;
    errno = 0;
    char *end;
    float f = strtof(v->text, &end);
    if (*end || (errno == ERANGE && isinf(f))) return -1;
    *out = f;
    return 0;
}

/* ---------------------------------------------------------------- writing */

static int grow(tfm_strbuf *b, size_t extra) {
    if (b->oom) return -1;
    if (b->len + extra + 1 <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra + 1) cap *= 2;
    char *s = realloc(b->s, cap);
    if (!s) return b->oom = 1, -1;
    b->s = s, b->cap = cap;
    return 0;
}

void tfm_strbuf_put(tfm_strbuf *b, const char *s, size_t n) {
    if (grow(b, n)) return;
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = 0;
}

void tfm_strbuf_printf(tfm_strbuf *b, const char *fmt, ...) {
    char tmp[256];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (k < 0 || (size_t)k >= sizeof tmp) b->oom = 1;   /* only short numbers and names are printed */
    else tfm_strbuf_put(b, tmp, (size_t)k);
}

int tfm_json_put_string(tfm_strbuf *b, const char *s, size_t n) {
    const unsigned char *u = (const unsigned char *)s;
    tfm_strbuf_put(b, "\"", 1);
    for (size_t i = 0; i < n;) {
        unsigned c = u[i];
        if (c == 0) return -1;
        if (c == '"' || c == '\\') {
            char e[2] = {'\\', (char)c};
            tfm_strbuf_put(b, e, 2), i++;
        } else if (c < 0x20) {
            const char *named = c == '\n' ? "\\n" : c == '\t' ? "\\t" : c == '\r' ? "\\r" : NULL;
            if (named) tfm_strbuf_put(b, named, 2);
            else tfm_strbuf_printf(b, "\\u%04x", c);
            i++;
        } else {
            int k = utf8_seq(u + i, n - i);
            if (!k) return -1;
            tfm_strbuf_put(b, s + i, (size_t)k), i += (size_t)k;
        }
    }
    tfm_strbuf_put(b, "\"", 1);
    return 0;
}

void tfm_strbuf_free(tfm_strbuf *b) {
    free(b->s);
    b->s = NULL;
    b->len = b->cap = 0;
}

/* ------------------------------------------------------------------ base64 (RFC 4648, padded) */

static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

void tfm_base64_put(tfm_strbuf *b, const void *data, size_t n) {
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0) | (i + 2 < n ? p[i + 2] : 0);
        char q[4] = {B64[v >> 18 & 63], B64[v >> 12 & 63], i + 1 < n ? B64[v >> 6 & 63] : '=', i + 2 < n ? B64[v & 63] : '='};
        tfm_strbuf_put(b, q, 4);
    }
}

static int b64_value(unsigned char c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    return c == '+' ? 62 : c == '/' ? 63 : -1;
}

unsigned char *tfm_base64_decode(const char *s, size_t n, size_t *out_len) {
    if (n % 4) return tfm_set_error("not base64: length %zu is not a multiple of 4", n), NULL;
    unsigned char *out = malloc(n / 4 * 3 + 1);
    if (!out) return tfm_set_error("out of memory (%zu bytes of base64)", n), NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i += 4) {
        int pad = s[i + 3] == '=' ? s[i + 2] == '=' ? 2 : 1 : 0, v[4] = {0, 0, 0, 0};
        if (pad && i + 4 != n) goto bad;
        for (int j = 0; j < 4 - pad; j++)
            if ((v[j] = b64_value((unsigned char)s[i + j])) < 0) goto bad;
        uint32_t w = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 | (uint32_t)v[3];
        if ((pad == 1 && (w & 0xff)) || (pad == 2 && (w & 0xffff))) goto bad;   /* non-canonical tail bits */
        out[k++] = (unsigned char)(w >> 16);
        if (pad < 2) out[k++] = (unsigned char)(w >> 8);
        if (pad < 1) out[k++] = (unsigned char)w;
        continue;
    bad:
        free(out);
        return tfm_set_error("not base64: bad character or padding in the 4 characters at offset %zu", i), NULL;
    }
    *out_len = k;
    return out;
}
