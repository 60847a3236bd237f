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
#include "tfm/io.h"

void tfm_ckpt_put_params(tfm_container *c, const tfm_params *p);
/* Copies every param.<name> into p. Returns 0, or -1 with "PATH: ..." error (missing / wrong shape). */
int tfm_ckpt_get_params(const tfm_container *c, tfm_params *p, const char *path);
/* Any block parallel to p->data (optimizer moments): entry <prefix><name> per parameter. get checks every
 * entry before copying anything. */
void tfm_ckpt_put_block(tfm_container *c, const char *prefix, const tfm_params *p, const float *block);
int tfm_ckpt_get_block(const tfm_container *c, const char *prefix, const tfm_params *p, float *block,
                       const char *path);
/* Strings, ints and floats: use tfm_container_str / _int / _float (their errors name the file). */

#endif
