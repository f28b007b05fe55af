/* brigade train: train a model on Fashion-MNIST, image folders or synthetic data across
 * one or more capped devices, with a progress display and a line per epoch.
 *
 * One code path for any number of devices: the planner (brg_plan_create,
 * the options 'brigade plan' takes) cuts the model into one block range per
 * device, or --split does; the plan is printed, and when it does not fit
 * the command stops before training with the planner's explanation. Then
 * a pipeline (brigade/pipeline.h) trains on real devices of the plan's
 * capacities, and at the end each device's measured arena peak is set next
 * to the planned one: they are equal by construction, and a difference is a
 * failure. One device is a one-device plan. */
#include <errno.h>
#include <signal.h>
#include <dirent.h>
#include <getopt.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "plan_print.h"
#include "progress.h"
#include "train.h"

/* The options of image folders, in both commands' help. */
#define IMAGE_OPTIONS_HELP                                                                                        \
    "  --val-split F         hold out a fraction F of each class of DIR (or DIR/train) for\n"                       \
    "                        validation, chosen by --seed (segmentation: of its images;\n"                       \
    "                        0: none, DIR/val)\n"                                                                  \
    "  --resize S            resize each image's shorter side to S before cropping to the\n"                    \
    "                        model's input (default: the input's side / 0.875, e.g. 342 for\n"                  \
    "                        299; segmentation: the input's side); training crops at\n"                        \
    "                        random and flips, evaluation crops the centre (masks: the\n"                      \
    "                        same window, resized by nearest neighbour)\n"                                     \
    "  --mean M1,M2,M3       per-channel mean subtracted from pixels in [0, 1] (default\n"                      \
    "                        ImageNet's 0.485,0.456,0.406 for RGB, 0 for grey)\n"                               \
    "  --std S1,S2,S3        per-channel divisor (default 0.229,0.224,0.225 for RGB, 1 for grey)\n"             \
    "  --no-flip             no random horizontal flips in training\n"                                          \
    "  --data-threads N      decoding threads (default: the cores the devices leave free, at\n"                 \
    "                        least 1; 0 decodes in the training thread)\n"                                      \
    "  --bad-images MODE     skip (default: a bad or unreadable image is skipped with one\n"                    \
    "                        warning, and the next image takes its place) or fail\n"                            \
    "  --ignore-label N      segmentation: the mask value (0..255) that marks pixels with no\n"                 \
    "                        class, left out of the loss and the accuracy (default 255)\n"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: brigade train MODEL --data fashion-mnist|synthetic|DIR [options]\n"
            "\n"
            "Train MODEL (a zoo name or a JSON model file) across the devices of --devices,\n"
            "pipelined: the planner cuts the model into one block range per device (as\n"
            "'brigade plan' does with the same options) and prints the plan; when it does\n"
            "not fit, training does not start. Each epoch visits the training samples in a\n"
            "new seeded order in steps of exactly B samples (the last incomplete batch of\n"
            "the order is left out), then reports the loss and accuracy on the training\n"
            "and the test samples. At the end, each device's measured peak memory is shown\n"
            "next to the planned one.\n"
            "\n"
            "options:\n"
            "  --data SET            fashion-mnist (the IDX files), synthetic (seeded random\n"
            "                        images of the model's input shape, one learnable\n"
            "                        pattern per class: any zoo model trains), or a folder:\n"
            "                        DIR/train and DIR/val of class folders of JPEG and PNG\n"
            "                        images (DIR/train/cat/1.jpg ...), or class folders with\n"
            "                        --val-split, or IDX files in the MNIST layout; for a\n"
            "                        model with per-pixel outputs, a segmentation folder:\n"
            "                        DIR/images/NAME.jpg with DIR/masks/NAME.png label maps\n"
            "                        (or DIR/train/... and DIR/val/...)\n"
            "  --data-dir DIR        where the Fashion-MNIST files are (default: $BRIGADE_DATA_DIR,\n"
            "                        else the folder configure chose)\n"
IMAGE_OPTIONS_HELP
            "  --devices SPEC        the devices in pipeline order, e.g. 1x512MiB or 4x8MiB or\n"
            "                        64MiB,2x32MiB (default 1x1GiB); cpu-async:4x8MiB for CPU\n"
            "                        devices with streams (threads), as on a GPU;\n"
            "                        cuda:0-6 for GPUs 0 to 6 whole, cuda:0-6@12GiB to take\n"
            "                        them as 12 GiB cards; cuda:0:7x12GiB for virtual GPU\n"
            "                        devices; under mpirun, cuda:local[:NxSIZE] for each\n"
            "                        rank's own GPU\n"
            "  --epochs E            passes over the training samples (default 1)\n"
            "  --batch B             samples per optimizer step (default 64)\n"
            "  --microbatches M      split each batch into M equal micro-batches (M divides B;\n"
            "                        default: the planner's, the largest divisor of B at most\n"
            "                        4 per device, and 1 on one device, where micro-batches\n"
            "                        fill no pipeline and only change BatchNorm's statistics);\n"
            "                        their gradients add up to the batch's\n"
            "  --micro-batch S       the same as --microbatches B/S (S divides B)\n"
            "  --schedule KIND       gpipe, 1f1b (default), interleaved, zb-h1, zb-h2, zb-v,\n"
            "                        v-half, v-min or auto (as 'brigade plan')\n"
            "  --chunks V            interleaved: model chunks per device, 2..16 (default 2)\n"
            "  --recompute MODE      none (default), all or auto (as 'brigade plan')\n"
            "  --split B1,B2,...     cut by hand: each named block ends a stage\n"
            "  --headroom F          fraction of each capacity the plan leaves free, 0..0.9\n"
            "                        or a percentage (default 5%%)\n"
            "  --device-speed G, --link-speed G, --profile FILE|auto\n"
            "                        device GFLOP/s, link GB/s or measured per-layer times for\n"
            "                        the planner's cuts (as 'brigade plan'; CPU devices default\n"
            "                        to this CPU's calibrated speed)\n"
            "  --replicas D          under mpirun: D data-parallel copies of the pipeline,\n"
            "                        each on its own ranks and devices (--devices lists all\n"
            "                        D x the stages), each taking 1/D of every batch\n"
            "                        (--microbatches counts one replica's); gradients are\n"
            "                        summed over the replicas before every step\n"
            "  --sync-bn             with --replicas: BatchNorm normalizes with the statistics\n"
            "                        of every replica's micro-batch at once (D replicas of\n"
            "                        micro-batch n train as one device with micro-batch D x n)\n"
            "  --deferred-bn         update BatchNorm's running statistics once per batch\n"
            "                        from all its micro-batches (as one device running the\n"
            "                        whole batch would) instead of once per micro-batch\n"
            "  --lr L                learning rate (default 0.001 for adam, 0.01 for sgd)\n"
            "  --lr-schedule KIND    constant (default) or cosine: from L down to 0 over all\n"
            "                        the steps of the run (PyTorch's CosineAnnealingLR stepped\n"
            "                        per batch)\n"
            "  --optimizer KIND      PyTorch's sgd or adam (default adam); momentum is sgd\n"
            "                        with --momentum 0.9\n"
            "  --momentum M          SGD momentum in [0, 1) (default 0)\n"
            "  --weight-decay W      L2 penalty added to the gradients (default 0)\n"
            "  --seed S              initialization, data order, dropout (default 1)\n"
            "  --limit N             use only the first N training samples (synthetic: make N;\n"
"                        default 1024)\n"
            "  --init-weights W      start from the weights in W (a safetensors file, e.g. from\n"
            "                        'brigade model export') instead of the seed's\n"
            "  --checkpoint DIR      save checkpoints in DIR: at the end of every epoch, every\n"
            "                        --checkpoint-every N steps, and when stopped by Ctrl-C,\n"
            "                        SIGTERM, SIGHUP or SIGPIPE (stopped in an evaluation,\n"
            "                        the resume begins with it; a second Ctrl-C or SIGTERM,\n"
            "                        a second or more later, exits at once); DIR is this\n"
            "                        run's alone: one holding other checkpoints is refused\n"
            "                        unless this run resumes from it\n"
            "  --checkpoint-every N  also save every N steps\n"
            "  --keep K              keep the newest K complete checkpoints (default 2)\n"
            "  --resume DIR          continue from DIR's newest complete checkpoint (the same\n"
            "                        command, devices and schedule free to change, and\n"
            "                        --epochs at a constant rate); goes on saving there\n"
            "                        unless --checkpoint says elsewhere\n"
            "  --watchdog S          under mpirun: end the job when no step, evaluation piece\n"
            "                        or checkpoint has finished for S seconds, or 10 times\n"
            "                        the longest gap so far if longer (a rank stopped or\n"
            "                        hung; default 300, 0: never)\n"
            "  --watchdog-setup S    under mpirun: end the job when a setup phase (reading\n"
            "                        the model or the data, planning, making the pipeline,\n"
            "                        loading weights) takes longer than S seconds on a rank\n"
            "                        (hung on a stuck file system, say; default 3600, or\n"
            "                        --watchdog if longer; 0: no limit)\n"
            "  --input CxHxW         zoo models: input size\n"
            "  --classes N           zoo models: number of classes\n"
            "  --width-mult F        zoo models: channel multiplier\n" BRG_CLI_CUTS_HELP
            "  -h, --help            show this help\n"
            "\n"
            "Exit status: 0 trained (or --resume found the run finished); 1 the work failed\n"
            "(the plan does not fit, out of memory, the data cannot be read, training\n"
            "diverged); 2 the command line is wrong (MODEL a file of another kind too: an\n"
            "image, a PyTorch file), or its data does not fit it (other classes than the\n"
            "model's, the validation folder's or the --resume checkpoint's);\n"
            "129, 130, 141 or 143 stopped by SIGHUP, SIGINT, SIGPIPE or SIGTERM (after saving\n"
            "a checkpoint with --checkpoint; in the setup, after the phase under way,\n"
            "with nothing to save).\n"
            "\n"
            "examples:\n"
            "  brigade train fmnist-cnn --data fashion-mnist --devices 4x8MiB --batch 64 \\\n"
            "      --microbatches 16 --epochs 2 --lr 0.001 --lr-schedule cosine --optimizer adam\n"
            "  brigade train fmnist-cnn --data fashion-mnist --devices 1x512MiB --epochs 2 \\\n"
            "      --batch 64 --lr 0.001 --lr-schedule cosine --optimizer adam --seed 1\n"
            "  brigade train resnet18 --input 3x64x64 --classes 10 --data synthetic --limit 512 \\\n"
            "      --devices 3x64MiB --schedule gpipe\n"
            "  brigade train fmnist-cnn --data fashion-mnist --devices 4x11MiB --epochs 5 \\\n"
            "      --checkpoint ckpt --checkpoint-every 200      (then, after a stop: the same\n"
            "      command with --resume ckpt, on any devices)\n");
}

enum {
    OPT_DATA = 256,
    OPT_DATA_DIR,
    OPT_DEVICES,
    OPT_EPOCHS,
    OPT_BATCH,
    OPT_MICRO_BATCH,
    OPT_MICROBATCHES,
    OPT_DEFERRED_BN,
    OPT_LR,
    OPT_LR_SCHEDULE,
    OPT_OPTIMIZER,
    OPT_MOMENTUM,
    OPT_WEIGHT_DECAY,
    OPT_SEED,
    OPT_LIMIT,
    OPT_INIT_WEIGHTS,
    OPT_CHECKPOINT,
    OPT_CHECKPOINT_EVERY,
    OPT_KEEP,
    OPT_WATCHDOG,
    OPT_WATCHDOG_SETUP,
    OPT_RESUME,
    OPT_WEIGHTS,
    OPT_VAL_SPLIT,
    OPT_RESIZE,
    OPT_MEAN,
    OPT_STD,
    OPT_NO_FLIP,
    OPT_DATA_THREADS,
    OPT_BAD_IMAGES,
    OPT_IGNORE_LABEL,
};

