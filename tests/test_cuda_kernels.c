/* The CUDA backend's ops against the CPU backend's.
 *
 * Part 1 runs everywhere: brg_cuda_workspace_bytes, a pure function, and a
 * planning device of a CUDA target reporting it; the pools' per-element
 * arithmetic (pool-window.h) on the host; the order of convolution
 * algorithms (conv-algo.h); the messages of failed CUDA calls, where the
 * backend is compiled in. Part 2 needs a GPU (and
 * the backend built with cuDNN): every op kind on fresh random inputs, run
 * by the CPU kernel on host memory and by brg_cuda_run_op on copies in GPU
 * memory, outputs compared with FP32 tolerances; accumulate variants,
 * padding and strides, odd sizes, aliasing, and a label out of range
 * reported after synchronizing. Exits 77 when there is no GPU, but only if
 * part 1 passed. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <stdint.h>

#include "backends/cpu/cpu-kernels.h"
#include "backends/cuda/cuda-ops.h"
#include "backends/cuda/pool-window.h"
#include "testutil.h"

#ifdef BRG_HAVE_CUDA
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#ifdef BRG_HAVE_CUDNN
#include <cudnn.h>
#define GPU_TESTS 1
#endif
#include "backends/cuda/cuda-check.h"
#endif
/* After cudnn.h: brg_conv_retryable exists only with cuDNN. */
#include "backends/cuda/conv-algo.h"

/* ------------------------------------------------------------------ test cases */

#define MAX_T 24

enum fill { F_RAND, F_POS, F_TIES, F_ZERO };

/* An op on host tensors that the case owns. */
typedef struct tcase {
    brg_op op;
    brg_tensor t[MAX_T];
    int nt;
} tcase;

static uint64_t rng_state = 0x2545f4914f6cdd1dULL;
static uint32_t rng_next(void)
{
    rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (uint32_t)(rng_state >> 33);
}
static float frand(void) { return (float)rng_next() / 2147483648.0f - 1.0f; } /* [-1, 1) */

static void case_init(tcase *c, brg_op_kind kind)
{
    memset(c, 0, sizeof *c);
    c->op.kind = kind;
}

static void case_free(tcase *c)
{
    for (int i = 0; i < c->nt; i++) free(c->t[i].data);
    c->nt = 0;
}

/* A new host tensor of the case, filled. */
static brg_tensor *tnew(tcase *c, brg_dtype dt, int ndim, const int64_t *shape, enum fill f)
{
    brg_tensor *t = &c->t[c->nt++];
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    void *data = calloc((size_t)(n > 0 ? n : 1), 4);
    brg_tensor_init(t, data, dt, ndim, shape, NULL);
    float *p = data;
    static const float ties[] = {-1.0f, 0.0f, 0.5f, 0.5f, 1.0f};
    for (int64_t i = 0; dt == BRG_F32 && i < n; i++) {
        switch (f) {
        case F_RAND: p[i] = frand(); break;
        case F_POS: p[i] = 0.75f + 0.5f * frand(); break;
        case F_TIES: p[i] = ties[rng_next() % 5]; break;
        case F_ZERO: p[i] = 0.0f; break;
        }
    }
    return t;
}

static brg_tensor *t4(tcase *c, int64_t n, int64_t ch, int64_t h, int64_t w, enum fill f)
{
    int64_t s[4] = {n, ch, h, w};
    return tnew(c, BRG_F32, 4, s, f);
}
static brg_tensor *t1(tcase *c, int64_t n, enum fill f) { return tnew(c, BRG_F32, 1, &n, f); }
static brg_tensor *t2(tcase *c, int64_t a, int64_t b, enum fill f)
{
    int64_t s[2] = {a, b};
    return tnew(c, BRG_F32, 2, s, f);
}
static brg_tensor *labels(tcase *c, int64_t n, int64_t k)
{
    brg_tensor *t = tnew(c, BRG_I32, 1, &n, F_ZERO);
    for (int64_t i = 0; i < n; i++) ((int32_t *)t->data)[i] = (int32_t)(rng_next() % (uint32_t)k);
    return t;
}
static void in(tcase *c, const brg_tensor *t) { c->op.in[c->op.n_in++] = t; }
static void out(tcase *c, const brg_tensor *t) { c->op.out[c->op.n_out++] = t; }

/* ------------------------------------------------------------------ part 1 */

typedef struct pool_cfg {
    int n, c, h, w, kh, kw, sh, sw, ph, pw;
} pool_cfg;

static const pool_cfg pool_cfgs[] = {
    {2, 3, 9, 8, 3, 3, 2, 2, 1, 1},  /* overlapping, padded */
    {2, 2, 8, 8, 2, 2, 2, 2, 0, 0},  /* tiling */
    {1, 4, 7, 10, 3, 3, 1, 1, 1, 1}, /* stride 1 "same" */
    {3, 2, 11, 6, 3, 2, 2, 1, 1, 0}, /* asymmetric */
    {2, 1, 5, 5, 5, 5, 3, 3, 2, 2},  /* windows that are mostly padding */
};

/* The CUDA pools' per-element arithmetic (pool-window.h) run on the host
 * against the CPU kernels: max and average, forward and backward, random
 * data, ties, all-negative data, padding counted or not. Exact: the sums
 * run in the same order. */
