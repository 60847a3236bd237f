/* tfm seq2seq: the Encoder / Decoder / EncoderDecoder interface shared by every translator
 * (Transformer, RNN seq2seq, Bahdanau), and the generic pieces built on it: checkpoints that
 * dispatch on meta.arch. The workflows built on it live one floor up: the training loop in train.h
 * (src/train/train_mt.c), greedy / beam search in decode.h (src/decode/search.c).
 *
 * An architecture is a tfm_mt_net whose vtable implements:
 *
 *   encode(m, g, src, src_valid, B, Ts)          padded source ids (B,Ts) row-major + valid lengths (B)
 *                                                -> encoder outputs, a graph tensor (B,Ts,*) (the RNN
 *                                                   encoder may return whatever its decoder needs; the
 *                                                   tensor is only ever passed back to init_state).
 *   init_state(m, g, enc, src_valid, B, Ts, max_steps)
 *                                                -> an opaque decoder state.
 *        max_steps == 0: TRAINING / teacher forcing. The state lives in g's arena (no malloc) and
 *                        decode() is then called ONCE with all T target positions; gradients flow
 *                        back into the encoder through it. free_state() must still be called (cheap).
 *        max_steps  > 0: INCREMENTAL decoding (g->grad_enabled == 0). Everything the decoder needs
 *                        across steps (encoder keys/values computed once, self-attention K/V caches
 *                        for earlier positions, RNN hidden states, source valid lengths) is COPIED
 *                        into malloc'd buffers owned by the state, sized for up to max_steps calls
 *                        of decode() with T == 1 and up to `cap_rows` batch rows (see reorder). The
 *                        caller may therefore tfm_graph_reset(g) between steps.
 *   decode(m, g, state, tgt_in, B, T)            target input ids (B,T) -> logits (B,T,tgt_vocab).
 *                                                Training: tgt_in = <bos> + target shifted right.
 *                                                Incremental: T == 1, the next position of every row.
 *   reorder(m, state, idx, n)                    incremental states only: new row i = old row idx[i],
 *                                                i < n; n may differ from the current row count (beam
 *                                                search expands B sentences to B*K rows once, then
 *                                                selects surviving hypotheses; greedy drops finished
 *                                                rows). n <= cap_rows given at init_state time:
 *                                                cap_rows = B * beam (tfm_search_ids, decode.h).
 *                                                Called every step: it must not allocate, and should
 *                                                move only what differs per row (the Transformer never
 *                                                copies encoder keys/values, which are per sentence,
 *                                                and copies a self-attention prefix only for a second
 *                                                child of one parent; the KV cache in include/tfm/nn.h).
 *   free_state(m, state)
 *   attention(m, b, maps, max)                   after a forward with m->keep_attention = 1 and before
 *                                                the graph is reset: fill up to max attention maps of
 *                                                batch row b, return how many the model has (may be >
 *                                                max). Transformer: every layer's encoder self-, decoder
 *                                                self- and enc-dec attention; Bahdanau: one enc-dec map;
 *                                                plain RNN: 0.
 *   init_weights(m, seed)                        fresh random weights
 *   destroy(m)                                   frees everything including m itself
 *   loss(m, g, src, src_valid, B, Ts, tgt_in, tgt, Tt, ls)   optional: see tfm_mt_net_loss
 *   max_positions(m)                             optional: longest sequence the model takes (0 = any)
 *
 * Config, params and vocabularies are saved generically (tfm_mt_model_put): meta.kind = "seq2seq",
 * meta.arch = cfg.arch, config.<every field of tfm_mt_config>, param.<dotted name>, and
 * tokenizer.src_vocab / tokenizer.tgt_vocab / tokenizer.kind. tfm_mt_model_get / _load read meta.arch
 * and call the matching constructor (tfm_mt_net_create), so an architecture only has to provide
 * `tfm_mt_net *tfm_<arch>_create(const tfm_mt_config *)` returning a model with params allocated.
 */
#ifndef TFM_SEQ2SEQ_H
#define TFM_SEQ2SEQ_H

