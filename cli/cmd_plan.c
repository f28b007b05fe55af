/* brigade plan: what each device will hold and how the model should be cut,
 * without running anything.
 *
 * Parses the command line, asks the library for a plan (brg_plan_create:
 * the cut search, the dry run of every device, the schedule simulation)
 * and prints it: a table with one row per stage, the predicted bubble and
 * throughput, and the peaks as a bar chart; or the plan as JSON. When
 * nothing fits it says why and exits 2. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "plan_print.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: brigade plan MODEL --devices SPEC --batch B [options] [--json]\n"
            "\n"
            "Plan how MODEL (a zoo name or a JSON model file) trains on an ordered list of\n"
            "devices: cut it into one contiguous block range per device, so that the slowest\n"
            "stage is as fast as possible and every device's program runs in its capacity\n"
            "less a headroom. Each device's peak comes from a dry run of its real program\n"
            "(the same allocations training makes, without memory or kernels), so it is\n"
            "what 'brigade train' will allocate; the dry run also finds a program whose\n"
            "buffers leave the free memory in pieces, so that it needs a larger arena than\n"
            "its peak. Nothing runs on any device.\n"
            "\n"
            "options:\n"
            "  --devices SPEC        the devices in pipeline order, e.g. 7x12GiB or\n"
            "                        2x24GiB,5x12GiB (stage d runs on device d); cuda:0-6@12GiB\n"
            "                        for seven whole GPUs with 12 GiB cards (each the card\n"
            "                        less what CUDA keeps; no GPU needed), cuda:0:7x12GiB for\n"
            "                        virtual GPU devices; under mpirun, cuda:local[:NxSIZE]\n"
            "                        for each rank's own GPU (the list becomes every rank's)\n"
            "  --batch B             samples per optimizer step\n"
            "  --microbatches M      split each batch into M equal micro-batches (M divides B;\n"
            "                        default: the largest divisor of B at most 4 per device\n"
            "                        whose micro-batches every BatchNorm can train on;\n"
            "                        1 on one device)\n"
            "  --schedule KIND       gpipe, 1f1b (default), interleaved, zb-h1, zb-h2, zb-v,\n"
            "                        v-half, v-min (V-shapes: two chunks per device, about\n"
            "                        1x, 1/2 and 1/3 of 1F1B's activations), or auto: try\n"
            "                        every schedule and micro-batch count (divisors of B up\n"
            "                        to 64; only M with --microbatches) and take the\n"
            "                        fastest that fits\n"
            "  --chunks V            interleaved: model chunks per device, 2..16 (default 2)\n"
            "  --recompute MODE      none (default), all (every stage keeps only its inputs and\n"
            "                        rebuilds its activations in the backward), or auto (only\n"
            "                        the stages that need it to fit; the default with\n"
            "                        --schedule auto)\n"
            "  --optimizer KIND      sgd (no state), momentum (SGD with momentum 0.9, one state\n"
            "                        tensor; default) or adam (two)\n"
            "  --headroom F          fraction of each capacity left free, 0..0.9, also as a\n"
            "                        percentage: 0.1 or 10%% (default 5%%)\n"
            "  --split B1,B2,...     cut by hand: each named block ends a stage (the cut goes\n"
            "                        after it), in model order, one name fewer than stages;\n"
            "                        the plan then reports whether each device fits\n"
            "  --device-speed G      time every layer as its FLOPs at G GFLOP/s per device\n"
            "                        (10000 = 10 TFLOP/s, the default for GPUs; give it when\n"
            "                        CPU devices stand in for GPUs). CPU devices default to\n"
            "                        this CPU's speed per layer kind, calibrated once and\n"
            "                        cached (BRG_CPU_CALIBRATION=off: FLOPs at 10 TFLOP/s)\n"
            "  --link-speed G        GB/s between consecutive stages (default 10; 0: free),\n"
            "                        also between replicas\n"
            "  --replicas D          D data-parallel copies of the pipeline: --devices lists\n"
            "                        every replica's devices (D x the stages), --batch is\n"
            "                        split into D shares (--microbatches splits one share);\n"
            "                        the plan is one replica's, its time includes summing\n"
            "                        gradients over the replicas\n"
            "  --sync-bn             with --replicas: BatchNorm synchronized over the replicas\n"
            "                        (each stage holds its widest BatchNorm's sums)\n"
            "  --profile FILE        per-layer times measured on real hardware (JSON, see\n"
            "                        docs/planning.md; 'brigade model profile' writes one):\n"
            "                        they replace the other times for the cuts, the stage\n"
            "                        times and the throughput\n"
            "  --profile auto        measure this model's layers on this CPU first\n"
            "                        (CPU devices; seconds to a minute)\n"
            "  --json                print the plan as JSON\n"
            "  --input CxHxW         zoo models: input size\n"
            "  --classes N           zoo models: number of classes\n"
            "  --width-mult F        zoo models: channel multiplier\n" BRG_CLI_CUTS_HELP
            "  -h, --help            show this help\n"
            "\n"
            "Exit status: 0 the plan fits; 2 nothing fits (the message says why, the\n"
            "fewest devices that would do and the largest batch that fits), the command\n"
            "line is wrong (MODEL a file of another kind too: an image, a PyTorch file) or\n"
            "the --profile file is unreadable or malformed; 1 the model cannot be loaded\n"
            "or planned.\n"
            "\n"
            "examples:\n"
            "  brigade plan inception-v3 --devices 7x12GiB --batch 64\n"
            "  brigade plan inception-v3 --devices cuda:0-6@12GiB --batch 256\n"
            "  brigade plan inception-v3 --devices 2x24GiB,5x12GiB --batch 128 --schedule auto\n"
            "  brigade plan inception-v3 --devices 3x12GiB --batch 32 --split mixed2,mixed7\n"
            "  brigade plan resnet152 --devices 4x8GiB --batch 64 --recompute auto --json\n"
            "  brigade plan inception-v3 --devices 8x12GiB --batch 128 --replicas 2\n");
}

enum {
    OPT_DEVICES = 256,
    OPT_BATCH,
    OPT_MICROBATCHES,
    OPT_OPTIMIZER,
    OPT_JSON,
};

static const struct option plan_opts[] = {
    {"devices", required_argument, NULL, OPT_DEVICES},
    {"batch", required_argument, NULL, OPT_BATCH},
    {"microbatches", required_argument, NULL, OPT_MICROBATCHES},
    {"optimizer", required_argument, NULL, OPT_OPTIMIZER},
    {"json", no_argument, NULL, OPT_JSON},
    BRG_CLI_ZOO_OPTIONS,
    BRG_CLI_PLAN_OPTIONS,
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

#define MAX_BATCH (1 << 24)

typedef struct plan_args {
    const char *spec;
    const char *devices;
    int64_t batch, micro_batches, classes;
    const char *optimizer;
    brg_cli_plan_args plan;     /* the settings brigade train takes too */
    int json;
    brg_zoo_options zoo;
    int zoo_given;
} plan_args;

