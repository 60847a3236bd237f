/* The generic EncoderDecoder pieces: config, dispatch on the architecture name, teacher-forced forward,
 * and translator checkpoints (include/tfm/seq2seq.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tfm/rnn.h"
#include "tfm/seq2seq.h"

void tfm_mt_config_default(tfm_mt_config *c) {
    memset(c, 0, sizeof *c);
    snprintf(c->arch, sizeof c->arch, "transformer");
    c->d_model = 32;
    c->n_head = 4;
    c->ffn = 64;
    c->n_layer = 2;
    c->max_len = 1000;
    c->embed_size = 32;
    c->hidden_size = 32;
    c->dropout = 0.2f;
    c->attention_dropout = -1.0f;   /* as dropout */
}

/* The fields an architecture does not use: the Transformer's (width, heads, FFN, pre-LN, positions, tied
 * embeddings, init) for the GRU models, and the GRU's (embedding and hidden size) for the Transformer. */
#define TRANSFORMER_ONLY(X) X(d_model) X(n_head) X(ffn) X(pre_ln) X(max_len) X(share_embeddings) X(init)
#define GRU_ONLY(X) X(embed_size) X(hidden_size)

void tfm_mt_config_clear_unused(tfm_mt_config *c) {
    tfm_mt_config d;
    tfm_mt_config_default(&d);
#define CLEAR(f) c->f = d.f;
    if (!strcmp(c->arch, "transformer")) { GRU_ONLY(CLEAR) }
    else if (!strcmp(c->arch, "rnn") || !strcmp(c->arch, "bahdanau")) { TRANSFORMER_ONLY(CLEAR) }
#undef CLEAR
}

/* An unused field must hold its default: anything else would be carried into every checkpoint, resume and
 * export of the model while meaning nothing (an edited or mistyped value goes unnoticed). */
static int check_unused(const tfm_mt_config *c) {
    tfm_mt_config d;
    tfm_mt_config_default(&d);
#define UNUSED(f)                                                                                                \
    if (c->f != d.f)                                                                                             \
        return tfm_set_error("config %s must be %d, the default: arch %s does not use it, got %d", #f, d.f, c->arch, \
                             c->f), -1;
    if (!strcmp(c->arch, "transformer")) { GRU_ONLY(UNUSED) }
    else { TRANSFORMER_ONLY(UNUSED) }
#undef UNUSED
    return 0;
}

/* attention_dropout (-1 = dropout, or [0,1)) and activation_dropout ([0,1)); only the Transformer has them. */
static int check_regularisers(const tfm_mt_config *c) {
    if (!(c->attention_dropout == -1.0f || (c->attention_dropout >= 0 && c->attention_dropout < 1)))
        return tfm_set_error("config attention_dropout must be -1 (= dropout) or in [0,1), got %g", c->attention_dropout), -1;
    if (!(c->activation_dropout >= 0 && c->activation_dropout < 1))
        return tfm_set_error("config activation_dropout must be in [0,1), got %g", c->activation_dropout), -1;
    if (strcmp(c->arch, "transformer") && (c->attention_dropout != -1.0f || c->activation_dropout != 0))
        return tfm_set_error("config attention_dropout / activation_dropout: arch %s does not use them (they must be "
                             "-1 and 0, the defaults)", c->arch), -1;
    return 0;
}

float tfm_mt_attention_dropout(const tfm_mt_config *c) {
    return c->attention_dropout < 0 ? c->dropout : c->attention_dropout;
}

