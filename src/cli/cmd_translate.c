/* tfm translate MODEL.tfm [MORE.tfm ...]: source lines on stdin -> translations on stdout (tfm/translator.h; more
 * models: an ensemble). Lines read while input is ready (--maxi-batch batches per thread from a pipe, one by one from
 * a terminal) go to one call, which sorts them into batches; output keeps the input order. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli/cli.h"
#include "cli/rss.h"
#include "tfm/translator.h"

#define C "translate"

/* one result: its line(s), with the fields asked for (--n-best, --scores, --alignment) */
static void print_result(const tfm_translation *r, long index, int n_best, int scores, int alignment) {
    int *src = alignment && r->attention ? malloc(sizeof(int) * (size_t)r->n_target_tokens) : NULL;
    int n_al = src ? tfm_translation_alignment(r, src) : -1;
    for (int k = 0; k < (n_best ? r->n_hypotheses : 1); k++) {
        if (n_best) printf("%ld ||| ", index);   /* Moses / Marian n-best lines: index ||| text ||| score */
        fputs(r->hypotheses[k], stdout);
        if (n_best || scores) printf(" ||| %.6f", r->scores[k]);
        if (k == 0 && n_al >= 0) fputs(" ||| ", stdout);
        for (int i = 0; k == 0 && i < n_al && r->n_source_tokens > 1; i++) printf("%s%d-%d", i ? " " : "", src[i], i);
        fputc('\n', stdout);
    }
    free(src);
}

/* One run: the translator, its options, the prefix file, the buffers of a read, the counts. */
typedef struct {
    tfm_translator *tr;
    tfm_translate_options o;
    FILE *pf;
    const char *pf_name;
    int cap, n_best, scores;
    char **lines, **prefixes;
    tfm_translation *res;
    long n_lines, n_cut;
    int most_cut, eof;   /* eof: stdin ended */
} run;

/* Up to cap lines (and their prefixes) while input is ready, into r->lines; their count, or -exit status. */
static int read_some(run *r, int *eof) {
    int n = 0, rc = 0;
    while (n < r->cap && !rc && !(rc = cli_read_line(C, stdin, "stdin", r->n_lines + 1, &r->lines[n]))) {
        r->n_lines++;
        if (r->pf && (rc = cli_read_line(C, r->pf, r->pf_name, r->n_lines, &r->prefixes[n])) == 1)
            rc = cli_error(C, "--prefix-file %s: %ld lines, stdin has more", r->pf_name, r->n_lines - 1), rc = CLI_EXIT_DATA;
        if (rc) free(r->lines[n]);
        else n++;
        if (!rc && !cli_stdin_ready()) break;
    }
    if (rc == 1) rc = 0, *eof = 1;
    for (int i = 0; rc && i < n; i++) free(r->lines[i]), free(r->pf ? r->prefixes[i] : NULL);
    return rc ? -rc : n;
}

/* Read some lines, translate them with one call, print the results. 0 or an exit status. */
static int translate_some(run *r, int *eof) {
    int n = read_some(r, eof), rc = n < 0 ? -n : 0;
    r->o.target_prefix = r->pf ? (const char *const *)r->prefixes : NULL;
    if (n > 0 && tfm_translator_translate_batch(r->tr, (const char *const *)r->lines, n, &r->o, r->res))
        rc = cli_fail(C, "%s", tfm_last_error());
    for (int i = 0; i < n; i++) {
        if (!rc) {
            print_result(&r->res[i], r->n_lines - n + i, r->n_best, r->scores, r->o.return_attention);
            r->n_cut += r->res[i].source_truncated > 0;
            if (r->res[i].source_truncated > r->most_cut) r->most_cut = r->res[i].source_truncated;
            tfm_translation_free(&r->res[i]);
        }
        free(r->lines[i]), free(r->pf ? r->prefixes[i] : NULL);
    }
    fflush(stdout);
    return rc;
}

