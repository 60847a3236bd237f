/* Seed corpus for the fuzzers, generated (not committed): small real checkpoints of every model kind
 * written by the library itself, each also as a version-1 copy (no CRCs, so mutations reach the model
 * loaders instead of stopping at the checksum), plus small real vocabularies and texts.
 *   make_seeds OUT_DIR      writes OUT_DIR/<target>/seed-*  */
#include "tfm/checkpoint.h"
#include "tfm/core.h"
#include "tfm/io.h"
#include "tfm/lm.h"
#include "tfm/quantize.h"
#include "tfm/seq2seq.h"
#include "tfm/text.h"

#include "tfm/bpe.h"
#include "tfm/safetensors.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char *out_dir;

static void put(const char *target, const char *name, const void *d, size_t n) {
    char p[1024];
    snprintf(p, sizeof p, "%s/%s", out_dir, target);
    mkdir(p, 0755);
    snprintf(p, sizeof p, "%s/%s/seed-%s", out_dir, target, name);
    FILE *f = fopen(p, "wb");
    if (!f || (n && fwrite(d, 1, n, f) != n) || fclose(f)) tfm_fatal("make_seeds: cannot write %s", p);
}

static uint32_t u32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* a version-2 file as version 1: each entry's trailing CRC dropped */
static size_t to_v1(const unsigned char *raw, unsigned char *out) {
    memcpy(out, raw, 12);
    out[4] = 1;
    size_t k = 12, pos = 12;
    for (uint32_t i = 0; i < u32(raw + 8); i++) {
        size_t len = 4 + u32(raw + pos);
        uint32_t ndim = u32(raw + pos + len + 4);
        len += 8 + 4 * (size_t)ndim;
        uint64_t nb = (uint64_t)u32(raw + pos + len) | (uint64_t)u32(raw + pos + len + 4) << 32;
        len += 8 + (size_t)nb;
        memcpy(out + k, raw + pos, len);
        k += len;
        pos += len + 4;
    }
    return k;
}

/* file at path -> seeds "<name>" (v2) and "<name>-v1" for each target given */
#define PUTS(target, name, s) put(target, name, s, sizeof(s) - 1)

static void put_ckpt(const char *path, const char *name, const char *const *targets, int nt) {
    FILE *f = fopen(path, "rb");
    if (!f) tfm_fatal("make_seeds: %s", path);
    fseek(f, 0, SEEK_END);
    size_t n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc(n), *v1 = malloc(n);
    if (fread(b, 1, n, f) != n) tfm_fatal("make_seeds: read %s", path);
    fclose(f);
    remove(path);
    size_t n1 = to_v1(b, v1);
    char nm[128];
    for (int i = 0; i < nt; i++) {
        put(targets[i], name, b, n);
        snprintf(nm, sizeof nm, "%s-v1", name);
        put(targets[i], nm, v1, n1);
    }
    free(b);
    free(v1);
}

/* hold every 2-D parameter in int8 (tfm quantize's default selection, the synthesizer's w2 aside) */
static void quantize_all(tfm_params *p, const char *kind) {
    for (int i = 0; i < p->n; i++)
        if (p->t[i]->ndim == 2 && tfm_q8_role_of(kind, p->t[i]->name) != TFM_Q8_ROLE_KEPT && tfm_params_quantize(p, i))
            tfm_fatal("%s", tfm_last_error());
}

/* with_opt: 0 weights only, 1 with the optimizer state, 2 an int8 model (weights only) */
static void gpt_seed(int synth, int with_opt) {
    tfm_gpt_config cfg = {6, 4, 1, 2, 4, 0.0f, synth ? TFM_ATTN_SYNTHESIZER : TFM_ATTN_CAUSAL, 0.0f};
    tfm_gpt m;
    tfm_char_vocab v;
    if (tfm_gpt_init(&m, &cfg) || tfm_char_vocab_from_string(&v, "\n !aeé")) tfm_fatal("%s", tfm_last_error());
    tfm_gpt_init_weights(&m, 1);
    tfm_adamw opt;
    tfm_adamw_init(&opt, &m.params, 0.9f, 0.99f, 1e-8f, 0.1f);
    tfm_lm_train_state st = {10, 2, 1, 2, 5, 2, 1, 1e-3f, 1e-4f, 0.1f, 0.9f, 0.99f, 1.0f, 3, 12345, 678, NAN};
    char p[1024], name[64];
    snprintf(p, sizeof p, "%s/tmp.tfm", out_dir);
    if (with_opt == 2) quantize_all(&m.params, "gpt");
    if (tfm_gpt_save(&m, &v, with_opt == 1 ? &opt : NULL, with_opt == 1 ? &st : NULL, p)) tfm_fatal("%s", tfm_last_error());
    snprintf(name, sizeof name, "gpt-%s%s", synth ? "synth" : "causal", with_opt == 2 ? "-int8" : with_opt ? "-opt" : "");
    const char *targets[] = {"gpt", "container"};
    put_ckpt(p, name, targets, 2);
    tfm_adamw_free(&opt);
    tfm_char_vocab_free(&v);
    tfm_gpt_free(&m);
}

