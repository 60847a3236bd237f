/* The distributed layer without MPI (include/tfm/dist.h; the MPI version is checked under mpirun by
 * tests/cli/mpi.sh): one rank, collectives leave data as is, batch slices, the weighted split of
 * token-bucketed batches, the configuration hash; and dropout keyed by the global sample index
 * (tfm_graph.drop_sample0/drop_samples): each slice of a batch draws the masks the whole batch draws. */
#include <stdint.h>
#include <stdlib.h>

#include "check.h"
#include "tfm/core.h"
#include "tfm/dist.h"
#include "tfm/ops.h"

/* tfm_dist_split_weighted: contiguous slices of nearly equal weight (train-mt token balance). */
static void check_weighted(void) {
    int w[10] = {5, 5, 5, 5, 5, 5, 5, 5, 5, 5}, b[5];
    tfm_dist_split_weighted(w, 10, 2, b);
    CHECK("weighted split: equal weights halve", b[0] == 0 && b[1] == 5 && b[2] == 10, "bounds %d %d %d", b[0], b[1], b[2]);
    int v[6] = {30, 2, 2, 2, 2, 2};   /* one long sentence: it alone is about the first half */
    tfm_dist_split_weighted(v, 6, 2, b);
    CHECK("weighted split: a heavy sample takes its own slice", b[1] == 1 && b[2] == 6, "bounds %d %d %d", b[0], b[1], b[2]);
    int u[2] = {1, 1};
    tfm_dist_split_weighted(u, 2, 4, b);
    int mono = 1;
    for (int r = 0; r < 4; r++) mono &= b[r] <= b[r + 1];
    CHECK("weighted split: fewer samples than ranks: ordered, covers all", mono && b[0] == 0 && b[4] == 2,
          "bounds %d %d %d %d %d", b[0], b[1], b[2], b[3], b[4]);
    /* random weights: contiguous, monotone, each slice within one sample of the ideal share */
    tfm_rng g;
    tfm_rng_seed(&g, 5);
    int ok = 1;
    for (int t = 0; t < 200 && ok; t++) {
        int n = 1 + (int)(tfm_rng_u32(&g) % 64), ranks = 1 + (int)(tfm_rng_u32(&g) % 8), x[64], bb[9];
        double total = 0;
        int wmax = 0;
        for (int i = 0; i < n; i++) x[i] = 1 + (int)(tfm_rng_u32(&g) % 50), total += x[i], wmax = x[i] > wmax ? x[i] : wmax;
        tfm_dist_split_weighted(x, n, ranks, bb);
        ok = bb[0] == 0 && bb[ranks] == n;
        for (int r = 0; r < ranks && ok; r++) {
            double s = 0;
            for (int i = bb[r]; i < bb[r + 1]; i++) s += x[i];
            ok = bb[r] <= bb[r + 1] && s <= total / ranks + wmax + 1e-9;
        }
    }
    CHECK("weighted split: 200 random cases contiguous, each share <= ideal + one sample", ok, "a case failed");
}

enum { B = 6, T = 5, H = 2, DH = 4, C = H * DH };

static void fill_rand(float *x, size_t n, uint64_t seed) {
    tfm_rng g;
    tfm_rng_seed(&g, seed);
    for (size_t i = 0; i < n; i++) x[i] = tfm_rng_normal(&g);
}

/* Samples [s0, s0+ns) of (B,T,C) inputs x, y, q, k, v through dropout, AddNorm with dropout and attention
 * with dropout (in this order, one graph seeded 42); out gets the three outputs and the grads of x, y, q,
 * k, v from loss = sum of the outputs * a fixed weight. sliced = 0: no drop offset (the plain graph). */
