/* test_loaders: the model loaders refuse every corrupt or edited checkpoint with one line naming the
 * file (issue 11): every single-bit flip of a real GPT checkpoint; config edits that would allocate
 * more than the file holds (checked before anything is built); n_head not dividing the width;
 * absurd train.* values (eval_every 0, grad_accum / eval_iters INT_MAX, negative lr, beta1 -1, zero
 * RNG); NaN / Inf weights and optimizer moments; meta.arch and tokenizer.kind edits. Also: the parameter-count formulas equal what the
 * constructors allocate. */
#include "check.h"
#include "tfm/checkpoint.h"
#include "tfm/core.h"
#include "tfm/io.h"
#include "tfm/lm.h"
#include "tfm/seq2seq.h"

#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

static char dir[256];

static const char *tpath(const char *name) {
    static char buf[8][512];
    static int k = 0;
    k = (k + 1) % 8;
    snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
    return buf[k];
}

/* ---------------------------------------------------------------- parameter-count formulas */
static void test_param_counts(void) {
    tfm_gpt_config g[] = {
        {13, 8, 2, 2, 16, 0.0f, TFM_ATTN_CAUSAL, 0.0f}, {5, 4, 1, 1, 4, 0.1f, TFM_ATTN_CAUSAL, 0.0f},
        {13, 8, 3, 4, 16, 0.0f, TFM_ATTN_SYNTHESIZER, 0.0f}, {7, 9, 1, 3, 12, 0.0f, TFM_ATTN_SYNTHESIZER, 0.0f},
    };
    int bad = 0;
    for (size_t i = 0; i < sizeof g / sizeof *g; i++) {
        tfm_gpt m;
        if (tfm_gpt_init(&m, &g[i])) { bad++; continue; }
        if ((int64_t)m.params.total != tfm_gpt_n_params(&g[i])) {
            printf("# gpt config %zu: built %zu, formula %lld\n", i, m.params.total, (long long)tfm_gpt_n_params(&g[i]));
            bad++;
        }
        tfm_gpt_free(&m);
    }
    CHECK("tfm_gpt_n_params equals the built model (causal and synthesizer)", bad == 0, "%d configs differ", bad);
    const char *arch[] = {"transformer", "transformer", "rnn", "rnn", "bahdanau", "bahdanau", "transformer"};
    bad = 0;
    for (int i = 0; i < 7; i++) {
        tfm_mt_config c;
        tfm_mt_config_default(&c);
        snprintf(c.arch, sizeof c.arch, "%s", arch[i]);
        c.src_vocab = 11 + i;
        c.tgt_vocab = 9 + 2 * i;
        c.d_model = 12;
        c.n_head = 3;
        c.ffn = 20;
        c.pre_ln = i & 1;
        c.max_len = 30;
        c.n_layer = 1 + (i & 1) * 2;
        c.embed_size = 6 + i;
        c.hidden_size = 10 - i;
        if (i == 6) {   /* tied embeddings: one (V,d) matrix for both embeddings and the output layer */
            c.share_embeddings = 1;
            c.tgt_vocab = c.src_vocab;
        }
        tfm_mt_net *m = tfm_mt_net_create(&c);
        if (!m) { printf("# %s: %s\n", arch[i], tfm_last_error()); bad++; continue; }
        if ((int64_t)m->params.total != tfm_mt_n_params(&c)) {
            printf("# %s config %d: built %zu, formula %lld\n", arch[i], i, m->params.total,
                   (long long)tfm_mt_n_params(&c));
            bad++;
        }
        tfm_mt_net_free(m);
    }
    CHECK("tfm_mt_n_params equals the built model (transformer pre/post-LN and tied embeddings, rnn, bahdanau, 1 and 3 layers)",
          bad == 0, "%d configs differ", bad);
}

