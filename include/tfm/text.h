/* tfm text: UTF-8, file reading, tokenizers, vocabularies, parallel corpora, batching.
 *
 * Everything read from a file is untrusted. Functions that can fail on user input return NULL / -1
 * and set a one-line message with tfm_set_error() that names the file (and line) involved.
 * Every pointer returned by a function in this header is malloc'd and owned by the caller unless
 * it is documented as pointing into a struct (freed with that struct's _free function).
 */
#ifndef TFM_TEXT_H
#define TFM_TEXT_H

#include "tfm/export.h"

#include <stddef.h>
#include <stdint.h>

#include "tfm/core.h"

/* ---------------------------------------------------------------- UTF-8 */
/* 1 if s[0..n) is valid UTF-8 (no overlong forms, no surrogates, nothing above U+10FFFF), else 0. */
TFM_API int tfm_utf8_valid(const char *s, size_t n);
/* Byte offset of the first invalid sequence, or -1 if s[0..n) is valid. */
TFM_API long tfm_utf8_first_invalid(const char *s, size_t n);
/* Decode one code point from s (n bytes available). Returns its length 1..4 and sets *cp, or 0 if
 * the bytes at s are not a valid sequence. */
TFM_API int tfm_utf8_decode(const char *s, size_t n, uint32_t *cp);
/* Encode cp (<= U+10FFFF, not a surrogate) into out; returns 1..4, or 0 for an invalid code point. */
TFM_API int tfm_utf8_encode(uint32_t cp, char out[4]);
/* Python's str.isspace() for one code point (what str.split() splits on): \t \n \v \f \r,
 * U+001C..U+001F, space, U+0085, U+00A0, U+1680, U+2000..U+200A, U+2028, U+2029, U+202F, U+205F, U+3000. */
TFM_API int tfm_unicode_space(uint32_t cp);
/* Lowercase one code point with a fixed table (no locale): ASCII, Latin-1, Latin Extended-A, basic
 * Greek (no final-sigma rule) and Cyrillic. Other code points are returned unchanged.
 * U+0130 (I with dot above) maps to 'i' here; tfm_utf8_lower() writes "i\u0307" like Python. */
TFM_API uint32_t tfm_lower_cp(uint32_t cp);
/* Lowercased copy of valid UTF-8 text s[0..n) (NUL-terminated; *out_len may be NULL). */
TFM_API char *tfm_utf8_lower(const char *s, size_t n, size_t *out_len);

/* ---------------------------------------------------------------- files */
/* Read a whole text file into a NUL-terminated buffer. Errors (NULL + tfm_set_error, naming the file):
 * cannot open / read, empty file, NUL bytes ("looks binary", with the byte offset), invalid UTF-8
 * (with the line number), larger than 1 GiB. */
TFM_API char *tfm_read_text_file(const char *path, size_t *len);
/* Split buf (length len, as returned above) into lines IN PLACE: each '\n' becomes NUL and a '\r'
 * just before it is removed. A final newline does not start an extra empty line. Returns a malloc'd
 * array of *n_lines pointers into buf (NULL only if out of memory). */
TFM_API char **tfm_split_lines(char *buf, size_t len, int *n_lines);

/* ---------------------------------------------------------------- character tokenizer (GPT) */
/* Vocabulary = the sorted distinct Unicode code points of a corpus; id = rank. Serialized as the
 * UTF-8 string of its characters in id order (tfm_char_vocab.chars). */
typedef struct {
    int n;               /* vocabulary size */
    uint32_t *cps;       /* n sorted code points */
    char *chars;         /* the characters as one NUL-terminated UTF-8 string (NUL itself is never in a vocab) */
} tfm_char_vocab;

/* From valid UTF-8 text (must not contain NUL). Returns 0, or -1 with an error (empty/invalid text). */
TFM_API int tfm_char_vocab_build(tfm_char_vocab *v, const char *text, size_t len);
/* From a serialized string: must be valid UTF-8, non-empty, strictly increasing code points. */
TFM_API int tfm_char_vocab_from_string(tfm_char_vocab *v, const char *chars);
/* id of a code point, or -1 (binary search). */
TFM_API int tfm_char_vocab_id(const tfm_char_vocab *v, uint32_t cp);
/* Encode text into ids (*n_ids = number of code points). An invalid byte or a character outside the
 * vocabulary is an error naming it: "character 'é' (U+00E9) at offset 12 is not in the vocabulary". */
