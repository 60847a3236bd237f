/* BPE training: exact greedy merges over word types, with incremental pair counts.
 *
 *   1. Normalize every line (identity, ' ' -> '▁', a dummy '▁' in front) and cut it into words at
 *      each '▁' (SentencePiece's SplitIntoWords); count the distinct words.
 *   2. Alphabet: characters by frequency, the most frequent ones covering character_coverage of all
 *      characters; rarer ones are left to byte fallback and never merged.
 *   3. Every adjacent symbol pair of every word type gets a count (sum of the word counts) and a list
 *      of the word types it occurs in; a max-heap orders pairs by (count desc, shorter piece, byte
 *      order of the piece) — SentencePiece's tie rule. Entries are checked lazily: an entry whose
 *      count is out of date is pushed again with the current count.
 *   4. Merging the best pair (a, b) -> c only visits the word types in its list: each one's pair
 *      counts are taken out, the word is rewritten, and its pairs put back; pairs containing c are
 *      new, so they get the word in their list and a heap entry. Every count stays exact.
 * A merge whose string already exists (e.g. "aaa" from "aa"+"a" and from "a"+"aa") reuses that
 * symbol and adds no piece. The result is deterministic: no hashing order or randomness reaches it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/bpe_internal.h"
#include "tfm/core.h"
#include "tfm/text.h"

#define N_SPECIAL 260           /* <pad> <s> </s> <unk> + 256 bytes */
#define MAX_VOCAB 1000000

void tfm_bpe_learn_opts_default(tfm_bpe_learn_opts *o) {
    o->vocab_size = 8000;
    o->character_coverage = 0.9995f;
    o->max_piece_chars = 16;
    o->split_by_class = 1;
}

/* ---------------------------------------------------------------- character classes */
/* A piece never mixes letters, digits and punctuation/symbols (a rough stand-in for SentencePiece's
 * split_by_unicode_script + split_by_number); '▁' only ever starts a piece. */
enum { CLASS_WS, CLASS_LETTER, CLASS_DIGIT, CLASS_PUNCT };

static int char_class(uint32_t cp) {
    if (cp == 0x2581) return CLASS_WS;
    if (cp >= '0' && cp <= '9') return CLASS_DIGIT;
    if (cp < 0x80) return ((cp | 32) >= 'a' && (cp | 32) <= 'z') ? CLASS_LETTER : CLASS_PUNCT;
    if ((cp >= 0xa0 && cp <= 0xbf) || cp == 0xd7 || cp == 0xf7 || (cp >= 0x2000 && cp <= 0x2bff) ||
        (cp >= 0x3000 && cp <= 0x303f) || (cp >= 0xfe30 && cp <= 0xfe4f) || (cp >= 0xff01 && cp <= 0xff0f) ||
        (cp >= 0xff1a && cp <= 0xff20))
        return CLASS_PUNCT;
    return CLASS_LETTER;
}

/* ---------------------------------------------------------------- string -> index map */
typedef struct {
    int *slots;
    int n_slots, n;
} str_map;

typedef struct {
    bpe_buf pool;                /* strings back to back */
    size_t *off;
    int *len;
    int n, cap;
    str_map map;
} str_set;

static int map_grow(str_set *s);

/* index of s[0..n) in the set, adding it if absent (*added = 1); -1 when out of memory */
static int set_intern(str_set *s, const char *str, size_t n, int *added) {
    if (added) *added = 0;
    if (2 * (s->n + 1) > s->map.n_slots && map_grow(s)) return -1;
    size_t mask = (size_t)s->map.n_slots - 1;
    size_t k = bpe_hash(str, n) & mask;
    for (;; k = (k + 1) & mask) {
        int o = s->map.slots[k];
        if (o < 0) break;
        if ((size_t)s->len[o] == n && !memcmp(s->pool.p + s->off[o], str, n)) return o;
    }
    if (s->n == s->cap) {
        int nc = s->cap ? s->cap * 2 : 1024;
        size_t *no = realloc(s->off, (size_t)nc * sizeof *no);
        if (no) s->off = no;
        int *nl = realloc(s->len, (size_t)nc * sizeof *nl);
        if (nl) s->len = nl;
        if (!no || !nl) return -1;
        s->cap = nc;
    }
    s->off[s->n] = s->pool.n;
    s->len[s->n] = (int)n;
    bpe_buf_put(&s->pool, str, n);
    if (s->pool.oom) return -1;
    s->map.slots[k] = s->n;
    if (added) *added = 1;
    return s->n++;
}

