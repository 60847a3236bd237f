/* tfm checkpoints <-> safetensors (see include/tfm/interchange.h). */
#include "tfm/interchange.h"
#include "core/json.h"
#include "tfm/safetensors.h"
#include "tfm/bpe.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define S2S_INT_FIELDS(X) X(src_vocab) X(tgt_vocab) X(d_model) X(n_head) X(ffn) X(pre_ln) X(max_len) X(n_layer) \
    X(embed_size) X(hidden_size)
#define GPT_INT_FIELDS(X) X(vocab_size) X(block_size) X(n_layer) X(n_head) X(n_embd)

/* ------------------------------------------------------------------ export */

static int save(const char *path, const tfm_params *p, const tfm_st_meta *meta, int n_meta) {
    tfm_st_tensor *t = calloc((size_t)p->n, sizeof *t);
    if (!t) return tfm_set_error("%s: out of memory", path), -1;
    for (int i = 0; i < p->n; i++) {
        t[i].name = p->t[i]->name;
        t[i].ndim = p->t[i]->ndim;
        memcpy(t[i].shape, p->t[i]->shape, sizeof t[i].shape);
        t[i].data = p->t[i]->data;
    }
    int rc = tfm_st_save(t, p->n, meta, n_meta, path);
    free(t);
    return rc;
}

int tfm_gpt_save_safetensors(const tfm_gpt *m, const tfm_char_vocab *v, const char *path) {
    const tfm_gpt_config *c = &m->cfg;
    char cfg[512];
    snprintf(cfg, sizeof cfg,
             "{\"vocab_size\":%d,\"block_size\":%d,\"n_layer\":%d,\"n_head\":%d,\"n_embd\":%d,\"dropout\":%.9g,"
             "\"attention\":\"%s\"}",
             c->vocab_size, c->block_size, c->n_layer, c->n_head, c->n_embd, c->dropout,
             c->attention == TFM_ATTN_SYNTHESIZER ? "synthesizer" : "causal");
    tfm_st_meta meta[] = {{"format", "pt"}, {"tfm.format", "1"}, {"tfm.kind", "gpt"}, {"tfm.arch", "gpt"},
                          {"tfm.config", cfg}, {"tfm.tokenizer.chars", v->chars}};
    return save(path, &m->params, meta, (int)(sizeof meta / sizeof *meta));
}

/* The twin's parameters that are the one shared matrix of a tied translator (config share_embeddings). */
#define SHARED_NAME "shared.embedding.weight"
static const char *const TIED_ALIASES[] = {"encoder.embedding.weight", "decoder.embedding.weight",
                                           "decoder.dense.weight"};
#define N_TIED 3

static void put_tied(tfm_strbuf *b) {
    tfm_strbuf_put(b, "{", 1);
    for (int i = 0; i < N_TIED; i++) tfm_strbuf_printf(b, "%s\"%s\":\"" SHARED_NAME "\"", i ? "," : "", TIED_ALIASES[i]);
    tfm_strbuf_put(b, "}", 1);
}

