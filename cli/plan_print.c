/* brigade command line: plans, shared by 'brigade plan' and 'brigade train'
 * (the options they share, --split, and the plan's table and bars). */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli-lib.h"
#include "plan_print.h"

#define BAR_WIDTH 50

/* --headroom, --device-speed and --link-speed; see plan_print.h. */
int brg_cli_plan_number(const char *cmd, const char *name, const char *text, brg_plan_options *o)
{
    double v = 0.0;
    if (strcmp(name, "--headroom") == 0) {
        if (!brg_cli_parse_real(cmd, name, text, 1, &v)) return 0;
        if (!(v >= 0.0 && v <= 0.9)) {
            brg_cli_error(cmd, "--headroom '%s' must be between 0 and 0.9 (or 0%% and 90%%)", text);
            return 0;
        }
        o->headroom = v;
    } else if (strcmp(name, "--device-speed") == 0) {
        if (!brg_cli_parse_real(cmd, name, text, 0, &v)) return 0;
        if (!(v > 0.0)) {
            brg_cli_error(cmd, "--device-speed '%s' must be a positive GFLOP/s", text);
            return 0;
        }
        if (!isfinite(v * 1e9)) {
            brg_cli_error(cmd, "--device-speed '%s' is too large (GFLOP/s: 10000 is 10 TFLOP/s)", text);
            return 0;
        }
        o->device_flops = v * 1e9;
        o->cpu_calibration = 0; /* the speed given, not this CPU's */
    } else {
        if (!brg_cli_parse_real(cmd, name, text, 0, &v)) return 0;
        if (!(v >= 0.0)) {
            brg_cli_error(cmd, "--link-speed '%s' must be 0 (free) or a positive GB/s", text);
            return 0;
        }
        if (!isfinite(v * 1e9)) {
            brg_cli_error(cmd, "--link-speed '%s' is too large (GB/s)", text);
            return 0;
        }
        o->link_bytes_per_s = v * 1e9;
    }
    return 1;
}

int brg_cli_plan_times(const char *cmd, const brg_plan_options *given, int ranks, brg_plan_options *o)
{
    o->profile_path = given->profile_path;
    o->device_flops = given->device_flops;
    /* Each rank plans for itself: times measured on each would differ
     * and so would the cuts. BRG_CPU_CALIBRATION=off keeps plans the same
     * on every machine (the tests' byte counts and cuts). */
    const char *env = getenv("BRG_CPU_CALIBRATION");
    const int off = env && (strcmp(env, "off") == 0 || strcmp(env, "0") == 0);
    o->cpu_calibration = given->cpu_calibration && ranks == 1 && !off;
    if (ranks > 1 && o->profile_path && strcmp(o->profile_path, BRG_PROFILE_AUTO) == 0) {
        brg_cli_error(cmd, "--profile auto measures on each process apart, and the ranks must agree on one plan: "
                      "measure once with 'brigade model profile ... -o FILE' and give --profile FILE");
        return 0;
    }
    return 1;
}

int brg_cli_parse_recompute(const char *cmd, const char *text, brg_recompute *mode)
{
    if (brg_recompute_parse(text, mode) == BRG_OK) return 1;
    brg_cli_error(cmd, "unknown --recompute '%s' (expected none, all or auto)", text);
    return 0;
}

/* Schedule names and the options that go with them; see plan_print.h. */
int brg_cli_plan_schedule(const char *cmd, const char *schedule, int chunks, const char *recompute, int split,
                          brg_plan_options *o)
{
    if (strcmp(schedule, "auto") == 0) {
        o->schedule_auto = 1;
        o->schedule = BRG_SCHEDULE_1F1B;
        o->recompute = BRG_RECOMPUTE_AUTO;
    } else if (brg_schedule_kind_parse(schedule, &o->schedule) != BRG_OK) {
        brg_cli_error(cmd,
                      "unknown --schedule '%s' (expected gpipe, 1f1b, interleaved, zb-h1, zb-h2, zb-v, v-half, v-min "
                      "or auto)", schedule);
        return 0;
    }
    if (chunks && o->schedule != BRG_SCHEDULE_INTERLEAVED && !o->schedule_auto) {
        brg_cli_error(cmd, "--chunks applies to --schedule interleaved (or auto), not %s", schedule);
        return 0;
    }
    o->chunks = chunks;
    if (recompute && !brg_cli_parse_recompute(cmd, recompute, &o->recompute)) return 0;
    if (split && o->schedule_auto) {
        brg_cli_error(cmd, "--split needs a fixed --schedule: auto may change the number of stages");
        return 0;
    }
    return 1;
}

