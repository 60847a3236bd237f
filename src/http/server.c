/* The HTTP server (http.h) on libmicrohttpd in thread-per-connection mode: a handler may block while its job
 * runs (it polls the socket to notice a client that went away) without holding up other connections.
 *
 * A request: the first call of the access handler (headers read) may refuse it at once (draining, a
 * Content-Length over --max-body); body chunks are kept up to the limit; the last call hands the request
 * to api.c and queues its answer (a buffer, or a server-sent event stream read from the job). When MHD is
 * done with the request (answered, or the connection failed), request_done logs it and counts it.
 * Connections are tracked from accept to close for the watchdog (slow clients) and the shutdown drain. */
#include <arpa/inet.h>
#include <netdb.h>
#include <poll.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "http/api.h"
#include "http/http.h"
#include "http/mhd.h"

typedef struct conn_entry {
    int fd;
    double since;            /* start of the current request (accept, or the end of the previous answer) */
    int busy, cut;           /* busy: a request fully received is being answered; cut: closed by the watchdog */
    char addr[64];
    struct conn_entry *prev, *next;
} conn_entry;

struct http_server {
    http_config c;
    mhd_api mhd;             /* libmicrohttpd's functions (http/mhd.h) */
    struct MHD_Daemon *d;
    _Atomic(tfm_serve *) engine;
    http_metrics m;
    pthread_mutex_t mu;      /* conns, in_flight, draining, seq */
    pthread_cond_t idle, wd_cv;
    conn_entry *conns;
    long in_flight, seq;
    int draining, wd_stop, port;
    pthread_t watchdog;
    int wd_started;
};

typedef struct {
    double t0;
    long id;
    int ep, status, answered, streamed, too_large;
    size_t bytes;            /* of a buffered answer */
    char method[16], path[160];
    conn_entry *ce;
    char *body;
    size_t len, cap;
} request;

void http_config_default(http_config *c) {
    memset(c, 0, sizeof *c);
    c->host = "127.0.0.1";
    c->port = 8080;
    c->lim.max_body = 1 << 20;
    c->lim.max_items = 128;
    c->lim.max_chars = 5000;
    c->lim.max_tokens = 2048;
    c->timeout = 10;
    c->request_timeout = 30;
    c->max_connections = 512;
    c->access_log = 1;
}

static double mono(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* A printable copy of untrusted text for the log: other bytes become '?'. */
static void printable(char *dst, size_t n, const char *src) {
    size_t i = 0;
    for (; src && src[i] && i + 1 < n; i++) dst[i] = src[i] > 32 && src[i] < 127 && src[i] != '"' ? src[i] : '?';
    dst[i] = 0;
}

static void log_line(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void log_line(const char *fmt, ...) {
    char line[768], stamp[32];
    time_t now = time(NULL);
    struct tm tm;
    strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&now, &tm));
    va_list ap;
    va_start(ap, fmt);
    int n = snprintf(line, sizeof line, "[%s] ", stamp);
    vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    va_end(ap);
    strcat(line, "\n");
    fputs(line, stderr);   /* one call per line: lines of concurrent requests do not interleave */
}

static void mhd_log(void *cls, const char *fmt, va_list ap) {
    (void)cls;
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    msg[strcspn(msg, "\n")] = 0;
    log_line("tfm serve: libmicrohttpd: %s", msg);
}

