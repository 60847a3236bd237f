/* tfm_gemm: the single matrix-multiply entry point (see include/tfm/kernels.h).
 *
 * Structure (BLIS-style, written from scratch for this project):
 *   - C is split into a few rectangles per OpenMP thread (boundaries on MR/NR multiples) that threads
 *     take dynamically; each runs the serial blocked algorithm on its rectangle with the thread's own
 *     packing buffers.
 *   - Serial algorithm: loop jc over NC columns, pc over KC depth (KC depends on K only), pack the
 *     KCxNC slice of op(B) into 16-wide panels, loop ic over MC rows, (optionally) pack the MCxKC
 *     slice of op(A) into 6-tall panels, then call a 6x16 micro-kernel for every tile.
 *   - Each C element is produced by one thread with a summation order that depends only on K
 *     (KC blocking, then k order inside the kernel), so results do not depend on the thread count.
 *   - Ragged right-edge tiles use narrower kernels (6x8, or 6 rows x <=3 columns); M==1 / N==1
 *     use a GEMV path; batched GEMMs that are individually small are parallelised over the batch.
 *   - The AVX2+FMA kernels are compiled with target attributes and chosen at run time; the portable
 *     path uses the same blocking with plain C kernels.
 * Built with -DTFM_USE_OPENBLAS, tfm_gemm forwards to cblas_sgemm instead. */
#include "tfm/kernels.h"
#include "ops/isa.h"
#include "core/par.h"
#include "ops/avx2_transpose.h"
#include <math.h>
#include <omp.h>
#include <sched.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifdef TFM_USE_OPENBLAS
#include <cblas.h>
#endif

/* C := beta*C on an m x n block (beta == 0 writes zeros without reading C). */
static void scale_c(int m, int n, float beta, float *C, int ldc) {
    if (beta == 1.0f) return;
    for (int i = 0; i < m; i++) {
        float *c = C + (size_t)i * ldc;
        if (beta == 0.0f) memset(c, 0, sizeof(float) * (size_t)n);
        else for (int j = 0; j < n; j++) c[j] *= beta;
    }
}

static int gemm_threads(void) { return omp_in_parallel() ? 1 : omp_get_max_threads(); }

/* rows x cols of C = the bias row (a GEMM with a bias starts its C from it, then adds with beta 1) */
static inline void seed_bias(const float *restrict bias, int rows, int cols, float *restrict C, int ldc) {
    if (cols == 16) { /* a full tile: fixed-length copies the compiler turns into a few vector moves */
        for (int i = 0; i < rows; i++)
            for (int j = 0; j < 16; j++) C[(size_t)i * ldc + j] = bias[j];
        return;
    }
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++) C[(size_t)i * ldc + j] = bias[j];
}

