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

static void usage(FILE *out)
{
    fprintf(out,
            "usage: brigade plan MODEL --devices SPEC --batch B [options] [--json]\n"
            "\n"
            "Plan how MODEL (a zoo name or a JSON model file) trains on an ordered list of\n"
            "devices: cut it into one contiguous block range per device, so that the slowest\n"
            "stage is as fast as possible and every device's peak memory fits its capacity\n"
            "less a headroom. Each device's peak comes from a dry run of its real program\n"
            "(the same allocations training makes, without memory or kernels), so it is\n"
            "what 'brigade train' will allocate. Nothing runs on any device.\n"
            "\n"
            "options:\n"
            "  --devices SPEC        the devices in pipeline order, e.g. 7x12GiB or\n"
            "                        2x24GiB,5x12GiB (stage d runs on device d)\n"
            "  --batch B             samples per optimizer step\n"
            "  --microbatches M      split each batch into M equal micro-batches (M divides B;\n"
            "                        default: the largest divisor of B at most 4 per device)\n"
            "  --schedule KIND       gpipe, 1f1b (default), interleaved, zb-h1, or auto: try\n"
            "                        every schedule and micro-batch count (divisors of B up to\n"
            "                        64) and take the fastest that fits\n"
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
            "  --device-speed G      GFLOP/s one device sustains, for times and throughput\n"
            "                        (default 10000, i.e. 10 TFLOP/s)\n"
            "  --link-speed G        GB/s between consecutive stages (default 10; 0: free)\n"
            "  --profile FILE        per-layer times measured on real hardware (JSON, see\n"
            "                        docs/planning.md): they replace the FLOP-based times\n"
            "                        for the cuts, the stage times and the throughput\n"
            "  --json                print the plan as JSON\n"
            "  --input CxHxW         zoo models: input size\n"
            "  --classes N           zoo models: number of classes\n"
            "  --width-mult F        zoo models: channel multiplier\n"
            "  -h, --help            show this help\n"
            "\n"
            "Exit status: 0 the plan fits; 2 nothing fits (the message says why, the\n"
            "fewest devices that would do and the largest batch that fits), the command\n"
            "line is wrong or the --profile file is unreadable or malformed; 1 the model\n"
            "cannot be loaded or planned.\n"
            "\n"
            "examples:\n"
            "  brigade plan inception-v3 --devices 7x12GiB --batch 64\n"
            "  brigade plan inception-v3 --devices 2x24GiB,5x12GiB --batch 128 --schedule auto\n"
            "  brigade plan inception-v3 --devices 3x12GiB --batch 32 --split mixed2,mixed7\n"
            "  brigade plan resnet152 --devices 4x8GiB --batch 64 --recompute auto --json\n");
}

enum {
    OPT_DEVICES = 256,
    OPT_BATCH,
    OPT_MICROBATCHES,
    OPT_SCHEDULE,
    OPT_CHUNKS,
    OPT_RECOMPUTE,
    OPT_OPTIMIZER,
    OPT_HEADROOM,
    OPT_SPLIT,
    OPT_DEVICE_SPEED,
    OPT_LINK_SPEED,
    OPT_PROFILE,
    OPT_JSON,
    OPT_INPUT,
    OPT_CLASSES,
    OPT_WIDTH_MULT,
};

