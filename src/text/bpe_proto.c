/* BPE models as SentencePiece ModelProto protobufs: a minimal reader (the fields tfm uses, every
 * other field skipped) and writer, validation into a tfm_bpe, file and container I/O.
 *
 * Protobuf wire format: a message is a sequence of (key, value); key = varint (field << 3 | wire),
 * wire 0 = varint, 1 = 8 bytes, 2 = varint length + bytes (strings, sub-messages), 5 = 4 bytes.
 * Field numbers are those of sentencepiece_model.proto (see docs/FORMAT.md). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/bpe_internal.h"
#include "tfm/core.h"
#include "tfm/io.h"
#include "tfm/text.h"

#define MAX_MODEL_BYTES ((size_t)1 << 28)
#define MAX_PIECES (1 << 22)

/* ---------------------------------------------------------------- writer */
void bpe_buf_put(bpe_buf *b, const void *data, size_t n) {
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t nc = b->cap ? b->cap : 256;
        while (nc < b->n + n + 1) nc *= 2;
        unsigned char *np = realloc(b->p, nc);
        if (!np) {
            b->oom = 1;
            return;
        }
        b->p = np;
        b->cap = nc;
    }
    memcpy(b->p + b->n, data, n);
    b->n += n;
    b->p[b->n] = 0;
}

static void put_varint(bpe_buf *b, uint64_t v) {
    unsigned char tmp[10];
    int k = 0;
    do {
        tmp[k] = (unsigned char)(v & 0x7f);
        v >>= 7;
        if (v) tmp[k] |= 0x80;
        k++;
    } while (v);
    bpe_buf_put(b, tmp, (size_t)k);
}

static void put_key(bpe_buf *b, int field, int wire) { put_varint(b, (uint64_t)field << 3 | (uint64_t)wire); }
/* int32 fields: negative values are sign-extended to 64 bits (10 bytes), as protobuf does */
static void put_int(bpe_buf *b, int field, int v) {
    put_key(b, field, 0);
    put_varint(b, (uint64_t)(int64_t)v);
}
static void put_bytes(bpe_buf *b, int field, const void *s, size_t n) {
    put_key(b, field, 2);
    put_varint(b, n);
    bpe_buf_put(b, s, n);
}
static void put_float(bpe_buf *b, int field, float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    unsigned char le[4] = {(unsigned char)u, (unsigned char)(u >> 8), (unsigned char)(u >> 16), (unsigned char)(u >> 24)};
    put_key(b, field, 5);
    bpe_buf_put(b, le, 4);
}

unsigned char *bpe_proto_write(const bpe_proto_spec *s, size_t *len) {
    bpe_buf out = {0}, sub = {0};
    for (int i = 0; i < s->n; i++) {             /* ModelProto.pieces = 1 */
        sub.n = 0;
        put_bytes(&sub, 1, s->piece[i], strlen(s->piece[i]));
        put_float(&sub, 2, s->score[i]);
        put_int(&sub, 3, s->type[i]);
        put_bytes(&out, 1, sub.p, sub.n);
    }
    sub.n = 0;                                    /* ModelProto.trainer_spec = 2 */
    put_int(&sub, 3, 2);                          /* model_type BPE */
    put_int(&sub, 4, s->vocab_size);
    put_float(&sub, 10, s->character_coverage);
    put_int(&sub, 20, s->max_piece_chars);        /* max_sentencepiece_length */
    put_int(&sub, 35, s->byte_fallback);
    put_int(&sub, 40, s->unk_id);
    put_int(&sub, 41, s->bos_id);
    put_int(&sub, 42, s->eos_id);
    put_int(&sub, 43, s->pad_id);
    put_bytes(&out, 2, sub.p, sub.n);
    sub.n = 0;                                    /* ModelProto.normalizer_spec = 3 */
    put_bytes(&sub, 1, "identity", 8);
    put_int(&sub, 3, s->add_dummy_prefix);
    put_int(&sub, 4, s->remove_extra_whitespaces);
    put_int(&sub, 5, 1);                          /* escape_whitespaces */
    if (s->literal_ws_bytes) put_int(&sub, BPE_FIELD_LITERAL_WS, 1);
    put_bytes(&out, 3, sub.p, sub.n);
    free(sub.p);
    if (out.oom || sub.oom) {
        free(out.p);
        tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory writing a BPE model");
        return NULL;
    }
    *len = out.n;
    return out.p;
}