#include "tfm/checkpoint.h"
#include "tfm/core.h"
#include "tfm/io.h"
#include "tfm/nn.h"
#include "tfm/text.h"
#include "tfm/bpe.h"

/* ---------------------------------------------------------------- config */
#define TFM_MT_MAX_BANNED 16
/* One config for all architectures (unused fields are ignored by an arch, but still saved). */
typedef struct {
    char arch[16];           /* "transformer" | "rnn" | "bahdanau" */
    int src_vocab, tgt_vocab;
    /* Transformer */
    int d_model, n_head, ffn, pre_ln, max_len;   /* max_len: positional-encoding table length */
    /* Transformer (blocks per stack) and RNN (GRU layers) */
    int n_layer;
    /* RNN / Bahdanau */
    int embed_size, hidden_size;
    float dropout;
    /* Transformer, added for issue 10 (0 = the d2l model; saved only when non-zero) */
    int share_embeddings;    /* one (V,d) matrix for the source and target embeddings and the output
                                layer (needs src_vocab == tgt_vocab); config.share_embeddings */
    int init;                /* tfm_init_kind for init_weights (not saved: only a fresh model uses it) */
    /* All architectures (0 = off; saved only when non-zero as config.pad_len) */
    int pad_len;             /* > 0: every source (and, in training, target) is padded to at least this many
                                tokens, as d2l pads every batch to num_steps. Transformers mask the padding, so
                                it changes only their cost; the GRU encoders of rnn/bahdanau run over it, so their
                                final state (the decoder's start and context) is the book's. */
    /* Transformer, for imported Hugging Face MarianMT models (issue 31; 0 = tfm's own convention, and a field
     * is saved in the checkpoint as config.<name> only when non-zero, so older checkpoints read the same) */
    int attn_bias;           /* 1: the query/key/value/output projections of every attention have biases */
    int ffn_act;             /* tfm_activation of the FFNs: 0 relu (d2l), 1 gelu (tanh), 2 silu (swish), 3 exact gelu */
    int pos_halves;          /* 1: sinusoidal positions as sines then cosines (Marian), not interleaved */
    int no_embed_scale;      /* 1: embeddings are not multiplied by sqrt(d_model) (Marian scale_embedding false) */
    int custom_ids;          /* 1: pad_id / bos_id / eos_id replace TFM_PAD / TFM_BOS / TFM_EOS (saved as those
                                three entries); bos_id is the decoder's start token (decoder_start_token_id) */
    int pad_id, bos_id, eos_id;
    int n_banned;            /* tokens decoding never emits (bad_words_ids of one token: Marian's <pad>) */
    int banned[TFM_MT_MAX_BANNED];   /* config.banned, an i32 array */
    int gen_beam, gen_max_len;        /* decoding defaults of the model (num_beams; output tokens without the
                                         end token, from max_length); 0 = none */
    /* Transformer regularisers (issue 35; training only), each saved as config.<name> only when not the default,
     * so older checkpoints read the same: */
    float attention_dropout; /* on the attention weights after the softmax; -1 (the default): `dropout`, as d2l's
                                MultiHeadAttention and every model before them; 0..1: this value */
    float activation_dropout;/* in every FFN after the activation (0 = none, the default) */
} tfm_mt_config;

/* The special ids of a model: its own (custom_ids) or tfm's TFM_PAD / TFM_BOS / TFM_EOS. */
TFM_API int tfm_mt_pad_id(const tfm_mt_config *c);
TFM_API int tfm_mt_bos_id(const tfm_mt_config *c);
TFM_API int tfm_mt_eos_id(const tfm_mt_config *c);

/* Weight initialisation of a fresh Transformer (vt->init_weights):
 *  D2L:    d2l's xavier_init_weights: Xavier-uniform Linear weights, embeddings N(0,1);
 *  XAVIER: Xavier-uniform for every matrix, embeddings included (the PyTorch nn.Transformer translation
 *          tutorial). Both keep the sqrt(d_model) embedding scale of the forward pass, as that tutorial
 *          does: with Xavier embeddings (std ~ sqrt(2/(V+d))) the scaled embedding no longer drowns the
 *          positional encoding. Biases and LayerNorms are initialised the same way in both. */
