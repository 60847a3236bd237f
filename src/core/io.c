/* tfm io: the binary container (see include/tfm/io.h and docs/FORMAT.md).
 *
 * Saving writes PATH.tmp.PID, flushes and fsyncs it, then renames it over PATH, so a reader sees
 * either the old file or the complete new one; on any failure the temp file is removed.
 * Loading treats the file as untrusted: every count, length and size is validated against the
 * bytes that remain BEFORE anything is read or allocated from it.
 */
#include "tfm/io.h"
#include "tfm/core.h"
#include "core/crc32.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define TFM_MAGIC "TFMC"
#define TFM_VERSION 2u          /* written; version 1 (no checksums) is still read */
#define NAME_MAX_LEN 255
/* smallest possible entry: name length + 1 name byte + dtype + ndim + payload size (+ CRC in v2) */
#define MIN_ENTRY_BYTES_V1 (4u + 1u + 4u + 4u + 8u)
#define MIN_ENTRY_BYTES_V2 (MIN_ENTRY_BYTES_V1 + 4u)

static const char *dtype_name(int dt) {
    switch (dt) {
    case TFM_DT_F32: return "f32";
    case TFM_DT_I32: return "i32";
    case TFM_DT_BYTES: return "bytes";
    case TFM_DT_I8: return "i8";
    default: return "?";
    }
}

/* bytes per element; raw bytes and int8 are not byte-swapped on a big-endian host */
static size_t elem_size(int dt) { return dt == TFM_DT_BYTES || dt == TFM_DT_I8 ? 1 : 4; }

static const char *cname(const tfm_container *c) { return c->path ? c->path : "container"; }

static void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) tfm_fatal("tfm io: out of memory allocating %zu bytes", n);
    return p;
}

/* product of dims * elem size, or 0 with *ok = 0 on overflow */
static size_t shape_bytes(int dtype, int ndim, const int *shape, int *ok) {
    size_t n = elem_size(dtype);
    *ok = 1;
    for (int i = 0; i < ndim; i++) {
        size_t d = (size_t)shape[i];
        if (d != 0 && n > SIZE_MAX / d) { *ok = 0; return 0; }
        n *= d;
    }
    return n;
}

/* Validate an entry description; on error writes a message (without the file prefix) to msg. */
static int entry_valid(const char *name, int dtype, int ndim, const int *shape, size_t nbytes,
                       char *msg, size_t msgn) {
    size_t len = name ? strlen(name) : 0;
    if (len < 1 || len > NAME_MAX_LEN) {
        snprintf(msg, msgn, "entry name length %zu (must be 1..%d)", len, NAME_MAX_LEN);
        return 0;
    }
    if (dtype != TFM_DT_F32 && dtype != TFM_DT_I32 && dtype != TFM_DT_BYTES && dtype != TFM_DT_I8) {
        snprintf(msg, msgn, "entry '%s': unknown dtype %d", name, dtype);
        return 0;
    }
    if (ndim < 0 || ndim > 4) {
        snprintf(msg, msgn, "entry '%s': ndim %d (must be 0..4)", name, ndim);
        return 0;
    }
    for (int i = 0; i < ndim; i++)
        if (shape[i] < 0) {
            snprintf(msg, msgn, "entry '%s': negative dim %d", name, shape[i]);
            return 0;
        }
    if (dtype == TFM_DT_BYTES && ndim != 1) {
        snprintf(msg, msgn, "entry '%s': bytes entry must have ndim 1 (got %d)", name, ndim);
        return 0;
    }
    int ok;
    size_t want = shape_bytes(dtype, ndim, shape, &ok);
    if (!ok) {
        snprintf(msg, msgn, "entry '%s': shape too large", name);
        return 0;
    }
    if (want != nbytes) {
        snprintf(msg, msgn, "entry '%s': %zu bytes given, shape needs %zu", name, nbytes, want);
        return 0;
    }
    return 1;
}

/* ------------------------------------------------------------------ container */

void tfm_container_init(tfm_container *c) {
    c->e = NULL;
    c->n = c->cap = 0;
    c->path = NULL;
    c->file = NULL;
    c->int8_only = 0;
}

void tfm_container_free(tfm_container *c) {
    for (int i = 0; i < c->n; i++) free(c->e[i].data);
    free(c->e);
    free(c->path);
    if (c->file) fclose(c->file);
    tfm_container_init(c);
}

tfm_entry *tfm_container_get(const tfm_container *c, const char *name) {
    for (int i = 0; i < c->n; i++)
        if (strcmp(c->e[i].name, name) == 0) return &c->e[i];
    return NULL;
}

