/* conv_bench: CPU convolution throughput against OpenBLAS sgemm.
 *
 * For Inception-v3-like layer shapes, times the three convolution passes
 * (forward, backward data, backward filter) through the public API (a CPU
 * device, arena tensors, one preallocated workspace, brg_device_run) and
 * reports GFLOP/s next to OpenBLAS sgemm measured in the same run:
 *   - "same": the layer's forward GEMM shape (M = K filters, K = C*R*S,
 *     N = the batch's output pixels, at most SAME_COLS_MAX), as if the
 *     convolution were one GEMM with no im2col;
 *   - "sq": a SQUARE_N^3 sgemm timed once per repetition, interleaved with
 *     the layer's passes, so both see the same machine (on a shared machine
 *     a single up-front measurement can be off by 2x).
 * The target is conv forward+backward >= TARGET_RATIO of the square sgemm.
 *
 * FLOPs per pass: 2*N*K*C*R*S*P*Q (the bias is not counted).
 * Times: median of --reps repetitions after one warm-up, CLOCK_MONOTONIC.
 * Exits 0 when every measurement ran (whether or not the target is met),
 * 1 on a library error, 2 on bad arguments (or --only matching no layer).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cblas.h>

#include "brigade/device.h"
#include "brigade/ops.h"
#include "brigade/status.h"
#include "brigade/tensor.h"

#define TARGET_RATIO 0.60
#define SQUARE_N 1024
#define SAME_COLS_MAX 4096
#define MAX_REPS 64

typedef struct layer {
    const char *name;
    int h, w, c, k, r, s, stride, pad_h, pad_w;
} layer;

/* Inception-v3 (299x299 input) layers; all real except 768->192 1x7, the
 * widest 1x7 one could build at 17x17 (Inception's own are 128..192 wide). */
static const layer layers[] = {
    {"stem 3x3 32->64", 147, 147, 32, 64, 3, 3, 1, 1, 1},
    {"1x1 64->80", 73, 73, 64, 80, 1, 1, 1, 0, 0},
    {"3x3 80->192 valid", 71, 71, 80, 192, 3, 3, 1, 0, 0},
    {"1x1 192->64", 35, 35, 192, 64, 1, 1, 1, 0, 0},
    {"5x5 48->64", 35, 35, 48, 64, 5, 5, 1, 2, 2},
    {"3x3 64->96", 35, 35, 64, 96, 3, 3, 1, 1, 1},
    {"3x3/2 288->384", 35, 35, 288, 384, 3, 3, 2, 0, 0},
    {"1x1 768->192", 17, 17, 768, 192, 1, 1, 1, 0, 0},
    {"1x7 768->192", 17, 17, 768, 192, 1, 7, 1, 0, 3},
    {"1x7 192->192", 17, 17, 192, 192, 1, 7, 1, 0, 3},
    {"7x1 192->192", 17, 17, 192, 192, 7, 1, 1, 3, 0},
    {"1x1 1280->320", 8, 8, 1280, 320, 1, 1, 1, 0, 0},
    {"3x3 448->384", 8, 8, 448, 384, 3, 3, 1, 1, 1},
    {"1x3 384->384", 8, 8, 384, 384, 1, 3, 1, 0, 1},
};
#define N_LAYERS ((int)(sizeof layers / sizeof layers[0]))

typedef struct options {
    int batch, reps, threads, quick;
    const char *only; /* run only layers whose name contains this */
} options;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median of v[0..n) (sorts v). */
static double median(double *v, int n)
{
    if (n <= 0) return 0.0;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

/* Uniform in [-0.5, 0.5): small, never all zero, no denormals. */
static float frand(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (float)((rng_state >> 40) * (1.0 / 16777216.0)) - 0.5f;
}

static void fill(float *p, size_t n)
{
    for (size_t i = 0; i < n; i++) p[i] = frand();
}

/* An sgemm problem C[m,n] = A[m,k] B[k,n] with its buffers. */
typedef struct gemm_problem {
    int64_t m, n, k;
    float *a, *b, *c;
} gemm_problem;

static int gemm_init(gemm_problem *g, int64_t m, int64_t n, int64_t k)
{
    g->m = m;
    g->n = n;
    g->k = k;
    g->a = malloc((size_t)(m * k) * sizeof(float));
    g->b = malloc((size_t)(k * n) * sizeof(float));
    g->c = malloc((size_t)(m * n) * sizeof(float));
    if (!g->a || !g->b || !g->c) return 0;
    fill(g->a, (size_t)(m * k));
    fill(g->b, (size_t)(k * n));
    return 1;
}

static void gemm_free(gemm_problem *g)
{
    free(g->a);
    free(g->b);
    free(g->c);
    memset(g, 0, sizeof *g);
}

/* Seconds for one run. */
static double gemm_time(const gemm_problem *g)
{
    double t0 = now_s();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)g->m, (int)g->n, (int)g->k, 1.0f, g->a, (int)g->k,
                g->b, (int)g->n, 0.0f, g->c, (int)g->n);
    return now_s() - t0;
}