int tfm_mt_model_save_safetensors(const tfm_mt_model *t, const char *path) {
    const tfm_mt_config *c = &t->model->cfg;
    if (t->bpe && (!t->bpe->proto || t->bpe->proto_len > TFM_ST_MAX_HEADER / 2))
        return tfm_set_error("%s: the BPE model is too large for the safetensors header", path), -1;
    tfm_strbuf b = {0}, bpe = {0}, tied = {0};
    tfm_strbuf_put(&b, "{", 1);
#define PUT(f) tfm_strbuf_printf(&b, "%s\"" #f "\":%d", b.len > 1 ? "," : "", c->f);
    S2S_INT_FIELDS(PUT)
#undef PUT
    if (c->pad_len) tfm_strbuf_printf(&b, ",\"pad_len\":%d", c->pad_len);   /* only when set: older readers */
    if (c->attention_dropout != -1.0f) tfm_strbuf_printf(&b, ",\"attention_dropout\":%.9g", c->attention_dropout);
    if (c->activation_dropout != 0) tfm_strbuf_printf(&b, ",\"activation_dropout\":%.9g", c->activation_dropout);
    tfm_strbuf_printf(&b, ",\"share_embeddings\":%d,\"dropout\":%.9g}", c->share_embeddings, c->dropout);
    if (t->bpe) tfm_base64_put(&bpe, t->bpe->proto, t->bpe->proto_len);
    tfm_strbuf_put(&bpe, "", 0);
    if (c->share_embeddings) put_tied(&tied);
    char *src = tfm_vocab_serialize(&t->src_vocab), *tgt = tfm_vocab_serialize(&t->tgt_vocab);
    int rc = -1;
    if (b.oom || bpe.oom || tied.oom || !src || !tgt) {
        tfm_set_error("%s: out of memory", path);
    } else {
        tfm_st_meta meta[11] = {{"format", "pt"},
                                {"tfm.format", "1"},
                                {"tfm.kind", "seq2seq"},
                                {"tfm.arch", c->arch},
                                {"tfm.config", b.s},
                                {"tfm.tokenizer.src_vocab", src},
                                {"tfm.tokenizer.tgt_vocab", tgt},
                                {"tfm.tokenizer.kind", tfm_tok_kind_name((tfm_tok_kind)t->tok_kind)}};
        int n = 8;
        if (t->bpe) meta[n++] = (tfm_st_meta){"tfm.tokenizer.bpe", bpe.s};
        if (c->share_embeddings) meta[n++] = (tfm_st_meta){"tfm.tied_weights", tied.s};
        rc = save(path, &t->model->params, meta, n);
    }
    free(src), free(tgt);
    tfm_strbuf_free(&b), tfm_strbuf_free(&bpe), tfm_strbuf_free(&tied);
    return rc;
}

int tfm_export_safetensors(const char *tfm_path, const char *st_path) {
    tfm_container c;
    if (tfm_container_load(&c, tfm_path)) return tfm_container_free(&c), -1;
    const char *kind = tfm_container_str(&c, "meta.kind");
    int rc = -1;
    if (kind && !strcmp(kind, "gpt")) {
        tfm_gpt m;
        tfm_char_vocab v;
        if (!tfm_gpt_model_load(&m, &v, NULL, tfm_path)) {
            rc = tfm_gpt_save_safetensors(&m, &v, st_path);
            tfm_gpt_free(&m);
            tfm_char_vocab_free(&v);
        }
    } else if (kind) {   /* seq2seq, or an error naming the kind */
        tfm_mt_model t;
        if (!tfm_mt_model_get(&t, &c, tfm_path)) {
            if (t.marian)   /* its vocab.json and SentencePiece files have no place in tfm's safetensors metadata */
                tfm_set_error("%s: an imported MarianMT: safetensors export is for tfm's own models (the Hugging Face "
                              "folder it came from is the safetensors form)", tfm_path);
            else if (t.ensemble[0])
                tfm_set_error("%s: a stored ensemble (decode.ensemble): export its members one by one", tfm_path);
            else rc = tfm_mt_model_save_safetensors(&t, st_path);
            tfm_mt_model_free(&t);
        }
    }
    tfm_container_free(&c);
    return rc ? tfm_error_in_data() : 0;   /* I/O errors of the load or the save keep their kind */
}

/* ------------------------------------------------------------------ import */

/* Every file tensor is a parameter of the model with its shape, every parameter has a tensor; then copy. */
static int load_params(const tfm_st_file *f, tfm_params *p) {
    char a[64], b[64];
    for (int i = 0; i < f->n; i++)
        if (!tfm_params_find(p, f->t[i].name))
            return tfm_set_error("%s: tensor '%.200s' is not a parameter of the model its config describes", f->path,
                                 f->t[i].name), -1;
    for (int i = 0; i < p->n; i++) {
        const tfm_tensor *w = p->t[i];
        const tfm_st_tensor *t = tfm_st_find(f, w->name);
        tfm_shape_str(w, a, sizeof a);
        if (!t) return tfm_set_error("%s: tensor '%s' missing (the config needs shape %s)", f->path, w->name, a), -1;
        int same = t->ndim == w->ndim;
        for (int d = 0; same && d < w->ndim; d++) same = t->shape[d] == w->shape[d];
        if (!same) {
            tfm_tensor tmp = {.ndim = t->ndim};
            memcpy(tmp.shape, t->shape, sizeof tmp.shape);
            tfm_shape_str(&tmp, b, sizeof b);
            return tfm_set_error("%s: tensor '%s' has shape %s but the config needs %s", f->path, w->name, b, a), -1;
        }
    }
    for (int i = 0; i < p->n; i++) tfm_st_read_f32(tfm_st_find(f, p->t[i]->name), p->t[i]->data);
    return tfm_ckpt_check_block(p, p->data, "tensor", 0) ? tfm_prefix_error("%s: ", f->path) : 0;   /* NaN, inf */
}

