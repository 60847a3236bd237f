/* Parallel corpora (TSV or two aligned files), id encoding, d2l-style arrays and length bucketing. */
#include "tfm/text.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- loading */
static int only_space(const char *s) {
    size_t n = strlen(s);
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        int k = tfm_utf8_decode(s + i, n - i, &cp);
        if (!k) return 0;
        if (!tfm_unicode_space(cp)) return 0;
        i += (size_t)k;
    }
    return 1;
}

static int pt_push(tfm_parallel_text *p, int *cap, tfm_toklist src, tfm_toklist tgt) {
    if (p->n == *cap) {
        int nc = *cap ? *cap * 2 : 256;
        tfm_toklist *ns = realloc(p->src, (size_t)nc * sizeof *ns);
        if (!ns) return -1;
        p->src = ns;
        tfm_toklist *nt = realloc(p->tgt, (size_t)nc * sizeof *nt);
        if (!nt) return -1;
        p->tgt = nt;
        *cap = nc;
    }
    p->src[p->n] = src;
    p->tgt[p->n] = tgt;
    p->n++;
    return 0;
}

/* Tokenizes one pair and appends it, or counts it as empty. */
static int add_pair(tfm_parallel_text *p, int *cap, tfm_tok_kind kind, const char *s, const char *t) {
    tfm_toklist a, b;
    if (tfm_tokenize(kind, s, &a)) return -1;
    if (tfm_tokenize(kind, t, &b)) {
        tfm_toklist_free(&a);
        return -1;
    }
    if (a.n == 0 || b.n == 0) {
        p->n_empty++;
        tfm_toklist_free(&a);
        tfm_toklist_free(&b);
        return 0;
    }
    if (pt_push(p, cap, a, b)) {
        tfm_toklist_free(&a);
        tfm_toklist_free(&b);
        tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory loading the corpus");
        return -1;
    }
    return 0;
}

int tfm_parallel_load_tsv(tfm_parallel_text *p, const char *path, tfm_tok_kind kind, int max_pairs) {
    memset(p, 0, sizeof *p);
    size_t len;
    char *buf = tfm_read_text_file(path, &len);
    if (!buf) return -1;
    int n_lines;
    char **lines = tfm_split_lines(buf, len, &n_lines);
    if (!lines) {
        free(buf);
        tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory reading '%s'", path);
        return -1;
    }
    int cap = 0, rc = 0;
    for (int i = 0; i < n_lines; i++) {
        if (max_pairs > 0 && p->n >= max_pairs) break;
        p->n_lines++;
        char *line = lines[i];
        if (only_space(line)) {
            p->n_empty++;
            continue;
        }
        char *tab = strchr(line, '\t');
        if (!tab) {
            tfm_set_error("%s:%d: no tab in this line (expected source<TAB>target)", path, i + 1);
            rc = -1;
            break;
        }
        *tab = 0;
        char *tgt = tab + 1;
        char *tab2 = strchr(tgt, '\t');
        if (tab2) *tab2 = 0;  /* extra columns (e.g. Tatoeba attribution) are ignored */
        if (add_pair(p, &cap, kind, line, tgt)) {
            rc = -1;
            break;
        }
    }
    free(lines);
    free(buf);
    if (rc) tfm_parallel_text_free(p), tfm_error_in_data();   /* a line without a tab, a bad token */
    return rc;
}

int tfm_parallel_load_files(tfm_parallel_text *p, const char *src_path, const char *tgt_path,
                            tfm_tok_kind kind, int max_pairs) {
    memset(p, 0, sizeof *p);
    size_t ls, lt;
    char *bs = tfm_read_text_file(src_path, &ls);
    if (!bs) return -1;
    char *bt = tfm_read_text_file(tgt_path, &lt);
    if (!bt) {
        free(bs);
        return -1;
    }
    int ns, nt, rc = 0, cap = 0;
    char **s = tfm_split_lines(bs, ls, &ns);
    char **t = tfm_split_lines(bt, lt, &nt);
    if (!s || !t) {
        tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory reading '%s'", src_path);
        rc = -1;
    } else if (ns != nt) {
        tfm_set_error("'%s' has %d lines but '%s' has %d lines (the files must be aligned line by line)",
                      src_path, ns, tgt_path, nt);
        rc = -1;
    } else {
        for (int i = 0; i < ns; i++) {
            if (max_pairs > 0 && p->n >= max_pairs) break;
            p->n_lines++;
            if (add_pair(p, &cap, kind, s[i], t[i])) {
                rc = -1;
                break;
            }
        }
    }
    free(s);
    free(t);
    free(bs);
    free(bt);
    if (rc) tfm_parallel_text_free(p), tfm_error_in_data();   /* unaligned files, a bad token */
    return rc;
}

