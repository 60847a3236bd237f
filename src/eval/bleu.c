/* BLEU: a C port of sacreBLEU's corpus BLEU (13a tokenizer, exp smoothing) and d2l's sentence BLEU.
 * See include/tfm/eval.h for the exact definition. */
#include "tfm/eval.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tfm/core.h"
#include "tfm/text.h"

/* ---------------------------------------------------------------- 13a tokenizer */
/* Python's str.replace(from, to) in place; len(to) <= len(from), so the write never passes the read. */
static void replace_all(char *s, const char *from, const char *to) {
    size_t lf = strlen(from), lt = strlen(to);
    char *r = s, *w = s;
    while (*r) {
        if (!strncmp(r, from, lf)) {
            memcpy(w, to, lt);
            w += lt;
            r += lf;
        } else {
            *w++ = *r++;
        }
    }
    *w = 0;
}

/* sacreBLEU's first regex: ([\{-\~\[-\` -\&\(-\+\:-\@\/]) -> " \1 ", i.e. every ASCII punctuation
 * character except ' , - . (and the space itself, which is harmless). */
static int punct13a(unsigned char c) {
    return (c >= 0x7B && c <= 0x7E) || (c >= 0x5B && c <= 0x60) || (c >= 0x20 && c <= 0x26) ||
           (c >= 0x28 && c <= 0x2B) || (c >= 0x3A && c <= 0x40) || c == 0x2F;
}
static int digit(unsigned char c) { return c >= '0' && c <= '9'; }

/* The regex passes below work on bytes. That matches Python's code-point regexes because every
 * class involved is ASCII: a multi-byte character is "not a digit" in each of its bytes, only its
 * last byte can be followed by '.' or ',', and its continuation bytes can never start a match. */
char *tfm_tokenize_13a(const char *line) {
    size_t n = strlen(line);
    char *a = malloc(n + 3);
    if (!a) return NULL;
    memcpy(a, line, n + 1);
    replace_all(a, "<skipped>", "");
    replace_all(a, "-\n", "");
    replace_all(a, "\n", " ");
    replace_all(a, "&quot;", "\"");
    replace_all(a, "&amp;", "&");
    replace_all(a, "&lt;", "<");
    replace_all(a, "&gt;", ">");
    n = strlen(a);
    /* " {line} " then pass 1: a space on each side of the punctuation class (at most 3x) */
    char *b = malloc(3 * (n + 2) + 1);
    if (!b) {
        free(a);
        return NULL;
    }
    size_t o = 0;
    b[o++] = ' ';
    b[o++] = ' ';
    b[o++] = ' ';  /* the added leading space is itself in the class: " " -> "   " */
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)a[i];
        if (punct13a(c)) {
            b[o++] = ' ';
            b[o++] = (char)c;
            b[o++] = ' ';
        } else {
            b[o++] = (char)c;
        }
    }
    b[o++] = ' ';
    b[o++] = ' ';
    b[o++] = ' ';
    b[o] = 0;
    free(a);
    n = o;
    /* pass 2: ([^0-9])([\.,]) -> "\1 \2 "   (each match adds 2 bytes for 2 consumed: <= 2x) */
    char *c2 = malloc(2 * n + 1);
    if (!c2) {
        free(b);
        return NULL;
    }
    o = 0;
    for (size_t i = 0; i < n;) {
        if (i + 1 < n && !digit((unsigned char)b[i]) && (b[i + 1] == '.' || b[i + 1] == ',')) {
            c2[o++] = b[i];
            c2[o++] = ' ';
            c2[o++] = b[i + 1];
            c2[o++] = ' ';
            i += 2;
        } else {
            c2[o++] = b[i++];
        }
    }
    free(b);
    n = o;
    /* pass 3: ([\.,])([^0-9]) -> " \1 \2" */
    char *c3 = malloc(2 * n + 1);
    if (!c3) {
        free(c2);
        return NULL;
    }
    o = 0;
    for (size_t i = 0; i < n;) {
        if (i + 1 < n && (c2[i] == '.' || c2[i] == ',') && !digit((unsigned char)c2[i + 1])) {
            c3[o++] = ' ';
            c3[o++] = c2[i];
            c3[o++] = ' ';
            c3[o++] = c2[i + 1];
            i += 2;
        } else {
            c3[o++] = c2[i++];
        }
    }
    free(c2);
    n = o;
    /* pass 4: ([0-9])(-) -> "\1 \2 " */
    char *c4 = malloc(2 * n + 1);
    if (!c4) {
        free(c3);
        return NULL;
    }
    o = 0;
    for (size_t i = 0; i < n;) {
        if (i + 1 < n && digit((unsigned char)c3[i]) && c3[i + 1] == '-') {
            c4[o++] = c3[i];
            c4[o++] = ' ';
            c4[o++] = '-';
            c4[o++] = ' ';
            i += 2;
        } else {
            c4[o++] = c3[i++];
        }
    }
    free(c3);
    n = o;
    /* ' '.join(line.split()): Python's whitespace (Unicode), single spaces, no ends */
    char *out = malloc(n + 1);
    if (!out) {
        free(c4);
        return NULL;
    }
    o = 0;
    int pending = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        int k = tfm_utf8_decode(c4 + i, n - i, &cp);
        if (!k) {  /* invalid byte: not whitespace; kept */
            cp = (unsigned char)c4[i];
            k = 1;
        }
        if (tfm_unicode_space(cp)) {
            pending = 1;
        } else {
            if (pending && o > 0) out[o++] = ' ';
            pending = 0;
            memcpy(out + o, c4 + i, (size_t)k);
            o += (size_t)k;
        }
        i += (size_t)k;
    }
    out[o] = 0;
    free(c4);
    return out;
}

