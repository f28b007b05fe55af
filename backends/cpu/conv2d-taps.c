/* 2-D convolution on small output planes: one GEMM per kernel tap over
 * rows of channels, chosen by base/conv-taps-rule.h (output planes of at
 * most 16 pixels, kernels larger than 1x1) whichever convolution
 * BRG_CPU_CONV selects (its sgemm is then that one's: gemm.c).
 *
 * Late stages of a CNN on small inputs have tiny planes: resnet18 at
 * 3x64x64 ends on 4x4 and 2x2. There a 3x3 "same" convolution's im2col is
 * mostly padding (on 2x2, each output pixel meets 4 of the 9 taps) and
 * oneDNN's direct kernels, which vectorize along a plane's width, run slow:
 * 512->512 on 2x2 planes, batch 32, took 8.6 ms forward, 7.7 backward data
 * and 15 backward filter on two cores. Here x and y become rows of
 * channels (one row per image and pixel, NHWC), and each tap (r, s) pairs
 * the output rows it reaches with their input rows; gathered, a tap is one
 * product with no padding in it (w_t = w[:, :, r, s], K x C):
 *
 *   forward          y[out_t]  += x[in_t] . w_t^T        (y starts as the bias)
 *   backward data    dx[in_t]  += dy[out_t] . w_t
 *   backward filter  dw_t      += dy[out_t]^T . x[in_t],  db += column sums of dy
 *
 * and the same layer took 2-3 ms for each (bench/README.md, "Small planes by kernel taps").
 * The weights (or their gradient) are rearranged tap-major once per op.
 * Images go in chunks whose row copies stay under 16 MiB, so
 * the workspace is the tap-major weights plus one chunk's rows; it depends
 * on the shapes alone and is the same for the three kinds. The arithmetic
 * does not depend on the tensors' layouts (plain or channel-blocked), only
 * on the shapes, so a layer gives the same bits in either.
 */
#include "config.h"

#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/conv-taps-rule.h"
#include "cpu-kernels.h"
#include "gemm.h"

/* Bytes of row copies (x, y and one tap's gathered rows of each) per chunk
 * of images; a chunk has at least one image. BRG_CPU_TAPS_BYTES, read once,
 * sets another (tests cut batches into chunks with it). */
#define TAPS_CHUNK_BYTES ((int64_t)16 << 20)

static int64_t chunk_limit = TAPS_CHUNK_BYTES;
static pthread_once_t chunk_once = PTHREAD_ONCE_INIT;

static void read_chunk_limit(void)
{
    const char *e = getenv("BRG_CPU_TAPS_BYTES");
    const long long v = e ? atoll(e) : 0;
    if (v > 0) chunk_limit = (int64_t)v;
}

static int64_t chunk_bytes(void)
{
    pthread_once(&chunk_once, read_chunk_limit);
    return chunk_limit;
}

typedef struct taps_geom {
    int64_t n, c, h, w;   /* x */
    int64_t k, r, s;      /* w */
    int64_t p, q;         /* y's plane */
    int64_t sh, sw, ph, pw;
    int64_t imgs;         /* images per chunk */
} taps_geom;

/* The rows one tap pairs, per image: output pixels [p0, p1) x [q0, q1),
 * each meeting input pixel (p*sh - ph + r, q*sw - pw + s). */
typedef struct tap_rows {
    int64_t r, s, p0, p1, q0, q1;
    int all; /* every output row, each meeting the input row of the same index: no gathering */
} tap_rows;

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

/* Output indices o in [0, out) with o*stride - pad + tap in [0, in). */
static void tap_range(int64_t in, int64_t out, int64_t stride, int64_t pad, int64_t tap, int64_t *lo, int64_t *hi)
{
    const int64_t a = pad - tap; /* o*stride >= a */
    int64_t l = a > 0 ? (a + stride - 1) / stride : 0;
    const int64_t last = in - 1 + pad - tap; /* o*stride <= last */
    const int64_t h = last < 0 ? 0 : min64(out, last / stride + 1);
    l = min64(l, out);
    *lo = l;
    *hi = max64(l, h);
}

static tap_rows tap_of(const taps_geom *g, int64_t r, int64_t s)
{
    tap_rows t = {.r = r, .s = s};
    tap_range(g->h, g->p, g->sh, g->ph, r, &t.p0, &t.p1);
    tap_range(g->w, g->q, g->sw, g->pw, s, &t.q0, &t.q1);
    t.all = g->p == g->h && g->q == g->w && g->sh == 1 && g->sw == 1 && r == g->ph && s == g->pw;
    return t;
}

