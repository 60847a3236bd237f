/* GPT-2's byte-level BPE (include/tfm/tokenizers.h), re-implemented from OpenAI's encoder.py and its
 * JavaScript port (npm gpt-3-encoder), which the tests compare id for id.
 *
 *   text --regex--> pieces --UTF-8 bytes--> one token per byte --merges by rank--> ids
 *
 * The merges of a piece: the reference repeatedly takes the pair of adjacent tokens with the lowest rank
 * and merges all its occurrences left to right. Here a heap of candidate pairs ordered by (rank, position)
 * does the same in O(n log n): a merge only creates pairs that contain the new token, and the loader
 * checks that every merge comes after the merges creating its two tokens, so those pairs rank after the
 * current one and every occurrence of the current pair is merged (leftmost first, skipping overlaps)
 * before any of them, exactly as in the reference's pass. Encoded pieces are cached by their bytes. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "text/bpe_internal.h"
#include "text/unicode_classes.h"
#include "tfm/core.h"
#include "tfm/text.h"
#include "tfm/tokenizers.h"

#define MAX_MERGES_BYTES ((size_t)1 << 28)
#define CACHE_MAX_KEY 256                 /* longer pieces are not cached */
#define CACHE_MAX_BYTES ((size_t)64 << 20) /* the cache is emptied when it holds more */

typedef struct {
    uint64_t key;        /* left id << 32 | right id; UINT64_MAX = empty */
    int rank, merged;
} merge_slot;

typedef struct {
    uint64_t hash;
    uint32_t key_off, key_len, ids_off, n_ids;   /* key_len 0 = empty */
} cache_slot;

typedef struct {
    int rank, left;
} cand;

struct tfm_gpt2_bpe {
    tfm_token_map map;
    int byte_id[256];                /* byte -> id of its one-character token */
    size_t *bytes_off;               /* id -> its bytes in bytes_block */
    int *bytes_len;
    unsigned char *bytes_block;
    merge_slot *merges;
    size_t merge_mask;
    /* the cache of encoded pieces */
    cache_slot *cache;
    size_t cache_mask, cache_used;
    bpe_buf cache_keys, cache_ids;
    /* scratch of one piece's merge */
    int *sym_id, *sym_next, *sym_prev, sym_cap;
    cand *heap;
    int heap_n, heap_cap;
};

/* ---------------------------------------------------------------- bytes_to_unicode */
/* GPT-2 maps every byte to a printable character: '!'..'~', '¡'..'¬', '®'..'ÿ' stand for themselves, the
 * other 68 bytes (controls, space, DEL, NBSP, soft hyphen) for U+0100 + their rank among those. */
static int printable_byte(int b) { return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF); }

static uint32_t byte_char(int b) {
    if (printable_byte(b)) return (uint32_t)b;
    int n = 0;
    for (int x = 0; x < b; x++) n += !printable_byte(x);
    return 0x100u + (uint32_t)n;
}

/* The byte a character of a token stands for, or -1. */
static int char_byte(uint32_t c) {
    if (c < 0x100) return printable_byte((int)c) ? (int)c : -1;
    for (int b = 0, n = 0; b < 256; b++) {
        if (printable_byte(b)) continue;
        if (0x100u + (uint32_t)n == c) return b;
        n++;
    }
    return -1;
}

/* ---------------------------------------------------------------- merges */
static size_t merge_hash(uint64_t key, size_t mask) { return (size_t)((key * 0x9E3779B97F4A7C15ull) >> 17) & mask; }

static const merge_slot *merge_find(const tfm_gpt2_bpe *t, int a, int b) {
    uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    for (size_t k = merge_hash(key, t->merge_mask);; k = (k + 1) & t->merge_mask) {
        const merge_slot *s = &t->merges[k];
        if (s->key == UINT64_MAX) return NULL;
        if (s->key == key) return s;
    }
}

/* Lines of the merges file: an optional "#version..." first line, then "LEFT RIGHT" (split at spaces and
 * tabs; a '\r' line end ignored), blank lines skipped. Checks described in the header. */
