/* Thread safety (issue 9): no mutable global state, so
 *   - a GPT and a Transformer trained one step each in two threads at once (their own graphs), and
 *   - one model decoded from two threads at once (their own graphs; weights only read)
 * give bit-identical results to running the same work one after the other. Also: the error message is
 * per thread, tfm_prefix_error, and a model too large for memory is an error, not an abort. And the pieces
 * of thread data parallelism (--parallel batch): replicas share the weights, chunk gradients sum to the
 * whole batch's; and sentence batches decoded in parallel on worker graphs equal the serial decoding. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tfm/tfm.h"
#include "train/grad_norm.h"

#define NTHREADS 2   /* OpenMP threads inside each job (the same in both runs) */
#define REPS 30      /* steps per job */

typedef struct {
    void (*run)(void *job);
    float *out;              /* result to compare: logits/loss/grads or ids */
    size_t n;
} job_head;

/* ---- GPT: forward + backward of one batch (dropout on: the graph RNG is per graph) */
typedef struct {
    job_head h;
    tfm_gpt m;
} gpt_job;

static void gpt_run(void *p) {
    gpt_job *j = p;
    tfm_set_threads(NTHREADS);
    enum { B = 3, T = 12 };
    int x[B * T], y[B * T];
    for (int i = 0; i < B * T; i++) x[i] = (i * 7 + 3) % j->m.cfg.vocab_size, y[i] = (i * 5 + 1) % j->m.cfg.vocab_size;
    tfm_graph g;
    tfm_graph_init(&g, 42);
    g.training = 1;
    tfm_tensor *logits = NULL, *loss = NULL;
    for (int rep = 0; rep < REPS; rep++) {   /* long enough for the two threads to overlap */
        tfm_graph_reset(&g);
        tfm_params_zero_grad(&j->m.params);
        logits = tfm_gpt_forward(&g, &j->m, x, B, T);
        loss = tfm_cross_entropy(&g, logits, y, -100, 0.0f);
        tfm_backward(&g, loss);
    }
    size_t nl = logits->size, np = j->m.params.total;
    j->h.n = nl + 1 + np;
    j->h.out = malloc(sizeof(float) * j->h.n);
    memcpy(j->h.out, logits->data, sizeof(float) * nl);
    j->h.out[nl] = loss->data[0];
    memcpy(j->h.out + nl + 1, j->m.params.grad, sizeof(float) * np);
    tfm_graph_free(&g);
}

/* ---- Transformer: one training step (loss, backward, AdamW) then a greedy translation */
typedef struct {
    job_head h;
    tfm_mt_net *m;
} mt_job;

static void mt_run(void *p) {
    mt_job *j = p;
    tfm_set_threads(NTHREADS);
    enum { B = 2, Ts = 5, Tt = 4 };
    int src[B * Ts] = {5, 6, 7, 8, TFM_EOS, 9, 10, 11, TFM_EOS, TFM_PAD}, valid[B] = {5, 4};
    int tgt[B * Tt] = {6, 7, 8, TFM_EOS, 10, 9, TFM_EOS, TFM_PAD}, tgt_in[B * Tt];
    tfm_mt_shift_right(tgt, B, Tt, tgt_in);
    tfm_graph g;
    tfm_graph_init(&g, 7);
    g.training = 1;
    tfm_adamw opt;
    tfm_adamw_init(&opt, &j->m->params, 0.9f, 0.98f, 1e-9f, 0.0f);
    tfm_train_zero_grad(&g, &j->m->params);
    float l = 0;
    for (int rep = 0; rep < REPS; rep++) {
        tfm_graph_reset(&g);
        tfm_tensor *loss = tfm_mt_net_loss(j->m, &g, src, valid, B, Ts, tgt_in, tgt, Tt, 0.1f);
        tfm_backward(&g, loss);
        l = loss->data[0];
        tfm_train_step(&g, &j->m->params, &opt, 1e-3f, 1.0f);
    }
    tfm_adamw_free(&opt);
    int ids[] = {5, 6, 7, 9, 10}, off[] = {0, 3, 5}, *out[2], out_len[2];
    tfm_search_opts o = {.beam = 2, .alpha = 0.6f, .max_len = 6};
    int rc = tfm_search_ids(j->m, &g, ids, off, 2, 10, 2, &o, out, out_len);
    size_t np = j->m->params.total;
    j->h.n = 1 + np + 2 + (size_t)(rc ? 0 : out_len[0] + out_len[1]);
    j->h.out = malloc(sizeof(float) * j->h.n);
    j->h.out[0] = l;
    memcpy(j->h.out + 1, j->m->params.data, sizeof(float) * np);
    float *w = j->h.out + 1 + np;
    w[0] = rc ? -1.0f : (float)out_len[0];
    w[1] = rc ? -1.0f : (float)out_len[1];
    for (int s = 0, k = 2; !rc && s < 2; s++)
        for (int i = 0; i < out_len[s]; i++) w[k++] = (float)out[s][i];
    if (!rc) free(out[0]), free(out[1]);
    tfm_graph_free(&g);
}

