/* The generator object (include/tfm/generator.h, src/decode/generator.c) over a small random character GPT:
 * its text equals tfm_gpt_generate's ids decoded (greedy and sampled); the streamed pieces join to the text and
 * are whole characters; stop strings cut the text (and are never streamed, not even their first characters);
 * a callback cancels; streams stepped together give each stream's own text; bad prompts and options are
 * refused with the field named; with 1200 characters greedy requests take the output layer's screen, the same text
 * (the loaded generator holding its blocks' weights packed, tfm_params_hold_packed). */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "tfm/decode.h"
#include "tfm/generator.h"
#include "tfm/kernels.h"
#include "tfm/train.h"

static char path[] = "/tmp/tfm_generator_XXXXXX";
/* a vocabulary with multi-byte characters, so streaming must not split them */
static const char *CHARS = "\n !,.:?ERabdeilmnorstuwé€";

static void make_model(void) {
    tfm_char_vocab v;
    if (tfm_char_vocab_from_string(&v, CHARS)) printf("FAIL vocab: %s\n", tfm_last_error()), exit(1);
    tfm_gpt_config c = {v.n, 16, 2, 2, 16, 0.0f, TFM_ATTN_CAUSAL, 0.0f};
    tfm_gpt m;
    if (tfm_gpt_init(&m, &c)) printf("FAIL gpt: %s\n", tfm_last_error()), exit(1);
    tfm_gpt_init_weights(&m, 7);
    for (int i = 0; i < m.params.n; i++)   /* larger weights than the init's: less uniform distributions */
        for (size_t k = 0; k < m.params.t[i]->size; k++) m.params.t[i]->data[k] *= 6;
    int fd = mkstemp(path);
    close(fd);
    if (tfm_gpt_save(&m, &v, NULL, NULL, path)) printf("FAIL save: %s\n", tfm_last_error()), exit(1);
    tfm_gpt_free(&m);
    tfm_char_vocab_free(&v);
}

/* what tfm_gpt_generate makes from the same model, decoded */
static char *reference(tfm_generator *gen, const char *prompt, const tfm_generate_options *o) {
    tfm_gpt *m = (tfm_gpt *)tfm_generator_model(gen);
    tfm_char_vocab v;
    tfm_char_vocab_from_string(&v, CHARS);
    int n, *ids = tfm_char_encode(&v, prompt, strlen(prompt), &n), out[256];
    tfm_sample_opts so = {o->temperature, o->top_k, o->top_p, o->seed, 0, NULL};
    tfm_graph g;
    tfm_graph_init(&g, 0);
    int made = tfm_gpt_generate(m, &g, ids, n, o->max_tokens, &so, NULL, NULL, out);
    char *s = made < 0 ? NULL : tfm_char_decode(&v, out, made);
    tfm_graph_free(&g);
    free(ids);
    tfm_char_vocab_free(&v);
    return s;
}

typedef struct {
    char buf[4096];
    size_t len;
    int pieces, split_char, cancel_after;
} collect;

static int on_text(const char *t, size_t n, void *user) {
    collect *c = user;
    if (n == 0 || ((unsigned char)t[0] & 0xC0) == 0x80 || !tfm_utf8_valid(t, n)) c->split_char = 1;
    memcpy(c->buf + c->len, t, n);
    c->len += n;
    c->buf[c->len] = 0;
    c->pieces++;
    return c->cancel_after && c->pieces >= c->cancel_after;
}

