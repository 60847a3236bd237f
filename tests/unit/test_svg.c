/* SVG tests: files are well-formed XML (checked by a small structural parser, no xmllint needed),
 * labels are escaped, writes are atomic (no temporary files left), errors name the file. */
#include <dirent.h>
#include <stdlib.h>
#include <unistd.h>

#include "check.h"
#include "tfm/core.h"
#include "tfm/eval.h"
#include "tfm/text.h"

static char tmpdir[256];

static char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, len = 0;
    char *b = malloc(cap + 1);
    size_t got;
    while ((got = fread(b + len, 1, cap - len, f)) > 0) {
        len += got;
        if (len == cap) b = realloc(b, (cap *= 2) + 1);
    }
    fclose(f);
    b[len] = 0;
    *n = len;
    return b;
}

/* Minimal XML well-formedness check: balanced and properly nested elements, quoted attributes,
 * no raw '<' or stray '&' in text, only known entities. Returns NULL if ok, else a reason. */
static const char *xml_check(const char *s, int *n_elems) {
    static char why[128];
    const char *stack[256];
    size_t stack_len[256];
    int depth = 0, roots = 0;
    *n_elems = 0;
    const char *p = s;
    while (*p) {
        if (*p == '<') {
            if (!strncmp(p, "<?", 2)) {
                p = strstr(p, "?>");
                if (!p) return "unterminated <?";
                p += 2;
                continue;
            }
            if (!strncmp(p, "<!--", 4)) {
                p = strstr(p, "-->");
                if (!p) return "unterminated comment";
                p += 3;
                continue;
            }
            int closing = p[1] == '/';
            const char *name = p + 1 + closing;
            size_t nl = strcspn(name, " \t\n/>");
            if (nl == 0) return "empty tag name";
            const char *q = name + nl;
            /* attributes: name="value" pairs */
            while (*q && *q != '>' && !(q[0] == '/' && q[1] == '>')) {
                if (*q == '"' || *q == '\'') {
                    char qc = *q;
                    const char *e = strchr(q + 1, qc);
                    if (!e) return "unterminated attribute";
                    for (const char *c = q + 1; c < e; c++)
                        if (*c == '<') return "'<' inside an attribute";
                    q = e + 1;
                } else {
                    q++;
                }
            }
            if (!*q) return "unterminated tag";
            int self = q[0] == '/';
            if (closing) {
                if (depth == 0) return "closing tag without opening";
                depth--;
                if (stack_len[depth] != nl || strncmp(stack[depth], name, nl)) {
                    snprintf(why, sizeof why, "mismatched </%.*s>", (int)nl, name);
                    return why;
                }
            } else {
                (*n_elems)++;
                if (depth == 0) roots++;
                if (!self) {
                    if (depth == 256) return "too deep";
                    stack[depth] = name;
                    stack_len[depth++] = nl;
                }
            }
            p = q + (self ? 2 : 1);
        } else if (*p == '&') {
            static const char *ents[] = {"&amp;", "&lt;", "&gt;", "&quot;", "&apos;"};
            int ok = 0;
            for (int i = 0; i < 5; i++) ok |= !strncmp(p, ents[i], strlen(ents[i]));
            if (!ok) return "bad entity";
            p++;
        } else {
            if (*p == '>' && depth == 0) return "stray '>'";
            p++;
        }
    }
    if (depth) return "unclosed element";
    if (roots != 1) return "not exactly one root element";
    return NULL;
}

static int count(const char *s, const char *sub) {
    int n = 0;
    for (const char *p = s; (p = strstr(p, sub)); p += strlen(sub)) n++;
    return n;
}

/* A printed NaN/Inf coordinate or label ("dominant-baseline" contains "nan", so look at boundaries). */
static int has_nonfinite(const char *s) {
    static const char *pat[] = {"\"nan", "\"-nan", "nan,", ",nan", ">nan<", ">-nan<", "\"inf", "\"-inf", "inf,", ",inf", ">inf<", ">-inf<"};
    for (size_t i = 0; i < sizeof pat / sizeof pat[0]; i++)
        if (strstr(s, pat[i])) return 1;
    return 0;
}

static int leftover_tmp_files(void) {
    DIR *d = opendir(tmpdir);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strstr(e->d_name, ".tmp.")) n++;
    closedir(d);
    return n;
}