/* ---- one GPT sampled from two threads: tfm_gpt_generate with its own graph and cache per call */
typedef struct {
    job_head h;
    tfm_gpt *m;
    uint64_t seed;
} gen_job;

static void gen_run(void *p) {
    gen_job *j = p;
    tfm_set_threads(NTHREADS);
    int prompt[] = {1, 2, 3}, ids[40];
    tfm_sample_opts o;
    tfm_sample_opts_default(&o);
    o.top_k = 5;
    o.top_p = 0.9f;
    o.seed = j->seed;
    tfm_graph g;
    tfm_graph_init(&g, 0);
    int n = tfm_gpt_generate(j->m, &g, prompt, 3, 40, &o, NULL, NULL, ids);   /* slides past block_size 16 */
    for (int rep = 1; rep < REPS / 3; rep++) tfm_gpt_generate(j->m, &g, prompt, 3, 40, &o, NULL, NULL, ids);
    j->h.n = 40;
    j->h.out = calloc(40, sizeof(float));
    for (int i = 0; i < n && i < 40; i++) j->h.out[i] = (float)ids[i];
    tfm_graph_free(&g);
}

static void *thread_main(void *job) {
    ((job_head *)job)->run(job);
    return NULL;
}

/* Run a and b one after the other, keep their outputs; reset the models; run them in two threads;
 * compare bit for bit. reset() restores the models between the runs. */
static void run_both(const char *name, job_head *a, job_head *b, void (*reset)(void)) {
    reset();
    a->run(a);
    b->run(b);
    float *sa = a->out, *sb = b->out;
    size_t na = a->n, nb = b->n;
    reset();
    pthread_t ta, tb;
    int ok_a = !pthread_create(&ta, NULL, thread_main, a), ok_b = !pthread_create(&tb, NULL, thread_main, b);
    if (ok_a) pthread_join(ta, NULL);
    if (ok_b) pthread_join(tb, NULL);
    int ok = ok_a && ok_b;
    CHECK(name, ok && na == a->n && nb == b->n && !memcmp(sa, a->out, na * sizeof(float)) &&
                    !memcmp(sb, b->out, nb * sizeof(float)),
          "concurrent results differ from sequential (sizes %zu/%zu vs %zu/%zu)", na, nb, a->n, b->n);
    free(sa), free(sb), free(a->out), free(b->out);
}

static tfm_gpt *g_gpt;
static tfm_mt_net *g_mt;
static void reset_models(void) {
    tfm_gpt_init_weights(g_gpt, 11);
    g_mt->vt->init_weights(g_mt, 12);
}

static void *set_error_in_thread(void *seen) {
    tfm_set_error("thread error");
    snprintf(seen, 64, "%s", tfm_last_error());
    return NULL;
}

