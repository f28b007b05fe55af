/* Op names, argument validation and the shared dropout mask.
 *
 * brg_op_validate is the single place where an op's contract (see
 * brigade/ops.h) is checked, so every backend's kernels can assume
 * well-formed, contiguous tensors of matching shapes. */
#include <stdio.h>
#include <string.h>

#include "brigade/ops.h"
#include "rng.h"
#include "internal.h"

static const char *const kind_names[BRG_OP_KIND_COUNT] = {
    [BRG_OP_CONV2D_FORWARD] = "conv2d_forward",
    [BRG_OP_CONV2D_BACKWARD_DATA] = "conv2d_backward_data",
    [BRG_OP_CONV2D_BACKWARD_FILTER] = "conv2d_backward_filter",
    [BRG_OP_BATCHNORM_FORWARD_TRAIN] = "batchnorm_forward_train",
    [BRG_OP_BATCHNORM_FORWARD_INFER] = "batchnorm_forward_infer",
    [BRG_OP_BATCHNORM_BACKWARD] = "batchnorm_backward",
    [BRG_OP_BATCHNORM_STATS] = "batchnorm_stats",
    [BRG_OP_BATCHNORM_BACKWARD_REDUCE] = "batchnorm_backward_reduce",
    [BRG_OP_BATCHNORM_BACKWARD_ELEMT] = "batchnorm_backward_elemt",
    [BRG_OP_RELU_FORWARD] = "relu_forward",
    [BRG_OP_RELU_BACKWARD] = "relu_backward",
    [BRG_OP_MAXPOOL_FORWARD] = "maxpool_forward",
    [BRG_OP_MAXPOOL_BACKWARD] = "maxpool_backward",
    [BRG_OP_AVGPOOL_FORWARD] = "avgpool_forward",
    [BRG_OP_AVGPOOL_BACKWARD] = "avgpool_backward",
    [BRG_OP_GLOBAL_AVGPOOL_FORWARD] = "global_avgpool_forward",
    [BRG_OP_GLOBAL_AVGPOOL_BACKWARD] = "global_avgpool_backward",
    [BRG_OP_CONCAT_FORWARD] = "concat_forward",
    [BRG_OP_CONCAT_BACKWARD] = "concat_backward",
    [BRG_OP_ADD_FORWARD] = "add_forward",
    [BRG_OP_ADD_BACKWARD] = "add_backward",
    [BRG_OP_LINEAR_FORWARD] = "linear_forward",
    [BRG_OP_LINEAR_BACKWARD_DATA] = "linear_backward_data",
    [BRG_OP_LINEAR_BACKWARD_WEIGHT] = "linear_backward_weight",
    [BRG_OP_DROPOUT_FORWARD] = "dropout_forward",
    [BRG_OP_DROPOUT_BACKWARD] = "dropout_backward",
    [BRG_OP_SOFTMAX_XENT_FORWARD] = "softmax_xent_forward",
    [BRG_OP_SOFTMAX_XENT_BACKWARD] = "softmax_xent_backward",
    [BRG_OP_UPSAMPLE_FORWARD] = "upsample_forward",
    [BRG_OP_UPSAMPLE_BACKWARD] = "upsample_backward",
    [BRG_OP_SGD_UPDATE] = "sgd_update",
    [BRG_OP_ADAM_UPDATE] = "adam_update",
    [BRG_OP_COUNT_CORRECT] = "count_correct",
    [BRG_OP_CHECK_FINITE] = "check_finite",
};

const char *brg_op_kind_name(brg_op_kind kind)
{
    if ((int)kind < 0 || kind >= BRG_OP_KIND_COUNT) return "unknown_op";
    return kind_names[kind];
}

int64_t brg_conv_out_extent(int64_t in, int kernel, int stride, int pad)
{
    if (kernel < 1 || stride < 1 || pad < 0) return -1;
    int64_t span = in + 2 * (int64_t)pad - kernel;
    if (span < 0) return -1;
    return span / stride + 1;
}

int brg_dropout_keep(uint64_t seed, uint64_t index, float rate) { return brg_dropout_keep_inline(seed, index, rate); }

/* ---- validation helpers: each returns BRG_OK or sets a message ---- */

typedef struct vctx {
    const brg_op *op;
    const char *name;
} vctx;

static const brg_tensor *tin(const vctx *v, int i) { return i < v->op->n_in ? v->op->in[i] : NULL; }
static const brg_tensor *tout(const vctx *v, int i) { return i < v->op->n_out ? v->op->out[i] : NULL; }

static brg_status need(const vctx *v, const brg_tensor *t, const char *role)
{
    if (!t) return brg_error(BRG_ERR_INVALID_ARGUMENT, "%s: tensor '%s' is missing", v->name, role);
    if (!t->data && brg_tensor_numel(t) > 0)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "%s: tensor '%s' has no data", v->name, role);
    if (!brg_tensor_is_contiguous(t))
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "%s: tensor '%s' must be contiguous", v->name, role);
    return BRG_OK;
}

/* t must be present with the given dtype and number of dims. */
static brg_status need_dims(const vctx *v, const brg_tensor *t, const char *role, brg_dtype dtype, int ndim)
{
    BRG_CHECK(need(v, t, role));
    char s[64];
    if (t->dtype != dtype)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "%s: tensor '%s' must be %s", v->name, role,
                         dtype == BRG_F32 ? "float32" : "int32");
    if (ndim > 0 && t->ndim != ndim)
        return brg_error(BRG_ERR_SHAPE, "%s: tensor '%s' has shape %s, expected %d dimensions", v->name, role,
                         brg_tensor_shape_string(t, s, sizeof s), ndim);
    return BRG_OK;
}

