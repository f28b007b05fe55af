/* libFuzzer target: the image decoders (brg_image_decode: TurboJPEG and
 * libspng behind brigade's checks and conversions) and the transform on
 * what they decode; and the mask decoder (brg_mask_decode: grey and
 * palette PNGs, packed below 8 bits) with the joint transform, whose labels
 * must be values of the mask. A decoded image must have a size and every
 * pixel readable (AddressSanitizer watches the reads); a failure must come
 * with a message and no pixels. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "brigade.h"

static volatile unsigned sink;

/* The file as a mask, transformed with itself as a grey image. */
static int fuzz_mask(const uint8_t *data, size_t size)
{
    brg_image mask;
    brg_clear_error();
    if (brg_mask_decode(data, size, "fuzz", &mask) != BRG_OK) {
        if (mask.pixels || !brg_last_error()[0]) __builtin_trap();
        return 0;
    }
    if (!mask.pixels || mask.width <= 0 || mask.height <= 0 || mask.channels != 1) __builtin_trap();
    char present[256] = {0};
    for (size_t i = 0; i < (size_t)mask.width * mask.height; i++) present[mask.pixels[i]] = 1;
    brg_image_transform t = brg_seg_transform_init(1, 8, 8);
    t.random = t.flip = 1;
    float out[64];
    int32_t labels[64];
    if (brg_image_transform_apply_mask(&mask, &mask, &t, size, out, labels) == BRG_OK) {
        for (int i = 0; i < 64; i++)
            if (labels[i] < 0 || labels[i] > 255 || !present[labels[i]]) __builtin_trap();
    }
    brg_image_free(&mask);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* The first byte picks the channels and whether a JPEG may decode at a
     * reduced scale, or (bit 2) a mask; the rest is the file. */
    if (size < 1) return 0;
    if (data[0] & 4) return fuzz_mask(data + 1, size - 1);
    const int channels = data[0] & 1 ? 3 : 1, min_side = data[0] & 2 ? 8 : 0;
    brg_image img;
    brg_clear_error();
    if (brg_image_decode(data + 1, size - 1, channels, min_side, "fuzz", &img) != BRG_OK) {
        if (img.pixels || !brg_last_error()[0]) __builtin_trap();
        return 0;
    }
    if (!img.pixels || img.width <= 0 || img.height <= 0 || img.channels != channels) __builtin_trap();
    unsigned sum = 0;
    for (size_t i = 0; i < (size_t)img.width * img.height * channels; i++) sum += img.pixels[i];
    sink = sum;
    brg_image_transform t = brg_image_transform_init(channels, 8, 8);
    t.random = t.flip = 1;
    float out[3 * 8 * 8];
    if (brg_image_transform_apply(&img, &t, size, out) == BRG_OK) {
        for (int i = 0; i < channels * 64; i++)
            if (!(out[i] > -10.0f && out[i] < 10.0f)) __builtin_trap();
    }
    brg_image_free(&img);
    return 0;
}