#define IMAGE_OPTIONS                                                                                             \
    {"val-split", required_argument, NULL, OPT_VAL_SPLIT}, {"resize", required_argument, NULL, OPT_RESIZE},      \
        {"mean", required_argument, NULL, OPT_MEAN}, {"std", required_argument, NULL, OPT_STD},                  \
        {"no-flip", no_argument, NULL, OPT_NO_FLIP}, {"data-threads", required_argument, NULL, OPT_DATA_THREADS}, \
        {"bad-images", required_argument, NULL, OPT_BAD_IMAGES},                                                 \
        {"ignore-label", required_argument, NULL, OPT_IGNORE_LABEL}

static const struct option train_opts[] = {
    {"data", required_argument, NULL, OPT_DATA},
    {"data-dir", required_argument, NULL, OPT_DATA_DIR},
    {"devices", required_argument, NULL, OPT_DEVICES},
    {"epochs", required_argument, NULL, OPT_EPOCHS},
    {"batch", required_argument, NULL, OPT_BATCH},
    {"micro-batch", required_argument, NULL, OPT_MICRO_BATCH},
    {"microbatches", required_argument, NULL, OPT_MICROBATCHES},
    {"deferred-bn", no_argument, NULL, OPT_DEFERRED_BN},
    {"lr", required_argument, NULL, OPT_LR},
    {"lr-schedule", required_argument, NULL, OPT_LR_SCHEDULE},
    {"optimizer", required_argument, NULL, OPT_OPTIMIZER},
    {"momentum", required_argument, NULL, OPT_MOMENTUM},
    {"weight-decay", required_argument, NULL, OPT_WEIGHT_DECAY},
    {"seed", required_argument, NULL, OPT_SEED},
    {"limit", required_argument, NULL, OPT_LIMIT},
    {"init-weights", required_argument, NULL, OPT_INIT_WEIGHTS},
    {"checkpoint", required_argument, NULL, OPT_CHECKPOINT},
    {"checkpoint-every", required_argument, NULL, OPT_CHECKPOINT_EVERY},
    {"keep", required_argument, NULL, OPT_KEEP},
    {"watchdog", required_argument, NULL, OPT_WATCHDOG},
    {"watchdog-setup", required_argument, NULL, OPT_WATCHDOG_SETUP},
    {"resume", required_argument, NULL, OPT_RESUME},
    IMAGE_OPTIONS,
    BRG_CLI_ZOO_OPTIONS,
    BRG_CLI_PLAN_OPTIONS,
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

#define MAX_EPOCHS 100000
#define MAX_BATCH (1 << 20)
#define MAX_LIMIT ((int64_t)1 << 31)

/* --data and the options that go with it; -1 to go on, else the exit code. */
static int check_data(const char *cmd, const train_args *a)
{
    if (a->data == DATA_NONE) {
        fprintf(stderr, "brigade %s: which data? give --data fashion-mnist, --data synthetic or --data DIR (a "
                        "folder of images)\n", cmd);
        return BRG_EXIT_USAGE;
    }
    if (a->data_dir && a->data != DATA_FASHION) {
        fprintf(stderr, "brigade %s: --data-dir applies to --data fashion-mnist\n", cmd);
        return BRG_EXIT_USAGE;
    }
    const image_args *ia = &a->images;
    if (a->data != DATA_FOLDER && (ia->val_split_given || ia->resize || ia->n_mean || ia->n_std || ia->no_flip ||
                                   ia->bad_fail || ia->ignore_label != BRG_SEG_IGNORE_LABEL)) {
        fprintf(stderr, "brigade %s: --val-split, --resize, --mean, --std, --no-flip, --bad-images and "
                        "--ignore-label apply to --data DIR (a folder of images)\n", cmd);
        return BRG_EXIT_USAGE;
    }
    return -1;
}

/* A comma list of 1 to 3 numbers for --mean or --std. */
typedef struct reals {
    const char *cmd, *name;
    double *v;
    int n, positive;
} reals;

static int take_real(void *ctx, const char *item)
{
    reals *r = ctx;
    if (r->n == 3) {
        fprintf(stderr, "brigade %s: %s takes at most 3 values (one per channel)\n", r->cmd, r->name);
        return 0;
    }
    double v;
    if (!brg_cli_parse_real(r->cmd, r->name, item, 0, &v)) return 0;
    if (r->positive && !(v > 0.0)) {
        fprintf(stderr, "brigade %s: %s: %s is not a positive number\n", r->cmd, r->name, item);
        return 0;
    }
    r->v[r->n++] = v;
    return 1;
}

/* The model argument and the settings that depend on each other, after the
 * options; -1 to go on, else the exit code. */
static int check_args(int argc, char **argv, train_args *a)
{
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
    const int data = check_data("train", a);
    if (data >= 0) return data;
    if (a->momentum_given && a->optimizer != BRG_OPTIMIZER_SGD) {
        fprintf(stderr, "brigade train: --momentum applies to --optimizer sgd (Adam has its own betas)\n");
        return BRG_EXIT_USAGE;
    }
    if (a->micro_batch > a->batch) {
        fprintf(stderr, "brigade train: --micro-batch %lld is larger than --batch %lld\n", (long long)a->micro_batch,
                (long long)a->batch);
        return BRG_EXIT_USAGE;
    }
    if (a->micro_batch && a->micro_batches) {
        fprintf(stderr, "brigade train: give --microbatches or --micro-batch, not both\n");
        return BRG_EXIT_USAGE;
    }
    if (a->micro_batch && !brg_cli_check_divides("train", "--micro-batch", a->micro_batch, a->batch))
        return BRG_EXIT_USAGE;
    if (a->micro_batch) a->micro_batches = a->batch / a->micro_batch;
    if (a->micro_batches && !brg_cli_check_divides("train", "--microbatches", a->micro_batches, a->batch))
        return BRG_EXIT_USAGE;
    if (!a->lr_given) a->lr = a->optimizer == BRG_OPTIMIZER_ADAM ? 1e-3 : 1e-2;
    if (a->init_weights && a->resume_dir) {
        fprintf(stderr, "brigade train: --init-weights starts afresh from weights, --resume continues a run: give "
                        "one of them\n");
        return BRG_EXIT_USAGE;
    }
    /* A mistyped --resume folder is said before the data and the plan,
     * which take long on a large model. */
    struct stat sb;
    if (a->resume_dir && !a->resume_dir[0]) {
        fprintf(stderr, "brigade train: --resume: an empty folder path\n");
        return BRG_EXIT_USAGE;
    }
    if (a->resume_dir && stat(a->resume_dir, &sb) != 0) {
        fprintf(stderr, "brigade train: --resume: cannot open the checkpoint folder %s: %s\n", a->resume_dir,
                strerror(errno));
        return BRG_EXIT_FAILURE;
    }
    if (a->resume_dir && !S_ISDIR(sb.st_mode)) {
        fprintf(stderr, "brigade train: --resume: %s is not a folder\n", a->resume_dir);
        return BRG_EXIT_FAILURE;
    }
    /* A resumed run goes on saving where it was saved. */
    if (!a->checkpoint_dir) a->checkpoint_dir = a->resume_dir;
    if (!a->checkpoint_dir && (a->checkpoint_every || a->keep != 2)) {
        fprintf(stderr, "brigade train: --checkpoint-every and --keep apply to --checkpoint DIR\n");
        return BRG_EXIT_USAGE;
    }
    return -1;
}

/* Parse argv; -1 to go on, else the exit code. */
static void args_init(train_args *a)
{
    memset(a, 0, sizeof *a);
    a->devices = "1x1GiB";
    a->epochs = 1;
    a->batch = 64;
    a->plan = brg_cli_plan_args_init();
    a->optimizer = BRG_OPTIMIZER_ADAM;
    a->seed = 1;
    a->keep = 2;
    a->watchdog = 300;
    a->watchdog_setup = -1;
    a->images.threads = -1;
    a->images.ignore_label = BRG_SEG_IGNORE_LABEL;
}

/* An option train and eval share (the data, devices, batch, model and
 * planner settings): -1 when taken, -2 when not one of them, else the exit
 * code. */
static int shared_option(const char *cmd, int c, train_args *a)
{
    int64_t v;
    image_args *ia = &a->images;
    switch (c) {
    case OPT_DATA: {
        struct stat sb;
        const int err = stat(optarg, &sb) == 0 ? (S_ISDIR(sb.st_mode) ? 0 : ENOTDIR) : errno;
        if (strcmp(optarg, "fashion-mnist") == 0) {
            a->data = DATA_FASHION;
        } else if (strcmp(optarg, "synthetic") == 0) {
            a->data = DATA_SYNTHETIC;
        } else if (!err) {
            a->data = DATA_FOLDER;
            a->data_path = optarg;
        } else {
            fprintf(stderr, "brigade %s: --data '%s' is neither fashion-mnist, synthetic nor a folder (%s)\n", cmd,
                    optarg, err == ENOTDIR ? "not a folder" : strerror(err));
            return BRG_EXIT_USAGE;
        }
        return -1;
    }
    case OPT_VAL_SPLIT:
        /* 0: none (DIR/val), also where a checkpoint's training had one */
        if (!brg_cli_parse_real(cmd, "--val-split", optarg, 1, &ia->val_split)) return BRG_EXIT_USAGE;
        if (!(ia->val_split >= 0.0 && ia->val_split < 1.0)) {
            fprintf(stderr, "brigade %s: --val-split %s is not a fraction between 0 and 1 (e.g. 0.1 or 10%%; 0 for "
                            "none)\n", cmd, optarg);
            return BRG_EXIT_USAGE;
        }
        ia->val_split_given = 1;
        return -1;
    case OPT_RESIZE: return brg_cli_parse_int(cmd, "--resize", optarg, 1, 65535, &ia->resize) ? -1 : BRG_EXIT_USAGE;
    case OPT_MEAN:
    case OPT_STD: {
        reals r = {cmd, c == OPT_MEAN ? "--mean" : "--std", c == OPT_MEAN ? ia->mean : ia->std, 0, c == OPT_STD};
        if (!brg_cli_parse_list(cmd, r.name, optarg, "1 to 3 numbers such as 0.5,0.5,0.5", &r, take_real))
            return BRG_EXIT_USAGE;
        *(c == OPT_MEAN ? &ia->n_mean : &ia->n_std) = r.n;
        return -1;
    }
    case OPT_NO_FLIP: ia->no_flip = 1; return -1;
    case OPT_DATA_THREADS:
        return brg_cli_parse_int(cmd, "--data-threads", optarg, 0, 256, &ia->threads) ? -1 : BRG_EXIT_USAGE;
    case OPT_BAD_IMAGES:
        if (strcmp(optarg, "skip") != 0 && strcmp(optarg, "fail") != 0) {
            fprintf(stderr, "brigade %s: --bad-images '%s': expected skip or fail\n", cmd, optarg);
            return BRG_EXIT_USAGE;
        }
        ia->bad_fail = strcmp(optarg, "fail") == 0;
        return -1;
    case OPT_IGNORE_LABEL:
        if (!brg_cli_parse_int(cmd, "--ignore-label", optarg, 0, 255, &v)) return BRG_EXIT_USAGE;
        ia->ignore_label = (int32_t)v;
        ia->ignore_label_given = 1;
        return -1;
    case OPT_WATCHDOG:
        return brg_cli_watchdog_parse(cmd, "--watchdog", optarg, &a->watchdog) ? -1 : BRG_EXIT_USAGE;
    case OPT_WATCHDOG_SETUP:
        return brg_cli_watchdog_parse(cmd, "--watchdog-setup", optarg, &a->watchdog_setup) ? -1 : BRG_EXIT_USAGE;
    case OPT_DATA_DIR: a->data_dir = optarg; return -1;
    case OPT_DEVICES: a->devices = optarg; return -1;
    case OPT_BATCH:
        a->batch_given = 1;
        return brg_cli_parse_int(cmd, "--batch", optarg, 1, MAX_BATCH, &a->batch) ? -1 : BRG_EXIT_USAGE;
    case OPT_MICRO_BATCH:
        return brg_cli_parse_int(cmd, "--micro-batch", optarg, 1, MAX_BATCH, &a->micro_batch) ? -1 : BRG_EXIT_USAGE;
    case OPT_MICROBATCHES:
        return brg_cli_parse_int(cmd, "--microbatches", optarg, 1, MAX_BATCH, &a->micro_batches) ? -1
                                                                                                  : BRG_EXIT_USAGE;
    case OPT_LIMIT:
        return brg_cli_parse_int(cmd, "--limit", optarg, 1, MAX_LIMIT, &a->limit) ? -1 : BRG_EXIT_USAGE;
    case OPT_SEED:
        if (!brg_cli_parse_int(cmd, "--seed", optarg, 0, INT64_MAX, &v)) return BRG_EXIT_USAGE;
        a->seed = (uint64_t)v;
        a->seed_given = 1;
        return -1;
    case BRG_CLI_OPT_CUTS:
        return brg_cli_cuts_option(cmd, optarg) ? -1 : BRG_EXIT_USAGE;
    case BRG_CLI_OPT_INPUT:
    case BRG_CLI_OPT_CLASSES:
    case BRG_CLI_OPT_WIDTH_MULT:
        if (!brg_cli_zoo_option(cmd, c, optarg, &a->zoo)) return BRG_EXIT_USAGE;
        a->zoo_given = 1;
        return -1;
    default: {
        const int taken = brg_cli_plan_option(cmd, c, optarg, &a->plan); /* -1: not a planner setting */
        if (taken < 0) return -2;
        return taken ? -1 : BRG_EXIT_USAGE;
    }
    }
}

/* Parse argv; -1 to go on, else the exit code. */
static int parse_args(int argc, char **argv, train_args *a)
{
    args_init(a);
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", train_opts, NULL)) != -1) {
        switch (c) {
        case 'h': usage(stdout); return BRG_EXIT_OK;
        case OPT_DEFERRED_BN: a->deferred_bn = 1; break;
        case OPT_INIT_WEIGHTS: a->init_weights = optarg; break;
        case OPT_CHECKPOINT: a->checkpoint_dir = optarg; break;
        case OPT_RESUME: a->resume_dir = optarg; break;
        case OPT_CHECKPOINT_EVERY:
            if (!brg_cli_parse_int("train", "--checkpoint-every", optarg, 1, INT64_MAX, &a->checkpoint_every))
                return BRG_EXIT_USAGE;
            break;
        case OPT_KEEP:
            if (!brg_cli_parse_int("train", "--keep", optarg, 1, 1000000, &a->keep)) return BRG_EXIT_USAGE;
            break;
        case OPT_EPOCHS:
            if (!brg_cli_parse_int("train", "--epochs", optarg, 1, MAX_EPOCHS, &a->epochs)) return BRG_EXIT_USAGE;
            break;
        case OPT_LR:
            if (!brg_cli_parse_real("train", "--lr", optarg, 0, &a->lr)) return BRG_EXIT_USAGE;
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
            if (!brg_cli_parse_real("train", "--momentum", optarg, 0, &a->momentum)) return BRG_EXIT_USAGE;
            if (!(a->momentum >= 0.0 && a->momentum < 1.0)) {
                fprintf(stderr, "brigade train: --momentum %s must be at least 0 and below 1\n", optarg);
                return BRG_EXIT_USAGE;
            }
            a->momentum_given = 1;
            break;
        case OPT_WEIGHT_DECAY:
            if (!brg_cli_parse_real("train", "--weight-decay", optarg, 0, &a->weight_decay)) return BRG_EXIT_USAGE;
            if (!(a->weight_decay >= 0.0)) {
                fprintf(stderr, "brigade train: --weight-decay %s must not be negative\n", optarg);
                return BRG_EXIT_USAGE;
            }
            break;
        case OPT_OPTIMIZER:
            /* "momentum" as 'brigade plan' names SGD with momentum 0.9. */
            if (strcmp(optarg, "momentum") == 0) {
                a->optimizer = BRG_OPTIMIZER_SGD;
                if (!a->momentum_given) a->momentum = 0.9;
                a->momentum_given = 1;
                break;
            }
            brg_optimizer_kind kind;
            if (brg_optimizer_parse(optarg, &kind) == BRG_OK) {
                a->optimizer = kind;
            } else {
                fprintf(stderr, "brigade train: unknown optimizer '%s' (known: sgd, momentum, adam)\n", optarg);
                return BRG_EXIT_USAGE;
            }
            break;
        default: {
            const int rc = shared_option("train", c, a);
            if (rc == -2) return brg_cli_bad_option("train", c, argv);
            if (rc >= 0) return rc;
            break;
        }
        }
    }
    return check_args(argc, argv, a);
}

