/* The options of a translation run (include/tfm/run.h): the fields (train-mt's flags), their defaults, the
 * presets (named sets of defaults for the fields not given), and the checks, each naming the flag. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tfm/kernels.h"
#include "train/run_common.h"
#include "train/run_mt.h"

/* ---------------------------------------------------------------- the fields */
#define F(member, flag, TYPE, CLASS, help) {flag, TFM_FIELD_##TYPE, TFM_FIELD_##CLASS, offsetof(tfm_mt_run_opts, member), help},
static const tfm_field MT_FIELDS[] = {
    F(tsv, "tsv", STR, DATA, "parallel corpus: one 'source<TAB>target' pair a line")
    F(src, "src", STR, DATA, "source sentences, one a line (with --tgt)")
    F(tgt, "tgt", STR, DATA, "target sentences, aligned with --src")
    F(valid_src, "valid-src", STR, DATA, "validation source file (loss reported each epoch)")
    F(valid_tgt, "valid-tgt", STR, DATA, "validation target file")
    F(out, "out", STR, LOCAL, "checkpoint to write (after every epoch)")
    F(arch, "arch", STR, FIXED, "transformer | rnn | bahdanau")
    F(preprocess, "preprocess", STR, FIXED, "d2l | moses | moses-lower | space")
    F(num_examples, "num-examples", INT, FIXED, "use the first N pairs (0 = all)")
    F(min_freq, "min-freq", INT, FIXED, "minimum token frequency for the vocabularies")
    F(max_len, "max-len", INT, FIXED, "num_steps: sentences padded/truncated to N tokens incl. <eos>")
    F(d_model, "d-model", INT, FIXED, "transformer width")
    F(n_head, "n-head", INT, FIXED, "attention heads")
    F(n_layer, "n-layer", INT, FIXED, "blocks per stack (transformer) / GRU layers (rnn)")
    F(ffn, "ffn", INT, FIXED, "position-wise FFN hidden size")
    F(pre_ln, "pre-ln", BOOL, FIXED, "pre-LN blocks instead of d2l's post-LN AddNorm")
    F(embed_size, "embed-size", INT, FIXED, "embedding size (rnn, bahdanau)")
    F(hidden_size, "hidden-size", INT, FIXED, "GRU hidden size (rnn, bahdanau)")
    F(dropout, "dropout", FLOAT, FIXED, "dropout on the embeddings and residual connections (and the attention weights "
      "unless --attention-dropout)")
    F(attention_dropout, "attention-dropout", FLOAT, FIXED, "transformer: dropout on the attention weights after the "
      "softmax (-1 = --dropout, d2l's and tfm's before; fairseq's default is 0)")
    F(activation_dropout, "activation-dropout", FLOAT, FIXED, "transformer: dropout in the FFN after its activation")
    F(label_smoothing, "label-smoothing", FLOAT, FIXED, "label smoothing of the cross-entropy")
    F(bpe_dropout, "bpe-dropout", FLOAT, FIXED, "with --tokenizer bpe: BPE-dropout, each merge skipped with probability "
      "X when segmenting the training pairs, again every epoch (validation and translation: exact BPE)")
    F(rdrop, "rdrop", FLOAT, FIXED, "R-Drop: each batch through the model twice (two dropout masks), loss = mean of "
      "the two cross-entropies + X times their symmetric KL (0 = off: one pass)")
    F(ema_decay, "ema-decay", FLOAT, FIXED, "keep an exponential moving average of the weights with this decay per step "
      "(e.g. 0.99; 0 = none) and write it as OUT.ema.tfm, a model for translate, at every checkpoint")
    F(loss_norm, "loss-norm", STR, FIXED,
      "tokens (mean over target tokens) | d2l (per-sentence sum / the batch's target length, summed over the batch)")
    F(lr, "lr", FLOAT, FIXED, "learning rate (peak; the scale factor for noam)")
    F(min_lr, "min-lr", FLOAT, FIXED, "final learning rate of the cosine schedule")
    F(schedule, "schedule", STR, FIXED, "noam | cosine | constant (all with --warmup)")
    F(warmup, "warmup", INT, FIXED, "warmup steps")
    F(batch_size, "batch-size", INT, FIXED, "sentence pairs per batch")
    F(epochs, "epochs", INT, CHANGEABLE, "epochs (total, also when resuming)")
    F(grad_clip, "grad-clip", FLOAT, FIXED, "clip the global gradient norm (0 = off)")
    F(weight_decay, "weight-decay", FLOAT, FIXED, "AdamW weight decay (0 = Adam)")
    F(beta1, "beta1", FLOAT, FIXED, "Adam(W) beta1")
    F(beta2, "beta2", FLOAT, FIXED, "Adam(W) beta2 (0.999: the d2l and Vaswani recipes; train-lm: 0.99)")
    F(bucket, "bucket", INT, FIXED, "sort by length within chunks of N batches (0 = off)")
    F(seed, "seed", INT, FIXED, "random seed (init, shuffling, dropout)")
    F(threads, "threads", INT, CHANGEABLE, "threads (0 = OMP_NUM_THREADS, else the CPUs tfm may use: affinity, cgroup CPU "
      "quota); stored: a resume uses the run's count unless given (the numbers depend on it)")
    F(log_every, "log-every", INT, LOCAL, "progress line every N steps when stderr is not a terminal (0 = per epoch)")
    F(max_steps, "max-steps", INT, LOCAL, "stop (with a checkpoint) once the run's step reaches N (0 = no limit)")
    F(save_every, "save-every", INT, CHANGEABLE, "also checkpoint every N steps, inside epochs too (0 = per epoch)")
    F(keep_last, "keep-last", INT, CHANGEABLE, "keep the last K checkpoints as OUT.step<N>.tfm (0 = none)")
    F(allow_new_data, "allow-new-data", BOOL, LOCAL, "--resume on different data (fine-tuning; logged)")
    F(skip_nonfinite, "skip-nonfinite", INT, CHANGEABLE, "skip up to N batches with a non-finite loss/grad")
    F(profile, "profile", BOOL, LOCAL, "at the end, print time per op kind and phase per step")
    F(resume, "resume", STR, LOCAL, "continue the run saved in this checkpoint exactly (--out defaults to it)")
    F(d2l_examples, "d2l-examples", BOOL, LOCAL, "after training, translate d2l's 4 English sentences")
    F(dump_data, "dump-data", STR, LOCAL, "write PREFIX.{train,valid}.{src,tgt} tokens and PREFIX.{src,tgt}.vocab")
    F(dump_only, "dump-only", BOOL, LOCAL, "with --dump-data: write the files and stop (no training)")
    F(tokenizer, "tokenizer", STR, FIXED, "word (--preprocess) | bpe (joint subwords, raw text in and out)")
    F(vocab_size, "vocab-size", INT, FIXED, "with --tokenizer bpe: pieces of the joint BPE model learned from the "
      "training pairs (0 = 8000)")
    F(bpe_model, "bpe-model", STR, FIXED, "with --tokenizer bpe: use this BPE .model (tfm bpe learn, or spm_train "
      "--model_type=bpe with tfm's special ids)")
    F(share_embeddings, "share-embeddings", BOOL, FIXED,
      "transformer: one matrix for source/target embeddings and the output layer (needs --tokenizer bpe)")
    F(pad_to_max_len, "pad-to-max-len", BOOL, FIXED,
      "pad every batch to --max-len, as d2l does (rnn/bahdanau encoders run over the padding; --loss-norm d2l "
      "divides by --max-len); stored in the model, so translate pads sources alike")
    F(init, "init", STR, FIXED, "d2l (embeddings N(0,1)) | xavier (every matrix Xavier-uniform)")
    F(max_tokens, "max-tokens", INT, FIXED,
      "batches of up to N source and N target tokens incl. padding, length-sorted (0 = --batch-size)")
    F(eval_every, "eval-every", INT, CHANGEABLE, "also validate every N steps (0 = after each epoch only)")
    F(keep_best, "keep-best", BOOL, CHANGEABLE, "write MODEL.best.tfm whenever validation BLEU improves")
    F(patience, "patience", INT, CHANGEABLE, "stop after N validations without a better BLEU (0 = never)")
    F(log_file, "log-file", STR, CHANGEABLE, "write one JSON object per log line (docs/LOGS.md; tfm plot); a resume "
      "appends to it, and to the run's log file unless given")
    F(parallel, "parallel", STR, CHANGEABLE, "auto | batch (a chunk of the batch per thread) | ops (threads split each "
      "op); stored: a resume uses the run's unless given (the numbers depend on it)")
    F(precision, "precision", STR, FIXED, "fp32 | bf16 (linear layers' GEMMs with bfloat16 operands, fp32 sums)")
    F(decode_beam, "decode-beam", INT, CHANGEABLE,
      "beam to store in the model: translate, the library and serve use it by default (0 = none: greedy)")
    F(decode_alpha, "decode-alpha", FLOAT, CHANGEABLE, "length penalty stored with --decode-beam")
    F(src_lang, "src-lang", STR, CHANGEABLE, "source language code stored in the model (e.g. de; tfm serve's /languages)")
    F(tgt_lang, "tgt-lang", STR, CHANGEABLE, "target language code stored in the model (e.g. en)")
    F(preset, "preset", STR, FIXED, "d2l | multi30k: defaults for the flags not given (see above)")
    F(allow_truncation, "allow-truncation", BOOL, LOCAL,
      "train even when --max-len cuts more than 5% of the pairs (else an error)")
    F(overwrite, "overwrite", BOOL, LOCAL, "start a new run (no --resume) over an existing --out and a non-empty "
      "--log-file, which are refused without it (default off)")
};
#undef F
#define N_FIELDS ((int)(sizeof MT_FIELDS / sizeof MT_FIELDS[0]))
_Static_assert(N_FIELDS <= MT_MAX_FIELDS, "mt_run.given has room for every field");

