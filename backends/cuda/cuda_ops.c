/* The CUDA backend's ops (cuda-ops.h): convolutions on cuDNN, fully
 * connected layers on cuBLAS, everything else on our own kernels
 * (ops_kernels.cu, through cuda-launch.h).
 *
 * Why not cuDNN for batch normalization, pooling and ReLU: its max pool
 * lets padding win over negative inputs and does not promise our tie rule,
 * its ReLU's NaN handling is not documented, and its batch-norm backward
 * trusts float saved statistics, which the CPU backend deliberately does
 * not (kernels/cpu/batchnorm.c). Own kernels give the CPU's semantics by
 * construction and need no extra buffers.
 *
 * Precision: FP32 throughout. Convolutions run with CUDNN_FMA_MATH and only
 * accept algorithms that report FMA math, and cuBLAS runs with
 * CUBLAS_DEFAULT_MATH (no TF32), so results agree with the CPU backend to
 * FP32 rounding. Setting BRG_CUDA_TF32=1 in the environment when the exec
 * is created allows TF32 tensor cores on Ampere and later (about 10 bits of
 * mantissa in products: faster, not comparable at tight tolerances).
 *
 * Convolution algorithms: cuDNN's heuristics (cudnnGet*Algorithm_v7) rank
 * the algorithms by expected speed; we take the first that succeeds, fits
 * the workspace the op was given (brg_cuda_workspace_bytes, planned ahead)
 * and uses the allowed math. Heuristics rather than cudnnFind*: Find runs
 * every algorithm on the real buffers, which would overwrite an output that
 * is being accumulated into and allocate outside the arena. The choice is
 * cached per shape and workspace size. An algorithm that cuDNN then
 * refuses to run (conv-algo.h says which refusals: those made before any
 * work is launched, so a retry never adds into a half-written output) is
 * marked bad for the shape and the next one that fits is tried.
 */
#include "config.h"

#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include "conv-algo.h"
#include "cuda-check.h"
#include "cuda-launch.h"
#include "cuda-ops.h"
#include "core/internal.h"

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

/* The algorithm a shape runs with, and those that cuDNN refused to run on
 * it (bit a: algorithm a), which are never picked again. */
typedef struct conv_choice {
    conv_key key;
    int algo;
    cudnnMathType_t math;
    unsigned bad;
} conv_choice;

#define CONV_CACHE 128

struct brg_cuda_exec {
    int gpu;
    cudaStream_t stream;
    char name[64];
    size_t conv_budget;
    int allow_tf32;
    cudnnHandle_t cudnn;
    cublasHandle_t cublas;
    cudnnTensorDescriptor_t x_desc, y_desc;
    cudnnFilterDescriptor_t w_desc;
    cudnnConvolutionDescriptor_t conv_desc;
    /* Device errors (labels out of range): 20 bytes of device memory the exec
     * owns for its lifetime, outside the arena like the handles' own state. */
    brg_cuda_flags *flags;
    conv_choice cache[CONV_CACHE];
    int cache_used, cache_next;
};

static const brg_tensor *opt_in(const brg_op *op, int i) { return i < op->n_in ? op->in[i] : NULL; }
static const brg_tensor *opt_out(const brg_op *op, int i) { return i < op->n_out ? op->out[i] : NULL; }
static float *fdata(const brg_tensor *t) { return t ? (float *)t->data : NULL; }

/* The handles and descriptors; on failure the caller destroys the
 * partly made exec (every destroy below accepts what was not created). */
static brg_status exec_init(brg_cuda_exec *e)
{
    BRG_CUDNN_CHECK(cudnnCreate(&e->cudnn));
    BRG_CUDNN_CHECK(cudnnSetStream(e->cudnn, e->stream));
    BRG_CUBLAS_CHECK(cublasCreate(&e->cublas));
    BRG_CUBLAS_CHECK(cublasSetStream(e->cublas, e->stream));
    BRG_CUBLAS_CHECK(cublasSetMathMode(e->cublas, e->allow_tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
    BRG_CUDNN_CHECK(cudnnCreateTensorDescriptor(&e->x_desc));
    BRG_CUDNN_CHECK(cudnnCreateTensorDescriptor(&e->y_desc));
    BRG_CUDNN_CHECK(cudnnCreateFilterDescriptor(&e->w_desc));
    BRG_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&e->conv_desc));
    void *flags = NULL;
    BRG_CUDA_CHECK(cudaMalloc(&flags, sizeof(brg_cuda_flags)));
    e->flags = flags;
    BRG_CUDA_CHECK(cudaMemsetAsync(e->flags, 0, sizeof(brg_cuda_flags), e->stream));
    return BRG_OK;
}