/* t must have exactly the shape given (ndim entries). */
static brg_status need_shape(const vctx *v, const brg_tensor *t, const char *role, int ndim, const int64_t *shape)
{
    BRG_CHECK(need_dims(v, t, role, BRG_F32, ndim));
    brg_tensor want;
    brg_tensor_init(&want, NULL, BRG_F32, ndim, shape, NULL);
    if (!brg_tensor_same_shape(t, &want)) {
        char s1[64], s2[64];
        return brg_error(BRG_ERR_SHAPE, "%s: tensor '%s' has shape %s, expected %s", v->name, role,
                         brg_tensor_shape_string(t, s1, sizeof s1), brg_tensor_shape_string(&want, s2, sizeof s2));
    }
    return BRG_OK;
}

static brg_status need_like(const vctx *v, const brg_tensor *t, const char *role, const brg_tensor *ref)
{
    return need_shape(v, t, role, ref->ndim, ref->shape);
}

static brg_status need_vector(const vctx *v, const brg_tensor *t, const char *role, int64_t n)
{
    return need_shape(v, t, role, 1, &n);
}

static brg_status opt_vector(const vctx *v, const brg_tensor *t, const char *role, int64_t n)
{
    return t ? need_vector(v, t, role, n) : BRG_OK;
}

static brg_status check_counts(const vctx *v, int min_in, int max_in, int min_out, int max_out)
{
    const brg_op *op = v->op;
    if (op->n_in < min_in || op->n_in > max_in || op->n_out < min_out || op->n_out > max_out)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "%s: takes %d..%d inputs and %d..%d outputs, given %d and %d",
                         v->name, min_in, max_in, min_out, max_out, op->n_in, op->n_out);
    return BRG_OK;
}

/* ---- channel-blocked tensors (brigade/tensor.h) ----
 *
 * How each kind takes them: not at all; every 4-D tensor blocked alike (the
 * per-channel, pooling and elementwise kinds, whose results do not depend on the
 * layout); each image tensor as it comes, the filter plain (convolutions:
 * oneDNN reads either); x or dx blocked with y or dy [N, C, 1, 1] plain
 * (global average pool); any (check_finite). */
typedef enum block_rule { BLOCKS_NONE = 0, BLOCKS_SAME, BLOCKS_CONV, BLOCKS_GLOBAL, BLOCKS_ANY } block_rule;

static const block_rule block_rules[BRG_OP_KIND_COUNT] = {
    [BRG_OP_CONV2D_FORWARD] = BLOCKS_CONV,
    [BRG_OP_CONV2D_BACKWARD_DATA] = BLOCKS_CONV,
    [BRG_OP_CONV2D_BACKWARD_FILTER] = BLOCKS_CONV,
    [BRG_OP_BATCHNORM_FORWARD_TRAIN] = BLOCKS_SAME,
    [BRG_OP_BATCHNORM_FORWARD_INFER] = BLOCKS_SAME,
    [BRG_OP_BATCHNORM_BACKWARD] = BLOCKS_SAME,
    [BRG_OP_BATCHNORM_STATS] = BLOCKS_SAME,
    [BRG_OP_BATCHNORM_BACKWARD_REDUCE] = BLOCKS_SAME,
    [BRG_OP_BATCHNORM_BACKWARD_ELEMT] = BLOCKS_SAME,
    [BRG_OP_RELU_FORWARD] = BLOCKS_SAME,
    [BRG_OP_RELU_BACKWARD] = BLOCKS_SAME,
    [BRG_OP_MAXPOOL_FORWARD] = BLOCKS_SAME,
    [BRG_OP_MAXPOOL_BACKWARD] = BLOCKS_SAME,
    [BRG_OP_AVGPOOL_FORWARD] = BLOCKS_SAME,
    [BRG_OP_AVGPOOL_BACKWARD] = BLOCKS_SAME,
    [BRG_OP_GLOBAL_AVGPOOL_FORWARD] = BLOCKS_GLOBAL,
    [BRG_OP_GLOBAL_AVGPOOL_BACKWARD] = BLOCKS_GLOBAL,
    [BRG_OP_CONCAT_FORWARD] = BLOCKS_SAME,
    [BRG_OP_CONCAT_BACKWARD] = BLOCKS_SAME,
    [BRG_OP_ADD_FORWARD] = BLOCKS_SAME,
    [BRG_OP_ADD_BACKWARD] = BLOCKS_SAME,
    [BRG_OP_CHECK_FINITE] = BLOCKS_ANY,
};

static block_rule rule_of(brg_op_kind kind)
{
    return (int)kind >= 0 && kind < BRG_OP_KIND_COUNT ? block_rules[kind] : BLOCKS_NONE;
}

int brg_op_takes_blocked(brg_op_kind kind) { return rule_of(kind) != BLOCKS_NONE; }

int brg_op_blocks_in_one_layout(brg_op_kind kind) { return rule_of(kind) == BLOCKS_SAME; }

/* A convolution's filter (or filter gradient): the one 4-D tensor that is
 * not images. */
static int is_filter(const brg_op *op, int is_out, int i)
{
    if (op->kind == BRG_OP_CONV2D_BACKWARD_FILTER) return is_out && i == 0;
    return !is_out && i == 1;
}

int brg_op_may_block(const brg_op *op, int is_output, int index)
{
    if (!op) return 0;
    switch (rule_of(op->kind)) {
    case BLOCKS_NONE: return 0;
    case BLOCKS_CONV: return !is_filter(op, is_output, index);
    case BLOCKS_GLOBAL: return (op->kind == BRG_OP_GLOBAL_AVGPOOL_FORWARD) != !!is_output;
    default: return 1;
    }
}

