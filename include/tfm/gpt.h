/* The decoder-only GPT (minGPT naming): token + position embeddings, n_layer pre-LN blocks
 * (x += attn(ln1(x)); x += ffn(ln2(x))), final LayerNorm, LM head tied to the token embedding.
 * attention: TFM_ATTN_CAUSAL (causal multi-head self-attention) or TFM_ATTN_SYNTHESIZER (dense
 * synthesizer, see models/synthesizer.c). */
#ifndef TFM_GPT_H
#define TFM_GPT_H

#include "tfm/export.h"
#include "tfm/io.h"
#include "tfm/nn.h"
#include "tfm/bpe.h"
#include "tfm/text.h"

typedef enum { TFM_ATTN_CAUSAL = 0, TFM_ATTN_SYNTHESIZER = 1 } tfm_attn_kind;

typedef struct {
    int vocab_size, block_size, n_layer, n_head, n_embd;
    float dropout;
    int attention;           /* tfm_attn_kind */
    float ln_eps;            /* epsilon of every LayerNorm; 0 = 1e-5 (tfm's, and GPT-2's layer_norm_epsilon).
                                Saved as config.ln_eps only when non-zero (issue 31, imported GPT-2s) */
} tfm_gpt_config;

/* Dense synthesizer attention for one layer: A = relu(X W1 + b1) W2 + b2 per head (cut to T), causal
 * mask, softmax, times X W_v, output projection W_o. */
typedef struct {
    tfm_Linear w1;           /* (n_embd -> n_embd) */
    tfm_tensor *w2, *b2;     /* (n_embd/n_head, block_size), (block_size) */
    tfm_Linear W_v, W_o;
    int n_head, block_size;
    float dropout;
} tfm_SynthesizerAttention;

typedef struct {
    tfm_LayerNorm ln1, ln2;
    tfm_MultiHeadAttention attn;
    tfm_SynthesizerAttention synth;
    tfm_PositionWiseFFN ffn;
} tfm_gpt_block;

typedef struct {
    tfm_gpt_config cfg;
    tfm_params params;
    tfm_Embedding wte, wpe;
    tfm_gpt_block *blocks;
    tfm_LayerNorm ln_f;
} tfm_gpt;

/* The checkpoint entries of a GPT's kind and config (meta.kind, meta.arch, config.*), in the order tfm's
 * checkpoints have them; a caller adds the tokenizer entries and the parameters (tfm_ckpt_put_params). */
TFM_API void tfm_gpt_put_config(tfm_container *c, const tfm_gpt_config *k);

/* Validate a config; returns 0 or -1 with a one-line tfm error naming the field. */
/* train-lm's model: the GPT baby config (4 layers, 4 heads, width 128, context 64, no dropout, causal
 * attention, LayerNorm epsilon 1e-5); vocab_size 0: set it from the tokenizer. */
TFM_API void tfm_gpt_config_default(tfm_gpt_config *c);
TFM_API int tfm_gpt_config_check(const tfm_gpt_config *c);
/* Estimated float elements of the activations of one training step on B rows of T tokens (per layer ~32
 * (B,T,C) tensors and two (B,H,T,T) attention maps, plus 3 (B,T,V) for the logits); saturates, never wraps.
 * Compared with TFM_MAX_STEP_ELEMS before a run allocates anything. */
TFM_API int64_t tfm_gpt_step_elems(const tfm_gpt_config *c, int64_t B, int64_t T);
/* Number of parameters tfm_gpt_init would allocate for a checked config (computed, not built;
 * tests/unit/test_loaders.c checks it equals params.total). */
TFM_API int64_t tfm_gpt_n_params(const tfm_gpt_config *c);
/* Build the parameter set (zeroed); call tfm_gpt_init_weights for a fresh model. */
TFM_API int tfm_gpt_init(tfm_gpt *m, const tfm_gpt_config *c);
TFM_API void tfm_gpt_init_weights(tfm_gpt *m, uint64_t seed);
TFM_API void tfm_gpt_free(tfm_gpt *m);
/* Read-only views for bindings, which never depend on the struct's layout (the Python package): m->cfg.vocab_size
 * and m->cfg.block_size (the context length). */
TFM_API int tfm_gpt_vocab_size(const tfm_gpt *m);
TFM_API int tfm_gpt_block_size(const tfm_gpt *m);
/* A second GPT of m's config that computes with m's weights (tfm_params_share_data) and keeps its own
 * gradients: one per chunk of the batch in thread data parallelism. Free it (tfm_gpt_free) before m. */
TFM_API int tfm_gpt_replica_init(tfm_gpt *r, const tfm_gpt *m);
/* idx (B,T) token ids, T <= block_size -> logits (B,T,vocab) */
TFM_API tfm_tensor *tfm_gpt_forward(tfm_graph *g, tfm_gpt *m, const int *idx, int B, int T);

/* KV cache for generation (batch 1, causal attention): per layer, the projected keys and values of the
 * positions seen so far, (block_size, n_embd) each, in the (T, H*d) layout the projections produce, so the
 * attention reads them in place (no gather). Feeding token t costs O(t), not a full forward over t tokens.
 * Positions are absolute: once len reaches block_size the window must be recomputed from an empty cache
 * with the last block_size tokens (what tfm generate does), because the position embeddings shift. */
