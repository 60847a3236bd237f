/* tfm quantize (src/train/quantize.c) and int8 checkpoints (src/core/checkpoint.c): a GPT and translators
 * (Transformer untied and tied, GRU, Bahdanau) quantized through files and loaded back equal the in-memory
 * quantization; save -> load -> save keeps the int8 weights; the roles and the flags; optimizer state dropped;
 * the file is <= 30% of the fp32 one; the int8 logits near the fp32 ones; bad input: an int8 input, an edited or
 * corrupt int8 tensor or scale, training an int8 model. Loaded for inference (translator, generator), an int8
 * model holds its int8 weights without float copies and computes the same numbers. */
#include "check.h"
#include "tfm/checkpoint.h"
#include "tfm/core.h"
#include "tfm/io.h"
#include "tfm/lm.h"
#include "tfm/quantize.h"
#include "tfm/generator.h"
#include "tfm/seq2seq.h"
#include "tfm/translator.h"

#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>

static char dir[256];

static const char *tpath(const char *name) {
    static char buf[8][512];
    static int k = 0;
    k = (k + 1) % 8;
    snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
    return buf[k];
}

static long file_size(const char *p) {
    struct stat st;
    return stat(p, &st) ? -1 : (long)st.st_size;
}

static void make_gpt(tfm_gpt *m, tfm_char_vocab *v, int C, int T) {
    tfm_gpt_config cfg = {12, T, 2, 2, C, 0.0f, TFM_ATTN_CAUSAL, 0.0f};
    if (tfm_char_vocab_from_string(v, "\n !,.?abcdeé") || tfm_gpt_init(m, &cfg)) tfm_fatal("%s", tfm_last_error());
    tfm_gpt_init_weights(m, 7);
}

/* the int8 weights of a and b (loaded / quantized) are the same bytes, scales and dequantized values */
static int same_q8(const tfm_params *a, const tfm_params *b) {
    if (a->n != b->n || tfm_params_n_q8(a) != tfm_params_n_q8(b)) return 0;
    for (int i = 0; i < a->n; i++) {
        const tfm_tensor *x = a->t[i], *y = b->t[i];
        if (!x->q8 != !y->q8 || memcmp(x->data, y->data, x->size * sizeof(float))) return 0;
        if (!x->q8) continue;
        const tfm_q8_weight *p = x->q8, *q = y->q8;
        if (p->ld != q->ld || memcmp(p->q, q->q, (size_t)p->rows * p->ld) || memcmp(p->scale, q->scale, 4 * (size_t)p->rows) ||
            memcmp(p->sum, q->sum, 4 * (size_t)p->rows))
            return 0;
    }
    return 1;
}

/* a loaded for inference like b loaded whole: the same int8 weights; no floats for them (the other parameters in
 * a block of their own, the same values) */
static int int8_only_like(const tfm_params *a, const tfm_params *b) {
    size_t floats = 0;
    if (a->n != b->n || tfm_params_n_q8(a) != tfm_params_n_q8(b) || !tfm_params_n_q8(a)) return 0;
    for (int i = 0; i < a->n; i++) {
        const tfm_tensor *x = a->t[i], *y = b->t[i];
        if (!x->q8 != !y->q8) return 0;
        if (x->q8 ? x->data != NULL || memcmp(x->q8->q, y->q8->q, (size_t)x->q8->rows * x->q8->ld) ||
                        memcmp(x->q8->scale, y->q8->scale, 4 * (size_t)x->q8->rows)
                  : x->data < a->data || x->data + x->size > a->data + a->data_floats ||
                        memcmp(x->data, y->data, x->size * sizeof(float)))
            return 0;
        floats += x->q8 ? 0 : x->size;
    }
    return a->data_floats == (floats ? floats : 1) && a->data_floats < a->total;
}

