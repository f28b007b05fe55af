/* Zoo: ResNet-18/50/101/152 as torchvision builds them (v1.5: in a
 * bottleneck the stride sits on the 3x3 convolution). */
#include <stdio.h>

#include "zoo-impl.h"

static const brg_zoo_bn resnet_bn = {1e-5f, 1, 1};

typedef struct resnet_spec {
    int bottleneck;   /* 0: basic blocks (expansion 1); 1: bottlenecks (expansion 4) */
    int blocks[4];    /* residual blocks per stage */
} resnet_spec;

/* "<block>.conv<i>" (no bias) reading x, "<block>.bn<i>" and, when relu is
 * set, "<block>.relu<i>": torchvision's names. The last tensor's name goes
 * to out, which may be x. */
static brg_status conv_bn(brg_model *m, const char *block, int i, const char *x, const brg_zoo_conv *c, int relu,
                          char *out)
{
    char suffix[16];
    snprintf(suffix, sizeof suffix, "%d", i);
    return brg_zoo_conv_bn(m, block, suffix, x, c, &resnet_bn, relu, out);
}

/* One residual block as its own model block "layerS.I" reading x and
 * writing "layerS.I.relu" (copied to out, which may be x). planes is the
 * unscaled width of the block's inner convolutions; in_planes the unscaled
 * channels of x.
 * A 1x1 convolution + BatchNorm ("layerS.I.downsample.0/.1") projects the
 * shortcut where the stride or the channel count changes. */
static brg_status residual_block(brg_model *m, const brg_zoo_config *cfg, const resnet_spec *spec, int stage,
                                 int index, const char *x, int in_planes, int planes, int stride, char *out)
{
    char block[BRG_NAME_MAX], y[BRG_NAME_MAX], shortcut[BRG_NAME_MAX];
    char name[BRG_NAME_MAX], name2[BRG_NAME_MAX];
    int expansion = spec->bottleneck ? 4 : 1;
    int width = brg_zoo_width(cfg, planes);
    int out_channels = brg_zoo_width(cfg, planes * expansion);
    BRG_CHECK(brg_zoo_name(block, "layer%d.%d", stage, index));
    BRG_CHECK(brg_model_begin_block(m, block));
    if (spec->bottleneck) {
        const brg_zoo_conv c1 = {width, 1, 1, 1, 0, 0};
        const brg_zoo_conv c2 = {width, 3, 3, stride, 1, 1};
        const brg_zoo_conv c3 = {out_channels, 1, 1, 1, 0, 0};
        BRG_CHECK(conv_bn(m, block, 1, x, &c1, 1, y));
        BRG_CHECK(conv_bn(m, block, 2, y, &c2, 1, y));
        BRG_CHECK(conv_bn(m, block, 3, y, &c3, 0, y));
    } else {
        const brg_zoo_conv c1 = {width, 3, 3, stride, 1, 1};
        const brg_zoo_conv c2 = {out_channels, 3, 3, 1, 1, 1};
        BRG_CHECK(conv_bn(m, block, 1, x, &c1, 1, y));
        BRG_CHECK(conv_bn(m, block, 2, y, &c2, 0, y));
    }
    /* Decided on the unscaled widths, so the structure does not depend on
     * the width multiplier. */
    if (stride != 1 || in_planes != planes * expansion) {
        BRG_CHECK(brg_zoo_name(name, "%s.downsample.0", block));
        BRG_CHECK(brg_zoo_name(name2, "%s.downsample.1", block));
        BRG_CHECK(brg_model_add_conv2d(m, name, x, out_channels, 1, 1, stride, stride, 0, 0, 0));
        BRG_CHECK(brg_model_add_batchnorm(m, name2, name, resnet_bn.epsilon, resnet_bn.scale, resnet_bn.center));
        BRG_CHECK(brg_zoo_name(shortcut, "%s", name2));
    } else {
        BRG_CHECK(brg_zoo_name(shortcut, "%s", x));
    }
    BRG_CHECK(brg_zoo_name(name, "%s.add", block));
    BRG_CHECK(brg_model_add_add(m, name, y, shortcut));
    BRG_CHECK(brg_zoo_name(out, "%s.relu", block));
    return brg_model_add_relu(m, out, name);
}

/* Blocks "stem" (conv1 7x7/2 + bn1 + relu + maxpool 3x3/2), one per
 * residual block ("layer1.0" ...), and "head" (avgpool, global, + fc, linear
 * with bias). Layer names are torchvision's module names ("layer1.0.conv2",
 * "layer1.0.downsample.0"); the ReLUs, one module there, are "relu1",
 * "relu2" inside a block and "relu" after the residual add. */
static brg_status build_resnet(brg_model *m, const brg_zoo_config *cfg, const resnet_spec *spec)
{
    char x[BRG_NAME_MAX];
    BRG_CHECK(brg_model_begin_block(m, "stem"));
    BRG_CHECK(brg_model_add_conv2d(m, "conv1", "input", brg_zoo_width(cfg, 64), 7, 7, 2, 2, 3, 3, 0));
    BRG_CHECK(brg_model_add_batchnorm(m, "bn1", "conv1", resnet_bn.epsilon, resnet_bn.scale, resnet_bn.center));
    BRG_CHECK(brg_model_add_relu(m, "relu", "bn1"));
    BRG_CHECK(brg_model_add_maxpool(m, "maxpool", "relu", 3, 2, 1));
    BRG_CHECK(brg_zoo_name(x, "maxpool"));
    int in_planes = 64;
    int expansion = spec->bottleneck ? 4 : 1;
    for (int s = 0; s < 4; s++) {
        int planes = 64 << s;
        for (int i = 0; i < spec->blocks[s]; i++) {
            int stride = (s > 0 && i == 0) ? 2 : 1;
            BRG_CHECK(residual_block(m, cfg, spec, s + 1, i, x, in_planes, planes, stride, x));
            in_planes = planes * expansion;
        }
    }
    BRG_CHECK(brg_model_begin_block(m, "head"));
    BRG_CHECK(brg_model_add_global_avgpool(m, "avgpool", x));
    return brg_model_add_linear(m, "fc", "avgpool", (int)cfg->classes, 1);
}

brg_status brg_zoo_build_resnet18(brg_model *m, const brg_zoo_config *cfg)
{
    const resnet_spec spec = {0, {2, 2, 2, 2}};
    return build_resnet(m, cfg, &spec);
}

brg_status brg_zoo_build_resnet50(brg_model *m, const brg_zoo_config *cfg)
{
    const resnet_spec spec = {1, {3, 4, 6, 3}};
    return build_resnet(m, cfg, &spec);
}

brg_status brg_zoo_build_resnet101(brg_model *m, const brg_zoo_config *cfg)
{
    const resnet_spec spec = {1, {3, 4, 23, 3}};
    return build_resnet(m, cfg, &spec);
}

brg_status brg_zoo_build_resnet152(brg_model *m, const brg_zoo_config *cfg)
{
    const resnet_spec spec = {1, {3, 8, 36, 3}};
    return build_resnet(m, cfg, &spec);
}
