/* The autodiff tape: nodes appended by ops during the forward pass, replayed in reverse by
 * tfm_backward() (src/ops/dispatch.c, next to the backward kernels it calls). */
#include "core/graph_impl.h"
#include "core/mem.h"
#include "tfm/core.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *op_names[TFM_OP_COUNT] = {
    [TFM_OP_MATMUL] = "matmul", [TFM_OP_LINEAR] = "linear", [TFM_OP_ADD] = "add", [TFM_OP_SUB] = "sub",
    [TFM_OP_MUL] = "mul", [TFM_OP_SCALE] = "scale", [TFM_OP_ADD_SCALAR] = "add_scalar",
    [TFM_OP_EMBEDDING] = "embedding", [TFM_OP_LAYERNORM] = "layernorm", [TFM_OP_GELU] = "gelu",
    [TFM_OP_RELU] = "relu", [TFM_OP_TANH] = "tanh", [TFM_OP_SIGMOID] = "sigmoid", [TFM_OP_EXP] = "exp",
    [TFM_OP_SQUARE] = "square", [TFM_OP_SOFTMAX] = "softmax", [TFM_OP_DROPOUT] = "dropout",
    [TFM_OP_CROSS_ENTROPY] = "cross_entropy", [TFM_OP_PERMUTE] = "permute", [TFM_OP_CONCAT] = "concat",
    [TFM_OP_SLICE] = "slice", [TFM_OP_SUM] = "sum", [TFM_OP_MEAN] = "mean", [TFM_OP_ATTENTION] = "attention",
    [TFM_OP_ADD_OUTER] = "add_outer", [TFM_OP_LINEAR_GELU] = "linear_gelu",
    [TFM_OP_LINEAR_RELU] = "linear_relu", [TFM_OP_ADD_LAYERNORM] = "add_layernorm",
    [TFM_OP_GATHER_ROWS] = "gather_rows", [TFM_OP_SCATTER_ROWS] = "scatter_rows",
    [TFM_OP_SILU] = "silu", [TFM_OP_GELU_ERF] = "gelu_erf", [TFM_OP_SYM_KL] = "sym_kl",
};

static const char *phase_names[TFM_PHASE_COUNT] = {
    [TFM_PHASE_ZERO_GRAD] = "zero_grad", [TFM_PHASE_CLIP] = "clip_grad", [TFM_PHASE_OPTIMIZER] = "optimizer",
    [TFM_PHASE_KV_CACHE] = "kv_cache", [TFM_PHASE_SEARCH] = "search",
    [TFM_PHASE_DIST_WAIT] = "dist_wait", [TFM_PHASE_ALLREDUCE] = "allreduce",
    [TFM_PHASE_CHUNKS] = "chunks_fwd_bwd", [TFM_PHASE_REDUCE] = "chunk_grad_sum",
};

const char *tfm_phase_name(tfm_phase ph) {
    return ph >= 0 && ph < TFM_PHASE_COUNT && phase_names[ph] ? phase_names[ph] : "?";
}

const char *tfm_op_name(tfm_op op) { return op >= 0 && op < TFM_OP_COUNT && op_names[op] ? op_names[op] : "?"; }

void tfm_graph_init(tfm_graph *g, uint64_t seed) {
    memset(g, 0, sizeof *g);
    tfm_arena_init(&g->arena, 1u << 22);
    g->grad_enabled = 1;
    tfm_rng_seed(&g->rng, seed);
    const char *exact = getenv("TFM_EXACT_ATTENTION");
    g->exact_attention = exact && atoi(exact) ? 1 : 0;
}

void tfm_graph_reset(tfm_graph *g) {
    tfm_arena_reset(&g->arena);
    g->n_nodes = 0;
}

void *tfm_graph_block_take(tfm_graph *g, size_t bytes, size_t *got) {
    int best = -1;
    for (int i = 0; i < TFM_GRAPH_SPARES; i++)
        if (g->spare[i] && g->spare_bytes[i] >= bytes && (best < 0 || g->spare_bytes[i] < g->spare_bytes[best]))
            best = i;
    if (best >= 0) {
        void *p = g->spare[best];
        *got = g->spare_bytes[best];
        g->spare[best] = NULL;
        return p;
    }
    /* from 512 KiB up on huge pages (core/mem.h): a translator's KV caches are written a row at a time, and on
     * 4 KiB pages a batch faults in a fresh page every few rows (~10 us a fault on a VM) */
    size_t n = (bytes + 63) / 64 * 64;
    void *p = tfm_weights_alloc_(n ? n : 64);
    *got = p ? (n ? n : 64) : 0;
    return p;
}

void tfm_graph_block_give(tfm_graph *g, void *p, size_t got) {
    if (!p) return;
    int slot = 0;   /* an empty one, else the smallest */
    for (int i = 0; i < TFM_GRAPH_SPARES; i++) {
        if (!g->spare[i]) {
            slot = i;
            break;
        }
        if (g->spare_bytes[i] < g->spare_bytes[slot]) slot = i;
    }
    if (g->spare[slot] && g->spare_bytes[slot] >= got) {
        tfm_weights_free_(p, got);
        return;
    }
    tfm_weights_free_(g->spare[slot], g->spare_bytes[slot]);
    g->spare[slot] = p;
    g->spare_bytes[slot] = got;
}

