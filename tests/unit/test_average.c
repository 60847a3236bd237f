/* Checkpoint averaging (tfm_checkpoint_average): equal models give the model bit for bit, two or three
 * models give the elementwise mean, training state is dropped, and every mismatch (shape, config,
 * vocabulary, missing/extra entry, NaN, output = input) is refused with the file and entry named and
 * nothing written. */
#include <stdlib.h>
#include <unistd.h>

#include "check.h"
#include "tfm/core.h"
#include "tfm/eval.h"
#include "tfm/io.h"

static char dir[256];

static const char *path(const char *name) {
    static char buf[8][512];
    static int k;
    k = (k + 1) % 8;
    snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
    return buf[k];
}

typedef struct {
    int n_layer;
    const char *vocab;
    int w_rows;          /* param.w is (w_rows, 4) */
    unsigned seed;
    int with_bias, extra, nan;
} spec;

/* A checkpoint in the shape every tfm model writes: meta, config, tokenizer, params, adam, train. */
static void write_ckpt(const char *file, spec s) {
    tfm_container c;
    tfm_container_init(&c);
    tfm_container_add_str(&c, "meta.kind", "seq2seq");
    tfm_container_add_str(&c, "meta.arch", "transformer");
    tfm_container_add_int(&c, "config.n_layer", s.n_layer);
    tfm_container_add_float(&c, "config.dropout", 0.1f);
    tfm_container_add_str(&c, "tokenizer.src_vocab", s.vocab);
    float w[64], b[4];
    uint64_t st = s.seed;
    for (int i = 0; i < 64; i++) {
        st = st * 6364136223846793005ull + 1442695040888963407ull;
        w[i] = (float)((double)(st >> 40) / (double)(1ull << 24) - 0.5) * 3.0f;
    }
    for (int i = 0; i < 4; i++) b[i] = w[i] * 0.25f + 1.0f;
    if (s.nan) w[5] = NAN;
    int shw[2] = {s.w_rows, 4}, shb[1] = {4};
    tfm_container_add_f32(&c, "param.w", 2, shw, w);
    if (s.with_bias) tfm_container_add_f32(&c, "param.b", 1, shb, b);
    if (s.extra) tfm_container_add_f32(&c, "param.extra", 1, shb, b);
    tfm_container_add_f32(&c, "adam.m.w", 2, shw, w);
    tfm_container_add_int(&c, "adam.t", (int)s.seed);
    tfm_container_add_int(&c, "train.step", (int)s.seed * 10);
    if (tfm_container_save(&c, file)) printf("  save %s: %s\n", file, tfm_last_error());
    tfm_container_free(&c);
}

static spec base_spec(unsigned seed) { return (spec){2, "<pad>\nHund\nKatze", 3, seed, 1, 0, 0}; }

/* averages a and b into out; returns the error message ("" on success) */
static const char *avg2(const char *a, const char *b, const char *out) {
    const char *in[2] = {a, b};
    return tfm_checkpoint_average(in, 2, out) ? tfm_last_error() : "";
}

