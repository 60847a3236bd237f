/* Hugging Face imports (issue 31): tfm import of the tiny GPT-2 and MarianMT folders that the PyTorch twins
 * wrote (tests/fixtures/hf_*_tiny/, made by scripts/hf_check.py --write-fixture) reproduces the twins'
 * logits (relative error <= 1e-4), greedy continuation (GPT-2) and greedy and beam-4 translations (Marian,
 * ids compared with tfm's search semantics, which the twin mirrors: scripts/hf_marian_twin.py).
 *
 * Tool mode for scripts/hf_check.py (the full-shape checks):
 *   test_hf_import --gpt MODEL.tfm IN.tfm OUT.tfm   IN: x (1,T) ids [, n_new]  OUT: logits (T,V) [, greedy]
 *   test_hf_import --s2s MODEL.tfm IN.tfm OUT.tfm   IN: src (B,Ts) with </s> and padding, src_valid (B),
 *                   tgt_in (B,Tt) [, beams (k...), max_len]   OUT: logits (B,Tt,V) [, out.K / off.K per beam K:
 *                   the translations of the B sources (without their </s>), tfm_search_ids] */
#include "check.h"
#include "tfm/translator.h"
#include "tfm/decode.h"
#include "tfm/interchange.h"
#include "tfm/train.h"
#include <unistd.h>

static char tmpdir[256];

