/* Zoo: U-Net (Ronneberger et al. 2015) with 'same' padding, BatchNorm and
 * nearest-neighbour upsampling, so the output has the input's height and
 * width and no cropping is needed. */
#include "zoo-impl.h"

static const brg_zoo_bn unet_bn = {1e-5f, 1, 1};

/* Two conv3x3 (pad 1, no bias) + BatchNorm + ReLU at channels, in the
 * current block: "<block>.conv1/bn1/relu1", "<block>.conv2/bn2/relu2".
 * The name of the last ReLU's tensor goes to out (which may be x). */
static brg_status double_conv(brg_model *m, const char *block, const char *x, int channels, char *out)
{
    const brg_zoo_conv conv = {channels, 3, 3, 1, 1, 1};
    BRG_CHECK(brg_zoo_conv_bn(m, block, "1", x, &conv, &unet_bn, 1, out));
    return brg_zoo_conv_bn(m, block, "2", out, &conv, &unet_bn, 1, out);
}

/* Blocks, at base width 64 (scaled by the width multiplier):
 *   "enc1"        double conv, 64                        -> skip 1 (H x W)
 *   "enc2".."enc4" maxpool 2x2 ("<block>.pool"), double conv 128/256/512
 *                                                         -> skips 2..4
 *   "bottleneck"  maxpool, double conv 1024               (H/16 x W/16)
 *   "dec4".."dec1" upsample x2 ("<block>.upsample", nearest), conv3x3 + BN +
 *                 ReLU halving the channels ("<block>.up.conv/.bn/.relu"),
 *                 concat [skip, upsampled] ("<block>.concat"), double conv
 *   "head"        conv 1x1 with bias to the classes ("logits")
 * The pool that starts a level sits in the next block, so the tensor that
 * leaves an encoder block is exactly its skip. Every decoder level reads
 * the skip of its encoder level, 2 to 8 blocks back, so each boundary from
 * enc2|enc3 to dec2|dec1 is crossed by the main path and the skips still
 * waiting. Height and width must be multiples of 16 (zoo.c checks). */
brg_status brg_zoo_build_unet(brg_model *m, const brg_zoo_config *cfg)
{
    char x[BRG_NAME_MAX] = "input", block[BRG_NAME_MAX], name[BRG_NAME_MAX], prefix[BRG_NAME_MAX];
    char skips[BRG_ZOO_UNET_DEPTH][BRG_NAME_MAX];
    for (int level = 0; level <= BRG_ZOO_UNET_DEPTH; level++) {
        int channels = brg_zoo_width(cfg, 64 << level);
        if (level < BRG_ZOO_UNET_DEPTH)
            BRG_CHECK(brg_zoo_name(block, "enc%d", level + 1));
        else
            BRG_CHECK(brg_zoo_name(block, "bottleneck"));
        BRG_CHECK(brg_model_begin_block(m, block));
        if (level > 0) {
            BRG_CHECK(brg_zoo_name(name, "%s.pool", block));
            BRG_CHECK(brg_model_add_maxpool(m, name, x, 2, 2, 0));
            BRG_CHECK(brg_zoo_name(x, "%s", name));
        }
        BRG_CHECK(double_conv(m, block, x, channels, x));
        if (level < BRG_ZOO_UNET_DEPTH) BRG_CHECK(brg_zoo_name(skips[level], "%s", x));
    }
    for (int level = BRG_ZOO_UNET_DEPTH - 1; level >= 0; level--) {
        int channels = brg_zoo_width(cfg, 64 << level);
        const brg_zoo_conv upconv = {channels, 3, 3, 1, 1, 1};
        BRG_CHECK(brg_zoo_name(block, "dec%d", level + 1));
        BRG_CHECK(brg_model_begin_block(m, block));
        BRG_CHECK(brg_zoo_name(name, "%s.upsample", block));
        BRG_CHECK(brg_model_add_upsample(m, name, x, 2));
        BRG_CHECK(brg_zoo_name(prefix, "%s.up", block));
        BRG_CHECK(brg_zoo_conv_bn(m, prefix, "", name, &upconv, &unet_bn, 1, x));
        BRG_CHECK(brg_zoo_name(name, "%s.concat", block));
        const char *in[2] = {skips[level], x};
        BRG_CHECK(brg_model_add_concat(m, name, in, 2));
        BRG_CHECK(double_conv(m, block, name, channels, x));
    }
    BRG_CHECK(brg_model_begin_block(m, "head"));
    return brg_model_add_conv2d(m, "logits", x, (int)cfg->classes, 1, 1, 1, 1, 0, 0, 1);
}