static void test_equals_generate(tfm_generator *gen) {
    struct { float temp; int top_k; float top_p; uint64_t seed; } runs[] = {{0, 0, 1, 1}, {1, 0, 1, 3}, {0.8f, 5, 0.9f, 11}};
    for (int k = 0; k < 3; k++) {
        tfm_generate_options o;
        tfm_generate_options_default(&o);
        o.max_tokens = 120, o.temperature = runs[k].temp, o.top_k = runs[k].top_k, o.top_p = runs[k].top_p;
        o.seed = runs[k].seed;
        char *want = reference(gen, "Rome", &o);
        tfm_generation r;
        collect c = {0};
        int rc = tfm_generator_generate(gen, "Rome", &o, on_text, &c, &r);
        char name[160];
        snprintf(name, sizeof name, "generate = tfm_gpt_generate (temperature %g, top-k %d, top-p %g, seed %llu)",
                 runs[k].temp, runs[k].top_k, runs[k].top_p, (unsigned long long)runs[k].seed);
        CHECK(name, !rc && want && !strcmp(r.text, want) && r.n_tokens == 120 && r.n_prompt_tokens == 4 &&
              r.finish_reason == TFM_FINISH_LENGTH, "rc %d", rc);
        snprintf(name, sizeof name, "streamed pieces join to the text, whole characters only (seed %llu)",
                 (unsigned long long)runs[k].seed);
        CHECK(name, !rc && !strcmp(c.buf, r.text) && !c.split_char && c.pieces > 1, "%d pieces", c.pieces);
        if (!rc) tfm_generation_free(&r);
        free(want);
    }
}

static void test_stop_strings(tfm_generator *gen) {
    tfm_generate_options o;
    tfm_generate_options_default(&o);
    o.max_tokens = 200, o.temperature = 1, o.seed = 5;
    char *full = reference(gen, "Rome", &o);
    /* a stop string taken from the middle of the free text: the text must end right before its first match */
    char stop[4] = {0};
    memcpy(stop, full + 40, 2);
    if (((unsigned char)stop[1] & 0xC0) == 0x80 || ((unsigned char)stop[0] & 0xC0) == 0x80) memcpy(stop, "e ", 3);
    char *hit = strstr(full, stop);
    o.stop[0] = "\x01never";
    o.stop[1] = stop;
    tfm_generation r;
    collect c = {0};
    int rc = tfm_generator_generate(gen, "Rome", &o, on_text, &c, &r);
    size_t want_len = hit ? (size_t)(hit - full) : strlen(full);
    CHECK("a stop string cuts the text before its first match (finish 'stop')",
          !rc && hit && strlen(r.text) == want_len && !strncmp(r.text, full, want_len) && r.finish_reason == TFM_FINISH_STOP &&
          !strcmp(tfm_finish_reason_name(r.finish_reason), "stop"), "rc %d, stop '%s'", rc, stop);
    CHECK("the stream never shows the stop string or its start", !rc && !strcmp(c.buf, r.text), "streamed '%s'", c.buf);
    if (!rc) tfm_generation_free(&r);
    free(full);
    /* cancel from the callback after 3 pieces */
    tfm_generate_options_default(&o);
    o.max_tokens = 50;
    collect cc = {.cancel_after = 3};
    rc = tfm_generator_generate(gen, "Rome", &o, on_text, &cc, &r);
    CHECK("a non-zero callback return cancels (finish 'cancelled')",
          !rc && r.finish_reason == TFM_FINISH_CANCELLED && r.n_tokens == 3 && cc.pieces == 3, "rc %d, %d tokens", rc,
          rc ? -1 : r.n_tokens);
    if (!rc) tfm_generation_free(&r);
    o.max_tokens = 0;
    rc = tfm_generator_generate(gen, "Rome", &o, NULL, NULL, &r);
    CHECK("max_tokens 0: empty text, finish 'length'", !rc && !r.text[0] && r.finish_reason == TFM_FINISH_LENGTH, "rc %d", rc);
    if (!rc) tfm_generation_free(&r);
}

