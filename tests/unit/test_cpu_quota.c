/* cgroup CPU quotas (core/cpu_quota.c, test_cpu_quota): tfm_cpu_quota_at over made-up /proc/self and cgroup
 * trees for cgroup v2, v1 and the hybrid layout, containers (the mount's root is the container's cgroup),
 * ancestors' limits, "no limit" and malformed files (never a limit, never a crash). The real cgroup is checked
 * by tests/cli/threads.sh (tfm in a cgroup limited to one CPU runs one thread by default). */
#include "check.h"
#include "tfm/core.h"
#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

static char root[256];

/* mkdir -p ROOT/DIR */
static void mkdirs(const char *dir) {
    char path[2048];
    snprintf(path, sizeof path, "%s/%s", root, dir);
    for (char *p = path + strlen(root) + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            mkdir(path, 0755);
            *p = '/';
        }
    mkdir(path, 0755);
}

/* ROOT/PATH = TEXT (its directory created) */
static void put(const char *path, const char *text) {
    char dir[1024], full[2048];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = '\0', mkdirs(dir);
    snprintf(full, sizeof full, "%s/%s", root, path);
    FILE *f = fopen(full, "w");
    if (!f) { fprintf(stderr, "cannot write %s: %s\n", full, strerror(errno)); exit(1); }
    fputs(text, f);
    fclose(f);
}

static void wipe(void) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'/proc '%s'/sys '%s'/mnt", root, root, root);
    if (system(cmd) != 0) exit(1);
}

#define V2_MOUNT "29 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate\n"
#define NEAR(x, want) (fabs((x) - (want)) < 1e-9)

