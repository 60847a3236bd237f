/* Word tokenizers (d2l, whitespace, Moses-like) and the detokenizer. */
#include "tfm/text.h"

#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- token list builder */
typedef struct {
    char *b;          /* tokens, each followed by NUL */
    size_t len, cap;
    int n;
} tokbuf;

static int tb_push(tokbuf *t, const char *s, size_t n) {
    if (t->len + n + 1 > t->cap) {
        size_t cap = t->cap ? t->cap : 64;
        while (t->len + n + 1 > cap) cap *= 2;
        char *nb = realloc(t->b, cap);
        if (!nb) return -1;
        t->b = nb;
        t->cap = cap;
    }
    memcpy(t->b + t->len, s, n);
    t->b[t->len + n] = 0;
    t->len += n + 1;
    t->n++;
    return 0;
}

/* Moves the tokens into out: one allocation holding the pointer array then the bytes. */
static int tb_finish(tokbuf *t, tfm_toklist *out) {
    size_t ptr_bytes = (size_t)t->n * sizeof(char *);
    char *block = malloc(ptr_bytes + t->len + 1);
    if (!block) {
        free(t->b);
        tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory tokenizing");
        return -1;
    }
    char **tok = (char **)(void *)block;
    char *bytes = block + ptr_bytes;
    if (t->len) memcpy(bytes, t->b, t->len);
    size_t o = 0;
    for (int i = 0; i < t->n; i++) {
        tok[i] = bytes + o;
        o += strlen(bytes + o) + 1;
    }
    free(t->b);
    out->n = t->n;
    out->tok = tok;
    return 0;
}

static int tb_oom(tokbuf *t) {
    free(t->b);
    tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory tokenizing");
    return -1;
}

void tfm_toklist_free(tfm_toklist *t) {
    free(t->tok);  /* pointers and bytes share one block */
    t->tok = NULL;
    t->n = 0;
}

/* Next code point at s[i] (of n bytes); invalid bytes decode as themselves (one byte). */
static int next_cp(const char *s, size_t n, size_t i, uint32_t *cp) {
    int k = tfm_utf8_decode(s + i, n - i, cp);
    if (!k) {
        *cp = (unsigned char)s[i];
        k = 1;
    }
    return k;
}

/* ---------------------------------------------------------------- tokenizer kinds */
static const char *const kind_names[] = {"d2l", "moses", "moses-lower", "space", "bpe"};

int tfm_tok_kind_parse(const char *name) {
    for (int i = 0; i < 5; i++)
        if (!strcmp(name, kind_names[i])) return i;
    return -1;
}

const char *tfm_tok_kind_name(tfm_tok_kind k) {
    return (k >= 0 && (int)k < 5) ? kind_names[k] : "?";
}

/* ---------------------------------------------------------------- d2l */
char *tfm_preprocess_d2l(const char *s) {
    size_t n = strlen(s);
    /* 1. non-breaking spaces -> ' ' (U+00A0 is 2 bytes, U+202F is 3: the result never grows) */
    char *a = malloc(n + 1);
    if (!a) {
        tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory");
        return NULL;
    }
    size_t m = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        int k = next_cp(s, n, i, &cp);
        if (cp == 0xA0 || cp == 0x202F) a[m++] = ' ';
        else {
            memcpy(a + m, s + i, (size_t)k);
            m += (size_t)k;
        }
        i += (size_t)k;
    }
    /* 2. lowercase */
    size_t lm;
    char *low = tfm_utf8_lower(a, m, &lm);
    free(a);
    if (!low) {
        tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory");
        return NULL;
    }
    /* 3. a space before , . ! ? that follow a non-space (the previous code point is ' ' iff the
     *    previous byte is ' ', so bytes suffice) */
    char *out = malloc(2 * lm + 1);
    if (!out) {
        free(low);
        tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory");
        return NULL;
    }
    size_t o = 0;
    for (size_t i = 0; i < lm; i++) {
        char c = low[i];
        if (i > 0 && (c == ',' || c == '.' || c == '!' || c == '?') && low[i - 1] != ' ') out[o++] = ' ';
        out[o++] = c;
    }
    out[o] = 0;
    free(low);
    return out;
}

