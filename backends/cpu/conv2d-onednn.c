/* 2-D convolution on the CPU through oneDNN (2.x C API), the default where
 * brigade is built with it; conv2d.c's im2col + OpenBLAS is the fallback,
 * and the choice at run time (BRG_CPU_CONV=onednn|im2col).
 *
 * oneDNN is fastest on its blocked layouts (nChw8c on AVX2). Each primitive
 * is created with "any" layouts; an argument whose tensor has another
 * layout (plain NCHW/OIHW, or channel-blocked by another block) goes
 * through a buffer in op->workspace and a reorder. A stage keeps the
 * activations between its layers blocked (brigade/tensor.h), and those
 * need no reorder. An output of a backward kind that accumulates
 * (op->accumulate) always goes through the buffer, the reorder back adding
 * it on (a sum post-op). The workspace has room for every argument that
 * either layout would stage, so it depends on the shape alone, whichever
 * layout the tensors come in. The scratchpad is in user mode and sits at
 * the start of the workspace: everything oneDNN touches comes from the
 * device's arena, so plans stay exact.
 *
 * A shape's descriptors (which give the workspace) are made on the first
 * query and its primitives and reorders on the first run, and both are kept
 * for the process (a lock-protected list): creating them costs
 * milliseconds. A shape oneDNN cannot do has no entry that is ok, and both
 * the workspace and the kernel then take im2col, so the two always agree.
 * A large batch runs in pieces of images (below).
 *
 * Threads: oneDNN runs on OpenMP. Each call sets the calling thread's
 * OpenMP count to OpenBLAS's, which brg_cpu_threads_share divides among the
 * devices computing at once, so the two never oversubscribe the cores.
 */
#include "config.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cpu-kernels.h"

#ifdef BRG_HAVE_ONEDNN
#include <dnnl.h>

#include "gemm.h"


#define ALIGN 64
#define MAX_ARGS 4

/* An argument's tensor in one layout: plain, or blocked by oneDNN's block. */
typedef struct arg_layout {
    dnnl_memory_desc_t user;      /* the tensor's layout */
    int direct;                   /* the primitive's layout: no buffer unless accumulating */
    dnnl_primitive_t reorder;     /* user -> chosen (inputs), chosen -> user (outputs) */
    dnnl_primitive_t reorder_sum; /* chosen -> user + user (outputs of the backward kinds) */
} arg_layout;

/* One argument of a primitive that lives in a brigade tensor. */
typedef struct conv_arg {
    int dnnl_arg;              /* DNNL_ARG_* */
    int is_output;
    int index;                 /* op->in[index] or op->out[index] */
    int n_layouts;             /* 2 for image tensors whose channels oneDNN's block divides */
    arg_layout as[2];          /* [0] plain (NCHW, OIHW or x), [1] blocked */
    dnnl_memory_desc_t chosen; /* the primitive's */
    int staged;                /* some layout goes through the workspace at offset */
    size_t offset;
} conv_arg;

/* Everything to run one op kind of one shape. */
typedef struct conv_step {
    dnnl_primitive_t prim;
    int n_args;
    conv_arg args[MAX_ARGS];
    size_t scratch_bytes; /* the largest scratchpad of the primitive and its reorders, at offset 0 */
    size_t workspace;
} conv_step;

/* A shape's step for one op kind and thread count: its workspace, and
 * the primitives once an op of that shape has run. */
typedef struct conv_entry {
    struct conv_entry *next;
    brg_op_kind kind;
    int64_t key[12];
    int threads;          /* OpenMP threads at creation: oneDNN's kernels keep the count */
    int ok;               /* 0: oneDNN cannot; im2col runs it (set at creation, never changed) */
    int built;            /* the primitives exist (step.prim) */
    int build_failed;     /* making them failed: runs report it, the workspace stays */
    size_t workspace;     /* set at creation, never changed: read without the lock */
    conv_step step;       /* written only under the lock, and only until built */
} conv_entry;

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static conv_entry *cache;
static dnnl_engine_t engine;

static size_t align_up(size_t n) { return (n + ALIGN - 1) & ~(size_t)(ALIGN - 1); }