int tfm_is_training_entry(const char *name) {
    return !strncmp(name, "adam.", 5) || !strncmp(name, "train.", 6) || !strncmp(name, "run.", 4);
}

/* Append an entry taking ownership of buf (nbytes + 1 bytes, last one 0). */
static tfm_entry *append_entry(tfm_container *c, const char *name, int dtype, int ndim, const int *shape,
                               void *buf, size_t nbytes) {
    if (c->n == c->cap) {
        int ncap = c->cap ? 2 * c->cap : 16;
        tfm_entry *ne = realloc(c->e, (size_t)ncap * sizeof *ne);
        if (!ne) tfm_fatal("tfm io: out of memory growing container to %d entries", ncap);
        c->e = ne;
        c->cap = ncap;
    }
    tfm_entry *e = &c->e[c->n++];
    memset(e, 0, sizeof *e);
    memcpy(e->name, name, strlen(name) + 1);
    e->dtype = dtype;
    e->ndim = ndim;
    for (int i = 0; i < ndim; i++) e->shape[i] = shape[i];
    e->nbytes = nbytes;
    e->data = buf;
    return e;
}

tfm_entry *tfm_container_add(tfm_container *c, const char *name, int dtype, int ndim, const int *shape,
                             const void *data, size_t nbytes) {
    char msg[400];
    if (!entry_valid(name, dtype, ndim, shape, nbytes, msg, sizeof msg)) {
        tfm_set_error("%s: cannot add: %s", cname(c), msg);
        return NULL;
    }
    if (nbytes == SIZE_MAX) tfm_fatal("tfm io: entry '%s' too large", name);
    unsigned char *buf = xmalloc(nbytes + 1);
    if (nbytes) {
        if (data) memcpy(buf, data, nbytes);
        else memset(buf, 0, nbytes);
    }
    buf[nbytes] = 0;
    tfm_entry *old = tfm_container_get(c, name);
    if (old) {   /* replace in place, keeping the entry's position */
        free(old->data);
        old->dtype = dtype;
        old->ndim = ndim;
        memset(old->shape, 0, sizeof old->shape);
        for (int i = 0; i < ndim; i++) old->shape[i] = shape[i];
        old->nbytes = nbytes;
        old->data = buf;
        return old;
    }
    return append_entry(c, name, dtype, ndim, shape, buf, nbytes);
}

tfm_entry *tfm_container_add_f32(tfm_container *c, const char *name, int ndim, const int *shape, const float *data) {
    int ok = 1;
    size_t nb = 0;
    if (ndim >= 0 && ndim <= 4) {
        for (int i = 0; i < ndim; i++)
            if (shape[i] < 0) ok = 0;
        if (ok) nb = shape_bytes(TFM_DT_F32, ndim, shape, &ok);
    }
    if (!ok) nb = SIZE_MAX - 1;  /* let tfm_container_add report the bad shape */
    return tfm_container_add(c, name, TFM_DT_F32, ndim, shape, data, nb);
}

tfm_entry *tfm_container_add_i32(tfm_container *c, const char *name, int n, const int *data) {
    int shape[1] = {n};
    size_t nb = n >= 0 ? (size_t)n * 4 : 0;
    return tfm_container_add(c, name, TFM_DT_I32, 1, shape, data, nb);
}

tfm_entry *tfm_container_add_str(tfm_container *c, const char *name, const char *s) {
    size_t len = strlen(s);
    if (len > INT_MAX) {
        tfm_set_error("%s: cannot add: entry '%s': string too long", cname(c), name);
        return NULL;
    }
    int shape[1] = {(int)len};
    return tfm_container_add(c, name, TFM_DT_BYTES, 1, shape, s, len);
}

tfm_entry *tfm_container_add_int(tfm_container *c, const char *name, int v) {
    int shape[1] = {1};
    int32_t x = (int32_t)v;
    return tfm_container_add(c, name, TFM_DT_I32, 1, shape, &x, 4);
}

tfm_entry *tfm_container_add_float(tfm_container *c, const char *name, float v) {
    int shape[1] = {1};
    return tfm_container_add(c, name, TFM_DT_F32, 1, shape, &v, 4);
}

tfm_entry *tfm_container_add_u64(tfm_container *c, const char *name, uint64_t v) {
    int w[2] = {(int)(uint32_t)(v & 0xffffffffu), (int)(uint32_t)(v >> 32)};
    return tfm_container_add_i32(c, name, 2, w);
}

int tfm_container_u64(const tfm_container *c, const char *name, uint64_t *out) {
    const tfm_entry *e = tfm_container_get(c, name);
    if (!e || e->dtype != TFM_DT_I32 || e->nbytes != 8) {
        tfm_set_error("%s: entry '%s' %s", cname(c), name, e ? "has wrong type (want i32 (2): a 64-bit value)" : "missing");
        return -1;
    }
    uint32_t w[2];
    memcpy(w, e->data, 8);
    *out = (uint64_t)w[0] | (uint64_t)w[1] << 32;
    return 0;
}

