/* The model zoo: published parameter counts, block structure, shapes at
 * the standard and other inputs, option checks and seeded initialization. */
#include <stdint.h>

#include "testutil.h"

/* Build name with options (NULL = standard); NULL on failure (reported). */
static brg_model *build(const char *name, const brg_zoo_options *o)
{
    brg_model *m = NULL;
    CHECK_OK(brg_zoo_build(name, o, &m));
    return m;
}

static brg_zoo_options opts(int64_t c, int64_t h, int64_t w, int64_t classes, double width_mult)
{
    brg_zoo_options o = {c, h, w, classes, width_mult};
    return o;
}

/* Whether tensor name exists in m with shape [c, h, w]. */
static int tensor_is(const brg_model *m, const char *name, int64_t c, int64_t h, int64_t w)
{
    int t = brg_model_find_tensor(m, name);
    if (t < 0) {
        fprintf(stderr, "  no tensor '%s' in %s\n", name, brg_model_name(m));
        return 0;
    }
    const brg_model_tensor *x = brg_model_get_tensor(m, t);
    if (x->c == c && x->h == h && x->w == w) return 1;
    fprintf(stderr, "  '%s' is [%lld, %lld, %lld], expected [%lld, %lld, %lld]\n", name, (long long)x->c,
            (long long)x->h, (long long)x->w, (long long)c, (long long)h, (long long)w);
    return 0;
}

static int output_is(const brg_model *m, int64_t c, int64_t h, int64_t w)
{
    const brg_model_tensor *y = brg_model_get_tensor(m, brg_model_output(m));
    return y && tensor_is(m, y->name, c, h, w);
}

/* The layer named name, or NULL. Layers and their output tensors share
 * names in the zoo, so the tensor's producer finds it. */
static const brg_layer *layer_named(const brg_model *m, const char *name)
{
    int t = brg_model_find_tensor(m, name);
    if (t < 0) return NULL;
    const brg_layer *l = brg_model_get_layer(m, brg_model_get_tensor(m, t)->producer);
    return l && strcmp(l->name, name) == 0 ? l : NULL;
}

static int64_t layer_trainable(const brg_model *m, const char *name)
{
    const brg_layer *l = layer_named(m, name);
    return l ? l->trainable_params : -1;
}

static int block_of(const brg_model *m, const char *tensor)
{
    int t = brg_model_find_tensor(m, tensor);
    return t < 0 ? -2 : brg_model_get_tensor(m, t)->block;
}

static void test_registry(void)
{
    static const char *const names[] = {"fmnist-cnn", "vgg16",        "resnet18",
                                        "resnet50",   "resnet101",    "resnet152",
                                        "inception-v3", "inception-v3-torchvision", "unet"};
    const int n = (int)(sizeof names / sizeof names[0]);
    CHECK(brg_zoo_count() == n);
    CHECK(brg_zoo_entry_at(-1) == NULL);
    CHECK(brg_zoo_entry_at(brg_zoo_count()) == NULL);
    CHECK(brg_zoo_find("resnet-50") == NULL);
    CHECK(brg_zoo_find(NULL) == NULL);
    for (int i = 0; i < n; i++) {
        const brg_zoo_entry *e = brg_zoo_find(names[i]);
        CHECK_MSG(e != NULL, "%s is not in the zoo", names[i]);
        if (!e) continue;
        CHECK(brg_zoo_entry_at(i) == e);
        CHECK(e->description && e->description[0]);
        brg_model *m = build(names[i], NULL);
        if (!m) continue;
        CHECK(brg_model_is_final(m));
        CHECK(strcmp(brg_model_name(m), names[i]) == 0);
        CHECK(tensor_is(m, "input", e->channels, e->height, e->width));
        CHECK(brg_model_classes(m) == e->classes);
        /* Every block is non-empty and its layers are contiguous. */
        int next = 0;
        for (int b = 0; b < brg_model_block_count(m); b++) {
            int first, count;
            brg_model_block_layers(m, b, &first, &count);
            CHECK(first == next && count > 0);
            next = first + count;
        }
        CHECK(next == brg_model_layer_count(m));
        brg_model_destroy(m);
    }
}