/* in memory what tfm quantize does with opts o */
static void quantize_in_memory(tfm_params *p, const char *kind, const tfm_quantize_opts *o) {
    for (int i = 0; i < p->n; i++)
        if (p->t[i]->ndim == 2 && tfm_quantize_selects(o, tfm_q8_role_of(kind, p->t[i]->name)) && tfm_params_quantize(p, i))
            tfm_fatal("%s", tfm_last_error());
}

static void test_gpt(void) {
    tfm_gpt m, q, r;
    tfm_char_vocab v, vq, vr;
    make_gpt(&m, &v, 16, 8);
    tfm_adamw opt;
    tfm_adamw_init(&opt, &m.params, 0.9f, 0.99f, 1e-8f, 0.1f);
    tfm_lm_train_state st = {10, 2, 1, 2, 5, 2, 1, 1e-3f, 1e-4f, 0.1f, 0.9f, 0.99f, 1.0f, 3, 12345, 678, NAN};
    const char *f32 = tpath("gpt.tfm"), *q8 = tpath("gpt.q8.tfm");
    if (tfm_gpt_save(&m, &v, &opt, &st, f32)) tfm_fatal("%s", tfm_last_error());
    tfm_quantize_opts o;
    tfm_quantize_opts_default(&o);
    tfm_quantize_report rep;
    int rc = tfm_quantize_file(f32, q8, &o, &rep);
    CHECK("quantize_gpt", rc == 0, "%s", tfm_last_error());
    CHECK("quantize_gpt_report", rep.n_q8 == 2 + 2 * 6 && rep.n_tensors == m.params.n && rep.dropped > 0 &&
          rep.params == (int64_t)m.params.total, "n_q8 %d of %d, dropped %d", rep.n_q8, rep.n_tensors, rep.dropped);
    tfm_container c;
    rc = tfm_container_load(&c, q8);
    int no_state = 1;
    for (int i = 0; !rc && i < c.n; i++) no_state &= strncmp(c.e[i].name, "adam.", 5) && strncmp(c.e[i].name, "train.", 6);
    const tfm_entry *qe = rc ? NULL : tfm_container_get(&c, "param.wte.weight");
    CHECK("quantize_gpt_file_entries", !rc && no_state && tfm_container_get(&c, "meta.quantized") && qe &&
          qe->dtype == TFM_DT_I8 && tfm_container_get(&c, "qscale.wte.weight") && tfm_ckpt_n_q8(&c) == rep.n_q8 &&
          tfm_ckpt_stored_params(&c) == (int64_t)m.params.total, "entries");
    tfm_container_free(&c);
    /* loaded = quantized in memory */
    rc = tfm_gpt_load(&q, &vq, NULL, NULL, q8);
    quantize_in_memory(&m.params, "gpt", &o);
    CHECK("quantize_gpt_load_equals_in_memory", rc == 0 && same_q8(&q.params, &m.params), "%s", rc ? tfm_last_error() : "differs");
    /* save -> load keeps it */
    const char *again = tpath("gpt.q8.again.tfm");
    rc = tfm_gpt_save(&q, &vq, NULL, NULL, again) || tfm_gpt_load(&r, &vr, NULL, NULL, again);
    CHECK("quantize_gpt_save_load_round_trip", rc == 0 && same_q8(&q.params, &r.params), "%s", tfm_last_error());
    if (!rc) tfm_gpt_free(&r), tfm_char_vocab_free(&vr);
    /* inference only */
    tfm_adamw o2;
    tfm_lm_train_state st2;
    CHECK("quantize_gpt_resume_refused", tfm_gpt_load(&r, &vr, &o2, &st2, q8) == -1 && strstr(tfm_last_error(), q8) &&
          strstr(tfm_last_error(), "inference only"), "err=%s", tfm_last_error());
    CHECK("quantize_adamw_init_refuses_int8", tfm_adamw_init(&o2, &q.params, 0.9f, 0.99f, 1e-8f, 0) == -1 &&
          strstr(tfm_last_error(), "int8"), "err=%s", tfm_last_error());
    /* an int8 input */
    CHECK("quantize_refuses_int8_input", tfm_quantize_file(q8, tpath("x.tfm"), &o, NULL) == -1 &&
          strstr(tfm_last_error(), "already an int8 model") && file_size(tpath("x.tfm")) < 0, "err=%s", tfm_last_error());
    /* --output-layer fp32 keeps the tied wte, --embeddings fp32 the position table */
    tfm_quantize_opts o3 = {0, 0};
    rc = tfm_quantize_file(f32, tpath("lin.tfm"), &o3, &rep);
    tfm_gpt_free(&r), tfm_char_vocab_free(&vr);
    rc = rc || tfm_gpt_load(&r, &vr, NULL, NULL, tpath("lin.tfm"));
    CHECK("quantize_gpt_linear_only", rc == 0 && rep.n_q8 == 12 && !tfm_params_find(&r.params, "wte.weight")->q8 &&
          !tfm_params_find(&r.params, "wpe.weight")->q8 && tfm_params_find(&r.params, "blocks.0.attn.W_q.weight")->q8,
          "n_q8 %d", rep.n_q8);
    if (!rc) tfm_gpt_free(&r), tfm_char_vocab_free(&vr);
    /* int8 logits near the fp32 ones (of the same, dequantized weights: only the activations are rounded more) */
    tfm_graph g;
    tfm_graph_init(&g, 1);
    int ids[8] = {1, 5, 6, 7, 2, 8, 9, 3};
    g.grad_enabled = 0;
    tfm_tensor *lq = tfm_gpt_forward(&g, &q, ids, 1, 8);
    float *a = malloc(sizeof(float) * lq->size);
    memcpy(a, lq->data, sizeof(float) * lq->size);
    size_t n = lq->size;
    tfm_graph_reset(&g);
    g.grad_enabled = 1;   /* tracking grads: the float path, on the dequantized weights */
    tfm_tensor *lf = tfm_gpt_forward(&g, &q, ids, 1, 8);
    double md = max_abs_diff(a, lf->data, n), mx = 0;
    for (size_t i = 0; i < n; i++) mx = fmax(mx, fabs(lf->data[i]));
    CHECK("quantize_gpt_int8_logits_near_float", md <= 0.02 * mx && md > 0, "max |d| %g, max |logit| %g", md, mx);
    printf("#   int8 vs float logits: max |d| %.3g (max |logit| %.3g)\n", md, mx);
    /* loaded for inference (the generator): the int8 weights once, the same logits to the bit */
    tfm_generator *gen = tfm_generator_load(q8, NULL);
    tfm_gpt *gm = gen ? (tfm_gpt *)tfm_generator_model(gen) : NULL;
    CHECK("quantize_gpt_generator_holds_int8_once", gm && int8_only_like(&gm->params, &q.params), "%s",
          gm ? "floats kept or weights differ" : tfm_last_error());
    if (gm) {
        tfm_graph_reset(&g);
        g.grad_enabled = 0;
        tfm_tensor *li = tfm_gpt_forward(&g, gm, ids, 1, 8);
        CHECK("quantize_gpt_generator_same_logits", !memcmp(li->data, a, sizeof(float) * n), "max |d| %g",
              max_abs_diff(li->data, a, n));
    }
    tfm_generator_free(gen);
    /* an int8 table's lookup at inference reads its int8 rows: exactly the dequantized floats a whole load holds */
    tfm_graph_reset(&g);
    g.grad_enabled = 0;
    tfm_tensor *wte = tfm_params_find(&q.params, "wte.weight");
    tfm_tensor *rows = tfm_embedding(&g, wte, ids, 1, (int[]){8});
    int same_rows = wte->q8 != NULL;
    for (int i = 0; i < 8; i++) same_rows &= !memcmp(rows->data + i * 16, wte->data + ids[i] * 16, 16 * sizeof(float));
    CHECK("quantize_embedding_int8_rows_are_the_floats", same_rows, "a looked-up row differs");
    free(a);
    tfm_graph_free(&g);
    tfm_gpt_free(&q), tfm_char_vocab_free(&vq);
    tfm_adamw_free(&opt);
    tfm_gpt_free(&m), tfm_char_vocab_free(&v);
}

