/* Stages and the trainer: gradients against finite differences, micro-batch
 * accumulation, a pipeline of stages against one stage, optimizer formulas,
 * reproducibility, memory accounting and the stash rule, out-of-memory
 * messages, and (where Fashion-MNIST is installed) a short real run. */
#define TEST_RNG_SEED 0x853c49e6748fea9bULL /* its own data: the tolerances were set on it */
#include "pipeline_test.h"

#ifndef BRG_FASHION_MNIST_DIR
#define BRG_FASHION_MNIST_DIR ""
#endif

/* A model for the gradient checks: conv, relu, an Inception-like pair of
 * branches joined by a concat, a residual add, maxpool, linear. Blocks:
 * stem | mixed | head, with 'r1' crossing from stem to the add in mixed. */
static brg_model *tiny_model(void)
{
    brg_model *m = NULL;
    brg_status st = brg_model_create("tiny", 2, 4, 4, &m);
    const char *cat_in[2] = {"a", "b"};
    if (st == BRG_OK) st = brg_model_begin_block(m, "stem");
    if (st == BRG_OK) st = brg_model_add_conv2d(m, "c1", "input", 4, 3, 3, 1, 1, 1, 1, 1);
    if (st == BRG_OK) st = brg_model_add_relu(m, "r1", "c1");
    if (st == BRG_OK) st = brg_model_begin_block(m, "mixed");
    if (st == BRG_OK) st = brg_model_add_conv2d(m, "a", "r1", 2, 1, 1, 1, 1, 0, 0, 1);
    if (st == BRG_OK) st = brg_model_add_conv2d(m, "b", "r1", 2, 3, 3, 1, 1, 1, 1, 0);
    if (st == BRG_OK) st = brg_model_add_concat(m, "cat", cat_in, 2);
    if (st == BRG_OK) st = brg_model_add_add(m, "sum", "cat", "r1");
    if (st == BRG_OK) st = brg_model_add_relu(m, "r2", "sum");
    if (st == BRG_OK) st = brg_model_begin_block(m, "head");
    if (st == BRG_OK) st = brg_model_add_maxpool(m, "pool", "r2", 2, 2, 0);
    if (st == BRG_OK) st = brg_model_add_linear(m, "fc", "pool", 5, 1);
    return finish_model(m, st);
}

/* Three blocks with a skip that crosses the middle one: r1 is read by
 * conv2 (block 1) and by the add (block 2), so a middle stage passes it
 * through as input and output at once. */
static brg_model *three_block_model(void)
{
    brg_model *m = NULL;
    brg_status st = brg_model_create("skip", 1, 8, 8, &m);
    if (st == BRG_OK) st = brg_model_begin_block(m, "b0");
    if (st == BRG_OK) st = brg_model_add_conv2d(m, "conv1", "input", 3, 3, 3, 1, 1, 1, 1, 1);
    if (st == BRG_OK) st = brg_model_add_relu(m, "r1", "conv1");
    if (st == BRG_OK) st = brg_model_begin_block(m, "b1");
    if (st == BRG_OK) st = brg_model_add_conv2d(m, "conv2", "r1", 3, 3, 3, 1, 1, 1, 1, 1);
    if (st == BRG_OK) st = brg_model_add_relu(m, "r2", "conv2");
    if (st == BRG_OK) st = brg_model_begin_block(m, "b2");
    if (st == BRG_OK) st = brg_model_add_add(m, "sum", "r2", "r1");
    if (st == BRG_OK) st = brg_model_add_maxpool(m, "pool", "sum", 2, 2, 0);
    if (st == BRG_OK) st = brg_model_add_linear(m, "fc", "pool", 4, 1);
    return finish_model(m, st);
}

/* For the gradient check of the training-mode layers: BatchNorm after a
 * convolution and after a linear layer, dropout, average pooling. */
static brg_model *bn_dropout_model(void)
{
    brg_model *m = NULL;
    brg_status st = brg_model_create("bnd", 2, 4, 4, &m);
    if (st == BRG_OK) st = brg_model_begin_block(m, "features");
    if (st == BRG_OK) st = brg_model_add_conv2d(m, "c1", "input", 4, 3, 3, 1, 1, 1, 1, 0);
    if (st == BRG_OK) st = brg_model_add_batchnorm(m, "bn1", "c1", 1e-5f, 1, 1);
    if (st == BRG_OK) st = brg_model_add_relu(m, "r1", "bn1");
    if (st == BRG_OK) st = brg_model_add_dropout(m, "d1", "r1", 0.3f);
    if (st == BRG_OK) st = brg_model_add_avgpool(m, "ap", "d1", 2, 2, 0, 1);
    if (st == BRG_OK) st = brg_model_begin_block(m, "classifier");
    if (st == BRG_OK) st = brg_model_add_linear(m, "fc1", "ap", 6, 0);
    if (st == BRG_OK) st = brg_model_add_batchnorm(m, "bn2", "fc1", 1e-5f, 1, 1);
    if (st == BRG_OK) st = brg_model_add_relu(m, "r2", "bn2");
    if (st == BRG_OK) st = brg_model_add_dropout(m, "d2", "r2", 0.25f);
    if (st == BRG_OK) st = brg_model_add_linear(m, "fc", "d2", 5, 1);
    return finish_model(m, st);
}

/* A small CNN with BatchNorm and dropout (for reproducibility), or without
 * (for the real run). */
static brg_model *cnn_model(int bn_dropout, int64_t side, int64_t classes)
{
    brg_model *m = NULL;
    brg_status st = brg_model_create("cnn", 1, side, side, &m);
    if (st == BRG_OK) st = brg_model_begin_block(m, "conv1");
    if (st == BRG_OK) st = brg_model_add_conv2d(m, "c1", "input", 8, 3, 3, 1, 1, 1, 1, !bn_dropout);
    if (st == BRG_OK && bn_dropout) st = brg_model_add_batchnorm(m, "bn1", "c1", 1e-5f, 1, 1);
    if (st == BRG_OK) st = brg_model_add_relu(m, "r1", bn_dropout ? "bn1" : "c1");
    if (st == BRG_OK) st = brg_model_add_maxpool(m, "p1", "r1", 2, 2, 0);
    if (st == BRG_OK) st = brg_model_begin_block(m, "conv2");
    if (st == BRG_OK) st = brg_model_add_conv2d(m, "c2", "p1", 16, 3, 3, 1, 1, 1, 1, 1);
    if (st == BRG_OK) st = brg_model_add_relu(m, "r2", "c2");
    if (st == BRG_OK) st = brg_model_add_maxpool(m, "p2", "r2", 2, 2, 0);
    if (st == BRG_OK) st = brg_model_begin_block(m, "head");
    if (st == BRG_OK && bn_dropout) st = brg_model_add_dropout(m, "drop", "p2", 0.25f);
    if (st == BRG_OK) st = brg_model_add_linear(m, "fc", bn_dropout ? "drop" : "p2", (int)classes, 1);
    return finish_model(m, st);
}