int tfm_container_int(const tfm_container *c, const char *name, int *out) {
    const tfm_entry *e = tfm_container_get(c, name);
    if (!e) {
        tfm_set_error("%s: entry '%s' missing", cname(c), name);
        return -1;
    }
    if (e->dtype != TFM_DT_I32 || e->nbytes != 4) {
        tfm_set_error("%s: entry '%s' has wrong type (want i32 scalar, got %s of %zu bytes)", cname(c), name,
                      dtype_name(e->dtype), e->nbytes);
        return -1;
    }
    int32_t v;
    memcpy(&v, e->data, 4);
    *out = (int)v;
    return 0;
}

int tfm_container_float(const tfm_container *c, const char *name, float *out) {
    const tfm_entry *e = tfm_container_get(c, name);
    if (!e) {
        tfm_set_error("%s: entry '%s' missing", cname(c), name);
        return -1;
    }
    if ((e->dtype != TFM_DT_F32 && e->dtype != TFM_DT_I32) || e->nbytes != 4) {
        tfm_set_error("%s: entry '%s' has wrong type (want f32 scalar, got %s of %zu bytes)", cname(c), name,
                      dtype_name(e->dtype), e->nbytes);
        return -1;
    }
    if (e->dtype == TFM_DT_F32) {
        memcpy(out, e->data, 4);
    } else {
        int32_t v;
        memcpy(&v, e->data, 4);
        *out = (float)v;
    }
    return 0;
}

const char *tfm_container_str(const tfm_container *c, const char *name) {
    const tfm_entry *e = tfm_container_get(c, name);
    if (!e) {
        tfm_set_error("%s: entry '%s' missing", cname(c), name);
        return NULL;
    }
    if (e->dtype != TFM_DT_BYTES) {
        tfm_set_error("%s: entry '%s' has wrong type (want bytes, got %s)", cname(c), name, dtype_name(e->dtype));
        return NULL;
    }
    return (const char *)e->data;
}

/* ------------------------------------------------------------------ byte order */

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define TFM_HOST_BE 1
#else
#define TFM_HOST_BE 0
#endif

static void put_u32(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)v; p[1] = (unsigned char)(v >> 8);
    p[2] = (unsigned char)(v >> 16); p[3] = (unsigned char)(v >> 24);
}
static void put_u64(unsigned char *p, uint64_t v) {
    put_u32(p, (uint32_t)v);
    put_u32(p + 4, (uint32_t)(v >> 32));
}
static uint32_t get_u32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t get_u64(const unsigned char *p) {
    return (uint64_t)get_u32(p) | (uint64_t)get_u32(p + 4) << 32;
}

#if TFM_HOST_BE
static void swap32_buf(void *buf, size_t nbytes) {
    unsigned char *p = buf;
    for (size_t i = 0; i + 3 < nbytes; i += 4) {
        unsigned char t0 = p[i], t1 = p[i + 1];
        p[i] = p[i + 3]; p[i + 1] = p[i + 2]; p[i + 2] = t1; p[i + 3] = t0;
    }
}
#endif

/* ------------------------------------------------------------------ CRC-32 (core/crc32.c) */

/* The tables (8 KB) are built on the stack once per save or load (no global state; ~4k operations). */

uint32_t tfm_crc32(uint32_t crc, const void *buf, size_t n) {
    tfm_crc_table tb;
    tfm_crc_init_(&tb, 1);
    return tfm_crc_update_(&tb, crc, buf, n);
}

/* ------------------------------------------------------------------ save */

static int write_all(FILE *f, const void *p, size_t n) { return n == 0 || fwrite(p, 1, n, f) == n; }

/* write n bytes and fold them into the entry's running CRC */
static int write_crc(FILE *f, const tfm_crc_table *tb, uint32_t *crc, const void *p, size_t n) {
    *crc = tfm_crc_update_(tb, *crc, p, n);
    return write_all(f, p, n);
}

static int write_payload(FILE *f, const tfm_crc_table *tb, uint32_t *crc, const tfm_entry *e) {
#if TFM_HOST_BE
    if (elem_size(e->dtype) == 4) {
        unsigned char tmp[4096];
        const unsigned char *src = e->data;
        for (size_t off = 0; off < e->nbytes; off += sizeof tmp) {
            size_t n = e->nbytes - off < sizeof tmp ? e->nbytes - off : sizeof tmp;
            memcpy(tmp, src + off, n);
            swap32_buf(tmp, n);
            if (!write_crc(f, tb, crc, tmp, n)) return 0;
        }
        return 1;
    }
#endif
    return write_crc(f, tb, crc, e->data, e->nbytes);
}

