/* CPU kernels that reduce to one int32: the number of correct predictions
 * and the finite check of a tensor. */
#include <float.h>
#include <math.h>
#include <stdint.h>

#include "cpu-kernels.h"
#include "base/internal.h"

/* count (+)= rows whose first maximum (strict >, scanning from class 0)
 * is at the label; a label outside [0, k) never matches. */
brg_status brg_cpu_count_correct(brg_device *dev BRG_UNUSED, const brg_op *op)
{
    const brg_tensor *st = op->in[0];
    const int64_t n = st->shape[0], k = st->shape[1], px = st->ndim == 4 ? st->shape[2] * st->shape[3] : 1;
    const float *scores = st->data;
    const int32_t *labels = op->in[1]->data;
    int32_t *count = op->out[0]->data;
    int64_t correct = 0;
    for (int64_t i = 0; i < n; i++)
        for (int64_t q = 0; q < px; q++) {
            const float *p = scores + i * k * px + q; /* class j at p[j * px] */
            int64_t best = 0;
            for (int64_t j = 1; j < k; j++)
                if (p[j * px] > p[best * px]) best = j;
            correct += best == labels[i * px + q];
        }
    count[0] = (int32_t)(op->accumulate ? count[0] + correct : correct);
    return BRG_OK;
}

/* Elements per block of the finite check: the inner loop has a fixed trip
 * count and no early exit, so the compiler vectorizes it (a compare and an
 * OR per lane); the outer loop stops at the first block with a bad value. */
#define FINITE_BLOCK 4096

/* 1 if some x[i], i < n, is NaN or infinite: !(|x| <= FLT_MAX) is true
 * exactly for those (a NaN compares false). */
static int block_bad(const float *x, int64_t n)
{
    int bad = 0;
    for (int64_t i = 0; i < n; i++) bad |= !(fabsf(x[i]) <= FLT_MAX);
    return bad;
}

static int full_block_bad(const float *x)
{
    int bad = 0;
    for (int i = 0; i < FINITE_BLOCK; i++) bad |= !(fabsf(x[i]) <= FLT_MAX);
    return bad;
}

/* flag = tag if flag is 0 and x has a NaN or an infinity. */
brg_status brg_cpu_check_finite(brg_device *dev BRG_UNUSED, const brg_op *op)
{
    int32_t *flag = op->out[0]->data;
    if (flag[0] != 0) return BRG_OK; /* an earlier check failed: its tag stays */
    const float *x = op->in[0]->data;
    const int64_t n = brg_tensor_numel(op->in[0]);
    int64_t i = 0;
    int bad = 0;
    for (; i + FINITE_BLOCK <= n && !bad; i += FINITE_BLOCK) bad = full_block_bad(x + i);
    if (!bad && i < n) bad = block_bad(x + i, n - i);
    if (bad) flag[0] = op->p.finite.tag;
    return BRG_OK;
}
