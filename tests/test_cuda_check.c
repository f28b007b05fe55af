/* The CUDA backend's kernels under the one kernel harness (brigade/check.h),
 * unchanged from the CPU's: every default case and random cases of every
 * family on a CUDA device, against the double reference and finite
 * differences, with the CPU backend as an extra oracle on every op; again
 * with no convolution workspace (an algorithm that needs none must be
 * found), with a 4 KiB budget that convolutions outgrow into the room
 * under the device's peak (BRG_CUDA_CONV_WORKSPACE_GROW=1, base/device.c),
 * with 1x1 gradients by cuBLAS GEMM (BRG_CUDA_CONV_1X1=gemm), with TF32
 * allowed (looser tolerances), and on shapes too large
 * for finite differences to cover, where the CPU oracle compares every
 * element. Then a label out of range, which the GPU finds on the device and
 * reports at the next synchronize, once, and a filter gradient that
 * accumulates, timed by BRG_CUDA_CONV_ALGO=measure, keeps what it adds to.
 * Last, every case again with the convolutions on cuDNN's graph API
 * (BRG_CUDA_CONV_API=graph, conv-graph.c), by its heuristics and timed
 * (measure): most shapes must run there, not fall back to the legacy API.
 * Exits 77 where no CUDA backend is compiled in or no GPU is visible. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brigade/check.h"
#include "brigade/device.h"
#include "backends/cuda/conv-gemm.h"
#include "backends/cuda/cuda-ops.h"
#include "testutil.h"

#define MiB ((size_t)1 << 20)
#define RANDOM_PER_FAMILY 4

static brg_device *cpu_oracle;

/* A CUDA device on GPU 0 of `capacity` bytes and convolution workspace
 * budget ws (0: the default); NULL after a failed check. */
static brg_device *cuda_device(size_t capacity, size_t ws, int index)
{
    brg_device_spec spec = {.backend = BRG_BACKEND_CUDA, .gpu = 0, .capacity = capacity, .vdev = index,
                            .conv_workspace = ws};
    brg_device *dev = NULL;
    CHECK_OK(brg_device_create(&spec, index, &dev));
    return dev;
}

static int run_case(brg_device *dev, const brg_check_case *c, uint64_t seed, const brg_check_options *o,
                    const char *what)
{
    brg_check_result r;
    const brg_status st = brg_check_run_opts(dev, c, seed, o, &r);
    CHECK_MSG(st == BRG_OK && r.passed, "%s: %s (seed %" PRIu64 "): %s", what, r.label, r.seed, r.message);
    if (!r.passed || getenv("BRG_CHECK_VERBOSE"))
        fprintf(stderr, "%-14s %-60s fwd %.2g bwd %.2g acc %.2g oracle %.2g of tolerance\n", what, r.label,
                r.forward_error, r.backward_error, r.accumulate_error, r.oracle_error);
    return r.passed;
}

/* Every default case and RANDOM_PER_FAMILY random ones of each family. */
static void all_cases(brg_device *dev, const brg_check_options *o, const char *what)
{
    const brg_check_case *defaults = NULL;
    const int n = brg_check_default_cases(&defaults);
    int passed = 0, run = 0;
    for (int i = 0; i < n; i++, run++) passed += run_case(dev, &defaults[i], 100 + (uint64_t)i, o, what);
    for (int f = 0; f < BRG_CHECK_FAMILY_COUNT; f++)
        for (uint64_t j = 0; j < RANDOM_PER_FAMILY; j++, run++) {
            brg_check_case c;
            CHECK_OK(brg_check_random_case((brg_check_family)f, 7000 + j, &c));
            passed += run_case(dev, &c, 9000 + j, o, what);
        }
    fprintf(stderr, "%s: %d of %d cases passed\n", what, passed, run);
}

/* Shapes of Inception-v3's and ResNet's sizes: a few finite differences,
 * every element against the CPU. */
