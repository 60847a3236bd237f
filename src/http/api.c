/* The endpoints: LibreTranslate's (POST /translate, GET /languages; errors {"error": "..."}), OpenAI's
 * (POST /v1/completions, GET /v1/models; errors {"error": {"message", "type", "param", "code"}}), and
 * tfm's own (GET /, /health, /metrics, POST /attention). Bodies are parsed by request.c; everything that
 * needs the models (language pairs, the beam, the vocabulary) is checked here or by the engine. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "http/api.h"
#include "tfm/core.h"

/* ---------------------------------------------------------------- replies */
static void reply_text(http_resp *out, int status, const char *type, char *body, size_t len) {
    out->status = status, out->content_type = type, out->body = body, out->len = len;
}

/* Print j (deleted) as the reply; a 500 if printing fails (out of memory). */
static void reply_json(http_resp *out, int status, cJSON *j) {
    char *s = j ? cJSON_PrintUnformatted(j) : NULL;
    cJSON_Delete(j);
    if (!s) {
        s = strdup("{\"error\":\"out of memory\"}");
        status = 500;
    }
    reply_text(out, status, "application/json", s, s ? strlen(s) : 0);
}

/* LibreTranslate's error shape: {"error": "msg"} */
static void reply_error(http_resp *out, int status, const char *msg) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "error", msg);
    reply_json(out, status, j);
}

/* OpenAI's error shape */
static void reply_oai_error(http_resp *out, int status, const char *param, const char *code, const char *msg) {
    cJSON *j = cJSON_CreateObject(), *e = cJSON_AddObjectToObject(j, "error");
    cJSON_AddStringToObject(e, "message", msg);
    cJSON_AddStringToObject(e, "type", status == 401 ? "authentication_error" : status >= 500 ? "server_error"
                                                                                               : "invalid_request_error");
    if (param && param[0]) cJSON_AddStringToObject(e, "param", param);
    else cJSON_AddNullToObject(e, "param");
    if (code) cJSON_AddStringToObject(e, "code", code);
    else cJSON_AddNullToObject(e, "code");
    reply_json(out, status, j);
}

/* ---------------------------------------------------------------- small helpers */
static int is_openai(const char *path) { return !strncmp(path, "/v1/", 4); }

/* Constant-time comparison of a presented key with the configured one. */
static int key_ok(const char *want, const char *got) {
    if (!got) return 0;
    size_t n = strlen(want), m = strlen(got);
    unsigned char d = n != m;
    for (size_t i = 0; i < n; i++) d |= (unsigned char)(want[i] ^ got[i < m ? i : 0]);
    return !d;
}

/* The key of a request: "Authorization: Bearer KEY", else LibreTranslate's api_key field. */
static int authorized(const http_ctx *ctx, const http_req *rq, const char *body_key) {
    if (!ctx->cfg->api_key) return 1;
    const char *a = rq->authorization;
    if (a && !strncasecmp(a, "Bearer ", 7)) return key_ok(ctx->cfg->api_key, a + 7);
    return key_ok(ctx->cfg->api_key, body_key);
}

/* Wait for a job, watching the client: 0 done, -1 the client went away (the job is cancelled). */
static int wait_job(const http_ctx *ctx, tfm_serve_job *j) {
    while (!tfm_serve_job_wait(j, 50))
        if (ctx->client_gone && ctx->client_gone(ctx->conn)) return tfm_serve_job_cancel(j), -1;
    return 0;
}

