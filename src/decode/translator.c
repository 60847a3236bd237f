/* The translation object (include/tfm/translator.h): text in, text out, over the search of search.c.
 *
 * A call: tokenize every source line (and target prefix) to ids, search (tfm_search_nbest: batches decoded in
 * parallel on the workspace's worker graphs), detokenize each hypothesis; with return_attention, one
 * teacher-forced pass per sentence over its best hypothesis reads the encoder-decoder attention.
 *
 * An ensemble (tfm_translator_load_ensemble) holds several models that share one tokenizer: the text is
 * tokenized and detokenized by the first, and the search ranks by the mean of the members' log-probabilities
 * (tfm_search_nbest_ensemble); one weight-pack set covers every member's weights. */
#include <math.h>
#include <omp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "tfm/decode.h"
#include "tfm/kernels.h"
#include "tfm/ops.h"
#include "tfm/translator.h"

#define MAX_MAPS 256

/* The graphs one call decodes with: a main graph and one worker graph per thread. Calls running at once
 * each take their own; idle ones wait on the translator's free list. */
typedef struct workspace {
    tfm_graph g;
    tfm_graph *workers, **wp;
    int n_workers;
    struct workspace *next;
} workspace;

struct tfm_translator {
    tfm_mt_model *mt;        /* &own, or the model of tfm_translator_view; an ensemble's first member */
    tfm_mt_model own;
    tfm_mt_model *more;      /* an ensemble's other members (n_models - 1, owned), else NULL */
    tfm_mt_net *models[TFM_MAX_ENSEMBLE];   /* the models the search decodes with: mt's, then more's */
    int n_models;
    tfm_translator_params p;
    int threads;
    tfm_weight_packs packs;
    int packed;
    tfm_logit_screen *screen;   /* greedy's int8 screen of the output layer (one model, fp32 layer), or NULL */
    int screen_made;            /* made at the first greedy translation (greedy_screen), under screen_lock */
    pthread_mutex_t screen_lock;
    omp_lock_t lock;         /* the free list */
    pthread_rwlock_t model_lock;   /* decoding reads the model (shared); the teacher-forced attention pass sets
                                      its keep_attention and its modules keep their weights (exclusive) */
    workspace *idle;
};

void tfm_translator_params_default(tfm_translator_params *p) {
    memset(p, 0, sizeof *p);
    p->max_batch_size = 32;
    p->pack_weights = 1;
    p->read_ahead = 16;
}

void tfm_translate_options_default(tfm_translate_options *o) {
    memset(o, 0, sizeof *o);
    o->length_penalty = -1.0f;
    o->max_input_length = 200;
    o->num_hypotheses = 1;
}

/* Greedy's output-layer screen for a single model whose architecture has one (else none: the full layer). */
static void make_screen(tfm_translator *t) {
    tfm_logit_screen_free(t->screen);
    t->screen = NULL;
    if (t->n_models != 1 || !t->models[0]->vt->decode_hidden) return;
    char saved[1024];   /* not having a screen is not an error */
    snprintf(saved, sizeof saved, "%s", tfm_last_error());
    t->screen = tfm_logit_screen_new(t->models[0]);
    tfm_set_error("%s", saved);
}

/* The screen for a greedy translation: made by the first that asks (a beam search never needs it; making it
 * costs ~20 ms for an 8000 x 256 layer), NULL for an ensemble or an architecture without one. */
static const tfm_logit_screen *greedy_screen(tfm_translator *t) {
    if (t->n_models != 1) return NULL;
    pthread_mutex_lock(&t->screen_lock);
    if (!t->screen_made) make_screen(t), t->screen_made = 1;
    pthread_mutex_unlock(&t->screen_lock);
    return t->screen;
}

/* A Transformer loaded for inference holds its blocks' linear weights once, packed (tfm_params_hold_packed:
 * tfm_linear alone reads them; the embeddings and the output layer, which lookups and the screen read by
 * rows, stay as they are). -1 out of memory. */
static int hold_packed(tfm_mt_net *net) {
    if (strcmp(net->cfg.arch, "transformer") || tfm_params_hold_packed(&net->params, "blocks.") >= 0) return 0;
    return tfm_set_error_kind(TFM_ERR_NOMEM, "translator: out of memory"), -1;
}

/* own: take *m's contents (cleared; freed on failure too), else borrow m; hold: a model loaded for inference
 * (tfm_translator_load), its weights never to change: hold_packed */