static const struct option plan_opts[] = {
    {"devices", required_argument, NULL, OPT_DEVICES},
    {"batch", required_argument, NULL, OPT_BATCH},
    {"microbatches", required_argument, NULL, OPT_MICROBATCHES},
    {"schedule", required_argument, NULL, OPT_SCHEDULE},
    {"chunks", required_argument, NULL, OPT_CHUNKS},
    {"recompute", required_argument, NULL, OPT_RECOMPUTE},
    {"optimizer", required_argument, NULL, OPT_OPTIMIZER},
    {"headroom", required_argument, NULL, OPT_HEADROOM},
    {"split", required_argument, NULL, OPT_SPLIT},
    {"device-speed", required_argument, NULL, OPT_DEVICE_SPEED},
    {"link-speed", required_argument, NULL, OPT_LINK_SPEED},
    {"profile", required_argument, NULL, OPT_PROFILE},
    {"json", no_argument, NULL, OPT_JSON},
    {"input", required_argument, NULL, OPT_INPUT},
    {"classes", required_argument, NULL, OPT_CLASSES},
    {"width-mult", required_argument, NULL, OPT_WIDTH_MULT},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

#define MAX_BATCH (1 << 24)
#define MAX_CLASSES ((int64_t)1 << 24)
#define MAX_WIDTH_MULT 1000.0
#define BAR_WIDTH 50

typedef struct plan_args {
    const char *spec;
    const char *devices;
    int64_t batch, micro_batches, chunks, classes;
    const char *schedule;
    const char *recompute;
    const char *optimizer;
    double headroom, device_gflops, link_gbs;
    int headroom_given;
    const char *split;
    const char *profile;
    int json;
    brg_zoo_options zoo;
    int zoo_given;
} plan_args;

/* A whole decimal number in [min, max] for option name; prints why not. */
static int parse_int(const char *name, const char *text, int64_t min, int64_t max, int64_t *value)
{
    char *end = NULL;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (text[0] == '\0' || text[0] == '+' || end == text || *end != '\0' || errno || v < min || v > max) {
        fprintf(stderr, "brigade plan: %s '%s' must be a whole number from %lld to %lld\n", name, text,
                (long long)min, (long long)max);
        return 0;
    }
    *value = v;
    return 1;
}

/* A finite number for option name, optionally ending in '%' (then divided
 * by 100) when percent is allowed; prints why not. */
static int parse_real(const char *name, const char *text, int percent, double *value)
{
    char *end = NULL;
    errno = 0;
    double v = strtod(text, &end);
    if (percent && end != text && *end == '%' && end[1] == '\0') {
        v /= 100.0;
        end++;
    }
    if (text[0] == '\0' || end == text || *end != '\0' || errno || !isfinite(v)) {
        fprintf(stderr, "brigade plan: %s '%s' is not a number\n", name, text);
        return 0;
    }
    *value = v;
    return 1;
}

/* Parse argv; -1 to go on, else the exit code. */
static int parse_args(int argc, char **argv, plan_args *a)
{
    memset(a, 0, sizeof *a);
    a->schedule = "1f1b";
    a->optimizer = "momentum";
    a->headroom = 0.05;
    a->device_gflops = 10000.0;
    a->link_gbs = 10.0;
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":h", plan_opts, NULL)) != -1) {
        switch (c) {
        case 'h': usage(stdout); return BRG_EXIT_OK;
        case OPT_DEVICES: a->devices = optarg; break;
        case OPT_BATCH:
            if (!parse_int("--batch", optarg, 1, MAX_BATCH, &a->batch)) return BRG_EXIT_USAGE;
            break;
        case OPT_MICROBATCHES:
            if (!parse_int("--microbatches", optarg, 1, MAX_BATCH, &a->micro_batches)) return BRG_EXIT_USAGE;
            break;
        case OPT_SCHEDULE: a->schedule = optarg; break;
        case OPT_CHUNKS:
            if (!parse_int("--chunks", optarg, 2, BRG_PROGRAM_MAX_CHUNKS, &a->chunks)) return BRG_EXIT_USAGE;
            break;
        case OPT_RECOMPUTE: a->recompute = optarg; break;
        case OPT_OPTIMIZER: a->optimizer = optarg; break;
        case OPT_HEADROOM:
            if (!parse_real("--headroom", optarg, 1, &a->headroom)) return BRG_EXIT_USAGE;
            if (!(a->headroom >= 0.0 && a->headroom <= 0.9)) {
                fprintf(stderr, "brigade plan: --headroom '%s' must be between 0 and 0.9 (or 0%% and 90%%)\n",
                        optarg);
                return BRG_EXIT_USAGE;
            }
            break;
        case OPT_SPLIT: a->split = optarg; break;
        case OPT_DEVICE_SPEED:
            if (!parse_real("--device-speed", optarg, 0, &a->device_gflops)) return BRG_EXIT_USAGE;
            if (!(a->device_gflops > 0.0)) {
                fprintf(stderr, "brigade plan: --device-speed '%s' must be a positive GFLOP/s\n", optarg);
                return BRG_EXIT_USAGE;
            }
            break;
        case OPT_LINK_SPEED:
            if (!parse_real("--link-speed", optarg, 0, &a->link_gbs)) return BRG_EXIT_USAGE;
            if (!(a->link_gbs >= 0.0)) {
                fprintf(stderr, "brigade plan: --link-speed '%s' must be 0 (free) or a positive GB/s\n", optarg);
                return BRG_EXIT_USAGE;
            }
            break;
        case OPT_PROFILE: a->profile = optarg; break;
        case OPT_JSON: a->json = 1; break;
        case OPT_INPUT:
            if (brg_cli_parse_input(optarg, &a->zoo) != BRG_OK) return BRG_EXIT_USAGE;
            a->zoo_given = 1;
            break;
        case OPT_CLASSES:
            if (!parse_int("--classes", optarg, 1, MAX_CLASSES, &a->zoo.classes)) return BRG_EXIT_USAGE;
            a->zoo_given = 1;
            break;
        case OPT_WIDTH_MULT:
            if (!parse_real("--width-mult", optarg, 0, &a->zoo.width_mult)) return BRG_EXIT_USAGE;
            if (!(a->zoo.width_mult > 0.0 && a->zoo.width_mult <= MAX_WIDTH_MULT)) {
                fprintf(stderr, "brigade plan: --width-mult '%s' must be greater than 0 and at most %g\n", optarg,
                        MAX_WIDTH_MULT);
                return BRG_EXIT_USAGE;
            }
            a->zoo_given = 1;
            break;
        case ':':
            fprintf(stderr, "brigade plan: option '%s' needs a value\n", argv[optind - 1]);
            fprintf(stderr, "Try 'brigade plan --help'.\n");
            return BRG_EXIT_USAGE;
        default: {
            const char *arg = argv[optind - 1];
            if (strncmp(arg, "--", 2) == 0 && strchr(arg, '='))
                fprintf(stderr, "brigade plan: unknown option '%s', or it does not take a value\n", arg);
            else if (strncmp(arg, "--", 2) == 0 || optopt <= 0 || optopt >= 256)
                fprintf(stderr, "brigade plan: unknown option '%s'\n", arg);
            else
                fprintf(stderr, "brigade plan: unknown option '-%c'\n", optopt);
            fprintf(stderr, "Try 'brigade plan --help'.\n");
            return BRG_EXIT_USAGE;
        }
        }
    }
    if (argc - optind < 1) {
        fprintf(stderr, "brigade plan: missing MODEL (a zoo name or a JSON model file)\n");
        fprintf(stderr, "Try 'brigade plan --help'.\n");
        return BRG_EXIT_USAGE;
    }
    if (argc - optind > 1) {
        fprintf(stderr, "brigade plan: unexpected argument '%s'\n", argv[optind + 1]);
        fprintf(stderr, "Try 'brigade plan --help'.\n");
        return BRG_EXIT_USAGE;
    }
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
    if (strcmp(a->schedule, "auto") == 0) {
        o->schedule_auto = 1;
        o->schedule = BRG_SCHEDULE_1F1B;
        o->recompute = BRG_RECOMPUTE_AUTO;
    } else if (brg_schedule_kind_parse(a->schedule, &o->schedule) != BRG_OK) {
        fprintf(stderr, "brigade plan: unknown --schedule '%s' (expected gpipe, 1f1b, interleaved, zb-h1 or auto)\n",
                a->schedule);
        return 0;
    }
    if (a->chunks && o->schedule != BRG_SCHEDULE_INTERLEAVED && !o->schedule_auto) {
        fprintf(stderr, "brigade plan: --chunks applies to --schedule interleaved (or auto), not %s\n", a->schedule);
        return 0;
    }
    o->chunks = (int)a->chunks;
    if (a->recompute && brg_recompute_parse(a->recompute, &o->recompute) != BRG_OK) {
        fprintf(stderr, "brigade plan: unknown --recompute '%s' (expected none, all or auto)\n", a->recompute);
        return 0;
    }
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
    if (a->split && o->schedule_auto) {
        fprintf(stderr, "brigade plan: --split needs a fixed --schedule: auto may change the number of stages\n");
        return 0;
    }
    o->batch = (int)a->batch;
    o->micro_batches = (int)a->micro_batches;
    if (o->micro_batches && a->batch % a->micro_batches) {
        fprintf(stderr, "brigade plan: --microbatches %lld does not divide --batch %lld into equal micro-batches\n",
                (long long)a->micro_batches, (long long)a->batch);
        return 0;
    }
    o->headroom = a->headroom;
    o->device_flops = a->device_gflops * 1e9;
    o->profile_path = a->profile;
    o->link_bytes_per_s = a->link_gbs * 1e9;
    return 1;
}

