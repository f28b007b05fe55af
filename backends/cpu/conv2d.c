/* 2-D convolution on the CPU: im2col + OpenBLAS sgemm (oneDNN runs them
 * instead where built and chosen: conv2d-onednn.c; small output planes go
 * by kernel taps in either case: conv2d-taps.c).
 *
 * Shapes: x[N,C,H,W], w[K,C,R,S], y[N,K,P,Q]; CRS = C*R*S, PQ = P*Q.
 *
 *   forward          y_n[K,PQ]   = w[K,CRS] . col_n[CRS,PQ]        (+ b)
 *   backward data    dcol[CRS,PQ] = w^T . dy_n[K,PQ], then col2im into dx
 *   backward filter  dw[K,CRS]  += dy_n[K,PQ] . col_n^T,  db[K] += row sums
 *
 * The work is cut into tiles whose column matrix lives in op->workspace:
 *   - a large image (PQ >= CONV_TILE_COLS) is one tile, or a band of output
 *     rows when its column matrix would pass CONV_COL_CAP bytes; the GEMM
 *     then reads and writes the NCHW tensors in place through their leading
 *     dimension (PQ), so no copies besides im2col;
 *   - smaller images (8x8 to 35x35) are batched: a tile holds several
 *     images' columns side by side so the GEMM's N dimension is large
 *     enough for sgemm to run near its peak. NCHW keeps each image's [K,PQ]
 *     block separate, so y/dy go through a [K, images*PQ] staging buffer;
 *   - a 1x1, stride-1, unpadded convolution needs no im2col: x already is the
 *     column matrix, and whole images run straight on the tensors without
 *     any workspace unless they are small enough to be worth batching.
 * The tiling depends only on the shapes, so brg_cpu_conv2d_workspace_bytes
 * and the kernels agree, and the same number serves all three kinds.
 *
 * For stride 1 with "same" width (Q == W, e.g. 3x3 pad 1, 1x7 pad 0x3) the
 * output rows of one kernel tap are a shifted, contiguous run of the input
 * plane, so im2col and col2im become one memcpy / vector add per plane plus
 * zeroing of the few padded columns, instead of a call per output row.
 *
 * sgemm is threaded by OpenBLAS; the copying around it (im2col, col2im,
 * bias, staging) is split over a small team of threads for the duration of
 * one op, as many as OpenBLAS uses (see "a fork-join team" below).
 */
#include "config.h"

#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include <cblas.h>

#include "cpu-kernels.h"
#include "gemm.h"
#include "base/internal.h"

/* Columns (GEMM N) a tile tries to reach. Every sgemm call and every hand-off
 * to the helper threads costs tens of microseconds on a small VM, and sgemm
 * is slow on narrow matrices: with OpenBLAS 0.3.21 on 2 cores, a 64x192 by
 * 192xN product runs at 54% of a square sgemm's rate for N = 1225 and 78%
 * for N = 2450. */
#ifndef CONV_TILE_COLS
#define CONV_TILE_COLS 2048
#endif
/* Bytes a tile's workspace (column matrix plus staging) aims to stay under;
 * it is charged to the device's arena, once per op in flight. Larger tiles
 * measured up to 10% faster on the 147x147 stem (4 -> 16 MiB) but the
 * returns flatten. A tile never shrinks below one output row, nor below
 * CONV_TILE_COLS columns of one image. */
#ifndef CONV_COL_CAP
#define CONV_COL_CAP ((int64_t)16 << 20)
#endif
/* A direct (1x1) convolution batches images only below this many pixels:
 * above it, copying x and y through the staging buffers costs about what
 * the wider GEMM gains. */
#ifndef CONV_DIRECT_BATCH_BELOW
#define CONV_DIRECT_BATCH_BELOW 1024
#endif

typedef struct conv_geom {
    int64_t n, c, h, w;   /* input */
    int64_t k, r, s;      /* filter */
    int64_t p, q;         /* output extent */
    int64_t sh, sw, ph, pw;
    int64_t crs, pq, hw;
    int direct;           /* 1x1, stride 1, no padding: x is the column matrix */
    /* tiling */
    int64_t imgs;         /* images per tile; > 1 means batched through a staging buffer */
    int64_t rows;         /* output rows per tile (== p when imgs > 1) */
    int64_t col_floats;   /* column matrix of one tile, 0 for direct single images */
    int64_t buf_floats;   /* staging buffer [K, imgs*PQ], 0 unless imgs > 1 */
} conv_geom;

/* One tile: images [b0, b0 + nb), output rows [p0, p0 + np) of each. */
typedef struct conv_tile {
    int64_t b0, nb, p0, np;
} conv_tile;

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

/* Vector loops over float runs. The fixed 16-wide inner blocks let GCC
 * vectorise them at -O2 too (its cheap cost model leaves plain loops with a
 * run-time trip count scalar), and these loops carry all of col2im, the bias
 * and the staging copies. */
#define CONV_VW 16

static void add_floats(float *restrict d, const float *restrict s, int64_t n)
{
    int64_t i = 0;
    for (; i + CONV_VW <= n; i += CONV_VW)
        for (int l = 0; l < CONV_VW; l++) d[i + l] += s[i + l];
    for (; i < n; i++) d[i] += s[i];
}

