/* Keras models into brigade models (docs/import.md): the JSON of
 * model.to_json() (Keras 2 and 3, functional and Sequential), read with
 * jansson.
 *
 * Keras lists a functional model's layers in a topological order, each
 * with the layers it is called on (its inbound nodes); a Sequential one is
 * a chain. Each Keras layer's output becomes a value: a brigade tensor and
 * how Keras sees it (flattened or not, and whether a channels-last Flatten
 * put its features in height-width-channel order, which a Dense after it
 * must undo), or a ZeroPadding2D waiting to fold into the next
 * convolution or pool. Channels-last models become brigade's
 * channels-first ones; weights are registered in Keras's layout
 * (kernel [kh, kw, in, out], dense [in, out]) with the rearrangement to
 * brigade's, to be read from a .keras archive or bound. */
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/import/import-impl.h"

#define SUPPORTED_LAYERS                                                                                           \
    "InputLayer, Conv2D, BatchNormalization, Activation (relu, linear, a final softmax), ReLU, a final Softmax, "  \
    "MaxPooling2D, AveragePooling2D, GlobalAveragePooling2D, Concatenate, Add, Dense, Dropout, Flatten, "          \
    "ZeroPadding2D, UpSampling2D"

typedef struct kvalue {
    char layer[BRG_NAME_MAX]; /* the Keras layer whose output it is */
    char tensor[BRG_NAME_MAX];
    int flat;    /* [N, F] */
    int hwc;     /* flattened from channels-last [H, W, C] with H x W > 1 */
    int64_t hwc_dims[3];
    int nonneg;  /* made by a ReLU */
    int padded;  /* a ZeroPadding2D of value `of`: top, left, bottom, right */
    int of;
    int pad[4];
} kvalue;

typedef struct kctx {
    const char *source;
    brg_import *imp;
    int channels_last;
    kvalue *values;
    int n_values, cap_values;
    const char *final;  /* the output layer's name */
    int other_outputs;  /* outputs after the first, left out */
    /* layers Keras computes in another dtype than float32: how many, and the first's name and dtype policy */
    int n_other_dtype;
    const char *other_dtype_layer, *other_dtype;
    /* the layer being translated */
    const char *name, *cls;
    json_t *config;
} kctx;

static brg_status fail(const kctx *c, brg_status st, const char *fmt, ...) BRG_PRINTF(3, 4);
static brg_status fail(const kctx *c, brg_status st, const char *fmt, ...)
{
    char what[512], name[80];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return brg_error(st, "%s: layer '%s' (%s): %s", c->source, brg_text_clean(c->name, name, sizeof name, 64), c->cls,
                     what);
}

/* ---- config values ---- */

static json_t *cfg(const kctx *c, const char *key) { return json_object_get(c->config, key); }

static brg_status cfg_int(const kctx *c, const char *key, int64_t def, int64_t *out)
{
    json_t *v = cfg(c, key);
    if (!v || json_is_null(v)) {
        *out = def;
        return BRG_OK;
    }
    if (!json_is_integer(v)) return fail(c, BRG_ERR_FORMAT, "'%s' is not a whole number", key);
    *out = json_integer_value(v);
    return BRG_OK;
}

static brg_status cfg_real(const kctx *c, const char *key, double def, double *out)
{
    json_t *v = cfg(c, key);
    if (!v || json_is_null(v)) {
        *out = def;
        return BRG_OK;
    }
    if (!json_is_number(v)) return fail(c, BRG_ERR_FORMAT, "'%s' is not a number", key);
    *out = json_number_value(v);
    return BRG_OK;
}

static brg_status cfg_bool(const kctx *c, const char *key, int def, int *out)
{
    json_t *v = cfg(c, key);
    if (!v || json_is_null(v)) {
        *out = def;
        return BRG_OK;
    }
    if (!json_is_boolean(v)) return fail(c, BRG_ERR_FORMAT, "'%s' is not true or false", key);
    *out = json_is_true(v);
    return BRG_OK;
}

static const char *cfg_string(const kctx *c, const char *key, const char *def)
{
    json_t *v = cfg(c, key);
    return json_is_string(v) ? json_string_value(v) : def;
}

/* A pair ("kernel_size": [3, 3] or 3); *given 0 when absent or null. */
static brg_status cfg_pair(const kctx *c, const char *key, int64_t out[2], int *given)
{
    json_t *v = cfg(c, key);
    *given = v && !json_is_null(v);
    if (!*given) return BRG_OK;
    if (json_is_integer(v)) {
        out[0] = out[1] = json_integer_value(v);
    } else if (json_is_array(v) && json_array_size(v) == 2 && json_is_integer(json_array_get(v, 0)) &&
               json_is_integer(json_array_get(v, 1))) {
        out[0] = json_integer_value(json_array_get(v, 0));
        out[1] = json_integer_value(json_array_get(v, 1));
    } else {
        return fail(c, BRG_ERR_FORMAT, "'%s' is not a number or two", key);
    }
    if (out[0] < 1 || out[1] < 1 || out[0] > (1 << 20) || out[1] > (1 << 20))
        return fail(c, BRG_ERR_FORMAT, "'%s' is [%lld, %lld]", key, (long long)out[0], (long long)out[1]);
    return BRG_OK;
}

/* The channel axis of a rank-4 tensor (BatchNormalization, Concatenate). */
static int is_channel_axis(const kctx *c, int64_t axis, int flat)
{
    if (flat) return axis == -1 || axis == 1;
    return c->channels_last ? axis == -1 || axis == 3 : axis == 1 || axis == -3;
}

/* ---- values ---- */

static kvalue *find_value(const kctx *c, const char *layer)
{
    for (int i = c->n_values - 1; i >= 0; i--)
        if (strcmp(c->values[i].layer, layer) == 0) return &c->values[i];
    return NULL;
}

static brg_status add_value(kctx *c, const kvalue *v)
{
    if (find_value(c, v->layer)) return fail(c, BRG_ERR_FORMAT, "two layers are named '%s'", v->layer);
    if (c->n_values == c->cap_values) {
        const int want = c->cap_values ? 2 * c->cap_values : 64;
        kvalue *p = realloc(c->values, (size_t)want * sizeof *p);
        if (!p) return brg_error(BRG_ERR_HOST_MEMORY, "cannot allocate the model's tensors");
        c->values = p;
        c->cap_values = want;
    }
    c->values[c->n_values++] = *v;
    return BRG_OK;
}

/* This layer's output: tensor, with the flags of like (or none). */
static brg_status output(kctx *c, const char *tensor, const kvalue *like, int nonneg)
{
    kvalue v;
    memset(&v, 0, sizeof v);
    if (like) v = *like;
    snprintf(v.layer, sizeof v.layer, "%s", c->name);
    snprintf(v.tensor, sizeof v.tensor, "%s", tensor);
    v.padded = 0;
    v.nonneg = nonneg;
    return add_value(c, &v);
}

static import_shape shape_of(const kctx *c, const kvalue *v) { return import_tensor(c->imp, v->tensor); }