static void pool_window_checks(void)
{
    for (size_t i = 0; i < sizeof pool_cfgs / sizeof pool_cfgs[0]; i++) {
        const pool_cfg *g = &pool_cfgs[i];
        const int64_t p = brg_conv_out_extent(g->h, g->kh, g->sh, g->ph);
        const int64_t q = brg_conv_out_extent(g->w, g->kw, g->sw, g->pw);
        const brg_cuda_pool_geom geom = {(int64_t)g->n * g->c, g->h, g->w, p, q, g->kh, g->kw, g->sh, g->sw,
                                         g->ph, g->pw, 0};
        for (int variant = 0; variant < 4; variant++) {
            /* 0, 1: max pool on random / tied data; 2, 3: average pool with
             * count_include_pad 0 / 1. */
            const int is_max = variant < 2;
            brg_cuda_pool_geom gg = geom;
            gg.count_include_pad = variant == 3;
            tcase c;
            case_init(&c, is_max ? BRG_OP_MAXPOOL_FORWARD : BRG_OP_AVGPOOL_FORWARD);
            c.op.p.pool = (brg_pool_params){g->kh, g->kw, g->sh, g->sw, g->ph, g->pw, gg.count_include_pad};
            brg_tensor *x = t4(&c, g->n, g->c, g->h, g->w, variant == 1 ? F_TIES : F_RAND);
            if (variant == 0)
                for (int64_t j = 0; j < brg_tensor_numel(x); j++) ((float *)x->data)[j] -= 2.0f;
            brg_tensor *y = t4(&c, g->n, g->c, p, q, F_ZERO);
            brg_tensor *dy = t4(&c, g->n, g->c, p, q, F_RAND);
            brg_tensor *dx = t4(&c, g->n, g->c, g->h, g->w, F_RAND);
            in(&c, x);
            out(&c, y);
            CHECK_OK(brg_op_validate(&c.op));
            CHECK_OK(brg_cpu_kernel_for(c.op.kind)(&c.op));
            double worst = 0.0;
            for (int64_t j = 0; j < brg_tensor_numel(y); j++) {
                double e = fabs(brg_pool_forward_at(&gg, x->data, j, is_max) - ((float *)y->data)[j]);
                worst = e > worst ? e : worst;
            }
            CHECK_MSG(worst <= 1e-6, "pool config %zu variant %d: forward differs by %g", i, variant, worst);

            /* Backward: max in {x, y, dy}, average in {dy}; out {dx}. */
            brg_op b = {0};
            b.kind = is_max ? BRG_OP_MAXPOOL_BACKWARD : BRG_OP_AVGPOOL_BACKWARD;
            b.p.pool = c.op.p.pool;
            if (is_max) {
                b.in[0] = x, b.in[1] = y, b.in[2] = dy, b.n_in = 3;
            } else {
                b.in[0] = dy, b.n_in = 1;
            }
            b.out[0] = dx, b.n_out = 1;
            CHECK_OK(brg_op_validate(&b));
            CHECK_OK(brg_cpu_kernel_for(b.kind)(&b));
            worst = 0.0;
            for (int64_t j = 0; j < brg_tensor_numel(dx); j++) {
                double e = fabs(brg_pool_backward_at(&gg, is_max ? x->data : NULL, dy->data, j, is_max) -
                                ((float *)dx->data)[j]);
                worst = e > worst ? e : worst;
            }
            CHECK_MSG(worst <= 1e-6, "pool config %zu variant %d: backward differs by %g", i, variant, worst);
            case_free(&c);
        }
    }
}

static brg_op conv_op(brg_op_kind kind, brg_tensor *x, brg_tensor *w, brg_tensor *y)
{
    brg_op op = {0};
    op.kind = kind;
    op.p.conv.stride_h = op.p.conv.stride_w = 1;
    op.p.conv.pad_h = op.p.conv.pad_w = 1;
    switch (kind) {
    case BRG_OP_CONV2D_FORWARD: op.in[0] = x, op.in[1] = w, op.out[0] = y; break;
    case BRG_OP_CONV2D_BACKWARD_DATA: op.in[0] = y, op.in[1] = w, op.out[0] = x; break;
    default: op.in[0] = x, op.in[1] = y, op.out[0] = w; break;
    }
    op.n_in = 2;
    op.n_out = 1;
    return op;
}

static void workspace_checks(void)
{
    /* Sizes never read the data, but validation wants some. */
    static float any[1];
    /* x[2,3,8,8] * w[4,3,3,3], pad 1 -> y[2,4,8,8]: im2col of the batch is
     * 2*3*3*3*8*8 floats = 13824 bytes, plus the 1 MiB allowance. */
    brg_tensor x = brg_tensor_nchw(any, 2, 3, 8, 8), w = brg_tensor_nchw(any, 4, 3, 3, 3);
    brg_tensor y = brg_tensor_nchw(any, 2, 4, 8, 8);
    const size_t bound = 13824 + ((size_t)1 << 20);
    const brg_op_kind kinds[] = {BRG_OP_CONV2D_FORWARD, BRG_OP_CONV2D_BACKWARD_DATA, BRG_OP_CONV2D_BACKWARD_FILTER};
    for (int i = 0; i < 3; i++) {
        brg_op op = conv_op(kinds[i], &x, &w, &y);
        CHECK_OK(brg_op_validate(&op));
        CHECK(brg_cuda_workspace_bytes(&op, BRG_CUDA_CONV_WORKSPACE_DEFAULT) == bound);
        CHECK(brg_cuda_workspace_bytes(&op, 4096) == 4096);
        CHECK(brg_cuda_workspace_bytes(&op, 0) == 0);
        CHECK(brg_cuda_workspace_bytes(&op, bound) == bound);
    }
    /* A large layer is capped by the budget: x[64,256,56,56] * w[256,256,3,3]. */
    brg_tensor bx = brg_tensor_nchw(any, 64, 256, 56, 56), bw = brg_tensor_nchw(any, 256, 256, 3, 3);
    brg_tensor by = brg_tensor_nchw(any, 64, 256, 56, 56);
    brg_op big = conv_op(BRG_OP_CONV2D_FORWARD, &bx, &bw, &by);
    CHECK(brg_cuda_workspace_bytes(&big, BRG_CUDA_CONV_WORKSPACE_DEFAULT) == BRG_CUDA_CONV_WORKSPACE_DEFAULT);
    CHECK(brg_cuda_workspace_bytes(&big, SIZE_MAX) == (size_t)64 * 256 * 9 * 56 * 56 * 4 + ((size_t)1 << 20));

    /* The loss's forward takes one double per row; the rest none. */
    tcase c;
    case_init(&c, BRG_OP_SOFTMAX_XENT_FORWARD);
    in(&c, t2(&c, 5, 10, F_RAND));
    in(&c, labels(&c, 5, 10));
    out(&c, t1(&c, 1, F_ZERO));
    out(&c, t2(&c, 5, 10, F_ZERO));
    CHECK_OK(brg_op_validate(&c.op));
    CHECK(brg_cuda_workspace_bytes(&c.op, BRG_CUDA_CONV_WORKSPACE_DEFAULT) == 5 * sizeof(double));
    c.op.kind = BRG_OP_SOFTMAX_XENT_BACKWARD;
    c.op.n_in = 2;
    c.op.in[0] = &c.t[3];
    c.op.n_out = 1;
    c.op.out[0] = &c.t[3];
    CHECK(brg_cuda_workspace_bytes(&c.op, BRG_CUDA_CONV_WORKSPACE_DEFAULT) == 0);
    case_free(&c);
    brg_op relu = {0};
    relu.kind = BRG_OP_RELU_FORWARD;
    relu.n_in = relu.n_out = 1;
    relu.in[0] = relu.out[0] = &x;
    CHECK(brg_cuda_workspace_bytes(&relu, BRG_CUDA_CONV_WORKSPACE_DEFAULT) == 0);

    /* A planning device of a CUDA target reports these sizes, with its
     * spec's budget (0: the default). */
    brg_device_spec spec = {0};
    spec.backend = BRG_BACKEND_CUDA;
    spec.capacity = (size_t)1 << 30;
    spec.conv_workspace = 4096;
    brg_device *dev = NULL;
    brg_op fwd = conv_op(BRG_OP_CONV2D_FORWARD, &x, &w, &y);
    size_t bytes = 0;
    CHECK_OK(brg_device_create_planning(&spec, 0, &dev));
    if (dev) {
        CHECK_OK(brg_device_workspace_bytes(dev, &fwd, &bytes));
        CHECK(bytes == 4096);
        brg_device_destroy(dev);
    }
    spec.conv_workspace = 0;
    dev = NULL;
    CHECK_OK(brg_device_create_planning(&spec, 1, &dev));
    if (dev) {
        CHECK_OK(brg_device_workspace_bytes(dev, &fwd, &bytes));
        CHECK(bytes == bound);
        brg_device_destroy(dev);
    }
}

