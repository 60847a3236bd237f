/* Greedy and beam search (src/decode/search.c) against the PyTorch twin's search (tests/fixtures/search_small.tfm,
 * written by scripts/make_search_fixture.py from transformer_twin.translate_batch): every hypothesis of the n-best
 * lists, their order and scores, with and without forced target prefixes, for every batching (one batch, batches
 * of 2, batches decoded in parallel on worker graphs). Then what the scores mean, checked independently: a
 * hypothesis' score equals the log-probability a teacher-forced forward gives its tokens and <eos> after them,
 * over the length penalty (also for hypotheses cut at max_len); n-best lists are sorted; the best of n equals the 1-best search. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tfm/decode.h"
#include "tfm/seq2seq.h"

#define FIX "tests/fixtures/search_small.tfm"

static tfm_container fx;

static const tfm_entry *get(const char *name) {
    const tfm_entry *e = tfm_container_get(&fx, name);
    if (!e) {
        printf("FAIL fixture: entry %s missing\n", name);
        exit(1);
    }
    return e;
}
static const int *geta(const char *name) { return (const int *)get(name)->data; }
static int geti(const char *name) { return geta(name)[0]; }
static float getf(const char *name) { return ((const float *)get(name)->data)[0]; }

static tfm_mt_net *build(void) {
    tfm_mt_config c;
    tfm_mt_config_default(&c);
#define CF(f) c.f = geti("config." #f);
    CF(src_vocab) CF(tgt_vocab) CF(d_model) CF(n_head) CF(ffn) CF(n_layer) CF(pre_ln) CF(max_len)
#undef CF
    c.dropout = 0;
    tfm_mt_net *m = tfm_mt_net_create(&c);
    if (!m) printf("FAIL create: %s\n", tfm_last_error()), exit(1);
    if (tfm_ckpt_get_params(&fx, &m->params, FIX)) printf("FAIL params: %s\n", tfm_last_error()), exit(1);
    return m;
}

/* setting k's options */
static tfm_search_opts opts(int k) {
    char n[64];
    tfm_search_opts o;
    tfm_search_opts_default(&o);
    snprintf(n, sizeof n, "s%d.beam", k), o.beam = geti(n);
    snprintf(n, sizeof n, "s%d.alpha", k), o.alpha = getf(n);
    snprintf(n, sizeof n, "s%d.n_best", k), o.num_hypotheses = geti(n);
    snprintf(n, sizeof n, "s%d.prefixed", k);
    if (geti(n)) o.prefix_ids = geta("prefix_ids"), o.prefix_off = geta("prefix_off");
    o.max_len = geti("max_len");
    return o;
}

/* hypotheses of setting k equal the twin's: ids exactly, scores to 1e-4 */
static int same_as_twin(int k, const tfm_hyps *h, int n, char *why, size_t nw) {
    char name[64];
    snprintf(name, sizeof name, "s%d.count", k);
    const int *count = geta(name);
    snprintf(name, sizeof name, "s%d.ids", k);
    const int *ids = geta(name);
    snprintf(name, sizeof name, "s%d.off", k);
    const int *off = geta(name);
    snprintf(name, sizeof name, "s%d.score", k);
    const float *score = (const float *)get(name)->data;
    for (int s = 0, j = 0; s < n; j += count[s], s++) {
        if (h[s].n != count[s]) return snprintf(why, nw, "sentence %d: %d hypotheses, twin %d", s, h[s].n, count[s]), 0;
        for (int i = 0; i < h[s].n; i++) {
            int len = h[s].off[i + 1] - h[s].off[i], tlen = off[j + i + 1] - off[j + i];
            if (len != tlen || memcmp(h[s].ids + h[s].off[i], ids + off[j + i], sizeof(int) * (size_t)len))
                return snprintf(why, nw, "sentence %d hypothesis %d: %d tokens, twin %d (or different ids)", s, i, len,
                                tlen), 0;
            float d = fabsf(h[s].score[i] - score[j + i]);
            if (!(d <= 1e-4f * (1 + fabsf(score[j + i]))))
                return snprintf(why, nw, "sentence %d hypothesis %d: score %.6f, twin %.6f", s, i, h[s].score[i],
                                score[j + i]), 0;
        }
    }
    return 1;
}

