/* tfm_tokenizer: a SentencePiece model (with or without a vocab.json giving the ids) or a GPT-2 byte-level
 * BPE behind one handle, and the `tfm bpe encode|decode` line filter over it (include/tfm/tokenizers.h).
 * Also tfm_bpe_map_to_vocab. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/bpe_internal.h"
#include "tfm/core.h"
#include "tfm/tokenizers.h"

struct tfm_tokenizer {
    tfm_gpt2_bpe *gpt2;
    tfm_bpe sp;             /* when gpt2 is NULL */
    tfm_token_map vocab;    /* vocab.json (n = 0 without) */
    int *to_vocab;          /* piece id -> vocab id */
};

int *tfm_bpe_map_to_vocab(const tfm_bpe *m, const tfm_token_map *vocab, int missing_to_unk, const char *model_name,
                          const char *vocab_name) {
    int unk = tfm_token_map_id(vocab, "<unk>", 5);
    if (missing_to_unk && unk < 0) return tfm_set_error("%s: no \"<unk>\" token to map missing pieces to", vocab_name), NULL;
    int *ids = malloc((size_t)(m->n ? m->n : 1) * sizeof *ids);
    if (!ids) return tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory"), NULL;
    for (int k = 0; k < m->n; k++) {
        ids[k] = tfm_token_map_id(vocab, m->piece[k], (size_t)m->len[k]);
        int type = m->type[k];
        int needed = type == TFM_PIECE_NORMAL || type == TFM_PIECE_USER_DEFINED || type == TFM_PIECE_UNKNOWN ||
                     (type == TFM_PIECE_BYTE && m->byte_fallback);
        if (ids[k] >= 0 || !needed) continue;
        if (missing_to_unk) {
            ids[k] = unk;
            continue;
        }
        tfm_set_error_kind(TFM_ERR_DATA, "%s: piece '%s' (id %d of %s) is missing", vocab_name, m->piece[k], k, model_name);
        free(ids);
        return NULL;
    }
    return ids;
}

tfm_tokenizer *tfm_tokenizer_load(const char *model, const char *vocab_json) {
    tfm_tokenizer *t = calloc(1, sizeof *t);
    if (!t) return tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory"), NULL;
    int rc;
    if (tfm_gpt2_bpe_path(model)) {
        if (vocab_json) {
            free(t);
            return tfm_set_error("%s: a GPT-2 tokenizer has its ids already (a vocab.json goes with SentencePiece models)", model), NULL;
        }
        rc = (t->gpt2 = tfm_gpt2_bpe_load(model)) ? 0 : -1;
    } else {
        rc = tfm_bpe_load(&t->sp, model);
        if (!rc && vocab_json) rc = tfm_token_map_load(&t->vocab, vocab_json);
        if (!rc && vocab_json) rc = (t->to_vocab = tfm_bpe_map_to_vocab(&t->sp, &t->vocab, 0, model, vocab_json)) ? 0 : -1;
    }
    if (rc) {
        tfm_tokenizer_free(t);
        return NULL;
    }
    return t;
}

void tfm_tokenizer_free(tfm_tokenizer *t) {
    if (!t) return;
    tfm_gpt2_bpe_free(t->gpt2);
    if (!t->gpt2) tfm_bpe_free(&t->sp);
    tfm_token_map_free(&t->vocab);
    free(t->to_vocab);
    free(t);
}

int tfm_tokenizer_is_gpt2(const tfm_tokenizer *t) { return t->gpt2 != NULL; }

/* ---------------------------------------------------------------- lines */
static void put_ids(FILE *out, const int *v, int n) {
    for (int i = 0; i < n; i++) fprintf(out, i ? " %d" : "%d", v[i]);
}

static void put_tokens(FILE *out, const tfm_gpt2_bpe *g, const int *v, int n) {
    for (int i = 0; i < n; i++) fprintf(out, i ? " %s" : "%s", tfm_gpt2_bpe_token(g, v[i]));
}

/* The ids (or token strings) of one line, split at spaces (or any whitespace: whole). *v malloc'd. */
static int read_ids(const tfm_tokenizer *t, int ids, char *line, int **v, int *n, const char *name, int lineno) {
    size_t len = strlen(line);
    for (size_t i = 0; i < len; i++)
        if (line[i] == '\n' || line[i] == '\t' || line[i] == '\r') line[i] = ' ';
    char **tok = malloc((len / 2 + 2) * sizeof *tok);
    *v = malloc((len / 2 + 2) * sizeof **v);
    if (!tok || !*v) {
        free(tok);
        return tfm_set_error_kind(TFM_ERR_NOMEM, "%s: out of memory", name), -1;
    }
    *n = bpe_split_spaces(line, tok, (int)(len / 2 + 2));
    int rc = 0;
    for (int i = 0; i < *n && !rc; i++) {
        if (!ids) {
            (*v)[i] = t->gpt2 ? tfm_gpt2_bpe_id(t->gpt2, tok[i]) : -1;
            if ((*v)[i] < 0) rc = (tfm_set_error("%s:%d: '%s' is not a token", name, lineno, tok[i]), -1);
            continue;
        }
        char *end;
        errno = 0;
        long x = strtol(tok[i], &end, 10);
        if (errno || *end || end == tok[i] || x < INT_MIN || x > INT_MAX)
            rc = (tfm_set_error("%s:%d: '%s' is not an id", name, lineno, tok[i]), -1);
        else (*v)[i] = (int)x;
    }
    free(tok);
    return rc;
}