static void fill_floats(float *restrict d, float v, int64_t n)
{
    int64_t i = 0;
    for (; i + CONV_VW <= n; i += CONV_VW)
        for (int l = 0; l < CONV_VW; l++) d[i + l] = v;
    for (; i < n; i++) d[i] = v;
}

/* d = s + v */
static void add_scalar_floats(float *restrict d, const float *restrict s, float v, int64_t n)
{
    int64_t i = 0;
    for (; i + CONV_VW <= n; i += CONV_VW)
        for (int l = 0; l < CONV_VW; l++) d[i + l] = s[i + l] + v;
    for (; i < n; i++) d[i] = s[i] + v;
}

/* Fill g from the input/filter shapes and the op's parameters and choose the
 * tiling. x is [N,C,H,W] (dx for backward data), wt is [K,C,R,S]. Cannot
 * fail: the op has been validated. */
static void conv_setup(const brg_op *op, const brg_tensor *x, const brg_tensor *wt, conv_geom *g)
{
    const brg_conv2d_params *cp = &op->p.conv;
    memset(g, 0, sizeof *g);
    g->n = x->shape[0];
    g->c = x->shape[1];
    g->h = x->shape[2];
    g->w = x->shape[3];
    g->k = wt->shape[0];
    g->r = wt->shape[2];
    g->s = wt->shape[3];
    g->sh = cp->stride_h;
    g->sw = cp->stride_w;
    g->ph = cp->pad_h;
    g->pw = cp->pad_w;
    g->p = brg_conv_out_extent(g->h, (int)g->r, cp->stride_h, cp->pad_h);
    g->q = brg_conv_out_extent(g->w, (int)g->s, cp->stride_w, cp->pad_w);
    g->crs = g->c * g->r * g->s;
    g->pq = g->p * g->q;
    g->hw = g->h * g->w;
    g->direct = g->r == 1 && g->s == 1 && g->sh == 1 && g->sw == 1 && g->ph == 0 && g->pw == 0;

    const int64_t col_row_bytes = max64(g->crs, 1) * (int64_t)sizeof(float);
    int64_t imgs = 1;
    if (g->pq < CONV_TILE_COLS && (!g->direct || g->pq < CONV_DIRECT_BATCH_BELOW)) {
        /* Batched tiles also need the [K, imgs*PQ] staging buffer. */
        imgs = min64(max64(g->n, 1), ceil_div(CONV_TILE_COLS, max64(g->pq, 1)));
        int64_t fit = CONV_COL_CAP / ((max64(g->crs, 1) + g->k) * (int64_t)sizeof(float) * max64(g->pq, 1));
        imgs = max64(1, min64(imgs, fit));
    }
    g->imgs = imgs;
    g->rows = g->p;
    if (imgs > 1) {
        g->col_floats = g->crs * imgs * g->pq;
        g->buf_floats = g->k * imgs * g->pq;
    } else if (!g->direct) {
        /* Band a large image so its column matrix stays near the cap, but keep
         * at least CONV_TILE_COLS columns per GEMM. */
        if (col_row_bytes * g->pq > CONV_COL_CAP) {
            int64_t rows = CONV_COL_CAP / (col_row_bytes * g->q);
            rows = max64(rows, ceil_div(CONV_TILE_COLS, g->q));
            g->rows = max64(1, min64(rows, g->p));
        }
        g->col_floats = g->crs * g->rows * g->q;
    }
}

/* Offset, in floats, of the staging buffer inside the workspace: after the
 * column matrix, rounded to a cache line. */
static int64_t buf_offset(const conv_geom *g) { return (g->col_floats + 15) & ~(int64_t)15; }

static size_t workspace_floats(const conv_geom *g)
{
    if (g->buf_floats == 0) return (size_t)g->col_floats;
    return (size_t)(buf_offset(g) + g->buf_floats);
}

/* cblas takes int dimensions; refuse shapes whose matrices do not fit. */
static brg_status check_blas_range(const brg_op *op, const conv_geom *g)
{
    const int64_t dims[] = {g->k, g->crs, g->pq, g->hw, g->imgs * g->pq, g->c};
    for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++)
        if (dims[i] > INT_MAX)
            return brg_error(BRG_ERR_UNSUPPORTED, "%s: a matrix dimension of %lld exceeds the BLAS int range",
                             brg_op_kind_name(op->kind), (long long)dims[i]);
    return BRG_OK;
}

/* The workspace the device handed us must be at least what we asked for. */
static brg_status get_workspace(const brg_op *op, const conv_geom *g, float **col, float **buf)
{
    size_t need = workspace_floats(g) * sizeof(float);
    *col = NULL;
    *buf = NULL;
    if (need == 0) return BRG_OK;
    if (!op->workspace || op->workspace_bytes < need)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "%s: needs %zu bytes of workspace, given %zu",
                         brg_op_kind_name(op->kind), need, op->workspace ? op->workspace_bytes : (size_t)0);
    *col = op->workspace;
    if (g->buf_floats) *buf = *col + buf_offset(g);
    return BRG_OK;
}

/* Output columns q whose input column q*sw - pw + s lies inside [0, W):
 * the half-open range [*lo, *hi), possibly empty. */
