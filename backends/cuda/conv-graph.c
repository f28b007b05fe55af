/* The CUDA backend's convolutions on cuDNN's graph (backend) API, opt-in
 * with BRG_CUDA_CONV_API=graph (read when a device is made; docs/cuda.md).
 *
 * Why: the legacy API (conv.c) reaches cuDNN's kernels through eight
 * algorithm numbers a kind; the graph API ranks engines (and their knob
 * settings) that those numbers do not reach, which is what PyTorch runs.
 * This is the plain C of it, cudnnBackend* calls only (no cudnn-frontend).
 *
 * For each shape (conv_key), beta (op->accumulate; a filter gradient that
 * accumulates runs with beta 0 into a scratch output, added after) and
 * the byte alignment of x, w and y: tensor descriptors (NCHW, packed, float), a convolution
 * descriptor (2-D cross-correlation, the op's pads and strides, dilation
 * 1, float compute), the operation of the kind, an operation graph; then
 * the engine configs of cuDNN's heuristics (CUDNN_HEUR_MODE_A, and the
 * fallback list when none of those qualifies), in order. A config
 * qualifies when its engine carries none of the numerical notes we do not
 * accept (tensor-core math unless TF32 is allowed, inputs converted down,
 * reductions in reduced precision: we promise FP32 FMA results, as conv.c
 * does with CUDNN_FMA_MATH), its execution plan finalizes, and the plan's
 * workspace fits the one the op was lent. The first that qualifies is
 * taken; with BRG_CUDA_CONV_ALGO=measure, when the op may be timed
 * (brg_cuda_conv_may_measure: the output is written by the timing, so
 * only an op that overwrites it, or a filter gradient timed into a scratch
 * output at the front of its workspace), up to GRAPH_MEASURE_MAX that
 * qualify are timed with CUDA events on the op's own buffers and the
 * fastest is kept. The plan is cached for the device's life and run with a
 * variant pack of the op's pointers and its workspace.
 *
 * Fallback: when anything fails before a kernel is launched (a descriptor
 * cuDNN refuses, no engine that qualifies, an execution refused while
 * checking its arguments: brg_conv_retryable), the shape is remembered as
 * failed, one line on stderr says which and cuDNN's message, and the
 * legacy path runs it, now and on every later call. A failure after
 * launching is an error, as in conv.c.
 *
 * Not yet run on a GPU (written without one, 2026-12): the attribute types
 * follow cuDNN's backend documentation and cudnn_graph.h of cuDNN 9.19.
 */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cuda/cuda-exec.h" /* first: the cuDNN and CUDA headers the others test for */
#include "backends/cuda/conv-algo.h"
#include "backends/cuda/cuda-check.h"
#include "base/internal.h"

/* The unique ids of the three tensors in a graph and its variant packs. */
enum { UID_X = 'x', UID_W = 'w', UID_Y = 'y' };

/* At most this many configs that qualify are timed (measure), each once to
 * warm up and GRAPH_MEASURE_RUNS times on the clock. */
#define GRAPH_MEASURE_MAX 8
#define GRAPH_MEASURE_RUNS 3
/* At most this many engine configs are taken from one heuristics query. */
#define GRAPH_CONFIGS_MAX 64

/* Where building or running a plan stopped without launching anything:
 * what was being done, cuDNN's status and its own message, read at once. */
typedef struct graph_fail {
    const char *what;
    cudnnStatus_t st;
    char detail[256]; /* cuDNN's (cudnnGetLastErrorString) */
    char note[192];   /* ours: how the engine configs fared */
} graph_fail;

static void graph_fail_set(graph_fail *f, const char *what, cudnnStatus_t st)
{
    f->what = what;
    f->st = st;
    f->detail[0] = '\0';
    cudnnGetLastErrorString(f->detail, sizeof f->detail);
    /* cuDNN's text spans lines (warnings, then the reason); ours is one. */
    for (char *c = f->detail; *c; c++)
        if ((unsigned char)*c < ' ') *c = ' ';
}

/* cuDNN keeps the message of its last failure until it is read, even
 * across calls that succeed, and clears it when read: a failure whose
 * message is not kept must still be read, or the next error anywhere
 * (a legacy convolution's, say) would report it as its own. */
static void drain_cudnn_message(void)
{
    char sink[256];
    cudnnGetLastErrorString(sink, sizeof sink);
}

/* f's first failure is kept; later ones' messages are drained. */
static void graph_fail_note(graph_fail *f, const char *what, cudnnStatus_t st)
{
    if (f->what)
        drain_cudnn_message();
    else
        graph_fail_set(f, what, st);
}

