/* The serving engine (include/tfm/serve.h): a bounded queue of jobs, translation workers that batch queued
 * requests into one translate call (dynamic batching), and one scheduler per language model that steps its
 * streams together (continuous batching).
 *
 * One mutex guards the queues, the jobs' states and the counters; each job has its own condition variable
 * (a finished batch wakes only its own clients). A job is held by the engine (while queued or running) and
 * by its submitter (until tfm_serve_job_free): refs counts the two, the last release frees it. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tfm/io.h"
#include "tfm/serve.h"
#include "tfm/text.h"

enum { JOB_QUEUED, JOB_RUNNING, JOB_DONE };
enum { KIND_TRANSLATE, KIND_GENERATE };

struct tfm_serve_job {
    tfm_serve *s;
    int kind, model, refs, state, cancel;
    int failed;                      /* after done: err holds why */
    char err[512];
    double t_submit, t_start;
    struct tfm_serve_job *next;      /* in a queue */
    pthread_cond_t cv;               /* state changes and new text */
    /* translation */
    char **lines;
    int n, num_hyp, attention;
    tfm_translation *res;            /* n results after success */
    /* generation */
    tfm_gen_stream *stream;          /* owned by the scheduler once running */
    char *text;                      /* final text handed over by the stream so far */
    size_t len, cap, taken;
    tfm_generation gen;              /* after success */
};

typedef struct {
    tfm_serve_job *head, *tail;
} job_queue;

typedef struct {
    tfm_serve_model info;
    tfm_translator *tr;
    tfm_generator *gen;
    tfm_translate_options topts;     /* translators: the decoding options of every request */
    int beam;                        /* the beam topts resolves to (bounds num_hypotheses) */
    pthread_rwlock_t attn;           /* a call returning attention runs alone on its translator (the teacher-forced
                                        pass sets the model's keep_attention, which a concurrent decode would see) */
    /* language models: the scheduler */
    job_queue waiting;               /* started when a slot frees */
    tfm_serve_job **active;          /* gen_slots */
    int n_active;
    pthread_t thread;
    int thread_started;
    pthread_cond_t wake;
} model_entry;

struct tfm_serve {
    tfm_serve_params p;
    int threads;
    model_entry *m;
    int n_models, cap_models;
    pthread_mutex_t mu;
    pthread_cond_t work;             /* translation workers: a job arrived, or stop */
    job_queue tq;                    /* translation jobs waiting */
    pthread_t *workers;
    int n_workers, started, stopping;
    tfm_serve_stats st;
};

/* ---------------------------------------------------------------- small helpers */
static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void cond_init(pthread_cond_t *c) {
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(c, &a);
    pthread_condattr_destroy(&a);
}

/* Wait on c until the monotonic time `until` (seconds); until < 0: no limit. */
static void cond_wait_until(pthread_cond_t *c, pthread_mutex_t *mu, double until) {
    if (until < 0) {
        pthread_cond_wait(c, mu);
        return;
    }
    struct timespec ts;
    ts.tv_sec = (time_t)until;
    ts.tv_nsec = (long)((until - (double)ts.tv_sec) * 1e9);
    if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
    pthread_cond_timedwait(c, mu, &ts);
}

static int hist_bucket(long v) {
    int k = 0;
    while (k < TFM_SERVE_HIST - 1 && (1L << k) < v) k++;
    return k;
}

static void q_push(job_queue *q, tfm_serve_job *j) {
    j->next = NULL;
    if (q->tail) q->tail->next = j;
    else q->head = j;
    q->tail = j;
}

/* Remove j from q (if there); 1 if it was there. */
static int q_remove(job_queue *q, tfm_serve_job *j) {
    for (tfm_serve_job **p = &q->head, *prev = NULL; *p; prev = *p, p = &(*p)->next) {
        if (*p != j) continue;
        *p = j->next;
        if (q->tail == j) q->tail = prev;
        j->next = NULL;
        return 1;
    }
    return 0;
}

/* ---------------------------------------------------------------- the object */
void tfm_serve_params_default(tfm_serve_params *p) {
    memset(p, 0, sizeof *p);
    p->max_queue = 256;
    p->max_batch = 64;
    p->batch_wait_us = 2000;
    p->translate_workers = 1;
    p->gen_slots = 16;
}

