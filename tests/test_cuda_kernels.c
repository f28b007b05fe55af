/* The CUDA backend's pieces that run without a GPU: brg_cuda_workspace_bytes,
 * a pure function, and a planning device of a CUDA target reporting it; the
 * pools' per-element arithmetic (pool-window.h) on the host against the CPU
 * kernels; the order of convolution algorithms (conv-algo.h); where copies
 * in go in the pinned staging ring and when they wait (stage-ring.h); the
 * messages of failed CUDA calls, where the backend is compiled in; the
 * graph API's convolution descriptors up to the operation graph, where cuDNN
 * is (conv-graph.c; cuDNN builds and checks them without a GPU). The CUDA kernels
 * themselves are checked on a GPU by the one kernel harness, as every
 * backend's are (tests/test_cuda_check.c). */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <limits.h>
#include <stdint.h>

#include "backends/cpu/cpu-kernels.h"
#include "backends/cuda/conv-gemm.h"
#include "backends/cuda/cuda-ops.h"
#include "backends/cuda/pool-window.h"
#include "backends/cuda/stage-ring.h"
#include "base/device-impl.h"
#include "testutil.h"

#ifdef BRG_HAVE_CUDA
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#ifdef BRG_HAVE_CUDNN
#include <cudnn.h>

#include "backends/cuda/cuda-exec.h" /* the ops, for the pools' refusal */
#endif
#include "backends/cuda/cuda-check.h"
#endif
/* After cudnn.h: brg_conv_retryable exists only with cuDNN. */
#include "backends/cuda/conv-algo.h"

/* The CPU device the reference kernels run with (they read no device
 * state, but take one as every kernel does). */
static brg_device *cpu;

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

/* The backward by tiles (pool-window.h) as the CUDA blocks run it, on the
 * host: tiles of th x tw input elements, each its windows' table first,
 * then every element's gather. Writes every element of dx. */
static void pool_backward_by_tiles(const brg_cuda_pool_geom *g, const float *x, const float *dy, float *dx, int th,
                                   int tw, int is_max)
{
    const int most = (int)brg_pool_tile_most(g, th, tw);
    int *argmax = malloc((size_t)most * sizeof *argmax);
    float *share = malloc((size_t)most * sizeof *share);
    CHECK(argmax && share);
    for (int64_t pl = 0; argmax && share && pl < g->planes; pl++) {
        const float *xp = x + pl * g->h * g->w, *dyp = dy + pl * g->p * g->q;
        float *dxp = dx + pl * g->h * g->w;
        for (int r0 = 0; r0 < g->h; r0 += th)
            for (int c0 = 0; c0 < g->w; c0 += tw) {
                const brg_pool_tile t = brg_pool_tile_of(g, r0, c0, th, tw);
                CHECK_MSG(t.wh * t.ww <= most, "tile %dx%d at (%d, %d): %d windows, most %d", th, tw, r0, c0,
                          t.wh * t.ww, most);
                if (t.wh * t.ww > most) continue;
                for (int k = 0; k < t.wh * t.ww; k++) {
                    if (is_max) argmax[k] = brg_pool_tile_argmax(g, &t, xp, k);
                    else share[k] = brg_pool_tile_share(g, &t, dyp, k);
                }
                for (int ih = r0; ih < r0 + th && ih < g->h; ih++)
                    for (int iw = c0; iw < c0 + tw && iw < g->w; iw++)
                        dxp[ih * g->w + iw] = brg_pool_tile_gather(g, &t, is_max ? argmax : NULL,
                                                                   is_max ? NULL : share, dyp, ih, iw);
            }
    }
    free(argmax);
    free(share);
}

/* The windows covering an input index never come from a sum that a huge
 * stride overflows: with a stride of INT_MAX and a 1-wide kernel, only
 * element 0 is covered (by window 0). */
