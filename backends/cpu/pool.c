/* CPU kernels: max, average and global average pooling.
 *
 * Every (n, c) plane pools independently, so the loops walk the planes in
 * memory order and, inside one, the output positions row by row. A window is
 * clipped to the real input once (window_span) instead of testing every tap
 * against the padding. brg_op_validate keeps padding at most half a window,
 * which leaves at least one real element in every clipped window of a
 * non-empty input; an input with zero height or width still validates
 * (with 2 * pad == kernel), so empty windows are skipped explicitly: they
 * pool to 0 and pass no gradient.
 *
 * A channel-blocked tensor (brigade/tensor.h) is pooled with each channel
 * seeing the same arithmetic in the same order, so the results are the same
 * bits in either layout: a pixel (the block's channels at one position) at
 * a time where it can (the px_ kernels at the end), else channel by channel
 * with the block as the step between a channel's elements (`st`, 1 for
 * plain NCHW: the plain kernels are these, instantiated with the constant
 * 1, so they vectorize as before). */
#include <stdint.h>
#include <string.h>

#include "cpu-kernels.h"

/* The kernels' loops inlined into each caller with its constant widths. */
#define POOL_INLINE static inline __attribute__((always_inline))

/* Geometry shared by the pool kernels: planes of H x W in, P x Q out. */
typedef struct pool_shape {
    int64_t planes; /* N * C */
    int64_t c;      /* channels */
    int64_t h, w;   /* input extent */
    int64_t p, q;   /* output extent */
} pool_shape;

static pool_shape pool_shape_of(const brg_tensor *big, const brg_tensor *small)
{
    pool_shape s = {big->shape[0] * big->shape[1], big->shape[1], big->shape[2], big->shape[3], small->shape[2],
                    small->shape[3]};
    return s;
}

/* Where plane pl (sample pl / C, channel pl % C) of extent elements per
 * channel starts, in a tensor blocked by st (1: plain). */
static inline int64_t plane_at(const pool_shape *s, int64_t pl, int64_t extent, int64_t st)
{
    if (st == 1) return pl * extent;
    const int64_t n = pl / s->c, c = pl % s->c;
    return n * s->c * extent + (c / st) * st * extent + c % st;
}

/* The real rows (or columns) [*lo, *hi) covered by the window at output
 * index o along an axis of the given extent. */
static void window_span(int64_t o, int stride, int pad, int kernel, int64_t extent, int64_t *lo, int64_t *hi)
{
    int64_t start = o * stride - pad;
    int64_t end = start + kernel;
    *lo = start < 0 ? 0 : start;
    *hi = end > extent ? extent : end;
}

/* Offset within a plane of the window's maximum: the first one in row-major
 * window order on ties, and never a padding position (padding is not
 * visited at all). The window must be non-empty (h0 < h1, w0 < w1).
 * Written as selects, not branches: which tap wins is data-dependent, and
 * the branchy form ran the backward about half as fast. */
static inline int64_t window_argmax(const float *plane, int64_t w, int64_t h0, int64_t h1, int64_t w0, int64_t w1,
                                    int64_t st)
{
    int64_t best = h0 * w + w0;
    float best_v = plane[best * st];
    for (int64_t ih = h0; ih < h1; ih++) {
        for (int64_t iw = w0; iw < w1; iw++) {
            int64_t at = ih * w + iw;
            float v = plane[at * st];
            /* All ones when v wins; compilers turn a ?: on the index back
             * into a branch, but not this. */
            int64_t win = -(int64_t)(v > best_v);
            best = (at & win) | (best & ~win);
            best_v = v > best_v ? v : best_v;
        }
    }
    return best;
}

/* The value window_argmax would pick, without tracking where it is: the
 * same strict > from the same first element gives the same value (NaN
 * included: it wins only as the first element, in both). */
static inline float window_max(const float *plane, int64_t w, int64_t h0, int64_t h1, int64_t w0, int64_t w1,
                               int64_t st)
{
    float best_v = plane[(h0 * w + w0) * st];
    for (int64_t ih = h0; ih < h1; ih++) {
        const float *row = plane + ih * w * st;
        for (int64_t iw = w0; iw < w1; iw++) best_v = row[iw * st] > best_v ? row[iw * st] : best_v;
    }
    return best_v;
}