/* ---------------------------------------------------------------- reader */
typedef struct {
    const unsigned char *base, *p, *end;
    const char *name;
    int bad;                   /* an error was set */
} pb;

static int pb_fail(pb *r, const char *what) {
    if (!r->bad)
        tfm_set_error("%s: not a valid SentencePiece model (%s at byte %zu; truncated or foreign file)", r->name, what,
                      (size_t)(r->p - r->base));
    r->bad = 1;
    return -1;
}

static int pb_varint(pb *r, uint64_t *v) {
    uint64_t x = 0;
    for (int shift = 0; shift < 70; shift += 7) {
        if (r->p >= r->end) return pb_fail(r, "varint runs past the end");
        unsigned char c = *r->p++;
        if (shift == 63 && (c & 0x7e)) return pb_fail(r, "varint overflows 64 bits");
        x |= (uint64_t)(c & 0x7f) << shift;
        if (!(c & 0x80)) {
            *v = x;
            return 0;
        }
    }
    return pb_fail(r, "varint longer than 10 bytes");
}

static int pb_key(pb *r, int *field, int *wire) {
    uint64_t k;
    if (pb_varint(r, &k)) return -1;
    if ((k >> 3) == 0 || (k >> 3) > 536870911u) return pb_fail(r, "bad field number");
    *field = (int)(k >> 3);
    *wire = (int)(k & 7);
    if (*wire != 0 && *wire != 1 && *wire != 2 && *wire != 5) return pb_fail(r, "unsupported wire type");
    return 0;
}

static int pb_len(pb *r, pb *sub) {
    uint64_t n;
    if (pb_varint(r, &n)) return -1;
    if (n > (uint64_t)(r->end - r->p)) return pb_fail(r, "length-delimited field runs past the end");
    *sub = (pb){r->base, r->p, r->p + n, r->name, 0};
    r->p += n;
    return 0;
}

static int pb_skip(pb *r, int wire) {
    uint64_t v;
    pb sub;
    switch (wire) {
    case 0: return pb_varint(r, &v);
    case 2: return pb_len(r, &sub);
    default: {
        size_t n = wire == 1 ? 8 : 4;
        if ((size_t)(r->end - r->p) < n) return pb_fail(r, "fixed-size field runs past the end");
        r->p += n;
        return 0;
    }
    }
}

static int pb_expect(pb *r, int wire, int want) { return wire == want ? 0 : pb_fail(r, "a known field has the wrong wire type"); }

static int pb_f32(pb *r, float *f) {
    if (r->end - r->p < 4) return pb_fail(r, "float runs past the end");
    uint32_t u = (uint32_t)r->p[0] | (uint32_t)r->p[1] << 8 | (uint32_t)r->p[2] << 16 | (uint32_t)r->p[3] << 24;
    memcpy(f, &u, 4);
    r->p += 4;
    return 0;
}

/* What the reader collects before validation. */
typedef struct {
    pb *piece_msgs;             /* the (unparsed) SentencePiece sub-messages */
    int n_pieces, cap;
    int model_type;             /* default UNIGRAM = 1 */
    int byte_fallback, treat_ws_as_suffix;
    int unk_id, bos_id, eos_id, pad_id;
    pb unk_surface;
    int has_unk_surface;
    pb norm_name, charsmap, denorm_charsmap;
    int add_dummy_prefix, remove_extra_whitespaces, escape_whitespaces, literal_ws_bytes;
} proto_fields;

static int read_trainer_spec(pb *r, proto_fields *f) {
    while (r->p < r->end) {
        int field, wire;
        uint64_t v;
        if (pb_key(r, &field, &wire)) return -1;
        switch (field) {
        case 3: if (pb_expect(r, wire, 0) || pb_varint(r, &v)) return -1; f->model_type = (int)v; break;
        case 24: if (pb_expect(r, wire, 0) || pb_varint(r, &v)) return -1; f->treat_ws_as_suffix = v != 0; break;
        case 35: if (pb_expect(r, wire, 0) || pb_varint(r, &v)) return -1; f->byte_fallback = v != 0; break;
        case 40: case 41: case 42: case 43: {
            if (pb_expect(r, wire, 0) || pb_varint(r, &v)) return -1;
            int id = (int)(int32_t)(uint32_t)v;
            if (field == 40) f->unk_id = id;
            else if (field == 41) f->bos_id = id;
            else if (field == 42) f->eos_id = id;
            else f->pad_id = id;
            break;
        }
        case 44:
            if (pb_expect(r, wire, 2) || pb_len(r, &f->unk_surface)) return -1;
            f->has_unk_surface = 1;
            break;
        default: if (pb_skip(r, wire)) return -1;
        }
    }
    return 0;
}

