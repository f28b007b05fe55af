/* Segmentation: per-pixel logits [classes, H, W] trained against label maps.
 *
 * - Metrics by hand: pixel accuracy, per-class IoU and mean IoU of a small
 *   example, the ignore label left out, and pieces adding up to the whole.
 * - By hand: a 1x1 convolution to per-pixel logits, with ignored pixels
 *   (255) in the labels. The step's loss and the gradients of the weights
 *   and bias equal a double-precision computation on the host over the
 *   counted pixels only, in two micro-batches; all pixels ignored gives
 *   loss 0 and zero gradients; a label outside the classes that is not the
 *   ignore label is an error naming it; evaluation's pixel accuracy and
 *   mean IoU equal the host's from the predicted logits.
 * - U-Net (small) on 1 device and planned across 3, its long skips cut:
 *   loss, counted labels and gradients equal the single device's (same
 *   micro-batches), every device's arena peak equals the plan's.
 * - U-Net learns a segmentation task made here (rectangles and disks of
 *   flat colour on noise, a 1-pixel void outline) to a mean IoU of at
 *   least 0.7 on held-out images, on one device and on three (0.79
 *   measured; 300 steps of 8 images, 32x32, width 1/8).
 *
 * Uses tests/pipeline_test.h (BRG_TEST_CPU=async runs it on cpu-async
 * devices). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brigade/metrics.h"
#include "brigade/zoo.h"
#include "pipeline_test.h"

#define VOID 255
#define MAX_DEVICES 3

/* ---- metrics ---- */

static void test_metrics(void)
{
    /* 2 samples x 3 classes x 2 pixels; labels with one void pixel. */
    const float scores[2 * 3 * 2] = {
        /* sample 0: pixel 0 predicts 0, pixel 1 predicts 2 */
        0.9f, 0.1f, /* class 0 */
        0.0f, 0.2f, /* class 1 */
        0.1f, 0.7f, /* class 2 */
        /* sample 1: pixel 0 predicts 1 (tie 1 = 2: the first), pixel 1 predicts 0 */
        0.1f, 0.8f, /* class 0 */
        0.5f, 0.1f, /* class 1 */
        0.5f, 0.1f, /* class 2 */
    };
    const int32_t labels[2 * 2] = {0, 2, 2, VOID};
    brg_metrics *m = NULL;
    CHECK_OK(brg_metrics_create(3, VOID, &m));
    if (!m) return;
    brg_metrics_add_scores(m, scores, labels, 2, 2);
    brg_metrics_add_loss(m, 0.5, 3);
    /* Counted: 3 pixels; right: (0,0) and (0,1); (1,0) labelled 2, predicted 1.
     * Class 0: TP 1, FP 0, FN 0 -> 1; class 1: TP 0, FP 1, FN 0 -> 0;
     * class 2: TP 1, FP 0, FN 1 -> 0.5; mean (1 + 0 + 0.5) / 3. */
    CHECK(brg_metrics_counted(m) == 3);
    CHECK_NEAR(brg_metrics_accuracy(m), 2.0 / 3.0, 1e-12);
    CHECK_NEAR(brg_metrics_class_iou(m, 0), 1.0, 1e-12);
    CHECK_NEAR(brg_metrics_class_iou(m, 1), 0.0, 1e-12);
    CHECK_NEAR(brg_metrics_class_iou(m, 2), 0.5, 1e-12);
    CHECK_NEAR(brg_metrics_mean_iou(m), 0.5, 1e-12);
    CHECK_NEAR(brg_metrics_loss(m), 0.5, 1e-12);
    CHECK(brg_metrics_class_iou(m, 3) == -1.0);

    /* The same in two pieces, with the losses of two halves. */
    brg_metrics *parts = NULL;
    CHECK_OK(brg_metrics_create(3, VOID, &parts));
    if (parts) {
        brg_metrics_add_scores(parts, scores, labels, 1, 2);
        brg_metrics_add_scores(parts, scores + 6, labels + 2, 1, 2);
        brg_metrics_add_loss(parts, 0.25, 2);
        brg_metrics_add_loss(parts, 1.0, 1);
        CHECK(brg_metrics_counted(parts) == 3);
        CHECK_NEAR(brg_metrics_mean_iou(parts), brg_metrics_mean_iou(m), 1e-15);
        CHECK_NEAR(brg_metrics_accuracy(parts), brg_metrics_accuracy(m), 1e-15);
        CHECK_NEAR(brg_metrics_loss(parts), 0.5, 1e-12);
    }
    brg_metrics_destroy(parts);

    /* A class that never appears is left out of the mean; after a reset
     * nothing appears at all. */
    brg_metrics_reset(m);
    CHECK(brg_metrics_counted(m) == 0 && brg_metrics_mean_iou(m) == 0.0 && brg_metrics_accuracy(m) == 0.0);
    const int32_t zeros[4] = {0, 0, 0, 0};
    const float all0[2 * 3 * 2] = {1, 1, 0, 0, 0, 0, 1, 1, 0, 0, 0, 0};
    brg_metrics_add_scores(m, all0, zeros, 2, 2);
    CHECK_NEAR(brg_metrics_mean_iou(m), 1.0, 1e-12);
    CHECK(brg_metrics_class_iou(m, 1) == -1.0 && brg_metrics_class_iou(m, 2) == -1.0);

    /* Class scores (one label per sample): top-5 counts too. The ignore
     * label inside the classes ignores nothing. */
    brg_metrics_destroy(m);
    m = NULL;
    CHECK_OK(brg_metrics_create(7, 0, &m));
    if (m) {
        const float row[7] = {7, 6, 5, 4, 3, 2, 1};
        const int32_t y[1] = {5}, y0[1] = {0};
        brg_metrics_add_scores(m, row, y, 1, 1);
        CHECK(brg_metrics_top5(m) == 0.0 && brg_metrics_accuracy(m) == 0.0);
        brg_metrics_add_scores(m, row, y0, 1, 1);
        CHECK(brg_metrics_counted(m) == 2);
        CHECK_NEAR(brg_metrics_top5(m), 0.5, 1e-12);
        CHECK_NEAR(brg_metrics_accuracy(m), 0.5, 1e-12);
    }
    brg_metrics_destroy(m);
    CHECK_STATUS(brg_metrics_create(0, VOID, &m), BRG_ERR_INVALID_ARGUMENT);
}

