/* tfm bpe: SentencePiece-compatible subword tokenizers (no dependency): BPE and unigram models.
 *
 * A model is a list of pieces (id = position) with a score and a type, plus the normalizer settings,
 * exactly SentencePiece's ModelProto. It is stored as that protobuf: `tfm bpe learn` writes a BPE .model
 * file that spm_encode reads, and tfm_bpe_load reads the .model files of `spm_train --model_type=bpe` and
 * `--model_type=unigram` (and the .spm files of MarianMT, ALBERT's 30k-clean.model...). Inside a tfm
 * checkpoint the same bytes are one raw-bytes entry (TFM_BPE_ENTRY). docs/FORMAT.md describes the fields.
 *
 * Text, as SentencePiece 0.1.97 (normalizer.cc): the normalization rule maps the text first: `identity`
 * keeps it, `nmt_nfkc` applies the model's precompiled charsmap (NFKC plus SentencePiece's NMT rules, read
 * from the file: a double-array trie of longest-match rewrites); any other rule (nfkc, nmt_nfkc_cf,
 * nfkc_cf, user-defined rules) is refused with a one-line error naming it. User-defined pieces are never
 * normalized. Then ' ' -> U+2581 ('▁'), one '▁' in front of a non-empty line (add_dummy_prefix) and, when
 * remove_extra_whitespaces is set, leading/trailing spaces dropped and runs of spaces collapsed
 * (SentencePiece's default; tfm's own models keep every space so that decode(encode(x)) == x).
 *
 * Segmentation: a BPE model merges the adjacent pair whose concatenation is the piece with the highest
 * score (leftmost first), like spm_encode; a unigram model takes the Viterbi path that maximises the sum of
 * the piece scores (SentencePiece's optimized encoder, with its float arithmetic and tie-breaking;
 * unknown characters score min_score - 10, user-defined pieces length * max_score - 0.1). A character that
 * is not a piece becomes its UTF-8 bytes <0xNN> when byte_fallback is on (always on for tfm's models),
 * else <unk> (a run of them one <unk>).
 *
 * Functions that can fail on user input return NULL / -1 and set a one-line tfm error naming the file.
 */
#ifndef TFM_BPE_H
#define TFM_BPE_H

#include <stddef.h>
#include <stdint.h>

#include "tfm/export.h"
#include "tfm/io.h"
#include "tfm/text.h"

/* The checkpoint entry (raw bytes: the serialized ModelProto) that tfm_bpe_to_container writes. */
#define TFM_BPE_ENTRY "tokenizer.bpe"

/* SentencePiece's piece types (ModelProto.SentencePiece.Type). */
typedef enum {
    TFM_PIECE_NORMAL = 1,
    TFM_PIECE_UNKNOWN = 2,
    TFM_PIECE_CONTROL = 3,
    TFM_PIECE_USER_DEFINED = 4,
    TFM_PIECE_UNUSED = 5,
    TFM_PIECE_BYTE = 6
} tfm_piece_type;

typedef struct {
    int n;                          /* number of pieces (the vocabulary size) */
    char **piece;                   /* id -> piece, NUL-terminated UTF-8 (one allocation) */
    int *len;                       /* id -> byte length of the piece */
    float *score;                   /* id -> score (higher merges first) */
    unsigned char *type;            /* id -> tfm_piece_type */
    int unk_id, bos_id, eos_id, pad_id;   /* ids of <unk> <s> </s> <pad>, -1 when absent */
    int byte_fallback;              /* unknown characters become <0xNN> pieces */
    int byte_id[256];               /* id of <0xNN>, -1 without byte fallback */
    int add_dummy_prefix, remove_extra_whitespaces, escape_whitespaces;   /* normalizer */
    int literal_ws_bytes;           /* tfm's models: a '▁' in the input is encoded as its 3 bytes, so
                                       decoding gives '▁' back (SentencePiece would give a space) */
    char *unk_surface;              /* what decode prints for <unk> (SentencePiece: " \u2047 ") */
    /* lookup tables (open addressing, -1 = empty): normal/user-defined/unused pieces (merge
     * candidates), and reserved ones (control, unknown, byte) */
    int *slots, *rslots, n_slots;
    int *user_ids, n_user;          /* user-defined pieces, matched greedily (longest) before merging */
    unsigned char *proto;           /* the serialized ModelProto: what save / to_container write */
    size_t proto_len;
    int model_type;                 /* TFM_SP_UNIGRAM or TFM_SP_BPE (SentencePiece's TrainerSpec.model_type) */
    /* nmt_nfkc: the precompiled charsmap (NULL for identity): Darts double-array units, and the
     * NUL-terminated replacement strings its leaf values point into */
    uint32_t *norm_trie;
    size_t norm_trie_n;
    char *norm_strings;
    size_t norm_strings_len;
    /* unigram: min/max score of the normal pieces, and a byte trie of the normal, user-defined and unused
     * pieces: node 0 = root, trie_value[node] = piece id or -1; the child of node v by byte c is
     * trie_child[k] where trie_keys[k] == v * 256 + c (open addressing, mask trie_mask, key 0 = empty) */
    float min_score, max_score;
    int *trie_value;
    uint64_t *trie_keys;
    int *trie_child;
    size_t trie_mask;
} tfm_bpe;