static void free_all(tfm_hyps *h, int n) {
    for (int i = 0; i < n; i++) tfm_hyps_free(&h[i]);
}

static void test_twin(tfm_mt_net *m) {
    const int *src = geta("src_ids"), *off = geta("src_off");
    int n = (int)(get("src_off")->nbytes / sizeof(int)) - 1, n_set = geti("n_settings");
    tfm_graph g, w[2], *wp[2] = {&w[0], &w[1]};
    tfm_graph_init(&g, 0);
    for (int i = 0; i < 2; i++) tfm_graph_init_worker(&w[i], &g);
    tfm_hyps h[16];
    char why[256], name[160];
    for (int k = 0; k < n_set; k++) {
        tfm_search_opts o = opts(k);
        struct { const char *how; int batch, workers; } runs[3] = {{"one batch", 16, 0}, {"batches of 2", 2, 0},
                                                                    {"2 workers", 2, 2}};
        for (int r = 0; r < 3; r++) {
            int saved = tfm_get_threads();
            if (runs[r].workers) tfm_set_threads(2);
            int rc = tfm_search_nbest(m, &g, wp, runs[r].workers, src, off, n, 100, runs[r].batch, &o, h);
            tfm_set_threads(saved);
            snprintf(name, sizeof name, "search = twin: beam %d, alpha %.1f, %d-best%s, %s", o.beam, o.alpha,
                     o.num_hypotheses, o.prefix_ids ? ", prefixes" : "", runs[r].how);
            why[0] = 0;
            CHECK(name, rc == 0 && same_as_twin(k, h, n, why, sizeof why), "%s", rc ? tfm_last_error() : why);
            if (!rc) free_all(h, n);
        }
    }
    for (int i = 0; i < 2; i++) tfm_graph_free(&w[i]);
    tfm_graph_free(&g);
}

/* log p(ids, then <eos> if with_eos) under a teacher-forced forward, over the length penalty */
static double forced_score(tfm_mt_net *m, tfm_graph *g, const int *src, int ns, const int *ids, int len, int with_eos,
                           float alpha) {
    int Ts = ns + 1, Tt = len + 1, V = m->cfg.tgt_vocab;
    int s[64], tin[64], valid = Ts;
    memcpy(s, src, sizeof(int) * (size_t)ns);
    s[ns] = TFM_EOS;
    tin[0] = TFM_BOS;
    memcpy(tin + 1, ids, sizeof(int) * (size_t)len);
    tfm_graph_reset(g);
    g->grad_enabled = 0;
    tfm_tensor *lg = tfm_mt_net_forward(m, g, s, &valid, 1, Ts, tin, Tt);
    double sum = 0;
    for (int t = 0; t < (with_eos ? Tt : len); t++) {
        const float *x = lg->data + (size_t)t * V;
        double mx = x[0], z = 0;
        for (int v = 1; v < V; v++) mx = x[v] > mx ? x[v] : mx;
        for (int v = 0; v < V; v++) z += exp(x[v] - mx);
        int tok = t < len ? ids[t] : TFM_EOS;
        sum += x[tok] - mx - log(z);
    }
    return sum / pow((5.0 + len + 1) / 6.0, alpha);
}

