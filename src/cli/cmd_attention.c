/* tfm attention MODEL.tfm --text "TEXT" --out FILE.svg: translate one sentence greedily, then draw
 * every attention map the model keeps (Transformer: encoder self-attention, decoder self-attention
 * and encoder-decoder attention per layer and head; Bahdanau: the alignment) with tokens on the axes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "tfm/eval.h"
#include "tfm/decode.h"

#define C "attention"
#define MAX_MAPS 256

/* word tokens, or the subword pieces of a BPE translator (labels and ids both come from them) */
static int src_tokens(const tfm_mt_model *tr, const char *src, tfm_toklist *tl) {
    if (!tr->bpe) return tfm_tokenize((tfm_tok_kind)tr->tok_kind, src, tl);
    char *pieces = tfm_bpe_encode_pieces(tr->bpe, src, strlen(src));
    int rc = pieces ? tfm_tokenize_space(pieces, tl) : -1;
    free(pieces);
    return rc;
}

int cmd_attention(int argc, char **argv) {
    const char *src = NULL, *out = NULL;
    int max_output = 50, threads = 0;
    cli_flag flags[] = {
        {"text", FLAG_STR, &src, "the source sentence to translate (train-mt's --src is a file)", 0},
        {"out", FLAG_STR, &out, "SVG file to write", 0},
        {"max-output", FLAG_INT, &max_output, "maximum output tokens (without <eos>)", 0},
        {"threads", FLAG_INT, &threads, CLI_THREADS_HELP, 0},
    };
    cli_spec spec = {C, "MODEL.tfm --text \"TEXT\" --out FILE.svg",
                     "Translate one sentence (greedy) and write heatmaps of its attention weights, per layer\n"
                     "and head, with the tokens on the axes.",
                     flags, (int)(sizeof flags / sizeof flags[0]), 1, 1};
    const char *pos[1];
    int n_pos, rc = cli_parse(&spec, argc, argv, pos, &n_pos);
    if (rc) return rc == 1 ? 0 : rc;
    if (!src) return cli_error(C, "--text \"TEXT\" is required");
    if (!out) return cli_error(C, "--out FILE.svg is required");
    tfm_file_use files[] = {{"MODEL.tfm", pos[0], TFM_FILE_IN}, {"--out", out, TFM_FILE_OUT}};
    if ((rc = cli_check_files(C, files, 2))) return rc;
    if (max_output < 1 || max_output > 1000) return cli_error(C, "--max-output must be in 1..1000, got %d", max_output);
    if (cli_check_threads(C, threads)) return CLI_EXIT_USAGE;
    if (!tfm_utf8_valid(src, strlen(src))) return cli_error(C, "--text: invalid UTF-8");
    tfm_set_threads(threads);
    tfm_mt_model tr;
    if (tfm_mt_model_load(&tr, pos[0])) return cli_fail(C, "%s", tfm_last_error());
    if (tr.marian) return tfm_mt_model_free(&tr), cli_error(C, "%s: an imported MarianMT: no word vocabulary", pos[0]);
    if (tr.ensemble[0]) fprintf(stderr, "tfm %s: %s is a stored ensemble: its first model's maps and output\n", C, pos[0]);
    tfm_mt_net *m = tr.model;
    tfm_toklist tl;
    if (src_tokens(&tr, src, &tl)) {
        tfm_mt_model_free(&tr);
        return cli_error(C, "--text: %s", tfm_last_error());
    }
    int Ts = tl.n + 1;
    int max_pos = tfm_mt_net_max_positions(m);
    if (max_pos > 0 && Ts > max_pos)   /* said once: the maps show the first max_pos tokens only */
        fprintf(stderr, "tfm %s: warning: --text has %d tokens incl. <eos>, cut to the model's %d positions "
                "(config.max_len)\n", C, Ts, max_pos), Ts = max_pos;
    int *sids = malloc(sizeof(int) * (size_t)Ts), off[2] = {0, Ts - 1};
    const char **slab = malloc(sizeof(char *) * (size_t)Ts);
    for (int i = 0; i < Ts - 1; i++) {
        sids[i] = tfm_vocab_id(&tr.src_vocab, tl.tok[i]);
        slab[i] = tl.tok[i];
    }
    sids[Ts - 1] = TFM_EOS;
    slab[Ts - 1] = "<eos>";
    tfm_graph g;
    tfm_graph_init(&g, 0);
    tfm_search_opts o;
    tfm_search_opts_default(&o);
    o.max_len = max_output;
    int *y = NULL, ny = 0;
    if (tfm_search_ids(m, &g, sids, off, 1, Ts, 1, &o, &y, &ny)) {
        rc = cli_fail(C, "%s", tfm_last_error());
        goto end;
    }
    /* teacher-forced pass over <bos> + output (+ <eos> as the last target) with weights kept */
    int Tt = ny + 1;
    int *tin = malloc(sizeof(int) * (size_t)Tt);
    const char **tlab = malloc(sizeof(char *) * (size_t)Tt), **olab = malloc(sizeof(char *) * (size_t)Tt);
    tin[0] = TFM_BOS;
    tlab[0] = "<bos>";
    for (int i = 0; i < ny; i++) {
        tin[i + 1] = y[i];
        const char *s = tfm_vocab_token(&tr.tgt_vocab, y[i]);
        tlab[i + 1] = s ? s : "?";
        olab[i] = tlab[i + 1];
    }
    olab[ny] = "<eos>";
    printf("%s => ", src);
    for (int i = 0; i < ny; i++) printf(i ? " %s" : "%s", olab[i]);
    printf("\n");
    g.grad_enabled = 0;
    g.training = 0;
    tfm_graph_reset(&g);
    m->keep_attention = 1;
    int valid = Ts;
    tfm_mt_net_forward(m, &g, sids, &valid, 1, Ts, tin, Tt);
    m->keep_attention = 0;
    tfm_attn_map maps[MAX_MAPS];
    int nm = m->vt->attention(m, 0, maps, MAX_MAPS);
    if (nm > MAX_MAPS) nm = MAX_MAPS;
    if (nm == 0) {
        rc = cli_error(C, "architecture '%s' keeps no attention weights", m->cfg.arch);
    } else {
        int nh = 0, max_heads = 1;
        for (int k = 0; k < nm; k++) {
            nh += maps[k].n_head;
            if (maps[k].n_head > max_heads) max_heads = maps[k].n_head;
        }
        tfm_heatmap *hm = calloc((size_t)nh, sizeof *hm);
        char (*titles)[96] = calloc((size_t)nh, sizeof *titles);
        static const char *kind[] = {"encoder self-attention", "decoder self-attention", "enc-dec attention"};
        int j = 0;
        for (int k = 0; k < nm; k++)
            for (int h = 0; h < maps[k].n_head; h++, j++) {
                const tfm_attn_map *a = &maps[k];
                snprintf(titles[j], sizeof titles[j], "%s, layer %d, head %d", kind[a->kind], a->layer + 1, h + 1);
                hm[j].title = titles[j];
                hm[j].rows = a->Tq;
                hm[j].cols = a->Tk;
                hm[j].data = a->w + (size_t)h * a->Tq * a->Tk;
                hm[j].row_labels = a->kind == TFM_MAP_ENC_SELF ? slab : tlab;
                hm[j].col_labels = a->kind == TFM_MAP_DEC_SELF ? tlab : slab;
                if (a->Tq != (a->kind == TFM_MAP_ENC_SELF ? Ts : Tt)) hm[j].row_labels = NULL;
                if (a->Tk != (a->kind == TFM_MAP_DEC_SELF ? Tt : Ts)) hm[j].col_labels = NULL;
            }
        char title[512];
        snprintf(title, sizeof title, "attention weights: %.200s", src);
        tfm_heatmap_opts ho = {title, "keys", "queries", max_heads, 0.0f, 1.0f, 0};
        if (tfm_svg_heatmaps(out, hm, nh, &ho)) rc = cli_fail(C, "%s", tfm_last_error());
        else fprintf(stderr, "wrote %s (%d maps)\n", out, nh);
        free(hm);
        free(titles);
    }
    free(tin), free(tlab), free(olab);
end:
    free(y);
    free(sids);
    free(slab);
    tfm_toklist_free(&tl);
    tfm_graph_free(&g);
    tfm_mt_model_free(&tr);
    return rc;
}