static void valid_cols(const conv_geom *g, int64_t s, int64_t *lo, int64_t *hi)
{
    int64_t a = g->pw - s; /* q*sw >= a */
    int64_t l = a > 0 ? ceil_div(a, g->sw) : 0;
    int64_t last = g->w - 1 + g->pw - s; /* q*sw <= last */
    int64_t h = last < 0 ? 0 : min64(g->q, last / g->sw + 1);
    l = min64(l, g->q);
    *lo = l;
    *hi = max64(l, h);
}

/* Same for output rows p of tap r, clipped to [p0, p1). */
static void valid_rows(const conv_geom *g, int64_t r, int64_t p0, int64_t p1, int64_t *lo, int64_t *hi)
{
    int64_t a = g->ph - r;
    int64_t l = a > 0 ? ceil_div(a, g->sh) : 0;
    int64_t last = g->h - 1 + g->ph - r;
    int64_t h = last < 0 ? 0 : last / g->sh + 1;
    l = max64(l, p0);
    h = min64(h, p1);
    *lo = min64(l, p1);
    *hi = max64(*lo, h);
}

static int contiguous_rows(const conv_geom *g) { return g->sh == 1 && g->sw == 1 && g->q == g->w; }

/* Write the np*Q columns of tap (r, s) for one input plane into dst. */
static void im2col_plane(const conv_geom *g, const float *restrict plane, int64_t r, int64_t s, int64_t p0,
                         int64_t np, float *restrict dst)
{
    const int64_t q = g->q, w = g->w;
    int64_t plo, phi, qlo, qhi;
    valid_rows(g, r, p0, p0 + np, &plo, &phi);
    valid_cols(g, s, &qlo, &qhi);
    if (plo > p0) memset(dst, 0, (size_t)((plo - p0) * q) * sizeof(float));
    if (phi < p0 + np) memset(dst + (phi - p0) * q, 0, (size_t)((p0 + np - phi) * q) * sizeof(float));
    if (plo == phi) return;
    if (contiguous_rows(g)) {
        /* Rows plo..phi-1 are one run of the plane shifted by s - pw; the
         * elements that wrap across a row edge (or fall off the plane's ends)
         * are exactly the padded columns, zeroed below. */
        int64_t start = (plo - g->ph + r) * w + s - g->pw;
        int64_t len = (phi - plo) * q;
        int64_t i0 = start < 0 ? -start : 0;
        int64_t i1 = min64(len, g->hw - start);
        float *d = dst + (plo - p0) * q;
        if (i1 > i0) memcpy(d + i0, plane + start + i0, (size_t)(i1 - i0) * sizeof(float));
        if (i0 > 0) memset(d, 0, (size_t)min64(i0, len) * sizeof(float));
        if (i1 < len) memset(d + max64(i1, 0), 0, (size_t)(len - max64(i1, 0)) * sizeof(float));
        if (qlo > 0 || qhi < q)
            for (int64_t p = plo; p < phi; p++) {
                float *row = dst + (p - p0) * q;
                for (int64_t j = 0; j < qlo; j++) row[j] = 0.0f;
                for (int64_t j = qhi; j < q; j++) row[j] = 0.0f;
            }
        return;
    }
    if (qlo == qhi) {
        memset(dst + (plo - p0) * q, 0, (size_t)((phi - plo) * q) * sizeof(float));
        return;
    }
    for (int64_t p = plo; p < phi; p++) {
        float *restrict row = dst + (p - p0) * q;
        const float *restrict src = plane + (p * g->sh - g->ph + r) * w + qlo * g->sw + s - g->pw;
        for (int64_t j = 0; j < qlo; j++) row[j] = 0.0f;
        if (g->sw == 1)
            memcpy(row + qlo, src, (size_t)(qhi - qlo) * sizeof(float));
        else
            for (int64_t j = 0; j < qhi - qlo; j++) row[qlo + j] = src[j * g->sw];
        for (int64_t j = qhi; j < q; j++) row[j] = 0.0f;
    }
}

/* Add the np*Q columns of tap (r, s) in src into one input-gradient plane.
 * src is workspace and may be modified (its padded columns are zeroed). */
static void col2im_plane(const conv_geom *g, float *restrict plane, int64_t r, int64_t s, int64_t p0, int64_t np,
                         float *restrict src)
{
    const int64_t q = g->q, w = g->w;
    int64_t plo, phi, qlo, qhi;
    valid_rows(g, r, p0, p0 + np, &plo, &phi);
    valid_cols(g, s, &qlo, &qhi);
    if (plo == phi) return;
    if (contiguous_rows(g)) {
        /* As in im2col_plane: one shifted run, with the padded columns
         * (which would wrap into neighbouring pixels) zeroed first. */
        if (qlo > 0 || qhi < q)
            for (int64_t p = plo; p < phi; p++) {
                float *row = src + (p - p0) * q;
                for (int64_t j = 0; j < qlo; j++) row[j] = 0.0f;
                for (int64_t j = qhi; j < q; j++) row[j] = 0.0f;
            }
        int64_t start = (plo - g->ph + r) * w + s - g->pw;
        int64_t len = (phi - plo) * q;
        int64_t i0 = start < 0 ? -start : 0;
        int64_t i1 = min64(len, g->hw - start);
        if (i1 <= i0) return;
        float *restrict d = plane + start + i0;
        const float *restrict v = src + (plo - p0) * q + i0;
        add_floats(d, v, i1 - i0);
        return;
    }
    if (qlo == qhi) return;
    for (int64_t p = plo; p < phi; p++) {
        const float *restrict v = src + (p - p0) * q;
        float *restrict d = plane + (p * g->sh - g->ph + r) * w + qlo * g->sw + s - g->pw;
        if (g->sw == 1)
            add_floats(d, v + qlo, qhi - qlo);
        else
            for (int64_t j = 0; j < qhi - qlo; j++) d[j * g->sw] += v[qlo + j];
    }
}

