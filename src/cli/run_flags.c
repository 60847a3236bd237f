/* The run configuration of train-lm / train-mt from their flag tables (src/cli/train_run.h): every flag is
 * recorded unless it is listed as not part of the run (paths, threads, logging); a resume takes the stored
 * values and refuses a given flag that differs unless it is listed as changeable (the run's length, checkpoint
 * frequency). A new flag needs no registration beyond its line in the command's table. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/train_run.h"

static int listed(const char *list, const char *name) {   /* list: " a b c " */
    char key[80];
    snprintf(key, sizeof key, " %s ", name);
    return strstr(list, key) != NULL;
}

static void format_flag(const cli_flag *f, char *buf, size_t n) {
    switch (f->type) {
    case FLAG_INT: snprintf(buf, n, "%d", *(int *)f->dst); break;
    case FLAG_FLOAT:   /* the shortest of %g / %.9g that reads back as the same float */
        snprintf(buf, n, "%g", *(float *)f->dst);
        if (strtof(buf, NULL) != *(float *)f->dst) snprintf(buf, n, "%.9g", *(float *)f->dst);
        break;
    case FLAG_BOOL: snprintf(buf, n, "%d", *(int *)f->dst ? 1 : 0); break;
    default: snprintf(buf, n, "%s", *(const char **)f->dst ? *(const char **)f->dst : ""); break;
    }
}

int cli_run_config_build(const char *cmd, const cli_spec *spec, const char *safe, const char *data, tfm_run_config *rc) {
    char buf[4200], key[120];
    for (int i = 0; i < spec->n_flags; i++) {
        const cli_flag *f = &spec->flags[i];
        if (listed(safe, f->name)) continue;
        format_flag(f, buf, sizeof buf);
        if (tfm_run_config_set(rc, f->name, buf)) return cli_fail(cmd, "%s", tfm_last_error());
        if (listed(data, f->name) && *buf) {
            snprintf(key, sizeof key, "data:%s", f->name);
            if (tfm_file_fingerprint(buf, buf, sizeof buf) || tfm_run_config_set(rc, key, buf))
                return cli_fail(cmd, "--%s: %s", f->name, tfm_last_error());
        }
    }
    return 0;
}

/* A stored value into the flag, parsed as strictly as the command line's (a stored "1e38" or "abc" for an int
 * is refused, not read as 1 or 0). 0, or -1. */
static int apply(cli_flag *f, const char *v) {
    switch (f->type) {
    case FLAG_INT: return cli_parse_int(v, (int *)f->dst);
    case FLAG_BOOL: return strcmp(v, "0") && strcmp(v, "1") ? -1 : (*(int *)f->dst = v[0] == '1', 0);
    case FLAG_FLOAT: return cli_parse_float(v, (float *)f->dst);
    default: *(const char **)f->dst = *v ? v : NULL; return 0;
    }
}

int cli_run_config_resume(const char *cmd, cli_spec *spec, const char *safe, const char *changeable,
                          const char *data, const tfm_run_config *stored, int allow_new_data, const char *path) {
    char buf[4200], key[120];
    for (int i = 0; i < spec->n_flags; i++) {
        cli_flag *f = &spec->flags[i];
        const char *v = tfm_run_config_find(stored, f->name);
        if (listed(safe, f->name) || !v) continue;
        format_flag(f, buf, sizeof buf);
        if (!f->seen && apply(f, v))
            return cli_error(cmd, "--resume: %s: run.%s '%.40s' is not a value of --%s (the checkpoint is edited or "
                             "corrupt)", path, f->name, v, f->name);
        if (!f->seen) {
        } else if (strcmp(buf, v) && !listed(data, f->name) && !listed(changeable, f->name))
            return cli_error(cmd, "--resume: --%s %s differs from the checkpoint's --%s %s (a resume continues the "
                             "stored run; only --threads, --log-every, the length and checkpoint flags may change)",
                             f->name, buf, f->name, v);
        snprintf(key, sizeof key, "data:%s", f->name);
        const char *fp = tfm_run_config_find(stored, key);
        if (!listed(data, f->name) || !fp || !*(const char **)f->dst) continue;
        if (tfm_file_fingerprint(*(const char **)f->dst, buf, sizeof buf)) return cli_fail(cmd, "%s", tfm_last_error());
        if (!strcmp(buf, fp)) continue;
        if (!allow_new_data)
            return cli_error(cmd, "--resume: --%s %s is not the data of the run (%s; the checkpoint's: %s); "
                             "--allow-new-data to train on it anyway", f->name, *(const char **)f->dst, buf, fp);
        fprintf(stderr, "tfm %s: --allow-new-data: --%s %s (%s) replaces the run's data (%s)\n", cmd, f->name,
                *(const char **)f->dst, buf, fp);
    }
    return 0;
}

int cli_run_config_match(const char *cmd, const cli_spec *spec, const char *safe, const char *changeable,
                         const char *data, const tfm_run_config *stored, const char *path) {
    char buf[4200];
    for (int i = 0; i < spec->n_flags; i++) {
        const cli_flag *f = &spec->flags[i];
        const char *v = tfm_run_config_find(stored, f->name);
        if (!v || listed(safe, f->name) || listed(data, f->name) || (f->seen && listed(changeable, f->name))) continue;
        format_flag(f, buf, sizeof buf);
        if (strcmp(buf, v))
            return cli_error(cmd, "--resume: %s: run.%s is %.40s but the model and training state it holds say %.40s "
                             "(config.* / train.* / run.* edited or corrupt)", path, f->name, v, buf);
    }
    return 0;
}

void cli_run_config_print(const char *cmd, const tfm_run_config *rc) {
    fprintf(stderr, "%s config:", cmd);
    for (int i = 0; i < rc->n; i++)
        if (strncmp(rc->name[i], "data:", 5) && *rc->value[i]) fprintf(stderr, " --%s %s", rc->name[i], rc->value[i]);
    fputc('\n', stderr);
}
