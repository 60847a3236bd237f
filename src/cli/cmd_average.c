/* tfm average -o OUT.tfm IN1.tfm IN2.tfm ...: the mean of checkpoints of one model (for inference); with
 * --ensemble, a stored ensemble of translators instead (tfm_ensemble_save). */
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/train_run.h"
#include "tfm/core.h"
#include "tfm/eval.h"
#include "tfm/train.h"
#include "tfm/translator.h"

#define MAX_INPUTS 256

/* Every input is first loaded as the model it says it is, with every check of the loaders (config ranges and
 * cross-checks, parameters, finite weights, tokenizer): a crafted file that translate or generate would refuse is
 * refused here too, not averaged into a new file. */
static int check_model(const char *path) {
    tfm_container c;
    int rc = tfm_container_load_except(&c, path, "adam.");
    const char *kind = rc ? NULL : tfm_container_str(&c, "meta.kind");
    if (kind && !strcmp(kind, "gpt")) {
        tfm_gpt m;
        tfm_char_vocab v;
        if (!(rc = tfm_gpt_get(&m, &v, NULL, NULL, &c, path))) tfm_gpt_free(&m), tfm_char_vocab_free(&v);
    } else if (kind) {
        tfm_mt_model t;
        if (!(rc = tfm_mt_model_get(&t, &c, path))) tfm_mt_model_free(&t);
    } else {
        rc = -1;
    }
    tfm_container_free(&c);
    return rc ? tfm_error_in_data() : 0;
}

int cmd_average(int argc, char **argv) {
    const char *out = NULL;
    int ensemble = 0;
    cli_flag flags[] = {
        {"out", FLAG_STR, &out, "output checkpoint, also -o (required; must not be one of the inputs)", 0},
        {"ensemble", FLAG_BOOL, &ensemble, "translators: instead of averaging the weights, store an ensemble: OUT is "
         "IN1 naming the others (which must sit in OUT's folder), and translate OUT decodes with all of them", 0},
    };
    cli_spec spec = {
        "average", "-o OUT.tfm IN1.tfm IN2.tfm ...",
        "Averages the weights (param.* entries) of two or more checkpoints of the same model: same\n"
        "architecture, config and vocabulary, refused otherwise. Optimizer and training state (adam.*,\n"
        "train.*) are dropped: the result is a model for translate / generate / info, not for --resume.\n"
        "Sums are taken in double precision; OUT is written atomically.",
        flags, (int)(sizeof flags / sizeof flags[0]), 2, MAX_INPUTS,
    };
    /* the flag parser knows long flags only: -o is spelled --out for it */
    char **args = malloc(((size_t)argc + 1) * sizeof *args);
    if (!args) return cli_error("average", "out of memory"), CLI_EXIT_ERROR;
    for (int i = 0; i < argc; i++) args[i] = strcmp(argv[i], "-o") ? argv[i] : "--out";
    const char *pos[MAX_INPUTS];
    int n_pos;
    int rc = cli_parse(&spec, argc, args, pos, &n_pos);
    free(args);
    if (rc) return rc == 1 ? 0 : rc;
    if (!out) return cli_error("average", "-o OUT.tfm is required");
    tfm_file_use files[MAX_INPUTS + 1];
    for (int i = 0; i < n_pos; i++) files[i] = (tfm_file_use){"IN.tfm", pos[i], TFM_FILE_IN};
    files[n_pos] = (tfm_file_use){"-o", out, TFM_FILE_OUT};
    if ((rc = cli_check_files("average", files, n_pos + 1))) return rc;
    cli_clean_stale("average", out);
    if (ensemble) {
        if (tfm_ensemble_save(out, pos, n_pos)) return cli_fail("average", "%s", tfm_last_error());
        printf("wrote %s: an ensemble of %d translators (%s and the %d named beside it)\n", out, n_pos, pos[0], n_pos - 1);
        return 0;
    }
    for (int i = 0; i < n_pos; i++)
        if (check_model(pos[i])) return cli_fail("average", "%s", tfm_last_error());
    if (tfm_checkpoint_average(pos, n_pos, out)) return cli_fail("average", "%s", tfm_last_error());
    printf("wrote %s: mean of %d checkpoints\n", out, n_pos);
    return 0;
}