/* The divisor of one average window: the real elements it covers, or the
 * full kernel area when padding counts. A window never reaches past
 * the padded input (the output extent is floored), so with padding counted
 * every window divides by kernel_h * kernel_w. */
static float avg_divisor(const brg_pool_params *pp, int64_t h0, int64_t h1, int64_t w0, int64_t w1)
{
    if (pp->count_include_pad) return (float)pp->kernel_h * (float)pp->kernel_w;
    return (float)((h1 - h0) * (w1 - w0));
}

/* The sum of a window's elements over its divisor (avg_divisor), or 0
 * when the divisor is 0 (an empty window that does not count padding). */
static inline float window_mean(const brg_pool_params *pp, const float *plane, int64_t w, int64_t h0, int64_t h1,
                                int64_t w0, int64_t w1, int64_t st)
{
    float sum = 0.0f;
    for (int64_t ih = h0; ih < h1; ih++)
        for (int64_t iw = w0; iw < w1; iw++) sum += plane[(ih * w + iw) * st];
    float div = avg_divisor(pp, h0, h1, w0, w1);
    return div > 0.0f ? sum / div : 0.0f;
}

/* Add dy / divisor to every real element of a window; padding positions
 * take their share of the divisor but have nowhere to send it. Nothing
 * when the divisor is 0. */
static inline void window_spread(const brg_pool_params *pp, float *plane, int64_t w, int64_t h0, int64_t h1,
                                 int64_t w0, int64_t w1, float dy, int64_t st)
{
    float div = avg_divisor(pp, h0, h1, w0, w1);
    if (!(div > 0.0f)) return;
    float g = dy / div;
    for (int64_t ih = h0; ih < h1; ih++)
        for (int64_t iw = w0; iw < w1; iw++) plane[(ih * w + iw) * st] += g;
}

/* Average pooling at stride 1 with odd windows padded by half a window
 * ("same" pooling: Inception's 3x3 average pools) keeps the extent, and
 * both passes are box sums: output (i, j) sums input rows span(i) and
 * columns span(j), and input (r, c) receives from outputs rows span(r)
 * and columns span(c), each clipped to the plane (window_span). Summing
 * the window's rows into one row first reads each row kernel_h times
 * instead of kernel_h * kernel_w times, in loops that vectorize: the
 * general walk took about 8% of an inception-v3 step on 2 cores. Rows wider
 * than BOX_MAX take the general walk. */
#define BOX_MAX 2048

static int is_box_pool(const brg_pool_params *pp, const pool_shape *s)
{
    return pp->stride_h == 1 && pp->stride_w == 1 && pp->kernel_h % 2 == 1 && pp->kernel_w % 2 == 1 &&
           pp->pad_h == pp->kernel_h / 2 && pp->pad_w == pp->kernel_w / 2 && s->p == s->h && s->q == s->w &&
           s->w <= BOX_MAX;
}

static int64_t span_count(int64_t o, int pad, int kernel, int64_t extent)
{
    int64_t lo, hi;
    window_span(o, 1, pad, kernel, extent, &lo, &hi);
    return hi - lo;
}

/* One plane, src to dst (x to y, or dy to dx): the forward divides each
 * output's box sum by its divisor (avg_divisor), the backward divides each
 * dy by its own output's divisor before summing, as window_spread does.
 * Every loop runs over a whole row, so that each vectorizes. A position
 * holds px channels side by side (a blocked tensor's pixel, px == its
 * block; 1 for one channel), and consecutive elements are st apart (1, or
 * the block when a blocked tensor goes channel by channel): element (c, k)
 * of a row sits at (c * px + k) * st. Each channel's arithmetic is the
 * same whatever px and st, and so are its bits. Rows of W * px <= BOX_MAX. */
