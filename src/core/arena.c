/* Bump allocator for everything one step creates. Reset rewinds it; after the first steps it settles
 * into a single chunk of the peak size, so steady-state steps never call malloc. */
#include "tfm/core.h"
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
    c->mem = aligned_alloc(ALIGN, (cap + ALIGN - 1) / ALIGN * ALIGN);
    if (!c->mem) tfm_fatal("out of memory: arena chunk of %zu bytes", cap);
    c->cap = cap;
    c->used = 0;
    c->next = NULL;
    a->n_mallocs++;
    return c;
}

void tfm_arena_init(tfm_arena *a, size_t initial_bytes) {
    memset(a, 0, sizeof *a);
    a->head = chunk_new(a, initial_bytes ? initial_bytes : (1u << 20));
}

void *tfm_arena_alloc(tfm_arena *a, size_t bytes) {
    size_t need = (bytes + ALIGN - 1) / ALIGN * ALIGN;
    if (need == 0) need = ALIGN;
    if (a->head->used + need > a->head->cap) {
        size_t cap = a->head->cap * 2;
        if (cap < need) cap = need;
        tfm_arena_chunk *c = chunk_new(a, cap);
        c->next = a->head;
        a->head = c;
    }
    void *p = a->head->mem + a->head->used;
    a->head->used += need;
    a->used_total += need;
    if (a->used_total > a->peak) a->peak = a->used_total;
    return p;
}

void *tfm_arena_calloc(tfm_arena *a, size_t bytes) {
    void *p = tfm_arena_alloc(a, bytes);
    memset(p, 0, bytes);
    return p;
}

static void free_chunks(tfm_arena_chunk *c) {
    while (c) {
        tfm_arena_chunk *n = c->next;
        free(c->mem);
        free(c);
        c = n;
    }
}

void tfm_arena_reset(tfm_arena *a) {
    if (a->head->next) { /* several chunks were needed: replace them by one of the peak size */
        free_chunks(a->head);
        a->head = chunk_new(a, a->peak + a->peak / 8);
    }
    a->head->used = 0;
    a->used_total = 0;
}

void tfm_arena_free(tfm_arena *a) {
    free_chunks(a->head);
    a->head = NULL;
}
