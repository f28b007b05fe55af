/* brigade: the CUDA pools' per-element arithmetic, as plain C that compiles
 * for the host too (private).
 *
 * The CUDA pool kernels (ops_kernels.cu) are calls of these: per element,
 * or for the backward by tiles (below). Keeping them host-callable lets
 * tests/test_cuda_kernels check them against the CPU kernels on any
 * machine, GPU or not.
 *
 * Windows are those of backends/cpu/pool.c: a window is clipped to the real
 * input (padding never takes part), the max is the first maximum in
 * row-major window order, an empty window pools to 0 and passes no
 * gradient, and average pools divide by the real elements or, with
 * count_include_pad, by the kernel's area. The backward gathers: one input
 * element sums the gradients of the windows that cover it and picked it
 * (max) or spread over it (average), in output order as the CPU scatters.
 */
#ifndef BRIGADE_POOL_WINDOW_H
#define BRIGADE_POOL_WINDOW_H

#include <stddef.h>
#include <stdint.h>

#if defined(__CUDACC__)
#define BRG_HOST_DEVICE __host__ __device__
#else
#define BRG_HOST_DEVICE
#endif

/* Geometry of a windowed pool: planes (N*C) of h x w in, p x q out. A
 * plane, in or out, holds fewer than 2^31 elements (backends/cuda/ops.c
 * refuses larger ones, and sides and windows over 2^29), so everything
 * inside a plane is int: the kernels never divide in 64 bits, a long
 * subroutine on the GPU (the first pool backward, flat 64-bit indices and
 * 90 registers, ran at 35 times its memory traffic on an H200). */
typedef struct brg_cuda_pool_geom {
    int64_t planes;
    int h, w, p, q;
    int kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w;
    int count_include_pad;
} brg_cuda_pool_geom;

/* The real rows [h0, h1) and columns [w0, w1) of one window. */
typedef struct brg_pool_span {
    int h0, h1, w0, w1;
} brg_pool_span;

static inline BRG_HOST_DEVICE brg_pool_span brg_pool_window(const brg_cuda_pool_geom *g, int oh, int ow)
{
    brg_pool_span s;
    int hs = oh * g->stride_h - g->pad_h, ws = ow * g->stride_w - g->pad_w;
    s.h0 = hs < 0 ? 0 : hs;
    s.h1 = hs + g->kernel_h > g->h ? g->h : hs + g->kernel_h;
    s.w0 = ws < 0 ? 0 : ws;
    s.w1 = ws + g->kernel_w > g->w ? g->w : ws + g->kernel_w;
    return s;
}

static inline BRG_HOST_DEVICE int brg_pool_empty(brg_pool_span s) { return !(s.h0 < s.h1 && s.w0 < s.w1); }

/* Offset in the plane of a non-empty window's first maximum. */
static inline BRG_HOST_DEVICE int brg_pool_argmax(const float *plane, int w, brg_pool_span s)
{
    int best = s.h0 * w + s.w0;
    float best_v = plane[best];
    for (int ih = s.h0; ih < s.h1; ih++)
        for (int iw = s.w0; iw < s.w1; iw++)
            if (plane[ih * w + iw] > best_v) {
                best = ih * w + iw;
                best_v = plane[best];
            }
    return best;
}

static inline BRG_HOST_DEVICE float brg_pool_divisor(const brg_cuda_pool_geom *g, brg_pool_span s)
{
    if (g->count_include_pad) return (float)g->kernel_h * (float)g->kernel_w;
    return (float)((s.h1 - s.h0) * (s.w1 - s.w0));
}

/* Output (oh, ow) of the pool of one plane xp. */
static inline BRG_HOST_DEVICE float brg_pool_forward_px(const brg_cuda_pool_geom *g, const float *xp, int oh, int ow,
                                                        int is_max)
{
    brg_pool_span s = brg_pool_window(g, oh, ow);
    if (is_max) return brg_pool_empty(s) ? 0.0f : xp[brg_pool_argmax(xp, g->w, s)];
    float sum = 0.0f; /* in the CPU's order */
    for (int ih = s.h0; ih < s.h1; ih++)
        for (int iw = s.w0; iw < s.w1; iw++) sum += xp[ih * g->w + iw];
    float div = brg_pool_divisor(g, s);
    return div > 0.0f ? sum / div : 0.0f;
}

