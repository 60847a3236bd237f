/* Weights packed once for decoding (include/tfm/ops.h tfm_weight_packs, src/ops/matmul.c): tfm_linear and
 * tfm_linear_relu give the same bits with a graph's packs as without, for row counts that take the GEMV path
 * (1), ragged panels (7) and threaded blocks (300), at 1 and 2 threads; the packs are really read (stale
 * packs after a weight change give other numbers) and tfm_weight_packs_refresh brings them up to date; a copy is
 * made at its weight's first use by more than one row (a weight no GEMM reads, or only a one-row GEMV, is never
 * packed), once when threads race to it. A weight held only packed (tfm_params_hold_packed, a model loaded for
 * inference) gives the unpacked bits from 2 rows up and, for one row (a GEMV over its panels), the product to
 * float accuracy, the same at 1 and 2 threads; a weight whose rows do not fill whole panels is left as it is. */
#include "check.h"
#include "tfm/kernels.h"
#include "tfm/ops.h"
#include <omp.h>

static void fill(float *x, size_t n, unsigned seed) {
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        x[i] = (float)((seed >> 8) & 0xffff) / 65536.0f - 0.5f;
    }
}

/* y = relu?(x W^T + b) on a graph with or without the packs: (rows, out) floats into y */
static void forward(const tfm_weight_packs *packs, tfm_tensor *W, tfm_tensor *b, const float *x, int rows, int relu,
                    float *y) {
    tfm_graph g;
    tfm_graph_init(&g, 0);
    g.grad_enabled = 0;
    g.packs = packs;
    tfm_tensor *xt = tfm_new2(&g, rows, W->shape[1]);
    memcpy(xt->data, x, sizeof(float) * xt->size);
    tfm_tensor *out = relu ? tfm_linear_relu(&g, xt, W, b) : tfm_linear(&g, xt, W, b);
    memcpy(y, out->data, sizeof(float) * out->size);
    tfm_graph_free(&g);
}

/* x (rows, K) W^T + b in double, W (N, K) as it was before being held */
static void reference(const float *x, const float *W, const float *b, int rows, int N, int K, double *y) {
    for (int r = 0; r < rows; r++)
        for (int n = 0; n < N; n++) {
            double s = b[n];
            for (int k = 0; k < K; k++) s += (double)x[(size_t)r * K + k] * W[(size_t)n * K + k];
            y[(size_t)r * N + n] = s;
        }
}