static tfm_translator *make(tfm_mt_model *m, int own, int hold, const tfm_translator_params *p) {
    tfm_translator_params def;
    tfm_translator_params_default(&def);
    if (!p) p = &def;
    const char *bad = p->threads < 0 || p->threads > TFM_MAX_THREADS ? "threads"
                      : p->max_batch_size < 1 || p->max_batch_size > 4096 ? "max_batch_size" : NULL;
    tfm_translator *t = bad ? NULL : calloc(1, sizeof *t);
    if (!t) {
        if (own) tfm_mt_model_free(m);
        if (bad)
            return tfm_set_error("translator: params.%s out of range (threads 0..%d, max_batch_size 1..4096)", bad,
                                 TFM_MAX_THREADS), NULL;
        return tfm_set_error_kind(TFM_ERR_NOMEM, "translator: out of memory"), NULL;
    }
    if (own) {
        t->own = *m;
        memset(m, 0, sizeof *m);
        t->mt = &t->own;
    } else {
        t->mt = m;
    }
    t->p = *p;
    t->threads = p->threads > 0 ? p->threads : tfm_default_threads();
    t->models[0] = t->mt->model, t->n_models = 1;
    if (own && hold && p->pack_weights && hold_packed(t->mt->model)) {
        tfm_mt_model_free(&t->own);
        free(t);
        return NULL;
    }
    t->packed = p->pack_weights && tfm_weight_packs_init(&t->packs, &t->mt->model->params) == 0;   /* else unpacked */
    pthread_mutex_init(&t->screen_lock, NULL);
    omp_init_lock(&t->lock);
    pthread_rwlock_init(&t->model_lock, NULL);
    return t;
}

tfm_translator *tfm_translator_from_model(tfm_mt_model *m, const tfm_translator_params *p) { return make(m, 1, 0, p); }
tfm_translator *tfm_translator_view(tfm_mt_model *m, const tfm_translator_params *p) { return make(m, 0, 0, p); }

void tfm_translator_weights_changed(tfm_translator *t) {
    if (t->packed) tfm_weight_packs_refresh(&t->packs);
    tfm_logit_screen_free(t->screen);   /* the next greedy translation makes it anew */
    t->screen = NULL;
    t->screen_made = 0;
}

static tfm_translator *load_ensemble(const char *const *paths, int n, tfm_mt_model *first,
                                     const tfm_translator_params *p);

/* The length of path's folder part, its last '/' included (0: none); path + that is the file's name */
static size_t folder_len(const char *path) {
    const char *slash = strrchr(path, '/');
    return slash ? (size_t)(slash - path) + 1 : 0;
}

/* The files a model's decode.ensemble names, beside it: paths[0] = path, then each name in path's folder (the
 * strings in one block, paths[0]'s; free it). n, or -1. */
static int member_paths(const char *path, const char *names, const char **paths) {
    size_t dir = folder_len(path), need = strlen(path) + 1 + strlen(names) + 1;
    int n = 1;
    for (const char *c = names; *c; c++) n += *c == '\n';
    char *block = malloc(need + (size_t)n * dir);
    if (!block) return tfm_set_error_kind(TFM_ERR_NOMEM, "ensemble: out of memory"), -1;
    paths[0] = strcpy(block, path);
    char *o = block + strlen(path) + 1;
    n = 1;
    for (const char *a = names;; n++) {
        const char *e = strchr(a, '\n');
        size_t len = e ? (size_t)(e - a) : strlen(a);
        paths[n] = o;
        memcpy(o, path, dir), memcpy(o + dir, a, len), o[dir + len] = 0, o += dir + len + 1;
        if (!e) return n + 1;
        a = e + 1;
    }
}

tfm_translator *tfm_translator_load(const char *path, const tfm_translator_params *p) {
    tfm_mt_model m;
    if (tfm_mt_model_load_for_inference(&m, path)) return NULL;
    if (!m.ensemble[0]) return make(&m, 1, 1, p);
    const char *paths[TFM_MAX_ENSEMBLE];   /* a stored ensemble (tfm average --ensemble): its members beside it */
    int n = member_paths(path, m.ensemble, paths);
    if (n < 0) return tfm_mt_model_free(&m), NULL;
    tfm_translator *t = load_ensemble(paths, n, &m, p);
    free((char *)paths[0]);
    return t;
}

/* ---------------------------------------------------------------- ensembles */
#define VOCAB_ERR(...) (tfm_set_error_kind(TFM_ERR_DATA, __VA_ARGS__), -1)

/* The first difference of two word vocabularies (side: "source" / "target"); 0 when equal. */
static int same_vocab(const tfm_vocab *a, const tfm_vocab *b, const char *side, const char *pa, const char *pb) {
    if (a->n != b->n) return VOCAB_ERR("ensemble: %s has %d %s tokens, %s has %d: the members must share the "
                                       "vocabularies", pa, a->n, side, pb, b->n);
    for (int i = 0; i < a->n; i++)
        if (strcmp(a->tok[i], b->tok[i]))
            return VOCAB_ERR("ensemble: %s token %d is '%.40s' in %s, '%.40s' in %s: the members must share the "
                             "vocabularies", side, i, a->tok[i], pa, b->tok[i], pb);
    return 0;
}

/* The first difference of two joint subword models: their pieces, then the rest of the model (scores,
 * normalizer: what segments the text); 0 when equal. */
static int same_bpe(const tfm_bpe *a, const tfm_bpe *b, const char *pa, const char *pb) {
    if (a->n != b->n) return VOCAB_ERR("ensemble: %s has %d BPE pieces, %s has %d: the members must share the "
                                       "tokenizer", pa, a->n, pb, b->n);
    for (int i = 0; i < a->n; i++)
        if (a->len[i] != b->len[i] || memcmp(a->piece[i], b->piece[i], (size_t)a->len[i]))
            return VOCAB_ERR("ensemble: BPE piece %d is '%.40s' in %s, '%.40s' in %s: the members must share the "
                             "tokenizer", i, a->piece[i], pa, b->piece[i], pb);
    if (a->proto_len != b->proto_len || memcmp(a->proto, b->proto, a->proto_len))
        return VOCAB_ERR("ensemble: %s and %s have the same BPE pieces but different BPE models (scores or "
                         "normalization): the members must share the tokenizer", pa, pb);
    return 0;
}