static brg_stage_config stage_config(int index, int first, int last, int max_batch, int slots, uint64_t seed)
{
    brg_stage_config c;
    memset(&c, 0, sizeof c);
    c.index = index;
    c.first_block = first;
    c.last_block = last;
    c.max_batch = max_batch;
    c.slots = slots;
    c.optimizer = brg_optimizer_config_init(BRG_OPTIMIZER_SGD);
    c.seed = seed;
    return c;
}

/* Fill the last stage's labels and the first stage's input for a
 * single-stage run of samples [first, first + n). */
static brg_status load(brg_stage *s, int slot, const float *images, const int32_t *labels, int64_t first, int n)
{
    brg_tensor x, y;
    int64_t sample = sample_floats(brg_stage_model(s));
    brg_status st = brg_stage_input(s, slot, 0, n, &x);
    if (st == BRG_OK)
        st = brg_device_copy_in(brg_stage_device(s), x.data, images + first * sample, brg_tensor_bytes(&x));
    if (st == BRG_OK) st = brg_stage_labels(s, slot, n, &y);
    if (st == BRG_OK) st = brg_device_copy_in(brg_stage_device(s), y.data, labels + first, brg_tensor_bytes(&y));
    return st;
}

/* Mean loss of samples [0, n) in eval mode (no stash). */
static double eval_loss(brg_stage *s, const float *images, const int32_t *labels, int n)
{
    brg_pass pass = {BRG_PASS_EVAL, 1, 0};
    brg_stage_result r = {0.0f, 0, 0, NULL};
    brg_status st = load(s, 0, images, labels, 0, n);
    if (st == BRG_OK) st = brg_stage_forward(s, 0, &pass, &r);
    CHECK_OK(st);
    return r.loss;
}

/* Train forward and backward of samples [first, first + m) with loss scale. */
static brg_status fwd_bwd(brg_stage *s, const float *images, const int32_t *labels, int64_t first, int m,
                          float scale, float *loss)
{
    brg_pass pass = {BRG_PASS_TRAIN, 1, first};
    brg_stage_result r = {0.0f, 0, 0, NULL};
    brg_status st = load(s, 0, images, labels, first, m);
    if (st == BRG_OK) st = brg_stage_forward(s, 0, &pass, &r);
    if (st == BRG_OK) st = brg_stage_backward(s, 0, scale);
    if (loss) *loss = r.loss;
    return st;
}

/* All gradients of a stage's trainable parameters, concatenated on the host
 * (malloc'd; *count floats). */
static float *collect_grads(brg_stage *s, int64_t *count)
{
    return gather(brg_stage_model(s), &s, 1, GATHER_GRADS | GATHER_TRAINABLE | GATHER_HELD_ONLY, NULL, count);
}

/* ---- (a) gradients against central finite differences ---- */

/* Mean loss of samples [0, n) by a forward pass in `mode`, keeping nothing:
 * train mode uses the batch statistics and the dropout masks of step 1,
 * the same as the backward being checked. */
static double pass_loss(brg_stage *s, brg_pass_mode mode, const float *images, const int32_t *labels, int n)
{
    brg_pass pass = {mode, 1, 0};
    brg_stage_result r = {0.0f, 0, 0, NULL};
    brg_status st = load(s, 0, images, labels, 0, n);
    if (st == BRG_OK) st = brg_stage_forward(s, 0, &pass, &r);
    CHECK_OK(st);
    brg_stage_discard(s, 0);
    return r.loss;
}

/* Check the parameter gradients of model m (all blocks in one stage) on n
 * random samples against central differences of the loss in `mode`. */
static void gradient_check(brg_model *m, brg_pass_mode mode, int n, int min_checked)
{
    brg_device *dev = NULL;
    brg_stage *s = NULL;
    const int64_t sample = sample_floats(m);
    const int classes = (int)brg_model_classes(m);
    float *images = malloc((size_t)(n * sample) * sizeof *images);
    int32_t *labels = malloc((size_t)n * sizeof *labels);
    if (!images || !labels) goto done;
    fill_samples(images, labels, n, sample, classes);
    CHECK_OK(test_cpu_device(8 * MiB, 0, &dev));
    brg_stage_config c = stage_config(0, 0, brg_model_block_count(m) - 1, n, 1, 11);
    CHECK_OK(brg_stage_create(m, dev, &c, &s));
    if (!s) goto done;
    /* Random parameters, biases included: initial biases are 0, which puts
     * a ReLU exactly on its kink wherever the layer's input is all zero
     * (after a ReLU), and finite differences across a kink measure half the
     * one-sided slope there. */
    for (int l = 0; l < brg_model_layer_count(m); l++) {
        const brg_layer *ly = brg_model_get_layer(m, l);
        for (int i = 0; i < brg_layer_param_count(ly, m); i++) {
            brg_tensor p;
            CHECK_OK(brg_stage_param(s, l, i, &p));
            brg_param_info info;
            brg_layer_param(ly, m, i, &info);
            if (!info.trainable) continue;
            for (int64_t e = 0; e < brg_tensor_numel(&p); e++) {
                float v = 0.5f * frand() + (strcmp(info.name, "gamma") == 0 ? 1.0f : 0.0f);
                CHECK_OK(brg_device_copy_in(dev, (float *)p.data + e, &v, sizeof v));
            }
        }
    }
    brg_pass pass = {BRG_PASS_TRAIN, 1, 0};
    CHECK_OK(load(s, 0, images, labels, 0, n));
    CHECK_OK(brg_stage_forward(s, 0, &pass, NULL));
    CHECK_OK(brg_stage_backward(s, 0, 1.0f / (float)n));

    /* Every trainable parameter tensor: a handful of spread-out elements.
     * Central differences at two steps; where they disagree, a ReLU or a
     * max-pool choice flips inside the step (a kink) and the point is
     * skipped, since neither difference measures the derivative there. */
    const double h = 1e-3;
    int checked = 0, bad = 0, kinks = 0;
    for (int l = 0; l < brg_model_layer_count(m); l++) {
        const brg_layer *ly = brg_model_get_layer(m, l);
        for (int i = 0; i < brg_layer_param_count(ly, m); i++) {
            brg_param_info info;
            brg_layer_param(ly, m, i, &info);
            if (!info.trainable) continue;
            brg_tensor p, g;
            CHECK_OK(brg_stage_param(s, l, i, &p));
            CHECK_OK(brg_stage_grad(s, l, i, &g));
            float *grad = malloc((size_t)info.count * sizeof *grad);
            if (!grad) continue;
            CHECK_OK(brg_device_copy_out(dev, grad, g.data, brg_tensor_bytes(&g)));
            int64_t picks = info.count < 6 ? info.count : 6;
            for (int64_t k = 0; k < picks; k++) {
                int64_t e = k * info.count / picks + (k * 7) % (info.count / picks ? info.count / picks : 1);
                float *pe = (float *)p.data + e, orig;
                double fd[2];
                CHECK_OK(brg_device_copy_out(dev, &orig, pe, sizeof orig));
                for (int j = 0; j < 2; j++) {
                    double hj = j ? h / 2 : h;
                    float plus = (float)(orig + hj), minus = (float)(orig - hj);
                    brg_device_copy_in(dev, pe, &plus, sizeof plus);
                    double lp = pass_loss(s, mode, images, labels, n);
                    brg_device_copy_in(dev, pe, &minus, sizeof minus);
                    double lm = pass_loss(s, mode, images, labels, n);
                    /* The step actually taken in float, not hj. */
                    fd[j] = (lp - lm) / ((double)plus - (double)minus);
                }
                brg_device_copy_in(dev, pe, &orig, sizeof orig);
                double an = grad[e];
                double tol = 1e-2 * fmax(fabs(fd[1]), fabs(an)) + 3e-4;
                if (fabs(fd[0] - fd[1]) > tol / 2) {
                    kinks++;
                    continue;
                }
                checked++;
                if (fabs(fd[1] - an) > tol) {
                    bad++;
                    fprintf(stderr, "gradient of %s.%s[%lld]: backward %.6g, finite differences %.6g\n", ly->name,
                            info.name, (long long)e, an, fd[1]);
                }
            }
            free(grad);
        }
    }
    CHECK_MSG(bad == 0, "%s: %d of %d parameter gradients disagree with finite differences", brg_model_name(m), bad,
              checked);
    CHECK_MSG(checked >= min_checked, "%s: only %d points checked, %d skipped at kinks", brg_model_name(m), checked,
              kinks);
    /* Nothing leaked. */
    CHECK(brg_device_in_use(dev) == brg_stage_persistent_bytes(s));
done:
    brg_stage_destroy(s);
    if (dev) CHECK(brg_device_in_use(dev) == 0);
    brg_device_destroy(dev);
    free(images);
    free(labels);
}

