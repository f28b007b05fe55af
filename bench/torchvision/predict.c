/* predict: a model's outputs on weights from a safetensors file, for
 * comparing brigade's forward with another framework's (bench/torchvision/
 * compare.py runs it against PyTorch). Public API only.
 *
 *   predict MODEL --weights W.safetensors --inputs X.f32 --outputs Y.f32 [options]
 *
 * MODEL is a zoo name or a JSON model file (zoo models take --input,
 * --classes and --width-mult). X.f32 holds n samples as raw float32, NCHW,
 * the machine's byte order, no header: n = its size / (C x H x W x 4).
 * The model runs on one CPU device in inference mode (BatchNorm on its
 * running statistics, no dropout) through brg_pipeline_predict, and Y.f32
 * gets its outputs, n x classes raw float32 (the logits, no softmax).
 * W must hold exactly the model's parameters and running statistics
 * (docs/checkpoints.md); bench/torchvision/convert.py makes such a file
 * from a torchvision state_dict.
 *
 * Exit status: 0 done, 1 failed (the library's message on stderr), 2 usage. */
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "brigade.h"
#include "cli/cli-lib.h" /* the CLI's MODEL argument and option parsers */

#define MiB ((size_t)1 << 20)

typedef struct predict_args {
    const char *model, *weights, *inputs, *outputs;
    brg_zoo_options zoo;
    int zoo_given;
    int64_t micro_batch, capacity_mib;
} predict_args;

static void usage(FILE *out)
{
    fprintf(out,
            "usage: predict MODEL --weights W.safetensors --inputs X.f32 --outputs Y.f32 [options]\n"
            "  MODEL                 a zoo name or a JSON model file\n"
            "  --weights W           the weights (safetensors, brigade's names)\n"
            "  --inputs X            n samples, raw float32 NCHW\n"
            "  --outputs Y           written: n x classes raw float32 (logits)\n"
            "  --input CxHxW, --classes K, --width-mult F   zoo options\n"
            "  --micro-batch B       samples per forward (default: min(n, 8))\n"
            "  --capacity MIB        the CPU device's arena (default 16384; address space,\n"
            "                        pages are touched only as used)\n");
}

enum { OPT_WEIGHTS = 1, OPT_INPUTS, OPT_OUTPUTS, OPT_MICRO_BATCH, OPT_CAPACITY, OPT_HELP };

/* -1 to go on, else the exit code. */
static int parse_args(int argc, char **argv, predict_args *a)
{
    static const struct option options[] = {
        {"weights", required_argument, NULL, OPT_WEIGHTS},
        {"inputs", required_argument, NULL, OPT_INPUTS},
        {"outputs", required_argument, NULL, OPT_OUTPUTS},
        {"micro-batch", required_argument, NULL, OPT_MICRO_BATCH},
        {"capacity", required_argument, NULL, OPT_CAPACITY},
        {"help", no_argument, NULL, OPT_HELP},
        BRG_CLI_ZOO_OPTIONS,
        {NULL, 0, NULL, 0},
    };
    memset(a, 0, sizeof *a);
    a->capacity_mib = 16384;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, "", options, NULL)) != -1) {
        switch (c) {
        case OPT_WEIGHTS: a->weights = optarg; break;
        case OPT_INPUTS: a->inputs = optarg; break;
        case OPT_OUTPUTS: a->outputs = optarg; break;
        case OPT_MICRO_BATCH:
            if (!brg_cli_parse_int(NULL, "--micro-batch", optarg, 1, 1 << 20, &a->micro_batch)) return BRG_EXIT_USAGE;
            break;
        case OPT_CAPACITY:
            if (!brg_cli_parse_int(NULL, "--capacity", optarg, 1, (int64_t)1 << 30, &a->capacity_mib))
                return BRG_EXIT_USAGE;
            break;
        case OPT_HELP: usage(stdout); return BRG_EXIT_OK;
        case BRG_CLI_OPT_INPUT:
        case BRG_CLI_OPT_CLASSES:
        case BRG_CLI_OPT_WIDTH_MULT:
            if (!brg_cli_zoo_option(NULL, c, optarg, &a->zoo)) return BRG_EXIT_USAGE;
            a->zoo_given = 1;
            break;
        default: return brg_cli_bad_option(NULL, c, argv);
        }
    }
    if (optind + 1 != argc)
        return brg_cli_usage_error(NULL, "give one MODEL (%d arguments besides the options)", argc - optind);
    a->model = argv[optind];
    if (!a->weights || !a->inputs || !a->outputs)
        return brg_cli_usage_error(NULL, "--weights, --inputs and --outputs are required");
    return -1;
}

/* The whole of path (malloc'd) and its size; NULL after a message. */
static void *read_file(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    void *buf = NULL;
    long n = -1;
    if (f && fseek(f, 0, SEEK_END) == 0) n = ftell(f);
    if (f && n >= 0 && fseek(f, 0, SEEK_SET) == 0 && (buf = malloc(n > 0 ? (size_t)n : 1)) != NULL &&
        fread(buf, 1, (size_t)n, f) == (size_t)n) {
        fclose(f);
        *size = (size_t)n;
        return buf;
    }
    perror(path);
    free(buf);
    if (f) fclose(f);
    return NULL;
}