/* Can b join an ensemble whose first member is a (pa, pb: their files)? 0, or -1 with one line naming both
 * files and what differs. */
static int same_tokenizer(const tfm_mt_model *a, const tfm_mt_model *b, const char *pa, const char *pb) {
    if (a->tok_kind != b->tok_kind)
        return VOCAB_ERR("ensemble: %s and %s have different tokenizers (tokenizer.kind %s vs %s): the members must "
                         "share the tokenizer", pa, pb, tfm_tok_kind_name((tfm_tok_kind)a->tok_kind),
                         tfm_tok_kind_name((tfm_tok_kind)b->tok_kind));
    if (!a->bpe != !b->bpe)
        return VOCAB_ERR("ensemble: %s has %s BPE model, %s has %s: the members must share the tokenizer", pa,
                         a->bpe ? "a" : "no", pb, b->bpe ? "one" : "none");
    if (a->bpe && same_bpe(a->bpe, b->bpe, pa, pb)) return -1;
    if (same_vocab(&a->src_vocab, &b->src_vocab, "source", pa, pb) ||
        same_vocab(&a->tgt_vocab, &b->tgt_vocab, "target", pa, pb))
        return -1;
    const tfm_mt_config *ca = &a->model->cfg, *cb = &b->model->cfg;
    if (ca->src_vocab != cb->src_vocab || ca->tgt_vocab != cb->tgt_vocab)
        return VOCAB_ERR("ensemble: %s has %d x %d vocabulary rows, %s has %d x %d (config.src_vocab x tgt_vocab)", pa,
                         ca->src_vocab, ca->tgt_vocab, pb, cb->src_vocab, cb->tgt_vocab);
    if (tfm_mt_bos_id(ca) != tfm_mt_bos_id(cb) || tfm_mt_eos_id(ca) != tfm_mt_eos_id(cb) ||
        tfm_mt_pad_id(ca) != tfm_mt_pad_id(cb))
        return VOCAB_ERR("ensemble: %s and %s have different special ids (config.bos_id/eos_id/pad_id)", pa, pb);
    return 0;
}
#undef VOCAB_ERR

tfm_translator *tfm_translator_load_ensemble(const char *const *paths, int n, const tfm_translator_params *p) {
    if (n < 1 || n > TFM_MAX_ENSEMBLE)
        return tfm_set_error_kind(TFM_ERR_ARG, "ensemble: %d models, must be 1..%d", n, TFM_MAX_ENSEMBLE), NULL;
    if (n == 1) return tfm_translator_load(paths[0], p);
    return load_ensemble(paths, n, NULL, p);
}

/* The ensemble of the n files (none of them a stored ensemble, but a first one given already loaded: first,
 * taken; else NULL) */
static tfm_translator *load_ensemble(const char *const *paths, int n, tfm_mt_model *first,
                                     const tfm_translator_params *p) {
    tfm_mt_model *ms = calloc((size_t)n, sizeof *ms);
    if (!ms) {
        if (first) tfm_mt_model_free(first);
        return tfm_set_error_kind(TFM_ERR_NOMEM, "ensemble: out of memory"), NULL;
    }
    int k = 0, failed = 0;   /* ms[0..k) loaded */
    if (first) ms[0] = *first, memset(first, 0, sizeof *first);
    for (; k < n && !failed; k++) {
        if ((k > 0 || !first) && tfm_mt_model_load_for_inference(&ms[k], paths[k])) {
            if (first) tfm_prefix_error("%s: decode.ensemble: ", paths[0]);
            break;
        }
        if (ms[k].marian)
            failed = 1, tfm_set_error_kind(TFM_ERR_ARG, "ensemble: %s is an imported MarianMT: ensembles take models "
                                           "trained by tfm (decode it alone)", paths[k]);
        else if (ms[k].ensemble[0] && (k > 0 || !first))   /* members are models, not lists of them */
            failed = 1, tfm_set_error_kind(TFM_ERR_DATA, "ensemble: %s is a stored ensemble itself (decode.ensemble): "
                                           "list its members instead", paths[k]);
        else failed = k > 0 && same_tokenizer(&ms[0], &ms[k], paths[0], paths[k]);
    }
    tfm_translator *t = NULL;
    if (k == n && !failed) {
        tfm_translator_params q;   /* the first member's translator, unpacked: one set packs every member below */
        if (p) q = *p;
        else tfm_translator_params_default(&q);
        int pack = q.pack_weights;
        q.pack_weights = 0;
        tfm_mt_model *more = malloc(sizeof *more * (size_t)(n - 1));
        t = more ? make(&ms[0], 1, 0, &q) : NULL;   /* takes ms[0] (freed on failure too) */
        if (!more) tfm_set_error_kind(TFM_ERR_NOMEM, "ensemble: out of memory");
        if (t) {
            memcpy(more, ms + 1, sizeof *more * (size_t)(n - 1));
            memset(ms + 1, 0, sizeof *ms * (size_t)(n - 1));
            t->more = more, more = NULL;
            const tfm_params *params[TFM_MAX_ENSEMBLE];
            for (int i = 0; i < n; i++)
                t->models[i] = i ? t->more[i - 1].model : t->mt->model, params[i] = &t->models[i]->params;
            t->n_models = n;
            t->p.pack_weights = pack;
            int held = 0;
            while (pack && held < n && hold_packed(t->models[held]) == 0) held++;
            if (pack && held < n) tfm_translator_free(t), t = NULL;   /* out of memory */
            else t->packed = pack && tfm_weight_packs_init_many(&t->packs, params, n) == 0;   /* else unpacked */
        }
        free(more);
    }
    for (int i = 0; i < k; i++) tfm_mt_model_free(&ms[i]);   /* those not taken (NULL-safe on cleared ones) */
    free(ms);
    return t;
}