static void test_gradient_check(void)
{
    brg_model *m = tiny_model();
    if (m) gradient_check(m, BRG_PASS_EVAL, 3, 28);
    brg_model_destroy(m);
    /* BatchNorm in training mode (batch statistics) and dropout (the same
     * masks in every pass of step 1). */
    m = bn_dropout_model();
    if (m) gradient_check(m, BRG_PASS_TRAIN, 6, 28);
    brg_model_destroy(m);
}

/* ---- (b) one micro-batch of 8 == four micro-batches of 2 ---- */

static void test_microbatch_accumulation(void)
{
    brg_model *m = tiny_model();
    if (!m) return;
    brg_device *dev = NULL;
    brg_stage *s = NULL;
    float *g1 = NULL, *g4 = NULL;
    enum { N = 8 };
    const int64_t sample = sample_floats(m);
    float images[N * 2 * 4 * 4];
    int32_t labels[N];
    fill_samples(images, labels, N, sample, 5);
    CHECK_OK(test_cpu_device(8 * MiB, 0, &dev));
    brg_stage_config c = stage_config(0, 0, 2, N, 1, 5);
    CHECK_OK(brg_stage_create(m, dev, &c, &s));
    if (!s) goto done;
    float loss_all = 0.0f, loss_parts = 0.0f, l = 0.0f;
    CHECK_OK(fwd_bwd(s, images, labels, 0, N, 1.0f / N, &loss_all));
    int64_t n1 = 0, n4 = 0;
    g1 = collect_grads(s, &n1);
    CHECK_OK(brg_stage_zero_grads(s));
    for (int k = 0; k < 4; k++) {
        CHECK_OK(fwd_bwd(s, images, labels, 2 * k, 2, 1.0f / N, &l));
        loss_parts += l * 2.0f / N;
    }
    g4 = collect_grads(s, &n4);
    CHECK(g1 && g4 && n1 == n4 && n1 > 0);
    if (g1 && g4 && n1 == n4) {
        double r = rel_diff(g1, g4, n1);
        CHECK_MSG(r <= 1e-5, "micro-batch gradients differ by %.3g relative", r);
    }
    CHECK_NEAR(loss_all, loss_parts, 1e-5);
    CHECK(brg_device_in_use(dev) == brg_stage_persistent_bytes(s));
done:
    free(g1);
    free(g4);
    brg_stage_destroy(s);
    brg_device_destroy(dev);
    brg_model_destroy(m);
}

/* ---- (b2) blocked layouts inside a stage give the same bits ---- */

/* Forward and backward of N samples on one stage of blocks [first, last]
 * in the CPU layout `layout`: the loss and the gradients (malloc'd). */
static float *blocked_run(brg_model *m, const char *layout, int first, int last, const float *images,
                          const int32_t *labels, int n, float *loss, int64_t *count, int *blocked)
{
    brg_device *dev = NULL;
    brg_stage *s = NULL;
    float *g = NULL;
    CHECK_OK(brg_cpu_set_layout(layout));
    CHECK_OK(test_cpu_device(16 * MiB, 0, &dev));
    brg_stage_config c = stage_config(0, first, last, n, 1, 9);
    CHECK_OK(brg_stage_create(m, dev, &c, &s));
    if (s) {
        *blocked = 0;
        for (int t = 0; t < brg_model_tensor_count(m); t++) *blocked += brg_stage_tensor_layout(s, t) != 0;
        CHECK_OK(fwd_bwd(s, images, labels, 0, n, 1.0f / (float)n, loss));
        g = collect_grads(s, count);
    }
    brg_stage_destroy(s);
    brg_device_destroy(dev);
    return g;
}

