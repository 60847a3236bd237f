/* Ensembles at decoding time (tfm_translator_load_ensemble, tfm_search_nbest_ensemble; issue 35 item 2) over the
 * search fixture's model (tests/fixtures/search_small.tfm, word vocabularies "s4".."s10" / "t4".."t12") and a
 * second model of its shape with perturbed weights, both written as checkpoints here:
 *   - an ensemble of one model is the model (greedy and beam n-best: the same texts and scores);
 *   - an ensemble of two copies of one model is the model (the same texts, scores within 1e-5), also decoded on
 *     two threads;
 *   - two different models give output unlike either model's, and the score of a forced hypothesis is the sum
 *     over its steps of the mean of the two models' log-probabilities (each model's teacher-forced log-softmax,
 *     computed here in double); a hypothesis of <eos> alone checks one step;
 *   - mismatched tokenizers are refused with one line naming both files (target vocabulary, tokenizer kind),
 *     as are an imported MarianMT member and return_attention. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "tfm/decode.h"
#include "tfm/interchange.h"
#include "tfm/translator.h"

#define FIX "tests/fixtures/search_small.tfm"
#define MAXS 16

static tfm_container fx;

static const int *geta(const char *name) {
    const tfm_entry *e = tfm_container_get(&fx, name);
    if (!e) printf("FAIL fixture: entry %s missing\n", name), exit(1);
    return (const int *)e->data;
}

/* "<pad> <bos> <eos> <unk> s4 s5 ..." (side 's'/'t'); token `renamed` (if > 0) is "u<id>" instead */
static void vocab(tfm_vocab *v, char side, int n, int renamed) {
    char buf[1024] = "<pad>\n<bos>\n<eos>\n<unk>";
    for (int i = 4; i < n; i++)
        snprintf(buf + strlen(buf), sizeof buf - strlen(buf), "\n%c%d", i == renamed ? 'u' : side, i);
    if (tfm_vocab_deserialize(v, buf)) printf("FAIL vocab: %s\n", tfm_last_error()), exit(1);
}

/* The fixture's model (word tokens split on spaces); with `perturb`, every weight moved by up to 0.3 (a model
 * that translates differently) */
static void make_model(tfm_mt_model *t, int perturb) {
    memset(t, 0, sizeof *t);
    tfm_mt_config c;
    tfm_mt_config_default(&c);
#define CF(f) c.f = geta("config." #f)[0];
    CF(src_vocab) CF(tgt_vocab) CF(d_model) CF(n_head) CF(ffn) CF(n_layer) CF(pre_ln) CF(max_len)
#undef CF
    c.dropout = 0;
    t->model = tfm_mt_net_create(&c);
    if (!t->model || tfm_ckpt_get_params(&fx, &t->model->params, FIX)) printf("FAIL model: %s\n", tfm_last_error()), exit(1);
    for (int k = 0; perturb && k < t->model->params.n; k++) {
        tfm_tensor *w = t->model->params.t[k];
        for (size_t i = 0; i < w->size; i++) w->data[i] += 0.3f * sinf(0.37f * (float)i + (float)k);
    }
    vocab(&t->src_vocab, 's', c.src_vocab, 0);
    vocab(&t->tgt_vocab, 't', c.tgt_vocab, 0);
    t->tok_kind = TFM_TOK_SPACE;
}

static void save(const tfm_mt_model *mt, const char *path) {
    tfm_container c;
    tfm_container_init(&c);
    tfm_mt_model_put(&c, mt);
    if (tfm_container_save(&c, path)) printf("FAIL save %s: %s\n", path, tfm_last_error()), exit(1);
    tfm_container_free(&c);
}

/* the fixture's sources as text: "s5 s9 ..." */
static int sources(char lines[][128], const char **ptr) {
    const int *ids = geta("src_ids"), *off = geta("src_off");
    int n = (int)(tfm_container_get(&fx, "src_off")->nbytes / sizeof(int)) - 1;
    if (n > MAXS) n = MAXS;
    for (int s = 0; s < n; s++) {
        lines[s][0] = 0;
        for (int k = off[s]; k < off[s + 1]; k++)
            snprintf(lines[s] + strlen(lines[s]), 128 - strlen(lines[s]), "%ss%d", k > off[s] ? " " : "", ids[k]);
        ptr[s] = lines[s];
    }
    return n;
}