const tfm_field *mt_fields(int *n) { return *n = N_FIELDS, MT_FIELDS; }
const tfm_field *tfm_mt_run_fields(int *n) { return mt_fields(n); }
size_t tfm_mt_run_opts_size(void) { return sizeof(tfm_mt_run_opts); }
int mt_field(const char *name) { return tfm_field_find(MT_FIELDS, N_FIELDS, name); }

void tfm_mt_run_opts_default(tfm_mt_run_opts *o) {
    memset(o, 0, sizeof *o);
    o->arch = "transformer", o->preprocess = "d2l", o->schedule = "constant", o->loss_norm = "tokens";
    o->tokenizer = "word", o->init = "d2l";
    o->min_freq = 2, o->max_len = 10, o->d_model = 32, o->n_head = 4, o->n_layer = 2, o->ffn = 64;
    o->embed_size = 32, o->hidden_size = 32, o->batch_size = 64, o->epochs = 10, o->seed = 1, o->log_every = 50;
    o->dropout = 0.2f, o->lr = 0.005f, o->grad_clip = 1.0f, o->beta1 = 0.9f, o->beta2 = 0.999f;
    o->attention_dropout = -1.0f;   /* as --dropout */
}

/* given NULL: a field counts as given when its value is not the default (a caller that sets d_model gets it) */
void mt_given(mt_run *x) {
    if (x->h && x->h->given) {
        memcpy(x->given, x->h->given, N_FIELDS);
        return;
    }
    tfm_mt_run_opts d;
    tfm_mt_run_opts_default(&d);
    char a[4200], b[4200];
    for (int i = 0; i < N_FIELDS; i++) {
        tfm_field_format(&MT_FIELDS[i], x->o, a, sizeof a);
        tfm_field_format(&MT_FIELDS[i], &d, b, sizeof b);
        x->given[i] = strcmp(a, b) != 0;
    }
}

