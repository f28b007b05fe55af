/* The model builder: shapes, errors naming layers, block boundaries with
 * long skips, parameter counts and reproducible initialization. */
#include <stdint.h>
#include "testutil.h"

/* input 3x8x8 -> [enc] conv 4 3x3 p1, relu -> [mid] maxpool 2, conv 4,
 * upsample 2 -> [dec] concat(enc skip, up), conv 5 1x1 -> gap -> fc 3 */
static brg_model *build_skip_model(void)
{
    brg_model *m = NULL;
    CHECK_OK(brg_model_create("skip", 3, 8, 8, &m));
    if (!m) return NULL;
    CHECK_OK(brg_model_begin_block(m, "enc"));
    CHECK_OK(brg_model_add_conv2d(m, "enc_conv", "input", 4, 3, 3, 1, 1, 1, 1, 1));
    CHECK_OK(brg_model_add_relu(m, "enc_relu", "enc_conv"));
    CHECK_OK(brg_model_begin_block(m, "mid"));
    CHECK_OK(brg_model_add_maxpool(m, "pool", "enc_relu", 2, 2, 0));
    CHECK_OK(brg_model_add_conv2d(m, "mid_conv", "pool", 4, 3, 3, 1, 1, 1, 1, 0));
    CHECK_OK(brg_model_add_batchnorm(m, "mid_bn", "mid_conv", 1e-3f, 0, 1));
    CHECK_OK(brg_model_add_upsample(m, "up", "mid_bn", 2));
    CHECK_OK(brg_model_begin_block(m, "dec"));
    const char *parts[2] = {"enc_relu", "up"};
    CHECK_OK(brg_model_add_concat(m, "cat", parts, 2));
    CHECK_OK(brg_model_add_conv2d(m, "dec_conv", "cat", 5, 1, 1, 1, 1, 0, 0, 1));
    CHECK_OK(brg_model_add_global_avgpool(m, "gap", "dec_conv"));
    CHECK_OK(brg_model_add_linear(m, "fc", "gap", 3, 1));
    CHECK_OK(brg_model_finalize(m, NULL));
    return m;
}

static const brg_model_tensor *tensor(const brg_model *m, const char *name)
{
    return brg_model_get_tensor(m, brg_model_find_tensor(m, name));
}