static brg_status layer(kctx *c, const char *name, const brg_layer_desc *d, const char *const *inputs, int n,
                        int *index)
{
    const brg_status st = import_add_layer(c->imp, name, d, inputs, n, index);
    if (st == BRG_OK) return BRG_OK;
    char clean[80];
    return brg_error_context(st, "%s: layer '%s' (%s)", c->source, brg_text_clean(c->name, clean, sizeof clean, 64),
                             c->cls);
}

/* A parameter from the Keras weight "<layer>/<what>" (bound later). */
static brg_status param(kctx *c, int li, const char *which, const char *what, import_layout layout,
                        const int64_t dims[4], int64_t count)
{
    char source[2 * BRG_NAME_MAX + 16];
    snprintf(source, sizeof source, "%s/%s", c->name, what);
    return import_add_param(c->imp, li, which, source, layout, dims, NULL, count);
}

/* ---- the inputs of a layer ---- */

/* Keras 3: {"args": [tensor or [tensors]], "kwargs": {}} with a tensor's
 * config.keras_history [layer, node, index]; Keras 2: [[layer, node, index,
 * kwargs], ...]. The layer names into names (at most max). */
static brg_status inbound(const kctx *c, json_t *layer, const char **names, int max, int *n)
{
    *n = 0;
    json_t *nodes = json_object_get(layer, "inbound_nodes");
    if (!json_is_array(nodes) || json_array_size(nodes) == 0) return fail(c, BRG_ERR_FORMAT, "no inbound nodes");
    if (json_array_size(nodes) > 1)
        return fail(c, BRG_ERR_UNSUPPORTED, "called %zu times: brigade's layers are not shared",
                    json_array_size(nodes));
    json_t *node = json_array_get(nodes, 0);
    json_t *list = node;
    if (json_is_object(node)) { /* Keras 3 */
        json_t *args = json_object_get(node, "args");
        json_t *first = json_array_get(args, 0);
        if (!json_is_array(args) || !first) return fail(c, BRG_ERR_FORMAT, "an inbound node without args");
        if (json_array_size(args) > 1) return fail(c, BRG_ERR_UNSUPPORTED, "called with more than one argument");
        if (json_is_array(first)) list = first;
        else {
            list = NULL;
            json_t *hist = json_object_get(json_object_get(first, "config"), "keras_history");
            const char *name = json_string_value(json_array_get(hist, 0));
            if (!name) return fail(c, BRG_ERR_FORMAT, "an input without keras_history");
            names[(*n)++] = name;
        }
        for (size_t i = 0; list && i < json_array_size(list); i++) {
            json_t *hist = json_object_get(json_object_get(json_array_get(list, i), "config"), "keras_history");
            const char *name = json_string_value(json_array_get(hist, 0));
            if (!name) return fail(c, BRG_ERR_FORMAT, "an input without keras_history");
            if (*n == max) return fail(c, BRG_ERR_UNSUPPORTED, "more than %d inputs", max);
            names[(*n)++] = name;
        }
        return BRG_OK;
    }
    for (size_t i = 0; json_is_array(list) && i < json_array_size(list); i++) { /* Keras 2 */
        const char *name = json_string_value(json_array_get(json_array_get(list, i), 0));
        if (!name) return fail(c, BRG_ERR_FORMAT, "an inbound node that names no layer");
        if (*n == max) return fail(c, BRG_ERR_UNSUPPORTED, "more than %d inputs", max);
        names[(*n)++] = name;
    }
    if (*n == 0) return fail(c, BRG_ERR_FORMAT, "an inbound node without inputs");
    return BRG_OK;
}

static brg_status input_value(const kctx *c, const char *name, kvalue **out)
{
    *out = find_value(c, name);
    if (!*out)
        return fail(c, BRG_ERR_FORMAT, "reads layer '%s', which comes later or not at all", name);
    return BRG_OK;
}

/* The one input, looking through a ZeroPadding2D into pad (or refusing
 * it when fold is 0). */
static brg_status one_input(kctx *c, const char *const *names, int n, int fold, kvalue **x, int pad[4])
{
    if (n != 1) return fail(c, BRG_ERR_FORMAT, "%d inputs; it takes one", n);
    BRG_CHECK(input_value(c, names[0], x));
    if (pad) memset(pad, 0, 4 * sizeof *pad);
    if ((*x)->padded) {
        if (!fold)
            return fail(c, BRG_ERR_UNSUPPORTED, "reads the ZeroPadding2D '%s': brigade folds one only into the "
                                                "Conv2D or pooling layer after it", names[0]);
        memcpy(pad, (*x)->pad, 4 * sizeof *pad);
        *x = &c->values[(*x)->of];
    }
    return BRG_OK;
}

/* ---- windows ---- */

/* Padding of a window (kernel k, stride s) over in for padding "valid" or
 * "same" (TensorFlow's: the odd one at the end), plus a folded pad;
 * refused when the two sides differ. */
static brg_status window_pad(const kctx *c, const char *mode, int64_t in, int64_t k, int64_t s, int before_fold,
                             int after_fold, int *pad)
{
    int64_t before = 0, after = 0;
    in += before_fold + after_fold; /* 'same' pads what a folded ZeroPadding2D has grown */
    if (strcmp(mode, "same") == 0) {
        const int64_t out = (in + s - 1) / s;
        int64_t total = (out - 1) * s + k - in;
        if (total < 0) total = 0;
        before = total / 2;
        after = total - before;
    } else if (strcmp(mode, "valid") != 0) {
        return fail(c, BRG_ERR_UNSUPPORTED, "padding '%s': brigade reads 'valid' and 'same'", mode);
    }
    before += before_fold, after += after_fold;
    if (before != after)
        return fail(c, BRG_ERR_UNSUPPORTED, "pads %lld before and %lld after (padding '%s' here): brigade pads both "
                                            "sides alike", (long long)before, (long long)after, mode);
    *pad = (int)before;
    return BRG_OK;
}

static brg_status spatial(const kctx *c, const kvalue *x)
{
    if (x->flat) return fail(c, BRG_ERR_UNSUPPORTED, "reads a flattened tensor; it needs [H, W, C]");
    return BRG_OK;
}

/* A ReLU after the layer for activation "relu"; returns the tensor name
 * the layer's output is. */
static brg_status activation_after(kctx *c, const char *made, char *out_tensor, int *nonneg)
{
    const char *act = cfg_string(c, "activation", "linear");
    snprintf(out_tensor, BRG_NAME_MAX, "%s", made);
    *nonneg = 0;
    if (strcmp(act, "linear") == 0) return BRG_OK;
    if (strcmp(act, "softmax") == 0 && c->final && strcmp(c->final, c->name) == 0) {
        import_note(c->imp, "dropped the softmax of the final layer '%s': brigade trains on logits with softmax "
                            "cross-entropy", c->name);
        return BRG_OK;
    }
    if (strcmp(act, "relu") != 0)
        return fail(c, BRG_ERR_UNSUPPORTED, "activation '%s': brigade has relu (and drops a final softmax)", act);
    char base[BRG_NAME_MAX + 8], name[BRG_NAME_MAX];
    snprintf(base, sizeof base, "%.*s_relu", BRG_NAME_MAX - 6, made);
    import_unique_name(c->imp, base, name);
    const brg_layer_desc d = brg_layer_desc_init(BRG_LAYER_RELU);
    const char *in[1] = {made};
    BRG_CHECK(layer(c, name, &d, in, 1, NULL));
    snprintf(out_tensor, BRG_NAME_MAX, "%s", name);
    *nonneg = 1;
    return BRG_OK;
}