/* ---------------------------------------------------------------- presets */
/* d2l is the d2l book's toy (600 short pairs, word tokens, a 2-layer 32-wide Transformer: the defaults of every
 * field); multi30k is recipes/multi30k-de-en.sh's model, schedule and batching for raw text with joint BPE.
 * Without a preset, --tokenizer bpe (given) with a Transformer picks multi30k and anything else d2l. The chosen
 * name is stored with the run, like every field, so a resume keeps it. */
#define D2L_SUMMARY "the d2l book's toy: word tokens, d_model 32, 2 layers, --max-len 10, constant lr 0.005, 10 epochs"
#define MULTI30K_SUMMARY "recipes/multi30k-de-en.sh, for raw text: joint BPE 8000, tied embeddings, d_model 256,\n" \
    "            3+3 layers, FFN 1024, --max-len 64, Noam 0.5 / 1000 warmup, 2048-token batches, 16 epochs"
typedef struct {
    const char *name;
    const char *fields[40];   /* "field", "value" pairs, NULL-terminated */
} preset;

static const preset PRESETS[] = {
    {"d2l", {"tokenizer", "word", "preprocess", "d2l", "min-freq", "2", "max-len", "10", "d-model", "32", "n-head", "4",
             "n-layer", "2", "ffn", "64", "dropout", "0.2", "lr", "0.005", "schedule", "constant", "batch-size", "64",
             "epochs", "10", "beta2", "0.999", "init", "d2l", NULL}},
    {"multi30k", {"tokenizer", "bpe", "vocab-size", "8000", "share-embeddings", "1", "init", "xavier", "d-model", "256",
                  "n-head", "4", "n-layer", "3", "ffn", "1024", "dropout", "0.1", "label-smoothing", "0.1", "max-len",
                  "64", "schedule", "noam", "lr", "0.5", "warmup", "1000", "beta2", "0.98", "grad-clip", "1",
                  "max-tokens", "2048", "epochs", "16", NULL}},
};
#define N_PRESETS ((int)(sizeof PRESETS / sizeof PRESETS[0]))

