/* tfm bleu HYP REF [--lowercase] [--metric bleu|chrf]: sacreBLEU-compatible corpus BLEU or chrF2 of two
 * line-aligned files; prints the score line, then sacreBLEU's signature. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "tfm/core.h"
#include "tfm/eval.h"
#include "tfm/text.h"

/* Score line, then the signature line. Returns the exit code. */
static int print_score(int chrf, const char *const *h, const char *const *r, int n, int lowercase) {
    char line[256], sig[128];
    if (chrf) {
        tfm_chrf_result res;
        if (tfm_corpus_chrf(h, r, n, lowercase, &res)) return cli_fail("bleu", "%s", tfm_last_error());
        printf("%s\n%s\n", tfm_chrf_format(&res, line, sizeof line), tfm_chrf_signature(lowercase, 1, sig, sizeof sig));
    } else {
        tfm_bleu_result res;
        if (tfm_corpus_bleu(h, r, n, lowercase, &res)) return cli_fail("bleu", "%s", tfm_last_error());
        printf("%s\n%s\n", tfm_bleu_format(&res, line, sizeof line), tfm_bleu_signature(lowercase, 1, sig, sizeof sig));
    }
    return 0;
}

int cmd_bleu(int argc, char **argv) {
    int lowercase = 0;
    const char *metric = "bleu";
    cli_flag flags[] = {
        {"lowercase", FLAG_BOOL, &lowercase, "case-insensitive: lowercase both sides first (sacrebleu -lc; with chrf: --chrf-lowercase)", 0},
        {"metric", FLAG_STR, &metric, "bleu or chrf (sacreBLEU's chrF2)", 0},
    };
    cli_spec spec = {
        "bleu", "HYP REF [--lowercase] [--metric bleu|chrf]",
        "Corpus BLEU of the hypothesis file HYP against the reference file REF (one sentence a line,\n"
        "aligned, detokenized UTF-8 text), computed like sacreBLEU " TFM_SACREBLEU_VERSION "'s defaults: 13a\n"
        "tokenization, n-grams up to 4, 'exp' smoothing, brevity penalty, case-sensitive unless --lowercase.\n"
        "--metric chrf gives sacreBLEU's chrF2 instead (character 6-grams, beta 2, whitespace removed).\n"
        "Prints the score line, then sacreBLEU's signature (quote both when reporting a result).",
        flags, (int)(sizeof flags / sizeof flags[0]), 2, 2,
    };
    const char *pos[2];
    int n_pos;
    int rc = cli_parse(&spec, argc, argv, pos, &n_pos);
    if (rc) return rc == 1 ? 0 : rc;
    int chrf = !strcmp(metric, "chrf");
    if (!chrf && strcmp(metric, "bleu"))
        return cli_error("bleu", "--metric: unknown metric '%s' (expected bleu or chrf)", metric);
    const char *hyp_path = pos[0], *ref_path = pos[1];
    size_t lh, lr;
    char *bh = tfm_read_text_file(hyp_path, &lh);
    if (!bh) return cli_fail("bleu", "%s", tfm_last_error());
    char *br = tfm_read_text_file(ref_path, &lr);
    if (!br) {
        free(bh);
        return cli_fail("bleu", "%s", tfm_last_error());
    }
    int nh, nr;
    char **h = tfm_split_lines(bh, lh, &nh);
    char **r = tfm_split_lines(br, lr, &nr);
    if (!h || !r) {
        rc = cli_error("bleu", "out of memory"), rc = CLI_EXIT_ERROR;
    } else if (nh != nr) {
        rc = cli_error("bleu", "'%s' has %d lines but '%s' has %d lines (hypotheses and references must be aligned)",
                       hyp_path, nh, ref_path, nr);
        rc = CLI_EXIT_DATA;
    } else {
        rc = print_score(chrf, (const char *const *)h, (const char *const *)r, nh, lowercase);
    }
    free(h);
    free(r);
    free(bh);
    free(br);
    return rc;
}
