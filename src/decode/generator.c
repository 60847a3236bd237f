/* The language-model object (include/tfm/generator.h): text in, text out, over the token loop of
 * generate.c (tfm_gpt_stream). A stream turns tokens into text, cuts it at stop strings, and hands out only
 * text that is final (whole characters that cannot be the start of a stop string). */
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "tfm/decode.h"
#include "tfm/generator.h"
#include "tfm/kernels.h"
#include "tfm/tokenizers.h"
#include "tfm/train.h"

/* ---------------------------------------------------------------- the tokenizer */
/* Text <-> ids for the model's vocabulary: the character vocabulary of train-lm, its BPE model (train-lm
 * --tokenizer bpe: byte pieces streamed as whole UTF-8 characters by tfm_bpe_text_decoder), or an imported
 * GPT-2's byte-level BPE (bytes through the same decoder; <|endoftext|> ends the text). */
#define TOK_MAX_BYTES 4096   /* the most one token may add to the text (a BPE model with longer pieces is refused) */
typedef struct {
    tfm_char_vocab chars;
    tfm_bpe *bpe;            /* NULL: not tfm's BPE */
    tfm_gpt2_bpe *gpt2;      /* NULL: not GPT-2's */
    int eos;                 /* the id that ends a text (GPT-2's <|endoftext|>), or -1 */
    omp_lock_t lock;         /* GPT-2's encoder keeps a cache: one encoding at a time */
} tokenizer;

static int *tok_encode(tokenizer *t, const char *text, int *n) {
    if (t->bpe) return tfm_bpe_encode_text(t->bpe, text, strlen(text), n);
    if (!t->gpt2) return tfm_char_encode(&t->chars, text, strlen(text), n);
    omp_set_lock(&t->lock);
    int *ids = tfm_gpt2_bpe_encode(t->gpt2, text, strlen(text), n);
    omp_unset_lock(&t->lock);
    return ids;
}

/* The bytes of one token into out (TOK_MAX_BYTES); their count. d: the stream's decoding state. */
static int tok_bytes(const tokenizer *t, tfm_bpe_text_decoder *d, int id, char *out) {
    if (t->bpe) return tfm_bpe_text_decode_id(t->bpe, d, id, out);
    if (t->gpt2) {
        size_t len = 0;
        const unsigned char *b = tfm_gpt2_bpe_token_bytes(t->gpt2, id, &len);
        int k = 0;
        for (size_t i = 0; b && i < len && k + 8 < TOK_MAX_BYTES; i++) k += tfm_bpe_text_put_byte(d, b[i], out + k);
        return k;
    }
    return id >= 0 && id < t->chars.n ? tfm_utf8_encode(t->chars.cps[id], out) : 0;
}

/* ---------------------------------------------------------------- the object */
typedef struct graph_slot {
    tfm_graph g;
    struct graph_slot *next;
} graph_slot;

struct tfm_generator {
    tfm_gpt model;
    tokenizer tok;
    tfm_generator_params p;
    int threads;
    omp_lock_t lock;         /* the idle graphs, the screen */
    graph_slot *idle;
    tfm_logit_screen *screen;   /* greedy's screen of the output layer, made by the first greedy stream */
    int screen_tried;
};

/* Greedy streams find their tokens through an int8 screen of the output layer (the same tokens) from this
 * vocabulary size up: below it the fp32 layer is a small part of a step. */
#define GREEDY_SCREEN_MIN_VOCAB 1024

/* The screen for a greedy stream: made once (under the lock), NULL for small or int8 layers (or if it fails:
 * the stream reads the full layer). */
static const tfm_logit_screen *greedy_screen(tfm_generator *g) {
    omp_set_lock(&g->lock);
    if (!g->screen_tried) {
        g->screen_tried = 1;
        if (g->model.cfg.vocab_size >= GREEDY_SCREEN_MIN_VOCAB && !g->model.wte.weight->q8)
            g->screen = tfm_logit_screen_new_gpt(&g->model);
    }
    omp_unset_lock(&g->lock);
    return g->screen;
}