static const struct {
    const char *code, *name;
} languages[] = {
    {"ar", "Arabic"}, {"bg", "Bulgarian"}, {"ca", "Catalan"}, {"cs", "Czech"}, {"da", "Danish"}, {"de", "German"},
    {"el", "Greek"}, {"en", "English"}, {"es", "Spanish"}, {"et", "Estonian"}, {"fa", "Persian"}, {"fi", "Finnish"},
    {"fr", "French"}, {"ga", "Irish"}, {"he", "Hebrew"}, {"hi", "Hindi"}, {"hu", "Hungarian"}, {"id", "Indonesian"},
    {"it", "Italian"}, {"ja", "Japanese"}, {"ko", "Korean"}, {"lt", "Lithuanian"}, {"lv", "Latvian"}, {"nb", "Norwegian"},
    {"nl", "Dutch"}, {"pl", "Polish"}, {"pt", "Portuguese"}, {"ro", "Romanian"}, {"ru", "Russian"}, {"sk", "Slovak"},
    {"sl", "Slovenian"}, {"sv", "Swedish"}, {"th", "Thai"}, {"tr", "Turkish"}, {"uk", "Ukrainian"}, {"vi", "Vietnamese"},
    {"zh", "Chinese"},
};

static const char *language_name(const char *code) {
    for (size_t i = 0; i < sizeof languages / sizeof *languages; i++)
        if (!strcmp(languages[i].code, code)) return languages[i].name;
    return code;
}

/* ---------------------------------------------------------------- GET endpoints */
static void health(const http_ctx *ctx, http_resp *out) {
    cJSON *j = cJSON_CreateObject();
    const char *st = ctx->draining ? "shutting down" : ctx->engine ? "ok" : "loading";
    cJSON_AddStringToObject(j, "status", st);
    reply_json(out, ctx->engine && !ctx->draining ? 200 : 503, j);
}

static int code_seen(cJSON *list, const char *code) {
    for (cJSON *it = list->child; it; it = it->next)
        if (!strcmp(cJSON_GetObjectItemCaseSensitive(it, "code")->valuestring, code)) return 1;
    return 0;
}

/* Every language of a loaded translator, with the languages it translates into ([] for target-only ones). */
static void list_languages(const http_ctx *ctx, http_resp *out) {
    cJSON *list = cJSON_CreateArray();
    int n = tfm_serve_n_models(ctx->engine);
    for (int side = 0; side < 2; side++)
        for (int i = 0; i < n; i++) {
            const tfm_serve_model *m = tfm_serve_model_info(ctx->engine, i);
            const char *code = side ? m->tgt_lang : m->src_lang;
            if (m->kind != TFM_SERVE_TRANSLATOR || code_seen(list, code)) continue;
            cJSON *l = cJSON_CreateObject(), *targets = cJSON_CreateArray();
            cJSON_AddStringToObject(l, "code", code);
            cJSON_AddStringToObject(l, "name", language_name(code));
            for (int k = 0; k < n && !side; k++) {
                const tfm_serve_model *o = tfm_serve_model_info(ctx->engine, k);
                if (o->kind == TFM_SERVE_TRANSLATOR && !strcmp(o->src_lang, code))
                    cJSON_AddItemToArray(targets, cJSON_CreateString(o->tgt_lang));
            }
            cJSON_AddItemToObject(l, "targets", targets);
            cJSON_AddItemToArray(list, l);
        }
    reply_json(out, 200, list);
}

static void list_models(const http_ctx *ctx, http_resp *out) {
    cJSON *j = cJSON_CreateObject(), *data = cJSON_CreateArray();
    cJSON_AddStringToObject(j, "object", "list");
    for (int i = 0; i < tfm_serve_n_models(ctx->engine); i++) {
        const tfm_serve_model *m = tfm_serve_model_info(ctx->engine, i);
        if (m->kind != TFM_SERVE_GENERATOR) continue;
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "id", m->name);
        cJSON_AddStringToObject(o, "object", "model");
        cJSON_AddNumberToObject(o, "created", ctx->started);
        cJSON_AddStringToObject(o, "owned_by", "tfm");
        cJSON_AddItemToArray(data, o);
    }
    cJSON_AddItemToObject(j, "data", data);
    reply_json(out, 200, j);
}

static void metrics(const http_ctx *ctx, http_resp *out) {
    size_t len = 0;
    char *t = http_metrics_text(ctx->metrics, ctx->engine, &len);
    if (!t) return reply_error(out, 500, "out of memory");
    reply_text(out, 200, "text/plain; version=0.0.4; charset=utf-8", t, len);
}