typedef enum { TFM_INIT_D2L = 0, TFM_INIT_XAVIER = 1 } tfm_init_kind;

/* Defaults: the d2l Transformer recipe (d_model 32, 4 heads, ffn 64, 2 layers, dropout 0.2 (attention_dropout
 * -1: the same on the attention weights; activation_dropout 0), max_len 1000, embed/hidden 32). arch defaults to
 * "transformer". */
TFM_API void tfm_mt_config_default(tfm_mt_config *c);
/* The dropout on the attention weights: attention_dropout, or dropout when it is -1. */
TFM_API float tfm_mt_attention_dropout(const tfm_mt_config *c);
/* Range and cross checks for c->arch (n_head divides d_model, max_len * d_model bounded, ...);
 * returns 0 or -1 with a one-line error naming the field. */
TFM_API int tfm_mt_config_check(const tfm_mt_config *c);
/* Sets the fields c->arch does not use to the defaults above (rnn/bahdanau: d_model, n_head, ffn, pre_ln,
 * max_len, share_embeddings, init; transformer: embed_size, hidden_size). tfm_mt_net_create builds from such a
 * copy, so a model's cfg, its checkpoints and exports hold the defaults there; a checkpoint holding anything
 * else in them is refused on load (tfm_mt_model_get). */
TFM_API void tfm_mt_config_clear_unused(tfm_mt_config *c);
/* Parameters the constructor of c->arch allocates for a checked config (-1: unknown arch), computed
 * without building anything (tests/unit/test_loaders.c checks it equals params.total). */
TFM_API int64_t tfm_mt_n_params(const tfm_mt_config *c);
/* Estimated float elements of the activations of one step on `rows` pairs of Ts source and Tt target
 * tokens (transformer: per layer ~(12 d + 2 ffn) per token plus the (H,T,T) attention maps; RNNs: the
 * gates; 3 (Tt,V) for the logits); saturates, never wraps. Compared with TFM_MAX_STEP_ELEMS. */
TFM_API int64_t tfm_mt_step_elems(const tfm_mt_config *c, int64_t rows, int64_t Ts, int64_t Tt);
/* The same for decoding nb sentences as `rows` hypotheses (nb x beam) of up to max_steps tokens from Ts
 * source tokens: the encoder's activations, the key/value caches, one step's activations (the graph is
 * reset per step) and the histories. */
TFM_API int64_t tfm_mt_decode_elems(const tfm_mt_config *c, int64_t nb, int64_t rows, int64_t Ts, int64_t max_steps);

/* ---------------------------------------------------------------- attention maps */
typedef enum { TFM_MAP_ENC_SELF = 0, TFM_MAP_DEC_SELF = 1, TFM_MAP_ENC_DEC = 2 } tfm_attn_map_kind;
typedef struct {
    int kind;                /* tfm_attn_map_kind */
    int layer;               /* 0-based block index (0 for Bahdanau) */
    int n_head, Tq, Tk;
    const float *w;          /* (n_head, Tq, Tk) weights of one batch row, graph-arena memory */
} tfm_attn_map;