/* A layer's dtype or dtype policy ("float16", "mixed_float16"): a string in
 * Keras 2 and in Keras 3's InputLayer, {"class_name": "DTypePolicy",
 * "config": {"name": ...}} otherwise; NULL when not said. */
static const char *dtype_name(json_t *dtype)
{
    if (json_is_string(dtype)) return json_string_value(dtype);
    return json_string_value(json_object_get(json_object_get(dtype, "config"), "name"));
}

/* Count the layer being translated when Keras computes it in another dtype
 * than float32 (brigade computes in float32 only: a note, not a refusal,
 * since float32 is at least as exact). */
static void count_dtype(kctx *c)
{
    const char *dtype = dtype_name(cfg(c, "dtype"));
    if (!dtype || strcmp(dtype, "float32") == 0) return;
    if (c->n_other_dtype++ == 0) c->other_dtype_layer = c->name, c->other_dtype = dtype;
}

/* ---- the layers ---- */

typedef brg_status (*layer_fn)(kctx *c, const char *const *in, int n);

static brg_status k_conv(kctx *c, const char *const *names, int n)
{
    kvalue *x;
    int fold[4];
    BRG_CHECK(one_input(c, names, n, 1, &x, fold));
    BRG_CHECK(spatial(c, x));
    int64_t filters, groups, k[2], s[2] = {1, 1}, dil[2] = {1, 1};
    int given, bias;
    BRG_CHECK(cfg_int(c, "filters", 0, &filters));
    BRG_CHECK(cfg_int(c, "groups", 1, &groups));
    BRG_CHECK(cfg_pair(c, "kernel_size", k, &given));
    if (!given || filters < 1) return fail(c, BRG_ERR_FORMAT, "no filters or kernel_size");
    if (filters > (1 << 24)) return fail(c, BRG_ERR_UNSUPPORTED, "%lld filters", (long long)filters);
    BRG_CHECK(cfg_pair(c, "strides", s, &given));
    BRG_CHECK(cfg_pair(c, "dilation_rate", dil, &given));
    BRG_CHECK(cfg_bool(c, "use_bias", 1, &bias));
    if (groups != 1)
        return fail(c, BRG_ERR_UNSUPPORTED, "groups = %lld: brigade's conv2d has no groups", (long long)groups);
    if (dil[0] != 1 || dil[1] != 1)
        return fail(c, BRG_ERR_UNSUPPORTED, "dilation_rate: brigade has no dilated convolutions");
    const import_shape shape = shape_of(c, x), *t = &shape;
    brg_layer_desc d = brg_layer_desc_init(BRG_LAYER_CONV2D);
    const char *mode = cfg_string(c, "padding", "valid");
    BRG_CHECK(window_pad(c, mode, t->h, k[0], s[0], fold[0], fold[2], &d.pad_h));
    BRG_CHECK(window_pad(c, mode, t->w, k[1], s[1], fold[1], fold[3], &d.pad_w));
    d.out_channels = (int)filters;
    d.kernel_h = (int)k[0], d.kernel_w = (int)k[1];
    d.stride_h = (int)s[0], d.stride_w = (int)s[1];
    d.bias = bias;
    int li;
    const char *in[1] = {x->tensor};
    BRG_CHECK(layer(c, c->name, &d, in, 1, &li));
    const int64_t dims[4] = {k[0], k[1], t->c, filters};
    /* Keras keeps a kernel [kh, kw, in, out] whatever the data format. */
    BRG_CHECK(param(c, li, "weight", "kernel", IMPORT_HWIO, dims, k[0] * k[1] * t->c * filters));
    if (bias) BRG_CHECK(param(c, li, "bias", "bias", IMPORT_AS_IS, NULL, filters));
    char out[BRG_NAME_MAX];
    int nonneg;
    BRG_CHECK(activation_after(c, c->name, out, &nonneg));
    return output(c, out, NULL, nonneg);
}

static brg_status k_batchnorm(kctx *c, const char *const *names, int n)
{
    kvalue *x;
    BRG_CHECK(one_input(c, names, n, 0, &x, NULL));
    const import_shape shape = shape_of(c, x), *t = &shape;
    int64_t axis = -1;
    json_t *a = cfg(c, "axis");
    if (json_is_array(a) && json_array_size(a) == 1) a = json_array_get(a, 0);
    if (json_is_integer(a)) axis = json_integer_value(a);
    else if (a && !json_is_null(a)) return fail(c, BRG_ERR_UNSUPPORTED, "'axis' is not one axis");
    if (!is_channel_axis(c, axis, x->flat) || (x->flat && t->h * t->w != 1))
        return fail(c, BRG_ERR_UNSUPPORTED, "axis %lld: brigade's BatchNorm normalizes each channel", (long long)axis);
    double momentum, eps;
    int center, scale;
    BRG_CHECK(cfg_real(c, "momentum", 0.99, &momentum));
    BRG_CHECK(cfg_real(c, "epsilon", 1e-3, &eps));
    BRG_CHECK(cfg_bool(c, "center", 1, &center));
    BRG_CHECK(cfg_bool(c, "scale", 1, &scale));
    if (json_is_true(cfg(c, "renorm"))) return fail(c, BRG_ERR_UNSUPPORTED, "renorm");
    brg_layer_desc d = brg_layer_desc_init(BRG_LAYER_BATCHNORM);
    d.epsilon = (float)eps;
    d.momentum = (float)(1.0 - momentum); /* Keras keeps `momentum` of the old moving value */
    d.scale = scale;
    d.center = center;
    int li;
    const char *in[1] = {x->tensor};
    BRG_CHECK(layer(c, c->name, &d, in, 1, &li));
    if (scale) BRG_CHECK(param(c, li, "gamma", "gamma", IMPORT_AS_IS, NULL, t->c));
    if (center) BRG_CHECK(param(c, li, "beta", "beta", IMPORT_AS_IS, NULL, t->c));
    BRG_CHECK(param(c, li, "running_mean", "moving_mean", IMPORT_AS_IS, NULL, t->c));
    BRG_CHECK(param(c, li, "running_var", "moving_variance", IMPORT_AS_IS, NULL, t->c));
    return output(c, c->name, x, 0);
}

static brg_status relu_layer(kctx *c, kvalue *x)
{
    const brg_layer_desc d = brg_layer_desc_init(BRG_LAYER_RELU);
    const char *in[1] = {x->tensor};
    BRG_CHECK(layer(c, c->name, &d, in, 1, NULL));
    return output(c, c->name, x, 1);
}

static brg_status k_activation(kctx *c, const char *const *names, int n)
{
    kvalue *x;
    BRG_CHECK(one_input(c, names, n, 0, &x, NULL));
    const char *act = cfg_string(c, "activation", "linear");
    if (strcmp(act, "relu") == 0) return relu_layer(c, x);
    if (strcmp(act, "linear") == 0) return output(c, x->tensor, x, x->nonneg);
    if (strcmp(act, "softmax") == 0 && c->final && strcmp(c->final, c->name) == 0) {
        import_note(c->imp, "dropped the final softmax '%s': brigade trains on logits with softmax cross-entropy",
                    c->name);
        return output(c, x->tensor, x, 0);
    }
    return fail(c, BRG_ERR_UNSUPPORTED, "activation '%s': brigade has relu (and drops a final softmax)", act);
}

