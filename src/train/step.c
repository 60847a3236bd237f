/* The training step both loops share (train_lm.c, train_mt.c): after the backward, the clip coefficient
 * from the global grad norm, then fused AdamW on the clipped grads, which zeroes them for the next step. */
#include <math.h>

#include "tfm/train.h"

void tfm_train_zero_grad(tfm_graph *g, tfm_params *p) {
    double tp = tfm_profile_begin(g);
    tfm_params_zero_grad(p);
    tfm_profile_end(g, TFM_PHASE_ZERO_GRAD, tp);
}

int tfm_train_step(tfm_graph *g, tfm_params *p, tfm_adamw *opt, float lr, float grad_clip) {
    double tp = tfm_profile_begin(g);
    float norm = tfm_grad_norm(p);   /* also without clipping: the non-finite check needs it */
    float coef = grad_clip > 0 ? tfm_clip_coef(norm, grad_clip) : 1.0f;
    tfm_profile_end(g, TFM_PHASE_CLIP, tp);
    if (!isfinite(norm)) {
        tfm_train_zero_grad(g, p);
        return -1;
    }
    tp = tfm_profile_begin(g);
    tfm_adamw_step_fused(opt, p, lr, coef, 1);   /* clipped grads, zeroed for the next step */
    tfm_profile_end(g, TFM_PHASE_OPTIMIZER, tp);
    return 0;
}
