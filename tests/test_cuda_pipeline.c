/* Pipelines on virtual devices of GPU 0, against the CPU.
 *
 * 1. Gradients: a small model without BatchNorm or dropout (so micro-batches
 *    give the full batch's gradients exactly, up to rounding), on p = 1, 2,
 *    4 virtual devices with GPipe, 1F1B, ZB-H1 and interleaved 1F1B, one
 *    mini-batch of plain SGD, against one CPU stage running the whole batch.
 *    The GPU's gradients are read back from the update, (p0 - p1) / lr,
 *    since the step zeroes the gradient buffers; lr is a power of two, so
 *    the division is exact and the recovered gradients carry only the
 *    rounding of p1.
 *    Before the step, an evaluation (pipelined over the devices) gives
 *    the reference's loss.
 * 2. Memory: every device's arena peak after the step equals the plan's
 *    peak for it to the byte (brigade/pipeline.h promises it), and the GPU
 *    memory in use (cudaMemGetInfo) covers the arenas' peaks and does not
 *    grow over steady steps (nothing is allocated outside the arenas). The
 *    cudaMemGetInfo checks count only with BRG_TEST_GPU_ALONE=1, since
 *    other processes on the GPU (a parallel make check) move its numbers;
 *    otherwise they are printed.
 * 3. Out of memory: an allocation beyond a CUDA device's capacity fails
 *    with the same status and message as on a CPU device (device names
 *    aside), and a pipeline on devices smaller than its plan's with the
 *    same status, after which the devices hold only persistent memory.
 *
 * Exits 77 where no CUDA backend is compiled in or no GPU is visible. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#ifdef BRG_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "pipeline_test.h"

#define BATCH 16
#define MICRO_BATCHES 8
#define LR 64.0f
#define GRAD_TOLERANCE 1e-4
#define DEVICE_CAPACITY (64 * MiB)
#define MAX_DEVICES 7

/* Eight blocks, no BatchNorm, no dropout; the sum in block 4 reads block 2's
 * output, so a tensor crosses a stage boundary it does not start at. */
static brg_model *plain_model(void)
{
    brg_model *m = NULL;
    brg_status st = brg_model_create("plain", 3, 16, 16, &m);
    if (st == BRG_OK) st = brg_model_begin_block(m, "b0");
    if (st == BRG_OK) st = brg_model_add_conv2d(m, "c0", "input", 8, 3, 3, 1, 1, 1, 1, 1);
    if (st == BRG_OK) st = brg_model_add_relu(m, "r0", "c0");
    if (st == BRG_OK) st = brg_model_begin_block(m, "b1");
    if (st == BRG_OK) st = brg_model_add_conv2d(m, "c1", "r0", 8, 3, 3, 1, 1, 1, 1, 1);
    if (st == BRG_OK) st = brg_model_add_relu(m, "r1", "c1");
    if (st == BRG_OK) st = brg_model_begin_block(m, "b2");
    if (st == BRG_OK) st = brg_model_add_conv2d(m, "c2", "r1", 16, 3, 3, 2, 2, 1, 1, 1);
    if (st == BRG_OK) st = brg_model_add_relu(m, "r2", "c2");
    if (st == BRG_OK) st = brg_model_begin_block(m, "b3");
    if (st == BRG_OK) st = brg_model_add_conv2d(m, "c3", "r2", 16, 1, 1, 1, 1, 0, 0, 1);
    if (st == BRG_OK) st = brg_model_add_relu(m, "r3", "c3");
    if (st == BRG_OK) st = brg_model_begin_block(m, "b4");
    if (st == BRG_OK) st = brg_model_add_add(m, "s4", "r3", "r2");
    if (st == BRG_OK) st = brg_model_add_maxpool(m, "p4", "s4", 2, 2, 0);
    if (st == BRG_OK) st = brg_model_begin_block(m, "b5");
    if (st == BRG_OK) st = brg_model_add_conv2d(m, "c5", "p4", 16, 3, 3, 1, 1, 1, 1, 0);
    if (st == BRG_OK) st = brg_model_add_relu(m, "r5", "c5");
    if (st == BRG_OK) st = brg_model_begin_block(m, "b6");
    if (st == BRG_OK) st = brg_model_add_avgpool(m, "a6", "r5", 4, 4, 0, 1);
    if (st == BRG_OK) st = brg_model_begin_block(m, "head");
    if (st == BRG_OK) st = brg_model_add_linear(m, "fc", "a6", 10, 1);
    return finish_model(m, st);
}