brg_status brg_cuda_exec_create(int gpu, void *stream, const char *name, size_t conv_budget, brg_cuda_exec **out)
{
    *out = NULL;
    brg_cuda_exec *e = brg_calloc(1, sizeof *e, "a CUDA exec");
    if (!e) return BRG_ERR_HOST_MEMORY;
    e->gpu = gpu;
    e->stream = (cudaStream_t)stream;
    snprintf(e->name, sizeof e->name, "%s", name ? name : "cuda");
    e->conv_budget = conv_budget;
    const char *tf32 = getenv("BRG_CUDA_TF32");
    e->allow_tf32 = tf32 && strcmp(tf32, "1") == 0;
    brg_status st = exec_init(e);
    if (st != BRG_OK) {
        brg_error_context(st, "%s: creating the cuDNN and cuBLAS state", e->name);
        brg_cuda_exec_destroy(e);
        return st;
    }
    *out = e;
    return BRG_OK;
}

void brg_cuda_exec_destroy(brg_cuda_exec *e)
{
    if (!e) return;
    if (e->flags) cudaFree(e->flags);
    if (e->conv_desc) cudnnDestroyConvolutionDescriptor(e->conv_desc);
    if (e->w_desc) cudnnDestroyFilterDescriptor(e->w_desc);
    if (e->y_desc) cudnnDestroyTensorDescriptor(e->y_desc);
    if (e->x_desc) cudnnDestroyTensorDescriptor(e->x_desc);
    if (e->cublas) cublasDestroy(e->cublas);
    if (e->cudnn) cudnnDestroy(e->cudnn);
    free(e);
}

brg_status brg_cuda_exec_check(brg_cuda_exec *e)
{
    brg_cuda_flags f;
    BRG_CUDA_CHECK(cudaMemcpyAsync(&f, e->flags, sizeof f, cudaMemcpyDeviceToHost, e->stream));
    BRG_CUDA_CHECK(cudaStreamSynchronize(e->stream));
    if (!f.bad) return BRG_OK;
    BRG_CUDA_CHECK(cudaMemsetAsync(e->flags, 0, sizeof f, e->stream));
    return brg_error(BRG_ERR_INVALID_ARGUMENT, "%s on %s: row %d has label %d, outside the %d classes [0, %d)",
                     brg_op_kind_name((brg_op_kind)f.kind), e->name, f.row, f.label, f.classes, f.classes);
}

/* ------------------------------------------------------------------ convolutions */

static int fits_int(int64_t v) { return v >= 0 && v <= INT_MAX; }

/* The shapes of a convolution op, whichever its kind. */
static brg_status conv_key_of(const brg_op *op, size_t limit, conv_key *key)
{
    const brg_tensor *x, *w, *y;
    brg_cuda_conv_tensors(op, &x, &w, &y);
    const int64_t v[] = {x->shape[0], x->shape[1], x->shape[2], x->shape[3], w->shape[0], w->shape[2],
                         w->shape[3], y->shape[2], y->shape[3]};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        if (!fits_int(v[i]))
            return brg_error(BRG_ERR_UNSUPPORTED, "%s: a dimension of %lld exceeds cuDNN's int range",
                             brg_op_kind_name(op->kind), (long long)v[i]);
    memset(key, 0, sizeof *key);
    key->kind = (int)op->kind;
    key->n = (int)v[0], key->c = (int)v[1], key->h = (int)v[2], key->w = (int)v[3];
    key->k = (int)v[4], key->r = (int)v[5], key->s = (int)v[6], key->p = (int)v[7], key->q = (int)v[8];
    key->sh = op->p.conv.stride_h, key->sw = op->p.conv.stride_w;
    key->ph = op->p.conv.pad_h, key->pw = op->p.conv.pad_w;
    key->limit_mib = (int)(limit >> 20 > INT_MAX ? INT_MAX : limit >> 20);
    key->limit_rem = (int)(limit & ((1u << 20) - 1));
    return BRG_OK;
}

