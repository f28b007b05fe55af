/* Optimizer updates, elementwise over one parameter tensor. Conventions
 * follow PyTorch's SGD and Adam (see brigade/ops.h), so results can be
 * compared with it directly. */
#include <math.h>

#include "cpu-kernels.h"

brg_status brg_cpu_sgd_update(brg_device *dev BRG_UNUSED, const brg_op *op)
{
    const brg_optim_params *o = &op->p.optim;
    const float *g = op->in[0]->data;
    float *w = op->out[0]->data;
    float *vel = op->n_out > 1 && op->out[1] ? op->out[1]->data : NULL;
    const int64_t n = brg_tensor_numel(op->in[0]);
    const float lr = o->lr, mu = o->momentum, wd = o->weight_decay;
    for (int64_t i = 0; i < n; i++) {
        float d = g[i] + wd * w[i];
        if (vel && mu > 0.0f) {
            vel[i] = mu * vel[i] + d;
            d = vel[i];
        }
        w[i] -= lr * d;
    }
    return BRG_OK;
}

brg_status brg_cpu_adam_update(brg_device *dev BRG_UNUSED, const brg_op *op)
{
    const brg_optim_params *o = &op->p.optim;
    const float *g = op->in[0]->data;
    float *w = op->out[0]->data, *m = op->out[1]->data, *v = op->out[2]->data;
    const int64_t n = brg_tensor_numel(op->in[0]);
    const float b1 = o->beta1, b2 = o->beta2, eps = o->epsilon, wd = o->weight_decay;
    /* Bias corrections in double: 1 - b^t loses digits in float for small t. */
    const double c1 = 1.0 - pow((double)b1, (double)o->step);
    const double c2 = 1.0 - pow((double)b2, (double)o->step);
    const float step = (float)((double)o->lr / c1);
    const float inv_sqrt_c2 = (float)(1.0 / sqrt(c2));
    for (int64_t i = 0; i < n; i++) {
        float d = g[i] + wd * w[i];
        m[i] = b1 * m[i] + (1.0f - b1) * d;
        v[i] = b2 * v[i] + (1.0f - b2) * d * d;
        w[i] -= step * m[i] / (sqrtf(v[i]) * inv_sqrt_c2 + eps);
    }
    return BRG_OK;
}
