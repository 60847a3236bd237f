/* A translation run's data and model: the corpora (warning on skipped empty lines), a fresh translator (word
 * vocabularies, or a joint BPE model learned from the pairs / read from --bpe-model) or the resumed one, the
 * padded arrays with the truncation guard, and --dump-data. */
#include <stdlib.h>
#include <string.h>

#include "train/run_mt.h"

static int nomem(void) { return tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory"), -1; }

static int load_corpus(mt_run *x, tfm_parallel_text *p, const char *tsv, const char *src, const char *tgt, int max) {
    int rc = tsv ? tfm_parallel_load_tsv(p, tsv, (tfm_tok_kind)x->kind, max)
                 : tfm_parallel_load_files(p, src, tgt, (tfm_tok_kind)x->kind, max);
    if (rc) return -1;
    if (p->n_empty)
        mt_say(x, "tfm train-mt: warning: %s: skipped %d empty line%s (of %d read)", tsv ? tsv : src, p->n_empty,
               p->n_empty == 1 ? "" : "s", p->n_lines);
    if (p->n == 0) {
        tfm_parallel_text_free(p);
        memset(p, 0, sizeof *p);
        return tfm_set_error_kind(TFM_ERR_ARG, "%s: no sentence pairs", tsv ? tsv : src), -1;
    }
    return 0;
}

/* --bpe-model FILE, or a joint model learned from both sides of the training pairs */
static tfm_bpe *make_bpe(mt_run *x) {
    const tfm_mt_run_opts *o = x->o;
    const tfm_parallel_text *p = &x->ptrain;
    tfm_bpe *b = calloc(1, sizeof *b);
    if (!b) return nomem(), NULL;
    if (o->bpe_model) {
        if (!tfm_bpe_load(b, o->bpe_model)) return b;
        return free(b), tfm_prefix_error("--bpe-model: "), NULL;
    }
    const char **lines = malloc(sizeof(char *) * 2 * (size_t)p->n);
    if (!lines) return free(b), nomem(), NULL;
    for (int i = 0; i < p->n; i++) lines[2 * i] = p->src[i].tok[0], lines[2 * i + 1] = p->tgt[i].tok[0];
    tfm_bpe_learn_opts lo;
    tfm_bpe_learn_opts_default(&lo);
    if (o->vocab_size) lo.vocab_size = o->vocab_size;
    int rc = tfm_bpe_learn_lines(b, lines, 2 * p->n, &lo);
    free(lines);
    if (rc) {
        char m[600];
        snprintf(m, sizeof m, "%s", tfm_last_error());
        return free(b), tfm_set_error_kind(TFM_ERR_ARG, "--vocab-size %d: %s", lo.vocab_size, m), NULL;
    }
    mt_say(x, "learned a joint BPE model of %d pieces from %d pairs", b->n, p->n);
    return b;
}

static int build_model(mt_run *x) {
    const tfm_mt_run_opts *o = x->o;
    tfm_mt_config cf;
    mt_model_config(o, &cf);
    if (!strcmp(o->tokenizer, "bpe")) {
        tfm_bpe *b = make_bpe(x);
        if (!b) return -1;
        if (tfm_mt_model_build_bpe(&x->tr, b, &cf, x->to.seed))
            return o->bpe_model ? tfm_prefix_error("--bpe-model: ") : -1;
    } else if (tfm_mt_model_build(&x->tr, &x->ptrain, x->kind, o->min_freq, &cf, x->to.seed)) {
        return -1;
    }
    if (tfm_adamw_init(&x->opt, &x->tr.model->params, x->to.beta1, x->to.beta2, x->to.eps, x->to.weight_decay))
        return -1;
    return x->to.ema_decay > 0 ? tfm_adamw_ema_init(&x->opt, &x->tr.model->params, x->to.ema_decay) : 0;
}

int mt_resume_model(mt_run *x) {
    tfm_mt_run_opts *o = x->o;
    if (tfm_mt_resume(&x->tr, &x->opt, &x->prog, &x->to, o->resume)) return tfm_prefix_error("--resume: ");
    const tfm_mt_config *c = &x->tr.model->cfg;   /* the options take what the model was built with */
    o->arch = c->arch;
    o->d_model = c->d_model, o->n_head = c->n_head, o->ffn = c->ffn, o->pre_ln = c->pre_ln, o->n_layer = c->n_layer;
    o->embed_size = c->embed_size, o->hidden_size = c->hidden_size, o->dropout = c->dropout;
    o->attention_dropout = c->attention_dropout, o->activation_dropout = c->activation_dropout;
    o->share_embeddings = c->share_embeddings, o->pad_to_max_len = c->pad_len > 0;
    o->tokenizer = x->tr.bpe ? "bpe" : "word";
    if (!x->tr.bpe) o->preprocess = tfm_tok_kind_name((tfm_tok_kind)x->tr.tok_kind);
    if (c->pad_len && c->pad_len != o->max_len)
        return tfm_set_error_kind(TFM_ERR_ARG, "--resume: %s: config.pad_len %d is not the run's --max-len %d (edited or "
                                  "corrupt)", o->resume, c->pad_len, o->max_len), -1;
    int n;
    const tfm_field *f = mt_fields(&n);
    return tfm_run_config_match(f, n, o, x->given, &x->stored, o->resume) ? mt_arg_error() : 0;
}

/* the length (tokens incl. <eos>) that keeps 99% of the pairs whole, from arrays built at the longest --max-len */
static int length_p99(const tfm_parallel_text *p, const tfm_mt_model *t) {
    tfm_mt_corpus all = {0};
    if (tfm_mt_corpus_from_text(p, t, 4096, &all)) return 0;
    int hist[4097] = {0}, need = (int)(0.99 * all.n + 0.999), seen = 0, len = 0;
    for (int i = 0; i < all.n; i++) {
        int l = all.src_valid[i] > all.tgt_valid[i] ? all.src_valid[i] : all.tgt_valid[i];
        hist[l < 4096 ? l : 4096]++;
    }
    while (len < 4096 && seen < need) seen += hist[++len];
    tfm_mt_corpus_free(&all);
    return len;
}

/* More than MT_TRUNCATION_LIMIT of the pairs cut to --max-len: an error naming the length that keeps 99% of them
 * and the flags; with --allow-truncation a loud warning. */
static int check_truncation(mt_run *x, const tfm_parallel_text *p, const tfm_mt_corpus *a, const char *what) {
    int cut = a->n_truncated_src > a->n_truncated_tgt ? a->n_truncated_src : a->n_truncated_tgt;
    if (a->n == 0 || cut <= MT_TRUNCATION_LIMIT * a->n) return 0;
    int p99 = length_p99(p, &x->tr);
    char hint[64] = "";
    if (p99 > a->num_steps) snprintf(hint, sizeof hint, " (--max-len %d keeps 99%% whole)", p99);
    if (!x->o->allow_truncation)
        return tfm_set_error_kind(TFM_ERR_ARG, "%s: --max-len %d would cut %d of %d %s sentences (%.0f%%, more than "
                                  "%.0f%%): raise --max-len%s, or give --allow-truncation to train on the cut pairs",
                                  what, a->num_steps, cut, a->n, a->n_truncated_src >= a->n_truncated_tgt ? "source"
                                  : "target", 100.0 * cut / a->n, 100 * MT_TRUNCATION_LIMIT, hint), -1;
    mt_say(x, "tfm train-mt: WARNING: %s: --max-len %d cuts %d of %d sentences (%.0f%%): --allow-truncation given; "
           "raise --max-len%s to train on whole sentences", what, a->num_steps, cut, a->n, 100.0 * cut / a->n, hint);
    return 0;
}

static int arrays(mt_run *x, const tfm_parallel_text *p, tfm_mt_corpus *a, const char *what) {
    int num_steps = x->o->max_len;
    if (tfm_mt_corpus_from_text(p, &x->tr, num_steps, a)) return -1;
    if (a->n_truncated_src || a->n_truncated_tgt)
        mt_say(x, "%s: truncated to --max-len %d: %d source and %d target sentences", what, num_steps,
               a->n_truncated_src, a->n_truncated_tgt);
    return check_truncation(x, p, a, what);
}

int mt_load_data(mt_run *x) {
    const tfm_mt_run_opts *o = x->o;
    x->kind = o->resume ? x->tr.tok_kind : !strcmp(o->tokenizer, "bpe") ? TFM_TOK_BPE : tfm_tok_kind_parse(o->preprocess);
    x->have_valid = o->valid_src != NULL;
    if (load_corpus(x, &x->ptrain, o->tsv, o->src, o->tgt, o->num_examples) ||
        (x->have_valid && load_corpus(x, &x->pvalid, NULL, o->valid_src, o->valid_tgt, 0)))
        return -1;
    if (!o->resume && build_model(x)) return -1;
    if (arrays(x, &x->ptrain, &x->atrain, "train") || (x->have_valid && arrays(x, &x->pvalid, &x->avalid, "valid")))
        return -1;
    x->tr.decode_beam = o->decode_beam, x->tr.decode_alpha = o->decode_alpha;   /* stored with the model */
    snprintf(x->tr.src_lang, sizeof x->tr.src_lang, "%s", o->src_lang ? o->src_lang : "");
    snprintf(x->tr.tgt_lang, sizeof x->tr.tgt_lang, "%s", o->tgt_lang ? o->tgt_lang : "");
    return 0;
}

/* tfm_mt_train_opts.epoch_data for --bpe-dropout: the epoch's segmentation of the training pairs, in place */
int mt_bpe_dropout_epoch(int epoch, void *user) {
    mt_run *x = user;
    tfm_mt_corpus *a = &x->atrain;
    if (!x->bpe_enc) {   /* the first epoch of this process: one encoder per thread, kept to the end of the run */
        x->n_bpe_enc = tfm_get_threads();
        if (!(x->bpe_enc = calloc((size_t)x->n_bpe_enc, sizeof *x->bpe_enc))) return nomem();
        for (int i = 0; i < x->n_bpe_enc; i++)
            if (!(x->bpe_enc[i] = tfm_bpe_encoder_new())) return -1;
    }
    if (tfm_mt_corpus_bpe_dropout(&x->ptrain, &x->tr, x->o->bpe_dropout, x->to.seed, epoch, x->bpe_enc, x->n_bpe_enc, a))
        return -1;
    if (!x->bpe_dropout_said && (a->n_truncated_src || a->n_truncated_tgt))
        mt_say(x, "--bpe-dropout %g: epoch %d's segmentation cuts %d source and %d target sentences to --max-len %d "
               "(said once)", x->o->bpe_dropout, epoch + 1, a->n_truncated_src, a->n_truncated_tgt, a->num_steps);
    x->bpe_dropout_said |= a->n_truncated_src || a->n_truncated_tgt;
    return 0;
}

/* ---------------------------------------------------------------- --dump-data */
typedef struct {
    const tfm_toklist *l;
    int n;
} tok_lines;

static int write_tokens(FILE *f, const void *ctx) {   /* one sentence a line, tokens separated by spaces */
    const tok_lines *t = ctx;
    for (int i = 0; i < t->n; i++) {
        for (int k = 0; k < t->l[i].n; k++) fprintf(f, k ? " %s" : "%s", t->l[i].tok[k]);
        fputc('\n', f);
    }
    return !ferror(f);
}

static int write_line(FILE *f, const void *s) { return fputs(s, f) >= 0 && fputc('\n', f) != EOF; }

int mt_dump(mt_run *x) {
    char path[4200];
    int rc = 0;
    for (int i = 0; i < 6 && !rc; i++) {   /* each file written atomically (tfm_save_atomic) */
        const tfm_parallel_text *p = i < 2 ? &x->ptrain : x->have_valid ? &x->pvalid : NULL;
        if (i < 4 && !p) continue;
        snprintf(path, sizeof path, "%s.%s", x->o->dump_data, MT_DUMP_SFX[i]);
        if (i < 4) {
            tok_lines tl = {i % 2 ? p->tgt : p->src, p->n};
            rc = tfm_save_atomic(path, write_tokens, &tl);
        } else {
            char *v = tfm_vocab_serialize(i == 4 ? &x->tr.src_vocab : &x->tr.tgt_vocab);
            rc = v ? tfm_save_atomic(path, write_line, v) : nomem();
            free(v);
        }
    }
    if (rc) return tfm_prefix_error("--dump-data: ");
    mt_say(x, "wrote %s.*", x->o->dump_data);
    return 0;
}