static int key_of(const brg_op *op, int64_t key[12])
{
    const brg_tensor *x = brg_cpu_conv_x(op);
    const brg_tensor *w = op->kind == BRG_OP_CONV2D_BACKWARD_FILTER ? op->out[0] : op->in[1];
    const int bias = op->kind == BRG_OP_CONV2D_FORWARD           ? op->n_in > 2
                     : op->kind == BRG_OP_CONV2D_BACKWARD_FILTER ? op->n_out > 1
                                                                 : 0;
    const int64_t k[12] = {x->shape[0], x->shape[1], x->shape[2],         x->shape[3],         w->shape[0],
                           w->shape[2], w->shape[3], op->p.conv.stride_h, op->p.conv.stride_w, op->p.conv.pad_h,
                           op->p.conv.pad_w, bias};
    memcpy(key, k, sizeof k);
    return bias;
}

static dnnl_status_t plain(dnnl_memory_desc_t *md, int ndims, const int64_t *dims)
{
    dnnl_dims_t d;
    for (int i = 0; i < ndims; i++) d[i] = dims[i];
    return dnnl_memory_desc_init_by_tag(md, ndims, d, dnnl_f32, ndims == 4 ? dnnl_abcd : dnnl_a);
}

/* [n, c, h, w] blocked by b channels (aBcd8b is nChw8c). */
static dnnl_status_t blocked(dnnl_memory_desc_t *md, const int64_t *dims, int b)
{
    const dnnl_dims_t d = {dims[0], dims[1], dims[2], dims[3]};
    return dnnl_memory_desc_init_by_tag(md, 4, d, dnnl_f32, b == 16 ? dnnl_aBcd16b : dnnl_aBcd8b);
}

/* [n, c, h, w] with the channels innermost (nhwc). */
static dnnl_status_t nhwc(dnnl_memory_desc_t *md, const int64_t *dims)
{
    const dnnl_dims_t d = {dims[0], dims[1], dims[2], dims[3]};
    return dnnl_memory_desc_init_by_tag(md, 4, d, dnnl_f32, dnnl_acdb);
}

static dnnl_status_t any(dnnl_memory_desc_t *md, int ndims, const int64_t *dims)
{
    dnnl_dims_t d;
    for (int i = 0; i < ndims; i++) d[i] = dims[i];
    return dnnl_memory_desc_init_by_tag(md, ndims, d, dnnl_f32, dnnl_format_tag_any);
}

static dnnl_status_t user_mode_attr(dnnl_primitive_attr_t *attr, int sum)
{
    dnnl_status_t s = dnnl_primitive_attr_create(attr);
    if (s == dnnl_success) s = dnnl_primitive_attr_set_scratchpad_mode(*attr, dnnl_scratchpad_mode_user);
    if (s == dnnl_success && sum) {
        dnnl_post_ops_t po;
        s = dnnl_post_ops_create(&po);
        if (s == dnnl_success) {
            s = dnnl_post_ops_append_sum(po, 1.0f);
            if (s == dnnl_success) s = dnnl_primitive_attr_set_post_ops(*attr, po);
            dnnl_post_ops_destroy(po);
        }
    }
    return s;
}

static size_t scratch_of(const_dnnl_primitive_desc_t pd)
{
    const dnnl_memory_desc_t *md = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    return md ? dnnl_memory_desc_get_size(md) : 0;
}

/* A reorder from `from` to `to` (adding onto `to` with sum) into *out, or
 * only its size where out is NULL; its scratchpad raises *scratch. */
static dnnl_status_t make_reorder(const dnnl_memory_desc_t *from, const dnnl_memory_desc_t *to, int sum,
                                  dnnl_primitive_t *out, size_t *scratch)
{
    dnnl_primitive_attr_t attr;
    dnnl_status_t s = user_mode_attr(&attr, sum);
    if (s != dnnl_success) return s;
    dnnl_primitive_desc_t pd = NULL;
    s = dnnl_reorder_primitive_desc_create(&pd, from, engine, to, engine, attr);
    dnnl_primitive_attr_destroy(attr);
    if (s != dnnl_success) return s;
    const size_t need = scratch_of(pd);
    if (need > *scratch) *scratch = need;
    if (out) s = dnnl_primitive_create(out, pd);
    dnnl_primitive_desc_destroy(pd);
    return s;
}

/* Fill the step's arguments from the primitive descriptor: the chosen
 * layouts, what is staged where, and the reorders from and to each layout;
 * the primitives only with build (creating them generates code:
 * milliseconds, and memory a planner trying thousands of shapes should not
 * keep). */