static const char *tmp(const char *name) {
    static char buf[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", tmpdir, name);
    return buf[k];
}

/* ------------------------------------------------------------------ running the models */

typedef struct {
    float *logits;
    size_t n_logits;
    int *greedy;             /* GPT: n_new ids */
    int n_greedy;
    int *ids[4], *off[4];    /* s2s: per beam setting, the translations' ids and offsets (B+1) */
    int n_ids[4];
} results;

static void results_free(results *r) {
    free(r->logits);
    free(r->greedy);
    for (int k = 0; k < 4; k++) free(r->ids[k]), free(r->off[k]);
    memset(r, 0, sizeof *r);
}

static const tfm_entry *need(const tfm_container *in, const char *name, int ndim) {
    const tfm_entry *e = tfm_container_get(in, name);
    if (!e || e->dtype != TFM_DT_I32 || (ndim && e->ndim != ndim))
        return tfm_set_error("input: need %s (i32, %d dims)", name, ndim), NULL;
    return e;
}

static float *copy_out(const tfm_tensor *t, size_t *n) {
    float *p = malloc(t->size * sizeof(float));
    if (p) memcpy(p, t->data, t->size * sizeof(float)), *n = t->size;
    return p;
}

static int run_gpt(const char *path, const tfm_container *in, results *r) {
    const tfm_entry *x = need(in, "x", 2), *nn = tfm_container_get(in, "n_new");
    tfm_gpt m;
    if (!x || tfm_gpt_load(&m, NULL, NULL, NULL, path)) return -1;
    tfm_graph g;
    tfm_graph_init(&g, 1);
    g.grad_enabled = 0;
    int T = x->shape[1], rc = 0;
    r->logits = copy_out(tfm_gpt_forward(&g, &m, x->data, 1, T), &r->n_logits);
    if (nn) {
        tfm_sample_opts o;
        tfm_sample_opts_default(&o);
        o.temperature = 0;
        r->n_greedy = ((const int *)nn->data)[0];
        r->greedy = malloc(sizeof(int) * (size_t)(r->n_greedy > 0 ? r->n_greedy : 1));
        rc = tfm_gpt_generate(&m, &g, x->data, T, r->n_greedy, &o, NULL, NULL, r->greedy) == r->n_greedy ? 0 : -1;
    }
    tfm_graph_free(&g);
    tfm_gpt_free(&m);
    return rc;
}

static int run_s2s(const char *path, const tfm_container *in, results *r) {
    const tfm_entry *s = need(in, "src", 2), *sv = need(in, "src_valid", 1), *ti = need(in, "tgt_in", 2);
    const tfm_entry *beams = tfm_container_get(in, "beams"), *ml = tfm_container_get(in, "max_len");
    tfm_mt_model t;
    if (!s || !sv || !ti || tfm_mt_model_load(&t, path)) return -1;
    int B = s->shape[0], Ts = s->shape[1];
    tfm_graph g;
    tfm_graph_init(&g, 1);
    g.grad_enabled = 0;
    r->logits = copy_out(tfm_mt_net_forward(t.model, &g, s->data, sv->data, B, Ts, ti->data, ti->shape[1]), &r->n_logits);
    int rc = 0, n_beams = beams ? beams->shape[0] : 0;
    /* the sources without their </s> (tfm_search_ids appends it) */
    int *ids = malloc(sizeof(int) * (size_t)B * Ts), *off = malloc(sizeof(int) * (size_t)(B + 1));
    off[0] = 0;
    for (int b = 0; b < B; b++) {
        int len = ((const int *)sv->data)[b] - 1;
        memcpy(ids + off[b], (const int *)s->data + (size_t)b * Ts, sizeof(int) * (size_t)len);
        off[b + 1] = off[b] + len;
    }
    for (int k = 0; k < n_beams && k < 4 && !rc; k++) {
        tfm_search_opts o = {.beam = ((const int *)beams->data)[k], .max_len = ml ? ((const int *)ml->data)[0] : 50};
        int **out = calloc((size_t)B, sizeof(int *)), *out_len = calloc((size_t)B, sizeof(int));
        rc = tfm_search_ids(t.model, &g, ids, off, B, 100000, B, &o, out, out_len);
        int total = 0;
        for (int b = 0; b < B; b++) total += out_len[b];
        r->ids[k] = malloc(sizeof(int) * (size_t)(total + 1));
        r->off[k] = malloc(sizeof(int) * (size_t)(B + 1));
        r->off[k][0] = 0;
        for (int b = 0; b < B; b++) {
            if (out[b]) memcpy(r->ids[k] + r->off[k][b], out[b], sizeof(int) * (size_t)out_len[b]);
            r->off[k][b + 1] = r->off[k][b] + out_len[b];
            free(out[b]);
        }
        r->n_ids[k] = total;
        free(out), free(out_len);
    }
    free(ids), free(off);
    tfm_graph_free(&g);
    tfm_mt_model_free(&t);
    return rc;
}

static int run(const char *kind, const char *model, const tfm_container *in, results *r) {
    memset(r, 0, sizeof *r);
    return !strcmp(kind, "gpt") ? run_gpt(model, in, r) : run_s2s(model, in, r);
}

static int tool(const char *kind, const char *model, const char *in_path, const char *out_path) {
    tfm_container in, out;
    results r;
    if (tfm_container_load(&in, in_path) || run(kind, model, &in, &r))
        return fprintf(stderr, "%s\n", tfm_last_error()), 1;
    tfm_container_init(&out);
    tfm_container_add_f32(&out, "logits", 1, (int[]){(int)r.n_logits}, r.logits);
    if (r.greedy) tfm_container_add_i32(&out, "greedy", r.n_greedy, r.greedy);
    for (int k = 0; k < 4 && r.ids[k]; k++) {
        char name[32];
        int B = tfm_container_get(&in, "src")->shape[0];
        snprintf(name, sizeof name, "out.%d", k);
        tfm_container_add_i32(&out, name, r.n_ids[k] > 0 ? r.n_ids[k] : 1, r.ids[k]);
        snprintf(name, sizeof name, "off.%d", k);
        tfm_container_add_i32(&out, name, B + 1, r.off[k]);
    }
    int rc = tfm_container_save(&out, out_path);
    results_free(&r);
    tfm_container_free(&out);
    tfm_container_free(&in);
    return rc ? (fprintf(stderr, "%s\n", tfm_last_error()), 1) : 0;
}

/* ------------------------------------------------------------------ the committed fixtures */

/* max |a - b| / max |b| */
static double rel_max(const float *a, const float *b, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++) m = fabs(b[i]) > m ? fabs(b[i]) : m;
    return max_abs_diff(a, b, n) / (m > 0 ? m : 1);
}

static int same_ints(const tfm_entry *want, const int *got, int n) {
    return want && want->dtype == TFM_DT_I32 && (int)(want->nbytes / 4) == n && !memcmp(want->data, got, 4 * (size_t)n);
}

