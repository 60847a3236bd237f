/* The serving engine (include/tfm/serve.h, src/serve/engine.c): what many threads submitting at once get is
 * what each request would get alone; the queue is bounded; queued requests are decoded in one call; streams
 * join and leave a running batch; a cancelled job frees its slot; stop finishes the work in flight.
 * Models: a random Transformer over a 40-word vocabulary (its <eos> bias lowered so translations have
 * several words) and a random character GPT saved to a temp file (loaded by tfm_serve_load). */
#include <pthread.h>
#include <stdint.h>
#include <unistd.h>

#include "check.h"
#include "tfm/serve.h"
#include "tfm/train.h"

/* ---------------------------------------------------------------- models */
#define WORDS 40

static tfm_translator *random_translator(void) {
    tfm_mt_model m;
    memset(&m, 0, sizeof m);
    tfm_mt_config c;
    tfm_mt_config_default(&c);
    c.src_vocab = c.tgt_vocab = WORDS + TFM_N_RESERVED;
    c.d_model = 16, c.ffn = 32, c.n_layer = 2, c.dropout = 0;
    m.model = tfm_mt_net_create(&c);
    if (!m.model) return NULL;
    m.model->vt->init_weights(m.model, 3);
    tfm_tensor *bias = tfm_params_find(&m.model->params, "decoder.dense.bias");
    if (bias) bias->data[TFM_EOS] = -2.0f;   /* some sentences end early, most run a few words */
    char words[WORDS * 8 + 64] = "<pad>\n<bos>\n<eos>\n<unk>";
    for (int i = 0; i < WORDS; i++) snprintf(words + strlen(words), sizeof words - strlen(words), "\nw%d", i);
    if (tfm_vocab_deserialize(&m.src_vocab, words) || tfm_vocab_deserialize(&m.tgt_vocab, words)) return NULL;
    m.tok_kind = TFM_TOK_SPACE;
    tfm_translator_params p;
    tfm_translator_params_default(&p);
    p.threads = 2;
    return tfm_translator_from_model(&m, &p);
}

/* A random GPT over 30 characters saved at path. */
static int save_random_gpt(const char *path) {
    tfm_gpt_config c = {.vocab_size = 30, .block_size = 24, .n_layer = 2, .n_head = 2, .n_embd = 16};
    tfm_char_vocab v;
    if (tfm_char_vocab_from_string(&v, "\n ,.abcdefghijklmnopqrstuvwxyz")) return -1;
    tfm_gpt g;
    if (tfm_gpt_init(&g, &c)) return -1;
    tfm_gpt_init_weights(&g, 5);
    int rc = tfm_gpt_save(&g, &v, NULL, NULL, path);
    tfm_gpt_free(&g);
    tfm_char_vocab_free(&v);
    return rc;
}

/* Sentence k of the test: 1..9 words chosen by k. */
static void sentence(int k, char *out, size_t n) {
    out[0] = 0;
    for (int w = 0; w < 1 + (k * 7) % 9; w++)
        snprintf(out + strlen(out), n - strlen(out), "%sw%d", w ? " " : "", (k * 13 + w * 5) % WORDS);
}

/* Are two translations the same: hypotheses, scores and attention bit for bit? */
static int same_translation(const tfm_translation *a, const tfm_translation *b) {
    if (a->n_hypotheses != b->n_hypotheses || a->n_source_tokens != b->n_source_tokens ||
        a->n_target_tokens != b->n_target_tokens || (!a->attention) != (!b->attention) ||
        a->n_input_tokens != b->n_input_tokens || a->n_output_tokens != b->n_output_tokens)
        return 0;
    for (int k = 0; k < a->n_hypotheses; k++)
        if (strcmp(a->hypotheses[k], b->hypotheses[k]) || (a->scores && memcmp(&a->scores[k], &b->scores[k], sizeof(float))))
            return 0;
    size_t na = (size_t)a->n_source_tokens * (size_t)a->n_target_tokens;
    return !a->attention || !memcmp(a->attention, b->attention, sizeof(float) * na);
}

/* ---------------------------------------------------------------- translation */
typedef struct {
    tfm_serve *s;
    int id, ok, done;
    char why[256];
} client;

/* Request k: lines sentence(k), sentence(k+1), ... (1..3 of them), 1 or 2 hypotheses, attention every 5th. */
static void request_of(int k, char (*lines)[128], const char **ptr, int *n, int *nh, int *attn) {
    *n = 1 + k % 3, *nh = 1 + (k / 3) % 2, *attn = k % 5 == 4;
    for (int i = 0; i < *n; i++) sentence(k + i, lines[i], 128), ptr[i] = lines[i];
}

