/* Per-layer times measured on this machine's CPU (`--profile auto`,
 * docs/planning.md "Measured times") or on one of its GPUs (`brigade model
 * profile --device cuda:G`): the model's whole program on one device, a
 * one-micro-batch ZB-H1 step so that the backward comes in its input and
 * weight parts, with the stage's layer clock on (train/stage.h).
 * The device takes the share of the cores it will have in the pipeline, so
 * the times are those of a stage computing beside the others. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brigade/device.h"
#include "brigade/info.h"
#include "base/device-impl.h"
#include "base/internal.h"
#include "exec/program-impl.h"
#include "plan/plan-impl.h"
#include "train/stage.h"

/* Runs after the warm-up (oneDNN builds its primitives, the arena's pages
 * are touched): at least MEASURE_MIN_RUNS, more while they add up to less
 * than MEASURE_SECONDS (small models: the machine's noise), at most
 * MEASURE_MAX_RUNS. Each layer's time is its median over them. */
#define MEASURE_MIN_RUNS 3
#define MEASURE_MAX_RUNS 25
#define MEASURE_SECONDS 1.0

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Deterministic inputs in [-1, 1) and labels cycling through the classes:
 * the kernels' time does not depend on the values. */
static void fill_batch(float *images, size_t n, int32_t *labels, size_t n_labels, int64_t classes)
{
    uint64_t z = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < n; i++) {
        z = z * 6364136223846793005ull + 1442695040888963407ull;
        images[i] = (float)((double)(z >> 40) / (double)(1ull << 24)) * 2.0f - 1.0f;
    }
    for (size_t i = 0; i < n_labels; i++) labels[i] = (int32_t)(i % (size_t)(classes > 0 ? classes : 1));
}

/* The arena the measured program needs on a device like `where`: its
 * dry-run peak on a planning device of ample capacity. On the CPU it is
 * checked against the memory this process can use (a GPU's device
 * creation says itself when the card has too little). */
static brg_status measured_arena(const brg_model *model, const brg_schedule *sched, const brg_device_part *part, int u,
                                 const brg_optimizer_config *optimizer, const brg_device_spec *where, size_t *bytes)
{
    brg_device_spec target = *where;
    target.capacity = (size_t)1 << 46;
    brg_memory_report rep;
    BRG_CHECK(brg_program_dry_run(model, sched, 0, part, u, optimizer, &target, &rep));
    /* The arena never compacts: room beyond the peak keeps the layout's
     * gaps from mattering (on the CPU the reservation costs address space
     * only; a GPU's slab with just the peak ran out on Inception-v3). */
    *bytes = 2 * rep.peak_bytes + ((size_t)64 << 20);
    if (where->backend == BRG_BACKEND_CUDA) return BRG_OK;
    brg_system_info info;
    BRG_CHECK(brg_system_info_get(&info));
    const size_t usable = info.memory_usable ? info.memory_usable : info.host_memory;
    if (rep.peak_bytes > usable) {
        char a[32], b[32];
        return brg_error(BRG_ERR_OUT_OF_MEMORY,
                         "measuring per-layer times of '%s' at micro-batches of %d needs %s of host memory; this "
                         "process can use %s: give fewer samples per micro-batch, or a --profile FILE measured "
                         "elsewhere",
                         brg_model_name(model), u, brg_format_bytes(rep.peak_bytes, a, sizeof a),
                         brg_format_bytes(usable, b, sizeof b));
    }
    return BRG_OK;
}

