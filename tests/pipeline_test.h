/* Shared by the pipeline tests (test_program, test_executor, test_pipeline;
 * public API only, so the last can stay public too): a seeded
 * random source, a clock, an eight-block model with a long skip, even
 * partitions, and the single-stage reference gradients both compare with.
 * Static inline functions in a header: each test is one translation unit,
 * and one that does not call some of them gets no warning. */
#ifndef BRIGADE_PIPELINE_TEST_H
#define BRIGADE_PIPELINE_TEST_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "brigade/model.h"
#include "brigade/program.h"
#include "brigade/train.h"
#include "testutil.h"

#ifndef MiB
#define MiB ((size_t)1 << 20)
#endif

/* ---- helpers ---- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;

static inline float frand(void) /* uniform in [-1, 1) */
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (float)((double)(rng_state >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static inline double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static inline int64_t sample_floats(const brg_model *m)
{
    const brg_model_tensor *t = brg_model_get_tensor(m, brg_model_input(m));
    return t->c * t->h * t->w;
}

/* Eight blocks; the stem's output r0 is added back in block 5, so it
 * crosses blocks 1..4 (and every stage boundary between them). BatchNorm
 * (with_bn) and dropout make recomputation and micro-batch offsets matter;
 * without BatchNorm, micro-batches do not change the gradients at all. */
static inline brg_model *skip_model_bn(int with_bn)
{
    brg_model *m = NULL;
    brg_status st = brg_model_create(with_bn ? "long-skip" : "long-skip-nobn", 1, 12, 12, &m);
    if (st == BRG_OK) st = brg_model_begin_block(m, "stem");
    if (st == BRG_OK) st = brg_model_add_conv2d(m, "c0", "input", 4, 3, 3, 1, 1, 1, 1, 1);
    if (st == BRG_OK) st = brg_model_add_relu(m, "r0", "c0");
    if (st == BRG_OK) st = brg_model_begin_block(m, "b1");
    if (st == BRG_OK) st = brg_model_add_conv2d(m, "c1", "r0", 4, 3, 3, 1, 1, 1, 1, 0);
    if (st == BRG_OK && with_bn) st = brg_model_add_batchnorm(m, "bn1", "c1", 1e-5f, 1, 1);
    if (st == BRG_OK) st = brg_model_add_relu(m, "r1", with_bn ? "bn1" : "c1");
    if (st == BRG_OK) st = brg_model_begin_block(m, "b2");
    if (st == BRG_OK) st = brg_model_add_conv2d(m, "c2", "r1", 6, 3, 3, 1, 1, 1, 1, 1);
    if (st == BRG_OK) st = brg_model_add_relu(m, "r2", "c2");
    if (st == BRG_OK) st = brg_model_begin_block(m, "b3");
    if (st == BRG_OK) st = brg_model_add_conv2d(m, "c3", "r2", 4, 1, 1, 1, 1, 0, 0, 1);
    if (st == BRG_OK) st = brg_model_add_relu(m, "r3", "c3");
    if (st == BRG_OK) st = brg_model_begin_block(m, "b4");
    if (st == BRG_OK) st = brg_model_add_conv2d(m, "c4", "r3", 4, 3, 3, 1, 1, 1, 1, 1);
    if (st == BRG_OK) st = brg_model_add_relu(m, "r4", "c4");
    if (st == BRG_OK) st = brg_model_begin_block(m, "b5");
    if (st == BRG_OK) st = brg_model_add_add(m, "sum", "r4", "r0");
    if (st == BRG_OK) st = brg_model_add_maxpool(m, "p5", "sum", 2, 2, 0);
    if (st == BRG_OK) st = brg_model_begin_block(m, "b6");
    if (st == BRG_OK) st = brg_model_add_conv2d(m, "c6", "p5", 8, 3, 3, 1, 1, 1, 1, 0);
    if (st == BRG_OK && with_bn) st = brg_model_add_batchnorm(m, "bn6", "c6", 1e-5f, 1, 1);
    if (st == BRG_OK) st = brg_model_add_relu(m, "r6", with_bn ? "bn6" : "c6");
    if (st == BRG_OK) st = brg_model_add_avgpool(m, "a6", "r6", 2, 2, 0, 1);
    if (st == BRG_OK) st = brg_model_begin_block(m, "head");
    if (st == BRG_OK) st = brg_model_add_dropout(m, "d7", "a6", 0.2f);
    if (st == BRG_OK) st = brg_model_add_linear(m, "fc", "d7", 5, 1);
    if (st == BRG_OK) st = brg_model_finalize(m, NULL);
    CHECK_OK(st);
    if (st != BRG_OK) {
        brg_model_destroy(m);
        return NULL;
    }
    return m;
}

static inline brg_model *skip_model(void) { return skip_model_bn(1); }

/* Blocks cut as evenly as possible into the p*v virtual stages; device d's
 * chunk c is virtual stage c*p + d. */
static inline brg_device_part even_part(const brg_model *m, int p, int v, int d, int recompute)
{
    brg_device_part part;
    memset(&part, 0, sizeof part);
    const int nb = brg_model_block_count(m), V = p * v;
    part.chunks = v;
    for (int c = 0; c < v; c++) {
        int j = c * p + d;
        part.first_block[c] = j * nb / V;
        part.last_block[c] = (j + 1) * nb / V - 1;
        part.recompute[c] = recompute;
    }
    return part;
}

static inline brg_device_spec cpu_spec(size_t capacity)
{
    brg_device_spec s = {.backend = BRG_BACKEND_CPU, .gpu = -1, .capacity = capacity};
    return s;
}

/* Every trainable gradient of the model in layer order, gathered from the
 * stages that hold the layers (malloc'd; *count floats). */
static inline float *gather_grads(const brg_model *m, brg_stage *const *stages, int n_stages, int64_t *count)
{
    int64_t total = 0;
    for (int l = 0; l < brg_model_layer_count(m); l++) {
        const brg_layer *ly = brg_model_get_layer(m, l);
        for (int i = 0; i < brg_layer_param_count(ly, m); i++) {
            brg_param_info info;
            brg_layer_param(ly, m, i, &info);
            if (info.trainable) total += info.count;
        }
    }
    float *out = malloc((size_t)(total ? total : 1) * sizeof *out);
    if (!out) return NULL;
    int64_t at = 0;
    for (int l = 0; l < brg_model_layer_count(m); l++) {
        const brg_layer *ly = brg_model_get_layer(m, l);
        for (int i = 0; i < brg_layer_param_count(ly, m); i++) {
            brg_param_info info;
            brg_layer_param(ly, m, i, &info);
            if (!info.trainable) continue;
            int found = 0;
            for (int k = 0; k < n_stages && !found; k++) {
                const brg_stage_config *c = brg_stage_get_config(stages[k]);
                if (ly->block < c->first_block || ly->block > c->last_block) continue;
                brg_tensor g;
                CHECK_OK(brg_stage_grad(stages[k], l, i, &g));
                CHECK_OK(brg_device_copy_out(brg_stage_device(stages[k]), out + at, g.data, brg_tensor_bytes(&g)));
                found = 1;
            }
            CHECK_MSG(found, "no stage holds layer '%s'", ly->name);
            at += info.count;
        }
    }
    *count = total;
    return out;
}

/* max |a - b| / max |a|; infinite where either holds a NaN (which no
 * comparison would otherwise catch). */
static inline double rel_diff(const float *a, const float *b, int64_t n)
{
    double dmax = 0.0, amax = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (isnan(d)) return INFINITY;
        if (d > dmax) dmax = d;
        if (fabs((double)a[i]) > amax) amax = fabs((double)a[i]);
    }
    return amax > 0.0 ? dmax / amax : dmax;
}

/* One stage over the whole model on its own device, m micro-batches of n
 * samples forward and backward in order with the programs' loss scale and
 * offsets: the reference gradients (malloc'd) and mean loss. */
static inline float *reference_grads(const brg_model *m, int mb_count, int n, const float *images, const int32_t *labels,
                              uint64_t seed, int recompute, int split, int64_t *count, double *loss)
{
    brg_device *dev = NULL;
    brg_stage *s = NULL;
    float *g = NULL;
    double loss_sum = 0.0;
    const int64_t sample = sample_floats(m);
    CHECK_OK(brg_device_create_cpu(256 * MiB, 0, &dev));
    brg_stage_config c;
    memset(&c, 0, sizeof c);
    c.first_block = 0;
    c.last_block = brg_model_block_count(m) - 1;
    c.max_batch = n;
    c.slots = 1;
    c.optimizer = brg_optimizer_config_init(BRG_OPTIMIZER_ADAM);
    c.seed = seed;
    c.recompute = recompute;
    if (dev) CHECK_OK(brg_stage_create(m, dev, &c, &s));
    if (!s) goto done;
    for (int b = 0; b < mb_count; b++) {
        brg_tensor x, y;
        brg_pass pass = {BRG_PASS_TRAIN, 1, (int64_t)b * n};
        brg_stage_result r = {0.0f, 0};
        brg_status st = brg_stage_input(s, 0, 0, n, &x);
        if (st == BRG_OK) st = brg_device_copy_in(dev, x.data, images + (int64_t)b * n * sample, brg_tensor_bytes(&x));
        if (st == BRG_OK) st = brg_stage_labels(s, 0, n, &y);
        if (st == BRG_OK) st = brg_device_copy_in(dev, y.data, labels + (int64_t)b * n, brg_tensor_bytes(&y));
        if (st == BRG_OK) st = brg_stage_forward(s, 0, &pass, &r);
        if (st == BRG_OK && split) {
            st = brg_stage_backward_input(s, 0, 1.0f / (float)(mb_count * n));
            if (st == BRG_OK) st = brg_stage_backward_weight(s, 0);
        } else if (st == BRG_OK) {
            st = brg_stage_backward(s, 0, 1.0f / (float)(mb_count * n));
        }
        CHECK_OK(st);
        loss_sum += (double)r.loss * n;
    }
    CHECK(!brg_stage_slot_in_use(s, 0));
    g = gather_grads(m, &s, 1, count);
    *loss = loss_sum / (double)(mb_count * n);
done:
    brg_stage_destroy(s);
    brg_device_destroy(dev);
    return g;
}

static inline void fill_data(const brg_model *m, int count, float *images, int32_t *labels)
{
    const int64_t sample = sample_floats(m);
    const int classes = (int)brg_model_classes(m);
    for (int64_t i = 0; i < (int64_t)count * sample; i++) images[i] = frand();
    for (int i = 0; i < count; i++) labels[i] = (int32_t)((frand() + 1.0f) * 0.5f * (float)classes) % classes;
}

#endif /* BRIGADE_PIPELINE_TEST_H */