static int map_grow(str_set *s) {
    int ns = s->map.n_slots ? s->map.n_slots * 2 : 1024;
    int *slots = malloc((size_t)ns * sizeof *slots);
    if (!slots) return -1;
    memset(slots, -1, (size_t)ns * sizeof *slots);
    for (int i = 0; i < s->n; i++) {
        size_t k = bpe_hash((const char *)s->pool.p + s->off[i], (size_t)s->len[i]) & (size_t)(ns - 1);
        while (slots[k] >= 0) k = (k + 1) & (size_t)(ns - 1);
        slots[k] = i;
    }
    free(s->map.slots);
    s->map.slots = slots;
    s->map.n_slots = ns;
    return 0;
}

static const char *set_str(const str_set *s, int i) { return (const char *)s->pool.p + s->off[i]; }

static void set_free(str_set *s) {
    free(s->pool.p);
    free(s->off);
    free(s->len);
    free(s->map.slots);
}

/* ---------------------------------------------------------------- trainer state */
typedef struct {
    int a, b;
    int64_t count;
    int *loc;                    /* word types the pair was seen in (may hold stale ones) */
    int n_loc, cap_loc;
    int stamp;                   /* last merge that recorded this pair as new */
} pair_info;

typedef struct {
    int64_t count;
    int pair;
} heap_entry;

typedef struct {
    const tfm_bpe_learn_opts *o;
    str_set words;               /* distinct words */
    int64_t *wcount;             /* word type -> occurrences */
    int *wseq, *woff, *wlen;     /* word type -> its symbols wseq[woff .. woff+wlen) */
    int *wstamp;
    str_set syms;                /* symbol id -> string */
    int *nchars;                 /* symbol id -> characters */
    unsigned char *sclass;       /* symbol id -> class of its characters after a leading '▁' */
    pair_info *pairs;
    int n_pairs, cap_pairs;
    int *pslots, n_pslots;       /* (a, b) -> pair index */
    heap_entry *heap;
    int n_heap, cap_heap;
    int *touched, n_touched, cap_touched;
    int oom;
} trainer;

static uint64_t pair_key_hash(int a, int b) {
    uint64_t x = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return x;
}

static int pairs_grow(trainer *t) {
    int ns = t->n_pslots ? t->n_pslots * 2 : 1 << 16;
    int *slots = malloc((size_t)ns * sizeof *slots);
    if (!slots) return -1;
    memset(slots, -1, (size_t)ns * sizeof *slots);
    for (int i = 0; i < t->n_pairs; i++) {
        size_t k = pair_key_hash(t->pairs[i].a, t->pairs[i].b) & (size_t)(ns - 1);
        while (slots[k] >= 0) k = (k + 1) & (size_t)(ns - 1);
        slots[k] = i;
    }
    free(t->pslots);
    t->pslots = slots;
    t->n_pslots = ns;
    return 0;
}

/* index of pair (a, b), created with count 0 if absent; -1 when out of memory */
static int pair_get(trainer *t, int a, int b) {
    if (2 * (t->n_pairs + 1) > t->n_pslots && pairs_grow(t)) return -1;
    size_t mask = (size_t)t->n_pslots - 1;
    size_t k = pair_key_hash(a, b) & mask;
    for (;; k = (k + 1) & mask) {
        int o = t->pslots[k];
        if (o < 0) break;
        if (t->pairs[o].a == a && t->pairs[o].b == b) return o;
    }
    if (t->n_pairs == t->cap_pairs) {
        int nc = t->cap_pairs ? t->cap_pairs * 2 : 1 << 15;
        pair_info *np = realloc(t->pairs, (size_t)nc * sizeof *np);
        if (!np) return -1;
        t->pairs = np;
        t->cap_pairs = nc;
    }
    t->pairs[t->n_pairs] = (pair_info){a, b, 0, NULL, 0, 0, 0};
    t->pslots[k] = t->n_pairs;
    return t->n_pairs++;
}

