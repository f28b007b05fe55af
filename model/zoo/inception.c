/* Zoo: Inception-v3 in two flavours that differ in two numbers and one
 * layer, with the same layer names:
 *
 *  - "inception-v3", as the Keras application builds it
 *    (keras.applications.InceptionV3): every convolution is Keras's
 *    conv2d_bn, a convolution without bias, BatchNorm without scale
 *    (epsilon 1e-3) and a ReLU; the branch_pool average pools leave the
 *    padding out of each average; no dropout.
 *  - "inception-v3-torchvision", torchvision's Inception3 without its
 *    auxiliary classifier (aux_logits=False): BasicConv2d's BatchNorm has a
 *    scale (gamma; epsilon 1e-3 too), F.avg_pool2d counts the padding
 *    (count_include_pad=True), and a dropout of 0.5 comes before the
 *    classifier. Its weights convert to and from torchvision's state_dict
 *    one to one (docs/checkpoints.md).
 *
 * Branch names follow torchvision's Inception3 ("branch5x5_1"), block
 * names Keras's ("mixed0"). */
#include "zoo-impl.h"

/* What differs between the two flavours. */
typedef struct flavour {
    brg_zoo_bn bn;
    int count_include_pad; /* the branch_pool average pools */
    float dropout;         /* before the classifier; 0: none */
} flavour;

static const flavour keras_flavour = {{1e-3f, 0, 1}, 0, 0.0f};
static const flavour torchvision_flavour = {{1e-3f, 1, 1}, 1, 0.5f};

/* The module being built: every layer name starts with its block's name. */
typedef struct module {
    brg_model *m;
    const brg_zoo_config *cfg;
    const flavour *fl;
    const char *block;
} module;

enum { SAME = 0, VALID = 1 };

/* Keras's conv2d_bn: layers "<block>.<branch>.conv", ".bn", ".relu" reading
 * x; the ReLU's tensor name goes to out (which may be x). filters is the
 * unscaled channel count; rows x cols the kernel. 'same' padding is used
 * with stride 1 only, where it is the symmetric rows/2 x cols/2 (odd
 * kernels); 'valid' is no padding. */
static brg_status conv2d_bn(const module *mod, const char *branch, const char *x, int filters, int rows, int cols,
                            int stride, int padding, char *out)
{
    char prefix[BRG_NAME_MAX];
    BRG_CHECK(brg_zoo_name(prefix, "%s.%s", mod->block, branch));
    brg_zoo_conv conv = {brg_zoo_width(mod->cfg, filters), rows, cols, stride, 0, 0};
    if (padding == SAME) {
        conv.pad_h = rows / 2;
        conv.pad_w = cols / 2;
    }
    return brg_zoo_conv_bn(mod->m, prefix, "", x, &conv, &mod->fl->bn, 1, out);
}

/* A 3x3/1 average pool with padding 1: Keras's AveragePooling2D((3, 3),
 * strides=(1, 1), padding='same'), which leaves the padding out of each
 * average, or torchvision's F.avg_pool2d(x, 3, 1, 1), which counts it.
 * Writes "<block>.branch_pool.pool". */
static brg_status avg_pool_same(const module *mod, const char *x, char *out)
{
    BRG_CHECK(brg_zoo_name(out, "%s.branch_pool.pool", mod->block));
    return brg_model_add_avgpool(mod->m, out, x, 3, 1, 1, mod->fl->count_include_pad);
}

/* The module's closing concatenation, a layer and tensor named like the
 * block ("mixed0"); its name goes to out. */
static brg_status close_module(const module *mod, char (*branches)[BRG_NAME_MAX], int n, char *out)
{
    const char *in[4];
    for (int i = 0; i < n; i++) in[i] = branches[i];
    BRG_CHECK(brg_model_add_concat(mod->m, mod->block, in, n));
    return brg_zoo_name(out, "%s", mod->block);
}

/* mixed0..mixed2 (35 x 35): 1x1, 5x5, double 3x3 and average-pool branches;
 * pool_features channels from the pool branch. */
static brg_status inception_a(const module *mod, char *x, int pool_features)
{
    char b[4][BRG_NAME_MAX];
    BRG_CHECK(conv2d_bn(mod, "branch1x1", x, 64, 1, 1, 1, SAME, b[0]));
    BRG_CHECK(conv2d_bn(mod, "branch5x5_1", x, 48, 1, 1, 1, SAME, b[1]));
    BRG_CHECK(conv2d_bn(mod, "branch5x5_2", b[1], 64, 5, 5, 1, SAME, b[1]));
    BRG_CHECK(conv2d_bn(mod, "branch3x3dbl_1", x, 64, 1, 1, 1, SAME, b[2]));
    BRG_CHECK(conv2d_bn(mod, "branch3x3dbl_2", b[2], 96, 3, 3, 1, SAME, b[2]));
    BRG_CHECK(conv2d_bn(mod, "branch3x3dbl_3", b[2], 96, 3, 3, 1, SAME, b[2]));
    BRG_CHECK(avg_pool_same(mod, x, b[3]));
    BRG_CHECK(conv2d_bn(mod, "branch_pool", b[3], pool_features, 1, 1, 1, SAME, b[3]));
    return close_module(mod, b, 4, x);
}