/* ---- pipelines ---- */

/* GPipe on p CPU devices over even parts, mbs micro-batches of micro
 * samples, SGD without momentum, void pixels ignored. */
static brg_pipeline *even_pipeline(const brg_model *m, int p, int mbs, int micro, brg_schedule **sched,
                                   brg_device **devs)
{
    brg_pipeline *pl = NULL;
    brg_device_part parts[MAX_DEVICES];
    *sched = NULL;
    for (int d = 0; d < p; d++) devs[d] = NULL;
    CHECK_OK(brg_schedule_build(BRG_SCHEDULE_GPIPE, p, mbs, 1, sched));
    if (!*sched) return NULL;
    for (int d = 0; d < p; d++) {
        parts[d] = even_part(m, p, 1, d, 0);
        CHECK_OK(test_cpu_device(64 * MiB, d, &devs[d]));
        if (!devs[d]) return NULL;
    }
    brg_pipeline_desc desc;
    memset(&desc, 0, sizeof desc);
    desc.model = m;
    desc.schedule = *sched;
    desc.parts = parts;
    desc.micro_batch = micro;
    desc.optimizer = brg_optimizer_config_init(BRG_OPTIMIZER_SGD);
    brg_pipeline_options o = brg_pipeline_options_init();
    o.ignore_label = VOID;
    CHECK_OK(brg_pipeline_create(&desc, devs, p, &o, &pl));
    return pl;
}

static void destroy_all(brg_pipeline *pl, brg_schedule *sched, brg_plan *plan, brg_device **devs, int p)
{
    brg_pipeline_destroy(pl);
    brg_schedule_destroy(sched);
    brg_plan_destroy(plan);
    for (int d = 0; d < p; d++) brg_device_destroy(devs[d]);
}

/* Set parameter `index` of layer `layer` on the pipeline's one device. */
static void set_param(brg_pipeline *pl, const brg_model *m, const char *layer, int index, const float *values)
{
    const int l = brg_model_find_layer(m, layer);
    brg_tensor t;
    brg_stage *s = brg_pipeline_stage(pl, 0, 0);
    CHECK_OK(brg_stage_param(s, l, index, &t));
    CHECK_OK(brg_device_copy_in(brg_stage_device(s), t.data, values, brg_tensor_bytes(&t)));
}

