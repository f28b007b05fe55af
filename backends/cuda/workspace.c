/* Sizes the CUDA backend's devices take, as pure functions: the workspace
 * of its ops (brg_cuda_workspace_bytes in cuda-ops.h), what a whole-GPU
 * device leaves outside its arena (brg_cuda_reserve_bytes) and the arena
 * it keeps (brg_cuda_whole_arena), and whether a card fits a GPU
 * (brg_cuda_card_fits).
 *
 * Plain C with no CUDA in it, so a planner on any machine (GPU or not, CUDA
 * toolkit or not) gives a planning device of a CUDA target what the real
 * device will take from its arena. A pure function of the op's shapes and
 * the budget: the CUDA kernels then never use more than this says (the
 * convolution picks the fastest cuDNN algorithm that fits it), except that
 * with BRG_CUDA_CONV_WORKSPACE_GROW=1 a convolution gradient is lent its
 * whole bound (brg_cuda_workspace_wanted, the formula below without the
 * budget) where the bytes in use stay within the device's workspace
 * ceiling (the plan's peak), which never raises a peak (base/device.c).
 *
 *   convolutions   min(budget, the larger of N*C*R*S*P*Q floats and the
 *                  bytes of x, w and y together, + 1 MiB): the whole
 *                  batch's im2col matrix, which is what the explicit-GEMM
 *                  algorithms need, or a copy of the three tensors in
 *                  another layout, which tensor-core kernels on NCHW data
 *                  may take (for a 1x1 convolution that widens, y alone
 *                  outgrows the im2col matrix), plus room for the small
 *                  index tables of the implicit ones. Algorithms that want
 *                  more (FFT, Winograd on large tiles) are passed over
 *                  unless they fit.
 *   softmax xent   forward: one double per row (the per-row losses, summed
 *                  in a fixed order into the mean); per pixel, two per
 *                  block of the loss kernel (its sums of losses and counts).
 *   batchnorm      training forward and backward: each channel's partial
 *                  sums (2 or 4 doubles per chunk) and its coefficients.
 *   everything else 0: our own kernels reduce within a block.
 */
#include <stdint.h>
#include <stdio.h>

#include "base/internal.h"
#include "cuda-device.h"
#include "cuda-ops.h"

#define SLACK ((size_t)1 << 20)

/* a * b, saturating at SIZE_MAX instead of wrapping. */
static size_t mul_sat(size_t a, size_t b)
{
    if (a != 0 && b > SIZE_MAX / a) return SIZE_MAX;
    return a * b;
}

void brg_cuda_conv_tensors(const brg_op *op, const brg_tensor **x, const brg_tensor **w, const brg_tensor **y)
{
    switch (op->kind) {
    case BRG_OP_CONV2D_FORWARD: *x = op->in[0], *w = op->in[1], *y = op->out[0]; break;
    case BRG_OP_CONV2D_BACKWARD_DATA: *x = op->out[0], *w = op->in[1], *y = op->in[0]; break;
    default: *x = op->in[0], *w = op->out[0], *y = op->in[1]; break;
    }
}

/* a + b, saturating. */
static size_t add_sat(size_t a, size_t b) { return a > SIZE_MAX - b ? SIZE_MAX : a + b; }

/* Bytes of the floats of a tensor of shape dims (saturating). */
static size_t floats_bytes(const int64_t *dims, int n)
{
    size_t bytes = sizeof(float);
    for (int i = 0; i < n; i++) bytes = mul_sat(bytes, dims[i] > 0 ? (size_t)dims[i] : 0);
    return bytes;
}

/* The bound of a convolution op of any of the three kinds: its im2col
 * matrix or its three tensors, whichever is larger, and the slack. */
static size_t conv_bound(const brg_op *op)
{
    const brg_tensor *x, *w, *y;
    brg_cuda_conv_tensors(op, &x, &w, &y);
    const int64_t im2col[] = {x->shape[0], w->shape[1], w->shape[2], w->shape[3], y->shape[2], y->shape[3]};
    const size_t cols = floats_bytes(im2col, 6);
    const size_t copies =
        add_sat(add_sat(floats_bytes(x->shape, 4), floats_bytes(w->shape, 4)), floats_bytes(y->shape, 4));
    return add_sat(cols > copies ? cols : copies, SLACK);
}

size_t brg_cuda_workspace_bytes(const brg_op *op, size_t conv_budget)
{
    switch (op->kind) {
    case BRG_OP_CONV2D_FORWARD:
    case BRG_OP_CONV2D_BACKWARD_DATA:
    case BRG_OP_CONV2D_BACKWARD_FILTER: {
        size_t bound = conv_bound(op);
        return bound < conv_budget ? bound : conv_budget;
    }
    case BRG_OP_SOFTMAX_XENT_FORWARD: return brg_cuda_xent_workspace_bytes(op->in[0]);
    case BRG_OP_BATCHNORM_FORWARD_TRAIN:
    case BRG_OP_BATCHNORM_BACKWARD: return brg_cuda_bn_workspace_bytes(op);
    default: return 0;
    }
}

