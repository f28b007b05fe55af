/* brigade bench: run (or simulate) a matrix of schedules x micro-batch
 * counts and compare them.
 *
 * Three modes share one loop over the combinations, one result row per
 * combination, one ranking, one table and one JSON writer:
 *   measured   MODEL on real (capped) devices: a plan per combination, a
 *              pipeline (brigade/pipeline.h) trained for --steps steps on
 *              seeded synthetic data after --warmup steps, each action's
 *              start and end recorded;
 *   simulated  MODEL --simulate: the same plans, their schedules run
 *              through the simulator with the plan's stage times (the cost
 *              model's, or a --profile's); nothing executes;
 *   unit       --simulate --stages P without a model: every virtual stage
 *              costs F = B = W = 1 (an unsplit backward 2), which compares
 *              the schedules themselves.
 * With --trace DIR every combination also leaves a Chrome trace, an SVG
 * timeline and (with a model) an SVG chart of peak memory per stage. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "plan_print.h"
#include "bench.h"

/* Return the status of call if it failed (the library set the message). */
#define TRY(call)                                                                                  \
    do {                                                                                           \
        brg_status try_status_ = (call);                                                           \
        if (try_status_ != BRG_OK) return try_status_;                                             \
    } while (0)

static void usage(FILE *out)
{
    fprintf(out,
            "usage: brigade bench MODEL --devices SPEC --batch B [options]\n"
            "       brigade bench MODEL --devices SPEC --batch B --simulate [options]\n"
            "       brigade bench --simulate --stages P [--schedules ...] [--microbatches ...]\n"
            "\n"
            "Compare pipeline schedules. For every schedule and micro-batch count, plan\n"
            "MODEL (a zoo name or a JSON model file) on the devices, train it for --steps\n"
            "steps after --warmup steps on seeded synthetic data, and report samples/s,\n"
            "each stage's bubble (idle share of the step, from every action's start and\n"
            "end), peak memory per stage measured and planned, and the measured step\n"
            "next to what the simulator predicts. The table comes last, best first.\n"
            "Under mpirun the measured runs span the ranks, each rank its own devices\n"
            "(mpirun -np 2 brigade bench MODEL --devices 2x64MiB ...); rank 0 reports.\n"
            "\n"
            "With --simulate nothing runs: the schedules go through the simulator with\n"
            "the cost model's stage times (or --profile's measured ones). With --stages\n"
            "and no MODEL every virtual stage costs F = B = W = 1 (an unsplit backward\n"
            "B + W = 2), which compares the schedules themselves.\n"
            "\n"
            "options:\n"
            "  --devices SPEC        the devices in pipeline order, e.g. 4x64MiB (CPU),\n"
            "                        cpu-async:4x64MiB (CPU with streams) or 7x12GiB (stage d\n"
            "                        runs on device d)\n"
            "  --batch B             samples per optimizer step\n"
            "  --schedules LIST      comma-separated: gpipe, 1f1b, interleaved, zb-h1, zb-h2,\n"
            "                        zb-v, v-half, v-min (default: all eight; the V-shapes run\n"
            "                        two chunks per device, down the devices and back up;\n"
            "                        --schedule is the same option)\n"
            "  --microbatches LIST   comma-separated micro-batch counts, each dividing B\n"
            "                        (default: those of 4,8,16 that divide B)\n"
            "  --chunks V            interleaved: model chunks per device, 2..16 (default 2)\n"
            "  --steps N             measured steps per combination (default 3)\n"
            "  --warmup N            steps run first and not measured (default 1)\n"
            "  --simulate            simulate instead of running (--steps, --warmup, --lr,\n"
            "                        --seed, --watchdog and --watchdog-setup, which only a\n"
            "                        run uses, are refused)\n"
            "  --stages P            with --simulate and no MODEL: P stages at unit costs (the\n"
            "                        options of devices, speeds, steps and models are refused)\n"
            "  --profile FILE|auto   per-layer measured times for the plans (as\n"
            "                        'brigade plan --profile'); auto measures them here first\n"
            "  --device-speed G      FLOP-based times at G GFLOP/s per device (default: CPU\n"
            "                        devices this CPU's calibrated speed, GPUs 10000)\n"
            "  --link-speed G        GB/s between stages for the simulation (default 10)\n"
            "  --recompute MODE      none (default), all or auto\n"
            "  --lr X                learning rate of the measured steps (default 0.01)\n"
            "  --seed N              parameters and synthetic data (default 1)\n"
            "  --trace DIR           write per combination NAME.trace.json (Chrome trace:\n"
            "                        chrome://tracing or ui.perfetto.dev), NAME.svg (the\n"
            "                        timeline) and NAME-memory.svg (peaks against capacity);\n"
            "                        refused when one combination's would pass 1 GiB\n"
            "  --json                print the results as JSON instead of the table\n"
            "  --watchdog S          under mpirun: end the job when no step has finished for\n"
            "                        S seconds, or 10 times the longest gap so far if longer\n"
            "                        (a rank stopped or hung; default 300, 0: never)\n"
            "  --watchdog-setup S    under mpirun: end the job when the setup (reading the\n"
            "                        model, planning) takes longer than S seconds on a rank\n"
            "                        (default 3600, or --watchdog if longer; 0: no limit)\n"
            "  --input CxHxW         zoo models: input size\n"
            "  --classes N           zoo models: number of classes\n"
            "  --width-mult F        zoo models: channel multiplier\n" BRG_CLI_CUTS_HELP
            "  -h, --help            show this help\n"
            "\n"
            "Progress goes to stderr, one line per combination. Exit status: 0 done (at\n"
            "least one combination ran); 2 the command line is wrong, no combination could\n"
            "run (each row says why), or --trace DIR cannot be written or would take too\n"
            "much; 1 a run failed.\n"
            "\n"
            "examples:\n"
            "  brigade bench --simulate --stages 4 --microbatches 4,8,16\n"
            "  brigade bench inception-v3 --devices 7x12GiB --batch 64 --simulate --trace traces\n"
            "  brigade bench resnet18 --input 3x32x32 --classes 10 --devices 4x256MiB --batch 16 \\\n"
            "      --microbatches 4,8 --steps 3 --trace traces\n"
            "  brigade bench fmnist-cnn --devices 2x64MiB --batch 8 --schedules 1f1b,zb-h1 --json\n");
}

