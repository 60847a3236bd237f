/* train-mt, issue 10: --tokenizer bpe / --vocab-size / --bpe-model, --share-embeddings, --init, --max-tokens
 * (flags, checks, and building the fresh translator). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/train_mt.h"
#include "cli/train_run.h"

#define C "train-mt"

int mt_flags_join(const cli_flag *base, int n_base, mt_opts *o, cli_flag *all) {
    cli_flag extra[] = {
        {"tokenizer", FLAG_STR, &o->tokenizer, "word (--preprocess) | bpe (joint subwords, raw text in and out)", 0},
        {"vocab-size", FLAG_INT, &o->vocab_size, "with --tokenizer bpe: pieces of the joint BPE model learned "
                                                 "from the training pairs (0 = 8000)", 0},
        {"bpe-model", FLAG_STR, &o->bpe_model, "with --tokenizer bpe: use this BPE .model (tfm bpe learn, or "
                                               "spm_train --model_type=bpe with tfm's special ids)", 0},
        {"share-embeddings", FLAG_BOOL, &o->share_embeddings,
         "transformer: one matrix for source/target embeddings and the output layer (needs --tokenizer bpe)", 0},
        {"pad-to-max-len", FLAG_BOOL, &o->pad_to_max_len,
         "pad every batch to --max-len, as d2l does (rnn/bahdanau encoders run over the padding; --loss-norm d2l "
         "divides by --max-len); stored in the model, so translate pads sources alike", 0},
        {"init", FLAG_STR, &o->init, "d2l (embeddings N(0,1)) | xavier (every matrix Xavier-uniform)", 0},
        {"max-tokens", FLAG_INT, &o->max_tokens,
         "batches of up to N source and N target tokens incl. padding, length-sorted (0 = --batch-size)", 0},
        {"eval-every", FLAG_INT, &o->valid_every, "also validate every N steps (0 = after each epoch only)", 0},
        {"keep-best", FLAG_BOOL, &o->keep_best, "write MODEL.best.tfm whenever validation BLEU improves", 0},
        {"patience", FLAG_INT, &o->patience, "stop after N validations without a better BLEU (0 = never)", 0},
        {"log-file", FLAG_STR, &o->log_file, "write one JSON object per log line (docs/LOGS.md; tfm plot)", 0},
        {"parallel", FLAG_STR, &o->parallel, "auto | batch (a chunk of the batch per thread) | ops (threads split each op)", 0},
        {"precision", FLAG_STR, &o->precision, "fp32 | bf16 (linear layers' GEMMs with bfloat16 operands, fp32 sums)", 0},
        {"decode-beam", FLAG_INT, &o->decode_beam,
         "beam to store in the model: translate, the library and serve use it by default (0 = none: greedy)", 0},
        {"decode-alpha", FLAG_FLOAT, &o->decode_alpha, "length penalty stored with --decode-beam", 0},
        {"src-lang", FLAG_STR, &o->src_lang, "source language code stored in the model (e.g. de; tfm serve's /languages)", 0},
        {"tgt-lang", FLAG_STR, &o->tgt_lang, "target language code stored in the model (e.g. en)", 0},
        {"preset", FLAG_STR, &o->preset, "d2l | multi30k: defaults for the flags not given (see above)", 0},
        {"allow-truncation", FLAG_BOOL, &o->allow_truncation,
         "train even when --max-len cuts more than 5% of the pairs (else an error)", 0},
    };
    int n = (int)(sizeof extra / sizeof extra[0]);
    memcpy(all, base, sizeof *base * (size_t)n_base);
    memcpy(all + n_base, extra, sizeof extra);
    return n_base + n;
}

int mt_check_model(const mt_opts *o) {
    int par, rc;
    if ((rc = cli_parallel(C, o->parallel ? o->parallel : "auto", &par)) ||
        (rc = cli_precision(C, o->precision ? o->precision : "fp32", &par)))
        return rc;
    int bpe = !strcmp(o->tokenizer, "bpe");
    if (!bpe && strcmp(o->tokenizer, "word")) return cli_error(C, "--tokenizer: unknown '%s' (word, bpe)", o->tokenizer);
    if (!strcmp(o->preprocess, "bpe")) return cli_error(C, "--preprocess: use --tokenizer bpe for subwords");
    if (!bpe && (o->vocab_size || o->bpe_model))
        return cli_error(C, "--%s needs --tokenizer bpe", o->bpe_model ? "bpe-model" : "vocab-size");
    if (o->vocab_size && o->bpe_model) return cli_error(C, "give --vocab-size or --bpe-model, not both");
    if (o->vocab_size < 0 || o->vocab_size > 1000000)
        return cli_error(C, "--vocab-size must be in 1..1000000, got %d", o->vocab_size);
    if (o->share_embeddings && !bpe)
        return cli_error(C, "--share-embeddings needs one joint vocabulary: use it with --tokenizer bpe");
    if (o->share_embeddings && strcmp(o->arch, "transformer"))
        return cli_error(C, "--share-embeddings: only for --arch transformer");
    if (o->decode_beam < 0 || o->decode_beam > 64)
        return cli_error(C, "--decode-beam must be in 1..64 (0 = none), got %d", o->decode_beam);
    if (!(o->decode_alpha >= 0 && o->decode_alpha <= 10))
        return cli_error(C, "--decode-alpha must be in [0, 10], got %g", o->decode_alpha);
    if (o->decode_alpha != 0 && !o->decode_beam) return cli_error(C, "--decode-alpha needs --decode-beam");
    if (o->src_lang && *o->src_lang && !tfm_lang_code_valid(o->src_lang))
        return cli_error(C, "--src-lang: '%s' is not a language code (1 to 15 letters, digits, '-' or '_')", o->src_lang);
    if (o->tgt_lang && *o->tgt_lang && !tfm_lang_code_valid(o->tgt_lang))
        return cli_error(C, "--tgt-lang: '%s' is not a language code (1 to 15 letters, digits, '-' or '_')", o->tgt_lang);
    if (strcmp(o->init, "d2l") && strcmp(o->init, "xavier"))
        return cli_error(C, "--init: unknown '%s' (d2l, xavier)", o->init);
    if (!strcmp(o->init, "xavier") && strcmp(o->arch, "transformer"))
        return cli_error(C, "--init xavier: only for --arch transformer");
    if (o->pad_to_max_len && o->max_tokens)
        return cli_error(C, "--pad-to-max-len and --max-tokens: token budgets are for unpadded batches, give one");
    if (o->max_tokens < 0 || o->max_tokens > 10000000)
        return cli_error(C, "--max-tokens must be in 0..1e7, got %d", o->max_tokens);
    if (o->max_tokens && o->max_tokens < o->max_len)
        return cli_error(C, "--max-tokens must be at least --max-len (%d), got %d", o->max_len, o->max_tokens);
    return mt_check_valid(o);
}

int mt_corpus_kind(const mt_opts *o) {
    return !strcmp(o->tokenizer, "bpe") ? TFM_TOK_BPE : tfm_tok_kind_parse(o->preprocess);
}

/* --bpe-model FILE, or a joint model learned from both sides of the training pairs */
static tfm_bpe *make_bpe(const mt_opts *o, const tfm_parallel_text *p) {
    tfm_bpe *b = calloc(1, sizeof *b);
    if (!b) return cli_error(C, "out of memory"), NULL;
    int rc;
    if (o->bpe_model) {
        rc = tfm_bpe_load(b, o->bpe_model);
    } else {
        const char **lines = malloc(sizeof(char *) * 2 * (size_t)p->n);
        if (!lines) return free(b), cli_error(C, "out of memory"), NULL;
        for (int i = 0; i < p->n; i++) lines[2 * i] = p->src[i].tok[0], lines[2 * i + 1] = p->tgt[i].tok[0];
        tfm_bpe_learn_opts lo;
        tfm_bpe_learn_defaults(&lo);
        if (o->vocab_size) lo.vocab_size = o->vocab_size;
        rc = tfm_bpe_learn_lines(b, lines, 2 * p->n, &lo);
        free(lines);
        if (rc) cli_error(C, "--vocab-size %d: %s", lo.vocab_size, tfm_last_error());
        else fprintf(stderr, "learned a joint BPE model of %d pieces from %d pairs\n", b->n, p->n);
        if (rc) return free(b), NULL;
    }
    if (rc) return cli_fail(C, "--bpe-model: %s", tfm_last_error()), free(b), NULL;
    return b;
}

