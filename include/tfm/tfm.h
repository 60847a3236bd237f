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
 * ---- Train a language model: what tfm train-lm does, as one call (include/tfm/run.h) ----
 *
 *     tfm_lm_run_opts o;
 *     tfm_lm_run_opts_default(&o);                     // train-lm's defaults (the GPT baby config)
 *     o.data = "input.txt", o.out = "lm.tfm", o.iters = 500;
 *     tfm_run_result r;
 *     if (tfm_lm_run(&o, NULL, &r)) fprintf(stderr, "%s\n", tfm_last_error());   // NULL hooks: silent
 *
 * The layers below (tfm_gpt, tfm_lm_train, tfm_gpt_generate, the ops) are public too, for programs that build
 * their own models and loops: docs/API.md.
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
 * Ownership. The caller owns what it passes in; a call borrows its arguments for its duration only, unless
 * the function says otherwise (tfm_constant wraps caller data without copying; the string fields of a run's
 * options must outlive the run). Opaque objects (tfm_translator, tfm_generator, tfm_gen_stream, tfm_serve,
 * tfm_dist) come from their _load / _create / _init / _start function and go back with the matching _free
 * (tfm_dist: tfm_dist_finalize), which
 * takes NULL. Structs whose storage the caller provides (tfm_gpt, tfm_bpe, tfm_container, tfm_lm_data,
 * tfm_adamw, tfm_run_config, ...) are filled by their _init / _load / _get / _build function and release what
 * they hold with their _free; after a failed fill there is nothing to free. Results written into a caller's
 * struct (tfm_translation, tfm_generation) are released with their _free. A returned `const char *` or const
 * pointer points into the object it came from and lives as long as it; a returned non-const buffer (`char *`,
 * `int *`) is malloc'd and the caller free()s it. Pointers a callback receives are valid during the call.
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
#include "tfm/tokenizers.h"
#include "tfm/run.h"
#include "tfm/serve.h"

#endif
