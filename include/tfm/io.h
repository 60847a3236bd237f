/* tfm io: the one binary container used for checkpoints and test fixtures.
 *
 * Format (little-endian), documented in docs/FORMAT.md:
 *   bytes 0..3   magic "TFMC"
 *   u32          version (2; version 1 files, without checksums, are still read)
 *   u32          number of entries
 *   per entry:
 *     u32        name length L (1..255), then L bytes of name (no NUL)
 *     u32        dtype: 0 = float32, 1 = int32, 2 = raw bytes (UTF-8 text etc.), 3 = int8 (quantized weights)
 *     u32        ndim (0..4), then ndim u32 dims (each >= 0)
 *     u64        payload size in bytes (must equal product(dims) * elem size; raw bytes: dims = {len})
 *     payload
 *     u32        (version 2) CRC-32 (zlib's crc32) of all the entry's bytes above, checked on load
 *
 * A loaded file is untrusted: every length and size is checked against the remaining file size
 * before it is used; any inconsistency is an error naming the file and the entry.
 */
#ifndef TFM_IO_H
#define TFM_IO_H

#include "tfm/export.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define TFM_DT_F32 0
#define TFM_DT_I32 1
#define TFM_DT_BYTES 2
#define TFM_DT_I8 3      /* signed bytes, any ndim (tfm quantize: param.<name> of an int8 model) */

typedef struct {
    char name[256];
    int dtype;
    int ndim;
    int shape[4];
    size_t nbytes;
    void *data;              /* owned by the container; always followed by one extra 0 byte
                                (so a TFM_DT_BYTES entry can be read as a C string); NULL for a deferred
                                entry (tfm_container_load_deferred): read it with tfm_container_read */
    int deferred;            /* 0: in data; 1: its payload is still in the file (2: with a CRC to check) */
    uint64_t file_off;       /* deferred: where the payload starts in the file */
    uint32_t crc_seed, crc_want;   /* deferred, 2: the entry's CRC before its payload, and the stored one */
} tfm_entry;

typedef struct {
    tfm_entry *e;
    int n, cap;
    char *path;              /* file it was loaded from (NULL if built in memory): used in error messages */
    FILE *file;              /* open while deferred entries remain to be read (NULL otherwise) */
    int int8_only;           /* set by an inference loader: a model read from here holds its int8 parameters
                                without float values (tfm_params_drop_q8_floats; default 0) */
} tfm_container;

TFM_API void tfm_container_init(tfm_container *c);
TFM_API void tfm_container_free(tfm_container *c);
/* Add an entry (data is copied; data == NULL gives zeros). An existing entry of the same name is
 * replaced. Returns the entry, or NULL with tfm error set if name/dtype/shape/nbytes are invalid.
 * Adding may move the entry array: earlier returned tfm_entry pointers become invalid. */
TFM_API tfm_entry *tfm_container_add(tfm_container *c, const char *name, int dtype, int ndim, const int *shape,
                             const void *data, size_t nbytes);
TFM_API tfm_entry *tfm_container_add_f32(tfm_container *c, const char *name, int ndim, const int *shape, const float *data);
TFM_API tfm_entry *tfm_container_add_i32(tfm_container *c, const char *name, int n, const int *data);
TFM_API tfm_entry *tfm_container_add_str(tfm_container *c, const char *name, const char *s);
TFM_API tfm_entry *tfm_container_add_int(tfm_container *c, const char *name, int v);      /* i32 scalar, shape (1) */
TFM_API tfm_entry *tfm_container_add_float(tfm_container *c, const char *name, float v);  /* f32 scalar, shape (1) */
/* A 64-bit value (an RNG state) as i32 (2): low half, then high half. Both trainers store theirs so. */
TFM_API tfm_entry *tfm_container_add_u64(tfm_container *c, const char *name, uint64_t v);
TFM_API tfm_entry *tfm_container_get(const tfm_container *c, const char *name);
/* Is name a training run's own entry (adam.*: optimizer moments, train.*: step, RNG, data position, run.*: the run's
 * configuration), which a model made from checkpoints (an average, a stored ensemble) does not carry? */
