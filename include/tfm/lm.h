/* Language-model workflows, kept as one include for older code: the corpus, training loop and
 * checkpoints are in train.h, sampling and generation in decode.h. */
#ifndef TFM_LM_H
#define TFM_LM_H

#include "tfm/decode.h"
#include "tfm/train.h"

#endif
