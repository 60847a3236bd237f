/* test_io: the binary container — round trip, atomic save, and rejection of every kind of
 * corrupt file (truncation at every offset, bad header fields, bad entries, trailing bytes). */
#include "check.h"
#include "tfm/core.h"
#include "tfm/io.h"
#include "core/crc32.h"

#include <dirent.h>
#include <string.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[256];   /* per-run scratch directory */

static const char *tpath(const char *name) {
    static char buf[8][512];
    static int k = 0;
    k = (k + 1) % 8;
    snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
    return buf[k];
}

static void write_file(const char *p, const unsigned char *b, size_t n) {
    FILE *f = fopen(p, "wb");
    if (!f) { perror(p); exit(2); }
    if (n) fwrite(b, 1, n, f);
    fclose(f);
}

static void put_u32(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)v; p[1] = (unsigned char)(v >> 8);
    p[2] = (unsigned char)(v >> 16); p[3] = (unsigned char)(v >> 24);
}

static uint32_t get_u32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* A valid version-2 file rewritten as version 1 (each entry's trailing CRC-32 dropped); returns
 * the new length. out must hold n bytes. */
static size_t to_v1(const unsigned char *raw, size_t n, unsigned char *out) {
    memcpy(out, raw, 12);
    put_u32(out + 4, 1);
    size_t k = 12, pos = 12;
    for (uint32_t i = 0; i < get_u32(raw + 8); i++) {
        size_t len = 4 + get_u32(raw + pos);
        uint32_t ndim = get_u32(raw + pos + len + 4);
        len += 8 + 4 * (size_t)ndim;
        uint64_t nb = (uint64_t)get_u32(raw + pos + len) | (uint64_t)get_u32(raw + pos + len + 4) << 32;
        len += 8 + (size_t)nb;
        memcpy(out + k, raw + pos, len);
        k += len;
        pos += len + 4;
    }
    if (pos != n) return 0;
    return k;
}

/* number of files in dir whose name contains ".tmp." */
static int count_tmp(const char *d) {
    DIR *dp = opendir(d);
    if (!dp) return -1;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(dp)))
        if (strstr(de->d_name, ".tmp.")) n++;
    closedir(dp);
    return n;
}

/* Load must fail, the message must name the file and contain `what`, the container must be empty. */
static void expect_fail(const char *label, const char *path, const char *what) {
    tfm_container c;
    int rc = tfm_container_load(&c, path);
    const char *err = tfm_last_error();
    int ok = rc == -1 && c.n == 0 && c.e == NULL && strstr(err, path) && strstr(err, what) && !strchr(err, '\n');
    CHECK(label, ok, "rc=%d n=%d err='%s' (want '%s')", rc, c.n, err, what);
    if (ok) printf("#   %s\n", err);
    tfm_container_free(&c);
}

/* small file used by the corruption tests:
 *   entry 0 "w": f32 (2,3)  -> header at 12: len(4) name(1) dtype(4) ndim(4) dims(8) size(8) payload(24)
 *   entry 1 "ids": i32 (4)
 *   entry 2 "s": bytes "hello" */
#define OFF_E0_NAMELEN 12
#define OFF_E0_NAME 16
#define OFF_E0_DTYPE 17
#define OFF_E0_NDIM 21
#define OFF_E0_DIM0 25
#define OFF_E0_SIZE 33
#define OFF_E0_END (41 + 24 + 4)   /* payload, then the entry's CRC-32 */
static void make_small(tfm_container *c) {
    tfm_container_init(c);
    float w[6] = {1.5f, -2.0f, 3.25f, 0.0f, -0.125f, 1e-3f};
    int shape[2] = {2, 3};
    int ids[4] = {7, -1, 0, 2147483647};
    tfm_container_add_f32(c, "w", 2, shape, w);
    tfm_container_add_i32(c, "ids", 4, ids);
    tfm_container_add_str(c, "s", "hello");
}