static int parse_merges(tfm_gpt2_bpe *t, char *text, size_t len, const char *name) {
    size_t n_lines = 1;
    for (size_t i = 0; i < len; i++) n_lines += text[i] == '\n';
    size_t n_slots = 16;
    while (n_slots < 2 * n_lines) n_slots *= 2;
    t->merges = malloc(n_slots * sizeof *t->merges);
    int *created = malloc((size_t)t->map.n * sizeof *created);   /* id -> rank of the merge creating it */
    if (!t->merges || !created) {
        free(created);
        return tfm_set_error_kind(TFM_ERR_NOMEM, "%s: out of memory", name), -1;
    }
    for (size_t k = 0; k < n_slots; k++) t->merges[k].key = UINT64_MAX;
    t->merge_mask = n_slots - 1;
    for (int id = 0; id < t->map.n; id++) created[id] = INT32_MAX;
    for (int b = 0; b < 256; b++) created[t->byte_id[b]] = -1;
    int rank = 0, rc = 0;
    size_t lineno = 0;
    for (char *line = text, *end; line && line <= text + len && !rc; line = end ? end + 1 : NULL) {
        end = memchr(line, '\n', (size_t)(text + len - line));
        size_t n = end ? (size_t)(end - line) : (size_t)(text + len - line);
        lineno++;
        if (n && line[n - 1] == '\r') n--;
        if ((lineno == 1 && n >= 8 && !memcmp(line, "#version", 8)) || strspn(line, " \t") >= n) continue;
        /* two fields */
        size_t a0 = strspn(line, " \t"), a1 = a0;
        while (a1 < n && line[a1] != ' ' && line[a1] != '\t') a1++;
        size_t b0 = a1;
        while (b0 < n && (line[b0] == ' ' || line[b0] == '\t')) b0++;
        size_t b1 = b0;
        while (b1 < n && line[b1] != ' ' && line[b1] != '\t') b1++;
        size_t tail = b1;
        while (tail < n && (line[tail] == ' ' || line[tail] == '\t')) tail++;
        if (b0 == b1 || tail != n) {
            tfm_set_error("%s:%zu: expected two tokens separated by a space", name, lineno);
            rc = -1;
            break;
        }
        int a = tfm_token_map_id(&t->map, line + a0, a1 - a0), b = tfm_token_map_id(&t->map, line + b0, b1 - b0);
        char joined[2 * 4096];
        int merged = -1;
        if (a >= 0 && b >= 0 && t->map.len[a] + t->map.len[b] <= (int)sizeof joined) {
            memcpy(joined, t->map.token[a], (size_t)t->map.len[a]);
            memcpy(joined + t->map.len[a], t->map.token[b], (size_t)t->map.len[b]);
            merged = tfm_token_map_id(&t->map, joined, (size_t)(t->map.len[a] + t->map.len[b]));
        }
        int missing = a < 0 ? 1 : b < 0 ? 2 : 0;
        if (missing) {
            size_t o = missing == 1 ? a0 : b0, e = missing == 1 ? a1 : b1;
            tfm_set_error("%s:%zu: token '%.*s' is not in the vocabulary", name, lineno, (int)(e - o), line + o);
            rc = -1;
        } else if (merged < 0) {
            tfm_set_error("%s:%zu: the merged token '%.*s%.*s' is not in the vocabulary", name, lineno, (int)(a1 - a0),
                          line + a0, (int)(b1 - b0), line + b0);
            rc = -1;
        } else if (created[a] >= rank || created[b] >= rank) {
            tfm_set_error("%s:%zu: merge '%.*s %.*s' uses a token no earlier merge creates", name, lineno, (int)(a1 - a0),
                          line + a0, (int)(b1 - b0), line + b0);
            rc = -1;
        } else {
            uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
            size_t k = merge_hash(key, t->merge_mask);
            while (t->merges[k].key != UINT64_MAX && t->merges[k].key != key) k = (k + 1) & t->merge_mask;
            if (t->merges[k].key == key) {
                tfm_set_error("%s:%zu: merge '%.*s %.*s' appears twice", name, lineno, (int)(a1 - a0), line + a0,
                              (int)(b1 - b0), line + b0);
                rc = -1;
            } else {
                t->merges[k] = (merge_slot){key, rank, merged};
                if (created[merged] == INT32_MAX) created[merged] = rank;
                rank++;
            }
        }
    }
    free(created);
    if (!rc && rank == 0) rc = (tfm_set_error("%s: no merges", name), -1);
    return rc;
}