static brg_status conv_set_descriptors(brg_cuda_exec *e, const conv_key *k, cudnnMathType_t math)
{
    BRG_CUDNN_CHECK(cudnnSetTensor4dDescriptor(e->x_desc, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, k->n, k->c, k->h, k->w));
    BRG_CUDNN_CHECK(cudnnSetTensor4dDescriptor(e->y_desc, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, k->n, k->k, k->p, k->q));
    BRG_CUDNN_CHECK(cudnnSetFilter4dDescriptor(e->w_desc, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, k->k, k->c, k->r, k->s));
    BRG_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(e->conv_desc, k->ph, k->pw, k->sh, k->sw, 1, 1,
                                                    CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    BRG_CUDNN_CHECK(cudnnSetConvolutionMathType(e->conv_desc, math));
    return BRG_OK;
}

_Static_assert(CUDNN_CONVOLUTION_FWD_ALGO_COUNT <= BRG_CONV_ALGO_MAX &&
                   CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT <= BRG_CONV_ALGO_MAX &&
                   CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT <= BRG_CONV_ALGO_MAX,
               "every cuDNN algorithm has a bit in an algorithm set");

static int conv_algo_count(brg_op_kind kind)
{
    return kind == BRG_OP_CONV2D_FORWARD         ? CUDNN_CONVOLUTION_FWD_ALGO_COUNT
           : kind == BRG_OP_CONV2D_BACKWARD_DATA ? CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT
                                                 : CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT;
}

static int is_tensor_math(cudnnMathType_t m)
{
    return m == CUDNN_TENSOR_OP_MATH || m == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
}

#define CONV_RANK(perf, i, rank, math)                                                             \
    do {                                                                                           \
        (rank)[i] = (brg_conv_rank){(int)(perf)[i].algo, (perf)[i].status == CUDNN_STATUS_SUCCESS, \
                                    is_tensor_math((perf)[i].mathType), (perf)[i].memory};         \
        (math)[i] = (perf)[i].mathType;                                                            \
    } while (0)

/* cuDNN's ranking for the shapes in the descriptors, fastest expected first
 * (cudnnGet*Algorithm_v7 heuristics), and the math type of each entry. */
static brg_status conv_ranking(brg_cuda_exec *e, brg_op_kind kind, brg_conv_rank *rank, cudnnMathType_t *math,
                               int *count)
{
    int got = 0;
    switch (kind) {
    case BRG_OP_CONV2D_FORWARD: {
        cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
        BRG_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(e->cudnn, e->x_desc, e->w_desc, e->conv_desc,
                                                               e->y_desc, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &got,
                                                               perf));
        for (int i = 0; i < got; i++) CONV_RANK(perf, i, rank, math);
        break;
    }
    case BRG_OP_CONV2D_BACKWARD_DATA: {
        cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
        BRG_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(e->cudnn, e->w_desc, e->y_desc, e->conv_desc,
                                                                    e->x_desc, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT,
                                                                    &got, perf));
        for (int i = 0; i < got; i++) CONV_RANK(perf, i, rank, math);
        break;
    }
    default: {
        cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
        BRG_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
            e->cudnn, e->x_desc, e->y_desc, e->conv_desc, e->w_desc, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &got,
            perf));
        for (int i = 0; i < got; i++) CONV_RANK(perf, i, rank, math);
        break;
    }
    }
    *count = got;
    return BRG_OK;
}

/* The workspace algo needs with the descriptors as they are set now (math
 * type included); SIZE_MAX when cuDNN cannot run it so. */
static size_t conv_workspace_need(brg_cuda_exec *e, brg_op_kind kind, int algo)
{
    size_t bytes = 0;
    cudnnStatus_t st;
    switch (kind) {
    case BRG_OP_CONV2D_FORWARD:
        st = cudnnGetConvolutionForwardWorkspaceSize(e->cudnn, e->x_desc, e->w_desc, e->conv_desc, e->y_desc,
                                                     (cudnnConvolutionFwdAlgo_t)algo, &bytes);
        break;
    case BRG_OP_CONV2D_BACKWARD_DATA:
        st = cudnnGetConvolutionBackwardDataWorkspaceSize(e->cudnn, e->w_desc, e->y_desc, e->conv_desc, e->x_desc,
                                                          (cudnnConvolutionBwdDataAlgo_t)algo, &bytes);
        break;
    default:
        st = cudnnGetConvolutionBackwardFilterWorkspaceSize(e->cudnn, e->x_desc, e->y_desc, e->conv_desc, e->w_desc,
                                                            (cudnnConvolutionBwdFilterAlgo_t)algo, &bytes);
        break;
    }
    return st == CUDNN_STATUS_SUCCESS ? bytes : SIZE_MAX;
}

/* Pick the algorithm for the shapes in key, leaving out those in bad: the
 * first that brg_conv_algo_next offers and that fits limit with the math
 * type the run will use (FMA unless TF32 is allowed, which keeps cuDNN off
 * tensor cores whatever a candidate reported), as the math may change what
 * an algorithm needs. Sets ch's algo (-1 when none fits) and math; leaves
 * the descriptors set for key. */
static brg_status conv_pick(brg_cuda_exec *e, const conv_key *key, size_t limit, unsigned bad, conv_choice *ch)
{
    const brg_op_kind kind = (brg_op_kind)key->kind;
    /* FMA math asks cuDNN for algorithms without tensor-core TF32. */
    BRG_CHECK(conv_set_descriptors(e, key, e->allow_tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH));
    brg_conv_rank rank[BRG_CONV_ALGO_MAX];
    cudnnMathType_t ranked_math[BRG_CONV_ALGO_MAX];
    int count = 0, r = -1, a;
    BRG_CHECK(conv_ranking(e, kind, rank, ranked_math, &count));
    unsigned skip = bad;
    ch->algo = -1;
    while ((a = brg_conv_algo_next(rank, count, conv_algo_count(kind), limit, e->allow_tf32, skip, &r)) >= 0) {
        skip |= 1u << a;
        const cudnnMathType_t math = !e->allow_tf32 ? CUDNN_FMA_MATH : r >= 0 ? ranked_math[r] : CUDNN_DEFAULT_MATH;
        BRG_CUDNN_CHECK(cudnnSetConvolutionMathType(e->conv_desc, math));
        if (conv_workspace_need(e, kind, a) <= limit) {
            ch->algo = a;
            ch->math = math;
            return BRG_OK;
        }
    }
    return BRG_OK;
}