static brg_status measure_on(const brg_model *model, int micro_batch, const brg_device_spec *where,
                             int sharing_devices, const brg_optimizer_config *optimizer, brg_profile **out)
{
    *out = NULL;
    if (micro_batch < 1) return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_profile_measure: micro-batch %d", micro_batch);
    const int L = brg_model_layer_count(model), nb = brg_model_block_count(model);
    const brg_model_tensor *in = brg_model_get_tensor(model, brg_model_input(model));
    const size_t sample = (size_t)(in->c * in->h * in->w);
    brg_schedule *sched = NULL;
    brg_device *dev = NULL;
    brg_program *g = NULL;
    brg_profile *p = NULL;
    float *images = NULL;
    int32_t *labels = NULL;
    double *laps = NULL;
    brg_core_share cores;
    memset(&cores, 0, sizeof cores);
    int shared = 0;
    brg_status ret = BRG_OK;

    brg_device_part part;
    memset(&part, 0, sizeof part);
    part.chunks = 1;
    part.last_block[0] = nb - 1;
    size_t arena = 0;
    BRG_CHECK_GOTO(brg_schedule_build(BRG_SCHEDULE_ZB_H1, 1, 1, 1, &sched), ret, exit);
    BRG_CHECK_GOTO(measured_arena(model, sched, &part, micro_batch, optimizer, where, &arena), ret, exit);
    brg_device_spec spec = *where;
    spec.capacity = arena;
    spec.async = 0;                                      /* on the CPU, the synchronous device */
    if (spec.backend == BRG_BACKEND_CUDA) spec.vdev = 0; /* a slab of that size on the GPU */
    BRG_CHECK_GOTO(brg_device_create(&spec, 0, &dev), ret, exit);
    BRG_CHECK_GOTO(brg_program_create(model, sched, 0, &part, micro_batch, optimizer, 1, 0, dev, &g), ret, exit);

    p = brg_profile_new(L, micro_batch);
    images = brg_malloc((size_t)micro_batch * sample * sizeof *images, "the measuring inputs");
    const size_t n_labels = (size_t)micro_batch * (size_t)brg_model_label_count(model);
    labels = brg_malloc(n_labels * sizeof *labels, "the measuring labels");
    laps = brg_calloc((size_t)3 * L * (MEASURE_MAX_RUNS + 1), sizeof *laps, "the measured times");
    if (!p || !images || !labels || !laps) {
        ret = BRG_ERR_HOST_MEMORY;
        goto exit;
    }
    fill_batch(images, (size_t)micro_batch * sample, labels, n_labels, brg_model_classes(model));

    /* The pipeline's CPU devices compute at once and split the cores
     * (brg_devices_share_cores): this device takes one share. */
    if (sharing_devices > 1) {
        brg_device **devs = brg_malloc((size_t)sharing_devices * sizeof *devs, "the core share");
        if (!devs) {
            ret = BRG_ERR_HOST_MEMORY;
            goto exit;
        }
        for (int i = 0; i < sharing_devices; i++) devs[i] = dev;
        brg_devices_share_cores(devs, sharing_devices, &cores);
        free(devs);
        shared = 1;
    }
    brg_stage *stage = brg_program_stage(g, 0);
    int runs = 0;
    double measured = 0.0;
    for (int run = 0; run <= MEASURE_MAX_RUNS; run++) {
        if (runs >= MEASURE_MIN_RUNS && measured >= MEASURE_SECONDS) break;
        /* Run 0 is the warm-up, timed into the last row and forgotten. */
        double *row = laps + (size_t)3 * L * (run ? run - 1 : MEASURE_MAX_RUNS);
        brg_layer_clock clock = {row, row + L, row + 2 * L};
        const double t0 = brg_now_seconds();
        brg_stage_set_layer_clock(stage, &clock);
        ret = brg_program_run_local(&g, 1, run + 1, images, labels);
        if (ret == BRG_OK) ret = brg_stage_read_layer_clock(stage);
        brg_stage_set_layer_clock(stage, NULL);
        if (ret != BRG_OK) goto exit;
        if (run) {
            runs++;
            measured += brg_now_seconds() - t0;
        }
        /* The step zeroes the gradients the run added to. */
        BRG_CHECK_GOTO(brg_program_step(g, 0.0f, run + 1), ret, exit);
    }
    /* Each layer's median, scaled so that they add up to the median run:
     * where each layer's times are skewed (mostly quick, sometimes slow),
     * the sum of the medians falls short of a typical run, which is what a
     * step takes (by 0-3% on the 2-core development VM: fmnist-cnn, resnet18
     * and Inception-v3). */
    double v[MEASURE_MAX_RUNS], sum_of_medians = 0.0;
    for (int k = 0; k < 3; k++) {
        double *dst = k == 0 ? p->fwd : k == 1 ? p->bwd_in : p->bwd_w;
        for (int l = 0; l < L; l++) {
            for (int r = 0; r < runs; r++) v[r] = laps[(size_t)3 * L * r + (size_t)k * L + l];
            qsort(v, (size_t)runs, sizeof v[0], cmp_double);
            dst[l] = v[runs / 2];
            sum_of_medians += dst[l];
        }
    }
    for (int r = 0; r < runs; r++) {
        v[r] = 0.0;
        for (size_t i = 0; i < (size_t)3 * L; i++) v[r] += laps[(size_t)3 * L * r + i];
    }
    qsort(v, (size_t)runs, sizeof v[0], cmp_double);
    const double scale = sum_of_medians > 0.0 ? v[runs / 2] / sum_of_medians : 1.0;
    for (int l = 0; l < L; l++) {
        p->fwd[l] *= scale;
        p->bwd_in[l] *= scale;
        p->bwd_w[l] *= scale;
    }
    *out = p;
    p = NULL;
exit:
    if (shared) brg_devices_restore_cores(&cores);
    if (ret != BRG_OK)
        ret = brg_error_context(ret, "measuring the layers of '%s' on %s", brg_model_name(model),
                                where->backend == BRG_BACKEND_CUDA ? "the GPU" : "this CPU");
    free(laps);
    free(labels);
    free(images);
    brg_profile_destroy(p);
    brg_program_destroy(g);
    brg_device_destroy(dev);
    brg_schedule_destroy(sched);
    return ret;
}

