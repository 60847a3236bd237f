/* The translator object (include/tfm/translator.h, src/decode/translator.c) over the search fixture's model
 * (tests/fixtures/search_small.tfm) with word vocabularies "s4".."s10" / "t4".."t12": text in and out equals the
 * id-level search; the model's stored decoding settings are the defaults; n-best with scores; target prefixes;
 * the attention of the best hypothesis equals the last layer's heads averaged in a teacher-forced pass; source
 * truncation is counted; blank lines; option errors name the field; two threads on one translator give the
 * serial results; the stored settings round-trip through a checkpoint and bad ones are refused; a loaded
 * translator, its block weights held packed, translates as the view does. */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "tfm/decode.h"
#include "tfm/kernels.h"
#include "tfm/translator.h"

#define FIX "tests/fixtures/search_small.tfm"

static tfm_container fx;

static const int *geta(const char *name) {
    const tfm_entry *e = tfm_container_get(&fx, name);
    if (!e) printf("FAIL fixture: entry %s missing\n", name), exit(1);
    return (const int *)e->data;
}

static void vocab(tfm_vocab *v, char side, int n) {
    char buf[1024] = "<pad>\n<bos>\n<eos>\n<unk>";
    for (int i = 4; i < n; i++) snprintf(buf + strlen(buf), sizeof buf - strlen(buf), "\n%c%d", side, i);
    if (tfm_vocab_deserialize(v, buf)) printf("FAIL vocab: %s\n", tfm_last_error()), exit(1);
}

/* the fixture's model as a translator checkpoint at path (word tokens split on spaces) */
static void make_model(tfm_mt_model *t) {
    memset(t, 0, sizeof *t);
    tfm_mt_config c;
    tfm_mt_config_default(&c);
#define CF(f) c.f = geta("config." #f)[0];
    CF(src_vocab) CF(tgt_vocab) CF(d_model) CF(n_head) CF(ffn) CF(n_layer) CF(pre_ln) CF(max_len)
#undef CF
    c.dropout = 0;
    t->model = tfm_mt_net_create(&c);
    if (!t->model || tfm_ckpt_get_params(&fx, &t->model->params, FIX)) printf("FAIL model: %s\n", tfm_last_error()), exit(1);
    vocab(&t->src_vocab, 's', c.src_vocab);
    vocab(&t->tgt_vocab, 't', c.tgt_vocab);
    t->tok_kind = TFM_TOK_SPACE;
}

/* the fixture's sources as text: "s5 s9 ..." */
static int sources(char lines[][128], const char **ptr) {
    const int *ids = geta("src_ids"), *off = geta("src_off");
    int n = (int)(tfm_container_get(&fx, "src_off")->nbytes / sizeof(int)) - 1;
    for (int s = 0; s < n; s++) {
        lines[s][0] = 0;
        for (int k = off[s]; k < off[s + 1]; k++)
            snprintf(lines[s] + strlen(lines[s]), 128 - strlen(lines[s]), "%ss%d", k > off[s] ? " " : "", ids[k]);
        ptr[s] = lines[s];
    }
    return n;
}

static char *ids_text(const int *ids, int n) {
    static char buf[1024];
    buf[0] = 0;
    for (int i = 0; i < n; i++) {
        const char *tok = ids[i] < 4 ? (const char *[]){"<pad>", "<bos>", "<eos>", "<unk>"}[ids[i]] : NULL;
        if (tok) snprintf(buf + strlen(buf), sizeof buf - strlen(buf), "%s%s", i ? " " : "", tok);
        else snprintf(buf + strlen(buf), sizeof buf - strlen(buf), "%st%d", i ? " " : "", ids[i]);
    }
    return buf;
}

