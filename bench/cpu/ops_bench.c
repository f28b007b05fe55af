/* ops_bench: brigade's own CPU kernels for BatchNorm, ReLU and pooling
 * against oneDNN's primitives on the same plain NCHW tensors, in one
 * process, on the same threads (bench/README.md, "Own kernels against
 * oneDNN's"). The issue asked for oneDNN "where it is faster": this says
 * where that is.
 *
 *   bench/cpu_ops_bench [--batch N] [--reps N] [--threads N]
 *
 * Each case is timed as the median of --reps runs after one warm-up, ours
 * through brg_device_run on a CPU device, oneDNN's through its C API on
 * the same memory (its workspace from oneDNN, outside the timing), with
 * --threads setting both OpenMP's count (oneDNN's) and OpenBLAS's (which
 * brigade's kernels divide their work by). The shapes
 * are Inception-v3's at 299x299: the stem's 64 channels at 147x147, 192 at
 * 71x71 and 35x35, 768 at 17x17. Exit 0 when every case ran. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <dnnl.h>

#include "brigade/device.h"
#include "brigade/ops.h"
#include "brigade/status.h"
#include "brigade/tensor.h"

/* OpenBLAS's count is the one brigade's CPU kernels divide their work by
 * (backends/cpu/gemm.c); oneDNN's is OpenMP's, from libgomp, which
 * ONEDNN_LIBS links (declared here as backends/cpu does: no <omp.h> needed). */
void omp_set_num_threads(int n);
int omp_get_max_threads(void);
void openblas_set_num_threads(int n);
int openblas_get_num_threads(void);

#define MAX_REPS 64

static int reps = 5;
static dnnl_engine_t engine;
static dnnl_stream_t stream;

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static void die(const char *what)
{
    fprintf(stderr, "ops_bench: %s: %s\n", what, brg_last_error());
    exit(1);
}

static void dnnl_ok(dnnl_status_t s, const char *what)
{
    if (s != dnnl_success) {
        fprintf(stderr, "ops_bench: oneDNN %s failed (status %d)\n", what, (int)s);
        exit(1);
    }
}

/* ---- ours ---- */

static brg_device *dev;

static brg_tensor tensor(int ndim, const int64_t *shape, float fill_base)
{
    brg_tensor t;
    if (brg_tensor_alloc(dev, BRG_F32, ndim, shape, "bench", &t) != BRG_OK) die("allocating");
    const int64_t n = brg_tensor_numel(&t);
    float *host = malloc((size_t)n * sizeof *host);
    if (!host) die("host memory");
    uint64_t z = 0x9e3779b97f4a7c15ull ^ (uint64_t)(fill_base * 1000.0f);
    for (int64_t i = 0; i < n; i++) {
        z ^= z << 13;
        z ^= z >> 7;
        z ^= z << 17;
        host[i] = fill_base + (float)((double)(z >> 40) / (double)(1ull << 24)) * 2.0f - 1.0f;
    }
    if (brg_device_copy_in(dev, t.data, host, (size_t)n * sizeof *host) != BRG_OK) die("copying in");
    free(host);
    return t;
}

static double time_ours(brg_op *op)
{
    double t[MAX_REPS];
    size_t ws = 0;
    if (brg_device_workspace_bytes(dev, op, &ws) != BRG_OK) die("workspace");
    brg_tensor w;
    int64_t wshape[1] = {(int64_t)(ws / sizeof(float)) + 1};
    if (ws) {
        if (brg_tensor_alloc(dev, BRG_F32, 1, wshape, "workspace", &w) != BRG_OK) die("workspace");
        op->workspace = w.data;
        op->workspace_bytes = ws;
    }
    for (int r = -1; r < reps; r++) {
        const double t0 = now();
        if (brg_device_run(dev, op) != BRG_OK) die(brg_op_kind_name(op->kind));
        if (r >= 0) t[r] = now() - t0;
    }
    if (ws) brg_tensor_free(&w);
    return median(t, reps);
}

/* ---- oneDNN ---- */

static dnnl_memory_desc_t nchw(const int64_t *s)
{
    dnnl_memory_desc_t md;
    const dnnl_dims_t d = {s[0], s[1], s[2], s[3]};
    dnnl_ok(dnnl_memory_desc_init_by_tag(&md, 4, d, dnnl_f32, dnnl_abcd), "memory desc");
    return md;
}