/* Block indices of the names in text ("mixed2,mixed5"): a stage ends after
 * each. Prints why not and returns 0 on an unknown or repeated name. */
static int parse_split(const brg_model *m, const char *text, int **cuts, int *n)
{
    *cuts = NULL;
    *n = 0;
    size_t len = strlen(text);
    char *copy = malloc(len + 1);
    int *ids = malloc((len / 2 + 2) * sizeof *ids);
    if (!copy || !ids) {
        free(copy);
        free(ids);
        fprintf(stderr, "brigade plan: out of host memory\n");
        return 0;
    }
    memcpy(copy, text, len + 1);
    int count = 0, ok = 1;
    char *save = NULL;
    if (len == 0 || text[0] == ',' || text[len - 1] == ',' || strstr(text, ",,")) {
        fprintf(stderr, "brigade plan: --split '%s': expected block names separated by commas, e.g. mixed2,mixed7\n",
                text);
        ok = 0;
    }
    for (char *name = ok ? strtok_r(copy, ",", &save) : NULL; name && ok; name = strtok_r(NULL, ",", &save)) {
        int b = brg_model_find_block(m, name);
        if (b < 0) {
            fprintf(stderr, "brigade plan: --split: model '%s' has no block '%s'; its blocks are:", brg_model_name(m),
                    name);
            const int nb = brg_model_block_count(m);
            for (int i = 0; i < nb && i < 40; i++) fprintf(stderr, " %s", brg_model_block_name(m, i));
            fprintf(stderr, "%s\n", nb > 40 ? " ..." : "");
            ok = 0;
        } else if (b == brg_model_block_count(m) - 1) {
            fprintf(stderr, "brigade plan: --split: '%s' is the last block; a cut goes after a block that has "
                            "another after it\n", name);
            ok = 0;
        } else {
            ids[count++] = b;
        }
    }
    free(copy);
    if (!ok) {
        free(ids);
        return 0;
    }
    *cuts = ids;
    *n = count;
    return 1;
}

