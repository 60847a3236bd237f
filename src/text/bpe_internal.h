/* Internals shared by src/text/bpe*.c (not part of the public API). */
#ifndef TFM_BPE_INTERNAL_H
#define TFM_BPE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "tfm/bpe.h"

/* U+2581 LOWER ONE EIGHTH BLOCK, SentencePiece's whitespace marker. */
#define BPE_WS "\xe2\x96\x81"
#define BPE_WS_LEN 3

/* A growable byte buffer (for protobuf writing and text output). */
typedef struct {
    unsigned char *p;
    size_t n, cap;
    int oom;           /* set once an allocation failed; later appends are ignored */
} bpe_buf;
void bpe_buf_put(bpe_buf *b, const void *data, size_t n);

/* A model description to serialize (what the trainer produces). */
typedef struct {
    int n;
    const char *const *piece;
    const float *score;
    const unsigned char *type;
    int vocab_size, unk_id, bos_id, eos_id, pad_id, byte_fallback, max_piece_chars;
    float character_coverage;
    int add_dummy_prefix, remove_extra_whitespaces;
    int literal_ws_bytes;
} bpe_proto_spec;

/* NormalizerSpec field (in its extension range 200..max, ignored by SentencePiece) marking tfm's
 * models: a literal U+2581 in the input is encoded as its bytes so that decoding gives it back. */
#define BPE_FIELD_LITERAL_WS 2581
/* Serialize as a SentencePiece ModelProto (model_type BPE, normalizer "identity"). */
unsigned char *bpe_proto_write(const bpe_proto_spec *s, size_t *len);

/* Normalize text[0..len) with the model's settings (identity rule). Returns a malloc'd buffer of
 * *out_len bytes (NUL-terminated), or NULL when out of memory. With m->literal_ws_bytes and lit != NULL,
 * *lit receives the (increasing) offsets in the output of the '▁' characters that were literally in
 * the input (malloc'd, *n_lit of them). */
char *bpe_normalize(const tfm_bpe *m, const char *text, size_t len, size_t *out_len, size_t **lit, size_t *n_lit);

/* Lines of buf split at '\n' in place (a '\r' stays part of its line, as with spm_encode); each line must
 * be valid UTF-8 without NUL bytes, else NULL with an error naming name:LINE. (src/text/bpe_lines.c) */
char **bpe_split_lines(char *buf, size_t len, const char *name, int *n_lines);
/* Split a line on spaces in place into at most cap tokens (empty tokens skipped). */
int bpe_split_spaces(char *s, char **tok, int cap);

/* All of a file (at most max bytes) into a NUL-terminated malloc'd buffer; NULL with an error naming path. */
char *bpe_read_file(const char *path, size_t max, size_t *len);

/* ---------------------------------------------------------------- unigram models (src/text/unigram.c) */
/* One piece of a segmentation: bytes [off, off + len) of the normalized text, piece id. */
typedef struct {
    int off, len, id;
} bpe_span;
/* min/max scores and the piece trie of a unigram model (after the pieces are loaded). */
int bpe_unigram_init(tfm_bpe *m, const char *name);
/* The Viterbi segmentation of the normalized text s[0..size): a malloc'd array of *n_spans spans (NULL
 * when out of memory); unknown characters get m->unk_id, one span each. */
bpe_span *bpe_unigram_viterbi(const tfm_bpe *m, const char *s, int size, int *n_spans);
/* The longest charsmap rule matching a prefix of s[0..n): its length in bytes (0: none) and, in *repl,
 * the NUL-terminated replacement. */
size_t bpe_charsmap_match(const tfm_bpe *m, const char *s, size_t n, const char **repl);

/* FNV-1a of a byte string. */
uint64_t bpe_hash(const char *s, size_t n);

#endif