#ifdef TFM_USE_OPENBLAS
/* ------------------------------------------------------------------------------------------ */
/* OpenBLAS backend                                                                              */
/* ------------------------------------------------------------------------------------------ */
static void gemm_one(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A,
                     int lda, const float *B, int ldb, float beta, float *C, int ldc, int nt, tfm_isa isa,
                     int pack_a, const float *Bp, const float *bias) {
    (void)nt; (void)isa; (void)pack_a; (void)Bp;
    if (M <= 0 || N <= 0) return;
    if (bias) seed_bias(bias, M, N, C, ldc), beta = 1.0f;
    if (K <= 0 || alpha == 0.0f) { scale_c(M, N, beta, C, ldc); return; }
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
                M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
const char *tfm_gemm_backend(void) { return "openblas"; }

/* OpenBLAS threads inside its own calls: nothing is shared, helpers return at once. */
struct tfm_gemm_desk { int slots; };
tfm_gemm_desk *tfm_gemm_desk_new(int slots) {
    tfm_gemm_desk *d = calloc(1, sizeof *d);
    if (d) d->slots = slots;
    return d;
}
void tfm_gemm_desk_free(tfm_gemm_desk *d) { free(d); }
void tfm_gemm_desk_open(tfm_gemm_desk *d, int items) { (void)d; (void)items; }
void tfm_gemm_share_begin(tfm_gemm_desk *d, int slot) { (void)d; (void)slot; }
void tfm_gemm_share_end(tfm_gemm_desk *d) { (void)d; }
void tfm_gemm_help(tfm_gemm_desk *d, int slot) { (void)d; (void)slot; }
long tfm_gemm_desk_helped(const tfm_gemm_desk *d) { (void)d; return 0; }

#else
/* ------------------------------------------------------------------------------------------ */
/* Native backend                                                                                */
/* ------------------------------------------------------------------------------------------ */
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define TFM_HAVE_X86 1
#define TFM_AVX2 __attribute__((target("avx2,fma")))
#else
#define TFM_HAVE_X86 0
#endif

#define MR 6
#define NR 16
#ifndef TFM_GEMM_KC
#define TFM_GEMM_KC 256
#endif
#ifndef TFM_GEMM_MC
#define TFM_GEMM_MC 72
#endif
#ifndef TFM_GEMM_NC
#define TFM_GEMM_NC 3072
#endif
/* Minimum multiply-adds per thread before another thread is used. */
#ifndef TFM_GEMM_MIN_WORK
#define TFM_GEMM_MIN_WORK (1 << 18)
#endif
/* Blocks per thread of a threaded GEMM, taken dynamically (see gemm_one). */
#ifndef TFM_GEMM_BLOCKS_PER_THREAD
#define TFM_GEMM_BLOCKS_PER_THREAD 4
#endif
/* Batched GEMMs with at most this many multiply-adds each are parallelised over the batch. */
#ifndef TFM_GEMM_BATCH_SMALL
#define TFM_GEMM_BATCH_SMALL (1 << 22)
#endif

typedef struct {
    int ta, tb, M, N, K;
    float alpha, beta;
    const float *A, *B;
    float *C;
    int lda, ldb, ldc;
    int pack_a; /* 1: always pack op(A) (tests compare this with reading A in place) */
    const float *Bp; /* op(B) packed in advance (tfm_gemm_pack_b), or NULL: pack it here */
    const float *bias; /* C = alpha op(A) op(B) + bias (one value per column; beta ignored), or NULL */
} gemm_args;

/* n rounded up to whole NR-wide panels (the row length of a packed B depth block) */
static inline int nr_round(int n) { return (n + NR - 1) / NR * NR; }

const char *tfm_gemm_backend(void) {
    tfm_isa isa = tfm_isa_active();
    return isa == TFM_ISA_AVX512 ? "avx512" : isa == TFM_ISA_AVX2 ? "avx2-fma" : "portable";
}

/* Per-thread packing buffers (OpenMP worker threads persist, so these are reused across calls; freed
 * when a thread exits: tfm_thread_scratch). */
static float *get_buf(size_t nfloats) {
    float *buf = tfm_thread_scratch(TFM_SCRATCH_GEMM, nfloats);
    if (!buf) abort();
    return buf;
}

/* KC for a given K: split K into equal-ish chunks of at most TFM_GEMM_KC (depends on K only). */
static int pick_kc(int K) {
    int nb = (K + TFM_GEMM_KC - 1) / TFM_GEMM_KC;
    return (K + nb - 1) / nb;
}

/* ---------------------------------- packing (portable) ----------------------------------- */
/* op(B)[pc:pc+kc, jc:jc+nc] -> NR-wide panels, each kc x NR row-major, zero padded on the right. */
static void pack_b_c(const gemm_args *g, int pc, int jc, int kc, int nc, float *out) {
    for (int j0 = 0; j0 < nc; j0 += NR) {
        int nr = nc - j0 < NR ? nc - j0 : NR;
        float *o = out + (size_t)j0 * kc;
        if (nr < NR)
            for (int k = 0; k < kc; k++) memset(o + (size_t)k * NR + nr, 0, sizeof(float) * (NR - nr));
        if (!g->tb) /* B stored (K,N): row k of the panel is contiguous */
            for (int k = 0; k < kc; k++)
                memcpy(o + (size_t)k * NR, g->B + (size_t)(pc + k) * g->ldb + jc + j0, sizeof(float) * nr);
        else /* B stored (N,K): column j of the panel is contiguous */
            for (int j = 0; j < nr; j++) {
                const float *src = g->B + (size_t)(jc + j0 + j) * g->ldb + pc;
                for (int k = 0; k < kc; k++) o[(size_t)k * NR + j] = src[k];
            }
    }
}

/* op(A)[ic:ic+mc, pc:pc+kc] -> MR-tall panels, each kc x MR (k-major), zero padded at the bottom. */
static void pack_a_panel_c(const gemm_args *g, int i0, int pc, int mr, int kc, float *o) {
    for (int k = 0; k < kc; k++) {
        for (int i = 0; i < mr; i++) {
            size_t r = (size_t)(i0 + i), c = (size_t)(pc + k);
            o[(size_t)k * MR + i] = g->ta ? g->A[c * g->lda + r] : g->A[r * g->lda + c];
        }
        for (int i = mr; i < MR; i++) o[(size_t)k * MR + i] = 0.0f;
    }
}

static void pack_a_c(const gemm_args *g, int ic, int pc, int mc, int kc, float *out) {
    for (int i0 = 0; i0 < mc; i0 += MR) {
        int mr = mc - i0 < MR ? mc - i0 : MR;
        pack_a_panel_c(g, ic + i0, pc, mr, kc, out + (size_t)i0 * kc);
    }
}

/* ---------------------------------- micro-kernels (portable) ----------------------------- */
/* acc = sum_k a(i,k) * b(k,j) with a(i,k) = a[i*rsa + k*csa], b packed kc x NR;
 * C(i,j) = alpha*acc + beta*C(i,j) for i < mr, j < nr (beta == 0: C not read). */
static void kern_c(int kc, const float *a, ptrdiff_t rsa, ptrdiff_t csa, const float *b, float *c,
                   ptrdiff_t ldc, int mr, int nr, float alpha, float beta) {
    float acc[MR][NR];
    memset(acc, 0, sizeof acc);
    for (int k = 0; k < kc; k++) {
        const float *bk = b + (size_t)k * NR;
        for (int i = 0; i < MR; i++) {
            float ai = i < mr ? a[i * rsa + k * csa] : 0.0f;
            for (int j = 0; j < NR; j++) acc[i][j] += ai * bk[j];
        }
    }
    for (int i = 0; i < mr; i++) {
        float *ci = c + i * ldc;
        if (beta == 0.0f) for (int j = 0; j < nr; j++) ci[j] = alpha * acc[i][j];
        else for (int j = 0; j < nr; j++) ci[j] = alpha * acc[i][j] + beta * ci[j];
    }
}

#if TFM_HAVE_X86
/* ---------------------------------- AVX2 + FMA ------------------------------------------- */

TFM_AVX2 static void pack_b_avx2(const gemm_args *g, int pc, int jc, int kc, int nc, float *out) {
    int j0 = 0;
    if (!g->tb) {
        /* B stored (K,N): read rows front to back (streams the prefetchers follow), 8 at a time, and deal
         * their 16-float pieces out to the panels, so each panel receives 8 consecutive lines at once. Going
         * down one panel at a time instead reads a new line every ldb floats, and those reads (of an
         * activation written long before) wait on memory; one row at a time writes one line to every
         * panel in turn, and panels kc x 16 floats apart all fall in the same L1 set (kc = 192: 32 panels,
         * N = 512, contend for 12 ways), which made packing a 384 x 512 B 17x slower than a 384 x 128 one. */
        const int full = nc / NR * NR;
        int k = 0;
        for (; k < kc; k += 8) {
            const int rows = kc - k < 8 ? kc - k : 8;
            const float *src = g->B + (size_t)(pc + k) * g->ldb + jc;
            float *o = out + (size_t)k * NR;
            for (int j = 0; j < full; j += NR, o += (size_t)NR * kc)
                for (int t = 0; t < rows; t++) {
                    _mm256_store_ps(o + t * NR, _mm256_loadu_ps(src + (size_t)t * g->ldb + j));
                    _mm256_store_ps(o + t * NR + 8, _mm256_loadu_ps(src + (size_t)t * g->ldb + j + 8));
                }
        }
        j0 = full;
    } else {
        for (; j0 + NR <= nc; j0 += NR) {
            float *o = out + (size_t)j0 * kc;
            /* B stored (N,K): rows j are contiguous along k -> transpose 8x8 blocks, 16 k at a time
             * so each 64-byte line of a row is consumed at once. */
            for (int h = 0; h < 2; h++) {
                const float *src = g->B + (size_t)(jc + j0 + 8 * h) * g->ldb + pc;
                int k = 0;
                for (; k + 16 <= kc; k += 16) {
                    __m256 r[8], q[8];
                    for (int t = 0; t < 8; t++) {
                        r[t] = _mm256_loadu_ps(src + (size_t)t * g->ldb + k);
                        q[t] = _mm256_loadu_ps(src + (size_t)t * g->ldb + k + 8);
                    }
                    tfm_tr8x8(r);
                    tfm_tr8x8(q);
                    for (int t = 0; t < 8; t++) {
                        _mm256_store_ps(o + (size_t)(k + t) * NR + 8 * h, r[t]);
                        _mm256_store_ps(o + (size_t)(k + 8 + t) * NR + 8 * h, q[t]);
                    }
                }
                for (; k + 8 <= kc; k += 8) {
                    __m256 r[8];
                    for (int t = 0; t < 8; t++) r[t] = _mm256_loadu_ps(src + (size_t)t * g->ldb + k);
                    tfm_tr8x8(r);
                    for (int t = 0; t < 8; t++) _mm256_store_ps(o + (size_t)(k + t) * NR + 8 * h, r[t]);
                }
                for (; k < kc; k++)
                    for (int t = 0; t < 8; t++) o[(size_t)k * NR + 8 * h + t] = src[(size_t)t * g->ldb + k];
            }
        }
    }
    if (j0 < nc) {
        gemm_args sub = *g;
        pack_b_c(&sub, pc, jc + j0, kc, nc - j0, out + (size_t)j0 * kc);
    }
}

/* Pack one full MR-tall panel of a non-transposed A (rows i0..i0+5, depth pc..pc+kc) into o
 * (kc*MR floats; up to 2 floats after the panel may be scribbled on and are rewritten later). */
TFM_AVX2 static void pack_a_panel_avx2(const gemm_args *g, int i0, int pc, int kc, float *o) {
    const float *src = g->A + (size_t)i0 * g->lda + pc;
    int k = 0;
    for (; k + 8 <= kc; k += 8) {
        __m256 r[8];
        for (int t = 0; t < MR; t++) r[t] = _mm256_loadu_ps(src + (size_t)t * g->lda + k);
        r[6] = r[7] = _mm256_setzero_ps();
        tfm_tr8x8(r);
        /* each r[t] holds the 6 values for depth k+t (plus 2 zeros); overlapping stores in
         * increasing order leave exactly the right values. */
        for (int t = 0; t < 8; t++) _mm256_storeu_ps(o + (size_t)(k + t) * MR, r[t]);
    }
    for (; k < kc; k++)
        for (int t = 0; t < MR; t++) o[(size_t)k * MR + t] = src[(size_t)t * g->lda + k];
}

TFM_AVX2 static void pack_a_avx2(const gemm_args *g, int ic, int pc, int mc, int kc, float *out) {
    const int mfull = mc / MR * MR;
    if (!g->ta) {
        for (int i0 = 0; i0 < mfull; i0 += MR) pack_a_panel_avx2(g, ic + i0, pc, kc, out + (size_t)i0 * kc);
    } else {
        /* A stored (K,M): walk each stored row once (contiguous along m), scattering 6-float groups
         * into the panels, so every cache line of A is read exactly once. */
        for (int k = 0; k < kc; k++) {
            const float *src = g->A + (size_t)(pc + k) * g->lda + ic;
            float *o = out + (size_t)k * MR;
            for (int i0 = 0; i0 < mfull; i0 += MR, o += (size_t)MR * kc) {
                _mm_storeu_ps(o, _mm_loadu_ps(src + i0));
                _mm_storel_epi64((__m128i_u *)(o + 4), _mm_loadl_epi64((const __m128i_u *)(src + i0 + 4)));
            }
        }
    }
    if (mfull < mc) pack_a_panel_c(g, ic + mfull, pc, mc - mfull, kc, out + (size_t)mfull * kc);
}

#define ROWUPD(x0, x1)                                                                       \
    do {                                                                                     \
        if (beta == 0.0f) {                                                                  \
            _mm256_storeu_ps(cr, _mm256_mul_ps(va, x0));                                     \
            _mm256_storeu_ps(cr + 8, _mm256_mul_ps(va, x1));                                 \
        } else if (beta == 1.0f) {                                                           \
            _mm256_storeu_ps(cr, _mm256_fmadd_ps(va, x0, _mm256_loadu_ps(cr)));              \
            _mm256_storeu_ps(cr + 8, _mm256_fmadd_ps(va, x1, _mm256_loadu_ps(cr + 8)));      \
        } else {                                                                             \
            _mm256_storeu_ps(cr, _mm256_fmadd_ps(va, x0, _mm256_mul_ps(vb, _mm256_loadu_ps(cr)))); \
            _mm256_storeu_ps(cr + 8,                                                         \
                             _mm256_fmadd_ps(va, x1, _mm256_mul_ps(vb, _mm256_loadu_ps(cr + 8)))); \
        }                                                                                    \
        cr += ldc;                                                                           \
    } while (0)

#define KSTEP(AP, RS)                                                                        \
    do {                                                                                     \
        __m256 b0 = _mm256_load_ps(b), b1 = _mm256_load_ps(b + 8), av;                       \
        av = _mm256_broadcast_ss(AP + 0 * (RS));                                             \
        c00 = _mm256_fmadd_ps(av, b0, c00); c01 = _mm256_fmadd_ps(av, b1, c01);              \
        av = _mm256_broadcast_ss(AP + 1 * (RS));                                             \
        c10 = _mm256_fmadd_ps(av, b0, c10); c11 = _mm256_fmadd_ps(av, b1, c11);              \
        av = _mm256_broadcast_ss(AP + 2 * (RS));                                             \
        c20 = _mm256_fmadd_ps(av, b0, c20); c21 = _mm256_fmadd_ps(av, b1, c21);              \
        av = _mm256_broadcast_ss(AP + 3 * (RS));                                             \
        c30 = _mm256_fmadd_ps(av, b0, c30); c31 = _mm256_fmadd_ps(av, b1, c31);              \
        av = _mm256_broadcast_ss(AP + 4 * (RS));                                             \
        c40 = _mm256_fmadd_ps(av, b0, c40); c41 = _mm256_fmadd_ps(av, b1, c41);              \
        av = _mm256_broadcast_ss(AP + 5 * (RS));                                             \
        c50 = _mm256_fmadd_ps(av, b0, c50); c51 = _mm256_fmadd_ps(av, b1, c51);              \
    } while (0)

#define KERN_STORE()                                                                         \
    do {                                                                                     \
        __m256 va = _mm256_set1_ps(alpha), vb = _mm256_set1_ps(beta);                        \
        if (mr == MR && nr == NR) {                                                          \
            float *cr = c;                                                                   \
            ROWUPD(c00, c01); ROWUPD(c10, c11); ROWUPD(c20, c21);                            \
            ROWUPD(c30, c31); ROWUPD(c40, c41); ROWUPD(c50, c51);                            \
        } else {                                                                             \
            float t[MR * NR] __attribute__((aligned(32)));                                   \
            _mm256_store_ps(t + 0, c00); _mm256_store_ps(t + 8, c01);                        \
            _mm256_store_ps(t + 16, c10); _mm256_store_ps(t + 24, c11);                      \
            _mm256_store_ps(t + 32, c20); _mm256_store_ps(t + 40, c21);                      \
            _mm256_store_ps(t + 48, c30); _mm256_store_ps(t + 56, c31);                      \
            _mm256_store_ps(t + 64, c40); _mm256_store_ps(t + 72, c41);                      \
            _mm256_store_ps(t + 80, c50); _mm256_store_ps(t + 88, c51);                      \
            for (int i = 0; i < mr; i++) {                                                   \
                float *ci = c + i * ldc;                                                     \
                const float *ti = t + i * NR;                                                \
                if (beta == 0.0f) for (int j = 0; j < nr; j++) ci[j] = alpha * ti[j];        \
                else if (beta == 1.0f) for (int j = 0; j < nr; j++) ci[j] = fmaf(alpha, ti[j], ci[j]); \
                else for (int j = 0; j < nr; j++) ci[j] = fmaf(alpha, ti[j], beta * ci[j]); \
            }                                                                                \
        }                                                                                    \
    } while (0)

#define KERN_ZERO()                                                                          \
    __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, \
           c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00

/* pf: the next B panel (kc x NR, one 64-byte line per depth), or NULL. The first tile of a panel pulls the
 * next panel into L2 while it computes, 4 lines per 4 depths: the hardware prefetcher loses the stream of
 * packed weights when the other tiles of a panel reread it from L1 (decoding's GEMMs read weights from
 * memory: M = 32, N = 8000, K = 256 ran at 26 GMAC/s against 36 for a B held in cache). */
#define PREFETCH_PANEL4(P)                                                                   \
    do {                                                                                     \
        _mm_prefetch((const char *)(P), _MM_HINT_T1);                                        \
        _mm_prefetch((const char *)((P) + NR), _MM_HINT_T1);                                 \
        _mm_prefetch((const char *)((P) + 2 * NR), _MM_HINT_T1);                             \
        _mm_prefetch((const char *)((P) + 3 * NR), _MM_HINT_T1);                             \
        (P) += 4 * NR;                                                                       \
    } while (0)

/* A k-major: the MR values of depth k at a + k * astep (astep = MR: packed A; astep = lda: a transposed
 * op(A) read in place). */
TFM_AVX2 static void kern_avx2_packed(int kc, const float *a, ptrdiff_t astep, const float *b, float *c,
                                      ptrdiff_t ldc, int mr, int nr, float alpha, float beta) {
    /* C is only touched after the k loop; start pulling its lines in now (C blocks often do not
     * stay in L2 between KC passes). Prefetches never fault, so edge tiles are fine too. */
    for (int i = 0; i < MR; i++) {
        _mm_prefetch((const char *)(c + i * ldc), _MM_HINT_T0);
        _mm_prefetch((const char *)(c + i * ldc + NR - 1), _MM_HINT_T0);
    }
    KERN_ZERO();
    for (int k = 0; k < kc; k++) { KSTEP(a, 1); a += astep; b += NR; }   /* not unrolled: see kern_avx2_rows */
    KERN_STORE();
}

/* A read in place: a full 6-row tile of a row-major op(A), row i at a + i * lda. The same FMAs in the
 * same order as kern_avx2_packed, so the results are bit-identical; only the packing pass is saved. */
TFM_AVX2 static void kern_avx2_rows(int kc, const float *a, ptrdiff_t lda, const float *b, float *c,
                                    ptrdiff_t ldc, int nr, float alpha, float beta, const float *pf) {
    const int mr = MR;
    for (int i = 0; i < MR; i++) {
        _mm_prefetch((const char *)(c + i * ldc), _MM_HINT_T0);
        _mm_prefetch((const char *)(c + i * ldc + NR - 1), _MM_HINT_T0);
    }
    KERN_ZERO();
    const float *a0 = a, *a3 = a + 3 * lda; /* two bases keep the row offsets at 0, lda, 2 lda */
    int k = 0;
#define ROWFMA(AV, R)                                                                        \
    do {                                                                                     \
        __m256 av = _mm256_broadcast_ss(AV);                                                 \
        R##0 = _mm256_fmadd_ps(av, b0, R##0); R##1 = _mm256_fmadd_ps(av, b1, R##1);          \
    } while (0)
#define KSTEP_ROWS()                                                                         \
    do {                                                                                     \
        __m256 b0 = _mm256_load_ps(b), b1 = _mm256_load_ps(b + 8);                           \
        ROWFMA(a0, c0); ROWFMA(a0 + lda, c1); ROWFMA(a0 + 2 * lda, c2);                      \
        ROWFMA(a3, c3); ROWFMA(a3 + lda, c4); ROWFMA(a3 + 2 * lda, c5);                      \
        a0++; a3++; b += NR;                                                                 \
    } while (0)
    /* not unrolled: gcc 12 spilled two accumulators of a 4-step body to the stack (16 ymm registers: 12
     * accumulators, 2 of B, 1 broadcast); one step keeps them all in registers (decode-step GEMMs ~1.03x) */
    if (pf)
        for (; k < kc; k++) { _mm_prefetch((const char *)pf, _MM_HINT_T1); pf += NR; KSTEP_ROWS(); }
    else
        for (; k < kc; k++) KSTEP_ROWS();
#undef KSTEP_ROWS
#undef ROWFMA
    KERN_STORE();
}

TFM_AVX2 static inline void edge_store(const float *t, int tw, float *c, ptrdiff_t ldc, int mr, int nr,
                                       float alpha, float beta) {
    for (int i = 0; i < mr; i++) {
        float *ci = c + i * ldc;
        const float *ti = t + i * tw;
        if (beta == 0.0f) for (int j = 0; j < nr; j++) ci[j] = alpha * ti[j];
        else if (beta == 1.0f) for (int j = 0; j < nr; j++) ci[j] = fmaf(alpha, ti[j], ci[j]);
        else for (int j = 0; j < nr; j++) ci[j] = fmaf(alpha, ti[j], beta * ci[j]);
    }
}

/* A 4 x 16 tile: row i of depth k at a + i * rs + k * cs (rs = lda, cs = 1: a row-major op(A) in place; rs = 1,
 * cs = lda: a transposed one in place; rs = 1, cs = MR: a packed, zero-padded panel, for a ragged tile of
 * mr < 4 rows). Eight accumulators keep both FMA pipes busy (latency 4). The same FMAs in the same order as
 * the 6-row kernels, so an element's bits do not depend on the tile it falls in; used where M is not a
 * multiple of 6 (M = 32 as 4 x 6 + 2 x 4 instead of 5 x 6 and a 2-row tile that costs a whole one). */
TFM_AVX2 static void kern4_avx2(int kc, const float *a, ptrdiff_t rs, ptrdiff_t cs, const float *b, float *c,
                                ptrdiff_t ldc, int mr, int nr, float alpha, float beta, const float *pf) {
    for (int i = 0; i < mr; i++) {
        _mm_prefetch((const char *)(c + i * ldc), _MM_HINT_T0);
        _mm_prefetch((const char *)(c + i * ldc + NR - 1), _MM_HINT_T0);
    }
    __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00, c31 = c00;
#define KSTEP4()                                                                             \
    do {                                                                                     \
        __m256 b0 = _mm256_load_ps(b), b1 = _mm256_load_ps(b + 8), av;                       \
        av = _mm256_broadcast_ss(a);                                                         \
        c00 = _mm256_fmadd_ps(av, b0, c00); c01 = _mm256_fmadd_ps(av, b1, c01);              \
        av = _mm256_broadcast_ss(a + rs);                                                    \
        c10 = _mm256_fmadd_ps(av, b0, c10); c11 = _mm256_fmadd_ps(av, b1, c11);              \
        av = _mm256_broadcast_ss(a + 2 * rs);                                                \
        c20 = _mm256_fmadd_ps(av, b0, c20); c21 = _mm256_fmadd_ps(av, b1, c21);              \
        av = _mm256_broadcast_ss(a + 3 * rs);                                                \
        c30 = _mm256_fmadd_ps(av, b0, c30); c31 = _mm256_fmadd_ps(av, b1, c31);              \
        a += cs; b += NR;                                                                    \
    } while (0)
    int k = 0;
    for (; k + 4 <= kc; k += 4) {
        if (pf) PREFETCH_PANEL4(pf);
        KSTEP4(); KSTEP4(); KSTEP4(); KSTEP4();
    }
    for (; k < kc; k++) KSTEP4();
#undef KSTEP4
    __m256 va = _mm256_set1_ps(alpha), vb = _mm256_set1_ps(beta);
    if (mr == 4 && nr == NR) {
        float *cr = c;
        ROWUPD(c00, c01); ROWUPD(c10, c11); ROWUPD(c20, c21); ROWUPD(c30, c31);
        return;
    }
    float t[4 * NR] __attribute__((aligned(32)));
    _mm256_store_ps(t + 0, c00); _mm256_store_ps(t + 8, c01); _mm256_store_ps(t + 16, c10);
    _mm256_store_ps(t + 24, c11); _mm256_store_ps(t + 32, c20); _mm256_store_ps(t + 40, c21);
    _mm256_store_ps(t + 48, c30); _mm256_store_ps(t + 56, c31);
    edge_store(t, NR, c, ldc, mr, nr, alpha, beta);
}

/* Edge tiles with 3 < nr <= 8: 6x8 on the first half of the 16-wide B panel; even and odd k go
 * to separate accumulators so 12 FMA chains are in flight. */
#define KSTEP8(S)                                                                            \
    do {                                                                                     \
        __m256 b0 = _mm256_load_ps(b);                                                       \
        S##0 = _mm256_fmadd_ps(_mm256_broadcast_ss(a + 0), b0, S##0);                        \
        S##1 = _mm256_fmadd_ps(_mm256_broadcast_ss(a + 1), b0, S##1);                        \
        S##2 = _mm256_fmadd_ps(_mm256_broadcast_ss(a + 2), b0, S##2);                        \
        S##3 = _mm256_fmadd_ps(_mm256_broadcast_ss(a + 3), b0, S##3);                        \
        S##4 = _mm256_fmadd_ps(_mm256_broadcast_ss(a + 4), b0, S##4);                        \
        S##5 = _mm256_fmadd_ps(_mm256_broadcast_ss(a + 5), b0, S##5);                        \
        a += MR; b += NR;                                                                    \
    } while (0)

TFM_AVX2 static void kern8_avx2(int kc, const float *a, const float *b, float *c, ptrdiff_t ldc, int mr,
                                int nr, float alpha, float beta) {
    __m256 e0 = _mm256_setzero_ps(), e1 = e0, e2 = e0, e3 = e0, e4 = e0, e5 = e0;
    __m256 o0 = e0, o1 = e0, o2 = e0, o3 = e0, o4 = e0, o5 = e0;
    int k = 0;
    for (; k + 2 <= kc; k += 2) { KSTEP8(e); KSTEP8(o); }
    if (k < kc) KSTEP8(e);
    float t[MR * 8] __attribute__((aligned(32)));
    _mm256_store_ps(t + 0, _mm256_add_ps(e0, o0)); _mm256_store_ps(t + 8, _mm256_add_ps(e1, o1));
    _mm256_store_ps(t + 16, _mm256_add_ps(e2, o2)); _mm256_store_ps(t + 24, _mm256_add_ps(e3, o3));
    _mm256_store_ps(t + 32, _mm256_add_ps(e4, o4)); _mm256_store_ps(t + 40, _mm256_add_ps(e5, o5));
    edge_store(t, 8, c, ldc, mr, nr, alpha, beta);
}

/* Edge tiles with nr <= 3: vectorise over the 6 rows instead (one 8-float load of the packed A column
 * per k, lanes 6-7 ignored), 4 interleaved partial sums per output column. */
TFM_AVX2 static void kern_narrow_avx2(int kc, const float *a, const float *b, float *c, ptrdiff_t ldc,
                                      int mr, int nr, float alpha, float beta) {
    __m256 s[3][4];
    for (int j = 0; j < 3; j++)
        for (int q = 0; q < 4; q++) s[j][q] = _mm256_setzero_ps();
    int k = 0;
#define NSTEP(Q)                                                                             \
    do {                                                                                     \
        __m256 av = _mm256_loadu_ps(a);                                                      \
        s[0][Q] = _mm256_fmadd_ps(av, _mm256_broadcast_ss(b + 0), s[0][Q]);                  \
        if (nr > 1) s[1][Q] = _mm256_fmadd_ps(av, _mm256_broadcast_ss(b + 1), s[1][Q]);      \
        if (nr > 2) s[2][Q] = _mm256_fmadd_ps(av, _mm256_broadcast_ss(b + 2), s[2][Q]);      \
        a += MR; b += NR;                                                                    \
    } while (0)
    for (; k + 4 <= kc; k += 4) { NSTEP(0); NSTEP(1); NSTEP(2); NSTEP(3); }
    for (int q = 0; k < kc; k++, q++) NSTEP(q);
#undef NSTEP
    float t[3 * 8] __attribute__((aligned(32))), u[MR * 3];
    for (int j = 0; j < 3; j++)
        _mm256_store_ps(t + 8 * j, _mm256_add_ps(_mm256_add_ps(s[j][0], s[j][1]), _mm256_add_ps(s[j][2], s[j][3])));
    for (int i = 0; i < MR; i++)
        for (int j = 0; j < 3; j++) u[i * 3 + j] = t[8 * j + i];
    edge_store(u, 3, c, ldc, mr, nr, alpha, beta);
}
#endif /* TFM_HAVE_X86 */

/* ---------------------------------- blocked driver --------------------------------------- */
/* Serial blocked GEMM on the C rectangle [m0,m1) x [n0,n1). K > 0, alpha != 0. */
/* One MR x NR tile (or smaller at the edges) with the AVX2 or the portable kernels. */
static inline void tile_6x16(const gemm_args *g, int avx, int kc, const float *ap, const float *bp, float *cp,
                             int mr, int nr, float beff) {
#if TFM_HAVE_X86
    if (avx) {
        if (nr > 8) kern_avx2_packed(kc, ap, MR, bp, cp, g->ldc, mr, nr, g->alpha, beff);
        else if (nr > 3) kern8_avx2(kc, ap, bp, cp, g->ldc, mr, nr, g->alpha, beff);
        else kern_narrow_avx2(kc, ap, bp, cp, g->ldc, mr, nr, g->alpha, beff);
        return;
    }
#endif
    (void)avx;
    kern_c(kc, ap, 1, MR, bp, cp, g->ldc, mr, nr, g->alpha, beff);
}

/* Rows of the next tile when op(A) is read in place, rem rows left: 6, except 4-row tiles where a 6-row one
 * would be mostly padding (rem 1-4, 7 and 8: M = 32 as 4 x 6 + 2 x 4, M = 31 as 5 x 6 + a 1-row 4-tile). */
static inline int direct_tile_rows(int rem) { return rem <= 4 || rem == 7 || rem == 8 ? 4 : MR; }

/* The first row of the ragged last tile (fewer rows than its kernel) of mc rows tiled by direct_tile_rows, or
 * mc when there is none. */
static inline int ragged_row(int mc) {
    int ir = 0;
    while (mc - ir >= direct_tile_rows(mc - ir)) ir += direct_tile_rows(mc - ir);
    return ir;
}

#if TFM_HAVE_X86
/* A tile of rows 4 or 6 (mr of them real) through kern4_avx2 or kern_avx2_packed, A at a + i * rs + k * cs */
TFM_AVX2 static void kern4_or_6(int rows, int kc, const float *a, ptrdiff_t rs, ptrdiff_t cs, const float *b,
                                float *c, ptrdiff_t ldc, int mr, int nr, float alpha, float beta, const float *pf) {
    if (rows == 4) kern4_avx2(kc, a, rs, cs, b, c, ldc, mr, nr, alpha, beta, pf);
    else kern_avx2_packed(kc, a, cs, b, c, ldc, mr, nr, alpha, beta);   /* rs == 1 here */
}
#endif

static void gemm_rect(const gemm_args *g, int m0, int m1, int n0, int n1, tfm_isa isa) {
    const int avx = isa >= TFM_ISA_AVX2;
    if (m0 >= m1 || n0 >= n1) return;
    const int K = g->K, kcb = pick_kc(K);
    const int nmax = n1 - n0 < TFM_GEMM_NC ? n1 - n0 : TFM_GEMM_NC;
    const int ncap = nr_round(nmax);
    /* buffer: B panel (kcb x ncap), A block (MC x kcb) + slack for 8-float loads of 6-float groups */
    const size_t bsz = (size_t)kcb * ncap;
    const size_t asz = (size_t)(TFM_GEMM_MC + MR) * kcb + 16;
    float *buf = get_buf(bsz + asz);
    float *bufB = buf, *bufA = buf + bsz;

    for (int jc = n0; jc < n1; jc += TFM_GEMM_NC) {
        const int nc = n1 - jc < TFM_GEMM_NC ? n1 - jc : TFM_GEMM_NC;
        for (int pc = 0; pc < K; pc += kcb) {
            const int kc = K - pc < kcb ? K - pc : kcb;
            /* a bias seeds each C tile right before its first depth block (the tile's lines are about to be
             * read anyway), instead of a pass over all of C before the GEMM: the same bits */
            const float *bias = pc == 0 && g->bias ? g->bias + jc : NULL;
            const float beff = pc == 0 && !bias ? g->beta : 1.0f;
            const float *bpack = bufB; /* the KC x NC slice of op(B) in NR-wide panels */
            if (g->Bp) bpack = g->Bp + (size_t)pc * nr_round(g->N) + (size_t)jc * kc;
#if TFM_HAVE_X86
            else if (avx) pack_b_avx2(g, pc, jc, kc, nc, bufB);
#endif
            else pack_b_c(g, pc, jc, kc, nc, bufB);
            /* AVX2 reads op(A) in place (kern_avx2_rows for a row-major one, kern_avx2_packed with the
             * stride lda for a transposed one) and packs only a ragged last panel; the narrow right-edge
             * kernels (nr <= 8) read packed A, so a column range with such a tile packs it all. A transposed
             * A is read in place only in small blocks (at most 128 x 128 of C): a tile's 6 values of each depth
             * sit on their own cache line, which larger blocks reread from L2 once per 16 columns (measured:
             * +4% to +16% up to 128 x 128, -1% to -2% at 512 x 128 and 128 x 512). */
            const int direct_a = isa == TFM_ISA_AVX2 && !g->pack_a && (nc % NR == 0 || nc % NR > 8) &&
                                 (!g->ta || (m1 - m0 <= 128 && nc <= 128));
            /* AVX-512 reads op(A) in place (row-major or transposed) in its full 12 x 32 tiles where every
             * tile is 32 wide; only the rows under the last full tile are packed */
            const int direct_a512 = isa == TFM_ISA_AVX512 && !g->pack_a && nc % (2 * NR) == 0;
            for (int ic = m0; ic < m1; ic += TFM_GEMM_MC) {
                const int mc = m1 - ic < TFM_GEMM_MC ? m1 - ic : TFM_GEMM_MC;
#if TFM_HAVE_X86
                if (avx) {
                    const int m12 = mc / (2 * MR) * (2 * MR);
                    if (direct_a512) {
                        if (m12 < mc) pack_a_avx2(g, ic + m12, pc, mc - m12, kc, bufA + (size_t)m12 * kc);
                    } else if (!direct_a) pack_a_avx2(g, ic, pc, mc, kc, bufA);
                    else {
                        const int r0 = ragged_row(mc);   /* the ragged last tile's rows, if any, packed */
                        if (r0 < mc) pack_a_panel_c(g, ic + r0, pc, mc - r0, kc, bufA + (size_t)r0 * kc);
                    }
                    if (!direct_a) /* the narrow kernels' 8-float loads of the last 6-float group */
                        memset(bufA + (size_t)(mc + MR - 1) / MR * MR * kc, 0, 8 * sizeof(float));
                } else
#endif
                    pack_a_c(g, ic, pc, mc, kc, bufA);
                /* AVX-512: 12 x 32 tiles where two full 16-wide B panels exist (8 x 32 or 6 x 32 for the last rows;
                 * the same per-element arithmetic as the 6 x 16 kernel, so results equal the AVX2 path's);
                 * everything else goes through the 6 x 16 kernels. */
                for (int jr = 0; jr < nc;) {
                    const int wide = isa == TFM_ISA_AVX512 && nc - jr >= 2 * NR;
                    const int nr = nc - jr < NR ? nc - jr : NR;
                    const float *bp = bpack + (size_t)jr * kc;
                    for (int ir = 0; ir < mc;) {
                        const int rows = direct_a ? direct_tile_rows(mc - ir) : MR, mr = mc - ir < rows ? mc - ir : rows;
                        float *cp = g->C + (size_t)(ic + ir) * g->ldc + jc + jr;
                        const float *ap = bufA + (size_t)ir * kc;
                        if (bias)
                            seed_bias(bias + jr, wide ? (mc - ir < 2 * MR ? mc - ir : 2 * MR) : mr, wide ? 2 * NR : nr,
                                      cp, g->ldc);
                        if (wide && direct_a512 && mc - ir >= 2 * MR) {
                            if (!g->ta)
                                tfm_gemm_kern12x32_rows_avx512(kc, g->A + (size_t)(ic + ir) * g->lda + pc, g->lda, bp,
                                                               cp, g->ldc, 2 * NR, g->alpha, beff);
                            else
                                tfm_gemm_kern12x32_cols_avx512(kc, g->A + (size_t)pc * g->lda + ic + ir, g->lda, bp,
                                                               cp, g->ldc, 2 * NR, g->alpha, beff);
                            ir += 2 * MR;
                            continue;
                        }
                        if (wide) {
                            const int mr2 = mc - ir < 2 * MR ? mc - ir : 2 * MR;
                            if (mr2 > 8) tfm_gemm_kern12x32_avx512(kc, ap, bp, cp, g->ldc, mr2, 2 * NR, g->alpha, beff);
                            else if (mr2 > MR) tfm_gemm_kern8x32_avx512(kc, ap, bp, cp, g->ldc, mr2, 2 * NR, g->alpha, beff);
                            else tfm_gemm_kern6x32_avx512(kc, ap, bp, cp, g->ldc, mr2, 2 * NR, g->alpha, beff);
                            ir += 2 * MR;
                            continue;
                        }
#if TFM_HAVE_X86
                        if (direct_a) {
                            /* a B packed in advance (weights, read from memory when decoding): the panel's first
                             * tile prefetches the next one (a line a depth step); one packed here is in cache already
                             * (training's A/B: 1.02x the time with the prefetch there, 0.99x without) */
                            const float *pf = g->Bp && ir == 0 && jr + NR < nc ? bp + (size_t)NR * kc : NULL;
                            const float *a = g->ta ? g->A + (size_t)pc * g->lda + ic + ir
                                                   : g->A + (size_t)(ic + ir) * g->lda + pc;
                            const ptrdiff_t rs = g->ta ? 1 : g->lda, cs = g->ta ? g->lda : 1;
                            if (mr < rows) /* the ragged last tile: its packed, zero-padded panel */
                                kern4_or_6(rows, kc, ap, 1, MR, bp, cp, g->ldc, mr, nr, g->alpha, beff, pf);
                            else if (rows == MR && !g->ta)
                                kern_avx2_rows(kc, a, g->lda, bp, cp, g->ldc, nr, g->alpha, beff, pf);
                            else
                                kern4_or_6(rows, kc, a, rs, cs, bp, cp, g->ldc, rows, nr, g->alpha, beff, pf);
                            ir += rows;
                            continue;
                        }
#endif
                        tile_6x16(g, avx, kc, ap, bp, cp, mr, nr, beff);
                        ir += MR;
                    }
                    jr += wide ? 2 * NR : NR;
                }
            }
        }
    }
}

/* ---------------------------------- GEMV (M == 1 or N == 1) ------------------------------ */
/* y[j*incy] = alpha * sum_k x[k] * W(k,j) + beta * y[j*incy], j in [j0,j1), with
 * W(k,j) = W[k*ldw + j] (wt == 0) or W[j*ldw + k] (wt == 1). x is contiguous, length K. */
static void gemv_c(int wt, int j0, int j1, int K, float alpha, const float *x, const float *W,
                   int ldw, float beta, float *y, ptrdiff_t incy) {
    for (int j = j0; j < j1; j++) {
        float s = 0.0f;
        if (wt) {
            const float *w = W + (size_t)j * ldw;
            for (int k = 0; k < K; k++) s += x[k] * w[k];
        } else {
            for (int k = 0; k < K; k++) s += x[k] * W[(size_t)k * ldw + j];
        }
        float *yj = y + j * incy;
        *yj = beta == 0.0f ? alpha * s : alpha * s + beta * *yj;
    }
}

#if TFM_HAVE_X86
TFM_AVX2 static inline float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

TFM_AVX2 static inline void gemv_store(float *y, ptrdiff_t incy, int n, const float *s, float alpha,
                                       float beta) {
    for (int j = 0; j < n; j++) {
        float *yj = y + j * incy;
        *yj = beta == 0.0f ? alpha * s[j] : fmaf(alpha, s[j], beta * *yj);
    }
}

TFM_AVX2 static void gemv_avx2(int wt, int j0, int j1, int K, float alpha, const float *x,
                               const float *W, int ldw, float beta, float *y, ptrdiff_t incy) {
    float s[64] __attribute__((aligned(32)));
    int j = j0;
    if (!wt) {
        for (; j + 64 <= j1; j += 64) {
            __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
            const float *w = W + j;
            for (int k = 0; k < K; k++, w += ldw) {
                __m256 xk = _mm256_broadcast_ss(x + k);
                a0 = _mm256_fmadd_ps(xk, _mm256_loadu_ps(w + 0), a0);
                a1 = _mm256_fmadd_ps(xk, _mm256_loadu_ps(w + 8), a1);
                a2 = _mm256_fmadd_ps(xk, _mm256_loadu_ps(w + 16), a2);
                a3 = _mm256_fmadd_ps(xk, _mm256_loadu_ps(w + 24), a3);
                a4 = _mm256_fmadd_ps(xk, _mm256_loadu_ps(w + 32), a4);
                a5 = _mm256_fmadd_ps(xk, _mm256_loadu_ps(w + 40), a5);
                a6 = _mm256_fmadd_ps(xk, _mm256_loadu_ps(w + 48), a6);
                a7 = _mm256_fmadd_ps(xk, _mm256_loadu_ps(w + 56), a7);
            }
            _mm256_store_ps(s + 0, a0); _mm256_store_ps(s + 8, a1);
            _mm256_store_ps(s + 16, a2); _mm256_store_ps(s + 24, a3);
            _mm256_store_ps(s + 32, a4); _mm256_store_ps(s + 40, a5);
            _mm256_store_ps(s + 48, a6); _mm256_store_ps(s + 56, a7);
            gemv_store(y + j * incy, incy, 64, s, alpha, beta);
        }
        for (; j + 8 <= j1; j += 8) {
            __m256 a0 = _mm256_setzero_ps(), a1 = a0;
            const float *w = W + j;
            int k = 0;
            for (; k + 2 <= K; k += 2, w += 2 * (size_t)ldw) {
                a0 = _mm256_fmadd_ps(_mm256_broadcast_ss(x + k), _mm256_loadu_ps(w), a0);
                a1 = _mm256_fmadd_ps(_mm256_broadcast_ss(x + k + 1), _mm256_loadu_ps(w + ldw), a1);
            }
            if (k < K) a0 = _mm256_fmadd_ps(_mm256_broadcast_ss(x + k), _mm256_loadu_ps(w), a0);
            _mm256_store_ps(s, _mm256_add_ps(a0, a1));
            gemv_store(y + j * incy, incy, 8, s, alpha, beta);
        }
    } else {
        for (; j + 4 <= j1; j += 4) {
            const float *w0 = W + (size_t)j * ldw, *w1 = w0 + ldw, *w2 = w1 + ldw, *w3 = w2 + ldw;
            __m256 p0 = _mm256_setzero_ps(), p1 = p0, p2 = p0, p3 = p0, q0 = p0, q1 = p0, q2 = p0, q3 = p0;
            int k = 0;
            for (; k + 16 <= K; k += 16) {
                __m256 x0 = _mm256_loadu_ps(x + k), x1 = _mm256_loadu_ps(x + k + 8);
                p0 = _mm256_fmadd_ps(x0, _mm256_loadu_ps(w0 + k), p0);
                p1 = _mm256_fmadd_ps(x0, _mm256_loadu_ps(w1 + k), p1);
                p2 = _mm256_fmadd_ps(x0, _mm256_loadu_ps(w2 + k), p2);
                p3 = _mm256_fmadd_ps(x0, _mm256_loadu_ps(w3 + k), p3);
                q0 = _mm256_fmadd_ps(x1, _mm256_loadu_ps(w0 + k + 8), q0);
                q1 = _mm256_fmadd_ps(x1, _mm256_loadu_ps(w1 + k + 8), q1);
                q2 = _mm256_fmadd_ps(x1, _mm256_loadu_ps(w2 + k + 8), q2);
                q3 = _mm256_fmadd_ps(x1, _mm256_loadu_ps(w3 + k + 8), q3);
            }
            for (; k + 8 <= K; k += 8) {
                __m256 x0 = _mm256_loadu_ps(x + k);
                p0 = _mm256_fmadd_ps(x0, _mm256_loadu_ps(w0 + k), p0);
                p1 = _mm256_fmadd_ps(x0, _mm256_loadu_ps(w1 + k), p1);
                p2 = _mm256_fmadd_ps(x0, _mm256_loadu_ps(w2 + k), p2);
                p3 = _mm256_fmadd_ps(x0, _mm256_loadu_ps(w3 + k), p3);
            }
            s[0] = hsum8(_mm256_add_ps(p0, q0));
            s[1] = hsum8(_mm256_add_ps(p1, q1));
            s[2] = hsum8(_mm256_add_ps(p2, q2));
            s[3] = hsum8(_mm256_add_ps(p3, q3));
            for (; k < K; k++) {
                s[0] += x[k] * w0[k]; s[1] += x[k] * w1[k];
                s[2] += x[k] * w2[k]; s[3] += x[k] * w3[k];
            }
            gemv_store(y + j * incy, incy, 4, s, alpha, beta);
        }
        for (; j < j1; j++) {
            const float *w0 = W + (size_t)j * ldw;
            __m256 p0 = _mm256_setzero_ps(), q0 = p0;
            int k = 0;
            for (; k + 16 <= K; k += 16) {
                p0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + k), _mm256_loadu_ps(w0 + k), p0);
                q0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + k + 8), _mm256_loadu_ps(w0 + k + 8), q0);
            }
            for (; k + 8 <= K; k += 8) p0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + k), _mm256_loadu_ps(w0 + k), p0);
            s[0] = hsum8(_mm256_add_ps(p0, q0));
            for (; k < K; k++) s[0] += x[k] * w0[k];
            gemv_store(y + j * incy, incy, 1, s, alpha, beta);
        }
        return;
    }
    if (j < j1) gemv_c(wt, j, j1, K, alpha, x, W, ldw, beta, y, incy);
}
#endif