tfm_serve *tfm_serve_create(const tfm_serve_params *pi) {
    tfm_serve_params p;
    tfm_serve_params_default(&p);
    if (pi) p = *pi;
    const char *bad = p.threads < 0 || p.threads > TFM_MAX_THREADS ? "threads"
                      : p.max_queue < 1 || p.max_queue > 1000000 ? "max_queue"
                      : p.max_batch < 1 || p.max_batch > 4096 ? "max_batch"
                      : p.batch_wait_us < 0 || p.batch_wait_us > 10000000 ? "batch_wait_us"
                      : p.translate_workers < 1 || p.translate_workers > 64 ? "translate_workers"
                      : p.gen_slots < 1 || p.gen_slots > 4096 ? "gen_slots" : NULL;
    if (bad)
        return tfm_set_error("serve: params.%s out of range (threads 0..%d, max_queue 1..1e6, max_batch 1..4096, "
                             "batch_wait_us 0..1e7, translate_workers 1..64, gen_slots 1..4096)", bad, TFM_MAX_THREADS),
               NULL;
    tfm_serve *s = calloc(1, sizeof *s);
    if (!s) return tfm_set_error_kind(TFM_ERR_NOMEM, "serve: out of memory"), NULL;
    s->p = p;
    s->threads = p.threads > 0 ? p.threads : tfm_default_threads();
    pthread_mutex_init(&s->mu, NULL);
    cond_init(&s->work);
    return s;
}

int tfm_serve_n_models(const tfm_serve *s) { return s->n_models; }

const tfm_serve_model *tfm_serve_model_info(const tfm_serve *s, int model) {
    return model >= 0 && model < s->n_models ? &s->m[model].info : NULL;
}

tfm_translator *tfm_serve_translator(tfm_serve *s, int model) {
    return model >= 0 && model < s->n_models ? s->m[model].tr : NULL;
}

tfm_generator *tfm_serve_generator(tfm_serve *s, int model) {
    return model >= 0 && model < s->n_models ? s->m[model].gen : NULL;
}

int tfm_serve_find(const tfm_serve *s, const char *name) {
    for (int i = 0; i < s->n_models; i++)
        if (!strcmp(s->m[i].info.name, name)) return i;
    return -1;
}

int tfm_serve_find_pair(const tfm_serve *s, const char *src, const char *tgt) {
    for (int i = 0; i < s->n_models; i++)
        if (s->m[i].tr && !strcmp(s->m[i].info.src_lang, src) && !strcmp(s->m[i].info.tgt_lang, tgt)) return i;
    return -1;
}

/* ---------------------------------------------------------------- adding models */
/* A new entry named name (checked: set, not too long, unique); NULL with an error. */
static model_entry *new_entry(tfm_serve *s, const char *name) {
    if (s->started) return tfm_set_error("serve: models are added before tfm_serve_start"), NULL;
    if (!name || !name[0] || strlen(name) >= sizeof s->m[0].info.name)
        return tfm_set_error("serve: model name '%s' must have 1..%zu bytes", name ? name : "",
                             sizeof s->m[0].info.name - 1), NULL;
    if (tfm_serve_find(s, name) >= 0) return tfm_set_error("serve: two models named '%s'", name), NULL;
    if (s->n_models == s->cap_models) {
        int c = s->cap_models ? 2 * s->cap_models : 4;
        model_entry *m = realloc(s->m, sizeof *m * (size_t)c);
        if (!m) return tfm_set_error_kind(TFM_ERR_NOMEM, "serve: out of memory"), NULL;
        s->m = m, s->cap_models = c;
    }
    model_entry *e = &s->m[s->n_models];
    memset(e, 0, sizeof *e);
    snprintf(e->info.name, sizeof e->info.name, "%s", name);
    return e;
}

/* The beam o resolves to for model mt (translator.c's rule: 0 = the model's decode.beam, else greedy). */
static int resolved_beam(const tfm_mt_model *mt, const tfm_translate_options *o) {
    return o->beam_size > 0 ? o->beam_size : mt->decode_beam > 0 ? mt->decode_beam : 1;
}

int tfm_serve_set_translate_options(tfm_serve *s, int model, const tfm_translate_options *o) {
    if (model < 0 || model >= s->n_models || !s->m[model].tr)
        return tfm_set_error("serve: model %d is not a translator", model), -1;
    if (s->started) return tfm_set_error("serve: translate options are set before tfm_serve_start"), -1;
    model_entry *e = &s->m[model];
    tfm_translate_options t;
    tfm_translate_options_default(&t);
    if (o) {
        t.beam_size = o->beam_size, t.length_penalty = o->length_penalty;
        t.max_decoding_length = o->max_decoding_length, t.max_input_length = o->max_input_length;
    }
    /* the checks of a translate call, once, on an empty batch */
    if (tfm_translator_translate_batch(e->tr, NULL, 0, &t, NULL)) return tfm_prefix_error("serve: %s: ", e->info.name);
    e->topts = t;
    e->beam = e->info.beam = resolved_beam(tfm_translator_model(e->tr), &t);
    return 0;
}

