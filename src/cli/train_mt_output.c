/* train-mt's output besides the checkpoint: --dump-data files, --d2l-examples, progress lines. */
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/train_mt.h"
#include "tfm/translator.h"
#include "cli/train_run.h"
#include "tfm/decode.h"
#include "tfm/eval.h"

#define C "train-mt"

typedef struct {
    const tfm_toklist *l;
    int n;
} tok_lines;

static int write_tokens(FILE *f, const void *ctx) {   /* one sentence a line, tokens separated by spaces */
    const tok_lines *t = ctx;
    for (int i = 0; i < t->n; i++) {
        for (int k = 0; k < t->l[i].n; k++) fprintf(f, k ? " %s" : "%s", t->l[i].tok[k]);
        fputc('\n', f);
    }
    return !ferror(f);
}

static int write_line(FILE *f, const void *s) { return fputs(s, f) >= 0 && fputc('\n', f) != EOF; }

static const char *const DUMP_SFX[] = {"train.src", "train.tgt", "valid.src", "valid.tgt", "src.vocab", "tgt.vocab"};

int mt_dump(const char *prefix, const tfm_parallel_text *train, const tfm_parallel_text *valid, const tfm_mt_model *t) {
    char path[4200];
    int rc = 0;
    for (int i = 0; i < 6 && !rc; i++) {   /* each file written atomically (tfm_save_atomic) */
        const tfm_parallel_text *p = i < 2 ? train : valid;
        if (i < 4 && !p) continue;
        snprintf(path, sizeof path, "%s.%s", prefix, DUMP_SFX[i]);
        if (i < 4) {
            tok_lines tl = {i % 2 ? p->tgt : p->src, p->n};
            rc = tfm_save_atomic(path, write_tokens, &tl);
        } else {
            char *v = tfm_vocab_serialize(i == 4 ? &t->src_vocab : &t->tgt_vocab);
            rc = v ? tfm_save_atomic(path, write_line, v) : (tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory"), -1);
            free(v);
        }
    }
    return rc ? cli_fail(C, "--dump-data: %s", tfm_last_error()) : 0;
}

void mt_best_path(const char *out, char *buf, size_t n) {
    size_t k = strlen(out);
    k = k > 4 && !strcmp(out + k - 4, ".tfm") ? k - 4 : k;
    snprintf(buf, n, "%.*s.best.tfm", (int)k, out);
}

int mt_check_files(const mt_opts *o) {
    char best[4200], dump[6][4200];
    mt_best_path(o->out, best, sizeof best);
    tfm_file_use f[16] = {
        {"--tsv", o->tsv, TFM_FILE_IN}, {"--src", o->src, TFM_FILE_IN}, {"--tgt", o->tgt, TFM_FILE_IN},
        {"--valid-src", o->valid_src, TFM_FILE_IN}, {"--valid-tgt", o->valid_tgt, TFM_FILE_IN},
        {"--bpe-model", o->bpe_model, TFM_FILE_IN}, {"--resume", o->resume, TFM_FILE_IN_PLACE},
        {"--out", o->out, TFM_FILE_OUT}, {"--keep-best", o->keep_best ? best : NULL, TFM_FILE_OUT},
        {"--log-file", o->log_file, TFM_FILE_OUT_STREAM}};
    int n = 10;
    for (int i = 0; o->dump && i < 6; i++) {
        if ((i == 2 || i == 3) && !o->valid_src) continue;
        snprintf(dump[i], sizeof dump[i], "%s.%s", o->dump, DUMP_SFX[i]);
        f[n++] = (tfm_file_use){"--dump-data", dump[i], TFM_FILE_OUT};
    }
    return cli_check_files(C, f, n);
}

void mt_print_start(mt_opts *o, const tfm_parallel_text *p, const tfm_nmt_arrays *a, const tfm_mt_model *tr,
                    const tfm_mt_train_opts *to, const tfm_mt_progress *prog) {
    fprintf(stderr, "%s: %d pairs (%d lines read), vocab %d src / %d tgt, %zu parameters (%s), %s, gemm %s\n",
            o->tsv ? o->tsv : o->src, a->n, p->n_lines, tr->src_vocab.n, tr->tgt_vocab.n, tr->model->params.total,
            tr->model->cfg.arch, cli_threads_str(o->threads_line, 96, to->ctl.parallel, a->n),
            cli_gemm_str(o->gemm_line, 96, to->ctl.bf16));
    if (o->resume)   /* epochs as the progress lines count them: the one the next step belongs to */
        fprintf(stderr, "resuming %s at step %d (epoch %d, %s)\n", o->resume, prog->step, prog->epoch + 1,
                prog->batch > 0 ? "inside it" : "from its start");
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
    ((mt_run *)user)->saved_step = p->step;
    return x->keep_last > 0 ? tfm_ckpt_keep_step(x->out, p->step, x->keep_last) : 0;
}
