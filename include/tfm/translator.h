/* tfm translator (workflow floor, src/decode/translator.c): one object, one call, like CTranslate2's
 * Translator. The object owns everything fast decoding needs: the model and its tokenizer, the weights
 * packed once for the GEMMs, one graph per worker thread, and its thread count. A call translates a
 * batch of raw lines (any size: it is cut into batches of max_batch_size, decoded in parallel) and
 * returns detokenized text, optionally n-best lists with scores, the cross-attention of the best
 * hypothesis, and what was cut from long sources.
 *
 *     tfm_translator *t = tfm_translator_load("model.tfm", NULL);          // NULL: default params
 *     if (!t) { fprintf(stderr, "%s\n", tfm_last_error()); return 1; }
 *     const char *src[2] = {"ein hund läuft .", "zwei männer spielen fußball ."};
 *     tfm_translation out[2];
 *     if (tfm_translator_translate_batch(t, src, 2, NULL, out) == 0)      // NULL: the model's defaults
 *         for (int i = 0; i < 2; i++) puts(out[i].hypotheses[0]), tfm_translation_free(&out[i]);
 *     tfm_translator_free(t);
 *
 * Threads: one tfm_translator may be used by several threads at once; each call takes a free workspace
 * (graphs) or makes one, and runs its kernels on params.threads threads. Results do not depend on how
 * many calls run at once, nor on the thread count.
 */
#ifndef TFM_TRANSLATOR_H
#define TFM_TRANSLATOR_H

#include "tfm/decode.h"
#include "tfm/export.h"
#include "tfm/seq2seq.h"

typedef struct tfm_translator tfm_translator;

/* How the object is built. */
typedef struct {
    int threads;             /* threads per call (0 = tfm_default_threads(): OMP_NUM_THREADS, else the CPUs
                                this process may use) */
    int max_batch_size;      /* sentences decoded together by one worker (default 32, as tfm translate) */
    int pack_weights;        /* 1 (default): pack the weights once for the GEMMs (faster). A model loaded here
                                (tfm_translator_load, _load_ensemble) holds a Transformer's block weights only
                                packed (tfm_params_hold_packed: no second copy); the others get a packed copy */
    int profile;             /* 1: time every op kind and decoding phase (tfm_translator_print_profile) */
    int read_ahead;          /* batches per worker that a caller streaming lines reads ahead and hands over in one
                                call, which sorts them by length into batches (default 16: tfm translate
                                --maxi-batch, Python's translate_iterable); not used by the library itself */
} tfm_translator_params;
TFM_API void tfm_translator_params_default(tfm_translator_params *p);

/* Load a checkpoint written by tfm train-mt (or tfm import). p NULL = defaults. NULL with a tfm error
 * naming the file. A stored ensemble (decode.ensemble, tfm_ensemble_save) loads with its members. */
TFM_API tfm_translator *tfm_translator_load(const char *path, const tfm_translator_params *p);
/* An ensemble of n checkpoints (1..TFM_MAX_ENSEMBLE, 16): every step of the search ranks by the mean of the
 * models' log-probabilities (each one's log-softmax, weighted equally, as Marian ensembles; fairseq averages the
 * probabilities instead), each model with its own key/value caches. The models must share the tokenizer: the
 * same tokenizer kind, BPE model and source and target vocabularies, else NULL with one line naming both files
 * and the first difference. The source is tokenized and the output detokenized by the first model, whose
 * stored settings (decode.beam, decode.alpha) are the defaults; tfm_translator_model is the first model.
 * Imported MarianMT models are refused, and so is return_attention; so is a stored ensemble among several paths
 * (list its members instead). n == 1 is tfm_translator_load. */
TFM_API tfm_translator *tfm_translator_load_ensemble(const char *const *paths, int n, const tfm_translator_params *p);
/* A stored ensemble (tfm average --ensemble): OUT gets the first member's weights and settings (without
 * optimizer, training state or run configuration) and decode.ensemble, the file names of the n - 1 others, which must sit in OUT's
 * folder (they are found there when OUT is loaded). tfm_translator_load(OUT) then decodes with all n, as
 * tfm_translator_load_ensemble would (a member that is a stored ensemble itself is refused, here and then). The
 * members are checked as an ensemble first (tokenizer, vocabularies). 0, or -1 with one line naming the file. */
TFM_API int tfm_ensemble_save(const char *out_path, const char *const *members, int n);
/* Models decoded together (1, or an ensemble's n), and model i of them (NULL out of range). */
TFM_API int tfm_translator_n_models(const tfm_translator *t);
TFM_API const tfm_mt_model *tfm_translator_member(const tfm_translator *t, int i);
/* The longest source or target the models take, in tokens (<eos> included): the shortest position table of
 * them (config.max_len), or 0 when none has one. */
TFM_API int tfm_translator_max_positions(const tfm_translator *t);
/* Wrap a model already in memory. The translator takes ownership of *m's contents (model, vocabularies,
 * tokenizer) and clears *m; on failure *m is freed too. */
