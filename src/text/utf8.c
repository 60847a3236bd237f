/* UTF-8 decoding/validation, table-driven lowercasing, whole-file reading and line splitting. */
#include "tfm/text.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int tfm_utf8_decode(const char *str, size_t n, uint32_t *cp) {
    const unsigned char *s = (const unsigned char *)str;
    if (n == 0) return 0;
    unsigned c = s[0];
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    int len;
    uint32_t v, min;
    if (c >= 0xC2 && c <= 0xDF) { len = 2; v = c & 0x1F; min = 0x80; }
    else if (c >= 0xE0 && c <= 0xEF) { len = 3; v = c & 0x0F; min = 0x800; }
    else if (c >= 0xF0 && c <= 0xF4) { len = 4; v = c & 0x07; min = 0x10000; }
    else return 0;  /* continuation byte, C0/C1 (overlong) or F5..FF */
    if ((size_t)len > n) return 0;
    for (int i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        v = (v << 6) | (s[i] & 0x3F);
    }
    if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return 0;
    *cp = v;
    return len;
}

int tfm_utf8_encode(uint32_t cp, char out[4]) {
    unsigned char *o = (unsigned char *)out;
    if (cp < 0x80) { o[0] = (unsigned char)cp; return 1; }
    if (cp < 0x800) {
        o[0] = (unsigned char)(0xC0 | (cp >> 6));
        o[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp >= 0xD800 && cp <= 0xDFFF) return 0;
    if (cp < 0x10000) {
        o[0] = (unsigned char)(0xE0 | (cp >> 12));
        o[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    if (cp > 0x10FFFF) return 0;
    o[0] = (unsigned char)(0xF0 | (cp >> 18));
    o[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

long tfm_utf8_first_invalid(const char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        if ((unsigned char)s[i] < 0x80) { i++; continue; }
        uint32_t cp;
        int k = tfm_utf8_decode(s + i, n - i, &cp);
        if (!k) return (long)i;
        i += (size_t)k;
    }
    return -1;
}

int tfm_utf8_valid(const char *s, size_t n) { return tfm_utf8_first_invalid(s, n) < 0; }

int tfm_unicode_space(uint32_t c) {
    if (c == ' ' || (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x1F)) return 1;
    if (c < 0x85) return 0;
    return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 ||
           c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

uint32_t tfm_lower_cp(uint32_t c) {
    if (c < 0x80) return (c >= 'A' && c <= 'Z') ? c + 32 : c;
    if (c < 0x100) return (c >= 0xC0 && c <= 0xDE && c != 0xD7) ? c + 32 : c;
    if (c < 0x180) {  /* Latin Extended-A: upper/lower pairs, with a few gaps */
        if (c == 0x130) return 'i';
        if (c == 0x178) return 0xFF;
        if ((c <= 0x12F) || (c >= 0x132 && c <= 0x137) || (c >= 0x14A && c <= 0x177))
            return (c % 2 == 0) ? c + 1 : c;
        if ((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E)) return (c % 2 == 1) ? c + 1 : c;
        return c;
    }
    if (c >= 0x386 && c <= 0x3AB) {  /* Greek */
        if (c == 0x386) return 0x3AC;
        if (c >= 0x388 && c <= 0x38A) return c + 37;
        if (c == 0x38C) return 0x3CC;
        if (c == 0x38E || c == 0x38F) return c + 63;
        if (c >= 0x391 && c <= 0x3AB && c != 0x3A2) return c + 32;
        return c;
    }
    if (c >= 0x400 && c <= 0x40F) return c + 80;  /* Cyrillic */
    if (c >= 0x410 && c <= 0x42F) return c + 32;
    if (c == 0x1E9E) return 0xDF;                 /* capital sharp s */
    return c;
}

char *tfm_utf8_lower(const char *s, size_t n, size_t *out_len) {
    /* lowercasing never grows a code point's encoding except U+0130 (2 bytes -> 3 bytes) */
    char *out = malloc(n * 3 / 2 + 4);
    if (!out) return NULL;
    size_t o = 0, i = 0;
    while (i < n) {
        uint32_t cp;
        int k = tfm_utf8_decode(s + i, n - i, &cp);
        if (!k) {  /* invalid byte: copied unchanged */
            out[o++] = s[i++];
            continue;
        }
        i += (size_t)k;
        if (cp == 0x130) {  /* Python: 'İ'.lower() == 'i\u0307' */
            out[o++] = 'i';
            o += (size_t)tfm_utf8_encode(0x307, out + o);
            continue;
        }
        o += (size_t)tfm_utf8_encode(tfm_lower_cp(cp), out + o);
    }
    out[o] = 0;
    if (out_len) *out_len = o;
    return out;
}

#define TFM_MAX_TEXT_FILE ((size_t)1 << 30)

char *tfm_read_text_file(const char *path, size_t *len_out) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        tfm_set_error_kind(TFM_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
        return NULL;
    }
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap + 1);
    if (!buf) {
        fclose(f);
        tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory reading '%s'", path);
        return NULL;
    }
    for (;;) {
        if (len == cap) {
            if (cap >= TFM_MAX_TEXT_FILE) {
                tfm_set_error("'%s' is too large (more than 1 GiB)", path);
                goto fail;
            }
            cap *= 2;
            char *nb = realloc(buf, cap + 1);
            if (!nb) {
                tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory reading '%s'", path);
                goto fail;
            }
            buf = nb;
        }
        size_t got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (got == 0) break;
    }
    if (ferror(f)) {
        tfm_set_error_kind(TFM_ERR_IO, "cannot read '%s': %s", path, strerror(errno ? errno : EIO));
        goto fail;
    }
    fclose(f);
    f = NULL;
    buf[len] = 0;
    if (len == 0) {
        tfm_set_error("'%s' is empty", path);
        goto fail;
    }
    const char *nul = memchr(buf, 0, len);
    if (nul) {
        tfm_set_error("'%s' looks binary (NUL byte at offset %zu), expected UTF-8 text", path, (size_t)(nul - buf));
        goto fail;
    }
    long bad = tfm_utf8_first_invalid(buf, len);
    if (bad >= 0) {
        long line = 1;
        for (long i = 0; i < bad; i++) line += buf[i] == '\n';
        tfm_set_error("%s:%ld: invalid UTF-8 (byte 0x%02x)", path, line, (unsigned char)buf[bad]);
        goto fail;
    }
    if (len_out) *len_out = len;
    return buf;
fail:
    if (f) fclose(f);
    free(buf);
    tfm_error_in_data();   /* empty, binary, invalid UTF-8, too large (I/O and memory errors keep their kind) */
    return NULL;
}

char **tfm_split_lines(char *buf, size_t len, int *n_lines) {
    size_t count = 0;
    for (size_t i = 0; i < len; i++) count += buf[i] == '\n';
    if (len > 0 && buf[len - 1] != '\n') count++;
    char **lines = malloc((count ? count : 1) * sizeof *lines);
    if (!lines) return NULL;
    size_t k = 0, start = 0;
    for (size_t i = 0; i < len; i++) {
        if (buf[i] != '\n') continue;
        buf[i] = 0;
        if (i > start && buf[i - 1] == '\r') buf[i - 1] = 0;
        lines[k++] = buf + start;
        start = i + 1;
    }
    if (start < len) {  /* last line without a newline */
        if (buf[len - 1] == '\r') buf[len - 1] = 0;
        lines[k++] = buf + start;
    }
    *n_lines = (int)k;
    return lines;
}