/* ---- the memory-bound steps, cut into independent items ----
 *
 * sgemm runs on all of OpenBLAS's threads, but im2col, col2im, the bias and
 * the NCHW <-> staging copies would run on one core; on two cores that makes
 * them a third of a small-K layer's time. Each step is therefore a job over
 * items that write disjoint memory, run by a small team of threads (below). */

typedef enum conv_job_kind {
    JOB_IM2COL,    /* items (c, image, r): col rows of channel c, tap row r, one image */
    JOB_COL2IM,    /* items (c, image): one dx plane, zeroed first unless accumulating */
    JOB_GATHER,    /* items channel: NCHW tensor -> [ch, nb*PQ] staging */
    JOB_SCATTER,   /* items channel: staging -> NCHW, with bias or adding */
    JOB_BIAS_FILL, /* items filter: y rows of a band set to the bias */
    JOB_BIAS_GRAD, /* items filter: db[k] (+)= sum of dy[., k] */
} conv_job_kind;

typedef struct conv_job {
    conv_job_kind kind;
    const conv_geom *g;
    const conv_tile *t;
    const float *src; /* x, dy or staging */
    float *dst;       /* col, dx, y, staging or db */
    float *work;      /* col2im: the col matrix, which it may clobber */
    const float *bias;
    int64_t ch; /* channels of the NCHW side (gather/scatter) */
    int acc;    /* add into dst instead of overwriting */
} conv_job;

static int64_t job_items(const conv_job *j)
{
    switch (j->kind) {
    case JOB_IM2COL: return j->g->c * j->t->nb * j->g->r; /* finer: C may be 3 */
    case JOB_COL2IM: return j->g->c * j->t->nb;
    case JOB_GATHER:
    case JOB_SCATTER: return j->ch;
    case JOB_BIAS_FILL:
    case JOB_BIAS_GRAD: return j->g->k;
    }
    return 0;
}

/* db[k] (+)= sum over images and pixels of dy[n][k]. Partial sums in eight
 * float lanes (vectorisable, and less rounding than one running sum), then
 * double across planes. */
static void bias_grad(const conv_geom *g, const float *dy, int64_t k, int acc, float *db)
{
    double total = 0.0;
    for (int64_t b = 0; b < g->n; b++) {
        const float *v = dy + (b * g->k + k) * g->pq;
        float lane[8] = {0};
        int64_t j = 0;
        for (; j + 8 <= g->pq; j += 8)
            for (int l = 0; l < 8; l++) lane[l] += v[j + l];
        float part = 0.0f;
        for (; j < g->pq; j++) part += v[j];
        for (int l = 0; l < 8; l++) part += lane[l];
        total += part;
    }
    db[k] = acc ? db[k] + (float)total : (float)total;
}

/* Run items [begin, end) of a job. Items of one job never share output. */
static void run_job(const conv_job *j, int64_t begin, int64_t end)
{
    const conv_geom *g = j->g;
    const conv_tile *t = j->t;
    const int64_t span = t ? t->np * g->q : 0, ncols = t ? t->nb * span : 0;
    for (int64_t i = begin; i < end; i++) {
        switch (j->kind) {
        case JOB_IM2COL: {
            /* Item (c, image, r). Column (b - b0)*np*Q + pixel of row
             * (c, r, s) is tap (r, s) of that output pixel of image b.
             * Direct convolutions only gather the channel planes. */
            const int64_t r = i % g->r, cb = i / g->r, c = cb / t->nb, b = cb % t->nb;
            const float *plane = j->src + ((t->b0 + b) * g->c + c) * g->hw;
            if (g->direct) {
                memcpy(j->dst + c * ncols + b * span, plane + t->p0 * g->q, (size_t)span * sizeof(float));
                break;
            }
            for (int64_t s = 0; s < g->s; s++)
                im2col_plane(g, plane, r, s, t->p0, t->np, j->dst + ((c * g->r + r) * g->s + s) * ncols + b * span);
            break;
        }
        case JOB_COL2IM: {
            const int64_t c = i / t->nb, b = i % t->nb;
            float *col = j->work;
            float *plane = j->dst + ((t->b0 + b) * g->c + c) * g->hw;
            if (!j->acc && t->p0 == 0) memset(plane, 0, (size_t)g->hw * sizeof(float));
            for (int64_t r = 0; r < g->r; r++)
                for (int64_t s = 0; s < g->s; s++)
                    col2im_plane(g, plane, r, s, t->p0, t->np, col + ((c * g->r + r) * g->s + s) * ncols + b * span);
            break;
        }
        case JOB_GATHER:
            for (int64_t b = 0; b < t->nb; b++)
                memcpy(j->dst + (i * t->nb + b) * g->pq, j->src + ((t->b0 + b) * j->ch + i) * g->pq,
                       (size_t)g->pq * sizeof(float));
            break;
        case JOB_SCATTER:
            for (int64_t b = 0; b < t->nb; b++) {
                const float *restrict s = j->src + (i * t->nb + b) * g->pq;
                float *restrict d = j->dst + ((t->b0 + b) * j->ch + i) * g->pq;
                if (j->acc)
                    add_floats(d, s, g->pq);
                else if (j->bias)
                    add_scalar_floats(d, s, j->bias[i], g->pq);
                else
                    memcpy(d, s, (size_t)g->pq * sizeof(float));
            }
            break;
        case JOB_BIAS_FILL: {
            float *d = j->dst + i * g->pq;
            fill_floats(d, j->bias[i], span);
            break;
        }
        case JOB_BIAS_GRAD: bias_grad(g, j->src, i, j->acc, j->dst); break;
        }
    }
}