static inline __attribute__((always_inline)) void box_pool_plane(const brg_pool_params *pp, const pool_shape *s,
                                                                  const float *src, float *dst, int backward,
                                                                  int accumulate, int64_t st, int px)
{
    float row_sum[BOX_MAX], box[BOX_MAX], cols[BOX_MAX];
    const int64_t h = s->h, w = s->w, n = s->w * px; /* n: the row's elements */
    const int counted = !pp->count_include_pad, pw = pp->pad_w;
    const float area = (float)pp->kernel_h * (float)pp->kernel_w;
    for (int64_t c = 0; c < w; c++) cols[c] = (float)span_count(c, pw, pp->kernel_w, w);
    for (int64_t i = 0; i < h; i++) {
        int64_t r0, r1;
        window_span(i, 1, pp->pad_h, pp->kernel_h, h, &r0, &r1);
        for (int64_t j = 0; j < n; j++) row_sum[j] = 0.0f;
        for (int64_t r = r0; r < r1; r++) {
            const float *row = src + r * n * st;
            if (backward && counted) {
                const float rows = (float)span_count(r, pp->pad_h, pp->kernel_h, h);
                for (int64_t c = 0; c < w; c++)
                    for (int k = 0; k < px; k++) row_sum[c * px + k] += row[(c * px + k) * st] / (rows * cols[c]);
            } else {
                for (int64_t j = 0; j < n; j++) row_sum[j] += row[j * st];
            }
        }
        /* box[j] sums row_sum over columns [j - pw, j + pw] within the row */
        for (int64_t j = 0; j < n; j++) box[j] = 0.0f;
        for (int t = -pw; t <= pw; t++) {
            const int64_t lo = t < 0 ? -t : 0, hi = t > 0 ? w - t : w;
            for (int64_t j = lo * px; j < hi * px; j++) box[j] += row_sum[j + t * px];
        }
        float *out = dst + i * n * st;
        const float rows_i = (float)(r1 - r0);
        if (backward && counted) {
            /* divided already */
        } else if (counted) {
            for (int64_t c = 0; c < w; c++)
                for (int k = 0; k < px; k++) box[c * px + k] /= rows_i * cols[c];
        } else {
            for (int64_t j = 0; j < n; j++) box[j] /= area;
        }
        if (accumulate)
            for (int64_t j = 0; j < n; j++) out[j * st] += box[j];
        else
            for (int64_t j = 0; j < n; j++) out[j * st] = box[j];
    }
}

/* Every plane of a box pool (is_box_pool), forward or backward. */
static brg_status box_pool(const brg_op *op, const pool_shape *s, const float *src, float *dst, int backward,
                           int64_t st)
{
    const int threads = brg_cpu_kernel_threads(s->planes * s->h * s->w);
    const int64_t hw = s->h * s->w;
    BRG_CPU_PARALLEL_FOR(threads)
    for (int64_t pl = 0; pl < s->planes; pl++) {
        const int64_t at = plane_at(s, pl, hw, st);
        if (st == 1) box_pool_plane(&op->p.pool, s, src + at, dst + at, backward, backward && op->accumulate, 1, 1);
        else box_pool_plane(&op->p.pool, s, src + at, dst + at, backward, backward && op->accumulate, st, 1);
    }
    return BRG_OK;
}

/* ---- max pool's 2x2 window, stride 2, no padding ----
 *
 * The common case (fmnist-cnn's, VGG's, U-Net's pools): the windows tile
 * the input, so neither pass needs the window bookkeeping per output. A
 * plane holds w floats at each position (1: plain NCHW; the block for a
 * blocked tensor), each channel seeing window_max's and window_argmax's
 * comparisons in their order, so the bits are the general walk's in either
 * layout. */
static int is_2x2_stride_2(const brg_pool_params *pp)
{
    return pp->kernel_h == 2 && pp->kernel_w == 2 && pp->stride_h == 2 && pp->stride_w == 2 && pp->pad_h == 0 &&
           pp->pad_w == 0;
}

/* The forward of one plane: the general walk took 1.1-1.5 ns per input
 * element on plain planes, where blocked ones took 0.5. */
POOL_INLINE void maxpool2x2_forward_plane(const float *x, float *y, const pool_shape *s, const int w)
{
    for (int64_t oh = 0; oh < s->p; oh++) {
        const float *x0 = x + 2 * oh * s->w * w, *x1 = x0 + s->w * w;
        float *out = y + oh * s->q * w;
        for (int64_t ow = 0; ow < s->q; ow++) {
            const int64_t j = 2 * ow * w, j1 = j + w;
            for (int k = 0; k < w; k++) {
                float m = x0[j + k];
                m = x0[j1 + k] > m ? x0[j1 + k] : m;
                m = x1[j + k] > m ? x1[j + k] : m;
                m = x1[j1 + k] > m ? x1[j1 + k] : m;
                out[ow * w + k] = m;
            }
        }
    }
}

