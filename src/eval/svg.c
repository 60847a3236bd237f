/* SVG output: heatmap grids (attention weights) and line plots, written atomically. */
#include "tfm/eval.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tfm/core.h"
#include "tfm/io.h"
#include "tfm/text.h"

/* ---------------------------------------------------------------- growable string */
typedef struct {
    char *s;
    size_t len, cap;
    int oom;
} sbuf;

static void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf *b, const char *fmt, ...) {
    if (b->oom) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        size_t room = b->cap - b->len;
        int k = b->s ? vsnprintf(b->s + b->len, room, fmt, ap) : -2;
        va_end(ap);
        if (k >= 0 && (size_t)k < room) {
            b->len += (size_t)k;
            return;
        }
        size_t cap = b->cap ? b->cap * 2 : 4096;
        while (k >= 0 && cap < b->len + (size_t)k + 1) cap *= 2;
        char *ns = realloc(b->s, cap);
        if (!ns) {
            b->oom = 1;
            return;
        }
        b->s = ns;
        b->cap = cap;
    }
}

char *tfm_xml_escape(const char *s) {
    size_t n = strlen(s);
    char *out = malloc(6 * n + 1);  /* worst case "&quot;" per byte */
    if (!out) return NULL;
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        int k = tfm_utf8_decode(s + i, n - i, &cp);
        if (!k) {  /* invalid UTF-8 -> U+FFFD so the file stays well-formed */
            memcpy(out + o, "\xef\xbf\xbd", 3);
            o += 3;
            i++;
            continue;
        }
        const char *rep = NULL;
        switch (cp) {
        case '&': rep = "&amp;"; break;
        case '<': rep = "&lt;"; break;
        case '>': rep = "&gt;"; break;
        case '"': rep = "&quot;"; break;
        case '\'': rep = "&apos;"; break;
        default:
            if (cp < 0x20 && cp != '\t' && cp != '\n' && cp != '\r') rep = "?";  /* not allowed in XML 1.0 */
            else if (cp == 0xFFFE || cp == 0xFFFF) rep = "?";
        }
        if (rep) {
            size_t l = strlen(rep);
            memcpy(out + o, rep, l);
            o += l;
        } else {
            memcpy(out + o, s + i, (size_t)k);
            o += (size_t)k;
        }
        i += (size_t)k;
    }
    out[o] = 0;
    return out;
}

/* Appends escaped text. */
static void sb_text(sbuf *b, const char *s) {
    char *e = tfm_xml_escape(s ? s : "");
    if (!e) {
        b->oom = 1;
        return;
    }
    sb_printf(b, "%s", e);
    free(e);
}

static int write_sbuf(FILE *f, const void *ctx) {
    const sbuf *b = ctx;
    return fwrite(b->s, 1, b->len, f) == b->len;
}

/* Writes b to path atomically (tfm_save_atomic: a temporary file in the same directory + rename). */
static int write_atomic(const char *path, const sbuf *b) {
    if (b->oom) {
        tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory writing '%s'", path);
        return -1;
    }
    return tfm_save_atomic(path, write_sbuf, b);
}

/* ---------------------------------------------------------------- colours */
/* matplotlib's 'Reds' (ColorBrewer 9-class Reds), linearly interpolated. */
static const unsigned char reds[9][3] = {
    {0xff, 0xf5, 0xf0}, {0xfe, 0xe0, 0xd2}, {0xfc, 0xbb, 0xa1}, {0xfc, 0x92, 0x72}, {0xfb, 0x6a, 0x4a},
    {0xef, 0x3b, 0x2c}, {0xcb, 0x18, 0x1d}, {0xa5, 0x0f, 0x15}, {0x67, 0x00, 0x0d},
};

