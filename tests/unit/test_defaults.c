/* Every options struct of the public API has a *_default() (issue 29), and it sets the defaults its header
 * documents: a few of each checked here, against the comments in include/tfm. */
#include <math.h>
#include <string.h>

#include "check.h"
#include "tfm/bpe.h"
#include "tfm/decode.h"
#include "tfm/dist.h"
#include "tfm/eval.h"
#include "tfm/generator.h"
#include "tfm/quantize.h"
#include "tfm/run.h"
#include "tfm/serve.h"
#include "tfm/translator.h"

static void test_model_and_run_defaults(void) {
    tfm_gpt_config g;
    memset(&g, 0x55, sizeof g);
    tfm_gpt_config_default(&g);
    CHECK("tfm_gpt_config_default: the baby config (4 x 4 heads x 128, block 64, causal, vocab from the data)",
          g.n_layer == 4 && g.n_head == 4 && g.n_embd == 128 && g.block_size == 64 && g.vocab_size == 0 &&
              g.attention == TFM_ATTN_CAUSAL && g.dropout == 0 && g.ln_eps == 0,
          "%d %d %d %d %d", g.n_layer, g.n_head, g.n_embd, g.block_size, g.vocab_size);
    tfm_lm_run_opts o;
    memset(&o, 0x55, sizeof o);
    tfm_lm_run_opts_default(&o);
    CHECK("tfm_lm_run_opts_default: train-lm's (the same model, 2000 steps, lr 1e-3 -> 1e-4, seed 1)",
          o.n_layer == g.n_layer && o.n_embd == g.n_embd && o.block_size == g.block_size && o.iters == 2000 &&
              fabsf(o.lr - 1e-3f) < 1e-9f && fabsf(o.min_lr - 1e-4f) < 1e-9f && o.seed == 1 && !o.data && !o.resume,
          "iters %d lr %g seed %d", o.iters, o.lr, o.seed);
    CHECK("tfm_lm_run_opts_size is sizeof(tfm_lm_run_opts)", tfm_lm_run_opts_size() == sizeof o, "%zu",
          tfm_lm_run_opts_size());
}

static void test_decoding_defaults(void) {
    tfm_translator_params tp;
    tfm_translator_params_default(&tp);
    tfm_translate_options to;
    tfm_translate_options_default(&to);
    CHECK("tfm_translate_options_default: the model's beam and length penalty, one hypothesis",
          to.beam_size == 0 && to.length_penalty < 0 && to.num_hypotheses == 1 && !to.return_scores &&
              !to.return_attention && !to.target_prefix && tp.threads == 0,
          "beam %d alpha %g n %d", to.beam_size, to.length_penalty, to.num_hypotheses);
    tfm_generate_options go;
    tfm_generate_options_default(&go);
    CHECK("tfm_generate_options_default: no stop strings, top_p 1", go.top_p == 1 && !go.stop[0] && go.max_tokens > 0,
          "top_p %g max_tokens %d", go.top_p, go.max_tokens);
    tfm_sample_opts so;
    tfm_sample_opts_default(&so);
    CHECK("tfm_sample_opts_default: temperature 1, top_k 0, top_p 1, seed 1",
          so.temperature == 1 && so.top_k == 0 && so.top_p == 1 && so.seed == 1, "%g %d %g", so.temperature, so.top_k,
          so.top_p);
}

static void test_other_defaults(void) {
    tfm_dist_opts d;
    memset(&d, 0, sizeof d);
    tfm_dist_opts_default(&d);
    CHECK("tfm_dist_opts_default: 8 MB buckets, 300 s", d.bucket_bytes == (size_t)8 << 20 && d.timeout_s == 300,
          "%zu %g", d.bucket_bytes, d.timeout_s);
    tfm_plot_opts p;
    memset(&p, 0x55, sizeof p);
    tfm_plot_opts_default(&p);
    CHECK("tfm_plot_opts_default: 640 x 420, no labels", p.width == 640 && p.height == 420 && !p.title && !p.xlabel,
          "%d x %d", p.width, p.height);
    tfm_heatmap_opts h;
    memset(&h, 0x55, sizeof h);
    tfm_heatmap_opts_default(&h);
    CHECK("tfm_heatmap_opts_default: automatic range and cells, one row", !h.title && h.grid_cols == 0 &&
          h.vmin >= h.vmax && h.cell == 0, "%d %g %g %d", h.grid_cols, h.vmin, h.vmax, h.cell);
    tfm_bpe_learn_opts b;
    memset(&b, 0x55, sizeof b);
    tfm_bpe_learn_opts_default(&b);
    CHECK("tfm_bpe_learn_opts_default: 8000 pieces, coverage 0.9995, pieces of <= 16 characters split by class",
          b.vocab_size == 8000 && b.character_coverage == 0.9995f && b.max_piece_chars == 16 && b.split_by_class == 1,
          "%d %g %d %d", b.vocab_size, b.character_coverage, b.max_piece_chars, b.split_by_class);
    tfm_quantize_opts q;
    tfm_quantize_opts_default(&q);
    tfm_serve_params sp;
    tfm_serve_params_default(&sp);
    CHECK("tfm_quantize_opts_default and tfm_serve_params_default fill their structs", sp.max_batch > 0,
          "max_batch %d", sp.max_batch);
}

int main(void) {
    test_model_and_run_defaults();
    test_decoding_defaults();
    test_other_defaults();
    CHECK_EXIT();
}