static void pool_covering_checks(void)
{
    int lo, hi;
    volatile int huge = INT_MAX; /* not a constant: the compiler must not fold the overflow away */
    brg_pool_covering(0, 1, huge, 0, 1, &lo, &hi);
    CHECK(lo == 0 && hi == 0);
    for (int i = 1; i < 4; i++) {
        brg_pool_covering(i, 1, huge, 0, 1, &lo, &hi);
        CHECK_MSG(lo > hi, "element %d covered by windows %d to %d", i, lo, hi);
    }
    brg_pool_covering(5, 3, 2, 1, 4, &lo, &hi); /* windows start at -1, 1, 3, 5: those at 3 and 5 hold 5 */
    CHECK(lo == 2 && hi == 3);
}

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
        const brg_cuda_pool_geom geom = {(int64_t)g->n * g->c, g->h, g->w, (int)p, (int)q, g->kh, g->kw, g->sh, g->sw,
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
            CHECK_OK(brg_cpu_kernels[c.op.kind](cpu, &c.op));
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
            CHECK_OK(brg_cpu_kernels[b.kind](cpu, &b));
            worst = 0.0;
            for (int64_t j = 0; j < brg_tensor_numel(dx); j++) {
                double e = fabs(brg_pool_backward_at(&gg, is_max ? x->data : NULL, NULL, dy->data, j, is_max) -
                                ((float *)dx->data)[j]);
                worst = e > worst ? e : worst;
            }
            CHECK_MSG(worst <= 1e-6, "pool config %zu variant %d: backward differs by %g", i, variant, worst);
            if (is_max) { /* the kernel's way: the argmax looked for only where x equals y */
                worst = 0.0;
                for (int64_t j = 0; j < brg_tensor_numel(dx); j++) {
                    double e = fabs(brg_pool_backward_at(&gg, x->data, y->data, dy->data, j, 1) -
                                    ((float *)dx->data)[j]);
                    worst = e > worst ? e : worst;
                }
                CHECK_MSG(worst <= 1e-6, "pool config %zu variant %d: max backward through y differs by %g", i,
                          variant, worst);
            }
            /* By tiles, in the launch's shapes and odd ones (edges cut
             * through windows), dx poisoned first: the per-element sums
             * exactly (both within rounding of the CPU's, above). */
            static const int tiles[][2] = {{8, 32}, {8, 8}, {32, 8}, {1, 1}, {3, 5}, {2, 7}};
            const int64_t n_dx = brg_tensor_numel(dx);
            float *tiled = malloc((size_t)n_dx * sizeof *tiled);
            CHECK(tiled != NULL);
            for (size_t s = 0; tiled && s < sizeof tiles / sizeof tiles[0]; s++) {
                for (int64_t j = 0; j < n_dx; j++) tiled[j] = NAN;
                pool_backward_by_tiles(&gg, x->data, dy->data, tiled, tiles[s][0], tiles[s][1], is_max);
                int64_t differ = 0;
                for (int64_t j = 0; j < n_dx; j++)
                    differ += tiled[j] != brg_pool_backward_at(&gg, is_max ? x->data : NULL, NULL, dy->data, j, is_max);
                CHECK_MSG(differ == 0, "pool config %zu variant %d: by %dx%d tiles, %lld of %lld elements differ", i,
                          variant, tiles[s][0], tiles[s][1], (long long)differ, (long long)n_dx);
            }
            free(tiled);
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
    /* A 1x1 convolution that widens 64 -> 256 channels: x, w and y together
     * (a copy in another layout) outgrow the im2col matrix, which is x. */
    brg_tensor wx = brg_tensor_nchw(any, 64, 64, 56, 56), ww = brg_tensor_nchw(any, 256, 64, 1, 1);
    brg_tensor wy = brg_tensor_nchw(any, 64, 256, 56, 56);
    brg_op widen = conv_op(BRG_OP_CONV2D_FORWARD, &wx, &ww, &wy);
    widen.p.conv.pad_h = widen.p.conv.pad_w = 0;
    CHECK_OK(brg_op_validate(&widen));
    CHECK(brg_cuda_workspace_bytes(&widen, SIZE_MAX) ==
          (size_t)4 * (64 * 64 * 56 * 56 + 256 * 64 + 64 * 256 * 56 * 56) + ((size_t)1 << 20));

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
    /* Training BatchNorm: each channel's sums in about a thousand blocks in
     * all, at least 2048 elements a block: with 64 channels at most 16
     * chunks (1024 / 64), x[2, 3, 4, 4] not split at all. Forward: 2
     * doubles a chunk and a float4 a channel; backward: 4 doubles a chunk
     * and 6 a channel; inference and the synchronized pieces none. */
    CHECK(brg_cuda_bn_splits(64, 32 * 147 * 147) == 16);
    CHECK(brg_cuda_bn_splits(192, 32 * 17 * 17) == 5);
    CHECK(brg_cuda_bn_splits(2048, 64 * 7 * 7) == 1);
    CHECK(brg_cuda_bn_splits(3, 2 * 4 * 4) == 1);
    tcase bn;
    case_init(&bn, BRG_OP_BATCHNORM_FORWARD_TRAIN);
    in(&bn, t4(&bn, 2, 64, 100, 100, F_ZERO)); /* 10 chunks of 2000 */
    for (int i = 0; i < 5; i++) out(&bn, i == 0 ? t4(&bn, 2, 64, 100, 100, F_ZERO) : t1(&bn, 64, F_ZERO));
    bn.op.p.bn.epsilon = 1e-3f;
    bn.op.p.bn.momentum = 0.1f;
    CHECK_OK(brg_op_validate(&bn.op));
    CHECK(brg_cuda_workspace_bytes(&bn.op, BRG_CUDA_CONV_WORKSPACE_DEFAULT) == 64 * (10 * 2 * 8 + 16));
    bn.op.kind = BRG_OP_BATCHNORM_BACKWARD;
    CHECK(brg_cuda_workspace_bytes(&bn.op, BRG_CUDA_CONV_WORKSPACE_DEFAULT) == 64 * (10 * 4 * 8 + 6 * 8));
    bn.op.kind = BRG_OP_BATCHNORM_FORWARD_INFER;
    CHECK(brg_cuda_workspace_bytes(&bn.op, BRG_CUDA_CONV_WORKSPACE_DEFAULT) == 0);
    bn.op.kind = BRG_OP_BATCHNORM_STATS;
    CHECK(brg_cuda_workspace_bytes(&bn.op, BRG_CUDA_CONV_WORKSPACE_DEFAULT) == 0);
    case_free(&bn);
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

/* A planning device of a CUDA target with a 4 KiB convolution budget
 * (made with BRG_CUDA_CONV_WORKSPACE_GROW=1 when grow), holding x[2, 3, 8,
 * 8], w[4, 3, 3, 3] and dy[2, 4, 8, 8], whose 3x3 data gradient wants its
 * bound (about 1 MiB) over the budget. 0 when the device was not made. */
typedef struct narrow_device {
    brg_device *dev;
    brg_tensor x, w, y;
} narrow_device;

static int narrow_device_make(int grow, int index, narrow_device *nd)
{
    brg_device_spec spec = {.backend = BRG_BACKEND_CUDA, .capacity = (size_t)64 << 20, .conv_workspace = 4096};
    if (grow) setenv("BRG_CUDA_CONV_WORKSPACE_GROW", "1", 1);
    nd->dev = NULL;
    CHECK_OK(brg_device_create_planning(&spec, index, &nd->dev));
    unsetenv("BRG_CUDA_CONV_WORKSPACE_GROW");
    if (!nd->dev) return 0;
    void *px = NULL, *pw = NULL, *py = NULL;
    CHECK_OK(brg_device_alloc(nd->dev, 2 * 3 * 8 * 8 * sizeof(float), "x", &px));
    CHECK_OK(brg_device_alloc(nd->dev, 4 * 3 * 3 * 3 * sizeof(float), "w", &pw));
    CHECK_OK(brg_device_alloc(nd->dev, 2 * 4 * 8 * 8 * sizeof(float), "dy", &py));
    nd->x = brg_tensor_nchw(px, 2, 3, 8, 8);
    nd->w = brg_tensor_nchw(pw, 4, 3, 3, 3);
    nd->y = brg_tensor_nchw(py, 2, 4, 8, 8);
    return 1;
}

/* BRG_CUDA_CONV_WORKSPACE_GROW=1 at its edge, on a planning device of a
 * CUDA target (brg_device_run's lending is the same for every device):
 * with the device's workspace ceiling set (the plan's peak), a data
 * gradient that wants its bound (about 1 MiB) over a 4 KiB budget gets it
 * from the first run exactly when the bytes in use plus the bound reach
 * the ceiling, the peak never past it; one arena unit more in use and it
 * gets the budget. A forward never widens (a recompute's replay must
 * choose as its first forward did). Without the setting, or without a
 * ceiling (whatever the device held before), nothing widens. */
static void wider_workspace_checks(void)
{
    for (int grow = 0; grow < 2; grow++)
        for (int ceiling = 0; ceiling < 2; ceiling++) {
            narrow_device nd;
            if (!narrow_device_make(grow, 2, &nd)) return;
            brg_device *dev = nd.dev;
            void *held = NULL, *unit = NULL;
            brg_op op = conv_op(BRG_OP_CONV2D_BACKWARD_DATA, &nd.x, &nd.w, &nd.y);
            brg_op fwd = conv_op(BRG_OP_CONV2D_FORWARD, &nd.x, &nd.w, &nd.y);
            const size_t bound = brg_arena_rounded(brg_cuda_workspace_wanted(&op)), base = brg_device_in_use(dev);
            CHECK(bound == brg_arena_rounded(13824 + ((size_t)1 << 20)) && brg_cuda_workspace_wanted(&fwd) == 0);
            const uint64_t want = (uint64_t)(grow && ceiling);
            if (ceiling) {
                /* The plan's peak as the ceiling: granted from the first run. */
                brg_device_set_workspace_ceiling(dev, base + bound);
                CHECK(brg_device_workspace_ceiling(dev) == base + bound);
                CHECK_OK(brg_device_run(dev, &op));
                CHECK(brg_device_wider_workspaces(dev) == want && brg_device_peak(dev) == base + (want ? bound : 4096));
            } else {
                /* No ceiling: the budget, even where the device has held the bound before. */
                CHECK_OK(brg_device_alloc(dev, bound, "held", &held));
                CHECK_OK(brg_device_free(dev, held));
                CHECK_OK(brg_device_run(dev, &op));
                CHECK(brg_device_wider_workspaces(dev) == 0 && brg_device_peak(dev) == base + bound);
            }
            /* A forward never widens, whatever the room. */
            CHECK_OK(brg_device_run(dev, &fwd));
            CHECK(brg_device_wider_workspaces(dev) == want);
            /* One unit more in use: the budget again, the peak unmoved where
             * the bound was held (the budget on top of the unit stays under it). */
            const size_t peak = brg_device_peak(dev), unit_and_budget = base + BRG_ARENA_ALIGN + 4096;
            CHECK_OK(brg_device_alloc(dev, 1, "one unit", &unit));
            CHECK_OK(brg_device_run(dev, &op));
            CHECK(brg_device_wider_workspaces(dev) == want);
            CHECK(brg_device_peak(dev) == (peak > unit_and_budget ? peak : unit_and_budget));
            CHECK_OK(brg_device_free(dev, unit));
            brg_device_destroy(dev);
        }
}

/* The warm-up (brg_device_set_warming) on the same planning device: a
 * gradient that may widen runs with its bound and, its shape's first time,
 * with the budget too (two workspaces lent, one wider, the peak still the
 * ceiling; the shape's next call one); after the warm-up, the device lends
 * wider only the shapes it widened then. Warmed without room, a shape runs
 * once with the budget and gets it later even with room; without the
 * setting the warm-up lends as ever. */
static void warmed_workspace_checks(void)
{
    for (int room = 0; room < 3; room++) { /* in the warm-up: room, one unit short, no setting */
        narrow_device nd;
        if (!narrow_device_make(room < 2, 3, &nd)) return;
        brg_device *dev = nd.dev;
        void *unit = NULL;
        brg_op op = conv_op(BRG_OP_CONV2D_BACKWARD_DATA, &nd.x, &nd.w, &nd.y);
        const size_t bound = brg_arena_rounded(brg_cuda_workspace_wanted(&op)), base = brg_device_in_use(dev);
        brg_device_set_workspace_ceiling(dev, base + bound);
        if (room == 1) CHECK_OK(brg_device_alloc(dev, 1, "one unit", &unit));
        const int widened = room == 0;
        const uint64_t lent = room == 0 ? 2 : 1;
        uint64_t allocs[3], copies, runs;
        brg_device_counts(dev, &allocs[0], &copies, &runs);
        brg_device_set_warming(dev, 1);
        CHECK_OK(brg_device_run(dev, &op));
        brg_device_counts(dev, &allocs[1], &copies, &runs);
        CHECK_OK(brg_device_run(dev, &op)); /* the shape's second call in the warm-up */
        brg_device_set_warming(dev, 0);
        brg_device_counts(dev, &allocs[2], &copies, &runs);
        CHECK_MSG(allocs[1] - allocs[0] == lent && allocs[2] - allocs[1] == 1,
                  "warm-up %d: %llu and %llu workspaces lent, not %llu and 1", room,
                  (unsigned long long)(allocs[1] - allocs[0]), (unsigned long long)(allocs[2] - allocs[1]),
                  (unsigned long long)lent);
        CHECK(brg_device_wider_workspaces(dev) == (uint64_t)(2 * widened) &&
              brg_device_warmed_wider(dev) == widened);
        CHECK(brg_device_peak(dev) == (widened ? base + bound : brg_device_in_use(dev) + 4096));
        CHECK_OK(brg_device_free(dev, unit));
        /* A step with room: wider only where the warm-up widened. */
        CHECK_OK(brg_device_run(dev, &op));
        CHECK(brg_device_wider_workspaces(dev) == (uint64_t)(3 * widened));
        brg_device_destroy(dev);
    }
}

/* After a warm-up, the shapes it did not widen stay at the budget, however
 * close to one it widened: a gradient that adds where it overwrote, other
 * channels, the filter gradient of the same tensors, and one that differs
 * only in stride and padding (x 8x8, w 3x3: stride 2 without padding and
 * stride 3 with 1 both give 3x3). Each widens on a device that has not
 * warmed up, under the same ceiling. */
static void warmed_shape_checks(void)
{
    narrow_device nd;
    if (!narrow_device_make(1, 4, &nd)) return;
    brg_device *dev = nd.dev;
    void *pw5 = NULL, *py5 = NULL;
    CHECK_OK(brg_device_alloc(dev, 5 * 3 * 3 * 3 * sizeof(float), "w5", &pw5));
    CHECK_OK(brg_device_alloc(dev, 2 * 5 * 8 * 8 * sizeof(float), "dy5", &py5));
    brg_tensor x = nd.x, w = nd.w, y = nd.y, y3 = brg_tensor_nchw(nd.y.data, 2, 4, 3, 3);
    brg_tensor w5 = brg_tensor_nchw(pw5, 5, 3, 3, 3), y5 = brg_tensor_nchw(py5, 2, 5, 8, 8);
    brg_op warmed[2] = {conv_op(BRG_OP_CONV2D_BACKWARD_DATA, &x, &w, &y),
                        conv_op(BRG_OP_CONV2D_BACKWARD_DATA, &x, &w, &y3)};
    warmed[1].p.conv.stride_h = warmed[1].p.conv.stride_w = 2;
    warmed[1].p.conv.pad_h = warmed[1].p.conv.pad_w = 0;
    brg_op cold[4] = {warmed[0], conv_op(BRG_OP_CONV2D_BACKWARD_DATA, &x, &w5, &y5),
                      conv_op(BRG_OP_CONV2D_BACKWARD_FILTER, &x, &w, &y), warmed[1]};
    cold[0].accumulate = 1;
    cold[3].p.conv.stride_h = cold[3].p.conv.stride_w = 3;
    cold[3].p.conv.pad_h = cold[3].p.conv.pad_w = 1;
    size_t bound = 0;
    for (int i = 0; i < 6; i++) {
        const brg_op *o = i < 2 ? &warmed[i] : &cold[i - 2];
        CHECK_OK(brg_op_validate(o));
        const size_t b = brg_arena_rounded(brg_cuda_workspace_wanted(o));
        bound = b > bound ? b : bound;
    }
    brg_device_set_workspace_ceiling(dev, brg_device_in_use(dev) + bound);
    uint64_t before = brg_device_wider_workspaces(dev);
    for (int i = 0; i < 4; i++) { /* the control: each widens before any warm-up */
        CHECK_OK(brg_device_run(dev, &cold[i]));
        CHECK_MSG(brg_device_wider_workspaces(dev) == ++before, "cold op %d did not widen before the warm-up", i);
    }
    brg_device_set_warming(dev, 1);
    for (int i = 0; i < 2; i++) CHECK_OK(brg_device_run(dev, &warmed[i]));
    brg_device_set_warming(dev, 0);
    CHECK(brg_device_warmed_wider(dev) == 2);
    before = brg_device_wider_workspaces(dev);
    for (int i = 0; i < 4; i++) {
        CHECK_OK(brg_device_run(dev, &cold[i]));
        CHECK_MSG(brg_device_wider_workspaces(dev) == before, "cold op %d widened after the warm-up", i);
    }
    for (int i = 0; i < 2; i++) {
        CHECK_OK(brg_device_run(dev, &warmed[i]));
        CHECK_MSG(brg_device_wider_workspaces(dev) == ++before, "warmed op %d did not widen after the warm-up", i);
    }
    brg_device_destroy(dev);
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
    /* Shut out by the workspace: ranked ahead of the pick, needing more. */
    CHECK(brg_conv_shut_out(rank, n, 2, 4096, 0, 0u) == 1u << 1);
    CHECK(brg_conv_shut_out(rank, n, 2, SIZE_MAX, 0, 0u) == 0u);
    CHECK(brg_conv_shut_out(rank, n, 0, 4096, 1, 0u) == 0u);             /* the first was picked */
    CHECK(brg_conv_shut_out(rank, n, -1, 99, 0, 0u) == (1u << 0 | 1u << 1 | 1u << 2)); /* unranked pick: all */
    CHECK(brg_conv_shut_out(rank, n, -1, 99, 0, 1u << 1) == (1u << 0 | 1u << 2)); /* known bad: not counted */
    const brg_conv_rank refused[] = {{6, 0, 0, (size_t)1 << 30}, {1, 1, 0, 100}}; /* cuDNN cannot run 6 */
    CHECK(brg_conv_shut_out(refused, 2, 1, 99, 0, 0u) == 0u);
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

/* One chunk of a copy in through the ring (stage-ring.h) as staged_in
 * queues it: placed, waited for oldest first while busy, pushed. Checked
 * against owner[], the bytes of each chunk in flight (its slot + 1, 0 when
 * free), kept here apart from the ring: the chunk never lands on bytes a
 * chunk in flight still holds, nor past the end, and each wait was
 * needed then (every slot taken, or its bytes held). Returns the waits. */
static int ring_chunk(brg_stage_ring *r, unsigned char *owner, size_t n, size_t *placed)
{
    const size_t at = brg_stage_ring_place(r, n);
    int waits = 0;
    CHECK_MSG(at <= r->size && n <= r->size - at, "a chunk of %zu bytes placed at %zu of %zu", n, at, r->size);
    while (brg_stage_ring_busy(r, at, n)) {
        int held = 0;
        for (size_t i = at; i < at + n && !held; i++) held = owner[i] != 0;
        CHECK_MSG(held || r->count == r->slots, "waited with a free slot and bytes %zu + %zu free", at, n);
        const int oldest = r->first, k = brg_stage_ring_retire(r);
        CHECK(k == oldest);
        for (size_t i = 0; i < r->size; i++)
            if (owner[i] == k + 1) owner[i] = 0;
        waits++;
        if (waits > r->slots) break; /* the ring is empty long before */
    }
    size_t clash = SIZE_MAX;
    for (size_t i = at; i < at + n; i++) {
        if (owner[i] != 0 && clash == SIZE_MAX) clash = i;
        owner[i] = (unsigned char)(brg_stage_ring_next(r) + 1);
    }
    CHECK_MSG(clash == SIZE_MAX, "byte %zu of a new chunk at %zu + %zu is still read by a chunk in flight", clash, at,
              n);
    CHECK(r->count < r->slots);
    brg_stage_ring_push(r, at, n);
    *placed = at;
    return waits;
}

/* A column-major GEMM with BLAS's meaning of every argument, as cuBLAS
 * takes them (brg_gemm_args), in double: C = A' B' + beta C. */
static void ref_gemm(const brg_gemm_args *g, const float *a, const float *b, float beta, float *c)
{
    /* cuBLAS's rules for the leading dimensions (else CUBLAS_STATUS_INVALID_VALUE). */
    CHECK(g->lda >= (g->trans_a ? g->k : g->m) && g->ldb >= (g->trans_b ? g->n : g->k) && g->ldc >= g->m);
    for (int t = 0; t < g->batch; t++) {
        const float *at = a + t * g->stride_a, *bt = b + t * g->stride_b;
        float *ct = c + t * g->stride_c;
        for (int i = 0; i < g->m; i++)
            for (int j = 0; j < g->n; j++) {
                double sum = 0.0;
                for (int l = 0; l < g->k; l++) {
                    const double av = g->trans_a ? at[l + (int64_t)i * g->lda] : at[i + (int64_t)l * g->lda];
                    const double bv = g->trans_b ? bt[j + (int64_t)l * g->ldb] : bt[l + (int64_t)j * g->ldb];
                    sum += av * bv;
                }
                /* beta 0: C is not read (cuBLAS's rule: NaN there is overwritten) */
                const double old = beta != 0.0f ? beta * ct[i + (int64_t)j * g->ldc] : 0.0;
                ct[i + (int64_t)j * g->ldc] = (float)(sum + old);
            }
    }
}

/* 1x1 convolution gradients as conv-gemm.h lays them out (the packing and
 * the GEMMs' arguments cuBLAS gets), run on the host through ref_gemm,
 * against the sums written out: the filter gradient with strides 1 and 2
 * (and 2 x 1), added to what dw held; the data gradient, overwritten and
 * added to; and the shapes it must leave to cuDNN. */
static void conv_gemm_checks(void)
{
    enum { N = 3, C = 5, K = 4, H = 7, W = 6 };
    static float x[N * C * H * W], dy[N * K * H * W], w[K * C], dw[K * C], dx[N * C * H * W];
    static float packed[(N * C * H * W + 63) / 64 * 64 + N * K * H * W];
    for (int i = 0; i < N * C * H * W; i++) x[i] = frand();
    for (int i = 0; i < K * C; i++) w[i] = frand();
    const int strides[3][2] = {{1, 1}, {2, 2}, {2, 1}};
    for (int t = 0; t < 3; t++) {
        const int sh = strides[t][0], sw = strides[t][1], p = (H - 1) / sh + 1, q = (W - 1) / sw + 1;
        for (int i = 0; i < N * K * p * q; i++) dy[i] = frand();
        CHECK(brg_conv_gemm_applies(1, N, C, H, W, K, 1, 1, p, q, sh, sw, 0, 0) == BRG_CONV_GEMM_FILTER);
        const size_t bytes = brg_conv_gemm_workspace(BRG_CONV_GEMM_FILTER, N, C, K, p, q);
        const size_t at = brg_conv_gemm_dy_offset(N, C, p, q);
        CHECK(at % 64 == 0 && at >= (size_t)N * C * p * q && bytes == (at + (size_t)N * K * p * q) * sizeof(float));
        if (bytes > sizeof packed) continue;
        const brg_conv_pack px = {N, C, H, W, p, q, sh, sw}, pdy = {N, K, p, q, p, q, 1, 1};
        for (int b = 0; b < N; b++)
            for (int c = 0; c < C; c++)
                for (int i = 0; i < p * q; i++)
                    packed[brg_conv_pack_dst(&px, b, c, i)] = x[brg_conv_pack_src(&px, b, c, i)];
        for (int b = 0; b < N; b++)
            for (int k = 0; k < K; k++)
                for (int i = 0; i < p * q; i++)
                    packed[at + brg_conv_pack_dst(&pdy, b, k, i)] = dy[brg_conv_pack_src(&pdy, b, k, i)];
        for (int i = 0; i < K * C; i++) dw[i] = 0.5f;
        const brg_gemm_args g = brg_conv_gemm_args(BRG_CONV_GEMM_FILTER, N, C, K, p, q);
        ref_gemm(&g, packed, packed + at, 1.0f, dw);
        double worst = 0.0;
        for (int k = 0; k < K; k++)
            for (int c = 0; c < C; c++) {
                double sum = 0.5;
                for (int b = 0; b < N; b++)
                    for (int i = 0; i < p; i++)
                        for (int j = 0; j < q; j++)
                            sum += (double)dy[((b * K + k) * p + i) * q + j] *
                                   x[((b * C + c) * H + i * sh) * W + j * sw];
                worst = fmax(worst, fabs(sum - dw[k * C + c]));
            }
        CHECK_MSG(worst < 1e-5, "1x1 filter gradient by GEMM, strides %d x %d: off by %g", sh, sw, worst);
    }
    /* The data gradient, stride 1: dx[b] = w^T dy[b], then added to. */
    for (int i = 0; i < N * K * H * W; i++) dy[i] = frand();
    CHECK(brg_conv_gemm_applies(0, N, C, H, W, K, 1, 1, H, W, 1, 1, 0, 0) == BRG_CONV_GEMM_DATA);
    CHECK(brg_conv_gemm_workspace(BRG_CONV_GEMM_DATA, N, C, K, H, W) == 0);
    const brg_gemm_args g = brg_conv_gemm_args(BRG_CONV_GEMM_DATA, N, C, K, H, W);
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < N * C * H * W && pass == 0; i++) dx[i] = NAN; /* overwritten whatever it held */
        ref_gemm(&g, dy, w, pass == 0 ? 0.0f : 1.0f, dx);
        double worst = 0.0;
        for (int b = 0; b < N; b++)
            for (int c = 0; c < C; c++)
                for (int i = 0; i < H * W; i++) {
                    double sum = 0.0;
                    for (int k = 0; k < K; k++) sum += (double)w[k * C + c] * dy[(b * K + k) * H * W + i];
                    worst = fmax(worst, fabs((pass + 1) * sum - dx[(b * C + c) * H * W + i]));
                }
        CHECK_MSG(worst < 1e-5, "1x1 data gradient by GEMM (%s): off by %g", pass ? "added" : "overwritten", worst);
    }
    /* Left to cuDNN: wider filters, padding, a strided data gradient,
     * empty shapes, and sizes past cuBLAS's ints. */
    CHECK(brg_conv_gemm_applies(1, N, C, H, W, K, 3, 3, H, W, 1, 1, 1, 1) == BRG_CONV_GEMM_NONE);
    CHECK(brg_conv_gemm_applies(1, N, C, H, W, K, 1, 1, H + 2, W + 2, 1, 1, 1, 1) == BRG_CONV_GEMM_NONE);
    CHECK(brg_conv_gemm_applies(0, N, C, H, W, K, 1, 1, 4, 3, 2, 2, 0, 0) == BRG_CONV_GEMM_NONE);
    CHECK(brg_conv_gemm_applies(1, 0, C, H, W, K, 1, 1, H, W, 1, 1, 0, 0) == BRG_CONV_GEMM_NONE);
    CHECK(brg_conv_gemm_applies(1, 4096, 64, 1024, 1024, 64, 1, 1, 1024, 1024, 1, 1, 0, 0) == BRG_CONV_GEMM_NONE);
}