static void test_published_counts(void)
{
    static const struct {
        const char *name;
        int64_t trainable;
    } want[] = {
        {"vgg16", 138357544},    {"resnet18", 11689512},  {"resnet50", 25557032},
        {"resnet101", 44549160}, {"resnet152", 60192808}, {"inception-v3", 23817352},
        /* torchvision's inception_v3(aux_logits=False): sum(p.numel() for p
         * in model.parameters()), BatchNorm's gammas included. */
        {"inception-v3-torchvision", 23834568},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        brg_model *m = build(want[i].name, NULL);
        if (!m) continue;
        CHECK_MSG(brg_model_trainable_params(m) == want[i].trainable, "%s: %lld trainable, expected %lld",
                  want[i].name, (long long)brg_model_trainable_params(m), (long long)want[i].trainable);
        brg_model_destroy(m);
    }
    brg_model *m = build("vgg16", NULL);
    if (m) {
        CHECK(brg_model_frozen_params(m) == 0);
        brg_model_destroy(m);
    }
}

static void test_fmnist(void)
{
    brg_model *m = build("fmnist-cnn", NULL);
    if (!m) return;
    CHECK(output_is(m, 10, 1, 1));
    CHECK(brg_model_block_count(m) == 4);
    CHECK(brg_model_find_block(m, "conv1") == 0 && brg_model_find_block(m, "conv2") == 1);
    CHECK(brg_model_find_block(m, "fc") == 2 && brg_model_find_block(m, "head") == 3);
    CHECK(tensor_is(m, "conv1.pool", 32, 14, 14));
    CHECK(tensor_is(m, "conv2.pool", 64, 7, 7));
    /* By hand: conv 1*32*9 + BN 2*32, conv 32*64*9 + BN 2*64,
     * linear 3136*128 + 128, linear 128*10 + 10. */
    CHECK(brg_model_trainable_params(m) == 288 + 64 + 18432 + 128 + 401536 + 1290);
    CHECK(brg_model_frozen_params(m) == 2 * (32 + 64));
    /* Cheap: multiply-adds per sample well under 10 million. */
    int64_t macs = 0;
    for (int i = 0; i < brg_model_layer_count(m); i++) {
        const brg_layer *l = brg_model_get_layer(m, i);
        const brg_model_tensor *y = brg_model_get_tensor(m, l->output);
        if (l->desc.kind == BRG_LAYER_CONV2D || l->desc.kind == BRG_LAYER_LINEAR) {
            brg_param_info p;
            CHECK_OK(brg_layer_param(l, m, 0, &p));
            macs += p.count * y->h * y->w;
        }
    }
    CHECK_MSG(macs > 1000000 && macs < 10000000, "%lld multiply-adds", (long long)macs);
    brg_model_destroy(m);

    /* width_mult 2: conv1 has twice the weights (its input stays 1
     * channel), conv2 four times; by hand 576 + 128 + 73728 + 256 +
     * (6272*256 + 256) + (256*10 + 10). */
    brg_zoo_options o = opts(0, 0, 0, 0, 2.0);
    m = build("fmnist-cnn", &o);
    if (!m) return;
    CHECK(layer_trainable(m, "conv1.conv") == 2 * 288);
    CHECK(layer_trainable(m, "conv2.conv") == 4 * 18432);
    CHECK(brg_model_trainable_params(m) == 1683146);
    CHECK(output_is(m, 10, 1, 1));
    brg_model_destroy(m);

    /* Rounding to the nearest integer, at least one channel. */
    o = opts(0, 0, 0, 0, 0.3);
    m = build("fmnist-cnn", &o);
    if (m) {
        CHECK(tensor_is(m, "conv1.pool", 10, 14, 14)); /* 9.6 -> 10 */
        CHECK(tensor_is(m, "fc1", 38, 1, 1));         /* 38.4 -> 38 */
        brg_model_destroy(m);
    }
    o = opts(0, 0, 0, 0, 0.001);
    m = build("fmnist-cnn", &o);
    if (m) {
        CHECK(tensor_is(m, "conv1.pool", 1, 14, 14));
        CHECK(output_is(m, 10, 1, 1));
        brg_model_destroy(m);
    }
}

static void test_vgg16(void)
{
    brg_model *m = build("vgg16", NULL);
    if (!m) return;
    CHECK(brg_model_block_count(m) == 16);
    CHECK(tensor_is(m, "pool5", 512, 7, 7));
    CHECK(output_is(m, 1000, 1, 1));
    const brg_layer *fc6 = layer_named(m, "fc6");
    brg_param_info p;
    CHECK(fc6 != NULL);
    if (fc6) {
        CHECK_OK(brg_layer_param(fc6, m, 0, &p));
        CHECK(p.ndim == 2 && p.shape[0] == 4096 && p.shape[1] == 512 * 7 * 7);
    }
    const brg_layer *c = layer_named(m, "conv1_1");
    CHECK(c && c->desc.bias == 1 && c->desc.pad_h == 1 && c->desc.kernel_h == 3);
    brg_model_destroy(m);

    /* At 64 x 64 the classifier reads 512 x 2 x 2. */
    brg_zoo_options o = opts(0, 64, 64, 10, 0);
    m = build("vgg16", &o);
    if (!m) return;
    CHECK(tensor_is(m, "pool5", 512, 2, 2));
    CHECK(layer_trainable(m, "fc6") == 4096LL * 2048 + 4096);
    CHECK(output_is(m, 10, 1, 1));
    brg_model_destroy(m);
}

