/* The CUDA backend's convolutions, on cuDNN (the backend's other ops are
 * in linear.c and ops.c; the notes below on precision and on why some ops
 * are our own kernels hold for all of them).
 *
 * Why not cuDNN for batch normalization, pooling and ReLU: its max pool
 * lets padding win over negative inputs and does not promise our tie rule,
 * its ReLU's NaN handling is not documented, and its batch-norm backward
 * trusts float saved statistics, which the CPU backend deliberately does
 * not (backends/cpu/batchnorm.c). Own kernels give the CPU's semantics by
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
 * the workspace the op was given (brg_cuda_workspace_bytes, planned ahead,
 * or with BRG_CUDA_CONV_WORKSPACE_GROW=1 a gradient's wider
 * brg_cuda_workspace_wanted where the device had room under the plan's
 * peak: base/device.c) and uses the
 * allowed math. With BRG_CUDA_CONV_ALGO=measure the ranking is cuDNN's
 * timing of every algorithm instead (cudnnFind*AlgorithmEx, as PyTorch's
 * cudnn.benchmark), on the op's own buffers and planned workspace, so
 * nothing is allocated outside the arena; Find overwrites the
 * output, so a shape is measured at its first call that overwrites its
 * output anyway (until then, and for shapes only ever accumulated into,
 * the heuristics choose). Timings vary, so measured choices may differ
 * between runs (results then differ by rounding); heuristics are the
 * default for that reason. The choice is cached per shape and workspace
 * size. An algorithm that cuDNN then
 * refuses to run (conv-algo.h says which refusals: those made before any
 * work is launched, so a retry never adds into a half-written output) is
 * marked bad for the shape and the next one that fits is tried.
 *
 * Two opt-in paths come first (brg_cuda_op_conv2d): 1x1 gradients by cuBLAS
 * with BRG_CUDA_CONV_1X1=gemm (conv-gemm.c), then with BRG_CUDA_CONV_API=graph
 * cuDNN's graph API (conv-graph.c); the shapes they do not run come here.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cuda/cuda-exec.h" /* first: the cuDNN and cuBLAS headers the others test for */
#include "backends/cuda/conv-algo.h"
#include "backends/cuda/cuda-check.h"
#include "base/internal.h"

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

/* cuDNN's timing of every algorithm for op on its own buffers (and the
 * workspace it was given), fastest first: the ranking of
 * BRG_CUDA_CONV_ALGO=measure. Overwrites op's output, except a filter
 * gradient's that accumulates: that one is written to the workspace's
 * front (brg_cuda_conv_find_scratch), the algorithms timed with the rest. */