/* ---------------------------------------------------------------- corpus BLEU */
void tfm_bleu_init(tfm_bleu_stats *s, int lowercase) {
    memset(s, 0, sizeof *s);
    s->lowercase = lowercase;
    s->max_order = TFM_BLEU_MAX_ORDER;
}

/* Lowercase (optional), strip trailing whitespace (Python rstrip), 13a-tokenize. */
static char *preprocess(const char *seg, int lowercase) {
    size_t n = strlen(seg);
    char *t = lowercase ? tfm_utf8_lower(seg, n, &n) : malloc(n + 1);
    if (!t) return NULL;
    if (!lowercase) memcpy(t, seg, n + 1);
    /* rstrip: find the end of the last non-whitespace code point */
    size_t end = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        int k = tfm_utf8_decode(t + i, n - i, &cp);
        if (!k) {
            cp = (unsigned char)t[i];
            k = 1;
        }
        i += (size_t)k;
        if (!tfm_unicode_space(cp)) end = i;
    }
    t[end] = 0;
    char *tok = tfm_tokenize_13a(t);
    free(t);
    return tok;
}

/* Splits a 13a output (single spaces) in place into tokens. Returns the count. */
static int split_spaces(char *s, char **tok) {
    int n = 0;
    while (*s) {
        tok[n++] = s;
        char *e = strchr(s, ' ');
        if (!e) break;
        *e = 0;
        s = e + 1;
    }
    return n;
}

static uint64_t hash_bytes(const void *p, size_t n, uint64_t h) {
    const unsigned char *s = p;
    for (size_t i = 0; i < n; i++) h = (h ^ s[i]) * 1099511628211ull;
    return h;
}

typedef struct {
    int start, n;      /* the n-gram is ids[start .. start+n) */
    int ref_max;       /* max count over references */
    int cur, cur_ref;  /* count in the reference being scanned */
    int hyp;           /* count in the hypothesis */
} ngram_entry;

typedef struct {
    const int *ids;
    ngram_entry *e;
    int n_e;
    int *slots;
    size_t mask;
} ngram_table;

static ngram_entry *ngram_get(ngram_table *t, int start, int n) {
    uint64_t h = hash_bytes(t->ids + start, (size_t)n * sizeof(int), 1469598103934665603ull ^ (uint64_t)n);
    size_t i = (size_t)h & t->mask;
    while (t->slots[i] >= 0) {
        ngram_entry *e = &t->e[t->slots[i]];
        if (e->n == n && !memcmp(t->ids + e->start, t->ids + start, (size_t)n * sizeof(int))) return e;
        i = (i + 1) & t->mask;
    }
    ngram_entry *e = &t->e[t->n_e];
    memset(e, 0, sizeof *e);
    e->start = start;
    e->n = n;
    e->cur_ref = -1;
    t->slots[i] = t->n_e++;
    return e;
}

