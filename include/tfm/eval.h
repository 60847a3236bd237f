/* tfm eval: BLEU (sacreBLEU-compatible corpus BLEU and d2l's sentence BLEU) and SVG plots.
 *
 * Corpus BLEU reproduces sacreBLEU 2.x defaults (BLEU+case.mixed+eff.no+tok.13a+smooth.exp):
 *   - each segment: optional lowercasing, trailing whitespace stripped, then the 13a tokenizer
 *     (mteval-v13a: "<skipped>" removed, "-\n" joined, &quot; &amp; &lt; &gt; unescaped, then the four
 *     regex passes of sacreBLEU's TokenizerRegexp, then whitespace normalisation);
 *   - n-grams of order 1..4 with counts clipped by the reference (max over references);
 *   - reference length = the reference length closest to the hypothesis length (ties: shorter);
 *   - precisions with 'exp' smoothing (n-gram orders with 0 matches get 1 / (2^k * total));
 *     a corpus without any match scores 0; BP = exp(1 - ref_len/hyp_len) if hyp_len < ref_len.
 * Lowercasing uses tfm_utf8_lower's table (ASCII, Latin-1, Latin Extended-A, Greek, Cyrillic), which
 * equals Python's str.lower() on those scripts except for the Greek final sigma.
 */
#ifndef TFM_EVAL_H
#define TFM_EVAL_H

#include "tfm/export.h"

#include <stddef.h>

#define TFM_BLEU_MAX_ORDER 4

/* ---------------------------------------------------------------- BLEU */
typedef struct {
    double score;                       /* 0..100 */
    double precisions[TFM_BLEU_MAX_ORDER];  /* percent */
    double bp, ratio;
    long hyp_len, ref_len;
    long correct[TFM_BLEU_MAX_ORDER], total[TFM_BLEU_MAX_ORDER];
} tfm_bleu_result;

/* Sufficient statistics, accumulated segment by segment. */
typedef struct {
    int lowercase;
    int max_order;                      /* 1..TFM_BLEU_MAX_ORDER (default 4) */
    int effective_order;                /* sacreBLEU's effective_order (off for corpus BLEU) */
    long hyp_len, ref_len;
    long correct[TFM_BLEU_MAX_ORDER], total[TFM_BLEU_MAX_ORDER];
    long n_segments;
} tfm_bleu_stats;

TFM_API void tfm_bleu_init(tfm_bleu_stats *s, int lowercase);
/* Add one segment: a hypothesis and n_refs >= 1 references (raw, detokenized text). Returns 0, or -1
 * with an error (n_refs < 1, bad max_order, out of memory). */
TFM_API int tfm_bleu_add(tfm_bleu_stats *s, const char *hyp, const char *const *refs, int n_refs);
TFM_API void tfm_bleu_compute(const tfm_bleu_stats *s, tfm_bleu_result *r);
/* Corpus BLEU of n hypotheses against one reference each. */
TFM_API int tfm_corpus_bleu(const char *const *hyps, const char *const *refs, int n, int lowercase, tfm_bleu_result *r);
/* sacreBLEU's line: "BLEU = 34.12 65.3/41.0/28.3/20.1 (BP = 0.981 ratio = 0.981 hyp_len = 12345 ref_len = 12580)" */
TFM_API const char *tfm_bleu_format(const tfm_bleu_result *r, char *buf, size_t n);
/* The 13a tokenizer on one segment (malloc'd, tokens separated by single spaces). */
TFM_API char *tfm_tokenize_13a(const char *line);

/* d2l's bleu(pred_seq, label_seq, k): both split on ' ' exactly like Python's str.split(' ');
 * exp(min(0, 1 - len_label/len_pred)) * prod_{n=1..min(k, len_pred)} p_n^(1/2^n), p_n = clipped
 * matches / (len_pred - n + 1). */
TFM_API double tfm_bleu_d2l(const char *pred, const char *label, int k);

/* The sacreBLEU release whose metrics and signature strings tfm reproduces. */
#define TFM_SACREBLEU_VERSION "2.6.0"

/* sacreBLEU's signature of corpus BLEU as computed above:
 * "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0" (case:lc when lowercased). */
TFM_API const char *tfm_bleu_signature(int lowercase, int n_refs, char *buf, size_t n);