static void test_resnet(void)
{
    static const struct {
        const char *name;
        int blocks;
    } nets[] = {{"resnet18", 2 + 8}, {"resnet50", 2 + 16}, {"resnet101", 2 + 33}, {"resnet152", 2 + 50}};
    for (size_t i = 0; i < sizeof nets / sizeof nets[0]; i++) {
        brg_model *m = build(nets[i].name, NULL);
        if (!m) continue;
        CHECK_MSG(brg_model_block_count(m) == nets[i].blocks, "%s: %d blocks", nets[i].name,
                  brg_model_block_count(m));
        CHECK(strcmp(brg_model_block_name(m, 0), "stem") == 0);
        CHECK(strcmp(brg_model_block_name(m, 1), "layer1.0") == 0);
        CHECK(strcmp(brg_model_block_name(m, brg_model_block_count(m) - 1), "head") == 0);
        CHECK(tensor_is(m, "maxpool", 64, 56, 56));
        CHECK(output_is(m, 1000, 1, 1));
        /* A residual block's add and its shortcut live in its own block, so
         * one tensor crosses each boundary between residual blocks. */
        int ids[8], n = 0;
        CHECK_OK(brg_model_boundary_tensors(m, 1, ids, 8, &n));
        CHECK(n == 1);
        brg_model_destroy(m);
    }

    brg_model *m = build("resnet50", NULL);
    if (!m) return;
    CHECK(tensor_is(m, "layer4.2.relu", 2048, 7, 7));
    CHECK(tensor_is(m, "layer1.0.relu", 256, 56, 56));
    /* v1.5: the stride is on the 3x3 convolution. */
    const brg_layer *c1 = layer_named(m, "layer2.0.conv1"), *c2 = layer_named(m, "layer2.0.conv2");
    CHECK(c1 && c1->desc.stride_h == 1 && c1->desc.kernel_h == 1);
    CHECK(c2 && c2->desc.stride_h == 2 && c2->desc.kernel_h == 3);
    CHECK(layer_named(m, "layer1.0.downsample.0") != NULL); /* 64 -> 256 channels */
    CHECK(layer_named(m, "layer1.1.downsample.0") == NULL);
    CHECK(block_of(m, "layer3.4.add") == brg_model_find_block(m, "layer3.4"));
    const brg_layer *bn = layer_named(m, "bn1");
    CHECK(bn && bn->desc.scale == 1 && bn->desc.center == 1 && bn->desc.epsilon == 1e-5f);
    const brg_layer *conv1 = layer_named(m, "conv1");
    CHECK(conv1 && conv1->desc.bias == 0 && conv1->desc.kernel_h == 7 && conv1->desc.pad_h == 3);
    brg_model_destroy(m);

    /* Other input and classes. */
    brg_zoo_options o = opts(0, 128, 128, 10, 0);
    m = build("resnet50", &o);
    if (m) {
        CHECK(tensor_is(m, "layer4.2.relu", 2048, 4, 4));
        CHECK(output_is(m, 10, 1, 1));
        CHECK(brg_model_trainable_params(m) == 25557032 - 1000 * 2049 + 10 * 2049);
        brg_model_destroy(m);
    }

    /* width_mult 2 on ResNet-18: a 3x3 conv between scaled widths has four
     * times the weights, the stem conv (3 input channels) twice. */
    o = opts(0, 0, 0, 0, 2.0);
    m = build("resnet18", &o);
    if (m) {
        CHECK(layer_trainable(m, "layer3.0.conv1") == 4 * 128 * 256 * 9);
        CHECK(layer_trainable(m, "conv1") == 2 * 64 * 3 * 49);
        CHECK(layer_trainable(m, "fc") == 1000 * 1024 + 1000);
        CHECK(tensor_is(m, "layer4.1.relu", 1024, 7, 7));
        double r = (double)brg_model_trainable_params(m) / 11689512.0;
        CHECK_MSG(r > 3.8 && r < 4.0, "ratio %g", r);
        brg_model_destroy(m);
    }
}