static void mt_seed(const char *arch, int pre_ln, int int8) {
    tfm_mt_model t = {0};
    if (tfm_vocab_deserialize(&t.src_vocab, "<pad>\n<bos>\n<eos>\n<unk>\ngo\n.\nhi") ||
        tfm_vocab_deserialize(&t.tgt_vocab, "<pad>\n<bos>\n<eos>\n<unk>\nva\n!"))
        tfm_fatal("%s", tfm_last_error());
    tfm_mt_config c;
    tfm_mt_config_default(&c);
    snprintf(c.arch, sizeof c.arch, "%s", arch);
    c.src_vocab = t.src_vocab.n;
    c.tgt_vocab = t.tgt_vocab.n;
    c.d_model = 4;
    c.n_head = 2;
    c.ffn = 6;
    c.max_len = 8;
    c.n_layer = 1;
    c.pre_ln = pre_ln;
    c.embed_size = 3;
    c.hidden_size = 4;
    t.model = tfm_mt_net_create(&c);
    if (!t.model) tfm_fatal("%s", tfm_last_error());
    t.model->vt->init_weights(t.model, 1);
    t.tok_kind = TFM_TOK_D2L;
    if (pre_ln) snprintf(t.ensemble, sizeof t.ensemble, "b.tfm\nc.tfm");   /* a stored ensemble's member names */
    if (int8) quantize_all(&t.model->params, "seq2seq");
    tfm_container k;
    tfm_container_init(&k);
    tfm_mt_model_put(&k, &t);
    tfm_mt_progress pr;
    tfm_mt_progress_init(&pr, 1);
    tfm_mt_progress_put(&k, &pr);
    char p[1024], name[64];
    snprintf(p, sizeof p, "%s/tmp.tfm", out_dir);
    if (tfm_container_save(&k, p)) tfm_fatal("%s", tfm_last_error());
    snprintf(name, sizeof name, "%s%s%s", arch, pre_ln ? "-preln" : "", int8 ? "-int8" : "");
    const char *targets[] = {arch, "container"};
    put_ckpt(p, name, targets, 2);
    tfm_container_free(&k);
    tfm_mt_model_free(&t);
}

static void put_file(const char *target, const char *name, const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) tfm_fatal("make_seeds: %s", path);
    fseek(f, 0, SEEK_END);
    size_t n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc(n ? n : 1);
    if (fread(b, 1, n, f) != n) tfm_fatal("make_seeds: read %s", path);
    fclose(f);
    remove(path);
    put(target, name, b, n);
    free(b);
}

static void other_seeds(void) {
    {   /* a small BPE model learned from a few lines */
        const char *lines[] = {"the cat sat on the mat", "le chat est sur le tapis", "das ist gut, oder?"};
        tfm_bpe_learn_opts o;
        tfm_bpe_learn_opts_default(&o);
        o.vocab_size = 300;
        tfm_bpe m;
        memset(&m, 0, sizeof m);
        if (tfm_bpe_learn_lines(&m, lines, 3, &o) == 0) put("bpe", "learned", m.proto, m.proto_len);
        else fprintf(stderr, "make_seeds: bpe seed skipped: %s\n", tfm_last_error());
        tfm_bpe_free(&m);
    }
    {   /* GPT-2 byte-level BPE: the 256 byte tokens + 3 merges, NUL, the merges */
        static const char *merges = "#version: 0.2\n\xc4\xa0 t\nh e\n\xc4\xa0t he\n";
        char buf[8192];
        size_t k = 0;
        buf[k++] = '{';
        for (int b = 0, extra = 0; b < 256; b++) {
            int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
            unsigned cp = printable ? (unsigned)b : 0x100u + (unsigned)extra++;
            if (cp == '"' || cp == '\\') k += (size_t)sprintf(buf + k, "\"\\%c\": %d, ", cp, b);
            else k += (size_t)sprintf(buf + k, "\"\\u%04x\": %d, ", cp, b);
        }
        k += (size_t)sprintf(buf + k, "\"\\u0120t\": 256, \"he\": 257, \"\\u0120the\": 258, \"<|endoftext|>\": 259}");
        buf[k++] = 0;
        k += (size_t)sprintf(buf + k, "%s", merges);
        put("gpt2bpe", "tiny", buf, k);
    }
    /* Hugging Face config.json of GPT-2 and of an OPUS-MT MarianMT (opus-mt-de-en's fields) */
    PUTS("hfconfig", "gpt2", "{\"activation_function\": \"gelu_new\", \"model_type\": \"gpt2\", \"n_ctx\": 1024, "
         "\"n_embd\": 768, \"n_head\": 12, \"n_inner\": null, \"n_layer\": 12, \"n_positions\": 1024, "
         "\"layer_norm_epsilon\": 1e-05, \"scale_attn_weights\": true, \"eos_token_id\": 50256, \"vocab_size\": 50257, "
         "\"task_specific_params\": {\"text-generation\": {\"do_sample\": true, \"max_length\": 50}}}");
    PUTS("hfconfig", "marian", "{\"activation_function\": \"swish\", \"bad_words_ids\": [[58100]], \"d_model\": 512, "
         "\"decoder_attention_heads\": 8, \"decoder_ffn_dim\": 2048, \"decoder_layers\": 6, "
         "\"decoder_start_token_id\": 58100, \"encoder_attention_heads\": 8, \"encoder_ffn_dim\": 2048, "
         "\"encoder_layers\": 6, \"eos_token_id\": 0, \"forced_eos_token_id\": 0, \"max_length\": 512, "
         "\"max_position_embeddings\": 512, \"model_type\": \"marian\", \"normalize_before\": false, \"num_beams\": 4, "
         "\"pad_token_id\": 58100, \"scale_embedding\": true, \"static_position_embeddings\": true, \"vocab_size\": 58101}");
    {   /* two tensors and a metadata entry */
        float w[6] = {1, -2, 3.5f, 0, 1e-3f, -7};
        tfm_st_tensor t[2];
        memset(t, 0, sizeof t);
        t[0].name = "wte.weight"; t[0].ndim = 2; t[0].shape[0] = 2; t[0].shape[1] = 3; t[0].data = w;
        t[1].name = "ln.bias"; t[1].ndim = 1; t[1].shape[0] = 2; t[1].data = w + 4;
        tfm_st_meta meta = {"format", "pt"};
        char p[1024];
        snprintf(p, sizeof p, "%s/tmp.safetensors", out_dir);
        if (tfm_st_save(t, 2, &meta, 1, p) == 0) put_file("safetensors", "two", p);
        else fprintf(stderr, "make_seeds: safetensors seed skipped: %s\n", tfm_last_error());
    }
}