/* ---------------------------------------------------------------- GPT checkpoints */
static void save_gpt(const char *path, int synth) {
    tfm_gpt_config cfg = {5, 4, 1, 2, 8, 0.0f, synth ? TFM_ATTN_SYNTHESIZER : TFM_ATTN_CAUSAL, 0.0f};
    tfm_gpt m;
    tfm_char_vocab v;
    if (tfm_gpt_init(&m, &cfg) || tfm_char_vocab_from_string(&v, "abcde")) tfm_fatal("test: %s", tfm_last_error());
    tfm_gpt_init_weights(&m, 1);
    tfm_adamw opt;
    tfm_adamw_init(&opt, &m.params, 0.9f, 0.99f, 1e-8f, 0.1f);
    for (size_t i = 0; i < m.params.total; i++) opt.m[i] = 0.01f * (float)(i % 7), opt.v[i] = 1e-4f;
    opt.t = 3;
    tfm_lm_train_state st = {10, 2, 1, 2, 5, 2, 1, 1e-3f, 1e-4f, 0.1f, 0.9f, 0.99f, 1.0f, 3, 12345, 678, NAN};
    if (tfm_gpt_save(&m, &v, &opt, &st, path)) tfm_fatal("test: %s", tfm_last_error());
    tfm_adamw_free(&opt);
    tfm_char_vocab_free(&v);
    tfm_gpt_free(&m);
}

static int load_gpt_full(const char *path) {
    tfm_gpt m;
    tfm_char_vocab v;
    tfm_adamw opt;
    tfm_lm_train_state st;
    int rc = tfm_gpt_load(&m, &v, &opt, &st, path);
    if (rc == 0) {
        tfm_adamw_free(&opt);
        tfm_char_vocab_free(&v);
        tfm_gpt_free(&m);
    }
    return rc;
}

static void expect_error(const char *label, int rc, const char *path, const char *want) {
    const char *err = tfm_last_error();
    int ok = rc == -1 && strstr(err, path) && strstr(err, want) && !strchr(err, '\n');
    CHECK(label, ok, "rc=%d err='%s' (want '%s')", rc, err, want);
    if (ok) printf("#   %s\n", err);
}

static void test_gpt_bitflips(void) {
    const char *good = tpath("gpt.tfm");
    save_gpt(good, 0);
    CHECK("tiny GPT checkpoint with optimizer state loads", load_gpt_full(good) == 0, "%s", tfm_last_error());
    size_t n = 0;
    unsigned char *raw = check_read_file(good, &n);
    unsigned char *b = malloc(n);
    int refused = 0, tried = 0;
    char first[600] = "";
    for (size_t bit = 0; bit < 8 * n; bit += 3) {   /* every third bit: all bytes, all bit positions */
        memcpy(b, raw, n);
        b[bit / 8] ^= (unsigned char)(1u << (bit % 8));
        tfm_container c;
        int rc = tfm_container_load_mem(&c, b, n, "flip.tfm");
        if (rc == 0) {   /* the container accepted it: the model loader must refuse */
            tfm_gpt m;
            tfm_char_vocab v;
            tfm_adamw opt;
            tfm_lm_train_state st;
            rc = tfm_gpt_get(&m, &v, &opt, &st, &c, "flip.tfm");
            if (rc == 0) {
                tfm_adamw_free(&opt);
                tfm_char_vocab_free(&v);
                tfm_gpt_free(&m);
            }
        }
        tfm_container_free(&c);
        tried++;
        if (rc == -1 && !strncmp(tfm_last_error(), "flip.tfm: ", 10) && !strchr(tfm_last_error(), '\n')) refused++;
        else if (!first[0]) snprintf(first, sizeof first, "bit %zu: rc=%d %s", bit, rc, tfm_last_error());
    }
    printf("# %d of %d single-bit flips of a %zu-byte GPT checkpoint refused\n", refused, tried, n);
    CHECK("every single-bit flip of a GPT checkpoint refused with one line naming the file", refused == tried,
          "%d of %d; first accepted: %s", refused, tried, first);
    free(b);
    free(raw);
}

/* Load the good checkpoint, apply one edit through the container API (so the CRCs are right: a
 * deliberate edit, not corruption), save, and expect the model loader to refuse it. */