static brg_status validate_blocks(const vctx *v)
{
    const brg_op *op = v->op;
    const block_rule rule = block_rules[op->kind];
    int first = -1; /* the block of the first 4-D tensor (BLOCKS_SAME) */
    for (int k = 0; k < op->n_in + op->n_out; k++) {
        const int is_out = k >= op->n_in, i = is_out ? k - op->n_in : k;
        const brg_tensor *t = is_out ? op->out[i] : op->in[i];
        if (!t) continue;
        const char *role = is_out ? "an output" : "an input";
        char s[64];
        if (t->block && (t->block < 0 || t->block > BRG_MAX_BLOCK || t->dtype != BRG_F32 || t->ndim != 4 ||
                         t->shape[1] % t->block != 0))
            return brg_error(BRG_ERR_INVALID_ARGUMENT, "%s: %s %d (%s) claims a block of %d channels it cannot have",
                             v->name, role, i, brg_tensor_shape_string(t, s, sizeof s), t->block);
        if (!t->block && (rule != BLOCKS_SAME || t->ndim != 4)) continue;
        if (t->block && !brg_op_may_block(op, is_out, i)) {
            if (rule == BLOCKS_CONV)
                return brg_error(BRG_ERR_INVALID_ARGUMENT, "%s: the filter must be plain, not blocked by %d channels",
                                 v->name, t->block);
            if (rule == BLOCKS_GLOBAL)
                return brg_error(BRG_ERR_INVALID_ARGUMENT,
                                 "%s: the [N, C, 1, 1] side must be plain, not blocked by %d channels", v->name,
                                 t->block);
            return brg_error(BRG_ERR_INVALID_ARGUMENT,
                             "%s: %s %d is blocked by %d channels, and this kind takes plain NCHW tensors only",
                             v->name, role, i, t->block);
        }
        if (rule == BLOCKS_SAME) {
            if (first < 0) first = t->block;
            else if (t->block != first)
                return brg_error(BRG_ERR_INVALID_ARGUMENT,
                                 "%s: %s %d is blocked by %d channels and an earlier tensor by %d: this kind takes "
                                 "its tensors in one layout",
                                 v->name, role, i, t->block, first);
        }
    }
    return BRG_OK;
}

/* ---- per family ---- */

static brg_status conv_geometry(const vctx *v, const brg_tensor *x, const brg_tensor *w, int64_t *p, int64_t *q)
{
    const brg_conv2d_params *c = &v->op->p.conv;
    if (c->stride_h < 1 || c->stride_w < 1 || c->pad_h < 0 || c->pad_w < 0)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "%s: stride %dx%d must be positive and padding %dx%d non-negative",
                         v->name, c->stride_h, c->stride_w, c->pad_h, c->pad_w);
    *p = brg_conv_out_extent(x->shape[2], (int)w->shape[2], c->stride_h, c->pad_h);
    *q = brg_conv_out_extent(x->shape[3], (int)w->shape[3], c->stride_w, c->pad_w);
    if (*p < 1 || *q < 1 || w->shape[2] < 1 || w->shape[3] < 1)
        return brg_error(BRG_ERR_SHAPE, "%s: a %lldx%lld kernel with padding %dx%d does not fit a %lldx%lld input",
                         v->name, (long long)w->shape[2], (long long)w->shape[3], c->pad_h, c->pad_w,
                         (long long)x->shape[2], (long long)x->shape[3]);
    return BRG_OK;
}

/* The input x [N,C,H,W] against a filter w [K,C,R,S] (the forward's w or
 * the filter gradient dw, role w_role, called w_said in the channel
 * message), then the output extent p x q (conv_geometry). */
static brg_status conv_input_filter(const vctx *v, const brg_tensor *x, const brg_tensor *w, const char *w_role,
                                    const char *w_said, int64_t *p, int64_t *q)
{
    BRG_CHECK(need_dims(v, x, "x", BRG_F32, 4));
    BRG_CHECK(need_dims(v, w, w_role, BRG_F32, 4));
    if (w->shape[1] != x->shape[1])
        return brg_error(BRG_ERR_SHAPE, "%s: input has %lld channels but %s expects %lld", v->name,
                         (long long)x->shape[1], w_said, (long long)w->shape[1]);
    return conv_geometry(v, x, w, p, q);
}