static void test_error_per_thread(void) {
    tfm_set_error("main thread error");
    char seen[64] = "";
    pthread_t t;
    pthread_create(&t, NULL, set_error_in_thread, seen);
    pthread_join(t, NULL);
    CHECK("error message is per thread", !strcmp(tfm_last_error(), "main thread error") &&
          !strcmp(seen, "thread error"), "main '%s', thread '%s'", tfm_last_error(), seen);
    tfm_set_error("bad config: n_head 0");
    int rc = tfm_prefix_error("%s: ", "model.tfm");
    CHECK("tfm_prefix_error prepends", rc == -1 && !strcmp(tfm_last_error(), "model.tfm: bad config: n_head 0"),
          "got '%s'", tfm_last_error());
}

/* A model too large for memory is an error, not an abort (skipped under ASan, whose allocator aborts). */
static void test_out_of_memory(void) {
#if defined(__SANITIZE_ADDRESS__)
    printf("NOTRUN out of memory is a tfm error: ASan's allocator aborts on huge requests\n");
#else
    tfm_gpt_config big = {256, 1024, 64, 8, 65536, 0.0f, TFM_ATTN_CAUSAL, 0.0f};   /* ~3e12 parameters */
    tfm_gpt m;
    /* refused by the parameter budget (TFM_MAX_PARAMS) before allocating, or by the allocator */
    CHECK("GPT too large for memory: tfm_gpt_init returns an error", tfm_gpt_init(&m, &big) == -1 &&
          (strstr(tfm_last_error(), "out of memory") || strstr(tfm_last_error(), "parameters")), "got '%s'",
          tfm_last_error());
    tfm_mt_config c;
    tfm_mt_config_default(&c);
    c.src_vocab = c.tgt_vocab = 1 << 20;
    c.d_model = 65536;
    c.n_head = 8;
    c.ffn = 1 << 20;
    tfm_mt_net *t = tfm_mt_net_create(&c);
    CHECK("Transformer too large for memory: tfm_mt_net_create returns NULL with an error",
          t == NULL && (strstr(tfm_last_error(), "out of memory") || strstr(tfm_last_error(), "parameters")), "got '%s'",
          t ? "a model" : tfm_last_error());
    tfm_mt_net_free(t);
#endif
}

/* Two replicas of a GPT each do forward+backward on a chunk of a batch (loss scaled by chunk/B, dropout
 * keyed by the global sample); tfm_train_chunks_reduce gives the whole batch's gradient. */
