/* Nadaraya-Watson kernel regression (d2l's attention-pooling toy problem): data, pooling weights,
 * the learned kernel width, and parametric test error below the non-parametric one. */
#include "check.h"
#include "tfm/road.h"
#include <stdlib.h>

int main(void) {
    tfm_set_threads(1);
    tfm_kr_data d;
    tfm_kr_data_make(&d, 50, 50, 1);
    int sorted = 1, in_range = 1;
    for (int i = 0; i < 50; i++) {
        if (i && d.x_train[i] < d.x_train[i - 1]) sorted = 0;
        if (!(d.x_train[i] >= 0 && d.x_train[i] < 5)) in_range = 0;
    }
    CHECK("kr data: 50 sorted training inputs in [0,5)", sorted && in_range, "sorted %d in range %d", sorted, in_range);
    CHECK("kr data: test grid 0, 0.1, ..., 4.9 with truth 2 sin x + x^0.8",
          fabsf(d.x_test[49] - 4.9f) < 1e-5 && fabsf(d.y_truth[10] - (2 * sinf(1.0f) + 1.0f)) < 1e-5, "grid/truth wrong");
    double noise = 0;
    for (int i = 0; i < 50; i++) {
        double e = d.y_train[i] - (2 * sin(d.x_train[i]) + pow(d.x_train[i], 0.8));
        noise += e * e / 50;
    }
    CHECK("kr data: noise std about 0.5", sqrt(noise) > 0.3 && sqrt(noise) < 0.7, "std %.3f", sqrt(noise));

    float *w = malloc(sizeof(float) * 50 * 50), pred[50], pred2[50];
    tfm_kr_predict(d.x_test, 50, d.x_train, d.y_train, 50, 1.0f, pred, w);
    double worst = 0;
    for (int i = 0; i < 50; i++) {
        double s = 0, p = 0;
        for (int j = 0; j < 50; j++) s += w[i * 50 + j], p += (double)w[i * 50 + j] * d.y_train[j];
        worst = fmax(worst, fmax(fabs(s - 1), fabs(p - pred[i])));
    }
    CHECK("kr pooling: weights are a softmax and pred = weights @ y", worst < 1e-5, "error %.3g", worst);
    /* query at a training input with a very sharp kernel returns that target */
    tfm_kr_predict(d.x_train + 7, 1, d.x_train, d.y_train, 50, 1000.0f, pred2, NULL);
    CHECK("kr pooling: sharp kernel picks the nearest key", fabsf(pred2[0] - d.y_train[7]) < 1e-4, "%f vs %f", pred2[0], d.y_train[7]);

    /* learned w: loss falls, and at each seed the parametric test error is below the non-parametric one */
    int better = 0, falls = 1;
    for (int seed = 1; seed <= 5; seed++) {
        tfm_kr_data ds;
        tfm_kr_data_make(&ds, 50, 50, (uint64_t)seed);
        float losses[5];
        float wl = tfm_kr_train(&ds, 5, 0.5f, (uint64_t)seed, losses);
        if (!(losses[4] < losses[0])) falls = 0;
        tfm_kr_predict(ds.x_test, 50, ds.x_train, ds.y_train, 50, 1.0f, pred, NULL);
        double e_np = tfm_kr_mse(pred, ds.y_truth, 50);
        tfm_kr_predict(ds.x_test, 50, ds.x_train, ds.y_train, 50, wl, pred, NULL);
        double e_p = tfm_kr_mse(pred, ds.y_truth, 50);
        if (e_p < e_np) better++;
        if (seed == 1) printf("seed 1: w %.4f, test MSE parametric %.4f vs non-parametric %.4f\n", wl, e_p, e_np);
        tfm_kr_data_free(&ds);
    }
    CHECK("kr training: loss falls over 5 SGD epochs (seeds 1..5)", falls, "loss did not fall");
    CHECK("kr: parametric test error < non-parametric (seeds 1..5)", better == 5, "only %d of 5 seeds", better);

    /* d(loss)/dw from the tape equals a finite difference (through tfm_kr_train's graph: one epoch
     * with lr = h moves w by -h*grad) */
    {
        float l1[2], l2[2];
        float w0 = tfm_kr_train(&d, 0, 0.5f, 1, NULL);   /* the initial w for seed 1 */
        float w_after = tfm_kr_train(&d, 1, 1e-3f, 1, l1);
        double grad = (w0 - w_after) / 1e-3;
        /* loss at w0 +- h via pooling of training inputs over the other 49 */
        double lp = 0, lm = 0, h = 1e-3;
        for (int s = -1; s <= 1; s += 2) {
            double L = 0;
            for (int i = 0; i < 50; i++) {
                float xk[49], yk[49], p;
                for (int j = 0, k = 0; j < 50; j++) if (j != i) xk[k] = d.x_train[j], yk[k++] = d.y_train[j];
                tfm_kr_predict(d.x_train + i, 1, xk, yk, 49, (float)(w0 + s * h), &p, NULL);
                L += ((double)p - d.y_train[i]) * ((double)p - d.y_train[i]);
            }
            if (s < 0) lm = L; else lp = L;
        }
        double fd = (lp - lm) / (2 * h);
        (void)l2;
        CHECK("kr: tape gradient of w equals finite difference", fabs(fd - grad) <= 2e-2 * fmax(1.0, fabs(fd)),
              "tape %.5f fd %.5f", grad, fd);
    }
    free(w);
    tfm_kr_data_free(&d);
    CHECK_EXIT();
}
