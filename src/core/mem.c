/* Memory for weights: see mem.h. */
#ifndef _DEFAULT_SOURCE
#define _DEFAULT_SOURCE   /* madvise */
#endif
#include "core/mem.h"
#include <stdlib.h>
#include <string.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif

#define HUGE_PAGE ((size_t)2 << 20)

void *tfm_weights_alloc_(size_t bytes) {
    size_t align = bytes < HUGE_PAGE ? 64 : HUGE_PAGE;
    size_t rounded = (bytes + align - 1) / align * align;   /* aligned_alloc: a multiple of the alignment */
    void *p = aligned_alloc(align, rounded ? rounded : align);
    if (!p) return NULL;
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (align == HUGE_PAGE) madvise(p, rounded, MADV_HUGEPAGE);   /* before the first touch: a hint */
#endif
    memset(p, 0, rounded);
    return p;
}