static void check_hold_packed(void) {
    enum { N = 80, K = 300 };   /* 5 panels (a chunk of 4 and one more), 2 depth blocks */
    tfm_params p;
    tfm_params_init(&p);
    tfm_tensor *W = tfm_param2(&p, "W", N, K), *b = tfm_param1(&p, "b", N), *Wodd = tfm_param2(&p, "Wodd", 61, K);
    CHECK("hold: params allocated", tfm_params_alloc(&p) == 0, "%s", tfm_last_error());
    fill(W->data, W->size, 5), fill(b->data, b->size, 6), fill(Wodd->data, Wodd->size, 7);
    static const int rows[] = {1, 2, 7, 300};
    float *x = malloc(sizeof(float) * 300 * K), *raw = malloc(sizeof(float) * N * K), *before = malloc(sizeof(float) * 4 * 300 * N),
          *after = malloc(sizeof(float) * 300 * N);
    double *ref = malloc(sizeof(double) * N);
    float one[N];   /* the one-row result at 1 thread */
    fill(x, (size_t)300 * K, 8);
    memcpy(raw, W->data, sizeof(float) * N * K);
    for (int r = 0; r < 4; r++) forward(NULL, W, b, x, rows[r], 0, before + (size_t)r * 300 * N);
    int held = tfm_params_hold_packed(&p, "W");   /* W and Wodd named */
    if (!tfm_gemm_packed_b_floats(1, 1)) {
        CHECK("hold: an OpenBLAS build holds nothing", held == 0 && W->data && !W->packed, "held %d", held);
    } else {
        CHECK("hold: W (80 x 300) held packed, its float values gone", held == 1 && !W->data && W->packed, "held %d", held);
        CHECK("hold: a W of 61 rows (a padded panel) left as it is", Wodd->data && !Wodd->packed, "held");
        for (int t = 1; t <= 2; t++)
            for (int r = 0; r < 4; r++) {
                omp_set_num_threads(t);
                forward(NULL, W, b, x, rows[r], 0, after);
                const float *y0 = before + (size_t)r * 300 * N;
                char name[96];
                if (rows[r] > 1) {
                    snprintf(name, sizeof name, "hold: linear by the held W == by the floats, %d rows, %d thread(s)", rows[r], t);
                    CHECK(name, !memcmp(y0, after, sizeof(float) * rows[r] * N), "max diff %g",
                          max_abs_diff(y0, after, (size_t)rows[r] * N));
                    continue;
                }
                reference(x, raw, b->data, 1, N, K, ref);
                double worst = 0;
                for (int n = 0; n < N; n++) worst = fmax(worst, fabs(after[n] - ref[n]));
                snprintf(name, sizeof name, "hold: one row (a GEMV over the panels) == x W^T + b, %d thread(s)", t);
                CHECK(name, worst < 1e-4, "max error %g", worst);
                if (t == 2) CHECK("hold: one row, the same bits at 1 and 2 threads", !memcmp(after, one, sizeof one), "they differ");
                else memcpy(one, after, sizeof one);
            }
        omp_set_num_threads(omp_get_max_threads());
        tfm_weight_packs packs;
        tfm_weight_packs_init(&packs, &p);
        CHECK("weight_packs_init skips a held weight", packs.n == 1 && packs.t[0] == Wodd, "n %d", packs.n);
        tfm_weight_packs_free(&packs);
    }
    free(x), free(raw), free(before), free(after), free(ref);
    tfm_params_free(&p);
    tfm_params_init(&p);   /* tfm_params_hold_packed: the names containing the part, those that can be held */
    tfm_tensor *a = tfm_param2(&p, "blocks.0.W", 32, 8), *e = tfm_param2(&p, "wte.weight", 32, 8),
               *o = tfm_param2(&p, "blocks.0.odd", 24, 8), *v = tfm_param1(&p, "blocks.0.b", 3),
               *u = tfm_param2(&p, "blocks.1.W", 32, 8);   /* 3 floats after a whole number of lines: unaligned */
    CHECK("hold many: params allocated", tfm_params_alloc(&p) == 0, "%s", tfm_last_error());
    fill(a->data, a->size, 9);
    float want[32 * 8] __attribute__((aligned(64)));
    tfm_gemm_pack_b(1, 32, 8, a->data, 8, want);
    int n = tfm_params_hold_packed(&p, "blocks.");
    if (tfm_gemm_packed_b_floats(1, 1))
        CHECK("hold many: only blocks.0.W (named, 2-D, whole panels, aligned), packed as tfm_gemm_pack_b packs it",
              n == 1 && a->packed && !memcmp(a->packed, want, sizeof want) && e->data && o->data && v->data && u->data,
              "held %d", n);
    tfm_params_free(&p);
}

