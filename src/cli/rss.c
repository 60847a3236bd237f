#include "cli/rss.h"
#include <stdio.h>
#include <string.h>

/* VmHWM of /proc/self/status: this process's high-water mark (getrusage's ru_maxrss can report the
 * parent's, inherited over exec). 0 where there is no /proc. */
double cli_peak_rss_mib(void) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return 0;
    char line[256];
    double kib = 0;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "VmHWM:", 6)) {
            sscanf(line + 6, "%lf", &kib);
            break;
        }
    fclose(f);
    return kib / 1024.0;
}

void cli_report_rss(const char *cmd) { fprintf(stderr, "tfm %s: peak RSS %.1f MiB\n", cmd, cli_peak_rss_mib()); }
