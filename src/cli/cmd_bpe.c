/* tfm bpe learn | encode | decode: the subword tokenizers (include/tfm/bpe.h, tokenizers.h) on the command line. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/train_run.h"
#include "tfm/bpe.h"
#include "tfm/core.h"
#include "tfm/text.h"
#include "tfm/tokenizers.h"

#define MAX_FILES 256
#define MAX_STDIN ((size_t)1 << 30)

static int bpe_usage(FILE *f) {
    fprintf(f, "usage: tfm bpe learn --vocab-size N -o FILE.model TEXT...\n"
               "       tfm bpe encode --model FILE [--ids] [--vocab vocab.json] [--whole]   (stdin -> stdout)\n"
               "       tfm bpe decode --model FILE [--ids] [--vocab vocab.json] [--whole]\n"
               "(tfm bpe SUBCOMMAND --help for details)\n");
    return f == stdout ? 0 : CLI_EXIT_USAGE;
}

/* ---------------------------------------------------------------- learn */
static int bpe_learn(int argc, char **argv) {
    tfm_bpe_learn_opts o;
    tfm_bpe_learn_opts_default(&o);
    const char *out = NULL;
    cli_flag flags[] = {
        {"vocab-size", FLAG_INT, &o.vocab_size, "number of pieces, specials and bytes included", 0},
        {"out", FLAG_STR, &out, "the model file to write (also -o)", 0},
        {"character-coverage", FLAG_FLOAT, &o.character_coverage, "share of characters that get their own piece", 0},
        {"max-piece-chars", FLAG_INT, &o.max_piece_chars, "longest piece, in characters (2..16)", 0},
    };
    cli_spec spec = {
        "bpe learn", "--vocab-size N -o FILE.model TEXT...",
        "Learn one BPE model over all the text files (one sentence a line; give both sides of a parallel\n"
        "corpus for a joint vocabulary). Deterministic. The model is a SentencePiece .model file (spm_encode\n"
        "reads it): ids 0 <pad>, 1 <s>, 2 </s>, 3 <unk>, 4..259 the bytes <0x00>..<0xFF>, then the merged\n"
        "pieces in the order learned, then the characters; identity normalization, every space kept, so\n"
        "decode(encode(x)) == x. Written atomically.",
        flags, (int)(sizeof flags / sizeof flags[0]), 1, MAX_FILES,
    };
    const char *pos[MAX_FILES];
    int n_pos;
    int rc = cli_parse(&spec, argc, argv, pos, &n_pos);
    if (rc) return rc == 1 ? 0 : rc;
    if (!cli_flag_seen(&spec, "vocab-size")) return cli_error("bpe learn", "--vocab-size N is required");
    if (!out) return cli_error("bpe learn", "-o FILE.model is required");
    if (o.vocab_size > 1000000 || o.vocab_size < 1)
        return cli_error("bpe learn", "--vocab-size %d is out of range (1..1000000)", o.vocab_size);
    tfm_file_use files[MAX_FILES + 1];
    for (int i = 0; i < n_pos; i++) files[i] = (tfm_file_use){"TEXT", pos[i], TFM_FILE_IN};
    files[n_pos] = (tfm_file_use){"-o", out, TFM_FILE_OUT};
    if ((rc = cli_check_files("bpe learn", files, n_pos + 1))) return rc;
    cli_clean_stale("bpe learn", out);
    tfm_bpe m;
    if (tfm_bpe_learn_files(&m, pos, n_pos, &o)) {
        const char *e = tfm_last_error();
        if (!strncmp(e, "vocabulary size", 15)) return cli_error("bpe learn", "--vocab-size: %s", e);
        if (!strncmp(e, "character coverage", 18)) return cli_error("bpe learn", "--character-coverage: %s", e);
        if (!strncmp(e, "max piece length", 16)) return cli_error("bpe learn", "--max-piece-chars: %s", e);
        return cli_fail("bpe learn", "%s", e);
    }
    rc = 0;
    if (tfm_bpe_save(&m, out)) rc = cli_fail("bpe learn", "%s", tfm_last_error());
    else fprintf(stderr, "tfm bpe learn: wrote %s (%d pieces)\n", out, m.n);
    tfm_bpe_free(&m);
    return rc;
}

