/* The Keras importer (brg_import_keras), on fixtures Keras wrote
 * (tests/models/keras/, made by bench/keras/make_fixtures.py) and on
 * Keras 2 files written here:
 *
 * - InceptionV3 (weights=None) imports to 23,851,784 parameters
 *   (23,817,352 trainable) and the same graph as the zoo's inception-v3:
 *   the same layers (kind, sizes, padding, bias, epsilon, scale, center)
 *   on the same inputs, whatever they are called.
 * - small_cnn (every imported layer): with Keras's weights bound, brigade's
 *   forward on a CPU pipeline equals Keras's outputs (recorded in
 *   small_cnn.data.json) within 1e-4: the channels-last kernels, the Dense
 *   after a channels-last Flatten, the folded ZeroPadding2D, 'same' pools
 *   that leave the padding out of the mean. The same from small_cnn.keras,
 *   the weights read from its model.weights.h5.
 * - channels_first.keras, every layer channels_first: brigade's forward
 *   equals Keras's (channels_first.data.json) within 1e-4: the Conv2D's
 *   kernel, which Keras keeps as [kh, kw, in, out] whatever the data
 *   format, and the Dense after a channels_first Flatten, which Keras
 *   makes height-width-channel; the same for channels_first_flatten.keras,
 *   whose Flatten keeps the default data_format (channels_last) and so
 *   flattens [C, H, W] as it is. A copy whose kernel has as many values
 *   in another shape is refused; layers of both data formats are refused,
 *   naming the one to change.
 * - A Sequential model; Keras 2 files (inbound_nodes as lists,
 *   batch_input_shape), functional and Sequential.
 * - Bad files: clean errors naming the layer, nothing half imported. */
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "import_test.h"

#define FIXTURES BRG_TEST_SRCDIR "/models/keras/"

/* ---- the same graph ---- */

static uint64_t mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    return h * 0xff51afd7ed558ccdULL;
}

/* A layer's signature: what it computes and, recursively, on what. */
static uint64_t *signatures(const brg_model *m)
{
    const int nl = brg_model_layer_count(m), nt = brg_model_tensor_count(m);
    uint64_t *by_tensor = calloc((size_t)nt, sizeof *by_tensor), *by_layer = calloc((size_t)nl, sizeof *by_layer);
    if (!by_tensor || !by_layer) abort();
    by_tensor[brg_model_input(m)] = 1;
    for (int i = 0; i < nl; i++) {
        const brg_layer *l = brg_model_get_layer(m, i);
        const brg_layer_desc *d = &l->desc;
        uint32_t eps;
        memcpy(&eps, &d->epsilon, sizeof eps);
        const int64_t fields[] = {d->kind,     d->out_channels, d->kernel_h, d->kernel_w, d->stride_h, d->stride_w,
                                  d->pad_h,    d->pad_w,        d->bias,     d->count_include_pad,
                                  d->kind == BRG_LAYER_BATCHNORM ? eps : 0, d->scale, d->center, d->factor};
        uint64_t h = 7;
        for (size_t k = 0; k < sizeof fields / sizeof fields[0]; k++) h = mix(h, (uint64_t)fields[k]);
        for (int k = 0; k < l->n_inputs; k++) h = mix(h, by_tensor[l->inputs[k]]);
        by_layer[i] = by_tensor[l->output] = h;
    }
    free(by_tensor);
    return by_layer;
}