/* ---- data ---- */

/* The processes of this run's pipeline: its replica's (--replicas), else
 * all. */
static const brg_world *pipeline_world;

/* This rank holds the first stage and reads the data (always, in one
 * process; with replicas, one rank in each). */
static int feeds(const brg_pipeline *pipeline)
{
    return brg_world_holds(pipeline_world, 0, brg_pipeline_devices(pipeline));
}

/* The label that counts nowhere: the void of segmentation masks for a
 * model with per-pixel outputs; none (0, a class) for class logits. */
static int32_t ignore_label(const train_args *a, const brg_model *m)
{
    return brg_model_label_count(m) > 1 ? a->images.ignore_label : 0;
}

static double ratio(double a, int64_t b) { return b > 0 ? a / (double)b : 0.0; }

/* The signal that stops the run after this step (or evaluation piece):
 * under mpirun every rank asks (a collective call), so that all stop after
 * the same one. */
static int stop_signal(void)
{
    const int sig = brg_train_stop_signal();
    return brg_world_any(brg_cli_world, sig) && !sig ? SIGTERM : sig;
}

/* BRG_DEBUG_SLOW_EVAL=S, for tests only: every evaluation piece takes S
 * seconds more, said once per evaluation (its first piece), so that a test
 * can land a signal inside one (tests/test_cli_checkpoint.sh). A signal
 * does not cut the wait short, as it cannot cut a real piece short. */
static void slow_eval_piece(int first)
{
    const char *s = getenv("BRG_DEBUG_SLOW_EVAL");
    const int seconds = s && *s ? atoi(s) : 0;
    if (seconds <= 0) return;
    if (first) {
        fprintf(stderr, "brigade: BRG_DEBUG_SLOW_EVAL: each evaluation piece waits %d s\n", seconds);
        fflush(stderr);
    }
    struct timespec left = {seconds, 0};
    while (nanosleep(&left, &left) != 0 && errno == EINTR) continue;
}

/* After this rank's k-th piece (from 0) of the evaluation's pieces, in
 * rounds of D (one a replica): the signal that stops it there, or 0. Every
 * rank asks after each round that every replica has a piece of and more
 * follow, so all ask as often (a collective call); the last round is not
 * cut short (a stop then comes after the epoch, its figures kept). */
static int stop_after_piece(int64_t k, int64_t pieces, int64_t D)
{
    return (k + 1) * D < pieces ? stop_signal() : 0;
}

/* Evaluate on the first count test samples, through the test loader in
 * batches of the host buffers' size, into *out (new metrics: the loss,
 * top-1 and top-5 accuracy, for per-pixel outputs pixel accuracy and mean
 * IoU). A signal stops it between pieces, on every rank alike: *stopped
 * is then the signal and *out holds part of the figures; else 0. */
static brg_status evaluate(brg_pipeline *pipeline, const train_args *a, const brg_model *m, train_data *d,
                           int64_t count, brg_metrics **out, int *stopped)
{
    brg_status st = brg_metrics_create(brg_model_classes(m), ignore_label(a, m), out);
    *stopped = 0;
    /* The test set in pieces of d->batch; with D replicas replica r takes
     * pieces r, r + D, ... and the figures are added up over them. */
    const int64_t D = brg_world_replicas(pipeline_world), r = brg_world_replica(pipeline_world);
    const int64_t pieces = (count + d->batch - 1) / d->batch;
    if (!feeds(pipeline)) {
        /* Another rank reads the test set: take part in its pieces. */
        for (int64_t j = r, k = 0; st == BRG_OK && !*stopped && j < pieces; j += D, k++) {
            const int64_t at = j * d->batch;
            slow_eval_piece(k == 0);
            st = brg_pipeline_evaluate_metrics(pipeline, NULL, NULL, count - at < d->batch ? count - at : d->batch,
                                               *out);
            brg_cli_watchdog_pet();
            if (st == BRG_OK) *stopped = stop_after_piece(k, pieces, D);
        }
    } else {
        int64_t *order = NULL, mine = 0;
        if (st == BRG_OK && (D > 1 || count < d->test.count)) {
            order = malloc((size_t)(count + 1) * sizeof *order);
            if (!order) st = BRG_ERR_HOST_MEMORY;
            for (int64_t j = r; order && j < pieces; j += D)
                for (int64_t i = j * d->batch; i < count && i < (j + 1) * d->batch; i++) order[mine++] = i;
        }
        const int64_t to_do = order ? mine : count;
        if (st == BRG_OK) st = brg_train_data_start_test(d, order, to_do, count);
        free(order); /* the loader copies it */
        /* A large validation set takes minutes: progress on a terminal. */
        brg_count_progress prog = brg_count_progress_start();
        int64_t done = 0;
        /* k: this rank's pieces so far (the loader's batches are the pieces) */
        for (int64_t n = 1, k = 0; st == BRG_OK && n > 0 && !*stopped; k++) {
            brg_count_progress_show(&prog, "evaluating", done, to_do, "test samples");
            const float *images;
            const int32_t *labels;
            st = brg_loader_next(d->test_loader, &images, &labels, &n, NULL);
            if (st == BRG_OK && n > 0) {
                slow_eval_piece(k == 0);
                st = brg_pipeline_evaluate_metrics(pipeline, images, labels, n, *out);
            }
            done += n;
            brg_cli_watchdog_pet();
            if (st == BRG_OK && n > 0) *stopped = stop_after_piece(k, pieces, D);
        }
        brg_count_progress_clear(&prog);
    }
    /* Stopped: every rank stopped, none merges. */
    if (st == BRG_OK && !*stopped) st = brg_pipeline_merge_replicas(pipeline, *out);
    return st;
}

/* ---- the command ---- */

static brg_optimizer_config optimizer_of(const train_args *a)
{
    brg_optimizer_config oc = brg_optimizer_config_init((brg_optimizer_kind)a->optimizer);
    oc.momentum = (float)a->momentum;
    oc.weight_decay = (float)a->weight_decay;
    return oc;
}

/* What to change when memory runs out: when the weights, gradients and
 * optimizer state alone exceed all the devices together, more memory or
 * more devices; else also more micro-batches, recomputation or a smaller
 * batch. */
static void oom_hint(const train_args *a, const brg_model *m, size_t total_capacity, int devices)
{
    const brg_optimizer_config oc = optimizer_of(a);
    /* Weights (trainable and running statistics), gradients, optimizer
     * state, before the arena's rounding. */
    const int64_t floats = brg_model_trainable_params(m) * (2 + brg_optimizer_state_count(&oc)) +
                           brg_model_frozen_params(m);
    const size_t bytes = (size_t)floats * sizeof(float);
    char b1[32], b2[32];
    if (bytes > total_capacity) {
        fprintf(stderr,
                "hint: the weights, gradients and optimizer state alone need about %s, more than the %s of "
                "the device%s; give more memory (a larger --devices size than %s) or more devices\n",
                brg_format_bytes(bytes, b1, sizeof b1), brg_format_bytes(total_capacity, b2, sizeof b2),
                devices == 1 ? "" : "s together", a->devices);
    } else {
        fprintf(stderr,
                "hint: give the device%s more memory (a larger --devices size than %s) or add devices, split the "
                "batch into more --microbatches, use --recompute all, or a smaller --batch than %lld\n",
                devices == 1 ? "" : "s", a->devices, (long long)a->batch);
    }
}

/* Report a failure; out of memory gets the hint. */
static int fail_hint(const char *what, brg_status st, const train_args *a, const brg_model *m, size_t total_capacity,
                     int devices)
{
    int rc = brg_cli_fail(what, st);
    if (st == BRG_ERR_OUT_OF_MEMORY) oom_hint(a, m, total_capacity, devices);
    return rc == BRG_EXIT_USAGE ? BRG_EXIT_FAILURE : rc;
}

/* Everything one training run holds, so that its phases are functions and
 * one place frees it. */