typedef struct {
    int n_layer, C, max_len;
    int len;                 /* positions filled */
    float *k, *v;            /* n_layer * max_len * C each (one block, allocated once; v follows k) */
} tfm_gpt_cache;
/* 0, or -1 with a tfm error (synthesizer attention has no cache; out of memory). */
TFM_API int tfm_gpt_cache_init(tfm_gpt_cache *c, const tfm_gpt *m);
TFM_API void tfm_gpt_cache_free(tfm_gpt_cache *c);
/* Feed T tokens at positions len..len+T-1 (len + T <= block_size); appends their keys/values and returns
 * their logits (1,T,vocab), equal to the last T rows of a full forward over all len+T tokens. Inference only
 * (records no tape). */
TFM_API tfm_tensor *tfm_gpt_forward_cached(tfm_graph *g, tfm_gpt *m, tfm_gpt_cache *c, const int *idx, int T);
/* The same up to the final layer norm: the hidden states (1,T,n_embd) that the output layer (wte, tied) turns
 * into logits (tfm_logit_screen_new_gpt finds greedy's token from them). */
TFM_API tfm_tensor *tfm_gpt_hidden_cached(tfm_graph *g, tfm_gpt *m, tfm_gpt_cache *c, const int *idx, int T);
/* The same two for the last fed token only: all T keys/values are appended, but the final block computes its
 * queries, attention and FFN for the last position alone, and the result is that row: logits (1,1,vocab), hidden
 * state (1,1,n_embd). For a prompt or a recomputed window, where only the next token is wanted (tfm generate). */
TFM_API tfm_tensor *tfm_gpt_forward_cached_last(tfm_graph *g, tfm_gpt *m, tfm_gpt_cache *c, const int *idx, int T);
TFM_API tfm_tensor *tfm_gpt_hidden_cached_last(tfm_graph *g, tfm_gpt *m, tfm_gpt_cache *c, const int *idx, int T);

TFM_API void tfm_SynthesizerAttention_init(tfm_SynthesizerAttention *s, tfm_params *p, const char *name, int n_embd,
                                   int n_head, int block_size, float dropout);
TFM_API tfm_tensor *tfm_SynthesizerAttention_forward(tfm_graph *g, const tfm_SynthesizerAttention *s, tfm_tensor *x);


/* ---------------------------------------------------------------- checkpoints (src/models/gpt_checkpoint.c) */
/* The model's entries of a checkpoint (entry names in tfm/checkpoint.h): meta and config.*, the tokenizer (bpe
 * when non-NULL: tokenizer.kind "bpe" and tokenizer.bpe; else v's characters, tokenizer.chars) and the
 * parameters. The training floor adds the optimizer and training state (tfm_gpt_save_tok, train.h). 0 or -1. */
TFM_API int tfm_gpt_put(tfm_container *c, const tfm_gpt *m, const tfm_char_vocab *v, const tfm_bpe *bpe);
/* A GPT checkpoint's model from a loaded container (path: for messages): meta.kind, the config (checked), the
 * tokenizer and the parameters. v NULL: the model only, whatever its tokenizer; bpe NULL: a character model
 * only (a BPE one is refused, naming tfm_gpt_load_tok); else *bpe = NULL and v filled for a character model,
 * or *bpe malloc'd (free with tfm_bpe_free + free) and v empty. 0, or -1 with nothing left allocated. */
TFM_API int tfm_gpt_get_model(tfm_gpt *m, tfm_char_vocab *v, tfm_bpe **bpe, const tfm_container *c, const char *path);
/* The model only, as a file: weights, config and tokenizer, no training state (an export's import, a copy). */
TFM_API int tfm_gpt_model_save(const tfm_gpt *m, const tfm_char_vocab *v, const tfm_bpe *bpe, const char *path);
/* Any GPT checkpoint's model (its optimizer state is skipped, not read): tfm_gpt_get_model's contract. */
TFM_API int tfm_gpt_model_load(tfm_gpt *m, tfm_char_vocab *v, tfm_bpe **bpe, const char *path);

/* A GPT checkpoint with its tokenizer, whichever it is: train-lm's characters, or an imported GPT-2's byte-level
 * BPE (tokenizer.kind "gpt2": the checkpoint's tokenizer.gpt2.vocab / .merges, include/tfm/tokenizers.h). */
typedef struct {
    tfm_gpt model;
    tfm_char_vocab chars;            /* gpt2 == NULL */
    struct tfm_gpt2_bpe *gpt2;       /* an imported GPT-2's tokenizer, or NULL */
    int eos;                         /* the id generation stops at (GPT-2's <|endoftext|>), or -1 (none) */
} tfm_lm;
TFM_API int tfm_lm_load(tfm_lm *lm, const char *path);
/* The same from a loaded container (path: for messages). */
TFM_API int tfm_lm_get(tfm_lm *lm, const tfm_container *c, const char *path);
TFM_API void tfm_lm_free(tfm_lm *lm);
/* text[0..len) -> ids (malloc'd, *n). Characters: an error names a character the vocabulary lacks. */
TFM_API int *tfm_lm_encode(tfm_lm *lm, const char *text, size_t len, int *n);
/* The bytes token id stands for (a character's UTF-8, or a GPT-2 token's bytes: maybe part of a character);
 * buf (4 bytes) holds a character's. NULL for an id out of range. */
TFM_API const char *tfm_lm_token_bytes(const tfm_lm *lm, int id, char buf[4], size_t *len);

#endif