/* Heap order: higher count, then fewer characters, then smaller bytes of the merged string. */
static int cmp_concat(const trainer *t, const pair_info *x, const pair_info *y) {
    const char *xs[2] = {set_str(&t->syms, x->a), set_str(&t->syms, x->b)};
    int xl[2] = {t->syms.len[x->a], t->syms.len[x->b]};
    const char *ys[2] = {set_str(&t->syms, y->a), set_str(&t->syms, y->b)};
    int yl[2] = {t->syms.len[y->a], t->syms.len[y->b]};
    int xi = 0, yi = 0, xp = 0, yp = 0;
    for (;;) {
        while (xi < 2 && xp == xl[xi]) xi++, xp = 0;
        while (yi < 2 && yp == yl[yi]) yi++, yp = 0;
        if (xi == 2 || yi == 2) return xi == 2 && yi == 2 ? 0 : xi == 2 ? -1 : 1;   /* a prefix sorts first */
        unsigned char cx = (unsigned char)xs[xi][xp++], cy = (unsigned char)ys[yi][yp++];
        if (cx != cy) return cx < cy ? -1 : 1;
    }
}

static int entry_better(const trainer *t, const heap_entry *x, const heap_entry *y) {
    if (x->count != y->count) return x->count > y->count;
    const pair_info *px = &t->pairs[x->pair], *py = &t->pairs[y->pair];
    int cx = t->nchars[px->a] + t->nchars[px->b], cy = t->nchars[py->a] + t->nchars[py->b];
    if (cx != cy) return cx < cy;
    return cmp_concat(t, px, py) < 0;
}

