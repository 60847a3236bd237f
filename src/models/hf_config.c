/* Hugging Face config.json -> tfm_hf_config (include/tfm/interchange.h): the fields of a GPT-2 or MarianMT
 * config that decide the model's numbers, each bounded and cross-checked here, before anything is built.
 * The file is untrusted; every error is one line naming the file and the field. Fields that do not
 * change the numbers (architectures, id2label, dropout rates, summary_*, ...) are ignored. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "tfm/interchange.h"

typedef struct {
    const tfm_json *root;
    const char *name;        /* the file, for errors */
} cfg_reader;

/* The member `key`, or NULL when absent or null (Hugging Face writes null for "use the default"). */
static const tfm_json *get(const cfg_reader *r, const char *key) {
    const tfm_json *v = tfm_json_get(r->root, key);
    return v && v->type != TFM_JSON_NULL ? v : NULL;
}

/* An integer in lo..hi: key, else its alias (transformers' attribute_map: "hidden_size" for "n_embd" ...);
 * both given must agree. dflt < lo: required. */
static int get_int(const cfg_reader *r, const char *key, const char *alias, int lo, int hi, int dflt, int *out) {
    const tfm_json *v = get(r, key), *a = alias ? get(r, alias) : NULL;
    const char *used = v ? key : alias;
    if (!v) v = a;
    if (!v) {
        if (dflt < lo) return tfm_set_error("%s: '%s' missing (an integer in %d..%d)", r->name, key, lo, hi), -1;
        *out = dflt;
        return 0;
    }
    int x;
    if (tfm_json_int(v, &x) || x < lo || x > hi)
        return tfm_set_error("%s: '%s' must be an integer in %d..%d, got %.40s", r->name, used, lo, hi,
                             v->type == TFM_JSON_NUMBER ? v->text : "a non-number"), -1;
    if (a && v != a) {
        int y;
        if (tfm_json_int(a, &y) || y != x)
            return tfm_set_error("%s: '%s' and '%s' disagree", r->name, key, alias), -1;
    }
    *out = x;
    return 0;
}

static int get_float(const cfg_reader *r, const char *key, float lo, float hi, float dflt, float *out) {
    const tfm_json *v = get(r, key);
    if (!v) return *out = dflt, 0;
    float x;
    if (tfm_json_float(v, &x) || !(x >= lo && x <= hi))
        return tfm_set_error("%s: '%s' must be a number in [%g, %g], got %.40s", r->name, key, lo, hi,
                             v->type == TFM_JSON_NUMBER ? v->text : "a non-number"), -1;
    *out = x;
    return 0;
}

static int get_bool(const cfg_reader *r, const char *key, int dflt, int *out) {
    const tfm_json *v = get(r, key);
    if (!v) return *out = dflt, 0;
    if (v->type != TFM_JSON_TRUE && v->type != TFM_JSON_FALSE)
        return tfm_set_error("%s: '%s' must be true or false", r->name, key), -1;
    *out = v->type == TFM_JSON_TRUE;
    return 0;
}

/* A boolean that must have the value tfm implements (a config that asks for another model is refused). */
static int need_bool(const cfg_reader *r, const char *key, int dflt, int want, const char *why) {
    int b;
    if (get_bool(r, key, dflt, &b)) return -1;
    if (b != want)
        return tfm_set_error("%s: '%s' %s is not supported (%s)", r->name, key, b ? "true" : "false", why), -1;
    return 0;
}

static const char *get_str(const cfg_reader *r, const char *key, const char *dflt) {
    const tfm_json *v = get(r, key);
    if (!v) return dflt;
    if (v->type != TFM_JSON_STRING) return tfm_set_error("%s: '%s' must be a string", r->name, key), NULL;
    return v->text;
}

/* activation_function -> tfm_activation (the names of transformers' ACT2FN that tfm computes). */
static int get_act(const cfg_reader *r, const char *dflt, int *act) {
    const char *s = get_str(r, "activation_function", dflt);
    if (!s) return -1;
    static const struct { const char *name; int act; } acts[] = {
        {"gelu_new", TFM_ACT_GELU}, {"gelu_pytorch_tanh", TFM_ACT_GELU}, {"relu", TFM_ACT_RELU},
        {"swish", TFM_ACT_SILU}, {"silu", TFM_ACT_SILU}, {"gelu", TFM_ACT_GELU_ERF}};
    for (size_t i = 0; i < sizeof acts / sizeof *acts; i++)
        if (!strcmp(s, acts[i].name)) return *act = acts[i].act, 0;
    return tfm_set_error("%s: 'activation_function' '%.40s' is not supported (gelu_new, gelu_pytorch_tanh, gelu, "
                         "relu, swish, silu)", r->name, s), -1;
}

