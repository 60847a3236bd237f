/* Model interchange: tfm checkpoints <-> safetensors files (include/tfm/safetensors.h) that the PyTorch
 * twins in scripts/ load with load_state_dict-style copying.
 *
 * Tensors: every parameter under its tfm name, which is the twin's named_parameters() name
 * ("blocks.0.attn.W_q.weight", "encoder.rnn.weight_ih_l0"; the GPT LM head is tied to wte.weight and has
 * no tensor of its own), F32, in the model's registration order.
 * __metadata__ (all strings):
 *   "format"          "pt"
 *   "tfm.format"      "1"
 *   "tfm.kind"        "gpt" | "seq2seq"
 *   "tfm.arch"        "gpt" | "transformer" | "rnn" | "bahdanau"
 *   "tfm.config"      JSON object: the checkpoint's config.<field> values
 *                     gpt:     vocab_size block_size n_layer n_head n_embd dropout attention ("causal" |
 *                              "synthesizer")
 *                     seq2seq: src_vocab tgt_vocab d_model n_head ffn pre_ln max_len n_layer embed_size
 *                              hidden_size share_embeddings (optional on import, default 0) dropout
 *   "tfm.tokenizer.chars"                                          gpt: the character vocabulary
 *   "tfm.tokenizer.src_vocab", ".tgt_vocab", ".kind"               seq2seq: as in the checkpoint
 *   "tfm.tokenizer.bpe"   tokenizer.kind "bpe" only: base64 (RFC 4648, padded) of the SentencePiece
 *                         ModelProto that the checkpoint stores as tokenizer.bpe (pieces, scores, types,
 *                         normalizer; sentencepiece's SentencePieceProcessor(model_proto=...) reads it);
 *                         its pieces must be src_vocab and tgt_vocab
 *   "tfm.tied_weights"    share_embeddings 1 only: {"encoder.embedding.weight": "shared.embedding.weight",
 *                         "decoder.embedding.weight": ..., "decoder.dense.weight": ...}: the one stored
 *                         (V,d) tensor "shared.embedding.weight" is all three (the twin ties them;
 *                         "decoder.dense.bias" stays its own tensor)
 * Optimizer moments and training state are not exported: an import gives a weights-only checkpoint,
 * byte-identical to what tfm writes for the same model without optimizer state. */
#ifndef TFM_INTERCHANGE_H
#define TFM_INTERCHANGE_H

#include "tfm/lm.h"
#include "tfm/seq2seq.h"

/* Any tfm model checkpoint -> safetensors (atomic write). 0, or -1 with a tfm error naming the file. */
int tfm_export_safetensors(const char *tfm_path, const char *st_path);
/* safetensors (as written by tfm_export_safetensors or by scripts/safetensors_check.py) -> a weights-only
 * tfm checkpoint (atomic write). Validates everything first (format, metadata, config, tokenizer, every
 * tensor present with the config's shape, no unknown tensor); on error nothing is written. */
int tfm_import_safetensors(const char *st_path, const char *tfm_path);

/* The same for models in memory. */
int tfm_gpt_save_safetensors(const char *path, const tfm_gpt *m, const tfm_char_vocab *v);
int tfm_mt_model_save_safetensors(const char *path, const tfm_mt_model *t);

#endif