static void test_round_trip(void) {
    tfm_container c;
    tfm_container_init(&c);
    float a[2 * 3 * 4 * 5];
    for (int i = 0; i < 120; i++) a[i] = (float)i * 0.37f - 11.0f;
    int s4[4] = {2, 3, 4, 5};
    int ids[3] = {-5, 0, 123456};
    int s0[1] = {0};
    float scal = 3.14159f;
    CHECK("add_f32 4d", tfm_container_add_f32(&c, "blocks.0.attn.W_q.weight", 4, s4, a) != NULL, "NULL");
    tfm_container_add_i32(&c, "tokens", 3, ids);
    tfm_container_add_str(&c, "vocab", "ab\ncd\xc3\xa9");
    tfm_container_add_int(&c, "config.n_layer", 6);
    tfm_container_add_float(&c, "opt.lr", 1e-3f);
    tfm_container_add(&c, "scalar0d", TFM_DT_F32, 0, NULL, &scal, 4);
    tfm_container_add_f32(&c, "empty", 1, s0, NULL);
    tfm_container_add_str(&c, "emptystr", "");
    char longname[256];
    memset(longname, 'n', 255);
    longname[255] = 0;
    tfm_container_add_int(&c, longname, -42);
    int8_t q[2 * 5] = {-128, -127, -1, 0, 1, 2, 63, 64, 126, 127};   /* int8 (tfm quantize): one byte each */
    int s2[2] = {2, 5};
    CHECK("add i8 2d", tfm_container_add(&c, "param.q", TFM_DT_I8, 2, s2, q, sizeof q) != NULL, "%s", tfm_last_error());
    /* replace keeps one entry */
    tfm_container_add_int(&c, "config.n_layer", 2);
    CHECK("add replaces same name", c.n == 10, "n=%d", c.n);
    /* invalid adds are refused */
    int bad_shape[1] = {3};
    CHECK("add refuses nbytes mismatch", tfm_container_add(&c, "bad", TFM_DT_F32, 1, bad_shape, a, 8) == NULL &&
          strstr(tfm_last_error(), "bad"), "err=%s", tfm_last_error());
    CHECK("add refuses empty name", tfm_container_add_int(&c, "", 1) == NULL, "accepted");
    char toolong[300];
    memset(toolong, 'x', 299);
    toolong[299] = 0;
    CHECK("add refuses 299-char name", tfm_container_add_int(&c, toolong, 1) == NULL, "accepted");
    CHECK("add refuses ndim 5", tfm_container_add(&c, "x5", TFM_DT_F32, 5, s4, a, 4) == NULL, "accepted");
    CHECK("add refuses bad dtype", tfm_container_add(&c, "xd", 9, 1, bad_shape, a, 12) == NULL, "accepted");
    CHECK("add refuses i8 nbytes mismatch (4 bytes a value)", tfm_container_add(&c, "xq", TFM_DT_I8, 2, s2, q, 40) == NULL &&
          strstr(tfm_last_error(), "shape needs 10"), "err=%s", tfm_last_error());
    CHECK("container unchanged by refused adds", c.n == 10, "n=%d", c.n);

    const char *p = tpath("rt.tfm");
    int rc = tfm_container_save(&c, p);
    CHECK("save ok", rc == 0, "%s", tfm_last_error());
    CHECK("save leaves no temp file", count_tmp(dir) == 0, "%d temp files", count_tmp(dir));
    size_t n;
    unsigned char *raw = check_read_file(p, &n);
    CHECK("file starts with magic TFMC, version 2 LE, count 10",
          raw && n > 12 && memcmp(raw, "TFMC", 4) == 0 && raw[4] == 2 && raw[5] == 0 && raw[6] == 0 &&
          raw[7] == 0 && raw[8] == 10 && raw[9] == 0, "bad header");
    free(raw);

    tfm_container d;
    rc = tfm_container_load(&d, p);
    CHECK("load ok", rc == 0, "%s", tfm_last_error());
    int same = d.n == c.n;
    for (int i = 0; same && i < c.n; i++) {
        tfm_entry *x = &c.e[i], *y = &d.e[i];
        same = strcmp(x->name, y->name) == 0 && x->dtype == y->dtype && x->ndim == y->ndim &&
               x->nbytes == y->nbytes && memcmp(x->shape, y->shape, sizeof x->shape) == 0 &&
               (x->nbytes == 0 || memcmp(x->data, y->data, x->nbytes) == 0) &&
               ((unsigned char *)y->data)[y->nbytes] == 0;
        if (!same) printf("# mismatch at entry %d '%s'\n", i, x->name);
    }
    CHECK("round trip: names, order, dtypes, shapes, bytes identical", same, "differs");
    int v = 0;
    float fv = 0;
    CHECK("get int", tfm_container_int(&d, "config.n_layer", &v) == 0 && v == 2, "v=%d", v);
    CHECK("get int (long name)", tfm_container_int(&d, longname, &v) == 0 && v == -42, "v=%d", v);
    CHECK("get float", tfm_container_float(&d, "opt.lr", &fv) == 0 && fv == 1e-3f, "fv=%g", fv);
    CHECK("get float accepts i32 scalar", tfm_container_float(&d, "config.n_layer", &fv) == 0 && fv == 2.0f,
          "fv=%g", fv);
    CHECK("get float 0-d", tfm_container_float(&d, "scalar0d", &fv) == 0 && fv == scal, "fv=%g", fv);
    const char *s = tfm_container_str(&d, "vocab");
    CHECK("get str", s && strcmp(s, "ab\ncd\xc3\xa9") == 0, "s=%s", s ? s : "(null)");
    s = tfm_container_str(&d, "emptystr");
    CHECK("get empty str", s && s[0] == 0, "bad");
    rc = tfm_container_int(&d, "nope", &v);
    CHECK("missing entry error names file and entry",
          rc == -1 && strstr(tfm_last_error(), p) && strstr(tfm_last_error(), "nope") &&
          strstr(tfm_last_error(), "missing"), "err=%s", tfm_last_error());
    rc = tfm_container_int(&d, "opt.lr", &v);
    CHECK("wrong type error", rc == -1 && strstr(tfm_last_error(), "wrong type") && strstr(tfm_last_error(), p),
          "err=%s", tfm_last_error());
    rc = tfm_container_int(&d, "tokens", &v);
    CHECK("int getter refuses a vector", rc == -1 && strstr(tfm_last_error(), "wrong type"), "rc=%d", rc);
    CHECK("str getter refuses f32", tfm_container_str(&d, "opt.lr") == NULL, "accepted");
    tfm_entry *e = tfm_container_get(&d, "blocks.0.attn.W_q.weight");
    CHECK("get 4d entry", e && e->ndim == 4 && e->shape[3] == 5 && ((float *)e->data)[119] == a[119], "bad");
    e = tfm_container_get(&d, "param.q");
    CHECK("i8 entry round trip (dtype 3, 10 bytes, -128..127 kept)",
          e && e->dtype == TFM_DT_I8 && e->nbytes == 10 && e->shape[0] == 2 && !memcmp(e->data, q, 10), "bad");
    CHECK("int getter refuses an i8 entry", tfm_container_int(&d, "param.q", &v) == -1 &&
          strstr(tfm_last_error(), "got i8"), "err=%s", tfm_last_error());

    /* overwrite an existing file */
    tfm_container_add_int(&d, "config.n_layer", 3);
    rc = tfm_container_save(&d, p);
    tfm_container e2;
    int rc2 = tfm_container_load(&e2, p);
    CHECK("overwrite existing file", rc == 0 && rc2 == 0 && tfm_container_int(&e2, "config.n_layer", &v) == 0 &&
          v == 3, "rc=%d rc2=%d v=%d", rc, rc2, v);
    tfm_container_free(&e2);
    tfm_container_free(&d);
    tfm_container_free(&c);

    /* empty container */
    tfm_container_init(&c);
    rc = tfm_container_save(&c, tpath("empty.tfm"));
    rc2 = tfm_container_load(&d, tpath("empty.tfm"));
    CHECK("empty container round trip", rc == 0 && rc2 == 0 && d.n == 0, "rc=%d rc2=%d", rc, rc2);
    tfm_container_free(&d);
}

