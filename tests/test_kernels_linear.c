/* linear forward, backward data and backward weight against the double
 * reference and finite differences, with [N,I] inputs and [N,C,H,W] inputs
 * flattened for free. */
#include "kernel_test.h"

static const brg_check_case cases[] = {
    {.family = BRG_CHECK_LINEAR, .ndim = 2, .x_shape = {4, 20}, .out_features = 7, .bias = 1},
    {.family = BRG_CHECK_LINEAR, .ndim = 2, .x_shape = {4, 20}, .out_features = 7, .bias = 0},
    {.family = BRG_CHECK_LINEAR, .ndim = 2, .x_shape = {1, 13}, .out_features = 10, .bias = 1},  /* batch 1 */
    {.family = BRG_CHECK_LINEAR, .ndim = 2, .x_shape = {5, 1}, .out_features = 3, .bias = 1},    /* one feature */
    {.family = BRG_CHECK_LINEAR, .ndim = 2, .x_shape = {3, 9}, .out_features = 1, .bias = 0},    /* one unit */
    {.family = BRG_CHECK_LINEAR, .ndim = 4, .x_shape = {2, 3, 2, 2}, .out_features = 5, .bias = 1},
    {.family = BRG_CHECK_LINEAR, .ndim = 4, .x_shape = {3, 8, 1, 1}, .out_features = 4, .bias = 0},
    {.family = BRG_CHECK_LINEAR, .ndim = 3, .x_shape = {2, 3, 5}, .out_features = 6, .bias = 1},
    {.family = BRG_CHECK_LINEAR, .ndim = 2, .x_shape = {16, 128}, .out_features = 32, .bias = 1},
};

int main(void)
{
    kt_open();
    kt_cases(cases, (int)(sizeof cases / sizeof cases[0]));
    kt_defaults(BRG_CHECK_LINEAR);
    kt_random(BRG_CHECK_LINEAR, 30);
    kt_detects(&cases[5]);
    return kt_finish("test_kernels_linear");
}
