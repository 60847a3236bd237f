/* Default thread count (test_thread_count): OMP_NUM_THREADS when set, else the CPUs this process may run on (affinity,
 * at most a cgroup CPU quota). */
#include "check.h"
#include "tfm/core.h"
#include <omp.h>
#include <sched.h>
#include <stdlib.h>

static int affinity_count(void) {
    cpu_set_t set;
    CPU_ZERO(&set);
    return sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : -1;
}

int main(void) {
    const char *old = getenv("OMP_NUM_THREADS");
    char *saved = old ? strdup(old) : NULL;
    unsetenv("OMP_NUM_THREADS");
    int cpus = affinity_count();
    double quota = tfm_cpu_quota();   /* a cgroup CPU quota caps the default (test_cpu_quota) */
    if (quota > 0 && quota < cpus) cpus = (int)ceil(quota);
    CHECK("threads_default_is_affinity", cpus >= 1 && tfm_default_threads() == cpus, "got %d, affinity/quota %d",
          tfm_default_threads(), cpus);
    setenv("OMP_NUM_THREADS", "1", 1);
    CHECK("threads_omp_num_threads_1", tfm_default_threads() == 1, "got %d", tfm_default_threads());
    setenv("OMP_NUM_THREADS", "3,2", 1);
    CHECK("threads_omp_num_threads_list_first", tfm_default_threads() == 3, "got %d", tfm_default_threads());
    setenv("OMP_NUM_THREADS", "zero", 1);
    CHECK("threads_omp_num_threads_invalid_ignored", tfm_default_threads() == cpus, "got %d", tfm_default_threads());
    setenv("OMP_NUM_THREADS", "0", 1);
    CHECK("threads_omp_num_threads_0_ignored", tfm_default_threads() == cpus, "got %d", tfm_default_threads());
    setenv("OMP_NUM_THREADS", "1", 1);
    tfm_set_threads(0);
    CHECK("threads_set_0_honours_omp_num_threads", tfm_get_threads() == 1, "got %d", tfm_get_threads());
    tfm_set_threads(2);
    CHECK("threads_set_explicit_wins", tfm_get_threads() == 2, "got %d", tfm_get_threads());
    unsetenv("OMP_NUM_THREADS");

    /* restricted to one CPU (as under taskset -c N): one thread by default */
    cpu_set_t all, one;
    CPU_ZERO(&all);
    if (sched_getaffinity(0, sizeof all, &all) == 0) {
        int first = -1;
        for (int c = 0; c < CPU_SETSIZE && first < 0; c++)
            if (CPU_ISSET(c, &all)) first = c;
        CPU_ZERO(&one);
        CPU_SET(first, &one);
        if (sched_setaffinity(0, sizeof one, &one) == 0) {
            int d = tfm_default_threads();
            tfm_set_threads(0);
            int g = tfm_get_threads();
            sched_setaffinity(0, sizeof all, &all);
            CHECK("threads_default_one_cpu_affinity", d == 1 && g == 1, "default %d, set(0) -> %d", d, g);
        } else {
            printf("SKIP threads_default_one_cpu_affinity: sched_setaffinity refused\n");
        }
    }
    if (saved) setenv("OMP_NUM_THREADS", saved, 1);
    free(saved);
    CHECK_EXIT();
}