int tfm_serve_add_translator(tfm_serve *s, tfm_translator *t, const char *name, const char *src, const char *tgt,
                             const tfm_translate_options *o) {
    const tfm_mt_model *mt = tfm_translator_model(t);
    if (!src) src = mt->src_lang[0] ? mt->src_lang : TFM_SERVE_DEFAULT_SRC;
    if (!tgt) tgt = mt->tgt_lang[0] ? mt->tgt_lang : TFM_SERVE_DEFAULT_TGT;
    char pair[40];
    snprintf(pair, sizeof pair, "%.15s-%.15s", src, tgt);
    if (!name || !name[0]) name = pair;
    model_entry *e = NULL;
    if (!tfm_lang_code_valid(src) || !tfm_lang_code_valid(tgt))
        tfm_set_error("serve: %s: language codes '%s' -> '%s': 1..15 letters, digits, '-' or '_'", name, src, tgt);
    else if (tfm_serve_find_pair(s, src, tgt) >= 0)
        tfm_set_error("serve: %s: another model already translates %s -> %s", name, src, tgt);
    else
        e = new_entry(s, name);
    if (!e) {
        tfm_translator_free(t);
        return -1;
    }
    e->info.kind = TFM_SERVE_TRANSLATOR;
    pthread_rwlock_init(&e->attn, NULL);
    snprintf(e->info.src_lang, sizeof e->info.src_lang, "%s", src);
    snprintf(e->info.tgt_lang, sizeof e->info.tgt_lang, "%s", tgt);
    e->tr = t;
    s->n_models++;
    if (tfm_serve_set_translate_options(s, s->n_models - 1, o)) {
        s->n_models--;
        pthread_rwlock_destroy(&e->attn);
        tfm_translator_free(t);
        return -1;
    }
    return s->n_models - 1;
}

int tfm_serve_add_generator(tfm_serve *s, tfm_generator *g, const char *name) {
    model_entry *e = new_entry(s, name);
    tfm_serve_job **active = e ? calloc((size_t)s->p.gen_slots, sizeof *active) : NULL;
    if (!active) {
        if (e) tfm_set_error_kind(TFM_ERR_NOMEM, "serve: out of memory");
        tfm_generator_free(g);
        return -1;
    }
    e->info.kind = TFM_SERVE_GENERATOR;
    e->gen = g;
    e->active = active;
    cond_init(&e->wake);
    return s->n_models++;
}

/* "dir/model.tfm" -> "model" */
static void default_name(const char *path, char *out, size_t n) {
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    size_t len = strlen(b);
    if (len > 4 && !strcmp(b + len - 4, ".tfm")) len -= 4;
    if (len >= n) len = n - 1;
    memcpy(out, b, len);
    out[len] = 0;
}

int tfm_serve_load(tfm_serve *s, const char *path, const char *name, const char *src, const char *tgt) {
    char kind[16] = "", def[64];
    tfm_container c;   /* meta.kind only: the weights are read and checked, not kept */
    int rc = tfm_container_load_except(&c, path, "param.");
    const char *k = rc ? NULL : tfm_container_str(&c, "meta.kind");
    if (k) snprintf(kind, sizeof kind, "%s", k);
    tfm_container_free(&c);
    if (!k) return -1;
    if (!strcmp(kind, "gpt")) {
        if (src || tgt) return tfm_set_error("serve: %s: a language model has no language pair", path), -1;
        if (!name || !name[0]) default_name(path, def, sizeof def), name = def;
        tfm_generator_params gp;
        tfm_generator_params_default(&gp);
        gp.threads = s->p.threads;
        tfm_generator *g = tfm_generator_load(path, &gp);
        return g ? tfm_serve_add_generator(s, g, name) : -1;
    }
    if (strcmp(kind, "seq2seq"))
        return tfm_set_error_kind(TFM_ERR_DATA, "%s: meta.kind '%s' is neither 'seq2seq' nor 'gpt'", path, kind), -1;
    tfm_translator_params tp;
    tfm_translator_params_default(&tp);
    tp.threads = s->p.threads;
    tfm_translator *t = tfm_translator_load(path, &tp);
    return t ? tfm_serve_add_translator(s, t, name, src, tgt, NULL) : -1;
}

