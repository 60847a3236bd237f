/* tfm quantize: a checkpoint -> an int8 model (include/tfm/quantize.h). */
#include "tfm/quantize.h"
#include "tfm/checkpoint.h"
#include "tfm/train.h"
#include <stdio.h>
#include <string.h>

void tfm_quantize_opts_default(tfm_quantize_opts *o) {
    o->embeddings = 1;
    o->output = 1;
}

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && !strcmp(s + n - m, suffix);
}

tfm_q8_role tfm_q8_role_of(const char *kind, const char *name) {
    if (!strcmp(kind, "gpt")) {
        if (!strcmp(name, "wte.weight")) return TFM_Q8_ROLE_TIED;   /* token embedding and LM head */
        if (!strcmp(name, "wpe.weight")) return TFM_Q8_ROLE_EMBEDDING;
        if (ends_with(name, ".attn.w2")) return TFM_Q8_ROLE_KEPT;   /* synthesizer: x w2, not x w2^T */
        return TFM_Q8_ROLE_LINEAR;
    }
    if (!strcmp(name, "shared.embedding.weight")) return TFM_Q8_ROLE_TIED;
    if (ends_with(name, "embedding.weight")) return TFM_Q8_ROLE_EMBEDDING;
    if (!strcmp(name, "decoder.dense.weight")) return TFM_Q8_ROLE_OUTPUT;
    return TFM_Q8_ROLE_LINEAR;
}

int tfm_quantize_selects(const tfm_quantize_opts *o, tfm_q8_role role) {
    switch (role) {
    case TFM_Q8_ROLE_LINEAR: return 1;
    case TFM_Q8_ROLE_EMBEDDING: return o->embeddings;
    case TFM_Q8_ROLE_OUTPUT: case TFM_Q8_ROLE_TIED: return o->output;
    default: return 0;
    }
}

/* the selected 2-D parameters of p into int8 */
static int quantize_params(tfm_params *p, const char *kind, const tfm_quantize_opts *o, tfm_quantize_report *r,
                           const char *path) {
    for (int i = 0; i < p->n; i++) {
        const tfm_tensor *t = p->t[i];
        r->n_tensors++, r->params += (int64_t)t->size;
        if (t->ndim != 2 || !tfm_quantize_selects(o, tfm_q8_role_of(kind, t->name))) continue;
        if (tfm_params_quantize(p, i)) return tfm_prefix_error("%s: ", path);
        r->n_q8++, r->params_q8 += (int64_t)t->size;
    }
    return 0;
}

/* out = in's entries without param.* (now from p), adam.* and train.*, plus meta.quantized */
static int build_output(tfm_container *out, const tfm_container *in, const tfm_params *p, const tfm_quantize_report *r,
                        const char *path) {
    for (int i = 0; i < in->n; i++) {
        const tfm_entry *e = &in->e[i];
        if (!strncmp(e->name, "param.", 6) || !strncmp(e->name, TFM_Q8_SCALE_PREFIX, strlen(TFM_Q8_SCALE_PREFIX)) ||
            !strcmp(e->name, "meta.quantized") || !strncmp(e->name, "adam.", 5) || !strncmp(e->name, "train.", 6))
            continue;
        if (!tfm_container_add(out, e->name, e->dtype, e->ndim, e->shape, e->data, e->nbytes))
            return tfm_prefix_error("%s: ", path);
    }
    char note[200];
    snprintf(note, sizeof note, "int8: %d of %d tensors (%lld of %lld parameters), one fp32 scale per row; activations "
             "per row at run time", r->n_q8, r->n_tensors, (long long)r->params_q8, (long long)r->params);
    if (!tfm_container_add_str(out, "meta.quantized", note)) return tfm_prefix_error("%s: ", path);
    tfm_ckpt_put_params(out, p);
    return 0;
}

int tfm_quantize_file(const char *in_path, const char *out_path, const tfm_quantize_opts *o, tfm_quantize_report *r) {
    tfm_quantize_report mine;
    if (!r) r = &mine;
    memset(r, 0, sizeof *r);
    tfm_container in, out;
    tfm_container_init(&out);
    if (tfm_container_load(&in, in_path)) return tfm_container_free(&in), -1;
    int rc = -1;
    const char *kind = tfm_container_str(&in, "meta.kind");
    if (!kind) goto done;
    if (tfm_ckpt_n_q8(&in)) {
        tfm_set_error("%s: already an int8 model (%d int8 tensors): quantize the fp32 checkpoint instead", in_path,
                      tfm_ckpt_n_q8(&in));
        goto done;
    }
    for (int i = 0; i < in.n; i++) r->dropped += !strncmp(in.e[i].name, "adam.", 5) || !strncmp(in.e[i].name, "train.", 6);
    if (!strcmp(kind, "gpt")) {
        tfm_gpt m;
        tfm_char_vocab v;
        if (tfm_gpt_get(&m, &v, NULL, NULL, &in, in_path)) goto done;
        rc = quantize_params(&m.params, kind, o, r, in_path);
        if (!rc) rc = build_output(&out, &in, &m.params, r, out_path);
        tfm_gpt_free(&m);
        tfm_char_vocab_free(&v);
    } else {   /* seq2seq, or an error naming the kind */
        tfm_mt_model t;
        if (tfm_mt_model_get(&t, &in, in_path)) goto done;
        if (t.ensemble[0]) {
            tfm_set_error("%s: a stored ensemble (decode.ensemble): quantize each member, then store them together "
                          "again (tfm average --ensemble)", in_path);
            tfm_mt_model_free(&t);
            goto done;
        }
        rc = quantize_params(&t.model->params, kind, o, r, in_path);
        if (!rc) rc = build_output(&out, &in, &t.model->params, r, out_path);
        tfm_mt_model_free(&t);
    }
    if (!rc) rc = tfm_container_save(&out, out_path);
done:
    tfm_container_free(&in);
    tfm_container_free(&out);
    return rc ? tfm_error_in_data() : 0;   /* I/O and out-of-memory errors keep their kind */
}
