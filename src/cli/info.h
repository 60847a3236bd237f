/* tfm info's summaries of a checkpoint (src/cli/info.c): what cmd_info.c prints besides the entry groups. */
#ifndef TFM_CLI_INFO_H
#define TFM_CLI_INFO_H

#include "tfm/io.h"

/* "tokenizer: ..." : characters, word vocabularies (with their preprocessing), a BPE model, or an import's files */
void info_print_tokenizer(const tfm_container *c);
/* "parameters: N in T tensors" and "precision: ..." (int8 tensors and their scales) */
void info_print_parameters(const tfm_container *c);

#endif