size_t brg_cuda_workspace_wanted(const brg_op *op)
{
    switch (op->kind) {
    case BRG_OP_CONV2D_BACKWARD_DATA:
    case BRG_OP_CONV2D_BACKWARD_FILTER: return conv_bound(op);
    default: return 0; /* forwards keep the budget: a recompute's replay must choose as its first forward did */
    }
}

/* At least BN_MIN_CHUNK elements a block (a block of 256 threads sums 8
 * each), and about BN_BLOCKS blocks in all. */
#define BN_MIN_CHUNK 2048
#define BN_BLOCKS 1024

int brg_cuda_bn_splits(int64_t channels, int64_t batch_plane)
{
    if (channels <= 0 || batch_plane <= 0) return 1;
    int64_t s = (batch_plane + BN_MIN_CHUNK - 1) / BN_MIN_CHUNK, most = BN_BLOCKS / channels;
    if (s > most) s = most;
    return (int)(s < 1 ? 1 : s);
}

size_t brg_cuda_bn_workspace_bytes(const brg_op *op)
{
    const brg_tensor *x = op->in[0];
    if ((op->kind != BRG_OP_BATCHNORM_FORWARD_TRAIN && op->kind != BRG_OP_BATCHNORM_BACKWARD) || x->ndim != 4)
        return 0;
    const int64_t c = x->shape[1], m = x->shape[0] * x->shape[2] * x->shape[3];
    if (c <= 0 || m <= 0) return 0;
    const size_t splits = (size_t)brg_cuda_bn_splits(c, m), ch = (size_t)c;
    if (op->kind == BRG_OP_BATCHNORM_FORWARD_TRAIN)
        return mul_sat(ch,
                       splits * BRG_CUDA_BN_FORWARD_SUMS * sizeof(double) + BRG_CUDA_BN_FORWARD_COEFS * sizeof(float));
    return mul_sat(ch, (splits * BRG_CUDA_BN_BACKWARD_SUMS + BRG_CUDA_BN_BACKWARD_COEFS) * sizeof(double));
}

int brg_cuda_xent_pixel_blocks(int64_t rows)
{
    const int64_t threads = 256, most = 1024, b = (rows + threads - 1) / threads;
    return (int)(b > most ? most : b < 1 ? 1 : b);
}

size_t brg_cuda_xent_workspace_bytes(const brg_tensor *logits)
{
    const int64_t n = logits->shape[0], px = logits->ndim == 4 ? logits->shape[2] * logits->shape[3] : 1;
    if (n * px <= 0) return 0;
    if (px == 1) return mul_sat((size_t)n, sizeof(double));
    return 2 * (size_t)brg_cuda_xent_pixel_blocks(n * px) * sizeof(double);
}

size_t brg_cuda_reserve_bytes(size_t card_memory)
{
    size_t r = ((size_t)512 << 20) + card_memory / 20;
    return (r + BRG_ARENA_ALIGN - 1) / BRG_ARENA_ALIGN * BRG_ARENA_ALIGN;
}

size_t brg_cuda_spec_workspace_bytes(const brg_op *op, const brg_device_spec *spec)
{
    return brg_cuda_workspace_bytes(op, spec->conv_workspace ? spec->conv_workspace : BRG_CUDA_CONV_WORKSPACE_DEFAULT);
}

size_t brg_cuda_spec_workspace_wanted(const brg_op *op, const brg_device_spec *spec)
{
    (void)spec;
    return brg_cuda_workspace_wanted(op);
}

brg_status brg_cuda_whole_arena(const brg_device_spec *spec, size_t total, size_t *arena)
{
    const size_t reserve = brg_cuda_reserve_bytes(total);
    *arena = total > reserve ? total - reserve : 0;
    if (*arena >= BRG_ARENA_ALIGN) return BRG_OK;
    *arena = 0;
    char name[32], b1[32], b2[32];
    brg_device_spec_name(spec, 0, name, sizeof name);
    brg_format_bytes(total, b1, sizeof b1);
    brg_format_bytes(reserve, b2, sizeof b2);
    if (spec->card)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "device '%s': a card of %s leaves nothing beside the %s kept for "
                         "the CUDA context and libraries (512 MiB + 5%%); name the card's whole memory, as brigade "
                         "info gives it where the card is", name, b1, b2);
    return brg_error(BRG_ERR_INVALID_ARGUMENT, "device '%s': the GPU's %s are less than the %s kept for the CUDA "
                     "context and libraries", name, b1, b2);
}

brg_status brg_cuda_card_fits(const brg_device_spec *spec, size_t total)
{
    if (spec->card <= total) return BRG_OK;
    char name[32], b1[32], b2[32];
    brg_device_spec_name(spec, 0, name, sizeof name);
    /* The GPU's memory in whole MiB, rounded down, so that the card the
     * message suggests is never refused (79.18 GiB would be). */
    return brg_error(BRG_ERR_INVALID_ARGUMENT, "device '%s': GPU %d has %zu MiB (%s), less than the card of %s named; "
                     "CUDA counts a little less than nvidia-smi's memory.total, which includes what the driver "
                     "keeps. Name a card of at most %s@%zuMiB, or take the GPU as it is (%s)", name, spec->gpu,
                     total >> 20, brg_format_bytes(total, b2, sizeof b2), brg_format_bytes(spec->card, b1, sizeof b1),
                     name, total >> 20, name);
}
