/* A small strict JSON parser for untrusted input (the safetensors header, configs stored as text).
 *
 * RFC 8259 grammar, nothing more: objects, arrays, strings (all escapes, surrogate pairs; the text must
 * be valid UTF-8 and may not contain NUL, raw control characters or lone surrogates), numbers (kept as
 * their literal text, converted on request), true, false, null. No duplicate keys in an object, nothing
 * but whitespace after the top-level value. Limits: nesting depth, number of values, string length.
 * Private to the library (src/core). */
#ifndef TFM_CORE_JSON_H
#define TFM_CORE_JSON_H

#include <stddef.h>
#include <stdint.h>

#define TFM_JSON_MAX_DEPTH 32
#define TFM_JSON_MAX_VALUES (1 << 21)

typedef enum { TFM_JSON_NULL, TFM_JSON_FALSE, TFM_JSON_TRUE, TFM_JSON_NUMBER, TFM_JSON_STRING, TFM_JSON_ARRAY,
               TFM_JSON_OBJECT } tfm_json_type;

typedef struct tfm_json {
    tfm_json_type type;
    char *text;              /* STRING: decoded UTF-8, NUL-terminated; NUMBER: the literal as written */
    size_t len;              /* bytes in text */
    char *key;               /* member of an OBJECT: its key (decoded); else NULL */
    int n;                   /* ARRAY / OBJECT: number of children */
    struct tfm_json *child;  /* first child (members in document order) */
    struct tfm_json *next;   /* next sibling */
} tfm_json;

/* Parse n bytes. Returns the root, or NULL with tfm error "invalid JSON at byte K: what" (no file name:
 * the caller adds it). */
tfm_json *tfm_json_parse(const char *s, size_t n);
void tfm_json_free(tfm_json *v);
/* Member of an object by key (NULL if absent or v is not an object). */
const tfm_json *tfm_json_get(const tfm_json *obj, const char *key);
/* A NUMBER that is an integer literal (no fraction, no exponent) within the range: 0 and *out, else -1. */
int tfm_json_u64(const tfm_json *v, uint64_t *out);
int tfm_json_int(const tfm_json *v, int *out);
/* Any NUMBER as the nearest float (strtof): 0, or -1 if not a number or out of float range. */
int tfm_json_float(const tfm_json *v, float *out);

/* Append s as a JSON string literal (quotes and escapes) to a growing buffer. -1 if s (n bytes) is not
 * valid UTF-8 or contains NUL (JSON text cannot carry it through this parser). */
typedef struct {
    char *s;
    size_t len, cap;
    int oom;                 /* set if an allocation failed; the buffer is then unusable */
} tfm_strbuf;
void tfm_strbuf_put(tfm_strbuf *b, const char *s, size_t n);
void tfm_strbuf_printf(tfm_strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int tfm_json_put_string(tfm_strbuf *b, const char *s, size_t n);
void tfm_strbuf_free(tfm_strbuf *b);

/* Base64 (RFC 4648 alphabet, '=' padding, no line breaks): append n bytes encoded; decode n characters
 * strictly (length a multiple of 4, padding only at the end, canonical tail bits) into a malloc'd buffer,
 * or NULL with a tfm error "not base64: ..." (no file name: the caller adds it). */
void tfm_base64_put(tfm_strbuf *b, const void *data, size_t n);
unsigned char *tfm_base64_decode(const char *s, size_t n, size_t *out_len);

#endif
