/* tfm translate MODEL.tfm: one source sentence a line on stdin -> one translation a line on stdout, through
 * the translator object (include/tfm/translator.h). Lines are batched while more input is immediately
 * available (a pipe fills whole batches; an interactive terminal gets each line translated at once); output
 * keeps the input order and is flushed after every batch. */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/rss.h"
#include "tfm/translator.h"

#define C "translate"

static int more_input_ready(void) {
#ifdef __GLIBC__
    if (stdin->_IO_read_ptr < stdin->_IO_read_end) return 1;   /* bytes already buffered by stdio */
#endif
    struct pollfd p = {0, POLLIN, 0};
    return poll(&p, 1, 0) > 0 && (p.revents & POLLIN);
}

/* One line of f without its line end into *buf; 0, 1 at end of file, or an exit status (NUL, bad UTF-8). */
static int read_line(FILE *f, const char *name, long line_no, char **buf) {
    size_t cap = 0;
    *buf = NULL;
    ssize_t len = getline(buf, &cap, f);
    if (len < 0) {
        free(*buf), *buf = NULL;
        return 1;
    }
    while (len > 0 && ((*buf)[len - 1] == '\n' || (*buf)[len - 1] == '\r')) (*buf)[--len] = 0;
    long bad = (size_t)len != strlen(*buf) ? -2 : tfm_utf8_first_invalid(*buf, (size_t)len);
    if (bad == -1) return 0;
    free(*buf), *buf = NULL;
    if (bad == -2) return cli_error(C, "%s:%ld: NUL byte in input", name, line_no), CLI_EXIT_DATA;
    return cli_error(C, "%s:%ld: invalid UTF-8 at byte %ld", name, line_no, bad + 1), CLI_EXIT_DATA;
}

/* Marian's hard alignment of the best hypothesis: for each target token (not <eos>), "src-tgt" with the source
 * token (not <eos>) it attends to most. */
static void print_alignment(const tfm_translation *r) {
    int Ts = r->n_source_tokens, first = 1;
    for (int i = 0; i + 1 < r->n_target_tokens; i++) {
        const float *row = r->attention + (size_t)i * Ts;
        int best = 0;
        for (int j = 1; j + 1 < Ts; j++)
            if (row[j] > row[best]) best = j;
        if (Ts > 1) printf(first ? "%d-%d" : " %d-%d", best, i), first = 0;
    }
}

static void print_result(const tfm_translation *r, long index, int n_best, int scores, int alignment) {
    if (n_best) {   /* Moses / Marian n-best lines: index ||| hypothesis ||| score */
        for (int k = 0; k < r->n_hypotheses; k++) {
            printf("%ld ||| %s ||| %.6f", index, r->hypotheses[k], r->scores[k]);
            if (alignment && k == 0 && r->attention) fputs(" ||| ", stdout), print_alignment(r);
            fputc('\n', stdout);
        }
        return;
    }
    fputs(r->hypotheses[0], stdout);
    if (scores) printf(" ||| %.6f", r->scores[0]);
    if (alignment && r->attention) fputs(" ||| ", stdout), print_alignment(r);
    fputc('\n', stdout);
}

typedef struct {
    long lines, translated, truncated_lines;
    int most_cut;
} run_stats;