static dnnl_status_t finish_step(conv_step *st, const_dnnl_primitive_desc_t pd, int backward, int build)
{
    /* oneDNN's own im2col + GEMM is no faster than conv2d.c's and pays the
     * reorders on top (a 3x3 on 2x2 images measured 3x slower), and its
     * reference loops are far slower (a one-channel weight gradient took
     * 71 ms where conv2d.c's took 2.8): decline. */
    const char *impl = NULL;
    if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) != dnnl_success || !impl ||
        strstr(impl, "gemm") || strncmp(impl, "ref", 3) == 0)
        return dnnl_unimplemented;
    st->scratch_bytes = scratch_of(pd);
    dnnl_status_t s = build ? dnnl_primitive_create(&st->prim, pd) : dnnl_success;
    for (int i = 0; i < st->n_args && s == dnnl_success; i++) {
        conv_arg *a = &st->args[i];
        const dnnl_memory_desc_t *md = dnnl_primitive_desc_query_md(pd, dnnl_query_exec_arg_md, a->dnnl_arg);
        if (!md) return dnnl_invalid_arguments;
        a->chosen = *md;
        for (int v = 0; v < a->n_layouts && s == dnnl_success; v++) {
            arg_layout *l = &a->as[v];
            l->direct = dnnl_memory_desc_equal(&a->chosen, &l->user);
            const int sum = a->is_output && backward;
            a->staged |= !l->direct || sum;
            if (!l->direct)
                s = a->is_output
                        ? make_reorder(&a->chosen, &l->user, 0, build ? &l->reorder : NULL, &st->scratch_bytes)
                        : make_reorder(&l->user, &a->chosen, 0, build ? &l->reorder : NULL, &st->scratch_bytes);
            if (s == dnnl_success && sum)
                s = make_reorder(&a->chosen, &l->user, 1, build ? &l->reorder_sum : NULL, &st->scratch_bytes);
        }
    }
    if (s != dnnl_success) return s;
    size_t at = align_up(st->scratch_bytes);
    for (int i = 0; i < st->n_args; i++) {
        conv_arg *a = &st->args[i];
        if (!a->staged) continue;
        a->offset = at;
        at += align_up(dnnl_memory_desc_get_size(&a->chosen));
    }
    st->workspace = at;
    return dnnl_success;
}

/* An argument in its plain layout, and blocked where bl is given (image
 * tensors whose channels the block divides). */
static void add_arg(conv_step *st, int dnnl_arg, int is_output, int index, const dnnl_memory_desc_t *user,
                    const dnnl_memory_desc_t *bl)
{
    conv_arg *a = &st->args[st->n_args++];
    memset(a, 0, sizeof *a);
    a->dnnl_arg = dnnl_arg;
    a->is_output = is_output;
    a->index = index;
    a->as[0].user = *user;
    a->n_layouts = 1;
    if (bl) a->as[a->n_layouts++].user = *bl;
}

/* Create the step of an op of this shape (the cache lock held); with
 * channels_last, the weight gradient's x and dy in nhwc. */