/* cudnnBackendDestroyDescriptor that accepts NULL. */
static void destroy_desc(cudnnBackendDescriptor_t d)
{
    if (d) cudnnBackendDestroyDescriptor(d);
}

/* The largest power of two up to 16 that divides p: the byte alignment a
 * tensor descriptor may promise for it (PyTorch's rule). */
static int byte_alignment(const void *p)
{
    const uintptr_t a = (uintptr_t)p;
    int align = 1;
    while (align < 16 && a % (uintptr_t)(2 * align) == 0) align *= 2;
    return align;
}

/* A finalized NCHW float tensor descriptor of dims, packed. */
static cudnnStatus_t make_tensor(int64_t uid, int n, int c, int h, int w, int align, cudnnBackendDescriptor_t *out)
{
    const int64_t dims[4] = {n, c, h, w};
    const int64_t strides[4] = {(int64_t)c * h * w, (int64_t)h * w, w, 1};
    const int64_t alignment = align;
    const cudnnDataType_t type = CUDNN_DATA_FLOAT;
    cudnnBackendDescriptor_t d = NULL;
    cudnnStatus_t st = cudnnBackendCreateDescriptor(CUDNN_BACKEND_TENSOR_DESCRIPTOR, &d);
    if (!st) st = cudnnBackendSetAttribute(d, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type);
    if (!st) st = cudnnBackendSetAttribute(d, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims);
    if (!st) st = cudnnBackendSetAttribute(d, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides);
    if (!st) st = cudnnBackendSetAttribute(d, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
    if (!st) st = cudnnBackendSetAttribute(d, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &alignment);
    if (!st) st = cudnnBackendFinalize(d);
    if (st) {
        destroy_desc(d);
        d = NULL;
    }
    *out = d;
    return st;
}

/* A finalized 2-D cross-correlation of key's pads and strides, dilation 1,
 * computed in float. */
static cudnnStatus_t make_conv(const conv_key *k, cudnnBackendDescriptor_t *out)
{
    const int64_t dims = 2, pads[2] = {k->ph, k->pw}, strides[2] = {k->sh, k->sw}, dilations[2] = {1, 1};
    const cudnnDataType_t compute = CUDNN_DATA_FLOAT;
    const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
    cudnnBackendDescriptor_t d = NULL;
    cudnnStatus_t st = cudnnBackendCreateDescriptor(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR, &d);
    if (!st) st = cudnnBackendSetAttribute(d, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &dims);
    if (!st) st = cudnnBackendSetAttribute(d, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &compute);
    if (!st) st = cudnnBackendSetAttribute(d, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode);
    if (!st) st = cudnnBackendSetAttribute(d, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 2, pads);
    if (!st) st = cudnnBackendSetAttribute(d, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 2, pads);
    if (!st) st = cudnnBackendSetAttribute(d, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 2, dilations);
    if (!st) st = cudnnBackendSetAttribute(d, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 2, strides);
    if (!st) st = cudnnBackendFinalize(d);
    if (st) {
        destroy_desc(d);
        d = NULL;
    }
    *out = d;
    return st;
}

/* The attribute names of one operation kind's descriptor. */
typedef struct graph_op_attrs {
    cudnnBackendDescriptorType_t type;
    cudnnBackendAttributeName_t x, w, y, conv, alpha, beta;
} graph_op_attrs;

static graph_op_attrs op_attrs(brg_op_kind kind)
{
    switch (kind) {
    case BRG_OP_CONV2D_FORWARD:
        return (graph_op_attrs){CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR,
                                CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X,
                                CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W,
                                CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y,
                                CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC,
                                CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA,
                                CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA};
    case BRG_OP_CONV2D_BACKWARD_DATA:
        return (graph_op_attrs){CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR,
                                CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX,
                                CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W,
                                CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY,
                                CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC,
                                CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA,
                                CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA};
    default:
        return (graph_op_attrs){CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR,
                                CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X,
                                CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW,
                                CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY,
                                CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC,
                                CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA,
                                CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA};
    }
}

/* Set a handle attribute that cuDNN 9.8 and later no longer require
 * (CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_ATTR_EXECUTION_PLAN_HANDLE,
 * deprecated in 9.19's headers): required before 9.8, so a refusal there
 * is a failure; from 9.8 on it is ignored. */
static cudnnStatus_t set_handle(cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t name, cudnnHandle_t h)
{
    const cudnnStatus_t st = cudnnBackendSetAttribute(d, name, CUDNN_TYPE_HANDLE, 1, &h);
    if (!st || cudnnGetVersion() < 90800) return st;
    drain_cudnn_message();
    return CUDNN_STATUS_SUCCESS;
}

/* An operation graph and the descriptors it was made of. They are all
 * destroyed together once the plans are finalized (graph_parts_destroy):
 * a finalized plan and its engine config then stand alone, as PyTorch's
 * cached plans outlive their graphs. */
typedef struct graph_parts {
    cudnnBackendDescriptor_t x, w, y, conv, op, graph;
} graph_parts;

static void graph_parts_destroy(graph_parts *g)
{
    destroy_desc(g->graph);
    destroy_desc(g->op);
    destroy_desc(g->conv);
    destroy_desc(g->y);
    destroy_desc(g->w);
    destroy_desc(g->x);
    memset(g, 0, sizeof *g);
}

/* The finalized operation graph of op's kind for key on handle, with
 * beta 1 when accumulate, the tensors promising align bytes, in g->graph
 * (NULL on failure, f saying where; the parts made so far are in g). */
static cudnnStatus_t make_graph(cudnnHandle_t handle, const conv_key *k, int accumulate, const int *align,
                                graph_parts *g, graph_fail *f)
{
    const graph_op_attrs a = op_attrs((brg_op_kind)k->kind);
    const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
    cudnnStatus_t st;
    memset(g, 0, sizeof *g);
    if ((st = make_tensor(UID_X, k->n, k->c, k->h, k->w, align[0], &g->x))) {
        graph_fail_set(f, "the x tensor descriptor", st);
        return st;
    }
    if ((st = make_tensor(UID_W, k->k, k->c, k->r, k->s, align[1], &g->w))) {
        graph_fail_set(f, "the w tensor descriptor", st);
        return st;
    }
    if ((st = make_tensor(UID_Y, k->n, k->k, k->p, k->q, align[2], &g->y))) {
        graph_fail_set(f, "the y tensor descriptor", st);
        return st;
    }
    if ((st = make_conv(k, &g->conv))) {
        graph_fail_set(f, "the convolution descriptor", st);
        return st;
    }
    st = cudnnBackendCreateDescriptor(a.type, &g->op);
    if (!st) st = cudnnBackendSetAttribute(g->op, a.x, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &g->x);
    if (!st) st = cudnnBackendSetAttribute(g->op, a.w, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &g->w);
    if (!st) st = cudnnBackendSetAttribute(g->op, a.y, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &g->y);
    if (!st) st = cudnnBackendSetAttribute(g->op, a.conv, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &g->conv);
    if (!st) st = cudnnBackendSetAttribute(g->op, a.alpha, CUDNN_TYPE_FLOAT, 1, &alpha);
    if (!st) st = cudnnBackendSetAttribute(g->op, a.beta, CUDNN_TYPE_FLOAT, 1, &beta);
    if (!st) st = cudnnBackendFinalize(g->op);
    if (st) {
        graph_fail_set(f, "the convolution operation", st);
        return st;
    }
    cudnnBackendDescriptor_t graph = NULL;
    st = cudnnBackendCreateDescriptor(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, &graph);
    if (!st)
        st = cudnnBackendSetAttribute(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &g->op);
    if (!st) st = set_handle(graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, handle);
    if (!st) st = cudnnBackendFinalize(graph);
    if (st) {
        graph_fail_set(f, "the operation graph", st);
        destroy_desc(graph);
        graph = NULL;
    }
    g->graph = graph;
    return st;
}

cudnnStatus_t brg_cuda_conv_graph_describe(cudnnHandle_t handle, const conv_key *key, int accumulate,
                                           const int align[3], char *why, size_t size)
{
    graph_parts g;
    graph_fail f;
    memset(&f, 0, sizeof f);
    const cudnnStatus_t st = make_graph(handle, key, accumulate, align, &g, &f);
    graph_parts_destroy(&g);
    if (why && size) snprintf(why, size, "%s%s%s", st ? f.what : "", st ? ": " : "", st ? f.detail : "");
    return st;
}

/* The engine configs cuDNN's heuristics of mode rank for graph, best
 * first, at most max, in cfgs (each to be destroyed by the caller). */
static cudnnStatus_t heuristics(cudnnBackendDescriptor_t graph, cudnnBackendHeurMode_t mode,
                                cudnnBackendDescriptor_t *cfgs, int max, int *count)
{
    cudnnBackendDescriptor_t heur = NULL;
    int64_t n = 0, got = 0;
    int made = 0;
    *count = 0;
    cudnnStatus_t st = cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, &heur);
    if (!st) st = cudnnBackendSetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                           1, &graph);
    if (!st) st = cudnnBackendSetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
    if (!st) st = cudnnBackendFinalize(heur);
    /* How many it has: a query for none. */
    if (!st)
        st = cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &n, NULL);
    if (!st && n > max) n = max;
    /* The results are copied into descriptors we create. */
    for (; !st && made < n; made++) {
        cfgs[made] = NULL;
        st = cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, &cfgs[made]);
    }
    if (!st && n > 0)
        st = cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, n, &got,
                                      cfgs);
    if (!st && got < n) n = got;
    destroy_desc(heur);
    for (int i = st ? 0 : (int)n; i < made; i++) {
        destroy_desc(cfgs[i]);
        cfgs[i] = NULL;
    }
    *count = st ? 0 : (int)n;
    return st;
}