typedef void (*edit_fn)(tfm_container *c);
/* src (a file in the test directory) edited by `edit`, saved as edited.tfm, refused by `load` with `want` */
static void edit_case(const char *src, const char *label, edit_fn edit, int (*load)(const char *path),
                      const char *want) {
    tfm_container c;
    if (tfm_container_load(&c, tpath(src))) tfm_fatal("test: %s", tfm_last_error());
    edit(&c);
    const char *p = tpath("edited.tfm");
    if (tfm_container_save(&c, p)) tfm_fatal("test: %s", tfm_last_error());
    tfm_container_free(&c);
    expect_error(label, load(p), p, want);
}
static void gpt_edit_case(const char *label, edit_fn edit, const char *want) {
    edit_case("gpt.tfm", label, edit, load_gpt_full, want);
}

static void e_n_embd(tfm_container *c) { tfm_container_add_int(c, "config.n_embd", 65536); }
static void e_n_embd_bits(tfm_container *c) { tfm_container_add_int(c, "config.n_embd", 8 | (1 << 14)); }
static void e_vocab_big(tfm_container *c) { tfm_container_add_int(c, "config.block_size", 1 << 20); }
static void e_n_head(tfm_container *c) { tfm_container_add_int(c, "config.n_head", 3); }
static void e_n_head_2x(tfm_container *c) { tfm_container_add_int(c, "config.n_head", 16); }
static void e_attention(tfm_container *c) { tfm_container_add_str(c, "config.attention", "linear"); }
static void e_vocab(tfm_container *c) { tfm_container_add_int(c, "config.vocab_size", 6); }
static void e_eval_every(tfm_container *c) { tfm_container_add_int(c, "train.eval_every", 0); }
static void e_grad_accum(tfm_container *c) { tfm_container_add_int(c, "train.grad_accum", INT_MAX); }
static void e_eval_iters(tfm_container *c) { tfm_container_add_int(c, "train.eval_iters", INT_MAX); }
static void e_batch(tfm_container *c) { tfm_container_add_int(c, "train.batch_size", INT_MAX); }
static void e_iter(tfm_container *c) { tfm_container_add_int(c, "train.iter", 11); }
static void e_warmup(tfm_container *c) { tfm_container_add_int(c, "train.warmup", INT_MAX); }
static void e_lr(tfm_container *c) { tfm_container_add_float(c, "train.lr", -1e-3f); }
static void e_lr_nan(tfm_container *c) { tfm_container_add_float(c, "train.lr", NAN); }
static void e_min_lr(tfm_container *c) { tfm_container_add_float(c, "train.min_lr", 1.0f); }
static void e_beta1(tfm_container *c) { tfm_container_add_float(c, "train.beta1", -1.0f); }
static void e_beta2(tfm_container *c) { tfm_container_add_float(c, "train.beta2", 1.0f); }
static void e_wd(tfm_container *c) { tfm_container_add_float(c, "train.weight_decay", -0.1f); }
static void e_clip(tfm_container *c) { tfm_container_add_float(c, "train.grad_clip", INFINITY); }
static void e_rng(tfm_container *c) {   /* the layout before 0.9 (i32 (4), high half first), still read */
    int r[4] = {0, 0, 0, 678};
    tfm_container_add_i32(c, "train.rng", 4, r);
}
static void e_drop_rng(tfm_container *c) { tfm_container_add_u64(c, "train.drop_rng", 0); }
static void e_rng_short(tfm_container *c) {
    int r[1] = {5};
    tfm_container_add_i32(c, "train.drop_rng", 1, r);
}
static void set_f32(tfm_container *c, const char *name, int idx, float v) {
    tfm_entry *e = tfm_container_get(c, name);
    if (!e) tfm_fatal("test: no entry %s", name);
    ((float *)e->data)[idx] = v;
}
static void e_nan_weight(tfm_container *c) { set_f32(c, "param.blocks.0.attn.W_q.weight", 5, NAN); }
static void e_inf_weight(tfm_container *c) { set_f32(c, "param.wte.weight", 0, -INFINITY); }
static void e_nan_m(tfm_container *c) { set_f32(c, "adam.m.ln_f.bias", 1, NAN); }
static void e_neg_v(tfm_container *c) { set_f32(c, "adam.v.wpe.weight", 2, -1.0f); }
static void e_extra_param(tfm_container *c) { tfm_container_add_float(c, "param.blocks.1.ln1.weight", 1.0f); }
static void e_adam_t(tfm_container *c) { tfm_container_add_int(c, "adam.t", -1); }

