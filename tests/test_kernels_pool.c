/* Max, average and global average pooling, and nearest-neighbour
 * upsampling. Max pool: one clear maximum per window (checked against
 * finite differences) and inputs full of ties, all negative, so padding that
 * wins or a tie broken the wrong way shows up (checked against the
 * reference's routing). Average pool: padding counted and not counted. */
#include "kernel_test.h"

#define POOL(fam, n, c, h, w, kh, kw, sh, sw, ph, pw, extra)                                       \
    {.family = fam, .ndim = 4, .x_shape = {n, c, h, w}, .kernel_h = kh, .kernel_w = kw, .stride_h = sh, \
     .stride_w = sw, .pad_h = ph, .pad_w = pw, extra}
#define MAX BRG_CHECK_MAXPOOL
#define AVG BRG_CHECK_AVGPOOL

static const brg_check_case cases[] = {
    POOL(MAX, 2, 3, 8, 8, 2, 2, 2, 2, 0, 0, .ties = 0),
    POOL(MAX, 2, 2, 7, 7, 3, 3, 2, 2, 1, 1, .ties = 0),
    POOL(MAX, 2, 2, 7, 7, 3, 3, 2, 2, 1, 1, .ties = 1),
    POOL(MAX, 1, 3, 6, 6, 3, 3, 1, 1, 1, 1, .ties = 1),
    POOL(MAX, 2, 2, 9, 9, 3, 3, 2, 2, 0, 0, .ties = 0),  /* the Inception reduction of an odd input */
    POOL(MAX, 2, 2, 5, 7, 1, 3, 1, 1, 0, 1, .ties = 0),
    POOL(MAX, 2, 2, 7, 5, 3, 1, 1, 1, 1, 0, .ties = 1),
    POOL(MAX, 1, 2, 6, 9, 2, 3, 2, 3, 1, 1, .ties = 0),
    POOL(MAX, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, .ties = 0),
    POOL(MAX, 4, 16, 40, 40, 2, 2, 2, 2, 0, 0, .ties = 0), /* planes split over threads */
    POOL(AVG, 4, 16, 40, 40, 3, 3, 1, 1, 1, 1, .count_include_pad = 0),
    POOL(MAX, 2, 2, 7, 9, 2, 2, 2, 2, 0, 0, .ties = 1), /* the 2x2 fast path: ties, a last row and column uncovered */
    POOL(AVG, 2, 3, 6, 6, 3, 3, 1, 1, 1, 1, .count_include_pad = 0),
    POOL(AVG, 2, 3, 6, 6, 3, 3, 1, 1, 1, 1, .count_include_pad = 1),
    POOL(AVG, 2, 2, 8, 8, 2, 2, 2, 2, 0, 0, .count_include_pad = 0),
    POOL(AVG, 1, 2, 7, 9, 3, 3, 2, 2, 1, 1, .count_include_pad = 0),
    POOL(AVG, 1, 2, 7, 9, 3, 3, 2, 2, 1, 1, .count_include_pad = 1),
    POOL(AVG, 2, 2, 5, 6, 2, 3, 1, 2, 1, 1, .count_include_pad = 1),
    POOL(AVG, 2, 1, 5, 5, 5, 5, 1, 1, 2, 2, .count_include_pad = 0),
    POOL(AVG, 1, 3, 8, 8, 8, 8, 1, 1, 0, 0, .count_include_pad = 0), /* a window as large as the input */
    {.family = BRG_CHECK_GLOBAL_AVGPOOL, .ndim = 4, .x_shape = {2, 3, 7, 7}},
    {.family = BRG_CHECK_GLOBAL_AVGPOOL, .ndim = 4, .x_shape = {1, 4, 1, 1}},
    {.family = BRG_CHECK_GLOBAL_AVGPOOL, .ndim = 4, .x_shape = {3, 2, 3, 5}},
    {.family = BRG_CHECK_GLOBAL_AVGPOOL, .ndim = 4, .x_shape = {2, 16, 8, 8}},
    {.family = BRG_CHECK_GLOBAL_AVGPOOL, .ndim = 4, .x_shape = {4, 16, 40, 40}},
    {.family = BRG_CHECK_UPSAMPLE, .ndim = 4, .x_shape = {2, 3, 4, 5}, .factor = 2},
    {.family = BRG_CHECK_UPSAMPLE, .ndim = 4, .x_shape = {1, 2, 3, 3}, .factor = 3},
    {.family = BRG_CHECK_UPSAMPLE, .ndim = 4, .x_shape = {2, 2, 3, 4}, .factor = 1},
    {.family = BRG_CHECK_UPSAMPLE, .ndim = 4, .x_shape = {1, 1, 1, 1}, .factor = 4},
};

int main(void)
{
    kt_open();
    kt_cases(cases, (int)(sizeof cases / sizeof cases[0]));
    kt_defaults(MAX);
    kt_defaults(AVG);
    kt_defaults(BRG_CHECK_GLOBAL_AVGPOOL);
    kt_random(MAX, 30);
    kt_random(AVG, 30);
    kt_random(BRG_CHECK_GLOBAL_AVGPOOL, 20);
    kt_defaults(BRG_CHECK_UPSAMPLE);
    kt_random(BRG_CHECK_UPSAMPLE, 20);
    kt_detects(&cases[1]);
    kt_detects(&cases[2]);
    kt_detects(&cases[0]);
    kt_detects(&cases[12]);
    kt_detects(&cases[20]);
    kt_detects(&cases[25]);
    return kt_finish("test_kernels_pool");
}
