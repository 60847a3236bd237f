/* Prometheus text format 0.0.4 (https://prometheus.io/docs/instrumenting/exposition_formats/): one HELP and
 * TYPE line per metric, counters end in _total, histograms give cumulative _bucket{le=...}, _sum, _count. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "http/metrics.h"

const char *const http_endpoint_name[EP_COUNT] = {"/", "/health", "/metrics", "/languages", "/translate",
                                                  "/attention", "/v1/completions", "/v1/models", "other"};
static const int status_code[HTTP_N_STATUS] = {200, 400, 401, 404, 405, 408, 413, 415, 429, 431, 499, 500, 503, 504};
static const double lat_le[HTTP_N_LAT] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30};

int http_endpoint_of(const char *path) {
    if (!strcmp(path, "/index.html")) return EP_PAGE;
    for (int i = 0; i < EP_OTHER; i++)
        if (!strcmp(path, http_endpoint_name[i])) return i;
    return EP_OTHER;
}

void http_metrics_init(http_metrics *m) {
    memset(m, 0, sizeof *m);
    pthread_mutex_init(&m->mu, NULL);
    m->started = (double)time(NULL);
}

void http_metrics_destroy(http_metrics *m) { pthread_mutex_destroy(&m->mu); }

void http_metrics_done(http_metrics *m, int ep, int status, double seconds) {
    int s = 0, l = 0;
    while (s < HTTP_N_STATUS && status_code[s] != status) s++;
    while (l < HTTP_N_LAT && seconds > lat_le[l]) l++;
    pthread_mutex_lock(&m->mu);
    m->c.requests[ep][s]++;
    m->c.lat[ep][l]++;
    m->c.lat_sum[ep] += seconds;
    pthread_mutex_unlock(&m->mu);
}

/* ---------------------------------------------------------------- text */
typedef struct {
    char *b;
    size_t len, cap;
    int oom;
} text;

static void put(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(text *t, const char *fmt, ...) {
    for (int pass = 0; pass < 2 && !t->oom; pass++) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(t->b + t->len, t->cap - t->len, fmt, ap);
        va_end(ap);
        if (n < 0) t->oom = 1;
        else if ((size_t)n < t->cap - t->len) return (void)(t->len += (size_t)n);
        else if (pass == 0) {
            size_t c = 2 * t->cap + (size_t)n + 1;
            char *p = realloc(t->b, c);
            if (!p) t->oom = 1;
            else t->b = p, t->cap = c;
        }
    }
}

