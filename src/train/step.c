/* The training step both loops share (train_lm.c, train_mt.c): after the backward, the clip coefficient
 * from the global grad norm, then fused AdamW on the clipped grads, which are then released for the next
 * step (tfm_params_release_grad: its backward assigns them, no pass writes zeros). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "tfm/train.h"
#include "core/par.h"
#include "train/grad_norm.h"

void tfm_train_zero_grad(tfm_graph *g, tfm_params *p) {
    double tp = tfm_profile_begin(g);
    tfm_params_zero_grad(p);
    tfm_profile_end(g, TFM_PHASE_ZERO_GRAD, tp);
}

int tfm_train_step(tfm_graph *g, tfm_params *p, tfm_adamw *opt, float lr, float grad_clip) {
    return tfm_train_step_norm(g, p, opt, lr, grad_clip, NULL);
}

int tfm_train_step_norm(tfm_graph *g, tfm_params *p, tfm_adamw *opt, float lr, float grad_clip, const float *known) {
    double tp = tfm_profile_begin(g);
    tfm_params_settle_grad(p);   /* a parameter no backward used since the release: zeros */
    float norm = known ? *known : tfm_grad_norm(p);   /* also without clipping: the non-finite check needs it */
    float coef = grad_clip > 0 ? tfm_clip_coef(norm, grad_clip) : 1.0f;
    tfm_profile_end(g, TFM_PHASE_CLIP, tp);
    if (!isfinite(norm)) {
        tfm_train_zero_grad(g, p);
        return -1;
    }
    tp = tfm_profile_begin(g);
    tfm_adamw_step_fused(opt, p, lr, coef, 0);   /* clipped grads */
    tfm_params_release_grad(p);
    tfm_profile_end(g, TFM_PHASE_OPTIMIZER, tp);
    return 0;
}

int tfm_train_check_saveable(const tfm_params *p, const tfm_adamw *opt) {
    if (tfm_ckpt_check_block(p, p->data, "parameter", 0)) return -1;
    if (opt && (tfm_ckpt_check_block(p, opt->m, "AdamW first moment of", 0) ||
                tfm_ckpt_check_block(p, opt->v, "AdamW second moment of", 1)))
        return -1;
    return 0;
}

int tfm_train_check_before_save(int step, const tfm_params *p, const tfm_adamw *opt, const char *loss_what,
                                float loss) {
    char why[700];
    if (tfm_train_check_saveable(p, opt)) snprintf(why, sizeof why, "%s", tfm_last_error());
    else if (!isfinite(loss)) snprintf(why, sizeof why, "%s is %g", loss_what, (double)loss);
    else return 0;
    return tfm_set_error("step %d: %s: the weights diverged (not saved); try a lower --lr", step, why), -1;
}

float tfm_train_chunks_reduce(tfm_graph *g, double t0, tfm_params *p, tfm_params *const *reps, int k) {
    tfm_profile_end(g, TFM_PHASE_CHUNKS, t0);
    double tp = tfm_profile_begin(g);
    for (int r = 0; r < k; r++) tfm_params_settle_grad(reps[r]);
    const size_t blk = TFM_NORM_BLOCK;
    long nb = (long)((p->total + blk - 1) / blk);
    double stack[1024], *part = tfm_grad_parts_get(stack, (size_t)nb);
    if (!part) tfm_fatal("out of memory (grad norm)");
    /* dynamic blocks: a descheduled thread (a busy machine) holds up one block, not half the sum; each block's
     * share of the grad norm is taken while the block is in cache (tfm_grad_norm's blocks and order) */
    TFM_PAR_FOR(nb > 1, schedule(dynamic, 4),
    for (long b = 0; b < nb; b++) {
        size_t i0 = (size_t)b * blk, i1 = i0 + blk < p->total ? i0 + blk : p->total;
        float *dst = p->grad;
        for (int r = 0; r < k; r++) {
            float *src = reps[r]->grad;
            if (src == dst) continue;   /* this chunk computed into p's grads */
            for (size_t i = i0; i < i1; i++) dst[i] += src[i];
        }
        part[b] = tfm_grad_sq_block(dst, i0, i1);
    });
    float norm = tfm_grad_norm_of_parts(part, (size_t)nb);
    tfm_grad_parts_put(stack, part);
    for (int r = 0; r < k; r++)   /* read: the chunks' next backwards assign them */
        if (reps[r]->grad != p->grad) tfm_params_release_grad(reps[r]);
    tfm_profile_end(g, TFM_PHASE_REDUCE, tp);
    return norm;
}

void tfm_train_chunks_run(tfm_gemm_desk *desk, int k, tfm_chunk_fn run, void *ctx) {
    int nt = tfm_get_threads();
    if (desk) tfm_gemm_desk_open(desk, k);
#pragma omp parallel num_threads(nt < k ? nt : k)
    {
        omp_set_num_threads(1);   /* this thread's chunk: its kernels run on it alone */
        int self = omp_get_thread_num();
#pragma omp for schedule(dynamic, 1) nowait
        for (int i = 0; i < k; i++) {
            if (desk) tfm_gemm_share_begin(desk, self);
            run(ctx, i);
            if (desk) tfm_gemm_share_end(desk);
        }
        if (desk) tfm_gemm_help(desk, self);
    }
}

void tfm_train_chunk(int start, int count, int k, int c, int *c0, int *cn) {
    int base = count / k, extra = count % k;
    *c0 = start + c * base + (c < extra ? c : extra);
    *cn = base + (c < extra);
}

int tfm_train_chunks(int parallel, int threads, int slice) {
    int k = threads < slice ? threads : slice;
    return parallel == TFM_PARALLEL_OPS || k < 2 ? 0 : k;
}

int tfm_train_chunks_alloc(void **chunks, size_t size, tfm_params ***params, tfm_gemm_desk **desk, int k) {
    *chunks = aligned_alloc(64, (size_t)k * size);
    *params = calloc((size_t)k, sizeof **params);
    *desk = tfm_gemm_desk_new(k);
    if (!*chunks || !*params || !*desk) {
        free(*chunks), free(*params), tfm_gemm_desk_free(*desk);
        *chunks = NULL, *params = NULL, *desk = NULL;
        return tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory (%d chunks)", k), -1;
    }
    memset(*chunks, 0, (size_t)k * size);
    return 0;
}

int tfm_train_stop_requested(const tfm_train_ctl *ctl) {
    return (ctl->stop && *ctl->stop) || (ctl->stop_self && *ctl->stop_self);
}

void tfm_train_note(const tfm_train_ctl *ctl, const char *fmt, ...) {
    if (!ctl || !ctl->note) return;
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    ctl->note(line, ctl->note_user);
}