/* ---- a fork-join team for one op ----
 *
 * The caller and up to CONV_MAX_THREADS - 1 helpers split each job's items
 * into contiguous ranges. Helpers live for one op call (a thread start is
 * tens of microseconds against milliseconds of convolution), so there is no
 * global state to share between concurrent pipeline stages and nothing left
 * running at exit. While sgemm runs, helpers sleep on a condition variable
 * and do not compete with OpenBLAS's threads. If threads cannot be started
 * the team just has fewer members; it never fails. */

#define CONV_MAX_THREADS 16
/* Below this many elements of copying per op, a helper is not worth starting. */
#ifndef CONV_PARALLEL_MIN
#define CONV_PARALLEL_MIN ((int64_t)1 << 19)
#endif

typedef struct conv_team conv_team;

typedef struct conv_helper {
    conv_team *team;
    int index;
    pthread_t thread;
} conv_helper;

struct conv_team {
    int size; /* threads that take part, the caller included */
    conv_helper helper[CONV_MAX_THREADS - 1];
    pthread_mutex_t mu;
    pthread_cond_t wake, done;
    unsigned long generation; /* counts jobs handed out */
    int pending;              /* helpers still on the current job */
    int quit;
    const conv_job *job;
};

static void job_part(const conv_job *job, int part, int parts)
{
    const int64_t n = job_items(job);
    run_job(job, n * part / parts, n * (part + 1) / parts);
}

static void *helper_main(void *arg)
{
    conv_helper *h = arg;
    conv_team *team = h->team;
    unsigned long seen = 0;
    pthread_mutex_lock(&team->mu);
    for (;;) {
        while (team->generation == seen && !team->quit) pthread_cond_wait(&team->wake, &team->mu);
        if (team->quit) break;
        seen = team->generation;
        const conv_job *job = team->job;
        pthread_mutex_unlock(&team->mu);
        job_part(job, h->index, team->size);
        pthread_mutex_lock(&team->mu);
        if (--team->pending == 0) pthread_cond_signal(&team->done);
    }
    pthread_mutex_unlock(&team->mu);
    return NULL;
}

/* Start a team of up to `want` threads (caller included). Cannot fail: a
 * team of 1 runs everything on the caller. */
static void team_start(conv_team *team, int want)
{
    team->size = 1;
    team->generation = 0;
    team->pending = 0;
    team->quit = 0;
    team->job = NULL;
    if (want <= 1) return;
    if (pthread_mutex_init(&team->mu, NULL) != 0) return;
    if (pthread_cond_init(&team->wake, NULL) != 0) {
        pthread_mutex_destroy(&team->mu);
        return;
    }
    if (pthread_cond_init(&team->done, NULL) != 0) {
        pthread_cond_destroy(&team->wake);
        pthread_mutex_destroy(&team->mu);
        return;
    }
    if (want > CONV_MAX_THREADS) want = CONV_MAX_THREADS;
    /* size is read by helpers only after a job is posted, under the lock. */
    for (int i = 1; i < want; i++) {
        conv_helper *h = &team->helper[i - 1];
        h->team = team;
        h->index = i;
        if (pthread_create(&h->thread, NULL, helper_main, h) != 0) break;
        team->size = i + 1;
    }
    if (team->size == 1) {
        pthread_cond_destroy(&team->done);
        pthread_cond_destroy(&team->wake);
        pthread_mutex_destroy(&team->mu);
    }
}

static void team_stop(conv_team *team)
{
    if (team->size <= 1) return;
    pthread_mutex_lock(&team->mu);
    team->quit = 1;
    pthread_cond_broadcast(&team->wake);
    pthread_mutex_unlock(&team->mu);
    for (int i = 1; i < team->size; i++) pthread_join(team->helper[i - 1].thread, NULL);
    pthread_cond_destroy(&team->done);
    pthread_cond_destroy(&team->wake);
    pthread_mutex_destroy(&team->mu);
    team->size = 1;
}