static int gpt2_encode(tfm_tokenizer *t, int ids, const char *text, size_t len, FILE *out) {
    int n, *v = tfm_gpt2_bpe_encode(t->gpt2, text, len, &n);
    if (!v) return -1;
    if (ids) put_ids(out, v, n);
    else put_tokens(out, t->gpt2, v, n);
    fputc('\n', out);
    free(v);
    return 0;
}

/* One line of ids (or tokens) back to text; newline_after adds '\n'. */
static int ids_decode(tfm_tokenizer *t, int ids, char *line, FILE *out, const char *name, int lineno, int newline_after) {
    int n, *v, rc = read_ids(t, ids, line, &v, &n, name, lineno);
    char *s = NULL;
    size_t slen = 0;
    if (!rc && t->gpt2) {
        if (!(s = tfm_gpt2_bpe_decode_text(t->gpt2, v, n, &slen))) rc = tfm_prefix_error("%s:%d: ", name, lineno);
    } else if (!rc) {   /* vocab.json ids -> pieces -> text */
        const char **p = malloc((size_t)(n > 0 ? n : 1) * sizeof *p);
        if (!p) rc = (tfm_set_error_kind(TFM_ERR_NOMEM, "%s: out of memory", name), -1);
        for (int i = 0; !rc && i < n; i++)
            if (!(p[i] = tfm_token_map_token(&t->vocab, v[i])))
                rc = (tfm_set_error("%s:%d: id %d is not in the vocabulary (ids 0..%d)", name, lineno, v[i], t->vocab.n - 1), -1);
        if (!rc && !(s = tfm_bpe_decode_pieces(&t->sp, p, n))) rc = tfm_prefix_error("%s:%d: ", name, lineno);
        if (s) slen = strlen(s);
        free(p);
    }
    if (s) fwrite(s, 1, slen, out);
    if (s && newline_after) fputc('\n', out);
    free(s);
    free(v);
    return rc;
}

static int vocab_encode(tfm_tokenizer *t, const char *line, FILE *out) {
    int n, *v = tfm_bpe_encode(&t->sp, line, strlen(line), &n);
    if (!v) return -1;
    for (int i = 0; i < n; i++) v[i] = t->to_vocab[v[i]];
    put_ids(out, v, n);
    fputc('\n', out);
    free(v);
    return 0;
}

char *tfm_tokenizer_code_lines(tfm_tokenizer *t, int decode, int ids, int whole, char *text, size_t len,
                               const char *name, size_t *out_len) {
    if (!t->gpt2 && whole) return tfm_set_error("whole-text mode is for GPT-2 tokenizers (SentencePiece works by line)"), NULL;
    if (!t->gpt2 && (!t->to_vocab || !ids)) return tfm_bpe_code_lines(&t->sp, decode, ids, text, len, name, out_len);
    char *res = NULL;
    size_t res_len = 0;
    FILE *out = open_memstream(&res, &res_len);
    if (!out) return tfm_set_error_kind(TFM_ERR_NOMEM, "%s: out of memory", name), NULL;
    int rc = 0;
    if (whole && !decode) {
        rc = gpt2_encode(t, ids, text, len, out);
        if (rc) tfm_prefix_error("%s: ", name);
    } else if (whole) {
        char *copy = memchr(text, 0, len) ? NULL : malloc(len + 1);
        if (copy) {
            memcpy(copy, text, len);
            copy[len] = 0;
            rc = ids_decode(t, ids, copy, out, name, 1, 0);
        } else {
            rc = memchr(text, 0, len) ? (tfm_set_error("%s: NUL byte", name), -1) : (tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory"), -1);
        }
        free(copy);
    } else {
        int n_lines = 0;
        char **lines = bpe_split_lines(text, len, name, &n_lines);
        rc = lines ? 0 : -1;
        for (int i = 0; !rc && i < n_lines; i++) {
            if (decode) rc = ids_decode(t, ids, lines[i], out, name, i + 1, 1);
            else if (t->gpt2) rc = gpt2_encode(t, ids, lines[i], strlen(lines[i]), out);
            else if (ids) rc = vocab_encode(t, lines[i], out);
            else {
                char *s = tfm_bpe_encode_pieces(&t->sp, lines[i], strlen(lines[i]));
                if (s) fprintf(out, "%s\n", s);
                rc = s ? 0 : -1;
                free(s);
            }
            if (rc && !decode) tfm_prefix_error("%s:%d: ", name, i + 1);
        }
        free(lines);
    }
    if (fclose(out) && !rc) rc = (tfm_set_error_kind(TFM_ERR_NOMEM, "%s: out of memory", name), -1);
    if (rc) {
        free(res);
        return NULL;
    }
    *out_len = res_len;
    return res;
}
