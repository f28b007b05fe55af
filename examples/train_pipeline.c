/* Train a model that does not fit one capped device across two, through the
 * public API only: model -> plan -> pipeline -> steps. `make check` runs it.
 *
 *   examples/train_pipeline
 *
 * 1. Build fmnist-cnn from the zoo.
 * 2. Ask the planner to cut it over two CPU devices of 6 MiB each (one
 *    alone is too small: the plan for it says so and why).
 * 3. Create two real devices of those capacities and a pipeline from the
 *    plan's description (brg_plan_pipeline_desc).
 * 4. Train on a learnable synthetic task (each class brightens its own
 *    band of rows) and check that the loss falls and that each device's
 *    measured peak is the one the plan predicted, to the byte.
 * Exit status 0 when all of it holds. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brigade.h"

#define BATCH 32
#define STEPS 30
#define SIDE 28
#define CLASSES 10

static int fail(const char *what, brg_status st)
{
    fprintf(stderr, "train_pipeline: %s: %s: %s\n", what, brg_status_string(st), brg_last_error());
    return 1;
}

/* A batch of the synthetic task: noise, plus a bright band of rows whose
 * position is the label. xorshift keeps it the same on every machine. */
static void make_batch(uint64_t *state, float *images, int32_t *labels)
{
    for (int n = 0; n < BATCH; n++) {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        const int label = (int)(*state % CLASSES);
        labels[n] = label;
        for (int y = 0; y < SIDE; y++)
            for (int x = 0; x < SIDE; x++) {
                *state ^= *state << 13;
                *state ^= *state >> 7;
                *state ^= *state << 17;
                const float noise = (float)(*state % 1000) / 1000.0f - 0.5f;
                const int band = y >= label * 2 + 4 && y < label * 2 + 7;
                images[(size_t)n * SIDE * SIDE + (size_t)y * SIDE + (size_t)x] = noise + (band ? 2.0f : 0.0f);
            }
    }
}

/* Plan the model on the devices of a list as `brigade --devices` takes it,
 * the batch split into 8 micro-batches. */
static brg_status plan_on(const brg_model *model, const char *devices, brg_device_spec *specs, brg_plan **out)
{
    int n = 0;
    brg_status st = brg_device_spec_parse(devices, specs, 2, &n);
    if (st != BRG_OK) return st;
    brg_plan_options o = brg_plan_options_init();
    o.devices = specs;
    o.n_devices = n;
    o.batch = BATCH;
    o.micro_batches = 8;
    return brg_plan_create(model, &o, out);
}

int main(void)
{
    brg_model *model = NULL;
    brg_plan *one = NULL, *plan = NULL;
    brg_device *devs[2] = {NULL, NULL};
    brg_pipeline *pipeline = NULL;
    brg_device_spec specs[2];
    float *images = malloc(sizeof(float) * BATCH * SIDE * SIDE);
    int32_t *labels = malloc(sizeof(int32_t) * BATCH);
    int rc = 1;
    brg_status st;
    if (!images || !labels) goto done;

    const brg_zoo_options zo = {.channels = 1, .height = SIDE, .width = SIDE, .classes = CLASSES};
    if ((st = brg_zoo_build("fmnist-cnn", &zo, &model)) != BRG_OK) {
        rc = fail("model", st);
        goto done;
    }

    /* One 6 MiB device is too small; the plan explains itself. */
    if ((st = plan_on(model, "6MiB", specs, &one)) != BRG_OK) {
        rc = fail("plan on one device", st);
        goto done;
    }
    const brg_plan_info *info1 = brg_plan_get_info(one);
    printf("one device of 6 MiB: %s\n\n", info1->feasible ? "fits (unexpected)" : info1->note);
    if (info1->feasible) goto done;

    if ((st = plan_on(model, "2x6MiB", specs, &plan)) != BRG_OK) {
        rc = fail("plan on two devices", st);
        goto done;
    }
    const brg_plan_info *info = brg_plan_get_info(plan);
    if (!info->feasible) {
        fprintf(stderr, "train_pipeline: two devices of 6 MiB do not fit: %s\n", info->note);
        goto done;
    }
    for (int d = 0; d < 2; d++) {
        const brg_plan_stage *s = brg_plan_get_stage(plan, d);
        printf("device %d: blocks %s..%s, planned peak %zu bytes\n", d,
               brg_model_block_name(model, s->part.first_block[0]), brg_model_block_name(model, s->part.last_block[0]),
               s->peak_bytes);
    }

    for (int d = 0; d < 2; d++)
        if ((st = brg_device_create(&specs[d], d, &devs[d])) != BRG_OK) {
            rc = fail("device", st);
            goto done;
        }
    brg_pipeline_desc desc;
    brg_pipeline_options po = brg_pipeline_options_init();
    if ((st = brg_plan_pipeline_desc(plan, &desc)) != BRG_OK ||
        (st = brg_pipeline_create(&desc, devs, 2, &po, &pipeline)) != BRG_OK) {
        rc = fail("pipeline", st);
        goto done;
    }

    uint64_t state = 88172645463325252ull;
    double first = 0.0, last = 0.0;
    for (int step = 0; step < STEPS; step++) {
        double loss = 0.0;
        int64_t correct = 0;
        make_batch(&state, images, labels);
        if ((st = brg_pipeline_step(pipeline, 0.01f, images, labels, BATCH, &loss, &correct)) != BRG_OK) {
            rc = fail("step", st);
            goto done;
        }
        if (step < 3) first += loss / 3.0;
        if (step >= STEPS - 3) last += loss / 3.0;
        if (step % 10 == 0 || step == STEPS - 1)
            printf("step %2d: loss %.4f, %2lld of %d right\n", step + 1, loss, (long long)correct, BATCH);
    }
    printf("mean loss of the first 3 steps %.4f, of the last 3 %.4f\n", first, last);
    if (!(last < 0.5 * first)) {
        fprintf(stderr, "train_pipeline: the loss did not halve\n");
        goto done;
    }

    rc = 0;
    for (int d = 0; d < 2; d++) {
        const size_t planned = brg_plan_get_stage(plan, d)->peak_bytes, measured = brg_device_peak(devs[d]);
        printf("device %d: peak %zu bytes measured, %zu planned\n", d, measured, planned);
        if (measured != planned) rc = 1;
    }
    if (rc) fprintf(stderr, "train_pipeline: measured peaks differ from the plan\n");

done:
    brg_pipeline_destroy(pipeline);
    for (int d = 0; d < 2; d++) brg_device_destroy(devs[d]);
    brg_plan_destroy(plan);
    brg_plan_destroy(one);
    brg_model_destroy(model);
    free(images);
    free(labels);
    return rc;
}
