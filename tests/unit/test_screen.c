/* Greedy's output layer through the int8 screen (tfm_logit_screen, src/decode/screen.c): the screened argmax
 * must be exactly the first argmax of the fp32 logits a one-row step computes (tfm_gemm_bias with M = 1),
 *   - for random hidden states at scales from 1e-3 to 1e3 (a random Transformer's output layer, V = 3000,
 *     with a bias), in steps of 1-4 rows (8-bit activations) and 5-9 rows (7-bit, the panels' GEMM on AVX2;
 *     8-bit on VNNI), on the active kernels (tests/run.sh runs this under every TFM_ISA the CPU has);
 *   - for exact ties (two equal rows: the lower id wins) and one-ulp near-ties, in steps of 1 and 6 rows;
 *   - for a flat distribution (h = 0 and equal biases: every row a candidate, the fall-back path);
 *   - with banned ids (the best one banned: the second best wins);
 *   - for the activation's rounding at its worst (a bound with the wrong step drops the winner);
 * and a non-finite hidden state gives -1, an int8 output layer or an architecture without decode_hidden gives
 * no screen, and greedy search over sentences with the screen returns the same tokens as without it. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "core/q8.h"
#include "tfm/decode.h"
#include "tfm/kernels.h"

#define V 3000
#define D 64

static tfm_mt_net *make_model(int with_bias_noise) {
    tfm_mt_config c;
    tfm_mt_config_default(&c);
    c.src_vocab = V, c.tgt_vocab = V, c.d_model = D, c.n_head = 4, c.ffn = 128, c.n_layer = 1, c.max_len = 64;
    c.dropout = 0;
    tfm_mt_net *m = tfm_mt_net_create(&c);
    if (!m) printf("FAIL model: %s\n", tfm_last_error()), exit(1);
    m->vt->init_weights(m, 7);
    const tfm_tensor *W, *b;
    m->vt->output_layer(m, &W, &b);
    for (int r = 0; b && with_bias_noise && r < V; r++) b->data[r] = 0.5f * sinf(0.7f * (float)r);
    return m;
}

/* the unscreened one-row step's logits and their first argmax (banned ids at -inf) */
static int reference(const tfm_mt_net *m, const float *h, const int *banned, int n_banned, float *z) {
    const tfm_tensor *W, *b;
    m->vt->output_layer(m, &W, &b);
    if (b) tfm_gemm_bias(0, 1, 1, V, D, 1.0f, h, D, W->data, D, NULL, b->data, z, V);
    else tfm_gemm(0, 1, 1, V, D, 1.0f, h, D, W->data, D, 0.0f, z, V);
    for (int i = 0; i < n_banned; i++) z[banned[i]] = -INFINITY;
    int best = 0;
    for (int v = 1; v < V; v++)
        if (z[v] > z[best]) best = v;
    return best;
}

static float *scratch_for(const tfm_logit_screen *s, int rows) {
    return malloc(sizeof(float) * tfm_logit_screen_scratch(s, rows));
}

static void test_random(tfm_mt_net *m, const tfm_logit_screen *s) {
    enum { ROWS = 9, TRIALS = 300 };   /* 1-4 rows: the 8-bit int8 GEMM; 5 and more: the 7-bit panels (AVX2) */
    float h[ROWS * D], z[V], *scr = scratch_for(s, ROWS);
    int best[ROWS], wrong = 0, fallbacks = 0, n = 0;
    uint64_t st = 12345;
    for (int t = 0; t < TRIALS; t++) {
        float scale = powf(10.0f, (float)(t % 7) - 3.0f);
        for (int i = 0; i < ROWS * D; i++) {
            st = st * 6364136223846793005ULL + 1442695040888963407ULL;
            h[i] = scale * ((float)(st >> 40) / (float)(1 << 24) - 0.5f);
        }
        int rows = 1 + t % ROWS;
        fallbacks += tfm_logit_screen_argmax(s, h, rows, NULL, 0, scr, best);
        for (int r = 0; r < rows; r++, n++) wrong += best[r] != reference(m, h + r * D, NULL, 0, z);
    }
    CHECK("screen: random hidden states (1e-3..1e3), 1-9 rows, the fp32 first argmax", wrong == 0,
          "%d of %d rows differ", wrong, n);
    printf("# %d rows, %d fell back to the full layer\n", n, fallbacks);
    free(scr);
}