static void test_truncation(void) {
    tfm_container c;
    make_small(&c);
    const char *good = tpath("small.tfm");
    tfm_container_save(&c, good);
    tfm_container_free(&c);
    size_t n;
    unsigned char *raw = check_read_file(good, &n);
    const char *p = tpath("trunc.tfm");
    int bad = 0;
    char firstbad[600] = "";
    for (size_t len = 0; len < n; len++) {
        write_file(p, raw, len);
        tfm_container d;
        int rc = tfm_container_load(&d, p);
        const char *err = tfm_last_error();
        /* every proper prefix must be rejected; most as "truncated", except where the cut lands so that
         * the entry count no longer fits (reported as bad entry count) */
        int ok = rc == -1 && d.n == 0 && strstr(err, p) &&
                 (strstr(err, "truncated") || strstr(err, "entry count"));
        if (!ok && !bad++) snprintf(firstbad, sizeof firstbad, "len %zu: rc=%d err=%s", len, rc, err);
        tfm_container_free(&d);
    }
    CHECK("every truncation point rejected", bad == 0, "%d bad, first: %s", bad, firstbad);
    /* the exact message for a truncated payload (single-entry file, so the count check passes) */
    {
        unsigned char *one = malloc(OFF_E0_END);
        memcpy(one, raw, OFF_E0_END);
        put_u32(one + 8, 1);
        write_file(p, one, OFF_E0_END);
        tfm_container d1;
        CHECK("single-entry prefix loads", tfm_container_load(&d1, p) == 0 && d1.n == 1, "%s", tfm_last_error());
        tfm_container_free(&d1);
        write_file(p, one, OFF_E0_END - 8);
        expect_fail("truncated payload message", p, "truncated: entry 'w' needs 24 bytes, 20 left");
        write_file(p, one, OFF_E0_END - 2);
        expect_fail("truncated checksum message", p, "truncated: entry 'w' checksum needs 4 bytes, 2 left");
        put_u32(one + 4, 1);   /* version 1 (no CRC): 24 bytes after the header can hold one entry */
        write_file(p, one, OFF_E0_SIZE + 3);
        expect_fail("truncated size field message (v1)", p, "truncated: entry 'w' payload size needs 8 bytes, 3 left");
        free(one);
    }
    write_file(p, raw, n);
    tfm_container d;
    CHECK("untruncated copy loads", tfm_container_load(&d, p) == 0 && d.n == 3, "%s", tfm_last_error());
    tfm_container_free(&d);
    free(raw);
}

