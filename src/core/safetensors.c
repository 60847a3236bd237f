/* safetensors reader and writer (see include/tfm/safetensors.h). */
#include "tfm/safetensors.h"
#include "core/json.h"
#include "tfm/io.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define ST_HOST_BE 1
#else
#define ST_HOST_BE 0
#endif

#define MAX_NAME 1024   /* bytes in a tensor name */

size_t tfm_st_numel(const tfm_st_tensor *t) {
    size_t n = 1;
    for (int d = 0; d < t->ndim; d++) n *= (size_t)t->shape[d];
    return n;
}

size_t tfm_st_elem_size(const tfm_st_tensor *t) { return t->dtype == TFM_ST_F32 ? 4 : 2; }

/* IEEE half -> float, exactly (subnormals, infinities and NaNs included) */
static float half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 31, m = h & 1023, x;
    if (e == 31) x = sign | 0x7f800000u | m << 13;
    else if (e) x = sign | (e + 112) << 23 | m << 13;
    else if (!m) x = sign;
    else {   /* subnormal: normalise */
        int k = 0;
        while (!(m & 1024)) m <<= 1, k++;
        x = sign | (uint32_t)(113 - k) << 23 | (m & 1023) << 13;
    }
    float f;
    memcpy(&f, &x, 4);
    return f;
}

void tfm_st_read_f32(const tfm_st_tensor *t, float *dst) {
    size_t n = tfm_st_numel(t);
    const unsigned char *p = t->data;
    if (t->dtype == TFM_ST_F32) {
        memcpy(dst, t->data, n * 4);
#if ST_HOST_BE
        uint32_t *u = (uint32_t *)dst;
        for (size_t i = 0; i < n; i++) u[i] = __builtin_bswap32(u[i]);
#endif
        return;
    }
    for (size_t i = 0; i < n; i++) {   /* 16-bit little-endian elements */
        uint16_t h = (uint16_t)(p[2 * i] | p[2 * i + 1] << 8);
        if (t->dtype == TFM_ST_F16) dst[i] = half_to_float(h);
        else {   /* bfloat16: the top half of a float */
            uint32_t x = (uint32_t)h << 16;
            memcpy(&dst[i], &x, 4);
        }
    }
}

/* ------------------------------------------------------------------ save */

/* The JSON header for tensors laid out back to back in order, padded with spaces to 8-byte alignment. */
static int build_header(tfm_strbuf *h, const char *path, const tfm_st_tensor *t, int n, const tfm_st_meta *meta,
                        int n_meta) {
    tfm_strbuf_put(h, "{", 1);
    if (n_meta > 0) {
        static const char key[] = "\"__metadata__\":{";
        tfm_strbuf_put(h, key, sizeof key - 1);
        for (int i = 0; i < n_meta; i++) {
            if (i) tfm_strbuf_put(h, ",", 1);
            if (tfm_json_put_string(h, meta[i].key, strlen(meta[i].key)))
                return tfm_set_error("%s: metadata key is not valid UTF-8", path), -1;
            tfm_strbuf_put(h, ":", 1);
            if (tfm_json_put_string(h, meta[i].value, strlen(meta[i].value)))
                return tfm_set_error("%s: metadata '%.100s' is not valid UTF-8 text", path, meta[i].key), -1;
        }
        tfm_strbuf_put(h, "}", 1);
    }
    uint64_t off = 0;
    for (int i = 0; i < n; i++) {
        size_t len = strlen(t[i].name);
        if (len == 0 || len > MAX_NAME || !strcmp(t[i].name, "__metadata__"))
            return tfm_set_error("%s: cannot save: bad tensor name '%.100s'", path, t[i].name), -1;
        if (t[i].ndim < 0 || t[i].ndim > TFM_MAX_DIMS)
            return tfm_set_error("%s: cannot save: tensor '%.100s' has %d dims", path, t[i].name, t[i].ndim), -1;
        for (int j = 0; j < i; j++)
            if (!strcmp(t[j].name, t[i].name))
                return tfm_set_error("%s: cannot save: duplicate tensor '%.100s'", path, t[i].name), -1;
        if (n_meta > 0 || i) tfm_strbuf_put(h, ",", 1);
        if (tfm_json_put_string(h, t[i].name, len))
            return tfm_set_error("%s: cannot save: tensor name '%.100s' is not UTF-8", path, t[i].name), -1;
        static const char desc[] = ":{\"dtype\":\"F32\",\"shape\":[";
        tfm_strbuf_put(h, desc, sizeof desc - 1);
        for (int d = 0; d < t[i].ndim; d++) {
            if (t[i].shape[d] < 1)
                return tfm_set_error("%s: cannot save: tensor '%.100s' has dim %d", path, t[i].name, t[i].shape[d]), -1;
            tfm_strbuf_printf(h, d ? ",%d" : "%d", t[i].shape[d]);
        }
        uint64_t bytes = 4 * (uint64_t)tfm_st_numel(&t[i]);
        tfm_strbuf_printf(h, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)off,
                          (unsigned long long)(off + bytes));
        off += bytes;
    }
    tfm_strbuf_put(h, "}", 1);
    while ((8 + h->len) % 8) tfm_strbuf_put(h, " ", 1);
    if (h->oom) return tfm_set_error("%s: out of memory building the header", path), -1;
    return 0;
}