typedef struct train_run {
    train_args a;
    brg_plan_options o;
    brg_device_spec *specs;
    brg_device **devs;
    size_t *peaks, *caps;
    int n_devices;              /* of one replica's pipeline */
    int replicas;               /* --replicas, at least 1 */
    int device_base;            /* this replica's first device in --devices */
    brg_world *replica_world;   /* this rank's replica (brg_world_split_replicas) */
    size_t total_capacity;
    brg_model *model;
    const brg_model_tensor *in, *out;
    train_data data;
    int64_t test_count;         /* test samples evaluated */
    int64_t steps, dropped;     /* per epoch; samples of each epoch's order left out */
    int64_t first_step;         /* the optimizer steps done when this process started training */
    int *cuts;
    brg_plan *plan;
    brg_pipeline *pipeline;
    int64_t *order;
    int64_t *share_order;       /* with replicas: this replica's samples of order, step by step */
    char last_checkpoint[4096];
    int checkpoint_lock;        /* brg_checkpoint_lock's handle, + 1 (0: none held) */
    unsigned char *made;        /* brg_checkpoint_lock's marks of the folders it made for --checkpoint, or NULL */
    brg_checkpoint_manifest weights_manifest; /* eval: the manifest of a checkpoint's --weights, read once */
    int weights_listed;                       /* whether weights_manifest was read */
    const char *cmd;            /* "train" or "eval", for messages */
    char what_buf[64];
} train_run;

/* "CMD: part", for brg_cli_fail's messages. */
static const char *what(train_run *r, const char *part)
{
    snprintf(r->what_buf, sizeof r->what_buf, "%s: %s", r->cmd, part);
    return r->what_buf;
}

/* When the run saved no checkpoint (it was refused, or failed before its
 * first save): the folders the lock made for --checkpoint (r->made) go,
 * deepest first, so that such a run leaves nothing new behind. Only those,
 * and only empty: a folder that was there stays, also one that a ".." in
 * the path reaches through a made one ("new/../there"); the --checkpoint
 * folder itself goes when it holds nothing but the run's lock. */
static void remove_unused_checkpoint_folder(train_run *r)
{
    if (!r->made || r->last_checkpoint[0]) return;
    const char *dir = r->a.checkpoint_dir;
    const size_t len = strlen(dir);
    size_t n = len; /* the folder itself: the path less its trailing slashes */
    while (n > 1 && dir[n - 1] == '/') n--;
    char *p = malloc(len + sizeof "/.lock");
    if (!p) return;
    DIR *d = r->made[n] ? opendir(dir) : NULL;
    if (d) {
        int others = 0;
        for (struct dirent *e; (e = readdir(d));)
            others |= strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0 && strcmp(e->d_name, ".lock") != 0;
        closedir(d);
        /* Unlinked while held: a run that opened it meanwhile is refused.
         * A folder that was there keeps its lock file. */
        snprintf(p, len + sizeof "/.lock", "%.*s/.lock", (int)n, dir);
        if (!others) {
            unlink(p);
            brg_checkpoint_unlock(r->checkpoint_lock - 1);
            r->checkpoint_lock = 0;
        }
    }
    memcpy(p, dir, len + 1);
    for (size_t k = len; k > 0; k--) {
        if (!r->made[k]) continue;
        const char keep = p[k];
        p[k] = '\0';
        (void)rmdir(p); /* one that is not empty (not only ours) stays */
        p[k] = keep;
    }
    free(p);
}

static void train_run_free(train_run *r)
{
    remove_unused_checkpoint_folder(r);
    brg_checkpoint_unlock(r->checkpoint_lock - 1);
    free(r->made);
    brg_checkpoint_manifest_free(&r->weights_manifest);
    brg_pipeline_destroy(r->pipeline);
    brg_train_data_free(&r->data); /* its batches may be in device 0's pinned memory */
    for (int d = 0; r->devs && d < r->n_devices; d++) brg_device_destroy(r->devs[d]);
    brg_world_finalize(r->replica_world);
    pipeline_world = NULL;
    brg_plan_destroy(r->plan);
    brg_model_destroy(r->model);
    free(r->order);
    free(r->share_order);
    free(r->cuts);
    free(r->specs);
    free(r->devs);
    free(r->peaks);
    free(r->caps);
}

/* The device list and the model; -1 to go on, else the exit code. */
static int load_devices_and_model(train_run *r)
{
    r->specs = calloc(BRG_PLAN_MAX_DEVICES, sizeof *r->specs);
    r->devs = calloc(BRG_PLAN_MAX_DEVICES, sizeof *r->devs);
    r->peaks = calloc(BRG_PLAN_MAX_DEVICES, sizeof *r->peaks);
    r->caps = calloc(BRG_PLAN_MAX_DEVICES, sizeof *r->caps);
    if (!r->specs || !r->devs || !r->peaks || !r->caps) {
        fprintf(stderr, "brigade %s: out of host memory\n", r->cmd);
        return BRG_EXIT_FAILURE;
    }
    if (!brg_cli_parse_devices(r->cmd, r->a.devices, r->specs, BRG_PLAN_MAX_DEVICES, &r->n_devices))
        return BRG_EXIT_USAGE;
    int64_t share = 0;
    r->replicas = r->a.plan.numbers.replicas > 1 ? r->a.plan.numbers.replicas : 1;
    if (!brg_cli_plan_replicas(r->cmd, r->replicas, r->specs, &r->n_devices, r->a.batch, &share))
        return BRG_EXIT_USAGE;
    pipeline_world = brg_cli_world;
    if (r->replicas > 1) {
        if (brg_world_size(brg_cli_world) % r->replicas) {
            fprintf(stderr, "brigade %s: --replicas %d: each replica runs on its own processes; start a multiple of %d "
                            "(mpirun -np %d ...), not %d\n", r->cmd, r->replicas, r->replicas, r->replicas,
                    brg_world_size(brg_cli_world));
            return BRG_EXIT_USAGE;
        }
        if (brg_world_split_replicas(brg_cli_world, r->replicas, &r->replica_world) != BRG_OK) {
            fprintf(stderr, "brigade %s: --replicas: %s\n", r->cmd, brg_last_error());
            return BRG_EXIT_FAILURE;
        }
        pipeline_world = r->replica_world;
        const int replica = brg_world_replica(r->replica_world);
        r->device_base = replica * r->n_devices;
        /* This replica's devices first: the plan is made on replica 0's,
         * which have the same kinds and sizes. */
        memmove(r->specs, r->specs + r->device_base, (size_t)r->n_devices * sizeof *r->specs);
    }
    for (int d = 0; d < r->n_devices; d++) r->total_capacity += r->specs[d].capacity;
    if (brg_world_check_devices(pipeline_world, r->n_devices) != BRG_OK) {
        fprintf(stderr, "brigade %s: --devices %s: %s\n", r->cmd, r->a.devices, brg_last_error());
        return BRG_EXIT_USAGE;
    }
    if (!brg_cli_check_devices_here(r->cmd, pipeline_world, r->specs, r->n_devices)) return BRG_EXIT_USAGE;
    brg_cli_watchdog_phase("reading the model");
    const int load = brg_cli_load_model(r->cmd, r->a.spec, &r->a.zoo, r->a.zoo_given, &r->model);
    if (load >= 0) return load;
    r->in = brg_model_get_tensor(r->model, brg_model_input(r->model));
    r->out = brg_model_get_tensor(r->model, brg_model_output(r->model));
    return -1;
}

/* The training and test samples and the steps of an epoch; -1 to go on,
 * else the exit code. */
static int load_data(train_run *r)
{
    const train_args *a = &r->a;
    brg_cli_watchdog_phase("reading the data");
    /* With replicas each feeding rank reads only its replica's share. */
    const int rc = brg_train_data_open(r->cmd, a, r->model, r->n_devices, a->batch / r->replicas, &r->data);
    if (rc >= 0) return rc;
    r->test_count = r->data.test.count;
    /* A step takes exactly B samples (the pipeline's micro-batches are
     * planned for them), so the last incomplete batch of each epoch's
     * order is left out. */
    if (r->data.train_count < a->batch && strcmp(r->cmd, "train") == 0) {
        /* What else gives more samples: --limit only where it cut them. */
        const char *more = a->data == DATA_SYNTHETIC || a->limit ? " or a larger --limit"
                           : a->data == DATA_FOLDER && a->images.val_split > 0.0 ? " or a smaller --val-split"
                                                                                 : "";
        fprintf(stderr,
                "brigade %s: %lld training samples are fewer than --batch %lld, and a step takes exactly B "
                "samples; use a smaller --batch%s\n", r->cmd, (long long)r->data.train_count, (long long)a->batch,
                more);
        return BRG_EXIT_USAGE;
    }
    r->steps = r->data.train_count / a->batch;
    r->dropped = r->data.train_count - r->steps * a->batch;
    return -1;
}

/* Plan (and print) the partition; a plan that does not fit stops here
 * with the planner's explanation. -1 to go on, else the exit code. */
static int make_plan(train_run *r)
{
    const train_args *a = &r->a;
    brg_plan_options *o = &r->o;
    brg_cli_watchdog_phase("planning");
    if (a->plan.split) {
        if (!brg_cli_parse_split(r->cmd, r->model, a->plan.split, &r->cuts, &o->n_split)) return BRG_EXIT_USAGE;
        o->split = r->cuts;
    }
    o->devices = r->specs;
    o->n_devices = r->n_devices;
    o->batch = (int)(a->batch / r->replicas); /* one replica's share */
    o->micro_batches = (int)a->micro_batches;
    if (r->replicas > 1 && a->micro_batch)
        o->micro_batches = o->batch % a->micro_batch ? 0 : o->batch / (int)a->micro_batch;
    o->optimizer = optimizer_of(a);
    printf("model    %s: %d blocks, %d layers, %lld trainable parameters, input %lldx%lldx%lld, %lld class%s\n",
           brg_model_name(r->model), brg_model_block_count(r->model), brg_model_layer_count(r->model),
           (long long)brg_model_trainable_params(r->model), (long long)r->in->c, (long long)r->in->h,
           (long long)r->in->w, (long long)r->out->c, r->out->c == 1 ? "" : "es");
    brg_train_data_print(&r->data, strcmp(r->cmd, "eval") == 0 ? r->test_count : -1);
    fflush(stdout);
    const brg_status st = brg_plan_create(r->model, o, &r->plan);
    if (st != BRG_OK) {
        const int rc = brg_cli_fail(what(r, "plan"), st);
        /* A profile that cannot be read or does not match is a usage error. */
        return o->profile_path && (st == BRG_ERR_IO || st == BRG_ERR_FORMAT) ? BRG_EXIT_USAGE : rc;
    }
    const brg_plan_info *info = brg_plan_get_info(r->plan);
    if (info->partitioned) {
        printf("\n");
        brg_cli_print_plan(r->plan, o);
        printf("\n");
    }
    fflush(stdout);
    if (!info->feasible) {
        fprintf(stderr, "brigade %s: out of memory: the plan does not fit %s, so %s does not start: %s\n", r->cmd,
                a->devices, strcmp(r->cmd, "eval") == 0 ? "the evaluation" : "training",
                info->note && info->note[0] ? info->note : "nothing fits");
        oom_hint(a, r->model, r->total_capacity, r->n_devices);
        return BRG_EXIT_FAILURE;
    }
    return -1;
}

