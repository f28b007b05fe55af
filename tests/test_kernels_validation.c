/* Malformed ops are rejected before any kernel runs, with the right status
 * and a message that names the op and the tensor; run-time errors (a label
 * out of range, a tensor outside the device, a workspace that does not fit)
 * come back as statuses, never as a crash. Also the harness itself: case
 * validation, labels, determinism of random cases, a device too small for a
 * case, and that every failure path leaves the arena as it found it. */
#include "kernel_test.h"

#define MAX_LIVE 64
static brg_tensor live[MAX_LIVE];
static int n_live = 0;

/* A float tensor on the test device, zero-filled, freed at the end. */
static brg_tensor *dt(int ndim, int64_t a, int64_t b, int64_t c, int64_t d)
{
    const int64_t shape[4] = {a, b, c, d};
    brg_tensor *t = &live[n_live++];
    CHECK_OK(brg_tensor_alloc(kt_dev, BRG_F32, ndim, shape, "validation", t));
    if (t->data) CHECK_OK(brg_device_memset_zero(kt_dev, t->data, brg_tensor_bytes(t)));
    return t;
}

static void free_live(void)
{
    while (n_live > 0) brg_tensor_free(&live[--n_live]);
}

/* A zeroed op of a kind, with unit strides for the convolution (the
 * parameters share a union, so set them per kind after this). */
static void op_init(brg_op *op, brg_op_kind kind)
{
    memset(op, 0, sizeof *op);
    op->kind = kind;
    if (kind == BRG_OP_CONV2D_FORWARD || kind == BRG_OP_CONV2D_BACKWARD_DATA || kind == BRG_OP_CONV2D_BACKWARD_FILTER)
        op->p.conv = (brg_conv2d_params){1, 1, 0, 0};
}

/* The op must fail with want, the message naming the op kind and `what`. */
#define EXPECT_REJECT(op, want, what)                                                              \
    do {                                                                                           \
        brg_clear_error();                                                                         \
        CHECK_STATUS(brg_device_run(kt_dev, (op)), (want));                                        \
        CHECK_ERROR_HAS(brg_op_kind_name((op)->kind));                                             \
        CHECK_ERROR_HAS(what);                                                                     \
    } while (0)

static void conv_rejections(void)
{
    brg_op op;
    brg_tensor *x = dt(4, 1, 3, 5, 5), *w = dt(4, 4, 3, 3, 3), *w2 = dt(4, 4, 2, 3, 3), *y = dt(4, 1, 4, 3, 3);
    brg_tensor *ybad = dt(4, 1, 4, 4, 4), *b5 = dt(1, 5, 0, 0, 0);

    /* The well-formed op runs: the rejections below are about their one defect. */
    op_init(&op, BRG_OP_CONV2D_FORWARD);
    op.n_in = 2, op.in[0] = x, op.in[1] = w, op.n_out = 1, op.out[0] = y;
    CHECK_OK(brg_device_run(kt_dev, &op));

    op.in[1] = w2; /* filter for 2 channels, input has 3 */
    EXPECT_REJECT(&op, BRG_ERR_SHAPE, "channels");
    op.in[1] = w;

    op.out[0] = ybad; /* [1,4,4,4] where [1,4,3,3] is due */
    EXPECT_REJECT(&op, BRG_ERR_SHAPE, "'y'");
    CHECK_ERROR_HAS("[1, 4, 3, 3]");
    op.out[0] = y;

    op.in[1] = NULL;
    EXPECT_REJECT(&op, BRG_ERR_INVALID_ARGUMENT, "'w'");
    CHECK_ERROR_HAS("missing");
    op.in[1] = w;

    op.n_in = 3, op.in[2] = b5; /* 5 biases for 4 filters */
    EXPECT_REJECT(&op, BRG_ERR_SHAPE, "'b'");
    op.n_in = 2;

    op.p.conv.stride_h = 0;
    EXPECT_REJECT(&op, BRG_ERR_INVALID_ARGUMENT, "stride");
    op.p.conv.stride_h = 1, op.p.conv.pad_w = -1;
    EXPECT_REJECT(&op, BRG_ERR_INVALID_ARGUMENT, "padding");
    op.p.conv.pad_w = 0;

    op.accumulate = 1;
    EXPECT_REJECT(&op, BRG_ERR_INVALID_ARGUMENT, "accumulate");
    op.accumulate = 0;

    op.n_out = 0;
    EXPECT_REJECT(&op, BRG_ERR_INVALID_ARGUMENT, "outputs");
    op.n_out = 1;

    /* Backward data with dy of the wrong spatial size. */
    op_init(&op, BRG_OP_CONV2D_BACKWARD_DATA);
    op.n_in = 2, op.in[0] = ybad, op.in[1] = w, op.n_out = 1, op.out[0] = x;
    EXPECT_REJECT(&op, BRG_ERR_SHAPE, "'dy'");
}