static dnnl_status_t create_step_as(brg_op_kind kind, const int64_t *k, conv_step *st, int build, int channels_last)
{
    const int64_t n = k[0], c = k[1], h = k[2], w = k[3], kk = k[4], r = k[5], s_ = k[6];
    const int64_t p = brg_conv_out_extent(h, (int)r, (int)k[7], (int)k[9]);
    const int64_t q = brg_conv_out_extent(w, (int)s_, (int)k[8], (int)k[10]);
    const int bias = (int)k[11];
    const int64_t xd[4] = {n, c, h, w}, wd[4] = {kk, c, r, s_}, yd[4] = {n, kk, p, q}, bd[1] = {kk};
    dnnl_memory_desc_t ux, uw, uy, ub, ax, aw, ay, ab, bx, by;
    const int b = brg_cpu_onednn_block();
    const dnnl_memory_desc_t *px = NULL, *py = NULL; /* the blocked layouts, where the block divides */
    dnnl_status_t s = dnnl_success;
    if (b && c % b == 0) s = blocked(&bx, xd, b), px = &bx;
    if (s == dnnl_success && b && kk % b == 0) s = blocked(&by, yd, b), py = &by;
    if (s == dnnl_success) s = plain(&ux, 4, xd);
    if (s == dnnl_success) s = plain(&uw, 4, wd);
    if (s == dnnl_success) s = plain(&uy, 4, yd);
    if (s == dnnl_success) s = plain(&ub, 1, bd);
    if (s == dnnl_success) s = any(&ax, 4, xd);
    if (s == dnnl_success) s = any(&aw, 4, wd);
    if (s == dnnl_success) s = any(&ay, 4, yd);
    if (s == dnnl_success) s = any(&ab, 1, bd);
    if (s == dnnl_success && channels_last) s = nhwc(&ax, xd);
    if (s == dnnl_success && channels_last) s = nhwc(&ay, yd);
    if (s != dnnl_success) return s;
    const dnnl_dims_t strides = {k[7], k[8]}, pad = {k[9], k[10]};

    /* The forward descriptor: the primitive itself, or the backward kinds' hint. */
    dnnl_convolution_desc_t fd;
    s = dnnl_convolution_forward_desc_init(&fd, dnnl_forward_training, dnnl_convolution_direct, &ax, &aw,
                                           kind == BRG_OP_CONV2D_BACKWARD_DATA ? NULL : (bias ? &ab : NULL), &ay,
                                           strides, pad, pad);
    dnnl_primitive_attr_t attr = NULL;
    if (s == dnnl_success) s = user_mode_attr(&attr, 0);
    dnnl_primitive_desc_t fpd = NULL, pd = NULL;
    if (s == dnnl_success) s = dnnl_primitive_desc_create(&fpd, &fd, attr, engine, NULL);
    if (s == dnnl_success && kind == BRG_OP_CONV2D_FORWARD) {
        add_arg(st, DNNL_ARG_SRC, 0, 0, &ux, px);
        add_arg(st, DNNL_ARG_WEIGHTS, 0, 1, &uw, NULL);
        if (bias) add_arg(st, DNNL_ARG_BIAS, 0, 2, &ub, NULL);
        add_arg(st, DNNL_ARG_DST, 1, 0, &uy, py);
        s = finish_step(st, fpd, 0, build);
    } else if (s == dnnl_success && kind == BRG_OP_CONV2D_BACKWARD_DATA) {
        dnnl_convolution_desc_t bd_;
        s = dnnl_convolution_backward_data_desc_init(&bd_, dnnl_convolution_direct, &ax, &aw, &ay, strides, pad, pad);
        if (s == dnnl_success) s = dnnl_primitive_desc_create(&pd, &bd_, attr, engine, fpd);
        add_arg(st, DNNL_ARG_DIFF_DST, 0, 0, &uy, py);
        add_arg(st, DNNL_ARG_WEIGHTS, 0, 1, &uw, NULL);
        add_arg(st, DNNL_ARG_DIFF_SRC, 1, 0, &ux, px);
        if (s == dnnl_success) s = finish_step(st, pd, 1, build);
    } else if (s == dnnl_success) {
        dnnl_convolution_desc_t wd_;
        s = dnnl_convolution_backward_weights_desc_init(&wd_, dnnl_convolution_direct, &ax, &aw, bias ? &ab : NULL,
                                                        &ay, strides, pad, pad);
        if (s == dnnl_success) s = dnnl_primitive_desc_create(&pd, &wd_, attr, engine, fpd);
        add_arg(st, DNNL_ARG_SRC, 0, 0, &ux, px);
        add_arg(st, DNNL_ARG_DIFF_DST, 0, 1, &uy, py);
        add_arg(st, DNNL_ARG_DIFF_WEIGHTS, 1, 0, &uw, NULL);
        if (bias) add_arg(st, DNNL_ARG_DIFF_BIAS, 1, 1, &ub, NULL);
        if (s == dnnl_success) s = finish_step(st, pd, 1, build);
    }
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (fpd) dnnl_primitive_desc_destroy(fpd);
    if (attr) dnnl_primitive_attr_destroy(attr);
    return s;
}

static void step_free(conv_step *st)
{
    if (st->prim) dnnl_primitive_destroy(st->prim);
    for (int i = 0; i < st->n_args; i++)
        for (int v = 0; v < st->args[i].n_layouts; v++) {
            if (st->args[i].as[v].reorder) dnnl_primitive_destroy(st->args[i].as[v].reorder);
            if (st->args[i].as[v].reorder_sum) dnnl_primitive_destroy(st->args[i].as[v].reorder_sum);
        }
    memset(st, 0, sizeof *st);
}

