/* The model zoo: the registry, option checks, and helpers the builders in
 * zoo_*.c share. Architectures: docs/zoo.md. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "zoo-impl.h"

typedef struct zoo_model {
    brg_zoo_entry entry;
    brg_zoo_builder build;
    int multiple; /* input height and width must be multiples of this */
} zoo_model;

static const zoo_model zoo_models[] = {
    {{"fmnist-cnn", "small CNN for Fashion-MNIST: two conv+BN+ReLU+maxpool blocks, a 128-unit hidden layer", 1, 28,
      28, 10},
     brg_zoo_build_fmnist_cnn, 1},
    {{"vgg16", "VGG-16 (torchvision): 13 3x3 convolutions with bias, 5 max-pools, 4096-4096 classifier", 3, 224, 224,
      1000},
     brg_zoo_build_vgg16, 1},
    {{"resnet18", "ResNet-18 (torchvision): basic blocks [2, 2, 2, 2]", 3, 224, 224, 1000}, brg_zoo_build_resnet18, 1},
    {{"resnet50", "ResNet-50 v1.5 (torchvision): bottleneck blocks [3, 4, 6, 3]", 3, 224, 224, 1000},
     brg_zoo_build_resnet50, 1},
    {{"resnet101", "ResNet-101 v1.5 (torchvision): bottleneck blocks [3, 4, 23, 3]", 3, 224, 224, 1000},
     brg_zoo_build_resnet101, 1},
    {{"resnet152", "ResNet-152 v1.5 (torchvision): bottleneck blocks [3, 8, 36, 3]", 3, 224, 224, 1000},
     brg_zoo_build_resnet152, 1},
    {{"inception-v3", "Inception-v3 (Keras application): stem, mixed0..mixed10, head", 3, 299, 299, 1000},
     brg_zoo_build_inception_v3, 1},
    {{"inception-v3-torchvision",
      "Inception-v3 (torchvision, no AuxLogits): BatchNorm with scale, average pools counting the padding, dropout",
      3, 299, 299, 1000},
     brg_zoo_build_inception_v3_torchvision, 1},
    {{"unet", "U-Net: 4 levels from 64 channels, nearest upsampling, skip concatenations; per-pixel logits", 3, 256,
      256, 2},
     brg_zoo_build_unet, 1 << BRG_ZOO_UNET_DEPTH},
};

#define ZOO_COUNT ((int)(sizeof zoo_models / sizeof zoo_models[0]))

int brg_zoo_count(void) { return ZOO_COUNT; }

const brg_zoo_entry *brg_zoo_entry_at(int index)
{
    return index >= 0 && index < ZOO_COUNT ? &zoo_models[index].entry : NULL;
}

static const zoo_model *find_model(const char *name)
{
    if (!name) return NULL;
    for (int i = 0; i < ZOO_COUNT; i++)
        if (strcmp(zoo_models[i].entry.name, name) == 0) return &zoo_models[i];
    return NULL;
}

const brg_zoo_entry *brg_zoo_find(const char *name)
{
    const zoo_model *z = find_model(name);
    return z ? &z->entry : NULL;
}

/* ---- helpers for the builders ---- */

int brg_zoo_width(const brg_zoo_config *cfg, int base)
{
    double w = floor((double)base * cfg->width_mult + 0.5);
    return w < 1.0 ? 1 : (int)w;
}

brg_status brg_zoo_name(char *buf, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, BRG_NAME_MAX, fmt, ap);
    va_end(ap);
    if (n < 0 || n >= BRG_NAME_MAX)
        return brg_error(BRG_ERR_INTERNAL, "zoo: name '%s...' is longer than %d characters", buf, BRG_NAME_MAX - 1);
    return BRG_OK;
}

brg_status brg_zoo_conv_bn(brg_model *m, const char *prefix, const char *suffix, const char *input,
                           const brg_zoo_conv *conv, const brg_zoo_bn *bn, int relu, char *out)
{
    char conv_name[BRG_NAME_MAX], bn_name[BRG_NAME_MAX];
    BRG_CHECK(brg_zoo_name(conv_name, "%s.conv%s", prefix, suffix));
    BRG_CHECK(brg_zoo_name(bn_name, "%s.bn%s", prefix, suffix));
    /* input is read before out is written, so they may share a buffer. */
    BRG_CHECK(brg_model_add_conv2d(m, conv_name, input, conv->out_channels, conv->kernel_h, conv->kernel_w,
                                   conv->stride, conv->stride, conv->pad_h, conv->pad_w, 0));
    BRG_CHECK(brg_model_add_batchnorm(m, bn_name, conv_name, bn->epsilon, bn->scale, bn->center));
    if (!relu) return brg_zoo_name(out, "%s", bn_name);
    BRG_CHECK(brg_zoo_name(out, "%s.relu%s", prefix, suffix));
    return brg_model_add_relu(m, out, bn_name);
}

