/* tfm_mt_config.pad_len (train-mt --pad-to-max-len): every batch padded to a fixed length, as d2l pads to
 * num_steps.
 *  - rnn / bahdanau: the GRU encoder runs over the padding, so without pad_len a sentence's translation
 *    depends on the longest sentence of its batch; with pad_len it does not (batch of 2 = each alone).
 *  - transformer: the padding is masked, so pad_len changes nothing but the cost (loss and translations
 *    equal to float tolerance).
 *  - the d2l loss normalisation divides by the batch's target length: pad_len makes it num_steps.
 *  - config.pad_len round-trips through a checkpoint and is range-checked. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tfm/decode.h"
#include "tfm/train.h"

#define S 8   /* num_steps */

static tfm_mt_net *make(const char *arch, int pad_len) {
    tfm_mt_config c;
    tfm_mt_config_default(&c);
    snprintf(c.arch, sizeof c.arch, "%s", arch);
    c.src_vocab = c.tgt_vocab = 12;
    c.d_model = 16, c.n_head = 2, c.ffn = 24, c.n_layer = 2, c.max_len = 32;
    c.embed_size = 8, c.hidden_size = 16, c.dropout = 0;
    c.pad_len = pad_len;
    tfm_mt_net *m = tfm_mt_net_create(&c);
    if (!m) {
        printf("FAIL create %s: %s\n", arch, tfm_last_error());
        exit(1);
    }
    m->vt->init_weights(m, 7);
    return m;
}

/* greedy translation of sentence `which` of {short, long}, either alone or batched with the other */
static void translate(tfm_mt_net *m, int which, int batched, int *out, int *len) {
    static const int ids[] = {5, 6, 7, 8, 9, 10, 11, 4};   /* short: ids[0..2), long: ids[2..8) */
    int off[3] = {0, 2, 8}, sent_off[2], one[8];
    tfm_graph g;
    tfm_graph_init(&g, 0);
    tfm_search_opts o = {.beam = 1, .alpha = 0.0f, .max_len = 6};
    int *o_ids[2] = {0}, o_len[2] = {0};
    int rc;
    if (batched) {
        rc = tfm_search_ids(m, &g, ids, off, 2, S, 2, &o, o_ids, o_len);
    } else {
        int n = off[which + 1] - off[which];
        memcpy(one, ids + off[which], sizeof(int) * (size_t)n);
        sent_off[0] = 0, sent_off[1] = n;
        rc = tfm_search_ids(m, &g, one, sent_off, 1, S, 1, &o, o_ids + which, o_len + which);
    }
    *len = rc ? -1 : o_len[which];
    if (!rc) memcpy(out, o_ids[which], sizeof(int) * (size_t)o_len[which]);
    free(o_ids[0]);
    free(o_ids[1]);
    tfm_graph_free(&g);
}

/* the greedy output ids of the short sentence alone and batched with the long one are the same */
static int batch_independent(tfm_mt_net *m) {
    int a[8], b[8], la, lb;
    translate(m, 0, 0, a, &la);
    translate(m, 0, 1, b, &lb);
    return la >= 0 && la == lb && !memcmp(a, b, sizeof(int) * (size_t)la);
}

/* encoder output of the short sentence padded to its own length vs to S (RNN: the final state moves) */
static float rnn_state_change(tfm_mt_net *m) {
    int src[S] = {5, 6, TFM_EOS}, valid = 3;
    for (int t = 3; t < S; t++) src[t] = TFM_PAD;
    tfm_graph g;
    tfm_graph_init(&g, 0);
    g.grad_enabled = 0;
    tfm_tensor *e3 = m->vt->encode(m, &g, src, &valid, 1, 3);
    tfm_tensor *e8 = m->vt->encode(m, &g, src, &valid, 1, S);
    /* layout (Ts + L, B, H): the last L rows are the final hidden states */
    int H = m->cfg.hidden_size, L = m->cfg.n_layer;
    float d = max_abs_diff(e3->data + (size_t)3 * H, e8->data + (size_t)S * H, (size_t)L * H);
    tfm_graph_free(&g);
    return d;
}

