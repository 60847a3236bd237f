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
} bpe_proto_spec;
/* Serialize as a SentencePiece ModelProto (model_type BPE, normalizer "identity"). */
unsigned char *bpe_proto_write(const bpe_proto_spec *s, size_t *len);

/* Normalize text[0..len) with the model's settings (identity rule). Returns a malloc'd buffer of
 * *out_len bytes (NUL-terminated), or NULL when out of memory. */
char *bpe_normalize(const tfm_bpe *m, const char *text, size_t len, size_t *out_len);

/* FNV-1a of a byte string. */
uint64_t bpe_hash(const char *s, size_t n);

#endif