/* ---------------------------------------------------------------- chrF
 * sacreBLEU 2.x's default chrF (CHRF(), `sacrebleu -m chrf`), named chrF2:
 *   - each segment: optional lowercasing (as for BLEU), then every whitespace code point removed
 *     (Python's ''.join(s.split())); n-grams are of Unicode code points, not bytes;
 *   - for n = 1..6 and each segment: hyp = number of hypothesis n-grams (0 if the reference has no
 *     n-gram of that order), ref = number of reference n-grams, match = sum over distinct n-grams of
 *     min(hyp count, ref count); with several references the one with the best segment F wins;
 *   - the counts are summed over the corpus; precision P_n = match/hyp and recall R_n = match/ref are
 *     averaged over the orders where hyp > 0 and ref > 0 ("effective order", eff:yes), and
 *     chrF = 100 * (1 + b^2) P R / (b^2 P + R) with b = 2 (0 when P + R = 0).
 * No word n-grams (chrF++ is not implemented). */
#define TFM_CHRF_ORDER 6
#define TFM_CHRF_BETA 2

typedef struct {
    int lowercase;
    long counts[TFM_CHRF_ORDER][3];     /* per order: hyp, ref, match */
    long n_segments;
} tfm_chrf_stats;

typedef struct {
    double score;                       /* 0..100 */
    double precision, recall;           /* averaged over the effective orders, percent */
    long counts[TFM_CHRF_ORDER][3];
} tfm_chrf_result;

TFM_API void tfm_chrf_init(tfm_chrf_stats *s, int lowercase);
/* Add one segment against n_refs >= 1 references. Returns 0, or -1 with an error. */
TFM_API int tfm_chrf_add(tfm_chrf_stats *s, const char *hyp, const char *const *refs, int n_refs);
TFM_API void tfm_chrf_compute(const tfm_chrf_stats *s, tfm_chrf_result *r);
TFM_API int tfm_corpus_chrf(const char *const *hyps, const char *const *refs, int n, int lowercase, tfm_chrf_result *r);
/* "chrF2 = 59.27" */
TFM_API const char *tfm_chrf_format(const tfm_chrf_result *r, char *buf, size_t n);
/* "nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:2.6.0" */
TFM_API const char *tfm_chrf_signature(int lowercase, int n_refs, char *buf, size_t n);

/* ---------------------------------------------------------------- checkpoint averaging
 * tfm_checkpoint_average: writes to out_path the mean of n >= 2 checkpoints of one model, working on
 * the container entries alone (checkpoint.h names), so every model kind (GPT, transformer, rnn,
 * bahdanau) is handled without model code:
 *   - param.<name> (f32): averaged elementwise. The sum is taken in double in input order, divided
 *     by n and rounded to float once (so the mean of n equal models is that model bit for bit, and
 *     the mean of two is the correctly rounded (a + b) / 2). Shapes must match; a NaN/Inf value is
 *     refused (a diverged model);
 *   - adam.* and train.* (optimizer moments, RNG, step counters): dropped. The result is a model for
 *     inference (translate, generate, info, attention), not a state to --resume from;
 *   - every other entry (meta.*, config.*, tokenizer.*, ...) must be present in every input with the
 *     same dtype, shape and bytes, and is copied from the first;
 *   - meta.averaged (str) records "mean of N checkpoints: IN1 IN2 ..." (file names without directories;
 *     an input's own meta.averaged
 *     is ignored, so averages can be averaged).
 * Refused with one error line naming the file and the entry (missing, extra, different shape or
 * value, first differing vocabulary line) before anything is written; out_path equal to an input
 * (same path or same inode) is refused. The output is written atomically (tfm_container_save).
 * Memory: the first input, one other input at a time, and a double per parameter. */
TFM_API int tfm_checkpoint_average(const char *const *inputs, int n, const char *out_path);

/* ---------------------------------------------------------------- SVG */
/* One matrix of a heatmap grid (e.g. one attention head). */
typedef struct {
    const char *title;                  /* may be NULL */
    int rows, cols;
    const float *data;                  /* rows x cols, row-major */
    const char *const *row_labels;      /* rows strings or NULL (then indices are shown) */
    const char *const *col_labels;      /* cols strings or NULL */
} tfm_heatmap;

typedef struct {
    const char *title;                  /* figure title, may be NULL */
    const char *xlabel, *ylabel;        /* axis labels shared by all maps, may be NULL */
    int grid_cols;                      /* maps per row (<= 0: all in one row) */
    float vmin, vmax;                   /* colour range; vmin >= vmax means "min/max over all maps" */
    int cell;                           /* cell size in pixels (<= 0: chosen automatically) */
} tfm_heatmap_opts;
/* No titles, one row of maps, the colour range over all maps, automatic cell size (all fields 0 / NULL). */
TFM_API void tfm_heatmap_opts_default(tfm_heatmap_opts *o);