/* First and last output index along an axis whose window covers input
 * index i: o * stride - pad <= i < o * stride - pad + kernel, clipped to
 * [0, out). lo > hi when none does. */
static inline BRG_HOST_DEVICE void brg_pool_covering(int i, int kernel, int stride, int pad, int out, int *lo, int *hi)
{
    int t = i + pad - kernel + 1;            /* o * stride >= t */
    *lo = t <= 0 ? 0 : (t - 1) / stride + 1; /* ceil(t / stride), no sum a huge stride overflows */
    int h = (i + pad) / stride;              /* o * stride <= i + pad */
    *hi = h < out - 1 ? h : out - 1;
}

/* The gradient reaching input (ih, iw) of one plane from its dyp; xp is
 * read by the max pool only (NULL for the average pool). yp, the max
 * pool's output plane (or NULL), spares most argmax scans: a window's
 * argmax is looked for only where the element equals the window's maximum
 * (or the maximum is NaN, which equals nothing), since only then can the
 * element be it. Most input elements are no window's maximum, so most
 * windows then cost one read of y instead of a scan of the window (a
 * quarter of the reads for a 3x3/2 pool); the sum is the same either way. */
static inline BRG_HOST_DEVICE float brg_pool_backward_px(const brg_cuda_pool_geom *g, const float *xp, const float *yp,
                                                         const float *dyp, int ih, int iw, int is_max)
{
    const float v = xp ? xp[ih * g->w + iw] : 0.0f;
    int oh0, oh1, ow0, ow1;
    brg_pool_covering(ih, g->kernel_h, g->stride_h, g->pad_h, g->p, &oh0, &oh1);
    brg_pool_covering(iw, g->kernel_w, g->stride_w, g->pad_w, g->q, &ow0, &ow1);
    float sum = 0.0f;
    for (int oh = oh0; oh <= oh1; oh++)
        for (int ow = ow0; ow <= ow1; ow++) {
            if (yp) {
                const float m = yp[oh * g->q + ow];
                if (v != m && m == m) continue;
            }
            brg_pool_span s = brg_pool_window(g, oh, ow);
            if (is_max) {
                if (!brg_pool_empty(s) && brg_pool_argmax(xp, g->w, s) == ih * g->w + iw) sum += dyp[oh * g->q + ow];
            } else {
                float div = brg_pool_divisor(g, s);
                if (div > 0.0f) sum += dyp[oh * g->q + ow] / div;
            }
        }
    return sum;
}

/* The same at flat indices over all planes, for the host's checks: output
 * element i (of planes * p * q) of the pool of x, and the gradient reaching
 * input element i (of planes * h * w); x is NULL for the average pool's
 * backward, y may be NULL. */
static inline float brg_pool_forward_at(const brg_cuda_pool_geom *g, const float *x, int64_t i, int is_max)
{
    const int64_t pq = (int64_t)g->p * g->q, pl = i / pq;
    const int e = (int)(i % pq);
    return brg_pool_forward_px(g, x + pl * g->h * g->w, e / g->q, e % g->q, is_max);
}

static inline float brg_pool_backward_at(const brg_cuda_pool_geom *g, const float *x, const float *y, const float *dy,
                                         int64_t i, int is_max)
{
    const int64_t hw = (int64_t)g->h * g->w, pq = (int64_t)g->p * g->q, pl = i / hw;
    const int e = (int)(i % hw);
    return brg_pool_backward_px(g, is_max ? x + pl * hw : NULL, is_max && y ? y + pl * pq : NULL, dy + pl * pq,
                                e / g->w, e % g->w, is_max);
}

/* ---- the backward by tiles ----
 *
 * The per-element backward above makes every element look at every window
 * that covers it, and a max pool's element that equals a window's maximum
 * scans the window again: nine dependent loads that keep its warp waiting
 * (on an H200 the stem's max pool backward took 13 times its memory
 * traffic). By tiles, a block takes a tile of th x tw input elements and
 * the windows that cover any of them, in two phases: first each window's
 * entry once, in shared memory (the max pool: the offset of its first
 * maximum, as the forward found it; the average pool: its gradient over
 * its divisor), then each element gathers its windows' entries, in output
 * order as the CPU scatters. The same sums as brg_pool_backward_px. */

/* The windows covering a tile: rows oh0 .. oh0 + wh - 1, columns ow0 ..
 * ow0 + ww - 1 (wh or ww 0 when none), entries row by row. */