/* The engine of cfg: its global index and its numerical notes (bit n:
 * cudnnBackendNumericalNote_t n). */
static cudnnStatus_t engine_of(cudnnBackendDescriptor_t cfg, int64_t *index, unsigned *notes)
{
    cudnnBackendDescriptor_t engine = NULL;
    cudnnBackendNumericalNote_t list[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
    int64_t n = 0, got = 0;
    *index = -1;
    *notes = 0;
    cudnnStatus_t st = cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINE_DESCRIPTOR, &engine);
    if (!st) st = cudnnBackendGetAttribute(cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &got,
                                           &engine);
    if (!st) st = cudnnBackendGetAttribute(engine, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &got, index);
    if (!st)
        st = cudnnBackendGetAttribute(engine, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                                      CUDNN_NUMERICAL_NOTE_TYPE_COUNT, &n, list);
    for (int64_t i = 0; !st && i < n && i < CUDNN_NUMERICAL_NOTE_TYPE_COUNT; i++)
        if ((int)list[i] >= 0 && (int)list[i] < 32) *notes |= 1u << (int)list[i];
    destroy_desc(engine);
    return st;
}

/* The notes that keep an engine out: results that would not be the FP32
 * FMA results we promise (conv.c: tensor-core math unless TF32 is
 * allowed; inputs converted to a narrower type or sums kept in one,
 * never). */
