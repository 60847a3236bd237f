/* tfm core: arena, tensors, the autodiff graph, RNG, threads, errors.
 *
 * Memory model
 *   - Parameters live in a tfm_params set: one contiguous data block and one contiguous grad block,
 *     allocated once when the model is built.
 *   - Everything a forward pass creates (tensor structs, activations, their grads, saved buffers,
 *     graph nodes) comes from the graph's arena. tfm_graph_reset() rewinds it, so after the first
 *     step (warm-up) a training or decoding loop does no malloc.
 *
 * Autodiff
 *   - Every differentiable op appends one node (op enum + inputs + output + saved state) to the
 *     graph's tape when grad is enabled and any input needs grad. tfm_backward() walks the tape in
 *     reverse and calls each op's backward kernel, which ACCUMULATES into input grads.
 *   - tfm_graph_print() prints the tape (ggml style: the graph is data).
 */
#ifndef TFM_CORE_H
#define TFM_CORE_H

#include "tfm/export.h"

#include <stddef.h>
#include <stdint.h>

#define TFM_MAX_DIMS 4

/* ---------------------------------------------------------------- errors */
/* Library functions that can fail on user input return NULL / -1 and set a one-line message. */
TFM_API void tfm_set_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
TFM_API const char *tfm_last_error(void);
/* What kind of failure the current error is, so a program can react (the tfm CLI maps it to its exit
 * status: man tfm, EXIT STATUS). tfm_set_error() sets TFM_ERR_OTHER; tfm_prefix_error() keeps the kind. */