static void other_rejections(void)
{
    brg_op op;
    brg_tensor *x = dt(4, 2, 3, 4, 4), *y = dt(4, 2, 3, 4, 4), *v3 = dt(1, 3, 0, 0, 0), *v4 = dt(1, 4, 0, 0, 0);

    op_init(&op, BRG_OP_RELU_FORWARD);
    op.n_in = 1, op.in[0] = x, op.n_out = 1, op.out[0] = y;
    CHECK_OK(brg_device_run(kt_dev, &op));
    op.accumulate = 1;
    EXPECT_REJECT(&op, BRG_ERR_INVALID_ARGUMENT, "accumulate");

    /* Linear: w expects 10 input features, x has 48. */
    brg_tensor *w = dt(2, 5, 10, 0, 0), *ly = dt(2, 2, 5, 0, 0);
    op_init(&op, BRG_OP_LINEAR_FORWARD);
    op.n_in = 2, op.in[0] = x, op.in[1] = w, op.n_out = 1, op.out[0] = ly;
    EXPECT_REJECT(&op, BRG_ERR_SHAPE, "'x'");

    /* Batch norm: gamma for 4 channels on a 3-channel input. */
    brg_tensor *sm = dt(1, 3, 0, 0, 0), *si = dt(1, 3, 0, 0, 0);
    op_init(&op, BRG_OP_BATCHNORM_FORWARD_TRAIN);
    op.p.bn.epsilon = 1e-3f, op.p.bn.momentum = 0.1f;
    op.n_in = 2, op.in[0] = x, op.in[1] = v4;
    op.n_out = 5, op.out[0] = y, op.out[1] = v3, op.out[2] = v3, op.out[3] = sm, op.out[4] = si;
    EXPECT_REJECT(&op, BRG_ERR_SHAPE, "'gamma'");
    op.in[1] = v3, op.p.bn.epsilon = 0.0f;
    EXPECT_REJECT(&op, BRG_ERR_INVALID_ARGUMENT, "epsilon");
    op.p.bn.epsilon = 1e-3f, op.out[4] = NULL;
    EXPECT_REJECT(&op, BRG_ERR_INVALID_ARGUMENT, "'saved_invstd'");

    /* Pools: a stride of 0 and padding past half the window. */
    brg_tensor *py = dt(4, 2, 3, 2, 2);
    op_init(&op, BRG_OP_MAXPOOL_FORWARD);
    op.p.pool = (brg_pool_params){2, 2, 0, 2, 0, 0, 0};
    op.n_in = 1, op.in[0] = x, op.n_out = 1, op.out[0] = py;
    EXPECT_REJECT(&op, BRG_ERR_INVALID_ARGUMENT, "stride");
    op.p.pool = (brg_pool_params){2, 2, 2, 2, 2, 0, 0};
    EXPECT_REJECT(&op, BRG_ERR_INVALID_ARGUMENT, "padding");
    op.p.pool = (brg_pool_params){2, 2, 2, 2, 0, 0, 0};
    CHECK_OK(brg_device_run(kt_dev, &op));

    /* Concat: parts of 3 + 3 channels into a 3-channel whole. */
    op_init(&op, BRG_OP_CONCAT_FORWARD);
    op.n_in = 2, op.in[0] = x, op.in[1] = x, op.n_out = 1, op.out[0] = y;
    EXPECT_REJECT(&op, BRG_ERR_SHAPE, "channels");

    /* Add: operands of different shapes. */
    brg_tensor *other = dt(4, 2, 3, 4, 5);
    op_init(&op, BRG_OP_ADD_FORWARD);
    op.n_in = 2, op.in[0] = x, op.in[1] = other, op.n_out = 1, op.out[0] = y;
    EXPECT_REJECT(&op, BRG_ERR_SHAPE, "'in1'");

    /* Dropout: rate 1 would divide by zero. */
    op_init(&op, BRG_OP_DROPOUT_FORWARD);
    op.p.dropout.rate = 1.0f;
    op.n_in = 1, op.in[0] = x, op.n_out = 1, op.out[0] = y;
    EXPECT_REJECT(&op, BRG_ERR_INVALID_ARGUMENT, "rate");

    /* Softmax cross-entropy: float labels. */
    brg_tensor *logits = dt(2, 4, 5, 0, 0), *flabels = dt(1, 4, 0, 0, 0), *loss = dt(1, 1, 0, 0, 0);
    brg_tensor *probs = dt(2, 4, 5, 0, 0);
    op_init(&op, BRG_OP_SOFTMAX_XENT_FORWARD);
    op.n_in = 2, op.in[0] = logits, op.in[1] = flabels, op.n_out = 2, op.out[0] = loss, op.out[1] = probs;
    EXPECT_REJECT(&op, BRG_ERR_INVALID_ARGUMENT, "'labels'");
}

