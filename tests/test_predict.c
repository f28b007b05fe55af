/* brg_pipeline_predict: the model's outputs in inference mode.
 *
 * - On a small model whose parameters and running statistics are set by
 *   hand, the outputs equal a double-precision computation on the host of
 *   the same layers (BatchNorm on the running statistics, no dropout).
 * - On pipelines of 2 and 3 devices (GPipe, even partitions) the outputs
 *   equal one device's, with the same weights (trained a few steps on one
 *   device, so that the running statistics are not the initial 0 and 1,
 *   saved and loaded into the others); for the long-skip model, resnet18
 *   and inception-v3-torchvision, small.
 * - The softmax cross-entropy and the first-maximum accuracy computed on
 *   the host from the outputs equal brg_pipeline_evaluate's loss and
 *   accuracy. All of it twice: CPU devices evaluating one stage at a time,
 *   and at once, as GPUs do (BRG_EVAL_AT_ONCE=1).
 * - Samples that do not fill the last micro-batch, one sample, and bad
 *   arguments; predicting changes nothing (evaluation before and after
 *   agree bit for bit).
 * - Evaluating between steps leaves no OpenMP pool on the calling thread:
 *   on one device the threads are as many as the steps alone make, on two
 *   as many after a second evaluation as after the first.
 *
 * Uses tests/pipeline_test.h (its devices follow BRG_TEST_CPU, so
 * test_async.sh runs this on cpu-async devices too). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "brigade/device.h"
#include "pipeline_test.h"

#define MAX_DEVICES 3

/* A pipeline of p CPU devices for m: GPipe, `mbs` micro-batches of
 * `micro` samples, the blocks cut evenly. The schedule and devices go to
 * *sched and devs; NULL after a failed check. */
static brg_pipeline *make_pipeline(const brg_model *m, int p, int mbs, int micro, size_t capacity,
                                   brg_schedule **sched, brg_device **devs)
{
    brg_pipeline *pl = NULL;
    brg_device_part parts[MAX_DEVICES];
    *sched = NULL;
    for (int d = 0; d < p; d++) devs[d] = NULL;
    CHECK_OK(brg_schedule_build(BRG_SCHEDULE_GPIPE, p, mbs, 1, sched));
    if (!*sched) return NULL;
    for (int d = 0; d < p; d++) {
        parts[d] = even_part(m, p, 1, d, 0);
        CHECK_OK(test_cpu_device(capacity, d, &devs[d]));
        if (!devs[d]) return NULL;
    }
    brg_pipeline_desc desc;
    memset(&desc, 0, sizeof desc);
    desc.model = m;
    desc.schedule = *sched;
    desc.parts = parts;
    desc.micro_batch = micro;
    desc.optimizer = brg_optimizer_config_init(BRG_OPTIMIZER_ADAM);
    CHECK_OK(brg_pipeline_create(&desc, devs, p, NULL, &pl));
    return pl;
}

static void destroy_pipeline(brg_pipeline *pl, brg_schedule *sched, brg_device **devs, int p)
{
    brg_pipeline_destroy(pl);
    brg_schedule_destroy(sched);
    for (int d = 0; d < p; d++) brg_device_destroy(devs[d]);
}

/* Mean softmax cross-entropy (in double) of outputs [n, k] against labels,
 * and the samples whose first largest output is their label. */
static double host_loss(const float *outputs, const int32_t *labels, int64_t n, int64_t k, int64_t *right)
{
    double sum = 0.0;
    *right = 0;
    for (int64_t i = 0; i < n; i++) {
        const float *row = outputs + i * k;
        int64_t best = 0;
        for (int64_t j = 1; j < k; j++)
            if (row[j] > row[best]) best = j;
        double z = 0.0;
        for (int64_t j = 0; j < k; j++) z += exp((double)row[j] - (double)row[best]);
        sum += log(z) - ((double)row[labels[i]] - (double)row[best]);
        *right += best == labels[i];
    }
    return sum / (double)n;
}

/* ---- against a computation by hand ---- */