/* ---------------------------------------------------------------- connections and the watchdog */
static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context, enum MHD_ConnectionNotificationCode code) {
    http_server *h = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        conn_entry *ce = calloc(1, sizeof *ce);
        if (!ce) return;
        const union MHD_ConnectionInfo *fd = h->mhd.get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        const union MHD_ConnectionInfo *ad = h->mhd.get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        ce->fd = fd ? fd->connect_fd : -1;
        ce->since = mono();
        if (ad && ad->client_addr) {
            const struct sockaddr *sa = ad->client_addr;
            const void *a = sa->sa_family == AF_INET6 ? (const void *)&((const struct sockaddr_in6 *)sa)->sin6_addr
                                                      : (const void *)&((const struct sockaddr_in *)sa)->sin_addr;
            if (!inet_ntop(sa->sa_family, a, ce->addr, sizeof ce->addr)) snprintf(ce->addr, sizeof ce->addr, "?");
        }
        pthread_mutex_lock(&h->mu);
        ce->next = h->conns;
        if (h->conns) h->conns->prev = ce;
        h->conns = ce;
        pthread_mutex_unlock(&h->mu);
        *socket_context = ce;
    } else if (code == MHD_CONNECTION_NOTIFY_CLOSED && *socket_context) {   /* before MHD closes the socket */
        conn_entry *ce = *socket_context;
        pthread_mutex_lock(&h->mu);
        if (ce->prev) ce->prev->next = ce->next;
        else h->conns = ce->next;
        if (ce->next) ce->next->prev = ce->prev;
        pthread_mutex_unlock(&h->mu);
        free(ce);
        *socket_context = NULL;
    }
}

/* Close connections whose request has not been fully received within request_timeout. The socket is shut
 * down under h->mu, and MHD reports the close (which removes the entry under h->mu) before it closes the
 * descriptor, so the descriptor is never another connection's. */
static void *watchdog_main(void *arg) {
    http_server *h = arg;
    pthread_mutex_lock(&h->mu);
    while (!h->wd_stop) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_nsec += 200000000L;
        if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
        pthread_cond_timedwait(&h->wd_cv, &h->mu, &ts);
        double now = mono();
        for (conn_entry *ce = h->conns; ce; ce = ce->next) {
            if (ce->busy || ce->cut || ce->fd < 0 || now - ce->since <= h->c.request_timeout) continue;
            shutdown(ce->fd, SHUT_RDWR);
            ce->cut = 1;
            pthread_mutex_lock(&h->m.mu);
            h->m.c.cut++;
            pthread_mutex_unlock(&h->m.mu);
            log_line("%s: no complete request within %d s (--request-timeout): connection closed", ce->addr,
                     h->c.request_timeout);
        }
    }
    pthread_mutex_unlock(&h->mu);
    return NULL;
}

/* Has the client closed its end (or reset the connection)? For a handler waiting on a job; conn: the
 * connection's conn_entry (NULL: not tracked, never gone). */
static int client_gone(void *conn) {
    const conn_entry *ce = conn;
    if (!ce || ce->fd < 0) return 0;
    struct pollfd p = {ce->fd, POLLRDHUP, 0};
    return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

/* ---------------------------------------------------------------- answers */
typedef struct {
    api_stream *st;
    conn_entry *ce;           /* the connection (client_gone) */
    char *pend;
    size_t plen, poff;
    int end;
} sse_ctx;

static ssize_t sse_read(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    sse_ctx *c = cls;
    while (c->poff == c->plen) {   /* wait for the next event, watching the client */
        free(c->pend);
        c->pend = NULL, c->plen = c->poff = 0;
        if (c->end) return MHD_CONTENT_READER_END_OF_STREAM;
        size_t len;
        int end;
        char *ev = api_stream_next(c->st, 100, &len, &end);
        if (ev) c->pend = ev, c->plen = len;
        else if (end) c->end = 1;
        else if (client_gone(c->ce)) return MHD_CONTENT_READER_END_WITH_ERROR;
    }
    size_t n = c->plen - c->poff < max ? c->plen - c->poff : max;
    memcpy(buf, c->pend + c->poff, n);
    c->poff += n;
    return (ssize_t)n;
}

static void sse_free(void *cls) {
    sse_ctx *c = cls;
    api_stream_free(c->st);   /* cancels the generation if the client went away */
    free(c->pend);
    free(c);
}

static enum MHD_Result send_reply(http_server *h, struct MHD_Connection *conn, request *rq, http_resp *out) {
    struct MHD_Response *r;
    if (out->stream) {
        sse_ctx *c = calloc(1, sizeof *c);
        if (!c) {
            api_stream_free(out->stream);
            return MHD_NO;
        }
        c->st = out->stream, c->ce = rq->ce;
        r = h->mhd.create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, sse_read, c, sse_free);
        if (!r) return sse_free(c), MHD_NO;
        h->mhd.add_response_header(r, "Cache-Control", "no-cache");
        rq->streamed = 1;
    } else {
        r = h->mhd.create_response_from_buffer(out->len, out->body, MHD_RESPMEM_MUST_FREE);
        if (!r) return free(out->body), MHD_NO;
    }
    if (out->content_type) h->mhd.add_response_header(r, "Content-Type", out->content_type);
    if (out->allow) h->mhd.add_response_header(r, "Allow", out->allow);
    if (out->unauthorized) h->mhd.add_response_header(r, "WWW-Authenticate", "Bearer");
    if (out->retry_after) {
        char s[16];
        snprintf(s, sizeof s, "%d", out->retry_after);
        h->mhd.add_response_header(r, "Retry-After", s);
    }
    pthread_mutex_lock(&h->mu);
    int draining = h->draining;
    pthread_mutex_unlock(&h->mu);
    if (draining) h->mhd.add_response_header(r, "Connection", "close");
    enum MHD_Result ok = h->mhd.queue_response(conn, (unsigned)out->status, r);
    h->mhd.destroy_response(r);
    rq->status = out->status, rq->answered = ok == MHD_YES, rq->bytes = out->len;
    return ok;
}