enum {
    OPT_DEVICES = 256,
    OPT_BATCH,
    OPT_SCHEDULES,
    OPT_MICROBATCHES,
    OPT_CHUNKS,
    OPT_STEPS,
    OPT_WARMUP,
    OPT_SIMULATE,
    OPT_STAGES,
    OPT_PROFILE,
    OPT_DEVICE_SPEED,
    OPT_LINK_SPEED,
    OPT_RECOMPUTE,
    OPT_LR,
    OPT_SEED,
    OPT_TRACE,
    OPT_JSON,
    OPT_WATCHDOG,
    OPT_WATCHDOG_SETUP,
};

static const struct option bench_opts[] = {
    {"devices", required_argument, NULL, OPT_DEVICES},
    {"batch", required_argument, NULL, OPT_BATCH},
    {"schedules", required_argument, NULL, OPT_SCHEDULES},
    {"schedule", required_argument, NULL, OPT_SCHEDULES},
    {"microbatches", required_argument, NULL, OPT_MICROBATCHES},
    {"chunks", required_argument, NULL, OPT_CHUNKS},
    {"steps", required_argument, NULL, OPT_STEPS},
    {"watchdog", required_argument, NULL, OPT_WATCHDOG},
    {"watchdog-setup", required_argument, NULL, OPT_WATCHDOG_SETUP},
    {"warmup", required_argument, NULL, OPT_WARMUP},
    {"simulate", no_argument, NULL, OPT_SIMULATE},
    {"stages", required_argument, NULL, OPT_STAGES},
    {"profile", required_argument, NULL, OPT_PROFILE},
    {"device-speed", required_argument, NULL, OPT_DEVICE_SPEED},
    {"link-speed", required_argument, NULL, OPT_LINK_SPEED},
    {"recompute", required_argument, NULL, OPT_RECOMPUTE},
    {"lr", required_argument, NULL, OPT_LR},
    {"seed", required_argument, NULL, OPT_SEED},
    {"trace", required_argument, NULL, OPT_TRACE},
    {"json", no_argument, NULL, OPT_JSON},
    BRG_CLI_ZOO_OPTIONS,
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

#define MAX_BATCH (1 << 24)
#define MAX_STEPS 100000

/* ---- argument parsing ---- */

static int take_schedule(void *ctx, const char *item)
{
    bench_args *a = ctx;
    brg_schedule_kind k;
    if (brg_schedule_kind_parse(item, &k) != BRG_OK) {
        fprintf(stderr, "brigade bench: unknown schedule '%s' in --schedules (expected gpipe, 1f1b, interleaved, "
                        "zb-h1, zb-h2, zb-v, v-half or v-min)\n", item);
        return 0;
    }
    for (int i = 0; i < a->n_kinds; i++)
        if (a->kinds[i] == k) {
            fprintf(stderr, "brigade bench: --schedules names '%s' twice\n", item);
            return 0;
        }
    if (a->n_kinds == MAX_LIST) {
        fprintf(stderr, "brigade bench: --schedules: at most %d schedules\n", MAX_LIST);
        return 0;
    }
    a->kinds[a->n_kinds++] = k;
    return 1;
}

static int take_mb(void *ctx, const char *item)
{
    bench_args *a = ctx;
    int64_t m;
    if (!brg_cli_parse_int("bench", "--microbatches", item, 1, MAX_BATCH, &m)) return 0;
    for (int i = 0; i < a->n_mbs; i++)
        if (a->mbs[i] == m) {
            fprintf(stderr, "brigade bench: --microbatches names %lld twice\n", (long long)m);
            return 0;
        }
    if (a->n_mbs == MAX_LIST) {
        fprintf(stderr, "brigade bench: --microbatches: at most %d counts\n", MAX_LIST);
        return 0;
    }
    a->mbs[a->n_mbs++] = m;
    return 1;
}

/* --trace DIR: create it if missing (one level) and make sure files can be
 * written there, before anything runs. */
static int check_trace_dir(const char *dir)
{
    struct stat sb;
    /* EEXIST: another rank of an mpirun launch made it just now. */
    if (stat(dir, &sb) != 0 && (errno != ENOENT || (mkdir(dir, 0777) != 0 && errno != EEXIST))) {
        fprintf(stderr, "brigade bench: --trace '%s': cannot create the directory: %s\n", dir, strerror(errno));
        return 0;
    }
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        fprintf(stderr, "brigade bench: --trace '%s' exists and is not a directory\n", dir);
        return 0;
    }
    if (access(dir, W_OK | X_OK) != 0) {
        fprintf(stderr, "brigade bench: --trace '%s': cannot write there: %s\n", dir, strerror(errno));
        return 0;
    }
    return 1;
}

#ifndef PATH_MAX
#define PATH_MAX 4096
#endif

/* The trace files' suffixes; the longest two are as long as each other. */
static const char *const trace_suffix[3] = {".trace.json", ".svg", "-memory.svg"};

/* --trace DIR: every combination's file names must fit in a path, checked
 * before anything runs (and on every rank, which all go on or stop alike). */
static int check_trace_names(const bench_args *a)
{
    const size_t dir = strlen(a->trace);
    for (int k = 0; k < a->n_kinds; k++)
        for (int j = 0; j < a->n_mbs; j++) {
            combo c = {.kind = a->kinds[k], .m = (int)a->mbs[j]};
            c.chunks = brg_schedule_kind_chunks(c.kind, c.kind == BRG_SCHEDULE_INTERLEAVED ? (int)a->chunks : 0);
            char name[64];
            brg_bench_combo_name(&c, name, sizeof name);
            if (dir + 1 + strlen(name) + strlen(trace_suffix[0]) >= PATH_MAX) {
                fprintf(stderr, "brigade bench: --trace: the path '%s/%s%s' is longer than the system allows (%d "
                                "bytes): give a shorter directory\n", a->trace, name, trace_suffix[0], PATH_MAX);
                return 0;
            }
        }
    return 1;
}

/* Bytes of the trace and the SVG timeline per action (measured at 256 x 256:
 * about 175 and 270; a little more as the times get longer digits), and
 * the most one combination may write. The trace is built in memory first,
 * several times its size, so a larger one would more likely run out of
 * memory than be opened by a viewer. */
#define TRACE_BYTES_PER_ACTION 460
#define TRACE_LIMIT_BYTES (1ULL << 30)

/* --trace: refuse, before anything runs, a combination whose files would
 * pass TRACE_LIMIT_BYTES, saying how large they would be and how many
 * micro-batches would fit. */
