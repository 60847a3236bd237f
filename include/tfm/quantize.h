/* tfm quantize (workflow floor, src/train/quantize.c): a model checkpoint -> an int8 model for inference.
 *
 * Every selected 2-D weight is held in int8 with one fp32 scale per row (per output channel; see
 * tfm_q8_weight in core.h) and stored as param.<name> (i8) + qscale.<name> (f32); activations are quantized
 * per row at run time (tfm_gemm_q8). Any loader reads such a file (tfm_gpt_load, tfm_mt_model_load, tfm_translator_load):
 * translate, generate, attention and programs using the library run it with no change; the dequantized
 * weights stand in for the floats wherever a weight is read otherwise (embedding lookups, a graph that
 * tracks gradients). Works for every model kind: GPT (causal or synthesizer attention), Transformer, GRU
 * seq2seq, Bahdanau.
 *
 * Roles of the 2-D parameters (by name):
 *   linear      every weight multiplied as x W^T (attention projections, FFN, GRU gates, additive attention):
 *               always int8
 *   embedding   token/position tables read by lookup (encoder/decoder.embedding, GPT wpe): int8 if
 *               opts.embeddings (smaller file, same speed: lookups read the dequantized table)
 *   output      the layer over the vocabulary (decoder.dense): int8 if opts.output
 *   tied        one matrix that is both (GPT wte, shared.embedding with --share-embeddings): int8 if
 *               opts.output (its use as the output layer decides)
 *   kept        the synthesizer's w2 (multiplied as x W, not x W^T): stays fp32
 * Optimizer moments and training state (adam.*, train.*) are not copied: an int8 model cannot be trained
 * or resumed (the report counts the dropped entries; the CLI says so). Other entries (meta, config,
 * tokenizer, run configuration) are copied as they are; meta.quantized says what was done. */
#ifndef TFM_QUANTIZE_H
#define TFM_QUANTIZE_H

#include "tfm/core.h"
#include "tfm/io.h"

typedef struct {
    int embeddings;          /* 1: embedding tables in int8 too */
    int output;              /* 1: the output layer (and tied embedding/output matrices) in int8 */
} tfm_quantize_opts;
TFM_API void tfm_quantize_opts_default(tfm_quantize_opts *o);

typedef struct {
    int n_tensors, n_q8;            /* parameters in all; held in int8 */
    int64_t params, params_q8;      /* their elements */
    int dropped;                    /* optimizer / training-state entries not copied */
} tfm_quantize_report;

/* The role of a 2-D parameter named `name` of a model of kind "gpt" or "seq2seq" (see above). */
typedef enum { TFM_Q8_ROLE_LINEAR, TFM_Q8_ROLE_EMBEDDING, TFM_Q8_ROLE_OUTPUT, TFM_Q8_ROLE_TIED, TFM_Q8_ROLE_KEPT } tfm_q8_role;
TFM_API tfm_q8_role tfm_q8_role_of(const char *kind, const char *name);
/* Whether opts select that role. */
TFM_API int tfm_quantize_selects(const tfm_quantize_opts *o, tfm_q8_role role);

/* Quantize the checkpoint in_path into out_path (written atomically; nothing written on error). The input is
 * loaded and checked like any model (its loader); an input that is already int8 is refused. 0, or -1 with a
 * one-line tfm error naming the file. r (may be NULL) receives what was done. */
TFM_API int tfm_quantize_file(const char *in_path, const char *out_path, const tfm_quantize_opts *o,
                              tfm_quantize_report *r);

#endif