/* ---- printing ---- */

static char *fmt_bytes(size_t b, char *buf, size_t size) { return brg_format_bytes(b, buf, size); }

/* A count in a few characters: 931, 12.3K, 4.56M, 1.2G. */
static char *fmt_count(int64_t v, char *buf, size_t size)
{
    double x = (double)v;
    if (x < 1e3) snprintf(buf, size, "%lld", (long long)v);
    else if (x < 1e6) snprintf(buf, size, "%.3gK", x / 1e3);
    else if (x < 1e9) snprintf(buf, size, "%.3gM", x / 1e6);
    else snprintf(buf, size, "%.3gG", x / 1e9);
    return buf;
}

/* Seconds as ms or s, 3 significant digits. */
static char *fmt_time(double s, char *buf, size_t size)
{
    if (s < 1e-3) snprintf(buf, size, "%.3g us", s * 1e6);
    else if (s < 1.0) snprintf(buf, size, "%.3g ms", s * 1e3);
    else snprintf(buf, size, "%.3g s", s);
    return buf;
}

/* The block ranges of a stage: "stem..mixed2", chunks joined by " + ",
 * recomputed ones marked with '*'. */
static void fmt_blocks(const brg_model *m, const brg_plan_stage *st, char *buf, size_t size)
{
    size_t len = 0;
    buf[0] = '\0';
    for (int c = 0; c < st->part.chunks && len < size; c++) {
        const char *a = brg_model_block_name(m, st->part.first_block[c]);
        const char *b = brg_model_block_name(m, st->part.last_block[c]);
        if (st->part.first_block[c] == st->part.last_block[c])
            len += (size_t)snprintf(buf + len, size - len, "%s%s%s", c ? " + " : "", a,
                                    st->part.recompute[c] ? "*" : "");
        else
            len += (size_t)snprintf(buf + len, size - len, "%s%s..%s%s", c ? " + " : "", a, b,
                                    st->part.recompute[c] ? "*" : "");
    }
}

