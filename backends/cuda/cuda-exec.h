/* The CUDA backend's kernels (private to backends/cuda): the per-device
 * state they run with (brg_cuda_exec, made by exec.c), and one kernel per
 * op kind with the signature every backend shares (brg_kernel), listed in
 * dispatch.c's table. conv.c runs convolutions on cuDNN, linear.c the
 * fully connected layers on cuBLAS, ops.c the rest on our own kernels
 * (ops_kernels.cu, through cuda-launch.h). */
#ifndef BRIGADE_CUDA_EXEC_H
#define BRIGADE_CUDA_EXEC_H

#include <limits.h>
#include <stdint.h>
#include <stdio.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include "backends/cuda/cuda-launch.h"
#include "backends/cuda/cuda-ops.h"
#include "base/device-impl.h"

/* A convolution's shape as cuDNN takes it. Only ints: the struct has no
 * padding, so it is compared with memcmp. */
typedef struct conv_key {
    int kind;
    int n, c, h, w; /* x */
    int k, r, s;    /* w[k, c, r, s] */
    int p, q;       /* y[n, k, p, q] */
    int sh, sw, ph, pw;
    int limit_mib, limit_rem; /* the workspace limit, split to stay in ints */
} conv_key;

/* "x[n, c, h, w] * w[k, c, r, s]" of key, for messages; returns buf. */
static inline const char *brg_cuda_conv_shape_text(const conv_key *k, char *buf, size_t size)
{
    snprintf(buf, size, "x[%d, %d, %d, %d] * w[%d, %d, %d, %d]", k->n, k->c, k->h, k->w, k->k, k->c, k->r, k->s);
    return buf;
}

/* The algorithm a shape runs with, and those that cuDNN refused to run on
 * it (bit a: algorithm a), which are never picked again. */
typedef struct conv_choice {
    conv_key key;
    int algo;
    cudnnMathType_t math;
    unsigned bad;
    int measured; /* picked by timing the algorithms (BRG_CUDA_CONV_ALGO=measure) */
} conv_choice;

/* A shape's execution plan on cuDNN's graph (backend) API (conv-graph.c,
 * BRG_CUDA_CONV_API=graph). The plan bakes in beta and the tensors' byte
 * alignment, so those are part of what an entry is for besides the key. An
 * entry without a plan records that the graph API failed for the shape
 * (or that no engine qualified), and the legacy API runs it from then on. */
typedef struct conv_graph_plan {
    conv_key key;
    int accumulate;               /* beta 1: the plan adds into its output */
    int align[3];                 /* bytes x, w and y are aligned to: 4, 8 or 16 */
    cudnnBackendDescriptor_t plan; /* finalized execution plan; NULL: graph failed */
    cudnnBackendDescriptor_t cfg;  /* its engine config, kept alive beside it */
    int64_t engine;               /* CUDNN_ATTR_ENGINE_GLOBAL_INDEX */
    int64_t workspace;            /* CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE */
    unsigned notes;               /* bit n: cuDNN's numerical note n */
    int measured;                 /* picked by timing (BRG_CUDA_CONV_ALGO=measure) */
    int measure_tried;            /* a heuristic pick was timed over once (kept if nothing could be) */
} conv_graph_plan;

struct brg_cuda_exec {
    int gpu;
    cudaStream_t stream;
    char name[64];
    size_t conv_budget;
    int allow_tf32;
    int measure_algos; /* BRG_CUDA_CONV_ALGO=measure: time the algorithms (cudnnFind*Ex) */
    int log_convs;     /* BRG_CUDA_CONV_LOG=1: each algorithm choice on stderr (conv.c) */
    int gemm_1x1;      /* BRG_CUDA_CONV_1X1=gemm: 1x1 gradients by cuBLAS (conv-gemm.c) */
    int gemm_convs[3]; /* convolutions run so by form (conv-gemm.h's BRG_CONV_GEMM_*), for tests */
    int conv_graph;    /* BRG_CUDA_CONV_API=graph: convolutions on cuDNN's graph API first (conv-graph.c) */
    cudnnHandle_t cudnn;
    cublasHandle_t cublas;
    cudnnTensorDescriptor_t x_desc, y_desc;
    cudnnFilterDescriptor_t w_desc;
    cudnnConvolutionDescriptor_t conv_desc;
    /* Device errors (labels out of range): 28 bytes of device memory the exec
     * owns for its lifetime, outside the arena like the handles' own state. */
    brg_cuda_flags *flags;
    /* Every shape's choice, kept for the device's life: a model has a
     * bounded number of shapes (Inception-v3 128 over the three passes),
     * and a choice made again mid-step would run cuDNN's selection (and
     * its first launches) in the middle of a pipeline. */
    conv_choice *cache;
    int cache_used, cache_cap;
    /* The graph API's plans, by shape, beta and alignment, for the same
     * reasons; destroyed with the exec (brg_cuda_conv_graph_release). */
    conv_graph_plan *graph;
    int graph_used, graph_cap;
};

/* The exec of a CUDA device (device.c), whose GPU the caller made current. */
brg_cuda_exec *brg_cuda_exec_of(brg_device *dev);

static inline const brg_tensor *opt_in(const brg_op *op, int i) { return i < op->n_in ? op->in[i] : NULL; }
static inline const brg_tensor *opt_out(const brg_op *op, int i) { return i < op->n_out ? op->out[i] : NULL; }
static inline float *fdata(const brg_tensor *t) { return t ? (float *)t->data : NULL; }
static inline int fits_int(int64_t v) { return v >= 0 && v <= INT_MAX; }