/* ---------------------------------------------------------------- the interface */
typedef struct tfm_mt_net tfm_mt_net;
typedef struct {
    const char *arch;
    tfm_tensor *(*encode)(tfm_mt_net *m, tfm_graph *g, const int *src, const int *src_valid, int B, int Ts);
    void *(*init_state)(tfm_mt_net *m, tfm_graph *g, tfm_tensor *enc, const int *src_valid, int B, int Ts,
                        int max_steps, int cap_rows);
    tfm_tensor *(*decode)(tfm_mt_net *m, tfm_graph *g, void *state, const int *tgt_in, int B, int T);
    void (*reorder)(tfm_mt_net *m, void *state, const int *idx, int n);
    void (*free_state)(tfm_mt_net *m, void *state);
    int (*attention)(tfm_mt_net *m, int b, tfm_attn_map *maps, int max);
    void (*init_weights)(tfm_mt_net *m, uint64_t seed);
    void (*destroy)(tfm_mt_net *m);
    /* Optional (NULL: tfm_mt_net_loss uses forward + cross-entropy): the teacher-forced loss computed on
     * the valid positions only; may return NULL to fall back. */
    tfm_tensor *(*loss)(tfm_mt_net *m, tfm_graph *g, const int *src, const int *src_valid, int B, int Ts,
                        const int *tgt_in, const int *tgt, int Tt, float label_smoothing);
    /* Optional (NULL: unbounded): the longest source or target sequence the model can take (the
     * Transformer's positional-encoding table). Decoding truncates to it: tfm_mt_net_max_positions. */
    int (*max_positions)(const tfm_mt_net *m);
    /* Optional (NULL: tfm_mt_net_train_logits uses forward): what vt->loss computes before its cross-entropy, the
     * logits of the valid target positions (n, V) with their n targets in *targets (graph-arena memory); may
     * return NULL to fall back. */
    tfm_tensor *(*train_logits)(tfm_mt_net *m, tfm_graph *g, const int *src, const int *src_valid, int B, int Ts,
                                const int *tgt_in, const int *tgt, int Tt, const int **targets);
    /* Optional (NULL: not available), both or neither: decode() without its output layer, the (B,T,d)
     * hidden states h whose logits are h W^T + b with output_layer's W (V,d) and b (V, or NULL). Greedy
     * search uses them to find a row's best token without every logit (tfm_logit_screen, decode.h). */
    tfm_tensor *(*decode_hidden)(tfm_mt_net *m, tfm_graph *g, void *state, const int *tgt_in, int B, int T);
    void (*output_layer)(const tfm_mt_net *m, const tfm_tensor **W, const tfm_tensor **b);
} tfm_mt_net_vtable;

struct tfm_mt_net {
    const tfm_mt_net_vtable *vt;
    tfm_mt_config cfg;
    tfm_params params;       /* all parameters, dotted names ("encoder.blocks.0.attention.W_q.weight") */
    int keep_attention;      /* set to keep attention weights during forward (for attention()) */
    void *impl;              /* architecture data */
};

/* Constructors (params registered and allocated, zeroed; call vt->init_weights for a fresh model).
 * NULL with a tfm error on a bad config. */
TFM_API tfm_mt_net *tfm_mt_transformer_create(const tfm_mt_config *c);   /* src/models/transformer.c */
TFM_API tfm_mt_net *tfm_mt_rnn_create(const tfm_mt_config *c);       /* issue 4: GRU seq2seq */
TFM_API tfm_mt_net *tfm_mt_bahdanau_create(const tfm_mt_config *c);      /* issue 4: Bahdanau decoder */
/* Dispatch on c->arch ("unknown architecture ..." error otherwise). */
TFM_API tfm_mt_net *tfm_mt_net_create(const tfm_mt_config *c);
TFM_API void tfm_mt_net_free(tfm_mt_net *m);   /* NULL-safe: m->vt->destroy(m) */
/* A second model of m's config that computes with m's weights (tfm_params_share_data) and keeps its own
 * gradients: one per chunk of the batch in thread data parallelism. Free it before m. NULL on error. */
TFM_API tfm_mt_net *tfm_mt_net_replica(const tfm_mt_net *m);
/* m->vt->max_positions(m), or 0 (no bound) when the architecture has none. */
TFM_API int tfm_mt_net_max_positions(const tfm_mt_net *m);

/* Teacher-forced forward: encode + init_state(max_steps 0) + decode. tgt_in (B,Tt). -> logits (B,Tt,V) */
TFM_API tfm_tensor *tfm_mt_net_forward(tfm_mt_net *m, tfm_graph *g, const int *src, const int *src_valid, int B, int Ts,
                               const int *tgt_in, int Tt);
/* Teacher-forced training loss: mean label-smoothed cross-entropy over the target tokens != <pad> (a scalar
 * tensor), equal to tfm_cross_entropy(tfm_mt_net_forward(...), tgt, TFM_PAD, label_smoothing). Architectures
 * with vt->loss (the Transformer) compute it on packed rows: every row-wise op skips the padding. */