static int read_normalizer_spec(pb *r, proto_fields *f, int denorm) {
    while (r->p < r->end) {
        int field, wire;
        uint64_t v;
        if (pb_key(r, &field, &wire)) return -1;
        if (field == 1 && !denorm) {
            if (pb_expect(r, wire, 2) || pb_len(r, &f->norm_name)) return -1;
        } else if (field == 2) {
            if (pb_expect(r, wire, 2) || pb_len(r, denorm ? &f->denorm_charsmap : &f->charsmap)) return -1;
        } else if (field >= 3 && field <= 5 && !denorm) {
            if (pb_expect(r, wire, 0) || pb_varint(r, &v)) return -1;
            if (field == 3) f->add_dummy_prefix = v != 0;
            else if (field == 4) f->remove_extra_whitespaces = v != 0;
            else f->escape_whitespaces = v != 0;
        } else if (field == BPE_FIELD_LITERAL_WS && !denorm) {
            if (pb_expect(r, wire, 0) || pb_varint(r, &v)) return -1;
            f->literal_ws_bytes = v != 0;
        } else if (pb_skip(r, wire)) {
            return -1;
        }
    }
    return 0;
}

static int read_model_proto(pb *r, proto_fields *f) {
    while (r->p < r->end) {
        int field, wire;
        pb sub;
        if (pb_key(r, &field, &wire)) return -1;
        if (field >= 1 && field <= 5 && field != 4) {
            if (pb_expect(r, wire, 2) || pb_len(r, &sub)) return -1;
            if (field == 1) {
                if (f->n_pieces >= MAX_PIECES) return pb_fail(r, "too many pieces");
                if (f->n_pieces == f->cap) {
                    int nc = f->cap ? f->cap * 2 : 1024;
                    pb *np = realloc(f->piece_msgs, (size_t)nc * sizeof *np);
                    if (!np) return tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory reading '%s'", r->name), r->bad = 1, -1;
                    f->piece_msgs = np;
                    f->cap = nc;
                }
                f->piece_msgs[f->n_pieces++] = sub;
            } else if (field == 2) {
                if (read_trainer_spec(&sub, f)) return r->bad = 1, -1;
            } else if (read_normalizer_spec(&sub, f, field == 5)) {
                return r->bad = 1, -1;
            }
        } else if (pb_skip(r, wire)) {
            return -1;
        }
    }
    return 0;
}

/* Parse one SentencePiece message: piece = 1, score = 2, type = 3. */
static int read_piece(pb *r, pb *str, float *score, int *type) {
    *str = (pb){r->base, NULL, NULL, r->name, 0};
    *score = 0;
    *type = TFM_PIECE_NORMAL;
    while (r->p < r->end) {
        int field, wire;
        uint64_t v;
        if (pb_key(r, &field, &wire)) return -1;
        if (field == 1) {
            if (pb_expect(r, wire, 2) || pb_len(r, str)) return -1;
        } else if (field == 2) {
            if (pb_expect(r, wire, 5) || pb_f32(r, score)) return -1;
        } else if (field == 3) {
            if (pb_expect(r, wire, 0) || pb_varint(r, &v)) return -1;
            if (v < 1 || v > 6) return pb_fail(r, "unknown piece type");
            *type = (int)v;
        } else if (pb_skip(r, wire)) {
            return -1;
        }
    }
    return 0;
}

/* ---------------------------------------------------------------- lookup tables */
uint64_t bpe_hash(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h;
}

static int is_reserved(int type) {
    return type == TFM_PIECE_CONTROL || type == TFM_PIECE_UNKNOWN || type == TFM_PIECE_BYTE;
}

