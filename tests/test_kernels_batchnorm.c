/* Batch normalisation: the training forward (output, running statistics
 * updated with the unbiased variance, saved mean and inverse deviation), the
 * training backward through the batch statistics (dx, dgamma, dbeta) and
 * the inference forward, with gamma and beta each present or absent. */
#include "kernel_test.h"

#define BN(fam, n, c, h, w, g, b, eps, mom)                                                        \
    {.family = fam, .ndim = 4, .x_shape = {n, c, h, w}, .gamma = g, .beta = b, .epsilon = eps, .momentum = mom}
#define TRAIN BRG_CHECK_BATCHNORM_TRAIN
#define INFER BRG_CHECK_BATCHNORM_INFER

static const brg_check_case cases[] = {
    BN(TRAIN, 4, 3, 5, 5, 1, 1, 1e-3f, 0.1f),
    BN(TRAIN, 2, 4, 3, 3, 0, 0, 1e-5f, 0.1f),  /* scale=False, center=False */
    BN(TRAIN, 2, 4, 3, 3, 1, 0, 1e-3f, 0.01f), /* gamma only */
    BN(TRAIN, 2, 4, 3, 3, 0, 1, 1e-3f, 0.5f),  /* beta only */
    BN(TRAIN, 8, 5, 1, 1, 1, 1, 1e-3f, 1.0f),  /* after a dense layer; momentum 1: running = batch */
    BN(TRAIN, 1, 3, 4, 5, 1, 1, 1e-3f, 0.1f),  /* batch 1: statistics over space only */
    BN(TRAIN, 2, 1, 1, 1, 1, 1, 1e-3f, 0.1f),  /* two values per channel, the fewest allowed */
    BN(TRAIN, 3, 2, 4, 4, 1, 1, 0.5f, 0.1f),   /* large epsilon */
    BN(TRAIN, 4, 8, 6, 6, 1, 1, 1e-5f, 0.1f),
    BN(TRAIN, 4, 16, 40, 40, 1, 1, 1e-5f, 0.1f), /* channels split over threads (brg_cpu_kernel_threads) */
    BN(INFER, 2, 3, 4, 4, 1, 1, 1e-3f, 0.1f),
    BN(INFER, 3, 2, 5, 5, 0, 0, 1e-5f, 0.1f),
    BN(INFER, 1, 4, 1, 1, 1, 0, 1e-3f, 0.1f),
    BN(INFER, 2, 2, 3, 3, 0, 1, 0.1f, 0.1f),
    BN(INFER, 4, 16, 40, 40, 1, 1, 1e-5f, 0.1f),
};

int main(void)
{
    kt_open();
    kt_cases(cases, (int)(sizeof cases / sizeof cases[0]));
    kt_defaults(TRAIN);
    kt_defaults(INFER);
    kt_random(TRAIN, 30);
    kt_random(INFER, 20);
    kt_detects(&cases[0]);
    kt_detects(&cases[10]);
    return kt_finish("test_kernels_batchnorm");
}
