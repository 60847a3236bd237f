/* Data-parallel training (include/tfm/train.h, docs/DISTRIBUTED.md): what both training loops add around
 * their step when they run on several ranks. Every rank draws the whole global batch and computes its
 * slice; after the backward the step's loss share, the stop request and the gradient block are summed
 * across ranks (tfm_dist: fixed rank order, the same bits on every rank), so the clip and the AdamW update
 * that follow are the same everywhere and the parameters stay identical. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tfm/train.h"

tfm_dist *tfm_train_dist(const tfm_train_ctl *ctl) {
    return ctl && ctl->dist && tfm_dist_size(ctl->dist) > 1 ? ctl->dist : NULL;
}

/* A data file's resolved path (path:<flag>) may differ between ranks and hosts; its contents (data:<flag>) may not. */
static int same_on_ranks(const char *name) { return strncmp(name, "path:", 5) != 0; }

/* "name=value\n" for every pair, then the step: what must be equal on every rank */
static char *config_text(const tfm_run_config *run, long step) {
    size_t n = 64;
    for (int i = 0; run && i < run->n; i++) n += strlen(run->name[i]) + strlen(run->value[i]) + 2;
    char *s = malloc(n), *w = s;
    if (!s) return NULL;
    for (int i = 0; run && i < run->n; i++)
        if (same_on_ranks(run->name[i])) w += sprintf(w, "%s=%s\n", run->name[i], run->value[i]);
    sprintf(w, "step=%ld\n", step);
    return s;
}

int tfm_train_dist_start(tfm_dist *d, const tfm_run_config *run, long step, tfm_params *p, tfm_adamw *opt) {
    char *cfg = config_text(run, step);
    if (!cfg) return tfm_set_error("out of memory"), -1;
    int rc = tfm_dist_check_config(d, cfg);
    free(cfg);
    if (rc || tfm_dist_broadcast(d, p->data, p->total)) return -1;
    if (!opt || !opt->m) return 0;
    return tfm_dist_broadcast(d, opt->m, opt->n) || tfm_dist_broadcast(d, opt->v, opt->n) ||
                   tfm_dist_broadcast_bytes(d, &opt->t, sizeof opt->t)
               ? -1
               : 0;
}

int tfm_train_dist_reduce(tfm_graph *g, tfm_dist *d, tfm_params *p, double *loss, int *stop) {
    double tp = tfm_profile_begin(g);
    if (g->profile && tfm_dist_barrier(d)) return -1;   /* the time the fastest rank waits for the slowest */
    tfm_profile_end(g, TFM_PHASE_DIST_WAIT, tp);
    tp = tfm_profile_begin(g);
    double v[2] = {*loss, *stop ? 1.0 : 0.0};
    if (tfm_dist_sum_f64(d, v, 2)) return -1;
    *loss = v[0];
    *stop = v[1] > 0;
    /* a non-finite loss: every rank skips the step (it knows the sum), no need to sum the gradients */
    tfm_params_settle_grad(p);
    int rc = isfinite(v[0]) ? tfm_dist_allreduce_sum(d, p->grad, p->total) : 0;
    tfm_profile_end(g, TFM_PHASE_ALLREDUCE, tp);
    return rc;
}

int tfm_train_dist_agree(tfm_dist *d, int *v) {
    int64_t x = tfm_dist_is_writer(d) ? *v : 0;
    if (tfm_dist_sum_i64(d, &x, 1)) return *v = -1, -1;
    *v = (int)x;
    return 0;
}

int tfm_train_dist_check_params(tfm_dist *d, const tfm_params *p, char *hash, size_t n) {
    const unsigned char *b = (const unsigned char *)p->data;
    uint64_t h = 0xcbf29ce484222325ull;   /* FNV-1a 64 of the parameter bytes */
    for (size_t i = 0; i < p->total * sizeof(float); i++) h = (h ^ b[i]) * 0x100000001b3ull;
    snprintf(hash, n, "%016llx", (unsigned long long)h);
    if (tfm_dist_check_config(d, hash) == 0) return 0;
    return tfm_set_error("parameters differ between ranks at the end of the run (%s)", tfm_last_error()), -1;
}