/* ---------------------------------- GEMV over a packed B (M == 1, B held only packed) ------ */
/* y[j] = alpha * sum_k x[k] * op(B)(k,j) + beta * y[j] for the 16-wide panels [p0, p1) of Bp (tfm_gemm_pack_b's
 * layout: depth blocks of kcb, each all of N in panels, a panel kc x 16 row-major, zero padded on the right). The
 * sum runs over k in order whichever the depth blocks. */
static void gemv_packed_c(int p0, int p1, int N, int K, float alpha, const float *x, const float *Bp, float beta,
                          float *y) {
    const int kcb = pick_kc(K), ncap = nr_round(N);
    for (int p = p0; p < p1; p++) {
        float s[NR] = {0};
        for (int pc = 0; pc < K; pc += kcb) {
            const int kc = K - pc < kcb ? K - pc : kcb;
            const float *b = Bp + (size_t)pc * ncap + (size_t)p * NR * kc;
            for (int k = 0; k < kc; k++)
                for (int j = 0; j < NR; j++) s[j] += x[pc + k] * b[(size_t)k * NR + j];
        }
        for (int j = 0; j < NR && p * NR + j < N; j++) {
            float *yj = y + p * NR + j;
            *yj = beta == 0.0f ? alpha * s[j] : alpha * s[j] + beta * *yj;
        }
    }
}