int tfm_mt_config_check(const tfm_mt_config *c) {
#define RANGE(f, lo, hi)                                                                                  \
    if (c->f < (lo) || c->f > (hi))                                                                       \
        return tfm_set_error("config %s must be in %d..%d, got %d", #f, (int)(lo), (int)(hi), c->f), -1;
    RANGE(src_vocab, TFM_N_RESERVED, 1 << 24);
    RANGE(tgt_vocab, TFM_N_RESERVED, 1 << 24);
    RANGE(n_layer, 1, 64);
    if (!strcmp(c->arch, "transformer")) {
        RANGE(d_model, 2, 65536);
        RANGE(n_head, 1, 1024);
        RANGE(ffn, 1, 1 << 20);
        RANGE(max_len, 2, 1 << 20);   /* a <bos> and one output token */
        RANGE(pre_ln, 0, 1);
        if (c->d_model % c->n_head)
            return tfm_set_error("config d_model (%d) must be divisible by n_head (%d)", c->d_model, c->n_head), -1;
        if (c->d_model % 2)
            return tfm_set_error("config d_model must be even (positional encoding), got %d", c->d_model), -1;
        if ((int64_t)c->max_len * c->d_model > (int64_t)1 << 26)   /* the positional-encoding table */
            return tfm_set_error("config max_len * d_model must be <= 2^26, got %d * %d", c->max_len, c->d_model),
                   -1;
        RANGE(share_embeddings, 0, 1);
        RANGE(init, 0, 1);
        RANGE(attn_bias, 0, 1);
        RANGE(ffn_act, 0, 3);
        RANGE(pos_halves, 0, 1);
        RANGE(no_embed_scale, 0, 1);
        RANGE(gen_beam, 0, 64);
        RANGE(gen_max_len, 0, 1 << 20);
        if (c->share_embeddings && c->src_vocab != c->tgt_vocab)
            return tfm_set_error("config share_embeddings needs one joint vocabulary, got %d source and %d target "
                                 "tokens", c->src_vocab, c->tgt_vocab), -1;
    } else if (!strcmp(c->arch, "rnn") || !strcmp(c->arch, "bahdanau")) {
        RANGE(embed_size, 1, 65536);
        RANGE(hidden_size, 1, 65536);
        RANGE(n_layer, 1, TFM_GRU_MAX_LAYERS);
    } else {
        return tfm_set_error("unknown architecture '%.20s' (transformer, rnn, bahdanau)", c->arch), -1;
    }
    RANGE(pad_len, 0, 1 << 20);
    RANGE(custom_ids, 0, 1);
    if (c->custom_ids) {   /* ids the source side (pad, eos) and the target side (all three) must hold */
        int lim = c->src_vocab < c->tgt_vocab ? c->src_vocab : c->tgt_vocab;
        RANGE(pad_id, 0, lim - 1);
        RANGE(eos_id, 0, lim - 1);
        RANGE(bos_id, 0, c->tgt_vocab - 1);
    }
    RANGE(n_banned, 0, TFM_MT_MAX_BANNED);
    for (int i = 0; i < c->n_banned; i++)
        if (c->banned[i] < 0 || c->banned[i] >= c->tgt_vocab)
            return tfm_set_error("config banned token %d is not in 0..%d", c->banned[i], c->tgt_vocab - 1), -1;
#undef RANGE
    if (!(c->dropout >= 0 && c->dropout < 1)) return tfm_set_error("config dropout must be in [0,1), got %g", c->dropout), -1;
    return check_regularisers(c);
}

int64_t tfm_mt_step_elems(const tfm_mt_config *c, int64_t rows, int64_t Ts, int64_t Tt) {
    int64_t L = c->n_layer, V = c->tgt_vocab, enc, dec;
    if (!strcmp(c->arch, "transformer")) {
        int64_t w = 12 * (int64_t)c->d_model + 2 * (int64_t)c->ffn, H = c->n_head;
        enc = tfm_mul_i64_sat(tfm_mul_i64_sat(rows, Ts), L * (w + 2 * H * Ts));
        dec = tfm_mul_i64_sat(tfm_mul_i64_sat(rows, Tt), L * (2 * w + 2 * H * (Tt + Ts)) + 3 * V);
    } else {
        int64_t w = 3 * (int64_t)c->embed_size + 12 * (int64_t)c->hidden_size;
        enc = tfm_mul_i64_sat(tfm_mul_i64_sat(rows, Ts), L * w);
        dec = tfm_mul_i64_sat(tfm_mul_i64_sat(rows, Tt), L * w + 2 * Ts + 3 * V);
    }
    return enc > INT64_MAX - dec ? INT64_MAX : enc + dec;
}

static int64_t add_sat(int64_t a, int64_t b) { return a > INT64_MAX - b ? INT64_MAX : a + b; }

int64_t tfm_mt_decode_elems(const tfm_mt_config *c, int64_t nb, int64_t rows, int64_t Ts, int64_t max_steps) {
    int64_t L = c->n_layer, V = c->tgt_vocab, enc, cache, step;
    if (!strcmp(c->arch, "transformer")) {
        int64_t d = c->d_model, w = 12 * d + 2 * (int64_t)c->ffn, H = c->n_head;
        enc = tfm_mul_i64_sat(tfm_mul_i64_sat(nb, Ts), L * (w + 2 * H * Ts));
        cache = tfm_mul_i64_sat(tfm_mul_i64_sat(rows, Ts + max_steps), 2 * L * d);   /* cross + self K/V */
        step = tfm_mul_i64_sat(rows, L * (2 * w + 2 * H * (max_steps + Ts)) + 3 * V);
    } else {
        int64_t w = 3 * (int64_t)c->embed_size + 12 * (int64_t)c->hidden_size;
        enc = tfm_mul_i64_sat(tfm_mul_i64_sat(nb, Ts), L * w);
        cache = tfm_mul_i64_sat(tfm_mul_i64_sat(rows, Ts), 2 * (int64_t)c->hidden_size);
        step = tfm_mul_i64_sat(rows, L * w + 2 * Ts + 3 * V);
    }
    return add_sat(add_sat(enc, cache), add_sat(step, tfm_mul_i64_sat(rows, max_steps)));   /* + histories */
}

int64_t tfm_mt_n_params(const tfm_mt_config *c) {
    int64_t Vs = c->src_vocab, Vt = c->tgt_vocab, L = c->n_layer;
    if (!strcmp(c->arch, "transformer")) {
        int64_t d = c->d_model, f = c->ffn;
        int64_t ffn = d * f + f + f * d + d, ln = 2 * d, mha = 4 * d * d + (c->attn_bias ? 4 * d : 0);
        int64_t enc = mha + ln + ffn + ln, dec = 2 * mha + 3 * ln + ffn;
        int64_t layers = L * enc + L * dec + (c->pre_ln ? 2 * ln : 0);
        if (c->share_embeddings) return Vs * d + layers + Vt;   /* one (V,d) matrix: both embeddings and the output */
        return Vs * d + Vt * d + layers + d * Vt + Vt;
    }
    int bahdanau = !strcmp(c->arch, "bahdanau");
    if (!bahdanau && strcmp(c->arch, "rnn")) return -1;
    int64_t E = c->embed_size, H = c->hidden_size;
    int64_t deeper = (L - 1) * (3 * H * H + 3 * H * H + 6 * H);   /* GRU layers 1..L-1 */
    int64_t enc = Vs * E + 3 * H * E + 3 * H * H + 6 * H + deeper;
    int64_t dec = Vt * E + 3 * H * (E + H) + 3 * H * H + 6 * H + deeper + H * Vt + Vt;
    return enc + dec + (bahdanau ? 2 * H * H + H : 0);           /* W_k, W_q, w_v */
}

int tfm_mt_pad_id(const tfm_mt_config *c) { return c->custom_ids ? c->pad_id : TFM_PAD; }
int tfm_mt_bos_id(const tfm_mt_config *c) { return c->custom_ids ? c->bos_id : TFM_BOS; }
int tfm_mt_eos_id(const tfm_mt_config *c) { return c->custom_ids ? c->eos_id : TFM_EOS; }

tfm_mt_net *tfm_mt_net_replica(const tfm_mt_net *m) {
    tfm_mt_net *r = tfm_mt_net_create(&m->cfg);
    if (r && tfm_params_share_data(&r->params, &m->params)) {
        tfm_mt_net_free(r);
        return NULL;
    }
    return r;
}

tfm_mt_net *tfm_mt_net_create(const tfm_mt_config *cfg) {
    tfm_mt_config cc = *cfg, *c = &cc;
    tfm_mt_config_clear_unused(c);   /* the model's config (and so its checkpoints) holds defaults there */
    tfm_mt_net *(*fn)(const tfm_mt_config *) = NULL;
    if (!strcmp(c->arch, "transformer")) fn = tfm_mt_transformer_create;
    else if (!strcmp(c->arch, "rnn")) fn = tfm_mt_rnn_create;
    else if (!strcmp(c->arch, "bahdanau")) fn = tfm_mt_bahdanau_create;
    else return tfm_set_error("unknown architecture '%s' (transformer, rnn, bahdanau)", c->arch), NULL;
    if (tfm_mt_config_check(c)) return NULL;
    int64_t n = tfm_mt_n_params(c);   /* int64 on the checked ranges: cannot wrap; a loader checks the file first */
    if (n > TFM_MAX_PARAMS)
        return tfm_set_error("config describes %lld parameters, at most %lld (lower d_model/ffn/n_layer or the "
                             "vocabularies)", (long long)n, (long long)TFM_MAX_PARAMS), NULL;
    return fn(c);
}

void tfm_mt_net_free(tfm_mt_net *m) {
    if (m) m->vt->destroy(m);
}

int tfm_mt_net_max_positions(const tfm_mt_net *m) { return m->vt->max_positions ? m->vt->max_positions(m) : 0; }

tfm_tensor *tfm_mt_net_forward(tfm_mt_net *m, tfm_graph *g, const int *src, const int *src_valid, int B, int Ts,
                               const int *tgt_in, int Tt) {
    tfm_tensor *enc = m->vt->encode(m, g, src, src_valid, B, Ts);
    void *st = m->vt->init_state(m, g, enc, src_valid, B, Ts, 0, B);
    tfm_tensor *logits = m->vt->decode(m, g, st, tgt_in, B, Tt);
    m->vt->free_state(m, st);
    return logits;
}

tfm_tensor *tfm_mt_net_loss(tfm_mt_net *m, tfm_graph *g, const int *src, const int *src_valid, int B, int Ts,
                            const int *tgt_in, const int *tgt, int Tt, float label_smoothing) {
    tfm_tensor *loss = m->vt->loss ? m->vt->loss(m, g, src, src_valid, B, Ts, tgt_in, tgt, Tt, label_smoothing) : NULL;
    if (loss) return loss;
    tfm_tensor *logits = tfm_mt_net_forward(m, g, src, src_valid, B, Ts, tgt_in, Tt);
    return tfm_cross_entropy(g, logits, tgt, TFM_PAD, label_smoothing);
}

tfm_tensor *tfm_mt_net_train_logits(tfm_mt_net *m, tfm_graph *g, const int *src, const int *src_valid, int B, int Ts,
                                    const int *tgt_in, const int *tgt, int Tt, const int **targets) {
    tfm_tensor *logits = m->vt->train_logits ? m->vt->train_logits(m, g, src, src_valid, B, Ts, tgt_in, tgt, Tt, targets)
                                             : NULL;
    if (logits) return logits;
    *targets = tgt;
    return tfm_mt_net_forward(m, g, src, src_valid, B, Ts, tgt_in, Tt);
}

tfm_tensor *tfm_mt_net_rdrop_loss(tfm_mt_net *m, tfm_graph *g, const int *src, const int *src_valid, int B, int Ts,
                                  const int *tgt_in, const int *tgt, int Tt, float label_smoothing, float alpha) {
    const int *t1, *t2;
    tfm_tensor *l1 = tfm_mt_net_train_logits(m, g, src, src_valid, B, Ts, tgt_in, tgt, Tt, &t1);
    tfm_tensor *l2 = tfm_mt_net_train_logits(m, g, src, src_valid, B, Ts, tgt_in, tgt, Tt, &t2);
    tfm_tensor *ce = tfm_add(g, tfm_cross_entropy(g, l1, t1, TFM_PAD, label_smoothing),
                             tfm_cross_entropy(g, l2, t2, TFM_PAD, label_smoothing));
    tfm_tensor *loss = tfm_scale(g, ce, 0.5f);
    if (alpha == 0) return loss;
    return tfm_add(g, loss, tfm_scale(g, tfm_sym_kl(g, l1, l2, t1, TFM_PAD), alpha));
}

void tfm_mt_shift_right(const int *tgt, int B, int T, int *tgt_in) {
    for (int b = 0; b < B; b++) {
        tgt_in[(size_t)b * T] = TFM_BOS;
        for (int t = 1; t < T; t++) tgt_in[(size_t)b * T + t] = tgt[(size_t)b * T + t - 1];
    }
}

/* ---------------------------------------------------------------- checkpoints */
#define INT_FIELDS(X) X(src_vocab) X(tgt_vocab) X(d_model) X(n_head) X(ffn) X(pre_ln) X(max_len) X(n_layer) \
    X(embed_size) X(hidden_size)
/* saved only when non-zero (absent = 0): share_embeddings, pad_len, then the imported models' fields */
#define OPT_FIELDS(X) X(share_embeddings) X(pad_len) X(attn_bias) X(ffn_act) X(pos_halves) X(no_embed_scale) \
    X(gen_beam) X(gen_max_len)

void tfm_mt_net_put(tfm_container *c, const tfm_mt_net *m) {
    const tfm_mt_config *cf = &m->cfg;
    tfm_container_add_str(c, "meta.kind", "seq2seq");
    tfm_container_add_str(c, "meta.arch", cf->arch);
#define PUT(f) tfm_container_add_int(c, "config." #f, cf->f);
    INT_FIELDS(PUT)
#undef PUT
    tfm_container_add_float(c, "config.dropout", cf->dropout);
    tfm_ckpt_put_params(c, &m->params);
}

void tfm_mt_put_optional_config(tfm_container *c, const tfm_mt_config *cf) {
#define PUT_OPT(f) if (cf->f) tfm_container_add_int(c, "config." #f, cf->f);
    OPT_FIELDS(PUT_OPT)
#undef PUT_OPT
    if (cf->custom_ids) {
        tfm_container_add_int(c, "config.pad_id", cf->pad_id);
        tfm_container_add_int(c, "config.bos_id", cf->bos_id);
        tfm_container_add_int(c, "config.eos_id", cf->eos_id);
    }
    if (cf->n_banned) tfm_container_add_i32(c, "config.banned", cf->n_banned, cf->banned);
    if (cf->attention_dropout != -1.0f) tfm_container_add_float(c, "config.attention_dropout", cf->attention_dropout);
    if (cf->activation_dropout != 0) tfm_container_add_float(c, "config.activation_dropout", cf->activation_dropout);
}

/* The settings stored with a translator: its decoding defaults and language pair (each only when set). */
static void put_settings(tfm_container *c, const tfm_mt_model *t) {
    if (t->decode_beam > 0) {
        tfm_container_add_int(c, "decode.beam", t->decode_beam);
        tfm_container_add_float(c, "decode.alpha", t->decode_alpha);
    }
    if (t->src_lang[0]) tfm_container_add_str(c, "meta.src_lang", t->src_lang);
    if (t->tgt_lang[0]) tfm_container_add_str(c, "meta.tgt_lang", t->tgt_lang);
    if (t->ensemble[0]) tfm_container_add_str(c, "decode.ensemble", t->ensemble);
}

int tfm_ensemble_name_valid(const char *s, size_t n) {
    if (n < 1 || n > 128 || s[0] == '.' || s[0] == '-') return 0;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9') ||
              s[i] == '.' || s[i] == '-' || s[i] == '_'))
            return 0;
    return 1;
}