/* Which convolution algorithm comes next (conv-algo.h): cuDNN's runnable,
 * fitting, FMA-math candidates in rank order, then every other algorithm by
 * number, never one already skipped (failed or looked at). */
static void conv_algo_checks(void)
{
    const brg_conv_rank rank[] = {
        {3, 1, 1, 0},                 /* tensor-core math */
        {1, 1, 0, (size_t)1 << 30},   /* too big for the workspace */
        {0, 1, 0, 100},               /* the first that qualifies */
        {5, 0, 0, 0},                 /* cuDNN says it cannot run */
        {2, 1, 0, 4096},              /* fits exactly */
        {BRG_CONV_ALGO_MAX, 1, 0, 0}, /* out of range: ignored */
    };
    const int n = (int)(sizeof rank / sizeof rank[0]);
    int r = 99;
    CHECK(brg_conv_algo_next(rank, n, 7, 4096, 0, 0u, &r) == 0 && r == 2);
    CHECK(brg_conv_algo_next(rank, n, 7, 4096, 0, 1u << 0, &r) == 2 && r == 4);
    /* Ranked ones used up: the lowest number left, whatever its rating. */
    CHECK(brg_conv_algo_next(rank, n, 7, 4096, 0, 1u << 0 | 1u << 2, &r) == 1 && r == -1);
    CHECK(brg_conv_algo_next(rank, n, 7, 4096, 0, 0x7fu & ~(1u << 5), &r) == 5 && r == -1);
    CHECK(brg_conv_algo_next(rank, n, 7, 4096, 0, 0x7fu, &r) == -1 && r == -1);
    /* A walk that skips each pick in turn meets every algorithm once. */
    const int order[] = {0, 2, 1, 3, 4, 5, 6};
    unsigned skip = 0;
    for (int i = 0; i < 7; i++) {
        const int a = brg_conv_algo_next(rank, n, 7, 4096, 0, skip, &r);
        CHECK_MSG(a == order[i], "step %d picked %d, not %d", i, a, order[i]);
        if (a < 0) break;
        skip |= 1u << a;
    }
    CHECK(brg_conv_algo_next(rank, n, 7, 4096, 0, skip, &r) == -1);
    /* TF32 allowed: tensor-core math qualifies; a bigger workspace lets the
     * big one in; marked-bad ones stay out. */
    CHECK(brg_conv_algo_next(rank, n, 7, 4096, 1, 0u, &r) == 3 && r == 0);
    CHECK(brg_conv_algo_next(rank, n, 7, SIZE_MAX, 0, 0u, &r) == 1 && r == 1);
    CHECK(brg_conv_algo_next(rank, n, 7, 4096, 1, 1u << 3 | 1u << 0, &r) == 2 && r == 4);
    CHECK(brg_conv_algo_next(rank, n, 7, 99, 0, 0u, &r) == 0 && r == -1); /* nothing ranked fits */
    CHECK(brg_conv_algo_next(NULL, 0, 3, 0, 0, 1u << 0, &r) == 1 && r == -1);
    CHECK(brg_conv_algo_next(NULL, 0, 0, 0, 0, 0u, &r) == -1);
#ifdef BRG_HAVE_CUDNN
    /* Retried: refusals before any work. Not: failed launches, allocation
     * and internal errors, or any failure with a CUDA error pending. */
    CHECK(brg_conv_retryable(CUDNN_STATUS_NOT_SUPPORTED, 0));
    CHECK(brg_conv_retryable(CUDNN_STATUS_BAD_PARAM, 0));
    CHECK(!brg_conv_retryable(CUDNN_STATUS_EXECUTION_FAILED, 0));
    CHECK(!brg_conv_retryable(CUDNN_STATUS_INTERNAL_ERROR, 0));
    CHECK(!brg_conv_retryable(CUDNN_STATUS_NOT_INITIALIZED, 0));
    CHECK(!brg_conv_retryable(CUDNN_STATUS_SUCCESS, 0));
    CHECK(!brg_conv_retryable(CUDNN_STATUS_NOT_SUPPORTED, (int)cudaErrorIllegalAddress));
    CHECK(!brg_conv_retryable(CUDNN_STATUS_BAD_PARAM, (int)cudaErrorLaunchFailure));
#if CUDNN_MAJOR >= 9
    CHECK(brg_conv_retryable(CUDNN_STATUS_NOT_SUPPORTED_SHAPE, 0));
    CHECK(brg_conv_retryable(CUDNN_STATUS_NOT_SUPPORTED_SHARED_MEMORY_INSUFFICIENT, 0));
    CHECK(brg_conv_retryable(CUDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT, 0));
    CHECK(!brg_conv_retryable(CUDNN_STATUS_EXECUTION_FAILED_CUDART, 0));
    CHECK(!brg_conv_retryable(CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED, 0));
#endif
#endif
}

#ifdef BRG_HAVE_CUDA
/* Failed calls become statuses with the call, the library's text and name,
 * and where; no GPU is needed to name an error code. */
