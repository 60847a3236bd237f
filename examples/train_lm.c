/* train_lm.c: train a tiny GPT on a text file for N steps and save it, with one library call.
 *
 *   cc train_lm.c $(pkg-config --cflags --libs tfm) -o train_lm
 *   ./train_lm TEXT.txt MODEL.tfm [STEPS]        (then: ./generate MODEL.tfm "ROMEO:")
 *
 * The same run as `tfm train-lm --data TEXT.txt --out MODEL.tfm --iters STEPS --n-layer 2
 * --n-embd 64 --block-size 32 --batch-size 8 --warmup 10 --eval-every STEPS --eval-iters 5`
 * (the other settings are train-lm's defaults), so both write the same checkpoint: the options struct holds
 * every flag of train-lm (include/tfm/run.h), and the hooks receive what train-lm prints. */
#include <stdio.h>
#include <stdlib.h>

#include <tfm/run.h>

static void progress(const tfm_lm_progress *p, void *user) {   /* every step and every evaluation */
    (void)user;
    if (p->r->eval) fprintf(stderr, "step %d: train loss %.4f, val loss %.4f\n", p->r->step, p->r->train_loss, p->r->val_loss);
}

int main(int argc, char **argv) {
    if (argc < 3 || argc > 4) {
        fprintf(stderr, "usage: %s TEXT.txt MODEL.tfm [STEPS]\n", argv[0]);
        return 2;
    }
    tfm_lm_run_opts o;
    tfm_lm_run_opts_default(&o);   /* train-lm's defaults */
    o.data = argv[1], o.out = argv[2], o.iters = argc > 3 ? atoi(argv[3]) : 200;
    o.n_layer = 2, o.n_embd = 64, o.block_size = 32, o.batch_size = 8, o.warmup = 10;
    o.eval_every = o.iters, o.eval_iters = 5, o.log_every = 0;
    tfm_run_hooks h = {.on_lm_progress = progress};   /* no messages, no stop flag, one process */
    tfm_run_result r;
    if (tfm_lm_run(&o, &h, &r)) {
        fprintf(stderr, "train_lm: %s\n", tfm_last_error());
        return 1;
    }
    fprintf(stderr, "trained %d steps in %.1f s; saved %s\n", r.steps, r.train_s, o.out);
    return 0;
}