static int write_all(FILE *f, const void *p, size_t n) { return n == 0 || fwrite(p, 1, n, f) == n; }

static int write_file(FILE *f, const tfm_strbuf *h, const tfm_st_tensor *t, int n) {
    unsigned char len[8];
    for (int k = 0; k < 8; k++) len[k] = (unsigned char)((uint64_t)h->len >> (8 * k));
    if (!write_all(f, len, 8) || !write_all(f, h->s, h->len)) return 0;
    for (int i = 0; i < n; i++) {
        size_t bytes = 4 * tfm_st_numel(&t[i]);
#if ST_HOST_BE
        const uint32_t *src = t[i].data;
        for (size_t k = 0; k < bytes / 4; k++) {
            uint32_t v = __builtin_bswap32(src[k]);
            if (!write_all(f, &v, 4)) return 0;
        }
#else
        if (!write_all(f, t[i].data, bytes)) return 0;
#endif
    }
    return 1;
}

typedef struct {
    const tfm_strbuf *h;
    const tfm_st_tensor *t;
    int n;
} st_file_ctx;
static int write_file_fn(FILE *f, const void *ctx) {
    const st_file_ctx *c = ctx;
    return write_file(f, c->h, c->t, c->n);
}

int tfm_st_save(const tfm_st_tensor *t, int n, const tfm_st_meta *meta, int n_meta, const char *path) {
    tfm_strbuf h = {0};
    if (build_header(&h, path, t, n, meta, n_meta)) {
        tfm_strbuf_free(&h);
        return -1;
    }
    st_file_ctx ctx = {&h, t, n};
    int rc = tfm_save_atomic(path, write_file_fn, &ctx);
    tfm_strbuf_free(&h);
    return rc;
}

/* ------------------------------------------------------------------ load */

/* One tensor description {"dtype":..., "shape":[...], "data_offsets":[b, e]} into t. */
static int parse_tensor(tfm_st_file *f, const tfm_json *v, tfm_st_tensor *t, uint64_t data_size) {
    char msg[300];
    const char *nm = v->key;
    t->name = nm;
#define BAD(...) return snprintf(msg, sizeof msg, __VA_ARGS__), tfm_set_error("%s: tensor '%.200s': %s", f->path, nm, msg), -1
    if (strlen(nm) > MAX_NAME) BAD("name longer than %d bytes", MAX_NAME);
    if (v->type != TFM_JSON_OBJECT) BAD("description is not a JSON object");
    for (const tfm_json *m = v->child; m; m = m->next)
        if (strcmp(m->key, "dtype") && strcmp(m->key, "shape") && strcmp(m->key, "data_offsets"))
            BAD("unknown field '%.40s'", m->key);
    const tfm_json *dt = tfm_json_get(v, "dtype"), *sh = tfm_json_get(v, "shape"),
                   *off = tfm_json_get(v, "data_offsets");
    if (!dt || !sh || !off) BAD("missing field '%s'", !dt ? "dtype" : !sh ? "shape" : "data_offsets");
    if (dt->type != TFM_JSON_STRING) BAD("dtype is not a string");
    if (!strcmp(dt->text, "F32")) t->dtype = TFM_ST_F32;
    else if (!strcmp(dt->text, "F16")) t->dtype = TFM_ST_F16;
    else if (!strcmp(dt->text, "BF16")) t->dtype = TFM_ST_BF16;
    else BAD("dtype '%.20s' not supported (tfm reads F32, F16, BF16)", dt->text);
    uint64_t esize = tfm_st_elem_size(t);
    if (sh->type != TFM_JSON_ARRAY) BAD("shape is not an array");
    if (sh->n > TFM_MAX_DIMS) BAD("shape has %d dims (at most %d)", sh->n, TFM_MAX_DIMS);
    t->ndim = sh->n;
    uint64_t numel = 1;
    int d = 0;
    for (const tfm_json *e = sh->child; e; e = e->next, d++) {
        int dim;
        if (tfm_json_int(e, &dim) || dim < 1) BAD("shape dim %d is not an integer in 1..2147483647", d);
        t->shape[d] = dim;
        if (numel > (UINT64_MAX / 4) / (uint64_t)dim) BAD("element count overflows");
        numel *= (uint64_t)dim;
    }
    if (off->type != TFM_JSON_ARRAY || off->n != 2 || tfm_json_u64(off->child, &t->begin) ||
        tfm_json_u64(off->child->next, &t->end))
        BAD("data_offsets is not [begin, end] with non-negative integers");
    if (t->begin > t->end) BAD("data_offsets [%llu, %llu] end before they begin", (unsigned long long)t->begin,
                               (unsigned long long)t->end);
    if (t->end > data_size)
        BAD("data_offsets [%llu, %llu] run past the data buffer (%llu bytes; truncated file?)",
            (unsigned long long)t->begin, (unsigned long long)t->end, (unsigned long long)data_size);
    if (t->end - t->begin != esize * numel)
        BAD("data_offsets span %llu bytes but %s shape needs %llu", (unsigned long long)(t->end - t->begin),
            dt->text, (unsigned long long)(esize * numel));
#undef BAD
    return 0;
}