static void test_blocked_layouts(void)
{
    brg_model *m = blockable_model();
    if (!m) return;
    enum { N = 4 };
    const int64_t sample = sample_floats(m);
    float images[N * 3 * 10 * 10];
    int32_t labels[N];
    fill_samples(images, labels, N, sample, 5);
    int64_t np = 0, nb = 0;
    float lp = 0.0f, lb = -1.0f;
    int blocked_p = -1, blocked_b = 0;
    float *gp = blocked_run(m, "plain", 0, 2, images, labels, N, &lp, &np, &blocked_p);
    float *gb = blocked_run(m, "blocked", 0, 2, images, labels, N, &lb, &nb, &blocked_b);
    brg_device *probe = NULL;
    CHECK_OK(test_cpu_device(MiB, 0, &probe));
    const int block = brg_device_channel_block(probe);
    brg_device_destroy(probe);
    CHECK(blocked_p == 0);
    if (!block) {
        printf("# CPU devices keep plain tensors here (%s convolution): blocked layouts not checked\n",
               brg_cpu_convolution());
        CHECK(blocked_b == 0);
    } else {
        /* c1 bn1 r1 mp1 and a bna ra b cat cs sum r2; not the input, c3
         * bn3 r3 (tied to dropout's input), drop, gap, c4 and fc */
        CHECK_MSG(blocked_b == 12, "%d tensors blocked, expected 12", blocked_b);
        brg_device *dev = NULL;
        brg_stage *s = NULL;
        CHECK_OK(test_cpu_device(16 * MiB, 0, &dev));
        brg_stage_config c = stage_config(0, 0, 2, N, 1, 9);
        CHECK_OK(brg_stage_create(m, dev, &c, &s));
        if (s) {
            CHECK(brg_stage_tensor_layout(s, brg_model_find_tensor(m, "mp1")) == block);
            CHECK(brg_stage_tensor_layout(s, brg_model_find_tensor(m, "c3")) == 0);
            CHECK(brg_stage_tensor_layout(s, brg_model_find_tensor(m, "gap")) == 0);
        }
        brg_stage_destroy(s);
        brg_device_destroy(dev);
    }
    CHECK(gp && gb && np == nb && np > 0);
    if (gp && gb && np == nb)
        CHECK_MSG(memcmp(gp, gb, (size_t)np * sizeof *gp) == 0, "blocked gradients differ from plain ones");
    CHECK_MSG(memcmp(&lp, &lb, sizeof lp) == 0, "loss %.9g blocked, %.9g plain", (double)lb, (double)lp);
    free(gp);
    free(gb);
    /* a stage of the middle block alone: its input and output stay plain */
    if (block) {
        brg_device *dev = NULL;
        brg_stage *s = NULL;
        CHECK_OK(test_cpu_device(16 * MiB, 0, &dev));
        brg_stage_config c = stage_config(1, 1, 1, N, 1, 9);
        CHECK_OK(brg_stage_create(m, dev, &c, &s));
        if (s) {
            CHECK(brg_stage_tensor_layout(s, brg_model_find_tensor(m, "mp1")) == 0); /* its input */
            CHECK(brg_stage_tensor_layout(s, brg_model_find_tensor(m, "r3")) == 0); /* its output */
            CHECK(brg_stage_tensor_layout(s, brg_model_find_tensor(m, "c3")) == 0); /* tied to r3 */
            CHECK(brg_stage_tensor_layout(s, brg_model_find_tensor(m, "sum")) == block);
            CHECK(brg_stage_tensor_layout(s, brg_model_find_tensor(m, "a")) == block);
        }
        brg_stage_destroy(s);
        brg_device_destroy(dev);
    }
    CHECK_OK(brg_cpu_set_layout("blocked"));
    brg_model_destroy(m);
}

/* ---- (c) a pipeline of stages on several devices == one stage ---- */

/* Run one micro-batch through stages[0..k) in order, copying boundary
 * tensors between their devices, then backward in reverse. Returns the loss. */
static brg_status pipeline_step(brg_stage **st, int k, const float *images, const int32_t *labels, int n,
                                float *loss)
{
    brg_pass pass = {BRG_PASS_TRAIN, 1, 0};
    brg_stage_result r = {0.0f, 0, 0, NULL};
    brg_tensor x, y;
    const brg_model *m = brg_stage_model(st[0]);
    brg_status s = brg_stage_input(st[0], 0, 0, n, &x);
    if (s == BRG_OK) s = brg_device_copy_in(brg_stage_device(st[0]), x.data, images, brg_tensor_bytes(&x));
    if (s == BRG_OK) s = brg_stage_labels(st[k - 1], 0, n, &y);
    if (s == BRG_OK) s = brg_device_copy_in(brg_stage_device(st[k - 1]), y.data, labels, brg_tensor_bytes(&y));
    for (int i = 0; i < k && s == BRG_OK; i++) {
        s = brg_stage_forward(st[i], 0, &pass, &r);
        if (i == k - 1 || s != BRG_OK) break;
        /* Send every output to the next stage's input of the same tensor. */
        for (int o = 0; o < brg_stage_output_count(st[i]) && s == BRG_OK; o++) {
            int t = brg_stage_output_tensor(st[i], o), j = -1;
            for (int q = 0; q < brg_stage_input_count(st[i + 1]); q++)
                if (brg_stage_input_tensor(st[i + 1], q) == t) j = q;
            CHECK_MSG(j >= 0, "output '%s' of stage %d is no input of stage %d", brg_model_get_tensor(m, t)->name, i,
                      i + 1);
            if (j < 0) return BRG_ERR_INTERNAL;
            s = brg_stage_output(st[i], 0, o, &x);
            if (s == BRG_OK) s = brg_stage_input(st[i + 1], 0, j, n, &y);
            if (s == BRG_OK)
                s = brg_device_copy_between(brg_stage_device(st[i + 1]), y.data, brg_stage_device(st[i]), x.data,
                                            brg_tensor_bytes(&x));
        }
        CHECK(brg_stage_input_count(st[i + 1]) == brg_stage_output_count(st[i]));
        if (s == BRG_OK) s = brg_stage_release_outputs(st[i], 0);
    }
    for (int i = k - 1; i >= 0 && s == BRG_OK; i--) {
        s = brg_stage_backward(st[i], 0, 1.0f / (float)n);
        if (i == 0 || s != BRG_OK) break;
        for (int q = 0; q < brg_stage_input_count(st[i]) && s == BRG_OK; q++) {
            int t = brg_stage_input_tensor(st[i], q), o = -1;
            for (int p = 0; p < brg_stage_output_count(st[i - 1]); p++)
                if (brg_stage_output_tensor(st[i - 1], p) == t) o = p;
            if (o < 0) return BRG_ERR_INTERNAL;
            s = brg_stage_input_grad(st[i], 0, q, &x);
            if (s == BRG_OK) s = brg_stage_output_grad(st[i - 1], 0, o, &y);
            if (s == BRG_OK)
                s = brg_device_copy_between(brg_stage_device(st[i - 1]), y.data, brg_stage_device(st[i]), x.data,
                                            brg_tensor_bytes(&x));
        }
        if (s == BRG_OK) s = brg_stage_release_input_grads(st[i], 0);
    }
    *loss = r.loss;
    return s;
}