/* An edited config cannot make the import allocate far more than the file holds: the parameter count it
 * implies may exceed the file's elements by at most 2x + 2^20 (a missing tensor or layer is then named
 * exactly by load_params). Checked before the model is built. */
static int check_budget(const tfm_st_file *f, int64_t need) {
    int64_t have = 0;
    for (int i = 0; i < f->n; i++) have += (int64_t)tfm_st_numel(&f->t[i]);
    if (need < 0 || need > 2 * have + ((int64_t)1 << 20))
        return tfm_set_error("%s: tfm.config implies %lld parameters but the file holds only %lld", f->path,
                             (long long)need, (long long)have), -1;
    return 0;
}

static const char *need_meta(const tfm_st_file *f, const char *key) {
    const char *v = tfm_st_meta_get(f, key);
    if (!v) tfm_set_error("%s: __metadata__ has no '%s' (not exported by tfm?)", f->path, key);
    return v;
}

/* Parse __metadata__["tfm.config"]; every key must be one of `known` (NULL-terminated). */
static tfm_json *config_json(const tfm_st_file *f, const char *const *known) {
    const char *s = need_meta(f, "tfm.config");
    if (!s) return NULL;
    tfm_json *j = tfm_json_parse(s, strlen(s));
    if (!j) return tfm_prefix_error("%s: tfm.config: ", f->path), NULL;
    if (j->type != TFM_JSON_OBJECT) return tfm_json_free(j), tfm_set_error("%s: tfm.config is not a JSON object", f->path), NULL;
    for (const tfm_json *m = j->child; m; m = m->next) {
        int ok = 0;
        for (int k = 0; known[k] && !ok; k++) ok = !strcmp(known[k], m->key);
        if (!ok) return tfm_set_error("%s: tfm.config: unknown field '%.60s'", f->path, m->key), tfm_json_free(j), NULL;
    }
    return j;
}

static int cfg_int(const tfm_st_file *f, const tfm_json *j, const char *key, int *out) {
    if (tfm_json_int(tfm_json_get(j, key), out))
        return tfm_set_error("%s: tfm.config: '%s' missing or not an integer", f->path, key), -1;
    return 0;
}

static int cfg_float(const tfm_st_file *f, const tfm_json *j, const char *key, float *out) {
    if (tfm_json_float(tfm_json_get(j, key), out))
        return tfm_set_error("%s: tfm.config: '%s' missing or not a number", f->path, key), -1;
    return 0;
}

/* Prefix the current error with "PATH: what: ". */
static int wrap_error(const char *path, const char *what) { return tfm_prefix_error("%s: %s: ", path, what); }

static int import_gpt(const tfm_st_file *f, const char *out) {
    static const char *const known[] = {"vocab_size", "block_size", "n_layer", "n_head", "n_embd", "dropout",
                                        "attention", NULL};
    tfm_json *j = config_json(f, known);
    if (!j) return -1;
    tfm_gpt_config c = {0};
    const tfm_json *attn = tfm_json_get(j, "attention");
    int rc = -1;
#define GET(k) cfg_int(f, j, #k, &c.k) ||
    if (GPT_INT_FIELDS(GET) cfg_float(f, j, "dropout", &c.dropout)) goto done;
#undef GET
    if (!attn || attn->type != TFM_JSON_STRING || (strcmp(attn->text, "causal") && strcmp(attn->text, "synthesizer"))) {
        tfm_set_error("%s: tfm.config: 'attention' must be \"causal\" or \"synthesizer\"", f->path);
        goto done;
    }
    c.attention = !strcmp(attn->text, "synthesizer") ? TFM_ATTN_SYNTHESIZER : TFM_ATTN_CAUSAL;
    if (tfm_gpt_config_check(&c)) { wrap_error(f->path, "tfm.config"); goto done; }
    const char *chars = need_meta(f, "tfm.tokenizer.chars");
    tfm_char_vocab v;
    if (!chars) goto done;
    if (tfm_char_vocab_from_string(&v, chars)) { wrap_error(f->path, "tfm.tokenizer.chars"); goto done; }
    if (v.n != c.vocab_size) {
        tfm_set_error("%s: tfm.tokenizer.chars has %d characters but vocab_size is %d", f->path, v.n, c.vocab_size);
    } else if (!check_budget(f, tfm_gpt_n_params(&c))) {
        tfm_gpt m;
        if (tfm_gpt_init(&m, &c)) wrap_error(f->path, "tfm.config");
        else {
            if (!load_params(f, &m.params)) rc = tfm_gpt_model_save(&m, &v, NULL, out);
            tfm_gpt_free(&m);
        }
    }
    tfm_char_vocab_free(&v);
done:
    tfm_json_free(j);
    return rc;
}

