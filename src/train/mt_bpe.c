/* Translators on raw text with a joint BPE model (train-mt --tokenizer bpe): the model's pieces are both
 * vocabularies, the corpus lines (TFM_TOK_BPE keeps each line as one "token") are encoded by the model. */
#include <stdlib.h>
#include <string.h>

#include "tfm/train.h"

int tfm_mt_model_build_bpe(tfm_mt_model *t, tfm_bpe *bpe, const tfm_mt_config *cfg, uint64_t seed) {
    memset(t, 0, sizeof *t);
    t->tok_kind = TFM_TOK_BPE;
    t->bpe = bpe;
    if (tfm_mt_model_check_bpe(bpe, "the BPE model") || tfm_bpe_vocab(bpe, &t->src_vocab) ||
        tfm_bpe_vocab(bpe, &t->tgt_vocab)) {
        tfm_mt_model_free(t);
        return -1;
    }
    return tfm_mt_model_create(t, cfg, seed);
}

/* one side: line i = lists[i].tok[0] (or empty) -> ids[off[i] .. off[i+1]) */
static int encode_side(const tfm_bpe *m, const tfm_toklist *lists, int n, int **off_out, int **ids_out) {
    int *off = malloc(sizeof(int) * (size_t)(n + 1));
    size_t cap = 1024, total = 0;
    int *ids = malloc(sizeof(int) * cap);
    if (!off || !ids) goto oom;
    off[0] = 0;
    for (int i = 0; i < n; i++) {
        int k = 0;
        int *e = lists[i].n ? tfm_bpe_encode(m, lists[i].tok[0], strlen(lists[i].tok[0]), &k) : NULL;
        if (lists[i].n && !e) {
            free(off), free(ids);
            return -1;
        }
        if (total + (size_t)k > (size_t)1 << 30) {
            free(e), free(off), free(ids);
            return tfm_set_error("corpus too large (over 2^30 subword tokens)"), -1;
        }
        while (total + (size_t)k > cap) {
            int *p = realloc(ids, sizeof(int) * (cap *= 2));
            if (!p) {
                free(e);
                goto oom;
            }
            ids = p;
        }
        if (k) memcpy(ids + total, e, sizeof(int) * (size_t)k);
        free(e);
        total += (size_t)k;
        off[i + 1] = (int)total;
    }
    *off_out = off;
    *ids_out = ids;
    return 0;
oom:
    free(off), free(ids);
    return tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory encoding the corpus"), -1;
}

int tfm_mt_corpus_from_text_bpe(const tfm_parallel_text *p, const tfm_mt_model *t, int num_steps, tfm_mt_corpus *a) {
    tfm_parallel_ids ids;
    memset(&ids, 0, sizeof ids);
    if (encode_side(t->bpe, p->src, p->n, &ids.src_off, &ids.src_ids)) return -1;
    if (encode_side(t->bpe, p->tgt, p->n, &ids.tgt_off, &ids.tgt_ids)) {
        tfm_parallel_ids_free(&ids);
        return -1;
    }
    ids.n = p->n;
    int rc = tfm_mt_corpus_build(&ids, num_steps, a);
    tfm_parallel_ids_free(&ids);
    return rc;
}