/* The cached choice for key, or a new one (the first pick, nothing marked
 * bad). A full cache replaces its entries round robin. */
static brg_status conv_choose(brg_cuda_exec *e, const conv_key *key, size_t limit, conv_choice **out)
{
    for (int i = 0; i < e->cache_used; i++)
        if (memcmp(&e->cache[i].key, key, sizeof *key) == 0) {
            *out = &e->cache[i];
            return BRG_OK;
        }
    conv_choice pick = {.key = *key};
    BRG_CHECK(conv_pick(e, key, limit, 0, &pick));
    if (pick.algo < 0)
        return brg_error(BRG_ERR_UNSUPPORTED,
                         "%s on %s: no cuDNN algorithm for x[%d, %d, %d, %d] * w[%d, %d, %d, %d] fits a %zu-byte "
                         "workspace; raise the device's convolution workspace budget",
                         brg_op_kind_name((brg_op_kind)key->kind), e->name, key->n, key->c, key->h, key->w, key->k,
                         key->c, key->r, key->s, limit);
    conv_choice *slot;
    if (e->cache_used < CONV_CACHE) {
        slot = &e->cache[e->cache_used++];
    } else {
        slot = &e->cache[e->cache_next];
        e->cache_next = (e->cache_next + 1) % CONV_CACHE;
    }
    *slot = pick;
    *out = slot;
    return BRG_OK;
}

/* Clear a tensor on the stream (nothing when it is empty). */
static brg_status zero_tensor(brg_cuda_exec *e, const brg_tensor *t)
{
    if (brg_tensor_bytes(t) > 0) BRG_CUDA_CHECK(cudaMemsetAsync(t->data, 0, brg_tensor_bytes(t), e->stream));
    return BRG_OK;
}

/* A convolution with a zero dimension somewhere, which cuDNN refuses. The
 * products are all empty sums: y is just the bias (an input of zero height
 * padded to a non-empty output), dx and dw are 0, and db is still the sum
 * of dy. Overwritten outputs are cleared, accumulated ones left alone. */
static brg_status conv_empty(brg_cuda_exec *e, const brg_op *op, const conv_key *key)
{
    const int64_t plane = (int64_t)key->p * key->q;
    switch (op->kind) {
    case BRG_OP_CONV2D_FORWARD: {
        const brg_tensor *b = opt_in(op, 2);
        BRG_CHECK(zero_tensor(e, op->out[0]));
        if (b) BRG_CUDA_CHECK(brg_cuda_bias_add(e->stream, fdata(op->out[0]), fdata(b), key->n, key->k, plane));
        return BRG_OK;
    }
    case BRG_OP_CONV2D_BACKWARD_DATA: return op->accumulate ? BRG_OK : zero_tensor(e, op->out[0]);
    default: {
        const brg_tensor *db = opt_out(op, 1);
        if (!op->accumulate) BRG_CHECK(zero_tensor(e, op->out[0]));
        if (db)
            BRG_CUDA_CHECK(
                brg_cuda_bias_grad(e->stream, fdata(op->in[1]), fdata(db), key->n, key->k, plane, op->accumulate));
        return BRG_OK;
    }
    }
}

/* Launch the convolution op with algo on the descriptors as they are set;
 * *call names the cuDNN function for messages. The forward overwrites y
 * (its bias is added after); backward kinds add into their output when
 * op->accumulate. */
static cudnnStatus_t conv_launch(brg_cuda_exec *e, const brg_op *op, int algo, size_t limit, const char **call)
{
    const float one = 1.0f, zero = 0.0f;
    const float *beta = op->accumulate ? &one : &zero;
    switch (op->kind) {
    case BRG_OP_CONV2D_FORWARD:
        *call = "cudnnConvolutionForward";
        return cudnnConvolutionForward(e->cudnn, &one, e->x_desc, op->in[0]->data, e->w_desc, op->in[1]->data,
                                       e->conv_desc, (cudnnConvolutionFwdAlgo_t)algo, op->workspace, limit, &zero,
                                       e->y_desc, op->out[0]->data);
    case BRG_OP_CONV2D_BACKWARD_DATA:
        *call = "cudnnConvolutionBackwardData";
        return cudnnConvolutionBackwardData(e->cudnn, &one, e->w_desc, op->in[1]->data, e->y_desc, op->in[0]->data,
                                            e->conv_desc, (cudnnConvolutionBwdDataAlgo_t)algo, op->workspace, limit,
                                            beta, e->x_desc, op->out[0]->data);
    default:
        *call = "cudnnConvolutionBackwardFilter";
        return cudnnConvolutionBackwardFilter(e->cudnn, &one, e->x_desc, op->in[0]->data, e->y_desc, op->in[1]->data,
                                              e->conv_desc, (cudnnConvolutionBwdFilterAlgo_t)algo, op->workspace,
                                              limit, beta, e->w_desc, op->out[0]->data);
    }
}