static void test_equal_and_mean(void) {
    write_ckpt(path("a.tfm"), base_spec(1));
    write_ckpt(path("b.tfm"), base_spec(2));
    write_ckpt(path("c.tfm"), base_spec(3));
    tfm_container a, b, c, o;
    tfm_container_load(&a, path("a.tfm"));
    tfm_container_load(&b, path("b.tfm"));
    tfm_container_load(&c, path("c.tfm"));

    const char *err = avg2(path("a.tfm"), path("a.tfm"), path("aa.tfm"));
    CHECK("average_equal_ok", !*err, "%s", err);
    int ok = !tfm_container_load(&o, path("aa.tfm"));
    const tfm_entry *ow = ok ? tfm_container_get(&o, "param.w") : NULL, *ob = ok ? tfm_container_get(&o, "param.b") : NULL;
    const tfm_entry *aw = tfm_container_get(&a, "param.w"), *ab = tfm_container_get(&a, "param.b");
    CHECK("average_equal_is_model_bitwise",
          ow && ob && ow->nbytes == aw->nbytes && !memcmp(ow->data, aw->data, aw->nbytes) && !memcmp(ob->data, ab->data, 16),
          "params differ");
    CHECK("average_drops_training_state",
          ok && !tfm_container_get(&o, "adam.m.w") && !tfm_container_get(&o, "adam.t") && !tfm_container_get(&o, "train.step"),
          "adam/train entries kept");
    const char *kind = ok ? tfm_container_str(&o, "meta.kind") : NULL, *voc = ok ? tfm_container_str(&o, "tokenizer.src_vocab") : NULL;
    const char *note = ok ? tfm_container_str(&o, "meta.averaged") : NULL;
    int nl = 0;
    CHECK("average_keeps_config_and_vocab",
          kind && !strcmp(kind, "seq2seq") && voc && !strcmp(voc, "<pad>\nHund\nKatze") &&
              !tfm_container_int(&o, "config.n_layer", &nl) && nl == 2,
          "kind %s vocab %s", kind ? kind : "-", voc ? voc : "-");
    CHECK("average_records_inputs", note && !strncmp(note, "mean of 2 checkpoints: ", 23) && strstr(note, "a.tfm"),
          "meta.averaged = %s", note ? note : "(missing)");
    tfm_container_free(&o);

    /* two different models: the correctly rounded elementwise mean */
    err = avg2(path("a.tfm"), path("b.tfm"), path("ab.tfm"));
    CHECK("average_two_ok", !*err, "%s", err);
    ok = !tfm_container_load(&o, path("ab.tfm"));
    ow = ok ? tfm_container_get(&o, "param.w") : NULL;
    const float *x = aw->data, *y = tfm_container_get(&b, "param.w")->data, *z = tfm_container_get(&c, "param.w")->data;
    int bad = !ow, differ = 0;
    for (int i = 0; ow && i < 12; i++) {
        bad += ((const float *)ow->data)[i] != (float)(((double)x[i] + (double)y[i]) / 2);
        differ += x[i] != y[i];
    }
    CHECK("average_two_is_elementwise_mean", !bad && differ == 12, "%d elements differ (inputs differ in %d)", bad, differ);
    tfm_container_free(&o);

    /* three: sum in double, one rounding */
    const char *in3[3] = {path("a.tfm"), path("b.tfm"), path("c.tfm")};
    ok = !tfm_checkpoint_average(in3, 3, path("abc.tfm")) && !tfm_container_load(&o, path("abc.tfm"));
    ow = ok ? tfm_container_get(&o, "param.w") : NULL;
    bad = !ow;
    for (int i = 0; ow && i < 12; i++)
        bad += ((const float *)ow->data)[i] != (float)(((double)x[i] + (double)y[i] + (double)z[i]) / 3);
    CHECK("average_three_is_mean", !bad, "%d elements differ: %s", bad, ok ? "" : tfm_last_error());
    tfm_container_free(&o);
    /* an average can be averaged again (its own meta.averaged is not compared) */
    err = avg2(path("ab.tfm"), path("abc.tfm"), path("again.tfm"));
    CHECK("average_of_averages", !*err, "%s", err);
    tfm_container_free(&a);
    tfm_container_free(&b);
    tfm_container_free(&c);
}

/* expect the average of a.tfm and the file made from s to fail with an error containing want1 and
 * want2, and no output file */
static void refused(const char *name, spec s, const char *want1, const char *want2) {
    write_ckpt(path("bad.tfm"), s);
    unlink(path("out.tfm"));
    const char *err = avg2(path("a.tfm"), path("bad.tfm"), path("out.tfm"));
    CHECK(name, *err && strstr(err, want1) && strstr(err, want2) && !strchr(err, '\n') && access(path("out.tfm"), F_OK),
          "error '%s' (want '%s' and '%s'; output %s)", err, want1, want2, access(path("out.tfm"), F_OK) ? "absent" : "written");
}

