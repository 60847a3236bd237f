/* Issue 35's regularisers for train-mt:
 *   BPE-dropout  tfm_bpe_encode_dropout on a real corpus sample (data/fra-eng-demo.tsv): p 0 is exact BPE, p 1 the
 *                initial symbols, the same key the same segmentation, another key another one, decoding gives the
 *                text back, and the segmentations are those of a plain reference of Provilkov et al.'s rule
 *                (skipped merges redrawn at their word's next step); tfm_mt_corpus_bpe_dropout: p 0 = the exact arrays, per epoch, thread count free;
 *   R-Drop       tfm_mt_net_rdrop_loss = (CE1 + CE2) / 2 + alpha * symmetric KL, recomputed here from two passes
 *                with the dropout masks reproduced from the graph's RNG state; alpha 0 = the two passes' CE
 *                gradients averaged; finite differences on the whole loss (the op itself: test_gradcheck.c);
 *   attention / activation dropout  config defaults (attention_dropout -1 = dropout), their effect, the checkpoint
 *                round trip, the range checks. */
#include <stdlib.h>
#include <unistd.h>

#include "check.h"
#include "tfm/train.h"

/* ---------------------------------------------------------------- BPE-dropout */
enum { N_PAIRS = 400 };

static int same_ids(const int *a, int na, const int *b, int nb) {
    return na == nb && (na == 0 || !memcmp(a, b, sizeof(int) * (size_t)na));
}

/* each id one initial symbol: a byte piece, or a piece of exactly one character */
static int all_initial(const tfm_bpe *m, const int *ids, int n) {
    for (int i = 0; i < n; i++) {
        uint32_t cp;
        if (m->type[ids[i]] == TFM_PIECE_BYTE) continue;
        if (tfm_utf8_decode(m->piece[ids[i]], (size_t)m->len[ids[i]], &cp) != m->len[ids[i]]) return 0;
    }
    return 1;
}

