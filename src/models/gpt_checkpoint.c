/* A GPT's checkpoint at the model floor (entry names in include/tfm/checkpoint.h): its config, tokenizer and
 * parameters, and tfm_lm, a GPT with whichever tokenizer it has. The optimizer and training state are the
 * training floor's (src/train/gpt_checkpoint.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tfm/checkpoint.h"
#include "tfm/gpt.h"
#include "tfm/tokenizers.h"

int tfm_gpt_put(tfm_container *c, const tfm_gpt *m, const tfm_char_vocab *v, const tfm_bpe *bpe) {
    tfm_gpt_put_config(c, &m->cfg);
    if (bpe) {
        tfm_container_add_str(c, "tokenizer.kind", "bpe");
        if (tfm_bpe_to_container(bpe, c, NULL)) return -1;
    } else {
        tfm_container_add_str(c, "tokenizer.chars", v->chars);
    }
    tfm_ckpt_put_params(c, &m->params);
    return 0;
}

int tfm_gpt_model_save(const tfm_gpt *m, const tfm_char_vocab *v, const tfm_bpe *bpe, const char *path) {
    tfm_container c;
    tfm_container_init(&c);
    int rc = tfm_gpt_put(&c, m, v, bpe) ? -1 : tfm_container_save(&c, path);
    tfm_container_free(&c);
    return rc;
}

int tfm_gpt_model_load(tfm_gpt *m, tfm_char_vocab *v, tfm_bpe **bpe, const char *path) {
    tfm_container c;
    if (bpe) *bpe = NULL;
    if (tfm_container_load_deferred(&c, path, "adam.", "param.")) return tfm_container_free(&c), -1;
    int rc = tfm_gpt_get_model(m, v, bpe, &c, path);
    tfm_container_free(&c);
    return rc ? tfm_error_in_data() : 0;
}

/* tokenizer.chars, the character vocabulary of vocab_size characters (a checkpoint with another tokenizer,
 * an imported GPT-2, is named as such) */
static int get_chars(const tfm_container *cp, const char *path, tfm_char_vocab *v, int vocab_size) {
    const char *kind = tfm_container_get(cp, "tokenizer.kind") ? tfm_container_str(cp, "tokenizer.kind") : NULL;
    if (kind && !tfm_container_get(cp, "tokenizer.chars"))
        return tfm_set_error("%s: the model's tokenizer is '%.40s', not a character vocabulary", path, kind), -1;
    const char *chars = tfm_container_str(cp, "tokenizer.chars");
    if (!chars) return -1;
    if (tfm_char_vocab_from_string(v, chars)) return tfm_prefix_error("%s: bad tokenizer: ", path);
    if (v->n != vocab_size) {
        tfm_set_error("%s: tokenizer has %d characters but config.vocab_size is %d", path, v->n, vocab_size);
        tfm_char_vocab_free(v);
        return -1;
    }
    return 0;
}

/* tokenizer.kind "bpe": the model of tokenizer.bpe into *bpe, its size checked against config.vocab_size */
static int get_bpe(const tfm_container *cp, const char *path, int vocab_size, tfm_bpe **bpe) {
    if (!bpe)
        return tfm_set_error("%s: a BPE language model (tokenizer.kind 'bpe'): this reader takes character models "
                             "only (use tfm_gpt_load_tok)", path), -1;
    tfm_bpe *b = calloc(1, sizeof *b);
    if (!b) return tfm_set_error_kind(TFM_ERR_NOMEM, "%s: out of memory", path), -1;
    if (tfm_bpe_from_container(b, cp, NULL)) return free(b), tfm_prefix_error("%s: bad tokenizer: ", path);
    if (b->n != vocab_size || !b->byte_fallback) {
        tfm_set_error("%s: tokenizer.bpe has %d pieces%s but config.vocab_size is %d", path, b->n,
                      b->byte_fallback ? "" : " and no byte fallback", vocab_size);
        tfm_bpe_free(b), free(b);
        return -1;
    }
    *bpe = b;
    return 0;
}