static void test_inception(void)
{
    brg_model *m = build("inception-v3", NULL);
    if (!m) return;
    CHECK(brg_model_trainable_params(m) == 23817352);
    CHECK(brg_model_frozen_params(m) == 34432);
    CHECK(brg_model_trainable_params(m) + brg_model_frozen_params(m) == 23851784);
    CHECK(brg_model_block_count(m) == 13);
    char want[16];
    for (int b = 0; b < 13 && b < brg_model_block_count(m); b++) {
        if (b == 0)
            snprintf(want, sizeof want, "stem");
        else if (b == 12)
            snprintf(want, sizeof want, "head");
        else
            snprintf(want, sizeof want, "mixed%d", b - 1);
        CHECK_MSG(strcmp(brg_model_block_name(m, b), want) == 0, "block %d is '%s', expected '%s'", b,
                  brg_model_block_name(m, b), want);
    }
    CHECK(output_is(m, 1000, 1, 1));
    CHECK(tensor_is(m, "stem.maxpool2", 192, 35, 35));
    CHECK(tensor_is(m, "mixed0", 256, 35, 35));
    CHECK(tensor_is(m, "mixed1", 288, 35, 35));
    CHECK(tensor_is(m, "mixed2", 288, 35, 35));
    CHECK(tensor_is(m, "mixed3", 768, 17, 17));
    CHECK(tensor_is(m, "mixed7", 768, 17, 17));
    CHECK(tensor_is(m, "mixed8", 1280, 8, 8));
    CHECK(tensor_is(m, "mixed9", 2048, 8, 8));
    CHECK(tensor_is(m, "mixed10", 2048, 8, 8));
    /* The nested concats of mixed9 and mixed10. */
    CHECK(tensor_is(m, "mixed9.branch3x3", 768, 8, 8));
    CHECK(tensor_is(m, "mixed10.branch3x3dbl", 768, 8, 8));
    /* Keras conventions: BN without scale, epsilon 1e-3; no conv bias;
     * 'same' 1x7 -> pad 0x3; average pools exclude the padding. */
    const brg_layer *bn = layer_named(m, "mixed4.branch7x7_2.bn");
    CHECK(bn && bn->desc.scale == 0 && bn->desc.center == 1 && bn->desc.epsilon == 1e-3f);
    const brg_layer *c = layer_named(m, "mixed4.branch7x7_2.conv");
    CHECK(c && c->desc.bias == 0 && c->desc.kernel_h == 1 && c->desc.kernel_w == 7 && c->desc.pad_h == 0 &&
          c->desc.pad_w == 3);
    c = layer_named(m, "mixed9.branch3x3_2b.conv");
    CHECK(c && c->desc.kernel_h == 3 && c->desc.kernel_w == 1 && c->desc.pad_h == 1 && c->desc.pad_w == 0);
    int avgpools = 0;
    for (int i = 0; i < brg_model_layer_count(m); i++) {
        const brg_layer *l = brg_model_get_layer(m, i);
        if (l->desc.kind != BRG_LAYER_AVGPOOL) continue;
        avgpools++;
        CHECK(l->desc.count_include_pad == 0 && l->desc.kernel_h == 3 && l->desc.stride_h == 1 &&
              l->desc.pad_h == 1);
    }
    CHECK(avgpools == 9); /* mixed0-2, mixed4-7, mixed9-10 */
    /* The module outputs alone cross the boundaries. */
    for (int b = 0; b + 1 < brg_model_block_count(m); b++) {
        int ids[4], n = 0;
        CHECK_OK(brg_model_boundary_tensors(m, b, ids, 4, &n));
        CHECK(n == 1);
    }
    brg_model_destroy(m);

    brg_zoo_options o = opts(0, 512, 512, 0, 0);
    m = build("inception-v3", &o);
    if (m) {
        CHECK(tensor_is(m, "mixed2", 288, 61, 61));
        CHECK(tensor_is(m, "mixed10", 2048, 14, 14));
        CHECK(output_is(m, 1000, 1, 1));
        CHECK(brg_model_trainable_params(m) == 23817352);
        brg_model_destroy(m);
    }
    /* The smallest input Keras accepts, 75 x 75, builds. */
    o = opts(0, 75, 75, 0, 0);
    m = build("inception-v3", &o);
    if (m) {
        CHECK(tensor_is(m, "mixed10", 2048, 1, 1));
        brg_model_destroy(m);
    }
}

/* torchvision's flavour: the Keras one's layers and names, BatchNorm with
 * gamma, average pools that count the padding, and a dropout of 0.5 before
 * the classifier; its parameters are the Keras flavour's plus one gamma
 * per BatchNorm channel. */
