/* Fuzz targets: every loader of untrusted input, one function per target, all sharing the contract
 * "return normally, never crash, hang or leak" (a refusal is a tfm error, which is fine).
 *
 *   container    tfm_container_load_mem (the tfm file format, docs/FORMAT.md)
 *   gpt          container + tfm_gpt_get (model, vocabulary, optimizer, train state) + a forward pass
 *   transformer  container + tfm_mt_model_get + tfm_mt_progress_get + a teacher-forced forward
 *   rnn, bahdanau  the same (the targets differ only in their seed corpus)
 *   vocab        tfm_vocab_deserialize, tfm_char_vocab_from_string
 *   text         UTF-8 checks, lowercasing, every tokenizer kind, tfm_read_text_file + split_lines
 *   tsv          tfm_parallel_load_tsv (input = the file)
 *   parallel     tfm_parallel_load_files (input split at its first NUL byte into source and target)
 *   lmdata       tfm_lm_data_load (the character corpus of train-lm)
 *   bpe          tfm_bpe_from_bytes (SentencePiece ModelProto) + encode/decode   [if tfm/bpe.h exists]
 *   safetensors  tfm_st_load + reading every tensor                             [if tfm/safetensors.h exists]
 *   unigram      the same as bpe, seeded with unigram models (Viterbi, the nmt_nfkc charsmap trie) and
 *                mapped to a vocab.json of its own pieces (tfm_bpe_map_to_vocab)
 *   gpt2bpe      tfm_gpt2_bpe_load_files (input split at its first NUL: encoder.json, then vocab.bpe) +
 *                encode/decode; and tfm_token_map_parse of the first part
 *   hfconfig     tfm_hf_config_parse (a Hugging Face config.json: GPT-2, MarianMT) and, when accepted, the
 *                parameter count of the tfm model it describes
 *
 * Adding a target (e.g. the BPE model loader or the safetensors reader): a case in tfm_fuzz_run,
 * its name in FUZZ_TARGETS in the Makefile, and (optionally) seeds in fuzz/make_seeds.c.
 * Files are handed to path-based loaders through a memfd (/proc/self/fd/N): no disk I/O.
 * tfm_fuzz_run returns 1 if the input was accepted, 0 if a loader refused it (tfm_last_error() says why).
 * tests/unit/test_fuzz_repro.c includes this file to replay tests/fixtures/fuzz/. */
#include "tfm/checkpoint.h"
#include "tfm/core.h"
#include "tfm/io.h"
#include "tfm/lm.h"
#include "tfm/seq2seq.h"
#include "tfm/text.h"

#include "tfm/bpe.h"
#include "tfm/safetensors.h"
#include "tfm/tokenizers.h"
#include "tfm/interchange.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* a path naming an in-memory file holding d[0..n); close(*fd) when done (-1 on failure) */
static int mem_path(const uint8_t *d, size_t n, char *path, size_t pathn) {
    int fd = memfd_create("tfm_fuzz", 0);
    if (fd < 0) return -1;
    size_t off = 0;
    while (off < n) {
        ssize_t w = write(fd, d + off, n - off);
        if (w <= 0) { close(fd); return -1; }
        off += (size_t)w;
    }
    snprintf(path, pathn, "/proc/self/fd/%d", fd);
    return fd;
}

static char *cstr(const uint8_t *d, size_t n) {
    char *s = malloc(n + 1);
    if (!s) return NULL;
    memcpy(s, d, n);
    s[n] = 0;
    return s;
}

/* accepted = the full load (model, vocabulary, optimizer, train state) succeeded; a file refused for
 * its training state is also tried weights-only (what generate accepts), keeping the first error */
static int fuzz_gpt(const tfm_container *c) {
    tfm_gpt m;
    tfm_char_vocab v;
    tfm_adamw opt;
    tfm_lm_train_state st;
    tfm_bpe *bpe = NULL;   /* a BPE language model (tokenizer.kind "bpe") */
    int full = tfm_gpt_get_tok(&m, &v, &bpe, &opt, &st, c, "fuzz.tfm") == 0;
    if (full) {
        tfm_adamw_free(&opt);
    } else {
        char err[512];
        snprintf(err, sizeof err, "%s", tfm_last_error());
        int weights = tfm_gpt_get_tok(&m, &v, &bpe, NULL, NULL, c, "fuzz.tfm") == 0;
        tfm_set_error("%s", err);
        if (!weights) return 0;
    }
    int T = m.cfg.block_size < 3 ? m.cfg.block_size : 3;
    int nv = m.cfg.vocab_size;
    int idx[3] = {0, (nv - 1) % nv, 0};
    if (bpe) {   /* every id through the running-text decoder, as a generator would stream them */
        char *text = tfm_bpe_decode_text(bpe, idx, 3, NULL);
        free(text);
        tfm_bpe_free(bpe), free(bpe);
    }
    tfm_graph g;
    tfm_graph_init(&g, 1);
    tfm_tensor *logits = tfm_gpt_forward(&g, &m, idx, 1, T);
    (void)logits;
    if (tfm_params_n_q8(&m.params)) {   /* an int8 model: inference runs the int8 GEMM */
        g.grad_enabled = 0;
        tfm_graph_reset(&g);
        (void)tfm_gpt_forward(&g, &m, idx, 1, T);
    }
    tfm_graph_free(&g);
    tfm_char_vocab_free(&v);
    tfm_gpt_free(&m);
    return full;
}