static void test_bpe_dropout_encode(const tfm_parallel_text *p, const tfm_bpe *m) {
    tfm_bpe_encoder *reuse = tfm_bpe_encoder_new();
    int reuse_ok = 0;
    int n_lines = 2 * p->n, exact_ok = 0, one_ok = 0, same_ok = 0, decode_ok = 0, differ_seed = 0, differ_exact = 0;
    long len_exact = 0, len_drop = 0, len_one = 0;
    for (int i = 0; i < n_lines; i++) {
        const char *s = (i % 2 ? p->tgt : p->src)[i / 2].tok[0];
        size_t len = strlen(s);
        int ne, n0, n1, na, nb, nc;
        uint64_t key = tfm_bpe_dropout_key(7, 0, i);
        int *e = tfm_bpe_encode(m, s, len, &ne);
        int *d0 = tfm_bpe_encode_dropout(m, s, len, 0.0f, key, &n0);
        int *d1 = tfm_bpe_encode_dropout(m, s, len, 1.0f, key, &n1);
        int *a = tfm_bpe_encode_dropout(m, s, len, 0.3f, key, &na);
        int *b = tfm_bpe_encode_dropout(m, s, len, 0.3f, key, &nb);
        int *c = tfm_bpe_encode_dropout(m, s, len, 0.3f, tfm_bpe_dropout_key(8, 0, i), &nc);
        if (!e || !d0 || !d1 || !a || !b || !c) {
            CHECK("bpe-dropout: encode", 0, "line %d: %s", i, tfm_last_error());
            return;
        }
        int nr;   /* the reused encoder (its buffers from the longer lines before) gives the same ids */
        const int *r = tfm_bpe_encoder_run(reuse, m, s, len, 0.3f, key, &nr);
        reuse_ok += r && same_ids(r, nr, a, na);
        exact_ok += same_ids(e, ne, d0, n0);
        one_ok += all_initial(m, d1, n1);
        same_ok += same_ids(a, na, b, nb);
        differ_seed += !same_ids(a, na, c, nc);
        differ_exact += !same_ids(a, na, e, ne);
        len_exact += ne, len_drop += na, len_one += n1;
        char *t1 = tfm_bpe_decode(m, a, na), *t2 = tfm_bpe_decode(m, d1, n1);
        decode_ok += t1 && t2 && !strcmp(t1, s) && !strcmp(t2, s);
        free(t1), free(t2), free(e), free(d0), free(d1), free(a), free(b), free(c);
    }
    CHECK("bpe-dropout: p 0 is exact BPE on every line", exact_ok == n_lines, "%d of %d lines", exact_ok, n_lines);
    CHECK("bpe-dropout: a reused tfm_bpe_encoder gives tfm_bpe_encode_dropout's ids", reuse_ok == n_lines, "%d of %d",
          reuse_ok, n_lines);
    tfm_bpe_encoder_free(reuse);
    CHECK("bpe-dropout: p 1 gives the initial symbols (characters)", one_ok == n_lines, "%d of %d lines", one_ok, n_lines);
    CHECK("bpe-dropout: p 1 has more pieces than exact BPE", len_one > len_exact * 2, "%ld vs %ld", len_one, len_exact);
    CHECK("bpe-dropout: the same key gives the same segmentation", same_ok == n_lines, "%d of %d", same_ok, n_lines);
    /* p 0.3: most lines of a dozen merges get at least one dropped merge; a few short ones cannot differ */
    CHECK("bpe-dropout: another seed gives another segmentation", differ_seed > n_lines / 2, "%d of %d lines differ",
          differ_seed, n_lines);
    CHECK("bpe-dropout: p 0.3 differs from exact BPE, in more pieces", differ_exact > n_lines / 2 &&
          len_drop > len_exact && len_drop < len_one, "%d lines differ; %ld pieces vs exact %ld, chars %ld",
          differ_exact, len_drop, len_exact, len_one);
    CHECK("bpe-dropout: decoding a dropped-out segmentation gives the input", decode_ok == n_lines, "%d of %d",
          decode_ok, n_lines);
    int n;
    CHECK("bpe-dropout: p outside [0,1] refused", !tfm_bpe_encode_dropout(m, "ab", 2, 1.5f, 1, &n) &&
          strstr(tfm_last_error(), "[0, 1]"), "%s", tfm_last_error());
    const char *lit = "a \xe2\x96\x81 b";   /* a literal U+2581 stays bytes, as in exact BPE */
    int *d = tfm_bpe_encode_dropout(m, lit, strlen(lit), 0.5f, 3, &n);
    char *back = d ? tfm_bpe_decode(m, d, n) : NULL;
    CHECK("bpe-dropout: a literal U+2581 decodes back", back && !strcmp(back, lit), "'%s'", back ? back : "(null)");
    free(d), free(back);
}

/* Provilkov et al.'s rule, written plainly to check the encoder's heap version: the line's characters as symbols
 * ('▁' + the words joined by '▁'); at every step the best candidate pair not skipped since its word's last merge
 * (higher score, then leftmost) is drawn for; skipped, it waits; kept, it is merged and its word's skipped pairs
 * come back. The draws are the encoder's (splitmix64 of key + counter). Returns the piece count, or -1 where the
 * line is outside what this reference models (a character without a piece). */
enum { REF_MAX = 512 };

static int ref_piece(const tfm_bpe *m, const char *s, int n) {
    int id = tfm_bpe_piece_id(m, s, (size_t)n);
    return id >= 0 && m->len[id] == n && !memcmp(m->piece[id], s, (size_t)n) ? id : -1;
}

static int ref_skip(uint64_t key, uint64_t *ctr, float p) {
    uint64_t z = key + 0x9e3779b97f4a7c15ull * ++*ctr;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (float)(z >> 40) * (1.0f / 16777216.0f) < p;
}

