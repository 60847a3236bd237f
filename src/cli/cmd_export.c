/* tfm export MODEL.tfm --out MODEL.safetensors: a checkpoint's weights, config and tokenizer in the
 * safetensors format under the PyTorch twins' parameter names (include/tfm/interchange.h). */
#include "cli/cli.h"
#include "cli/train_run.h"
#include "tfm/core.h"
#include "tfm/interchange.h"

int cmd_export(int argc, char **argv) {
    const char *out = NULL;
    cli_flag flags[] = {{"out", FLAG_STR, &out, "the safetensors file to write (required)", 0}};
    cli_spec spec = {"export", "MODEL.tfm --out MODEL.safetensors",
                     "Writes the model's parameters (F32, under the parameter names of the PyTorch twins in\n"
                     "scripts/) and, in __metadata__, its kind, config and tokenizer, so `tfm import` rebuilds the\n"
                     "model. Optimizer and training state are not exported. Works for every model kind.",
                     flags, (int)(sizeof flags / sizeof flags[0]), 1, 1};
    const char *pos[1];
    int n_pos, rc = cli_parse(&spec, argc, argv, pos, &n_pos);
    if (rc) return rc == 1 ? 0 : rc;
    if (!out) return cli_error("export", "--out is required (the safetensors file to write)");
    tfm_file_use files[] = {{"MODEL.tfm", pos[0], TFM_FILE_IN}, {"--out", out, TFM_FILE_OUT}};
    if ((rc = cli_check_files("export", files, 2))) return rc;
    cli_clean_stale("export", out);
    if (tfm_export_safetensors(pos[0], out)) return cli_fail("export", "%s", tfm_last_error());
    return 0;
}