int cmd_translate(int argc, char **argv) {
    tfm_translator_params tp;   /* the library's defaults, --batch-size and --maxi-batch among them */
    tfm_translator_params_default(&tp);
    int threads = 0, batch = tp.max_batch_size, maxi = tp.read_ahead, profile = 0;
    run r = {0};
    tfm_translate_options_default(&r.o);
    cli_flag flags[] = {
        {"beam", FLAG_INT, &r.o.beam_size, "beam size (1 = greedy; 0 = the model's decode.beam, greedy if none)", 0},
        {"alpha", FLAG_FLOAT, &r.o.length_penalty,
         "GNMT length penalty exponent: score / ((5+len)/6)^alpha (-1 = the model's decode.alpha, 0 if none)", 0},
        {"max-output", FLAG_INT, &r.o.max_decoding_length,
         "maximum output tokens per sentence, without <eos> (0 = the model's: an import's max_length, else 50)", 0},
        {"max-src", FLAG_INT, &r.o.max_input_length, "source tokens kept (incl. <eos>); longer lines are cut", 0},
        {"n-best", FLAG_INT, &r.n_best, "print K hypotheses a line as 'INDEX ||| TEXT ||| SCORE' (K <= beam)", 0},
        {"scores", FLAG_BOOL, &r.scores, "append ' ||| SCORE' (log-probability / length penalty) to each line", 0},
        {"alignment", FLAG_BOOL, &r.o.return_attention,
         "append ' ||| s-t ...': the source token each target token attends to most (last layer, heads averaged)", 0},
        {"prefix-file", FLAG_STR, &r.pf_name, "file with one target prefix a line: translation i starts with line i", 0},
        {"batch-size", FLAG_INT, &batch, "sentences decoded together", 0},
        {"maxi-batch", FLAG_INT, &maxi, "batches read ahead and sorted by length together (1 = each as read)", 0},
        {"threads", FLAG_INT, &threads, CLI_THREADS_HELP, 0},
        {"profile", FLAG_BOOL, &profile, "at the end, print time per sentence by op kind and phase to stderr", 0},
    };
    cli_spec spec = {C, "MODEL.tfm [MODEL2.tfm ...] [--beam K] [--alpha A] [--max-output N] [--n-best K] [--scores]\n"
                        "          [--alignment] [--prefix-file F] [--threads N] [--profile] < source.txt",
                     "Translate stdin, one sentence a line, with a checkpoint written by tfm train-mt (or tfm import).\n"
                     "Greedy or beam search; the decoder caches keys/values so each new token costs O(length).\n"
                     "Without --beam/--alpha the (first) model's stored decoding settings are used (tfm info).\n"
                     "Several models sharing one tokenizer are an ensemble: the search ranks by their mean log-prob.\n"
                     "--profile: ms per sentence by op kind and decoding phase (kv_cache: cache appends, beam\n"
                     "reorders; search: top-k, scores) and the untracked rest (tokenizing, I/O).",
                     flags, (int)(sizeof flags / sizeof flags[0]), 1, TFM_MAX_ENSEMBLE};
    const char *pos[TFM_MAX_ENSEMBLE];
    int n_pos, rc = cli_parse(&spec, argc, argv, pos, &n_pos);
    if (rc) return rc == 1 ? 0 : rc;
    tfm_translate_options *o = &r.o;
    if (cli_check_range(C, "beam", o->beam_size, 0, 64) || cli_check_range(C, "max-output", o->max_decoding_length, 0, 4096) ||
        cli_check_range(C, "max-src", o->max_input_length, 2, 100000) || cli_check_range(C, "batch-size", batch, 1, 4096) ||
        cli_check_range(C, "maxi-batch", maxi, 1, 1024) || cli_check_range(C, "n-best", r.n_best, 0, 64) ||
        cli_check_threads(C, threads))
        return CLI_EXIT_USAGE;
    if (!(o->length_penalty <= 10) || (o->length_penalty < 0 && o->length_penalty != -1))
        return cli_error(C, "--alpha must be in [0, 10] (-1 = the model's), got %g", o->length_penalty);
    tp.threads = threads, tp.max_batch_size = batch, tp.profile = profile;
    if (r.pf_name && !(r.pf = fopen(r.pf_name, "r"))) return cli_error(C, "--prefix-file: cannot read %s", r.pf_name), CLI_EXIT_IO;
    if (!(r.tr = tfm_translator_load_ensemble(pos, n_pos, &tp))) rc = cli_fail(C, "%s", tfm_last_error());
    tfm_translate_options use;   /* what the calls use (the model's settings filled in); its positions bound both sides */
    int max_pos = r.tr ? tfm_translator_max_positions(r.tr) : 0;
    if (!rc && tfm_translator_resolve_options(r.tr, o, &use)) rc = cli_fail(C, "%s", tfm_last_error());
    else if (!rc && use.beam_size < r.n_best)
        rc = cli_error(C, "--n-best %d needs a beam of at least %d (--beam %d)", r.n_best, r.n_best, use.beam_size);
    if (!rc && max_pos > 0 && use.max_decoding_length >= max_pos)
        fprintf(stderr, "tfm %s: warning: the model has %d positions (config.max_len): outputs stop at %d tokens, "
                "not --max-output %d\n", C, max_pos, max_pos - 1, use.max_decoding_length);
    o->num_hypotheses = r.n_best ? r.n_best : 1, o->return_scores = r.scores || r.n_best;
    long cap = (long)maxi * batch * (threads > 0 ? threads : tfm_default_threads());   /* one call sorts them */
    r.cap = cap < (1L << 24) ? (int)cap : 1 << 24;
    r.lines = calloc((size_t)r.cap, sizeof(char *)), r.prefixes = calloc((size_t)r.cap, sizeof(char *));
    r.res = calloc((size_t)r.cap, sizeof *r.res);
    if (!rc && (!r.lines || !r.prefixes || !r.res)) rc = cli_fail(C, "out of memory (--batch-size, --maxi-batch)");
    double t_start = tfm_now();
    while (!rc && !r.eof) rc = translate_some(&r, &r.eof);
    if (!rc && r.n_lines == 0) rc = cli_error(C, "no input on stdin (expected one source sentence a line)"), rc = CLI_EXIT_DATA;
    if (!rc && ferror(stdout)) rc = cli_error(C, "error writing stdout"), rc = CLI_EXIT_IO;
    int lim = max_pos > 0 && max_pos < o->max_input_length ? max_pos : o->max_input_length;   /* tokens kept */
    if (!rc && r.n_cut)   /* once per run: how many, to what, by which limit */
        fprintf(stderr, "tfm translate: warning: %ld of %ld source sentences were cut to %d tokens incl. <eos> (%s), the "
                "longest by %d tokens\n", r.n_cut, r.n_lines, lim, lim < o->max_input_length ?
                "the model's positions, config.max_len" : "--max-src", r.most_cut);
    if (!rc && profile) tfm_translator_print_profile(r.tr, r.n_lines, "sentence", tfm_now() - t_start, stderr);
    if (!rc) cli_report_rss(C);
    free(r.lines), free(r.prefixes), free(r.res), tfm_translator_free(r.tr);
    if (r.pf) fclose(r.pf);
    return rc;
}