TFM_API int *tfm_char_encode(const tfm_char_vocab *v, const char *text, size_t len, int *n_ids);
/* Decode ids into a NUL-terminated UTF-8 string; an id outside [0, n) is an error. */
TFM_API char *tfm_char_decode(const tfm_char_vocab *v, const int *ids, int n_ids);
TFM_API void tfm_char_vocab_free(tfm_char_vocab *v);

/* ---------------------------------------------------------------- word tokenizers */
/* A tokenized sentence: n NUL-terminated tokens stored in one block. */
typedef struct {
    int n;
    char **tok;          /* n pointers into the same allocation */
} tfm_toklist;

typedef enum {
    TFM_TOK_D2L = 0,     /* d2l preprocess_nmt: NBSP -> space, lowercase, space before , . ! ?, split on spaces */
    TFM_TOK_MOSES,       /* Moses-like, keeps case (see tfm_tokenize_moses) */
    TFM_TOK_MOSES_LOWER, /* the same after lowercasing */
    TFM_TOK_SPACE,       /* split on whitespace only */
    TFM_TOK_BPE          /* raw text for a subword model (include/tfm/bpe.h): the whole line is one "token"
                            (none for an empty or all-space line); the model encodes it */
} tfm_tok_kind;
/* "d2l", "moses", "moses-lower", "space", "bpe" -> kind, or -1. */
TFM_API int tfm_tok_kind_parse(const char *name);
TFM_API const char *tfm_tok_kind_name(tfm_tok_kind k);

/* d2l's preprocess_nmt on one line: U+00A0 and U+202F become spaces, the text is lowercased
 * (tfm_utf8_lower), and a space is inserted before each of , . ! ? that follows a non-space. */
TFM_API char *tfm_preprocess_d2l(const char *s);
/* Split on ' ' (empty tokens dropped, unlike d2l's str.split(' ') which keeps them). */
TFM_API int tfm_tokenize_d2l(const char *line, tfm_toklist *out);
/* Split on whitespace (tfm_unicode_space). */
TFM_API int tfm_tokenize_space(const char *line, tfm_toklist *out);
/* Moses-like tokenizer that keeps case. Letters are ASCII letters and every non-ASCII code point
 * that is not listed as punctuation (so German/French accented letters are letters).
 *  - words are runs of letters/digits;
 *  - an apostrophe (' or U+2019) between two letters stays inside the word: "don't" -> "don't",
 *    "l'homme" -> "l'homme", "aujourd'hui" -> "aujourd'hui" (simple and loss-free to detokenize);
 *  - a hyphen between two letters/digits stays inside: "well-known", "T-shirt";
 *  - '.' or ',' between two digits stays inside: "3.14", "1,000";
 *  - every other punctuation character is its own token, except that a run of the same character
 *    ("...", "!!", "--") is one token. */
TFM_API int tfm_tokenize_moses(const char *line, tfm_toklist *out);
/* Tokenize with the given kind (MOSES_LOWER lowercases first). */
TFM_API int tfm_tokenize(tfm_tok_kind kind, const char *line, tfm_toklist *out);
/* Join tokens for output: one space between tokens, except none before closing punctuation
 * (. , ! ? ; : ) ] } % … » and runs of those), none after opening ones (( [ { ¿ ¡ «), and straight
 * double quotes alternate opening/closing. Returns a malloc'd string. */
TFM_API char *tfm_detokenize(const char *const *tokens, int n);
TFM_API void tfm_toklist_free(tfm_toklist *t);

/* ---------------------------------------------------------------- word vocabulary */
enum { TFM_PAD = 0, TFM_BOS = 1, TFM_EOS = 2, TFM_UNK = 3, TFM_N_RESERVED = 4 };

typedef struct {
    int n;               /* number of tokens, including the 4 reserved ones */
    char **tok;          /* id -> token (NUL-terminated, owned) */
    int *slots;          /* open-addressing hash table of ids, -1 = empty */
    int n_slots;         /* power of two */
} tfm_vocab;

/* Reserved tokens <pad> <bos> <eos> <unk> get ids 0..3; then every token seen at least min_freq
 * times, by descending frequency, ties in byte order (deterministic). Tokens equal to a reserved
 * token are not added twice. */