static void test_corruptions(void) {
    size_t n;
    unsigned char *raw = check_read_file(tpath("small.tfm"), &n);
    unsigned char *b = malloc(n + 16);
    const char *p = tpath("bad.tfm");
#define MUTATE(stmt) do { memcpy(b, raw, n); stmt; } while (0)

    MUTATE(b[0] = 'X'); write_file(p, b, n);
    expect_fail("bad magic", p, "not a tfm file (bad magic)");
    MUTATE(put_u32(b + 4, 3)); write_file(p, b, n);
    expect_fail("bad version 3", p, "version 3");
    MUTATE(put_u32(b + 4, 0)); write_file(p, b, n);
    expect_fail("bad version 0", p, "version 0");
    MUTATE(put_u32(b + 8, 0xFFFFFFFFu)); write_file(p, b, n);
    expect_fail("huge entry count", p, "entry count 4294967295");
    MUTATE(put_u32(b + 8, 1000)); write_file(p, b, n);
    expect_fail("entry count 1000", p, "entry count 1000");
    MUTATE(put_u32(b + 8, 4)); write_file(p, b, n);
    expect_fail("entry count one too many", p, "truncated");
    MUTATE(put_u32(b + 8, 2)); write_file(p, b, n);
    expect_fail("entry count one too few -> trailing", p, "trailing");
    MUTATE(put_u32(b + OFF_E0_NAMELEN, 0)); write_file(p, b, n);
    expect_fail("name length 0", p, "bad name length 0");
    MUTATE(put_u32(b + OFF_E0_NAMELEN, 300)); write_file(p, b, n);
    expect_fail("name length 300", p, "bad name length 300");
    MUTATE(put_u32(b + OFF_E0_NAMELEN, 0x7FFFFFFF)); write_file(p, b, n);
    expect_fail("name length huge", p, "bad name length");
    MUTATE(b[OFF_E0_NAME] = 0); write_file(p, b, n);
    expect_fail("name with NUL byte", p, "NUL");
    MUTATE(put_u32(b + OFF_E0_DTYPE, 4)); write_file(p, b, n);
    expect_fail("bad dtype 4", p, "entry 'w': unknown dtype 4");
    MUTATE(put_u32(b + OFF_E0_DTYPE, TFM_DT_I8)); write_file(p, b, n);   /* an f32 payload read as int8 */
    expect_fail("dtype i8 on an f32 payload", p, "entry 'w': size mismatch: header says 24 bytes, i8 shape needs 6");
    MUTATE(put_u32(b + OFF_E0_DTYPE, 0x80000000u)); write_file(p, b, n);
    expect_fail("bad dtype 2^31", p, "unknown dtype");
    MUTATE(put_u32(b + OFF_E0_NDIM, 5)); write_file(p, b, n);
    expect_fail("ndim 5", p, "entry 'w': bad ndim 5");
    MUTATE(put_u32(b + OFF_E0_NDIM, 0xFFFFFFFFu)); write_file(p, b, n);
    expect_fail("ndim -1", p, "bad ndim");
    MUTATE(put_u32(b + OFF_E0_DIM0, 0x80000000u)); write_file(p, b, n);
    expect_fail("negative dim", p, "dim 0");
    MUTATE(put_u32(b + OFF_E0_DIM0, 3)); write_file(p, b, n);
    expect_fail("size mismatch (dims changed)", p, "entry 'w': size mismatch: header says 24 bytes, f32 shape needs 36");
    MUTATE(b[OFF_E0_SIZE] = 28); write_file(p, b, n);
    expect_fail("size mismatch (size field +4)", p, "size mismatch");
    MUTATE(b[OFF_E0_SIZE] = 20); write_file(p, b, n);
    expect_fail("size mismatch (size field -4)", p, "size mismatch");
    MUTATE(b[OFF_E0_SIZE + 7] = 0x80); write_file(p, b, n);
    expect_fail("size field 2^63", p, "size mismatch");
    {   /* "w" -> "s": duplicates the bytes entry "s" (as version 1: in version 2 entry 0's CRC fails first) */
        size_t k = to_v1(raw, n, b);
        b[OFF_E0_NAME] = 's';
        write_file(p, b, k);
    }
    expect_fail("duplicate names", p, "duplicate entry 's'");
    memcpy(b, raw, n);
    b[n] = 0;
    write_file(p, b, n + 1);
    expect_fail("one trailing byte", p, "1 trailing bytes");
    memset(b + n, 0xAB, 16);
    write_file(p, b, n + 16);
    expect_fail("16 trailing bytes", p, "trailing");

    /* a file with a huge shape whose product overflows must be rejected before any allocation */
    {
        unsigned char h[12 + 4 + 1 + 4 + 4 + 16 + 8];
        memcpy(h, "TFMC", 4);
        put_u32(h + 4, 1);
        put_u32(h + 8, 1);
        put_u32(h + 12, 1);
        h[16] = 'z';
        put_u32(h + 17, 0);
        put_u32(h + 21, 4);
        for (int i = 0; i < 4; i++) put_u32(h + 25 + 4 * i, 0x7FFFFFFFu);
        memset(h + 41, 0xFF, 8);
        write_file(p, h, sizeof h);
        expect_fail("dims product overflow", p, "too large");
        /* a plausible header claiming 1 GB: rejected as truncated without allocating */
        put_u32(h + 21, 1);
        put_u32(h + 25, 1u << 28);
        unsigned char *q = h + 29;
        uint64_t sz = (uint64_t)4 << 28;
        for (int i = 0; i < 8; i++) q[i] = (unsigned char)(sz >> (8 * i));
        write_file(p, h, 37);
        expect_fail("payload larger than file", p, "truncated: entry 'z' needs 1073741824 bytes, 0 left");
        /* bytes entry with ndim 2 */
        put_u32(h + 17, 2);
        put_u32(h + 21, 2);
        write_file(p, h, sizeof h);
        expect_fail("bytes entry with ndim 2", p, "ndim");
    }

    expect_fail("file not created yet", tpath("not_yet.tfm"), "cannot open");
    write_file(tpath("zero.tfm"), b, 0);
    expect_fail("zero-length file", tpath("zero.tfm"), "truncated");
    expect_fail("nonexistent file", tpath("no/such/file.tfm"), "cannot open");
    expect_fail("directory instead of file", dir, "not a regular file");
    free(b);
    free(raw);
#undef MUTATE
}

static void test_save_failures(void) {
    tfm_container c;
    make_small(&c);
    int rc;

    /* output directory does not exist */
    const char *p = tpath("missing_dir/out.tfm");
    rc = tfm_container_save(&c, p);
    CHECK("save into missing dir fails", rc == -1 && strstr(tfm_last_error(), p), "rc=%d err=%s", rc,
          tfm_last_error());
    CHECK("  ... and leaves no temp file", count_tmp(dir) == 0, "%d", count_tmp(dir));

    /* read-only directory (only meaningful when not root: root ignores permissions) */
    const char *ro = tpath("ro");
    mkdir(ro, 0555);
    chmod(ro, 0555);
    if (geteuid() != 0) {
        char q[600];
        snprintf(q, sizeof q, "%s/out.tfm", ro);
        rc = tfm_container_save(&c, q);
        CHECK("save into read-only dir fails", rc == -1 && strstr(tfm_last_error(), q), "rc=%d", rc);
        CHECK("  ... and leaves no temp file", count_tmp(ro) == 0, "%d", count_tmp(ro));
    }
    chmod(ro, 0755);

    /* rename fails (target is a non-empty directory): temp file must be removed, target untouched */
    const char *tdir = tpath("target_is_dir");
    mkdir(tdir, 0755);
    char inner[600];
    snprintf(inner, sizeof inner, "%s/keep", tdir);
    write_file(inner, (const unsigned char *)"k", 1);
    rc = tfm_container_save(&c, tdir);
    struct stat st;
    CHECK("save over a directory fails at rename", rc == -1 && strstr(tfm_last_error(), "rename"), "rc=%d err=%s",
          rc, tfm_last_error());
    CHECK("  ... no temp file, directory untouched", count_tmp(dir) == 0 && stat(inner, &st) == 0,
          "tmp=%d", count_tmp(dir));

    /* write fails mid-file (file size limit): existing file untouched, temp file removed */
    const char *keep = tpath("keep.tfm");
    tfm_container small;
    tfm_container_init(&small);
    tfm_container_add_int(&small, "old", 1);
    tfm_container_save(&small, keep);
    tfm_container_free(&small);
    size_t n0;
    unsigned char *before = check_read_file(keep, &n0);
    tfm_container big;
    tfm_container_init(&big);
    int shp[1] = {1 << 16};
    tfm_container_add_f32(&big, "big", 1, shp, NULL);
    struct rlimit old, lim;
    getrlimit(RLIMIT_FSIZE, &old);
    lim = old;
    lim.rlim_cur = 4096;
    signal(SIGXFSZ, SIG_IGN);
    setrlimit(RLIMIT_FSIZE, &lim);
    rc = tfm_container_save(&big, keep);
    setrlimit(RLIMIT_FSIZE, &old);
    signal(SIGXFSZ, SIG_DFL);
    size_t n1;
    unsigned char *after = check_read_file(keep, &n1);
    printf("#   %s\n", tfm_last_error());
    CHECK("save fails when the write fails", rc == -1 && strstr(tfm_last_error(), keep), "rc=%d err=%s", rc,
          tfm_last_error());
    CHECK("  ... existing file untouched", after && n0 == n1 && memcmp(before, after, n0) == 0, "changed");
    CHECK("  ... no temp file", count_tmp(dir) == 0, "%d", count_tmp(dir));
    free(before);
    free(after);
    tfm_container_free(&big);

    /* an inconsistent container is refused before anything is written */
    c.e[0].nbytes = 8;
    rc = tfm_container_save(&c, keep);
    size_t n2;
    unsigned char *again = check_read_file(keep, &n2);
    CHECK("save refuses inconsistent entry, file untouched", rc == -1 && n2 == n0, "rc=%d", rc);
    free(again);
    c.e[0].nbytes = 24;
    tfm_container_free(&c);
}

