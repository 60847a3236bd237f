/* tfm generator (workflow floor, src/decode/generator.c): a language model as one object, like
 * llama-cpp-python's Llama: text prompt in, text out (whole, or streamed as it is made), with stop strings.
 * The object owns the model, its tokenizer and its thread count.
 *
 *     tfm_generator *g = tfm_generator_load("shakespeare.tfm", NULL);
 *     tfm_generate_options o;
 *     tfm_generate_options_default(&o);                   // 16 tokens, temperature 1, seed 1
 *     o.max_tokens = 200, o.temperature = 0.8f;
 *     tfm_generation out;
 *     if (tfm_generator_generate(g, "ROMEO:", &o, NULL, NULL, &out) == 0) puts(out.text), tfm_generation_free(&out);
 *     tfm_generator_free(g);
 *
 * Many sequences at once (a server's continuous batching): tfm_generator_start makes a stream per request,
 * tfm_generator_step advances every given stream by one token, and streams join and leave between steps.
 * A stream's tokens depend only on its prompt and options, never on which others share its steps.
 *
 * Threads: one tfm_generator may be used by several threads at once (each call has its own graph); a
 * stream must be stepped by one thread at a time.
 */
#ifndef TFM_GENERATOR_H
#define TFM_GENERATOR_H

#include <stddef.h>
#include <stdint.h>

#include "tfm/export.h"
#include "tfm/gpt.h"
#include "tfm/text.h"

typedef struct tfm_generator tfm_generator;

typedef struct {
    int threads;             /* threads per call (0 = tfm_default_threads()) */
    int profile;             /* 1: time op kinds and phases (tfm_generator_print_profile) */
    int no_kv_cache;         /* 1: recompute the whole context for every token (slow; for comparison) */
} tfm_generator_params;
TFM_API void tfm_generator_params_default(tfm_generator_params *p);

/* Load a checkpoint written by tfm train-lm (characters or BPE pieces) or tfm import. p NULL = defaults. NULL
 * with a tfm error. Int8 weights are held without floats, and a causal GPT's block weights only packed
 * (tfm_params_hold_packed): tfm_generator_model's tensors then have `data` NULL, only tfm_linear reads them. */
TFM_API tfm_generator *tfm_generator_load(const char *path, const tfm_generator_params *p);
TFM_API void tfm_generator_free(tfm_generator *g);   /* NULL-safe */
TFM_API const tfm_gpt *tfm_generator_model(const tfm_generator *g);
/* The name of the model's tokenizer: "char" (one token per character) or "bpe" (train-lm --tokenizer bpe). */
TFM_API const char *tfm_generator_tokenizer(const tfm_generator *g);
/* Tokens of a text under the model's tokenizer; -1 with an error naming what is not in the vocabulary. */
TFM_API int tfm_generator_count_tokens(tfm_generator *g, const char *text);

#define TFM_MAX_STOP 8
typedef struct {
    int max_tokens;          /* tokens to generate (default 16, as OpenAI's API) */
    float temperature;       /* softmax temperature, 0 = greedy (default 1) */
    int top_k;               /* sample among the k most likely (0 = all, the default) */
    float top_p;             /* nucleus sampling (1 = off, the default) */
    uint64_t seed;           /* the sampler's seed (default 1): the same seed gives the same text */
    const char *stop[TFM_MAX_STOP];   /* stop strings, the first NULL ends the list (default none): generation
                                ends where one first appears, and the text is cut before it */
} tfm_generate_options;
TFM_API void tfm_generate_options_default(tfm_generate_options *o);

typedef enum { TFM_FINISH_NONE = 0, TFM_FINISH_LENGTH, TFM_FINISH_STOP, TFM_FINISH_CANCELLED } tfm_finish_reason;
TFM_API const char *tfm_finish_reason_name(int reason);   /* "length", "stop", "cancelled", "" */

typedef struct {
    char *text;              /* the generated text, without the prompt, cut before a stop string (malloc'd) */
    int n_prompt_tokens, n_tokens;    /* tokens in the prompt, and tokens generated */
    int finish_reason;       /* tfm_finish_reason */
} tfm_generation;
TFM_API void tfm_generation_free(tfm_generation *r);   /* NULL-safe; zeroes r */

/* Called with each piece of new text as soon as it is final: whole UTF-8 characters, and no text that could
 * still turn out to begin a stop string. The pieces of a generation join to its text. A non-zero return
 * cancels the generation (finish reason "cancelled"). */
typedef int (*tfm_text_fn)(const char *text, size_t len, void *user);

/* Continue prompt (UTF-8, not empty). on_text may be NULL. 0, or -1 with a tfm error (a prompt character
 * outside the vocabulary, bad options naming the field, out of memory); out is then empty. */
TFM_API int tfm_generator_generate(tfm_generator *g, const char *prompt, const tfm_generate_options *o,
                                   tfm_text_fn on_text, void *user, tfm_generation *out);

/* ---- streams: many sequences stepped together ---- */
typedef struct tfm_gen_stream tfm_gen_stream;
/* A stream for prompt with options o (checked); NULL with a tfm error. Nothing is computed yet. */
TFM_API tfm_gen_stream *tfm_generator_start(tfm_generator *g, const char *prompt, const tfm_generate_options *o);
/* One token for each of the n streams not yet finished (a stream's first step also reads its prompt). 0, or -1
 * with a tfm error (out of memory). */
TFM_API int tfm_generator_step(tfm_generator *g, tfm_gen_stream *const *streams, int n);
/* The text made final since the last call (pointer into the stream, valid until the next step), its length. */
TFM_API const char *tfm_gen_stream_take(tfm_gen_stream *s, size_t *len);
/* 0 while running, else a tfm_finish_reason. tfm_gen_stream_cancel ends it with TFM_FINISH_CANCELLED. */
TFM_API int tfm_gen_stream_finished(const tfm_gen_stream *s);
TFM_API void tfm_gen_stream_cancel(tfm_gen_stream *s);
/* The whole generation so far (text cut before a stop string; counts; finish reason); out->text malloc'd. */
TFM_API int tfm_gen_stream_result(const tfm_gen_stream *s, tfm_generation *out);
TFM_API void tfm_gen_stream_free(tfm_gen_stream *s);   /* NULL-safe */

/* With params.profile: ms per generated token by op kind and phase over `seconds` (tfm generate --profile). */
TFM_API void tfm_generator_print_profile(tfm_generator *g, long n_tokens, double seconds, void *file);

#endif