static int imax(int a, int b) { return a > b ? a : b; }

/* One row of the stage table, as strings (measured before printing). */
typedef struct row {
    char stage[16], device[32], capacity[32], blocks[512], params[32], stash[64], peak[32], share[16], time[32];
} row;

static void print_table(const brg_plan *plan)
{
    const brg_plan_info *in = brg_plan_get_info(plan);
    const brg_model *m = brg_plan_get_model(plan);
    const int p = in->devices;
    row *rows = calloc((size_t)p + 1, sizeof *rows);
    if (!rows) return;
    row *h = &rows[0];
    snprintf(h->stage, sizeof h->stage, "stage");
    snprintf(h->device, sizeof h->device, "device");
    snprintf(h->capacity, sizeof h->capacity, "capacity");
    snprintf(h->blocks, sizeof h->blocks, "blocks");
    snprintf(h->params, sizeof h->params, "params");
    snprintf(h->stash, sizeof h->stash, "stash/mb x in flight");
    snprintf(h->peak, sizeof h->peak, "peak");
    snprintf(h->share, sizeof h->share, "of cap");
    snprintf(h->time, sizeof h->time, "fwd+bwd/mb");
    int any_rc = 0;
    for (int d = 0; d < p; d++) {
        const brg_plan_stage *st = brg_plan_get_stage(plan, d);
        row *r = &rows[d + 1];
        char b1[32];
        snprintf(r->stage, sizeof r->stage, "%d", d);
        snprintf(r->device, sizeof r->device, "%s:%d", brg_backend_name(st->spec.backend), d);
        fmt_bytes(st->capacity_bytes, r->capacity, sizeof r->capacity);
        fmt_blocks(m, st, r->blocks, sizeof r->blocks);
        fmt_count(st->params, r->params, sizeof r->params);
        snprintf(r->stash, sizeof r->stash, "%s x %d", fmt_bytes(st->stash_bytes, b1, sizeof b1), st->in_flight);
        fmt_bytes(st->peak_bytes, r->peak, sizeof r->peak);
        snprintf(r->share, sizeof r->share, "%.1f%%", 100.0 * (double)st->peak_bytes / (double)st->capacity_bytes);
        fmt_time(st->time_s, r->time, sizeof r->time);
        for (int c = 0; c < st->part.chunks; c++) any_rc |= st->part.recompute[c];
    }
    int w[9] = {0};
    for (int i = 0; i <= p; i++) {
        const row *r = &rows[i];
        const char *f[9] = {r->stage, r->device, r->capacity, r->blocks, r->params, r->stash, r->peak, r->share, r->time};
        for (int k = 0; k < 9; k++) w[k] = imax(w[k], (int)strlen(f[k]));
    }
    for (int i = 0; i <= p; i++) {
        const row *r = &rows[i];
        const brg_plan_stage *st = i ? brg_plan_get_stage(plan, i - 1) : NULL;
        printf("%*s  %-*s  %*s  %-*s  %*s  %*s  %*s  %*s  %*s%s\n", w[0], r->stage, w[1], r->device, w[2],
               r->capacity, w[3], r->blocks, w[4], r->params, w[5], r->stash, w[6], r->peak, w[7], r->share, w[8],
               r->time, st && !st->fits ? "  DOES NOT FIT" : "");
    }
    if (any_rc) printf("* recomputed in the backward: the stage keeps only its inputs per micro-batch\n");
    free(rows);
}

