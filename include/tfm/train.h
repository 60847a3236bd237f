/* tfm train: optimizers, gradient clipping, learning-rate schedules. */
#ifndef TFM_TRAIN_H
#define TFM_TRAIN_H

#include "tfm/core.h"

/* AdamW (decoupled weight decay, PyTorch semantics). Weight decay applies only to parameters with
 * ndim >= 2 (matrices and embeddings), never to biases or norm weights. With weight_decay = 0 this
 * is Adam. Moments live in two blocks parallel to params->data. */
typedef struct {
    float beta1, beta2, eps, weight_decay;
    float *m, *v;
    size_t n;
    int t;                   /* steps taken */
} tfm_adamw;

void tfm_adamw_init(tfm_adamw *o, const tfm_params *p, float beta1, float beta2, float eps, float weight_decay);
void tfm_adamw_step(tfm_adamw *o, tfm_params *p, float lr);
/* The training loops' step: AdamW on grad * grad_scale (the same float products as scaling the grads
 * first, so the same bits as tfm_clip_grad_norm + tfm_adamw_step), and with zero_grad the grads are
 * zeroed as they are read: one pass over the parameters instead of three. */
void tfm_adamw_step_fused(tfm_adamw *o, tfm_params *p, float lr, float grad_scale, int zero_grad);
void tfm_adamw_free(tfm_adamw *o);

/* Global L2 norm of all grads; if it exceeds max_norm (> 0), scale grads by max_norm/(norm+1e-6)
 * (torch.nn.utils.clip_grad_norm_). Returns the norm before clipping. */
float tfm_clip_grad_norm(tfm_params *p, float max_norm);
/* The norm alone (fixed block order: the same bits for any thread count), and the factor
 * clip_grad_norm_ multiplies the grads by: max_norm / (norm + 1e-6) if norm > max_norm > 0, else 1. */
float tfm_grad_norm(const tfm_params *p);
float tfm_clip_coef(float norm, float max_norm);

/* Linear warmup then cosine decay (nanoGPT):
 *   it < warmup:      lr * (it+1) / (warmup+1)
 *   it > max_iters:   min_lr
 *   otherwise:        min_lr + 0.5 (1 + cos(pi (it-warmup)/(max_iters-warmup))) (lr - min_lr) */
float tfm_lr_cosine(int it, float lr, float min_lr, int warmup, int max_iters);
/* "Noam" inverse-square-root schedule: scale * d_model^-0.5 * min((it+1)^-0.5, (it+1) warmup^-1.5) */
float tfm_lr_noam(int it, float scale, int d_model, int warmup);

#endif