/* SentencePiece's model types (TrainerSpec.model_type). */
#define TFM_SP_UNIGRAM 1
#define TFM_SP_BPE 2

/* ---------------------------------------------------------------- learning */
typedef struct {
    int vocab_size;             /* pieces in total: 4 specials + 256 bytes + characters + merges */
    float character_coverage;   /* keep the most frequent characters covering this share (0.98..1) */
    int max_piece_chars;        /* longest piece, in characters (SentencePiece: 16) */
    int split_by_class;         /* 1: a piece never mixes letters, digits and punctuation/symbols */
} tfm_bpe_learn_opts;

/* vocab_size 8000, character_coverage 0.9995, max_piece_chars 16 (SentencePiece's defaults),
 * split_by_class 1. */
TFM_API void tfm_bpe_learn_opts_default(tfm_bpe_learn_opts *o);
/* Learn one model from lines of valid UTF-8 text (deterministic). The model has ids
 * 0 <pad>, 1 <s>, 2 </s>, 3 <unk> (tfm's TFM_PAD/BOS/EOS/UNK), 4..259 <0x00>..<0xFF>, then the merged
 * pieces in the order they were learned (score -rank), then the characters (most frequent first).
 * Identity normalization, add_dummy_prefix, every space kept. Errors: vocab_size below
 * 260 + the number of characters, or above what the text can yield, or above 1,000,000. */
TFM_API int tfm_bpe_learn_lines(tfm_bpe *m, const char *const *lines, int n_lines, const tfm_bpe_learn_opts *o);
/* The same over the lines of every file (read with tfm_read_text_file: errors name the file and
 * line; "\r\n" line ends count as "\n"). */
TFM_API int tfm_bpe_learn_files(tfm_bpe *m, const char *const *paths, int n_paths, const tfm_bpe_learn_opts *o);

/* ---------------------------------------------------------------- loading and saving */
/* A SentencePiece .model file (tfm's or spm_train's; BPE or unigram), or a tfm container holding
 * TFM_BPE_ENTRY. Refused with a one-line error naming the file and the field: truncated or foreign files,
 * word/char models, normalization rules other than identity and nmt_nfkc, a broken charsmap,
 * treat_whitespace_as_suffix, inconsistent pieces. */
TFM_API int tfm_bpe_load(tfm_bpe *m, const char *path);
/* Parse a serialized ModelProto (name is used in error messages). The bytes are copied. */
TFM_API int tfm_bpe_from_bytes(tfm_bpe *m, const void *data, size_t n, const char *name);
/* Write m->proto to path atomically (PATH.tmp.PID, fsync, rename). */
TFM_API int tfm_bpe_save(const tfm_bpe *m, const char *path);
/* Store / read the model as one raw-bytes entry of a tfm container (entry NULL = TFM_BPE_ENTRY). */
TFM_API int tfm_bpe_to_container(const tfm_bpe *m, tfm_container *c, const char *entry);
TFM_API int tfm_bpe_from_container(tfm_bpe *m, const tfm_container *c, const char *entry);
TFM_API void tfm_bpe_free(tfm_bpe *m);
/* For bindings, which never depend on the struct's layout (the Python package: python/tfm/bpe.py): a model on
 * the heap (tfm_bpe_new: empty, for tfm_bpe_load / tfm_bpe_learn_lines; NULL when out of memory), freed with what
 * it holds by tfm_bpe_delete (NULL-safe); its piece count (ids 0 .. n-1), special ids (-1: none) and the text of
 * piece id (NULL outside 0 .. n-1; *len its bytes when len is not NULL). */