static void check_messages(void)
{
    CHECK_STATUS(brg_cuda_fail("cudaMalloc(&p, 64)", cudaErrorMemoryAllocation, "a.c", 12), BRG_ERR_OUT_OF_MEMORY);
    CHECK_ERROR_HAS("cudaMalloc(&p, 64) failed: ");
    CHECK_ERROR_HAS("(cudaErrorMemoryAllocation) at a.c:12");
    CHECK_STATUS(brg_cuda_fail("cudaMemcpy(d, s, n, k)", cudaErrorInvalidValue, "b.c", 3), BRG_ERR_BACKEND);
    CHECK_ERROR_HAS("cudaMemcpy(d, s, n, k) failed: invalid argument (cudaErrorInvalidValue) at b.c:3");
    CHECK_STATUS(brg_cublas_fail("cublasSgemm(...)", CUBLAS_STATUS_INVALID_VALUE, "c.c", 7), BRG_ERR_BACKEND);
    CHECK_ERROR_HAS("cublasSgemm(...) failed: ");
    CHECK_ERROR_HAS("(CUBLAS_STATUS_INVALID_VALUE) at c.c:7");
    CHECK_STATUS(brg_cublas_fail("cublasCreate(&h)", CUBLAS_STATUS_ALLOC_FAILED, "c.c", 8), BRG_ERR_OUT_OF_MEMORY);
#ifdef BRG_HAVE_CUDNN
    CHECK_STATUS(brg_cudnn_fail("cudnnSetStream(h, s)", CUDNN_STATUS_BAD_PARAM, "d.c", 9), BRG_ERR_BACKEND);
    CHECK_ERROR_HAS("cudnnSetStream(h, s) failed: ");
    CHECK_ERROR_HAS("(CUDNN_STATUS_BAD_PARAM) at d.c:9");
#if CUDNN_MAJOR >= 9
    CHECK_STATUS(brg_cudnn_fail("cudnnConvolutionForward(...)", CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED,
                                "d.c", 10),
                 BRG_ERR_OUT_OF_MEMORY);
#endif
#endif
}
#endif

/* ------------------------------------------------------------------ part 2 */
#ifdef GPU_TESTS

static cudaStream_t stream;
static brg_cuda_exec *exec_default, *exec_nows, *exec_tf32;

#define CUDA_OK(call) CHECK_MSG((call) == cudaSuccess, "%s", cudaGetErrorString(cudaGetLastError()))

static int tensor_index(const tcase *c, const brg_tensor *t)
{
    for (int i = 0; i < c->nt; i++)
        if (&c->t[i] == t) return i;
    return -1;
}

/* Largest |gpu - cpu| over the tensor, relative to max(1, max |cpu|); NaN
 * must match NaN. */
static double rel_error(const float *gpu, const float *cpu, int64_t n)
{
    double worst = 0.0, scale = 1.0;
    for (int64_t i = 0; i < n; i++)
        if (fabs(cpu[i]) > scale) scale = fabs(cpu[i]);
    for (int64_t i = 0; i < n; i++) {
        if (isnan(cpu[i]) || isnan(gpu[i])) {
            if (!(isnan(cpu[i]) && isnan(gpu[i]))) return INFINITY;
            continue;
        }
        double e = fabs((double)gpu[i] - (double)cpu[i]);
        if (e > worst) worst = e;
    }
    return worst / scale;
}

/* The CPU kernel on the host op, with its workspace. */
static brg_status run_cpu(const brg_op *op)
{
    brg_op hop = *op;
    hop.workspace_bytes = brg_cpu_workspace_bytes(op);
    hop.workspace = hop.workspace_bytes ? malloc(hop.workspace_bytes) : NULL;
    brg_status st = brg_cpu_kernel_for(hop.kind)(&hop);
    free(hop.workspace);
    return st;
}

/* Run the case on the CPU and on the GPU (with exec) and compare every
 * output within tol. Tensors that appear twice (aliases) share one GPU
 * buffer, as they share host memory. Frees the case. */
static void run_case_with(tcase *c, brg_cuda_exec *exec, size_t budget, double tol, const char *what)
{
    CHECK_MSG(brg_op_validate(&c->op) == BRG_OK, "%s: %s", what, brg_last_error());
    if (!exec) {
        /* No GPU: the case itself is still checked (valid op, CPU kernel
         * runs), so the test's own construction is tested everywhere. */
        CHECK_MSG(run_cpu(&c->op) == BRG_OK, "%s: %s", what, brg_last_error());
        case_free(c);
        return;
    }
    brg_tensor dt[MAX_T];
    for (int i = 0; i < c->nt; i++) {
        dt[i] = c->t[i];
        dt[i].data = NULL;
        size_t bytes = brg_tensor_bytes(&c->t[i]);
        CUDA_OK(cudaMalloc(&dt[i].data, bytes ? bytes : 4));
        CUDA_OK(cudaMemcpy(dt[i].data, c->t[i].data, bytes, cudaMemcpyHostToDevice));
    }
    brg_op dop = c->op;
    for (int i = 0; i < c->op.n_in; i++)
        if (c->op.in[i]) dop.in[i] = &dt[tensor_index(c, c->op.in[i])];
    for (int i = 0; i < c->op.n_out; i++)
        if (c->op.out[i]) dop.out[i] = &dt[tensor_index(c, c->op.out[i])];
    size_t gws = brg_cuda_workspace_bytes(&c->op, budget);
    dop.workspace = NULL;
    dop.workspace_bytes = gws;
    if (gws) CUDA_OK(cudaMalloc(&dop.workspace, gws));

    CHECK_OK(run_cpu(&c->op));

    brg_status st = brg_cuda_run_op(exec, &dop);
    CHECK_MSG(st == BRG_OK, "%s: %s", what, brg_last_error());
    CUDA_OK(cudaStreamSynchronize(stream));
    CHECK_OK(brg_cuda_exec_check(exec));

    for (int i = 0; i < c->op.n_out; i++) {
        if (!c->op.out[i]) continue;
        int j = tensor_index(c, c->op.out[i]);
        int64_t n = brg_tensor_numel(&c->t[j]);
        float *got = malloc((size_t)(n > 0 ? n : 1) * sizeof *got);
        CUDA_OK(cudaMemcpy(got, dt[j].data, (size_t)n * sizeof *got, cudaMemcpyDeviceToHost));
        double e = rel_error(got, c->t[j].data, n);
        CHECK_MSG(e <= tol, "%s (%s): output %d differs by %.3g (tolerance %.3g)", what,
                  brg_op_kind_name(c->op.kind), i, e, tol);
        free(got);
    }
    for (int i = 0; i < c->nt; i++) cudaFree(dt[i].data);
    cudaFree(dop.workspace);
    case_free(c);
}

static void run_case(tcase *c, double tol, const char *what)
{
    run_case_with(c, exec_default, BRG_CUDA_CONV_WORKSPACE_DEFAULT, tol, what);
}

