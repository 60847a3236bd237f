/* OpenMP regions that cost nothing when they run on one thread.
 *
 * An `if (false)` clause does not skip the OpenMP runtime: gcc's libgomp still sets up and tears down a
 * team of one for the region, 1.2 us each time (gcc 12, a Zen 5), about what a 128-wide LayerNorm row
 * costs. A decoding step makes one such region per op: 53 a token for the 4 x 128 GPT (a third of its
 * step at 1 thread), ~750 for a Multi30k sentence at batch 1. These macros run the loop (or block) in
 * place when the condition is false and under the pragma when it is true; the loop is the last argument:
 *
 *     TFM_PAR_FOR(n >= 16384, schedule(static),
 *     for (size_t i = 0; i < n; i++) {
 *         y[i] = a[i] + b[i];
 *     });
 *
 * The loop is compiled twice (each copy computes every element with the same operations, so the
 * results are the same either way). No preprocessor directive may appear inside it. */
#ifndef TFM_PAR_H
#define TFM_PAR_H
#include <omp.h>

#define TFM_PRAGMA(x) _Pragma(#x)

/* `#pragma omp parallel for CLAUSES LOOP` when COND holds, else LOOP on the calling thread. LOOP names its
 * thread TFM_PAR_RANK (0 in place; not omp_get_thread_num(), which in place is the thread's rank in an
 * enclosing team, e.g. a decoding worker's). */
#define TFM_PAR_FOR(cond, clauses, ...)                  \
    do {                                                 \
        if (cond) {                                      \
            const int tfm_par_team_ = 1;                 \
            (void)tfm_par_team_;                         \
            TFM_PRAGMA(omp parallel for clauses)         \
            __VA_ARGS__                                  \
        } else {                                         \
            const int tfm_par_team_ = 0;                 \
            (void)tfm_par_team_;                         \
            __VA_ARGS__                                  \
        }                                                \
    } while (0)
#define TFM_PAR_RANK (tfm_par_team_ ? omp_get_thread_num() : 0)

/* `#pragma omp parallel CLAUSES BLOCK` when COND holds, else BLOCK on the calling thread. BLOCK sees its
 * team as team_size and team_rank (1 and 0 in place; not omp_get_num_threads(), which in place would
 * be an enclosing team's size). */
#define TFM_PAR_TEAM(cond, clauses, ...)                                                        \
    do {                                                                                        \
        if (cond) {                                                                             \
            TFM_PRAGMA(omp parallel clauses) {                                                  \
                const int team_size = omp_get_num_threads(), team_rank = omp_get_thread_num(); \
                __VA_ARGS__                                                                     \
            }                                                                                   \
        } else {                                                                                \
            const int team_size = 1, team_rank = 0;                                             \
            __VA_ARGS__                                                                         \
        }                                                                                       \
    } while (0)

#endif