/* A Softmax layer: as Activation("softmax"), dropped on the output over
 * the classes (its channels), refused elsewhere. */
static brg_status k_softmax(kctx *c, const char *const *names, int n)
{
    kvalue *x;
    BRG_CHECK(one_input(c, names, n, 0, &x, NULL));
    int64_t axis = -1;
    json_t *a = cfg(c, "axis");
    if (json_is_array(a) && json_array_size(a) == 1) a = json_array_get(a, 0);
    if (json_is_integer(a)) axis = json_integer_value(a);
    else if (a && !json_is_null(a)) return fail(c, BRG_ERR_UNSUPPORTED, "'axis' is not one axis");
    if (!c->final || strcmp(c->final, c->name) != 0)
        return fail(c, BRG_ERR_UNSUPPORTED, "a softmax inside the model: brigade's one activation is ReLU (a final "
                                            "softmax is dropped)");
    if (!is_channel_axis(c, axis, x->flat))
        return fail(c, BRG_ERR_UNSUPPORTED, "axis %lld: brigade trains on logits over the classes (the channels) and "
                                            "drops a final softmax over them only", (long long)axis);
    import_note(c->imp, "dropped the final softmax '%s': brigade trains on logits with softmax cross-entropy", c->name);
    return output(c, x->tensor, x, 0);
}

static brg_status k_relu(kctx *c, const char *const *names, int n)
{
    kvalue *x;
    BRG_CHECK(one_input(c, names, n, 0, &x, NULL));
    double slope, threshold;
    BRG_CHECK(cfg_real(c, "negative_slope", 0.0, &slope));
    BRG_CHECK(cfg_real(c, "threshold", 0.0, &threshold));
    json_t *max = cfg(c, "max_value");
    if (slope != 0.0 || threshold != 0.0 || (max && !json_is_null(max)))
        return fail(c, BRG_ERR_UNSUPPORTED, "max_value, negative_slope or threshold: brigade's ReLU is max(x, 0)");
    return relu_layer(c, x);
}

static brg_status pool(kctx *c, const char *const *names, int n, int is_max)
{
    kvalue *x;
    int fold[4];
    BRG_CHECK(one_input(c, names, n, 1, &x, fold));
    BRG_CHECK(spatial(c, x));
    const int folding = fold[0] || fold[1] || fold[2] || fold[3];
    int64_t k[2] = {2, 2}, s[2];
    int given;
    BRG_CHECK(cfg_pair(c, "pool_size", k, &given));
    BRG_CHECK(cfg_pair(c, "strides", s, &given));
    if (!given) s[0] = k[0], s[1] = k[1];
    const char *mode = cfg_string(c, "padding", "valid");
    if (folding && is_max && !x->nonneg)
        return fail(c, BRG_ERR_UNSUPPORTED, "a ZeroPadding2D folds into a max pool only after a ReLU");
    if (folding && !is_max && strcmp(mode, "valid") != 0)
        return fail(c, BRG_ERR_UNSUPPORTED, "a ZeroPadding2D folds into an average pool only with padding 'valid'");
    const import_shape shape = shape_of(c, x), *t = &shape;
    brg_layer_desc d = brg_layer_desc_init(is_max ? BRG_LAYER_MAXPOOL : BRG_LAYER_AVGPOOL);
    BRG_CHECK(window_pad(c, mode, t->h, k[0], s[0], fold[0], fold[2], &d.pad_h));
    BRG_CHECK(window_pad(c, mode, t->w, k[1], s[1], fold[1], fold[3], &d.pad_w));
    if (2 * d.pad_h > k[0] || 2 * d.pad_w > k[1])
        return fail(c, BRG_ERR_UNSUPPORTED, "padding %dx%d of a %lldx%lld window: brigade's pools pad at most half a "
                                            "window", d.pad_h, d.pad_w, (long long)k[0], (long long)k[1]);
    d.kernel_h = (int)k[0], d.kernel_w = (int)k[1];
    d.stride_h = (int)s[0], d.stride_w = (int)s[1];
    d.count_include_pad = !is_max && folding; /* 'same' leaves the padding out of the mean, as Keras does */
    const char *in[1] = {x->tensor};
    BRG_CHECK(layer(c, c->name, &d, in, 1, NULL));
    return output(c, c->name, NULL, is_max && x->nonneg);
}

static brg_status k_maxpool(kctx *c, const char *const *names, int n) { return pool(c, names, n, 1); }
static brg_status k_avgpool(kctx *c, const char *const *names, int n) { return pool(c, names, n, 0); }

static brg_status k_global_avgpool(kctx *c, const char *const *names, int n)
{
    kvalue *x;
    BRG_CHECK(one_input(c, names, n, 0, &x, NULL));
    BRG_CHECK(spatial(c, x));
    int keepdims;
    BRG_CHECK(cfg_bool(c, "keepdims", 0, &keepdims));
    const brg_layer_desc d = brg_layer_desc_init(BRG_LAYER_GLOBAL_AVGPOOL);
    const char *in[1] = {x->tensor};
    BRG_CHECK(layer(c, c->name, &d, in, 1, NULL));
    kvalue like;
    memset(&like, 0, sizeof like);
    like.flat = !keepdims;
    return output(c, c->name, &like, x->nonneg);
}

static brg_status k_concat(kctx *c, const char *const *names, int n)
{
    int64_t axis;
    BRG_CHECK(cfg_int(c, "axis", -1, &axis));
    const char *in[BRG_LAYER_MAX_INPUTS];
    int flat = -1, nonneg = 1;
    for (int i = 0; i < n; i++) {
        kvalue *x;
        BRG_CHECK(input_value(c, names[i], &x));
        if (x->padded) return fail(c, BRG_ERR_UNSUPPORTED, "reads a ZeroPadding2D");
        if (flat >= 0 && x->flat != flat) return fail(c, BRG_ERR_FORMAT, "joins flattened and unflattened tensors");
        flat = x->flat;
        const import_shape shape = shape_of(c, x), *t = &shape;
        if (x->flat && t->h * t->w != 1) return fail(c, BRG_ERR_UNSUPPORTED, "joins flattened [H, W, C] tensors");
        nonneg = nonneg && x->nonneg;
        in[i] = x->tensor;
    }
    if (!is_channel_axis(c, axis, flat == 1))
        return fail(c, BRG_ERR_UNSUPPORTED, "axis %lld: brigade joins along the channels", (long long)axis);
    const brg_layer_desc d = brg_layer_desc_init(BRG_LAYER_CONCAT);
    BRG_CHECK(layer(c, c->name, &d, in, n, NULL));
    kvalue like;
    memset(&like, 0, sizeof like);
    like.flat = flat == 1;
    return output(c, c->name, &like, nonneg);
}