static void print_settings(const train_run *r)
{
    const train_args *a = &r->a;
    const brg_plan_info *info = brg_plan_get_info(r->plan);
    const brg_optimizer_config *oc = &r->o.optimizer;
    printf("settings %lld epoch%s of %lld step%s, batch %lld", (long long)a->epochs, a->epochs == 1 ? "" : "s",
           (long long)r->steps, r->steps == 1 ? "" : "s", (long long)a->batch);
    if (r->replicas > 1)
        printf(" (%d replicas of %d micro-batch%s of %d)", r->replicas, info->micro_batches,
               info->micro_batches == 1 ? "" : "es", info->micro_batch);
    else if (info->micro_batches > 1)
        printf(" (%d micro-batches of %d)", info->micro_batches, info->micro_batch);
    if (r->dropped)
        printf(", the last %lld sample%s of each epoch's order left out", (long long)r->dropped,
               r->dropped == 1 ? "" : "s");
    printf(", %s lr %g", brg_optimizer_name(oc->kind), a->lr);
    if (a->cosine) printf(" (cosine to 0 over %lld steps)", (long long)(r->steps * a->epochs));
    if (oc->kind == BRG_OPTIMIZER_SGD) printf(" momentum %g", a->momentum);
    if (oc->kind == BRG_OPTIMIZER_ADAM)
        printf(" betas (%g, %g) eps %g", (double)oc->beta1, (double)oc->beta2, (double)oc->epsilon);
    printf(", weight decay %g, seed %llu%s\n", a->weight_decay, (unsigned long long)a->seed,
           a->deferred_bn ? ", deferred BatchNorm" : "");
    int batchnorm = 0;
    for (int l = 0; l < brg_model_layer_count(r->model); l++)
        batchnorm |= brg_model_get_layer(r->model, l)->desc.kind == BRG_LAYER_BATCHNORM;
    if (batchnorm && info->micro_batch < 4)
        fprintf(stderr,
                "brigade train: warning: BatchNorm on micro-batches of %d sample%s: training normalizes by so few "
                "samples' statistics, evaluation by running averages, and test figures can fall far below "
                "training's; give %s if memory allows\n",
                info->micro_batch, info->micro_batch == 1 ? "" : "s",
                info->micro_batches > 1 ? "fewer --microbatches" : "a larger --batch");
    fflush(stdout);
}

/* Devices of the plan's capacities, the pipeline, and the host buffers of
 * one batch; -1 to go on, else the exit code. */
static int make_pipeline(train_run *r)
{
    const train_args *a = &r->a;
    brg_status st;
    brg_cli_watchdog_phase("making the pipeline");
    for (int d = 0; d < r->n_devices; d++) {
        r->caps[d] = r->specs[d].capacity;
        if (!brg_world_holds(pipeline_world, d, r->n_devices)) continue; /* another rank's */
        st = brg_cli_device_create(&r->specs[d], r->device_base + d, &r->devs[d]);
        if (st != BRG_OK) return brg_cli_fail(what(r, "device"), st);
        r->caps[d] = brg_device_capacity(r->devs[d]);
    }
    brg_plan_set_workspace_ceilings(r->plan, r->devs, r->n_devices);
    brg_pipeline_options po = brg_pipeline_options_init();
    po.world = pipeline_world;
    po.seed = a->seed;
    po.deferred_batchnorm = a->deferred_bn;
    po.ignore_label = ignore_label(a, r->model);
    brg_pipeline_desc desc;
    st = brg_plan_pipeline_desc(r->plan, &desc);
    if (st == BRG_OK) st = brg_pipeline_create(&desc, r->devs, r->n_devices, &po, &r->pipeline);
    if (st != BRG_OK) return fail_hint(r->cmd, st, a, r->model, r->total_capacity, r->n_devices);
    const int ranks = brg_world_size(brg_cli_world);
    if (ranks > 1) {
        /* Who holds what, so that a message naming a rank names devices too. */
        const int P = r->n_devices, D = r->replicas, per = ranks / D;
        printf("ranks    %d processes, %d device%s each:", ranks, P * D / ranks, P * D / ranks == 1 ? "" : "s");
        /* Replica k's device s is device k * P + s, on the k-th group of ranks. */
        for (int g = 0; g < P * D; g++) {
            char name[64];
            printf("%s device %d (%s) on rank %d", g ? "," : "", g,
                   brg_device_spec_name(&r->specs[g % P], g, name, sizeof name),
                   g / P * per + brg_world_device_rank(pipeline_world, g % P, P));
        }
        if (D > 1)
            printf("; %d replicas of %d device%s, replica k taking micro-batches k, k+%d, ... of every batch", D, P,
                   P == 1 ? "" : "s", D);
        printf("; rank 0 prints, rank%s", D > 1 ? "s" : "");
        for (int k = 0; k < D; k++)
            printf("%s %d", k ? "," : "", k * per + brg_world_device_rank(pipeline_world, 0, P));
        printf(" read%s the data\n", D > 1 ? "" : "s");
    }
    /* The first device copies the batches in: from its pinned memory, a
     * GPU DMAs them with no staging copy. */
    if (r->devs[0] && brg_device_host_pinned(r->devs[0])) {
        const int rc = brg_train_data_pin(r->cmd, &r->data, r->devs[0]);
        if (rc >= 0) return rc;
        printf("loader   batches in pinned host memory, copied in by %s\n", brg_device_name(r->devs[0]));
    }

    r->order = malloc((size_t)(r->data.train_count ? r->data.train_count : 1) * sizeof *r->order);
    if (r->replicas > 1) r->share_order = malloc((size_t)(r->steps * r->data.train_batch + 1) * sizeof *r->share_order);
    if (!r->order || (r->replicas > 1 && !r->share_order)) {
        fprintf(stderr, "brigade %s: out of host memory for the sample order\n", r->cmd);
        return BRG_EXIT_FAILURE;
    }
    return -1;
}

/* The learning rate of a step: constant, or PyTorch's CosineAnnealingLR
 * (eta_min 0) stepped per batch. */
static double lr_at(const train_run *r, int64_t epoch, int64_t step)
{
    const train_args *a = &r->a;
    if (!a->cosine) return a->lr;
    const double pi = 3.14159265358979323846;
    const double t = (double)((epoch - 1) * r->steps + step) / (double)(r->steps * a->epochs);
    return a->lr * 0.5 * (1.0 + cos(pi * t));
}

/* Save a checkpoint of the run at pos (with --checkpoint); -1 to go on,
 * else the exit code. */
static int save_checkpoint(train_run *r, const train_position *pos)
{
    if (!r->a.checkpoint_dir) return -1;
    char *run_json = brg_train_run_json(&r->a, &r->data, r->steps, pos);
    if (!run_json) {
        fprintf(stderr, "brigade train: checkpoint: out of host memory\n");
        return BRG_EXIT_FAILURE;
    }
    char path[4096] = "", left[1024] = "";
    const brg_status st = brg_checkpoint_save(r->pipeline, r->a.checkpoint_dir, run_json, (int)r->a.keep, path,
                                              sizeof path, left, sizeof left);
    free(run_json);
    brg_cli_watchdog_pet();
    if (st != BRG_OK) {
        const int rc = brg_cli_fail("train: checkpoint", st);
        /* What is kept, and how to go on from it once the cause is mended. */
        const char *from = r->last_checkpoint[0] ? r->a.checkpoint_dir : r->a.resume_dir;
        if (brg_world_rank(brg_cli_world) != 0) return rc;
        fprintf(stderr, "brigade train: stopped after step %lld, unsaved", (long long)brg_pipeline_steps(r->pipeline));
        if (r->last_checkpoint[0]) fprintf(stderr, "; the last checkpoint is %s", r->last_checkpoint);
        else if (from) fprintf(stderr, "; this run has saved none since it resumed from %s", from);
        else fprintf(stderr, "; this run saved no checkpoint to go on from");
        fprintf(stderr, ": mend the cause above (room on the disk, permissions) or give another --checkpoint "
                        "folder, then %s%s", from ? "run the same command with --resume " : "run the command again",
                from ? from : "");
        fprintf(stderr, "\n");
        return rc;
    }
    snprintf(r->last_checkpoint, sizeof r->last_checkpoint, "%s", path);
    /* Not worth stopping the run for: the new checkpoint is saved. */
    if (left[0])
        fprintf(stderr, "\nbrigade train: checkpoint: saved %s, but left older folders in place: %s\n", path, left);
    return -1;
}

/* A signal in the setup (a big model's import, an image folder's scan,
 * planning) ends the run after the phase under way, every rank alike (a
 * collective call at each phase's end): nothing is trained yet, so
 * nothing is saved, and a resume's checkpoints stay as they were. */
static int stop_in_setup(train_run *r)
{
    const int sig = stop_signal();
    if (!sig) return -1;
    brg_cli_exit_agreed = 1;
    if (brg_world_rank(brg_cli_world) == 0) {
        fprintf(stderr, "brigade train: stopped by %s during the setup, before the first step; nothing saved",
                brg_train_signal_name(sig));
        if (r->a.resume_dir) fprintf(stderr, " (%s is as it was)", r->a.resume_dir);
        fprintf(stderr, "\n");
    }
    return 128 + sig;
}

/* Stopped by a signal between steps, or in the evaluation after an epoch's
 * last step (evaluating; pos is then that step's, so the resume evaluates
 * the epoch again): save, say how to go on, and exit 128 + the signal's
 * number. */
static int stop_cleanly(train_run *r, const train_position *pos, int sig, int evaluating)
{
    const int rc = save_checkpoint(r, pos);
    if (rc >= 0) return rc;
    /* Every rank stops here, after the same step and the same save. */
    brg_cli_exit_agreed = 1;
    if (brg_world_rank(brg_cli_world) != 0) return 128 + sig;
    if (evaluating)
        fprintf(stderr, "brigade train: stopped by %s during epoch %lld's evaluation (after step %lld, the "
                        "epoch's last)",
                brg_train_signal_name(sig), (long long)pos->epoch, (long long)brg_pipeline_steps(r->pipeline));
    else
        fprintf(stderr, "brigade train: stopped by %s after step %lld (epoch %lld, step %lld of %lld)",
                brg_train_signal_name(sig), (long long)brg_pipeline_steps(r->pipeline), (long long)pos->epoch,
                (long long)pos->epoch_step, (long long)r->steps);
    if (r->a.checkpoint_dir) {
        fprintf(stderr, "; checkpoint in %s; to go on, run the same command with --resume %s", r->last_checkpoint,
                r->a.checkpoint_dir);
        if (evaluating) fprintf(stderr, " (it begins with epoch %lld's evaluation)", (long long)pos->epoch);
        fprintf(stderr, "\n");
    } else {
        fprintf(stderr, "; nothing saved (give --checkpoint DIR to be able to resume)\n");
    }
    return 128 + sig;
}

/* The test figures of an epoch line (loss_word and acc_word name them), or
 * "-" for each when no label counted (every test pixel the ignore label):
 * figures over nothing read 0, a perfect loss. */
static void print_test_figures(const brg_metrics *test, int pixels, const char *loss_word, const char *acc_word)
{
    const char *acc = pixels ? "pixel acc" : acc_word;
    if (brg_metrics_counted(test) == 0) {
        printf("%s - %s -%s (no test label counted: all are the ignore label)", loss_word, acc,
               pixels ? " mean IoU -" : "");
        return;
    }
    printf("%s %.4f %s %.2f%%", loss_word, brg_metrics_loss(test), acc, 100.0 * brg_metrics_accuracy(test));
    if (pixels) printf(" mean IoU %.4f", brg_metrics_mean_iou(test));
}

/* The evaluation after an epoch failed (unreadable test images, say), its
 * message said, rc its exit code: the epoch's training is saved as after a
 * signal there (pos is its last step, so the resume begins with the
 * evaluation), where it was lost (and a first run's folder deleted). One
 * process only: a collective save after one rank's failure could hang. */
static int keep_unevaluated(train_run *r, const train_position *pos, int rc)
{
    if (!r->a.checkpoint_dir || brg_world_size(brg_cli_world) > 1) return rc;
    const int saved = save_checkpoint(r, pos);
    if (saved >= 0) return saved;
    fprintf(stderr, "brigade train: epoch %lld's training is saved in %s; once its evaluation can run, run the same "
                    "command with --resume %s (it begins with epoch %lld's evaluation)\n",
            (long long)pos->epoch, r->last_checkpoint, r->a.checkpoint_dir, (long long)pos->epoch);
    return rc;
}

/* The rest of epoch pos->epoch from step pos->epoch_step, with the
 * progress display, then the test set; pos moves on to the next epoch.
 * -1 to go on, else the exit code. */