/* ---------------------------------------------------------------- stored ensembles */
/* The folder part of path ("" for none) into buf; -1 if it does not fit */
static int folder_of(const char *path, char *buf, size_t n) {
    size_t len = folder_len(path);
    if (len >= n) return -1;
    memcpy(buf, path, len), buf[len] = 0;
    return 0;
}

/* Is member beside out (the same folder, spelled the same way or resolving to it)? */
static int beside(const char *member, const char *out) {
    char a[4096], b[4096], ra[4096], rb[4096];
    if (folder_of(member, a, sizeof a) || folder_of(out, b, sizeof b)) return 0;
    if (!strcmp(a, b)) return 1;
    return realpath(a[0] ? a : ".", ra) && realpath(b[0] ? b : ".", rb) && !strcmp(ra, rb);
}

int tfm_ensemble_save(const char *out_path, const char *const *members, int n) {
    if (n < 2 || n > TFM_MAX_ENSEMBLE)
        return tfm_set_error_kind(TFM_ERR_ARG, "ensemble: %d models, must be 2..%d", n, TFM_MAX_ENSEMBLE), -1;
    char names[TFM_ENSEMBLE_NAMES] = "";
    for (int k = 1; k < n; k++) {
        const char *name = members[k] + folder_len(members[k]);
        if (!tfm_ensemble_name_valid(name, strlen(name)))
            return tfm_set_error_kind(TFM_ERR_ARG, "ensemble: '%s' is not a name a stored ensemble can hold (1 to 128 "
                                      "letters, digits, '.', '-' or '_', not starting with '.' or '-')", name), -1;
        if (!strcmp(name, out_path + folder_len(out_path)))
            return tfm_set_error_kind(TFM_ERR_ARG, "ensemble: %s cannot name itself as a member", out_path), -1;
        if (!beside(members[k], out_path))
            return tfm_set_error_kind(TFM_ERR_ARG, "ensemble: %s must be in the folder of %s (a stored ensemble names its "
                                      "members by file name, found beside it)", members[k], out_path), -1;
        size_t used = strlen(names);
        if (used + strlen(name) + 2 > sizeof names)
            return tfm_set_error_kind(TFM_ERR_ARG, "ensemble: the members' names exceed %zu bytes", sizeof names - 1), -1;
        snprintf(names + used, sizeof names - used, "%s%s", k > 1 ? "\n" : "", name);
    }
    tfm_translator_params q;   /* the members must make an ensemble: the same checks as decoding them */
    tfm_translator_params_default(&q);
    q.pack_weights = 0, q.threads = 1;
    tfm_translator *t = load_ensemble(members, n, NULL, &q);
    if (!t) return -1;
    tfm_translator_free(t);
    tfm_container in, out;   /* OUT: the first member's weights and settings, and the others' names */
    tfm_container_init(&out);
    int rc = tfm_container_load_except(&in, members[0], "adam.");   /* the moments, not kept: twice the weights */
    for (int i = 0; !rc && i < in.n; i++) {
        const tfm_entry *e = &in.e[i];
        if (tfm_is_training_entry(e->name)) continue;   /* weights and settings: not a checkpoint to resume */
        if (!tfm_container_add(&out, e->name, e->dtype, e->ndim, e->shape, e->data, e->nbytes)) rc = -1;
    }
    if (!rc && !tfm_container_add_str(&out, "decode.ensemble", names)) rc = -1;
    if (!rc) rc = tfm_container_save(&out, out_path);
    tfm_container_free(&in);
    tfm_container_free(&out);
    return rc;
}

int tfm_translator_n_models(const tfm_translator *t) { return t->n_models; }

int tfm_translator_max_positions(const tfm_translator *t) {
    int most = 0;
    for (int k = 0; k < t->n_models; k++) {
        int p = tfm_mt_net_max_positions(t->models[k]);
        if (p > 0 && (most == 0 || p < most)) most = p;
    }
    return most;
}

const tfm_mt_model *tfm_translator_member(const tfm_translator *t, int i) {
    return i == 0 ? t->mt : i > 0 && i < t->n_models ? &t->more[i - 1] : NULL;
}

static void workspace_free(workspace *w) {
    for (int i = 0; i < w->n_workers; i++) tfm_graph_free(&w->workers[i]);
    tfm_graph_free(&w->g);
    free(w->workers), free(w->wp), free(w);
}

