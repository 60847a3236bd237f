/* The generic EncoderDecoder pieces: config, dispatch on the architecture name, teacher-forced forward,
 * and translator checkpoints (include/tfm/seq2seq.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tfm/rnn.h"
#include "tfm/seq2seq.h"

void tfm_s2s_config_default(tfm_s2s_config *c) {
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
}

int tfm_s2s_config_check(const tfm_s2s_config *c) {
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
        RANGE(max_len, 1, 1 << 20);
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
    RANGE(n_banned, 0, TFM_S2S_MAX_BANNED);
    for (int i = 0; i < c->n_banned; i++)
        if (c->banned[i] < 0 || c->banned[i] >= c->tgt_vocab)
            return tfm_set_error("config banned token %d is not in 0..%d", c->banned[i], c->tgt_vocab - 1), -1;
#undef RANGE
    if (!(c->dropout >= 0 && c->dropout < 1)) return tfm_set_error("config dropout must be in [0,1), got %g", c->dropout), -1;
    return 0;
}

int64_t tfm_s2s_step_elems(const tfm_s2s_config *c, int64_t rows, int64_t Ts, int64_t Tt) {
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

int64_t tfm_s2s_decode_elems(const tfm_s2s_config *c, int64_t nb, int64_t rows, int64_t Ts, int64_t max_steps) {
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

int64_t tfm_s2s_n_params(const tfm_s2s_config *c) {
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

int tfm_s2s_pad_id(const tfm_s2s_config *c) { return c->custom_ids ? c->pad_id : TFM_PAD; }
int tfm_s2s_bos_id(const tfm_s2s_config *c) { return c->custom_ids ? c->bos_id : TFM_BOS; }
int tfm_s2s_eos_id(const tfm_s2s_config *c) { return c->custom_ids ? c->eos_id : TFM_EOS; }

tfm_encdec *tfm_encdec_replica(const tfm_encdec *m) {
    tfm_encdec *r = tfm_s2s_create(&m->cfg);
    if (r && tfm_params_share_data(&r->params, &m->params)) {
        tfm_encdec_free(r);
        return NULL;
    }
    return r;
}

tfm_encdec *tfm_s2s_create(const tfm_s2s_config *c) {
    tfm_encdec *(*fn)(const tfm_s2s_config *) = NULL;
    if (!strcmp(c->arch, "transformer")) fn = tfm_transformer_create;
    else if (!strcmp(c->arch, "rnn")) fn = tfm_rnn_s2s_create;
    else if (!strcmp(c->arch, "bahdanau")) fn = tfm_bahdanau_create;
    else return tfm_set_error("unknown architecture '%s' (transformer, rnn, bahdanau)", c->arch), NULL;
    if (tfm_s2s_config_check(c)) return NULL;
    int64_t n = tfm_s2s_n_params(c);   /* int64 on the checked ranges: cannot wrap; a loader checks the file first */
    if (n > TFM_MAX_PARAMS)
        return tfm_set_error("config describes %lld parameters, at most %lld (lower d_model/ffn/n_layer or the "
                             "vocabularies)", (long long)n, (long long)TFM_MAX_PARAMS), NULL;
    return fn(c);
}

void tfm_encdec_free(tfm_encdec *m) {
    if (m) m->vt->destroy(m);
}

int tfm_encdec_max_positions(const tfm_encdec *m) { return m->vt->max_positions ? m->vt->max_positions(m) : 0; }

tfm_tensor *tfm_encdec_forward(tfm_encdec *m, tfm_graph *g, const int *src, const int *src_valid, int B, int Ts,
                               const int *tgt_in, int Tt) {
    tfm_tensor *enc = m->vt->encode(m, g, src, src_valid, B, Ts);
    void *st = m->vt->init_state(m, g, enc, src_valid, B, Ts, 0, B);
    tfm_tensor *logits = m->vt->decode(m, g, st, tgt_in, B, Tt);
    m->vt->free_state(m, st);
    return logits;
}