/* ---------------------------------------------------------------- loading */
static int build_bytes(tfm_gpt2_bpe *t, const char *name) {
    size_t total = 0;
    for (int id = 0; id < t->map.n; id++) total += (size_t)t->map.len[id];
    t->bytes_off = malloc((size_t)t->map.n * sizeof *t->bytes_off);
    t->bytes_len = malloc((size_t)t->map.n * sizeof *t->bytes_len);
    t->bytes_block = malloc(total + 1);
    if (!t->bytes_off || !t->bytes_len || !t->bytes_block) return tfm_set_error_kind(TFM_ERR_NOMEM, "%s: out of memory", name), -1;
    size_t o = 0;
    for (int id = 0; id < t->map.n; id++) {
        const char *s = t->map.token[id];
        size_t n = (size_t)t->map.len[id], k = 0;
        t->bytes_off[id] = o;
        int all = 1;   /* every character stands for a byte */
        for (size_t i = 0; i < n && all;) {
            uint32_t c;
            int l = tfm_utf8_decode(s + i, n - i, &c);
            int b = l ? char_byte(c) : -1;
            if (b < 0) all = 0;
            else t->bytes_block[o + k++] = (unsigned char)b;
            i += l ? (size_t)l : 1;
        }
        if (!all) memcpy(t->bytes_block + o, s, k = n);   /* an added token: its own UTF-8 */
        t->bytes_len[id] = (int)k;
        o += k;
    }
    for (int b = 0; b < 256; b++) {
        char u[4];
        int l = tfm_utf8_encode(byte_char(b), u);
        t->byte_id[b] = tfm_token_map_id(&t->map, u, (size_t)l);
        if (t->byte_id[b] < 0)
            return tfm_set_error("%s: the token '%.*s' of byte 0x%02x is missing (not a GPT-2 byte-level vocabulary)", name, l, u, b), -1;
    }
    return 0;
}

/* The rest of a load once the vocabulary is read (rc 0) or failed: the merges text (owned; freed here) checked
 * and parsed. t, or NULL with the error (t freed). */
static tfm_gpt2_bpe *finish_load(tfm_gpt2_bpe *t, int rc, char *text, size_t len, const char *merges_name) {
    if (!rc && tfm_utf8_first_invalid(text, len) >= 0) rc = (tfm_set_error("%s: not valid UTF-8 text", merges_name), -1);
    if (!rc) rc = parse_merges(t, text, len, merges_name);
    free(text);
    if (rc) {
        tfm_error_in_data();
        tfm_gpt2_bpe_free(t);
        return NULL;
    }
    return t;
}

tfm_gpt2_bpe *tfm_gpt2_bpe_load_files(const char *vocab_json, const char *merges) {
    tfm_gpt2_bpe *t = calloc(1, sizeof *t);
    if (!t) return tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory"), NULL;
    size_t len = 0;
    char *text = NULL;
    int rc = tfm_token_map_load(&t->map, vocab_json);
    if (!rc) rc = build_bytes(t, vocab_json);
    if (!rc) rc = (text = bpe_read_file(merges, MAX_MERGES_BYTES, &len)) ? 0 : -1;
    return finish_load(t, rc, text, len, merges);
}

/* (interop: an imported GPT-2's checkpoint keeps the two files as bytes) */
tfm_gpt2_bpe *tfm_gpt2_bpe_from_bytes(const char *vocab_json, size_t vocab_len, const char *merges, size_t merges_len,
                                      const char *vocab_name, const char *merges_name) {
    tfm_gpt2_bpe *t = calloc(1, sizeof *t);
    char *text = merges_len <= MAX_MERGES_BYTES ? malloc(merges_len + 1) : NULL;
    if (!t || !text) {
        free(t), free(text);
        return tfm_set_error_kind(TFM_ERR_NOMEM, "%s: out of memory", merges_name), NULL;
    }
    memcpy(text, merges, merges_len);
    text[merges_len] = 0;
    int rc = tfm_token_map_parse(&t->map, vocab_json, vocab_len, vocab_name);
    if (!rc) rc = build_bytes(t, vocab_name);
    return finish_load(t, rc, text, merges_len, merges_name);
}

