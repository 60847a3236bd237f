/* tfm_token_map: a JSON object {"token": id, ...} (GPT-2's encoder.json, Hugging Face's vocab.json).
 *
 * A small strict JSON reader for exactly that shape: strings with every JSON escape (\uXXXX with
 * surrogate pairs), non-negative integer ids. Two passes: the first checks the syntax and counts, the
 * second copies the unescaped strings into one block. Every size is bounded before anything is allocated. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/bpe_internal.h"
#include "tfm/core.h"
#include "tfm/io.h"
#include "tfm/text.h"
#include "tfm/tokenizers.h"

#define MAX_JSON_BYTES ((size_t)1 << 28)
#define MAX_ID ((1 << 24) - 1)

typedef struct {
    const char *s, *end, *base;
    const char *name;
    int bad;
} json_reader;

static int jfail(json_reader *r, const char *what) {
    if (!r->bad) tfm_set_error("%s: at byte %zu: %s", r->name, (size_t)(r->s - r->base), what);
    r->bad = 1;
    return -1;
}

static void skip_ws(json_reader *r) {
    while (r->s < r->end && (*r->s == ' ' || *r->s == '\t' || *r->s == '\n' || *r->s == '\r')) r->s++;
}

static int hex4(json_reader *r, uint32_t *v) {
    if (r->end - r->s < 4) return jfail(r, "truncated \\u escape");
    *v = 0;
    for (int i = 0; i < 4; i++) {
        char c = r->s[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return jfail(r, "bad \\u escape");
        *v = *v << 4 | (uint32_t)d;
    }
    r->s += 4;
    return 0;
}

/* Read a JSON string at r->s (the opening quote); write its UTF-8 to out (if not NULL; at most the
 * string's encoded length) and its length to *n. */
static int read_string(json_reader *r, char *out, size_t *n) {
    if (r->s >= r->end || *r->s != '"') return jfail(r, "expected a string (a token in double quotes)");
    r->s++;
    size_t k = 0;
    const char *start = r->s;
    for (;;) {
        if (r->s >= r->end) return r->s = start - 1, jfail(r, "string not closed");
        unsigned char c = (unsigned char)*r->s;
        if (c == '"') break;
        if (c < 0x20) return jfail(r, "control character inside a string");
        if (c != '\\') {
            if (out) out[k] = (char)c;
            k++;
            r->s++;
            continue;
        }
        if (r->end - r->s < 2) return jfail(r, "truncated escape");
        char e = r->s[1];
        r->s += 2;
        const char *simple = strchr("\"\\/bfnrt", e);
        if (e && simple) {
            static const char val[] = "\"\\/\b\f\n\r\t";
            if (out) out[k] = val[simple - "\"\\/bfnrt"];
            k++;
            continue;
        }
        if (e != 'u') return r->s -= 2, jfail(r, "unknown escape");
        uint32_t cp;
        if (hex4(r, &cp)) return -1;
        if (cp >= 0xD800 && cp <= 0xDBFF) {   /* a surrogate pair */
            uint32_t lo;
            if (r->end - r->s < 2 || r->s[0] != '\\' || r->s[1] != 'u') return jfail(r, "high surrogate without its low half");
            r->s += 2;
            if (hex4(r, &lo)) return -1;
            if (lo < 0xDC00 || lo > 0xDFFF) return jfail(r, "high surrogate without its low half");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            return jfail(r, "lone low surrogate");
        }
        if (cp == 0) return jfail(r, "NUL character (\\u0000) in a token");
        char u[4];
        int m = tfm_utf8_encode(cp, u);
        if (out) memcpy(out + k, u, (size_t)m);
        k += (size_t)m;
    }
    r->s++;   /* closing quote */
    *n = k;
    return 0;
}

static int read_id(json_reader *r, int *id) {
    if (r->s < r->end && *r->s == '-') return jfail(r, "negative id");
    if (r->s >= r->end || *r->s < '0' || *r->s > '9') return jfail(r, "expected an integer id");
    long v = 0;
    while (r->s < r->end && *r->s >= '0' && *r->s <= '9') {
        v = v * 10 + (*r->s - '0');
        if (v > MAX_ID) return jfail(r, "id above 16777215");
        r->s++;
    }
    if (r->s < r->end && (*r->s == '.' || *r->s == 'e' || *r->s == 'E')) return jfail(r, "expected an integer id");
    *id = (int)v;
    return 0;
}