static int by_value(const void *a, const void *b)
{
    const uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Whether a and b have the same layers on the same inputs, names aside. */
static int same_graph(const brg_model *a, const brg_model *b)
{
    const int n = brg_model_layer_count(a);
    if (n != brg_model_layer_count(b)) return 0;
    uint64_t *sa = signatures(a), *sb = signatures(b);
    const int same_output = sa[brg_model_get_tensor(a, brg_model_output(a))->producer] ==
                            sb[brg_model_get_tensor(b, brg_model_output(b))->producer];
    qsort(sa, (size_t)n, sizeof *sa, by_value);
    qsort(sb, (size_t)n, sizeof *sb, by_value);
    const int same = same_output && memcmp(sa, sb, (size_t)n * sizeof *sa) == 0;
    free(sa);
    free(sb);
    return same;
}

static void test_inception(void)
{
    brg_import *imp = NULL;
    CHECK_OK(brg_import_keras(FIXTURES "inception_v3.json", &imp));
    if (!imp) return;
    const brg_model *m = brg_import_model(imp);
    CHECK_MSG(brg_model_trainable_params(m) + brg_model_frozen_params(m) == 23851784, "%lld parameters",
              (long long)(brg_model_trainable_params(m) + brg_model_frozen_params(m)));
    CHECK(brg_model_trainable_params(m) == 23817352);
    CHECK(strcmp(brg_model_name(m), "inception_v3") == 0);
    const brg_model_tensor *in = brg_model_get_tensor(m, brg_model_input(m));
    CHECK(in->c == 3 && in->h == 299 && in->w == 299);
    CHECK(brg_model_find_block(m, "mixed0") >= 0 && brg_model_find_block(m, "mixed10") >= 0);
    CHECK(!brg_import_has_weights(imp)); /* a JSON file holds none */
    brg_model *zoo = NULL;
    brg_zoo_options o;
    memset(&o, 0, sizeof o);
    CHECK_OK(brg_zoo_build("inception-v3", &o, &zoo));
    if (zoo) CHECK_MSG(same_graph(m, zoo), "the imported InceptionV3 is not the zoo's inception-v3");
    /* The check can fail: one changed window is another graph. */
    brg_model *other = NULL;
    o.width_mult = 0.5;
    CHECK_OK(brg_zoo_build("inception-v3", &o, &other));
    if (other) CHECK(!same_graph(m, other));
    brg_model_destroy(zoo);
    brg_model_destroy(other);
    brg_import_free(imp);
}

/* ---- Keras's own forward ---- */

static float *json_floats(json_t *array, size_t *n)
{
    *n = json_array_size(array);
    float *v = malloc((*n ? *n : 1) * sizeof *v);
    if (!v) abort();
    for (size_t i = 0; i < *n; i++) v[i] = (float)json_number_value(json_array_get(array, i));
    return v;
}

/* The imported small_cnn's outputs on the recorded input against Keras's. */
static void check_forward(const brg_import *imp, json_t *data, const char *what)
{
    size_t nx, ny;
    float *nhwc = json_floats(json_object_get(json_object_get(data, "input_nhwc"), "values"), &nx);
    float *want = json_floats(json_object_get(json_object_get(data, "output"), "values"), &ny);
    CHECK(nx == 2 * 8 * 8 * 3 && ny == 2 * 5);
    float x[2 * 3 * 8 * 8], y[2 * 5];
    for (int s = 0; s < 2; s++) /* brigade takes NCHW */
        for (int c = 0; c < 3; c++)
            for (int h = 0; h < 8; h++)
                for (int w = 0; w < 8; w++) x[((s * 3 + c) * 8 + h) * 8 + w] = nhwc[((s * 8 + h) * 8 + w) * 3 + c];
    CHECK_OK(import_predict(imp, x, 2, y));
    double worst = 0.0, scale = 0.0;
    for (size_t i = 0; i < ny && i < 10; i++) {
        worst = fmax(worst, fabs((double)y[i] - want[i]));
        scale = fmax(scale, fabs((double)want[i]));
    }
    CHECK_MSG(worst <= 1e-4 * scale, "%s: brigade is off Keras by %g (outputs up to %g)", what, worst, scale);
    free(nhwc);
    free(want);
}

static void test_small_cnn(void)
{
    brg_import *imp = NULL;
    CHECK_OK(brg_import_keras(FIXTURES "small_cnn.json", &imp));
    json_error_t err;
    json_t *data = json_load_file(FIXTURES "small_cnn.data.json", 0, &err);
    CHECK_MSG(data != NULL, "small_cnn.data.json: %s", err.text);
    if (!imp || !data) {
        brg_import_free(imp);
        json_decref(data);
        return;
    }
    const char *key;
    json_t *values;
    json_object_foreach(json_object_get(data, "weights"), key, values) {
        size_t n;
        float *w = json_floats(values, &n);
        CHECK_OK(brg_import_bind(imp, key, w, (int64_t)n));
        free(w);
    }
    CHECK(brg_import_has_weights(imp));
    check_forward(imp, data, "small_cnn.json with the weights bound");
    /* The layers Keras's layers became. */
    const brg_model *m = brg_import_model(imp);
    const brg_layer *conv = brg_model_get_layer(m, brg_model_find_layer(m, "conv"));
    const brg_layer *smooth = brg_model_get_layer(m, brg_model_find_layer(m, "smooth"));
    CHECK(conv && conv->desc.pad_h == 1 && conv->desc.pad_w == 1 && brg_model_find_layer(m, "conv_relu") >= 0);
    CHECK(smooth && smooth->desc.pad_h == 1 && smooth->desc.count_include_pad == 0);
    brg_import_free(imp);

    /* The same model saved as a .keras archive brings its weights. */
    brg_status st = brg_import_keras(FIXTURES "small_cnn.keras", &imp);
    if (st == BRG_ERR_UNSUPPORTED) {
        printf("note: built without .keras archives: %s\n", brg_last_error());
    } else {
        CHECK_OK(st);
        if (imp) {
            CHECK(brg_import_has_weights(imp));
            check_forward(imp, data, "small_cnn.keras");
        }
        brg_import_free(imp);
        CHECK_STATUS(brg_import_keras(FIXTURES "small_cnn.json.keras", &imp), BRG_ERR_IO);
        CHECK_ERROR_HAS("cannot open Keras archive");
        CHECK(imp == NULL);
        char path[] = "/tmp/brigade-test-keras-XXXXXX.keras";
        const int fd = mkstemps(path, 6);
        CHECK(fd >= 0);
        if (fd >= 0) {
            static const char junk[] = "PK\003\004 not really a zip";
            CHECK(write(fd, junk, sizeof junk - 1) == (ssize_t)(sizeof junk - 1));
            close(fd);
            CHECK_STATUS(brg_import_keras(path, &imp), BRG_ERR_FORMAT);
            CHECK_ERROR_HAS("cannot open Keras archive");
            unlink(path);
        }
    }
    json_decref(data);
}

/* The archive FIXTURES name.keras, a channels_first model of input
 * 2x6x5 and 4 outputs, imported with its weights: brigade's outputs on
 * name.data.json's NCHW input are Keras's. */
static void check_nchw_archive(const char *name)
{
    char path[512];
    snprintf(path, sizeof path, FIXTURES "%s.keras", name);
    brg_import *imp = NULL;
    const brg_status st = brg_import_keras(path, &imp);
    if (st == BRG_ERR_UNSUPPORTED && strstr(brg_last_error(), "built without")) {
        printf("note: built without .keras archives: %s\n", brg_last_error());
        return;
    }
    CHECK_MSG(st == BRG_OK, "%s: %s", path, brg_last_error());
    snprintf(path, sizeof path, FIXTURES "%s.data.json", name);
    json_error_t err;
    json_t *data = json_load_file(path, 0, &err);
    CHECK_MSG(data != NULL, "%s: %s", path, err.text);
    if (imp && data) {
        const brg_model *m = brg_import_model(imp);
        const brg_model_tensor *in = brg_model_get_tensor(m, brg_model_input(m));
        CHECK(in->c == 2 && in->h == 6 && in->w == 5);
        CHECK(brg_import_has_weights(imp));
        size_t nx, ny;
        float *x = json_floats(json_object_get(json_object_get(data, "input_nchw"), "values"), &nx);
        float *want = json_floats(json_object_get(json_object_get(data, "output"), "values"), &ny);
        float y[2 * 4];
        CHECK(nx == 2 * 2 * 6 * 5 && ny == 2 * 4);
        if (nx == 2 * 2 * 6 * 5 && ny == 2 * 4) {
            CHECK_OK(import_predict(imp, x, 2, y));
            double worst = 0.0, scale = 0.0;
            for (size_t i = 0; i < ny; i++) {
                worst = fmax(worst, fabs((double)y[i] - want[i]));
                scale = fmax(scale, fabs((double)want[i]));
            }
            CHECK_MSG(scale > 0.1 && worst <= 1e-4 * scale, "%s.keras: brigade is off Keras by %g (outputs up to %g)",
                      name, worst, scale);
        }
        free(x);
        free(want);
    }
    json_decref(data);
    brg_import_free(imp);
}

/* A channels_first model's weights in Keras's layouts, from its archive:
 * brigade's outputs are Keras's, with a channels_first Flatten (Keras
 * makes the features height-width-channel) and with a default one
 * (Keras flattens [C, H, W] as it is). */
static void test_channels_first(void)
{
    check_nchw_archive("channels_first");
    check_nchw_archive("channels_first_flatten");
    /* A kernel of as many values in another shape is refused, not bound
     * in a scrambled order. */
    brg_import *imp = NULL;
    const brg_status st = brg_import_keras(FIXTURES "channels_first_bad_kernel.keras", &imp);
    if (st == BRG_ERR_UNSUPPORTED && strstr(brg_last_error(), "built without")) return;
    CHECK_STATUS(st, BRG_ERR_FORMAT);
    CHECK_ERROR_HAS("weight 0 of layer 'conv' (conv/kernel) is [3, 2, 3, 2]; the model needs [3, 2, 2, 3]");
    CHECK(imp == NULL);
}

static void test_sequential(void)
{
    brg_import *imp = NULL;
    CHECK_OK(brg_import_keras(FIXTURES "sequential.json", &imp));
    if (!imp) return;
    const brg_model *m = brg_import_model(imp);
    CHECK(brg_model_layer_count(m) == 4); /* conv, its relu, pool, fc */
    CHECK(brg_model_trainable_params(m) == 13610);
    const brg_model_tensor *in = brg_model_get_tensor(m, brg_model_input(m));
    CHECK(in->c == 1 && in->h == 28 && in->w == 28);
    CHECK(brg_import_note_count(imp) == 1 && strstr(brg_import_note(imp, 0), "softmax of the final layer 'fc'"));
    brg_import_free(imp);
}

/* ---- Keras 2 files ---- */

static brg_status import_text(const char *text, brg_import **imp)
{
    brg_clear_error();
    *imp = (brg_import *)(uintptr_t)1;
    const brg_status st = brg_import_keras_json(text, strlen(text), "k.json", imp);
    CHECK_MSG(st == BRG_OK || *imp == NULL, "a failed import left a result");
    return st;
}

#define K2_INPUT                                                                                                     \
    "{\"class_name\": \"InputLayer\", \"name\": \"input_1\", \"config\": {\"batch_input_shape\": [null, 8, 8, 3], " \
    "\"name\": \"input_1\"}, \"inbound_nodes\": []}"
#define K2_CONV(name, from, extra)                                                                                   \
    "{\"class_name\": \"Conv2D\", \"name\": \"" name "\", \"config\": {\"name\": \"" name "\", \"filters\": 4, "    \
    "\"kernel_size\": [3, 3], \"strides\": [1, 1], \"padding\": \"same\", \"data_format\": \"channels_last\", "       \
    "\"activation\": \"relu\", \"use_bias\": true" extra "}, \"inbound_nodes\": [[[\"" from "\", 0, 0, {}]]]}"

static void test_keras2(void)
{
    const char *functional =
        "{\"class_name\": \"Model\", \"config\": {\"name\": \"k2\", \"layers\": [" K2_INPUT ", " K2_CONV(
            "c1", "input_1", "") ", " K2_CONV("c2", "c1", "") ", "
        "{\"class_name\": \"Add\", \"name\": \"sum\", \"config\": {\"name\": \"sum\"}, \"inbound_nodes\": "
        "[[[\"c1\", 0, 0, {}], [\"c2\", 0, 0, {}]]]}, "
        "{\"class_name\": \"GlobalAveragePooling2D\", \"name\": \"gap\", \"config\": {\"name\": \"gap\"}, "
        "\"inbound_nodes\": [[[\"sum\", 0, 0, {}]]]}, "
        "{\"class_name\": \"Dense\", \"name\": \"fc\", \"config\": {\"name\": \"fc\", \"units\": 3, \"activation\": "
        "\"linear\", \"use_bias\": true}, \"inbound_nodes\": [[[\"gap\", 0, 0, {}]]]}], "
        "\"input_layers\": [[\"input_1\", 0, 0]], \"output_layers\": [[\"fc\", 0, 0]]}, \"keras_version\": \"2.4.0\"}";
    brg_import *imp = NULL;
    CHECK_OK(import_text(functional, &imp));
    if (imp) {
        const brg_model *m = brg_import_model(imp);
        CHECK(brg_model_layer_count(m) == 7); /* c1, relu, c2, relu, sum, gap, fc */
        const brg_layer *sum = brg_model_get_layer(m, brg_model_find_layer(m, "sum"));
        CHECK(sum && sum->desc.kind == BRG_LAYER_ADD);
        CHECK(brg_model_trainable_params(m) == (108 + 4) + (144 + 4) + (12 + 3));
        brg_import_free(imp);
    }
    const char *sequential =
        "{\"class_name\": \"Sequential\", \"config\": {\"name\": \"s2\", \"layers\": ["
        "{\"class_name\": \"Conv2D\", \"config\": {\"name\": \"c\", \"batch_input_shape\": [null, 6, 6, 1], "
        "\"filters\": 2, \"kernel_size\": [3, 3], \"activation\": \"linear\", \"use_bias\": false}}, "
        "{\"class_name\": \"Flatten\", \"config\": {\"name\": \"f\"}}, "
        "{\"class_name\": \"Dense\", \"config\": {\"name\": \"d\", \"units\": 2, \"activation\": \"softmax\"}}]}}";
    CHECK_OK(import_text(sequential, &imp));
    if (imp) {
        const brg_model *m = brg_import_model(imp);
        CHECK(brg_model_layer_count(m) == 2 && brg_model_trainable_params(m) == 18 + 64 + 2);
        brg_import_free(imp);
    }
}

/* ---- bad files ---- */

static void expect_refused(const char *text, brg_status want, const char *words)
{
    brg_import *imp = NULL;
    const brg_status st = import_text(text, &imp);
    CHECK_MSG(st == want, "got %s, expected %s: %s", brg_status_string(st), brg_status_string(want), brg_last_error());
    CHECK_MSG(strstr(brg_last_error(), words) != NULL, "message \"%s\" lacks \"%s\"", brg_last_error(), words);
    brg_import_free(imp);
}

/* A layer of class cls called name on layer from, with config fields. */
#define K2_LAYER_ON(cls, name, from, fields)                                                                      \
    "{\"class_name\": \"" cls "\", \"name\": \"" name "\", \"config\": {\"name\": \"" name "\", " fields "}, " \
    "\"inbound_nodes\": [[[\"" from "\", 0, 0, {}]]]}"
#define K2_LAYER(cls, name, fields) K2_LAYER_ON(cls, name, "input_1", fields)

#define K2_MODEL(layers) \
    "{\"class_name\": \"Model\", \"config\": {\"name\": \"bad\", \"layers\": [" K2_INPUT ", " layers "], " \
    "\"input_layers\": [[\"input_1\", 0, 0]], \"output_layers\": [[\"out\", 0, 0]]}}"

#define K2_SAME_S2 "\"filters\": 4, \"kernel_size\": [3, 3], \"strides\": [2, 2], \"padding\": \"same\""

static void test_bad_files(void)
{
    expect_refused("{\"class_name\": ", BRG_ERR_FORMAT, "k.json:1:");
    expect_refused("{\"layers\": []}", BRG_ERR_FORMAT, "not a Keras model");
    expect_refused(K2_MODEL("{\"class_name\": \"LSTM\", \"name\": \"out\", \"config\": {\"name\": \"out\"}, "
                            "\"inbound_nodes\": [[[\"input_1\", 0, 0, {}]]]}"),
                   BRG_ERR_UNSUPPORTED, "layer 'out' (LSTM): a layer brigade does not import: brigade trains "
                   "convolutional networks: no recurrent, embedding or attention layers; it imports InputLayer");
    /* Each with what to do instead; one with no advice of its own gets the
     * general one. */
    expect_refused(K2_MODEL(K2_LAYER("Rescaling", "out", "\"scale\": 0.5")), BRG_ERR_UNSUPPORTED,
                   "layer 'out' (Rescaling): a layer brigade does not import: preprocessing and augmentation belong "
                   "to the data pipeline: build the model from the layer after it");
    expect_refused(K2_MODEL(K2_LAYER("DepthwiseConv2D", "out", "\"kernel_size\": 3")), BRG_ERR_UNSUPPORTED,
                   "(DepthwiseConv2D): a layer brigade does not import: brigade's conv2d has no groups");
    expect_refused(K2_MODEL(K2_LAYER("Frobnicate", "out", "\"size\": 3")), BRG_ERR_UNSUPPORTED,
                   "(Frobnicate): a layer brigade does not import: build the model from the ones below");
    /* A Softmax layer: dropped as the output, refused inside the model. */
    expect_refused(K2_MODEL(K2_LAYER("Softmax", "s", "\"axis\": -1") ", " K2_CONV("out", "s", "")),
                   BRG_ERR_UNSUPPORTED, "layer 's' (Softmax): a softmax inside the model");
    expect_refused(K2_MODEL(K2_CONV("out", "input_1", ", \"use_bias\": false")), BRG_ERR_FORMAT,
                   "k.json:1:");                        /* a key twice */
    /* A base model with a head on it (transfer learning): said as such,
     * with the way to a flat model. */
    expect_refused(K2_MODEL(K2_LAYER("Sequential", "out", "\"layers\": []")), BRG_ERR_UNSUPPORTED,
                   "layer 'out' (Sequential): a model inside the model (a base model with a head on it): brigade "
                   "imports flat models; build it from the inner model's layers");
    expect_refused(K2_MODEL(K2_LAYER("Functional", "out", "\"layers\": []")), BRG_ERR_UNSUPPORTED,
                   "layer 'out' (Functional): a model inside the model");
    expect_refused(K2_MODEL(K2_CONV("out", "input_1", ", \"groups\": 2")), BRG_ERR_UNSUPPORTED,
                   "layer 'out' (Conv2D): groups = 2");
    expect_refused(K2_MODEL(K2_LAYER("Conv2D", "out", "\"filters\": 4, \"kernel_size\": 3, \"activation\": \"tanh\"")),
                   BRG_ERR_UNSUPPORTED, "layer 'out' (Conv2D): activation 'tanh': brigade has relu");
    expect_refused(K2_MODEL(K2_CONV("out", "later", "")), BRG_ERR_FORMAT,
                   "layer 'out' (Conv2D): reads layer 'later', which comes later or not at all");
    expect_refused(K2_MODEL(K2_LAYER("Conv2D", "out", "\"filters\": \"four\", \"kernel_size\": 3")), BRG_ERR_FORMAT,
                   "layer 'out' (Conv2D): 'filters' is not a whole number");
    expect_refused(K2_MODEL(K2_LAYER("Conv2D", "out", "\"filters\": 4, \"kernel_size\": [3, 3, 3]")), BRG_ERR_FORMAT,
                   "'kernel_size' is not a number or two");
    expect_refused(K2_MODEL(K2_LAYER("Dense", "out", "\"units\": 4")), BRG_ERR_UNSUPPORTED,
                   "reads a [H, W, C] tensor");
    expect_refused("{\"class_name\": \"Model\", \"config\": {\"name\": \"bad\", \"layers\": ["
                   "{\"class_name\": \"InputLayer\", \"name\": \"input_1\", \"config\": {\"batch_input_shape\": "
                   "[null, null, null, 3], \"name\": \"input_1\"}, \"inbound_nodes\": []}, "
                   K2_CONV("out", "input_1", "") "], \"input_layers\": [[\"input_1\", 0, 0]], "
                   "\"output_layers\": [[\"out\", 0, 0]]}}",
                   BRG_ERR_UNSUPPORTED, "an input of unknown size");
    /* A 2x2 'same' convolution pads one side only. */
    expect_refused(K2_MODEL(K2_LAYER("Conv2D", "out",
                                     "\"filters\": 4, \"kernel_size\": [2, 2], \"padding\": \"same\"")),
                   BRG_ERR_UNSUPPORTED, "pads 0 before and 1 after (padding 'same' here)");
    /* A layer called twice. */
    expect_refused(K2_MODEL("{\"class_name\": \"Activation\", \"name\": \"out\", \"config\": {\"name\": \"out\", "
                            "\"activation\": \"relu\"}, \"inbound_nodes\": [[[\"input_1\", 0, 0, {}]], "
                            "[[\"input_1\", 0, 0, {}]]]}"),
                   BRG_ERR_UNSUPPORTED, "called 2 times");
    expect_refused("{\"class_name\": \"Sequential\", \"config\": {\"name\": \"s\", \"layers\": ["
                   "{\"class_name\": \"InputLayer\", \"config\": {\"batch_shape\": [null, 4, 4, 1], "
                   "\"name\": \"in\"}}, "
                   "{\"class_name\": \"Flatten\", \"config\": {}}]}}",
                   BRG_ERR_FORMAT, "the last layer has no name"); /* found by fuzzing */
    /* Sizes that once overflowed (found in review): clean refusals. */
    expect_refused(K2_MODEL(K2_LAYER("Flatten", "f", "\"data_format\": \"channels_last\"") ", "
                            K2_LAYER_ON("Dense", "out", "f", "\"units\": 100000000")),
                   BRG_ERR_FORMAT, "units 100000000");
    expect_refused(K2_MODEL(K2_LAYER("Conv2D", "out", "\"filters\": 1073741824, \"kernel_size\": 3")),
                   BRG_ERR_UNSUPPORTED, "1073741824 filters");
    expect_refused(K2_MODEL(K2_LAYER("ZeroPadding2D", "zp", "\"padding\": 4294967297") ", "
                            K2_CONV("out", "zp", "")),
                   BRG_ERR_FORMAT, "padding 4294967297");
    /* 'same' after ZeroPadding2D((1, 0), (1, 0)) pads the 9x9 the padding made:
     * 1 and 1, so 2 before and 1 after in all, which brigade cannot do. */
    expect_refused(K2_MODEL(K2_LAYER("ZeroPadding2D", "zp", "\"padding\": [[1, 0], [1, 0]]") ", "
                            K2_LAYER_ON("Conv2D", "out", "zp", K2_SAME_S2)),
                   BRG_ERR_UNSUPPORTED, "pads 2 before and 1 after");
    expect_refused("{\"class_name\": \"Model\", \"config\": {\"name\": \"bad\", \"layers\": ["
                   "{\"class_name\": \"InputLayer\", \"name\": \"input_1\", \"config\": {\"batch_input_shape\": "
                   "[null, 2097152, 8, 3], \"name\": \"input_1\"}, \"inbound_nodes\": []}, "
                   K2_CONV("out", "input_1", "") "], \"input_layers\": [[\"input_1\", 0, 0]], "
                   "\"output_layers\": [[\"out\", 0, 0]]}}",
                   BRG_ERR_UNSUPPORTED, "k.json: layer 'input_1' (InputLayer): the input is 3x2097152x8 (CxHxW)");
    /* A data format that changes what a layer computes, unlike the rest of
     * the model's: refused, naming the layer to change and how. */
    expect_refused(K2_MODEL(K2_LAYER("Conv2D", "c", "\"filters\": 2, \"kernel_size\": 3, \"data_format\": "
                                     "\"channels_first\"") ", "
                            K2_LAYER_ON("GlobalAveragePooling2D", "out", "c", "\"data_format\": \"channels_last\"")),
                   BRG_ERR_UNSUPPORTED, "give layer 'out' data_format=\"channels_first\" like the model's other 1 "
                   "layer (or call keras.config.set_image_data_format(\"channels_first\")");
    expect_refused(K2_MODEL(K2_LAYER("Conv2D", "out", "\"filters\": 2, \"kernel_size\": 3, \"data_format\": "
                                     "\"channels_middle\"")),
                   BRG_ERR_FORMAT, "layer 'out' (Conv2D): data_format is not \"channels_first\" or \"channels_last\"");
    expect_refused(K2_MODEL(K2_CONV("c", "input_1", "") ", "
                            K2_LAYER_ON("Flatten", "out", "c", "\"data_format\": \"channels_first\"")),
                   BRG_ERR_UNSUPPORTED, "layer 'out' (Flatten): data_format 'channels_first' in a channels_last "
                   "model: Keras would move the rows last before flattening");
    brg_import *imp = NULL;
    CHECK_STATUS(brg_import_keras("/nonexistent/model.json", &imp), BRG_ERR_IO);
    CHECK(imp == NULL);
}

/* A final Softmax layer is dropped like a final Activation("softmax"). */
static void test_final_softmax_layer(void)
{
    brg_import *imp = NULL;
    CHECK_OK(import_text(K2_MODEL(K2_CONV("c", "input_1", "") ", " K2_LAYER_ON("Softmax", "out", "c", "\"axis\": -1")),
                         &imp));
    if (!imp) return;
    CHECK(brg_model_layer_count(brg_import_model(imp)) == 2); /* c, its relu */
    CHECK(brg_import_note_count(imp) == 1 && strstr(brg_import_note(imp, 0), "dropped the final softmax 'out'"));
    brg_import_free(imp);
}

/* A float16 input and layers of a float16 dtype policy: computed in
 * float32, with a note saying so (a Keras 3 InputLayer's dtype is a
 * string, a layer's a DTypePolicy object). */
static void test_float16_notes(void)
{
    const char *text =
        "{\"class_name\": \"Model\", \"config\": {\"name\": \"half\", \"layers\": ["
        "{\"class_name\": \"InputLayer\", \"name\": \"input_1\", \"config\": {\"batch_input_shape\": "
        "[null, 8, 8, 3], \"dtype\": \"float16\", \"name\": \"input_1\"}, \"inbound_nodes\": []}, "
        K2_CONV("c1", "input_1", ", \"dtype\": {\"module\": \"keras\", \"class_name\": \"DTypePolicy\", "
                "\"config\": {\"name\": \"mixed_float16\"}}") ", "
        K2_CONV("out", "c1", ", \"dtype\": \"float16\"") "], "
        "\"input_layers\": [[\"input_1\", 0, 0]], \"output_layers\": [[\"out\", 0, 0]]}}";
    brg_import *imp = NULL;
    CHECK_OK(import_text(text, &imp));
    if (!imp) return;
    int input_note = 0, layer_note = 0;
    for (int i = 0; i < brg_import_note_count(imp); i++) {
        const char *note = brg_import_note(imp, i);
        input_note += strstr(note, "the input is float16 in Keras; brigade reads float32 inputs and computes in "
                                   "float32") != NULL;
        layer_note += strstr(note, "layer 'c1' computes in mixed_float16 in Keras (its dtype policy), and other "
                                   "layers not in float32 too; brigade computes every layer in float32") != NULL;
    }
    CHECK_MSG(input_note == 1 && layer_note == 1, "%d notes on the input's dtype, %d on the layers'", input_note,
              layer_note);
    brg_import_free(imp);
    /* float32 throughout: no note. */
    CHECK_OK(import_text(K2_MODEL(K2_CONV("out", "input_1", ", \"dtype\": \"float32\"")), &imp));
    CHECK(imp && brg_import_note_count(imp) == 0);
    brg_import_free(imp);
}

/* The same on a 5x5 input: 'same' over the padded 6x6 pads 0 and 1, 1 on
 * each side in all, and the output is Keras's 3x3. */
static void test_same_after_padding(void)
{
    const char *text =
        "{\"class_name\": \"Model\", \"config\": {\"name\": \"zp\", \"layers\": ["
        "{\"class_name\": \"InputLayer\", \"name\": \"input_1\", \"config\": {\"batch_input_shape\": "
        "[null, 5, 5, 3], \"name\": \"input_1\"}, \"inbound_nodes\": []}, "
        K2_LAYER("ZeroPadding2D", "zp", "\"padding\": [[1, 0], [1, 0]]") ", "
        K2_LAYER_ON("Conv2D", "out", "zp", K2_SAME_S2) "], "
        "\"input_layers\": [[\"input_1\", 0, 0]], \"output_layers\": [[\"out\", 0, 0]]}}";
    brg_import *imp = NULL;
    CHECK_OK(import_text(text, &imp));
    if (!imp) return;
    const brg_model *m = brg_import_model(imp);
    const brg_model_tensor *y = brg_model_get_tensor(m, brg_model_output(m));
    CHECK_MSG(y->c == 4 && y->h == 3 && y->w == 3, "output [%lld, %lld, %lld]", (long long)y->c, (long long)y->h,
              (long long)y->w);
    CHECK(brg_model_get_layer(m, 0)->desc.pad_h == 1 && brg_model_get_layer(m, 0)->desc.pad_w == 1);
    brg_import_free(imp);
}

/* A ReLU brigade adds after "c" (activation relu) is named c_relu, unless a
 * later layer of the file is: then the file's keeps it. */
static void test_made_up_names(void)
{
    const char *text = K2_MODEL(K2_CONV("c", "input_1", "") ", "
                                "{\"class_name\": \"Activation\", \"name\": \"c_relu\", \"config\": {\"name\": "
                                "\"c_relu\", \"activation\": \"relu\"}, \"inbound_nodes\": [[[\"c\", 0, 0, {}]]]}, "
                                K2_LAYER_ON("GlobalAveragePooling2D", "out", "c_relu",
                                            "\"data_format\": \"channels_last\""));
    brg_import *imp = NULL;
    CHECK_OK(import_text(text, &imp));
    if (!imp) return;
    const brg_model *m = brg_import_model(imp);
    CHECK(brg_model_layer_count(m) == 4);
    const int made = brg_model_find_layer(m, "c_relu_2"), file = brg_model_find_layer(m, "c_relu");
    CHECK_MSG(made == 1 && file == 2, "c_relu_2 at %d, c_relu at %d", made, file);
    brg_import_free(imp);
}

int main(void)
{
    test_inception();
    test_small_cnn();
    test_channels_first();
    test_sequential();
    test_keras2();
    test_float16_notes();
    test_final_softmax_layer();
    test_bad_files();
    test_same_after_padding();
    test_made_up_names();
    TEST_EXIT();
}
