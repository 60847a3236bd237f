/* GPT with dense synthesizer attention vs its PyTorch twin (scripts/synth_twin.py, fixture by
 * scripts/make_synth_fixture.py): logits (max abs <= 1e-5), loss, every gradient (relative <= 1e-4),
 * and parameters after 10 AdamW steps with clipping and warmup+cosine (max abs <= 1e-5). */
#include "check.h"
#include "tfm/gpt.h"
#include "tfm/io.h"
#include "tfm/train.h"
#include <stdlib.h>

static tfm_container fx;

static const float *need(const char *name, size_t n) {
    const tfm_entry *e = tfm_container_get(&fx, name);
    if (!e || (n && e->nbytes != n * sizeof(float))) {
        printf("FAIL fixture entry %s missing or wrong size\n", name);
        exit(1);
    }
    return e->data;
}
static int geti(const char *n) { int v = 0; if (tfm_container_int(&fx, n, &v)) { printf("FAIL %s\n", tfm_last_error()); exit(1); } return v; }
static float getf(const char *n) { float v = 0; if (tfm_container_float(&fx, n, &v)) { printf("FAIL %s\n", tfm_last_error()); exit(1); } return v; }

int main(void) {
    tfm_set_threads(1);
    if (tfm_container_load(&fx, "tests/fixtures/synth_small.tfm")) {
        printf("FAIL load fixture: %s\n", tfm_last_error());
        return 1;
    }
    tfm_gpt_config cfg = {geti("config.vocab_size"), geti("config.block_size"), geti("config.n_layer"),
                          geti("config.n_head"), geti("config.n_embd"), getf("config.dropout"), TFM_ATTN_SYNTHESIZER};
    tfm_gpt m;
    CHECK("synth parity: config valid", tfm_gpt_init(&m, &cfg) == 0, "%s", tfm_last_error());
    for (int i = 0; i < m.params.n; i++) {
        tfm_tensor *t = m.params.t[i];
        memcpy(t->data, need(t->name, t->size), t->size * sizeof(float));
    }
    const tfm_entry *ex = tfm_container_get(&fx, "x"), *ey = tfm_container_get(&fx, "y");
    int B = ex->shape[0], T = ex->shape[1];
    const int *x = ex->data, *y = ey->data;
    tfm_graph g;
    tfm_graph_init(&g, 1);
    tfm_params_zero_grad(&m.params);
    tfm_tensor *logits = tfm_gpt_forward(&g, &m, x, B, T);
    tfm_tensor *loss = tfm_cross_entropy(&g, logits, y, -100, 0.0f);
    tfm_backward(&g, loss);
    double d = max_abs_diff(logits->data, need("logits", logits->size), logits->size);
    CHECK("synth parity: logits", d <= 1e-5, "max |dlogits| = %.3g", d);
    float ref_loss = need("loss", 1)[0];
    CHECK("synth parity: loss", fabsf(loss->data[0] - ref_loss) <= 1e-5f, "loss %.7f vs %.7f", loss->data[0], ref_loss);
    double worst = 0;
    const char *wn = "";
    char name[300];
    for (int i = 0; i < m.params.n; i++) {
        tfm_tensor *t = m.params.t[i];
        snprintf(name, sizeof name, "grad.%s", t->name);
        double e = rel_err(t->grad, need(name, t->size), t->size);
        if (e > worst) { worst = e; wn = t->name; }
    }
    printf("synth: max |dlogits| %.2e, |dloss| %.2e, worst grad rel %.2e (%s)\n", d, fabs(loss->data[0] - ref_loss), worst, wn);
    CHECK("synth parity: every gradient within 1e-4 relative", worst <= 1e-4, "worst %.3g at %s", worst, wn);

    tfm_adamw opt;
    tfm_adamw_init(&opt, &m.params, getf("opt.beta1"), getf("opt.beta2"), getf("opt.eps"), getf("opt.weight_decay"));
    int steps = geti("opt.steps"), warmup = geti("opt.warmup"), max_iters = geti("opt.max_iters");
    float lr = getf("opt.lr"), min_lr = getf("opt.min_lr"), clip = getf("opt.grad_clip");
    const float *ref_losses = need("losses", steps);
    double loss_err = 0;
    for (int it = 0; it < steps; it++) {
        tfm_graph_reset(&g);
        tfm_params_zero_grad(&m.params);
        tfm_tensor *l = tfm_cross_entropy(&g, tfm_gpt_forward(&g, &m, x, B, T), y, -100, 0.0f);
        tfm_backward(&g, l);
        tfm_clip_grad_norm(&m.params, clip);
        tfm_adamw_step(&opt, &m.params, tfm_lr_cosine(it, lr, min_lr, warmup, max_iters));
        loss_err = fmax(loss_err, fabs(l->data[0] - ref_losses[it]));
    }
    CHECK("synth parity: loss per step", loss_err <= 1e-5, "max loss error %.3g", loss_err);
    worst = 0;
    for (int i = 0; i < m.params.n; i++) {
        tfm_tensor *t = m.params.t[i];
        snprintf(name, sizeof name, "after.%s", t->name);
        double e = max_abs_diff(t->data, need(name, t->size), t->size);
        if (e > worst) { worst = e; wn = t->name; }
    }
    CHECK("synth parity: parameters after 10 AdamW steps", worst <= 1e-5, "max error %.3g at %s", worst, wn);
    tfm_adamw_free(&opt);
    tfm_graph_free(&g);
    tfm_gpt_free(&m);
    tfm_container_free(&fx);
    CHECK_EXIT();
}