void tfm_translator_free(tfm_translator *t) {
    if (!t) return;
    while (t->idle) {
        workspace *w = t->idle;
        t->idle = w->next;
        workspace_free(w);
    }
    if (t->packed) tfm_weight_packs_free(&t->packs);
    tfm_logit_screen_free(t->screen);
    pthread_mutex_destroy(&t->screen_lock);
    omp_destroy_lock(&t->lock);
    pthread_rwlock_destroy(&t->model_lock);
    tfm_mt_model_free(&t->own);
    for (int i = 0; t->more && i < t->n_models - 1; i++) tfm_mt_model_free(&t->more[i]);
    free(t->more);
    free(t);
}

const tfm_mt_model *tfm_translator_model(const tfm_translator *t) { return t->mt; }

static workspace *workspace_take(tfm_translator *t) {
    omp_set_lock(&t->lock);
    workspace *w = t->idle;
    if (w) t->idle = w->next;
    omp_unset_lock(&t->lock);
    if (w) return w;
    w = calloc(1, sizeof *w);
    int n = t->threads;
    if (w) w->workers = calloc((size_t)n, sizeof(tfm_graph)), w->wp = calloc((size_t)n, sizeof(tfm_graph *));
    if (!w || !w->workers || !w->wp) {
        if (w) free(w->workers), free(w->wp);
        free(w);
        return tfm_set_error_kind(TFM_ERR_NOMEM, "translator: out of memory"), NULL;
    }
    tfm_graph_init(&w->g, 0);
    w->g.profile = t->p.profile;
    w->g.packs = t->packed ? &t->packs : NULL;
    for (int i = 0; i < n; i++) tfm_graph_init_worker(&w->workers[i], &w->g), w->wp[i] = &w->workers[i];
    w->n_workers = n;
    return w;
}

void tfm_translator_print_profile(tfm_translator *t, long n_units, const char *unit, double seconds, void *file) {
    omp_set_lock(&t->lock);
    if (t->idle && t->p.profile) {   /* the profiles of the workspaces made so far, summed into the first */
        tfm_graph **others = malloc(sizeof(tfm_graph *) * 64);
        int k = 0;
        for (workspace *w = t->idle->next; w && others && k < 64; w = w->next) others[k++] = &w->g;
        if (k) tfm_profile_merge(&t->idle->g, others, k);
        free(others);
        tfm_profile_print(&t->idle->g, n_units, unit, seconds, tfm_isa_name(), file);
    }
    omp_unset_lock(&t->lock);
}

static void workspace_give(tfm_translator *t, workspace *w) {
    omp_set_lock(&t->lock);
    w->next = t->idle;
    t->idle = w;
    omp_unset_lock(&t->lock);
}

/* ---------------------------------------------------------------- text <-> ids */
/* A growing list of ids with offsets: sentence i = ids[off[i] .. off[i+1]). */
typedef struct {
    int *ids, *off;
    int n, cap;
} id_lists;

static int ids_push(id_lists *l, const int *ids, int k) {
    if (l->off[l->n] + k > l->cap) {
        int c = l->cap;
        while (c < l->off[l->n] + k) c *= 2;
        int *p = realloc(l->ids, sizeof(int) * (size_t)c);
        if (!p) return tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory"), -1;
        l->ids = p, l->cap = c;
    }
    memcpy(l->ids + l->off[l->n], ids, sizeof(int) * (size_t)k);
    l->off[l->n + 1] = l->off[l->n] + k;
    l->n++;
    return 0;
}

/* One line to ids with the model's tokenizer, on the source or the target side. A word equal to a reserved
 * token (<pad>, <bos>, <eos>) is <unk>: text never ends a sentence or pads it. */
static int text_ids(const tfm_mt_model *mt, int target, const char *line, id_lists *l) {
    if (mt->marian && target)
        return tfm_set_error_kind(TFM_ERR_ARG, "target_prefix: not supported for an imported MarianMT"), -1;
    if (mt->bpe || mt->marian) {   /* raw text: subword ids of the joint model (an imported MarianMT: its vocab.json's) */
        int k = 0, *e = mt->marian ? tfm_marian_encode(mt->marian, line, strlen(line), &k)
                                   : tfm_bpe_encode(mt->bpe, line, strlen(line), &k);
        int rc = e ? ids_push(l, e, k) : -1;
        free(e);
        return rc;
    }
    tfm_toklist tl;
    if (tfm_tokenize((tfm_tok_kind)mt->tok_kind, line, &tl)) return -1;
    int *e = malloc(sizeof(int) * (size_t)(tl.n > 0 ? tl.n : 1)), rc = -1;
    if (e) {
        for (int k = 0; k < tl.n; k++) {
            int id = tfm_vocab_id(target ? &mt->tgt_vocab : &mt->src_vocab, tl.tok[k]);
            e[k] = id < TFM_N_RESERVED ? TFM_UNK : id;
        }
        rc = ids_push(l, e, tl.n);
    }
    free(e);
    tfm_toklist_free(&tl);
    return rc;
}

/* Target ids to text: BPE pieces joined (the whitespace marker -> ' '), Moses tokens detokenized, other word
 * tokens joined by spaces. */