static void test_pipeline_equals_single_stage(void)
{
    brg_model *m = three_block_model();
    if (!m) return;
    enum { N = 6 };
    const int64_t sample = sample_floats(m);
    float images[N * 64];
    int32_t labels[N];
    fill_samples(images, labels, N, sample, 4);
    brg_device *devs[4] = {NULL, NULL, NULL, NULL};
    brg_stage *one = NULL, *three[3] = {NULL, NULL, NULL};
    float *g1 = NULL;
    for (int i = 0; i < 4; i++) CHECK_OK(test_cpu_device(4 * MiB, i, &devs[i]));
    brg_stage_config c = stage_config(0, 0, 2, N, 1, 3);
    CHECK_OK(brg_stage_create(m, devs[0], &c, &one));
    for (int i = 0; i < 3; i++) {
        brg_stage_config ci = stage_config(i, i, i, N, 1, 3);
        CHECK_OK(brg_stage_create(m, devs[1 + i], &ci, &three[i]));
    }
    if (!one || !three[0] || !three[1] || !three[2]) goto done;
    /* The middle stage passes 'r1' through: it is both input and output. */
    CHECK(brg_stage_input_count(three[1]) == 1 && brg_stage_output_count(three[1]) == 2);
    CHECK(brg_stage_input_count(three[2]) == 2 && brg_stage_output_count(three[2]) == 0);

    float loss1 = 0.0f, loss3 = 0.0f;
    CHECK_OK(pipeline_step(&one, 1, images, labels, N, &loss1));
    CHECK_OK(pipeline_step(three, 3, images, labels, N, &loss3));
    CHECK_NEAR(loss1, loss3, 0.0);
    int64_t n1 = 0;
    g1 = collect_grads(one, &n1);
    int64_t at = 0;
    for (int i = 0; i < 3 && g1; i++) {
        int64_t ni = 0;
        float *gi = collect_grads(three[i], &ni);
        CHECK(gi && at + ni <= n1);
        if (gi && at + ni <= n1) {
            double r = rel_diff(g1 + at, gi, ni);
            CHECK_MSG(r <= 1e-6, "stage %d's gradients differ from the single stage's by %.3g", i, r);
        }
        at += ni;
        free(gi);
    }
    CHECK(at == n1);
    /* Every device holds exactly its stage's persistent memory again. */
    CHECK(brg_device_in_use(devs[0]) == brg_stage_persistent_bytes(one));
    for (int i = 0; i < 3; i++) CHECK(brg_device_in_use(devs[1 + i]) == brg_stage_persistent_bytes(three[i]));
    /* Steps on each side keep the parameters equal. */
    CHECK_OK(brg_stage_step(one, 0.1f, 1));
    for (int i = 0; i < 3; i++) CHECK_OK(brg_stage_step(three[i], 0.1f, 1));
    CHECK_OK(pipeline_step(&one, 1, images, labels, N, &loss1));
    CHECK_OK(pipeline_step(three, 3, images, labels, N, &loss3));
    CHECK_NEAR(loss1, loss3, 1e-6);
done:
    free(g1);
    brg_stage_destroy(one);
    for (int i = 0; i < 3; i++) brg_stage_destroy(three[i]);
    for (int i = 0; i < 4; i++) brg_device_destroy(devs[i]);
    brg_model_destroy(m);
}

/* Stages whose edges travel blocked (brg_stage_config.edge_block, what
 * the executor sets for CPU devices of one process): each tensor takes its
 * layout in the whole model, so mp1 is blocked on both sides of the first
 * edge and r3, tied to the head's dropout, plain on both sides of the
 * second; three such stages give one plain-edged stage's loss and
 * gradients to the bit. */
static void test_blocked_edges(void)
{
    brg_device *probe = NULL;
    CHECK_OK(test_cpu_device(MiB, 0, &probe));
    const int block = brg_device_channel_block(probe);
    brg_device_destroy(probe);
    if (!block) {
        printf("# CPU devices keep plain tensors here (%s convolution): blocked edges not checked\n",
               brg_cpu_convolution());
        return;
    }
    brg_model *m = blockable_model();
    if (!m) return;
    enum { N = 4 };
    float images[N * 3 * 10 * 10];
    int32_t labels[N];
    fill_samples(images, labels, N, sample_floats(m), 5);
    brg_device *devs[4] = {NULL, NULL, NULL, NULL};
    brg_stage *one = NULL, *three[3] = {NULL, NULL, NULL};
    for (int i = 0; i < 4; i++) CHECK_OK(test_cpu_device(16 * MiB, i, &devs[i]));
    brg_stage_config c = stage_config(0, 0, 2, N, 1, 9);
    CHECK_OK(brg_stage_create(m, devs[0], &c, &one));
    for (int i = 0; i < 3; i++) {
        brg_stage_config ci = stage_config(i, i, i, N, 1, 9);
        ci.edge_block = block;
        CHECK_OK(brg_stage_create(m, devs[1 + i], &ci, &three[i]));
    }
    if (one && three[0] && three[1] && three[2]) {
        const int input = brg_model_input(m), mp1 = brg_model_find_tensor(m, "mp1");
        const int r3 = brg_model_find_tensor(m, "r3"), sum = brg_model_find_tensor(m, "sum");
        CHECK(brg_stage_tensor_layout(three[0], input) == 0);
        CHECK(brg_stage_tensor_layout(three[0], mp1) == block); /* its output */
        CHECK(brg_stage_tensor_layout(three[1], mp1) == block); /* its input */
        CHECK(brg_stage_tensor_layout(three[1], sum) == block);
        CHECK(brg_stage_tensor_layout(three[1], r3) == 0); /* its output, tied to the dropout */
        CHECK(brg_stage_tensor_layout(three[2], r3) == 0);
        float loss1 = 0.0f, loss3 = -1.0f;
        CHECK_OK(pipeline_step(&one, 1, images, labels, N, &loss1));
        CHECK_OK(pipeline_step(three, 3, images, labels, N, &loss3));
        CHECK_MSG(memcmp(&loss1, &loss3, sizeof loss1) == 0, "loss %.9g with blocked edges, %.9g in one stage",
                  (double)loss3, (double)loss1);
        int64_t n1 = 0, at = 0;
        float *g1 = collect_grads(one, &n1);
        for (int i = 0; i < 3 && g1; i++) {
            int64_t ni = 0;
            float *gi = collect_grads(three[i], &ni);
            CHECK(gi && at + ni <= n1);
            if (gi && at + ni <= n1)
                CHECK_MSG(memcmp(g1 + at, gi, (size_t)ni * sizeof *gi) == 0,
                          "stage %d's gradients with blocked edges differ from one stage's", i);
            at += ni;
            free(gi);
        }
        CHECK(at == n1);
        free(g1);
    }
    brg_stage_destroy(one);
    for (int i = 0; i < 3; i++) brg_stage_destroy(three[i]);
    for (int i = 0; i < 4; i++) brg_device_destroy(devs[i]);
    brg_model_destroy(m);
}

/* ---- (d) optimizer steps against PyTorch's formulas ---- */

/* A model with one linear layer 3 -> 2 with bias; its first parameter is the
 * 2x3 weight. */
static brg_model *linear_model(void)
{
    brg_model *m = NULL;
    brg_status st = brg_model_create("lin", 3, 1, 1, &m);
    if (st == BRG_OK) st = brg_model_begin_block(m, "only");
    if (st == BRG_OK) st = brg_model_add_linear(m, "fc", "input", 2, 1);
    if (st == BRG_OK) st = brg_model_finalize(m, NULL);
    CHECK_OK(st);
    return st == BRG_OK ? m : NULL;
}