static void test_ties(tfm_mt_net *m) {
    const tfm_tensor *W, *b;
    m->vt->output_layer(m, &W, &b);
    float h[D], z[V];
    for (int k = 0; k < D; k++) h[k] = W->data[(size_t)20 * D + k] * 40.0f;   /* row 20 wins by far */
    memcpy(W->data + (size_t)10 * D, W->data + (size_t)20 * D, sizeof(float) * D);   /* row 10 = row 20 */
    if (b) b->data[10] = b->data[20];
    tfm_logit_screen *s = tfm_logit_screen_new(m);
    float *scr = scratch_for(s, 6), h6[6 * D];
    int best = -1, want = reference(m, h, NULL, 0, z), best6[6], tie6 = 1;
    tfm_logit_screen_argmax(s, h, 1, NULL, 0, scr, &best);
    CHECK("screen: an exact tie goes to the lower id", best == 10 && want == 10, "screen %d, reference %d", best, want);
    for (int r = 0; r < 6; r++) memcpy(h6 + r * D, h, sizeof h);   /* a step of 6 rows: the panels' GEMM */
    tfm_logit_screen_argmax(s, h6, 6, NULL, 0, scr, best6);
    for (int r = 0; r < 6; r++) tie6 &= best6[r] == 10;
    CHECK("screen: an exact tie in a step of 6 rows goes to the lower id", tie6, "row 0: %d", best6[0]);
    /* one ulp up in one weight of row 20: the two logits now differ in the last bits or not at all */
    for (int k = 0; k < D; k++) {
        float *w = W->data + (size_t)20 * D + k;
        *w = nextafterf(*w, *w > 0 ? INFINITY : -INFINITY);
        tfm_logit_screen_free(s);
        s = tfm_logit_screen_new(m);
        want = reference(m, h, NULL, 0, z);
        tfm_logit_screen_argmax(s, h, 1, NULL, 0, scr, &best);
        if (best != want) break;
        for (int r = 0; r < 6; r++) memcpy(h6 + r * D, h, sizeof h);
        tfm_logit_screen_argmax(s, h6, 6, NULL, 0, scr, best6);
        if ((best = best6[5]) != want) break;
    }
    CHECK("screen: one-ulp near-ties (1 and 6 rows), the fp32 first argmax", best == want, "screen %d, reference %d",
          best, want);
    tfm_logit_screen_free(s);
    free(scr);
}

static void test_flat_and_banned(tfm_mt_net *m) {
    const tfm_tensor *W, *b;
    m->vt->output_layer(m, &W, &b);
    float h[D] = {0}, z[V];
    for (int r = 0; b && r < V; r++) b->data[r] = 1.25f;
    tfm_logit_screen *s = tfm_logit_screen_new(m);
    float *scr = scratch_for(s, 1);
    int banned[2] = {0, 1}, best = -1;
    int fb = tfm_logit_screen_argmax(s, h, 1, banned, 2, scr, &best);
    int want = reference(m, h, banned, 2, z);
    CHECK("screen: a flat distribution falls back to the full layer", fb == 1 && best == want && best == 2,
          "fell back %d, screen %d, reference %d", fb, best, want);
    for (int r = 0; b && r < V; r++) b->data[r] = 0.5f * sinf(0.7f * (float)r);
    tfm_logit_screen_free(s);
    s = tfm_logit_screen_new(m);
    for (int k = 0; k < D; k++) h[k] = W->data[(size_t)77 * D + k] * 30.0f;
    int top = reference(m, h, NULL, 0, z), ban[1] = {top};
    want = reference(m, h, ban, 1, z);
    tfm_logit_screen_argmax(s, h, 1, ban, 1, scr, &best);
    CHECK("screen: the best id banned, the second best wins", best == want && best != top,
          "screen %d, reference %d, banned %d", best, want, top);
    h[5] = NAN;
    CHECK("screen: a non-finite hidden state is refused", tfm_logit_screen_argmax(s, h, 1, NULL, 0, scr, &best) == -1,
          "accepted");
    tfm_logit_screen_free(s);
    free(scr);
}

