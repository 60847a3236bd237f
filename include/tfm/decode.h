/* tfm decode (workflow floor): turning a trained model into output.
 *   translators: greedy and beam search over any tfm_mt_net (src/decode/search.c);
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

/* ---------------------------------------------------------------- search (src/decode/search.c) */
typedef struct tfm_logit_screen tfm_logit_screen;
typedef struct {
    int beam;                /* 1 = greedy */
    float alpha;             /* GNMT length penalty lp = ((5+len)/6)^alpha; score = logprob / lp */
    int max_len;             /* max generated tokens (excluding <eos>) */
    int num_hypotheses;      /* hypotheses kept per sentence, 1..beam (0 = 1) */
    const int *prefix_ids;   /* NULL, or forced target prefixes: sentence i's output starts with
                                prefix_ids[prefix_off[i] .. prefix_off[i+1]) (at most max_len of them) */
    const int *prefix_off;
    const tfm_logit_screen *screen;   /* NULL, or greedy finds each row's best token through this screen of the
                                         model's output layer (below): the same tokens; scores not computed (0) */
} tfm_search_opts;
TFM_API void tfm_search_opts_default(tfm_search_opts *o);   /* greedy, alpha 0, max_len 50, 1 hypothesis */

/* A sentence's hypotheses, best first: hypothesis k is ids[off[k] .. off[k+1]) (without <bos>/<eos>), its
 * score the sum of its tokens' log-probabilities (<eos> included when it ended with one) / lp(len + 1). */
typedef struct {
    int n;
    int *ids, *off;
    float *score;
} tfm_hyps;
TFM_API void tfm_hyps_free(tfm_hyps *h);   /* zeroes h */

/* Greedy or beam search for n source sentences given as token ids (src_ids[src_off[i]..src_off[i+1]) without
 * <eos>; it is appended here, and a source longer than max_src tokens is truncated), into out[i]. Sentences
 * are sorted by length and processed in batches of batch_size. With n_workers >= 2 worker graphs
 * (tfm_graph_init_worker(workers[i], g)) and two batches or more, the batches are decoded in parallel, one
 * per thread (at most tfm_get_threads()), each with single-threaded kernels; otherwise g decodes them with
 * every op split over the threads. The outputs are the same either way. Graphs are used with grad disabled
 * and reset between steps; with g->profile the workers' times are merged into g. 0, or -1 with a tfm error
 * (out of memory, a batch too large); on failure out[] holds nothing to free. */
TFM_API int tfm_search_nbest(tfm_mt_net *m, tfm_graph *g, tfm_graph *const *workers, int n_workers,
                             const int *src_ids, const int *src_off, int n, int max_src, int batch_size,
                             const tfm_search_opts *o, tfm_hyps *out);
/* An ensemble: the same search over the mean of n_models models' log-probabilities at every step (each model's
 * log-softmax, weighted equally, not renormalised: Marian's decoding-time ensembles; fairseq averages probabilities
 * instead). Every model encodes each batch and keeps its own key/value caches; beam reorders apply to all of
 * them. The models must share the target vocabulary (config.tgt_vocab, the special and banned ids; else -1 with
 * an error naming the field) and take the same source ids; the shortest position table bounds both sides.
 * n_models == 1 is tfm_search_nbest. At most TFM_MAX_ENSEMBLE (16, seq2seq.h) models. */
TFM_API int tfm_search_nbest_ensemble(tfm_mt_net *const *models, int n_models, tfm_graph *g,
                                      tfm_graph *const *workers, int n_workers, const int *src_ids, const int *src_off,
                                      int n, int max_src, int batch_size, const tfm_search_opts *o, tfm_hyps *out);
/* The best hypothesis only: out[i] malloc'd ids, out_len[i] their count. */
TFM_API int tfm_search_ids_par(tfm_mt_net *m, tfm_graph *g, tfm_graph *const *workers, int n_workers,
                               const int *src_ids, const int *src_off, int n, int max_src, int batch_size,
                               const tfm_search_opts *o, int **out, int *out_len);
TFM_API int tfm_search_ids(tfm_mt_net *m, tfm_graph *g, const int *src_ids, const int *src_off, int n, int max_src,
                           int batch_size, const tfm_search_opts *o, int **out, int *out_len);

/* ---------------------------------------------------------------- greedy's output layer (src/decode/screen.c) */
/* A decoding step at batch 1 reads every weight once, and the output layer (V x d, 8 MB of fp32 for 8000 x 256)
 * is the largest part; greedy search only needs its argmax. A screen holds an int8 copy of that layer (one
 * scale per row, 4x fewer bytes) and each row's L1 norm: the int8 logits plus a rigorous bound on their
 * error (activation and weight rounding, fp32 rounding on both sides) leave a few candidates whose logits
 * are then computed in fp32, with the arithmetic of a one-row fp32 step. The winner is exactly the first
 * argmax of those fp32 logits: the token the unscreened one-row step picks. Steps of 5 rows and more (a batch)
 * are bound by arithmetic instead, and take their int8 logits from 7-bit activations on a kernel that does
 * about twice fp32's multiply-adds per cycle on AVX2 (src/ops/gemm_q8_panels.h); the bound uses that step.
 *
 * tfm_logit_screen_new: for a model whose vtable has decode_hidden / output_layer with an fp32 layer; NULL
 * otherwise (with a tfm error: not available, a non-finite weight, out of memory). The screen reads the
 * model's weights at every call: free it before the model, and make a new one if the weights change.
 * tfm_logit_screen_argmax: h (rows, d) hidden states -> best[r]; banned ids never win. scratch: at least
 * tfm_logit_screen_scratch(s, rows) floats. Returns how many rows fell back to all V fp32 logits (a flat
 * distribution leaves too many candidates), or -1 if a row of h is not finite. */