int main(void) {
    snprintf(root, sizeof root, "%s/tfm_quota_XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(root)) { perror("mkdtemp"); return 1; }

    /* cgroup v2: the process's own limit, 1.5 CPUs; a parent without one */
    put("proc/self/mountinfo", "22 1 8:1 / / rw - ext4 /dev/sda1 rw\n" V2_MOUNT);
    put("proc/self/cgroup", "0::/system.slice/tfm.service\n");
    put("sys/fs/cgroup/system.slice/tfm.service/cpu.max", "150000 100000\n");
    put("sys/fs/cgroup/system.slice/cpu.max", "max 100000\n");
    double q = tfm_cpu_quota_at(root);
    CHECK("quota_v2_own", NEAR(q, 1.5), "got %g", q);
    /* an ancestor's tighter limit wins */
    put("sys/fs/cgroup/system.slice/cpu.max", "50000 100000\n");
    q = tfm_cpu_quota_at(root);
    CHECK("quota_v2_ancestor_tighter", NEAR(q, 0.5), "got %g", q);
    /* no limit anywhere */
    put("sys/fs/cgroup/system.slice/cpu.max", "max 100000\n");
    put("sys/fs/cgroup/system.slice/tfm.service/cpu.max", "max 100000\n");
    q = tfm_cpu_quota_at(root);
    CHECK("quota_v2_max_is_none", q == 0, "got %g", q);
    /* malformed cpu.max files are no limit */
    const char *bad[] = {"", "garbage\n", "100000\n", "-5 100000\n", "100000 0\n", "12x 100000\n", "100000 abc\n"};
    int all_none = 1;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        put("sys/fs/cgroup/system.slice/tfm.service/cpu.max", bad[i]);
        if (tfm_cpu_quota_at(root) != 0) all_none = 0, fprintf(stderr, "cpu.max '%s' gave a limit\n", bad[i]);
    }
    CHECK("quota_v2_malformed_is_none", all_none, "see stderr");
    wipe();

    /* a container (docker --cpus=2, cgroup v2): its cgroup is the mount's root, /proc/self/cgroup says "/" */
    put("proc/self/mountinfo", "500 400 0:26 / /sys/fs/cgroup ro,nosuid - cgroup2 cgroup rw\n");
    put("proc/self/cgroup", "0::/\n");
    put("sys/fs/cgroup/cpu.max", "200000 100000\n");
    q = tfm_cpu_quota_at(root);
    CHECK("quota_v2_container_root", NEAR(q, 2.0), "got %g", q);
    wipe();

    /* cgroup v1, cpu and cpuacct together, mounted at a path with a space (mountinfo escapes it); the mount's
     * root is the container's cgroup (/docker/abc), the process's cgroup path below it */
    put("proc/self/mountinfo", "22 1 8:1 / / rw - ext4 /dev/sda1 rw\n"
                               "35 25 0:30 /docker/abc /mnt/cg\\040v1 rw,relatime - cgroup cgroup rw,cpu,cpuacct\n"
                               "36 25 0:31 /docker/abc /sys/fs/cgroup/cpuset rw - cgroup cgroup rw,cpuset\n");
    put("proc/self/cgroup", "5:cpuset:/docker/abc\n4:cpu,cpuacct:/docker/abc/job\n1:name=systemd:/docker/abc\n");
    put("mnt/cg v1/job/cpu.cfs_quota_us", "-1\n");
    put("mnt/cg v1/job/cpu.cfs_period_us", "100000\n");
    put("mnt/cg v1/cpu.cfs_quota_us", "250000\n");
    put("mnt/cg v1/cpu.cfs_period_us", "100000\n");
    q = tfm_cpu_quota_at(root);
    CHECK("quota_v1_cpu_cpuacct_container", NEAR(q, 2.5), "got %g", q);
    put("mnt/cg v1/cpu.cfs_quota_us", "-1\n");
    q = tfm_cpu_quota_at(root);
    CHECK("quota_v1_minus_one_is_none", q == 0, "got %g", q);
    wipe();

    /* the hybrid layout (v1 controllers, v2 at /sys/fs/cgroup/unified without cpu.max): v1's limit counts;
     * a "cpuset" controller is not "cpu" */
    put("proc/self/mountinfo", "32 31 0:29 / /sys/fs/cgroup/cpuset rw - cgroup cgroup rw,cpuset\n"
                               "33 31 0:30 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n"
                               "41 31 0:38 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n");
    put("proc/self/cgroup", "3:cpuset:/\n1:cpu:/batch\n0::/batch\n");
    put("sys/fs/cgroup/cpuset/batch/cpu.cfs_quota_us", "10000\n"); /* not the cpu controller: ignored */
    put("sys/fs/cgroup/cpuset/batch/cpu.cfs_period_us", "100000\n");
    put("sys/fs/cgroup/cpu/batch/cpu.cfs_quota_us", "100000\n");
    put("sys/fs/cgroup/cpu/batch/cpu.cfs_period_us", "100000\n");
    mkdirs("sys/fs/cgroup/unified/batch");
    q = tfm_cpu_quota_at(root);
    CHECK("quota_hybrid_v1_cpu", NEAR(q, 1.0), "got %g", q);
    /* both hierarchies limit: the smaller */
    put("sys/fs/cgroup/unified/batch/cpu.max", "75000 100000\n");
    q = tfm_cpu_quota_at(root);
    CHECK("quota_hybrid_smaller_of_both", NEAR(q, 0.75), "got %g", q);
    wipe();

    /* no cgroup files at all, or a /proc/self/cgroup line that climbs out of the mount: no limit */
    q = tfm_cpu_quota_at(root);
    CHECK("quota_no_files_is_none", q == 0, "got %g", q);
    put("proc/self/mountinfo", V2_MOUNT);
    put("proc/self/cgroup", "0::/../../etc\n");
    put("sys/fs/cgroup/cpu.max", "100000 100000\n");
    q = tfm_cpu_quota_at(root);
    CHECK("quota_climbing_path_is_none", q == 0, "got %g", q);
    put("proc/self/cgroup", "garbage without colons\n0:/x\n");
    q = tfm_cpu_quota_at(root);
    CHECK("quota_malformed_cgroup_file_is_none", q == 0, "got %g", q);
    wipe();
    rmdir(root);

    /* the real machine: whatever it says is a sane number; tfm_default_threads is at least 1 */
    q = tfm_cpu_quota();
    CHECK("quota_real_sane", q >= 0 && q < 1e6, "got %g", q);
    CHECK("threads_default_positive", tfm_default_threads() >= 1, "got %d", tfm_default_threads());
    CHECK_EXIT();
}
