/* brigade: which CPU convolutions go by kernel taps (private).
 *
 * Shared by the CPU backend, which runs them so (backends/cpu/conv2d-taps.c),
 * and the CPU calibration, which fits their rates apart from the others'
 * (plan/calibrate.c): output planes of at most BRG_CONV_TAPS_MAX_PIXELS
 * pixels, kernels larger than 1x1. */
#ifndef BRIGADE_CONV_TAPS_RULE_H
#define BRIGADE_CONV_TAPS_RULE_H

#include <stdint.h>

/* 4x4 and 2x2 planes; with 8x8 too, resnet18's steps were slower and
 * Inception-v3's no faster (bench/README.md, "Small planes by kernel
 * taps"). A 1x1 kernel has no padding to skip. */
#define BRG_CONV_TAPS_MAX_PIXELS 16

static inline int brg_conv_by_taps(int64_t out_h, int64_t out_w, int64_t kernel_h, int64_t kernel_w)
{
    return out_h * out_w <= BRG_CONV_TAPS_MAX_PIXELS && kernel_h * kernel_w > 1;
}

#endif /* BRIGADE_CONV_TAPS_RULE_H */