static unsigned refused_notes(const brg_cuda_exec *e)
{
    unsigned out = 1u << CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS;
    out |= 1u << CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION;
    if (!e->allow_tf32) out |= 1u << CUDNN_NUMERICAL_NOTE_TENSOR_CORE;
    return out;
}

/* The finalized execution plan of cfg on e's handle, and its workspace. */
static cudnnStatus_t make_plan(brg_cuda_exec *e, cudnnBackendDescriptor_t cfg, cudnnBackendDescriptor_t *out,
                               int64_t *workspace)
{
    cudnnBackendDescriptor_t plan = NULL;
    int64_t got = 0;
    *workspace = 0;
    cudnnStatus_t st = cudnnBackendCreateDescriptor(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, &plan);
    if (!st) st = cudnnBackendSetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                           1, &cfg);
    if (!st) st = set_handle(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, e->cudnn);
    if (!st) st = cudnnBackendFinalize(plan);
    if (!st)
        st = cudnnBackendGetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &got,
                                      workspace);
    if (!st && *workspace < 0) st = CUDNN_STATUS_BAD_PARAM;
    if (st) {
        destroy_desc(plan);
        plan = NULL;
    }
    *out = plan;
    return st;
}

/* Run plan once on x, w, y and the workspace ws (NULL when it needs none).
 * *launched says whether cudnnBackendExecute was reached: a failure before
 * it (building the variant pack) launched nothing. */
static cudnnStatus_t graph_execute(brg_cuda_exec *e, cudnnBackendDescriptor_t plan, void *x, void *w, void *y,
                                   void *ws, int *launched)
{
    const int64_t uids[3] = {UID_X, UID_W, UID_Y};
    void *ptrs[3] = {x, w, y};
    cudnnBackendDescriptor_t pack = NULL;
    *launched = 0;
    cudnnStatus_t st = cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &pack);
    if (!st) st = cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, 3, uids);
    if (!st) st = cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, 3, ptrs);
    if (!st) st = cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws);
    if (!st) st = cudnnBackendFinalize(pack);
    if (!st) {
        *launched = 1;
        st = cudnnBackendExecute(e->cudnn, plan, pack);
    }
    destroy_desc(pack);
    return st;
}

/* The data pointers of op as the graph's x, w and y. */
static void op_pointers(const brg_op *op, void **x, void **w, void **y)
{
    const brg_tensor *tx, *tw, *ty;
    brg_cuda_conv_tensors(op, &tx, &tw, &ty);
    *x = tx->data, *w = tw->data, *y = ty->data;
}


