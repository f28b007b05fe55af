/* Tensor descriptors, views and arena-backed allocation. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "brigade/device.h"
#include "brigade/tensor.h"
#include "internal.h"

size_t brg_dtype_size(brg_dtype dtype)
{
    switch (dtype) {
    case BRG_F32: return 4;
    case BRG_I32: return 4;
    }
    return 0;
}

static void contiguous_strides(brg_tensor *t)
{
    int64_t s = 1;
    for (int d = t->ndim - 1; d >= 0; d--) {
        t->stride[d] = s;
        s *= t->shape[d];
    }
}

brg_status brg_tensor_init(brg_tensor *t, void *data, brg_dtype dtype, int ndim, const int64_t *shape,
                           brg_device *device)
{
    memset(t, 0, sizeof *t);
    if (ndim < 1 || ndim > BRG_MAX_DIMS)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "a tensor has 1 to %d dimensions, not %d", BRG_MAX_DIMS, ndim);
    if (dtype != BRG_F32 && dtype != BRG_I32)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "unknown tensor dtype %d", (int)dtype);
    /* The elements and their bytes must count in int64_t: 2^62 floats
     * wrapped to 0 bytes, and brg_tensor_alloc gave a 256-byte block to a
     * tensor of 2^62 elements. */
    int64_t elements = 1;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] < 0)
            return brg_error(BRG_ERR_INVALID_ARGUMENT, "dimension %d of a tensor is negative (%lld)", d,
                             (long long)shape[d]);
        if (shape[d] > 0 && elements > INT64_MAX / (int64_t)brg_dtype_size(dtype) / shape[d])
            return brg_error(BRG_ERR_INVALID_ARGUMENT, "a tensor of %d dimensions up to %lld (dimension %d) has "
                             "more bytes than 64 bits count", ndim, (long long)shape[d], d);
        elements *= shape[d];
        t->shape[d] = shape[d];
    }
    t->data = data;
    t->dtype = dtype;
    t->ndim = ndim;
    t->device = device;
    contiguous_strides(t);
    return BRG_OK;
}

brg_tensor brg_tensor_nchw(float *data, int64_t n, int64_t c, int64_t h, int64_t w)
{
    brg_tensor t;
    const int64_t shape[4] = {n, c, h, w};
    brg_tensor_init(&t, data, BRG_F32, 4, shape, NULL);
    return t;
}

int64_t brg_tensor_numel(const brg_tensor *t)
{
    int64_t n = 1;
    for (int d = 0; d < t->ndim; d++) n *= t->shape[d];
    return n;
}

size_t brg_tensor_bytes(const brg_tensor *t) { return (size_t)brg_tensor_numel(t) * brg_dtype_size(t->dtype); }

int brg_tensor_is_contiguous(const brg_tensor *t)
{
    int64_t s = 1;
    for (int d = t->ndim - 1; d >= 0; d--) {
        if (t->shape[d] != 1 && t->stride[d] != s) return 0;
        s *= t->shape[d];
    }
    return 1;
}

int brg_tensor_same_shape(const brg_tensor *a, const brg_tensor *b)
{
    if (a->ndim != b->ndim) return 0;
    for (int d = 0; d < a->ndim; d++)
        if (a->shape[d] != b->shape[d]) return 0;
    return 1;
}

brg_status brg_tensor_slice(const brg_tensor *t, int dim, int64_t start, int64_t length, brg_tensor *view)
{
    char s[64];
    if (dim < 0 || dim >= t->ndim)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "cannot slice dimension %d of a tensor %s", dim,
                         brg_tensor_shape_string(t, s, sizeof s));
    if (start < 0 || length < 0 || start > t->shape[dim] || length > t->shape[dim] - start) /* no overflow */
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "slice of %lld from %lld is outside dimension %d of a tensor %s",
                         (long long)length, (long long)start, dim, brg_tensor_shape_string(t, s, sizeof s));
    if (t->block && dim != 0)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "cannot slice dimension %d of a tensor %s blocked by %d channels",
                         dim, brg_tensor_shape_string(t, s, sizeof s), t->block);
    *view = *t;
    view->shape[dim] = length;
    if (t->data) view->data = (char *)t->data + (size_t)(start * t->stride[dim]) * brg_dtype_size(t->dtype);
    return BRG_OK;
}