/* Decoding settings the comparisons run: greedy, and beam 4 with 3 hypotheses and a length penalty. */
static void opts(tfm_translate_options *o, int beam) {
    tfm_translate_options_default(o);
    o->beam_size = beam, o->length_penalty = beam > 1 ? 0.6f : 0.0f, o->num_hypotheses = beam > 1 ? 3 : 1;
    o->return_scores = 1, o->max_decoding_length = 9;
}

/* Do a and b translate every source the same way: the same hypotheses, scores within tol? *diff: the largest
 * score difference; *n_diff: sources whose best hypotheses differ. */
static int same_output(tfm_translator *a, tfm_translator *b, int beam, float tol, double *diff, int *n_diff) {
    char lines[MAXS][128];
    const char *src[MAXS];
    int n = sources(lines, src);
    tfm_translate_options o;
    opts(&o, beam);
    tfm_translation ra[MAXS], rb[MAXS];
    int rc = tfm_translator_translate_batch(a, src, n, &o, ra);
    if (rc) return printf("  translate: %s\n", tfm_last_error()), 0;
    if (tfm_translator_translate_batch(b, src, n, &o, rb)) {
        printf("  translate: %s\n", tfm_last_error());
        for (int s = 0; s < n; s++) tfm_translation_free(&ra[s]);
        return 0;
    }
    int same = 1;
    *diff = 0, *n_diff = 0;
    for (int s = 0; s < n; s++) {
        *n_diff += strcmp(ra[s].hypotheses[0], rb[s].hypotheses[0]) != 0;
        same &= ra[s].n_hypotheses == rb[s].n_hypotheses;
        for (int i = 0; same && i < ra[s].n_hypotheses; i++) {
            same &= !strcmp(ra[s].hypotheses[i], rb[s].hypotheses[i]);
            double d = fabs((double)ra[s].scores[i] - rb[s].scores[i]);
            if (!(d <= *diff)) *diff = d;
        }
        tfm_translation_free(&ra[s]), tfm_translation_free(&rb[s]);
    }
    return same && *diff <= tol;
}

static tfm_translator *ensemble(const char *const *paths, int n, int threads) {
    tfm_translator_params p;
    tfm_translator_params_default(&p);
    p.threads = threads, p.max_batch_size = 2;   /* several batches: the worker graphs decode them in parallel */
    tfm_translator *t = tfm_translator_load_ensemble(paths, n, &p);
    if (!t) printf("  load_ensemble: %s\n", tfm_last_error());
    return t;
}

static void test_one_and_copies(const char *pa, const char *pa2) {
    tfm_translator *model = ensemble(&pa, 1, 1);
    const char *one[1] = {pa}, *two[2] = {pa, pa2};
    tfm_translator *e1 = ensemble(one, 1, 1), *e2 = ensemble(two, 2, 1), *e2t = ensemble(two, 2, 2);
    if (!model || !e1 || !e2 || !e2t) {
        CHECK("load the model and its ensembles", 0, "see above");
        goto end;
    }
    CHECK("an ensemble of one checkpoint holds one model, of two copies two",
          tfm_translator_n_models(e1) == 1 && tfm_translator_n_models(e2) == 2 && tfm_translator_member(e2, 1) &&
              !tfm_translator_member(e2, 2),
          "%d and %d models", tfm_translator_n_models(e1), tfm_translator_n_models(e2));
    double d;
    int nd;
    for (int beam = 1; beam <= 4; beam += 3) {
        char name[160];
        snprintf(name, sizeof name, "%s: an ensemble of one model = the model (texts and scores)",
                 beam == 1 ? "greedy" : "beam 4, 3-best");
        CHECK(name, same_output(model, e1, beam, 0.0f, &d, &nd), "score diff %g", d);
        snprintf(name, sizeof name, "%s: an ensemble of two copies = the model (texts; scores within 1e-5)",
                 beam == 1 ? "greedy" : "beam 4, 3-best");
        CHECK(name, same_output(model, e2, beam, 1e-5f, &d, &nd), "score diff %g", d);
        snprintf(name, sizeof name, "%s: two copies on 2 threads = on 1 thread (texts and scores)",
                 beam == 1 ? "greedy" : "beam 4, 3-best");
        CHECK(name, same_output(e2, e2t, beam, 0.0f, &d, &nd), "score diff %g", d);
    }
end:
    tfm_translator_free(model), tfm_translator_free(e1), tfm_translator_free(e2), tfm_translator_free(e2t);
}