/* the translator's n-best text and scores equal the id-level search */
static void test_equals_search(tfm_translator *tr, tfm_mt_model *mt) {
    char lines[16][128];
    const char *src[16];
    int n = sources(lines, src);
    const int *ids = geta("src_ids"), *off = geta("src_off");
    tfm_translate_options o;
    tfm_translate_options_default(&o);
    o.beam_size = 4, o.length_penalty = 0.6f, o.num_hypotheses = 3, o.return_scores = 1, o.max_decoding_length = 9;
    tfm_translation r[16];
    int rc = tfm_translator_translate_batch(tr, src, n, &o, r);
    tfm_search_opts so = {.beam = 4, .alpha = 0.6f, .max_len = 9, .num_hypotheses = 3};
    tfm_hyps h[16];
    tfm_graph g;
    tfm_graph_init(&g, 0);
    int rc2 = tfm_search_nbest(mt->model, &g, NULL, 0, ids, off, n, 200, 32, &so, h), same = !rc && !rc2;
    for (int s = 0; same && s < n; s++) {
        same = r[s].n_hypotheses == h[s].n;
        for (int i = 0; same && i < h[s].n; i++)
            same = !strcmp(r[s].hypotheses[i], ids_text(h[s].ids + h[s].off[i], h[s].off[i + 1] - h[s].off[i])) &&
                   r[s].scores[i] == h[s].score[i];
    }
    CHECK("translate_batch (beam 4, 3-best, scores) = the id-level search", same, "rc %d %d: %s", rc, rc2,
          rc ? tfm_last_error() : "");
    for (int s = 0; !rc && s < n; s++) tfm_translation_free(&r[s]);
    for (int s = 0; !rc2 && s < n; s++) tfm_hyps_free(&h[s]);
    tfm_graph_free(&g);
}

/* default options = the model's decode.beam / decode.alpha; explicit ones override them */
static void test_stored_defaults(tfm_translator *tr) {
    char lines[16][128];
    const char *src[16];
    int n = sources(lines, src);
    tfm_translation a[16], b[16], c[16];
    tfm_translate_options o;
    tfm_translate_options_default(&o);
    o.max_decoding_length = 9;
    int rc = tfm_translator_translate_batch(tr, src, n, &o, a);   /* the model says beam 4, alpha 0.6 */
    o.beam_size = 4, o.length_penalty = 0.6f;
    rc |= tfm_translator_translate_batch(tr, src, n, &o, b);
    o.beam_size = 1, o.length_penalty = 0;
    rc |= tfm_translator_translate_batch(tr, src, n, &o, c);
    int same = !rc, differs = 0;
    for (int s = 0; !rc && s < n; s++) {
        same &= !strcmp(a[s].hypotheses[0], b[s].hypotheses[0]);
        differs |= strcmp(a[s].hypotheses[0], c[s].hypotheses[0]) != 0;
        tfm_translation_free(&a[s]), tfm_translation_free(&b[s]), tfm_translation_free(&c[s]);
    }
    CHECK("default options use the model's decode.beam 4 / decode.alpha 0.6", same && differs, "rc %d same %d differs %d",
          rc, same, differs);
}

