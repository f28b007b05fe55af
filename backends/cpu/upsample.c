/* Nearest-neighbour upsampling by an integer factor (U-Net decoders).
 * Both passes go plane by plane, split over the device's share of the
 * cores (brg_cpu_kernel_threads): each plane is written by one thread, so
 * the bits do not depend on the thread count. */
#include <string.h>

#include "cpu-kernels.h"

brg_status brg_cpu_upsample_forward(brg_device *dev BRG_UNUSED, const brg_op *op)
{
    const brg_tensor *x = op->in[0], *y = op->out[0];
    const int f = op->p.upsample.factor;
    const int64_t planes = x->shape[0] * x->shape[1], h = x->shape[2], w = x->shape[3];
    const float *src = x->data;
    float *dst = y->data;
    const int threads = brg_cpu_kernel_threads(planes * h * w * f * f);
    BRG_CPU_PARALLEL_FOR(threads)
    for (int64_t p = 0; p < planes; p++) {
        const float *xp = src + p * h * w;
        float *yp = dst + p * h * w * f * f;
        for (int64_t i = 0; i < h; i++) {
            float *row = yp + i * f * w * f;
            for (int64_t j = 0; j < w; j++)
                for (int k = 0; k < f; k++) row[j * f + k] = xp[i * w + j];
            /* The other f - 1 output rows of this input row are copies. */
            for (int r = 1; r < f; r++) memcpy(row + r * w * f, row, (size_t)(w * f) * sizeof *row);
        }
    }
    return BRG_OK;
}

brg_status brg_cpu_upsample_backward(brg_device *dev BRG_UNUSED, const brg_op *op)
{
    const brg_tensor *dy = op->in[0], *dx = op->out[0];
    const int f = op->p.upsample.factor;
    const int64_t planes = dx->shape[0] * dx->shape[1], h = dx->shape[2], w = dx->shape[3];
    const float *src = dy->data;
    float *dst = dx->data;
    const int threads = brg_cpu_kernel_threads(planes * h * w * f * f);
    BRG_CPU_PARALLEL_FOR(threads)
    for (int64_t p = 0; p < planes; p++) {
        const float *gp = src + p * h * w * f * f;
        float *xp = dst + p * h * w;
        for (int64_t i = 0; i < h; i++)
            for (int64_t j = 0; j < w; j++) {
                float s = 0.0f;
                for (int r = 0; r < f; r++)
                    for (int k = 0; k < f; k++) s += gp[(i * f + r) * w * f + j * f + k];
                xp[i * w + j] = op->accumulate ? xp[i * w + j] + s : s;
            }
    }
    return BRG_OK;
}