const char *tfm_mt_run_about(void) {
    return "Train an encoder-decoder translator with teacher forcing, masked cross-entropy (label\n"
           "smoothing), Adam(W), a learning-rate schedule and gradient clipping. A checkpoint is written\n"
           "after every epoch; --resume continues it exactly.\n"
           "Presets (--preset NAME) set the flags not given on the command line:\n"
           "  d2l       " D2L_SUMMARY "\n"
           "  multi30k  " MULTI30K_SUMMARY "\n"
           "Without --preset: multi30k with --tokenizer bpe (raw text), else d2l. The defaults shown below are d2l's.";
}

int mt_preset_apply(mt_run *x) {
    tfm_mt_run_opts *o = x->o;
    if (o->resume) return 0;   /* the stored run has every value, the preset's name included */
    int bpe_given = x->given[mt_field("tokenizer")] && o->tokenizer && !strcmp(o->tokenizer, "bpe");
    int transformer = o->arch && !strcmp(o->arch, "transformer");
    if (!o->preset) o->preset = bpe_given && transformer ? "multi30k" : "d2l";
    const preset *p = NULL;
    for (int i = 0; i < N_PRESETS; i++)
        if (!strcmp(o->preset, PRESETS[i].name)) p = &PRESETS[i];
    if (!p) return tfm_set_error_kind(TFM_ERR_ARG, "--preset: unknown '%s' (d2l, multi30k; see tfm train-mt --help)",
                                      o->preset), -1;
    if (!transformer && strcmp(p->name, "d2l"))
        return tfm_set_error_kind(TFM_ERR_ARG, "--preset %s is a Transformer recipe; --arch %s takes --preset d2l and "
                                  "its own flags", p->name, o->arch ? o->arch : ""), -1;
    for (int i = 0; p->fields[i]; i += 2) {
        int f = mt_field(p->fields[i]);
        int bpe_only = !strcmp(p->fields[i], "vocab-size") || !strcmp(p->fields[i], "share-embeddings");
        if (!x->given[f] && !(bpe_only && (!o->tokenizer || strcmp(o->tokenizer, "bpe"))))
            tfm_field_parse(&MT_FIELDS[f], o, p->fields[i + 1]);   /* the table's own values: they parse */
    }
    /* a model file fixes the vocabulary: the preset's --vocab-size does not apply */
    if (o->bpe_model && !x->given[mt_field("vocab-size")]) o->vocab_size = 0;
    return 0;
}

