/* Embedding lookup and LayerNorm. */
#include "ops/op_impl.h"
#include "ops/vmath.h"
#include "ops/isa.h"
#include "core/q8.h"
#include <stdlib.h>
#include <math.h>
#include <omp.h>
#include <string.h>

tfm_tensor *tfm_embedding(tfm_graph *g, tfm_tensor *table, const int *ids, int ndim, const int *shape) {
    OP_BEGIN(g);
    TFM_ASSERT(table->ndim == 2 && ndim >= 1 && ndim < TFM_MAX_DIMS, "embedding: bad shapes");
    int V = table->shape[0], C = table->shape[1];
    size_t n = tfm_shape_size(ndim, shape);
    int oshape[TFM_MAX_DIMS];
    memcpy(oshape, shape, sizeof(int) * ndim);
    oshape[ndim] = C;
    tfm_tensor *out = tfm_tensor_new(g, ndim + 1, oshape, tfm_any_grad(g, &table, 1));
    for (size_t i = 0; i < n; i++) TFM_ASSERT(ids[i] >= 0 && ids[i] < V, "embedding: id %d not in [0,%d)", ids[i], V);
    const tfm_q8_weight *q8 = table->q8 && !out->grad ? table->q8 : NULL;   /* an int8 table at inference */
    TFM_ASSERT(q8 || table->data, "embedding: %s holds no float values (an int8 model loaded for inference)",
               table->name ? table->name : "the table");
    TFM_PAR_FOR(n * C >= 16384, schedule(static),
    for (size_t i = 0; i < n; i++) {
        if (q8) tfm_q8_row_floats(q8, ids[i], out->data + i * C);
        else memcpy(out->data + i * C, table->data + (size_t)ids[i] * C, sizeof(float) * C);
    });
    tfm_node *node = tfm_graph_push(g, TFM_OP_EMBEDDING, out, 1, &table);
    if (node) {
        int *copy = tfm_arena_alloc(&g->arena, n * sizeof(int));
        memcpy(copy, ids, n * sizeof(int));
        node->aux = copy;
        node->ip[0] = (int)n;
    }
    OP_END(g, TFM_OP_EMBEDDING);
    return out;
}

/* Threads split the embedding columns, so each row of the table is summed in id order. */
void tfm_bw_embedding(tfm_node *n) {
    tfm_tensor *table = n->in[0];
    const int *ids = n->aux;
    int count = n->ip[0], C = table->shape[1];
    TFM_PAR_TEAM((size_t)count * C >= 16384, , {
        int per = (C + team_size - 1) / team_size, c0 = team_rank * per, c1 = c0 + per < C ? c0 + per : C;
        for (int i = 0; i < count; i++) {
            float *dst = table->grad + (size_t)ids[i] * C;
            const float *src = n->out->grad + (size_t)i * C;
            for (int c = c0; c < c1; c++) dst[c] += src[c];
        }
    });
}

/* ---------------------------------------------------------------- layernorm */
/* One row: mean (vector sum), centred values written to the output, variance from them (the row
 * stays in L1), then scale/shift in place. */
static inline __attribute__((always_inline)) void ln_row(float *o, float *mean, float *rstd, const float *xr,
                                                          const float *w, const float *b, int C, float eps) {
    float m = tfm_vsum(xr, (size_t)C) / C;
    for (int c = 0; c < C; c++) o[c] = xr[c] - m;
    float v = tfm_vdot(o, o, (size_t)C) / C;
    float s = 1.0f / sqrtf(v + eps);
    if (w && b)
        for (int c = 0; c < C; c++) o[c] = o[c] * s * w[c] + b[c];
    else
        for (int c = 0; c < C; c++) o[c] = o[c] * s * (w ? w[c] : 1.0f) + (b ? b[c] : 0.0f);
    *mean = m;
    *rstd = s;
}

/* ln_row compiled once per instruction-set path (same bits on each). */
#define LN_ROW_ARGS float *o, float *mean, float *rstd, const float *xr, const float *w, const float *b, int C, float eps
#define LN_ROW_PASS o, mean, rstd, xr, w, b, C, eps
typedef void (*ln_row_fn)(LN_ROW_ARGS);
static void ln_row_c(LN_ROW_ARGS) { ln_row(LN_ROW_PASS); }
#if TFM_X86
TFM_TARGET_AVX2 static void ln_row_avx2(LN_ROW_ARGS) { ln_row(LN_ROW_PASS); }
TFM_TARGET_AVX512 static void ln_row_avx512(LN_ROW_ARGS) { ln_row(LN_ROW_PASS); }
static const ln_row_fn ln_row_paths[TFM_ISA_COUNT] = {ln_row_c, ln_row_avx2, ln_row_avx512};
#else
static const ln_row_fn ln_row_paths[TFM_ISA_COUNT] = {ln_row_c, ln_row_c, ln_row_c};
#endif