/* Integrity (version 2): every single-bit flip anywhere in the file is refused with one line naming
 * the file; the CRC is zlib's; version-1 files (no CRC) still load; load_mem parses the same. */
static void test_integrity(void) {
    CHECK("crc32 of '123456789' is the IEEE check value cbf43926",
          tfm_crc32(0, "123456789", 9) == 0xCBF43926u, "got %08x", tfm_crc32(0, "123456789", 9));
    CHECK("crc32 running over two chunks", tfm_crc32(tfm_crc32(0, "1234", 4), "56789", 5) == 0xCBF43926u, "differs");
    size_t n;
    unsigned char *raw = check_read_file(tpath("small.tfm"), &n);
    unsigned char *b = malloc(n);
    int refused = 0, lines_ok = 0, tried = 0;
    char firstbad[600] = "";
    for (size_t bit = 0; bit < 8 * n; bit++) {
        memcpy(b, raw, n);
        b[bit / 8] ^= (unsigned char)(1u << (bit % 8));
        tfm_container d;
        int rc = tfm_container_load_mem(&d, b, n, "flip.tfm");
        const char *err = tfm_last_error();
        tried++;
        if (rc == -1 && d.n == 0) refused++;
        else if (!firstbad[0]) snprintf(firstbad, sizeof firstbad, "bit %zu loaded", bit);
        if (rc == -1 && strncmp(err, "flip.tfm: ", 10) == 0 && !strchr(err, '\n')) lines_ok++;
        tfm_container_free(&d);
    }
    CHECK("every single-bit flip of a 3-entry file refused", refused == tried, "%d of %d refused; %s", refused,
          tried, firstbad);
    CHECK("every refusal is one line naming the file", lines_ok == tried, "%d of %d", lines_ok, tried);
    printf("# %d of %d single-bit flips refused\n", refused, tried);
    /* a flip inside the payload of 'w' is reported as a checksum mismatch of 'w' */
    memcpy(b, raw, n);
    b[OFF_E0_SIZE + 8 + 5] ^= 0x10;
    write_file(tpath("flip.tfm"), b, n);
    expect_fail("payload bit flip -> checksum mismatch naming the entry", tpath("flip.tfm"),
                "entry 'w': checksum mismatch");
    /* the same bytes as version 1 (CRC words removed): still loads, without integrity check */
    tfm_container c;
    make_small(&c);
    unsigned char *v1 = malloc(n);
    size_t k = to_v1(raw, n, v1);
    tfm_container d;
    int rc = tfm_container_load_mem(&d, v1, k, "v1.tfm");
    int same = rc == 0 && d.n == c.n;
    for (int i = 0; same && i < c.n; i++)
        same = strcmp(d.e[i].name, c.e[i].name) == 0 && d.e[i].nbytes == c.e[i].nbytes &&
               memcmp(d.e[i].data, c.e[i].data, c.e[i].nbytes) == 0;
    CHECK("version-1 file (no checksums) still loads, same entries", same && k == n - 12, "rc=%d %s", rc,
          tfm_last_error());
    tfm_container_free(&d);
    rc = tfm_container_load_mem(&d, raw, n, "mem.tfm");
    CHECK("load_mem of a saved file", rc == 0 && d.n == 3 && strcmp(d.path, "mem.tfm") == 0, "%s", tfm_last_error());
    tfm_container_free(&d);
    rc = tfm_container_load_mem(&d, raw, 0, "empty.tfm");
    CHECK("load_mem of 0 bytes refused", rc == -1 && strstr(tfm_last_error(), "empty.tfm: truncated"), "%s",
          tfm_last_error());
    tfm_container_free(&d);
    tfm_container_free(&c);
    free(v1);
    free(b);
    free(raw);
}


/* tfm_container_load_deferred: float32 entries under the prefix stay in the file until tfm_container_read, which
 * checks their CRC then; everything else loads as before. */
