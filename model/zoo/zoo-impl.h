/* brigade: private declarations shared by the zoo files (the .c files of model/zoo).
 *
 * zoo.c owns the registry and the option checks; each zoo_<family>.c adds
 * the blocks of its models to a model that zoo.c created with the right
 * input, and zoo.c finalizes it. Nothing here is part of the public API. */
#ifndef BRIGADE_ZOO_IMPL_H
#define BRIGADE_ZOO_IMPL_H

#include <stdint.h>

#include "brigade/model.h"
#include "brigade/zoo.h"
#include "base/internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Options after validation: every field is set (no 0 = "standard"). */
typedef struct brg_zoo_config {
    int64_t channels, height, width; /* the input, as the model was created */
    int64_t classes;                 /* 1 .. BRG_ZOO_MAX_CLASSES */
    double width_mult;               /* (0, BRG_ZOO_MAX_WIDTH_MULT] */
} brg_zoo_config;

#define BRG_ZOO_MAX_CLASSES 1000000
#define BRG_ZOO_MAX_WIDTH_MULT 64.0

/* Adds a model's blocks and layers to m, an empty model whose input is
 * cfg's; does not finalize. On failure the builder's message stands (a
 * BRG_ERR_SHAPE from the model builder names the layer that did not fit). */
typedef brg_status (*brg_zoo_builder)(brg_model *m, const brg_zoo_config *cfg);

brg_status brg_zoo_build_fmnist_cnn(brg_model *m, const brg_zoo_config *cfg);
brg_status brg_zoo_build_vgg16(brg_model *m, const brg_zoo_config *cfg);
brg_status brg_zoo_build_resnet18(brg_model *m, const brg_zoo_config *cfg);
brg_status brg_zoo_build_resnet50(brg_model *m, const brg_zoo_config *cfg);
brg_status brg_zoo_build_resnet101(brg_model *m, const brg_zoo_config *cfg);
brg_status brg_zoo_build_resnet152(brg_model *m, const brg_zoo_config *cfg);
brg_status brg_zoo_build_inception_v3(brg_model *m, const brg_zoo_config *cfg);
brg_status brg_zoo_build_inception_v3_torchvision(brg_model *m, const brg_zoo_config *cfg);
brg_status brg_zoo_build_unet(brg_model *m, const brg_zoo_config *cfg);

/* The U-Net's number of 2x2 poolings: its input height and width must be
 * multiples of 1 << BRG_ZOO_UNET_DEPTH for the skips to line up. */
#define BRG_ZOO_UNET_DEPTH 4

/* ---- helpers (zoo.c) ---- */

/* A channel count scaled by the width multiplier: base * width_mult rounded
 * to the nearest integer, at least 1. Cannot fail: validation bounds
 * width_mult so the result fits an int. */
int brg_zoo_width(const brg_zoo_config *cfg, int base);

/* Format a layer, tensor or block name into buf (BRG_NAME_MAX bytes).
 * Fails with BRG_ERR_INTERNAL if it would not fit, rather than silently
 * truncating into a name that might collide. */
brg_status brg_zoo_name(char *buf, const char *fmt, ...) BRG_PRINTF(2, 3);

/* The BatchNorm flavour of a model family. */
typedef struct brg_zoo_bn {
    float epsilon;
    int scale;  /* learnable gamma */
    int center; /* learnable beta */
} brg_zoo_bn;

/* A 2D convolution for brg_zoo_conv_bn. */
typedef struct brg_zoo_conv {
    int out_channels;     /* already scaled by the width multiplier */
    int kernel_h, kernel_w;
    int stride;           /* same in both directions */
    int pad_h, pad_w;
} brg_zoo_conv;

/* Add "<prefix>.conv<suffix>" (no bias) reading input, then
 * "<prefix>.bn<suffix>" and, when relu is set, "<prefix>.relu<suffix>";
 * each writes a tensor named like the layer. The last one's name goes to
 * out (BRG_NAME_MAX bytes), which may be the same buffer as input. */
brg_status brg_zoo_conv_bn(brg_model *m, const char *prefix, const char *suffix, const char *input,
                           const brg_zoo_conv *conv, const brg_zoo_bn *bn, int relu, char *out);

/* Fail with a clear message (BRG_ERR_INVALID_ARGUMENT) when a linear layer
 * with out_features outputs reading tensor input would have a weight too
 * large to count in 64 bits; an enormous input can do that to VGG's fc6. */
brg_status brg_zoo_check_linear(const brg_model *m, const char *layer, const char *input, int64_t out_features);

#ifdef __cplusplus
}
#endif

#endif /* BRIGADE_ZOO_IMPL_H */
