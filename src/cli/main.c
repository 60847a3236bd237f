/* tfm: command dispatch. Each command is one file, src/cli/cmd_<name>.c. */
#include "cli/cli.h"
#include "tfm/core.h"
#include "tfm/kernels.h"
#include <string.h>

#include "tfm/version.h"

int cmd_export(int argc, char **argv);   /* cmd_export.c, cmd_import.c (declared here: cli.h is shared) */
int cmd_import(int argc, char **argv);

typedef struct {
    const char *name;
    int (*fn)(int, char **);
    const char *summary;
} command;

int cmd_average(int argc, char **argv);  /* cmd_average.c, cmd_plot.c (declared here: cli.h is shared) */
int cmd_plot(int argc, char **argv);
int cmd_quantize(int argc, char **argv); /* cmd_quantize.c */

static const command commands[] = {
    /* one line per command; keep in the order shown by `tfm --help` */
    {"train-lm", cmd_train_lm, "train a character-level GPT on a text file"},
    {"generate", cmd_generate, "sample text from a GPT checkpoint"},
    {"train-mt", cmd_train_mt, "train a translator (transformer | rnn | bahdanau) on a parallel corpus"},
    {"translate", cmd_translate, "translate stdin line by line with a train-mt checkpoint (greedy or beam)"},
    {"attention", cmd_attention, "SVG heatmaps of a translator's attention weights for one sentence"},
    {"serve", cmd_serve, "serve translators and language models over HTTP (LibreTranslate and OpenAI APIs, a web page)"},
    {"export", cmd_export, "write a checkpoint's weights, config and tokenizer as safetensors (PyTorch names)"},
    {"import", cmd_import, "read a safetensors file (from tfm export or the PyTorch twins) into a checkpoint"},
    {"quantize", cmd_quantize, "write an int8 model for inference (int8 weights, per-channel scales)"},
    {"info", cmd_info, "show a checkpoint's config, parameter count and training state"},
    {"bpe", cmd_bpe, "BPE subword tokenizer: learn | encode | decode (SentencePiece-compatible .model files)"},
    {"bleu", cmd_bleu, "corpus BLEU of a hypothesis file against a reference (sacreBLEU-compatible)"},
    {"average", cmd_average, "average the weights of checkpoints of one model (for inference)"},
    {"plot", cmd_plot, "SVG loss and BLEU curves of a JSON-lines training log (--log-file)"},
    {"demo", cmd_demo, "the road to the Transformer: tfm demo kernel-regression (Nadaraya-Watson, SVG plots)"},
};

static void usage(FILE *f) {
    fprintf(f, "tfm %s — Transformers on the CPU, in C\n\nusage: tfm COMMAND [options]   (tfm COMMAND --help for details)\n"
               "       tfm --version\n\ncommands:\n", TFM_VERSION_STRING);
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-14s %s\n", commands[i].name, commands[i].summary);
}

/* tfm help CMD [SUB]: the command's own --help (tfm CMD [SUB] --help) */
static int help_command(int argc, char **argv) {
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        if (strcmp(argv[2], commands[i].name)) continue;
        char help[] = "--help";
        char *args[4] = {argv[2], argc > 3 ? argv[3] : help, argc > 3 ? help : NULL, NULL};
        return cli_finish_stdout(argv[2], commands[i].fn(argc > 3 ? 3 : 2, args));
    }
    fprintf(stderr, "tfm help: unknown command '%s' (see tfm --help)\n", argv[2]);
    return CLI_EXIT_USAGE;
}

/* `--threads 1` (or --threads=1) is the last --threads given: no OpenMP team ever waits, so the idle threads'
 * spin needs no setting (nor its re-exec) */
static int one_thread_asked(int argc, char **argv) {
    const char *last = NULL;
    for (int i = 2; i < argc; i++)
        if (!strcmp(argv[i], "--threads") && i + 1 < argc) last = argv[++i];
        else if (!strncmp(argv[i], "--threads=", 10)) last = argv[i] + 10;
    return last && !strcmp(last, "1");
}

int main(int argc, char **argv) {
    if (!one_thread_asked(argc, argv)) tfm_threads_short_spin(argv); /* may re-execute the program once (tfm/core.h) */
    if (argc < 2) {
        usage(stderr);
        return CLI_EXIT_USAGE;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || (!strcmp(argv[1], "help") && argc == 2)) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "help")) return help_command(argc, argv);
    if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V") || !strcmp(argv[1], "version")) {
        printf("tfm %s\n", TFM_VERSION_STRING);   /* the CLI links libtfm statically: headers = library */
        return 0;
    }
    if (tfm_isa_check()) { /* a TFM_ISA this CPU cannot run: say so before any kernel runs */
        fprintf(stderr, "tfm: %s\n", tfm_last_error());
        return CLI_EXIT_USAGE;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name)) return cli_finish_stdout(argv[1], commands[i].fn(argc - 1, argv + 1));
    fprintf(stderr, "tfm: unknown command '%s' (see tfm --help)\n", argv[1]);
    return CLI_EXIT_USAGE;
}