int tfm_tokenize_d2l(const char *line, tfm_toklist *out) {
    out->n = 0;
    out->tok = NULL;
    char *p = tfm_preprocess_d2l(line);
    if (!p) return -1;
    tokbuf t = {0};
    for (char *s = p; *s;) {
        while (*s == ' ') s++;
        char *e = s;
        while (*e && *e != ' ') e++;
        if (e > s && tb_push(&t, s, (size_t)(e - s))) {
            free(p);
            return tb_oom(&t);
        }
        s = e;
    }
    free(p);
    return tb_finish(&t, out);
}

/* ---------------------------------------------------------------- whitespace */
int tfm_tokenize_space(const char *line, tfm_toklist *out) {
    out->n = 0;
    out->tok = NULL;
    size_t n = strlen(line);
    tokbuf t = {0};
    size_t start = 0;
    int in_tok = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        int k = next_cp(line, n, i, &cp);
        if (tfm_unicode_space(cp)) {
            if (in_tok && tb_push(&t, line + start, i - start)) return tb_oom(&t);
            in_tok = 0;
        } else if (!in_tok) {
            in_tok = 1;
            start = i;
        }
        i += (size_t)k;
    }
    if (in_tok && tb_push(&t, line + start, n - start)) return tb_oom(&t);
    return tb_finish(&t, out);
}

/* ---------------------------------------------------------------- Moses-like */
static int is_digit_cp(uint32_t c) { return c >= '0' && c <= '9'; }

/* Non-ASCII code points treated as punctuation; everything else >= 0x80 counts as a letter. */
static int is_punct_nonascii(uint32_t c) {
    switch (c) {
    case 0xA1: case 0xA7: case 0xAB: case 0xB0: case 0xB4: case 0xB6: case 0xB7: case 0xBB:
    case 0xBF: case 0xD7: case 0xF7:
        return 1;
    default:
        break;
    }
    if (c < 0xA0) return c >= 0x80;  /* C1 controls */
    return (c >= 0x2010 && c <= 0x2027) || (c >= 0x2030 && c <= 0x205E) || (c >= 0x20A0 && c <= 0x20CF) ||
           (c >= 0x3001 && c <= 0x3003) || (c >= 0x3008 && c <= 0x3011);
}

static int is_alnum_cp(uint32_t c) {
    if (c < 0x80) return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || is_digit_cp(c);
    return !is_punct_nonascii(c) && !tfm_unicode_space(c);
}

static int is_letter_cp(uint32_t c) { return is_alnum_cp(c) && !is_digit_cp(c); }

int tfm_tokenize_moses(const char *line, tfm_toklist *out) {
    out->n = 0;
    out->tok = NULL;
    size_t n = strlen(line);
    tokbuf t = {0};
    size_t wstart = 0;   /* current word: line[wstart .. i) */
    int in_word = 0;
    uint32_t last = 0;   /* last code point of the current word */
    for (size_t i = 0; i < n;) {
        uint32_t cp, nx = 0;
        int k = next_cp(line, n, i, &cp);
        if (i + (size_t)k < n) next_cp(line, n, i + (size_t)k, &nx);
        if (tfm_unicode_space(cp)) {
            if (in_word && tb_push(&t, line + wstart, i - wstart)) return tb_oom(&t);
            in_word = 0;
            i += (size_t)k;
            continue;
        }
        if (is_alnum_cp(cp)) {
            if (!in_word) {
                in_word = 1;
                wstart = i;
            }
            last = cp;
            i += (size_t)k;
            continue;
        }
        /* punctuation: does it stay inside the current word? */
        int inside = 0;
        if (in_word) {
            if ((cp == '\'' || cp == 0x2019) && is_letter_cp(last) && is_letter_cp(nx)) inside = 1;
            else if (cp == '-' && is_alnum_cp(last) && is_alnum_cp(nx)) inside = 1;
            else if ((cp == '.' || cp == ',') && is_digit_cp(last) && is_digit_cp(nx)) inside = 1;
        }
        if (inside) {
            last = cp;
            i += (size_t)k;
            continue;
        }
        if (in_word && tb_push(&t, line + wstart, i - wstart)) return tb_oom(&t);
        in_word = 0;
        /* a run of the same punctuation character is one token */
        size_t j = i + (size_t)k;
        while (j < n) {
            uint32_t c2;
            int k2 = next_cp(line, n, j, &c2);
            if (c2 != cp) break;
            j += (size_t)k2;
        }
        if (tb_push(&t, line + i, j - i)) return tb_oom(&t);
        i = j;
    }
    if (in_word && tb_push(&t, line + wstart, n - wstart)) return tb_oom(&t);
    return tb_finish(&t, out);
}

