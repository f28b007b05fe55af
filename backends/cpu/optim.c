/* Optimizer updates, elementwise over one parameter tensor. Conventions
 * follow PyTorch's SGD and Adam (see brigade/ops.h), so results can be
 * compared with it directly. */
#include <math.h>

#include "cpu-kernels.h"

/* Each part is a range of elements: the updates are elementwise, so a
 * tensor split over threads (brg_cpu_split) gives the same bits as one
 * pass, and a large parameter no longer leaves the other cores idle (an
 * SGD step of ResNet-18's 11.7M parameters streams about 230 MB). */
static void sgd_part(const brg_op *op, int64_t lo, int64_t len)
{
    const brg_optim_params *o = &op->p.optim;
    const float *g = (const float *)op->in[0]->data + lo;
    float *w = (float *)op->out[0]->data + lo;
    float *vel = op->n_out > 1 && op->out[1] ? (float *)op->out[1]->data + lo : NULL;
    const float lr = o->lr, mu = o->momentum, wd = o->weight_decay;
    if (vel && mu > 0.0f) {
        for (int64_t i = 0; i < len; i++) {
            vel[i] = mu * vel[i] + (g[i] + wd * w[i]);
            w[i] -= lr * vel[i];
        }
    } else {
        for (int64_t i = 0; i < len; i++) w[i] -= lr * (g[i] + wd * w[i]);
    }
}

brg_status brg_cpu_sgd_update(brg_device *dev BRG_UNUSED, const brg_op *op)
{
    brg_cpu_split(op, brg_tensor_numel(op->in[0]), sgd_part);
    return BRG_OK;
}

static void adam_part(const brg_op *op, int64_t lo, int64_t len)
{
    const brg_optim_params *o = &op->p.optim;
    const float *g = (const float *)op->in[0]->data + lo;
    float *w = (float *)op->out[0]->data + lo, *m = (float *)op->out[1]->data + lo,
          *v = (float *)op->out[2]->data + lo;
    const float b1 = o->beta1, b2 = o->beta2, eps = o->epsilon, wd = o->weight_decay;
    /* Bias corrections in double: 1 - b^t loses digits in float for small t. */
    const double c1 = 1.0 - pow((double)b1, (double)o->step);
    const double c2 = 1.0 - pow((double)b2, (double)o->step);
    const float step = (float)((double)o->lr / c1);
    const float inv_sqrt_c2 = (float)(1.0 / sqrt(c2));
    for (int64_t i = 0; i < len; i++) {
        float d = g[i] + wd * w[i];
        m[i] = b1 * m[i] + (1.0f - b1) * d;
        v[i] = b2 * v[i] + (1.0f - b2) * d * d;
        w[i] -= step * m[i] / (sqrtf(v[i]) * inv_sqrt_c2 + eps);
    }
}

brg_status brg_cpu_adam_update(brg_device *dev BRG_UNUSED, const brg_op *op)
{
    brg_cpu_split(op, brg_tensor_numel(op->in[0]), adam_part);
    return BRG_OK;
}