static int ref_bpe_dropout(const tfm_bpe *m, const char *line, float p, uint64_t key, int *ids) {
    char norm[4 * REF_MAX];
    int off[REF_MAX], len[REF_MAX], word[REF_MAX], n = 0, pos = 0, w = 0;
    char skipped[REF_MAX] = {0};   /* skipped[i]: the pair (i, i + 1), since its word's last merge */
    size_t L = strlen(line);
    for (size_t i = 0; i <= L;) {   /* "▁" + the line with every space a '▁' */
        if (pos + 4 >= (int)sizeof norm || n >= REF_MAX) return -1;
        if (n == 0 || line[i] == ' ') {
            memcpy(norm + pos, "\xe2\x96\x81", 3);
            off[n] = pos, len[n] = 3, word[n] = w++, n++, pos += 3;
            i += n > 1;   /* the space is this '▁'; the first '▁' is the dummy prefix */
            continue;
        }
        if (i == L) break;
        uint32_t cp;
        int k = tfm_utf8_decode(line + i, L - i, &cp);
        if (k <= 0 || ref_piece(m, line + i, k) < 0) return -1;
        memcpy(norm + pos, line + i, (size_t)k);
        off[n] = pos, len[n] = k, word[n] = w - 1, n++, pos += k, i += (size_t)k;
    }
    uint64_t ctr = 0;
    for (;;) {
        int best = -1;
        float best_score = 0;
        for (int i = 0; i + 1 < n; i++) {
            int id = skipped[i] ? -1 : ref_piece(m, norm + off[i], len[i] + len[i + 1]);
            if (id >= 0 && (best < 0 || m->score[id] > best_score)) best = i, best_score = m->score[id];
        }
        if (best < 0) break;
        if (p > 0 && ref_skip(key, &ctr, p)) {
            skipped[best] = 1;
            continue;
        }
        for (int i = 0; i + 1 < n; i++)
            if (word[i] == word[best]) skipped[i] = 0;
        len[best] += len[best + 1];
        for (int i = best + 1; i + 1 < n; i++)
            off[i] = off[i + 1], len[i] = len[i + 1], word[i] = word[i + 1], skipped[i] = skipped[i + 1];
        n--;
    }
    for (int i = 0; i < n; i++) ids[i] = ref_piece(m, norm + off[i], len[i]);
    return n;
}

static void test_bpe_dropout_reference(const tfm_parallel_text *p, const tfm_bpe *m) {
    int checked = 0, equal = 0, differ_exact = 0;
    int ref[REF_MAX];
    for (int i = 0; i < 2 * p->n; i++) {
        const char *s = (i % 2 ? p->tgt : p->src)[i / 2].tok[0];
        int ne, *e = tfm_bpe_encode(m, s, strlen(s), &ne);
        int nr = e ? ref_bpe_dropout(m, s, 0.0f, 0, ref) : -1;
        int modelled = nr >= 0 && same_ids(e, ne, ref, nr);   /* the reference's exact BPE is the encoder's */
        free(e);
        if (!modelled) continue;
        for (int t = 0; t < 3; t++) {
            float pd = t == 2 ? 0.5f : 0.1f + 0.1f * (float)t;
            uint64_t key = tfm_bpe_dropout_key(11 + (uint64_t)t, t, i);
            int nd, *d = tfm_bpe_encode_dropout(m, s, strlen(s), pd, key, &nd);
            nr = ref_bpe_dropout(m, s, pd, key, ref);
            checked++;
            equal += d && same_ids(d, nd, ref, nr);
            differ_exact += nr != ne;
            free(d);
        }
    }
    CHECK("bpe-dropout: the encoder follows Provilkov et al.'s rule (a plain reference, p 0.1 0.2 0.5)",
          checked > 300 && equal == checked && differ_exact > checked / 3, "%d of %d segmentations equal (%d not exact BPE)",
          equal, checked, differ_exact);
}

static int arrays_equal(const tfm_mt_corpus *a, const tfm_mt_corpus *b) {
    size_t cells = (size_t)a->n * a->num_steps;
    return a->n == b->n && !memcmp(a->src, b->src, cells * sizeof(int)) && !memcmp(a->tgt, b->tgt, cells * sizeof(int)) &&
           !memcmp(a->src_valid, b->src_valid, (size_t)a->n * sizeof(int)) &&
           !memcmp(a->tgt_valid, b->tgt_valid, (size_t)a->n * sizeof(int));
}

