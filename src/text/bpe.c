/* BPE encoding and decoding, with SentencePiece's exact rules (bpe_model.cc, normalizer.cc and
 * sentencepiece_processor.cc of sentencepiece 0.1.97, re-implemented); unigram models take their
 * segmentation from src/text/unigram.c and share the rest:
 *   normalize:  identity or the nmt_nfkc charsmap; ' ' -> '▁'; a dummy '▁' in front; optionally
 *               strip/collapse spaces;
 *   segment:    characters (or user-defined pieces, never merged further);
 *   merge:      repeatedly take the adjacent pair whose concatenation is a piece with the highest
 *               score (leftmost among equals), from a max-heap of candidate pairs, O(n log n);
 *   output:     unused pieces split back into their parts; an unknown character becomes its bytes
 *               <0xNN> with byte fallback, else runs of unknown characters become one <unk>. */
#include <stdlib.h>
#include <string.h>

#include "text/bpe_internal.h"
#include "tfm/core.h"
#include "tfm/text.h"

int tfm_bpe_has_tfm_specials(const tfm_bpe *m) {
    return m->pad_id == 0 && m->bos_id == 1 && m->eos_id == 2 && m->unk_id == 3;
}

/* ---------------------------------------------------------------- normalizer */
/* Length of the user-defined piece that text[i..n) starts with (longest), or 0. */
static int user_match(const tfm_bpe *m, const char *s, size_t n) {
    for (int k = 0; k < m->n_user; k++) {   /* sorted longest first */
        int id = m->user_ids[k];
        if ((size_t)m->len[id] <= n && !memcmp(s, m->piece[id], (size_t)m->len[id])) return m->len[id];
    }
    return 0;
}

/* Byte length of the character (or user-defined piece) at s[0..n): at least 1. */
static int chunk_len(const tfm_bpe *m, const char *s, size_t n) {
    int u = m->n_user ? user_match(m, s, n) : 0;
    if (u) return u;
    uint32_t cp;
    int k = tfm_utf8_decode(s, n, &cp);
    return k ? k : 1;
}

/* SentencePiece's NormalizePrefix: the normalized form of the longest prefix of s[0..n) (n > 0, valid
 * UTF-8) that one rule covers: a user-defined piece (kept as is), else the longest charsmap rule, else one
 * character (kept). Returns the bytes consumed; *out / *out_len the replacement. */
static size_t normalize_prefix(const tfm_bpe *m, const char *s, size_t n, const char **out, size_t *out_len) {
    int u = m->n_user ? user_match(m, s, n) : 0;
    if (u) {
        *out = s;
        *out_len = (size_t)u;
        return (size_t)u;
    }
    if (m->norm_trie) {
        size_t k = bpe_charsmap_match(m, s, n, out);
        if (k) {
            *out_len = strlen(*out);
            return k;
        }
    }
    *out = s;
    *out_len = (size_t)chunk_len(m, s, n);
    return *out_len;
}

/* bpe_normalize into b (and the literal '▁' offsets into lits, if not NULL), both emptied first and grown only when
 * too small: a reused pair allocates nothing once it has held the longest line. 0, or -1 out of memory. */
static int normalize_into(const tfm_bpe *m, const char *text, size_t len, bpe_buf *out, bpe_buf *lit_out) {
    bpe_buf b = *out, lits = lit_out ? *lit_out : (bpe_buf){0};
    b.n = lits.n = 0, b.oom = lits.oom = 0;
    bpe_buf_put(&b, "", 0);
    size_t i = 0, k, sp_len;
    const char *sp;
    if (m->remove_extra_whitespaces)   /* leading characters that normalize to one space */
        while (i < len && (k = normalize_prefix(m, text + i, len - i, &sp, &sp_len)) && sp_len == 1 && *sp == ' ') i += k;
    if (i < len) {
        const char *ws = m->escape_whitespaces ? BPE_WS : " ";
        size_t ws_len = m->escape_whitespaces ? BPE_WS_LEN : 1;
        if (m->add_dummy_prefix) bpe_buf_put(&b, ws, ws_len);
        int prev_space = m->remove_extra_whitespaces;
        while (i < len) {
            k = normalize_prefix(m, text + i, len - i, &sp, &sp_len);
            size_t j = 0;
            while (prev_space && j < sp_len && sp[j] == ' ') j++;   /* collapse runs of spaces */
            if (j < sp_len) {
                if (lit_out && m->literal_ws_bytes && sp_len == BPE_WS_LEN && !memcmp(sp, BPE_WS, BPE_WS_LEN))
                    bpe_buf_put(&lits, &b.n, sizeof b.n);
                for (size_t q = j; q < sp_len; q++) {
                    if (sp[q] == ' ') bpe_buf_put(&b, ws, ws_len);
                    else bpe_buf_put(&b, sp + q, 1);
                }
                prev_space = sp[sp_len - 1] == ' ';
            }
            if (!m->remove_extra_whitespaces) prev_space = 0;
            i += k;
        }
        if (m->remove_extra_whitespaces)   /* drop trailing spaces */
            while (b.n >= ws_len && !memcmp(b.p + b.n - ws_len, ws, ws_len)) b.n -= ws_len;
        if (b.p) b.p[b.n] = 0;
    }
    *out = b;
    if (lit_out) *lit_out = lits;
    return b.oom || lits.oom ? -1 : 0;
}

