/* gpu_bench: pipelined training throughput and memory on GPU devices,
 * through the public API only (brg_plan_create + brg_pipeline_*).
 *
 *   gpu_bench --model NAME --batch N (--split P | --devices SPEC) [options]
 *
 * --split P makes P virtual devices of GPU --gpu of equal size, together
 * the GPU's memory less what brg_cuda_reserve_bytes keeps for the CUDA
 * context and the libraries' handles, as the device list "cuda:G:PxSIZE"
 * (or of --capacity each); --devices takes any device list as
 * brg_device_spec_parse reads it ("cuda:0", "cuda:0:7x12GiB", "4x64MiB"). The model is planned
 * on those devices, then trained on synthetic data (one random batch,
 * reused, as a synthetic PyTorch loop does): --warmup steps untimed, then
 * --steps timed ones.
 *
 * Besides readable lines it prints one line per fact for scripts
 * (bench/gpu/run.sh collects them into results.md):
 *   RESULT key=value ...        one per run: throughput and settings
 *   PEAK   key=value ...        one per device: planned and measured peak
 * --plan-only stops after the plan (no GPU needed: planning devices stand
 * in for the real ones). Exit status: 0 done, 1 failed (the library's message on stderr), 2 usage,
 * 3 the plan does not fit (its note on stderr). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "brigade.h"
#include "cli/cli-lib.h" /* the CLI's parsers and synthetic data */
#include "cli/plan_print.h"

#define GiB ((size_t)1 << 30)
#define MiB ((size_t)1 << 20)
#define MAX_DEVICES 64

typedef struct bench_args {
    const char *model, *devices, *schedule, *recompute, *tag;
    int64_t batch, split, gpu, micro_batches, chunks, steps, warmup;
    int plan_only;
    double capacity_gib;
    brg_plan_options numbers; /* --headroom (brg_cli_plan_number) */
} bench_args;

static void usage(FILE *out)
{
    fprintf(out,
            "usage: gpu_bench --model NAME --batch N (--split P | --devices SPEC) [options]\n"
            "  --split P            P equal virtual devices sharing one GPU's usable memory\n"
            "  --devices SPEC       a device list, e.g. cuda:0 or cuda:0:7x12GiB\n"
            "  --gpu G              the GPU --split divides (default 0)\n"
            "  --capacity GIB       with --split: this size per device instead of an equal share\n"
            "  --schedule S         gpipe, 1f1b (default), interleaved, zb-h1, auto\n"
            "  --micro-batches M    default: the planner's (largest divisor of N <= 4 x devices)\n"
            "  --chunks V           interleaved only\n"
            "  --recompute R        none (default), all, auto\n"
            "  --headroom F         fraction of each device kept free (default: the planner's)\n"
            "  --steps N            timed steps (default 10)\n"
            "  --warmup N           untimed steps first (default 3)\n"
            "  --tag TEXT           copied into the RESULT and PEAK lines\n"
            "  --plan-only          plan and print the plan; needs no GPU\n");
}

/* Returns -1 to go on, else the exit status. */
static int parse_args(int argc, char **argv, bench_args *a)
{
    memset(a, 0, sizeof *a);
    a->schedule = "1f1b";
    a->recompute = "none";
    a->tag = "-";
    a->steps = 10;
    a->warmup = 3;
    a->numbers = brg_plan_options_init();
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        if (!strcmp(o, "--help") || !strcmp(o, "-h")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(o, "--plan-only")) {
            a->plan_only = 1;
            continue;
        }
        if (i + 1 >= argc) {
            brg_cli_error(NULL, "option '%s' needs a value (or is unknown)", o);
            return 2;
        }
        const char *v = argv[++i];
        int ok = 1;
        if (!strcmp(o, "--model")) a->model = v;
        else if (!strcmp(o, "--devices")) a->devices = v;
        else if (!strcmp(o, "--schedule")) a->schedule = v;
        else if (!strcmp(o, "--recompute")) a->recompute = v;
        else if (!strcmp(o, "--tag")) a->tag = v;
        else if (!strcmp(o, "--batch")) ok = brg_cli_parse_int(NULL, o, v, 1, 1 << 20, &a->batch);
        else if (!strcmp(o, "--split")) ok = brg_cli_parse_int(NULL, o, v, 1, MAX_DEVICES, &a->split);
        else if (!strcmp(o, "--gpu")) ok = brg_cli_parse_int(NULL, o, v, 0, BRG_INFO_MAX_GPUS - 1, &a->gpu);
        else if (!strcmp(o, "--micro-batches")) ok = brg_cli_parse_int(NULL, o, v, 1, 1 << 20, &a->micro_batches);
        else if (!strcmp(o, "--chunks")) ok = brg_cli_parse_int(NULL, o, v, 2, 64, &a->chunks);
        else if (!strcmp(o, "--steps")) ok = brg_cli_parse_int(NULL, o, v, 1, 100000, &a->steps);
        else if (!strcmp(o, "--warmup")) ok = brg_cli_parse_int(NULL, o, v, 0, 100000, &a->warmup);
        else if (!strcmp(o, "--capacity")) ok = brg_cli_parse_real(NULL, o, v, 0, &a->capacity_gib);
        else if (!strcmp(o, "--headroom")) ok = brg_cli_plan_number(NULL, o, v, &a->numbers);
        else {
            brg_cli_error(NULL, "unknown option '%s'", o);
            usage(stderr);
            return 2;
        }
        if (ok && a->capacity_gib < 0) {
            brg_cli_error(NULL, "%s '%s' must be a number >= 0", o, v);
            ok = 0;
        }
        if (!ok) return 2;
    }
    if (!a->model || a->batch < 1 || (!a->split == !a->devices)) {
        brg_cli_error(NULL, "give --model, --batch and one of --split, --devices");
        usage(stderr);
        return 2;
    }
    return -1;
}

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int fail(const char *what, brg_status st)
{
    brg_cli_error(NULL, "%s: %s: %s", what, brg_status_string(st), brg_last_error());
    return 1;
}

