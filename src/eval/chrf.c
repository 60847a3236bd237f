/* chrF: sacreBLEU's default chrF2 (character n-grams 1..6, no word n-grams, beta 2, whitespace
 * removed, effective-order averaging). See include/tfm/eval.h for the exact definition. */
#include "tfm/eval.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tfm/core.h"
#include "tfm/text.h"

/* Code points of seg (optionally lowercased) with every whitespace code point removed, as Python's
 * ''.join(s.split()) does. An invalid byte becomes 0xDC00 + byte (Python's surrogateescape), so it
 * still counts as one character. Returns a malloc'd array (*n code points), or NULL (out of memory). */
static uint32_t *chars_no_space(const char *seg, int lowercase, int *n) {
    size_t len = strlen(seg);
    char *t = lowercase ? tfm_utf8_lower(seg, len, &len) : NULL;
    const char *s = lowercase ? t : seg;
    if (lowercase && !t) return NULL;
    uint32_t *cps = malloc((len + 1) * sizeof *cps);
    if (!cps) {
        free(t);
        return NULL;
    }
    int k = 0;
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        int step = tfm_utf8_decode(s + i, len - i, &cp);
        if (!step) {
            cp = 0xDC00u + (unsigned char)s[i];
            step = 1;
        }
        i += (size_t)step;
        if (!tfm_unicode_space(cp)) cps[k++] = cp;
    }
    free(t);
    *n = k;
    return cps;
}

typedef struct {
    const uint32_t *p;  /* first code point of the n-gram */
    int n;
} gram;

static int gram_cmp(const void *a, const void *b) {
    const gram *x = a, *y = b;
    for (int i = 0; i < x->n; i++)
        if (x->p[i] != y->p[i]) return x->p[i] < y->p[i] ? -1 : 1;
    return 0;
}

/* All n-grams of s[0..len) sorted by content into g (room for len entries). Returns their count. */
static int sorted_grams(const uint32_t *s, int len, int n, gram *g) {
    int k = 0;
    for (int i = 0; i + n <= len; i++) g[k++] = (gram){s + i, n};
    qsort(g, (size_t)k, sizeof *g, gram_cmp);
    return k;
}

/* sum over distinct n-grams of min(count in h, count in r), both sorted: a merge walk. */
static long clipped_matches(const gram *h, int nh, const gram *r, int nr) {
    long m = 0;
    int i = 0, j = 0;
    while (i < nh && j < nr) {
        int c = gram_cmp(&h[i], &r[j]);
        if (c < 0) {
            i++;
        } else if (c > 0) {
            j++;
        } else {  /* equal run: count both sides */
            int ci = 1, cj = 1;
            while (i + ci < nh && !gram_cmp(&h[i], &h[i + ci])) ci++;
            while (j + cj < nr && !gram_cmp(&r[j], &r[j + cj])) cj++;
            m += ci < cj ? ci : cj;
            i += ci;
            j += cj;
        }
    }
    return m;
}

/* Per-order [hyp, ref, match] counts of one hypothesis against one reference, sacreBLEU's rule:
 * the hypothesis count of an order is 0 when the reference has no n-gram of that order. */
static void segment_counts(const uint32_t *h, int lh, const uint32_t *r, int lr, gram *gh, gram *gr,
                           long st[TFM_CHRF_ORDER][3]) {
    for (int n = 1; n <= TFM_CHRF_ORDER; n++) {
        int nh = sorted_grams(h, lh, n, gh), nr = sorted_grams(r, lr, n, gr);
        st[n - 1][0] = nr > 0 ? nh : 0;
        st[n - 1][1] = nr;
        st[n - 1][2] = clipped_matches(gh, nh, gr, nr);
    }
}