static int fuzz_translator(const tfm_container *c) {
    tfm_mt_model t;
    if (tfm_mt_model_get(&t, c, "fuzz.tfm") != 0) return 0;
    tfm_mt_progress p;
    int ok = tfm_mt_progress_get(c, &p) == 0;
    int T = 2;
    if (!strcmp(t.model->cfg.arch, "transformer") && t.model->cfg.max_len < T) T = t.model->cfg.max_len;
    int src[2] = {TFM_N_RESERVED % t.model->cfg.src_vocab, TFM_EOS}, valid[1] = {T};
    int tgt_in[2] = {TFM_BOS, TFM_N_RESERVED % t.model->cfg.tgt_vocab};
    tfm_graph g;
    tfm_graph_init(&g, 1);
    (void)tfm_mt_net_forward(t.model, &g, src, valid, 1, T, tgt_in, T);
    if (tfm_params_n_q8(&t.model->params)) {   /* an int8 model: inference runs the int8 GEMM */
        g.grad_enabled = 0;
        tfm_graph_reset(&g);
        (void)tfm_mt_net_forward(t.model, &g, src, valid, 1, T, tgt_in, T);
    }
    tfm_graph_free(&g);
    tfm_mt_model_free(&t);
    return ok;
}

/* The inference loaders read a file's weights on demand (tfm_container_load_deferred, tfm_container_read):
 * the same input as a file through them (their verdict is the in-memory path's; this one must not crash). */
static void fuzz_deferred_load(const char *target, const uint8_t *d, size_t n) {
    char path[64];
    int fd = mem_path(d, n, path, sizeof path);
    if (fd < 0) return;
    if (!strcmp(target, "gpt")) {
        tfm_gpt m;
        tfm_char_vocab v;
        tfm_bpe *bpe = NULL;
        if (tfm_gpt_model_load(&m, &v, &bpe, path) == 0) {
            if (bpe) tfm_bpe_free(bpe), free(bpe);
            tfm_char_vocab_free(&v);
            tfm_gpt_free(&m);
        }
    } else {
        tfm_mt_model t;
        if (tfm_mt_model_load(&t, path) == 0) tfm_mt_model_free(&t);
    }
    close(fd);
}

static void fuzz_text(const uint8_t *d, size_t n) {
    const char *s = (const char *)d;
    (void)tfm_utf8_first_invalid(s, n);
    if (!tfm_utf8_valid(s, n) || memchr(d, 0, n)) return;
    char *z = cstr(d, n);
    if (!z) return;
    size_t ln;
    char *low = tfm_utf8_lower(z, n, &ln);
    free(low);
    for (int k = 0; k < 4; k++) {
        tfm_toklist tl;
        memset(&tl, 0, sizeof tl);
        if (tfm_tokenize((tfm_tok_kind)k, z, &tl) == 0) {
            char *back = tfm_detokenize((const char *const *)tl.tok, tl.n);
            free(back);
            tfm_toklist_free(&tl);
        }
    }
    tfm_char_vocab v;
    if (tfm_char_vocab_build(&v, z, n) == 0) {
        int n_ids = 0;
        int *ids = tfm_char_encode(&v, z, n, &n_ids);
        if (ids) {
            char *back = tfm_char_decode(&v, ids, n_ids);
            free(back);
            free(ids);
        }
        tfm_char_vocab_free(&v);
    }
    free(z);
}

