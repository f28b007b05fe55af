/* CPU kernels: concatenation along channels and elementwise add.
 *
 * In contiguous NCHW, sample n of a part with C_i channels is one block of
 * C_i*H*W floats, and sample n of the whole is the parts' blocks back to
 * back. So concat and its backward are block copies, no index arithmetic per
 * element. Like the other elementwise kernels they split over the device's
 * share of the cores (brg_cpu_kernel_threads), each thread writing its own
 * elements. */
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

/* The block copies of a concatenation, one task per (sample, part),
 * split over the device's threads: each task writes its own block, so
 * the bits do not depend on the thread count. backward: dy to the parts
 * (adding when op->accumulate), else the parts to y. */
static void concat_copies(const brg_op *op, int backward)
{
    const brg_tensor *whole_t = backward ? op->in[0] : op->out[0];
    const int parts = backward ? op->n_out : op->n_in;
    const int64_t batch = whole_t->shape[0], plane = whole_t->shape[2] * whole_t->shape[3];
    const int64_t whole = whole_t->shape[1] * plane;
    int64_t at[BRG_OP_MAX_TENSORS]; /* offset of part i's block within one sample */
    int64_t off = 0;
    for (int i = 0; i < parts; i++) {
        at[i] = off;
        off += (backward ? op->out[i] : op->in[i])->shape[1] * plane;
    }
    const int threads = brg_cpu_kernel_threads(batch * whole);
    BRG_CPU_PARALLEL_FOR(threads)
    for (int64_t t = 0; t < batch * parts; t++) {
        const int64_t n = t / parts;
        const int i = (int)(t % parts);
        const brg_tensor *part = backward ? op->out[i] : op->in[i];
        const int64_t block = part->shape[1] * plane;
        float *w = (float *)whole_t->data + n * whole + at[i], *x = (float *)part->data + n * block;
        if (backward) copy_or_add(x, w, block, op->accumulate);
        else copy_or_add(w, x, block, 0);
    }
}

/* y[n] = x0[n] | x1[n] | ... along channels, for every sample n. */
brg_status brg_cpu_concat_forward(brg_device *dev BRG_UNUSED, const brg_op *op)
{
    concat_copies(op, 0);
    return BRG_OK;
}

/* dx_i[n] = the channels of dy[n] that came from part i. */
brg_status brg_cpu_concat_backward(brg_device *dev BRG_UNUSED, const brg_op *op)
{
    concat_copies(op, 1);
    return BRG_OK;
}

/* y = a + b elementwise; y may alias a or b (each element is read before
 * it is written, within one part). */
static void add_part(const brg_op *op, int64_t lo, int64_t len)
{
    const float *a = (const float *)op->in[0]->data + lo, *b = (const float *)op->in[1]->data + lo;
    float *y = (float *)op->out[0]->data + lo;
    for (int64_t i = 0; i < len; i++) y[i] = a[i] + b[i];
}

brg_status brg_cpu_add_forward(brg_device *dev BRG_UNUSED, const brg_op *op)
{
    brg_cpu_split(op, brg_tensor_numel(op->in[0]), add_part);
    return BRG_OK;
}

/* da = dy and db = dy (each added when accumulating); an output that is
 * absent (NULL, or beyond n_out) is a branch that needs no gradient. */
static void add_backward_part(const brg_op *op, int64_t lo, int64_t len)
{
    const float *dy = (const float *)op->in[0]->data + lo;
    for (int i = 0; i < op->n_out && i < 2; i++)
        if (op->out[i]) copy_or_add((float *)op->out[i]->data + lo, dy, len, op->accumulate);
}

brg_status brg_cpu_add_backward(brg_device *dev BRG_UNUSED, const brg_op *op)
{
    brg_cpu_split(op, brg_tensor_numel(op->in[0]), add_backward_part);
    return BRG_OK;
}
