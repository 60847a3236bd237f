/* tfm plot LOG.jsonl --out curves.svg (placeholder until the plotter lands). */
#include "cli/cli.h"
int cmd_plot(int argc, char **argv) {
    (void)argc;
    (void)argv;
    return cli_error("plot", "not implemented yet");
}
