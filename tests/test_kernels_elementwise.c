/* ReLU (also in place, and large enough to be split over threads), channel concatenation, add (with either gradient
 * unused), inverted dropout (the mask stream with offsets, rate 0) and the
 * elementwise optimizer steps (SGD with and without momentum and weight
 * decay, Adam at its first and later steps). */
#include "kernel_test.h"

static const brg_check_case cases[] = {
    {.family = BRG_CHECK_RELU, .ndim = 4, .x_shape = {2, 3, 5, 5}},
    {.family = BRG_CHECK_RELU, .ndim = 4, .x_shape = {2, 3, 5, 5}, .inplace = 1},
    {.family = BRG_CHECK_RELU, .ndim = 2, .x_shape = {3, 7}},
    {.family = BRG_CHECK_RELU, .ndim = 1, .x_shape = {1}},
    {.family = BRG_CHECK_RELU, .ndim = 1, .x_shape = {1000}, .inplace = 1},
    /* large enough to be split over the cores (brg_cpu_kernel_threads) */
    {.family = BRG_CHECK_RELU, .ndim = 4, .x_shape = {4, 16, 40, 40}},
    {.family = BRG_CHECK_RELU, .ndim = 4, .x_shape = {4, 16, 40, 41}, .inplace = 1},
    {.family = BRG_CHECK_CONCAT, .ndim = 4, .x_shape = {2, 0, 5, 5}, .n_parts = 4, .part_channels = {2, 3, 1, 2}},
    {.family = BRG_CHECK_CONCAT, .ndim = 4, .x_shape = {1, 0, 4, 3}, .n_parts = 3, .part_channels = {3, 5, 2}},
    {.family = BRG_CHECK_CONCAT, .ndim = 4, .x_shape = {2, 0, 3, 3}, .n_parts = 1, .part_channels = {4}},
    {.family = BRG_CHECK_CONCAT, .ndim = 4, .x_shape = {3, 0, 1, 1}, .n_parts = 8,
     .part_channels = {1, 2, 1, 3, 1, 1, 2, 1}},
    {.family = BRG_CHECK_ADD, .ndim = 4, .x_shape = {2, 3, 4, 4}},
    {.family = BRG_CHECK_ADD, .ndim = 2, .x_shape = {5, 6}, .omit_grad = 1},
    {.family = BRG_CHECK_ADD, .ndim = 4, .x_shape = {1, 2, 3, 3}, .omit_grad = 2},
    {.family = BRG_CHECK_ADD, .ndim = 1, .x_shape = {1}},
    {.family = BRG_CHECK_DROPOUT, .ndim = 4, .x_shape = {2, 3, 5, 5}, .rate = 0.5f},
    {.family = BRG_CHECK_DROPOUT, .ndim = 2, .x_shape = {4, 9}, .rate = 0.0f},
    {.family = BRG_CHECK_DROPOUT, .ndim = 3, .x_shape = {3, 5, 7}, .rate = 0.2f, .dropout_offset = 12345},
    {.family = BRG_CHECK_DROPOUT, .ndim = 1, .x_shape = {500}, .rate = 0.9f, .dropout_offset = 1},
    {.family = BRG_CHECK_DROPOUT, .ndim = 4, .x_shape = {2, 2, 3, 3}, .rate = 0.3f,
     .dropout_offset = (uint64_t)1 << 40}, /* offsets past 32 bits */
    {.family = BRG_CHECK_SGD, .ndim = 2, .x_shape = {8, 9}, .lr = 0.1f},
    {.family = BRG_CHECK_SGD, .ndim = 2, .x_shape = {8, 9}, .lr = 0.1f, .weight_decay = 0.01f},
    {.family = BRG_CHECK_SGD, .ndim = 4, .x_shape = {4, 3, 3, 3}, .lr = 0.05f, .momentum = 0.9f, .velocity = 1},
    {.family = BRG_CHECK_SGD, .ndim = 1, .x_shape = {100}, .lr = 0.05f, .momentum = 0.0f, .velocity = 1},
    {.family = BRG_CHECK_ADAM, .ndim = 2, .x_shape = {8, 9}, .lr = 0.01f, .step = 1},
    {.family = BRG_CHECK_ADAM, .ndim = 4, .x_shape = {4, 3, 3, 3}, .lr = 0.1f, .weight_decay = 0.01f, .step = 100},
    {.family = BRG_CHECK_ADAM, .ndim = 1, .x_shape = {50}, .lr = 0.001f, .beta1 = 0.5f, .beta2 = 0.9f,
     .epsilon = 1e-3f, .step = 7},
};

int main(void)
{
    kt_open();
    kt_cases(cases, (int)(sizeof cases / sizeof cases[0]));
    static const brg_check_family fams[] = {BRG_CHECK_RELU,    BRG_CHECK_CONCAT, BRG_CHECK_ADD,
                                            BRG_CHECK_DROPOUT, BRG_CHECK_SGD,    BRG_CHECK_ADAM};
    for (size_t i = 0; i < sizeof fams / sizeof fams[0]; i++) {
        kt_defaults(fams[i]);
        kt_random(fams[i], 25);
    }
    kt_detects(&cases[1]);
    kt_detects(&cases[7]);
    kt_detects(&cases[11]);
    kt_detects(&cases[15]);
    kt_detects(&cases[22]);
    kt_detects(&cases[24]);
    return kt_finish("test_kernels_elementwise");
}