/* n virtual devices of DEVICE_CAPACITY on GPU 0, through the documented
 * list syntax, so that they are numbered and named as users get them. */
static int gpu_specs(int n, brg_device_spec *out)
{
    char text[64];
    int count = 0;
    snprintf(text, sizeof text, "cuda:0:%dx%zuMiB", n, DEVICE_CAPACITY / MiB);
    CHECK_OK(brg_device_spec_parse(text, out, n, &count));
    CHECK(count == n && out[n - 1].backend == BRG_BACKEND_CUDA && out[n - 1].gpu == 0 &&
          out[n - 1].vdev == n - 1 && out[n - 1].capacity == DEVICE_CAPACITY);
    return count == n;
}

/* A plan on specs[0..p) with even manual cuts (even_part's), so that CPU
 * and GPU plans hold the same blocks per device. NULL on failure. */
static brg_plan *even_plan(const brg_model *m, const brg_device_spec *specs, int p, brg_schedule_kind kind, int v)
{
    int split[BRG_PLAN_MAX_DEVICES];
    const int n_split = even_split(m, p * v, split);
    brg_plan_options po = plan_options(specs, p, BATCH, MICRO_BATCHES, kind, v, n_split ? split : NULL);
    po.optimizer = brg_optimizer_config_init(BRG_OPTIMIZER_SGD); /* plain: p1 = p0 - lr g */
    brg_plan *plan = NULL;
    CHECK_OK(brg_plan_create(m, &po, &plan));
    return plan;
}

/* Every trainable parameter of the model in layer order, from the pipeline
 * stages that hold the layers (malloc'd; count floats, as reference_grads
 * lays out gradients, or NULL after a failed check). */
static float *trainable_params(const brg_model *m, const brg_pipeline *pipe, int64_t count)
{
    brg_stage *stages[8]; /* p <= 7 devices with one chunk, p <= 4 with two */
    int64_t n = 0;
    float *out = gather(m, stages, pipeline_stages(pipe, stages), GATHER_TRAINABLE, NULL, &n);
    CHECK_MSG(out && n == count, "%lld parameters, the reference has %lld", (long long)n, (long long)count);
    if (n != count) {
        free(out);
        return NULL;
    }
    return out;
}

static int gpu_alone = 0;

/* Bytes of GPU 0 in use by everyone, as the driver counts them. */
static size_t gpu_used(void)
{
    size_t free_b = 0, total = 0;
    if (cudaSetDevice(0) != cudaSuccess || cudaMemGetInfo(&free_b, &total) != cudaSuccess) {
        CHECK_MSG(0, "cudaMemGetInfo: %s", cudaGetErrorString(cudaGetLastError()));
        return 0;
    }
    return total - free_b;
}

/* The reference: one CPU stage over the whole batch. */
typedef struct reference {
    const brg_model *model;
    const float *images;
    const int32_t *labels;
    float *grads;
    int64_t count;
    double loss;
} reference;

/* Train one mini-batch on p virtual devices of GPU 0 and compare gradients,
 * loss and memory with the reference and the plan. */