/* What --split's items go to: the model, the cuts so far (room for one
 * per item). */
typedef struct split_ctx {
    const char *cmd;
    const brg_model *m;
    int *ids, count;
} split_ctx;

/* One block name of --split; prints why not and returns 0 on an unknown
 * name or the last block. */
static int take_cut(void *ctx, const char *name)
{
    split_ctx *x = ctx;
    const int nb = brg_model_block_count(x->m), b = brg_model_find_block(x->m, name);
    if (b < 0) {
        char blocks[2048];
        size_t len = 0;
        blocks[0] = '\0';
        for (int i = 0; i < nb && i < 40 && len < sizeof blocks; i++)
            len += (size_t)snprintf(blocks + len, sizeof blocks - len, " %s", brg_model_block_name(x->m, i));
        const char *comma = NULL; /* --split's commas cut such a name in two */
        for (int i = 0; i < nb && !comma; i++)
            if (strchr(brg_model_block_name(x->m, i), ',')) comma = brg_model_block_name(x->m, i);
        brg_cli_error(x->cmd, "--split: model '%s' has no block '%s'; its blocks are:%s%s%s%s%s", brg_model_name(x->m),
                      name, blocks, nb > 40 ? " ..." : "", comma ? " (block '" : "", comma ? comma : "",
                      comma ? "' has a comma, which --split reads as two names: rename it in the model file)" : "");
        return 0;
    }
    if (b == nb - 1) {
        brg_cli_error(x->cmd, "--split: '%s' is the last block; a cut goes after a block that has another after it",
                      name);
        return 0;
    }
    x->ids[x->count++] = b;
    return 1;
}

brg_cli_plan_args brg_cli_plan_args_init(void)
{
    brg_cli_plan_args p;
    memset(&p, 0, sizeof p);
    p.schedule = "1f1b";
    p.numbers = brg_plan_options_init();
    p.numbers.cpu_calibration = 1;
    return p;
}

int brg_cli_plan_option(const char *cmd, int opt, const char *text, brg_cli_plan_args *p)
{
    switch (opt) {
    case BRG_CLI_OPT_SCHEDULE: p->schedule = text; return 1;
    case BRG_CLI_OPT_CHUNKS: return brg_cli_parse_int(cmd, "--chunks", text, 2, BRG_PROGRAM_MAX_CHUNKS, &p->chunks);
    case BRG_CLI_OPT_RECOMPUTE: p->recompute = text; return 1;
    case BRG_CLI_OPT_SPLIT: p->split = text; return 1;
    case BRG_CLI_OPT_HEADROOM: return brg_cli_plan_number(cmd, "--headroom", text, &p->numbers);
    case BRG_CLI_OPT_DEVICE_SPEED: return brg_cli_plan_number(cmd, "--device-speed", text, &p->numbers);
    case BRG_CLI_OPT_LINK_SPEED: return brg_cli_plan_number(cmd, "--link-speed", text, &p->numbers);
    case BRG_CLI_OPT_PROFILE: p->numbers.profile_path = text; return 1;
    case BRG_CLI_OPT_REPLICAS: {
        int64_t d = 1;
        if (!brg_cli_parse_int(cmd, "--replicas", text, 1, 4096, &d)) return 0;
        p->numbers.replicas = (int)d;
        return 1;
    }
    case BRG_CLI_OPT_SYNC_BN: p->numbers.sync_batchnorm = 1; return 1;
    default: return -1;
    }
}

int brg_cli_plan_apply(const char *cmd, const brg_cli_plan_args *p, int ranks, brg_plan_options *o)
{
    if (!brg_cli_plan_schedule(cmd, p->schedule, (int)p->chunks, p->recompute, p->split != NULL, o)) return 0;
    o->headroom = p->numbers.headroom;
    o->link_bytes_per_s = p->numbers.link_bytes_per_s;
    if (!brg_cli_plan_times(cmd, &p->numbers, ranks, o)) return 0;
    o->replicas = p->numbers.replicas;
    o->sync_batchnorm = p->numbers.sync_batchnorm;
    if (o->sync_batchnorm && o->replicas < 2) {
        brg_cli_error(cmd, "--sync-bn synchronizes BatchNorm over data-parallel replicas; give --replicas 2 or more "
                      "with it (one replica's BatchNorm already sees its whole micro-batch)");
        return 0;
    }
    return 1;
}