/* decode.ensemble: 1..TFM_MAX_ENSEMBLE - 1 valid file names, one per line */
static int get_ensemble(tfm_mt_model *t, const tfm_container *c, const char *path) {
    if (!tfm_container_get(c, "decode.ensemble")) return 0;
    const char *v = tfm_container_str(c, "decode.ensemble");
    if (!v) return -1;
    size_t len = strlen(v);
    int names = 0;
    for (const char *a = v;;) {
        const char *e = strchr(a, '\n');
        size_t n = e ? (size_t)(e - a) : strlen(a);
        if (!tfm_ensemble_name_valid(a, n))
            return tfm_set_error("%s: decode.ensemble: '%.*s' is not a member's file name (1 to 128 letters, digits, "
                                 "'.', '-' or '_', in the checkpoint's folder)", path, (int)(n < 60 ? n : 60), a), -1;
        names++;
        if (!e) break;
        a = e + 1;
    }
    if (names > TFM_MAX_ENSEMBLE - 1 || len >= sizeof t->ensemble)
        return tfm_set_error("%s: decode.ensemble names %d members in %zu bytes: at most %d, in %zu", path, names, len,
                             TFM_MAX_ENSEMBLE - 1, sizeof t->ensemble - 1), -1;
    memcpy(t->ensemble, v, len + 1);
    return 0;
}