static void test_gpt_edits(void) {
    gpt_edit_case("config.n_embd 65536: refused before building (no 206 GB allocation)", e_n_embd, "the config implies");
    gpt_edit_case("config.n_embd one flipped bit (16392)", e_n_embd_bits, "the config implies");
    gpt_edit_case("config.block_size 2^20", e_vocab_big, "the config implies");
    gpt_edit_case("config.n_head 3 does not divide n_embd 8", e_n_head, "divisible");
    gpt_edit_case("config.n_head 16 > n_embd 8", e_n_head_2x, "divisible");
    gpt_edit_case("config.attention unknown", e_attention, "config.attention must be causal or synthesizer");
    gpt_edit_case("config.vocab_size vs tokenizer.chars", e_vocab, "config.vocab_size");
    gpt_edit_case("train.eval_every 0 (divide by zero on resume)", e_eval_every, "train.eval_every");
    gpt_edit_case("train.grad_accum INT_MAX (hang)", e_grad_accum, "train.grad_accum");
    gpt_edit_case("train.eval_iters INT_MAX (hang)", e_eval_iters, "train.eval_iters");
    gpt_edit_case("train.batch_size INT_MAX (B*T overflow)", e_batch, "train.batch_size");
    gpt_edit_case("train.iter > train.iters", e_iter, "train.iter");
    gpt_edit_case("train.warmup INT_MAX", e_warmup, "train.warmup");
    gpt_edit_case("train.lr negative", e_lr, "train.lr");
    gpt_edit_case("train.lr NaN", e_lr_nan, "train.lr");
    gpt_edit_case("train.min_lr > lr", e_min_lr, "train.min_lr");
    gpt_edit_case("train.beta1 -1", e_beta1, "train.beta1");
    gpt_edit_case("train.beta2 1", e_beta2, "train.beta2");
    gpt_edit_case("train.weight_decay negative", e_wd, "train.weight_decay");
    gpt_edit_case("train.grad_clip Inf", e_clip, "train.grad_clip");
    gpt_edit_case("train.rng zero", e_rng, "train.rng");
    gpt_edit_case("train.drop_rng zero", e_drop_rng, "train.rng");
    gpt_edit_case("train.drop_rng malformed", e_rng_short, "train.drop_rng");
    gpt_edit_case("NaN weight refused naming the entry", e_nan_weight,
                  "entry 'param.blocks.0.attn.W_q.weight' holds a non-finite value");
    gpt_edit_case("-Inf weight refused", e_inf_weight, "entry 'param.wte.weight' holds a non-finite value");
    gpt_edit_case("NaN Adam first moment refused", e_nan_m, "entry 'adam.m.ln_f.bias' holds a non-finite");
    gpt_edit_case("negative Adam second moment refused", e_neg_v, "entry 'adam.v.wpe.weight' holds a negative");
    gpt_edit_case("param.* entry the model does not have", e_extra_param, "is not a parameter of this model");
    gpt_edit_case("adam.t negative", e_adam_t, "adam.t");
}