static void test_heatmaps(void) {
    /* 2 layers x 2 heads of 3x4 attention weights, with tokens that need escaping */
    float data[4][12];
    for (int m = 0; m < 4; m++)
        for (int i = 0; i < 12; i++) data[m][i] = (float)((i * 7 + m * 3) % 11) / 10.0f;
    data[3][5] = NAN;
    const char *rows[3] = {"<bos>", "Tom & \"Jerry\"", "Zürich"};
    const char *cols[4] = {"a<b", "it's", "ok", ("\xff" "bad")};
    tfm_heatmap maps[4];
    const char *titles[4] = {"layer 1 head 1", "layer 1 head 2", "layer 2 head 1", "layer 2 head <2>"};
    for (int m = 0; m < 4; m++) maps[m] = (tfm_heatmap){titles[m], 3, 4, data[m], rows, cols};
    tfm_heatmap_opts o = {.title = "Attention & weights", .xlabel = "Key positions", .ylabel = "Query positions",
                          .grid_cols = 2};
    char path[512];
    snprintf(path, sizeof path, "%s/attn.svg", tmpdir);
    int rc = tfm_svg_heatmaps(path, maps, 4, &o);
    CHECK("heatmap_written", rc == 0, "%s", tfm_last_error());
    size_t n;
    char *s = slurp(path, &n);
    CHECK("heatmap_exists", s && n > 1000, "n=%zu", s ? n : 0);
    if (!s) return;
    int elems;
    const char *why = xml_check(s, &elems);
    CHECK("heatmap_well_formed", !why && elems > 60, "%s (elements %d)", why ? why : "ok", elems);
    CHECK("heatmap_utf8", tfm_utf8_valid(s, n), "invalid UTF-8 in output");
    CHECK("heatmap_escaped_labels",
          strstr(s, "&lt;bos&gt;") && strstr(s, "Tom &amp; &quot;Jerry&quot;") && strstr(s, "a&lt;b") &&
              strstr(s, "it&apos;s") && strstr(s, "Zürich") && strstr(s, "\xef\xbf\xbd" "bad") &&
              strstr(s, "layer 2 head &lt;2&gt;") && strstr(s, "Attention &amp; weights") && !strstr(s, "<bos>"),
          "labels missing or unescaped");
    /* 4 maps x 12 cells + 4 frames + colour bar (32 bands + frame) */
    CHECK("heatmap_cells", count(s, "<rect") >= 48 + 4 + 33 && count(s, "<title>") == 48, "rects %d titles %d",
          count(s, "<rect"), count(s, "<title>"));
    CHECK("heatmap_reds_scale", strstr(s, "#fff5f0") && strstr(s, "#67000d") && strstr(s, "#cccccc"),
          "colour scale ends / NaN colour missing");
    CHECK("heatmap_atomic_no_tmp", leftover_tmp_files() == 0, "temporary files left");
    free(s);

    /* no labels (indices), one big map */
    float *big = malloc(100 * 100 * sizeof *big);
    for (int i = 0; i < 10000; i++) big[i] = (float)(i % 100) / 99.0f;
    tfm_heatmap one = {NULL, 100, 100, big, NULL, NULL};
    rc = tfm_svg_heatmaps(path, &one, 1, NULL);
    s = rc == 0 ? slurp(path, &n) : NULL;
    why = s ? xml_check(s, &elems) : "not written";
    CHECK("heatmap_big_unlabelled", !why && count(s, "<title>") == 10000, "%s", why ? why : "cells");
    free(s);
    free(big);

    snprintf(path, sizeof path, "%s/no/such/dir/x.svg", tmpdir);
    rc = tfm_svg_heatmaps(path, maps, 1, NULL);
    CHECK("heatmap_bad_dir_error", rc < 0 && strstr(tfm_last_error(), path) && !strchr(tfm_last_error(), '\n'), "%s",
          tfm_last_error());
    tfm_heatmap empty = {NULL, 0, 3, data[0], NULL, NULL};
    CHECK("heatmap_empty_error", tfm_svg_heatmaps(path, &empty, 1, NULL) < 0, "accepted");
}