/* Insert id into the table; -1 if a piece with the same string is already there. */
static int table_insert(const tfm_bpe *m, int *slots, int id) {
    size_t mask = (size_t)m->n_slots - 1;
    for (size_t s = bpe_hash(m->piece[id], (size_t)m->len[id]) & mask;; s = (s + 1) & mask) {
        int o = slots[s];
        if (o < 0) {
            slots[s] = id;
            return 0;
        }
        if (m->len[o] == m->len[id] && !memcmp(m->piece[o], m->piece[id], (size_t)m->len[id])) return -1;
    }
}

static int table_find(const tfm_bpe *m, const int *slots, const char *s, size_t n) {
    size_t mask = (size_t)m->n_slots - 1;
    for (size_t k = bpe_hash(s, n) & mask;; k = (k + 1) & mask) {
        int o = slots[k];
        if (o < 0) return -1;
        if ((size_t)m->len[o] == n && !memcmp(m->piece[o], s, n)) return o;
    }
}

int tfm_bpe_piece_id(const tfm_bpe *m, const char *piece, size_t len) {
    int id = table_find(m, m->rslots, piece, len);
    if (id < 0) id = table_find(m, m->slots, piece, len);
    return id < 0 ? m->unk_id : id;
}

static int byte_of_piece(const char *s, int len) {   /* "<0xNN>" (upper-case hex) -> NN, else -1 */
    static const char hex[] = "0123456789ABCDEF";
    if (len != 6 || memcmp(s, "<0x", 3) || s[5] != '>') return -1;
    const char *a = strchr(hex, s[3]), *b = strchr(hex, s[4]);
    if (!s[3] || !s[4] || !a || !b) return -1;
    return (int)(a - hex) * 16 + (int)(b - hex);
}

/* ---------------------------------------------------------------- building a model */
static char *pb_strdup(const pb *s) {
    size_t n = (size_t)(s->end - s->p);
    char *o = malloc(n + 1);
    if (o) {
        memcpy(o, s->p, n);
        o[n] = 0;
    }
    return o;
}

/* The normalization rule: "identity" (no charsmap) or "nmt_nfkc" with its precompiled charsmap
 * (SentencePiece's normalizer.cc): uint32 little-endian size of the double-array trie, the trie (uint32
 * units), then the NUL-terminated replacement strings the trie's values point into. */
static int read_normalizer(tfm_bpe *m, const proto_fields *f, const char *name) {
    size_t map_len = f->charsmap.p ? (size_t)(f->charsmap.end - f->charsmap.p) : 0;
    char rule[64] = "identity";
    if (f->norm_name.p && f->norm_name.end != f->norm_name.p)
        snprintf(rule, sizeof rule, "%.*s", (int)(f->norm_name.end - f->norm_name.p), (const char *)f->norm_name.p);
    int identity = !strcmp(rule, "identity"), nfkc = !strcmp(rule, "nmt_nfkc");
    if (!identity && !nfkc)
        return tfm_set_error("%s: normalization rule '%s' is not supported (only 'identity' and 'nmt_nfkc')", name, rule), -1;
    if (identity && map_len)
        return tfm_set_error("%s: normalizer_spec: rule 'identity' with a precompiled charsmap (custom rules are not supported)", name), -1;
    if (identity) return 0;
    if (map_len < 8) return tfm_set_error("%s: normalizer_spec: rule 'nmt_nfkc' without a valid precompiled charsmap", name), -1;
    const unsigned char *b = f->charsmap.p;
    uint32_t trie_bytes = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
    if (trie_bytes < 4 || trie_bytes % 4 || trie_bytes > map_len - 4)
        return tfm_set_error("%s: normalizer_spec.precompiled_charsmap: trie size %u does not fit the %zu-byte charsmap", name,
                             trie_bytes, map_len), -1;
    m->norm_trie_n = trie_bytes / 4;
    m->norm_strings_len = map_len - 4 - trie_bytes;
    m->norm_trie = malloc(m->norm_trie_n * sizeof *m->norm_trie);
    m->norm_strings = malloc(m->norm_strings_len + 1);
    if (!m->norm_trie || !m->norm_strings) return tfm_set_error_kind(TFM_ERR_NOMEM, "%s: out of memory", name), -1;
    for (size_t i = 0; i < m->norm_trie_n; i++) {
        const unsigned char *u = b + 4 + 4 * i;
        m->norm_trie[i] = (uint32_t)u[0] | (uint32_t)u[1] << 8 | (uint32_t)u[2] << 16 | (uint32_t)u[3] << 24;
    }
    memcpy(m->norm_strings, b + 4 + trie_bytes, m->norm_strings_len);
    m->norm_strings[m->norm_strings_len] = 0;   /* the last string ends even in a truncated blob */
    return 0;
}