/* Create the step of an op of this shape (the cache lock held). The
 * weight gradient of a one-channel input (grey images) is asked of
 * oneDNN's nhwc kernels first: left to choose, oneDNN pads the channel to
 * a whole block there, eight times the work (fmnist-cnn's first layer
 * took 3.0 ms at micro-batches of 64; in nhwc 0.56, and 1.1-1.3 with the
 * reorders of x and dy). */
static dnnl_status_t create_step(brg_op_kind kind, const int64_t *k, conv_step *st, int build)
{
    if (kind == BRG_OP_CONV2D_BACKWARD_FILTER && k[1] == 1) {
        if (create_step_as(kind, k, st, build, 1) == dnnl_success) return dnnl_success;
        step_free(st);
    }
    return create_step_as(kind, k, st, build, 0);
}

/* The entry of (kind, key, threads), created on first use and built when
 * asked: the planner asks for the workspace of thousands of shapes, and
 * only descriptors are made for those (creating primitives generates code:
 * milliseconds, and memory). NULL where oneDNN cannot run the shape (or
 * cannot start): im2col then does. oneDNN's convolutions fix their thread
 * count when created, so each count a device runs with has its own. */
static const conv_entry *entry_for(brg_op_kind kind, const int64_t key[12], int threads, int build)
{
    brg_cpu_onednn_block(); /* probed outside the lock, which the probe takes */
    pthread_mutex_lock(&cache_lock);
    conv_entry *e = cache;
    while (e && (e->kind != kind || e->threads != threads || memcmp(e->key, key, sizeof e->key) != 0)) e = e->next;
    if (!e && (engine || dnnl_engine_create(&engine, dnnl_cpu, 0) == dnnl_success)) {
        e = calloc(1, sizeof *e);
        if (e) {
            e->kind = kind;
            e->threads = threads;
            memcpy(e->key, key, sizeof e->key);
            omp_set_num_threads(threads);
            e->ok = create_step(kind, key, &e->step, 0) == dnnl_success; /* descriptors only: nothing to free */
            e->workspace = e->step.workspace;
            e->next = cache;
            cache = e;
        }
    }
    if (e && e->ok && build && !e->built && !e->build_failed) {
        conv_step built;
        memset(&built, 0, sizeof built);
        omp_set_num_threads(threads);
        e->built = create_step(kind, key, &built, 1) == dnnl_success && built.workspace == e->workspace;
        if (e->built) e->step = built;
        else step_free(&built);
        e->build_failed = !e->built;
    }
    /* What the planner asked for stays the answer whatever a run met:
     * the workspace is a function of the shape alone. */
    const conv_entry *found = e && e->ok && (!build || e->built) ? e : NULL;
    pthread_mutex_unlock(&cache_lock);
    return found;
}

/* ---- pieces of the batch ----
 *
 * The staged copies (inputs in oneDNN's layouts, outputs before their
 * reorder back) are as large as the tensors: for a whole batch of large
 * images they outgrow the cache between the reorder that writes them and
 * the convolution that reads them, and take the arena's memory (63 MiB for
 * Inception's stem at batch 8 against im2col's 16). So an op runs in
 * pieces of whole images whose staged copies stay near PIECE_BYTES: the
 * same arithmetic per image (the backward-weights pieces add into the
 * weight gradient one after another), a workspace of one piece. */
#define PIECE_BYTES ((size_t)8 << 20)

typedef struct pieces {
    int64_t n;       /* images in every piece but the last */
    int64_t last;    /* images in the last */
    int64_t count;
} pieces;

static size_t piece_bytes(void) { return brg_cpu_env_bytes("BRG_ONEDNN_PIECE_BYTES", PIECE_BYTES); }

/* Near-equal pieces of a batch of key[0] images: two shapes at most,
 * whatever the op kind (the bytes per image are those of x and y). */
static pieces pieces_of(const int64_t key[12])
{
    const int64_t n = key[0], c = key[1], h = key[2], w = key[3], k = key[4];
    const int64_t p = brg_conv_out_extent(h, (int)key[5], (int)key[7], (int)key[9]);
    const int64_t q = brg_conv_out_extent(w, (int)key[6], (int)key[8], (int)key[10]);
    const size_t per_image = (size_t)(c * h * w + k * p * q) * sizeof(float);
    int64_t fit = (int64_t)(piece_bytes() / (per_image ? per_image : 1));
    if (fit > n) fit = n;
    if (fit < 1) fit = 1; /* an empty batch too: one empty piece */
    pieces ps;
    ps.count = n > 0 ? (n + fit - 1) / fit : 1;
    ps.n = (n + ps.count - 1) / ps.count;
    ps.last = n - (ps.count - 1) * ps.n;
    return ps;
}