typedef enum {
    TFM_ERR_OTHER = 0, /* an invalid argument, a numerical fault, anything not below */
    TFM_ERR_DATA,      /* a file's contents are malformed or inconsistent: format, CRC, ranges, encoding */
    TFM_ERR_IO,        /* the system refused: open, read, write, fsync, rename (ENOENT, EACCES, ENOSPC, EROFS) */
    TFM_ERR_NOMEM,     /* out of memory */
    TFM_ERR_ARG,       /* an argument or option the caller gave is invalid (the CLI's usage error, exit 2) */
} tfm_error_kind;
TFM_API void tfm_set_error_kind(tfm_error_kind kind, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
TFM_API tfm_error_kind tfm_last_error_kind(void);
/* For loaders, on their failure path once a file was opened: an unclassified (TFM_ERR_OTHER) error becomes
 * TFM_ERR_DATA (I/O and out-of-memory errors stay what they are). Returns -1. */
TFM_API int tfm_error_in_data(void);
/* Put formatted text in front of the current error ("PATH: " + "bad config: ..."); returns -1, so a
 * failing call can end with `return tfm_prefix_error("%s: ", path);`. */
TFM_API int tfm_prefix_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* All of an open stream (a FILE*, e.g. stdin) into one NUL-terminated malloc'd buffer, at most max
 * bytes; NULL with an error naming name (read error, too large, out of memory). */
TFM_API char *tfm_read_stream(void *file, const char *name, size_t max, size_t *len);
/* Abort with a message: for programming errors (shape mismatch inside the library), never user input. */
TFM_API void tfm_fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
#define TFM_ASSERT(cond, ...) do { if (!(cond)) tfm_fatal(__VA_ARGS__); } while (0)

/* ---------------------------------------------------------------- threads */
/* Scratch memory for kernels, one set per thread: at least n floats, 64-byte aligned, contents not kept
 * when it grows; reused by later calls of the same thread, freed when the thread exits. NULL if out of
 * memory. A kernel asks from the calling thread and hands the buffer to its OpenMP workers, or asks from
 * each worker (GEMM packing). No two threads ever share one. */
/* Overflow-checked size arithmetic for sizes built from user-controlled numbers (flags, config fields).
 * tfm_mul_size_overflow: 1 if a*b does not fit a size_t, else 0 with *out = a*b.
 * tfm_mul_i64_sat: a*b for a, b >= 0, saturated at INT64_MAX (an estimate that cannot wrap).
 * TFM_MAX_STEP_ELEMS: the most float elements of activations one training step or one decoding batch may
 * need by the models' estimates (tfm_gpt_step_elems, tfm_mt_step_elems): 2^31 = 8 GiB. Beyond it the
 * workflows refuse with an error naming the flags, before allocating. */
TFM_API int tfm_mul_size_overflow(size_t a, size_t b, size_t *out);
TFM_API int64_t tfm_mul_i64_sat(int64_t a, int64_t b);
#define TFM_MAX_STEP_ELEMS ((int64_t)1 << 31)
/* The most parameters a model may have (8 GiB of f32 weights); tfm_gpt_init and tfm_mt_net_create check it
 * before allocating. */
#define TFM_MAX_PARAMS ((int64_t)1 << 31)
/* 1 if every x[i] is finite (no NaN, no infinity), else 0: a model's outputs or weights before they are used. */
TFM_API int tfm_all_finite(const float *x, size_t n);

typedef enum {
    TFM_SCRATCH_GEMM, TFM_SCRATCH_ATTENTION, TFM_SCRATCH_NORM, TFM_SCRATCH_BF16_A, TFM_SCRATCH_BF16_B, TFM_SCRATCH_Q8,
    TFM_SCRATCH_COUNT
} tfm_scratch_slot;
TFM_API float *tfm_thread_scratch(tfm_scratch_slot slot, size_t n);

/* n <= 0: tfm_default_threads(); n > TFM_MAX_THREADS is clamped (per-thread scratch buffers are sized
 * by the thread count). */
#define TFM_MAX_THREADS 1024
TFM_API void tfm_set_threads(int n);
TFM_API int tfm_get_threads(void);
/* The thread count when none is given: OMP_NUM_THREADS (its first value) if set to a positive integer,
 * else the number of CPUs this process may run on (sched_getaffinity: taskset, cgroup cpusets; with OpenMP
 * binding asked for, OMP_PROC_BIND / OMP_PLACES / GOMP_CPU_AFFINITY, the CPUs of the places: the runtime has
 * already bound the calling thread to the first one), and at most the ceiling of a cgroup CPU quota
 * (tfm_cpu_quota), >= 1. */
TFM_API int tfm_default_threads(void);
/* The CPUs a cgroup CPU quota grants this process (docker --cpus, Kubernetes CPU limits, systemd CPUQuota=):
 * quota / period, the smallest from its cgroup up to the root, in cgroup v2 (cpu.max) or v1's cpu controller
 * (cpu.cfs_quota_us); 0 if there is none. tfm_default_threads uses at most ceil of it. */
TFM_API double tfm_cpu_quota(void);
/* The same with /proc/self and the cgroup mounts read under PREFIX ("" = the real ones; tests: a made-up tree). */
TFM_API double tfm_cpu_quota_at(const char *prefix);
/* Call first thing in main (argv as given to main). Makes idle OpenMP threads sleep after a short spin
 * (~0.3 ms) instead of the runtime's default (GNU libgomp: 300000 pause loops, ~10 ms; LLVM libomp: 200 ms),
 * so on a busy machine a waiting thread frees its core for the thread it waits for. Does nothing if
 * OMP_WAIT_POLICY, GOMP_SPINCOUNT or KMP_BLOCKTIME is set. Both runtimes read those before main, so:
 * with libomp it calls kmp_set_blocktime(1); with libgomp it re-executes the program (/proc/self/exe, same
 * argv) with GOMP_SPINCOUNT=TFM_SPINCOUNT (under qemu-user the new image would run natively: set
 * GOMP_SPINCOUNT there; with binding asked for, the new image gets the places' CPUs back, not the one CPU
 * libgomp bound this thread to). Returns 0 when no re-exec is needed, -1 if it failed (the program carries on). */
#define TFM_SPINCOUNT "10000"
TFM_API int tfm_threads_short_spin(char **argv);

/* ---------------------------------------------------------------- RNG */
/* xorshift-based, deterministic across platforms. */
typedef struct { uint64_t s; } tfm_rng;
TFM_API void tfm_rng_seed(tfm_rng *r, uint64_t seed);
TFM_API uint32_t tfm_rng_u32(tfm_rng *r);
TFM_API float tfm_rng_uniform(tfm_rng *r);            /* [0,1) */
TFM_API float tfm_rng_normal(tfm_rng *r);             /* N(0,1), Box-Muller */

/* ---------------------------------------------------------------- arena */
/* A list of chunks kept for the arena's lifetime. Allocation bumps the current chunk and moves on to the
 * next one when a request does not fit; a new chunk (as large as all earlier ones together, or the
 * request) is malloc'd only when the list is exhausted. Reset rewinds to the first chunk, so once a
 * loop has seen its largest step it never mallocs again, and no page is ever handed back and faulted in
 * anew. */
typedef struct tfm_arena_chunk tfm_arena_chunk;
typedef struct {
    tfm_arena_chunk *head;   /* first chunk */
    tfm_arena_chunk *cur;    /* chunk being filled */
    size_t used_total;       /* bytes handed out since the last reset */
    size_t peak;             /* max used_total ever seen */
    size_t cap_total;        /* bytes in all chunks */
    size_t n_mallocs;        /* number of chunk mallocs (tests check this stops growing) */
} tfm_arena;
TFM_API void tfm_arena_init(tfm_arena *a, size_t initial_bytes);
TFM_API void *tfm_arena_alloc(tfm_arena *a, size_t bytes);        /* 64-byte aligned, NOT zeroed */
TFM_API void *tfm_arena_calloc(tfm_arena *a, size_t bytes);       /* zeroed */
TFM_API void tfm_arena_reset(tfm_arena *a);  /* rewinds to the first chunk; keeps every chunk */
/* A position to rewind to: tfm_arena_rewind(a, tfm_arena_tell(a)) later hands back everything allocated in
 * between (for a loop whose intermediates die each iteration, e.g. an encoder's layers at inference). */
typedef struct {
    tfm_arena_chunk *chunk;
    size_t used, used_total;
} tfm_arena_pos;
TFM_API tfm_arena_pos tfm_arena_tell(const tfm_arena *a);
TFM_API void tfm_arena_rewind(tfm_arena *a, tfm_arena_pos p);
TFM_API void tfm_arena_free(tfm_arena *a);

/* ---------------------------------------------------------------- tensors */
typedef struct tfm_tensor {
    float *data;              /* contiguous row-major float32 */
    float *grad;              /* same shape, or NULL if no grad is tracked */
    int ndim;
    int shape[TFM_MAX_DIMS];
    size_t size;              /* number of elements */
    const char *name;         /* parameters: the full dotted name ("blocks.0.attn.W_q.weight") */
    int grad_unzeroed;        /* graph tensors: grad not zeroed yet; tfm_backward zeroes it right before
                                 the first op that uses it, when its lines are about to be written anyway */
    struct tfm_tensor *view_of; /* a reshape: the tensor whose data and grad it shares (that one's
                                   grad_unzeroed counts), else NULL */
    /* A parameter of an int8 model (tfm quantize): its int8 form, else NULL. `data` then holds the
     * dequantized values (scale[r] * q[r][c]); tfm_linear and tfm_matmul multiply by the int8 form where no
     * grad is tracked (include/tfm/kernels.h, tfm_gemm_q8). */
    const struct tfm_q8_weight *q8;
    /* A linear weight held only in the GEMM's packed layout (tfm_params_hold_packed, a model loaded for
     * inference): its values are there and `data` is NULL; tfm_linear multiplies by them. Else NULL. */
    const float *packed;
} tfm_tensor;

TFM_API size_t tfm_shape_size(int ndim, const int *shape);
TFM_API int tfm_same_shape(const tfm_tensor *a, const tfm_tensor *b);
/* "(2,3,4)" into buf */
TFM_API const char *tfm_shape_str(const tfm_tensor *t, char *buf, size_t n);
/* last dim and product of the others */
static inline int tfm_last_dim(const tfm_tensor *t) { return t->shape[t->ndim - 1]; }
static inline size_t tfm_rows(const tfm_tensor *t) { return t->size / (size_t)t->shape[t->ndim - 1]; }

/* ---------------------------------------------------------------- parameters */
/* ---------------------------------------------------------------- int8 weights (tfm quantize) */
/* A (rows, cols) weight held as int8 with one fp32 scale per row, W[r][c] ~ scale[r] * q[r][c] (a row is an
 * output channel of a linear layer, a token of an embedding). Symmetric: q in [-127, 127], never -128. Each
 * row is zero-padded to ld bytes (a multiple of TFM_Q8_ALIGN; the buffer 64-byte aligned), the layout the
 * int8 GEMM reads (tfm_gemm_q8); sum[r] = sum of row r's q (the VNNI kernel's compensation term). */
#define TFM_Q8_ALIGN 64
#define TFM_Q8_MAX_COLS 65536   /* keeps every int32 sum of the kernels exact: 65536 * 127 * 127 < 2^31 */
typedef struct tfm_q8_weight {
    int rows, cols, ld;
    int8_t *q;               /* rows * ld */
    float *scale;            /* rows */
    int32_t *sum;            /* rows */
    int8_t *panels;          /* NULL, or q laid out for GEMMs of many rows, made when they pay (private) */
    int many_row_calls;      /* GEMMs of 5 rows or more so far (private: when to make the panels) */
    struct tfm_q8_pool *pool; /* NULL, or where q and the panels live (private: a parameter set's weights) */
} tfm_q8_weight;
/* Quantize n values: amax = max |x|; scale = amax / 127 and q[i] = x[i] * (127 / amax) rounded to nearest
 * even (in [-127, 127]). A row with amax < TFM_Q8_TINY becomes zeros with scale 0; one holding a NaN or an
 * infinity becomes zeros with scale NaN (so products with it are NaN, as in fp32). Returns the scale.
 * Dequantized, |x[i] - scale * q[i]| <= scale / 2 (to float rounding). The int8 GEMM quantizes its
 * activation rows with the same arithmetic to 63 levels (7 bits; tfm_gemm_q8 in kernels.h). */
#define TFM_Q8_TINY 1e-30f
TFM_API float tfm_q8_quantize_row(const float *x, int n, int8_t *q);

typedef struct {
    tfm_tensor **t;           /* n tensors, in registration order */
    int n, cap;
    float *data, *grad;       /* contiguous blocks backing all tensors (after tfm_params_alloc) */
    size_t total;             /* total number of floats */
    size_t data_floats;       /* floats in data: total, or fewer once int8 parameters dropped theirs
                                 (tfm_params_drop_q8_floats) */
    tfm_q8_weight *q8;        /* NULL, or n entries: q8[i].q is set where t[i] is held in int8 (t[i]->q8) */
    struct tfm_q8_pool *q8_pool; /* private: the memory of the int8 weights and their panels */
} tfm_params;

TFM_API void tfm_params_init(tfm_params *p);
/* Register a parameter. Its data pointer is valid only after tfm_params_alloc(). Name is copied. */
TFM_API tfm_tensor *tfm_param(tfm_params *p, const char *name, int ndim, const int *shape);
TFM_API tfm_tensor *tfm_param1(tfm_params *p, const char *name, int d0);
TFM_API tfm_tensor *tfm_param2(tfm_params *p, const char *name, int d0, int d1);
TFM_API int tfm_params_alloc(tfm_params *p);   /* data (zeroed) and grad blocks; 0, or -1: out of memory (tfm error) */
TFM_API void tfm_params_zero_grad(tfm_params *p);
/* Declare p's grads empty without writing them (the training step, after the optimizer has read them):
 * the next tfm_backward's first writer of each grad assigns it instead of adding to zeros (a linear's
 * dW GEMM then never reads the old grad), or, where the first op only adds, zeroes it right before.
 * Until tfm_params_settle_grad, p->grad holds stale values wherever no backward has written since:
 * a parameter the graph did not use. */
TFM_API void tfm_params_release_grad(tfm_params *p);
/* Zero the released grads no backward has written (a no-op when every parameter was used): p->grad is
 * then the sum of the backwards since the release, as after tfm_params_zero_grad. */
TFM_API void tfm_params_settle_grad(tfm_params *p);
/* Makes `replica` (a parameter set built the same way as `src`, after tfm_params_alloc) use src's weights:
 * its own data block is freed and every tensor's data points at the same element of src's block; its
 * gradient block stays its own. Thread data parallelism (tfm_parallel, include/tfm/train.h) runs one
 * replica per chunk of the batch. 0, or -1 with a tfm error if the two sets differ in count, order, names or shapes. The
 * replica must be freed before src (tfm_params_free does not free a shared block). */
TFM_API int tfm_params_share_data(tfm_params *replica, const tfm_params *src);
TFM_API tfm_tensor *tfm_params_find(const tfm_params *p, const char *name);
TFM_API void tfm_params_free(tfm_params *p);
/* int8 parameters (tfm quantize; see tfm_q8_weight). tfm_params_quantize holds the 2-D parameter i in int8
 * from its current values (one scale per row) and replaces those with the dequantized ones.
 * tfm_params_set_q8 does the same from stored rows * cols bytes q (each in [-127, 127]) and rows scales
 * (finite, >= 0; a loader checks them first). Both: 0, or -1 with a tfm error (not 2-D, more than
 * TFM_Q8_MAX_COLS columns, out of memory). tfm_params_n_q8: how many parameters are held in int8. An int8
 * model is for inference: its weights must not change (tfm_adamw_init refuses it). */
TFM_API int tfm_params_quantize(tfm_params *p, int i);
TFM_API int tfm_params_set_q8(tfm_params *p, int i, const int8_t *q, const float *scale);
TFM_API int tfm_params_n_q8(const tfm_params *p);
/* For inference only: every parameter held in int8 gives up its float values (t->data becomes NULL; the int8
 * kernels, the embedding lookup and the tied output layer read t->q8), the other parameters move to a block of
 * their own (p->data, p->data_floats floats). An int8 model then holds its weights once, in int8, not twice.
 * Nothing may read such a parameter's floats afterwards (export, averaging, training: load the model again).
 * 0 (also with no int8 parameter), or -1 with a tfm error (out of memory; p unchanged). */
TFM_API int tfm_params_drop_q8_floats(tfm_params *p);

/* ---------------------------------------------------------------- graph */
typedef enum {
    TFM_OP_MATMUL, TFM_OP_LINEAR, TFM_OP_ADD, TFM_OP_SUB, TFM_OP_MUL, TFM_OP_SCALE,
    TFM_OP_ADD_SCALAR, TFM_OP_EMBEDDING, TFM_OP_LAYERNORM, TFM_OP_GELU, TFM_OP_RELU,
    TFM_OP_TANH, TFM_OP_SIGMOID, TFM_OP_EXP, TFM_OP_SQUARE, TFM_OP_SOFTMAX, TFM_OP_DROPOUT,
    TFM_OP_CROSS_ENTROPY, TFM_OP_PERMUTE, TFM_OP_CONCAT, TFM_OP_SLICE, TFM_OP_SUM, TFM_OP_MEAN,
    TFM_OP_ATTENTION, TFM_OP_ADD_OUTER, TFM_OP_LINEAR_GELU, TFM_OP_LINEAR_RELU, TFM_OP_ADD_LAYERNORM,
    TFM_OP_GATHER_ROWS, TFM_OP_SCATTER_ROWS, TFM_OP_SILU, TFM_OP_GELU_ERF, TFM_OP_SYM_KL, TFM_OP_COUNT
} tfm_op;
TFM_API const char *tfm_op_name(tfm_op op);

/* One recorded op of the tape (its fields: src/core/graph_impl.h, for the ops and the backward pass). */
typedef struct tfm_node tfm_node;

/* --profile: the parts of a step that are not ops, timed by the loops that run them. */
typedef enum {
    TFM_PHASE_ZERO_GRAD, TFM_PHASE_CLIP, TFM_PHASE_OPTIMIZER, TFM_PHASE_KV_CACHE, TFM_PHASE_SEARCH,
    TFM_PHASE_DIST_WAIT, TFM_PHASE_ALLREDUCE,   /* data parallel: waiting for the slowest rank, the sums */
    TFM_PHASE_CHUNKS, TFM_PHASE_REDUCE,   /* thread data parallel: the chunks' forward+backward (wall), their grad sum */
    TFM_PHASE_COUNT
} tfm_phase;
TFM_API const char *tfm_phase_name(tfm_phase ph);

#define TFM_GRAPH_SPARES 4
typedef struct tfm_graph {
    tfm_arena arena;
    tfm_node *nodes;          /* the tape, grown by realloc only during warm-up */
    int n_nodes, cap_nodes;
    int grad_enabled;         /* record nodes and allocate grads */
    int training;             /* dropout active */
    tfm_rng rng;              /* dropout randomness */
    /* Data parallelism (include/tfm/dist.h): when drop_samples > 0 this graph computes samples
     * [drop_sample0, drop_sample0 + drop_samples) of a larger global batch, and every dropout keys element
     * i of a sample-major tensor of `size` elements as element drop_sample0 * (size / drop_samples) + i of
     * the global batch's tensor: each sample gets the mask the single-process run draws for it, however
     * the batch is split. 0 (tfm_graph_init): no offset. */
    long drop_sample0, drop_samples;
    long drop_total;          /* the global batch's samples (time-major dropouts: tfm_dropout_time_major) */
    /* The same for tensors of packed token rows (a translator's training loss drops the padding): the global
     * index of the slice's first source [0] and target [1] token; the model swaps them into drop_sample0
     * (with its row count as drop_samples) around its row-wise dropouts. */
    long drop_row0[2];
    double op_time[TFM_OP_COUNT];   /* --profile: seconds per op kind (forward+backward) */
    double phase_time[TFM_PHASE_COUNT]; /* --profile: seconds per non-op phase */
    int profile;
    /* Per-graph attention settings (instead of process-wide flags, so two threads with two graphs never
     * race): exact_attention = 1 makes MultiHeadAttention take the exact path (scores, masked softmax,
     * weights @ V) instead of the fused op, tfm_graph_init sets it when the environment has
     * TFM_EXACT_ATTENTION=1; attention_tiled = 1 makes the fused op always use key tiles, never its
     * materialised per-batch-entry variant, attention_recompute = 1 makes that variant recompute the
     * probabilities in the backward and -1 makes it keep them (0: the op chooses; tests compare them). */
    int exact_attention, attention_tiled, attention_recompute;
    /* Weights packed in advance for the GEMMs of tfm_linear (include/tfm/ops.h, tfm_weight_packs), or NULL.
     * Set only while the weights stay fixed (decoding); worker graphs inherit it. */
    const struct tfm_weight_packs *packs;
    /* 1: tfm_linear and linear_gelu/relu run their GEMMs (forward and backward) with bfloat16 operands and
     * fp32 sums (tfm_gemm_bf16, --precision bf16); weights, activations and grads stay fp32. Workers inherit it. */
    int gemm_bf16;
    /* 1: tfm_backward recycles the grad buffers of intermediate tensors (src/core/grad_plan.c): a tensor's
     * grad lives from its first writer to its producer's backward in a pool that hands freed buffers on
     * while they are in cache. Only the grads of leaves (inputs, parameters) and the loss can be read after
     * tfm_backward then. The training loops set it; workers inherit it. */
    int recycle_grads;
    float *grad_pool;         /* the pool (grown only when a plan needs more) */
    size_t grad_pool_cap;     /* its floats */
    /* Blocks given back by decoding states (their KV caches) for the next batch's to take (tfm_graph_block_*):
     * memory already touched, instead of fresh pages each batch (a 4 KiB page's first touch costs 3-10 us on a
     * VM; blocks from 2 MiB up are on huge pages). Freed by tfm_graph_free. */
    void *spare[TFM_GRAPH_SPARES];
    size_t spare_bytes[TFM_GRAPH_SPARES];
} tfm_graph;

TFM_API void tfm_graph_init(tfm_graph *g, uint64_t seed);
TFM_API void tfm_graph_reset(tfm_graph *g);          /* rewinds arena and tape; keeps rng state */
TFM_API void tfm_graph_free(tfm_graph *g);
/* A block of at least `bytes` (64-aligned; *got: its real size, to give back): a spare if one is big enough
 * (the smallest such), else a new one. NULL when out of memory. Released only through tfm_graph_block_give
 * (not free: a block from 2 MiB up is its own huge-page mapping). */
TFM_API void *tfm_graph_block_take(tfm_graph *g, size_t bytes, size_t *got);
/* Keep block p (got bytes, from tfm_graph_block_take) as a spare for the next take (the smallest spare is freed to make room; p itself
 * when it is smaller than all). NULL-safe. */
TFM_API void tfm_graph_block_give(tfm_graph *g, void *p, size_t got);
/* A worker graph for thread data parallelism (one thread's share of g's work: a chunk of a training batch,
 * a batch of sentences to decode): tfm_graph_init, with g's attention settings and profiling. */
TFM_API void tfm_graph_init_worker(tfm_graph *w, const tfm_graph *g);
TFM_API void tfm_backward(tfm_graph *g, tfm_tensor *loss);   /* loss must be a scalar (size 1) */
TFM_API void tfm_graph_print(const tfm_graph *g, void *file /* FILE* */);
/* --profile: time since t0 is added to phase ph when g->profile is set (t0 from tfm_profile_begin). */
TFM_API double tfm_profile_begin(const tfm_graph *g);
TFM_API void tfm_profile_end(tfm_graph *g, tfm_phase ph, double t0);
/* --profile of work split over worker graphs: their op and phase times are thread time; they are added to
 * g's rows scaled so that they split the wall time g spent in the parallel part (TFM_PHASE_CHUNKS, then
 * cleared), like the rows of work split per op; the workers' times are cleared. */
TFM_API void tfm_profile_merge(tfm_graph *g, tfm_graph *const *workers, int k);
/* Print ms per `unit` (a step, a sentence, a token) by op kind and phase, sorted by time, with the
 * share of `wall` seconds each takes and the untracked remainder (data, bookkeeping, I/O). */
/* kernels: the kernel path to name in the header (tfm_isa_name() from tfm/kernels.h), or NULL. */
TFM_API void tfm_profile_print(const tfm_graph *g, long units, const char *unit, double wall, const char *kernels,
                       void *file /* FILE* */);

/* New arena tensor in this graph (data uninitialised; grad allocated if grad_enabled && want_grad, and
 * zeroed by tfm_backward right before the first op that uses it: read a graph tensor's grad after
 * tfm_backward, or call tfm_tensor_zero_grad_once first). */
TFM_API tfm_tensor *tfm_tensor_new(tfm_graph *g, int ndim, const int *shape, int want_grad);
TFM_API void tfm_tensor_alloc_grad(tfm_graph *g, tfm_tensor *t);   /* t->grad from the arena, zeroed on first use */
TFM_API void tfm_tensor_zero_grad_once(tfm_tensor *t);             /* zero t->grad if not done yet */
TFM_API tfm_tensor *tfm_new1(tfm_graph *g, int d0);
TFM_API tfm_tensor *tfm_new2(tfm_graph *g, int d0, int d1);
TFM_API tfm_tensor *tfm_new3(tfm_graph *g, int d0, int d1, int d2);
TFM_API tfm_tensor *tfm_new4(tfm_graph *g, int d0, int d1, int d2, int d3);
/* Wrap caller data as a constant input (no grad). The data is NOT copied. */
TFM_API tfm_tensor *tfm_constant(tfm_graph *g, float *data, int ndim, const int *shape);
/* A view with another shape of the same data and grad (no node, no copy). */
TFM_API tfm_tensor *tfm_reshape(tfm_graph *g, tfm_tensor *x, int ndim, const int *shape);
TFM_API tfm_tensor *tfm_reshape2(tfm_graph *g, tfm_tensor *x, int d0, int d1);
TFM_API tfm_tensor *tfm_reshape3(tfm_graph *g, tfm_tensor *x, int d0, int d1, int d2);
TFM_API tfm_tensor *tfm_reshape4(tfm_graph *g, tfm_tensor *x, int d0, int d1, int d2, int d3);

TFM_API double tfm_now(void);   /* seconds, monotonic */

#endif