#if TFM_HAVE_X86
/* AVX-512: gemv_packed_avx2's sums with one 16-wide vector a panel row (4 loads and 4 FMAs a depth step for 64
 * columns instead of 8 and 8: GPT-2 small's fp32 generation at 1 thread 1.14x on a Zen 5), each output's sum the
 * same chain of FMAs over k in order, so the same bits. The partial sums of GEMV_CHUNK panels (1024 outputs) wait in
 * a buffer while each depth block of those panels is read: the weight is read in runs of ~1 MB (kc 256), not 4
 * panels at a time across every depth block (another 2%). */
#define GEMV_CHUNK 64
TFM_TARGET_AVX512 static void gemv_packed_avx512(int p0, int p1, int N, int K, float alpha, const float *x,
                                                 const float *Bp, float beta, float *y) {
    const int kcb = pick_kc(K), ncap = nr_round(N);
    float s[GEMV_CHUNK * NR] __attribute__((aligned(64)));
    int p = p0;
    while (p1 - p >= 4) {
        const int c1 = p + (p1 - p < GEMV_CHUNK ? (p1 - p) / 4 * 4 : GEMV_CHUNK);   /* whole groups of 4 panels */
        for (int pc = 0; pc < K; pc += kcb) {
            const int kc = K - pc < kcb ? K - pc : kcb;
            const size_t ps = (size_t)kc * NR;
            for (int q = p; q < c1; q += 4) {
                float *sq = s + (size_t)(q - p) * NR;
                __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
                if (pc > 0) {   /* the sums so far, from the depth blocks before */
                    a0 = _mm512_load_ps(sq), a1 = _mm512_load_ps(sq + 16);
                    a2 = _mm512_load_ps(sq + 32), a3 = _mm512_load_ps(sq + 48);
                }
                const float *b = Bp + (size_t)pc * ncap + (size_t)q * NR * kc;   /* panel q; q + 1 is kc * NR further */
                for (int k = 0; k < kc; k++, b += NR) {
                    __m512 xk = _mm512_set1_ps(x[pc + k]);
                    a0 = _mm512_fmadd_ps(xk, _mm512_loadu_ps(b), a0);
                    a1 = _mm512_fmadd_ps(xk, _mm512_loadu_ps(b + ps), a1);
                    a2 = _mm512_fmadd_ps(xk, _mm512_loadu_ps(b + 2 * ps), a2);
                    a3 = _mm512_fmadd_ps(xk, _mm512_loadu_ps(b + 3 * ps), a3);
                }
                _mm512_store_ps(sq, a0), _mm512_store_ps(sq + 16, a1), _mm512_store_ps(sq + 32, a2);
                _mm512_store_ps(sq + 48, a3);
            }
        }
        const int n = N - p * NR < (c1 - p) * NR ? N - p * NR : (c1 - p) * NR;
        gemv_store(y + p * NR, 1, n, s, alpha, beta);
        p = c1;
    }
    if (p < p1) gemv_packed_c(p, p1, N, K, alpha, x, Bp, beta, y);
}