/* Run all of a job's items, split across the team; returns when done. */
static void team_run(conv_team *team, const conv_job *job)
{
    if (team->size <= 1 || job_items(job) < 2) {
        run_job(job, 0, job_items(job));
        return;
    }
    pthread_mutex_lock(&team->mu);
    team->job = job;
    team->pending = team->size - 1;
    team->generation++;
    pthread_cond_broadcast(&team->wake);
    pthread_mutex_unlock(&team->mu);
    job_part(job, 0, team->size);
    pthread_mutex_lock(&team->mu);
    while (team->pending > 0) pthread_cond_wait(&team->done, &team->mu);
    pthread_mutex_unlock(&team->mu);
}

/* Team size for an op that copies about `elems` elements outside sgemm:
 * as many threads as OpenBLAS uses, or 1 when the copies are small. */
static int team_size_for(int64_t elems)
{
    if (elems < CONV_PARALLEL_MIN) return 1;
    int n = openblas_get_num_threads();
    return n < 1 ? 1 : n;
}

/* The next tile after t (t->nb == 0 starts); returns 0 when done. */
static int next_tile(const conv_geom *g, conv_tile *t)
{
    if (t->nb == 0) {
        t->b0 = 0;
        t->p0 = 0;
    } else if (g->imgs == 1 && t->p0 + t->np < g->p) {
        t->p0 += t->np;
    } else {
        t->b0 += t->nb;
        t->p0 = 0;
    }
    if (t->b0 >= g->n) return 0;
    t->nb = min64(g->imgs, g->n - t->b0);
    t->np = g->imgs == 1 ? min64(g->rows, g->p - t->p0) : g->p;
    return 1;
}

/* Workspace for a validated conv op of any of the three kinds: the same
 * number for all three of one layer (one allocation serves them), at most
 * about CONV_COL_CAP unless one output row or CONV_TILE_COLS columns of one
 * image need more, and 0 for a 1x1, stride-1, unpadded convolution on images
 * of CONV_DIRECT_BATCH_BELOW pixels or more. */
static size_t round64(size_t n) { return (n + 63) & ~(size_t)63; }

/* Room after im2col's own workspace for plain copies of the image tensors
 * that may come blocked (brg_cpu_layout_block divides their channels):
 * im2col reads and writes plain NCHW, and a stage hands it blocked tensors
 * where oneDNN declines a shape. */
static size_t plain_copies_bytes(const brg_op *op)
{
    const int b = brg_cpu_layout_block();
    size_t bytes = 0;
    if (b && brg_cpu_conv_x(op)->shape[1] % b == 0) bytes += round64(brg_tensor_bytes(brg_cpu_conv_x(op)));
    if (b && brg_cpu_conv_y(op)->shape[1] % b == 0) bytes += round64(brg_tensor_bytes(brg_cpu_conv_y(op)));
    return bytes;
}

/* im2col's own workspace for op: exact, and rounded to whole 64-byte
 * lines where plain copies follow it. */
static size_t im2col_exact_bytes(const brg_op *op)
{
    conv_geom g;
    const brg_tensor *wt = op->kind == BRG_OP_CONV2D_BACKWARD_FILTER ? op->out[0] : op->in[1];
    conv_setup(op, brg_cpu_conv_x(op), wt, &g);
    return workspace_floats(&g) * sizeof(float);
}

static size_t im2col_bytes(const brg_op *op) { return round64(im2col_exact_bytes(op)); }

size_t brg_cpu_conv2d_workspace_bytes(const brg_op *op)
{
    if (brg_cpu_conv2d_taps_chosen(op)) return brg_cpu_conv2d_taps_workspace_bytes(op);
#ifdef BRG_HAVE_ONEDNN
    size_t onednn;
    if (brg_cpu_conv_selected() == BRG_CPU_CONV_ONEDNN && brg_cpu_onednn_conv2d_workspace(op, &onednn)) return onednn;
#endif
    const size_t copies = plain_copies_bytes(op);
    return copies ? im2col_bytes(op) + copies : im2col_exact_bytes(op); /* without copies, as before blocked layouts */
}

/* Run kernel on plain copies of op's blocked image tensors, placed in the
 * workspace after im2col's part (plain_copies_bytes): the copies are made
 * first (an output's too, for accumulate), the blocked outputs written back
 * after. The same arithmetic as on plain tensors, so the same bits. */
static brg_status run_on_plain_copies(brg_device *dev, const brg_op *op, brg_kernel kernel)
{
    const size_t need = im2col_bytes(op) + plain_copies_bytes(op);
    if (!op->workspace || op->workspace_bytes < need)
        return brg_error(BRG_ERR_UNSUPPORTED,
                         "%s: the im2col convolution needs %zu bytes of workspace for plain copies of its blocked "
                         "tensors, given %zu (choose the convolution before creating stages, or set "
                         "BRG_CPU_LAYOUT=plain)",
                         brg_op_kind_name(op->kind), need, op->workspace ? op->workspace_bytes : (size_t)0);
    brg_op plain = *op;
    brg_tensor copies[2];
    const brg_tensor *sides[2] = {brg_cpu_conv_x(op), brg_cpu_conv_y(op)};
    char *at = (char *)op->workspace + im2col_bytes(op);
    plain.workspace_bytes = im2col_bytes(op);
    for (int k = 0; k < 2; k++) {
        if (!sides[k]->block) continue;
        copies[k] = *sides[k];
        copies[k].block = 0;
        copies[k].data = at;
        at += round64(brg_tensor_bytes(sides[k]));
        BRG_CHECK(brg_tensor_copy_layout(sides[k], &copies[k]));
        for (int i = 0; i < op->n_in; i++)
            if (op->in[i] == sides[k]) plain.in[i] = &copies[k];
        for (int i = 0; i < op->n_out; i++)
            if (op->out[i] == sides[k]) plain.out[i] = &copies[k];
    }
    BRG_CHECK(kernel(dev, &plain));
    for (int i = 0; i < op->n_out; i++)
        if (op->out[i] && op->out[i]->block) BRG_CHECK(brg_tensor_copy_layout(plain.out[i], op->out[i]));
    return BRG_OK;
}

