/* CPU kernels: softmax cross-entropy over rows of logits[N, K]. */
#include <math.h>
#include <stdint.h>

#include "cpu-kernels.h"
#include "base/internal.h"

/* BRG_OK if every label is a class index in [0, k); otherwise an
 * invalid-argument error naming the first bad row. Checked before any
 * output is written, so a bad batch leaves the outputs untouched. */
static brg_status check_labels(const brg_op *op, const int32_t *labels, int64_t rows, int64_t k)
{
    for (int64_t r = 0; r < rows; r++)
        if (labels[r] < 0 || labels[r] >= k)
            return brg_error(BRG_ERR_INVALID_ARGUMENT, "%s: row %lld has label %d, outside the %lld classes [0, %lld)",
                             brg_op_kind_name(op->kind), (long long)r, (int)labels[r], (long long)k, (long long)k);
    return BRG_OK;
}

/* probs = softmax of each row; loss[0] = mean over rows of
 * -log probs[label]. The row maximum is subtracted before exp so nothing
 * overflows, and the loss is taken from the log-sum-exp
 * (max + log sum exp(z - max) - z[label]) in double rather than from
 * log(probs[label]), which is -inf once a probability underflows. */
brg_status brg_cpu_softmax_xent_forward(brg_device *dev BRG_UNUSED, const brg_op *op)
{
    const brg_tensor *lt = op->in[0];
    const int64_t rows = lt->shape[0], k = lt->shape[1];
    const float *logits = lt->data;
    const int32_t *labels = op->in[1]->data;
    float *loss = op->out[0]->data;
    float *probs = op->out[1]->data;
    BRG_CHECK(check_labels(op, labels, rows, k));

    double total = 0.0;
    for (int64_t r = 0; r < rows; r++) {
        const float *z = logits + r * k;
        float *pr = probs + r * k;
        float zmax = z[0];
        for (int64_t j = 1; j < k; j++)
            if (z[j] > zmax) zmax = z[j];
        double sum = 0.0;
        for (int64_t j = 0; j < k; j++) {
            pr[j] = expf(z[j] - zmax);
            sum += pr[j];
        }
        const float inv = (float)(1.0 / sum);
        for (int64_t j = 0; j < k; j++) pr[j] *= inv;
        total += (double)zmax + log(sum) - (double)z[labels[r]];
    }
    loss[0] = rows > 0 ? (float)(total / (double)rows) : 0.0f;
    return BRG_OK;
}

/* dlogits = (probs - onehot(label)) * grad_scale, row by row; added into
 * dlogits when accumulating. dlogits may alias probs. */
brg_status brg_cpu_softmax_xent_backward(brg_device *dev BRG_UNUSED, const brg_op *op)
{
    const brg_tensor *pt = op->in[0];
    const int64_t rows = pt->shape[0], k = pt->shape[1];
    const float *probs = pt->data;
    const int32_t *labels = op->in[1]->data;
    float *dlogits = op->out[0]->data;
    const float scale = op->p.xent.grad_scale;
    BRG_CHECK(check_labels(op, labels, rows, k));

    for (int64_t r = 0; r < rows; r++) {
        const float *pr = probs + r * k;
        float *dr = dlogits + r * k;
        const int64_t label = labels[r];
        for (int64_t j = 0; j < k; j++) {
            float g = (pr[j] - (j == label ? 1.0f : 0.0f)) * scale;
            if (op->accumulate)
                dr[j] += g;
            else
                dr[j] = g;
        }
    }
    return BRG_OK;
}
