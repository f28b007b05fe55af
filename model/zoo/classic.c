/* Zoo: plain feed-forward CNNs: the small Fashion-MNIST network and VGG-16. */
#include "zoo-impl.h"

/* A hidden fully connected layer of a classifier: "<linear>" (with bias)
 * reading input, then "<relu>" and "<drop>" (dropout at rate), in the
 * current block. Checks first that the weight is not too large to count. */
static brg_status linear_relu_dropout(brg_model *m, const char *input, int features, float rate, const char *linear,
                                      const char *relu, const char *drop)
{
    BRG_CHECK(brg_zoo_check_linear(m, linear, input, features));
    BRG_CHECK(brg_model_add_linear(m, linear, input, features, 1));
    BRG_CHECK(brg_model_add_relu(m, relu, linear));
    return brg_model_add_dropout(m, drop, relu, rate);
}

/* ---- fmnist-cnn ---- */

/* One block: conv3x3 (pad 1, no bias) + BatchNorm + ReLU + maxpool 2x2,
 * layers "<name>.conv", "<name>.bn", "<name>.relu", "<name>.pool"; the
 * output tensor is "<name>.pool", written to out. */
static brg_status fmnist_conv_block(brg_model *m, const char *name, const char *input, int channels, char *out)
{
    const brg_zoo_conv conv = {channels, 3, 3, 1, 1, 1};
    const brg_zoo_bn bn = {1e-5f, 1, 1};
    char relu[BRG_NAME_MAX];
    BRG_CHECK(brg_model_begin_block(m, name));
    BRG_CHECK(brg_zoo_conv_bn(m, name, "", input, &conv, &bn, 1, relu));
    BRG_CHECK(brg_zoo_name(out, "%s.pool", name));
    return brg_model_add_maxpool(m, out, relu, 2, 2, 0);
}

/* Blocks "conv1" (32 channels, 28 -> 14), "conv2" (64, 14 -> 7), "fc"
 * (linear 128 + ReLU + dropout 0.25) and "head" (linear to the classes).
 * About 4.3 million multiply-adds per 28x28 sample. */
brg_status brg_zoo_build_fmnist_cnn(brg_model *m, const brg_zoo_config *cfg)
{
    char x[BRG_NAME_MAX], y[BRG_NAME_MAX];
    BRG_CHECK(fmnist_conv_block(m, "conv1", "input", brg_zoo_width(cfg, 32), x));
    BRG_CHECK(fmnist_conv_block(m, "conv2", x, brg_zoo_width(cfg, 64), y));
    BRG_CHECK(brg_model_begin_block(m, "fc"));
    BRG_CHECK(linear_relu_dropout(m, y, brg_zoo_width(cfg, 128), 0.25f, "fc1", "fc1.relu", "fc1.dropout"));
    BRG_CHECK(brg_model_begin_block(m, "head"));
    return brg_model_add_linear(m, "fc2", "fc1.dropout", (int)cfg->classes, 1);
}

/* ---- vgg16 ---- */

/* torchvision's configuration "D": channels per stage, three convolutions
 * in the last three stages. */
static const int vgg16_stage_channels[5] = {64, 128, 256, 512, 512};
static const int vgg16_stage_convs[5] = {2, 2, 3, 3, 3};

/* One block per convolution: "convS_I" = conv3x3 (pad 1, bias) + ReLU
 * ("reluS_I"), the last of a stage followed by the 2x2 max-pool "poolS".
 * Then "fc6" and "fc7" (linear 4096 + ReLU + dropout 0.5) and "fc8" (linear
 * to the classes). fc6 reads the last pooled feature map as it is:
 * 512 x 7 x 7 at 224 x 224, 512 x H/32 x W/32 in general (torchvision's
 * adaptive 7x7 average pool is the identity at 224 and is left out). */
brg_status brg_zoo_build_vgg16(brg_model *m, const brg_zoo_config *cfg)
{
    char x[BRG_NAME_MAX] = "input", name[BRG_NAME_MAX], relu[BRG_NAME_MAX];
    for (int s = 0; s < 5; s++) {
        int channels = brg_zoo_width(cfg, vgg16_stage_channels[s]);
        for (int i = 0; i < vgg16_stage_convs[s]; i++) {
            BRG_CHECK(brg_zoo_name(name, "conv%d_%d", s + 1, i + 1));
            BRG_CHECK(brg_zoo_name(relu, "relu%d_%d", s + 1, i + 1));
            BRG_CHECK(brg_model_begin_block(m, name));
            BRG_CHECK(brg_model_add_conv2d(m, name, x, channels, 3, 3, 1, 1, 1, 1, 1));
            BRG_CHECK(brg_model_add_relu(m, relu, name));
            BRG_CHECK(brg_zoo_name(x, "%s", relu));
        }
        BRG_CHECK(brg_zoo_name(name, "pool%d", s + 1));
        BRG_CHECK(brg_model_add_maxpool(m, name, x, 2, 2, 0));
        BRG_CHECK(brg_zoo_name(x, "%s", name));
    }
    int hidden = brg_zoo_width(cfg, 4096);
    BRG_CHECK(brg_model_begin_block(m, "fc6"));
    BRG_CHECK(linear_relu_dropout(m, x, hidden, 0.5f, "fc6", "relu6", "drop6"));
    BRG_CHECK(brg_model_begin_block(m, "fc7"));
    BRG_CHECK(linear_relu_dropout(m, "drop6", hidden, 0.5f, "fc7", "relu7", "drop7"));
    BRG_CHECK(brg_model_begin_block(m, "fc8"));
    return brg_model_add_linear(m, "fc8", "drop7", (int)cfg->classes, 1);
}