static int compare_doubles(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

/* The device list: --devices parsed, or --split P equal slices of one GPU
 * written as a list and parsed (so that the devices get their names). */
static int make_specs(const bench_args *a, brg_device_spec *specs, int *count, char *text, size_t size)
{
    const char *list = a->devices;
    if (!list) {
        brg_system_info info;
        brg_status st = brg_system_info_get(&info);
        if (st != BRG_OK) return fail("system info", st);
        if (a->gpu >= info.gpu_count) {
            fprintf(stderr, "gpu_bench: GPU %d is not visible (%d GPUs%s%s)\n", (int)a->gpu, info.gpu_count,
                    info.gpu_count ? "" : ": ", info.gpu_count ? "" : info.gpu_note);
            return 1;
        }
        const size_t total = info.gpus[a->gpu].total_memory, reserve = brg_cuda_reserve_bytes(total);
        size_t each = total > reserve ? (total - reserve) / (size_t)a->split / MiB : 0; /* whole MiB */
        if (a->capacity_gib > 0) {
            size_t want = (size_t)(a->capacity_gib * (double)GiB) / MiB;
            if (want > each) {
                fprintf(stderr, "gpu_bench: %d devices of %g GiB do not fit GPU %d: %zu MiB less %zu MiB for the CUDA "
                        "context and libraries leave %zu MiB each\n", (int)a->split, a->capacity_gib, (int)a->gpu,
                        total / MiB, reserve / MiB, each);
                return 1;
            }
            each = want;
        }
        snprintf(text, size, "cuda:%d:%dx%zuMiB", (int)a->gpu, (int)a->split, each);
        list = text;
    } else {
        snprintf(text, size, "%s", list);
    }
    brg_status st = brg_device_spec_parse(list, specs, MAX_DEVICES, count);
    if (st != BRG_OK) return fail("device list", st);
    printf("devices  %s\n", list);
    return -1;
}

static void print_plan(const brg_plan *plan)
{
    const brg_plan_info *pi = brg_plan_get_info(plan);
    char b1[32], b2[32];
    printf("plan     %s, %d micro-batches of %d, %d device(s), recompute %s, feasible %d, predicted %.1f samples/s "
           "(bubble %.1f%%)%s%s\n",
           brg_schedule_kind_name(pi->schedule), pi->micro_batches, pi->micro_batch, pi->devices,
           brg_recompute_name(pi->recompute), pi->feasible, pi->samples_per_s, 100.0 * pi->bubble,
           pi->note && pi->note[0] ? ": " : "", pi->note ? pi->note : "");
    for (int d = 0; d < pi->devices; d++) {
        const brg_plan_stage *s = brg_plan_get_stage(plan, d);
        if (!s) continue;
        printf("  device %d: blocks %d..%d, peak %s of %s%s\n", d, s->part.first_block[0],
               s->part.last_block[s->part.chunks > 0 ? s->part.chunks - 1 : 0],
               brg_format_bytes(s->peak_bytes, b1, sizeof b1), brg_format_bytes(s->capacity_bytes, b2, sizeof b2),
               s->fits ? "" : " (does not fit)");
    }
}

/* The one GPU all n devices are on, or -1 (CPU devices, several GPUs). */
static int single_gpu(const brg_device_spec *specs, int n)
{
    int g = -1;
    for (int d = 0; d < n; d++) {
        if (specs[d].backend != BRG_BACKEND_CUDA || (g >= 0 && specs[d].gpu != g)) return -1;
        g = specs[d].gpu;
    }
    return g;
}

/* What the driver says the run took of the GPU (cudaMemGetInfo, from before
 * the devices to after the timed steps) against the devices' slabs and
 * planned peaks: the GPUMEM line. Nothing when the devices are not all on
 * one GPU or the driver does not answer. */
static void print_gpu_memory(const bench_args *a, const brg_plan *plan, int n, int gpu, size_t before)
{
    size_t after = 0, total = 0, slabs = 0, peaks = 0;
    if (gpu < 0 || brg_gpu_memory(gpu, &after, &total) != BRG_OK) return;
    for (int d = 0; d < n; d++) {
        const brg_plan_stage *ps = brg_plan_get_stage(plan, d);
        slabs += ps->capacity_bytes;
        peaks += ps->peak_bytes;
    }
    const long long grew = (long long)after - (long long)before, outside = grew - (long long)slabs;
    char b1[32], b2[32], b3[32], b4[32];
    printf("gpu memory %s more in use after the run than before its %d device(s); their slabs %s (planned peaks "
           "%s); outside the slabs %s a device\n",
           brg_format_bytes(grew > 0 ? (size_t)grew : 0, b1, sizeof b1), n, brg_format_bytes(slabs, b2, sizeof b2),
           brg_format_bytes(peaks, b3, sizeof b3), outside >= 0 ? brg_format_bytes((size_t)(outside / n), b4, sizeof b4)
                                                                  : "nothing");
    printf("GPUMEM tag=%s model=%s gpu=%d devices=%d used_before=%zu used_after=%zu slabs=%zu plan_peaks=%zu "
           "outside_per_device=%lld\n",
           a->tag, a->model, gpu, n, before, after, slabs, peaks, outside / n);
}

static int run(const bench_args *a)
{
    brg_device_spec specs[MAX_DEVICES];
    brg_device *devs[MAX_DEVICES] = {0};
    char list[256];
    int n = 0, rc = make_specs(a, specs, &n, list, sizeof list);
    if (rc >= 0) return rc;

    brg_model *model = NULL;
    brg_plan *plan = NULL;
    brg_pipeline *pipe = NULL;
    float *images = NULL;
    int32_t *labels = NULL;
    double *times = NULL;
    brg_status st = brg_zoo_build(a->model, NULL, &model);
    if (st != BRG_OK) return fail("model", st);

    brg_plan_options po = brg_plan_options_init();
    po.devices = specs;
    po.n_devices = n;
    po.batch = a->batch;
    po.micro_batches = a->micro_batches;
    po.headroom = a->numbers.headroom;
    if (!brg_cli_plan_schedule(NULL, a->schedule, (int)a->chunks, a->recompute, 0, &po)) rc = 2;
    double t0 = now_seconds();
    if (rc < 0 && (st = brg_plan_create(model, &po, &plan)) != BRG_OK) rc = fail("plan", st);
    double plan_s = now_seconds() - t0;
    if (rc >= 0) goto done;
    print_plan(plan);
    const brg_plan_info *pi = brg_plan_get_info(plan);
    if (!pi->feasible) {
        fflush(stdout); /* the plan and its note, before this line */
        fprintf(stderr, "gpu_bench: the plan does not fit (its note says why)\n");
        rc = 3;
        goto done;
    }
    if (a->plan_only) {
        rc = 0;
        goto done;
    }

    const int gpu = single_gpu(specs, n);
    size_t used_before = 0, gpu_total = 0;
    if (gpu >= 0 && brg_gpu_memory(gpu, &used_before, &gpu_total) != BRG_OK) used_before = 0;
    t0 = now_seconds();
    for (int d = 0; d < n && rc < 0; d++)
        if ((st = brg_device_create(&specs[d], d, &devs[d])) != BRG_OK) rc = fail("device", st);
    if (rc < 0) brg_plan_set_workspace_ceilings(plan, devs, n);
    brg_pipeline_options opt = brg_pipeline_options_init();
    opt.seed = 42;
    brg_pipeline_desc desc;
    if (rc < 0 && (st = brg_plan_pipeline_desc(plan, &desc)) != BRG_OK) rc = fail("pipeline", st);
    if (rc < 0 && (st = brg_pipeline_create(&desc, devs, n, &opt, &pipe)) != BRG_OK) rc = fail("pipeline", st);
    double setup_s = now_seconds() - t0;
    if (rc >= 0) goto done;

    const brg_model_tensor *in = brg_model_get_tensor(model, brg_model_input(model));
    const size_t sample = (size_t)(in->c * in->h * in->w);
    const int classes = (int)brg_model_classes(model);
    /* Page-locked, as brigade train's loader gives its batches: the step's
     * copies in go straight from them (pageable memory would go through
     * the device's staging buffer, the GPU waiting on the host's memcpy). */
    const int64_t pixels = brg_model_label_count(model);
    void *host_images = NULL, *host_labels = NULL;
    if (brg_device_host_alloc(devs[0], (size_t)a->batch * sample * sizeof *images, &host_images) == BRG_OK)
        images = host_images;
    if (brg_device_host_alloc(devs[0], (size_t)(a->batch * pixels) * sizeof *labels, &host_labels) == BRG_OK)
        labels = host_labels;
    times = malloc((size_t)a->steps * sizeof *times);
    if (!images || !labels || !times) {
        fprintf(stderr, "gpu_bench: out of host memory for a batch of %d\n", (int)a->batch);
        rc = 1;
        goto done;
    }
    /* brigade train's synthetic data */
    brg_cli_synth_batch(42, a->batch, (int64_t)sample, classes, pixels, images, labels);

    double first_loss = 0, loss = 0;
    for (int s = 0; s < a->warmup + a->steps; s++) {
        t0 = now_seconds();
        st = brg_pipeline_step(pipe, 0.005f, images, labels, a->batch, &loss, NULL);
        double dt = now_seconds() - t0;
        if (st != BRG_OK) {
            fprintf(stderr, "gpu_bench: step %d failed\n", s);
            rc = fail("step", st);
            goto done;
        }
        if (s == 0) first_loss = loss;
        if (s >= a->warmup) times[s - a->warmup] = dt;
        fprintf(stderr, "step %d%s: %.4f s, loss %.4f\n", s, s < a->warmup ? " (warm-up)" : "", dt, loss);
    }
    double sum = 0;
    for (int s = 0; s < a->steps; s++) sum += times[s];
    uint64_t wider = 0; /* workspaces lent wider than planned, all steps */
    for (int d = 0; d < n; d++) wider += brg_device_wider_workspaces(devs[d]);
    qsort(times, (size_t)a->steps, sizeof *times, compare_doubles);
    const double mean = sum / a->steps, median = times[a->steps / 2];
    printf("result   %.1f images/s (mean step %.4f s, median %.4f s, fastest %.4f s), loss %.4f -> %.4f\n",
           a->batch / mean, mean, median, times[0], first_loss, loss);
    printf("RESULT tag=%s model=%s batch=%d devices=%d spec=%s schedule=%s micro_batches=%d recompute=%s "
           "images_per_s=%.2f step_mean_s=%.5f step_median_s=%.5f plan_s=%.3f setup_s=%.3f predicted_images_per_s=%.2f "
           "loss_first=%.5f loss_last=%.5f tf32=%d conv_algo=%s conv_api=%s conv_workspace_mib=%zu "
           "conv_workspace_grow=%d wider_workspaces=%llu conv_1x1=%s\n",
           a->tag, a->model, (int)a->batch, n, list, brg_schedule_kind_name(pi->schedule), pi->micro_batches,
           brg_recompute_name(pi->recompute), a->batch / mean, mean, median, plan_s, setup_s, pi->samples_per_s,
           first_loss, loss, brg_cuda_tf32_enabled(), brg_cuda_conv_algo(), brg_cuda_conv_api(),
           specs[0].conv_workspace >> 20, brg_cuda_conv_workspace_grows(), (unsigned long long)wider,
           brg_cuda_conv_1x1());
    if (used_before) print_gpu_memory(a, plan, n, gpu, used_before);
    for (int d = 0; d < n; d++) {
        brg_memory_report mr;
        const brg_plan_stage *ps = brg_plan_get_stage(plan, d);
        if ((st = brg_pipeline_memory(pipe, d, &mr)) != BRG_OK) {
            rc = fail("memory report", st);
            goto done;
        }
        printf("PEAK tag=%s model=%s device=%d capacity=%zu plan_peak=%zu measured_peak=%zu arena_peak=%zu "
               "diff_bytes=%lld\n",
               a->tag, a->model, d, ps->capacity_bytes, ps->peak_bytes, mr.peak_bytes, brg_device_peak(devs[d]),
               (long long)mr.peak_bytes - (long long)ps->peak_bytes);
    }
    rc = 0;
done:
    if (devs[0]) {
        brg_device_host_free(devs[0], images);
        brg_device_host_free(devs[0], labels);
    }
    free(times);
    brg_pipeline_destroy(pipe);
    for (int d = 0; d < n; d++) brg_device_destroy(devs[d]);
    brg_plan_destroy(plan);
    brg_model_destroy(model);
    return rc;
}

int main(int argc, char **argv)
{
    bench_args a;
    brg_cli_program = "gpu_bench";
    int rc = parse_args(argc, argv, &a);
    if (rc >= 0) return rc;
    setvbuf(stdout, NULL, _IOLBF, 0);
    return run(&a);
}