static void test_prefix_attention_truncation(tfm_translator *tr, tfm_mt_model *mt) {
    const char *src[3] = {"s5 s9 s4 s7 s7 s10 s6", "s8", "s4 s4 s5"};
    tfm_translate_options o;
    tfm_translate_options_default(&o);
    o.beam_size = 1, o.length_penalty = 0, o.max_decoding_length = 9;
    tfm_translation g[3], p[3];
    int rc = tfm_translator_translate_batch(tr, src, 3, &o, g);
    /* prefix = the greedy output's first word: the same output */
    char pre[3][64];
    const char *pp[3];
    for (int s = 0; s < 3; s++) {
        snprintf(pre[s], sizeof pre[s], "%s", rc ? "" : g[s].hypotheses[0]);
        char *sp = strchr(pre[s], ' ');
        if (sp) *sp = 0;
        pp[s] = pre[s];
    }
    o.target_prefix = pp;
    int rc2 = rc ? -1 : tfm_translator_translate_batch(tr, src, 3, &o, p), same = !rc && !rc2;
    for (int s = 0; same && s < 3; s++) same = !strcmp(g[s].hypotheses[0], p[s].hypotheses[0]);
    CHECK("target_prefix = the greedy output's first word: the same translation", same, "rc %d %d", rc, rc2);
    for (int s = 0; !rc2 && s < 3; s++) tfm_translation_free(&p[s]);
    const char *forced[3] = {"t12 t11 t10", "", "t5"};
    o.target_prefix = forced;
    o.beam_size = 3;
    int starts = (rc2 = tfm_translator_translate_batch(tr, src, 3, &o, p)) == 0;
    for (int s = 0; starts && s < 3; s++) starts = !strncmp(p[s].hypotheses[0], forced[s], strlen(forced[s]));
    CHECK("beam 3 with target_prefix: each translation starts with its prefix", starts, "rc %d: %s", rc2,
          rc2 ? tfm_last_error() : p[0].hypotheses[0]);
    for (int s = 0; !rc2 && s < 3; s++) tfm_translation_free(&p[s]);
    o.target_prefix = NULL;

    /* attention: (target tokens + <eos>) x (source tokens + <eos>), rows summing to 1, = a teacher-forced pass */
    o.return_attention = 1, o.beam_size = 1;
    rc2 = tfm_translator_translate_batch(tr, src, 1, &o, p);
    int ok = !rc2 && !rc && p[0].attention && p[0].n_source_tokens == 8 &&
             !strcmp(p[0].source_tokens[0], "s5") && !strcmp(p[0].source_tokens[7], "<eos>") &&
             !strcmp(p[0].target_tokens[p[0].n_target_tokens - 1], "<eos>");
    double worst = 0;
    if (ok) {
        int Ts = p[0].n_source_tokens, Tt = p[0].n_target_tokens, s[8] = {5, 9, 4, 7, 7, 10, 6, TFM_EOS}, tin[64], valid = Ts;
        tin[0] = TFM_BOS;
        for (int i = 1; i < Tt; i++) tin[i] = tfm_vocab_id(&mt->tgt_vocab, p[0].target_tokens[i - 1]);
        tfm_graph gr;
        tfm_graph_init(&gr, 0);
        gr.grad_enabled = 0;
        mt->model->keep_attention = 1;
        tfm_mt_net_forward(mt->model, &gr, s, &valid, 1, Ts, tin, Tt);
        mt->model->keep_attention = 0;
        tfm_attn_map maps[64];
        int nm = mt->model->vt->attention(mt->model, 0, maps, 64), last = -1;
        for (int k = 0; k < nm; k++)
            if (maps[k].kind == TFM_MAP_ENC_DEC) last = k;
        for (int i = 0; ok && i < Tt; i++) {
            double row = 0;
            for (int j = 0; j < Ts; j++) {
                double want = 0;
                for (int h = 0; h < maps[last].n_head; h++) want += maps[last].w[((size_t)h * Tt + i) * Ts + j];
                want /= maps[last].n_head;
                double d = fabs(want - p[0].attention[i * Ts + j]);
                worst = d > worst ? d : worst;
                row += p[0].attention[i * Ts + j];
            }
            ok &= fabs(row - 1) < 1e-5;
        }
        ok &= worst < 1e-6;
        tfm_graph_free(&gr);
    }
    CHECK("return_attention: last layer's enc-dec attention, heads averaged, rows sum to 1, with the tokens", ok,
          "rc %d, worst %.3g", rc2, worst);
    if (!rc2) tfm_translation_free(&p[0]);
    o.return_attention = 0;

    /* max_input_length 3: the 7-token source keeps 2 tokens + <eos>; the count says 5 were cut */
    o.max_input_length = 3;
    const char *cut[2] = {src[0], "s5 s9"};
    rc2 = tfm_translator_translate_batch(tr, cut, 2, &o, p);
    CHECK("max_input_length 3 cuts a 7-token source to its first 2 (source_truncated 5, same output)",
          !rc2 && p[0].source_truncated == 5 && p[1].source_truncated == 0 && !strcmp(p[0].hypotheses[0], p[1].hypotheses[0]),
          "rc %d, truncated %d", rc2, rc2 ? -1 : p[0].source_truncated);
    for (int s = 0; !rc2 && s < 2; s++) tfm_translation_free(&p[s]);
    for (int s = 0; !rc && s < 3; s++) tfm_translation_free(&g[s]);
}