#define TOL_EXACT 1e-6 /* elementwise: same float operations */
#define TOL_SUM 1e-5   /* reductions in double, pools, BN */
#define TOL_GEMM 2e-4  /* cuDNN / cuBLAS sums in another order (FFT, Winograd included) */

typedef struct conv_cfg {
    int n, c, h, w, k, r, s, sh, sw, ph, pw;
} conv_cfg;

static void conv_cases(brg_cuda_exec *exec, size_t budget, double tol, const char *label)
{
    static const conv_cfg cfgs[] = {
        {2, 3, 9, 7, 5, 3, 3, 1, 1, 1, 1},  /* "same" 3x3, odd sizes */
        {3, 4, 11, 10, 6, 3, 2, 2, 2, 1, 0}, /* stride 2, asymmetric kernel and padding */
        {2, 8, 5, 5, 4, 1, 1, 1, 1, 0, 0},   /* 1x1 */
        {1, 3, 16, 16, 8, 7, 7, 2, 2, 3, 3}, /* 7x7 stem */
        {2, 3, 0, 0, 4, 1, 1, 1, 1, 1, 1},   /* an empty input padded to 2x2: y is the bias */
        {0, 3, 5, 5, 4, 3, 3, 1, 1, 1, 1},   /* an empty batch */
    };
    for (size_t i = 0; i < sizeof cfgs / sizeof cfgs[0]; i++) {
        const conv_cfg *g = &cfgs[i];
        int64_t p = brg_conv_out_extent(g->h, g->r, g->sh, g->ph), q = brg_conv_out_extent(g->w, g->s, g->sw, g->pw);
        char what[96];
        for (int bias = 0; bias < 2; bias++) {
            tcase c;
            case_init(&c, BRG_OP_CONV2D_FORWARD);
            c.op.p.conv = (brg_conv2d_params){g->sh, g->sw, g->ph, g->pw};
            in(&c, t4(&c, g->n, g->c, g->h, g->w, F_RAND));
            in(&c, t4(&c, g->k, g->c, g->r, g->s, F_RAND));
            if (bias) in(&c, t1(&c, g->k, F_RAND));
            out(&c, t4(&c, g->n, g->k, p, q, F_RAND));
            snprintf(what, sizeof what, "%s conv %zu forward bias %d", label, i, bias);
            run_case_with(&c, exec, budget, tol, what);
        }
        for (int acc = 0; acc < 2; acc++) {
            tcase c;
            case_init(&c, BRG_OP_CONV2D_BACKWARD_DATA);
            c.op.p.conv = (brg_conv2d_params){g->sh, g->sw, g->ph, g->pw};
            c.op.accumulate = acc;
            in(&c, t4(&c, g->n, g->k, p, q, F_RAND));
            in(&c, t4(&c, g->k, g->c, g->r, g->s, F_RAND));
            out(&c, t4(&c, g->n, g->c, g->h, g->w, F_RAND));
            snprintf(what, sizeof what, "%s conv %zu backward data acc %d", label, i, acc);
            run_case_with(&c, exec, budget, tol, what);
            for (int db = 0; db < 2; db++) {
                case_init(&c, BRG_OP_CONV2D_BACKWARD_FILTER);
                c.op.p.conv = (brg_conv2d_params){g->sh, g->sw, g->ph, g->pw};
                c.op.accumulate = acc;
                in(&c, t4(&c, g->n, g->c, g->h, g->w, F_RAND));
                in(&c, t4(&c, g->n, g->k, p, q, F_RAND));
                out(&c, t4(&c, g->k, g->c, g->r, g->s, F_RAND));
                if (db) out(&c, t1(&c, g->k, F_RAND));
                snprintf(what, sizeof what, "%s conv %zu backward filter acc %d db %d", label, i, acc, db);
                run_case_with(&c, exec, budget, tol, what);
            }
        }
    }
}

static void linear_cases(void)
{
    /* x[5, 3, 2, 2] flattens to I = 12; then a plain [1, 1] layer. */
    static const int shapes[][3] = {{5, 12, 7}, {1, 1, 1}, {33, 65, 10}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        const int n = shapes[i][0], ni = shapes[i][1], o = shapes[i][2];
        const int four_d = ni == 12;
        for (int bias = 0; bias < 2; bias++) {
            tcase c;
            case_init(&c, BRG_OP_LINEAR_FORWARD);
            in(&c, four_d ? t4(&c, n, 3, 2, 2, F_RAND) : t2(&c, n, ni, F_RAND));
            in(&c, t2(&c, o, ni, F_RAND));
            if (bias) in(&c, t1(&c, o, F_RAND));
            out(&c, t2(&c, n, o, F_RAND));
            run_case(&c, TOL_GEMM, "linear forward");
        }
        for (int acc = 0; acc < 2; acc++) {
            tcase c;
            case_init(&c, BRG_OP_LINEAR_BACKWARD_DATA);
            c.op.accumulate = acc;
            in(&c, t2(&c, n, o, F_RAND));
            in(&c, t2(&c, o, ni, F_RAND));
            out(&c, four_d ? t4(&c, n, 3, 2, 2, F_RAND) : t2(&c, n, ni, F_RAND));
            run_case(&c, TOL_GEMM, "linear backward data");
            for (int db = 0; db < 2; db++) {
                case_init(&c, BRG_OP_LINEAR_BACKWARD_WEIGHT);
                c.op.accumulate = acc;
                in(&c, four_d ? t4(&c, n, 3, 2, 2, F_RAND) : t2(&c, n, ni, F_RAND));
                in(&c, t2(&c, n, o, F_RAND));
                out(&c, t2(&c, o, ni, F_RAND));
                if (db) out(&c, t1(&c, o, F_RAND));
                run_case(&c, TOL_GEMM, "linear backward weight");
            }
        }
    }
}

/* Shift every element of t by d (data far from zero stresses BN's sums). */
static void shift(brg_tensor *t, float d)
{
    float *p = t->data;
    for (int64_t i = 0; i < brg_tensor_numel(t); i++) p[i] += d;
}

