/* Translators on raw text with a joint BPE model (train-mt --tokenizer bpe): the model's pieces are both
 * vocabularies, the corpus lines (TFM_TOK_BPE keeps each line as one "token") are encoded by the model. */
#include <stdlib.h>
#include <omp.h>
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

/* One side of a pair, segmented with BPE-dropout by enc, into its row of the arrays; 1 when cut, -1 on error. */
static int dropout_row(tfm_bpe_encoder *enc, const tfm_bpe *m, const tfm_toklist *line, float p_drop, uint64_t key,
                       int num_steps, int *row, int *valid) {
    int k = 0, cut = 0;
    const int *e = line->n ? tfm_bpe_encoder_run(enc, m, line->tok[0], strlen(line->tok[0]), p_drop, key, &k) : NULL;
    if (line->n && !e) return -1;
    *valid = tfm_truncate_pad(e, k, num_steps, row, &cut);
    return cut;
}

/* Pairs [i0, i1) of the epoch's segmentation with one encoder; the counts of cut sources / targets added to cut[2]. */
static int dropout_rows(const tfm_parallel_text *p, const tfm_bpe *m, float p_drop, uint64_t seed, int epoch,
                        tfm_bpe_encoder *enc, int i0, int i1, tfm_mt_corpus *a, int *cut) {
    int S = a->num_steps;
    for (int i = i0; i < i1; i++)
        for (int side = 0; side < 2; side++) {
            int c = dropout_row(enc, m, side ? &p->tgt[i] : &p->src[i], p_drop, tfm_bpe_dropout_key(seed, epoch, 2L * i + side),
                                S, (side ? a->tgt : a->src) + (size_t)i * S, side ? &a->tgt_valid[i] : &a->src_valid[i]);
            if (c < 0) return -1;
            cut[side] += c;
        }
    return 0;
}

int tfm_mt_corpus_bpe_dropout(const tfm_parallel_text *p, const tfm_mt_model *t, float p_drop, uint64_t seed,
                              int epoch, tfm_bpe_encoder *const *enc, int n_enc, tfm_mt_corpus *a) {
    if (!t->bpe || a->n != p->n)
        return tfm_set_error("BPE-dropout: needs a BPE translator and the arrays of its corpus (%d pairs, arrays of %d)",
                             p->n, a->n), -1;
    tfm_bpe_encoder *own = NULL;
    if (!enc || n_enc < 1) {
        if (!(own = tfm_bpe_encoder_new())) return -1;
        enc = &own, n_enc = 1;
    }
    int bad = 0, cut_src = 0, cut_tgt = 0, nt = tfm_get_threads() < n_enc ? tfm_get_threads() : n_enc;
    enum { BLOCK = 64 };   /* pairs a thread takes at a time */
#pragma omp parallel num_threads(nt) reduction(+ : bad, cut_src, cut_tgt)
    {
        int cut[2] = {0, 0};
        tfm_bpe_encoder *mine = enc[omp_get_thread_num()];
#pragma omp for schedule(dynamic, 1)
        for (int b = 0; b < (p->n + BLOCK - 1) / BLOCK; b++) {
            int i0 = b * BLOCK, i1 = i0 + BLOCK < p->n ? i0 + BLOCK : p->n;
            if (!bad) bad += dropout_rows(p, t->bpe, p_drop, seed, epoch, mine, i0, i1, a, cut) != 0;
        }
        cut_src += cut[0], cut_tgt += cut[1];
    }
    tfm_bpe_encoder_free(own);
    if (bad) return tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory (BPE-dropout segmentation, epoch %d)", epoch + 1), -1;
    a->n_truncated_src = cut_src, a->n_truncated_tgt = cut_tgt;
    return 0;
}