/* v2: every entry ends with the CRC-32 of all its bytes (name length through payload) */
static int write_container(FILE *f, const tfm_container *c) {
    tfm_crc_table tb;
    tfm_crc_init_(&tb, 1);
    unsigned char hdr[12];
    memcpy(hdr, TFM_MAGIC, 4);
    put_u32(hdr + 4, TFM_VERSION);
    put_u32(hdr + 8, (uint32_t)c->n);
    if (!write_all(f, hdr, sizeof hdr)) return 0;
    for (int i = 0; i < c->n; i++) {
        const tfm_entry *e = &c->e[i];
        unsigned char b[8 + 4 * 4 + 8];
        uint32_t crc = 0;
        uint32_t len = (uint32_t)strlen(e->name);
        put_u32(b, len);
        if (!write_crc(f, &tb, &crc, b, 4) || !write_crc(f, &tb, &crc, e->name, len)) return 0;
        size_t k = 0;
        put_u32(b + k, (uint32_t)e->dtype); k += 4;
        put_u32(b + k, (uint32_t)e->ndim); k += 4;
        for (int d = 0; d < e->ndim; d++) { put_u32(b + k, (uint32_t)e->shape[d]); k += 4; }
        put_u64(b + k, (uint64_t)e->nbytes); k += 8;
        if (!write_crc(f, &tb, &crc, b, k) || !write_payload(f, &tb, &crc, e)) return 0;
        put_u32(b, crc);
        if (!write_all(f, b, 4)) return 0;
    }
    return 1;
}

static int write_container_fn(FILE *f, const void *c) { return write_container(f, c); }

int tfm_container_save(const tfm_container *c, const char *path) {
    char msg[400];
    for (int i = 0; i < c->n; i++) {
        const tfm_entry *e = &c->e[i];
        if (!entry_valid(e->name, e->dtype, e->ndim, e->shape, e->nbytes, msg, sizeof msg)) {
            tfm_set_error("%s: cannot save: %s", path, msg);
            return -1;
        }
        for (int j = 0; j < i; j++)
            if (strcmp(c->e[j].name, e->name) == 0) {
                tfm_set_error("%s: cannot save: duplicate entry '%s'", path, e->name);
                return -1;
            }
    }
    return tfm_save_atomic(path, write_container_fn, c);
}

int tfm_save_atomic(const char *path, int (*write)(FILE *f, const void *ctx), const void *ctx) {
    size_t plen = strlen(path);
    char *tmp = malloc(plen + 32);
    if (!tmp) return tfm_set_error_kind(TFM_ERR_NOMEM, "%s: out of memory", path), -1;
    snprintf(tmp, plen + 32, "%s.tmp.%ld", path, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        tfm_set_error_kind(TFM_ERR_IO, "%s: cannot create %s: %s", path, tmp, strerror(errno));
        free(tmp);
        return -1;
    }
    FILE *f = fdopen(fd, "wb");
    if (!f) {
        int err = errno;
        close(fd);
        unlink(tmp);
        tfm_set_error_kind(TFM_ERR_IO, "%s: cannot open %s: %s", path, tmp, strerror(err));
        free(tmp);
        return -1;
    }
    const char *what = NULL;
    int err = 0;
    if (!write(f, ctx)) { what = "write"; err = errno; }
    else if (fflush(f) != 0) { what = "write"; err = errno; }
    else if (fsync(fileno(f)) != 0) { what = "fsync"; err = errno; }
    if (fclose(f) != 0 && !what) { what = "close"; err = errno; }
    if (!what && rename(tmp, path) != 0) { what = "rename"; err = errno; }
    if (what) {
        unlink(tmp);
        tfm_set_error_kind(TFM_ERR_IO, "%s: save failed (%s %s): %s", path, what, tmp, err ? strerror(err) : "I/O error");
        free(tmp);
        return -1;
    }
    free(tmp);
    /* best effort: make the rename durable */
    char *dir = malloc(plen + 2);
    if (!dir) return 0;
    memcpy(dir, path, plen + 1);
    char *slash = strrchr(dir, '/');
    if (!slash) strcpy(dir, ".");
    else if (slash == dir) dir[1] = 0;
    else *slash = 0;
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        (void)fsync(dfd);
        close(dfd);
    }
    free(dir);
    return 0;
}

/* ------------------------------------------------------------------ load */