static double gemm_gflop(const gemm_problem *g) { return 2e-9 * (double)g->m * (double)g->n * (double)g->k; }

/* An arena tensor filled with small random values. */
static brg_status make_tensor(brg_device *dev, int ndim, const int64_t *shape, const char *tag, brg_tensor *t)
{
    brg_status st = brg_tensor_alloc(dev, BRG_F32, ndim, shape, tag, t);
    if (st != BRG_OK) return st;
    size_t n = (size_t)brg_tensor_numel(t);
    float *host = malloc(n * sizeof(float) + 1);
    if (!host) return BRG_ERR_HOST_MEMORY;
    fill(host, n);
    st = brg_device_copy_in(dev, t->data, host, n * sizeof(float));
    free(host);
    return st;
}

typedef struct result {
    double gflop_pass;      /* per pass */
    double t[3];            /* median seconds: forward, backward data, backward filter */
    double same_gflops;     /* same-shaped sgemm */
    double sq_gflops;       /* square sgemm, median over the layer's repetitions */
    size_t workspace_bytes; /* largest of the three ops' */
} result;

/* Time the three passes of one layer, with a square sgemm after each
 * repetition. sq is the square problem; sq_samples receives reps values. */
static brg_status bench_layer(brg_device *dev, const layer *L, const options *o, const gemm_problem *sq,
                              double *sq_samples, result *res)
{
    const int64_t n = o->batch;
    const int64_t p = brg_conv_out_extent(L->h, L->r, L->stride, L->pad_h);
    const int64_t q = brg_conv_out_extent(L->w, L->s, L->stride, L->pad_w);
    const int64_t xs[4] = {n, L->c, L->h, L->w}, ws[4] = {L->k, L->c, L->r, L->s}, ys[4] = {n, L->k, p, q};
    const int64_t bs[1] = {L->k};
    brg_tensor x = {0}, w = {0}, b = {0}, y = {0}, dy = {0}, dx = {0}, dw = {0}, db = {0};
    void *workspace = NULL;
    gemm_problem same = {0};
    brg_status st = BRG_OK;
    memset(res, 0, sizeof *res);

    if ((st = make_tensor(dev, 4, xs, "x", &x)) || (st = make_tensor(dev, 4, ws, "w", &w)) ||
        (st = make_tensor(dev, 1, bs, "b", &b)) || (st = make_tensor(dev, 4, ys, "y", &y)) ||
        (st = make_tensor(dev, 4, ys, "dy", &dy)) || (st = make_tensor(dev, 4, xs, "dx", &dx)) ||
        (st = make_tensor(dev, 4, ws, "dw", &dw)) || (st = make_tensor(dev, 1, bs, "db", &db)))
        goto done;

    brg_op ops[3];
    memset(ops, 0, sizeof ops);
    for (int i = 0; i < 3; i++) {
        ops[i].p.conv = (brg_conv2d_params){L->stride, L->stride, L->pad_h, L->pad_w};
        ops[i].n_in = 2;
        ops[i].n_out = 1;
    }
    ops[0].kind = BRG_OP_CONV2D_FORWARD;
    ops[0].n_in = 3;
    ops[0].in[0] = &x;
    ops[0].in[1] = &w;
    ops[0].in[2] = &b;
    ops[0].out[0] = &y;
    ops[1].kind = BRG_OP_CONV2D_BACKWARD_DATA;
    ops[1].in[0] = &dy;
    ops[1].in[1] = &w;
    ops[1].out[0] = &dx;
    ops[2].kind = BRG_OP_CONV2D_BACKWARD_FILTER;
    ops[2].in[0] = &x;
    ops[2].in[1] = &dy;
    ops[2].out[0] = &dw;
    ops[2].out[1] = &db;
    ops[2].n_out = 2;

    /* One workspace for all three, allocated once as the memory plan would. */
    for (int i = 0; i < 3; i++) {
        size_t bytes = 0;
        if ((st = brg_device_workspace_bytes(dev, &ops[i], &bytes))) goto done;
        if (bytes > res->workspace_bytes) res->workspace_bytes = bytes;
    }
    if (res->workspace_bytes) {
        if ((st = brg_device_alloc(dev, res->workspace_bytes, "conv workspace", &workspace))) goto done;
        for (int i = 0; i < 3; i++) {
            ops[i].workspace = workspace;
            ops[i].workspace_bytes = res->workspace_bytes;
        }
    }

    double t[3][MAX_REPS];
    for (int rep = -1; rep < o->reps; rep++) {
        for (int i = 0; i < 3; i++) {
            double t0 = now_s();
            if ((st = brg_device_run(dev, &ops[i]))) goto done;
            if (rep >= 0) t[i][rep] = now_s() - t0;
        }
        double ts = gemm_time(sq);
        if (rep >= 0) sq_samples[rep] = gemm_gflop(sq) / ts;
    }
    for (int i = 0; i < 3; i++) res->t[i] = median(t[i], o->reps);
    double sq_sorted[MAX_REPS];
    memcpy(sq_sorted, sq_samples, (size_t)o->reps * sizeof(double));
    res->sq_gflops = median(sq_sorted, o->reps);
    res->gflop_pass = 2.0 * (double)n * L->k * L->c * L->r * L->s * (double)(p * q) * 1e-9;

    int64_t cols = n * p * q;
    if (cols > SAME_COLS_MAX) cols = SAME_COLS_MAX;
    if (gemm_init(&same, L->k, cols, (int64_t)L->c * L->r * L->s)) {
        double ts[MAX_REPS];
        gemm_time(&same);
        for (int i = 0; i < o->reps; i++) ts[i] = gemm_time(&same);
        res->same_gflops = gemm_gflop(&same) / median(ts, o->reps);
    }

done:
    gemm_free(&same);
    brg_device_free(dev, workspace);
    brg_tensor *all[] = {&x, &w, &b, &y, &dy, &dx, &dw, &db};
    for (int i = 0; i < 8; i++) brg_tensor_free(all[i]);
    return st;
}

