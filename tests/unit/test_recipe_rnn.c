/* Short versions of the d2l RNN translation recipes (fra-eng, first 600 pairs, num_steps 10, embedding
 * 32, hidden 32, 2 GRU layers, dropout 0.1, Adam lr 0.005, batch 64, gradient clipping 1) for the GRU
 * seq2seq and the Bahdanau decoder, through the generic seq2seq training loop and greedy decoding:
 * the loss falls and at least 2 of the 4 d2l sentences come out exactly.
 * RECIPE_EPOCHS (default 120) epochs instead of d2l's 300 keep each run short. */
#include "check.h"
#include "tfm/eval.h"
#include "tfm/decode.h"
#include "models/rnn_impl.h"
#include "tfm/train.h"
#include <stdlib.h>

#ifndef RECIPE_EPOCHS
#define RECIPE_EPOCHS 120
#endif
#define FRA "../shared/data/fra-eng/fra.txt"

typedef struct { float first, last; } losses;
static void on_report(const tfm_mt_report *r, void *user) {
    losses *l = user;
    if (!r->end_of_epoch) return;
    if (r->epoch == 1) l->first = r->loss;
    l->last = r->loss;
}

static void recipe(const char *arch, const tfm_parallel_text *p) {
    char nm[128];
    tfm_translator tr = {0};
    tr.tok_kind = TFM_TOK_D2L;
    if (tfm_vocab_build(&tr.src_vocab, p->src, p->n, 2) || tfm_vocab_build(&tr.tgt_vocab, p->tgt, p->n, 2)) {
        printf("FAIL %s recipe: vocab: %s\n", arch, tfm_last_error());
        return;
    }
    tfm_parallel_ids ids;
    tfm_nmt_arrays arr;
    if (tfm_parallel_encode(p, &tr.src_vocab, &tr.tgt_vocab, &ids) || tfm_nmt_arrays_build(&ids, 10, &arr)) {
        printf("FAIL %s recipe: arrays: %s\n", arch, tfm_last_error());
        return;
    }
    tfm_s2s_config cfg;
    tfm_s2s_config_default(&cfg);
    snprintf(cfg.arch, sizeof cfg.arch, "%s", arch);
    cfg.src_vocab = tr.src_vocab.n;
    cfg.tgt_vocab = tr.tgt_vocab.n;
    cfg.embed_size = 32;
    cfg.hidden_size = 32;
    cfg.n_layer = 2;
    cfg.dropout = 0.1f;
    tr.model = !strcmp(arch, "rnn") ? tfm_rnn_s2s_create(&cfg) : tfm_bahdanau_create(&cfg);
    if (!tr.model) {
        printf("FAIL %s recipe: create: %s\n", arch, tfm_last_error());
        return;
    }
    tr.model->vt->init_weights(tr.model, 1);
    tfm_mt_train_opts o;
    tfm_mt_train_opts_default(&o);
    o.epochs = RECIPE_EPOCHS;
    o.batch_size = 64;
    o.num_steps = 10;
    o.lr = 0.005f;
    o.grad_clip = 1.0f;
    o.seed = 1;
    o.quiet = 1;
    tfm_adamw opt;
    tfm_adamw_init(&opt, &tr.model->params, o.beta1, o.beta2, o.eps, 0.0f);
    tfm_mt_progress prog;
    tfm_mt_progress_init(&prog, o.seed);
    losses l = {0, 0};
    int rc = tfm_mt_train(tr.model, &arr, NULL, &o, &opt, &prog, on_report, NULL, &l);
    snprintf(nm, sizeof nm, "%s recipe: training runs", arch);
    CHECK(nm, rc == 0, "%s", tfm_last_error());
    snprintf(nm, sizeof nm, "%s recipe: loss falls", arch);
    CHECK(nm, l.last < 0.5f * l.first, "first epoch %.4f, last %.4f", l.first, l.last);
    printf("%s: loss epoch 1 %.4f -> epoch %d %.4f\n", arch, l.first, RECIPE_EPOCHS, l.last);

    static const char *eng[] = {"go .", "i lost .", "he's calm .", "i'm home ."};
    static const char *fra[] = {"va !", "j'ai perdu .", "il est calme .", "je suis chez moi ."};
    char *hyp[4] = {0};
    tfm_graph g;
    tfm_graph_init(&g, 0);
    tfm_decode_opts d = {1, 0.0f, 10};
    int exact = 0;
    if (tfm_translate_lines(&tr, &g, eng, 4, 10, 4, &d, hyp) == 0)
        for (int i = 0; i < 4; i++) {
            printf("%s => %s, bleu %.3f\n", eng[i], hyp[i], tfm_bleu_d2l(hyp[i], fra[i], 2));
            exact += !strcmp(hyp[i], fra[i]);
            free(hyp[i]);
        }
    snprintf(nm, sizeof nm, "%s recipe: >= 2 of 4 d2l sentences exact", arch);
    CHECK(nm, exact >= 2, "%d of 4", exact);
    tfm_graph_free(&g);
    tfm_adamw_free(&opt);
    tfm_nmt_arrays_free(&arr);
    tfm_parallel_ids_free(&ids);
    tfm_translator_free(&tr);
}

int main(void) {
    tfm_set_threads(1);   /* tiny matrices: threading costs more than it gains */
    tfm_parallel_text p;
    if (tfm_parallel_load_tsv(&p, FRA, TFM_TOK_D2L, 600)) {
        printf("FAIL recipe data: %s\n", tfm_last_error());
        return 1;
    }
    recipe("rnn", &p);
    recipe("bahdanau", &p);
    tfm_parallel_text_free(&p);
    CHECK_EXIT();
}