static int fuzz_file(const char *target, const uint8_t *d, size_t n) {
    char path[64], path2[64];
    int ok = 0;
    if (!strcmp(target, "parallel")) {
        const uint8_t *cut = memchr(d, 0, n);
        size_t n1 = cut ? (size_t)(cut - d) : n;
        int fd1 = mem_path(d, n1, path, sizeof path);
        int fd2 = mem_path(cut ? cut + 1 : d + n, cut ? n - n1 - 1 : 0, path2, sizeof path2);
        if (fd1 >= 0 && fd2 >= 0) {
            tfm_parallel_text p;
            if (tfm_parallel_load_files(&p, path, path2, TFM_TOK_MOSES, 0) == 0) tfm_parallel_text_free(&p), ok = 1;
        }
        if (fd1 >= 0) close(fd1);
        if (fd2 >= 0) close(fd2);
        return ok;
    }
    int fd = mem_path(d, n, path, sizeof path);
    if (fd < 0) return 0;
    if (!strcmp(target, "tsv")) {
        tfm_parallel_text p;
        if (tfm_parallel_load_tsv(&p, path, TFM_TOK_D2L, 0) == 0) tfm_parallel_text_free(&p), ok = 1;
    } else if (!strcmp(target, "lmdata")) {
        tfm_lm_data ld;
        if (tfm_lm_data_load(&ld, path, NULL, 0.9f, 4) == 0) tfm_lm_data_free(&ld), ok = 1;
    } else if (!strcmp(target, "text")) {
        size_t len;
        char *buf = tfm_read_text_file(path, &len);
        if (buf) {
            int nl;
            char **lines = tfm_split_lines(buf, len, &nl);
            free(lines);
            free(buf);
            ok = 1;
        }
    }
    close(fd);
    return ok;
}

static int fuzz_bpe(const uint8_t *d, size_t n) {
    tfm_bpe m;
    memset(&m, 0, sizeof m);
    if (tfm_bpe_from_bytes(&m, d, n, "fuzz.model") != 0) {
        tfm_bpe_free(&m);
        return 0;
    }
    static const char text[] = "Hello wor\xc3\xb6ld  \xe2\x96\x81x";
    int n_ids = 0;
    int *ids = tfm_bpe_encode(&m, text, sizeof text - 1, &n_ids);
    if (ids) {
        char *back = tfm_bpe_decode(&m, ids, n_ids);
        free(back);
        free(ids);
    }
    tfm_bpe_free(&m);
    return 1;
}

/* the unigram target: encode text that reaches the charsmap rules and every character class */
static int fuzz_unigram(const uint8_t *d, size_t n) {
    tfm_bpe m;
    memset(&m, 0, sizeof m);
    if (tfm_bpe_from_bytes(&m, d, n, "fuzz.model") != 0) {
        tfm_bpe_free(&m);
        return 0;
    }
    static const char text[] = "  A dog \xef\xbc\xa1 \xef\xac\x81ne \xe2\x91\xa0 00 x\xe3\x80\x80y <sep> \xc3\x85 caf\xc3\xa9\t\xf0\x9f\x98\x80  ";
    char *pieces = tfm_bpe_encode_pieces(&m, text, sizeof text - 1);
    free(pieces);
    int n_ids = 0;
    int *ids = tfm_bpe_encode(&m, text, sizeof text - 1, &n_ids);
    if (ids) free(tfm_bpe_decode(&m, ids, n_ids));
    free(ids);
    /* a vocab.json of its own pieces, reversed ids */
    tfm_token_map v;
    memset(&v, 0, sizeof v);
    char *json = malloc(16 + (size_t)m.n * 32 + (m.n ? (size_t)(m.piece[m.n - 1] - m.piece[0]) + (size_t)m.len[m.n - 1] : 0) * 6);
    if (json) {
        size_t k = 0;
        json[k++] = '{';
        for (int i = 0; i < m.n; i++) {
            k += (size_t)sprintf(json + k, "%s\"", i ? "," : "");
            for (const char *c = m.piece[i]; *c; c++) k += (size_t)sprintf(json + k, *c == '"' || *c == '\\' ? "\\%c" : (unsigned char)*c < 0x20 ? "\\u%04x" : "%c", *c);
            k += (size_t)sprintf(json + k, "\": %d", m.n - 1 - i);
        }
        json[k++] = '}';
        if (tfm_token_map_parse(&v, json, k, "fuzz.json") == 0) {
            free(tfm_bpe_map_to_vocab(&m, &v, 0, "fuzz.model", "fuzz.json"));
            tfm_token_map_free(&v);
        }
        free(json);
    }
    tfm_bpe_free(&m);
    return 1;
}