typedef struct {
    FILE *f;
    const char *path;
    uint64_t left;     /* bytes not yet consumed */
    tfm_crc_table tb;
    uint32_t crc;      /* running CRC of the current entry's bytes */
    const char *skip;  /* entries whose name starts with this are read and verified, not kept (NULL: none) */
    const char *defer; /* float32 entries whose name starts with this stay in the file (NULL: none) */
    uint64_t size;     /* the stream's bytes */
    int n_deferred;
} reader;

/* read n bytes (caller has checked n <= left) and fold them into the running CRC */
static int rd(reader *r, void *p, size_t n) {
    if (n && fread(p, 1, n, r->f) != n) {
        tfm_set_error_kind(ferror(r->f) ? TFM_ERR_IO : TFM_ERR_DATA, "%s: read error (file changed or I/O error): %s", r->path,
                      ferror(r->f) ? strerror(errno) : "unexpected end of file");
        return 0;
    }
    r->left -= n;
    r->crc = tfm_crc_update_(&r->tb, r->crc, p, n);
    return 1;
}

/* read n bytes (caller has checked n <= left) through a small buffer, into the running CRC only: a
 * skipped entry's payload is verified like any other, without holding it in memory */
static int pass_over(reader *r, uint64_t n) {
    unsigned char buf[1 << 16];
    while (n) {
        size_t k = n < sizeof buf ? (size_t)n : sizeof buf;
        if (!rd(r, buf, k)) return 0;
        n -= k;
    }
    return 1;
}

/* need n bytes for `what`; sets a "truncated" error if they are not there */
static int need(reader *r, uint64_t n, const char *what_fmt, const char *arg) {
    if (n <= r->left) return 1;
    char what[320];
    snprintf(what, sizeof what, what_fmt, arg);
    tfm_set_error("%s: truncated: %s needs %llu bytes, %llu left", r->path, what, (unsigned long long)n,
                  (unsigned long long)r->left);
    return 0;
}

/* v2: the u32 after the payload must equal the CRC-32 of the entry's bytes read so far */
static int check_crc(reader *r, const char *name) {
    unsigned char b[4];
    uint32_t want = r->crc;
    if (!need(r, 4, "entry '%s' checksum", name) || !rd(r, b, 4)) return 0;
    uint32_t got = get_u32(b);
    if (got != want) {
        tfm_set_error("%s: entry '%s': checksum mismatch (stored crc32 %08x, computed %08x): the file is "
                      "corrupt", r->path, name, got, want);
        return 0;
    }
    return 1;
}

/* A deferred entry: its payload (checked to fit, by the caller) is stepped over; where it starts, the CRC of
 * the entry's header and the stored CRC are kept for tfm_container_read. */
static int defer_payload(reader *r, tfm_container *c, const char *name, int dtype, int ndim, const int *shape,
                         uint64_t nbytes, uint32_t version) {
    uint64_t off = r->size - r->left;
    uint32_t seed = r->crc;
    if (nbytes > (uint64_t)INT64_MAX || fseeko(r->f, (off_t)nbytes, SEEK_CUR) != 0) {
        tfm_set_error_kind(TFM_ERR_IO, "%s: entry '%s': cannot seek past its %llu bytes: %s", r->path, name,
                           (unsigned long long)nbytes, strerror(errno));
        return 0;
    }
    r->left -= nbytes;
    unsigned char b[4];
    if (version >= 2 && (!need(r, 4, "entry '%s' checksum", name) || !rd(r, b, 4))) return 0;
    tfm_entry *e = append_entry(c, name, dtype, ndim, shape, NULL, (size_t)nbytes);
    e->deferred = version >= 2 ? 2 : 1;
    e->file_off = off;
    e->crc_seed = seed;
    e->crc_want = version >= 2 ? get_u32(b) : 0;
    r->n_deferred++;
    return 1;
}