/* The backward of one plane: each dx element is written once, dy at its
 * window's argmax (the first maximum in row-major order, as
 * window_argmax picks it) and 0 elsewhere, or added to with accumulate;
 * rows and columns past the last window get 0 (or keep dx). No clearing
 * pass and no scatter: fmnist-cnn's first pool backward took 3.1 ms at
 * batch 64 the general way. */
POOL_INLINE void maxpool2x2_backward_plane(const float *x, const float *dy, float *dx, const pool_shape *s,
                                            int accumulate, const int w)
{
    for (int64_t oh = 0; oh < s->p; oh++) {
        const float *x0 = x + 2 * oh * s->w * w, *x1 = x0 + s->w * w;
        float *d0 = dx + 2 * oh * s->w * w, *d1 = d0 + s->w * w;
        for (int64_t ow = 0; ow < s->q; ow++) {
            const int64_t j = 2 * ow * w, j1 = j + w;
            const float *g = dy + (oh * s->q + ow) * w;
            for (int k = 0; k < w; k++) {
                float best = x0[j + k];
                int at = 0;
                if (x0[j1 + k] > best) best = x0[j1 + k], at = 1;
                if (x1[j + k] > best) best = x1[j + k], at = 2;
                if (x1[j1 + k] > best) at = 3;
                const float g0 = at == 0 ? g[k] : 0.0f, g1 = at == 1 ? g[k] : 0.0f, g2 = at == 2 ? g[k] : 0.0f,
                            g3 = at == 3 ? g[k] : 0.0f;
                if (accumulate) {
                    d0[j + k] += g0;
                    d0[j1 + k] += g1;
                    d1[j + k] += g2;
                    d1[j1 + k] += g3;
                } else {
                    d0[j + k] = g0;
                    d0[j1 + k] = g1;
                    d1[j + k] = g2;
                    d1[j1 + k] = g3;
                }
            }
        }
        if (!accumulate)
            for (int64_t i = 2 * s->q * w; i < s->w * w; i++) d0[i] = d1[i] = 0.0f;
    }
    if (!accumulate)
        for (int64_t i = 2 * s->p * s->w * w; i < s->h * s->w * w; i++) dx[i] = 0.0f;
}

/* pool_forward and pool_backward walk the windows once for both pools;
 * the kind is a constant in each kernel below, and forcing the walk inline
 * there gives every kernel a loop specialized to its pool, as a separate
 * hand-written loop would be. GCC 12 otherwise specializes the walk
 * only after optimizing it as a whole, and the average pool forward ran
 * about a quarter slower. */
typedef enum pool_kind { POOL_MAX, POOL_AVG } pool_kind;

/* The forward of both windowed pools: y[window] = its maximum
 * (window_max, 0 when empty) or its mean (window_mean). */
static inline __attribute__((always_inline)) brg_status pool_forward(const brg_op *op, pool_kind kind, int64_t st)
{
    const brg_pool_params *pp = &op->p.pool;
    pool_shape s = pool_shape_of(op->in[0], op->out[0]);
    const float *x = op->in[0]->data;
    float *y = op->out[0]->data;
    if (kind == POOL_AVG && is_box_pool(pp, &s)) return box_pool(op, &s, x, y, 0, st);
    const int two = kind == POOL_MAX && st == 1 && is_2x2_stride_2(pp);
    const int threads = brg_cpu_kernel_threads(s.planes * s.h * s.w);
    BRG_CPU_PARALLEL_FOR(threads)
    for (int64_t pl = 0; pl < s.planes; pl++) {
        const float *xp = x + plane_at(&s, pl, s.h * s.w, st);
        float *yp = y + plane_at(&s, pl, s.p * s.q, st);
        if (two) {
            maxpool2x2_forward_plane(xp, yp, &s, 1);
            continue;
        }
        for (int64_t oh = 0; oh < s.p; oh++) {
            int64_t h0, h1;
            window_span(oh, pp->stride_h, pp->pad_h, pp->kernel_h, s.h, &h0, &h1);
            for (int64_t ow = 0; ow < s.q; ow++) {
                int64_t w0, w1;
                window_span(ow, pp->stride_w, pp->pad_w, pp->kernel_w, s.w, &w0, &w1);
                if (kind == POOL_MAX)
                    yp[(oh * s.q + ow) * st] = h0 < h1 && w0 < w1 ? window_max(xp, s.w, h0, h1, w0, w1, st) : 0.0f;
                else
                    yp[(oh * s.q + ow) * st] = window_mean(pp, xp, s.w, h0, h1, w0, w1, st);
            }
        }
    }
    return BRG_OK;
}

