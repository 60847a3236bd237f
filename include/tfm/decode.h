/* tfm decode (workflow floor): turning a trained model into output.
 *   translators: greedy and beam search over any tfm_encdec (src/decode/search.c);
 *   language models: sampling (temperature, top-k, top-p) and tfm_gpt_generate, the sliding-window,
 *   KV-cached generation loop (src/decode/sample.c, src/decode/generate.c).
 * A decoding call uses only the graph it is given: two threads with two graphs may decode at once, also
 * with the same model (the weights are only read).
 */
#ifndef TFM_DECODE_H
#define TFM_DECODE_H

#include "tfm/core.h"
#include "tfm/gpt.h"
#include "tfm/seq2seq.h"

/* ---------------------------------------------------------------- decoding (src/decode/) */
typedef struct {
    int beam;                /* 1 = greedy */
    float alpha;             /* GNMT length penalty lp = ((5+len)/6)^alpha; score = logprob / lp */
    int max_len;             /* max generated tokens (excluding <eos>) */
    int *n_truncated;        /* not NULL: += the sources cut to max_src tokens (or the model's positions) */
} tfm_decode_opts;

/* Translate n source sentences given as token ids (src_ids[src_off[i]..src_off[i+1]) without <eos>;
 * it is appended here, and a source longer than max_src tokens is truncated). Writes for each
 * sentence a malloc'd array of output ids (without <bos>/<eos>) into out[i] and its length into
 * out_len[i]. Sentences are processed in batches of batch_size. The graph g is used with grad
 * disabled and is reset between steps. Returns 0, or -1 on out-of-memory. */
int tfm_translate_ids(tfm_encdec *m, tfm_graph *g, const int *src_ids, const int *src_off, int n,
                      int max_src, int batch_size, const tfm_decode_opts *o, int **out, int *out_len);
/* The same, using n_workers worker graphs (tfm_graph_init_worker(workers[i], g)) when the sentences make
 * two batches or more: the batches are then decoded in parallel, one per thread (at most tfm_get_threads()
 * of them), each with single-threaded kernels; with one batch, or n_workers < 2, g decodes them with every
 * op split over the threads. The outputs are the same either way (the kernels give the same bits for any
 * thread count). With g->profile the workers' times are merged into g (tfm_profile_merge). */
int tfm_translate_ids_par(tfm_encdec *m, tfm_graph *g, tfm_graph *const *workers, int n_workers,
                          const int *src_ids, const int *src_off, int n, int max_src, int batch_size,
                          const tfm_decode_opts *o, int **out, int *out_len);
/* Text in, text out (tokenize with t->tok_kind, map to ids, translate, join tokens with spaces).
 * hyps[i] is malloc'd. */
int tfm_translate_lines(tfm_translator *t, tfm_graph *g, const char *const *lines, int n, int max_src,
                        int batch_size, const tfm_decode_opts *o, char **hyps);
int tfm_translate_lines_par(tfm_translator *t, tfm_graph *g, tfm_graph *const *workers, int n_workers,
                            const char *const *lines, int n, int max_src, int batch_size,
                            const tfm_decode_opts *o, char **hyps);

/* ---------------------------------------------------------------- language models (src/decode/) */
/* Sample one token from logits (V): temperature > 0 scales, top_k > 0 keeps the k largest.
 * temperature 0 = greedy (argmax). scratch: V floats. */
int tfm_sample_logits(const float *logits, int V, float temperature, int top_k, tfm_rng *r, float *scratch);
/* The same with nucleus sampling: top_p in (0,1) keeps the smallest set of most likely tokens (after
 * temperature and top-k) whose probability reaches top_p; top_p >= 1 (or <= 0) is off and gives the same
 * draws as tfm_sample_logits. scratch: 2 V floats. */
int tfm_sample_logits_p(const float *logits, int V, float temperature, int top_k, float top_p, tfm_rng *r,
                        float *scratch);

typedef struct {
    float temperature;       /* 0 = greedy */
    int top_k;               /* 0 = all */
    float top_p;             /* 1 = off */
    uint64_t seed;
    int no_cache;            /* recompute the whole window for every token (for comparison; slow) */
} tfm_sample_opts;
void tfm_sample_opts_default(tfm_sample_opts *o);   /* temperature 1, top_k 0, top_p 1, seed 1 */

/* Called with every generated token id; a non-zero return stops generation (that token is kept). */
typedef int (*tfm_token_fn)(int id, void *user);

/* Continue prompt[0..n_prompt) by n_new tokens sampled from m. The context is the last block_size
 * tokens: keys/values are cached per layer (a token costs O(context)); once the context is longer than
 * block_size the window slides and is recomputed (positions shift), as without the cache. out (if not
 * NULL) receives the n_new ids. g is used with grad disabled (reset between tokens; g->profile adds the
 * sampling time to the "search" phase). Returns the number of tokens generated, or -1 with a tfm error
 * (n_prompt < 1, an id out of range, out of memory). */
int tfm_gpt_generate(tfm_gpt *m, tfm_graph *g, const int *prompt, int n_prompt, int n_new,
                     const tfm_sample_opts *o, tfm_token_fn on_token, void *user, int *out);

#endif