void mt_model_settings(const mt_opts *o, tfm_mt_model *tr) {
    tr->decode_beam = o->decode_beam;
    tr->decode_alpha = o->decode_alpha;
    snprintf(tr->src_lang, sizeof tr->src_lang, "%s", o->src_lang ? o->src_lang : "");
    snprintf(tr->tgt_lang, sizeof tr->tgt_lang, "%s", o->tgt_lang ? o->tgt_lang : "");
}

int mt_build(const mt_opts *o, const tfm_parallel_text *p, const tfm_mt_train_opts *to, tfm_mt_model *tr,
             tfm_adamw *opt) {
    tfm_s2s_config cf;
    mt_model_config(o, &cf);
    cf.share_embeddings = o->share_embeddings;
    cf.init = strcmp(o->init, "xavier") ? TFM_INIT_D2L : TFM_INIT_XAVIER;
    if (!strcmp(o->tokenizer, "bpe")) {
        tfm_bpe *b = make_bpe(o, p);
        if (!b) return o->bpe_model ? cli_exit_status() : CLI_EXIT_USAGE;   /* a bad model file / --vocab-size */
        if (tfm_mt_model_build_bpe(tr, b, &cf, to->seed))
            return cli_fail(C, "%s%s", o->bpe_model ? "--bpe-model: " : "", tfm_last_error());
    } else if (tfm_mt_model_build(tr, p, mt_corpus_kind(o), o->min_freq, &cf, to->seed)) {
        return cli_fail(C, "%s", tfm_last_error());
    }
    if (tfm_adamw_init(opt, &tr->model->params, to->beta1, to->beta2, to->eps, to->weight_decay))
        return cli_fail(C, "%s", tfm_last_error());
    return 0;
}

