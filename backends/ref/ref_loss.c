/* Reference softmax cross-entropy, with the usual max subtraction so the
 * exponentials cannot overflow. */
#include <math.h>

#include "ref-kernels.h"

double brg_ref_softmax_xent_forward(int64_t n, int64_t k, const double *logits, const int32_t *labels,
                                    double *probs)
{
    double total = 0.0;
    for (int64_t ni = 0; ni < n; ni++) {
        const double *row = logits + ni * k;
        double mx = row[0];
        for (int64_t j = 1; j < k; j++)
            if (row[j] > mx) mx = row[j];
        double sum = 0.0;
        for (int64_t j = 0; j < k; j++) sum += exp(row[j] - mx);
        double lse = mx + log(sum);
        if (probs)
            for (int64_t j = 0; j < k; j++) probs[ni * k + j] = exp(row[j] - lse);
        total += lse - row[labels[ni]];
    }
    return total / (double)n;
}