/* ---------------------------------------------------------------- translation */
/* The translator for source -> target: 0 with *model, or -1 with the reply made. "auto" picks the one model
 * translating into target when there is exactly one (no language detection). */
static int pick_translator(const http_ctx *ctx, const http_translate_req *r, int *model, http_resp *out) {
    tfm_serve *s = ctx->engine;
    char msg[256];
    if (!strcmp(r->source, "auto")) {
        int found = -1, n = 0;
        for (int i = 0; i < tfm_serve_n_models(s); i++) {
            const tfm_serve_model *m = tfm_serve_model_info(s, i);
            if (m->kind == TFM_SERVE_TRANSLATOR && !strcmp(m->tgt_lang, r->target)) found = i, n++;
        }
        if (n == 1) return *model = found, 0;
        char t[24];
        snprintf(msg, sizeof msg, "source 'auto' needs exactly one model translating into '%s' (%d are loaded; "
                 "tfm serve does not detect languages)", http_quote(r->target, t, sizeof t), n);
        return reply_error(out, 400, msg), -1;
    }
    if ((*model = tfm_serve_find_pair(s, r->source, r->target)) >= 0) return 0;
    int src_known = 0;
    for (int i = 0; i < tfm_serve_n_models(s); i++) {
        const tfm_serve_model *m = tfm_serve_model_info(s, i);
        src_known |= m->kind == TFM_SERVE_TRANSLATOR && !strcmp(m->src_lang, r->source);
    }
    char a[24], b[24];
    http_quote(r->source, a, sizeof a), http_quote(r->target, b, sizeof b);
    if (!src_known) snprintf(msg, sizeof msg, "source language '%s' is not supported (GET /languages)", a);
    else snprintf(msg, sizeof msg, "%s -> %s is not supported (GET /languages)", a, b);
    return reply_error(out, 400, msg), -1;
}

/* The lines of the items: each item is cut at its line ends ("\r\n" or "\n"); first[i] = its first line. */
static char **split_lines(const http_translate_req *r, int *first, int *n_lines) {
    int n = 0;
    for (int i = 0; i < r->n_q; i++) {
        n++;
        for (const char *p = r->q[i]; *p; p++) n += *p == '\n';
    }
    char **lines = calloc((size_t)n + 1, sizeof(char *));
    for (int i = 0, k = 0; lines && i < r->n_q; i++) {
        first[i] = k;
        for (const char *p = r->q[i];; p++) {
            const char *e = strchr(p, '\n');
            size_t len = e ? (size_t)(e - p) : strlen(p);
            if (len && p[len - 1] == '\r') len--;
            if (!(lines[k] = strndup(p, len))) {
                for (int j = 0; j < k; j++) free(lines[j]);
                free(lines);
                return NULL;
            }
            k++;
            if (!e) break;
            p = e;
        }
    }
    first[r->n_q] = n;
    *n_lines = n;
    return lines;
}

/* Hypothesis a of lines [from, to) joined by '\n' (a line with fewer hypotheses gives its best). */
static cJSON *joined(const tfm_translation *t, int from, int to, int a) {
    size_t len = 1;
    for (int k = from; k < to; k++) len += strlen(t[k].hypotheses[a < t[k].n_hypotheses ? a : 0]) + 1;
    char *s = malloc(len), *p = s;
    if (!s) return NULL;
    for (int k = from; k < to; k++) {
        const char *h = t[k].hypotheses[a < t[k].n_hypotheses ? a : 0];
        size_t l = strlen(h);
        if (k > from) *p++ = '\n';
        memcpy(p, h, l);
        p += l;
    }
    *p = 0;
    cJSON *j = cJSON_CreateString(s);
    free(s);
    return j;
}