static dnnl_memory_t mem(const dnnl_memory_desc_t *md, void *data)
{
    dnnl_memory_t m;
    dnnl_ok(dnnl_memory_create(&m, md, engine, data ? data : DNNL_MEMORY_ALLOCATE), "memory");
    return m;
}

static dnnl_memory_t queried(const_dnnl_primitive_desc_t pd, dnnl_query_t what)
{
    const dnnl_memory_desc_t *md = dnnl_primitive_desc_query_md(pd, what, 0);
    if (!md || dnnl_memory_desc_get_size(md) == 0) return NULL;
    return mem(md, NULL);
}

static double time_dnnl(dnnl_primitive_t prim, int n, const dnnl_exec_arg_t *args)
{
    double t[MAX_REPS];
    for (int r = -1; r < reps; r++) {
        const double t0 = now();
        dnnl_ok(dnnl_primitive_execute(prim, stream, n, args), "execute");
        dnnl_ok(dnnl_stream_wait(stream), "wait");
        if (r >= 0) t[r] = now() - t0;
    }
    return median(t, reps);
}

static const char *impl_of(const_dnnl_primitive_desc_t pd)
{
    const char *impl = NULL;
    dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl);
    return impl ? impl : "?";
}

static void row(const char *what, const int64_t *s, double ours, double theirs, const char *impl)
{
    printf("%-24s %4lldx%4lldx%3lldx%3lld | %9.2f %9.2f | %5.2f  %s\n", what, (long long)s[0], (long long)s[1],
           (long long)s[2], (long long)s[3], ours * 1e3, theirs * 1e3, theirs / ours, impl);
}

/* BatchNorm with scale and shift, training: forward (statistics, then
 * normalize), and backward (data, scale and shift gradients). */