static void test_shapes_and_counts(void)
{
    brg_model *m = build_skip_model();
    if (!m) return;
    CHECK(brg_model_is_final(m));
    CHECK(brg_model_block_count(m) == 3);
    CHECK(strcmp(brg_model_block_name(m, 1), "mid") == 0);
    CHECK(brg_model_find_block(m, "dec") == 2 && brg_model_find_block(m, "nope") == -1);
    int first, count;
    brg_model_block_layers(m, 1, &first, &count);
    CHECK(first == 2 && count == 4);
    CHECK(brg_model_layer_count(m) == 10);

    const brg_model_tensor *t = tensor(m, "pool");
    CHECK(t && t->c == 4 && t->h == 4 && t->w == 4);
    t = tensor(m, "cat");
    CHECK(t && t->c == 8 && t->h == 8 && t->w == 8);
    t = tensor(m, "fc");
    CHECK(t && t->c == 3 && t->h == 1 && t->w == 1);
    CHECK(brg_model_output(m) == brg_model_find_tensor(m, "fc"));
    CHECK(brg_model_classes(m) == 3);

    /* enc_conv 4*3*9+4, mid_conv 4*4*9, mid_bn beta 4 (+4+4 running),
     * dec_conv 5*8+5, fc 3*5+3 */
    int64_t trainable = (4 * 3 * 9 + 4) + (4 * 4 * 9) + 4 + (5 * 8 + 5) + (3 * 5 + 3);
    CHECK(brg_model_trainable_params(m) == trainable);
    CHECK(brg_model_frozen_params(m) == 8);
    const brg_layer *bn = brg_model_get_layer(m, 4);
    CHECK(bn && strcmp(bn->name, "mid_bn") == 0);
    if (bn) {
        CHECK(brg_layer_param_count(bn, m) == 3); /* beta, running mean, running var */
        brg_param_info p;
        CHECK_OK(brg_layer_param(bn, m, 0, &p));
        CHECK(strcmp(p.name, "beta") == 0 && p.trainable && p.count == 4);
        CHECK_OK(brg_layer_param(bn, m, 2, &p));
        CHECK(strcmp(p.name, "running_var") == 0 && !p.trainable);
        CHECK_STATUS(brg_layer_param(bn, m, 3, &p), BRG_ERR_INVALID_ARGUMENT);
    }

    /* Boundary after enc: the main path and the skip are the same tensor.
     * Boundary after mid: the skip from enc and the upsampled path cross. */
    int ids[8], n = 0;
    CHECK_OK(brg_model_boundary_tensors(m, 0, ids, 8, &n));
    CHECK(n == 1 && ids[0] == brg_model_find_tensor(m, "enc_relu"));
    CHECK_OK(brg_model_boundary_tensors(m, 1, ids, 8, &n));
    CHECK(n == 2);
    if (n == 2) {
        CHECK(ids[0] == brg_model_find_tensor(m, "enc_relu"));
        CHECK(ids[1] == brg_model_find_tensor(m, "up"));
    }
    CHECK_STATUS(brg_model_boundary_tensors(m, 2, ids, 8, &n), BRG_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(brg_model_boundary_tensors(m, 1, ids, 1, &n), BRG_ERR_INVALID_ARGUMENT);
    CHECK(n == 2);

    /* A model built twice the same way is equal; a changed one is not. */
    brg_model *same = build_skip_model();
    char why[256];
    CHECK(same && brg_model_equal(m, same, why, sizeof why));
    brg_model_destroy(same);
    brg_model *other = NULL;
    CHECK_OK(brg_model_create("skip", 3, 8, 8, &other));
    CHECK_OK(brg_model_begin_block(other, "enc"));
    CHECK_OK(brg_model_add_conv2d(other, "enc_conv", "input", 4, 3, 3, 1, 1, 1, 1, 1));
    CHECK_OK(brg_model_finalize(other, NULL));
    CHECK(!brg_model_equal(m, other, why, sizeof why));
    CHECK(strstr(why, "blocks") != NULL);
    brg_model_destroy(other);
    brg_model_destroy(m);
}

static void test_errors(void)
{
    brg_model *m = NULL;
    CHECK_STATUS(brg_model_create("bad", 0, 8, 8, &m), BRG_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(brg_model_create("", 3, 8, 8, &m), BRG_ERR_INVALID_ARGUMENT);
    CHECK_OK(brg_model_create("errs", 3, 8, 8, &m));
    if (!m) return;
    /* A layer before any block. */
    CHECK_STATUS(brg_model_add_relu(m, "r0", "input"), BRG_ERR_INVALID_ARGUMENT);
    CHECK_ERROR_HAS("before any block");
    CHECK_OK(brg_model_begin_block(m, "b0"));
    CHECK_STATUS(brg_model_begin_block(m, "b1"), BRG_ERR_INVALID_ARGUMENT); /* b0 is empty */
    CHECK_ERROR_HAS("b0");
    /* Dangling input names the layer and the tensor. */
    CHECK_STATUS(brg_model_add_relu(m, "r1", "ghost"), BRG_ERR_INVALID_ARGUMENT);
    CHECK_ERROR_HAS("'r1'");
    CHECK_ERROR_HAS("'ghost'");
    /* A kernel larger than its input. */
    CHECK_STATUS(brg_model_add_conv2d(m, "big", "input", 4, 9, 9, 1, 1, 0, 0, 0), BRG_ERR_SHAPE);
    CHECK_ERROR_HAS("'big'");
    CHECK_ERROR_HAS("[3, 8, 8]");
    CHECK_OK(brg_model_add_conv2d(m, "c1", "input", 4, 3, 3, 2, 2, 0, 0, 0)); /* 4x3x3 */
    CHECK_OK(brg_model_add_conv2d(m, "c2", "input", 4, 3, 3, 1, 1, 1, 1, 0)); /* 4x8x8 */
    /* Shapes that do not fit name both tensors and both shapes. */
    CHECK_STATUS(brg_model_add_add(m, "sum", "c1", "c2"), BRG_ERR_SHAPE);
    CHECK_ERROR_HAS("[4, 3, 3]");
    CHECK_ERROR_HAS("[4, 8, 8]");
    const char *parts[2] = {"c1", "c2"};
    CHECK_STATUS(brg_model_add_concat(m, "cat", parts, 2), BRG_ERR_SHAPE);
    CHECK_ERROR_HAS("only channels may differ");
    /* Duplicates. */
    CHECK_STATUS(brg_model_add_relu(m, "c1", "c2"), BRG_ERR_INVALID_ARGUMENT);
    CHECK_ERROR_HAS("already has a layer 'c1'");
    CHECK_STATUS(brg_model_begin_block(m, "b0"), BRG_ERR_INVALID_ARGUMENT);
    /* Bad parameters. */
    CHECK_STATUS(brg_model_add_dropout(m, "d", "c2", 1.0f), BRG_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(brg_model_add_maxpool(m, "p", "c2", 2, 2, 2), BRG_ERR_INVALID_ARGUMENT);
    /* padding INT32_MAX: 2 * pad wrapped negative and passed the half-window check */
    CHECK_STATUS(brg_model_add_maxpool(m, "p", "c2", INT32_MAX, INT32_MAX, INT32_MAX), BRG_ERR_INVALID_ARGUMENT);
    CHECK_ERROR_HAS("must be at most half of the");
    CHECK_STATUS(brg_model_add_conv2d(m, "z", "c2", 0, 1, 1, 1, 1, 0, 0, 0), BRG_ERR_INVALID_ARGUMENT);
    brg_layer_desc d = brg_layer_desc_init(BRG_LAYER_RELU);
    d.kind = (brg_layer_kind)99;
    const char *in = "c2";
    CHECK_STATUS(brg_model_add(m, "k", &d, &in, 1, NULL), BRG_ERR_INVALID_ARGUMENT);
    /* c1 is never read: finalize refuses dead tensors. */
    CHECK_OK(brg_model_add_relu(m, "r", "c2"));
    CHECK_STATUS(brg_model_finalize(m, "r"), BRG_ERR_INVALID_ARGUMENT);
    CHECK_ERROR_HAS("'c1'");
    CHECK_ERROR_HAS("never used");
    CHECK_STATUS(brg_model_finalize(m, "nothing"), BRG_ERR_INVALID_ARGUMENT);
    brg_model_destroy(m);

    /* An empty model cannot be finalized. */
    CHECK_OK(brg_model_create("empty", 1, 4, 4, &m));
    CHECK_STATUS(brg_model_finalize(m, NULL), BRG_ERR_INVALID_ARGUMENT);
    CHECK_ERROR_HAS("no layers");
    brg_model_destroy(m);
}

static void test_init(void)
{
    brg_model *m = NULL;
    CHECK_OK(brg_model_create("init", 64, 16, 16, &m));
    if (!m) return;
    CHECK_OK(brg_model_begin_block(m, "b"));
    CHECK_OK(brg_model_add_conv2d(m, "conv", "input", 128, 3, 3, 1, 1, 1, 1, 1));
    CHECK_OK(brg_model_add_batchnorm(m, "bn", "conv", 1e-5f, 1, 1));
    CHECK_OK(brg_model_add_global_avgpool(m, "gap", "bn"));
    CHECK_OK(brg_model_add_linear(m, "fc", "gap", 10, 1));
    CHECK_OK(brg_model_finalize(m, NULL));
    const brg_layer *conv = brg_model_get_layer(m, 0), *bn = brg_model_get_layer(m, 1), *fc = brg_model_get_layer(m, 3);
    enum { W = 128 * 64 * 9 };
    float *a = malloc(W * sizeof *a), *b = malloc(W * sizeof *b);
    CHECK_OK(brg_layer_init_param(conv, m, 0, 42, a));
    CHECK_OK(brg_layer_init_param(conv, m, 0, 42, b));
    CHECK(memcmp(a, b, W * sizeof *a) == 0);
    double mean = 0, sq = 0;
    for (int i = 0; i < W; i++) {
        mean += a[i];
        sq += (double)a[i] * a[i];
    }
    mean /= W;
    double std = sqrt(sq / W - mean * mean), want = sqrt(2.0 / (64 * 9));
    CHECK_MSG(fabs(std - want) < 0.02 * want, "He std %g, expected %g", std, want);
    CHECK(fabs(mean) < 0.02 * want);
    CHECK_OK(brg_layer_init_param(conv, m, 0, 43, b));
    CHECK(memcmp(a, b, W * sizeof *a) != 0);
    CHECK_OK(brg_layer_init_param(conv, m, 1, 42, b)); /* bias */
    CHECK(b[0] == 0.0f && b[127] == 0.0f);
    CHECK_OK(brg_layer_init_param(bn, m, 0, 42, b)); /* gamma */
    CHECK(b[0] == 1.0f && b[127] == 1.0f);
    CHECK_OK(brg_layer_init_param(bn, m, 3, 42, b)); /* running var */
    CHECK(b[5] == 1.0f);
    /* Glorot uniform: |w| <= sqrt(6 / (fan_in + fan_out)), and it is used. */
    CHECK_OK(brg_layer_init_param(fc, m, 0, 42, b));
    double limit = sqrt(6.0 / (128 + 10)), biggest = 0;
    for (int i = 0; i < 1280; i++) biggest = fmax(biggest, fabs(b[i]));
    CHECK(biggest <= limit && biggest > 0.9 * limit);
    free(a);
    free(b);
    brg_model_destroy(m);
}

static void test_kind_names(void)
{
    for (int k = 0; k < BRG_LAYER_KIND_COUNT; k++) {
        brg_layer_kind back = BRG_LAYER_KIND_COUNT;
        CHECK_OK(brg_layer_kind_parse(brg_layer_kind_name((brg_layer_kind)k), &back));
        CHECK(back == (brg_layer_kind)k);
    }
    brg_layer_kind none;
    CHECK_STATUS(brg_layer_kind_parse("convolution", &none), BRG_ERR_INVALID_ARGUMENT);
    CHECK_ERROR_HAS("convolution");
    CHECK_STATUS(brg_layer_kind_parse(NULL, &none), BRG_ERR_INVALID_ARGUMENT);
}

int main(void)
{
    test_shapes_and_counts();
    test_errors();
    test_init();
    test_kind_names();
    TEST_EXIT();
}
