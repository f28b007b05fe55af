/* Reference 2-D convolution (cross-correlation, as in every framework) and
 * the window geometry shared with the pools. */
#include "ref-kernels.h"

int brg_ref_window_init(brg_ref_window *g, int64_t n, int64_t c, int64_t h, int64_t w, int64_t r, int64_t s,
                        int stride_h, int stride_w, int pad_h, int pad_w)
{
    g->n = n;
    g->c = c;
    g->h = h;
    g->w = w;
    g->r = r;
    g->s = s;
    g->stride_h = stride_h;
    g->stride_w = stride_w;
    g->pad_h = pad_h;
    g->pad_w = pad_w;
    g->p = 0;
    g->q = 0;
    if (n < 1 || c < 1 || h < 1 || w < 1 || r < 1 || s < 1 || stride_h < 1 || stride_w < 1 || pad_h < 0 ||
        pad_w < 0)
        return 0;
    int64_t span_h = h + 2 * (int64_t)pad_h - r;
    int64_t span_w = w + 2 * (int64_t)pad_w - s;
    if (span_h < 0 || span_w < 0) return 0;
    g->p = span_h / stride_h + 1;
    g->q = span_w / stride_w + 1;
    return 1;
}

void brg_ref_conv2d_forward(const brg_ref_window *g, int64_t k, const double *x, const double *w, const double *b,
                            double *y)
{
    for (int64_t ni = 0; ni < g->n; ni++)
        for (int64_t ki = 0; ki < k; ki++)
            for (int64_t pi = 0; pi < g->p; pi++)
                for (int64_t qi = 0; qi < g->q; qi++) {
                    double acc = b ? b[ki] : 0.0;
                    for (int64_t ci = 0; ci < g->c; ci++)
                        for (int64_t ri = 0; ri < g->r; ri++) {
                            int64_t hi = pi * g->stride_h - g->pad_h + ri;
                            if (hi < 0 || hi >= g->h) continue;
                            for (int64_t si = 0; si < g->s; si++) {
                                int64_t wi = qi * g->stride_w - g->pad_w + si;
                                if (wi < 0 || wi >= g->w) continue;
                                acc += x[((ni * g->c + ci) * g->h + hi) * g->w + wi] *
                                       w[((ki * g->c + ci) * g->r + ri) * g->s + si];
                            }
                        }
                    y[((ni * k + ki) * g->p + pi) * g->q + qi] = acc;
                }
}
