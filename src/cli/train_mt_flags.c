/* train-mt: flag checks, flags -> library options, corpus loading with warnings
 * (--dump-data, --d2l-examples and progress lines: train_mt_output.c). The command: cmd_train_mt.c. */
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/train_mt.h"
#include "cli/train_run.h"

#define C "train-mt"

/* A flag of another architecture must keep its default: the model would carry the value without using it. */
static int check_arch_flags(const mt_opts *o) {
    tfm_s2s_config d;
    tfm_s2s_config_default(&d);
    int tr = !strcmp(o->arch, "transformer");
    const struct { const char *flag; int v, def, transformer; } f[] = {
        {"d-model", o->d_model, d.d_model, 1}, {"n-head", o->n_head, d.n_head, 1}, {"ffn", o->ffn, d.ffn, 1},
        {"pre-ln", o->pre_ln, 0, 1}, {"embed-size", o->embed_size, d.embed_size, 0},
        {"hidden-size", o->hidden_size, d.hidden_size, 0}};
    for (size_t i = 0; i < sizeof f / sizeof *f; i++)
        if (f[i].transformer != tr && f[i].v != f[i].def)
            return cli_error(C, "--%s %d is for --arch %s: --arch %s does not use it (leave it out)", f[i].flag, f[i].v,
                             tr ? "rnn / bahdanau" : "transformer", o->arch);
    return 0;
}

int mt_check(const mt_opts *o) {
    if (!o->tsv == !(o->src || o->tgt)) return cli_error(C, "give either --tsv FILE or --src FILE --tgt FILE");
    if (!o->tsv && (!o->src || !o->tgt)) return cli_error(C, "--src and --tgt go together");
    if (!o->valid_src != !o->valid_tgt) return cli_error(C, "--valid-src and --valid-tgt go together");
    if (!o->out) return cli_error(C, "--out MODEL.tfm (or --resume MODEL.tfm) is required");
    int rc = mt_check_files(o);
    if (rc) return rc;
    if (tfm_tok_kind_parse(o->preprocess) < 0)
        return cli_error(C, "--preprocess: unknown '%s' (d2l, moses, moses-lower, space)", o->preprocess);
    if (strcmp(o->schedule, "noam") && strcmp(o->schedule, "cosine") && strcmp(o->schedule, "constant"))
        return cli_error(C, "--schedule: unknown '%s' (noam, cosine, constant)", o->schedule);
    if (strcmp(o->arch, "transformer") && strcmp(o->arch, "rnn") && strcmp(o->arch, "bahdanau"))
        return cli_error(C, "--arch: unknown '%s' (transformer, rnn, bahdanau)", o->arch);
    if (check_arch_flags(o)) return CLI_EXIT_USAGE;
    if (strcmp(o->loss_norm, "tokens") && strcmp(o->loss_norm, "d2l"))
        return cli_error(C, "--loss-norm: unknown '%s' (tokens, d2l)", o->loss_norm);
    if (o->num_examples < 0) return cli_error(C, "--num-examples must be >= 0, got %d", o->num_examples);
    if (o->min_freq < 1) return cli_error(C, "--min-freq must be >= 1, got %d", o->min_freq);
    if (o->max_len < 2 || o->max_len > 4096) return cli_error(C, "--max-len must be in 2..4096, got %d", o->max_len);
    if (o->batch_size < 1 || o->batch_size > 1000000) return cli_error(C, "--batch-size must be in 1..1e6, got %d", o->batch_size);
    if (o->epochs < 1) return cli_error(C, "--epochs must be >= 1, got %d", o->epochs);
    if (o->warmup < 0 || o->warmup > 100000000) return cli_error(C, "--warmup must be in 0..1e8, got %d", o->warmup);
    if (!(o->lr > 0) || o->lr > 100) return cli_error(C, "--lr must be in (0, 100], got %g", o->lr);
    if (!(o->min_lr >= 0 && o->min_lr <= o->lr))
        return cli_error(C, "--min-lr must be in [0, --lr %g], got %g", o->lr, o->min_lr);
    if (!(o->dropout >= 0 && o->dropout < 1)) return cli_error(C, "--dropout must be in [0, 1), got %g", o->dropout);
    if (!(o->label_smoothing >= 0 && o->label_smoothing < 1))
        return cli_error(C, "--label-smoothing must be in [0, 1), got %g", o->label_smoothing);
    if (!(o->grad_clip >= 0)) return cli_error(C, "--grad-clip must be >= 0, got %g", o->grad_clip);
    if (!(o->weight_decay >= 0)) return cli_error(C, "--weight-decay must be >= 0, got %g", o->weight_decay);
    if (!(o->beta1 >= 0 && o->beta1 < 1) || !(o->beta2 >= 0 && o->beta2 < 1))
        return cli_error(C, "--beta1/--beta2 must be in [0,1), got %g / %g", o->beta1, o->beta2);
    if (o->log_every < 0) return cli_error(C, "--log-every must be >= 0, got %d", o->log_every);
    if (cli_check_threads(C, o->threads)) return CLI_EXIT_USAGE;
    if (o->bucket < 0) return cli_error(C, "--bucket must be >= 0, got %d", o->bucket);
    if (o->save_every < 0 || o->keep_last < 0 || o->skip_nonfinite < 0)
        return cli_error(C, "--save-every, --keep-last and --skip-nonfinite must be >= 0");
    if (o->max_steps < 0) return cli_error(C, "--max-steps must be >= 0 (0 = no limit), got %d", o->max_steps);
    if (o->d_model < 2 || o->d_model > 65536) return cli_error(C, "--d-model must be in 2..65536, got %d", o->d_model);
    if (o->n_head < 1 || o->d_model % o->n_head)
        return cli_error(C, "--n-head must divide --d-model (%d), got %d", o->d_model, o->n_head);
    if (o->d_model % 2) return cli_error(C, "--d-model must be even, got %d", o->d_model);
    if (o->n_layer < 1 || o->n_layer > 64) return cli_error(C, "--n-layer must be in 1..64, got %d", o->n_layer);
    if (o->ffn < 1) return cli_error(C, "--ffn must be >= 1, got %d", o->ffn);
    if (o->embed_size < 1 || o->hidden_size < 1) return cli_error(C, "--embed-size and --hidden-size must be >= 1");
    return 0;
}