brg_status brg_tensor_reshape(const brg_tensor *t, int ndim, const int64_t *shape, brg_tensor *view)
{
    char s[64];
    if (!brg_tensor_is_contiguous(t))
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "cannot reshape a non-contiguous tensor %s",
                         brg_tensor_shape_string(t, s, sizeof s));
    if (t->block)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "cannot reshape a tensor %s blocked by %d channels",
                         brg_tensor_shape_string(t, s, sizeof s), t->block);
    brg_tensor v;
    BRG_CHECK(brg_tensor_init(&v, t->data, t->dtype, ndim, shape, t->device));
    if (brg_tensor_numel(&v) != brg_tensor_numel(t)) {
        char s2[64];
        return brg_error(BRG_ERR_SHAPE, "cannot reshape a tensor %s to %s: element counts differ",
                         brg_tensor_shape_string(t, s, sizeof s), brg_tensor_shape_string(&v, s2, sizeof s2));
    }
    *view = v;
    return BRG_OK;
}

brg_status brg_tensor_set_block(brg_tensor *t, int block)
{
    char s[64];
    if (block == 0) {
        t->block = 0;
        return BRG_OK;
    }
    if (block < 0 || block > BRG_MAX_BLOCK || t->dtype != BRG_F32 || t->ndim != 4 || !brg_tensor_is_contiguous(t) ||
        t->shape[1] % block != 0)
        return brg_error(BRG_ERR_INVALID_ARGUMENT,
                         "cannot block a tensor %s by %d channels: blocking takes a contiguous float32 [N, C, H, W] "
                         "with C a multiple of the block, at most %d",
                         brg_tensor_shape_string(t, s, sizeof s), block, BRG_MAX_BLOCK);
    t->block = block;
    return BRG_OK;
}

/* Offset of element (n, c, i) (i the position in the H*W plane) in a
 * contiguous [n, c, h, w] tensor blocked by b (0: plain). */
static int64_t layout_offset(const brg_tensor *t, int64_t n, int64_t c, int64_t i)
{
    const int64_t ch = t->shape[1], plane = t->shape[2] * t->shape[3], b = t->block;
    if (!b) return (n * ch + c) * plane + i;
    return n * ch * plane + (c / b) * b * plane + i * b + c % b;
}

brg_status brg_tensor_copy_layout(const brg_tensor *src, const brg_tensor *dst)
{
    char s1[64], s2[64];
    if (!brg_tensor_same_shape(src, dst) || src->dtype != dst->dtype)
        return brg_error(BRG_ERR_SHAPE, "brg_tensor_copy_layout: a tensor %s cannot be copied into one %s",
                         brg_tensor_shape_string(src, s1, sizeof s1), brg_tensor_shape_string(dst, s2, sizeof s2));
    if (!brg_tensor_is_contiguous(src) || !brg_tensor_is_contiguous(dst))
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_tensor_copy_layout: both tensors must be contiguous");
    if (!src->block && !dst->block) {
        if (brg_tensor_bytes(src)) memmove(dst->data, src->data, brg_tensor_bytes(src));
        return BRG_OK;
    }
    const int64_t n = src->shape[0], c = src->shape[1], plane = src->shape[2] * src->shape[3];
    const float *from = src->data;
    float *to = dst->data;
    if (!src->block != !dst->block) { /* plain <-> blocked by b: each group of b planes transposed */
        const int64_t b = src->block ? src->block : dst->block;
        for (int64_t a = 0; a < n * c / b; a++) {
            const float *pf = from + a * b * plane;
            float *pt = to + a * b * plane;
            if (dst->block)
                for (int64_t k = 0; k < b; k++)
                    for (int64_t i = 0; i < plane; i++) pt[i * b + k] = pf[k * plane + i];
            else
                for (int64_t k = 0; k < b; k++)
                    for (int64_t i = 0; i < plane; i++) pt[k * plane + i] = pf[i * b + k];
        }
        return BRG_OK;
    }
    for (int64_t a = 0; a < n; a++)
        for (int64_t k = 0; k < c; k++)
            for (int64_t i = 0; i < plane; i++) to[layout_offset(dst, a, k, i)] = from[layout_offset(src, a, k, i)];
    return BRG_OK;
}

char *brg_tensor_shape_string(const brg_tensor *t, char *buf, size_t size)
{
    size_t len = 0;
    if (size == 0) return buf;
    buf[0] = '\0';
    len += (size_t)snprintf(buf + len, size - len, "[");
    for (int d = 0; d < t->ndim && len < size; d++)
        len += (size_t)snprintf(buf + len, size - len, "%s%lld", d ? ", " : "", (long long)t->shape[d]);
    if (len < size) snprintf(buf + len, size - len, "]");
    return buf;
}

