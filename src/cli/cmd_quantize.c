/* tfm quantize MODEL.tfm --out MODEL.int8.tfm: an int8 model for inference (include/tfm/quantize.h). */
#include <string.h>

#include "cli/cli.h"
#include "cli/train_run.h"
#include "tfm/kernels.h"
#include "tfm/quantize.h"

#define C "quantize"

/* "int8" -> 1, "fp32" -> 0, else -1 */
static int precision_flag(const char *v) { return !strcmp(v, "int8") ? 1 : !strcmp(v, "fp32") ? 0 : -1; }

int cmd_quantize(int argc, char **argv) {
    const char *out = NULL, *emb = "int8", *outl = "int8";
    cli_flag flags[] = {
        {"out", FLAG_STR, &out, "the int8 model to write (required; must not be the input)", 0},
        {"embeddings", FLAG_STR, &emb, "int8 | fp32: the embedding tables (lookups; int8 makes the file smaller)", 0},
        {"output-layer", FLAG_STR, &outl, "int8 | fp32: the layer over the vocabulary (GPT: the tied wte)", 0},
    };
    cli_spec spec = {
        C, "MODEL.tfm --out MODEL.int8.tfm [--embeddings int8|fp32] [--output-layer int8|fp32]",
        "Writes an int8 model: every linear weight as int8 with one fp32 scale per output channel\n"
        "(symmetric, [-127, 127]); activations are quantized per row while the model runs, products\n"
        "summed in int32 (AVX-512 VNNI, AVX2 or portable kernels, chosen like the fp32 ones). translate,\n"
        "generate and attention read the file like any model. Any model kind (GPT, Transformer, GRU\n"
        "seq2seq, Bahdanau); optimizer and training state are not copied (inference only).",
        flags, (int)(sizeof flags / sizeof flags[0]), 1, 1};
    const char *pos[1];
    int n_pos, rc = cli_parse(&spec, argc, argv, pos, &n_pos);
    if (rc) return rc == 1 ? 0 : rc;
    tfm_quantize_opts o;
    tfm_quantize_opts_default(&o);
    if (!out) return cli_error(C, "--out MODEL.int8.tfm is required");
    if ((o.embeddings = precision_flag(emb)) < 0) return cli_error(C, "--embeddings must be int8 or fp32, got '%s'", emb);
    if ((o.output = precision_flag(outl)) < 0) return cli_error(C, "--output-layer must be int8 or fp32, got '%s'", outl);
    tfm_file_use files[] = {{"MODEL.tfm", pos[0], TFM_FILE_IN}, {"--out", out, TFM_FILE_OUT}};
    if ((rc = cli_check_files(C, files, 2))) return rc;
    cli_clean_stale(C, out);
    tfm_quantize_report r;
    if (tfm_quantize_file(pos[0], out, &o, &r)) return cli_fail(C, "%s", tfm_last_error());
    if (r.dropped)
        fprintf(stderr, "tfm %s: note: %s holds optimizer and training state (%d entries): not copied, an int8 model "
                "is for inference only (train or resume the fp32 checkpoint)\n", C, pos[0], r.dropped);
    printf("wrote %s: %d of %d tensors in int8 (%.1f%% of %lld parameters); int8 kernels here: %s\n", out, r.n_q8,
           r.n_tensors, r.params ? 100.0 * (double)r.params_q8 / (double)r.params : 0.0, (long long)r.params,
           tfm_gemm_q8_backend());
    return 0;
}