static int parse_gpt2(const cfg_reader *r, tfm_hf_config *c) {
    if (get_int(r, "vocab_size", NULL, 1, 1 << 24, -1, &c->vocab_size) ||
        get_int(r, "n_positions", "max_position_embeddings", 1, 1 << 20, 1024, &c->max_positions) ||
        get_int(r, "n_embd", "hidden_size", 1, 65536, 768, &c->d_model) ||
        get_int(r, "n_layer", "num_hidden_layers", 1, 256, 12, &c->n_layer) ||
        get_int(r, "n_head", "num_attention_heads", 1, 65536, 12, &c->n_head) ||
        get_int(r, "n_inner", NULL, 1, 1 << 20, 4 * c->d_model, &c->ffn) ||
        get_float(r, "layer_norm_epsilon", 1e-12f, 0.5f, 1e-5f, &c->ln_eps) ||
        get_float(r, "resid_pdrop", 0.0f, 0.99f, 0.1f, &c->dropout) || get_act(r, "gelu_new", &c->act) ||
        get_int(r, "eos_token_id", NULL, 0, (1 << 24) - 1, c->vocab_size - 1, &c->eos_id))
        return -1;
    if (c->d_model % c->n_head)
        return tfm_set_error("%s: 'n_head' (%d) must divide 'n_embd' (%d)", r->name, c->n_head, c->d_model), -1;
    if (c->ffn != 4 * c->d_model)
        return tfm_set_error("%s: 'n_inner' %d is not supported (tfm's GPT has 4 * n_embd = %d)", r->name, c->ffn,
                             4 * c->d_model), -1;
    if (c->act != TFM_ACT_GELU)
        return tfm_set_error("%s: 'activation_function' must be gelu_new (tfm's GPT computes the tanh GELU)",
                             r->name), -1;
    if (c->eos_id >= c->vocab_size)
        return tfm_set_error("%s: 'eos_token_id' %d is not below 'vocab_size' %d", r->name, c->eos_id, c->vocab_size),
               -1;
    if (need_bool(r, "scale_attn_weights", 1, 1, "tfm scales by 1/sqrt(head size)") ||
        need_bool(r, "scale_attn_by_inverse_layer_idx", 0, 0, "tfm does not scale by layer") ||
        need_bool(r, "add_cross_attention", 0, 0, "a decoder-only GPT-2") ||
        need_bool(r, "tie_word_embeddings", 1, 1, "tfm's LM head is the token embedding"))
        return -1;
    return 0;
}

/* bad_words_ids: [[id], [id], ...] of single tokens (what MarianMT configs hold: [[pad]]). */
static int get_banned(const cfg_reader *r, tfm_hf_config *c) {
    const tfm_json *v = get(r, "bad_words_ids");
    if (!v) return 0;
    if (v->type != TFM_JSON_ARRAY) return tfm_set_error("%s: 'bad_words_ids' must be a list of lists", r->name), -1;
    if (v->n > TFM_MT_MAX_BANNED)
        return tfm_set_error("%s: 'bad_words_ids' has %d entries, at most %d", r->name, v->n, TFM_MT_MAX_BANNED), -1;
    for (const tfm_json *e = v->child; e; e = e->next) {
        int id;
        if (e->type != TFM_JSON_ARRAY || e->n != 1)
            return tfm_set_error("%s: 'bad_words_ids': only single-token entries are supported", r->name), -1;
        if (tfm_json_int(e->child, &id) || id < 0 || id >= c->tgt_vocab)
            return tfm_set_error("%s: 'bad_words_ids': %.40s is not a token id below %d", r->name,
                                 e->child->type == TFM_JSON_NUMBER ? e->child->text : "a non-number", c->tgt_vocab), -1;
        c->banned[c->n_banned++] = id;
    }
    return 0;
}