/* Run the convolution with the shape's cached algorithm. When cuDNN
 * refuses it before launching anything (brg_conv_retryable), the algorithm
 * is marked bad for the shape and the next that fits is tried, until one
 * runs or none is left. The cache keeps what was learnt only when one ran:
 * if every algorithm fails, the fault is not theirs (a bad pointer, say),
 * and the next call starts over. */
static brg_status conv_run_algos(brg_cuda_exec *e, const brg_op *op, const conv_key *key, size_t limit)
{
    conv_choice *slot = NULL;
    BRG_CHECK(conv_choose(e, key, limit, &slot));
    conv_choice ch = *slot;
    char tried[8 * BRG_CONV_ALGO_MAX] = "";
    size_t used = 0;
    for (;;) {
        BRG_CHECK(conv_set_descriptors(e, key, ch.math));
        const char *call = "";
        const cudnnStatus_t st = conv_launch(e, op, ch.algo, limit, &call);
        if (st == CUDNN_STATUS_SUCCESS) break;
        used += (size_t)snprintf(tried + used, sizeof tried - used, "%s%d", used ? ", " : "", ch.algo);
        /* The message now, while cuDNN's detail for it is the latest. */
        const brg_status ret = brg_cudnn_fail(call, st, __FILE__, __LINE__);
        const int retry = brg_conv_retryable(st, (int)cudaPeekAtLastError());
        if (retry) {
            ch.bad |= 1u << ch.algo;
            BRG_CHECK(conv_pick(e, key, limit, ch.bad, &ch));
        }
        if (!retry || ch.algo < 0)
            return brg_error_context(ret,
                                     "%s on %s: x[%d, %d, %d, %d] * w[%d, %d, %d, %d] -> y[%d, %d, %d, %d] with a "
                                     "%zu-byte workspace, cuDNN algorithm%s %s tried%s",
                                     brg_op_kind_name(op->kind), e->name, key->n, key->c, key->h, key->w, key->k,
                                     key->c, key->r, key->s, key->n, key->k, key->p, key->q, limit,
                                     strchr(tried, ',') ? "s" : "", tried,
                                     retry ? ", none left that fits; the last error" : "");
    }
    *slot = ch;
    return BRG_OK;
}

static brg_status run_conv(brg_cuda_exec *e, const brg_op *op)
{
    const size_t limit = op->workspace ? op->workspace_bytes : 0;
    conv_key key = {0};
    BRG_CHECK(conv_key_of(op, limit, &key));
    if (key.n == 0 || key.c == 0 || key.k == 0 || key.p == 0 || key.q == 0 || key.h == 0 || key.w == 0)
        return conv_empty(e, op, &key);
    BRG_CHECK(conv_run_algos(e, op, &key, limit));
    const int64_t plane = (int64_t)key.p * key.q;
    if (op->kind == BRG_OP_CONV2D_FORWARD) {
        const brg_tensor *b = opt_in(op, 2);
        if (b) BRG_CUDA_CHECK(brg_cuda_bias_add(e->stream, fdata(op->out[0]), fdata(b), key.n, key.k, plane));
    } else if (op->kind == BRG_OP_CONV2D_BACKWARD_FILTER) {
        const brg_tensor *db = opt_out(op, 1);
        if (db)
            BRG_CUDA_CHECK(
                brg_cuda_bias_grad(e->stream, fdata(op->in[1]), fdata(db), key.n, key.k, plane, op->accumulate));
    }
    return BRG_OK;
}

/* ------------------------------------------------------------------ fully connected */

/* cuBLAS is column-major: a row-major [R, C] matrix is a column-major
 * [C, R] one, i.e. its transpose. So with x[N,I], w[O,I], y[N,O] row-major:
 *   y = x w^T    <=>  y^T[O,N]  = w^T^T . x^T  : gemm(T, N, O, N, I, w, I, x, I, y, O)
 *   dx = dy w    <=>  dx^T[I,N] = w^T . dy^T   : gemm(N, N, I, N, O, w, I, dy, O, dx, I)
 *   dw = dy^T x  <=>  dw^T[I,O] = x^T . dy     : gemm(N, T, I, O, N, x, I, dy, O, dw, I)
 * Leading dimensions are at least 1 as cuBLAS requires, even for empty
 * matrices. */
static int ld(int64_t v) { return v > 1 ? (int)v : 1; }