static void batchnorm_cases(void)
{
    static const int shapes[][4] = {{4, 3, 5, 6}, {2, 5, 1, 1}, {3, 2, 17, 9}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        const int n = shapes[i][0], ch = shapes[i][1], h = shapes[i][2], w = shapes[i][3];
        for (int affine = 0; affine < 2; affine++) {
            tcase c;
            case_init(&c, BRG_OP_BATCHNORM_FORWARD_TRAIN);
            c.op.p.bn = (brg_batchnorm_params){1e-3f, 0.1f};
            brg_tensor *x = t4(&c, n, ch, h, w, F_RAND);
            shift(x, 10.0f * (float)i);
            in(&c, x);
            if (affine) {
                in(&c, t1(&c, ch, F_RAND));
                in(&c, t1(&c, ch, F_RAND));
            }
            out(&c, t4(&c, n, ch, h, w, F_RAND));
            out(&c, t1(&c, ch, F_RAND));
            out(&c, t1(&c, ch, F_POS));
            out(&c, t1(&c, ch, F_RAND));
            out(&c, t1(&c, ch, F_RAND));
            run_case(&c, TOL_SUM, "batchnorm forward train");

            case_init(&c, BRG_OP_BATCHNORM_FORWARD_INFER);
            c.op.p.bn = (brg_batchnorm_params){1e-5f, 0.1f};
            in(&c, t4(&c, n, ch, h, w, F_RAND));
            in(&c, affine ? t1(&c, ch, F_RAND) : NULL);
            in(&c, affine ? t1(&c, ch, F_RAND) : NULL);
            in(&c, t1(&c, ch, F_RAND));
            in(&c, t1(&c, ch, F_POS));
            out(&c, t4(&c, n, ch, h, w, F_RAND));
            run_case(&c, TOL_SUM, "batchnorm forward infer");

            for (int acc = 0; acc < 2; acc++) {
                case_init(&c, BRG_OP_BATCHNORM_BACKWARD);
                c.op.p.bn = (brg_batchnorm_params){1e-3f, 0.1f};
                c.op.accumulate = acc;
                x = t4(&c, n, ch, h, w, F_RAND);
                shift(x, 10.0f * (float)i);
                in(&c, x);
                in(&c, t4(&c, n, ch, h, w, F_RAND));
                in(&c, affine ? t1(&c, ch, F_RAND) : NULL);
                brg_tensor *mean = t1(&c, ch, F_RAND);
                shift(mean, 10.0f * (float)i);
                in(&c, mean);
                in(&c, t1(&c, ch, F_POS));
                out(&c, t4(&c, n, ch, h, w, F_RAND));
                if (affine) {
                    out(&c, t1(&c, ch, F_RAND));
                    out(&c, t1(&c, ch, F_RAND));
                }
                run_case(&c, TOL_SUM, "batchnorm backward");
            }
        }
    }
    /* dx aliasing dy. */
    tcase c;
    case_init(&c, BRG_OP_BATCHNORM_BACKWARD);
    c.op.p.bn = (brg_batchnorm_params){1e-3f, 0.1f};
    in(&c, t4(&c, 3, 4, 5, 5, F_RAND));
    brg_tensor *dy = t4(&c, 3, 4, 5, 5, F_RAND);
    in(&c, dy);
    in(&c, t1(&c, 4, F_RAND));
    in(&c, t1(&c, 4, F_RAND));
    in(&c, t1(&c, 4, F_POS));
    out(&c, dy);
    run_case(&c, TOL_SUM, "batchnorm backward, dx aliasing dy");
}

static void relu_dropout_cases(void)
{
    tcase c;
    case_init(&c, BRG_OP_RELU_FORWARD);
    brg_tensor *x = t4(&c, 3, 5, 7, 9, F_RAND);
    ((float *)x->data)[3] = NAN;
    ((float *)x->data)[4] = 0.0f;
    in(&c, x);
    out(&c, t4(&c, 3, 5, 7, 9, F_RAND));
    run_case(&c, 0.0, "relu forward with a NaN");
    case_init(&c, BRG_OP_RELU_FORWARD);
    x = t4(&c, 2, 3, 4, 5, F_RAND);
    in(&c, x);
    out(&c, x);
    run_case(&c, 0.0, "relu forward in place");
    for (int acc = 0; acc < 2; acc++) {
        case_init(&c, BRG_OP_RELU_BACKWARD);
        c.op.accumulate = acc;
        in(&c, t4(&c, 3, 5, 7, 9, F_RAND));
        in(&c, t4(&c, 3, 5, 7, 9, F_RAND));
        out(&c, t4(&c, 3, 5, 7, 9, F_RAND));
        run_case(&c, TOL_EXACT, "relu backward");

        case_init(&c, acc ? BRG_OP_DROPOUT_BACKWARD : BRG_OP_DROPOUT_FORWARD);
        c.op.p.dropout = (brg_dropout_params){0.3f, 0x1234abcdULL, 12345};
        in(&c, t4(&c, 4, 3, 9, 11, F_RAND));
        out(&c, t4(&c, 4, 3, 9, 11, F_RAND));
        run_case(&c, TOL_EXACT, "dropout forward");
        case_init(&c, BRG_OP_DROPOUT_BACKWARD);
        c.op.p.dropout = (brg_dropout_params){0.5f, 77, 1ULL << 40};
        c.op.accumulate = acc;
        in(&c, t2(&c, 13, 17, F_RAND));
        out(&c, t2(&c, 13, 17, F_RAND));
        run_case(&c, TOL_EXACT, "dropout backward");
    }
}