static void test_blank_and_errors(tfm_translator *tr) {
    const char *src[3] = {"s5 s6", "  \t", ""};
    tfm_translation r[3];
    tfm_translate_options o;
    tfm_translate_options_default(&o);
    o.return_scores = 1;
    int rc = tfm_translator_translate_batch(tr, src, 3, &o, r);
    CHECK("blank and empty lines give one empty hypothesis", !rc && r[1].n_hypotheses == 1 && !r[1].hypotheses[0][0] &&
          !r[2].hypotheses[0][0] && r[2].n_hypotheses == 1 && r[1].scores[0] == 0, "rc %d", rc);
    for (int s = 0; !rc && s < 3; s++) tfm_translation_free(&r[s]);
    struct { const char *field; int beam, n_hyp, max_out, max_in; const char *text, *prefix; } bad[] = {
        {"beam_size", 65, 1, 50, 200, "s5", NULL}, {"num_hypotheses", 2, 3, 50, 200, "s5", NULL},
        {"max_decoding_length", 1, 1, -1, 200, "s5", NULL}, {"max_input_length", 1, 1, 50, 1, "s5", NULL},
        {"source[0]: invalid UTF-8 at byte 2", 1, 1, 50, 200, "s\xff", NULL},
        {"target_prefix[0]: 3 tokens, max_decoding_length is 3", 1, 1, 3, 200, "s5", "t5 t6 t7"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        tfm_translate_options_default(&o);
        o.beam_size = bad[k].beam, o.num_hypotheses = bad[k].n_hyp, o.max_decoding_length = bad[k].max_out;
        o.max_input_length = bad[k].max_in;
        const char *pre[1] = {bad[k].prefix};
        if (bad[k].prefix) o.target_prefix = pre;
        rc = tfm_translator_translate_batch(tr, &bad[k].text, 1, &o, r);
        char name[160];
        snprintf(name, sizeof name, "bad option: the error names '%s'", bad[k].field);
        CHECK(name, rc == -1 && strstr(tfm_last_error(), bad[k].field), "rc %d: %s", rc, tfm_last_error());
    }
}

/* two threads translating with one translator at once: the results of one after the other */
static void test_two_threads(tfm_translator *tr) {
    char lines[16][128];
    const char *src[16];
    int n = sources(lines, src);
    tfm_translate_options o[2];
    tfm_translate_options_default(&o[0]), tfm_translate_options_default(&o[1]);
    o[0].beam_size = 4, o[1].beam_size = 1;
    tfm_translation ser[2][16], par[2][16];
    int rc = tfm_translator_translate_batch(tr, src, n, &o[0], ser[0]) | tfm_translator_translate_batch(tr, src, n, &o[1], ser[1]);
    int prc[2] = {0, 0};
#pragma omp parallel num_threads(2)
    {
        int k = omp_get_thread_num();
        for (int rep = 0; rep < 3 && !prc[k]; rep++) {
            prc[k] = tfm_translator_translate_batch(tr, src, n, &o[k], par[k]);
            if (rep < 2 && !prc[k])
                for (int s = 0; s < n; s++) tfm_translation_free(&par[k][s]);
        }
    }
    int same = !rc && !prc[0] && !prc[1];
    for (int k = 0; same && k < 2; k++)
        for (int s = 0; same && s < n; s++) same = !strcmp(ser[k][s].hypotheses[0], par[k][s].hypotheses[0]);
    CHECK("two threads translating at once (beam 4 and greedy) = one after the other", same, "rc %d %d %d", rc, prc[0], prc[1]);
    for (int k = 0; k < 2; k++)
        for (int s = 0; s < n; s++) {
            if (!rc) tfm_translation_free(&ser[k][s]);
            if (!prc[k]) tfm_translation_free(&par[k][s]);
        }
}

/* attention passes while another thread decodes with the same translator: every map equals the serial one
 * (the attention pass takes the model for itself; it sets the model's keep_attention) */
static void test_attention_while_decoding(tfm_translator *tr) {
    const char *src[2] = {"s5 s9 s4 s7 s7 s10 s6", "s8 s4"};
    tfm_translate_options o;
    tfm_translate_options_default(&o);
    o.beam_size = 2, o.return_attention = 1;
    tfm_translation want;
    int rc = tfm_translator_translate_batch(tr, src, 1, &o, &want), bad = 0, failed = 0;
    size_t cells = rc ? 0 : (size_t)want.n_source_tokens * want.n_target_tokens;
#pragma omp parallel num_threads(2)
    {
        tfm_translate_options oo = o;
        oo.return_attention = omp_get_thread_num() == 1;
        for (int rep = 0; rep < 200 && !rc; rep++) {
            tfm_translation r[2];
            int n = oo.return_attention ? 1 : 2;
            if (tfm_translator_translate_batch(tr, src, n, &oo, r)) {
#pragma omp atomic
                failed++;
                continue;
            }
            if (oo.return_attention && (r[0].n_source_tokens * r[0].n_target_tokens != (int)cells ||
                                        memcmp(r[0].attention, want.attention, cells * sizeof(float))))
#pragma omp atomic
                bad++;
            for (int i = 0; i < n; i++) tfm_translation_free(&r[i]);
        }
    }
    CHECK("200 attention passes while another thread decodes: every map is the serial one", !rc && !bad && !failed,
          "rc %d, %d maps differ, %d calls failed", rc, bad, failed);
    if (!rc) tfm_translation_free(&want);
}

static void test_checkpoint_settings(tfm_mt_model *mt) {
    char path[] = "/tmp/tfm_translator_XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    tfm_container c;
    tfm_container_init(&c);
    tfm_mt_model_put(&c, mt);
    int rc = tfm_container_save(&c, path);
    tfm_container_free(&c);
    tfm_translator *t = rc ? NULL : tfm_translator_load(path, NULL);
    const tfm_mt_model *m = t ? tfm_translator_model(t) : NULL;
    CHECK("decode.beam/alpha and the language pair round-trip through a checkpoint",
          m && m->decode_beam == 4 && m->decode_alpha == 0.6f && !strcmp(m->src_lang, "xx") && !strcmp(m->tgt_lang, "yy-z"),
          "%s", t ? "values differ" : tfm_last_error());
    CHECK("the tfm_mt_model accessors read the same values", m && tfm_mt_model_decode_beam(m) == 4 &&
          tfm_mt_model_decode_alpha(m) == 0.6f && !strcmp(tfm_mt_model_src_lang(m), "xx") &&
          !strcmp(tfm_mt_model_tgt_lang(m), "yy-z") && tfm_mt_model_bpe(m) == m->bpe, "%s", t ? "differ" : "no model");
    tfm_translator_free(t);
    const char *bad[][3] = {{"decode.beam", "0", "decode.beam must be in 1..64"},
                            {"meta.src_lang", "d e", "meta.src_lang 'd e' is not a language code"}};
    for (int k = 0; k < 2; k++) {
        tfm_container_init(&c);
        tfm_mt_model copy = *mt;
        if (k == 0) copy.decode_beam = 0;   /* put skips decode.* then: add a bad one by hand */
        else snprintf(copy.src_lang, sizeof copy.src_lang, "%s", bad[k][1]);
        tfm_mt_model_put(&c, &copy);
        if (k == 0) tfm_container_add_int(&c, "decode.beam", 0), tfm_container_add_float(&c, "decode.alpha", 0);
        rc = tfm_container_save(&c, path);
        tfm_container_free(&c);
        t = rc ? NULL : tfm_translator_load(path, NULL);
        char name[160];
        snprintf(name, sizeof name, "checkpoint with %s = '%s' refused", bad[k][0], bad[k][1]);
        CHECK(name, !t && strstr(tfm_last_error(), bad[k][2]), "%s", tfm_last_error());
        tfm_translator_free(t);
    }
    /* decode.ensemble names files beside the checkpoint: anything else is refused before a file is opened */
    const char *names[] = {"../m.tfm", "a/b.tfm", "", ".hidden", "-x", "m.tfm\n", "m.tfm\n\nn.tfm",
                           "a\nb\nc\nd\ne\nf\ng\nh\ni\nj\nk\nl\nm\nn\no\np"};
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
        tfm_container_init(&c);
        tfm_mt_model copy = *mt;
        tfm_mt_model_put(&c, &copy);
        tfm_container_add_str(&c, "decode.ensemble", names[k]);
        rc = tfm_container_save(&c, path);
        tfm_container_free(&c);
        t = rc ? NULL : tfm_translator_load(path, NULL);
        char name[160];
        snprintf(name, sizeof name, "checkpoint with decode.ensemble '%.30s' refused", names[k]);
        for (char *q = name; *q; q++) *q = *q == '\n' ? '|' : *q;
        CHECK(name, !t && strstr(tfm_last_error(), "decode.ensemble"), "%s", t ? "loaded" : tfm_last_error());
        tfm_translator_free(t);
    }
    unlink(path);
}