/* A grid of heatmaps with a shared 'Reds' colour scale and a colour bar, written atomically
 * (temporary file + rename). Labels are XML-escaped. Returns 0 or -1 with an error. */
TFM_API int tfm_svg_heatmaps(const char *path, const tfm_heatmap *maps, int n_maps, const tfm_heatmap_opts *opts);

/* LINE_MARKERS: a line with a dot on every point (sparse curves such as per-epoch validation). */
typedef enum { TFM_SERIES_LINE = 0, TFM_SERIES_DASHED, TFM_SERIES_POINTS, TFM_SERIES_LINE_MARKERS } tfm_series_style;

typedef struct {
    const char *label;                  /* legend entry, may be NULL */
    const float *x, *y;
    int n;
    tfm_series_style style;
} tfm_series;

typedef struct {
    const char *title, *xlabel, *ylabel;  /* may be NULL */
    int width, height;                    /* pixels (<= 0: 640 x 420) */
} tfm_plot_opts;
/* No titles or labels, 640 x 420 pixels. */
TFM_API void tfm_plot_opts_default(tfm_plot_opts *o);

/* A line plot of several series with axes, ticks, grid and a legend; points style draws circles
 * (training samples). Non-finite values are skipped. Written atomically. */
TFM_API int tfm_svg_lines(const char *path, const tfm_series *series, int n_series, const tfm_plot_opts *opts);

/* Several line plots side by side in one SVG (each panel opts.width x opts.height, default 640 x 420),
 * under an optional figure title. Written atomically. */
typedef struct {
    const tfm_series *series;
    int n_series;
    tfm_plot_opts opts;
    float xmin, xmax;                   /* x axis range, e.g. shared by all panels (xmin >= xmax: from the data) */
} tfm_line_panel;
TFM_API int tfm_svg_line_panels(const char *path, const tfm_line_panel *panels, int n_panels, const char *title);

/* ---------------------------------------------------------------- training logs (docs/LOGS.md)
 * A JSON-lines log: one flat JSON object a line (blank lines skipped). The fields below are read
 * where their value is a number (Python's NaN / Infinity accepted); strings, booleans, null, nested
 * objects/arrays and unknown keys are parsed and ignored, so a line may carry other information.
 * Lines without a numeric "step" (e.g. a configuration line) are read but not plotted. A line that
 * is not valid JSON or not an object is an error "FILE:LINE: column C: what"; so is a number of a field
 * above beyond float range (|x| > 3.4e38), which no curve can draw. */
enum {
    TFM_LOG_STEP = 0, TFM_LOG_EPOCH, TFM_LOG_LOSS, TFM_LOG_LR, TFM_LOG_TOKENS_PER_S,
    TFM_LOG_VALID_LOSS, TFM_LOG_VALID_BLEU, TFM_LOG_VALID_CHRF, TFM_LOG_N_FIELDS
};
typedef struct {
    int n;                              /* records with a step */
    int n_lines;                        /* JSON lines read */
    float *v[TFM_LOG_N_FIELDS];         /* v[field][record]; NAN where the line lacks the field */
    int n_undrawn;                      /* values of records with a step given as null, NaN, Infinity, a string
                                           or a boolean: present, but not drawn (tfm plot says how many) */
} tfm_train_log;

/* JSON key of a field: "step", "epoch", "loss", "lr", "tokens_per_s", "valid_loss", "valid_bleu",
 * "valid_chrf". */
TFM_API const char *tfm_train_log_field_name(int field);
/* Returns 0, or -1 with an error naming the file (and line); also an error if no line has a step. */
TFM_API int tfm_train_log_load(tfm_train_log *log, const char *path);
TFM_API void tfm_train_log_free(tfm_train_log *log);
/* SVG of the curves vs step, one panel each where there is data: loss (train loss, valid loss),
 * BLEU (valid_bleu, valid_chrf), learning rate. Error if no curve has a point. */
TFM_API int tfm_train_log_plot(const tfm_train_log *log, const char *svg_path, const char *title);

/* XML-escape s (& < > " ') into a malloc'd string. */
TFM_API char *tfm_xml_escape(const char *s);

#endif