/* AVX2: a weight bigger than a core's L2 streams from memory, 4 panels at a time; their next lines are asked for
 * GEMV_PF floats (16 depth steps, 1 KB) ahead, which the hardware prefetcher alone did not keep up with at 8 loads a
 * step. GPT-2 small's fp32 generation with TFM_ISA=avx2 on a Zen 5, 1 thread: 1.09-1.19x over four sets of
 * alternating runs (2 threads 1.10x); the same in the AVX-512 loop (4 loads a step) gave 0.96-1.07x, so it has none.
 * A weight that stays in cache (the 4 x 128 GPT's, a translator's) takes the loop without them. */
#define GEMV_PF (16 * NR)
#define GEMV_PREFETCH_MIN_BYTES ((size_t)2 << 20)
static int gemv_streams(int K, int ncap) { return (size_t)K * ncap * sizeof(float) >= GEMV_PREFETCH_MIN_BYTES; }
#define GEMV_PREFETCH4(b, ps)                                                                \
    do {                                                                                     \
        _mm_prefetch((const char *)((b) + GEMV_PF), _MM_HINT_T0);                            \
        _mm_prefetch((const char *)((b) + (ps) + GEMV_PF), _MM_HINT_T0);                     \
        _mm_prefetch((const char *)((b) + 2 * (ps) + GEMV_PF), _MM_HINT_T0);                 \
        _mm_prefetch((const char *)((b) + 3 * (ps) + GEMV_PF), _MM_HINT_T0);                 \
    } while (0)