/* three streams stepped together, joining at different steps: each equals its own generation */
static void test_streams(tfm_generator *gen) {
    const char *prompts[3] = {"Rome", "ma", "é€ is"};
    tfm_generate_options o[3];
    tfm_generation want[3];
    int rc = 0;
    for (int k = 0; k < 3; k++) {
        tfm_generate_options_default(&o[k]);
        o[k].max_tokens = 30 + 10 * k, o[k].temperature = k ? 0.9f : 0, o[k].seed = 100 + (uint64_t)k;
        rc |= tfm_generator_generate(gen, prompts[k], &o[k], NULL, NULL, &want[k]);
    }
    tfm_gen_stream *s[3] = {0};
    char text[3][1024] = {{0}};
    int live = 0, step = 0, ok = !rc;
    while (ok && (step < 12 || live)) {
        if (step == 0 || step == 5 || step == 11) {   /* a new request joins */
            int k = step == 0 ? 0 : step == 5 ? 1 : 2;
            ok = (s[k] = tfm_generator_start(gen, prompts[k], &o[k])) != NULL;
        }
        tfm_gen_stream *run[3];
        live = 0;
        for (int k = 0; k < 3; k++)
            if (s[k] && !tfm_gen_stream_finished(s[k])) run[live++] = s[k];
        if (ok && live) ok = tfm_generator_step(gen, run, live) == 0;
        for (int k = 0; ok && k < 3; k++) {
            size_t n;
            const char *t = s[k] ? tfm_gen_stream_take(s[k], &n) : NULL;
            if (t) strncat(text[k], t, n);
        }
        step++;
    }
    for (int k = 0; ok && k < 3; k++) {
        tfm_generation r;
        ok = !tfm_gen_stream_result(s[k], &r) && !strcmp(r.text, want[k].text) && !strcmp(text[k], want[k].text) &&
             r.n_tokens == want[k].n_tokens;
        if (r.text) tfm_generation_free(&r);
    }
    CHECK("three streams stepped together, joining at steps 0/5/11: each equals its generation alone", ok, "rc %d", rc);
    for (int k = 0; k < 3; k++) tfm_gen_stream_free(s[k]), tfm_generation_free(&want[k]);
}

static void test_errors(tfm_generator *gen) {
    tfm_generate_options o;
    tfm_generation r;
    struct { const char *prompt, *field; int what; } bad[] = {
        {"Rome", "max_tokens", 1}, {"Rome", "temperature", 2}, {"Rome", "top_p", 3}, {"Rome", "stop[0] is empty", 4},
        {"", "the prompt is empty", 0}, {"Rome#", "prompt: character", 0}};
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        tfm_generate_options_default(&o);
        if (bad[k].what == 1) o.max_tokens = -1;
        if (bad[k].what == 2) o.temperature = -0.5f;
        if (bad[k].what == 3) o.top_p = 0;
        if (bad[k].what == 4) o.stop[0] = "";
        int rc = tfm_generator_generate(gen, bad[k].prompt, &o, NULL, NULL, &r);
        char name[160];
        snprintf(name, sizeof name, "refused with '%s' named", bad[k].field);
        CHECK(name, rc == -1 && strstr(tfm_last_error(), bad[k].field) && !r.text, "rc %d: %s", rc, tfm_last_error());
    }
    CHECK("a missing file names the file", !tfm_generator_load("/nonexistent/lm.tfm", NULL) &&
          strstr(tfm_last_error(), "/nonexistent/lm.tfm"), "%s", tfm_last_error());
}

/* A vocabulary of 1200 characters (CJK from U+4E00): the generator screens the output layer for greedy requests
 * (made at the first one, src/decode/generator.c); its text equals tfm_gpt_generate's unscreened ids decoded, in
 * two requests (the second reuses the screen). */