static brg_status run_linear(brg_cuda_exec *e, const brg_op *op)
{
    const brg_tensor *w = op->kind == BRG_OP_LINEAR_BACKWARD_WEIGHT ? op->out[0] : op->in[1];
    const int64_t n = op->in[0]->shape[0], o = w->shape[0], in = w->shape[1];
    if (!fits_int(n) || !fits_int(o) || !fits_int(in))
        return brg_error(BRG_ERR_UNSUPPORTED, "%s: a %lldx%lld by %lld layer exceeds cuBLAS's int range",
                         brg_op_kind_name(op->kind), (long long)n, (long long)in, (long long)o);
    const float one = 1.0f, zero = 0.0f;
    const float *beta = op->accumulate ? &one : &zero;
    switch (op->kind) {
    case BRG_OP_LINEAR_FORWARD: {
        float *y = fdata(op->out[0]);
        BRG_CUBLAS_CHECK(cublasSgemm(e->cublas, CUBLAS_OP_T, CUBLAS_OP_N, (int)o, (int)n, (int)in, &one,
                                     fdata(op->in[1]), ld(in), fdata(op->in[0]), ld(in), &zero, y, ld(o)));
        const brg_tensor *b = opt_in(op, 2);
        if (b) BRG_CUDA_CHECK(brg_cuda_bias_add(e->stream, y, fdata(b), n, o, 1));
        return BRG_OK;
    }
    case BRG_OP_LINEAR_BACKWARD_DATA:
        BRG_CUBLAS_CHECK(cublasSgemm(e->cublas, CUBLAS_OP_N, CUBLAS_OP_N, (int)in, (int)n, (int)o, &one,
                                     fdata(op->in[1]), ld(in), fdata(op->in[0]), ld(o), beta, fdata(op->out[0]),
                                     ld(in)));
        return BRG_OK;
    default: {
        const float *x = fdata(op->in[0]), *dy = fdata(op->in[1]);
        BRG_CUBLAS_CHECK(cublasSgemm(e->cublas, CUBLAS_OP_N, CUBLAS_OP_T, (int)in, (int)o, (int)n, &one, x, ld(in), dy,
                                     ld(o), beta, fdata(op->out[0]), ld(in)));
        const brg_tensor *db = opt_out(op, 1);
        if (db) BRG_CUDA_CHECK(brg_cuda_bias_grad(e->stream, dy, fdata(db), n, o, 1, op->accumulate));
        return BRG_OK;
    }
    }
}

/* ------------------------------------------------------------------ the rest */

static brg_cuda_pool_geom pool_geom(const brg_op *op, const brg_tensor *big, const brg_tensor *small)
{
    const brg_pool_params *pp = &op->p.pool;
    brg_cuda_pool_geom g = {big->shape[0] * big->shape[1], big->shape[2], big->shape[3], small->shape[2],
                            small->shape[3], pp->kernel_h, pp->kernel_w, pp->stride_h, pp->stride_w, pp->pad_h,
                            pp->pad_w, pp->count_include_pad};
    return g;
}

static brg_status run_batchnorm(brg_cuda_exec *e, const brg_op *op)
{
    const brg_tensor *x = op->in[0];
    const int64_t n = x->shape[0], c = x->shape[1], plane = x->shape[2] * x->shape[3];
    const double eps = op->p.bn.epsilon;
    switch (op->kind) {
    case BRG_OP_BATCHNORM_FORWARD_TRAIN:
        BRG_CUDA_CHECK(brg_cuda_bn_forward_train(e->stream, fdata(x), fdata(opt_in(op, 1)), fdata(opt_in(op, 2)),
                                                 fdata(op->out[0]), fdata(op->out[1]), fdata(op->out[2]),
                                                 fdata(op->out[3]), fdata(op->out[4]), n, c, plane, eps,
                                                 op->p.bn.momentum));
        return BRG_OK;
    case BRG_OP_BATCHNORM_FORWARD_INFER:
        BRG_CUDA_CHECK(brg_cuda_bn_forward_infer(e->stream, fdata(x), fdata(opt_in(op, 1)), fdata(opt_in(op, 2)),
                                                 fdata(op->in[3]), fdata(op->in[4]), fdata(op->out[0]), n, c, plane,
                                                 eps));
        return BRG_OK;
    default:
        BRG_CUDA_CHECK(brg_cuda_bn_backward(e->stream, fdata(x), fdata(op->in[1]), fdata(opt_in(op, 2)),
                                            fdata(op->in[3]), fdata(op->out[0]), fdata(opt_out(op, 1)),
                                            fdata(opt_out(op, 2)), n, c, plane, eps, op->accumulate));
        return BRG_OK;
    }
}

/* Concat: sample b of part i is one block of C_i * H * W floats at offset
 * `at` within sample b of the whole (see kernels/cpu/join.c). */