/* The backward of both windowed pools, dy to dx (op->out[0]). Max pool
 * (x in in[0], dy in in[2]): dx[argmax of each window] += dy of that
 * window. The argmax is recomputed from x rather than matched against y,
 * so ties and overlapping windows are resolved exactly as in the forward;
 * y (in[1]) is not read. Overlapping windows that share an argmax add up.
 * Average pool (dy in in[0]): window_spread. Without accumulate, dx is
 * cleared first; with it, the gradients land on top of what dx holds. */
static inline __attribute__((always_inline)) brg_status pool_backward(const brg_op *op, pool_kind kind, int64_t st)
{
    const brg_pool_params *pp = &op->p.pool;
    const brg_tensor *dyt = kind == POOL_MAX ? op->in[2] : op->in[0];
    pool_shape s = pool_shape_of(op->out[0], dyt);
    const float *x = kind == POOL_MAX ? op->in[0]->data : NULL;
    const float *dy = dyt->data;
    float *dx = op->out[0]->data;
    if (kind == POOL_MAX && st == 1 && is_2x2_stride_2(pp)) {
        const int threads = brg_cpu_kernel_threads(s.planes * s.h * s.w);
        BRG_CPU_PARALLEL_FOR(threads)
        for (int64_t pl = 0; pl < s.planes; pl++) {
            const int64_t in_at = pl * s.h * s.w, out_at = pl * s.p * s.q;
            maxpool2x2_backward_plane(x + in_at, dy + out_at, dx + in_at, &s, op->accumulate, 1);
        }
        return BRG_OK;
    }
    if (kind == POOL_AVG && is_box_pool(pp, &s)) return box_pool(op, &s, dy, dx, 1, st);
    if (!op->accumulate && s.planes * s.h * s.w > 0) memset(dx, 0, (size_t)(s.planes * s.h * s.w) * sizeof *dx);
    const int threads = brg_cpu_kernel_threads(s.planes * s.h * s.w);
    BRG_CPU_PARALLEL_FOR(threads)
    for (int64_t pl = 0; pl < s.planes; pl++) {
        const float *dyp = dy + plane_at(&s, pl, s.p * s.q, st);
        float *dxp = dx + plane_at(&s, pl, s.h * s.w, st);
        for (int64_t oh = 0; oh < s.p; oh++) {
            int64_t h0, h1;
            window_span(oh, pp->stride_h, pp->pad_h, pp->kernel_h, s.h, &h0, &h1);
            for (int64_t ow = 0; ow < s.q; ow++) {
                int64_t w0, w1;
                window_span(ow, pp->stride_w, pp->pad_w, pp->kernel_w, s.w, &w0, &w1);
                if (kind == POOL_AVG)
                    window_spread(pp, dxp, s.w, h0, h1, w0, w1, dyp[(oh * s.q + ow) * st], st);
                else if (h0 < h1 && w0 < w1)
                    dxp[window_argmax(x + plane_at(&s, pl, s.h * s.w, st), s.w, h0, h1, w0, w1, st) * st] +=
                        dyp[(oh * s.q + ow) * st];
            }
        }
    }
    return BRG_OK;
}

