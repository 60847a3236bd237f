#include "ops/op_impl.h"
void tfm_bw_attention(tfm_node *n) { (void)n; tfm_fatal("todo"); }