static brg_status k_add(kctx *c, const char *const *names, int n)
{
    if (n < 2) return fail(c, BRG_ERR_FORMAT, "%d inputs; Add takes two or more", n);
    kvalue *first;
    BRG_CHECK(input_value(c, names[0], &first));
    char sum[BRG_NAME_MAX];
    snprintf(sum, sizeof sum, "%s", first->tensor);
    for (int i = 1; i < n; i++) { /* brigade adds two at a time */
        kvalue *x;
        BRG_CHECK(input_value(c, names[i], &x));
        if (x->padded || first->padded) return fail(c, BRG_ERR_UNSUPPORTED, "reads a ZeroPadding2D");
        char name[BRG_NAME_MAX];
        if (i == n - 1) snprintf(name, sizeof name, "%s", c->name);
        else {
            char base[BRG_NAME_MAX + 16];
            snprintf(base, sizeof base, "%.*s_%d", BRG_NAME_MAX - 8, c->name, i);
            import_unique_name(c->imp, base, name);
        }
        const brg_layer_desc d = brg_layer_desc_init(BRG_LAYER_ADD);
        const char *in[2] = {sum, x->tensor};
        BRG_CHECK(layer(c, name, &d, in, 2, NULL));
        snprintf(sum, sizeof sum, "%s", name);
    }
    return output(c, c->name, first, 0);
}

static brg_status k_dense(kctx *c, const char *const *names, int n)
{
    kvalue *x;
    BRG_CHECK(one_input(c, names, n, 0, &x, NULL));
    if (!x->flat)
        return fail(c, BRG_ERR_UNSUPPORTED, "reads a [H, W, C] tensor; brigade's Dense takes [batch, features]");
    int64_t units;
    int bias;
    BRG_CHECK(cfg_int(c, "units", 0, &units));
    BRG_CHECK(cfg_bool(c, "use_bias", 1, &bias));
    if (units < 1 || units > (1 << 24)) return fail(c, BRG_ERR_FORMAT, "units %lld", (long long)units);
    const import_shape shape = shape_of(c, x), *t = &shape;
    const int64_t features = t->c * t->h * t->w;
    brg_layer_desc d = brg_layer_desc_init(BRG_LAYER_LINEAR);
    d.out_channels = (int)units;
    d.bias = bias;
    int li;
    const char *in[1] = {x->tensor};
    BRG_CHECK(layer(c, c->name, &d, in, 1, &li));
    if (x->hwc) {
        const int64_t dims[4] = {x->hwc_dims[0], x->hwc_dims[1], x->hwc_dims[2], units};
        BRG_CHECK(param(c, li, "weight", "kernel", IMPORT_HWC_ROWS, dims, features * units));
    } else {
        const int64_t dims[4] = {features, units, 0, 0};
        BRG_CHECK(param(c, li, "weight", "kernel", IMPORT_TRANSPOSE, dims, features * units));
    }
    if (bias) BRG_CHECK(param(c, li, "bias", "bias", IMPORT_AS_IS, NULL, units));
    char out[BRG_NAME_MAX];
    int nonneg;
    BRG_CHECK(activation_after(c, c->name, out, &nonneg));
    kvalue like;
    memset(&like, 0, sizeof like);
    like.flat = 1;
    return output(c, out, &like, nonneg);
}

static brg_status k_dropout(kctx *c, const char *const *names, int n)
{
    kvalue *x;
    BRG_CHECK(one_input(c, names, n, 0, &x, NULL));
    double rate;
    BRG_CHECK(cfg_real(c, "rate", 0.5, &rate));
    json_t *shape = cfg(c, "noise_shape");
    if (shape && !json_is_null(shape)) return fail(c, BRG_ERR_UNSUPPORTED, "noise_shape: brigade drops single values");
    if (!(rate >= 0.0 && rate < 1.0)) return fail(c, BRG_ERR_FORMAT, "rate %g is not in [0, 1)", rate);
    if (rate == 0.0) return output(c, x->tensor, x, x->nonneg);
    brg_layer_desc d = brg_layer_desc_init(BRG_LAYER_DROPOUT);
    d.rate = (float)rate;
    const char *in[1] = {x->tensor};
    BRG_CHECK(layer(c, c->name, &d, in, 1, NULL));
    return output(c, c->name, x, x->nonneg);
}

static brg_status k_flatten(kctx *c, const char *const *names, int n)
{
    kvalue *x;
    BRG_CHECK(one_input(c, names, n, 0, &x, NULL));
    const char *f = cfg_string(c, "data_format", NULL);
    const int says_first = f && strcmp(f, "channels_first") == 0;
    if (c->channels_last && says_first)
        return fail(c, BRG_ERR_UNSUPPORTED, "data_format 'channels_first' in a channels_last model: Keras would move "
                                            "the rows last before flattening, an order brigade does not import; "
                                            "remove data_format from the Flatten (or set \"channels_last\")");
    kvalue like = *x;
    if (!x->flat) {
        const import_shape shape = shape_of(c, x), *t = &shape;
        like.flat = 1;
        /* Keras flattens a channels_last tensor [H, W, C] as it is; a
         * channels_first [C, H, W] after moving the channels last when the
         * Flatten says channels_first, else as it is, brigade's order. */
        like.hwc = (c->channels_last || says_first) && t->h * t->w > 1;
        like.hwc_dims[0] = t->h, like.hwc_dims[1] = t->w, like.hwc_dims[2] = t->c;
    }
    return output(c, x->tensor, &like, x->nonneg);
}

static brg_status k_zeropad(kctx *c, const char *const *names, int n)
{
    kvalue *x;
    BRG_CHECK(one_input(c, names, n, 0, &x, NULL));
    BRG_CHECK(spatial(c, x));
    /* padding: n, [h, w] or [[top, bottom], [left, right]] */
    int64_t amount[4];
    json_t *p = cfg(c, "padding");
    json_t *h = json_array_get(p, 0), *w = json_array_get(p, 1);
    if (json_is_integer(p)) amount[0] = amount[1] = amount[2] = amount[3] = json_integer_value(p);
    else if (json_array_size(p) == 2 && json_is_integer(h) && json_is_integer(w)) {
        amount[0] = amount[2] = json_integer_value(h);
        amount[1] = amount[3] = json_integer_value(w);
    } else if (json_array_size(p) == 2 && json_array_size(h) == 2 && json_array_size(w) == 2 &&
               json_is_integer(json_array_get(h, 0)) && json_is_integer(json_array_get(h, 1)) &&
               json_is_integer(json_array_get(w, 0)) && json_is_integer(json_array_get(w, 1))) {
        amount[0] = json_integer_value(json_array_get(h, 0));
        amount[2] = json_integer_value(json_array_get(h, 1));
        amount[1] = json_integer_value(json_array_get(w, 0));
        amount[3] = json_integer_value(json_array_get(w, 1));
    } else {
        return fail(c, BRG_ERR_FORMAT, "'padding' is not a number, two, or two pairs");
    }
    int pad[4];
    for (int i = 0; i < 4; i++) {
        if (amount[i] < 0 || amount[i] > (1 << 20))
            return fail(c, BRG_ERR_FORMAT, "padding %lld", (long long)amount[i]);
        pad[i] = (int)amount[i];
    }
    kvalue v;
    memset(&v, 0, sizeof v);
    snprintf(v.layer, sizeof v.layer, "%s", c->name);
    v.padded = 1;
    v.of = (int)(x - c->values);
    memcpy(v.pad, pad, sizeof v.pad);
    return add_value(c, &v);
}