tfm_tensor *tfm_encdec_loss(tfm_encdec *m, tfm_graph *g, const int *src, const int *src_valid, int B, int Ts,
                            const int *tgt_in, const int *tgt, int Tt, float label_smoothing) {
    tfm_tensor *loss = m->vt->loss ? m->vt->loss(m, g, src, src_valid, B, Ts, tgt_in, tgt, Tt, label_smoothing) : NULL;
    if (loss) return loss;
    tfm_tensor *logits = tfm_encdec_forward(m, g, src, src_valid, B, Ts, tgt_in, Tt);
    return tfm_cross_entropy(g, logits, tgt, TFM_PAD, label_smoothing);
}

void tfm_s2s_shift_right(const int *tgt, int B, int T, int *tgt_in) {
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

void tfm_s2s_put_model(tfm_container *c, const tfm_encdec *m) {
    const tfm_s2s_config *cf = &m->cfg;
    tfm_container_add_str(c, "meta.kind", "seq2seq");
    tfm_container_add_str(c, "meta.arch", cf->arch);
#define PUT(f) tfm_container_add_int(c, "config." #f, cf->f);
    INT_FIELDS(PUT)
#undef PUT
    tfm_container_add_float(c, "config.dropout", cf->dropout);
    tfm_ckpt_put_params(c, &m->params);
}

void tfm_s2s_put_optional_config(tfm_container *c, const tfm_s2s_config *cf) {
#define PUT_OPT(f) if (cf->f) tfm_container_add_int(c, "config." #f, cf->f);
    OPT_FIELDS(PUT_OPT)
#undef PUT_OPT
    if (cf->custom_ids) {
        tfm_container_add_int(c, "config.pad_id", cf->pad_id);
        tfm_container_add_int(c, "config.bos_id", cf->bos_id);
        tfm_container_add_int(c, "config.eos_id", cf->eos_id);
    }
    if (cf->n_banned) tfm_container_add_i32(c, "config.banned", cf->n_banned, cf->banned);
}

void tfm_translator_put(tfm_container *c, const tfm_translator *t) {
    tfm_s2s_put_model(c, t->model);
    char *s = tfm_vocab_serialize(&t->src_vocab);
    char *u = tfm_vocab_serialize(&t->tgt_vocab);
    if (!s || !u) tfm_fatal("out of memory");
    tfm_container_add_str(c, "tokenizer.src_vocab", s);
    tfm_container_add_str(c, "tokenizer.tgt_vocab", u);
    tfm_container_add_str(c, "tokenizer.kind", tfm_tok_kind_name((tfm_tok_kind)t->tok_kind));
    if (t->bpe) tfm_bpe_to_container(t->bpe, c, TFM_BPE_ENTRY);
    tfm_s2s_put_optional_config(c, &t->model->cfg);
    free(s);
    free(u);
}

/* tokenizer.kind cross-check: a lowercasing tokenizer (d2l, moses-lower) cannot have produced a
 * vocabulary with an ASCII capital letter */
static int check_lowercase(const tfm_translator *t, const char *path) {
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
static int get_bpe(tfm_translator *t, const tfm_container *c, const char *path) {
    t->bpe = calloc(1, sizeof *t->bpe);
    if (!t->bpe) return tfm_set_error_kind(TFM_ERR_NOMEM, "%s: out of memory", path), -1;
    if (tfm_bpe_from_container(t->bpe, c, TFM_BPE_ENTRY)) {
        free(t->bpe);
        t->bpe = NULL;
        return -1;
    }
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
static int get_optional_config(const tfm_container *c, const char *path, tfm_s2s_config *cf) {
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
    const tfm_entry *e = tfm_container_get(c, "config.banned");
    if (e) {
        if (e->dtype != TFM_DT_I32 || e->ndim != 1 || e->shape[0] < 1 || e->shape[0] > TFM_S2S_MAX_BANNED)
            return tfm_set_error("%s: config.banned must be 1..%d int32 token ids", path, TFM_S2S_MAX_BANNED), -1;
        cf->n_banned = e->shape[0];
        memcpy(cf->banned, e->data, sizeof(int) * (size_t)cf->n_banned);
    }
    return 0;
}

/* tfm's own tokenizers: tokenizer.src_vocab / tgt_vocab / kind (and tokenizer.bpe) */
static int get_vocabularies(tfm_translator *t, const tfm_container *c, const char *path, const tfm_s2s_config *cf) {
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
        tfm_translator_free(t);
        return -1;
    }
    t->tok_kind = kind_id;
    if (check_lowercase(t, path) || (kind_id == TFM_TOK_BPE && get_bpe(t, c, path))) {
        tfm_translator_free(t);
        return -1;
    }
    return 0;
}

/* An imported MarianMT (tokenizer.kind "marian"): its SentencePiece models and vocab.json, kept as the
 * file bytes (tokenizer.marian.source / .target / .vocab) for the tokenizer of the text floor. */
static int get_marian(tfm_translator *t, const tfm_container *c, const char *path, const tfm_s2s_config *cf) {
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

int tfm_translator_get(tfm_translator *t, const tfm_container *c, const char *path) {
    memset(t, 0, sizeof *t);
    const char *kind = tfm_container_str(c, "meta.kind");
    if (!kind) return -1;
    if (strcmp(kind, "seq2seq"))
        return tfm_set_error("%s: is a %s checkpoint (meta.kind '%.40s'), not a translation model", path,
                             !strcmp(kind, "gpt") ? "language-model" : "non-translation", kind),
               -1;
    const char *arch = tfm_container_str(c, "meta.arch");
    if (!arch) return -1;
    tfm_s2s_config cf;
    tfm_s2s_config_default(&cf);
    if (strlen(arch) >= sizeof cf.arch) return tfm_set_error("%s: unknown meta.arch '%.40s'", path, arch), -1;
    snprintf(cf.arch, sizeof cf.arch, "%s", arch);
#define GET(f) if (tfm_container_int(c, "config." #f, &cf.f)) return -1;
    INT_FIELDS(GET)
#undef GET
    if (tfm_container_float(c, "config.dropout", &cf.dropout)) return -1;
    if (get_optional_config(c, path, &cf)) return -1;
    const char *tk = tfm_container_get(c, "tokenizer.kind") ? tfm_container_str(c, "tokenizer.kind") : NULL;
    if (tk && !strcmp(tk, "marian") ? get_marian(t, c, path, &cf) : get_vocabularies(t, c, path, &cf)) return -1;
    if (tfm_s2s_config_check(&cf)) {
        tfm_translator_free(t);
        return tfm_prefix_error("%s: ", path);
    }
    if (tfm_ckpt_check_param_budget(c, tfm_s2s_n_params(&cf), path)) {
        tfm_translator_free(t);
        return -1;
    }
    t->model = tfm_s2s_create(&cf);
    if (!t->model) {
        tfm_translator_free(t);
        return tfm_prefix_error("%s: ", path);
    }
    if (tfm_ckpt_get_params(c, &t->model->params, path)) {
        tfm_translator_free(t);
        return -1;
    }
    return 0;
}

int tfm_translator_load(tfm_translator *t, const char *path) {
    tfm_container c;
    memset(t, 0, sizeof *t);
    if (tfm_container_load_except(&c, path, "adam.")) {   /* a training checkpoint's optimizer state: unused */
        tfm_container_free(&c);
        return -1;
    }
    int rc = tfm_translator_get(t, &c, path);
    tfm_container_free(&c);
    return rc ? tfm_error_in_data() : 0;
}

void tfm_translator_free(tfm_translator *t) {
    tfm_encdec_free(t->model);
    t->model = NULL;
    if (t->src_vocab.tok) tfm_vocab_free(&t->src_vocab);
    if (t->tgt_vocab.tok) tfm_vocab_free(&t->tgt_vocab);
    if (t->bpe) tfm_bpe_free(t->bpe);
    free(t->bpe);
    tfm_marian_tok_free(t->marian);
    memset(t, 0, sizeof *t);
}
