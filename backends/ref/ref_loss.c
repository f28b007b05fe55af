/* Reference softmax cross-entropy, with the usual max subtraction so the
 * exponentials cannot overflow; per pixel for logits [n, k, H, W]. */
#include <math.h>

#include "ref-kernels.h"

double brg_ref_softmax_xent_forward(int64_t n, int64_t k, int64_t pixels, const double *logits, const int32_t *labels,
                                    int32_t ignore_label, double *probs)
{
    const int ignoring = ignore_label < 0 || ignore_label >= k;
    double total = 0.0;
    int64_t counted = 0;
    for (int64_t ni = 0; ni < n; ni++)
        for (int64_t p = 0; p < pixels; p++) {
            const double *z = logits + ni * k * pixels + p; /* class j at z[j * pixels] */
            double mx = z[0];
            for (int64_t j = 1; j < k; j++)
                if (z[j * pixels] > mx) mx = z[j * pixels];
            double sum = 0.0;
            for (int64_t j = 0; j < k; j++) sum += exp(z[j * pixels] - mx);
            const double lse = mx + log(sum);
            if (probs)
                for (int64_t j = 0; j < k; j++) probs[ni * k * pixels + j * pixels + p] = exp(z[j * pixels] - lse);
            const int32_t y = labels[ni * pixels + p];
            if (ignoring && y == ignore_label) continue;
            total += lse - z[y * pixels];
            counted++;
        }
    return counted ? total / (double)counted : 0.0;
}