/* An int32 tensor on the test device, zero-filled, freed at the end. */
static brg_tensor *dti(int ndim, int64_t a, int64_t b)
{
    const int64_t shape[2] = {a, b};
    brg_tensor *t = &live[n_live++];
    CHECK_OK(brg_tensor_alloc(kt_dev, BRG_I32, ndim, shape, "validation", t));
    if (t->data) CHECK_OK(brg_device_memset_zero(kt_dev, t->data, brg_tensor_bytes(t)));
    return t;
}

/* count_correct and check_finite: shapes, dtypes, the tag, accumulate. */
static void reduction_rejections(void)
{
    brg_op op;
    brg_tensor *scores = dt(2, 4, 5, 0, 0), *labels = dti(1, 4, 0), *count = dti(1, 1, 0);
    brg_tensor *labels3 = dti(1, 3, 0), *count2 = dti(1, 2, 0), *fcount = dt(1, 1, 0, 0, 0);
    brg_tensor *scores3 = dt(3, 4, 5, 1, 0), *flabels = dt(1, 4, 0, 0, 0), *noclass = dt(2, 4, 0, 0, 0);

    op_init(&op, BRG_OP_COUNT_CORRECT);
    op.n_in = 2, op.in[0] = scores, op.in[1] = labels, op.n_out = 1, op.out[0] = count;
    CHECK_OK(brg_device_run(kt_dev, &op));
    op.accumulate = 1; /* allowed: a count over micro-batches */
    CHECK_OK(brg_device_run(kt_dev, &op));
    op.accumulate = 0;
    op.in[1] = labels3;
    EXPECT_REJECT(&op, BRG_ERR_SHAPE, "'labels'");
    op.in[1] = flabels;
    EXPECT_REJECT(&op, BRG_ERR_INVALID_ARGUMENT, "'labels'");
    op.in[1] = labels, op.in[0] = scores3;
    EXPECT_REJECT(&op, BRG_ERR_SHAPE, "'scores'");
    op.in[0] = noclass;
    EXPECT_REJECT(&op, BRG_ERR_SHAPE, "'scores'");
    op.in[0] = labels; /* int32 scores */
    EXPECT_REJECT(&op, BRG_ERR_INVALID_ARGUMENT, "'scores'");
    op.in[0] = scores, op.out[0] = count2;
    EXPECT_REJECT(&op, BRG_ERR_SHAPE, "'count'");
    op.out[0] = fcount;
    EXPECT_REJECT(&op, BRG_ERR_INVALID_ARGUMENT, "'count'");
    op.out[0] = NULL;
    EXPECT_REJECT(&op, BRG_ERR_INVALID_ARGUMENT, "'count'");
    op.out[0] = count, op.n_in = 1;
    EXPECT_REJECT(&op, BRG_ERR_INVALID_ARGUMENT, "inputs");

    brg_tensor *x = dt(4, 2, 3, 4, 4);
    op_init(&op, BRG_OP_CHECK_FINITE);
    op.p.finite.tag = 1;
    op.n_in = 1, op.in[0] = x, op.n_out = 1, op.out[0] = count;
    CHECK_OK(brg_device_run(kt_dev, &op));
    op.p.finite.tag = 0;
    EXPECT_REJECT(&op, BRG_ERR_INVALID_ARGUMENT, "tag");
    op.p.finite.tag = -3;
    EXPECT_REJECT(&op, BRG_ERR_INVALID_ARGUMENT, "tag");
    op.p.finite.tag = 2, op.accumulate = 1;
    EXPECT_REJECT(&op, BRG_ERR_INVALID_ARGUMENT, "accumulate");
    op.accumulate = 0, op.in[0] = labels; /* int32 input */
    EXPECT_REJECT(&op, BRG_ERR_INVALID_ARGUMENT, "'x'");
    op.in[0] = x, op.out[0] = count2;
    EXPECT_REJECT(&op, BRG_ERR_SHAPE, "'flag'");
    op.out[0] = fcount;
    EXPECT_REJECT(&op, BRG_ERR_INVALID_ARGUMENT, "'flag'");
    op.out[0] = count, op.n_out = 2, op.out[1] = count;
    EXPECT_REJECT(&op, BRG_ERR_INVALID_ARGUMENT, "outputs");

    /* Planning devices (CPU and CUDA targets) take no workspace for them,
     * still validate, and run them as no-ops. */
    const brg_device_spec targets[2] = {
        {.backend = BRG_BACKEND_CPU, .gpu = -1, .capacity = KT_DEVICE_BYTES},
        {.backend = BRG_BACKEND_CUDA, .gpu = 0, .vdev = 0, .capacity = KT_DEVICE_BYTES}};
    for (int t = 0; t < 2; t++) {
        brg_device *plan = NULL;
        CHECK_OK(brg_device_create_planning(&targets[t], 7, &plan));
        if (!plan) continue;
        brg_tensor ps, pl, pc;
        const int64_t ss[2] = {64, 10}, rows = 64, one = 1;
        CHECK_OK(brg_tensor_alloc(plan, BRG_F32, 2, ss, "scores", &ps));
        CHECK_OK(brg_tensor_alloc(plan, BRG_I32, 1, &rows, "labels", &pl));
        CHECK_OK(brg_tensor_alloc(plan, BRG_I32, 1, &one, "count", &pc));
        brg_op pop;
        op_init(&pop, BRG_OP_COUNT_CORRECT);
        pop.n_in = 2, pop.in[0] = &ps, pop.in[1] = &pl, pop.n_out = 1, pop.out[0] = &pc;
        size_t ws = 1;
        CHECK_OK(brg_device_workspace_bytes(plan, &pop, &ws));
        CHECK(ws == 0);
        const size_t in_use = brg_device_in_use(plan);
        CHECK_OK(brg_device_run(plan, &pop));
        CHECK(brg_device_in_use(plan) == in_use);
        op_init(&pop, BRG_OP_CHECK_FINITE);
        pop.p.finite.tag = 1;
        pop.n_in = 1, pop.in[0] = &ps, pop.n_out = 1, pop.out[0] = &pc;
        ws = 1;
        CHECK_OK(brg_device_workspace_bytes(plan, &pop, &ws));
        CHECK(ws == 0);
        CHECK_OK(brg_device_run(plan, &pop));
        pop.p.finite.tag = 0;
        brg_clear_error();
        CHECK_STATUS(brg_device_run(plan, &pop), BRG_ERR_INVALID_ARGUMENT);
        CHECK_ERROR_HAS("check_finite");
        brg_tensor_free(&pc);
        brg_tensor_free(&pl);
        brg_tensor_free(&ps);
        brg_device_destroy(plan);
    }
}

