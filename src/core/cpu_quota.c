/* The CPU time a cgroup grants this process: docker --cpus, Kubernetes CPU limits, systemd CPUQuota=. Such a
 * limit is a CFS quota per period, not an affinity mask: a container limited to 2 CPUs on a 64-core host still
 * sees 64 CPUs in sched_getaffinity, and 64 threads would spend most of each period throttled at barriers.
 *
 * The limit is quota / period, the smallest along the path from the process's cgroup up to its hierarchy's
 * root (an ancestor's limit applies to everything under it), in cgroup v2 (cpu.max: "QUOTA PERIOD" or
 * "max PERIOD") and in v1's cpu controller (cpu.cfs_quota_us, -1 for none, and cpu.cfs_period_us); with both
 * mounted (the hybrid layout), the smaller. Where each is mounted comes from /proc/self/mountinfo, the
 * process's cgroup from /proc/self/cgroup, taken relative to the mount's root (inside a container the mount
 * root is the container's own cgroup). Every file is read defensively: anything unexpected means no limit. */
#include "tfm/core.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PATH_CAP 4096
#define LINE_CAP 8192
#define DIR_CAP (3 * PATH_CAP) /* a prefix, a mount point and a cgroup path */

/* a mountinfo field with the kernel's octal escapes (\040 for a space, \011, \012, \134) decoded in place */
static void unescape(char *s) {
    char *o = s;
    for (char *p = s; *p; p++) {
        if (p[0] == '\\' && p[1] >= '0' && p[1] <= '3' && p[2] >= '0' && p[2] <= '7' && p[3] >= '0' && p[3] <= '7') {
            *o++ = (char)((p[1] - '0') * 64 + (p[2] - '0') * 8 + (p[3] - '0'));
            p += 3;
        } else {
            *o++ = *p;
        }
    }
    *o = '\0';
}

/* does the comma list `list` contain `item` exactly ("cpu" is not "cpuset") */
static int has_item(const char *list, const char *item) {
    size_t n = strlen(item);
    for (const char *p = list; p && *p;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == n && !strncmp(p, item, n)) return 1;
        p = end ? end + 1 : NULL;
    }
    return 0;
}

/* DIR/NAME opened for reading; NULL if the path does not fit or the file cannot be opened */
static FILE *open_in(const char *dir, const char *name) {
    char path[DIR_CAP + 32];
    int n = snprintf(path, sizeof path, "%s/%s", dir, name);
    return n > 0 && (size_t)n < sizeof path ? fopen(path, "r") : NULL;
}

typedef struct {
    char root[PATH_CAP], point[PATH_CAP]; /* the mount's root within the hierarchy, and where it is mounted */
    int found;
} mount_at;

/* The cgroup2 mount (v2 = 1) or the v1 mount carrying the cpu controller (v2 = 0), from mountinfo:
 * "ID PARENT MAJ:MIN ROOT POINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTIONS" */
static mount_at find_mount(const char *prefix, int v2) {
    mount_at m = {.found = 0};
    char line[LINE_CAP];
    FILE *f = open_in(prefix, "proc/self/mountinfo");
    if (!f) return m;
    while (!m.found && fgets(line, sizeof line, f)) {
        char *fields[6], *save = NULL, *tok = strtok_r(line, " \n", &save);
        int nf = 0;
        for (; tok && nf < 6; tok = strtok_r(NULL, " \n", &save)) fields[nf++] = tok;
        if (nf < 6) continue;
        while (tok && strcmp(tok, "-")) tok = strtok_r(NULL, " \n", &save); /* the optional fields */
        char *fstype = tok ? strtok_r(NULL, " \n", &save) : NULL, *source = fstype ? strtok_r(NULL, " \n", &save) : NULL;
        char *super = source ? strtok_r(NULL, " \n", &save) : NULL;
        if (!super) continue;
        if (v2 ? strcmp(fstype, "cgroup2") != 0 : (strcmp(fstype, "cgroup") != 0 || !has_item(super, "cpu"))) continue;
        unescape(fields[3]);
        unescape(fields[4]);
        if (strlen(fields[3]) >= PATH_CAP || strlen(fields[4]) >= PATH_CAP) continue;
        strcpy(m.root, fields[3]);
        strcpy(m.point, fields[4]);
        m.found = 1;
    }
    fclose(f);
    return m;
}