void tfm_generator_params_default(tfm_generator_params *p) { memset(p, 0, sizeof *p); }

/* A loaded GPT only generates, so its blocks' linear weights are held once, packed (tfm_params_hold_packed; the
 * synthesizer's mixing matrices are not linear weights: that attention keeps them all). -1 out of memory. */
static int hold_packed(tfm_gpt *m) {
    if (m->cfg.attention != TFM_ATTN_CAUSAL || tfm_params_hold_packed(&m->params, "blocks.") >= 0) return 0;
    return tfm_set_error_kind(TFM_ERR_NOMEM, "generator: out of memory"), -1;
}

tfm_generator *tfm_generator_load(const char *path, const tfm_generator_params *p) {
    tfm_generator_params def;
    tfm_generator_params_default(&def);
    if (!p) p = &def;
    if (p->threads < 0 || p->threads > TFM_MAX_THREADS)
        return tfm_set_error("generator: params.threads must be in 0..%d, got %d", TFM_MAX_THREADS, p->threads), NULL;
    tfm_generator *g = calloc(1, sizeof *g);
    if (!g) return tfm_set_error_kind(TFM_ERR_NOMEM, "generator: out of memory"), NULL;
    tfm_container c;
    g->tok.eos = -1;
    /* a training checkpoint's optimizer state unused; the weights read straight into the model */
    if (tfm_container_load_deferred(&c, path, "adam.", "param.")) {
        tfm_container_free(&c), free(g);
        return NULL;
    }
    c.int8_only = 1;   /* only generates: int8 weights held once */
    const char *kind = tfm_container_get(&c, "tokenizer.kind") ? tfm_container_str(&c, "tokenizer.kind") : NULL;
    tfm_lm lm;   /* an imported GPT-2: the model with its byte-level BPE */
    int rc = kind && !strcmp(kind, "gpt2") ? tfm_lm_get(&lm, &c, path)
                                           : tfm_gpt_get_tok(&g->model, &g->tok.chars, &g->tok.bpe, NULL, NULL, &c, path);
    if (!rc && kind && !strcmp(kind, "gpt2")) g->model = lm.model, g->tok.gpt2 = lm.gpt2, g->tok.eos = lm.eos;
    tfm_container_free(&c);
    if (rc) {
        tfm_error_in_data();
        free(g);
        return NULL;
    }
    if (g->tok.bpe && tfm_bpe_text_max_bytes(g->tok.bpe) > TOK_MAX_BYTES) {
        tfm_set_error("%s: tokenizer.bpe has pieces longer than a generator streams (%d bytes)", path, TOK_MAX_BYTES / 3 - 4);
        tfm_gpt_free(&g->model);
        tfm_bpe_free(g->tok.bpe), free(g->tok.bpe), free(g);
        return NULL;
    }
    if (hold_packed(&g->model)) {
        tfm_gpt_free(&g->model);
        if (g->tok.gpt2) tfm_gpt2_bpe_free(g->tok.gpt2);
        tfm_char_vocab_free(&g->tok.chars);
        if (g->tok.bpe) tfm_bpe_free(g->tok.bpe), free(g->tok.bpe);
        free(g);
        return NULL;
    }
    g->p = *p;
    g->threads = p->threads > 0 ? p->threads : tfm_default_threads();
    omp_init_lock(&g->lock);
    omp_init_lock(&g->tok.lock);
    return g;
}

void tfm_generator_free(tfm_generator *g) {
    if (!g) return;
    while (g->idle) {
        graph_slot *s = g->idle;
        g->idle = s->next;
        tfm_graph_free(&s->g);
        free(s);
    }
    omp_destroy_lock(&g->lock);
    omp_destroy_lock(&g->tok.lock);
    tfm_logit_screen_free(g->screen);   /* before the model whose layer it reads */
    tfm_gpt_free(&g->model);
    if (g->tok.gpt2) tfm_gpt2_bpe_free(g->tok.gpt2);
    tfm_char_vocab_free(&g->tok.chars);
    if (g->tok.bpe) tfm_bpe_free(g->tok.bpe), free(g->tok.bpe);
    free(g);
}

