/* GEMM work sharing (tfm_gemm_desk): the GEMMs one thread posts while another thread helps give the same
 * bits as the same GEMMs computed alone, for every layout and beta, and the helper really computes some
 * of their blocks. Then two posting threads and items that end at different times (the training loops'
 * pattern: tfm_train_chunks_run). */
#include "check.h"
#include "tfm/tfm.h"
#include <omp.h>
#include <stdatomic.h>

typedef struct {
    int ta, tb, M, N, K;
    float beta;
} shape;

static const shape shapes[] = {
    {0, 0, 384, 128, 128, 1.0f}, {0, 1, 384, 512, 128, 0.0f}, {1, 0, 128, 128, 384, 1.0f},
    {1, 0, 512, 128, 384, 1.0f}, {0, 0, 103, 67, 301, 0.5f},  {0, 1, 250, 65, 128, 0.0f},
    {1, 1, 97, 200, 260, 1.0f},  {0, 0, 600, 40, 9, 1.0f},     {0, 0, 47, 100, 100, 1.0f}, /* 47 rows: not shared */
};
enum { NS = sizeof shapes / sizeof *shapes, REPS = 4 };

static float *A[NS], *B[NS], *C0[NS];

static void fill(float *x, size_t n, unsigned seed) {
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        x[i] = (float)((seed >> 9) & 0xffff) / 32768.0f - 1.0f;
    }
}

static void run(int s, float *C) {
    const shape *h = &shapes[s];
    tfm_gemm(h->ta, h->tb, h->M, h->N, h->K, 0.75f, A[s], h->ta ? h->M : h->K, B[s], h->tb ? h->K : h->N, h->beta, C,
             h->N);
}

/* One item: the shapes' GEMMs, REPS times each, into fresh copies of the starting C, posted to slot of d;
 * 1 if every result equals C0. */
static int post_all(tfm_gemm_desk *d, int slot) {
    int same = 1;
    tfm_gemm_share_begin(d, slot);
    for (int r = 0; r < REPS; r++)
        for (int s = 0; s < NS; s++) {
            size_t n = (size_t)shapes[s].M * shapes[s].N;
            float *C = malloc(n * sizeof(float));
            fill(C, n, 99u + (unsigned)s);
            run(s, C);
            same &= memcmp(C, C0[s], n * sizeof(float)) == 0;
            free(C);
        }
    tfm_gemm_share_end(d);
    return same;
}

int main(void) {
    omp_set_num_threads(1);
    for (int s = 0; s < NS; s++) {
        const shape *h = &shapes[s];
        A[s] = malloc(sizeof(float) * (size_t)h->M * h->K);
        B[s] = malloc(sizeof(float) * (size_t)h->K * h->N);
        C0[s] = malloc(sizeof(float) * (size_t)h->M * h->N);
        fill(A[s], (size_t)h->M * h->K, 1u + (unsigned)s);
        fill(B[s], (size_t)h->K * h->N, 50u + (unsigned)s);
        fill(C0[s], (size_t)h->M * h->N, 99u + (unsigned)s);
        run(s, C0[s]); /* the reference: computed alone, one thread */
    }

    /* thread 0 posts every GEMM; thread 1 has no item and helps from the start */
    tfm_gemm_desk *d = tfm_gemm_desk_new(2);
    CHECK("desk allocated", d != NULL, "out of memory");
    if (!d) CHECK_EXIT();
    /* Whether the helper gets blocks depends on the scheduler: a VM can leave the helper's vCPU descheduled
     * for the few milliseconds one round of posting takes (seen once in CI). So rounds repeat, up to
     * HELP_ROUNDS, until the helper has computed some blocks; every round's results must equal the reference. */
    enum { HELP_ROUNDS = 20 };
    int same = 1, rounds = 0;
    while (rounds < HELP_ROUNDS && (rounds == 0 || tfm_gemm_desk_helped(d) == 0)) {
        int same_round = 0;
        atomic_int helping = 0;
        tfm_gemm_desk_open(d, 1);
#pragma omp parallel num_threads(2)
        {
            omp_set_num_threads(1);
            if (omp_get_thread_num() == 1) {
                atomic_store(&helping, 1);
                tfm_gemm_help(d, 1);
            } else {
                while (omp_get_num_threads() == 2 && !atomic_load(&helping)) {}
                same_round = post_all(d, 0);
                tfm_gemm_help(d, 0);
            }
        }
        same &= same_round;
        rounds++;
        if (omp_get_num_procs() < 2 || !tfm_gemm_packed_b_floats(1, 1)) break; /* no helping to wait for */
    }
    CHECK("gemm_share: posted GEMMs with a helper == computed alone, bit for bit (9 shapes x 4, every layout)",
          same, "results differ");
    long helped = tfm_gemm_desk_helped(d);
    if (!tfm_gemm_packed_b_floats(1, 1)) printf("NOTRUN gemm_share: the OpenBLAS build shares nothing\n");
    else if (omp_get_num_procs() < 2) printf("NOTRUN gemm_share: helper blocks (1 CPU: %ld helped)\n", helped);
    else CHECK("gemm_share: the helping thread computed blocks of the posted GEMMs (within 20 rounds)", helped > 0,
               "%ld blocks in %d rounds", helped, rounds);

    /* two posting threads whose items end at different times, then both help: tfm_train_chunks_run's
     * pattern, several rounds on one desk */
    int ok = 1;
    for (int round = 0; round < 3; round++) {
        int same2[2] = {0, 0};
        tfm_gemm_desk_open(d, 3);
#pragma omp parallel num_threads(2)
        {
            omp_set_num_threads(1);
            int t = omp_get_thread_num();
            if (omp_get_num_threads() == 2) {
                same2[t] = t == 0 ? post_all(d, 0) : (post_all(d, 1) & post_all(d, 1));
                tfm_gemm_help(d, t);
            } else { /* one thread given: it runs both items itself */
                same2[0] = post_all(d, 0);
                same2[1] = post_all(d, 0) & post_all(d, 0);
            }
        }
        ok &= same2[0] && same2[1];
    }
    CHECK("gemm_share: two posting threads, items of different lengths, 3 rounds: bits == alone", ok,
          "results differ");
    tfm_gemm_desk_free(d);
    tfm_gemm_desk_free(NULL);
    for (int s = 0; s < NS; s++) free(A[s]), free(B[s]), free(C0[s]);
    CHECK_EXIT();
}
