/* tfm bleu HYP REF [--lowercase]: sacreBLEU-compatible corpus BLEU of two line-aligned files. */
#include <stdio.h>
#include <stdlib.h>

#include "cli/cli.h"
#include "tfm/core.h"
#include "tfm/eval.h"
#include "tfm/text.h"

int cmd_bleu(int argc, char **argv) {
    int lowercase = 0;
    cli_flag flags[] = {
        {"lowercase", FLAG_BOOL, &lowercase, "case-insensitive BLEU (lowercase both sides first)", 0},
    };
    cli_spec spec = {
        "bleu", "HYP REF [--lowercase]",
        "Corpus BLEU of the hypothesis file HYP against the reference file REF (one sentence a line,\n"
        "aligned, detokenized UTF-8 text), computed like sacreBLEU's defaults: 13a tokenization, n-grams\n"
        "up to 4, 'exp' smoothing, brevity penalty, case-sensitive unless --lowercase.",
        flags, (int)(sizeof flags / sizeof flags[0]), 2, 2,
    };
    const char *pos[2];
    int n_pos;
    int rc = cli_parse(&spec, argc, argv, pos, &n_pos);
    if (rc) return rc == 1 ? 0 : rc;
    const char *hyp_path = pos[0], *ref_path = pos[1];
    size_t lh, lr;
    char *bh = tfm_read_text_file(hyp_path, &lh);
    if (!bh) return cli_error("bleu", "%s", tfm_last_error());
    char *br = tfm_read_text_file(ref_path, &lr);
    if (!br) {
        free(bh);
        return cli_error("bleu", "%s", tfm_last_error());
    }
    int nh, nr;
    char **h = tfm_split_lines(bh, lh, &nh);
    char **r = tfm_split_lines(br, lr, &nr);
    if (!h || !r) {
        rc = cli_error("bleu", "out of memory");
    } else if (nh != nr) {
        rc = cli_error("bleu", "'%s' has %d lines but '%s' has %d lines (hypotheses and references must be aligned)",
                       hyp_path, nh, ref_path, nr);
    } else {
        tfm_bleu_result res;
        if (tfm_corpus_bleu((const char *const *)h, (const char *const *)r, nh, lowercase, &res)) {
            rc = cli_error("bleu", "%s", tfm_last_error());
        } else {
            char line[256];
            printf("%s\n", tfm_bleu_format(&res, line, sizeof line));
            rc = 0;
        }
    }
    free(h);
    free(r);
    free(bh);
    free(br);
    return rc;
}