static void check_pipeline(const reference *ref, int p, brg_schedule_kind kind, int v)
{
    const char *name = brg_schedule_kind_name(kind);
    brg_device_spec specs[MAX_DEVICES];
    brg_device *devs[MAX_DEVICES] = {0};
    brg_pipeline *pipe = NULL;
    float *p0 = NULL, *p1 = NULL;
    brg_plan *plan = gpu_specs(p, specs) ? even_plan(ref->model, specs, p, kind, v) : NULL;
    if (!plan) goto done;
    const brg_plan_info *pi = brg_plan_get_info(plan);
    CHECK_MSG(pi->feasible, "%s on %d devices: plan does not fit: %s", name, p, pi->note);
    if (!pi->feasible) goto done;

    const size_t used0 = gpu_used();
    for (int d = 0; d < p; d++) CHECK_OK(brg_device_create(&specs[d], d, &devs[d]));
    for (int d = 0; d < p; d++)
        if (!devs[d]) goto done;
    brg_pipeline_options opt = brg_pipeline_options_init();
    opt.seed = 7;
    CHECK_OK(pipeline_from_plan(plan, devs, p, &opt, &pipe));
    if (!pipe || !(p0 = trainable_params(ref->model, pipe, ref->count))) goto done;

    /* Evaluation pipelines its pieces (a micro-batch each) through the
     * devices, each forwarding on its worker: with no BatchNorm or dropout
     * its loss is the reference's train loss. */
    double eval_loss = 0.0, eval_acc = 0.0;
    CHECK_OK(brg_pipeline_evaluate(pipe, ref->images, ref->labels, BATCH, &eval_loss, &eval_acc));
    CHECK_MSG(fabs(eval_loss - ref->loss) <= GRAD_TOLERANCE * fabs(ref->loss),
              "%s on %d devices: evaluation loss %.9g, the CPU's train loss %.9g", name, p, eval_loss, ref->loss);

    double loss = 0.0;
    const double t0 = now_seconds();
    CHECK_OK(brg_pipeline_step(pipe, LR, ref->images, ref->labels, BATCH, &loss, NULL));
    const double step_s = now_seconds() - t0;
    if (!(p1 = trainable_params(ref->model, pipe, ref->count))) goto done;
    for (int64_t i = 0; i < ref->count; i++) p1[i] = (p0[i] - p1[i]) / LR; /* the gradient */
    const double grad_err = rel_diff(ref->grads, p1, ref->count);
    const double loss_err = fabs(loss - ref->loss) / fabs(ref->loss);
    fprintf(stderr, "%-11s p=%d v=%d: step %.3f s, loss %.6f (cpu %.6f), gradient max rel diff %.2e\n", name, p, v,
            step_s, loss, ref->loss, grad_err);
    CHECK_MSG(grad_err <= GRAD_TOLERANCE,
              "%s on %d devices: gradients differ from the CPU's by %.3g (> %g; TF32 math in cuDNN or cuBLAS "
              "would explain ~1e-3)", name, p, grad_err, GRAD_TOLERANCE);
    CHECK_MSG(loss_err <= GRAD_TOLERANCE, "%s on %d devices: loss %.9g, CPU %.9g", name, p, loss, ref->loss);

    /* The arena peaks are the plan's, to the byte. */
    size_t peak_sum = 0;
    for (int d = 0; d < p; d++) {
        brg_memory_report mr;
        const brg_plan_stage *ps = brg_plan_get_stage(plan, d);
        CHECK_OK(brg_pipeline_memory(pipe, d, &mr));
        fprintf(stderr, "  device %d (%s): plan peak %zu, arena peak %zu, device peak %zu\n", d,
                brg_device_name(devs[d]), ps->peak_bytes, mr.peak_bytes, brg_device_peak(devs[d]));
        CHECK_MSG(mr.peak_bytes == ps->peak_bytes, "%s p=%d device %d: arena peak %zu, plan %zu (%+lld bytes)", name,
                  p, d, mr.peak_bytes, ps->peak_bytes, (long long)mr.peak_bytes - (long long)ps->peak_bytes);
        CHECK(brg_device_peak(devs[d]) == mr.peak_bytes);
        peak_sum += mr.peak_bytes;
    }

    /* The driver's view: the arenas are backed, and steady steps allocate
     * nothing outside them (the first step may initialize libraries). */
    const size_t used1 = gpu_used();
    CHECK_OK(brg_pipeline_step(pipe, 1e-3f, ref->images, ref->labels, BATCH, NULL, NULL));
    CHECK_OK(brg_pipeline_step(pipe, 1e-3f, ref->images, ref->labels, BATCH, NULL, NULL));
    const size_t used2 = gpu_used();
    const long long grew = (long long)used2 - (long long)used1, took = (long long)used1 - (long long)used0;
    fprintf(stderr, "  GPU memory in use: %zu MiB before the devices, +%lld MiB after the first step, %+lld KiB over "
            "two more steps (arena peaks %zu KiB)%s\n", used0 / MiB, took / (1 << 20),
            grew / 1024, peak_sum / 1024, gpu_alone ? "" : " (not checked: BRG_TEST_GPU_ALONE unset)");
    if (gpu_alone) {
        CHECK_MSG((double)took >= 0.95 * (double)peak_sum,
                  "%s p=%d: the GPU holds %lld bytes more than before the devices, the arena peaks sum to %zu", name,
                  p, took, peak_sum);
        CHECK_MSG((double)grew <= 0.05 * (double)peak_sum,
                  "%s p=%d: %lld bytes of GPU memory appeared over two steady steps, outside the arenas (%zu)", name, p,
                  grew, peak_sum);
    }
done:
    brg_pipeline_destroy(pipe);
    for (int d = 0; d < p; d++) brg_device_destroy(devs[d]);
    brg_plan_destroy(plan);
    free(p0);
    free(p1);
}