#define NOUT 8
static void run_slice(int s0, int ns, int sliced, float *out[NOUT]) {
    static float in[5][B * T * C], wgt[B * T * C];
    fill_rand(in[0], sizeof in / sizeof(float), 3);
    fill_rand(wgt, B * T * C, 4);
    tfm_graph g;
    tfm_graph_init(&g, 42);
    g.training = 1;
    if (sliced) g.drop_sample0 = s0, g.drop_samples = ns;
    size_t off = (size_t)s0 * T * C, n = (size_t)ns * T * C;
    tfm_tensor *t[5];
    for (int i = 0; i < 5; i++) {
        float *data = tfm_arena_alloc(&g.arena, n * sizeof(float));
        memcpy(data, in[i] + off, n * sizeof(float));
        t[i] = tfm_constant(&g, data, 3, (int[]){ns, T, C});
        t[i]->grad = tfm_arena_calloc(&g.arena, n * sizeof(float));
    }
    tfm_tensor *o[3];
    o[0] = tfm_dropout(&g, t[0], 0.3f);
    o[1] = tfm_add_layernorm(&g, t[0], t[1], 0.4f, NULL, NULL, 1e-5f);
    tfm_mask m = {1, NULL, 0, 0};
    o[2] = tfm_attention_dropout(&g, t[2], t[3], t[4], H, 0, &m, 0.5f, 0.25f);
    tfm_tensor *w = tfm_constant(&g, wgt + off, 3, (int[]){ns, T, C});
    tfm_tensor *loss = tfm_add(&g, tfm_add(&g, tfm_sum(&g, tfm_mul(&g, o[0], w)), tfm_sum(&g, tfm_mul(&g, o[1], w))),
                               tfm_sum(&g, tfm_mul(&g, o[2], w)));
    tfm_backward(&g, loss);
    for (int i = 0; i < 3; i++) memcpy(out[i] + off, o[i]->data, n * sizeof(float));
    for (int i = 0; i < 5; i++) memcpy(out[3 + i] + off, t[i]->grad, n * sizeof(float));
    tfm_graph_free(&g);
}

/* The whole batch in one graph vs the batch in 3 and in 2 slices with their offsets: the same bits. */
static void check_dropout_slices(void) {
    static const char *what[NOUT] = {"dropout", "add_layernorm", "attention", "d x", "d y", "d q", "d k", "d v"};
    static float full[NOUT][B * T * C], part[NOUT][B * T * C];
    float *pf[NOUT], *pp[NOUT];
    for (int i = 0; i < NOUT; i++) pf[i] = full[i], pp[i] = part[i];
    run_slice(0, B, 0, pf);
    int dropped = 0;
    for (int i = 0; i < B * T * C; i++) dropped += full[0][i] == 0.0f;
    CHECK("dropout slices: the full batch drops some elements", dropped > 0 && dropped < B * T * C, "%d dropped", dropped);
    int splits[2] = {3, 2};
    for (int si = 0; si < 2; si++) {
        int N = splits[si], ns = B / N;
        for (int r = 0; r < N; r++) run_slice(r * ns, ns, 1, pp);
        for (int i = 0; i < NOUT; i++) {
            char name[128];
            snprintf(name, sizeof name, "dropout keyed by global sample: %s of %d slices == full batch, bit for bit", what[i], N);
            CHECK(name, memcmp(full[i], part[i], sizeof full[i]) == 0, "max diff %g",
                  max_abs_diff(full[i], part[i], B * T * C));
        }
    }
    /* without the offset the slices would repeat the first samples' masks: the check can fail */
    for (int r = 0; r < 3; r++) run_slice(r * 2, 2, 0, pp);
    CHECK("dropout slices without the offset differ (the check is sensitive)",
          memcmp(full[0], part[0], sizeof full[0]) != 0, "equal");
}

/* A time-major (T, B, C) dropout (a GRU's layer input) over samples [s0, s0+ns) of the batch: forward and
 * input gradient of sum(dropout(x) * w), written into the full-batch layout. */
static void run_time_major(int s0, int ns, int sliced, float *out, float *dx) {
    static float x[T * B * C], w[T * B * C];
    fill_rand(x, T * B * C, 5);
    fill_rand(w, T * B * C, 6);
    tfm_graph g;
    tfm_graph_init(&g, 42);
    g.training = 1;
    if (sliced) g.drop_sample0 = s0, g.drop_samples = ns, g.drop_total = B;
    float *xs = tfm_arena_alloc(&g.arena, sizeof(float) * T * ns * C), *ws = tfm_arena_alloc(&g.arena, sizeof(float) * T * ns * C);
    for (int t = 0; t < T; t++) {   /* rows s0..s0+ns of every time step */
        memcpy(xs + (size_t)t * ns * C, x + ((size_t)t * B + s0) * C, sizeof(float) * ns * C);
        memcpy(ws + (size_t)t * ns * C, w + ((size_t)t * B + s0) * C, sizeof(float) * ns * C);
    }
    tfm_tensor *xt = tfm_constant(&g, xs, 3, (int[]){T, ns, C});
    xt->grad = tfm_arena_calloc(&g.arena, sizeof(float) * T * ns * C);
    tfm_tensor *o = tfm_dropout_time_major(&g, xt, 0.3f);
    tfm_backward(&g, tfm_sum(&g, tfm_mul(&g, o, tfm_constant(&g, ws, 3, (int[]){T, ns, C}))));
    for (int t = 0; t < T; t++) {
        memcpy(out + ((size_t)t * B + s0) * C, o->data + (size_t)t * ns * C, sizeof(float) * ns * C);
        memcpy(dx + ((size_t)t * B + s0) * C, xt->grad + (size_t)t * ns * C, sizeof(float) * ns * C);
    }
    tfm_graph_free(&g);
}