/* ---- blocked tensors a pixel at a time ----
 *
 * A blocked plane holds w channels side by side at each position (a
 * "pixel" of w floats), so the kernels below walk the same windows as the
 * plain ones and do each step for the w channels at once, in loops of a
 * constant width that vectorize across the channels. Per channel the
 * arithmetic and its order are the plain kernels', so the bits are too.
 * Box pools whose rows of pixels would not fit the row buffers take the
 * per-channel walk (the step st above). The box pools' plane is shared:
 * box_pool_plane with px = w. */

/* Group planes of a blocked shape, and where plane gp starts (extent
 * positions of w floats each). */
static int64_t px_planes(const pool_shape *s, int w) { return s->planes / w; }
static int64_t px_at(int64_t gp, int64_t extent, int w) { return gp * extent * w; }

POOL_INLINE void px_forward_plane(const brg_pool_params *pp, const pool_shape *s, const float *xp, float *yp,
                                  pool_kind kind, const int w)
{
    for (int64_t oh = 0; oh < s->p; oh++) {
        int64_t h0, h1;
        window_span(oh, pp->stride_h, pp->pad_h, pp->kernel_h, s->h, &h0, &h1);
        for (int64_t ow = 0; ow < s->q; ow++) {
            int64_t w0, w1;
            window_span(ow, pp->stride_w, pp->pad_w, pp->kernel_w, s->w, &w0, &w1);
            float *out = yp + (oh * s->q + ow) * w;
            float acc[BRG_MAX_BLOCK];
            if (kind == POOL_MAX) {
                if (!(h0 < h1 && w0 < w1)) {
                    for (int k = 0; k < w; k++) out[k] = 0.0f;
                    continue;
                }
                for (int k = 0; k < w; k++) acc[k] = xp[(h0 * s->w + w0) * w + k];
                for (int64_t ih = h0; ih < h1; ih++)
                    for (int64_t iw = w0; iw < w1; iw++) {
                        const float *v = xp + (ih * s->w + iw) * w;
                        for (int k = 0; k < w; k++) acc[k] = v[k] > acc[k] ? v[k] : acc[k];
                    }
                for (int k = 0; k < w; k++) out[k] = acc[k];
            } else {
                for (int k = 0; k < w; k++) acc[k] = 0.0f;
                for (int64_t ih = h0; ih < h1; ih++)
                    for (int64_t iw = w0; iw < w1; iw++) {
                        const float *v = xp + (ih * s->w + iw) * w;
                        for (int k = 0; k < w; k++) acc[k] += v[k];
                    }
                const float div = avg_divisor(pp, h0, h1, w0, w1);
                for (int k = 0; k < w; k++) out[k] = div > 0.0f ? acc[k] / div : 0.0f;
            }
        }
    }
}

/* The backward of one group plane: max pool's dy at each channel's own
 * argmax (window_argmax's choice: the first strict maximum in row-major
 * order), average pool's dy / divisor over the window; dx already cleared
 * or holding what accumulate adds to. */
POOL_INLINE void px_backward_plane(const brg_pool_params *pp, const pool_shape *s, const float *xp, const float *dyp,
                                 float *dxp, pool_kind kind, const int w)
{
    for (int64_t oh = 0; oh < s->p; oh++) {
        int64_t h0, h1;
        window_span(oh, pp->stride_h, pp->pad_h, pp->kernel_h, s->h, &h0, &h1);
        for (int64_t ow = 0; ow < s->q; ow++) {
            int64_t w0, w1;
            window_span(ow, pp->stride_w, pp->pad_w, pp->kernel_w, s->w, &w0, &w1);
            const float *g = dyp + (oh * s->q + ow) * w;
            if (kind == POOL_AVG) {
                const float div = avg_divisor(pp, h0, h1, w0, w1);
                if (!(div > 0.0f)) continue;
                float share[BRG_MAX_BLOCK];
                for (int k = 0; k < w; k++) share[k] = g[k] / div;
                for (int64_t ih = h0; ih < h1; ih++)
                    for (int64_t iw = w0; iw < w1; iw++) {
                        float *d = dxp + (ih * s->w + iw) * w;
                        for (int k = 0; k < w; k++) d[k] += share[k];
                    }
                continue;
            }
            if (!(h0 < h1 && w0 < w1)) continue;
            int64_t best[BRG_MAX_BLOCK];
            float best_v[BRG_MAX_BLOCK];
            for (int k = 0; k < w; k++) {
                best[k] = h0 * s->w + w0;
                best_v[k] = xp[best[k] * w + k];
            }
            for (int64_t ih = h0; ih < h1; ih++)
                for (int64_t iw = w0; iw < w1; iw++) {
                    const int64_t at = ih * s->w + iw;
                    const float *v = xp + at * w;
                    for (int k = 0; k < w; k++) {
                        const int64_t win = -(int64_t)(v[k] > best_v[k]);
                        best[k] = (at & win) | (best[k] & ~win);
                        best_v[k] = v[k] > best_v[k] ? v[k] : best_v[k];
                    }
                }
            for (int k = 0; k < w; k++) dxp[best[k] * w + k] += g[k];
        }
    }
}