static brg_status validate_conv(const vctx *v)
{
    const brg_op *op = v->op;
    const brg_tensor *x, *w, *dy;
    int64_t p, q;
    switch (op->kind) {
    case BRG_OP_CONV2D_FORWARD: {
        BRG_CHECK(check_counts(v, 2, 3, 1, 1));
        x = tin(v, 0);
        w = tin(v, 1);
        BRG_CHECK(conv_input_filter(v, x, w, "w", "the filter", &p, &q));
        BRG_CHECK(opt_vector(v, tin(v, 2), "b", w->shape[0]));
        const int64_t ys[4] = {x->shape[0], w->shape[0], p, q};
        return need_shape(v, tout(v, 0), "y", 4, ys);
    }
    case BRG_OP_CONV2D_BACKWARD_DATA: {
        BRG_CHECK(check_counts(v, 2, 2, 1, 1));
        dy = tin(v, 0);
        w = tin(v, 1);
        const brg_tensor *dx = tout(v, 0);
        BRG_CHECK(need_dims(v, dy, "dy", BRG_F32, 4));
        BRG_CHECK(need_dims(v, w, "w", BRG_F32, 4));
        BRG_CHECK(need_dims(v, dx, "dx", BRG_F32, 4));
        if (dx->shape[1] != w->shape[1] || dy->shape[1] != w->shape[0] || dx->shape[0] != dy->shape[0])
            return brg_error(BRG_ERR_SHAPE, "%s: dx, w and dy disagree on batch or channels", v->name);
        BRG_CHECK(conv_geometry(v, dx, w, &p, &q));
        const int64_t ys[4] = {dx->shape[0], w->shape[0], p, q};
        return need_shape(v, dy, "dy", 4, ys);
    }
    default: { /* BRG_OP_CONV2D_BACKWARD_FILTER */
        BRG_CHECK(check_counts(v, 2, 2, 1, 2));
        x = tin(v, 0);
        dy = tin(v, 1);
        w = tout(v, 0);
        BRG_CHECK(conv_input_filter(v, x, w, "dw", "dw", &p, &q));
        const int64_t ys[4] = {x->shape[0], w->shape[0], p, q};
        BRG_CHECK(need_shape(v, dy, "dy", 4, ys));
        return opt_vector(v, tout(v, 1), "db", w->shape[0]);
    }
    }
}

static brg_status validate_batchnorm(const vctx *v)
{
    const brg_op *op = v->op;
    const brg_tensor *x = tin(v, 0);
    BRG_CHECK(need_dims(v, x, "x", BRG_F32, 4));
    int64_t c = x->shape[1];
    const int synced = op->kind == BRG_OP_BATCHNORM_STATS || op->kind == BRG_OP_BATCHNORM_BACKWARD_REDUCE ||
                       op->kind == BRG_OP_BATCHNORM_BACKWARD_ELEMT; /* no epsilon: given the statistics */
    if (!synced && !(op->p.bn.epsilon > 0.0f))
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "%s: epsilon must be positive", v->name);
    switch (op->kind) {
    case BRG_OP_BATCHNORM_FORWARD_TRAIN:
        BRG_CHECK(check_counts(v, 1, 3, 5, 5));
        if (!(op->p.bn.momentum >= 0.0f && op->p.bn.momentum <= 1.0f))
            return brg_error(BRG_ERR_INVALID_ARGUMENT, "%s: momentum must be in [0, 1]", v->name);
        if (x->shape[0] * x->shape[2] * x->shape[3] < 2)
            return brg_error(BRG_ERR_SHAPE, "%s: training needs more than one value per channel (input %lldx%lldx%lld)",
                             v->name, (long long)x->shape[0], (long long)x->shape[2], (long long)x->shape[3]);
        BRG_CHECK(opt_vector(v, tin(v, 1), "gamma", c));
        BRG_CHECK(opt_vector(v, tin(v, 2), "beta", c));
        BRG_CHECK(need_like(v, tout(v, 0), "y", x));
        BRG_CHECK(need_vector(v, tout(v, 1), "running_mean", c));
        BRG_CHECK(need_vector(v, tout(v, 2), "running_var", c));
        BRG_CHECK(need_vector(v, tout(v, 3), "saved_mean", c));
        return need_vector(v, tout(v, 4), "saved_invstd", c);
    case BRG_OP_BATCHNORM_FORWARD_INFER:
        BRG_CHECK(check_counts(v, 5, 6, 1, 1));
        BRG_CHECK(opt_vector(v, tin(v, 1), "gamma", c));
        BRG_CHECK(opt_vector(v, tin(v, 2), "beta", c));
        BRG_CHECK(need_vector(v, tin(v, 3), "running_mean", c));
        BRG_CHECK(need_vector(v, tin(v, 4), "running_var", c));
        BRG_CHECK(opt_vector(v, tin(v, 5), "mean_lo", c));
        return need_like(v, tout(v, 0), "y", x);
    case BRG_OP_BATCHNORM_STATS:
        BRG_CHECK(check_counts(v, 1, 1, 2, 3));
        BRG_CHECK(need_vector(v, tout(v, 0), "mean", c));
        BRG_CHECK(opt_vector(v, tout(v, 2), "mean_lo", c));
        return need_vector(v, tout(v, 1), "var", c);
    case BRG_OP_BATCHNORM_BACKWARD_REDUCE:
        BRG_CHECK(check_counts(v, 4, 5, 2, 4));
        BRG_CHECK(need_like(v, tin(v, 1), "dy", x));
        BRG_CHECK(need_vector(v, tin(v, 2), "mean", c));
        BRG_CHECK(need_vector(v, tin(v, 3), "invstd", c));
        BRG_CHECK(opt_vector(v, tin(v, 4), "mean_lo", c));
        BRG_CHECK(need_vector(v, tout(v, 0), "sum_dy", c));
        BRG_CHECK(need_vector(v, tout(v, 1), "sum_dy_xhat", c));
        BRG_CHECK(opt_vector(v, tout(v, 2), "dgamma", c));
        return opt_vector(v, tout(v, 3), "dbeta", c);
    case BRG_OP_BATCHNORM_BACKWARD_ELEMT:
        BRG_CHECK(check_counts(v, 7, 8, 1, 1));
        if (op->p.bn.count < x->shape[0] * x->shape[2] * x->shape[3])
            return brg_error(BRG_ERR_INVALID_ARGUMENT,
                             "%s: count %lld is less than the %lld values per channel of x", v->name,
                             (long long)op->p.bn.count, (long long)(x->shape[0] * x->shape[2] * x->shape[3]));
        BRG_CHECK(need_like(v, tin(v, 1), "dy", x));
        BRG_CHECK(opt_vector(v, tin(v, 2), "gamma", c));
        BRG_CHECK(need_vector(v, tin(v, 3), "mean", c));
        BRG_CHECK(need_vector(v, tin(v, 4), "invstd", c));
        BRG_CHECK(need_vector(v, tin(v, 5), "sum_dy", c));
        BRG_CHECK(need_vector(v, tin(v, 6), "sum_dy_xhat", c));
        BRG_CHECK(opt_vector(v, tin(v, 7), "mean_lo", c));
        return need_like(v, tout(v, 0), "dx", x);
    default: /* BRG_OP_BATCHNORM_BACKWARD */
        BRG_CHECK(check_counts(v, 5, 5, 1, 3));
        BRG_CHECK(need_like(v, tin(v, 1), "dy", x));
        BRG_CHECK(opt_vector(v, tin(v, 2), "gamma", c));
        BRG_CHECK(need_vector(v, tin(v, 3), "saved_mean", c));
        BRG_CHECK(need_vector(v, tin(v, 4), "saved_invstd", c));
        BRG_CHECK(need_like(v, tout(v, 0), "dx", x));
        BRG_CHECK(opt_vector(v, tout(v, 1), "dgamma", c));
        return opt_vector(v, tout(v, 2), "dbeta", c);
    }
}