/* ---------------------------------------------------------------- checks */
#define BAD(...) return tfm_set_error_kind(TFM_ERR_ARG, __VA_ARGS__), -1
#define S(v) ((v) ? (v) : "")

static int one_of(const char *v, const char *list) {   /* list: " a b c " */
    char key[80];
    if (!v || strlen(v) > 40) return 0;
    snprintf(key, sizeof key, " %s ", v);
    return strstr(list, key) != NULL;
}

void mt_best_path(const char *out, char *buf, size_t n) {
    size_t k = strlen(out);
    k = k > 4 && !strcmp(out + k - 4, ".tfm") ? k - 4 : k;
    snprintf(buf, n, "%.*s.best.tfm", (int)k, out);
}

const char *const MT_DUMP_SFX[6] = {"train.src", "train.tgt", "valid.src", "valid.tgt", "src.vocab", "tgt.vocab"};

/* Every file the run reads and writes (--out, --keep-best's MODEL.best.tfm, --log-file, the --dump-data files). */
static int check_files(const tfm_mt_run_opts *o) {
    char best[4200], dump[6][4200];
    mt_best_path(o->out, best, sizeof best);
    tfm_file_use f[16] = {
        {"--tsv", o->tsv, TFM_FILE_IN}, {"--src", o->src, TFM_FILE_IN}, {"--tgt", o->tgt, TFM_FILE_IN},
        {"--valid-src", o->valid_src, TFM_FILE_IN}, {"--valid-tgt", o->valid_tgt, TFM_FILE_IN},
        {"--bpe-model", o->bpe_model, TFM_FILE_IN}, {"--resume", o->resume, TFM_FILE_IN_PLACE},
        {"--out", o->out, TFM_FILE_OUT}, {"--keep-best", o->keep_best ? best : NULL, TFM_FILE_OUT},
        {"--log-file", o->log_file, TFM_FILE_OUT_STREAM}};
    int n = 10;
    for (int i = 0; o->dump_data && i < 6; i++) {
        if ((i == 2 || i == 3) && !o->valid_src) continue;
        snprintf(dump[i], sizeof dump[i], "%s.%s", o->dump_data, MT_DUMP_SFX[i]);
        f[n++] = (tfm_file_use){"--dump-data", dump[i], TFM_FILE_OUT};
    }
    if (!tfm_check_files(f, n)) return 0;
    return tfm_last_error_kind() == TFM_ERR_IO ? -1 : mt_arg_error();
}

/* A field of another architecture must keep its default: the model would carry the value without using it. */
static int check_arch_fields(const tfm_mt_run_opts *o) {
    tfm_mt_config d;
    tfm_mt_config_default(&d);
    int tr = !strcmp(o->arch, "transformer");
    const struct { const char *flag; int v, def, transformer; } f[] = {
        {"d-model", o->d_model, d.d_model, 1}, {"n-head", o->n_head, d.n_head, 1}, {"ffn", o->ffn, d.ffn, 1},
        {"pre-ln", o->pre_ln, 0, 1}, {"embed-size", o->embed_size, d.embed_size, 0},
        {"hidden-size", o->hidden_size, d.hidden_size, 0}};
    for (size_t i = 0; i < sizeof f / sizeof *f; i++)
        if (f[i].transformer != tr && f[i].v != f[i].def)
            BAD("--%s %d is for --arch %s: --arch %s does not use it (leave it out)", f[i].flag, f[i].v,
                tr ? "rnn / bahdanau" : "transformer", o->arch);
    return 0;
}

