/* Reference fully connected layer. */
#include "ref-kernels.h"

void brg_ref_linear_forward(int64_t n, int64_t in, int64_t out, const double *x, const double *w, const double *b,
                            double *y)
{
    for (int64_t ni = 0; ni < n; ni++)
        for (int64_t o = 0; o < out; o++) {
            double acc = b ? b[o] : 0.0;
            for (int64_t i = 0; i < in; i++) acc += x[ni * in + i] * w[o * in + i];
            y[ni * out + o] = acc;
        }
}