/* --only TEXT picks layers whose name or input size ("17x17") contains it. */
static int layer_selected(const layer *L, const char *only)
{
    char in[32];
    if (!only) return 1;
    snprintf(in, sizeof in, "%dx%d", L->h, L->w);
    return strstr(L->name, only) || strstr(in, only);
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: conv_bench [--quick] [--batch N] [--reps N] [--threads N] [--only TEXT] [--help]\n"
            "  Times conv2d forward / backward-data / backward-filter on the CPU backend for\n"
            "  Inception-v3-like layers and compares with OpenBLAS sgemm measured in the same run.\n"
            "  --quick      batch 2, 3 repetitions: a smoke run of a few seconds\n"
            "  --batch N    images per batch (default 32)\n"
            "  --reps N     timed repetitions per measurement, median reported (default 5, max %d)\n"
            "  --threads N  OpenBLAS threads (default: OpenBLAS's own choice)\n"
            "  --only TEXT  run only the layers whose name or input size contains TEXT\n"
            "               (e.g. stem, 1x7, 17x17)\n"
            "Target: conv forward+backward GFLOP/s >= %.0f%% of a %d^3 sgemm.\n",
            MAX_REPS, 100 * TARGET_RATIO, SQUARE_N);
}

static int parse_int(const char *s, int lo, int hi, int *out)
{
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || !end || *end || end == s || v < lo || v > hi) return 0;
    *out = (int)v;
    return 1;
}

static const char *rule =
    "------------------------------------------------------------------------------------------------------------";