static int train_epoch(train_run *r, brg_progress *prog, train_position *pos)
{
    const train_args *a = &r->a;
    const int64_t epoch = pos->epoch;
    const uint64_t epoch_seed = brg_cli_mix64(a->seed ^ brg_cli_mix64((uint64_t)epoch));
    brg_status st = brg_shuffle_indices(r->order, r->data.train_count, epoch_seed);
    /* The augmentation's seed: another stream of the same epoch. */
    const int feeding = feeds(r->pipeline);
    /* The order this rank reads: with replicas its replica's share of
     * every step's samples (each sample's augmentation follows the
     * sample, not its place, so the shares are the whole batch's). */
    const int64_t share = r->data.train_batch;
    int64_t *order = r->order;
    if (r->replicas > 1 && feeding) {
        for (int64_t s = 0; s < r->steps; s++)
            for (int64_t k = 0; k < share; k++)
                r->share_order[s * share + k] = r->order[s * a->batch + brg_pipeline_share_sample(r->pipeline, k)];
        order = r->share_order;
    }
    if (st == BRG_OK && feeding)
        st = brg_train_data_start_epoch(&r->data, order, r->steps * share, pos->epoch_step,
                                        brg_cli_mix64(epoch_seed ^ 0x4155474d454e54ULL));
    if (st != BRG_OK) return brg_cli_fail("train", st);
    brg_progress_begin_epoch(prog, (int)epoch, r->steps);
    const int64_t seen_before = pos->seen; /* by the run this one resumes */
    double waited = 0.0;
    int64_t skipped = 0;
    for (int64_t step = pos->epoch_step; step < r->steps; step++) {
        double loss = 0.0, wait = 0.0;
        int64_t correct = 0, n = 0;
        const float *images = NULL;
        const int32_t *labels = NULL;
        if (feeding) st = brg_loader_next(r->data.train_loader, &images, &labels, &n, &wait);
        waited += wait;
        if (st == BRG_OK)
            st = brg_pipeline_step(r->pipeline, (float)lr_at(r, epoch, step), images, labels, (int)share, &loss,
                                   &correct);
        if (brg_train_data_new_bad(&r->data)) brg_progress_clear(prog);
        skipped += brg_train_data_report_bad("train", &r->data);
        if (st == BRG_OK && !isfinite(loss)) st = BRG_ERR_NUMERIC;
        if (st != BRG_OK) {
            brg_progress_clear(prog);
            if (st != BRG_ERR_NUMERIC) return fail_hint("train", st, a, r->model, r->total_capacity, r->n_devices);
            fprintf(stderr, "brigade train: at epoch %lld step %lld: %s\nbrigade train: training diverged; "
                            "try a smaller --lr than %g\n",
                    (long long)epoch, (long long)step + 1,
                    brg_last_error()[0] ? brg_last_error() : "the loss is not finite", a->lr);
            return BRG_EXIT_FAILURE;
        }
        const int64_t counted = brg_pipeline_counted_labels(r->pipeline);
        pos->epoch_step = step + 1;
        pos->loss_sum += loss * (double)counted;
        pos->correct += correct;
        pos->seen += a->batch;
        pos->counted += counted;
        for (int d = 0; d < r->n_devices; d++) {
            brg_memory_report mr;
            r->peaks[d] = brg_pipeline_memory(r->pipeline, d, &mr) == BRG_OK ? mr.peak_bytes : 0;
        }
        const double elapsed = brg_progress_now() - prog->start;
        brg_progress_state ps = {step + 1, pos->seen - seen_before, ratio(pos->loss_sum, pos->counted),
                                 ratio((double)pos->correct, pos->counted), r->n_devices, r->peaks, r->caps,
                                 elapsed > 0.0 ? waited / elapsed : 0.0};
        brg_progress_update(prog, &ps);
        brg_cli_watchdog_pet();
        /* Ranks stop together, after the same step. */
        const int sig = stop_signal();
        if (sig) {
            brg_progress_clear(prog);
            return stop_cleanly(r, pos, sig, 0);
        }
        if (a->checkpoint_every && brg_pipeline_steps(r->pipeline) % a->checkpoint_every == 0 && step + 1 < r->steps) {
            const int rc = save_checkpoint(r, pos);
            if (rc >= 0) {
                brg_progress_clear(prog);
                return rc;
            }
        }
    }
    const double seconds = brg_progress_now() - prog->start;
    brg_progress_clear(prog);
    brg_metrics *test = NULL;
    int sig = 0;
    st = evaluate(r->pipeline, a, r->model, &r->data, r->test_count, &test, &sig);
    if (st != BRG_OK || sig) brg_metrics_destroy(test);
    if (st != BRG_OK)
        return keep_unevaluated(r, pos, fail_hint("train: evaluation", st, a, r->model, r->total_capacity,
                                                  r->n_devices));
    /* pos is still the epoch's last step: saved so, the resume evaluates
     * (as after a stop between that step and the evaluation). */
    if (sig) return stop_cleanly(r, pos, sig, 1);
    if (!isfinite(brg_metrics_loss(test))) {
        /* Every rank's figures are the same sums: all stop here. Not saved:
         * the state overflowed (its training loss stayed finite). */
        brg_metrics_destroy(test);
        fprintf(stderr, "brigade train: epoch %lld: the test loss is not finite, though the training loss was: "
                        "the weights or BatchNorm's running statistics overflow; training diverged: try a smaller "
                        "--lr than %g%s%s%s\n",
                (long long)epoch, a->lr, r->last_checkpoint[0] ? " (the last checkpoint is " : "",
                r->last_checkpoint, r->last_checkpoint[0] ? ")" : "");
        return BRG_EXIT_FAILURE;
    }
    /* With replicas each one's feeder read its own share of the training
     * samples: the skipped ones of every rank (the test set is read whole
     * by each, so its skips are this rank's). */
    double train_skipped = (double)skipped;
    if (r->replicas > 1 && (st = brg_world_sum(brg_cli_world, &train_skipped, 1)) != BRG_OK)
        return brg_cli_fail("train", st);
    skipped = (int64_t)train_skipped + brg_train_data_report_bad("train", &r->data);
    const int64_t seen_here = pos->seen - seen_before;
    const int pixels = brg_model_label_count(r->model) > 1;
    printf("epoch %lld: train loss %.4f %s %.2f%%, ", (long long)epoch, ratio(pos->loss_sum, pos->counted),
           pixels ? "pixel acc" : "acc", 100.0 * ratio((double)pos->correct, pos->counted));
    print_test_figures(test, pixels, "test loss", "acc");
    printf(", %.1f s (%.0f samples/s)%s", seconds, seconds > 0.0 ? (double)seen_here / seconds : 0.0,
           seen_before ? " (resumed)" : "");
    brg_metrics_destroy(test);
    if (waited > 0.05 * seconds) printf(", %.0f%% of it waiting for data", 100.0 * waited / seconds);
    if (skipped) printf(", %lld bad images skipped", (long long)skipped);
    printf("\n");
    fflush(stdout);
    const train_position next = {epoch + 1, 0, 0.0, 0, 0, 0};
    *pos = next;
    const int rc = save_checkpoint(r, pos);
    if (rc >= 0) return rc;
    /* After the last epoch there is nothing left to stop (every rank
     * still asks: a collective call). */
    sig = stop_signal();
    return sig && pos->epoch <= r->a.epochs ? stop_cleanly(r, pos, sig, 0) : -1;
}

/* After a check that every rank made with its own view of the data (a
 * folder seen through each node's link), rc being this rank's verdict (-1
 * to go on): one refusal ends every rank (a collective call), the others
 * with the refusers' exit code when they agree on it, so that mpirun's is
 * it. Returns the verdict to act on. */
static int refuse_together(const char *what, int rc)
{
    double refused[2] = {rc >= 0, rc == BRG_EXIT_USAGE};
    const brg_status st = brg_world_sum(brg_cli_world, refused, 2);
    if (st != BRG_OK) return brg_cli_fail(what, st);
    if (refused[0] > 0 && rc < 0) {
        fprintf(stderr, "brigade %s: rank %d could go on, but another rank refused (its message says why)\n", what,
                brg_world_rank(brg_cli_world));
        rc = refused[1] == refused[0] ? BRG_EXIT_USAGE : BRG_EXIT_FAILURE;
    }
    if (refused[0] > 0) brg_cli_exit_agreed = 1; /* every rank ends here */
    return rc;
}

/* The checkpoint at path (manifest m) against the run's model: -1 when
 * it is the same, else BRG_EXIT_USAGE after a message saying how to give
 * the checkpoint's. */
static int other_model(train_run *r, const char *path, const brg_checkpoint_manifest *m)
{
    const brg_status st = brg_checkpoint_check_model(r->model, path, m);
    if (st == BRG_OK) return -1;
    const int rc = brg_cli_fail(what(r, r->a.resume_dir ? "--resume" : "--weights"), st);
    if (st == BRG_ERR_INVALID_ARGUMENT)
        fprintf(stderr, "brigade %s: give the model file, or a zoo model's --input, --classes and --width-mult, that "
                        "the checkpoint was made with\n", r->cmd);
    return rc;
}

/* The resume's position in pos (read from checkpoint m at path) against
 * its step count, and whether anything is left to do: -1 to go on, else
 * the exit code (0: the run is done). */
static int resume_point_check(const train_run *r, const char *path, const brg_checkpoint_manifest *m,
                              const train_position *pos)
{
    if (pos->epoch_step > r->steps || m->steps != (pos->epoch - 1) * r->steps + pos->epoch_step) {
        fprintf(stderr, "brigade train: --resume: %s records step %lld of epoch %lld in epochs of %lld steps, and %lld "
                        "optimizer steps done, which do not agree (an edited or damaged manifest.json)\n",
                path, (long long)pos->epoch_step, (long long)pos->epoch, (long long)r->steps, (long long)m->steps);
        return BRG_EXIT_FAILURE;
    }
    if (pos->epoch > r->a.epochs) {
        /* Done is done: a script that resumes until it succeeds stops. */
        printf("resume   %s is the end of the run (epoch %lld of %lld done); nothing to do\n", path,
               (long long)pos->epoch - 1, (long long)r->a.epochs);
        return BRG_EXIT_OK;
    }
    return -1;
}

/* The --weights or --init-weights file against the run's model, by its
 * header alone: another model's file, or a truncated one, is refused
 * before the data and the plan rather than after them. */
static int weights_fit_model(train_run *r, const char *option)
{
    const brg_status st = brg_model_check_weights_file(r->model, r->a.init_weights);
    return st == BRG_OK ? -1 : brg_cli_fail(what(r, option), st);
}

/* --init-weights or --resume; fills pos. -1 to go on, else the exit code. */
static int start_from(train_run *r, train_position *pos)
{
    const train_args *a = &r->a;
    const train_position first = {1, 0, 0.0, 0, 0, 0};
    *pos = first;
    brg_cli_watchdog_phase("loading the weights");
    if (a->init_weights) {
        const brg_status st = brg_pipeline_load_state(r->pipeline, a->init_weights, BRG_STATE_WEIGHTS);
        if (st != BRG_OK) return brg_cli_fail("train: --init-weights", st);
        printf("weights  from %s\n", a->init_weights);
        return -1;
    }
    if (!a->resume_dir) return -1;
    char path[4096], skipped[2048];
    /* The manifest is read and checked once, there, for the settings and
     * the load (which checks the files against its sums as it reads them). */
    brg_checkpoint_manifest m;
    brg_status st = brg_checkpoint_latest_read(a->resume_dir, path, sizeof path, &m, skipped, sizeof skipped);
    /* Under mpirun every rank looks for itself: one folder, shared. */
    if (st == BRG_OK) st = brg_world_agree(brg_cli_world, path, strlen(path) + 1, "the newest checkpoint (is the "
                                           "--resume folder one shared file system's, the same for every rank?)");
    if (st != BRG_OK) {
        brg_checkpoint_manifest_free(&m);
        return brg_cli_fail("train: --resume", st);
    }
    if (skipped[0])
        fprintf(stderr, "brigade train: --resume: passed over newer checkpoints that are not complete: %s\n", skipped);
    int rc = brg_train_resume_check(a, &r->data, path, m.run_json, r->steps, pos);
    /* Another model's checkpoint is refused before anything is said of it
     * (a finished one was "the end of the run"). */
    if ((rc = refuse_together("train: --resume", rc)) < 0) rc = refuse_together("train: --resume",
                                                                               other_model(r, path, &m));
    if (rc < 0) rc = resume_point_check(r, path, &m, pos);
    if (rc < 0 && (st = brg_checkpoint_load_listed(r->pipeline, path, &m)) != BRG_OK)
        rc = brg_cli_fail("train: --resume", st);
    brg_checkpoint_manifest_free(&m);
    if (rc >= 0) return rc;
    printf("resume   from %s: epoch %lld, after step %lld of %lld (%lld optimizer steps done)\n", path,
           (long long)pos->epoch, (long long)pos->epoch_step, (long long)r->steps,
           (long long)brg_pipeline_steps(r->pipeline));
    fflush(stdout);
    return -1;
}