static void batchnorm(const int64_t *s)
{
    const int64_t C = s[1], vec[1] = {C};
    brg_tensor x = tensor(4, s, 0.5f), y = tensor(4, s, 0.0f), dy = tensor(4, s, 0.1f), dx = tensor(4, s, 0.0f);
    brg_tensor g = tensor(1, vec, 1.0f), b = tensor(1, vec, 0.0f), rm = tensor(1, vec, 0.0f), rv = tensor(1, vec, 1.0f);
    brg_tensor mean = tensor(1, vec, 0.0f), invstd = tensor(1, vec, 1.0f), dg = tensor(1, vec, 0.0f),
               db = tensor(1, vec, 0.0f);
    const brg_batchnorm_params bn = {.epsilon = 1e-3f, .momentum = 0.1f};
    brg_op f = {.kind = BRG_OP_BATCHNORM_FORWARD_TRAIN, .p.bn = bn, .n_in = 3, .n_out = 5, .in = {&x, &g, &b},
                .out = {&y, &rm, &rv, &mean, &invstd}};
    brg_op bw = {.kind = BRG_OP_BATCHNORM_BACKWARD, .p.bn = bn, .n_in = 5, .n_out = 3,
                 .in = {&x, &dy, &g, &mean, &invstd}, .out = {&dx, &dg, &db}};
    const double ours_f = time_ours(&f), ours_b = time_ours(&bw);

    const dnnl_memory_desc_t md = nchw(s);
    dnnl_batch_normalization_desc_t fd, bd;
    const unsigned flags = dnnl_use_scaleshift;
    dnnl_ok(dnnl_batch_normalization_forward_desc_init(&fd, dnnl_forward_training, &md, 1e-3f, flags), "bn desc");
    dnnl_primitive_desc_t fpd, bpd;
    dnnl_ok(dnnl_primitive_desc_create(&fpd, &fd, NULL, engine, NULL), "bn pd");
    dnnl_ok(dnnl_batch_normalization_backward_desc_init(&bd, dnnl_backward, &md, &md, 1e-3f, flags), "bn bwd desc");
    dnnl_ok(dnnl_primitive_desc_create(&bpd, &bd, NULL, engine, fpd), "bn bwd pd");
    dnnl_primitive_t fp, bp;
    dnnl_ok(dnnl_primitive_create(&fp, fpd), "bn");
    dnnl_ok(dnnl_primitive_create(&bp, bpd), "bn bwd");
    dnnl_memory_t src = mem(&md, x.data), dst = mem(&md, y.data), ddst = mem(&md, dy.data), dsrc = mem(&md, dx.data);
    dnnl_memory_t ss = queried(fpd, dnnl_query_weights_md), dss = queried(bpd, dnnl_query_diff_weights_md);
    /* oneDNN's scale and shift: the same gamma and beta as ours ([2][C]) */
    float *ssp = NULL;
    dnnl_ok(dnnl_memory_get_data_handle(ss, (void **)&ssp), "scale and shift");
    if (brg_device_copy_out(dev, ssp, g.data, (size_t)C * sizeof(float)) != BRG_OK ||
        brg_device_copy_out(dev, ssp + C, b.data, (size_t)C * sizeof(float)) != BRG_OK)
        die("copying gamma and beta");
    /* mean and variance: the forward's outputs 1 and 2 */
    dnnl_memory_t m = mem(dnnl_primitive_desc_query_md(fpd, dnnl_query_dst_md, 1), NULL);
    dnnl_memory_t v = mem(dnnl_primitive_desc_query_md(fpd, dnnl_query_dst_md, 2), NULL);
    dnnl_memory_t ws = queried(fpd, dnnl_query_workspace_md);
    dnnl_exec_arg_t fa[8] = {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}, {DNNL_ARG_SCALE_SHIFT, ss},
                             {DNNL_ARG_MEAN, m},   {DNNL_ARG_VARIANCE, v}};
    int nf = 5;
    if (ws) fa[nf++] = (dnnl_exec_arg_t){DNNL_ARG_WORKSPACE, ws};
    const double theirs_f = time_dnnl(fp, nf, fa);
    dnnl_exec_arg_t ba[10] = {{DNNL_ARG_SRC, src},       {DNNL_ARG_DIFF_DST, ddst}, {DNNL_ARG_SCALE_SHIFT, ss},
                              {DNNL_ARG_MEAN, m},         {DNNL_ARG_VARIANCE, v},    {DNNL_ARG_DIFF_SRC, dsrc},
                              {DNNL_ARG_DIFF_SCALE_SHIFT, dss}};
    int nb = 7;
    if (ws) ba[nb++] = (dnnl_exec_arg_t){DNNL_ARG_WORKSPACE, ws};
    const double theirs_b = time_dnnl(bp, nb, ba);
    row("batchnorm train fwd", s, ours_f, theirs_f, impl_of(fpd));
    row("batchnorm bwd", s, ours_b, theirs_b, impl_of(bpd));
    dnnl_memory_t all[] = {src, dst, ddst, dsrc, ss, dss, m, v, ws};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (all[i]) dnnl_memory_destroy(all[i]);
    dnnl_primitive_destroy(fp);
    dnnl_primitive_destroy(bp);
    dnnl_primitive_desc_destroy(fpd);
    dnnl_primitive_desc_destroy(bpd);
    brg_tensor *ts[] = {&x, &y, &dy, &dx, &g, &b, &rm, &rv, &mean, &invstd, &dg, &db};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) brg_tensor_free(ts[i]);
}

static void relu(const int64_t *s)
{
    brg_tensor x = tensor(4, s, 0.0f), y = tensor(4, s, 0.0f), dy = tensor(4, s, 0.1f), dx = tensor(4, s, 0.0f);
    brg_op f = {.kind = BRG_OP_RELU_FORWARD, .n_in = 1, .n_out = 1, .in = {&x}, .out = {&y}};
    brg_op b = {.kind = BRG_OP_RELU_BACKWARD, .n_in = 2, .n_out = 1, .in = {&y, &dy}, .out = {&dx}};
    const double ours_f = time_ours(&f), ours_b = time_ours(&b);
    const dnnl_memory_desc_t md = nchw(s);
    dnnl_eltwise_desc_t fd, bd;
    dnnl_primitive_desc_t fpd, bpd;
    dnnl_primitive_t fp, bp;
    dnnl_ok(dnnl_eltwise_forward_desc_init(&fd, dnnl_forward_training, dnnl_eltwise_relu, &md, 0.0f, 0.0f), "relu");
    dnnl_ok(dnnl_primitive_desc_create(&fpd, &fd, NULL, engine, NULL), "relu pd");
    dnnl_ok(dnnl_eltwise_backward_desc_init(&bd, dnnl_eltwise_relu_use_dst_for_bwd, &md, &md, 0.0f, 0.0f),
            "relu bwd");
    dnnl_ok(dnnl_primitive_desc_create(&bpd, &bd, NULL, engine, fpd), "relu bwd pd");
    dnnl_ok(dnnl_primitive_create(&fp, fpd), "relu");
    dnnl_ok(dnnl_primitive_create(&bp, bpd), "relu bwd");
    dnnl_memory_t src = mem(&md, x.data), dst = mem(&md, y.data), ddst = mem(&md, dy.data), dsrc = mem(&md, dx.data);
    const dnnl_exec_arg_t fa[2] = {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}};
    const dnnl_exec_arg_t ba[3] = {{DNNL_ARG_DST, dst}, {DNNL_ARG_DIFF_DST, ddst}, {DNNL_ARG_DIFF_SRC, dsrc}};
    const double theirs_f = time_dnnl(fp, 2, fa), theirs_b = time_dnnl(bp, 3, ba);
    row("relu fwd", s, ours_f, theirs_f, impl_of(fpd));
    row("relu bwd", s, ours_b, theirs_b, impl_of(bpd));
    dnnl_memory_destroy(src), dnnl_memory_destroy(dst), dnnl_memory_destroy(ddst), dnnl_memory_destroy(dsrc);
    dnnl_primitive_destroy(fp), dnnl_primitive_destroy(bp);
    dnnl_primitive_desc_destroy(fpd), dnnl_primitive_desc_destroy(bpd);
    brg_tensor_free(&x), brg_tensor_free(&y), brg_tensor_free(&dy), brg_tensor_free(&dx);
}