void tfm_parallel_text_free(tfm_parallel_text *p) {
    for (int i = 0; i < p->n; i++) {
        tfm_toklist_free(&p->src[i]);
        tfm_toklist_free(&p->tgt[i]);
    }
    free(p->src);
    free(p->tgt);
    memset(p, 0, sizeof *p);
}

/* ---------------------------------------------------------------- ids */
static int encode_side(const tfm_toklist *lists, int n, const tfm_vocab *v, int **off_out, int **ids_out) {
    long long total = 0;
    for (int i = 0; i < n; i++) total += lists[i].n;
    if (total > INT_MAX) {
        tfm_set_error("corpus too large (%lld tokens)", total);
        return -1;
    }
    int *off = malloc(((size_t)n + 1) * sizeof *off);
    int *ids = malloc((size_t)(total ? total : 1) * sizeof *ids);
    if (!off || !ids) {
        free(off);
        free(ids);
        tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory encoding the corpus");
        return -1;
    }
    int o = 0;
    for (int i = 0; i < n; i++) {
        off[i] = o;
        for (int j = 0; j < lists[i].n; j++) ids[o++] = tfm_vocab_id(v, lists[i].tok[j]);
    }
    off[n] = o;
    *off_out = off;
    *ids_out = ids;
    return 0;
}

int tfm_parallel_encode(const tfm_parallel_text *p, const tfm_vocab *sv, const tfm_vocab *tv, tfm_parallel_ids *out) {
    memset(out, 0, sizeof *out);
    if (encode_side(p->src, p->n, sv, &out->src_off, &out->src_ids)) return -1;
    if (encode_side(p->tgt, p->n, tv, &out->tgt_off, &out->tgt_ids)) {
        tfm_parallel_ids_free(out);
        return -1;
    }
    out->n = p->n;
    return 0;
}

void tfm_parallel_ids_free(tfm_parallel_ids *ids) {
    free(ids->src_off);
    free(ids->tgt_off);
    free(ids->src_ids);
    free(ids->tgt_ids);
    memset(ids, 0, sizeof *ids);
}

/* ---------------------------------------------------------------- arrays */
int tfm_truncate_pad(const int *ids, int n_ids, int num_steps, int *out, int *truncated) {
    int valid = 0;
    for (int j = 0; j < num_steps; j++) {
        if (j < n_ids) out[j] = ids[j];
        else if (j == n_ids) out[j] = TFM_EOS;
        else out[j] = TFM_PAD;
        valid += out[j] != TFM_PAD;
    }
    if (truncated) *truncated = n_ids + 1 > num_steps;
    return valid;
}

int tfm_mt_corpus_build(const tfm_parallel_ids *ids, int num_steps, tfm_mt_corpus *a) {
    memset(a, 0, sizeof *a);
    if (num_steps < 1) {
        tfm_set_error("num_steps must be >= 1 (got %d)", num_steps);
        return -1;
    }
    size_t cells = (size_t)ids->n * (size_t)num_steps;
    a->src = malloc((cells ? cells : 1) * sizeof *a->src);
    a->tgt = malloc((cells ? cells : 1) * sizeof *a->tgt);
    a->src_valid = malloc(((size_t)ids->n + 1) * sizeof *a->src_valid);
    a->tgt_valid = malloc(((size_t)ids->n + 1) * sizeof *a->tgt_valid);
    if (!a->src || !a->tgt || !a->src_valid || !a->tgt_valid) {
        tfm_mt_corpus_free(a);
        tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory building the training arrays");
        return -1;
    }
    a->n = ids->n;
    a->num_steps = num_steps;
    for (int i = 0; i < ids->n; i++) {
        int ts, tt;
        a->src_valid[i] = tfm_truncate_pad(ids->src_ids + ids->src_off[i], ids->src_off[i + 1] - ids->src_off[i],
                                           num_steps, a->src + (size_t)i * num_steps, &ts);
        a->tgt_valid[i] = tfm_truncate_pad(ids->tgt_ids + ids->tgt_off[i], ids->tgt_off[i + 1] - ids->tgt_off[i],
                                           num_steps, a->tgt + (size_t)i * num_steps, &tt);
        a->n_truncated_src += ts;
        a->n_truncated_tgt += tt;
    }
    return 0;
}

