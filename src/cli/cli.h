/* Shared command-line plumbing: the command table and a small flag parser.
 * Each command lives in its own file src/cli/cmd_<name>.c and exposes `int cmd_<name>(int, char **)`
 * returning the process exit code. Errors go to stderr as one line: "tfm <cmd>: <what is wrong>". */
#ifndef TFM_CLI_H
#define TFM_CLI_H
#include <stdarg.h>
#include <stdio.h>

#include "tfm/io.h"

typedef enum { FLAG_INT, FLAG_FLOAT, FLAG_STR, FLAG_BOOL } cli_flag_type;

typedef struct {
    const char *name;        /* without dashes: "n-layer" */
    cli_flag_type type;
    void *dst;               /* int*, float*, const char**, int* (bool) */
    const char *help;
    int seen;                /* set by the parser */
} cli_flag;

typedef struct {
    const char *cmd;         /* "train-lm" */
    const char *synopsis;    /* "--data FILE --out MODEL.tfm [options]" */
    const char *description; /* a paragraph shown by --help */
    cli_flag *flags;
    int n_flags;
    int min_pos, max_pos;    /* allowed number of positional arguments */
} cli_spec;

/* Parses argv[1..] (argv[0] is the command name). Positional arguments are stored in pos[] (at most
 * spec->max_pos). Returns 0 ok; 1 if --help was printed (caller exits 0); CLI_EXIT_USAGE on error (already
 * printed as one line naming the flag). Ints and floats are fully validated (no trailing junk, no overflow). */
int cli_parse(cli_spec *spec, int argc, char **argv, const char **pos, int *n_pos);
void cli_usage(const cli_spec *spec, FILE *f);
/* The value parsers of cli_parse: a whole decimal int / a finite float within +-3.4e38; 0, or -1. */
int cli_parse_int(const char *s, int *out);
int cli_parse_float(const char *s, float *out);
/* The flag of spec an unknown --name (len bytes) probably meant, or NULL; *why: a note naming the other
 * command family's meaning (--epochs -> --iters), or NULL. cli_parse prints it as "did you mean". */
const char *cli_suggest_flag(const cli_spec *spec, const char *name, size_t len, const char **why);
void cli_unknown_flag(const cli_spec *spec, const char *name, size_t len);   /* the error line, with the guess */
/* Was --name given on the command line? */
int cli_flag_seen(const cli_spec *spec, const char *name);
/* Exit statuses (man tfm, EXIT STATUS; 65 and 74 are sysexits.h's EX_DATAERR and EX_IOERR). A stop by
 * SIGINT / SIGTERM exits with 128 + the signal (train_run.h). */
enum {
    CLI_EXIT_OK = 0,
    CLI_EXIT_ERROR = 1,   /* anything else: out of memory, a diverged run, an internal error */
    CLI_EXIT_USAGE = 2,   /* an unknown command or flag, a bad or missing flag value */
    CLI_EXIT_DATA = 65,   /* bad input data: a malformed or corrupt file (checkpoint, text, TSV, BPE model, ...) */
    CLI_EXIT_IO = 74,     /* an I/O failure: a file that cannot be opened, read, written or renamed */
};
/* Print "tfm <cmd>: <msg>" to stderr and return CLI_EXIT_USAGE (use: return cli_error(cmd, "...")). */
int cli_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The line of cli_error / cli_fail, from a va_list. */
void cli_vprint_error(const char *cmd, const char *fmt, va_list ap);
/* For a failed library call: prints "tfm <cmd>: <msg>" and returns the exit status of the library's error
 * kind (tfm_last_error_kind: data 65, I/O 74, else 1). */
int cli_fail(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The exit status for the library's current error kind. */
int cli_exit_status(void);
/* An output directory (--out-dir): created with its missing parents (mkdir -p). 0, or prints "tfm <cmd>: <flag>
 * <path>: cannot create directory ..." and returns CLI_EXIT_IO. */
int cli_make_dir(const char *cmd, const char *flag, const char *path);
/* After a command: flushes stdout; if any write to it failed (a full disk, /dev/full, a closed pipe),
 * prints "tfm <cmd>: cannot write standard output: <reason>" and returns CLI_EXIT_IO (or rc if already non-zero). */
int cli_finish_stdout(const char *cmd, int rc);
/* The files of the command, checked before any work (tfm_check_files: every output has a name, is no
 * directory, can be created, and is no input and no other output; TFM_FILE_IN_PLACE: the checkpoint a resume
 * continues, which --out may replace). Prints "tfm <cmd>: <what is wrong>" and returns CLI_EXIT_IO when the
 * system refused (a missing or read-only directory), else CLI_EXIT_USAGE. Entries with a NULL path are skipped. */
int cli_check_files(const char *cmd, const tfm_file_use *files, int n);
/* --threads, in every command that has it: the help text, and the check (0..TFM_MAX_THREADS; 0 is
 * tfm_default_threads: OMP_NUM_THREADS, else the CPUs tfm may use) that prints the one-line error. */
#define CLI_THREADS_HELP "threads (0 = OMP_NUM_THREADS, else the CPUs tfm may use: affinity, cgroup CPU quota)"
int cli_check_threads(const char *cmd, int threads);
/* An int flag's range: 0, or the usage exit status after "--FLAG must be in LO..HI, got V". */
int cli_check_range(const char *cmd, const char *flag, int v, int lo, int hi);
/* Is stderr a terminal (for live progress lines)? */
int cli_stderr_is_tty(void);
/* Is more of stdin readable right now (buffered by stdio, or poll says so)? Lets a filter batch piped input
 * and answer an interactive line at once. */
int cli_stdin_ready(void);
/* One line of f without its line end into *buf (malloc'd): 0; 1 at end of file; or an exit status after a
 * one-line error naming name:line_no (a NUL byte, invalid UTF-8). */
int cli_read_line(const char *cmd, FILE *f, const char *name, long line_no, char **buf);

/* "1h02m" / "3m07s" (progress.c). */
void cli_format_eta(double seconds, char *buf, size_t n);
/* A warning for every flag given on the command line whose name is not in kept (" name name ... "). */
void cli_warn_resume_ignored(const cli_spec *spec, const char *kept);

/* Commands (one file each). */
int cmd_train_lm(int argc, char **argv);
int cmd_generate(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_train_mt(int argc, char **argv);
int cmd_translate(int argc, char **argv);
int cmd_bleu(int argc, char **argv);
int cmd_attention(int argc, char **argv);
int cmd_demo(int argc, char **argv);
int cmd_bpe(int argc, char **argv);
int cmd_serve(int argc, char **argv);
#endif