static brg_status conv_measured_ranking(brg_cuda_exec *e, const brg_op *op, size_t limit, brg_conv_rank *rank,
                                        cudnnMathType_t *math, int *count)
{
    int got = 0;
    const size_t scratch = brg_cuda_conv_find_scratch(op);
    void *ws = brg_cuda_conv_after_scratch(op, scratch);
    limit -= scratch;
    switch (op->kind) {
    case BRG_OP_CONV2D_FORWARD: {
        cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
        BRG_CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithmEx(
            e->cudnn, e->x_desc, op->in[0]->data, e->w_desc, op->in[1]->data, e->conv_desc, e->y_desc,
            op->out[0]->data, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &got, perf, ws, limit));
        for (int i = 0; i < got; i++) CONV_RANK(perf, i, rank, math);
        break;
    }
    case BRG_OP_CONV2D_BACKWARD_DATA: {
        cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
        BRG_CUDNN_CHECK(cudnnFindConvolutionBackwardDataAlgorithmEx(
            e->cudnn, e->w_desc, op->in[1]->data, e->y_desc, op->in[0]->data, e->conv_desc, e->x_desc,
            op->out[0]->data, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &got, perf, ws, limit));
        for (int i = 0; i < got; i++) CONV_RANK(perf, i, rank, math);
        break;
    }
    default: {
        cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
        BRG_CUDNN_CHECK(cudnnFindConvolutionBackwardFilterAlgorithmEx(
            e->cudnn, e->x_desc, op->in[0]->data, e->y_desc, op->in[1]->data, e->conv_desc, e->w_desc,
            scratch ? op->workspace : op->out[0]->data, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &got, perf, ws,
            limit));
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

/* BRG_CUDA_CONV_LOG=1: one line on stderr for each choice, naming the
 * algorithm, what it needs of the workspace, and the algorithms that the
 * workspace shut out, with what they need: those cuDNN's heuristics rank
 * ahead of it that are runnable but want more (brg_conv_shut_out on
 * rank, the heuristics' ranking also for a measured choice, since cuDNN's
 * timing leaves out what does not fit), and those tried that needed more
 * with the run's math (their needs in need_of). */
static void conv_log_pick(const brg_cuda_exec *e, const conv_key *key, const conv_choice *ch, size_t need,
                          size_t limit, unsigned bad, unsigned too_big, const size_t *need_of,
                          const brg_conv_rank *rank, int count)
{
    int ahead = -1;
    for (int i = 0; i < count && ahead < 0; i++)
        if (rank[i].algo == ch->algo) ahead = i;
    const unsigned shut = brg_conv_shut_out(rank, count, ahead, limit, e->allow_tf32, bad) | too_big;
    char b1[32], b2[32], b3[32], others[512] = "";
    size_t used = 0;
    for (int a = 0; a < BRG_CONV_ALGO_MAX && used < sizeof others; a++) {
        if (!(shut >> a & 1u)) continue;
        size_t mem = too_big >> a & 1u ? need_of[a] : 0;
        for (int i = 0; i < count && !mem; i++)
            if (rank[i].algo == a) mem = rank[i].memory;
        used += (size_t)snprintf(others + used, sizeof others - used, "%s%d (%s)", used ? ", " : "", a,
                                 mem ? brg_format_bytes(mem, b3, sizeof b3) : "more");
    }
    char shape[96];
    fprintf(stderr, "brigade: %s: %s %s: cuDNN algorithm %d (%s, %s math), %s of the %s workspace%s%s\n", e->name,
            brg_op_kind_name((brg_op_kind)key->kind), brg_cuda_conv_shape_text(key, shape, sizeof shape), ch->algo,
            ch->measured ? "measured" : "heuristics",
            ch->math == CUDNN_FMA_MATH ? "FMA" : "TF32 allowed",
            brg_format_bytes(need, b1, sizeof b1), brg_format_bytes(limit, b2, sizeof b2),
            shut ? "; shut out by the workspace: " : "", others);
}

/* Pick the algorithm for the shapes in key, leaving out those in bad: the
 * first that brg_conv_algo_next offers and that fits limit with the math
 * type the run will use (FMA unless TF32 is allowed, which keeps cuDNN off
 * tensor cores whatever a candidate reported), as the math may change what
 * an algorithm needs. The ranking is cuDNN's timing on measure_op's
 * buffers when measure_op is given (it overwrites its output), else the
 * heuristics'. Sets ch's algo (-1 when none fits), math and measured;
 * leaves the descriptors set for key. */
static brg_status conv_pick(brg_cuda_exec *e, const conv_key *key, size_t limit, unsigned bad,
                            const brg_op *measure_op, conv_choice *ch)
{
    const brg_op_kind kind = (brg_op_kind)key->kind;
    /* FMA math asks cuDNN for algorithms without tensor-core TF32. */
    BRG_CHECK(conv_set_descriptors(e, key, e->allow_tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH));
    brg_conv_rank rank[BRG_CONV_ALGO_MAX];
    cudnnMathType_t ranked_math[BRG_CONV_ALGO_MAX];
    int count = 0, r = -1, a;
    /* The log's ranking: the heuristics', also for a measured choice. */
    brg_conv_rank heur[BRG_CONV_ALGO_MAX];
    cudnnMathType_t heur_math[BRG_CONV_ALGO_MAX];
    int heur_count = 0;
    if (e->log_convs) BRG_CHECK(conv_ranking(e, kind, heur, heur_math, &heur_count));
    if (measure_op)
        BRG_CHECK(conv_measured_ranking(e, measure_op, limit, rank, ranked_math, &count));
    else
        BRG_CHECK(conv_ranking(e, kind, rank, ranked_math, &count));
    ch->measured = measure_op != NULL;
    unsigned skip = bad, too_big = 0;
    size_t need_of[BRG_CONV_ALGO_MAX] = {0};
    ch->algo = -1;
    while ((a = brg_conv_algo_next(rank, count, conv_algo_count(kind), limit, e->allow_tf32, skip, &r)) >= 0) {
        skip |= 1u << a;
        const cudnnMathType_t math = !e->allow_tf32 ? CUDNN_FMA_MATH : r >= 0 ? ranked_math[r] : CUDNN_DEFAULT_MATH;
        BRG_CUDNN_CHECK(cudnnSetConvolutionMathType(e->conv_desc, math));
        const size_t need = conv_workspace_need(e, kind, a);
        if (need <= limit) {
            ch->algo = a;
            ch->math = math;
            if (e->log_convs) conv_log_pick(e, key, ch, need, limit, bad, too_big, need_of, heur, heur_count);
            return BRG_OK;
        }
        if (need != SIZE_MAX) { /* SIZE_MAX: cuDNN cannot run it so at all */
            too_big |= 1u << a;
            need_of[a] = need;
        }
    }
    return BRG_OK;
}

/* The cached choice for key, or a new one (the first pick, nothing marked
 * bad); a heuristic choice is measured over when op may be timed. The
 * pointer holds until the next call. */
static brg_status conv_choose(brg_cuda_exec *e, const brg_op *op, const conv_key *key, size_t limit,
                              conv_choice **out)
{
    const int measure = brg_cuda_conv_may_measure(e, op, limit);
    for (int i = 0; i < e->cache_used; i++)
        if (memcmp(&e->cache[i].key, key, sizeof *key) == 0) {
            conv_choice *c = &e->cache[i];
            if (measure && !c->measured) {
                conv_choice again = *c;
                BRG_CHECK(conv_pick(e, key, limit, c->bad, op, &again));
                if (again.algo >= 0) *c = again;
            }
            *out = c;
            return BRG_OK;
        }
    conv_choice pick = {.key = *key};
    BRG_CHECK(conv_pick(e, key, limit, 0, measure ? op : NULL, &pick));
    if (pick.algo < 0) {
        char shape[96];
        return brg_error(BRG_ERR_UNSUPPORTED,
                         "%s on %s: no cuDNN algorithm for %s fits a %zu-byte workspace; raise the device's "
                         "convolution workspace budget",
                         brg_op_kind_name((brg_op_kind)key->kind), e->name,
                         brg_cuda_conv_shape_text(key, shape, sizeof shape), limit);
    }
    if (e->cache_used == e->cache_cap) {
        const int cap = e->cache_cap ? 2 * e->cache_cap : 64;
        conv_choice *grown = realloc(e->cache, (size_t)cap * sizeof *grown);
        if (!grown)
            return brg_error(BRG_ERR_HOST_MEMORY, "%s: out of host memory for the convolution choices", e->name);
        e->cache = grown;
        e->cache_cap = cap;
    }
    conv_choice *slot = &e->cache[e->cache_used++];
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
    BRG_CHECK(conv_choose(e, op, key, limit, &slot));
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
            BRG_CHECK(conv_pick(e, key, limit, ch.bad, NULL, &ch));
        }
        if (!retry || ch.algo < 0) {
            char shape[96];
            return brg_error_context(ret,
                                     "%s on %s: %s -> y[%d, %d, %d, %d] with a %zu-byte workspace, cuDNN "
                                     "algorithm%s %s tried%s",
                                     brg_op_kind_name(op->kind), e->name,
                                     brg_cuda_conv_shape_text(key, shape, sizeof shape), key->n, key->k, key->p,
                                     key->q, limit, strchr(tried, ',') ? "s" : "", tried,
                                     retry ? ", none left that fits; the last error" : "");
        }
    }
    *slot = ch;
    return BRG_OK;
}