int mt_resume(const cli_spec *spec, mt_opts *o, const tfm_run_config *stored, const tfm_mt_train_opts *to,
              tfm_mt_model *tr, tfm_adamw *opt, tfm_mt_progress *prog) {
    if (tfm_mt_resume(o->resume, tr, opt, prog, to)) return cli_fail(C, "--resume: %s", tfm_last_error());
    const tfm_s2s_config *c = &tr->model->cfg;   /* the flags take what the model was built with */
    o->arch = c->arch;
    o->d_model = c->d_model, o->n_head = c->n_head, o->ffn = c->ffn, o->pre_ln = c->pre_ln, o->n_layer = c->n_layer;
    o->embed_size = c->embed_size, o->hidden_size = c->hidden_size, o->dropout = c->dropout;
    o->share_embeddings = c->share_embeddings, o->pad_to_max_len = c->pad_len > 0;
    o->tokenizer = tr->bpe ? "bpe" : "word";
    if (!tr->bpe) o->preprocess = tfm_tok_kind_name((tfm_tok_kind)tr->tok_kind);
    if (c->pad_len && c->pad_len != o->max_len)
        return cli_error(C, "--resume: %s: config.pad_len %d is not the run's --max-len %d (edited or corrupt)",
                         o->resume, c->pad_len, o->max_len);
    return cli_run_config_match(C, spec, MT_SAFE, MT_CHANGEABLE, MT_DATA, stored, o->resume);
}