/* the file of a model of a useful size: <= 30% of the fp32 weights-only file */
static void test_size(void) {
    tfm_gpt m;
    tfm_char_vocab v;
    make_gpt(&m, &v, 128, 64);
    const char *f32 = tpath("big.tfm"), *q8 = tpath("big.q8.tfm");
    tfm_quantize_opts o;
    tfm_quantize_opts_default(&o);
    int rc = tfm_gpt_save(&m, &v, NULL, NULL, f32) || tfm_quantize_file(f32, q8, &o, NULL);
    long a = file_size(f32), b = file_size(q8);
    CHECK("quantize_file_le_30_percent", rc == 0 && b > 0 && b * 10 <= a * 3, "%ld vs %ld bytes", b, a);
    printf("#   %zu parameters: fp32 file %ld bytes, int8 %ld (%.1f%%)\n", m.params.total, a, b, 100.0 * b / a);
    tfm_gpt_free(&m), tfm_char_vocab_free(&v);
}

static void test_roles(void) {
    int ok = tfm_q8_role_of("gpt", "wte.weight") == TFM_Q8_ROLE_TIED && tfm_q8_role_of("gpt", "wpe.weight") == TFM_Q8_ROLE_EMBEDDING &&
             tfm_q8_role_of("gpt", "blocks.0.attn.w2") == TFM_Q8_ROLE_KEPT &&
             tfm_q8_role_of("gpt", "blocks.0.attn.w1.weight") == TFM_Q8_ROLE_LINEAR &&
             tfm_q8_role_of("seq2seq", "shared.embedding.weight") == TFM_Q8_ROLE_TIED &&
             tfm_q8_role_of("seq2seq", "encoder.embedding.weight") == TFM_Q8_ROLE_EMBEDDING &&
             tfm_q8_role_of("seq2seq", "decoder.dense.weight") == TFM_Q8_ROLE_OUTPUT &&
             tfm_q8_role_of("seq2seq", "decoder.rnn.weight_hh_l0") == TFM_Q8_ROLE_LINEAR;
    CHECK("quantize_roles", ok, "a role differs");
}

