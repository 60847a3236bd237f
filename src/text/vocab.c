/* Word vocabulary: reserved tokens, frequency-ordered tokens, hash lookup, (de)serialization. */
#include "tfm/text.h"

#include <stdlib.h>
#include <string.h>

static const char *const reserved[TFM_N_RESERVED] = {"<pad>", "<bos>", "<eos>", "<unk>"};

static uint64_t hash_str(const char *s) {
    uint64_t h = 1469598103934665603ull;  /* FNV-1a */
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static int slots_for(int n) {
    int s = 16;
    while (s < 2 * n) s *= 2;
    return s;
}

/* Builds the hash table over v->tok[0..n). Returns -1 on a duplicate (naming it) or OOM. */
static int vocab_index(tfm_vocab *v) {
    v->n_slots = slots_for(v->n);
    v->slots = malloc((size_t)v->n_slots * sizeof *v->slots);
    if (!v->slots) {
        tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory building the vocabulary");
        return -1;
    }
    for (int i = 0; i < v->n_slots; i++) v->slots[i] = -1;
    unsigned mask = (unsigned)v->n_slots - 1;
    for (int id = 0; id < v->n; id++) {
        unsigned h = (unsigned)hash_str(v->tok[id]) & mask;
        while (v->slots[h] >= 0) {
            if (!strcmp(v->tok[v->slots[h]], v->tok[id])) {
                tfm_set_error("vocabulary: token '%s' appears twice (ids %d and %d)", v->tok[id], v->slots[h], id);
                return -1;
            }
            h = (h + 1) & mask;
        }
        v->slots[h] = id;
    }
    return 0;
}

int tfm_vocab_find(const tfm_vocab *v, const char *tok) {
    if (!v->slots) return -1;
    unsigned mask = (unsigned)v->n_slots - 1;
    unsigned h = (unsigned)hash_str(tok) & mask;
    while (v->slots[h] >= 0) {
        if (!strcmp(v->tok[v->slots[h]], tok)) return v->slots[h];
        h = (h + 1) & mask;
    }
    return -1;
}

int tfm_vocab_id(const tfm_vocab *v, const char *tok) {
    int id = tfm_vocab_find(v, tok);
    return id < 0 ? TFM_UNK : id;
}

const char *tfm_vocab_token(const tfm_vocab *v, int id) {
    return (id >= 0 && id < v->n) ? v->tok[id] : NULL;
}

void tfm_vocab_free(tfm_vocab *v) {
    if (v->tok)
        for (int i = 0; i < v->n; i++) free(v->tok[i]);
    free(v->tok);
    free(v->slots);
    memset(v, 0, sizeof *v);
}

static char *dup_str(const char *s, size_t n) {
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = 0;
    }
    return d;
}

/* ---------------------------------------------------------------- build */
typedef struct {
    const char *tok;  /* points into the caller's token lists */
    long count;
} tok_count;

static int cmp_count(const void *a, const void *b) {
    const tok_count *x = a, *y = b;
    if (x->count != y->count) return x->count > y->count ? -1 : 1;
    return strcmp(x->tok, y->tok);
}