static void test_inception_torchvision(void)
{
    brg_model *tv = build("inception-v3-torchvision", NULL);
    brg_model *keras = build("inception-v3", NULL);
    if (!tv || !keras) goto done;
    CHECK(brg_model_trainable_params(tv) == 23834568);
    CHECK(brg_model_frozen_params(tv) == 34432);
    CHECK(brg_model_trainable_params(tv) - brg_model_trainable_params(keras) == 34432 / 2);
    CHECK(brg_model_block_count(tv) == brg_model_block_count(keras));
    CHECK(brg_model_layer_count(tv) == brg_model_layer_count(keras) + 1);
    CHECK(output_is(tv, 1000, 1, 1));
    CHECK(tensor_is(tv, "mixed10", 2048, 8, 8));
    const brg_layer *d = layer_named(tv, "dropout");
    CHECK(d && d->desc.kind == BRG_LAYER_DROPOUT && d->desc.rate == 0.5f);
    CHECK(layer_named(keras, "dropout") == NULL);
    int avgpools = 0, bns = 0;
    for (int i = 0, k = 0; i < brg_model_layer_count(tv); i++) {
        const brg_layer *l = brg_model_get_layer(tv, i);
        if (l->desc.kind == BRG_LAYER_DROPOUT) continue;
        /* The same layer, name and shape in both flavours, in the same order. */
        const brg_layer *kl = brg_model_get_layer(keras, k++);
        CHECK_MSG(kl && strcmp(l->name, kl->name) == 0 && l->desc.kind == kl->desc.kind,
                  "layer %d is '%s' in torchvision's flavour and '%s' in Keras's", i, l->name, kl ? kl->name : "-");
        if (l->desc.kind == BRG_LAYER_AVGPOOL) {
            avgpools++;
            CHECK(l->desc.count_include_pad == 1 && l->desc.kernel_h == 3 && l->desc.stride_h == 1 &&
                  l->desc.pad_h == 1);
        }
        if (l->desc.kind == BRG_LAYER_BATCHNORM) {
            bns++;
            CHECK(l->desc.scale == 1 && l->desc.center == 1 && l->desc.epsilon == 1e-3f);
            brg_param_info p;
            CHECK(brg_layer_param_count(l, tv) == 4);
            CHECK_OK(brg_layer_param(l, tv, 0, &p));
            CHECK(strcmp(p.name, "gamma") == 0 && p.trainable);
        }
    }
    CHECK(avgpools == 9);
    CHECK(bns == 94);
done:
    brg_model_destroy(tv);
    brg_model_destroy(keras);
}

static void test_unet(void)
{
    brg_model *m = build("unet", NULL);
    if (!m) return;
    CHECK(output_is(m, 2, 256, 256));
    CHECK(brg_model_block_count(m) == 10);
    static const char *const blocks[] = {"enc1", "enc2", "enc3", "enc4", "bottleneck",
                                         "dec4", "dec3", "dec2", "dec1", "head"};
    for (int b = 0; b < 10; b++) CHECK(brg_model_find_block(m, blocks[b]) == b);
    CHECK(tensor_is(m, "bottleneck.relu2", 1024, 16, 16));
    CHECK(tensor_is(m, "dec4.concat", 1024, 32, 32));
    CHECK(tensor_is(m, "dec1.relu2", 64, 256, 256));
    /* By hand (see docs/zoo.md). */
    CHECK(brg_model_trainable_params(m) == 34520258);

    /* Long skips: after enc2 the skips of enc1 and enc2 cross; after the
     * bottleneck all four skips and the main path; after dec2 the skip of
     * enc1 and the main path; after dec1 only the main path. */
    int ids[16], n = 0;
    CHECK_OK(brg_model_boundary_tensors(m, brg_model_find_block(m, "enc1"), ids, 16, &n));
    CHECK(n == 1);
    CHECK_OK(brg_model_boundary_tensors(m, brg_model_find_block(m, "enc2"), ids, 16, &n));
    CHECK(n == 2);
    CHECK_OK(brg_model_boundary_tensors(m, brg_model_find_block(m, "bottleneck"), ids, 16, &n));
    CHECK(n == 5);
    CHECK_OK(brg_model_boundary_tensors(m, brg_model_find_block(m, "dec3"), ids, 16, &n));
    CHECK(n == 3);
    CHECK_OK(brg_model_boundary_tensors(m, brg_model_find_block(m, "dec2"), ids, 16, &n));
    CHECK(n == 2);
    int skip = brg_model_find_tensor(m, "enc1.relu2"), found = 0;
    for (int i = 0; i < n && i < 16; i++) found |= ids[i] == skip;
    CHECK(found);
    CHECK_OK(brg_model_boundary_tensors(m, brg_model_find_block(m, "dec1"), ids, 16, &n));
    CHECK(n == 1);
    brg_model_destroy(m);

    brg_zoo_options o = opts(1, 64, 96, 5, 0.5);
    m = build("unet", &o);
    if (m) {
        CHECK(output_is(m, 5, 64, 96));
        CHECK(tensor_is(m, "bottleneck.relu2", 512, 4, 6));
        brg_model_destroy(m);
    }
}