static brg_status run_concat(brg_cuda_exec *e, const brg_op *op)
{
    const int forward = op->kind == BRG_OP_CONCAT_FORWARD;
    const brg_tensor *whole_t = forward ? op->out[0] : op->in[0];
    const int parts = forward ? op->n_in : op->n_out;
    const int64_t batch = whole_t->shape[0], plane = whole_t->shape[2] * whole_t->shape[3];
    const int64_t whole = whole_t->shape[1] * plane;
    float *base = fdata(whole_t);
    int64_t at = 0;
    for (int i = 0; i < parts; i++) {
        const brg_tensor *part = forward ? op->in[i] : op->out[i];
        const int64_t block = part->shape[1] * plane;
        if (forward)
            BRG_CUDA_CHECK(brg_cuda_copy_blocks(e->stream, base + at, whole, fdata(part), block, block, batch, 0));
        else
            BRG_CUDA_CHECK(
                brg_cuda_copy_blocks(e->stream, fdata(part), block, base + at, whole, block, batch, op->accumulate));
        at += block;
    }
    return BRG_OK;
}

/* Add backward: da = dy, db = dy (added when accumulating); an absent
 * output is a branch that needs no gradient. */
static brg_status run_add_backward(brg_cuda_exec *e, const brg_op *op)
{
    const brg_tensor *dy = op->in[0];
    const int64_t n = brg_tensor_numel(dy);
    for (int i = 0; i < op->n_out && i < 2; i++) {
        const brg_tensor *d = op->out[i];
        if (!d) continue;
        if (op->accumulate)
            BRG_CUDA_CHECK(brg_cuda_copy_or_add(e->stream, fdata(d), fdata(dy), n, 1));
        else if (d->data != dy->data && n > 0)
            BRG_CUDA_CHECK(cudaMemcpyAsync(d->data, dy->data, (size_t)n * sizeof(float), cudaMemcpyDeviceToDevice,
                                           e->stream));
    }
    return BRG_OK;
}

static brg_status run_xent(brg_cuda_exec *e, const brg_op *op)
{
    const brg_tensor *z = op->in[0];
    const int64_t rows = z->shape[0], k = z->shape[1];
    if (rows > INT_MAX || k > INT_MAX)
        return brg_error(BRG_ERR_UNSUPPORTED, "%s: %lld rows of %lld classes exceed the CUDA kernels' range",
                         brg_op_kind_name(op->kind), (long long)rows, (long long)k);
    if (op->kind == BRG_OP_SOFTMAX_XENT_BACKWARD) {
        BRG_CUDA_CHECK(brg_cuda_xent_backward(e->stream, fdata(z), op->in[1]->data, fdata(op->out[0]), rows, k,
                                              op->p.xent.grad_scale, op->accumulate, e->flags, (int)op->kind));
        return BRG_OK;
    }
    const size_t need = (size_t)rows * sizeof(double);
    if (rows > 0 && (!op->workspace || op->workspace_bytes < need))
        return brg_error(BRG_ERR_INTERNAL, "%s on %s: given %zu bytes of workspace, needs %zu",
                         brg_op_kind_name(op->kind), e->name, op->workspace ? op->workspace_bytes : 0, need);
    BRG_CUDA_CHECK(brg_cuda_xent_forward(e->stream, fdata(z), op->in[1]->data, fdata(op->out[0]), fdata(op->out[1]),
                                         rows, k, op->workspace, e->flags, (int)op->kind));
    return BRG_OK;
}

static brg_status run_adam(brg_cuda_exec *e, const brg_op *op)
{
    const brg_optim_params *o = &op->p.optim;
    /* Bias corrections in double, exactly as kernels/cpu/optim.c. */
    const double c1 = 1.0 - pow((double)o->beta1, (double)o->step);
    const double c2 = 1.0 - pow((double)o->beta2, (double)o->step);
    const float step = (float)((double)o->lr / c1);
    const float inv_sqrt_c2 = (float)(1.0 / sqrt(c2));
    BRG_CUDA_CHECK(brg_cuda_adam(e->stream, fdata(op->in[0]), fdata(op->out[0]), fdata(op->out[1]),
                                 fdata(op->out[2]), brg_tensor_numel(op->in[0]), o->beta1, o->beta2, o->epsilon,
                                 o->weight_decay, step, inv_sqrt_c2));
    return BRG_OK;
}