const tfm_gpt *tfm_generator_model(const tfm_generator *g) { return &g->model; }
const char *tfm_generator_tokenizer(const tfm_generator *g) { return g->tok.gpt2 ? "gpt2" : g->tok.bpe ? "bpe" : "char"; }

int tfm_generator_count_tokens(tfm_generator *g, const char *text) {
    int n = 0, *ids = tok_encode(&g->tok, text, &n);
    free(ids);
    return ids ? n : -1;
}

static graph_slot *graph_take(tfm_generator *g) {
    omp_set_lock(&g->lock);
    graph_slot *s = g->idle;
    if (s) g->idle = s->next;
    omp_unset_lock(&g->lock);
    if (s) return s;
    if (!(s = calloc(1, sizeof *s))) return tfm_set_error_kind(TFM_ERR_NOMEM, "generator: out of memory"), NULL;
    tfm_graph_init(&s->g, 0);
    s->g.profile = g->p.profile;
    return s;
}

static void graph_give(tfm_generator *g, graph_slot *s) {
    omp_set_lock(&g->lock);
    s->next = g->idle;
    g->idle = s;
    omp_unset_lock(&g->lock);
}

void tfm_generator_print_profile(tfm_generator *g, long n_tokens, double seconds, void *file) {
    omp_set_lock(&g->lock);
    if (g->idle && g->p.profile) tfm_profile_print(&g->idle->g, n_tokens, "token", seconds, tfm_isa_name(), file);
    omp_unset_lock(&g->lock);
}

/* ---------------------------------------------------------------- options */
void tfm_generate_options_default(tfm_generate_options *o) {
    memset(o, 0, sizeof *o);
    o->max_tokens = 16;
    o->temperature = 1.0f;
    o->top_p = 1.0f;
    o->seed = 1;
}

const char *tfm_finish_reason_name(int reason) {
    switch (reason) {
    case TFM_FINISH_LENGTH: return "length";
    case TFM_FINISH_STOP: return "stop";
    case TFM_FINISH_CANCELLED: return "cancelled";
    default: return "";
    }
}

static int check_options(const tfm_generate_options *o) {
    if (o->max_tokens < 0 || o->max_tokens > 100000000)
        return tfm_set_error("generate: max_tokens must be in 0..1e8, got %d", o->max_tokens), -1;
    if (!(o->temperature >= 0 && o->temperature <= 100))
        return tfm_set_error("generate: temperature must be in [0, 100], got %g", o->temperature), -1;
    if (o->top_k < 0) return tfm_set_error("generate: top_k must be >= 0, got %d", o->top_k), -1;
    if (!(o->top_p > 0 && o->top_p <= 1)) return tfm_set_error("generate: top_p must be in (0, 1], got %g", o->top_p), -1;
    for (int i = 0; i < TFM_MAX_STOP && o->stop[i]; i++) {
        if (!o->stop[i][0]) return tfm_set_error("generate: stop[%d] is empty", i), -1;
        if (strlen(o->stop[i]) > 1024) return tfm_set_error("generate: stop[%d] is longer than 1024 bytes", i), -1;
        if (!tfm_utf8_valid(o->stop[i], strlen(o->stop[i]))) return tfm_set_error("generate: stop[%d]: invalid UTF-8", i), -1;
    }
    return 0;
}

/* ---------------------------------------------------------------- streams */
struct tfm_gen_stream {
    tfm_gpt_stream ids;      /* the token loop */
    int max_tokens, made, n_prompt, finish, started;
    char *stop[TFM_MAX_STOP];
    int n_stop;
    size_t longest_stop;
    tfm_bpe_text_decoder dec;   /* BPE models: bytes of an unfinished character, the line start */
    char *text;              /* the generated text; len bytes are kept (a stop string and what follows cut) */
    size_t len, cap, taken;  /* taken: bytes handed out by tfm_gen_stream_take */
};