static int load_entries(tfm_container *c, reader *r) {
    unsigned char hdr[12];
    if (!need(r, 12, "%sheader", "")) return -1;
    if (!rd(r, hdr, 12)) return -1;
    if (memcmp(hdr, TFM_MAGIC, 4) != 0) {
        size_t pl = strlen(r->path);   /* safetensors: a u64 header length, then the JSON header's '{' */
        if (hdr[8] == '{' || (pl >= 12 && !strcmp(r->path + pl - 12, ".safetensors")))
            tfm_set_error("%s: not a tfm checkpoint: a safetensors file? convert it first: tfm import %s --out "
                          "MODEL.tfm", r->path, r->path);
        else
            tfm_set_error("%s: not a tfm file (bad magic)", r->path);
        return -1;
    }
    uint32_t version = get_u32(hdr + 4);
    if (version != 1 && version != TFM_VERSION) {
        tfm_set_error("%s: unsupported version %u (expected 1 or %u)", r->path, version, TFM_VERSION);
        return -1;
    }
    uint32_t count = get_u32(hdr + 8);
    uint64_t max_count = r->left / (version == 1 ? MIN_ENTRY_BYTES_V1 : MIN_ENTRY_BYTES_V2);
    if (count > max_count || count > (uint32_t)INT_MAX) {
        tfm_set_error("%s: bad entry count %u: the %llu bytes that follow hold at most %llu entries "
                      "(truncated or corrupt)", r->path, count, (unsigned long long)r->left,
                      (unsigned long long)max_count);
        return -1;
    }
    for (uint32_t i = 0; i < count; i++) {
        char idx[32], name[NAME_MAX_LEN + 1];
        unsigned char b[8];
        snprintf(idx, sizeof idx, "entry #%u", i);
        r->crc = 0;
        if (!need(r, 4, "%s name length", idx) || !rd(r, b, 4)) return -1;
        uint32_t len = get_u32(b);
        if (len < 1 || len > NAME_MAX_LEN) {
            tfm_set_error("%s: %s: bad name length %u (must be 1..%d)", r->path, idx, len, NAME_MAX_LEN);
            return -1;
        }
        if (!need(r, len, "%s name", idx) || !rd(r, name, len)) return -1;
        name[len] = 0;
        if (memchr(name, 0, len)) {
            tfm_set_error("%s: %s: name contains a NUL byte", r->path, idx);
            return -1;
        }
        if (tfm_container_get(c, name)) {
            tfm_set_error("%s: duplicate entry '%s'", r->path, name);
            return -1;
        }
        if (!need(r, 8, "entry '%s' dtype/ndim", name) || !rd(r, b, 8)) return -1;
        uint32_t dtype = get_u32(b), ndim = get_u32(b + 4);
        if (dtype > TFM_DT_I8) {
            tfm_set_error("%s: entry '%s': unknown dtype %u", r->path, name, dtype);
            return -1;
        }
        if (ndim > 4) {
            tfm_set_error("%s: entry '%s': bad ndim %u (must be 0..4)", r->path, name, ndim);
            return -1;
        }
        if (dtype == TFM_DT_BYTES && ndim != 1) {
            tfm_set_error("%s: entry '%s': bytes entry must have ndim 1 (got %u)", r->path, name, ndim);
            return -1;
        }
        int shape[4] = {0, 0, 0, 0};
        uint64_t want = elem_size((int)dtype);
        int overflow = 0;
        for (uint32_t d = 0; d < ndim; d++) {
            if (!need(r, 4, "entry '%s' dims", name) || !rd(r, b, 4)) return -1;
            uint32_t v = get_u32(b);
            if (v > (uint32_t)INT_MAX) {
                tfm_set_error("%s: entry '%s': dim %u is %u (must be 0..%d)", r->path, name, d, v, INT_MAX);
                return -1;
            }
            shape[d] = (int)v;
            if (v && want > UINT64_MAX / v) overflow = 1;
            else want *= v;
        }
        if (overflow || want > (uint64_t)SIZE_MAX - 1) {
            tfm_set_error("%s: entry '%s': shape too large (element count overflows)", r->path, name);
            return -1;
        }
        if (!need(r, 8, "entry '%s' payload size", name) || !rd(r, b, 8)) return -1;
        uint64_t nbytes = get_u64(b);
        if (nbytes != want) {
            tfm_set_error("%s: entry '%s': size mismatch: header says %llu bytes, %s shape needs %llu", r->path,
                          name, (unsigned long long)nbytes, dtype_name((int)dtype), (unsigned long long)want);
            return -1;
        }
        if (!need(r, nbytes, "entry '%s'", name)) return -1;
        if (r->skip && !strncmp(name, r->skip, strlen(r->skip))) {
            if (!pass_over(r, nbytes) || (version >= 2 && !check_crc(r, name))) return -1;
            continue;
        }
        if (r->defer && (dtype == TFM_DT_F32 || dtype == TFM_DT_I8) && !strncmp(name, r->defer, strlen(r->defer))) {
            if (!defer_payload(r, c, name, (int)dtype, (int)ndim, shape, nbytes, version)) return -1;
            continue;
        }
        unsigned char *buf = xmalloc((size_t)nbytes + 1);
        if (!rd(r, buf, (size_t)nbytes)) {
            free(buf);
            return -1;
        }
        buf[nbytes] = 0;
        if (version >= 2 && !check_crc(r, name)) {
            free(buf);
            return -1;
        }
#if TFM_HOST_BE
        if (elem_size((int)dtype) == 4) swap32_buf(buf, (size_t)nbytes);
#endif
        append_entry(c, name, (int)dtype, (int)ndim, shape, buf, (size_t)nbytes);
    }
    if (r->left != 0) {
        tfm_set_error("%s: %llu trailing bytes after the last entry", r->path, (unsigned long long)r->left);
        return -1;
    }
    return 0;
}