/* The request translated alone, directly: the reference (computed before the engine runs: see main). */
static int reference_now(tfm_serve *s, int k, tfm_translation *out) {
    char lines[3][128];
    const char *ptr[3];
    int n, nh, attn;
    request_of(k, lines, ptr, &n, &nh, &attn);
    tfm_translate_options o;
    tfm_translate_options_default(&o);
    o.beam_size = 3, o.length_penalty = 0.6f, o.max_decoding_length = 8;
    o.num_hypotheses = nh, o.return_attention = attn;
    return tfm_translator_translate_batch(tfm_serve_translator(s, 0), ptr, n, &o, out);
}

#define N_REQ 48
static tfm_translation refs[N_REQ][3];
static int reference(tfm_serve *s, int k, tfm_translation *out) {
    (void)s;
    memcpy(out, refs[k], sizeof refs[k]);
    return 0;
}

/* Submit request k, wait, compare with the reference: 1 if equal. */
static int run_request(tfm_serve *s, int k, char *why, size_t nwhy) {
    char lines[3][128];
    const char *ptr[3];
    int n, nh, attn, got = 0;
    request_of(k, lines, ptr, &n, &nh, &attn);
    tfm_serve_job *j;
    int rc;
    while ((rc = tfm_serve_translate(s, 0, ptr, n, nh, attn, &j)) == TFM_SERVE_BUSY) usleep(1000);
    if (rc) return snprintf(why, nwhy, "request %d: submit %d: %s", k, rc, tfm_last_error()), 0;
    tfm_serve_job_wait(j, -1);
    const tfm_translation *r = tfm_serve_job_translations(j, &got);
    tfm_translation ref[3];
    int ok = r && got == n && reference(s, k, ref) == 0;
    for (int i = 0; ok && i < n; i++) ok = same_translation(&r[i], &ref[i]);
    if (!ok && r && getenv("SERVE_DEBUG"))
        for (int i = 0; i < n; i++)
            printf("# %d/%d: nh %d/%d [%s]/[%s] toks %d/%d %d/%d in %d/%d out %d/%d attn %p/%p\n", k, i, r[i].n_hypotheses,
                   ref[i].n_hypotheses, r[i].hypotheses[0], ref[i].hypotheses[0], r[i].n_source_tokens, ref[i].n_source_tokens,
                   r[i].n_target_tokens, ref[i].n_target_tokens, r[i].n_input_tokens, ref[i].n_input_tokens,
                   r[i].n_output_tokens, ref[i].n_output_tokens, (void *)r[i].attention, (void *)ref[i].attention);
    if (!ok) snprintf(why, nwhy, "request %d: %s", k, r ? "differs from the request translated alone" : tfm_serve_job_error(j));
    tfm_serve_job_free(j);
    return ok;
}

static void *client_main(void *arg) {
    client *c = arg;
    c->ok = 1;
    for (int r = 0; r < 6 && c->ok; r++, c->done++) c->ok = run_request(c->s, c->id * 6 + r, c->why, sizeof c->why);
    return NULL;
}

static tfm_serve *translation_engine(int max_queue, int wait_us, int workers) {
    tfm_serve_params p;
    tfm_serve_params_default(&p);
    p.threads = 2, p.max_queue = max_queue, p.batch_wait_us = wait_us, p.translate_workers = workers;
    tfm_serve *s = tfm_serve_create(&p);
    tfm_translator *t = random_translator();
    tfm_translate_options o;
    tfm_translate_options_default(&o);
    o.beam_size = 3, o.length_penalty = 0.6f, o.max_decoding_length = 8;
    if (!s || !t || tfm_serve_add_translator(s, t, "rand", "de", "en", &o) != 0) {
        printf("# engine: %s\n", tfm_last_error());
        tfm_serve_free(s);
        return NULL;
    }
    return s;
}

static void test_params(void) {
    tfm_serve_params p;
    tfm_serve_params_default(&p);
    p.max_queue = 0;
    tfm_serve *s = tfm_serve_create(&p);
    CHECK("serve: params out of range -> NULL with an error naming the field", !s && strstr(tfm_last_error(), "max_queue"),
          "%s", tfm_last_error());
    tfm_serve_free(s);
}