static int parse_metadata(tfm_st_file *f, const tfm_json *v) {
    if (v->type != TFM_JSON_OBJECT) return tfm_set_error("%s: __metadata__ is not a JSON object", f->path), -1;
    f->meta = calloc(v->n ? (size_t)v->n : 1, sizeof *f->meta);
    if (!f->meta) return tfm_set_error("%s: out of memory", f->path), -1;
    for (const tfm_json *m = v->child; m; m = m->next) {
        if (m->type != TFM_JSON_STRING)
            return tfm_set_error("%s: __metadata__ value '%.100s' is not a string", f->path, m->key), -1;
        f->meta[f->n_meta].key = m->key;
        f->meta[f->n_meta++].value = m->text;
    }
    return 0;
}

/* Sorted by begin (stable merge sort on indices), the tensors must tile [0, data_size): no overlap, no
 * gap, nothing left over. */
static int check_layout(tfm_st_file *f) {
    size_t cnt = f->n ? (size_t)f->n : 1;
    int *ix = malloc(cnt * sizeof *ix), *tmp = malloc(cnt * sizeof *tmp);
    if (!ix || !tmp) {
        free(ix), free(tmp);
        return tfm_set_error("%s: out of memory", f->path), -1;
    }
    for (int i = 0; i < f->n; i++) ix[i] = i;
    for (int w = 1; w < f->n; w *= 2)
        for (int lo = 0; lo < f->n; lo += 2 * w) {
            int mid = lo + w < f->n ? lo + w : f->n, hi = lo + 2 * w < f->n ? lo + 2 * w : f->n;
            int a = lo, b = mid, k = lo;
            while (a < mid || b < hi)
                tmp[k++] = (b >= hi || (a < mid && f->t[ix[a]].begin <= f->t[ix[b]].begin)) ? ix[a++] : ix[b++];
            memcpy(ix + lo, tmp + lo, (size_t)(hi - lo) * sizeof *ix);
        }
    int rc = 0;
    uint64_t end = 0;
    const tfm_st_tensor *last = NULL;   /* the tensor reaching furthest so far */
    for (int k = 0; k < f->n && !rc; k++) {
        const tfm_st_tensor *t = &f->t[ix[k]];
        if (t->begin < end)
            rc = -1, tfm_set_error("%s: tensor '%.200s': data_offsets [%llu, %llu] overlap those of tensor '%.200s'",
                                   f->path, t->name, (unsigned long long)t->begin, (unsigned long long)t->end,
                                   last->name);
        else if (t->begin > end)
            rc = -1, tfm_set_error("%s: tensor '%.200s': the %llu bytes before its data belong to no tensor", f->path,
                                   t->name, (unsigned long long)(t->begin - end));
        if (t->end > end || !last) end = t->end, last = t;
    }
    if (!rc && end != f->data_size)
        rc = -1, tfm_set_error("%s: %llu bytes after the last tensor's data belong to no tensor", f->path,
                               (unsigned long long)(f->data_size - end));
    free(ix), free(tmp);
    return rc;
}

