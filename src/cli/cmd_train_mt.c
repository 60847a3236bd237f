/* tfm train-mt: train a translator (Transformer, RNN or Bahdanau seq2seq) on a parallel corpus
 * (flags -> tfm_mt_model_build / tfm_mt_resume, tfm_mt_train, tfm_mt_save). */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/rss.h"
#include "cli/train_mt.h"
#include "cli/train_run.h"
#include "tfm/kernels.h"

#define C "train-mt"

int cmd_train_mt(int argc, char **argv) {
    mt_opts o = {.arch = "transformer", .preprocess = "d2l", .schedule = "constant", .loss_norm = "tokens",
                 .min_freq = 2, .max_len = 10, .d_model = 32, .n_head = 4, .n_layer = 2, .ffn = 64, .batch_size = 64,
                 .epochs = 10, .seed = 1, .embed_size = 32, .hidden_size = 32, .dropout = 0.2f, .lr = 0.005f,
                 .grad_clip = 1.0f, .beta1 = 0.9f, .beta2 = 0.999f, .log_every = 50, .pe_len = 1000,
                 .tokenizer = "word", .init = "d2l"};
    cli_flag flags[] = {
        {"tsv", FLAG_STR, &o.tsv, "parallel corpus: one 'source<TAB>target' pair a line", 0},
        {"src", FLAG_STR, &o.src, "source sentences, one a line (with --tgt)", 0},
        {"tgt", FLAG_STR, &o.tgt, "target sentences, aligned with --src", 0},
        {"valid-src", FLAG_STR, &o.valid_src, "validation source file (loss reported each epoch)", 0},
        {"valid-tgt", FLAG_STR, &o.valid_tgt, "validation target file", 0},
        {"out", FLAG_STR, &o.out, "checkpoint to write (after every epoch)", 0},
        {"arch", FLAG_STR, &o.arch, "transformer | rnn | bahdanau", 0},
        {"preprocess", FLAG_STR, &o.preprocess, "d2l | moses | moses-lower | space", 0},
        {"num-examples", FLAG_INT, &o.num_examples, "use the first N pairs (0 = all)", 0},
        {"min-freq", FLAG_INT, &o.min_freq, "minimum token frequency for the vocabularies", 0},
        {"max-len", FLAG_INT, &o.max_len, "num_steps: sentences padded/truncated to N tokens incl. <eos>", 0},
        {"d-model", FLAG_INT, &o.d_model, "transformer width", 0},
        {"n-head", FLAG_INT, &o.n_head, "attention heads", 0},
        {"n-layer", FLAG_INT, &o.n_layer, "blocks per stack (transformer) / GRU layers (rnn)", 0},
        {"ffn", FLAG_INT, &o.ffn, "position-wise FFN hidden size", 0},
        {"pre-ln", FLAG_BOOL, &o.pre_ln, "pre-LN blocks instead of d2l's post-LN AddNorm", 0},
        {"embed-size", FLAG_INT, &o.embed_size, "embedding size (rnn, bahdanau)", 0},
        {"hidden-size", FLAG_INT, &o.hidden_size, "GRU hidden size (rnn, bahdanau)", 0},
        {"dropout", FLAG_FLOAT, &o.dropout, "dropout", 0},
        {"label-smoothing", FLAG_FLOAT, &o.label_smoothing, "label smoothing of the cross-entropy", 0},
        {"loss-norm", FLAG_STR, &o.loss_norm,
         "tokens (mean over target tokens) | d2l (per-sentence sum / the batch's target length, summed over the batch)", 0},
        {"lr", FLAG_FLOAT, &o.lr, "learning rate (peak; the scale factor for noam)", 0},
        {"min-lr", FLAG_FLOAT, &o.min_lr, "final learning rate of the cosine schedule", 0},
        {"schedule", FLAG_STR, &o.schedule, "noam | cosine | constant (all with --warmup)", 0},
        {"warmup", FLAG_INT, &o.warmup, "warmup steps", 0},
        {"batch-size", FLAG_INT, &o.batch_size, "sentence pairs per batch", 0},
        {"epochs", FLAG_INT, &o.epochs, "epochs (total, also when resuming)", 0},
        {"grad-clip", FLAG_FLOAT, &o.grad_clip, "clip the global gradient norm (0 = off)", 0},
        {"weight-decay", FLAG_FLOAT, &o.weight_decay, "AdamW weight decay (0 = Adam)", 0},
        {"beta1", FLAG_FLOAT, &o.beta1, "Adam(W) beta1", 0},
        {"beta2", FLAG_FLOAT, &o.beta2, "Adam(W) beta2 (0.999: the d2l and Vaswani recipes; train-lm: 0.99)", 0},
        {"bucket", FLAG_INT, &o.bucket, "sort by length within chunks of N batches (0 = off)", 0},
        {"seed", FLAG_INT, &o.seed, "random seed (init, shuffling, dropout)", 0},
        {"threads", FLAG_INT, &o.threads, CLI_THREADS_HELP, 0},
        {"log-every", FLAG_INT, &o.log_every, "progress line every N steps when stderr is not a terminal (0 = per epoch)", 0},
        {"max-steps", FLAG_INT, &o.max_steps, "stop (with a checkpoint) once the run's step reaches N (0 = no limit)", 0},
        {"save-every", FLAG_INT, &o.save_every, "also checkpoint every N steps, inside epochs too (0 = per epoch)", 0},
        {"keep-last", FLAG_INT, &o.keep_last, "keep the last K checkpoints as OUT.step<N>.tfm (0 = none)", 0},
        {"allow-new-data", FLAG_BOOL, &o.allow_new_data, "--resume on different data (fine-tuning; logged)", 0},
        {"skip-nonfinite", FLAG_INT, &o.skip_nonfinite, "skip up to N batches with a non-finite loss/grad", 0},
        {"profile", FLAG_BOOL, &o.profile, "at the end, print time per op kind and phase per step", 0},
        {"resume", FLAG_STR, &o.resume, "continue the run saved in this checkpoint exactly (--out defaults to it)", 0},
        {"d2l-examples", FLAG_BOOL, &o.d2l_examples, "after training, translate d2l's 4 English sentences", 0},
        {"dump-data", FLAG_STR, &o.dump, "write PREFIX.{train,valid}.{src,tgt} tokens and PREFIX.{src,tgt}.vocab", 0},
        {"dump-only", FLAG_BOOL, &o.dump_only, "with --dump-data: write the files and stop (no training)", 0},
    };
    cli_flag all[sizeof flags / sizeof flags[0] + 24];
    int n_flags = mt_flags_join(flags, (int)(sizeof flags / sizeof flags[0]), &o, all);
    cli_spec spec = {C, "(--tsv FILE | --src FILE --tgt FILE) --out MODEL.tfm [options]", mt_about(), all, n_flags, 0, 0};
    const char *pos[1];
    int n_pos, rc = cli_parse(&spec, argc, argv, pos, &n_pos);
    if (rc) return rc == 1 ? 0 : rc;
    if ((rc = mt_preset_apply(&spec, &o))) return rc;
    tfm_run_config run = {0}, stored = {0};   /* run.* entries: what --resume takes and checks */
    tfm_dist *dist = NULL;   /* the ranks under mpirun, else NULL; q: not rank 0 (prints and writes nothing) */
    tfm_mt_model tr = {0};
    tfm_adamw opt = {0};
    tfm_mt_train_opts to;
    tfm_mt_progress prog;
    int q = 0, tty = cli_stderr_is_tty(), kind;
    if ((o.resume && (rc = mt_resume_config(&spec, &o, &stored))) || (rc = mt_check(&o)) || (rc = mt_check_model(&o)) ||
        (rc = cli_run_config_build(C, &spec, MT_SAFE, MT_DATA, &run)) ||
        ((q = cli_dist_open(C, o.threads, &dist)) < 0 && (rc = CLI_EXIT_USAGE)))
        goto free_model;
    if (tty) o.log_every = 1;   /* a live line */
    mt_train_opts(&o, &to);
    tfm_mt_progress_init(&prog, to.seed);
    if (o.resume && (rc = mt_resume(&spec, &o, &stored, &to, &tr, &opt, &prog))) goto free_model;
    kind = o.resume ? tr.tok_kind : mt_corpus_kind(&o);
    tfm_parallel_text ptrain = {0}, pvalid = {0};
    tfm_nmt_arrays atrain = {0}, avalid = {0};
    int have_valid = o.valid_src != NULL;
    if ((rc = mt_load_corpus(&ptrain, o.tsv, o.src, o.tgt, kind, o.num_examples))) goto free_model;
    if (have_valid && (rc = mt_load_corpus(&pvalid, NULL, o.valid_src, o.valid_tgt, kind, 0))) goto free_train;
    if ((!o.resume && (rc = mt_build(&o, &ptrain, &to, &tr, &opt))) ||
        (rc = mt_arrays(&ptrain, &tr, o.max_len, &atrain, "train", o.allow_truncation)) ||
        (have_valid && (rc = mt_arrays(&pvalid, &tr, o.max_len, &avalid, "valid", o.allow_truncation))))
        goto done;
    if (mt_model_settings(&o, &tr), o.dump && ((rc = mt_dump(o.dump, &ptrain, have_valid ? &pvalid : NULL, &tr)) || o.dump_only)) {
        if (!rc) fprintf(stderr, "wrote %s.*\n", o.dump);
        goto done;
    }
    if ((rc = cli_dist_sync(C, dist, &run, prog.step, 0, &tr.model->params, &opt))) goto done;
    if (!q) mt_print_start(&o, &ptrain, &atrain, &tr, &to, &prog);
    mt_valid val;
    if (q) o.log_file = NULL;
    if ((rc = mt_valid_open(&val, &o, &tr, have_valid ? &avalid : NULL, &to, mt_validate_run))) goto done_valid;
    mt_run x = {tty, o.out, &tr, &opt, &to, o.keep_last, &run, &val, -1, prog.step};
    if (!q) cli_run_config_print(C, &run), cli_clean_stale(C, o.out);
    to.ctl.stop = cli_stop_install(), to.ctl.note = cli_note;
    to.ctl.dist = dist;
    int idle = prog.epoch >= o.epochs || (o.max_steps > 0 && prog.step >= o.max_steps);
    if (idle && !q)
        fprintf(stderr, "%s is at epoch %d, step %d (--epochs %d, --max-steps %d): nothing to do\n",
                o.resume ? o.resume : o.out, prog.epoch, prog.step, o.epochs, o.max_steps);
    if (idle) {
    } else if (tfm_mt_train(tr.model, &atrain, have_valid ? &avalid : NULL, &to, &opt, &prog, mt_report_run, mt_save, &x)) {
        cli_train_error(C, dist, "", o.out, x.saved_step, o.resume, x.start_step);   /* 74: a save failed, 1: else */
        rc = cli_exit_status();
        goto done_valid;
    } else if ((rc = q ? 0 : cli_stop_report(C, o.out, prog.step, prog.batch > 0 ? prog.epoch + 1 : prog.epoch, "tfm train-mt --resume")) || q)
        goto done_valid;
    if (!idle) fprintf(stderr, "wrote %s\n", o.out), cli_report_rss(C);
    if (o.d2l_examples) mt_d2l_examples(&tr);
    rc = 0;
done_valid:
    rc = cli_log_close(C, val.log, o.log_file, rc);
    val.log = NULL;
    mt_valid_close(&val);
done:
    tfm_nmt_arrays_free(&atrain);
    tfm_nmt_arrays_free(&avalid);
    if (have_valid) tfm_parallel_text_free(&pvalid);
free_train:
    tfm_parallel_text_free(&ptrain);
free_model:
    if (opt.m) tfm_adamw_free(&opt);
    tfm_mt_model_free(&tr);
    tfm_run_config_free(&run);
    tfm_run_config_free(&stored);
    return cli_dist_close(dist, rc);
}
