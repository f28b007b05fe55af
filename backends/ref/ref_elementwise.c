/* Reference elementwise ops, the channel concatenation and the optimizer
 * steps. */
#include <math.h>

#include "base/rng.h"
#include "ref-kernels.h"

void brg_ref_relu_forward(int64_t count, const double *x, double *y)
{
    for (int64_t i = 0; i < count; i++) y[i] = x[i] > 0.0 ? x[i] : 0.0;
}

void brg_ref_concat_forward(int64_t n, int64_t hw, int parts, const int64_t *channels, const double *const *xs,
                            double *y)
{
    int64_t total = 0;
    for (int p = 0; p < parts; p++) total += channels[p];
    for (int64_t ni = 0; ni < n; ni++) {
        int64_t c0 = 0;
        for (int p = 0; p < parts; p++) {
            for (int64_t ci = 0; ci < channels[p]; ci++)
                for (int64_t i = 0; i < hw; i++)
                    y[(ni * total + c0 + ci) * hw + i] = xs[p][(ni * channels[p] + ci) * hw + i];
            c0 += channels[p];
        }
    }
}

void brg_ref_add_forward(int64_t count, const double *a, const double *b, double *y)
{
    for (int64_t i = 0; i < count; i++) y[i] = a[i] + b[i];
}

void brg_ref_dropout_forward(int64_t count, float rate, uint64_t seed, uint64_t offset, const double *x, double *y)
{
    double scale = 1.0 / (1.0 - (double)rate);
    for (int64_t i = 0; i < count; i++)
        y[i] = brg_dropout_keep_inline(seed, offset + (uint64_t)i, rate) ? x[i] * scale : 0.0;
}

void brg_ref_sgd_update(int64_t count, double lr, double momentum, double weight_decay, const double *grad,
                        double *param, double *velocity)
{
    for (int64_t i = 0; i < count; i++) {
        double g = grad[i] + weight_decay * param[i];
        if (velocity && momentum > 0.0) {
            velocity[i] = momentum * velocity[i] + g;
            g = velocity[i];
        }
        param[i] -= lr * g;
    }
}

void brg_ref_adam_update(int64_t count, double lr, double beta1, double beta2, double eps, double weight_decay,
                         int64_t step, const double *grad, double *param, double *m, double *v)
{
    double c1 = 1.0 - pow(beta1, (double)step);
    double c2 = 1.0 - pow(beta2, (double)step);
    for (int64_t i = 0; i < count; i++) {
        double g = grad[i] + weight_decay * param[i];
        m[i] = beta1 * m[i] + (1.0 - beta1) * g;
        v[i] = beta2 * v[i] + (1.0 - beta2) * g * g;
        param[i] -= lr * (m[i] / c1) / (sqrt(v[i] / c2) + eps);
    }
}