/* ---------------------------------------------------------------- translator checkpoints */
static void save_translator(const char *path, const char *arch) {
    tfm_mt_model t = {0};
    if (tfm_vocab_deserialize(&t.src_vocab, "<pad>\n<bos>\n<eos>\n<unk>\ngo\n.\nhi") ||
        tfm_vocab_deserialize(&t.tgt_vocab, "<pad>\n<bos>\n<eos>\n<unk>\nva\n!"))
        tfm_fatal("test: %s", tfm_last_error());
    tfm_mt_config c;
    tfm_mt_config_default(&c);
    snprintf(c.arch, sizeof c.arch, "%s", arch);
    c.src_vocab = t.src_vocab.n;
    c.tgt_vocab = t.tgt_vocab.n;
    c.d_model = 8;
    c.n_head = 2;
    c.ffn = 12;
    c.max_len = 12;
    c.n_layer = 1;
    c.embed_size = 6;
    c.hidden_size = 8;
    t.model = tfm_mt_net_create(&c);
    if (!t.model) tfm_fatal("test: %s", tfm_last_error());
    t.model->vt->init_weights(t.model, 1);
    t.tok_kind = TFM_TOK_D2L;
    tfm_container k;
    tfm_container_init(&k);
    tfm_mt_model_put(&k, &t);
    tfm_mt_progress p;
    tfm_mt_progress_init(&p, 1);
    tfm_mt_progress_put(&k, &p);
    if (tfm_container_save(&k, path)) tfm_fatal("test: %s", tfm_last_error());
    tfm_container_free(&k);
    tfm_mt_model_free(&t);
}

static int load_translator_full(const char *path) {
    tfm_container c;
    if (tfm_container_load(&c, path)) {
        tfm_container_free(&c);
        return -1;
    }
    tfm_mt_model t;
    tfm_mt_progress p;
    int rc = tfm_mt_model_get(&t, &c, path);
    if (rc == 0) {
        rc = tfm_mt_progress_get(&c, &p);
        tfm_mt_model_free(&t);
    }
    tfm_container_free(&c);
    return rc;
}

static void mt_edit_case(const char *arch, const char *label, edit_fn edit, const char *want) {
    char src[64], lab[200];
    snprintf(src, sizeof src, "%s.tfm", arch);
    snprintf(lab, sizeof lab, "%s: %s", arch, label);
    edit_case(src, lab, edit, load_translator_full, want);
}

/* the inference loader (tfm_mt_model_load: the weights read from the file into the model, deferred) */
static int load_translator_infer(const char *path) {
    tfm_mt_model t;
    int rc = tfm_mt_model_load(&t, path);
    if (rc == 0) tfm_mt_model_free(&t);
    return rc;
}

static void mt_edit_case_infer(const char *label, edit_fn edit, const char *want) {
    edit_case("transformer.tfm", label, edit, load_translator_infer, want);
}

static void m_d_model(tfm_container *c) { tfm_container_add_int(c, "config.d_model", 65536); }
static void m_d_model_odd(tfm_container *c) { tfm_container_add_int(c, "config.d_model", 9); }
static void m_n_head(tfm_container *c) { tfm_container_add_int(c, "config.n_head", 3); }
static void m_max_len(tfm_container *c) { tfm_container_add_int(c, "config.max_len", 1 << 21); }
static void m_hidden(tfm_container *c) { tfm_container_add_int(c, "config.hidden_size", 65536); }
static void m_embed(tfm_container *c) { tfm_container_add_int(c, "config.embed_size", 1 << 14); }
static void m_layers(tfm_container *c) { tfm_container_add_int(c, "config.n_layer", 64); }
static void m_arch_rnn(tfm_container *c) { tfm_container_add_str(c, "meta.arch", "rnn"); }
static void m_arch_bogus(tfm_container *c) { tfm_container_add_str(c, "meta.arch", "lstm"); }
static void m_kind_bogus(tfm_container *c) { tfm_container_add_str(c, "tokenizer.kind", "bpe?"); }
static void m_capital_vocab(tfm_container *c) {
    tfm_container_add_str(c, "tokenizer.src_vocab", "<pad>\n<bos>\n<eos>\n<unk>\nGo\n.\nhi");
}
static void m_nan(tfm_container *c) { set_f32(c, "param.decoder.dense.bias", 0, NAN); }
static void m_rng(tfm_container *c) {
    int w[2] = {0, 0};
    tfm_container_add_i32(c, "train.rng", 2, w);
}
static void m_vocab_count(tfm_container *c) { tfm_container_add_int(c, "config.src_vocab", 8); }