/* add_layernorm's forward row: z = dropout(y) + x (keep bytes, or none), then ln_row of z; compiled once
 * per path like ln_row (a select, a multiply and an add per value: the same bits on each). */
#define ADD_LN_ROW_ARGS float *o, float *mean, float *rstd, float *z, const float *xr, const float *yr, \
                        const uint8_t *keep, float scale, const float *w, const float *b, int C, float eps
#define ADD_LN_ROW_PASS o, mean, rstd, z, xr, yr, keep, scale, w, b, C, eps
typedef void (*add_ln_row_fn)(ADD_LN_ROW_ARGS);
static inline __attribute__((always_inline)) void add_ln_row(ADD_LN_ROW_ARGS) {
    if (!keep)
        for (int c = 0; c < C; c++) z[c] = yr[c] + xr[c];
    else
        for (int c = 0; c < C; c++) z[c] = tfm_keep_or_zero(yr[c] * scale, keep[c]) + xr[c];
    ln_row(o, mean, rstd, z, w, b, C, eps);
}
static void add_ln_row_c(ADD_LN_ROW_ARGS) { add_ln_row(ADD_LN_ROW_PASS); }
#if TFM_X86
TFM_TARGET_AVX2 static void add_ln_row_avx2(ADD_LN_ROW_ARGS) { add_ln_row(ADD_LN_ROW_PASS); }
TFM_TARGET_AVX512 static void add_ln_row_avx512(ADD_LN_ROW_ARGS) { add_ln_row(ADD_LN_ROW_PASS); }
static const add_ln_row_fn add_ln_row_paths[TFM_ISA_COUNT] = {add_ln_row_c, add_ln_row_avx2, add_ln_row_avx512};
#else
static const add_ln_row_fn add_ln_row_paths[TFM_ISA_COUNT] = {add_ln_row_c, add_ln_row_c, add_ln_row_c};
#endif

/* Forward: rows split over threads. */
void tfm_layernorm_forward(float *out, float *mean, float *rstd, const float *x, const float *w, const float *b,
                           int rows, int C, float eps) {
    const ln_row_fn row = ln_row_paths[tfm_isa_active()];
    TFM_PAR_FOR((size_t)rows * C >= 8192, schedule(dynamic, tfm_dyn_chunk(rows)),
    for (int r = 0; r < rows; r++) {
        row(out + (size_t)r * C, mean + r, rstd + r, x + (size_t)r * C, w, b, C, eps);
    });
}

/* Backward in one pass over (dout, x): per row, dx += rstd * (dnorm - mean(dnorm) - norm * mean(dnorm * norm))
 * with dnorm = dout * w, and the row's dout*norm / dout are added to per-chunk partial dw / db. Chunks are
 * fixed blocks of LN_CHUNK rows (independent of the thread count) reduced in order afterwards, so results
 * are the same for any number of threads. Scratch grows once and is reused (no malloc in steady state). */
#define LN_CHUNK 32

/* AddNorm's backward: the input z = x + dropout(y) of the LayerNorm gets dz, which goes to dx as is and to
 * dy through the dropout keep mask (saved by the forward) and scale. dy NULL: plain LayerNorm. */
typedef struct {
    float *dy;
    const uint8_t *keep;     /* NULL: no dropout */
    float scale;
    int assign_x, assign_y;  /* write dx / dy instead of adding to them (their grads are fresh: tfm_bw_fresh) */
} ln_split;

/* 8 floats as one value (GCC/clang generic vectors): AVX2 registers on that path, pairs of SSE registers
 * on the portable one; every lane does the scalar arithmetic (no FMA contraction under -std=c11). v8u is
 * the unaligned, aliasing view of 8 floats in memory. */
typedef float v8f __attribute__((vector_size(32)));
typedef int v8i __attribute__((vector_size(32)));
typedef float v8u __attribute__((vector_size(32), aligned(4), may_alias));
#define V8_LOAD(p) ((v8f)(*(const v8u *)(p)))
#define V8_STORE(p, v) (*(v8u *)(p) = (v))
#define V8_SET1(x) ((v8f){(x), (x), (x), (x), (x), (x), (x), (x)})