/* issue 35's flags: ranges, and the architecture / tokenizer each needs */
static int check_regularisers(const tfm_mt_run_opts *o) {
    int tr = o->arch && !strcmp(o->arch, "transformer");
    if (!(o->attention_dropout == -1.0f || (o->attention_dropout >= 0 && o->attention_dropout < 1)))
        BAD("--attention-dropout must be -1 (= --dropout) or in [0, 1), got %g", o->attention_dropout);
    if (!(o->activation_dropout >= 0 && o->activation_dropout < 1))
        BAD("--activation-dropout must be in [0, 1), got %g", o->activation_dropout);
    if (!tr && (o->attention_dropout != -1.0f || o->activation_dropout != 0))
        BAD("--%s is for --arch transformer (leave it out)", o->activation_dropout != 0 ? "activation-dropout"
                                                                                     : "attention-dropout");
    if (!(o->bpe_dropout >= 0 && o->bpe_dropout <= 1)) BAD("--bpe-dropout must be in [0, 1], got %g", o->bpe_dropout);
    if (o->bpe_dropout > 0 && (!o->tokenizer || strcmp(o->tokenizer, "bpe")))
        BAD("--bpe-dropout needs --tokenizer bpe");
    if (!(o->rdrop >= 0 && o->rdrop <= 1000)) BAD("--rdrop must be in [0, 1000] (0 = off), got %g", o->rdrop);
    if (!(o->ema_decay >= 0 && o->ema_decay < 1)) BAD("--ema-decay must be in [0, 1) (0 = off), got %g", o->ema_decay);
    return 0;
}

static int check_training(const tfm_mt_run_opts *o) {
    if (tfm_tok_kind_parse(S(o->preprocess)) < 0)
        BAD("--preprocess: unknown '%s' (d2l, moses, moses-lower, space)", S(o->preprocess));
    if (!one_of(o->schedule, " noam cosine constant ")) BAD("--schedule: unknown '%s' (noam, cosine, constant)", S(o->schedule));
    if (!one_of(o->arch, " transformer rnn bahdanau "))
        BAD("--arch: unknown '%s' (transformer, rnn, bahdanau)", S(o->arch));
    if (check_arch_fields(o)) return -1;
    if (!one_of(o->loss_norm, " tokens d2l ")) BAD("--loss-norm: unknown '%s' (tokens, d2l)", S(o->loss_norm));
    if (o->num_examples < 0) BAD("--num-examples must be >= 0, got %d", o->num_examples);
    if (o->min_freq < 1) BAD("--min-freq must be >= 1, got %d", o->min_freq);
    if (o->max_len < 2 || o->max_len > 4096) BAD("--max-len must be in 2..4096, got %d", o->max_len);
    if (o->batch_size < 1 || o->batch_size > 1000000) BAD("--batch-size must be in 1..1e6, got %d", o->batch_size);
    if (o->epochs < 1) BAD("--epochs must be >= 1, got %d", o->epochs);
    if (o->warmup < 0 || o->warmup > 100000000) BAD("--warmup must be in 0..1e8, got %d", o->warmup);
    if (!(o->lr > 0) || o->lr > 100) BAD("--lr must be in (0, 100], got %g", o->lr);
    if (!(o->min_lr >= 0 && o->min_lr <= o->lr)) BAD("--min-lr must be in [0, --lr %g], got %g", o->lr, o->min_lr);
    if (!(o->dropout >= 0 && o->dropout < 1)) BAD("--dropout must be in [0, 1), got %g", o->dropout);
    if (check_regularisers(o)) return -1;
    if (!(o->label_smoothing >= 0 && o->label_smoothing < 1))
        BAD("--label-smoothing must be in [0, 1), got %g", o->label_smoothing);
    if (!(o->grad_clip >= 0)) BAD("--grad-clip must be >= 0, got %g", o->grad_clip);
    if (!(o->weight_decay >= 0)) BAD("--weight-decay must be >= 0, got %g", o->weight_decay);
    if (!(o->beta1 >= 0 && o->beta1 < 1) || !(o->beta2 >= 0 && o->beta2 < 1))
        BAD("--beta1/--beta2 must be in [0,1), got %g / %g", o->beta1, o->beta2);
    if (o->log_every < 0) BAD("--log-every must be >= 0, got %d", o->log_every);
    if (o->threads < 0 || o->threads > TFM_MAX_THREADS)
        BAD("--threads must be in 0..%d (0 = OMP_NUM_THREADS, else the CPUs tfm may use), got %d", TFM_MAX_THREADS,
            o->threads);
    if (o->bucket < 0) BAD("--bucket must be >= 0, got %d", o->bucket);
    if (o->save_every < 0 || o->keep_last < 0 || o->skip_nonfinite < 0)
        BAD("--save-every, --keep-last and --skip-nonfinite must be >= 0");
    if (o->max_steps < 0) BAD("--max-steps must be >= 0 (0 = no limit), got %d", o->max_steps);
    return 0;
}

