/* The RNN translators against their PyTorch twins (scripts/make_rnn_fixture.py): GRU seq2seq
 * (rnn_small.tfm) and the Bahdanau decoder (bahdanau_small.tfm), on a padded batch with different
 * source and target valid lengths: logits (max |diff| <= 1e-5), masked cross-entropy loss, and every
 * parameter gradient (||diff|| / ||ref|| <= 1e-4). Also: incremental decoding (one step at a time
 * through malloc'd state, with a row reorder) equals the teacher-forced logits, and the Bahdanau
 * attention maps. */
#include "check.h"
#include "tfm/decode.h"
#include "models/rnn_impl.h"
#include "tfm/train.h"
#include <stdlib.h>

#ifndef FIXTURE_DIR
#define FIXTURE_DIR "tests/fixtures"
#endif

static const float *f32(const tfm_container *c, const char *name, size_t n) {
    tfm_entry *e = tfm_container_get(c, name);
    if (!e || e->dtype != TFM_DT_F32 || e->nbytes != n * sizeof(float)) {
        printf("FAIL fixture entry %s missing or wrong size\n", name);
        exit(1);
    }
    return e->data;
}
static const int *i32(const tfm_container *c, const char *name) {
    tfm_entry *e = tfm_container_get(c, name);
    if (!e || e->dtype != TFM_DT_I32) {
        printf("FAIL fixture entry %s missing\n", name);
        exit(1);
    }
    return e->data;
}

