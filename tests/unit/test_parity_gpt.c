/* GPT vs its PyTorch twins, causal attention (scripts/gpt_twin.py, fixture gpt_small.tfm by
 * scripts/make_gpt_fixture.py) and dense synthesizer attention (scripts/synth_twin.py, fixture
 * synth_small.tfm by scripts/make_synth_fixture.py): same weights and batch -> logits (max abs
 * <= 1e-5), loss, every parameter gradient (relative <= 1e-4), and per step of 10 AdamW steps with
 * clipping and the warmup+cosine schedule the lr, the grad norm and the loss, then the parameters
 * (max abs <= 1e-5). */
#include "check.h"
#include "tfm/gpt.h"
#include "tfm/io.h"
#include "tfm/train.h"
#include <stdlib.h>

static tfm_container fx;

static const tfm_entry *need(const char *name) {
    const tfm_entry *e = tfm_container_get(&fx, name);
    if (!e) {
        printf("FAIL fixture entry %s missing\n", name);
        exit(1);
    }
    return e;
}
static int geti(const char *n) { int v = 0; if (tfm_container_int(&fx, n, &v)) { printf("FAIL %s\n", tfm_last_error()); exit(1); } return v; }
static float getf(const char *n) { float v = 0; if (tfm_container_float(&fx, n, &v)) { printf("FAIL %s\n", tfm_last_error()); exit(1); } return v; }

/* The key bias has an exactly-zero gradient (softmax is invariant to q.b_k): its reference is rounding
 * noise, so there the absolute norm must be tiny instead, and AdamW's update of it is not compared. */
static int is_key_bias(const char *name) { return strstr(name, "attn.W_k.bias") != NULL; }

static void parity(const char *fixture, int attention, const char *label) {
    char check[128];
#define NAME(what) (snprintf(check, sizeof check, "%s parity: %s", label, what), check)
    if (tfm_container_load(&fx, fixture)) {
        printf("FAIL load fixture: %s\n", tfm_last_error());
        exit(1);
    }
    tfm_gpt_config cfg = {geti("config.vocab_size"), geti("config.block_size"), geti("config.n_layer"),
                          geti("config.n_head"), geti("config.n_embd"), getf("config.dropout"), attention, 0.0f};
    tfm_gpt m;
    CHECK(NAME("config valid"), tfm_gpt_init(&m, &cfg) == 0, "%s", tfm_last_error());
    for (int i = 0; i < m.params.n; i++) {
        tfm_tensor *t = m.params.t[i];
        const tfm_entry *e = need(t->name);
        if (e->nbytes != t->size * 4) { printf("FAIL %s: size\n", t->name); exit(1); }
        memcpy(t->data, e->data, e->nbytes);
    }
    const tfm_entry *ex = need("x"), *ey = need("y");
    int B = ex->shape[0], T = ex->shape[1];
    const int *x = ex->data, *y = ey->data;

    tfm_graph g;
    tfm_graph_init(&g, 1);
    tfm_params_zero_grad(&m.params);
    tfm_tensor *logits = tfm_gpt_forward(&g, &m, x, B, T);
    tfm_tensor *loss = tfm_cross_entropy(&g, logits, y, -100, 0.0f);
    tfm_backward(&g, loss);
    double d = max_abs_diff(logits->data, need("logits")->data, logits->size);
    CHECK(NAME("logits"), d <= 1e-5, "max |dlogits| = %.3g", d);
    float ref_loss = ((float *)need("loss")->data)[0];
    CHECK(NAME("loss"), fabsf(loss->data[0] - ref_loss) <= 1e-5f, "loss %.7f vs %.7f", loss->data[0], ref_loss);
    int bad = 0;
    double worst = 0;
    char name[300];
    for (int i = 0; i < m.params.n; i++) {
        tfm_tensor *t = m.params.t[i];
        snprintf(name, sizeof name, "grad.%s", t->name);
        const float *ref = need(name)->data;
        double err;
        int ok;
        if (is_key_bias(t->name)) {
            err = 0;
            for (size_t k = 0; k < t->size; k++) err += (double)t->grad[k] * t->grad[k];
            err = sqrt(err);
            ok = err < 1e-5;
        } else {
            err = rel_err(t->grad, ref, t->size);
            ok = err <= 1e-4;
        }
        if (!ok) {
            bad++;
            printf("  gradient %s: error %.3g\n", t->name, err);
        }
        if (err > worst) worst = err;
    }
    CHECK(NAME("every gradient within 1e-4 relative"), bad == 0, "%d gradients off (worst %.3g)", bad, worst);

    /* 10 AdamW steps with clipping and schedule, on the same batch */
    tfm_adamw opt;
    tfm_adamw_init(&opt, &m.params, getf("opt.beta1"), getf("opt.beta2"), getf("opt.eps"), getf("opt.weight_decay"));
    int steps = geti("opt.steps"), warmup = geti("opt.warmup"), max_iters = geti("opt.max_iters");
    float lr = getf("opt.lr"), min_lr = getf("opt.min_lr"), clip = getf("opt.grad_clip");
    const float *ref_losses = need("losses")->data, *ref_lrs = need("lrs")->data, *ref_norms = need("grad_norms")->data;
    double loss_err = 0, lr_err = 0, norm_err = 0;
    for (int it = 0; it < steps; it++) {
        tfm_graph_reset(&g);
        tfm_params_zero_grad(&m.params);
        tfm_tensor *l = tfm_cross_entropy(&g, tfm_gpt_forward(&g, &m, x, B, T), y, -100, 0.0f);
        tfm_backward(&g, l);
        float norm = tfm_clip_grad_norm(&m.params, clip);
        float lr_it = tfm_lr_cosine(it, lr, min_lr, warmup, max_iters);
        tfm_adamw_step(&opt, &m.params, lr_it);
        loss_err = fmax(loss_err, fabs(l->data[0] - ref_losses[it]));
        lr_err = fmax(lr_err, fabs(lr_it - ref_lrs[it]) / ref_lrs[it]);
        norm_err = fmax(norm_err, fabs(norm - ref_norms[it]) / ref_norms[it]);
    }
    CHECK(NAME("schedule lr per step"), lr_err <= 1e-6, "relative lr error %.3g", lr_err);
    CHECK(NAME("grad norm per step"), norm_err <= 1e-4, "relative norm error %.3g", norm_err);
    CHECK(NAME("loss per step"), loss_err <= 1e-5, "max loss error %.3g", loss_err);
    bad = 0;
    worst = 0;
    for (int i = 0; i < m.params.n; i++) {
        tfm_tensor *t = m.params.t[i];
        if (is_key_bias(t->name)) continue;
        snprintf(name, sizeof name, "after.%s", t->name);
        double e = max_abs_diff(t->data, need(name)->data, t->size);
        if (e > worst) worst = e;
        if (e > 1e-5) {
            bad++;
            printf("  after 10 steps %s: max error %.3g\n", t->name, e);
        }
    }
    CHECK(NAME("parameters after 10 AdamW steps"), bad == 0, "%d tensors off (worst %.3g)", bad, worst);
#undef NAME
    tfm_adamw_free(&opt);
    tfm_graph_free(&g);
    tfm_gpt_free(&m);
    tfm_container_free(&fx);
}

int main(void) {
    tfm_set_threads(2);
    parity("tests/fixtures/gpt_small.tfm", TFM_ATTN_CAUSAL, "gpt");
    parity("tests/fixtures/synth_small.tfm", TFM_ATTN_SYNTHESIZER, "synth");
    CHECK_EXIT();
}