/* Fill m from the collected fields (m->proto already holds the bytes the views point into). */
static int build_model(tfm_bpe *m, proto_fields *f, const char *name) {
    if (f->n_pieces == 0) return tfm_set_error("%s: not a SentencePiece model (no pieces)", name), -1;
    if (f->model_type != 1 && f->model_type != 2) {
        const char *t = f->model_type == 3 ? "word" : f->model_type == 4 ? "char" : "unknown-type";
        return tfm_set_error("%s: a SentencePiece %s model; only BPE and unigram models are supported", name, t), -1;
    }
    if (read_normalizer(m, f, name)) return -1;
    if (f->denorm_charsmap.p && f->denorm_charsmap.end != f->denorm_charsmap.p)
        return tfm_set_error("%s: a denormalization rule is not supported", name), -1;
    if (f->treat_ws_as_suffix) return tfm_set_error("%s: treat_whitespace_as_suffix models are not supported", name), -1;
    if (!f->escape_whitespaces) return tfm_set_error("%s: models without escape_whitespaces are not supported", name), -1;
    m->model_type = f->model_type;

    int n = f->n_pieces;
    m->n = n;
    m->piece = calloc((size_t)n, sizeof *m->piece);
    m->len = malloc((size_t)n * sizeof *m->len);
    m->score = malloc((size_t)n * sizeof *m->score);
    m->type = malloc((size_t)n);
    size_t total = 0;
    pb *strs = malloc((size_t)n * sizeof *strs);
    if (!m->piece || !m->len || !m->score || !m->type || !strs) goto oom;
    for (int i = 0; i < n; i++) {
        int type;
        if (read_piece(&f->piece_msgs[i], &strs[i], &m->score[i], &type)) goto fail;
        m->type[i] = (unsigned char)type;
        size_t len = strs[i].p ? (size_t)(strs[i].end - strs[i].p) : 0;
        if (len == 0) {
            tfm_set_error("%s: piece %d is empty", name, i);
            goto fail;
        }
        if (len > 4096 || !tfm_utf8_valid((const char *)strs[i].p, len) || memchr(strs[i].p, 0, len)) {
            tfm_set_error("%s: piece %d is not valid UTF-8 text of at most 4096 bytes", name, i);
            goto fail;
        }
        m->len[i] = (int)len;
        total += len + 1;
    }
    char *block = malloc(total);
    if (!block) goto oom;
    for (int i = 0; i < n; i++) {
        m->piece[i] = block;
        memcpy(block, strs[i].p, (size_t)m->len[i]);
        block[m->len[i]] = 0;
        block += m->len[i] + 1;
    }
    free(strs);
    strs = NULL;

    m->n_slots = 16;
    while (m->n_slots < 2 * n) m->n_slots *= 2;
    m->slots = malloc((size_t)m->n_slots * sizeof *m->slots);
    m->rslots = malloc((size_t)m->n_slots * sizeof *m->rslots);
    m->user_ids = malloc((size_t)n * sizeof *m->user_ids);
    if (!m->slots || !m->rslots || !m->user_ids) goto oom;
    memset(m->slots, -1, (size_t)m->n_slots * sizeof *m->slots);
    memset(m->rslots, -1, (size_t)m->n_slots * sizeof *m->rslots);
    for (int b = 0; b < 256; b++) m->byte_id[b] = -1;
    m->unk_id = -1;
    for (int i = 0; i < n; i++) {
        int t = m->type[i];
        if (table_insert(m, is_reserved(t) ? m->rslots : m->slots, i)) {
            tfm_set_error("%s: piece '%s' is defined twice", name, m->piece[i]);
            goto fail;
        }
        if (t == TFM_PIECE_USER_DEFINED) m->user_ids[m->n_user++] = i;
        if (t == TFM_PIECE_UNKNOWN) {
            if (m->unk_id >= 0) {
                tfm_set_error("%s: more than one unknown piece (%d and %d)", name, m->unk_id, i);
                goto fail;
            }
            m->unk_id = i;
        }
        if (t == TFM_PIECE_BYTE) {
            int b = byte_of_piece(m->piece[i], m->len[i]);
            if (!f->byte_fallback) {
                tfm_set_error("%s: byte piece '%s' but byte_fallback is off", name, m->piece[i]);
                goto fail;
            }
            if (b < 0) {
                tfm_set_error("%s: invalid byte piece '%s'", name, m->piece[i]);
                goto fail;
            }
            m->byte_id[b] = i;
        }
    }
    if (m->unk_id < 0) {
        tfm_set_error("%s: no unknown piece (<unk>)", name);
        goto fail;
    }
    m->byte_fallback = f->byte_fallback;
    if (m->byte_fallback)
        for (int b = 0; b < 256; b++)
            if (m->byte_id[b] < 0) {
                tfm_set_error("%s: byte_fallback is on but piece <0x%02X> is missing", name, b);
                goto fail;
            }
    /* bos/eos/pad: SentencePiece's ids are where those pieces are, if they are control pieces */
    const char *names[3] = {"<s>", "</s>", "<pad>"};
    int *dst[3] = {&m->bos_id, &m->eos_id, &m->pad_id};
    int want[3] = {f->bos_id, f->eos_id, f->pad_id};
    for (int k = 0; k < 3; k++) {
        *dst[k] = -1;
        if (want[k] >= 0 && want[k] < n && m->type[want[k]] == TFM_PIECE_CONTROL) *dst[k] = want[k];
        else {
            int id = table_find(m, m->rslots, names[k], strlen(names[k]));
            if (id >= 0 && m->type[id] == TFM_PIECE_CONTROL) *dst[k] = id;
        }
    }
    m->add_dummy_prefix = f->add_dummy_prefix;
    m->remove_extra_whitespaces = f->remove_extra_whitespaces;
    m->escape_whitespaces = f->escape_whitespaces;
    m->literal_ws_bytes = f->literal_ws_bytes && m->byte_fallback;
    m->unk_surface = f->has_unk_surface ? pb_strdup(&f->unk_surface) : strdup(" \xe2\x81\x87 ");
    if (!m->unk_surface) goto oom;
    if (m->model_type == TFM_SP_UNIGRAM && bpe_unigram_init(m, name)) goto fail;
    /* user-defined pieces: longest first, so the first match is the longest one */
    for (int i = 1; i < m->n_user; i++)
        for (int j = i; j > 0 && m->len[m->user_ids[j]] > m->len[m->user_ids[j - 1]]; j--) {
            int t = m->user_ids[j];
            m->user_ids[j] = m->user_ids[j - 1];
            m->user_ids[j - 1] = t;
        }
    return 0;
oom:
    tfm_set_error_kind(TFM_ERR_NOMEM, "%s: out of memory", name);
fail:
    free(strs);
    return -1;
}

