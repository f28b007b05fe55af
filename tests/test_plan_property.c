/* The planner under seeded random settings nobody wrote a test for (issue
 * 19: `--schedule auto` divided by zero on models that do not fit, found
 * by a sweep like this one). Each case draws a zoo model, a width, an input
 * size, classes, a batch, a micro-batch count (0, a divisor or not), a
 * device list (1 to 16 devices, equal or mixed, 1 MiB to 80 GiB), a
 * schedule (every kind, and auto), chunks, recomputation and an optimizer,
 * and plans it through the public API. Whatever it draws, the planner must
 * either plan, with every device of a feasible plan within its budget and
 * an infeasible one saying why, or refuse with a status and a message;
 * never crash or hang (the test itself would die or time out).
 *
 *   BRG_PROPERTY_SEED   the first case's seed (default 1)
 *   BRG_PROPERTY_CASES  how many cases (default 300)
 *   BRG_PROPERTY_VERBOSE  print every case and what the planner said
 *
 * A failing case prints its seed and its settings; rerun that one with
 * BRG_PROPERTY_SEED=that BRG_PROPERTY_CASES=1. */
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "brigade/plan.h"
#include "brigade/zoo.h"
#include "testutil.h"

#define MiB ((double)(1 << 20))

static uint64_t next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static double unit(uint64_t *s) { return (double)(next(s) >> 11) / 9007199254740992.0; }
static int pick(uint64_t *s, int n) { return (int)(next(s) % (uint64_t)n); }

/* A size from 1 MiB to 80 GiB, log-uniform. */
static size_t random_size(uint64_t *s)
{
    double mib = exp2(unit(s) * 16.33); /* 2^16.33 MiB = 80 GiB */
    return (size_t)(mib * MiB);
}

typedef struct draw {
    const char *model;
    brg_zoo_options zoo;
    int batch, micro_batches, n_devices, chunks, schedule_auto;
    brg_schedule_kind schedule;
    brg_recompute recompute;
    brg_optimizer_kind optimizer;
    brg_device_spec devices[16];
} draw;

/* Heavy models get fewer samples and narrower widths: each case must stay
 * well under a second on two cores, so that hundreds fit in make check. */
static void draw_case(uint64_t seed, draw *d)
{
    uint64_t s = seed;
    memset(d, 0, sizeof *d);
    const brg_zoo_entry *e = brg_zoo_entry_at(pick(&s, brg_zoo_count()));
    d->model = e->name;
    const int heavy = strcmp(e->name, "fmnist-cnn") != 0;
    d->zoo.width_mult = heavy ? 0.25 + unit(&s) * 0.75 : 0.25 + unit(&s) * 8.75;
    if (pick(&s, 3) == 0) {
        /* Another input size: smaller than the standard for heavy models
         * (the zoo refuses what its strides cannot take, which is fine). */
        const int64_t side = heavy ? 32 + pick(&s, 97) : 8 + pick(&s, 57);
        d->zoo.channels = 1 + pick(&s, 3);
        d->zoo.height = d->zoo.width = side;
    }
    if (pick(&s, 3) == 0) d->zoo.classes = 1 + pick(&s, 1000);
    d->batch = heavy ? 1 + pick(&s, 64) : 1 + pick(&s, 1024);
    switch (pick(&s, 3)) {
    case 0: d->micro_batches = 0; break;
    case 1: d->micro_batches = 1 + pick(&s, d->batch); break; /* a divisor or not */
    default: { /* the largest divisor up to 16 */
        int m = d->batch < 16 ? d->batch : 16;
        while (d->batch % m) m--;
        d->micro_batches = m;
    }
    }
    d->n_devices = 1 + pick(&s, 16);
    const int mixed = pick(&s, 2);
    const size_t one = random_size(&s);
    for (int i = 0; i < d->n_devices; i++) {
        d->devices[i].backend = BRG_BACKEND_CPU;
        d->devices[i].gpu = -1;
        d->devices[i].capacity = mixed ? random_size(&s) : one;
    }
    d->schedule_auto = pick(&s, 4) == 0;
    d->schedule = (brg_schedule_kind)pick(&s, BRG_SCHEDULE_KIND_COUNT);
    d->chunks = d->schedule == BRG_SCHEDULE_INTERLEAVED ? pick(&s, 5) : (pick(&s, 8) == 0 ? 2 : 0);
    d->recompute = (brg_recompute)pick(&s, 3);
    d->optimizer = pick(&s, 2) ? BRG_OPTIMIZER_SGD : BRG_OPTIMIZER_ADAM;
}