/* The activation's rounding at its worst: x = (63, +-0.49 step, ...) with row A's weights matching its signs, so
 * every small value rounds to 0 and all their contributions (about 0.49 step |w_A|_1) are lost, and row B wins in
 * int8 on the first component alone. A bound that undercounts the activation term (the wrong step: 8-bit where the
 * GEMM uses 7) drops A, the fp32 winner. In a step of 1 row (the row tiles) and of 6 rows (the panels). */
static void test_worst_rounding(void) {
    tfm_mt_net *m = make_model(0);
    const tfm_tensor *W, *b;
    m->vt->output_layer(m, &W, &b);
    memset(W->data, 0, sizeof(float) * W->size);
    if (b) memset(b->data, 0, sizeof(float) * b->size);
    float *wa = W->data + (size_t)100 * D, *wb = W->data + (size_t)200 * D, h[6 * D], z[V];
    wa[0] = 1.0f;
    for (int k = 1; k < D; k++) wa[k] = k % 2 ? 1.0f : -1.0f;
    int ok = 1, best[6];
    for (int rows = 1; rows <= 6; rows += 5) {
        float step = 63.0f / (float)TFM_Q8_ACT_LEVELS;   /* amax / levels */
        for (int r = 0; r < rows; r++) {
            h[r * D] = 63.0f;
            for (int k = 1; k < D; k++) h[r * D + k] = 0.49f * step * wa[k];
        }
        /* z_A = 63 + 0.49 step (D - 1), its int8 value 63; B's, on the grid, 2.5 below z_A: A is a candidate only
         * if the bound counts at least 1 / 2.3 of the activation's worst error (the bound's 2x margin included) */
        wb[0] = (63.0f + 0.49f * step * (D - 1) - 2.5f) / 63.0f;
        tfm_logit_screen *s = tfm_logit_screen_new(m);
        float *scr = scratch_for(s, 6);
        int want = reference(m, h, NULL, 0, z);
        tfm_logit_screen_argmax(s, h, rows, NULL, 0, scr, best);
        ok &= want == 100 && best[0] == 100 && best[rows - 1] == 100;
        if (!ok) printf("# %d rows: screen %d, reference %d\n", rows, best[0], want);
        free(scr);
        tfm_logit_screen_free(s);
    }
    CHECK("screen: the activation's worst rounding (1 and 6 rows) keeps the fp32 winner", ok, "see above");
    tfm_mt_net_free(m);
}

static void test_no_screen(void) {
    tfm_mt_net *m = make_model(0);
    const tfm_tensor *W, *b;
    m->vt->output_layer(m, &W, &b);
    int i = 0;
    while (m->params.t[i] != W) i++;
    tfm_params_quantize(&m->params, i);
    tfm_logit_screen *s = tfm_logit_screen_new(m);
    CHECK("screen: none for an int8 output layer", !s && strstr(tfm_last_error(), "int8"), "%s", tfm_last_error());
    tfm_mt_net_free(m);
    tfm_mt_config c;
    tfm_mt_config_default(&c);
    snprintf(c.arch, sizeof c.arch, "rnn");
    c.src_vocab = 40, c.tgt_vocab = 40, c.embed_size = 8, c.hidden_size = 8, c.n_layer = 1;
    m = tfm_mt_net_create(&c);
    s = m ? tfm_logit_screen_new(m) : NULL;
    CHECK("screen: none for an architecture without decode_hidden", m && !s, "%s", tfm_last_error());
    tfm_mt_net_free(m);
}