static int check_shape(const tfm_mt_run_opts *o) {
    if (o->d_model < 2 || o->d_model > 65536) BAD("--d-model must be in 2..65536, got %d", o->d_model);
    if (o->n_head < 1 || o->d_model % o->n_head) BAD("--n-head must divide --d-model (%d), got %d", o->d_model, o->n_head);
    if (o->d_model % 2) BAD("--d-model must be even, got %d", o->d_model);
    if (o->n_layer < 1 || o->n_layer > 64) BAD("--n-layer must be in 1..64, got %d", o->n_layer);
    if (o->ffn < 1) BAD("--ffn must be >= 1, got %d", o->ffn);
    if (o->embed_size < 1 || o->hidden_size < 1) BAD("--embed-size and --hidden-size must be >= 1");
    if (o->parallel && !one_of(o->parallel, " auto batch ops "))
        BAD("--parallel must be auto, batch or ops, got '%s'", o->parallel);
    if (o->precision && !one_of(o->precision, " fp32 bf16 "))
        BAD("--precision must be fp32 or bf16, got '%s'", o->precision);
    return 0;
}

static int check_tokenizer(const tfm_mt_run_opts *o) {
    int bpe = o->tokenizer && !strcmp(o->tokenizer, "bpe");
    if (!bpe && !one_of(o->tokenizer, " word ")) BAD("--tokenizer: unknown '%s' (word, bpe)", S(o->tokenizer));
    if (!strcmp(o->preprocess, "bpe")) BAD("--preprocess: use --tokenizer bpe for subwords");
    if (!bpe && (o->vocab_size || o->bpe_model)) BAD("--%s needs --tokenizer bpe", o->bpe_model ? "bpe-model" : "vocab-size");
    if (o->vocab_size && o->bpe_model) BAD("give --vocab-size or --bpe-model, not both");
    if (o->vocab_size < 0 || o->vocab_size > 1000000) BAD("--vocab-size must be in 1..1000000, got %d", o->vocab_size);
    if (o->share_embeddings && !bpe) BAD("--share-embeddings needs one joint vocabulary: use it with --tokenizer bpe");
    if (o->share_embeddings && strcmp(o->arch, "transformer")) BAD("--share-embeddings: only for --arch transformer");
    if (o->decode_beam < 0 || o->decode_beam > 64) BAD("--decode-beam must be in 1..64 (0 = none), got %d", o->decode_beam);
    if (!(o->decode_alpha >= 0 && o->decode_alpha <= 10)) BAD("--decode-alpha must be in [0, 10], got %g", o->decode_alpha);
    if (o->decode_alpha != 0 && !o->decode_beam) BAD("--decode-alpha needs --decode-beam");
    if (o->src_lang && *o->src_lang && !tfm_lang_code_valid(o->src_lang))
        BAD("--src-lang: '%s' is not a language code (1 to 15 letters, digits, '-' or '_')", o->src_lang);
    if (o->tgt_lang && *o->tgt_lang && !tfm_lang_code_valid(o->tgt_lang))
        BAD("--tgt-lang: '%s' is not a language code (1 to 15 letters, digits, '-' or '_')", o->tgt_lang);
    if (!one_of(o->init, " d2l xavier ")) BAD("--init: unknown '%s' (d2l, xavier)", S(o->init));
    if (!strcmp(o->init, "xavier") && strcmp(o->arch, "transformer")) BAD("--init xavier: only for --arch transformer");
    if (o->pad_to_max_len && o->max_tokens)
        BAD("--pad-to-max-len and --max-tokens: token budgets are for unpadded batches, give one");
    if (o->max_tokens < 0 || o->max_tokens > 10000000) BAD("--max-tokens must be in 0..1e7, got %d", o->max_tokens);
    if (o->max_tokens && o->max_tokens < o->max_len)
        BAD("--max-tokens must be at least --max-len (%d), got %d", o->max_len, o->max_tokens);
    if (o->eval_every < 0) BAD("--eval-every must be >= 0, got %d", o->eval_every);
    if (o->patience < 0) BAD("--patience must be >= 0, got %d", o->patience);
    if (!o->valid_src && (o->keep_best || o->patience || o->eval_every))
        BAD("--%s needs --valid-src and --valid-tgt", o->keep_best ? "keep-best" : o->patience ? "patience" : "eval-every");
    return 0;
}