/* ---- by hand ---- */

enum { HC = 2, HH = 2, HW = 3, HK = 3, HP = HH * HW, HN = 4 };

static void test_by_hand(void)
{
    brg_model *m = NULL;
    brg_status st = brg_model_create("pixels", HC, HH, HW, &m);
    if (st == BRG_OK) st = brg_model_begin_block(m, "head");
    if (st == BRG_OK) st = brg_model_add_conv2d(m, "logits", "input", HK, 1, 1, 1, 1, 0, 0, 1);
    m = finish_model(m, st);
    if (!m) return;
    CHECK(brg_model_label_count(m) == HP && brg_model_classes(m) == HK);

    brg_schedule *sched;
    brg_device *devs[1];
    brg_pipeline *pl = even_pipeline(m, 1, 2, HN / 2, &sched, devs);
    const float w[HK * HC] = {0.5f, -0.25f, -0.5f, 1.0f, 0.75f, 0.25f}, b[HK] = {0.1f, -0.2f, 0.05f};
    float images[HN * HC * HP];
    int32_t labels[HN * HP];
    int64_t counted = 0;
    for (int i = 0; i < HN * HC * HP; i++) images[i] = frand() * 2.0f;
    for (int i = 0; i < HN * HP; i++) {
        labels[i] = i % 5 == 3 ? VOID : (int32_t)(((unsigned)i * 7u) % HK);
        counted += labels[i] != VOID;
    }
    if (!pl) goto done;
    set_param(pl, m, "logits", 0, w);
    set_param(pl, m, "logits", 1, b);

    /* On the host, in double: logits z[k] = b[k] + sum_c w[k][c] x[c] at
     * every pixel; loss and gradients over the counted pixels. */
    double loss = 0.0, gw[HK * HC] = {0}, gb[HK] = {0};
    int64_t right = 0;
    for (int n = 0; n < HN; n++)
        for (int p = 0; p < HP; p++) {
            const int32_t y = labels[n * HP + p];
            if (y == VOID) continue;
            double z[HK], mx = -INFINITY, sum = 0.0;
            int best = 0;
            for (int k = 0; k < HK; k++) {
                z[k] = b[k];
                for (int c = 0; c < HC; c++) z[k] += (double)w[k * HC + c] * images[(n * HC + c) * HP + p];
                if (z[k] > mx) mx = z[k];
                if (z[k] > z[best]) best = k;
            }
            for (int k = 0; k < HK; k++) sum += exp(z[k] - mx);
            loss += mx + log(sum) - z[y];
            right += best == y;
            for (int k = 0; k < HK; k++) {
                const double d = exp(z[k] - mx) / sum - (k == y);
                gb[k] += d / (double)counted;
                for (int c = 0; c < HC; c++) gw[k * HC + c] += d * images[(n * HC + c) * HP + p] / (double)counted;
            }
        }
    loss /= (double)counted;

    double got_loss = 0.0;
    int64_t got_right = -1;
    CHECK_OK(brg_pipeline_forward_backward(pl, images, labels, HN, &got_loss, &got_right));
    CHECK_NEAR(got_loss, loss, 1e-5);
    CHECK(got_right == right);
    CHECK(brg_pipeline_counted_labels(pl) == counted);
    brg_stage *s = brg_pipeline_stage(pl, 0, 0);
    brg_tensor t;
    float g[HK * HC];
    const int l = brg_model_find_layer(m, "logits");
    CHECK_OK(brg_stage_grad(s, l, 0, &t));
    CHECK_OK(brg_device_copy_out(devs[0], g, t.data, sizeof(float) * HK * HC));
    for (int i = 0; i < HK * HC; i++) CHECK_NEAR(g[i], gw[i], 1e-5);
    CHECK_OK(brg_stage_grad(s, l, 1, &t));
    CHECK_OK(brg_device_copy_out(devs[0], g, t.data, sizeof(float) * HK));
    for (int i = 0; i < HK; i++) CHECK_NEAR(g[i], gb[i], 1e-5);
    CHECK_OK(brg_stage_zero_grads(s));

    /* Evaluation: the metrics equal the host's over the predicted logits,
     * which the loss too is computed from. */
    float outputs[HN * HK * HP];
    CHECK_OK(brg_pipeline_predict(pl, images, HN, outputs));
    brg_metrics *host = NULL, *got = NULL;
    CHECK_OK(brg_metrics_create(HK, VOID, &host));
    CHECK_OK(brg_metrics_create(HK, VOID, &got));
    if (host && got) {
        brg_metrics_add_scores(host, outputs, labels, HN, HP);
        CHECK_OK(brg_pipeline_evaluate_metrics(pl, images, labels, HN, got));
        CHECK(brg_metrics_counted(got) == counted);
        CHECK_NEAR(brg_metrics_accuracy(got), (double)right / (double)counted, 1e-12);
        CHECK_NEAR(brg_metrics_mean_iou(got), brg_metrics_mean_iou(host), 1e-12);
        CHECK_NEAR(brg_metrics_loss(got), loss, 1e-5);
        double l1 = 0.0, a1 = 0.0;
        CHECK_OK(brg_pipeline_evaluate(pl, images, labels, HN, &l1, &a1));
        CHECK_NEAR(l1, loss, 1e-5);
        CHECK_NEAR(a1, (double)right / (double)counted, 1e-12);
    }
    brg_metrics_destroy(host);
    brg_metrics_destroy(got);

    /* Every pixel void: nothing to learn, loss 0, zero gradients. */
    int32_t none[HN * HP];
    for (int i = 0; i < HN * HP; i++) none[i] = VOID;
    CHECK_OK(brg_pipeline_forward_backward(pl, images, none, HN, &got_loss, &got_right));
    CHECK(got_loss == 0.0 && got_right == 0 && brg_pipeline_counted_labels(pl) == 0);
    CHECK_OK(brg_stage_grad(s, l, 0, &t));
    CHECK_OK(brg_device_copy_out(devs[0], g, t.data, sizeof(float) * HK * HC));
    for (int i = 0; i < HK * HC; i++) CHECK(g[i] == 0.0f);
    CHECK_OK(brg_stage_zero_grads(s));

    /* A label that is neither a class nor the void: an error naming it. */
    int32_t bad[HN * HP];
    memcpy(bad, labels, sizeof bad);
    bad[HP + 4] = 7;
    CHECK(brg_pipeline_forward_backward(pl, images, bad, HN, &got_loss, NULL) != BRG_OK);
    CHECK_ERROR_HAS("7");
done:
    destroy_all(pl, sched, NULL, devs, 1);
    brg_model_destroy(m);
}