int tfm_bleu_add(tfm_bleu_stats *s, const char *hyp, const char *const *refs, int n_refs) {
    if (n_refs < 1 || s->max_order < 1 || s->max_order > TFM_BLEU_MAX_ORDER) {
        tfm_set_error("BLEU: need at least one reference and 1 <= max_order <= %d", TFM_BLEU_MAX_ORDER);
        return -1;
    }
    int rc = -1;
    int nseg = n_refs + 1;
    char **text = calloc((size_t)nseg, sizeof *text);
    char ***tok = calloc((size_t)nseg, sizeof *tok);
    int *ntok = calloc((size_t)nseg, sizeof *ntok);
    int *ids = NULL, *vslots = NULL;
    char **vocab = NULL;
    ngram_table t = {0};
    if (!text || !tok || !ntok) goto done;
    int total = 0;
    for (int k = 0; k < nseg; k++) {
        text[k] = preprocess(k == 0 ? hyp : refs[k - 1], s->lowercase);
        if (!text[k]) goto done;
        tok[k] = malloc((strlen(text[k]) / 2 + 2) * sizeof(char *));
        if (!tok[k]) goto done;
        ntok[k] = split_spaces(text[k], tok[k]);
        total += ntok[k];
    }
    /* intern tokens: segment-local ids, all segments concatenated in `ids` */
    size_t vmask = 16;
    while (vmask < 2 * (size_t)total + 2) vmask *= 2;
    ids = malloc(((size_t)total + 1) * sizeof *ids);
    vslots = malloc(vmask * sizeof *vslots);
    vocab = malloc(((size_t)total + 1) * sizeof *vocab);
    if (!ids || !vslots || !vocab) goto done;
    vmask -= 1;
    for (size_t i = 0; i <= vmask; i++) vslots[i] = -1;
    int nv = 0, pos = 0;
    for (int k = 0; k < nseg; k++)
        for (int j = 0; j < ntok[k]; j++) {
            const char *w = tok[k][j];
            size_t h = (size_t)hash_bytes(w, strlen(w), 1469598103934665603ull) & vmask;
            while (vslots[h] >= 0 && strcmp(vocab[vslots[h]], w)) h = (h + 1) & vmask;
            if (vslots[h] < 0) {
                vslots[h] = nv;
                vocab[nv++] = (char *)w;
            }
            ids[pos++] = vslots[h];
        }
    /* n-gram table over every n-gram of every segment */
    int maxo = s->max_order;
    size_t max_entries = (size_t)total * (size_t)maxo + 1;
    size_t smask = 16;
    while (smask < 2 * max_entries) smask *= 2;
    t.ids = ids;
    t.e = malloc(max_entries * sizeof *t.e);
    t.slots = malloc(smask * sizeof *t.slots);
    if (!t.e || !t.slots) goto done;
    t.mask = smask - 1;
    for (size_t i = 0; i < smask; i++) t.slots[i] = -1;
    int base = ntok[0];
    for (int k = 1; k < nseg; k++) {
        for (int n = 1; n <= maxo; n++)
            for (int i = 0; i + n <= ntok[k]; i++) {
                ngram_entry *e = ngram_get(&t, base + i, n);
                if (e->cur_ref != k) {
                    e->cur_ref = k;
                    e->cur = 0;
                }
                if (++e->cur > e->ref_max) e->ref_max = e->cur;
            }
        base += ntok[k];
    }
    for (int n = 1; n <= maxo; n++)
        for (int i = 0; i + n <= ntok[0]; i++) ngram_get(&t, i, n)->hyp++;
    for (int i = 0; i < t.n_e; i++) {
        const ngram_entry *e = &t.e[i];
        if (!e->hyp) continue;
        s->total[e->n - 1] += e->hyp;
        s->correct[e->n - 1] += e->hyp < e->ref_max ? e->hyp : e->ref_max;
    }
    /* closest reference length, ties -> the shorter one */
    int hl = ntok[0], best = -1, best_diff = -1;
    for (int k = 1; k < nseg; k++) {
        int d = abs(hl - ntok[k]);
        if (best_diff < 0 || d < best_diff || (d == best_diff && ntok[k] < best)) {
            best_diff = d;
            best = ntok[k];
        }
    }
    s->hyp_len += hl;
    s->ref_len += best;
    s->n_segments++;
    rc = 0;
done:
    if (rc) tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory computing BLEU");
    for (int k = 0; k < nseg && text && tok; k++) {
        free(text[k]);
        free(tok[k]);
    }
    free(text);
    free(tok);
    free(ntok);
    free(ids);
    free(vslots);
    free(vocab);
    free(t.e);
    free(t.slots);
    return rc;
}

static double my_log(double x) { return x == 0 ? -9999999999.0 : log(x); }