static char *ids_text(const tfm_mt_model *mt, const int *ids, int n) {
    if (mt->marian) return tfm_marian_decode(mt->marian, ids, n);
    if (mt->bpe) return tfm_bpe_decode(mt->bpe, ids, n);
    const char **tv = malloc(sizeof(char *) * (size_t)(n > 0 ? n : 1));
    if (!tv) return tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory"), NULL;
    size_t len = 1;
    for (int k = 0; k < n; k++) {
        const char *s = tfm_vocab_token(&mt->tgt_vocab, ids[k]);
        tv[k] = s ? s : "";
        len += strlen(tv[k]) + 1;
    }
    char *h = NULL;
    if (mt->tok_kind == TFM_TOK_MOSES || mt->tok_kind == TFM_TOK_MOSES_LOWER) {
        h = tfm_detokenize(tv, n);
    } else if ((h = malloc(len))) {
        char *p = h;
        for (int k = 0; k < n; k++) {
            size_t l = strlen(tv[k]);
            if (k) *p++ = ' ';
            memcpy(p, tv[k], l);
            p += l;
        }
        *p = 0;
    }
    free(tv);
    if (!h) tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory");
    return h;
}

/* ---------------------------------------------------------------- options */
/* The options with the model's stored settings filled in and every field checked. */
static int resolve_options(const tfm_translator *t, const tfm_translate_options *in, tfm_translate_options *o,
                           int *max_src) {
    tfm_translate_options def;
    tfm_translate_options_default(&def);
    *o = in ? *in : def;
    const tfm_mt_config *cf = &t->mt->model->cfg;   /* an import's generation defaults: num_beams, max_length */
    if (o->beam_size == 0) o->beam_size = t->mt->decode_beam > 0 ? t->mt->decode_beam : cf->gen_beam > 0 ? cf->gen_beam : 1;
    if (o->length_penalty < 0) o->length_penalty = t->mt->decode_beam > 0 ? t->mt->decode_alpha : 0.0f;
    if (o->max_decoding_length == 0) o->max_decoding_length = cf->gen_max_len > 0 ? cf->gen_max_len : 50;
#define CHECK(ok, ...) if (!(ok)) return tfm_set_error(__VA_ARGS__), -1;
    CHECK(o->beam_size >= 1 && o->beam_size <= 64, "translate: beam_size must be in 1..64 (0 = the model's), got %d",
          o->beam_size)
    CHECK(o->length_penalty <= 10, "translate: length_penalty must be in [0, 10] (< 0 = the model's), got %g",
          o->length_penalty)
    CHECK(o->max_decoding_length >= 1 && o->max_decoding_length <= 4096,
          "translate: max_decoding_length must be in 1..4096, got %d", o->max_decoding_length)
    CHECK(o->max_input_length >= 2 && o->max_input_length <= 100000,
          "translate: max_input_length must be in 2..100000, got %d", o->max_input_length)
    CHECK(o->max_batch_size >= 0 && o->max_batch_size <= 4096, "translate: max_batch_size must be in 0..4096, got %d",
          o->max_batch_size)
    CHECK(o->num_hypotheses >= 1 && o->num_hypotheses <= o->beam_size,
          "translate: num_hypotheses must be in 1..beam_size (%d), got %d", o->beam_size, o->num_hypotheses)
#undef CHECK
    if (o->return_attention && t->n_models > 1)
        return tfm_set_error_kind(TFM_ERR_ARG, "return_attention (--alignment): not supported for an "
                                  "ensemble of %d models", t->n_models), -1;
    int max_pos = tfm_translator_max_positions(t);
    *max_src = max_pos > 0 && o->max_input_length > max_pos ? max_pos : o->max_input_length;
    return 0;
}

int tfm_translator_resolve_options(const tfm_translator *t, const tfm_translate_options *o, tfm_translate_options *out) {
    int max_src;
    if (resolve_options(t, o, out, &max_src)) return -1;
    out->max_input_length = max_src;
    return 0;
}

/* ---------------------------------------------------------------- attention */
/* r->attention: the last enc-dec map of a teacher-forced pass over the source and the best hypothesis,
 * averaged over heads, with the tokens of both axes. */
