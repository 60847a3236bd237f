/* tfm train-mt: train a translator (Transformer, or issue 4's RNN / Bahdanau) on a parallel corpus. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/rss.h"
#include "tfm/eval.h"
#include "tfm/kernels.h"
#include "tfm/seq2seq.h"

#define C "train-mt"

typedef struct {
    const char *tsv, *src, *tgt, *valid_src, *valid_tgt, *out, *arch, *preprocess, *schedule, *dump, *loss_norm;
    int num_examples, min_freq, max_len, d_model, n_head, n_layer, ffn, batch_size, epochs, warmup, seed, threads;
    int embed_size, hidden_size, pre_ln, resume, bucket, log_every, d2l_examples, pe_len, dump_only, profile;
    int max_steps;
    float dropout, label_smoothing, lr, min_lr, grad_clip, weight_decay, beta2;
} mt_opts;

typedef struct {
    const mt_opts *o;
    tfm_translator *tr;
    tfm_adamw *opt;
    int tty;
} run_ctx;

static void fmt_eta(float s, char *buf, size_t n) {
    if (!(s >= 0) || s > 1e7) s = 0;
    int t = (int)(s + 0.5f);
    if (t >= 3600) snprintf(buf, n, "%dh%02dm", t / 3600, t / 60 % 60);
    else snprintf(buf, n, "%dm%02ds", t / 60, t % 60);
}

static void report(const tfm_mt_report *r, void *user) {
    run_ctx *x = user;
    char eta[32];
    fmt_eta(r->eta_s, eta, sizeof eta);
    if (r->end_of_epoch) {
        fprintf(stderr, "%sepoch %d/%d  step %d/%d  loss %.4f", x->tty ? "\r\033[K" : "", r->epoch, r->epochs, r->step,
                r->total_steps, r->loss);
        if (r->valid_loss >= 0) fprintf(stderr, "  valid loss %.4f", r->valid_loss);
        fprintf(stderr, "  lr %.2e  %.0f tok/s  ETA %s\n", r->lr, r->tokens_per_s, eta);
    } else if (x->tty) {
        fprintf(stderr, "\r\033[Kepoch %d/%d  step %d/%d  loss %.4f  lr %.2e  %.0f tok/s  ETA %s", r->epoch, r->epochs,
                r->step, r->total_steps, r->loss, r->lr, r->tokens_per_s, eta);
    } else {
        fprintf(stderr, "epoch %d/%d  step %d/%d  loss %.4f  lr %.2e  %.0f tok/s  ETA %s\n", r->epoch, r->epochs,
                r->step, r->total_steps, r->loss, r->lr, r->tokens_per_s, eta);
    }
    fflush(stderr);
}

static int save(const run_ctx *x, const tfm_mt_progress *p) {
    tfm_container c;
    tfm_container_init(&c);
    tfm_translator_put(&c, x->tr);
    tfm_ckpt_put_adamw(&c, x->opt, &x->tr->model->params);
    tfm_mt_progress_put(&c, p);
    tfm_container_add_int(&c, "train.max_len", x->o->max_len);
    tfm_container_add_int(&c, "train.seed", x->o->seed);
    int rc = tfm_container_save(&c, x->o->out);
    tfm_container_free(&c);
    return rc;
}

static int on_epoch(const tfm_mt_progress *p, void *user) { return save(user, p); }

static int load_corpus(const mt_opts *o, tfm_parallel_text *p, const char *tsv, const char *src, const char *tgt,
                       int kind, int max_pairs) {
    int rc = tsv ? tfm_parallel_load_tsv(p, tsv, (tfm_tok_kind)kind, max_pairs)
                 : tfm_parallel_load_files(p, src, tgt, (tfm_tok_kind)kind, max_pairs);
    (void)o;
    if (rc) return cli_error(C, "%s", tfm_last_error());
    if (p->n_empty)
        fprintf(stderr, "tfm %s: warning: %s: skipped %d empty line%s (of %d read)\n", C, tsv ? tsv : src, p->n_empty,
                p->n_empty == 1 ? "" : "s", p->n_lines);
    if (p->n == 0) {
        tfm_parallel_text_free(p);
        return cli_error(C, "%s: no sentence pairs", tsv ? tsv : src);
    }
    return 0;
}

static int arrays(const tfm_parallel_text *p, const tfm_translator *t, int num_steps, tfm_nmt_arrays *a,
                  const char *what) {
    tfm_parallel_ids ids;
    if (tfm_parallel_encode(p, &t->src_vocab, &t->tgt_vocab, &ids)) return cli_error(C, "%s", tfm_last_error());
    int rc = tfm_nmt_arrays_build(&ids, num_steps, a);
    tfm_parallel_ids_free(&ids);
    if (rc) return cli_error(C, "%s", tfm_last_error());
    if (a->n_truncated_src || a->n_truncated_tgt)
        fprintf(stderr, "%s: truncated to --max-len %d: %d source and %d target sentences\n", what, num_steps,
                a->n_truncated_src, a->n_truncated_tgt);
    return 0;
}

/* --dump-data PREFIX: the tokenized corpus and vocabularies (for the PyTorch twin benchmark) */
static int dump_tokens(const char *path, const tfm_toklist *l, int n) {
    FILE *f = fopen(path, "w");
    if (!f) return cli_error(C, "cannot write %s", path);
    for (int i = 0; i < n; i++) {
        for (int k = 0; k < l[i].n; k++) fprintf(f, k ? " %s" : "%s", l[i].tok[k]);
        fputc('\n', f);
    }
    return fclose(f) ? cli_error(C, "cannot write %s", path) : 0;
}
static int dump_vocab(const char *path, const tfm_vocab *v) {
    FILE *f = fopen(path, "w");
    if (!f) return cli_error(C, "cannot write %s", path);
    char *s = tfm_vocab_serialize(v);
    fprintf(f, "%s\n", s ? s : "");
    free(s);
    return fclose(f) ? cli_error(C, "cannot write %s", path) : 0;
}