/* Whether one image of x and of y has fewer than 2^31 elements: oneDNN
 * counts inside an image in int in places (a 1x262144x262144 image
 * divided by zero inside dnnl_primitive_desc_create, and `brigade plan`
 * died of SIGFPE). Larger ones are left to im2col. */
static int images_fit_onednn(const brg_op *op)
{
    const brg_tensor *t[2] = {brg_cpu_conv_x(op), brg_cpu_conv_y(op)};
    for (int i = 0; i < 2; i++) {
        int64_t image = 1;
        for (int d = 1; d < 4; d++) {
            if (t[i]->shape[d] > INT32_MAX / image) return 0;
            image *= t[i]->shape[d];
        }
    }
    return 1;
}

/* The entries of op's pieces (the last only where its shape differs),
 * built when asked; 0 where oneDNN cannot run one of them. */
static int piece_entries(const brg_op *op, int threads, int build, pieces *ps, const conv_entry *e[2])
{
    if (!images_fit_onednn(op)) return 0;
    int64_t key[12];
    key_of(op, key);
    *ps = pieces_of(key);
    key[0] = ps->n;
    e[0] = entry_for(op->kind, key, threads, build);
    key[0] = ps->last;
    e[1] = ps->last == ps->n ? e[0] : entry_for(op->kind, key, threads, build);
    return e[0] && e[1];
}

static size_t pieces_workspace(const conv_entry *const e[2])
{
    return e[0]->workspace > e[1]->workspace ? e[0]->workspace : e[1]->workspace;
}

/* The workspace of op whatever share of the cores its device gets: the
 * larger of one thread's and all threads' (oneDNN's per-thread scratch
 * grows with the count), so that the plan, made before the devices divide
 * the cores, and every run agree. 0 where either count leaves op to im2col,
 * which then runs it at every count. */
int brg_cpu_onednn_conv2d_workspace(const brg_op *op, size_t *bytes)
{
    pieces ps;
    const conv_entry *one[2], *all[2];
    if (!piece_entries(op, 1, 0, &ps, one) || !piece_entries(op, brg_cpu_all_threads(), 0, &ps, all)) return 0;
    const size_t a = pieces_workspace(one), b = pieces_workspace(all);
    *bytes = a > b ? a : b;
    return 1;
}

/* The block of oneDNN's convolutions on this machine: the layout it picks
 * for the source of a 64-channel 3x3 convolution. */
static int onednn_block;
static pthread_once_t block_once = PTHREAD_ONCE_INIT;

static void probe_block(void)
{
    const int64_t xd[4] = {1, 64, 16, 16}, wd[4] = {64, 64, 3, 3};
    dnnl_memory_desc_t ax, aw, ay;
    dnnl_convolution_desc_t fd;
    dnnl_primitive_desc_t pd = NULL;
    const dnnl_dims_t strides = {1, 1}, pad = {1, 1};
    pthread_mutex_lock(&cache_lock);
    const int have_engine = engine || dnnl_engine_create(&engine, dnnl_cpu, 0) == dnnl_success;
    pthread_mutex_unlock(&cache_lock);
    if (!have_engine || any(&ax, 4, xd) != dnnl_success || any(&aw, 4, wd) != dnnl_success ||
        any(&ay, 4, xd) != dnnl_success ||
        dnnl_convolution_forward_desc_init(&fd, dnnl_forward_training, dnnl_convolution_direct, &ax, &aw, NULL, &ay,
                                           strides, pad, pad) != dnnl_success ||
        dnnl_primitive_desc_create(&pd, &fd, NULL, engine, NULL) != dnnl_success)
        return;
    const dnnl_memory_desc_t *md = dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
    if (md && md->format_kind == dnnl_blocked && md->format_desc.blocking.inner_nblks == 1 &&
        md->format_desc.blocking.inner_idxs[0] == 1) {
        const int64_t b = md->format_desc.blocking.inner_blks[0];
        if (b == 8 || b == 16) {
            dnnl_memory_desc_t want;
            if (blocked(&want, xd, (int)b) == dnnl_success && dnnl_memory_desc_equal(&want, md)) onednn_block = (int)b;
        }
    }
    dnnl_primitive_desc_destroy(pd);
}