/* The message from "is out of memory" on: the device name comes before it. */
static const char *oom_text(const char *msg)
{
    const char *at = strstr(msg, "is out of memory");
    return at ? at : msg;
}

/* An allocation beyond the capacity, on an empty arena and on one that
 * holds something, fails alike on a CUDA and a CPU device. */
static void check_alloc_oom(void)
{
    brg_device_spec specs[2] = {cpu_spec(DEVICE_CAPACITY), cpu_spec(DEVICE_CAPACITY)};
    if (!gpu_specs(1, &specs[1])) return;
    char msgs[2][2][1024];
    brg_status sts[2][2];
    for (int k = 0; k < 2; k++) {
        brg_device *dev = NULL;
        void *held = NULL, *big = NULL;
        CHECK_OK(brg_device_create(&specs[k], 0, &dev));
        if (!dev) return;
        sts[k][0] = brg_device_alloc(dev, DEVICE_CAPACITY + 1, "too big", &big);
        snprintf(msgs[k][0], sizeof msgs[k][0], "%s", oom_text(brg_last_error()));
        CHECK(strstr(brg_last_error(), brg_device_name(dev)) != NULL);
        CHECK_OK(brg_device_alloc(dev, 40 * MiB, "held", &held));
        sts[k][1] = brg_device_alloc(dev, 30 * MiB, "second", &big);
        snprintf(msgs[k][1], sizeof msgs[k][1], "%s", oom_text(brg_last_error()));
        CHECK(big == NULL);
        brg_device_free(dev, held);
        CHECK(brg_device_in_use(dev) == 0);
        brg_device_destroy(dev);
    }
    for (int i = 0; i < 2; i++) {
        CHECK_MSG(sts[0][i] == BRG_ERR_OUT_OF_MEMORY && sts[1][i] == BRG_ERR_OUT_OF_MEMORY, "cpu %s, cuda %s",
                  brg_status_string(sts[0][i]), brg_status_string(sts[1][i]));
            CHECK_MSG(!strcmp(msgs[0][i], msgs[1][i]), "cpu: \"%s\"\n  cuda: \"%s\"", msgs[0][i], msgs[1][i]);
    }
    fprintf(stderr, "alloc out of memory, cpu and cuda alike: \"...%s\"\n", msgs[1][1]);
}

/* A pipeline whose devices are smaller than the plan's: creating it (the
 * weights) or its first step (the activations) fails with the same status
 * on the GPU as on the CPU, with a message naming a GPU device, and leaves
 * every device holding only its persistent memory. */