/* A label outside [0, K) passes validation (it is data) and must be refused
 * when the kernel runs, forward and backward. */
static void label_out_of_range(void)
{
    const int64_t ls[2] = {3, 4}, rows = 3, one = 1;
    brg_tensor logits, labels, loss, probs, dlogits;
    CHECK_OK(brg_tensor_alloc(kt_dev, BRG_F32, 2, ls, "logits", &logits));
    CHECK_OK(brg_tensor_alloc(kt_dev, BRG_I32, 1, &rows, "labels", &labels));
    CHECK_OK(brg_tensor_alloc(kt_dev, BRG_F32, 1, &one, "loss", &loss));
    CHECK_OK(brg_tensor_alloc(kt_dev, BRG_F32, 2, ls, "probs", &probs));
    CHECK_OK(brg_tensor_alloc(kt_dev, BRG_F32, 2, ls, "dlogits", &dlogits));
    CHECK_OK(brg_device_memset_zero(kt_dev, logits.data, brg_tensor_bytes(&logits)));
    CHECK_OK(brg_device_memset_zero(kt_dev, probs.data, brg_tensor_bytes(&probs)));
    brg_op fwd, bwd;
    op_init(&fwd, BRG_OP_SOFTMAX_XENT_FORWARD);
    fwd.n_in = 2, fwd.in[0] = &logits, fwd.in[1] = &labels, fwd.n_out = 2, fwd.out[0] = &loss, fwd.out[1] = &probs;
    op_init(&bwd, BRG_OP_SOFTMAX_XENT_BACKWARD);
    bwd.p.xent.grad_scale = 1.0f / 3.0f;
    bwd.n_in = 2, bwd.in[0] = &probs, bwd.in[1] = &labels, bwd.n_out = 1, bwd.out[0] = &dlogits;

    const int32_t good[3] = {0, 3, 1}, high[3] = {0, 4, 1}, negative[3] = {-1, 0, 0};
    CHECK_OK(brg_device_copy_in(kt_dev, labels.data, good, sizeof good));
    CHECK_OK(brg_device_run(kt_dev, &fwd));
    CHECK_OK(brg_device_run(kt_dev, &bwd));
    const int32_t *bad[2] = {high, negative};
    for (int i = 0; i < 2; i++) {
        CHECK_OK(brg_device_copy_in(kt_dev, labels.data, bad[i], sizeof good));
        brg_clear_error();
        brg_status st = brg_device_run(kt_dev, &fwd);
        CHECK_MSG(st == BRG_ERR_INVALID_ARGUMENT, "forward with label %d returned %s", i ? -1 : 4,
                  brg_status_string(st));
        CHECK_ERROR_HAS("label");
        CHECK_ERROR_HAS("softmax_xent_forward");
        brg_clear_error();
        st = brg_device_run(kt_dev, &bwd);
        CHECK_MSG(st == BRG_ERR_INVALID_ARGUMENT, "backward with label %d returned %s", i ? -1 : 4,
                  brg_status_string(st));
        CHECK_ERROR_HAS("label");
        CHECK_ERROR_HAS("softmax_xent_backward");
    }
    brg_tensor_free(&dlogits);
    brg_tensor_free(&probs);
    brg_tensor_free(&loss);
    brg_tensor_free(&labels);
    brg_tensor_free(&logits);
}

