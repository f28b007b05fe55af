/* Reference reductions to one int32: correct predictions and the finite
 * check. */
#include <math.h>

#include "ref-kernels.h"

int64_t brg_ref_count_correct(int64_t n, int64_t k, int64_t pixels, const double *scores, const int32_t *labels)
{
    int64_t correct = 0;
    for (int64_t i = 0; i < n; i++)
        for (int64_t p = 0; p < pixels; p++) {
            const double *row = scores + i * k * pixels + p; /* class j at row[j * pixels] */
            int64_t best = 0;
            for (int64_t j = 1; j < k; j++)
                if (row[j * pixels] > row[best * pixels]) best = j;
            correct += best == labels[i * pixels + p];
        }
    return correct;
}

int brg_ref_all_finite(int64_t count, const double *x)
{
    for (int64_t i = 0; i < count; i++)
        if (!isfinite(x[i])) return 0;
    return 1;
}
