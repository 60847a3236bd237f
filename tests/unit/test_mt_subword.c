/* Issue 10 model options: tied embeddings (the gradient of the one shared matrix is the sum of the three
 * untied gradients when they start equal; finite differences on the tied loss), --init xavier, and
 * translators on raw text with a joint BPE model (checkpoint round trip, detokenized translations). */
#include <stdlib.h>
#include <unistd.h>

#include "check.h"
#include "tfm/decode.h"
#include "tfm/translator.h"
#include "tfm/train.h"

enum { V = 300, D = 8 };

static tfm_mt_config tiny(int share) {
    tfm_mt_config c;
    tfm_mt_config_default(&c);
    c.src_vocab = c.tgt_vocab = V;
    c.d_model = D;
    c.n_head = 2;
    c.ffn = 16;
    c.n_layer = 1;
    c.max_len = 16;
    c.dropout = 0.0f;
    c.share_embeddings = share;
    return c;
}

/* batch of 2: sources (5, 3 tokens), targets (4, 2 tokens) */
static const int src[2 * 5] = {11, 42, 7, 250, 2, 5, 99, 2, 0, 0}, valid[2] = {5, 3};
static const int tgt[2 * 4] = {17, 42, 180, 2, 9, 2, 0, 0};

static float loss_grad(tfm_mt_net *m, tfm_graph *g) {
    int tin[8];
    tfm_mt_shift_right(tgt, 2, 4, tin);
    tfm_graph_reset(g);
    g->grad_enabled = 1;
    tfm_params_zero_grad(&m->params);
    tfm_tensor *loss = tfm_mt_net_loss(m, g, src, valid, 2, 5, tin, tgt, 4, 0.1f);
    tfm_backward(g, loss);
    return loss->data[0];
}

static void test_shared_gradient(void) {
    tfm_mt_config cu = tiny(0), ct = tiny(1);
    tfm_mt_net *u = tfm_mt_net_create(&cu), *t = tfm_mt_net_create(&ct);
    u->vt->init_weights(u, 3);
    tfm_tensor *ee = tfm_params_find(&u->params, "encoder.embedding.weight");
    tfm_tensor *de = tfm_params_find(&u->params, "decoder.embedding.weight");
    tfm_tensor *dw = tfm_params_find(&u->params, "decoder.dense.weight");
    tfm_tensor *se = tfm_params_find(&t->params, "shared.embedding.weight");
    CHECK("share: one matrix less", t->params.n == u->params.n - 2 && se && !tfm_params_find(&t->params,
          "decoder.embedding.weight"), "%d vs %d tensors", t->params.n, u->params.n);
    for (size_t i = 0; i < ee->size; i++) ee->data[i] *= 0.05f;   /* small, like a trained embedding */
    memcpy(de->data, ee->data, sizeof(float) * ee->size);
    memcpy(dw->data, ee->data, sizeof(float) * ee->size);
    for (int i = 0; i < t->params.n; i++) {   /* every other tensor: the same name in both */
        tfm_tensor *a = t->params.t[i], *b = a == se ? ee : tfm_params_find(&u->params, a->name);
        memcpy(a->data, b->data, sizeof(float) * a->size);
    }
    tfm_graph g;
    tfm_graph_init(&g, 1);
    float lu = loss_grad(u, &g), lt = loss_grad(t, &g);
    CHECK("share: same loss", fabsf(lu - lt) < 1e-6f, "%g vs %g", lu, lt);
    float *sum = malloc(sizeof(float) * ee->size);
    for (size_t i = 0; i < ee->size; i++) sum[i] = ee->grad[i] + de->grad[i] + dw->grad[i];
    double e = rel_err(se->grad, sum, ee->size);
    CHECK("share: grad = sum of the three untied grads", e < 1e-5, "rel err %g", e);
    /* central differences on a few entries of the shared matrix (ids used by both sides) */
    double worst = 0;
    int probe[] = {42 * D + 1, 2 * D + 3, 180 * D + 5, 11 * D};
    for (int k = 0; k < 4; k++) {
        float *w = &se->data[probe[k]], w0 = *w, h = 1e-2f;
        *w = w0 + h;
        float lp = loss_grad(t, &g);
        *w = w0 - h;
        float lm = loss_grad(t, &g);
        *w = w0;
        loss_grad(t, &g);
        double fd = (lp - lm) / (2.0 * h), an = se->grad[probe[k]];
        double d = fabs(fd - an) / fmax(1e-3, fabs(fd) + fabs(an));
        if (d > worst) worst = d;
    }
    CHECK("share: finite differences", worst < 2e-2, "worst relative difference %g", worst);
    free(sum);
    tfm_graph_free(&g);
    tfm_mt_net_free(u);
    tfm_mt_net_free(t);
    tfm_mt_config bad = tiny(1);
    bad.tgt_vocab = V + 1;
    CHECK("share: refused without a joint vocabulary", !tfm_mt_net_create(&bad) &&
          strstr(tfm_last_error(), "share_embeddings"), "%s", tfm_last_error());
}