/* every translator kind through a file, loaded back equal to the in-memory quantization */
static void test_translators(void) {
    const char *archs[] = {"transformer", "transformer", "rnn", "bahdanau"};
    for (int a = 0; a < 4; a++) {
        tfm_mt_model t = {0}, u;
        if (tfm_vocab_deserialize(&t.src_vocab, "<pad>\n<bos>\n<eos>\n<unk>\ngo\n.\nhi\nrun") ||
            tfm_vocab_deserialize(&t.tgt_vocab, "<pad>\n<bos>\n<eos>\n<unk>\nva\n!\ncours"))
            tfm_fatal("%s", tfm_last_error());
        tfm_mt_config c;
        tfm_mt_config_default(&c);
        snprintf(c.arch, sizeof c.arch, "%s", archs[a]);
        c.src_vocab = t.src_vocab.n, c.tgt_vocab = t.tgt_vocab.n;
        c.d_model = 8, c.n_head = 2, c.ffn = 12, c.max_len = 8, c.n_layer = 1, c.embed_size = 6, c.hidden_size = 8;
        if (a == 1) c.share_embeddings = 1, c.src_vocab = c.tgt_vocab = t.src_vocab.n, tfm_vocab_free(&t.tgt_vocab),
                    tfm_vocab_deserialize(&t.tgt_vocab, "<pad>\n<bos>\n<eos>\n<unk>\ngo\n.\nhi\nrun");
        t.model = tfm_mt_net_create(&c);
        if (!t.model) tfm_fatal("%s", tfm_last_error());
        t.model->vt->init_weights(t.model, 3);
        t.tok_kind = TFM_TOK_D2L;
        tfm_container k;
        tfm_container_init(&k);
        tfm_mt_model_put(&k, &t);
        const char *f32 = tpath("mt.tfm"), *q8 = tpath("mt.q8.tfm");
        if (tfm_container_save(&k, f32)) tfm_fatal("%s", tfm_last_error());
        tfm_container_free(&k);
        tfm_quantize_opts o;
        tfm_quantize_opts_default(&o);
        tfm_quantize_report rep;
        int rc = tfm_quantize_file(f32, q8, &o, &rep) || tfm_mt_model_load(&u, q8);
        int n2d = 0;
        for (int i = 0; i < t.model->params.n; i++) n2d += t.model->params.t[i]->ndim == 2;
        quantize_in_memory(&t.model->params, "seq2seq", &o);
        char name[64];
        snprintf(name, sizeof name, "quantize_%s%s_every_2d_weight", archs[a], a == 1 ? "_tied" : "");
        CHECK(name, rc == 0 && rep.n_q8 == n2d && same_q8(&u.model->params, &t.model->params), "%s",
              rc ? tfm_last_error() : "differs");
        if (!rc) {   /* loaded for inference: the int8 weights once, the same translations */
            tfm_mt_model w;
            int rw = tfm_mt_model_load_for_inference(&w, q8);
            const char *tied = a == 1 ? "_tied" : "";
            snprintf(name, sizeof name, "quantize_%s%s_inference_load_holds_int8_once", archs[a], tied);
            CHECK(name, !rw && int8_only_like(&w.model->params, &u.model->params), "%s",
                  rw ? tfm_last_error() : "floats kept or weights differ");
            tfm_translator *tu = tfm_translator_from_model(&u, NULL);
            tfm_translator *tw = rw ? NULL : tfm_translator_from_model(&w, NULL);
            const char *src[3] = {"go .", "hi run", "run go hi ."};
            tfm_translation ou[3] = {0}, ow[3] = {0};
            int same = tu && tw && !tfm_translator_translate_batch(tu, src, 3, NULL, ou) &&
                       !tfm_translator_translate_batch(tw, src, 3, NULL, ow);
            for (int i = 0; same && i < 3; i++) same = !strcmp(ou[i].hypotheses[0], ow[i].hypotheses[0]);
            snprintf(name, sizeof name, "quantize_%s%s_inference_load_same_translations", archs[a], tied);
            CHECK(name, same, "%s", tfm_last_error());
            for (int i = 0; i < 3; i++) tfm_translation_free(&ou[i]), tfm_translation_free(&ow[i]);
            tfm_translator_free(tu), tfm_translator_free(tw);
        }
        tfm_mt_model_free(&t);
    }
}