char *bpe_normalize(const tfm_bpe *m, const char *text, size_t len, size_t *out_len, size_t **lit, size_t *n_lit) {
    bpe_buf b = {0}, lits = {0};
    if (normalize_into(m, text, len, &b, lit ? &lits : NULL)) {
        free(b.p);
        free(lits.p);
        return NULL;
    }
    *out_len = b.n;
    if (lit) {
        *lit = (size_t *)(void *)lits.p;
        *n_lit = lits.n / sizeof(size_t);
    }
    return (char *)b.p;
}

/* ---------------------------------------------------------------- merging */
typedef struct {
    float score;
    int left, right, size;
} pair_cand;

/* SentencePiece's order: higher score first, then the leftmost. */
static int cand_better(const pair_cand *a, const pair_cand *b) {
    return a->score > b->score || (a->score == b->score && a->left < b->left);
}

typedef struct {
    pair_cand *h;
    int n, cap;
} cand_heap;

static int heap_push(cand_heap *q, pair_cand c) {
    if (q->n == q->cap) {
        int nc = q->cap ? q->cap * 2 : 64;
        pair_cand *nh = realloc(q->h, (size_t)nc * sizeof *nh);
        if (!nh) return -1;
        q->h = nh;
        q->cap = nc;
    }
    int i = q->n++;
    while (i > 0 && cand_better(&c, &q->h[(i - 1) / 2])) {
        q->h[i] = q->h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    q->h[i] = c;
    return 0;
}

static pair_cand heap_pop(cand_heap *q) {
    pair_cand top = q->h[0], last = q->h[--q->n];
    int i = 0;
    for (;;) {
        int c = 2 * i + 1;
        if (c >= q->n) break;
        if (c + 1 < q->n && cand_better(&q->h[c + 1], &q->h[c])) c++;
        if (!cand_better(&q->h[c], &last)) break;
        q->h[i] = q->h[c];
        i = c;
    }
    if (q->n) q->h[i] = last;
    return top;
}

typedef struct {
    int off, len;        /* bytes of the normalized text; len 0 = merged away */
    int prev, next;
    int freeze;          /* never merged: 1 a user-defined piece, 2 a literal '▁' of the input */
    int word;            /* which word ('▁' starts one): BPE-dropout redraws within a word */
} symbol;

typedef struct {
    int id;              /* piece id */
    int off, len;        /* the text it covers in the normalized string */
    int is_byte;
} segment;

/* One line's encoding; its buffers are kept from line to line (tfm_bpe_encoder) and grow only when too small. */
typedef struct {
    const tfm_bpe *m;
    const char *norm;    /* normb.p: the normalized line */
    bpe_buf normb, litb; /* the normalized line, the offsets of its literal '▁' (size_t) */
    symbol *sym;
    size_t cap_sym;
    cand_heap q;
    int *rev_id, *rev_left, n_rev, cap_rev;   /* unused pieces seen: id -> byte length of the left part */
    segment *seg;
    int n_seg, cap_seg;
    int prev_unk;
    int oom;
    float p_drop;        /* BPE-dropout: each candidate merge skipped with this probability (0: exact BPE) */
    uint64_t key, ctr;   /* its draws: splitmix64(key + ctr) for ctr = 0, 1, ... */
    pair_cand *dropped;  /* the candidates skipped since their word's last merge */
    int n_dropped, cap_dropped;
} encoder;

static int normal_find(const tfm_bpe *m, const char *s, size_t n) {
    size_t mask = (size_t)m->n_slots - 1;
    for (size_t k = bpe_hash(s, n) & mask;; k = (k + 1) & mask) {
        int o = m->slots[k];
        if (o < 0) return -1;
        if ((size_t)m->len[o] == n && !memcmp(m->piece[o], s, n)) return o;
    }
}

static void maybe_add_pair(encoder *e, int left, int right) {
    if (left < 0 || right < 0 || e->sym[left].freeze || e->sym[right].freeze) return;
    int size = e->sym[left].len + e->sym[right].len;
    int id = normal_find(e->m, e->norm + e->sym[left].off, (size_t)size);
    if (id < 0) return;
    if (heap_push(&e->q, (pair_cand){e->m->score[id], left, right, size})) {
        e->oom = 1;
        return;
    }
    if (e->m->type[id] == TFM_PIECE_UNUSED) {   /* remember how to split it back */
        int k = 0;
        while (k < e->n_rev && e->rev_id[k] != id) k++;
        if (k == e->n_rev) {
            if (k == e->cap_rev) {
                int nc = e->cap_rev ? 2 * e->cap_rev : 8;
                int *a = realloc(e->rev_id, (size_t)nc * sizeof *a);
                if (a) e->rev_id = a;
                int *b = realloc(e->rev_left, (size_t)nc * sizeof *b);
                if (b) e->rev_left = b;
                if (!a || !b) {
                    e->oom = 1;
                    return;
                }
                e->cap_rev = nc;
            }
            e->rev_id[k] = id;
            e->n_rev++;
        }
        e->rev_left[k] = e->sym[left].len;
    }
}

static void emit(encoder *e, segment s) {
    if (e->n_seg == e->cap_seg) {
        int nc = e->cap_seg ? e->cap_seg * 2 : 64;
        segment *ns = realloc(e->seg, (size_t)nc * sizeof *ns);
        if (!ns) {
            e->oom = 1;
            return;
        }
        e->seg = ns;
        e->cap_seg = nc;
    }
    e->seg[e->n_seg++] = s;
}

/* SentencePieceProcessor::PopulateSentencePieceText for one final piece. */
static void output_piece(encoder *e, int off, int len, int id) {
    const tfm_bpe *m = e->m;
    int unk = id == m->unk_id;
    if (unk && m->byte_fallback) {
        for (int i = 0; i < len; i++) emit(e, (segment){m->byte_id[(unsigned char)e->norm[off + i]], off + i, 1, 1});
    } else if (unk && e->prev_unk && e->n_seg > 0) {
        e->seg[e->n_seg - 1].len += len;   /* a run of unknown characters is one <unk> */
    } else {
        emit(e, (segment){id, off, len, 0});
    }
    e->prev_unk = unk;
}

static void resegment(encoder *e, int off, int len) {
    int id = tfm_bpe_piece_id(e->m, e->norm + off, (size_t)len);
    if (e->m->type[id] == TFM_PIECE_UNUSED) {
        for (int k = 0; k < e->n_rev; k++)
            if (e->rev_id[k] == id) {
                resegment(e, off, e->rev_left[k]);
                resegment(e, off + e->rev_left[k], len - e->rev_left[k]);
                return;
            }
    }
    output_piece(e, off, len, id);
}

/* BPE-dropout's draw for the merge at hand: skip it? (p_drop >= 1 skips every merge without drawing) */
static int skip_merge(encoder *e) {
    if (e->p_drop >= 1.0f) return 1;
    uint64_t z = e->key + 0x9e3779b97f4a7c15ull * ++e->ctr;   /* splitmix64 of a counter: no state to share */
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (float)(z >> 40) * (1.0f / 16777216.0f) < e->p_drop;   /* a uniform 24-bit fraction in [0, 1) */
}

/* BPE-dropout as Provilkov et al.'s reference code does it, word by word: at each merge step of a word its
 * candidates are tried best first and each is skipped with probability p; the first one kept is merged, and the
 * skipped ones are offered again (drawn afresh) at the word's next step. A word whose every candidate is skipped
 * at one step is done. (SentencePiece's sampling instead keeps a skipped pair out until a neighbour merge re-forms
 * it, which fragments more.) The heap holds all words of the line; a skipped candidate waits in e->dropped until
 * a merge in its own word puts it back. */
static void drop_candidate(encoder *e, pair_cand c) {
    if (e->n_dropped == e->cap_dropped) {
        int nc = e->cap_dropped ? 2 * e->cap_dropped : 16;
        pair_cand *d = realloc(e->dropped, (size_t)nc * sizeof *d);
        if (!d) {
            e->oom = 1;
            return;
        }
        e->dropped = d, e->cap_dropped = nc;
    }
    e->dropped[e->n_dropped++] = c;
}

static void offer_dropped_again(encoder *e, int word) {
    for (int k = 0; k < e->n_dropped;) {
        if (e->sym[e->dropped[k].left].word != word) {
            k++;
            continue;
        }
        if (heap_push(&e->q, e->dropped[k])) e->oom = 1;
        e->dropped[k] = e->dropped[--e->n_dropped];
    }
}

uint64_t tfm_bpe_dropout_key(uint64_t seed, int epoch, long sentence) {
    uint64_t k = seed * 0xd1342543de82ef95ull + 0x2545f4914f6cdd1dull;
    k = (k ^ (uint64_t)(uint32_t)epoch) * 0x9e3779b97f4a7c15ull;
    k = (k ^ (k >> 29) ^ (uint64_t)sentence) * 0xbf58476d1ce4e5b9ull;
    return k ^ (k >> 32);
}

/* Room for n symbols (kept for the next line). */
static int reserve_symbols(encoder *e, size_t n) {
    if (n <= e->cap_sym) return 0;
    symbol *p = realloc(e->sym, n * sizeof *p);
    if (!p) return -1;
    e->sym = p, e->cap_sym = n;
    return 0;
}

/* Encode one line into e->seg, pointing into e->norm (the normalized line); e's buffers from earlier lines are
 * reused. p_drop > 0: BPE-dropout with the draws keyed by key. */
static int encode_segments(const tfm_bpe *m, const char *text, size_t len, encoder *e, float p_drop, uint64_t key) {
    e->m = m, e->q.n = 0, e->n_rev = 0, e->n_seg = 0, e->prev_unk = 0, e->oom = 0;
    e->p_drop = p_drop, e->key = key, e->ctr = 0, e->n_dropped = 0;
    long bad = tfm_utf8_first_invalid(text, len);
    if (bad >= 0) return tfm_set_error("invalid UTF-8 (byte 0x%02x at offset %ld)", (unsigned char)text[bad], bad), -1;
    if (normalize_into(m, text, len, &e->normb, &e->litb) || e->normb.n > (size_t)1 << 30 ||
        reserve_symbols(e, e->normb.n ? e->normb.n : 1))
        return tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory encoding a line"), -1;
    const char *norm = e->norm = (const char *)e->normb.p;
    size_t n = e->normb.n, li = 0, n_lit = e->litb.n / sizeof(size_t);
    const size_t *lit = (const size_t *)(const void *)e->litb.p;
    if (m->model_type == TFM_SP_UNIGRAM) {   /* Viterbi, then PopulateSentencePieceText */
        int n_spans;
        bpe_span *spans = bpe_unigram_viterbi(m, norm, (int)n, &n_spans);
        if (!spans) return -1;
        for (int k = 0; k < n_spans && !e->oom; k++) output_piece(e, spans[k].off, spans[k].len, spans[k].id);
        free(spans);
        if (e->oom) return tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory encoding a line"), -1;
        return 0;
    }
    int ns = 0, word = 0;
    for (size_t i = 0; i < n;) {   /* characters (or user-defined pieces) */
        int u = m->n_user ? user_match(m, norm + i, n - i) : 0;
        int k = u ? u : chunk_len(m, norm + i, n - i);
        int literal = li < n_lit && lit[li] == i;   /* a '▁' of the input: frozen, output as bytes */
        li += literal;
        word += ns > 0 && n - i >= BPE_WS_LEN && !memcmp(norm + i, BPE_WS, BPE_WS_LEN);
        e->sym[ns] = (symbol){(int)i, k, ns - 1, i + (size_t)k < n ? ns + 1 : -1, u > 0 ? 1 : literal ? 2 : 0, word};
        ns++;
        i += (size_t)k;
    }
    for (int i = 1; i < ns; i++) maybe_add_pair(e, i - 1, i);
    while (e->q.n > 0 && !e->oom) {
        pair_cand top = heap_pop(&e->q);
        symbol *l = &e->sym[top.left], *r = &e->sym[top.right];
        if (l->len == 0 || r->len == 0 || l->len + r->len != top.size) continue;   /* stale */
        if (e->p_drop > 0 && skip_merge(e)) {   /* BPE-dropout: skipped at this step of its word */
            drop_candidate(e, top);
            continue;
        }
        if (e->n_dropped) offer_dropped_again(e, l->word);
        l->len += r->len;
        l->next = r->next;
        if (r->next >= 0) e->sym[r->next].prev = top.left;
        r->len = 0;
        maybe_add_pair(e, l->prev, top.left);
        maybe_add_pair(e, top.left, l->next);
    }
    for (int i = ns ? 0 : -1; i >= 0 && !e->oom; i = e->sym[i].next) {
        if (e->sym[i].freeze == 2) output_piece(e, e->sym[i].off, e->sym[i].len, m->unk_id);
        else resegment(e, e->sym[i].off, e->sym[i].len);
    }
    if (e->oom) return tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory encoding a line"), -1;
    return 0;
}

static void encoder_free(encoder *e) {
    free(e->normb.p);
    free(e->litb.p);
    free(e->sym);
    free(e->q.h);
    free(e->rev_id);
    free(e->rev_left);
    free(e->seg);
    free(e->dropped);
}

static int *encode_ids(const tfm_bpe *m, const char *text, size_t len, int *n_ids, float p_drop, uint64_t key) {
    encoder e = {0};
    int *ids = NULL;
    if (!encode_segments(m, text, len, &e, p_drop, key)) {
        ids = malloc((size_t)(e.n_seg ? e.n_seg : 1) * sizeof *ids);
        if (!ids) tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory encoding a line");
        else {
            for (int i = 0; i < e.n_seg; i++) ids[i] = e.seg[i].id;
            *n_ids = e.n_seg;
        }
    }
    encoder_free(&e);
    return ids;
}

int *tfm_bpe_encode(const tfm_bpe *m, const char *text, size_t len, int *n_ids) {
    return encode_ids(m, text, len, n_ids, 0.0f, 0);
}

int *tfm_bpe_encode_dropout(const tfm_bpe *m, const char *text, size_t len, float p_drop, uint64_t key, int *n_ids) {
    if (!(p_drop >= 0 && p_drop <= 1)) return tfm_set_error("BPE-dropout probability must be in [0, 1], got %g", p_drop), NULL;
    if (m->model_type == TFM_SP_UNIGRAM)
        return tfm_set_error("BPE-dropout needs a BPE model (this one is unigram: sample it instead)"), NULL;
    return encode_ids(m, text, len, n_ids, p_drop, key);
}

struct tfm_bpe_encoder {
    encoder e;
    int *ids;
    int cap_ids;
};

tfm_bpe_encoder *tfm_bpe_encoder_new(void) {
    tfm_bpe_encoder *x = calloc(1, sizeof *x);
    if (!x) tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory (BPE encoder)");
    return x;
}

void tfm_bpe_encoder_free(tfm_bpe_encoder *x) {
    if (!x) return;
    encoder_free(&x->e);
    free(x->ids);
    free(x);
}

const int *tfm_bpe_encoder_run(tfm_bpe_encoder *x, const tfm_bpe *m, const char *text, size_t len, float p_drop,
                               uint64_t key, int *n_ids) {
    if (!(p_drop >= 0 && p_drop <= 1)) return tfm_set_error("BPE-dropout probability must be in [0, 1], got %g", p_drop), NULL;
    if (p_drop > 0 && m->model_type == TFM_SP_UNIGRAM)
        return tfm_set_error("BPE-dropout needs a BPE model (this one is unigram: sample it instead)"), NULL;
    if (encode_segments(m, text, len, &x->e, p_drop, key)) return NULL;
    if (x->e.n_seg > x->cap_ids) {
        int *p = realloc(x->ids, sizeof(int) * (size_t)x->e.n_seg);
        if (!p) return tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory encoding a line"), NULL;
        x->ids = p, x->cap_ids = x->e.n_seg;
    }
    for (int i = 0; i < x->e.n_seg; i++) x->ids[i] = x->e.seg[i].id;
    *n_ids = x->e.n_seg;
    return x->ids ? x->ids : (const int *)x;   /* an empty line: 0 ids, a non-NULL pointer */
}

char *tfm_bpe_encode_pieces(const tfm_bpe *m, const char *text, size_t len) {
    encoder e = {0};
    bpe_buf b = {0};
    if (encode_segments(m, text, len, &e, 0.0f, 0)) {
        encoder_free(&e);
        return NULL;
    }
    const char *norm = e.norm;
    bpe_buf_put(&b, "", 0);
    for (int i = 0; i < e.n_seg; i++) {
        const segment *s = &e.seg[i];
        if (i) bpe_buf_put(&b, " ", 1);
        if (s->is_byte) bpe_buf_put(&b, m->piece[s->id], (size_t)m->len[s->id]);
        else bpe_buf_put(&b, norm + s->off, (size_t)s->len);
    }
    encoder_free(&e);
    if (b.oom) {
        free(b.p);
        tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory encoding a line");
        return NULL;
    }
    return (char *)b.p;
}

/* ---------------------------------------------------------------- decoding */
/* A run of byte pieces back to text: each valid UTF-8 character as is, each invalid byte as U+FFFD. */
static void flush_bytes(bpe_buf *out, bpe_buf *bytes) {
    for (size_t i = 0; i < bytes->n;) {
        uint32_t cp;
        int k = tfm_utf8_decode((const char *)bytes->p + i, bytes->n - i, &cp);
        if (k) bpe_buf_put(out, bytes->p + i, (size_t)k);
        else bpe_buf_put(out, "\xef\xbf\xbd", 3);
        i += k ? (size_t)k : 1;
    }
    bytes->n = 0;
}

/* Append a piece with '▁' -> ' '. */
static void put_unescaped(bpe_buf *out, const char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        if (n - i >= BPE_WS_LEN && !memcmp(s + i, BPE_WS, BPE_WS_LEN)) {
            bpe_buf_put(out, " ", 1);
            i += BPE_WS_LEN;
        } else {
            bpe_buf_put(out, s + i, 1);
            i++;
        }
    }
}