static int write_file(const char *path, const void *data, size_t size)
{
    FILE *f = fopen(path, "wb");
    int ok = f && fwrite(data, 1, size, f) == size;
    if (f && fclose(f) != 0) ok = 0;
    if (!ok) perror(path);
    return ok;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int run(const predict_args *a)
{
    brg_model *model = NULL;
    brg_schedule *schedule = NULL;
    brg_device *dev = NULL;
    brg_pipeline *pipeline = NULL;
    float *images = NULL, *outputs = NULL;
    int rc = brg_cli_load_model("predict", a->model, &a->zoo, a->zoo_given, &model);
    if (rc >= 0) return rc;
    rc = BRG_EXIT_FAILURE;
    const brg_model_tensor *in = brg_model_get_tensor(model, brg_model_input(model));
    const int64_t sample = in->c * in->h * in->w, classes = brg_model_classes(model);
    size_t bytes = 0;
    images = read_file(a->inputs, &bytes);
    if (!images) goto done;
    const size_t per_sample = (size_t)sample * sizeof(float);
    if (bytes == 0 || bytes % per_sample != 0) {
        brg_cli_error(NULL, "%s: %zu bytes is not a whole number of %lldx%lldx%lld float32 samples (%zu bytes each)",
                      a->inputs, bytes, (long long)in->c, (long long)in->h, (long long)in->w, per_sample);
        rc = BRG_EXIT_USAGE;
        goto done;
    }
    const int64_t n = (int64_t)(bytes / per_sample);
    const int micro = (int)(a->micro_batch ? a->micro_batch : (n < 8 ? n : 8));
    outputs = malloc((size_t)(n * classes) * sizeof *outputs);
    if (!outputs) {
        brg_cli_error(NULL, "no memory for %lld x %lld outputs", (long long)n, (long long)classes);
        goto done;
    }

    /* One device holding every block; GPipe with one micro-batch is the
     * simplest schedule a pipeline takes. SGD without momentum keeps no
     * optimizer state. */
    brg_status st = brg_schedule_build(BRG_SCHEDULE_GPIPE, 1, 1, 1, &schedule);
    if (st != BRG_OK) {
        rc = brg_cli_fail("schedule", st);
        goto done;
    }
    if ((st = brg_device_create_cpu((size_t)a->capacity_mib * MiB, 0, &dev)) != BRG_OK) {
        rc = brg_cli_fail("cpu device", st);
        goto done;
    }
    brg_device_part part;
    memset(&part, 0, sizeof part);
    part.chunks = 1;
    part.first_block[0] = 0;
    part.last_block[0] = brg_model_block_count(model) - 1;
    brg_pipeline_desc desc;
    memset(&desc, 0, sizeof desc);
    desc.model = model;
    desc.schedule = schedule;
    desc.parts = &part;
    desc.micro_batch = micro;
    desc.optimizer = brg_optimizer_config_init(BRG_OPTIMIZER_SGD);
    double t0 = now();
    if ((st = brg_pipeline_create(&desc, &dev, 1, NULL, &pipeline)) != BRG_OK) {
        rc = brg_cli_fail("pipeline", st);
        goto done;
    }
    if ((st = brg_pipeline_load_state(pipeline, a->weights, BRG_STATE_WEIGHTS)) != BRG_OK) {
        rc = brg_cli_fail("weights", st);
        goto done;
    }
    const double t_load = now() - t0;
    t0 = now();
    if ((st = brg_pipeline_predict(pipeline, images, n, outputs)) != BRG_OK) {
        rc = brg_cli_fail("predict", st);
        goto done;
    }
    const double t_predict = now() - t0;
    if (!write_file(a->outputs, outputs, (size_t)(n * classes) * sizeof *outputs)) goto done;
    printf("predict: %s on %s, %lld samples of %lldx%lldx%lld -> %lld outputs each, micro-batches of %d: "
           "%.2f s (set up and load %.2f s); arena peak %.1f MiB\n",
           brg_model_name(model), a->weights, (long long)n, (long long)in->c, (long long)in->h, (long long)in->w,
           (long long)classes, micro, t_predict, t_load, (double)brg_device_peak(dev) / (double)MiB);
    rc = BRG_EXIT_OK;
done:
    brg_pipeline_destroy(pipeline);
    brg_device_destroy(dev);
    brg_schedule_destroy(schedule);
    brg_model_destroy(model);
    free(images);
    free(outputs);
    return rc;
}

int main(int argc, char **argv)
{
    predict_args a;
    brg_cli_program = "predict";
    int rc = parse_args(argc, argv, &a);
    if (rc >= 0) return rc;
    return brg_cli_finish_stdout(NULL, run(&a));
}