int main(void) {
    tfm_params p;
    tfm_params_init(&p);
    tfm_tensor *W = tfm_param2(&p, "W", 61, 300), *b = tfm_param1(&p, "b", 61), *W2 = tfm_param2(&p, "W2", 16, 8);
    CHECK("params allocated", tfm_params_alloc(&p) == 0, "%s", tfm_last_error());
    fill(W->data, W->size, 1);
    fill(b->data, b->size, 2);
    fill(W2->data, W2->size, 3);
    tfm_weight_packs packs;
    int rc = tfm_weight_packs_init(&packs, &p);
    CHECK("weight_packs_init packs every 2-D parameter", rc == 0 && packs.n == (tfm_gemm_packed_b_floats(1, 1) ? 2 : 0),
          "rc %d, n %d", rc, packs.n);
    if (packs.n == 0) { /* the OpenBLAS build: nothing to compare */
        printf("NOTRUN weight_packs: this build has no packed GEMM layout (OpenBLAS)\n");
        tfm_params_free(&p);
        CHECK_EXIT();
    }
    int none = 1;
    for (int i = 0; i < packs.n; i++) none &= packs.state[i] == 0;
    CHECK("weight_packs_init packs nothing yet", none, "a copy made before its first use");
    static const int rows[] = {1, 7, 300};
    float *x = malloc(sizeof(float) * 300 * 300), *y0 = malloc(sizeof(float) * 300 * 61),
          *y1 = malloc(sizeof(float) * 300 * 61);
    fill(x, 300 * 300, 4);
    int max_t = omp_get_max_threads();
    for (int t = 1; t <= 2; t++)
        for (int relu = 0; relu <= 1; relu++)
            for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
                omp_set_num_threads(t);
                forward(NULL, W, b, x, rows[r], relu, y0);
                forward(&packs, W, b, x, rows[r], relu, y1);
                char name[96];
                snprintf(name, sizeof name, "%s with packed W == unpacked, %d rows, %d thread(s)",
                         relu ? "linear_relu" : "linear", rows[r], t);
                CHECK(name, !memcmp(y0, y1, sizeof(float) * rows[r] * 61), "max diff %g",
                      max_abs_diff(y0, y1, (size_t)rows[r] * 61));
            }
    omp_set_num_threads(max_t);
    int w_made = 0, w2_made = 0;
    for (int i = 0; i < packs.n; i++) *(packs.t[i] == W ? &w_made : &w2_made) = packs.state[i] == 2;
    CHECK("weight_packs: the used weight is packed, the unused one is not", w_made && !w2_made, "W %d, W2 %d", w_made,
          w2_made);
    {   /* one row (a decoding step of one sentence): the GEMV reads W as it is, no copy made for it */
        tfm_weight_packs fresh;
        tfm_weight_packs_init(&fresh, &p);
        forward(&fresh, W, b, x, 1, 0, y1);
        int made = 0;
        for (int i = 0; i < fresh.n; i++) made += fresh.state[i] != 0;
        CHECK("weight_packs: a one-row product makes no copy (an unpacked GEMV)", made == 0, "%d made", made);
        tfm_weight_packs_free(&fresh);
    }
    {   /* threads racing to a fresh set: every result the unpacked bits, the copy made once */
        tfm_weight_packs fresh;
        tfm_weight_packs_init(&fresh, &p);
        enum { T = 4 };
        float *yt = malloc(sizeof(float) * T * 7 * 61);
        forward(NULL, W, b, x, 7, 0, y0);
#pragma omp parallel for num_threads(T)
        for (int t = 0; t < T; t++) forward(&fresh, W, b, x, 7, 0, yt + (size_t)t * 7 * 61);
        int same = 1;
        for (int t = 0; t < T; t++) same &= !memcmp(y0, yt + (size_t)t * 7 * 61, sizeof(float) * 7 * 61);
        int made = 0;
        for (int i = 0; i < fresh.n; i++) made += fresh.state[i] == 2;
        CHECK("weight_packs: threads racing to a fresh set get the unpacked bits; one copy made", same && made == 1,
              "same %d, made %d", same, made);
        free(yt);
        tfm_weight_packs_free(&fresh);
    }
    for (size_t i = 0; i < W->size; i++) W->data[i] *= 1.5f;   /* training moved the weights */
    forward(NULL, W, b, x, 300, 0, y0);
    forward(&packs, W, b, x, 300, 0, y1);
    CHECK("stale packs are read (they give the old weights' numbers)", memcmp(y0, y1, sizeof(float) * 300 * 61) != 0,
          "same output");
    tfm_weight_packs_refresh(&packs);
    forward(&packs, W, b, x, 300, 0, y1);
    CHECK("weight_packs_refresh: the new weights' bits again", !memcmp(y0, y1, sizeof(float) * 300 * 61), "max diff %g",
          max_abs_diff(y0, y1, (size_t)300 * 61));
    tfm_weight_packs_free(&packs);
    CHECK("weight_packs_free leaves an empty set", packs.n == 0 && !packs.packed, "n %d", packs.n);
    free(x), free(y0), free(y1);
    tfm_params_free(&p);
    check_hold_packed();
    CHECK_EXIT();
}