static int attention_of(tfm_translator *t, tfm_graph *g, const int *src, int n_src, const int *hyp, int n_hyp,
                        tfm_translation *r) {
    tfm_mt_net *m = t->mt->model;
    int Ts = n_src + 1, Tt = n_hyp + 1;
    int *s = malloc(sizeof(int) * (size_t)Ts), *tin = malloc(sizeof(int) * (size_t)Tt);
    tfm_attn_map *maps = malloc(sizeof(tfm_attn_map) * MAX_MAPS);
    int rc = -1;
    if (!s || !tin || !maps) {
        tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory (attention)");
        goto end;
    }
    memcpy(s, src, sizeof(int) * (size_t)n_src);
    s[n_src] = TFM_EOS;
    tin[0] = TFM_BOS;
    memcpy(tin + 1, hyp, sizeof(int) * (size_t)n_hyp);
    pthread_rwlock_wrlock(&t->model_lock);
    tfm_graph_reset(g);
    g->grad_enabled = 0, g->training = 0;
    m->keep_attention = 1;
    tfm_mt_net_forward(m, g, s, &Ts, 1, Ts, tin, Tt);
    m->keep_attention = 0;
    int nm = m->vt->attention(m, 0, maps, MAX_MAPS), best = -1;
    pthread_rwlock_unlock(&t->model_lock);
    for (int k = 0; k < nm && k < MAX_MAPS; k++)
        if (maps[k].kind == TFM_MAP_ENC_DEC && (best < 0 || maps[k].layer >= maps[best].layer)) best = k;
    if (best < 0 || maps[best].Tq != Tt || maps[best].Tk != Ts) {
        tfm_set_error("translate: return_attention: architecture '%s' keeps no encoder-decoder attention", m->cfg.arch);
        goto end;
    }
    const tfm_attn_map *a = &maps[best];
    r->attention = calloc((size_t)Tt * Ts, sizeof(float));
    r->source_tokens = calloc((size_t)Ts, sizeof(char *));
    r->target_tokens = calloc((size_t)Tt, sizeof(char *));
    if (!r->attention || !r->source_tokens || !r->target_tokens) {
        tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory (attention)");
        goto end;
    }
    for (int h = 0; h < a->n_head; h++)
        for (size_t i = 0; i < (size_t)Tt * Ts; i++) r->attention[i] += a->w[(size_t)h * Tt * Ts + i] / (float)a->n_head;
    r->n_source_tokens = Ts, r->n_target_tokens = Tt;
    for (int i = 0; i < Ts; i++) {
        const char *tok = i < n_src ? tfm_vocab_token(&t->mt->src_vocab, s[i]) : "<eos>";
        if (!(r->source_tokens[i] = strdup(tok ? tok : "<unk>"))) goto end;
    }
    for (int i = 0; i < Tt; i++) {
        const char *tok = i < n_hyp ? tfm_vocab_token(&t->mt->tgt_vocab, hyp[i]) : "<eos>";
        if (!(r->target_tokens[i] = strdup(tok ? tok : "<unk>"))) goto end;
    }
    rc = 0;
end:
    tfm_graph_reset(g);
    free(s), free(tin), free(maps);
    if (rc && !tfm_last_error()[0]) tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory (attention)");
    return rc;
}

/* ---------------------------------------------------------------- the call */
void tfm_translation_free(tfm_translation *r) {
    if (!r) return;
    for (int k = 0; k < r->n_hypotheses && r->hypotheses; k++) free(r->hypotheses[k]);
    for (int k = 0; k < r->n_source_tokens && r->source_tokens; k++) free(r->source_tokens[k]);
    for (int k = 0; k < r->n_target_tokens && r->target_tokens; k++) free(r->target_tokens[k]);
    free(r->hypotheses), free(r->scores), free(r->attention), free(r->source_tokens), free(r->target_tokens);
    memset(r, 0, sizeof *r);
}

int tfm_translation_alignment(const tfm_translation *r, int *src) {
    if (!r->attention || r->n_target_tokens < 1) return -1;
    int Ts = r->n_source_tokens;
    for (int i = 0; i + 1 < r->n_target_tokens; i++) {
        const float *row = r->attention + (size_t)i * Ts;
        int best = 0;
        for (int j = 1; j + 1 < Ts; j++)
            if (row[j] > row[best]) best = j;
        src[i] = best;
    }
    return r->n_target_tokens - 1;
}

/* results[i] from the hypotheses of the k-th sentence decoded */
static int fill_result(tfm_translator *t, workspace *w, const tfm_translate_options *o, const id_lists *src,
                       int k, int max_src, const tfm_hyps *h, tfm_translation *r) {
    int n_src = src->off[k + 1] - src->off[k];
    r->source_truncated = n_src + 1 > max_src ? n_src + 1 - max_src : 0;
    r->n_input_tokens = n_src - r->source_truncated;
    r->n_output_tokens = h->n > 0 ? h->off[1] - h->off[0] : 0;
    r->hypotheses = calloc((size_t)(h->n > 0 ? h->n : 1), sizeof(char *));
    if (o->return_scores) r->scores = malloc(sizeof(float) * (size_t)(h->n > 0 ? h->n : 1));
    if (!r->hypotheses || (o->return_scores && !r->scores))
        return tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory"), -1;
    for (int j = 0; j < h->n; j++) {
        if (!(r->hypotheses[j] = ids_text(t->mt, h->ids + h->off[j], h->off[j + 1] - h->off[j]))) return -1;
        r->n_hypotheses = j + 1;
        if (r->scores) r->scores[j] = h->score[j];
    }
    if (!o->return_attention || h->n == 0) return 0;
    if (t->mt->marian)
        return tfm_set_error_kind(TFM_ERR_ARG, "return_attention: not supported for an imported MarianMT (no word "
                                  "vocabulary to label the tokens)"), -1;
    return attention_of(t, &w->g, src->ids + src->off[k], n_src - r->source_truncated, h->ids, h->off[1], r);
}

/* An empty (or blank) line: one empty hypothesis, nothing decoded. */
static int empty_result(const tfm_translate_options *o, tfm_translation *r) {
    r->hypotheses = calloc(1, sizeof(char *));
    if (r->hypotheses) r->hypotheses[0] = strdup("");
    if (o->return_scores && (r->scores = malloc(sizeof(float)))) r->scores[0] = 0.0f;
    if (!r->hypotheses || !r->hypotheses[0] || (o->return_scores && !r->scores))
        return tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory"), -1;
    r->n_hypotheses = 1;
    return 0;
}

