/* ONNX models into brigade models (docs/import.md).
 *
 * The graph is pruned to what its first output needs, then its nodes are
 * translated in the file's (topological) order. Every ONNX tensor the
 * translation meets becomes a value: an activation (a brigade tensor, with
 * the ONNX rank it has: 4 for [N, C, H, W], 3 for [N, C, L] held as
 * [C, L, 1], 2 for [N, F] after a Flatten), a constant (an initializer or
 * a Constant node), a weight given as a graph input (bound later), a Pad
 * waiting to fold into the convolution or pool that reads it, or an output
 * brigade does not compute (a MaxPool's indices). Anything that cannot be
 * translated exactly is refused, naming the node, its op and attribute. */
#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "model/import/onnx-impl.h"

#define SUPPORTED_OPS                                                                                              \
    "Conv, BatchNormalization, Relu, MaxPool, AveragePool, GlobalAveragePool, Concat, Add, Gemm, MatMul (+ Add), " \
    "Flatten, Reshape (to [batch, features]), Dropout, Identity, Resize and Upsample (nearest), Pad (folded into "  \
    "the next Conv or pool), Constant, and a final Softmax"
#define MIN_OPSET 1
#define MAX_OPSET 21
#define MAX_FILE_BYTES ((size_t)2 << 30) /* protobuf's own limit */
#define MAX_CHANNELS (1 << 24)           /* brg_model's own limits */
#define MAX_EXTENT (1 << 20)

typedef enum value_kind { V_ACT, V_CONST, V_WEIGHT, V_PAD, V_NONE } value_kind;

typedef struct value {
    const char *name; /* the file's */
    value_kind kind;
    /* V_ACT */
    char tensor[BRG_NAME_MAX];
    int rank;
    int nonneg; /* made by a ReLU */
    /* V_CONST (values) and V_WEIGHT (dims only) */
    onnx_tensor t;
    int owns; /* t's arrays are this value's (an alias shares them) */
    /* V_PAD: value `of` padded by top, left, bottom, right */
    int of;
    int pad[4];
    /* V_NONE: which node made it */
    const char *maker;
} value;

/* Names to ints, open addressing; keys are the proto's strings. */
typedef struct name_map {
    const char **keys;
    int *vals;
    size_t cap, n;
} name_map;

typedef struct consumers {
    int count; /* nodes reading it, plus one if it is the graph's output */
    int first; /* the first node reading it */
} consumers;

typedef struct ctx {
    const char *source;
    brg_import *imp;
    const Onnx__GraphProto *g;
    int opset;
    value *values;
    int n_values, cap_values;
    name_map by_name;   /* value index */
    name_map producer;  /* node index making a name */
    name_map use_index; /* index into uses */
    consumers *uses;
    unsigned char *needed, *folded;
    const char *input_name;
    const char *output_name;
    /* the node being translated */
    const Onnx__NodeProto *node;
    int node_index;
} ctx;

/* ---- small helpers ---- */

