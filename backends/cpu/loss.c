/* CPU kernels: softmax cross-entropy over the classes of logits [N, K]
 * (rows) or [N, K, H, W] (every pixel: class j of pixel p at j * P + p),
 * with an ignore label. */
#include <math.h>
#include <stdint.h>

#include "cpu-kernels.h"
#include "base/internal.h"

/* The loss's geometry: n samples, k classes, px pixels (1 for rows). */
static void geometry(const brg_tensor *t, int64_t *n, int64_t *k, int64_t *px)
{
    *n = t->shape[0];
    *k = t->shape[1];
    *px = t->ndim == 4 ? t->shape[2] * t->shape[3] : 1;
}

/* Whether label y counts nowhere: it equals the op's ignore label, and
 * that is not a class. */
static int ignored(const brg_op *op, int32_t y, int64_t k)
{
    const int32_t ig = op->p.xent.ignore_label;
    return y == ig && (ig < 0 || ig >= k);
}

/* BRG_OK if every label is a class index in [0, k) or ignored; otherwise
 * an invalid-argument error naming the first bad one. Checked before any
 * output is written, so a bad batch leaves the outputs untouched. */
static brg_status check_labels(const brg_op *op, const int32_t *labels, int64_t n, int64_t px, int64_t k)
{
    for (int64_t i = 0; i < n * px; i++) {
        const int32_t y = labels[i];
        if ((y >= 0 && y < k) || ignored(op, y, k)) continue;
        if (px == 1)
            return brg_error(BRG_ERR_INVALID_ARGUMENT, "%s: row %lld has label %d, outside the %lld classes [0, %lld)",
                             brg_op_kind_name(op->kind), (long long)i, (int)y, (long long)k, (long long)k);
        return brg_error(BRG_ERR_INVALID_ARGUMENT,
                         "%s: sample %lld, pixel %lld has label %d, outside the %lld classes [0, %lld) and not the "
                         "ignore label %d",
                         brg_op_kind_name(op->kind), (long long)(i / px), (long long)(i % px), (int)y, (long long)k,
                         (long long)k, (int)op->p.xent.ignore_label);
    }
    return BRG_OK;
}

/* probs = softmax over the classes at each row or pixel; loss[0] = mean
 * over the counted labels of -log probs[label]. The maximum is subtracted
 * before exp so nothing overflows, and the loss is taken from the
 * log-sum-exp (max + log sum exp(z - max) - z[label]) in double rather
 * than from log(probs[label]), which is -inf once a probability
 * underflows. */
brg_status brg_cpu_softmax_xent_forward(brg_device *dev BRG_UNUSED, const brg_op *op)
{
    int64_t n, k, px;
    geometry(op->in[0], &n, &k, &px);
    const float *logits = op->in[0]->data;
    const int32_t *labels = op->in[1]->data;
    float *loss = op->out[0]->data;
    float *probs = op->out[1]->data;
    BRG_CHECK(check_labels(op, labels, n, px, k));

    double total = 0.0;
    int64_t counted = 0;
    for (int64_t i = 0; i < n; i++)
        for (int64_t p = 0; p < px; p++) {
            const float *z = logits + i * k * px + p;
            float *pr = probs + i * k * px + p;
            float zmax = z[0];
            for (int64_t j = 1; j < k; j++)
                if (z[j * px] > zmax) zmax = z[j * px];
            double sum = 0.0;
            for (int64_t j = 0; j < k; j++) {
                pr[j * px] = expf(z[j * px] - zmax);
                sum += pr[j * px];
            }
            const float inv = (float)(1.0 / sum);
            for (int64_t j = 0; j < k; j++) pr[j * px] *= inv;
            const int32_t y = labels[i * px + p];
            if (ignored(op, y, k)) continue;
            total += (double)zmax + log(sum) - (double)z[y * px];
            counted++;
        }
    loss[0] = counted > 0 ? (float)(total / (double)counted) : 0.0f;
    return BRG_OK;
}

/* dlogits = (probs - onehot(label)) * grad_scale at each counted row or
 * pixel, 0 at an ignored one; added into dlogits when accumulating.
 * dlogits may alias probs. */
brg_status brg_cpu_softmax_xent_backward(brg_device *dev BRG_UNUSED, const brg_op *op)
{
    int64_t n, k, px;
    geometry(op->in[0], &n, &k, &px);
    const float *probs = op->in[0]->data;
    const int32_t *labels = op->in[1]->data;
    float *dlogits = op->out[0]->data;
    const float scale = op->p.xent.grad_scale;
    BRG_CHECK(check_labels(op, labels, n, px, k));

    for (int64_t i = 0; i < n; i++)
        for (int64_t p = 0; p < px; p++) {
            const float *pr = probs + i * k * px + p;
            float *dr = dlogits + i * k * px + p;
            const int32_t label = labels[i * px + p];
            const int skip = ignored(op, label, k);
            for (int64_t j = 0; j < k; j++) {
                const float g = skip ? 0.0f : (pr[j * px] - (j == label ? 1.0f : 0.0f)) * scale;
                if (op->accumulate)
                    dr[j * px] += g;
                else
                    dr[j * px] = g;
            }
        }
    return BRG_OK;
}