/* A translator loaded from a checkpoint holds the blocks' weights packed (those whose rows fill 16-wide panels:
 * here the attention's 16 x 16 and the FFN's 16 x 24, not its 24 x 16) and translates as the view does: the same
 * n-best text, scores and attention maps to float accuracy (a batch of one multiplies by a GEMV over the panels). */
static void test_held_weights(tfm_translator *view, tfm_mt_model *mt) {
    char path[] = "/tmp/tfm_translator_XXXXXX";
    close(mkstemp(path));
    tfm_container c;
    tfm_container_init(&c);
    tfm_mt_model_put(&c, mt);
    int rc = tfm_container_save(&c, path);
    tfm_container_free(&c);
    tfm_translator_params p;
    tfm_translator_params_default(&p);
    p.threads = 2, p.max_batch_size = 3;
    tfm_translator *t = rc ? NULL : tfm_translator_load(path, &p);
    unlink(path);
    CHECK("held: the checkpoint loads", t != NULL, "%s", tfm_last_error());
    if (!t) return;
    const tfm_params *ps = &tfm_translator_model(t)->model->params;
    int held = 0, kept = 0;
    for (int i = 0; i < ps->n; i++)
        if (ps->t[i]->ndim == 2 && strstr(ps->t[i]->name, ".blocks."))
            held += ps->t[i]->packed && !ps->t[i]->data, kept += ps->t[i]->data != NULL;
    int want = tfm_gemm_packed_b_floats(1, 1) ? 1 : 0;   /* an OpenBLAS build holds none */
    CHECK("held: the blocks' 16-row weights are held packed, the 24-row ones kept", (held > 0) == want && kept > 0,
          "held %d, kept %d", held, kept);
    char lines[16][128];
    const char *src[16];
    int n = sources(lines, src), bad = 0;
    double worst = 0;
    for (int beam = 1; beam <= 4; beam += 3)
        for (int one = 0; one <= 1; one++) {   /* batches of 3, then one sentence a call */
            tfm_translate_options o;
            tfm_translate_options_default(&o);
            o.beam_size = beam, o.num_hypotheses = beam, o.return_scores = 1, o.return_attention = 1;
            for (int s0 = 0; s0 < n; s0 += one ? 1 : n) {
                int k = one ? 1 : n;
                tfm_translation a[16], b[16];
                if (tfm_translator_translate_batch(view, src + s0, k, &o, a) ||
                    tfm_translator_translate_batch(t, src + s0, k, &o, b)) {
                    bad++;
                    continue;
                }
                for (int i = 0; i < k; i++) {
                    bad += a[i].n_hypotheses != b[i].n_hypotheses || a[i].n_source_tokens != b[i].n_source_tokens ||
                           a[i].n_target_tokens != b[i].n_target_tokens;
                    for (int h = 0; h < a[i].n_hypotheses && h < b[i].n_hypotheses; h++)
                        bad += strcmp(a[i].hypotheses[h], b[i].hypotheses[h]) != 0,
                            worst = fmax(worst, fabs(a[i].scores[h] - b[i].scores[h]));
                    int cells = a[i].n_source_tokens * a[i].n_target_tokens;
                    for (int j = 0; j < cells && !bad; j++) worst = fmax(worst, fabs(a[i].attention[j] - b[i].attention[j]));
                    tfm_translation_free(&a[i]), tfm_translation_free(&b[i]);
                }
            }
        }
    CHECK("held: greedy and beam 4, batches and single sentences: the view's n-best, scores and attention", !bad &&
          worst < 1e-4, "%d differ, max score/attention difference %g", bad, worst);
    tfm_translator_free(t);
}

int main(void) {
    if (tfm_container_load(&fx, FIX)) {
        printf("FAIL fixture %s: %s\n", FIX, tfm_last_error());
        return 1;
    }
    tfm_mt_model mt;
    make_model(&mt);
    mt.decode_beam = 4, mt.decode_alpha = 0.6f;
    snprintf(mt.src_lang, sizeof mt.src_lang, "xx"), snprintf(mt.tgt_lang, sizeof mt.tgt_lang, "yy-z");
    tfm_translator_params p;
    tfm_translator_params_default(&p);
    p.threads = 2, p.max_batch_size = 2;
    tfm_translator *tr = tfm_translator_view(&mt, &p);
    CHECK("a translator over a model in memory", tr != NULL, "%s", tfm_last_error());
    if (tr) {
        test_equals_search(tr, &mt);
        test_stored_defaults(tr);
        test_prefix_attention_truncation(tr, &mt);
        test_blank_and_errors(tr);
        test_two_threads(tr);
        test_attention_while_decoding(tr);
        test_held_weights(tr, &mt);
        tfm_translator_free(tr);
    }
    test_checkpoint_settings(&mt);
    tfm_mt_model_free(&mt);
    tfm_container_free(&fx);
    CHECK_EXIT();
}
