/* tfm: Transformers on CPUs, as a C11 library. This header includes every public header.
 *
 * ---- Translate lines with a trained model (tfm train-mt writes the checkpoint): one object, one call ----
 *
 *     tfm_translator *t = tfm_translator_load("model.tfm", NULL);        // NULL: default params
 *     if (!t) { fprintf(stderr, "%s\n", tfm_last_error()); return 1; }
 *     const char *src[1] = {"go ."};
 *     tfm_translation out[1];
 *     if (tfm_translator_translate_batch(t, src, 1, NULL, out) == 0)    // NULL: the model's decoding settings
 *         puts(out[0].hypotheses[0]), tfm_translation_free(&out[0]);
 *     tfm_translator_free(t);
 *
 * ---- Generate text with a trained language model ----
 *
 *     tfm_generator *g = tfm_generator_load("lm.tfm", NULL);
 *     tfm_generate_options o;
 *     tfm_generate_options_default(&o);
 *     o.max_tokens = 200;
 *     tfm_generation r;
 *     if (g && tfm_generator_generate(g, "ROMEO:", &o, NULL, NULL, &r) == 0) puts(r.text), tfm_generation_free(&r);
 *     tfm_generator_free(g);
 *
 * ---- Train a small character language model, then sample from it ----
 *
 *     tfm_lm_data d;                                   // text file -> vocabulary, ids, 90/10 split
 *     if (tfm_lm_data_load(&d, "input.txt", NULL, 0.9f, 64)) { ...tfm_last_error()... }
 *     tfm_gpt_config c = {d.vocab.n, 64, 4, 4, 128, 0.0f, TFM_ATTN_CAUSAL};   // vocab, block, layers, heads, width
 *     tfm_gpt m;
 *     tfm_gpt_init(&m, &c);
 *     tfm_gpt_init_weights(&m, 1337);
 *     tfm_lm_train_state st;
 *     tfm_lm_train_state_default(&st);                 // train-lm's hyperparameters, iter 0, RNGs from seed
 *     st.iters = 500;
 *     tfm_adamw opt;
 *     tfm_adamw_init(&opt, &m.params, st.beta1, st.beta2, 1e-8f, st.weight_decay);
 *     tfm_lm_train(&m, &d, &opt, &st, 0, 0, NULL, NULL, NULL, NULL);   // max_steps 0: all; no ctl, callbacks
 *     tfm_gpt_save("lm.tfm", &m, &d.vocab, &opt, &st);           // opt/st NULL: weights only
 *     tfm_sample_opts so;
 *     tfm_sample_opts_default(&so);                    // temperature 1, top_k 0, top_p 1, seed 1
 *     int prompt[1] = {0}, out[200];
 *     tfm_graph g;
 *     tfm_graph_init(&g, 0);
 *     tfm_gpt_generate(&m, &g, prompt, 1, 200, &so, NULL, NULL, out);   // ids; tfm_char_decode -> text
 *
 * docs/API.md lists the functions by task; docs/ARCHITECTURE.md explains the floors.
 *
 * ---- Contract ----
 *
 * Errors. Functions that can fail on input (files, configs, data, sizes) return -1 (or NULL) and set a
 * one-line message naming the file, entry or field: tfm_last_error(). The message is per thread, and so
 * is its kind, tfm_last_error_kind(): TFM_ERR_DATA (a file's contents are malformed), TFM_ERR_IO (the
 * system refused to open, read or write), TFM_ERR_NOMEM, or TFM_ERR_OTHER (the tfm CLI exits with 65,
 * 74, 1 and 1 for them).
 * Nothing is printed by the library except what a caller asks for (profile printing, progress through
 * the callbacks it passes). tfm_fatal (abort with "internal error") is reserved for broken invariants:
 * shape mismatches between ops a model builds, i.e. programming errors, never bad input.
 *
 * Out of memory. Public functions that allocate a buffer sized by the caller or by a file (loading a
 * checkpoint or corpus, building a model from a config, KV caches, decoding and generation buffers,
 * training loops' batch buffers) report failure as an error ("out of memory ..."), not an abort.
 * The graph arena's growth inside a forward pass is the exception: it aborts, because a half-built
 * graph cannot be unwound; its size is fixed by the first step of a loop (warm-up).
 *
 * Threads. There is no mutable global state: the error message is thread-local, kernel scratch is per
 * thread (tfm_thread_scratch, freed when the thread exits), and every setting (profile, dropout RNG, exact/tiled attention) lives in the
 * tfm_graph. Two threads may run two models, or one model with two graphs, at the same time and get
 * the same numbers as running one after the other (tests/unit/test_threads.c), as long as they do not
 * both write the same model (training updates the parameters and their grads: one trainer per model).
 * Inside a call, work is split with OpenMP; tfm_set_threads sets the count for the calling thread.
 * Same seed and thread count give bit-identical results.
 */
#ifndef TFM_TFM_H
#define TFM_TFM_H

#include "tfm/version.h"
#include "tfm/core.h"
#include "tfm/io.h"
#include "tfm/checkpoint.h"
#include "tfm/ops.h"
#include "tfm/kernels.h"
#include "tfm/nn.h"
#include "tfm/road.h"
#include "tfm/rnn.h"
#include "tfm/text.h"
#include "tfm/bpe.h"
#include "tfm/gpt.h"
#include "tfm/seq2seq.h"
#include "tfm/safetensors.h"
#include "tfm/interchange.h"
#include "tfm/dist.h"
#include "tfm/eval.h"
#include "tfm/train.h"
#include "tfm/decode.h"
#include "tfm/translator.h"
#include "tfm/generator.h"
#include "tfm/quantize.h"

#endif
