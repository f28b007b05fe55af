/* brigade train: train a model on one capped device, on Fashion-MNIST or on
 * synthetic data, with a progress display and a line per epoch.
 *
 * Several devices (pipelined training) arrive with the pipeline executor;
 * until then --devices must name exactly one. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "progress.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: brigade train MODEL --data fashion-mnist|synthetic [options]\n"
            "\n"
            "Train MODEL (a zoo name or a JSON model file) on one capped device. Each\n"
            "epoch visits the training samples in a new seeded order, then reports the\n"
            "loss and accuracy on the training and the test samples.\n"
            "\n"
            "options:\n"
            "  --data SET            fashion-mnist (the IDX files) or synthetic (seeded\n"
            "                        random images of the model's input shape, one\n"
            "                        learnable pattern per class: any zoo model trains)\n"
            "  --data-dir DIR        where the Fashion-MNIST files are (default: $BRIGADE_DATA_DIR,\n"
            "                        else the folder configure chose)\n"
            "  --devices SPEC        the device, e.g. 1x512MiB (default 1x1GiB); exactly one\n"
            "                        for now\n"
            "  --epochs E            passes over the training samples (default 1)\n"
            "  --batch B             samples per optimizer step (default 64)\n"
            "  --micro-batch M       samples per forward/backward, 1..B (default B); the\n"
            "                        gradients of B/M micro-batches add up to the batch's\n"
            "  --lr L                learning rate (default 0.001 for adam, 0.01 for sgd)\n"
            "  --lr-schedule KIND    constant (default) or cosine: from L down to 0 over all\n"
            "                        the steps of the run (PyTorch's CosineAnnealingLR stepped\n"
            "                        per batch)\n"
            "  --optimizer sgd|adam  PyTorch's SGD or Adam (default adam)\n"
            "  --momentum M          SGD momentum in [0, 1) (default 0)\n"
            "  --weight-decay W      L2 penalty added to the gradients (default 0)\n"
            "  --seed S              initialization, data order, dropout (default 1)\n"
            "  --limit N             use only the first N training samples (synthetic: make N;\n"
            "                        default 1024)\n"
            "  --input CxHxW         zoo models: input size\n"
            "  --classes N           zoo models: number of classes\n"
            "  --width-mult F        zoo models: channel multiplier\n"
            "  -h, --help            show this help\n"
            "\n"
            "examples:\n"
            "  brigade train fmnist-cnn --data fashion-mnist --devices 1x512MiB --epochs 2 \\\n"
            "      --batch 64 --lr 0.001 --lr-schedule cosine --optimizer adam --seed 1\n"
            "  brigade train resnet18 --input 3x64x64 --classes 10 --data synthetic --limit 512\n");
}

enum {
    OPT_DATA = 256,
    OPT_DATA_DIR,
    OPT_DEVICES,
    OPT_EPOCHS,
    OPT_BATCH,
    OPT_MICRO_BATCH,
    OPT_LR,
    OPT_LR_SCHEDULE,
    OPT_OPTIMIZER,
    OPT_MOMENTUM,
    OPT_WEIGHT_DECAY,
    OPT_SEED,
    OPT_LIMIT,
    OPT_INPUT,
    OPT_CLASSES,
    OPT_WIDTH_MULT,
};

static const struct option train_opts[] = {
    {"data", required_argument, NULL, OPT_DATA},
    {"data-dir", required_argument, NULL, OPT_DATA_DIR},
    {"devices", required_argument, NULL, OPT_DEVICES},
    {"epochs", required_argument, NULL, OPT_EPOCHS},
    {"batch", required_argument, NULL, OPT_BATCH},
    {"micro-batch", required_argument, NULL, OPT_MICRO_BATCH},
    {"lr", required_argument, NULL, OPT_LR},
    {"lr-schedule", required_argument, NULL, OPT_LR_SCHEDULE},
    {"optimizer", required_argument, NULL, OPT_OPTIMIZER},
    {"momentum", required_argument, NULL, OPT_MOMENTUM},
    {"weight-decay", required_argument, NULL, OPT_WEIGHT_DECAY},
    {"seed", required_argument, NULL, OPT_SEED},
    {"limit", required_argument, NULL, OPT_LIMIT},
    {"input", required_argument, NULL, OPT_INPUT},
    {"classes", required_argument, NULL, OPT_CLASSES},
    {"width-mult", required_argument, NULL, OPT_WIDTH_MULT},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

enum { DATA_NONE = 0, DATA_FASHION, DATA_SYNTHETIC };

typedef struct train_args {
    const char *spec;
    int data;
    const char *data_dir;
    const char *devices;
    int64_t epochs, batch, micro_batch, limit;
    double lr, momentum, weight_decay;
    int lr_given, momentum_given;
    int cosine;                 /* --lr-schedule cosine */
    int optimizer;
    uint64_t seed;
    brg_zoo_options zoo;
    int zoo_given;
} train_args;