static void large_cases(brg_device *dev)
{
    const brg_check_case big[] = {
        {.family = BRG_CHECK_CONV2D, .ndim = 4, .x_shape = {8, 64, 35, 35}, .out_features = 96, .kernel_h = 3,
         .kernel_w = 3, .stride_h = 1, .stride_w = 1, .pad_h = 1, .pad_w = 1, .bias = 1},
        {.family = BRG_CHECK_CONV2D, .ndim = 4, .x_shape = {4, 192, 17, 17}, .out_features = 192, .kernel_h = 1,
         .kernel_w = 7, .stride_h = 1, .stride_w = 1, .pad_h = 0, .pad_w = 3},
        {.family = BRG_CHECK_LINEAR, .ndim = 2, .x_shape = {64, 2048}, .out_features = 1000, .bias = 1},
        {.family = BRG_CHECK_BATCHNORM_TRAIN, .ndim = 4, .x_shape = {16, 128, 28, 28}},
        {.family = BRG_CHECK_MAXPOOL, .ndim = 4, .x_shape = {8, 64, 56, 56}, .kernel_h = 3, .kernel_w = 3,
         .stride_h = 2, .stride_w = 2, .pad_h = 1, .pad_w = 1},
        {.family = BRG_CHECK_SOFTMAX_XENT, .ndim = 2, .x_shape = {37, 1000}},
    };
    /* Sums of 10^4 terms and more (a filter gradient over 8 x 35 x 35
     * pixels) in cuDNN's order and the CPU's differ by more than the short
     * sums of the default cases: 1.26e-5 of the largest element against the
     * family's 1e-5 on an H100 (2026-11-27). */
    brg_check_options o = {.oracle = cpu_oracle, .fd_max_elements = 4, .tolerance_scale = 4.0};
    for (size_t i = 0; i < sizeof big / sizeof big[0]; i++) run_case(dev, &big[i], 31 + i, &o, "large");
}

/* dw of x[4,8,9,9] and dy[4,16,9,9] (3x3, pad 1) added to a prefill of
 * 100 on dev; the host copy in out[16 * 8 * 9]. */
static void filter_grad_accumulated(brg_device *dev, const float *xh, const float *dyh, float *out)
{
    const int64_t xs[4] = {4, 8, 9, 9}, ys[4] = {4, 16, 9, 9}, ws[4] = {16, 8, 3, 3};
    brg_tensor x = {0}, dy = {0}, dw = {0};
    CHECK_OK(brg_tensor_alloc(dev, BRG_F32, 4, xs, "test / x", &x));
    CHECK_OK(brg_tensor_alloc(dev, BRG_F32, 4, ys, "test / dy", &dy));
    CHECK_OK(brg_tensor_alloc(dev, BRG_F32, 4, ws, "test / dw", &dw));
    for (int i = 0; i < 16 * 8 * 9; i++) out[i] = 100.0f;
    if (x.data && dy.data && dw.data) {
        CHECK_OK(brg_device_copy_in(dev, x.data, xh, brg_tensor_bytes(&x)));
        CHECK_OK(brg_device_copy_in(dev, dy.data, dyh, brg_tensor_bytes(&dy)));
        CHECK_OK(brg_device_copy_in(dev, dw.data, out, brg_tensor_bytes(&dw)));
        brg_op op = {.kind = BRG_OP_CONV2D_BACKWARD_FILTER, .n_in = 2, .n_out = 1, .accumulate = 1};
        op.p.conv.stride_h = op.p.conv.stride_w = 1;
        op.p.conv.pad_h = op.p.conv.pad_w = 1;
        op.in[0] = &x;
        op.in[1] = &dy;
        op.out[0] = &dw;
        CHECK_OK(brg_device_run(dev, &op));
        CHECK_OK(brg_device_copy_out(dev, out, dw.data, brg_tensor_bytes(&dw)));
    }
    brg_tensor_free(&x);
    brg_tensor_free(&dy);
    brg_tensor_free(&dw);
}

/* BRG_CUDA_CONV_ALGO=measure times a filter gradient that accumulates (as
 * every one does in training) with a scratch output at its workspace's
 * front, since cuDNN's Find writes the output it is given: the gradient it
 * adds to must survive. The harness cannot see this: its accumulating
 * runs come after a first visit that overwrote, and find the shape timed.
 * Against the same op on a device that picks by heuristics. */
static void measured_filter_accumulates(void)
{
    setenv("BRG_CUDA_CONV_ALGO", "measure", 1);
    brg_device *measured = cuda_device(256 * MiB, 0, 3);
    unsetenv("BRG_CUDA_CONV_ALGO");
    brg_device *picked = cuda_device(256 * MiB, 0, 4);
    static float xh[4 * 8 * 81], dyh[4 * 16 * 81], a[16 * 8 * 9], b[16 * 8 * 9];
    uint64_t z = 12345;
    for (size_t i = 0; i < sizeof xh / sizeof xh[0]; i++, z = z * 6364136223846793005ull + 1442695040888963407ull)
        xh[i] = (float)((double)(z >> 40) / (double)(1ull << 24)) - 0.5f;
    for (size_t i = 0; i < sizeof dyh / sizeof dyh[0]; i++, z = z * 6364136223846793005ull + 1442695040888963407ull)
        dyh[i] = (float)((double)(z >> 40) / (double)(1ull << 24)) - 0.5f;
    if (measured && picked) {
        filter_grad_accumulated(measured, xh, dyh, a);
#ifdef BRG_HAVE_CUDA
        CHECK_MSG(brg_cuda_measured_choices(measured) == 1, "the filter gradient's algorithm was not timed (%d "
                  "shapes timed)", brg_cuda_measured_choices(measured));
#endif
        filter_grad_accumulated(picked, xh, dyh, b);
        double worst = 0.0;
        for (int i = 0; i < 16 * 8 * 9; i++) worst = fmax(worst, fabs((double)a[i] - (double)b[i]));
        CHECK_MSG(worst <= 1e-3, "measured filter gradient added to 100 differs from the heuristics' by %g", worst);
    }
    brg_device_destroy(picked);
    brg_device_destroy(measured);
}

