/* src/core/par.h: TFM_PAR_FOR / TFM_PAR_TEAM run their loop in place when the condition is false (no
 * OpenMP region entered: omp_get_level() stays 0 outside any team), under the pragma when it is true,
 * and every iteration runs once either way. In place, TFM_PAR_RANK and team_rank are 0 and team_size 1
 * even inside an enclosing team (a decoding worker's), where omp_get_thread_num() is the worker's rank:
 * per-thread scratch indexed by it would overrun a buffer sized for one thread. */
#include <omp.h>
#include <stdio.h>

#include "check.h"
#include "core/par.h"

enum { N = 1000 };

/* Runs TFM_PAR_FOR(cond) over N iterations; counts visits per iteration, the ranks seen and the deepest
 * OpenMP level. Returns 1 if every iteration ran exactly once. */
static int par_for(int cond, int nt, int *max_rank, int *max_level) {
    int visits[N];
    int mr = 0, ml = 0;
    for (int i = 0; i < N; i++) visits[i] = 0;
    TFM_PAR_FOR(cond, schedule(static) num_threads(nt) reduction(max : mr, ml),
    for (int i = 0; i < N; i++) {
        visits[i]++;
        if (TFM_PAR_RANK > mr) mr = TFM_PAR_RANK;
        if (omp_get_level() > ml) ml = omp_get_level();
    });
    *max_rank = mr, *max_level = ml;
    for (int i = 0; i < N; i++)
        if (visits[i] != 1) return 0;
    return 1;
}

/* TFM_PAR_TEAM(cond): each member adds its slice of 0..N-1; returns the sum (N(N-1)/2 when every element
 * was added once) and the team size seen. */
static long par_team(int cond, int nt, int *size_seen, int *max_rank) {
    long sum = 0;
    int sz = 0, mr = 0;
    TFM_PAR_TEAM(cond, num_threads(nt) reduction(+ : sum) reduction(max : sz, mr), {
        int per = (N + team_size - 1) / team_size, lo = team_rank * per, hi = lo + per < N ? lo + per : N;
        for (int i = lo; i < hi; i++) sum += i;
        sz = team_size, mr = team_rank;
    });
    *size_seen = sz, *max_rank = mr;
    return sum;
}

int main(void) {
    const long total = (long)N * (N - 1) / 2;
    int rank, level, size;
    int ok = par_for(0, 2, &rank, &level);
    CHECK("par_for_in_place", ok && rank == 0 && level == 0, "all once %d, rank %d, OpenMP level %d (want 0: no region)",
          ok, rank, level);
    ok = par_for(1, 2, &rank, &level);
    CHECK("par_for_team", ok && level == 1 && rank <= 1, "all once %d, rank %d, level %d", ok, rank, level);
    long s = par_team(0, 2, &size, &rank);
    CHECK("par_team_in_place", s == total && size == 1 && rank == 0, "sum %ld of %ld, team size %d, rank %d", s,
          total, size, rank);
    s = par_team(1, 2, &size, &rank);
    CHECK("par_team_team", s == total && size >= 1 && size <= 2, "sum %ld of %ld, team size %d", s, total, size);

    /* inside an enclosing team of 2 (the decoding workers' pattern): in place, each worker is rank 0 of its own */
    int bad_for = 0, bad_team = 0, workers = 0;
#pragma omp parallel num_threads(2) reduction(+ : bad_for, bad_team, workers)
    {
        int r, l, z;
        bad_for += !par_for(0, 2, &r, &l) || r != 0 || l != omp_get_level();
        bad_team += par_team(0, 2, &z, &r) != total || z != 1 || r != 0;
        workers++;
    }
    CHECK("par_for_in_place_inside_a_team", !bad_for, "%d of %d workers saw a rank other than 0 or lost iterations",
          bad_for, workers);
    CHECK("par_team_in_place_inside_a_team", !bad_team, "%d of %d workers saw another team", bad_team, workers);
    CHECK_EXIT();
}