static void test_scores_mean_what_they_say(tfm_mt_net *m) {
    const int *src = geta("src_ids"), *off = geta("src_off");
    int n = (int)(get("src_off")->nbytes / sizeof(int)) - 1, max_len = geti("max_len");
    tfm_graph g;
    tfm_graph_init(&g, 0);
    tfm_search_opts o;
    tfm_search_opts_default(&o);
    o.beam = 5, o.alpha = 0.8f, o.num_hypotheses = 5, o.max_len = max_len;
    tfm_hyps h[16];
    int rc = tfm_search_nbest(m, &g, NULL, 0, src, off, n, 100, 16, &o, h), ok = !rc, sorted = !rc;
    double worst = 0;
    for (int s = 0; !rc && s < n; s++)
        for (int i = 0; i < h[s].n; i++) {
            int len = h[s].off[i + 1] - h[s].off[i];
            double want = forced_score(m, &g, src + off[s], off[s + 1] - off[s], h[s].ids + h[s].off[i], len,
                                       1, o.alpha);
            double d = fabs(want - h[s].score[i]);
            worst = d > worst ? d : worst;
            ok &= d < 1e-4 * (1 + fabs(want));
            if (i) sorted &= h[s].score[i] <= h[s].score[i - 1];
        }
    CHECK("beam scores = teacher-forced log-probability / length penalty", ok, "worst |diff| %.3g", worst);
    CHECK("n-best lists are sorted by score", sorted, "rc %d", rc);
    /* the best of 5 is the 1-best search's output */
    int *best[16], best_len[16];
    int rc1 = tfm_search_ids(m, &g, src, off, n, 100, 16, &o, best, best_len), same = !rc && !rc1;
    for (int s = 0; same && s < n; s++)
        same = best_len[s] == h[s].off[1] && !memcmp(best[s], h[s].ids, sizeof(int) * (size_t)best_len[s]);
    CHECK("the first of n hypotheses is the 1-best output", same, "rc %d %d", rc, rc1);
    for (int s = 0; !rc1 && s < n; s++) free(best[s]);
    if (!rc) free_all(h, n);
    /* greedy scores: the chosen tokens' log-probabilities (<eos> included when it ended with one) */
    tfm_search_opts_default(&o);
    o.max_len = max_len;
    rc = tfm_search_nbest(m, &g, NULL, 0, src, off, n, 100, 16, &o, h);
    ok = !rc;
    worst = 0;
    for (int s = 0; !rc && s < n; s++) {
        int len = h[s].off[1];
        double want = forced_score(m, &g, src + off[s], off[s + 1] - off[s], h[s].ids, len, 1, 0);
        worst = fabs(want - h[s].score[0]) > worst ? fabs(want - h[s].score[0]) : worst;
        ok &= fabs(want - h[s].score[0]) < 1e-4 * (1 + fabs(want)) && h[s].n == 1;
    }
    CHECK("greedy scores = teacher-forced log-probability (<eos> included)", ok, "worst |diff| %.3g", worst);
    if (!rc) free_all(h, n);
    tfm_graph_free(&g);
}

/* a forced prefix is the start of every hypothesis; greedy continuing its own first tokens changes nothing */
static void test_prefixes(tfm_mt_net *m) {
    const int *src = geta("src_ids"), *off = geta("src_off");
    int n = (int)(get("src_off")->nbytes / sizeof(int)) - 1;
    tfm_graph g;
    tfm_graph_init(&g, 0);
    tfm_search_opts o;
    tfm_search_opts_default(&o);
    o.max_len = geti("max_len");
    tfm_hyps h[16], p[16];
    int rc = tfm_search_nbest(m, &g, NULL, 0, src, off, n, 100, 16, &o, h);
    int pids[64], poff[17] = {0};
    for (int s = 0; !rc && s < n; s++) {   /* prefix = the first half of the greedy output */
        int k = h[s].off[1] / 2;
        memcpy(pids + poff[s], h[s].ids, sizeof(int) * (size_t)k);
        poff[s + 1] = poff[s] + k;
    }
    o.prefix_ids = pids, o.prefix_off = poff;
    int rc2 = rc ? -1 : tfm_search_nbest(m, &g, NULL, 0, src, off, n, 100, 16, &o, p), same = !rc && !rc2;
    for (int s = 0; same && s < n; s++)
        same = p[s].off[1] == h[s].off[1] && !memcmp(p[s].ids, h[s].ids, sizeof(int) * (size_t)h[s].off[1]) &&
               fabsf(p[s].score[0] - h[s].score[0]) < 1e-5f;
    CHECK("greedy with its own output's first half as prefix: the same output and score", same, "rc %d %d", rc, rc2);
    if (!rc2) free_all(p, n);
    o.beam = 4, o.num_hypotheses = 4;
    int starts = (rc2 = tfm_search_nbest(m, &g, NULL, 0, src, off, n, 100, 16, &o, p)) == 0;
    for (int s = 0; starts && s < n; s++)
        for (int i = 0; i < p[s].n; i++)
            starts &= p[s].off[i + 1] - p[s].off[i] >= poff[s + 1] - poff[s] &&
                      !memcmp(p[s].ids + p[s].off[i], pids + poff[s], sizeof(int) * (size_t)(poff[s + 1] - poff[s]));
    CHECK("beam 4 with prefixes: every hypothesis starts with its prefix", starts, "rc %d", rc2);
    if (!rc2) free_all(p, n);
    if (!rc) free_all(h, n);
    tfm_graph_free(&g);
}

