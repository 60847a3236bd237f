/* The pieces of a training loop both trainers share (src/train/loop.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/loop.h"

/* ---------------------------------------------------------------- the chunk pool */
void tfm_train_pool_free(tfm_train_pool *pl) {
    for (int i = 0; i < pl->k; i++) {
        if (i > 0 && pl->c[i].net) pl->ops->free_replica(pl->c[i].net);   /* chunk 0 runs on the model itself */
        tfm_graph_free(&pl->c[i].g);
    }
    free(pl->c), free(pl->p);
    tfm_gemm_desk_free(pl->desk);
    *pl = (tfm_train_pool){0};
}

int tfm_train_pool_init(tfm_train_pool *pl, const tfm_train_net_ops *ops, void *model, const tfm_graph *g, int k) {
    *pl = (tfm_train_pool){.ops = ops};
    if (k <= 0) return 0;
    if (tfm_train_chunks_alloc((void **)&pl->c, sizeof *pl->c, &pl->p, &pl->desk, k)) return -1;
    pl->k = k;
    for (int i = 0; i < k; i++) {
        tfm_train_chunk_slot *c = &pl->c[i];
        tfm_graph_init_worker(&c->g, g);
        if (!(c->net = i == 0 ? model : ops->replica(model))) return tfm_train_pool_free(pl), -1;
        pl->p[i] = ops->params(c->net);
        if (i > 0) tfm_params_zero_grad(pl->p[i]);   /* the model's: zeroed before the first step */
    }
    return 0;
}

void tfm_train_pool_profile(tfm_train_pool *pl, tfm_graph *g) {
    tfm_graph *gs[pl->k];
    for (int i = 0; i < pl->k; i++) gs[i] = &pl->c[i].g;
    tfm_profile_merge(g, gs, pl->k);
}

/* ---------------------------------------------------------------- one step */
void tfm_train_graph_init(tfm_graph *g, tfm_rng rng, int profile, int bf16) {
    tfm_graph_init(g, 0);
    g->rng = rng;
    g->profile = profile;
    g->gemm_bf16 = bf16;    /* the chunks' worker graphs inherit it */
    g->recycle_grads = 1;   /* nothing reads an intermediate tensor's grad after the backward */
}

int tfm_train_update(tfm_graph *g, tfm_params *p, tfm_adamw *opt, float lr, float grad_clip, const float *norm,
                     float loss) {
    /* the non-finite check comes before the update and before any save: no NaN reaches a checkpoint */
    if (!isfinite(loss)) {
        tfm_train_zero_grad(g, p);
        return 1;
    }
    return tfm_train_step_norm(g, p, opt, lr, grad_clip, norm) != 0;
}

int tfm_train_skip(const tfm_train_ctl *ctl, int step, float loss, int *skipped, int writer) {
    const char *what = isfinite(loss) ? "gradient norm" : "loss";
    if (++*skipped > ctl->skip_nonfinite)
        return tfm_set_error("step %d: %s is not finite (%d such batches, --skip-nonfinite %d); try a lower --lr", step,
                             what, *skipped, ctl->skip_nonfinite), -1;
    if (writer)
        tfm_train_note(ctl, "step %d: non-finite %s, batch skipped (%d of --skip-nonfinite %d)", step, what, *skipped,
                       ctl->skip_nonfinite);
    return 0;
}

/* ---------------------------------------------------------------- several ranks */
int tfm_train_check_before_save_all(tfm_dist *dist, int step, const tfm_params *p, const tfm_adamw *opt,
                                    const char *what, float loss) {
    int bad = tfm_train_check_before_save(step, p, opt, what, loss), agreed = bad;
    if (!dist) return bad;
    if (tfm_train_dist_agree(dist, &agreed)) return -1;
    if (agreed && !bad)
        tfm_set_error("step %d: rank 0 found the weights diverged (not saved; its message is on rank 0's stderr)",
                      step);
    return agreed ? -1 : 0;
}

int tfm_train_check_ranks(const tfm_train_ctl *ctl, tfm_dist *dist, const tfm_params *p, int rc) {
    char hash[32];
    if (rc || !dist) return rc;
    if (tfm_train_dist_check_params(dist, p, hash, sizeof hash)) return -1;
    if (tfm_dist_is_writer(dist))
        tfm_train_note(ctl, "%d ranks: parameters identical on every rank (fnv1a64 %s)", tfm_dist_size(dist), hash);
    return 0;
}

void tfm_train_note_profile(const tfm_train_ctl *ctl, const tfm_graph *g, long steps, double wall) {
    if (!ctl || !ctl->note) return;
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) return;
    tfm_profile_print(g, steps, "step", wall, tfm_isa_name(), f);
    fprintf(f, "  arena: peak %.1f MiB, %zu chunk allocations\n", g->arena.peak / 1048576.0, g->arena.n_mallocs);
    if (fclose(f) == 0)
        for (char *line = text, *end; line && *line; line = end ? end + 1 : NULL) {
            if ((end = strchr(line, '\n'))) *end = '\0';
            ctl->note(line, ctl->note_user);
        }
    free(text);
}
