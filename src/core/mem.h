/* Memory for weights (private to the library). */
#ifndef TFM_CORE_MEM_H
#define TFM_CORE_MEM_H
#include <stddef.h>

/* `bytes` zeroed bytes aligned to 64, released with tfm_weights_free_(p, bytes) (the same count). From 512 KiB up
 * the block is mapped on its own, in whole 2 MiB pages aligned to 2 MiB (at most 3/4 of the last one unused) and,
 * on Linux, marked for transparent huge pages (madvise), so streaming through it (a decoding step reads every
 * weight once) does not miss the TLB every 4 KiB, and filling it faults once per 2 MiB instead of 512 times (on
 * this project's VMs a 4 KiB page's first touch costs 2-10 us, a huge page's ~0.3 ms: core/arena.c); its pages
 * are the kernel's zero pages until written. NULL when out of memory. */
#define TFM_HUGE_PAGE ((size_t)2 << 20)
#define TFM_HUGE_MIN (TFM_HUGE_PAGE / 4)   /* from this size up tfm_weights_alloc_ maps a block of its own */
void *tfm_weights_alloc_(size_t bytes);
/* the bytes a block of `bytes` spans: whole huge pages from TFM_HUGE_MIN up, else `bytes` (a caller that asks for
 * this many gets all of them to use, the same block) */
size_t tfm_weights_span_(size_t bytes);
void tfm_weights_free_(void *p, size_t bytes);   /* NULL-safe */

#endif
