/* Character-level (code point) tokenizer for the GPT language model. */
#include "tfm/text.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* Fill v->chars from v->cps. */
static int make_chars(tfm_char_vocab *v) {
    v->chars = malloc((size_t)v->n * 4 + 1);
    if (!v->chars) return -1;
    size_t o = 0;
    for (int i = 0; i < v->n; i++) o += (size_t)tfm_utf8_encode(v->cps[i], v->chars + o);
    v->chars[o] = 0;
    return 0;
}

int tfm_char_vocab_build(tfm_char_vocab *v, const char *text, size_t len) {
    memset(v, 0, sizeof *v);
    if (len == 0) {
        tfm_set_error("cannot build a character vocabulary from empty text");
        return -1;
    }
    /* Presence bitmap for the BMP fast path; rarer code points go into a list. */
    unsigned char *seen = calloc(0x10000 / 8, 1);
    uint32_t *extra = NULL;
    size_t n_extra = 0, cap_extra = 0;
    if (!seen) goto oom;
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        int k = tfm_utf8_decode(text + i, len - i, &cp);
        if (!k) {
            tfm_set_error("invalid UTF-8 at byte offset %zu", i);
            goto fail;
        }
        if (cp == 0) {
            tfm_set_error("NUL character at byte offset %zu", i);
            goto fail;
        }
        i += (size_t)k;
        if (cp < 0x10000) {
            seen[cp >> 3] |= (unsigned char)(1u << (cp & 7));
        } else {
            if (n_extra == cap_extra) {
                cap_extra = cap_extra ? cap_extra * 2 : 16;
                uint32_t *ne = realloc(extra, cap_extra * sizeof *ne);
                if (!ne) goto oom;
                extra = ne;
            }
            extra[n_extra++] = cp;
        }
    }
    size_t n = 0;
    for (uint32_t c = 0; c < 0x10000; c++) n += (seen[c >> 3] >> (c & 7)) & 1;
    if (n_extra) qsort(extra, n_extra, sizeof *extra, cmp_u32);
    v->cps = malloc((n + n_extra) * sizeof *v->cps);
    if (!v->cps) goto oom;
    for (uint32_t c = 0; c < 0x10000; c++)
        if ((seen[c >> 3] >> (c & 7)) & 1) v->cps[v->n++] = c;
    for (size_t i = 0; i < n_extra; i++)
        if (i == 0 || extra[i] != extra[i - 1]) v->cps[v->n++] = extra[i];
    if (make_chars(v)) goto oom;
    free(seen);
    free(extra);
    return 0;
oom:
    tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory building the character vocabulary");
fail:
    free(seen);
    free(extra);
    tfm_char_vocab_free(v);
    return -1;
}

int tfm_char_vocab_from_string(tfm_char_vocab *v, const char *chars) {
    memset(v, 0, sizeof *v);
    size_t len = strlen(chars);
    if (len == 0) {
        tfm_set_error("character vocabulary is empty");
        return -1;
    }
    v->cps = malloc(len * sizeof *v->cps);
    if (!v->cps) {
        tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory loading the character vocabulary");
        return -1;
    }
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        int k = tfm_utf8_decode(chars + i, len - i, &cp);
        if (!k) {
            tfm_set_error("character vocabulary: invalid UTF-8 at byte offset %zu", i);
            goto fail;
        }
        if (v->n > 0 && cp <= v->cps[v->n - 1]) {
            tfm_set_error("character vocabulary: characters not strictly increasing at byte offset %zu", i);
            goto fail;
        }
        v->cps[v->n++] = cp;
        i += (size_t)k;
    }
    v->chars = malloc(len + 1);
    if (!v->chars) {
        tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory loading the character vocabulary");
        goto fail;
    }
    memcpy(v->chars, chars, len + 1);
    return 0;
fail:
    tfm_char_vocab_free(v);
    return -1;
}

int tfm_char_vocab_id(const tfm_char_vocab *v, uint32_t cp) {
    int lo = 0, hi = v->n - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        if (v->cps[mid] == cp) return mid;
        if (v->cps[mid] < cp) lo = mid + 1;
        else hi = mid - 1;
    }
    return -1;
}

/* Printable description of a code point for error messages: 'x' (U+0078). Controls are not quoted. */
static void describe_cp(uint32_t cp, char *buf, size_t n) {
    if (cp < 0x20 || cp == 0x7F || (cp >= 0x80 && cp < 0xA0)) {
        snprintf(buf, n, "U+%04X", (unsigned)cp);
        return;
    }
    char enc[5] = {0};
    int k = tfm_utf8_encode(cp, enc);
    enc[k] = 0;
    snprintf(buf, n, "'%s' (U+%04X)", enc, (unsigned)cp);
}

int *tfm_char_encode(const tfm_char_vocab *v, const char *text, size_t len, int *n_ids) {
    int *ids = malloc((len ? len : 1) * sizeof *ids);
    if (!ids) {
        tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory encoding text");
        return NULL;
    }
    size_t n = 0;
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        int k = tfm_utf8_decode(text + i, len - i, &cp);
        if (!k) {
            tfm_set_error("invalid UTF-8 at byte offset %zu", i);
            free(ids);
            return NULL;
        }
        int id = tfm_char_vocab_id(v, cp);
        if (id < 0) {
            char d[32];
            describe_cp(cp, d, sizeof d);
            tfm_set_error("character %s at byte offset %zu is not in the vocabulary", d, i);
            free(ids);
            return NULL;
        }
        ids[n++] = id;
        i += (size_t)k;
    }
    *n_ids = (int)n;
    return ids;
}

char *tfm_char_decode(const tfm_char_vocab *v, const int *ids, int n_ids) {
    char *out = malloc((size_t)(n_ids > 0 ? n_ids : 0) * 4 + 1);
    if (!out) {
        tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory decoding text");
        return NULL;
    }
    size_t o = 0;
    for (int i = 0; i < n_ids; i++) {
        if (ids[i] < 0 || ids[i] >= v->n) {
            tfm_set_error("token id %d at position %d is outside the vocabulary (size %d)", ids[i], i, v->n);
            free(out);
            return NULL;
        }
        o += (size_t)tfm_utf8_encode(v->cps[ids[i]], out + o);
    }
    out[o] = 0;
    return out;
}

void tfm_char_vocab_free(tfm_char_vocab *v) {
    free(v->cps);
    free(v->chars);
    memset(v, 0, sizeof *v);
}