/* An error answer of the server itself (before api.c): LibreTranslate's shape, OpenAI's under /v1/. msg is
 * the server's own text (no quotes or backslashes to escape). */
static enum MHD_Result send_error(http_server *h, struct MHD_Connection *conn, request *rq, int status, const char *msg) {
    http_resp out;
    memset(&out, 0, sizeof out);
    size_t cap = strlen(msg) + 128;
    out.body = malloc(cap);
    if (!out.body) return MHD_NO;
    int oai = !strncmp(rq->path, "/v1/", 4);
    out.len = (size_t)snprintf(out.body, cap, oai ? "{\"error\":{\"message\":\"%s\",\"type\":\"invalid_request_error\",\"param\":null,\"code\":null}}"
                                                  : "{\"error\":\"%s\"}", msg);
    out.status = status, out.content_type = "application/json";
    return send_reply(h, conn, rq, &out);
}

/* ---------------------------------------------------------------- requests */
static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **con_cls) {
    (void)version;
    http_server *h = cls;
    request *rq = *con_cls;
    if (!rq) {   /* headers read */
        if (!(rq = calloc(1, sizeof *rq))) return MHD_NO;
        rq->t0 = mono();
        snprintf(rq->method, sizeof rq->method, "%s", method);
        printable(rq->path, sizeof rq->path, url);
        rq->ep = http_endpoint_of(url);
        const union MHD_ConnectionInfo *ci = h->mhd.get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
        rq->ce = ci ? ci->socket_context : NULL;
        pthread_mutex_lock(&h->mu);
        rq->id = ++h->seq;
        h->in_flight++;
        int draining = h->draining;
        pthread_mutex_unlock(&h->mu);
        pthread_mutex_lock(&h->m.mu);
        h->m.c.in_flight++;
        pthread_mutex_unlock(&h->m.mu);
        *con_cls = rq;
        if (draining && rq->ep != EP_HEALTH) return send_error(h, conn, rq, 503, "the server is shutting down");
        const char *cl = h->mhd.lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        unsigned long long body = cl ? strtoull(cl, NULL, 10) : 0;
        if (body > h->c.lim.max_body) {
            char msg[128];
            snprintf(msg, sizeof msg, "the body (%llu bytes) is over the limit of %zu bytes (--max-body)", body,
                     h->c.lim.max_body);
            return send_error(h, conn, rq, 413, msg);
        }
        return MHD_YES;
    }
    if (*upload_size) {   /* a body chunk: kept up to the limit, the rest counted and dropped */
        size_t n = *upload_size;
        *upload_size = 0;
        if (rq->too_large || rq->len + n > h->c.lim.max_body) return rq->too_large = 1, MHD_YES;
        if (rq->len + n + 1 > rq->cap) {
            size_t c = rq->cap ? rq->cap * 2 : 4096;
            while (c < rq->len + n + 1) c *= 2;
            if (c > h->c.lim.max_body + 1) c = h->c.lim.max_body + 1;
            char *b = realloc(rq->body, c);
            if (!b) return MHD_NO;
            rq->body = b, rq->cap = c;
        }
        memcpy(rq->body + rq->len, upload, n);
        rq->len += n;
        return MHD_YES;
    }
    if (rq->answered) return MHD_YES;   /* an early answer (413 / 503) was queued on the first call */
    if (rq->ce) {
        pthread_mutex_lock(&h->mu);
        rq->ce->busy = 1;   /* received: no longer the watchdog's business */
        pthread_mutex_unlock(&h->mu);
    }
    if (rq->too_large) {
        char msg[128];
        snprintf(msg, sizeof msg, "the body is over the limit of %zu bytes (--max-body)", h->c.lim.max_body);
        return send_error(h, conn, rq, 413, msg);
    }
    http_req in = {method, url, h->mhd.lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE),
                   h->mhd.lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION),
                   rq->body ? rq->body : "", rq->len};
    if (rq->body) rq->body[rq->len] = 0;
    pthread_mutex_lock(&h->mu);
    int draining = h->draining;
    pthread_mutex_unlock(&h->mu);
    http_ctx ctx = {&h->c, atomic_load(&h->engine), &h->m, draining, rq->id, h->m.started, client_gone, rq->ce};
    http_resp out;
    api_handle(&ctx, &in, &out);
    if (out.gone) return MHD_NO;   /* the client went away: close, logged as 499 */
    return send_reply(h, conn, rq, &out);
}