/* ---------------------------------------------------------------- encode / decode */
static int bpe_code(int argc, char **argv, int decode) {
    const char *model_path = NULL, *vocab = NULL;
    int ids = 0, whole = 0;
    const char *cmd = decode ? "bpe decode" : "bpe encode";
    cli_flag flags[] = {
        {"model", FLAG_STR, &model_path, "a SentencePiece .model (BPE or unigram; tfm's, spm_train's, or a checkpoint), "
                                         "or GPT-2's encoder.json / vocab.json (vocab.bpe / merges.txt beside it) or their folder", 0},
        {"ids", FLAG_BOOL, &ids, decode ? "read ids instead of pieces" : "write ids instead of pieces", 0},
        {"vocab", FLAG_STR, &vocab, "a vocab.json (piece -> id) whose ids --ids means, e.g. MarianMT's (SentencePiece models)", 0},
        {"whole", FLAG_BOOL, &whole, "GPT-2: all of stdin, newlines included, is one text (one line of output)", 0},
    };
    cli_spec spec = {
        cmd, "--model FILE [--ids] [--vocab vocab.json] [--whole]  < INPUT > OUTPUT",
        decode ? "Turn each line of pieces (or ids) separated by spaces back into text, as spm_decode does\n"
                 "(GPT-2: as gpt-3-encoder's decode; --whole: every id of the input into the exact text)."
               : "Encode each line of stdin into pieces separated by spaces (spm_encode --output_format=piece;\n"
                 "GPT-2: its token strings), or ids with --ids. Input must be UTF-8; nothing is written if any line\n"
                 "is invalid. docs/INTEROP.md lists the tokenizers and what they were checked against.",
        flags, (int)(sizeof flags / sizeof flags[0]), 0, 0,
    };
    const char *pos[1];
    int n_pos;
    int rc = cli_parse(&spec, argc, argv, pos, &n_pos);
    if (rc) return rc == 1 ? 0 : rc;
    if (!model_path) return cli_error(cmd, "--model FILE is required");
    tfm_tokenizer *t = tfm_tokenizer_load(model_path, vocab);
    if (!t) return cli_fail(cmd, "%s", tfm_last_error());
    if (whole && !tfm_tokenizer_is_gpt2(t)) {
        tfm_tokenizer_free(t);
        return cli_error(cmd, "--whole is for GPT-2 tokenizers (SentencePiece models work line by line)");
    }
    size_t len, out_len = 0;
    char *buf = tfm_read_stream(stdin, "stdin", MAX_STDIN, &len);
    char *text = buf ? tfm_tokenizer_code_lines(t, decode, ids, whole, buf, len, "stdin", &out_len) : NULL;
    if (!text) rc = cli_fail(cmd, "%s", tfm_last_error());
    if (!rc && out_len && (fwrite(text, 1, out_len, stdout) != out_len || fflush(stdout)))
        rc = cli_error(cmd, "cannot write stdout: %s", strerror(errno)), rc = CLI_EXIT_IO;
    free(text);
    free(buf);
    tfm_tokenizer_free(t);
    return rc;
}

int cmd_bpe(int argc, char **argv) {
    if (argc < 2) return bpe_usage(stderr);
    const char *sub = argv[1];
    if (!strcmp(sub, "--help") || !strcmp(sub, "-h") || !strcmp(sub, "help")) return bpe_usage(stdout);
    /* argv[1..] as the subcommand's argv, with -o spelled --out */
    char **av = malloc((size_t)argc * sizeof *av);
    if (!av) return cli_error("bpe", "out of memory"), CLI_EXIT_ERROR;
    for (int i = 1; i < argc; i++) av[i - 1] = !strcmp(argv[i], "-o") ? "--out" : argv[i];
    int rc;
    if (!strcmp(sub, "learn")) rc = bpe_learn(argc - 1, av);
    else if (!strcmp(sub, "encode")) rc = bpe_code(argc - 1, av, 0);
    else if (!strcmp(sub, "decode")) rc = bpe_code(argc - 1, av, 1);
    else rc = cli_error("bpe", "unknown subcommand '%s' (learn, encode or decode)", sub);
    free(av);
    return rc;
}
