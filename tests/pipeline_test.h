/* Shared by the training and pipeline tests (test_train, test_program,
 * test_executor, test_pipeline, test_cuda_pipeline; the public API, and the
 * internal stage slot protocol for the one-stage reference, so its users
 * are white-box tests): a seeded random source and random data,
 * a clock, model building, an eight-block model with a long skip, even
 * partitions and plans, gathering parameters and gradients from stages,
 * and the single-stage reference gradients the pipelines compare with.
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
#include "brigade/pipeline.h"
#include "brigade/plan.h"
#include "brigade/program.h"
#include "brigade/train.h"
#include "train/stage.h"
#include "testutil.h"

#ifndef MiB
#define MiB ((size_t)1 << 20)
#endif

/* ---- helpers ---- */

/* BRG_TEST_CPU=async makes the CPU devices these tests create cpu-async
 * ones (tests/test_async.sh), so that the pipeline suites also run on
 * streams and events; unset or "sync", synchronous ones. "cuda" makes
 * cpu_spec's devices CUDA virtual devices on GPU 0 (test_mpi.sh's NCCL
 * case, where a GPU is visible). */
static inline int test_cpu_async(void)
{
    const char *kind = getenv("BRG_TEST_CPU");
    if (!kind || !*kind || strcmp(kind, "sync") == 0 || strcmp(kind, "cuda") == 0) return 0;
    if (strcmp(kind, "async") == 0) return 1;
    fprintf(stderr, "BRG_TEST_CPU='%s': expected async, sync or cuda; using sync\n", kind);
    return 0;
}

static inline int test_on_gpu(void)
{
    const char *kind = getenv("BRG_TEST_CPU");
    return kind && strcmp(kind, "cuda") == 0;
}

/* brg_device_create, a CPU spec made cpu-async under BRG_TEST_CPU=async. */
static inline brg_status test_device_create(const brg_device_spec *spec, int index, brg_device **out)
{
    brg_device_spec s = *spec;
    if (s.backend == BRG_BACKEND_CPU && test_cpu_async()) s.async = 1;
    return brg_device_create(&s, index, out);
}

/* brg_device_create_cpu, honouring BRG_TEST_CPU. */
static inline brg_status test_cpu_device(size_t capacity, int index, brg_device **out)
{
    brg_device_spec spec = {.backend = BRG_BACKEND_CPU, .gpu = -1, .capacity = capacity};
    return test_device_create(&spec, index, out);
}

/* A test that wants its own sequence defines TEST_RNG_SEED first. */
#ifndef TEST_RNG_SEED
#define TEST_RNG_SEED 0x9e3779b97f4a7c15ULL
#endif
static uint64_t rng_state = TEST_RNG_SEED;

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

/* n random samples of `sample` floats in [-1, 1) and their labels in
 * [0, classes). */
static inline void fill_samples(float *images, int32_t *labels, int64_t n, int64_t sample, int classes)
{
    for (int64_t i = 0; i < n * sample; i++) images[i] = frand();
    for (int64_t i = 0; i < n; i++) labels[i] = (int32_t)((frand() + 1.0f) * 0.5f * (float)classes) % classes;
}

static inline void fill_data(const brg_model *m, int count, float *images, int32_t *labels)
{
    fill_samples(images, labels, count, sample_floats(m), (int)brg_model_classes(m));
}

/* count random samples for m, images and labels malloc'd and filled by
 * fill_data. Returns 1; 0 after a failed check when out of host memory,
 * with both NULL. */
static inline int new_data(const brg_model *m, int count, float **images, int32_t **labels)
{
    *images = malloc((size_t)(count * sample_floats(m)) * sizeof **images);
    *labels = malloc((size_t)count * sizeof **labels);
    CHECK(*images && *labels);
    if (!*images || !*labels) {
        free(*images);
        free(*labels);
        *images = NULL;
        *labels = NULL;
        return 0;
    }
    fill_data(m, count, *images, *labels);
    return 1;
}

