/* Training-log reader (tfm_train_log_load): values per key, NAN where absent, lines without a step
 * skipped, JSON details (escapes, nesting, NaN/Infinity, null), errors with FILE:LINE; and the
 * fixture log's plot. */
#include <stdlib.h>
#include <unistd.h>

#include "check.h"
#include "tfm/core.h"
#include "tfm/eval.h"

static char dir[256];

static const char *write_log(const char *name, const char *text) {
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
    return path;
}

static void test_values(void) {
    const char *p = write_log("a.jsonl",
                              "{\"event\": \"config\", \"nested\": {\"step\": 99, \"x\": [1, {\"y\": null}]}}\n"
                              "{\"step\": 10, \"epoch\": 1, \"loss\": 5.5, \"lr\": 1e-3, \"tokens_per_s\": 1200}\n"
                              "\n"
                              "{\"valid_bleu\": 12.5, \"step\": 20, \"valid_loss\": -Infinity, \"loss\": NaN, \"s\": \"\\\"\\u00e9\\n\"}\n"
                              "{\"step\": 30, \"loss\": null, \"valid_chrf\": 40.25, \"step_extra\": 7, \"loss\": 3.25}\n");
    tfm_train_log log;
    int rc = tfm_train_log_load(&log, p);
    CHECK("log_load", rc == 0, "%s", tfm_last_error());
    if (rc) return;
    CHECK("log_counts", log.n == 3 && log.n_lines == 4, "n %d lines %d", log.n, log.n_lines);
    float *st = log.v[TFM_LOG_STEP], *loss = log.v[TFM_LOG_LOSS];
    CHECK("log_steps", st[0] == 10 && st[1] == 20 && st[2] == 30, "%g %g %g", st[0], st[1], st[2]);
    CHECK("log_fields", log.v[TFM_LOG_EPOCH][0] == 1 && log.v[TFM_LOG_LR][0] == 1e-3f &&
                            log.v[TFM_LOG_TOKENS_PER_S][0] == 1200 && log.v[TFM_LOG_VALID_BLEU][1] == 12.5f &&
                            log.v[TFM_LOG_VALID_CHRF][2] == 40.25f,
          "values differ");
    CHECK("log_absent_is_nan", isnan(log.v[TFM_LOG_VALID_BLEU][0]) && isnan(log.v[TFM_LOG_EPOCH][1]) &&
                                   isnan(log.v[TFM_LOG_LR][2]),
          "absent keys not NAN");
    CHECK("log_nan_infinity", isnan(loss[1]) && isinf(log.v[TFM_LOG_VALID_LOSS][1]), "loss %g valid %g", loss[1],
          log.v[TFM_LOG_VALID_LOSS][1]);
    CHECK("log_duplicate_key_last_wins", loss[2] == 3.25f, "loss %g", loss[2]);
    CHECK("log_field_names", !strcmp(tfm_train_log_field_name(TFM_LOG_VALID_BLEU), "valid_bleu") &&
                                 !strcmp(tfm_train_log_field_name(TFM_LOG_TOKENS_PER_S), "tokens_per_s"),
          "names");
    tfm_train_log_free(&log);
}

static void test_errors(void) {
    static const struct {
        const char *name, *text, *want;
    } cases[] = {
        {"log_err_not_object", "{\"step\": 1}\n42\n", "b.jsonl:2: column 1: expected a JSON object"},
        {"log_err_leading_zero", "{\"step\": 01}\n", "b.jsonl:1: column 11: expected ',' or '}' after a value"},
        {"log_err_control_char", "{\"step\": 1, \"s\": \"a\tb\"}\n", "b.jsonl:1: column 20: control character"},
        {"log_err_bad_unicode", "{\"s\": \"\\u12G4\"}\n", "b.jsonl:1: column 12: bad \\u escape"},
        {"log_err_unclosed", "{\"step\": 1, \"a\": {\"b\": 1}\n", "b.jsonl:1: column 26: expected ',' or '}'"},
        {"log_err_deep", "{\"a\": [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}\n", "nested too deeply"},
        {"log_err_no_step", "{\"loss\": 1}\n", "no line has a numeric \"step\" (1 JSON lines read)"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const char *p = write_log("b.jsonl", cases[k].text);
        tfm_train_log log;
        int rc = tfm_train_log_load(&log, p);
        const char *err = tfm_last_error();
        CHECK(cases[k].name, rc == -1 && strstr(err, cases[k].want) && !strchr(err, '\n'), "rc %d '%s' (want '%s')", rc,
              rc ? err : "", cases[k].want);
    }
}

static void test_plot_fixture(void) {
    tfm_train_log log;
    int rc = tfm_train_log_load(&log, "tests/fixtures/plot/train_log.jsonl");
    CHECK("log_fixture_load", rc == 0 && log.n == 30 && log.n_lines == 31, "%s", rc ? tfm_last_error() : "counts");
    if (rc) return;
    int nv = 0;
    for (int i = 0; i < log.n; i++) nv += isfinite(log.v[TFM_LOG_VALID_BLEU][i]);
    CHECK("log_fixture_validations", nv == 6, "%d validations", nv);
    char svg[512];
    snprintf(svg, sizeof svg, "%s/c.svg", dir);
    rc = tfm_train_log_plot(&log, svg, "fixture");
    CHECK("log_fixture_plot", rc == 0 && access(svg, F_OK) == 0, "%s", tfm_last_error());
    tfm_train_log_free(&log);
}

int main(void) {
    if (check_tmpdir(dir, sizeof dir, "test_trainlog")) return 1;
    test_values();
    test_errors();
    test_plot_fixture();
    check_rm_tmpdir(dir);
    return check_failures ? 1 : 0;
}