static void test_refusals(void) {
    write_ckpt(path("a.tfm"), base_spec(1));
    spec s = base_spec(2);
    s.w_rows = 4;
    refused("average_refuses_shape", s, "bad.tfm: entry 'param.w'", "shape (4, 4)");
    s = base_spec(2);
    s.n_layer = 3;
    refused("average_refuses_config", s, "bad.tfm: entry 'config.n_layer' is 3 but 2 in", "a.tfm");
    s = base_spec(2);
    s.vocab = "<pad>\nHund\nMaus";
    refused("average_refuses_vocab", s, "bad.tfm: entry 'tokenizer.src_vocab' differs", "line 3");
    s = base_spec(2);
    s.with_bias = 0;
    refused("average_refuses_missing", s, "bad.tfm: entry 'param.b' missing", "a.tfm");
    s = base_spec(2);
    s.extra = 1;
    refused("average_refuses_extra", s, "bad.tfm: extra entry 'param.extra'", "a.tfm");
    s = base_spec(2);
    s.nan = 1;
    refused("average_refuses_nan", s, "bad.tfm: entry 'param.w'", "non-finite value at element 5");

    /* the output may not be an input, by name or through a link; the input stays intact */
    tfm_container a0;
    tfm_container_load(&a0, path("a.tfm"));
    const char *err = avg2(path("a.tfm"), path("bad.tfm"), path("a.tfm"));
    CHECK("average_refuses_output_is_input", strstr(err, "is the input file") && strstr(err, "a.tfm"), "'%s'", err);
    unlink(path("link.tfm"));
    int linked = !symlink("a.tfm", path("link.tfm"));
    write_ckpt(path("b.tfm"), base_spec(2));
    err = avg2(path("b.tfm"), path("a.tfm"), path("link.tfm"));
    CHECK("average_refuses_output_linked_to_input", linked && strstr(err, "is the input file"), "'%s'", err);
    tfm_container a1;
    int same = !tfm_container_load(&a1, path("a.tfm")) && a1.n == a0.n;
    for (int i = 0; same && i < a0.n; i++) same = a0.e[i].nbytes == a1.e[i].nbytes && !memcmp(a0.e[i].data, a1.e[i].data, a0.e[i].nbytes);
    CHECK("average_input_untouched", same, "a.tfm changed");
    tfm_container_free(&a0);
    tfm_container_free(&a1);

    /* an existing output survives a failed average */
    FILE *f = fopen(path("keep.tfm"), "w");
    fputs("old", f);
    fclose(f);
    s = base_spec(2);
    s.n_layer = 5;
    write_ckpt(path("bad.tfm"), s);
    err = avg2(path("a.tfm"), path("bad.tfm"), path("keep.tfm"));
    char buf[8] = {0};
    f = fopen(path("keep.tfm"), "r");
    size_t got = f ? fread(buf, 1, 7, f) : 0;
    if (f) fclose(f);
    CHECK("average_error_keeps_existing_output", *err && got == 3 && !strcmp(buf, "old"), "'%s' now '%s'", err, buf);

    const char *one[1] = {path("a.tfm")};
    CHECK("average_refuses_single", tfm_checkpoint_average(one, 1, path("o1.tfm")) && strstr(tfm_last_error(), "at least two"),
          "%s", tfm_last_error());
    err = avg2(path("a.tfm"), path("nope.tfm"), path("o2.tfm"));
    CHECK("average_missing_input", strstr(err, "nope.tfm") != NULL, "'%s'", err);
    /* a container without parameters (e.g. not a model) */
    tfm_container c;
    tfm_container_init(&c);
    tfm_container_add_str(&c, "note", "x");
    tfm_container_save(&c, path("noparam.tfm"));
    tfm_container_free(&c);
    err = avg2(path("noparam.tfm"), path("noparam.tfm"), path("o3.tfm"));
    CHECK("average_refuses_no_params", strstr(err, "noparam.tfm: no param.* entries") != NULL, "'%s'", err);
}

int main(void) {
    if (check_tmpdir(dir, sizeof dir, "test_average")) return 1;
    test_equal_and_mean();
    test_refusals();
    check_rm_tmpdir(dir);
    return check_failures ? 1 : 0;
}