static int fuzz_gpt2bpe(const uint8_t *d, size_t n) {
    const uint8_t *nul = memchr(d, 0, n);
    size_t n1 = nul ? (size_t)(nul - d) : n;
    tfm_token_map map;
    if (tfm_token_map_parse(&map, (const char *)d, n1, "fuzz.json") == 0) tfm_token_map_free(&map);
    char p1[64], p2[64];
    int fd1 = mem_path(d, n1, p1, sizeof p1);
    int fd2 = mem_path(nul ? nul + 1 : d + n, nul ? n - n1 - 1 : 0, p2, sizeof p2);
    tfm_gpt2_bpe *t = fd1 >= 0 && fd2 >= 0 ? tfm_gpt2_bpe_load_files(p1, p2) : NULL;
    if (fd1 >= 0) close(fd1);
    if (fd2 >= 0) close(fd2);
    if (!t) return 0;
    static const char text[] = "Hello world, it's  the\t\ttest 1234 \xf0\x9f\x98\x80 caf\xc3\xa9\n\n  'll x";
    for (int round = 0; round < 2; round++) {   /* the second time from the cache */
        int n_ids = 0;
        int *ids = tfm_gpt2_bpe_encode(t, text, sizeof text - 1, &n_ids);
        size_t len;
        if (ids) free(tfm_gpt2_bpe_decode_text(t, ids, n_ids, &len));
        free(ids);
    }
    int some[] = {0, 1, 255, 256, tfm_gpt2_bpe_n_vocab(t) - 1};
    size_t len;
    free(tfm_gpt2_bpe_decode_text(t, some, 5, &len));
    tfm_gpt2_bpe_free(t);
    return 1;
}

static int fuzz_safetensors(const uint8_t *d, size_t n) {
    char path[64];
    int fd = mem_path(d, n, path, sizeof path);
    if (fd < 0) return 0;
    tfm_st_file f;
    memset(&f, 0, sizeof f);
    int ok = tfm_st_load(&f, path) == 0;
    for (int i = 0; ok && i < f.n; i++) {
        size_t k = tfm_st_numel(&f.t[i]);
        float *buf = malloc((k ? k : 1) * sizeof(float));
        if (buf) tfm_st_read_f32(&f.t[i], buf);
        free(buf);
    }
    tfm_st_free(&f);
    close(fd);
    return ok;
}

static int fuzz_hfconfig(const uint8_t *d, size_t n) {
    tfm_hf_config c;
    if (tfm_hf_config_parse(&c, (const char *)d, n, "config.json")) return 0;
    if (c.kind == TFM_HF_GPT2) {   /* what the import builds from it: the checks must hold */
        tfm_gpt_config g = {c.vocab_size, c.max_positions, c.n_layer, c.n_head, c.d_model, c.dropout, TFM_ATTN_CAUSAL, 0.0f};
        if (tfm_gpt_config_check(&g) == 0) (void)tfm_gpt_n_params(&g);
    }
    return 1;
}

int tfm_fuzz_run(const char *target, const uint8_t *d, size_t n) {
    int accepted = 0;
    tfm_set_threads(1);   /* one thread: deterministic replays, and no OpenMP pool in the fuzzer */
    if (!strcmp(target, "container") || !strcmp(target, "gpt") || !strcmp(target, "transformer") ||
        !strcmp(target, "rnn") || !strcmp(target, "bahdanau")) {
        tfm_container c;
        if (tfm_container_load_mem(&c, d, n, "fuzz.tfm") == 0) {
            if (!strcmp(target, "gpt")) accepted = fuzz_gpt(&c);
            else if (strcmp(target, "container")) accepted = fuzz_translator(&c);
            else accepted = 1;
        }
        tfm_container_free(&c);
        if (strcmp(target, "container")) fuzz_deferred_load(target, d, n);
    } else if (!strcmp(target, "vocab")) {
        char *s = cstr(d, n);
        if (!s) return 0;
        tfm_vocab v;
        if (tfm_vocab_deserialize(&v, s) == 0) tfm_vocab_free(&v), accepted = 1;
        tfm_char_vocab cv;
        if (tfm_char_vocab_from_string(&cv, s) == 0) tfm_char_vocab_free(&cv), accepted = 1;
        free(s);
    } else if (!strcmp(target, "text")) {
        fuzz_text(d, n);
        accepted = fuzz_file(target, d, n);
    } else if (!strcmp(target, "tsv") || !strcmp(target, "parallel") || !strcmp(target, "lmdata")) {
        accepted = fuzz_file(target, d, n);
    } else if (!strcmp(target, "bpe")) {
        accepted = fuzz_bpe(d, n);
    } else if (!strcmp(target, "safetensors")) {
        accepted = fuzz_safetensors(d, n);
    } else if (!strcmp(target, "unigram")) {
        accepted = fuzz_unigram(d, n);
    } else if (!strcmp(target, "gpt2bpe")) {
        accepted = fuzz_gpt2bpe(d, n);
    } else if (!strcmp(target, "hfconfig")) {
        accepted = fuzz_hfconfig(d, n);
    } else {
        fprintf(stderr, "tfm_fuzz_run: unknown target '%s'\n", target);
        abort();
    }
    return accepted;
}