int main(int argc, char **argv)
{
    options o = {32, 5, 0, 0, NULL};
    int batch_set = 0, reps_set = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--quick")) {
            o.quick = 1;
        } else if (!strcmp(a, "--batch") && i + 1 < argc) {
            if (!parse_int(argv[++i], 1, 4096, &o.batch)) goto bad;
            batch_set = 1;
        } else if (!strcmp(a, "--reps") && i + 1 < argc) {
            if (!parse_int(argv[++i], 1, MAX_REPS, &o.reps)) goto bad;
            reps_set = 1;
        } else if (!strcmp(a, "--threads") && i + 1 < argc) {
            if (!parse_int(argv[++i], 1, 1024, &o.threads)) goto bad;
        } else if (!strcmp(a, "--only") && i + 1 < argc) {
            o.only = argv[++i];
        } else {
            goto bad;
        }
        continue;
    bad:
        fprintf(stderr, "conv_bench: bad or incomplete argument '%s'\n", a);
        usage(stderr);
        return 2;
    }
    if (o.quick) {
        if (!batch_set) o.batch = 2;
        if (!reps_set) o.reps = 3;
    }
    if (o.threads) openblas_set_num_threads(o.threads);

    gemm_problem sq;
    if (!gemm_init(&sq, SQUARE_N, SQUARE_N, SQUARE_N)) {
        fprintf(stderr, "conv_bench: out of host memory\n");
        gemm_free(&sq);
        return 1;
    }
    brg_device *dev = NULL;
    brg_status st = brg_device_create_cpu((size_t)16 << 30, 0, &dev);
    if (st != BRG_OK) {
        fprintf(stderr, "conv_bench: %s: %s\n", brg_status_string(st), brg_last_error());
        gemm_free(&sq);
        return 1;
    }

    int matches = 0;
    for (int i = 0; i < N_LAYERS; i++) matches += layer_selected(&layers[i], o.only);
    if (matches == 0) {
        fprintf(stderr, "conv_bench: no layer matches '%s'\n", o.only);
        brg_device_destroy(dev);
        gemm_free(&sq);
        return 2;
    }

    printf("conv_bench: batch %d, median of %d reps after a warm-up, OpenBLAS %d threads (%s core)\n", o.batch,
           o.reps, openblas_get_num_threads(), openblas_get_corename());
    printf("sq = sgemm %d^3, timed after every repetition of each layer; target: f+b >= %.0f%% of sq\n\n", SQUARE_N,
           100 * TARGET_RATIO);
    printf("%-18s %7s %7s %6s %6s | %6s %6s %6s %6s | %6s %6s | %5s\n", "layer", "in", "out", "GFLOP", "ws", "fwd",
           "bwd-d", "bwd-f", "f+b", "same", "sq", "f+b/");
    printf("%-18s %7s %7s %6s %6s | %27s | %13s | %5s\n", "", "", "", "x3", "MiB", "GFLOP/s", "sgemm GFLOP/s", "sq");
    printf("%s\n", rule);

    double total_flop = 0.0, total_time = 0.0, total_t[3] = {0, 0, 0};
    double *sq_all = malloc((size_t)N_LAYERS * MAX_REPS * sizeof(double));
    int n_sq = 0, misses = 0, ran = 0;
    if (!sq_all) {
        fprintf(stderr, "conv_bench: out of host memory\n");
        brg_device_destroy(dev);
        gemm_free(&sq);
        return 1;
    }
    for (int i = 0; i < N_LAYERS; i++) {
        const layer *L = &layers[i];
        if (!layer_selected(L, o.only)) continue;
        result r;
        st = bench_layer(dev, L, &o, &sq, sq_all + n_sq, &r);
        if (st != BRG_OK) {
            fprintf(stderr, "conv_bench: layer '%s': %s: %s\n", L->name, brg_status_string(st), brg_last_error());
            free(sq_all);
            brg_device_destroy(dev);
            gemm_free(&sq);
            return 1;
        }
        n_sq += o.reps;
        ran++;
        double sum = r.t[0] + r.t[1] + r.t[2];
        double fb = 3.0 * r.gflop_pass / sum;
        double ratio = r.sq_gflops > 0 ? fb / r.sq_gflops : 0.0;
        int pass = ratio >= TARGET_RATIO;
        misses += !pass;
        total_flop += 3.0 * r.gflop_pass;
        total_time += sum;
        for (int j = 0; j < 3; j++) total_t[j] += r.t[j];
        char in[16], out[16];
        snprintf(in, sizeof in, "%dx%d", L->h, L->w);
        snprintf(out, sizeof out, "%lldx%lld", (long long)brg_conv_out_extent(L->h, L->r, L->stride, L->pad_h),
                 (long long)brg_conv_out_extent(L->w, L->s, L->stride, L->pad_w));
        printf("%-18s %7s %7s %6.2f %6.2f | %6.1f %6.1f %6.1f %6.1f | %6.1f %6.1f | %5.2f %s\n", L->name, in, out,
               3.0 * r.gflop_pass, (double)r.workspace_bytes / (1 << 20), r.gflop_pass / r.t[0],
               r.gflop_pass / r.t[1], r.gflop_pass / r.t[2], fb, r.same_gflops, r.sq_gflops, ratio,
               pass ? "PASS" : "MISS");
        fflush(stdout);
    }
    printf("%s\n", rule);
    double sq_med = median(sq_all, n_sq);
    double overall = total_flop / total_time, overall_ratio = sq_med > 0 ? overall / sq_med : 0.0;
    printf("%-18s %7s %7s %6.1f %6s | %6.1f %6.1f %6.1f %6.1f | %6s %6.1f | %5.2f %s\n", "all layers", "",
           "", total_flop, "", total_flop / 3 / total_t[0], total_flop / 3 / total_t[1], total_flop / 3 / total_t[2],
           overall, "", sq_med, overall_ratio, overall_ratio >= TARGET_RATIO ? "PASS" : "MISS");
    printf("\nconv fwd+bwd over these layers: %.1f GFLOP/s = %.0f%% of sgemm %d^3 (%.1f GFLOP/s, median): %s the "
           "%.0f%% target; %d of %d layers below it\n",
           overall, 100 * overall_ratio, SQUARE_N, sq_med, overall_ratio >= TARGET_RATIO ? "meets" : "misses",
           100 * TARGET_RATIO, misses, ran);
    free(sq_all);
    brg_device_destroy(dev);
    gemm_free(&sq);
    return 0;
}