/* Host memory, or another device's memory, is not this device's. */
static void foreign_tensors(void)
{
    static float host_x[2 * 3 * 4 * 4];
    brg_tensor hx = brg_tensor_nchw(host_x, 2, 3, 4, 4);
    brg_tensor *y = dt(4, 2, 3, 4, 4);
    brg_op op;
    op_init(&op, BRG_OP_RELU_FORWARD);
    op.n_in = 1, op.in[0] = &hx, op.n_out = 1, op.out[0] = y;
    brg_clear_error();
    CHECK_STATUS(brg_device_run(kt_dev, &op), BRG_ERR_INVALID_ARGUMENT);
    CHECK_ERROR_HAS("relu_forward");
    CHECK_ERROR_HAS("not in its memory");

    brg_device *other = NULL;
    CHECK_OK(brg_device_create_cpu((size_t)1 << 20, 1, &other));
    if (!other) return;
    brg_tensor ox;
    const int64_t s[4] = {2, 3, 4, 4};
    CHECK_OK(brg_tensor_alloc(other, BRG_F32, 4, s, "elsewhere", &ox));
    op.in[0] = &ox;
    brg_clear_error();
    CHECK_STATUS(brg_device_run(kt_dev, &op), BRG_ERR_INVALID_ARGUMENT);
    CHECK_ERROR_HAS("not in its memory");
    brg_tensor_free(&ox);
    brg_device_destroy(other);
}

/* A device just too small for a convolution's workspace: the run fails with
 * BRG_ERR_OUT_OF_MEMORY naming the workspace, and gives back what it took. */
static void workspace_out_of_memory(void)
{
    const int64_t xs[4] = {1, 8, 16, 16}, ws[4] = {8, 8, 3, 3};
    brg_tensor x, w, y;
    brg_op op;
    op_init(&op, BRG_OP_CONV2D_FORWARD);
    op.p.conv = (brg_conv2d_params){1, 1, 1, 1};
    size_t need = 0;
    /* Measure on the test device first. */
    CHECK_OK(brg_tensor_alloc(kt_dev, BRG_F32, 4, xs, "x", &x));
    CHECK_OK(brg_tensor_alloc(kt_dev, BRG_F32, 4, ws, "w", &w));
    CHECK_OK(brg_tensor_alloc(kt_dev, BRG_F32, 4, xs, "y", &y));
    op.n_in = 2, op.in[0] = &x, op.in[1] = &w, op.n_out = 1, op.out[0] = &y;
    CHECK_OK(brg_device_workspace_bytes(kt_dev, &op, &need));
    size_t tensors = brg_arena_rounded(brg_tensor_bytes(&x)) + brg_arena_rounded(brg_tensor_bytes(&w)) +
                     brg_arena_rounded(brg_tensor_bytes(&y));
    brg_tensor_free(&y);
    brg_tensor_free(&w);
    brg_tensor_free(&x);
    if (need == 0) {
        printf("note: this backend's 3x3 convolution takes no workspace; the workspace OOM check does not apply\n");
        return;
    }
    brg_device *tiny = NULL;
    CHECK_OK(brg_device_create_cpu(tensors + brg_arena_rounded(need) - BRG_ARENA_ALIGN, 2, &tiny));
    if (!tiny) return;
    CHECK_OK(brg_tensor_alloc(tiny, BRG_F32, 4, xs, "x", &x));
    CHECK_OK(brg_tensor_alloc(tiny, BRG_F32, 4, ws, "w", &w));
    CHECK_OK(brg_tensor_alloc(tiny, BRG_F32, 4, xs, "y", &y));
    size_t before = brg_device_in_use(tiny);
    brg_clear_error();
    CHECK_STATUS(brg_device_run(tiny, &op), BRG_ERR_OUT_OF_MEMORY);
    CHECK_ERROR_HAS("workspace");
    CHECK_ERROR_HAS("conv2d_forward");
    CHECK(brg_device_in_use(tiny) == before);
    brg_tensor_free(&y);
    brg_tensor_free(&w);
    brg_tensor_free(&x);
    CHECK(brg_device_in_use(tiny) == 0);
    brg_device_destroy(tiny);
}

