/* Gradient buffers recycled across the backward (tfm_graph.recycle_grads).
 *
 * The forward gives every tensor that tracks grad its own grad buffer in the arena, but the backward
 * needs an intermediate tensor's grad only from its first writer (the tensor's last consumer in the
 * forward, the first of them in the backward) to its producer's backward, which reads it for the last
 * time. Planned before the backward, those intervals let a small pool serve all of them: a freed buffer
 * is handed to the next tensor while its lines are still in cache, instead of every op of the backward
 * writing into memory the forward touched last (a GPT chunk: ~12 MB of grads become a pool of ~1 MB).
 *
 * Planned: a tensor that owns its grad (not a reshape view), whose grad the arena allocated and nobody
 * has touched (grad_unzeroed), produced by exactly one node that comes before every node using it, not
 * empty, and not the loss. Everything else (leaves, parameters, the loss) keeps its buffer. The plan is first fit
 * over the pool in backward order, so it is the same every step of a fixed graph; the pool grows only
 * when a plan needs more (warm-up). Values do not change: each grad is still zeroed or assigned right
 * before its first use (tfm_backward's grads_ready). */
#include "core/graph_impl.h"
#include "tfm/core.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    tfm_tensor *t;    /* the grad's owner */
    int prod, first;  /* forward index of its producer, and of the first node that uses it */
    int last;         /* forward index of its last user: the first backward step that needs the grad */
    int next_alloc;   /* entries whose grad is first needed at the same node (a list) */
    size_t off, size; /* in the pool, in floats (64-byte multiples) */
} plan_entry;

static tfm_tensor *owner(tfm_tensor *t) { return t->view_of ? t->view_of : t; }

/* open addressing: tensor -> entry index (hash of the pointer) */
static int find(tfm_tensor **keys, int *vals, int cap, tfm_tensor *t, int *slot) {
    uintptr_t h = ((uintptr_t)t >> 4) * 0x9E3779B97F4A7C15ull;
    int i = (int)(h >> 32) & (cap - 1);
    while (keys[i] && keys[i] != t) i = (i + 1) & (cap - 1);
    *slot = i;
    return keys[i] ? vals[i] : -1;
}

/* Notes node i's use of t (as output if out): creates t's entry on first sight. */
static void note(plan_entry *e, int *n, tfm_tensor **keys, int *vals, int cap, tfm_tensor *t, int i, int out) {
    if (!t || !t->grad) return;
    t = owner(t);
    int slot, k = find(keys, vals, cap, t, &slot);
    if (k < 0) {
        k = (*n)++;
        keys[slot] = t, vals[slot] = k;
        e[k] = (plan_entry){t, -1, i, i, -1, 0, t->size};
    }
    if (out) e[k].prod = e[k].prod < 0 ? i : -2;   /* two producers: leave it alone */
    e[k].last = i;
}

/* First fit among the live blocks (kept sorted by offset); returns the offset. */
static size_t place(size_t *lo, size_t *hi, int *live, size_t size) {
    size_t at = 0;
    int j = 0;
    for (; j < *live && lo[j] < at + size; j++) at = hi[j] > at ? hi[j] : at;
    memmove(lo + j + 1, lo + j, sizeof *lo * (size_t)(*live - j));
    memmove(hi + j + 1, hi + j, sizeof *hi * (size_t)(*live - j));
    lo[j] = at, hi[j] = at + size;
    (*live)++;
    return at;
}

static void release(size_t *lo, size_t *hi, int *live, size_t at) {
    int j = 0;
    while (j < *live && lo[j] != at) j++;
    memmove(lo + j, lo + j + 1, sizeof *lo * (size_t)(*live - j - 1));
    memmove(hi + j, hi + j + 1, sizeof *hi * (size_t)(*live - j - 1));
    (*live)--;
}

void tfm_grad_plan(tfm_graph *g, tfm_tensor *loss) {
    int nn = g->n_nodes, cap = 64;
    while (cap < 4 * (nn + 1) * 5) cap *= 2;   /* at most 5 tensors per node */
    tfm_arena *a = &g->arena;
    plan_entry *e = tfm_arena_alloc(a, sizeof *e * (size_t)cap / 2);
    tfm_tensor **keys = tfm_arena_alloc(a, sizeof *keys * (size_t)cap);
    int *vals = tfm_arena_alloc(a, sizeof *vals * (size_t)cap);
    memset(keys, 0, sizeof *keys * (size_t)cap);
    int n = 0;
    const tfm_tensor *loss_owner = owner(loss);   /* seeded before the first node */
    for (int i = 0; i < nn; i++) {
        tfm_node *d = &g->nodes[i];
        for (int k = 0; k < d->n_in; k++) note(e, &n, keys, vals, cap, d->in[k], i, 0);
        note(e, &n, keys, vals, cap, d->out, i, 1);
    }
    /* the planned ones, listed by the node whose backward first needs them */
    int *first_at = tfm_arena_alloc(a, sizeof *first_at * (size_t)nn);
    for (int i = 0; i < nn; i++) first_at[i] = -1;
    for (int k = 0; k < n; k++) {
        plan_entry *p = &e[k];
        p->size = (p->size + 15) & ~(size_t)15;
        if (p->prod < 0 || p->first < p->prod || !p->t->grad_unzeroed || p->t == loss_owner || !p->size) continue;
        p->next_alloc = first_at[p->last];
        first_at[p->last] = k;
    }
    /* the backward's order: a grad is placed before the node that first writes it, freed after its
     * producer's backward */
    size_t *lo = tfm_arena_alloc(a, sizeof *lo * (size_t)(n + 1));
    size_t *hi = tfm_arena_alloc(a, sizeof *hi * (size_t)(n + 1));
    int live = 0, *planned_by_prod = tfm_arena_alloc(a, sizeof *planned_by_prod * (size_t)nn);
    for (int i = 0; i < nn; i++) planned_by_prod[i] = -1;
    size_t peak = 0;
    for (int i = nn - 1; i >= 0; i--) {
        for (int k = first_at[i]; k >= 0; k = e[k].next_alloc) {
            e[k].off = place(lo, hi, &live, e[k].size);
            if (e[k].off + e[k].size > peak) peak = e[k].off + e[k].size;
            planned_by_prod[e[k].prod] = k;   /* one producer per tensor, one output per node */
        }
        if (planned_by_prod[i] >= 0) release(lo, hi, &live, e[planned_by_prod[i]].off);
    }
    if (!peak) return;
    if (peak > g->grad_pool_cap) {
        free(g->grad_pool);
        g->grad_pool = aligned_alloc(64, peak * sizeof(float));
        if (!g->grad_pool) tfm_fatal("out of memory (gradient pool of %zu floats)", peak);
        g->grad_pool_cap = peak;
    }
    for (int i = 0; i < nn; i++) {
        if (planned_by_prod[i] < 0) continue;
        plan_entry *p = &e[planned_by_prod[i]];
        p->t->grad = g->grad_pool + p->off;
    }
    /* views share their owner's (new) buffer */
    for (int i = 0; i < nn; i++) {
        tfm_node *d = &g->nodes[i];
        for (int k = 0; k <= d->n_in; k++) {
            tfm_tensor *t = k < d->n_in ? d->in[k] : d->out;
            if (t && t->view_of && t->grad) t->grad = t->view_of->grad;
        }
    }
}