static void gpt2_text(const char *model, const tfm_container *fx);
static void marian_text(const char *model, const tfm_container *fx);

/* tests/fixtures/hf_KIND_tiny/ imported; the inputs and the twin's outputs in tests/fixtures/hf_KIND_tiny.tfm */
static void fixture(const char *kind, const char *name) {
    char dir[128], expect[128], label[200];
    snprintf(dir, sizeof dir, "tests/fixtures/hf_%s_tiny", name);
    snprintf(expect, sizeof expect, "tests/fixtures/hf_%s_tiny.tfm", name);
    const char *out = tmp("imported.tfm");
    snprintf(label, sizeof label, "%s tiny: tfm import of the twin's Hugging Face folder", name);
    int ok = !tfm_import_hf(dir, out);
    CHECK(label, ok, "%s", tfm_last_error());
    tfm_container fx;
    if (!ok || tfm_container_load(&fx, expect)) {
        if (ok) CHECK(label, 0, "%s", tfm_last_error());
        return;
    }
    results r;
    ok = !run(kind, out, &fx, &r);
    snprintf(label, sizeof label, "%s tiny: tfm runs the imported model", name);
    CHECK(label, ok, "%s", tfm_last_error());
    const tfm_entry *want = tfm_container_get(&fx, "want.logits");
    if (ok && want) {
        size_t n = want->nbytes / 4;
        double rel = r.n_logits == n ? rel_max(r.logits, want->data, n) : 1e9;
        snprintf(label, sizeof label, "%s tiny: logits equal the twin's (%zu values, max |diff| / max |logit| <= 1e-4)",
                 name, n);
        CHECK(label, rel <= 1e-4, "relative difference %.3g (%zu logits, want %zu)", rel, r.n_logits, n);
    }
    if (ok && r.greedy) {
        snprintf(label, sizeof label, "%s tiny: greedy continuation of %d tokens equals the twin's", name, r.n_greedy);
        CHECK(label, same_ints(tfm_container_get(&fx, "want.greedy"), r.greedy, r.n_greedy), "ids differ");
    }
    if (ok && tfm_container_get(&fx, "text.prompt")) gpt2_text(out, &fx);
    if (ok && tfm_container_get(&fx, "text.src")) marian_text(out, &fx);
    const tfm_entry *beams = tfm_container_get(&fx, "beams");
    for (int k = 0; ok && beams && k < beams->shape[0]; k++) {
        char key[32];
        snprintf(key, sizeof key, "want.out.%d", k);
        const tfm_entry *w = tfm_container_get(&fx, key);
        snprintf(key, sizeof key, "want.off.%d", k);
        const tfm_entry *wo = tfm_container_get(&fx, key);
        int B = wo ? wo->shape[0] - 1 : 0, beam = ((const int *)beams->data)[k];
        snprintf(label, sizeof label, "%s tiny: %s translations of %d sentences equal the twin's", name,
                 beam == 1 ? "greedy" : beam == 4 ? "beam-4" : "beam", B);
        int same = wo && same_ints(wo, r.off[k], B + 1) && (r.n_ids[k] == 0 || same_ints(w, r.ids[k], r.n_ids[k]));
        CHECK(label, same, "ids differ");
    }
    results_free(&r);
    tfm_container_free(&fx);
}

/* ------------------------------------------------------------------ text in, text out */

static int gen_byte(int id, void *user) {   /* collects the bytes of generated tokens */
    void **u = user;
    const tfm_lm *lm = u[0];
    char *out = u[1], ch[4];
    size_t *n = u[2], len = 0;
    if (id == lm->eos) return 1;
    const char *b = tfm_lm_token_bytes(lm, id, ch, &len);
    if (b && *n + len < 65536) memcpy(out + *n, b, len), *n += len;
    return 0;
}

/* The imported GPT-2's tokenizer gives the fixture's prompt ids (made by scripts/hf_check.py's encoder, which
 * equals gpt-3-encoder on ASCII text), and tfm's greedy text equals the twin's decoded continuation. */