TFM_API tfm_translator *tfm_translator_from_model(tfm_mt_model *m, const tfm_translator_params *p);
/* Borrow a model (a trainer's, for validation): m must outlive the translator and is not freed by it. After
 * the weights changed (an optimizer step), call tfm_translator_weights_changed before translating again. */
TFM_API tfm_translator *tfm_translator_view(tfm_mt_model *m, const tfm_translator_params *p);
TFM_API void tfm_translator_weights_changed(tfm_translator *t);   /* re-packs the weights */
TFM_API void tfm_translator_free(tfm_translator *t);   /* NULL-safe */
/* The model, its vocabularies and its stored settings (read-only; owned by t). A loaded Transformer's block
 * weights are held packed (params.pack_weights): their `data` is NULL, only tfm_linear reads them. */
TFM_API const tfm_mt_model *tfm_translator_model(const tfm_translator *t);

/* With params.profile: print milliseconds per unit ("sentence") by op kind and phase, over `seconds` of wall
 * time, for the calls made so far (tfm translate --profile). */
TFM_API void tfm_translator_print_profile(tfm_translator *t, long n_units, const char *unit, double seconds, void *file);

/* Per call. Defaults (tfm_translate_options_default): the model's stored decoding settings. */
typedef struct {
    int beam_size;           /* 0 = the model's: its decode.beam (train-mt --decode-beam), an import's num_beams,
                                else 1 (greedy) */
    float length_penalty;    /* GNMT alpha: score = logprob / ((5+len)/6)^alpha; < 0 = the model's
                                decode.alpha (0 if none) */
    int max_decoding_length; /* most output tokens per sentence, without <eos>; 0 (the default) = the model's: an
                                import's max_length, else 50. The prefix counts. */
    int max_input_length;    /* most source tokens kept, <eos> included (default 200, and at most the model's
                                position table); longer sources are cut: tfm_translation.source_truncated */
    int num_hypotheses;      /* 1..beam_size hypotheses per sentence, best first (default 1) */
    int return_scores;       /* fill tfm_translation.scores */
    int return_attention;    /* fill tfm_translation.attention and the token lists (Transformer, Bahdanau; not
                                for an ensemble) */
    const char *const *target_prefix; /* NULL, or one entry per input (NULL or "" = none): the translation
                                starts with this text (tokenized as the target side), decoding continues it */
    int max_batch_size;      /* sentences one worker decodes together in this call (0 = params.max_batch_size);
                                a server cuts a small call into one batch per thread with it */
} tfm_translate_options;
TFM_API void tfm_translate_options_default(tfm_translate_options *o);
/* The options a call with o would use (the model's settings filled in for 0 / < 0 fields, max_input_length cut to
 * the model's positions), checked: 0, or -1 with an error naming the field. */
TFM_API int tfm_translator_resolve_options(const tfm_translator *t, const tfm_translate_options *o,
                                           tfm_translate_options *out);

/* One input's result. Everything is malloc'd and freed by tfm_translation_free. */
typedef struct {
    int n_hypotheses;        /* num_hypotheses, or fewer when the search found fewer distinct endings */
    char **hypotheses;       /* detokenized text, best first */
    float *scores;           /* return_scores: the ranking score of each hypothesis, the sum of its tokens'
                                log-probabilities (<eos> included) divided by the length penalty; else NULL */
    /* return_attention (else NULL / 0): the best hypothesis' encoder-decoder attention, averaged over the
     * heads of the last decoder layer (Bahdanau: its one map), recomputed by a teacher-forced pass:
     * attention[i * n_source_tokens + j] = weight of source token j for target token i. */
    float *attention;
    int n_source_tokens, n_target_tokens;   /* incl. <eos> on both sides */
    char **source_tokens, **target_tokens;  /* the tokens (words or subword pieces) on the two axes */
    int source_truncated;    /* source tokens dropped by max_input_length (0 = none) */
    int n_input_tokens;      /* source tokens decoded (after max_input_length, without <eos>) */
    int n_output_tokens;     /* tokens of the best hypothesis (without <eos>) */
} tfm_translation;
TFM_API void tfm_translation_free(tfm_translation *r);   /* NULL-safe; zeroes r */
/* The hard alignment of r's attention (Marian's --alignment): for each target token i but <eos>, the source
 * token (not <eos>) with the largest weight, into src[i]. Returns the count (n_target_tokens - 1), or -1 when
 * r has no attention. */
TFM_API int tfm_translation_alignment(const tfm_translation *r, int *src);

/* Translate n lines of raw text (UTF-8, no newline): results[i] for source[i]. An empty line gives an empty
 * translation. 0, or -1 with a tfm error (invalid UTF-8 naming the input index, bad options naming the field,
 * out of memory); on failure no result needs freeing. o NULL = defaults. */
TFM_API int tfm_translator_translate_batch(tfm_translator *t, const char *const *source, int n,
                                           const tfm_translate_options *o, tfm_translation *results);

#endif