static void test_queue_and_batch(void) {
    tfm_serve *s = translation_engine(8, 2000, 1);
    CHECK("serve: engine with a translator", s != NULL, "%s", tfm_last_error());
    if (!s) return;
    /* not started yet: jobs wait; the 9th is refused */
    tfm_serve_job *j[9];
    const char *line[1] = {"w1 w2 w3"};
    int rcs[9];
    for (int i = 0; i < 9; i++) rcs[i] = tfm_serve_translate(s, 0, line, 1, 1, 0, &j[i]);
    tfm_serve_stats st;
    tfm_serve_get_stats(s, &st);
    CHECK("serve: max_queue jobs wait, one more is refused (BUSY)",
          rcs[0] == 0 && rcs[7] == 0 && rcs[8] == TFM_SERVE_BUSY && !j[8] && st.queued == 8 && st.busy == 1,
          "rc %d %d %d, queued %ld, busy %ld", rcs[0], rcs[7], rcs[8], st.queued, st.busy);
    tfm_serve_job_cancel(j[3]);
    tfm_serve_get_stats(s, &st);
    CHECK("serve: a cancelled queued job is done at once and leaves the queue",
          tfm_serve_job_wait(j[3], 0) && !strcmp(tfm_serve_job_error(j[3]), "cancelled") && st.queued == 7 && st.cancelled == 1,
          "error '%s', queued %ld", tfm_serve_job_error(j[3]), st.queued);
    tfm_serve_start(s);
    int ok = 1, nt;
    for (int i = 0; i < 8; i++) {
        tfm_serve_job_wait(j[i], -1);
        const tfm_translation *r = tfm_serve_job_translations(j[i], &nt);
        if (i != 3) ok = ok && r && nt == 1 && r->n_hypotheses == 1;
        tfm_serve_job_free(j[i]);
    }
    tfm_serve_get_stats(s, &st);
    CHECK("serve: the 7 queued requests were decoded in one call", ok && st.translate_calls == 1 && st.translate_jobs == 7 &&
          st.translate_lines == 7 && st.batch_lines[3] == 1, "ok %d, calls %ld, jobs %ld", ok, st.translate_calls, st.translate_jobs);
    CHECK("serve: token counters", st.translate_tokens_in == 21 && st.translate_tokens_out > 0, "in %ld out %ld",
          st.translate_tokens_in, st.translate_tokens_out);
    /* bad requests: refused at submit, with the reason */
    tfm_serve_job *b = NULL;
    const char *bad[1] = {"w1 \xff"};
    CHECK("serve: invalid UTF-8 refused naming the line", tfm_serve_translate(s, 0, bad, 1, 1, 0, &b) == -1 && !b &&
          strstr(tfm_last_error(), "line 0: invalid UTF-8"), "%s", tfm_last_error());
    CHECK("serve: more hypotheses than the beam refused", tfm_serve_translate(s, 0, line, 1, 4, 0, &b) == -1 &&
          strstr(tfm_last_error(), "the beam is 3"), "%s", tfm_last_error());
    CHECK("serve: a model that is not a translator refused", tfm_serve_translate(s, 5, line, 1, 1, 0, &b) == -1, "accepted");
    tfm_serve_free(s);
}

/* 8 threads x 6 requests of 1..3 lines, n-best and attention mixed: each equals its request alone; with one
 * worker, and with two (calls at once on one translator). */
static void test_concurrent_translation(int workers) {
    tfm_serve *s = translation_engine(256, 3000, workers);
    int refs_ok = s != NULL;
    for (int k = 0; refs_ok && k < N_REQ; k++) refs_ok = reference_now(s, k, refs[k]) == 0;
    if (!refs_ok || tfm_serve_start(s)) {
        CHECK("serve: concurrent engine", 0, "%s", tfm_last_error());
        tfm_serve_free(s);
        return;
    }
    enum { N = 8 };
    client c[N];
    pthread_t th[N];
    for (int i = 0; i < N; i++) {
        memset(&c[i], 0, sizeof c[i]);
        c[i].s = s, c[i].id = i;
        pthread_create(&th[i], NULL, client_main, &c[i]);
    }
    int ok = 1;
    const char *why = "";
    for (int i = 0; i < N; i++) {
        pthread_join(th[i], NULL);
        if (!c[i].ok && ok) ok = 0, why = c[i].why;
    }
    tfm_serve_stats st;
    tfm_serve_get_stats(s, &st);
    CHECK(workers == 1 ? "serve: 8 threads x 6 requests (n-best, attention): each equals the request translated alone"
                       : "serve: the same with 2 translation workers", ok, "%s", why);
    long multi = 0;
    for (int k = 1; k < TFM_SERVE_HIST; k++) multi += st.batch_lines[k];
    CHECK("serve: requests were batched (calls < requests, some call had several lines)",
          st.translate_jobs == N * 6 && st.translate_calls < N * 6 && multi > 0,
          "jobs %ld, calls %ld", st.translate_jobs, st.translate_calls);
    for (int k = 0; k < N_REQ; k++)
        for (int i = 0; i < 3; i++) tfm_translation_free(&refs[k][i]);
    tfm_serve_free(s);
}

