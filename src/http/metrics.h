/* Counters of tfm serve and their Prometheus text (src/http/metrics.c): requests by endpoint and status,
 * latency histograms by endpoint, requests in flight, connections cut for slowness; plus the engine's
 * counters (queue depth, batch sizes, slots, tokens) read at scrape time. */
#ifndef TFM_HTTP_METRICS_H
#define TFM_HTTP_METRICS_H

#include <pthread.h>

#include "tfm/serve.h"

enum { EP_PAGE, EP_HEALTH, EP_METRICS, EP_LANGUAGES, EP_TRANSLATE, EP_ATTENTION, EP_COMPLETIONS, EP_MODELS, EP_OTHER,
       EP_COUNT };
extern const char *const http_endpoint_name[EP_COUNT];
int http_endpoint_of(const char *path);

#define HTTP_N_STATUS 14   /* the status codes tfm serve answers with, then "other" */
#define HTTP_N_LAT 12      /* latency buckets (seconds), then +Inf */

typedef struct {
    long requests[EP_COUNT][HTTP_N_STATUS + 1];
    long lat[EP_COUNT][HTTP_N_LAT + 1];
    double lat_sum[EP_COUNT];
    long in_flight;          /* requests being answered now */
    long cut;                /* connections closed for not sending a request within --request-timeout */
} http_counts;

typedef struct {
    pthread_mutex_t mu;      /* guards c */
    http_counts c;
    double started;          /* wall-clock start (Unix seconds) */
} http_metrics;

void http_metrics_init(http_metrics *m);
void http_metrics_destroy(http_metrics *m);
/* A request answered (or given up: status 499 = the client went away) after `seconds`. */
void http_metrics_done(http_metrics *m, int endpoint, int status, double seconds);
/* The Prometheus text (malloc'd, *len bytes); engine NULL while models load. */
char *http_metrics_text(http_metrics *m, tfm_serve *engine, size_t *len);

#endif