int tfm_serve_load_spec(tfm_serve *s, const char *arg) {
    char path[4096], spec[64] = "", src[32] = "", tgt[32] = "";
    if (strlen(arg) >= sizeof path) return tfm_set_error("serve: path too long: %.80s...", arg), -1;
    snprintf(path, sizeof path, "%s", arg);
    char *colon = strrchr(path, ':');
    if (colon && access(path, F_OK) != 0) {   /* PATH:SPEC (a file named with a ':' is taken as it is) */
        *colon = 0;
        if (strlen(colon + 1) >= sizeof spec) return tfm_set_error("serve: %s: ':%s' is too long", path, colon + 1), -1;
        snprintf(spec, sizeof spec, "%s", colon + 1);
    }
    tfm_container c;
    int rc = spec[0] ? tfm_container_load_except(&c, path, "param.") : 0;
    const char *k = rc || !spec[0] ? NULL : tfm_container_str(&c, "meta.kind");
    int lm = k && !strcmp(k, "gpt");
    if (spec[0]) tfm_container_free(&c);
    if (rc) return -1;
    if (!spec[0] || lm) return tfm_serve_load(s, path, spec, NULL, NULL);
    char *cut = strchr(spec, ',') ? strchr(spec, ',') : strchr(spec, '-');   /* SRC-TGT, or SRC,TGT */
    if (!cut) return tfm_set_error("serve: %s: ':%s' must name a language pair (SRC-TGT, e.g. de-en)", path, spec), -1;
    snprintf(src, sizeof src, "%.*s", (int)(cut - spec), spec);
    snprintf(tgt, sizeof tgt, "%s", cut + 1);
    return tfm_serve_load(s, path, NULL, src, tgt);
}

/* ---------------------------------------------------------------- jobs */
static tfm_serve_job *job_new(tfm_serve *s, int kind, int model) {
    tfm_serve_job *j = calloc(1, sizeof *j);
    if (!j) return tfm_set_error_kind(TFM_ERR_NOMEM, "serve: out of memory"), NULL;
    j->s = s, j->kind = kind, j->model = model;
    j->refs = 2;   /* the engine's and the submitter's */
    cond_init(&j->cv);
    return j;
}

static void job_destroy(tfm_serve_job *j) {
    for (int i = 0; i < j->n; i++) {
        if (j->lines) free(j->lines[i]);
        if (j->res) tfm_translation_free(&j->res[i]);
    }
    free(j->lines), free(j->res), free(j->text);
    tfm_gen_stream_free(j->stream);
    tfm_generation_free(&j->gen);
    pthread_cond_destroy(&j->cv);
    free(j);
}

/* Under s->mu: drop one hold. */
static void job_release(tfm_serve_job *j) {
    if (--j->refs == 0) job_destroy(j);
}

/* Under s->mu: the job is done (err NULL: success); wakes its waiter, drops the engine's hold. */
static void job_finish(tfm_serve *s, tfm_serve_job *j, const char *err) {
    j->state = JOB_DONE;
    if (err) j->failed = 1;
    if (err && err != j->err) snprintf(j->err, sizeof j->err, "%s", err);
    if (j->cancel) s->st.cancelled++;
    else if (err) s->st.failed++;
    pthread_cond_broadcast(&j->cv);
    job_release(j);
}

/* Under s->mu: may one more job wait? */
static int admit(tfm_serve *s) {
    if (s->stopping) return TFM_SERVE_CLOSED;
    if (s->st.queued >= s->p.max_queue) return s->st.busy++, TFM_SERVE_BUSY;
    return TFM_SERVE_OK;
}