static void pool_cases(void)
{
    for (size_t i = 0; i < sizeof pool_cfgs / sizeof pool_cfgs[0]; i++) {
        const pool_cfg *g = &pool_cfgs[i];
        int64_t p = brg_conv_out_extent(g->h, g->kh, g->sh, g->ph), q = brg_conv_out_extent(g->w, g->kw, g->sw, g->pw);
        brg_pool_params pp = {g->kh, g->kw, g->sh, g->sw, g->ph, g->pw, 0};
        for (int ties = 0; ties < 2; ties++) {
            /* All-negative inputs check that padding never wins; few
             * distinct values check the tie rule. */
            tcase c;
            case_init(&c, BRG_OP_MAXPOOL_FORWARD);
            c.op.p.pool = pp;
            brg_tensor *x = t4(&c, g->n, g->c, g->h, g->w, ties ? F_TIES : F_RAND);
            if (!ties) shift(x, -2.0f);
            in(&c, x);
            out(&c, t4(&c, g->n, g->c, p, q, F_RAND));
            run_case(&c, 0.0, "maxpool forward");
            for (int acc = 0; acc < 2; acc++) {
                case_init(&c, BRG_OP_MAXPOOL_BACKWARD);
                c.op.p.pool = pp;
                c.op.accumulate = acc;
                in(&c, t4(&c, g->n, g->c, g->h, g->w, ties ? F_TIES : F_RAND));
                in(&c, t4(&c, g->n, g->c, p, q, F_RAND)); /* y: not read */
                in(&c, t4(&c, g->n, g->c, p, q, F_RAND));
                out(&c, t4(&c, g->n, g->c, g->h, g->w, F_RAND));
                run_case(&c, TOL_SUM, "maxpool backward");
            }
        }
        for (int cip = 0; cip < 2; cip++) {
            pp.count_include_pad = cip;
            tcase c;
            case_init(&c, BRG_OP_AVGPOOL_FORWARD);
            c.op.p.pool = pp;
            in(&c, t4(&c, g->n, g->c, g->h, g->w, F_RAND));
            out(&c, t4(&c, g->n, g->c, p, q, F_RAND));
            run_case(&c, TOL_SUM, "avgpool forward");
            for (int acc = 0; acc < 2; acc++) {
                case_init(&c, BRG_OP_AVGPOOL_BACKWARD);
                c.op.p.pool = pp;
                c.op.accumulate = acc;
                in(&c, t4(&c, g->n, g->c, p, q, F_RAND));
                out(&c, t4(&c, g->n, g->c, g->h, g->w, F_RAND));
                run_case(&c, TOL_SUM, "avgpool backward");
            }
        }
    }
    for (int acc = 0; acc < 2; acc++) {
        tcase c;
        case_init(&c, BRG_OP_GLOBAL_AVGPOOL_FORWARD);
        in(&c, t4(&c, 3, 5, 7, 6, F_RAND));
        out(&c, t4(&c, 3, 5, 1, 1, F_RAND));
        run_case(&c, TOL_SUM, "global avgpool forward");
        case_init(&c, BRG_OP_GLOBAL_AVGPOOL_BACKWARD);
        c.op.accumulate = acc;
        in(&c, t4(&c, 3, 5, 1, 1, F_RAND));
        out(&c, t4(&c, 3, 5, 7, 6, F_RAND));
        run_case(&c, TOL_EXACT, "global avgpool backward");
    }
}

static void join_cases(void)
{
    static const int parts[] = {2, 3, 1};
    tcase c;
    case_init(&c, BRG_OP_CONCAT_FORWARD);
    for (int i = 0; i < 3; i++) in(&c, t4(&c, 3, parts[i], 5, 7, F_RAND));
    out(&c, t4(&c, 3, 6, 5, 7, F_RAND));
    run_case(&c, 0.0, "concat forward");
    for (int acc = 0; acc < 2; acc++) {
        case_init(&c, BRG_OP_CONCAT_BACKWARD);
        c.op.accumulate = acc;
        in(&c, t4(&c, 3, 6, 5, 7, F_RAND));
        for (int i = 0; i < 3; i++) out(&c, t4(&c, 3, parts[i], 5, 7, F_RAND));
        run_case(&c, TOL_EXACT, "concat backward");

        case_init(&c, BRG_OP_ADD_BACKWARD);
        c.op.accumulate = acc;
        in(&c, t4(&c, 2, 3, 9, 5, F_RAND));
        out(&c, t4(&c, 2, 3, 9, 5, F_RAND));
        out(&c, t4(&c, 2, 3, 9, 5, F_RAND));
        run_case(&c, TOL_EXACT, "add backward");
        case_init(&c, BRG_OP_ADD_BACKWARD);
        c.op.accumulate = acc;
        in(&c, t4(&c, 2, 3, 9, 5, F_RAND));
        out(&c, NULL); /* a branch that needs no gradient */
        out(&c, t4(&c, 2, 3, 9, 5, F_RAND));
        run_case(&c, TOL_EXACT, "add backward, one branch");
    }
    case_init(&c, BRG_OP_ADD_FORWARD);
    brg_tensor *a = t4(&c, 2, 3, 9, 5, F_RAND);
    in(&c, a);
    in(&c, t4(&c, 2, 3, 9, 5, F_RAND));
    out(&c, a);
    run_case(&c, 0.0, "add forward in place");
}

static void upsample_cases(void)
{
    for (int f = 1; f <= 3; f++)
        for (int acc = 0; acc < 2; acc++) {
            tcase c;
            case_init(&c, BRG_OP_UPSAMPLE_FORWARD);
            c.op.p.upsample.factor = f;
            in(&c, t4(&c, 2, 3, 5, 7, F_RAND));
            out(&c, t4(&c, 2, 3, 5 * f, 7 * f, F_RAND));
            run_case(&c, 0.0, "upsample forward");
            case_init(&c, BRG_OP_UPSAMPLE_BACKWARD);
            c.op.p.upsample.factor = f;
            c.op.accumulate = acc;
            in(&c, t4(&c, 2, 3, 5 * f, 7 * f, F_RAND));
            out(&c, t4(&c, 2, 3, 5, 7, F_RAND));
            run_case(&c, TOL_EXACT, "upsample backward");
        }
}

