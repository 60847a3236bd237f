/* Attention scoring functions: the worked example of "The Illustrated Transformer", d2l's masked
 * softmax examples (valid lengths per batch row and per query) and d2l's additive-attention example. */
#include "check.h"
#include "tfm/road.h"
#include <stdlib.h>
#include <string.h>


/* The fused attention kernel (tfm_attention: tiled for decoding's one query; a prompt's many queries tiled or
 * materialised) against a double reference: head sizes of 16..128 lanes and ragged ones (40, 80: the 64/32/16
 * lane blocks and single lanes), key counts across the 64-key tiles and ragged ones, causal or not. Run once per
 * instruction-set path (tests/run.sh). */
static double fused_attention_error(tfm_graph *g, int Tq, int Tk, int d, int causal, int tiled) {
    const int B = 2, H = 2, C = H * d;
    float *q = malloc(sizeof(float) * B * Tq * C), *k = malloc(sizeof(float) * B * Tk * C);
    float *v = malloc(sizeof(float) * B * Tk * C);
    uint64_t x = 0x9E3779B97F4A7C15ull * (uint64_t)(Tq * 1000 + Tk * 7 + d);
    for (int i = 0; i < B * Tq * C; i++) q[i] = (float)((x = x * 6364136223846793005ull + 1) >> 40) / (1 << 24) - 0.5f;
    for (int i = 0; i < B * Tk * C; i++) k[i] = (float)((x = x * 6364136223846793005ull + 1) >> 40) / (1 << 24) - 0.5f;
    for (int i = 0; i < B * Tk * C; i++) v[i] = (float)((x = x * 6364136223846793005ull + 1) >> 40) / (1 << 24) - 0.5f;
    tfm_mask m = {.causal = causal};
    float scale = 1.0f / sqrtf((float)d);
    g->attention_tiled = tiled;
    tfm_tensor *o = tfm_attention(g, tfm_constant(g, q, 3, (int[]){B, Tq, C}), tfm_constant(g, k, 3, (int[]){B, Tk, C}),
                                  tfm_constant(g, v, 3, (int[]){B, Tk, C}), H, 0, &m, scale);
    double worst = 0.0, *w = malloc(sizeof(double) * Tk);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int i = 0; i < Tq; i++) {
                int lim = causal ? i + 1 + Tk - Tq : Tk;
                double mx = -1e300, sum = 0.0;
                for (int j = 0; j < lim; j++) {
                    double dot = 0.0;
                    for (int c = 0; c < d; c++)
                        dot += (double)q[((size_t)b * Tq + i) * C + h * d + c] * k[((size_t)b * Tk + j) * C + h * d + c];
                    w[j] = dot * scale;
                    if (w[j] > mx) mx = w[j];
                }
                for (int j = 0; j < lim; j++) sum += (w[j] = exp(w[j] - mx));
                for (int c = 0; c < d; c++) {
                    double ref = 0.0;
                    for (int j = 0; j < lim; j++) ref += w[j] / sum * v[((size_t)b * Tk + j) * C + h * d + c];
                    double e = fabs(o->data[((size_t)b * Tq + i) * C + h * d + c] - ref);
                    if (e > worst) worst = e;
                }
            }
    g->attention_tiled = 0;
    free(q), free(k), free(v), free(w);
    return worst;
}