/* The names of the numerical notes in notes, for the log. */
static const char *notes_text(unsigned notes, char *buf, size_t size)
{
    static const char *const names[] = {"tensor core", "down-convert inputs", "reduced-precision reduction", "FFT",
                                        "nondeterministic", "Winograd", "Winograd 4x4", "Winograd 6x6",
                                        "Winograd 13x13", "strict NaN propagation"};
    size_t used = 0;
    buf[0] = '\0';
    for (unsigned i = 0; i < 32 && used < size; i++) {
        if (!(notes >> i & 1u)) continue;
        if (i < sizeof names / sizeof names[0])
            used += (size_t)snprintf(buf + used, size - used, "%s%s", used ? ", " : "", names[i]);
        else
            used += (size_t)snprintf(buf + used, size - used, "%snote %u", used ? ", " : "", i);
    }
    if (!buf[0]) snprintf(buf, size, "none");
    return buf;
}

/* One line on stderr: the graph API cannot run this shape, and why; the
 * legacy API runs it. Always printed, once a shape (the entry remembers). */
static void log_fallback(const brg_cuda_exec *e, const conv_key *k, const graph_fail *f)
{
    char shape[96];
    fprintf(stderr, "brigade: %s: %s %s: cuDNN's graph API failed at %s: %s%s%s (%s); the legacy API runs this "
            "shape\n", e->name, brg_op_kind_name((brg_op_kind)k->kind),
            brg_cuda_conv_shape_text(k, shape, sizeof shape), f->what, f->note,
            f->note[0] && f->detail[0] ? "; cuDNN's last message: " : "",
            f->detail[0] || f->note[0] ? f->detail : "cuDNN gave no message", cudnnGetErrorString(f->st));
}

/* How the configs of one pick fared, for the log and the fallback's line. */
typedef struct graph_tally {
    int ranked; /* configs looked at (distinct engines of the fallback list) */
    int by_notes, refused, too_big, qualified;
    int64_t smallest_too_big;
    float best_ms;
    char times[256]; /* measured: "engine ms" of each one timed */
} graph_tally;

/* BRG_CUDA_CONV_LOG=1: the pick for a shape, as conv.c's lines: the
 * engine, how it was picked, its notes, what it needs of the workspace,
 * and how the other configs fared. */
static void log_pick(const brg_cuda_exec *e, const conv_graph_plan *p, size_t limit, const graph_tally *t)
{
    char shape[96], notes[160], b1[32], b2[32], b3[32], timed[48] = "", least[64] = "";
    if (p->measured) snprintf(timed, sizeof timed, ", %.3f ms", (double)t->best_ms);
    if (t->too_big)
        snprintf(least, sizeof least, " (the least wants %s)",
                 brg_format_bytes((size_t)t->smallest_too_big, b3, sizeof b3));
    fprintf(stderr,
            "brigade: %s: %s %s: cuDNN graph engine %lld (%s%s; notes: %s), %s of the %s workspace; of %d configs "
            "looked at, %d qualified, %d refused by their notes, %d failed to finalize, %d over the workspace%s%s%s\n",
            e->name, brg_op_kind_name((brg_op_kind)p->key.kind), brg_cuda_conv_shape_text(&p->key, shape, sizeof shape),
            (long long)p->engine, p->measured ? "measured" : "heuristics", timed,
            notes_text(p->notes, notes, sizeof notes), brg_format_bytes((size_t)p->workspace, b1, sizeof b1),
            brg_format_bytes(limit, b2, sizeof b2), t->ranked, t->qualified, t->by_notes, t->refused, t->too_big,
            least, t->times[0] ? "; timed: " : "", t->times);
}

/* A qualifying candidate: its plan, config, engine and notes. */
typedef struct graph_candidate {
    cudnnBackendDescriptor_t plan, cfg;
    int64_t engine, workspace;
    unsigned notes;
    float ms;
} graph_candidate;

static void drop_candidates(graph_candidate *c, int n)
{
    for (int i = 0; i < n; i++) {
        destroy_desc(c[i].plan);
        destroy_desc(c[i].cfg);
        c[i].plan = c[i].cfg = NULL;
    }
}

/* Time candidate c on op's buffers: once to warm up, then
 * GRAPH_MEASURE_RUNS times between two events; the mean in c->ms. The
 * output is written: op's own (it overwrites it) or, when scratch > 0, the
 * workspace's front, the plan's workspace after it. *usable = 0 when cuDNN
 * refused to run it before launching (it is passed over). Errors: CUDA
 * errors, and a failure after launching. */
