/* tfm translate MODEL.tfm: one source sentence a line on stdin -> one translation a line on stdout.
 * Lines are batched while more input is immediately available (a pipe fills whole batches; an
 * interactive terminal gets each line translated at once); output keeps the input order and is
 * flushed after every line. */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/rss.h"
#include "tfm/kernels.h"
#include "tfm/decode.h"

#define C "translate"

static int more_input_ready(void) {
#ifdef __GLIBC__
    if (stdin->_IO_read_ptr < stdin->_IO_read_end) return 1;   /* bytes already buffered by stdio */
#endif
    struct pollfd p = {0, POLLIN, 0};
    return poll(&p, 1, 0) > 0 && (p.revents & POLLIN);
}

int cmd_translate(int argc, char **argv) {
    int beam = -1, max_output = -1, threads = 0, batch = 32, max_src = 200, profile = 0;   /* -1: the model's */
    float alpha = 0.0f;
    cli_flag flags[] = {
        {"beam", FLAG_INT, &beam, "beam size (1 = greedy; -1 = the model's: an import's num_beams, else 1)", 0},
        {"alpha", FLAG_FLOAT, &alpha, "GNMT length penalty exponent: score / ((5+len)/6)^alpha", 0},
        {"max-output", FLAG_INT, &max_output, "maximum output tokens per sentence, without <eos> (-1 = the model's: "
         "an import's max_length, else 50)", 0},
        {"max-src", FLAG_INT, &max_src, "source tokens kept (incl. <eos>)", 0},
        {"batch-size", FLAG_INT, &batch, "sentences decoded together", 0},
        {"threads", FLAG_INT, &threads, CLI_THREADS_HELP, 0},
        {"profile", FLAG_BOOL, &profile,
         "at the end, print time per sentence by op kind and phase (kv_cache, search) to stderr", 0},
    };
    cli_spec spec = {C, "MODEL.tfm [--beam K] [--alpha A] [--max-output N] [--threads N] [--profile] < source.txt",
                     "Translate stdin, one sentence a line, with a checkpoint written by tfm train-mt. Greedy\n"
                     "or beam search; the decoder caches keys/values so each new token costs O(length).\n"
                     "--profile prints, at the end, milliseconds per sentence spent in each op kind and in the\n"
                     "decoding phases kv_cache (cache appends, beam reorders) and search (top-k, scores,\n"
                     "hypotheses), with the untracked rest (tokenizing, I/O); stdout is unchanged.",
                     flags, (int)(sizeof flags / sizeof flags[0]), 1, 1};
    const char *pos[1];
    int n_pos, rc = cli_parse(&spec, argc, argv, pos, &n_pos);
    if (rc) return rc == 1 ? 0 : rc;
    if ((beam < 1 && beam != -1) || beam > 64) return cli_error(C, "--beam must be in 1..64, got %d", beam);
    if (!(alpha >= 0 && alpha <= 10)) return cli_error(C, "--alpha must be in [0, 10], got %g", alpha);
    if ((max_output < 1 && max_output != -1) || max_output > 4096)
        return cli_error(C, "--max-output must be in 1..4096, got %d", max_output);
    if (max_src < 2 || max_src > 100000) return cli_error(C, "--max-src must be in 2..100000, got %d", max_src);
    if (batch < 1 || batch > 4096) return cli_error(C, "--batch-size must be in 1..4096, got %d", batch);
    if (cli_check_threads(C, threads)) return CLI_EXIT_USAGE;
    tfm_set_threads(threads);
    tfm_translator tr;
    if (tfm_translator_load(&tr, pos[0])) return cli_fail(C, "%s", tfm_last_error());
    const tfm_s2s_config *mc = &tr.model->cfg;
    tfm_decode_opts o = {beam > 0 ? beam : mc->gen_beam ? mc->gen_beam : 1, alpha,
                         max_output > 0 ? max_output : mc->gen_max_len ? mc->gen_max_len : 50};
    tfm_graph g;
    tfm_graph_init(&g, 0);
    g.profile = profile;
    tfm_weight_packs packs; /* the weights packed once: every decoding step multiplies by them (none if no memory) */
    g.packs = tfm_weight_packs_init(&packs, &tr.model->params) ? NULL : &packs;
    /* one worker graph per thread: up to threads x batch-size lines are read, the batches decoded in parallel */
    int nw = tfm_get_threads(), cap = batch * nw;
    tfm_graph *workers = calloc((size_t)nw, sizeof(tfm_graph)), **wp = calloc((size_t)nw, sizeof(tfm_graph *));
    char **lines = calloc((size_t)cap, sizeof(char *));
    const char **todo = calloc((size_t)cap, sizeof(char *));
    char **hyps = calloc((size_t)cap, sizeof(char *));
    int *slot = calloc((size_t)cap, sizeof(int));
    if (!workers || !wp || !lines || !todo || !hyps || !slot) tfm_fatal("out of memory");
    for (int i = 0; i < nw; i++) tfm_graph_init_worker(&workers[i], &g), wp[i] = &workers[i];
    long line_no = 0, n_translated = 0;
    int n_total = 0, eof = 0;
    double t_start = tfm_now();
    rc = 0;
    while (!eof && !rc) {
        int n = 0;
        while (n < cap) {   /* read the batches: stop early when no more input is immediately ready */
            char *buf = NULL;
            size_t cap = 0;
            ssize_t len = getline(&buf, &cap, stdin);
            if (len < 0) {
                free(buf);
                eof = 1;
                break;
            }
            line_no++;
            while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == '\r')) buf[--len] = 0;
            if ((size_t)len != strlen(buf)) {
                rc = cli_error(C, "stdin:%ld: NUL byte in input", line_no), rc = CLI_EXIT_DATA;
                free(buf);
                break;
            }
            long bad = tfm_utf8_first_invalid(buf, (size_t)len);
            if (bad >= 0) {
                rc = cli_error(C, "stdin:%ld: invalid UTF-8 at byte %ld", line_no, bad + 1), rc = CLI_EXIT_DATA;
                free(buf);
                break;
            }
            lines[n++] = buf;
            if (!more_input_ready()) break;
        }
        int m = 0;
        for (int i = 0; i < n; i++) {
            const char *p = lines[i];
            while (*p == ' ' || *p == '\t') p++;
            hyps[i] = NULL;
            if (*p) slot[m] = i, todo[m++] = lines[i];
        }
        if (!rc && m) {
            char **out = calloc((size_t)m, sizeof(char *));
            if (!out || tfm_translate_lines_par(&tr, &g, wp, nw, todo, m, max_src, batch, &o, out)) {
                rc = cli_fail(C, "%s", tfm_last_error());
            } else {
                for (int k = 0; k < m; k++) hyps[slot[k]] = out[k];
                n_translated += m;
            }
            free(out);
        }
        for (int i = 0; i < n; i++) {
            if (!rc) {
                fputs(hyps[i] ? hyps[i] : "", stdout);
                fputc('\n', stdout);
                fflush(stdout);
            }
            free(hyps[i]);
            free(lines[i]);
            hyps[i] = NULL;
        }
        n_total += n;
    }
    if (!rc && n_total == 0) rc = cli_error(C, "no input on stdin (expected one source sentence a line)"), rc = CLI_EXIT_DATA;
    if (!rc && ferror(stdout)) rc = cli_error(C, "error writing stdout"), rc = CLI_EXIT_IO;
    if (!rc && profile) tfm_profile_print(&g, n_translated, "sentence", tfm_now() - t_start, tfm_isa_name(), stderr);
    if (!rc) cli_report_rss("translate");
    free(lines), free(todo), free(hyps), free(slot);
    for (int i = 0; i < nw; i++) tfm_graph_free(&workers[i]);
    free(workers), free(wp);
    tfm_graph_free(&g);
    tfm_weight_packs_free(&packs);
    tfm_translator_free(&tr);
    return rc;
}