/* The reply of LibreTranslate's /translate for translations t of the items' lines. */
static cJSON *translate_reply(const http_translate_req *r, int model_src, const char *src, const tfm_translation *t,
                              const int *first) {
    cJSON *j = cJSON_CreateObject(), *texts = cJSON_CreateArray(), *alts = cJSON_CreateArray(), *det = cJSON_CreateArray();
    for (int i = 0; i < r->n_q; i++) {
        cJSON_AddItemToArray(texts, joined(t, first[i], first[i + 1], 0));
        int n_alt = r->alternatives;   /* the alternatives every line of the item has */
        for (int k = first[i]; k < first[i + 1]; k++)
            if (t[k].n_hypotheses - 1 < n_alt) n_alt = t[k].n_hypotheses - 1;
        cJSON *a = cJSON_CreateArray();
        for (int k = 1; k <= n_alt; k++) cJSON_AddItemToArray(a, joined(t, first[i], first[i + 1], k));
        cJSON_AddItemToArray(alts, a);
        cJSON *d = cJSON_CreateObject();
        cJSON_AddNumberToObject(d, "confidence", 100);
        cJSON_AddStringToObject(d, "language", src);
        cJSON_AddItemToArray(det, d);
    }
    if (!r->q_array) {   /* one string: the first item of each list */
        cJSON *t0 = cJSON_DetachItemFromArray(texts, 0), *a0 = cJSON_DetachItemFromArray(alts, 0),
              *d0 = cJSON_DetachItemFromArray(det, 0);
        cJSON_Delete(texts), cJSON_Delete(alts), cJSON_Delete(det);
        texts = t0, alts = a0, det = d0;
    }
    if (model_src) cJSON_AddItemToObject(j, "detectedLanguage", det);
    else cJSON_Delete(det);
    cJSON_AddItemToObject(j, "translatedText", texts);
    if (r->alternatives) cJSON_AddItemToObject(j, "alternatives", alts);
    else cJSON_Delete(alts);
    return j;
}

/* The attention map of a one-line /attention request: rows = target tokens, with the token labels. */
static cJSON *attention_reply(const tfm_translation *t) {
    cJSON *j = cJSON_CreateObject(), *st = cJSON_CreateArray(), *tt = cJSON_CreateArray();
    cJSON_AddStringToObject(j, "translatedText", t->hypotheses[0]);
    for (int i = 0; i < t->n_source_tokens; i++) cJSON_AddItemToArray(st, cJSON_CreateString(t->source_tokens[i]));
    for (int i = 0; i < t->n_target_tokens; i++) cJSON_AddItemToArray(tt, cJSON_CreateString(t->target_tokens[i]));
    cJSON_AddItemToObject(j, "source_tokens", st);
    cJSON_AddItemToObject(j, "target_tokens", tt);
    size_t cap = 16 + (size_t)t->n_source_tokens * t->n_target_tokens * 12 + (size_t)t->n_target_tokens * 4;
    char *raw = malloc(cap), *p = raw;   /* 4 significant digits: a heatmap needs no more */
    if (!raw) return cJSON_Delete(j), NULL;
    *p++ = '[';
    for (int i = 0; i < t->n_target_tokens; i++) {
        *p++ = i ? ',' : '[';
        if (i) *p++ = '[';
        for (int k = 0; k < t->n_source_tokens; k++)
            p += snprintf(p, cap - (size_t)(p - raw), "%s%.4g", k ? "," : "", t->attention[(size_t)i * t->n_source_tokens + k]);
        *p++ = ']';
    }
    if (!t->n_target_tokens) *p++ = '[', *p++ = ']';
    *p++ = ']';
    *p = 0;
    cJSON_AddRawToObject(j, "attention", raw);
    free(raw);
    return j;
}