/* log-softmax (double) of model m's logits for tin (Tt tokens) after the source src (n tokens, <eos> appended):
 * lp[t * V + v] */
static void teacher_forced(tfm_mt_net *m, const int *src, int n, const int *tin, int Tt, double *lp) {
    int s[64], Ts = n + 1, V = m->cfg.tgt_vocab;
    memcpy(s, src, sizeof(int) * (size_t)n);
    s[n] = TFM_EOS;
    tfm_graph g;
    tfm_graph_init(&g, 0);
    g.grad_enabled = 0, g.training = 0;
    tfm_tensor *y = tfm_mt_net_forward(m, &g, s, &Ts, 1, Ts, tin, Tt);
    for (int t = 0; t < Tt; t++) {
        const float *x = y->data + (size_t)t * V;
        double mx = x[0], sum = 0;
        for (int v = 1; v < V; v++) mx = x[v] > mx ? x[v] : mx;
        for (int v = 0; v < V; v++) sum += exp(x[v] - mx);
        for (int v = 0; v < V; v++) lp[(size_t)t * V + v] = x[v] - mx - log(sum);
    }
    tfm_graph_free(&g);
}

/* Forced hypotheses [p] for every token p (and [] for p = <eos>) of one source, greedy with max_len 1: the
 * ensemble's score is mean lp(p) + mean lp(<eos> | p), the models' log-probabilities taken separately. */
