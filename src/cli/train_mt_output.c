/* train-mt's output besides the checkpoint: --dump-data files, --d2l-examples, progress lines. */
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/train_mt.h"
#include "tfm/translator.h"
#include "tfm/decode.h"
#include "tfm/eval.h"

#define C "train-mt"

static int dump_tokens(const char *path, const tfm_toklist *l, int n) {
    FILE *f = fopen(path, "w");
    if (!f) return cli_error(C, "cannot write %s", path), CLI_EXIT_IO;
    for (int i = 0; i < n; i++) {
        for (int k = 0; k < l[i].n; k++) fprintf(f, k ? " %s" : "%s", l[i].tok[k]);
        fputc('\n', f);
    }
    return fclose(f) ? (cli_error(C, "cannot write %s", path), CLI_EXIT_IO) : 0;
}

static int dump_vocab(const char *prefix, const char *side, const tfm_vocab *v) {
    char path[4096];
    snprintf(path, sizeof path, "%s.%s.vocab", prefix, side);
    FILE *f = fopen(path, "w");
    if (!f) return cli_error(C, "cannot write %s", path), CLI_EXIT_IO;
    char *s = tfm_vocab_serialize(v);
    fprintf(f, "%s\n", s ? s : "");
    free(s);
    return fclose(f) ? (cli_error(C, "cannot write %s", path), CLI_EXIT_IO) : 0;
}

int mt_dump(const char *prefix, const tfm_parallel_text *train, const tfm_parallel_text *valid, const tfm_mt_model *t) {
    char path[4096];
    const char *sfx[] = {"train.src", "train.tgt", "valid.src", "valid.tgt"};
    int rc = 0;
    for (int i = 0; i < 4 && !rc; i++) {
        const tfm_parallel_text *p = i < 2 ? train : valid;
        if (!p) break;
        snprintf(path, sizeof path, "%s.%s", prefix, sfx[i]);
        rc = dump_tokens(path, i % 2 ? p->tgt : p->src, p->n);
    }
    if (!rc) rc = dump_vocab(prefix, "src", &t->src_vocab);
    if (!rc) rc = dump_vocab(prefix, "tgt", &t->tgt_vocab);
    return rc;
}

void mt_d2l_examples(tfm_mt_model *t) {
    static const char *eng[] = {"go .", "i lost .", "he's calm .", "i'm home ."};
    static const char *fra[] = {"va !", "j'ai perdu .", "il est calme .", "je suis chez moi ."};
    tfm_translation r[4];
    tfm_translate_options o;
    tfm_translate_options_default(&o);
    o.beam_size = 1, o.length_penalty = 0, o.max_decoding_length = 10, o.max_input_length = 10;
    tfm_translator_params p;
    tfm_translator_params_default(&p);
    p.threads = tfm_get_threads();
    tfm_translator *tr = tfm_translator_view(t, &p);
    if (tr && tfm_translator_translate_batch(tr, eng, 4, &o, r) == 0)
        for (int i = 0; i < 4; i++) {
            printf("%s => %s, bleu %.3f\n", eng[i], r[i].hypotheses[0], tfm_bleu_d2l(r[i].hypotheses[0], fra[i], 2));
            tfm_translation_free(&r[i]);
        }
    fflush(stdout);
    tfm_translator_free(tr);
}

void mt_report(const tfm_mt_report *r, void *user) {
    int tty = *(const int *)user;
    char eta[32];
    cli_format_eta(r->eta_s, eta, sizeof eta);
    if (r->end_of_epoch) {
        fprintf(stderr, "%sepoch %d/%d  step %d/%d  loss %.4f", tty ? "\r\033[K" : "", r->epoch, r->epochs, r->step,
                r->total_steps, r->loss);
        if (r->valid_loss >= 0) fprintf(stderr, "  valid loss %.4f", r->valid_loss);
        fprintf(stderr, "  lr %.2e  %.0f tok/s  ETA %s\n", r->lr, r->tokens_per_s, eta);
    } else {
        fprintf(stderr, "%sepoch %d/%d  step %d/%d  loss %.4f  lr %.2e  %.0f tok/s  ETA %s%s", tty ? "\r\033[K" : "",
                r->epoch, r->epochs, r->step, r->total_steps, r->loss, r->lr, r->tokens_per_s, eta, tty ? "" : "\n");
    }
    fflush(stderr);
}

int mt_save(const tfm_mt_progress *p, void *user) {   /* after every epoch, every --save-every steps, at a stop */
    const mt_run *x = user;
    if (tfm_mt_save_run(x->out, x->tr, x->opt, p, x->to, x->run)) return -1;
    return x->keep_last > 0 ? tfm_ckpt_keep_step(x->out, p->step, x->keep_last) : 0;
}