static void describe(uint64_t seed, const draw *d, char *buf, size_t size)
{
    int at = snprintf(buf, size, "seed %" PRIu64 ": %s width %.3g input %lldx%lldx%lld classes %lld, batch %d, M %d, "
                      "%s%s chunks %d, recompute %s, %s, devices",
                      seed, d->model, d->zoo.width_mult, (long long)d->zoo.channels, (long long)d->zoo.height,
                      (long long)d->zoo.width, (long long)d->zoo.classes, d->batch, d->micro_batches,
                      d->schedule_auto ? "auto over " : "", brg_schedule_kind_name(d->schedule), d->chunks,
                      brg_recompute_name(d->recompute), d->optimizer == BRG_OPTIMIZER_SGD ? "sgd" : "adam");
    for (int i = 0; i < d->n_devices && at > 0 && (size_t)at < size; i++)
        at += snprintf(buf + at, size - (size_t)at, "%s%.0fMiB", i ? "," : " ", (double)d->devices[i].capacity / MiB);
}

/* Returns 1 when the case planned (feasible or not), 0 when it was refused. */
static int run_case(uint64_t seed, int *feasible)
{
    draw d;
    draw_case(seed, &d);
    char what[1024];
    describe(seed, &d, what, sizeof what);
    *feasible = 0;
    brg_model *m = NULL;
    brg_status st = brg_zoo_build(d.model, &d.zoo, &m);
    if (st != BRG_OK) {
        CHECK_MSG(brg_last_error()[0] != '\0', "%s: the zoo refused with no message", what);
        return 0;
    }
    brg_plan_options o = brg_plan_options_init();
    o.devices = d.devices;
    o.n_devices = d.n_devices;
    o.batch = d.batch;
    o.micro_batches = d.micro_batches;
    o.schedule = d.schedule;
    o.schedule_auto = d.schedule_auto;
    o.chunks = d.chunks;
    o.recompute = d.recompute;
    o.optimizer = brg_optimizer_config_init(d.optimizer);
    brg_plan *plan = NULL;
    brg_clear_error();
    st = brg_plan_create(m, &o, &plan);
    int planned = 0;
    if (getenv("BRG_PROPERTY_VERBOSE"))
        printf("%s\n  -> %s: %s\n", what, st == BRG_OK ? (brg_plan_get_info(plan)->feasible ? "fits" : "does not fit")
                                                      : brg_status_string(st),
               st == BRG_OK ? brg_plan_get_info(plan)->note : brg_last_error());
    if (st != BRG_OK) {
        CHECK_MSG(plan == NULL, "%s: failed (%s) but returned a plan", what, brg_status_string(st));
        CHECK_MSG(brg_last_error()[0] != '\0', "%s: failed (%s) with no message", what, brg_status_string(st));
    } else {
        planned = 1;
        const brg_plan_info *info = brg_plan_get_info(plan);
        *feasible = info->feasible;
        if (info->feasible) {
            for (int dv = 0; dv < d.n_devices; dv++) {
                const brg_plan_stage *ps = brg_plan_get_stage(plan, dv);
                CHECK_MSG(ps && ps->peak_bytes <= ps->budget_bytes && ps->budget_bytes <= ps->capacity_bytes,
                          "%s: feasible, but device %d peaks at %zu bytes of a %zu budget", what, dv,
                          ps ? ps->peak_bytes : 0, ps ? ps->budget_bytes : 0);
            }
        } else {
            CHECK_MSG(info->note && info->note[0], "%s: infeasible without saying why", what);
        }
    }
    brg_plan_destroy(plan);
    brg_model_destroy(m);
    return planned;
}

int main(void)
{
    /* Hundreds of random models are thousands of convolution shapes: with
     * oneDNN each asks oneDNN for its workspace (a minute in all); the
     * planner's properties do not depend on which convolution runs. */
    CHECK_OK(brg_cpu_set_convolution("im2col"));
    const char *seed_env = getenv("BRG_PROPERTY_SEED"), *cases_env = getenv("BRG_PROPERTY_CASES");
    const uint64_t first = seed_env ? strtoull(seed_env, NULL, 10) : 1;
    const long cases = cases_env ? strtol(cases_env, NULL, 10) : 300;
    int planned = 0, feasible = 0, refused = 0;
    const clock_t t0 = clock();
    for (long i = 0; i < cases; i++) {
        int f = 0;
        if (run_case(first + (uint64_t)i, &f)) planned++;
        else refused++;
        feasible += f;
    }
    printf("%ld cases from seed %" PRIu64 ": %d planned (%d feasible, %d not), %d refused with a message, "
           "%.1f s of CPU\n",
           cases, first, planned, feasible, planned - feasible, refused, (double)(clock() - t0) / CLOCKS_PER_SEC);
    /* A sweep that only ever refuses, or never fits, tests nothing. */
    if (cases >= 100) CHECK_MSG(feasible >= cases / 10 && planned - feasible >= cases / 10 && refused >= 1,
                                "the draws should cover feasible, infeasible and refused cases");
    TEST_EXIT();
}