#define MAX_EPOCHS 100000
#define MAX_BATCH (1 << 20)
#define MAX_LIMIT ((int64_t)1 << 31)
#define MAX_CLASSES ((int64_t)1 << 24)
#define MAX_DEVICES 1024

/* A whole decimal number in [min, max] for option name; prints why not. */
static int parse_int(const char *name, const char *text, int64_t min, int64_t max, int64_t *value)
{
    char *end = NULL;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (text[0] == '\0' || end == text || *end != '\0' || errno || v < min || v > max) {
        fprintf(stderr, "brigade train: %s '%s' must be a whole number from %lld to %lld\n", name, text,
                (long long)min, (long long)max);
        return 0;
    }
    *value = v;
    return 1;
}

/* A finite number for option name; prints why not. */
static int parse_real(const char *name, const char *text, double *value)
{
    char *end = NULL;
    errno = 0;
    double v = strtod(text, &end);
    if (text[0] == '\0' || end == text || *end != '\0' || errno || !isfinite(v)) {
        fprintf(stderr, "brigade train: %s '%s' is not a number\n", name, text);
        return 0;
    }
    *value = v;
    return 1;
}

/* Parse argv; -1 to go on, else the exit code. */
static int parse_args(int argc, char **argv, train_args *a)
{
    memset(a, 0, sizeof *a);
    a->devices = "1x1GiB";
    a->epochs = 1;
    a->batch = 64;
    a->optimizer = BRG_OPTIMIZER_ADAM;
    a->seed = 1;
    int c;
    int64_t v;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", train_opts, NULL)) != -1) {
        switch (c) {
        case 'h': usage(stdout); return BRG_EXIT_OK;
        case OPT_DATA:
            if (strcmp(optarg, "fashion-mnist") == 0) {
                a->data = DATA_FASHION;
            } else if (strcmp(optarg, "synthetic") == 0) {
                a->data = DATA_SYNTHETIC;
            } else {
                fprintf(stderr, "brigade train: unknown data set '%s' (known: fashion-mnist, synthetic)\n", optarg);
                return BRG_EXIT_USAGE;
            }
            break;
        case OPT_DATA_DIR: a->data_dir = optarg; break;
        case OPT_DEVICES: a->devices = optarg; break;
        case OPT_EPOCHS:
            if (!parse_int("--epochs", optarg, 1, MAX_EPOCHS, &a->epochs)) return BRG_EXIT_USAGE;
            break;
        case OPT_BATCH:
            if (!parse_int("--batch", optarg, 1, MAX_BATCH, &a->batch)) return BRG_EXIT_USAGE;
            break;
        case OPT_MICRO_BATCH:
            if (!parse_int("--micro-batch", optarg, 1, MAX_BATCH, &a->micro_batch)) return BRG_EXIT_USAGE;
            break;
        case OPT_LIMIT:
            if (!parse_int("--limit", optarg, 1, MAX_LIMIT, &a->limit)) return BRG_EXIT_USAGE;
            break;
        case OPT_SEED:
            if (!parse_int("--seed", optarg, 0, INT64_MAX, &v)) return BRG_EXIT_USAGE;
            a->seed = (uint64_t)v;
            break;
        case OPT_LR:
            if (!parse_real("--lr", optarg, &a->lr)) return BRG_EXIT_USAGE;
            if (!(a->lr > 0.0)) {
                fprintf(stderr, "brigade train: --lr %s must be greater than 0\n", optarg);
                return BRG_EXIT_USAGE;
            }
            a->lr_given = 1;
            break;
        case OPT_LR_SCHEDULE:
            if (strcmp(optarg, "constant") == 0) {
                a->cosine = 0;
            } else if (strcmp(optarg, "cosine") == 0) {
                a->cosine = 1;
            } else {
                fprintf(stderr, "brigade train: unknown --lr-schedule '%s' (known: constant, cosine)\n", optarg);
                return BRG_EXIT_USAGE;
            }
            break;
        case OPT_MOMENTUM:
            if (!parse_real("--momentum", optarg, &a->momentum)) return BRG_EXIT_USAGE;
            if (!(a->momentum >= 0.0 && a->momentum < 1.0)) {
                fprintf(stderr, "brigade train: --momentum %s must be at least 0 and below 1\n", optarg);
                return BRG_EXIT_USAGE;
            }
            a->momentum_given = 1;
            break;
        case OPT_WEIGHT_DECAY:
            if (!parse_real("--weight-decay", optarg, &a->weight_decay)) return BRG_EXIT_USAGE;
            if (!(a->weight_decay >= 0.0)) {
                fprintf(stderr, "brigade train: --weight-decay %s must not be negative\n", optarg);
                return BRG_EXIT_USAGE;
            }
            break;
        case OPT_OPTIMIZER:
            a->optimizer = brg_optimizer_from_name(optarg);
            if (a->optimizer < 0) {
                fprintf(stderr, "brigade train: unknown optimizer '%s' (known: sgd, adam)\n", optarg);
                return BRG_EXIT_USAGE;
            }
            break;
        case OPT_INPUT:
            if (brg_cli_parse_input(optarg, &a->zoo) != BRG_OK) return BRG_EXIT_USAGE;
            a->zoo_given = 1;
            break;
        case OPT_CLASSES:
            if (!parse_int("--classes", optarg, 1, MAX_CLASSES, &v)) return BRG_EXIT_USAGE;
            a->zoo.classes = v;
            a->zoo_given = 1;
            break;
        case OPT_WIDTH_MULT: {
            double f = 0.0;
            if (!parse_real("--width-mult", optarg, &f)) return BRG_EXIT_USAGE;
            if (!(f > 0.0 && f <= 1000.0)) {
                fprintf(stderr, "brigade train: --width-mult %s must be greater than 0 and at most 1000\n", optarg);
                return BRG_EXIT_USAGE;
            }
            a->zoo.width_mult = f;
            a->zoo_given = 1;
            break;
        }
        case ':':
            fprintf(stderr, "brigade train: option '%s' needs a value\n", argv[optind - 1]);
            return BRG_EXIT_USAGE;
        default:
            fprintf(stderr, "brigade train: unknown option '%s' (see 'brigade train --help')\n", argv[optind - 1]);
            return BRG_EXIT_USAGE;
        }
    }
    if (optind >= argc) {
        fprintf(stderr, "brigade train: which model? (a zoo name such as fmnist-cnn, or a JSON model file; "
                        "see 'brigade train --help')\n");
        return BRG_EXIT_USAGE;
    }
    a->spec = argv[optind++];
    if (optind < argc) {
        fprintf(stderr, "brigade train: unexpected argument '%s'\n", argv[optind]);
        return BRG_EXIT_USAGE;
    }
    if (a->data == DATA_NONE) {
        fprintf(stderr, "brigade train: which data? give --data fashion-mnist or --data synthetic\n");
        return BRG_EXIT_USAGE;
    }
    if (a->data_dir && a->data != DATA_FASHION) {
        fprintf(stderr, "brigade train: --data-dir applies to --data fashion-mnist\n");
        return BRG_EXIT_USAGE;
    }
    if (a->momentum_given && a->optimizer != BRG_OPTIMIZER_SGD) {
        fprintf(stderr, "brigade train: --momentum applies to --optimizer sgd (Adam has its own betas)\n");
        return BRG_EXIT_USAGE;
    }
    if (a->micro_batch > a->batch) {
        fprintf(stderr, "brigade train: --micro-batch %lld is larger than --batch %lld\n", (long long)a->micro_batch,
                (long long)a->batch);
        return BRG_EXIT_USAGE;
    }
    if (!a->lr_given) a->lr = a->optimizer == BRG_OPTIMIZER_ADAM ? 1e-3 : 1e-2;
    return -1;
}

