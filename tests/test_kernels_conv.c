/* conv2d forward, backward data and backward filter against the double
 * reference and finite differences: pointwise, 3x3 same and strided, the
 * factorised 1x7 / 7x1 of Inception, 5x5, no bias, batch 1 and 3, non-square
 * inputs, padding beyond half the kernel, and random configurations. */
#include "kernel_test.h"

#define CONV(n, c, h, w, k, kh, kw, sh, sw, ph, pw, b)                                             \
    {.family = BRG_CHECK_CONV2D, .ndim = 4, .x_shape = {n, c, h, w}, .out_features = k, .kernel_h = kh, \
     .kernel_w = kw, .stride_h = sh, .stride_w = sw, .pad_h = ph, .pad_w = pw, .bias = b}

static const brg_check_case cases[] = {
    CONV(2, 4, 5, 5, 6, 1, 1, 1, 1, 0, 0, 1),   /* 1x1 */
    CONV(2, 3, 6, 6, 4, 3, 3, 1, 1, 1, 1, 1),   /* 3x3 s1 p1 */
    CONV(2, 3, 9, 9, 4, 3, 3, 2, 2, 0, 0, 1),   /* 3x3 s2 p0 */
    CONV(2, 3, 9, 9, 4, 1, 7, 1, 2, 0, 3, 1),   /* 1x7 p0x3, stride 1x2 */
    CONV(2, 3, 8, 7, 3, 1, 7, 1, 1, 0, 3, 0),   /* 1x7 p0x3 */
    CONV(2, 3, 7, 8, 3, 7, 1, 1, 1, 3, 0, 1),   /* 7x1 p3x0 */
    CONV(1, 2, 8, 8, 3, 5, 5, 1, 1, 2, 2, 1),   /* 5x5 p2 */
    CONV(2, 3, 6, 6, 4, 3, 3, 1, 1, 1, 1, 0),   /* no bias */
    CONV(1, 1, 5, 5, 1, 3, 3, 1, 1, 0, 0, 1),   /* batch 1, one channel, one filter */
    CONV(3, 2, 7, 5, 3, 3, 3, 1, 1, 1, 1, 1),   /* batch 3, non-square */
    CONV(2, 2, 4, 11, 3, 3, 5, 2, 3, 1, 2, 1),  /* non-square input and kernel, stride 2x3 */
    CONV(2, 2, 6, 6, 2, 2, 2, 2, 2, 0, 0, 0),   /* even kernel */
    CONV(1, 3, 5, 5, 2, 3, 3, 1, 1, 2, 2, 1),   /* padding beyond half the kernel: bias-only borders */
    CONV(2, 2, 1, 9, 3, 1, 7, 1, 1, 0, 3, 1),   /* height 1 */
    CONV(2, 3, 3, 3, 2, 3, 3, 1, 1, 0, 0, 1),   /* kernel covers the input: 1x1 output */
    CONV(1, 3, 11, 11, 4, 3, 3, 3, 3, 0, 0, 1), /* stride 3 */
    CONV(2, 8, 6, 6, 16, 3, 3, 1, 1, 1, 1, 1),  /* more channels */
};

/* Larger shapes that reach the other paths a backend may take (for the CPU:
 * one image per GEMM tile, images batched into a tile with a remainder tile,
 * a large image cut into bands of output rows, direct 1x1 without im2col,
 * batched and not; small planes by taps, in chunks of images when
 * test_kernels_pieces.sh sets their size). Fewer finite differences per tensor keep them fast. */
static const brg_check_case large[] = {
    CONV(1, 4, 24, 24, 4, 3, 3, 1, 1, 1, 1, 1),  /* 576 output pixels: one image per tile */
    CONV(23, 3, 10, 10, 4, 3, 3, 1, 1, 1, 1, 1), /* 100 pixels: batched tiles of 21, then 2 */
    CONV(1, 64, 90, 90, 2, 3, 3, 1, 1, 1, 1, 1), /* column matrix over 16 MiB: banded rows */
    CONV(9, 5, 17, 17, 3, 1, 1, 1, 1, 0, 0, 1),  /* direct 1x1 with a leftover tile */
    CONV(9, 8, 4, 4, 6, 1, 1, 1, 1, 0, 0, 1),    /* direct 1x1, small images batched */
    CONV(2, 8, 20, 20, 6, 1, 1, 1, 1, 0, 0, 0),  /* direct 1x1 straight on the tensors */
    CONV(2, 8, 20, 20, 6, 1, 1, 2, 2, 0, 0, 1),  /* 1x1 with stride 2: not direct */
    CONV(3, 16, 17, 17, 8, 1, 7, 1, 1, 0, 3, 1), /* Inception's 17x17 1x7 */
    CONV(23, 16, 4, 4, 24, 3, 3, 1, 1, 1, 1, 1), /* small planes, by taps: chunks of 3 images at 20000 bytes */
    CONV(5, 16, 4, 4, 32, 3, 3, 2, 2, 1, 1, 0),  /* ResNet's strided 3x3 into 2x2 planes */
};

int main(void)
{
    kt_open();
    kt_cases(cases, (int)(sizeof cases / sizeof cases[0]));
    brg_check_options few = {.fd_max_elements = 16};
    for (size_t i = 0; i < sizeof large / sizeof large[0]; i++) kt_case_opts(&large[i], 1, &few);
    kt_defaults(BRG_CHECK_CONV2D);
    kt_random(BRG_CHECK_CONV2D, 30);
    kt_detects(&cases[3]);
    return kt_finish("test_kernels_conv");
}