int brg_cli_plan_replicas(const char *cmd, int replicas, const brg_device_spec *specs, int *n, int64_t batch,
                          int64_t *replica_batch)
{
    *replica_batch = batch;
    if (replicas <= 1) return 1;
    if (*n % replicas) {
        brg_cli_error(cmd, "--replicas %d: %d device%s cannot be shared by %d replicas; list every replica's devices, "
                      "%d times the stages of one", replicas, *n, *n == 1 ? "" : "s", replicas, replicas);
        return 0;
    }
    if (batch % replicas) {
        brg_cli_error(cmd, "--replicas %d: a batch of %lld does not split into %d equal shares; give a multiple of %d",
                      replicas, (long long)batch, replicas, replicas);
        return 0;
    }
    const int P = *n / replicas;
    for (int d = P; d < *n; d++) {
        const brg_device_spec *a = &specs[d % P], *b = &specs[d];
        if (a->backend != b->backend || a->capacity != b->capacity) {
            char na[64], nb[64];
            brg_cli_error(cmd, "--replicas %d: device %d (%s) is stage %d of replica %d, but stage %d of replica 0 "
                          "is device %d (%s); every replica takes devices of the same kinds and sizes, in the same "
                          "order", replicas, d, brg_device_spec_name(b, d, nb, sizeof nb), d % P, d / P, d % P,
                          d % P, brg_device_spec_name(a, d % P, na, sizeof na));
            return 0;
        }
    }
    *n = P;
    *replica_batch = batch / replicas;
    return 1;
}

/* Block indices of the names in text ("mixed2,mixed5"): a stage ends after
 * each. Prints why not and returns 0 on an unknown name or the last block. */
int brg_cli_parse_split(const char *cmd, const brg_model *m, const char *text, int **cuts, int *n)
{
    *cuts = NULL;
    *n = 0;
    split_ctx x = {cmd, m, malloc((strlen(text) / 2 + 2) * sizeof *x.ids), 0}; /* items are 1+ chars and a comma */
    if (!x.ids) {
        brg_cli_error(cmd, "out of host memory");
        return 0;
    }
    if (!brg_cli_parse_list(cmd, "--split", text, "block names separated by commas, e.g. mixed2,mixed7", &x,
                            take_cut)) {
        free(x.ids);
        return 0;
    }
    *cuts = x.ids;
    *n = x.count;
    return 1;
}

/* A unit holds what rounds below 1000 in 3 significant digits: from
 * 999.5 up "%.3g" prints 1e+03, which is the next unit's 1. */
#define ROUNDS_BELOW_1000 999.5

/* A count in a few characters: 931, 12.3K, 4.56M, 1.2G. */
char *brg_cli_format_count(int64_t v, char *buf, size_t size)
{
    double x = (double)v;
    if (x < 1e3) snprintf(buf, size, "%lld", (long long)v);
    else if (x < ROUNDS_BELOW_1000 * 1e3) snprintf(buf, size, "%.3gK", x / 1e3);
    else if (x < ROUNDS_BELOW_1000 * 1e6) snprintf(buf, size, "%.3gM", x / 1e6);
    else snprintf(buf, size, "%.3gG", x / 1e9);
    return buf;
}

/* Seconds as ns, us, ms or s, 3 significant digits. Less than what rounds
 * to 1 ns (only at speeds no device has, e.g. --device-speed 1e8) is "<1 ns"
 * rather than "2.42e-05 us"; 0 is "0 s". */
char *brg_cli_format_time(double s, char *buf, size_t size)
{
    if (!(s > 0.0)) snprintf(buf, size, "%.3g s", s);
    else if (s < 0.9995e-9) snprintf(buf, size, "<1 ns");
    else if (s < ROUNDS_BELOW_1000 * 1e-9) snprintf(buf, size, "%.3g ns", s * 1e9);
    else if (s < ROUNDS_BELOW_1000 * 1e-6) snprintf(buf, size, "%.3g us", s * 1e6);
    else if (s < ROUNDS_BELOW_1000 * 1e-3) snprintf(buf, size, "%.3g ms", s * 1e3);
    else snprintf(buf, size, "%.3g s", s);
    return buf;
}