static int64_t tap_count(const tap_rows *t) { return (t->p1 - t->p0) * (t->q1 - t->q0); }

/* x and y of the op whichever its kind: x (dx for backward data) and y (dy
 * for the backward kinds), and the weights (their gradient for backward
 * filter). */
static const brg_tensor *x_of(const brg_op *op)
{
    return op->kind == BRG_OP_CONV2D_BACKWARD_DATA ? op->out[0] : op->in[0];
}

static const brg_tensor *y_of(const brg_op *op)
{
    return op->kind == BRG_OP_CONV2D_FORWARD ? op->out[0] : op->kind == BRG_OP_CONV2D_BACKWARD_DATA ? op->in[0]
                                                                                                 : op->in[1];
}

static const brg_tensor *w_of(const brg_op *op)
{
    return op->kind == BRG_OP_CONV2D_BACKWARD_FILTER ? op->out[0] : op->in[1];
}

/* Floats of one image's rows: x, y, and one tap's gathered x and y rows. */
static int64_t image_floats(const taps_geom *g)
{
    return g->h * g->w * g->c + 2 * g->p * g->q * g->k + g->p * g->q * g->c;
}

static void geom_of(const brg_op *op, taps_geom *g)
{
    const brg_tensor *x = x_of(op), *w = w_of(op), *y = y_of(op);
    memset(g, 0, sizeof *g);
    g->n = x->shape[0];
    g->c = x->shape[1];
    g->h = x->shape[2];
    g->w = x->shape[3];
    g->k = w->shape[0];
    g->r = w->shape[2];
    g->s = w->shape[3];
    g->p = y->shape[2];
    g->q = y->shape[3];
    g->sh = op->p.conv.stride_h;
    g->sw = op->p.conv.stride_w;
    g->ph = op->p.conv.pad_h;
    g->pw = op->p.conv.pad_w;
    const int64_t per = image_floats(g) * (int64_t)sizeof(float);
    g->imgs = max64(1, min64(g->n, chunk_bytes() / max64(per, 1)));
}

int brg_cpu_conv2d_taps_chosen(const brg_op *op)
{
    const brg_tensor *y = y_of(op), *w = w_of(op);
    if (!brg_conv_by_taps(y->shape[2], y->shape[3], w->shape[2], w->shape[3])) return 0;
    taps_geom g;
    geom_of(op, &g);
    /* sgemm takes int dimensions: the rows of a chunk, the channels, and
     * the row strides (c or k) */
    return g.imgs * g.p * g.q <= INT_MAX && g.c * g.r * g.s <= INT_MAX && g.k <= INT_MAX;
}

static size_t round64(size_t n) { return (n + 63) & ~(size_t)63; }

static size_t weights_bytes(const taps_geom *g) { return round64((size_t)(g->k * g->c * g->r * g->s) * sizeof(float)); }

size_t brg_cpu_conv2d_taps_workspace_bytes(const brg_op *op)
{
    taps_geom g;
    geom_of(op, &g);
    return weights_bytes(&g) + (size_t)(g.imgs * image_floats(&g)) * sizeof(float);
}

/* Rows of channels and back: element (n, c, i) of a [N, C, H*W] tensor,
 * plain or blocked by b, against row n*HW + i, column c of rows. */
static void to_rows(const brg_tensor *t, int64_t n0, int64_t nb, float *restrict rows)
{
    const int64_t ch = t->shape[1], hw = t->shape[2] * t->shape[3], b = t->block ? t->block : 1;
    const float *src = (const float *)t->data + n0 * ch * hw;
    const int threads = brg_cpu_kernel_threads(nb * ch * hw);
    BRG_CPU_PARALLEL_FOR(threads)
    for (int64_t n = 0; n < nb; n++) {
        const float *s = src + n * ch * hw;
        float *d = rows + n * hw * ch;
        /* b = 1 is plain: each channel's plane */
        for (int64_t cb = 0; cb < ch; cb += b)
            for (int64_t i = 0; i < hw; i++)
                for (int64_t j = 0; j < b; j++) d[i * ch + cb + j] = s[cb * hw + i * b + j];
    }
}

static void from_rows(const float *restrict rows, int64_t n0, int64_t nb, int acc, const brg_tensor *t)
{
    const int64_t ch = t->shape[1], hw = t->shape[2] * t->shape[3], b = t->block ? t->block : 1;
    float *dst = (float *)t->data + n0 * ch * hw;
    const int threads = brg_cpu_kernel_threads(nb * ch * hw);
    BRG_CPU_PARALLEL_FOR(threads)
    for (int64_t n = 0; n < nb; n++) {
        const float *s = rows + n * hw * ch;
        float *d = dst + n * ch * hw;
        /* b = 1 is plain: each channel's plane */
        for (int64_t cb = 0; cb < ch; cb += b)
            for (int64_t i = 0; i < hw; i++)
                for (int64_t j = 0; j < b; j++) {
                    float *at = d + cb * hw + i * b + j;
                    *at = (acc ? *at : 0.0f) + s[i * ch + cb + j];
                }
    }
}