/* F-beta of the precision and recall averaged over the orders where both counts are non-zero. */
static double f_score(const long st[TFM_CHRF_ORDER][3], double *avg_p, double *avg_r) {
    const double factor = (double)TFM_CHRF_BETA * TFM_CHRF_BETA;
    double p = 0, r = 0;
    int eff = 0;
    for (int n = 0; n < TFM_CHRF_ORDER; n++) {
        long nh = st[n][0], nr = st[n][1], nm = st[n][2];
        if (nh > 0 && nr > 0) {
            p += (double)nm / (double)nh;
            r += (double)nm / (double)nr;
            eff++;
        }
    }
    if (eff) {
        p /= eff;
        r /= eff;
    }
    if (avg_p) *avg_p = 100 * p;
    if (avg_r) *avg_r = 100 * r;
    if (p + r == 0) return 0.0;
    return 100 * (1 + factor) * p * r / (factor * p + r);
}

void tfm_chrf_init(tfm_chrf_stats *s, int lowercase) {
    memset(s, 0, sizeof *s);
    s->lowercase = lowercase;
}

int tfm_chrf_add(tfm_chrf_stats *s, const char *hyp, const char *const *refs, int n_refs) {
    if (n_refs < 1) {
        tfm_set_error("chrF: need at least one reference");
        return -1;
    }
    int lh, rc = -1;
    uint32_t *h = chars_no_space(hyp, s->lowercase, &lh), *r = NULL;
    gram *gh = h ? malloc(((size_t)lh + 1) * sizeof *gh) : NULL, *gr = NULL;
    long best[TFM_CHRF_ORDER][3] = {{0}}, cur[TFM_CHRF_ORDER][3];
    double best_f = -1;
    if (!gh) goto done;
    for (int k = 0; k < n_refs; k++) {  /* the reference with the best segment F wins (first on ties) */
        int lr;
        free(r);
        free(gr);
        gr = NULL;
        r = chars_no_space(refs[k], s->lowercase, &lr);
        if (!r || !(gr = malloc(((size_t)lr + 1) * sizeof *gr))) goto done;
        segment_counts(h, lh, r, lr, gh, gr, cur);
        double f = f_score((const long(*)[3])cur, NULL, NULL);
        if (f > best_f) {
            best_f = f;
            memcpy(best, cur, sizeof best);
        }
    }
    for (int n = 0; n < TFM_CHRF_ORDER; n++)
        for (int j = 0; j < 3; j++) s->counts[n][j] += best[n][j];
    s->n_segments++;
    rc = 0;
done:
    if (rc) tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory computing chrF");
    free(h);
    free(r);
    free(gh);
    free(gr);
    return rc;
}

void tfm_chrf_compute(const tfm_chrf_stats *s, tfm_chrf_result *r) {
    memset(r, 0, sizeof *r);
    memcpy(r->counts, s->counts, sizeof r->counts);
    r->score = f_score((const long(*)[3])s->counts, &r->precision, &r->recall);
}

int tfm_corpus_chrf(const char *const *hyps, const char *const *refs, int n, int lowercase, tfm_chrf_result *r) {
    tfm_chrf_stats s;
    tfm_chrf_init(&s, lowercase);
    for (int i = 0; i < n; i++)
        if (tfm_chrf_add(&s, hyps[i], &refs[i], 1)) return -1;
    tfm_chrf_compute(&s, r);
    return 0;
}

const char *tfm_chrf_format(const tfm_chrf_result *r, char *buf, size_t n) {
    snprintf(buf, n, "chrF2 = %.2f", r->score);
    return buf;
}

/* ---------------------------------------------------------------- signatures */
const char *tfm_bleu_signature(int lowercase, int n_refs, char *buf, size_t n) {
    snprintf(buf, n, "nrefs:%d|case:%s|eff:no|tok:13a|smooth:exp|version:%s", n_refs, lowercase ? "lc" : "mixed",
             TFM_SACREBLEU_VERSION);
    return buf;
}

const char *tfm_chrf_signature(int lowercase, int n_refs, char *buf, size_t n) {
    snprintf(buf, n, "nrefs:%d|case:%s|eff:yes|nc:%d|nw:0|space:no|version:%s", n_refs, lowercase ? "lc" : "mixed",
             TFM_CHRF_ORDER, TFM_SACREBLEU_VERSION);
    return buf;
}