static int px_box_fits(const pool_shape *s, int w) { return s->w * w <= BOX_MAX; }

/* The blocked kernels for block w (8, 16, or another width). */
POOL_INLINE brg_status px_forward(const brg_op *op, pool_kind kind, const int w)
{
    const brg_pool_params *pp = &op->p.pool;
    pool_shape s = pool_shape_of(op->in[0], op->out[0]);
    if (kind == POOL_AVG && is_box_pool(pp, &s) && !px_box_fits(&s, w)) return pool_forward(op, kind, w);
    const float *x = op->in[0]->data;
    float *y = op->out[0]->data;
    const int box = kind == POOL_AVG && is_box_pool(pp, &s);
    const int two = kind == POOL_MAX && is_2x2_stride_2(pp);
    const int threads = brg_cpu_kernel_threads(s.planes * s.h * s.w);
    BRG_CPU_PARALLEL_FOR(threads)
    for (int64_t gp = 0; gp < px_planes(&s, w); gp++) {
        const float *xp = x + px_at(gp, s.h * s.w, w);
        float *yp = y + px_at(gp, s.p * s.q, w);
        if (box) box_pool_plane(pp, &s, xp, yp, 0, 0, 1, w);
        else if (two) maxpool2x2_forward_plane(xp, yp, &s, w);
        else px_forward_plane(pp, &s, xp, yp, kind, w);
    }
    return BRG_OK;
}

POOL_INLINE brg_status px_backward(const brg_op *op, pool_kind kind, const int w)
{
    const brg_pool_params *pp = &op->p.pool;
    const brg_tensor *dyt = kind == POOL_MAX ? op->in[2] : op->in[0];
    pool_shape s = pool_shape_of(op->out[0], dyt);
    const int box = kind == POOL_AVG && is_box_pool(pp, &s);
    if (box && !px_box_fits(&s, w)) return pool_backward(op, kind, w);
    const float *x = kind == POOL_MAX ? op->in[0]->data : NULL;
    const float *dy = dyt->data;
    float *dx = op->out[0]->data;
    const int two = kind == POOL_MAX && is_2x2_stride_2(pp);
    if (!two && !box && !op->accumulate && s.planes * s.h * s.w > 0)
        memset(dx, 0, (size_t)(s.planes * s.h * s.w) * sizeof *dx);
    const int threads = brg_cpu_kernel_threads(s.planes * s.h * s.w);
    BRG_CPU_PARALLEL_FOR(threads)
    for (int64_t gp = 0; gp < px_planes(&s, w); gp++) {
        const int64_t in_at = px_at(gp, s.h * s.w, w), out_at = px_at(gp, s.p * s.q, w);
        if (two) maxpool2x2_backward_plane(x + in_at, dy + out_at, dx + in_at, &s, op->accumulate, w);
        else if (box) box_pool_plane(pp, &s, dy + out_at, dx + in_at, 1, op->accumulate, 1, w);
        else px_backward_plane(pp, &s, x ? x + in_at : NULL, dy + out_at, dx + in_at, kind, w);
    }
    return BRG_OK;
}

/* A pool kernel: plain (the step a constant 1) or blocked (a pixel at a
 * time, the usual blocks with a constant width); kind and backward are
 * constants at each call, so each kernel gets its own loops. */
