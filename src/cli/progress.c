/* Progress lines shared by train-lm and train-mt: ETA formatting and flags that --resume ignores. */
#include <math.h>
#include <string.h>

#include "cli/cli.h"

void cli_format_eta(double s, char *buf, size_t n) {
    if (!(s >= 0) || s > 1e7) s = 0;
    int t = (int)(s + 0.5);
    if (t >= 3600) snprintf(buf, n, "%dh%02dm", t / 3600, t / 60 % 60);
    else snprintf(buf, n, "%dm%02ds", t / 60, t % 60);
}

void cli_warn_resume_ignored(const cli_spec *spec, const char *kept) {
    char name[64];
    for (int i = 0; i < spec->n_flags; i++) {
        if (!spec->flags[i].seen) continue;
        snprintf(name, sizeof name, " %s ", spec->flags[i].name);
        if (!strstr(kept, name))
            fprintf(stderr, "tfm %s: warning: --%s ignored with --resume (the checkpoint's value is used)\n", spec->cmd,
                    spec->flags[i].name);
    }
}