/* ---------------------------------------------------------------- generation */
typedef struct {
    const char *prompt;
    tfm_generate_options o;
} gen_case;

static void gen_cases(gen_case *g) {
    for (int i = 0; i < 5; i++) tfm_generate_options_default(&g[i].o);
    g[0].prompt = "the ", g[0].o.max_tokens = 40, g[0].o.temperature = 0;
    g[1].prompt = "a", g[1].o.max_tokens = 30, g[1].o.temperature = 0.9f, g[1].o.seed = 7, g[1].o.top_k = 5;
    g[2].prompt = "hello, ", g[2].o.max_tokens = 60, g[2].o.temperature = 1.0f, g[2].o.seed = 3, g[2].o.top_p = 0.8f;
    g[3].prompt = "xyz", g[3].o.max_tokens = 50, g[3].o.temperature = 1.0f, g[3].o.seed = 11, g[3].o.stop[0] = "e";
    g[4].prompt = "q", g[4].o.max_tokens = 0;
}

/* Submit every case, read each stream's text piece by piece, compare with tfm_generator_generate. */
static void test_generation(const char *path) {
    tfm_serve_params p;
    tfm_serve_params_default(&p);
    p.threads = 1, p.gen_slots = 2;
    tfm_serve *s = tfm_serve_create(&p);
    int idx = s ? tfm_serve_load(s, path, NULL, NULL, NULL) : -1;
    const tfm_serve_model *info = idx >= 0 ? tfm_serve_model_info(s, idx) : NULL;
    CHECK("serve: tfm_serve_load finds a language model, named after its file",
          info && info->kind == TFM_SERVE_GENERATOR && !strcmp(info->name, "tfm_serve_gpt") && tfm_serve_find(s, "tfm_serve_gpt") == 0,
          "%s", info ? info->name : tfm_last_error());
    if (!info || tfm_serve_start(s)) {
        tfm_serve_free(s);
        return;
    }
    gen_case g[5];
    gen_cases(g);
    tfm_serve_job *j[5];
    int ok = 1;
    char why[300] = "";
    for (int i = 0; i < 5; i++)
        if (tfm_serve_generate(s, idx, g[i].prompt, &g[i].o, &j[i])) {
            CHECK("serve: submit a generation", 0, "%s", tfm_last_error());
            tfm_serve_free(s);
            return;
        }
    for (int i = 0; i < 5; i++) {
        char *all = calloc(1, 1);
        size_t total = 0, len;
        int done = 0;
        while (!done) {   /* pieces as they are made */
            char *t = tfm_serve_job_take_text(j[i], 1000, &len, &done);
            if (t) all = realloc(all, total + len + 1), memcpy(all + total, t, len + 1), total += len;
            free(t);
        }
        tfm_generation ref;
        const tfm_generation *r = tfm_serve_job_generation(j[i]);
        if (tfm_generator_generate(tfm_serve_generator(s, idx), g[i].prompt, &g[i].o, NULL, NULL, &ref)) ok = 0;
        else if (!r || strcmp(r->text, ref.text) || strcmp(all, ref.text) || r->n_tokens != ref.n_tokens ||
                 r->n_prompt_tokens != ref.n_prompt_tokens || r->finish_reason != ref.finish_reason) {
            if (ok) snprintf(why, sizeof why, "case %d: '%s' / '%s' vs '%s'", i, r ? r->text : "(none)", all, ref.text);
            ok = 0;
        }
        tfm_generation_free(&ref);
        free(all);
        tfm_serve_job_free(j[i]);
    }
    CHECK("serve: 5 streams (greedy, top-k, top-p, stop, 0 tokens) on 2 slots == each generated alone, streamed pieces join",
          ok, "%s", why);
    tfm_serve_stats st;
    tfm_serve_get_stats(s, &st);
    long over = 0;
    for (int k = 2; k < TFM_SERVE_HIST; k++) over += st.step_streams[k];
    CHECK("serve: streams were stepped together, never more than the slots", st.step_streams[1] > 0 && over == 0,
          "steps with 2 streams %ld, with more %ld", st.step_streams[1], over);
    CHECK("serve: generation counters", st.generate_jobs == 5 && st.generate_tokens_out > 0 && st.streams == 0 && st.queued == 0,
          "jobs %ld, out %ld, streams %ld", st.generate_jobs, st.generate_tokens_out, st.streams);

    /* a stream that would run for long is cancelled while running: it leaves its slot */
    tfm_generate_options o;
    tfm_generate_options_default(&o);
    o.max_tokens = 100000000;
    tfm_serve_job *c;
    int rc = tfm_serve_generate(s, idx, "the", &o, &c);
    size_t len;
    int done;
    char *t = rc ? NULL : tfm_serve_job_take_text(c, 5000, &len, &done);
    tfm_serve_get_stats(s, &st);
    int running = t && st.streams == 1;
    free(t);
    if (!rc) tfm_serve_job_cancel(c);
    int finished = !rc && tfm_serve_job_wait(c, 5000);
    const tfm_generation *r = finished ? tfm_serve_job_generation(c) : NULL;
    tfm_serve_get_stats(s, &st);
    CHECK("serve: a cancelled stream ends ('cancelled') and frees its slot",
          running && r && r->finish_reason == TFM_FINISH_CANCELLED && st.streams == 0 && st.cancelled == 1,
          "running %d, finished %d, streams %ld, cancelled %ld", running, finished, st.streams, st.cancelled);
    if (!rc) tfm_serve_job_free(c);

    /* stop with work in flight: it is finished, then new work is refused */
    for (int i = 0; i < 5; i++) tfm_serve_generate(s, idx, g[i].prompt, &g[i].o, &j[i]);
    tfm_serve_stop(s);
    int all_done = 1;
    for (int i = 0; i < 5; i++) {
        const tfm_generation *gr = tfm_serve_job_generation(j[i]);
        all_done = all_done && gr && gr->finish_reason != TFM_FINISH_CANCELLED;
        tfm_serve_job_free(j[i]);
    }
    CHECK("serve: stop finishes the streams in flight, then refuses (CLOSED)",
          all_done && tfm_serve_generate(s, idx, "a", NULL, &c) == TFM_SERVE_CLOSED, "done %d", all_done);
    tfm_serve_free(s);
}

