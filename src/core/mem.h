/* Memory for weights (private to the library). */
#ifndef TFM_CORE_MEM_H
#define TFM_CORE_MEM_H
#include <stddef.h>

/* `bytes` zeroed bytes aligned to 64, released with free(). From 2 MiB up the block is aligned to 2 MiB and,
 * on Linux, marked for transparent huge pages (madvise), so streaming through it (a decoding step reads every
 * weight once) does not miss the TLB every 4 KiB; elsewhere, or if the kernel declines, ordinary pages.
 * NULL when out of memory. */
void *tfm_weights_alloc_(size_t bytes);

#endif
