/* SentencePiece unigram models: the piece trie and the Viterbi segmentation, re-implemented from
 * SentencePiece 0.1.97's unigram_model.cc (Model::EncodeOptimized, its default encoder). Also the lookup
 * of the nmt_nfkc precompiled charsmap (normalizer.cc's NormalizePrefix over a Darts-clone double array).
 *
 * Viterbi over byte positions of the normalized text: best[e] is the best score of a segmentation of
 * text[0..e). From each character start s (in order), every piece p = text[s..e) found in the trie offers
 * best[s] + score(p) to best[e]; a piece replaces the current best only when strictly better (so among
 * equals the piece from the earliest start, then the shortest, stays). If no piece covers exactly the
 * character at s, <unk> offers best[s] + min_score - 10 for it. The arithmetic is SentencePiece's to the
 * bit: piece offers are summed in double and stored as float, <unk> offers are summed in float. */
#include <float.h>
#include <stdlib.h>
#include <string.h>

#include "text/bpe_internal.h"
#include "tfm/core.h"

#define UNK_PENALTY 10.0f

/* ---------------------------------------------------------------- the piece trie */
static size_t edge_slot(const tfm_bpe *m, uint64_t key) {
    size_t k = (size_t)((key * 0x9E3779B97F4A7C15ull) >> 20) & m->trie_mask;
    while (m->trie_keys[k] && m->trie_keys[k] != key) k = (k + 1) & m->trie_mask;
    return k;
}

/* Child of node by byte c, or -1. */
static int trie_child(const tfm_bpe *m, int node, unsigned char c) {
    uint64_t key = (uint64_t)node * 256 + c + 1;   /* + 1: key 0 marks an empty slot */
    size_t k = edge_slot(m, key);
    return m->trie_keys[k] ? m->trie_child[k] : -1;
}

static int in_trie(int type) {
    return type == TFM_PIECE_NORMAL || type == TFM_PIECE_USER_DEFINED || type == TFM_PIECE_UNUSED;
}

int bpe_unigram_init(tfm_bpe *m, const char *name) {
    m->min_score = FLT_MAX;
    m->max_score = FLT_MIN;
    size_t bytes = 0;
    for (int i = 0; i < m->n; i++) {
        if (m->type[i] == TFM_PIECE_NORMAL) {
            if (m->score[i] < m->min_score) m->min_score = m->score[i];
            if (m->score[i] > m->max_score) m->max_score = m->score[i];
        }
        if (in_trie(m->type[i])) bytes += (size_t)m->len[i];
    }
    if (bytes == 0) return tfm_set_error("%s: a unigram model without normal pieces", name), -1;
    size_t n_slots = 16;
    while (n_slots < 2 * bytes) n_slots *= 2;
    m->trie_mask = n_slots - 1;
    m->trie_keys = calloc(n_slots, sizeof *m->trie_keys);
    m->trie_child = malloc(n_slots * sizeof *m->trie_child);
    m->trie_value = malloc((bytes + 1) * sizeof *m->trie_value);
    if (!m->trie_keys || !m->trie_child || !m->trie_value) return tfm_set_error_kind(TFM_ERR_NOMEM, "%s: out of memory", name), -1;
    int n_nodes = 1;
    m->trie_value[0] = -1;
    for (int i = 0; i < m->n; i++) {
        if (!in_trie(m->type[i])) continue;
        int node = 0;
        for (int j = 0; j < m->len[i]; j++) {
            uint64_t key = (uint64_t)node * 256 + (unsigned char)m->piece[i][j] + 1;
            size_t k = edge_slot(m, key);
            if (!m->trie_keys[k]) {
                m->trie_keys[k] = key;
                m->trie_child[k] = n_nodes;
                m->trie_value[n_nodes++] = -1;
            }
            node = m->trie_child[k];
        }
        m->trie_value[node] = i;   /* pieces are unique (checked by the loader) */
    }
    return 0;
}

/* SentencePiece's OneCharLen: the length a UTF-8 lead byte announces (1 for a stray continuation byte). */
static int one_char_len(unsigned char c) { return "\1\1\1\1\1\1\1\1\1\1\1\1\2\2\3\4"[c >> 4]; }

bpe_span *bpe_unigram_viterbi(const tfm_bpe *m, const char *s, int size, int *n_spans) {
    float *best = malloc((size_t)(size + 1) * sizeof *best);
    int *start = malloc((size_t)(size + 1) * sizeof *start), *id = malloc((size_t)(size + 1) * sizeof *id);
    bpe_span *out = NULL;
    if (!best || !start || !id) goto done;
    for (int i = 0; i <= size; i++) best[i] = 0, start[i] = -1, id[i] = -1;
    const float unk_score = m->min_score - UNK_PENALTY;
    for (int at = 0; at < size;) {
        const float till = best[at];
        int has_single = 0, mblen = one_char_len((unsigned char)s[at]);
        if (mblen > size - at) mblen = size - at;
        for (int node = 0, end = at; end < size;) {
            if ((node = trie_child(m, node, (unsigned char)s[end++])) < 0) break;
            int piece = m->trie_value[node];
            if (piece < 0 || m->type[piece] == TFM_PIECE_UNUSED) continue;
            size_t length = (size_t)(end - at);
            double score = m->type[piece] == TFM_PIECE_USER_DEFINED ? (double)((float)length * m->max_score) - 0.1
                                                                    : (double)m->score[piece];
            double cand = score + (double)till;
            if (start[end] == -1 || cand > (double)best[end]) best[end] = (float)cand, start[end] = at, id[end] = piece;
            if ((int)length == mblen) has_single = 1;
        }
        if (!has_single) {
            int end = at + mblen;
            float cand = unk_score + till;
            if (start[end] == -1 || cand > best[end]) best[end] = cand, start[end] = at, id[end] = m->unk_id;
        }
        at += mblen;
    }
    int n = 0;
    for (int e = size; e > 0; e = start[e]) n++;
    out = malloc((size_t)(n ? n : 1) * sizeof *out);
    if (!out) goto done;
    *n_spans = n;
    for (int e = size, k = n - 1; e > 0; e = start[e], k--) out[k] = (bpe_span){start[e], e - start[e], id[e]};
done:
    if (!out) tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory encoding a line");
    free(best);
    free(start);
    free(id);
    return out;
}

/* ---------------------------------------------------------------- the nmt_nfkc charsmap */
/* Darts-clone unit fields. */
static uint32_t unit_offset(uint32_t u) { return (u >> 10) << ((u & (1u << 9)) >> 6); }
static uint32_t unit_label(uint32_t u) { return u & ((1u << 31) | 0xFF); }
static int unit_has_leaf(uint32_t u) { return (u >> 8) & 1; }
static uint32_t unit_value(uint32_t u) { return u & ((1u << 31) - 1); }

size_t bpe_charsmap_match(const tfm_bpe *m, const char *s, size_t n, const char **repl) {
    const uint32_t *a = m->norm_trie;
    size_t units = m->norm_trie_n, longest = 0;
    uint32_t pos = unit_offset(a[0]);   /* the loader checked units >= 1 */
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        pos ^= c;
        if (pos >= units || unit_label(a[pos]) != c) break;
        uint32_t u = a[pos];
        pos ^= unit_offset(u);
        if (unit_has_leaf(u)) {
            if (pos >= units) break;   /* a broken trie: the leaf is outside it */
            uint32_t v = unit_value(a[pos]);
            longest = i + 1;
            /* a value past the strings reads as "" (the loader keeps a NUL after the last one) */
            *repl = m->norm_strings + (v < m->norm_strings_len ? v : m->norm_strings_len);
        }
    }
    return longest;
}
