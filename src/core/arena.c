/* Bump allocator for everything one step creates: a list of chunks that only grows (see core.h). Reset
 * rewinds it; after the largest step has been seen, steady-state steps never call malloc. */
#include "tfm/core.h"
#include "core/mem.h"
#include <stdlib.h>
#include <string.h>

#define ALIGN 64

struct tfm_arena_chunk {
    tfm_arena_chunk *next;
    size_t cap, used;
    char *mem;
};

static tfm_arena_chunk *chunk_new(tfm_arena *a, size_t cap) {
    tfm_arena_chunk *c = malloc(sizeof *c);
    if (!c) tfm_fatal("out of memory (arena chunk header)");
    cap = (cap + ALIGN - 1) / ALIGN * ALIGN;
    /* a big chunk is its own huge-page mapping of whole 2 MiB pages (core/mem.h), all of them used: its first touch
     * faults once per 2 MiB instead of once per 4 KiB (measured on this project's VMs: ~9 ms against ~40 ms for
     * 64 MiB, median of 5) */
    cap = tfm_weights_span_(cap);
    c->mem = cap >= TFM_HUGE_PAGE ? tfm_weights_alloc_(cap) : aligned_alloc(ALIGN, cap);
    if (!c->mem) tfm_fatal("out of memory: arena chunk of %zu bytes", cap);
    c->cap = cap;
    c->used = 0;
    c->next = NULL;
    a->n_mallocs++;
    a->cap_total += cap;
    return c;
}

void tfm_arena_init(tfm_arena *a, size_t initial_bytes) {
    memset(a, 0, sizeof *a);
    a->head = a->cur = chunk_new(a, initial_bytes ? initial_bytes : (1u << 20));
}

void *tfm_arena_alloc(tfm_arena *a, size_t bytes) {
    size_t need = (bytes + ALIGN - 1) / ALIGN * ALIGN;
    if (need == 0) need = ALIGN;
    tfm_arena_chunk *c = a->cur;
    while (c->used + need > c->cap) {
        if (!c->next) c->next = chunk_new(a, need > a->cap_total ? need : a->cap_total);
        c = c->next;
        c->used = 0;   /* chunks after cur are free since the last reset */
    }
    a->cur = c;
    void *p = c->mem + c->used;
    c->used += need;
    a->used_total += need;
    if (a->used_total > a->peak) a->peak = a->used_total;
    return p;
}

void *tfm_arena_calloc(tfm_arena *a, size_t bytes) {
    void *p = tfm_arena_alloc(a, bytes);
    memset(p, 0, bytes);
    return p;
}

void tfm_arena_reset(tfm_arena *a) {
    a->cur = a->head;
    a->head->used = 0;
    a->used_total = 0;
}

tfm_arena_pos tfm_arena_tell(const tfm_arena *a) {
    tfm_arena_pos p = {a->cur, a->cur->used, a->used_total};
    return p;
}

void tfm_arena_rewind(tfm_arena *a, tfm_arena_pos p) {
    a->cur = p.chunk;   /* the chunks after it count as free again (tfm_arena_alloc resets them on entry) */
    p.chunk->used = p.used;
    a->used_total = p.used_total;
}

void tfm_arena_free(tfm_arena *a) {
    tfm_arena_chunk *c = a->head;
    while (c) {
        tfm_arena_chunk *n = c->next;
        if (c->cap >= TFM_HUGE_PAGE) tfm_weights_free_(c->mem, c->cap);
        else free(c->mem);
        free(c);
        c = n;
    }
    memset(a, 0, sizeof *a);
}