typedef struct brg_pool_tile {
    int oh0, ow0, wh, ww;
} brg_pool_tile;

/* The windows covering input rows [r0, r0 + th) and columns [c0, c0 + tw)
 * (clipped to the plane): an element's covering windows are in it, since
 * their first and last indices never decrease along an axis. */
static inline BRG_HOST_DEVICE brg_pool_tile brg_pool_tile_of(const brg_cuda_pool_geom *g, int r0, int c0, int th,
                                                              int tw)
{
    brg_pool_tile t;
    int lo, hi, last, unused;
    last = r0 + th < g->h ? r0 + th - 1 : g->h - 1;
    brg_pool_covering(r0, g->kernel_h, g->stride_h, g->pad_h, g->p, &lo, &unused);
    brg_pool_covering(last, g->kernel_h, g->stride_h, g->pad_h, g->p, &unused, &hi);
    t.oh0 = lo;
    t.wh = hi >= lo ? hi - lo + 1 : 0;
    last = c0 + tw < g->w ? c0 + tw - 1 : g->w - 1;
    brg_pool_covering(c0, g->kernel_w, g->stride_w, g->pad_w, g->q, &lo, &unused);
    brg_pool_covering(last, g->kernel_w, g->stride_w, g->pad_w, g->q, &unused, &hi);
    t.ow0 = lo;
    t.ww = hi >= lo ? hi - lo + 1 : 0;
    return t;
}

/* Most windows a tile of th x tw can have (for the shared memory a launch
 * asks): an axis of n elements meets at most (n - 1 + kernel - 1) / stride
 * + 1 windows. */
static inline BRG_HOST_DEVICE int64_t brg_pool_tile_most(const brg_cuda_pool_geom *g, int th, int tw)
{
    return ((int64_t)(th + g->kernel_h - 2) / g->stride_h + 1) * ((int64_t)(tw + g->kernel_w - 2) / g->stride_w + 1);
}

/* Entry k of the max pool's table: the in-plane offset of window k's first
 * maximum, -1 for an empty window. */
static inline BRG_HOST_DEVICE int brg_pool_tile_argmax(const brg_cuda_pool_geom *g, const brg_pool_tile *t,
                                                       const float *xp, int k)
{
    brg_pool_span s = brg_pool_window(g, t->oh0 + k / t->ww, t->ow0 + k % t->ww);
    return brg_pool_empty(s) ? -1 : brg_pool_argmax(xp, g->w, s);
}

/* Entry k of the average pool's table: window k's gradient over its
 * divisor, 0 for an empty window (never met: validation keeps padding at
 * most half a window, so every window holds a real element). */
static inline BRG_HOST_DEVICE float brg_pool_tile_share(const brg_cuda_pool_geom *g, const brg_pool_tile *t,
                                                        const float *dyp, int k)
{
    const int oh = t->oh0 + k / t->ww, ow = t->ow0 + k % t->ww;
    const float div = brg_pool_divisor(g, brg_pool_window(g, oh, ow));
    return div > 0.0f ? dyp[oh * g->q + ow] / div : 0.0f;
}

/* The gradient reaching input (ih, iw) of the tile from its windows'
 * entries: argmax (max pool, with dyp) or share (average pool). */
static inline BRG_HOST_DEVICE float brg_pool_tile_gather(const brg_cuda_pool_geom *g, const brg_pool_tile *t,
                                                         const int *argmax, const float *share, const float *dyp,
                                                         int ih, int iw)
{
    int oh0, oh1, ow0, ow1;
    brg_pool_covering(ih, g->kernel_h, g->stride_h, g->pad_h, g->p, &oh0, &oh1);
    brg_pool_covering(iw, g->kernel_w, g->stride_w, g->pad_w, g->q, &ow0, &ow1);
    const int me = ih * g->w + iw;
    float sum = 0.0f;
    for (int oh = oh0; oh <= oh1; oh++)
        for (int ow = ow0; ow <= ow1; ow++) {
            const int k = (oh - t->oh0) * t->ww + (ow - t->ow0);
            if (argmax) {
                if (argmax[k] == me) sum += dyp[oh * g->q + ow];
            } else {
                sum += share[k];
            }
        }
    return sum;
}

#endif /* BRIGADE_POOL_WINDOW_H */
