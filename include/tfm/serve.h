/* tfm serve engine (workflow floor, src/serve/engine.c): many threads submit translation and generation
 * requests to one object, which decodes them together. It is the library half of `tfm serve`; the HTTP half
 * (src/http/) only parses requests, submits jobs, waits for them and formats answers.
 *
 *   translation   dynamic batching: a worker takes the oldest queued request, waits at most batch_wait_us
 *                 for more requests to the same model with the same options, and decodes them all in one
 *                 tfm_translator_translate_batch call (up to max_batch sentences, cut into one batch per
 *                 thread). Results are those of translating each request alone.
 *   generation    continuous batching (llama.cpp's slots): one scheduler thread per language model steps
 *                 every running stream by one token (tfm_generator_step); waiting requests join at the
 *                 next token boundary when a slot is free, finished or cancelled ones leave.
 *
 *     tfm_serve *s = tfm_serve_create(NULL);                       // NULL: default params
 *     int de_en = tfm_serve_load(s, "multi30k.tfm", NULL, "de", "en");
 *     tfm_serve_start(s);
 *     tfm_serve_job *j;
 *     const char *q[1] = {"Ein Hund läuft."};
 *     if (tfm_serve_translate(s, de_en, q, 1, 1, 0, &j) == TFM_SERVE_OK) {
 *         tfm_serve_job_wait(j, -1);
 *         int n;
 *         const tfm_translation *r = tfm_serve_job_translations(j, &n);
 *         if (r) puts(r[0].hypotheses[0]);
 *         tfm_serve_job_free(j);
 *     }
 *     tfm_serve_free(s);                                           // finishes queued work first
 *
 * Bounded: at most max_queue jobs wait (TFM_SERVE_BUSY beyond), at most gen_slots streams per language
 * model run at once. A job whose client is gone is cancelled (tfm_serve_job_cancel): a queued one is never
 * decoded, a stream leaves its slot at the next token boundary. Jobs never share failures: if a batched
 * call fails, its requests are decoded one by one and only the failing one reports the error.
 */
#ifndef TFM_SERVE_H
#define TFM_SERVE_H

#include <stddef.h>

#include "tfm/export.h"
#include "tfm/generator.h"
#include "tfm/translator.h"

typedef struct tfm_serve tfm_serve;
typedef struct tfm_serve_job tfm_serve_job;

typedef struct {
    int threads;             /* threads of each decoding call (0 = tfm_default_threads()); also the number of
                                batches a translation call is cut into */
    int max_queue;           /* jobs waiting to start, all models together (default 256) */
    int max_batch;           /* most sentences in one translation call (default 64) */
    int batch_wait_us;       /* how long a worker waits for more requests after the first (default 2000) */
    int translate_workers;   /* translation calls running at once (default 1: each call uses all threads) */
    int gen_slots;           /* streams stepped together per language model (default 16) */
} tfm_serve_params;
TFM_API void tfm_serve_params_default(tfm_serve_params *p);

/* NULL with a tfm error naming the field out of range. */
TFM_API tfm_serve *tfm_serve_create(const tfm_serve_params *p);
/* Stops (tfm_serve_stop) and frees the engine with its models. NULL-safe. */
TFM_API void tfm_serve_free(tfm_serve *s);

/* ---- models: added before tfm_serve_start; the engine owns them ---- */
typedef enum { TFM_SERVE_TRANSLATOR = 1, TFM_SERVE_GENERATOR = 2 } tfm_serve_kind;
typedef struct {
    int kind;                /* tfm_serve_kind */
    char name[64];           /* the id clients use (OpenAI "model"); unique */
    char src_lang[16], tgt_lang[16];   /* translators: the language pair */
    int beam;                /* translators: the beam every request is decoded with (most hypotheses) */
} tfm_serve_model;

/* The language pair of an old checkpoint without meta.src_lang / meta.tgt_lang. */
#define TFM_SERVE_DEFAULT_SRC "src"
#define TFM_SERVE_DEFAULT_TGT "tgt"

/* Load a checkpoint of either kind (meta.kind "seq2seq": a translator; "gpt": a language model) with
 * params.threads. A translator serves src_lang -> tgt_lang (NULL: the checkpoint's codes, else
 * TFM_SERVE_DEFAULT_SRC/TGT). name NULL or "": a translator is named "SRC-TGT", a language model after its
 * file (without directory and ".tfm"). The model's index, or -1 with a tfm error (the file, a bad language
 * code, a name or language pair already served). */
TFM_API int tfm_serve_load(tfm_serve *s, const char *path, const char *name, const char *src_lang,
                           const char *tgt_lang);
/* tfm serve's argument "PATH[:SPEC]": for a translator SPEC is its language pair "SRC-TGT" (or "SRC,TGT" for
 * codes with a '-'), for a language model its name. */
TFM_API int tfm_serve_load_spec(tfm_serve *s, const char *arg);
/* Add objects already built (taken over, freed with the engine, also on failure); names as tfm_serve_load's.
 * o: the decoding options
 * of every request to this translator (beam, length penalty, lengths; NULL = defaults, the model's stored
 * decoding settings, as tfm translate); its per-request fields (num_hypotheses, return_*, target_prefix,
 * max_batch_size) are ignored. */
TFM_API int tfm_serve_add_translator(tfm_serve *s, tfm_translator *t, const char *name, const char *src_lang,
                                     const char *tgt_lang, const tfm_translate_options *o);
