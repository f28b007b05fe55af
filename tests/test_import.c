/* The ONNX importer on graphs made here with protobuf-c (the node tests of
 * test_onnx_nodes cover single ops against ONNX's expected outputs):
 *
 * - Ops no node test can run on a one-input model, checked by their
 *   meaning: Concat's output is its inputs' outputs side by side, Add's
 *   their sum, Resize's each pixel repeated, all on a CPU pipeline.
 * - Folds equal the unfolded form exactly: Pad + Conv and a Conv with
 *   pads, Pad + AveragePool and count_include_pad, Relu + Pad + MaxPool
 *   and a padded MaxPool, MatMul + Add and Gemm, on the same weights.
 * - A PyTorch-style ResNet: its cut points are the module boundaries and
 *   its layers and blocks are named from the scopes and weights.
 * - Weights given as graph inputs: bound, transposed where the file holds
 *   them [in, out]; binding errors.
 * - Bad files give clean errors, nothing half imported: truncated and
 *   garbage bytes, an attribute of the wrong type, a cycle, a missing
 *   initializer, an unknown op, an unsupported attribute, external data,
 *   a too-new opset, two data inputs.
 *
 * `test_import --write-fixture FILE [resnet|ops|conv]` writes one of these
 * graphs: the small ResNet the command-line tests import
 * (tests/test_cli_import.sh), and the seeds of the ONNX fuzz target
 * (tests/fuzz/corpus/onnx). Exits 77 without the importer. */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"

#include "import_test.h"

#ifdef BRG_HAVE_ONNX
#include "model/import/onnx-impl.h"

/* ---- building graphs ---- */

/* Everything a graph's messages point to, freed together. */
typedef struct graph {
    Onnx__ModelProto model;
    Onnx__GraphProto g;
    Onnx__OperatorSetIdProto opset;
    Onnx__OperatorSetIdProto *opsets[1];
    void **owned;
    int n_owned, cap_owned;
    uint64_t rng;
} graph;

static void *own(graph *gr, void *p)
{
    if (gr->n_owned == gr->cap_owned) {
        gr->cap_owned = gr->cap_owned ? 2 * gr->cap_owned : 64;
        gr->owned = realloc(gr->owned, (size_t)gr->cap_owned * sizeof *gr->owned);
        if (!gr->owned) abort();
    }
    if (!p) abort();
    gr->owned[gr->n_owned++] = p;
    return p;
}

static void *grow_list(graph *gr, void *list, size_t n, size_t size)
{
    void *p = own(gr, calloc(n + 1, size));
    if (n) memcpy(p, list, n * size);
    return p;
}

static char *text(graph *gr, const char *s) { return own(gr, strdup(s)); }

static void graph_init(graph *gr, int opset)
{
    memset(gr, 0, sizeof *gr);
    onnx__model_proto__init(&gr->model);
    onnx__graph_proto__init(&gr->g);
    onnx__operator_set_id_proto__init(&gr->opset);
    gr->opset.domain = "";
    gr->opset.has_version = 1;
    gr->opset.version = opset;
    gr->opsets[0] = &gr->opset;
    gr->model.n_opset_import = 1;
    gr->model.opset_import = gr->opsets;
    gr->model.has_ir_version = 1;
    gr->model.ir_version = 7;
    gr->model.graph = &gr->g;
    gr->g.name = "test";
    gr->rng = 0x2545f4914f6cdd1dULL;
}

static void graph_free(graph *gr)
{
    for (int i = gr->n_owned - 1; i >= 0; i--) free(gr->owned[i]);
    free(gr->owned);
}

static float next_value(graph *gr)
{
    gr->rng ^= gr->rng << 13;
    gr->rng ^= gr->rng >> 7;
    gr->rng ^= gr->rng << 17;
    return (float)((double)(gr->rng >> 11) / 9007199254740992.0 - 0.5);
}

static Onnx__ValueInfoProto *value_info(graph *gr, const char *name, int rank, const int64_t *dims)
{
    Onnx__ValueInfoProto *v = own(gr, calloc(1, sizeof *v));
    onnx__value_info_proto__init(v);
    v->name = text(gr, name);
    Onnx__TypeProto *t = own(gr, calloc(1, sizeof *t));
    onnx__type_proto__init(t);
    Onnx__TypeProto__Tensor *tt = own(gr, calloc(1, sizeof *tt));
    onnx__type_proto__tensor__init(tt);
    tt->has_elem_type = 1;
    tt->elem_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    if (rank >= 0) {
        Onnx__TensorShapeProto *s = own(gr, calloc(1, sizeof *s));
        onnx__tensor_shape_proto__init(s);
        s->n_dim = (size_t)rank;
        s->dim = own(gr, calloc((size_t)rank + 1, sizeof *s->dim));
        for (int d = 0; d < rank; d++) {
            Onnx__TensorShapeProto__Dimension *dim = own(gr, calloc(1, sizeof *dim));
            onnx__tensor_shape_proto__dimension__init(dim);
            if (dims[d] < 0) {
                dim->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
                dim->dim_param = "batch";
            } else {
                dim->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
                dim->dim_value = dims[d];
            }
            s->dim[d] = dim;
        }
        tt->shape = s;
    }
    t->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    t->tensor_type = tt;
    v->type = t;
    return v;
}

/* A graph input of [batch, dims...]. */
static void add_input(graph *gr, const char *name, int rank, ...)
{
    int64_t dims[8] = {-1};
    va_list ap;
    va_start(ap, rank);
    for (int d = 1; d < rank; d++) dims[d] = va_arg(ap, int);
    va_end(ap);
    gr->g.input = grow_list(gr, gr->g.input, gr->g.n_input, sizeof *gr->g.input);
    gr->g.input[gr->g.n_input++] = value_info(gr, name, rank, dims);
}

/* A weight given as a graph input (fixed dims, no batch). */
static void add_weight_input(graph *gr, const char *name, int rank, const int64_t *dims)
{
    gr->g.input = grow_list(gr, gr->g.input, gr->g.n_input, sizeof *gr->g.input);
    gr->g.input[gr->g.n_input++] = value_info(gr, name, rank, dims);
}

static void set_output(graph *gr, const char *name)
{
    gr->g.output = grow_list(gr, NULL, 0, sizeof *gr->g.output);
    gr->g.n_output = 1;
    gr->g.output[0] = value_info(gr, name, -1, NULL);
}

