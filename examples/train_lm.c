/* train_lm.c: train a tiny character-level GPT on a text file for N steps and save it.
 *
 *   cc train_lm.c $(pkg-config --cflags --libs tfm) -o train_lm
 *   ./train_lm TEXT.txt MODEL.tfm [STEPS]        (then: ./generate MODEL.tfm "ROMEO:")
 *
 * The same run as `tfm train-lm --data TEXT.txt --out MODEL.tfm --iters STEPS --n-layer 2
 * --n-embd 64 --block-size 32 --batch-size 8 --warmup 10 --eval-every STEPS --eval-iters 5`
 * (the other settings are train-lm's defaults), so both write the same checkpoint. */
#include <stdio.h>
#include <stdlib.h>

#include <tfm/train.h>

typedef struct {   /* what the save callback needs */
    const char *path;
    const tfm_gpt *model;
    const tfm_char_vocab *vocab;
    const tfm_adamw *opt;
} run;

static void report(const tfm_lm_report *r, void *user) {
    (void)user;
    if (r->eval) fprintf(stderr, "step %d: train loss %.4f, val loss %.4f\n", r->step, r->train_loss, r->val_loss);
}

static int save(const tfm_lm_train_state *st, void *user) {   /* after each evaluation */
    const run *x = user;
    return tfm_gpt_save(x->path, x->model, x->vocab, x->opt, st);
}

int main(int argc, char **argv) {
    if (argc < 3 || argc > 4) {
        fprintf(stderr, "usage: %s TEXT.txt MODEL.tfm [STEPS]\n", argv[0]);
        return 2;
    }
    int steps = argc > 3 ? atoi(argv[3]) : 200;
    tfm_gpt_config cfg = {.block_size = 32, .n_layer = 2, .n_head = 4, .n_embd = 64, .dropout = 0.0f,
                          .attention = TFM_ATTN_CAUSAL};
    tfm_lm_train_state st = {.iters = steps, .batch_size = 8, .grad_accum = 1, .warmup = 10, .eval_every = steps,
                             .eval_iters = 5, .seed = 1, .lr = 1e-3f, .min_lr = 1e-4f, .weight_decay = 0.1f,
                             .beta1 = 0.9f, .beta2 = 0.99f, .grad_clip = 1.0f};
    tfm_lm_data data;   /* the text as character ids, 90% train / 10% validation, and its vocabulary */
    if (steps < 1 || tfm_lm_data_load(&data, argv[1], NULL, 0.9f, cfg.block_size)) {
        fprintf(stderr, "train_lm: %s\n", steps < 1 ? "STEPS must be >= 1" : tfm_last_error());
        return 1;
    }
    cfg.vocab_size = data.vocab.n;
    tfm_gpt m;
    if (tfm_gpt_init(&m, &cfg)) {
        fprintf(stderr, "train_lm: %s\n", tfm_last_error());
        tfm_lm_data_free(&data);
        return 1;
    }
    tfm_gpt_init_weights(&m, (uint64_t)st.seed);
    tfm_adamw opt;
    tfm_adamw_init(&opt, &m.params, st.beta1, st.beta2, 1e-8f, st.weight_decay);
    tfm_lm_train_state_init(&st);   /* step 0, batch and dropout RNGs seeded from st.seed */
    run x = {argv[2], &m, &data.vocab, &opt};
    int done = tfm_lm_train(&m, &data, &opt, &st, 0, 0, NULL, report, save, &x);   /* no step limit, profile, ctl */
    if (done < 0) fprintf(stderr, "train_lm: %s\n", tfm_last_error());
    else fprintf(stderr, "trained %d steps; saved %s\n", done, argv[2]);
    tfm_adamw_free(&opt);
    tfm_gpt_free(&m);
    tfm_lm_data_free(&data);
    return done < 0;
}