/* parse the whole stream f of `size` bytes into c, which gets `path` as its name; *n_deferred: the entries
 * left in the file (defer: see tfm_container_load_deferred) */
static int load_stream(tfm_container *c, FILE *f, uint64_t size, const char *path, const char *skip, const char *defer,
                       int *n_deferred) {
    reader r;
    memset(&r, 0, sizeof r);
    r.f = f;
    r.path = path;
    r.left = r.size = size;
    r.skip = skip && *skip ? skip : NULL;
    r.defer = defer && *defer ? defer : NULL;
    tfm_crc_init_(&r.tb, 1);
    int rc = load_entries(c, &r);
    if (rc != 0) {
        tfm_container_free(c);
        return -1;
    }
    size_t plen = strlen(path);
    c->path = xmalloc(plen + 1);
    memcpy(c->path, path, plen + 1);
    *n_deferred = r.n_deferred;
    return 0;
}

int tfm_container_load(tfm_container *c, const char *path) { return tfm_container_load_except(c, path, NULL); }

int tfm_container_load_except(tfm_container *c, const char *path, const char *skip_prefix) {
    return tfm_container_load_deferred(c, path, skip_prefix, NULL);
}

int tfm_container_load_deferred(tfm_container *c, const char *path, const char *skip_prefix,
                                const char *defer_prefix) {
    tfm_container_init(c);
    FILE *f = fopen(path, "rb");
    if (!f) {
        tfm_set_error_kind(TFM_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fileno(f), &st) != 0) {
        tfm_set_error_kind(TFM_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
        fclose(f);
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        tfm_set_error_kind(TFM_ERR_IO, "%s: not a regular file", path);
        fclose(f);
        return -1;
    }
    int n_deferred = 0;
    int rc = load_stream(c, f, (uint64_t)st.st_size, path, skip_prefix, defer_prefix, &n_deferred);
    if (!rc && n_deferred) c->file = f;   /* read from by tfm_container_read, closed by tfm_container_free */
    else fclose(f);
    return rc ? tfm_error_in_data() : 0;   /* truncated, bad magic, CRC, sizes */
}

int tfm_container_read(const tfm_container *c, const tfm_entry *e, void *dst) {
    if (!e->deferred) {
        if (e->nbytes) memcpy(dst, e->data, e->nbytes);
        return 0;
    }
    const char *path = cname(c);
    if (!c->file) return tfm_set_error("%s: entry '%s': its file is closed", path, e->name), -1;
    int fd = fileno(c->file);
    unsigned char *p = dst;
    for (size_t done = 0; done < e->nbytes;) {   /* pread: the FILE's position is not touched */
        ssize_t k = pread(fd, p + done, e->nbytes - done, (off_t)(e->file_off + done));
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0)
            return tfm_set_error_kind(k < 0 ? TFM_ERR_IO : TFM_ERR_DATA, "%s: entry '%s': read error (file changed "
                                      "or I/O error): %s", path, e->name, k < 0 ? strerror(errno)
                                      : "unexpected end of file"), -1;
        done += (size_t)k;
    }
    if (e->deferred == 2) {
        tfm_crc_table tb;
        tfm_crc_init_(&tb, 1);
        uint32_t got = tfm_crc_update_(&tb, e->crc_seed, dst, e->nbytes);
        if (got != e->crc_want)
            return tfm_set_error_kind(TFM_ERR_DATA, "%s: entry '%s': checksum mismatch (stored crc32 %08x, computed "
                                      "%08x): the file is corrupt", path, e->name, e->crc_want, got), -1;
    }
#if TFM_HOST_BE
    swap32_buf(dst, e->nbytes);
#endif
    return 0;
}

int tfm_container_load_mem(tfm_container *c, const void *data, size_t n, const char *name) {
    tfm_container_init(c);
    if (n == 0) {   /* fmemopen refuses a zero-length buffer */
        tfm_set_error_kind(TFM_ERR_DATA, "%s: truncated: header needs 12 bytes, 0 left", name);
        return -1;
    }
    FILE *f = fmemopen((void *)data, n, "rb");
    if (!f) {
        tfm_set_error_kind(TFM_ERR_IO, "%s: cannot open memory buffer: %s", name, strerror(errno));
        return -1;
    }
    int n_deferred;
    int rc = load_stream(c, f, (uint64_t)n, name, NULL, NULL, &n_deferred);
    if (rc) tfm_error_in_data();
    fclose(f);
    return rc;
}

/* ------------------------------------------------------------------ the files of a command */