static Onnx__TensorProto *tensor(graph *gr, const char *name, int type, int ndim, const int64_t *dims)
{
    Onnx__TensorProto *t = own(gr, calloc(1, sizeof *t));
    onnx__tensor_proto__init(t);
    t->name = text(gr, name);
    t->has_data_type = 1;
    t->data_type = type;
    t->n_dims = (size_t)ndim;
    t->dims = own(gr, calloc((size_t)ndim + 1, sizeof *t->dims));
    memcpy(t->dims, dims, (size_t)ndim * sizeof *dims);
    gr->g.initializer = grow_list(gr, gr->g.initializer, gr->g.n_initializer, sizeof *gr->g.initializer);
    gr->g.initializer[gr->g.n_initializer++] = t;
    return t;
}

/* A float initializer of random values (values NULL) or the given ones. */
static Onnx__TensorProto *init_f(graph *gr, const char *name, int ndim, const int64_t *dims, const float *values)
{
    Onnx__TensorProto *t = tensor(gr, name, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, ndim, dims);
    size_t n = 1;
    for (int d = 0; d < ndim; d++) n *= (size_t)dims[d];
    t->n_float_data = n;
    t->float_data = own(gr, calloc(n + 1, sizeof *t->float_data));
    for (size_t i = 0; i < n; i++) t->float_data[i] = values ? values[i] : next_value(gr);
    return t;
}

static void init_i64(graph *gr, const char *name, int n, const int64_t *values)
{
    const int64_t dims[1] = {n};
    Onnx__TensorProto *t = tensor(gr, name, ONNX__TENSOR_PROTO__DATA_TYPE__INT64, 1, dims);
    t->n_int64_data = (size_t)n;
    t->int64_data = own(gr, calloc((size_t)n + 1, sizeof *t->int64_data));
    memcpy(t->int64_data, values, (size_t)n * sizeof *values);
}

static char **split(graph *gr, const char *list, size_t *n)
{
    *n = 0;
    char **out = own(gr, calloc(16, sizeof *out));
    if (!list || !list[0]) return out;
    char *copy = text(gr, list);
    for (char *tok = strtok(copy, ","); tok && *n < 16; tok = strtok(NULL, ",")) out[(*n)++] = tok[0] == '-' ? "" : tok;
    return out;
}

/* A node; inputs and outputs comma-separated ("-" for an absent input). */
static Onnx__NodeProto *node(graph *gr, const char *op, const char *name, const char *inputs, const char *outputs)
{
    Onnx__NodeProto *n = own(gr, calloc(1, sizeof *n));
    onnx__node_proto__init(n);
    n->op_type = text(gr, op);
    n->name = text(gr, name);
    n->input = split(gr, inputs, &n->n_input);
    n->output = split(gr, outputs, &n->n_output);
    gr->g.node = grow_list(gr, gr->g.node, gr->g.n_node, sizeof *gr->g.node);
    gr->g.node[gr->g.n_node++] = n;
    return n;
}

static Onnx__AttributeProto *attribute(graph *gr, Onnx__NodeProto *n, const char *name, int type)
{
    Onnx__AttributeProto *a = own(gr, calloc(1, sizeof *a));
    onnx__attribute_proto__init(a);
    a->name = text(gr, name);
    a->has_type = 1;
    a->type = type;
    n->attribute = grow_list(gr, n->attribute, n->n_attribute, sizeof *n->attribute);
    n->attribute[n->n_attribute++] = a;
    return a;
}