char *tfm_bpe_decode_pieces(const tfm_bpe *m, const char *const *pieces, int n_pieces) {
    bpe_buf out = {0}, bytes = {0};
    bpe_buf_put(&out, "", 0);
    int is_bos_ws = 1, bos_ws_seen = 0;
    for (int i = 0; i < n_pieces; i++) {
        const char *w = pieces[i];
        size_t n = strlen(w);
        int id = tfm_bpe_piece_id(m, w, n);
        int type = m->type[id];
        if (type == TFM_PIECE_BYTE) {
            unsigned char b = 0;
            for (int v = 0; v < 256; v++)
                if (m->byte_id[v] == id) b = (unsigned char)v;
            bpe_buf_put(&bytes, &b, 1);
            continue;
        }
        flush_bytes(&out, &bytes);
        if (bos_ws_seen || out.n > 0) is_bos_ws = 0;
        bos_ws_seen = 0;
        if (type == TFM_PIECE_CONTROL) continue;
        if (type == TFM_PIECE_UNKNOWN) {
            if (!strcmp(m->piece[id], w)) bpe_buf_put(&out, m->unk_surface, strlen(m->unk_surface));
            else bpe_buf_put(&out, w, n);
            continue;
        }
        if (is_bos_ws && (m->add_dummy_prefix || m->remove_extra_whitespaces) && n >= BPE_WS_LEN &&
            !memcmp(w, BPE_WS, BPE_WS_LEN)) {
            w += BPE_WS_LEN;
            n -= BPE_WS_LEN;
            bos_ws_seen = !m->remove_extra_whitespaces;
        }
        put_unescaped(&out, w, n);
    }
    flush_bytes(&out, &bytes);
    free(bytes.p);
    if (out.oom || bytes.oom) {
        free(out.p);
        tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory decoding");
        return NULL;
    }
    return (char *)out.p;
}

char *tfm_bpe_decode(const tfm_bpe *m, const int *ids, int n_ids) {
    const char **p = malloc((size_t)(n_ids > 0 ? n_ids : 1) * sizeof *p);
    if (!p) return tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory decoding"), NULL;
    for (int i = 0; i < n_ids; i++) {
        if (ids[i] < 0 || ids[i] >= m->n) {
            free(p);
            tfm_set_error("id %d is out of range (the model has %d pieces)", ids[i], m->n);
            return NULL;
        }
        p[i] = m->piece[ids[i]];
    }
    char *s = tfm_bpe_decode_pieces(m, p, n_ids);
    free(p);
    return s;
}