void tfm_gen_stream_free(tfm_gen_stream *s) {
    if (!s) return;
    if (s->started) tfm_gpt_stream_free(&s->ids);
    for (int i = 0; i < s->n_stop; i++) free(s->stop[i]);
    free(s->text);
    free(s);
}

tfm_gen_stream *tfm_generator_start(tfm_generator *g, const char *prompt, const tfm_generate_options *oi) {
    tfm_generate_options o;
    tfm_generate_options_default(&o);
    if (oi) o = *oi;
    if (check_options(&o)) return NULL;
    if (!prompt || !prompt[0]) return tfm_set_error("generate: the prompt is empty"), NULL;
    tfm_gen_stream *s = calloc(1, sizeof *s);
    int n = 0, *ids = s ? tok_encode(&g->tok, prompt, &n) : NULL;
    if (!ids) {
        if (s) tfm_prefix_error("prompt: ");
        else tfm_set_error_kind(TFM_ERR_NOMEM, "generate: out of memory");
        free(s);
        return NULL;
    }
    tfm_sample_opts so = {o.temperature, o.top_k, o.top_p, o.seed, g->p.no_kv_cache,
                          o.temperature == 0 && !g->p.no_kv_cache ? greedy_screen(g) : NULL};
    int rc = tfm_gpt_stream_init(&s->ids, &g->model, ids, n, o.max_tokens, &so);
    free(ids);
    if (rc) return free(s), NULL;
    s->started = 1;
    s->n_prompt = n;
    tfm_bpe_text_decoder_init(&s->dec, prompt[strlen(prompt) - 1] == '\n');
    s->max_tokens = o.max_tokens;
    s->cap = 64;
    s->text = malloc(s->cap);
    for (int i = 0; i < TFM_MAX_STOP && o.stop[i]; i++, s->n_stop++) {
        if (!(s->stop[i] = strdup(o.stop[i]))) break;
        size_t l = strlen(o.stop[i]);
        if (l > s->longest_stop) s->longest_stop = l;
    }
    if (!s->text || (s->n_stop < TFM_MAX_STOP && o.stop[s->n_stop])) {
        tfm_gen_stream_free(s);
        return tfm_set_error_kind(TFM_ERR_NOMEM, "generate: out of memory"), NULL;
    }
    if (s->max_tokens == 0) s->finish = TFM_FINISH_LENGTH;
    return s;
}

/* Append a token's bytes; cut the text at the first stop string that now appears. */
static int append_token(tfm_gen_stream *s, const char *b, int nb) {
    if (s->len + (size_t)nb + 1 > s->cap) {
        size_t c = s->cap * 2 + (size_t)nb;
        char *p = realloc(s->text, c);
        if (!p) return tfm_set_error_kind(TFM_ERR_NOMEM, "generate: out of memory"), -1;
        s->text = p, s->cap = c;
    }
    size_t from = s->len > s->longest_stop ? s->len - s->longest_stop : 0;   /* a new match ends in the new bytes */
    memcpy(s->text + s->len, b, (size_t)nb);
    s->len += (size_t)nb;
    s->text[s->len] = 0;
    for (int i = 0; i < s->n_stop; i++) {
        char *hit = strstr(s->text + from, s->stop[i]);
        if (hit && (size_t)(hit - s->text) < s->len) {
            s->len = (size_t)(hit - s->text);
            s->text[s->len] = 0;
            s->finish = TFM_FINISH_STOP;
        }
    }
    return 0;
}