static void test_bpe_dropout_arrays(const tfm_parallel_text *p, tfm_bpe *m) {
    tfm_mt_config c;
    tfm_mt_config_default(&c);
    c.d_model = 8, c.n_head = 2, c.ffn = 8, c.n_layer = 1, c.max_len = 80;
    tfm_mt_model t;
    if (tfm_mt_model_build_bpe(&t, m, &c, 1)) {
        CHECK("bpe-dropout arrays: build", 0, "%s", tfm_last_error());
        return;
    }
    tfm_mt_corpus exact, a, b;
    int ok = !tfm_mt_corpus_from_text(p, &t, 64, &exact) && !tfm_mt_corpus_from_text(p, &t, 64, &a) && !tfm_mt_corpus_from_text(p, &t, 64, &b);
    CHECK("bpe-dropout arrays: built", ok, "%s", tfm_last_error());
    if (!ok) return;
    int threads = tfm_get_threads();
    tfm_bpe_encoder *enc[3] = {tfm_bpe_encoder_new(), tfm_bpe_encoder_new(), tfm_bpe_encoder_new()};
    ok = !tfm_mt_corpus_bpe_dropout(p, &t, 0.0f, 5, 0, NULL, 0, &a);
    CHECK("bpe-dropout arrays: p 0 = the exact arrays", ok && arrays_equal(&a, &exact), "%s", tfm_last_error());
    tfm_set_threads(1);
    ok = !tfm_mt_corpus_bpe_dropout(p, &t, 0.2f, 5, 3, NULL, 0, &a);
    tfm_set_threads(3);
    ok = ok && !tfm_mt_corpus_bpe_dropout(p, &t, 0.2f, 5, 3, enc, 3, &b);
    tfm_set_threads(threads);
    CHECK("bpe-dropout arrays: 1 and 3 threads give one segmentation", ok && arrays_equal(&a, &b), "%s", tfm_last_error());
    CHECK("bpe-dropout arrays: not the exact arrays", !arrays_equal(&a, &exact), "p 0.2 changed nothing");
    ok = !tfm_mt_corpus_bpe_dropout(p, &t, 0.2f, 5, 4, enc, 3, &b);
    CHECK("bpe-dropout arrays: the next epoch re-segments", ok && !arrays_equal(&a, &b), "epochs 3 and 4 equal");
    long toks_exact = 0, toks_drop = 0;
    for (int i = 0; i < p->n; i++) toks_exact += exact.src_valid[i], toks_drop += b.src_valid[i];
    CHECK("bpe-dropout arrays: longer rows, each ending in <eos> or cut at num_steps", toks_drop > toks_exact &&
          b.src[(size_t)0 * 64 + b.src_valid[0] - 1] == TFM_EOS, "%ld vs %ld tokens", toks_drop, toks_exact);
    for (int i = 0; i < 3; i++) tfm_bpe_encoder_free(enc[i]);
    tfm_mt_corpus_free(&exact), tfm_mt_corpus_free(&a), tfm_mt_corpus_free(&b);
    tfm_mt_model_free(&t);   /* frees m too */
}

static void test_bpe_dropout(void) {
    tfm_parallel_text p;
    if (tfm_parallel_load_tsv(&p, "data/fra-eng-demo.tsv", TFM_TOK_BPE, N_PAIRS)) {
        CHECK("bpe-dropout: corpus", 0, "%s", tfm_last_error());
        return;
    }
    const char **lines = malloc(sizeof(char *) * 2 * (size_t)p.n);
    for (int i = 0; i < p.n; i++) lines[2 * i] = p.src[i].tok[0], lines[2 * i + 1] = p.tgt[i].tok[0];
    tfm_bpe *m = calloc(1, sizeof *m);
    tfm_bpe_learn_opts lo;
    tfm_bpe_learn_opts_default(&lo);
    lo.vocab_size = 800;
    int rc = tfm_bpe_learn_lines(m, lines, 2 * p.n, &lo);
    free(lines);
    CHECK("bpe-dropout: learn a model of the sample", rc == 0, "%s", tfm_last_error());
    if (!rc) {
        test_bpe_dropout_encode(&p, m);
        test_bpe_dropout_reference(&p, m);
        test_bpe_dropout_arrays(&p, m);
    }
    tfm_parallel_text_free(&p);
}

/* ---------------------------------------------------------------- R-Drop */
enum { V = 40, B = 2, TS = 5, TT = 4 };
static const int src[B * TS] = {11, 12, 7, 25, 2, 5, 9, 2, 0, 0}, valid[B] = {5, 3};
static const int tgt[B * TT] = {17, 22, 18, 2, 9, 2, 0, 0};

static tfm_mt_net *tiny_model(float dropout, float attention, float activation) {
    tfm_mt_config c;
    tfm_mt_config_default(&c);
    c.src_vocab = c.tgt_vocab = V;
    c.d_model = 8, c.n_head = 2, c.ffn = 16, c.n_layer = 1, c.max_len = 16;
    c.dropout = dropout, c.attention_dropout = attention, c.activation_dropout = activation;
    tfm_mt_net *m = tfm_mt_net_create(&c);
    if (m) m->vt->init_weights(m, 3);
    return m;
}