static int is_dir(const char *p) {
    struct stat st;
    return !stat(p, &st) && S_ISDIR(st.st_mode);
}

static int exists(const char *p) {
    struct stat st;
    return !stat(p, &st);
}

int tfm_gpt2_bpe_path(const char *path) {
    size_t n = strlen(path);
    return is_dir(path) || (n >= 5 && !strcmp(path + n - 5, ".json"));
}

tfm_gpt2_bpe *tfm_gpt2_bpe_load(const char *path) {
    size_t n = strlen(path);
    char *vocab = malloc(n + 32), *merges = malloc(n + 32);
    tfm_gpt2_bpe *t = NULL;
    if (!vocab || !merges) {
        tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory");
        goto done;
    }
    size_t dir_len = n;   /* the folder part, with its '/' */
    if (is_dir(path)) {
        memcpy(vocab, path, n);
        if (!n || path[n - 1] != '/') vocab[dir_len++] = '/';
        vocab[dir_len] = 0;
        strcpy(merges, vocab);
        strcat(vocab, "encoder.json");
        if (!exists(vocab)) strcpy(vocab + dir_len, "vocab.json");
    } else {
        while (dir_len > 0 && path[dir_len - 1] != '/') dir_len--;
        strcpy(vocab, path);
        memcpy(merges, path, dir_len);
        merges[dir_len] = 0;
    }
    strcpy(merges + dir_len, "vocab.bpe");
    if (!exists(merges)) strcpy(merges + dir_len, "merges.txt");
    if (!exists(vocab)) {
        tfm_set_error_kind(TFM_ERR_IO, "%s: no encoder.json or vocab.json there", path);
        goto done;
    }
    if (!exists(merges)) {
        tfm_set_error_kind(TFM_ERR_IO, "%s: no vocab.bpe or merges.txt beside it", vocab);
        goto done;
    }
    t = tfm_gpt2_bpe_load_files(vocab, merges);
done:
    free(vocab);
    free(merges);
    return t;
}

void tfm_gpt2_bpe_free(tfm_gpt2_bpe *t) {
    if (!t) return;
    tfm_token_map_free(&t->map);
    free(t->bytes_off);
    free(t->bytes_len);
    free(t->bytes_block);
    free(t->merges);
    free(t->cache);
    free(t->cache_keys.p);
    free(t->cache_ids.p);
    free(t->sym_id);
    free(t->sym_next);
    free(t->sym_prev);
    free(t->heap);
    free(t);
}

int tfm_gpt2_bpe_n_vocab(const tfm_gpt2_bpe *t) { return t->map.n; }
int tfm_gpt2_bpe_id(const tfm_gpt2_bpe *t, const char *token) { return tfm_token_map_id(&t->map, token, strlen(token)); }
const char *tfm_gpt2_bpe_token(const tfm_gpt2_bpe *t, int id) { return tfm_token_map_token(&t->map, id); }

const unsigned char *tfm_gpt2_bpe_token_bytes(const tfm_gpt2_bpe *t, int id, size_t *len) {
    if (id < 0 || id >= t->map.n || !t->map.token[id]) return NULL;
    *len = (size_t)t->bytes_len[id];
    return t->bytes_block + t->bytes_off[id];
}

/* ---------------------------------------------------------------- the pre-tokenizer */
enum { C_LETTER, C_NUMBER, C_SPACE, C_OTHER };

static int char_class(uint32_t c) {
    if (c < 0x80) {
        if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') return C_LETTER;
        if (c >= '0' && c <= '9') return C_NUMBER;
        if (c == ' ' || (c >= 0x09 && c <= 0x0D)) return C_SPACE;
        return C_OTHER;
    }
    if (tfm_uc_letter(c)) return C_LETTER;
    if (tfm_uc_number(c)) return C_NUMBER;
    if (tfm_uc_js_space(c)) return C_SPACE;
    return C_OTHER;
}

/* The character at s[i] (valid UTF-8): its class, its byte length in *k. */
static int class_at(const char *s, size_t n, size_t i, int *k) {
    uint32_t c;
    *k = tfm_utf8_decode(s + i, n - i, &c);
    if (!*k) *k = 1, c = 0xFFFD;
    return char_class(c);
}