/* Tensors that must all share the shape of in[0]: the elementwise kinds. */
static brg_status validate_elementwise(const vctx *v, int n_in, int n_out)
{
    BRG_CHECK(check_counts(v, n_in, n_in, n_out, n_out));
    const brg_tensor *ref = tin(v, 0);
    BRG_CHECK(need_dims(v, ref, "in0", BRG_F32, 0));
    static const char *const roles_in[] = {"in0", "in1", "in2"};
    static const char *const roles_out[] = {"out0", "out1"};
    for (int i = 1; i < n_in; i++) BRG_CHECK(need_like(v, tin(v, i), roles_in[i], ref));
    int present = 0;
    for (int i = 0; i < n_out; i++) {
        if (!tout(v, i) && v->op->kind == BRG_OP_ADD_BACKWARD) continue; /* da or db may be unused */
        BRG_CHECK(need_like(v, tout(v, i), roles_out[i], ref));
        present++;
    }
    if (present == 0) return brg_error(BRG_ERR_INVALID_ARGUMENT, "%s: no output tensor", v->name);
    return BRG_OK;
}

static brg_status validate_pool(const vctx *v)
{
    const brg_op *op = v->op;
    const brg_pool_params *pp = &op->p.pool;
    int forward = op->kind == BRG_OP_MAXPOOL_FORWARD || op->kind == BRG_OP_AVGPOOL_FORWARD;
    int n_in = forward ? 1 : (op->kind == BRG_OP_MAXPOOL_BACKWARD ? 3 : 1);
    BRG_CHECK(check_counts(v, n_in, n_in, 1, 1));
    if (pp->kernel_h < 1 || pp->kernel_w < 1 || pp->stride_h < 1 || pp->stride_w < 1 || pp->pad_h < 0 ||
        pp->pad_w < 0)
        return brg_error(BRG_ERR_INVALID_ARGUMENT,
                         "%s: kernel %dx%d and stride %dx%d must be positive, padding %dx%d non-negative", v->name,
                         pp->kernel_h, pp->kernel_w, pp->stride_h, pp->stride_w, pp->pad_h, pp->pad_w);
    if (2 * pp->pad_h > pp->kernel_h || 2 * pp->pad_w > pp->kernel_w)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "%s: padding %dx%d must be at most half of the %dx%d window",
                         v->name, pp->pad_h, pp->pad_w, pp->kernel_h, pp->kernel_w);
    /* The full-resolution tensor: x for forward, dx for backward. */
    const brg_tensor *big = forward ? tin(v, 0) : tout(v, 0);
    BRG_CHECK(need_dims(v, big, forward ? "x" : "dx", BRG_F32, 4));
    if (big->shape[2] < 1 || big->shape[3] < 1)
        return brg_error(BRG_ERR_SHAPE, "%s: empty spatial extent %lldx%lld", v->name, (long long)big->shape[2],
                         (long long)big->shape[3]);
    int64_t p = brg_conv_out_extent(big->shape[2], pp->kernel_h, pp->stride_h, pp->pad_h);
    int64_t q = brg_conv_out_extent(big->shape[3], pp->kernel_w, pp->stride_w, pp->pad_w);
    if (p < 1 || q < 1)
        return brg_error(BRG_ERR_SHAPE, "%s: a %dx%d window does not fit a %lldx%lld input", v->name, pp->kernel_h,
                         pp->kernel_w, (long long)big->shape[2], (long long)big->shape[3]);
    const int64_t small[4] = {big->shape[0], big->shape[1], p, q};
    if (forward) return need_shape(v, tout(v, 0), "y", 4, small);
    if (op->kind == BRG_OP_MAXPOOL_BACKWARD) {
        BRG_CHECK(need_like(v, tin(v, 0), "x", big));
        BRG_CHECK(need_shape(v, tin(v, 1), "y", 4, small));
        return need_shape(v, tin(v, 2), "dy", 4, small);
    }
    return need_shape(v, tin(v, 0), "dy", 4, small);
}