static int get_vocab(const tfm_st_file *f, const char *key, tfm_vocab *v, int want) {
    const char *s = need_meta(f, key);
    if (!s) return -1;
    if (tfm_vocab_deserialize(v, s)) return wrap_error(f->path, key);
    if (v->n != want) {
        tfm_set_error("%s: %s has %d tokens but the config says %d", f->path, key, v->n, want);
        tfm_vocab_free(v);
        return -1;
    }
    return 0;
}

/* tfm.tokenizer.bpe: base64 of the SentencePiece ModelProto (the checkpoint's tokenizer.bpe bytes); its
 * pieces must be both vocabularies. */
static int get_bpe(const tfm_st_file *f, tfm_mt_model *t) {
    const char *s = need_meta(f, "tfm.tokenizer.bpe");
    if (!s) return -1;
    size_t n = 0;
    unsigned char *bytes = tfm_base64_decode(s, strlen(s), &n);
    if (!bytes) return wrap_error(f->path, "tfm.tokenizer.bpe");
    char name[600];
    snprintf(name, sizeof name, "%s: tfm.tokenizer.bpe", f->path);
    t->bpe = calloc(1, sizeof *t->bpe);
    int rc = t->bpe ? tfm_bpe_from_bytes(t->bpe, bytes, n, name) : (tfm_set_error("%s: out of memory", f->path), -1);
    free(bytes);
    if (rc) return free(t->bpe), t->bpe = NULL, -1;
    tfm_vocab v;
    if (tfm_bpe_vocab(t->bpe, &v)) return wrap_error(f->path, "tfm.tokenizer.bpe");
    int same = v.n == t->src_vocab.n && v.n == t->tgt_vocab.n;
    for (int i = 0; same && i < v.n; i++)
        same = !strcmp(v.tok[i], t->src_vocab.tok[i]) && !strcmp(v.tok[i], t->tgt_vocab.tok[i]);
    tfm_vocab_free(&v);
    if (!same)
        return tfm_set_error("%s: tfm.tokenizer.bpe: the model's pieces are not tfm.tokenizer.src_vocab / tgt_vocab",
                             f->path), -1;
    return 0;
}

/* tfm.tied_weights: present exactly when the config ties the embeddings, and then the canonical map. */
static int check_tied(const tfm_st_file *f, int share) {
    const char *s = tfm_st_meta_get(f, "tfm.tied_weights");
    if (!share) {
        if (s) return tfm_set_error("%s: tfm.tied_weights given but tfm.config has share_embeddings 0", f->path), -1;
        return 0;
    }
    if (!s) return tfm_set_error("%s: __metadata__ has no 'tfm.tied_weights' (tfm.config has share_embeddings 1)",
                                 f->path), -1;
    tfm_json *j = tfm_json_parse(s, strlen(s));
    if (!j) return wrap_error(f->path, "tfm.tied_weights");
    int ok = j->type == TFM_JSON_OBJECT && j->n == N_TIED;
    for (int i = 0; ok && i < N_TIED; i++) {
        const tfm_json *v = tfm_json_get(j, TIED_ALIASES[i]);
        ok = v && v->type == TFM_JSON_STRING && !strcmp(v->text, SHARED_NAME);
    }
    tfm_json_free(j);
    if (!ok)
        return tfm_set_error("%s: tfm.tied_weights must map %s, %s and %s to \"" SHARED_NAME "\"", f->path,
                             TIED_ALIASES[0], TIED_ALIASES[1], TIED_ALIASES[2]), -1;
    return 0;
}