void tfm_mt_model_put(tfm_container *c, const tfm_mt_model *t) {
    tfm_mt_net_put(c, t->model);
    char *s = tfm_vocab_serialize(&t->src_vocab);
    char *u = tfm_vocab_serialize(&t->tgt_vocab);
    if (!s || !u) tfm_fatal("out of memory");
    tfm_container_add_str(c, "tokenizer.src_vocab", s);
    tfm_container_add_str(c, "tokenizer.tgt_vocab", u);
    tfm_container_add_str(c, "tokenizer.kind", tfm_tok_kind_name((tfm_tok_kind)t->tok_kind));
    if (t->bpe) tfm_bpe_to_container(t->bpe, c, TFM_BPE_ENTRY);
    tfm_mt_put_optional_config(c, &t->model->cfg);
    put_settings(c, t);
    free(s);
    free(u);
}

int tfm_lang_code_valid(const char *s) {
    size_t n = strlen(s);
    if (n < 1 || n > 15) return 0;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '-' || *s == '_'))
            return 0;
    return 1;
}

/* decode.beam / decode.alpha and meta.src_lang / meta.tgt_lang, each optional (older checkpoints have none) */
static int get_settings(tfm_mt_model *t, const tfm_container *c, const char *path) {
    if (tfm_container_get(c, "decode.beam")) {
        if (tfm_container_int(c, "decode.beam", &t->decode_beam) || tfm_container_float(c, "decode.alpha", &t->decode_alpha))
            return -1;
        if (t->decode_beam < 1 || t->decode_beam > 64)
            return tfm_set_error("%s: decode.beam must be in 1..64, got %d", path, t->decode_beam), -1;
        if (!(t->decode_alpha >= 0 && t->decode_alpha <= 10))
            return tfm_set_error("%s: decode.alpha must be in [0, 10], got %g", path, t->decode_alpha), -1;
    }
    static const char *keys[2] = {"meta.src_lang", "meta.tgt_lang"};
    char *dst[2] = {t->src_lang, t->tgt_lang};
    for (int k = 0; k < 2; k++) {
        if (!tfm_container_get(c, keys[k])) continue;
        const char *v = tfm_container_str(c, keys[k]);
        if (!v) return -1;
        if (!tfm_lang_code_valid(v))
            return tfm_set_error("%s: %s '%.40s' is not a language code (1 to 15 letters, digits, '-' or '_')", path,
                                 keys[k], v), -1;
        snprintf(dst[k], sizeof t->src_lang, "%s", v);
    }
    return get_ensemble(t, c, path);
}


