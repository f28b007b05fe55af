/* Reference batch normalisation over NCHW: statistics per channel over the
 * batch and both spatial axes. Two passes (mean, then squared deviations),
 * which is exact enough in double for any input the checks use. */
#include <math.h>

#include "ref-kernels.h"

void brg_ref_batchnorm_train(int64_t n, int64_t c, int64_t hw, const double *x, const double *gamma,
                             const double *beta, double eps, double *y, double *mean, double *var, double *invstd)
{
    double m = (double)(n * hw);
    for (int64_t ci = 0; ci < c; ci++) {
        double sum = 0.0;
        for (int64_t ni = 0; ni < n; ni++)
            for (int64_t i = 0; i < hw; i++) sum += x[(ni * c + ci) * hw + i];
        double mu = sum / m;
        double ss = 0.0;
        for (int64_t ni = 0; ni < n; ni++)
            for (int64_t i = 0; i < hw; i++) {
                double d = x[(ni * c + ci) * hw + i] - mu;
                ss += d * d;
            }
        double v = ss / m;
        double is = 1.0 / sqrt(v + eps);
        double scale = gamma ? gamma[ci] : 1.0;
        double shift = beta ? beta[ci] : 0.0;
        for (int64_t ni = 0; ni < n; ni++)
            for (int64_t i = 0; i < hw; i++) {
                int64_t j = (ni * c + ci) * hw + i;
                y[j] = scale * (x[j] - mu) * is + shift;
            }
        if (mean) mean[ci] = mu;
        if (var) var[ci] = v;
        if (invstd) invstd[ci] = is;
    }
}

void brg_ref_batchnorm_running_update(int64_t c, int64_t m, double momentum, const double *mean,
                                      const double *var, double *running_mean, double *running_var)
{
    double unbias = (double)m / (double)(m - 1);
    for (int64_t ci = 0; ci < c; ci++) {
        running_mean[ci] = (1.0 - momentum) * running_mean[ci] + momentum * mean[ci];
        running_var[ci] = (1.0 - momentum) * running_var[ci] + momentum * var[ci] * unbias;
    }
}

void brg_ref_batchnorm_infer(int64_t n, int64_t c, int64_t hw, const double *x, const double *gamma,
                             const double *beta, const double *running_mean, const double *running_var, double eps,
                             double *y)
{
    for (int64_t ci = 0; ci < c; ci++) {
        double is = 1.0 / sqrt(running_var[ci] + eps);
        double scale = gamma ? gamma[ci] : 1.0;
        double shift = beta ? beta[ci] : 0.0;
        for (int64_t ni = 0; ni < n; ni++)
            for (int64_t i = 0; i < hw; i++) {
                int64_t j = (ni * c + ci) * hw + i;
                y[j] = scale * (x[j] - running_mean[ci]) * is + shift;
            }
    }
}