/* mean over the rows with target != <pad> of CE (label smoothing eps) and of the symmetric KL, in double */
static void reference(const float *l1, const float *l2, const int *t, int rows, float eps, double *ce1, double *ce2,
                      double *kl) {
    *ce1 = *ce2 = *kl = 0;
    int count = 0;
    for (int r = 0; r < rows; r++) {
        if (t[r] == TFM_PAD) continue;
        count++;
        const float *x[2] = {l1 + (size_t)r * V, l2 + (size_t)r * V};
        double lse[2], ce[2];
        for (int k = 0; k < 2; k++) {
            double mx = x[k][0], s = 0, sum = 0;
            for (int v = 0; v < V; v++) mx = x[k][v] > mx ? x[k][v] : mx;
            for (int v = 0; v < V; v++) s += exp(x[k][v] - mx), sum += x[k][v];
            lse[k] = mx + log(s);
            ce[k] = (1 - eps) * (lse[k] - x[k][t[r]]) + eps * (lse[k] - sum / V);
        }
        *ce1 += ce[0], *ce2 += ce[1];
        for (int v = 0; v < V; v++) {
            double lp = x[0][v] - lse[0], lq = x[1][v] - lse[1];
            *kl += 0.5 * (exp(lp) - exp(lq)) * (lp - lq);
        }
    }
    *ce1 /= count, *ce2 /= count, *kl /= count;
}

static float rdrop_loss(tfm_mt_net *m, tfm_graph *g, tfm_rng start, float alpha, int backward) {
    int tin[B * TT];
    tfm_mt_shift_right(tgt, B, TT, tin);
    tfm_graph_reset(g);
    g->rng = start;
    tfm_params_zero_grad(&m->params);
    tfm_tensor *loss = tfm_mt_net_rdrop_loss(m, g, src, valid, B, TS, tin, tgt, TT, 0.1f, alpha);
    if (backward) tfm_backward(g, loss);
    return loss->data[0];
}

static void test_rdrop_value(tfm_mt_net *m, tfm_graph *g, tfm_rng start) {
    const float alpha = 0.7f;
    float got = rdrop_loss(m, g, start, alpha, 0);
    int tin[B * TT];
    tfm_mt_shift_right(tgt, B, TT, tin);
    tfm_graph_reset(g);
    g->rng = start;   /* the same masks: pass 1, then pass 2 draws the next ones */
    const int *t1, *t2;
    tfm_tensor *l1 = tfm_mt_net_train_logits(m, g, src, valid, B, TS, tin, tgt, TT, &t1);
    tfm_tensor *l2 = tfm_mt_net_train_logits(m, g, src, valid, B, TS, tin, tgt, TT, &t2);
    int rows = (int)(l1->size / V);
    double ce1, ce2, kl;
    reference(l1->data, l2->data, t1, rows, 0.1f, &ce1, &ce2, &kl);
    double want = 0.5 * (ce1 + ce2) + alpha * kl;
    CHECK("rdrop: two passes with different masks", max_abs_diff(l1->data, l2->data, l1->size) > 1e-3 && kl > 1e-5,
          "max diff %g, KL %g", max_abs_diff(l1->data, l2->data, l1->size), kl);
    CHECK("rdrop: loss = (CE1 + CE2)/2 + alpha * symmetric KL of two passes", fabs(got - want) < 1e-5 * (1 + want),
          "got %.7f, two passes %.7f (CE %.5f %.5f, KL %.6f)", got, want, ce1, ce2, kl);
    CHECK("rdrop: the targets of both passes", t1 != NULL && t2 != NULL && !memcmp(t1, t2, sizeof(int) * (size_t)rows),
          "targets differ");
}