static brg_status time_candidate(brg_cuda_exec *e, const brg_op *op, size_t scratch, graph_candidate *c,
                                 int *usable)
{
    void *x, *w, *y;
    op_pointers(op, &x, &w, &y);
    void *ws = brg_cuda_conv_after_scratch(op, scratch);
    if (scratch) w = op->workspace; /* only a filter gradient takes one: its dw is the graph's w */
    cudaEvent_t start = NULL, stop = NULL;
    brg_status ret = BRG_OK;
    int launched = 0;
    float ms = 0.0f;
    *usable = 0;
    BRG_CUDA_CHECK_GOTO(cudaEventCreate(&start), ret, done);
    BRG_CUDA_CHECK_GOTO(cudaEventCreate(&stop), ret, done);
    for (int run = 0; run <= GRAPH_MEASURE_RUNS; run++) {
        if (run == 1) BRG_CUDA_CHECK_GOTO(cudaEventRecord(start, e->stream), ret, done);
        const cudnnStatus_t st = graph_execute(e, c->plan, x, w, y, ws, &launched);
        if (st) {
            if (run == 0 && (!launched || brg_conv_retryable(st, (int)cudaPeekAtLastError()))) {
                drain_cudnn_message(); /* passed over, not an error */
                goto done;
            }
            ret = brg_cudnn_fail("cudnnBackendExecute", st, __FILE__, __LINE__);
            goto done;
        }
    }
    BRG_CUDA_CHECK_GOTO(cudaEventRecord(stop, e->stream), ret, done);
    BRG_CUDA_CHECK_GOTO(cudaEventSynchronize(stop), ret, done);
    BRG_CUDA_CHECK_GOTO(cudaEventElapsedTime(&ms, start, stop), ret, done);
    c->ms = ms / GRAPH_MEASURE_RUNS;
    *usable = 1;
done:
    if (stop) cudaEventDestroy(stop);
    if (start) cudaEventDestroy(start);
    return ret;
}

/* Pick the plan for entry p's shape, beta and alignment: the first config
 * of the heuristics (mode A, then the fallback list if none of A's
 * qualifies) that qualifies, or, when measure_op is given, the fastest of
 * the first GRAPH_MEASURE_MAX that qualify, timed on its buffers with a
 * scratch of scratch bytes (whose workspace must then fit limit less the
 * scratch). Fills p's plan, cfg, engine, workspace, notes and measured;
 * p->plan stays NULL when nothing qualifies or the graph fails to build
 * (f says why). Errors only from timing (time_candidate). */
