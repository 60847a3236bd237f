/* Nadaraya-Watson kernel regression: attention pooling with a Gaussian kernel (d2l's toy problem).
 * The parametric version learns the kernel width w with SGD through the autodiff tape. */
#include "tfm/road.h"
#include <math.h>
#include <stdlib.h>

static float kr_f(float x) { return 2.0f * sinf(x) + powf(x, 0.8f); }

static int cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

void tfm_kr_data_make(tfm_kr_data *d, int n_train, int n_test, uint64_t seed) {
    tfm_rng r;
    tfm_rng_seed(&r, seed);
    d->n_train = n_train;
    d->n_test = n_test;
    d->x_train = malloc(sizeof(float) * n_train);
    d->y_train = malloc(sizeof(float) * n_train);
    d->x_test = malloc(sizeof(float) * n_test);
    d->y_truth = malloc(sizeof(float) * n_test);
    if (!d->x_train || !d->y_train || !d->x_test || !d->y_truth) tfm_fatal("out of memory");
    for (int i = 0; i < n_train; i++) d->x_train[i] = 5.0f * tfm_rng_uniform(&r);
    qsort(d->x_train, n_train, sizeof(float), cmp_float);
    for (int i = 0; i < n_train; i++) d->y_train[i] = kr_f(d->x_train[i]) + 0.5f * tfm_rng_normal(&r);
    for (int i = 0; i < n_test; i++) {
        d->x_test[i] = 0.1f * (float)i;
        d->y_truth[i] = kr_f(d->x_test[i]);
    }
}

void tfm_kr_data_free(tfm_kr_data *d) {
    free(d->x_train);
    free(d->y_train);
    free(d->x_test);
    free(d->y_truth);
}

void tfm_kr_predict(const float *xq, int nq, const float *xk, const float *yk, int nk, float w, float *pred,
                    float *weights) {
    float *s = malloc(sizeof(float) * nk);
    if (!s) tfm_fatal("out of memory");
    for (int i = 0; i < nq; i++) {
        float mx = -INFINITY;
        for (int j = 0; j < nk; j++) {
            float d = (xq[i] - xk[j]) * w;
            s[j] = -d * d / 2.0f;
            if (s[j] > mx) mx = s[j];
        }
        double z = 0, acc = 0;
        for (int j = 0; j < nk; j++) z += (s[j] = expf(s[j] - mx));
        for (int j = 0; j < nk; j++) {
            float a = (float)(s[j] / z);
            if (weights) weights[(size_t)i * nk + j] = a;
            acc += (double)a * yk[j];
        }
        pred[i] = (float)acc;
    }
    free(s);
}

double tfm_kr_mse(const float *pred, const float *truth, int n) {
    double s = 0;
    for (int i = 0; i < n; i++) s += ((double)pred[i] - truth[i]) * ((double)pred[i] - truth[i]);
    return n ? s / n : 0;
}

float tfm_kr_train(const tfm_kr_data *d, int epochs, float lr, uint64_t seed, float *losses) {
    int n = d->n_train, m = n - 1;
    /* keys/values of query i: every training pair except i (d2l masks the diagonal) */
    float *d2 = malloc(sizeof(float) * n * m), *vals = malloc(sizeof(float) * n * m);
    if (!d2 || !vals) tfm_fatal("out of memory");
    for (int i = 0, k = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            if (j == i) continue;
            float diff = d->x_train[i] - d->x_train[j];
            d2[k] = diff * diff;
            vals[k++] = d->y_train[j];
        }
    tfm_params p;
    tfm_params_init(&p);
    tfm_tensor *w = tfm_param2(&p, "w", 1, 1);
    if (tfm_params_alloc(&p)) tfm_fatal("%s", tfm_last_error());   /* one parameter */
    tfm_rng r;
    tfm_rng_seed(&r, seed);
    w->data[0] = tfm_rng_uniform(&r);
    tfm_graph g;
    tfm_graph_init(&g, seed);
    for (int ep = 0; ep < epochs; ep++) {
        tfm_graph_reset(&g);
        tfm_params_zero_grad(&p);
        tfm_tensor *D = tfm_constant(&g, d2, 2, (int[]){n * m, 1});
        tfm_tensor *V = tfm_constant(&g, vals, 3, (int[]){n, m, 1});
        tfm_tensor *Y = tfm_constant(&g, d->y_train, 1, (int[]){n});
        /* scores = -(x_i - x_j)^2 w^2 / 2 */
        tfm_tensor *s = tfm_scale(&g, tfm_matmul(&g, D, tfm_square(&g, w), 0, 0), -0.5f);
        tfm_tensor *a = tfm_softmax(&g, tfm_reshape3(&g, s, n, 1, m));              /* (n,1,m) */
        tfm_tensor *pred = tfm_reshape(&g, tfm_matmul(&g, a, V, 0, 0), 1, (int[]){n});
        tfm_tensor *loss = tfm_sum(&g, tfm_square(&g, tfm_sub(&g, pred, Y)));
        if (losses) losses[ep] = loss->data[0];
        tfm_backward(&g, loss);
        w->data[0] -= lr * w->grad[0];
    }
    float wv = w->data[0];
    tfm_graph_free(&g);
    tfm_params_free(&p);
    free(d2);
    free(vals);
    return wv;
}