int tfm_mt_model_check_bpe(const tfm_bpe *b, const char *name) {
    float prev = INFINITY;
    for (int i = 0; i < b->n; i++) {
        if (!isfinite(b->score[i]))
            return tfm_set_error("%s: piece %d ('%.40s') has the score %g (edited or corrupt)", name, i, b->piece[i],
                                 (double)b->score[i]), -1;
        if (b->type[i] != TFM_PIECE_NORMAL) continue;
        if (b->score[i] > prev)
            return tfm_set_error("%s: piece %d ('%.40s') scores %g, above the piece before it (%g): the merge order is "
                                 "not the order the pieces were learned in (edited?)", name, i, b->piece[i],
                                 (double)b->score[i], (double)prev), -1;
        prev = b->score[i];
    }
    return 0;
}

/* tokenizer.kind cross-check: a lowercasing tokenizer (d2l, moses-lower) cannot have produced a
 * vocabulary with an ASCII capital letter */
static int check_lowercase(const tfm_mt_model *t, const char *path) {
    if (t->tok_kind != TFM_TOK_D2L && t->tok_kind != TFM_TOK_MOSES_LOWER) return 0;
    const tfm_vocab *vs[2] = {&t->src_vocab, &t->tgt_vocab};
    for (int k = 0; k < 2; k++)
        for (int i = TFM_N_RESERVED; i < vs[k]->n; i++)
            for (const char *p = vs[k]->tok[i]; *p; p++)
                if (*p >= 'A' && *p <= 'Z')
                    return tfm_set_error("%s: tokenizer.kind '%s' lowercases, but tokenizer.%s_vocab holds '%.40s' "
                                         "(tokenizer.kind edited?)", path, tfm_tok_kind_name((tfm_tok_kind)t->tok_kind),
                                         k ? "tgt" : "src", vs[k]->tok[i]),
                           -1;
    return 0;
}