char *brg_cli_format_rate(double v, char *buf, size_t size)
{
    if (v >= 9999.5) snprintf(buf, size, "%.0f", v);
    else snprintf(buf, size, "%.4g", v);
    return buf;
}

char *brg_cli_format_speed(double flops, char *buf, size_t size)
{
    if (flops >= 1e12) snprintf(buf, size, "%g TFLOP/s", flops / 1e12);
    else snprintf(buf, size, "%g GFLOP/s", flops / 1e9);
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

/* A stage whose peak is within its budget but whose dry run does not
 * complete there: its buffers leave the free bytes in pieces, and it needs
 * an arena of arena_bytes. */
static int fragmented(const brg_plan_stage *st)
{
    return st->verified && !st->fits && st->peak_bytes <= st->budget_bytes && st->arena_bytes > st->budget_bytes;
}

const char *brg_cli_fit_marker(const brg_plan_stage *st, char *buf, size_t size)
{
    char b[32];
    if (!st || st->fits) snprintf(buf, size, "%s", "");
    else if (fragmented(st))
        snprintf(buf, size, "DOES NOT FIT: fragmented, needs an arena of %s",
                 brg_format_bytes(st->arena_bytes, b, sizeof b));
    else snprintf(buf, size, "DOES NOT FIT");
    return buf;
}

/* One row of the stage table, as strings (measured before printing). */
typedef struct row {
    char stage[16], device[32], capacity[32], blocks[512], params[32], stash[160], recv[32], peak[32], share[16],
        time[32];
} row;

static void print_table(const brg_plan *plan)
{
    const brg_plan_info *in = brg_plan_get_info(plan);
    const brg_model *m = brg_plan_model(plan);
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
    snprintf(h->recv, sizeof h->recv, "recv bufs");
    snprintf(h->peak, sizeof h->peak, "peak");
    snprintf(h->share, sizeof h->share, "of cap");
    snprintf(h->time, sizeof h->time, "fwd+bwd/mb");
    int any_rc = 0;
    for (int d = 0; d < p; d++) {
        const brg_plan_stage *st = brg_plan_get_stage(plan, d);
        row *r = &rows[d + 1];
        char b1[32];
        snprintf(r->stage, sizeof r->stage, "%d", d);
        brg_device_spec_name(&st->spec, d, r->device, sizeof r->device); /* "cpu:1", "cuda:0.3", "cuda:local.1" */
        brg_format_bytes(st->capacity_bytes, r->capacity, sizeof r->capacity);
        fmt_blocks(m, st, r->blocks, sizeof r->blocks);
        brg_cli_format_count(st->params, r->params, sizeof r->params);
        /* per chunk: each in-flight micro-batch holds its own chunk's stash */
        size_t at = 0;
        for (int c = 0; c < st->part.chunks && at < sizeof r->stash; c++)
            at += (size_t)snprintf(r->stash + at, sizeof r->stash - at, "%s%s x %d", c ? " + " : "",
                                   brg_format_bytes(st->chunk_stash_bytes[c], b1, sizeof b1), st->chunk_in_flight[c]);
        if (st->receive_bytes) brg_format_bytes(st->receive_bytes, r->recv, sizeof r->recv);
        else snprintf(r->recv, sizeof r->recv, "-");
        brg_format_bytes(st->peak_bytes, r->peak, sizeof r->peak);
        snprintf(r->share, sizeof r->share, "%.1f%%", 100.0 * (double)st->peak_bytes / (double)st->capacity_bytes);
        brg_cli_format_time(st->time_s, r->time, sizeof r->time);
        for (int c = 0; c < st->part.chunks; c++) any_rc |= st->part.recompute[c];
    }
    int w[10] = {0};
    for (int i = 0; i <= p; i++) {
        const row *r = &rows[i];
        const char *f[10] = {r->stage, r->device, r->capacity, r->blocks, r->params,
                             r->stash, r->recv,   r->peak,     r->share,  r->time};
        for (int k = 0; k < 10; k++) w[k] = imax(w[k], (int)strlen(f[k]));
    }
    for (int i = 0; i <= p; i++) {
        const row *r = &rows[i];
        char marker[96];
        brg_cli_fit_marker(i ? brg_plan_get_stage(plan, i - 1) : NULL, marker, sizeof marker);
        printf("%*s  %-*s  %*s  %-*s  %*s  %*s  %*s  %*s  %*s  %*s%s%s\n", w[0], r->stage, w[1], r->device, w[2],
               r->capacity, w[3], r->blocks, w[4], r->params, w[5], r->stash, w[6], r->recv, w[7], r->peak, w[8],
               r->share, w[9], r->time, marker[0] ? "  " : "", marker);
    }
    if (any_rc) printf("* recomputed in the backward: the stage keeps only its inputs per micro-batch\n");
    free(rows);
}

/* The peaks as bars: the full width is the capacity, '|' marks the
 * capacity less the headroom (where it falls inside the bar, also over
 * the peak's '#'), '>' a peak beyond the capacity. */
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
        /* over the peak too: a peak that passes it shows so */
        if (mark > 0 && mark < BAR_WIDTH) bar[mark] = '|';
        bar[BAR_WIDTH] = share > 1.0 ? '>' : ']';
        bar[BAR_WIDTH + 1] = '\0';
        char b1[32], b2[32], b3[32];
        printf("%4d [%s %5.1f%%  %s of %s%s%s\n", d, bar, 100.0 * share,
               brg_format_bytes(st->peak_bytes, b1, sizeof b1), brg_format_bytes(st->capacity_bytes, b2, sizeof b2),
               fragmented(st) ? ", needs an arena of " : "",
               fragmented(st) ? brg_format_bytes(st->arena_bytes, b3, sizeof b3) : "");
    }
}