/* The plan dry-ran these programs, so every measured peak must be the
 * planned one to the byte; a difference is a bug worth failing on. */
static int compare_peaks(const train_run *r)
{
    char b1[32], b2[32];
    int differ = 0;
    if (brg_pipeline_steps(r->pipeline) == r->first_step) {
        /* A resume with only its epoch's evaluation left: the plan's peak
         * is a training step's. */
        printf("peaks    no training step ran, nothing to compare with the plan\n");
        return BRG_EXIT_OK;
    }
    for (int d = 0; d < r->n_devices; d++) {
        const brg_plan_stage *ps = brg_plan_get_stage(r->plan, d);
        brg_memory_report mr;
        const size_t peak = brg_pipeline_memory(r->pipeline, d, &mr) == BRG_OK ? mr.peak_bytes : 0;
        char name[64];
        printf("device %d %s: peak %zu bytes measured, %zu planned: %s (%s of %s)\n", d,
               brg_device_spec_name(&r->specs[d], d, name, sizeof name),
               peak, ps->peak_bytes, peak == ps->peak_bytes ? "equal" : "DIFFERENT",
               brg_format_bytes(peak, b1, sizeof b1), brg_format_bytes(r->caps[d], b2, sizeof b2));
        if (peak != ps->peak_bytes) {
            fprintf(stderr, "brigade train: device %d peaked at %zu bytes, but its plan said %zu\n", d, peak,
                    ps->peak_bytes);
            differ++;
        }
    }
    if (differ) {
        fprintf(stderr, "brigade train: measured peaks differ from the planned ones on %d of %d devices (a bug: "
                        "please report it)\n", differ, r->n_devices);
        return BRG_EXIT_FAILURE;
    }
    printf("peaks    measured = planned on %s, to the byte\n", r->n_devices == 1 ? "the device" : "every device");
    return BRG_EXIT_OK;
}

/* A checkpoint folder among the data's class folders (DIR's own without
 * train/, or those of DIR/train and DIR/val) would become a class of the
 * next run that reads them, its checkpoints' folders that class's images'.
 * -1 to go on, else the exit code after a message. */
static int checkpoint_apart_from_data(const train_args *a)
{
    if (!a->checkpoint_dir || a->data != DATA_FOLDER || brg_train_data_is_segmentation(a)) return -1;
    char train[4200], val[4200];
    const int split = brg_train_data_split_dirs(a->data_path, train, val, sizeof train);
    const char *roots[2] = {split ? train : a->data_path, split ? val : NULL};
    for (int i = 0; i < 2; i++) {
        if (!roots[i] || !brg_cli_path_within(a->checkpoint_dir, roots[i])) continue;
        fprintf(stderr, "brigade train: %s %s lies in %s, whose folders are the data's classes: it would be read as "
                        "a class, its checkpoints as that class's images; give a folder outside it\n",
                a->checkpoint_dir == a->resume_dir ? "--resume" : "--checkpoint", a->checkpoint_dir, roots[i]);
        return BRG_EXIT_USAGE;
    }
    return -1;
}

/* --checkpoint DIR inside another checkpoint (DIR a step-N folder, or in
 * one): its files would mix with that checkpoint's, which --keep would
 * then no longer prune. -1 to go on, else the exit code after a message. */
static int checkpoint_apart_from_checkpoints(const train_args *a)
{
    if (!a->checkpoint_dir) return -1;
    char inside[4200], step[4200];
    snprintf(inside, sizeof inside, "%s/x", a->checkpoint_dir);
    if (brg_checkpoint_contains(inside)) snprintf(step, sizeof step, "%s", a->checkpoint_dir);
    else if (brg_checkpoint_contains(a->checkpoint_dir) && strrchr(a->checkpoint_dir, '/'))
        snprintf(step, sizeof step, "%.*s", (int)(strrchr(a->checkpoint_dir, '/') - a->checkpoint_dir),
                 a->checkpoint_dir);
    else if (brg_checkpoint_contains(a->checkpoint_dir)) snprintf(step, sizeof step, ".");
    else return -1;
    fprintf(stderr, "brigade train: %s %s is in the checkpoint %s, where this run's files would mix with its own; "
                    "give the folder that holds the step-* folders (to go on from them, --resume), or another "
                    "folder\n",
            a->checkpoint_dir == a->resume_dir ? "--resume" : "--checkpoint", a->checkpoint_dir, step);
    return BRG_EXIT_USAGE;
}

/* With --checkpoint DIR: hold DIR for this run (on the rank that writes),
 * and refuse a DIR holding another run's checkpoints unless this run goes
 * on from them (--resume DIR): a fresh run would take their steps for its
 * own and prune them. -1 to go on, else the exit code, on every rank. */
static int hold_checkpoint_folder(train_run *r)
{
    const train_args *a = &r->a;
    if (!a->checkpoint_dir) return -1;
    int rc = -1;
    struct stat sb;
    /* Rank 0 decides alone and every rank meets in the collective below (a
     * rank that cannot see the folder must not skip it). A --resume folder
     * that is not there fails the resume with its own message; locking
     * would make it. */
    if (brg_world_rank(brg_cli_world) == 0 && !(a->resume_dir && stat(a->resume_dir, &sb) != 0)) {
        int lock = -1, count = 0;
        int64_t newest = -1;
        char note[1024];
        /* NULL without the memory: the folders made then stay */
        r->made = calloc(strlen(a->checkpoint_dir) + 1, 1);
        brg_status st = brg_checkpoint_lock(a->checkpoint_dir, &lock, note, sizeof note, r->made);
        if (st == BRG_OK) r->checkpoint_lock = lock + 1;
        if (st != BRG_OK) { /* another run's, if made meanwhile */
            free(r->made);
            r->made = NULL;
        }
        if (st == BRG_OK && note[0]) fprintf(stderr, "brigade train: warning: %s\n", note);
        if (st == BRG_OK && !brg_cli_same_path(a->resume_dir, a->checkpoint_dir))
            st = brg_checkpoint_count(a->checkpoint_dir, &count, &newest);
        /* The folder is --resume's when --checkpoint is not given. */
        if (st != BRG_OK)
            rc = brg_cli_fail(a->checkpoint_dir == a->resume_dir ? "train: --resume" : "train: --checkpoint", st);
        else if (count) {
            char path[4096], skipped[2048];
            if (brg_checkpoint_latest(a->checkpoint_dir, path, sizeof path, skipped, sizeof skipped) == BRG_OK)
                fprintf(stderr,
                        "brigade train: --checkpoint %s holds checkpoints already (%d, the newest step-%010lld), "
                        "which this run would take for its own: to continue their run give --resume %s; to start "
                        "afresh give another folder, or remove them\n",
                        a->checkpoint_dir, count, (long long)newest, a->checkpoint_dir);
            else /* nothing to resume from: only removing them helps */
                fprintf(stderr,
                        "brigade train: --checkpoint %s holds step-* folders (%d, the newest step-%010lld), none of "
                        "them a complete checkpoint to resume from (%s): to start afresh give another folder, or "
                        "remove them\n",
                        a->checkpoint_dir, count, (long long)newest, brg_last_error());
            rc = BRG_EXIT_USAGE;
        }
    }
    /* Every rank ends with rank 0's exit status, so that mpirun's is it. */
    double verdict = rc >= 0 ? rc + 1 : 0;
    const brg_status agreed = brg_world_sum(brg_cli_world, &verdict, 1);
    if (agreed != BRG_OK) return brg_cli_fail("train: --checkpoint", agreed);
    if (verdict > 0 && rc < 0) rc = (int)verdict - 1; /* rank 0 said why */
    if (verdict > 0) brg_cli_exit_agreed = 1;
    return rc;
}

static int run_training(train_run *r)
{
    int rc;
    r->o = brg_plan_options_init();
    if (!brg_cli_plan_apply("train", &r->a.plan, brg_world_size(brg_cli_world), &r->o)) return BRG_EXIT_USAGE;
    if ((rc = brg_train_ranks_agree("train", &r->a)) >= 0) return rc;
    /* Before the data and the plan, which take long on a large model; once
     * the ranks agree on the path, so that a file one rank lacks ends all
     * alike. */
    if (r->a.init_weights) {
        rc = refuse_together("train", brg_train_check_weights_file("train", "--init-weights", r->a.init_weights));
        if (rc >= 0) return rc;
    }
    if ((rc = checkpoint_apart_from_data(&r->a)) >= 0) return rc;
    if ((rc = checkpoint_apart_from_checkpoints(&r->a)) >= 0) return rc;
    if ((rc = hold_checkpoint_folder(r)) >= 0) return rc;
    if ((rc = load_devices_and_model(r)) >= 0 || (rc = stop_in_setup(r)) >= 0) return rc;
    if (r->a.init_weights && (rc = refuse_together("train", weights_fit_model(r, "--init-weights"))) >= 0) return rc;
    if ((rc = load_data(r)) >= 0 || (rc = stop_in_setup(r)) >= 0) return rc;
    if ((rc = make_plan(r)) >= 0 || (rc = stop_in_setup(r)) >= 0) return rc;
    print_settings(r);
    if ((rc = make_pipeline(r)) >= 0 || (rc = stop_in_setup(r)) >= 0) return rc;
    train_position pos;
    if ((rc = start_from(r, &pos)) >= 0) return rc;
    r->first_step = brg_pipeline_steps(r->pipeline);
    brg_progress prog;
    brg_progress_init(&prog, (int)r->a.epochs);
    brg_cli_watchdog_begin();
    brg_cli_stderr_compare(); /* the setup's warnings, once */
    rc = -1;
    while (rc < 0 && pos.epoch <= r->a.epochs) rc = train_epoch(r, &prog, &pos);
    if (rc >= 0) return rc;
    rc = compare_peaks(r);
    /* The output's reader left once the run was done: everything is
     * saved, but what the run printed did not all arrive (the flush is
     * where a pipe's last lines meet it). */
    fflush(stdout);
    if (brg_train_stop_signal() == SIGPIPE) {
        fprintf(stderr, "brigade train: the run is done, but its output's reader is gone (SIGPIPE): some of what it "
                        "printed did not arrive\n");
        rc = 128 + SIGPIPE;
    }
    return rc;
}

/* ---- brigade eval: the same setup, then the test set ---- */