static int check_trace_sizes(const bench_args *a, int p)
{
    for (int k = 0; k < a->n_kinds; k++)
        for (int j = 0; j < a->n_mbs; j++) {
            combo c = {.kind = a->kinds[k], .m = (int)a->mbs[j]};
            c.chunks = brg_schedule_kind_chunks(c.kind, c.kind == BRG_SCHEDULE_INTERLEAVED ? (int)a->chunks : 0);
            /* 0 actions: too large to build at all (its row says so) */
            const unsigned long long actions = (unsigned long long)brg_schedule_kind_actions(c.kind, p, c.m, c.chunks);
            const unsigned long long bytes = actions * TRACE_BYTES_PER_ACTION;
            if (bytes <= TRACE_LIMIT_BYTES) continue;
            /* within the limits on building, one micro-batch takes a few MiB at most */
            const unsigned long long per_mb =
                (unsigned long long)brg_schedule_kind_actions(c.kind, p, 1, c.chunks) * TRACE_BYTES_PER_ACTION;
            char name[64], size[32];
            brg_bench_combo_name(&c, name, sizeof name);
            brg_format_bytes((size_t)bytes, size, sizeof size);
            fprintf(stderr, "brigade bench: --trace: %s has %llu actions on %d stage%s, about %s of trace and "
                            "timeline, more than the 1 GiB a trace may take: trace fewer micro-batches (at most %llu "
                            "at %d stage%s) or stages, or drop --trace\n", name, actions, p, p == 1 ? "" : "s", size,
                    TRACE_LIMIT_BYTES / per_mb, p, p == 1 ? "" : "s");
            return 0;
        }
    return 1;
}

/* Options that only a model gives a meaning: unit costs (--stages) have
 * no devices, data, speeds or steps. */
static int needs_model(int c)
{
    switch (c) {
    case OPT_DEVICES: case OPT_BATCH: case OPT_PROFILE: case OPT_RECOMPUTE: case OPT_DEVICE_SPEED:
    case OPT_LINK_SPEED: case OPT_STEPS: case OPT_WARMUP: case OPT_LR: case OPT_SEED: case BRG_CLI_OPT_INPUT:
    case BRG_CLI_OPT_CLASSES: case BRG_CLI_OPT_WIDTH_MULT: case BRG_CLI_OPT_CUTS: return 1;
    default: return 0;
    }
}

/* Options that only a measured run gives a meaning: a simulation runs no
 * steps, draws no data and waits on no other rank. */
static int needs_run(int c)
{
    switch (c) {
    case OPT_STEPS: case OPT_WARMUP: case OPT_LR: case OPT_SEED: case OPT_WATCHDOG: case OPT_WATCHDOG_SETUP: return 1;
    default: return 0;
    }
}

/* Parse argv; -1 to go on, else the exit code. */
static int parse_args(int argc, char **argv, bench_args *a)
{
    memset(a, 0, sizeof *a);
    a->steps = 3;
    a->watchdog = 300;
    a->watchdog_setup = -1;
    a->warmup = 1;
    a->seed = 1;
    a->lr = 0.01;
    a->numbers = brg_plan_options_init(); /* 10 GB/s; times from this CPU's calibration unless --device-speed */
    a->numbers.cpu_calibration = 1;
    optind = 1;
    opterr = 0;
    int c, li = -1;
    const char *model_only = NULL, *run_only = NULL; /* the first option given that needs a model, a run */
    while ((c = getopt_long(argc, argv, ":h", bench_opts, &li)) != -1) {
        if (needs_model(c) && !model_only) model_only = bench_opts[li].name;
        if (needs_run(c) && !run_only) run_only = bench_opts[li].name;
        switch (c) {
        case 'h': usage(stdout); return BRG_EXIT_OK;
        case OPT_DEVICES: a->devices = optarg; break;
        case OPT_BATCH:
            if (!brg_cli_parse_int("bench", "--batch", optarg, 1, MAX_BATCH, &a->batch)) return BRG_EXIT_USAGE;
            break;
        case OPT_SCHEDULES:
            a->n_kinds = 0;
            if (!brg_cli_parse_list("bench", "--schedules", optarg, "a comma-separated list, e.g. gpipe,1f1b", a,
                                    take_schedule))
                return BRG_EXIT_USAGE;
            break;
        case OPT_MICROBATCHES:
            a->n_mbs = 0;
            if (!brg_cli_parse_list("bench", "--microbatches", optarg, "a comma-separated list, e.g. 4,8,16", a,
                                    take_mb))
                return BRG_EXIT_USAGE;
            break;
        case OPT_CHUNKS:
            if (!brg_cli_parse_int("bench", "--chunks", optarg, 2, BRG_PROGRAM_MAX_CHUNKS, &a->chunks))
                return BRG_EXIT_USAGE;
            break;
        case OPT_STEPS:
            if (!brg_cli_parse_int("bench", "--steps", optarg, 1, MAX_STEPS, &a->steps)) return BRG_EXIT_USAGE;
            break;
        case OPT_WARMUP:
            if (!brg_cli_parse_int("bench", "--warmup", optarg, 0, MAX_STEPS, &a->warmup)) return BRG_EXIT_USAGE;
            break;
        case OPT_WATCHDOG:
            if (!brg_cli_watchdog_parse("bench", "--watchdog", optarg, &a->watchdog)) return BRG_EXIT_USAGE;
            break;
        case OPT_WATCHDOG_SETUP:
            if (!brg_cli_watchdog_parse("bench", "--watchdog-setup", optarg, &a->watchdog_setup)) return BRG_EXIT_USAGE;
            break;
        case OPT_SIMULATE: a->simulate = 1; break;
        case OPT_STAGES:
            if (!brg_cli_parse_int("bench", "--stages", optarg, 1, BRG_SCHEDULE_MAX_VIRTUAL_STAGES, &a->stages))
                return BRG_EXIT_USAGE;
            break;
        case OPT_PROFILE: a->profile = optarg; break;
        case OPT_DEVICE_SPEED:
        case OPT_LINK_SPEED:
            if (!brg_cli_plan_number("bench", c == OPT_DEVICE_SPEED ? "--device-speed" : "--link-speed", optarg,
                                     &a->numbers))
                return BRG_EXIT_USAGE;
            a->speed_given |= c == OPT_DEVICE_SPEED;
            break;
        case OPT_RECOMPUTE: a->recompute = optarg; break;
        case OPT_LR:
            if (!brg_cli_parse_real("bench", "--lr", optarg, 0, &a->lr)) return BRG_EXIT_USAGE;
            if (!(a->lr > 0.0)) return brg_cli_usage_error("bench", "--lr '%s' must be positive", optarg);
            break;
        case OPT_SEED:
            if (!brg_cli_parse_int("bench", "--seed", optarg, 0, INT64_MAX, &a->seed)) return BRG_EXIT_USAGE;
            break;
        case OPT_TRACE:
            a->trace = optarg;
            a->trace_given = 1;
            break;
        case OPT_JSON: a->json = 1; break;
        case BRG_CLI_OPT_CUTS:
            if (!brg_cli_cuts_option("bench", optarg)) return BRG_EXIT_USAGE;
            break;
        case BRG_CLI_OPT_INPUT:
        case BRG_CLI_OPT_CLASSES:
        case BRG_CLI_OPT_WIDTH_MULT:
            if (!brg_cli_zoo_option("bench", c, optarg, &a->zoo)) return BRG_EXIT_USAGE;
            a->zoo_given = 1;
            break;
        default: return brg_cli_bad_option("bench", c, argv);
        }
    }
    if (argc - optind > 1) return brg_cli_usage_error("bench", "unexpected argument '%s'", argv[optind + 1]);
    a->spec = argc - optind == 1 ? argv[optind] : NULL;
    if (a->n_kinds == 0) {
        for (int k = 0; k < BRG_SCHEDULE_KIND_COUNT; k++) a->kinds[a->n_kinds++] = (brg_schedule_kind)k;
    }
    if (a->stages && !a->simulate)
        return brg_cli_usage_error("bench", "--stages compares schedules at unit costs and needs --simulate (a run "
                                            "needs MODEL --devices SPEC)");
    if (a->stages && a->spec)
        return brg_cli_usage_error(
            "bench", "--stages is for unit costs without a model; with MODEL '%s' give --devices instead", a->spec);
    if (!a->spec && !a->stages)
        return brg_cli_usage_error("bench", "missing MODEL (a zoo name or a JSON model file), or --simulate --stages P "
                                            "to compare schedules at unit costs");
    if (a->spec && !a->devices) return brg_cli_usage_error("bench", "missing --devices (e.g. --devices 4x64MiB)");
    if (a->spec && !a->batch) return brg_cli_usage_error("bench", "missing --batch (samples per optimizer step)");
    if (!a->spec && model_only)
        return brg_cli_usage_error("bench", "--%s needs a MODEL: --simulate --stages P compares the schedules at "
                                            "unit costs, where it has no meaning", model_only);
    if (a->simulate && run_only)
        return brg_cli_usage_error("bench", "--%s applies to measured runs, and --simulate runs nothing: drop --%s, "
                                            "or drop --simulate to measure", run_only, run_only);
    if (!brg_cli_watchdog_check("bench", a->watchdog, a->watchdog_setup)) return BRG_EXIT_USAGE;
    if (a->chunks) {
        int has = 0;
        for (int i = 0; i < a->n_kinds; i++) has |= a->kinds[i] == BRG_SCHEDULE_INTERLEAVED;
        if (!has)
            return brg_cli_usage_error("bench",
                                       "--chunks applies to the interleaved schedule, which --schedules leaves out");
    }
    if (a->n_mbs == 0) {
        static const int64_t defaults[] = {4, 8, 16};
        for (int i = 0; i < 3; i++)
            if (!a->batch || a->batch % defaults[i] == 0) a->mbs[a->n_mbs++] = defaults[i];
        if (a->n_mbs == 0)
            return brg_cli_usage_error("bench",
                                       "--batch %lld is divided by none of the default micro-batch counts 4, 8, 16: "
                                       "give --microbatches",
                                       (long long)a->batch);
    }
    for (int i = 0; a->batch && i < a->n_mbs; i++)
        if (!brg_cli_check_divides("bench", "--microbatches", a->mbs[i], a->batch)) return BRG_EXIT_USAGE;
    if (a->trace && (!check_trace_names(a) || !check_trace_dir(a->trace))) return BRG_EXIT_USAGE;
    return -1;
}