int brg_cpu_onednn_block(void)
{
    pthread_once(&block_once, probe_block);
    return onednn_block;
}

static brg_status dnnl_fail(const brg_op *op, const char *what, dnnl_status_t s)
{
    return brg_error(BRG_ERR_BACKEND, "%s: oneDNN %s failed (status %d)", brg_op_kind_name(op->kind), what, (int)s);
}

static dnnl_status_t run(dnnl_stream_t stream, dnnl_primitive_t prim, int n, const dnnl_exec_arg_t *args)
{
    dnnl_status_t s = dnnl_primitive_execute(prim, stream, n, args);
    return s == dnnl_success ? dnnl_stream_wait(stream) : s;
}

/* Run one piece: op's tensors are the piece's, st its step, ws the
 * workspace. Inputs from in[batch_in] on (the weights, the bias) are put
 * in their layouts only where !whole_ready: the previous piece, run with
 * the same step, left them in the workspace. */
static brg_status run_piece(const brg_op *op, const conv_step *st, char *ws, dnnl_stream_t stream, int batch_in,
                            int whole_ready)
{
    dnnl_memory_t user[MAX_ARGS] = {0}, chosen[MAX_ARGS] = {0}, scratch = NULL;
    dnnl_status_t s = dnnl_success;
    const char *what = "memory";
    if (st->scratch_bytes) {
        dnnl_memory_desc_t md;
        const dnnl_dims_t d = {(dnnl_dim_t)st->scratch_bytes};
        s = dnnl_memory_desc_init_by_tag(&md, 1, d, dnnl_u8, dnnl_a);
        if (s == dnnl_success) s = dnnl_memory_create(&scratch, &md, engine, ws);
    }
    dnnl_exec_arg_t args[MAX_ARGS + 1];
    const arg_layout *lay[MAX_ARGS];
    int staged[MAX_ARGS];
    int n_args = 0;
    for (int i = 0; i < st->n_args && s == dnnl_success; i++) {
        const conv_arg *a = &st->args[i];
        const brg_tensor *t = a->is_output ? op->out[a->index] : op->in[a->index];
        lay[i] = &a->as[t->block ? 1 : 0]; /* the caller checked that a blocked tensor has its layout */
        staged[i] = !lay[i]->direct || (a->is_output && op->accumulate);
        s = dnnl_memory_create(&user[i], &lay[i]->user, engine, t->data);
        if (s == dnnl_success && staged[i]) s = dnnl_memory_create(&chosen[i], &a->chosen, engine, ws + a->offset);
        args[n_args++] = (dnnl_exec_arg_t){a->dnnl_arg, staged[i] ? chosen[i] : user[i]};
    }
    if (scratch) args[n_args++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, scratch};
    /* Inputs into their layouts, the primitive, outputs back (added on when accumulating). */
    for (int i = 0; i < st->n_args && s == dnnl_success; i++) {
        const conv_arg *a = &st->args[i];
        if (!staged[i] || a->is_output || (whole_ready && a->index >= batch_in)) continue;
        what = "reorder";
        const dnnl_exec_arg_t r[3] = {
            {DNNL_ARG_FROM, user[i]}, {DNNL_ARG_TO, chosen[i]}, {DNNL_ARG_SCRATCHPAD, scratch}};
        s = run(stream, lay[i]->reorder, scratch ? 3 : 2, r);
    }
    if (s == dnnl_success) {
        what = "convolution";
        s = run(stream, st->prim, n_args, args);
    }
    for (int i = 0; i < st->n_args && s == dnnl_success; i++) {
        const conv_arg *a = &st->args[i];
        if (!staged[i] || !a->is_output) continue;
        what = "reorder";
        const dnnl_exec_arg_t r[3] = {
            {DNNL_ARG_FROM, chosen[i]}, {DNNL_ARG_TO, user[i]}, {DNNL_ARG_SCRATCHPAD, scratch}};
        s = run(stream, op->accumulate ? lay[i]->reorder_sum : lay[i]->reorder, scratch ? 3 : 2, r);
    }
    for (int i = 0; i < st->n_args; i++) {
        if (user[i]) dnnl_memory_destroy(user[i]);
        if (chosen[i]) dnnl_memory_destroy(chosen[i]);
    }
    if (scratch) dnnl_memory_destroy(scratch);
    return s == dnnl_success ? BRG_OK : dnnl_fail(op, what, s);
}