TFM_API int tfm_vocab_build(tfm_vocab *v, const tfm_toklist *lists, int n_lists, int min_freq);
/* id of tok, or TFM_UNK. */
TFM_API int tfm_vocab_id(const tfm_vocab *v, const char *tok);
/* id of tok, or -1. */
TFM_API int tfm_vocab_find(const tfm_vocab *v, const char *tok);
/* token of id, or NULL if out of range. */
TFM_API const char *tfm_vocab_token(const tfm_vocab *v, int id);
/* Tokens joined by '\n' (NUL-terminated). */
TFM_API char *tfm_vocab_serialize(const tfm_vocab *v);
/* Inverse of serialize. Validates (untrusted): the 4 reserved tokens first, no empty or duplicate
 * tokens, valid UTF-8. */
TFM_API int tfm_vocab_deserialize(tfm_vocab *v, const char *s);
TFM_API void tfm_vocab_free(tfm_vocab *v);

/* ---------------------------------------------------------------- parallel corpora */
typedef struct {
    int n;               /* number of kept pairs */
    tfm_toklist *src, *tgt;
    int n_lines;         /* lines read (up to the limit) */
    int n_empty;         /* lines skipped because one side (or both) had no tokens */
} tfm_parallel_text;

/* TSV: one "source<TAB>target" pair a line (columns after the second are ignored). Errors: a
 * non-empty line without a tab ("FILE:LINE: no tab ..."), invalid UTF-8 ("FILE:LINE: invalid
 * UTF-8"), plus tfm_read_text_file's. max_pairs > 0 keeps only the first max_pairs pairs. */
TFM_API int tfm_parallel_load_tsv(tfm_parallel_text *p, const char *path, tfm_tok_kind kind, int max_pairs);
/* Two aligned files (line i of src translates line i of tgt). Different line counts are an error
 * naming both files and both counts. */
TFM_API int tfm_parallel_load_files(tfm_parallel_text *p, const char *src_path, const char *tgt_path,
                            tfm_tok_kind kind, int max_pairs);
TFM_API void tfm_parallel_text_free(tfm_parallel_text *p);

/* Token ids of a parallel corpus: sentence i of the source is src_ids[src_off[i] .. src_off[i+1]). */
typedef struct {
    int n;
    int *src_off, *tgt_off;   /* n + 1 offsets */
    int *src_ids, *tgt_ids;
} tfm_parallel_ids;
TFM_API int tfm_parallel_encode(const tfm_parallel_text *p, const tfm_vocab *src_vocab, const tfm_vocab *tgt_vocab,
                        tfm_parallel_ids *out);
TFM_API void tfm_parallel_ids_free(tfm_parallel_ids *ids);

/* ---------------------------------------------------------------- batching */
/* d2l's build_array_nmt for one sentence: ids + <eos>, then truncated or padded with <pad> to
 * num_steps (so a sentence of >= num_steps tokens loses its <eos>). Writes num_steps ids to out and
 * returns the valid length (non-pad count). *truncated (may be NULL) = 1 if tokens were cut. */
TFM_API int tfm_truncate_pad(const int *ids, int n_ids, int num_steps, int *out, int *truncated);

/* A whole corpus as fixed-size arrays (row i = pair i). */
typedef struct {
    int n, num_steps;
    int *src, *tgt;               /* n x num_steps */
    int *src_valid, *tgt_valid;   /* n */
    int n_truncated_src, n_truncated_tgt;
} tfm_mt_corpus;
TFM_API int tfm_mt_corpus_build(const tfm_parallel_ids *ids, int num_steps, tfm_mt_corpus *out);
TFM_API void tfm_mt_corpus_free(tfm_mt_corpus *a);

/* A list of batches of example indices: batch b is idx[off[b] .. off[b+1]). */
typedef struct {
    int n_batches;
    int *idx;             /* a permutation of 0..n-1 */
    int *off;             /* n_batches + 1 */
} tfm_batches;
/* Cut n examples into batches of batch_size (the last may be smaller).
 *  - rng != NULL: the example order is shuffled first and the order of batches is shuffled at the end;
 *  - bucket > 0: within consecutive chunks of bucket * batch_size examples, indices are sorted by
 *    lengths[i] (stable), so batches hold sentences of similar length (lengths may be NULL if bucket == 0).
 * rng == NULL and bucket == 0 gives 0..n-1 in order. */
TFM_API int tfm_batches_make(tfm_batches *b, int n, int batch_size, const int *lengths, int bucket, tfm_rng *rng);
TFM_API void tfm_batches_free(tfm_batches *b);

#endif