static brg_status graph_pick(brg_cuda_exec *e, conv_graph_plan *p, size_t limit, const brg_op *measure_op,
                             size_t scratch, graph_fail *f, graph_tally *t)
{
    static const cudnnBackendHeurMode_t modes[] = {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK};
    const size_t fits = limit - scratch; /* the scratch output, if any, is in front */
    const int want = measure_op ? GRAPH_MEASURE_MAX : 1;
    const unsigned refused = refused_notes(e);
    graph_parts g;
    cudnnBackendDescriptor_t cfgs[GRAPH_CONFIGS_MAX];
    graph_candidate cand[GRAPH_MEASURE_MAX];
    int64_t seen[GRAPH_CONFIGS_MAX];
    int n_cand = 0, n_seen = 0;
    brg_status ret = BRG_OK;
    memset(t, 0, sizeof *t);
    memset(f, 0, sizeof *f);
    p->plan = p->cfg = NULL;
    /* A filter gradient that accumulates runs with beta 0 into a scratch
     * output and is added after (brg_cuda_conv_graph_run): beta 1 only for
     * a data gradient. */
    const int beta_one = p->accumulate && p->key.kind != BRG_OP_CONV2D_BACKWARD_FILTER;
    if (make_graph(e->cudnn, &p->key, beta_one, p->align, &g, f)) {
        graph_parts_destroy(&g);
        return BRG_OK;
    }
    for (size_t m = 0; m < sizeof modes / sizeof modes[0] && n_cand == 0; m++) {
        int count = 0;
        const cudnnStatus_t st = heuristics(g.graph, modes[m], cfgs, GRAPH_CONFIGS_MAX, &count);
        if (st) {
            graph_fail_note(f, m == 0 ? "cuDNN's heuristics (mode A)" : "cuDNN's fallback list", st);
            continue;
        }
        for (int i = 0; i < count; i++) {
            graph_candidate c = {.cfg = cfgs[i]};
            cfgs[i] = NULL;
            if (n_cand == want) { /* enough: the rest are not looked at */
                destroy_desc(c.cfg);
                continue;
            }
            int dup = 0;
            cudnnStatus_t cs = engine_of(c.cfg, &c.engine, &c.notes);
            /* The fallback list repeats engines mode A offered: those its
             * notes refused, or that qualified, are not looked at twice;
             * one that failed to finalize or fit may come back with other
             * knobs. */
            for (int s = 0; !cs && m > 0 && s < n_seen && !dup; s++) dup = seen[s] == c.engine;
            const int by_notes = !cs && !dup && (c.notes & refused);
            if (by_notes && n_seen < GRAPH_CONFIGS_MAX) seen[n_seen++] = c.engine;
            if (!dup) t->ranked++;
            if (cs || dup || by_notes) {
                if (by_notes) t->by_notes++;
                if (cs) graph_fail_note(f, "reading an engine's notes", cs);
                destroy_desc(c.cfg);
                continue;
            }
            cs = make_plan(e, c.cfg, &c.plan, &c.workspace);
            if (cs) {
                t->refused++;
                graph_fail_note(f, "finalizing an execution plan", cs);
                destroy_desc(c.cfg);
                continue;
            }
            if ((uint64_t)c.workspace > fits) {
                if (!t->too_big || c.workspace < t->smallest_too_big) t->smallest_too_big = c.workspace;
                t->too_big++;
                destroy_desc(c.plan);
                destroy_desc(c.cfg);
                continue;
            }
            t->qualified++;
            if (n_seen < GRAPH_CONFIGS_MAX) seen[n_seen++] = c.engine;
            cand[n_cand++] = c;
        }
    }
    graph_parts_destroy(&g);
    if (n_cand == 0) {
        /* cuDNN's first refusal (a heuristics query, a plan) stays in st and detail. */
        if (!f->what) f->st = CUDNN_STATUS_NOT_SUPPORTED;
        f->what = "picking an engine";
        snprintf(f->note, sizeof f->note,
                 "none of %d engine configs qualifies (%d refused by their numerical notes, %d failed to finalize, "
                 "%d want more than the %zu-byte workspace)",
                 t->ranked, t->by_notes, t->refused, t->too_big, fits);
        return BRG_OK;
    }
    int best = 0;
    if (measure_op) {
        int timed = 0;
        for (int i = 0; i < n_cand; i++) {
            int usable = 0;
            ret = time_candidate(e, measure_op, scratch, &cand[i], &usable);
            if (ret != BRG_OK) {
                drop_candidates(cand, n_cand);
                return brg_error_context(ret, "%s: timing cuDNN graph engine %lld", e->name,
                                         (long long)cand[i].engine);
            }
            const size_t used = strlen(t->times);
            if (!usable) {
                snprintf(t->times + used, sizeof t->times - used, "%s%lld refused", used ? ", " : "",
                         (long long)cand[i].engine);
                continue;
            }
            snprintf(t->times + used, sizeof t->times - used, "%s%lld %.3f ms", used ? ", " : "",
                     (long long)cand[i].engine, (double)cand[i].ms);
            if (!timed++ || cand[i].ms < cand[best].ms) best = i;
        }
        if (!timed) { /* every one refused to run: nothing was launched */
            drop_candidates(cand, n_cand);
            f->what = "running the engines to time them";
            f->st = CUDNN_STATUS_NOT_SUPPORTED;
            f->detail[0] = '\0';
            snprintf(f->note, sizeof f->note, "cuDNN refused to run each of the %d that qualified", n_cand);
            return BRG_OK;
        }
        t->best_ms = cand[best].ms;
    }
    p->plan = cand[best].plan;
    p->cfg = cand[best].cfg;
    p->engine = cand[best].engine;
    p->workspace = cand[best].workspace;
    p->notes = cand[best].notes;
    p->measured = measure_op != NULL;
    cand[best].plan = cand[best].cfg = NULL;
    drop_candidates(cand, n_cand);
    return BRG_OK;
}

/* The entry for key, beta and alignment, or NULL. */
static conv_graph_plan *graph_find(brg_cuda_exec *e, const conv_key *key, int accumulate, const int *align)
{
    for (int i = 0; i < e->graph_used; i++) {
        conv_graph_plan *p = &e->graph[i];
        if (p->accumulate == accumulate && memcmp(p->align, align, sizeof p->align) == 0 &&
            memcmp(&p->key, key, sizeof *key) == 0)
            return p;
    }
    return NULL;
}

/* A new entry at the end of the cache (host memory errors). */
static brg_status graph_add(brg_cuda_exec *e, const conv_graph_plan *p, conv_graph_plan **out)
{
    if (e->graph_used == e->graph_cap) {
        const int cap = e->graph_cap ? 2 * e->graph_cap : 64;
        conv_graph_plan *grown = realloc(e->graph, (size_t)cap * sizeof *grown);
        if (!grown) return brg_error(BRG_ERR_HOST_MEMORY, "%s: out of host memory for the convolution plans", e->name);
        e->graph = grown;
        e->graph_cap = cap;
    }
    *out = &e->graph[e->graph_used++];
    **out = *p;
    return BRG_OK;
}

