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
 * and the same layer took 3.8, 4.2 and 4.9 ms (bench/README.md, "Small
 * planes by kernel taps"). The weights (or their gradient) are rearranged
 * tap-major once per op. Images go in chunks whose row copies stay under
 * 16 MiB, so the workspace is the tap-major weights plus one chunk's rows;
 * it depends on the shapes alone and is the same for the three kinds. The
 * arithmetic does not depend on the tensors' layouts (plain or
 * channel-blocked), only on the shapes, so a layer gives the same bits in
 * either.
 */
#include "config.h"

#include <limits.h>
#include <string.h>

#include "base/conv-taps-rule.h"
#include "cpu-kernels.h"
#include "gemm.h"

/* Bytes of row copies (x, y and one tap's gathered rows of each) per chunk
 * of images; a chunk has at least one image. BRG_CPU_TAPS_BYTES sets
 * another (tests cut batches into chunks with it). */
#define TAPS_CHUNK_BYTES ((size_t)16 << 20)

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

/* The weights of the op (their gradient for backward filter). */
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
    const brg_tensor *x = brg_cpu_conv_x(op), *w = w_of(op), *y = brg_cpu_conv_y(op);
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
    g->imgs = max64(1, min64(g->n, (int64_t)brg_cpu_env_bytes("BRG_CPU_TAPS_BYTES", TAPS_CHUNK_BYTES) / max64(per, 1)));
}

int brg_cpu_conv2d_taps_chosen(const brg_op *op)
{
    const brg_tensor *y = brg_cpu_conv_y(op), *w = w_of(op);
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
 * plain or blocked by b, against row n*HW + i, column c of rows. Into the
 * rows (to_rows), or out of them into the tensor, onto it with acc. */
static void rows_copy(const brg_tensor *t, int64_t n0, int64_t nb, float *restrict rows, int to_rows, int acc)
{
    const int64_t ch = t->shape[1], hw = t->shape[2] * t->shape[3], b = t->block ? t->block : 1;
    float *data = (float *)t->data + n0 * ch * hw;
    const int threads = brg_cpu_kernel_threads(nb * ch * hw);
    BRG_CPU_PARALLEL_FOR(threads)
    for (int64_t n = 0; n < nb; n++) {
        float *d = data + n * ch * hw, *r = rows + n * hw * ch;
        /* b = 1 is plain: each channel's plane */
        for (int64_t cb = 0; cb < ch; cb += b)
            for (int64_t i = 0; i < hw; i++)
                for (int64_t j = 0; j < b; j++) {
                    float *at = d + cb * hw + i * b + j, *row = r + i * ch + cb + j;
                    if (to_rows) *row = *at;
                    else *at = (acc ? *at : 0.0f) + *row;
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

/* One tap of the forward (x rows onto y rows through w_t^T) or of the
 * backward data (dy rows onto dx rows through w_t): the source rows it
 * pairs gathered, their product, added onto the destination's rows (in
 * place where the tap pairs every row with the same index). */
static void tap_product(const taps_geom *g, const tap_rows *t, int64_t nb, int forward, const float *w_t,
                        const taps_work *wk)
{
    const tap_side from = forward ? SIDE_IN : SIDE_OUT, to = forward ? SIDE_OUT : SIDE_IN;
    float *src = forward ? wk->xr : wk->yr, *dst = forward ? wk->yr : wk->xr;
    float *packed_src = forward ? wk->gx : wk->gy, *packed_dst = forward ? wk->gy : wk->gx;
    const int64_t in_ch = forward ? g->c : g->k, out_ch = forward ? g->k : g->c;
    const CBLAS_TRANSPOSE tw = forward ? CblasTrans : CblasNoTrans; /* w_t is K x C */
    const int64_t m = nb * tap_count(t);
    if (t->all) {
        brg_cpu_gemm(CblasNoTrans, tw, m, out_ch, in_ch, src, in_ch, w_t, g->c, 1.0f, dst, out_ch);
        return;
    }
    tap_copy(g, t, from, nb, src, packed_src, 0);
    brg_cpu_gemm(CblasNoTrans, tw, m, out_ch, in_ch, packed_src, in_ch, w_t, g->c, 0.0f, packed_dst, out_ch);
    tap_copy(g, t, to, nb, dst, packed_dst, 1);
}

brg_status brg_cpu_conv2d_taps(const brg_op *op)
{
    taps_geom g;
    geom_of(op, &g);
    taps_work wk = {NULL, NULL, NULL, NULL, NULL};
    BRG_CHECK(work_of(op, &g, &wk));
    const brg_tensor *xt = brg_cpu_conv_x(op), *yt = brg_cpu_conv_y(op);
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
            rows_copy(xt, n0, nb, wk.xr, 1, 0);
            const float *bias = op->n_in > 2 ? op->in[2]->data : NULL;
            for (int64_t i = 0; i < y_rows; i++)
                for (int64_t k = 0; k < g.k; k++) wk.yr[i * g.k + k] = bias ? bias[k] : 0.0f;
            break;
        }
        case BRG_OP_CONV2D_BACKWARD_DATA:
            rows_copy(yt, n0, nb, wk.yr, 1, 0);
            memset(wk.xr, 0, (size_t)(nb * g.h * g.w * g.c) * sizeof(float));
            break;
        default:
            rows_copy(xt, n0, nb, wk.xr, 1, 0);
            rows_copy(yt, n0, nb, wk.yr, 1, 0);
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
                if (op->kind != BRG_OP_CONV2D_BACKWARD_FILTER) {
                    tap_product(&g, &t, nb, op->kind == BRG_OP_CONV2D_FORWARD, w_t, &wk);
                    continue;
                }
                float *gx = t.all ? wk.xr : wk.gx, *gy = t.all ? wk.yr : wk.gy;
                if (!t.all) {
                    tap_copy(&g, &t, SIDE_IN, nb, wk.xr, gx, 0);
                    tap_copy(&g, &t, SIDE_OUT, nb, wk.yr, gy, 0);
                }
                brg_cpu_gemm(CblasTrans, CblasNoTrans, g.k, g.c, m, gy, g.k, gx, g.c, 1.0f, w_t, g.c);
            }
        if (op->kind == BRG_OP_CONV2D_FORWARD) rows_copy(op->out[0], n0, nb, wk.yr, 0, 0);
        else if (op->kind == BRG_OP_CONV2D_BACKWARD_DATA) rows_copy(op->out[0], n0, nb, wk.xr, 0, acc);
    }
    if (op->kind == BRG_OP_CONV2D_BACKWARD_FILTER) taps_to_weights(&g, wk.wt, acc, op->out[0]->data);
    return BRG_OK;
}