TFM_API int tfm_serve_add_generator(tfm_serve *s, tfm_generator *g, const char *name);
/* Set the decoding options of translator `model` (before tfm_serve_start): 0 or -1 with a tfm error. */
TFM_API int tfm_serve_set_translate_options(tfm_serve *s, int model, const tfm_translate_options *o);
TFM_API int tfm_serve_n_models(const tfm_serve *s);
TFM_API const tfm_serve_model *tfm_serve_model_info(const tfm_serve *s, int model);   /* NULL if out of range */
TFM_API tfm_translator *tfm_serve_translator(tfm_serve *s, int model);   /* NULL unless a translator */
TFM_API tfm_generator *tfm_serve_generator(tfm_serve *s, int model);     /* NULL unless a language model */
/* The index of a model by name, or of the translator for a language pair; -1 if none. */
TFM_API int tfm_serve_find(const tfm_serve *s, const char *name);
TFM_API int tfm_serve_find_pair(const tfm_serve *s, const char *src_lang, const char *tgt_lang);

/* Start the worker threads: 0, or -1 with a tfm error. Jobs submitted before wait in the queue. */
TFM_API int tfm_serve_start(tfm_serve *s);
/* Refuse new jobs (TFM_SERVE_CLOSED), finish every queued and running one, join the threads. Idempotent. */
TFM_API void tfm_serve_stop(tfm_serve *s);

/* ---- jobs ---- */
enum {
    TFM_SERVE_OK = 0,
    TFM_SERVE_BUSY = 1,      /* the queue holds max_queue jobs: try again later (HTTP 503) */
    TFM_SERVE_CLOSED = 2,    /* tfm_serve_stop was called */
};
/* Translate n lines (UTF-8, copied) with translator `model`: num_hypotheses best first (1..the beam), and
 * with return_attention the cross-attention of each best hypothesis. TFM_SERVE_OK with *job set, BUSY,
 * CLOSED, or -1 with a tfm error (not a translator, a line that is not valid UTF-8, num_hypotheses out of
 * range, out of memory). */
TFM_API int tfm_serve_translate(tfm_serve *s, int model, const char *const *lines, int n, int num_hypotheses,
                                int return_attention, tfm_serve_job **job);
/* Continue prompt with language model `model` (tfm_generator_start's checks: -1 with its error). */
TFM_API int tfm_serve_generate(tfm_serve *s, int model, const char *prompt, const tfm_generate_options *o,
                               tfm_serve_job **job);

/* Wait until the job is done (finished, failed or cancelled): 1 done, 0 still running after timeout_ms
 * (< 0: no limit). */
TFM_API int tfm_serve_job_wait(tfm_serve_job *j, int timeout_ms);
/* Generation: wait up to timeout_ms for text (< 0: no limit), then hand out the text made final since the
 * last call (whole characters; malloc'd, *len bytes, NUL-terminated) or NULL when there is none yet or the
 * stream has ended and all was handed out (*done = 1 then). */
TFM_API char *tfm_serve_job_take_text(tfm_serve_job *j, int timeout_ms, size_t *len, int *done);
/* Cancel: a queued job is never started, a stream stops at the next token. The job is then done. */
TFM_API void tfm_serve_job_cancel(tfm_serve_job *j);
/* After done: NULL if it succeeded, else its error message (or "cancelled"). */
TFM_API const char *tfm_serve_job_error(const tfm_serve_job *j);
/* After done: the translations, one per line (owned by the job), or NULL (failed, cancelled, generation). */
TFM_API const tfm_translation *tfm_serve_job_translations(const tfm_serve_job *j, int *n);
/* After done: the generation (text without the prompt, token counts, finish reason) (owned by the job), or
 * NULL. */
TFM_API const tfm_generation *tfm_serve_job_generation(const tfm_serve_job *j);
/* Seconds the job waited in the queue before it started (after done). */
TFM_API double tfm_serve_job_queue_seconds(const tfm_serve_job *j);
/* Cancel (if not done) and release the caller's hold on the job. NULL-safe. */
TFM_API void tfm_serve_job_free(tfm_serve_job *j);

/* ---- counters (for /metrics) ---- */
#define TFM_SERVE_HIST 13    /* batch sizes by powers of two: bucket k counts sizes in (2^(k-1), 2^k], k = 0..12
                                (1, 2, 3-4, ..., 2049-4096: every size the params allow) */
typedef struct {
    long queued;             /* jobs waiting to start now */
    long translating;        /* translation jobs being decoded now */
    long streams;            /* generation streams in slots now */
    long translate_jobs, translate_lines, translate_calls;   /* done (calls: translate_batch calls) */
    long translate_tokens_in, translate_tokens_out;          /* source tokens, best-hypothesis tokens */
    long generate_jobs, generate_steps;                      /* done; tfm_generator_step calls */
    long generate_tokens_in, generate_tokens_out;            /* prompt tokens, generated tokens */
    long cancelled, failed, busy;                            /* jobs cancelled, failed; submits refused */
    long batch_lines[TFM_SERVE_HIST];                        /* translation calls by lines decoded */
    long step_streams[TFM_SERVE_HIST];                       /* generation steps by streams stepped */
    long batch_lines_sum, step_streams_sum;                  /* the sums of those sizes */
} tfm_serve_stats;
TFM_API void tfm_serve_get_stats(tfm_serve *s, tfm_serve_stats *out);
/* The params the engine runs with (0 fields resolved: threads). */
TFM_API tfm_serve_params tfm_serve_get_params(const tfm_serve *s);

#endif