/* Parse argv; -1 to go on, else the exit code. */
static int parse_args(int argc, char **argv, plan_args *a)
{
    memset(a, 0, sizeof *a);
    a->optimizer = "momentum";
    a->plan = brg_cli_plan_args_init();
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":h", plan_opts, NULL)) != -1) {
        switch (c) {
        case 'h': usage(stdout); return BRG_EXIT_OK;
        case OPT_DEVICES: a->devices = optarg; break;
        case OPT_BATCH:
            if (!brg_cli_parse_int("plan", "--batch", optarg, 1, MAX_BATCH, &a->batch)) return BRG_EXIT_USAGE;
            break;
        case OPT_MICROBATCHES:
            if (!brg_cli_parse_int("plan", "--microbatches", optarg, 1, MAX_BATCH, &a->micro_batches))
                return BRG_EXIT_USAGE;
            break;
        case OPT_OPTIMIZER: a->optimizer = optarg; break;
        case OPT_JSON: a->json = 1; break;
        case BRG_CLI_OPT_CUTS:
            if (!brg_cli_cuts_option("plan", optarg)) return BRG_EXIT_USAGE;
            break;
        case BRG_CLI_OPT_INPUT:
        case BRG_CLI_OPT_CLASSES:
        case BRG_CLI_OPT_WIDTH_MULT:
            if (!brg_cli_zoo_option("plan", c, optarg, &a->zoo)) return BRG_EXIT_USAGE;
            a->zoo_given = 1;
            break;
        default: {
            const int taken = brg_cli_plan_option("plan", c, optarg, &a->plan); /* -1: not a planner setting */
            if (taken < 0) return brg_cli_bad_option("plan", c, argv);
            if (!taken) return BRG_EXIT_USAGE;
            break;
        }
        }
    }
    if (argc - optind < 1) return brg_cli_usage_error("plan", "missing MODEL (a zoo name or a JSON model file)");
    if (argc - optind > 1) return brg_cli_usage_error("plan", "unexpected argument '%s'", argv[optind + 1]);
    a->spec = argv[optind];
    if (!a->devices) {
        fprintf(stderr, "brigade plan: missing --devices (e.g. --devices 7x12GiB or 2x24GiB,5x12GiB)\n");
        return BRG_EXIT_USAGE;
    }
    if (!a->batch) {
        fprintf(stderr, "brigade plan: missing --batch (samples per optimizer step)\n");
        return BRG_EXIT_USAGE;
    }
    return -1;
}