#define GEMV_STEPS_AVX2(PF)                                                                  \
    do {                                                                                     \
        for (int k = 0; k < kc; k++, b += NR) {                                              \
            __m256 xk = _mm256_broadcast_ss(x + pc + k);                                     \
            if (PF) GEMV_PREFETCH4(b, ps);                                                   \
            a0 = _mm256_fmadd_ps(xk, _mm256_loadu_ps(b), a0);                                \
            a1 = _mm256_fmadd_ps(xk, _mm256_loadu_ps(b + 8), a1);                            \
            a2 = _mm256_fmadd_ps(xk, _mm256_loadu_ps(b + ps), a2);                           \
            a3 = _mm256_fmadd_ps(xk, _mm256_loadu_ps(b + ps + 8), a3);                       \
            a4 = _mm256_fmadd_ps(xk, _mm256_loadu_ps(b + 2 * ps), a4);                       \
            a5 = _mm256_fmadd_ps(xk, _mm256_loadu_ps(b + 2 * ps + 8), a5);                   \
            a6 = _mm256_fmadd_ps(xk, _mm256_loadu_ps(b + 3 * ps), a6);                       \
            a7 = _mm256_fmadd_ps(xk, _mm256_loadu_ps(b + 3 * ps + 8), a7);                   \
        }                                                                                    \
    } while (0)
/* gemv_packed_c four panels (64 columns) at a time: 8 accumulators, one broadcast of x a depth step */
TFM_AVX2 static void gemv_packed_avx2(int p0, int p1, int N, int K, float alpha, const float *x, const float *Bp,
                                      float beta, float *y) {
    const int kcb = pick_kc(K), ncap = nr_round(N), stream = gemv_streams(K, ncap);
    float s[4 * NR] __attribute__((aligned(32)));
    int p = p0;
    for (; p + 4 <= p1; p += 4) {
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
        for (int pc = 0; pc < K; pc += kcb) {
            const int kc = K - pc < kcb ? K - pc : kcb;
            const float *b = Bp + (size_t)pc * ncap + (size_t)p * NR * kc;   /* panel p; p + 1 is kc * NR further */
            const size_t ps = (size_t)kc * NR;
            if (stream) GEMV_STEPS_AVX2(1);
            else GEMV_STEPS_AVX2(0);
        }
        _mm256_store_ps(s + 0, a0), _mm256_store_ps(s + 8, a1), _mm256_store_ps(s + 16, a2);
        _mm256_store_ps(s + 24, a3), _mm256_store_ps(s + 32, a4), _mm256_store_ps(s + 40, a5);
        _mm256_store_ps(s + 48, a6), _mm256_store_ps(s + 56, a7);
        const int n = N - p * NR < 4 * NR ? N - p * NR : 4 * NR;
        gemv_store(y + p * NR, 1, n, s, alpha, beta);
    }
    if (p < p1) gemv_packed_c(p, p1, N, K, alpha, x, Bp, beta, y);
}
#endif