static void check_time_major_slices(void) {
    static float full[T * B * C], dfull[T * B * C], part[T * B * C], dpart[T * B * C], plain[T * B * C], dplain[T * B * C];
    run_time_major(0, B, 0, full, dfull);
    tfm_graph g;   /* one process: the time-major dropout is tfm_dropout itself */
    tfm_graph_init(&g, 42);
    g.training = 1;
    static float x[T * B * C];
    fill_rand(x, T * B * C, 5);
    tfm_tensor *o = tfm_dropout(&g, tfm_constant(&g, x, 3, (int[]){T, B, C}), 0.3f);
    CHECK("time-major dropout, one process: the bits of tfm_dropout", memcmp(o->data, full, sizeof full) == 0, "differ");
    tfm_graph_free(&g);
    for (int r = 0; r < 3; r++) run_time_major(2 * r, 2, 1, part, dpart);
    CHECK("time-major dropout keyed by global sample: 3 slices == full batch (forward and gradient), bit for bit",
          !memcmp(full, part, sizeof full) && !memcmp(dfull, dpart, sizeof dfull), "max diff %g",
          max_abs_diff(full, part, T * B * C));
    for (int r = 0; r < 3; r++) run_time_major(2 * r, 2, 0, plain, dplain);   /* no offset: the check can fail */
    CHECK("time-major slices without the offset differ (the check is sensitive)", memcmp(full, plain, sizeof full) != 0,
          "equal");
}

int main(void) {
    tfm_dist_opts o = {0, 0};
    tfm_dist *d = tfm_dist_init(NULL, NULL, &o);
    CHECK("init without MPI: rank 0 of 1, the writer", d && tfm_dist_rank(d) == 0 && tfm_dist_size(d) == 1 &&
          tfm_dist_is_writer(d) && !tfm_dist_is_mpi(), "rank/size wrong");
    CHECK("default bucket is 8 MB", tfm_dist_bucket_floats(d) == ((size_t)8 << 20) / 4, "%zu floats", tfm_dist_bucket_floats(d));
    float x[3] = {1.5f, -2.0f, 3.25f};
    double v[2] = {0.5, 7};
    int64_t c = 42;
    int rc = tfm_dist_allreduce_sum(d, x, 3) || tfm_dist_broadcast(d, x, 3) || tfm_dist_sum_f64(d, v, 2) ||
             tfm_dist_sum_i64(d, &c, 1) || tfm_dist_allreduce_start(d, x, 3) || tfm_dist_allreduce_progress(d) ||
             tfm_dist_allreduce_wait_all(d) || tfm_dist_barrier(d) || tfm_dist_check_config(d, "a");
    CHECK("one rank: collectives succeed and change nothing",
          !rc && x[0] == 1.5f && x[1] == -2.0f && x[2] == 3.25f && v[0] == 0.5 && v[1] == 7 && c == 42, "rc %d", rc);
    int s = -1, k = -1;
    CHECK("one rank: the slice is the whole batch", tfm_dist_slice(d, 12, &s, &k) == 0 && s == 0 && k == 12, "%d %d", s, k);
    CHECK("slice of a non-positive batch is an error", tfm_dist_slice(d, 0, &s, &k) == -1, "accepted 0");
    CHECK("config hash: FNV-1a 64 of the string", tfm_dist_hash("") == 0xcbf29ce484222325ull &&
          tfm_dist_hash("a") == 0xaf63dc4c8601ec8cull && tfm_dist_hash("--lr 1e-3") != tfm_dist_hash("--lr 2e-3"),
          "%016llx", (unsigned long long)tfm_dist_hash("a"));
    check_weighted();
    check_dropout_slices();
    check_time_major_slices();
    tfm_dist_finalize(d);
    CHECK_EXIT();
}