static const char *optimizer_text(const brg_plan_options *o, char *buf, size_t size)
{
    if (o->optimizer.kind == BRG_OPTIMIZER_ADAM) snprintf(buf, size, "Adam");
    else if (o->optimizer.momentum > 0.0f) snprintf(buf, size, "SGD momentum %g", (double)o->optimizer.momentum);
    else snprintf(buf, size, "SGD");
    return buf;
}

/* Whether stage e's card continues the run of stage e - 1's: the same
 * card, on the next GPU, or cuda:local again (each rank's own GPU), so
 * that "cuda:0 to cuda:3" never hides a gap (cuda:0@12GiB,5@12GiB). */
static int same_run(const brg_plan *plan, int e)
{
    const brg_device_spec *a = &brg_plan_get_stage(plan, e - 1)->spec, *b = &brg_plan_get_stage(plan, e)->spec;
    return b->card == a->card &&
           (a->gpu == BRG_GPU_LOCAL ? b->gpu == BRG_GPU_LOCAL : a->gpu >= 0 && b->gpu == a->gpu + 1);
}

/* Where devices are whole GPUs taken as cards (cuda:0-6@12GiB), where
 * their capacity comes from: a line per run of devices of one card size. */
static void print_cards(const brg_plan *plan, int devices)
{
    for (int d = 0, e; d < devices; d = e) {
        const brg_plan_stage *st = brg_plan_get_stage(plan, d);
        for (e = d + 1; e < devices && same_run(plan, e);) e++;
        if (!st->spec.card) continue;
        char first[48], last[32], b1[32], b2[32], b3[32];
        const int many = e - d > 1;
        if (many && st->spec.gpu == BRG_GPU_LOCAL) /* one per rank: every name is cuda:local */
            snprintf(first, sizeof first, "devices %d to %d (cuda:local)", d, e - 1);
        else
            brg_device_spec_name(&st->spec, d, first, sizeof first);
        brg_device_spec_name(&brg_plan_get_stage(plan, e - 1)->spec, e - 1, last, sizeof last);
        const int range = many && st->spec.gpu != BRG_GPU_LOCAL;
        printf("cards: %s%s%s, %s of %s, less the %s kept for the CUDA context and libraries: %s%s\n", first,
               range ? " to " : "", range ? last : "", many ? "cards" : "a card",
               brg_format_bytes(st->spec.card, b1, sizeof b1),
               brg_format_bytes(brg_cuda_reserve_bytes(st->spec.card), b2, sizeof b2),
               brg_format_bytes(st->capacity_bytes, b3, sizeof b3), many ? " each" : "");
    }
}