/* Run op through oneDNN: *ran = 0 where its steps cannot (im2col then
 * does). The pieces split the images (dimension 0) of the batch tensors;
 * the weights, bias and their gradients are whole in every piece, and the
 * pieces after the first add into the weight gradients. */
brg_status brg_cpu_onednn_conv2d(const brg_op *op, int *ran)
{
    size_t planned;
    *ran = brg_cpu_onednn_conv2d_workspace(op, &planned);
    if (!*ran) return BRG_OK;
    const int threads = brg_cpu_blas_threads();
    pieces ps;
    const conv_entry *e[2];
    if (!piece_entries(op, threads, 1, &ps, e))
        return brg_error(BRG_ERR_BACKEND,
                         "%s: oneDNN could not make its primitives for %d threads, though its workspace was planned "
                         "for 1 and %d",
                         brg_op_kind_name(op->kind), threads, brg_cpu_all_threads());
    for (int i = 0; i < e[0]->step.n_args; i++) {
        const conv_arg *a = &e[0]->step.args[i];
        const brg_tensor *t = a->is_output ? op->out[a->index] : op->in[a->index];
        if (t->block && (a->n_layouts < 2 || t->block != brg_cpu_onednn_block()))
            return brg_error(BRG_ERR_UNSUPPORTED, "%s: a tensor blocked by %d channels, where oneDNN convolves in "
                             "blocks of %d", brg_op_kind_name(op->kind), t->block, brg_cpu_onednn_block());
    }
    const size_t need = pieces_workspace(e);
    if (need && (!op->workspace || op->workspace_bytes < need))
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "%s: needs %zu bytes of workspace on %d threads, given %zu",
                         brg_op_kind_name(op->kind), need, threads, op->workspace ? op->workspace_bytes : (size_t)0);
    omp_set_num_threads(threads);
    dnnl_stream_t stream = NULL;
    dnnl_status_t s = dnnl_stream_create(&stream, engine, dnnl_stream_default_flags);
    if (s != dnnl_success) return dnnl_fail(op, "stream", s);
    /* Which tensors hold images: the batch ones, by the kind's order. */
    const int batch_in = op->kind == BRG_OP_CONV2D_BACKWARD_FILTER ? 2 : 1; /* in[0..batch_in) */
    const int batch_out = op->kind == BRG_OP_CONV2D_BACKWARD_FILTER ? 0 : 1; /* out[0..batch_out) */
    brg_status st = BRG_OK;
    for (int64_t k = 0; k < ps.count && st == BRG_OK; k++) {
        const int64_t n = k == ps.count - 1 ? ps.last : ps.n;
        brg_op piece = *op;
        brg_tensor in[BRG_OP_MAX_TENSORS], out[BRG_OP_MAX_TENSORS];
        for (int i = 0; i < batch_in && st == BRG_OK; i++) {
            st = brg_tensor_slice(op->in[i], 0, k * ps.n, n, &in[i]);
            piece.in[i] = &in[i];
        }
        for (int i = 0; i < batch_out && st == BRG_OK; i++) {
            st = brg_tensor_slice(op->out[i], 0, k * ps.n, n, &out[i]);
            piece.out[i] = &out[i];
        }
        if (k > 0 && op->kind == BRG_OP_CONV2D_BACKWARD_FILTER) piece.accumulate = 1;
        const conv_entry *entry = e[k == ps.count - 1];
        if (st == BRG_OK)
            st = run_piece(&piece, &entry->step, op->workspace, stream, batch_in, k > 0 && entry == e[0]);
    }
    dnnl_stream_destroy(stream);
    return st;
}
#endif /* BRG_HAVE_ONEDNN */

/* The layout of activations between layers: oneDNN's block where it
 * convolves and the blocked layout is chosen (conv-choice.c). */
int brg_cpu_layout_block(void)
{
#ifdef BRG_HAVE_ONEDNN
    if (brg_cpu_conv_selected() == BRG_CPU_CONV_ONEDNN && brg_cpu_layout_selected_blocked())
        return brg_cpu_onednn_block();
#endif
    return 0;
}

int brg_cpu_channel_block(brg_device *dev)
{
    (void)dev;
    return brg_cpu_layout_block();
}

const char *brg_cpu_layout(void) { return brg_cpu_layout_block() ? "blocked" : "plain"; }