static void gpt2_text(const char *model, const tfm_container *fx) {
    const char *prompt = tfm_container_str(fx, "text.prompt"), *want = tfm_container_str(fx, "text.greedy");
    const tfm_entry *ids = tfm_container_get(fx, "text.prompt_ids"), *tokens = tfm_container_get(fx, "text.tokens");
    tfm_lm lm;
    if (!prompt || !want || !ids || !tokens || tfm_lm_load(&lm, model)) {
        CHECK("gpt2 tiny text: load", 0, "%s", tfm_last_error());
        return;
    }
    int n = 0, *got = tfm_lm_encode(&lm, prompt, strlen(prompt), &n);
    CHECK("gpt2 tiny text: the GPT-2 tokenizer of the import gives the prompt's ids", got && same_ints(ids, got, n),
          "%d ids", n);
    static char out[65536];
    size_t len = 0;
    void *u[3] = {&lm, out, &len};
    tfm_sample_opts o;
    tfm_sample_opts_default(&o);
    o.temperature = 0;
    tfm_graph g;
    tfm_graph_init(&g, 0);
    int made = got ? tfm_gpt_generate(&lm.model, &g, got, n, ((const int *)tokens->data)[0], &o, gen_byte, u, NULL) : -1;
    CHECK("gpt2 tiny text: generated text equals the twin's decoded greedy continuation",
          made > 0 && len == strlen(want) && !memcmp(out, want, len), "%d tokens, %zu bytes, want %zu", made, len,
          strlen(want));
    tfm_graph_free(&g);
    free(got);
    tfm_lm_free(&lm);
}

/* Raw German lines through the import's tokenizers (source.spm, vocab.json, target.spm) and the model, greedy
 * and beam 4: the text the twin's ids give through spm_encode / spm_decode (scripts/hf_check.py). */
static void marian_text(const char *model, const tfm_container *fx) {
    const char *src = tfm_container_str(fx, "text.src");
    const tfm_entry *beams = tfm_container_get(fx, "beams"), *ml = tfm_container_get(fx, "max_len");
    tfm_mt_model t;
    if (!src || !beams || !ml || tfm_mt_model_load(&t, model)) {
        CHECK("marian tiny text: load", 0, "%s", tfm_last_error());
        return;
    }
    char *buf = strdup(src), *lines[64];
    int n = 0;
    for (char *p = buf, *e; *p && n < 64; p = e + 1) {
        if (!(e = strchr(p, '\n'))) break;
        *e = 0;
        lines[n++] = p;
    }
    tfm_translator *tr = tfm_translator_view(&t, NULL);
    for (int k = 0; tr && k < beams->shape[0]; k++) {
        char key[32], label[160], all[65536];
        tfm_translation hyps[64];
        snprintf(key, sizeof key, "text.out.%d", k);
        const char *want = tfm_container_str(fx, key);
        tfm_translate_options o;
        tfm_translate_options_default(&o);
        o.beam_size = ((const int *)beams->data)[k], o.length_penalty = 0, o.max_decoding_length = ((const int *)ml->data)[0];
        o.max_batch_size = 8;
        int rc = tfm_translator_translate_batch(tr, (const char *const *)lines, n, &o, hyps);
        size_t len = 0;
        for (int i = 0; !rc && i < n; i++) {
            len += (size_t)snprintf(all + len, sizeof all - len, "%s\n", hyps[i].hypotheses[0]);
            tfm_translation_free(&hyps[i]);
        }
        snprintf(label, sizeof label, "marian tiny text: the translator (beam %d) on %d raw lines = the twin's text",
                 o.beam_size, n);
        CHECK(label, !rc && want && !strcmp(all, want), "%s", rc ? tfm_last_error() : "text differs");
    }
    tfm_translator_free(tr);
    free(buf);
    tfm_mt_model_free(&t);
}

int main(int argc, char **argv) {
    if (argc == 5 && !strcmp(argv[1], "--gpt")) return tool("gpt", argv[2], argv[3], argv[4]);
    if (argc == 5 && !strcmp(argv[1], "--s2s")) return tool("s2s", argv[2], argv[3], argv[4]);
    if (check_tmpdir(tmpdir, sizeof tmpdir, "test_hf_import")) return 1;
    fixture("gpt", "gpt2");
    fixture("s2s", "marian");
    check_rm_tmpdir(tmpdir);
    CHECK_EXIT();
}
