/* The weights' exponential moving average beside AdamW (tfm_adamw_ema_init; train-mt --ema-decay): after every
 * step of tfm_adamw_step_fused the average equals the recurrence ema += (1 - d_t) (w - ema), d_t = min(decay,
 * (1 + t) / (10 + t)), run on the weights one step at a time (bit for bit, at 1 and 2 threads); it round-trips
 * through a checkpoint container; a container without it is refused once it is enabled; bad decays refused. */
#include "check.h"
#include "tfm/checkpoint.h"
#include "tfm/train.h"
#include <omp.h>

enum { R = 70, C = 600, STEPS = 30 };

static long first_diff(const float *a, const float *b, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (memcmp(a + i, b + i, sizeof(float))) return (long)i;
    return -1;
}   /* 42,070 parameters: more than one AdamW block of 32,768 */

static void make_params(tfm_params *p) {
    tfm_params_init(p);
    tfm_param2(p, "w", R, C);
    tfm_param1(p, "b", R);
    tfm_params_alloc(p);
    for (size_t i = 0; i < p->total; i++) p->data[i] = (float)((i * 37) % 101) / 50.0f - 1.0f;
}

static void set_grads(tfm_params *p, int step) {
    for (size_t i = 0; i < p->total; i++) p->grad[i] = (float)(((i + 13 * (size_t)step) * 29) % 97) / 48.0f - 1.0f;
}

/* STEPS steps on nt threads; ema_out gets the average, ref_out the recurrence run here on the weights */
static void run(int nt, float decay, float *ema_out, float *ref_out) {
    tfm_params p;
    make_params(&p);
    tfm_adamw o;
    if (tfm_adamw_init(&o, &p, 0.9f, 0.98f, 1e-8f, 0.01f) || tfm_adamw_ema_init(&o, &p, decay)) abort();
    float *ref = malloc(p.total * sizeof(float));
    memcpy(ref, p.data, p.total * sizeof(float));
    omp_set_num_threads(nt);
    for (int s = 0; s < STEPS; s++) {
        set_grads(&p, s);
        tfm_adamw_step_fused(&o, &p, 1e-2f, 0.5f, 0);
        float warm = (float)((1.0 + o.t) / (10.0 + o.t)), d = decay < warm ? decay : warm, a = 1.0f - d;
        for (size_t i = 0; i < p.total; i++) ref[i] += a * (p.data[i] - ref[i]);
    }
    memcpy(ema_out, o.ema, p.total * sizeof(float));
    memcpy(ref_out, ref, p.total * sizeof(float));
    free(ref);
    tfm_adamw_free(&o);
    tfm_params_free(&p);
}

static void test_recurrence(void) {
    size_t n = (size_t)R * C + R;
    float *e1 = malloc(n * sizeof(float)), *r1 = malloc(n * sizeof(float));
    float *e2 = malloc(n * sizeof(float)), *r2 = malloc(n * sizeof(float));
    run(1, 0.9f, e1, r1);
    run(2, 0.9f, e2, r2);
    CHECK("ema: the average is the recurrence on the weights, bit for bit", !memcmp(e1, r1, n * sizeof(float)),
          "first difference at %ld", first_diff(e1, r1, n));
    CHECK("ema: 2 threads give the 1-thread bits", !memcmp(e1, e2, n * sizeof(float)), "differs");
    /* with decay 0.9 and 30 steps the warm-up cap (1 + t) / (10 + t) is below 0.9 until t = 80: the average
     * moved, and it is not the weights */
    tfm_params p;
    make_params(&p);
    CHECK("ema: moved from the initial weights", max_abs_diff(e1, p.data, n) > 1e-3, "did not move");
    tfm_params_free(&p);
    free(e1), free(r1), free(e2), free(r2);
}

static void test_checkpoint(void) {
    tfm_params p;
    make_params(&p);
    tfm_adamw a, b, c;
    if (tfm_adamw_init(&a, &p, 0.9f, 0.98f, 1e-8f, 0.0f) || tfm_adamw_ema_init(&a, &p, 0.99f)) abort();
    for (int s = 0; s < 3; s++) set_grads(&p, s), tfm_adamw_step_fused(&a, &p, 1e-2f, 1.0f, 0);
    tfm_container k, plain;
    tfm_container_init(&k);
    tfm_container_init(&plain);
    tfm_ckpt_put_adamw(&k, &a, &p);
    tfm_adamw_init(&b, &p, 0.9f, 0.98f, 1e-8f, 0.0f);
    tfm_adamw_ema_init(&b, &p, 0.99f);
    memset(b.ema, 0, p.total * sizeof(float));
    int got = tfm_ckpt_get_adamw(&k, &b, &p, "k.tfm");
    CHECK("ema: round trip through a checkpoint", got == 0 && !memcmp(a.ema, b.ema, p.total * sizeof(float)),
          "rc %d: %s", got, tfm_last_error());
    tfm_adamw_init(&c, &p, 0.9f, 0.98f, 1e-8f, 0.0f);   /* a checkpoint without an average ... */
    tfm_ckpt_put_adamw(&plain, &c, &p);
    int refused = tfm_ckpt_get_adamw(&plain, &b, &p, "plain.tfm");   /* ... into a run that has one */
    CHECK("ema: a checkpoint without the average is refused", refused == -1 && strstr(tfm_last_error(), "adam.ema."),
          "rc %d: %s", refused, tfm_last_error());
    CHECK("ema: decays outside (0, 1) refused", tfm_adamw_ema_init(&c, &p, 1.0f) == -1 &&
          tfm_adamw_ema_init(&c, &p, 0.0f) == -1 && strstr(tfm_last_error(), "decay") && c.ema == NULL,
          "%s", tfm_last_error());
    tfm_container_free(&k);
    tfm_container_free(&plain);
    tfm_adamw_free(&a), tfm_adamw_free(&b), tfm_adamw_free(&c);
    tfm_params_free(&p);
}

int main(void) {
    test_recurrence();
    test_checkpoint();
    return check_failures ? 1 : 0;
}