static void test_errors(void)
{
    brg_model *m = (brg_model *)&m; /* must be set to NULL on failure */
    CHECK_STATUS(brg_zoo_build("resnet-50", NULL, &m), BRG_ERR_INVALID_ARGUMENT);
    CHECK_ERROR_HAS("unknown zoo model 'resnet-50'");
    CHECK_ERROR_HAS("resnet50");
    CHECK(m == NULL);
    CHECK_STATUS(brg_zoo_build(NULL, NULL, &m), BRG_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(brg_zoo_build("resnet18", NULL, NULL), BRG_ERR_INVALID_ARGUMENT);

    brg_zoo_options o = opts(0, 0, 0, 0, -1.0);
    CHECK_STATUS(brg_zoo_build("resnet18", &o, &m), BRG_ERR_INVALID_ARGUMENT);
    CHECK_ERROR_HAS("width multiplier");
    o.width_mult = -0.001;
    CHECK_STATUS(brg_zoo_build("fmnist-cnn", &o, &m), BRG_ERR_INVALID_ARGUMENT);
    o.width_mult = NAN;
    CHECK_STATUS(brg_zoo_build("fmnist-cnn", &o, &m), BRG_ERR_INVALID_ARGUMENT);
    CHECK_ERROR_HAS("width multiplier");
    o.width_mult = INFINITY;
    CHECK_STATUS(brg_zoo_build("fmnist-cnn", &o, &m), BRG_ERR_INVALID_ARGUMENT);
    o.width_mult = 65.0;
    CHECK_STATUS(brg_zoo_build("fmnist-cnn", &o, &m), BRG_ERR_INVALID_ARGUMENT);
    CHECK_ERROR_HAS("at most 64");
    CHECK(m == NULL);
    /* zoo.h: width_mult 0 means the standard widths, like the other 0s. */
    o.width_mult = 0.0;
    m = build("resnet18", &o);
    if (m) {
        CHECK(brg_model_trainable_params(m) == 11689512);
        brg_model_destroy(m);
    }

    o = opts(0, 0, 0, -1, 0);
    CHECK_STATUS(brg_zoo_build("resnet18", &o, &m), BRG_ERR_INVALID_ARGUMENT);
    CHECK_ERROR_HAS("classes");
    o.classes = 1000001;
    CHECK_STATUS(brg_zoo_build("resnet18", &o, &m), BRG_ERR_INVALID_ARGUMENT);
    CHECK_ERROR_HAS("classes");
    o = opts(-3, 0, 0, 0, 0);
    CHECK_STATUS(brg_zoo_build("resnet18", &o, &m), BRG_ERR_INVALID_ARGUMENT);
    CHECK_ERROR_HAS("out of range");
    o = opts(0, 0, 1 << 21, 0, 0);
    CHECK_STATUS(brg_zoo_build("resnet18", &o, &m), BRG_ERR_INVALID_ARGUMENT);

    /* Too small: the message names the failing layer and the smallest
     * input that works. */
    o = opts(3, 32, 32, 0, 0);
    CHECK_STATUS(brg_zoo_build("inception-v3", &o, &m), BRG_ERR_INVALID_ARGUMENT);
    CHECK_ERROR_HAS("too small");
    CHECK_ERROR_HAS("layer '");
    CHECK_ERROR_HAS("3x75x75");
    CHECK(m == NULL);
    o = opts(0, 74, 299, 0, 0);
    CHECK_STATUS(brg_zoo_build("inception-v3", &o, &m), BRG_ERR_INVALID_ARGUMENT);
    CHECK_ERROR_HAS("height of at least 75");
    o = opts(0, 16, 16, 0, 0);
    CHECK_STATUS(brg_zoo_build("vgg16", &o, &m), BRG_ERR_INVALID_ARGUMENT);
    CHECK_ERROR_HAS("3x32x32");
    o = opts(0, 3, 28, 0, 0);
    CHECK_STATUS(brg_zoo_build("fmnist-cnn", &o, &m), BRG_ERR_INVALID_ARGUMENT);
    CHECK_ERROR_HAS("1x4x4");
    o = opts(0, 250, 256, 0, 0);
    CHECK_STATUS(brg_zoo_build("unet", &o, &m), BRG_ERR_INVALID_ARGUMENT);
    CHECK_ERROR_HAS("multiples of 16");
    CHECK_ERROR_HAS("3x256x256");
    /* ResNets reduce with padded windows and take even a 1x1 input. */
    o = opts(0, 1, 1, 0, 0);
    m = build("resnet50", &o);
    if (m) {
        CHECK(tensor_is(m, "layer4.2.relu", 2048, 1, 1));
        brg_model_destroy(m);
    }
    o = opts(0, 16, 16, 0, 0);
    m = build("unet", &o);
    if (m) {
        CHECK(tensor_is(m, "bottleneck.relu2", 1024, 1, 1));
        brg_model_destroy(m);
    }
    /* An absurd model is refused before its sizes overflow: the builder caps
     * tensors and layers at 2^40 elements. */
    o = opts(0, 1 << 20, 1 << 20, 0, 64.0);
    CHECK_STATUS(brg_zoo_build("vgg16", &o, &m), BRG_ERR_SHAPE);
    CHECK_ERROR_HAS("conv1_1");
    CHECK_ERROR_HAS("2^40");
}

static void test_init(void)
{
    brg_model *m = build("resnet50", NULL);
    if (!m) return;
    const brg_layer *l = layer_named(m, "layer4.0.conv2"); /* 512 x 512 x 3 x 3 */
    CHECK(l != NULL);
    if (!l) {
        brg_model_destroy(m);
        return;
    }
    brg_param_info p;
    CHECK_OK(brg_layer_param(l, m, 0, &p));
    CHECK(p.count == 512 * 512 * 9);
    float *a = malloc((size_t)p.count * sizeof *a), *b = malloc((size_t)p.count * sizeof *b);
    CHECK(a && b);
    if (a && b) {
        CHECK_OK(brg_layer_init_param(l, m, 0, 42, a));
        CHECK_OK(brg_layer_init_param(l, m, 0, 42, b));
        CHECK(memcmp(a, b, (size_t)p.count * sizeof *a) == 0);
        CHECK_OK(brg_layer_init_param(l, m, 0, 43, b));
        int64_t same = 0;
        for (int64_t i = 0; i < p.count; i++) same += a[i] == b[i];
        CHECK_MSG(same < p.count / 1000, "%lld of %lld equal across seeds", (long long)same, (long long)p.count);
        double sum = 0, sq = 0;
        for (int64_t i = 0; i < p.count; i++) {
            sum += a[i];
            sq += (double)a[i] * a[i];
        }
        double mean = sum / (double)p.count, std = sqrt(sq / (double)p.count - mean * mean);
        double want = sqrt(2.0 / (512.0 * 9.0));
        CHECK_MSG(fabs(mean) < 0.01 * want, "mean %g", mean);
        CHECK_MSG(fabs(std / want - 1.0) < 0.01, "std %g, He normal %g", std, want);
    }
    /* The same layer in an independently built model initializes the same. */
    brg_model *m2 = build("resnet50", NULL);
    if (m2 && a && b) {
        const brg_layer *l2 = layer_named(m2, "layer4.0.conv2");
        CHECK(l2 != NULL);
        if (l2) {
            CHECK_OK(brg_layer_init_param(l2, m2, 0, 42, b));
            CHECK(memcmp(a, b, (size_t)p.count * sizeof *a) == 0);
        }
    }
    brg_model_destroy(m2);
    /* BatchNorm: gamma 1, beta 0. */
    const brg_layer *bn = layer_named(m, "layer4.0.bn2");
    CHECK(bn && brg_layer_param_count(bn, m) == 4);
    if (bn && a) {
        CHECK_OK(brg_layer_init_param(bn, m, 0, 42, a));
        CHECK(a[0] == 1.0f && a[511] == 1.0f);
        CHECK_OK(brg_layer_init_param(bn, m, 1, 42, a));
        CHECK(a[0] == 0.0f && a[511] == 0.0f);
    }
    free(a);
    free(b);
    brg_model_destroy(m);
}

/* brg_model_split_blocks (--cuts fine): the same layers, tensors and
 * parameters in finer blocks, every old boundary kept, Inception's stem cut
 * after each convolution's ReLU and each pool, its modules left whole (their
 * branches are alive together), idempotent. */
static void test_split_blocks(void)
{
    brg_model *m = NULL, *fine = NULL, *again = NULL;
    CHECK_OK(brg_zoo_build("inception-v3", NULL, &m));
    if (!m) return;
    CHECK_OK(brg_model_split_blocks(m, &fine));
    if (!fine) {
        brg_model_destroy(m);
        return;
    }
    CHECK(brg_model_block_count(m) == 13 && brg_model_block_count(fine) == 20);
    CHECK(brg_model_layer_count(fine) == brg_model_layer_count(m));
    CHECK(brg_model_tensor_count(fine) == brg_model_tensor_count(m));
    CHECK(brg_model_trainable_params(fine) == brg_model_trainable_params(m));
    CHECK(brg_model_frozen_params(fine) == brg_model_frozen_params(m));
    CHECK(brg_model_output(fine) == brg_model_output(m));
    for (int i = 0; i < brg_model_layer_count(m); i++) {
        const brg_layer *a = brg_model_get_layer(m, i), *b = brg_model_get_layer(fine, i);
        CHECK_MSG(strcmp(a->name, b->name) == 0 && a->output == b->output && a->n_inputs == b->n_inputs,
                  "layer %d: '%s' and '%s'", i, a->name, b->name);
    }
    /* Every boundary of the model is one of the finer model. */
    for (int b = 0; b < brg_model_block_count(m); b++) {
        int first, count;
        brg_model_block_layers(m, b, &first, &count);
        int found = 0;
        for (int f = 0; f < brg_model_block_count(fine) && !found; f++) {
            int ff, fc;
            brg_model_block_layers(fine, f, &ff, &fc);
            found = ff == first;
        }
        CHECK_MSG(found, "block '%s' does not start a finer block", brg_model_block_name(m, b));
    }
    static const char *const stem[] = {"stem.Conv2d_1a_3x3", "stem.Conv2d_2a_3x3", "stem.Conv2d_2b_3x3",
                                       "stem.maxpool1",      "stem.Conv2d_3b_1x1", "stem.Conv2d_4a_3x3",
                                       "stem.maxpool2",      "mixed0"};
    for (int b = 0; b < 8; b++)
        CHECK_MSG(strcmp(brg_model_block_name(fine, b), stem[b]) == 0, "block %d is '%s', not '%s'", b,
                  brg_model_block_name(fine, b), stem[b]);
    int first, count;
    brg_model_block_layers(fine, 0, &first, &count);
    CHECK(first == 0 && count == 3); /* conv, bn, relu */
    CHECK_OK(brg_model_split_blocks(fine, &again));
    if (again) CHECK(brg_model_equal(fine, again, NULL, 0));
    brg_model_destroy(again);
    brg_model_destroy(fine);
    brg_model_destroy(m);
    CHECK_STATUS(brg_model_split_blocks(NULL, &fine), BRG_ERR_INVALID_ARGUMENT);

    /* A part named after its layers ("b") leaves a later block called b its
     * name: the part is b_2. */
    CHECK_OK(brg_model_create("names", 1, 8, 8, &m));
    if (!m) return;
    CHECK_OK(brg_model_begin_block(m, "a"));
    CHECK_OK(brg_model_add_conv2d(m, "b.conv", "input", 2, 3, 3, 1, 1, 1, 1, 0));
    CHECK_OK(brg_model_add_relu(m, "b.relu", "b.conv"));
    CHECK_OK(brg_model_add_conv2d(m, "c.conv", "b.relu", 2, 3, 3, 1, 1, 1, 1, 0));
    CHECK_OK(brg_model_begin_block(m, "b"));
    CHECK_OK(brg_model_add_global_avgpool(m, "gap", "c.conv"));
    CHECK_OK(brg_model_finalize(m, NULL));
    CHECK_OK(brg_model_split_blocks(m, &fine));
    if (fine) {
        static const char *const names[] = {"b_2", "c.conv", "b"};
        CHECK(brg_model_block_count(fine) == 3);
        for (int b = 0; b < 3 && b < brg_model_block_count(fine); b++)
            CHECK_MSG(strcmp(brg_model_block_name(fine, b), names[b]) == 0, "block %d is '%s', not '%s'", b,
                      brg_model_block_name(fine, b), names[b]);
    }
    brg_model_destroy(fine);
    brg_model_destroy(m);
}

int main(void)
{
    test_registry();
    test_published_counts();
    test_fmnist();
    test_vgg16();
    test_resnet();
    test_inception();
    test_inception_torchvision();
    test_unet();
    test_errors();
    test_init();
    test_split_blocks();
    TEST_EXIT();
}
