/* Fully connected layers on the CPU: one OpenBLAS sgemm per op.
 *
 *   forward          y[N,O]  = x[N,I] . w[O,I]^T (+ b)
 *   backward data    dx[N,I] (+)= dy[N,O] . w[O,I]
 *   backward weight  dw[O,I] (+)= dy^T . x,  db[O] (+)= column sums of dy
 *
 * x (and dx) may have any shape [N, ...]; it is read as its contiguous
 * [N, I] flattening, which brg_op_validate has checked.
 */
#include <limits.h>
#include <stdint.h>
#include <string.h>

#include <cblas.h>

#include "cpu-kernels.h"
#include "gemm.h"
#include "base/internal.h"

/* cblas takes int dimensions; refuse layers whose matrices do not fit. */
static brg_status check_range(const brg_op *op, int64_t n, int64_t in, int64_t out)
{
    if (n > INT_MAX || in > INT_MAX || out > INT_MAX)
        return brg_error(BRG_ERR_UNSUPPORTED, "%s: a %lldx%lld by %lld layer exceeds the BLAS int range",
                         brg_op_kind_name(op->kind), (long long)n, (long long)in, (long long)out);
    return BRG_OK;
}

brg_status brg_cpu_linear_forward(brg_device *dev BRG_UNUSED, const brg_op *op)
{
    const brg_tensor *xt = op->in[0], *wt = op->in[1];
    const brg_tensor *bt = op->n_in > 2 ? op->in[2] : NULL;
    const int64_t n = xt->shape[0], o = wt->shape[0], in = wt->shape[1];
    BRG_CHECK(check_range(op, n, in, o));
    float *y = op->out[0]->data;
    if (bt) {
        /* Pre-fill every row with the bias and let the GEMM add onto it. */
        const float *b = bt->data;
        for (int64_t i = 0; i < n; i++) memcpy(y + i * o, b, (size_t)o * sizeof(float));
    }
    brg_cpu_gemm(CblasNoTrans, CblasTrans, n, o, in, xt->data, in, wt->data, in, bt ? 1.0f : 0.0f, y, o);
    return BRG_OK;
}

brg_status brg_cpu_linear_backward_data(brg_device *dev BRG_UNUSED, const brg_op *op)
{
    const brg_tensor *dyt = op->in[0], *wt = op->in[1];
    const int64_t n = dyt->shape[0], o = wt->shape[0], in = wt->shape[1];
    BRG_CHECK(check_range(op, n, in, o));
    brg_cpu_gemm(CblasNoTrans, CblasNoTrans, n, in, o, dyt->data, o, wt->data, in, op->accumulate ? 1.0f : 0.0f,
         op->out[0]->data, in);
    return BRG_OK;
}

brg_status brg_cpu_linear_backward_weight(brg_device *dev BRG_UNUSED, const brg_op *op)
{
    const brg_tensor *xt = op->in[0], *dyt = op->in[1], *dwt = op->out[0];
    const brg_tensor *dbt = op->n_out > 1 ? op->out[1] : NULL;
    const int64_t n = dyt->shape[0], o = dwt->shape[0], in = dwt->shape[1];
    BRG_CHECK(check_range(op, n, in, o));
    const int acc = op->accumulate != 0;
    brg_cpu_gemm(CblasTrans, CblasNoTrans, o, in, n, dyt->data, o, xt->data, in, acc ? 1.0f : 0.0f, dwt->data, in);
    if (dbt) {
        /* Column sums in double, so a large batch does not lose small
         * terms. dy is [N,O] with N a micro-batch: the strided reads are
         * negligible next to the GEMM. */
        const float *dy = dyt->data;
        float *db = dbt->data;
        for (int64_t j = 0; j < o; j++) {
            double s = 0.0;
            for (int64_t i = 0; i < n; i++) s += dy[i * o + j];
            db[j] = acc ? db[j] + (float)s : (float)s;
        }
    }
    return BRG_OK;
}