/* Rows [r0, r1) of the backward (pw/pb: this chunk's dw/db partials, or NULL); compiled once per
 * instruction-set path, the same bits on each. The row sums go to 8 lanes (lane k sums the columns c
 * with c % 8 == k, in order), added in lane order at the end. */
static inline __attribute__((always_inline)) void ln_bw_rows(float *dx, const ln_split *sp, float *pw, float *pb,
                                                              const float *dout, const float *x, const float *w,
                                                              const float *mean, const float *rstd, int r0, int r1,
                                                              int C) {
    float *dyo = sp ? sp->dy : NULL;
    const uint8_t *keep_all = sp ? sp->keep : NULL;
    const float kscale = sp ? sp->scale : 1.0f;
    const int ax = sp && sp->assign_x, ay = sp && sp->assign_y;
    const int C8 = C / 8 * 8;
    for (int r = r0; r < r1; r++) {
        const float *xr = x + (size_t)r * C, *dr = dout + (size_t)r * C;
        const float m = mean[r], s = rstd[r];
        const v8f vm = V8_SET1(m), vs = V8_SET1(s);
        v8f acc_d = V8_SET1(0.0f), acc_dn = acc_d;
        int c = 0;
        for (; c < C8; c += 8) { /* row sums of dnorm and dnorm * norm; dw, db partials */
            v8f d = V8_LOAD(dr + c), nrm = (V8_LOAD(xr + c) - vm) * vs;
            v8f dn = w ? d * V8_LOAD(w + c) : d;
            acc_d += dn;
            acc_dn += dn * nrm;
            if (pw) {
                V8_STORE(pw + c, V8_LOAD(pw + c) + d * nrm);
                V8_STORE(pb + c, V8_LOAD(pb + c) + d);
            }
        }
        for (int k = 0; c < C; c++, k++) {
            float nrm = (xr[c] - m) * s, dn = w ? dr[c] * w[c] : dr[c];
            acc_d[k] += dn;
            acc_dn[k] += dn * nrm;
            if (pw) {
                pw[c] += dr[c] * nrm;
                pb[c] += dr[c];
            }
        }
        float sum_d = 0, sum_dn = 0;
        for (int k = 0; k < 8; k++) {
            sum_d += acc_d[k];
            sum_dn += acc_dn[k];
        }
        if (!dx && !dyo) continue;
        sum_d /= C;
        sum_dn /= C;
        float *o = dx ? dx + (size_t)r * C : NULL, *oy = dyo ? dyo + (size_t)r * C : NULL;
        const uint8_t *keep = oy && keep_all ? keep_all + (size_t)r * C : NULL;
        const v8f vsd = V8_SET1(sum_d), vsdn = V8_SET1(sum_dn), vks = V8_SET1(kscale);
        for (c = 0; c < C8; c += 8) { /* dz = s * (dnorm - mean(dnorm) - norm * mean(dnorm * norm)) */
            v8f d = V8_LOAD(dr + c), dn = w ? d * V8_LOAD(w + c) : d;
            v8f dz = vs * (dn - vsd - (V8_LOAD(xr + c) - vm) * vs * vsdn);
            if (o) V8_STORE(o + c, ax ? dz : V8_LOAD(o + c) + dz);
            if (oy && !keep) V8_STORE(oy + c, ay ? dz : V8_LOAD(oy + c) + dz);
            else if (oy) { /* through the dropout: dropped lanes get +0 (oy starts at +0 and only adds) */
                v8i kept = {-(keep[c] != 0), -(keep[c + 1] != 0), -(keep[c + 2] != 0), -(keep[c + 3] != 0),
                            -(keep[c + 4] != 0), -(keep[c + 5] != 0), -(keep[c + 6] != 0), -(keep[c + 7] != 0)};
                v8f add = (v8f)((v8i)(dz * vks) & kept);
                V8_STORE(oy + c, ay ? add : V8_LOAD(oy + c) + add);
            }
        }
        for (; c < C; c++) {
            float dn = w ? dr[c] * w[c] : dr[c];
            float dz = s * (dn - sum_d - (xr[c] - m) * s * sum_dn);
            if (o) o[c] = ax ? dz : o[c] + dz;
            float dzy = !keep ? dz : tfm_keep_or_zero(dz * kscale, keep[c]);
            if (oy) oy[c] = ay ? dzy : oy[c] + dzy;
        }
    }
}