static int blank(const char *s) {
    while (*s == ' ' || *s == '\t') s++;
    return !*s;
}

/* The non-blank source lines (todo[0..m)) and their prefixes to id lists; checks UTF-8 and prefix lengths. */
static int tokenize_all(const tfm_translator *t, const char *const *source, const int *todo, int m,
                        const tfm_translate_options *o, id_lists *src, id_lists *pre) {
    for (int k = 0; k < m; k++) {
        int i = todo[k];
        if (text_ids(t->mt, 0, source[i], src)) return tfm_prefix_error("source[%d]: ", i);
        if (!o->target_prefix) continue;
        const char *pf = o->target_prefix[i] ? o->target_prefix[i] : "";
        long bad = tfm_utf8_first_invalid(pf, strlen(pf));
        if (bad >= 0)
            return tfm_set_error_kind(TFM_ERR_DATA, "target_prefix[%d]: invalid UTF-8 at byte %ld", i, bad + 1), -1;
        if (text_ids(t->mt, 1, pf, pre)) return tfm_prefix_error("target_prefix[%d]: ", i);
        int np = pre->off[k + 1] - pre->off[k];
        if (np >= o->max_decoding_length)
            return tfm_set_error("target_prefix[%d]: %d tokens, max_decoding_length is %d", i, np,
                                 o->max_decoding_length), -1;
    }
    return 0;
}

static int id_lists_init(id_lists *l, int n) {
    l->n = 0, l->cap = 1024;
    l->ids = malloc(sizeof(int) * (size_t)l->cap);
    l->off = calloc((size_t)n + 1, sizeof(int));
    return l->ids && l->off ? 0 : (tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory"), -1);
}

int tfm_translator_translate_batch(tfm_translator *t, const char *const *source, int n, const tfm_translate_options *oi,
                                   tfm_translation *results) {
    tfm_translate_options o;
    int max_src;
    tfm_set_error("%s", "");
    if (n < 0) return tfm_set_error("translate: negative number of inputs (%d)", n), -1;
    if (resolve_options(t, oi, &o, &max_src)) return -1;
    for (int i = 0; i < n; i++) {
        memset(&results[i], 0, sizeof results[i]);
        if (!source[i]) return tfm_set_error("source[%d]: NULL", i), -1;
        long bad = tfm_utf8_first_invalid(source[i], strlen(source[i]));
        if (bad >= 0) return tfm_set_error_kind(TFM_ERR_DATA, "source[%d]: invalid UTF-8 at byte %ld", i, bad + 1), -1;
    }
    if (n == 0) return 0;
    id_lists src = {0}, pre = {0};
    tfm_hyps *hyps = calloc((size_t)n, sizeof *hyps);
    int *todo = malloc(sizeof(int) * (size_t)n), m = 0;
    workspace *w = NULL;
    int rc = -1, saved_threads = tfm_get_threads();
    if (!hyps || !todo || id_lists_init(&src, n) || (o.target_prefix && id_lists_init(&pre, n))) {
        tfm_set_error_kind(TFM_ERR_NOMEM, "out of memory (translating %d lines)", n);
        goto end;
    }
    for (int i = 0; i < n; i++)
        if (!blank(source[i])) todo[m++] = i;
    if (tokenize_all(t, source, todo, m, &o, &src, &pre) || !(w = workspace_take(t))) goto end;
    tfm_set_threads(t->threads);
    tfm_search_opts so = {o.beam_size, o.length_penalty, o.max_decoding_length, o.num_hypotheses,
                          o.target_prefix ? pre.ids : NULL, o.target_prefix ? pre.off : NULL,
                          o.beam_size == 1 && !o.return_scores ? greedy_screen(t) : NULL};   /* greedy: same tokens */
    pthread_rwlock_rdlock(&t->model_lock);
    int failed = m && tfm_search_nbest_ensemble(t->models, t->n_models, &w->g, w->wp, w->n_workers, src.ids, src.off,
                                                m, max_src, o.max_batch_size ? o.max_batch_size : t->p.max_batch_size,
                                                &so, hyps);
    pthread_rwlock_unlock(&t->model_lock);
    if (failed) goto end;
    rc = 0;
    for (int k = 0, i = 0; i < n && !rc; i++) {
        if (k < m && todo[k] == i) rc = fill_result(t, w, &o, &src, k, max_src, &hyps[k], &results[i]), k++;
        else rc = empty_result(&o, &results[i]);
    }
end:
    tfm_set_threads(saved_threads);
    if (w) workspace_give(t, w);
    for (int k = 0; hyps && k < m; k++) tfm_hyps_free(&hyps[k]);
    free(hyps), free(todo), free(src.ids), free(src.off), free(pre.ids), free(pre.off);
    if (rc) {
        for (int i = 0; i < n; i++) tfm_translation_free(&results[i]);
        if (!tfm_last_error()[0]) tfm_set_error_kind(TFM_ERR_NOMEM, "translation failed (out of memory)");
    }
    return rc;
}
