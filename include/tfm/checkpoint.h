/* Checkpoints (core floor): a tfm container (io.h) with these entry-name conventions, shared by every model:
 *   meta.kind        str   "gpt" | "seq2seq"
 *   meta.arch        str   "gpt" | "transformer" | "rnn" | "bahdanau"
 *   config.<field>   i32/f32 scalar model config (e.g. config.n_layer, config.dropout)
 *   param.<name>     f32   every model parameter under its dotted name
 *   adam.m.<name>, adam.v.<name>  f32 optimizer moments;  adam.t  i32 steps taken
 *   train.<field>    i32/f32/str training state (train.iter, train.seed, train.rng, ...) for --resume
 *   tokenizer.<...>  str   the tokenizer / vocabularies (tokenizer.chars, tokenizer.src_vocab, ...)
 * Loaders check that every parameter is present with the right shape before copying anything. */
#ifndef TFM_CHECKPOINT_H
#define TFM_CHECKPOINT_H

#include "tfm/core.h"
#include "tfm/export.h"
#include "tfm/io.h"

void tfm_ckpt_put_params(tfm_container *c, const tfm_params *p);
/* Copies every param.<name> into p. Returns 0, or -1 with "PATH: ..." error (missing / wrong shape /
 * a non-finite value / a param.* entry that is not a parameter of p). */
int tfm_ckpt_get_params(const tfm_container *c, tfm_params *p, const char *path);
/* Any block parallel to p->data (optimizer moments): entry <prefix><name> per parameter. get checks every
 * entry (presence, shape, finite values; with nonneg also >= 0, for Adam's second moments) before
 * copying anything. */
void tfm_ckpt_put_block(tfm_container *c, const char *prefix, const tfm_params *p, const float *block);
int tfm_ckpt_get_block(const tfm_container *c, const char *prefix, const tfm_params *p, float *block,
                       const char *path, int nonneg);
/* Total elements of the file's f32 param.* entries (bounded by the file size). */
int64_t tfm_ckpt_stored_params(const tfm_container *c);
/* Before building a model from a loaded config: -1 with "PATH: the config implies N parameters but
 * the file holds M" if need (the config's parameter count, < 0 = overflow) exceeds what is stored,
 * so an edited config cannot make the loader allocate more than the file's size. */
int tfm_ckpt_check_param_budget(const tfm_container *c, int64_t need, const char *path);
/* Strings, ints and floats: use tfm_container_str / _int / _float (their errors name the file). */

/* The meta.kind of the checkpoint at path ("gpt": train-lm, "seq2seq": train-mt) into kind[n], so a command
 * given the other family's file can say so. 0, or -1 with the loader's error (not a tfm file, corrupt, no
 * meta.kind). Reads the whole file. */
TFM_API int tfm_checkpoint_kind(const char *path, char *kind, size_t n);
/* "a language model (train-lm)" / "a translation model (train-mt)" / "a 'KIND' model": for messages. */
TFM_API const char *tfm_checkpoint_kind_desc(const char *kind);

#endif