int main(void) {
    tfm_set_threads(1);
    tfm_graph g;
    tfm_graph_init(&g, 1);
    g.grad_enabled = 0;

    /* Illustrated Transformer: q.k1 = 112, q.k2 = 96, d_k = 64 -> 14, 12 -> softmax 0.88, 0.12 */
    {
        float q[64] = {0}, k[128] = {0}, v[2 * 2] = {1, 0, 0, 1};
        for (int i = 0; i < 64; i++) q[i] = 1.0f;
        for (int i = 0; i < 64; i++) { k[i] = 112.0f / 64; k[64 + i] = 96.0f / 64; }
        tfm_tensor *Q = tfm_constant(&g, q, 3, (int[]){1, 1, 64}), *K = tfm_constant(&g, k, 3, (int[]){1, 2, 64});
        tfm_tensor *V = tfm_constant(&g, v, 3, (int[]){1, 2, 2}), *w = NULL;
        tfm_tensor *o = tfm_scaled_dot_product_attention(&g, Q, K, V, NULL, 0.0f, &w);
        double e = exp(14.0) / (exp(14.0) + exp(12.0));
        CHECK("illustrated transformer: softmax(112/8, 96/8) = 0.88, 0.12",
              fabs(w->data[0] - e) < 1e-6 && fabs(w->data[1] - (1 - e)) < 1e-6 &&
                  fabs(w->data[0] - 0.88) < 5e-3 && fabs(w->data[1] - 0.12) < 5e-3,
              "weights %.6f %.6f, expected %.6f %.6f", w->data[0], w->data[1], e, 1 - e);
        CHECK("illustrated transformer: output = weighted values", fabs(o->data[0] - e) < 1e-6 && fabs(o->data[1] - (1 - e)) < 1e-6,
              "out %.6f %.6f", o->data[0], o->data[1]);
    }

    /* d2l: masked_softmax(torch.rand(2, 2, 4), torch.tensor([2, 3])) and with [[1, 3], [2, 4]] */
    {
        tfm_rng r;
        tfm_rng_seed(&r, 3);
        float x[16];
        for (int i = 0; i < 16; i++) x[i] = tfm_rng_uniform(&r);
        tfm_tensor *X = tfm_constant(&g, x, 3, (int[]){2, 2, 4});
        const int vl_row[2] = {2, 3}, vl_q[4] = {1, 3, 2, 4};
        for (int mode = 0; mode < 2; mode++) {
            tfm_mask m = {.valid_lens = mode ? vl_q : vl_row, .per_query = mode};
            tfm_tensor *w = tfm_masked_softmax(&g, X, &m);
            double worst = 0;
            for (int row = 0; row < 4; row++) {
                int len = mode ? vl_q[row] : vl_row[row / 2];
                double z = 0;
                for (int j = 0; j < len; j++) z += exp(x[row * 4 + j]);
                for (int j = 0; j < 4; j++) {
                    double want = j < len ? exp(x[row * 4 + j]) / z : 0.0;
                    double d = fabs(w->data[row * 4 + j] - want);
                    if (j >= len && w->data[row * 4 + j] != 0.0f) d = 1;   /* masked: exactly zero */
                    if (d > worst) worst = d;
                }
            }
            CHECK(mode ? "d2l masked softmax, valid_lens [[1,3],[2,4]]" : "d2l masked softmax, valid_lens [2,3]",
                  worst < 1e-6, "max error %.3g", worst);
        }
    }

    /* d2l AdditiveAttention example: keys all ones, so the weights are uniform over the valid keys and
     * the output is the mean of the first valid_len value rows: [[2,3,4,5]], [[10,11,12,13]]. */
    {
        tfm_params p;
        tfm_params_init(&p);
        tfm_AdditiveAttention att;
        tfm_AdditiveAttention_init(&att, &p, "attention", 20, 2, 8, 0.1f);
        tfm_params_alloc(&p);
        tfm_rng r;
        tfm_rng_seed(&r, 4);
        for (size_t i = 0; i < p.total; i++) p.data[i] = 0.3f * tfm_rng_normal(&r);
        float q[2 * 20], k[2 * 10 * 2], v[2 * 10 * 4];
        for (int i = 0; i < 40; i++) q[i] = tfm_rng_normal(&r);
        for (int i = 0; i < 40; i++) k[i] = 1.0f;
        for (int b = 0; b < 2; b++)
            for (int i = 0; i < 40; i++) v[b * 40 + i] = (float)i;
        const int vl[2] = {2, 6};
        tfm_mask m = {.valid_lens = vl};
        g.training = 0;
        tfm_tensor *o = tfm_AdditiveAttention_forward(&g, &att, tfm_constant(&g, q, 3, (int[]){2, 1, 20}),
                                                      tfm_constant(&g, k, 3, (int[]){2, 10, 2}),
                                                      tfm_constant(&g, v, 3, (int[]){2, 10, 4}), &m);
        const float want[8] = {2, 3, 4, 5, 10, 11, 12, 13};
        CHECK("d2l additive attention example", o->ndim == 3 && o->shape[1] == 1 && max_abs_diff(o->data, want, 8) < 1e-5,
              "max error %.3g", max_abs_diff(o->data, want, 8));
        CHECK("additive attention weights kept, masked keys zero",
              att.weights && att.weights->shape[2] == 10 && att.weights->data[2] == 0.0f && att.weights->data[10 + 6] == 0.0f &&
                  fabs(att.weights->data[0] - 0.5) < 1e-6,
              "weights not as expected");
        tfm_params_free(&p);
    }
    {
        const int Tqs[] = {1, 3}, Tks[] = {1, 17, 70, 100, 150}, ds[] = {16, 32, 40, 64, 80, 128};
        double worst = 0.0;
        char where[96] = "";
        for (int a = 0; a < 2; a++)
            for (int b = 0; b < 5; b++)
                for (int c = 0; c < 6; c++)
                    for (int causal = 0; causal < 2; causal++)
                        for (int tiled = 0; tiled <= (Tqs[a] > 1); tiled++) {
                            if (Tqs[a] > Tks[b]) continue;
                            tfm_graph_reset(&g);
                            double e = fused_attention_error(&g, Tqs[a], Tks[b], ds[c], causal, tiled);
                            if (!(e <= worst))
                                worst = e, snprintf(where, sizeof where, "Tq %d Tk %d d %d causal %d tiled %d", Tqs[a],
                                                    Tks[b], ds[c], causal, tiled);
                        }
        CHECK("fused attention (one query; queries tiled, and materialised up to 512 keys without grad) = a double "
              "reference, head sizes 16..128 and ragged",
              worst < 2e-6, "max error %.3g at %s", worst, where);
    }
    {   /* one batch entry on 2 threads: its heads split over them (mat_forward), the bits of 1 thread */
        const int Tq = 100, Tk = 100, H = 4, d = 32, C = H * d;
        float *x = malloc(sizeof(float) * 3 * Tq * C), *out[2];
        for (int i = 0; i < 3 * Tq * C; i++) x[i] = (float)((i * 7919) % 1000) / 1000.0f - 0.5f;
        tfm_mask m = {.causal = 1};
        for (int k = 0; k < 2; k++) {   /* each on its own graph: no output left over from the other */
            tfm_graph gk;
            tfm_graph_init(&gk, 1);
            gk.grad_enabled = 0;
            tfm_set_threads(2 - k);
            tfm_tensor *o = tfm_attention(&gk, tfm_constant(&gk, x, 3, (int[]){1, Tq, C}),
                                          tfm_constant(&gk, x + Tq * C, 3, (int[]){1, Tk, C}),
                                          tfm_constant(&gk, x + 2 * Tq * C, 3, (int[]){1, Tk, C}), H, 0, &m, 0.125f);
            out[k] = malloc(sizeof(float) * Tq * C);
            memcpy(out[k], o->data, sizeof(float) * Tq * C);
            tfm_graph_free(&gk);
        }
        tfm_set_threads(1);
        CHECK("fused attention, one entry's heads on 2 threads = 1 thread (bits)",
              !memcmp(out[0], out[1], sizeof(float) * Tq * C), "outputs differ");
        free(x), free(out[0]), free(out[1]);
    }
    tfm_graph_free(&g);
    CHECK_EXIT();
}