int tfm_bpe_from_bytes(tfm_bpe *m, const void *data, size_t n, const char *name) {
    memset(m, 0, sizeof *m);
    m->proto = malloc(n ? n : 1);
    if (!m->proto) return tfm_set_error_kind(TFM_ERR_NOMEM, "%s: out of memory", name), -1;
    memcpy(m->proto, data, n);
    m->proto_len = n;
    proto_fields f = {0};
    f.model_type = 1;
    f.unk_id = 0, f.bos_id = 1, f.eos_id = 2, f.pad_id = -1;
    f.add_dummy_prefix = f.remove_extra_whitespaces = f.escape_whitespaces = 1;
    pb r = {m->proto, m->proto, m->proto + n, name, 0};
    int rc = read_model_proto(&r, &f);
    if (!rc) rc = build_model(m, &f, name);
    free(f.piece_msgs);
    if (rc) tfm_bpe_free(m);
    return rc;
}

void tfm_bpe_free(tfm_bpe *m) {
    if (m->piece) free(m->piece[0]);
    free(m->piece);
    free(m->len);
    free(m->score);
    free(m->type);
    free(m->slots);
    free(m->rslots);
    free(m->user_ids);
    free(m->unk_surface);
    free(m->proto);
    free(m->norm_trie);
    free(m->norm_strings);
    free(m->trie_value);
    free(m->trie_keys);
    free(m->trie_child);
    memset(m, 0, sizeof *m);
}