/* Every case on a device whose convolutions go through cuDNN's graph API
 * (BRG_CUDA_CONV_API=graph, read when the device is made), with the
 * heuristics' engines or, with measure, timed ones: the same tolerances as
 * the legacy path (no tensor-core engine without TF32), and most shapes
 * must have run on the graph API rather than fallen back to the legacy
 * one (conv-graph.c prints a line for each that fell back). */
static void graph_cases(const char *algo, int index, const char *what)
{
    setenv("BRG_CUDA_CONV_API", "graph", 1);
    if (algo) setenv("BRG_CUDA_CONV_ALGO", algo, 1);
    brg_device *dev = cuda_device(256 * MiB, 0, index);
    unsetenv("BRG_CUDA_CONV_ALGO");
    unsetenv("BRG_CUDA_CONV_API");
    if (!dev) return;
    const brg_check_options with_cpu = {.oracle = cpu_oracle};
    all_cases(dev, &with_cpu, what);
#ifdef BRG_HAVE_CUDA
    int fell_back = 0, measured = 0;
    const int plans = brg_cuda_graph_plans(dev, &fell_back, &measured);
    fprintf(stderr, "%s: %d convolution plans on the graph API (%d timed), %d shapes fell back to the legacy API\n",
            what, plans, measured, fell_back);
    CHECK_MSG(plans > 0 && fell_back < plans, "%s: %d plans on cuDNN's graph API, %d shapes fell back", what, plans,
              fell_back);
    /* Each kind must run there, not only in total; beta 1 (the backward
     * kinds' accumulating runs, which PyTorch never asks of the graph API)
     * is reported, for the first GPU run to show. */
    const int kinds[3] = {BRG_OP_CONV2D_FORWARD, BRG_OP_CONV2D_BACKWARD_DATA, BRG_OP_CONV2D_BACKWARD_FILTER};
    for (int i = 0; i < 3; i++) {
        int failed[2] = {0, 0};
        const int n0 = brg_cuda_graph_plans_of(dev, kinds[i], 0, &failed[0]);
        const int n1 = brg_cuda_graph_plans_of(dev, kinds[i], 1, &failed[1]);
        fprintf(stderr, "%s: %s: %d plans with beta 0 (%d fell back), %d with beta 1 (%d fell back)\n", what,
                brg_op_kind_name((brg_op_kind)kinds[i]), n0, failed[0], n1, failed[1]);
        CHECK_MSG(n0 + n1 > 0, "%s: no %s ran on the graph API", what, brg_op_kind_name((brg_op_kind)kinds[i]));
    }
    if (algo) CHECK_MSG(measured > 0, "%s: none of the %d graph plans was timed", what, plans);
#endif
    brg_device_destroy(dev);
}

/* A label out of range: found on the device, reported by the next
 * synchronize with the row and the label, once. */
static void label_out_of_range(brg_device *dev)
{
    const int64_t zs[2] = {4, 5}, ls[1] = {4}, one[1] = {1};
    brg_tensor z = {0}, lab = {0}, loss = {0}, probs = {0};
    CHECK_OK(brg_tensor_alloc(dev, BRG_F32, 2, zs, "test / logits", &z));
    CHECK_OK(brg_tensor_alloc(dev, BRG_I32, 1, ls, "test / labels", &lab));
    CHECK_OK(brg_tensor_alloc(dev, BRG_F32, 1, one, "test / loss", &loss));
    CHECK_OK(brg_tensor_alloc(dev, BRG_F32, 2, zs, "test / probs", &probs));
    const float zh[20] = {0};
    const int32_t lh[4] = {0, 1, 5, 2};
    CHECK_OK(brg_device_copy_in(dev, z.data, zh, sizeof zh));
    CHECK_OK(brg_device_copy_in(dev, lab.data, lh, sizeof lh));
    brg_op op = {.kind = BRG_OP_SOFTMAX_XENT_FORWARD, .n_in = 2, .n_out = 2};
    op.in[0] = &z;
    op.in[1] = &lab;
    op.out[0] = &loss;
    op.out[1] = &probs;
    CHECK_OK(brg_device_run(dev, &op)); /* asynchronous: nothing known yet */
    CHECK_STATUS(brg_device_synchronize(dev), BRG_ERR_INVALID_ARGUMENT);
    CHECK_ERROR_HAS("row 2 has label 5");
    CHECK_OK(brg_device_synchronize(dev)); /* reported once */
    brg_tensor_free(&probs);
    brg_tensor_free(&loss);
    brg_tensor_free(&lab);
    brg_tensor_free(&z);
}

