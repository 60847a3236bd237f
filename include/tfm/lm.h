/* Language-model plumbing around the GPT: character corpora and batches, loss estimation,
 * checkpoints, and sampling. */
#ifndef TFM_LM_H
#define TFM_LM_H

#include "tfm/gpt.h"
#include "tfm/io.h"
#include "tfm/text.h"
#include "tfm/train.h"

/* A character corpus split into train (first frac) and validation (rest). */
typedef struct {
    tfm_char_vocab vocab;
    int *ids;                /* all tokens */
    int n;
    int n_train;             /* ids[0..n_train) train, ids[n_train..n) validation */
} tfm_lm_data;

/* Reads PATH (UTF-8 text), builds the vocabulary (or uses `vocab` if given, e.g. on --resume),
 * encodes, splits. Errors (named file): unreadable, empty, binary, invalid UTF-8, or a split
 * shorter than block_size + 1 tokens. */
int tfm_lm_data_load(tfm_lm_data *d, const char *path, const char *vocab_chars, float train_frac, int block_size);
void tfm_lm_data_free(tfm_lm_data *d);
/* B random windows of T+1 tokens from the split (0 train, 1 val): x (B,T) inputs, y (B,T) next tokens. */
void tfm_lm_get_batch(const tfm_lm_data *d, int split, tfm_rng *r, int B, int T, int *x, int *y);
/* Mean loss over n_batches random batches of the split (eval mode, no grad). */
float tfm_lm_estimate_loss(tfm_gpt *m, tfm_graph *g, const tfm_lm_data *d, int split, int n_batches, int B,
                           int T, uint64_t seed);

/* Training hyperparameters and progress, stored in checkpoints so --resume continues exactly. */
typedef struct {
    int iters, batch_size, grad_accum, warmup, eval_every, eval_iters, seed;
    float lr, min_lr, weight_decay, beta1, beta2, grad_clip;
    int iter;                /* iterations completed */
    uint64_t batch_rng, dropout_rng;
    float last_val_loss;
} tfm_lm_train_state;

/* Range and cross checks of a training state for a model config (B*T bounded, eval_every >= 1,
 * grad_accum and eval_iters small enough not to hang, finite lr > 0, betas in [0,1), RNG states
 * non-zero, iter <= iters, ...): 0, or -1 with a one-line tfm error naming the field
 * ("train.grad_accum must be in 1..65536, got 2147483647"). Used on load and usable for flags. */
int tfm_lm_train_state_check(const tfm_lm_train_state *st, const tfm_gpt_config *cfg);

/* Checkpoint: config, tokenizer, params; and when opt/st are given, optimizer and training state. */
int tfm_gpt_save(const char *path, const tfm_gpt *m, const tfm_char_vocab *v, const tfm_adamw *opt,
                 const tfm_lm_train_state *st);
/* Loads model and vocabulary; if opt/st are non-NULL, also the training state (error if absent).
 * opt is initialised here. */
int tfm_gpt_load(const char *path, tfm_gpt *m, tfm_char_vocab *v, tfm_adamw *opt, tfm_lm_train_state *st);
/* The same from an already loaded container (path: for error messages). */
int tfm_gpt_get(const tfm_container *c, const char *path, tfm_gpt *m, tfm_char_vocab *v, tfm_adamw *opt,
                tfm_lm_train_state *st);

/* Sample one token from logits (V): temperature > 0 scales, top_k > 0 keeps the k largest. */
int tfm_sample_logits(const float *logits, int V, float temperature, int top_k, tfm_rng *r, float *scratch);

#endif