static void test_optimizers(void)
{
    brg_model *m = linear_model();
    if (!m) return;
    enum { P = 6 };
    const float w0[P] = {0.5f, -1.0f, 0.25f, 2.0f, -0.75f, 0.1f};
    const float grads[3][P] = {{0.1f, -0.2f, 0.3f, -0.4f, 0.5f, 0.0f},
                               {-0.3f, 0.1f, 0.2f, 0.05f, -0.5f, 1.0f},
                               {0.2f, 0.2f, -0.1f, 0.3f, 0.0f, -0.7f}};
    for (int kind = 0; kind < 2; kind++) {
        brg_device *dev = NULL;
        brg_stage *s = NULL;
        CHECK_OK(test_cpu_device(1 * MiB, 0, &dev));
        brg_stage_config c = stage_config(0, 0, 0, 1, 1, 1);
        c.optimizer = brg_optimizer_config_init(kind ? BRG_OPTIMIZER_ADAM : BRG_OPTIMIZER_SGD);
        c.optimizer.weight_decay = 0.01f;
        if (!kind) c.optimizer.momentum = 0.9f;
        const double lr = kind ? 0.01 : 0.1;
        CHECK_OK(brg_stage_create(m, dev, &c, &s));
        if (!s) {
            brg_device_destroy(dev);
            continue;
        }
        CHECK(brg_stage_persistent_bytes(s) == (size_t)256 * (kind ? 8 : 6));
        brg_tensor w, g;
        CHECK_OK(brg_stage_param(s, 0, 0, &w));
        CHECK_OK(brg_stage_grad(s, 0, 0, &g));
        CHECK_OK(brg_device_copy_in(dev, w.data, w0, sizeof w0));
        double p[P], v[P] = {0}, mm[P] = {0}, vv[P] = {0};
        for (int i = 0; i < P; i++) p[i] = w0[i];
        const int steps = kind ? 3 : 2;
        for (int t = 1; t <= steps; t++) {
            CHECK_OK(brg_device_copy_in(dev, g.data, grads[t - 1], sizeof grads[0]));
            CHECK_OK(brg_stage_step(s, (float)lr, t));
            for (int i = 0; i < P; i++) {
                double d = grads[t - 1][i] + 0.01 * p[i];
                if (!kind) { /* torch.optim.SGD(momentum=0.9, weight_decay=0.01), dampening 0 */
                    v[i] = t == 1 ? d : 0.9 * v[i] + d;
                    p[i] -= lr * v[i];
                } else { /* torch.optim.Adam(betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01) */
                    mm[i] = 0.9 * mm[i] + 0.1 * d;
                    vv[i] = 0.999 * vv[i] + 0.001 * d * d;
                    double mhat = mm[i] / (1.0 - pow(0.9, t)), vhat = vv[i] / (1.0 - pow(0.999, t));
                    p[i] -= lr * mhat / (sqrt(vhat) + 1e-8);
                }
            }
            float got[P], gz[P];
            CHECK_OK(brg_device_copy_out(dev, got, w.data, sizeof got));
            CHECK_OK(brg_device_copy_out(dev, gz, g.data, sizeof gz));
            for (int i = 0; i < P; i++) {
                CHECK_NEAR(got[i], p[i], 1e-6 + 1e-6 * fabs(p[i]));
                CHECK(gz[i] == 0.0f); /* the step zeroes the gradients */
            }
        }
        /* Hand-computed first SGD step of element 0: v = 0.1 + 0.01*0.5. */
        /* By hand, element 0 under SGD: d1 = 0.1 + 0.01 * 0.5 = 0.105 = v1,
         * p1 = 0.5 - 0.1 * 0.105 = 0.4895; d2 = -0.3 + 0.01 * 0.4895,
         * v2 = 0.9 * 0.105 + d2 = -0.200605, p2 = 0.4895 + 0.0200605. */
        if (!kind) CHECK_NEAR(p[0], 0.5095605, 1e-8);
        brg_stage_destroy(s);
        CHECK(brg_device_in_use(dev) == 0);
        brg_device_destroy(dev);
    }
    brg_model_destroy(m);
}

/* ---- (e) reproducibility, BatchNorm modes ---- */

static void run_trainer(const brg_model *m, uint64_t seed, int micro, float losses[4])
{
    brg_device *dev = NULL;
    brg_trainer *t = NULL;
    enum { N = 16 };
    const int64_t sample = sample_floats(m);
    float *images = malloc((size_t)(N * sample) * sizeof *images);
    int32_t labels[N];
    uint64_t saved = rng_state;
    rng_state = 0x1234567ULL; /* the same data for every run */
    if (images) fill_samples(images, labels, N, sample, 10);
    rng_state = saved;
    CHECK_OK(test_cpu_device(16 * MiB, 0, &dev));
    brg_trainer_config c = brg_trainer_config_init();
    c.batch = N;
    c.micro_batch = micro;
    c.seed = seed;
    c.lr = 1e-2f;
    CHECK_OK(brg_trainer_create(m, dev, &c, &t));
    for (int k = 0; k < 4; k++) losses[k] = -1.0f;
    for (int k = 0; k < 4 && t && images; k++) CHECK_OK(brg_trainer_step(t, images, labels, N, &losses[k], NULL));
    brg_trainer_destroy(t);
    brg_device_destroy(dev);
    free(images);
}

static void test_reproducibility(void)
{
    brg_model *m = cnn_model(1, 12, 10);
    if (!m) return;
    float a[4], b[4], c[4];
    run_trainer(m, 7, 0, a);
    run_trainer(m, 7, 0, b);
    run_trainer(m, 8, 0, c);
    CHECK(memcmp(a, b, sizeof a) == 0);
    CHECK(a[0] != c[0]); /* another seed, other initial weights */
    CHECK_MSG(a[3] < a[0], "losses %g %g %g %g", a[0], a[1], a[2], a[3]); /* it learns */
    for (int k = 0; k < 4; k++) CHECK(a[k] > 0.0f && isfinite(a[k]));

    /* BatchNorm: eval leaves the running statistics alone, train moves them. */
    brg_device *dev = NULL;
    brg_stage *s = NULL;
    enum { N = 4 };
    float images[N * 144];
    int32_t labels[N];
    fill_samples(images, labels, N, 144, 10);
    CHECK_OK(test_cpu_device(8 * MiB, 0, &dev));
    brg_stage_config sc = stage_config(0, 0, 2, N, 1, 1);
    CHECK_OK(brg_stage_create(m, dev, &sc, &s));
    int bn = brg_model_get_layer(m, 1)->desc.kind == BRG_LAYER_BATCHNORM ? 1 : -1;
    CHECK(bn == 1);
    if (s && bn == 1) {
        brg_tensor rm;
        float before[8], after[8];
        CHECK_OK(brg_stage_param(s, 1, 2, &rm)); /* gamma, beta, running_mean */
        CHECK_OK(brg_device_copy_out(dev, before, rm.data, sizeof before));
        eval_loss(s, images, labels, N);
        CHECK_OK(brg_device_copy_out(dev, after, rm.data, sizeof after));
        CHECK(memcmp(before, after, sizeof before) == 0);
        CHECK_OK(fwd_bwd(s, images, labels, 0, N, 1.0f / N, NULL));
        CHECK_OK(brg_device_copy_out(dev, after, rm.data, sizeof after));
        CHECK(memcmp(before, after, sizeof before) != 0);
        CHECK(brg_device_in_use(dev) == brg_stage_persistent_bytes(s));
    }
    brg_stage_destroy(s);
    brg_device_destroy(dev);
    brg_model_destroy(m);
}

/* ---- (f) memory: persistent bytes, the stash rule, out of memory ---- */

