/* An imported MarianMT's tokenizer (include/tfm/seq2seq.h): source.spm and target.spm SentencePiece models
 * whose pieces the model knows by vocab.json's ids, as Hugging Face's MarianTokenizer uses them:
 *   encode: source.spm pieces -> vocab.json ids (every piece source.spm can output must be in vocab.json:
 *           checked once, at load); the search appends </s>
 *   decode: model ids -> vocab.json pieces, </s> <pad> <unk> dropped (decode(skip_special_tokens=True))
 *           -> target.spm's decode of the pieces (spm_decode --input_format=piece). */
#include <stdlib.h>
#include <string.h>

#include "tfm/seq2seq.h"
#include "tfm/tokenizers.h"

struct tfm_marian_tok {
    tfm_bpe src, tgt;
    tfm_token_map vocab;
    int *src_ids;            /* source piece id -> model id (-1: a control piece the encoder never outputs) */
    int eos, pad, unk;       /* the model's ids of </s>, <pad>, <unk> (-1: none) */
};

void tfm_marian_tok_free(tfm_marian_tok *t) {
    if (!t) return;
    if (t->src.piece) tfm_bpe_free(&t->src);
    if (t->tgt.piece) tfm_bpe_free(&t->tgt);
    if (t->vocab.token) tfm_token_map_free(&t->vocab);
    free(t->src_ids);
    free(t);
}

tfm_marian_tok *tfm_marian_tok_from_bytes(const void *src, size_t src_len, const void *tgt, size_t tgt_len,
                                          const void *vocab, size_t vocab_len, int n_model,
                                          const char *const names[3]) {
    const char *sn = names[0], *tn = names[1], *vn = names[2];
    tfm_marian_tok *t = calloc(1, sizeof *t);
    if (!t) return tfm_set_error_kind(TFM_ERR_NOMEM, "%s: out of memory", vn), NULL;
    int *tgt_ids = NULL;
    if (tfm_bpe_from_bytes(&t->src, src, src_len, sn) || tfm_bpe_from_bytes(&t->tgt, tgt, tgt_len, tn) ||
        tfm_token_map_parse(&t->vocab, vocab, vocab_len, vn))
        goto fail;
    if (t->vocab.n > n_model) {
        tfm_set_error("%s: has ids up to %d but the model has %d tokens", vn, t->vocab.n - 1, n_model);
        goto fail;
    }
    /* every piece either model can output must have an id (the target side too: what the model emits is
     * decoded through target.spm's pieces) */
    if (!(t->src_ids = tfm_bpe_map_to_vocab(&t->src, &t->vocab, 0, sn, vn)) ||
        !(tgt_ids = tfm_bpe_map_to_vocab(&t->tgt, &t->vocab, 0, tn, vn)))
        goto fail;
    free(tgt_ids);
    t->eos = tfm_token_map_id(&t->vocab, "</s>", 4);
    t->pad = tfm_token_map_id(&t->vocab, "<pad>", 5);
    t->unk = tfm_token_map_id(&t->vocab, "<unk>", 5);
    return t;
fail:
    tfm_marian_tok_free(t);
    return NULL;
}

int *tfm_marian_encode(const tfm_marian_tok *t, const char *text, size_t len, int *n) {
    int *ids = tfm_bpe_encode(&t->src, text, len, n);
    if (!ids) return NULL;
    for (int i = 0; i < *n; i++) {
        int m = t->src_ids[ids[i]];
        if (m < 0) {   /* cannot happen for what the encoder outputs (checked at load) */
            tfm_set_error("source piece %d has no model id", ids[i]);
            free(ids);
            return NULL;
        }
        ids[i] = m;
    }
    return ids;
}

char *tfm_marian_decode(const tfm_marian_tok *t, const int *ids, int n) {
    const char **pieces = malloc(sizeof(char *) * (size_t)(n > 0 ? n : 1));
    if (!pieces) return tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory"), NULL;
    int k = 0;
    for (int i = 0; i < n; i++) {
        if (ids[i] == t->eos || ids[i] == t->pad || ids[i] == t->unk) continue;
        const char *p = tfm_token_map_token(&t->vocab, ids[i]);
        if (p) pieces[k++] = p;   /* an id without a piece (a model larger than vocab.json) prints nothing */
    }
    char *s = tfm_bpe_decode_pieces(&t->tgt, pieces, k);
    free(pieces);
    return s;
}