/* The measuring runs on a thread of its own that ends with it. libgomp
 * keeps an OpenMP pool for each thread that has started a parallel region,
 * for as long as that thread lives, and while its pools hold more threads
 * than there are cores, its threads stop spinning between regions (the
 * "throttled" spin) and sleep instead. Measured on the calling thread, a
 * profile (or the calibration) left such a pool behind, and the training
 * steps after it on the executor's workers ran about 25% slower: resnet18
 * at 3x64x64 on one device, 18 steps after `--profile auto`, made 23,959
 * context switches, against 361 after `--profile FILE`. */
typedef struct measure_job {
    const brg_model *model;
    int micro_batch;
    const brg_device_spec *where;
    int sharing_devices;
    const brg_optimizer_config *optimizer;
    brg_profile *out;
    brg_status st;
    char msg[1024]; /* the thread's last error, where st says one */
} measure_job;

static void *measure_main(void *arg)
{
    measure_job *j = arg;
    j->st = measure_on(j->model, j->micro_batch, j->where, j->sharing_devices, j->optimizer, &j->out);
    if (j->st != BRG_OK) snprintf(j->msg, sizeof j->msg, "%s", brg_last_error());
    return NULL;
}

static brg_status measure_apart(const brg_model *model, int micro_batch, const brg_device_spec *where,
                                int sharing_devices, const brg_optimizer_config *optimizer, brg_profile **out)
{
    measure_job j = {model, micro_batch, where, sharing_devices, optimizer, NULL, BRG_OK, ""};
    pthread_t thread;
    *out = NULL;
    if (pthread_create(&thread, NULL, measure_main, &j) != 0)
        return brg_error(BRG_ERR_HOST_MEMORY, "measuring the layers of '%s': cannot start a thread",
                         brg_model_name(model));
    pthread_join(thread, NULL);
    if (j.st != BRG_OK) return brg_error(j.st, "%s", j.msg);
    *out = j.out;
    return BRG_OK;
}

brg_status brg_profile_measure(const brg_model *model, int micro_batch, int sharing_devices,
                               const brg_optimizer_config *optimizer, brg_profile **out)
{
    brg_device_spec cpu;
    memset(&cpu, 0, sizeof cpu);
    cpu.backend = BRG_BACKEND_CPU;
    cpu.gpu = -1;
    cpu.vdev = -1;
    return measure_apart(model, micro_batch, &cpu, sharing_devices, optimizer, out);
}

brg_status brg_profile_measure_on(const brg_model *model, int micro_batch, const brg_device_spec *device,
                                  const brg_optimizer_config *optimizer, brg_profile **out)
{
    *out = NULL;
    if (!device || (device->backend != BRG_BACKEND_CPU && device->backend != BRG_BACKEND_CUDA))
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_profile_measure_on: measuring needs a CPU or CUDA device");
    return measure_apart(model, micro_batch, device, 1, optimizer, out);
}