TFM_API tfm_bpe *tfm_bpe_new(void);
TFM_API void tfm_bpe_delete(tfm_bpe *m);
TFM_API int tfm_bpe_size(const tfm_bpe *m);
TFM_API int tfm_bpe_pad_id(const tfm_bpe *m);
TFM_API int tfm_bpe_bos_id(const tfm_bpe *m);
TFM_API int tfm_bpe_eos_id(const tfm_bpe *m);
TFM_API int tfm_bpe_unk_id(const tfm_bpe *m);
TFM_API const char *tfm_bpe_piece(const tfm_bpe *m, int id, size_t *len);

/* The `tfm bpe encode|decode` filter on a whole text: every line of text (len bytes, split at '\n' in
 * place) encoded to pieces (or ids with ids = 1), or with decode = 1 pieces (ids) turned back into text,
 * one output line per input line. Every line is checked (UTF-8, no NUL, known pieces/ids) before
 * anything is returned, so an error leaves nothing half-written. Returns the malloc'd output (length in
 * *out_len), or NULL with an error naming name:LINE. */
TFM_API char *tfm_bpe_code_lines(const tfm_bpe *m, int decode, int ids, char *text, size_t len, const char *name,
                         size_t *out_len);

/* 1 if ids 0..3 are <pad> <s> </s> <unk> as in tfm's word vocabularies (TFM_PAD/BOS/EOS/UNK): true
 * for tfm's models and for spm_train --pad_id=0 --bos_id=1 --eos_id=2 --unk_id=3. */
TFM_API int tfm_bpe_has_tfm_specials(const tfm_bpe *m);

/* The model's pieces as a word vocabulary (id = piece id), for translators (train-mt --tokenizer bpe):
 * ids 0..3 get tfm's reserved names <pad> <bos> <eos> <unk>, so the model must have the tfm specials
 * (else an error telling how to train one). Errors also for a piece holding a newline or equal to a
 * reserved name at another id. (src/text/bpe_vocab.c) */
TFM_API int tfm_bpe_vocab(const tfm_bpe *m, tfm_vocab *v);

/* ---------------------------------------------------------------- encoding and decoding */
/* id of a piece string as SentencePiece's PieceToId: reserved pieces, then the others, else unk_id. */
TFM_API int tfm_bpe_piece_id(const tfm_bpe *m, const char *piece, size_t len);
/* Encode text[0..len) (valid UTF-8; checked) into a malloc'd array of *n_ids ids. An empty line
 * gives n_ids = 0 (and a non-NULL pointer). */
TFM_API int *tfm_bpe_encode(const tfm_bpe *m, const char *text, size_t len, int *n_ids);
/* BPE-dropout (Provilkov et al. 2020, "BPE-Dropout: Simple and Effective Subword Regularization"): the merges of
 * tfm_bpe_encode, each candidate merge skipped with probability p_drop when it comes up (as SentencePiece's
 * BPE sampling does: a skipped pair is dropped until a neighbouring merge forms it again), so the text is
 * segmented into smaller pieces at random; p_drop 0 is tfm_bpe_encode's segmentation, 1 the initial symbols
 * (characters, user-defined pieces, bytes of unknown characters). The draws come from a counter-based generator
 * keyed by `key` alone (tfm_bpe_dropout_key), so one key gives one segmentation on any thread. Decoding the ids
 * gives the text back as for tfm_bpe_encode. BPE models only (unigram: an error). Returns a malloc'd array of
 * *n_ids ids, or NULL with an error. */
TFM_API int *tfm_bpe_encode_dropout(const tfm_bpe *m, const char *text, size_t len, float p_drop, uint64_t key,
                                    int *n_ids);