TFM_API tfm_logit_screen *tfm_logit_screen_new(const tfm_mt_net *m);
/* The same for a GPT's output layer (wte, tied; fp32 only: an int8 model's layer is refused), and whether s
 * screens m's layer. Greedy generation (temperature 0) with tfm_sample_opts.screen finds each cached one-token
 * step's token through it: the same token as the full layer's logits. */
TFM_API tfm_logit_screen *tfm_logit_screen_new_gpt(const tfm_gpt *m);
TFM_API int tfm_logit_screen_of_gpt(const tfm_logit_screen *s, const tfm_gpt *m);
TFM_API void tfm_logit_screen_free(tfm_logit_screen *s);
TFM_API int tfm_logit_screen_of(const tfm_logit_screen *s, const tfm_mt_net *m);   /* 1: s screens m's layer */
TFM_API size_t tfm_logit_screen_scratch(const tfm_logit_screen *s, int rows);
TFM_API int tfm_logit_screen_argmax(const tfm_logit_screen *s, const float *h, int rows, const int *banned,
                                    int n_banned, float *scratch, int *best);

/* ---------------------------------------------------------------- language models (src/decode/) */
/* Sample one token from logits (V): temperature > 0 scales, top_k > 0 keeps the k largest.
 * temperature 0 = greedy (argmax). scratch: V floats. */
TFM_API int tfm_sample_logits(const float *logits, int V, float temperature, int top_k, tfm_rng *r, float *scratch);
/* The same with nucleus sampling: top_p in (0,1) keeps the smallest set of most likely tokens (after
 * temperature and top-k) whose probability reaches top_p; top_p >= 1 (or <= 0) is off and gives the same
 * draws as tfm_sample_logits. scratch: 2 V floats. */
TFM_API int tfm_sample_logits_p(const float *logits, int V, float temperature, int top_k, float top_p, tfm_rng *r,
                        float *scratch);

typedef struct {
    float temperature;       /* 0 = greedy */
    int top_k;               /* 0 = all */
    float top_p;             /* 1 = off */
    uint64_t seed;
    int no_cache;            /* recompute the whole window for every token (for comparison; slow) */
    const tfm_logit_screen *screen;   /* NULL, or greedy's cached one-token steps find the token through this
                                         screen of the model's output layer (tfm_logit_screen_new_gpt): the same
                                         token, without reading the whole fp32 layer */
} tfm_sample_opts;
TFM_API void tfm_sample_opts_default(tfm_sample_opts *o);   /* temperature 1, top_k 0, top_p 1, seed 1 */

/* Called with every generated token id; a non-zero return stops generation (that token is kept). */
typedef int (*tfm_token_fn)(int id, void *user);

/* One sequence being generated, a token at a time (what tfm_gpt_generate loops over; a server steps many):
 * the context so far, its KV cache, its sampler and RNG. */
typedef struct {
    int *ctx;                /* prompt + generated ids */
    int n, end;              /* ids in ctx; its capacity (prompt + max_new) */
    int n_prompt;
    tfm_gpt_cache cache;
    int use_cache, cstart;   /* cstart: the context position the cache starts at */
    tfm_sample_opts opts;
    tfm_rng rng;
    float *scratch;          /* 2 V floats for the sampler */
    int screened;            /* steps whose token opts.screen found without the full layer (a count for tests) */
} tfm_gpt_stream;
/* 0, or -1 with a tfm error (an empty prompt, an id outside the vocabulary, out of memory). */
TFM_API int tfm_gpt_stream_init(tfm_gpt_stream *s, const tfm_gpt *m, const int *prompt, int n_prompt, int max_new,
                                const tfm_sample_opts *o);
/* Samples the next token (appended to s->ctx) and returns it; -1 with an error once max_new were made, or when
 * the model's output is not finite (diverged weights).
 * Any graph may be used for any step (it is reset before and after). No allocation after the first step. */
TFM_API int tfm_gpt_stream_next(tfm_gpt_stream *s, tfm_gpt *m, tfm_graph *g);
TFM_API void tfm_gpt_stream_free(tfm_gpt_stream *s);

/* Continue prompt[0..n_prompt) by n_new tokens sampled from m. The context is the last block_size
 * tokens: keys/values are cached per layer (a token costs O(context)); once the context is longer than
 * block_size the window slides and is recomputed (positions shift), as without the cache. out (if not
 * NULL) receives the n_new ids. g is used with grad disabled (reset between tokens; g->profile adds the
 * sampling time to the "search" phase). Returns the number of tokens generated, or -1 with a tfm error
 * (n_prompt < 1, an id out of range, out of memory). */
TFM_API int tfm_gpt_generate(tfm_gpt *m, tfm_graph *g, const int *prompt, int n_prompt, int n_new,
                     const tfm_sample_opts *o, tfm_token_fn on_token, void *user, int *out);

#endif