static brg_status k_upsample(kctx *c, const char *const *names, int n)
{
    kvalue *x;
    BRG_CHECK(one_input(c, names, n, 0, &x, NULL));
    BRG_CHECK(spatial(c, x));
    int64_t size[2] = {2, 2};
    int given;
    BRG_CHECK(cfg_pair(c, "size", size, &given));
    const char *how = cfg_string(c, "interpolation", "nearest");
    if (strcmp(how, "nearest") != 0)
        return fail(c, BRG_ERR_UNSUPPORTED, "interpolation '%s': brigade upsamples by nearest neighbour", how);
    if (size[0] != size[1] || size[0] > 64)
        return fail(c, BRG_ERR_UNSUPPORTED, "size [%lld, %lld]: brigade upsamples height and width by one factor",
                    (long long)size[0], (long long)size[1]);
    if (size[0] == 1) return output(c, x->tensor, x, x->nonneg);
    brg_layer_desc d = brg_layer_desc_init(BRG_LAYER_UPSAMPLE);
    d.factor = (int)size[0];
    const char *in[1] = {x->tensor};
    BRG_CHECK(layer(c, c->name, &d, in, 1, NULL));
    return output(c, c->name, x, x->nonneg);
}

typedef struct layer_entry {
    const char *cls;
    layer_fn translate;
} layer_entry;

static const layer_entry kinds[] = {
    {"Conv2D", k_conv},
    {"Convolution2D", k_conv},
    {"BatchNormalization", k_batchnorm},
    {"Activation", k_activation},
    {"ReLU", k_relu},
    {"Softmax", k_softmax},
    {"MaxPooling2D", k_maxpool},
    {"MaxPool2D", k_maxpool},
    {"AveragePooling2D", k_avgpool},
    {"AvgPool2D", k_avgpool},
    {"GlobalAveragePooling2D", k_global_avgpool},
    {"GlobalAvgPool2D", k_global_avgpool},
    {"Concatenate", k_concat},
    {"Add", k_add},
    {"Dense", k_dense},
    {"Dropout", k_dropout},
    {"Flatten", k_flatten},
    {"ZeroPadding2D", k_zeropad},
    {"UpSampling2D", k_upsample},
};

/* What to do instead of the layers users meet most that brigade does not
 * import. */
static const import_remedy remedies[] = {
    {"LeakyReLU,PReLU,ELU", "brigade's one activation is ReLU: build the model with ReLU in its place"},
    {"DepthwiseConv2D,SeparableConv2D,DepthwiseConv1D,SeparableConv1D",
     "brigade's conv2d has no groups, so depthwise and separable convolutions (MobileNet, Xception) do not import"},
    {"Conv2DTranspose", "brigade has no transposed convolution: an UpSampling2D followed by a Conv2D imports"},
    {"Conv1D,MaxPooling1D,AveragePooling1D,GlobalAveragePooling1D,UpSampling1D,ZeroPadding1D",
     "brigade's Keras layers are 2-D: build the model over [L, 1, C] inputs with the 2-D layers and (k, 1) "
     "kernels and pools, which compute the same"},
    {"GlobalMaxPooling2D,GlobalMaxPool2D", "brigade's global pool averages (GlobalAveragePooling2D)"},
    {"LayerNormalization,GroupNormalization,UnitNormalization,SpectralNormalization",
     "brigade's one normalization is BatchNormalization"},
    {"Rescaling,Normalization,Resizing,CenterCrop,RandomFlip,RandomRotation,RandomZoom,RandomCrop,"
     "RandomTranslation,RandomContrast,RandomBrightness",
     "preprocessing and augmentation belong to the data pipeline: build the model from the layer after it "
     "(keras.Model(model.get_layer(NEXT).input, model.output)) and save that"},
    {"SpatialDropout2D,SpatialDropout1D,GaussianDropout,GaussianNoise,AlphaDropout,ActivityRegularization",
     "a layer that does nothing at inference: remove it, or put a Dropout (of single values) in its place"},
    {"Lambda,TFOpLambda,SlicingOpLambda",
     "its Python code is not in the file: build the model with Keras layers in its place"},
    {"Reshape,Permute,RepeatVector,Cropping2D",
     "brigade reshapes only with a Flatten (or a global pool) before a Dense"},
    {"Multiply,Subtract,Average,Maximum,Minimum,Dot", "brigade joins tensors with Add and Concatenate only"},
    {"LSTM,GRU,SimpleRNN,Bidirectional,ConvLSTM2D,TimeDistributed,Embedding,MultiHeadAttention,Attention",
     "brigade trains convolutional networks: no recurrent, embedding or attention layers"},
};

static const char *kind_name_at(const void *ctx_, int i)
{
    (void)ctx_;
    return kinds[i].cls;
}

/* ---- the model ---- */

/* [null, H, W, C] (or [null, C, H, W], or [null, F]) of an InputLayer. */
static brg_status input_shape(kctx *c, json_t *layer_cfg, int64_t chw[3], int *flat)
{
    json_t *shape = json_object_get(layer_cfg, "batch_shape");
    if (!shape) shape = json_object_get(layer_cfg, "batch_input_shape");
    const size_t rank = json_array_size(shape);
    if (rank != 4 && rank != 2)
        return fail(c, BRG_ERR_UNSUPPORTED, "an input of rank %zu: brigade reads images [H, W, C] or features [F]",
                    rank);
    int64_t d[4] = {0, 0, 0, 0};
    for (size_t i = 1; i < rank; i++) {
        json_t *v = json_array_get(shape, i);
        if (!json_is_integer(v) || json_integer_value(v) < 1)
            return fail(c, BRG_ERR_UNSUPPORTED, "an input of unknown size: build the model with a fixed input "
                                                "shape, e.g. input_shape=(299, 299, 3)");
        d[i] = json_integer_value(v);
    }
    *flat = rank == 2;
    if (rank == 2) chw[0] = d[1], chw[1] = chw[2] = 1;
    else if (c->channels_last) chw[0] = d[3], chw[1] = d[1], chw[2] = d[2];
    else chw[0] = d[1], chw[1] = d[2], chw[2] = d[3];
    return BRG_OK;
}

static const char *layer_name_of(json_t *l)
{
    const char *n = json_string_value(json_object_get(json_object_get(l, "config"), "name"));
    return n ? n : json_string_value(json_object_get(l, "name"));
}

/* The model's data format: the one its layers that compute by it say
 * (channels_last when none says). A Flatten's only orders the features
 * (Keras 3 and 2 move the channels last first for channels_first, and
 * flatten the tensor as it is otherwise), so it decides only when no other
 * layer says: a channels_first model keeps a default Flatten. Layers of
 * both formats compute over other axes than the model's: refused, naming
 * a layer to change. */
/* "'name' (Class)" of a layer for messages, cleaned and cut; "?" for what
 * the file does not say. */