int main(void)
{
    if (!brg_backend_available(BRG_BACKEND_CUDA)) {
        fprintf(stderr, "no CUDA devices here (a build without the CUDA runtime and cuDNN, or no GPU "
                        "visible): skipped\n");
        return 77;
    }
    CHECK_OK(brg_device_create_cpu(1024 * MiB, 9, &cpu_oracle));
    brg_device *dev = cuda_device(1024 * MiB, 0, 0);
    brg_device *nows = cuda_device(256 * MiB, 1, 1);
    /* A 4 KiB budget, BRG_CUDA_CONV_WORKSPACE_GROW=1 (read when the device
     * is made) and a ceiling of 64 MiB in use: convolution gradients that
     * the harness lends workspace to (its accumulating runs; it gives the
     * others their 4 KiB itself) get their whole bound instead, about 1 MiB. */
    setenv("BRG_CUDA_CONV_WORKSPACE_GROW", "1", 1);
    brg_device *narrow = cuda_device(256 * MiB, 4096, 5);
    unsetenv("BRG_CUDA_CONV_WORKSPACE_GROW");
    brg_device_set_workspace_ceiling(narrow, 64 * MiB);
    if (!cpu_oracle || !dev || !nows || !narrow) TEST_EXIT();
    const brg_check_options with_cpu = {.oracle = cpu_oracle};
    all_cases(dev, &with_cpu, "cuda");
    all_cases(nows, &with_cpu, "no workspace");
    CHECK(brg_device_wider_workspaces(nows) == 0);
    all_cases(narrow, &with_cpu, "4 KiB, wider");
    CHECK_MSG(brg_device_wider_workspaces(narrow) >= 10, "%llu workspaces lent wider on a 4 KiB budget",
              (unsigned long long)brg_device_wider_workspaces(narrow));
    all_cases(dev, &with_cpu, "cuda, cached"); /* the algorithm cache's second visit */
    /* 1x1 gradients by cuBLAS GEMM (read when the device is made). */
    setenv("BRG_CUDA_CONV_1X1", "gemm", 1);
    brg_device *gemm = cuda_device(256 * MiB, 0, 6);
    unsetenv("BRG_CUDA_CONV_1X1");
    if (gemm) {
        all_cases(gemm, &with_cpu, "1x1 by GEMM");
#ifdef BRG_HAVE_CUDA
        /* Both forms: three 1x1 default cases' filter gradients (one
         * strided), two stride-1 data gradients, each run more than once. */
        const int filter = brg_cuda_gemm_convs(gemm, BRG_CONV_GEMM_FILTER);
        const int data = brg_cuda_gemm_convs(gemm, BRG_CONV_GEMM_DATA);
        CHECK_MSG(filter >= 3 && data >= 2, "%d filter and %d data gradients ran as GEMMs", filter, data);
#endif
    }
    brg_device_destroy(gemm);
    large_cases(dev);
    label_out_of_range(dev);
    measured_filter_accumulates();
    /* TF32 is read when a device's state is made: about 10 bits of
     * mantissa in products, so tolerances 1000x looser (1e-2 for convolutions). */
    setenv("BRG_CUDA_TF32", "1", 1);
    brg_device *tf32 = cuda_device(256 * MiB, 0, 2);
    unsetenv("BRG_CUDA_TF32");
    if (tf32) {
        const brg_check_options loose = {.oracle = cpu_oracle, .tolerance_scale = 1000.0};
        all_cases(tf32, &loose, "tf32");
    }
    brg_device_destroy(tf32);
    graph_cases(NULL, 6, "graph");
    graph_cases("measure", 7, "graph, measure");
    brg_device_destroy(narrow);
    brg_device_destroy(nows);
    brg_device_destroy(dev);
    brg_device_destroy(cpu_oracle);
    TEST_EXIT();
}
