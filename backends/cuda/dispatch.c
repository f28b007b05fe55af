/* The CUDA backend's table from op kind to kernel (cuda-exec.h). */
#include "config.h"

#include "backends/cuda/cuda-exec.h"

const brg_kernel brg_cuda_kernels[BRG_OP_KIND_COUNT] = {
    [BRG_OP_CONV2D_FORWARD] = brg_cuda_op_conv2d,
    [BRG_OP_CONV2D_BACKWARD_DATA] = brg_cuda_op_conv2d,
    [BRG_OP_CONV2D_BACKWARD_FILTER] = brg_cuda_op_conv2d,
    [BRG_OP_BATCHNORM_FORWARD_TRAIN] = brg_cuda_op_batchnorm,
    [BRG_OP_BATCHNORM_FORWARD_INFER] = brg_cuda_op_batchnorm,
    [BRG_OP_BATCHNORM_BACKWARD] = brg_cuda_op_batchnorm,
    [BRG_OP_RELU_FORWARD] = brg_cuda_op_relu_forward,
    [BRG_OP_RELU_BACKWARD] = brg_cuda_op_relu_backward,
    [BRG_OP_MAXPOOL_FORWARD] = brg_cuda_op_maxpool_forward,
    [BRG_OP_MAXPOOL_BACKWARD] = brg_cuda_op_maxpool_backward,
    [BRG_OP_AVGPOOL_FORWARD] = brg_cuda_op_avgpool_forward,
    [BRG_OP_AVGPOOL_BACKWARD] = brg_cuda_op_avgpool_backward,
    [BRG_OP_GLOBAL_AVGPOOL_FORWARD] = brg_cuda_op_global_avgpool_forward,
    [BRG_OP_GLOBAL_AVGPOOL_BACKWARD] = brg_cuda_op_global_avgpool_backward,
    [BRG_OP_CONCAT_FORWARD] = brg_cuda_op_concat,
    [BRG_OP_CONCAT_BACKWARD] = brg_cuda_op_concat,
    [BRG_OP_ADD_FORWARD] = brg_cuda_op_add_forward,
    [BRG_OP_ADD_BACKWARD] = brg_cuda_op_add_backward,
    [BRG_OP_LINEAR_FORWARD] = brg_cuda_op_linear,
    [BRG_OP_LINEAR_BACKWARD_DATA] = brg_cuda_op_linear,
    [BRG_OP_LINEAR_BACKWARD_WEIGHT] = brg_cuda_op_linear,
    [BRG_OP_DROPOUT_FORWARD] = brg_cuda_op_dropout,
    [BRG_OP_DROPOUT_BACKWARD] = brg_cuda_op_dropout,
    [BRG_OP_SOFTMAX_XENT_FORWARD] = brg_cuda_op_softmax_xent,
    [BRG_OP_SOFTMAX_XENT_BACKWARD] = brg_cuda_op_softmax_xent,
    [BRG_OP_UPSAMPLE_FORWARD] = brg_cuda_op_upsample_forward,
    [BRG_OP_UPSAMPLE_BACKWARD] = brg_cuda_op_upsample_backward,
    [BRG_OP_SGD_UPDATE] = brg_cuda_op_sgd_update,
    [BRG_OP_ADAM_UPDATE] = brg_cuda_op_adam_update,
    [BRG_OP_COUNT_CORRECT] = brg_cuda_op_count_correct,
    [BRG_OP_CHECK_FINITE] = brg_cuda_op_check_finite,
};