int brg_cuda_measured_choices(brg_device *dev)
{
    const brg_cuda_exec *e = brg_cuda_exec_of(dev);
    int n = 0;
    for (int i = 0; i < e->cache_used; i++) n += e->cache[i].measured;
    return n;
}

/* The two opt-in paths' counts (conv-gemm.c, conv-graph.c), here beside
 * brg_cuda_measured_choices so that those files take nothing from the
 * device (brg_cuda_exec_of), which takes the exec, which releases the
 * graph path's plans. */
int brg_cuda_gemm_convs(brg_device *dev, int form)
{
    const brg_cuda_exec *e = brg_cuda_exec_of(dev);
    return form == BRG_CONV_GEMM_FILTER || form == BRG_CONV_GEMM_DATA ? e->gemm_convs[form] : 0;
}

int brg_cuda_graph_plans_of(brg_device *dev, int kind, int accumulate, int *fell_back)
{
    const brg_cuda_exec *e = brg_cuda_exec_of(dev);
    int plans = 0, failed = 0;
    for (int i = 0; i < e->graph_used; i++) {
        const conv_graph_plan *p = &e->graph[i];
        if (p->key.kind != kind || p->accumulate != accumulate) continue;
        plans += p->plan != NULL;
        failed += p->plan == NULL;
    }
    if (fell_back) *fell_back = failed;
    return plans;
}

int brg_cuda_graph_plans(brg_device *dev, int *fell_back, int *measured)
{
    const brg_cuda_exec *e = brg_cuda_exec_of(dev);
    int plans = 0, failed = 0, timed = 0;
    for (int i = 0; i < e->graph_used; i++) {
        plans += e->graph[i].plan != NULL;
        failed += e->graph[i].plan == NULL;
        timed += e->graph[i].plan != NULL && e->graph[i].measured;
    }
    if (fell_back) *fell_back = failed;
    if (measured) *measured = timed;
    return plans;
}

brg_status brg_cuda_op_conv2d(brg_device *dev, const brg_op *op)
{
    brg_cuda_exec *e = brg_cuda_exec_of(dev);
    const size_t limit = op->workspace ? op->workspace_bytes : 0;
    conv_key key = {0};
    BRG_CHECK(conv_key_of(op, limit, &key));
    if (key.n == 0 || key.c == 0 || key.k == 0 || key.p == 0 || key.q == 0 || key.h == 0 || key.w == 0)
        return conv_empty(e, op, &key);
    int ran = 0; /* 1x1 gradients by GEMM (conv-gemm.c), then the graph API (conv-graph.c), then the legacy one */
    BRG_CHECK(brg_cuda_conv_gemm(e, op, &key, limit, &ran));
    if (!ran && e->conv_graph) BRG_CHECK(brg_cuda_conv_graph_run(e, op, &key, limit, &ran));
    if (!ran) BRG_CHECK(conv_run_algos(e, op, &key, limit));
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