static void translate(const http_ctx *ctx, const http_req *rq, int attention, http_resp *out) {
    http_translate_req r;
    http_error e;
    if (http_parse_translate(rq->body, rq->len, http_body_kind_of(rq->content_type, rq->body, rq->len), &ctx->cfg->lim,
                             &r, &e))
        return reply_error(out, e.status, e.msg);
    int model = -1, n_lines = 0, *first = NULL;
    char **lines = NULL, msg[256];
    tfm_serve_job *j = NULL;
    if (!authorized(ctx, rq, r.api_key)) {
        out->unauthorized = 1;
        reply_error(out, 401, "Invalid API key");
        goto end;
    }
    if (pick_translator(ctx, &r, &model, out)) goto end;
    const tfm_serve_model *m = tfm_serve_model_info(ctx->engine, model);
    if (attention && (r.q_array || strchr(r.q[0], '\n'))) {
        reply_error(out, 400, "/attention takes one line of text (q: a string without line breaks)");
        goto end;
    }
    if (r.alternatives + 1 > m->beam) {
        snprintf(msg, sizeof msg, "alternatives %d needs a beam of at least %d; the server decodes with beam %d "
                 "(tfm serve --beam)", r.alternatives, r.alternatives + 1, m->beam);
        reply_error(out, 400, msg);
        goto end;
    }
    if (r.n_q == 0) {   /* q: [] */
        reply_json(out, 200, translate_reply(&r, 0, r.source, NULL, NULL));
        goto end;
    }
    if (!(first = malloc(sizeof(int) * ((size_t)r.n_q + 1))) || !(lines = split_lines(&r, first, &n_lines))) {
        reply_error(out, 500, "out of memory");
        goto end;
    }
    int rc = tfm_serve_translate(ctx->engine, model, (const char *const *)lines, n_lines, 1 + r.alternatives,
                                 attention, &j);
    if (rc == TFM_SERVE_BUSY) {
        out->retry_after = 1;
        reply_error(out, 503, "the server is busy: the queue is full (tfm serve --max-queue); try again");
    } else if (rc == TFM_SERVE_CLOSED) {
        reply_error(out, 503, "the server is shutting down");
    } else if (rc) {
        reply_error(out, tfm_last_error_kind() == TFM_ERR_NOMEM ? 500 : 400, tfm_last_error());
    } else if (wait_job(ctx, j)) {
        out->gone = 1;
    } else {
        int n;
        const tfm_translation *t = tfm_serve_job_translations(j, &n);
        if (!t) reply_error(out, 500, tfm_serve_job_error(j) ? tfm_serve_job_error(j) : "translation failed");
        else if (attention) reply_json(out, 200, attention_reply(t));
        else reply_json(out, 200, translate_reply(&r, !strcmp(r.source, "auto"), m->src_lang, t, first));
    }
end:
    tfm_serve_job_free(j);
    for (int i = 0; lines && i < n_lines; i++) free(lines[i]);
    free(lines), free(first);
    http_translate_req_free(&r);
}

/* ---------------------------------------------------------------- completions */
struct api_stream {
    tfm_serve_job *job;
    char id[32], model[64];
    double created;
    int sent_done;
};

static cJSON *completion_object(const char *id, const char *model, double created) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "id", id);
    cJSON_AddStringToObject(j, "object", "text_completion");
    cJSON_AddNumberToObject(j, "created", created);
    cJSON_AddStringToObject(j, "model", model);
    return j;
}

/* choices: [{"text", "index", "logprobs": null, "finish_reason"}] (+ usage when final) */
static cJSON *completion_chunk(const char *id, const char *model, double created, const char *text,
                               const tfm_generation *final) {
    cJSON *j = completion_object(id, model, created), *choices = cJSON_AddArrayToObject(j, "choices");
    cJSON *c = cJSON_CreateObject();
    cJSON_AddStringToObject(c, "text", text);
    cJSON_AddNumberToObject(c, "index", 0);
    cJSON_AddNullToObject(c, "logprobs");
    if (final) cJSON_AddStringToObject(c, "finish_reason", tfm_finish_reason_name(final->finish_reason));
    else cJSON_AddNullToObject(c, "finish_reason");
    cJSON_AddItemToArray(choices, c);
    if (final) {
        cJSON *u = cJSON_AddObjectToObject(j, "usage");
        cJSON_AddNumberToObject(u, "prompt_tokens", final->n_prompt_tokens);
        cJSON_AddNumberToObject(u, "completion_tokens", final->n_tokens);
        cJSON_AddNumberToObject(u, "total_tokens", final->n_prompt_tokens + final->n_tokens);
    }
    return j;
}