static void test_translator_edits(void) {
    const char *archs[] = {"transformer", "rnn", "bahdanau"};
    for (int i = 0; i < 3; i++) {
        char src[64];
        snprintf(src, sizeof src, "%s.tfm", archs[i]);
        save_translator(tpath(src), archs[i]);
        char lab[128];
        snprintf(lab, sizeof lab, "%s checkpoint loads", archs[i]);
        CHECK(lab, load_translator_full(tpath(src)) == 0, "%s", tfm_last_error());
    }
    mt_edit_case("transformer", "config.d_model 65536: refused before building", m_d_model, "the config implies");
    mt_edit_case("transformer", "config.d_model odd", m_d_model_odd, "d_model");
    mt_edit_case("transformer", "config.n_head 3 does not divide d_model 8", m_n_head, "divisible");
    mt_edit_case("transformer", "config.max_len 2^21", m_max_len, "max_len");
    mt_edit_case("transformer", "NaN weight", m_nan, "entry 'param.decoder.dense.bias' holds a non-finite");
    CHECK("transformer checkpoint loads for inference (weights read from the file)",
          load_translator_infer(tpath("transformer.tfm")) == 0, "%s", tfm_last_error());
    mt_edit_case_infer("inference load: NaN weight", m_nan, "entry 'param.decoder.dense.bias' holds a non-finite");
    mt_edit_case_infer("inference load: config.d_model odd", m_d_model_odd, "d_model");
    {   /* a flipped byte in the last weight's payload: found when it is read, as a checksum mismatch */
        size_t n;
        unsigned char *raw = check_read_file(tpath("transformer.tfm"), &n);
        tfm_container c;
        if (tfm_container_load(&c, tpath("transformer.tfm"))) tfm_fatal("test: %s", tfm_last_error());
        const tfm_entry *last = NULL;
        for (int i = 0; i < c.n; i++)
            if (!strncmp(c.e[i].name, "param.", 6) && c.e[i].nbytes >= 8) last = &c.e[i];
        size_t at = 0;   /* the payload's position: its bytes' first occurrence in the file */
        for (size_t i = 0; last && i + last->nbytes <= n && !at; i++)
            if (!memcmp(raw + i, last->data, last->nbytes)) at = i;
        char want[400];
        snprintf(want, sizeof want, "entry '%s': checksum mismatch", last ? last->name : "?");
        tfm_container_free(&c);
        raw[at + 3] ^= 0x40;
        FILE *f = fopen(tpath("flip_param.tfm"), "wb");
        fwrite(raw, 1, n, f);
        fclose(f);
        free(raw);
        CHECK("inference load: the flipped weight's payload found", at > 0, "not found");
        expect_error("inference load: a flipped weight byte is a checksum mismatch naming it",
                     load_translator_infer(tpath("flip_param.tfm")), tpath("flip_param.tfm"), want);
    }
    mt_edit_case("transformer", "tokenizer.kind unknown", m_kind_bogus, "tokenizer.kind");
    mt_edit_case("transformer", "tokenizer.kind d2l with a capitalised vocabulary", m_capital_vocab, "lowercases");
    mt_edit_case("transformer", "train.rng zero", m_rng, "train.rng");
    mt_edit_case("transformer", "config.src_vocab vs tokenizer", m_vocab_count, "vocabulary sizes");
    mt_edit_case("transformer", "meta.arch unknown", m_arch_bogus, "lstm");
    mt_edit_case("rnn", "config.hidden_size 65536: refused before building", m_hidden, "the config implies");
    mt_edit_case("rnn", "config.embed_size 16384", m_embed, "the config implies");
    mt_edit_case("rnn", "config.n_layer 64 (GRU max 8)", m_layers, "n_layer");
    mt_edit_case("bahdanau", "config.hidden_size 65536: refused before building", m_hidden, "the config implies");
    mt_edit_case("bahdanau", "meta.arch edited to rnn (attention params left over)", m_arch_rnn,
                 "is not a parameter of this model");
}


int main(void) {
    if (check_tmpdir(dir, sizeof dir, "test_loaders")) return 1;
    test_param_counts();
    test_gpt_bitflips();
    test_gpt_edits();
    test_translator_edits();
    check_rm_tmpdir(dir);
    CHECK_EXIT();
}
