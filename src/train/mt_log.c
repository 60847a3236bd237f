/* train-mt / train-lm --log-file F.jsonl: one JSON object per line, the schema of docs/LOGS.md (read by tfm plot).
 * Non-finite numbers are written as null so every line stays strict JSON; each line is flushed and its write
 * checked. */
#include <math.h>
#include <stdio.h>

#include "tfm/train.h"

static void num(FILE *f, const char *key, double v) {
    if (isfinite(v)) fprintf(f, ", \"%s\": %.6g", key, v);
    else fprintf(f, ", \"%s\": null", key);
}

/* every line ends flushed; a write the system refused (a full disk) shows in ferror */
static int end_line(FILE *f) {
    fputs("}\n", f);
    return fflush(f) || ferror(f) ? -1 : 0;
}

int tfm_mt_log_report(FILE *f, const tfm_mt_report *r) {
    if (!f) return 0;
    fprintf(f, "{\"event\": \"train\", \"step\": %d, \"epoch\": %d", r->step, r->epoch);
    num(f, "loss", r->loss);
    num(f, "lr", r->lr);
    num(f, "tokens_per_s", r->tokens_per_s);
    return end_line(f);
}

int tfm_lm_log_report(FILE *f, const tfm_lm_report *r, float loss) {
    if (!f) return 0;
    fprintf(f, "{\"event\": \"%s\", \"step\": %d", r->eval ? "valid" : "train", r->step);
    if (r->eval) {   /* the evaluated train loss is not "loss" (the training steps' mean): the plot's train line
                        is drawn from the training steps only */
        num(f, "eval_train_loss", r->train_loss);
        num(f, "valid_loss", r->val_loss);
    } else {
        num(f, "loss", loss);
        num(f, "lr", r->lr);
        num(f, "tokens_per_s", r->tokens_per_s);
    }
    return end_line(f);
}

int tfm_mt_log_valid(FILE *f, int step, int epoch, float valid_loss, float valid_bleu, float valid_chrf,
                     float best_bleu, const char *checkpoint) {
    if (!f) return 0;
    fprintf(f, "{\"event\": \"valid\", \"step\": %d, \"epoch\": %d", step, epoch);
    num(f, "valid_loss", valid_loss);
    num(f, "valid_bleu", valid_bleu);
    num(f, "valid_chrf", valid_chrf);
    num(f, "best_bleu", best_bleu);
    if (checkpoint) {   /* a path: JSON-escape quotes, backslashes and control bytes */
        fputs(", \"checkpoint\": \"", f);
        for (const unsigned char *p = (const unsigned char *)checkpoint; *p; p++) {
            if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
            else if (*p < 0x20) fprintf(f, "\\u%04x", *p);
            else fputc(*p, f);
        }
        fputc('"', f);
    }
    return end_line(f);
}
