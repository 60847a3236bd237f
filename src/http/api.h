/* The endpoints of tfm serve (src/http/api.c), between the server (server.c: connections, bodies, headers)
 * and the engine: a request in, a reply out. */
#ifndef TFM_HTTP_API_H
#define TFM_HTTP_API_H

#include <stddef.h>

#include "http/http.h"
#include "http/metrics.h"

typedef struct {
    const http_config *cfg;
    tfm_serve *engine;       /* NULL while the models load */
    http_metrics *metrics;
    int draining;            /* shutting down */
    long id;                 /* the request's number (completion ids) */
    double started;          /* server start, Unix seconds */
    int (*client_gone)(void *conn);   /* polled while a job runs */
    void *conn;
} http_ctx;

typedef struct {
    const char *method, *path;
    const char *content_type, *authorization;
    const char *body;        /* NUL-terminated */
    size_t len;
} http_req;

typedef struct api_stream api_stream;

typedef struct {
    int status;
    char *body;              /* malloc'd */
    size_t len;
    const char *content_type;
    const char *allow;       /* 405: the allowed methods */
    int retry_after;         /* seconds (503 when busy), 0 = none */
    int unauthorized;        /* 401: add WWW-Authenticate */
    api_stream *stream;      /* server-sent events instead of body */
    int gone;                /* the client went away: close without an answer */
} http_resp;

void api_handle(const http_ctx *ctx, const http_req *rq, http_resp *out);

/* Server-sent events of a streamed completion: the next bytes ("data: {...}\n\n" events, the last one
 * "data: [DONE]\n\n"), waiting up to timeout_ms for text; NULL with *len 0 if none yet; *end after the last. */
char *api_stream_next(api_stream *st, int timeout_ms, size_t *len, int *end);
void api_stream_free(api_stream *st);   /* cancels the generation if it still runs */

/* The page at / (page.html, embedded by the Makefile). */
extern const char http_page[];
extern const unsigned long http_page_len;

#endif