static void test_screened_greedy(void) {
    enum { NV = 1200 };
    char *chars = malloc(NV * 3 + 2), *p = chars, big[] = "/tmp/tfm_generator_big_XXXXXX";
    for (int i = 0; i < NV; i++) p += tfm_utf8_encode(0x4E00 + i, p);
    *p = 0;
    tfm_char_vocab v;
    tfm_gpt m;
    tfm_gpt_config c = {NV, 32, 2, 2, 32, 0.0f, TFM_ATTN_CAUSAL, 0.0f};
    if (tfm_char_vocab_from_string(&v, chars) || tfm_gpt_init(&m, &c)) {
        CHECK("screened greedy: a model of 1200 characters", 0, "%s", tfm_last_error());
        return;
    }
    tfm_gpt_init_weights(&m, 9);
    for (int i = 0; i < m.params.n; i++)
        for (size_t k = 0; k < m.params.t[i]->size; k++) m.params.t[i]->data[k] *= 6;
    close(mkstemp(big));
    int rc = tfm_gpt_save(&m, &v, NULL, NULL, big);
    char prompt[16];
    int np = tfm_utf8_encode(0x4E00 + 7, prompt);
    np += tfm_utf8_encode(0x4E00 + 1100, prompt + np);
    prompt[np] = 0;
    int ids[2] = {7, 1100}, out[60];
    tfm_sample_opts so = {0.0f, 0, 1.0f, 1, 0, NULL};
    tfm_graph g;
    tfm_graph_init(&g, 0);
    int made = rc ? -1 : tfm_gpt_generate(&m, &g, ids, 2, 60, &so, NULL, NULL, out);
    char *want = made == 60 ? tfm_char_decode(&v, out, made) : NULL;
    tfm_graph_free(&g);
    tfm_generator_params gp;
    tfm_generator_params_default(&gp);
    gp.threads = 1;
    tfm_generator *gen = want ? tfm_generator_load(big, &gp) : NULL;
    int same = gen != NULL;
    for (int r = 0; r < 2 && gen; r++) {
        tfm_generate_options o;
        tfm_generate_options_default(&o);
        o.max_tokens = 60, o.temperature = 0.0f;
        tfm_generation res;
        if (tfm_generator_generate(gen, prompt, &o, NULL, NULL, &res)) { same = 0; break; }
        same &= !strcmp(res.text, want);
        tfm_generation_free(&res);
    }
    CHECK("screened greedy (1200 tokens): the generator's text = tfm_gpt_generate's unscreened ids, twice", same,
          "%s", gen ? "texts differ" : tfm_last_error());
    int held = 0, blocks = 0;   /* ... while the generator holds its blocks' weights packed, the model's are floats */
    const tfm_params *ps = gen ? &tfm_generator_model(gen)->params : NULL;
    for (int i = 0; ps && i < ps->n; i++)
        if (ps->t[i]->ndim == 2 && !strncmp(ps->t[i]->name, "blocks.", 7))
            blocks++, held += ps->t[i]->packed && !ps->t[i]->data;
    CHECK("the generator holds its blocks' 12 weights packed (2 layers: q, k, v, o and the FFN's two)",
          blocks == 12 && held == (tfm_gemm_packed_b_floats(1, 1) ? 12 : 0), "%d of %d held", held, blocks);
    tfm_generator_free(gen);
    free(want), free(chars);
    tfm_gpt_free(&m);
    tfm_char_vocab_free(&v);
    unlink(big);
}

int main(void) {
    make_model();
    tfm_generator_params p;
    tfm_generator_params_default(&p);
    p.threads = 1;
    tfm_generator *gen = tfm_generator_load(path, &p);
    CHECK("load a train-lm checkpoint", gen && !strcmp(tfm_generator_tokenizer(gen), "char") &&
          tfm_generator_count_tokens(gen, "Rome é") == 6, "%s", tfm_last_error());
    if (gen) {
        const tfm_gpt *gm = tfm_generator_model(gen);
        CHECK("tfm_gpt_vocab_size and tfm_gpt_block_size equal the config",
              tfm_gpt_vocab_size(gm) == gm->cfg.vocab_size && tfm_gpt_block_size(gm) == gm->cfg.block_size &&
              gm->cfg.block_size > 0, "%d %d", tfm_gpt_vocab_size(gm), tfm_gpt_block_size(gm));
        test_equals_generate(gen);
        test_stop_strings(gen);
        test_streams(gen);
        test_errors(gen);
    }
    tfm_generator_free(gen);
    unlink(path);
    test_screened_greedy();
    CHECK_EXIT();
}