/* Max pool (3x3, stride 2) or average pool (3x3, stride 1, padding 1,
 * the padding counted: torchvision's Inception). */
static void pool(const int64_t *s, int max)
{
    const brg_pool_params pp = max ? (brg_pool_params){3, 3, 2, 2, 0, 0, 0} : (brg_pool_params){3, 3, 1, 1, 1, 1, 1};
    const int64_t p = brg_conv_out_extent(s[2], 3, pp.stride_h, pp.pad_h),
                  q = brg_conv_out_extent(s[3], 3, pp.stride_w, pp.pad_w);
    const int64_t ys[4] = {s[0], s[1], p, q};
    brg_tensor x = tensor(4, s, 0.0f), y = tensor(4, ys, 0.0f), dy = tensor(4, ys, 0.1f), dx = tensor(4, s, 0.0f);
    brg_op f = {.kind = max ? BRG_OP_MAXPOOL_FORWARD : BRG_OP_AVGPOOL_FORWARD, .p.pool = pp, .n_in = 1, .n_out = 1,
                .in = {&x}, .out = {&y}};
    brg_op b = max ? (brg_op){.kind = BRG_OP_MAXPOOL_BACKWARD, .n_in = 3, .in = {&x, &y, &dy}}
                   : (brg_op){.kind = BRG_OP_AVGPOOL_BACKWARD, .n_in = 1, .in = {&dy}};
    b.p.pool = pp;
    b.n_out = 1;
    b.out[0] = &dx;
    const double ours_f = time_ours(&f), ours_b = time_ours(&b);
    const dnnl_memory_desc_t xmd = nchw(s), ymd = nchw(ys);
    const dnnl_dims_t strides = {pp.stride_h, pp.stride_w}, kernel = {3, 3}, pad = {pp.pad_h, pp.pad_w};
    const dnnl_alg_kind_t alg = max ? dnnl_pooling_max : dnnl_pooling_avg_include_padding;
    dnnl_pooling_desc_t fd, bd;
    dnnl_primitive_desc_t fpd, bpd;
    dnnl_primitive_t fp, bp;
    dnnl_ok(dnnl_pooling_forward_desc_init(&fd, dnnl_forward_training, alg, &xmd, &ymd, strides, kernel, pad, pad),
            "pool");
    dnnl_ok(dnnl_primitive_desc_create(&fpd, &fd, NULL, engine, NULL), "pool pd");
    dnnl_ok(dnnl_pooling_backward_desc_init(&bd, alg, &xmd, &ymd, strides, kernel, pad, pad), "pool bwd");
    dnnl_ok(dnnl_primitive_desc_create(&bpd, &bd, NULL, engine, fpd), "pool bwd pd");
    dnnl_ok(dnnl_primitive_create(&fp, fpd), "pool");
    dnnl_ok(dnnl_primitive_create(&bp, bpd), "pool bwd");
    dnnl_memory_t src = mem(&xmd, x.data), dst = mem(&ymd, y.data), ddst = mem(&ymd, dy.data),
                  dsrc = mem(&xmd, dx.data), ws = queried(fpd, dnnl_query_workspace_md);
    dnnl_exec_arg_t fa[3] = {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}};
    dnnl_exec_arg_t ba[3] = {{DNNL_ARG_DIFF_DST, ddst}, {DNNL_ARG_DIFF_SRC, dsrc}};
    int nf = 2, nb = 2;
    if (ws) fa[nf++] = ba[nb++] = (dnnl_exec_arg_t){DNNL_ARG_WORKSPACE, ws};
    const double theirs_f = time_dnnl(fp, nf, fa), theirs_b = time_dnnl(bp, nb, ba);
    row(max ? "maxpool 3x3/2 fwd" : "avgpool 3x3/1 pad fwd", s, ours_f, theirs_f, impl_of(fpd));
    row(max ? "maxpool 3x3/2 bwd" : "avgpool 3x3/1 pad bwd", s, ours_b, theirs_b, impl_of(bpd));
    dnnl_memory_destroy(src), dnnl_memory_destroy(dst), dnnl_memory_destroy(ddst), dnnl_memory_destroy(dsrc);
    if (ws) dnnl_memory_destroy(ws);
    dnnl_primitive_destroy(fp), dnnl_primitive_destroy(bp);
    dnnl_primitive_desc_destroy(fpd), dnnl_primitive_desc_destroy(bpd);
    brg_tensor_free(&x), brg_tensor_free(&y), brg_tensor_free(&dy), brg_tensor_free(&dx);
}