static size_t rounded_f32(int64_t n) { return brg_arena_rounded((size_t)n * sizeof(float)); }

static void test_memory(void)
{
    brg_model *m = cnn_model(0, 28, 10);
    if (!m) return;
    brg_device *dev = NULL;
    brg_trainer *t = NULL;
    enum { N = 8 };
    float *images = malloc(N * 784 * sizeof *images);
    int32_t labels[N];
    if (!images) return;
    fill_samples(images, labels, N, 784, 10);
    CHECK_OK(test_cpu_device(64 * MiB, 0, &dev));
    brg_trainer_config c = brg_trainer_config_init();
    c.batch = N;
    CHECK_OK(brg_trainer_create(m, dev, &c, &t));
    if (!t) goto done;
    brg_stage *s = brg_trainer_stage(t);
    /* Adam: weights, grads, m and v for each of the 3 blocks' parameters:
     * c1 (8x1x3x3 + 8), c2 (16x8x3x3 + 16), fc (10x784 + 10). */
    size_t per = rounded_f32(72) + rounded_f32(8);
    size_t expect = 4 * per;
    per = rounded_f32(1152) + rounded_f32(16);
    expect += 4 * per;
    per = rounded_f32(7840) + rounded_f32(10);
    expect += 4 * per;
    CHECK_MSG(brg_stage_persistent_bytes(s) == expect, "persistent %zu, expected %zu",
              brg_stage_persistent_bytes(s), expect);
    CHECK(brg_device_in_use(dev) == expect);
    float loss = 0.0f;
    int64_t correct = -1;
    CHECK_OK(brg_trainer_step(t, images, labels, N, &loss, &correct));
    CHECK(correct >= 0 && correct <= N);
    CHECK(brg_device_in_use(dev) == expect);
    CHECK(brg_stage_bytes_in_use(s) == expect);

    /* The stash after a train forward: the input (conv c1 reads it), r1 (relu
     * output, maxpool input), p1 (maxpool output, conv c2 input), r2, p2, the
     * probabilities and the labels. c1, c2 and the logits are gone. */
    brg_tensor x, y;
    CHECK_OK(brg_stage_input(s, 0, 0, N, &x));
    CHECK_OK(brg_device_copy_in(dev, x.data, images, brg_tensor_bytes(&x)));
    CHECK_OK(brg_stage_labels(s, 0, N, &y));
    CHECK_OK(brg_device_copy_in(dev, y.data, labels, brg_tensor_bytes(&y)));
    brg_pass pass = {BRG_PASS_TRAIN, 2, 0};
    CHECK_OK(brg_stage_forward(s, 0, &pass, NULL));
    size_t stash = rounded_f32(N * 784) + rounded_f32(N * 8 * 784) + rounded_f32(N * 8 * 196) +
                   rounded_f32(N * 16 * 196) + rounded_f32(N * 16 * 49) + rounded_f32(N * 10) +
                   brg_arena_rounded(N * sizeof(int32_t));
    CHECK_MSG(brg_stage_bytes_in_use(s) == expect + stash, "in use after forward %zu, expected %zu",
              brg_stage_bytes_in_use(s), expect + stash);
    CHECK(brg_device_in_use(dev) == expect + stash);
    CHECK_OK(brg_stage_backward(s, 0, 1.0f / N));
    CHECK(brg_device_in_use(dev) == expect);
    CHECK_OK(brg_stage_zero_grads(s));

    /* The correct predictions, counted on the device: with every label set
     * to class k, a pass counts the rows whose first maximum is k, so over
     * the 10 classes the counts add up to N exactly (each row has one first
     * maximum), and no pass leaves memory behind. Top-5 the same way: each
     * row has exactly five classes among its five largest, so those counts
     * add up to 5N. */
    int64_t total = 0, total5 = 0;
    for (int32_t k = 0; k < 10; k++) {
        int32_t same[N];
        for (int i = 0; i < N; i++) same[i] = k;
        brg_pass eval = {BRG_PASS_EVAL, 2, 0};
        brg_stage_result r = {-1.0f, -1, -1, NULL};
        CHECK_OK(brg_stage_input(s, 0, 0, N, &x));
        CHECK_OK(brg_device_copy_in(dev, x.data, images, brg_tensor_bytes(&x)));
        CHECK_OK(brg_stage_labels(s, 0, N, &y));
        CHECK_OK(brg_device_copy_in(dev, y.data, same, brg_tensor_bytes(&y)));
        CHECK_OK(brg_stage_forward(s, 0, &eval, &r));
        CHECK(r.correct >= 0 && r.correct <= N && r.loss > 0.0f);
        CHECK(r.top5 >= r.correct && r.top5 <= N);
        total += r.correct;
        total5 += r.top5;
        CHECK(brg_device_in_use(dev) == expect);
    }
    CHECK_MSG(total == N, "counts over the 10 classes add up to %lld, not %d", (long long)total, N);
    CHECK_MSG(total5 == 5 * N, "top-5 counts over the 10 classes add up to %lld, not %d", (long long)total5, 5 * N);
    brg_trainer_destroy(t);
    t = NULL;
    CHECK(brg_device_in_use(dev) == 0);
    brg_device_destroy(dev);
    dev = NULL;

    /* A device that holds the parameters but not the activations: the step
     * fails naming the stage and a layer, and frees what it took. */
    CHECK_OK(test_cpu_device(expect + 256 * 1024, 0, &dev));
    CHECK_OK(brg_trainer_create(m, dev, &c, &t));
    if (t) {
        CHECK_STATUS(brg_trainer_step(t, images, labels, N, &loss, NULL), BRG_ERR_OUT_OF_MEMORY);
        CHECK_ERROR_HAS("stage 0");
        CHECK_ERROR_HAS("layer '");
        CHECK_ERROR_HAS("out of memory");
        CHECK(brg_device_in_use(dev) == expect);
        /* A smaller batch fits. */
        CHECK_OK(brg_trainer_step(t, images, labels, 1, &loss, NULL));
        CHECK(brg_device_in_use(dev) == expect);
    }
    brg_trainer_destroy(t);
    t = NULL;
    brg_device_destroy(dev);
    dev = NULL;

    /* A device too small for the weights: creation fails naming the stage
     * and the block. */
    CHECK_OK(test_cpu_device(16 * 1024, 0, &dev));
    CHECK_STATUS(brg_trainer_create(m, dev, &c, &t), BRG_ERR_OUT_OF_MEMORY);
    CHECK_ERROR_HAS("stage 0");
    CHECK_ERROR_HAS("block '");
    CHECK(t == NULL);
    CHECK(brg_device_in_use(dev) == 0);
done:
    brg_trainer_destroy(t);
    brg_device_destroy(dev);
    brg_model_destroy(m);
    free(images);
}

/* ---- misuse ---- */