/* Fill the library options from the arguments that need no model. */
static int make_options(const plan_args *a, brg_plan_options *o)
{
    if (!brg_cli_plan_apply("plan", &a->plan, brg_world_size(brg_cli_world), o)) return 0;
    if (strcmp(a->optimizer, "sgd") == 0) {
        o->optimizer = brg_optimizer_config_init(BRG_OPTIMIZER_SGD);
    } else if (strcmp(a->optimizer, "momentum") == 0) {
        o->optimizer = brg_optimizer_config_init(BRG_OPTIMIZER_SGD);
        o->optimizer.momentum = 0.9f;
    } else if (strcmp(a->optimizer, "adam") == 0) {
        o->optimizer = brg_optimizer_config_init(BRG_OPTIMIZER_ADAM);
    } else {
        fprintf(stderr, "brigade plan: unknown --optimizer '%s' (expected sgd, momentum or adam)\n", a->optimizer);
        return 0;
    }
    o->batch = (int)a->batch;
    o->micro_batches = (int)a->micro_batches;
    if (o->micro_batches && !brg_cli_check_divides("plan", "--microbatches", a->micro_batches, a->batch)) return 0;
    return 1;
}

/* A failed write to stdout is a failure, not a success. */
int brg_cmd_plan(int argc, char **argv)
{
    plan_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc >= 0) return rc;
    /* Under mpirun rank 0 prints the plan: one of other options would be
     * planned unseen (a --batch, a device list of its own). */
    if ((rc = brg_cli_ranks_agree_line("plan", argc, argv)) >= 0) return rc;
    brg_plan_options o = brg_plan_options_init();
    if (!make_options(&a, &o)) return BRG_EXIT_USAGE;
    brg_device_spec *specs = calloc(BRG_PLAN_MAX_DEVICES, sizeof *specs);
    if (!specs) {
        fprintf(stderr, "brigade plan: out of host memory\n");
        return BRG_EXIT_FAILURE;
    }
    brg_model *model = NULL;
    brg_plan *plan = NULL;
    int *cuts = NULL;
    int n = 0;
    brg_status st = BRG_OK;
    if (!brg_cli_parse_devices("plan", a.devices, specs, BRG_PLAN_MAX_DEVICES, &n)) {
        rc = BRG_EXIT_USAGE;
        goto exit;
    }
    int64_t share = a.batch;
    if (!brg_cli_plan_replicas("plan", o.replicas, specs, &n, a.batch, &share)) {
        rc = BRG_EXIT_USAGE;
        goto exit;
    }
    o.devices = specs;
    o.n_devices = n;
    o.batch = (int)share;
    rc = brg_cli_load_model("plan", a.spec, &a.zoo, a.zoo_given, &model);
    if (rc >= 0) goto exit;
    if (a.plan.split) {
        if (!brg_cli_parse_split("plan", model, a.plan.split, &cuts, &o.n_split)) {
            rc = BRG_EXIT_USAGE;
            goto exit;
        }
        o.split = cuts;
    }
    st = brg_plan_create(model, &o, &plan);
    if (st != BRG_OK) {
        rc = brg_cli_fail("plan", st);
        /* A profile that cannot be read or does not match is a usage error. */
        if (o.profile_path && (st == BRG_ERR_IO || st == BRG_ERR_FORMAT)) rc = BRG_EXIT_USAGE;
        goto exit;
    }
    const brg_plan_info *in = brg_plan_get_info(plan);
    if (a.json) {
        char *text = NULL;
        st = brg_plan_to_json(plan, &text);
        if (st != BRG_OK) {
            rc = brg_cli_fail("plan", st);
            goto exit;
        }
        printf("%s\n", text);
        brg_free(text);
    } else if (in->partitioned) {
        brg_cli_print_plan(plan, &o);
    }
    if (!in->feasible) {
        fprintf(stderr, "brigade plan: %s\n", in->note && in->note[0] ? in->note : "nothing fits");
        rc = brg_cli_finish_stdout("plan", BRG_EXIT_USAGE);
    } else {
        rc = brg_cli_finish_stdout("plan", BRG_EXIT_OK);
    }
exit:
    brg_plan_destroy(plan);
    brg_model_destroy(model);
    free(cuts);
    free(specs);
    return rc;
}