static brg_status validate_global_avgpool(const vctx *v)
{
    BRG_CHECK(check_counts(v, 1, 1, 1, 1));
    int forward = v->op->kind == BRG_OP_GLOBAL_AVGPOOL_FORWARD;
    const brg_tensor *big = forward ? tin(v, 0) : tout(v, 0);
    const brg_tensor *small = forward ? tout(v, 0) : tin(v, 0);
    BRG_CHECK(need_dims(v, big, forward ? "x" : "dx", BRG_F32, 4));
    if (big->shape[2] * big->shape[3] < 1)
        return brg_error(BRG_ERR_SHAPE, "%s: empty spatial extent", v->name);
    const int64_t s[4] = {big->shape[0], big->shape[1], 1, 1};
    return need_shape(v, small, forward ? "y" : "dy", 4, s);
}

static brg_status validate_concat(const vctx *v)
{
    int forward = v->op->kind == BRG_OP_CONCAT_FORWARD;
    if (forward)
        BRG_CHECK(check_counts(v, 1, BRG_OP_MAX_TENSORS, 1, 1));
    else
        BRG_CHECK(check_counts(v, 1, 1, 1, BRG_OP_MAX_TENSORS));
    const brg_tensor *whole = forward ? tout(v, 0) : tin(v, 0);
    int n_parts = forward ? v->op->n_in : v->op->n_out;
    BRG_CHECK(need_dims(v, whole, forward ? "y" : "dy", BRG_F32, 4));
    int64_t channels = 0;
    for (int i = 0; i < n_parts; i++) {
        const brg_tensor *part = forward ? tin(v, i) : tout(v, i);
        char role[16];
        snprintf(role, sizeof role, forward ? "x%d" : "dx%d", i);
        BRG_CHECK(need_dims(v, part, role, BRG_F32, 4));
        if (part->shape[0] != whole->shape[0] || part->shape[2] != whole->shape[2] ||
            part->shape[3] != whole->shape[3]) {
            char s1[64], s2[64];
            return brg_error(BRG_ERR_SHAPE, "%s: part %d has shape %s but the whole has %s; only channels may differ",
                             v->name, i, brg_tensor_shape_string(part, s1, sizeof s1),
                             brg_tensor_shape_string(whole, s2, sizeof s2));
        }
        channels += part->shape[1];
    }
    if (channels != whole->shape[1])
        return brg_error(BRG_ERR_SHAPE, "%s: parts have %lld channels in all but the whole has %lld", v->name,
                         (long long)channels, (long long)whole->shape[1]);
    return BRG_OK;
}

/* Rows and features of a linear layer's input: [N, anything] -> N, I. */
static brg_status linear_input(const vctx *v, const brg_tensor *x, const char *role, int64_t in_features,
                               int64_t rows)
{
    BRG_CHECK(need_dims(v, x, role, BRG_F32, 0));
    char s[64];
    if (x->ndim < 2 || x->shape[0] != rows || brg_tensor_numel(x) != rows * in_features)
        return brg_error(BRG_ERR_SHAPE, "%s: '%s' has shape %s, expected %lld rows of %lld features", v->name, role,
                         brg_tensor_shape_string(x, s, sizeof s), (long long)rows, (long long)in_features);
    return BRG_OK;
}

/* The shapes both linear backwards share: the weights w [O, I] (or their
 * gradient dw, role w_role), dy [N, O], and x (or dx, role x_role) N rows
 * of I features. */
static brg_status linear_backward(const vctx *v, const brg_tensor *dy, const brg_tensor *w, const char *w_role,
                                  const brg_tensor *x, const char *x_role)
{
    BRG_CHECK(need_dims(v, w, w_role, BRG_F32, 2));
    BRG_CHECK(need_dims(v, dy, "dy", BRG_F32, 2));
    const int64_t ys[2] = {dy->shape[0], w->shape[0]};
    BRG_CHECK(need_shape(v, dy, "dy", 2, ys));
    return linear_input(v, x, x_role, w->shape[1], dy->shape[0]);
}

static brg_status validate_linear(const vctx *v)
{
    const brg_op *op = v->op;
    switch (op->kind) {
    case BRG_OP_LINEAR_FORWARD: {
        BRG_CHECK(check_counts(v, 2, 3, 1, 1));
        const brg_tensor *w = tin(v, 1);
        BRG_CHECK(need_dims(v, w, "w", BRG_F32, 2));
        BRG_CHECK(need_dims(v, tin(v, 0), "x", BRG_F32, 0));
        int64_t n = tin(v, 0)->shape[0];
        BRG_CHECK(linear_input(v, tin(v, 0), "x", w->shape[1], n));
        BRG_CHECK(opt_vector(v, tin(v, 2), "b", w->shape[0]));
        const int64_t ys[2] = {n, w->shape[0]};
        return need_shape(v, tout(v, 0), "y", 2, ys);
    }
    case BRG_OP_LINEAR_BACKWARD_DATA:
        BRG_CHECK(check_counts(v, 2, 2, 1, 1));
        return linear_backward(v, tin(v, 0), tin(v, 1), "w", tout(v, 0), "dx");
    default: { /* BRG_OP_LINEAR_BACKWARD_WEIGHT */
        BRG_CHECK(check_counts(v, 2, 2, 1, 2));
        const brg_tensor *dw = tout(v, 0);
        BRG_CHECK(linear_backward(v, tin(v, 1), dw, "dw", tin(v, 0), "x"));
        return opt_vector(v, tout(v, 1), "db", dw->shape[0]);
    }
    }
}

/* The scores of a loss or a count, [N, K] with labels [N], or per pixel
 * [N, K, H, W] with labels [N, H, W]; at least one class. */