static void head(text *t, const char *name, const char *type, const char *help) {
    put(t, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* A histogram from the engine's power-of-two buckets. */
static void pow2_hist(text *t, const char *name, const char *help, const long *b, long sum) {
    head(t, name, "histogram", help);
    long acc = 0;
    for (int k = 0; k < TFM_SERVE_HIST; k++) acc += b[k], put(t, "%s_bucket{le=\"%d\"} %ld\n", name, 1 << k, acc);
    put(t, "%s_bucket{le=\"+Inf\"} %ld\n%s_sum %ld\n%s_count %ld\n", name, acc, name, sum, name, acc);
}

static void engine_metrics(text *t, tfm_serve *s) {
    tfm_serve_stats st;
    tfm_serve_get_stats(s, &st);
    tfm_serve_params p = tfm_serve_get_params(s);
    int n_gen = 0;
    for (int i = 0; i < tfm_serve_n_models(s); i++) n_gen += tfm_serve_model_info(s, i)->kind == TFM_SERVE_GENERATOR;
    head(t, "tfm_queue_depth", "gauge", "Jobs waiting to start (translation and generation), at most --max-queue.");
    put(t, "tfm_queue_depth %ld\n", st.queued);
    head(t, "tfm_queue_capacity", "gauge", "The queue bound (--max-queue).");
    put(t, "tfm_queue_capacity %d\n", p.max_queue);
    head(t, "tfm_queue_rejected_total", "counter", "Requests refused because the queue was full (HTTP 503).");
    put(t, "tfm_queue_rejected_total %ld\n", st.busy);
    head(t, "tfm_translate_jobs_running", "gauge", "Translation requests being decoded now.");
    put(t, "tfm_translate_jobs_running %ld\n", st.translating);
    head(t, "tfm_generate_slots_busy", "gauge", "Generation streams in slots now.");
    put(t, "tfm_generate_slots_busy %ld\n", st.streams);
    head(t, "tfm_generate_slots", "gauge", "Generation slots (--slots per language model).");
    put(t, "tfm_generate_slots %ld\n", (long)p.gen_slots * n_gen);
    head(t, "tfm_jobs_total", "counter", "Jobs finished, by kind.");
    put(t, "tfm_jobs_total{kind=\"translate\"} %ld\ntfm_jobs_total{kind=\"generate\"} %ld\n", st.translate_jobs,
        st.generate_jobs);
    head(t, "tfm_jobs_cancelled_total", "counter", "Jobs cancelled (the client went away).");
    put(t, "tfm_jobs_cancelled_total %ld\n", st.cancelled);
    head(t, "tfm_jobs_failed_total", "counter", "Jobs that failed (HTTP 500).");
    put(t, "tfm_jobs_failed_total %ld\n", st.failed);
    head(t, "tfm_translate_lines_total", "counter", "Lines translated.");
    put(t, "tfm_translate_lines_total %ld\n", st.translate_lines);
    head(t, "tfm_tokens_in_total", "counter", "Tokens read: translation source tokens, generation prompt tokens.");
    put(t, "tfm_tokens_in_total{kind=\"translate\"} %ld\ntfm_tokens_in_total{kind=\"generate\"} %ld\n",
        st.translate_tokens_in, st.generate_tokens_in);
    head(t, "tfm_tokens_out_total", "counter", "Tokens made: best translation tokens, generated tokens.");
    put(t, "tfm_tokens_out_total{kind=\"translate\"} %ld\ntfm_tokens_out_total{kind=\"generate\"} %ld\n",
        st.translate_tokens_out, st.generate_tokens_out);
    pow2_hist(t, "tfm_translate_batch_lines", "Lines decoded per translation call (dynamic batching).", st.batch_lines,
              st.batch_lines_sum);
    pow2_hist(t, "tfm_generate_batch_streams", "Streams stepped together per generation step (continuous batching).",
              st.step_streams, st.step_streams_sum);
}

char *http_metrics_text(http_metrics *m, tfm_serve *engine, size_t *len) {
    text t = {malloc(8192), 0, 8192, 0};
    if (!t.b) return NULL;
    http_counts c;
    pthread_mutex_lock(&m->mu);
    c = m->c;   /* a consistent copy */
    pthread_mutex_unlock(&m->mu);
    head(&t, "tfm_up", "gauge", "1 when the models are loaded and requests are served, 0 while loading.");
    put(&t, "tfm_up %d\n", engine != NULL);
    head(&t, "tfm_start_time_seconds", "gauge", "Start time of the server (Unix seconds).");
    put(&t, "tfm_start_time_seconds %.0f\n", m->started);
    head(&t, "tfm_http_requests_total", "counter", "HTTP requests answered, by endpoint and status (499: the client went away).");
    for (int e = 0; e < EP_COUNT; e++)
        for (int s = 0; s <= HTTP_N_STATUS; s++)
            if (c.requests[e][s]) {
                char code[8];
                snprintf(code, sizeof code, s < HTTP_N_STATUS ? "%d" : "other", s < HTTP_N_STATUS ? status_code[s] : 0);
                put(&t, "tfm_http_requests_total{endpoint=\"%s\",status=\"%s\"} %ld\n", http_endpoint_name[e], code,
                    c.requests[e][s]);
            }
    head(&t, "tfm_http_request_duration_seconds", "histogram", "Time from a request's headers to its last byte, by endpoint.");
    for (int e = 0; e < EP_COUNT; e++) {
        long acc = 0;
        for (int l = 0; l <= HTTP_N_LAT; l++) acc += c.lat[e][l];
        if (!acc) continue;
        acc = 0;
        for (int l = 0; l < HTTP_N_LAT; l++)
            acc += c.lat[e][l], put(&t, "tfm_http_request_duration_seconds_bucket{endpoint=\"%s\",le=\"%g\"} %ld\n",
                                    http_endpoint_name[e], lat_le[l], acc);
        acc += c.lat[e][HTTP_N_LAT];
        put(&t, "tfm_http_request_duration_seconds_bucket{endpoint=\"%s\",le=\"+Inf\"} %ld\n", http_endpoint_name[e], acc);
        put(&t, "tfm_http_request_duration_seconds_sum{endpoint=\"%s\"} %.6f\n", http_endpoint_name[e], c.lat_sum[e]);
        put(&t, "tfm_http_request_duration_seconds_count{endpoint=\"%s\"} %ld\n", http_endpoint_name[e], acc);
    }
    head(&t, "tfm_http_requests_in_flight", "gauge", "Requests being answered now.");
    put(&t, "tfm_http_requests_in_flight %ld\n", c.in_flight);
    head(&t, "tfm_http_connections_cut_total", "counter",
         "Connections closed because a request was not received within --request-timeout (slow clients).");
    put(&t, "tfm_http_connections_cut_total %ld\n", c.cut);
    if (engine) engine_metrics(&t, engine);
    if (t.oom) return free(t.b), NULL;
    *len = t.len;
    return t.b;
}