static void test_mean_of_steps(tfm_mt_model *a, tfm_mt_model *b) {
    const int *ids = geta("src_ids"), *off = geta("src_off");
    int n_src = off[1] - off[0], V = a->model->cfg.tgt_vocab, n = V - 2;   /* p = 2 (<eos>) .. V-1 */
    int src_off[64], pre_ids[64], pre_off[64], *src = malloc(sizeof(int) * (size_t)n * n_src);
    for (int i = 0; i <= n; i++) src_off[i] = i * n_src, pre_off[i] = i;
    for (int i = 0; i < n; i++) memcpy(src + (size_t)i * n_src, ids, sizeof(int) * (size_t)n_src), pre_ids[i] = i + 2;
    tfm_mt_net *ms[3] = {a->model, b->model, a->model};
    tfm_search_opts o = {.beam = 1, .max_len = 1, .num_hypotheses = 1, .prefix_ids = pre_ids, .prefix_off = pre_off};
    tfm_hyps ens[64], one[2][64];
    tfm_graph g;
    tfm_graph_init(&g, 0);
    int rc = tfm_search_nbest_ensemble(ms, 2, &g, NULL, 0, src, src_off, n, 100, 4, &o, ens);
    int rc1 = tfm_search_nbest(a->model, &g, NULL, 0, src, src_off, n, 100, 4, &o, one[0]);
    int rc2 = tfm_search_nbest(b->model, &g, NULL, 0, src, src_off, n, 100, 4, &o, one[1]);
    double worst = 0, eos_err = 1, most_unlike = 0, fairseq_gap = 0;
    for (int i = 0; !rc && !rc1 && !rc2 && i < n; i++) {
        int p = i + 2, tin[2] = {TFM_BOS, p};
        double la[2 * 64], lb[2 * 64];
        teacher_forced(a->model, ids, n_src, tin, 2, la);
        teacher_forced(b->model, ids, n_src, tin, 2, lb);
        double want = 0.5 * (la[p] + lb[p]) + (p == TFM_EOS ? 0.0 : 0.5 * (la[V + TFM_EOS] + lb[V + TFM_EOS]));
        double err = fabs(ens[i].score[0] - want);
        worst = err > worst ? err : worst;
        if (p == TFM_EOS) eos_err = err;
        double ua = fabs(ens[i].score[0] - one[0][i].score[0]), ub = fabs(ens[i].score[0] - one[1][i].score[0]);
        most_unlike = fmax(most_unlike, fmin(ua, ub));
        /* fairseq's average of probabilities, log(mean p), differs from the mean of log-probabilities */
        fairseq_gap = fmax(fairseq_gap, fabs(log(0.5 * (exp(la[p]) + exp(lb[p]))) - 0.5 * (la[p] + lb[p])));
    }
    CHECK("one step: the ensemble's log-probability of <eos> = the mean of the two models' (within 1e-4)",
          !rc && !rc1 && !rc2 && eos_err <= 1e-4, "rc %d %d %d, error %g", rc, rc1, rc2, eos_err);
    CHECK("two steps, every first token: the ensemble's score = the sum of the steps' mean log-probabilities "
          "(within 1e-4)", !rc && !rc1 && !rc2 && worst <= 1e-4, "largest error %g", worst);
    CHECK("the two models' scores differ from the ensemble's, and log(mean p) from mean log p (the check can fail)",
          most_unlike > 1e-3 && fairseq_gap > 1e-3, "ensemble vs nearest model %g, log mean p vs mean log p %g",
          most_unlike, fairseq_gap);
    /* a third member with another vocabulary size is refused by the search itself */
    tfm_mt_config c = a->model->cfg;
    c.tgt_vocab += 1;
    tfm_mt_net *bigger = tfm_mt_net_create(&c);
    ms[2] = bigger;
    tfm_hyps none[64];
    int rc3 = bigger ? tfm_search_nbest_ensemble(ms, 3, &g, NULL, 0, src, src_off, n, 100, 4, &o, none) : 0;
    CHECK("search: a member with another target vocabulary size is refused",
          rc3 == -1 && strstr(tfm_last_error(), "model 3") && strstr(tfm_last_error(), "tgt_vocab"), "rc %d: %s", rc3,
          tfm_last_error());
    tfm_mt_net_free(bigger);
    for (int i = 0; i < n; i++) {
        if (!rc) tfm_hyps_free(&ens[i]);
        if (!rc1) tfm_hyps_free(&one[0][i]);
        if (!rc2) tfm_hyps_free(&one[1][i]);
    }
    tfm_graph_free(&g);
    free(src);
}

static void test_two_models(const char *pa, const char *pb) {
    const char *two[2] = {pa, pb};
    tfm_translator *ma = ensemble(&pa, 1, 1), *mb = ensemble(&pb, 1, 1), *e = ensemble(two, 2, 2);
    if (!ma || !mb || !e) {
        CHECK("load two models and their ensemble", 0, "see above");
    } else {
        for (int beam = 1; beam <= 4; beam += 3) {
            double d;
            int nda, ndb;
            same_output(ma, e, beam, 0, &d, &nda);
            same_output(mb, e, beam, 0, &d, &ndb);
            char name[160];
            snprintf(name, sizeof name, "%s: two different models: the ensemble's output differs from each model's",
                     beam == 1 ? "greedy" : "beam 4");
            CHECK(name, nda > 0 && ndb > 0, "sentences unlike model A's %d, unlike model B's %d", nda, ndb);
        }
    }
    tfm_translator_free(ma), tfm_translator_free(mb), tfm_translator_free(e);
}

/* Is the last error one line naming both files and containing `what`? */
static int one_line_naming(const char *a, const char *b, const char *what) {
    const char *e = tfm_last_error();
    return strstr(e, a) && strstr(e, b) && strstr(e, what) && !strchr(e, '\n');
}

