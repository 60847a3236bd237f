/* tfm export MODEL.tfm --out MODEL.safetensors: a checkpoint's weights, config and tokenizer in the
 * safetensors format under the PyTorch twins' parameter names (include/tfm/interchange.h).
 * tfm export MODEL.tfm --format gguf [--outtype f32|f16|q8_0] --out MODEL.gguf: a GPT for llama.cpp. */
#include <string.h>

#include "cli/cli.h"
#include "cli/train_run.h"
#include "tfm/core.h"
#include "tfm/interchange.h"

int cmd_export(int argc, char **argv) {
    const char *out = NULL, *format = "safetensors", *outtype = "f32";
    cli_flag flags[] = {{"out", FLAG_STR, &out, "the file to write (required)", 0},
                        {"format", FLAG_STR, &format, "safetensors (any model kind) or gguf (GPTs, for llama.cpp)", 0},
                        {"outtype", FLAG_STR, &outtype, "gguf: f32, f16 (matrices as halves) or q8_0 (llama.cpp's 8-bit blocks); vectors stay f32", 0}};
    cli_spec spec = {"export", "MODEL.tfm [--format safetensors|gguf] [--outtype f32|f16|q8_0] --out FILE",
                     "safetensors: the model's parameters (F32, under the parameter names of the PyTorch twins in\n"
                     "scripts/) and, in __metadata__, its kind, config and tokenizer, so `tfm import` rebuilds the\n"
                     "model. Optimizer and training state are not exported. Works for every model kind.\n"
                     "gguf: a causal GPT (train-lm's character models, imported GPT-2s) in llama.cpp's gpt2\n"
                     "architecture with its tokenizer, so llama.cpp tokenizes and generates as tfm does\n"
                     "(docs/INTEROP.md). --out may not be the input file.",
                     flags, (int)(sizeof flags / sizeof flags[0]), 1, 1};
    const char *pos[1];
    int n_pos, rc = cli_parse(&spec, argc, argv, pos, &n_pos);
    if (rc) return rc == 1 ? 0 : rc;
    if (!out) return cli_error("export", "--out is required (the file to write)");
    int gguf = !strcmp(format, "gguf");
    if (!gguf && strcmp(format, "safetensors"))
        return cli_error("export", "--format must be safetensors or gguf, got '%s'", format);
    int type = !strcmp(outtype, "f32") ? TFM_GGUF_F32 : !strcmp(outtype, "f16") ? TFM_GGUF_F16
             : !strcmp(outtype, "q8_0") ? TFM_GGUF_Q8_0 : -1;
    if (type < 0) return cli_error("export", "--outtype must be f32, f16 or q8_0, got '%s'", outtype);
    if (!gguf && strcmp(outtype, "f32")) return cli_error("export", "--outtype applies to --format gguf only");
    tfm_file_use files[] = {{"MODEL.tfm", pos[0], TFM_FILE_IN}, {"--out", out, TFM_FILE_OUT}};
    if ((rc = cli_check_files("export", files, 2))) return rc;
    cli_clean_stale("export", out);
    rc = gguf ? tfm_export_gguf(pos[0], out, type)
              : tfm_export_safetensors(pos[0], out);
    if (rc) return cli_fail("export", "%s", tfm_last_error());
    return 0;
}