/* Read up to cap lines (and their prefixes), translate them with one call, print the results. */
static int translate_some(tfm_translator *tr, const tfm_translate_options *o, FILE *pf, const char *pf_name, int cap,
                          char **lines, char **prefixes, tfm_translation *res, int n_best, int scores, int alignment,
                          run_stats *st, int *eof) {
    int n = 0, rc = 0;
    while (n < cap && !rc) {
        if ((rc = read_line(stdin, "stdin", st->lines + 1, &lines[n])) == 1) {
            rc = 0, *eof = 1;
            break;
        }
        if (rc) break;
        st->lines++;
        if (pf) {
            int r = read_line(pf, pf_name, st->lines, &prefixes[n]);
            if (r == 1) rc = cli_error(C, "--prefix-file %s: %ld lines, stdin has more", pf_name, st->lines - 1),
                        rc = CLI_EXIT_DATA;
            else rc = r;
            if (rc) {
                free(lines[n]);
                break;
            }
        }
        n++;
        if (!more_input_ready()) break;
    }
    tfm_translate_options oo = *o;
    oo.target_prefix = pf ? (const char *const *)prefixes : NULL;
    if (!rc && n && tfm_translator_translate_batch(tr, (const char *const *)lines, n, &oo, res))
        rc = cli_fail(C, "%s", tfm_last_error());
    for (int i = 0; i < n; i++) {
        if (!rc) {
            print_result(&res[i], st->lines - n + i, n_best, scores, alignment);
            if (res[i].source_truncated) st->truncated_lines++;
            if (res[i].source_truncated > st->most_cut) st->most_cut = res[i].source_truncated;
            tfm_translation_free(&res[i]);
            st->translated++;
        }
        free(lines[i]);
        if (pf) free(prefixes[i]);
    }
    fflush(stdout);
    return rc;
}