void tfm_mt_corpus_free(tfm_mt_corpus *a) {
    free(a->src);
    free(a->tgt);
    free(a->src_valid);
    free(a->tgt_valid);
    memset(a, 0, sizeof *a);
}

/* ---------------------------------------------------------------- batches */
static void shuffle_ints(int *v, int n, tfm_rng *rng) {
    for (int i = n - 1; i > 0; i--) {
        int j = (int)(tfm_rng_u32(rng) % (uint32_t)(i + 1));
        int t = v[i];
        v[i] = v[j];
        v[j] = t;
    }
}

/* Stable merge sort of idx[0..n) by lengths[idx]. */
static void sort_by_length(int *idx, int *tmp, int n, const int *lengths) {
    if (n < 2) return;
    int h = n / 2;
    sort_by_length(idx, tmp, h, lengths);
    sort_by_length(idx + h, tmp, n - h, lengths);
    int i = 0, j = h, k = 0;
    while (i < h && j < n) tmp[k++] = lengths[idx[j]] < lengths[idx[i]] ? idx[j++] : idx[i++];
    while (i < h) tmp[k++] = idx[i++];
    while (j < n) tmp[k++] = idx[j++];
    memcpy(idx, tmp, (size_t)n * sizeof *idx);
}

int tfm_batches_make(tfm_batches *b, int n, int batch_size, const int *lengths, int bucket, tfm_rng *rng) {
    memset(b, 0, sizeof *b);
    if (n < 0 || batch_size < 1 || bucket < 0 || (bucket > 0 && !lengths)) {
        tfm_set_error("batches: invalid arguments (n=%d batch_size=%d bucket=%d)", n, batch_size, bucket);
        return -1;
    }
    int nb = (n + batch_size - 1) / batch_size;
    b->idx = malloc(((size_t)n + 1) * sizeof *b->idx);
    b->off = malloc(((size_t)nb + 1) * sizeof *b->off);
    int *order = malloc(((size_t)nb + 1) * sizeof *order);
    int *tmp = malloc(((size_t)n + 1) * sizeof *tmp);
    if (!b->idx || !b->off || !order || !tmp) {
        free(order);
        free(tmp);
        tfm_batches_free(b);
        tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory making batches");
        return -1;
    }
    for (int i = 0; i < n; i++) b->idx[i] = i;
    if (rng) shuffle_ints(b->idx, n, rng);
    if (bucket > 0) {
        long long chunk = (long long)bucket * batch_size;
        for (long long s = 0; s < n; s += chunk) {
            int len = (int)(n - s < chunk ? n - s : chunk);
            sort_by_length(b->idx + s, tmp, len, lengths);
        }
    }
    /* batch order */
    for (int i = 0; i < nb; i++) order[i] = i;
    if (rng) shuffle_ints(order, nb, rng);
    int o = 0;
    for (int k = 0; k < nb; k++) {
        int start = order[k] * batch_size;
        int cnt = n - start < batch_size ? n - start : batch_size;
        memcpy(tmp + o, b->idx + start, (size_t)cnt * sizeof *tmp);
        b->off[k] = o;
        o += cnt;
    }
    b->off[nb] = o;
    if (n) memcpy(b->idx, tmp, (size_t)n * sizeof *tmp);
    b->n_batches = nb;
    free(order);
    free(tmp);
    return 0;
}

void tfm_batches_free(tfm_batches *b) {
    free(b->idx);
    free(b->off);
    memset(b, 0, sizeof *b);
}