/* alpha 0: the gradient is the mean of the two passes' CE gradients (pass 2 with the RNG where pass 1 left it) */
static void test_rdrop_alpha0(tfm_mt_net *m, tfm_graph *g, tfm_rng start) {
    size_t n = m->params.total;
    float *gr = malloc(sizeof(float) * n), *g1 = malloc(sizeof(float) * n);
    int tin[B * TT];
    tfm_mt_shift_right(tgt, B, TT, tin);
    float lr = rdrop_loss(m, g, start, 0.0f, 1);
    memcpy(gr, m->params.grad, sizeof(float) * n);
    double l12 = 0;
    tfm_rng r = start;
    for (int pass = 0; pass < 2; pass++) {
        tfm_graph_reset(g);
        g->rng = r;
        tfm_params_zero_grad(&m->params);
        tfm_tensor *loss = tfm_mt_net_loss(m, g, src, valid, B, TS, tin, tgt, TT, 0.1f);
        r = g->rng;   /* where the forward's dropouts left it */
        tfm_backward(g, loss);
        l12 += 0.5 * loss->data[0];
        if (pass == 0) memcpy(g1, m->params.grad, sizeof(float) * n);
        else
            for (size_t i = 0; i < n; i++) g1[i] = 0.5f * (g1[i] + m->params.grad[i]);
    }
    CHECK("rdrop alpha 0: loss = mean of two CE passes", fabs(lr - l12) < 1e-6 * (1 + l12), "%.7f vs %.7f", lr, l12);
    CHECK("rdrop alpha 0: gradient = mean of the two passes' gradients", rel_err(gr, g1, n) < 1e-5, "rel err %g",
          rel_err(gr, g1, n));
    free(gr), free(g1);
}

/* finite differences on 40 parameter entries spread over every tensor, the masks the same in every evaluation */
static void test_rdrop_gradcheck(tfm_mt_net *m, tfm_graph *g, tfm_rng start) {
    enum { K = 40 };
    rdrop_loss(m, g, start, 1.5f, 1);
    float an[K], fd[K];
    size_t n = m->params.total;
    for (int k = 0; k < K; k++) an[k] = m->params.grad[(size_t)((k * 2654435761u) % n)];
    for (int k = 0; k < K; k++) {
        size_t i = (size_t)((k * 2654435761u) % n);
        float x = m->params.data[i], h = 1e-2f;
        m->params.data[i] = x + h;
        double lp = rdrop_loss(m, g, start, 1.5f, 0);
        m->params.data[i] = x - h;
        double lm = rdrop_loss(m, g, start, 1.5f, 0);
        m->params.data[i] = x;
        fd[k] = (float)((lp - lm) / (2 * h));
    }
    int nonzero = 0;
    for (int k = 0; k < K; k++) nonzero += an[k] != 0;
    CHECK("rdrop: gradient against finite differences", rel_err(an, fd, K) < 3e-2 && nonzero > K / 2,
          "rel err %g, %d of %d entries non-zero", rel_err(an, fd, K), nonzero, K);
}

static void test_rdrop(void) {
    tfm_mt_net *m = tiny_model(0.3f, -1.0f, 0.2f);
    if (!m) {
        CHECK("rdrop: model", 0, "%s", tfm_last_error());
        return;
    }
    for (size_t i = 0; i < m->params.total; i++) m->params.data[i] *= 2.0f;   /* livelier logits: a larger KL */
    tfm_graph g;
    tfm_graph_init(&g, 11);
    g.training = 1, g.grad_enabled = 1;
    tfm_rng start = g.rng;
    test_rdrop_value(m, &g, start);
    test_rdrop_alpha0(m, &g, start);
    test_rdrop_gradcheck(m, &g, start);
    tfm_graph_free(&g);
    tfm_mt_net_free(m);
}

/* ---------------------------------------------------------------- attention / activation dropout */
static float train_loss(tfm_mt_net *m, int training) {
    int tin[B * TT];
    tfm_mt_shift_right(tgt, B, TT, tin);
    tfm_graph g;
    tfm_graph_init(&g, 5);
    g.training = training;
    float l = tfm_mt_net_loss(m, &g, src, valid, B, TS, tin, tgt, TT, 0.0f)->data[0];
    tfm_graph_free(&g);
    return l;
}