/* The translator the metadata describes (config, vocabularies, tokenizer), its model built, weights unset. */
static int seq2seq_from_meta(const tfm_st_file *f, const tfm_json *j, const char *arch, tfm_mt_model *t) {
    tfm_mt_config c;
    tfm_mt_config_default(&c);
    if (strlen(arch) >= sizeof c.arch) return tfm_set_error("%s: unknown tfm.arch '%.40s'", f->path, arch), -1;
    snprintf(c.arch, sizeof c.arch, "%s", arch);
#define GET(k) cfg_int(f, j, #k, &c.k) ||
    if (S2S_INT_FIELDS(GET) cfg_float(f, j, "dropout", &c.dropout)) return -1;
#undef GET
    if (tfm_json_get(j, "share_embeddings") && cfg_int(f, j, "share_embeddings", &c.share_embeddings)) return -1;
    if (tfm_json_get(j, "pad_len") && cfg_int(f, j, "pad_len", &c.pad_len)) return -1;
    if ((tfm_json_get(j, "attention_dropout") && cfg_float(f, j, "attention_dropout", &c.attention_dropout)) ||
        (tfm_json_get(j, "activation_dropout") && cfg_float(f, j, "activation_dropout", &c.activation_dropout)))
        return -1;
    tfm_mt_config_clear_unused(&c);   /* the twins write every field; those of other architectures mean nothing */
    if (tfm_mt_config_check(&c)) return wrap_error(f->path, "tfm.config");
    if (check_tied(f, c.share_embeddings)) return -1;
    const char *kind = need_meta(f, "tfm.tokenizer.kind");
    if (!kind) return -1;
    t->tok_kind = tfm_tok_kind_parse(kind);
    if (t->tok_kind < 0) return tfm_set_error("%s: unknown tfm.tokenizer.kind '%.40s'", f->path, kind), -1;
    if (t->tok_kind != TFM_TOK_BPE && tfm_st_meta_get(f, "tfm.tokenizer.bpe"))
        return tfm_set_error("%s: tfm.tokenizer.bpe given but tfm.tokenizer.kind is '%.40s'", f->path, kind), -1;
    if (get_vocab(f, "tfm.tokenizer.src_vocab", &t->src_vocab, c.src_vocab) ||
        get_vocab(f, "tfm.tokenizer.tgt_vocab", &t->tgt_vocab, c.tgt_vocab))
        return -1;
    if (t->tok_kind == TFM_TOK_BPE && get_bpe(f, t)) return -1;
    if (check_budget(f, tfm_mt_n_params(&c))) return -1;
    t->model = tfm_mt_net_create(&c);
    return t->model ? 0 : wrap_error(f->path, "tfm.config");
}

static int import_seq2seq(const tfm_st_file *f, const char *out) {
    static const char *const known[] = {
#define NAME(k) #k,
        S2S_INT_FIELDS(NAME)
#undef NAME
        "share_embeddings", "pad_len", "dropout", "attention_dropout", "activation_dropout", NULL};
    const char *arch = need_meta(f, "tfm.arch");
    tfm_json *j = arch ? config_json(f, known) : NULL;
    if (!j) return -1;
    tfm_mt_model t, check;
    memset(&t, 0, sizeof t);
    int rc = -1;
    if (!seq2seq_from_meta(f, j, arch, &t) && !load_params(f, &t.model->params)) {
        tfm_container ck;
        tfm_container_init(&ck);
        tfm_mt_model_put(&ck, &t);
        /* what a checkpoint load would check (e.g. a lowercasing tokenizer's vocabulary) before writing */
        if (!tfm_mt_model_get(&check, &ck, f->path)) {
            tfm_mt_model_free(&check);
            rc = tfm_container_save(&ck, out);
        }
        tfm_container_free(&ck);
    }
    tfm_mt_model_free(&t);
    tfm_json_free(j);
    return rc;
}

int tfm_import_safetensors(const char *st_path, const char *tfm_path) {
    tfm_st_file f;
    int rc = -1;
    if (!tfm_st_load(&f, st_path)) {
        const char *kind = need_meta(&f, "tfm.kind");
        if (kind && !strcmp(kind, "gpt")) rc = import_gpt(&f, tfm_path);
        else if (kind && !strcmp(kind, "seq2seq")) rc = import_seq2seq(&f, tfm_path);
        else if (kind) tfm_set_error("%s: unknown tfm.kind '%.40s' (gpt, seq2seq)", st_path, kind);
    }
    tfm_st_free(&f);
    return rc ? tfm_error_in_data() : 0;   /* I/O errors of the load or the save keep their kind */
}