/* tokenizer.bpe of a "bpe" translator: both vocabularies must be its pieces */
static int get_bpe(tfm_mt_model *t, const tfm_container *c, const char *path) {
    t->bpe = calloc(1, sizeof *t->bpe);
    if (!t->bpe) return tfm_set_error_kind(TFM_ERR_NOMEM, "%s: out of memory", path), -1;
    if (tfm_bpe_from_container(t->bpe, c, TFM_BPE_ENTRY)) {
        free(t->bpe);
        t->bpe = NULL;
        return -1;
    }
    char name[600];
    snprintf(name, sizeof name, "%s: %s", path, TFM_BPE_ENTRY);
    if (tfm_mt_model_check_bpe(t->bpe, name)) return -1;
    tfm_vocab v;
    if (tfm_bpe_vocab(t->bpe, &v)) return tfm_prefix_error("%s: ", path);
    int same = v.n == t->src_vocab.n && v.n == t->tgt_vocab.n;
    for (int i = 0; same && i < v.n; i++)
        same = !strcmp(v.tok[i], t->src_vocab.tok[i]) && !strcmp(v.tok[i], t->tgt_vocab.tok[i]);
    tfm_vocab_free(&v);
    if (!same) return tfm_set_error("%s: %s does not match tokenizer.src_vocab / tgt_vocab", path, TFM_BPE_ENTRY), -1;
    return 0;
}

/* The config entries written only when set (OPT_FIELDS, the special ids, the banned tokens). */
static int get_optional_config(const tfm_container *c, const char *path, tfm_mt_config *cf) {
#define GET_OPT(f) if (tfm_container_get(c, "config." #f) && tfm_container_int(c, "config." #f, &cf->f)) return -1;
    OPT_FIELDS(GET_OPT)
#undef GET_OPT
    int n_ids = !!tfm_container_get(c, "config.pad_id") + !!tfm_container_get(c, "config.bos_id") +
                !!tfm_container_get(c, "config.eos_id");
    if (n_ids && (tfm_container_int(c, "config.pad_id", &cf->pad_id) ||
                  tfm_container_int(c, "config.bos_id", &cf->bos_id) ||
                  tfm_container_int(c, "config.eos_id", &cf->eos_id)))
        return -1;
    cf->custom_ids = n_ids > 0;
    if ((tfm_container_get(c, "config.attention_dropout") &&
         tfm_container_float(c, "config.attention_dropout", &cf->attention_dropout)) ||
        (tfm_container_get(c, "config.activation_dropout") &&
         tfm_container_float(c, "config.activation_dropout", &cf->activation_dropout)))
        return -1;
    const tfm_entry *e = tfm_container_get(c, "config.banned");
    if (e) {
        if (e->dtype != TFM_DT_I32 || e->ndim != 1 || e->shape[0] < 1 || e->shape[0] > TFM_MT_MAX_BANNED)
            return tfm_set_error("%s: config.banned must be 1..%d int32 token ids", path, TFM_MT_MAX_BANNED), -1;
        cf->n_banned = e->shape[0];
        memcpy(cf->banned, e->data, sizeof(int) * (size_t)cf->n_banned);
    }
    return 0;
}