/* End of the run of class cls starting at i. */
static size_t run_end(const char *s, size_t n, size_t i, int cls) {
    int k;
    while (i < n && class_at(s, n, i, &k) == cls) i += (size_t)k;
    return i;
}

/* Length of the regex match at i (the alternatives in the regex's order; the first that matches wins). */
static size_t match_at(const char *s, size_t n, size_t i) {
    if (s[i] == '\'' && i + 1 < n) {   /* 's 't 're 've 'm 'll 'd */
        char a = s[i + 1], b = i + 2 < n ? s[i + 2] : 0;
        if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
        if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
    }
    int k;
    int cls = class_at(s, n, i, &k);
    if (s[i] == ' ' && i + 1 < n) {   /* ' ?X+' with its space, X = \p{L}, \p{N} or the rest */
        int k2, next = class_at(s, n, i + 1, &k2);
        if (next != C_SPACE) return run_end(s, n, i + 1, next) - i;
    }
    if (cls != C_SPACE) return run_end(s, n, i, cls) - i;
    /* \s+(?!\S): the run of spaces, less its last character when a non-space follows; else \s+ */
    size_t e = i, last = i;
    while (e < n && class_at(s, n, e, &k) == C_SPACE) last = e, e += (size_t)k;
    if (e == n || last == i) return e - i;
    return last - i;
}

size_t *tfm_gpt2_pretokenize(const char *text, size_t len, size_t *n_pieces) {
    bpe_buf b = {0};
    bpe_buf_put(&b, "", 0);
    for (size_t i = 0; i < len;) {
        size_t m = match_at(text, len, i);
        size_t span[2] = {i, i + m};
        bpe_buf_put(&b, span, sizeof span);
        i += m;
    }
    if (b.oom) {
        free(b.p);
        return tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory splitting text"), NULL;
    }
    *n_pieces = b.n / (2 * sizeof(size_t));
    return (size_t *)(void *)b.p;
}

/* ---------------------------------------------------------------- merging one piece */
static int cand_before(cand a, cand b) { return a.rank < b.rank || (a.rank == b.rank && a.left < b.left); }