static brg_status need_scores_and_labels(const vctx *v, const brg_tensor *scores, const char *role)
{
    BRG_CHECK(need_dims(v, scores, role, BRG_F32, 0));
    char s1[64], s2[64];
    if (scores->ndim != 2 && scores->ndim != 4)
        return brg_error(BRG_ERR_SHAPE, "%s: tensor '%s' has shape %s, expected [N, K] or per pixel [N, K, H, W]",
                         v->name, role, brg_tensor_shape_string(scores, s1, sizeof s1));
    if (scores->shape[1] < 1) return brg_error(BRG_ERR_SHAPE, "%s: tensor '%s' has no classes", v->name, role);
    const brg_tensor *labels = tin(v, 1);
    const int ndim = scores->ndim == 4 ? 3 : 1;
    BRG_CHECK(need_dims(v, labels, "labels", BRG_I32, ndim));
    const int match = labels->shape[0] == scores->shape[0] &&
                      (ndim == 1 || (labels->shape[1] == scores->shape[2] && labels->shape[2] == scores->shape[3]));
    if (!match)
        return brg_error(BRG_ERR_SHAPE, "%s: tensor 'labels' has shape %s for '%s' of %s; expected %s", v->name,
                         brg_tensor_shape_string(labels, s1, sizeof s1), role,
                         brg_tensor_shape_string(scores, s2, sizeof s2), ndim == 1 ? "[N]" : "[N, H, W]");
    return BRG_OK;
}

static brg_status validate_xent(const vctx *v)
{
    const brg_op *op = v->op;
    int forward = op->kind == BRG_OP_SOFTMAX_XENT_FORWARD;
    BRG_CHECK(check_counts(v, 2, 2, forward ? 2 : 1, forward ? 2 : 1));
    const brg_tensor *scores = tin(v, 0);
    BRG_CHECK(need_scores_and_labels(v, scores, forward ? "logits" : "probs"));
    if (forward) {
        const int64_t one = 1;
        BRG_CHECK(need_shape(v, tout(v, 0), "loss", 1, &one));
        return need_like(v, tout(v, 1), "probs", scores);
    }
    return need_like(v, tout(v, 0), "dlogits", scores);
}

/* An int32 [1] output: a count or a flag. */
static brg_status need_scalar_i32(const vctx *v, const brg_tensor *t, const char *role)
{
    BRG_CHECK(need_dims(v, t, role, BRG_I32, 1));
    if (t->shape[0] != 1) {
        char s[64];
        return brg_error(BRG_ERR_SHAPE, "%s: tensor '%s' has shape %s, expected [1]", v->name, role,
                         brg_tensor_shape_string(t, s, sizeof s));
    }
    return BRG_OK;
}

static brg_status validate_count_correct(const vctx *v)
{
    BRG_CHECK(check_counts(v, 2, 2, 1, 1));
    const brg_tensor *scores = tin(v, 0);
    BRG_CHECK(need_scores_and_labels(v, scores, "scores"));
    const int64_t n = brg_tensor_numel(tin(v, 1));
    if (n > INT32_MAX)
        return brg_error(BRG_ERR_SHAPE, "%s: %lld labels do not fit the int32 count", v->name, (long long)n);
    return need_scalar_i32(v, tout(v, 0), "count");
}

static brg_status validate_check_finite(const vctx *v)
{
    BRG_CHECK(check_counts(v, 1, 1, 1, 1));
    if (v->op->p.finite.tag <= 0)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "%s: tag %d must be positive (0 means no failure)", v->name,
                         (int)v->op->p.finite.tag);
    BRG_CHECK(need_dims(v, tin(v, 0), "x", BRG_F32, 0));
    return need_scalar_i32(v, tout(v, 0), "flag");
}

static brg_status validate_upsample(const vctx *v)
{
    BRG_CHECK(check_counts(v, 1, 1, 1, 1));
    int f = v->op->p.upsample.factor;
    if (f < 1) return brg_error(BRG_ERR_INVALID_ARGUMENT, "%s: factor %d must be at least 1", v->name, f);
    int forward = v->op->kind == BRG_OP_UPSAMPLE_FORWARD;
    const brg_tensor *small = forward ? tin(v, 0) : tout(v, 0);
    BRG_CHECK(need_dims(v, small, forward ? "x" : "dx", BRG_F32, 4));
    const int64_t big[4] = {small->shape[0], small->shape[1], small->shape[2] * f, small->shape[3] * f};
    return need_shape(v, forward ? tout(v, 0) : tin(v, 0), forward ? "y" : "dy", 4, big);
}

static brg_status validate_optim(const vctx *v)
{
    const brg_op *op = v->op;
    const brg_optim_params *o = &op->p.optim;
    int adam = op->kind == BRG_OP_ADAM_UPDATE;
    BRG_CHECK(check_counts(v, 1, 1, adam ? 3 : 1, adam ? 3 : 2));
    const brg_tensor *g = tin(v, 0);
    BRG_CHECK(need_dims(v, g, "grad", BRG_F32, 0));
    BRG_CHECK(need_like(v, tout(v, 0), "param", g));
    if (!(o->lr >= 0.0f) || !(o->weight_decay >= 0.0f))
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "%s: lr and weight_decay must be non-negative", v->name);
    if (adam) {
        BRG_CHECK(need_like(v, tout(v, 1), "m", g));
        BRG_CHECK(need_like(v, tout(v, 2), "v", g));
        if (!(o->beta1 >= 0.0f && o->beta1 < 1.0f) || !(o->beta2 >= 0.0f && o->beta2 < 1.0f) ||
            !(o->epsilon > 0.0f) || o->step < 1)
            return brg_error(BRG_ERR_INVALID_ARGUMENT,
                             "%s: betas must be in [0, 1), epsilon positive and step at least 1", v->name);
        return BRG_OK;
    }
    if (!(o->momentum >= 0.0f && o->momentum < 1.0f))
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "%s: momentum must be in [0, 1)", v->name);
    if (o->momentum > 0.0f && !tout(v, 1))
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "%s: momentum needs a velocity tensor", v->name);
    return tout(v, 1) ? need_like(v, tout(v, 1), "velocity", g) : BRG_OK;
}

