/* brigade: the CUDA backend's ops (private).
 *
 * The kernels behind the CUDA device (backends/cuda/device.c): every op
 * kind of brigade/ops.h with the meaning the CPU backend gives it. cuDNN
 * runs convolutions, cuBLAS the fully connected layers, and kernels of our
 * own (the .cu files here) the rest: batch norm, pools, the loss, concat,
 * add, dropout, upsample, the optimizer updates (see conv.c for why).
 * cuda-exec.h has the kernels and their table.
 *
 * Workspace is planned, not discovered. brg_cuda_workspace_bytes is a pure
 * function of the op and the device's convolution workspace budget; it
 * needs no GPU, so the planner (backends/planning/device.c) gives a planning
 * device of a CUDA target exactly the workspace the real device will take
 * from its arena. The convolution algorithm is then the fastest one whose
 * workspace fits what was planned.
 */
#ifndef BRIGADE_CUDA_OPS_H
#define BRIGADE_CUDA_OPS_H

#include <stddef.h>

#include "brigade/ops.h"
#include "brigade/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* How many convolution shapes CUDA device dev chose its algorithm for by
 * timing them (BRG_CUDA_CONV_ALGO=measure): for tests. In conv.c, built
 * with the CUDA backend only. */
int brg_cuda_measured_choices(brg_device *dev);
/* How many convolutions ran as cuBLAS GEMMs (BRG_CUDA_CONV_1X1=gemm,
 * conv-gemm.c) in form (conv-gemm.h: BRG_CONV_GEMM_FILTER or _DATA): for
 * tests. */
int brg_cuda_gemm_convs(brg_device *dev, int form);
/* How many convolution shapes CUDA device dev runs on cuDNN's graph API
 * (BRG_CUDA_CONV_API=graph), and in *fell_back how many the graph API
 * could not run (the legacy API runs them), in *measured how many of the
 * graph's plans were picked by timing; either pointer may be NULL. For
 * tests; in conv-graph.c, built with the CUDA backend only. */
int brg_cuda_graph_plans(brg_device *dev, int *fell_back, int *measured);
/* The same for one op kind (brg_op_kind) and beta (accumulate 1: the plan
 * adds into its output), *fell_back may be NULL. */
int brg_cuda_graph_plans_of(brg_device *dev, int kind, int accumulate, int *fell_back);

/* Default per-device budget for one convolution's workspace. */
#define BRG_CUDA_CONV_WORKSPACE_DEFAULT ((size_t)64 << 20)

/* Workspace (bytes of device memory) a validated op takes on a CUDA device
 * whose convolution workspace budget is conv_budget. Plain C, compiled in
 * every build (backends/cuda/workspace.c). */
size_t brg_cuda_workspace_bytes(const brg_op *op, size_t conv_budget);
/* The workspace with which op could run its fastest: a convolution
 * gradient's bound (workspace.c) whatever the budget, 0 for other kinds
 * (forwards too: a recompute's replay, in the backward, must choose the
 * algorithm its first forward chose, so a forward's workspace must not
 * depend on when it runs). The device lends it instead where the bytes in
 * use stay within its workspace ceiling (brg_device_run), so peaks stay as
 * planned with the budget. */
size_t brg_cuda_workspace_wanted(const brg_op *op);

/* The softmax cross-entropy forward's share of it for logits [n, k] or
 * [n, k, H, W], and the grid of its per-pixel kernel (blocks of 256
 * threads, at most 1024, each leaving two partial sums). */
size_t brg_cuda_xent_workspace_bytes(const brg_tensor *logits);
int brg_cuda_xent_pixel_blocks(int64_t rows);

/* Training BatchNorm (forward and backward): the chunks each channel's
 * sums are split into, so that the GPU has about a thousand blocks of work
 * however few the channels, and the workspace of op (0 for other kinds). */
int brg_cuda_bn_splits(int64_t channels, int64_t batch_plane);
size_t brg_cuda_bn_workspace_bytes(const brg_op *op);
/* Its layout (ops_kernels.cu writes it, workspace.c counts it): channels x
 * splits x 2 doubles of partial sums, then BRG_CUDA_BN_FORWARD_COEFS floats
 * a channel, forward; channels x splits x 4 doubles, then
 * BRG_CUDA_BN_BACKWARD_COEFS doubles a channel, backward. */
#define BRG_CUDA_BN_FORWARD_SUMS 2
#define BRG_CUDA_BN_FORWARD_COEFS 4
#define BRG_CUDA_BN_BACKWARD_SUMS 4
#define BRG_CUDA_BN_BACKWARD_COEFS 6

/* The input x, filter w and output y of a convolution op of any of the
 * three kinds, wherever the kind keeps them in in[] and out[] (ops.h). */
void brg_cuda_conv_tensors(const brg_op *op, const brg_tensor **x, const brg_tensor **w, const brg_tensor **y);

#if defined(BRG_HAVE_CUDA) && defined(BRG_HAVE_CUDNN)
/* The ops need cuDNN (exec.c, conv.c, linear.c, ops.c and dispatch.c are built only with it): a
 * CUDA build without cuDNN has no exec, and its CUDA device refuses to be
 * created. */

/* What an op runs with: one per device, owned by the device. */
typedef struct brg_cuda_exec brg_cuda_exec;

/* Make the per-device state on GPU gpu (which the caller has made current
 * with cudaSetDevice): cuDNN and cuBLAS handles bound to stream (a
 * cudaStream_t), and the algorithm cache. name ("cuda:0.3") is used in
 * messages. */
brg_status brg_cuda_exec_create(int gpu, void *stream, const char *name, size_t conv_budget,
                                brg_cuda_exec **out);
void brg_cuda_exec_destroy(brg_cuda_exec *exec);

/* Surface errors found on the device by kernels since the last call (a
 * label out of range in the loss); call after synchronizing. */
brg_status brg_cuda_exec_check(brg_cuda_exec *exec);
#endif

#ifdef __cplusplus
}
#endif

#endif /* BRIGADE_CUDA_OPS_H */