TFM_API int tfm_is_training_entry(const char *name);
/* Typed getters: return -1 and set tfm error ("FILE: entry NAME missing / has wrong type") on failure. */
TFM_API int tfm_container_int(const tfm_container *c, const char *name, int *out);
TFM_API int tfm_container_float(const tfm_container *c, const char *name, float *out);   /* also accepts an i32 scalar */
TFM_API int tfm_container_u64(const tfm_container *c, const char *name, uint64_t *out);  /* tfm_container_add_u64's */
/* Raw-bytes entry as a NUL-terminated string, or NULL with tfm error set. */
TFM_API const char *tfm_container_str(const tfm_container *c, const char *name);

/* Write atomically: to PATH.tmp.PID, fsync, rename. Returns 0, or -1 with tfm error set. */
TFM_API int tfm_container_save(const tfm_container *c, const char *path);
/* The writer under every tfm file save: write(f, ctx) (1 = written, else 0 with errno set) fills
 * PATH.tmp.PID, which is flushed, fsynced and renamed over PATH; then the directory is fsynced (best
 * effort). A reader sees the old file or the new one, never a part. Returns 0, or -1 with an I/O error
 * "PATH: save failed (write PATH.tmp.PID): reason" (the temp file removed). */
TFM_API int tfm_save_atomic(const char *path, int (*write)(FILE *f, const void *ctx), const void *ctx);
/* The files of one command, for tfm_check_files: what each is to the command. */
typedef enum {
    TFM_FILE_IN = 0,      /* read */
    TFM_FILE_IN_PLACE,    /* read, and a TFM_FILE_OUT may replace it (the checkpoint a --resume continues) */
    TFM_FILE_OUT,         /* written atomically (tfm_save_atomic): a new name or a regular file */
    TFM_FILE_OUT_STREAM,  /* written as the command runs (a log): a new name, a regular file, a device or FIFO */
} tfm_file_role;
typedef struct {
    const char *what;     /* how the user named it, for messages: "--out", "--data", "MODEL.tfm" */
    const char *path;     /* NULL: not given (skipped) */
    tfm_file_role role;
} tfm_file_use;
/* The one check of a command's files, made before any work (every tfm command calls it): every output has
 * a non-empty path that is not a directory, its directory exists and is writable (an atomic output: not an
 * existing device or FIFO either), and no output is the same file as an input or as another output. Files
 * are compared after following links: by device and inode where they exist, else by the directory's device
 * and inode and the name. Inputs that do not exist are left to the reader. Returns 0, or -1 with a one-line
 * error naming both files: TFM_ERR_IO when the system refuses (a missing or read-only directory), else
 * TFM_ERR_OTHER (an output over an input, an empty path, a directory). */
TFM_API int tfm_check_files(const tfm_file_use *files, int n);
/* Load and validate. c is treated as uninitialised output (previous contents are NOT freed).
 * Returns 0, or -1 with tfm error set (names the file); either way tfm_container_free(c) is safe after. */
TFM_API int tfm_container_load(tfm_container *c, const char *path);
/* The same without the entries whose name starts with skip_prefix (NULL or "": none): they are read and
 * verified (sizes, checksums) like the rest, but not kept. For a reader that needs only part of a file,
 * e.g. the weights of a checkpoint without its optimizer state ("adam."): a fraction of the memory. */
TFM_API int tfm_container_load_except(tfm_container *c, const char *path, const char *skip_prefix);
/* The same, but entries whose name starts with defer_prefix and that hold float32 or int8 are only checked for size:
 * their payload stays in the file (e->data NULL, e->deferred set) until tfm_container_read, which checks its
 * checksum then. A model's loader reads its parameters straight into the model's tensors this way, without a
 * second copy of the weights in memory. The file stays open until tfm_container_free. */
TFM_API int tfm_container_load_deferred(tfm_container *c, const char *path, const char *skip_prefix,
                                        const char *defer_prefix);
/* Entry e's payload (e->nbytes bytes) into dst: a copy of e->data, or for a deferred entry read from the file
 * and checked against its CRC. Returns 0, or -1 with tfm error set (a read error, a file changed since it was
 * loaded, a checksum mismatch); dst may then hold part of the payload. */
TFM_API int tfm_container_read(const tfm_container *c, const tfm_entry *e, void *dst);
/* The same from n bytes in memory; `name` stands for the file in error messages and c->path. */
TFM_API int tfm_container_load_mem(tfm_container *c, const void *data, size_t n, const char *name);
/* CRC-32 as stored in version-2 containers (IEEE polynomial, = zlib crc32). Running: start with 0,
 * pass the previous result to continue over the next chunk. */
TFM_API uint32_t tfm_crc32(uint32_t crc, const void *buf, size_t n);

#endif
