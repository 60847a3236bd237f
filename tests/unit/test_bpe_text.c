/* Running text through BPE (src/text/bpe_text.c) for BPE language models: decode(encode(x)) == x on whole
 * corpora and on edge cases (empty lines, leading/trailing spaces, a literal U+2581, characters outside the
 * model), the streaming decoder (id by id = all at once; every chunk whole UTF-8; invalid byte sequences as
 * U+FFFD), a BPE GPT checkpoint round trip (tfm_gpt_save_tok / tfm_gpt_load_tok, refused by the character-only
 * reader), and the generator streaming a BPE model's text as whole characters. */
#include "check.h"
#include "tfm/bpe.h"
#include "tfm/generator.h"
#include "tfm/train.h"

static int round_trip(const tfm_bpe *m, const char *text, size_t len, int *n_ids) {
    int n = 0, *ids = tfm_bpe_encode_text(m, text, len, &n);
    if (!ids) return 0;
    size_t out_len = 0;
    char *back = tfm_bpe_decode_text(m, ids, n, &out_len);
    int ok = back && out_len == len && !memcmp(back, text, len);
    /* the streaming decoder, id by id, gives the same bytes, each chunk whole UTF-8 */
    tfm_bpe_text_decoder d;
    tfm_bpe_text_decoder_init(&d, 1);
    size_t cap = len + 64, k = 0, step = tfm_bpe_text_max_bytes(m);
    char *s = malloc(cap + step), chunk[4096];
    for (int i = 0; s && i <= n; i++) {
        int c = i < n ? tfm_bpe_text_decode_id(m, &d, ids[i], chunk) : tfm_bpe_text_flush(&d, chunk);
        if (c && !tfm_utf8_valid(chunk, (size_t)c)) ok = 0;
        if (k + (size_t)c > cap) { ok = 0; break; }
        memcpy(s + k, chunk, (size_t)c);
        k += (size_t)c;
    }
    ok = ok && s && k == len && !memcmp(s, text, len);
    free(s), free(back), free(ids);
    if (n_ids) *n_ids = n;
    return ok;
}

static void corpus(const tfm_bpe *m, const char *path, const char *name) {
    size_t len;
    char *text = tfm_read_text_file(path, &len);
    if (!text) {
        printf("SKIP %s: %s\n", name, tfm_last_error());
        return;
    }
    int n = 0, ok = round_trip(m, text, len, &n);
    CHECK(name, ok, "decode(encode(x)) != x on %s (%zu bytes, %d ids)", path, len, n);
    free(text);
}