/* input 2x3x3 -> conv 1x1 with bias, 3 channels -> BatchNorm (eps 1e-3,
 * scale and center) -> ReLU | global average pool -> dropout 0.5 | linear
 * 3 -> 4 with bias: three blocks. */
static brg_model *hand_model(void)
{
    brg_model *m = NULL;
    brg_status st = brg_model_create("hand", 2, 3, 3, &m);
    if (st == BRG_OK) st = brg_model_begin_block(m, "a");
    if (st == BRG_OK) st = brg_model_add_conv2d(m, "conv", "input", 3, 1, 1, 1, 1, 0, 0, 1);
    if (st == BRG_OK) st = brg_model_add_batchnorm(m, "bn", "conv", 1e-3f, 1, 1);
    if (st == BRG_OK) st = brg_model_add_relu(m, "relu", "bn");
    if (st == BRG_OK) st = brg_model_begin_block(m, "b");
    if (st == BRG_OK) st = brg_model_add_global_avgpool(m, "pool", "relu");
    if (st == BRG_OK) st = brg_model_add_dropout(m, "drop", "pool", 0.5f);
    if (st == BRG_OK) st = brg_model_begin_block(m, "head");
    if (st == BRG_OK) st = brg_model_add_linear(m, "fc", "drop", 4, 1);
    return finish_model(m, st);
}

/* Set parameter `name` of layer `layer` in whichever stage of pl holds it
 * to values (its count floats). */
static void set_param(brg_pipeline *pl, const brg_model *m, const char *layer, const char *name, const float *values)
{
    for (int l = 0; l < brg_model_layer_count(m); l++) {
        const brg_layer *ly = brg_model_get_layer(m, l);
        if (strcmp(ly->name, layer) != 0) continue;
        for (int i = 0; i < brg_layer_param_count(ly, m); i++) {
            brg_param_info info;
            CHECK_OK(brg_layer_param(ly, m, i, &info));
            if (strcmp(info.name, name) != 0) continue;
            for (int d = 0; d < brg_pipeline_devices(pl); d++) {
                brg_stage *s = brg_pipeline_stage(pl, d, 0);
                const brg_stage_config *c = brg_stage_get_config(s);
                if (ly->block < c->first_block || ly->block > c->last_block) continue;
                brg_tensor t;
                CHECK_OK(brg_stage_param(s, l, i, &t));
                CHECK_OK(brg_device_copy_in(brg_stage_device(s), t.data, values, brg_tensor_bytes(&t)));
                return;
            }
        }
    }
    CHECK_MSG(0, "no parameter %s.%s", layer, name);
}

