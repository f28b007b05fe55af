/* The CPU backend's table from op kind to kernel. */
#include "cpu-kernels.h"

const brg_kernel brg_cpu_kernels[BRG_OP_KIND_COUNT] = {
    [BRG_OP_CONV2D_FORWARD] = brg_cpu_conv2d_forward,
    [BRG_OP_CONV2D_BACKWARD_DATA] = brg_cpu_conv2d_backward_data,
    [BRG_OP_CONV2D_BACKWARD_FILTER] = brg_cpu_conv2d_backward_filter,
    [BRG_OP_BATCHNORM_FORWARD_TRAIN] = brg_cpu_batchnorm_forward_train,
    [BRG_OP_BATCHNORM_FORWARD_INFER] = brg_cpu_batchnorm_forward_infer,
    [BRG_OP_BATCHNORM_BACKWARD] = brg_cpu_batchnorm_backward,
    [BRG_OP_BATCHNORM_STATS] = brg_cpu_batchnorm_stats,
    [BRG_OP_BATCHNORM_BACKWARD_REDUCE] = brg_cpu_batchnorm_backward_reduce,
    [BRG_OP_BATCHNORM_BACKWARD_ELEMT] = brg_cpu_batchnorm_backward_elemt,
    [BRG_OP_RELU_FORWARD] = brg_cpu_relu_forward,
    [BRG_OP_RELU_BACKWARD] = brg_cpu_relu_backward,
    [BRG_OP_MAXPOOL_FORWARD] = brg_cpu_maxpool_forward,
    [BRG_OP_MAXPOOL_BACKWARD] = brg_cpu_maxpool_backward,
    [BRG_OP_AVGPOOL_FORWARD] = brg_cpu_avgpool_forward,
    [BRG_OP_AVGPOOL_BACKWARD] = brg_cpu_avgpool_backward,
    [BRG_OP_GLOBAL_AVGPOOL_FORWARD] = brg_cpu_global_avgpool_forward,
    [BRG_OP_GLOBAL_AVGPOOL_BACKWARD] = brg_cpu_global_avgpool_backward,
    [BRG_OP_CONCAT_FORWARD] = brg_cpu_concat_forward,
    [BRG_OP_CONCAT_BACKWARD] = brg_cpu_concat_backward,
    [BRG_OP_ADD_FORWARD] = brg_cpu_add_forward,
    [BRG_OP_ADD_BACKWARD] = brg_cpu_add_backward,
    [BRG_OP_LINEAR_FORWARD] = brg_cpu_linear_forward,
    [BRG_OP_LINEAR_BACKWARD_DATA] = brg_cpu_linear_backward_data,
    [BRG_OP_LINEAR_BACKWARD_WEIGHT] = brg_cpu_linear_backward_weight,
    [BRG_OP_DROPOUT_FORWARD] = brg_cpu_dropout_forward,
    [BRG_OP_DROPOUT_BACKWARD] = brg_cpu_dropout_backward,
    [BRG_OP_SOFTMAX_XENT_FORWARD] = brg_cpu_softmax_xent_forward,
    [BRG_OP_SOFTMAX_XENT_BACKWARD] = brg_cpu_softmax_xent_backward,
    [BRG_OP_UPSAMPLE_FORWARD] = brg_cpu_upsample_forward,
    [BRG_OP_UPSAMPLE_BACKWARD] = brg_cpu_upsample_backward,
    [BRG_OP_SGD_UPDATE] = brg_cpu_sgd_update,
    [BRG_OP_ADAM_UPDATE] = brg_cpu_adam_update,
    [BRG_OP_COUNT_CORRECT] = brg_cpu_count_correct,
    [BRG_OP_CHECK_FINITE] = brg_cpu_check_finite,
};

size_t brg_cpu_workspace_bytes(const brg_op *op)
{
    switch (op->kind) {
    case BRG_OP_CONV2D_FORWARD:
    case BRG_OP_CONV2D_BACKWARD_DATA:
    case BRG_OP_CONV2D_BACKWARD_FILTER: return brg_cpu_conv2d_workspace_bytes(op);
    default: return 0;
    }
}