TFM_API tfm_tensor *tfm_mt_net_loss(tfm_mt_net *m, tfm_graph *g, const int *src, const int *src_valid, int B, int Ts,
                            const int *tgt_in, const int *tgt, int Tt, float label_smoothing);
/* The teacher-forced logits tfm_mt_net_loss takes its cross-entropy of: (n, V) on the valid target positions
 * (vt->train_logits, the Transformer) or (B, Tt, V) (the forward); *targets their targets (<pad> = ignored). */
TFM_API tfm_tensor *tfm_mt_net_train_logits(tfm_mt_net *m, tfm_graph *g, const int *src, const int *src_valid, int B,
                                            int Ts, const int *tgt_in, const int *tgt, int Tt, const int **targets);
/* R-Drop (Liang et al. 2021, "R-Drop: Regularized Dropout for Neural Networks"; train-mt --rdrop ALPHA): the batch
 * through the model twice (tfm_mt_net_train_logits twice: the second pass draws the next dropout masks from g),
 * loss = (CE1 + CE2) / 2 + alpha * tfm_sym_kl(logits1, logits2) over the target tokens != <pad>, each term a mean
 * over those tokens (CE with label_smoothing). The mean of the two CEs keeps the loss on tfm_mt_net_loss's scale;
 * R-Drop's fairseq code sums them (CE1 + CE2 + alpha' KL), which is this loss times 2 with alpha' = 2 alpha. */
TFM_API tfm_tensor *tfm_mt_net_rdrop_loss(tfm_mt_net *m, tfm_graph *g, const int *src, const int *src_valid, int B,
                                          int Ts, const int *tgt_in, const int *tgt, int Tt, float label_smoothing,
                                          float alpha);
/* Decoder input for teacher forcing: row b = <bos>, tgt[b][0 .. T-2]  (tgt padded (B,T)). */
TFM_API void tfm_mt_shift_right(const int *tgt, int B, int T, int *tgt_in);

/* ---------------------------------------------------------------- checkpoints */
#define TFM_MAX_ENSEMBLE 16       /* models decoded together (tfm_search_nbest_ensemble, tfm translate A B ...) */
#define TFM_ENSEMBLE_NAMES 1024   /* bytes of tfm_mt_model.ensemble, its terminating NUL included */
/* A trained translator with its vocabularies. */
typedef struct {
    tfm_mt_net *model;
    tfm_vocab src_vocab, tgt_vocab;
    int tok_kind;            /* tfm_tok_kind used for the source side (and target evaluation) */
    tfm_bpe *bpe;            /* tok_kind TFM_TOK_BPE: the joint subword model (owned; both vocabularies
                                are its pieces), stored as tokenizer.bpe; NULL for word tokenizers */
    /* Settings stored with the model (0 / "" when the checkpoint has none; saved only when set): */
    int decode_beam;         /* decode.beam: the beam the model is meant to be decoded with (train-mt
                                --decode-beam); translate, the library and Python use it unless told otherwise */
    float decode_alpha;      /* decode.alpha: its length penalty (saved with decode.beam) */
    char src_lang[16], tgt_lang[16];   /* meta.src_lang / meta.tgt_lang: language codes (train-mt --src-lang
                                de --tgt-lang en): letters, digits, '-' and '_' */
    char ensemble[TFM_ENSEMBLE_NAMES];   /* decode.ensemble: the other members this model decodes with (tfm average
                                --ensemble), file names in the checkpoint's own folder, one per line ("" = none;
                                tfm_ensemble_name_valid); tfm_translator_load follows it */
    struct tfm_marian_tok *marian;   /* an imported MarianMT (tokenizer.kind "marian", tok_kind -1): its tokenizer,
                                        from the checkpoint's tokenizer.marian.* files; no src_vocab / tgt_vocab */
} tfm_mt_model;
/* Is s a file name decode.ensemble may hold (1..128 of [A-Za-z0-9._-], not starting with '.' or '-': no folder,
 * no "..")? */
