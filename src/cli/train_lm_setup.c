/* train-lm's model and data (src/cli/train_lm.h): loaded from --resume, or built from the flags. */
#include <stdio.h>
#include <string.h>

#include "cli/train_lm.h"
#include "cli/train_run.h"

#define C "train-lm"

void lm_model_free(lm_model *mo) {
    lm_free(&mo->m, &mo->opt, &mo->vocab, mo->bpe, &mo->d);
    mo->bpe = NULL;
}

/* --resume: the checkpoint's model and state; the flags then hold what it trains with (one source of truth), which
 * every stored run.* value must equal */
static int resume_model(const cli_spec *spec, const tfm_run_config *stored, const char *resume, tfm_gpt_config *cfg,
                        const char **attention, tfm_lm_train_state *st, lm_model *mo) {
    int iters = st->iters;
    if (tfm_gpt_load_tok(resume, &mo->m, &mo->vocab, &mo->bpe, &mo->opt, st))
        return cli_fail(C, "--resume: %s", tfm_last_error());
    if (cli_flag_seen(spec, "iters")) st->iters = iters;
    *cfg = mo->m.cfg;
    *attention = cfg->attention == TFM_ATTN_SYNTHESIZER ? "synthesizer" : "causal";
    return cli_run_config_match(C, spec, LM_SAFE, LM_CHANGEABLE, " data ", stored, resume);
}

int lm_setup(const cli_spec *spec, const tfm_run_config *stored, const char *resume, const char *data,
             const char *tokenizer, int vocab_size, float val_frac, tfm_gpt_config *cfg, const char **attention,
             tfm_lm_train_state *st, int quiet, lm_model *mo) {
    memset(mo, 0, sizeof *mo);
    int rc;
    if (resume) {
        if ((rc = resume_model(spec, stored, resume, cfg, attention, st, mo))) return rc;
        if ((rc = lm_load_data(data, tokenizer, vocab_size, val_frac, cfg->block_size, &mo->vocab, &mo->bpe, &mo->d)))
            return rc;
        if (!quiet) fprintf(stderr, "resuming %s at step %d of %d\n", resume, st->iter, st->iters);
        return 0;
    }
    if ((rc = lm_load_data(data, tokenizer, vocab_size, val_frac, cfg->block_size, &mo->vocab, &mo->bpe, &mo->d)))
        return rc;
    cfg->vocab_size = mo->bpe ? mo->bpe->n : mo->d.vocab.n;
    cfg->attention = strcmp(*attention, "synthesizer") ? TFM_ATTN_CAUSAL : TFM_ATTN_SYNTHESIZER;
    if (tfm_gpt_init(&mo->m, cfg)) return cli_error(C, "%s", tfm_last_error());   /* a bad config: the flags' */
    tfm_gpt_init_weights(&mo->m, (uint64_t)st->seed);
    if ((!mo->bpe && tfm_char_vocab_from_string(&mo->vocab, mo->d.vocab.chars)) ||
        tfm_adamw_init(&mo->opt, &mo->m.params, st->beta1, st->beta2, 1e-8f, st->weight_decay))
        return cli_fail(C, "%s", tfm_last_error());
    tfm_lm_train_state_init(st);
    return 0;
}

void lm_print_start(const lm_model *mo, const char *data, const tfm_train_ctl *ctl, int slice) {
    const tfm_gpt_config *c = &mo->m.cfg;
    char par[80], gemm[96];
    fprintf(stderr, "gpt: %d layers, %d heads, %d wide, block %d, vocab %d (%s), %s attention: %zu parameters\n",
            c->n_layer, c->n_head, c->n_embd, c->block_size, c->vocab_size, mo->bpe ? "BPE pieces" : "characters",
            c->attention == TFM_ATTN_SYNTHESIZER ? "synthesizer" : "causal", mo->m.params.total);
    fprintf(stderr, "data: %s: %d train / %d validation tokens; %s; gemm %s\n", data, mo->d.n_train,
            mo->d.n - mo->d.n_train, cli_threads_str(par, sizeof par, ctl->parallel, slice),
            cli_gemm_str(gemm, sizeof gemm, ctl->bf16));
}