static int is_backward(brg_op_kind k)
{
    switch (k) {
    case BRG_OP_CONV2D_BACKWARD_DATA:
    case BRG_OP_CONV2D_BACKWARD_FILTER:
    case BRG_OP_BATCHNORM_BACKWARD:
    case BRG_OP_BATCHNORM_BACKWARD_REDUCE:
    case BRG_OP_BATCHNORM_BACKWARD_ELEMT:
    case BRG_OP_RELU_BACKWARD:
    case BRG_OP_MAXPOOL_BACKWARD:
    case BRG_OP_AVGPOOL_BACKWARD:
    case BRG_OP_GLOBAL_AVGPOOL_BACKWARD:
    case BRG_OP_CONCAT_BACKWARD:
    case BRG_OP_ADD_BACKWARD:
    case BRG_OP_LINEAR_BACKWARD_DATA:
    case BRG_OP_LINEAR_BACKWARD_WEIGHT:
    case BRG_OP_DROPOUT_BACKWARD:
    case BRG_OP_SOFTMAX_XENT_BACKWARD:
    case BRG_OP_UPSAMPLE_BACKWARD: return 1;
    default: return 0;
    }
}

brg_status brg_op_validate(const brg_op *op)
{
    if (!op) return brg_error(BRG_ERR_INVALID_ARGUMENT, "op is NULL");
    if ((int)op->kind < 0 || op->kind >= BRG_OP_KIND_COUNT)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "unknown op kind %d", (int)op->kind);
    vctx v = {op, brg_op_kind_name(op->kind)};
    if (op->n_in < 0 || op->n_in > BRG_OP_MAX_TENSORS || op->n_out < 0 || op->n_out > BRG_OP_MAX_TENSORS)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "%s: tensor counts %d and %d are out of range", v.name, op->n_in,
                         op->n_out);
    if (op->accumulate && !is_backward(op->kind) && op->kind != BRG_OP_COUNT_CORRECT)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "%s: accumulate applies to backward ops and count_correct only",
                         v.name);
    BRG_CHECK(validate_blocks(&v));
    switch (op->kind) {
    case BRG_OP_CONV2D_FORWARD:
    case BRG_OP_CONV2D_BACKWARD_DATA:
    case BRG_OP_CONV2D_BACKWARD_FILTER: return validate_conv(&v);
    case BRG_OP_BATCHNORM_FORWARD_TRAIN:
    case BRG_OP_BATCHNORM_FORWARD_INFER:
    case BRG_OP_BATCHNORM_BACKWARD:
    case BRG_OP_BATCHNORM_STATS:
    case BRG_OP_BATCHNORM_BACKWARD_REDUCE:
    case BRG_OP_BATCHNORM_BACKWARD_ELEMT: return validate_batchnorm(&v);
    case BRG_OP_RELU_FORWARD: return validate_elementwise(&v, 1, 1);
    case BRG_OP_RELU_BACKWARD: return validate_elementwise(&v, 2, 1);
    case BRG_OP_MAXPOOL_FORWARD:
    case BRG_OP_MAXPOOL_BACKWARD:
    case BRG_OP_AVGPOOL_FORWARD:
    case BRG_OP_AVGPOOL_BACKWARD: return validate_pool(&v);
    case BRG_OP_GLOBAL_AVGPOOL_FORWARD:
    case BRG_OP_GLOBAL_AVGPOOL_BACKWARD: return validate_global_avgpool(&v);
    case BRG_OP_CONCAT_FORWARD:
    case BRG_OP_CONCAT_BACKWARD: return validate_concat(&v);
    case BRG_OP_ADD_FORWARD: return validate_elementwise(&v, 2, 1);
    case BRG_OP_ADD_BACKWARD: return validate_elementwise(&v, 1, 2);
    case BRG_OP_LINEAR_FORWARD:
    case BRG_OP_LINEAR_BACKWARD_DATA:
    case BRG_OP_LINEAR_BACKWARD_WEIGHT: return validate_linear(&v);
    case BRG_OP_DROPOUT_FORWARD:
    case BRG_OP_DROPOUT_BACKWARD:
        if (!(op->p.dropout.rate >= 0.0f && op->p.dropout.rate < 1.0f))
            return brg_error(BRG_ERR_INVALID_ARGUMENT, "%s: rate %g must be in [0, 1)", v.name,
                             (double)op->p.dropout.rate);
        return validate_elementwise(&v, 1, 1);
    case BRG_OP_SOFTMAX_XENT_FORWARD:
    case BRG_OP_SOFTMAX_XENT_BACKWARD: return validate_xent(&v);
    case BRG_OP_UPSAMPLE_FORWARD:
    case BRG_OP_UPSAMPLE_BACKWARD: return validate_upsample(&v);
    case BRG_OP_SGD_UPDATE:
    case BRG_OP_ADAM_UPDATE: return validate_optim(&v);
    case BRG_OP_COUNT_CORRECT: return validate_count_correct(&v);
    case BRG_OP_CHECK_FINITE: return validate_check_finite(&v);
    default: break;
    }
    return brg_error(BRG_ERR_INTERNAL, "%s: no validation rule", v.name);
}