static void request_done(void *cls, struct MHD_Connection *conn, void **con_cls, enum MHD_RequestTerminationCode toe) {
    (void)conn;
    http_server *h = cls;
    request *rq = *con_cls;
    if (!rq) return;
    double dt = mono() - rq->t0;
    int status = rq->answered ? rq->status : 499;   /* nginx's "client closed request" */
    const char *how = toe == MHD_REQUEST_TERMINATED_COMPLETED_OK ? ""
                      : toe == MHD_REQUEST_TERMINATED_TIMEOUT_REACHED ? " (connection timed out)"
                      : toe == MHD_REQUEST_TERMINATED_DAEMON_SHUTDOWN ? " (server stopped)"
                      : rq->answered ? " (connection closed before the end of the answer)" : " (client gone)";
    char size[32] = "-";
    if (rq->streamed) snprintf(size, sizeof size, "stream");
    else if (rq->answered) snprintf(size, sizeof size, "%zuB", rq->bytes);
    if (h->c.access_log || toe != MHD_REQUEST_TERMINATED_COMPLETED_OK)   /* failures are logged even with --quiet */
        log_line("%s \"%s %s\" %d %s %.4fs #%ld%s", rq->ce ? rq->ce->addr : "-", rq->method, rq->path, status, size, dt,
                 rq->id, how);
    http_metrics_done(&h->m, rq->ep, status, dt);
    pthread_mutex_lock(&h->m.mu);
    h->m.c.in_flight--;
    pthread_mutex_unlock(&h->m.mu);
    pthread_mutex_lock(&h->mu);
    if (rq->ce) rq->ce->busy = 0, rq->ce->since = mono();   /* the next request on this connection starts now */
    if (--h->in_flight == 0) pthread_cond_broadcast(&h->idle);
    pthread_mutex_unlock(&h->mu);
    free(rq->body);
    free(rq);
    *con_cls = NULL;
}

