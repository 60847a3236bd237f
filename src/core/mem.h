/* Memory for weights (private to the library). */
#ifndef TFM_CORE_MEM_H
#define TFM_CORE_MEM_H
#include <stddef.h>

/* `bytes` zeroed bytes aligned to 64, released with tfm_weights_free_(p, bytes) (the same count). From 2 MiB up
 * the block is mapped on its own, aligned to 2 MiB and, on Linux, marked for transparent huge pages (madvise),
 * so streaming through it (a decoding step reads every weight once) does not miss the TLB every 4 KiB; its
 * pages are the kernel's zero pages until written. NULL when out of memory. */
#define TFM_HUGE_PAGE ((size_t)2 << 20)   /* from this size up a block is its own huge-page mapping */
void *tfm_weights_alloc_(size_t bytes);
void tfm_weights_free_(void *p, size_t bytes);   /* NULL-safe */

#endif