int tfm_serve_translate(tfm_serve *s, int model, const char *const *lines, int n, int num_hyp, int attention,
                        tfm_serve_job **out) {
    *out = NULL;
    if (model < 0 || model >= s->n_models || !s->m[model].tr)
        return tfm_set_error("serve: model %d is not a translator", model), -1;
    model_entry *e = &s->m[model];
    if (n < 1 || n > 1000000) return tfm_set_error("serve: %d lines (1..1e6)", n), -1;
    if (num_hyp < 1 || num_hyp > e->beam)
        return tfm_set_error("serve: %d hypotheses asked, the beam is %d", num_hyp, e->beam), -1;
    for (int i = 0; i < n; i++) {
        long bad = lines[i] ? tfm_utf8_first_invalid(lines[i], strlen(lines[i])) : 0;
        if (bad >= 0)
            return tfm_set_error_kind(TFM_ERR_DATA, "line %d: %s", i, lines[i] ? "invalid UTF-8" : "NULL"), -1;
    }
    tfm_serve_job *j = job_new(s, KIND_TRANSLATE, model);
    if (!j) return -1;
    j->num_hyp = num_hyp, j->attention = attention ? 1 : 0;
    j->lines = calloc((size_t)n, sizeof(char *));
    for (int i = 0; j->lines && i < n; i++)
        if (!(j->lines[i] = strdup(lines[i]))) break;
    j->n = n;
    if (!j->lines || !j->lines[n - 1]) {
        job_destroy(j);
        return tfm_set_error_kind(TFM_ERR_NOMEM, "serve: out of memory (%d lines)", n), -1;
    }
    pthread_mutex_lock(&s->mu);
    int rc = admit(s);
    if (rc == TFM_SERVE_OK) {
        j->t_submit = now_s();
        q_push(&s->tq, j);
        s->st.queued++;
        pthread_cond_broadcast(&s->work);
    }
    pthread_mutex_unlock(&s->mu);
    if (rc == TFM_SERVE_OK) *out = j;
    else job_destroy(j);
    return rc;
}

int tfm_serve_generate(tfm_serve *s, int model, const char *prompt, const tfm_generate_options *o, tfm_serve_job **out) {
    *out = NULL;
    if (model < 0 || model >= s->n_models || !s->m[model].gen)
        return tfm_set_error("serve: model %d is not a language model", model), -1;
    model_entry *e = &s->m[model];
    tfm_gen_stream *st = tfm_generator_start(e->gen, prompt, o);   /* checks the prompt and the options */
    if (!st) return -1;
    tfm_serve_job *j = job_new(s, KIND_GENERATE, model);
    if (!j) return tfm_gen_stream_free(st), -1;
    j->stream = st;
    pthread_mutex_lock(&s->mu);
    int rc = admit(s);
    if (rc == TFM_SERVE_OK) {
        j->t_submit = now_s();
        q_push(&e->waiting, j);
        s->st.queued++;
        pthread_cond_signal(&e->wake);
    }
    pthread_mutex_unlock(&s->mu);
    if (rc == TFM_SERVE_OK) *out = j;
    else job_destroy(j);
    return rc;
}

/* Under s->mu: cancel j. A queued job is taken out and done at once; a running one is marked (the
 * translation call finishes, the stream stops at the next step). */
static void cancel_locked(tfm_serve *s, tfm_serve_job *j) {
    if (j->state == JOB_DONE || j->cancel) return;
    j->cancel = 1;
    if (j->state != JOB_QUEUED) return;
    int was = j->kind == KIND_TRANSLATE ? q_remove(&s->tq, j) : q_remove(&s->m[j->model].waiting, j);
    if (!was) return;
    s->st.queued--;
    job_finish(s, j, "cancelled");
}

void tfm_serve_job_cancel(tfm_serve_job *j) {
    pthread_mutex_lock(&j->s->mu);
    cancel_locked(j->s, j);
    pthread_mutex_unlock(&j->s->mu);
}

void tfm_serve_job_free(tfm_serve_job *j) {
    if (!j) return;
    tfm_serve *s = j->s;
    pthread_mutex_lock(&s->mu);
    cancel_locked(s, j);
    job_release(j);
    pthread_mutex_unlock(&s->mu);
}

int tfm_serve_job_wait(tfm_serve_job *j, int timeout_ms) {
    double until = timeout_ms < 0 ? -1 : now_s() + timeout_ms / 1000.0;
    pthread_mutex_lock(&j->s->mu);
    while (j->state != JOB_DONE && (until < 0 || now_s() < until)) cond_wait_until(&j->cv, &j->s->mu, until);
    int done = j->state == JOB_DONE;
    pthread_mutex_unlock(&j->s->mu);
    return done;
}

char *tfm_serve_job_take_text(tfm_serve_job *j, int timeout_ms, size_t *len, int *done) {
    double until = timeout_ms < 0 ? -1 : now_s() + timeout_ms / 1000.0;
    char *t = NULL;
    *len = 0;
    pthread_mutex_lock(&j->s->mu);
    while (j->taken == j->len && j->state != JOB_DONE && (until < 0 || now_s() < until))
        cond_wait_until(&j->cv, &j->s->mu, until);
    if (j->taken < j->len && (t = malloc(j->len - j->taken + 1))) {
        *len = j->len - j->taken;
        memcpy(t, j->text + j->taken, *len);
        t[*len] = 0;
        j->taken = j->len;
    }
    *done = j->state == JOB_DONE && j->taken == j->len;
    pthread_mutex_unlock(&j->s->mu);
    return t;
}