#define LN_BW_ARGS float *dx, const ln_split *sp, float *pw, float *pb, const float *dout, const float *x, \
                   const float *w, const float *mean, const float *rstd, int r0, int r1, int C
#define LN_BW_PASS dx, sp, pw, pb, dout, x, w, mean, rstd, r0, r1, C
typedef void (*ln_bw_fn)(LN_BW_ARGS);
static void ln_bw_rows_c(LN_BW_ARGS) { ln_bw_rows(LN_BW_PASS); }
#if TFM_X86
TFM_TARGET_AVX2 static void ln_bw_rows_avx2(LN_BW_ARGS) { ln_bw_rows(LN_BW_PASS); }
TFM_TARGET_AVX512 static void ln_bw_rows_avx512(LN_BW_ARGS) { ln_bw_rows(LN_BW_PASS); }
static const ln_bw_fn ln_bw_paths[TFM_ISA_COUNT] = {ln_bw_rows_c, ln_bw_rows_avx2, ln_bw_rows_avx512};
#else
static const ln_bw_fn ln_bw_paths[TFM_ISA_COUNT] = {ln_bw_rows_c, ln_bw_rows_c, ln_bw_rows_c};
#endif

static void ln_backward(float *dx, const ln_split *sp, float *dw, float *db, const float *dout, const float *x,
                        const float *w, const float *mean, const float *rstd, int rows, int C) {
    int nch = (rows + LN_CHUNK - 1) / LN_CHUNK;
    int want_p = dw || db;
    size_t need = want_p ? (size_t)nch * 2 * C : 0;
    float *part = need ? tfm_thread_scratch(TFM_SCRATCH_NORM, need) : NULL;   /* the calling thread's */
    if (need && !part) tfm_fatal("out of memory (layernorm scratch)");
    const ln_bw_fn ln_bw = ln_bw_paths[tfm_isa_active()];
    TFM_PAR_FOR((size_t)rows * C >= 8192, schedule(dynamic, 1),
    for (int ch = 0; ch < nch; ch++) {
        float *pw = want_p ? part + (size_t)ch * 2 * C : NULL, *pb = pw ? pw + C : NULL;
        if (pw) memset(pw, 0, sizeof(float) * 2 * C);
        int r1 = (ch + 1) * LN_CHUNK < rows ? (ch + 1) * LN_CHUNK : rows;
        ln_bw(dx, sp, pw, pb, dout, x, w, mean, rstd, ch * LN_CHUNK, r1, C);
    });
    if (want_p) {
        TFM_PAR_FOR((size_t)nch * C >= 8192, schedule(static),
        for (int c = 0; c < C; c++) {
            float sw = 0, sb = 0;
            for (int ch = 0; ch < nch; ch++) {
                sw += part[(size_t)ch * 2 * C + c];
                sb += part[(size_t)ch * 2 * C + C + c];
            }
            if (dw) dw[c] += sw;
            if (db) db[c] += sb;
        });
    }
}

void tfm_layernorm_backward(float *dx, float *dw, float *db, const float *dout, const float *x, const float *w,
                            const float *mean, const float *rstd, int rows, int C) {
    ln_backward(dx, NULL, dw, db, dout, x, w, mean, rstd, rows, C);
}

tfm_tensor *tfm_layernorm(tfm_graph *g, tfm_tensor *x, tfm_tensor *w, tfm_tensor *b, float eps) {
    OP_BEGIN(g);
    int C = tfm_last_dim(x), rows = (int)tfm_rows(x);
    TFM_ASSERT((!w || (int)w->size == C) && (!b || (int)b->size == C), "layernorm: weight size != %d", C);
    tfm_tensor *in[3] = {x, w, b};
    tfm_tensor *out = tfm_tensor_new(g, x->ndim, x->shape, tfm_any_grad(g, in, 3));
    float *stats = tfm_arena_alloc(&g->arena, sizeof(float) * 2 * rows);
    tfm_layernorm_forward(out->data, stats, stats + rows, x->data, w ? w->data : NULL, b ? b->data : NULL, rows, C,
                          eps);
    tfm_node *n = tfm_graph_push(g, TFM_OP_LAYERNORM, out, 3, in);
    if (n) n->saved = stats;
    OP_END(g, TFM_OP_LAYERNORM);
    return out;
}