/* A GEMV's split over threads: `chunks` chunks of 64 outputs (work multiply-adds) in groups of *per chunks, a few
 * groups per thread taken dynamically (an output's sum never depends on the split), *use threads. Returns the
 * number of groups. */
static int gemv_groups(int chunks, long long work, int nt, int *use, int *per) {
    long long wl = work / (TFM_GEMM_MIN_WORK / 2);
    int u = nt < chunks ? nt : chunks;
    if (wl < u) u = wl < 1 ? 1 : (int)wl;
    *per = u > 1 ? (chunks + u * TFM_GEMM_BLOCKS_PER_THREAD - 1) / (u * TFM_GEMM_BLOCKS_PER_THREAD) : chunks;
    *use = u;
    return (chunks + *per - 1) / *per;
}

/* Panels [p0, p1) of gemm_gemv_packed. */
static void gemv_packed_range(const gemm_args *g, int p0, int p1, tfm_isa isa) {
#if TFM_HAVE_X86
    if (isa >= TFM_ISA_AVX512) { gemv_packed_avx512(p0, p1, g->N, g->K, g->alpha, g->A, g->Bp, g->beta, g->C); return; }
    if (isa >= TFM_ISA_AVX2) { gemv_packed_avx2(p0, p1, g->N, g->K, g->alpha, g->A, g->Bp, g->beta, g->C); return; }
#endif
    gemv_packed_c(p0, p1, g->N, g->K, g->alpha, g->A, g->Bp, g->beta, g->C);
    (void)isa;
}

/* C (1, N) = alpha A op(B) + beta C with op(B) only packed (g->Bp; A one contiguous row). K > 0, alpha != 0. */
static void gemm_gemv_packed(const gemm_args *g, int nt, tfm_isa isa) {
    const int panels = nr_round(g->N) / NR;   /* chunks of 4 panels: 64 columns */
    int use, per, groups = gemv_groups((panels + 3) / 4, (long long)g->N * g->K, nt, &use, &per);
    TFM_PAR_FOR(use > 1, schedule(dynamic, 1) num_threads(use),
    for (int gi = 0; gi < groups; gi++) {
        int p0 = gi * per * 4, p1 = (gi + 1) * per * 4 < panels ? (gi + 1) * per * 4 : panels;
        gemv_packed_range(g, p0, p1, isa);
    });
}

/* Outputs [j0, j1) of gemm_gemv. */
static void gemv_range(int avx, int wt, int j0, int j1, int K, float alpha, const float *x, const float *W, int ldw,
                       float beta, float *y, ptrdiff_t incy) {
#if TFM_HAVE_X86
    if (avx) { gemv_avx2(wt, j0, j1, K, alpha, x, W, ldw, beta, y, incy); return; }
#endif
    gemv_c(wt, j0, j1, K, alpha, x, W, ldw, beta, y, incy);
    (void)avx;
}

/* M == 1 or N == 1 as a GEMV. K > 0, alpha != 0. */
static void gemm_gemv(const gemm_args *g, int nt, tfm_isa isa) {
    const int avx = isa >= TFM_ISA_AVX2;
    const float *x, *W;
    ptrdiff_t incx, incy;
    int wt, ldw, n;
    if (g->M == 1) { /* row of C = x^T op(B) */
        x = g->A; incx = g->ta ? g->lda : 1;
        W = g->B; ldw = g->ldb; wt = g->tb; n = g->N; incy = 1;
    } else { /* column of C = op(A) x, i.e. x^T op(A)^T */
        x = g->B; incx = g->tb ? 1 : g->ldb;
        W = g->A; ldw = g->lda; wt = !g->ta; n = g->M; incy = g->ldc;
    }
    const int K = g->K;
    float *xc = NULL;
    if (incx != 1) {
        xc = malloc(sizeof(float) * (size_t)K + 32); /* K may be big; keep it off the stack */
        if (!xc) abort();
        for (int k = 0; k < K; k++) xc[k] = x[(size_t)k * incx];
        x = xc;
    }
    int use, per, groups = gemv_groups((n + 63) / 64, (long long)n * K, nt, &use, &per);
    TFM_PAR_FOR(use > 1, schedule(dynamic, 1) num_threads(use),
    for (int gi = 0; gi < groups; gi++) {
        int j0 = gi * per * 64, j1 = (gi + 1) * per * 64 < n ? (gi + 1) * per * 64 : n;
        gemv_range(avx, wt, j0, j1, K, g->alpha, x, W, ldw, g->beta, g->C, incy);
    });
    free(xc);
}

/* ---------------------------------- work sharing (tfm_gemm_desk) ------------------------- */
/* Edge of part i of n parts of `panels` panels of `unit` rows or columns (gemm_one's grid of blocks, the
 * row blocks of a shared GEMM): on panel multiples, so the kernels see the same tiles in any split. */
static inline int part_edge(int panels, int i, int n, int unit) { return (int)((long long)panels * i / n) * unit; }
/* The units threads split C by: the path's widest tile (AVX-512: 12 x 32), so no block edge leaves rows or
 * columns to a narrower kernel (every kernel gives the same bits; the wide one is faster). */
static inline int tile_rows(tfm_isa isa) { return isa == TFM_ISA_AVX512 ? 2 * MR : MR; }
static inline int tile_cols(tfm_isa isa) { return isa == TFM_ISA_AVX512 ? 2 * NR : NR; }

/* The desk this thread posts its GEMMs to (tfm_gemm_share_begin .. _end), and its slot there. */
static _Thread_local struct {
    tfm_gemm_desk *desk;
    int slot;
} share_at;

