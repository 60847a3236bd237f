/* The GPT step's share of the FMA peak, step by step (issue 12): trains the GPT baby config (train-lm's
 * defaults: 4 layers, 4 heads, width 128, block 64, batch 12, seed 1337) through the library as `tfm
 * train-lm` does (the same losses), and after every step runs a short FMA probe (bench/fma_loop.h) on the
 * same threads. On a VM whose FMA throughput swings with a neighbour's load (docs/BENCHMARKS.md, the Xeon
 * sections), a probe seconds away from the steps (bench/peak.sh's rounds) cannot tell which steps ran on a
 * full core; here a step counts as quiet when the probes just before and after it both reach 95% of the
 * run's best probe, and the quiet steps' median is quoted against that best probe. Dividing each step by
 * its own probes instead would flatter the step in noisy phases: a neighbour on the same core takes half
 * of a pure-FMA probe but less of a step that also waits on memory. A neighbour can also slow the steps
 * through the caches and memory without lowering an FMA probe: the last line (the median step after the
 * lowest and after the highest quarter of probes) shows whether the probes explain the slow steps at all;
 * where they do not, the quiet steps are not a quiet machine and only an idle host settles the share.
 * The probes touch no memory, so a step finds the caches as the previous step left them.
 * The flops of a step are counted as bench/peak.sh counts them (nanoGPT's estimate_mfu / PaLM appendix B):
 * 6 x matmul weights + 12 x layers x width x block per token.
 *   peak_steps DATA [--steps N] [--threads T] [--probe-ms P]    (defaults 400, all cores, 2 ms)
 * Built and run by bench/peak.sh (linked with build/libtfm.a). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tfm/train.h>

#include "fma_loop.h"

#define WARMUP 20 /* steps not counted: the arena and the scratch buffers grow in the first steps */
#define QUIET 0.95 /* a quiet step: both probes around it reach this share of the run's best probe */

typedef struct {
    int threads;
    long probe_iters;
    float sink;
    double prev_train_s;
    float loss;      /* the last step's */
    int n;           /* steps recorded */
    double *step_s;  /* (steps) seconds per step */
    double *probe;   /* (steps + 1) GFLOP/s of the probe before step i (probe[i]) and after it (probe[i + 1]) */
} run;

static void report(const tfm_lm_report *r, void *user) {
    run *x = user;
    if (r->eval) return;
    x->step_s[x->n] = r->train_s - x->prev_train_s;   /* train_s: the training steps only, not this callback */
    x->prev_train_s = r->train_s;
    x->loss = r->loss;
    x->probe[++x->n] = gflops(x->threads, x->probe_iters, &x->sink);
}

static int cmp_double(const void *a, const void *b) {
    double u = *(const double *)a, v = *(const double *)b;
    return (u > v) - (u < v);
}

/* the q-quantile (0..1) of v[0..n), v sorted in place */
static double quantile(double *v, int n, double q) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return v[(int)(q * (n - 1) + 0.5)];
}

typedef struct {
    double probe;   /* the lower of the two probes around the step */
    double t;       /* the step's seconds */
} step_probe;

static int cmp_probe(const void *a, const void *b) {
    return cmp_double(&((const step_probe *)a)->probe, &((const step_probe *)b)->probe);
}

/* NAME: n steps' median, 10% and 90% quantiles (t sorted in place) and the median against the best probe */
static void print_steps(const char *name, double *t, int n, double flops, double best) {
    double med = quantile(t, n, 0.5);
    printf("%s: %d, median %.2f ms (10%% %.2f, 90%% %.2f) = %.1f%% of the best probe\n", name, n, 1e3 * med,
           1e3 * quantile(t, n, 0.1), 1e3 * quantile(t, n, 0.9), 100 * flops / med / 1e9 / best);
}

static int usage(const char *msg) {
    fprintf(stderr, "peak_steps: %s (usage: peak_steps DATA [--steps N >= 50] [--threads T >= 0] [--probe-ms P > 0])\n", msg);
    return 2;
}