/* "data: JSON\n\n" (j deleted) appended to *buf */
static char *sse_event(cJSON *j, const char *raw, size_t *len) {
    char *s = j ? cJSON_PrintUnformatted(j) : NULL;
    cJSON_Delete(j);
    const char *body = raw ? raw : s;
    char *ev = body ? malloc(strlen(body) + 9) : NULL;
    if (ev) *len = (size_t)sprintf(ev, "data: %s\n\n", body);
    free(s);
    return ev;
}

char *api_stream_next(api_stream *st, int timeout_ms, size_t *len, int *end) {
    *len = 0, *end = 0;
    if (st->sent_done) return *end = 1, NULL;
    int done;
    size_t n;
    char *t = tfm_serve_job_take_text(st->job, timeout_ms, &n, &done);
    if (t) {
        char *ev = sse_event(completion_chunk(st->id, st->model, st->created, t, NULL), NULL, len);
        free(t);
        return ev;
    }
    if (!done) return NULL;
    /* the end: a last chunk with the finish reason and usage (or the error), then [DONE] */
    const tfm_generation *g = tfm_serve_job_generation(st->job);
    size_t l1 = 0, l2 = 0;
    char *a;
    if (g) {
        a = sse_event(completion_chunk(st->id, st->model, st->created, "", g), NULL, &l1);
    } else {
        cJSON *j = cJSON_CreateObject(), *e = cJSON_AddObjectToObject(j, "error");
        cJSON_AddStringToObject(e, "message", tfm_serve_job_error(st->job) ? tfm_serve_job_error(st->job) : "failed");
        cJSON_AddStringToObject(e, "type", "server_error");
        a = sse_event(j, NULL, &l1);
    }
    char *b = sse_event(NULL, "[DONE]", &l2), *ev = a && b ? malloc(l1 + l2 + 1) : NULL;
    if (ev) memcpy(ev, a, l1), memcpy(ev + l1, b, l2 + 1), *len = l1 + l2;
    free(a), free(b);
    st->sent_done = 1;
    return ev;
}

void api_stream_free(api_stream *st) {
    if (!st) return;
    tfm_serve_job_free(st->job);   /* cancels a stream whose client went away */
    free(st);
}

/* The language model a request names (or the only one): 0, or -1 with the reply made. */
static int pick_generator(const http_ctx *ctx, const char *name, int *model, http_resp *out) {
    tfm_serve *s = ctx->engine;
    char msg[256];
    if (name) {
        *model = tfm_serve_find(s, name);
        const tfm_serve_model *m = tfm_serve_model_info(s, *model);
        if (m && m->kind == TFM_SERVE_GENERATOR) return 0;
        char q[72];
        http_quote(name, q, sizeof q);
        if (m) snprintf(msg, sizeof msg, "model '%s' is a translator: use POST /translate", q);
        else snprintf(msg, sizeof msg, "The model '%s' does not exist (GET /v1/models)", q);
        return reply_oai_error(out, m ? 400 : 404, "model", m ? NULL : "model_not_found", msg), -1;
    }
    int n = 0;
    for (int i = 0; i < tfm_serve_n_models(s); i++)
        if (tfm_serve_model_info(s, i)->kind == TFM_SERVE_GENERATOR) *model = i, n++;
    if (n == 1) return 0;
    snprintf(msg, sizeof msg, n ? "model is required: %d language models are loaded (GET /v1/models)"
                                : "no language model is loaded (tfm serve LM.tfm)", n);
    return reply_oai_error(out, n ? 400 : 404, "model", n ? NULL : "model_not_found", msg), -1;
}