int mt_resume_config(cli_spec *spec, mt_opts *o, tfm_run_config *stored) {
    if (cli_resume_kind(C, o->resume, "seq2seq")) return CLI_EXIT_USAGE;
    if (tfm_run_config_load(o->resume, stored)) return cli_fail(C, "--resume: %s", tfm_last_error());
    if (!o->out) o->out = o->resume;
    return cli_run_config_resume(C, spec, MT_SAFE, MT_CHANGEABLE, MT_DATA, stored, o->allow_new_data, o->resume);
}

void mt_train_opts(const mt_opts *o, tfm_mt_train_opts *to) {
    tfm_mt_train_opts_default(to);
    to->epochs = o->epochs;
    to->batch_size = o->batch_size;
    to->num_steps = o->max_len;
    to->lr = o->lr;
    to->schedule = !strcmp(o->schedule, "noam") ? TFM_SCHED_NOAM
                   : !strcmp(o->schedule, "cosine") ? TFM_SCHED_COSINE : TFM_SCHED_CONSTANT;
    to->warmup = o->warmup;
    to->min_lr = o->min_lr;
    to->label_smoothing = o->label_smoothing;
    to->loss_norm = strcmp(o->loss_norm, "d2l") ? TFM_LOSS_TOKENS : TFM_LOSS_D2L;
    to->grad_clip = o->grad_clip;
    cli_parallel(C, o->parallel ? o->parallel : "auto", &to->ctl.parallel);   /* checked by mt_check_model */
    cli_precision(C, o->precision ? o->precision : "fp32", &to->ctl.bf16);    /* checked by mt_check_model */
    to->weight_decay = o->weight_decay;
    to->beta1 = o->beta1;
    to->beta2 = o->beta2;
    to->seed = (uint64_t)o->seed;
    to->bucket = o->bucket;
    to->log_every = o->log_every;
    to->profile = o->profile;
    to->max_steps = o->max_steps;
    to->ctl.save_every = o->save_every;
    to->ctl.skip_nonfinite = o->skip_nonfinite;
}

void mt_model_config(const mt_opts *o, tfm_s2s_config *cf) {
    tfm_s2s_config_default(cf);
    snprintf(cf->arch, sizeof cf->arch, "%s", o->arch);
    cf->d_model = o->d_model;
    cf->n_head = o->n_head;
    cf->ffn = o->ffn;
    cf->pre_ln = o->pre_ln;
    cf->max_len = o->pe_len > o->max_len + 1 ? o->pe_len : o->max_len + 1;
    cf->n_layer = o->n_layer;
    cf->embed_size = o->embed_size;
    cf->hidden_size = o->hidden_size;
    cf->dropout = o->dropout;
    cf->pad_len = o->pad_to_max_len ? o->max_len : 0;
    tfm_s2s_config_clear_unused(cf);   /* the flags of another architecture (refused by mt_check if not defaults) */
}

int mt_load_corpus(tfm_parallel_text *p, const char *tsv, const char *src, const char *tgt, int kind, int max_pairs) {
    int rc = tsv ? tfm_parallel_load_tsv(p, tsv, (tfm_tok_kind)kind, max_pairs)
                 : tfm_parallel_load_files(p, src, tgt, (tfm_tok_kind)kind, max_pairs);
    if (rc) return cli_fail(C, "%s", tfm_last_error());
    if (p->n_empty)
        fprintf(stderr, "tfm %s: warning: %s: skipped %d empty line%s (of %d read)\n", C, tsv ? tsv : src, p->n_empty,
                p->n_empty == 1 ? "" : "s", p->n_lines);
    if (p->n == 0) {
        tfm_parallel_text_free(p);
        return cli_error(C, "%s: no sentence pairs", tsv ? tsv : src);
    }
    return 0;
}

int mt_arrays(const tfm_parallel_text *p, const tfm_mt_model *t, int num_steps, tfm_nmt_arrays *a, const char *what,
              int allow_truncation) {
    if (tfm_mt_arrays(p, t, num_steps, a)) return cli_fail(C, "%s", tfm_last_error());
    if (a->n_truncated_src || a->n_truncated_tgt)
        fprintf(stderr, "%s: truncated to --max-len %d: %d source and %d target sentences\n", what, num_steps,
                a->n_truncated_src, a->n_truncated_tgt);
    return mt_check_truncation(p, t, a, what, allow_truncation);
}
