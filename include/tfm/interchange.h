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

#include "tfm/gpt.h"
#include "tfm/seq2seq.h"

/* Any tfm model checkpoint -> safetensors (atomic write). 0, or -1 with a tfm error naming the file. */
TFM_API int tfm_export_safetensors(const char *tfm_path, const char *st_path);
/* safetensors (as written by tfm_export_safetensors or by scripts/safetensors_check.py) -> a weights-only
 * tfm checkpoint (atomic write). Validates everything first (format, metadata, config, tokenizer, every
 * tensor present with the config's shape, no unknown tensor); on error nothing is written. */
TFM_API int tfm_import_safetensors(const char *st_path, const char *tfm_path);

/* ---------------------------------------------------------------- Hugging Face model folders (issue 31)
 * tfm_import_hf(DIR, OUT): DIR holds a Hugging Face model as save_pretrained writes it, config.json +
 * model.safetensors (F32, F16 or BF16), and its tokenizer files:
 *   model_type "gpt2"   (GPT2LMHeadModel): vocab.json + merges.txt, or OpenAI's encoder.json + vocab.bpe.
 *                       -> a tfm GPT checkpoint (meta.kind "gpt"), tokenizer.kind "gpt2" with the two files
 *                       (tokenizer.gpt2.vocab, tokenizer.gpt2.merges). The Conv1D weights (in, out) are
 *                       transposed, c_attn is split into W_q | W_k | W_v, lm_head must be (absent or) wte.
 *   model_type "marian" (MarianMTModel): source.spm, target.spm, vocab.json. -> a tfm Transformer
 *                       translator (post-LN, config attn_bias 1, ffn_act, pos_halves 1, shared embeddings,
 *                       final_logits_bias as decoder.dense.bias, the special ids, bad_words_ids, num_beams,
 *                       max_length), tokenizer.kind "marian" with the three files (tokenizer.marian.source,
 *                       .target, .vocab).
 * Everything is untrusted and checked before the model is allocated: config values bounded and cross-checked
 * (tfm_hf_config_parse), the parameter count they imply against the tensors in the file, then every tensor
 * present with the shape the config needs and none left over (errors name the file and the tensor), the
 * tokenizer files. The checkpoint is written atomically; on any error nothing is written. */
typedef enum { TFM_HF_GPT2 = 1, TFM_HF_MARIAN = 2 } tfm_hf_kind;
#define TFM_HF_MAX_CONFIG (1 << 20)   /* bytes of a config.json */
typedef struct {
    int kind;                          /* tfm_hf_kind */
    int vocab_size, tgt_vocab;         /* marian: vocab_size, decoder_vocab_size (= vocab_size when shared) */
    int d_model, n_layer, n_head, ffn; /* gpt2: n_embd, n_layer, n_head, n_inner (4 n_embd) */
    int max_positions;                 /* n_positions / max_position_embeddings */
    int act;                           /* tfm_activation of activation_function */
    float ln_eps, dropout;             /* gpt2: layer_norm_epsilon, resid_pdrop; marian: dropout */
    int eos_id;                        /* eos_token_id */
    /* marian */
    int scale_embedding, share_embeddings;
    int pad_id, bos_id, forced_eos_id; /* pad_token_id, decoder_start_token_id, forced_eos_token_id */
    int num_beams, max_length;         /* generation defaults */
    int n_banned, banned[TFM_MT_MAX_BANNED];   /* bad_words_ids of one token each */
} tfm_hf_config;
/* Parse and check a config.json held in json[0..len) (name: for errors). 0, or -1 with a tfm error
 * "NAME: 'field' ..." (a model_type other than gpt2 / marian, a field out of range, sizes that disagree,
 * an option tfm does not compute). */
TFM_API int tfm_hf_config_parse(tfm_hf_config *c, const char *json, size_t len, const char *name);
TFM_API int tfm_import_hf(const char *dir, const char *tfm_path);

/* ---------------------------------------------------------------- GGUF for llama.cpp (issue 31)
 * tfm_export_gguf(MODEL.tfm, OUT.gguf, outtype): a causal tfm GPT (a character model from train-lm, or an
 * imported GPT-2) as a GGUF v3 file of llama.cpp's "gpt2" architecture: token_embd, position_embd, per block
 * attn_norm, attn_qkv (W_q | W_k | W_v fused), attn_output, ffn_norm, ffn_up, ffn_down (weights and biases),
 * output_norm, output (a copy of the tied token embedding); gpt2.context_length = block_size, the layer
 * norm epsilon. outtype TFM_GGUF_F16 stores the matrices as IEEE halves (round to nearest even), the
 * vectors stay F32, as llama.cpp's converter does; TFM_GGUF_Q8_0 stores them as llama.cpp's Q8_0 (blocks of 32
 * weights along a row with one half scale, d = max|x| / 127, q = roundf(x / d)), matrices whose rows are not
 * whole blocks as F16, and the position table F32 (what llama.cpp's converter does for --outtype q8_0).
 * Tokenizer (tokenizer.ggml.model "gpt2", pre "gpt-2", no BOS/EOS added):
 *   an imported GPT-2: its vocabulary and merges; ids the vocabulary lacks are "[PAD<id>]" (unused), tokens
 *     outside the byte alphabet are control tokens, "<|endoftext|>" is BOS/EOS;
 *   a character model: token i = character i in GPT-2's byte-level alphabet, merges joining the bytes of each
 *     multi-byte character, so llama.cpp splits any text of vocabulary characters into those characters, as
 *     tfm does. A character outside the vocabulary is refused by tfm and cannot be tokenized by llama.cpp.
 * The output path may not be the input file (error before anything is read); written atomically. */
enum { TFM_GGUF_F32 = 0, TFM_GGUF_F16 = 1, TFM_GGUF_Q8_0 = 2 };
TFM_API int tfm_export_gguf(const char *tfm_path, const char *gguf_path, int outtype);

/* The same for models in memory. */
TFM_API int tfm_gpt_save_safetensors(const tfm_gpt *m, const tfm_char_vocab *v, const char *path);
TFM_API int tfm_mt_model_save_safetensors(const tfm_mt_model *t, const char *path);

#endif