/* Copy the rows a tap pairs, in its order (image, output row, output
 * column), from the output side (y rows) or the input side (x rows) into
 * dst, or add dst's rows back onto them (scatter). */
typedef enum { SIDE_OUT, SIDE_IN } tap_side;

static void tap_copy(const taps_geom *g, const tap_rows *t, tap_side side, int64_t nb, float *restrict rows,
                     float *restrict packed, int scatter)
{
    const int64_t ch = side == SIDE_OUT ? g->k : g->c;
    const int64_t ph = side == SIDE_OUT ? g->p : g->h, pw = side == SIDE_OUT ? g->q : g->w;
    const int64_t np = t->p1 - t->p0, nq = t->q1 - t->q0;
    const int threads = brg_cpu_kernel_threads(nb * np * nq * ch);
    BRG_CPU_PARALLEL_FOR(threads)
    for (int64_t n = 0; n < nb; n++)
        for (int64_t a = 0; a < np; a++)
            for (int64_t b = 0; b < nq; b++) {
                int64_t i = t->p0 + a, j = t->q0 + b;
                if (side == SIDE_IN) {
                    i = i * g->sh - g->ph + t->r;
                    j = j * g->sw - g->pw + t->s;
                }
                float *row = rows + ((n * ph + i) * pw + j) * ch;
                float *pk = packed + ((n * np + a) * nq + b) * ch;
                if (scatter)
                    for (int64_t c = 0; c < ch; c++) row[c] += pk[c];
                else
                    memcpy(pk, row, (size_t)ch * sizeof(float));
            }
}

/* w[K, C, R, S] <-> tap-major wt[R*S, K, C]; back with acc adds on. */
static void weights_to_taps(const taps_geom *g, const float *restrict w, float *restrict wt)
{
    const int64_t rs = g->r * g->s, kc = g->k * g->c;
    const int threads = brg_cpu_kernel_threads(kc * rs);
    BRG_CPU_PARALLEL_FOR(threads)
    for (int64_t k = 0; k < g->k; k++)
        for (int64_t t = 0; t < rs; t++) {
            const float *s = w + k * g->c * rs + t;
            float *d = wt + t * kc + k * g->c;
            for (int64_t c = 0; c < g->c; c++) d[c] = s[c * rs];
        }
}

static void taps_to_weights(const taps_geom *g, const float *restrict wt, int acc, float *restrict w)
{
    const int64_t rs = g->r * g->s, kc = g->k * g->c;
    const int threads = brg_cpu_kernel_threads(kc * rs);
    BRG_CPU_PARALLEL_FOR(threads)
    for (int64_t k = 0; k < g->k; k++)
        for (int64_t c = 0; c < g->c; c++) {
            float *d = w + (k * g->c + c) * rs;
            for (int64_t t = 0; t < rs; t++) d[t] = (acc ? d[t] : 0.0f) + wt[t * kc + k * g->c + c];
        }
}

/* The workspace's pieces: tap-major weights, then one chunk's x rows, y
 * rows, and one tap's gathered x and y rows. */
typedef struct taps_work {
    float *wt, *xr, *yr, *gx, *gy;
} taps_work;

static brg_status work_of(const brg_op *op, const taps_geom *g, taps_work *wk)
{
    const size_t need = brg_cpu_conv2d_taps_workspace_bytes(op);
    if (!op->workspace || op->workspace_bytes < need)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "%s: needs %zu bytes of workspace, given %zu",
                         brg_op_kind_name(op->kind), need, op->workspace ? op->workspace_bytes : (size_t)0);
    wk->wt = op->workspace;
    wk->xr = (float *)((char *)op->workspace + weights_bytes(g));
    wk->yr = wk->xr + g->imgs * g->h * g->w * g->c;
    wk->gy = wk->yr + g->imgs * g->p * g->q * g->k;
    wk->gx = wk->gy + g->imgs * g->p * g->q * g->k;
    return BRG_OK;
}