/* conv.c: the three convolution kinds. */
brg_status brg_cuda_op_conv2d(brg_device *dev, const brg_op *op);
/* conv-gemm.c: op's gradient by cuBLAS where BRG_CUDA_CONV_1X1=gemm and its
 * shape (key) allows in limit bytes of workspace (*ran 1), else nothing
 * (*ran 0: cuDNN's turn). */
brg_status brg_cuda_conv_gemm(brg_cuda_exec *e, const brg_op *op, const conv_key *key, size_t limit, int *ran);
/* The front of the workspace that a filter gradient which accumulates is
 * timed into, since timing (cuDNN's Find, the graph path's events) writes
 * the output it is given: dw's bytes rounded up to 256. 0 for ops timed
 * on their own output. */
static inline size_t brg_cuda_conv_find_scratch(const brg_op *op)
{
    if (op->kind != BRG_OP_CONV2D_BACKWARD_FILTER || !op->accumulate) return 0;
    return (brg_tensor_bytes(op->out[0]) + 255) / 256 * 256;
}

/* The workspace left behind that scratch output (all of it for none), for
 * the algorithm or plan timed or run there. */
static inline void *brg_cuda_conv_after_scratch(const brg_op *op, size_t scratch)
{
    return scratch ? (char *)op->workspace + scratch : op->workspace;
}

/* Whether op's shape may be timed now (BRG_CUDA_CONV_ALGO=measure): timing
 * writes the output, which only an op that overwrites it can afford, or a
 * filter gradient whose workspace holds a scratch output besides
 * (brg_cuda_conv_find_scratch; in training every filter gradient
 * accumulates). Shared by conv.c and conv-graph.c. */
static inline int brg_cuda_conv_may_measure(const brg_cuda_exec *e, const brg_op *op, size_t limit)
{
    if (!e->measure_algos) return 0;
    if (op->kind == BRG_OP_CONV2D_FORWARD || !op->accumulate) return 1;
    const size_t scratch = brg_cuda_conv_find_scratch(op);
    return scratch > 0 && op->workspace && limit > scratch;
}
/* conv-graph.c: run the convolution op of shapes key through cuDNN's graph
 * API with a workspace of limit bytes (op->workspace), the bias left to the
 * caller. *ran = 0 with BRG_OK when the graph API cannot run the shape
 * (nothing was launched): the caller runs the legacy path. An error only
 * for what the legacy path could not fix either (a failed launch, a CUDA
 * error while timing, host memory). */
brg_status brg_cuda_conv_graph_run(brg_cuda_exec *e, const brg_op *op, const conv_key *key, size_t limit,
                                   int *ran);
/* conv-graph.c: build (and destroy) the operation graph of key's kind and
 * shapes with beta 1 when accumulate and tensors aligned to align[] bytes,
 * as the graph path does, on handle (NULL: none, which cuDNN 9.8 and later
 * accept), and return cuDNN's status; why gets the step that failed and
 * cuDNN's message. Needs no GPU: tests check the descriptors with it. */
cudnnStatus_t brg_cuda_conv_graph_describe(cudnnHandle_t handle, const conv_key *key, int accumulate,
                                           const int align[3], char *why, size_t size);
/* conv-graph.c: destroy the graph API's plans (the exec's destroy). */
void brg_cuda_conv_graph_release(brg_cuda_exec *e);
/* linear.c: the three fully connected kinds. */
brg_status brg_cuda_op_linear(brg_device *dev, const brg_op *op);
/* ops.c */
brg_status brg_cuda_op_batchnorm(brg_device *dev, const brg_op *op);
brg_status brg_cuda_op_relu_forward(brg_device *dev, const brg_op *op);
brg_status brg_cuda_op_relu_backward(brg_device *dev, const brg_op *op);
brg_status brg_cuda_op_maxpool_forward(brg_device *dev, const brg_op *op);
brg_status brg_cuda_op_maxpool_backward(brg_device *dev, const brg_op *op);
brg_status brg_cuda_op_avgpool_forward(brg_device *dev, const brg_op *op);
brg_status brg_cuda_op_avgpool_backward(brg_device *dev, const brg_op *op);
brg_status brg_cuda_op_global_avgpool_forward(brg_device *dev, const brg_op *op);
brg_status brg_cuda_op_global_avgpool_backward(brg_device *dev, const brg_op *op);
brg_status brg_cuda_op_concat(brg_device *dev, const brg_op *op);
brg_status brg_cuda_op_add_forward(brg_device *dev, const brg_op *op);
brg_status brg_cuda_op_add_backward(brg_device *dev, const brg_op *op);
brg_status brg_cuda_op_dropout(brg_device *dev, const brg_op *op);
brg_status brg_cuda_op_softmax_xent(brg_device *dev, const brg_op *op);
brg_status brg_cuda_op_upsample_forward(brg_device *dev, const brg_op *op);
brg_status brg_cuda_op_upsample_backward(brg_device *dev, const brg_op *op);
brg_status brg_cuda_op_sgd_update(brg_device *dev, const brg_op *op);
brg_status brg_cuda_op_adam_update(brg_device *dev, const brg_op *op);
brg_status brg_cuda_op_count_correct(brg_device *dev, const brg_op *op);
brg_status brg_cuda_op_check_finite(brg_device *dev, const brg_op *op);

/* dispatch.c: the table from op kind to kernel. */
extern const brg_kernel brg_cuda_kernels[BRG_OP_KIND_COUNT];

#endif /* BRIGADE_CUDA_EXEC_H */