static void test_by_hand(void)
{
    brg_model *m = hand_model();
    if (!m) return;
    enum { N = 5, C = 2, K = 3, HW = 9, CLASSES = 4 };
    float w[K * C], b[K], gamma[K], beta[K], mean[K], var[K], fw[CLASSES * K], fb[CLASSES];
    float images[N * C * HW], out[N * CLASSES];
    for (int i = 0; i < K * C; i++) w[i] = frand();
    for (int i = 0; i < K; i++) {
        b[i] = 0.5f * frand();
        gamma[i] = 1.0f + 0.5f * frand();
        beta[i] = 0.5f * frand();
        mean[i] = 0.5f * frand();
        var[i] = 0.5f + 0.4f * frand(); /* 0.1 .. 0.9: far from the initial 1 */
    }
    for (int i = 0; i < CLASSES * K; i++) fw[i] = frand();
    for (int i = 0; i < CLASSES; i++) fb[i] = frand();
    for (int i = 0; i < N * C * HW; i++) images[i] = frand();

    /* Two devices, micro-batches of 2: pieces of 2, 2 and 1 samples. */
    brg_schedule *sched = NULL;
    brg_device *devs[MAX_DEVICES];
    brg_pipeline *pl = make_pipeline(m, 2, 2, 2, 16 * MiB, &sched, devs);
    if (!pl) goto done;
    set_param(pl, m, "conv", "weight", w);
    set_param(pl, m, "conv", "bias", b);
    set_param(pl, m, "bn", "gamma", gamma);
    set_param(pl, m, "bn", "beta", beta);
    set_param(pl, m, "bn", "running_mean", mean);
    set_param(pl, m, "bn", "running_var", var);
    set_param(pl, m, "fc", "weight", fw);
    set_param(pl, m, "fc", "bias", fb);
    CHECK_OK(brg_pipeline_predict(pl, images, N, out));
    double worst = 0.0;
    for (int n = 0; n < N; n++) {
        double pooled[K];
        for (int k = 0; k < K; k++) {
            double s = 0.0;
            for (int p = 0; p < HW; p++) {
                double y = b[k];
                for (int c = 0; c < C; c++) y += (double)w[k * C + c] * images[(n * C + c) * HW + p];
                y = (y - mean[k]) / sqrt((double)var[k] + 1e-3) * gamma[k] + beta[k];
                s += y > 0.0 ? y : 0.0;
            }
            pooled[k] = s / HW;
        }
        for (int j = 0; j < CLASSES; j++) {
            double z = fb[j];
            for (int k = 0; k < K; k++) z += (double)fw[j * K + k] * pooled[k];
            const double e = fabs(z - (double)out[n * CLASSES + j]) / (fabs(z) > 1.0 ? fabs(z) : 1.0);
            if (e > worst) worst = e;
        }
    }
    fprintf(stderr, "by hand: largest error %.3g\n", worst);
    CHECK_MSG(worst <= 1e-5, "outputs differ from the host's computation by %.3g", worst);
done:
    destroy_pipeline(pl, sched, devs, 2);
    brg_model_destroy(m);
}

/* ---- partitions ---- */

static brg_model *zoo_model(const char *name, int64_t c, int64_t hw, int64_t classes, double width)
{
    brg_zoo_options o;
    memset(&o, 0, sizeof o);
    o.channels = c;
    o.height = o.width = hw;
    o.classes = classes;
    o.width_mult = width;
    brg_model *m = NULL;
    CHECK_OK(brg_zoo_build(name, &o, &m));
    return m;
}

/* Train `steps` steps on one device, save the weights, and predict n
 * samples on pipelines of 1, 2 and 3 devices holding them: the outputs
 * agree, and the host's loss and accuracy from them are evaluate's. */