/* The process's cgroup path in the v2 hierarchy ("0::PATH") or the v1 one listing the cpu controller
 * ("ID:cpu,cpuacct:PATH"), from /proc/self/cgroup; 0 if there is none. */
static int cgroup_path(const char *prefix, int v2, char *out) {
    char line[LINE_CAP];
    FILE *f = open_in(prefix, "proc/self/cgroup");
    if (!f) return 0;
    int ok = 0;
    while (!ok && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2 || c2[1] != '/' || strlen(c2 + 1) >= PATH_CAP) continue;
        *c1 = *c2 = '\0';   /* line: the hierarchy ID, c1 + 1: its controllers, c2 + 1: the path */
        if (v2 ? strcmp(line, "0") || c1[1] != '\0' : !has_item(c1 + 1, "cpu")) continue;
        strcpy(out, c2 + 1);
        ok = 1;
    }
    fclose(f);
    return ok;
}

/* a decimal integer (optionally signed) ending the string or followed by a newline or a space (cpu.max's two) */
static int parse_ll(const char *s, long long *out) {
    char *end;
    long long v = strtoll(s, &end, 10);
    if (end == s || (*end && *end != '\n' && *end != ' ')) return 0;
    *out = v;
    return 1;
}

/* the first line of DIR/NAME (at most cap - 1 bytes); 0 if it cannot be read */
static int read_in(const char *dir, const char *name, char *buf, size_t cap) {
    FILE *f = open_in(dir, name);
    if (!f) return 0;
    int ok = fgets(buf, (int)cap, f) != NULL;
    fclose(f);
    return ok;
}

/* The limit one cgroup directory sets, in CPUs: 0 for none (or a file that makes no sense). */
static double dir_limit(const char *dir, int v2) {
    char buf[128];
    long long quota, period;
    if (v2) {
        if (!read_in(dir, "cpu.max", buf, sizeof buf) || !strncmp(buf, "max", 3)) return 0;
        char *sp = strchr(buf, ' ');
        if (!sp || !parse_ll(buf, &quota) || !parse_ll(sp + 1, &period)) return 0;
    } else {
        if (!read_in(dir, "cpu.cfs_quota_us", buf, sizeof buf) || !parse_ll(buf, &quota)) return 0;
        if (!read_in(dir, "cpu.cfs_period_us", buf, sizeof buf) || !parse_ll(buf, &period)) return 0;
    }
    return quota > 0 && period > 0 ? (double)quota / (double)period : 0;
}

/* The smallest limit from the process's cgroup up to the mount point, in one hierarchy (0: none). */
static double hierarchy_limit(const char *prefix, int v2) {
    mount_at m = find_mount(prefix, v2);
    char cg[PATH_CAP], dir[DIR_CAP];
    if (!m.found || !cgroup_path(prefix, v2, cg)) return 0;
    /* the path below the mount's root; outside it (another namespace's view): the mount's root itself */
    const char *rel = cg;
    size_t rl = strlen(m.root);
    if (strcmp(m.root, "/")) rel = !strncmp(cg, m.root, rl) && (cg[rl] == '/' || cg[rl] == '\0') ? cg + rl : "";
    if (strstr(rel, "/..")) return 0; /* a path that climbs: nothing sensible to read */
    int base = snprintf(dir, sizeof dir, "%s%s", prefix, m.point);
    if (base < 0 || (size_t)base >= sizeof dir) return 0;
    if (snprintf(dir + base, sizeof dir - (size_t)base, "%s", strcmp(rel, "/") ? rel : "") >= (int)(sizeof dir - (size_t)base))
        return 0;
    double best = 0;
    for (;;) {
        double l = dir_limit(dir, v2);
        if (l > 0 && (best == 0 || l < best)) best = l;
        char *slash = strrchr(dir + base, '/');
        if (!slash) break;   /* at the mount point */
        *slash = '\0';
    }
    return best;
}

double tfm_cpu_quota_at(const char *prefix) {
    double v2 = hierarchy_limit(prefix, 1), v1 = hierarchy_limit(prefix, 0);
    if (v2 > 0 && v1 > 0) return v2 < v1 ? v2 : v1;
    return v2 > 0 ? v2 : v1;
}

double tfm_cpu_quota(void) { return tfm_cpu_quota_at(""); }