void tfm_bw_layernorm(tfm_node *n) {
    tfm_tensor *x = n->in[0], *w = n->in[1], *b = n->in[2];
    int C = tfm_last_dim(x), rows = (int)tfm_rows(x);
    const float *stats = n->saved;
    ln_split sp = {.assign_x = tfm_bw_fresh(n, 0)};
    ln_backward(x->grad, &sp, w ? w->grad : NULL, b ? b->grad : NULL, n->out->grad, x->data, w ? w->data : NULL,
                stats, stats + rows, rows, C);
}

/* ---------------------------------------------------------------- AddNorm: LayerNorm(x + dropout(y)) */
/* saved: z = x + dropout(y) (rows, C), mean and rstd (rows each), and the dropout keep mask (rows, C
 * bytes) when dropout is active. The dropout key is drawn exactly as tfm_dropout draws it, so this op
 * gives the same numbers as tfm_layernorm(tfm_add(tfm_dropout(y), x)) with one saved tensor instead of
 * four tensors. */
typedef struct {
    float *z, *stats;
    ln_split sp;
} add_ln_saved;

tfm_tensor *tfm_add_layernorm(tfm_graph *g, tfm_tensor *x, tfm_tensor *y, float p, tfm_tensor *w, tfm_tensor *b,
                              float eps) {
    OP_BEGIN(g);
    int C = tfm_last_dim(x), rows = (int)tfm_rows(x);
    TFM_ASSERT(tfm_same_shape(x, y), "add_layernorm: x and y shapes differ");
    TFM_ASSERT((!w || (int)w->size == C) && (!b || (int)b->size == C), "add_layernorm: weight size != %d", C);
    TFM_ASSERT(p >= 0.0f && p < 1.0f, "add_layernorm: dropout p=%g must be in [0,1)", p);
    tfm_tensor *in[4] = {x, y, w, b};
    tfm_tensor *out = tfm_tensor_new(g, x->ndim, x->shape, tfm_any_grad(g, in, 4));
    add_ln_saved *sv = tfm_arena_alloc(&g->arena, sizeof *sv);
    sv->z = tfm_arena_alloc(&g->arena, sizeof(float) * x->size);
    sv->stats = tfm_arena_alloc(&g->arena, sizeof(float) * 2 * (size_t)rows);
    sv->sp = (ln_split){0};
    uint64_t key = 0;
    uint32_t thresh = 0;
    uint8_t *keep = NULL;
    if (g->training && p > 0.0f) {
        key = tfm_drop_key(g) + tfm_drop_offset(g, x->size);
        thresh = tfm_drop_thresh(p);
        keep = tfm_arena_alloc(&g->arena, x->size);
        sv->sp.keep = keep;
        sv->sp.scale = 1.0f / (1.0f - p);
    }
    float scale = sv->sp.scale;
    const float *wd = w ? w->data : NULL, *bd = b ? b->data : NULL;
    const add_ln_row_fn row = add_ln_row_paths[tfm_isa_active()];
    TFM_PAR_FOR((size_t)rows * C >= 8192, schedule(dynamic, tfm_dyn_chunk(rows)),
    for (int r = 0; r < rows; r++) {
        size_t o = (size_t)r * C;
        if (keep) tfm_vdrop_keep(keep + o, key + o, thresh, (size_t)C);
        row(out->data + o, sv->stats + r, sv->stats + rows + r, sv->z + o, x->data + o, y->data + o,
            keep ? keep + o : NULL, scale, wd, bd, C, eps);
    });
    tfm_node *n = tfm_graph_push(g, TFM_OP_ADD_LAYERNORM, out, 4, in);
    if (n) n->saved = sv;
    OP_END(g, TFM_OP_ADD_LAYERNORM);
    return out;
}

void tfm_bw_add_layernorm(tfm_node *n) {
    tfm_tensor *x = n->in[0], *y = n->in[1], *w = n->in[2], *b = n->in[3];
    int C = tfm_last_dim(x), rows = (int)tfm_rows(x);
    add_ln_saved *sv = n->saved;
    ln_split sp = sv->sp;
    sp.dy = y->grad;
    sp.assign_x = tfm_bw_fresh(n, 0);
    sp.assign_y = tfm_bw_fresh(n, 1);
    ln_backward(x->grad, &sp, w ? w->grad : NULL, b ? b->grad : NULL, n->out->grad, sv->z, w ? w->data : NULL,
                sv->stats, sv->stats + rows, rows, C);
}
