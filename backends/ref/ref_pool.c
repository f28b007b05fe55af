/* Reference pools and upsampling. A pooling window position (pi, qi)
 * covers input rows pi*stride_h - pad_h + [0, r) and columns
 * qi*stride_w - pad_w + [0, s); positions outside the input are padding. */
#include "ref-kernels.h"

/* Tap (ri, si) of the window at output position (pi, qi): its index
 * hi * w + wi within the input plane, or -1 when it falls in the padding. */
static int64_t window_tap(const brg_ref_window *g, int64_t pi, int64_t qi, int64_t ri, int64_t si)
{
    int64_t hi = pi * g->stride_h - g->pad_h + ri;
    int64_t wi = qi * g->stride_w - g->pad_w + si;
    if (hi < 0 || hi >= g->h || wi < 0 || wi >= g->w) return -1;
    return hi * g->w + wi;
}

/* Index of the first real element of the window holding its maximum, in
 * row-major window order, or -1 if the window has no real element (cannot
 * happen for windows brg_op_validate accepts). */
static int64_t window_argmax(const brg_ref_window *g, const double *plane, int64_t pi, int64_t qi)
{
    int64_t best = -1;
    for (int64_t ri = 0; ri < g->r; ri++)
        for (int64_t si = 0; si < g->s; si++) {
            int64_t j = window_tap(g, pi, qi, ri, si);
            if (j < 0) continue;
            if (best < 0 || plane[j] > plane[best]) best = j; /* strict: the first maximum stays */
        }
    return best;
}

void brg_ref_maxpool_forward(const brg_ref_window *g, const double *x, double *y)
{
    for (int64_t plane = 0; plane < g->n * g->c; plane++) {
        const double *xp = x + plane * g->h * g->w;
        for (int64_t pi = 0; pi < g->p; pi++)
            for (int64_t qi = 0; qi < g->q; qi++) {
                int64_t j = window_argmax(g, xp, pi, qi);
                y[(plane * g->p + pi) * g->q + qi] = j < 0 ? 0.0 : xp[j];
            }
    }
}

void brg_ref_maxpool_backward(const brg_ref_window *g, const double *x, const double *dy, double *dx)
{
    for (int64_t i = 0; i < g->n * g->c * g->h * g->w; i++) dx[i] = 0.0;
    for (int64_t plane = 0; plane < g->n * g->c; plane++) {
        const double *xp = x + plane * g->h * g->w;
        for (int64_t pi = 0; pi < g->p; pi++)
            for (int64_t qi = 0; qi < g->q; qi++) {
                int64_t j = window_argmax(g, xp, pi, qi);
                if (j >= 0) dx[plane * g->h * g->w + j] += dy[(plane * g->p + pi) * g->q + qi];
            }
    }
}

void brg_ref_avgpool_forward(const brg_ref_window *g, int count_include_pad, const double *x, double *y)
{
    for (int64_t plane = 0; plane < g->n * g->c; plane++) {
        const double *xp = x + plane * g->h * g->w;
        for (int64_t pi = 0; pi < g->p; pi++)
            for (int64_t qi = 0; qi < g->q; qi++) {
                double sum = 0.0;
                int64_t real = 0;
                for (int64_t ri = 0; ri < g->r; ri++)
                    for (int64_t si = 0; si < g->s; si++) {
                        int64_t j = window_tap(g, pi, qi, ri, si);
                        if (j < 0) continue;
                        sum += xp[j];
                        real++;
                    }
                double count = count_include_pad ? (double)(g->r * g->s) : (double)real;
                y[(plane * g->p + pi) * g->q + qi] = count > 0 ? sum / count : 0.0;
            }
    }
}

void brg_ref_global_avgpool_forward(int64_t n, int64_t c, int64_t hw, const double *x, double *y)
{
    for (int64_t plane = 0; plane < n * c; plane++) {
        double sum = 0.0;
        for (int64_t i = 0; i < hw; i++) sum += x[plane * hw + i];
        y[plane] = sum / (double)hw;
    }
}

void brg_ref_upsample_forward(int64_t n, int64_t c, int64_t h, int64_t w, int factor, const double *x, double *y)
{
    int64_t oh = h * factor, ow = w * factor;
    for (int64_t plane = 0; plane < n * c; plane++)
        for (int64_t i = 0; i < oh; i++)
            for (int64_t j = 0; j < ow; j++)
                y[(plane * oh + i) * ow + j] = x[(plane * h + i / factor) * w + j / factor];
}