static void parity(const char *file) {
    char path[512], nm[300];
    snprintf(path, sizeof path, "%s/%s", FIXTURE_DIR, file);
    tfm_container c;
    if (tfm_container_load(&c, path)) {
        printf("FAIL %s: %s\n", file, tfm_last_error());
        exit(1);
    }
    const char *arch = tfm_container_str(&c, "meta.arch");
    tfm_mt_config cfg;
    tfm_mt_config_default(&cfg);
    snprintf(cfg.arch, sizeof cfg.arch, "%s", arch);
    tfm_container_int(&c, "config.src_vocab", &cfg.src_vocab);
    tfm_container_int(&c, "config.tgt_vocab", &cfg.tgt_vocab);
    tfm_container_int(&c, "config.embed_size", &cfg.embed_size);
    tfm_container_int(&c, "config.hidden_size", &cfg.hidden_size);
    tfm_container_int(&c, "config.n_layer", &cfg.n_layer);
    cfg.dropout = 0;
    /* direct constructor calls: seq2seq.c refers to them weakly, so name them to link them in */
    tfm_mt_net *m = !strcmp(arch, "rnn") ? tfm_mt_rnn_create(&cfg) : tfm_mt_bahdanau_create(&cfg);
    if (!m) {
        printf("FAIL %s: create: %s\n", arch, tfm_last_error());
        exit(1);
    }
    int copied = 1;
    for (int i = 0; i < m->params.n; i++) {
        tfm_tensor *t = m->params.t[i];
        tfm_entry *e = tfm_container_get(&c, t->name);
        if (!e || e->nbytes != t->size * sizeof(float)) { copied = 0; printf("# missing %s\n", t->name); continue; }
        memcpy(t->data, e->data, e->nbytes);
    }
    snprintf(nm, sizeof nm, "%s parity: every parameter in the fixture", arch);
    CHECK(nm, copied, "some parameters missing or with the wrong size");
    tfm_entry *se = tfm_container_get(&c, "src"), *te = tfm_container_get(&c, "tgt");
    int B = se->shape[0], Ts = se->shape[1], Tt = te->shape[1], V = cfg.tgt_vocab;
    const int *src = i32(&c, "src"), *sv = i32(&c, "src_valid"), *tgt = i32(&c, "tgt"), *dec_in = i32(&c, "dec_in");
    tfm_graph g;
    tfm_graph_init(&g, 1);
    g.training = 0;
    tfm_params_zero_grad(&m->params);
    tfm_tensor *logits = tfm_mt_net_forward(m, &g, src, sv, B, Ts, dec_in, Tt);
    tfm_tensor *loss = tfm_cross_entropy(&g, logits, tgt, TFM_PAD, 0.0f);
    tfm_backward(&g, loss);
    const float *ref = f32(&c, "logits", (size_t)B * Tt * V);
    double dl = max_abs_diff(logits->data, ref, logits->size);
    snprintf(nm, sizeof nm, "%s parity: logits", arch);
    CHECK(nm, logits->size == (size_t)B * Tt * V && dl <= 1e-5, "max |diff| %.3g", dl);
    float rl = f32(&c, "loss", 1)[0];
    snprintf(nm, sizeof nm, "%s parity: loss", arch);
    CHECK(nm, fabsf(loss->data[0] - rl) <= 1e-5f, "%.7f vs %.7f", loss->data[0], rl);
    double worst = 0;
    const char *wn = "";
    for (int i = 0; i < m->params.n; i++) {
        tfm_tensor *t = m->params.t[i];
        snprintf(nm, sizeof nm, "grad.%s", t->name);
        double r = rel_err(t->grad, f32(&c, nm, t->size), t->size);
        if (r > worst) { worst = r; wn = t->name; }
    }
    printf("%s: max |dlogits| %.2e, |dloss| %.2e, worst grad rel %.2e (%s)\n", arch, dl, fabs(loss->data[0] - rl), worst, wn);
    snprintf(nm, sizeof nm, "%s parity: every gradient", arch);
    CHECK(nm, worst <= 1e-4, "worst %.3g at %s", worst, wn);

    /* Bahdanau attention maps from the teacher-forced pass */
    m->keep_attention = 1;
    tfm_attn_map maps[4];
    int nmaps = m->vt->attention(m, 1, maps, 4);
    if (!strcmp(arch, "bahdanau")) {
        int ok = nmaps == 1 && maps[0].kind == TFM_MAP_ENC_DEC && maps[0].Tq == Tt && maps[0].Tk == Ts;
        for (int q = 0; ok && q < Tt; q++) {
            double s = 0;
            for (int k = 0; k < Ts; k++) s += maps[0].w[q * Ts + k];
            if (fabs(s - 1) > 1e-5 || maps[0].w[q * Ts + sv[1]] != 0.0f) ok = 0;
        }
        CHECK("bahdanau attention map: rows sum to 1, padding gets zero weight", ok, "bad map (n %d)", nmaps);
    } else {
        CHECK("rnn attention: no maps", nmaps == 0, "%d maps", nmaps);
    }

    /* incremental decoding = teacher forcing, with a reorder after step 2 (rows 2,0) */
    float *tf = malloc(sizeof(float) * logits->size);
    memcpy(tf, logits->data, sizeof(float) * logits->size);
    tfm_graph_reset(&g);
    g.grad_enabled = 0;
    tfm_tensor *enc = m->vt->encode(m, &g, src, sv, B, Ts);
    void *st = m->vt->init_state(m, &g, enc, sv, B, Ts, Tt, B);
    int rows[3] = {0, 1, 2}, nrows = B;
    double inc = 0;
    for (int t = 0; t < Tt; t++) {
        if (t == 2) {
            int idx[2] = {2, 0};
            m->vt->reorder(m, st, idx, 2);
            rows[0] = 2, rows[1] = 0, nrows = 2;
        }
        tfm_graph_reset(&g);
        int in[3];
        for (int i = 0; i < nrows; i++) in[i] = dec_in[rows[i] * Tt + t];
        tfm_tensor *lg = m->vt->decode(m, &g, st, in, nrows, 1);
        for (int i = 0; i < nrows; i++) {
            double d = max_abs_diff(lg->data + (size_t)i * V, tf + ((size_t)rows[i] * Tt + t) * V, V);
            if (d > inc) inc = d;
        }
    }
    m->vt->free_state(m, st);
    snprintf(nm, sizeof nm, "%s incremental decoding (with reorder) = teacher forcing", arch);
    CHECK(nm, inc <= 1e-5, "max |diff| %.3g", inc);
    free(tf);
    tfm_graph_free(&g);
    tfm_mt_net_free(m);
    tfm_container_free(&c);
}

int main(void) {
    tfm_set_threads(1);
    parity("rnn_small.tfm");
    parity("bahdanau_small.tfm");
    CHECK_EXIT();
}