/* Mark entry p as failed: its plan destroyed, the legacy API runs the
 * shape from now on; the line on stderr says why. */
static void graph_give_up(brg_cuda_exec *e, conv_graph_plan *p, const graph_fail *f)
{
    destroy_desc(p->plan);
    destroy_desc(p->cfg);
    p->plan = p->cfg = NULL;
    log_fallback(e, &p->key, f);
}

brg_status brg_cuda_conv_graph_run(brg_cuda_exec *e, const brg_op *op, const conv_key *key, size_t limit, int *ran)
{
    *ran = 0;
    if (!e->conv_graph) return BRG_OK;
    void *x, *w, *y;
    op_pointers(op, &x, &w, &y);
    const int accumulate = op->kind != BRG_OP_CONV2D_FORWARD && op->accumulate;
    /* A filter gradient that accumulates (every one in training) runs with
     * beta 0 into a scratch dw at the front of its workspace, added to dw
     * after: the path PyTorch takes, and the engines it exercises (beta 1
     * is rarely asked of the graph API); dw is small. Without room for it,
     * the legacy path. */
    const size_t scratch = brg_cuda_conv_find_scratch(op);
    if (scratch && (!op->workspace || limit <= scratch)) return BRG_OK;
    void *const dw = w;
    if (scratch) w = op->workspace;
    const int align[3] = {byte_alignment(x), byte_alignment(w), byte_alignment(y)};
    const int measure = brg_cuda_conv_may_measure(e, op, limit);
    conv_graph_plan *p = graph_find(e, key, accumulate, align);
    graph_fail f;
    graph_tally t;
    if (!p) {
        conv_graph_plan fresh = {.key = *key, .accumulate = accumulate, .engine = -1};
        memcpy(fresh.align, align, sizeof fresh.align);
        BRG_CHECK(graph_pick(e, &fresh, limit, measure ? op : NULL, scratch, &f, &t));
        const brg_status added = graph_add(e, &fresh, &p);
        if (added != BRG_OK) {
            destroy_desc(fresh.plan);
            destroy_desc(fresh.cfg);
            return added;
        }
        if (!p->plan) {
            log_fallback(e, key, &f);
            return BRG_OK;
        }
        if (e->log_convs) log_pick(e, p, limit, &t);
    } else if (p->plan && measure && !p->measured && !p->measure_tried) {
        /* A heuristic pick is timed over at the shape's first call that may
         * be timed, as conv.c's; once: if nothing could be timed, the
         * heuristics' pick stays. */
        conv_graph_plan again = *p;
        p->measure_tried = 1;
        BRG_CHECK(graph_pick(e, &again, limit, op, scratch, &f, &t));
        if (again.plan) {
            destroy_desc(p->plan);
            destroy_desc(p->cfg);
            *p = again;
            if (e->log_convs) log_pick(e, p, limit, &t);
        }
    }
    if (!p->plan) return BRG_OK; /* the graph failed for this shape before: legacy */
    int launched = 0;
    const cudnnStatus_t st = graph_execute(e, p->plan, x, w, y, brg_cuda_conv_after_scratch(op, scratch), &launched);
    if (st == CUDNN_STATUS_SUCCESS) {
        if (scratch)
            BRG_CUDA_CHECK(
                brg_cuda_copy_or_add(e->stream, (float *)dw, (const float *)w, brg_tensor_numel(op->out[0]), 1));
        *ran = 1;
        return BRG_OK;
    }
    /* cuDNN's message read once, now, for the fallback's line or the error. */
    memset(&f, 0, sizeof f);
    graph_fail_set(&f, launched ? "running the plan" : "building the variant pack", st);
    if (!launched || brg_conv_retryable(st, (int)cudaPeekAtLastError())) {
        graph_give_up(e, p, &f);
        return BRG_OK;
    }
    const brg_status ret = brg_cudnn_fail_detail("cudnnBackendExecute", st, f.detail, __FILE__, __LINE__);
    char shape[96];
    return brg_error_context(ret,
                             "%s on %s: %s -> y[%d, %d, %d, %d] with a %zu-byte workspace, cuDNN graph engine %lld",
                             brg_op_kind_name(op->kind), e->name,
                             brg_cuda_conv_shape_text(key, shape, sizeof shape), key->n, key->k, key->p, key->q,
                             limit, (long long)p->engine);
}

void brg_cuda_conv_graph_release(brg_cuda_exec *e)
{
    for (int i = 0; i < e->graph_used; i++) {
        destroy_desc(e->graph[i].plan);
        destroy_desc(e->graph[i].cfg);
    }
    free(e->graph);
    e->graph = NULL;
    e->graph_used = e->graph_cap = 0;
}