static void loss_cases(void)
{
    static const int shapes[][2] = {{6, 10}, {1, 1}, {37, 1000}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        const int n = shapes[i][0], k = shapes[i][1];
        tcase c;
        case_init(&c, BRG_OP_SOFTMAX_XENT_FORWARD);
        brg_tensor *z = t2(&c, n, k, F_RAND);
        shift(z, 30.0f); /* exp would overflow without the max subtracted */
        in(&c, z);
        in(&c, labels(&c, n, k));
        out(&c, t1(&c, 1, F_RAND));
        out(&c, t2(&c, n, k, F_RAND));
        run_case(&c, TOL_SUM, "softmax xent forward");
        for (int acc = 0; acc < 2; acc++) {
            case_init(&c, BRG_OP_SOFTMAX_XENT_BACKWARD);
            c.op.p.xent.grad_scale = 1.0f / (float)n;
            c.op.accumulate = acc;
            in(&c, t2(&c, n, k, F_POS));
            in(&c, labels(&c, n, k));
            out(&c, t2(&c, n, k, F_RAND));
            run_case(&c, TOL_EXACT, "softmax xent backward");
        }
    }

    /* A label out of range: the CPU refuses at once; the GPU finds it on the
     * device and brg_cuda_exec_check reports it once, naming the row. */
    for (int backward = 0; backward < 2; backward++) {
        tcase c;
        case_init(&c, backward ? BRG_OP_SOFTMAX_XENT_BACKWARD : BRG_OP_SOFTMAX_XENT_FORWARD);
        c.op.p.xent.grad_scale = 0.25f;
        brg_tensor *z = t2(&c, 4, 5, F_POS);
        brg_tensor *lab = labels(&c, 4, 5);
        ((int32_t *)lab->data)[2] = backward ? -1 : 5;
        in(&c, z);
        in(&c, lab);
        if (!backward) out(&c, t1(&c, 1, F_RAND));
        out(&c, t2(&c, 4, 5, F_RAND));
        CHECK_STATUS(brg_cpu_kernel_for(c.op.kind)(&c.op), BRG_ERR_INVALID_ARGUMENT);
        if (!exec_default) {
            case_free(&c);
            continue;
        }
        brg_tensor dz = *z, dl = *lab, d1 = c.t[2], d2 = c.t[backward ? 2 : 3];
        CUDA_OK(cudaMalloc(&dz.data, 80));
        CUDA_OK(cudaMalloc(&dl.data, 16));
        CUDA_OK(cudaMalloc(&d1.data, 80));
        CUDA_OK(cudaMalloc(&d2.data, 80));
        CUDA_OK(cudaMemcpy(dz.data, z->data, 80, cudaMemcpyHostToDevice));
        CUDA_OK(cudaMemcpy(dl.data, lab->data, 16, cudaMemcpyHostToDevice));
        brg_op op = c.op;
        op.in[0] = &dz;
        op.in[1] = &dl;
        op.out[0] = &d1;
        if (!backward) op.out[1] = &d2;
        void *ws = NULL;
        op.workspace_bytes = brg_cuda_workspace_bytes(&c.op, BRG_CUDA_CONV_WORKSPACE_DEFAULT);
        if (op.workspace_bytes) CUDA_OK(cudaMalloc(&ws, op.workspace_bytes));
        op.workspace = ws;
        CHECK_OK(brg_cuda_run_op(exec_default, &op));
        CUDA_OK(cudaStreamSynchronize(stream));
        CHECK_STATUS(brg_cuda_exec_check(exec_default), BRG_ERR_INVALID_ARGUMENT);
        CHECK_ERROR_HAS(backward ? "label -1" : "label 5");
        CHECK_ERROR_HAS("row 2");
        CHECK_ERROR_HAS(brg_op_kind_name(c.op.kind));
        CHECK_OK(brg_cuda_exec_check(exec_default)); /* reported once */
        cudaFree(ws);
        cudaFree(dz.data);
        cudaFree(dl.data);
        cudaFree(d1.data);
        cudaFree(d2.data);
        case_free(&c);
    }
}

static void optim_cases(void)
{
    static const float momenta[] = {0.0f, 0.9f};
    for (int m = 0; m < 2; m++)
        for (int vel = m == 0 ? 0 : 1; vel < 2; vel++) { /* momentum needs a velocity */
            tcase c;
            case_init(&c, BRG_OP_SGD_UPDATE);
            c.op.p.optim.lr = 0.05f;
            c.op.p.optim.momentum = momenta[m];
            c.op.p.optim.weight_decay = 1e-2f;
            in(&c, t4(&c, 4, 3, 3, 5, F_RAND));
            out(&c, t4(&c, 4, 3, 3, 5, F_RAND));
            if (vel) out(&c, t4(&c, 4, 3, 3, 5, F_RAND)); /* untouched with momentum 0 */
            run_case(&c, TOL_EXACT, "sgd update");
        }
    for (int step = 1; step <= 3; step += 2) {
        tcase c;
        case_init(&c, BRG_OP_ADAM_UPDATE);
        c.op.p.optim = (brg_optim_params){1e-3f, 0.0f, 1e-2f, 0.9f, 0.999f, 1e-8f, step};
        in(&c, t2(&c, 17, 31, F_RAND));
        out(&c, t2(&c, 17, 31, F_RAND));
        out(&c, t2(&c, 17, 31, F_RAND));
        out(&c, t2(&c, 17, 31, F_POS));
        run_case(&c, 1e-5, "adam update");
    }
}

/* 0: ran; 77: no GPU (the cases then run on the CPU only, which checks
 * that each is a valid op). */
static int gpu_checks(void)
{
    int count = 0;
    cudaError_t err = cudaGetDeviceCount(&count);
    const int have_gpu = err == cudaSuccess && count > 0;
    if (!have_gpu)
        fprintf(stderr, "no GPU visible (%s): GPU comparisons skipped\n",
                err ? cudaGetErrorString(err) : "0 devices");
    if (have_gpu) {
        CUDA_OK(cudaSetDevice(0));
        CUDA_OK(cudaStreamCreate(&stream));
        CHECK_OK(brg_cuda_exec_create(0, stream, "cuda:0", BRG_CUDA_CONV_WORKSPACE_DEFAULT, &exec_default));
        CHECK_OK(brg_cuda_exec_create(0, stream, "cuda:0.1", 0, &exec_nows));
        /* TF32 is read when an exec is created. */
        setenv("BRG_CUDA_TF32", "1", 1);
        CHECK_OK(brg_cuda_exec_create(0, stream, "cuda:0.2", BRG_CUDA_CONV_WORKSPACE_DEFAULT, &exec_tf32));
        unsetenv("BRG_CUDA_TF32");
        if (!exec_default || !exec_nows || !exec_tf32) return 0;
    }
    conv_cases(exec_default, BRG_CUDA_CONV_WORKSPACE_DEFAULT, TOL_GEMM, "64 MiB");
    conv_cases(exec_nows, 0, TOL_GEMM, "no workspace"); /* an algorithm that needs none must be found */
    conv_cases(exec_default, BRG_CUDA_CONV_WORKSPACE_DEFAULT, TOL_GEMM, "64 MiB again"); /* cached choices */
    conv_cases(exec_tf32, BRG_CUDA_CONV_WORKSPACE_DEFAULT, 1e-2, "TF32"); /* 10-bit products */
    linear_cases();
    batchnorm_cases();
    relu_dropout_cases();
    pool_cases();
    join_cases();
    upsample_cases();
    loss_cases();
    optim_cases();
    if (!have_gpu) return 77;
    brg_cuda_exec_destroy(exec_default);
    brg_cuda_exec_destroy(exec_nows);
    brg_cuda_exec_destroy(exec_tf32);
    CUDA_OK(cudaStreamDestroy(stream));
    return 0;
}
#endif /* GPU_TESTS */

int main(void)
{
    workspace_checks();
    pool_window_checks();
    conv_algo_checks();
#ifdef BRG_HAVE_CUDA
    check_messages();
#endif
    if (test_failures) TEST_EXIT();
#ifdef GPU_TESTS
    if (gpu_checks() == 77) {
        if (test_failures) TEST_EXIT();
        fprintf(stderr, "%d CPU-side checks passed\n", test_checks);
        return 77;
    }
    TEST_EXIT();
#else
    fprintf(stderr, "%d CPU-side checks passed; CUDA backend with cuDNN not compiled in: GPU part skipped\n",
            test_checks);
    return 77;
#endif
}