static brg_status run_op(brg_cuda_exec *e, const brg_op *op)
{
    cudaStream_t s = e->stream;
    const brg_tensor *x = op->n_in > 0 ? op->in[0] : NULL;
    const int64_t n = x ? brg_tensor_numel(x) : 0;
    const int acc = op->accumulate;
    switch (op->kind) {
    case BRG_OP_CONV2D_FORWARD:
    case BRG_OP_CONV2D_BACKWARD_DATA:
    case BRG_OP_CONV2D_BACKWARD_FILTER: return run_conv(e, op);
    case BRG_OP_LINEAR_FORWARD:
    case BRG_OP_LINEAR_BACKWARD_DATA:
    case BRG_OP_LINEAR_BACKWARD_WEIGHT: return run_linear(e, op);
    case BRG_OP_BATCHNORM_FORWARD_TRAIN:
    case BRG_OP_BATCHNORM_FORWARD_INFER:
    case BRG_OP_BATCHNORM_BACKWARD: return run_batchnorm(e, op);
    case BRG_OP_RELU_FORWARD: BRG_CUDA_CHECK(brg_cuda_relu_forward(s, fdata(x), fdata(op->out[0]), n)); break;
    case BRG_OP_RELU_BACKWARD:
        BRG_CUDA_CHECK(brg_cuda_relu_backward(s, fdata(x), fdata(op->in[1]), fdata(op->out[0]), n, acc));
        break;
    case BRG_OP_MAXPOOL_FORWARD: {
        brg_cuda_pool_geom g = pool_geom(op, x, op->out[0]);
        BRG_CUDA_CHECK(brg_cuda_maxpool_forward(s, &g, fdata(x), fdata(op->out[0])));
        break;
    }
    case BRG_OP_MAXPOOL_BACKWARD: {
        brg_cuda_pool_geom g = pool_geom(op, op->out[0], op->in[2]);
        BRG_CUDA_CHECK(brg_cuda_maxpool_backward(s, &g, fdata(x), fdata(op->in[2]), fdata(op->out[0]), acc));
        break;
    }
    case BRG_OP_AVGPOOL_FORWARD: {
        brg_cuda_pool_geom g = pool_geom(op, x, op->out[0]);
        BRG_CUDA_CHECK(brg_cuda_avgpool_forward(s, &g, fdata(x), fdata(op->out[0])));
        break;
    }
    case BRG_OP_AVGPOOL_BACKWARD: {
        brg_cuda_pool_geom g = pool_geom(op, op->out[0], x);
        BRG_CUDA_CHECK(brg_cuda_avgpool_backward(s, &g, fdata(x), fdata(op->out[0]), acc));
        break;
    }
    case BRG_OP_GLOBAL_AVGPOOL_FORWARD:
        BRG_CUDA_CHECK(brg_cuda_global_avgpool_forward(s, fdata(x), fdata(op->out[0]), x->shape[0] * x->shape[1],
                                                       x->shape[2] * x->shape[3]));
        break;
    case BRG_OP_GLOBAL_AVGPOOL_BACKWARD: {
        const brg_tensor *dx = op->out[0];
        BRG_CUDA_CHECK(brg_cuda_global_avgpool_backward(s, fdata(x), fdata(dx), dx->shape[0] * dx->shape[1],
                                                        dx->shape[2] * dx->shape[3], acc));
        break;
    }
    case BRG_OP_CONCAT_FORWARD:
    case BRG_OP_CONCAT_BACKWARD: return run_concat(e, op);
    case BRG_OP_ADD_FORWARD:
        BRG_CUDA_CHECK(brg_cuda_add(s, fdata(x), fdata(op->in[1]), fdata(op->out[0]), n));
        break;
    case BRG_OP_ADD_BACKWARD: return run_add_backward(e, op);
    case BRG_OP_DROPOUT_FORWARD:
    case BRG_OP_DROPOUT_BACKWARD: {
        const brg_dropout_params *d = &op->p.dropout;
        BRG_CUDA_CHECK(brg_cuda_dropout(s, fdata(x), fdata(op->out[0]), n, d->seed, d->offset, d->rate,
                                        1.0f / (1.0f - d->rate), op->kind == BRG_OP_DROPOUT_BACKWARD && acc));
        break;
    }
    case BRG_OP_SOFTMAX_XENT_FORWARD:
    case BRG_OP_SOFTMAX_XENT_BACKWARD: return run_xent(e, op);
    case BRG_OP_UPSAMPLE_FORWARD:
        BRG_CUDA_CHECK(brg_cuda_upsample_forward(s, fdata(x), fdata(op->out[0]), x->shape[0] * x->shape[1],
                                                 x->shape[2], x->shape[3], op->p.upsample.factor));
        break;
    case BRG_OP_UPSAMPLE_BACKWARD: {
        const brg_tensor *dx = op->out[0];
        BRG_CUDA_CHECK(brg_cuda_upsample_backward(s, fdata(x), fdata(dx), dx->shape[0] * dx->shape[1], dx->shape[2],
                                                  dx->shape[3], op->p.upsample.factor, acc));
        break;
    }
    case BRG_OP_SGD_UPDATE:
        BRG_CUDA_CHECK(brg_cuda_sgd(s, fdata(x), fdata(op->out[0]), fdata(opt_out(op, 1)), n, op->p.optim.lr,
                                    op->p.optim.momentum, op->p.optim.weight_decay));
        break;
    case BRG_OP_ADAM_UPDATE: return run_adam(e, op);
    default:
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "op kind %d is not one the CUDA backend knows", (int)op->kind);
    }
    return BRG_OK;
}

brg_status brg_cuda_run_op(brg_cuda_exec *exec, const brg_op *op)
{
    brg_status st = run_op(exec, op);
    if (st != BRG_OK) brg_error_context(st, "%s on %s", brg_op_kind_name(op->kind), exec->name);
    return st;
}