/* The closed-form bubble of docs/schedules.md at unit costs, or NAN where
 * the docs give none (interleaved with m not a multiple of p). */
static double analytic_bubble(brg_schedule_kind k, int p, int m, int v)
{
    switch (k) {
    case BRG_SCHEDULE_GPIPE:
    case BRG_SCHEDULE_1F1B: return (double)(p - 1) / (m + p - 1);
    case BRG_SCHEDULE_INTERLEAVED: return m % p == 0 ? (double)(p - 1) / ((double)v * m + p - 1) : NAN;
    case BRG_SCHEDULE_ZB_H1: {
        const double makespan = 2.0 * m + p - 1 + (m > p ? m : p);
        return 1.0 - 3.0 * m / makespan;
    }
    default: return NAN;
    }
}

/* Set c's note, as long as it is (a plan's runs to several sentences). */
static brg_status set_note(combo *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static brg_status set_note(combo *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    const int len = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    free(c->note);
    if (len < 0 || !(c->note = malloc((size_t)len + 1))) {
        c->note = NULL;
        fprintf(stderr, "brigade bench: out of host memory\n");
        return BRG_ERR_HOST_MEMORY;
    }
    va_start(ap, fmt);
    vsnprintf(c->note, (size_t)len + 1, fmt, ap);
    va_end(ap);
    return BRG_OK;
}

/* ---- traces ---- */

/* Write the trace and SVG timeline of one combination (and the memory
 * chart when bars is not NULL). */
static brg_status write_traces(const run_ctx *x, combo *c, const brg_schedule *s, const double *const *start,
                               const double *const *end, const brg_memory_bar *bars)
{
    char name[64], label[64], title[512];
    brg_bench_combo_name(c, name, sizeof name);
    snprintf(title, sizeof title, "%s%s, %d micro-batches (%s)", x->title_prefix,
             brg_bench_schedule_label(c, label, sizeof label), c->m,
             x->md == MODE_MEASURED ? "measured" : x->md == MODE_SIMULATED ? "simulated" : "unit costs");
    brg_timeline t = {s, start, end, x->md == MODE_UNIT ? "unit" : "s", title,
                      (const char *const *)x->device_names};
    for (int k = 0; k < (bars ? 3 : 2); k++) {
        /* check_trace_names made sure each fits in a path */
        const size_t size = strlen(x->a->trace) + 1 + strlen(name) + strlen(trace_suffix[k]) + 1;
        if (!(c->files[k] = malloc(size))) {
            fprintf(stderr, "brigade bench: out of host memory\n");
            return BRG_ERR_HOST_MEMORY;
        }
        snprintf(c->files[k], size, "%s/%s%s", x->a->trace, name, trace_suffix[k]);
    }
    TRY(brg_timeline_write_chrome(&t, c->files[0]));
    TRY(brg_timeline_write_svg(&t, c->files[1]));
    if (bars) {
        char mt[512];
        snprintf(mt, sizeof mt, "%speak memory per stage, %s", x->title_prefix, name);
        TRY(brg_memory_chart_write_svg(mt, bars, x->p, c->files[2]));
    }
    return BRG_OK;
}

/* The most micro-batches' activations any device holds between a forward
 * and the backward that frees them, from the schedule's order, a chunk's
 * micro-batch counting 1/chunks of a stage's (bench.h). */
static double peak_activations(const brg_schedule *s)
{
    int most = 0;
    for (int d = 0; d < brg_schedule_devices(s); d++) {
        const int held = brg_schedule_max_in_flight(s, d, -1);
        if (held > most) most = held;
    }
    return (double)most / brg_schedule_chunks(s);
}

/* ---- unit costs ---- */

static brg_status run_unit(const run_ctx *x, combo *c)
{
    brg_schedule *s = NULL;
    brg_schedule_sim *sim = NULL;
    brg_status st = brg_schedule_build(c->kind, x->p, c->m, c->chunks, &s);
    if (st == BRG_ERR_INVALID_ARGUMENT) { /* e.g. its chunks make too many virtual stages: a row, as a plan's refusal */
        c->fits = 0;
        st = set_note(c, "cannot build: %s", brg_last_error());
        brg_clear_error();
        return st;
    }
    if (st != BRG_OK) return st;
    const int V = x->p * c->chunks;
    double *ones = malloc((size_t)V * sizeof *ones);
    if (!ones) {
        fprintf(stderr, "brigade bench: out of host memory\n");
        st = BRG_ERR_HOST_MEMORY;
        goto exit;
    }
    for (int j = 0; j < V; j++) ones[j] = 1.0;
    brg_schedule_times times = {ones, ones, ones, NULL};
    st = brg_schedule_simulate(s, &times, &sim);
    if (st != BRG_OK) goto exit;
    c->makespan = sim->makespan;
    c->bubble = sim->bubble;
    c->analytic = analytic_bubble(c->kind, x->p, c->m, c->chunks);
    c->peak_activations = peak_activations(s);
    for (int d = 0; d < x->p; d++) c->stages[d].bubble = sim->idle[d];
    if (x->a->trace)
        st = write_traces(x, c, s, (const double *const *)sim->start, (const double *const *)sim->end, NULL);
exit:
    free(ones);
    brg_schedule_sim_destroy(sim);
    brg_schedule_destroy(s);
    return st;
}

/* ---- with a model: plans ---- */

/* Plan combination c. A combination the planner refuses as such (e.g. more
 * virtual stages than the model has blocks) is BRG_OK with *out NULL and the
 * reason in c->note; other failures are returned. */
static brg_status make_plan(const run_ctx *x, const brg_plan_options *base, combo *c, brg_plan **out)
{
    brg_plan_options o = *base;
    o.schedule = c->kind;
    o.chunks = c->kind == BRG_SCHEDULE_INTERLEAVED ? c->chunks : 0;
    o.micro_batches = c->m;
    *out = NULL;
    brg_status st = brg_plan_create(x->model, &o, out);
    if (st == BRG_ERR_INVALID_ARGUMENT) {
        c->fits = 0;
        st = set_note(c, "cannot plan: %s", brg_last_error());
        brg_clear_error();
        return st;
    }
    if (st != BRG_OK) return st;
    const brg_plan_info *in = brg_plan_get_info(*out);
    c->times = in->times;
    c->fits = in->feasible;
    if (!in->feasible) TRY(set_note(c, "%s", in->note && in->note[0] ? in->note : "does not fit"));
    c->predicted = in->partitioned ? in->step_s : 0.0;
    for (int d = 0; in->partitioned && d < x->p; d++) {
        const brg_plan_stage *ps = brg_plan_get_stage(*out, d);
        c->stages[d].peak_planned = ps->peak_bytes;
        c->stages[d].capacity = ps->capacity_bytes;
        c->stages[d].budget = ps->budget_bytes;
        c->stages[d].persistent = ps->param_bytes + ps->grad_bytes + ps->optimizer_bytes + ps->receive_bytes;
        c->stages[d].fits = ps->fits;
        c->stages[d].arena_bytes = ps->arena_bytes;
        brg_cli_fit_marker(ps, c->stages[d].fit, sizeof c->stages[d].fit);
        if (!c->fit[0]) snprintf(c->fit, sizeof c->fit, "%s", c->stages[d].fit);
    }
    if (!c->fits && !c->fit[0]) snprintf(c->fit, sizeof c->fit, "DOES NOT FIT"); /* no stage says why */
    return BRG_OK;
}

static void memory_bars(const run_ctx *x, const combo *c, brg_memory_bar *bars)
{
    for (int d = 0; d < x->p; d++) {
        bars[d].name = x->device_names[d];
        bars[d].capacity = c->stages[d].capacity ? c->stages[d].capacity : x->specs[d].capacity;
        bars[d].planned = c->stages[d].peak_planned;
        bars[d].measured = c->stages[d].peak_measured;
        bars[d].persistent = c->stages[d].persistent;
        bars[d].budget = c->stages[d].budget;
    }
}

static brg_status run_simulated(const run_ctx *x, const brg_plan_options *base, combo *c)
{
    brg_plan *plan = NULL;
    brg_schedule_sim *sim = NULL;
    brg_memory_bar *bars = NULL;
    brg_status st = make_plan(x, base, c, &plan);
    if (st != BRG_OK || !plan || !brg_plan_get_info(plan)->partitioned) goto exit;
    brg_schedule_times times;
    st = brg_plan_schedule_times(plan, &times);
    if (st == BRG_OK) st = brg_schedule_simulate(brg_plan_schedule(plan), &times, &sim);
    if (st != BRG_OK) goto exit;
    c->makespan = sim->makespan;
    c->bubble = sim->bubble;
    c->samples_per_s = sim->makespan > 0 ? (double)x->a->batch / sim->makespan : 0.0;
    c->peak_activations = peak_activations(brg_plan_schedule(plan));
    for (int d = 0; d < x->p; d++) c->stages[d].bubble = sim->idle[d];
    if (x->a->trace) {
        bars = calloc((size_t)x->p, sizeof *bars);
        if (!bars) {
            st = BRG_ERR_HOST_MEMORY;
            goto exit;
        }
        memory_bars(x, c, bars);
        st = write_traces(x, c, brg_plan_schedule(plan), (const double *const *)sim->start,
                          (const double *const *)sim->end, bars);
    }
exit:
    free(bars);
    brg_schedule_sim_destroy(sim);
    brg_plan_destroy(plan);
    return st;
}

/* ---- with a model: measured ---- */

/* Running sums of one run's action durations per virtual stage, for the
 * replay simulation: forward, backward (B, or B+W unsplit), weight gradient,
 * and the sends across each boundary in either direction. */
typedef struct action_sums {
    double *sum;  /* [4V]: F, B, W per virtual stage, then transfers per boundary */
    int *count;   /* [4V] */
} action_sums;

static void add_step_times(const brg_schedule *s, int d, const double *start, const double *end, action_sums *acc)
{
    const int p = brg_schedule_devices(s), V = p * brg_schedule_chunks(s);
    const int n = brg_schedule_action_count(s, d);
    for (int i = 0; i < n; i++) {
        const brg_action *a = brg_schedule_action(s, d, i);
        const int vs = brg_schedule_stage_of(s, d, a->chunk);
        int slot;
        switch (a->type) {
        case BRG_ACTION_FORWARD: slot = vs; break;
        case BRG_ACTION_BACKWARD:
        case BRG_ACTION_BACKWARD_INPUT: slot = V + vs; break;
        case BRG_ACTION_BACKWARD_WEIGHT: slot = 2 * V + vs; break;
        case BRG_ACTION_SEND_ACT: slot = 3 * V + vs; break;          /* boundary vs -> vs+1 */
        case BRG_ACTION_SEND_GRAD: slot = 3 * V + vs - 1; break;     /* boundary vs-1 <- vs */
        default: continue; /* a receive's time is mostly waiting */
        }
        acc->sum[slot] += end[i] - start[i];
        acc->count[slot]++;
    }
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static brg_status run_measured(const run_ctx *x, const brg_plan_options *base, combo *c)
{
    const int p = x->p;
    const int B = (int)x->a->batch;
    brg_plan *plan = NULL;
    brg_pipeline *pl = NULL;
    brg_schedule_sim *sim = NULL;
    brg_device **devs = calloc((size_t)p, sizeof *devs);
    double **last = calloc((size_t)2 * p, sizeof *last); /* the last step's start and end per device */
    brg_memory_bar *bars = calloc((size_t)p, sizeof *bars);
    float *images = NULL;
    int32_t *labels = NULL;
    double *spans = calloc((size_t)x->a->steps, sizeof *spans); /* each measured step's makespan */
    action_sums acc = {NULL, NULL};
    brg_status st = BRG_OK;
    if (!devs || !last || !bars || !spans) goto oom;
    st = make_plan(x, base, c, &plan);
    if (st != BRG_OK || !plan || !c->fits) goto exit; /* not runnable: the row says why */
    const brg_schedule *s = brg_plan_schedule(plan);
    const int V = p * brg_schedule_chunks(s);
    c->peak_activations = peak_activations(s);
    acc.sum = calloc((size_t)4 * V, sizeof *acc.sum);
    acc.count = calloc((size_t)4 * V, sizeof *acc.count);
    const brg_model_tensor *in = brg_model_get_tensor(x->model, brg_model_input(x->model));
    const size_t sample = (size_t)(in->c * in->h * in->w);
    images = malloc((size_t)B * sample * sizeof *images);
    const int64_t pixels = brg_model_label_count(x->model);
    labels = malloc((size_t)(B * pixels) * sizeof *labels);
    if (!acc.sum || !acc.count || !images || !labels) goto oom;
    for (int d = 0; d < p; d++) {
        const int n = brg_schedule_action_count(s, d);
        last[d] = calloc((size_t)(n ? n : 1), sizeof **last);
        last[p + d] = calloc((size_t)(n ? n : 1), sizeof **last);
        if (!last[d] || !last[p + d]) goto oom;
        if (!brg_world_holds(brg_cli_world, d, p)) continue; /* another rank's */
        st = brg_cli_device_create(&x->specs[d], d, &devs[d]);
        if (st != BRG_OK) goto exit;
    }
    brg_plan_set_workspace_ceilings(plan, devs, p);
    brg_pipeline_options po = brg_pipeline_options_init();
    po.seed = (uint64_t)x->a->seed;
    po.record_times = 1;
    po.world = brg_cli_world;
    brg_pipeline_desc desc;
    st = brg_plan_pipeline_desc(plan, &desc);
    if (st == BRG_OK) st = brg_pipeline_create(&desc, devs, p, &po, &pl);
    if (st != BRG_OK) goto exit;
    brg_cli_synth_batch((uint64_t)x->a->seed, B, (int64_t)sample, (int)brg_model_classes(x->model), pixels, images,
                        labels);
    double wall = 0.0, makespan = 0.0, busy_all = 0.0;
    for (int64_t k = 0; k < x->a->warmup + x->a->steps; k++) {
        st = brg_pipeline_step(pl, (float)x->a->lr, images, labels, B, NULL, NULL);
        if (st != BRG_OK) goto exit;
        brg_cli_watchdog_pet();
        if (k < x->a->warmup) continue;
        wall += brg_pipeline_last_step_seconds(pl);
        c->host_bytes = brg_pipeline_host_bytes(pl); /* the same every step */
        double span = 0.0;
        const double *t0[BRG_PLAN_MAX_DEVICES], *t1[BRG_PLAN_MAX_DEVICES];
        for (int d = 0; d < p; d++) {
            st = brg_pipeline_action_times(pl, d, &t0[d], &t1[d]);
            if (st != BRG_OK) goto exit;
            for (int i = 0; i < brg_schedule_action_count(s, d); i++)
                if (t1[d][i] > span) span = t1[d][i];
        }
        makespan += span;
        spans[k - x->a->warmup] = span;
        if (k == x->a->warmup || span < c->makespan_lo) c->makespan_lo = span;
        if (span > c->makespan_hi) c->makespan_hi = span;
        for (int d = 0; d < p; d++) {
            const int n = brg_schedule_action_count(s, d);
            double busy = 0.0;
            for (int i = 0; i < n; i++)
                if (brg_schedule_action(s, d, i)->type <= BRG_ACTION_BACKWARD_WEIGHT) busy += t1[d][i] - t0[d][i];
            c->stages[d].bubble += span > 0 ? 1.0 - busy / span : 0.0;
            double copy_s = 0.0, hidden_s = 0.0;
            st = brg_pipeline_copy_times(pl, d, &copy_s, &hidden_s);
            if (st != BRG_OK) goto exit;
            c->stages[d].copy_s += copy_s;
            c->stages[d].copy_hidden_s += hidden_s;
            busy_all += busy;
            add_step_times(s, d, t0[d], t1[d], &acc);
            memcpy(last[d], t0[d], (size_t)n * sizeof **last);
            memcpy(last[p + d], t1[d], (size_t)n * sizeof **last);
        }
    }
    const double steps = (double)x->a->steps;
    c->step_s = wall / steps;
    c->makespan = makespan / steps;
    qsort(spans, (size_t)x->a->steps, sizeof *spans, cmp_double);
    c->makespan_median = x->a->steps % 2 ? spans[x->a->steps / 2]
                                         : 0.5 * (spans[x->a->steps / 2 - 1] + spans[x->a->steps / 2]);
    c->samples_per_s = c->step_s > 0 ? B / c->step_s : 0.0;
    c->bubble = 0.0;
    for (int d = 0; d < p; d++) {
        c->stages[d].bubble /= steps;
        c->stages[d].copy_s /= steps;
        c->stages[d].copy_hidden_s /= steps;
        c->bubble += c->stages[d].bubble / p;
        brg_memory_report rep;
        st = brg_pipeline_memory(pl, d, &rep);
        if (st != BRG_OK) goto exit;
        c->stages[d].peak_measured = rep.peak_bytes;
    }
    /* Replay: the simulator fed with this run's own mean action times. */
    for (int k = 0; k < 4 * V; k++) acc.sum[k] = acc.count[k] ? acc.sum[k] / acc.count[k] : 0.0;
    brg_schedule_times times = {acc.sum, acc.sum + V, acc.sum + 2 * V, acc.sum + 3 * V};
    st = brg_schedule_simulate(s, &times, &sim);
    if (st != BRG_OK) goto exit;
    c->replayed = sim->makespan;
    /* The speed the cost model would need to predict this run: its FLOPs
     * of a step over the time the devices spent computing (FLOP-based
     * times only: otherwise the plan's FLOPs are measured times in
     * disguise, and NaN says there is nothing to report). */
    double flops = 0.0;
    for (int d = 0; d < p; d++) flops += brg_plan_get_stage(plan, d)->flops * c->m;
    c->gflops = c->times != BRG_PLAN_TIMES_FLOPS ? NAN : busy_all > 0 ? flops * steps / busy_all / 1e9 : 0.0;
    if (x->a->trace) {
        memory_bars(x, c, bars);
        st = write_traces(x, c, s, (const double *const *)last, (const double *const *)(last + p), bars);
    }
    goto exit;
oom:
    fprintf(stderr, "brigade bench: out of host memory\n");
    st = BRG_ERR_HOST_MEMORY;
exit:
    brg_schedule_sim_destroy(sim);
    brg_pipeline_destroy(pl);
    for (int d = 0; devs && d < p; d++) brg_device_destroy(devs[d]);
    for (int d = 0; last && d < 2 * p; d++) free(last[d]);
    free(last);
    free(devs);
    free(bars);
    free(images);
    free(labels);
    free(spans);
    free(acc.sum);
    free(acc.count);
    brg_plan_destroy(plan);
    return st;
}

/* ---- the command ---- */

static int make_base_options(const bench_args *a, brg_plan_options *o)
{
    *o = brg_plan_options_init();
    o->batch = (int)a->batch;
    o->link_bytes_per_s = a->numbers.link_bytes_per_s;
    brg_plan_options given = a->numbers;
    given.profile_path = a->profile;
    if (!brg_cli_plan_times("bench", &given, brg_world_size(brg_cli_world), o)) return 0;
    o->explain = 0; /* a combination that does not fit is a row, not an investigation */
    if (a->recompute && !brg_cli_parse_recompute("bench", a->recompute, &o->recompute)) return 0;
    return 1; /* the optimizer stays the plan's default, SGD with momentum 0.9 */
}

/* A mistake in the options themselves (--profile auto with GPUs, more
 * devices than the model has blocks) fails every combination alike: one
 * plan before the loop says it once, as brigade plan does. GPipe at fixed
 * cuts with estimates only, so it costs one evaluation. */
static brg_status check_plannable(const run_ctx *x, const brg_plan_options *base)
{
    int cuts[BRG_PLAN_MAX_DEVICES];
    for (int d = 0; d + 1 < x->p; d++) cuts[d] = d;
    brg_plan_options o = *base;
    o.schedule = BRG_SCHEDULE_GPIPE;
    o.chunks = 0;
    o.micro_batches = (int)x->a->mbs[0];
    o.split = cuts;
    o.n_split = x->p - 1;
    o.verify = 0;
    brg_plan *plan = NULL;
    const brg_status st = brg_plan_create(x->model, &o, &plan);
    brg_plan_destroy(plan);
    return st;
}

/* Why device d's backend cannot run here: not built in, or (CUDA built
 * in) no GPU visible, which a build without CUDA was blamed for. */
static void say_backend_unavailable(int d, brg_backend backend)
{
    brg_system_info *info = calloc(1, sizeof *info); /* large: a table per GPU pair */
    if (info && backend == BRG_BACKEND_CUDA && brg_system_info_get(info) == BRG_OK && info->cuda_compiled)
        fprintf(stderr, "brigade bench: device %d is cuda, and this machine has %s; use --simulate to compare "
                        "schedules without a GPU\n", d, info->gpu_note[0] ? info->gpu_note : "no GPU visible");
    else
        fprintf(stderr, "brigade bench: device %d is %s, which this build lacks; use --simulate to compare schedules "
                        "without it\n", d, brg_backend_name(backend));
    free(info);
}

static int run_bench(bench_args a)
{
    int rc = -1;
    run_ctx x;
    memset(&x, 0, sizeof x);
    x.a = &a;
    x.md = !a.spec ? MODE_UNIT : a.simulate ? MODE_SIMULATED : MODE_MEASURED;
    brg_plan_options base;
    if (!make_base_options(&a, &base)) return BRG_EXIT_USAGE;
    brg_device_spec *specs = calloc(BRG_PLAN_MAX_DEVICES, sizeof *specs);
    brg_model *model = NULL;
    combo *cs = NULL;
    int n = 0;
    if (!specs) {
        fprintf(stderr, "brigade bench: out of host memory\n");
        return BRG_EXIT_FAILURE;
    }
    if (x.md == MODE_UNIT) {
        x.p = (int)a.stages;
        if (a.trace_given && !check_trace_sizes(&a, x.p)) {
            rc = BRG_EXIT_USAGE;
            goto exit;
        }
        snprintf(x.title_prefix, sizeof x.title_prefix, "%d stage%s: ", x.p, x.p == 1 ? "" : "s");
    } else {
        if (!brg_cli_parse_devices("bench", a.devices, specs, BRG_PLAN_MAX_DEVICES, &x.p) ||
            (a.trace_given && !check_trace_sizes(&a, x.p))) {
            rc = BRG_EXIT_USAGE;
            goto exit;
        }
        brg_cli_watchdog_phase("reading the model");
        rc = brg_cli_load_model("bench", a.spec, &a.zoo, a.zoo_given, &model);
        if (rc >= 0) goto exit;
        if (x.md == MODE_MEASURED && brg_world_check_devices(brg_cli_world, x.p) != BRG_OK) {
            fprintf(stderr, "brigade bench: --devices %s: %s\n", a.devices, brg_last_error());
            rc = BRG_EXIT_USAGE;
            goto exit;
        }
        if (x.md == MODE_MEASURED && !brg_cli_check_devices_here("bench", brg_cli_world, specs, x.p)) {
            rc = BRG_EXIT_USAGE;
            goto exit;
        }
        if (x.md == MODE_MEASURED) {
            for (int d = 0; d < x.p; d++)
                if (!brg_backend_available(specs[d].backend)) {
                    say_backend_unavailable(d, specs[d].backend);
                    rc = BRG_EXIT_USAGE;
                    goto exit;
                }
        }
        x.model = model;
        base.devices = specs;
        base.n_devices = x.p;
        x.specs = specs;
        brg_cli_watchdog_phase("planning");
        const brg_status st = check_plannable(&x, &base);
        if (st != BRG_OK) {
            rc = brg_cli_fail("bench", st);
            if (a.profile && (st == BRG_ERR_IO || st == BRG_ERR_FORMAT)) rc = BRG_EXIT_USAGE;
            goto exit;
        }
        char ranks[32] = "";
        if (x.md == MODE_MEASURED && brg_world_size(brg_cli_world) > 1)
            snprintf(ranks, sizeof ranks, ", %d ranks", brg_world_size(brg_cli_world));
        snprintf(x.title_prefix, sizeof x.title_prefix, "%s, batch %lld%s: ", brg_model_name(model),
                 (long long)a.batch, ranks);
    }
    x.device_names = calloc((size_t)x.p, sizeof *x.device_names);
    cs = calloc((size_t)a.n_kinds * a.n_mbs, sizeof *cs);
    if (!x.device_names || !cs) goto oom;
    for (int d = 0; d < x.p; d++) {
        x.device_names[d] = malloc(32);
        if (!x.device_names[d]) goto oom;
        if (x.md == MODE_UNIT) snprintf(x.device_names[d], 32, "stage %d", d);
        else if (specs[d].backend == BRG_BACKEND_CPU) brg_device_spec_name(&specs[d], d, x.device_names[d], 32);
        else snprintf(x.device_names[d], 32, "%s:%d", brg_backend_name(specs[d].backend), d);
    }
    /* The setup's end, as train's and eval's: what the ranks wrote so far
     * (a model file's notes, say) is said once, and from here on each rank
     * writes its own at once (rank_stderr.c). */
    brg_cli_stderr_compare();
    const int total = a.n_kinds * a.n_mbs;
    for (int k = 0; k < a.n_kinds; k++)
        for (int j = 0; j < a.n_mbs; j++) {
            combo *c = &cs[n++];
            brg_cli_watchdog_begin(); /* its plan, pipeline and first step: a warm-up */
            c->kind = a.kinds[k];
            c->chunks = brg_schedule_kind_chunks(c->kind, c->kind == BRG_SCHEDULE_INTERLEAVED ? (int)a.chunks : 0);
            c->m = (int)a.mbs[j];
            c->fits = 1;
            c->analytic = NAN;
            c->stages = calloc((size_t)x.p, sizeof *c->stages);
            if (!c->stages) goto oom;
            brg_status st = x.md == MODE_UNIT        ? run_unit(&x, c)
                            : x.md == MODE_SIMULATED ? run_simulated(&x, &base, c)
                                                     : run_measured(&x, &base, c);
            if (st != BRG_OK) {
                char what[96], name[64];
                snprintf(what, sizeof what, "bench %s", brg_bench_combo_name(c, name, sizeof name));
                rc = brg_cli_fail(what, st);
                /* What the command line can get wrong was refused before the loop, or is a row. */
                if (rc == BRG_EXIT_USAGE) rc = BRG_EXIT_FAILURE;
                if (st == BRG_ERR_IO && a.trace) rc = BRG_EXIT_USAGE;
                /* A profile that cannot be read or does not match the model. */
                if (a.profile && (st == BRG_ERR_IO || st == BRG_ERR_FORMAT)) rc = BRG_EXIT_USAGE;
                goto exit;
            }
            if (brg_world_rank(brg_cli_world) == 0) brg_bench_progress(&x, c, n, total);
        }
    brg_bench_rank(cs, n, x.md);
    if (a.json) brg_bench_print_json(&x, cs, n);
    else brg_bench_print_table(&x, cs, n);
    /* Ranked first: the first row says whether any combination ran. */
    const int none = !brg_bench_ranked(&cs[0], x.md);
    if (a.trace && !a.json && !none)
        printf("\ntraces and timelines in %s/ (open *.trace.json in ui.perfetto.dev)\n", a.trace);
    rc = brg_cli_finish_stdout("bench", none ? BRG_EXIT_USAGE : BRG_EXIT_OK);
    /* As brigade plan's "nothing fits": these devices and this batch cannot work. */
    if (none && brg_world_rank(brg_cli_world) == 0)
        fprintf(stderr, "brigade bench: no combination %s: each row says why\n",
                x.md == MODE_MEASURED ? "ran" : x.md == MODE_SIMULATED ? "could be planned" : "could be built");
    goto exit;
oom:
    fprintf(stderr, "brigade bench: out of host memory\n");
    rc = BRG_EXIT_FAILURE;
exit:
    for (int i = 0; cs && i < n; i++) {
        free(cs[i].stages);
        free(cs[i].note);
        for (int k = 0; k < 3; k++) free(cs[i].files[k]);
    }
    free(cs);
    for (int d = 0; x.device_names && d < x.p; d++) free(x.device_names[d]);
    free(x.device_names);
    brg_model_destroy(model);
    free(specs);
    return rc;
}

int brg_cmd_bench(int argc, char **argv)
{
    bench_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc >= 0) return rc;
    /* Under mpirun every rank runs every combination (a measured one
     * spans them, each rank its own devices, and every rank gets every
     * device's times); rank 0 alone reports and writes the traces. */
    if (brg_world_rank(brg_cli_world) != 0) a.trace = NULL;
    /* every rank runs every combination in step with the others */
    if ((rc = brg_cli_ranks_agree_line("bench", argc, argv)) >= 0) return rc;
    /* A simulation waits on no other rank, and makes no progress to pet it with. */
    if (!a.simulate) brg_cli_watchdog_start("bench", (double)a.watchdog, (double)a.watchdog_setup);
    rc = run_bench(a);
    brg_cli_watchdog_stop();
    return rc;
}