static void heap_push(trainer *t, int64_t count, int pair) {
    if (t->n_heap == t->cap_heap) {
        int nc = t->cap_heap ? t->cap_heap * 2 : 1 << 16;
        heap_entry *nh = realloc(t->heap, (size_t)nc * sizeof *nh);
        if (!nh) {
            t->oom = 1;
            return;
        }
        t->heap = nh;
        t->cap_heap = nc;
    }
    heap_entry e = {count, pair};
    int i = t->n_heap++;
    while (i > 0 && entry_better(t, &e, &t->heap[(i - 1) / 2])) {
        t->heap[i] = t->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    t->heap[i] = e;
}

static heap_entry heap_pop(trainer *t) {
    heap_entry top = t->heap[0], last = t->heap[--t->n_heap];
    int i = 0;
    for (;;) {
        int c = 2 * i + 1;
        if (c >= t->n_heap) break;
        if (c + 1 < t->n_heap && entry_better(t, &t->heap[c + 1], &t->heap[c])) c++;
        if (!entry_better(t, &t->heap[c], &last)) break;
        t->heap[i] = t->heap[c];
        i = c;
    }
    if (t->n_heap) t->heap[i] = last;
    return top;
}

static void loc_add(trainer *t, pair_info *p, int w) {
    if (p->n_loc && p->loc[p->n_loc - 1] == w) return;
    if (p->n_loc == p->cap_loc) {
        int nc = p->cap_loc ? p->cap_loc * 2 : 4;
        int *nl = realloc(p->loc, (size_t)nc * sizeof *nl);
        if (!nl) {
            t->oom = 1;
            return;
        }
        p->loc = nl;
        p->cap_loc = nc;
    }
    p->loc[p->n_loc++] = w;
}

/* Add delta to the count of pair (a, b) in word w. track: also record w in the pair's word list
 * (and the pair as touched by merge `stamp`). */
static void pair_add(trainer *t, int a, int b, int64_t delta, int w, int track, int stamp) {
    if (a < 0 || b < 0 || t->nchars[a] + t->nchars[b] > t->o->max_piece_chars) return;
    if (t->o->split_by_class && t->sclass[a] != CLASS_WS && t->sclass[a] != t->sclass[b]) return;
    int p = pair_get(t, a, b);
    if (p < 0) {
        t->oom = 1;
        return;
    }
    pair_info *pi = &t->pairs[p];
    pi->count += delta;
    if (!track) return;
    loc_add(t, pi, w);
    if (pi->stamp != stamp) {
        pi->stamp = stamp;
        if (t->n_touched == t->cap_touched) {
            int nc = t->cap_touched ? t->cap_touched * 2 : 256;
            int *nt = realloc(t->touched, (size_t)nc * sizeof *nt);
            if (!nt) {
                t->oom = 1;
                return;
            }
            t->touched = nt;
            t->cap_touched = nc;
        }
        t->touched[t->n_touched++] = p;
    }
}

/* Rewrite word type w with (a, b) -> c; returns 1 if it contained the pair. */
static int merge_word(trainer *t, int w, int a, int b, int c, int stamp) {
    int *s = t->wseq + t->woff[w], n = t->wlen[w], found = 0;
    for (int i = 0; i + 1 < n && !found; i++) found = s[i] == a && s[i + 1] == b;
    if (!found) return 0;
    int64_t cnt = t->wcount[w];
    for (int i = 0; i + 1 < n; i++) pair_add(t, s[i], s[i + 1], -cnt, w, 0, stamp);
    int j = 0;
    for (int i = 0; i < n;) {
        if (i + 1 < n && s[i] == a && s[i + 1] == b) {
            s[j++] = c;
            i += 2;
        } else {
            s[j++] = s[i++];
        }
    }
    t->wlen[w] = j;
    for (int i = 0; i + 1 < j; i++) pair_add(t, s[i], s[i + 1], cnt, w, s[i] == c || s[i + 1] == c, stamp);
    return 1;
}

/* ---------------------------------------------------------------- the steps */
/* Step 1: the distinct words of all lines and their counts. */
static int count_words(trainer *t, const char *const *lines, int n_lines) {
    tfm_bpe norm_spec;   /* only the normalizer fields are used */
    memset(&norm_spec, 0, sizeof norm_spec);
    norm_spec.add_dummy_prefix = 1;
    norm_spec.escape_whitespaces = 1;
    int cap = 0;
    for (int li = 0; li < n_lines; li++) {
        size_t len = strlen(lines[li]), n;
        long bad = tfm_utf8_first_invalid(lines[li], len);
        if (bad >= 0) return tfm_set_error("line %d: invalid UTF-8 (byte 0x%02x)", li + 1, (unsigned char)lines[li][bad]), -1;
        char *norm = bpe_normalize(&norm_spec, lines[li], len, &n, NULL, NULL);
        if (!norm) return tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory learning BPE"), -1;
        for (size_t i = 0; i < n;) {   /* a word starts at each '▁' */
            size_t j = i + BPE_WS_LEN;
            while (j < n && memcmp(norm + j, BPE_WS, BPE_WS_LEN)) j++;
            if (j > n) j = n;
            int added;
            int w = set_intern(&t->words, norm + i, j - i, &added);
            if (w < 0) {
                free(norm);
                return tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory learning BPE"), -1;
            }
            if (added) {
                if (w >= cap) {
                    cap = cap ? cap * 2 : 4096;
                    int64_t *nc = realloc(t->wcount, (size_t)cap * sizeof *nc);
                    if (!nc) {
                        free(norm);
                        return tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory learning BPE"), -1;
                    }
                    t->wcount = nc;
                }
                t->wcount[w] = 0;
            }
            t->wcount[w]++;
            i = j;
        }
        free(norm);
    }
    return 0;
}

typedef struct {
    uint32_t cp;
    int64_t count;
} char_count;

static int char_count_cmp(const void *x, const void *y) {
    const char_count *a = x, *b = y;
    if (a->count != b->count) return a->count > b->count ? -1 : 1;
    return a->cp < b->cp ? -1 : a->cp > b->cp;
}

/* Step 2: the alphabet. chars[0..*n_kept) are the kept characters, most frequent first; their
 * symbol ids are 0..n_kept-1. cp_sym maps every code point to its symbol or -1. */
static int choose_alphabet(trainer *t, int *cp_sym, char_count **chars_out, int *n_kept) {
    int64_t *cnt = calloc(0x110000, sizeof *cnt);
    if (!cnt) return tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory learning BPE"), -1;
    int64_t all = 0;
    int n_distinct = 0;
    for (int w = 0; w < t->words.n; w++) {
        const char *s = set_str(&t->words, w);
        size_t n = (size_t)t->words.len[w];
        for (size_t i = 0; i < n;) {
            uint32_t cp;
            int k = tfm_utf8_decode(s + i, n - i, &cp);
            n_distinct += cnt[cp] == 0;
            cnt[cp] += t->wcount[w];
            all += t->wcount[w];
            i += (size_t)k;
        }
    }
    char_count *chars = malloc((size_t)(n_distinct ? n_distinct : 1) * sizeof *chars);
    if (!chars) {
        free(cnt);
        return tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory learning BPE"), -1;
    }
    int k = 0;
    for (uint32_t cp = 0; cp < 0x110000; cp++)
        if (cnt[cp]) chars[k++] = (char_count){cp, cnt[cp]};
    free(cnt);
    qsort(chars, (size_t)k, sizeof *chars, char_count_cmp);
    int kept = 0;
    int64_t acc = 0;
    for (; kept < k; kept++) {   /* SentencePiece: stop once the kept ones cover enough */
        if ((double)acc / (double)all >= (double)t->o->character_coverage) break;
        acc += chars[kept].count;
    }
    for (int i = 0; i < 0x110000; i++) cp_sym[i] = -1;
    for (int i = 0; i < kept; i++) cp_sym[chars[i].cp] = i;
    *chars_out = chars;
    *n_kept = kept;
    return 0;
}

/* Symbols of the kept characters and every word's initial symbol sequence. */
static int init_symbols(trainer *t, const int *cp_sym, const char_count *chars, int n_kept) {
    t->nchars = malloc((size_t)(n_kept + 1024) * sizeof *t->nchars);
    t->sclass = malloc((size_t)(n_kept + 1024));
    if (!t->nchars || !t->sclass) return -1;
    for (int i = 0; i < n_kept; i++) {
        char u[4];
        int k = tfm_utf8_encode(chars[i].cp, u);
        if (set_intern(&t->syms, u, (size_t)k, NULL) != i) return -1;
        t->nchars[i] = 1;
        t->sclass[i] = (unsigned char)char_class(chars[i].cp);
    }
    size_t total = 0;
    for (int w = 0; w < t->words.n; w++) total += (size_t)t->words.len[w];   /* >= characters */
    t->wseq = malloc((total ? total : 1) * sizeof *t->wseq);
    t->woff = malloc((size_t)t->words.n * sizeof *t->woff + 1);
    t->wlen = malloc((size_t)t->words.n * sizeof *t->wlen + 1);
    t->wstamp = calloc((size_t)t->words.n + 1, sizeof *t->wstamp);
    if (!t->wseq || !t->woff || !t->wlen || !t->wstamp) return -1;
    int pos = 0;
    for (int w = 0; w < t->words.n; w++) {
        const char *s = set_str(&t->words, w);
        size_t n = (size_t)t->words.len[w];
        t->woff[w] = pos;
        for (size_t i = 0; i < n;) {
            uint32_t cp;
            int k = tfm_utf8_decode(s + i, n - i, &cp);
            t->wseq[pos++] = cp_sym[cp];
            i += (size_t)k;
        }
        t->wlen[w] = pos - t->woff[w];
    }
    return 0;
}

/* Step 4: merges until n_target new pieces exist. merged[] receives their symbol ids in order. */
static int run_merges(trainer *t, int n_target, int *merged, int *n_merged) {
    for (int w = 0; w < t->words.n; w++) {
        const int *s = t->wseq + t->woff[w];
        for (int i = 0; i + 1 < t->wlen[w]; i++) pair_add(t, s[i], s[i + 1], t->wcount[w], w, 1, 0);
    }
    for (int p = 0; p < t->n_pairs; p++)
        if (t->pairs[p].count > 0) heap_push(t, t->pairs[p].count, p);
    int done = 0, stamp = 0;
    while (done < n_target && t->n_heap > 0 && !t->oom) {
        heap_entry e = heap_pop(t);
        int64_t now = t->pairs[e.pair].count;
        if (now != e.count) {   /* out of date: requeue with the current count */
            if (now > 0) heap_push(t, now, e.pair);
            continue;
        }
        int a = t->pairs[e.pair].a, b = t->pairs[e.pair].b;
        size_t la = (size_t)t->syms.len[a], lb = (size_t)t->syms.len[b];
        char buf[16 * 4 * 2 + 1];
        if (la + lb >= sizeof buf) return tfm_set_error("internal error: piece too long"), -1;
        memcpy(buf, set_str(&t->syms, a), la);
        memcpy(buf + la, set_str(&t->syms, b), lb);
        int added;
        int c = set_intern(&t->syms, buf, la + lb, &added);
        if (c < 0) return -1;
        if (added) {
            if ((c & 1023) == 0) {
                int *nn = realloc(t->nchars, (size_t)(c + 1024) * sizeof *nn);
                if (nn) t->nchars = nn;
                unsigned char *nc = realloc(t->sclass, (size_t)(c + 1024));
                if (nc) t->sclass = nc;
                if (!nn || !nc) return -1;
            }
            t->nchars[c] = t->nchars[a] + t->nchars[b];
            t->sclass[c] = t->sclass[a] == CLASS_WS ? t->sclass[b] : t->sclass[a];
            merged[done++] = c;
        }
        stamp++;
        t->n_touched = 0;
        pair_info *pi = &t->pairs[e.pair];
        int *loc = pi->loc, n_loc = pi->n_loc;
        pi->loc = NULL;
        pi->n_loc = pi->cap_loc = 0;
        for (int k = 0; k < n_loc; k++) {
            int w = loc[k];
            if (t->wstamp[w] == stamp) continue;
            t->wstamp[w] = stamp;
            merge_word(t, w, a, b, c, stamp);
        }
        free(loc);
        for (int k = 0; k < t->n_touched; k++) {
            int p = t->touched[k];
            if (t->pairs[p].count > 0) heap_push(t, t->pairs[p].count, p);
        }
    }
    if (t->oom) return -1;
    *n_merged = done;
    return 0;
}

static void trainer_free(trainer *t) {
    set_free(&t->words);
    set_free(&t->syms);
    free(t->wcount);
    free(t->wseq);
    free(t->woff);
    free(t->wlen);
    free(t->wstamp);
    free(t->nchars);
    free(t->sclass);
    for (int p = 0; p < t->n_pairs; p++) free(t->pairs[p].loc);
    free(t->pairs);
    free(t->pslots);
    free(t->heap);
    free(t->touched);
}

/* Step 5: the model: specials, bytes, merges (score -rank), characters. */
static int build_learned(tfm_bpe *m, const trainer *t, const int *merged, int n_merged, int n_kept) {
    int n = N_SPECIAL + n_merged + n_kept;
    const char **piece = malloc((size_t)n * sizeof *piece);
    char *strs = malloc((size_t)(n_merged + n_kept) * (16 * 4 + 1) + 256 * 7);
    float *score = malloc((size_t)n * sizeof *score);
    unsigned char *type = malloc((size_t)n);
    int rc = -1;
    if (!piece || !strs || !score || !type) {
        tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory learning BPE");
        goto done;
    }
    static const char *const specials[4] = {"<pad>", "<s>", "</s>", "<unk>"};
    char *q = strs;
    for (int i = 0; i < 4; i++) {
        piece[i] = specials[i];
        score[i] = 0;
        type[i] = i == 3 ? TFM_PIECE_UNKNOWN : TFM_PIECE_CONTROL;
    }
    for (int b = 0; b < 256; b++) {
        snprintf(q, 7, "<0x%02X>", b);
        piece[4 + b] = q;
        q += 7;
        score[4 + b] = 0;
        type[4 + b] = TFM_PIECE_BYTE;
    }
    for (int i = 0; i < n_merged + n_kept; i++) {
        int sym = i < n_merged ? merged[i] : i - n_merged;
        int len = t->syms.len[sym];
        memcpy(q, set_str(&t->syms, sym), (size_t)len);
        q[len] = 0;
        piece[N_SPECIAL + i] = q;
        q += len + 1;
        score[N_SPECIAL + i] = -(float)i;
        type[N_SPECIAL + i] = TFM_PIECE_NORMAL;
    }
    bpe_proto_spec spec = {n, piece, score, type, n, 3, 1, 2, 0, 1, t->o->max_piece_chars,
                           t->o->character_coverage, 1, 0, 1};
    size_t len;
    unsigned char *proto = bpe_proto_write(&spec, &len);
    if (!proto) goto done;
    rc = tfm_bpe_from_bytes(m, proto, len, "learned BPE model");
    free(proto);
done:
    free(piece);
    free(strs);
    free(score);
    free(type);
    return rc;
}

int tfm_bpe_learn_lines(tfm_bpe *m, const char *const *lines, int n_lines, const tfm_bpe_learn_opts *o) {
    memset(m, 0, sizeof *m);
    if (o->vocab_size > MAX_VOCAB)
        return tfm_set_error("vocabulary size %d is too large (at most %d)", o->vocab_size, MAX_VOCAB), -1;
    if (o->vocab_size < N_SPECIAL)
        return tfm_set_error("vocabulary size %d is smaller than the %d special and byte pieces", o->vocab_size, N_SPECIAL), -1;
    if (!(o->character_coverage >= 0.5f && o->character_coverage <= 1.0f))
        return tfm_set_error("character coverage %g must be in [0.5, 1]", (double)o->character_coverage), -1;
    if (o->max_piece_chars < 2 || o->max_piece_chars > 16)
        return tfm_set_error("max piece length %d must be in [2, 16] characters", o->max_piece_chars), -1;
    trainer t;
    memset(&t, 0, sizeof t);
    t.o = o;
    int *cp_sym = malloc(0x110000 * sizeof *cp_sym);
    char_count *chars = NULL;
    int *merged = NULL, n_kept = 0, n_merged = 0, rc = -1;
    if (!cp_sym) {
        tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory learning BPE");
        goto done;
    }
    if (count_words(&t, lines, n_lines) || choose_alphabet(&t, cp_sym, &chars, &n_kept)) goto done;
    if (n_kept == 0) {
        tfm_set_error("no text to learn from (every line is empty)");
        goto done;
    }
    if (o->vocab_size < N_SPECIAL + n_kept) {
        tfm_set_error("vocabulary size %d is smaller than the %d special and byte pieces + %d characters = %d",
                      o->vocab_size, N_SPECIAL, n_kept, N_SPECIAL + n_kept);
        goto done;
    }
    int n_target = o->vocab_size - N_SPECIAL - n_kept;
    merged = malloc((size_t)(n_target ? n_target : 1) * sizeof *merged);
    if (!merged || init_symbols(&t, cp_sym, chars, n_kept) || run_merges(&t, n_target, merged, &n_merged)) {
        if (!merged || t.oom) tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory learning BPE");
        goto done;
    }
    if (n_merged < n_target) {
        tfm_set_error("vocabulary size %d is too large for this text: it yields at most %d pieces", o->vocab_size,
                      N_SPECIAL + n_kept + n_merged);
        goto done;
    }
    rc = build_learned(m, &t, merged, n_merged, n_kept);
done:
    trainer_free(&t);
    free(cp_sym);
    free(chars);
    free(merged);
    return rc;
}

int tfm_bpe_learn_files(tfm_bpe *m, const char *const *paths, int n_paths, const tfm_bpe_learn_opts *o) {
    memset(m, 0, sizeof *m);
    char **bufs = calloc((size_t)n_paths + 1, sizeof *bufs);
    const char **all = NULL;
    int n_all = 0, cap = 0, rc = -1;
    if (!bufs) return tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory"), -1;
    for (int f = 0; f < n_paths; f++) {
        size_t len;
        bufs[f] = tfm_read_text_file(paths[f], &len);
        if (!bufs[f]) goto done;
        int n;
        char **lines = tfm_split_lines(bufs[f], len, &n);
        if (!lines) {
            tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory reading '%s'", paths[f]);
            goto done;
        }
        if (n_all + n > cap) {
            cap = (n_all + n) * 2;
            const char **na = realloc(all, (size_t)cap * sizeof *na);
            if (!na) {
                free(lines);
                tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory reading '%s'", paths[f]);
                goto done;
            }
            all = na;
        }
        memcpy(all + n_all, lines, (size_t)n * sizeof *lines);
        n_all += n;
        free(lines);
    }
    rc = tfm_bpe_learn_lines(m, all, n_all, o);
done:
    for (int f = 0; f < n_paths; f++) free(bufs[f]);
    free(bufs);
    free(all);
    return rc;
}
