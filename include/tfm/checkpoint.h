/* Checkpoints (core floor): a tfm container (io.h) with these entry-name conventions, shared by every model:
 *   meta.kind        str   "gpt" | "seq2seq"
 *   meta.arch        str   "gpt" | "transformer" | "rnn" | "bahdanau"
 *   config.<field>   i32/f32 scalar model config (e.g. config.n_layer, config.dropout)
 *   param.<name>     f32   every model parameter under its dotted name; i8 (rows, cols) for a weight of an
 *                          int8 model (tfm quantize), with its scales in qscale.<name> f32 (rows)
 *   adam.m.<name>, adam.v.<name>  f32 optimizer moments;  adam.t  i32 steps taken
 *   train.<field>    i32/f32/str training state (train.iter, train.seed, train.rng, ...) for --resume
 *   tokenizer.<...>  str   the tokenizer / vocabularies (tokenizer.chars, tokenizer.src_vocab, ...)
 * Loaders check that every parameter is present with the right shape before copying anything. */
#ifndef TFM_CHECKPOINT_H
#define TFM_CHECKPOINT_H

#include "tfm/core.h"
#include "tfm/export.h"
#include "tfm/io.h"

#define TFM_Q8_SCALE_PREFIX "qscale."
/* Every parameter as param.<name>: f32, or, for one held in int8 (t->q8), i8 + qscale.<name>. */
TFM_API void tfm_ckpt_put_params(tfm_container *c, const tfm_params *p);
/* Copies every param.<name> into p; an i8 one is held in int8 (tfm_params_set_q8: p->data gets the dequantized
 * values; with c->int8_only, none: tfm_params_drop_q8_floats). Returns 0, or -1 with "PATH: ..." error (missing /
 * wrong shape / a non-finite value / a param.* entry that is not a parameter of p / an int8 value -128 / missing,
 * misshapen, negative or non-finite scales / a qscale.* entry of no int8 parameter), before p is changed (a
 * deferred entry's values: when read into p). */
TFM_API int tfm_ckpt_get_params(const tfm_container *c, tfm_params *p, const char *path);
/* The number of int8 (i8) param.* entries of a file: > 0 for a model written by tfm quantize. */
TFM_API int tfm_ckpt_n_q8(const tfm_container *c);
/* Any block parallel to p->data (optimizer moments): entry <prefix><name> per parameter. get checks every
 * entry (presence, shape, finite values; with nonneg also >= 0, for Adam's second moments) before
 * copying anything. */
TFM_API void tfm_ckpt_put_block(tfm_container *c, const char *prefix, const tfm_params *p, const float *block);
TFM_API int tfm_ckpt_get_block(const tfm_container *c, const char *prefix, const tfm_params *p, float *block,
                       const char *path, int nonneg);
/* Before a save: 0 if every value of the block (parallel to p->data: the weights, an optimizer moment) is
 * finite, and >= 0 with nonneg; else -1 with "<what> '<name>' holds <value> at index <i>" (the first). */
TFM_API int tfm_ckpt_check_block(const tfm_params *p, const float *block, const char *what, int nonneg);
/* Total elements of the file's f32 and i8 param.* entries (bounded by the file size). */
TFM_API int64_t tfm_ckpt_stored_params(const tfm_container *c);
/* Before building a model from a loaded config: -1 with "PATH: the config implies N parameters but
 * the file holds M" if need (the config's parameter count, < 0 = overflow) exceeds what is stored,
 * so an edited config cannot make the loader allocate more than the file's size. */
TFM_API int tfm_ckpt_check_param_budget(const tfm_container *c, int64_t need, const char *path);
/* Strings, ints and floats: use tfm_container_str / _int / _float (their errors name the file). */

/* The meta.kind of the checkpoint at path ("gpt": train-lm, "seq2seq": train-mt) into kind[n], so a command
 * given the other family's file can say so. 0, or -1 with the loader's error (not a tfm file, corrupt, no
 * meta.kind). Reads the whole file. */
TFM_API int tfm_checkpoint_kind(const char *path, char *kind, size_t n);
/* "a language model (train-lm)" / "a translation model (train-mt)" / "a 'KIND' model": for messages. */
TFM_API const char *tfm_checkpoint_kind_desc(const char *kind);

#endif