static void test_load_deferred(void) {
    size_t n;
    unsigned char *raw = check_read_file(tpath("small.tfm"), &n);   /* w (2x3 f32), ids (i32), s */
    const float w[6] = {1.5f, -2.0f, 3.25f, 0.0f, -0.125f, 1e-3f};
    tfm_container d;
    int rc = tfm_container_load_deferred(&d, tpath("small.tfm"), NULL, "w");
    const tfm_entry *e = rc ? NULL : tfm_container_get(&d, "w");
    float got[6] = {0};
    int read_rc = e ? tfm_container_read(&d, e, got) : -1;
    CHECK("load_deferred 'w': w stays in the file (data NULL, file open), the rest loaded",
          e && e->deferred == 2 && !e->data && d.file && e->nbytes == sizeof w && tfm_container_get(&d, "ids")->data &&
              !strcmp(tfm_container_str(&d, "s"), "hello"), "rc=%d %s", rc, tfm_last_error());
    CHECK("container_read of a deferred entry gives its bytes", read_rc == 0 && !memcmp(got, w, sizeof w), "rc=%d %s",
          read_rc, tfm_last_error());
    int ids[4];
    CHECK("container_read of a loaded entry copies it", !tfm_container_read(&d, tfm_container_get(&d, "ids"), ids) &&
              ids[0] == 7 && ids[3] == 2147483647, "%s", tfm_last_error());
    tfm_container_free(&d);
    CHECK("container_free closes the file", d.file == NULL, "still open");
    rc = tfm_container_load_deferred(&d, tpath("small.tfm"), NULL, "i");
    CHECK("load_deferred defers only float32 entries (ids is i32: loaded)", rc == 0 && !d.file &&
              tfm_container_get(&d, "ids")->data && !tfm_container_get(&d, "ids")->deferred, "rc=%d", rc);
    tfm_container_free(&d);
    /* a flip inside w's payload: the load succeeds (w is not read), the read names the entry and the mismatch */
    unsigned char *b = malloc(n);
    memcpy(b, raw, n);
    b[OFF_E0_SIZE + 8 + 5] ^= 0x10;
    write_file(tpath("flip_dw.tfm"), b, n);
    rc = tfm_container_load_deferred(&d, tpath("flip_dw.tfm"), NULL, "w");
    read_rc = rc ? 0 : tfm_container_read(&d, tfm_container_get(&d, "w"), got);
    CHECK("a flip inside a deferred payload is a checksum mismatch at read", rc == 0 && read_rc == -1 &&
              strstr(tfm_last_error(), "entry 'w': checksum mismatch") && tfm_last_error_kind() == TFM_ERR_DATA,
          "rc=%d read=%d %s", rc, read_rc, tfm_last_error());
    tfm_container_free(&d);
    /* still checked at load: a file cut inside w's payload */
    write_file(tpath("cut_dw.tfm"), raw, OFF_E0_SIZE + 8 + 10);
    rc = tfm_container_load_deferred(&d, tpath("cut_dw.tfm"), NULL, "w");
    CHECK("load_deferred refuses a file cut inside a deferred payload", rc == -1 && strstr(tfm_last_error(), "truncated"),
          "rc=%d %s", rc, tfm_last_error());
    tfm_container_free(&d);
    /* the file cut after the load, before the read: a one-line read error, not a crash */
    write_file(tpath("later.tfm"), raw, n);
    rc = tfm_container_load_deferred(&d, tpath("later.tfm"), NULL, "w");
    int cut = truncate(tpath("later.tfm"), OFF_E0_SIZE + 8 + 10);
    read_rc = rc || cut ? 0 : tfm_container_read(&d, tfm_container_get(&d, "w"), got);
    CHECK("a file cut between load and read: read error naming the entry", rc == 0 && !cut && read_rc == -1 &&
              strstr(tfm_last_error(), "entry 'w': read error") && !strchr(tfm_last_error(), '\n'),
          "rc=%d cut=%d read=%d %s", rc, cut, read_rc, tfm_last_error());
    tfm_container_free(&d);
    /* version 1 (no checksums): deferred too, read without a check */
    unsigned char *v1 = malloc(n);
    size_t k = to_v1(raw, n, v1);
    write_file(tpath("v1_d.tfm"), v1, k);
    rc = tfm_container_load_deferred(&d, tpath("v1_d.tfm"), NULL, "w");
    e = rc ? NULL : tfm_container_get(&d, "w");
    memset(got, 0, sizeof got);
    CHECK("a version-1 file defers and reads the same bytes", e && e->deferred == 1 && !tfm_container_read(&d, e, got) &&
              !memcmp(got, w, sizeof w), "rc=%d %s", rc, tfm_last_error());
    tfm_container_free(&d);
    free(v1);
    free(b);
    free(raw);
}

