/* CPU kernels: concatenation along channels and elementwise add.
 *
 * In contiguous NCHW, sample n of a part with C_i channels is one block of
 * C_i*H*W floats, and sample n of the whole is the parts' blocks back to
 * back. So concat and its backward are block copies, no index arithmetic per
 * element. */
#include <stdint.h>
#include <string.h>

#include "cpu-kernels.h"

/* dst = src, or dst += src when accumulate is set. dst == src is allowed
 * (an in-place gradient): the plain copy is then skipped. */
static void copy_or_add(float *dst, const float *src, int64_t n, int accumulate)
{
    if (accumulate) {
        for (int64_t i = 0; i < n; i++) dst[i] += src[i];
    } else if (dst != src && n > 0) {
        memcpy(dst, src, (size_t)n * sizeof *dst);
    }
}

/* y[n] = x0[n] | x1[n] | ... along channels, for every sample n. */
brg_status brg_cpu_concat_forward(brg_device *dev BRG_UNUSED, const brg_op *op)
{
    const brg_tensor *y = op->out[0];
    int64_t batch = y->shape[0];
    int64_t plane = y->shape[2] * y->shape[3];
    int64_t whole = y->shape[1] * plane;
    float *dst = y->data;
    int64_t at = 0; /* offset of part i's block within one sample of y */
    for (int i = 0; i < op->n_in; i++) {
        const float *src = op->in[i]->data;
        int64_t block = op->in[i]->shape[1] * plane;
        for (int64_t n = 0; n < batch; n++) copy_or_add(dst + n * whole + at, src + n * block, block, 0);
        at += block;
    }
    return BRG_OK;
}

/* dx_i[n] = the channels of dy[n] that came from part i. */
brg_status brg_cpu_concat_backward(brg_device *dev BRG_UNUSED, const brg_op *op)
{
    const brg_tensor *dy = op->in[0];
    int64_t batch = dy->shape[0];
    int64_t plane = dy->shape[2] * dy->shape[3];
    int64_t whole = dy->shape[1] * plane;
    const float *src = dy->data;
    int64_t at = 0;
    for (int i = 0; i < op->n_out; i++) {
        float *dst = op->out[i]->data;
        int64_t block = op->out[i]->shape[1] * plane;
        for (int64_t n = 0; n < batch; n++) copy_or_add(dst + n * block, src + n * whole + at, block, op->accumulate);
        at += block;
    }
    return BRG_OK;
}

/* y = a + b elementwise; y may alias a or b. */
brg_status brg_cpu_add_forward(brg_device *dev BRG_UNUSED, const brg_op *op)
{
    const float *a = op->in[0]->data;
    const float *b = op->in[1]->data;
    float *y = op->out[0]->data;
    int64_t n = brg_tensor_numel(op->in[0]);
    for (int64_t i = 0; i < n; i++) y[i] = a[i] + b[i];
    return BRG_OK;
}

/* da = dy and db = dy (each added when accumulating); an output that is
 * absent (NULL, or beyond n_out) is a branch that needs no gradient. */
brg_status brg_cpu_add_backward(brg_device *dev BRG_UNUSED, const brg_op *op)
{
    const float *dy = op->in[0]->data;
    int64_t n = brg_tensor_numel(op->in[0]);
    for (int i = 0; i < op->n_out && i < 2; i++)
        if (op->out[i]) copy_or_add(op->out[i]->data, dy, n, op->accumulate);
    return BRG_OK;
}
