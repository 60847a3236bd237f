/* Per-thread scratch buffers for kernels (include/tfm/core.h: tfm_thread_scratch). Each thread that asks
 * gets its own set, grown on demand and reused across calls (no malloc in steady state), and freed by a
 * thread-exit destructor, so threads that come and go (a program's own threads, their OpenMP teams) leave
 * nothing behind. The only process-wide state is the key, created once. */
#include <pthread.h>
#include <stdlib.h>

#include "tfm/core.h"
#include "core/mem.h"

typedef struct {
    float *buf[TFM_SCRATCH_COUNT];
    size_t cap[TFM_SCRATCH_COUNT];   /* floats */
} scratch_set;

static pthread_key_t key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static _Thread_local scratch_set *mine;   /* also keeps the set reachable for leak checkers while alive */

/* A buffer of 512 KiB or more is a huge-page mapping of whole 2 MiB pages (core/mem.h): its first use faults once
 * per 2 MiB instead of once per 4 KiB (~10 us each on this project's VMs: a 4 x 128 GPT's first 256-token window,
 * whose attention probabilities take 1 MiB, spent ~2.5 ms there). Smaller ones come from malloc. */
static size_t buffer_bytes(size_t floats) {
    size_t bytes = (floats * sizeof(float) + 63) & ~(size_t)63;
    return tfm_weights_span_(bytes);
}

static float *buffer_alloc(size_t bytes) {
    return bytes >= TFM_HUGE_PAGE ? tfm_weights_alloc_(bytes) : aligned_alloc(64, bytes);
}

static void buffer_free(float *p, size_t floats) {
    size_t bytes = floats * sizeof(float);
    if (bytes >= TFM_HUGE_PAGE) tfm_weights_free_(p, bytes);
    else free(p);
}

static void free_set(void *p) {
    scratch_set *s = p;
    for (int i = 0; i < TFM_SCRATCH_COUNT; i++) buffer_free(s->buf[i], s->cap[i]);
    free(s);
    mine = NULL;
}

static void make_key(void) {
    if (pthread_key_create(&key, free_set)) tfm_fatal("cannot create the thread-scratch key");
}

float *tfm_thread_scratch(tfm_scratch_slot slot, size_t n) {
    if (!mine) {
        pthread_once(&key_once, make_key);
        mine = calloc(1, sizeof *mine);
        if (!mine) return NULL;
        pthread_setspecific(key, mine);
    }
    if (n > mine->cap[slot]) {
        buffer_free(mine->buf[slot], mine->cap[slot]);
        size_t bytes = buffer_bytes(n);
        mine->buf[slot] = buffer_alloc(bytes);
        mine->cap[slot] = mine->buf[slot] ? bytes / sizeof(float) : 0;
    }
    return mine->buf[slot];
}