/* edit one entry of the int8 file in memory, save (valid CRCs), load: one line naming the file and entry */
typedef void (*edit_fn)(tfm_container *c);
static void expect_refused(const char *label, edit_fn edit, const char *want) {
    tfm_container c;
    if (tfm_container_load(&c, tpath("gpt.q8.tfm"))) tfm_fatal("%s", tfm_last_error());
    edit(&c);
    const char *p = tpath("edited.tfm");
    if (tfm_container_save(&c, p)) tfm_fatal("%s", tfm_last_error());
    tfm_container_free(&c);
    tfm_gpt m;
    tfm_char_vocab v;
    int rc = tfm_gpt_load(&m, &v, NULL, NULL, p);
    const char *err = tfm_last_error();
    int ok = rc == -1 && strstr(err, p) && strstr(err, want) && !strchr(err, '\n') && tfm_last_error_kind() == TFM_ERR_DATA;
    CHECK(label, ok, "rc=%d err='%s' (want '%s')", rc, err, want);
    if (ok) printf("#   %s\n", err);
    if (!rc) tfm_gpt_free(&m), tfm_char_vocab_free(&v);
}
static void e_minus128(tfm_container *c) { ((int8_t *)tfm_container_get(c, "param.blocks.1.ffn.dense1.weight")->data)[5] = -128; }
static void e_no_scale(tfm_container *c) {
    tfm_entry *e = tfm_container_get(c, "qscale.wpe.weight");
    snprintf(e->name, sizeof e->name, "qscale.wpe.weights");
}
static void e_scale_shape(tfm_container *c) {
    int s[1] = {3};
    tfm_container_add(c, "qscale.wte.weight", TFM_DT_F32, 1, s, NULL, 12);
}
static void e_scale_nan(tfm_container *c) { ((float *)tfm_container_get(c, "qscale.wte.weight")->data)[2] = NAN; }
static void e_scale_neg(tfm_container *c) { ((float *)tfm_container_get(c, "qscale.wte.weight")->data)[0] = -1.0f; }
static void e_stray_scale(tfm_container *c) {
    int s[1] = {16};
    tfm_container_add(c, "qscale.ln_f.weight", TFM_DT_F32, 1, s, NULL, 64);
}
static void e_i8_1d(tfm_container *c) {
    int s[1] = {16};
    tfm_container_add(c, "param.ln_f.bias", TFM_DT_I8, 1, s, NULL, 16);
    tfm_container_add(c, "qscale.ln_f.bias", TFM_DT_F32, 1, s, NULL, 64);
}
static void e_i8_transposed(tfm_container *c) {
    tfm_entry *e = tfm_container_get(c, "param.wpe.weight");
    int t = e->shape[0];
    e->shape[0] = e->shape[1], e->shape[1] = t;
}