static void partition_case(brg_model *m, int micro, int steps, int64_t n, size_t capacity)
{
    if (!m) return;
    const char *name = brg_model_name(m);
    const int64_t classes = brg_model_classes(m), sample = sample_floats(m);
    const int mbs = 3, batch = mbs * micro;
    char path[512];
    snprintf(path, sizeof path, "%s/brigade-test-predict-%ld-%s.safetensors",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (long)getpid(), name);
    float *images = NULL, *train = NULL, *outputs[MAX_DEVICES + 1] = {NULL};
    int32_t *labels = NULL, *train_labels = NULL;
    if (!new_data(m, (int)n, &images, &labels) || !new_data(m, batch, &train, &train_labels)) goto done;
    for (int p = 1; p <= MAX_DEVICES; p++) {
        brg_schedule *sched = NULL;
        brg_device *devs[MAX_DEVICES];
        brg_pipeline *pl = make_pipeline(m, p, mbs, micro, capacity, &sched, devs);
        float *out = outputs[p] = malloc((size_t)(n * classes) * sizeof *out);
        CHECK(out != NULL);
        if (!pl || !out) {
            destroy_pipeline(pl, sched, devs, p);
            goto done;
        }
        if (p == 1) {
            for (int s = 0; s < steps; s++)
                CHECK_OK(brg_pipeline_step(pl, 0.01f, train, train_labels, batch, NULL, NULL));
            CHECK_OK(brg_pipeline_save_state(pl, path, BRG_STATE_WEIGHTS, NULL, NULL, 0));
        } else {
            CHECK_OK(brg_pipeline_load_state(pl, path, BRG_STATE_WEIGHTS));
        }
        double loss0 = 0.0, acc0 = 0.0, loss1 = 0.0, acc1 = 0.0;
        CHECK_OK(brg_pipeline_evaluate(pl, images, labels, n, &loss0, &acc0));
        for (int64_t i = 0; i < n * classes; i++) out[i] = NAN;
        CHECK_OK(brg_pipeline_predict(pl, images, n, out));
        /* Predicting changed nothing. */
        CHECK_OK(brg_pipeline_evaluate(pl, images, labels, n, &loss1, &acc1));
        CHECK_MSG(loss0 == loss1 && acc0 == acc1, "%s on %d devices: evaluation %.9g %.6f before predict, %.9g %.6f "
                  "after", name, p, loss0, acc0, loss1, acc1);
        int64_t right = 0;
        const double loss = host_loss(out, labels, n, classes, &right);
        fprintf(stderr, "%s on %d device%s: loss %.7f from the outputs, %.7f evaluated; accuracy %lld/%lld, %.4f\n",
                name, p, p > 1 ? "s" : "", loss, loss0, (long long)right, (long long)n, acc0);
        CHECK_MSG(isfinite(loss) && fabs(loss - loss0) <= 1e-5 * fabs(loss0) + 1e-6,
                  "%s on %d devices: loss %.9g from the outputs, %.9g evaluated", name, p, loss, loss0);
        CHECK_MSG((double)right / (double)n == acc0, "%s on %d devices: %lld of %lld right from the outputs, "
                  "evaluate says %.6f", name, p, (long long)right, (long long)n, acc0);
        /* The first samples alone, and one sample: the same outputs. */
        float *part = malloc((size_t)(n * classes) * sizeof *part);
        if (part) {
            CHECK_OK(brg_pipeline_predict(pl, images, 1, part));
            CHECK(rel_diff(out, part, classes) <= 1e-6);
            CHECK_OK(brg_pipeline_predict(pl, images + sample, n - 1, part));
            CHECK(rel_diff(out + classes, part, (n - 1) * classes) <= 1e-6);
        }
        free(part);
        if (p > 1) {
            const double d = rel_diff(outputs[1], out, n * classes);
            fprintf(stderr, "%s: %d devices against one: max |a - b| / max |a| = %.3g\n", name, p, d);
            CHECK_MSG(d <= 1e-5, "%s: outputs on %d devices differ from one device's by %.3g", name, p, d);
        }
        destroy_pipeline(pl, sched, devs, p);
    }
done:
    remove(path);
    for (int p = 0; p <= MAX_DEVICES; p++) free(outputs[p]);
    free(images);
    free(labels);
    free(train);
    free(train_labels);
    brg_model_destroy(m);
}

static void test_partitions(void)
{
    /* CPU devices evaluate one stage at a time; BRG_EVAL_AT_ONCE=1 makes
     * them evaluate as GPUs do, all at once, pieces pipelined. */
    for (int at_once = 0; at_once < 2; at_once++) {
        setenv("BRG_EVAL_AT_ONCE", at_once ? "1" : "0", 1);
        fprintf(stderr, "evaluating %s\n", at_once ? "at once (BRG_EVAL_AT_ONCE=1)" : "one stage at a time");
        /* n = 11 with micro-batches of 4: pieces of 4, 4 and 3. */
        partition_case(skip_model(), 4, 3, 11, 32 * MiB);
        partition_case(zoo_model("resnet18", 3, 32, 4, 0.125), 4, 2, 13, 64 * MiB);
        partition_case(zoo_model("inception-v3-torchvision", 3, 75, 4, 0.125), 2, 2, 7, 128 * MiB);
    }
    unsetenv("BRG_EVAL_AT_ONCE");
}

/* ---- arguments ---- */