static void check_pipeline_oom(void)
{
    brg_model *m = skip_model();
    if (!m) return;
    brg_status sts[2] = {BRG_OK, BRG_OK};
    float *images = NULL;
    int32_t *labels = NULL;
    new_data(m, BATCH, &images, &labels);
    for (int k = 0; k < 2 && images; k++) {
        brg_device_spec specs[2];
        brg_device *devs[2] = {0};
        brg_pipeline *pipe = NULL;
        specs[0] = specs[1] = cpu_spec(DEVICE_CAPACITY);
        brg_plan *plan = !k || gpu_specs(2, specs) ? even_plan(m, specs, 2, BRG_SCHEDULE_1F1B, 1) : NULL;
        if (!plan) continue;
        /* Half of each device's planned peak. */
        for (int d = 0; d < 2; d++) {
            brg_device_spec small = specs[d];
            small.capacity = brg_plan_get_stage(plan, d)->peak_bytes / 2 / 4096 * 4096;
            CHECK_OK(brg_device_create(&small, d, &devs[d]));
        }
        brg_pipeline_options opt = brg_pipeline_options_init();
        const char *when = "create";
        sts[k] = devs[0] && devs[1] ? pipeline_from_plan(plan, devs, 2, &opt, &pipe) : BRG_ERR_INTERNAL;
        if (sts[k] == BRG_OK) {
            when = "step";
            sts[k] = brg_pipeline_step(pipe, 1e-3f, images, labels, BATCH, NULL, NULL);
        }
        fprintf(stderr, "%s pipeline on devices half its plan's: %s fails with %s: %s\n", k ? "cuda" : "cpu", when,
                brg_status_string(sts[k]), brg_last_error());
        CHECK(sts[k] == BRG_ERR_OUT_OF_MEMORY);
        CHECK_ERROR_HAS("is out of memory");
        if (k == 1) CHECK_ERROR_HAS("cuda:0.");
        for (int d = 0; pipe && d < 2; d++) {
            brg_memory_report mr;
            CHECK_OK(brg_pipeline_memory(pipe, d, &mr));
            CHECK_MSG(brg_device_in_use(devs[d]) == mr.persistent_bytes,
                      "%s device %d holds %zu bytes after the failed step, persistent %zu", k ? "cuda" : "cpu", d,
                      brg_device_in_use(devs[d]), mr.persistent_bytes);
        }
        brg_pipeline_destroy(pipe);
        for (int d = 0; d < 2; d++) brg_device_destroy(devs[d]);
        brg_plan_destroy(plan);
    }
    CHECK_MSG(sts[0] == sts[1], "cpu %s, cuda %s", brg_status_string(sts[0]), brg_status_string(sts[1]));
    free(images);
    free(labels);
    brg_model_destroy(m);
}

int main(void)
{
    brg_system_info info;
    CHECK_OK(brg_system_info_get(&info));
    if (info.gpu_count == 0) {
        fprintf(stderr, "%s: skipped\n", info.gpu_note);
        return 77;
    }
    if (!brg_backend_available(BRG_BACKEND_CUDA)) {
        fprintf(stderr, "a GPU is visible but the CUDA backend cannot create devices (built without cuDNN?): "
                "skipped\n");
        return 77;
    }
    const char *alone = getenv("BRG_TEST_GPU_ALONE");
    gpu_alone = alone && !strcmp(alone, "1");
    fprintf(stderr, "GPU 0: %s, %zu MiB\n", info.gpus[0].name, info.gpus[0].total_memory / MiB);

    reference ref = {0};
    brg_model *m = plain_model();
    float *images = NULL;
    int32_t *labels = NULL;
    CHECK(m != NULL);
    if (m && new_data(m, BATCH, &images, &labels)) {
        ref.model = m;
        ref.images = images;
        ref.labels = labels;
        ref.grads = reference_grads(m, 1, BATCH, images, labels, 7, 0, 0, &ref.count, &ref.loss);
    }
    if (ref.grads) {
        static const brg_schedule_kind kinds[] = {BRG_SCHEDULE_GPIPE, BRG_SCHEDULE_1F1B, BRG_SCHEDULE_ZB_H1};
        /* 1, 2, 4 and 7 devices (a 7x12 GB node's count); interleaved
         * where two chunks a device fit the model's eight blocks. */
        static const int ps[] = {1, 2, 4, 7};
        for (int i = 0; i < 4; i++) {
            for (int k = 0; k < 3; k++) check_pipeline(&ref, ps[i], kinds[k], 1);
            if (ps[i] > 1 && 2 * ps[i] <= 8) check_pipeline(&ref, ps[i], BRG_SCHEDULE_INTERLEAVED, 2);
        }
    }
    check_alloc_oom();
    check_pipeline_oom();
    free(ref.grads);
    free(images);
    free(labels);
    brg_model_destroy(m);
    TEST_EXIT();
}
#else
#include <stdio.h> /* testutil.h's counters would go unused */

int main(void)
{
    fprintf(stderr, "CUDA backend not compiled in: skipped\n");
    return 77;
}
#endif
