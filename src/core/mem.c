/* Memory for weights: see mem.h. */
#ifndef _DEFAULT_SOURCE
#define _DEFAULT_SOURCE   /* mmap's MAP_ANONYMOUS, madvise */
#endif
#include "core/mem.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif

static size_t rounded(size_t bytes, size_t unit) { return (bytes + unit - 1) / unit * unit; }

size_t tfm_weights_span_(size_t bytes) { return bytes >= TFM_HUGE_MIN ? rounded(bytes, TFM_HUGE_PAGE) : bytes; }

#if defined(__linux__) && defined(MADV_HUGEPAGE)
/* a private mapping of `size` bytes (a multiple of 2 MiB) starting on a 2 MiB boundary: map 2 MiB more, unmap
 * the ragged ends */
static void *map_aligned(size_t size) {
    char *m = mmap(NULL, size + TFM_HUGE_PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return NULL;
    char *p = (char *)rounded((uintptr_t)m, TFM_HUGE_PAGE);
    if (p > m) munmap(m, (size_t)(p - m));
    if (p + size < m + size + TFM_HUGE_PAGE) munmap(p + size, (size_t)(m + size + TFM_HUGE_PAGE - (p + size)));
    madvise(p, size, MADV_HUGEPAGE);   /* a hint: ordinary pages if the kernel declines */
    return p;
}

void *tfm_weights_alloc_(size_t bytes) {
    if (bytes >= TFM_HUGE_MIN) return map_aligned(rounded(bytes, TFM_HUGE_PAGE));
    void *p = aligned_alloc(64, bytes ? rounded(bytes, 64) : 64);
    return p ? memset(p, 0, bytes) : NULL;
}

void tfm_weights_free_(void *p, size_t bytes) {
    if (!p) return;
    if (bytes >= TFM_HUGE_MIN) munmap(p, rounded(bytes, TFM_HUGE_PAGE));
    else free(p);
}
#else
void *tfm_weights_alloc_(size_t bytes) {
    size_t align = bytes >= TFM_HUGE_MIN ? TFM_HUGE_PAGE : 64, size = rounded(bytes ? bytes : 1, align);
    void *p = aligned_alloc(align, size);
    return p ? memset(p, 0, bytes) : NULL;
}

void tfm_weights_free_(void *p, size_t bytes) {
    (void)bytes;
    free(p);
}
#endif