static int read_exact(FILE *fp, void *p, size_t n) { return n == 0 || fread(p, 1, n, fp) == n; }

int tfm_st_load(tfm_st_file *f, const char *path) {
    memset(f, 0, sizeof *f);
    f->path = strdup(path);
    if (!f->path) return tfm_set_error("%s: out of memory", path), -1;
    FILE *fp = fopen(path, "rb");
    if (!fp) return tfm_set_error_kind(TFM_ERR_IO, "%s: cannot open: %s", path, strerror(errno)), -1;
    int rc = -1;
    char *hdr = NULL;
    struct stat st;
    unsigned char lenb[8];
    if (fstat(fileno(fp), &st) || !S_ISREG(st.st_mode)) {
        tfm_set_error("%s: not a regular file", path);
        goto done;
    }
    uint64_t size = (uint64_t)st.st_size, n = 0;
    if (size < 8 || !read_exact(fp, lenb, 8)) {
        tfm_set_error("%s: truncated: %llu bytes, a safetensors file starts with an 8-byte header length", path,
                      (unsigned long long)size);
        goto done;
    }
    for (int k = 7; k >= 0; k--) n = n << 8 | lenb[k];
    if (n > TFM_ST_MAX_HEADER) {
        tfm_set_error("%s: header length %llu exceeds the %llu-byte limit (corrupt or not a safetensors file)", path,
                      (unsigned long long)n, (unsigned long long)TFM_ST_MAX_HEADER);
        goto done;
    }
    if (n > size - 8) {
        tfm_set_error("%s: header length %llu runs past the end of the file (%llu bytes; truncated?)", path,
                      (unsigned long long)n, (unsigned long long)size);
        goto done;
    }
    if (n < 2) {
        tfm_set_error("%s: header length %llu is too short for a JSON object", path, (unsigned long long)n);
        goto done;
    }
    hdr = malloc((size_t)n);
    if (!hdr) { tfm_set_error("%s: out of memory (header of %llu bytes)", path, (unsigned long long)n); goto done; }
    if (!read_exact(fp, hdr, (size_t)n)) { tfm_set_error("%s: read error in the header", path); goto done; }
    tfm_json *root = tfm_json_parse(hdr, (size_t)n);
    if (!root) {
        tfm_prefix_error("%s: header: ", path);
        goto done;
    }
    f->json = root;
    if (root->type != TFM_JSON_OBJECT) { tfm_set_error("%s: header is not a JSON object", path); goto done; }
    f->data_size = (size_t)(size - 8 - n);
    f->t = calloc(root->n ? (size_t)root->n : 1, sizeof *f->t);
    if (!f->t) { tfm_set_error("%s: out of memory", path); goto done; }
    for (const tfm_json *m = root->child; m; m = m->next) {
        if (!strcmp(m->key, "__metadata__")) {
            if (parse_metadata(f, m)) goto done;
        } else if (parse_tensor(f, m, &f->t[f->n++], f->data_size)) {
            goto done;
        }
    }
    if (check_layout(f)) goto done;
    f->data = malloc(f->data_size ? f->data_size : 1);
    if (!f->data) {
        tfm_set_error("%s: out of memory (%zu bytes of tensor data)", path, f->data_size);
        goto done;
    }
    if (!read_exact(fp, f->data, f->data_size)) {
        tfm_set_error("%s: read error in the tensor data (file changed while reading?)", path);
        goto done;
    }
    for (int i = 0; i < f->n; i++) f->t[i].data = f->data + f->t[i].begin;
    rc = 0;
done:
    free(hdr);
    fclose(fp);
    return rc;
}

void tfm_st_free(tfm_st_file *f) {
    tfm_json_free(f->json);
    free(f->t);
    free(f->meta);
    free(f->data);
    free(f->path);
    memset(f, 0, sizeof *f);
}

const tfm_st_tensor *tfm_st_find(const tfm_st_file *f, const char *name) {
    for (int i = 0; i < f->n; i++)
        if (!strcmp(f->t[i].name, name)) return &f->t[i];
    return NULL;
}

const char *tfm_st_meta_get(const tfm_st_file *f, const char *key) {
    for (int i = 0; i < f->n_meta; i++)
        if (!strcmp(f->meta[i].key, key)) return f->meta[i].value;
    return NULL;
}