/* The end of a model builder: st is the status of its steps so far. The
 * finalized model, or NULL after a failed check (m destroyed). */
static inline brg_model *finish_model(brg_model *m, brg_status st)
{
    if (st == BRG_OK) st = brg_model_finalize(m, NULL);
    CHECK_MSG(st == BRG_OK, "building model '%s': %s: %s", m ? brg_model_name(m) : "?", brg_status_string(st),
              brg_last_error());
    if (st != BRG_OK) {
        brg_model_destroy(m);
        return NULL;
    }
    return m;
}

/* Eight blocks; the stem's output r0 is added back in block 5, so it
 * crosses blocks 1..4 (and every stage boundary between them). BatchNorm
 * (with_bn) and dropout make recomputation and micro-batch offsets matter;
 * without BatchNorm, micro-batches do not change the gradients at all.
 * with_bn 2 also normalizes the input itself first, for data far from
 * zero. */
static inline brg_model *skip_model_bn(int with_bn)
{
    brg_model *m = NULL;
    brg_status st = brg_model_create(with_bn == 2 ? "long-skip-bn-input" : with_bn ? "long-skip" : "long-skip-nobn",
                                     1, 12, 12, &m);
    if (st == BRG_OK) st = brg_model_begin_block(m, "stem");
    if (st == BRG_OK && with_bn == 2) st = brg_model_add_batchnorm(m, "bn_in", "input", 1e-5f, 1, 1);
    if (st == BRG_OK) st = brg_model_add_conv2d(m, "c0", with_bn == 2 ? "bn_in" : "input", 4, 3, 3, 1, 1, 1, 1, 1);
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
    return finish_model(m, st);
}

static inline brg_model *skip_model(void) { return skip_model_bn(1); }

/* Channels in whole blocks of 8 and 16: a stem conv-BN-ReLU into a max
 * pool, two branches joined by a concat and added to a third, a strided
 * conv-BN-ReLU into dropout (plain only), a global pool and the head. */
static inline brg_model *blockable_model(void)
{
    brg_model *m = NULL;
    brg_status st = brg_model_create("blockable", 3, 10, 10, &m);
    const char *cat_in[2] = {"ra", "b"};
    if (st == BRG_OK) st = brg_model_begin_block(m, "stem");
    if (st == BRG_OK) st = brg_model_add_conv2d(m, "c1", "input", 16, 3, 3, 1, 1, 1, 1, 0);
    if (st == BRG_OK) st = brg_model_add_batchnorm(m, "bn1", "c1", 1e-3f, 1, 1);
    if (st == BRG_OK) st = brg_model_add_relu(m, "r1", "bn1");
    if (st == BRG_OK) st = brg_model_add_maxpool(m, "mp1", "r1", 3, 1, 1);
    if (st == BRG_OK) st = brg_model_begin_block(m, "mixed");
    if (st == BRG_OK) st = brg_model_add_conv2d(m, "a", "mp1", 16, 1, 1, 1, 1, 0, 0, 0);
    if (st == BRG_OK) st = brg_model_add_batchnorm(m, "bna", "a", 1e-3f, 1, 1);
    if (st == BRG_OK) st = brg_model_add_relu(m, "ra", "bna");
    if (st == BRG_OK) st = brg_model_add_conv2d(m, "b", "mp1", 16, 3, 3, 1, 1, 1, 1, 1);
    if (st == BRG_OK) st = brg_model_add_concat(m, "cat", cat_in, 2);
    if (st == BRG_OK) st = brg_model_add_conv2d(m, "cs", "mp1", 32, 1, 1, 1, 1, 0, 0, 1);
    if (st == BRG_OK) st = brg_model_add_add(m, "sum", "cat", "cs");
    if (st == BRG_OK) st = brg_model_add_relu(m, "r2", "sum");
    if (st == BRG_OK) st = brg_model_add_conv2d(m, "c3", "r2", 16, 3, 3, 2, 2, 1, 1, 0);
    if (st == BRG_OK) st = brg_model_add_batchnorm(m, "bn3", "c3", 1e-3f, 1, 1);
    if (st == BRG_OK) st = brg_model_add_relu(m, "r3", "bn3");
    if (st == BRG_OK) st = brg_model_begin_block(m, "head");
    if (st == BRG_OK) st = brg_model_add_dropout(m, "drop", "r3", 0.2f);
    if (st == BRG_OK) st = brg_model_add_global_avgpool(m, "gap", "drop");
    if (st == BRG_OK) st = brg_model_add_conv2d(m, "c4", "gap", 8, 1, 1, 1, 1, 0, 0, 1);
    if (st == BRG_OK) st = brg_model_add_linear(m, "fc", "c4", 5, 1);
    return finish_model(m, st);
}