int tfm_generator_step(tfm_generator *g, tfm_gen_stream *const *streams, int n) {
    graph_slot *slot = graph_take(g);
    if (!slot) return -1;
    int saved = tfm_get_threads(), rc = 0;
    tfm_set_threads(g->threads);
    for (int i = 0; i < n && !rc; i++) {
        tfm_gen_stream *s = streams[i];
        if (s->finish) continue;
        int id = tfm_gpt_stream_next(&s->ids, &g->model, &slot->g);
        char b[TOK_MAX_BYTES];
        if (id >= 0 && id == g->tok.eos) {   /* the end of the text (GPT-2's <|endoftext|>), not printed */
            s->made++;
            s->finish = TFM_FINISH_STOP;
        } else if (id < 0 || append_token(s, b, tok_bytes(&g->tok, &s->dec, id, b))) {
            rc = -1;
            break;
        } else {
            s->made++;
        }
        if (!s->finish && s->made >= s->max_tokens) s->finish = TFM_FINISH_LENGTH;
        int ended = s->finish == TFM_FINISH_LENGTH || (id >= 0 && id == g->tok.eos);   /* not cut at a stop string */
        if (ended && (g->tok.bpe || g->tok.gpt2) && append_token(s, b, tfm_bpe_text_flush(&s->dec, b))) {
            rc = -1;   /* an unfinished character at the end: U+FFFD */
            break;
        }
    }
    tfm_set_threads(saved);
    graph_give(g, slot);
    return rc;
}

/* Bytes of the text that are final: all once finished; else all but a tail that could begin a stop string,
 * and never part of a character. */
static size_t final_len(const tfm_gen_stream *s) {
    if (s->finish) return s->len;
    size_t keep = s->len;
    for (int i = 0; i < s->n_stop; i++) {
        size_t l = strlen(s->stop[i]);
        for (size_t k = l - 1 < s->len ? l - 1 : s->len; k > 0; k--)   /* longest tail = a prefix of the stop */
            if (!memcmp(s->text + s->len - k, s->stop[i], k)) {
                if (s->len - k < keep) keep = s->len - k;
                break;
            }
    }
    while (keep > s->taken && keep < s->len && ((unsigned char)s->text[keep] & 0xC0) == 0x80) keep--;
    return keep < s->taken ? s->taken : keep;
}

const char *tfm_gen_stream_take(tfm_gen_stream *s, size_t *len) {
    size_t end = final_len(s), from = s->taken;
    s->taken = end;
    *len = end - from;
    return s->text + from;
}

int tfm_gen_stream_finished(const tfm_gen_stream *s) { return s->finish; }
void tfm_gen_stream_cancel(tfm_gen_stream *s) {
    if (!s->finish) s->finish = TFM_FINISH_CANCELLED;
}

int tfm_gen_stream_result(const tfm_gen_stream *s, tfm_generation *out) {
    memset(out, 0, sizeof *out);
    if (!(out->text = malloc(s->len + 1))) return tfm_set_error_kind(TFM_ERR_NOMEM, "generate: out of memory"), -1;
    memcpy(out->text, s->text, s->len);
    out->text[s->len] = 0;
    out->n_prompt_tokens = s->n_prompt;
    out->n_tokens = s->made;
    out->finish_reason = s->finish;
    return 0;
}

void tfm_generation_free(tfm_generation *r) {
    if (!r) return;
    free(r->text);
    memset(r, 0, sizeof *r);
}

int tfm_generator_generate(tfm_generator *g, const char *prompt, const tfm_generate_options *o, tfm_text_fn on_text,
                           void *user, tfm_generation *out) {
    memset(out, 0, sizeof *out);
    tfm_gen_stream *s = tfm_generator_start(g, prompt, o);
    if (!s) return -1;
    int rc = 0;
    for (;;) {
        if (!s->finish && (rc = tfm_generator_step(g, &s, 1))) break;
        size_t n;
        const char *t = tfm_gen_stream_take(s, &n);
        if (on_text && n && on_text(t, n, user)) tfm_gen_stream_cancel(s);
        if (s->finish) break;
    }
    if (!rc) rc = tfm_gen_stream_result(s, out);
    tfm_gen_stream_free(s);
    return rc;
}