static void completions(const http_ctx *ctx, const http_req *rq, http_resp *out) {
    http_completion_req r;
    http_error e;
    if (http_parse_completion(rq->body, rq->len, http_body_kind_of(rq->content_type, rq->body, rq->len),
                              &ctx->cfg->lim, &r, &e))
        return reply_oai_error(out, e.status, e.param, NULL, e.msg);
    int model;
    tfm_serve_job *j = NULL;
    if (pick_generator(ctx, r.model, &model, out)) goto end;
    const char *name = tfm_serve_model_info(ctx->engine, model)->name;
    char id[32];
    snprintf(id, sizeof id, "cmpl-%lx", ctx->id);
    int rc = tfm_serve_generate(ctx->engine, model, r.prompt, &r.o, &j);
    if (rc == TFM_SERVE_BUSY) {
        out->retry_after = 1;
        reply_oai_error(out, 503, NULL, "server_busy", "the server is busy: the queue is full (tfm serve --max-queue)");
    } else if (rc == TFM_SERVE_CLOSED) {
        reply_oai_error(out, 503, NULL, NULL, "the server is shutting down");
    } else if (rc) {
        int oom = tfm_last_error_kind() == TFM_ERR_NOMEM;
        reply_oai_error(out, oom ? 500 : 400, oom ? NULL : "prompt", NULL, tfm_last_error());
    } else if (r.stream) {
        api_stream *st = calloc(1, sizeof *st);
        if (!st) {
            reply_oai_error(out, 500, NULL, NULL, "out of memory");
            goto end;
        }
        st->job = j, j = NULL;
        snprintf(st->id, sizeof st->id, "%s", id);
        snprintf(st->model, sizeof st->model, "%s", name);
        st->created = (double)time(NULL);
        out->status = 200, out->content_type = "text/event-stream", out->stream = st;
    } else if (wait_job(ctx, j)) {
        out->gone = 1;
    } else {
        const tfm_generation *g = tfm_serve_job_generation(j);
        if (!g) reply_oai_error(out, 500, NULL, NULL, tfm_serve_job_error(j) ? tfm_serve_job_error(j) : "failed");
        else reply_json(out, 200, completion_chunk(id, name, (double)time(NULL), g->text, g));
    }
end:
    tfm_serve_job_free(j);
    http_completion_req_free(&r);
}

/* ---------------------------------------------------------------- routing */
void api_handle(const http_ctx *ctx, const http_req *rq, http_resp *out) {
    memset(out, 0, sizeof *out);
    int ep = http_endpoint_of(rq->path), post = ep == EP_TRANSLATE || ep == EP_ATTENTION || ep == EP_COMPLETIONS;
    const char *want = post ? "POST" : "GET";
    char msg[400];
    if (ep == EP_OTHER) {
        char q[200];
        snprintf(msg, sizeof msg, "not found: %s (endpoints: / /health /metrics /languages /translate /attention "
                 "/v1/completions /v1/models)", http_quote(rq->path, q, sizeof q));
        return is_openai(rq->path) ? reply_oai_error(out, 404, NULL, NULL, msg) : reply_error(out, 404, msg);
    }
    if (strcmp(rq->method, want) && !(!post && !strcmp(rq->method, "HEAD"))) {
        out->allow = post ? "POST" : "GET, HEAD";
        char q[24];
        snprintf(msg, sizeof msg, "method %s not allowed for %s (use %s)", http_quote(rq->method, q, sizeof q),
                 http_endpoint_name[ep], want);
        return is_openai(rq->path) ? reply_oai_error(out, 405, NULL, NULL, msg) : reply_error(out, 405, msg);
    }
    if (ep == EP_PAGE) return reply_text(out, 200, "text/html; charset=utf-8", strndup(http_page, http_page_len), http_page_len);
    if (ep == EP_HEALTH) return health(ctx, out);
    if (ep == EP_METRICS) return metrics(ctx, out);
    if (!ctx->engine) {
        out->retry_after = 1;
        return is_openai(rq->path) ? reply_oai_error(out, 503, NULL, NULL, "loading models")
                                   : reply_error(out, 503, "loading models");
    }
    if (ep == EP_LANGUAGES) return list_languages(ctx, out);
    if (ep == EP_TRANSLATE || ep == EP_ATTENTION) return translate(ctx, rq, ep == EP_ATTENTION, out);
    if (!authorized(ctx, rq, NULL)) {
        out->unauthorized = 1;
        return reply_oai_error(out, 401, NULL, "invalid_api_key", "Incorrect API key provided (Authorization: Bearer KEY)");
    }
    if (ep == EP_MODELS) return list_models(ctx, out);
    completions(ctx, rq, out);
}