int main(void) {
    /* a model learned from the demo corpus, as train-lm --tokenizer bpe learns it */
    tfm_bpe m;
    int rc = tfm_lm_bpe_learn(&m, "data/demo.txt", 0.9f, 400);
    CHECK("learn a 400-piece BPE model from data/demo.txt", rc == 0, "%s", tfm_last_error());
    if (rc) CHECK_EXIT();
    corpus(&m, "data/demo.txt", "decode(encode(x)) == x on data/demo.txt (streamed too)");
    corpus(&m, "../shared/data/tinyshakespeare/input.txt", "decode(encode(x)) == x on tinyshakespeare (streamed too)");
    corpus(&m, "data/fra-eng-demo.tsv", "decode(encode(x)) == x on French text unseen by the model (byte pieces)");
    const char *cases[] = {"", "\n", "\n\n\nx", "a\n\nb\n", "  two leading, two trailing  \n", "tab\there\r\n",
                           "caf\xc3\xa9 na\xc3\xafve \xe2\x96\x81 literal marker", "\xe4\xb8\xad\xe6\x96\x87 \xf0\x9f\x99\x82\n"};
    int all = 1;
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        if (!round_trip(&m, cases[i], strlen(cases[i]), NULL)) all = 0, printf("# case %zu fails\n", i);
    CHECK("round trip: empty lines, spaces, tabs, CR, U+2581, CJK and emoji (byte pieces)", all, "a case differs");

    /* invalid sequences from a sampler: a stray continuation, a lead without its continuation, an unfinished
     * character at the end; each becomes U+FFFD and valid text goes on */
    int ids[] = {m.byte_id[0x80], m.byte_id[0xC3], m.byte_id['A'], m.byte_id[0xC3], m.byte_id[0xA9], m.byte_id[0xE2]};
    size_t len = 0;
    char *s = tfm_bpe_decode_text(&m, ids, 6, &len);
    CHECK("invalid byte sequences decode to U+FFFD, valid ones to their character",
          s && !strcmp(s, "\xef\xbf\xbd\xef\xbf\xbd" "A\xc3\xa9\xef\xbf\xbd"), "got '%s'", s ? s : "(null)");
    free(s);
    tfm_bpe_text_decoder d;
    tfm_bpe_text_decoder_init(&d, 0);
    char out[4096];
    int c1 = tfm_bpe_text_decode_id(&m, &d, m.byte_id[0xC3], out);
    int c2 = tfm_bpe_text_decode_id(&m, &d, m.byte_id[0xA9], out);
    CHECK("streaming holds a character's first byte until the rest arrives", c1 == 0 && c2 == 2 && !memcmp(out, "\xc3\xa9", 2),
          "%d then %d bytes", c1, c2);
    int sp = tfm_bpe_piece_id(&m, "\xe2\x96\x81" "the", 6);
    tfm_bpe_text_decoder_init(&d, 1);
    int a = tfm_bpe_text_decode_id(&m, &d, sp, out);
    tfm_bpe_text_decoder_init(&d, 0);
    int b = tfm_bpe_text_decode_id(&m, &d, sp, out);
    CHECK("'\\u2581the' is 'the' at a line start and ' the' inside a line", sp != m.unk_id && a == 3 && b == 4 && out[0] == ' ',
          "id %d: %d / %d bytes", sp, a, b);

    /* a BPE GPT checkpoint: saved, read back by tfm_gpt_load_tok, refused by the character-only reader */
    tfm_gpt_config cfg = {m.n, 16, 1, 2, 16, 0.0f, TFM_ATTN_CAUSAL, 0.0f};
    tfm_gpt g;
    tfm_gpt_init(&g, &cfg);
    tfm_gpt_init_weights(&g, 7);
    const char *path = "build/tests/bpe_lm.tfm";
    rc = tfm_gpt_save_tok(&g, NULL, &m, NULL, NULL, NULL, path);
    tfm_gpt g2;
    tfm_char_vocab v;
    tfm_bpe *b2 = NULL;
    int rc2 = rc ? -1 : tfm_gpt_load_tok(&g2, &v, &b2, NULL, NULL, path);
    CHECK("BPE GPT checkpoint: tfm_gpt_save_tok -> tfm_gpt_load_tok gives the model and the same BPE model",
          !rc && !rc2 && b2 && b2->n == m.n && b2->proto_len == m.proto_len && !memcmp(b2->proto, m.proto, m.proto_len) &&
          v.n == 0 && !memcmp(g2.params.data, g.params.data, sizeof(float) * g.params.total), "%s", tfm_last_error());
    if (!rc2) tfm_gpt_free(&g2);
    if (b2) tfm_bpe_free(b2), free(b2);
    tfm_gpt g3;
    int rc3 = tfm_gpt_load(&g3, &v, NULL, NULL, path);
    CHECK("tfm_gpt_load (characters only) refuses a BPE language model by name", rc3 != 0 && strstr(tfm_last_error(), "BPE language model"),
          "rc %d: %s", rc3, tfm_last_error());
    if (!rc3) tfm_gpt_free(&g3);

    /* the generator: a random BPE model samples byte pieces often; every streamed piece is whole UTF-8 and the
     * pieces join to the result */
    tfm_generator *gen = tfm_generator_load(path, NULL);
    CHECK("tfm_generator_load reads a BPE language model", gen && !strcmp(tfm_generator_tokenizer(gen), "bpe"), "%s",
          gen ? tfm_generator_tokenizer(gen) : tfm_last_error());
    if (gen) {
        tfm_generate_options o;
        tfm_generate_options_default(&o);
        o.max_tokens = 300;
        tfm_gen_stream *st = tfm_generator_start(gen, "ROMEO:\n", &o);
        char *joined = calloc(1, 300 * 64 + 1);
        size_t jn = 0;
        int whole = 1, steps = 0;
        while (st && joined && !tfm_gen_stream_finished(st) && steps++ < 400) {
            if (tfm_generator_step(gen, &st, 1)) break;
            size_t n;
            const char *t = tfm_gen_stream_take(st, &n);
            if (n && !tfm_utf8_valid(t, n)) whole = 0;
            memcpy(joined + jn, t, n), jn += n;
        }
        tfm_generation r = {0};
        int ok = st && !tfm_gen_stream_result(st, &r) && r.n_tokens == 300 && jn == strlen(r.text) &&
                 !memcmp(joined, r.text, jn) && !strstr(r.text, "\xe2\x96\x81");
        CHECK("generator streams a BPE model's text in whole UTF-8 characters (pieces join to the result, no '\\u2581')",
              whole && ok, "whole %d, %d tokens, %zu / %zu bytes", whole, r.n_tokens, jn, r.text ? strlen(r.text) : 0);
        const char *line = "And the king said to the queen that the lord is here";
        int nt = tfm_generator_count_tokens(gen, line);
        CHECK("count_tokens uses the BPE model (fewer pieces than characters)", nt > 0 && nt < (int)strlen(line) * 2 / 3,
              "%d pieces for %zu characters", nt, strlen(line));
        tfm_generation_free(&r);
        tfm_gen_stream_free(st);
        free(joined);
        tfm_generator_free(gen);
    }
    tfm_gpt_free(&g);
    tfm_bpe_free(&m);
    remove(path);
    CHECK_EXIT();
}
