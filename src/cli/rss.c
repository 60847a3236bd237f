#include "cli/rss.h"
#include <stdio.h>
#include <sys/resource.h>

double cli_peak_rss_mib(void) {
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru)) return 0;
    return ru.ru_maxrss / 1024.0; /* Linux: KiB */
}

void cli_report_rss(const char *cmd) { fprintf(stderr, "tfm %s: peak RSS %.1f MiB\n", cmd, cli_peak_rss_mib()); }