/* The accessors read fields that are final once the job is done (set under the mutex before the waiter woke). */
const char *tfm_serve_job_error(const tfm_serve_job *j) {
    if (j->state != JOB_DONE) return "not done";
    return j->failed ? j->err : j->cancel ? "cancelled" : NULL;
}

const tfm_translation *tfm_serve_job_translations(const tfm_serve_job *j, int *n) {
    *n = j->state == JOB_DONE && j->res && !j->failed ? j->n : 0;
    return *n ? j->res : NULL;
}

const tfm_generation *tfm_serve_job_generation(const tfm_serve_job *j) {
    return j->state == JOB_DONE && j->kind == KIND_GENERATE && !j->failed && j->gen.text ? &j->gen : NULL;
}

double tfm_serve_job_queue_seconds(const tfm_serve_job *j) {
    return j->t_start > 0 ? j->t_start - j->t_submit : 0;
}

/* ---------------------------------------------------------------- translation workers */
/* Under s->mu: lines queued for the same call as the head job (same model and options). */
static long lines_like(const tfm_serve *s, const tfm_serve_job *h) {
    long n = 0;
    for (const tfm_serve_job *j = s->tq.head; j; j = j->next)
        if (j->model == h->model && j->num_hyp == h->num_hyp && j->attention == h->attention) n += j->n;
    return n;
}

/* Under s->mu: take the head job and the queued jobs like it, in order, while they fit max_batch lines. */
static int take_batch(tfm_serve *s, tfm_serve_job **batch, int cap, int *lines) {
    tfm_serve_job *h = s->tq.head, *j = h;
    int n = 0;
    *lines = 0;
    while (j && n < cap && *lines < s->p.max_batch) {
        tfm_serve_job *next = j->next;
        int like = j->model == h->model && j->num_hyp == h->num_hyp && j->attention == h->attention;
        if (like && (n == 0 || *lines + j->n <= s->p.max_batch)) {
            q_remove(&s->tq, j);
            s->st.queued--;
            s->st.translating++;
            j->state = JOB_RUNNING;
            j->t_start = now_s();
            batch[n++] = j;
            *lines += j->n;
        }
        j = next;
    }
    return n;
}

/* Translate jobs batch[0..n) (lines in total) in one call; on failure, each job alone. Not under the lock:
 * the jobs are RUNNING, so only this worker touches their lines and results. Returns the calls made. */
static int decode(tfm_serve *s, tfm_serve_job **batch, int n, int lines, const char **errs) {
    model_entry *e = &s->m[batch[0]->model];
    tfm_translate_options o = e->topts;
    o.num_hypotheses = batch[0]->num_hyp;
    o.return_attention = batch[0]->attention;
    o.max_batch_size = (lines + s->threads - 1) / s->threads;   /* one batch per thread */
    if (o.max_batch_size < 1) o.max_batch_size = 1;
    if (o.return_attention) pthread_rwlock_wrlock(&e->attn);
    else pthread_rwlock_rdlock(&e->attn);
    const char **src = malloc(sizeof(char *) * (size_t)lines);
    tfm_translation *res = calloc((size_t)lines, sizeof *res);
    int ok = 0, calls = 0;
    if (src && res) {
        for (int k = 0, i = 0; k < n; k++)
            for (int l = 0; l < batch[k]->n; l++) src[i++] = batch[k]->lines[l];
        calls++;
        ok = tfm_translator_translate_batch(e->tr, src, lines, &o, res) == 0;
    }
    for (int k = 0, i = 0; k < n; i += batch[k]->n, k++) {
        tfm_serve_job *j = batch[k];
        errs[k] = NULL;
        if (!(j->res = calloc((size_t)j->n, sizeof *j->res))) {
            errs[k] = "out of memory";
            for (int l = 0; ok && l < j->n; l++) tfm_translation_free(&res[i + l]);
            continue;
        }
        if (ok) {
            memcpy(j->res, res + i, sizeof *res * (size_t)j->n);
            continue;
        }
        o.max_batch_size = (j->n + s->threads - 1) / s->threads;   /* alone: its own failure only */
        calls++;
        if (tfm_translator_translate_batch(e->tr, (const char *const *)j->lines, j->n, &o, j->res)) {
            snprintf(j->err, sizeof j->err, "%s", tfm_last_error()[0] ? tfm_last_error() : "translation failed");
            errs[k] = j->err;
            free(j->res), j->res = NULL;
        }
    }
    pthread_rwlock_unlock(&e->attn);
    free(src), free(res);
    return calls;
}