void brg_cli_print_plan(const brg_plan *plan, const brg_plan_options *o)
{
    const brg_plan_info *in = brg_plan_get_info(plan);
    const brg_model *m = brg_plan_model(plan);
    const brg_model_tensor *x = brg_model_get_tensor(m, brg_model_input(m));
    char b1[32], b2[32], b3[32], opt[32];
    printf("%s (%lldx%lldx%lld, %s trainable parameters, %d blocks) on %d device%s, batch %d", brg_model_name(m),
           (long long)x->c, (long long)x->h, (long long)x->w,
           brg_cli_format_count(brg_model_trainable_params(m), b1, sizeof b1), in->blocks, in->devices,
           in->devices == 1 ? "" : "s", in->batch);
    if (in->replicas > 1)
        printf(" per replica, %d replicas (%d devices, batch %d in all)", in->replicas, in->devices * in->replicas,
               in->batch * in->replicas);
    printf("\n");
    if (in->replicas > 1) {
        printf("replicas:");
        for (int r = 0; r < in->replicas; r++)
            printf("%s replica %d on devices %d..%d", r ? "," : "", r, r * in->devices, (r + 1) * in->devices - 1);
        printf("; replica k takes micro-batches k, k+%d, ... of every batch, and each device sums its gradients "
               "with the same device of the other replicas", in->replicas);
        if (in->sync_batchnorm)
            printf("; BatchNorm synchronized over them (micro-batch i of every replica normalized as one of %d)",
                   in->micro_batch * in->replicas);
        printf("\n");
    }
    char chunks[48] = "";
    if (in->chunks > 1) snprintf(chunks, sizeof chunks, " with %d chunks per device", in->chunks);
    printf("%s%s, %d micro-batch%s of %d, recomputation %s, %s, headroom %g%%\n",
           brg_schedule_kind_name(in->schedule), chunks, in->micro_batches, in->micro_batches == 1 ? "" : "es",
           in->micro_batch, brg_recompute_name(in->recompute), optimizer_text(o, opt, sizeof opt),
           in->headroom * 100.0);
    if (in->feasible && in->note && in->note[0]) printf("%s\n", in->note);
    printf("\n");
    print_table(plan);
    char speed[32];
    brg_cli_format_speed(in->device_flops, speed, sizeof speed);
    char link[48];
    if (in->link_bytes_per_s > 0) snprintf(link, sizeof link, "%g GB/s between stages", in->link_bytes_per_s / 1e9);
    else snprintf(link, sizeof link, "free transfers");
    char rate[32];
    printf("\npredicted: bubble %.1f%%, %s samples/s (%s per step, slowest stage %s per micro-batch)\n",
           in->bubble * 100.0, brg_cli_format_rate(in->samples_per_s, rate, sizeof rate),
           brg_cli_format_time(in->step_s, b2, sizeof b2), brg_cli_format_time(in->bottleneck_s, b3, sizeof b3));
    if (in->replicas > 1)
        printf("           of which %s waiting for the gradient sums over %d replicas (a ring all-reduce per block, "
               "as the last backward finishes it)\n",
               brg_cli_format_time(in->allreduce_s, b2, sizeof b2), in->replicas);
    switch (in->times) {
    case BRG_PLAN_TIMES_PROFILE:
        printf("           at measured per-layer times from %s and %s\n", in->profile, link);
        break;
    case BRG_PLAN_TIMES_MEASURED:
        printf("           at per-layer times measured on this CPU now (--profile auto) and %s\n", link);
        break;
    case BRG_PLAN_TIMES_CALIBRATED:
        printf("           at this CPU's calibrated speed per layer kind (%s%s) and %s\n",
               in->cpu_speed_cached ? "cached in " : in->cpu_speed_cache[0] ? "measured now, cached in "
                                                                              : "measured now",
               in->cpu_speed_cache, link);
        break;
    default: printf("           at an assumed %s per device and %s\n", speed, link); break;
    }
    int verified = 1;
    for (int d = 0; d < in->devices; d++) verified &= brg_plan_get_stage(plan, d)->verified;
    printf("peaks: %s\n", verified ? "from a dry run of each device's program (what training allocates)"
                                   : "estimated by the cost model (not dry-run)");
    print_cards(plan, in->devices);
    print_bars(plan);
}