static void test_arguments(void)
{
    brg_model *m = skip_model();
    if (!m) return;
    brg_schedule *sched = NULL;
    brg_device *devs[MAX_DEVICES];
    brg_pipeline *pl = make_pipeline(m, 2, 2, 2, 32 * MiB, &sched, devs);
    float images[2 * 144] = {0}, out[2 * 5];
    if (pl) {
        CHECK_STATUS(brg_pipeline_predict(NULL, images, 1, out), BRG_ERR_INVALID_ARGUMENT);
        CHECK_STATUS(brg_pipeline_predict(pl, NULL, 1, out), BRG_ERR_INVALID_ARGUMENT);
        CHECK_STATUS(brg_pipeline_predict(pl, images, 1, NULL), BRG_ERR_INVALID_ARGUMENT);
        CHECK_STATUS(brg_pipeline_predict(pl, images, 0, out), BRG_ERR_INVALID_ARGUMENT);
        CHECK(strstr(brg_last_error(), "brg_pipeline_predict") != NULL);
        /* Still usable. */
        CHECK_OK(brg_pipeline_predict(pl, images, 2, out));
        for (int i = 0; i < 2 * 5; i++) CHECK(isfinite(out[i]));
    }
    destroy_pipeline(pl, sched, devs, 2);
    brg_model_destroy(m);
}

/* A step, then twice an evaluation, a prediction and a step. On one
 * device the process has as many threads after as after the first step:
 * an evaluation on the calling thread left an OpenMP pool there (libgomp
 * keeps one per thread that started parallel work), more pooled threads
 * than cores, and libgomp made the worker's threads sleep between parallel
 * regions: resnet18's epochs after the first were 25% slower. On devices
 * that share the cores evaluation has all of them on one worker (steps
 * have a share each), and the pool it grows there may stay while the steps
 * start no larger one (2 devices on 2 cores: one thread each, no pool), so
 * there the count must not grow from one evaluation to the next. oneDNN's
 * kernels start OpenMP teams; a machine of one core starts none and
 * cannot tell. */
static void test_evaluation_adds_no_threads(void)
{
    const char *was = brg_cpu_convolution(); /* the environment's choice, for the tests after this one */
    if (brg_cpu_set_convolution("onednn") != BRG_OK) return; /* built without oneDNN */
    brg_model *m = zoo_model("resnet18", 3, 32, 4, 0.25);
    const int micro = 4, mbs = 2, batch = micro * mbs;
    float *images = NULL, *outputs = malloc((size_t)batch * 4 * sizeof *outputs);
    int32_t *labels = NULL;
    CHECK(m != NULL && outputs != NULL && new_data(m, batch, &images, &labels));
    for (int p = 1; p <= 2 && m && images && outputs; p++) {
        brg_schedule *sched = NULL;
        brg_device *devs[MAX_DEVICES];
        brg_pipeline *pl = make_pipeline(m, p, mbs, micro, 64 * MiB, &sched, devs);
        if (pl) {
            CHECK_OK(brg_pipeline_step(pl, 0.01f, images, labels, batch, NULL, NULL));
            int count[3] = {test_thread_count(), 0, 0};
            for (int round = 1; round <= 2; round++) {
                double loss = 0.0, acc = 0.0;
                CHECK_OK(brg_pipeline_evaluate(pl, images, labels, batch, &loss, &acc));
                CHECK_OK(brg_pipeline_predict(pl, images, batch, outputs));
                CHECK_OK(brg_pipeline_step(pl, 0.01f, images, labels, batch, NULL, NULL));
                count[round] = test_settled_threads(count[round - 1]);
            }
            fprintf(stderr, "%d device%s: %d threads after the first step, %d and %d after evaluating and stepping\n",
                    p, p > 1 ? "s" : "", count[0], count[1], count[2]);
            if (p == 1) CHECK(count[1] == count[0]);
            CHECK(count[2] == count[1]);
        }
        destroy_pipeline(pl, sched, devs, p);
    }
    free(images);
    free(labels);
    free(outputs);
    brg_model_destroy(m);
    CHECK_OK(brg_cpu_set_convolution(was));
}

int main(void)
{
    test_evaluation_adds_no_threads(); /* first: before anything computed on this thread */
    test_by_hand();
    test_partitions();
    test_arguments();
    TEST_EXIT();
}