static void usage_eval(FILE *out)
{
    fprintf(out,
            "usage: brigade eval MODEL --weights W.safetensors --data fashion-mnist|synthetic|DIR [options]\n"
            "\n"
            "Evaluate MODEL with the weights in W (from 'brigade model export --weights' or a\n"
            "checkpoint's weights.safetensors) on the test samples, across the devices of\n"
            "--devices, planned as 'brigade train' plans them: prints the mean loss and the\n"
            "top-1 and top-5 accuracy, or for a per-pixel model (unet) the pixel accuracy,\n"
            "the mean IoU and each class's IoU (BatchNorm on its running statistics, no\n"
            "dropout).\n"
            "\n"
            "options:\n"
            "  --weights W           the weights (required)\n"
            "  --data SET            fashion-mnist (its 10,000 test images), synthetic, or a\n"
            "                        folder as for train (its val/ images, or the part\n"
            "                        --val-split holds out with the same --seed)\n"
            "  --data-dir DIR        where the Fashion-MNIST files are\n"
IMAGE_OPTIONS_HELP
            "  --devices SPEC        the devices, e.g. 1x512MiB or 4x11MiB (default 1x1GiB)\n"
            "  --batch B             samples per piece the plan is made for (default 64, or a\n"
            "                        checkpoint's training's when smaller; planned as for\n"
            "                        training, so give the training's batch when 64 does\n"
            "                        not fit)\n"
            "  --microbatches M      split each piece into M micro-batches\n"
            "  --micro-batch S       the same as --microbatches B/S (S divides B)\n"
            "  --limit N             evaluate N test samples only: the first N, or of image folders N\n"
            "                        spread evenly through every class\n"
            "  --seed S              synthetic data, and the part --val-split holds out\n"
            "                        (default 1)\n"
            "  --watchdog S          under mpirun: end the job when no piece has finished\n"
            "                        for S seconds, or 10 times the longest gap so far if\n"
            "                        longer (default 300, 0: never)\n"
            "  --watchdog-setup S    under mpirun: end the job when a setup phase takes\n"
            "                        longer than S seconds on a rank, as for train\n"
            "                        (default 3600, or --watchdog if longer; 0: no limit)\n"
            "  --input CxHxW, --classes N, --width-mult F, --cuts fine|blocks\n"
            "                        zoo models and cuts, as for train\n"
            "  --schedule, --chunks, --split, --recompute, --headroom, --device-speed,\n"
            "  --link-speed, --profile, --replicas, --sync-bn\n"
            "                        planner settings, as for train\n"
            "  -h, --help            show this help\n"
            "\n"
            "With the weights of a checkpoint (DIR/step-N/weights.safetensors), --resize,\n"
            "--mean and --std default to the training's, --batch too when smaller (and no\n"
            "micro-batches are given), and for the same data --seed and --val-split too, so\n"
            "that the test samples are the ones the training held out.\n"
            "\n"
            "Exit status: 0 evaluated; 1 the work failed (weights that do not fit the model,\n"
            "the plan does not fit, the data cannot be read); 2 the command line is wrong\n"
            "(MODEL a file of another kind too: an image, a PyTorch file), or its data does\n"
            "not fit it (other classes than the model's or the training's); 129, 130, 141\n"
            "or 143 stopped by SIGHUP, SIGINT, SIGPIPE or SIGTERM during the evaluation\n"
            "(after the piece under way, no figures printed).\n"
            "\n"
            "example:\n"
            "  brigade eval fmnist-cnn --weights ckpt/step-0000001874/weights.safetensors \\\n"
            "      --data fashion-mnist --devices 4x11MiB\n");
}

static const struct option eval_opts[] = {
    {"weights", required_argument, NULL, OPT_WEIGHTS},
    {"data", required_argument, NULL, OPT_DATA},
    {"data-dir", required_argument, NULL, OPT_DATA_DIR},
    {"devices", required_argument, NULL, OPT_DEVICES},
    {"batch", required_argument, NULL, OPT_BATCH},
    {"micro-batch", required_argument, NULL, OPT_MICRO_BATCH},
    {"microbatches", required_argument, NULL, OPT_MICROBATCHES},
    {"seed", required_argument, NULL, OPT_SEED},
    {"limit", required_argument, NULL, OPT_LIMIT},
    {"watchdog", required_argument, NULL, OPT_WATCHDOG},
    {"watchdog-setup", required_argument, NULL, OPT_WATCHDOG_SETUP},
    IMAGE_OPTIONS,
    BRG_CLI_ZOO_OPTIONS,
    BRG_CLI_PLAN_OPTIONS,
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

static int parse_eval(int argc, char **argv, train_args *a)
{
    args_init(a);
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", eval_opts, NULL)) != -1) {
        if (c == 'h') {
            usage_eval(stdout);
            return BRG_EXIT_OK;
        }
        if (c == OPT_WEIGHTS) {
            a->init_weights = optarg;
            continue;
        }
        const int rc = shared_option("eval", c, a);
        if (rc == -2) return brg_cli_bad_option("eval", c, argv);
        if (rc >= 0) return rc;
    }
    if (optind >= argc) {
        fprintf(stderr, "brigade eval: which model? (a zoo name or a JSON model file; see 'brigade eval --help')\n");
        return BRG_EXIT_USAGE;
    }
    a->spec = argv[optind++];
    if (optind < argc) {
        fprintf(stderr, "brigade eval: unexpected argument '%s'\n", argv[optind]);
        return BRG_EXIT_USAGE;
    }
    if (!a->init_weights) {
        fprintf(stderr, "brigade eval: which weights? give --weights W.safetensors\n");
        return BRG_EXIT_USAGE;
    }
    const int data = check_data("eval", a);
    if (data >= 0) return data;
    if (a->micro_batch && a->micro_batches) {
        fprintf(stderr, "brigade eval: give --microbatches or --micro-batch, not both\n");
        return BRG_EXIT_USAGE;
    }
    if (a->micro_batch) a->micro_batches = a->micro_batch <= a->batch && a->batch % a->micro_batch == 0
                                               ? a->batch / a->micro_batch
                                               : -1;
    if (a->micro_batches < 0 || (a->micro_batches && a->batch % a->micro_batches)) {
        fprintf(stderr, "brigade eval: the micro-batches do not divide --batch %lld equally\n", (long long)a->batch);
        return BRG_EXIT_USAGE;
    }
    return -1;
}

/* A segmentation model's IoU per class, eight classes a line; "-" for a
 * class neither labelled nor predicted. */
static void print_class_iou(const brg_metrics *m, int64_t classes)
{
    for (int64_t k = 0; k < classes; k++) {
        if (k % 8 == 0) printf("%sIoU      ", k ? "\n" : "");
        const double iou = brg_metrics_class_iou(m, k);
        if (iou < 0.0) printf(" %3lld: -     ", (long long)k);
        else printf(" %3lld: %.4f", (long long)k, iou);
    }
    printf("\n");
}

static int run_eval(train_run *r)
{
    int rc;
    if ((rc = brg_train_ranks_agree("eval", &r->a)) >= 0) return rc;
    /* as train's --init-weights */
    if ((rc = refuse_together("eval", brg_train_check_weights_file("eval", "--weights", r->a.init_weights))) >= 0)
        return rc;
    if ((rc = brg_eval_read_checkpoint(&r->a, &r->weights_manifest, &r->weights_listed)) >= 0) return rc;
    const brg_checkpoint_manifest *man = r->weights_listed ? &r->weights_manifest : NULL;
    /* and again with what each rank took from the checkpoint */
    if ((rc = brg_eval_take_training_settings(&r->a, man)) >= 0) return rc;
    if ((rc = brg_train_ranks_agree("eval", &r->a)) >= 0) return rc;
    const int64_t limit = r->a.limit;
    r->a.limit = 0; /* --limit counts test samples here */
    r->o = brg_plan_options_init();
    if (!brg_cli_plan_apply("eval", &r->a.plan, brg_world_size(brg_cli_world), &r->o)) return BRG_EXIT_USAGE;
    if ((rc = load_devices_and_model(r)) >= 0) return rc;
    char folder[4200];
    brg_train_weights_folder(r->a.init_weights, folder, sizeof folder);
    if (man && (rc = refuse_together("eval", other_model(r, folder, man))) >= 0) return rc;
    if ((rc = refuse_together("eval", weights_fit_model(r, "--weights"))) >= 0) return rc;
    if ((rc = load_data(r)) >= 0) return rc;
    if ((rc = refuse_together("eval", brg_eval_check_classes(&r->a, &r->data, man))) >= 0) return rc;
    if (limit && limit < r->test_count) r->test_count = limit;
    if ((rc = make_plan(r)) >= 0) return rc;
    if ((rc = make_pipeline(r)) >= 0) return rc;
    brg_cli_watchdog_phase("loading the weights");
    /* checked against the manifest read above, not read again */
    const brg_status st = brg_pipeline_load_state_listed(r->pipeline, r->a.init_weights, BRG_STATE_WEIGHTS, man);
    if (st != BRG_OK) {
        brg_cli_fail("eval: --weights", st);
        return BRG_EXIT_FAILURE;
    }
    const double t0 = brg_progress_now();
    brg_metrics *m = NULL;
    brg_cli_watchdog_begin();
    brg_cli_stderr_compare(); /* the setup's warnings, once */
    /* Caught only now: a signal in the setup ends it at once, as ever; in
     * the evaluation, which may take minutes, every rank stops after the
     * same piece (and a script's background job, which ignores SIGINT,
     * stops too). */
    brg_train_catch_signals();
    int sig = 0;
    const brg_status e = evaluate(r->pipeline, &r->a, r->model, &r->data, r->test_count, &m, &sig);
    const int64_t skipped = brg_train_data_report_bad("eval", &r->data);
    if (e != BRG_OK || sig) brg_metrics_destroy(m);
    if (e != BRG_OK) return fail_hint("eval", e, &r->a, r->model, r->total_capacity, r->n_devices);
    if (sig) {
        brg_cli_exit_agreed = 1; /* every rank stopped after the same piece */
        if (brg_world_rank(brg_cli_world) == 0)
            fprintf(stderr, "brigade eval: stopped by %s during the evaluation, before its figures; nothing to "
                            "save: run the command again to evaluate\n", brg_train_signal_name(sig));
        return 128 + sig;
    }
    const double count = (double)r->test_count, seconds = brg_progress_now() - t0;
    printf("eval     %s on %lld test sample%s (%s): ", r->a.init_weights, (long long)r->test_count,
           r->test_count == 1 ? "" : "s", r->data.name);
    if (brg_metrics_counted(m) == 0) /* figures over nothing would read 0, a perfect loss */
        printf("loss -, %s (no test label counted: all are the ignore label)",
               brg_model_label_count(r->model) > 1 ? "pixel accuracy -, mean IoU -" : "top-1 -, top-5 -");
    else if (brg_model_label_count(r->model) > 1)
        printf("loss %.4f, pixel accuracy %.2f%%, mean IoU %.4f", brg_metrics_loss(m), 100.0 * brg_metrics_accuracy(m),
               brg_metrics_mean_iou(m));
    else
        printf("loss %.4f, top-1 %.2f%%, top-5 %.2f%%", brg_metrics_loss(m), 100.0 * brg_metrics_accuracy(m),
               100.0 * brg_metrics_top5(m));
    printf(" (%.1f s, %.0f samples/s)", seconds, seconds > 0.0 ? count / seconds : 0.0);
    if (skipped) printf(", %lld bad images skipped", (long long)skipped);
    printf("\n");
    if (brg_model_label_count(r->model) > 1) print_class_iou(m, brg_model_classes(r->model));
    const int finite = isfinite(brg_metrics_loss(m));
    brg_metrics_destroy(m);
    if (!finite) { /* the figures stand, said, but they mean nothing */
        fprintf(stderr, "brigade eval: the loss is not finite: the weights overflow on this data (the figures above "
                        "mean nothing)\n");
        return BRG_EXIT_FAILURE;
    }
    return BRG_EXIT_OK;
}

/* Parse with parse, run body, free what it held. catch_setup: signals are
 * caught from the setup's start (train: so that a signal there is not lost,
 * as a background job of a script ignores SIGINT until then; the run stops
 * at the setup's next phase, stop_in_setup), not from the command line's
 * parsing (--help to a closed pipe ends as any command's output does). */
static int run_command(const char *cmd, int (*parse)(int, char **, train_args *), int (*body)(train_run *),
                       int catch_setup, int argc, char **argv)
{
    train_run r;
    memset(&r, 0, sizeof r);
    r.cmd = cmd;
    int rc = parse(argc, argv, &r.a);
    if (rc >= 0) return rc;
    if (!brg_cli_watchdog_check(cmd, r.a.watchdog, r.a.watchdog_setup)) return BRG_EXIT_USAGE;
    if (catch_setup) brg_train_catch_signals();
    /* From the start: a rank stopped while the others plan, or make their
     * communicators, leaves them waiting too. */
    brg_cli_watchdog_start(cmd, (double)r.a.watchdog, (double)r.a.watchdog_setup);
    rc = body(&r);
    brg_cli_watchdog_stop();
    train_run_free(&r);
    return rc == BRG_EXIT_OK ? brg_cli_finish_stdout(cmd, rc) : rc;
}

int brg_cmd_eval(int argc, char **argv) { return run_command("eval", parse_eval, run_eval, 0, argc, argv); }
int brg_cmd_train(int argc, char **argv) { return run_command("train", parse_args, run_training, 1, argc, argv); }