static void d2l_examples(tfm_translator *t) {
    static const char *eng[] = {"go .", "i lost .", "he's calm .", "i'm home ."};
    static const char *fra[] = {"va !", "j'ai perdu .", "il est calme .", "je suis chez moi ."};
    char *hyp[4] = {0};
    tfm_graph g;
    tfm_graph_init(&g, 0);
    tfm_decode_opts o = {1, 0.0f, 10};
    if (tfm_translate_lines(t, &g, eng, 4, 10, 4, &o, hyp) == 0)
        for (int i = 0; i < 4; i++) {
            printf("%s => %s, bleu %.3f\n", eng[i], hyp[i], tfm_bleu_d2l(hyp[i], fra[i], 2));
            free(hyp[i]);
        }
    fflush(stdout);
    tfm_graph_free(&g);
}

int cmd_train_mt(int argc, char **argv) {
    mt_opts o = {.arch = "transformer", .preprocess = "d2l", .schedule = "constant",
                 .loss_norm = "tokens", .min_freq = 2, .max_len = 10,
                 .d_model = 32, .n_head = 4, .n_layer = 2, .ffn = 64, .batch_size = 64, .epochs = 10, .seed = 1,
                 .embed_size = 32, .hidden_size = 32, .dropout = 0.2f, .lr = 0.005f, .grad_clip = 1.0f,
                 .beta2 = 0.999f, .log_every = -1, .pe_len = 1000};
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
         "tokens (mean over target tokens) | d2l (per-sentence sum / num_steps, summed over the batch)", 0},
        {"lr", FLAG_FLOAT, &o.lr, "learning rate (peak; the scale factor for noam)", 0},
        {"min-lr", FLAG_FLOAT, &o.min_lr, "final learning rate of the cosine schedule", 0},
        {"schedule", FLAG_STR, &o.schedule, "noam | cosine | constant (all with --warmup)", 0},
        {"warmup", FLAG_INT, &o.warmup, "warmup steps", 0},
        {"batch-size", FLAG_INT, &o.batch_size, "sentence pairs per batch", 0},
        {"epochs", FLAG_INT, &o.epochs, "epochs (total, also when resuming)", 0},
        {"grad-clip", FLAG_FLOAT, &o.grad_clip, "clip the global gradient norm (0 = off)", 0},
        {"weight-decay", FLAG_FLOAT, &o.weight_decay, "AdamW weight decay (0 = Adam)", 0},
        {"beta2", FLAG_FLOAT, &o.beta2, "Adam beta2", 0},
        {"bucket", FLAG_INT, &o.bucket, "sort by length within chunks of N batches (0 = off)", 0},
        {"seed", FLAG_INT, &o.seed, "random seed (init, shuffling, dropout)", 0},
        {"threads", FLAG_INT, &o.threads, "threads (0 = all cores)", 0},
        {"log-every", FLAG_INT, &o.log_every, "steps between progress lines (default: live on a TTY, else per epoch)", 0},
        {"max-steps", FLAG_INT, &o.max_steps,
         "stop after N optimizer steps (0 = run all epochs); the checkpoint is written, its epoch not counted", 0},
        {"profile", FLAG_BOOL, &o.profile, "at the end, print time per op kind and phase per step", 0},
        {"resume", FLAG_BOOL, &o.resume, "continue training the checkpoint at --out (same flags)", 0},
        {"d2l-examples", FLAG_BOOL, &o.d2l_examples, "after training, translate d2l's 4 English sentences", 0},
        {"dump-data", FLAG_STR, &o.dump, "write PREFIX.{train,valid}.{src,tgt} tokens and PREFIX.{src,tgt}.vocab", 0},
        {"dump-only", FLAG_BOOL, &o.dump_only, "with --dump-data: write the files and stop (no training)", 0},
    };
    cli_spec spec = {C, "(--tsv FILE | --src FILE --tgt FILE) --out MODEL.tfm [options]",
                     "Train an encoder-decoder translator with teacher forcing, masked cross-entropy (label\n"
                     "smoothing), Adam(W), a learning-rate schedule and gradient clipping. A checkpoint is written\n"
                     "after every epoch; --resume continues it exactly. Defaults: the d2l Transformer recipe.",
                     flags, (int)(sizeof flags / sizeof flags[0]), 0, 0};
    const char *pos[1];
    int n_pos, rc = cli_parse(&spec, argc, argv, pos, &n_pos);
    if (rc) return rc == 1 ? 0 : rc;

    /* ---- flag checks */
    if (!o.tsv == !(o.src || o.tgt)) return cli_error(C, "give either --tsv FILE or --src FILE --tgt FILE");
    if (!o.tsv && (!o.src || !o.tgt)) return cli_error(C, "--src and --tgt go together");
    if (!o.valid_src != !o.valid_tgt) return cli_error(C, "--valid-src and --valid-tgt go together");
    if (!o.out) return cli_error(C, "--out MODEL.tfm is required");
    int kind = tfm_tok_kind_parse(o.preprocess);
    if (kind < 0) return cli_error(C, "--preprocess: unknown '%s' (d2l, moses, moses-lower, space)", o.preprocess);
    int sched = !strcmp(o.schedule, "noam") ? TFM_SCHED_NOAM
                : !strcmp(o.schedule, "cosine") ? TFM_SCHED_COSINE
                : !strcmp(o.schedule, "constant") ? TFM_SCHED_CONSTANT : -1;
    if (sched < 0) return cli_error(C, "--schedule: unknown '%s' (noam, cosine, constant)", o.schedule);
    if (strcmp(o.arch, "transformer") && strcmp(o.arch, "rnn") && strcmp(o.arch, "bahdanau"))
        return cli_error(C, "--arch: unknown '%s' (transformer, rnn, bahdanau)", o.arch);
    if (o.num_examples < 0) return cli_error(C, "--num-examples must be >= 0, got %d", o.num_examples);
    if (o.min_freq < 1) return cli_error(C, "--min-freq must be >= 1, got %d", o.min_freq);
    if (o.max_len < 2 || o.max_len > 4096) return cli_error(C, "--max-len must be in 2..4096, got %d", o.max_len);
    if (o.batch_size < 1) return cli_error(C, "--batch-size must be >= 1, got %d", o.batch_size);
    if (o.epochs < 1) return cli_error(C, "--epochs must be >= 1, got %d", o.epochs);
    if (o.warmup < 0) return cli_error(C, "--warmup must be >= 0, got %d", o.warmup);
    if (!(o.lr > 0) || o.lr > 100) return cli_error(C, "--lr must be in (0, 100], got %g", o.lr);
    if (!(o.min_lr >= 0)) return cli_error(C, "--min-lr must be >= 0, got %g", o.min_lr);
    if (!(o.dropout >= 0 && o.dropout < 1)) return cli_error(C, "--dropout must be in [0, 1), got %g", o.dropout);
    if (strcmp(o.loss_norm, "tokens") && strcmp(o.loss_norm, "d2l"))
        return cli_error(C, "--loss-norm: unknown '%s' (tokens, d2l)", o.loss_norm);
    if (!(o.label_smoothing >= 0 && o.label_smoothing < 1))
        return cli_error(C, "--label-smoothing must be in [0, 1), got %g", o.label_smoothing);
    if (!(o.grad_clip >= 0)) return cli_error(C, "--grad-clip must be >= 0, got %g", o.grad_clip);
    if (!(o.weight_decay >= 0)) return cli_error(C, "--weight-decay must be >= 0, got %g", o.weight_decay);
    if (!(o.beta2 > 0 && o.beta2 < 1)) return cli_error(C, "--beta2 must be in (0, 1), got %g", o.beta2);
    if (o.threads < 0) return cli_error(C, "--threads must be >= 0 (0 = all cores), got %d", o.threads);
    if (o.bucket < 0) return cli_error(C, "--bucket must be >= 0, got %d", o.bucket);
    if (o.max_steps < 0) return cli_error(C, "--max-steps must be >= 0 (0 = no limit), got %d", o.max_steps);
    if (o.d_model < 2 || o.d_model > 65536) return cli_error(C, "--d-model must be in 2..65536, got %d", o.d_model);
    if (o.n_head < 1 || o.d_model % o.n_head)
        return cli_error(C, "--n-head must divide --d-model (%d), got %d", o.d_model, o.n_head);
    if (o.d_model % 2) return cli_error(C, "--d-model must be even, got %d", o.d_model);
    if (o.n_layer < 1 || o.n_layer > 64) return cli_error(C, "--n-layer must be in 1..64, got %d", o.n_layer);
    if (o.ffn < 1) return cli_error(C, "--ffn must be >= 1, got %d", o.ffn);
    if (o.embed_size < 1 || o.hidden_size < 1) return cli_error(C, "--embed-size and --hidden-size must be >= 1");
    tfm_set_threads(o.threads);
    int tty = cli_stderr_is_tty();
    if (o.log_every < 0) o.log_every = tty ? 1 : 0;

    /* ---- resume: model, vocabularies, optimizer and progress from --out */
    tfm_translator tr = {0};
    tfm_adamw opt = {0};
    tfm_mt_progress prog;
    tfm_mt_progress_init(&prog, (uint64_t)o.seed);
    tfm_container ck;
    int have_ck = 0;
    if (o.resume) {
        if (tfm_container_load(&ck, o.out)) {
            tfm_container_free(&ck);
            return cli_error(C, "--resume: %s", tfm_last_error());
        }
        have_ck = 1;
        if (tfm_translator_get(&tr, &ck, o.out) || tfm_mt_progress_get(&ck, &prog)) {
            tfm_container_free(&ck);
            return cli_error(C, "--resume: %s", tfm_last_error());
        }
        kind = tr.tok_kind;
        /* sentences of --max-len tokens plus <bos> must fit the stored positional-encoding table */
        if (!strcmp(tr.model->cfg.arch, "transformer") && tr.model->cfg.max_len < o.max_len + 1) {
            rc = cli_error(C, "--resume: %s: config.max_len %d is shorter than --max-len %d + 1", o.out,
                           tr.model->cfg.max_len, o.max_len);
            tfm_translator_free(&tr);
            tfm_container_free(&ck);
            return rc;
        }
    }

    /* ---- data */
    tfm_parallel_text ptrain, pvalid;
    if (load_corpus(&o, &ptrain, o.tsv, o.src, o.tgt, kind, o.num_examples)) {
        if (have_ck) tfm_container_free(&ck);
        tfm_translator_free(&tr);
        return 2;
    }
    int have_valid = 0;
    if (o.valid_src) {
        if (load_corpus(&o, &pvalid, NULL, o.valid_src, o.valid_tgt, kind, 0)) {
            tfm_parallel_text_free(&ptrain);
            if (have_ck) tfm_container_free(&ck);
            tfm_translator_free(&tr);
            return 2;
        }
        have_valid = 1;
    }
    rc = 0;
    tfm_nmt_arrays atrain = {0}, avalid = {0};
    if (!o.resume) {
        tr.tok_kind = kind;
        if (tfm_vocab_build(&tr.src_vocab, ptrain.src, ptrain.n, o.min_freq) ||
            tfm_vocab_build(&tr.tgt_vocab, ptrain.tgt, ptrain.n, o.min_freq)) {
            rc = cli_error(C, "%s", tfm_last_error());
            goto done;
        }
        tfm_s2s_config cf;
        tfm_s2s_config_default(&cf);
        snprintf(cf.arch, sizeof cf.arch, "%s", o.arch);
        cf.src_vocab = tr.src_vocab.n;
        cf.tgt_vocab = tr.tgt_vocab.n;
        cf.d_model = o.d_model;
        cf.n_head = o.n_head;
        cf.ffn = o.ffn;
        cf.pre_ln = o.pre_ln;
        cf.max_len = o.pe_len > o.max_len + 1 ? o.pe_len : o.max_len + 1;
        cf.n_layer = o.n_layer;
        cf.embed_size = o.embed_size;
        cf.hidden_size = o.hidden_size;
        cf.dropout = o.dropout;
        tr.model = tfm_s2s_create(&cf);
        if (!tr.model) {
            rc = cli_error(C, "%s", tfm_last_error());
            goto done;
        }
        tr.model->vt->init_weights(tr.model, (uint64_t)o.seed);
    }
    tfm_adamw_init(&opt, &tr.model->params, 0.9f, o.beta2, 1e-8f, o.weight_decay);
    if (have_ck && tfm_ckpt_get_adamw(&ck, &opt, &tr.model->params, o.out)) {
        rc = cli_error(C, "--resume: %s", tfm_last_error());
        goto done;
    }
    if (arrays(&ptrain, &tr, o.max_len, &atrain, "train") || (have_valid && arrays(&pvalid, &tr, o.max_len, &avalid, "valid"))) {
        rc = 2;
        goto done;
    }
    if (o.dump) {
        char path[4096];
        const char *sfx[] = {"train.src", "train.tgt", "valid.src", "valid.tgt"};
        for (int i = 0; i < 4 && !rc; i++) {
            if (i >= 2 && !have_valid) break;
            const tfm_parallel_text *p = i < 2 ? &ptrain : &pvalid;
            snprintf(path, sizeof path, "%s.%s", o.dump, sfx[i]);
            rc = dump_tokens(path, i % 2 ? p->tgt : p->src, p->n);
        }
        snprintf(path, sizeof path, "%s.src.vocab", o.dump);
        if (!rc) rc = dump_vocab(path, &tr.src_vocab);
        snprintf(path, sizeof path, "%s.tgt.vocab", o.dump);
        if (!rc) rc = dump_vocab(path, &tr.tgt_vocab);
        if (rc) goto done;
        if (o.dump_only) {
            fprintf(stderr, "wrote %s.*\n", o.dump);
            goto done;
        }
    }
    fprintf(stderr, "%s: %d pairs (%d lines read), vocab %d src / %d tgt, %zu parameters (%s), %d threads, gemm %s\n",
            o.tsv ? o.tsv : o.src, atrain.n, ptrain.n_lines, tr.src_vocab.n, tr.tgt_vocab.n, tr.model->params.total,
            tr.model->cfg.arch, tfm_get_threads(), tfm_gemm_backend());
    if (o.resume) fprintf(stderr, "resuming %s at epoch %d, step %d\n", o.out, prog.epoch, prog.step);

    tfm_mt_train_opts to;
    tfm_mt_train_opts_default(&to);
    to.epochs = o.epochs;
    to.batch_size = o.batch_size;
    to.num_steps = o.max_len;
    to.lr = o.lr;
    to.schedule = sched;
    to.warmup = o.warmup;
    to.min_lr = o.min_lr;
    to.label_smoothing = o.label_smoothing;
    to.loss_norm = strcmp(o.loss_norm, "d2l") ? TFM_LOSS_TOKENS : TFM_LOSS_D2L;
    to.grad_clip = o.grad_clip;
    to.weight_decay = o.weight_decay;
    to.beta2 = o.beta2;
    to.seed = (uint64_t)o.seed;
    to.bucket = o.bucket;
    to.log_every = o.log_every;
    to.profile = o.profile;
    to.max_steps = o.max_steps;
    run_ctx x = {&o, &tr, &opt, tty};
    if (prog.epoch >= o.epochs) {
        fprintf(stderr, "%s already has %d epochs (--epochs %d): nothing to do\n", o.out, prog.epoch, o.epochs);
    } else if (tfm_mt_train(tr.model, &atrain, have_valid ? &avalid : NULL, &to, &opt, &prog, report, on_epoch, &x)) {
        rc = cli_error(C, "%s", tfm_last_error());
        goto done;
    }
    fprintf(stderr, "wrote %s\n", o.out);
    cli_report_rss("train-mt");
    if (o.d2l_examples) d2l_examples(&tr);
done:
    tfm_nmt_arrays_free(&atrain);
    if (have_valid) {
        tfm_nmt_arrays_free(&avalid);
        tfm_parallel_text_free(&pvalid);
    }
    tfm_parallel_text_free(&ptrain);
    if (have_ck) tfm_container_free(&ck);
    if (opt.m) tfm_adamw_free(&opt);
    tfm_translator_free(&tr);
    return rc;
}