/* ---- U-Net across devices ---- */

static brg_model *small_unet(int64_t hw, double width)
{
    brg_model *m = NULL;
    const brg_zoo_options zo = {3, hw, hw, 3, width};
    CHECK_OK(brg_zoo_build("unet", &zo, &m));
    return m;
}

/* A pipeline as planned for p CPU devices of 256 MiB: 1F1B, batch samples
 * in mbs micro-batches, Adam, void pixels ignored. */
static brg_pipeline *planned_pipeline(const brg_model *m, int p, int batch, int mbs, brg_plan **plan,
                                      brg_device **devs)
{
    brg_device_spec specs[MAX_DEVICES];
    brg_pipeline *pl = NULL;
    for (int d = 0; d < p; d++) {
        specs[d] = cpu_spec(256 * MiB);
        devs[d] = NULL;
    }
    brg_plan_options o = plan_options(specs, p, batch, mbs, BRG_SCHEDULE_1F1B, 1, NULL);
    o.optimizer = brg_optimizer_config_init(BRG_OPTIMIZER_ADAM);
    CHECK_OK(brg_plan_create(m, &o, plan));
    if (!*plan) return NULL;
    for (int d = 0; d < p; d++) {
        CHECK_OK(test_cpu_device(256 * MiB, d, &devs[d]));
        if (!devs[d]) return NULL;
    }
    brg_pipeline_options po = brg_pipeline_options_init();
    po.ignore_label = VOID;
    CHECK_OK(pipeline_from_plan(*plan, devs, p, &po, &pl));
    return pl;
}