int tfm_gpt_get_model(tfm_gpt *m, tfm_char_vocab *v, tfm_bpe **bpe, const tfm_container *cp, const char *path) {
    int rc = -1;
    if (v) memset(v, 0, sizeof *v);
    if (bpe) *bpe = NULL;
    const char *kind = tfm_container_str(cp, "meta.kind");
    if (!kind) goto done;
    if (strcmp(kind, "gpt")) {
        if (!strcmp(kind, "seq2seq"))
            tfm_set_error("%s: is a translation model (train-mt; meta.kind 'seq2seq'), not a GPT language model: use "
                          "tfm translate, or tfm train-mt --resume", path);
        else
            tfm_set_error("%s: is a '%.40s' checkpoint, not a GPT language model", path, kind);
        goto done;
    }
    tfm_gpt_config cfg = {0};
    const char *attn = tfm_container_str(cp, "config.attention");
    if (tfm_container_int(cp, "config.vocab_size", &cfg.vocab_size) ||
        tfm_container_int(cp, "config.block_size", &cfg.block_size) ||
        tfm_container_int(cp, "config.n_layer", &cfg.n_layer) || tfm_container_int(cp, "config.n_head", &cfg.n_head) ||
        tfm_container_int(cp, "config.n_embd", &cfg.n_embd) || tfm_container_float(cp, "config.dropout", &cfg.dropout) ||
        !attn)
        goto done;
    if (strcmp(attn, "synthesizer") && strcmp(attn, "causal")) {
        tfm_set_error("%s: config.attention must be causal or synthesizer, got '%.40s'", path, attn);
        goto done;
    }
    cfg.attention = !strcmp(attn, "synthesizer") ? TFM_ATTN_SYNTHESIZER : TFM_ATTN_CAUSAL;
    if (tfm_container_get(cp, "config.ln_eps") && tfm_container_float(cp, "config.ln_eps", &cfg.ln_eps)) goto done;
    if (tfm_gpt_config_check(&cfg)) {
        tfm_prefix_error("%s: bad config: ", path);
        goto done;
    }
    if (v) {   /* v NULL: the model only, whatever its tokenizer (an imported GPT-2's is read by tfm_lm_load) */
        const tfm_entry *tk = tfm_container_get(cp, "tokenizer.kind");
        const char *tok_kind = tk ? tfm_container_str(cp, "tokenizer.kind") : "char";
        if (!tok_kind) goto done;
        if (strcmp(tok_kind, "char") && strcmp(tok_kind, "bpe") && strcmp(tok_kind, "gpt2")) {
            tfm_set_error("%s: tokenizer.kind must be char, bpe or gpt2, got '%.40s'", path, tok_kind);
            goto done;
        }
        if (!strcmp(tok_kind, "bpe") ? get_bpe(cp, path, cfg.vocab_size, bpe) : get_chars(cp, path, v, cfg.vocab_size))
            goto done;
    }
    if (tfm_ckpt_check_param_budget(cp, tfm_gpt_n_params(&cfg), path)) {
        if (v) tfm_char_vocab_free(v);
        goto done;
    }
    if (tfm_gpt_init(m, &cfg)) {   /* out of memory (the config was checked above) */
        tfm_prefix_error("%s: ", path);
        if (v) tfm_char_vocab_free(v);
        goto done;
    }
    if (tfm_ckpt_get_params(cp, &m->params, path)) goto fail_model;
    rc = 0;
    goto done;
fail_model:
    tfm_gpt_free(m);
    if (v) tfm_char_vocab_free(v);
done:
    if (rc && bpe && *bpe) tfm_bpe_free(*bpe), free(*bpe), *bpe = NULL;
    return rc;
}

/* ---------------------------------------------------------------- a GPT with whichever tokenizer */

/* tokenizer.kind "gpt2": the byte-level BPE of an imported GPT-2; its ids must be the model's */
static int get_gpt2(tfm_lm *lm, const tfm_container *c, const char *path) {
    const tfm_entry *v = tfm_container_get(c, "tokenizer.gpt2.vocab");
    const tfm_entry *m = tfm_container_get(c, "tokenizer.gpt2.merges");
    if (!v || !m || v->dtype != TFM_DT_BYTES || m->dtype != TFM_DT_BYTES)
        return tfm_set_error("%s: tokenizer.gpt2.vocab / .merges missing (tokenizer.kind 'gpt2')", path), -1;
    char vn[600], mn[600];
    snprintf(vn, sizeof vn, "%s: tokenizer.gpt2.vocab", path);
    snprintf(mn, sizeof mn, "%s: tokenizer.gpt2.merges", path);
    lm->gpt2 = tfm_gpt2_bpe_from_bytes(v->data, v->nbytes, m->data, m->nbytes, vn, mn);
    if (!lm->gpt2) return -1;
    if (tfm_gpt2_bpe_n_vocab(lm->gpt2) > lm->model.cfg.vocab_size)
        return tfm_set_error("%s: has ids up to %d but config.vocab_size is %d", vn, tfm_gpt2_bpe_n_vocab(lm->gpt2) - 1,
                             lm->model.cfg.vocab_size), -1;
    lm->eos = tfm_gpt2_bpe_id(lm->gpt2, "<|endoftext|>");
    return 0;
}

int tfm_lm_get(tfm_lm *lm, const tfm_container *c, const char *path) {
    memset(lm, 0, sizeof *lm);
    lm->eos = -1;
    const char *kind = tfm_container_get(c, "tokenizer.kind") ? tfm_container_str(c, "tokenizer.kind") : NULL;
    int gpt2 = kind && !strcmp(kind, "gpt2");
    int rc = tfm_gpt_get_model(&lm->model, gpt2 ? NULL : &lm->chars, NULL, c, path);
    if (!rc && gpt2 && get_gpt2(lm, c, path)) {
        tfm_gpt2_bpe_free(lm->gpt2);
        tfm_gpt_free(&lm->model);
        rc = -1;
    }
    return rc;
}

int tfm_lm_load(tfm_lm *lm, const char *path) {
    tfm_container c;
    memset(lm, 0, sizeof *lm);
    if (tfm_container_load_deferred(&c, path, "adam.", "param.")) return tfm_container_free(&c), -1;
    int rc = tfm_lm_get(lm, &c, path);
    tfm_container_free(&c);
    return rc ? tfm_error_in_data() : 0;
}

void tfm_lm_free(tfm_lm *lm) {
    if (lm->gpt2) tfm_gpt2_bpe_free(lm->gpt2);
    else tfm_char_vocab_free(&lm->chars);
    tfm_gpt_free(&lm->model);
    memset(lm, 0, sizeof *lm);
}

int *tfm_lm_encode(tfm_lm *lm, const char *text, size_t len, int *n) {
    return lm->gpt2 ? tfm_gpt2_bpe_encode(lm->gpt2, text, len, n) : tfm_char_encode(&lm->chars, text, len, n);
}

const char *tfm_lm_token_bytes(const tfm_lm *lm, int id, char buf[4], size_t *len) {
    if (lm->gpt2) return (const char *)tfm_gpt2_bpe_token_bytes(lm->gpt2, id, len);
    if (id < 0 || id >= lm->chars.n) return NULL;
    *len = (size_t)tfm_utf8_encode(lm->chars.cps[id], buf);
    return buf;
}