/* The key of one sentence's draws: a hash of the run's seed, the epoch and the sentence's index. */
TFM_API uint64_t tfm_bpe_dropout_key(uint64_t seed, int epoch, long sentence);
/* A reusable encoder for encoding many lines: its buffers grow to the longest line seen and are kept, so a corpus
 * encoded again (BPE-dropout's segmentation of every epoch) allocates nothing once it has held the longest line
 * (BPE models; unigram models allocate their lattice per line). One per thread. */
typedef struct tfm_bpe_encoder tfm_bpe_encoder;
TFM_API tfm_bpe_encoder *tfm_bpe_encoder_new(void);   /* NULL with an error when out of memory */
TFM_API void tfm_bpe_encoder_free(tfm_bpe_encoder *e);   /* NULL-safe */
/* tfm_bpe_encode_dropout (p_drop 0: tfm_bpe_encode) with e's buffers: *n_ids ids owned by e, valid until its next
 * call, or NULL with an error. */
TFM_API const int *tfm_bpe_encoder_run(tfm_bpe_encoder *e, const tfm_bpe *m, const char *text, size_t len,
                                       float p_drop, uint64_t key, int *n_ids);
/* The pieces of the same encoding joined by single spaces, as spm_encode --output_format=piece prints
 * them (without byte fallback an unknown run is printed as its text). */
TFM_API char *tfm_bpe_encode_pieces(const tfm_bpe *m, const char *text, size_t len);
/* Decode ids (each in [0, n), else an error) / piece strings into text, as spm_decode: '▁' -> ' ',
 * the dummy-prefix space removed, runs of byte pieces turned back into UTF-8 (U+FFFD for an invalid
 * byte), control pieces dropped, <unk> printed as unk_surface, an unknown piece string kept as is. */
TFM_API char *tfm_bpe_decode(const tfm_bpe *m, const int *ids, int n_ids);
TFM_API char *tfm_bpe_decode_pieces(const tfm_bpe *m, const char *const *pieces, int n_pieces);

/* ---------------------------------------------------------------- running text (BPE language models) */
/* A whole text of several lines (valid UTF-8) as one id sequence: each line encoded as tfm_bpe_encode encodes
 * it (dummy prefix included), each '\n' as the byte piece <0x0A>. Needs byte fallback (tfm's models have it).
 * tfm_bpe_decode_text gives the text back exactly. NULL with a tfm error (invalid UTF-8, out of memory).
 * (src/text/bpe_text.c) */
TFM_API int *tfm_bpe_encode_text(const tfm_bpe *m, const char *text, size_t len, int *n_ids);
/* Decoding such ids one at a time, as a generator makes them: whole UTF-8 characters only (bytes of byte
 * pieces wait for the rest of their character; a sequence that cannot be UTF-8 becomes U+FFFD), the dummy-prefix
 * space dropped at the start of a line, control and unknown pieces as nothing. */
typedef struct {
    int line_start;             /* the next piece begins a line (its leading '\u2581' is the dummy prefix) */
    unsigned char pend[4];      /* bytes of an unfinished character */
    int n_pend;
} tfm_bpe_text_decoder;
/* line_start: 1 at the start of a text or after a newline (a prompt ending in '\n'), else 0. */
TFM_API void tfm_bpe_text_decoder_init(tfm_bpe_text_decoder *d, int line_start);
/* The bytes one id adds, written to out (room for tfm_bpe_text_max_bytes(m)); their count (0 for an id out of
 * range). tfm_bpe_text_flush: an unfinished character at the end as U+FFFD (at most 3 bytes). */
TFM_API int tfm_bpe_text_decode_id(const tfm_bpe *m, tfm_bpe_text_decoder *d, int id, char *out);
TFM_API int tfm_bpe_text_flush(tfm_bpe_text_decoder *d, char *out);
/* One raw byte through the same check (byte-level tokenizers, e.g. GPT-2's): at most 7 bytes written to out. */
TFM_API int tfm_bpe_text_put_byte(tfm_bpe_text_decoder *d, unsigned char b, char *out);
TFM_API size_t tfm_bpe_text_max_bytes(const tfm_bpe *m);
/* All of ids decoded (NUL-terminated, malloc'd; *out_len may be NULL). */
TFM_API char *tfm_bpe_decode_text(const tfm_bpe *m, const int *ids, int n_ids, size_t *out_len);

#endif