static void test_unet_devices(void)
{
    brg_model *m = small_unet(32, 0.125);
    if (!m) return;
    enum { N = 8, MBS = 4 };
    const int64_t sample = sample_floats(m), px = brg_model_label_count(m);
    float *images = malloc((size_t)(N * sample) * sizeof *images);
    int32_t *labels = malloc((size_t)(N * px) * sizeof *labels);
    brg_plan *plan1 = NULL, *plan3 = NULL;
    brg_device *d1[1], *d3[MAX_DEVICES];
    brg_pipeline *one = planned_pipeline(m, 1, N, MBS, &plan1, d1);
    brg_pipeline *three = planned_pipeline(m, 3, N, MBS, &plan3, d3);
    if (!images || !labels || !one || !three) goto done;
    for (int64_t i = 0; i < N * sample; i++) images[i] = frand();
    for (int64_t i = 0; i < N * px; i++) {
        const float r = frand();
        labels[i] = r > 0.8f ? VOID : (int32_t)((r + 1.0f) * 1.5f) % 3;
    }
    /* Every cut of a U-Net is crossed by skips waiting for the decoder. */
    const brg_plan_stage *first = brg_plan_get_stage(plan3, 0);
    int crossing = 0, ids[16];
    CHECK_OK(brg_model_boundary_tensors(m, first->part.last_block[0], ids, 16, &crossing));
    CHECK_MSG(crossing >= 2, "%d tensors cross the first cut", crossing);

    double l1 = 0.0, l3 = 0.0;
    int64_t r1 = -1, r3 = -2;
    CHECK_OK(brg_pipeline_forward_backward(one, images, labels, N, &l1, &r1));
    CHECK_OK(brg_pipeline_forward_backward(three, images, labels, N, &l3, &r3));
    CHECK(l1 > 0.0 && fabs(l1 - l3) <= 1e-5 * l1);
    CHECK(r1 == r3);
    CHECK(brg_pipeline_counted_labels(one) == brg_pipeline_counted_labels(three));
    CHECK(brg_pipeline_counted_labels(one) < N * px && brg_pipeline_counted_labels(one) > N * px / 2);
    brg_stage *s1[1], *s3[MAX_DEVICES];
    pipeline_stages(one, s1);
    pipeline_stages(three, s3);
    int64_t n1 = 0, n3 = 0;
    float *g1 = gather_grads(m, s1, 1, &n1), *g3 = gather_grads(m, s3, 3, &n3);
    CHECK(g1 && g3 && n1 == n3 && n1 > 0);
    if (g1 && g3 && n1 == n3) {
        const double diff = rel_diff(g1, g3, n1);
        CHECK_MSG(diff < 1e-4, "3 devices' gradients differ from one's by %.3g (relative)", diff);
    }
    free(g1);
    free(g3);
    /* Measured peaks are the plan's. */
    for (int d = 0; d < 3; d++) {
        brg_memory_report rep;
        CHECK_OK(brg_pipeline_memory(three, d, &rep));
        CHECK_MSG(rep.peak_bytes == brg_plan_get_stage(plan3, d)->peak_bytes, "device %d: peak %zu, planned %zu", d,
                  rep.peak_bytes, brg_plan_get_stage(plan3, d)->peak_bytes);
    }
done:
    destroy_all(one, NULL, plan1, d1, 1);
    destroy_all(three, NULL, plan3, d3, 3);
    free(images);
    free(labels);
    brg_model_destroy(m);
}

/* ---- U-Net learns shapes on noise ---- */

/* Sample `index` of the task, seeded by it: noise in [-1, 1) on each
 * channel, then two to three shapes, each a rectangle (class 1) or a disk
 * (class 2) of one flat colour, drawn over each other; a shape's outline
 * (pixels of it next to a pixel that is not) is void. */
static void make_shapes(uint64_t index, int hw, float *image, int32_t *label)
{
    rng_state = 0x5eed0000ULL + index * 0x9e3779b97f4a7c15ULL;
    for (int i = 0; i < 7; i++) (void)frand();
    for (int i = 0; i < 3 * hw * hw; i++) image[i] = frand();
    for (int i = 0; i < hw * hw; i++) label[i] = 0;
    const int shapes = 2 + (frand() > 0.0f);
    for (int s = 0; s < shapes; s++) {
        const int cls = frand() > 0.0f ? 1 : 2;
        const float col[3] = {frand(), frand(), frand()};
        const float cx = (frand() + 1.0f) * 0.5f * (float)hw, cy = (frand() + 1.0f) * 0.5f * (float)hw;
        const float r = (float)hw * (0.16f + 0.08f * (frand() + 1.0f));
        unsigned char *in = calloc((size_t)(hw * hw), 1);
        if (!in) return;
        for (int y = 0; y < hw; y++)
            for (int x = 0; x < hw; x++) {
                const float dx = (float)x + 0.5f - cx, dy = (float)y + 0.5f - cy;
                in[y * hw + x] = cls == 1 ? fabsf(dx) < r && fabsf(dy) < r * 0.7f : dx * dx + dy * dy < r * r;
            }
        for (int y = 0; y < hw; y++)
            for (int x = 0; x < hw; x++) {
                if (!in[y * hw + x]) continue;
                const int edge = x == 0 || y == 0 || x == hw - 1 || y == hw - 1 || !in[y * hw + x - 1] ||
                                 !in[y * hw + x + 1] || !in[(y - 1) * hw + x] || !in[(y + 1) * hw + x];
                label[y * hw + x] = edge ? VOID : cls;
                for (int c = 0; c < 3; c++) image[(c * hw + y) * hw + x] = col[c];
            }
        free(in);
    }
}