/* Blocks cut as evenly as possible into the p*v virtual stages; device d's
 * chunk c is virtual stage c*p + d. */
/* The same under schedule s's placement (the V-shapes run chunk 1 back up). */
static inline brg_device_part even_part_of(const brg_model *m, const brg_schedule *s, int d, int recompute)
{
    brg_device_part part;
    memset(&part, 0, sizeof part);
    const int v = brg_schedule_chunks(s), nb = brg_model_block_count(m), V = brg_schedule_devices(s) * v;
    part.chunks = v;
    for (int c = 0; c < v; c++) {
        const int j = brg_schedule_stage_of(s, d, c);
        part.first_block[c] = j * nb / V;
        part.last_block[c] = (j + 1) * nb / V - 1;
        part.recompute[c] = recompute;
    }
    return part;
}

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

/* The cuts of even_part's partition into V virtual stages (V - 1 of them:
 * virtual stage j ends after block split[j]); returns their number. */
static inline int even_split(const brg_model *m, int V, int *split)
{
    const int nb = brg_model_block_count(m);
    for (int j = 0; j + 1 < V; j++) split[j] = (j + 1) * nb / V - 1;
    return V - 1;
}

static inline brg_device_spec cpu_spec(size_t capacity)
{
    brg_device_spec s = {.backend = BRG_BACKEND_CPU, .gpu = -1, .capacity = capacity};
    if (test_on_gpu()) { /* room for cuDNN's workspaces beside the same buffers */
        brg_device_spec g = {.backend = BRG_BACKEND_CUDA, .gpu = 0, .vdev = 0, .capacity = capacity + 256 * MiB};
        return g;
    }
    return s;
}

/* Plan options for `batch` samples in mbs micro-batches on specs[0..p)
 * with `kind` (v chunks per device when interleaved), cut at split (p*v - 1
 * cuts) or searched where split is NULL; the planner's defaults otherwise. */
static inline brg_plan_options plan_options(const brg_device_spec *specs, int p, int batch, int mbs,
                                            brg_schedule_kind kind, int v, const int *split)
{
    brg_plan_options o = brg_plan_options_init();
    o.devices = specs;
    o.n_devices = p;
    o.batch = batch;
    o.micro_batches = mbs;
    o.schedule = kind;
    o.chunks = kind == BRG_SCHEDULE_INTERLEAVED ? v : 0;
    o.split = split;
    o.n_split = split ? p * v - 1 : 0;
    return o;
}

/* What gather() reads: gradients (else parameters), trainable parameters
 * only, and whether a layer that no stage holds is skipped or left as
 * zeros (else a failed check). */
enum { GATHER_GRADS = 1, GATHER_TRAINABLE = 2, GATHER_HELD_ONLY = 4, GATHER_ZERO_ABSENT = 8 };

/* The parameters or gradients (flags) of the model in layer order, those
 * named only_name where not NULL, each from the first of the stages that
 * holds its layer (malloc'd; *count floats). */