/* a translator with these two settings through a checkpoint: the entries written only when not the defaults */
static int round_trip(float attention, float activation, int *entries, tfm_mt_config *back) {
    const char *lines[] = {"ein Hund", "a dog", "zwei Katzen", "two cats"};
    tfm_bpe *b = calloc(1, sizeof *b);
    tfm_bpe_learn_opts lo;
    tfm_bpe_learn_opts_default(&lo);
    lo.vocab_size = 280;
    tfm_mt_config c;
    tfm_mt_config_default(&c);
    c.d_model = 8, c.n_head = 2, c.ffn = 8, c.n_layer = 1, c.max_len = 16;
    c.attention_dropout = attention, c.activation_dropout = activation;
    tfm_mt_model t, r;
    if (tfm_bpe_learn_lines(b, lines, 4, &lo) || tfm_mt_model_build_bpe(&t, b, &c, 1)) return -1;
    char path[] = "/tmp/tfm_regularisers_XXXXXX";
    close(mkstemp(path));
    tfm_container ct;
    tfm_container_init(&ct);
    tfm_mt_model_put(&ct, &t);
    *entries = !!tfm_container_get(&ct, "config.attention_dropout") + !!tfm_container_get(&ct, "config.activation_dropout");
    int rc = tfm_container_save(&ct, path) || tfm_mt_model_load(&r, path);
    tfm_container_free(&ct);
    unlink(path);
    tfm_mt_model_free(&t);
    if (rc) return -1;
    *back = r.model->cfg;
    tfm_mt_model_free(&r);
    return 0;
}

static void test_split_dropout_checkpoint(void) {
    tfm_mt_config back;
    int entries = -1;
    int rc = round_trip(0.05f, 0.1f, &entries, &back);
    CHECK("split dropout: checkpoint round trip", !rc && entries == 2 && back.attention_dropout == 0.05f &&
          back.activation_dropout == 0.1f, "rc %d (%s), %d entries, %g %g", rc, tfm_last_error(), entries,
          back.attention_dropout, back.activation_dropout);
    rc = round_trip(-1.0f, 0.0f, &entries, &back);
    CHECK("split dropout: defaults write no entry and read back as defaults", !rc && entries == 0 &&
          back.attention_dropout == -1.0f && back.activation_dropout == 0, "rc %d, %d entries, %g %g", rc, entries,
          back.attention_dropout, back.activation_dropout);
}

static void test_split_dropout(void) {
    tfm_mt_config d;
    tfm_mt_config_default(&d);
    CHECK("split dropout: defaults -1 (as dropout) and 0", d.attention_dropout == -1.0f && d.activation_dropout == 0,
          "%g %g", d.attention_dropout, d.activation_dropout);
    tfm_mt_net *inherit = tiny_model(0.3f, -1.0f, 0.0f), *same = tiny_model(0.3f, 0.3f, 0.0f);
    tfm_mt_net *none = tiny_model(0.3f, 0.0f, 0.0f), *act = tiny_model(0.3f, -1.0f, 0.4f);
    if (!inherit || !same || !none || !act) {
        CHECK("split dropout: models", 0, "%s", tfm_last_error());
        return;
    }
    float li = train_loss(inherit, 1), ls = train_loss(same, 1), ln = train_loss(none, 1), la = train_loss(act, 1);
    CHECK("split dropout: attention_dropout -1 = dropout on the attention weights", li == ls, "%.7f vs %.7f", li, ls);
    CHECK("split dropout: attention_dropout 0 changes the training loss", ln != li, "%.7f", ln);
    CHECK("split dropout: activation_dropout changes the training loss", la != li, "%.7f", la);
    CHECK("split dropout: no effect outside training", train_loss(act, 0) == train_loss(inherit, 0) &&
          train_loss(none, 0) == train_loss(inherit, 0), "eval losses differ");
    test_split_dropout_checkpoint();
    tfm_mt_config bad = inherit->cfg;
    bad.attention_dropout = -0.5f;
    int r1 = tfm_mt_config_check(&bad);
    bad.attention_dropout = 0.1f, bad.activation_dropout = 1.0f;
    int r2 = tfm_mt_config_check(&bad);
    CHECK("split dropout: out-of-range values refused", r1 && r2 && strstr(tfm_last_error(), "activation_dropout"),
          "%d %d %s", r1, r2, tfm_last_error());
    tfm_mt_net_free(inherit), tfm_mt_net_free(same), tfm_mt_net_free(none), tfm_mt_net_free(act);
}

int main(void) {
    test_bpe_dropout();
    test_rdrop();
    test_split_dropout();
    CHECK_EXIT();
}
