/* The distributed layer without MPI (include/tfm/dist.h; the MPI version is checked under mpirun by
 * tests/cli/mpi.sh): one rank, collectives leave data as is, batch slices, the weighted split of
 * token-bucketed batches, the configuration hash. */
#include <stdint.h>
#include <stdlib.h>

#include "check.h"
#include "tfm/core.h"
#include "tfm/dist.h"

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
    tfm_dist_finalize(d);
    CHECK_EXIT();
}