static uint64_t hash_text(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static int map_get(const name_map *m, const char *key)
{
    if (!m->cap) return -1;
    for (size_t i = hash_text(key) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        if (!m->keys[i]) return -1;
        if (strcmp(m->keys[i], key) == 0) return m->vals[i];
    }
}

static brg_status map_put(name_map *m, const char *key, int val)
{
    if (2 * (m->n + 1) > m->cap) {
        name_map bigger = {0};
        bigger.cap = m->cap ? 2 * m->cap : 64;
        bigger.keys = calloc(bigger.cap, sizeof *bigger.keys);
        bigger.vals = calloc(bigger.cap, sizeof *bigger.vals);
        if (!bigger.keys || !bigger.vals) {
            free(bigger.keys);
            free(bigger.vals);
            return brg_error(BRG_ERR_HOST_MEMORY, "cannot allocate the graph's name table");
        }
        for (size_t i = 0; i < m->cap; i++)
            if (m->keys[i]) map_put(&bigger, m->keys[i], m->vals[i]);
        free(m->keys);
        free(m->vals);
        *m = bigger;
    }
    size_t i = hash_text(key) & (m->cap - 1);
    while (m->keys[i] && strcmp(m->keys[i], key) != 0) i = (i + 1) & (m->cap - 1);
    if (!m->keys[i]) m->n++;
    m->keys[i] = key;
    m->vals[i] = val;
    return BRG_OK;
}

static void map_free(name_map *m)
{
    free(m->keys);
    free(m->vals);
}

static const char *node_name(const Onnx__NodeProto *n)
{
    if (n->name && n->name[0]) return n->name;
    return n->n_output && n->output[0][0] ? n->output[0] : "(unnamed)";
}

/* An error about the node being translated: "SOURCE: node 'N' (Op): ...". */
static brg_status fail(const ctx *c, brg_status st, const char *fmt, ...) BRG_PRINTF(3, 4);
static brg_status fail(const ctx *c, brg_status st, const char *fmt, ...)
{
    char what[512], name[80];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return brg_error(st, "%s: node '%s' (%s): %s", c->source, brg_text_clean(node_name(c->node), name, sizeof name, 64),
                     c->node->op_type, what);
}

static const char *dims_text(const int64_t *dims, int n, char *buf, size_t size)
{
    size_t at = (size_t)snprintf(buf, size, "[");
    for (int i = 0; i < n && at < size; i++)
        at += (size_t)snprintf(buf + at, size - at, "%s%lld", i ? ", " : "", (long long)dims[i]);
    if (at < size) snprintf(buf + at, size - at, "]");
    return buf;
}

/* ---- values ----
 *
 * add_value may move every value: a value pointer is not used after it. */

static brg_status add_value(ctx *c, const char *name, value_kind kind, value **out)
{
    if (c->n_values == c->cap_values) {
        const int want = c->cap_values ? 2 * c->cap_values : 64;
        value *p = realloc(c->values, (size_t)want * sizeof *p);
        if (!p) return brg_error(BRG_ERR_HOST_MEMORY, "cannot allocate the graph's values");
        c->values = p;
        c->cap_values = want;
    }
    value *v = &c->values[c->n_values];
    memset(v, 0, sizeof *v);
    v->name = name;
    v->kind = kind;
    v->of = -1;
    BRG_CHECK(map_put(&c->by_name, name, c->n_values));
    c->n_values++;
    *out = v;
    return BRG_OK;
}

/* Output k of the node as an alias of v (same kind and contents). */
static brg_status alias(ctx *c, int k, const value *v)
{
    const value copy = *v;
    value *out;
    BRG_CHECK(add_value(c, c->node->output[k], copy.kind, &out));
    const char *name = out->name;
    *out = copy;
    out->name = name;
    out->owns = 0;
    return BRG_OK;
}

static brg_status act_output(ctx *c, int k, const char *tensor, int rank, int nonneg)
{
    value *v;
    BRG_CHECK(add_value(c, c->node->output[k], V_ACT, &v));
    snprintf(v->tensor, sizeof v->tensor, "%s", tensor);
    v->rank = rank;
    v->nonneg = nonneg;
    return BRG_OK;
}

/* Outputs 1.. of the node are ones brigade does not compute. */
static brg_status other_outputs_none(ctx *c)
{
    for (size_t k = 1; k < c->node->n_output; k++) {
        if (!c->node->output[k][0]) continue;
        value *v;
        BRG_CHECK(add_value(c, c->node->output[k], V_NONE, &v));
        v->maker = node_name(c->node);
    }
    return BRG_OK;
}

static int has_input(const ctx *c, int k)
{
    return (size_t)k < c->node->n_input && c->node->input[k][0];
}

/* Input k of the node (which must be there). */
static brg_status input(ctx *c, int k, value **out)
{
    *out = NULL;
    if (!has_input(c, k)) return fail(c, BRG_ERR_FORMAT, "input %d is missing", k);
    const char *name = c->node->input[k];
    const int i = map_get(&c->by_name, name);
    if (i >= 0) {
        *out = &c->values[i];
        if ((*out)->kind == V_NONE)
            return fail(c, BRG_ERR_UNSUPPORTED, "reads '%s', an output of node '%s' that brigade does not compute",
                        name, (*out)->maker);
        return BRG_OK;
    }
    const int later = map_get(&c->producer, name);
    if (later >= 0)
        return fail(c, BRG_ERR_FORMAT,
                    "reads '%s', which node '%s' makes later: a cycle, or nodes out of topological order", name,
                    node_name(c->g->node[later]));
    return fail(c, BRG_ERR_FORMAT,
                "reads '%s', which no node, initializer or graph input makes (a missing initializer?)", name);
}

static brg_status input_act(ctx *c, int k, value **out)
{
    BRG_CHECK(input(c, k, out));
    const value *v = *out;
    if (v->kind == V_ACT) return BRG_OK;
    if (v->kind == V_PAD)
        return fail(c, BRG_ERR_UNSUPPORTED, "reads the Pad '%s': brigade folds a Pad only into the Conv or pool that "
                                            "reads it", v->name);
    if (v->kind == V_WEIGHT)
        return fail(c, BRG_ERR_UNSUPPORTED,
                    "reads graph input '%s' as data: brigade models have one input (here '%s'); a constant belongs "
                    "in an initializer",
                    v->name, c->input_name);
    return fail(c, BRG_ERR_UNSUPPORTED, "reads the constant '%s' as data: brigade computes on the model's input only",
                v->name);
}

/* Input k as an activation, a Pad folding into this node looked through:
 * pad gets its top, left, bottom, right (zeros without one). */
static brg_status input_padded(ctx *c, int k, value **out, int pad[4])
{
    BRG_CHECK(input(c, k, out));
    memset(pad, 0, 4 * sizeof *pad);
    if ((*out)->kind == V_PAD) {
        memcpy(pad, (*out)->pad, 4 * sizeof *pad);
        *out = &c->values[(*out)->of];
        return BRG_OK;
    }
    return input_act(c, k, out);
}

static brg_status input_const(ctx *c, int k, value **out)
{
    BRG_CHECK(input(c, k, out));
    if ((*out)->kind != V_CONST)
        return fail(c, BRG_ERR_UNSUPPORTED, "input %d ('%s') must be a constant (an initializer or a Constant node)",
                    k, (*out)->name);
    return BRG_OK;
}

/* ---- attributes ---- */

static const Onnx__AttributeProto *attr(const ctx *c, const char *name)
{
    for (size_t i = 0; i < c->node->n_attribute; i++)
        if (c->node->attribute[i]->name && strcmp(c->node->attribute[i]->name, name) == 0) return c->node->attribute[i];
    return NULL;
}

static const char *attr_type_name(int type)
{
    switch (type) {
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT: return "FLOAT";
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT: return "INT";
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING: return "STRING";
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR: return "TENSOR";
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS: return "FLOATS";
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS: return "INTS";
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS: return "STRINGS";
    default: return "another type";
    }
}

/* The attribute when present and of type want (BRG_ERR_FORMAT otherwise). */
static brg_status attr_typed(const ctx *c, const char *name, int want, const Onnx__AttributeProto **out)
{
    *out = attr(c, name);
    if (!*out) return BRG_OK;
    const Onnx__AttributeProto *a = *out;
    int type = a->has_type ? (int)a->type : 0;
    if (!a->has_type) { /* files before IR version 2 leave the type out */
        if (a->has_f) type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT;
        else if (a->has_i) type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
        else if (a->has_s) type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING;
        else if (a->t) type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR;
        else if (a->n_floats) type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS;
        else if (a->n_ints) type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
    }
    if (type != want)
        return fail(c, BRG_ERR_FORMAT, "attribute '%s' should be %s, is %s", name, attr_type_name(want),
                    attr_type_name(type));
    return BRG_OK;
}

static brg_status attr_int(const ctx *c, const char *name, int64_t def, int64_t *out)
{
    const Onnx__AttributeProto *a;
    BRG_CHECK(attr_typed(c, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT, &a));
    *out = a ? a->i : def;
    return BRG_OK;
}

static brg_status attr_float(const ctx *c, const char *name, float def, float *out)
{
    const Onnx__AttributeProto *a;
    BRG_CHECK(attr_typed(c, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT, &a));
    *out = a ? a->f : def;
    return BRG_OK;
}

/* INTS: *n 0 and *v NULL when absent. */
static brg_status attr_ints(const ctx *c, const char *name, const int64_t **v, size_t *n)
{
    const Onnx__AttributeProto *a;
    BRG_CHECK(attr_typed(c, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS, &a));
    *v = a ? a->ints : NULL;
    *n = a ? a->n_ints : 0;
    return BRG_OK;
}

static brg_status attr_string(const ctx *c, const char *name, const char *def, char *out, size_t size)
{
    const Onnx__AttributeProto *a;
    BRG_CHECK(attr_typed(c, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING, &a));
    if (!a) {
        snprintf(out, size, "%s", def);
        return BRG_OK;
    }
    const size_t n = a->s.len < size - 1 ? a->s.len : size - 1;
    memcpy(out, a->s.data, n);
    out[n] = '\0';
    return BRG_OK;
}

/* Every attribute of the node is one of known (NULL-terminated). */
static brg_status known_attrs(const ctx *c, const char *const *known)
{
    for (size_t i = 0; i < c->node->n_attribute; i++) {
        const char *name = c->node->attribute[i]->name ? c->node->attribute[i]->name : "";
        int ok = 0;
        for (const char *const *k = known; *k && !ok; k++) ok = strcmp(*k, name) == 0;
        if (ok) continue;
        char list[256] = "none";
        size_t at = 0;
        for (const char *const *k = known; *k && at < sizeof list; k++)
            at += (size_t)snprintf(list + at, sizeof list - at, "%s%s", at ? ", " : "", *k);
        char clean[80];
        return fail(c, BRG_ERR_UNSUPPORTED, "attribute '%s' is not one brigade translates (it reads: %s)",
                    brg_text_clean(name, clean, sizeof clean, 64), list);
    }
    return BRG_OK;
}

/* ---- names ---- */

static void clean_name(const char *in, char *out, size_t size)
{
    size_t j = 0;
    for (size_t i = 0; in[i] && j + 1 < size; i++) {
        const unsigned char ch = (unsigned char)in[i];
        out[j++] = isalnum(ch) || ch == '.' || ch == '_' || ch == '-' ? (char)ch : '_';
    }
    out[j] = '\0';
}

/* Whether a scope's last component already says what the op is: "relu_1"
 * for Relu, "avgpool" for GlobalAveragePool (a module named after its op). */
static int names_op(const char *component, const char *op_lower)
{
    char comp[128], op[64];
    snprintf(comp, sizeof comp, "%s", component);
    for (char *p = comp; *p; p++) *p = (char)tolower((unsigned char)*p);
    size_t n = strlen(comp);
    while (n && (isdigit((unsigned char)comp[n - 1]) || comp[n - 1] == '_')) comp[--n] = '\0';
    const char *avg = strstr(op_lower, "average");
    if (avg) snprintf(op, sizeof op, "%.*savg%s", (int)(avg - op_lower), op_lower, avg + 7);
    else snprintf(op, sizeof op, "%s", op_lower);
    return n && (strstr(op, comp) || strstr(comp, op));
}

/* A PyTorch export's scope "/layer1/layer1.0/relu/Relu_1" as a dotted path
 * ("layer1.0.relu"): a component that extends the path replaces it; the
 * op's name follows unless the path's last component says it already. */
static void scope_name(const char *node, const char *op, char *out, size_t size)
{
    char lower[64];
    clean_name(op, lower, sizeof lower);
    for (char *p = lower; *p; p++) *p = (char)tolower((unsigned char)*p);
    char path[256] = "";
    const char *p = node + 1;
    for (const char *slash; (slash = strchr(p, '/')); p = slash + 1) { /* the last part is the op's instance */
        const size_t len = (size_t)(slash - p);
        if (!len || len >= 128) continue;
        char comp[128];
        snprintf(comp, sizeof comp, "%.*s", (int)len, p);
        const size_t pl = strlen(path);
        if (pl && strncmp(comp, path, pl) == 0 && comp[pl] == '.') snprintf(path, sizeof path, "%s", comp);
        else if (strlen(path) + len + 2 < sizeof path) {
            const size_t at = strlen(path);
            snprintf(path + at, sizeof path - at, "%s%s", at ? "." : "", comp);
        }
    }
    char raw[300];
    const char *dot = strrchr(path, '.');
    if (!path[0]) snprintf(raw, sizeof raw, "%s", lower);
    else if (names_op(dot ? dot + 1 : path, lower)) snprintf(raw, sizeof raw, "%s", path);
    else snprintf(raw, sizeof raw, "%s.%s", path, lower);
    clean_name(raw, out, size);
}

/* The layer's name: its weight's name without ".weight" when the file
 * names weights (torchvision's "layer1.0.conv1.weight"), else from the
 * node's scope or name. Unique among the layers so far. */
static void layer_name(ctx *c, const char *weight, char out[BRG_NAME_MAX])
{
    char base[BRG_NAME_MAX * 2] = "";
    if (weight && weight[0] && !strchr(weight, ':')) {
        char w[256];
        snprintf(w, sizeof w, "%s", weight);
        const size_t n = strlen(w);
        if (n > 7 && strcmp(w + n - 7, ".weight") == 0) w[n - 7] = '\0';
        clean_name(w, base, sizeof base);
    }
    if (!base[0]) {
        const char *name = c->node->name && c->node->name[0] ? c->node->name : NULL;
        if (name && name[0] == '/') scope_name(name, c->node->op_type, base, sizeof base);
        else {
            char tmp[BRG_NAME_MAX * 2];
            clean_name(name ? name : c->node->output[0], tmp, sizeof tmp);
            if (!isalpha((unsigned char)tmp[0])) {
                char op[32];
                clean_name(c->node->op_type, op, sizeof op);
                for (char *p = op; *p; p++) *p = (char)tolower((unsigned char)*p);
                snprintf(base, sizeof base, "%s_%.90s", op, tmp);
            } else snprintf(base, sizeof base, "%s", tmp);
        }
    }
    base[BRG_NAME_MAX - 1] = '\0';
    import_unique_name(c->imp, base, out);
}

/* ---- weights ---- */

/* Leading 1s aside, the same dims (a Gemm's [1, O] bias is an [O] one). */
static int same_dims(const int64_t *a, int na, const int64_t *b, int nb)
{
    while (na > 1 && a[0] == 1) a++, na--;
    while (nb > 1 && b[0] == 1) b++, nb--;
    if (na != nb) return 0;
    for (int i = 0; i < na; i++)
        if (a[i] != b[i]) return 0;
    return 1;
}

/* Input k as parameter param of layer, checked to have dims want (the
 * file's shape); transposed when the file holds it the other way. */
static brg_status weight(ctx *c, int k, int layer, const char *param, const int64_t *want, int n_want,
                         import_layout layout)
{
    value *v;
    BRG_CHECK(input(c, k, &v));
    if (v->kind != V_CONST && v->kind != V_WEIGHT)
        return fail(c, BRG_ERR_UNSUPPORTED, "input %d ('%s') must be a weight (an initializer or a graph input), "
                                            "not computed data", k, v->name);
    if (!same_dims(v->t.dims, v->t.ndim, want, n_want)) {
        char a[96], b[96];
        return fail(c, BRG_ERR_FORMAT, "weight '%s' is %s; its place needs %s", v->name,
                    dims_text(v->t.dims, v->t.ndim, a, sizeof a), dims_text(want, n_want, b, sizeof b));
    }
    const int64_t dims[4] = {n_want == 2 ? want[0] : 0, n_want == 2 ? want[1] : 0, 0, 0};
    const brg_status st = import_add_param(c->imp, layer, param, v->name, layout, dims,
                                           v->kind == V_CONST ? v->t.f : NULL, v->t.count);
    return st == BRG_OK ? BRG_OK : brg_error_context(st, "%s: node '%s'", c->source, node_name(c->node));
}

/* Add the layer (brg_model_add's checks, in the node's terms). */
static brg_status layer(ctx *c, const char *name, const brg_layer_desc *d, const char *const *inputs, int n,
                        int *index)
{
    const brg_status st = import_add_layer(c->imp, name, d, inputs, n, index);
    if (st == BRG_OK) return BRG_OK;
    char name_clean[80];
    return brg_error_context(st, "%s: node '%s' (%s)", c->source,
                             brg_text_clean(node_name(c->node), name_clean, sizeof name_clean, 64), c->node->op_type);
}

static import_shape shape_of(const ctx *c, const value *v) { return import_tensor(c->imp, v->tensor); }

/* ---- padding and windows ---- */

/* Begin and end padding of one spatial dimension of extent in from the
 * node's pads/auto_pad (dim d of sp), plus a folded Pad's. */
typedef struct window {
    int sp;            /* spatial dims: 2, or 1 for [C, L] */
    int64_t in[2];     /* extents */
    int64_t kernel[2];
    int64_t stride[2];
    int64_t begin[2], end[2];
} window;

static brg_status window_read(ctx *c, window *w, const int fold[4], int kernel_from_attr)
{
    const int64_t *v;
    size_t n;
    if (kernel_from_attr) {
        BRG_CHECK(attr_ints(c, "kernel_shape", &v, &n));
        if (n != (size_t)w->sp)
            return fail(c, BRG_ERR_FORMAT, "kernel_shape has %zu values for %d spatial dimensions", n, w->sp);
        for (int d = 0; d < w->sp; d++) w->kernel[d] = v[d];
    } else {
        BRG_CHECK(attr_ints(c, "kernel_shape", &v, &n));
        if (n && n != (size_t)w->sp)
            return fail(c, BRG_ERR_FORMAT, "kernel_shape has %zu values for %d spatial dimensions", n, w->sp);
        for (int d = 0; d < (int)n; d++)
            if (v[d] != w->kernel[d])
                return fail(c, BRG_ERR_FORMAT, "kernel_shape %lld does not match the weight's %lld", (long long)v[d],
                            (long long)w->kernel[d]);
    }
    for (int d = 0; d < w->sp; d++)
        if (w->kernel[d] < 1 || w->kernel[d] > MAX_EXTENT)
            return fail(c, BRG_ERR_FORMAT, "kernel size %lld", (long long)w->kernel[d]);
    BRG_CHECK(attr_ints(c, "strides", &v, &n));
    if (n && n != (size_t)w->sp) return fail(c, BRG_ERR_FORMAT, "strides has %zu values for %d dimensions", n, w->sp);
    for (int d = 0; d < w->sp; d++) {
        w->stride[d] = n ? v[d] : 1;
        if (w->stride[d] < 1 || w->stride[d] > MAX_EXTENT)
            return fail(c, BRG_ERR_FORMAT, "stride %lld", (long long)w->stride[d]);
    }
    BRG_CHECK(attr_ints(c, "dilations", &v, &n));
    for (size_t d = 0; d < n; d++)
        if (v[d] != 1)
            return fail(c, BRG_ERR_UNSUPPORTED, "attribute 'dilations' = %lld: brigade has no dilated windows",
                        (long long)v[d]);
    char mode[32];
    BRG_CHECK(attr_string(c, "auto_pad", "NOTSET", mode, sizeof mode));
    BRG_CHECK(attr_ints(c, "pads", &v, &n));
    if (n && n != 2 * (size_t)w->sp) return fail(c, BRG_ERR_FORMAT, "pads has %zu values for %d dimensions", n, w->sp);
    for (int d = 0; d < w->sp; d++) {
        w->begin[d] = n ? v[d] : 0;
        w->end[d] = n ? v[w->sp + d] : 0;
        if (w->begin[d] < 0 || w->end[d] < 0 || w->begin[d] > MAX_EXTENT || w->end[d] > MAX_EXTENT)
            return fail(c, BRG_ERR_FORMAT, "pads %lld and %lld", (long long)w->begin[d], (long long)w->end[d]);
    }
    if (strcmp(mode, "SAME_UPPER") == 0 || strcmp(mode, "SAME_LOWER") == 0) {
        if (n) return fail(c, BRG_ERR_FORMAT, "both auto_pad %s and pads", mode);
        for (int d = 0; d < w->sp; d++) {
            /* over the extent a folded Pad has already grown */
            const int64_t in = w->in[d] + (d ? fold[1] + fold[3] : fold[0] + fold[2]);
            const int64_t out = (in + w->stride[d] - 1) / w->stride[d];
            int64_t total = (out - 1) * w->stride[d] + w->kernel[d] - in;
            if (total < 0) total = 0;
            const int64_t small = total / 2;
            w->begin[d] = mode[5] == 'U' ? small : total - small;
            w->end[d] = total - w->begin[d];
        }
    } else if (strcmp(mode, "VALID") == 0) {
        for (int d = 0; d < w->sp; d++) w->begin[d] = w->end[d] = 0;
    } else if (strcmp(mode, "NOTSET") != 0) {
        return fail(c, BRG_ERR_FORMAT, "auto_pad '%s' is not NOTSET, SAME_UPPER, SAME_LOWER or VALID", mode);
    }
    w->begin[0] += fold[0], w->end[0] += fold[2];
    if (w->sp == 2) w->begin[1] += fold[1], w->end[1] += fold[3];
    for (int d = 0; d < w->sp; d++)
        if (w->begin[d] != w->end[d])
            return fail(c, BRG_ERR_UNSUPPORTED,
                        "padding %lld before and %lld after: brigade pads both sides alike (auto_pad %s)",
                        (long long)w->begin[d], (long long)w->end[d], mode);
    return BRG_OK;
}

/* A window of x's shape from the value's rank (2 spatial dims, or 1). */
static brg_status window_of(ctx *c, const value *x, window *w)
{
    memset(w, 0, sizeof *w);
    if (x->rank != 4 && x->rank != 3)
        return fail(c, BRG_ERR_UNSUPPORTED, "reads a rank-%d tensor; brigade windows run over [N, C, H, W] or "
                                            "[N, C, L]", x->rank);
    const import_shape shape = shape_of(c, x), *t = &shape;
    w->sp = x->rank - 2;
    w->in[0] = t->h;
    w->in[1] = t->w;
    return BRG_OK;
}

static void desc_window(const window *w, brg_layer_desc *d)
{
    d->kernel_h = (int)w->kernel[0];
    d->stride_h = (int)w->stride[0];
    d->pad_h = (int)w->begin[0];
    d->kernel_w = w->sp == 2 ? (int)w->kernel[1] : 1;
    d->stride_w = w->sp == 2 ? (int)w->stride[1] : 1;
    d->pad_w = w->sp == 2 ? (int)w->begin[1] : 0;
}

/* ---- the ops ---- */

static brg_status op_conv(ctx *c)
{
    static const char *const known[] = {"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides", NULL};
    BRG_CHECK(known_attrs(c, known));
    value *x, *wv;
    int fold[4];
    BRG_CHECK(input_padded(c, 0, &x, fold));
    window w;
    BRG_CHECK(window_of(c, x, &w));
    int64_t group;
    BRG_CHECK(attr_int(c, "group", 1, &group));
    if (group != 1)
        return fail(c, BRG_ERR_UNSUPPORTED, "attribute 'group' = %lld: brigade's conv2d has no groups",
                    (long long)group);
    BRG_CHECK(input(c, 1, &wv));
    if (wv->kind != V_CONST && wv->kind != V_WEIGHT)
        return fail(c, BRG_ERR_UNSUPPORTED, "its weight '%s' is computed, not a constant", wv->name);
    if (wv->t.ndim != 2 + w.sp)
        return fail(c, BRG_ERR_FORMAT, "weight '%s' has %d dimensions for a %d-D convolution", wv->name,
                    wv->t.ndim, w.sp);
    for (int d = 0; d < w.sp; d++) w.kernel[d] = wv->t.dims[2 + d];
    BRG_CHECK(window_read(c, &w, fold, 0));
    const import_shape shape = shape_of(c, x), *t = &shape;
    brg_layer_desc d = brg_layer_desc_init(BRG_LAYER_CONV2D);
    if (wv->t.dims[0] < 1 || wv->t.dims[0] > MAX_CHANNELS)
        return fail(c, BRG_ERR_UNSUPPORTED, "%lld output channels", (long long)wv->t.dims[0]);
    d.out_channels = (int)wv->t.dims[0];
    desc_window(&w, &d);
    d.bias = has_input(c, 2);
    char name[BRG_NAME_MAX];
    layer_name(c, wv->name, name);
    int li;
    const char *in[1] = {x->tensor};
    BRG_CHECK(layer(c, name, &d, in, 1, &li));
    int64_t dims[4] = {wv->t.dims[0], t->c, w.kernel[0], w.kernel[1]};
    BRG_CHECK(weight(c, 1, li, "weight", dims, 2 + w.sp, IMPORT_AS_IS));
    if (d.bias) BRG_CHECK(weight(c, 2, li, "bias", dims, 1, IMPORT_AS_IS));
    return act_output(c, 0, name, x->rank, 0);
}

static brg_status op_batchnorm(ctx *c)
{
    static const char *const known[] = {"epsilon", "momentum", "spatial", "training_mode", "is_test", NULL};
    BRG_CHECK(known_attrs(c, known));
    value *x;
    BRG_CHECK(input_act(c, 0, &x));
    const import_shape shape = shape_of(c, x), *t = &shape;
    if (x->rank == 2 && t->h * t->w != 1)
        return fail(c, BRG_ERR_UNSUPPORTED, "normalizes the features of a flattened [%lld, %lld, %lld] tensor; "
                                            "brigade's BatchNorm is per channel", (long long)t->c, (long long)t->h,
                    (long long)t->w);
    float eps, momentum;
    int64_t spatial, training;
    BRG_CHECK(attr_float(c, "epsilon", 1e-5f, &eps));
    BRG_CHECK(attr_float(c, "momentum", 0.9f, &momentum));
    BRG_CHECK(attr_int(c, "spatial", 1, &spatial));
    BRG_CHECK(attr_int(c, "training_mode", 0, &training));
    if (spatial != 1)
        return fail(c, BRG_ERR_UNSUPPORTED, "attribute 'spatial' = 0: brigade's BatchNorm is per channel");
    if (training)
        import_note(c->imp, "BatchNormalization '%s' was exported in training mode: brigade uses batch statistics in "
                            "training and the running ones in evaluation and prediction",
                    node_name(c->node));
    value *scale;
    BRG_CHECK(input(c, 1, &scale));
    brg_layer_desc d = brg_layer_desc_init(BRG_LAYER_BATCHNORM);
    d.epsilon = eps;
    d.momentum = 1.0f - momentum; /* ONNX keeps `momentum` of the old running value, brigade takes that of the new */
    char name[BRG_NAME_MAX];
    layer_name(c, scale->name, name);
    int li;
    const char *in[1] = {x->tensor};
    BRG_CHECK(layer(c, name, &d, in, 1, &li));
    static const char *const params[] = {"gamma", "beta", "running_mean", "running_var"};
    const int64_t dims[1] = {t->c};
    for (int k = 0; k < 4; k++) BRG_CHECK(weight(c, 1 + k, li, params[k], dims, 1, IMPORT_AS_IS));
    BRG_CHECK(act_output(c, 0, name, x->rank, 0)); /* x moves with the values from here */
    return other_outputs_none(c);
}

static brg_status op_relu(ctx *c)
{
    static const char *const known[] = {NULL};
    BRG_CHECK(known_attrs(c, known));
    value *x;
    BRG_CHECK(input_act(c, 0, &x));
    brg_layer_desc d = brg_layer_desc_init(BRG_LAYER_RELU);
    char name[BRG_NAME_MAX];
    layer_name(c, NULL, name);
    const char *in[1] = {x->tensor};
    BRG_CHECK(layer(c, name, &d, in, 1, NULL));
    return act_output(c, 0, name, x->rank, 1);
}

static brg_status op_pool(ctx *c, int is_max)
{
    static const char *const max_known[] = {"auto_pad", "ceil_mode", "dilations", "kernel_shape", "pads",
                                            "storage_order", "strides", NULL};
    static const char *const avg_known[] = {"auto_pad", "ceil_mode", "count_include_pad", "dilations",
                                            "kernel_shape", "pads", "strides", NULL};
    BRG_CHECK(known_attrs(c, is_max ? max_known : avg_known));
    value *x;
    int fold[4];
    BRG_CHECK(input_padded(c, 0, &x, fold));
    const int folding = fold[0] || fold[1] || fold[2] || fold[3];
    window w;
    BRG_CHECK(window_of(c, x, &w));
    int64_t ceil_mode, include;
    BRG_CHECK(attr_int(c, "ceil_mode", 0, &ceil_mode));
    BRG_CHECK(attr_int(c, "count_include_pad", 0, &include));
    if (folding && is_max && !x->nonneg)
        return fail(c, BRG_ERR_UNSUPPORTED, "a zero Pad folds into a MaxPool only after a Relu (a max pool's own "
                                            "padding never wins)");
    char mode[32];
    BRG_CHECK(attr_string(c, "auto_pad", "NOTSET", mode, sizeof mode));
    if (folding && strcmp(mode, "NOTSET") != 0 && strcmp(mode, "VALID") != 0)
        return fail(c, BRG_ERR_UNSUPPORTED, "a Pad folds into a pool only without auto_pad %s", mode);
    const int none[4] = {0, 0, 0, 0};
    BRG_CHECK(window_read(c, &w, none, 1));
    const int own = w.begin[0] || (w.sp == 2 && w.begin[1]);
    for (int d = 0; d < w.sp; d++)
        if (2 * (w.begin[d] + (d ? fold[1] : fold[0])) > w.kernel[d])
            return fail(c, BRG_ERR_UNSUPPORTED, "padding %lld of a window of %lld: brigade's pools pad at most half a "
                                                "window", (long long)(w.begin[d] + (d ? fold[1] : fold[0])),
                        (long long)w.kernel[d]);
    if (folding && !is_max && own && !include)
        return fail(c, BRG_ERR_UNSUPPORTED, "a Pad folds into an AveragePool with pads only with count_include_pad");
    if (folding) {
        w.begin[0] += fold[0], w.end[0] += fold[2];
        if (w.sp == 2) w.begin[1] += fold[1], w.end[1] += fold[3];
        for (int d = 0; d < w.sp; d++)
            if (w.begin[d] != w.end[d])
                return fail(c, BRG_ERR_UNSUPPORTED,
                            "padding %lld before and %lld after (with the Pad folded in): "
                            "brigade pads both sides alike",
                            (long long)w.begin[d], (long long)w.end[d]);
        include = !is_max; /* the Pad's zeros count */
    }
    if (ceil_mode)
        for (int d = 0; d < w.sp; d++)
            if ((w.in[d] + 2 * w.begin[d] - w.kernel[d]) % w.stride[d] != 0)
                return fail(c, BRG_ERR_UNSUPPORTED, "ceil_mode gives another size than brigade's floor here (extent "
                                                    "%lld, window %lld, stride %lld, padding %lld)",
                            (long long)w.in[d], (long long)w.kernel[d], (long long)w.stride[d], (long long)w.begin[d]);
    brg_layer_desc d = brg_layer_desc_init(is_max ? BRG_LAYER_MAXPOOL : BRG_LAYER_AVGPOOL);
    desc_window(&w, &d);
    if (!is_max) d.count_include_pad = include != 0;
    char name[BRG_NAME_MAX];
    layer_name(c, NULL, name);
    const char *in[1] = {x->tensor};
    BRG_CHECK(layer(c, name, &d, in, 1, NULL));
    BRG_CHECK(act_output(c, 0, name, x->rank, is_max && x->nonneg)); /* x moves with the values from here */
    return other_outputs_none(c);
}

static brg_status op_maxpool(ctx *c) { return op_pool(c, 1); }
static brg_status op_avgpool(ctx *c) { return op_pool(c, 0); }

static brg_status op_global_avgpool(ctx *c)
{
    static const char *const known[] = {NULL};
    BRG_CHECK(known_attrs(c, known));
    value *x;
    BRG_CHECK(input_act(c, 0, &x));
    window w;
    BRG_CHECK(window_of(c, x, &w));
    brg_layer_desc d = brg_layer_desc_init(BRG_LAYER_GLOBAL_AVGPOOL);
    char name[BRG_NAME_MAX];
    layer_name(c, NULL, name);
    const char *in[1] = {x->tensor};
    BRG_CHECK(layer(c, name, &d, in, 1, NULL));
    return act_output(c, 0, name, x->rank, x->nonneg);
}

static brg_status op_concat(ctx *c)
{
    static const char *const known[] = {"axis", NULL};
    BRG_CHECK(known_attrs(c, known));
    int64_t axis;
    if (!attr(c, "axis") && c->opset >= 4) return fail(c, BRG_ERR_FORMAT, "attribute 'axis' is required");
    BRG_CHECK(attr_int(c, "axis", 1, &axis));
    const char *in[BRG_LAYER_MAX_INPUTS];
    int n = 0, rank = 0, nonneg = 1;
    for (size_t k = 0; k < c->node->n_input; k++) {
        value *x;
        BRG_CHECK(input_act(c, (int)k, &x));
        if (k && x->rank != rank) return fail(c, BRG_ERR_FORMAT, "inputs of rank %d and %d", rank, x->rank);
        rank = x->rank;
        nonneg = nonneg && x->nonneg;
        const import_shape shape = shape_of(c, x), *t = &shape;
        if (rank == 2 && t->h * t->w != 1)
            return fail(c, BRG_ERR_UNSUPPORTED, "joins flattened [C, H, W] tensors; brigade joins channels");
        if (n == BRG_LAYER_MAX_INPUTS)
            return fail(c, BRG_ERR_UNSUPPORTED, "more than %d inputs", BRG_LAYER_MAX_INPUTS);
        in[n++] = x->tensor;
    }
    if (axis < 0) axis += rank;
    if (axis != 1)
        return fail(c, BRG_ERR_UNSUPPORTED, "attribute 'axis' = %lld: brigade joins along the channels (axis 1)",
                    (long long)axis);
    if (n == 1) return alias(c, 0, &c->values[map_get(&c->by_name, c->node->input[0])]);
    brg_layer_desc d = brg_layer_desc_init(BRG_LAYER_CONCAT);
    char name[BRG_NAME_MAX];
    layer_name(c, NULL, name);
    BRG_CHECK(layer(c, name, &d, in, n, NULL));
    return act_output(c, 0, name, rank, nonneg);
}

static brg_status op_add(ctx *c)
{
    static const char *const known[] = {NULL};
    BRG_CHECK(known_attrs(c, known));
    value *a, *b;
    BRG_CHECK(input(c, 0, &a));
    BRG_CHECK(input(c, 1, &b));
    if (a->kind != V_ACT || b->kind != V_ACT) {
        const value *k = a->kind != V_ACT ? a : b;
        if (k->kind == V_CONST)
            return fail(c, BRG_ERR_UNSUPPORTED, "adds the constant '%s': brigade adds a constant only as the bias of "
                                                "the MatMul before it", k->name);
        BRG_CHECK(input_act(c, a->kind != V_ACT ? 0 : 1, &a)); /* says why */
    }
    const import_shape sa = shape_of(c, a), sb = shape_of(c, b), *ta = &sa, *tb = &sb;
    if (a->rank != b->rank || ta->c != tb->c || ta->h != tb->h || ta->w != tb->w)
        return fail(c, BRG_ERR_UNSUPPORTED, "adds [%lld, %lld, %lld] and [%lld, %lld, %lld]: brigade adds tensors of "
                                            "one shape, without broadcasting",
                    (long long)ta->c, (long long)ta->h, (long long)ta->w, (long long)tb->c, (long long)tb->h,
                    (long long)tb->w);
    brg_layer_desc d = brg_layer_desc_init(BRG_LAYER_ADD);
    char name[BRG_NAME_MAX];
    layer_name(c, NULL, name);
    const char *in[2] = {a->tensor, b->tensor};
    BRG_CHECK(layer(c, name, &d, in, 2, NULL));
    return act_output(c, 0, name, a->rank, 0);
}

/* A linear layer from x (rank 2) and the weight at input k, the file
 * holding it [features, out] (transposed) or [out, features]; the bias is
 * input bias_k of node bias_node (this one, or a following Add). */
static brg_status linear(ctx *c, value *x, int k, int transposed, const Onnx__NodeProto *bias_node, int bias_k)
{
    const import_shape shape = shape_of(c, x), *t = &shape;
    const int64_t features = t->c * t->h * t->w;
    value *wv;
    BRG_CHECK(input(c, k, &wv));
    if ((wv->kind != V_CONST && wv->kind != V_WEIGHT) || wv->t.ndim != 2)
        return fail(c, BRG_ERR_UNSUPPORTED, "input %d ('%s') must be a two-dimensional weight", k, wv->name);
    const int64_t out = transposed ? wv->t.dims[1] : wv->t.dims[0];
    if (out < 1 || out > MAX_CHANNELS) return fail(c, BRG_ERR_UNSUPPORTED, "%lld outputs", (long long)out);
    brg_layer_desc d = brg_layer_desc_init(BRG_LAYER_LINEAR);
    d.out_channels = (int)out;
    d.bias = bias_node != NULL;
    char name[BRG_NAME_MAX];
    layer_name(c, wv->name, name);
    int li;
    const char *in[1] = {x->tensor};
    BRG_CHECK(layer(c, name, &d, in, 1, &li));
    const int64_t dims[2] = {transposed ? features : out, transposed ? out : features};
    BRG_CHECK(weight(c, k, li, "weight", dims, 2, transposed ? IMPORT_TRANSPOSE : IMPORT_AS_IS));
    if (bias_node) {
        const Onnx__NodeProto *self = c->node;
        c->node = bias_node;
        const brg_status st = weight(c, bias_k, li, "bias", &out, 1, IMPORT_AS_IS);
        c->node = self;
        BRG_CHECK(st);
    }
    return act_output(c, 0, name, 2, 0);
}

static brg_status op_gemm(ctx *c)
{
    static const char *const known[] = {"alpha", "beta", "transA", "transB", NULL};
    BRG_CHECK(known_attrs(c, known));
    float alpha, beta;
    int64_t ta, tb;
    BRG_CHECK(attr_float(c, "alpha", 1.0f, &alpha));
    BRG_CHECK(attr_float(c, "beta", 1.0f, &beta));
    BRG_CHECK(attr_int(c, "transA", 0, &ta));
    BRG_CHECK(attr_int(c, "transB", 0, &tb));
    if (alpha != 1.0f)
        return fail(c, BRG_ERR_UNSUPPORTED, "attribute 'alpha' = %g: brigade's linear layer scales by 1", alpha);
    if (ta) return fail(c, BRG_ERR_UNSUPPORTED, "attribute 'transA' = 1: the data must be [batch, features]");
    if (has_input(c, 2) && beta != 1.0f)
        return fail(c, BRG_ERR_UNSUPPORTED, "attribute 'beta' = %g: brigade adds its bias as it is", beta);
    value *x;
    BRG_CHECK(input_act(c, 0, &x));
    if (x->rank != 2) return fail(c, BRG_ERR_FORMAT, "reads a rank-%d tensor; Gemm takes [batch, features]", x->rank);
    return linear(c, x, 1, tb == 0, has_input(c, 2) ? c->node : NULL, 2);
}

/* The Add that only adds a constant bias to this MatMul's output, or -1. */
static int bias_add(ctx *c)
{
    const int u = map_get(&c->use_index, c->node->output[0]);
    if (u < 0 || c->uses[u].count != 1) return -1;
    const int a = c->uses[u].first;
    const Onnx__NodeProto *add = c->g->node[a];
    if (strcmp(add->op_type, "Add") != 0 || add->n_input != 2 || add->n_attribute) return -1;
    const int other = strcmp(add->input[0], c->node->output[0]) == 0 ? 1 : 0;
    const int v = map_get(&c->by_name, add->input[other]);
    if (v < 0 || (c->values[v].kind != V_CONST && c->values[v].kind != V_WEIGHT)) return -1;
    /* only a bias of the MatMul's outputs ([O] or [1, O]); others stay an Add, refused there */
    const int b = map_get(&c->by_name, c->node->input[1]);
    if (b < 0 || c->values[b].t.ndim != 2) return -1;
    const int64_t outs[1] = {c->values[b].t.dims[1]};
    if (!same_dims(c->values[v].t.dims, c->values[v].t.ndim, outs, 1)) return -1;
    return a;
}

static brg_status op_matmul(ctx *c)
{
    static const char *const known[] = {NULL};
    BRG_CHECK(known_attrs(c, known));
    value *x;
    BRG_CHECK(input_act(c, 0, &x));
    if (x->rank != 2)
        return fail(c, BRG_ERR_UNSUPPORTED, "multiplies a rank-%d tensor; brigade's linear layer takes [batch, "
                                            "features]", x->rank);
    const int a = bias_add(c);
    if (a < 0) return linear(c, x, 1, 1, NULL, 0);
    const Onnx__NodeProto *add = c->g->node[a];
    const int other = strcmp(add->input[0], c->node->output[0]) == 0 ? 1 : 0;
    BRG_CHECK(linear(c, x, 1, 1, add, other));
    /* The Add's output is the linear layer's. */
    c->folded[a] = 1;
    char made[BRG_NAME_MAX];
    snprintf(made, sizeof made, "%s", c->values[map_get(&c->by_name, c->node->output[0])].tensor);
    value *v;
    BRG_CHECK(add_value(c, add->output[0], V_ACT, &v));
    snprintf(v->tensor, sizeof v->tensor, "%s", made);
    v->rank = 2;
    return BRG_OK;
}

static brg_status op_flatten(ctx *c)
{
    static const char *const known[] = {"axis", NULL};
    BRG_CHECK(known_attrs(c, known));
    value *x;
    BRG_CHECK(input_act(c, 0, &x));
    int64_t axis;
    BRG_CHECK(attr_int(c, "axis", 1, &axis));
    if (axis < 0) axis += x->rank;
    if (axis != 1)
        return fail(c, BRG_ERR_UNSUPPORTED, "attribute 'axis' = %lld: brigade flattens to [batch, features] (axis 1)",
                    (long long)axis);
    BRG_CHECK(alias(c, 0, x));
    c->values[c->n_values - 1].rank = 2;
    return BRG_OK;
}

static brg_status op_reshape(ctx *c)
{
    static const char *const known[] = {"allowzero", NULL};
    BRG_CHECK(known_attrs(c, known));
    value *x, *s;
    BRG_CHECK(input_act(c, 0, &x));
    BRG_CHECK(input_const(c, 1, &s));
    int64_t allowzero;
    BRG_CHECK(attr_int(c, "allowzero", 0, &allowzero));
    if (!s->t.integer || s->t.ndim != 1)
        return fail(c, BRG_ERR_FORMAT, "the shape '%s' is not a list of integers", s->name);
    const import_shape shape = shape_of(c, x), *t = &shape;
    const int64_t in[4] = {-1, t->c, x->rank == 2 ? 1 : t->h, t->w};
    const int64_t per_sample = t->c * t->h * t->w;
    const int n = (int)s->t.count;
    const int64_t *want = s->t.i;
    char buf[128];
    /* The batch dimension: copied (0), inferred (-1) or written in. */
    int ok = n >= 1 && (want[0] == -1 || (want[0] == 0 && !allowzero) || want[0] > 0);
    int64_t known_product = 1;
    int infer = 0;
    for (int i = 1; ok && i < n; i++) {
        int64_t dim = want[i];
        if (dim == 0 && !allowzero && i < x->rank) dim = x->rank == 2 && i == 1 ? per_sample : in[i];
        if (dim == -1) infer++;
        else if (dim > 0 && dim <= per_sample / known_product) known_product *= dim; /* no overflow */
        else ok = 0;
    }
    ok = ok && infer + (want[0] == -1) <= 1;
    if (ok) ok = infer ? per_sample % known_product == 0 : known_product == per_sample;
    if (!ok)
        return fail(c, BRG_ERR_UNSUPPORTED, "reshapes to %s: brigade reshapes only to [batch, features]",
                    dims_text(want, n, buf, sizeof buf));
    if (want[0] > 0)
        import_note(c->imp, "Reshape '%s' writes the batch size %lld into the graph; brigade runs any batch size",
                    node_name(c->node), (long long)want[0]);
    if (n == 2) {
        BRG_CHECK(alias(c, 0, x));
        c->values[c->n_values - 1].rank = 2;
        return BRG_OK;
    }
    /* The same shape again is a no-op. */
    if (n == x->rank && x->rank != 2) {
        int same = 1;
        for (int i = 1; i < n; i++)
            same = same && (want[i] == in[i] || (want[i] == 0 && !allowzero) || (want[i] == -1));
        if (same) return alias(c, 0, x);
    }
    return fail(c, BRG_ERR_UNSUPPORTED, "reshapes to %s: brigade reshapes only to [batch, features]",
                dims_text(want, n, buf, sizeof buf));
}

static brg_status op_identity(ctx *c)
{
    static const char *const known[] = {NULL};
    BRG_CHECK(known_attrs(c, known));
    value *x;
    BRG_CHECK(input(c, 0, &x));
    return alias(c, 0, x);
}

static brg_status op_dropout(ctx *c)
{
    static const char *const known[] = {"ratio", "seed", "is_test", NULL};
    BRG_CHECK(known_attrs(c, known));
    value *x;
    BRG_CHECK(input_act(c, 0, &x));
    float ratio;
    BRG_CHECK(attr_float(c, "ratio", 0.5f, &ratio));
    if (has_input(c, 1)) {
        value *r;
        BRG_CHECK(input_const(c, 1, &r));
        if (r->t.count != 1) return fail(c, BRG_ERR_FORMAT, "the ratio '%s' is not one number", r->name);
        ratio = r->t.f[0];
    }
    if (!(ratio >= 0.0f && ratio < 1.0f)) return fail(c, BRG_ERR_FORMAT, "ratio %g is not in [0, 1)", ratio);
    if (ratio == 0.0f) BRG_CHECK(alias(c, 0, x));
    else {
        brg_layer_desc d = brg_layer_desc_init(BRG_LAYER_DROPOUT);
        d.rate = ratio;
        char name[BRG_NAME_MAX];
        layer_name(c, NULL, name);
        const char *in[1] = {x->tensor};
        BRG_CHECK(layer(c, name, &d, in, 1, NULL));
        BRG_CHECK(act_output(c, 0, name, x->rank, x->nonneg));
    }
    return other_outputs_none(c); /* after: x moves with the values */
}

/* Whether ONNX's nearest resize of extent in by factor f picks input
 * floor(x / f) for every output x, as brigade's upsample does. */
static int nearest_is_floor(const char *coord, const char *round, int64_t in, int64_t f)
{
    const int64_t out = in * f;
    for (int64_t x = 0; x < out; x++) {
        double o;
        if (strcmp(coord, "half_pixel") == 0) o = (x + 0.5) / (double)f - 0.5;
        else if (strcmp(coord, "pytorch_half_pixel") == 0) o = out > 1 ? (x + 0.5) / (double)f - 0.5 : 0.0;
        else if (strcmp(coord, "align_corners") == 0)
            o = out > 1 ? (double)x * (double)(in - 1) / (double)(out - 1) : 0.0;
        else if (strcmp(coord, "asymmetric") == 0) o = (double)x / (double)f;
        else if (strcmp(coord, "tf_half_pixel_for_nn") == 0) o = (x + 0.5) / (double)f;
        else return 0;
        double r;
        const double fl = floor(o), frac = o - fl;
        if (strcmp(round, "floor") == 0) r = fl;
        else if (strcmp(round, "ceil") == 0) r = ceil(o);
        else if (strcmp(round, "round_prefer_ceil") == 0) r = frac >= 0.5 ? fl + 1.0 : fl;
        else if (strcmp(round, "round_prefer_floor") == 0) r = frac > 0.5 ? fl + 1.0 : fl;
        else return 0;
        if (r < 0) r = 0;
        if (r > (double)(in - 1)) r = (double)(in - 1);
        if ((int64_t)r != x / f) return 0;
    }
    return 1;
}

/* Resize (opsets 10+) and Upsample (up to 9): nearest, one integer factor
 * for height and width. */
static brg_status op_resize(ctx *c)
{
    static const char *const resize_known[] = {"mode", "coordinate_transformation_mode", "nearest_mode",
                                               "cubic_coeff_a", "exclude_outside", "extrapolation_value",
                                               "antialias", "keep_aspect_ratio_policy", NULL};
    static const char *const upsample_known[] = {"mode", "scales", NULL};
    const int upsample = strcmp(c->node->op_type, "Upsample") == 0;
    BRG_CHECK(known_attrs(c, upsample ? upsample_known : resize_known));
    value *x;
    BRG_CHECK(input_act(c, 0, &x));
    if (x->rank != 4)
        return fail(c, BRG_ERR_UNSUPPORTED, "resizes a rank-%d tensor; brigade upsamples [N, C, H, W]", x->rank);
    char mode[32], coord[32], round[32];
    BRG_CHECK(attr_string(c, "mode", "nearest", mode, sizeof mode));
    BRG_CHECK(
        attr_string(c, "coordinate_transformation_mode", upsample ? "asymmetric" : "half_pixel", coord, sizeof coord));
    BRG_CHECK(attr_string(c, "nearest_mode", upsample ? "floor" : "round_prefer_floor", round, sizeof round));
    if (strcmp(mode, "nearest") != 0)
        return fail(c, BRG_ERR_UNSUPPORTED, "attribute 'mode' = '%s': brigade upsamples by nearest neighbour", mode);
    const import_shape shape = shape_of(c, x), *t = &shape;
    double scale[4] = {0, 0, 0, 0};
    int have = 0;
    const int scales_at = upsample ? 1 : c->opset >= 11 ? 2 : 1;
    if (upsample && attr(c, "scales")) {
        const Onnx__AttributeProto *a;
        BRG_CHECK(attr_typed(c, "scales", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS, &a));
        if (a->n_floats != 4) return fail(c, BRG_ERR_FORMAT, "scales has %zu values for a rank-4 tensor", a->n_floats);
        for (int i = 0; i < 4; i++) scale[i] = a->floats[i];
        have = 1;
    } else if (has_input(c, scales_at)) {
        value *s;
        BRG_CHECK(input_const(c, scales_at, &s));
        if (s->t.count == 4) {
            for (int i = 0; i < 4; i++) scale[i] = s->t.f[i];
            have = 1;
        } else if (s->t.count)
            return fail(c, BRG_ERR_FORMAT, "scales has %lld values for a rank-4 tensor", (long long)s->t.count);
    }
    if (!have && !upsample && c->opset >= 11 && has_input(c, 3)) {
        value *s;
        BRG_CHECK(input_const(c, 3, &s));
        if (s->t.count != 4 || !s->t.integer) return fail(c, BRG_ERR_FORMAT, "sizes is not 4 integers");
        if (s->t.i[1] != t->c || s->t.i[2] % t->h || s->t.i[3] % t->w)
            return fail(c, BRG_ERR_UNSUPPORTED,
                        "sizes [%lld, %lld, %lld, %lld] are no whole multiple of [N, %lld, %lld, %lld]",
                        (long long)s->t.i[0], (long long)s->t.i[1], (long long)s->t.i[2], (long long)s->t.i[3],
                        (long long)t->c, (long long)t->h, (long long)t->w);
        scale[0] = scale[1] = 1.0;
        scale[2] = (double)(s->t.i[2] / t->h);
        scale[3] = (double)(s->t.i[3] / t->w);
        have = 1;
    }
    if (!have) return fail(c, BRG_ERR_FORMAT, "neither scales nor sizes are given");
    const double f = scale[2];
    if (scale[0] != 1.0 || scale[1] != 1.0 || scale[3] != f || f < 1.0 || f != floor(f) || f > 64.0)
        return fail(c, BRG_ERR_UNSUPPORTED, "scales [%g, %g, %g, %g]: brigade upsamples height and width by one whole "
                                            "factor", scale[0], scale[1], scale[2], scale[3]);
    if (!nearest_is_floor(coord, round, t->h, (int64_t)f) || !nearest_is_floor(coord, round, t->w, (int64_t)f))
        return fail(c, BRG_ERR_UNSUPPORTED, "coordinate_transformation_mode '%s' with nearest_mode '%s' picks other "
                                            "pixels than repeating each %g times", coord, round, f);
    if (f == 1.0) return alias(c, 0, x);
    brg_layer_desc d = brg_layer_desc_init(BRG_LAYER_UPSAMPLE);
    d.factor = (int)f;
    char name[BRG_NAME_MAX];
    layer_name(c, NULL, name);
    const char *in[1] = {x->tensor};
    BRG_CHECK(layer(c, name, &d, in, 1, NULL));
    return act_output(c, 0, name, 4, x->nonneg);
}

static brg_status op_pad(ctx *c)
{
    static const char *const known[] = {"mode", "pads", "value", NULL};
    BRG_CHECK(known_attrs(c, known));
    value *x;
    BRG_CHECK(input(c, 0, &x));
    if (x->kind == V_PAD)
        return fail(c, BRG_ERR_UNSUPPORTED, "pads a Pad: brigade folds one Pad into the next Conv or pool");
    BRG_CHECK(input_act(c, 0, &x));
    if (x->rank != 4 && x->rank != 3)
        return fail(c, BRG_ERR_UNSUPPORTED, "pads a rank-%d tensor; brigade folds Pads of [N, C, H, W] or [N, C, L]",
                    x->rank);
    char mode[32];
    BRG_CHECK(attr_string(c, "mode", "constant", mode, sizeof mode));
    if (strcmp(mode, "constant") != 0)
        return fail(c, BRG_ERR_UNSUPPORTED, "attribute 'mode' = '%s': brigade folds constant zero padding only", mode);
    int64_t pads[8] = {0};
    float fill = 0.0f;
    const int rank = x->rank;
    if (c->opset < 11) {
        const int64_t *v;
        size_t n;
        BRG_CHECK(attr_ints(c, "pads", &v, &n));
        if (n != 2 * (size_t)rank) return fail(c, BRG_ERR_FORMAT, "pads has %zu values for rank %d", n, rank);
        memcpy(pads, v, n * sizeof *v);
        BRG_CHECK(attr_float(c, "value", 0.0f, &fill));
    } else {
        value *p;
        BRG_CHECK(input_const(c, 1, &p));
        if (!p->t.integer) return fail(c, BRG_ERR_FORMAT, "pads '%s' are not integers", p->name);
        if (has_input(c, 2)) {
            value *cv;
            BRG_CHECK(input_const(c, 2, &cv));
            if (cv->t.count > 1) return fail(c, BRG_ERR_FORMAT, "constant_value is not one number");
            fill = cv->t.count ? cv->t.f[0] : 0.0f;
        }
        if (has_input(c, 3)) { /* opset 18: the pads are those of these axes */
            value *ax;
            BRG_CHECK(input_const(c, 3, &ax));
            const int64_t na = ax->t.count;
            if (!ax->t.integer || p->t.count != 2 * na) return fail(c, BRG_ERR_FORMAT, "axes and pads do not match");
            for (int64_t i = 0; i < na; i++) {
                int64_t a = ax->t.i[i] < 0 ? ax->t.i[i] + rank : ax->t.i[i];
                if (a < 0 || a >= rank) return fail(c, BRG_ERR_FORMAT, "axis %lld", (long long)ax->t.i[i]);
                pads[a] = p->t.i[i];
                pads[rank + a] = p->t.i[na + i];
            }
        } else {
            if (p->t.count != 2 * rank)
                return fail(c, BRG_ERR_FORMAT, "pads has %lld values for rank %d", (long long)p->t.count, rank);
            memcpy(pads, p->t.i, (size_t)(2 * rank) * sizeof *pads);
        }
    }
    if (fill != 0.0f) return fail(c, BRG_ERR_UNSUPPORTED, "pads with %g: brigade folds zero padding only", fill);
    for (int i = 0; i < 2 * rank; i++) {
        if (pads[i] < 0) return fail(c, BRG_ERR_UNSUPPORTED, "negative pads crop; brigade does not");
        if (pads[i] > MAX_EXTENT) return fail(c, BRG_ERR_FORMAT, "pads of %lld", (long long)pads[i]);
    }
    if (pads[0] || pads[1] || pads[rank] || pads[rank + 1])
        return fail(c, BRG_ERR_UNSUPPORTED, "pads the batch or channel dimension; brigade pads height and width");
    const int xi = (int)(x - c->values);
    value *v;
    BRG_CHECK(add_value(c, c->node->output[0], V_PAD, &v));
    v->of = xi;
    v->pad[0] = (int)pads[2];
    v->pad[2] = (int)pads[rank + 2];
    if (rank == 4) {
        v->pad[1] = (int)pads[3];
        v->pad[3] = (int)pads[rank + 3];
    }
    return BRG_OK;
}

/* A final Softmax over the classes, which brigade's softmax cross-entropy
 * stands in for: axis 1 of [N, C], [N, C, L] or [N, C, H, W]. Before opset
 * 13 the axis flattens everything from it on, the classes only when no
 * height or width follows. Another axis (a Softmax(dim=-1) on an image)
 * means other outputs than those brigade trains: refused. */
static brg_status op_softmax(ctx *c)
{
    static const char *const known[] = {"axis", NULL};
    BRG_CHECK(known_attrs(c, known));
    value *x;
    BRG_CHECK(input_act(c, 0, &x));
    if (strcmp(c->node->output[0], c->output_name) != 0)
        return fail(c, BRG_ERR_UNSUPPORTED, "a Softmax inside the graph; brigade drops only a final one (it trains "
                                            "on logits)");
    int64_t axis;
    BRG_CHECK(attr_int(c, "axis", c->opset >= 13 ? -1 : 1, &axis));
    if (axis < 0) axis += x->rank;
    const import_shape s = shape_of(c, x);
    if (x->rank > 1 && (axis != 1 || (c->opset < 13 && s.h * s.w != 1)))
        return fail(c, BRG_ERR_UNSUPPORTED, "a Softmax over axis %lld of a rank-%d tensor%s: brigade trains with a "
                                            "softmax over the classes, axis 1", (long long)axis, x->rank,
                    c->opset < 13 && axis == 1 ? " (before opset 13, over all axes from 1 on)" : "");
    import_note(c->imp, "dropped the final Softmax '%s': brigade trains on logits with softmax cross-entropy",
                node_name(c->node));
    return alias(c, 0, x);
}

static brg_status op_constant(ctx *c)
{
    static const char *const known[] = {"value", "value_float", "value_floats", "value_int", "value_ints", NULL};
    BRG_CHECK(known_attrs(c, known));
    if (c->node->n_attribute != 1) return fail(c, BRG_ERR_FORMAT, "a Constant needs exactly one value attribute");
    const Onnx__AttributeProto *a = c->node->attribute[0];
    value *v;
    BRG_CHECK(add_value(c, c->node->output[0], V_CONST, &v));
    v->owns = 1;
    onnx_tensor *t = &v->t;
    if (strcmp(a->name, "value") == 0) {
        BRG_CHECK(attr_typed(c, "value", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR, &a));
        if (!a->t) return fail(c, BRG_ERR_FORMAT, "attribute 'value' holds no tensor");
        const brg_status st = onnx_tensor_read(a->t, c->source, t);
        return st == BRG_OK ? BRG_OK : brg_error_context(st, "node '%s'", node_name(c->node));
    }
    const int is_list = strcmp(a->name, "value_floats") == 0 || strcmp(a->name, "value_ints") == 0;
    const int is_int = strcmp(a->name, "value_int") == 0 || strcmp(a->name, "value_ints") == 0;
    const int want =
        is_list ? (is_int ? ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS : ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS)
                : (is_int ? ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT : ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
    BRG_CHECK(attr_typed(c, a->name, want, &a));
    const size_t n = is_list ? (is_int ? a->n_ints : a->n_floats) : 1;
    t->ndim = is_list ? 1 : 0;
    t->dims[0] = (int64_t)n;
    t->count = (int64_t)n;
    t->integer = is_int;
    t->f = brg_malloc((n ? n : 1) * sizeof *t->f, "a constant");
    t->i = is_int ? brg_malloc((n ? n : 1) * sizeof *t->i, "a constant") : NULL;
    if (!t->f || (is_int && !t->i)) return BRG_ERR_HOST_MEMORY;
    for (size_t k = 0; k < n; k++) {
        const int64_t iv = is_list ? (is_int ? a->ints[k] : 0) : a->i;
        t->f[k] = is_int ? (float)iv : is_list ? a->floats[k] : a->f;
        if (is_int) t->i[k] = iv;
    }
    return BRG_OK;
}

typedef struct op_entry {
    const char *name;
    brg_status (*translate)(ctx *c);
} op_entry;

static const op_entry ops[] = {
    {"Conv", op_conv},
    {"BatchNormalization", op_batchnorm},
    {"Relu", op_relu},
    {"MaxPool", op_maxpool},
    {"AveragePool", op_avgpool},
    {"GlobalAveragePool", op_global_avgpool},
    {"Concat", op_concat},
    {"Add", op_add},
    {"Gemm", op_gemm},
    {"MatMul", op_matmul},
    {"Flatten", op_flatten},
    {"Reshape", op_reshape},
    {"Identity", op_identity},
    {"Dropout", op_dropout},
    {"Resize", op_resize},
    {"Upsample", op_resize},
    {"Pad", op_pad},
    {"Softmax", op_softmax},
    {"Constant", op_constant},
};

/* What to do instead of the ops users meet most that brigade does not
 * import. */
static const import_remedy remedies[] = {
    {"Sigmoid,Tanh,LeakyRelu,PRelu,Elu,Selu,Celu,Gelu,Softplus,Softsign,Mish,ThresholdedRelu",
     "brigade's one activation is Relu: build the model with ReLU in its place and export it again"},
    {"Clip,HardSigmoid,HardSwish",
     "ReLU6 and the hard activations (MobileNet) export as these, and brigade's one activation is Relu: build the "
     "model with nn.ReLU in their place and export it again"},
    {"LogSoftmax",
     "brigade trains on logits with softmax cross-entropy: export the model without its final LogSoftmax (a final "
     "Softmax is dropped)"},
    {"Transpose",
     "tf2onnx's graphs of channels-last Keras models carry Transposes: import the Keras model itself (a .keras "
     "archive or its JSON); brigade has no layer that permutes axes"},
    {"Sub,Div,Mul",
     "brigade adds two computed tensors but has no other arithmetic: an input normalization ((x - mean) / std) "
     "belongs in the data pipeline, so export the model without it; a Mul that gates channels (squeeze-and-"
     "excitation) has no brigade layer"},
    {"ReduceMean",
     "a mean over height and width (PyTorch's x.mean((2, 3))) is a GlobalAveragePool: use "
     "nn.AdaptiveAvgPool2d(1) (then torch.flatten(x, 1)) and export again"},
    {"Shape,Gather,Unsqueeze,Squeeze,Slice,Cast,ConstantOfShape,Expand",
     "shape arithmetic, as x.view(x.size(0), -1) exports: use torch.flatten(x, 1) (one Flatten node) and export "
     "again"},
    {"ConvTranspose",
     "brigade has no transposed convolution: an Upsample or Resize (nearest) followed by a Conv imports"},
    {"GlobalMaxPool,ReduceMax", "brigade's global pool is GlobalAveragePool; its max pools have windows (MaxPool)"},
    {"LRN,InstanceNormalization,LayerNormalization,GroupNormalization",
     "brigade's one normalization is BatchNormalization"},
    {"LSTM,GRU,RNN,Attention,MultiHeadAttention,Einsum",
     "brigade trains convolutional networks: no recurrent or attention layers"},
    {"Sum", "an Add of two tensors imports: export x + y in its place"},
    {"If,Loop,Scan", "control flow: export a traced model (torch.onnx.export of the module, not a scripted one)"},
};

/* ---- the graph ---- */

static const char *op_name_at(const void *ctx_, int i)
{
    (void)ctx_;
    return ops[i].name;
}

static brg_status translate_node(ctx *c)
{
    const Onnx__NodeProto *n = c->node;
    if (n->domain && n->domain[0] && strcmp(n->domain, "ai.onnx") != 0)
        return fail(c, BRG_ERR_UNSUPPORTED, "an op of domain '%s'; brigade imports the standard ONNX ops: %s",
                    n->domain, SUPPORTED_OPS);
    if (!n->n_output || !n->output[0][0]) return fail(c, BRG_ERR_FORMAT, "no output");
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        if (strcmp(ops[i].name, n->op_type) == 0) return ops[i].translate(c);
    char hint[96];
    brg_text_suggest(n->op_type, op_name_at, NULL, (int)(sizeof ops / sizeof ops[0]), hint, sizeof hint);
    return fail(c, BRG_ERR_UNSUPPORTED, "an op brigade does not import%s: %s; it imports %s", hint,
                import_remedy_for(remedies, sizeof remedies / sizeof remedies[0], n->op_type), SUPPORTED_OPS);
}

/* The graph's tensors by maker, the nodes output[0] needs, and how many
 * needed nodes read each name. */
static brg_status index_graph(ctx *c)
{
    const Onnx__GraphProto *g = c->g;
    const int nn = (int)g->n_node;
    c->needed = calloc((size_t)nn + 1, 1);
    c->folded = calloc((size_t)nn + 1, 1);
    c->uses = calloc(((size_t)nn + 1) * 8 + 16, sizeof *c->uses);
    if (!c->needed || !c->folded || !c->uses)
        return brg_error(BRG_ERR_HOST_MEMORY, "cannot allocate the graph's index");
    for (int i = 0; i < nn; i++) {
        const Onnx__NodeProto *n = g->node[i];
        if (!n->op_type) return brg_error(BRG_ERR_FORMAT, "%s: node %d has no op type", c->source, i);
        for (size_t k = 0; k < n->n_output; k++) {
            if (!n->output[k][0]) continue;
            if (map_get(&c->producer, n->output[k]) >= 0)
                return brg_error(BRG_ERR_FORMAT, "%s: tensor '%s' is made by two nodes", c->source, n->output[k]);
            BRG_CHECK(map_put(&c->producer, n->output[k], i));
        }
    }
    /* Backwards from the output: a node is needed when something needed
     * reads one of its outputs (names the needed set holds: use_index). */
    name_map need = {0};
    brg_status st = map_put(&need, c->output_name, 1);
    for (int i = nn - 1; i >= 0 && st == BRG_OK; i--) {
        const Onnx__NodeProto *n = g->node[i];
        for (size_t k = 0; k < n->n_output && !c->needed[i]; k++)
            c->needed[i] = n->output[k][0] && map_get(&need, n->output[k]) >= 0;
        for (size_t k = 0; c->needed[i] && k < n->n_input && st == BRG_OK; k++)
            if (n->input[k][0]) st = map_put(&need, n->input[k], 1);
    }
    /* A needed input made by a later node shows up as such in input(). */
    map_free(&need);
    BRG_CHECK(st);
    int n_uses = 0, cap_uses = nn * 8 + 16;
    for (int i = 0; i < nn; i++) {
        if (!c->needed[i]) continue;
        const Onnx__NodeProto *n = g->node[i];
        for (size_t k = 0; k < n->n_input; k++) {
            if (!n->input[k][0]) continue;
            int u = map_get(&c->use_index, n->input[k]);
            if (u < 0) {
                if (n_uses == cap_uses) {
                    consumers *p = realloc(c->uses, (size_t)(2 * cap_uses) * sizeof *p);
                    if (!p) return brg_error(BRG_ERR_HOST_MEMORY, "cannot allocate the graph's index");
                    c->uses = p;
                    cap_uses *= 2;
                }
                u = n_uses++;
                c->uses[u].count = 0;
                c->uses[u].first = i;
                BRG_CHECK(map_put(&c->use_index, n->input[k], u));
            }
            c->uses[u].count++;
        }
    }
    const int u = map_get(&c->use_index, c->output_name);
    if (u >= 0) c->uses[u].count++;
    return BRG_OK;
}

/* A graph input's shape: rank and dims (batch first; symbolic ones < 0). */
static brg_status input_shape(const ctx *c, const Onnx__ValueInfoProto *in, int *rank, int64_t dims[IMPORT_MAX_DIMS],
                              int *elem)
{
    const Onnx__TypeProto *tp = in->type;
    if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type)
        return brg_error(BRG_ERR_UNSUPPORTED, "%s: graph input '%s' is not a tensor", c->source, in->name);
    const Onnx__TensorShapeProto *s = tp->tensor_type->shape;
    *elem = tp->tensor_type->elem_type;
    if (!s)
        return brg_error(BRG_ERR_UNSUPPORTED, "%s: graph input '%s' has no shape; export with one",
                         c->source, in->name);
    if (s->n_dim > IMPORT_MAX_DIMS)
        return brg_error(BRG_ERR_UNSUPPORTED, "%s: graph input '%s' has %zu dimensions", c->source, in->name, s->n_dim);
    *rank = (int)s->n_dim;
    for (size_t d = 0; d < s->n_dim; d++)
        dims[d] =
            s->dim[d]->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE ? s->dim[d]->dim_value : -1;
    return BRG_OK;
}

/* Initializers, the model input and the weights given as graph inputs. */
static brg_status define_inputs(ctx *c, const char *model_name, int *input_rank)
{
    const Onnx__GraphProto *g = c->g;
    for (size_t i = 0; i < g->n_initializer; i++) {
        const Onnx__TensorProto *t = g->initializer[i];
        if (!t->name || !t->name[0]) return brg_error(BRG_ERR_FORMAT, "%s: initializer %zu has no name", c->source, i);
        value *v;
        BRG_CHECK(add_value(c, t->name, V_CONST, &v));
        v->owns = 1;
        BRG_CHECK(onnx_tensor_read(t, c->source, &v->t));
    }
    for (size_t i = 0; i < g->n_input; i++) {
        const Onnx__ValueInfoProto *in = g->input[i];
        if (!in->name || !in->name[0])
            return brg_error(BRG_ERR_FORMAT, "%s: graph input %zu has no name", c->source, i);
        if (map_get(&c->by_name, in->name) >= 0) continue; /* an initializer listed as an input (IR < 4) */
        int rank = 0, elem = 0;
        int64_t dims[IMPORT_MAX_DIMS];
        const int is_first = c->input_name == NULL;
        const int used = map_get(&c->use_index, in->name) >= 0;
        if (!used && !is_first) continue;
        BRG_CHECK(input_shape(c, in, &rank, dims, &elem));
        if (elem != ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT)
            return brg_error(BRG_ERR_UNSUPPORTED, "%s: graph input '%s' is not FLOAT; brigade computes in float32",
                             c->source, in->name);
        if (!is_first) { /* a weight to bind */
            value *v;
            BRG_CHECK(add_value(c, in->name, V_WEIGHT, &v));
            v->t.ndim = rank;
            v->t.count = 1;
            for (int d = 0; d < rank; d++) {
                if (dims[d] < 0)
                    return brg_error(BRG_ERR_UNSUPPORTED,
                                     "%s: graph input '%s' has a symbolic size, so it is data, not a weight: brigade "
                                     "models have one input (here '%s')",
                                     c->source, in->name, c->input_name);
                if (dims[d] > ((int64_t)1 << 40) / v->t.count)
                    return brg_error(BRG_ERR_UNSUPPORTED, "%s: graph input '%s' is too large", c->source, in->name);
                v->t.dims[d] = dims[d];
                v->t.count *= dims[d];
            }
            continue;
        }
        c->input_name = in->name;
        for (int d = 1; d < rank; d++)
            if (dims[d] <= 0)
                return brg_error(BRG_ERR_UNSUPPORTED,
                                 "%s: input '%s' has a symbolic or empty dimension %d; export with fixed sizes "
                                 "(only the batch may vary)", c->source, in->name, d);
        int64_t ch, h = 1, w = 1;
        if (rank == 4) ch = dims[1], h = dims[2], w = dims[3];
        else if (rank == 3) ch = dims[1], h = dims[2];
        else if (rank == 2) ch = dims[1];
        else
            return brg_error(BRG_ERR_UNSUPPORTED, "%s: input '%s' has rank %d; brigade reads [N, C, H, W], [N, C, L] "
                                                  "or [N, F]", c->source, in->name, rank);
        const brg_status st = import_begin(model_name, ch, h, w, &c->imp);
        if (st != BRG_OK) return brg_error_context(st, "%s: input '%s'", c->source, in->name);
        value *v;
        BRG_CHECK(add_value(c, in->name, V_ACT, &v));
        snprintf(v->tensor, sizeof v->tensor, "input");
        v->rank = rank;
        *input_rank = rank;
    }
    if (!c->input_name)
        return brg_error(BRG_ERR_UNSUPPORTED, "%s: the graph has no input besides its initializers", c->source);
    return BRG_OK;
}

static brg_status check_opset(ctx *c, const Onnx__ModelProto *mp)
{
    c->opset = -1;
    for (size_t i = 0; i < mp->n_opset_import; i++) {
        const Onnx__OperatorSetIdProto *o = mp->opset_import[i];
        if (!o->domain || !o->domain[0] || strcmp(o->domain, "ai.onnx") == 0) c->opset = (int)o->version;
    }
    if (c->opset < 0)
        return brg_error(BRG_ERR_FORMAT, "%s: no opset of the standard ONNX domain is imported", c->source);
    if (c->opset < MIN_OPSET || c->opset > MAX_OPSET)
        return brg_error(BRG_ERR_UNSUPPORTED, "%s: opset %d; brigade reads opsets %d to %d (convert with "
                                              "onnx.version_converter)", c->source, c->opset, MIN_OPSET, MAX_OPSET);
    return BRG_OK;
}

/* A name the TorchScript exporter gives a tensor it computed, not a
 * parameter of the model: "onnx::Conv_193" (PyTorch 1.12 on), "193" before. */
static int exporter_made(const char *name)
{
    if (strncmp(name, "onnx::", 6) == 0) return 1;
    if (!name[0]) return 0;
    for (const char *p = name; *p; p++)
        if (!isdigit((unsigned char)*p)) return 0;
    return 1;
}

/* torch.onnx.export in eval mode folds each BatchNorm into the Conv before
 * it by default, leaving convolutions whose weights are computed constants
 * and no BatchNormalization: exact for inference, but the model then
 * trains without BatchNorm, so the import says so (a guess from the
 * names, hence a note). */
static void note_folded_batchnorm(ctx *c)
{
    const char *folded = NULL;
    for (int i = 0; i < (int)c->g->n_node; i++) {
        const Onnx__NodeProto *n = c->g->node[i];
        if (!c->needed[i]) continue;
        if (strcmp(n->op_type, "BatchNormalization") == 0) return;
        if (!folded && strcmp(n->op_type, "Conv") == 0 && n->n_input > 1 && exporter_made(n->input[1]))
            folded = n->input[1];
    }
    if (folded)
        import_note(c->imp, "no BatchNormalization, and the convolutions' weights are constants the exporter "
                    "computed ('%s', not a parameter's name): the export probably folded each BatchNorm into the "
                    "Conv before it (torch.onnx.export does in eval mode), so the model trains without BatchNorm; "
                    "to keep it, export with training=torch.onnx.TrainingMode.PRESERVE and do_constant_folding=False "
                    "(docs/import.md)", folded);
}

static brg_status translate(ctx *c, const Onnx__ModelProto *mp, const char *model_name)
{
    BRG_CHECK(check_opset(c, mp));
    const Onnx__GraphProto *g = c->g;
    if (!g->n_output || !g->output[0]->name || !g->output[0]->name[0])
        return brg_error(BRG_ERR_FORMAT, "%s: the graph has no output", c->source);
    c->output_name = g->output[0]->name;
    BRG_CHECK(index_graph(c));
    int input_rank = 0;
    BRG_CHECK(define_inputs(c, model_name, &input_rank));
    if (g->n_output > 1) {
        char others[48] = "second output is";
        if (g->n_output > 2) snprintf(others, sizeof others, "other %zu outputs are", g->n_output - 1);
        import_note(c->imp, "the graph's %s left out: brigade trains its first, '%s'", others, c->output_name);
    }
    for (int i = 0; i < (int)g->n_node; i++) {
        if (!c->needed[i] || c->folded[i]) continue;
        c->node = g->node[i];
        c->node_index = i;
        BRG_CHECK(translate_node(c));
    }
    note_folded_batchnorm(c);
    const int o = map_get(&c->by_name, c->output_name);
    if (o < 0) return brg_error(BRG_ERR_FORMAT, "%s: no node makes the graph's output '%s'", c->source, c->output_name);
    const value *out = &c->values[o];
    if (out->kind != V_ACT)
        return brg_error(BRG_ERR_UNSUPPORTED, "%s: the graph's output '%s' is %s", c->source, c->output_name,
                         out->kind == V_PAD ? "a Pad; brigade folds Pads into the Conv or pool after them"
                                            : "no computed tensor (a constant or an output brigade does not compute)");
    const import_shape shape = import_tensor(c->imp, out->tensor), *t = &shape;
    if (out->rank == 2 && t->h * t->w != 1)
        return brg_error(BRG_ERR_UNSUPPORTED, "%s: the graph's output '%s' is a flattened [%lld, %lld, %lld] tensor; "
                                              "brigade's output is [classes] logits or per-pixel [classes, H, W] ones",
                         c->source, c->output_name, (long long)t->c, (long long)t->h, (long long)t->w);
    const brg_status st = import_finish(c->imp, out->tensor);
    return st == BRG_OK ? BRG_OK : brg_error_context(st, "%s", c->source);
}

static void ctx_free(ctx *c)
{
    for (int i = 0; i < c->n_values; i++)
        if (c->values[i].owns) onnx_tensor_free(&c->values[i].t);
    free(c->values);
    map_free(&c->by_name);
    map_free(&c->producer);
    map_free(&c->use_index);
    free(c->uses);
    free(c->needed);
    free(c->folded);
}

/* The model's name from the file's: base name without ".onnx". */
static void model_name_of(const char *source, char out[BRG_NAME_MAX])
{
    const char *base = strrchr(source, '/');
    base = base ? base + 1 : source;
    char tmp[BRG_NAME_MAX];
    snprintf(tmp, sizeof tmp, "%s", base);
    const size_t n = strlen(tmp);
    if (n > 5 && strcmp(tmp + n - 5, ".onnx") == 0) tmp[n - 5] = '\0';
    clean_name(tmp[0] ? tmp : "onnx", out, BRG_NAME_MAX);
}

int brg_import_onnx_available(void) { return 1; }

brg_status brg_import_onnx_bytes(const void *data, size_t size, const char *source, brg_import **out)
{
    if (!out) return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_import_onnx_bytes: out is NULL");
    *out = NULL;
    if (!data && size) return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_import_onnx_bytes: no data");
    source = source ? source : "(memory)";
    Onnx__ModelProto *mp = onnx__model_proto__unpack(NULL, size, data);
    if (!mp)
        return brg_error(BRG_ERR_FORMAT, "%s: not an ONNX model (the protobuf does not parse: truncated, or another "
                                         "kind of file)", source);
    if (!mp->graph) {
        onnx__model_proto__free_unpacked(mp, NULL);
        return brg_error(BRG_ERR_FORMAT, "%s: an ONNX model without a graph", source);
    }
    char name[BRG_NAME_MAX];
    model_name_of(source, name);
    ctx c;
    memset(&c, 0, sizeof c);
    c.source = source;
    c.g = mp->graph;
    const brg_status st = translate(&c, mp, name);
    ctx_free(&c);
    onnx__model_proto__free_unpacked(mp, NULL);
    if (st != BRG_OK) {
        brg_import_free(c.imp);
        return st;
    }
    *out = c.imp;
    return BRG_OK;
}

brg_status brg_import_onnx(const char *path, brg_import **out)
{
    if (!out) return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_import_onnx: out is NULL");
    *out = NULL;
    if (!path) return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_import_onnx: path is NULL");
    char *bytes = NULL;
    size_t len = 0;
    BRG_CHECK(brg_read_file(path, "ONNX file", MAX_FILE_BYTES, &bytes, &len));
    const brg_status st = brg_import_onnx_bytes(bytes ? bytes : "", len, path, out);
    free(bytes);
    return st;
}