/* ---- data ---- */

/* Where samples come from: a loaded data set, or synthetic samples made on
 * demand from (seed, index) so that no data set needs to fit in memory. */
typedef struct source {
    const brg_dataset *ds;   /* NULL: synthetic */
    uint64_t seed;
    int64_t count;
    int64_t sample;          /* floats per sample */
    int classes;
    int64_t first;           /* synthetic: index of sample 0 (train and test differ) */
} source;

static uint64_t mix64(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static float unit(uint64_t h) { return (float)((double)(h >> 40) / 16777216.0); } /* [0, 1) */

/* Synthetic sample i: label from the hash of i; pixels half a fixed random
 * pattern of the label, half noise, so a model can learn something. */
static void synth_sample(const source *s, int64_t i, float *image, int32_t *label)
{
    const uint64_t id = (uint64_t)(s->first + i);
    const int32_t y = (int32_t)(mix64(s->seed ^ mix64(id)) % (uint64_t)s->classes);
    const uint64_t pattern = mix64(s->seed ^ 0x5041545445524eULL ^ mix64((uint64_t)y));
    const uint64_t noise = mix64(s->seed ^ 0x4e4f495345ULL ^ mix64(id));
    for (int64_t j = 0; j < s->sample; j++)
        image[j] = 0.5f * unit(mix64(pattern ^ (uint64_t)j)) + 0.5f * unit(mix64(noise + (uint64_t)j));
    *label = y;
}

/* Copy samples index[0..n) (or first..first+n when index is NULL). */
static brg_status fetch(const source *s, const int64_t *index, int64_t first, int64_t n, float *images,
                        int32_t *labels)
{
    if (s->ds) {
        if (index) return brg_dataset_gather(s->ds, index, n, images, labels);
        return brg_dataset_batch(s->ds, first, n, images, labels);
    }
    for (int64_t k = 0; k < n; k++) synth_sample(s, index ? index[k] : first + k, images + k * s->sample, labels + k);
    return BRG_OK;
}

/* Evaluate on every sample of src in pieces that fit the host buffers. */
static brg_status evaluate(brg_trainer *t, const source *src, float *images, int32_t *labels, int64_t chunk,
                           double *loss, double *accuracy)
{
    double lsum = 0.0, asum = 0.0;
    for (int64_t first = 0; first < src->count; first += chunk) {
        int64_t n = src->count - first < chunk ? src->count - first : chunk;
        double l = 0.0, a = 0.0;
        brg_status st = fetch(src, NULL, first, n, images, labels);
        if (st == BRG_OK) st = brg_trainer_evaluate(t, images, labels, n, &l, &a);
        if (st != BRG_OK) return st;
        lsum += l * (double)n;
        asum += a * (double)n;
    }
    *loss = lsum / (double)src->count;
    *accuracy = asum / (double)src->count;
    return BRG_OK;
}

/* ---- the command ---- */

/* Report a failure; out of memory gets a hint: at creation (the weights do
 * not fit) a larger device, during a step also a smaller batch. */
static int fail_oom_hint(const char *what, brg_status st, const train_args *a, const brg_model *m, int creating)
{
    int rc = brg_cli_fail(what, st);
    if (st != BRG_ERR_OUT_OF_MEMORY) return rc;
    if (creating) {
        /* Weights (trainable and running statistics), gradients, optimizer
         * state, before the arena's rounding. */
        brg_optimizer_config oc = brg_optimizer_config_init((brg_optimizer_kind)a->optimizer);
        oc.momentum = (float)a->momentum;
        int64_t floats = brg_model_trainable_params(m) * (2 + brg_optimizer_state_count(&oc)) +
                         brg_model_frozen_params(m);
        char b[32];
        fprintf(stderr, "hint: the weights, gradients and optimizer state alone need about %s; give the device "
                        "more memory (a larger --devices size than %s)\n",
                brg_format_bytes((size_t)floats * sizeof(float), b, sizeof b), a->devices);
    } else {
        fprintf(stderr,
                "hint: give the device more memory (a larger --devices size than %s) or use a smaller --batch "
                "(or --micro-batch) than %lld\n",
                a->devices, (long long)(a->micro_batch ? a->micro_batch : a->batch));
    }
    return rc;
}

int brg_cmd_train(int argc, char **argv)
{
    train_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc >= 0) return rc;

    brg_device_spec specs[MAX_DEVICES];
    int n_devices = 0;
    brg_status st = brg_device_spec_parse(a.devices, specs, MAX_DEVICES, &n_devices);
    if (st != BRG_OK) return brg_cli_fail("train: --devices", st);
    if (n_devices != 1) {
        fprintf(stderr,
                "brigade train: --devices '%s' names %d devices; training runs on exactly one device for now "
                "(e.g. --devices 1x512MiB). Pipelined training across several devices arrives with the "
                "pipeline executor.\n",
                a.devices, n_devices);
        return BRG_EXIT_USAGE;
    }

    brg_model *model = NULL;
    brg_dataset *train_ds = NULL, *test_ds = NULL;
    brg_device *dev = NULL;
    brg_trainer *trainer = NULL;
    float *images = NULL;
    int32_t *labels = NULL;
    int64_t *order = NULL;
    rc = BRG_EXIT_OK;

    brg_clear_error();
    st = brg_cli_load_model(a.spec, &a.zoo, a.zoo_given, &model);
    if (st != BRG_OK) {
        /* brg_cli_load_model prints its own usage errors without a message. */
        if (st == BRG_ERR_INVALID_ARGUMENT && !brg_last_error()[0]) return BRG_EXIT_USAGE;
        return brg_cli_fail("train", st);
    }
    const brg_model_tensor *in = brg_model_get_tensor(model, brg_model_input(model));
    const brg_model_tensor *out = brg_model_get_tensor(model, brg_model_output(model));
    if (out->h != 1 || out->w != 1) {
        fprintf(stderr,
                "brigade train: model '%s' ends in '%s' of [%lld, %lld, %lld], a per-pixel output; training "
                "needs class logits [classes, 1, 1] (segmentation losses are not supported yet)\n",
                brg_model_name(model), out->name, (long long)out->c, (long long)out->h, (long long)out->w);
        rc = BRG_EXIT_FAILURE;
        goto done;
    }

    /* Data. */
    source train_src, test_src;
    memset(&train_src, 0, sizeof train_src);
    memset(&test_src, 0, sizeof test_src);
    const int64_t sample = in->c * in->h * in->w;
    if (a.data == DATA_FASHION) {
        if (in->c != 1 || in->h != BRG_FASHION_MNIST_SIDE || in->w != BRG_FASHION_MNIST_SIDE ||
            out->c != BRG_FASHION_MNIST_CLASSES) {
            fprintf(stderr,
                    "brigade train: Fashion-MNIST has 1x28x28 images in 10 classes, but model '%s' takes "
                    "%lldx%lldx%lld and has %lld classes (for a zoo model: --input 1x28x28 --classes 10)\n",
                    brg_model_name(model), (long long)in->c, (long long)in->h, (long long)in->w,
                    (long long)out->c);
            rc = BRG_EXIT_USAGE;
            goto done;
        }
        st = brg_fashion_mnist_load(a.data_dir, BRG_SPLIT_TRAIN, &train_ds);
        if (st == BRG_OK) st = brg_fashion_mnist_load(a.data_dir, BRG_SPLIT_TEST, &test_ds);
        if (st != BRG_OK) {
            rc = brg_cli_fail("train: Fashion-MNIST", st);
            if (rc == BRG_EXIT_USAGE) rc = BRG_EXIT_FAILURE;
            goto done;
        }
        train_src.ds = train_ds;
        train_src.count = a.limit && a.limit < train_ds->count ? a.limit : train_ds->count;
        test_src.ds = test_ds;
        test_src.count = test_ds->count;
    } else {
        train_src.count = a.limit ? a.limit : 1024;
        test_src.count = train_src.count / 4 < 1 ? 1 : (train_src.count / 4 > 1000 ? 1000 : train_src.count / 4);
        test_src.first = INT64_C(1) << 40; /* other samples than the training ones */
    }
    train_src.sample = test_src.sample = sample;
    train_src.classes = test_src.classes = (int)out->c;
    train_src.seed = test_src.seed = a.seed;

    /* Device and trainer. */
    st = brg_device_create(&specs[0], 0, &dev);
    if (st != BRG_OK) {
        rc = brg_cli_fail("train: device", st);
        goto done;
    }
    brg_trainer_config tc = brg_trainer_config_init();
    tc.batch = (int)a.batch;
    tc.micro_batch = (int)a.micro_batch;
    tc.lr = (float)a.lr;
    tc.optimizer = brg_optimizer_config_init((brg_optimizer_kind)a.optimizer);
    tc.optimizer.momentum = (float)a.momentum;
    tc.optimizer.weight_decay = (float)a.weight_decay;
    tc.seed = a.seed;

    char b1[32], b2[32];
    printf("model    %s: %d blocks, %d layers, %lld trainable parameters, input %lldx%lldx%lld, %lld classes\n",
           brg_model_name(model), brg_model_block_count(model), brg_model_layer_count(model),
           (long long)brg_model_trainable_params(model), (long long)in->c, (long long)in->h, (long long)in->w,
           (long long)out->c);
    printf("device   %s, %s (%s backend)\n", brg_device_name(dev),
           brg_format_bytes(brg_device_capacity(dev), b1, sizeof b1), brg_backend_name(brg_device_backend(dev)));
    printf("data     %s: %lld training samples, %lld test samples\n",
           a.data == DATA_FASHION ? "Fashion-MNIST" : "synthetic", (long long)train_src.count,
           (long long)test_src.count);
    printf("settings %lld epoch%s, batch %lld", (long long)a.epochs, a.epochs == 1 ? "" : "s", (long long)a.batch);
    if (a.micro_batch && a.micro_batch != a.batch) printf(" (micro-batches of %lld)", (long long)a.micro_batch);
    const int64_t steps = (train_src.count + a.batch - 1) / a.batch;
    printf(", %s lr %g", brg_optimizer_name(tc.optimizer.kind), a.lr);
    if (a.cosine) printf(" (cosine to 0 over %lld steps)", (long long)(steps * a.epochs));
    if (tc.optimizer.kind == BRG_OPTIMIZER_SGD) printf(" momentum %g", a.momentum);
    if (tc.optimizer.kind == BRG_OPTIMIZER_ADAM)
        printf(" betas (%g, %g) eps %g", (double)tc.optimizer.beta1, (double)tc.optimizer.beta2,
               (double)tc.optimizer.epsilon);
    printf(", weight decay %g, seed %llu\n", a.weight_decay, (unsigned long long)a.seed);
    fflush(stdout);

    st = brg_trainer_create(model, dev, &tc, &trainer);
    if (st != BRG_OK) {
        rc = fail_oom_hint("train", st, &a, model, 1);
        goto done;
    }
    printf("memory   %s for weights, gradients and optimizer state\n",
           brg_format_bytes(brg_stage_persistent_bytes(brg_trainer_stage(trainer)), b1, sizeof b1));
    fflush(stdout);

    const int64_t chunk = a.batch;
    images = malloc((size_t)(chunk * sample) * sizeof *images);
    labels = malloc((size_t)chunk * sizeof *labels);
    order = malloc((size_t)train_src.count * sizeof *order);
    if (!images || !labels || !order) {
        fprintf(stderr, "brigade train: out of host memory for the batch buffers\n");
        rc = BRG_EXIT_FAILURE;
        goto done;
    }

    brg_progress prog;
    brg_progress_init(&prog, (int)a.epochs);
    for (int64_t epoch = 1; epoch <= a.epochs; epoch++) {
        st = brg_shuffle_indices(order, train_src.count, mix64(a.seed ^ mix64((uint64_t)epoch)));
        if (st != BRG_OK) {
            rc = brg_cli_fail("train", st);
            goto done;
        }
        brg_progress_begin_epoch(&prog, (int)epoch, steps);
        double loss_sum = 0.0;
        int64_t right = 0, seen = 0;
        for (int64_t step = 0; step < steps; step++) {
            const int64_t first = step * a.batch;
            const int64_t n = train_src.count - first < a.batch ? train_src.count - first : a.batch;
            float loss = 0.0f;
            int64_t correct = 0;
            if (a.cosine) {
                /* PyTorch's CosineAnnealingLR (eta_min 0) stepped per batch. */
                const double pi = 3.14159265358979323846;
                const double t = (double)((epoch - 1) * steps + step) / (double)(steps * a.epochs);
                brg_trainer_set_lr(trainer, (float)(a.lr * 0.5 * (1.0 + cos(pi * t))));
            }
            st = fetch(&train_src, order + first, 0, n, images, labels);
            if (st == BRG_OK) st = brg_trainer_step(trainer, images, labels, (int)n, &loss, &correct);
            if (st != BRG_OK) {
                brg_progress_clear(&prog);
                rc = fail_oom_hint("train", st, &a, model, 0);
                goto done;
            }
            if (!isfinite(loss)) {
                brg_progress_clear(&prog);
                fprintf(stderr, "brigade train: the loss is %g at epoch %lld step %lld: training diverged; try a "
                                "smaller --lr than %g\n",
                        (double)loss, (long long)epoch, (long long)step + 1, a.lr);
                rc = BRG_EXIT_FAILURE;
                goto done;
            }
            loss_sum += (double)loss * (double)n;
            right += correct;
            seen += n;
            brg_progress_state ps = {step + 1,
                                     seen,
                                     loss_sum / (double)seen,
                                     (double)right / (double)seen,
                                     brg_device_peak(dev),
                                     brg_device_capacity(dev)};
            brg_progress_update(&prog, &ps);
        }
        const double seconds = brg_progress_now() - prog.start;
        brg_progress_clear(&prog);
        double test_loss = 0.0, test_acc = 0.0;
        st = evaluate(trainer, &test_src, images, labels, chunk, &test_loss, &test_acc);
        if (st != BRG_OK) {
            rc = fail_oom_hint("train: evaluation", st, &a, model, 0);
            goto done;
        }
        printf("epoch %lld: train loss %.4f acc %.2f%%, test loss %.4f acc %.2f%%, %.1f s (%.0f samples/s)\n",
               (long long)epoch, loss_sum / (double)seen, 100.0 * (double)right / (double)seen, test_loss,
               100.0 * test_acc, seconds, seconds > 0.0 ? (double)seen / seconds : 0.0);
        fflush(stdout);
    }
    printf("device   %s: peak %s of %s\n", brg_device_name(dev),
           brg_format_bytes(brg_device_peak(dev), b1, sizeof b1),
           brg_format_bytes(brg_device_capacity(dev), b2, sizeof b2));

done:
    brg_trainer_destroy(trainer);
    brg_device_destroy(dev);
    brg_dataset_destroy(train_ds);
    brg_dataset_destroy(test_ds);
    brg_model_destroy(model);
    free(images);
    free(labels);
    free(order);
    return rc;
}