/* The peaks as bars: the full width is the capacity, '|' marks the
 * capacity less the headroom, '>' a peak beyond the capacity. */
static void print_bars(const brg_plan *plan)
{
    const brg_plan_info *in = brg_plan_get_info(plan);
    printf("\npeak per stage (full width = capacity, '|' = capacity less %.0f%% headroom)\n", in->headroom * 100.0);
    const int mark = (int)floor((1.0 - in->headroom) * BAR_WIDTH + 0.5);
    for (int d = 0; d < in->devices; d++) {
        const brg_plan_stage *st = brg_plan_get_stage(plan, d);
        const double share = (double)st->peak_bytes / (double)st->capacity_bytes;
        int fill = (int)ceil(share * BAR_WIDTH - 1e-9);
        if (fill > BAR_WIDTH) fill = BAR_WIDTH;
        char bar[BAR_WIDTH + 2];
        for (int i = 0; i < BAR_WIDTH; i++) bar[i] = i < fill ? '#' : '.';
        if (mark > 0 && mark < BAR_WIDTH && mark >= fill) bar[mark] = '|';
        bar[BAR_WIDTH] = share > 1.0 ? '>' : ']';
        bar[BAR_WIDTH + 1] = '\0';
        char b1[32], b2[32];
        printf("%4d [%s %5.1f%%  %s of %s\n", d, bar, 100.0 * share, fmt_bytes(st->peak_bytes, b1, sizeof b1),
               fmt_bytes(st->capacity_bytes, b2, sizeof b2));
    }
}

static const char *optimizer_text(const brg_plan_options *o, char *buf, size_t size)
{
    if (o->optimizer.kind == BRG_OPTIMIZER_ADAM) snprintf(buf, size, "Adam");
    else if (o->optimizer.momentum > 0.0f) snprintf(buf, size, "SGD momentum %g", (double)o->optimizer.momentum);
    else snprintf(buf, size, "SGD");
    return buf;
}