/* tfm's own tokenizers: tokenizer.src_vocab / tgt_vocab / kind (and tokenizer.bpe) */
static int get_vocabularies(tfm_mt_model *t, const tfm_container *c, const char *path, const tfm_mt_config *cf) {
    const char *sv = tfm_container_str(c, "tokenizer.src_vocab");
    const char *tv = sv ? tfm_container_str(c, "tokenizer.tgt_vocab") : NULL;
    const char *tk = tv ? tfm_container_str(c, "tokenizer.kind") : NULL;
    if (!tk) return -1;
    int kind_id = tfm_tok_kind_parse(tk);
    if (kind_id < 0) return tfm_set_error("%s: unknown tokenizer.kind '%.40s'", path, tk), -1;
    if (tfm_vocab_deserialize(&t->src_vocab, sv)) return tfm_prefix_error("%s: tokenizer.src_vocab: ", path);
    if (tfm_vocab_deserialize(&t->tgt_vocab, tv)) {
        tfm_vocab_free(&t->src_vocab);
        return tfm_prefix_error("%s: tokenizer.tgt_vocab: ", path);
    }
    if (t->src_vocab.n != cf->src_vocab || t->tgt_vocab.n != cf->tgt_vocab) {
        tfm_set_error("%s: vocabulary sizes (%d, %d) do not match config (%d, %d)", path, t->src_vocab.n,
                      t->tgt_vocab.n, cf->src_vocab, cf->tgt_vocab);
        tfm_mt_model_free(t);
        return -1;
    }
    t->tok_kind = kind_id;
    if (check_lowercase(t, path) || (kind_id == TFM_TOK_BPE && get_bpe(t, c, path))) {
        tfm_mt_model_free(t);
        return -1;
    }
    return 0;
}

/* An imported MarianMT (tokenizer.kind "marian"): its SentencePiece models and vocab.json, kept as the
 * file bytes (tokenizer.marian.source / .target / .vocab) for the tokenizer of the text floor. */
static int get_marian(tfm_mt_model *t, const tfm_container *c, const char *path, const tfm_mt_config *cf) {
    static const char *const names[3] = {"tokenizer.marian.source", "tokenizer.marian.target",
                                         "tokenizer.marian.vocab"};
    const tfm_entry *e[3];
    for (int k = 0; k < 3; k++) {
        e[k] = tfm_container_get(c, names[k]);
        if (!e[k] || e[k]->dtype != TFM_DT_BYTES || e[k]->nbytes == 0)
            return tfm_set_error("%s: %s missing (tokenizer.kind 'marian')", path, names[k]), -1;
    }
    t->tok_kind = -1;
    int n_model = cf->src_vocab < cf->tgt_vocab ? cf->src_vocab : cf->tgt_vocab;
    char nm[3][600];
    for (int k = 0; k < 3; k++) snprintf(nm[k], sizeof nm[k], "%s: %s", path, names[k]);
    const char *const np[3] = {nm[0], nm[1], nm[2]};
    t->marian = tfm_marian_tok_from_bytes(e[0]->data, e[0]->nbytes, e[1]->data, e[1]->nbytes, e[2]->data,
                                          e[2]->nbytes, n_model, np);
    return t->marian ? 0 : -1;
}

/* train-mt stores its flags in every checkpoint (run.<flag> text entries, include/tfm/train.h). Where a flag set a
 * config field the architecture uses, both must agree: config.n_head edited to another divisor of d_model changes
 * every translation and no shape, and config.max_len below the run's --max-len + 1 cuts every output; only this
 * cross-check can see such an edit. Files without run.* (imported, averaged, older) have nothing to compare. */
static int check_run_entries(const tfm_container *c, const tfm_mt_config *cf, const char *path) {
    const struct { const char *flag, *field; int value, transformer; } f[] = {   /* transformer -1: both */
        {"d-model", "d_model", cf->d_model, 1}, {"n-head", "n_head", cf->n_head, 1}, {"ffn", "ffn", cf->ffn, 1},
        {"pre-ln", "pre_ln", cf->pre_ln, 1}, {"embed-size", "embed_size", cf->embed_size, 0},
        {"hidden-size", "hidden_size", cf->hidden_size, 0}, {"n-layer", "n_layer", cf->n_layer, -1}};
    int tr = !strcmp(cf->arch, "transformer");
    const tfm_entry *a = tfm_container_get(c, "run.arch");
    if (a && a->dtype == TFM_DT_BYTES && strcmp(a->data, cf->arch))
        return tfm_set_error("%s: meta.arch '%s' is not run.arch '%.20s', the run that trained it (edited?)", path,
                             cf->arch, (const char *)a->data), -1;
    char name[64];
    for (size_t i = 0; i < sizeof f / sizeof *f; i++) {
        if (f[i].transformer >= 0 && f[i].transformer != tr) continue;
        snprintf(name, sizeof name, "run.%s", f[i].flag);
        const tfm_entry *e = tfm_container_get(c, name);
        char *end;
        long v = e && e->dtype == TFM_DT_BYTES ? strtol(e->data, &end, 10) : 0;
        if (e && e->dtype == TFM_DT_BYTES && (*end || v != f[i].value))
            return tfm_set_error("%s: config.%s %d is not run.%s %.20s, the run that trained it (edited?)", path,
                                 f[i].field, f[i].value, f[i].flag, (const char *)e->data), -1;
    }
    const tfm_entry *e = tfm_container_get(c, "run.max-len");
    long max_len = e && e->dtype == TFM_DT_BYTES ? strtol(e->data, NULL, 10) : 0;
    if (tr && max_len > 0 && cf->max_len < max_len + 1)
        return tfm_set_error("%s: config.max_len %d is shorter than run.max-len %ld + 1, the run that trained it "
                             "(edited?)", path, cf->max_len, max_len), -1;
    return 0;
}