static void heap_push(tfm_gpt2_bpe *t, cand c) {
    int i = t->heap_n++;
    while (i > 0 && cand_before(c, t->heap[(i - 1) / 2])) {
        t->heap[i] = t->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    t->heap[i] = c;
}

static cand heap_pop(tfm_gpt2_bpe *t) {
    cand top = t->heap[0], last = t->heap[--t->heap_n];
    int i = 0;
    for (;;) {
        int c = 2 * i + 1;
        if (c >= t->heap_n) break;
        if (c + 1 < t->heap_n && cand_before(t->heap[c + 1], t->heap[c])) c++;
        if (!cand_before(t->heap[c], last)) break;
        t->heap[i] = t->heap[c];
        i = c;
    }
    if (t->heap_n) t->heap[i] = last;
    return top;
}

static void push_pair(tfm_gpt2_bpe *t, int left) {
    int right = left >= 0 ? t->sym_next[left] : -1;
    if (right < 0) return;
    const merge_slot *m = merge_find(t, t->sym_id[left], t->sym_id[right]);
    if (m) heap_push(t, (cand){m->rank, left});
}

static int grow_scratch(tfm_gpt2_bpe *t, size_t n) {
    if (n <= (size_t)t->sym_cap) return 0;
    if (n > (size_t)1 << 28) return -1;
    int cap = (int)n;
    int *a = realloc(t->sym_id, (size_t)cap * sizeof *a);
    if (a) t->sym_id = a;
    int *b = realloc(t->sym_next, (size_t)cap * sizeof *b);
    if (b) t->sym_next = b;
    int *c = realloc(t->sym_prev, (size_t)cap * sizeof *c);
    if (c) t->sym_prev = c;
    cand *h = realloc(t->heap, (size_t)cap * 2 * sizeof *h);   /* at most n - 1 + 2 per merge */
    if (h) t->heap = h;
    if (!a || !b || !c || !h) return -1;
    t->sym_cap = cap;
    t->heap_cap = 2 * cap;
    return 0;
}

/* BPE of one piece's bytes; the ids appended to out. */
static int merge_piece(tfm_gpt2_bpe *t, const unsigned char *p, size_t n, bpe_buf *out) {
    if (grow_scratch(t, n)) return -1;
    for (size_t i = 0; i < n; i++) {
        t->sym_id[i] = t->byte_id[p[i]];
        t->sym_prev[i] = (int)i - 1;
        t->sym_next[i] = i + 1 < n ? (int)i + 1 : -1;
    }
    t->heap_n = 0;
    for (size_t i = 0; i + 1 < n; i++) push_pair(t, (int)i);
    while (t->heap_n > 0) {
        cand c = heap_pop(t);
        int l = c.left, r = t->sym_id[l] >= 0 ? t->sym_next[l] : -1;
        if (r < 0) continue;
        const merge_slot *m = merge_find(t, t->sym_id[l], t->sym_id[r]);
        if (!m || m->rank != c.rank) continue;   /* stale: the pair changed since it was pushed */
        t->sym_id[l] = m->merged;
        t->sym_next[l] = t->sym_next[r];
        if (t->sym_next[r] >= 0) t->sym_prev[t->sym_next[r]] = l;
        t->sym_id[r] = -1;
        /* new pairs: (prev, l) and (l, next); the heap holds at most n - 1 + 2 * merges entries */
        if (t->heap_n + 2 > t->heap_cap) return -1;
        push_pair(t, t->sym_prev[l]);
        push_pair(t, l);
    }
    for (int i = n ? 0 : -1; i >= 0; i = t->sym_next[i]) bpe_buf_put(out, &t->sym_id[i], sizeof(int));
    return out->oom ? -1 : 0;
}

/* ---------------------------------------------------------------- the cache */
static void cache_clear(tfm_gpt2_bpe *t) {
    if (t->cache) memset(t->cache, 0, (t->cache_mask + 1) * sizeof *t->cache);
    t->cache_used = 0;
    t->cache_keys.n = t->cache_ids.n = 0;
}

static const cache_slot *cache_find(const tfm_gpt2_bpe *t, const char *p, size_t n, uint64_t h) {
    if (!t->cache) return NULL;
    for (size_t k = h & t->cache_mask;; k = (k + 1) & t->cache_mask) {
        const cache_slot *s = &t->cache[k];
        if (!s->key_len) return NULL;
        if (s->hash == h && s->key_len == n && !memcmp(t->cache_keys.p + s->key_off, p, n)) return s;
    }
}

static void cache_insert_slot(tfm_gpt2_bpe *t, cache_slot s) {
    size_t k = s.hash & t->cache_mask;
    while (t->cache[k].key_len) k = (k + 1) & t->cache_mask;
    t->cache[k] = s;
}

/* Remember piece p -> ids (best effort: a failed allocation only empties the cache). */
static void cache_add(tfm_gpt2_bpe *t, const char *p, size_t n, uint64_t h, const int *ids, size_t n_ids) {
    if (n > CACHE_MAX_KEY) return;
    if (t->cache_keys.n + t->cache_ids.n + (t->cache_mask + 1) * sizeof(cache_slot) > CACHE_MAX_BYTES) cache_clear(t);
    if (!t->cache || 2 * (t->cache_used + 1) > t->cache_mask + 1) {   /* grow the table to keep it half empty */
        size_t ns = t->cache ? 2 * (t->cache_mask + 1) : 4096;
        cache_slot *old = t->cache, *nc = calloc(ns, sizeof *nc);
        if (!nc) {
            cache_clear(t);
            return;
        }
        size_t old_n = old ? t->cache_mask + 1 : 0;
        t->cache = nc;
        t->cache_mask = ns - 1;
        for (size_t k = 0; k < old_n; k++)
            if (old[k].key_len) cache_insert_slot(t, old[k]);
        free(old);
    }
    cache_slot s = {h, (uint32_t)t->cache_keys.n, (uint32_t)n, (uint32_t)(t->cache_ids.n / sizeof(int)), (uint32_t)n_ids};
    bpe_buf_put(&t->cache_keys, p, n);
    bpe_buf_put(&t->cache_ids, ids, n_ids * sizeof(int));
    if (t->cache_keys.oom || t->cache_ids.oom) {
        free(t->cache_keys.p);
        free(t->cache_ids.p);
        t->cache_keys = t->cache_ids = (bpe_buf){0};
        cache_clear(t);
        return;
    }
    cache_insert_slot(t, s);
    t->cache_used++;
}

/* ---------------------------------------------------------------- encoding and decoding */
int *tfm_gpt2_bpe_encode(tfm_gpt2_bpe *t, const char *text, size_t len, int *n_ids) {
    long bad = tfm_utf8_first_invalid(text, len);
    if (bad >= 0) return tfm_set_error("invalid UTF-8 (byte 0x%02x at offset %ld)", (unsigned char)text[bad], bad), NULL;
    if (len > (size_t)1 << 30) return tfm_set_error("text longer than 1 GiB"), NULL;
    bpe_buf out = {0};
    bpe_buf_put(&out, "", 0);
    for (size_t i = 0; i < len && !out.oom;) {
        size_t m = match_at(text, len, i);
        uint64_t h = bpe_hash(text + i, m);
        const cache_slot *s = cache_find(t, text + i, m, h);
        if (s) {
            bpe_buf_put(&out, t->cache_ids.p + (size_t)s->ids_off * sizeof(int), (size_t)s->n_ids * sizeof(int));
        } else {
            size_t before = out.n;
            if (merge_piece(t, (const unsigned char *)text + i, m, &out)) out.oom = 1;
            else cache_add(t, text + i, m, h, (const int *)(void *)(out.p + before), (out.n - before) / sizeof(int));
        }
        i += m;
    }
    if (out.oom) {
        free(out.p);
        return tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory encoding"), NULL;
    }
    *n_ids = (int)(out.n / sizeof(int));
    return (int *)(void *)out.p;
}

char *tfm_gpt2_bpe_decode(const tfm_gpt2_bpe *t, const int *ids, int n_ids, size_t *out_len) {
    bpe_buf out = {0};
    bpe_buf_put(&out, "", 0);
    for (int i = 0; i < n_ids; i++) {
        size_t n;
        const unsigned char *b = tfm_gpt2_bpe_token_bytes(t, ids[i], &n);
        if (!b) {
            free(out.p);
            return tfm_set_error("id %d is not a token (the vocabulary has ids 0..%d)", ids[i], t->map.n - 1), NULL;
        }
        bpe_buf_put(&out, b, n);
    }
    if (out.oom) {
        free(out.p);
        return tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory decoding"), NULL;
    }
    *out_len = out.n;
    return (char *)out.p;
}

/* WHATWG's UTF-8 decoder with replacement: each maximal subpart of an ill-formed sequence -> U+FFFD. */
static void utf8_replace(bpe_buf *out, const unsigned char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        unsigned c = s[i];
        int need;
        unsigned lo = 0x80, hi = 0xBF;
        if (c < 0x80) {
            bpe_buf_put(out, s + i++, 1);
            continue;
        }
        if (c >= 0xC2 && c <= 0xDF) need = 1;
        else if (c >= 0xE0 && c <= 0xEF) need = 2, lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
        else if (c >= 0xF0 && c <= 0xF4) need = 3, lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
        else {
            bpe_buf_put(out, "\xef\xbf\xbd", 3);
            i++;
            continue;
        }
        size_t j = i + 1;
        int ok = 1;
        for (int k = 0; k < need; k++, j++) {
            if (j >= n || s[j] < lo || s[j] > hi) {
                ok = 0;
                break;
            }
            lo = 0x80, hi = 0xBF;
        }
        if (ok) bpe_buf_put(out, s + i, j - i);
        else bpe_buf_put(out, "\xef\xbf\xbd", 3);
        i = j;
    }
}

char *tfm_gpt2_bpe_decode_text(const tfm_gpt2_bpe *t, const int *ids, int n_ids, size_t *out_len) {
    size_t n;
    char *raw = tfm_gpt2_bpe_decode(t, ids, n_ids, &n);
    if (!raw) return NULL;
    bpe_buf out = {0};
    bpe_buf_put(&out, "", 0);
    utf8_replace(&out, (const unsigned char *)raw, n);
    free(raw);
    if (out.oom) {
        free(out.p);
        return tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory decoding"), NULL;
    }
    *out_len = out.n;
    return (char *)out.p;
}
