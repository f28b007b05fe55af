/* brigade: CPU kernels (private).
 *
 * One function per op kind, all with the kernel signature every backend
 * shares (brg_kernel, base/device-impl.h): the device comes first, for
 * per-device state a kernel may keep (none yet on the CPU). The device has
 * validated the op (brg_op_validate: counts, dtypes, shapes, contiguity)
 * before the call, and has set op->workspace to at least
 * brg_cpu_workspace_bytes(op) bytes. Kernels report failures through the
 * library's status and message, never by exiting.
 */
#ifndef BRIGADE_CPU_KERNELS_H
#define BRIGADE_CPU_KERNELS_H

#include <stddef.h>

#include "brigade/ops.h"
#include "base/device-impl.h"
#include "base/internal.h"

#ifdef __cplusplus
extern "C" {
#endif


/* conv2d.c */
brg_status brg_cpu_conv2d_forward(brg_device *dev, const brg_op *op);
brg_status brg_cpu_conv2d_backward_data(brg_device *dev, const brg_op *op);
brg_status brg_cpu_conv2d_backward_filter(brg_device *dev, const brg_op *op);
size_t brg_cpu_conv2d_workspace_bytes(const brg_op *op);
/* The image tensors of a conv op of any of the three kinds: x (dx, its
 * output, for backward data) and y (dy for the backward kinds). */
static inline const brg_tensor *brg_cpu_conv_x(const brg_op *op)
{
    return op->kind == BRG_OP_CONV2D_BACKWARD_DATA ? op->out[0] : op->in[0];
}

static inline const brg_tensor *brg_cpu_conv_y(const brg_op *op)
{
    return op->kind == BRG_OP_CONV2D_FORWARD ? op->out[0] : op->kind == BRG_OP_CONV2D_BACKWARD_DATA ? op->in[0]
                                                                                                 : op->in[1];
}
/* A positive byte count from environment variable name, else fallback:
 * the sizes kernels cut their work by, changed for tests (gemm.c). */
size_t brg_cpu_env_bytes(const char *name, size_t fallback);
/* conv2d-taps.c: small output planes, one GEMM per kernel tap over rows
 * of channels; chosen by shape before either implementation above. */
int brg_cpu_conv2d_taps_chosen(const brg_op *op);
size_t brg_cpu_conv2d_taps_workspace_bytes(const brg_op *op);
brg_status brg_cpu_conv2d_taps(const brg_op *op);

/* conv-choice.c: which implementation runs the three conv2d kinds,
 * oneDNN (the default where built) or im2col + OpenBLAS (conv2d.c). Chosen
 * once from BRG_CPU_CONV (onednn or im2col), or by brg_cpu_conv_select. */
typedef enum brg_cpu_conv_impl { BRG_CPU_CONV_IM2COL, BRG_CPU_CONV_ONEDNN } brg_cpu_conv_impl;
brg_cpu_conv_impl brg_cpu_conv_selected(void);
brg_status brg_cpu_conv_select(const char *name);
const char *brg_cpu_conv_name(brg_cpu_conv_impl impl);
/* The channel block of activations between layers (brigade/tensor.h):
 * oneDNN's block where it convolves and the layout chosen (BRG_CPU_LAYOUT,
 * brg_cpu_set_layout) is blocked, else 0; the device slot that reports it
 * (conv2d-onednn.c). brg_cpu_layout_selected_blocked: the choice alone
 * (conv-choice.c). */
int brg_cpu_layout_selected_blocked(void);
int brg_cpu_layout_block(void);
int brg_cpu_channel_block(brg_device *dev);
/* oneDNN's side (only with BRG_HAVE_ONEDNN): each returns 0 (*ran = 0)
 * for a shape oneDNN should not do (one it runs only as a GEMM, slower
 * than im2col), which im2col then runs, through plain copies of the
 * tensors that come blocked. brg_cpu_onednn_block: the channel block
 * oneDNN's convolutions choose on this machine (8 on AVX2, 16 on
 * AVX-512), 0 if it chooses plain. */
int brg_cpu_onednn_conv2d_workspace(const brg_op *op, size_t *bytes);
int brg_cpu_onednn_block(void);
brg_status brg_cpu_onednn_conv2d(const brg_op *op, int *ran);
/* Give the calling thread's oneDNN (OpenMP) calls brg_cpu_blas_threads()
 * (gemm.c). */
void brg_cpu_onednn_threads(void);
/* libgomp's, which oneDNN runs on; declared here so that no compiler needs
 * its omp.h. */
void omp_set_num_threads(int n);

/* linear.c */
brg_status brg_cpu_linear_forward(brg_device *dev, const brg_op *op);
brg_status brg_cpu_linear_backward_data(brg_device *dev, const brg_op *op);
brg_status brg_cpu_linear_backward_weight(brg_device *dev, const brg_op *op);

/* batchnorm.c */
brg_status brg_cpu_batchnorm_forward_train(brg_device *dev, const brg_op *op);
brg_status brg_cpu_batchnorm_forward_infer(brg_device *dev, const brg_op *op);
brg_status brg_cpu_batchnorm_backward(brg_device *dev, const brg_op *op);
brg_status brg_cpu_batchnorm_stats(brg_device *dev, const brg_op *op);
brg_status brg_cpu_batchnorm_backward_reduce(brg_device *dev, const brg_op *op);
brg_status brg_cpu_batchnorm_backward_elemt(brg_device *dev, const brg_op *op);

/* activation.c: ReLU and dropout */
brg_status brg_cpu_relu_forward(brg_device *dev, const brg_op *op);
brg_status brg_cpu_relu_backward(brg_device *dev, const brg_op *op);
brg_status brg_cpu_dropout_forward(brg_device *dev, const brg_op *op);
brg_status brg_cpu_dropout_backward(brg_device *dev, const brg_op *op);

/* pool.c */
brg_status brg_cpu_maxpool_forward(brg_device *dev, const brg_op *op);
brg_status brg_cpu_maxpool_backward(brg_device *dev, const brg_op *op);
brg_status brg_cpu_avgpool_forward(brg_device *dev, const brg_op *op);
brg_status brg_cpu_avgpool_backward(brg_device *dev, const brg_op *op);
brg_status brg_cpu_global_avgpool_forward(brg_device *dev, const brg_op *op);
brg_status brg_cpu_global_avgpool_backward(brg_device *dev, const brg_op *op);

/* join.c: concatenation and elementwise add */
brg_status brg_cpu_concat_forward(brg_device *dev, const brg_op *op);
brg_status brg_cpu_concat_backward(brg_device *dev, const brg_op *op);
brg_status brg_cpu_add_forward(brg_device *dev, const brg_op *op);
brg_status brg_cpu_add_backward(brg_device *dev, const brg_op *op);

/* loss.c */
brg_status brg_cpu_softmax_xent_forward(brg_device *dev, const brg_op *op);
brg_status brg_cpu_softmax_xent_backward(brg_device *dev, const brg_op *op);

/* upsample.c: nearest-neighbour upsampling */
brg_status brg_cpu_upsample_forward(brg_device *dev, const brg_op *op);
brg_status brg_cpu_upsample_backward(brg_device *dev, const brg_op *op);

/* optim.c: optimizer updates */
brg_status brg_cpu_sgd_update(brg_device *dev, const brg_op *op);
brg_status brg_cpu_adam_update(brg_device *dev, const brg_op *op);

/* reduce.c: reductions to one int32 */
brg_status brg_cpu_count_correct(brg_device *dev, const brg_op *op);
brg_status brg_cpu_check_finite(brg_device *dev, const brg_op *op);

/* The table from op kind to kernel (dispatch.c): every kind has one. */
extern const brg_kernel brg_cpu_kernels[BRG_OP_KIND_COUNT];

/* Workspace in bytes a validated op needs on the CPU (0 for most kinds). */
size_t brg_cpu_workspace_bytes(const brg_op *op);

/* BLAS threads while `devices` CPU devices compute at once (gemm.c). Each
 * device's kernels would otherwise start OpenBLAS's full thread count (and
 * the convolution's team as large), so four devices on two cores ran about
 * 5x slower. Gives each device an equal share of the threads (at least one)
 * and returns the count to restore with brg_cpu_threads_restore; leaves
 * everything alone (returns 0) for fewer than two devices or when the user
 * chose a count with OPENBLAS_NUM_THREADS or OMP_NUM_THREADS. */
int brg_cpu_threads_share(int devices);
void brg_cpu_threads_restore(int threads);
/* The threads one device's kernel may use now (OpenBLAS's count), and all
 * of them (OpenBLAS's count when the library was loaded). */
int brg_cpu_blas_threads(void);
int brg_cpu_all_threads(void);

/* Threads for one of our own kernels (BatchNorm, pooling, ReLU) doing
 * about `elems` elements of work: the device's share when oneDNN's OpenMP
 * pool is the one in use (built with OpenMP and BRG_CPU_CONV=onednn), 1
 * otherwise (a second pool beside OpenBLAS's would spin against it) and for
 * work too small to be worth waking the pool. Iterations of a
 * BRG_CPU_PARALLEL_FOR loop must be independent: each writes its own
 * elements, so the results are the same bits on any number of threads. */
int brg_cpu_kernel_threads(int64_t elems);
/* Run part(op, lo, len) over [0, n) cut into brg_cpu_kernel_threads(n)
 * nearly equal pieces, one per thread (gemm.c): for elementwise kernels,
 * whose pieces are independent. */
typedef void (*brg_cpu_part_fn)(const brg_op *op, int64_t lo, int64_t len);
void brg_cpu_split(const brg_op *op, int64_t n, brg_cpu_part_fn part);
#define BRG_CPU_PRAGMA(x) _Pragma(#x)
#ifdef _OPENMP
#define BRG_CPU_PARALLEL_FOR(threads)                                                                                  \
    BRG_CPU_PRAGMA(omp parallel for schedule(static) num_threads(threads) if ((threads) > 1))
#else
#define BRG_CPU_PARALLEL_FOR(threads)
#endif

#ifdef __cplusplus
}
#endif

#endif /* BRIGADE_CPU_KERNELS_H */