/* Ties: with the output layer's weights zeroed and two equal biases above the rest, every step's logits tie
 * between those two ids; greedy takes the first (as a first-argmax loop does), with and without a screen, and
 * a banned first one hands the step to the second. */
static void test_greedy_ties(tfm_mt_net *m) {
    const tfm_tensor *W, *b;
    m->vt->output_layer(m, &W, &b);
    int V = W->shape[0], lo = V - 3, hi = V - 1;
    float *w_saved = malloc(sizeof(float) * W->size), *b_saved = malloc(sizeof(float) * b->size);
    memcpy(w_saved, W->data, sizeof(float) * W->size), memcpy(b_saved, b->data, sizeof(float) * b->size);
    memset(W->data, 0, sizeof(float) * W->size), memset(b->data, 0, sizeof(float) * b->size);
    b->data[lo] = b->data[hi] = 2.0f;
    const int *src = geta("src_ids"), *off = geta("src_off");
    tfm_graph g;
    tfm_graph_init(&g, 0);
    tfm_search_opts o;
    tfm_search_opts_default(&o);
    o.max_len = 5;
    tfm_logit_screen *scr = tfm_logit_screen_new(m);
    int ok = 1;
    for (int pass = 0; pass < 3; pass++) {   /* 0: unscreened, 1: screened, 2: the first id banned */
        o.screen = pass == 1 ? scr : NULL;
        if (pass == 2) m->cfg.banned[m->cfg.n_banned++] = lo;
        tfm_hyps h[2];
        int rc = tfm_search_nbest(m, &g, NULL, 0, src, off, 2, 100, 2, &o, h), want = pass == 2 ? hi : lo;
        for (int s = 0; !rc && s < 2; s++) {
            ok &= h[s].off[1] == o.max_len;
            for (int t = 0; t < h[s].off[1]; t++) ok &= h[s].ids[t] == want;
        }
        ok &= rc == 0 && (pass != 1 || scr);
        if (!rc) free_all(h, 2);
        if (pass == 2) m->cfg.n_banned--;
    }
    CHECK("greedy: tied logits give the first id (unscreened and screened), a banned one the next", ok, "%s", "no");
    tfm_logit_screen_free(scr);
    tfm_graph_free(&g);
    memcpy(W->data, w_saved, sizeof(float) * W->size), memcpy(b->data, b_saved, sizeof(float) * b->size);
    free(w_saved), free(b_saved);
}

int main(void) {
    if (tfm_container_load(&fx, FIX)) {
        printf("FAIL fixture %s: %s\n", FIX, tfm_last_error());
        return 1;
    }
    tfm_mt_net *m = build();
    test_twin(m);
    test_scores_mean_what_they_say(m);
    test_prefixes(m);
    test_greedy_ties(m);
    tfm_mt_net_free(m);
    tfm_container_free(&fx);
    CHECK_EXIT();
}