/* The error kind of each failure class (tfm_last_error_kind): what the CLI turns into exit 74 / 65 / 2. */
static void test_error_kinds(void) {
    char path[600];
    tfm_container c;
    snprintf(path, sizeof path, "%s/none.tfm", dir);
    int rc = tfm_container_load(&c, path);
    tfm_container_free(&c);
    CHECK("error kind: missing file is I/O", rc != 0 && tfm_last_error_kind() == TFM_ERR_IO, "rc=%d kind=%d '%s'", rc,
          (int)tfm_last_error_kind(), tfm_last_error());
    snprintf(path, sizeof path, "%s/garbage.tfm", dir);
    FILE *f = fopen(path, "wb");
    fputs("TFMC this is not a checkpoint", f);
    fclose(f);
    rc = tfm_container_load(&c, path);
    tfm_container_free(&c);
    CHECK("error kind: malformed checkpoint is data", rc != 0 && tfm_last_error_kind() == TFM_ERR_DATA,
          "rc=%d kind=%d '%s'", rc, (int)tfm_last_error_kind(), tfm_last_error());
    rc = tfm_container_load(&c, dir);
    tfm_container_free(&c);
    CHECK("error kind: a directory is I/O", rc != 0 && tfm_last_error_kind() == TFM_ERR_IO, "rc=%d kind=%d '%s'", rc,
          (int)tfm_last_error_kind(), tfm_last_error());
    tfm_set_error("x");
    CHECK("error kind: tfm_set_error is other", tfm_last_error_kind() == TFM_ERR_OTHER, "kind=%d", (int)tfm_last_error_kind());
    tfm_set_error_kind(TFM_ERR_IO, "io");
    tfm_prefix_error("p: ");
    tfm_error_in_data();
    CHECK("error kind: prefix and tfm_error_in_data keep I/O", tfm_last_error_kind() == TFM_ERR_IO &&
          !strcmp(tfm_last_error(), "p: io"), "kind=%d '%s'", (int)tfm_last_error_kind(), tfm_last_error());
    tfm_set_error("bad field");
    CHECK("error kind: tfm_error_in_data makes other data", tfm_error_in_data() == -1 &&
          tfm_last_error_kind() == TFM_ERR_DATA, "kind=%d", (int)tfm_last_error_kind());
}

/* the bitwise definition of CRC-32 (zlib's) */
static uint32_t crc_bitwise(const unsigned char *p, size_t n) {
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++) c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    }
    return ~c;
}

/* the carry-less path (PCLMULQDQ) against the table path and the definition: every length 0..600, large
 * buffers, every start alignment, running over split points */
static void test_crc_paths(void) {
    tfm_crc_table tab, fast;
    tfm_crc_init_(&tab, 0);
    tfm_crc_init_(&fast, 1);
    if (!fast.clmul) {
        printf("NOTRUN crc32_clmul_equals_table: this CPU lacks PCLMULQDQ (not tested here)\n");
        return;
    }
    size_t big = (1u << 20) + 77;
    unsigned char *buf = malloc(big + 16);
    uint64_t x = 0x9E3779B97F4A7C15ull;
    for (size_t i = 0; i < big + 16; i++) x = x * 6364136223846793005ull + 1442695040888963407ull, buf[i] = (unsigned char)(x >> 56);
    int ok = 1, bad_n = -1;
    for (size_t n = 0; n <= 600 && ok; n++)
        for (int a = 0; a < 16 && ok; a += (n < 200 ? 1 : 5)) {
            uint32_t ref = crc_bitwise(buf + a, n);
            ok = tfm_crc_update_(&fast, 0, buf + a, n) == ref && tfm_crc_update_(&tab, 0, buf + a, n) == ref &&
                 tfm_crc_update_(&fast, tfm_crc_update_(&fast, 0, buf + a, n / 3), buf + a + n / 3, n - n / 3) == ref;
            if (!ok) bad_n = (int)n;
        }
    size_t lens[] = {big, big - 13, 65536, 4096 + 48, 1000003 % big};
    for (int i = 0; i < 5 && ok; i++) {
        uint32_t ref = crc_bitwise(buf + 3, lens[i]);
        ok = tfm_crc_update_(&fast, 0, buf + 3, lens[i]) == ref && tfm_crc_update_(&tab, 0, buf + 3, lens[i]) == ref;
        if (!ok) bad_n = (int)lens[i];
    }
    CHECK("crc32: the carry-less path equals the table path and the definition (lengths 0..600 and 1 MB, every "
          "alignment, split)", ok, "differs at length %d", bad_n);
    uint32_t before = tfm_crc_update_(&fast, 0, buf, big);
    buf[12345] ^= 4;   /* one flipped bit */
    uint32_t after = tfm_crc_update_(&fast, 0, buf, big);
    CHECK("crc32: the carry-less path sees one flipped bit in 1 MB", after != before && after == crc_bitwise(buf, big),
          "%08x %08x", before, after);
    free(buf);
}

/* tfm_container_load_except: the skipped entries are left out, the rest load as before; a skipped entry is
 * still verified (a file cut inside it, or a flip inside its payload, is refused naming it). */
static void test_load_except(void) {
    /* the sliced CRC against the byte-at-a-time definition, over lengths 0..300 and split points */
    unsigned char buf[300];
    for (int i = 0; i < 300; i++) buf[i] = (unsigned char)(i * 131 + 7);
    int crc_ok = 1;
    for (size_t n = 0; n <= 300; n += 13) {
        uint32_t ref = crc_bitwise(buf, n);
        crc_ok &= tfm_crc32(0, buf, n) == ref && tfm_crc32(tfm_crc32(0, buf, n / 3), buf + n / 3, n - n / 3) == ref;
    }
    CHECK("crc32 (sliced by 8) equals the bitwise definition, whole and in two chunks", crc_ok, "%s", "differs");
    size_t n;
    unsigned char *raw = check_read_file(tpath("small.tfm"), &n);   /* w (2x3 f32), ids, s */
    tfm_container d;
    int rc = tfm_container_load_except(&d, tpath("small.tfm"), "w");
    CHECK("load_except 'w': the other two entries, intact", rc == 0 && d.n == 2 && !tfm_container_get(&d, "w") &&
              tfm_container_get(&d, "ids") && !strcmp(tfm_container_str(&d, "s"), "hello"), "rc=%d n=%d %s", rc, d.n,
          tfm_last_error());
    tfm_container_free(&d);
    rc = tfm_container_load_except(&d, tpath("small.tfm"), "");
    CHECK("load_except '': every entry", rc == 0 && d.n == 3, "rc=%d n=%d", rc, d.n);
    tfm_container_free(&d);
    unsigned char *b = malloc(n);
    memcpy(b, raw, n);
    b[OFF_E0_SIZE + 8 + 5] ^= 0x10;   /* inside w's payload */
    write_file(tpath("flip_w.tfm"), b, n);
    rc = tfm_container_load_except(&d, tpath("flip_w.tfm"), "w");
    CHECK("load_except 'w' refuses a flip inside the skipped w", rc == -1 && strstr(tfm_last_error(), "entry 'w': checksum"),
          "rc=%d %s", rc, tfm_last_error());
    tfm_container_free(&d);
    rc = tfm_container_load_except(&d, tpath("flip_w.tfm"), "ids");
    CHECK("load_except 'ids' still refuses the flip inside w", rc == -1 && strstr(tfm_last_error(), "entry 'w': checksum"),
          "rc=%d %s", rc, tfm_last_error());
    tfm_container_free(&d);
    write_file(tpath("cut_w.tfm"), raw, OFF_E0_SIZE + 8 + 10);   /* cut inside w's payload */
    rc = tfm_container_load_except(&d, tpath("cut_w.tfm"), "w");
    CHECK("load_except 'w' refuses a file cut inside w", rc == -1 && strstr(tfm_last_error(), "truncated"), "rc=%d %s",
          rc, tfm_last_error());
    tfm_container_free(&d);
    write_file(tpath("cut_crc.tfm"), raw, OFF_E0_END - 2);   /* cut inside w's checksum */
    rc = tfm_container_load_except(&d, tpath("cut_crc.tfm"), "w");
    CHECK("load_except 'w' refuses a file cut inside w's checksum", rc == -1 && strstr(tfm_last_error(), "truncated"),
          "rc=%d %s", rc, tfm_last_error());
    tfm_container_free(&d);
    free(b);
    free(raw);
}