/* the options into the loop's (checked) */
static void train_opts(const tfm_mt_run_opts *o, tfm_mt_train_opts *to) {
    tfm_mt_train_opts_default(to);
    to->epochs = o->epochs, to->batch_size = o->batch_size, to->num_steps = o->max_len, to->lr = o->lr;
    to->schedule = !strcmp(o->schedule, "noam") ? TFM_SCHED_NOAM
                   : !strcmp(o->schedule, "cosine") ? TFM_SCHED_COSINE : TFM_SCHED_CONSTANT;
    to->warmup = o->warmup, to->min_lr = o->min_lr, to->label_smoothing = o->label_smoothing;
    to->loss_norm = strcmp(o->loss_norm, "d2l") ? TFM_LOSS_TOKENS : TFM_LOSS_D2L;
    to->grad_clip = o->grad_clip, to->weight_decay = o->weight_decay, to->beta1 = o->beta1, to->beta2 = o->beta2;
    static const char *par[] = {"auto", "ops", "batch"};   /* in tfm_parallel order */
    for (int p = 0; p < 3; p++)
        if (o->parallel && !strcmp(o->parallel, par[p])) to->ctl.parallel = p;
    to->ctl.bf16 = o->precision && !strcmp(o->precision, "bf16");
    to->seed = (uint64_t)o->seed, to->bucket = o->bucket, to->log_every = o->log_every, to->profile = o->profile;
    to->max_steps = o->max_steps, to->ctl.save_every = o->save_every, to->ctl.skip_nonfinite = o->skip_nonfinite;
    to->max_tokens = o->max_tokens, to->valid_every = o->eval_every;
    to->rdrop = o->rdrop, to->ema_decay = o->ema_decay;
}

int mt_check_options(mt_run *x) {
    tfm_mt_run_opts *o = x->o;
    if (!o->tsv == !(o->src || o->tgt)) BAD("give either --tsv FILE or --src FILE --tgt FILE");
    if (!o->tsv && (!o->src || !o->tgt)) BAD("--src and --tgt go together");
    if (!o->valid_src != !o->valid_tgt) BAD("--valid-src and --valid-tgt go together");
    if (!o->out) BAD("--out MODEL.tfm (or --resume MODEL.tfm) is required");
    if (check_files(o) || check_training(o) || check_shape(o) || check_tokenizer(o)) return -1;
    int writes_run = !o->resume && !(o->dump_data && o->dump_only);   /* --dump-only writes no --out, no log */
    if (writes_run && !o->overwrite && tfm_run_check_fresh("seq2seq", o->out, o->log_file)) return -1;
    train_opts(o, &x->to);
    return 0;
}

void mt_model_config(const tfm_mt_run_opts *o, tfm_mt_config *cf) {
    tfm_mt_config_default(cf);
    snprintf(cf->arch, sizeof cf->arch, "%s", o->arch);
    cf->d_model = o->d_model, cf->n_head = o->n_head, cf->ffn = o->ffn, cf->pre_ln = o->pre_ln;
    cf->max_len = MT_PE_LEN > o->max_len + 1 ? MT_PE_LEN : o->max_len + 1;
    cf->n_layer = o->n_layer, cf->embed_size = o->embed_size, cf->hidden_size = o->hidden_size;
    cf->dropout = o->dropout, cf->pad_len = o->pad_to_max_len ? o->max_len : 0;
    cf->attention_dropout = o->attention_dropout, cf->activation_dropout = o->activation_dropout;
    tfm_mt_config_clear_unused(cf);   /* the fields of another architecture (refused above if not defaults) */
    cf->share_embeddings = o->share_embeddings;
    cf->init = strcmp(o->init, "xavier") ? TFM_INIT_D2L : TFM_INIT_XAVIER;
}