/* The harness's own contract. */
static void harness_api(void)
{
    char label[128];
    brg_check_case c = {.family = BRG_CHECK_CONV2D, .ndim = 4, .x_shape = {2, 3, 9, 9}, .out_features = 4,
                        .kernel_h = 1, .kernel_w = 7, .stride_h = 1, .stride_w = 2, .pad_h = 0, .pad_w = 3,
                        .bias = 1};
    brg_check_case_label(&c, label, sizeof label);
    CHECK_MSG(strcmp(label, "conv2d x[2,3,9,9] k4 1x7 s1x2 p0x3 bias") == 0, "label \"%s\"", label);
    char small[8];
    brg_check_case_label(&c, small, sizeof small);
    CHECK(strlen(small) == 7);

    for (int f = 0; f < BRG_CHECK_FAMILY_COUNT; f++) {
        brg_check_family back;
        CHECK_OK(brg_check_family_parse(brg_check_family_name((brg_check_family)f), &back));
        CHECK(back == (brg_check_family)f);
        double tf = 0, tb = 0, ta = 0;
        brg_check_tolerances((brg_check_family)f, &tf, &tb, &ta);
        CHECK(tf > 0 && tb > 0 && ta > 0 && tf < 1e-3 && tb <= 1e-3 && ta < 1e-3);
        /* Random cases are a function of the seed. */
        brg_check_case r1, r2, r3;
        CHECK_OK(brg_check_random_case((brg_check_family)f, 42, &r1));
        CHECK_OK(brg_check_random_case((brg_check_family)f, 42, &r2));
        CHECK(memcmp(&r1, &r2, sizeof r1) == 0);
        int differs = 0;
        for (uint64_t s = 43; s < 53 && !differs; s++) {
            CHECK_OK(brg_check_random_case((brg_check_family)f, s, &r3));
            differs = memcmp(&r1, &r3, sizeof r1) != 0;
        }
        CHECK_MSG(differs, "random %s cases do not depend on the seed", brg_check_family_name((brg_check_family)f));
    }
    brg_check_family fam;
    brg_check_case scratch;
    brg_clear_error();
    CHECK_STATUS(brg_check_family_parse("convolution", &fam), BRG_ERR_INVALID_ARGUMENT);
    CHECK_ERROR_HAS("conv2d");
    CHECK_STATUS(brg_check_random_case(BRG_CHECK_FAMILY_COUNT, 1, &scratch), BRG_ERR_INVALID_ARGUMENT);

    const brg_check_case *defaults = NULL;
    int n = brg_check_default_cases(&defaults);
    CHECK(n >= BRG_CHECK_FAMILY_COUNT && defaults != NULL);
    int seen[BRG_CHECK_FAMILY_COUNT] = {0};
    for (int i = 0; i < n; i++) seen[defaults[i].family]++;
    for (int f = 0; f < BRG_CHECK_FAMILY_COUNT; f++)
        CHECK_MSG(seen[f] > 0, "no default case for %s", brg_check_family_name((brg_check_family)f));

    /* Malformed cases are refused, not run. */
    size_t before = brg_device_in_use(kt_dev);
    brg_check_result r;
    brg_check_case bad = {.family = BRG_CHECK_CONV2D, .ndim = 4, .x_shape = {1, 2, 3, 3}, .out_features = 2,
                          .kernel_h = 5, .kernel_w = 5};
    CHECK_STATUS(brg_check_run(kt_dev, &bad, 1, &r), BRG_ERR_INVALID_ARGUMENT);
    CHECK(!r.passed && r.message[0] != '\0');
    bad = (brg_check_case){.family = BRG_CHECK_MAXPOOL, .ndim = 4, .x_shape = {1, 2, 5, 5}, .kernel_h = 2,
                           .kernel_w = 2, .pad_h = 2};
    CHECK_STATUS(brg_check_run(kt_dev, &bad, 1, &r), BRG_ERR_INVALID_ARGUMENT);
    bad = (brg_check_case){.family = BRG_CHECK_DROPOUT, .ndim = 1, .x_shape = {5}, .rate = 1.0f};
    CHECK_STATUS(brg_check_run(kt_dev, &bad, 1, &r), BRG_ERR_INVALID_ARGUMENT);
    bad = (brg_check_case){.family = BRG_CHECK_CONCAT, .ndim = 4, .x_shape = {1, 0, 2, 2}, .n_parts = 0};
    CHECK_STATUS(brg_check_run(kt_dev, &bad, 1, &r), BRG_ERR_INVALID_ARGUMENT);
    bad = (brg_check_case){.family = (brg_check_family)99, .ndim = 1, .x_shape = {5}};
    CHECK_STATUS(brg_check_run(kt_dev, &bad, 1, &r), BRG_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(brg_check_run(NULL, &c, 1, &r), BRG_ERR_INVALID_ARGUMENT);
    CHECK(brg_device_in_use(kt_dev) == before);

    /* The same case and seed give the same errors (fresh inputs come from the seed alone). */
    brg_check_result r1, r2;
    CHECK_OK(brg_check_run(kt_dev, &c, 9, &r1));
    CHECK_OK(brg_check_run(kt_dev, &c, 9, &r2));
    CHECK(r1.passed && r2.passed);
    CHECK(r1.forward_error == r2.forward_error && r1.backward_error == r2.backward_error);
    CHECK(r1.forward_error > 0.0 && r1.backward_error > 0.0 && r1.accumulate_error > 0.0);
    CHECK(r1.fd_points > 0 && r1.forward_error < r1.forward_tol && r1.backward_error < r1.backward_tol);

    /* A device too small for the case: an out-of-memory status, a failed
     * result, and the little it managed to allocate given back. */
    brg_device *tiny = NULL;
    CHECK_OK(brg_device_create_cpu(4096, 3, &tiny));
    if (tiny) {
        CHECK_STATUS(brg_check_run(tiny, &c, 1, &r), BRG_ERR_OUT_OF_MEMORY);
        CHECK(!r.passed && r.status == BRG_ERR_OUT_OF_MEMORY && strstr(r.message, "out of memory"));
        CHECK(brg_device_in_use(tiny) == 0);
        brg_device_destroy(tiny);
    }
}

/* The extra oracle (brg_check_options.oracle): a second CPU device agrees
 * with the first to the bit on every case of every family; a planning
 * device, whose ops compute nothing, makes the case fail and says so; and
 * the oracle's memory is given back. */
static void oracle_option(void)
{
    brg_device *cpu2 = NULL, *plan = NULL;
    CHECK_OK(brg_device_create_cpu(KT_DEVICE_BYTES, 1, &cpu2));
    brg_device_spec target = {.backend = BRG_BACKEND_CPU, .gpu = -1, .capacity = KT_DEVICE_BYTES};
    CHECK_OK(brg_device_create_planning(&target, 2, &plan));
    if (!cpu2 || !plan) goto done;
    const brg_check_case *defaults = NULL;
    const int n = brg_check_default_cases(&defaults);
    brg_check_options opts = {.oracle = cpu2};
    for (int i = 0; i < n; i++) {
        brg_check_result r;
        CHECK_OK(brg_check_run_opts(kt_dev, &defaults[i], 5, &opts, &r));
        CHECK_MSG(r.passed && r.oracle_error == 0.0, "%s with a CPU oracle: %s (oracle error %g)", r.label, r.message,
                  r.oracle_error);
    }
    CHECK(brg_device_in_use(cpu2) == 0);
    opts.oracle = plan;
    brg_check_result r;
    CHECK_OK(brg_check_run_opts(kt_dev, &defaults[0], 5, &opts, &r));
    CHECK_MSG(!r.passed && strstr(r.message, "and the oracle plan:2") && r.oracle_error > 1.0,
              "a planning oracle should disagree: %s", r.message);
done:
    brg_device_destroy(cpu2);
    brg_device_destroy(plan);
}

/* Which tensors may be channel-blocked, by role (brg_op_may_block, which
 * both validation and the check harness's twin ask): refused where the
 * role forbids it, with a message naming the role. Validation only: these
 * ops never reach a kernel. */
static void blocked_roles(void)
{
    brg_op op;
    brg_tensor x = {0}, w = {0}, y = {0}, g = {0};
    const int64_t xs[4] = {2, 8, 5, 5}, ws[4] = {8, 8, 3, 3}, ys[4] = {2, 8, 3, 3}, gs[4] = {2, 8, 1, 1};
    float dummy[1];
    CHECK_OK(brg_tensor_init(&x, dummy, BRG_F32, 4, xs, NULL));
    CHECK_OK(brg_tensor_init(&w, dummy, BRG_F32, 4, ws, NULL));
    CHECK_OK(brg_tensor_init(&y, dummy, BRG_F32, 4, ys, NULL));
    CHECK_OK(brg_tensor_init(&g, dummy, BRG_F32, 4, gs, NULL));

    op_init(&op, BRG_OP_CONV2D_FORWARD);
    op.n_in = 2, op.in[0] = &x, op.in[1] = &w, op.n_out = 1, op.out[0] = &y;
    CHECK(brg_op_may_block(&op, 0, 0) && !brg_op_may_block(&op, 0, 1) && brg_op_may_block(&op, 1, 0));
    CHECK(!brg_op_blocks_in_one_layout(op.kind));
    x.block = 8; /* each image tensor as it comes */
    CHECK_OK(brg_op_validate(&op));
    w.block = 8;
    CHECK_STATUS(brg_op_validate(&op), BRG_ERR_INVALID_ARGUMENT);
    CHECK_ERROR_HAS("the filter must be plain");
    w.block = 0;
    op_init(&op, BRG_OP_CONV2D_BACKWARD_FILTER);
    op.n_in = 2, op.in[0] = &x, op.in[1] = &y, op.n_out = 1, op.out[0] = &w;
    CHECK(brg_op_may_block(&op, 0, 0) && brg_op_may_block(&op, 0, 1) && !brg_op_may_block(&op, 1, 0));

    op_init(&op, BRG_OP_RELU_FORWARD); /* one layout for all */
    op.n_in = 1, op.in[0] = &x, op.n_out = 1, op.out[0] = &x;
    CHECK(brg_op_may_block(&op, 0, 0) && brg_op_blocks_in_one_layout(op.kind));
    CHECK_OK(brg_op_validate(&op));
    brg_tensor x2 = x;
    x2.block = 0;
    op.out[0] = &x2;
    CHECK_STATUS(brg_op_validate(&op), BRG_ERR_INVALID_ARGUMENT);
    CHECK_ERROR_HAS("one layout");

    op_init(&op, BRG_OP_GLOBAL_AVGPOOL_FORWARD); /* the [N, C, 1, 1] side plain */
    op.n_in = 1, op.in[0] = &x, op.n_out = 1, op.out[0] = &g;
    CHECK(brg_op_may_block(&op, 0, 0) && !brg_op_may_block(&op, 1, 0));
    CHECK_OK(brg_op_validate(&op));
    g.block = 8;
    CHECK_STATUS(brg_op_validate(&op), BRG_ERR_INVALID_ARGUMENT);
    CHECK_ERROR_HAS("[N, C, 1, 1] side");
    op_init(&op, BRG_OP_GLOBAL_AVGPOOL_BACKWARD);
    op.n_in = 1, op.in[0] = &g, op.n_out = 1, op.out[0] = &x;
    CHECK(!brg_op_may_block(&op, 0, 0) && brg_op_may_block(&op, 1, 0));
    g.block = 0;

    op_init(&op, BRG_OP_DROPOUT_FORWARD); /* a kind that takes none */
    op.n_in = 1, op.in[0] = &x, op.n_out = 1, op.out[0] = &x;
    CHECK(!brg_op_takes_blocked(op.kind) && !brg_op_may_block(&op, 0, 0));
    CHECK_STATUS(brg_op_validate(&op), BRG_ERR_INVALID_ARGUMENT);
    CHECK_ERROR_HAS("plain NCHW tensors only");
    CHECK(!brg_op_may_block(NULL, 0, 0));
}

/* The blocked twin (check.h): where the device keeps blocked activations,
 * every default case of a family whose ops take blocked tensors, with
 * channels in whole blocks, runs ops again blocked and passes; with the
 * plain layout chosen, no twin runs. */
static void blocked_twin(void)
{
    const brg_check_case *defaults = NULL;
    const int n = brg_check_default_cases(&defaults);
    const int block = brg_device_channel_block(kt_dev);
    if (!block) {
        printf("# no blocked layout on this device (%s convolution, %s layout): twins not checked\n",
               brg_cpu_convolution(), brg_cpu_layout());
        return;
    }
    int families_twinned[BRG_CHECK_FAMILY_COUNT] = {0}, twins = 0;
    for (int i = 0; i < n; i++) {
        brg_check_result r;
        CHECK_OK(brg_check_run(kt_dev, &defaults[i], 11, &r));
        CHECK_MSG(r.passed, "%s: %s", r.label, r.message);
        twins += r.blocked_twins;
        if (r.blocked_twins) families_twinned[defaults[i].family] = 1;
    }
    const brg_check_family want[] = {BRG_CHECK_CONV2D,      BRG_CHECK_BATCHNORM_TRAIN, BRG_CHECK_BATCHNORM_INFER,
                                     BRG_CHECK_BATCHNORM_SYNC, BRG_CHECK_RELU,         BRG_CHECK_GLOBAL_AVGPOOL,
                                     BRG_CHECK_CONCAT,      BRG_CHECK_ADD,             BRG_CHECK_CHECK_FINITE,
                                     BRG_CHECK_MAXPOOL,     BRG_CHECK_AVGPOOL};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        CHECK_MSG(families_twinned[want[i]], "no default case of %s ran a blocked twin",
                  brg_check_family_name(want[i]));
    CHECK_MSG(!families_twinned[BRG_CHECK_DROPOUT] && !families_twinned[BRG_CHECK_LINEAR],
              "dropout and linear take plain tensors only");
    printf("# %d ops ran blocked by %d as well, with the same bits\n", twins, block);
    CHECK_OK(brg_cpu_set_layout("plain"));
    CHECK(brg_device_channel_block(kt_dev) == 0);
    brg_check_result r;
    CHECK_OK(brg_check_run(kt_dev, &defaults[0], 11, &r));
    CHECK(r.passed && r.blocked_twins == 0);
    CHECK_OK(brg_cpu_set_layout("blocked"));
    CHECK_STATUS(brg_cpu_set_layout("nhwc"), BRG_ERR_INVALID_ARGUMENT);
}

int main(void)
{
    kt_open();
    conv_rejections();
    other_rejections();
    free_live();
    reduction_rejections();
    free_live();
    label_out_of_range();
    foreign_tensors();
    free_live();
    workspace_out_of_memory();
    harness_api();
    oracle_option();
    blocked_roles();
    blocked_twin();
    return kt_finish("test_kernels_validation");
}