static void attr_i(graph *gr, Onnx__NodeProto *n, const char *name, int64_t v)
{
    Onnx__AttributeProto *a = attribute(gr, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
    a->has_i = 1;
    a->i = v;
}

static void attr_f(graph *gr, Onnx__NodeProto *n, const char *name, float v)
{
    Onnx__AttributeProto *a = attribute(gr, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
    a->has_f = 1;
    a->f = v;
}

static void attr_s(graph *gr, Onnx__NodeProto *n, const char *name, const char *v)
{
    Onnx__AttributeProto *a = attribute(gr, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING);
    a->has_s = 1;
    a->s.data = (uint8_t *)text(gr, v);
    a->s.len = strlen(v);
}

static void attr_ints(graph *gr, Onnx__NodeProto *n, const char *name, int count, ...)
{
    Onnx__AttributeProto *a = attribute(gr, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
    a->n_ints = (size_t)count;
    a->ints = own(gr, calloc((size_t)count + 1, sizeof *a->ints));
    va_list ap;
    va_start(ap, count);
    for (int i = 0; i < count; i++) a->ints[i] = va_arg(ap, int);
    va_end(ap);
}

static uint8_t *pack(graph *gr, size_t *len)
{
    *len = onnx__model_proto__get_packed_size(&gr->model);
    uint8_t *bytes = own(gr, malloc(*len + 1));
    onnx__model_proto__pack(&gr->model, bytes);
    return bytes;
}

/* Import the graph with output[0] = output. */
static brg_status import_as(graph *gr, const char *output, brg_import **imp)
{
    set_output(gr, output);
    size_t len;
    const uint8_t *bytes = pack(gr, &len);
    brg_clear_error();
    *imp = (brg_import *)(uintptr_t)1; /* must come back NULL on failure */
    const brg_status st = brg_import_onnx_bytes(bytes, len, "test.onnx", imp);
    CHECK_MSG(st == BRG_OK || *imp == NULL, "a failed import left a result");
    return st;
}

/* ---- the ops and folds graph ---- */

#define N 2

static const float *sample_input(void)
{
    static float x[N * 3 * 6 * 6];
    for (size_t i = 0; i < sizeof x / sizeof x[0]; i++) x[i] = frand();
    return x;
}

/* x [N, 3, 6, 6] through convolutions a (3x3, pads 1), b and c (1x1), and
 * everything the checks below compare. */
static void ops_graph(graph *gr)
{
    graph_init(gr, 13);
    add_input(gr, "x", 4, 3, 6, 6);
    const int64_t wa[4] = {4, 3, 3, 3}, ba[1] = {4}, wb[4] = {2, 3, 1, 1}, wc[4] = {4, 3, 1, 1}, wm[2] = {144, 5},
                  bm[1] = {5};
    init_f(gr, "Wa", 4, wa, NULL);
    init_f(gr, "Ba", 1, ba, NULL);
    init_f(gr, "Wb", 4, wb, NULL);
    init_f(gr, "Wc", 4, wc, NULL);
    init_f(gr, "Wm", 2, wm, NULL);
    init_f(gr, "Bm", 1, bm, NULL);
    const float scales[4] = {1, 1, 2, 2};
    const int64_t four[1] = {4};
    init_f(gr, "scales", 1, four, scales);
    const int64_t pads[8] = {0, 0, 1, 1, 0, 0, 1, 1};
    init_i64(gr, "pads", 8, pads);
    Onnx__NodeProto *n = node(gr, "Conv", "conv_a", "x,Wa,Ba", "a");
    attr_ints(gr, n, "pads", 4, 1, 1, 1, 1);
    node(gr, "Relu", "relu_a", "a", "ra");
    node(gr, "Conv", "conv_b", "x,Wb", "b");
    n = node(gr, "Concat", "cat", "ra,b", "cat");
    attr_i(gr, n, "axis", 1);
    node(gr, "Conv", "conv_c", "x,Wc", "c");
    node(gr, "Add", "sum", "a,c", "sum");
    n = node(gr, "Resize", "up", "a,-,scales", "up");
    attr_s(gr, n, "mode", "nearest");
    /* Pad + Conv against Conv with pads (a) */
    node(gr, "Pad", "pad_x", "x,pads", "px");
    node(gr, "Conv", "conv_p", "px,Wa,Ba", "conv_p");
    /* Pad + AveragePool against count_include_pad */
    node(gr, "Pad", "pad_a", "a,pads", "pa");
    n = node(gr, "AveragePool", "apf", "pa", "apf");
    attr_ints(gr, n, "kernel_shape", 2, 3, 3);
    n = node(gr, "AveragePool", "apd", "a", "apd");
    attr_ints(gr, n, "kernel_shape", 2, 3, 3);
    attr_ints(gr, n, "pads", 4, 1, 1, 1, 1);
    attr_i(gr, n, "count_include_pad", 1);
    /* Relu + Pad + MaxPool against a padded MaxPool */
    node(gr, "Pad", "pad_r", "ra,pads", "pr");
    n = node(gr, "MaxPool", "mpf", "pr", "mpf");
    attr_ints(gr, n, "kernel_shape", 2, 3, 3);
    attr_ints(gr, n, "strides", 2, 2, 2);
    n = node(gr, "MaxPool", "mpd", "ra", "mpd");
    attr_ints(gr, n, "kernel_shape", 2, 3, 3);
    attr_ints(gr, n, "strides", 2, 2, 2);
    attr_ints(gr, n, "pads", 4, 1, 1, 1, 1);
    /* MatMul + Add against Gemm */
    node(gr, "Flatten", "flat", "ra", "flat");
    node(gr, "MatMul", "mm", "flat,Wm", "mm");
    node(gr, "Add", "mm_bias", "mm,Bm", "mmb");
    node(gr, "Gemm", "gemm", "flat,Wm,Bm", "gemm");
}

/* The graph's output `output` on x: *count floats per sample in a new
 * array (NULL after a failed check). */
static float *outputs(graph *gr, const char *output, const float *x, int64_t *count)
{
    brg_import *imp = NULL;
    CHECK_OK(import_as(gr, output, &imp));
    if (!imp) return NULL;
    const brg_model *m = brg_import_model(imp);
    const brg_model_tensor *o = brg_model_get_tensor(m, brg_model_output(m));
    *count = o->c * o->h * o->w;
    float *out = malloc((size_t)(N * *count) * sizeof *out);
    if (out) CHECK_OK(import_predict(imp, x, N, out));
    brg_import_free(imp);
    return out;
}

static double max_diff(const float *a, const float *b, int64_t n)
{
    double worst = 0.0;
    for (int64_t i = 0; i < n; i++) {
        const double d = fabs((double)a[i] - (double)b[i]);
        if (!(d <= worst)) worst = d;
    }
    return worst;
}

static void test_ops_by_meaning(void)
{
    graph gr;
    ops_graph(&gr);
    const float *x = sample_input();
    int64_t na, nb, nc, ncat, nsum, nup;
    float *a = outputs(&gr, "a", x, &na), *b = outputs(&gr, "b", x, &nb), *c = outputs(&gr, "c", x, &nc);
    float *cat = outputs(&gr, "cat", x, &ncat), *sum = outputs(&gr, "sum", x, &nsum), *up = outputs(&gr, "up", x, &nup);
    CHECK(a && b && c && cat && sum && up);
    if (a && b && c && cat && sum && up) {
        CHECK(na == 4 * 36 && nb == 2 * 36 && ncat == 6 * 36 && nsum == na && nup == 4 * 144);
        double worst = 0.0;
        for (int s = 0; s < N; s++)
            for (int64_t i = 0; i < ncat; i++) {
                const float want = i < na ? fmaxf(a[s * na + i], 0.0f) : b[s * nb + i - na];
                worst = fmax(worst, fabs(cat[s * ncat + i] - want));
            }
        CHECK_MSG(worst == 0.0, "Concat is off its inputs by %g", worst);
        worst = 0.0;
        for (int64_t i = 0; i < N * nsum; i++) worst = fmax(worst, fabs(sum[i] - (a[i] + c[i])));
        CHECK_MSG(worst < 1e-6, "Add is off the sum by %g", worst);
        worst = 0.0;
        for (int s = 0; s < N * 4; s++)
            for (int y = 0; y < 12; y++)
                for (int xx = 0; xx < 12; xx++)
                    worst = fmax(worst, fabs(up[s * 144 + y * 12 + xx] - a[s * 36 + (y / 2) * 6 + xx / 2]));
        CHECK_MSG(worst == 0.0, "Resize is off repeated pixels by %g", worst);
    }
    free(a), free(b), free(c), free(cat), free(sum), free(up);
    graph_free(&gr);
}

static void test_folds(void)
{
    static const char *const pairs[][2] = {{"conv_p", "a"}, {"apf", "apd"}, {"mpf", "mpd"}, {"mmb", "gemm"}};
    graph gr;
    ops_graph(&gr);
    const float *x = sample_input();
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        int64_t n1 = 0, n2 = 0;
        float *f = outputs(&gr, pairs[i][0], x, &n1), *d = outputs(&gr, pairs[i][1], x, &n2);
        CHECK(f && d && n1 == n2);
        if (f && d && n1 == n2) {
            const double diff = max_diff(f, d, N * n1);
            CHECK_MSG(diff < 1e-6, "%s differs from %s by %g", pairs[i][0], pairs[i][1], diff);
        }
        free(f);
        free(d);
    }
    /* The folded forms hold no Pad or Add layer of their own. */
    brg_import *imp = NULL;
    CHECK_OK(import_as(&gr, "apf", &imp));
    if (imp) {
        const brg_model *m = brg_import_model(imp);
        CHECK(brg_model_layer_count(m) == 2);
        const brg_layer *pool = brg_model_get_layer(m, 1);
        CHECK(pool->desc.kind == BRG_LAYER_AVGPOOL && pool->desc.pad_h == 1 && pool->desc.pad_w == 1 &&
              pool->desc.count_include_pad == 1);
        brg_import_free(imp);
    }
    CHECK_OK(import_as(&gr, "mmb", &imp));
    if (imp) {
        const brg_model *m = brg_import_model(imp);
        const brg_layer *fc = brg_model_get_layer(m, brg_model_layer_count(m) - 1);
        CHECK(fc->desc.kind == BRG_LAYER_LINEAR && fc->desc.bias == 1 && fc->desc.out_channels == 5);
        brg_import_free(imp);
    }
    graph_free(&gr);
}

/* ---- a PyTorch-style ResNet: cut points and names ---- */

static void conv_bn(graph *gr, const char *scope, const char *module, const char *bn, const char *in, const char *out,
                    int cin, int cout)
{
    char name[128], w[128], mid[128], ins[512];
    const int64_t wd[4] = {cout, cin, 3, 3}, c1[1] = {cout};
    snprintf(w, sizeof w, "%s%s.weight", scope, module);
    init_f(gr, w, 4, wd, NULL);
    snprintf(name, sizeof name, "/%s/Conv", module);
    snprintf(mid, sizeof mid, "%s_conv", out);
    snprintf(ins, sizeof ins, "%s,%s", in, w);
    Onnx__NodeProto *n = node(gr, "Conv", name, ins, mid);
    attr_ints(gr, n, "pads", 4, 1, 1, 1, 1);
    static const char *const parts[4] = {"weight", "bias", "running_mean", "running_var"};
    char list[512];
    snprintf(list, sizeof list, "%s", mid);
    for (int k = 0; k < 4; k++) {
        char t[128];
        snprintf(t, sizeof t, "%s%s.%s", scope, bn, parts[k]);
        const float ones[64] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
        init_f(gr, t, 1, c1, k == 3 ? ones : NULL);
        snprintf(list + strlen(list), sizeof list - strlen(list), ",%s", t);
    }
    snprintf(name, sizeof name, "/%s/BatchNormalization", bn);
    node(gr, "BatchNormalization", name, list, out);
}

static void resnet_graph(graph *gr)
{
    graph_init(gr, 17);
    add_input(gr, "x", 4, 3, 8, 8);
    conv_bn(gr, "", "conv1", "bn1", "x", "t2", 3, 4);
    node(gr, "Relu", "/relu/Relu", "t2", "t3");
    Onnx__NodeProto *n = node(gr, "MaxPool", "/maxpool/MaxPool", "t3", "t4");
    attr_ints(gr, n, "kernel_shape", 2, 2, 2);
    attr_ints(gr, n, "strides", 2, 2, 2);
    for (int b = 0; b < 2; b++) {
        char scope[32], in[16], out[16], mid[4][32], name[64], ins[80];
        snprintf(scope, sizeof scope, "layer1.%d.", b);
        snprintf(in, sizeof in, b ? "r%d" : "t4", b);
        snprintf(out, sizeof out, "r%d", b + 1);
        for (int k = 0; k < 4; k++) snprintf(mid[k], sizeof mid[k], "%s_%c", out, 'a' + k);
        conv_bn(gr, scope, "conv1", "bn1", in, mid[0], 4, 4);
        snprintf(name, sizeof name, "/layer1/layer1.%d/relu/Relu", b);
        node(gr, "Relu", name, mid[0], mid[1]);
        conv_bn(gr, scope, "conv2", "bn2", mid[1], mid[2], 4, 4);
        snprintf(name, sizeof name, "/layer1/layer1.%d/Add", b);
        snprintf(ins, sizeof ins, "%s,%s", mid[2], in);
        node(gr, "Add", name, ins, mid[3]);
        snprintf(name, sizeof name, "/layer1/layer1.%d/relu_1/Relu", b);
        node(gr, "Relu", name, mid[3], out);
    }
    node(gr, "GlobalAveragePool", "/avgpool/GlobalAveragePool", "r2", "pooled");
    node(gr, "Flatten", "/Flatten", "pooled", "flat");
    const int64_t fw[2] = {10, 4}, fb[1] = {10};
    init_f(gr, "fc.weight", 2, fw, NULL);
    init_f(gr, "fc.bias", 1, fb, NULL);
    n = node(gr, "Gemm", "/fc/Gemm", "flat,fc.weight,fc.bias", "logits");
    attr_i(gr, n, "transB", 1);
    node(gr, "Softmax", "/Softmax", "logits", "prob");
}

static void test_resnet_blocks(void)
{
    graph gr;
    resnet_graph(&gr);
    brg_import *imp = NULL;
    CHECK_OK(import_as(&gr, "prob", &imp));
    if (!imp) {
        graph_free(&gr);
        return;
    }
    const brg_model *m = brg_import_model(imp);
    static const char *const blocks[] = {"conv1", "maxpool", "layer1.0", "layer1.1", "avgpool", "fc"};
    CHECK_MSG(brg_model_block_count(m) == 6, "%d blocks", brg_model_block_count(m));
    for (int b = 0; b < 6 && b < brg_model_block_count(m); b++)
        CHECK_MSG(strcmp(brg_model_block_name(m, b), blocks[b]) == 0, "block %d is '%s', not '%s'", b,
                  brg_model_block_name(m, b), blocks[b]);
    static const char *const layers[] = {"conv1", "bn1", "relu", "maxpool", "layer1.0.conv1", "layer1.0.bn1",
                                         "layer1.0.relu", "layer1.0.conv2", "layer1.0.bn2", "layer1.0.add",
                                         "layer1.0.relu_1", "avgpool", "fc"};
    for (size_t i = 0; i < sizeof layers / sizeof layers[0]; i++)
        CHECK_MSG(brg_model_find_layer(m, layers[i]) >= 0, "no layer '%s'", layers[i]);
    /* conv (36x3 + 0), bn 4x4 (2 trainable) ... */
    CHECK(brg_model_trainable_params(m) == 108 + 8 + 2 * 2 * (144 + 8) + 40 + 10);
    CHECK(brg_model_frozen_params(m) == 8 + 2 * 2 * 8);
    const brg_model_tensor *o = brg_model_get_tensor(m, brg_model_output(m));
    CHECK(o->c == 10 && o->h == 1 && o->w == 1);
    int dropped = 0;
    for (int i = 0; i < brg_import_note_count(imp); i++) dropped += strstr(brg_import_note(imp, i), "Softmax") != NULL;
    CHECK_MSG(dropped == 1, "no note of the dropped Softmax");
    /* Weights: BatchNorm's from the file, the fc weight as it is (transB). */
    CHECK(brg_import_has_weights(imp));
    const int fc = brg_model_find_layer(m, "fc");
    int seen = 0;
    for (int i = 0; i < brg_import_weight_count(imp); i++) {
        brg_import_weight w;
        CHECK_OK(brg_import_get_weight(imp, i, &w));
        if (w.layer != fc || w.param != 0) continue;
        seen = 1;
        const Onnx__TensorProto *t = NULL;
        for (size_t k = 0; k < gr.g.n_initializer; k++)
            if (strcmp(gr.g.initializer[k]->name, "fc.weight") == 0) t = gr.g.initializer[k];
        CHECK(t && w.count == 40 && strcmp(w.source, "fc.weight") == 0 &&
              memcmp(w.values, t->float_data, 40 * sizeof(float)) == 0);
    }
    CHECK(seen);
    brg_import_free(imp);
    graph_free(&gr);
}

/* ---- weights as graph inputs ---- */

static void test_bind(void)
{
    graph gr;
    graph_init(&gr, 13);
    add_input(&gr, "x", 2, 3);
    const int64_t wd[2] = {3, 2}, bd[1] = {2};
    add_weight_input(&gr, "W", 2, wd);
    add_weight_input(&gr, "B", 1, bd);
    node(&gr, "MatMul", "mm", "x,W", "mm");
    node(&gr, "Add", "bias", "mm,B", "y");
    brg_import *imp = NULL;
    CHECK_OK(import_as(&gr, "y", &imp));
    if (!imp) {
        graph_free(&gr);
        return;
    }
    CHECK(!brg_import_has_weights(imp));
    const float w[6] = {1, 2, 3, 4, 5, 6}; /* [in 3, out 2] */
    const float b[2] = {0.5f, -0.5f};
    CHECK_STATUS(brg_import_bind(imp, "nothing", w, 6), BRG_ERR_INVALID_ARGUMENT);
    CHECK_ERROR_HAS("no weight of the model comes from 'nothing'");
    CHECK_STATUS(brg_import_bind(imp, "W", w, 5), BRG_ERR_INVALID_ARGUMENT);
    const float nan_w[6] = {1, 2, NAN, 4, 5, 6};
    CHECK_STATUS(brg_import_bind(imp, "W", nan_w, 6), BRG_ERR_FORMAT);
    CHECK_ERROR_HAS("weight 'W' holds NaN (value 2 of 6)");
    CHECK(!brg_import_has_weights(imp));
    CHECK_OK(brg_import_bind(imp, "W", w, 6));
    CHECK(!brg_import_has_weights(imp));
    CHECK_OK(brg_import_bind(imp, "B", b, 2));
    CHECK(brg_import_has_weights(imp));
    for (int i = 0; i < brg_import_weight_count(imp); i++) {
        brg_import_weight iw;
        CHECK_OK(brg_import_get_weight(imp, i, &iw));
        if (iw.param != 0) continue;
        /* brigade's [out 2, in 3] */
        const float want[6] = {1, 3, 5, 2, 4, 6};
        CHECK(iw.count == 6 && memcmp(iw.values, want, sizeof want) == 0);
    }
    const float x[3] = {1, -1, 2};
    float y[2] = {0, 0};
    CHECK_OK(import_predict(imp, x, 1, y));
    CHECK_MSG(fabsf(y[0] - (1 - 3 + 10 + 0.5f)) < 1e-5f && fabsf(y[1] - (2 - 4 + 12 - 0.5f)) < 1e-5f, "y = %g %g", y[0],
              y[1]);
    brg_import_free(imp);
    graph_free(&gr);
}

/* One initializer read by two Convs (a module applied twice): two layers,
 * each with the file's values, and a note that training unties them. */
static void test_shared_weight(void)
{
    graph gr;
    graph_init(&gr, 13);
    add_input(&gr, "x", 4, 1, 6, 6);
    const int64_t wd[4] = {1, 1, 3, 3};
    const float w[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    init_f(&gr, "W", 4, wd, w);
    node(&gr, "Conv", "first", "x,W", "a");
    node(&gr, "Relu", "relu", "a", "b");
    node(&gr, "Conv", "again", "b,W", "y");
    brg_import *imp = NULL;
    CHECK_OK(import_as(&gr, "y", &imp));
    if (imp) {
        CHECK(brg_import_weight_count(imp) == 2);
        for (int i = 0; i < brg_import_weight_count(imp); i++) {
            brg_import_weight iw;
            CHECK_OK(brg_import_get_weight(imp, i, &iw));
            CHECK(iw.count == 9 && iw.values && memcmp(iw.values, w, sizeof w) == 0);
        }
        int noted = 0;
        for (int i = 0; i < brg_import_note_count(imp); i++)
            noted += strstr(brg_import_note(imp, i), "weight 'W' is shared by layers 'W' and 'W_2': brigade gives "
                                                     "each its own copy, which training will make differ") != NULL;
        CHECK_MSG(noted == 1, "%d notes of the shared weight", noted);
    }
    brg_import_free(imp);
    graph_free(&gr);
}

/* How many of imp's notes hold words. */
static int notes_with(const brg_import *imp, const char *words)
{
    int n = 0;
    for (int i = 0; i < brg_import_note_count(imp); i++) n += strstr(brg_import_note(imp, i), words) != NULL;
    return n;
}

/* A Conv whose weight the exporter computed ("onnx::Conv_7", or "7" from
 * older PyTorch) in a graph without BatchNormalization: torch.onnx.export's
 * folded BatchNorm, noted with the way to keep it. A parameter's name, or a
 * BatchNormalization in the graph: no note. */
static void test_folded_batchnorm_note(void)
{
    static const struct {
        const char *weight;
        int batchnorm, noted;
    } cases[] = {{"onnx::Conv_7", 0, 1}, {"193", 0, 1}, {"conv1.weight", 0, 0}, {"onnx::Conv_7", 1, 0}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        graph gr;
        graph_init(&gr, 13);
        add_input(&gr, "x", 4, 2, 4, 4);
        const int64_t wd[4] = {2, 2, 3, 3}, cd[1] = {2};
        const float ones[2] = {1, 1}, zeros[2] = {0, 0};
        init_f(&gr, cases[k].weight, 4, wd, NULL);
        char inputs[64];
        snprintf(inputs, sizeof inputs, "x,%s", cases[k].weight);
        node(&gr, "Conv", "conv", inputs, "y");
        if (cases[k].batchnorm) {
            init_f(&gr, "g", 1, cd, ones), init_f(&gr, "b", 1, cd, zeros);
            init_f(&gr, "m", 1, cd, zeros), init_f(&gr, "v", 1, cd, ones);
            node(&gr, "BatchNormalization", "bn", "y,g,b,m,v", "n");
        }
        node(&gr, "Relu", "relu", cases[k].batchnorm ? "n" : "y", "z");
        brg_import *imp = NULL;
        CHECK_OK(import_as(&gr, "z", &imp));
        if (imp) {
            char words[160];
            snprintf(words, sizeof words, "no BatchNormalization, and the convolutions' weights are constants the "
                                          "exporter computed ('%s', not a parameter's name)", cases[k].weight);
            CHECK_MSG(notes_with(imp, words) == cases[k].noted, "weight '%s'%s: %d notes, expected %d",
                      cases[k].weight, cases[k].batchnorm ? " with a BatchNormalization" : "",
                      notes_with(imp, words), cases[k].noted);
            CHECK(notes_with(imp, "export with training=torch.onnx.TrainingMode.PRESERVE and "
                                  "do_constant_folding=False") == cases[k].noted);
        }
        brg_import_free(imp);
        graph_free(&gr);
    }
}

/* ---- bad files ---- */

typedef void (*spoil_fn)(graph *gr);

static void conv_graph(graph *gr, int opset)
{
    graph_init(gr, opset);
    add_input(gr, "x", 4, 1, 4, 4);
    const int64_t wd[4] = {2, 1, 3, 3};
    init_f(gr, "W", 4, wd, NULL);
    node(gr, "Conv", "conv", "x,W", "y");
    node(gr, "Relu", "relu", "y", "z");
}

static void expect_refused(graph *gr, const char *output, brg_status want, const char *words)
{
    brg_import *imp = NULL;
    const brg_status st = import_as(gr, output, &imp);
    CHECK_MSG(st == want, "got %s, expected %s: %s", brg_status_string(st), brg_status_string(want), brg_last_error());
    CHECK_MSG(strstr(brg_last_error(), words) != NULL, "message \"%s\" lacks \"%s\"", brg_last_error(), words);
    brg_import_free(imp);
}

static void test_bad_sizes(void);

static void test_bad_files(void)
{
    graph gr;
    /* Every truncation of a good file, and garbage: clean errors. */
    conv_graph(&gr, 13);
    set_output(&gr, "z");
    size_t len;
    const uint8_t *bytes = pack(&gr, &len);
    int failed_cleanly = 0, cuts = 0;
    for (size_t cut = 0; cut < len; cut++) {
        brg_import *imp = (brg_import *)(uintptr_t)1;
        brg_clear_error();
        const brg_status st = brg_import_onnx_bytes(bytes, cut, "cut.onnx", &imp);
        cuts++;
        if (st != BRG_OK && imp == NULL && brg_last_error()[0]) failed_cleanly++;
        if (st == BRG_OK) brg_import_free(imp);
    }
    CHECK_MSG(failed_cleanly == cuts, "%d of %d truncations failed cleanly", failed_cleanly, cuts);
    brg_import *imp = NULL;
    CHECK_STATUS(brg_import_onnx_bytes("not a model at all, just text", 29, "text.onnx", &imp), BRG_ERR_FORMAT);
    CHECK_ERROR_HAS("text.onnx: not an ONNX model");
    CHECK(imp == NULL);
    graph_free(&gr);

    /* An attribute of the wrong type. */
    conv_graph(&gr, 13);
    attr_f(&gr, gr.g.node[0], "group", 1.0f);
    expect_refused(&gr, "z", BRG_ERR_FORMAT, "attribute 'group' should be INT, is FLOAT");
    graph_free(&gr);

    /* A cycle: relu reads what a later node makes. */
    conv_graph(&gr, 13);
    node(&gr, "Relu", "late", "z", "w");
    gr.g.node[1]->input[0] = "w";
    expect_refused(&gr, "w", BRG_ERR_FORMAT, "a cycle, or nodes out of topological order");
    graph_free(&gr);

    /* A missing initializer. */
    conv_graph(&gr, 13);
    gr.g.n_initializer = 0;
    expect_refused(&gr, "z", BRG_ERR_FORMAT, "reads 'W', which no node, initializer or graph input makes");
    graph_free(&gr);

    /* An op brigade does not import, an unsupported attribute, a group. */
    conv_graph(&gr, 13);
    gr.g.node[1]->op_type = "Sigmoid";
    expect_refused(&gr, "z", BRG_ERR_UNSUPPORTED, "node 'relu' (Sigmoid): an op brigade does not import: "
                   "brigade's one activation is Relu: build the model with ReLU in its place and export it again; "
                   "it imports Conv");
    graph_free(&gr);
    /* Each with what to do instead; one with no advice of its own gets the
     * general one. */
    static const struct {
        const char *op, *advice;
    } remedies[] = {
        {"Mul", "(Mul): an op brigade does not import: brigade adds two computed tensors but has no other "
                "arithmetic: an input normalization ((x - mean) / std) belongs in the data pipeline"},
        {"Transpose", "(Transpose): an op brigade does not import: tf2onnx's graphs of channels-last Keras models "
                      "carry Transposes: import the Keras model itself"},
        {"Clip", "(Clip): an op brigade does not import: ReLU6 and the hard activations (MobileNet) export as these"},
        {"Frobnicate", "(Frobnicate): an op brigade does not import: build the model from the ones below "
                       "(docs/import.md says what each becomes) and export it again; it imports Conv"},
        {"", "(): an op brigade does not import: build the model from the ones below"},
        {"Mu", "(Mu): an op brigade does not import: build the model from the ones below"}, /* not Mul's */
    };
    for (size_t i = 0; i < sizeof remedies / sizeof remedies[0]; i++) {
        conv_graph(&gr, 13);
        gr.g.node[1]->op_type = (char *)remedies[i].op;
        expect_refused(&gr, "z", BRG_ERR_UNSUPPORTED, remedies[i].advice);
        graph_free(&gr);
    }
    conv_graph(&gr, 13);
    attr_i(&gr, gr.g.node[0], "group", 2);
    expect_refused(&gr, "z", BRG_ERR_UNSUPPORTED, "node 'conv' (Conv): attribute 'group' = 2");
    graph_free(&gr);
    conv_graph(&gr, 13);
    attr_s(&gr, gr.g.node[1], "fancy", "yes");
    expect_refused(&gr, "z", BRG_ERR_UNSUPPORTED, "attribute 'fancy' is not one brigade translates");
    graph_free(&gr);

    /* External data, a too-new opset, a second data input, a bad weight. */
    conv_graph(&gr, 13);
    gr.g.initializer[0]->has_data_location = 1;
    gr.g.initializer[0]->data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    expect_refused(&gr, "z", BRG_ERR_UNSUPPORTED, "external data");
    graph_free(&gr);
    conv_graph(&gr, 22);
    expect_refused(&gr, "z", BRG_ERR_UNSUPPORTED, "opset 22");
    graph_free(&gr);
    conv_graph(&gr, 13);
    add_input(&gr, "x2", 4, 2, 2, 2);
    node(&gr, "Add", "two", "z,x2", "s");
    expect_refused(&gr, "s", BRG_ERR_UNSUPPORTED, "brigade models have one input (here 'x')");
    graph_free(&gr);
    conv_graph(&gr, 13);
    gr.g.initializer[0]->n_float_data = 5;
    expect_refused(&gr, "z", BRG_ERR_FORMAT, "tensor 'W' of 18 FLOAT values holds 5");
    graph_free(&gr);
    conv_graph(&gr, 13);
    gr.g.initializer[0]->dims[1] = 2;
    gr.g.initializer[0]->dims[0] = 1;
    expect_refused(&gr, "z", BRG_ERR_FORMAT, "weight 'W' is [1, 2, 3, 3]; its place needs [1, 1, 3, 3]");
    graph_free(&gr);
    /* A tensor declared larger than any file (no values needed to say so),
     * or with a negative size: the dims are named. */
    conv_graph(&gr, 13);
    gr.g.initializer[0]->dims[0] = (int64_t)1 << 40;
    expect_refused(&gr, "z", BRG_ERR_FORMAT, "tensor 'W' is [1099511627776, 1, 3, 3]: more than 2^40 values");
    graph_free(&gr);
    conv_graph(&gr, 13);
    gr.g.initializer[0]->dims[2] = -3;
    expect_refused(&gr, "z", BRG_ERR_FORMAT, "tensor 'W' is [2, 1, -3, 3]: a dimension is negative");
    graph_free(&gr);
    /* An input beyond brigade's sizes: the file's fault, said with its
     * name (it was BRG_ERR_INVALID_ARGUMENT, a command line's exit 2). */
    graph_init(&gr, 13);
    add_input(&gr, "x", 4, 1, 1 << 21, 4);
    node(&gr, "Relu", "relu", "x", "z");
    expect_refused(&gr, "z", BRG_ERR_UNSUPPORTED,
                   "test.onnx: input 'x': the input is 1x2097152x4 (CxHxW): brigade's inputs have at most 16777216 "
                   "channels and 1048576 rows and columns");
    graph_free(&gr);
    /* A final Softmax over another axis than the classes' (1) is not the
     * softmax brigade trains with; before opset 13, axis 1 of an image
     * spans its height and width too. */
    conv_graph(&gr, 13);
    attr_i(&gr, node(&gr, "Softmax", "sm", "z", "p"), "axis", -1);
    expect_refused(&gr, "p", BRG_ERR_UNSUPPORTED, "node 'sm' (Softmax): a Softmax over axis 3 of a rank-4 tensor");
    graph_free(&gr);
    conv_graph(&gr, 11);
    attr_i(&gr, node(&gr, "Softmax", "sm", "z", "p"), "axis", 1);
    expect_refused(&gr, "p", BRG_ERR_UNSUPPORTED,
                   "axis 1 of a rank-4 tensor (before opset 13, over all axes from 1 on)");
    graph_free(&gr);
    conv_graph(&gr, 13);
    attr_i(&gr, node(&gr, "Softmax", "sm", "z", "p"), "axis", 1);
    imp = NULL;
    CHECK_OK(import_as(&gr, "p", &imp));
    CHECK(imp && brg_import_note_count(imp) == 1 && strstr(brg_import_note(imp, 0), "dropped the final Softmax 'sm'"));
    brg_import_free(imp);
    graph_free(&gr);
    /* Weights that are not numbers, or not float32 ones: training from
     * them would diverge at its first step. */
    conv_graph(&gr, 13);
    gr.g.initializer[0]->float_data[7] = INFINITY;
    expect_refused(&gr, "z", BRG_ERR_FORMAT, "node 'conv': weight 'W' holds an infinity (value 7 of 18)");
    graph_free(&gr);
    conv_graph(&gr, 13);
    gr.g.initializer[0]->float_data[17] = NAN;
    expect_refused(&gr, "z", BRG_ERR_FORMAT, "weight 'W' holds NaN (value 17 of 18)");
    graph_free(&gr);
    conv_graph(&gr, 13);
    {
        Onnx__TensorProto *t = gr.g.initializer[0];
        t->data_type = ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE;
        t->double_data = own(&gr, calloc(18, sizeof *t->double_data));
        t->n_double_data = 18;
        t->n_float_data = 0;
        for (int i = 0; i < 18; i++) t->double_data[i] = 0.25 * i;
        t->double_data[3] = 1e300; /* beyond float32 */
    }
    expect_refused(&gr, "z", BRG_ERR_FORMAT, "weight 'W' holds an infinity (value 3 of 18)");
    graph_free(&gr);
    test_bad_sizes();
}

/* Sizes that once overflowed or divided by zero (found by fuzzing and
 * review): each a clean refusal, or, for SAME after a folded Pad, the
 * shape ONNX means. */
static void test_bad_sizes(void)
{
    graph gr;
    conv_graph(&gr, 13); /* stride 0 with SAME padding */
    attr_s(&gr, gr.g.node[0], "auto_pad", "SAME_UPPER");
    attr_ints(&gr, gr.g.node[0], "strides", 2, 0, 0);
    expect_refused(&gr, "z", BRG_ERR_FORMAT, "stride 0");
    graph_free(&gr);
    conv_graph(&gr, 13); /* and in a MaxPool with ceil_mode */
    Onnx__NodeProto *n = node(&gr, "MaxPool", "pool", "z", "p");
    attr_ints(&gr, n, "kernel_shape", 2, 2, 2);
    attr_ints(&gr, n, "strides", 2, 0, 0);
    attr_i(&gr, n, "ceil_mode", 1);
    expect_refused(&gr, "p", BRG_ERR_FORMAT, "stride 0");
    graph_free(&gr);
    conv_graph(&gr, 13); /* a Reshape whose product overflows int64 */
    const int64_t huge[4] = {1, (int64_t)1 << 40, (int64_t)1 << 40, -1};
    init_i64(&gr, "shape", 4, huge);
    node(&gr, "Reshape", "reshape", "z,shape", "r");
    expect_refused(&gr, "r", BRG_ERR_UNSUPPORTED, "brigade reshapes only to [batch, features]");
    graph_free(&gr);
    graph_init(&gr, 13); /* 2^25 output channels, from a graph-input weight (no values to allocate) */
    add_input(&gr, "x", 4, 1, 4, 4);
    const int64_t wide[4] = {(int64_t)1 << 25, 1, 3, 3};
    add_weight_input(&gr, "W", 4, wide);
    node(&gr, "Conv", "conv", "x,W", "y");
    expect_refused(&gr, "y", BRG_ERR_UNSUPPORTED, "33554432 output channels");
    graph_free(&gr);
    graph_init(&gr, 13); /* and 2^25 outputs of a Gemm */
    add_input(&gr, "x", 2, 3);
    const int64_t tall[2] = {(int64_t)1 << 25, 3};
    add_weight_input(&gr, "W", 2, tall);
    n = node(&gr, "Gemm", "fc", "x,W", "y");
    attr_i(&gr, n, "transB", 1);
    expect_refused(&gr, "y", BRG_ERR_UNSUPPORTED, "33554432 outputs");
    graph_free(&gr);

    /* Pad (1 before) then a 3x3 stride-2 SAME_UPPER Conv on 5x5: SAME pads the
     * 6x6 the Pad made, 0 before and 1 after, so 1 on each side in all and
     * a 3x3 output; on a 4x4 input (5x5 padded) the sides differ: refused. */
    for (int side = 5; side >= 4; side--) {
        graph_init(&gr, 13);
        add_input(&gr, "x", 4, 1, side, side);
        const int64_t wd[4] = {2, 1, 3, 3}, pads[8] = {0, 0, 1, 1, 0, 0, 0, 0};
        init_f(&gr, "W", 4, wd, NULL);
        init_i64(&gr, "pads", 8, pads);
        node(&gr, "Pad", "pad", "x,pads", "px");
        n = node(&gr, "Conv", "conv", "px,W", "y");
        attr_s(&gr, n, "auto_pad", "SAME_UPPER");
        attr_ints(&gr, n, "strides", 2, 2, 2);
        if (side == 4) {
            expect_refused(&gr, "y", BRG_ERR_UNSUPPORTED, "padding 2 before and 1 after");
        } else {
            brg_import *imp = NULL;
            CHECK_OK(import_as(&gr, "y", &imp));
            if (imp) {
                const brg_model *m = brg_import_model(imp);
                const brg_model_tensor *y = brg_model_get_tensor(m, brg_model_output(m));
                CHECK_MSG(y->c == 2 && y->h == 3 && y->w == 3, "output [%lld, %lld, %lld]", (long long)y->c,
                          (long long)y->h, (long long)y->w);
                CHECK(brg_model_get_layer(m, 0)->desc.pad_h == 1);
                brg_import_free(imp);
            }
        }
        graph_free(&gr);
    }
}

/* Graphs for others to read: "resnet" (the command-line tests' model: a
 * small PyTorch-style ResNet for 3x8x8 inputs with 10 classes and a final
 * Softmax), "ops" (the ops and folds graph, output Concat) and "conv" (the
 * bad-file tests' start), the seeds of the ONNX fuzz target. */
static int write_fixture(const char *path, const char *which)
{
    graph gr;
    if (strcmp(which, "resnet") == 0) {
        resnet_graph(&gr);
        set_output(&gr, "prob");
    } else if (strcmp(which, "ops") == 0) {
        ops_graph(&gr);
        set_output(&gr, "cat");
    } else if (strcmp(which, "conv") == 0) {
        conv_graph(&gr, 13);
        set_output(&gr, "z");
    } else {
        fprintf(stderr, "usage: test_import --write-fixture FILE [resnet|ops|conv]\n");
        return 2;
    }
    size_t len;
    const uint8_t *bytes = pack(&gr, &len);
    FILE *f = fopen(path, "wb");
    int ok = f && fwrite(bytes, 1, len, f) == len;
    if (f && fclose(f) != 0) ok = 0;
    graph_free(&gr);
    if (!ok) fprintf(stderr, "cannot write %s\n", path);
    return ok ? 0 : 1;
}
#endif /* BRG_HAVE_ONNX */

int main(int argc, char **argv)
{
#ifndef BRG_HAVE_ONNX
    (void)argc, (void)argv;
    printf("SKIP: built without the ONNX importer\n");
    return 77;
#else
    if ((argc == 3 || argc == 4) && strcmp(argv[1], "--write-fixture") == 0)
        return write_fixture(argv[2], argc == 4 ? argv[3] : "resnet");
    test_ops_by_meaning();
    test_folds();
    test_resnet_blocks();
    test_bind();
    test_shared_weight();
    test_folded_batchnorm_note();
    test_bad_files();
    TEST_EXIT();
#endif
}