/* tfm_check_files (issue 33): the one check of a command's files; ok = 1 expects acceptance, else the error
 * must contain want and have the kind */
static void files_case(const char *name, const tfm_file_use *f, int n, int ok, const char *want, tfm_error_kind kind) {
    int rc = tfm_check_files(f, n);
    if (ok) CHECK(name, rc == 0, "refused: %s", tfm_last_error());
    else CHECK(name, rc == -1 && strstr(tfm_last_error(), want) && tfm_last_error_kind() == kind, "rc %d, kind %d: '%s'",
               rc, (int)tfm_last_error_kind(), rc ? tfm_last_error() : "");
}

static void test_check_files(void) {
    const unsigned char x[1] = {1};
    write_file(tpath("in.txt"), x, 1);
    write_file(tpath("other.txt"), x, 1);
    unlink(tpath("sym.txt"));
    unlink(tpath("hard.txt"));
    int linked = !symlink("in.txt", tpath("sym.txt")) && !link(tpath("in.txt"), tpath("hard.txt"));
    CHECK("check_files: links made", linked, "symlink/link failed");
    char dotted[600], in[600];   /* (tpath's buffers rotate) */
    snprintf(dotted, sizeof dotted, "%s/./new.tfm", dir);
    snprintf(in, sizeof in, "%s", tpath("in.txt"));
    tfm_file_use f[3];
    f[0] = (tfm_file_use){"--data", in, TFM_FILE_IN};
    f[1] = (tfm_file_use){"--out", tpath("new.tfm"), TFM_FILE_OUT};
    f[2] = (tfm_file_use){"--log-file", NULL, TFM_FILE_OUT_STREAM};
    files_case("check_files: a new output and an input", f, 3, 1, "", 0);
    f[1].path = tpath("in.txt");
    files_case("check_files: output = input refused", f, 2, 0, "is the input file", TFM_ERR_OTHER);
    f[1].path = tpath("sym.txt");
    files_case("check_files: output = input through a symbolic link refused", f, 2, 0, "(--data)", TFM_ERR_OTHER);
    f[1].path = tpath("hard.txt");
    files_case("check_files: output = input through a hard link refused", f, 2, 0, "refusing to overwrite", TFM_ERR_OTHER);
    f[0].role = TFM_FILE_IN_PLACE;
    files_case("check_files: output = the checkpoint resumed in place accepted", f, 2, 1, "", 0);
    f[2] = (tfm_file_use){"--log-file", tpath("hard.txt"), TFM_FILE_OUT_STREAM};
    f[1].path = tpath("new.tfm");
    files_case("check_files: a log over the resumed checkpoint refused", f, 3, 0, "is the input file", TFM_ERR_OTHER);
    f[0].role = TFM_FILE_IN;
    f[2].path = dotted;
    files_case("check_files: two outputs that do not exist yet, one name two spellings", f, 3, 0, "are the same file",
               TFM_ERR_OTHER);
    f[2].path = "/dev/null";
    files_case("check_files: a log to /dev/null accepted", f, 3, 1, "", 0);
    f[1].path = "/dev/null";
    files_case("check_files: an atomic output over a device refused", f, 2, 0, "not a regular file", TFM_ERR_OTHER);
    f[1].path = "";
    files_case("check_files: an empty output name refused", f, 2, 0, "--out: empty path", TFM_ERR_OTHER);
    f[1].path = dir;
    files_case("check_files: a directory refused", f, 2, 0, "is a directory", TFM_ERR_OTHER);
    f[1].path = tpath("no/such/x.tfm");
    files_case("check_files: a missing directory refused as an I/O error", f, 2, 0, "No such file or directory", TFM_ERR_IO);
    f[1].path = tpath("other.txt");
    files_case("check_files: an existing regular output that is no input accepted", f, 2, 1, "", 0);
}

int main(void) {
    if (check_tmpdir(dir, sizeof dir, "test_io")) return 1;
    test_check_files();
    test_round_trip();
    test_truncation();
    test_corruptions();
    test_integrity();
    test_load_except();
    test_load_deferred();
    test_crc_paths();
    test_save_failures();
    test_error_kinds();
    check_rm_tmpdir(dir);
    CHECK_EXIT();
}
