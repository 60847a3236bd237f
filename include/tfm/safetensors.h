/* The safetensors format (https://github.com/huggingface/safetensors): F32 tensors written, F32/F16/BF16 read.
 *
 *   u64 N (little-endian) | N bytes of JSON header | data buffer (raw little-endian tensor bytes)
 *   header = {"__metadata__": {"key": "value", ...},
 *             "name": {"dtype": "F32", "shape": [d0, d1], "data_offsets": [begin, end]}, ...}
 *   offsets are relative to the start of the data buffer; the writer pads the header with spaces so
 *   the data starts at a multiple of 8, like the reference implementation.
 *
 * A loaded file is untrusted. tfm_st_load checks, before allocating what a field describes:
 *   file >= 8 bytes; N <= 100 MB and N <= file size - 8; the header is strict JSON (src/core/json.c),
 *   an object whose values are tensor descriptions (exactly dtype, shape, data_offsets) plus an optional
 *   "__metadata__" object of strings; dtype "F32", "F16" or "BF16" (read as floats; written: F32); 0..4 dims, each 1..2^31-1, element count without
 *   overflow; 0 <= begin <= end <= data size and end - begin == elements * the dtype's size; sorted by begin, the
 *   tensors neither overlap nor leave gaps and cover the whole data buffer.
 * Errors are one line naming the file and, where known, the tensor:
 *   "m.safetensors: tensor 'wte.weight': data_offsets [0, 4096] run past the data buffer (1024 bytes)". */
#ifndef TFM_SAFETENSORS_H
#define TFM_SAFETENSORS_H

#include "tfm/export.h"

#include "tfm/core.h"
#include <stddef.h>
#include <stdint.h>

#define TFM_ST_MAX_HEADER ((uint64_t)100 * 1000 * 1000)

typedef struct {
    const char *name;
    int ndim;                /* 0..TFM_MAX_DIMS */
    int shape[TFM_MAX_DIMS];
    const void *data;        /* numel * 4 bytes of f32. Writing: host floats. Loaded: little-endian bytes,
                                possibly unaligned: read with tfm_st_read_f32 */
    uint64_t begin, end;     /* loaded: data_offsets */
    int dtype;               /* loaded: TFM_ST_F32, TFM_ST_F16 or TFM_ST_BF16 (writing: F32 only) */
} tfm_st_tensor;
enum { TFM_ST_F32 = 0, TFM_ST_F16 = 1, TFM_ST_BF16 = 2 };
/* Bytes of one element of t's dtype (4 or 2). */
TFM_API size_t tfm_st_elem_size(const tfm_st_tensor *t);

typedef struct {
    const char *key, *value; /* UTF-8, no NUL */
} tfm_st_meta;

/* Write atomically (PATH.tmp.PID, fsync, rename). Tensors are laid out in the given order. Returns 0, or
 * -1 with a tfm error naming the file (invalid name/shape, text that is not UTF-8, I/O failure); nothing
 * is left at PATH on failure. */
TFM_API int tfm_st_save(const tfm_st_tensor *t, int n, const tfm_st_meta *meta, int n_meta, const char *path);

typedef struct {
    char *path;
    tfm_st_tensor *t;        /* n tensors in header order; names and data owned by the file */
    int n;
    tfm_st_meta *meta;       /* n_meta entries of __metadata__ in header order */
    int n_meta;
    unsigned char *data;     /* the data buffer */
    size_t data_size;
    void *json;              /* parsed header (owns the strings) */
} tfm_st_file;

/* Load and validate. Returns 0, or -1 with a tfm error; tfm_st_free is safe either way. */
TFM_API int tfm_st_load(tfm_st_file *f, const char *path);
TFM_API void tfm_st_free(tfm_st_file *f);
TFM_API const tfm_st_tensor *tfm_st_find(const tfm_st_file *f, const char *name);
TFM_API const char *tfm_st_meta_get(const tfm_st_file *f, const char *key);   /* NULL if absent */
TFM_API size_t tfm_st_numel(const tfm_st_tensor *t);
/* Copy a loaded tensor's elements into host floats (F16 and BF16 converted exactly). */
TFM_API void tfm_st_read_f32(const tfm_st_tensor *t, float *dst);

#endif
