/* CPU kernels: ReLU and inverted dropout.
 *
 * All four are elementwise over contiguous tensors of one shape, so each is a
 * single flat loop. Reading element i before writing element i makes them
 * safe when the output aliases an input (ReLU forward in place, for one). */
#include <stdint.h>

#include "cpu-kernels.h"
#include "base/rng.h"

static void relu_in_place(float *y, int64_t n)
{
    for (int64_t i = 0; i < n; i++) y[i] = y[i] < 0.0f ? 0.0f : y[i];
}

static void relu_apart(const float *restrict x, float *restrict y, int64_t n)
{
    for (int64_t i = 0; i < n; i++) y[i] = x[i] < 0.0f ? 0.0f : x[i];
}

/* y = max(x, 0). A NaN passes through (as in PyTorch) so that a diverging
 * run shows up in the loss instead of being silently zeroed here.
 * In place (the usual case after a BatchNorm) and apart are separate loops:
 * one loop over x and y, which may be equal, vectorizes only behind a
 * run-time overlap check, and in place that check fails and the scalar,
 * branching loop ran: 9.5 ms for fmnist-cnn's first ReLU at batch 64. */
static void relu_forward_part(const brg_op *op, int64_t lo, int64_t len)
{
    const float *x = op->in[0]->data;
    float *y = op->out[0]->data;
    if (x == y) relu_in_place(y + lo, len);
    else relu_apart(x + lo, y + lo, len);
}

brg_status brg_cpu_relu_forward(brg_device *dev BRG_UNUSED, const brg_op *op)
{
    brg_cpu_split(op, brg_tensor_numel(op->in[0]), relu_forward_part);
    return BRG_OK;
}

/* dx = dy where the forward output y is positive, 0 elsewhere. Using y rather
 * than x lets the forward overwrite x in place; y > 0 iff x > 0. The
 * subgradient at 0 is taken as 0. dy is loaded unconditionally so the
 * select has no control flow and the loop vectorizes (a branch on the sign
 * of activations mispredicts half the time). */
static void relu_backward_part(const brg_op *op, int64_t lo, int64_t len)
{
    const float *y = (const float *)op->in[0]->data + lo;
    const float *dy = (const float *)op->in[1]->data + lo;
    float *dx = (float *)op->out[0]->data + lo;
    if (op->accumulate) {
        for (int64_t i = 0; i < len; i++) {
            float g = dy[i];
            dx[i] += y[i] > 0.0f ? g : 0.0f;
        }
    } else {
        for (int64_t i = 0; i < len; i++) {
            float g = dy[i];
            dx[i] = y[i] > 0.0f ? g : 0.0f;
        }
    }
}

brg_status brg_cpu_relu_backward(brg_device *dev BRG_UNUSED, const brg_op *op)
{
    brg_cpu_split(op, brg_tensor_numel(op->in[0]), relu_backward_part);
    return BRG_OK;
}

/* Multiply src by the dropout mask scaled by 1/(1 - rate) into dst (adding
 * when accumulate is set), over elements [lo, lo + len) of one part. The
 * mask is regenerated from (seed, offset + i), which is what lets the
 * backward run without a stored mask, and gives every part the mask of a
 * single pass. A dropped element is exactly 0 even when src holds an Inf
 * or NaN, so the keep bit selects the value rather than multiplying by 0;
 * a select, not a branch, which would mispredict at any useful rate. */
static void dropout_part(const brg_op *op, int64_t lo, int64_t len)
{
    const brg_dropout_params *d = &op->p.dropout;
    const float *src = (const float *)op->in[0]->data + lo;
    float *dst = (float *)op->out[0]->data + lo;
    const uint64_t first = d->offset + (uint64_t)lo;
    const float scale = 1.0f / (1.0f - d->rate);
    if (op->accumulate) {
        for (int64_t i = 0; i < len; i++) {
            float v = src[i] * scale;
            dst[i] += brg_dropout_keep_inline(d->seed, first + (uint64_t)i, d->rate) ? v : 0.0f;
        }
    } else {
        for (int64_t i = 0; i < len; i++) {
            float v = src[i] * scale;
            dst[i] = brg_dropout_keep_inline(d->seed, first + (uint64_t)i, d->rate) ? v : 0.0f;
        }
    }
}

/* The forward has no accumulate (validation refuses it), so one part
 * function serves both passes: the backward of a fixed mask-and-scale is
 * the same mask-and-scale. */
brg_status brg_cpu_dropout_forward(brg_device *dev BRG_UNUSED, const brg_op *op)
{
    brg_cpu_split(op, brg_tensor_numel(op->in[0]), dropout_part);
    return BRG_OK;
}

brg_status brg_cpu_dropout_backward(brg_device *dev BRG_UNUSED, const brg_op *op)
{
    brg_cpu_split(op, brg_tensor_numel(op->in[0]), dropout_part);
    return BRG_OK;
}