static const char *layer_said(json_t *l, char *buf, size_t size)
{
    const char *name = layer_name_of(l), *cls = json_string_value(json_object_get(l, "class_name"));
    char clean_name[80], clean_cls[80];
    snprintf(buf, size, "'%s' (%s)", brg_text_clean(name ? name : "?", clean_name, sizeof clean_name, 64),
             brg_text_clean(cls ? cls : "?", clean_cls, sizeof clean_cls, 64));
    return buf;
}

static brg_status find_format(kctx *c, json_t *layers)
{
    int n_first = 0, n_last = 0, flatten_first = 0;
    json_t *one_first = NULL, *one_last = NULL;
    char said[200], said_other[200];
    for (size_t i = 0; i < json_array_size(layers); i++) {
        json_t *l = json_array_get(layers, i);
        const char *f = json_string_value(json_object_get(json_object_get(l, "config"), "data_format"));
        const char *cls = json_string_value(json_object_get(l, "class_name"));
        if (!f) continue;
        const int first = strcmp(f, "channels_first") == 0;
        if (!first && strcmp(f, "channels_last") != 0)
            return brg_error(BRG_ERR_FORMAT, "%s: layer %s: data_format is not \"channels_first\" or "
                             "\"channels_last\"", c->source, layer_said(l, said, sizeof said));
        if (cls && strcmp(cls, "Flatten") == 0) flatten_first |= first;
        else if (first) n_first++, one_first = one_first ? one_first : l;
        else n_last++, one_last = one_last ? one_last : l;
    }
    if (n_first && n_last) {
        const int change_last = n_last <= n_first; /* the fewer layers, likely left at the default */
        const char *want = change_last ? "channels_first" : "channels_last";
        const int n_want = change_last ? n_first : n_last;
        json_t *odd = change_last ? one_last : one_first;
        char odd_name[80];
        brg_text_clean(layer_name_of(odd) ? layer_name_of(odd) : "?", odd_name, sizeof odd_name, 64);
        return brg_error(BRG_ERR_UNSUPPORTED, "%s: layer %s is %s and layer %s %s: Keras computes each layer over "
                         "its own format's axes, and brigade imports models of one format; give layer '%s' "
                         "data_format=\"%s\" like the model's other %d layer%s (or call "
                         "keras.config.set_image_data_format(\"%s\") before building the model)", c->source,
                         layer_said(change_last ? one_first : one_last, said_other, sizeof said_other), want,
                         layer_said(odd, said, sizeof said), change_last ? "channels_last" : "channels_first",
                         odd_name, want, n_want, n_want == 1 ? "" : "s", want);
    }
    c->channels_last = n_first ? 0 : n_last ? 1 : !flatten_first;
    return BRG_OK;
}

/* The first of [name, 0, 0] or [[name, 0, 0], ...]. */
static const char *first_of(json_t *list)
{
    json_t *v = json_array_get(list, 0);
    if (json_is_array(v)) v = json_array_get(v, 0);
    return json_string_value(v);
}

/* Layer i of a functional model: translate it (prev: the layer before,
 * which a Sequential model's layer reads; updated). */
static brg_status translate_layer(kctx *c, json_t *l, size_t i, int sequential, const char **prev)
{
    c->cls = json_string_value(json_object_get(l, "class_name"));
    c->name = layer_name_of(l);
    c->config = json_object_get(l, "config");
    if (!c->cls || !c->name || !json_is_object(c->config))
        return brg_error(BRG_ERR_FORMAT, "%s: layer %zu has no class_name, name or config", c->source, i);
    if (strlen(c->name) >= BRG_NAME_MAX)
        return fail(c, BRG_ERR_UNSUPPORTED, "a name longer than %d characters", BRG_NAME_MAX - 1);
    if (strcmp(c->cls, "InputLayer") == 0) return fail(c, BRG_ERR_UNSUPPORTED, "a second input");
    const char *names[BRG_LAYER_MAX_INPUTS];
    int n = 0;
    if (sequential) names[n++] = *prev;
    else BRG_CHECK(inbound(c, l, names, BRG_LAYER_MAX_INPUTS, &n));
    layer_fn fn = NULL;
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++)
        if (strcmp(kinds[k].cls, c->cls) == 0) fn = kinds[k].translate;
    if (!fn && (strcmp(c->cls, "Functional") == 0 || strcmp(c->cls, "Sequential") == 0 ||
                strcmp(c->cls, "Model") == 0))
        return fail(c, BRG_ERR_UNSUPPORTED, "a model inside the model (a base model with a head on it): brigade "
                                            "imports flat models; build it from the inner model's layers, e.g. "
                                            "keras.Model(base.input, head(base.output)), and save that");
    if (!fn) {
        char hint[96];
        brg_text_suggest(c->cls, kind_name_at, NULL, (int)(sizeof kinds / sizeof kinds[0]), hint, sizeof hint);
        return fail(c, BRG_ERR_UNSUPPORTED, "a layer brigade does not import%s: %s; it imports %s", hint,
                    import_remedy_for(remedies, sizeof remedies / sizeof remedies[0], c->cls), SUPPORTED_LAYERS);
    }
    BRG_CHECK(fn(c, names, n));
    count_dtype(c);
    *prev = c->name;
    return BRG_OK;
}

/* The layers of a functional model the output needs: backwards from it
 * through the inbound nodes (a layer never read otherwise would be left
 * computed and unused). */
static brg_status find_needed(kctx *c, json_t *layers, size_t first, unsigned char **out)
{
    const size_t n = json_array_size(layers);
    unsigned char *needed = calloc(n + 1, 1);
    if (!needed) return brg_error(BRG_ERR_HOST_MEMORY, "cannot allocate the layer list");
    for (size_t i = n; i-- > first;) {
        json_t *l = json_array_get(layers, i);
        const char *name = layer_name_of(l);
        if (!name) continue;
        if (strcmp(name, c->final) != 0) {
            for (size_t j = i + 1; j < n && !needed[i]; j++) {
                if (!needed[j]) continue;
                const char *names[BRG_LAYER_MAX_INPUTS];
                int k = 0;
                c->name = layer_name_of(json_array_get(layers, j));
                c->cls = json_string_value(json_object_get(json_array_get(layers, j), "class_name"));
                if (!c->name || !c->cls) continue;
                if (inbound(c, json_array_get(layers, j), names, BRG_LAYER_MAX_INPUTS, &k) != BRG_OK) {
                    needed[i] = 1; /* its own translation says what is wrong */
                    brg_clear_error();
                }
                for (int m = 0; m < k && !needed[i]; m++) needed[i] = strcmp(names[m], name) == 0;
            }
        } else {
            needed[i] = 1;
        }
    }
    *out = needed;
    return BRG_OK;
}