/* mixed3: 35 x 35 -> 17 x 17 with stride-2 'valid' 3x3 convolutions and a
 * 3x3/2 max-pool ("<block>.branch_pool"). */
static brg_status reduction_a(const module *mod, char *x)
{
    char b[3][BRG_NAME_MAX];
    BRG_CHECK(conv2d_bn(mod, "branch3x3", x, 384, 3, 3, 2, VALID, b[0]));
    BRG_CHECK(conv2d_bn(mod, "branch3x3dbl_1", x, 64, 1, 1, 1, SAME, b[1]));
    BRG_CHECK(conv2d_bn(mod, "branch3x3dbl_2", b[1], 96, 3, 3, 1, SAME, b[1]));
    BRG_CHECK(conv2d_bn(mod, "branch3x3dbl_3", b[1], 96, 3, 3, 2, VALID, b[1]));
    BRG_CHECK(brg_zoo_name(b[2], "%s.branch_pool", mod->block));
    BRG_CHECK(brg_model_add_maxpool(mod->m, b[2], x, 3, 2, 0));
    return close_module(mod, b, 3, x);
}

/* mixed4..mixed7 (17 x 17): factorized 7x7 branches (1x7 then 7x1) with c7
 * inner channels. */
static brg_status inception_c(const module *mod, char *x, int c7)
{
    char b[4][BRG_NAME_MAX];
    BRG_CHECK(conv2d_bn(mod, "branch1x1", x, 192, 1, 1, 1, SAME, b[0]));
    BRG_CHECK(conv2d_bn(mod, "branch7x7_1", x, c7, 1, 1, 1, SAME, b[1]));
    BRG_CHECK(conv2d_bn(mod, "branch7x7_2", b[1], c7, 1, 7, 1, SAME, b[1]));
    BRG_CHECK(conv2d_bn(mod, "branch7x7_3", b[1], 192, 7, 1, 1, SAME, b[1]));
    BRG_CHECK(conv2d_bn(mod, "branch7x7dbl_1", x, c7, 1, 1, 1, SAME, b[2]));
    BRG_CHECK(conv2d_bn(mod, "branch7x7dbl_2", b[2], c7, 7, 1, 1, SAME, b[2]));
    BRG_CHECK(conv2d_bn(mod, "branch7x7dbl_3", b[2], c7, 1, 7, 1, SAME, b[2]));
    BRG_CHECK(conv2d_bn(mod, "branch7x7dbl_4", b[2], c7, 7, 1, 1, SAME, b[2]));
    BRG_CHECK(conv2d_bn(mod, "branch7x7dbl_5", b[2], 192, 1, 7, 1, SAME, b[2]));
    BRG_CHECK(avg_pool_same(mod, x, b[3]));
    BRG_CHECK(conv2d_bn(mod, "branch_pool", b[3], 192, 1, 1, 1, SAME, b[3]));
    return close_module(mod, b, 4, x);
}

/* mixed8: 17 x 17 -> 8 x 8. */
static brg_status reduction_b(const module *mod, char *x)
{
    char b[3][BRG_NAME_MAX];
    BRG_CHECK(conv2d_bn(mod, "branch3x3_1", x, 192, 1, 1, 1, SAME, b[0]));
    BRG_CHECK(conv2d_bn(mod, "branch3x3_2", b[0], 320, 3, 3, 2, VALID, b[0]));
    BRG_CHECK(conv2d_bn(mod, "branch7x7x3_1", x, 192, 1, 1, 1, SAME, b[1]));
    BRG_CHECK(conv2d_bn(mod, "branch7x7x3_2", b[1], 192, 1, 7, 1, SAME, b[1]));
    BRG_CHECK(conv2d_bn(mod, "branch7x7x3_3", b[1], 192, 7, 1, 1, SAME, b[1]));
    BRG_CHECK(conv2d_bn(mod, "branch7x7x3_4", b[1], 192, 3, 3, 2, VALID, b[1]));
    BRG_CHECK(brg_zoo_name(b[2], "%s.branch_pool", mod->block));
    BRG_CHECK(brg_model_add_maxpool(mod->m, b[2], x, 3, 2, 0));
    return close_module(mod, b, 3, x);
}

/* Two parallel convolutions, 1x3 ("<stem>a") and 3x1 ("<stem>b"), on x,
 * concatenated into "<block>.<concat>" (written to out). */
static brg_status split_1x3_3x1(const module *mod, const char *x, const char *stem, const char *concat, char *out)
{
    char name[BRG_NAME_MAX], pair[2][BRG_NAME_MAX];
    BRG_CHECK(brg_zoo_name(name, "%sa", stem));
    BRG_CHECK(conv2d_bn(mod, name, x, 384, 1, 3, 1, SAME, pair[0]));
    BRG_CHECK(brg_zoo_name(name, "%sb", stem));
    BRG_CHECK(conv2d_bn(mod, name, x, 384, 3, 1, 1, SAME, pair[1]));
    BRG_CHECK(brg_zoo_name(out, "%s.%s", mod->block, concat));
    const char *in[2] = {pair[0], pair[1]};
    return brg_model_add_concat(mod->m, out, in, 2);
}