/* One pass over the object. With m == NULL: syntax check, counts and sizes only. */
static int scan(json_reader *r, tfm_token_map *m, int *n_entries, size_t *bytes, int *max_id) {
    *n_entries = 0;
    *bytes = 0;
    *max_id = -1;
    char *out = m ? m->block : NULL;
    skip_ws(r);
    if (r->s >= r->end || *r->s != '{') return jfail(r, "expected '{' (a JSON object of token: id)");
    r->s++;
    skip_ws(r);
    if (r->s < r->end && *r->s == '}') r->s++;
    else
        for (;;) {
            const char *tok_at = r->s;
            size_t n;
            if (read_string(r, out, &n)) return -1;
            if (n == 0) return r->s = tok_at, jfail(r, "empty token");
            skip_ws(r);
            if (r->s >= r->end || *r->s != ':') return jfail(r, "expected ':' after a token");
            r->s++;
            skip_ws(r);
            int id;
            if (read_id(r, &id)) return -1;
            if (m) {
                if (!tfm_utf8_valid(out, n)) return r->s = tok_at, jfail(r, "token is not valid UTF-8");
                if (m->token[id]) {
                    tfm_set_error("%s: id %d is given to two tokens ('%s' and '%.*s')", r->name, id, m->token[id], (int)n, out);
                    return r->bad = 1, -1;
                }
                out[n] = 0;
                m->token[id] = out;
                m->len[id] = (int)n;
                out += n + 1;
            }
            (*n_entries)++;
            *bytes += n + 1;
            if (id > *max_id) *max_id = id;
            skip_ws(r);
            if (r->s < r->end && *r->s == ',') {
                r->s++;
                skip_ws(r);
                continue;
            }
            if (r->s < r->end && *r->s == '}') {
                r->s++;
                break;
            }
            return jfail(r, "expected ',' or '}' after an id");
        }
    skip_ws(r);
    if (r->s != r->end) return jfail(r, "unexpected data after the object");
    return 0;
}

int tfm_token_map_id(const tfm_token_map *m, const char *s, size_t len) {
    if (!m->n_slots) return -1;
    size_t mask = (size_t)m->n_slots - 1;
    for (size_t k = bpe_hash(s, len) & mask;; k = (k + 1) & mask) {
        int o = m->slots[k];
        if (o < 0) return -1;
        if ((size_t)m->len[o] == len && !memcmp(m->token[o], s, len)) return o;
    }
}

const char *tfm_token_map_token(const tfm_token_map *m, int id) { return id >= 0 && id < m->n ? m->token[id] : NULL; }

static int build_index(tfm_token_map *m, const char *name) {
    m->n_slots = 16;
    while (m->n_slots < 2 * m->n_tokens) m->n_slots *= 2;
    m->slots = malloc((size_t)m->n_slots * sizeof *m->slots);
    if (!m->slots) return tfm_set_error_kind(TFM_ERR_NOMEM, "%s: out of memory", name), -1;
    memset(m->slots, -1, (size_t)m->n_slots * sizeof *m->slots);
    size_t mask = (size_t)m->n_slots - 1;
    for (int id = 0; id < m->n; id++) {
        if (!m->token[id]) continue;
        size_t k = bpe_hash(m->token[id], (size_t)m->len[id]) & mask;
        for (;; k = (k + 1) & mask) {
            int o = m->slots[k];
            if (o < 0) break;
            if (m->len[o] == m->len[id] && !memcmp(m->token[o], m->token[id], (size_t)m->len[id]))
                return tfm_set_error("%s: token '%s' appears twice (ids %d and %d)", name, m->token[id], o, id), -1;
        }
        m->slots[k] = id;
    }
    return 0;
}

int tfm_token_map_parse(tfm_token_map *m, const char *json, size_t len, const char *name) {
    memset(m, 0, sizeof *m);
    if (len > MAX_JSON_BYTES) return tfm_set_error("%s: larger than 256 MiB", name), -1;
    json_reader r = {json, json + len, json, name, 0};
    int n_entries, max_id;
    size_t bytes;
    if (scan(&r, NULL, &n_entries, &bytes, &max_id)) return -1;
    if (n_entries == 0) return tfm_set_error("%s: no tokens (an empty object)", name), -1;
    if ((long)max_id >= 2L * n_entries + 256)
        return tfm_set_error("%s: id %d is far beyond the %d tokens (ids must be dense, 0..n-1)", name, max_id, n_entries), -1;
    m->n = max_id + 1;
    m->n_tokens = n_entries;
    m->token = calloc((size_t)m->n, sizeof *m->token);
    m->len = calloc((size_t)m->n, sizeof *m->len);
    m->block = malloc(bytes);
    if (!m->token || !m->len || !m->block) {
        tfm_token_map_free(m);
        return tfm_set_error_kind(TFM_ERR_NOMEM, "%s: out of memory", name), -1;
    }
    r = (json_reader){json, json + len, json, name, 0};
    if (scan(&r, m, &n_entries, &bytes, &max_id) || build_index(m, name)) {
        tfm_token_map_free(m);
        return -1;
    }
    return 0;
}

char *bpe_read_file(const char *path, size_t max, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return tfm_set_error_kind(TFM_ERR_IO, "cannot open '%s': %s", path, strerror(errno)), NULL;
    char *buf = tfm_read_stream(f, path, max, len);
    fclose(f);
    return buf;
}

int tfm_token_map_load(tfm_token_map *m, const char *path) {
    memset(m, 0, sizeof *m);
    size_t len;
    char *buf = bpe_read_file(path, MAX_JSON_BYTES, &len);
    if (!buf) return -1;
    int rc = tfm_token_map_parse(m, buf, len, path);
    free(buf);
    return rc ? tfm_error_in_data() : 0;
}

void tfm_token_map_free(tfm_token_map *m) {
    free(m->token);
    free(m->len);
    free(m->slots);
    free(m->block);
    memset(m, 0, sizeof *m);
}