/* The pinned staging ring of copy_in (stage-ring.h): where chunks go and
 * when the host waits for a DMA. */
static void stage_ring_checks(void)
{
    enum { SIZE = 64, RANDOM_CHUNKS = 4000 };
    static unsigned char owner[(size_t)32 << 20];
    brg_stage_ring r;
    size_t at = 0;
    /* The device's 32 MiB and 32 slots: test_cuda_copies' sizes in a row.
     * Small chunks go one after another without waiting; one that does
     * not fit before the end goes to the start, after waiting for the
     * three there. */
    brg_stage_ring_init(&r, sizeof owner, BRG_STAGE_RING_SLOTS);
    memset(owner, 0, sizeof owner);
    CHECK(ring_chunk(&r, owner, 1, &at) == 0 && at == 0);
    CHECK(ring_chunk(&r, owner, 1000, &at) == 0 && at == 1);
    CHECK(ring_chunk(&r, owner, (size_t)8 << 20, &at) == 0 && at == 1001);
    CHECK(ring_chunk(&r, owner, ((size_t)24 << 20) + 12345, &at) == 3 && at == 0);
    CHECK(r.count == 1 && r.head == ((size_t)24 << 20) + 12345);
    /* A chunk of the whole ring waits for everything in flight. */
    CHECK(ring_chunk(&r, owner, sizeof owner, &at) == 1 && at == 0 && r.head == sizeof owner);
    /* Tiny chunks: the 33rd waits once, for the oldest slot, as every slot is taken. */
    brg_stage_ring_init(&r, sizeof owner, BRG_STAGE_RING_SLOTS);
    memset(owner, 0, sizeof owner);
    int waits = 0;
    for (int i = 0; i < BRG_STAGE_RING_SLOTS; i++) waits += ring_chunk(&r, owner, 100, &at);
    CHECK(waits == 0 && r.count == BRG_STAGE_RING_SLOTS);
    CHECK(ring_chunk(&r, owner, 100, &at) == 1 && at == 100 * BRG_STAGE_RING_SLOTS && r.count == BRG_STAGE_RING_SLOTS);
    /* A chunk that ends exactly at the end of the ring goes at the head. */
    brg_stage_ring_init(&r, SIZE, 4);
    memset(owner, 0, SIZE);
    CHECK(ring_chunk(&r, owner, SIZE - 24, &at) == 0 && at == 0);
    CHECK(ring_chunk(&r, owner, 24, &at) == 0 && at == SIZE - 24);
    CHECK(ring_chunk(&r, owner, 1, &at) == 1 && at == 0);
    /* Random sizes on a small ring, with one to five slots. */
    uint64_t x = 12345;
    for (int slots = 1; slots <= 5; slots++) {
        brg_stage_ring_init(&r, SIZE, slots);
        memset(owner, 0, SIZE);
        int total = 0;
        for (int i = 0; i < RANDOM_CHUNKS; i++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            const size_t n = (x >> 33) % 4 == 0 ? 1 + (x >> 40) % SIZE : 1 + (x >> 40) % 9;
            total += ring_chunk(&r, owner, n, &at);
        }
        CHECK_MSG(total > 0 && total < RANDOM_CHUNKS, "%d slots: %d waits over %d chunks", slots, total,
                  RANDOM_CHUNKS);
    }
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

#ifdef BRG_HAVE_CUDNN
/* The CUDA pools work in int inside a plane (pool-window.h): a plane of
 * 2^31 elements or more is refused, naming it, before any GPU work (the
 * tensors need no memory: nothing is read). */
static void pool_plane_limits(void)
{
    /* 2^32 elements; a side over 2^29; 46340^2 < 2^31 pooled to 46341^2 >
     * 2^31 by a 2x2 window padded by 1 at stride 1. */
    static const int64_t too_big[][4] = {
        {1, 1, (int64_t)1 << 16, (int64_t)1 << 16}, {1, 1, ((int64_t)1 << 29) + 1, 2}, {1, 1, 46340, 46340}};
    static const brg_pool_params how[] = {{2, 2, 2, 2, 0, 0, 0}, {2, 2, 2, 2, 0, 0, 0}, {2, 2, 1, 1, 1, 1, 0}};
    for (size_t i = 0; i < sizeof too_big / sizeof too_big[0]; i++) {
        brg_tensor x, y;
        const int64_t *s = too_big[i];
        const brg_pool_params *pp = &how[i];
        const int64_t pooled[4] = {s[0], s[1], brg_conv_out_extent(s[2], pp->kernel_h, pp->stride_h, pp->pad_h),
                                   brg_conv_out_extent(s[3], pp->kernel_w, pp->stride_w, pp->pad_w)};
        CHECK_OK(brg_tensor_init(&x, NULL, BRG_F32, 4, s, NULL));
        CHECK_OK(brg_tensor_init(&y, NULL, BRG_F32, 4, pooled, NULL));
        brg_op op = {0};
        op.kind = BRG_OP_MAXPOOL_FORWARD;
        op.p.pool = how[i];
        op.in[0] = &x, op.n_in = 1, op.out[0] = &y, op.n_out = 1;
        CHECK_STATUS(brg_cuda_op_maxpool_forward(NULL, &op), BRG_ERR_UNSUPPORTED);
        CHECK_ERROR_HAS("the CUDA pools take planes of under 2^31 elements");
    }
}
#endif

#ifdef BRG_HAVE_CUDNN
/* The graph path's descriptors (conv-graph.c) up to the operation graph,
 * which cuDNN builds and checks without a GPU (9.8 and later take no
 * handle): each kind with and without beta, a strided and a padded shape,
 * and a y of the wrong height, which cuDNN must refuse with a message.
 * Heuristics and plans need a GPU (test_cuda_check). */
static void conv_graph_checks(void)
{
    if (cudnnGetVersion() < 90800) {
        fprintf(stderr, "cuDNN %zu needs a handle for its operation graphs: graph descriptors not checked\n",
                cudnnGetVersion());
        return;
    }
    const int kinds[3] = {BRG_OP_CONV2D_FORWARD, BRG_OP_CONV2D_BACKWARD_DATA, BRG_OP_CONV2D_BACKWARD_FILTER};
    const conv_key shapes[2] = {
        {.n = 8, .c = 64, .h = 56, .w = 56, .k = 128, .r = 3, .s = 3, .p = 28, .q = 28, .sh = 2, .sw = 2, .ph = 1,
         .pw = 1},
        {.n = 2, .c = 3, .h = 9, .w = 7, .k = 5, .r = 1, .s = 7, .p = 9, .q = 7, .sh = 1, .sw = 1, .ph = 0, .pw = 3},
    };
    const int align[3] = {16, 8, 4};
    char why[512];
    for (int i = 0; i < 3; i++)
        for (int s = 0; s < 2; s++)
            for (int acc = 0; acc < 2; acc++) {
                conv_key k = shapes[s];
                k.kind = kinds[i];
                const cudnnStatus_t st = brg_cuda_conv_graph_describe(NULL, &k, acc, align, why, sizeof why);
                CHECK_MSG(st == CUDNN_STATUS_SUCCESS, "%s, shape %d, beta %d: %s (%s)",
                          brg_op_kind_name((brg_op_kind)k.kind), s, acc, cudnnGetErrorString(st), why);
            }
    conv_key bad = shapes[0];
    bad.kind = BRG_OP_CONV2D_FORWARD;
    bad.p = 27;
    const cudnnStatus_t st = brg_cuda_conv_graph_describe(NULL, &bad, 0, align, why, sizeof why);
    CHECK_MSG(CUDNN_STATUS_CATEGORY(st) == CUDNN_STATUS_BAD_PARAM && strstr(why, "operation"),
              "a y of the wrong height: %s (%s)", cudnnGetErrorString(st), why);
}
#endif

int main(void)
{
    CHECK_OK(brg_device_create_cpu((size_t)16 << 20, 0, &cpu));
    if (!cpu) TEST_EXIT();
    workspace_checks();
    wider_workspace_checks();
    warmed_workspace_checks();
    warmed_shape_checks();
    pool_window_checks();
    pool_covering_checks();
    conv_algo_checks();
    conv_gemm_checks();
    stage_ring_checks();
#ifdef BRG_HAVE_CUDA
    check_messages();
#endif
#ifdef BRG_HAVE_CUDNN
    pool_plane_limits();
    conv_graph_checks();
#endif
    brg_device_destroy(cpu);
    TEST_EXIT();
}
