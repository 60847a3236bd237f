/* The CLI side of the library's training runs (src/cli/run_cli.c). */
#ifndef TFM_CLI_RUN_CLI_H
#define TFM_CLI_RUN_CLI_H
#include <math.h>

#include "cli/cli.h"
#include "tfm/run.h"

/* The flags of a run's fields (out has room for n), pointing into opts. Returns n. */
int cli_flags_from_fields(const tfm_field *f, int n, void *opts, cli_flag *out);
/* given[i] = flag i was on the command line (the run's hooks.given). */
void cli_given(const cli_spec *spec, unsigned char *given);
/* Hooks: a run's messages on stderr; a language model's progress lines (user: a cli_run_view). */
typedef struct {
    int tty;                 /* stderr is a terminal: one live line */
} cli_run_view;
void cli_run_message(const char *line, void *user);
void cli_lm_progress(const tfm_lm_progress *p, void *user);
/* A translation run's progress lines and validation lines (user: a cli_run_view). */
void cli_mt_progress(const tfm_mt_run_progress *p, void *user);
/* A run's end as the exit status: a failure (its error printed after nl), a stop by signal or by a failed log
 * write (what was saved and how to resume: "HINT OUT"; epoch < 0: not said), or 0. */
int cli_run_end(const char *cmd, int failed, const tfm_run_result *r, const char *out, const char *hint, int epoch,
                const char *nl);
#endif