void tfm_bleu_compute(const tfm_bleu_stats *s, tfm_bleu_result *r) {
    memset(r, 0, sizeof *r);
    int maxo = s->max_order;
    r->hyp_len = s->hyp_len;
    r->ref_len = s->ref_len;
    memcpy(r->correct, s->correct, sizeof r->correct);
    memcpy(r->total, s->total, sizeof r->total);
    r->ratio = s->ref_len ? (double)s->hyp_len / (double)s->ref_len : 0.0;
    if (s->hyp_len < s->ref_len) r->bp = s->hyp_len > 0 ? exp(1.0 - (double)s->ref_len / (double)s->hyp_len) : 0.0;
    else r->bp = 1.0;
    int any = 0;
    for (int n = 0; n < maxo; n++) any |= s->correct[n] != 0;
    if (!any) return;  /* score 0, precisions 0 (sacreBLEU's early stop) */
    double smooth = 1.0;
    int eff = maxo;
    for (int n = 1; n <= maxo; n++) {
        if (s->total[n - 1] == 0) break;
        if (s->effective_order) eff = n;
        if (s->correct[n - 1] == 0) {
            smooth *= 2;
            r->precisions[n - 1] = 100.0 / (smooth * (double)s->total[n - 1]);
        } else {
            r->precisions[n - 1] = 100.0 * (double)s->correct[n - 1] / (double)s->total[n - 1];
        }
    }
    double sum = 0;
    for (int n = 0; n < eff; n++) sum += my_log(r->precisions[n]);
    r->score = r->bp * exp(sum / eff);
}

int tfm_corpus_bleu(const char *const *hyps, const char *const *refs, int n, int lowercase, tfm_bleu_result *r) {
    tfm_bleu_stats s;
    tfm_bleu_init(&s, lowercase);
    for (int i = 0; i < n; i++)
        if (tfm_bleu_add(&s, hyps[i], &refs[i], 1)) return -1;
    tfm_bleu_compute(&s, r);
    return 0;
}

const char *tfm_bleu_format(const tfm_bleu_result *r, char *buf, size_t n) {
    snprintf(buf, n, "BLEU = %.2f %.1f/%.1f/%.1f/%.1f (BP = %.3f ratio = %.3f hyp_len = %ld ref_len = %ld)", r->score,
             r->precisions[0], r->precisions[1], r->precisions[2], r->precisions[3], r->bp, r->ratio, r->hyp_len,
             r->ref_len);
    return buf;
}

/* ---------------------------------------------------------------- d2l sentence BLEU */
typedef struct {
    const char *s;
    size_t n;
} span;

/* Python's str.split(' '): n_spaces + 1 pieces, empty ones included. */
static span *split_on_space(const char *s, int *count) {
    int n = 1;
    for (const char *p = s; *p; p++) n += *p == ' ';
    span *v = malloc((size_t)n * sizeof *v);
    if (!v) return NULL;
    int k = 0;
    const char *start = s;
    for (const char *p = s;; p++) {
        if (*p == ' ' || !*p) {
            v[k].s = start;
            v[k].n = (size_t)(p - start);
            k++;
            start = p + 1;
            if (!*p) break;
        }
    }
    *count = k;
    return v;
}

static int ngram_eq(const span *a, const span *b, int n) {
    for (int i = 0; i < n; i++)
        if (a[i].n != b[i].n || memcmp(a[i].s, b[i].s, a[i].n)) return 0;
    return 1;
}

double tfm_bleu_d2l(const char *pred, const char *label, int k) {
    int lp = 0, ll = 0;
    span *p = split_on_space(pred, &lp);
    span *l = split_on_space(label, &ll);
    unsigned char *used = malloc((size_t)ll + 1);
    double score = NAN;
    if (!p || !l || !used) goto done;
    score = exp(fmin(0.0, 1.0 - (double)ll / (double)lp));
    int kmax = k < lp ? k : lp;
    for (int n = 1; n <= kmax; n++) {
        /* clipped matches: each label n-gram can be matched once (d2l's label_subs counter) */
        int matches = 0;
        memset(used, 0, (size_t)ll + 1);
        for (int i = 0; i + n <= lp; i++)
            for (int j = 0; j + n <= ll; j++)
                if (!used[j] && ngram_eq(p + i, l + j, n)) {
                    used[j] = 1;
                    matches++;
                    break;
                }
        score *= pow((double)matches / (double)(lp - n + 1), pow(0.5, n));
    }
done:
    free(p);
    free(l);
    free(used);
    return score;
}