static void print_plan(const brg_plan *plan, const brg_plan_options *o)
{
    const brg_plan_info *in = brg_plan_get_info(plan);
    const brg_model *m = brg_plan_get_model(plan);
    const brg_model_tensor *x = brg_model_get_tensor(m, brg_model_input(m));
    char b1[32], b2[32], b3[32], opt[32];
    printf("%s (%lldx%lldx%lld, %s trainable parameters, %d blocks) on %d device%s, batch %d\n", brg_model_name(m),
           (long long)x->c, (long long)x->h, (long long)x->w, fmt_count(brg_model_trainable_params(m), b1, sizeof b1),
           in->blocks, in->devices, in->devices == 1 ? "" : "s", in->batch);
    char chunks[48] = "";
    if (in->chunks > 1) snprintf(chunks, sizeof chunks, " with %d chunks per device", in->chunks);
    printf("%s%s, %d micro-batch%s of %d, recomputation %s, %s, headroom %g%%\n",
           brg_schedule_kind_name(in->schedule), chunks, in->micro_batches, in->micro_batches == 1 ? "" : "es",
           in->micro_batch, brg_recompute_name(in->recompute), optimizer_text(o, opt, sizeof opt),
           in->headroom * 100.0);
    if (in->feasible && in->note && in->note[0]) printf("%s\n", in->note);
    printf("\n");
    print_table(plan);
    double gflops = in->device_flops / 1e9;
    char speed[32];
    if (gflops >= 1000.0) snprintf(speed, sizeof speed, "%g TFLOP/s", gflops / 1000.0);
    else snprintf(speed, sizeof speed, "%g GFLOP/s", gflops);
    char link[48];
    if (in->link_bytes_per_s > 0) snprintf(link, sizeof link, "%g GB/s between stages", in->link_bytes_per_s / 1e9);
    else snprintf(link, sizeof link, "free transfers");
    printf("\npredicted: bubble %.1f%%, %.4g samples/s (%s per step, slowest stage %s per micro-batch)\n",
           in->bubble * 100.0, in->samples_per_s, fmt_time(in->step_s, b2, sizeof b2),
           fmt_time(in->bottleneck_s, b3, sizeof b3));
    if (in->profile) printf("           at measured per-layer times from %s and %s\n", in->profile, link);
    else printf("           at an assumed %s per device and %s\n", speed, link);
    int verified = 1;
    for (int d = 0; d < in->devices; d++) verified &= brg_plan_get_stage(plan, d)->verified;
    printf("peaks: %s\n", verified ? "from a dry run of each device's program (what training allocates)"
                                   : "estimated by the cost model (not dry-run)");
    print_bars(plan);
}

/* A failed write to stdout is a failure, not a success. */
static int finish_stdout(int code)
{
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "brigade plan: cannot write to standard output\n");
        return BRG_EXIT_FAILURE;
    }
    return code;
}

int brg_cmd_plan(int argc, char **argv)
{
    plan_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc >= 0) return rc;
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
    brg_status st = brg_device_spec_parse(a.devices, specs, BRG_PLAN_MAX_DEVICES, &n);
    if (st != BRG_OK) {
        fprintf(stderr, "brigade plan: --devices: %s\n", brg_last_error());
        rc = BRG_EXIT_USAGE;
        goto exit;
    }
    o.devices = specs;
    o.n_devices = n;
    brg_clear_error();
    st = brg_cli_load_model(a.spec, &a.zoo, a.zoo_given, &model);
    if (st != BRG_OK) {
        /* brg_cli_load_model prints its own message for a bad MODEL. */
        if (brg_last_error()[0]) rc = brg_cli_fail("loading the model", st);
        else rc = st == BRG_ERR_INVALID_ARGUMENT ? BRG_EXIT_USAGE : BRG_EXIT_FAILURE;
        goto exit;
    }
    if (a.split) {
        if (!parse_split(model, a.split, &cuts, &o.n_split)) {
            rc = BRG_EXIT_USAGE;
            goto exit;
        }
        o.split = cuts;
    }
    st = brg_plan_create(model, &o, &plan);
    if (st != BRG_OK) {
        rc = brg_cli_fail("plan", st);
        /* A profile that cannot be read or does not match is a usage error. */
        if (a.profile && (st == BRG_ERR_IO || st == BRG_ERR_FORMAT)) rc = BRG_EXIT_USAGE;
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
        free(text);
    } else if (in->partitioned) {
        print_plan(plan, &o);
    }
    if (!in->feasible) {
        fprintf(stderr, "brigade plan: %s\n", in->note && in->note[0] ? in->note : "nothing fits");
        rc = finish_stdout(BRG_EXIT_USAGE);
    } else {
        rc = finish_stdout(BRG_EXIT_OK);
    }
exit:
    brg_plan_destroy(plan);
    brg_model_destroy(model);
    free(cuts);
    free(specs);
    return rc;
}
