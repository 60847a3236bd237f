/* tfm import MODEL.safetensors --out MODEL.tfm: a safetensors file written by tfm export (or by the
 * PyTorch twins, scripts/safetensors_check.py) back into a weights-only tfm checkpoint.
 * tfm import DIR --out MODEL.tfm: a Hugging Face model folder (GPT-2, MarianMT; docs/INTEROP.md). */
#include <sys/stat.h>

#include "cli/cli.h"
#include "cli/train_run.h"
#include "tfm/core.h"
#include "tfm/interchange.h"

int cmd_import(int argc, char **argv) {
    const char *out = NULL;
    cli_flag flags[] = {{"out", FLAG_STR, &out, "the tfm checkpoint to write (required)", 0}};
    cli_spec spec = {"import", "MODEL.safetensors|DIR --out MODEL.tfm",
                     "Reads the file as untrusted input (header size, strict JSON, F32/F16/BF16, offsets inside the\n"
                     "data and not overlapping, every tensor present with the shape the config in __metadata__\n"
                     "needs and no unknown tensor) and writes a weights-only checkpoint. On any error nothing is\n"
                     "written to --out.\n"
                     "DIR: a Hugging Face model folder (config.json, model.safetensors and the tokenizer files) of\n"
                     "a GPT-2 (model_type gpt2: vocab.json + merges.txt or encoder.json + vocab.bpe) or a MarianMT\n"
                     "translator (model_type marian, OPUS-MT: source.spm, target.spm, vocab.json), checked the same\n"
                     "way; then `tfm generate` / `tfm translate` run it (docs/INTEROP.md).",
                     flags, (int)(sizeof flags / sizeof flags[0]), 1, 1};
    const char *pos[1];
    int n_pos, rc = cli_parse(&spec, argc, argv, pos, &n_pos);
    if (rc) return rc == 1 ? 0 : rc;
    if (!out) return cli_error("import", "--out is required (the tfm checkpoint to write)");
    tfm_file_use files[] = {{"MODEL.safetensors", pos[0], TFM_FILE_IN}, {"--out", out, TFM_FILE_OUT}};
    if ((rc = cli_check_files("import", files, 2))) return rc;
    cli_clean_stale("import", out);
    struct stat st;
    int dir = stat(pos[0], &st) == 0 && S_ISDIR(st.st_mode);
    if (dir ? tfm_import_hf(pos[0], out) : tfm_import_safetensors(pos[0], out))
        return cli_fail("import", "%s", tfm_last_error());
    return 0;
}
