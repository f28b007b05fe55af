/* Safetensors files: named tensors in one file, the format PyTorch,
 * Hugging Face and brigade's checkpoints share.
 *
 * Layout (little-endian): an 8-byte unsigned header length N, N bytes of a
 * JSON object (UTF-8, padded with spaces to a multiple of 8), then the data:
 *
 *     {"__metadata__": {"key": "value", ...},          (optional, strings only)
 *      "conv1.conv.weight": {"dtype": "F32", "shape": [32, 1, 3, 3],
 *                            "data_offsets": [BEGIN, END]}, ...}
 *
 * Offsets count from the start of the data; the tensors tile it without
 * holes or overlaps, and END - BEGIN is the element count times the element
 * size. brigade writes and reads F32 and I32 tensors; a file holding other
 * dtypes opens, and those tensors report BRG_ERR_UNSUPPORTED when asked
 * for as brigade tensors.
 *
 * Reading checks everything above before it returns a file: a truncated
 * file, a header that is not a JSON object, a duplicate name, an unknown
 * field type, offsets outside the data or overlapping, a size that does not
 * match the shape: each is BRG_ERR_FORMAT with a message naming the file
 * and, where there is one, the tensor. */
#ifndef BRIGADE_SAFETENSORS_H
#define BRIGADE_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "brigade/status.h"
#include "brigade/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

#define BRG_SAFETENSORS_MAX_DIMS 8

/* One tensor of a file, in host memory. */
typedef struct brg_safetensor {
    const char *name;
    brg_dtype dtype;
    int ndim;                                /* 0..BRG_SAFETENSORS_MAX_DIMS (0: a scalar) */
    int64_t shape[BRG_SAFETENSORS_MAX_DIMS];
    const void *data;                        /* little-endian elements, row-major */
    size_t bytes;                            /* element count x element size */
} brg_safetensor;

/* Write n tensors to path, with optional metadata: n_meta key/value string
 * pairs (keys[i], values[i]) in "__metadata__". Atomic: the file is written
 * under a temporary name in the same folder, flushed to disk (fsync),
 * renamed over path, and the folder flushed, so path holds either the old
 * file or the whole new one, never a part. Names must be unique, non-empty
 * and not "__metadata__". */
BRG_API brg_status brg_safetensors_write(const char *path, const brg_safetensor *tensors, int n,
                                         const char *const *keys, const char *const *values, int n_meta);

typedef struct brg_safetensors brg_safetensors;

/* Read and check a whole file (see the top of this header). */
BRG_API brg_status brg_safetensors_open(const char *path, brg_safetensors **out);

/* The same, with check(ctx, path, bytes, size) asked of the whole file as
 * read, before its header is: to compare it with a checksum kept
 * elsewhere (a checkpoint's manifest) without reading it twice. A failure
 * it returns is the open's. */
typedef brg_status (*brg_safetensors_check_fn)(void *ctx, const char *path, const void *bytes, size_t size);
BRG_API brg_status brg_safetensors_open_checked(const char *path, brg_safetensors_check_fn check, void *ctx,
                                                brg_safetensors **out);
/* The header alone, checked as brg_safetensors_open checks it against
 * the file's size (a truncated or extended file is refused), without
 * reading the data: brg_safetensors_get gives names, dtypes and shapes
 * with data NULL. For a quick look at a large file before work that
 * depends on it. */
BRG_API brg_status brg_safetensors_open_header(const char *path, brg_safetensors **out);
BRG_API void brg_safetensors_close(brg_safetensors *file);

BRG_API const char *brg_safetensors_path(const brg_safetensors *file);

/* The tensors, in the order of their data in the file. For a tensor of a
 * dtype brigade does not compute in (F16, BF16, F64, I64, ...),
 * brg_safetensors_get fills the name and shape, sets data to NULL and
 * returns BRG_ERR_UNSUPPORTED naming the tensor and its dtype;
 * brg_safetensors_dtype_name gives the file's name for any tensor's dtype
 * ("F32"). */
BRG_API int brg_safetensors_count(const brg_safetensors *file);
BRG_API brg_status brg_safetensors_get(const brg_safetensors *file, int index, brg_safetensor *out);
BRG_API const char *brg_safetensors_dtype_name(const brg_safetensors *file, int index);

/* The tensor called name: its index, or -1. */
BRG_API int brg_safetensors_find(const brg_safetensors *file, const char *name);

/* A "__metadata__" value, or NULL. */
BRG_API const char *brg_safetensors_metadata(const brg_safetensors *file, const char *key);

#ifdef __cplusplus
}
#endif

#endif