TFM_API int tfm_ensemble_name_valid(const char *s, size_t n);
/* Is s a valid language code for src_lang/tgt_lang (1..15 of [A-Za-z0-9_-])? */
TFM_API int tfm_lang_code_valid(const char *s);

/* ---------------------------------------------------------------- imported MarianMT tokenizers */
/* source.spm + target.spm (SentencePiece) and vocab.json (piece -> model id), as Hugging Face's
 * MarianTokenizer uses them (src/models/marian_tok.c). From the files' bytes (names: of the three, for
 * errors); every piece
 * either SentencePiece model can output must be in vocab.json, whose ids must be below n_model. */
typedef struct tfm_marian_tok tfm_marian_tok;
TFM_API tfm_marian_tok *tfm_marian_tok_from_bytes(const void *src, size_t src_len, const void *tgt, size_t tgt_len,
                                                  const void *vocab, size_t vocab_len, int n_model,
                                                  const char *const names[3]);
TFM_API void tfm_marian_tok_free(tfm_marian_tok *t);
/* Source text -> model ids (malloc'd, *n of them; without </s>). */
TFM_API int *tfm_marian_encode(const tfm_marian_tok *t, const char *text, size_t len, int *n);
/* Model ids -> target text (malloc'd): </s>, <pad>, <unk> dropped, target.spm's decoding of the pieces. */
TFM_API char *tfm_marian_decode(const tfm_marian_tok *t, const int *ids, int n);

/* Adds meta.*, config.*, param.*, tokenizer.* to c (not optimizer / training state). */
TFM_API void tfm_mt_model_put(tfm_container *c, const tfm_mt_model *t);
/* A translator's BPE model: every score finite, and the scores of its merged (normal) pieces non-increasing in id
 * order, as tfm bpe learn and spm_train write them: the merge order is the learned order (an edited score that
 * passes the checksum and the vocabulary check would otherwise change every tokenization). name: for the error. */
TFM_API int tfm_mt_model_check_bpe(const tfm_bpe *b, const char *name);
/* Its two halves around the tokenizer entries, for a translator with another tokenizer (an imported
 * MarianMT): meta.*, the config fields every checkpoint has and param.*; then the optional config fields
 * (written only when set). */
TFM_API void tfm_mt_net_put(tfm_container *c, const tfm_mt_net *m);
TFM_API void tfm_mt_put_optional_config(tfm_container *c, const tfm_mt_config *cf);
/* From a loaded container: checks meta.kind == "seq2seq" (an LM checkpoint is a clear error:
 * "PATH: is a language-model checkpoint (train-lm; meta.kind 'gpt'), not a translation model: ..."), reads the
 * config, dispatches on meta.arch, loads params and vocabularies. 0 or -1 with a tfm error. */
TFM_API int tfm_mt_model_get(tfm_mt_model *t, const tfm_container *c, const char *path);
/* Load from a file (container load + get). _for_inference: a model that will only translate (tfm_translator_load):
 * an int8 model's int8 weights keep no float copy (tfm_params_drop_q8_floats), so it holds them once. */
TFM_API int tfm_mt_model_load(tfm_mt_model *t, const char *path);
TFM_API int tfm_mt_model_load_for_inference(tfm_mt_model *t, const char *path);
TFM_API void tfm_mt_model_free(tfm_mt_model *t);
/* Read-only views for bindings, which never depend on the struct's layout (the Python package): the stored
 * decoding settings (decode.beam, 0 = none, and decode.alpha), the language codes ("" when none) and the BPE model
 * (NULL for word vocabularies and imported MarianMT models; owned by t). */
TFM_API int tfm_mt_model_decode_beam(const tfm_mt_model *t);
TFM_API float tfm_mt_model_decode_alpha(const tfm_mt_model *t);
TFM_API const char *tfm_mt_model_src_lang(const tfm_mt_model *t);
TFM_API const char *tfm_mt_model_tgt_lang(const tfm_mt_model *t);
TFM_API const tfm_bpe *tfm_mt_model_bpe(const tfm_mt_model *t);

#endif