tfm_bpe *tfm_bpe_new(void) {
    tfm_bpe *m = calloc(1, sizeof *m);
    if (!m) tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory (a BPE model)");
    return m;
}

void tfm_bpe_delete(tfm_bpe *m) {
    if (!m) return;
    tfm_bpe_free(m);
    free(m);
}

int tfm_bpe_size(const tfm_bpe *m) { return m->n; }
int tfm_bpe_pad_id(const tfm_bpe *m) { return m->pad_id; }
int tfm_bpe_bos_id(const tfm_bpe *m) { return m->bos_id; }
int tfm_bpe_eos_id(const tfm_bpe *m) { return m->eos_id; }
int tfm_bpe_unk_id(const tfm_bpe *m) { return m->unk_id; }

const char *tfm_bpe_piece(const tfm_bpe *m, int id, size_t *len) {
    if (id < 0 || id >= m->n) return NULL;
    if (len) *len = (size_t)m->len[id];
    return m->piece[id];
}

/* ---------------------------------------------------------------- files and containers */
int tfm_bpe_load(tfm_bpe *m, const char *path) {
    memset(m, 0, sizeof *m);
    FILE *fp = fopen(path, "rb");
    if (!fp) return tfm_set_error_kind(TFM_ERR_IO, "cannot open '%s': %s", path, strerror(errno)), -1;
    bpe_buf b = {0};
    unsigned char chunk[65536];
    size_t got;
    while ((got = fread(chunk, 1, sizeof chunk, fp)) > 0) {
        bpe_buf_put(&b, chunk, got);
        if (b.n > MAX_MODEL_BYTES) {
            fclose(fp);
            free(b.p);
            return tfm_set_error_kind(TFM_ERR_DATA, "%s: too large for a BPE model (more than 256 MiB)", path), -1;
        }
    }
    int err = ferror(fp);
    fclose(fp);
    if (err || b.oom) {
        free(b.p);
        return tfm_set_error_kind(b.oom ? TFM_ERR_NOMEM : TFM_ERR_IO, "cannot read '%s'%s", path,
                                  b.oom ? ": out of memory" : ": read error"), -1;
    }
    if (b.n == 0) {
        free(b.p);
        return tfm_set_error_kind(TFM_ERR_DATA, "%s: empty file (not a SentencePiece model)", path), -1;
    }
    int rc;
    if (b.n >= 4 && !memcmp(b.p, "TFMC", 4)) {   /* a tfm checkpoint holding a tokenizer */
        tfm_container c;
        rc = tfm_container_load(&c, path);
        if (!rc) rc = tfm_bpe_from_container(m, &c, NULL);
        tfm_container_free(&c);
    } else {
        rc = tfm_bpe_from_bytes(m, b.p, b.n, path);
    }
    free(b.p);
    return rc ? tfm_error_in_data() : 0;
}

static int write_proto(FILE *f, const void *ctx) {
    const tfm_bpe *m = ctx;
    return fwrite(m->proto, 1, m->proto_len, f) == m->proto_len;
}

int tfm_bpe_save(const tfm_bpe *m, const char *path) { return tfm_save_atomic(path, write_proto, m); }

int tfm_bpe_to_container(const tfm_bpe *m, tfm_container *c, const char *entry) {
    int shape[1] = {(int)m->proto_len};
    if (m->proto_len > (size_t)1 << 30) return tfm_set_error("BPE model too large for a container entry"), -1;
    return tfm_container_add(c, entry ? entry : TFM_BPE_ENTRY, TFM_DT_BYTES, 1, shape, m->proto, m->proto_len) ? 0 : -1;
}

int tfm_bpe_from_container(tfm_bpe *m, const tfm_container *c, const char *entry) {
    memset(m, 0, sizeof *m);
    const char *name = entry ? entry : TFM_BPE_ENTRY;
    const char *file = c->path ? c->path : "(container)";
    tfm_entry *e = tfm_container_get(c, name);
    if (!e) return tfm_set_error("%s: entry '%s' missing (no BPE tokenizer in this file)", file, name), -1;
    if (e->dtype != TFM_DT_BYTES) return tfm_set_error("%s: entry '%s' has wrong type (expected raw bytes)", file, name), -1;
    char label[600];
    snprintf(label, sizeof label, "%s: entry '%s'", file, name);
    return tfm_bpe_from_bytes(m, e->data, e->nbytes, label);
}