/* ---------------------------------------------------------------- start, stop */
http_server *http_start(const http_config *c) {
    mhd_api mhd;
    if (mhd_load(&mhd)) return NULL;
    char port[16];
    snprintf(port, sizeof port, "%d", c->port);
    struct addrinfo hints = {.ai_flags = AI_PASSIVE | AI_NUMERICSERV, .ai_socktype = SOCK_STREAM}, *ai = NULL;
    int gai = getaddrinfo(c->host, port, &hints, &ai);
    if (gai) return tfm_set_error("--host %s: %s", c->host, gai_strerror(gai)), NULL;
    http_server *h = calloc(1, sizeof *h);
    if (!h) {
        freeaddrinfo(ai);
        return tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory"), NULL;
    }
    h->c = *c;
    h->mhd = mhd;
    http_metrics_init(&h->m);
    pthread_mutex_init(&h->mu, NULL);
    pthread_cond_init(&h->idle, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&h->wd_cv, &ca);
    pthread_condattr_destroy(&ca);
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ITC | MHD_USE_ERROR_LOG |
                     (ai->ai_family == AF_INET6 ? MHD_USE_IPv6 : 0);
    h->d = h->mhd.start_daemon(flags, (uint16_t)c->port, NULL, NULL, on_request, h,
                               MHD_OPTION_EXTERNAL_LOGGER, mhd_log, h,   /* first: it gets every message */
                               MHD_OPTION_SOCK_ADDR, ai->ai_addr,
                               MHD_OPTION_CONNECTION_LIMIT, (unsigned)c->max_connections,
                               MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)c->timeout,
                               MHD_OPTION_NOTIFY_COMPLETED, request_done, h,
                               MHD_OPTION_NOTIFY_CONNECTION, on_connection, h,
                               MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!h->d) {
        tfm_set_error("cannot listen on %s port %d (in use, or not an address of this machine)", c->host, c->port);
        http_free(h);
        return NULL;
    }
    const union MHD_DaemonInfo *di = h->mhd.get_daemon_info(h->d, MHD_DAEMON_INFO_BIND_PORT);
    h->port = di ? di->port : c->port;
    if (pthread_create(&h->watchdog, NULL, watchdog_main, h) == 0) h->wd_started = 1;
    return h;
}

int http_port(const http_server *h) { return h->port; }

void http_set_engine(http_server *h, tfm_serve *engine) { atomic_store(&h->engine, engine); }

void http_shutdown(http_server *h) {
    if (!h->d) return;
    pthread_mutex_lock(&h->mu);
    h->draining = 1;
    long n = h->in_flight;
    pthread_mutex_unlock(&h->mu);
    MHD_socket lfd = h->mhd.quiesce_daemon(h->d);   /* no new connections */
    if (lfd != MHD_INVALID_SOCKET) close(lfd);
    if (n) log_line("tfm serve: stopping: answering %ld request(s) in flight", n);
    for (int quiet = 0; quiet < 2;) {   /* until no request has been in flight for two looks 0.1 s apart */
        pthread_mutex_lock(&h->mu);
        while (h->in_flight > 0) pthread_cond_wait(&h->idle, &h->mu), quiet = 0;
        pthread_mutex_unlock(&h->mu);
        usleep(100000);
        quiet++;
    }
    h->mhd.stop_daemon(h->d);   /* closes the idle connections, joins their threads */
    h->d = NULL;
    pthread_mutex_lock(&h->mu);
    h->wd_stop = 1;
    pthread_cond_broadcast(&h->wd_cv);
    pthread_mutex_unlock(&h->mu);
    if (h->wd_started) pthread_join(h->watchdog, NULL), h->wd_started = 0;
}

void http_free(http_server *h) {
    if (!h) return;
    http_shutdown(h);
    pthread_cond_destroy(&h->idle);
    pthread_cond_destroy(&h->wd_cv);
    pthread_mutex_destroy(&h->mu);
    http_metrics_destroy(&h->m);
    free(h);
}