static inline void spin_pause(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

#define SHARE_MIN_WORK (1LL << 20)
#define SHARE_BLOCK_PANELS 4 /* at least 4 x MR = 24 rows per block */
#define SHARE_MAX_BLOCKS 8
#define SHARE_SPINS 2000 /* empty polls (~50 us) before a helper yields its core between polls */

/* A slot holds the GEMM its thread has posted: op(B) packed once in the slot's buffer, C in row blocks
 * (on MR multiples) that threads claim from `next` and count in `done`. gen is odd while the GEMM is
 * posted. A helper announces itself in `users` and then re-reads gen, so the owner, which waits for
 * users == 0 before it rewrites the slot, never changes a GEMM a helper is reading. */
typedef struct {
    _Alignas(64) atomic_uint gen;
    atomic_int next, done, users;
    gemm_args g;
    tfm_isa isa;
    int nblocks;
    float *bp;
    size_t bp_cap;
} share_slot;

struct tfm_gemm_desk {
    int slots;
    _Alignas(64) atomic_int busy; /* items not finished */
    atomic_long helped;           /* blocks computed by helpers */
    share_slot *slot;
};

tfm_gemm_desk *tfm_gemm_desk_new(int slots) {
    tfm_gemm_desk *d = aligned_alloc(64, (sizeof *d + 63) / 64 * 64);
    if (!d) return NULL;
    memset(d, 0, sizeof *d);
    d->slots = slots;
    d->slot = aligned_alloc(64, (sizeof *d->slot * (size_t)slots + 63) / 64 * 64);
    if (!d->slot) return free(d), NULL;
    memset(d->slot, 0, sizeof *d->slot * (size_t)slots);
    return d;
}

void tfm_gemm_desk_free(tfm_gemm_desk *d) {
    if (!d) return;
    for (int i = 0; i < d->slots; i++) free(d->slot[i].bp);
    free(d->slot);
    free(d);
}

void tfm_gemm_desk_open(tfm_gemm_desk *d, int items) { atomic_store(&d->busy, items); }

long tfm_gemm_desk_helped(const tfm_gemm_desk *d) { return atomic_load(&((tfm_gemm_desk *)d)->helped); }

void tfm_gemm_share_begin(tfm_gemm_desk *d, int slot) {
    share_at.desk = slot >= 0 && slot < d->slots ? d : NULL;
    share_at.slot = slot;
}

void tfm_gemm_share_end(tfm_gemm_desk *d) {
    share_at.desk = NULL;
    atomic_fetch_sub(&d->busy, 1);
}

static void share_block(share_slot *s, int b) {
    const int mu = tile_rows(s->isa), mp = (s->g.M + mu - 1) / mu;
    int m0 = part_edge(mp, b, s->nblocks, mu), m1 = part_edge(mp, b + 1, s->nblocks, mu);
    gemm_rect(&s->g, m0, m1 < s->g.M ? m1 : s->g.M, 0, s->g.N, s->isa);
}

/* claim and compute blocks of s until none is left; returns how many this thread computed */
static int share_work(share_slot *s) {
    int b, n = 0;
    while ((b = atomic_fetch_add(&s->next, 1)) < s->nblocks) {
        share_block(s, b);
        atomic_fetch_add(&s->done, 1);
        n++;
    }
    return n;
}

/* op(B) (K,N) packed whole in gemm_rect's layout (tfm_gemm_pack_b, and a shared GEMM's B) */
static void pack_b_whole(const gemm_args *g, tfm_isa isa, float *Bp) {
    const int kcb = pick_kc(g->K);
    for (int pc = 0; pc < g->K; pc += kcb) {
        const int kc = g->K - pc < kcb ? g->K - pc : kcb;
        float *out = Bp + (size_t)pc * nr_round(g->N);
#if TFM_HAVE_X86
        if (isa >= TFM_ISA_AVX2) { pack_b_avx2(g, pc, 0, kc, g->N, out); continue; }
#endif
        (void)isa;
        pack_b_c(g, pc, 0, kc, g->N, out);
    }
}

/* Posts g to this thread's slot, computes blocks with any helpers, returns when all are done; 0 if it
 * cannot (no memory for the packed B: the caller computes g alone). */
static int gemm_shared(const gemm_args *g, tfm_isa isa) {
    share_slot *s = &share_at.desk->slot[share_at.slot];
    while (atomic_load(&s->users)) spin_pause(); /* a helper still leaving the previous GEMM */
    s->g = *g;
    if (!g->Bp) {
        size_t need = (size_t)g->K * nr_round(g->N) + 16;
        if (need > s->bp_cap) {
            free(s->bp);
            s->bp = aligned_alloc(64, (need * sizeof(float) + 63) / 64 * 64);
            s->bp_cap = s->bp ? need : 0;
            if (!s->bp) return 0;
        }
        pack_b_whole(g, isa, s->bp);
        s->g.Bp = s->bp;
    }
    s->isa = isa;
    int blocks = (g->M + MR - 1) / MR / SHARE_BLOCK_PANELS;
    s->nblocks = blocks > SHARE_MAX_BLOCKS ? SHARE_MAX_BLOCKS : blocks;
    atomic_store(&s->next, 0);
    atomic_store(&s->done, 0);
    atomic_fetch_add(&s->gen, 1); /* posted */
    share_work(s);
    while (atomic_load(&s->done) < s->nblocks) spin_pause();
    atomic_fetch_add(&s->gen, 1); /* withdrawn */
    return 1;
}

void tfm_gemm_help(tfm_gemm_desk *d, int self) {
    int idle = 0;
    while (atomic_load(&d->busy) > 0) {
        int helped = 0;
        for (int i = 0; i < d->slots; i++) {
            share_slot *s = &d->slot[i];
            unsigned gen = atomic_load(&s->gen);
            if (i == self || !(gen & 1)) continue;
            atomic_fetch_add(&s->users, 1);
            if (atomic_load(&s->gen) == gen) {
                int n = share_work(s);
                if (n) atomic_fetch_add(&d->helped, n);
                helped |= n;
            }
            atomic_fetch_sub(&s->users, 1);
        }
        if (helped) idle = 0;
        else if (++idle < SHARE_SPINS) spin_pause();
        else sched_yield(); /* nothing posted for a while: leave the core to whoever needs it */
    }
}

/* Choose a tm x tn grid of blocks and run them. With nt > 1 threads there are nt * bpt blocks (bpt =
 * TFM_GEMM_BLOCKS_PER_THREAD, fewer when the GEMM is small) that the threads take dynamically: a thread
 * the OS deschedules (a busy machine) holds up at most the block it is on while the others take the rest.
 * Block edges are on MR/NR multiples, so every C element goes through the same kernel and the same k
 * order whichever block and thread computes it: results do not depend on the thread count or schedule. */
static void gemm_one(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A,
                     int lda, const float *B, int ldb, float beta, float *C, int ldc, int nt, tfm_isa isa,
                     int pack_a, const float *Bp, const float *bias) {
    if (M <= 0 || N <= 0) return;
    /* a GEMV reads B as it is; a B held only packed (B NULL, tfm_params_hold_packed): one row by a GEMV over
     * its panels, anything else through the tiles */
    const int gemv = (M == 1 || N == 1) && B, gemv_packed = M == 1 && !B && Bp && !trans_a;
    if (bias && (gemv || gemv_packed || K <= 0 || alpha == 0.0f)) /* GEMVs and the trivial cases: seed C first */
        seed_bias(bias, M, N, C, ldc), beta = 1.0f, bias = NULL;
    if (K <= 0 || alpha == 0.0f) { scale_c(M, N, beta, C, ldc); return; }
    const gemm_args g = {trans_a, trans_b, M, N, K, alpha, beta, A, B, C, lda, ldb, ldc, pack_a, Bp, bias};
    if (gemv) { gemm_gemv(&g, nt, isa); return; }
    if (gemv_packed) { gemm_gemv_packed(&g, nt, isa); return; }
    const long long work = (long long)M * N * K;
    if (nt == 1 && share_at.desk && M >= 2 * SHARE_BLOCK_PANELS * MR && work >= SHARE_MIN_WORK && gemm_shared(&g, isa))
        return;
    if (nt > 1 && work < (long long)TFM_GEMM_MIN_WORK * nt) {
        long long w = work / TFM_GEMM_MIN_WORK;
        nt = w < 1 ? 1 : (int)w;
    }
    const int mu = tile_rows(isa), nu = tile_cols(isa);
    const int mp = (M + mu - 1) / mu, np = (N + nu - 1) / nu; /* micro-panels (tiles) */
    int best_tm = 1, best_tn = 1;
    if (nt > 1) {
        long long bpt_work = work / ((long long)TFM_GEMM_MIN_WORK * nt); /* blocks of >= MIN_WORK */
        int bpt = bpt_work < TFM_GEMM_BLOCKS_PER_THREAD ? (int)bpt_work : TFM_GEMM_BLOCKS_PER_THREAD;
        for (bpt = bpt < 1 ? 1 : bpt; bpt >= 1 && best_tm * best_tn == 1; bpt--) {
            const int nb_total = nt * bpt;
            double best = 1e300;
            for (int tn = 1; tn <= nb_total; tn++) {
                int tm = nb_total / tn;
                if (tm * tn != nb_total || tm > mp || tn > np) continue;
                double mb = (double)((mp + tm - 1) / tm) * mu, nb = (double)((np + tn - 1) / tn) * nu;
                /* per-block compute + packing of its A rows (per N block) and B columns, all blocks */
                double cost = nb_total * (mb * nb + 2.0 * (mb * (1 + nb / TFM_GEMM_NC) + nb * 1.0));
                if (cost < best) { best = cost; best_tm = tm; best_tn = tn; }
            }
        }
    }
    const int tm = best_tm, tn = best_tn;
    if (tm * tn == 1) { gemm_rect(&g, 0, M, 0, N, isa); return; }
    const int use = nt < tm * tn ? nt : tm * tn;
#pragma omp parallel for schedule(dynamic, 1) num_threads(use)
    for (int blk = 0; blk < tm * tn; blk++) {
        int ti = blk / tn, tj = blk % tn;
        int m0 = part_edge(mp, ti, tm, mu), m1 = part_edge(mp, ti + 1, tm, mu);
        int n0 = part_edge(np, tj, tn, nu), n1 = part_edge(np, tj + 1, tn, nu);
        gemm_rect(&g, m0, m1 < M ? m1 : M, n0, n1 < N ? n1 : N, isa);
    }
}
#endif /* TFM_USE_OPENBLAS */

/* ------------------------------------------------------------------------------------------ */
void tfm_gemm(int trans_a, int trans_b, int M, int N, int K, float alpha,
              const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc) {
    gemm_one(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, gemm_threads(), tfm_isa_active(), 0, NULL,
             NULL);
}

void tfm_gemm_isa_(int isa, int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A, int lda,
                   const float *B, int ldb, float beta, float *C, int ldc) {
    gemm_one(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, gemm_threads(),
             (tfm_isa)(isa & ~TFM_GEMM_PACK_A_), (isa & TFM_GEMM_PACK_A_) != 0, NULL, NULL);
}

void tfm_gemm_held_isa_(int isa, int M, int N, int K, float alpha, const float *A, int lda, const float *Bp, float beta,
                        float *C, int ldc) {
    gemm_one(0, 1, M, N, K, alpha, A, lda, NULL, K, beta, C, ldc, gemm_threads(), (tfm_isa)isa, 0, Bp, NULL);
}

#ifdef TFM_USE_OPENBLAS
size_t tfm_gemm_packed_b_floats(int N, int K) { (void)N; (void)K; return 0; }
void tfm_gemm_pack_b(int trans_b, int N, int K, const float *B, int ldb, float *Bp) {
    (void)trans_b; (void)N; (void)K; (void)B; (void)ldb; (void)Bp;
}
#else
/* Depth blocks of pick_kc(K) one after the other, each all of N in NR-wide panels (zero padded): the
 * panels gemm_rect packs for columns [jc, jc + nc) at depth pc are at Bp + pc * ncap + jc * kc. */
size_t tfm_gemm_packed_b_floats(int N, int K) { return N > 0 && K > 0 ? (size_t)K * nr_round(N) : 0; }

void tfm_gemm_pack_b(int trans_b, int N, int K, const float *B, int ldb, float *Bp) {
    const gemm_args g = {.tb = trans_b, .N = N, .K = K, .B = B, .ldb = ldb};
    pack_b_whole(&g, tfm_isa_active(), Bp);
}
#endif

void tfm_gemm_pb(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
                 int ldb, const float *Bp, float beta, float *C, int ldc) {
    gemm_one(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, gemm_threads(), tfm_isa_active(), 0, Bp,
             NULL);
}

void tfm_gemm_bias(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
                   int ldb, const float *Bp, const float *bias, float *C, int ldc) {
    gemm_one(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, 1.0f, C, ldc, gemm_threads(), tfm_isa_active(), 0, Bp,
             bias);
}

void tfm_gemm_batched(int batch, int trans_a, int trans_b, int M, int N, int K, float alpha,
                      const float *A, int lda, size_t stride_a, const float *B, int ldb, size_t stride_b,
                      float beta, float *C, int ldc, size_t stride_c) {
    if (batch <= 0 || M <= 0 || N <= 0) return;
    int nt = gemm_threads();
    const tfm_isa isa = tfm_isa_active();
    long long work = (long long)M * N * (K > 0 ? K : 1);
#ifdef TFM_USE_OPENBLAS
    const long long small = 0; /* OpenBLAS threads internally; keep calls sequential */
#else
    const long long small = TFM_GEMM_BATCH_SMALL;
#endif
    /* A shared C (stride 0) means the GEMMs accumulate into one matrix: keep them in order. */
    if (nt > 1 && batch > 1 && stride_c != 0 && work <= small) {
        int use = batch < nt ? batch : nt;
#pragma omp parallel for num_threads(use) schedule(dynamic, 1)
        for (int i = 0; i < batch; i++)
            gemm_one(trans_a, trans_b, M, N, K, alpha, A + i * stride_a, lda, B + i * stride_b, ldb, beta,
                     C + i * stride_c, ldc, 1, isa, 0, NULL, NULL);
        return;
    }
    for (int i = 0; i < batch; i++)
        gemm_one(trans_a, trans_b, M, N, K, alpha, A + i * stride_a, lda, B + i * stride_b, ldb, beta,
                 C + i * stride_c, ldc, nt, isa, 0, NULL, NULL);
}