int tfm_mt_model_get(tfm_mt_model *t, const tfm_container *c, const char *path) {
    memset(t, 0, sizeof *t);
    const char *kind = tfm_container_str(c, "meta.kind");
    if (!kind) return -1;
    if (strcmp(kind, "seq2seq"))
        return !strcmp(kind, "gpt")
                   ? tfm_set_error("%s: is a language-model checkpoint (train-lm; meta.kind 'gpt'), not a translation "
                                   "model: use tfm generate, or tfm train-lm --resume", path), -1
                   : tfm_set_error("%s: is a non-translation checkpoint (meta.kind '%.40s'), not a translation model",
                                   path, kind), -1;
    const char *arch = tfm_container_str(c, "meta.arch");
    if (!arch) return -1;
    tfm_mt_config cf;
    tfm_mt_config_default(&cf);
    if (strlen(arch) >= sizeof cf.arch) return tfm_set_error("%s: unknown meta.arch '%.40s'", path, arch), -1;
    snprintf(cf.arch, sizeof cf.arch, "%s", arch);
#define GET(f) if (tfm_container_int(c, "config." #f, &cf.f)) return -1;
    INT_FIELDS(GET)
#undef GET
    if (tfm_container_float(c, "config.dropout", &cf.dropout)) return -1;
    if (get_optional_config(c, path, &cf)) return -1;
    const char *tk = tfm_container_get(c, "tokenizer.kind") ? tfm_container_str(c, "tokenizer.kind") : NULL;
    if (tk && !strcmp(tk, "marian") ? get_marian(t, c, path, &cf) : get_vocabularies(t, c, path, &cf)) return -1;
    if (get_settings(t, c, path)) {
        tfm_mt_model_free(t);
        return -1;
    }
    if (tfm_mt_config_check(&cf) || check_unused(&cf)) {
        tfm_mt_model_free(t);
        return tfm_prefix_error("%s: ", path);
    }
    if (check_run_entries(c, &cf, path)) {
        tfm_mt_model_free(t);
        return -1;
    }
    if (tfm_ckpt_check_param_budget(c, tfm_mt_n_params(&cf), path)) {
        tfm_mt_model_free(t);
        return -1;
    }
    t->model = tfm_mt_net_create(&cf);
    if (!t->model) {
        tfm_mt_model_free(t);
        return tfm_prefix_error("%s: ", path);
    }
    if (tfm_ckpt_get_params(c, &t->model->params, path)) {
        tfm_mt_model_free(t);
        return -1;
    }
    return 0;
}

static int load(tfm_mt_model *t, const char *path, int int8_only) {
    tfm_container c;
    memset(t, 0, sizeof *t);
    /* a training checkpoint's optimizer state unused; the weights read straight into the model */
    if (tfm_container_load_deferred(&c, path, "adam.", "param.")) {
        tfm_container_free(&c);
        return -1;
    }
    c.int8_only = int8_only;
    int rc = tfm_mt_model_get(t, &c, path);
    tfm_container_free(&c);
    return rc ? tfm_error_in_data() : 0;
}

int tfm_mt_model_load(tfm_mt_model *t, const char *path) { return load(t, path, 0); }
int tfm_mt_model_load_for_inference(tfm_mt_model *t, const char *path) { return load(t, path, 1); }

void tfm_mt_model_free(tfm_mt_model *t) {
    tfm_mt_net_free(t->model);
    t->model = NULL;
    if (t->src_vocab.tok) tfm_vocab_free(&t->src_vocab);
    if (t->tgt_vocab.tok) tfm_vocab_free(&t->tgt_vocab);
    if (t->bpe) tfm_bpe_free(t->bpe);
    free(t->bpe);
    tfm_marian_tok_free(t->marian);
    memset(t, 0, sizeof *t);
}

int tfm_mt_model_decode_beam(const tfm_mt_model *t) { return t->decode_beam; }
float tfm_mt_model_decode_alpha(const tfm_mt_model *t) { return t->decode_alpha; }
const char *tfm_mt_model_src_lang(const tfm_mt_model *t) { return t->src_lang; }
const char *tfm_mt_model_tgt_lang(const tfm_mt_model *t) { return t->tgt_lang; }
const tfm_bpe *tfm_mt_model_bpe(const tfm_mt_model *t) { return t->bpe; }