brg_status brg_zoo_check_linear(const brg_model *m, const char *layer, const char *input, int64_t out_features)
{
    int t = brg_model_find_tensor(m, input);
    if (t < 0) return BRG_OK; /* the builder reports the missing tensor */
    const brg_model_tensor *x = brg_model_get_tensor(m, t);
    /* Keep the weight (and its byte size) far inside int64: below 2^56. */
    const double limit = 72057594037927936.0;
    double in = (double)x->c * (double)x->h * (double)x->w;
    if (in * (double)out_features >= limit)
        return brg_error(BRG_ERR_INVALID_ARGUMENT,
                         "layer '%s': a linear layer from '%s' [%lld, %lld, %lld] to %lld features would have "
                         "%.3g weights; use a smaller input or width multiplier",
                         layer, input, (long long)x->c, (long long)x->h, (long long)x->w, (long long)out_features,
                         in * (double)out_features);
    return BRG_OK;
}

/* ---- building ---- */

/* Create, build and finalize z at cfg. On failure *out is NULL and the
 * builder's message stands. */
static brg_status build_at(const zoo_model *z, const brg_zoo_config *cfg, brg_model **out)
{
    brg_model *m = NULL;
    *out = NULL;
    brg_status ret = BRG_OK;
    BRG_CHECK_GOTO(brg_model_create(z->entry.name, cfg->channels, cfg->height, cfg->width, &m), ret, fail);
    BRG_CHECK_GOTO(z->build(m, cfg), ret, fail);
    BRG_CHECK_GOTO(brg_model_finalize(m, NULL), ret, fail);
    *out = m;
exit:
    return ret;
fail:
    brg_model_destroy(m);
    goto exit;
}

static int builds(const zoo_model *z, const brg_zoo_config *cfg)
{
    brg_model *m = NULL;
    brg_status st = build_at(z, cfg, &m);
    brg_model_destroy(m);
    return st == BRG_OK;
}

/* The smallest extent (a multiple of z->multiple, at most hi) that builds
 * when it replaces the height (along_h) or width of cfg, or -1 if even hi
 * does not. Every zoo model's extents shrink through convolutions and
 * pools only, so "builds" is monotonic in each extent and a binary search
 * is exact. */
static int64_t smallest_extent(const zoo_model *z, brg_zoo_config cfg, int along_h, int64_t hi)
{
    int64_t step = z->multiple, lo_k = 1, hi_k = hi / step;
    int64_t *field = along_h ? &cfg.height : &cfg.width;
    *field = hi_k * step;
    if (hi_k < 1 || !builds(z, &cfg)) return -1;
    while (lo_k < hi_k) {
        int64_t mid = lo_k + (hi_k - lo_k) / 2;
        *field = mid * step;
        if (builds(z, &cfg))
            hi_k = mid;
        else
            lo_k = mid + 1;
    }
    return hi_k * step;
}

/* Called after building z at cfg failed with a shape error: if the input
 * is too small, replace the message with one that says what the smallest
 * input is and why this one failed. */
static brg_status explain_shape_error(const zoo_model *z, const brg_zoo_config *cfg, brg_status st)
{
    char why[768];
    snprintf(why, sizeof why, "%s", brg_last_error());
    const brg_zoo_entry *e = &z->entry;
    int64_t big_h = cfg->height > e->height ? cfg->height : e->height;
    int64_t big_w = cfg->width > e->width ? cfg->width : e->width;
    brg_zoo_config probe = *cfg;
    probe.width = big_w;
    int64_t min_h = smallest_extent(z, probe, 1, big_h);
    probe = *cfg;
    probe.height = big_h;
    int64_t min_w = smallest_extent(z, probe, 0, big_w);
    if (min_h < 0 || min_w < 0 || (cfg->height >= min_h && cfg->width >= min_w))
        return brg_error(st, "zoo model '%s' cannot be built at input %lldx%lldx%lld: %s", e->name,
                         (long long)cfg->channels, (long long)cfg->height, (long long)cfg->width, why);
    return brg_error(BRG_ERR_INVALID_ARGUMENT,
                     "zoo model '%s': input %lldx%lldx%lld is too small (%s); it needs a height of at least %lld "
                     "and a width of at least %lld, e.g. %lldx%lldx%lld",
                     e->name, (long long)cfg->channels, (long long)cfg->height, (long long)cfg->width, why,
                     (long long)min_h, (long long)min_w, (long long)cfg->channels, (long long)min_h,
                     (long long)min_w);
}