static void *translate_worker(void *arg) {
    tfm_serve *s = arg;
    int cap = s->p.max_batch;   /* jobs have >= 1 line each */
    tfm_serve_job **batch = malloc(sizeof *batch * (size_t)cap);
    const char **errs = malloc(sizeof(char *) * (size_t)cap);
    pthread_mutex_lock(&s->mu);
    for (;;) {
        tfm_serve_job *h = s->tq.head;
        if (!h) {
            if (s->stopping) break;
            pthread_cond_wait(&s->work, &s->mu);
            continue;
        }
        double until = h->t_submit + s->p.batch_wait_us * 1e-6;   /* the bounded wait for more requests */
        if (!s->stopping && now_s() < until && lines_like(s, h) < s->p.max_batch) {
            cond_wait_until(&s->work, &s->mu, until);
            continue;   /* look again from the head: jobs may have come, gone or been taken */
        }
        int lines, n = batch && errs ? take_batch(s, batch, cap, &lines) : 0;
        if (!n) {   /* out of memory for the batch array: fail the head job rather than spin */
            q_remove(&s->tq, h);
            s->st.queued--;
            job_finish(s, h, "out of memory");
            continue;
        }
        pthread_mutex_unlock(&s->mu);
        int calls = decode(s, batch, n, lines, errs);
        pthread_mutex_lock(&s->mu);
        s->st.translate_calls += calls;
        s->st.batch_lines[hist_bucket(lines)]++;
        s->st.batch_lines_sum += lines;
        for (int k = 0; k < n; k++) {
            tfm_serve_job *j = batch[k];
            s->st.translating--;
            s->st.translate_jobs++;
            s->st.translate_lines += j->n;
            for (int l = 0; j->res && l < j->n; l++)
                s->st.translate_tokens_in += j->res[l].n_input_tokens, s->st.translate_tokens_out += j->res[l].n_output_tokens;
            job_finish(s, j, errs[k]);
        }
    }
    pthread_mutex_unlock(&s->mu);
    free(batch), free(errs);
    return NULL;
}

/* ---------------------------------------------------------------- generation schedulers */
/* Under s->mu: append the stream's new final text to the job; finish the job if the stream has ended (or
 * failed: err). Returns 1 if the job left its slot. */
static int collect(tfm_serve *s, tfm_serve_job *j, const char *err) {
    size_t n;
    const char *t = tfm_gen_stream_take(j->stream, &n);
    if (n && j->len + n + 1 > j->cap) {
        size_t c = 2 * j->cap + n + 64;
        char *p = realloc(j->text, c);
        if (!p) err = "out of memory";
        else j->text = p, j->cap = c;
    }
    if (n && !err) {
        memcpy(j->text + j->len, t, n);
        j->len += n;
        j->text[j->len] = 0;
        pthread_cond_broadcast(&j->cv);
    }
    if (!err && !tfm_gen_stream_finished(j->stream)) return 0;
    if (!err && tfm_gen_stream_result(j->stream, &j->gen)) err = "out of memory";
    s->st.generate_jobs++;
    s->st.generate_tokens_in += j->gen.n_prompt_tokens;
    s->st.generate_tokens_out += j->gen.n_tokens;
    tfm_gen_stream_free(j->stream);   /* its KV cache goes now, not when the client reads the result */
    j->stream = NULL;
    job_finish(s, j, err);
    return 1;
}

typedef struct {
    tfm_serve *s;
    int model;
} sched_arg;