int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: make_seeds OUT_DIR\n");
        return 2;
    }
    out_dir = argv[1];
    mkdir(out_dir, 0755);
    for (int s = 0; s < 2; s++)
        for (int o = 0; o < 3; o++) gpt_seed(s, o);
    mt_seed("transformer", 0, 0);
    mt_seed("transformer", 1, 0);
    mt_seed("transformer", 0, 1);
    mt_seed("rnn", 0, 0);
    mt_seed("rnn", 0, 1);
    mt_seed("bahdanau", 0, 0);
    mt_seed("bahdanau", 0, 1);
    other_seeds();
    PUTS("vocab", "words", "<pad>\n<bos>\n<eos>\n<unk>\nthe\ncat\n.\nl'homme\n\xc3\xa9t\xc3\xa9");
    PUTS("vocab", "chars", "\n !',.?ABCabc\xc3\xa9\xe2\x80\x99");
    const char text[] = "First Citizen:\nBefore we proceed any further, hear me speak.\n\nAll:\nSpeak, speak.\r\n"
                        "Va !\tGo.\nJ'ai froid\xe2\x80\xaf!\n\xc2\xab Bonjour \xc2\xbb, dit-il... (oui)\n";
    PUTS("text", "mixed", text);
    PUTS("lmdata", "shakespeare", "First Citizen:\nBefore we proceed any further, hear me speak.\n\nAll:\nSpeak, speak.\n");
    PUTS("tsv", "fra-eng", "Go.\tVa !\nHi.\tSalut !\nRun!\tCours\xe2\x80\xaf!\nWho?\tQui ?\n\nI'm OK.\tJe vais bien.\textra\n");
    PUTS("parallel", "de-en", "Ein Mann schl\xc3\xa4" "ft.\nZwei Hunde.\n\0A man sleeps.\nTwo dogs.\n");
    /* tfm serve's request bodies (fuzz/http_target.c): the first byte picks the parser and Content-Type */
    PUTS("http", "translate", "\x00{\"q\": \"Ein Hund l\xc3\xa4uft.\", \"source\": \"de\", \"target\": \"en\", \"format\": \"text\"}");
    PUTS("http", "batch", "\x00{\"q\": [\"a\", \"b\\nc\", \"\\u00e9\"], \"source\": \"auto\", \"target\": \"en\", "
                          "\"alternatives\": 2, \"api_key\": null}");
    PUTS("http", "form", "\x01q=Ein+Hund%21&q=zwei&source=de&target=en&alternatives=1&format=text&api_key=k");
    PUTS("http", "completion", "\x05{\"prompt\": \"ROMEO:\", \"max_tokens\": 20, \"temperature\": 0.8, \"top_k\": 5, "
                               "\"top_p\": 0.9, \"seed\": 7, \"stop\": [\"\\n\", \"x\"], \"stream\": true, \"model\": \"lm\"}");
    /* found by the fuzzer: a rejected value echoed with its line breaks made a two-line message */
    PUTS("http", "repro-format-newlines", "\x01q=a&format=textl\n\n\nogp&source=\x01\x02");
    PUTS("http", "completion-array", "\x06{\"prompt\": [\"A\"], \"stop\": \".\", \"n\": 1, \"echo\": false, \"logprobs\": null}");
    return 0;
}
