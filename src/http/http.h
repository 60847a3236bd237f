/* The HTTP server of tfm serve (src/http/server.c), on GNU libmicrohttpd: one thread per connection, its
 * connection limit and idle timeout, plus a watchdog that closes a connection whose request is not fully
 * received within request_timeout (a client sending a byte a second never times out on idle alone).
 * Requests go to the engine (include/tfm/serve.h) through the handlers of api.c. Built only when
 * pkg-config finds libmicrohttpd and cJSON (the Makefile); libtfm never links them. */
#ifndef TFM_HTTP_H
#define TFM_HTTP_H

#include <stdio.h>

#include "http/request.h"
#include "tfm/serve.h"

typedef struct {
    const char *host;        /* address to listen on (default 127.0.0.1; "0.0.0.0" or "::" for all) */
    int port;                /* 0: any free port (printed) */
    const char *api_key;     /* NULL: open; else requests need "Authorization: Bearer KEY" (or api_key) */
    http_limits lim;
    int timeout;             /* seconds a connection may stay idle (default 10) */
    int request_timeout;     /* seconds to receive a whole request (default 30) */
    int max_connections;     /* connections at once (default 512) */
    int access_log;          /* one line per request on stderr (default 1) */
} http_config;
void http_config_default(http_config *c);

typedef struct http_server http_server;
/* Listen; /health answers 503 until http_set_engine. NULL with a tfm error (address, port in use). */
http_server *http_start(const http_config *c);
int http_port(const http_server *h);
/* The models are loaded: serve them. */
void http_set_engine(http_server *h, tfm_serve *engine);
/* Stop accepting, answer the requests in flight (new ones on open connections get 503), close. */
void http_shutdown(http_server *h);
void http_free(http_server *h);

#endif
