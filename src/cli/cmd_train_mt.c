/* tfm train-mt: train a translator (Transformer, RNN or Bahdanau seq2seq) on a parallel corpus. Flag parsing (the
 * flags are the fields of tfm_mt_run_opts) plus one library call, tfm_mt_run (src/train/run_mt.c); this file
 * prints what the run says, and --d2l-examples' translations. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/rss.h"
#include "cli/run_cli.h"
#include "cli/train_run.h"
#include "tfm/eval.h"
#include "tfm/translator.h"

#define C "train-mt"
#define MAX_FLAGS 96

/* --d2l-examples: translate d2l's four English sentences (greedy) with the trained model and print BLEU. */
static void d2l_examples(const char *path) {
    static const char *eng[] = {"go .", "i lost .", "he's calm .", "i'm home ."};
    static const char *fra[] = {"va !", "j'ai perdu .", "il est calme .", "je suis chez moi ."};
    tfm_translation r[4];
    tfm_translate_options o;
    tfm_translate_options_default(&o);
    o.beam_size = 1, o.length_penalty = 0, o.max_decoding_length = 10, o.max_input_length = 10;
    tfm_translator_params p;
    tfm_translator_params_default(&p);
    p.threads = tfm_get_threads();
    tfm_translator *tr = tfm_translator_load(path, &p);
    if (tr && tfm_translator_translate_batch(tr, eng, 4, &o, r) == 0)
        for (int i = 0; i < 4; i++) {
            printf("%s => %s, bleu %.3f\n", eng[i], r[i].hypotheses[0], tfm_bleu_d2l(r[i].hypotheses[0], fra[i], 2));
            tfm_translation_free(&r[i]);
        }
    fflush(stdout);
    tfm_translator_free(tr);
}

int cmd_train_mt(int argc, char **argv) {
    tfm_mt_run_opts o;
    tfm_mt_run_opts_default(&o);
    int n;
    const tfm_field *fields = tfm_mt_run_fields(&n);
    cli_flag flags[MAX_FLAGS];
    unsigned char given[MAX_FLAGS];
    if (n > MAX_FLAGS) return cli_error(C, "internal: %d fields", n);
    cli_flags_from_fields(fields, n, &o, flags);
    cli_spec spec = {C, "(--tsv FILE | --src FILE --tgt FILE) --out MODEL.tfm [options]", tfm_mt_run_about(), flags, n,
                     0, 0};
    const char *pos[1];
    int npos, rc = cli_parse(&spec, argc, argv, pos, &npos);
    if (rc) return rc == 1 ? 0 : rc;
    cli_given(&spec, given);
    tfm_dist *dist;   /* the ranks under mpirun, else NULL; quiet: not rank 0 (prints and writes nothing) */
    int quiet = cli_dist_open(C, o.threads, &dist);
    if (quiet < 0) return CLI_EXIT_USAGE;
    cli_run_view view = {cli_stderr_is_tty()};
    if (view.tty) o.log_every = 1;   /* a live line */
    tfm_run_hooks h = {cli_run_message, NULL, cli_stop_install(), given, dist, &view, quiet ? NULL : cli_mt_progress};
    tfm_run_result r;
    int failed = tfm_mt_run(&o, &h, &r);
    if (failed && quiet && strncmp(tfm_last_error(), "rank ", 5)) return cli_dist_close(dist, cli_exit_status());
    if (!failed && quiet) return cli_dist_close(dist, 0);   /* rank 0 says how the run ended */
    rc = cli_run_end(C, failed, &r, o.out, "tfm train-mt --resume", r.epoch, "");
    if (rc || (o.dump_data && o.dump_only)) return cli_dist_close(dist, rc);
    if (r.steps) fprintf(stderr, "wrote %s\n", o.out), cli_report_rss(C);
    if (o.d2l_examples) d2l_examples(r.steps || !o.resume ? o.out : o.resume);
    return cli_dist_close(dist, rc);
}