static brg_status translate(kctx *c, json_t *root, const char *model_name)
{
    const char *cls = json_string_value(json_object_get(root, "class_name"));
    json_t *config = json_object_get(root, "config");
    const char *format = json_string_value(json_object_get(root, "format"));
    if (format && strcmp(format, "brigade-model") == 0)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "%s: a brigade model file, not a Keras one: give it as MODEL to any "
                                                   "command, no import needed", c->source);
    if (!cls || !json_is_object(config))
        return brg_error(BRG_ERR_FORMAT, "%s: not a Keras model (no class_name and config at the top)", c->source);
    const int sequential = strcmp(cls, "Sequential") == 0;
    if (!sequential && strcmp(cls, "Functional") != 0 && strcmp(cls, "Model") != 0)
        return brg_error(BRG_ERR_UNSUPPORTED, "%s: a Keras %s; brigade reads Functional and Sequential models",
                         c->source, cls);
    json_t *layers = json_object_get(config, "layers");
    if (!json_is_array(layers) || json_array_size(layers) == 0)
        return brg_error(BRG_ERR_FORMAT, "%s: the model has no layers", c->source);
    BRG_CHECK(find_format(c, layers));
    if (!sequential) {
        json_t *ins = json_object_get(config, "input_layers"), *outs = json_object_get(config, "output_layers");
        const size_t n_in = json_is_array(json_array_get(ins, 0)) ? json_array_size(ins) : 1;
        const size_t n_out = json_is_array(json_array_get(outs, 0)) ? json_array_size(outs) : 1;
        if (n_in != 1)
            return brg_error(BRG_ERR_UNSUPPORTED, "%s: %zu inputs; brigade models have one", c->source, n_in);
        c->final = first_of(outs);
        if (!c->final) return brg_error(BRG_ERR_FORMAT, "%s: no output_layers", c->source);
        c->other_outputs = (int)n_out - 1;
    } else {
        c->final = layer_name_of(json_array_get(layers, json_array_size(layers) - 1));
        if (!c->final) return brg_error(BRG_ERR_FORMAT, "%s: the last layer has no name", c->source);
    }
    size_t first = 0;
    json_t *l0 = json_array_get(layers, 0);
    json_t *input_cfg = NULL, *made = NULL;
    const char *l0_cls = json_string_value(json_object_get(l0, "class_name"));
    const char *input_name = "input";
    if (l0_cls && strcmp(l0_cls, "InputLayer") == 0) {
        input_cfg = json_object_get(l0, "config");
        input_name = layer_name_of(l0) ? layer_name_of(l0) : "input";
        first = 1;
    } else if (sequential && json_object_get(json_object_get(l0, "config"), "batch_input_shape")) {
        input_cfg = json_object_get(l0, "config"); /* Keras 2: the first layer says the input */
    } else if (sequential && json_is_array(json_object_get(config, "build_input_shape"))) {
        input_cfg = made = json_pack("{s:O}", "batch_shape", json_object_get(config, "build_input_shape"));
    }
    if (!input_cfg) return brg_error(BRG_ERR_UNSUPPORTED, "%s: no input shape: build the model with one", c->source);
    c->name = input_name;
    c->cls = "InputLayer";
    int64_t chw[3] = {0, 0, 0};
    int flat = 0;
    const brg_status st = input_shape(c, input_cfg, chw, &flat);
    const char *input_dtype = dtype_name(json_object_get(input_cfg, "dtype"));
    json_decref(made);
    BRG_CHECK(st);
    const brg_status begun = import_begin(model_name, chw[0], chw[1], chw[2], &c->imp);
    if (begun != BRG_OK) return brg_error_context(begun, "%s: layer '%s' (InputLayer)", c->source, input_name);
    for (size_t i = first; i < json_array_size(layers); i++) { /* made-up names (x_relu) never take a file's */
        const char *name = layer_name_of(json_array_get(layers, i));
        if (name) BRG_CHECK(import_reserve_name(c->imp, name));
    }
    if (c->other_outputs)
        import_note(c->imp, "the model's other %d outputs are left out: brigade trains its first, '%s'",
                    c->other_outputs, c->final);
    kvalue in;
    memset(&in, 0, sizeof in);
    snprintf(in.layer, sizeof in.layer, "%s", input_name);
    snprintf(in.tensor, sizeof in.tensor, "input");
    in.flat = flat;
    BRG_CHECK(add_value(c, &in));
    unsigned char *needed = NULL;
    if (!sequential) BRG_CHECK(find_needed(c, layers, first, &needed));
    const char *prev = input_name;
    int left_out = 0;
    brg_status st_loop = BRG_OK;
    for (size_t i = first; i < json_array_size(layers) && st_loop == BRG_OK; i++) {
        if (needed && !needed[i]) {
            left_out++;
            continue;
        }
        json_t *l = json_array_get(layers, i);
        st_loop = translate_layer(c, l, i, sequential, &prev);
    }
    free(needed);
    BRG_CHECK(st_loop);
    if (left_out)
        import_note(c->imp, "left out %d layer%s the output '%s' does not need", left_out,
                    left_out == 1 ? "" : "s", c->final);
    if (input_dtype && strcmp(input_dtype, "float32") != 0)
        import_note(c->imp, "the input is %s in Keras; brigade reads float32 inputs and computes in float32, so its "
                    "outputs differ from Keras's by %s's rounding", input_dtype, input_dtype);
    if (c->n_other_dtype)
        import_note(c->imp, "layer '%s' computes in %s in Keras (its dtype policy)%s; brigade computes every layer in "
                    "float32, so its outputs differ from Keras's by that rounding", c->other_dtype_layer,
                    c->other_dtype, c->n_other_dtype > 1 ? ", and other layers not in float32 too" : "");
    const kvalue *out = find_value(c, c->final);
    if (!out)
        return brg_error(BRG_ERR_FORMAT, "%s: the output layer '%s' is not among the layers", c->source, c->final);
    if (out->padded) return brg_error(BRG_ERR_UNSUPPORTED, "%s: the model ends in a ZeroPadding2D", c->source);
    const import_shape shape = import_tensor(c->imp, out->tensor), *t = &shape;
    if (out->flat && t->h * t->w != 1)
        return brg_error(BRG_ERR_UNSUPPORTED,
                         "%s: the model's output is a flattened [H, W, C] tensor; brigade's output "
                         "is [classes] logits or per-pixel [classes, H, W] ones",
                         c->source);
    const brg_status done = import_finish(c->imp, out->tensor);
    return done == BRG_OK ? BRG_OK : brg_error_context(done, "%s", c->source);
}

brg_status brg_import_keras_json(const char *text, size_t length, const char *source, brg_import **out)
{
    if (!out) return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_import_keras_json: out is NULL");
    *out = NULL;
    if (!text && length) return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_import_keras_json: no text");
    source = source ? source : "(memory)";
    json_error_t jerr;
    json_t *root = json_loadb(text ? text : "", length, JSON_REJECT_DUPLICATES, &jerr);
    if (!root)
        return brg_error(BRG_ERR_FORMAT, "%s:%d:%d: invalid JSON: %s", source, jerr.line, jerr.column, jerr.text);
    char name[BRG_NAME_MAX];
    const char *model_name = json_string_value(json_object_get(json_object_get(root, "config"), "name"));
    snprintf(name, sizeof name, "%s", model_name && model_name[0] ? model_name : "keras");
    kctx c;
    memset(&c, 0, sizeof c);
    c.source = source;
    const brg_status st = translate(&c, root, name);
    json_decref(root);
    free(c.values);
    if (st != BRG_OK) {
        brg_import_free(c.imp);
        return st;
    }
    *out = c.imp;
    return BRG_OK;
}