static void usage(FILE *f)
{
    fprintf(f, "usage: cpu_ops_bench [--batch N] [--reps N] [--threads N] [--help]\n"
               "  Times brigade's CPU BatchNorm, ReLU and pooling kernels against oneDNN's\n"
               "  primitives on the same NCHW tensors (Inception-v3 shapes at 299x299).\n"
               "  --batch N    images (default 8)\n"
               "  --reps N     timed runs per case, median reported (default 5, max 64)\n"
               "  --threads N  threads for both: OpenMP's count (oneDNN's) and OpenBLAS's\n"
               "               (brigade's kernels'); default: their own defaults\n");
}

int main(int argc, char **argv)
{
    int64_t batch = 8;
    int threads = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        }
        if (i + 1 >= argc || (strcmp(a, "--batch") && strcmp(a, "--reps") && strcmp(a, "--threads"))) {
            usage(stderr);
            return 2;
        }
        const long v = strtol(argv[++i], NULL, 10);
        if (!strcmp(a, "--batch")) batch = v;
        else if (!strcmp(a, "--reps")) reps = (int)v;
        else threads = (int)v;
        if (v < 1 || (!strcmp(a, "--reps") && v > MAX_REPS)) {
            fprintf(stderr, "cpu_ops_bench: %s %ld is out of range\n", a, v);
            return 2;
        }
    }
    if (threads > 0) {
        omp_set_num_threads(threads);
        openblas_set_num_threads(threads);
    }
    if (brg_device_create_cpu((size_t)4 << 30, 0, &dev) != BRG_OK) die("creating a CPU device");
    dnnl_ok(dnnl_engine_create(&engine, dnnl_cpu, 0), "engine");
    dnnl_ok(dnnl_stream_create(&stream, engine, dnnl_stream_default_flags), "stream");
    printf("cpu_ops_bench: batch %lld, median of %d runs after a warm-up, threads: %d for oneDNN (OpenMP), %d for "
           "brigade (OpenBLAS's count)\n\n",
           (long long)batch, reps, omp_get_max_threads(), openblas_get_num_threads());
    printf("%-24s %19s | %9s %9s | %5s  %s\n", "op", "shape (NCHW)", "ours ms", "oneDNN ms", "o/us", "oneDNN impl");
    const int64_t shapes[][4] = {
        {batch, 64, 147, 147}, {batch, 192, 71, 71}, {batch, 192, 35, 35}, {batch, 768, 17, 17}};
    for (int i = 0; i < 4; i++) batchnorm(shapes[i]);
    for (int i = 0; i < 4; i++) relu(shapes[i]);
    for (int i = 0; i < 2; i++) pool(shapes[i], 1);
    for (int i = 2; i < 4; i++) pool(shapes[i], 0);
    printf("\no/us: oneDNN's time over ours (above 1: ours is faster)\n");
    dnnl_stream_destroy(stream);
    dnnl_engine_destroy(engine);
    brg_device_destroy(dev);
    return 0;
}