/* 3 pairs: the d2l-normalised training loss with and without pad_len (one forward, same weights) */
static void arrays(tfm_mt_corpus *a) {
    static int src[3 * S], tgt[3 * S], sv[3] = {3, 5, 2}, tv[3] = {4, 2, 3};
    for (int i = 0; i < 3; i++)
        for (int t = 0; t < S; t++) {
            src[i * S + t] = t < sv[i] - 1 ? 5 + (i + t) % 7 : t == sv[i] - 1 ? TFM_EOS : TFM_PAD;
            tgt[i * S + t] = t < tv[i] - 1 ? 4 + (2 * i + t) % 8 : t == tv[i] - 1 ? TFM_EOS : TFM_PAD;
        }
    memset(a, 0, sizeof *a);
    a->n = 3, a->num_steps = S, a->src = src, a->tgt = tgt, a->src_valid = sv, a->tgt_valid = tv;
}

static void check_transformer(void) {
    tfm_mt_net *m0 = make("transformer", 0), *m8 = make("transformer", S);
    CHECK("pad_len transformer: same weights", max_abs_diff(m0->params.t[0]->data, m8->params.t[0]->data,
                                                            (size_t)m0->params.t[0]->size) == 0, "init differs");
    tfm_mt_corpus a;
    arrays(&a);
    tfm_graph g;
    tfm_graph_init(&g, 0);
    float l0 = tfm_mt_eval_loss(m0, &g, &a, 3), l8 = tfm_mt_eval_loss(m8, &g, &a, 3);
    CHECK("pad_len transformer: loss unchanged (padding is masked)", fabsf(l0 - l8) <= 1e-5f * fabsf(l0),
          "%.7f vs %.7f", l0, l8);
    tfm_graph_free(&g);
    int a0[8], a8[8], n0, n8;
    translate(m0, 0, 1, a0, &n0);
    translate(m8, 0, 1, a8, &n8);
    CHECK("pad_len transformer: same translation", n0 >= 0 && n0 == n8 && !memcmp(a0, a8, sizeof(int) * (size_t)n0),
          "lengths %d, %d", n0, n8);
    tfm_mt_net_free(m0);
    tfm_mt_net_free(m8);
}

static void check_rnn(const char *arch) {
    char name[96];
    tfm_mt_net *m0 = make(arch, 0), *m8 = make(arch, S);
    float d = rnn_state_change(m0);
    snprintf(name, sizeof name, "pad_len %s: the encoder's final state depends on the padding", arch);
    CHECK(name, d > 1e-4f, "max diff %g", d);
    snprintf(name, sizeof name, "pad_len %s: translation independent of the batch", arch);
    CHECK(name, batch_independent(m8), "short sentence alone != batched with a long one");
    /* d2l loss normalisation: the same weights, one training step's loss, Tt = S with pad_len */
    tfm_graph g;
    tfm_graph_init(&g, 0);
    tfm_mt_corpus a;
    arrays(&a);
    float l0 = tfm_mt_eval_loss(m0, &g, &a, 3), l8 = tfm_mt_eval_loss(m8, &g, &a, 3);
    snprintf(name, sizeof name, "pad_len %s: loss over the padding is another number, finite", arch);
    CHECK(name, isfinite(l0) && isfinite(l8) && l0 != l8, "%g vs %g", l0, l8);
    tfm_graph_free(&g);
    tfm_mt_net_free(m0);
    tfm_mt_net_free(m8);
}

static void check_config(void) {
    tfm_mt_config c;
    tfm_mt_config_default(&c);
    c.src_vocab = c.tgt_vocab = 12;
    c.pad_len = -1;
    CHECK("pad_len: negative refused", tfm_mt_config_check(&c) != 0 && strstr(tfm_last_error(), "pad_len"),
          "accepted");
    c.pad_len = 1 << 21;
    CHECK("pad_len: huge refused", tfm_mt_config_check(&c) != 0, "accepted");
    c.pad_len = 10;
    CHECK("pad_len: 10 accepted", tfm_mt_config_check(&c) == 0, "%s", tfm_last_error());
}

int main(void) {
    check_transformer();
    check_rnn("rnn");
    check_rnn("bahdanau");
    check_config();
    return check_failures ? 1 : 0;
}