static void test_lines(void) {
    enum { N = 50 };
    float x[N], y1[N], y2[N], xs[20], ys[20];
    for (int i = 0; i < N; i++) {
        x[i] = (float)i / 10;
        y1[i] = sinf(x[i]) * 2;
        y2[i] = sinf(x[i]) * 2 + 0.3f * cosf(7 * x[i]);
    }
    y2[20] = NAN;  /* a gap: the dashed line is drawn in two pieces */
    for (int i = 0; i < 20; i++) {
        xs[i] = (float)i / 4;
        ys[i] = sinf(xs[i]) * 2 + ((i % 3) - 1) * 0.4f;
    }
    tfm_series s[3] = {
        {"Truth", x, y1, N, TFM_SERIES_LINE},
        {"Pred <fitted> & \"smooth\"", x, y2, N, TFM_SERIES_DASHED},
        {"Samples", xs, ys, 20, TFM_SERIES_POINTS},
    };
    tfm_plot_opts o = {"Nadaraya-Watson kernel regression", "x", "y", 0, 0};
    char path[512];
    snprintf(path, sizeof path, "%s/plot.svg", tmpdir);
    int rc = tfm_svg_lines(path, s, 3, &o);
    CHECK("lines_written", rc == 0, "%s", tfm_last_error());
    size_t n;
    char *t = rc == 0 ? slurp(path, &n) : NULL;
    if (!t) return;
    int elems;
    const char *why = xml_check(t, &elems);
    CHECK("lines_well_formed", !why, "%s", why);
    CHECK("lines_series", count(t, "<polyline") == 3 && count(t, "stroke-dasharray") >= 2 && count(t, "<circle") == 21,
          "polylines %d circles %d", count(t, "<polyline"), count(t, "<circle"));
    CHECK("lines_legend_escaped", strstr(t, "Pred &lt;fitted&gt; &amp; &quot;smooth&quot;") && strstr(t, ">Truth<") &&
                                      strstr(t, ">Samples<"), "legend missing");
    CHECK("lines_ticks", count(t, "text-anchor=\"middle\">") >= 4 && strstr(t, ">0<"), "ticks missing");
    CHECK("lines_no_nan", !has_nonfinite(t), "non-finite coordinate written");
    CHECK("lines_atomic_no_tmp", leftover_tmp_files() == 0, "temporary files left");
    free(t);
    /* degenerate: one constant point */
    float c = 1.0f;
    tfm_series one = {NULL, &c, &c, 1, TFM_SERIES_POINTS};
    rc = tfm_svg_lines(path, &one, 1, NULL);
    t = rc == 0 ? slurp(path, &n) : NULL;
    why = t ? xml_check(t, &elems) : "not written";
    CHECK("lines_single_point", !why && !has_nonfinite(t), "%s", why ? why : "nan");
    free(t);
    CHECK("lines_no_series_error", tfm_svg_lines(path, s, 0, NULL) < 0, "accepted");

    /* two panels side by side in one file (tfm plot), a line-with-markers series */
    tfm_series m = {"valid", xs, ys, 20, TFM_SERIES_LINE_MARKERS};
    tfm_line_panel panels[2] = {{s, 2, {NULL, "step", "loss", 300, 200}, 0, 0},
                                {&m, 1, {NULL, "step", "BLEU", 300, 200}, -10, 10}};
    rc = tfm_svg_line_panels(path, panels, 2, "run <1>");
    t = rc == 0 ? slurp(path, &n) : NULL;
    why = t ? xml_check(t, &elems) : "not written";
    CHECK("panels_well_formed", !why, "%s", why ? why : "");
    CHECK("panels_content", t && count(t, "<g class=\"panel\"") == 2 && count(t, "<polyline") == 4 &&
                                count(t, "<circle") == 21 && strstr(t, "width=\"600\"") && strstr(t, ">run &lt;1&gt;<") &&
                                strstr(t, "translate(300 30)") && strstr(t, ">-10<") && strstr(t, ">10<"),
          "panels %d polylines %d circles %d", t ? count(t, "<g class=\"panel\"") : -1, t ? count(t, "<polyline") : -1,
          t ? count(t, "<circle") : -1);
    free(t);
    panels[1].n_series = 0;
    CHECK("panels_empty_panel_error", tfm_svg_line_panels(path, panels, 2, NULL) < 0 && strstr(tfm_last_error(), "nothing to plot"),
          "%s", tfm_last_error());
    CHECK("panels_none_error", tfm_svg_line_panels(path, panels, 0, NULL) < 0, "accepted");
}

int main(void) {
    if (check_tmpdir(tmpdir, sizeof tmpdir, "test_svg")) return 1;
    test_heatmaps();
    test_lines();
    check_rm_tmpdir(tmpdir);
    CHECK_EXIT();
}