/* Elements of x-sized and y-sized copying an op does besides sgemm. */
static int64_t copy_elems(const conv_geom *g, int x_side, int y_side)
{
    const int64_t per_col = g->n * g->pq;
    return (x_side ? g->crs * per_col : 0) + (y_side ? g->k * per_col : 0);
}

/* Small output planes take the taps (conv2d-taps.c); elsewhere, where
 * oneDNN is chosen and can run the op, it does (conv2d-onednn.c); otherwise
 * im2col, on plain copies of tensors that come blocked. */
#ifdef BRG_HAVE_ONEDNN
#define CONV_ELSEWHERE(op, self)                                            \
    do {                                                                    \
        if (brg_cpu_conv2d_taps_chosen(op)) return brg_cpu_conv2d_taps(op); \
        if (brg_cpu_conv_selected() == BRG_CPU_CONV_ONEDNN) {               \
            int ran_;                                                       \
            const brg_status st_ = brg_cpu_onednn_conv2d((op), &ran_);      \
            if (ran_ || st_ != BRG_OK) return st_;                          \
        }                                                                   \
        if (brg_cpu_conv_x(op)->block || brg_cpu_conv_y(op)->block)         \
            return run_on_plain_copies(dev, (op), (self));                  \
    } while (0)
#else
#define CONV_ELSEWHERE(op, self)                                            \
    do {                                                                    \
        if (brg_cpu_conv2d_taps_chosen(op)) return brg_cpu_conv2d_taps(op); \
        if (brg_cpu_conv_x(op)->block || brg_cpu_conv_y(op)->block)         \
            return run_on_plain_copies(dev, (op), (self));                  \
    } while (0)
#endif

/* y = conv(x, w) + b. */
brg_status brg_cpu_conv2d_forward(brg_device *dev, const brg_op *op)
{
    CONV_ELSEWHERE(op, brg_cpu_conv2d_forward);
    const brg_tensor *xt = op->in[0], *wt = op->in[1];
    const brg_tensor *bt = op->n_in > 2 ? op->in[2] : NULL;
    conv_geom g;
    conv_setup(op, xt, wt, &g);
    BRG_CHECK(check_blas_range(op, &g));
    float *col, *buf;
    BRG_CHECK(get_workspace(op, &g, &col, &buf));
    const float *x = xt->data, *w = wt->data, *bias = bt ? bt->data : NULL;
    float *y = op->out[0]->data;
    const int in_place = g.imgs == 1; /* y written through ldc = PQ */
    conv_team team;
    team_start(&team, team_size_for(copy_elems(&g, !(g.direct && in_place), bias || !in_place)));

    conv_tile t = {0, 0, 0, 0};
    while (next_tile(&g, &t)) {
        const int64_t ncols = t.nb * t.np * g.q;
        const float *bmat = col;
        int64_t ldb = ncols;
        if (g.direct && t.nb == 1) {
            bmat = x + t.b0 * g.c * g.hw; /* a whole image: np == P, ld == PQ */
            ldb = g.pq;
        } else {
            conv_job j = {.kind = JOB_IM2COL, .g = &g, .t = &t, .src = x, .dst = col};
            team_run(&team, &j);
        }
        if (t.nb > 1) {
            brg_cpu_gemm(CblasNoTrans, CblasNoTrans, g.k, ncols, g.crs, w, g.crs, bmat, ldb, 0.0f, buf, ncols);
            conv_job j = {.kind = JOB_SCATTER, .g = &g, .t = &t, .src = buf, .dst = y, .bias = bias, .ch = g.k};
            team_run(&team, &j);
            continue;
        }
        /* One image or a band of it, in place. The bias is pre-filled so the
         * GEMM adds onto it (beta 1), which costs no more than the zeroing
         * pass sgemm makes for beta 0. */
        float *c = y + t.b0 * g.k * g.pq + t.p0 * g.q;
        if (bias) {
            conv_job j = {.kind = JOB_BIAS_FILL, .g = &g, .t = &t, .dst = c, .bias = bias};
            team_run(&team, &j);
        }
        brg_cpu_gemm(CblasNoTrans, CblasNoTrans, g.k, ncols, g.crs, w, g.crs, bmat, ldb, bias ? 1.0f : 0.0f, c, g.pq);
    }
    team_stop(&team);
    return BRG_OK;
}

