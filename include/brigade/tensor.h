/* brigade: tensors.
 *
 * A tensor is a small value type: a pointer into some device's memory plus
 * shape and strides (in elements). It never owns its data unless it was made
 * by brg_tensor_alloc, in which case brg_tensor_free returns it to the arena.
 * Activations are float32 NCHW; int32 exists for class labels only.
 *
 * A 4-D float32 activation may instead be channel-blocked (block b > 0):
 * the same [N, C, H, W] shape stored as [N, C/b, H, W, b], the layout oneDNN
 * calls nChw8c for b = 8, so that its convolutions read and write it without
 * reorders. Sample n is still one run of C*H*W floats at n*C*H*W, so the
 * strides and slices along dimension 0 stay those of plain NCHW; nothing
 * else may be sliced or reshaped. Which ops take blocked tensors is in
 * brigade/ops.h; a stage decides which of its tensors are blocked.
 */
#ifndef BRIGADE_TENSOR_H
#define BRIGADE_TENSOR_H

#include <stddef.h>
#include <stdint.h>

#include "brigade/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define BRG_MAX_DIMS 4
/* The largest channel block a tensor may have (brg_tensor_set_block). */
#define BRG_MAX_BLOCK 16

typedef struct brg_device brg_device;

typedef enum brg_dtype {
    BRG_F32 = 0,
    BRG_I32 = 1,
} brg_dtype;

typedef struct brg_tensor {
    void *data;                   /* first element, in the owning device's memory */
    brg_dtype dtype;
    int ndim;                     /* 1..BRG_MAX_DIMS */
    int64_t shape[BRG_MAX_DIMS];  /* NCHW for activations, KCRS for conv weights */
    int64_t stride[BRG_MAX_DIMS]; /* in elements, not bytes */
    brg_device *device;           /* NULL: plain host memory owned by the caller */
    int block;                    /* 0: plain; b > 0: channel-blocked by b (see above) */
} brg_tensor;

/* Size in bytes of one element of dtype. */
BRG_API size_t brg_dtype_size(brg_dtype dtype);

/* Describe contiguous row-major memory at data. Fails on ndim outside
 * 1..BRG_MAX_DIMS or a negative extent. */
BRG_API brg_status brg_tensor_init(brg_tensor *t, void *data, brg_dtype dtype, int ndim,
                                   const int64_t *shape, brg_device *device);

/* Shorthand for a contiguous float32 NCHW tensor in host memory (device NULL). */
BRG_API brg_tensor brg_tensor_nchw(float *data, int64_t n, int64_t c, int64_t h, int64_t w);

BRG_API int64_t brg_tensor_numel(const brg_tensor *t);
/* Bytes spanned by the elements (numel x element size); for a view this is
 * the payload, not the span of the parent. */
BRG_API size_t brg_tensor_bytes(const brg_tensor *t);
BRG_API int brg_tensor_is_contiguous(const brg_tensor *t);
BRG_API int brg_tensor_same_shape(const brg_tensor *a, const brg_tensor *b);

/* A view of elements [start, start + length) along dim; shares data. */
BRG_API brg_status brg_tensor_slice(const brg_tensor *t, int dim, int64_t start, int64_t length,
                                    brg_tensor *view);

/* A view with another shape and the same number of elements; t must be
 * contiguous. */
BRG_API brg_status brg_tensor_reshape(const brg_tensor *t, int ndim, const int64_t *shape,
                                      brg_tensor *view);

/* Mark a tensor channel-blocked by block (0: plain again). A blocked
 * tensor is float32, 4-D and contiguous, with channels a multiple of
 * block, which is at most BRG_MAX_BLOCK; BRG_ERR_INVALID_ARGUMENT otherwise. The data are not touched. */
BRG_API brg_status brg_tensor_set_block(brg_tensor *t, int block);

/* Copy src's elements into dst, two tensors of one shape in host-readable
 * memory (host tensors or CPU devices' arenas), converting between their
 * layouts (plain or blocked, any blocks). For tests and checks: it runs
 * on the calling thread, element by element. */
BRG_API brg_status brg_tensor_copy_layout(const brg_tensor *src, const brg_tensor *dst);

/* Writes "[2, 3, 28, 28]" into buf (always NUL-terminated); returns buf. */
BRG_API char *brg_tensor_shape_string(const brg_tensor *t, char *buf, size_t size);

/* A contiguous tensor whose memory comes from dev's arena, recorded under tag
 * (for example "stage 2 / mixed5 / activations"). */
BRG_API brg_status brg_tensor_alloc(brg_device *dev, brg_dtype dtype, int ndim, const int64_t *shape,
                                    const char *tag, brg_tensor *out);

/* Return memory from brg_tensor_alloc to its arena. Accepts a zeroed tensor. */
BRG_API void brg_tensor_free(brg_tensor *t);

#ifdef __cplusplus
}
#endif

#endif /* BRIGADE_TENSOR_H */