static void test_refused(tfm_mt_model *mt, const char *pa, const char *pb, const char *dir) {
    char pc[256], pd[256], pm[256];
    snprintf(pc, sizeof pc, "%s/other_vocab.tfm", dir), snprintf(pd, sizeof pd, "%s/other_tok.tfm", dir);
    snprintf(pm, sizeof pm, "%s/marian.tfm", dir);
    if (tfm_import_hf("tests/fixtures/hf_marian_tiny", pm)) printf("FAIL import marian: %s\n", tfm_last_error());
    tfm_vocab keep = mt->tgt_vocab;
    vocab(&mt->tgt_vocab, 't', mt->model->cfg.tgt_vocab, 7);   /* target token 7 is "u7" */
    save(mt, pc);
    tfm_vocab_free(&mt->tgt_vocab);
    mt->tgt_vocab = keep;
    mt->tok_kind = TFM_TOK_MOSES;
    save(mt, pd);
    mt->tok_kind = TFM_TOK_SPACE;

    const char *bad_vocab[3] = {pa, pb, pc}, *bad_tok[2] = {pa, pd}, *marian[2] = {pa, pm};
    tfm_translator *t = tfm_translator_load_ensemble(bad_vocab, 3, NULL);
    CHECK("a member with another target vocabulary is refused: one line naming both files and the token",
          !t && one_line_naming(pa, pc, "target token 7 is 't7'"), "%s", tfm_last_error());
    tfm_translator_free(t);
    t = tfm_translator_load_ensemble(bad_tok, 2, NULL);
    CHECK("a member with another tokenizer kind is refused: one line naming both files",
          !t && one_line_naming(pa, pd, "tokenizer.kind space vs moses"), "%s", tfm_last_error());
    tfm_translator_free(t);
    t = tfm_translator_load_ensemble(marian, 2, NULL);
    CHECK("an imported MarianMT member is refused", !t && strstr(tfm_last_error(), pm) &&
          strstr(tfm_last_error(), "MarianMT"), "%s", tfm_last_error());
    tfm_translator_free(t);
    t = tfm_translator_load_ensemble(bad_vocab, 0, NULL);
    CHECK("an ensemble of 0 models is refused", !t && strstr(tfm_last_error(), "1..16"), "%s", tfm_last_error());
    const char *two[2] = {pa, pb}, *src[1] = {"s5 s6"};
    t = tfm_translator_load_ensemble(two, 2, NULL);
    tfm_translate_options o;
    tfm_translate_options_default(&o);
    o.return_attention = 1;
    tfm_translation r[1];
    int rc = t ? tfm_translator_translate_batch(t, src, 1, &o, r) : 0;
    CHECK("return_attention is refused for an ensemble", rc == -1 && strstr(tfm_last_error(), "return_attention") &&
          strstr(tfm_last_error(), "ensemble"), "rc %d: %s", rc, tfm_last_error());
    tfm_translator_free(t);
    unlink(pc), unlink(pd), unlink(pm);
}

int main(void) {
    if (tfm_container_load(&fx, FIX)) {
        printf("FAIL fixture %s: %s\n", FIX, tfm_last_error());
        return 1;
    }
    char dir[] = "/tmp/tfm_ensemble_XXXXXX", pa[256], pa2[256], pb[256];
    if (!mkdtemp(dir)) return printf("FAIL mkdtemp\n"), 1;
    snprintf(pa, sizeof pa, "%s/a.tfm", dir), snprintf(pa2, sizeof pa2, "%s/a_copy.tfm", dir);
    snprintf(pb, sizeof pb, "%s/b.tfm", dir);
    tfm_mt_model a, b;
    make_model(&a, 0), make_model(&b, 1);
    save(&a, pa), save(&a, pa2), save(&b, pb);
    test_one_and_copies(pa, pa2);
    test_two_models(pa, pb);
    test_mean_of_steps(&a, &b);
    test_refused(&a, pa, pb, dir);
    tfm_mt_model_free(&a), tfm_mt_model_free(&b);
    unlink(pa), unlink(pa2), unlink(pb), rmdir(dir);
    tfm_container_free(&fx);
    CHECK_EXIT();
}