static void reds_color(double t, char out[8]) {
    if (!(t >= 0)) t = 0;  /* also NaN */
    if (t > 1) t = 1;
    double x = t * 8;
    int i = (int)x;
    if (i > 7) i = 7;
    double f = x - i;
    int c[3];
    for (int k = 0; k < 3; k++) c[k] = (int)lround(reds[i][k] + f * (reds[i + 1][k] - reds[i][k]));
    snprintf(out, 8, "#%02x%02x%02x", c[0], c[1], c[2]);
}

static const char *const palette[10] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                        "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

/* Rough text width in pixels for a font size (code points x 0.6 em). */
static double text_width(const char *s, double font) {
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) n += (*p & 0xC0) != 0x80;
    return (double)n * font * 0.6;
}

static void svg_header(sbuf *b, double w, double h) {
    sb_printf(b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    sb_printf(b, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
                 "font-family=\"DejaVu Sans, Arial, sans-serif\">\n", w, h, w, h);
    sb_printf(b, "<rect x=\"0\" y=\"0\" width=\"%.0f\" height=\"%.0f\" fill=\"white\"/>\n", w, h);
}

/* ---------------------------------------------------------------- heatmaps */
int tfm_svg_heatmaps(const char *path, const tfm_heatmap *maps, int n_maps, const tfm_heatmap_opts *opts) {
    tfm_heatmap_opts o = {0};
    if (opts) o = *opts;
    if (n_maps < 1) {
        tfm_set_error("heatmap '%s': nothing to plot", path);
        return -1;
    }
    int max_r = 0, max_c = 0;
    double lo = INFINITY, hi = -INFINITY, row_lab_w = 0, col_lab_h = 0;
    const double font = 11;
    for (int m = 0; m < n_maps; m++) {
        const tfm_heatmap *h = &maps[m];
        if (h->rows < 1 || h->cols < 1 || !h->data) {
            tfm_set_error("heatmap '%s': map %d has no data (%d x %d)", path, m, h->rows, h->cols);
            return -1;
        }
        if (h->rows > max_r) max_r = h->rows;
        if (h->cols > max_c) max_c = h->cols;
        for (size_t i = 0; i < (size_t)h->rows * (size_t)h->cols; i++)
            if (isfinite(h->data[i])) {
                if (h->data[i] < lo) lo = h->data[i];
                if (h->data[i] > hi) hi = h->data[i];
            }
        char idx[16];
        for (int r = 0; r < h->rows; r++) {
            snprintf(idx, sizeof idx, "%d", r);
            double w = text_width(h->row_labels ? h->row_labels[r] : idx, font);
            if (w > row_lab_w) row_lab_w = w;
        }
        for (int c = 0; c < h->cols; c++) {
            snprintf(idx, sizeof idx, "%d", c);
            double w = text_width(h->col_labels ? h->col_labels[c] : idx, font);
            if (w > col_lab_h) col_lab_h = w;
        }
    }
    if (row_lab_w > 150) row_lab_w = 150;
    if (col_lab_h > 150) col_lab_h = 150;
    if (!(lo <= hi)) lo = 0, hi = 1;                     /* no finite value at all */
    if (o.vmin < o.vmax) lo = o.vmin, hi = o.vmax;
    if (hi - lo < 1e-12) hi = lo + 1;
    int big = max_r > max_c ? max_r : max_c;
    double cell = o.cell > 0 ? o.cell : (big <= 10 ? 28 : big >= 80 ? 4 : 280.0 / big);
    int gcols = o.grid_cols > 0 ? (o.grid_cols < n_maps ? o.grid_cols : n_maps) : n_maps;
    int grows = (n_maps + gcols - 1) / gcols;
    double title_h = o.title ? 30 : 8, ylab_w = o.ylabel ? 20 : 0, xlab_h = o.xlabel ? 20 : 0;
    double left = ylab_w + row_lab_w + 8, top = 22;      /* inside a panel */
    double pw = left + max_c * cell + 16, ph = top + max_r * cell + 6 + col_lab_h + xlab_h + 10;
    double bar_w = 16, bar_x = gcols * pw + 10, bar_h = grows * ph - 40;
    if (bar_h > 300) bar_h = 300;
    if (bar_h < 60) bar_h = 60;
    double W = bar_x + bar_w + 60, H = title_h + grows * ph;
    if (H < title_h + bar_h + 30) H = title_h + bar_h + 30;
    sbuf b = {0};
    svg_header(&b, W, H);
    if (o.title) {
        sb_printf(&b, "<text x=\"%.1f\" y=\"20\" font-size=\"14\" text-anchor=\"middle\">", W / 2);
        sb_text(&b, o.title);
        sb_printf(&b, "</text>\n");
    }
    for (int m = 0; m < n_maps; m++) {
        const tfm_heatmap *h = &maps[m];
        double x0 = (m % gcols) * pw, y0 = title_h + (m / gcols) * ph;
        double gx = x0 + left, gy = y0 + top;
        sb_printf(&b, "<g class=\"map\">\n");
        if (h->title) {
            sb_printf(&b, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\" text-anchor=\"middle\">",
                      gx + h->cols * cell / 2, y0 + 14);
            sb_text(&b, h->title);
            sb_printf(&b, "</text>\n");
        }
        for (int r = 0; r < h->rows; r++)
            for (int c = 0; c < h->cols; c++) {
                float v = h->data[(size_t)r * h->cols + c];
                char col[8];
                if (isfinite(v)) reds_color((v - lo) / (hi - lo), col);
                else snprintf(col, sizeof col, "#cccccc");
                sb_printf(&b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"><title>%g</title></rect>\n",
                          gx + c * cell, gy + r * cell, cell, cell, col, (double)v);
            }
        sb_printf(&b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" stroke=\"#444\" stroke-width=\"0.8\"/>\n",
                  gx, gy, h->cols * cell, h->rows * cell);
        double fs = cell < 11 ? (cell < 6 ? 6 : cell) : font;
        int step = cell < 6 ? (int)ceil(6 / cell) : 1;  /* thin out labels when cells are tiny */
        for (int r = 0; r < h->rows; r += step) {
            char idx[16];
            snprintf(idx, sizeof idx, "%d", r);
            sb_printf(&b, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"%.0f\" text-anchor=\"end\" dominant-baseline=\"middle\">",
                      gx - 4, gy + (r + 0.5) * cell, fs);
            sb_text(&b, h->row_labels ? h->row_labels[r] : idx);
            sb_printf(&b, "</text>\n");
        }
        for (int c = 0; c < h->cols; c += step) {
            char idx[16];
            snprintf(idx, sizeof idx, "%d", c);
            double tx = gx + (c + 0.5) * cell, ty = gy + h->rows * cell + 4;
            sb_printf(&b, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"%.0f\" text-anchor=\"end\" dominant-baseline=\"middle\" "
                          "transform=\"rotate(-90 %.1f %.1f)\">", tx, ty, fs, tx, ty);
            sb_text(&b, h->col_labels ? h->col_labels[c] : idx);
            sb_printf(&b, "</text>\n");
        }
        if (o.xlabel) {
            sb_printf(&b, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\" text-anchor=\"middle\">", gx + h->cols * cell / 2,
                      gy + h->rows * cell + 6 + col_lab_h + 16);
            sb_text(&b, o.xlabel);
            sb_printf(&b, "</text>\n");
        }
        if (o.ylabel) {
            double tx = x0 + 12, ty = gy + h->rows * cell / 2;
            sb_printf(&b, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\" text-anchor=\"middle\" transform=\"rotate(-90 %.1f %.1f)\">",
                      tx, ty, tx, ty);
            sb_text(&b, o.ylabel);
            sb_printf(&b, "</text>\n");
        }
        sb_printf(&b, "</g>\n");
    }
    /* colour bar: 32 bands from vmax (top) to vmin, 5 ticks */
    double by = title_h + 20;
    sb_printf(&b, "<g class=\"colorbar\">\n");
    for (int i = 0; i < 32; i++) {
        char col[8];
        reds_color(1.0 - (i + 0.5) / 32.0, col);
        sb_printf(&b, "<rect x=\"%.1f\" y=\"%.2f\" width=\"%.1f\" height=\"%.2f\" fill=\"%s\"/>\n", bar_x,
                  by + i * bar_h / 32, bar_w, bar_h / 32 + 0.3, col);
    }
    sb_printf(&b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" stroke=\"#444\" stroke-width=\"0.8\"/>\n",
              bar_x, by, bar_w, bar_h);
    for (int i = 0; i <= 4; i++) {
        double v = hi - (hi - lo) * i / 4, ty = by + bar_h * i / 4;
        sb_printf(&b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#444\"/>\n", bar_x + bar_w, ty,
                  bar_x + bar_w + 4, ty);
        sb_printf(&b, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"10\" dominant-baseline=\"middle\">%.3g</text>\n",
                  bar_x + bar_w + 6, ty, v);
    }
    sb_printf(&b, "</g>\n</svg>\n");
    int rc = write_atomic(path, &b);
    free(b.s);
    return rc;
}

/* ---------------------------------------------------------------- line plots */
/* A "nice" tick step (1, 2 or 5 x 10^k) for about `target` intervals over range. */
static double nice_step(double range, int target) {
    double raw = range / target, p = pow(10, floor(log10(raw))), f = raw / p;
    return (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * p;
}

/* Checks a panel's series; error names the plot file. */
static int series_valid(const char *path, const tfm_series *series, int n_series) {
    if (n_series < 1) {
        tfm_set_error("plot '%s': nothing to plot", path);
        return -1;
    }
    for (int s = 0; s < n_series; s++)
        if (series[s].n < 0 || (series[s].n > 0 && (!series[s].x || !series[s].y))) {
            tfm_set_error("plot '%s': series %d has no data", path, s);
            return -1;
        }
    return 0;
}

/* One line plot (axes, grid, series, legend) drawn into b with its top-left corner at (0, 0). */
static void draw_line_panel(sbuf *sb, const tfm_series *series, int n_series, const tfm_plot_opts *opts, float xmin,
                            float xmax) {
    tfm_plot_opts o = {0};
    if (opts) o = *opts;
    double W = o.width > 0 ? o.width : 640, H = o.height > 0 ? o.height : 420;
    double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
    for (int s = 0; s < n_series; s++) {
        for (int i = 0; i < series[s].n; i++) {
            double x = series[s].x[i], y = series[s].y[i];
            if (!isfinite(x) || !isfinite(y)) continue;
            x0 = fmin(x0, x), x1 = fmax(x1, x), y0 = fmin(y0, y), y1 = fmax(y1, y);
        }
    }
    if (!(x0 <= x1)) x0 = 0, x1 = 1, y0 = 0, y1 = 1;
    if (xmin < xmax) x0 = xmin, x1 = xmax;  /* shared with other panels */
    if (x1 - x0 < 1e-12) x0 -= 0.5, x1 += 0.5;
    if (y1 - y0 < 1e-12) y0 -= 0.5, y1 += 0.5;
    double padx = (x1 - x0) * 0.03, pady = (y1 - y0) * 0.05;
    x0 -= padx, x1 += padx, y0 -= pady, y1 += pady;
    double L = 64, R = 16, T = o.title ? 34 : 14, B = o.xlabel ? 52 : 34;
    double pw = W - L - R;
    /* the legend goes below the axes, in rows of entries, so it never covers a line */
    int leg_rows = 0;
    double row_w = 0;
    for (int s = 0; s < n_series; s++) {
        if (!series[s].label) continue;
        double w = text_width(series[s].label, 11) + 48;
        if (!leg_rows || row_w + w > pw) leg_rows++, row_w = 0;
        row_w += w;
    }
    B += 18.0 * leg_rows;
    double ph = H - T - B, leg_y = T + ph + (o.xlabel ? 48 : 28);   /* the first legend row's top */
#define PX(x) (L + ((x) - x0) / (x1 - x0) * pw)
#define PY(y) (T + ph - ((y) - y0) / (y1 - y0) * ph)
    sbuf *b = sb;
    if (o.title) {
        sb_printf(b, "<text x=\"%.1f\" y=\"22\" font-size=\"14\" text-anchor=\"middle\">", L + pw / 2);
        sb_text(b, o.title);
        sb_printf(b, "</text>\n");
    }
    /* grid, ticks and tick labels */
    sb_printf(b, "<g class=\"axes\" font-size=\"10\">\n");
    double sx = nice_step(x1 - x0, 6), sy = nice_step(y1 - y0, 5);
    for (double t = ceil(x0 / sx) * sx; t <= x1 + 1e-9 * sx; t += sx) {
        double v = fabs(t) < sx * 1e-9 ? 0 : t;
        sb_printf(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e5e5e5\"/>\n", PX(v), T, PX(v), T + ph);
        sb_printf(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#444\"/>\n", PX(v), T + ph, PX(v), T + ph + 4);
        sb_printf(b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%g</text>\n", PX(v), T + ph + 15, v);
    }
    for (double t = ceil(y0 / sy) * sy; t <= y1 + 1e-9 * sy; t += sy) {
        double v = fabs(t) < sy * 1e-9 ? 0 : t;
        sb_printf(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e5e5e5\"/>\n", L, PY(v), L + pw, PY(v));
        sb_printf(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#444\"/>\n", L - 4, PY(v), L, PY(v));
        sb_printf(b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\" dominant-baseline=\"middle\">%g</text>\n", L - 6, PY(v), v);
    }
    sb_printf(b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" stroke=\"#444\"/>\n", L, T, pw, ph);
    sb_printf(b, "</g>\n");
    if (o.xlabel) {
        sb_printf(b, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\" text-anchor=\"middle\">", L + pw / 2, T + ph + 40);
        sb_text(b, o.xlabel);
        sb_printf(b, "</text>\n");
    }
    if (o.ylabel) {
        sb_printf(b, "<text x=\"16\" y=\"%.1f\" font-size=\"12\" text-anchor=\"middle\" transform=\"rotate(-90 16 %.1f)\">",
                  T + ph / 2, T + ph / 2);
        sb_text(b, o.ylabel);
        sb_printf(b, "</text>\n");
    }
    /* series */
    for (int s = 0; s < n_series; s++) {
        const tfm_series *se = &series[s];
        const char *col = palette[s % 10];
        sb_printf(b, "<g class=\"series\">\n");
        if (se->style == TFM_SERIES_POINTS) {
            for (int i = 0; i < se->n; i++)
                if (isfinite(se->x[i]) && isfinite(se->y[i]))
                    sb_printf(b, "<circle cx=\"%.2f\" cy=\"%.2f\" r=\"3\" fill=\"%s\" fill-opacity=\"0.6\"/>\n",
                              PX(se->x[i]), PY(se->y[i]), col);
        } else {
            int open = 0;
            for (int i = 0; i <= se->n; i++) {
                int ok = i < se->n && isfinite(se->x[i]) && isfinite(se->y[i]);
                if (ok && !open) {
                    sb_printf(b, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.8\"%s points=\"", col,
                              se->style == TFM_SERIES_DASHED ? " stroke-dasharray=\"6,4\"" : "");
                    open = 1;
                }
                if (ok) sb_printf(b, "%.2f,%.2f ", PX(se->x[i]), PY(se->y[i]));
                if (!ok && open) {
                    sb_printf(b, "\"/>\n");
                    open = 0;
                }
            }
            if (se->style == TFM_SERIES_LINE_MARKERS)
                for (int i = 0; i < se->n; i++)
                    if (isfinite(se->x[i]) && isfinite(se->y[i]))
                        sb_printf(b, "<circle cx=\"%.2f\" cy=\"%.2f\" r=\"3\" fill=\"%s\"/>\n", PX(se->x[i]),
                                  PY(se->y[i]), col);
        }
        sb_printf(b, "</g>\n");
    }
    /* legend: rows of entries under the axes (and under the x label) */
    if (leg_rows) {
        sb_printf(b, "<g class=\"legend\" font-size=\"11\">\n");
        double lx = L, yy = leg_y + 8;
        int first = 1;
        for (int s = 0; s < n_series; s++) {
            if (!series[s].label) continue;
            const char *col = palette[s % 10];
            double w = text_width(series[s].label, 11) + 48;
            if (!first && lx + w > L + pw) lx = L, yy += 18;
            first = 0;
            if (series[s].style == TFM_SERIES_POINTS)
                sb_printf(b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\" fill-opacity=\"0.6\"/>\n", lx + 10, yy, col);
            else
                sb_printf(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"1.8\"%s/>\n",
                          lx, yy, lx + 20, yy, col, series[s].style == TFM_SERIES_DASHED ? " stroke-dasharray=\"6,4\"" : "");
            if (series[s].style == TFM_SERIES_LINE_MARKERS)
                sb_printf(b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"/>\n", lx + 10, yy, col);
            sb_printf(b, "<text x=\"%.1f\" y=\"%.1f\" dominant-baseline=\"middle\">", lx + 26, yy);
            sb_text(b, series[s].label);
            sb_printf(b, "</text>\n");
            lx += w;
        }
        sb_printf(b, "</g>\n");
    }
#undef PX
#undef PY
}

static double panel_width(const tfm_plot_opts *o) { return o && o->width > 0 ? o->width : 640; }
static double panel_height(const tfm_plot_opts *o) { return o && o->height > 0 ? o->height : 420; }

int tfm_svg_lines(const char *path, const tfm_series *series, int n_series, const tfm_plot_opts *opts) {
    if (series_valid(path, series, n_series)) return -1;
    sbuf b = {0};
    svg_header(&b, panel_width(opts), panel_height(opts));
    draw_line_panel(&b, series, n_series, opts, 0, 0);
    sb_printf(&b, "</svg>\n");
    int rc = write_atomic(path, &b);
    free(b.s);
    return rc;
}

int tfm_svg_line_panels(const char *path, const tfm_line_panel *panels, int n_panels, const char *title) {
    if (n_panels < 1) {
        tfm_set_error("plot '%s': nothing to plot", path);
        return -1;
    }
    double W = 0, H = 0, top = title ? 30 : 0;
    for (int p = 0; p < n_panels; p++) {
        if (series_valid(path, panels[p].series, panels[p].n_series)) return -1;
        W += panel_width(&panels[p].opts);
        H = fmax(H, panel_height(&panels[p].opts));
    }
    sbuf b = {0};
    svg_header(&b, W, H + top);
    if (title) {
        sb_printf(&b, "<text x=\"%.1f\" y=\"20\" font-size=\"15\" text-anchor=\"middle\">", W / 2);
        sb_text(&b, title);
        sb_printf(&b, "</text>\n");
    }
    double x = 0;
    for (int p = 0; p < n_panels; p++) {
        sb_printf(&b, "<g class=\"panel\" transform=\"translate(%.0f %.0f)\">\n", x, top);
        draw_line_panel(&b, panels[p].series, panels[p].n_series, &panels[p].opts, panels[p].xmin, panels[p].xmax);
        sb_printf(&b, "</g>\n");
        x += panel_width(&panels[p].opts);
    }
    sb_printf(&b, "</svg>\n");
    int rc = write_atomic(path, &b);
    free(b.s);
    return rc;
}

void tfm_heatmap_opts_default(tfm_heatmap_opts *o) { memset(o, 0, sizeof *o); }

void tfm_plot_opts_default(tfm_plot_opts *o) {
    memset(o, 0, sizeof *o);
    o->width = 640, o->height = 420;
}
