/* Running text through a BPE model (include/tfm/bpe.h): a whole multi-line text as one id sequence for a
 * language model, and its streaming decoder. Lines are encoded as tfm_bpe_encode encodes a line (with the dummy
 * prefix '▁'), and each '\n' is the byte piece <0x0A>; decoding drops the dummy prefix at the start of each
 * line, so decode(encode(x)) == x for any UTF-8 text. Decoded text comes out in whole UTF-8 characters: the
 * bytes of byte pieces wait until their character is complete, and a byte sequence that is not UTF-8 becomes
 * U+FFFD (a model may sample any id). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tfm/bpe.h"

#define WS "\xe2\x96\x81" /* U+2581, the piece marker of a space */
#define WS_LEN 3

int *tfm_bpe_encode_text(const tfm_bpe *m, const char *text, size_t len, int *n_ids) {
    *n_ids = 0;
    if (!m->byte_fallback || m->byte_id['\n'] < 0)
        return tfm_set_error("bpe: running text needs a model with byte fallback (<0x0A> for line ends)"), NULL;
    size_t cap = len / 2 + 16, n = 0;   /* grown as needed */
    int *ids = malloc(cap * sizeof *ids);
    if (!ids) return tfm_set_error_kind(TFM_ERR_NOMEM, "bpe: out of memory encoding %zu bytes", len), NULL;
    for (size_t at = 0; at <= len;) {
        const char *nl = memchr(text + at, '\n', len - at);
        size_t line = nl ? (size_t)(nl - (text + at)) : len - at;
        int k = 0, *part = tfm_bpe_encode(m, text + at, line, &k);
        if (!part) return free(ids), NULL;
        if (n + (size_t)k + 1 > cap) {
            size_t c = (n + (size_t)k + 1) * 2;
            int *p = c > (size_t)INT32_MAX ? NULL : realloc(ids, c * sizeof *ids);
            if (!p) {
                free(part), free(ids);
                return tfm_set_error_kind(TFM_ERR_NOMEM, "bpe: out of memory encoding %zu bytes", len), NULL;
            }
            ids = p, cap = c;
        }
        memcpy(ids + n, part, sizeof *ids * (size_t)k);
        n += (size_t)k;
        free(part);
        if (!nl) break;
        ids[n++] = m->byte_id['\n'];
        at += line + 1;
    }
    *n_ids = (int)n;
    return ids;
}

void tfm_bpe_text_decoder_init(tfm_bpe_text_decoder *d, int line_start) {
    memset(d, 0, sizeof *d);
    d->line_start = line_start;
}

size_t tfm_bpe_text_max_bytes(const tfm_bpe *m) {
    size_t longest = 1;
    for (int i = 0; i < m->n; i++)
        if ((size_t)m->len[i] > longest) longest = (size_t)m->len[i];
    return 3 * (longest + 4);   /* every byte at worst one U+FFFD, plus the held bytes */
}

static int put_fffd(char *out) { return memcpy(out, "\xef\xbf\xbd", 3), 3; }

static int utf8_need(unsigned char lead) { return lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : 2; }

/* One byte through the UTF-8 check: whole characters out, an invalid sequence as U+FFFD. */
int tfm_bpe_text_put_byte(tfm_bpe_text_decoder *d, unsigned char b, char *out) {
    int k = 0;
    if (d->n_pend && (b & 0xC0) != 0x80) {   /* an unfinished character, then not a continuation */
        k += put_fffd(out);
        d->n_pend = 0;
    }
    if (!d->n_pend) {
        if (b < 0x80) return out[k] = (char)b, k + 1;
        if (b < 0xC2 || b > 0xF4) return k + put_fffd(out + k);   /* a stray continuation, or never a lead */
        d->pend[d->n_pend++] = b;
        return k;
    }
    d->pend[d->n_pend++] = b;
    if (d->n_pend < utf8_need(d->pend[0])) return k;
    int n = d->n_pend;
    d->n_pend = 0;
    if (!tfm_utf8_valid((const char *)d->pend, (size_t)n)) return k + put_fffd(out + k);   /* overlong, surrogate */
    memcpy(out + k, d->pend, (size_t)n);
    return k + n;
}

int tfm_bpe_text_decode_id(const tfm_bpe *m, tfm_bpe_text_decoder *d, int id, char *out) {
    if (id < 0 || id >= m->n) return 0;
    int type = m->type[id], k = 0;
    if (type == TFM_PIECE_BYTE) {
        int b = 0;
        while (b < 256 && m->byte_id[b] != id) b++;
        if (b == 256) return 0;
        d->line_start = b == '\n';
        return tfm_bpe_text_put_byte(d, (unsigned char)b, out);
    }
    if (type == TFM_PIECE_CONTROL || type == TFM_PIECE_UNKNOWN) return 0;   /* never in encoded text */
    const char *w = m->piece[id];
    size_t n = (size_t)m->len[id];
    if (d->line_start && m->add_dummy_prefix && n >= WS_LEN && !memcmp(w, WS, WS_LEN)) w += WS_LEN, n -= WS_LEN;
    d->line_start = 0;
    for (size_t i = 0; i < n; i++) {
        if (i + WS_LEN <= n && !memcmp(w + i, WS, WS_LEN)) {
            k += tfm_bpe_text_put_byte(d, ' ', out + k);
            i += WS_LEN - 1;
        } else {
            k += tfm_bpe_text_put_byte(d, (unsigned char)w[i], out + k);
        }
    }
    return k;
}

int tfm_bpe_text_flush(tfm_bpe_text_decoder *d, char *out) {
    if (!d->n_pend) return 0;
    d->n_pend = 0;
    return put_fffd(out);
}

char *tfm_bpe_decode_text(const tfm_bpe *m, const int *ids, int n_ids, size_t *out_len) {
    size_t step = tfm_bpe_text_max_bytes(m), cap = (size_t)(n_ids > 0 ? n_ids : 1) * 4 + step + 4, n = 0;
    char *s = malloc(cap);
    if (!s) return tfm_set_error_kind(TFM_ERR_NOMEM, "bpe: out of memory decoding"), NULL;
    tfm_bpe_text_decoder d;
    tfm_bpe_text_decoder_init(&d, 1);
    for (int i = 0; i <= n_ids; i++) {
        if (n + step + 4 > cap) {
            char *p = realloc(s, cap * 2);
            if (!p) return free(s), tfm_set_error_kind(TFM_ERR_NOMEM, "bpe: out of memory decoding"), NULL;
            s = p, cap *= 2;
        }
        n += (size_t)(i < n_ids ? tfm_bpe_text_decode_id(m, &d, ids[i], s + n) : tfm_bpe_text_flush(&d, s + n));
    }
    s[n] = 0;
    if (out_len) *out_len = n;
    return s;
}