static void test_replicas(void) {
    tfm_gpt_config gc = {20, 16, 2, 2, 16, 0.1f, TFM_ATTN_CAUSAL, 0.0f};
    tfm_gpt m, r[3], other;
    tfm_gpt_init(&m, &gc);
    tfm_gpt_init_weights(&m, 7);
    int ok = 1;
    for (int i = 0; i < 3; i++) ok &= tfm_gpt_replica_init(&r[i], &m) == 0;
    CHECK("tfm_gpt_replica_init: three replicas", ok, "%s", tfm_last_error());
    CHECK("a replica computes with the model's weights (same memory)",
          r[1].params.t[3]->data == m.params.t[3]->data && r[1].params.t[3]->grad != m.params.t[3]->grad, "not shared");
    tfm_gpt_config oc = gc;
    oc.n_embd = 8;
    tfm_gpt_init(&other, &oc);
    CHECK("tfm_params_share_data refuses a different model",
          tfm_params_share_data(&other.params, &m.params) == -1 && strstr(tfm_last_error(), "replica"), "%s", tfm_last_error());
    tfm_gpt_free(&other);
    enum { B = 5, T = 12 };
    int x[B * T], y[B * T];
    for (int i = 0; i < B * T; i++) x[i] = (i * 7 + 3) % gc.vocab_size, y[i] = (i * 5 + 1) % gc.vocab_size;
    tfm_graph g;
    tfm_graph_init(&g, 3);
    g.training = 1;
    tfm_params_zero_grad(&m.params);
    tfm_backward(&g, tfm_cross_entropy(&g, tfm_gpt_forward(&g, &m, x, B, T), y, -100, 0.0f));
    float *whole = malloc(m.params.total * sizeof(float));
    memcpy(whole, m.params.grad, m.params.total * sizeof(float));
    tfm_params_zero_grad(&m.params);
    tfm_params *ps[3];
    int sizes = 0;
    for (int c = 0; c < 3; c++) {   /* chunks of 2, 2, 1 samples */
        int c0, cn;
        tfm_train_chunk(0, B, 3, c, &c0, &cn);
        sizes = sizes * 10 + cn;
        tfm_graph gc_;
        tfm_graph_init(&gc_, 3);   /* the same dropout stream as g */
        gc_.training = 1;
        gc_.drop_sample0 = c0, gc_.drop_samples = cn, gc_.drop_total = B;
        tfm_params_zero_grad(&r[c].params);
        tfm_tensor *l = tfm_cross_entropy(&gc_, tfm_gpt_forward(&gc_, &r[c], x + c0 * T, cn, T), y + c0 * T, -100, 0.0f);
        tfm_backward(&gc_, tfm_scale(&gc_, l, (float)cn / B));
        tfm_graph_free(&gc_);
        ps[c] = &r[c].params;
    }
    CHECK("tfm_train_chunk: 5 samples in 3 chunks are 2, 2, 1", sizes == 221, "%d", sizes);
    float norm = tfm_train_chunks_reduce(&g, tfm_profile_begin(&g), &m.params, ps, 3);
    CHECK("tfm_train_chunks_reduce returns tfm_grad_norm of the sum, bit for bit", norm == tfm_grad_norm(&m.params),
          "%.9g vs %.9g", norm, tfm_grad_norm(&m.params));
    double d = max_abs_diff(whole, m.params.grad, m.params.total);
    int released = 0;   /* the replicas' grads, read: released for their next backward (tfm_params_release_grad) */
    for (int c = 0; c < 3; c++)
        for (int i = 0; i < r[c].params.n; i++) released += r[c].params.t[i]->grad_unzeroed == 1;
    CHECK("three chunks' gradients (dropout 0.1) summed == the whole batch's, replicas released", d < 1e-5 &&
          released == 3 * m.params.n, "max diff %g, %d of %d replica tensors released", d, released, 3 * m.params.n);
    free(whole);
    tfm_graph_free(&g);
    for (int i = 0; i < 3; i++) tfm_gpt_free(&r[i]);
    tfm_gpt_free(&m);
}

/* The chunks' sum over several norm blocks (and a ragged last one): its norm equals tfm_grad_norm's bits. */
static void test_reduce_norm_blocks(void) {
    tfm_params p[3];
    tfm_params *reps[2] = {&p[1], &p[2]};
    for (int i = 0; i < 3; i++) {
        tfm_params_init(&p[i]);
        tfm_param(&p[i], "a", 2, (int[]){123, 301});
        tfm_param(&p[i], "b", 1, (int[]){7});
        tfm_params_alloc(&p[i]);
        for (size_t j = 0; j < p[i].total; j++) p[i].grad[j] = (float)sin(0.37 * j + i) * (i + 1);
    }
    tfm_graph g;
    tfm_graph_init(&g, 1);
    float norm = tfm_train_chunks_reduce(&g, tfm_profile_begin(&g), &p[0], reps, 2);
    CHECK("tfm_train_chunks_reduce's norm over 3 blocks == tfm_grad_norm", norm == tfm_grad_norm(&p[0]) && norm > 0,
          "%.9g vs %.9g", norm, tfm_grad_norm(&p[0]));
    tfm_graph_free(&g);
    for (int i = 0; i < 3; i++) tfm_params_free(&p[i]);
}

/* tfm_grad_sq_block is the sum of 8 lane sums, lane k taking the squares of elements i with i % 8 == k in order
 * (in double), added lane 0 to 7: bit for bit that, whatever vectors compute it (the norm's bits may not
 * change with the build or the CPU). Ranges from 0 to 8 with 0 to 7 ragged elements, values of many
 * magnitudes. */