static inline float *gather(const brg_model *m, brg_stage *const *stages, int n_stages, int flags,
                            const char *only_name, int64_t *count)
{
    float *out = NULL;
    int64_t at = 0;
    for (int pass = 0; pass < 2; pass++) { /* count, then copy */
        if (pass) {
            out = calloc((size_t)(at ? at : 1), sizeof *out);
            if (!out) return NULL;
            at = 0;
        }
        for (int l = 0; l < brg_model_layer_count(m); l++) {
            const brg_layer *ly = brg_model_get_layer(m, l);
            for (int i = 0; i < brg_layer_param_count(ly, m); i++) {
                brg_param_info info;
                brg_layer_param(ly, m, i, &info);
                if (((flags & GATHER_TRAINABLE) && !info.trainable) || (only_name && strcmp(info.name, only_name) != 0))
                    continue;
                const brg_stage *holder = NULL;
                for (int k = 0; k < n_stages && !holder; k++) {
                    if (!stages[k]) continue; /* another rank's */
                    const brg_stage_config *c = brg_stage_get_config(stages[k]);
                    if (ly->block >= c->first_block && ly->block <= c->last_block) holder = stages[k];
                }
                if (!holder && (flags & GATHER_HELD_ONLY)) continue;
                if (pass && !(flags & GATHER_ZERO_ABSENT))
                    CHECK_MSG(holder != NULL, "no stage holds layer '%s'", ly->name);
                if (pass && holder) {
                    brg_tensor t;
                    brg_status st = flags & GATHER_GRADS ? brg_stage_grad(holder, l, i, &t)
                                                         : brg_stage_param(holder, l, i, &t);
                    CHECK_OK(st);
                    if (st == BRG_OK)
                        CHECK_OK(brg_device_copy_out(brg_stage_device(holder), out + at, t.data, brg_tensor_bytes(&t)));
                }
                at += info.count;
            }
        }
    }
    *count = at;
    return out;
}

/* Every trainable gradient of the model in layer order, gathered from the
 * stages that hold the layers (malloc'd; *count floats). */
static inline float *gather_grads(const brg_model *m, brg_stage *const *stages, int n_stages, int64_t *count)
{
    return gather(m, stages, n_stages, GATHER_GRADS | GATHER_TRAINABLE, NULL, count);
}

/* The pipeline's stages, device by device, chunk by chunk, into stages
 * (room for devices x chunks); returns their number. */
static inline int pipeline_stages(const brg_pipeline *pl, brg_stage **stages)
{
    const brg_pipeline_desc *desc = brg_pipeline_get_desc(pl);
    const int p = brg_schedule_devices(desc->schedule), v = brg_schedule_chunks(desc->schedule);
    int k = 0;
    for (int d = 0; d < p; d++)
        for (int c = 0; c < v; c++) stages[k++] = brg_pipeline_stage(pl, d, c);
    return k;
}

/* The pipeline that trains as plan says (brg_plan_pipeline_desc). */
static inline brg_status pipeline_from_plan(const brg_plan *plan, brg_device *const *devices, int n_devices,
                                            const brg_pipeline_options *options, brg_pipeline **out)
{
    brg_pipeline_desc desc;
    *out = NULL;
    brg_status st = brg_plan_pipeline_desc(plan, &desc);
    return st == BRG_OK ? brg_pipeline_create(&desc, devices, n_devices, options, out) : st;
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
static inline float *reference_grads(const brg_model *m, int mb_count, int n, const float *images,
                                     const int32_t *labels, uint64_t seed, int recompute, int split, int64_t *count,
                                     double *loss)
{
    brg_device *dev = NULL;
    brg_stage *s = NULL;
    float *g = NULL;
    double loss_sum = 0.0;
    const int64_t sample = sample_floats(m);
    CHECK_OK(test_cpu_device(256 * MiB, 0, &dev));
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
        brg_stage_result r = {0.0f, 0, 0, NULL};
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

#endif /* BRIGADE_PIPELINE_TEST_H */
