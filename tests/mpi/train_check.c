/* Data-parallel GPT training with the library's pieces, as the wiring plan of docs/DISTRIBUTED.md puts
 * them together (built by `make MPI=1` as $(BUILD)/mpi/train_check; tests/cli/mpi.sh runs it with 1, 2 and
 * 3 ranks and compares the loss curves). Not the trainer: a small loop in the same shape, so the
 * semantics (global batch slices, loss scaled by the slice's share, dropout keyed by the global sample,
 * all-reduce before the clip, the same AdamW step on every rank) are checked before the trainers use them.
 *
 *   train_check [--steps 20] [--batch 12] [--dropout 0.1] [--overlap] [--no-drop-offset]
 *
 * Rank 0 prints "step S loss L" per step (%.9g) and "params HASH"; every step the ranks compare a hash of
 * their parameters (a mismatch is an error naming the rank). --overlap: the non-blocking all-reduce, one
 * range per parameter tensor started in reverse registration order (as a backward would).
 * --no-drop-offset: leave tfm_graph.drop_sample0/drop_samples at 0 (each rank then repeats the first
 * samples' dropout masks; the test uses it to show the comparison can fail). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tfm/core.h"
#include "tfm/dist.h"
#include "tfm/gpt.h"
#include "tfm/ops.h"
#include "tfm/train.h"

enum { VOCAB = 65, BLOCK = 16, CORPUS = 5000 };

static uint64_t hash_bytes(const void *p, size_t n) {
    const unsigned char *b = p;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

static void fail(tfm_dist *d, const char *what) {
    fprintf(stderr, "train_check: rank %d: %s: %s\n", tfm_dist_rank(d), what, tfm_last_error());
    tfm_dist_abort(d, 1);
}

int main(int argc, char **argv) {
    int steps = 20, B = 12, overlap = 0, drop_offset = 1;
    float dropout = 0.1f;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--overlap")) overlap = 1;
        else if (!strcmp(argv[i], "--no-drop-offset")) drop_offset = 0;
        else if (i + 1 < argc && !strcmp(argv[i], "--steps")) steps = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--batch")) B = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--dropout")) dropout = (float)atof(argv[++i]);
    }
    tfm_dist_opts o = {0, 60.0};
    tfm_dist *d = tfm_dist_init(&argc, &argv, &o);
    if (!d) return fprintf(stderr, "train_check: %s\n", tfm_last_error()), 1;
    char cfg[128];
    snprintf(cfg, sizeof cfg, "steps %d batch %d dropout %g overlap %d", steps, B, dropout, overlap);
    if (tfm_dist_check_config(d, cfg)) fail(d, "start");
    int start, count;
    if (tfm_dist_slice(d, B, &start, &count)) {
        if (tfm_dist_is_writer(d)) fprintf(stderr, "train_check: %s\n", tfm_last_error());
        tfm_dist_finalize(d);
        return 1;
    }

    /* a learnable synthetic corpus, the same on every rank */
    int *corpus = malloc(sizeof(int) * CORPUS);
    tfm_rng cr;
    tfm_rng_seed(&cr, 11);
    for (int i = 0; i < CORPUS; i++) corpus[i] = (i * 7 + (i / 13) % 5 + (int)(tfm_rng_u32(&cr) % 3)) % VOCAB;

    tfm_gpt m;
    tfm_gpt_config c = {VOCAB, BLOCK, 2, 2, 32, dropout, 0, 0.0f};
    if (tfm_gpt_init(&m, &c)) fail(d, "model");
    tfm_gpt_init_weights(&m, 5);
    tfm_params *p = &m.params;
    if (tfm_dist_broadcast(d, p->data, p->total)) fail(d, "broadcast");   /* rank 0's weights everywhere */
    if (overlap && tfm_dist_reserve(d, p->total)) fail(d, "reserve");
    tfm_adamw opt;
    tfm_adamw_init(&opt, p, 0.9f, 0.95f, 1e-8f, 0.1f);
    tfm_graph g;
    tfm_graph_init(&g, 77);   /* dropout RNG: the same seed and draws on every rank */
    tfm_rng batch_rng;
    tfm_rng_seed(&batch_rng, 3);
    int *x = malloc(sizeof(int) * B * BLOCK), *y = malloc(sizeof(int) * B * BLOCK);
    tfm_params_zero_grad(p);
    for (int step = 1; step <= steps; step++) {
        /* the whole global batch, drawn as one process would; this rank computes [start, start+count) */
        for (int b = 0; b < B; b++) {
            int off = (int)(tfm_rng_u32(&batch_rng) % (CORPUS - BLOCK - 1));
            for (int t = 0; t < BLOCK; t++) x[b * BLOCK + t] = corpus[off + t], y[b * BLOCK + t] = corpus[off + t + 1];
        }
        tfm_graph_reset(&g);
        g.training = 1;
        if (drop_offset) g.drop_sample0 = start, g.drop_samples = count;
        tfm_tensor *loss = tfm_cross_entropy(&g, tfm_gpt_forward(&g, &m, x + start * BLOCK, count, BLOCK),
                                             y + start * BLOCK, -100, 0.0f);
        loss = tfm_scale(&g, loss, (float)count / (float)B);   /* this slice's share of the global mean */
        tfm_backward(&g, loss);
        double global_loss = loss->data[0];
        if (tfm_dist_sum_f64(d, &global_loss, 1)) fail(d, "loss sum");
        int rc;
        if (overlap) {
            rc = 0;
            for (int i = p->n - 1; i >= 0 && !rc; i--)
                rc = tfm_dist_allreduce_start(d, p->t[i]->grad, p->t[i]->size) || tfm_dist_allreduce_progress(d);
            rc = rc || tfm_dist_allreduce_wait_all(d);
        } else {
            rc = tfm_dist_allreduce_sum(d, p->grad, p->total);
        }
        if (rc) fail(d, "all-reduce");
        float coef = tfm_clip_coef(tfm_grad_norm(p), 1.0f);   /* on the all-reduced gradient */
        tfm_adamw_step_fused(&opt, p, 1e-2f, coef, 1);
        char h[32];
        snprintf(h, sizeof h, "%016llx", (unsigned long long)hash_bytes(p->data, p->total * sizeof(float)));
        if (tfm_dist_check_config(d, h)) fail(d, "parameters differ between ranks");
        if (tfm_dist_is_writer(d)) printf("step %d loss %.9g\n", step, global_loss);
        if (step == steps && tfm_dist_is_writer(d)) printf("params %s\n", h);
    }
    free(x), free(y), free(corpus);
    tfm_graph_free(&g);
    tfm_adamw_free(&opt);
    tfm_gpt_free(&m);
    tfm_dist_finalize(d);
    return 0;
}
