/* tfm bpe learn | encode | decode: the BPE subword tokenizer (include/tfm/bpe.h) on the command line. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "tfm/bpe.h"
#include "tfm/core.h"
#include "tfm/text.h"

#define MAX_FILES 256
#define MAX_STDIN ((size_t)1 << 30)

static int bpe_usage(FILE *f) {
    fprintf(f, "usage: tfm bpe learn --vocab-size N -o FILE.model TEXT...\n"
               "       tfm bpe encode --model FILE [--ids]   (stdin -> stdout, one line each)\n"
               "       tfm bpe decode --model FILE [--ids]\n"
               "(tfm bpe SUBCOMMAND --help for details)\n");
    return f == stdout ? 0 : 2;
}

/* ---------------------------------------------------------------- learn */
static int bpe_learn(int argc, char **argv) {
    tfm_bpe_learn_opts o;
    tfm_bpe_learn_defaults(&o);
    const char *out = NULL;
    cli_flag flags[] = {
        {"vocab-size", FLAG_INT, &o.vocab_size, "number of pieces, specials and bytes included", 0},
        {"output", FLAG_STR, &out, "the model file to write (also -o)", 0},
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
    if (cli_check_writable("bpe learn", out)) return 2;
    tfm_bpe m;
    if (tfm_bpe_learn_files(&m, pos, n_pos, &o)) {
        const char *e = tfm_last_error();
        if (!strncmp(e, "vocabulary size", 15)) return cli_error("bpe learn", "--vocab-size: %s", e);
        if (!strncmp(e, "character coverage", 18)) return cli_error("bpe learn", "--character-coverage: %s", e);
        if (!strncmp(e, "max piece length", 16)) return cli_error("bpe learn", "--max-piece-chars: %s", e);
        return cli_error("bpe learn", "%s", e);
    }
    rc = 0;
    if (tfm_bpe_save(&m, out)) rc = cli_error("bpe learn", "%s", tfm_last_error());
    else fprintf(stderr, "tfm bpe learn: wrote %s (%d pieces)\n", out, m.n);
    tfm_bpe_free(&m);
    return rc;
}

/* ---------------------------------------------------------------- encode / decode */
/* All of stdin (so that an error in any line leaves stdout empty). */
static char *read_stdin(size_t *len) {
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    while (buf) {
        if (n == cap) {
            if (cap >= MAX_STDIN) {
                free(buf);
                tfm_set_error("stdin: more than 1 GiB");
                return NULL;
            }
            char *nb = realloc(buf, 2 * cap + 1);
            if (!nb) break;
            buf = nb;
            cap *= 2;
        }
        size_t got = fread(buf + n, 1, cap - n, stdin);
        n += got;
        if (got == 0) {
            if (ferror(stdin)) {
                free(buf);
                tfm_set_error("stdin: read error: %s", strerror(errno));
                return NULL;
            }
            buf[n] = 0;
            *len = n;
            return buf;
        }
    }
    free(buf);
    tfm_set_error("stdin: out of memory");
    return NULL;
}

/* Lines of buf split at '\n' in place (a '\r' stays part of its line, as with spm_encode); each line
 * must be valid UTF-8 without NUL bytes. */
static char **split_stdin(char *buf, size_t len, int *n_lines) {
    size_t count = 0;
    for (size_t i = 0; i < len; i++) count += buf[i] == '\n';
    if (len && buf[len - 1] != '\n') count++;
    if (count > INT_MAX) return tfm_set_error("stdin: too many lines"), NULL;
    char **lines = malloc((count ? count : 1) * sizeof *lines);
    if (!lines) return tfm_set_error("stdin: out of memory"), NULL;
    size_t k = 0, start = 0;
    for (size_t i = 0; i <= len && k < count; i++) {
        if (i < len && buf[i] != '\n') continue;
        buf[i] = 0;
        const char *line = buf + start;
        size_t n = i - start;
        long bad = tfm_utf8_first_invalid(line, n);
        if (memchr(line, 0, n)) {
            free(lines);
            return tfm_set_error("stdin:%zu: NUL byte (expected UTF-8 text)", k + 1), NULL;
        }
        if (bad >= 0) {
            free(lines);
            return tfm_set_error("stdin:%zu: invalid UTF-8 (byte 0x%02x)", k + 1, (unsigned char)line[bad]), NULL;
        }
        lines[k++] = buf + start;
        start = i + 1;
    }
    *n_lines = (int)k;
    return lines;
}

/* Split a line on spaces in place into at most cap tokens (empty tokens skipped). */
static int split_spaces(char *s, char **tok, int cap) {
    int n = 0;
    for (char *p = strtok(s, " "); p && n < cap; p = strtok(NULL, " ")) tok[n++] = p;
    return n;
}

/* Prefix the library's error with "stdin:LINE: " (copied first: the message buffer is reused). */
static int line_error(int lineno) {
    char msg[512];
    snprintf(msg, sizeof msg, "%s", tfm_last_error());
    tfm_set_error("stdin:%d: %s", lineno, msg);
    return -1;
}

static int process_line(const tfm_bpe *m, int decode, int ids, char *line, int lineno, FILE *out) {
    if (!decode && !ids) {
        char *s = tfm_bpe_encode_pieces(m, line, strlen(line));
        if (!s) return line_error(lineno);
        fprintf(out, "%s\n", s);
        free(s);
        return 0;
    }
    if (!decode) {
        int n;
        int *v = tfm_bpe_encode(m, line, strlen(line), &n);
        if (!v) return line_error(lineno);
        for (int i = 0; i < n; i++) fprintf(out, i ? " %d" : "%d", v[i]);
        fputc('\n', out);
        free(v);
        return 0;
    }
    size_t len = strlen(line);
    char **tok = malloc((len / 2 + 2) * sizeof *tok);
    if (!tok) return tfm_set_error("stdin: out of memory"), -1;
    int n = split_spaces(line, tok, (int)(len / 2 + 2)), rc = 0;
    char *s = NULL;
    if (ids) {
        int *v = malloc((size_t)(n ? n : 1) * sizeof *v);
        for (int i = 0; v && i < n && !rc; i++) {
            char *end;
            errno = 0;
            long x = strtol(tok[i], &end, 10);
            if (errno || *end || end == tok[i] || x < INT_MIN || x > INT_MAX)
                tfm_set_error("stdin:%d: '%s' is not an id", lineno, tok[i]), rc = -1;
            else v[i] = (int)x;
        }
        if (!v) tfm_set_error("stdin: out of memory"), rc = -1;
        if (!rc && !(s = tfm_bpe_decode(m, v, n))) rc = line_error(lineno);
        free(v);
    } else if (!(s = tfm_bpe_decode_pieces(m, (const char *const *)tok, n))) {
        rc = line_error(lineno);
    }
    if (s) fprintf(out, "%s\n", s);
    free(s);
    free(tok);
    return rc;
}

static int bpe_code(int argc, char **argv, int decode) {
    const char *model_path = NULL;
    int ids = 0;
    const char *cmd = decode ? "bpe decode" : "bpe encode";
    cli_flag flags[] = {
        {"model", FLAG_STR, &model_path, "a BPE model: tfm bpe learn's or spm_train --model_type=bpe's .model, or a checkpoint", 0},
        {"ids", FLAG_BOOL, &ids, decode ? "read ids instead of pieces" : "write ids instead of pieces", 0},
    };
    cli_spec spec = {
        cmd, "--model FILE [--ids]  < INPUT > OUTPUT",
        decode ? "Turn each line of pieces (or ids) separated by spaces back into text, as spm_decode does."
               : "Encode each line of stdin into pieces separated by spaces (spm_encode --output_format=piece),\n"
                 "or ids with --ids. Input must be UTF-8; nothing is written if any line is invalid.",
        flags, (int)(sizeof flags / sizeof flags[0]), 0, 0,
    };
    const char *pos[1];
    int n_pos;
    int rc = cli_parse(&spec, argc, argv, pos, &n_pos);
    if (rc) return rc == 1 ? 0 : rc;
    if (!model_path) return cli_error(cmd, "--model FILE is required");
    tfm_bpe m;
    if (tfm_bpe_load(&m, model_path)) return cli_error(cmd, "%s", tfm_last_error());
    size_t len;
    char *buf = read_stdin(&len);
    int n_lines = 0;
    char **lines = buf ? split_stdin(buf, len, &n_lines) : NULL;
    char *text = NULL;
    size_t text_len = 0;
    FILE *out = lines ? open_memstream(&text, &text_len) : NULL;
    if (!out) rc = cli_error(cmd, "%s", lines ? "out of memory" : tfm_last_error());
    for (int i = 0; out && i < n_lines && !rc; i++)
        if (process_line(&m, decode, ids, lines[i], i + 1, out)) rc = cli_error(cmd, "%s", tfm_last_error());
    if (out && fclose(out) && !rc) rc = cli_error(cmd, "out of memory");
    if (!rc && text_len && (fwrite(text, 1, text_len, stdout) != text_len || fflush(stdout)))
        rc = cli_error(cmd, "cannot write stdout: %s", strerror(errno));
    free(text);
    free(lines);
    free(buf);
    tfm_bpe_free(&m);
    return rc;
}

int cmd_bpe(int argc, char **argv) {
    if (argc < 2) return bpe_usage(stderr);
    const char *sub = argv[1];
    if (!strcmp(sub, "--help") || !strcmp(sub, "-h") || !strcmp(sub, "help")) return bpe_usage(stdout);
    /* argv[1..] as the subcommand's argv, with -o spelled --output */
    char **av = malloc((size_t)argc * sizeof *av);
    if (!av) return cli_error("bpe", "out of memory");
    for (int i = 1; i < argc; i++) av[i - 1] = !strcmp(argv[i], "-o") ? "--output" : argv[i];
    int rc;
    if (!strcmp(sub, "learn")) rc = bpe_learn(argc - 1, av);
    else if (!strcmp(sub, "encode")) rc = bpe_code(argc - 1, av, 0);
    else if (!strcmp(sub, "decode")) rc = bpe_code(argc - 1, av, 1);
    else rc = cli_error("bpe", "unknown subcommand '%s' (learn, encode or decode)", sub);
    free(av);
    return rc;
}