/* mixed9, mixed10 (8 x 8): the 3x3 and double-3x3 branches each end in a
 * 1x3 / 3x1 pair joined by a concat of its own ("<block>.branch3x3",
 * "<block>.branch3x3dbl"), nested in the module's concat. */
static brg_status inception_e(const module *mod, char *x)
{
    char b[4][BRG_NAME_MAX], t[BRG_NAME_MAX];
    BRG_CHECK(conv2d_bn(mod, "branch1x1", x, 320, 1, 1, 1, SAME, b[0]));
    BRG_CHECK(conv2d_bn(mod, "branch3x3_1", x, 384, 1, 1, 1, SAME, t));
    BRG_CHECK(split_1x3_3x1(mod, t, "branch3x3_2", "branch3x3", b[1]));
    BRG_CHECK(conv2d_bn(mod, "branch3x3dbl_1", x, 448, 1, 1, 1, SAME, t));
    BRG_CHECK(conv2d_bn(mod, "branch3x3dbl_2", t, 384, 3, 3, 1, SAME, t));
    BRG_CHECK(split_1x3_3x1(mod, t, "branch3x3dbl_3", "branch3x3dbl", b[2]));
    BRG_CHECK(avg_pool_same(mod, x, b[3]));
    BRG_CHECK(conv2d_bn(mod, "branch_pool", b[3], 192, 1, 1, 1, SAME, b[3]));
    return close_module(mod, b, 4, x);
}

/* Blocks "stem" (five conv2d_bn and two 3x3/2 max-pools: 299 -> 35),
 * "mixed0" ... "mixed10", and "head" (global average pool "avg_pool", in
 * torchvision's flavour the dropout "dropout", and the linear
 * "predictions" with bias; logits, no softmax). At 299 x 299 the module
 * outputs are 256/288/288 x 35 x 35, 768 x 17 x 17 (mixed3..7), 1280 x 8 x
 * 8 (mixed8) and 2048 x 8 x 8 (mixed9, mixed10). */
static brg_status build_inception_v3(brg_model *m, const brg_zoo_config *cfg, const flavour *fl)
{
    char x[BRG_NAME_MAX] = "input", block[BRG_NAME_MAX];
    module mod = {m, cfg, fl, "stem"};
    BRG_CHECK(brg_model_begin_block(m, "stem"));
    BRG_CHECK(conv2d_bn(&mod, "Conv2d_1a_3x3", x, 32, 3, 3, 2, VALID, x));
    BRG_CHECK(conv2d_bn(&mod, "Conv2d_2a_3x3", x, 32, 3, 3, 1, VALID, x));
    BRG_CHECK(conv2d_bn(&mod, "Conv2d_2b_3x3", x, 64, 3, 3, 1, SAME, x));
    BRG_CHECK(brg_model_add_maxpool(m, "stem.maxpool1", x, 3, 2, 0));
    BRG_CHECK(conv2d_bn(&mod, "Conv2d_3b_1x1", "stem.maxpool1", 80, 1, 1, 1, VALID, x));
    BRG_CHECK(conv2d_bn(&mod, "Conv2d_4a_3x3", x, 192, 3, 3, 1, VALID, x));
    BRG_CHECK(brg_model_add_maxpool(m, "stem.maxpool2", x, 3, 2, 0));
    BRG_CHECK(brg_zoo_name(x, "stem.maxpool2"));
    for (int i = 0; i <= 10; i++) {
        BRG_CHECK(brg_zoo_name(block, "mixed%d", i));
        BRG_CHECK(brg_model_begin_block(m, block));
        mod.block = block;
        if (i <= 2)
            BRG_CHECK(inception_a(&mod, x, i == 0 ? 32 : 64));
        else if (i == 3)
            BRG_CHECK(reduction_a(&mod, x));
        else if (i <= 7)
            BRG_CHECK(inception_c(&mod, x, i == 4 ? 128 : i == 7 ? 192 : 160));
        else if (i == 8)
            BRG_CHECK(reduction_b(&mod, x));
        else
            BRG_CHECK(inception_e(&mod, x));
    }
    BRG_CHECK(brg_model_begin_block(m, "head"));
    BRG_CHECK(brg_model_add_global_avgpool(m, "avg_pool", x));
    BRG_CHECK(brg_zoo_name(x, "avg_pool"));
    if (fl->dropout > 0.0f) {
        BRG_CHECK(brg_model_add_dropout(m, "dropout", x, fl->dropout));
        BRG_CHECK(brg_zoo_name(x, "dropout"));
    }
    return brg_model_add_linear(m, "predictions", x, (int)cfg->classes, 1);
}

brg_status brg_zoo_build_inception_v3(brg_model *m, const brg_zoo_config *cfg)
{
    return build_inception_v3(m, cfg, &keras_flavour);
}

brg_status brg_zoo_build_inception_v3_torchvision(brg_model *m, const brg_zoo_config *cfg)
{
    return build_inception_v3(m, cfg, &torchvision_flavour);
}