/* TFM_TOK_BPE: the line itself, or no token when it is empty or only spaces */
static int whole_line(const char *line, tfm_toklist *out) {
    tokbuf t = {0};
    size_t n = strlen(line);
    int blank = 1;
    for (size_t i = 0; i < n && blank;) {
        uint32_t cp;
        int k = tfm_utf8_decode(line + i, n - i, &cp);
        if (!k || !tfm_unicode_space(cp)) blank = 0;
        i += k ? (size_t)k : 1;
    }
    if (!blank && tb_push(&t, line, n)) return tb_oom(&t);
    return tb_finish(&t, out);
}

int tfm_tokenize(tfm_tok_kind kind, const char *line, tfm_toklist *out) {
    switch (kind) {
    case TFM_TOK_D2L: return tfm_tokenize_d2l(line, out);
    case TFM_TOK_MOSES: return tfm_tokenize_moses(line, out);
    case TFM_TOK_SPACE: return tfm_tokenize_space(line, out);
    case TFM_TOK_BPE: return whole_line(line, out);
    case TFM_TOK_MOSES_LOWER: {
        char *low = tfm_utf8_lower(line, strlen(line), NULL);
        if (!low) {
            tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory");
            return -1;
        }
        int r = tfm_tokenize_moses(low, out);
        free(low);
        return r;
    }
    }
    tfm_set_error("unknown tokenizer kind %d", (int)kind);
    return -1;
}

/* ---------------------------------------------------------------- detokenizer */
/* Every code point of tok is in set (a UTF-8 string of single code points)? */
static int all_in(const char *tok, const char *set) {
    size_t n = strlen(tok);
    if (!n) return 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        int k = next_cp(tok, n, i, &cp);
        char enc[5] = {0};
        int e = tfm_utf8_encode(cp, enc);
        if (!e) return 0;
        enc[e] = 0;
        if (!strstr(set, enc)) return 0;
        i += (size_t)k;
    }
    return 1;
}

static int is_closing(const char *tok) {
    if (all_in(tok, ".,!?;:)]}%\xe2\x80\xa6\xe2\x80\x9d")) return 1;  /* … ” */
    /* English clitics produced by other tokenizers: 's 're n't ... */
    if ((tok[0] == '\'' && tok[1] && is_letter_cp((unsigned char)tok[1])) || !strcmp(tok, "n't")) return 1;
    return 0;
}

static int is_opening(const char *tok) {
    return all_in(tok, "([{\xc2\xbf\xc2\xa1\xe2\x80\x9c\xe2\x80\x9e");  /* ¿ ¡ “ „ */
}

char *tfm_detokenize(const char *const *tokens, int n) {
    size_t total = 1;
    for (int i = 0; i < n; i++) total += strlen(tokens[i]) + 1;
    char *out = malloc(total);
    if (!out) {
        tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory");
        return NULL;
    }
    size_t o = 0;
    int prev_opens = 1;   /* no space before the first token */
    int quotes = 0;       /* straight double quotes seen so far */
    for (int i = 0; i < n; i++) {
        const char *t = tokens[i];
        int space, opens;
        if (!strcmp(t, "\"")) {
            int opening = quotes % 2 == 0;
            quotes++;
            space = opening ? !prev_opens : 0;
            opens = opening;
        } else {
            space = !prev_opens && !is_closing(t);
            opens = is_opening(t);
        }
        if (space) out[o++] = ' ';
        size_t l = strlen(t);
        memcpy(out + o, t, l);
        o += l;
        prev_opens = opens;
    }
    out[o] = 0;
    return out;
}