static void test_load_errors(const char *gpt_path) {
    tfm_serve *s = tfm_serve_create(NULL);
    CHECK("serve: load of a missing file fails naming it", tfm_serve_load(s, "/nonexistent/x.tfm", NULL, NULL, NULL) == -1 &&
          strstr(tfm_last_error(), "/nonexistent/x.tfm"), "%s", tfm_last_error());
    tfm_serve_load(s, gpt_path, "lm", NULL, NULL);
    CHECK("serve: two models of one name refused", tfm_serve_load(s, gpt_path, "lm", NULL, NULL) == -1 &&
          strstr(tfm_last_error(), "two models named 'lm'"), "%s", tfm_last_error());
    CHECK("serve: a language pair for a language model refused", tfm_serve_load(s, gpt_path, "lm2", "de", "en") == -1,
          "accepted");
    tfm_translator *t = random_translator(), *t2 = random_translator();
    int a = tfm_serve_add_translator(s, t, "mt", NULL, NULL, NULL);
    const tfm_serve_model *info = tfm_serve_model_info(s, a);
    CHECK("serve: a checkpoint without a language pair serves src -> tgt",
          info && !strcmp(info->src_lang, "src") && !strcmp(info->tgt_lang, "tgt") && tfm_serve_find_pair(s, "src", "tgt") == a,
          "%s", info ? info->src_lang : tfm_last_error());
    CHECK("serve: two translators of one language pair refused", tfm_serve_add_translator(s, t2, "mt2", NULL, NULL, NULL) == -1 &&
          strstr(tfm_last_error(), "already translates src -> tgt"), "%s", tfm_last_error());
    t2 = random_translator();
    CHECK("serve: a bad language code refused", tfm_serve_add_translator(s, t2, "mt3", "d e", "en", NULL) == -1 &&
          strstr(tfm_last_error(), "language codes"), "%s", tfm_last_error());
    tfm_serve_free(s);
}

int main(void) {
    char path[64];
    snprintf(path, sizeof path, "/tmp/tfm_serve_gpt.tfm");
    char dir[] = "/tmp/tfm_serve_XXXXXX";
    if (mkdtemp(dir)) snprintf(path, sizeof path, "%s/tfm_serve_gpt.tfm", dir);
    test_params();
    test_queue_and_batch();
    test_concurrent_translation(1);
    test_concurrent_translation(2);
    int saved = save_random_gpt(path) == 0;
    CHECK("serve: a random GPT saved", saved, "%s", tfm_last_error());
    if (saved) test_generation(path), test_load_errors(path);
    unlink(path);
    rmdir(dir);
    CHECK_EXIT();
}
