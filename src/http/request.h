/* Request bodies of tfm serve (src/http/request.c): untrusted bytes -> checked C structs, or an HTTP status
 * with a one-line message naming the field or the limit. No I/O, no server: fuzzed by fuzz/http_target.c.
 * JSON is read with cJSON (Debian libcjson-dev; README, "Serving", says why); forms
 * (application/x-www-form-urlencoded, as LibreTranslate accepts) with the small decoder here. */
#ifndef TFM_HTTP_REQUEST_H
#define TFM_HTTP_REQUEST_H

#include <stddef.h>

#include "tfm/generator.h"

typedef struct {
    size_t max_body;         /* bytes of a request body (the server checks it while reading) */
    int max_items;           /* q items of one /translate request */
    int max_chars;           /* characters (code points) of one q item or prompt */
    int max_tokens;          /* the most max_tokens a completion may ask for */
} http_limits;

typedef struct {
    int status;              /* 400, 413, 415, ... */
    char param[32];          /* the field at fault ("" = none) */
    char msg[320];
} http_error;

typedef enum { BODY_JSON, BODY_FORM, BODY_UNSUPPORTED } http_body_kind;
/* The body kind of a Content-Type header (NULL: JSON). A form whose body starts with '{' is read as JSON
 * (curl -d sends JSON as a form). */
http_body_kind http_body_kind_of(const char *content_type, const char *body, size_t n);

/* POST /translate and POST /attention (LibreTranslate's fields). */
typedef struct {
    char **q;                /* n_q items (UTF-8, no NUL) */
    int n_q, q_array;        /* q_array: q was an array (the answer is one) */
    char *source, *target;
    int alternatives;        /* extra hypotheses asked for (0..) */
    char *api_key;           /* LibreTranslate's api_key field, or NULL */
} http_translate_req;

/* POST /v1/completions (OpenAI's fields; llama.cpp's top_k). */
typedef struct {
    char *model;             /* NULL: the only language model */
    char *prompt;
    int stream;
    tfm_generate_options o;  /* o.stop[] point into stop_buf */
    char *stop_buf[TFM_MAX_STOP];
} http_completion_req;

/* 0 with *r filled (free with the _free function), or -1 with *e (status 400 or 415). */
int http_parse_translate(const char *body, size_t n, http_body_kind kind, const http_limits *lim,
                         http_translate_req *r, http_error *e);
int http_parse_completion(const char *body, size_t n, http_body_kind kind, const http_limits *lim,
                          http_completion_req *r, http_error *e);
void http_translate_req_free(http_translate_req *r);
void http_completion_req_free(http_completion_req *r);

/* A value of a request for a message: at most n - 1 bytes of whole UTF-8 characters; control characters and
 * bytes that are not UTF-8 as '?'. Returns out. */
const char *http_quote(const char *s, char *out, size_t n);

/* Set *e (returns -1). */
int http_fail(http_error *e, int status, const char *param, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

#endif