void tfm_graph_free(tfm_graph *g) {
    for (int i = 0; i < TFM_GRAPH_SPARES; i++) tfm_weights_free_(g->spare[i], g->spare_bytes[i]), g->spare[i] = NULL;
    tfm_arena_free(&g->arena);
    free(g->nodes);
    g->nodes = NULL;
    free(g->grad_pool);
    g->grad_pool = NULL;
    g->grad_pool_cap = 0;
}

void tfm_graph_init_worker(tfm_graph *w, const tfm_graph *g) {
    tfm_graph_init(w, 0);
    w->exact_attention = g->exact_attention, w->attention_tiled = g->attention_tiled;
    w->attention_recompute = g->attention_recompute;
    w->profile = g->profile;
    w->packs = g->packs;
    w->gemm_bf16 = g->gemm_bf16;
    w->recycle_grads = g->recycle_grads;
}

tfm_node *tfm_graph_push(tfm_graph *g, tfm_op op, tfm_tensor *out, int n_in, tfm_tensor **in) {
    if (!g->grad_enabled || !out->grad) return NULL;
    if (g->n_nodes == g->cap_nodes) {
        g->cap_nodes = g->cap_nodes ? 2 * g->cap_nodes : 256;
        g->nodes = realloc(g->nodes, sizeof *g->nodes * g->cap_nodes);
        if (!g->nodes) tfm_fatal("out of memory (graph tape)");
    }
    tfm_node *n = &g->nodes[g->n_nodes++];
    memset(n, 0, sizeof *n);
    n->op = op;
    n->out = out;
    n->n_in = n_in;
    for (int i = 0; i < n_in; i++) n->in[i] = in[i];
    return n;
}

void tfm_graph_print(const tfm_graph *g, void *file) {
    FILE *f = file ? file : stdout;
    char b1[64], b2[64];
    for (int i = 0; i < g->n_nodes; i++) {
        const tfm_node *n = &g->nodes[i];
        fprintf(f, "%4d %-14s -> %-16s <-", i, tfm_op_name(n->op), tfm_shape_str(n->out, b1, sizeof b1));
        for (int k = 0; k < n->n_in; k++)
            if (n->in[k]) fprintf(f, " %s%s", n->in[k]->name ? n->in[k]->name : "", tfm_shape_str(n->in[k], b2, sizeof b2));
        fputc('\n', f);
    }
}

double tfm_profile_begin(const tfm_graph *g) { return g->profile ? tfm_now() : 0; }

void tfm_profile_end(tfm_graph *g, tfm_phase ph, double t0) {
    if (g->profile) g->phase_time[ph] += tfm_now() - t0;
}

void tfm_profile_merge(tfm_graph *g, tfm_graph *const *workers, int k) {
    double wall = g->phase_time[TFM_PHASE_CHUNKS], busy = 0;
    for (int i = 0; i < k; i++) {
        for (int op = 0; op < TFM_OP_COUNT; op++) busy += workers[i]->op_time[op];
        for (int ph = 0; ph < TFM_PHASE_COUNT; ph++) busy += workers[i]->phase_time[ph];
    }
    if (!(busy > 0)) return;
    double scale = wall / busy;
    for (int i = 0; i < k; i++) {
        tfm_graph *w = workers[i];
        for (int op = 0; op < TFM_OP_COUNT; op++) g->op_time[op] += w->op_time[op] * scale, w->op_time[op] = 0;
        for (int ph = 0; ph < TFM_PHASE_COUNT; ph++) g->phase_time[ph] += w->phase_time[ph] * scale, w->phase_time[ph] = 0;
    }
    g->phase_time[TFM_PHASE_CHUNKS] = 0;
}

typedef struct { const char *name; double t; } prof_row;

static int prof_row_cmp(const void *a, const void *b) {
    double x = ((const prof_row *)a)->t, y = ((const prof_row *)b)->t;
    return (x < y) - (x > y);
}

void tfm_profile_print(const tfm_graph *g, long units, const char *unit, double wall, const char *kernels, void *file) {
    FILE *f = file ? file : stderr;
    prof_row rows[TFM_OP_COUNT + TFM_PHASE_COUNT];
    int n = 0;
    double tracked = 0;
    for (int i = 0; i < TFM_OP_COUNT; i++)
        if (g->op_time[i] > 0) rows[n++] = (prof_row){tfm_op_name(i), g->op_time[i]};
    for (int i = 0; i < TFM_PHASE_COUNT; i++)
        if (g->phase_time[i] > 0) rows[n++] = (prof_row){tfm_phase_name(i), g->phase_time[i]};
    for (int i = 0; i < n; i++) tracked += rows[i].t;
    qsort(rows, (size_t)n, sizeof rows[0], prof_row_cmp);
    if (units < 1) units = 1;
    if (wall < tracked) wall = tracked;
    fprintf(f, "profile (ms per %s over %ld %ss; an op's time includes its backward when training%s%s):\n",
            unit, units, unit, kernels ? "; kernels " : "", kernels ? kernels : "");
    for (int i = 0; i < n; i++)
        fprintf(f, "  %-14s %9.3f  %5.1f%%\n", rows[i].name, 1e3 * rows[i].t / units, 100 * rows[i].t / wall);
    fprintf(f, "  %-14s %9.3f  %5.1f%%\n", "(untracked)", 1e3 * (wall - tracked) / units,
            wall > 0 ? 100 * (wall - tracked) / wall : 0.0);
    fprintf(f, "  %-14s %9.3f\n", "total", 1e3 * wall / units);
}
