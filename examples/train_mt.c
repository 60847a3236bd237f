/* train_mt.c: train a small translator on a parallel corpus and save it, with one library call.
 *
 *   cc train_mt.c $(pkg-config --cflags --libs tfm) -o train_mt
 *   ./train_mt PAIRS.tsv MODEL.tfm [EPOCHS]      (then: ./translate MODEL.tfm < sentences.txt)
 *
 * PAIRS.tsv holds one "source<TAB>target" pair a line. The same run as `tfm train-mt --tsv PAIRS.tsv --out
 * MODEL.tfm --epochs EPOCHS --num-examples 300 --threads 1` (the other settings are train-mt's defaults: the
 * d2l preset's word-level 2-layer Transformer), so both write the same checkpoint: the options struct holds
 * every flag of train-mt (include/tfm/run.h), and the hooks receive what train-mt prints. */
#include <stdio.h>
#include <stdlib.h>

#include <tfm/run.h>

static void progress(const tfm_mt_run_progress *p, void *user) {   /* reports and BLEU validations */
    (void)user;
    if (p->r && p->r->end_of_epoch)
        fprintf(stderr, "epoch %d/%d: loss %.4f\n", p->r->epoch, p->r->epochs, p->r->loss);
}

static void message(const char *line, void *user) {   /* the data, the model, the run's configuration */
    (void)user;
    fprintf(stderr, "%s\n", line);
}

int main(int argc, char **argv) {
    if (argc < 3 || argc > 4) {
        fprintf(stderr, "usage: %s PAIRS.tsv MODEL.tfm [EPOCHS]\n", argv[0]);
        return 2;
    }
    tfm_mt_run_opts o;
    tfm_mt_run_opts_default(&o);   /* train-mt's defaults */
    o.tsv = argv[1], o.out = argv[2], o.epochs = argc > 3 ? atoi(argv[3]) : 10;
    o.num_examples = 300, o.threads = 1, o.log_every = 0;
    /* given NULL: the options not at their defaults count as given (the preset leaves them alone) */
    tfm_run_hooks h = {.on_message = message, .on_mt_progress = progress};
    tfm_run_result r;
    if (tfm_mt_run(&o, &h, &r)) {
        fprintf(stderr, "train_mt: %s\n", tfm_last_error());
        return 1;
    }
    fprintf(stderr, "trained %d steps in %.1f s; saved %s\n", r.steps, r.train_s, o.out);
    return 0;
}