/* greedy search, with and without the screen: the same tokens (batch 1 and batches of 3) */
static void test_search(tfm_mt_net *m) {
    enum { N = 6 };
    int src_ids[64], src_off[N + 1] = {0}, k = 0;
    for (int i = 0; i < N; i++) {
        for (int t = 0; t < 3 + i; t++) src_ids[k++] = 4 + (i * 37 + t * 11) % (V - 4);
        src_off[i + 1] = k;
    }
    tfm_logit_screen *s = tfm_logit_screen_new(m);
    tfm_graph g;
    tfm_graph_init(&g, 0);
    g.grad_enabled = 0;
    int same = 1, batches[3] = {1, 3, 6};
    for (int bi = 0; bi < 3; bi++) {
        tfm_search_opts o;
        tfm_search_opts_default(&o);
        o.max_len = 12;
        tfm_hyps full[N], scr[N];
        int rc1 = tfm_search_nbest(m, &g, NULL, 0, src_ids, src_off, N, 64, batches[bi], &o, full);
        o.screen = s;
        int rc2 = tfm_search_nbest(m, &g, NULL, 0, src_ids, src_off, N, 64, batches[bi], &o, scr);
        same &= rc1 == 0 && rc2 == 0;
        for (int i = 0; same && i < N; i++) {
            int n = full[i].off[1] - full[i].off[0];
            same &= n == scr[i].off[1] - scr[i].off[0] && !memcmp(full[i].ids, scr[i].ids, sizeof(int) * (size_t)n);
        }
        for (int i = 0; rc1 == 0 && i < N; i++) tfm_hyps_free(&full[i]);
        for (int i = 0; rc2 == 0 && i < N; i++) tfm_hyps_free(&scr[i]);
    }
    CHECK("screen: greedy search with the screen gives the same tokens (batch 1, 3 and 6)", same, "differ");
    tfm_graph_free(&g);
    tfm_logit_screen_free(s);
}

/* Greedy generation from a GPT with the screen of its output layer (tfm_logit_screen_new_gpt, tfm_sample_opts.screen)
 * gives the ids of the full layer, through the prompt, cached one-token steps and windows recomputed after a slide
 * (block 24, 70 tokens: 19 one-token steps before the window first slides, then a recomputed window a token); most
 * one-token steps take the screen. */
static void test_gpt(void) {
    tfm_gpt_config c = {2000, 24, 2, 2, 32, 0.0f, TFM_ATTN_CAUSAL, 0.0f};
    tfm_gpt m;
    if (tfm_gpt_init(&m, &c)) {
        CHECK("screen: a GPT", 0, "%s", tfm_last_error());
        return;
    }
    tfm_gpt_init_weights(&m, 5);
    for (int i = 0; i < m.params.n; i++)   /* larger weights than the init's: peaked distributions */
        for (size_t k = 0; k < m.params.t[i]->size; k++) m.params.t[i]->data[k] *= 6;
    tfm_logit_screen *s = tfm_logit_screen_new_gpt(&m);
    CHECK("screen: built for a GPT's tied output layer", s && tfm_logit_screen_of_gpt(s, &m), "%s", tfm_last_error());
    const int prompt[5] = {17, 1999, 3, 512, 77}, N = 70;
    int ids[2][70], screened = 0;
    for (int k = 0; k < 2 && s; k++) {
        tfm_sample_opts o;
        tfm_sample_opts_default(&o);
        o.temperature = 0.0f;
        o.screen = k ? s : NULL;
        tfm_graph g;
        tfm_graph_init(&g, 1);
        tfm_gpt_stream st;
        int rc = tfm_gpt_stream_init(&st, &m, prompt, 5, N, &o);
        for (int t = 0; t < N && !rc; t++) rc = (ids[k][t] = tfm_gpt_stream_next(&st, &m, &g)) < 0;
        if (k) screened = st.screened;
        if (!rc) tfm_gpt_stream_free(&st);
        tfm_graph_free(&g);
    }
    CHECK("screen: greedy generation with the screen = the full layer's ids (70 tokens, windows sliding past 24)",
          s && !memcmp(ids[0], ids[1], sizeof ids[0]) && screened >= (24 - 5) * 3 / 4, "%d of the 19 one-token steps "
          "screened%s", screened,
          s && memcmp(ids[0], ids[1], sizeof ids[0]) ? ", ids differ" : "");
    tfm_logit_screen_free(s);
    tfm_gpt_free(&m);
}

int main(void) {
    tfm_mt_net *m = make_model(1);
    tfm_logit_screen *s = tfm_logit_screen_new(m);
    CHECK("screen: built for the Transformer", s != NULL && tfm_logit_screen_of(s, m), "%s", tfm_last_error());
    if (!s) return 1;
    test_random(m, s);
    tfm_logit_screen_free(s);
    test_search(m);
    test_flat_and_banned(m);
    test_ties(m);
    tfm_mt_net_free(m);
    test_no_screen();
    test_worst_rounding();
    test_gpt();
    CHECK_EXIT();
}