static void test_bad_files(void) {
    expect_refused("q8_load_refuses_minus_128", e_minus128, "entry 'param.blocks.1.ffn.dense1.weight' holds -128 at index 5");
    expect_refused("q8_load_refuses_missing_scale", e_no_scale, "entry 'qscale.wpe.weight' missing");
    expect_refused("q8_load_refuses_scale_shape", e_scale_shape, "entry 'qscale.wte.weight' has the wrong type or shape");
    expect_refused("q8_load_refuses_nan_scale", e_scale_nan, "entry 'qscale.wte.weight' holds a non-finite value");
    expect_refused("q8_load_refuses_negative_scale", e_scale_neg, "entry 'qscale.wte.weight' holds a negative value");
    expect_refused("q8_load_refuses_stray_scale", e_stray_scale, "entry 'qscale.ln_f.weight' scales no int8 parameter");
    expect_refused("q8_load_refuses_int8_1d", e_i8_1d, "entry 'param.ln_f.bias' has the wrong type or shape (int8 is for 2-D");
    expect_refused("q8_load_refuses_int8_shape", e_i8_transposed, "entry 'param.wpe.weight' has the wrong type or shape");
    /* a flipped bit in an int8 payload: the entry's CRC */
    size_t n = 0;
    unsigned char *b = check_read_file(tpath("gpt.q8.tfm"), &n);
    tfm_container c;
    tfm_container_load(&c, tpath("gpt.q8.tfm"));
    const tfm_entry *e = tfm_container_get(&c, "param.blocks.0.ffn.dense2.weight");
    unsigned char *at = memmem(b, n, e->data, e->nbytes);
    tfm_container_free(&c);
    if (at) at[7] ^= 0x10;
    FILE *f = fopen(tpath("flip.tfm"), "wb");
    fwrite(b, 1, n, f);
    fclose(f);
    free(b);
    tfm_gpt m;
    tfm_char_vocab v;
    int rc = tfm_gpt_load(&m, &v, NULL, NULL, tpath("flip.tfm"));
    CHECK("q8_load_refuses_flipped_int8_byte", at && rc == -1 && strstr(tfm_last_error(), "param.blocks.0.ffn.dense2.weight': checksum mismatch"),
          "rc=%d err=%s", rc, tfm_last_error());
}

int main(void) {
    if (check_tmpdir(dir, sizeof dir, "test_quantize")) return 1;
    test_roles();
    test_gpt();
    test_size();
    test_translators();
    test_bad_files();
    check_rm_tmpdir(dir);
    return check_failures ? 1 : 0;
}
