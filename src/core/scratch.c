/* Per-thread scratch buffers for kernels (include/tfm/core.h: tfm_thread_scratch). Each thread that asks
 * gets its own set, grown on demand and reused across calls (no malloc in steady state), and freed by a
 * thread-exit destructor, so threads that come and go (a program's own threads, their OpenMP teams) leave
 * nothing behind. The only process-wide state is the key, created once. */
#include <pthread.h>
#include <stdlib.h>

#include "tfm/core.h"

typedef struct {
    float *buf[TFM_SCRATCH_COUNT];
    size_t cap[TFM_SCRATCH_COUNT];   /* floats */
} scratch_set;

static pthread_key_t key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static _Thread_local scratch_set *mine;   /* also keeps the set reachable for leak checkers while alive */

static void free_set(void *p) {
    scratch_set *s = p;
    for (int i = 0; i < TFM_SCRATCH_COUNT; i++) free(s->buf[i]);
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
        free(mine->buf[slot]);
        size_t bytes = (n * sizeof(float) + 63) & ~(size_t)63;
        mine->buf[slot] = aligned_alloc(64, bytes);
        mine->cap[slot] = mine->buf[slot] ? bytes / sizeof(float) : 0;
    }
    return mine->buf[slot];
}