/* Turn options (NULL, or fields 0 = standard) into a checked config. */
static brg_status resolve_options(const zoo_model *z, const brg_zoo_options *o, brg_zoo_config *cfg)
{
    const brg_zoo_entry *e = &z->entry;
    cfg->channels = e->channels;
    cfg->height = e->height;
    cfg->width = e->width;
    cfg->classes = e->classes;
    cfg->width_mult = 1.0;
    if (!o) return BRG_OK;
    if (o->channels < 0 || o->height < 0 || o->width < 0 || o->channels > (1 << 24) || o->height > (1 << 20) ||
        o->width > (1 << 20))
        return brg_error(BRG_ERR_INVALID_ARGUMENT,
                         "zoo model '%s': input %lldx%lldx%lld is out of range: channels must be 1..%d and height "
                         "and width 1..%d (0 = the standard %lldx%lldx%lld)",
                         e->name, (long long)o->channels, (long long)o->height, (long long)o->width, 1 << 24,
                         1 << 20, (long long)e->channels, (long long)e->height, (long long)e->width);
    if (o->classes < 0 || o->classes > BRG_ZOO_MAX_CLASSES)
        return brg_error(BRG_ERR_INVALID_ARGUMENT,
                         "zoo model '%s': classes %lld is out of range; it must be 1..%d (0 = the standard %lld)",
                         e->name, (long long)o->classes, BRG_ZOO_MAX_CLASSES, (long long)e->classes);
    if (!(o->width_mult >= 0.0 && o->width_mult <= BRG_ZOO_MAX_WIDTH_MULT))
        return brg_error(BRG_ERR_INVALID_ARGUMENT,
                         "zoo model '%s': width multiplier %g is out of range; it must be greater than 0 and at "
                         "most %g (0 = the standard 1)",
                         e->name, o->width_mult, BRG_ZOO_MAX_WIDTH_MULT);
    if (o->channels) cfg->channels = o->channels;
    if (o->height) cfg->height = o->height;
    if (o->width) cfg->width = o->width;
    if (o->classes) cfg->classes = o->classes;
    if (o->width_mult > 0.0) cfg->width_mult = o->width_mult;
    return BRG_OK;
}

brg_status brg_zoo_build(const char *name, const brg_zoo_options *options, brg_model **out)
{
    if (!out) return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_zoo_build: out is NULL");
    *out = NULL;
    const zoo_model *z = find_model(name);
    if (!z) {
        char list[512] = "";
        size_t used = 0;
        for (int i = 0; i < ZOO_COUNT && used < sizeof list; i++) {
            int n = snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "", zoo_models[i].entry.name);
            if (n < 0) break;
            used += (size_t)n;
        }
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "unknown zoo model '%s'; the zoo has: %s",
                         name ? name : "(null)", list);
    }
    brg_zoo_config cfg;
    BRG_CHECK(resolve_options(z, options, &cfg));
    if (cfg.height % z->multiple != 0 || cfg.width % z->multiple != 0) {
        int64_t h = (cfg.height + z->multiple - 1) / z->multiple * z->multiple;
        int64_t w = (cfg.width + z->multiple - 1) / z->multiple * z->multiple;
        return brg_error(BRG_ERR_INVALID_ARGUMENT,
                         "zoo model '%s': input %lldx%lldx%lld does not fit: its height and width must be "
                         "multiples of %d, e.g. %lldx%lldx%lld",
                         z->entry.name, (long long)cfg.channels, (long long)cfg.height, (long long)cfg.width,
                         z->multiple, (long long)cfg.channels, (long long)h, (long long)w);
    }
    brg_status st = build_at(z, &cfg, out);
    if (st == BRG_ERR_SHAPE) return explain_shape_error(z, &cfg, st);
    if (st != BRG_OK) return brg_error_context(st, "zoo model '%s'", z->entry.name);
    return BRG_OK;
}