static void test_misuse(void)
{
    brg_model *m = tiny_model();
    if (!m) return;
    brg_device *dev = NULL;
    brg_stage *s = NULL;
    CHECK_OK(test_cpu_device(4 * MiB, 0, &dev));
    brg_stage_config c = stage_config(0, 1, 0, 4, 1, 1);
    CHECK_STATUS(brg_stage_create(m, dev, &c, &s), BRG_ERR_INVALID_ARGUMENT);
    c = stage_config(0, 0, 2, 4, 1, 1);
    c.optimizer.momentum = 1.5f;
    CHECK_STATUS(brg_stage_create(m, dev, &c, &s), BRG_ERR_INVALID_ARGUMENT);
    c = stage_config(0, 0, 2, 4, 1, 1);
    CHECK_OK(brg_stage_create(m, dev, &c, &s));
    if (s) {
        brg_tensor x;
        brg_pass pass = {BRG_PASS_TRAIN, 1, 0};
        CHECK_STATUS(brg_stage_forward(s, 0, &pass, NULL), BRG_ERR_INVALID_ARGUMENT);
        CHECK_STATUS(brg_stage_backward(s, 0, 1.0f), BRG_ERR_INVALID_ARGUMENT);
        CHECK_STATUS(brg_stage_input(s, 0, 0, 5, &x), BRG_ERR_INVALID_ARGUMENT);
        CHECK_STATUS(brg_stage_input(s, 1, 0, 2, &x), BRG_ERR_INVALID_ARGUMENT);
        CHECK_OK(brg_stage_input(s, 0, 0, 2, &x));
        CHECK_STATUS(brg_stage_forward(s, 0, &pass, NULL), BRG_ERR_INVALID_ARGUMENT); /* no labels */
        /* Labels out of range: the loss refuses, the slot is emptied. */
        brg_tensor y;
        int32_t bad[2] = {0, 9};
        CHECK_OK(brg_device_memset_zero(dev, x.data, brg_tensor_bytes(&x)));
        CHECK_OK(brg_stage_labels(s, 0, 2, &y));
        CHECK_OK(brg_device_copy_in(dev, y.data, bad, sizeof bad));
        CHECK_STATUS(brg_stage_forward(s, 0, &pass, NULL), BRG_ERR_INVALID_ARGUMENT);
        CHECK_ERROR_HAS("stage 0, loss");
        CHECK(brg_device_in_use(dev) == brg_stage_persistent_bytes(s));
        CHECK_STATUS(brg_stage_grad(s, 0, 5, &y), BRG_ERR_INVALID_ARGUMENT);
        CHECK_STATUS(brg_stage_step(s, 0.1f, 0), BRG_ERR_INVALID_ARGUMENT);
    }
    brg_stage_destroy(s);
    CHECK(brg_device_in_use(dev) == 0);
    brg_device_destroy(dev);
    brg_model_destroy(m);

    /* A bad learning rate is refused for a per-pixel model too (its
     * training: test_segmentation.c). */
    brg_model *seg = NULL;
    brg_status st = brg_model_create("seg", 1, 8, 8, &seg);
    if (st == BRG_OK) st = brg_model_begin_block(seg, "b");
    if (st == BRG_OK) st = brg_model_add_conv2d(seg, "c", "input", 2, 1, 1, 1, 1, 0, 0, 1);
    if (st == BRG_OK) st = brg_model_finalize(seg, NULL);
    CHECK_OK(st);
    CHECK_OK(test_cpu_device(1 * MiB, 0, &dev));
    brg_trainer *t = NULL;
    brg_trainer_config tc = brg_trainer_config_init();
    tc.lr = 0.0f;
    if (st == BRG_OK) CHECK_STATUS(brg_trainer_create(seg, dev, &tc, &t), BRG_ERR_INVALID_ARGUMENT);
    brg_device_destroy(dev);
    brg_model_destroy(seg);
    brg_optimizer_kind kind = BRG_OPTIMIZER_SGD;
    CHECK_OK(brg_optimizer_parse("adam", &kind));
    CHECK(kind == BRG_OPTIMIZER_ADAM);
    CHECK_STATUS(brg_optimizer_parse("rmsprop", &kind), BRG_ERR_INVALID_ARGUMENT);
    CHECK_ERROR_HAS("rmsprop");
}

/* ---- (g) a short real run on Fashion-MNIST ---- */

static void test_fashion_mnist(void)
{
    brg_dataset *train = NULL, *test = NULL;
    /* $BRIGADE_DATA_DIR, else the folder configure chose. */
    const char *dir = getenv("BRIGADE_DATA_DIR");
    if (!dir || !dir[0]) dir = BRG_FASHION_MNIST_DIR[0] ? BRG_FASHION_MNIST_DIR : NULL;
    if (brg_fashion_mnist_load(dir, BRG_SPLIT_TRAIN, &train) != BRG_OK ||
        brg_fashion_mnist_load(dir, BRG_SPLIT_TEST, &test) != BRG_OK) {
        fprintf(stderr, "note: Fashion-MNIST not found, skipping the real run (%s)\n", brg_last_error());
        brg_dataset_destroy(train);
        return;
    }
    brg_model *m = cnn_model(0, 28, 10);
    brg_device *dev = NULL;
    brg_trainer *t = NULL;
    enum { TRAIN = 3000, TEST = 1000, B = 32 };
    int64_t *order = malloc(TRAIN * sizeof *order);
    float *images = malloc((size_t)B * 784 * sizeof *images);
    int32_t labels[B];
    CHECK_OK(test_cpu_device(64 * MiB, 0, &dev));
    brg_trainer_config c = brg_trainer_config_init();
    c.batch = B;
    c.lr = 2e-3f;
    if (m && order && images) CHECK_OK(brg_trainer_create(m, dev, &c, &t));
    if (t) {
        CHECK_OK(brg_shuffle_indices(order, TRAIN, 1));
        for (int64_t i = 0; i + B <= TRAIN; i += B) {
            CHECK_OK(brg_dataset_gather(train, order + i, B, images, labels));
            CHECK_OK(brg_trainer_step(t, images, labels, B, NULL, NULL));
        }
        double loss = 0.0, acc = 0.0;
        CHECK_OK(brg_trainer_evaluate(t, test->images, test->labels, TEST, &loss, &acc));
        fprintf(stderr, "Fashion-MNIST, %d samples, 1 epoch: test loss %.4f, accuracy %.1f%%\n", TRAIN, loss,
                100.0 * acc);
        CHECK_MSG(acc > 0.70, "accuracy %.3f", acc);
        CHECK(brg_device_in_use(dev) == brg_stage_persistent_bytes(brg_trainer_stage(t)));
    }
    brg_trainer_destroy(t);
    brg_device_destroy(dev);
    brg_model_destroy(m);
    free(order);
    free(images);
    brg_dataset_destroy(train);
    brg_dataset_destroy(test);
}

int main(void)
{
    test_gradient_check();
    test_microbatch_accumulation();
    test_blocked_layouts();
    test_pipeline_equals_single_stage();
    test_blocked_edges();
    test_optimizers();
    test_reproducibility();
    test_memory();
    test_misuse();
    test_fashion_mnist();
    TEST_EXIT();
}