brg_status brg_cpu_conv2d_taps(const brg_op *op)
{
    taps_geom g;
    geom_of(op, &g);
    taps_work wk = {NULL, NULL, NULL, NULL, NULL};
    BRG_CHECK(work_of(op, &g, &wk));
    const brg_tensor *xt = x_of(op), *yt = y_of(op);
    const int64_t kc = g.k * g.c;
    const int acc = op->accumulate != 0;
    float *db = NULL;
    if (op->kind == BRG_OP_CONV2D_BACKWARD_FILTER) {
        memset(wk.wt, 0, (size_t)(kc * g.r * g.s) * sizeof(float));
        db = op->n_out > 1 ? op->out[1]->data : NULL;
        if (db && !acc) memset(db, 0, (size_t)g.k * sizeof(float));
    } else {
        weights_to_taps(&g, op->in[1]->data, wk.wt);
    }
    for (int64_t n0 = 0; n0 < g.n; n0 += g.imgs) {
        const int64_t nb = min64(g.imgs, g.n - n0);
        const int64_t y_rows = nb * g.p * g.q;
        switch (op->kind) {
        case BRG_OP_CONV2D_FORWARD: {
            to_rows(xt, n0, nb, wk.xr);
            const float *bias = op->n_in > 2 ? op->in[2]->data : NULL;
            for (int64_t i = 0; i < y_rows; i++)
                for (int64_t k = 0; k < g.k; k++) wk.yr[i * g.k + k] = bias ? bias[k] : 0.0f;
            break;
        }
        case BRG_OP_CONV2D_BACKWARD_DATA:
            to_rows(yt, n0, nb, wk.yr);
            memset(wk.xr, 0, (size_t)(nb * g.h * g.w * g.c) * sizeof(float));
            break;
        default:
            to_rows(xt, n0, nb, wk.xr);
            to_rows(yt, n0, nb, wk.yr);
            if (db)
                for (int64_t i = 0; i < y_rows; i++)
                    for (int64_t k = 0; k < g.k; k++) db[k] += wk.yr[i * g.k + k];
            break;
        }
        for (int64_t r = 0; r < g.r; r++)
            for (int64_t s = 0; s < g.s; s++) {
                const tap_rows t = tap_of(&g, r, s);
                const int64_t m = nb * tap_count(&t);
                if (m == 0) continue;
                float *w_t = wk.wt + (r * g.s + s) * kc;
                float *gx = t.all ? wk.xr : wk.gx, *gy = t.all ? wk.yr : wk.gy;
                switch (op->kind) {
                case BRG_OP_CONV2D_FORWARD:
                    if (t.all) {
                        brg_cpu_gemm(CblasNoTrans, CblasTrans, m, g.k, g.c, gx, g.c, w_t, g.c, 1.0f, gy, g.k);
                        break;
                    }
                    tap_copy(&g, &t, SIDE_IN, nb, wk.xr, gx, 0);
                    brg_cpu_gemm(CblasNoTrans, CblasTrans, m, g.k, g.c, gx, g.c, w_t, g.c, 0.0f, gy, g.k);
                    tap_copy(&g, &t, SIDE_OUT, nb, wk.yr, gy, 1);
                    break;
                case BRG_OP_CONV2D_BACKWARD_DATA:
                    if (t.all) {
                        brg_cpu_gemm(CblasNoTrans, CblasNoTrans, m, g.c, g.k, gy, g.k, w_t, g.c, 1.0f, gx, g.c);
                        break;
                    }
                    tap_copy(&g, &t, SIDE_OUT, nb, wk.yr, gy, 0);
                    brg_cpu_gemm(CblasNoTrans, CblasNoTrans, m, g.c, g.k, gy, g.k, w_t, g.c, 0.0f, gx, g.c);
                    tap_copy(&g, &t, SIDE_IN, nb, wk.xr, gx, 1);
                    break;
                default:
                    if (!t.all) {
                        tap_copy(&g, &t, SIDE_IN, nb, wk.xr, gx, 0);
                        tap_copy(&g, &t, SIDE_OUT, nb, wk.yr, gy, 0);
                    }
                    brg_cpu_gemm(CblasTrans, CblasNoTrans, g.k, g.c, m, gy, g.k, gx, g.c, 1.0f, w_t, g.c);
                    break;
                }
            }
        if (op->kind == BRG_OP_CONV2D_FORWARD) from_rows(wk.yr, n0, nb, 0, op->out[0]);
        else if (op->kind == BRG_OP_CONV2D_BACKWARD_DATA) from_rows(wk.xr, n0, nb, acc, op->out[0]);
    }
    if (op->kind == BRG_OP_CONV2D_BACKWARD_FILTER) taps_to_weights(&g, wk.wt, acc, op->out[0]->data);
    return BRG_OK;
}