int tfm_vocab_build(tfm_vocab *v, const tfm_toklist *lists, int n_lists, int min_freq) {
    memset(v, 0, sizeof *v);
    /* count distinct tokens with an open-addressing table of indices into `uniq` */
    size_t total = 0;
    for (int i = 0; i < n_lists; i++) total += (size_t)lists[i].n;
    size_t n_slots = 16;
    while (n_slots < 2 * total + 2) n_slots *= 2;
    int *slots = malloc(n_slots * sizeof *slots);
    tok_count *uniq = malloc((total ? total : 1) * sizeof *uniq);
    if (!slots || !uniq) goto oom;
    for (size_t i = 0; i < n_slots; i++) slots[i] = -1;
    int n_uniq = 0;
    for (int i = 0; i < n_lists; i++) {
        for (int j = 0; j < lists[i].n; j++) {
            const char *t = lists[i].tok[j];
            size_t h = (size_t)hash_str(t) & (n_slots - 1);
            while (slots[h] >= 0 && strcmp(uniq[slots[h]].tok, t)) h = (h + 1) & (n_slots - 1);
            if (slots[h] < 0) {
                slots[h] = n_uniq;
                uniq[n_uniq].tok = t;
                uniq[n_uniq].count = 0;
                n_uniq++;
            }
            uniq[slots[h]].count++;
        }
    }
    free(slots);
    slots = NULL;
    qsort(uniq, (size_t)n_uniq, sizeof *uniq, cmp_count);
    v->tok = malloc(((size_t)n_uniq + TFM_N_RESERVED) * sizeof *v->tok);
    if (!v->tok) goto oom;
    for (int i = 0; i < TFM_N_RESERVED; i++) {
        v->tok[v->n] = dup_str(reserved[i], strlen(reserved[i]));
        if (!v->tok[v->n]) goto oom;
        v->n++;
    }
    for (int i = 0; i < n_uniq; i++) {
        if (uniq[i].count < (long)min_freq) break;
        int is_reserved = 0;
        for (int r = 0; r < TFM_N_RESERVED; r++) is_reserved |= !strcmp(uniq[i].tok, reserved[r]);
        if (is_reserved) continue;
        v->tok[v->n] = dup_str(uniq[i].tok, strlen(uniq[i].tok));
        if (!v->tok[v->n]) goto oom;
        v->n++;
    }
    free(uniq);
    uniq = NULL;
    if (vocab_index(v)) goto fail;
    return 0;
oom:
    tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory building the vocabulary");
fail:
    free(slots);
    free(uniq);
    tfm_vocab_free(v);
    return -1;
}

/* ---------------------------------------------------------------- serialization */
char *tfm_vocab_serialize(const tfm_vocab *v) {
    size_t total = 1;
    for (int i = 0; i < v->n; i++) total += strlen(v->tok[i]) + 1;
    char *s = malloc(total);
    if (!s) {
        tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory serializing the vocabulary");
        return NULL;
    }
    size_t o = 0;
    for (int i = 0; i < v->n; i++) {
        if (i) s[o++] = '\n';
        size_t l = strlen(v->tok[i]);
        memcpy(s + o, v->tok[i], l);
        o += l;
    }
    s[o] = 0;
    return s;
}

int tfm_vocab_deserialize(tfm_vocab *v, const char *s) {
    memset(v, 0, sizeof *v);
    size_t len = strlen(s);
    if (!tfm_utf8_valid(s, len)) {
        tfm_set_error("vocabulary: invalid UTF-8 at byte offset %ld", tfm_utf8_first_invalid(s, len));
        return -1;
    }
    size_t n = 1;
    for (size_t i = 0; i < len; i++) n += s[i] == '\n';
    if (n > (size_t)1 << 30) {
        tfm_set_error("vocabulary: too many tokens");
        return -1;
    }
    v->tok = calloc(n, sizeof *v->tok);
    if (!v->tok) goto oom;
    const char *p = s;
    for (size_t i = 0; i < n; i++) {
        const char *e = strchr(p, '\n');
        size_t l = e ? (size_t)(e - p) : strlen(p);
        if (l == 0) {
            tfm_set_error("vocabulary: token %zu is empty", i);
            goto fail;
        }
        v->tok[i] = dup_str(p, l);
        if (!v->tok[i]) goto oom;
        v->n = (int)i + 1;
        p = e ? e + 1 : p + l;
    }
    if (v->n < TFM_N_RESERVED) {
        tfm_set_error("vocabulary: only %d tokens, expected the reserved tokens <pad> <bos> <eos> <unk> first", v->n);
        goto fail;
    }
    for (int r = 0; r < TFM_N_RESERVED; r++)
        if (strcmp(v->tok[r], reserved[r])) {
            tfm_set_error("vocabulary: token %d is '%s', expected '%s'", r, v->tok[r], reserved[r]);
            goto fail;
        }
    if (vocab_index(v)) goto fail;
    return 0;
oom:
    tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory loading the vocabulary");
fail:
    tfm_vocab_free(v);
    return -1;
}