int main(int argc, char **argv) {
    tfm_threads_short_spin(argv);   /* as tfm's main: idle OpenMP threads sleep after a short spin */
    if (argc < 2 || argv[1][0] == '-') return usage("DATA (a text file) is required");
    int steps = 400, threads = 0;
    double probe_ms = 2.0;
    for (int i = 2; i < argc; i++) {
        if (i + 1 >= argc) return usage("a flag without its value, or an extra argument");
        if (!strcmp(argv[i], "--steps")) steps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--threads")) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--probe-ms")) probe_ms = atof(argv[++i]);
        else return usage("unknown flag");
    }
    if (steps < 50 || threads < 0 || !(probe_ms > 0)) return usage("a value out of range");
    if (fma_init()) return fprintf(stderr, "peak_steps: this CPU has no AVX2+FMA\n"), 1;
    tfm_set_threads(threads);
    threads = tfm_get_threads();

    tfm_gpt_config cfg = {.block_size = 64, .n_layer = 4, .n_head = 4, .n_embd = 128, .dropout = 0.0f,
                          .attention = TFM_ATTN_CAUSAL};
    tfm_lm_train_state st;
    tfm_lm_train_state_default(&st);   /* train-lm's defaults: batch 12, AdamW, warmup, clipping */
    st.iters = WARMUP + steps;
    st.eval_every = st.iters + 1;   /* no evaluation inside the run */
    st.eval_iters = 1;
    st.seed = 1337;
    tfm_lm_train_state_init(&st);
    tfm_lm_data data;
    if (tfm_lm_data_load(&data, argv[1], NULL, 0.9f, cfg.block_size))
        return fprintf(stderr, "peak_steps: %s\n", tfm_last_error()), 1;
    cfg.vocab_size = data.vocab.n;
    tfm_gpt m;
    if (tfm_gpt_init(&m, &cfg)) return fprintf(stderr, "peak_steps: %s\n", tfm_last_error()), 1;
    tfm_gpt_init_weights(&m, (uint64_t)st.seed);
    tfm_adamw opt;
    if (tfm_adamw_init(&opt, &m.params, st.beta1, st.beta2, 1e-8f, st.weight_decay))
        return fprintf(stderr, "peak_steps: %s\n", tfm_last_error()), 1;

    run x = {.threads = threads};
    x.step_s = malloc(sizeof(double) * (size_t)st.iters);
    x.probe = malloc(sizeof(double) * (size_t)(st.iters + 1));
    double *buf = malloc(sizeof(double) * 2 * (size_t)steps);   /* quiet steps, probes; then quarters */
    step_probe *by_probe = malloc(sizeof *by_probe * (size_t)steps);
    if (!x.step_s || !x.probe || !buf || !by_probe) return fprintf(stderr, "peak_steps: out of memory\n"), 1;
    x.probe_iters = fma_calibrate(probe_ms * 1e-3, &x.sink);
    x.probe[0] = gflops(threads, x.probe_iters, &x.sink);
    if (tfm_lm_train(&m, &data, &opt, &st, 0, 0, NULL, report, NULL, &x) < 0)
        return fprintf(stderr, "peak_steps: %s\n", tfm_last_error()), 1;

    const double L = cfg.n_layer, C = cfg.n_embd, T = cfg.block_size, B = st.batch_size, V = cfg.vocab_size;
    const double w = L * 12 * C * C + V * C;                  /* matmul weights */
    const double flops = (6 * w + 12 * L * C * T) * B * T;    /* a step */
    double *t = x.step_s + WARMUP, *p = x.probe + WARMUP;   /* step i runs between probes p[i] and p[i + 1] */
    double *quiet = buf, *probes = buf + steps, best = 0;
    for (int i = 0; i <= steps; i++) best = p[i] > best ? p[i] : best;
    int nq = 0;
    for (int i = 0; i < steps; i++) {
        by_probe[i] = (step_probe){p[i] < p[i + 1] ? p[i] : p[i + 1], t[i]};
        probes[i] = p[i + 1];
        if (by_probe[i].probe >= QUIET * best) quiet[nq++] = t[i];
    }
    printf("GPT baby config (4 layers, width 128, block 64, batch 12, vocab %d): %.3f GFLOP per step, %d threads, "
           "%d steps after %d of warm-up, a %.1f ms FMA probe (%d-wide) after each\n",
           (int)V, flops / 1e9, threads, steps, WARMUP, probe_ms, lanes);
    printf("probes: best %.1f GFLOP/s, median %.1f (10%% %.1f, 90%% %.1f)\n", best, quantile(probes, steps, 0.5),
           quantile(probes, steps, 0.1), quantile(probes, steps, 0.9));
    print_steps("all steps", t, steps, flops, best);
    if (nq) print_steps("quiet steps (both probes around them >= 95% of the best)", quiet, nq, flops, best);
    else printf("quiet steps (both probes around them >= 95%% of the best): none\n");
    /* do the probes explain the slow steps? the steps after the lowest and the highest quarter of probes */
    qsort(by_probe, (size_t)steps, sizeof *by_probe, cmp_probe);
    int q = steps / 4;
    double *low = buf, *high = buf + steps;   /* buf's earlier contents are printed and done with */
    for (int i = 0; i < q; i++) low[i] = by_probe[i].t, high[i] = by_probe[steps - q + i].t;
    printf("median step after the lowest quarter of probes (%.0f-%.0f GFLOP/s): %.2f ms; after the highest "
           "(%.0f-%.0f): %.2f ms\n", by_probe[0].probe, by_probe[q - 1].probe, 1e3 * quantile(low, q, 0.5),
           by_probe[steps - q].probe, by_probe[steps - 1].probe, 1e3 * quantile(high, q, 0.5));
    printf("loss at step %d: %.4f (as tfm train-lm --seed %d --iters %d)\n", st.iters, x.loss, st.seed, st.iters);
    free(by_probe);
    free(buf);
    free(x.probe);
    free(x.step_s);
    tfm_adamw_free(&opt);
    tfm_gpt_free(&m);
    tfm_lm_data_free(&data);
    return x.sink == 12345.0f;   /* keeps the probes from being optimised away */
}