/* dx (+)= conv_transpose(dy, w). */
brg_status brg_cpu_conv2d_backward_data(brg_device *dev, const brg_op *op)
{
    CONV_ELSEWHERE(op, brg_cpu_conv2d_backward_data);
    const brg_tensor *dyt = op->in[0], *wt = op->in[1], *dxt = op->out[0];
    conv_geom g;
    conv_setup(op, dxt, wt, &g);
    BRG_CHECK(check_blas_range(op, &g));
    float *col, *buf;
    BRG_CHECK(get_workspace(op, &g, &col, &buf));
    const float *dy = dyt->data, *w = wt->data;
    float *dx = dxt->data;
    const int acc = op->accumulate != 0;
    conv_team team;
    team_start(&team, team_size_for(copy_elems(&g, !(g.direct && g.imgs == 1), g.imgs > 1)));

    conv_tile t = {0, 0, 0, 0};
    while (next_tile(&g, &t)) {
        const int64_t ncols = t.nb * t.np * g.q;
        if (g.direct && t.nb == 1) {
            /* dx_n[C,PQ] = w^T dy_n straight into the tensor. */
            brg_cpu_gemm(CblasTrans, CblasNoTrans, g.c, g.pq, g.k, w, g.crs, dy + t.b0 * g.k * g.pq, g.pq,
                         acc ? 1.0f : 0.0f, dx + t.b0 * g.c * g.hw, g.hw);
            continue;
        }
        if (t.nb > 1) {
            conv_job j = {.kind = JOB_GATHER, .g = &g, .t = &t, .src = dy, .dst = buf, .ch = g.k};
            team_run(&team, &j);
            brg_cpu_gemm(CblasTrans, CblasNoTrans, g.crs, ncols, g.k, w, g.crs, buf, ncols, 0.0f, col, ncols);
        } else {
            brg_cpu_gemm(CblasTrans, CblasNoTrans, g.crs, ncols, g.k, w, g.crs, dy + t.b0 * g.k * g.pq + t.p0 * g.q,
                         g.pq, 0.0f, col, ncols);
        }
        /* A direct convolution's col matrix is dx already, staged; otherwise
         * col2im adds the taps up, on a zeroed image unless accumulating. */
        conv_job j =
            g.direct ? (conv_job){.kind = JOB_SCATTER, .g = &g, .t = &t, .src = col, .dst = dx, .ch = g.c, .acc = acc}
                     : (conv_job){.kind = JOB_COL2IM, .g = &g, .t = &t, .dst = dx, .work = col, .acc = acc};
        team_run(&team, &j);
    }
    team_stop(&team);
    return BRG_OK;
}

/* dw (+)= dy . im2col(x)^T, db (+)= sums of dy. */
brg_status brg_cpu_conv2d_backward_filter(brg_device *dev, const brg_op *op)
{
    CONV_ELSEWHERE(op, brg_cpu_conv2d_backward_filter);
    const brg_tensor *xt = op->in[0], *dyt = op->in[1], *dwt = op->out[0];
    const brg_tensor *dbt = op->n_out > 1 ? op->out[1] : NULL;
    conv_geom g;
    conv_setup(op, xt, dwt, &g);
    BRG_CHECK(check_blas_range(op, &g));
    float *col, *buf;
    BRG_CHECK(get_workspace(op, &g, &col, &buf));
    const float *x = xt->data, *dy = dyt->data;
    float *dw = dwt->data;
    const int acc = op->accumulate != 0;
    conv_team team;
    team_start(&team, team_size_for(copy_elems(&g, !(g.direct && g.imgs == 1), g.imgs > 1 || dbt)));

    /* Every tile adds into dw (beta 1), so start from zero unless accumulating. */
    if (!acc) memset(dw, 0, (size_t)(g.k * g.crs) * sizeof(float));
    conv_tile t = {0, 0, 0, 0};
    while (next_tile(&g, &t)) {
        const int64_t ncols = t.nb * t.np * g.q;
        if (g.direct && t.nb == 1) {
            brg_cpu_gemm(CblasNoTrans, CblasTrans, g.k, g.c, g.pq, dy + t.b0 * g.k * g.pq, g.pq, x + t.b0 * g.c * g.hw,
                         g.hw, 1.0f, dw, g.crs);
            continue;
        }
        conv_job j = {.kind = JOB_IM2COL, .g = &g, .t = &t, .src = x, .dst = col};
        team_run(&team, &j);
        const float *a = dy + t.b0 * g.k * g.pq + t.p0 * g.q;
        int64_t lda = g.pq;
        if (t.nb > 1) {
            conv_job gj = {.kind = JOB_GATHER, .g = &g, .t = &t, .src = dy, .dst = buf, .ch = g.k};
            team_run(&team, &gj);
            a = buf;
            lda = ncols;
        }
        brg_cpu_gemm(CblasNoTrans, CblasTrans, g.k, g.crs, ncols, a, lda, col, ncols, 1.0f, dw, g.crs);
    }
    if (dbt) {
        conv_job j = {.kind = JOB_BIAS_GRAD, .g = &g, .src = dy, .dst = dbt->data, .acc = acc};
        team_run(&team, &j);
    }
    team_stop(&team);
    return BRG_OK;
}