static inline __attribute__((always_inline)) brg_status pool_kernel(const brg_op *op, pool_kind kind, int backward)
{
    const int b = (backward ? op->out[0] : op->in[0])->block;
    if (!b) return backward ? pool_backward(op, kind, 1) : pool_forward(op, kind, 1);
    if (b == 8) return backward ? px_backward(op, kind, 8) : px_forward(op, kind, 8);
    if (b == 16) return backward ? px_backward(op, kind, 16) : px_forward(op, kind, 16);
    return backward ? px_backward(op, kind, b) : px_forward(op, kind, b);
}

brg_status brg_cpu_maxpool_forward(brg_device *dev BRG_UNUSED, const brg_op *op)
{
    return pool_kernel(op, POOL_MAX, 0);
}
brg_status brg_cpu_maxpool_backward(brg_device *dev BRG_UNUSED, const brg_op *op)
{
    return pool_kernel(op, POOL_MAX, 1);
}
brg_status brg_cpu_avgpool_forward(brg_device *dev BRG_UNUSED, const brg_op *op)
{
    return pool_kernel(op, POOL_AVG, 0);
}
brg_status brg_cpu_avgpool_backward(brg_device *dev BRG_UNUSED, const brg_op *op)
{
    return pool_kernel(op, POOL_AVG, 1);
}

/* y[n, c] = mean of the H*W plane, summed in double: global pools see whole
 * feature maps (e.g. 8x8 to 14x14), where a float running sum would lose
 * digits for no gain in speed. A blocked x (brigade/tensor.h) is walked a
 * group of w channels at a time, each channel summed in the same order. */
brg_status brg_cpu_global_avgpool_forward(brg_device *dev BRG_UNUSED, const brg_op *op)
{
    const brg_tensor *xt = op->in[0];
    const int w = xt->block ? xt->block : 1;
    const int64_t groups = xt->shape[0] * xt->shape[1] / w; /* (sample, group) pairs */
    const int64_t hw = xt->shape[2] * xt->shape[3];
    const float *x = xt->data;
    float *y = op->out[0]->data;
    const int threads = brg_cpu_kernel_threads(groups * w * hw);
    BRG_CPU_PARALLEL_FOR(threads)
    for (int64_t gr = 0; gr < groups; gr++) {
        const float *xp = x + gr * w * hw;
        if (w == 1) {
            double sum = 0.0;
            for (int64_t i = 0; i < hw; i++) sum += xp[i];
            y[gr] = (float)(sum / (double)hw);
            continue;
        }
        double sum[BRG_MAX_BLOCK] = {0.0};
        for (int64_t i = 0; i < hw; i++)
            for (int k = 0; k < w; k++) sum[k] += xp[i * w + k];
        for (int k = 0; k < w; k++) y[gr * w + k] = (float)(sum[k] / (double)hw);
    }
    return BRG_OK;
}

/* dx[n, c, :, :] = dy[n, c] / (H*W), added when accumulating. */
brg_status brg_cpu_global_avgpool_backward(brg_device *dev BRG_UNUSED, const brg_op *op)
{
    const brg_tensor *dxt = op->out[0];
    const int w = dxt->block ? dxt->block : 1;
    const int64_t groups = dxt->shape[0] * dxt->shape[1] / w;
    const int64_t hw = dxt->shape[2] * dxt->shape[3];
    const float *dy = op->in[0]->data;
    float *dx = dxt->data;
    const int threads = brg_cpu_kernel_threads(groups * w * hw);
    BRG_CPU_PARALLEL_FOR(threads)
    for (int64_t gr = 0; gr < groups; gr++) {
        float *dxp = dx + gr * w * hw;
        if (w == 1) {
            const float g = (float)((double)dy[gr] / (double)hw);
            if (op->accumulate) {
                for (int64_t i = 0; i < hw; i++) dxp[i] += g;
            } else {
                for (int64_t i = 0; i < hw; i++) dxp[i] = g;
            }
            continue;
        }
        float g[BRG_MAX_BLOCK];
        for (int k = 0; k < w; k++) g[k] = (float)((double)dy[gr * w + k] / (double)hw);
        for (int64_t i = 0; i < hw; i++)
            for (int k = 0; k < w; k++) dxp[i * w + k] = op->accumulate ? dxp[i * w + k] + g[k] : g[k];
    }
    return BRG_OK;
}