static void *scheduler(void *arg) {
    sched_arg a = *(sched_arg *)arg;
    free(arg);
    tfm_serve *s = a.s;
    model_entry *e = &s->m[a.model];
    tfm_gen_stream **streams = malloc(sizeof *streams * (size_t)s->p.gen_slots);
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (e->n_active < s->p.gen_slots && e->waiting.head) {   /* join at the token boundary */
            tfm_serve_job *j = e->waiting.head;
            q_remove(&e->waiting, j);
            s->st.queued--;
            s->st.streams++;
            j->state = JOB_RUNNING;
            j->t_start = now_s();
            e->active[e->n_active++] = j;
        }
        int n = 0;
        for (int k = 0; k < e->n_active; k++) {
            tfm_serve_job *j = e->active[k];
            if (j->cancel) tfm_gen_stream_cancel(j->stream);
            if (!tfm_gen_stream_finished(j->stream) && streams) streams[n++] = j->stream;
        }
        const char *err = NULL;
        if (n) {
            pthread_mutex_unlock(&s->mu);
            if (tfm_generator_step(e->gen, streams, n)) err = tfm_last_error();
            pthread_mutex_lock(&s->mu);
            s->st.generate_steps++;
            s->st.step_streams[hist_bucket(n)]++;
            s->st.step_streams_sum += n;
        } else if (e->n_active && !streams) {
            err = "out of memory";
        }
        int kept = 0;
        for (int k = 0; k < e->n_active; k++)   /* leave at the token boundary */
            if (collect(s, e->active[k], err)) s->st.streams--;
            else e->active[kept++] = e->active[k];
        e->n_active = kept;
        if (!e->n_active && !e->waiting.head) {
            if (s->stopping) break;
            pthread_cond_wait(&e->wake, &s->mu);
        }
    }
    pthread_mutex_unlock(&s->mu);
    free(streams);
    return NULL;
}

/* ---------------------------------------------------------------- start, stop, free */
int tfm_serve_start(tfm_serve *s) {
    pthread_mutex_lock(&s->mu);
    int started = s->started;
    s->started = 1;
    pthread_mutex_unlock(&s->mu);
    if (started) return 0;
    s->workers = calloc((size_t)s->p.translate_workers, sizeof *s->workers);
    if (!s->workers) return tfm_set_error_kind(TFM_ERR_NOMEM, "serve: out of memory"), -1;
    for (int i = 0, e; i < s->p.translate_workers; i++, s->n_workers++)
        if ((e = pthread_create(&s->workers[i], NULL, translate_worker, s)))
            return tfm_set_error("serve: cannot start a worker thread (%s)", strerror(e)), -1;
    for (int i = 0; i < s->n_models; i++) {
        if (!s->m[i].gen) continue;
        sched_arg *a = malloc(sizeof *a);
        if (!a) return tfm_set_error_kind(TFM_ERR_NOMEM, "serve: out of memory"), -1;
        a->s = s, a->model = i;
        int e = pthread_create(&s->m[i].thread, NULL, scheduler, a);
        if (e) {
            free(a);
            return tfm_set_error("serve: cannot start a scheduler thread (%s)", strerror(e)), -1;
        }
        s->m[i].thread_started = 1;
    }
    return 0;
}

void tfm_serve_stop(tfm_serve *s) {
    pthread_mutex_lock(&s->mu);
    s->stopping = 1;
    pthread_cond_broadcast(&s->work);
    for (int i = 0; i < s->n_models; i++)
        if (s->m[i].gen) pthread_cond_broadcast(&s->m[i].wake);
    pthread_mutex_unlock(&s->mu);
    for (int i = 0; i < s->n_workers; i++) pthread_join(s->workers[i], NULL);
    s->n_workers = 0;
    for (int i = 0; i < s->n_models; i++)
        if (s->m[i].thread_started) pthread_join(s->m[i].thread, NULL), s->m[i].thread_started = 0;
    /* jobs no thread will run (never started, or a thread failed to start): done as cancelled */
    pthread_mutex_lock(&s->mu);
    for (int i = -1; i < s->n_models; i++) {
        job_queue *q = i < 0 ? &s->tq : &s->m[i].waiting;
        while (q->head) {
            tfm_serve_job *j = q->head;
            q_remove(q, j);
            s->st.queued--;
            j->cancel = 1;
            job_finish(s, j, "the server stopped before this job started");
        }
    }
    pthread_mutex_unlock(&s->mu);
}

void tfm_serve_free(tfm_serve *s) {
    if (!s) return;
    tfm_serve_stop(s);
    for (int i = 0; i < s->n_models; i++) {
        model_entry *e = &s->m[i];
        if (e->tr) pthread_rwlock_destroy(&e->attn);
        tfm_translator_free(e->tr);
        tfm_generator_free(e->gen);
        if (e->gen) pthread_cond_destroy(&e->wake);
        free(e->active);
    }
    free(s->m), free(s->workers);
    pthread_cond_destroy(&s->work);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

void tfm_serve_get_stats(tfm_serve *s, tfm_serve_stats *out) {
    pthread_mutex_lock(&s->mu);
    *out = s->st;
    pthread_mutex_unlock(&s->mu);
}

tfm_serve_params tfm_serve_get_params(const tfm_serve *s) {
    tfm_serve_params p = s->p;
    p.threads = s->threads;
    return p;
}