int cmd_translate(int argc, char **argv) {
    int threads = 0, batch = 32, profile = 0, n_best = 0, scores = 0, alignment = 0;
    const char *prefix_file = NULL;
    tfm_translate_options o;
    tfm_translate_options_default(&o);
    cli_flag flags[] = {
        {"beam", FLAG_INT, &o.beam_size, "beam size (1 = greedy; 0 = the model's decode.beam, greedy if none)", 0},
        {"alpha", FLAG_FLOAT, &o.length_penalty,
         "GNMT length penalty exponent: score / ((5+len)/6)^alpha (-1 = the model's decode.alpha, 0 if none)", 0},
        {"max-output", FLAG_INT, &o.max_decoding_length, "maximum output tokens per sentence (without <eos>)", 0},
        {"max-src", FLAG_INT, &o.max_input_length, "source tokens kept (incl. <eos>); longer lines are cut", 0},
        {"n-best", FLAG_INT, &n_best, "print K hypotheses a line as 'INDEX ||| TEXT ||| SCORE' (K <= beam)", 0},
        {"scores", FLAG_BOOL, &scores, "append ' ||| SCORE' (log-probability / length penalty) to each line", 0},
        {"alignment", FLAG_BOOL, &alignment,
         "append ' ||| s-t ...': the source token each target token attends to most (last layer, heads averaged)", 0},
        {"prefix-file", FLAG_STR, &prefix_file, "file with one target prefix a line: translation i starts with line i", 0},
        {"batch-size", FLAG_INT, &batch, "sentences decoded together", 0},
        {"threads", FLAG_INT, &threads, CLI_THREADS_HELP, 0},
        {"profile", FLAG_BOOL, &profile,
         "at the end, print time per sentence by op kind and phase (kv_cache, search) to stderr", 0},
    };
    cli_spec spec = {C, "MODEL.tfm [--beam K] [--alpha A] [--max-output N] [--n-best K] [--scores] [--alignment]\n"
                        "          [--prefix-file F] [--threads N] [--profile] < source.txt",
                     "Translate stdin, one sentence a line, with a checkpoint written by tfm train-mt (or tfm import).\n"
                     "Greedy or beam search; the decoder caches keys/values so each new token costs O(length).\n"
                     "Without --beam/--alpha the model's stored decoding settings are used (tfm info shows them).\n"
                     "Token indices of --alignment count the model's tokens (subword pieces for BPE models).\n"
                     "--profile prints, at the end, milliseconds per sentence spent in each op kind and in the\n"
                     "decoding phases kv_cache (cache appends, beam reorders) and search (top-k, scores,\n"
                     "hypotheses), with the untracked rest (tokenizing, I/O); stdout is unchanged.",
                     flags, (int)(sizeof flags / sizeof flags[0]), 1, 1};
    const char *pos[1];
    int n_pos, rc = cli_parse(&spec, argc, argv, pos, &n_pos);
    if (rc) return rc == 1 ? 0 : rc;
    if (o.beam_size < 0 || o.beam_size > 64) return cli_error(C, "--beam must be in 1..64 (0 = the model's), got %d", o.beam_size);
    if (!(o.length_penalty <= 10) || (o.length_penalty < 0 && o.length_penalty != -1))
        return cli_error(C, "--alpha must be in [0, 10] (-1 = the model's), got %g", o.length_penalty);
    if (o.max_decoding_length < 1 || o.max_decoding_length > 4096)
        return cli_error(C, "--max-output must be in 1..4096, got %d", o.max_decoding_length);
    if (o.max_input_length < 2 || o.max_input_length > 100000)
        return cli_error(C, "--max-src must be in 2..100000, got %d", o.max_input_length);
    if (batch < 1 || batch > 4096) return cli_error(C, "--batch-size must be in 1..4096, got %d", batch);
    if (n_best < 0 || n_best > 64) return cli_error(C, "--n-best must be in 1..64, got %d", n_best);
    if (cli_check_threads(C, threads)) return CLI_EXIT_USAGE;
    FILE *pf = NULL;
    if (prefix_file && !(pf = fopen(prefix_file, "r"))) return cli_error(C, "--prefix-file: cannot read %s", prefix_file), CLI_EXIT_IO;
    tfm_translator_params tp;
    tfm_translator_params_default(&tp);
    tp.threads = threads;
    tp.max_batch_size = batch;
    tp.profile = profile;
    tfm_translator *tr = tfm_translator_load(pos[0], &tp);
    if (!tr) {
        if (pf) fclose(pf);
        return cli_fail(C, "%s", tfm_last_error());
    }
    const tfm_mt_model *mt = tfm_translator_model(tr);
    int beam = o.beam_size ? o.beam_size : mt->decode_beam > 0 ? mt->decode_beam : 1;
    if (n_best > beam) rc = cli_error(C, "--n-best %d needs a beam of at least %d (--beam %d)", n_best, n_best, beam);
    o.num_hypotheses = n_best ? n_best : 1;
    o.return_scores = scores || n_best;
    o.return_attention = alignment;
    /* up to threads x batch-size lines are read, the batches decoded in parallel */
    int cap = batch * (threads > 0 ? threads : tfm_default_threads());
    char **lines = calloc((size_t)cap, sizeof(char *)), **prefixes = calloc((size_t)cap, sizeof(char *));
    tfm_translation *res = calloc((size_t)cap, sizeof *res);
    if (!rc && (!lines || !prefixes || !res)) rc = cli_fail(C, "out of memory (--batch-size %d)", batch);
    run_stats st = {0};
    int eof = 0;
    double t_start = tfm_now();
    while (!rc && !eof)
        rc = translate_some(tr, &o, pf, prefix_file, cap, lines, prefixes, res, n_best, scores, alignment, &st, &eof);
    if (!rc && st.lines == 0) rc = cli_error(C, "no input on stdin (expected one source sentence a line)"), rc = CLI_EXIT_DATA;
    if (!rc && ferror(stdout)) rc = cli_error(C, "error writing stdout"), rc = CLI_EXIT_IO;
    if (!rc && st.truncated_lines)
        fprintf(stderr, "tfm translate: warning: %ld of %ld source lines were longer than --max-src %d tokens and were "
                "cut (the longest by %d tokens)\n", st.truncated_lines, st.lines, o.max_input_length, st.most_cut);
    if (!rc && profile) tfm_translator_print_profile(tr, st.translated, "sentence", tfm_now() - t_start, stderr);
    if (!rc) cli_report_rss(C);
    free(lines), free(prefixes), free(res);
    if (pf) fclose(pf);
    tfm_translator_free(tr);
    return rc;
}
