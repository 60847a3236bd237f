/* A BPE model's pieces as a tfm_vocab (id = piece id), so translators index both the same way. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tfm/bpe.h"

int tfm_bpe_vocab(const tfm_bpe *m, tfm_vocab *v) {
    memset(v, 0, sizeof *v);
    if (!tfm_bpe_has_tfm_specials(m))
        return tfm_set_error("BPE model without tfm's special ids (0 <pad>, 1 <s>, 2 </s>, 3 <unk>): learn it with "
                             "tfm bpe learn, or spm_train --pad_id=0 --bos_id=1 --eos_id=2 --unk_id=3"),
               -1;
    static const char *const reserved[TFM_N_RESERVED] = {"<pad>", "<bos>", "<eos>", "<unk>"};
    size_t len = 1;
    for (int i = 0; i < m->n; i++) len += (i < TFM_N_RESERVED ? strlen(reserved[i]) : (size_t)m->len[i]) + 1;
    char *s = malloc(len), *p = s;
    if (!s) return tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory (BPE vocabulary)"), -1;
    for (int i = 0; i < m->n; i++) {
        const char *piece = i < TFM_N_RESERVED ? reserved[i] : m->piece[i];
        size_t l = i < TFM_N_RESERVED ? strlen(piece) : (size_t)m->len[i];
        if (memchr(piece, '\n', l)) {
            free(s);
            return tfm_set_error("BPE model: piece %d holds a newline", i), -1;
        }
        if (i) *p++ = '\n';
        memcpy(p, piece, l);
        p += l;
    }
    *p = 0;
    int rc = tfm_vocab_deserialize(v, s);   /* checks: no empty or duplicate piece, valid UTF-8 */
    free(s);
    return rc ? tfm_prefix_error("BPE model: ") : 0;
}
