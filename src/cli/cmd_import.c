/* tfm import MODEL.safetensors --out MODEL.tfm: a safetensors file written by tfm export (or by the
 * PyTorch twins, scripts/safetensors_check.py) back into a weights-only tfm checkpoint. */
#include "cli/cli.h"
#include "cli/train_run.h"
#include "tfm/core.h"
#include "tfm/interchange.h"

int cmd_import(int argc, char **argv) {
    const char *out = NULL;
    cli_flag flags[] = {{"out", FLAG_STR, &out, "the tfm checkpoint to write (required)", 0}};
    cli_spec spec = {"import", "MODEL.safetensors --out MODEL.tfm",
                     "Reads the file as untrusted input (header size, strict JSON, F32 only, offsets inside the\n"
                     "data and not overlapping, every tensor present with the shape the config in __metadata__\n"
                     "needs and no unknown tensor) and writes a weights-only checkpoint. On any error nothing is\n"
                     "written to --out.",
                     flags, (int)(sizeof flags / sizeof flags[0]), 1, 1};
    const char *pos[1];
    int n_pos, rc = cli_parse(&spec, argc, argv, pos, &n_pos);
    if (rc) return rc == 1 ? 0 : rc;
    if (!out) return cli_error("import", "--out is required (the tfm checkpoint to write)");
    tfm_file_use files[] = {{"MODEL.safetensors", pos[0], TFM_FILE_IN}, {"--out", out, TFM_FILE_OUT}};
    if ((rc = cli_check_files("import", files, 2))) return rc;
    cli_clean_stale("import", out);
    if (tfm_import_safetensors(pos[0], out)) return cli_fail("import", "%s", tfm_last_error());
    return 0;
}