static int parse_marian(const cfg_reader *r, tfm_hf_config *c) {
    int enc_layers, dec_layers, enc_heads, dec_heads, enc_ffn, dec_ffn, share;
    if (get_int(r, "vocab_size", NULL, TFM_N_RESERVED, 1 << 24, -1, &c->vocab_size) ||
        get_int(r, "d_model", NULL, 2, 65536, 1024, &c->d_model) ||
        get_int(r, "encoder_layers", NULL, 1, 64, 12, &enc_layers) ||
        get_int(r, "decoder_layers", NULL, 1, 64, 12, &dec_layers) ||
        get_int(r, "encoder_attention_heads", NULL, 1, 1024, 16, &enc_heads) ||
        get_int(r, "decoder_attention_heads", NULL, 1, 1024, 16, &dec_heads) ||
        get_int(r, "encoder_ffn_dim", NULL, 1, 1 << 20, 4096, &enc_ffn) ||
        get_int(r, "decoder_ffn_dim", NULL, 1, 1 << 20, 4096, &dec_ffn) ||
        get_int(r, "max_position_embeddings", NULL, 1, 1 << 20, 1024, &c->max_positions) ||
        get_float(r, "dropout", 0.0f, 0.99f, 0.1f, &c->dropout) || get_act(r, "gelu", &c->act) ||
        get_bool(r, "scale_embedding", 0, &c->scale_embedding) ||
        get_bool(r, "share_encoder_decoder_embeddings", 1, &share))
        return -1;
    c->n_layer = enc_layers, c->n_head = enc_heads, c->ffn = enc_ffn, c->tgt_vocab = c->vocab_size;
    c->share_embeddings = share;
    if (!share && get_int(r, "decoder_vocab_size", NULL, TFM_N_RESERVED, 1 << 24, c->vocab_size, &c->tgt_vocab))
        return -1;
    if (share && get(r, "decoder_vocab_size") &&
        (get_int(r, "decoder_vocab_size", NULL, c->vocab_size, c->vocab_size, 0, &c->tgt_vocab)))
        return -1;
    /* tfm's Transformer has one layer count, head count and FFN width for both stacks */
    if (dec_layers != enc_layers || dec_heads != enc_heads || dec_ffn != enc_ffn)
        return tfm_set_error("%s: encoder and decoder differ (layers %d/%d, heads %d/%d, ffn %d/%d): tfm's Transformer "
                             "has one size for both", r->name, enc_layers, dec_layers, enc_heads, dec_heads, enc_ffn,
                             dec_ffn), -1;
    if (c->d_model % 2 || c->d_model % c->n_head)
        return tfm_set_error("%s: 'd_model' (%d) must be even and divisible by 'encoder_attention_heads' (%d)", r->name,
                             c->d_model, c->n_head), -1;
    if ((int64_t)c->max_positions * c->d_model > (int64_t)1 << 26)
        return tfm_set_error("%s: 'max_position_embeddings' * 'd_model' must be <= 2^26, got %d * %d", r->name,
                             c->max_positions, c->d_model), -1;
    int lim = c->vocab_size < c->tgt_vocab ? c->vocab_size : c->tgt_vocab;
    if (get_int(r, "pad_token_id", NULL, 0, lim - 1, -1, &c->pad_id) ||
        get_int(r, "eos_token_id", NULL, 0, lim - 1, -1, &c->eos_id) ||
        get_int(r, "decoder_start_token_id", NULL, 0, c->tgt_vocab - 1, c->pad_id, &c->bos_id) ||
        get_int(r, "num_beams", NULL, 1, 64, 1, &c->num_beams) ||
        get_int(r, "max_length", NULL, 2, 1 << 20, 20, &c->max_length) || get_banned(r, c))
        return -1;
    c->forced_eos_id = -1;   /* none unless given */
    if (get(r, "forced_eos_token_id") &&
        get_int(r, "forced_eos_token_id", NULL, 0, c->tgt_vocab - 1, 0, &c->forced_eos_id))
        return -1;
    /* BART's options that Marian's modeling code ignores but a config could set: refused if they ask for more */
    if (need_bool(r, "normalize_before", 0, 0, "MarianMT is post-LN") ||
        need_bool(r, "add_final_layer_norm", 0, 0, "MarianMT has no final LayerNorm") ||
        need_bool(r, "normalize_embedding", 0, 0, "MarianMT has no embedding LayerNorm") ||
        need_bool(r, "static_position_embeddings", 1, 1, "MarianMT's positions are sinusoidal") ||
        need_bool(r, "tie_word_embeddings", 1, 1, "the output layer is the target embedding"))
        return -1;
    return 0;
}

int tfm_hf_config_parse(tfm_hf_config *c, const char *json, size_t len, const char *name) {
    memset(c, 0, sizeof *c);
    if (len > TFM_HF_MAX_CONFIG)
        return tfm_set_error("%s: %zu bytes, more than a config.json may have (%d)", name, len, TFM_HF_MAX_CONFIG), -1;
    tfm_json *root = tfm_json_parse(json, len);
    if (!root) return tfm_prefix_error("%s: ", name);
    cfg_reader r = {root, name};
    int rc = -1;
    const tfm_json *type = tfm_json_get(root, "model_type");
    if (root->type != TFM_JSON_OBJECT) tfm_set_error("%s: not a JSON object", name);
    else if (!type || type->type != TFM_JSON_STRING) tfm_set_error("%s: 'model_type' missing (a string)", name);
    else if (!strcmp(type->text, "gpt2")) c->kind = TFM_HF_GPT2, rc = parse_gpt2(&r, c);
    else if (!strcmp(type->text, "marian")) c->kind = TFM_HF_MARIAN, rc = parse_marian(&r, c);
    else tfm_set_error("%s: 'model_type' '%.40s' is not supported (gpt2, marian)", name, type->text);
    tfm_json_free(root);
    return rc;
}