static void test_grad_sq_block(void) {
    float g[8 + 64 + 7];
    for (int i = 0; i < (int)(sizeof g / sizeof g[0]); i++) g[i] = (float)(sin(1.7 * i) * pow(10.0, (i % 13) - 6));
    int ok = 1;
    for (int i0 = 0; i0 <= 8; i0 += 8)
        for (int n = 0; n <= 71; n++) {
            double acc[8] = {0};
            for (int i = i0; i < i0 + n; i++) acc[i & 7] += (double)g[i] * g[i];
            double want = 0;
            for (int k = 0; k < 8; k++) want += acc[k];
            double got = tfm_grad_sq_block(g, (size_t)i0, (size_t)(i0 + n));
            if (memcmp(&got, &want, sizeof got)) ok = 0, printf("  sq_block [%d,%d): %.17g vs %.17g\n", i0, i0 + n, got, want);
        }
    CHECK("tfm_grad_sq_block == its 8 in-order lane sums, bit for bit", ok, "see above");
}

/* tfm_search_ids_par: 11 sentences in batches of 3 (4 batches) decoded on 2 worker graphs, one batch per
 * thread, give the ids of 1 thread decoding them one batch after the other (greedy and beam; this untrained
 * model's beams end at once, tests/cli/profile_decode.sh compares beams of a trained one); the workers
 * did the work (the caller's arena did not grow; which worker took which batch is up to the scheduler) and
 * --profile's times end up in the caller's graph */
/* a small Transformer (d_model 16, FFN 32) with a V-word vocabulary on both sides */
static tfm_mt_net *small_transformer(int V, int n_layer, float dropout) {
    tfm_mt_config sc;
    tfm_mt_config_default(&sc);
    sc.src_vocab = sc.tgt_vocab = V;
    sc.d_model = 16;
    sc.ffn = 32;
    sc.n_layer = n_layer;
    sc.dropout = dropout;
    return tfm_mt_net_create(&sc);
}

static void test_decode_workers(void) {
    tfm_mt_net *m = small_transformer(23, 2, 0.0f);
    CHECK("transformer for parallel decoding", m != NULL, "%s", tfm_last_error());
    if (!m) return;
    enum { N = 11 };
    int ids[N * 9], off[N + 1] = {0}, *ser[N], ser_len[N], *par[N], par_len[N];
    tfm_rng r;
    tfm_rng_seed(&r, 5);
    for (int i = 0; i < N; i++) {
        off[i + 1] = off[i] + 1 + (i * 7) % 9;
        for (int k = off[i]; k < off[i + 1]; k++) ids[k] = 4 + (int)(tfm_rng_u32(&r) % 19);
    }
    for (int beam = 1; beam <= 3; beam += 2) {
        tfm_search_opts o = {.beam = beam, .alpha = 0.6f, .max_len = 8};
        tfm_graph g, w[2], *wp[2] = {&w[0], &w[1]};
        tfm_graph_init(&g, 0);
        g.profile = 1;
        for (int i = 0; i < 2; i++) tfm_graph_init_worker(&w[i], &g);
        tfm_set_threads(1);
        int rc1 = tfm_search_ids(m, &g, ids, off, N, 12, 3, &o, ser, ser_len);
        size_t g_peak = g.arena.peak;
        tfm_graph_reset(&g);
        tfm_graph_free(&g);
        tfm_graph_init(&g, 0);
        g.profile = 1;
        tfm_set_threads(2);
        int rc2 = tfm_search_ids_par(m, &g, wp, 2, ids, off, N, 12, 3, &o, par, par_len);
        int same = !rc1 && !rc2, words = 0;
        for (int i = 0; same && i < N; i++) {
            same = ser_len[i] == par_len[i] && !memcmp(ser[i], par[i], sizeof(int) * (size_t)ser_len[i]);
            words += ser_len[i];
        }
        CHECK(beam == 1 ? "greedy: 4 batches on 2 worker graphs == 1 thread, batch after batch"
                        : "beam 3: 4 batches on 2 worker graphs == 1 thread, batch after batch",
              same && (beam > 1 || words > 0), "rc %d %d, %d output ids", rc1, rc2, words);
        double ops = 0, left = 0;
        for (int k = 0; k < TFM_OP_COUNT; k++) ops += g.op_time[k], left += w[0].op_time[k] + w[1].op_time[k];
        CHECK("the workers decoded (their arenas grew, the caller's did not); their profile moved to the caller",
              g_peak > 0 && w[0].arena.peak + w[1].arena.peak > 0 && g.arena.peak == 0 && ops > 0 && left == 0,
              "peaks %zu %zu %zu %zu, ops %g, left %g", g_peak, w[0].arena.peak, w[1].arena.peak, g.arena.peak, ops, left);
        for (int i = 0; i < N; i++) free(ser[i]), free(par[i]);
        tfm_graph_free(&g);
        for (int i = 0; i < 2; i++) tfm_graph_free(&w[i]);
    }
    tfm_mt_net_free(m);
}