/* Train on p devices for `steps` steps of fresh samples (Adam, lr 1e-2,
 * batches of 8 in 4 micro-batches) and return the held-out mean IoU. */
static double learn(const brg_model *m, int p, int steps)
{
    enum { BATCH = 8, MBS = 2, TEST = 32 };
    const int hw = (int)brg_model_get_tensor(m, brg_model_input(m))->h;
    const int64_t sample = 3 * hw * hw, px = hw * hw;
    brg_plan *plan = NULL;
    brg_device *devs[MAX_DEVICES];
    brg_pipeline *pl = planned_pipeline(m, p, BATCH, MBS, &plan, devs);
    float *images = malloc((size_t)(TEST * sample) * sizeof *images);
    int32_t *labels = malloc((size_t)(TEST * px) * sizeof *labels);
    brg_metrics *metrics = NULL;
    double miou = -1.0, loss = 0.0, first_loss = 0.0;
    if (!pl || !images || !labels) goto done;
    for (int s = 0; s < steps; s++) {
        for (int i = 0; i < BATCH; i++)
            make_shapes((uint64_t)(s * BATCH + i), hw, images + i * sample, labels + i * px);
        brg_status st = brg_pipeline_step(pl, 1e-2f, images, labels, BATCH, &loss, NULL);
        CHECK_OK(st);
        if (st != BRG_OK) goto done;
        if (s == 0) first_loss = loss;
    }
    CHECK_MSG(loss < 0.5 * first_loss, "%d devices: the loss went from %.4f to %.4f only", p, first_loss, loss);
    for (int i = 0; i < TEST; i++) make_shapes(1000000u + (uint64_t)i, hw, images + i * sample, labels + i * px);
    CHECK_OK(brg_metrics_create(3, VOID, &metrics));
    if (metrics) CHECK_OK(brg_pipeline_evaluate_metrics(pl, images, labels, TEST, metrics));
    if (metrics) {
        miou = brg_metrics_mean_iou(metrics);
        printf("%d device(s), %d steps: loss %.4f -> %.4f; held out: pixel accuracy %.4f, IoU %.3f %.3f %.3f, "
               "mean IoU %.4f\n", p, steps, first_loss, loss, brg_metrics_accuracy(metrics),
               brg_metrics_class_iou(metrics, 0), brg_metrics_class_iou(metrics, 1),
               brg_metrics_class_iou(metrics, 2), miou);
    }
done:
    brg_metrics_destroy(metrics);
    destroy_all(pl, NULL, plan, devs, p);
    free(images);
    free(labels);
    return miou;
}

static void test_learns(void)
{
    brg_model *m = small_unet(32, 0.125);
    if (!m) return;
    /* The pipelines' equivalence runs on cpu-async devices too
     * (test_async.sh); the minute of learning runs once. */
    if (test_cpu_async()) {
        printf("learning: skipped on cpu-async devices\n");
        brg_model_destroy(m);
        return;
    }
    const int steps = 300;
    const double one = learn(m, 1, steps), three = learn(m, 3, steps);
    CHECK_MSG(one >= 0.7, "one device: mean IoU %.4f, below 0.7", one);
    CHECK_MSG(three >= 0.7, "three devices: mean IoU %.4f, below 0.7", three);
    brg_model_destroy(m);
}

int main(void)
{
    test_metrics();
    test_by_hand();
    test_unet_devices();
    test_learns();
    TEST_EXIT();
}
