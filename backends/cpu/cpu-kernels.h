/* brigade: CPU kernels (private).
 *
 * One function per op kind, all with the same signature. The device has
 * validated the op (brg_op_validate: counts, dtypes, shapes, contiguity)
 * before the call, and has set op->workspace to at least
 * brg_cpu_workspace_bytes(op) bytes. Kernels report failures through the
 * library's status and message, never by exiting.
 */
#ifndef BRIGADE_CPU_KERNELS_H
#define BRIGADE_CPU_KERNELS_H

#include <stddef.h>

#include "brigade/ops.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef brg_status (*brg_cpu_kernel)(const brg_op *op);

/* conv2d.c */
brg_status brg_cpu_conv2d_forward(const brg_op *op);
brg_status brg_cpu_conv2d_backward_data(const brg_op *op);
brg_status brg_cpu_conv2d_backward_filter(const brg_op *op);
size_t brg_cpu_conv2d_workspace_bytes(const brg_op *op);

/* linear.c */
brg_status brg_cpu_linear_forward(const brg_op *op);
brg_status brg_cpu_linear_backward_data(const brg_op *op);
brg_status brg_cpu_linear_backward_weight(const brg_op *op);

/* batchnorm.c */
brg_status brg_cpu_batchnorm_forward_train(const brg_op *op);
brg_status brg_cpu_batchnorm_forward_infer(const brg_op *op);
brg_status brg_cpu_batchnorm_backward(const brg_op *op);

/* activation.c: ReLU and dropout */
brg_status brg_cpu_relu_forward(const brg_op *op);
brg_status brg_cpu_relu_backward(const brg_op *op);
brg_status brg_cpu_dropout_forward(const brg_op *op);
brg_status brg_cpu_dropout_backward(const brg_op *op);

/* pool.c */
brg_status brg_cpu_maxpool_forward(const brg_op *op);
brg_status brg_cpu_maxpool_backward(const brg_op *op);
brg_status brg_cpu_avgpool_forward(const brg_op *op);
brg_status brg_cpu_avgpool_backward(const brg_op *op);
brg_status brg_cpu_global_avgpool_forward(const brg_op *op);
brg_status brg_cpu_global_avgpool_backward(const brg_op *op);

/* join.c: concatenation and elementwise add */
brg_status brg_cpu_concat_forward(const brg_op *op);
brg_status brg_cpu_concat_backward(const brg_op *op);
brg_status brg_cpu_add_forward(const brg_op *op);
brg_status brg_cpu_add_backward(const brg_op *op);

/* loss.c */
brg_status brg_cpu_softmax_xent_forward(const brg_op *op);
brg_status brg_cpu_softmax_xent_backward(const brg_op *op);

/* upsample.c: nearest-neighbour upsampling */
brg_status brg_cpu_upsample_forward(const brg_op *op);
brg_status brg_cpu_upsample_backward(const brg_op *op);

/* optim.c: optimizer updates */
brg_status brg_cpu_sgd_update(const brg_op *op);
brg_status brg_cpu_adam_update(const brg_op *op);

/* The kernel for a kind (never NULL for a kind < BRG_OP_KIND_COUNT). */
brg_cpu_kernel brg_cpu_kernel_for(brg_op_kind kind);

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

#ifdef __cplusplus
}
#endif

#endif /* BRIGADE_CPU_KERNELS_H */