/* tfm_thread_scratch: a slot grows on demand (from 1 MiB on as whole 2 MiB huge pages), a smaller request gets the
 * same buffer with its contents, and another thread has a buffer of its own (freed when that thread exits) */
static void *scratch_in_other_thread(void *mains) {
    float *mine = tfm_thread_scratch(TFM_SCRATCH_NORM, 300000);
    if (mine) mine[299999] = 1.0f;
    return (void *)(intptr_t)(mine != NULL && mine != (float *)mains);
}

static void test_thread_scratch(void) {
    static const size_t sizes[] = {1000, ((size_t)1 << 18) + 5, ((size_t)3 << 18) + 7};   /* 4 KB, 1 MiB, 3 MiB */
    int ok = 1;
    float *b = NULL;
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        size_t n = sizes[k];
        b = tfm_thread_scratch(TFM_SCRATCH_NORM, n);
        ok &= b != NULL && (uintptr_t)b % 64 == 0;
        for (size_t i = 0; ok && i < n; i++) b[i] = (float)i;
        float *c = tfm_thread_scratch(TFM_SCRATCH_NORM, n / 2);
        ok &= c == b && c[n / 2 - 1] == (float)(n / 2 - 1) && b[n - 1] == (float)(n - 1);
    }
    pthread_t t;
    void *other = NULL;
    ok &= pthread_create(&t, NULL, scratch_in_other_thread, b) == 0 && pthread_join(t, &other) == 0 && other != NULL;
    CHECK("thread scratch: grows past 1 MiB and 2 MiB (huge pages), 64-byte aligned, keeps its buffer for smaller "
          "requests, one per thread", ok, "a buffer missing, misaligned, moved or shared");
}

int main(void) {
    test_thread_scratch();
    test_decode_workers();
    test_out_of_memory();
    test_replicas();
    test_reduce_norm_blocks();
    test_grad_sq_block();
    tfm_gpt_config gc = {20, 16, 2, 2, 16, 0.1f, TFM_ATTN_CAUSAL, 0.0f};
    gpt_job gj;
    memset(&gj, 0, sizeof gj);
    gj.h.run = gpt_run;
    CHECK("gpt init", tfm_gpt_init(&gj.m, &gc) == 0, "%s", tfm_last_error());
    g_gpt = &gj.m;
    tfm_mt_config dflt;
    tfm_mt_config_default(&dflt);
    mt_job mj = {{mt_run, NULL, 0}, small_transformer(12, dflt.n_layer, 0.1f)};
    CHECK("transformer create", mj.m != NULL, "%s", tfm_last_error());
    g_mt = mj.m;
    run_both("GPT and Transformer in two threads == one after the other (logits, loss, grads; step, beam)",
             &gj.h, &mj.h, reset_models);
    gen_job a = {{gen_run, NULL, 0}, &gj.m, 3}, b = {{gen_run, NULL, 0}, &gj.m, 4};
    run_both("one GPT sampled from two threads (own graphs) == one after the other", &a.h, &b.h, reset_models);
    test_error_per_thread();
    tfm_gpt_free(&gj.m);
    tfm_mt_net_free(mj.m);
    CHECK_EXIT();
}