static void test_init_xavier(void) {
    tfm_mt_config c = tiny(0);
    tfm_mt_net *a = tfm_mt_net_create(&c);
    c.init = TFM_INIT_XAVIER;
    tfm_mt_net *b = tfm_mt_net_create(&c);
    a->vt->init_weights(a, 5);
    b->vt->init_weights(b, 5);
    tfm_tensor *ea = tfm_params_find(&a->params, "encoder.embedding.weight");
    tfm_tensor *eb = tfm_params_find(&b->params, "encoder.embedding.weight");
    float bound = sqrtf(6.0f / (V + D)), mx = 0, mxa = 0;
    for (size_t i = 0; i < eb->size; i++) mx = fmaxf(mx, fabsf(eb->data[i])), mxa = fmaxf(mxa, fabsf(ea->data[i]));
    CHECK("init xavier: embeddings within the Xavier bound", mx <= bound && mx > 0.9f * bound, "max %g bound %g", mx,
          bound);
    CHECK("init d2l: embeddings N(0,1)", mxa > 2.0f, "max %g", mxa);
    tfm_mt_net_free(a);
    tfm_mt_net_free(b);
}

static void test_bpe_translator(void) {
    const char *lines[] = {"ein Mann fährt Fahrrad.", "a man rides a bike.", "zwei Hunde spielen im Schnee.",
                           "two dogs play in the snow.", "eine Frau liest ein Buch.", "a woman reads a book."};
    tfm_bpe *b = calloc(1, sizeof *b);
    tfm_bpe_learn_opts lo;
    tfm_bpe_learn_opts_default(&lo);
    lo.vocab_size = 300;
    CHECK("bpe translator: learn", tfm_bpe_learn_lines(b, lines, 6, &lo) == 0, "%s", tfm_last_error());
    tfm_mt_config c = tiny(1);
    tfm_mt_model t;
    CHECK("bpe translator: build", tfm_mt_model_build_bpe(&t, b, &c, 1) == 0, "%s", tfm_last_error());
    CHECK("bpe translator: vocab = pieces", t.src_vocab.n == b->n && t.tgt_vocab.n == b->n &&
          !strcmp(t.src_vocab.tok[1], "<bos>") && !strcmp(t.tgt_vocab.tok[300 - 1], b->piece[300 - 1]), "n %d", b->n);
    char path[] = "/tmp/tfm_mt_subword_XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    tfm_container ct;
    tfm_container_init(&ct);
    tfm_mt_model_put(&ct, &t);
    CHECK("bpe translator: save", tfm_container_save(&ct, path) == 0, "%s", tfm_last_error());
    tfm_container_free(&ct);
    tfm_mt_model r;
    CHECK("bpe translator: load", tfm_mt_model_load(&r, path) == 0, "%s", tfm_last_error());
    CHECK("bpe translator: tokenizer restored", r.bpe && r.tok_kind == TFM_TOK_BPE && r.bpe->n == b->n &&
          r.model->cfg.share_embeddings == 1, "bpe %p", (void *)r.bpe);
    const char *in[] = {"ein Hund fährt.", "Zebra \xc3\xa9!"};
    tfm_translation h[2];
    tfm_translate_options o;
    tfm_translate_options_default(&o);
    o.max_decoding_length = 12, o.max_input_length = 16;
    tfm_translator *dec = tfm_translator_view(&r, NULL);
    int rc = dec ? tfm_translator_translate_batch(dec, in, 2, &o, h) : -1;
    CHECK("bpe translator: translate raw lines", rc == 0 && tfm_utf8_valid(h[0].hypotheses[0], strlen(h[0].hypotheses[0])) &&
          !strstr(h[0].hypotheses[0], "\xe2\x96\x81") && !strstr(h[1].hypotheses[0], "<unk>"), "rc %d", rc);
    if (!rc) tfm_translation_free(&h[0]), tfm_translation_free(&h[1]);
    tfm_translator_free(dec);
    tfm_mt_model_free(&r);
    tfm_mt_model_free(&t);
    unlink(path);
}

/* keep-best / patience: improvements strictly above the best, ties and NaN count as no improvement */
static void test_early_stop(void) {
    tfm_early_stop e;
    tfm_early_stop_init(&e, 2);
    float score[] = {1.0f, 3.0f, 3.0f, 2.5f, 4.0f, NAN, 4.0f};
    int want[] = {TFM_VALID_IMPROVED, TFM_VALID_IMPROVED, 0, TFM_VALID_STOP, TFM_VALID_IMPROVED, 0, TFM_VALID_STOP};
    int ok = 1, got[7];
    for (int i = 0; i < 7; i++) ok &= (got[i] = tfm_early_stop_update(&e, score[i], 100 * (i + 1))) == want[i];
    CHECK("early stop: improve / tie / patience 2", ok && e.best == 4.0f && e.best_step == 500, "got %d %d %d %d %d %d %d",
          got[0], got[1], got[2], got[3], got[4], got[5], got[6]);
    tfm_early_stop_init(&e, 0);
    ok = tfm_early_stop_update(&e, 0.0f, 1) == TFM_VALID_IMPROVED;   /* the first validation is the best so far */
    for (int i = 0; i < 50; i++) ok &= tfm_early_stop_update(&e, -1.0f, i + 2) == 0;
    CHECK("early stop: patience 0 never stops", ok && e.n_bad == 50, "n_bad %d", e.n_bad);
}

int main(void) {
    test_early_stop();
    test_shared_gradient();
    test_init_xavier();
    test_bpe_translator();
    return check_failures ? 1 : 0;
}