/* A file's identity after following links: its own device and inode when it exists, else its directory's
 * and its name (two outputs that do not exist yet are the same file when both match). */
typedef struct {
    int exists;
    dev_t dev;
    ino_t ino;
    const char *name;
} file_id;

#define PATH_BUF 4096

/* the directory part of path: "." without a slash, "/" for "/x" */
static void dir_of(const char *path, char *dir) {
    const char *slash = strrchr(path, '/');
    if (!slash) snprintf(dir, PATH_BUF, ".");
    else snprintf(dir, PATH_BUF, "%.*s", slash == path ? 1 : (int)(slash - path), path);
}

static int identify(const char *path, file_id *id) {
    struct stat st;
    memset(id, 0, sizeof *id);
    if (strlen(path) >= PATH_BUF) return -1;
    if (!stat(path, &st)) {
        *id = (file_id){1, st.st_dev, st.st_ino, NULL};
        return 0;
    }
    char dir[PATH_BUF];
    dir_of(path, dir);
    if (stat(dir, &st)) return -1;   /* no directory: it cannot be any other file */
    const char *slash = strrchr(path, '/');
    *id = (file_id){0, st.st_dev, st.st_ino, slash ? slash + 1 : path};
    return 0;
}

static int same_file(const file_id *a, const file_id *b) {
    if (a->exists != b->exists || a->dev != b->dev || a->ino != b->ino) return 0;
    return a->exists || !strcmp(a->name, b->name);
}

static int is_output(tfm_file_role r) { return r == TFM_FILE_OUT || r == TFM_FILE_OUT_STREAM; }

/* an output's own checks: a name, not a directory, a directory that takes the file */
static int check_output(const tfm_file_use *f) {
    const char *p = f->path;
    size_t len = strlen(p);
    if (!len) return tfm_set_error("%s: empty path (give a file name)", f->what), -1;
    if (len >= PATH_BUF) return tfm_set_error("%s: path longer than %d bytes", f->what, PATH_BUF - 1), -1;
    if (p[len - 1] == '/') return tfm_set_error("%s %s names a directory (give a file name)", f->what, p), -1;
    struct stat st;
    int exists = !stat(p, &st);
    if (exists && S_ISDIR(st.st_mode)) return tfm_set_error("%s %s is a directory (give a file name)", f->what, p), -1;
    if (exists && !S_ISREG(st.st_mode)) {
        if (f->role == TFM_FILE_OUT)
            return tfm_set_error("%s %s is not a regular file (an output is written to a temporary file, then "
                                 "renamed over it)", f->what, p), -1;
        if (access(p, W_OK))   /* a log into a device or FIFO */
            return tfm_set_error_kind(TFM_ERR_IO, "cannot write %s: %s", p, strerror(errno)), -1;
        return 0;
    }
    char dir[PATH_BUF];
    dir_of(p, dir);
    if (stat(dir, &st))
        return tfm_set_error_kind(TFM_ERR_IO, "cannot write %s: directory %s: %s", p, dir, strerror(errno)), -1;
    if (!S_ISDIR(st.st_mode))
        return tfm_set_error_kind(TFM_ERR_IO, "cannot write %s: %s is not a directory", p, dir), -1;
    if (access(dir, W_OK | X_OK))
        return tfm_set_error_kind(TFM_ERR_IO, "cannot write %s: directory %s: %s", p, dir, strerror(errno)), -1;
    if (exists && access(p, W_OK)) return tfm_set_error_kind(TFM_ERR_IO, "cannot write %s: %s", p, strerror(errno)), -1;
    return 0;
}

int tfm_check_files(const tfm_file_use *f, int n) {
    for (int i = 0; i < n; i++)
        if (f[i].path && is_output(f[i].role) && check_output(&f[i])) return -1;
    for (int i = 0; i < n; i++) {
        file_id a, b;
        if (!f[i].path || !is_output(f[i].role) || identify(f[i].path, &a)) continue;
        for (int j = 0; j < n; j++) {
            if (j == i || !f[j].path || (is_output(f[j].role) && j < i)) continue;   /* each pair of outputs once */
            if (identify(f[j].path, &b) || !same_file(&a, &b)) continue;
            if (f[i].role == TFM_FILE_OUT && f[j].role == TFM_FILE_IN_PLACE) continue;
            if (is_output(f[j].role))
                return tfm_set_error("%s %s and %s %s are the same file: give each output its own name", f[i].what,
                                     f[i].path, f[j].what, f[j].path), -1;
            return tfm_set_error("%s %s is the input file %s (%s): refusing to overwrite it", f[i].what, f[i].path,
                                 f[j].path, f[j].what), -1;
        }
    }
    return 0;
}
