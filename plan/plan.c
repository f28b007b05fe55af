/* Plans: the search for cuts, the dry runs that check them, the schedule
 * simulation that predicts their speed, the automatic choice of schedule,
 * micro-batch count and recomputation, the explanation of plans that do
 * not fit. Options and their checks are in options.c, the JSON form in
 * plan_json.c. See docs/planning.md.
 *
 * One configuration (schedule kind, chunks, micro-batches, recomputation
 * mode) is planned by run_config: search the cuts on the cost model's
 * estimates, dry-run every device's program, and while a dry run exceeds
 * its device's budget, lower that budget by the difference and search
 * again (a few rounds; with the estimate an upper bound this does not
 * happen, but the dry run is the authority, not the estimate). */
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brigade/arena.h"
#include "brigade/program.h"
#include "plan-impl.h"

#define MAX_ROUNDS 5            /* searches per configuration: 1 + tightenings */
#define AUTO_MAX_MICRO_BATCHES 64
#define NOTE_MAX 4096

struct brg_plan {
    const brg_model *model;
    brg_plan_info info;
    brg_plan_stage *stages;
    brg_device_part *parts; /* [devices] each stage's part, for brg_plan_pipeline_desc */
    brg_schedule *schedule;
    char note[NOTE_MAX];
    char *profile; /* info.profile */
    char speed_cache[512]; /* info.cpu_speed_cache */
    double *times;  /* [4V] what the simulation took: brg_plan_schedule_times */
    brg_optimizer_config optimizer; /* the options' optimizer: what the dry runs sized */
};

/* ---- small helpers ---- */

static char *fmt_bytes(size_t b, char *buf) { return brg_format_bytes(b, buf, 32); }

/* Append a formatted line to note (always NUL-terminated; lines separated
 * by '\n'). */
BRG_PRINTF(2, 3) static void note_add(char *note, const char *fmt, ...)
{
    size_t len = strlen(note);
    if (len + 2 >= NOTE_MAX) return;
    if (len) note[len++] = '\n';
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(note + len, NOTE_MAX - len, fmt, ap);
    va_end(ap);
}

static size_t budget_of(const brg_device_spec *spec, double headroom)
{
    double b = floor((double)spec->capacity * (1.0 - headroom));
    return b < 0 ? 0 : (size_t)b;
}

/* The default micro-batch count: the largest divisor of batch that is at
 * most 4 per device (bubble (p-1)/(m+p-1) about 1/5 or less) and leaves
 * micro-batches of at least min_u samples (when one does); 1 on one
 * device, where micro-batches fill no pipeline and would only change
 * BatchNorm's statistics (as the frameworks train: the whole batch at once). */
static int default_micro_batches(int batch, int p, int min_u)
{
    if (p == 1) return 1;
    int best = 1;
    for (int m = 1; m <= batch && m <= 4 * p; m++)
        if (batch % m == 0 && batch / m >= min_u) best = m;
    return best;
}

/* The fewest samples a micro-batch needs for every BatchNorm of model to
 * train: more than one value per channel (base/ops.c), so 2 behind a 1x1
 * plane. *layer: the first BatchNorm that needs the most, or -1. */
static int min_micro_batch(const brg_model *model, int *layer)
{
    int min_u = 1;
    *layer = -1;
    for (int l = 0; l < brg_model_layer_count(model); l++) {
        const brg_layer *ly = brg_model_get_layer(model, l);
        if (ly->desc.kind != BRG_LAYER_BATCHNORM) continue;
        const brg_model_tensor *in = brg_model_get_tensor(model, ly->inputs[0]);
        const int64_t plane = in->h * in->w > 0 ? in->h * in->w : 1;
        const int u = (int)((2 + plane - 1) / plane);
        if (u > min_u) {
            min_u = u;
            *layer = l;
        }
    }
    return min_u;
}

/* ---- configurations and their results ---- */

typedef struct config {
    brg_schedule_kind kind;
    int v, m, batch;
    brg_recompute rc;
} config;

typedef struct cost_entry {
    int u;
    brg_cost *cost;
} cost_entry;

typedef struct ctx {
    const brg_model *model;
    const brg_plan_options *opt;
    int nb;
    cost_entry *costs;
    int n_costs, cap_costs;
    brg_profile *profile; /* measured times, or NULL */
    int measure;          /* profile_path is BRG_PROFILE_AUTO: measure at the first micro-batch size asked for */
    int calibrated;       /* times from speed, the CPU calibration */
    brg_cpu_speed speed;
    int min_u, min_u_layer; /* min_micro_batch */
} ctx;

/* The configuration of the options' fixed schedule for batch on p devices,
 * with micro_batches (0: the default for the batch). */
static config fixed_config(const ctx *x, int batch, int micro_batches, int p)
{
    const brg_plan_options *o = x->opt;
    config cfg = {o->schedule, brg_plan_chunks_of(o->schedule, o->chunks),
                  micro_batches > 0 ? micro_batches : default_micro_batches(batch, p, x->min_u), batch, o->recompute};
    return cfg;
}

typedef struct result {
    config cfg;
    int p, V, u;
    const brg_device_spec *devs;
    brg_schedule *sched;
    const brg_cost *cost;
    int partitioned, feasible;
    int untrainable;        /* some layer cannot train on micro-batches of u (why says which) */
    int searches;
    int *last;              /* [V] */
    unsigned char *rc;      /* [V] */
    size_t *budget;         /* [p] capacity less headroom */
    size_t *vbudget;        /* [V] what the search used (tightened) */
    brg_hold **holds;       /* [V] the moments of each virtual stage */
    int *n_holds;           /* [V] */
    brg_plan_stage *stages; /* [p] */
    double *times;          /* [4V] the simulation's forward, B, W and transfer times */
    double bottleneck, step_s, bubble, sps;
    double allreduce_s; /* of step_s: the replicas' gradient sums */
    char why[512];          /* when not feasible */
} result;

static void result_free(result *r)
{
    brg_schedule_destroy(r->sched);
    free(r->last);
    free(r->rc);
    free(r->budget);
    free(r->vbudget);
    for (int vs = 0; r->holds && vs < r->V; vs++) free(r->holds[vs]);
    free(r->holds);
    free(r->n_holds);
    free(r->stages);
    free(r->times);
    memset(r, 0, sizeof *r);
}

/* --profile auto: the last profile measured in this process, so that a
 * bench's plans (one per combination) measure once. Keyed by what the
 * times depend on; a model of the same name and layers is taken as the
 * same model when its input and parameters match too (the same zoo name
 * at another --input or --width-mult is another model). */
static pthread_mutex_t measured_lock = PTHREAD_MUTEX_INITIALIZER;
static char measured_key[BRG_NAME_MAX + 160];
static brg_profile *measured;

static brg_status measure_once(const ctx *x, int u, int sharing, brg_profile **out)
{
    const brg_model_tensor *in = brg_model_get_tensor(x->model, brg_model_input(x->model));
    char key[sizeof measured_key];
    snprintf(key, sizeof key, "%s; %d layers; %lldx%lldx%lld; %lld parameters; u %d; %d sharing; %s",
             brg_model_name(x->model), brg_model_layer_count(x->model), (long long)in->c, (long long)in->h,
             (long long)in->w, (long long)brg_model_trainable_params(x->model), u, sharing, brg_cpu_convolution());
    pthread_mutex_lock(&measured_lock);
    brg_status st = BRG_OK;
    if (!measured || strcmp(measured_key, key) != 0) {
        brg_profile *p = NULL;
        st = brg_profile_measure(x->model, u, sharing, &x->opt->optimizer, &p);
        if (st == BRG_OK) {
            brg_profile_destroy(measured);
            measured = p;
            snprintf(measured_key, sizeof measured_key, "%s", key);
        }
    }
    if (st == BRG_OK && !(*out = brg_profile_copy(measured))) st = BRG_ERR_HOST_MEMORY;
    pthread_mutex_unlock(&measured_lock);
    return st;
}

/* The devices of the plan that compute on this machine's CPU. */
static int cpu_devices(const brg_plan_options *o)
{
    int n = 0;
    for (int d = 0; d < o->n_devices; d++) n += o->devices[d].backend == BRG_BACKEND_CPU;
    return n;
}

/* The cost model at micro-batch u. BRG_ERR_SHAPE when some layer cannot
 * train on micro-batches of u samples: a configuration that does not work
 * (run_config), found before anything is measured at that size. */
static brg_status get_cost(ctx *x, int u, const brg_device_spec *target, const brg_cost **out)
{
    if (u < x->min_u) {
        const brg_layer *bn = brg_model_get_layer(x->model, x->min_u_layer);
        const brg_model_tensor *in = brg_model_get_tensor(x->model, bn->inputs[0]);
        return brg_error(BRG_ERR_SHAPE,
                         "a micro-batch of %d sample%s: BatchNorm layer '%s' sees %lldx%lld planes and training needs "
                         "more than one value per channel",
                         u, u == 1 ? "" : "s", bn->name, (long long)in->h, (long long)in->w);
    }
    for (int i = 0; i < x->n_costs; i++)
        if (x->costs[i].u == u) {
            *out = x->costs[i].cost;
            return BRG_OK;
        }
    if (x->n_costs == x->cap_costs) {
        int cap = x->cap_costs ? 2 * x->cap_costs : 8;
        cost_entry *e = realloc(x->costs, (size_t)cap * sizeof *e);
        if (!e) return brg_error(BRG_ERR_HOST_MEMORY, "cannot allocate host memory for the cost models");
        x->costs = e;
        x->cap_costs = cap;
    }
    if (x->measure && !x->profile)
        BRG_CHECK(measure_once(x, u, cpu_devices(x->opt), &x->profile));
    brg_cost *c = NULL;
    const brg_status made = brg_cost_create(x->model, u, &x->opt->optimizer, target, x->opt->sync_batchnorm, &c);
    if (made == BRG_ERR_SHAPE) return brg_error_context(made, "a micro-batch of %d sample%s", u, u == 1 ? "" : "s");
    if (made != BRG_OK) return made;
    if (x->profile) brg_profile_apply(x->profile, c, x->opt->device_flops);
    if (x->calibrated) {
        brg_profile *p = NULL;
        const brg_status st = brg_cpu_speed_profile(x->model, u, &x->speed, &p);
        if (st != BRG_OK) {
            brg_cost_destroy(c);
            return st;
        }
        brg_profile_apply(p, c, x->opt->device_flops);
        brg_profile_destroy(p);
    }
    x->costs[x->n_costs].u = u;
    x->costs[x->n_costs].cost = c;
    x->n_costs++;
    *out = c;
    return BRG_OK;
}

/* First block of virtual stage vs. */
static int first_of(const result *r, int vs) { return vs == 0 ? 0 : r->last[vs - 1] + 1; }

/* Why stage st does not fit, into buf: its peak (estimated or dry-run)
 * against its budget, or, when the peak is within the budget, the arena
 * it needs because its buffers leave the free bytes in pieces. */
static void describe_miss(const brg_plan_stage *st, double headroom, char *buf, size_t size)
{
    char peak[32], arena[32], budget[32], cap[32];
    fmt_bytes(st->peak_bytes, peak);
    fmt_bytes(st->budget_bytes, budget);
    fmt_bytes(st->capacity_bytes, cap);
    if (!st->verified)
        snprintf(buf, size,
                 "device %d needs about %s (the cost model's estimate), more than its budget of %s (%s less %g%% "
                 "headroom)",
                 st->device, peak, budget, cap, headroom * 100.0);
    else if (st->peak_bytes <= st->budget_bytes && st->arena_bytes > st->budget_bytes)
        snprintf(buf, size,
                 "device %d peaks at %s, but its buffers fragment the arena: it needs an arena of %s, more than "
                 "its budget of %s (%s less %g%% headroom)",
                 st->device, peak, fmt_bytes(st->arena_bytes, arena), budget, cap, headroom * 100.0);
    else
        snprintf(buf, size,
                 "device %d needs %s at its peak (dry run), more than its budget of %s (%s less %g%% headroom)",
                 st->device, peak, budget, cap, headroom * 100.0);
}

/* The seconds of forward, input and weight gradient of every virtual
 * stage under the cut last[] (rc[]: which stages recompute), into t[0..V),
 * t[V..2V) and t[2V..3V): the cost model's FLOPs at the device speed. */
static void stage_times(const ctx *x, const result *r, const int *last, const unsigned char *rc, double *t)
{
    const int V = r->V;
    const double spf = 1.0 / x->opt->device_flops;
    for (int vs = 0; vs < V; vs++) {
        brg_cost_range rg;
        brg_cost_range_of(r->cost, vs == 0 ? 0 : last[vs - 1] + 1, last[vs], &rg);
        t[vs] = rg.fwd_flops * spf;
        t[V + vs] = (rg.bwd_in_flops + (rc[vs] ? rg.fwd_flops : 0.0)) * spf;
        t[2 * V + vs] = rg.bwd_w_flops * spf;
    }
}

/* The cut the search finds with no memory limit into cut and cut_rc (*found
 * 0 when there is none): where a schedule's stage times come from before
 * its memory is known, and what its chunks would need. */
static brg_status unlimited_cut(const ctx *x, result *r, const brg_partition_problem *pb, int *cut,
                                unsigned char *cut_rc, int *found)
{
    for (int vs = 0; vs < r->V; vs++) r->vbudget[vs] = SIZE_MAX / 4;
    brg_partition part = {0, 0.0, cut, cut_rc};
    const brg_status st = brg_partition_search(pb, x->opt->search, &part);
    *found = st == BRG_OK && part.feasible;
    return st;
}

/* Share each device's budget among its chunks' virtual stages: equally
 * (need NULL), or in proportion to need[vs], what each chunk needs under
 * the unlimited cut (or a repaired one: search_repaired). Every kind with
 * several chunks to a device takes the proportional share first: they can
 * differ much (on a V-shape device 0 holds the first stage, long in
 * flight, and the last, short; on interleaved ones a chunk of wide early
 * layers and one of heavy late weights), and an equal half left one of
 * them no room. */
static void share_budgets(result *r, const size_t *dev_budget, const size_t *need)
{
    const int V = r->V, v = r->cfg.v;
    size_t total[BRG_PLAN_MAX_DEVICES] = {0};
    for (int vs = 0; need && vs < V; vs++) total[brg_schedule_device_of(r->sched, vs)] += need[vs];
    for (int vs = 0; vs < V; vs++) {
        const int d = brg_schedule_device_of(r->sched, vs);
        r->vbudget[vs] = need && total[d] > 0 ? (size_t)((double)dev_budget[d] * ((double)need[vs] / (double)total[d]))
                                              : dev_budget[d] / (size_t)v;
    }
}

/* Device d's estimate under the cut (cut, rc): all its chunks at once, as
 * fill_stages estimates them (brg_device_estimate), into *bytes. */
static brg_status device_estimate(const result *r, const int *cut, const unsigned char *rc, int d, size_t *bytes)
{
    brg_cost_range rg[BRG_PROGRAM_MAX_CHUNKS];
    unsigned char rcs[BRG_PROGRAM_MAX_CHUNKS];
    for (int c = 0; c < r->cfg.v; c++) {
        const int vs = brg_schedule_stage_of(r->sched, d, c);
        brg_cost_range_of(r->cost, vs == 0 ? 0 : cut[vs - 1] + 1, cut[vs], &rg[c]);
        rcs[c] = rc[vs];
    }
    return brg_device_estimate(r->cost, r->sched, d, rg, rcs, bytes);
}

/* Whether every device's estimate under the cut (last, rc) fits its
 * budget. */
static brg_status devices_fit(const result *r, const int *last, const unsigned char *rc, const size_t *dev_budget,
                              int *fit)
{
    *fit = 1;
    for (int d = 0; d < r->p && *fit; d++) {
        size_t bytes = 0;
        BRG_CHECK(device_estimate(r, last, rc, d, &bytes));
        *fit = bytes <= dev_budget[d];
    }
    return BRG_OK;
}

/* Device d's chunks to recompute under auto, into rc, and its estimate
 * then, into *bytes: of the sets of its chunks that fit the budget, the one
 * that recomputes the fewest forward flops (the least time added), the
 * smaller estimate between equals; if none fits, the smallest estimate, as
 * close as this gets. Up to EXACT_CHUNKS chunks every set is tried (256
 * estimates) but those whose dry run missed (bit s of refused, the device's
 * REFUSED_WORDS words: set s recomputes chunk c when bit c of s is set).
 * Beyond, one chunk at a time, the one that lowers the estimate most
 * first, until it fits: greedy, it may recompute a costly chunk where a
 * cheap one would do. */
#define EXACT_CHUNKS 8
#define REFUSED_WORDS ((1 << EXACT_CHUNKS) / 64)

static brg_status choose_recompute(const result *r, const size_t *dev_budget, const int *cut,
                                   const uint64_t *refused, unsigned char *rc, int d, size_t *bytes)
{
    const int v = r->cfg.v;
    int vs_of[BRG_PROGRAM_MAX_CHUNKS];
    double fwd[BRG_PROGRAM_MAX_CHUNKS];
    for (int c = 0; c < v; c++) {
        brg_cost_range rg;
        vs_of[c] = brg_schedule_stage_of(r->sched, d, c);
        brg_cost_range_of(r->cost, vs_of[c] == 0 ? 0 : cut[vs_of[c] - 1] + 1, cut[vs_of[c]], &rg);
        fwd[c] = rg.fwd_flops;
    }
    if (v <= EXACT_CHUNKS) {
        unsigned best = 0;
        int best_fits = 0;
        double best_flops = 0.0;
        size_t best_bytes = SIZE_MAX;
        for (unsigned set = 0; set < 1u << v; set++) {
            if (refused && refused[set / 64] >> set % 64 & 1u) continue;
            double flops = 0.0;
            size_t b = 0;
            for (int c = 0; c < v; c++) {
                rc[vs_of[c]] = (unsigned char)(set >> c & 1u);
                flops += set >> c & 1u ? fwd[c] : 0.0;
            }
            BRG_CHECK(device_estimate(r, cut, rc, d, &b));
            const int fits = b <= dev_budget[d];
            const int better = fits != best_fits ? fits
                               : fits && flops != best_flops ? flops < best_flops
                                                              : b < best_bytes;
            if (better) {
                best = set;
                best_fits = fits;
                best_flops = flops;
                best_bytes = b;
            }
        }
        for (int c = 0; c < v; c++) rc[vs_of[c]] = (unsigned char)(best >> c & 1u);
        *bytes = best_bytes;
        return BRG_OK;
    }
    BRG_CHECK(device_estimate(r, cut, rc, d, bytes));
    while (*bytes > dev_budget[d]) {
        int best = -1;
        for (int c = 0; c < v; c++) {
            size_t b = 0;
            if (rc[vs_of[c]]) continue;
            rc[vs_of[c]] = 1;
            const brg_status st = device_estimate(r, cut, rc, d, &b);
            rc[vs_of[c]] = 0;
            BRG_CHECK(st);
            if (b < *bytes) {
                *bytes = b;
                best = vs_of[c];
            }
        }
        if (best < 0) break;
        rc[best] = 1;
    }
    return BRG_OK;
}

/* Device d's set of recomputed chunks in rc, as choose_recompute counts. */
static unsigned recompute_set(const result *r, const unsigned char *rc, int d)
{
    unsigned set = 0;
    for (int c = 0; c < r->cfg.v; c++) set |= (unsigned)(rc[brg_schedule_stage_of(r->sched, d, c)] != 0) << c;
    return set;
}

/* Manual cuts (cut): whether every device's chunks fit its budget together
 * by its estimate (brg_device_estimate, as fill_stages reports and the dry
 * run checks), into *fit, the modes into rc. Not by shares of the budget:
 * a chunk's peak counts working memory its device's other chunks use at
 * other moments, so equal shares refused a chunk of ResNet's heavy last
 * blocks, and shares of the chunks' own peaks a device that fits. Under
 * auto a device that does not fit, or whose plain chunks' dry run missed,
 * recomputes the chunks choose_recompute picks: none that it does not
 * need. refused: REFUSED_WORDS words per device, or NULL. */
static brg_status judge_manual_cut(const result *r, const size_t *dev_budget, const int *cut,
                                   const uint64_t *refused, unsigned char *rc, int *fit)
{
    memset(rc, r->cfg.rc == BRG_RECOMPUTE_ALL, (size_t)r->V);
    *fit = 1;
    for (int d = 0; d < r->p; d++) {
        const uint64_t *dev_refused = refused ? refused + (size_t)d * REFUSED_WORDS : NULL;
        size_t bytes = 0;
        BRG_CHECK(device_estimate(r, cut, rc, d, &bytes));
        if ((bytes > dev_budget[d] || (dev_refused && dev_refused[0] & 1u)) && r->cfg.rc == BRG_RECOMPUTE_AUTO)
            BRG_CHECK(choose_recompute(r, dev_budget, cut, dev_refused, rc, d, &bytes));
        *fit &= bytes <= dev_budget[d];
    }
    return BRG_OK;
}

/* When neither the proportional nor the equal share lets the search place
 * the blocks, a cut that fits may still be there: the search holds each
 * chunk to its share, and a chunk's peak counts working memory that the
 * device's other chunks use at other moments, so the device's limit is
 * less than the sum of its chunks' peaks. Try SHARE_TRIES more shares,
 * each chunk's weight its need (or 1) times a factor between e^-1.5 and
 * e^1.5 from a fixed stream (the same options give the same plan), the
 * shares adding up to 1 to 2 budgets of the device; keep the fastest cut
 * whose devices' estimates fit, with its shares in r->vbudget. */
#define SHARE_TRIES 64

static brg_status search_shares(const ctx *x, result *r, const brg_partition_problem *pb, const size_t *dev_budget,
                                const size_t *need, brg_partition *best)
{
    const int V = r->V;
    double *weight = brg_malloc((size_t)V * sizeof *weight, "the budget shares");
    size_t *kept = brg_malloc((size_t)V * sizeof *kept, "the budget shares");
    int *last = brg_malloc((size_t)V * sizeof *last, "the budget shares");
    unsigned char *rc = brg_malloc((size_t)V, "the budget shares");
    brg_status st = weight && kept && last && rc ? BRG_OK : BRG_ERR_HOST_MEMORY;
    uint64_t state = 0x243f6a8885a308d3u;
    for (int k = 0; k < SHARE_TRIES && st == BRG_OK; k++) {
        const double over = 1.0 + (double)(k % 4) / 3.0; /* 1, 4/3, 5/3, 2 budgets shared out */
        double total[BRG_PLAN_MAX_DEVICES] = {0};
        for (int vs = 0; vs < V; vs++) {
            state = state * 6364136223846793005u + 1442695040888963407u; /* an LCG: enough for a spread */
            const double u = (double)(state >> 11) * 0x1.0p-53;
            weight[vs] = (need && need[vs] ? (double)need[vs] : 1.0) * exp(3.0 * (u - 0.5));
            total[brg_schedule_device_of(r->sched, vs)] += weight[vs];
        }
        for (int vs = 0; vs < V; vs++) {
            const int d = brg_schedule_device_of(r->sched, vs);
            r->vbudget[vs] = (size_t)(over * (double)dev_budget[d] * (weight[vs] / total[d]));
        }
        brg_partition trial = {0, 0.0, last, rc};
        int fit = 0;
        st = brg_partition_search(pb, x->opt->search, &trial);
        if (st == BRG_OK && trial.feasible && (!best->feasible || trial.bottleneck < best->bottleneck))
            st = devices_fit(r, last, rc, dev_budget, &fit);
        if (st == BRG_OK && fit) {
            best->feasible = 1;
            best->bottleneck = trial.bottleneck;
            memcpy(best->last, last, (size_t)V * sizeof *last);
            memcpy(best->recompute, rc, (size_t)V);
            memcpy(kept, r->vbudget, (size_t)V * sizeof *kept);
        }
    }
    if (st == BRG_OK && best->feasible) memcpy(r->vbudget, kept, (size_t)V * sizeof *kept);
    free(weight);
    free(kept);
    free(last);
    free(rc);
    return st;
}

/* need[vs]: the peak of virtual stage vs under the cut, with r's holds. */
static void chunk_needs(const result *r, const int *cut, const unsigned char *cut_rc, size_t *need)
{
    for (int vs = 0; vs < r->V; vs++) {
        brg_cost_range rg;
        brg_cost_range_of(r->cost, vs == 0 ? 0 : cut[vs - 1] + 1, cut[vs], &rg);
        need[vs] = brg_cost_range_peak(r->cost, &rg, r->holds[vs], r->n_holds[vs], cut_rc[vs]);
    }
}

#define SCALE_STEPS 8 /* bisection steps of a cut's scale of the shares: to 1/256 */

/* The shares base[] scaled by f into r->vbudget. */
static void scale_shares(result *r, const size_t *base, double f)
{
    for (int vs = 0; vs < r->V; vs++) {
        const double b = (double)base[vs] * f;
        r->vbudget[vs] = b < (double)(SIZE_MAX / 4) ? (size_t)b : SIZE_MAX / 4;
    }
}

/* A cut that fits the shares r->vbudget scaled by the least factor above
 * 1 (to 1/256 of it, at most 1024), into part, whose feasible is 0 when
 * none does: the cut that comes closest to fitting them. The caller found
 * that no cut fits the shares unscaled. r->vbudget is left as it was. */
static brg_status best_scaled_cut(const ctx *x, result *r, const brg_partition_problem *pb, brg_partition *part)
{
    const int V = r->V;
    size_t *base = brg_malloc((size_t)V * sizeof *base, "a plan's budget shares");
    if (!base) return BRG_ERR_HOST_MEMORY;
    memcpy(base, r->vbudget, (size_t)V * sizeof *base);
    brg_status st = BRG_OK;
    double lo = 1.0, hi = 1.0;
    part->feasible = 0;
    while (st == BRG_OK && !part->feasible && hi < 1024.0) {
        lo = hi;
        hi *= 2.0;
        scale_shares(r, base, hi);
        st = brg_partition_search(pb, x->opt->search, part);
    }
    const int found = st == BRG_OK && part->feasible;
    for (int i = 0; found && st == BRG_OK && i < SCALE_STEPS; i++) {
        const double mid = lo + (hi - lo) / 2.0;
        scale_shares(r, base, mid);
        st = brg_partition_search(pb, x->opt->search, part);
        if (part->feasible) hi = mid;
        else lo = mid;
    }
    if (found && st == BRG_OK) { /* the cut at hi again: the last search may have failed */
        scale_shares(r, base, hi);
        st = brg_partition_search(pb, x->opt->search, part);
    }
    memcpy(r->vbudget, base, (size_t)V * sizeof *base);
    free(base);
    return st;
}

/* Device d's estimate under the cut with each of its chunks in the leaner
 * mode the problem allows (recomputing or not, whichever peaks lower; into
 * rc[] of its virtual stages): into load[d]. */
static brg_status device_load(const result *r, const int *cut, unsigned char *rc, int d, size_t *load)
{
    for (int c = 0; c < r->cfg.v; c++) {
        const int vs = brg_schedule_stage_of(r->sched, d, c);
        brg_cost_range rg;
        brg_cost_range_of(r->cost, vs == 0 ? 0 : cut[vs - 1] + 1, cut[vs], &rg);
        size_t need = SIZE_MAX;
        rc[vs] = 1;
        if (r->cfg.rc != BRG_RECOMPUTE_ALL) {
            need = brg_cost_range_peak(r->cost, &rg, r->holds[vs], r->n_holds[vs], 0);
            rc[vs] = 0;
        }
        if (r->cfg.rc != BRG_RECOMPUTE_NONE &&
            brg_cost_range_peak(r->cost, &rg, r->holds[vs], r->n_holds[vs], 1) < need)
            rc[vs] = 1;
    }
    return device_estimate(r, cut, rc, d, &load[d]);
}

/* What the loads exceed the devices' budgets by, summed over the devices. */
static size_t excess_of(int p, const size_t *dev_budget, const size_t *load)
{
    size_t excess = 0;
    for (int d = 0; d < p; d++) excess += load[d] > dev_budget[d] ? load[d] - dev_budget[d] : 0;
    return excess;
}

#define REPAIR_WORK 2000 /* device estimates one repair may take */

/* Move the cuts cut[0..V-1) until every device fits by its estimate, all
 * its chunks together: each time the move that lowers the excess over the
 * devices' budgets most, among moving one cut anywhere between its
 * neighbours and sliding a run of cuts by one block (which carries a block
 * past the stages between, where moving one cut at a time would first
 * overfill them). Stops when no move helps, or after REPAIR_WORK device
 * estimates. A local search: it may stop short of a cut that fits. rc[]
 * ends as the cut's leaner modes, *excess as what is left (0: it fits). */
static brg_status repair_cut(const result *r, const size_t *dev_budget, int *cut, unsigned char *rc, size_t *excess)
{
    const int V = r->V, p = r->p, nb = r->cost->n_blocks;
    size_t load[BRG_PLAN_MAX_DEVICES], trial[BRG_PLAN_MAX_DEVICES];
    for (int d = 0; d < p; d++) BRG_CHECK(device_load(r, cut, rc, d, load));
    size_t best = excess_of(p, dev_budget, load);
    int *try_cut = brg_malloc((size_t)V * sizeof *try_cut, "the repair of a cut");
    int *best_cut = brg_malloc((size_t)V * sizeof *best_cut, "the repair of a cut");
    unsigned char *try_rc = brg_malloc((size_t)V, "the repair of a cut");
    brg_status st = try_cut && best_cut && try_rc ? BRG_OK : BRG_ERR_HOST_MEMORY;
    long work = 0;
    while (st == BRG_OK && best > 0 && work < REPAIR_WORK) {
        int moved = 0;
        /* moves: (k, l, to): cut k to block `to` when l == k, else cuts k..l by `to` (+1 or -1) */
        /* (the work counted inside the pass too: one pass over V^2 runs of
         * cuts can take more than the whole budget on many devices) */
        for (int k = 0; k < V - 1 && st == BRG_OK && work < REPAIR_WORK; k++)
            for (int l = k; l < V - 1 && st == BRG_OK && work < REPAIR_WORK; l++) {
                const int lo = l == k ? (k == 0 ? 0 : cut[k - 1] + 1) : -1, hi = l == k ? cut[k + 1] - 1 : 1;
                for (int to = lo; to <= hi && st == BRG_OK && work < REPAIR_WORK; to++) {
                    memcpy(try_cut, cut, (size_t)V * sizeof *cut);
                    if (l == k) {
                        if (to == cut[k]) continue;
                        try_cut[k] = to;
                    } else {
                        if (to == 0) continue;
                        for (int q = k; q <= l; q++) try_cut[q] += to;
                        if ((k == 0 ? try_cut[0] < 0 : try_cut[k] <= try_cut[k - 1]) || try_cut[l] >= try_cut[l + 1] ||
                            try_cut[l] > nb - 2)
                            continue;
                    }
                    /* the devices of stages k..l+1 change */
                    memcpy(trial, load, (size_t)p * sizeof *load);
                    memcpy(try_rc, rc, (size_t)V);
                    unsigned char seen[BRG_PLAN_MAX_DEVICES] = {0};
                    for (int vs = k; vs <= l + 1 && st == BRG_OK; vs++) {
                        const int d = brg_schedule_device_of(r->sched, vs);
                        if (seen[d]++) continue;
                        st = device_load(r, try_cut, try_rc, d, trial);
                        work++;
                    }
                    const size_t e = st == BRG_OK ? excess_of(p, dev_budget, trial) : SIZE_MAX;
                    if (e < best) {
                        best = e;
                        memcpy(best_cut, try_cut, (size_t)V * sizeof *cut);
                        moved = 1;
                    }
                }
            }
        if (!moved || st != BRG_OK) break;
        memcpy(cut, best_cut, (size_t)V * sizeof *cut);
        for (int d = 0; d < p && st == BRG_OK; d++) st = device_load(r, cut, rc, d, load);
    }
    free(try_cut);
    free(best_cut);
    free(try_rc);
    *excess = best;
    return st;
}

/* Whether some block fits no stage it may occupy: then no cut fits, and
 * the repair is not tried. The least a device holding block b in stage vs
 * needs: the floor of b's peak alone there (brg_cost_range_peak_floor,
 * which grows with the range), less the most any range's first block
 * receives (the floor counts the range's, and a device does not when the
 * stage before is its own, at a V's turn). It can tell "maybe" where no
 * cut fits, never "no" where one does. */
static int some_block_never_fits(const result *r, const size_t *dev_budget)
{
    const int nb = r->cost->n_blocks, V = r->V;
    size_t receive_in = 0;
    for (int b = 0; b < nb; b++) {
        brg_cost_range rg;
        brg_cost_range_of(r->cost, b, b, &rg);
        if (rg.receive_in > receive_in) receive_in = rg.receive_in;
    }
    for (int b = 0; b < nb; b++) {
        brg_cost_range rg;
        brg_cost_range_of(r->cost, b, b, &rg);
        const int lo = V - (nb - b) > 0 ? V - (nb - b) : 0, hi = b < V - 1 ? b : V - 1;
        int fits = 0;
        for (int vs = lo; vs <= hi && !fits; vs++) {
            const size_t budget = dev_budget[brg_schedule_device_of(r->sched, vs)] + receive_in;
            if (r->cfg.rc != BRG_RECOMPUTE_ALL)
                fits = brg_cost_range_peak_floor(r->cost, &rg, r->holds[vs], r->n_holds[vs], 0) <= budget;
            if (r->cfg.rc != BRG_RECOMPUTE_NONE && !fits)
                fits = brg_cost_range_peak_floor(r->cost, &rg, r->holds[vs], r->n_holds[vs], 1) <= budget;
        }
        if (!fits) return 1;
    }
    return 0;
}

/* The last resort when no share the search was given admitted a cut that
 * fits: repair a cut until each device's estimate, all its chunks
 * together, fits its budget (repair_cut), starting from the unlimited cut
 * free_cut (may be NULL), then from the cut that fits the equal shares
 * best when they are scaled up. Shares in proportion to the repaired cut's
 * own needs admit it when the sum of its chunks' needs fits too, and the
 * search then takes the fastest cut within them (into part, the shares
 * left in r->vbudget); else the repaired cut is the answer
 * (part->bottleneck is then not set). part->feasible stays 0 when neither
 * repair reaches a cut that fits, or some block fits nowhere. */
static brg_status search_repaired(const ctx *x, result *r, const brg_partition_problem *pb, const size_t *dev_budget,
                                  const int *free_cut, brg_partition *part)
{
    const int V = r->V;
    if (some_block_never_fits(r, dev_budget)) return BRG_OK; /* most plans that fit nothing: no repair to try */
    size_t *need = brg_malloc((size_t)V * sizeof *need, "a plan's budget shares");
    int *repaired = brg_malloc((size_t)V * sizeof *repaired, "a plan's budget shares");
    unsigned char *repaired_rc = brg_malloc((size_t)V, "a plan's budget shares");
    brg_status st = need && repaired && repaired_rc ? BRG_OK : BRG_ERR_HOST_MEMORY;
    for (int start = free_cut ? 0 : 1; start < 2 && st == BRG_OK && !part->feasible; start++) {
        if (start == 0) {
            memcpy(repaired, free_cut, (size_t)V * sizeof *free_cut);
        } else {
            share_budgets(r, dev_budget, NULL);
            st = best_scaled_cut(x, r, pb, part);
            if (st != BRG_OK || !part->feasible) break;
            memcpy(repaired, part->last, (size_t)V * sizeof *repaired);
            part->feasible = 0;
        }
        size_t excess = 0;
        st = repair_cut(r, dev_budget, repaired, repaired_rc, &excess);
        if (st != BRG_OK || excess > 0) continue;
        chunk_needs(r, repaired, repaired_rc, need);
        share_budgets(r, dev_budget, need);
        st = brg_partition_search(pb, x->opt->search, part);
        if (st == BRG_OK && !part->feasible) {
            memcpy(part->last, repaired, (size_t)V * sizeof *repaired);
            memcpy(part->recompute, repaired_rc, (size_t)V);
            part->feasible = 1;
        }
    }
    free(need);
    free(repaired);
    free(repaired_rc);
    return st;
}

/* The memory-capped kinds (zb-h2 and the V-shapes) order their work for
 * the stages' times (brg_schedule_build_timed): those of the unlimited
 * cut, since the plan's own cut depends on the schedule's memory. The cap,
 * and so what a device may hold, is the same whatever the times; the holds
 * are taken again from the new order. */
static brg_status retime_schedule(const ctx *x, result *r, const int *cut, const unsigned char *cut_rc)
{
    const int V = r->V;
    double *t = brg_calloc(3 * (size_t)V, sizeof *t, "the stage times of a schedule");
    if (!t) return BRG_ERR_HOST_MEMORY;
    stage_times(x, r, cut, cut_rc, t);
    const brg_schedule_times times = {t, t + V, t + 2 * V, NULL};
    brg_schedule *s = NULL;
    brg_status st = brg_schedule_build_timed(r->cfg.kind, r->p, r->cfg.m, r->cfg.v, &times, &s);
    free(t);
    if (st != BRG_OK) return st;
    brg_schedule_destroy(r->sched);
    r->sched = s;
    for (int vs = 0; vs < V && st == BRG_OK; vs++) {
        free(r->holds[vs]);
        r->holds[vs] = NULL;
        st = brg_schedule_holds(r->sched, brg_schedule_device_of(r->sched, vs), vs / r->p, &r->holds[vs],
                                &r->n_holds[vs]);
    }
    return st;
}

/* Fill r->stages from r->last / r->rc with the cost model's numbers. */
static brg_status fill_stages(const ctx *x, result *r)
{
    const int p = r->p, v = r->cfg.v;
    for (int d = 0; d < p; d++) {
        brg_plan_stage *st = &r->stages[d];
        brg_cost_range rg[BRG_PROGRAM_MAX_CHUNKS];
        unsigned char rcs[BRG_PROGRAM_MAX_CHUNKS];
        memset(st, 0, sizeof *st);
        st->device = d;
        st->spec = r->devs[d];
        st->capacity_bytes = r->devs[d].capacity;
        st->budget_bytes = r->budget[d];
        st->part.chunks = v;
        st->part.sync_batchnorm = x->opt->sync_batchnorm != 0;
        st->in_flight = brg_schedule_max_in_flight(r->sched, d, -1);
        size_t persistent = 0;
        for (int c = 0; c < v; c++) {
            const int vs = brg_schedule_stage_of(r->sched, d, c);
            brg_cost_range_of(r->cost, first_of(r, vs), r->last[vs], &rg[c]);
            rcs[c] = r->rc[vs];
            st->part.first_block[c] = rg[c].first;
            st->part.last_block[c] = rg[c].last;
            st->part.recompute[c] = rcs[c];
            st->params += rg[c].params;
            st->param_bytes += rg[c].weights;
            st->grad_bytes += rg[c].grads;
            st->optimizer_bytes += rg[c].optimizer;
            persistent += rg[c].persistent - rg[c].receive;
            st->chunk_stash_bytes[c] = brg_cost_range_rest(r->cost, &rg[c], rcs[c]);
            st->chunk_in_flight[c] = brg_schedule_max_in_flight(r->sched, d, c);
            st->stash_bytes += st->chunk_stash_bytes[c];
            st->flops += brg_cost_range_flops(&rg[c], rcs[c]);
            if (vs < r->V - 1 && brg_schedule_device_of(r->sched, vs + 1) != d)
                st->send_bytes += r->cost->blocks[rg[c].last].out_bytes;
        }
        st->receive_bytes = brg_cost_device_receive(rg, r->sched, d);
        persistent += st->receive_bytes;
        BRG_CHECK(brg_device_estimate(r->cost, r->sched, d, rg, rcs, &st->estimate_bytes));
        st->peak_bytes = st->estimate_bytes;
        st->activation_bytes = st->peak_bytes - persistent;
        st->time_s = st->flops / x->opt->device_flops;
        st->fits = st->peak_bytes <= st->budget_bytes;
    }
    return BRG_OK;
}

/* Dry-run device d's program on a planning device of the given capacity
 * (the arena rounds it down to BRG_ARENA_ALIGN). BRG_OK or
 * BRG_ERR_OUT_OF_MEMORY (rep then holds the peak up to the failure), any
 * other failure with the device named. */
static brg_status dry_run_at(const ctx *x, const result *r, int d, size_t capacity, brg_memory_report *rep)
{
    if (capacity < BRG_ARENA_ALIGN) {
        memset(rep, 0, sizeof *rep);
        return BRG_ERR_OUT_OF_MEMORY;
    }
    brg_device_spec target = r->devs[d];
    target.capacity = capacity;
    brg_status st = brg_program_dry_run(x->model, r->sched, d, &r->stages[d].part, r->u, &x->opt->optimizer, &target,
                                        rep);
    if (st != BRG_OK && st != BRG_ERR_OUT_OF_MEMORY) return brg_error_context(st, "dry run of device %d", d);
    return st;
}

/* The smallest arena device d's program runs in: a bisection in
 * BRG_ARENA_ALIGN steps between fail, a capacity known to be too small,
 * and ok, one it runs in, probing the peak (rounded up) first, where it
 * ends unless the free bytes are in pieces. No arena below the peak can
 * work. Best fit may in principle place buffers differently in a larger
 * arena, so success need not be monotone in the capacity; the answer is
 * then still one the program runs in, with one step less failing. */
static brg_status smallest_arena(const ctx *x, const result *r, int d, size_t peak, size_t fail, size_t ok,
                                 size_t *arena)
{
    brg_memory_report rep;
    const size_t peak_up = brg_arena_rounded(peak);
    fail &= ~(BRG_ARENA_ALIGN - 1);
    ok &= ~(BRG_ARENA_ALIGN - 1);
    if (peak_up - BRG_ARENA_ALIGN > fail) fail = peak_up - BRG_ARENA_ALIGN;
    size_t probe = peak_up;
    /* 64 halvings cover any size_t range; the loop ends well before. */
    for (int i = 0; i < 64 && ok - fail > BRG_ARENA_ALIGN; i++) {
        if (probe <= fail || probe >= ok) probe = fail + (ok - fail) / 2 / BRG_ARENA_ALIGN * BRG_ARENA_ALIGN;
        brg_status st = dry_run_at(x, r, d, probe, &rep);
        if (st == BRG_OK) ok = probe;
        else if (st == BRG_ERR_OUT_OF_MEMORY) fail = probe;
        else return st;
        probe = 0; /* bisect from now on */
    }
    *arena = ok;
    return BRG_OK;
}

/* Dry-run device d; on success sets its peak, verified, fits and, when it
 * does not fit, arena_bytes. Whether it fits is decided by a dry run on a
 * device of exactly its budget: the arena is never compacted, so a program
 * can run out of memory with its peak below the budget when the free bytes
 * are in pieces. A program that does not fit is run again on a larger
 * planning device so that its whole peak can be reported, and then on
 * smaller ones to find the arena it needs. */
static brg_status dry_run(const ctx *x, result *r, int d)
{
    brg_plan_stage *st = &r->stages[d];
    brg_memory_report rep;
    brg_status st_ = dry_run_at(x, r, d, st->budget_bytes, &rep);
    if (st_ != BRG_OK && st_ != BRG_ERR_OUT_OF_MEMORY) return st_;
    st->fits = st_ == BRG_OK;
    st->arena_bytes = 0;
    if (!st->fits) {
        size_t cap = r->devs[d].capacity;
        size_t want = st->estimate_bytes > cap ? st->estimate_bytes : cap;
        const size_t limit = (size_t)1 << 46;
        const size_t large = want < limit / 2 ? 2 * want : limit;
        st_ = dry_run_at(x, r, d, large, &rep);
        if (st_ != BRG_OK && st_ != BRG_ERR_OUT_OF_MEMORY) return st_;
        if (st_ == BRG_ERR_OUT_OF_MEMORY) {
            if (rep.peak_bytes < large) rep.peak_bytes = large; /* at least; the arena is not measured */
        } else {
            BRG_CHECK(smallest_arena(x, r, d, rep.peak_bytes, st->budget_bytes, large, &st->arena_bytes));
        }
    }
    brg_clear_error();
    st->peak_bytes = rep.peak_bytes;
    st->activation_bytes = rep.activation_peak_bytes;
    st->param_bytes = rep.param_bytes;
    st->grad_bytes = rep.grad_bytes;
    st->optimizer_bytes = rep.optimizer_bytes;
    st->receive_bytes = rep.receive_bytes;
    st->verified = 1;
    return BRG_OK;
}

/* Dry runs are independent (each has its own planning device and stages;
 * the model and the schedule are read-only), so they run on a few threads. */
#define DRY_RUN_THREADS 4

typedef struct dry_pool {
    const ctx *x;
    result *r;
    pthread_mutex_t lock;
    int next;
    brg_status status; /* the first failure, by device order */
    int failed_device;
    char message[1024];
} dry_pool;

static void *dry_worker(void *arg)
{
    dry_pool *pool = arg;
    for (;;) {
        pthread_mutex_lock(&pool->lock);
        int d = pool->next < pool->r->p && pool->status == BRG_OK ? pool->next++ : -1;
        pthread_mutex_unlock(&pool->lock);
        if (d < 0) return NULL;
        brg_status st = dry_run(pool->x, pool->r, d);
        if (st != BRG_OK) {
            pthread_mutex_lock(&pool->lock);
            if (pool->status == BRG_OK || d < pool->failed_device) {
                pool->status = st;
                pool->failed_device = d;
                snprintf(pool->message, sizeof pool->message, "%s", brg_last_error());
            }
            pthread_mutex_unlock(&pool->lock);
        }
    }
}

static brg_status dry_run_all(const ctx *x, result *r)
{
    dry_pool pool;
    memset(&pool, 0, sizeof pool);
    pool.x = x;
    pool.r = r;
    if (pthread_mutex_init(&pool.lock, NULL) != 0) return brg_error(BRG_ERR_HOST_MEMORY, "cannot create a mutex");
    pthread_t threads[DRY_RUN_THREADS];
    int started = 0;
    for (int i = 0; i < DRY_RUN_THREADS - 1 && i < r->p - 1; i++) {
        if (pthread_create(&threads[started], NULL, dry_worker, &pool) != 0) break;
        started++;
    }
    dry_worker(&pool); /* this thread works too; with no helpers it does all */
    for (int i = 0; i < started; i++) pthread_join(threads[i], NULL);
    pthread_mutex_destroy(&pool.lock);
    if (pool.status != BRG_OK) return brg_error(pool.status, "%s", pool.message);
    return BRG_OK;
}

typedef struct bucket {
    double ready, seconds;
} bucket;

static int by_ready(const void *a, const void *b)
{
    const double x = ((const bucket *)a)->ready, y = ((const bucket *)b)->ready;
    return (x > y) - (x < y);
}

/* Replicas: when device d's gradient sums over D replicas end. Each
 * block's slab is summed (a ring all-reduce: 2(D-1)/D x its bytes over the
 * link) once the step's last backward of its chunk has passed the block,
 * one slab after another (exec/replicas.c); the backward passes its blocks
 * last first, at a pace proportional to their backward flops, after the
 * replay of a recomputing chunk's forward. 0 when d has no gradients. */
static brg_status allreduce_end(const ctx *x, const result *r, const brg_schedule_sim *sim, int d, int D, double *end)
{
    *end = 0.0;
    const int p = r->p, v = r->V / p;
    int n = 0;
    for (int c = 0; c < v; c++) {
        const int vs = brg_schedule_stage_of(r->sched, d, c);
        n += r->last[vs] - first_of(r, vs) + 1;
    }
    bucket *bk = brg_calloc(n > 0 ? (size_t)n : 1, sizeof *bk, "the simulation of the replicas' sums");
    if (!bk) return BRG_ERR_HOST_MEMORY;
    const double per_byte = 2.0 * (D - 1) / D / x->opt->link_bytes_per_s;
    n = 0;
    for (int c = 0; c < v; c++) {
        const int vs = brg_schedule_stage_of(r->sched, d, c);
        const int i = brg_schedule_last_backward(r->sched, d, c);
        if (i < 0) continue;
        const int weight_only = brg_schedule_action(r->sched, d, i)->type == BRG_ACTION_BACKWARD_WEIGHT;
        brg_cost_range rg;
        brg_cost_range_of(r->cost, first_of(r, vs), r->last[vs], &rg);
        double done = r->rc[vs] && !weight_only ? rg.fwd_flops : 0.0;
        const double total = done + rg.bwd_w_flops + (weight_only ? 0.0 : rg.bwd_in_flops);
        const double s = sim->start[d][i], span = sim->end[d][i] - s;
        for (int b = r->last[vs]; b >= first_of(r, vs); b--) {
            brg_cost_range_of(r->cost, b, b, &rg);
            done += rg.bwd_w_flops + (weight_only ? 0.0 : rg.bwd_in_flops);
            bk[n].ready = s + (total > 0.0 ? span * done / total : span);
            bk[n++].seconds = (double)rg.grads * per_byte;
        }
    }
    qsort(bk, (size_t)n, sizeof *bk, by_ready);
    for (int k = 0; k < n; k++)
        if (bk[k].seconds > 0.0) *end = fmax(*end, bk[k].ready) + bk[k].seconds;
    free(bk);
    return BRG_OK;
}

/* Predicted time of one mini-batch from the schedule simulator. */
static brg_status simulate(const ctx *x, result *r)
{
    const int V = r->V, p = r->p;
    double *t = brg_calloc((size_t)(4 * V), sizeof *t, "the schedule simulation");
    if (!t) return BRG_ERR_HOST_MEMORY;
    double *fwd = t, *bi = t + V, *bw = t + 2 * V, *xfer = t + 3 * V;
    stage_times(x, r, r->last, r->rc, t);
    for (int vs = 0; vs < V - 1 && x->opt->link_bytes_per_s > 0; vs++)
        xfer[vs] = (double)r->cost->blocks[r->last[vs]].out_bytes / x->opt->link_bytes_per_s;
    brg_schedule_times times = {fwd, bi, bw, xfer};
    brg_schedule_sim *sim = NULL;
    brg_status st = brg_schedule_simulate(r->sched, &times, &sim);
    if (st == BRG_OK) {
        const int D = x->opt->replicas > 1 ? x->opt->replicas : 1;
        double step = sim->makespan;
        for (int d = 0; d < p && D > 1 && x->opt->link_bytes_per_s > 0 && st == BRG_OK; d++) {
            double end = 0.0;
            st = allreduce_end(x, r, sim, d, D, &end);
            step = fmax(step, end);
        }
        r->allreduce_s = step - sim->makespan;
        r->step_s = step;
        r->bubble = sim->bubble;
        r->sps = step > 0 ? (double)r->cfg.batch * D / step : 0.0;
        for (int d = 0; d < p; d++) r->stages[d].idle = sim->idle[d];
    }
    brg_schedule_sim_destroy(sim);
    free(r->times);
    r->times = t; /* kept for brg_plan_schedule_times */
    r->bottleneck = 0.0;
    for (int d = 0; d < p; d++)
        if (r->stages[d].time_s > r->bottleneck) r->bottleneck = r->stages[d].time_s;
    return st;
}

/* Plan one configuration on devs[0..p). split: manual cuts (V - 1 of them)
 * or NULL to search. Fills r; r->feasible says whether it fits. Errors only
 * for what is not about fitting (an unbuildable schedule, a failing dry run
 * other than out of memory). */
static brg_status run_config(ctx *x, const config *cfg, const brg_device_spec *devs, int p, const int *split,
                             int verify, result *r)
{
    memset(r, 0, sizeof *r);
    r->cfg = *cfg;
    r->p = p;
    r->V = p * cfg->v;
    r->u = cfg->batch / cfg->m;
    r->devs = devs;
    const int V = r->V;
    if (x->nb < V) {
        snprintf(r->why, sizeof r->why, "the model has %d blocks, fewer than the %d stages", x->nb, V);
        return BRG_OK;
    }
    r->last = brg_calloc((size_t)V, sizeof *r->last, "a plan");
    r->rc = brg_calloc((size_t)V, 1, "a plan");
    r->budget = brg_calloc((size_t)p, sizeof *r->budget, "a plan");
    r->vbudget = brg_calloc((size_t)V, sizeof *r->vbudget, "a plan");
    r->holds = brg_calloc((size_t)V, sizeof *r->holds, "a plan");
    r->n_holds = brg_calloc((size_t)V, sizeof *r->n_holds, "a plan");
    r->stages = brg_calloc((size_t)p, sizeof *r->stages, "a plan");
    size_t *dev_budget = brg_calloc((size_t)p, sizeof *dev_budget, "a plan");
    int *cand_last = brg_calloc((size_t)V, sizeof *cand_last, "a plan");
    unsigned char *cand_rc = brg_calloc((size_t)V, 1, "a plan");
    size_t *chunk_need = NULL; /* several chunks per device: each virtual stage's need under the */
    int *free_cut = NULL;      /* unlimited cut, and that cut */
    /* hand-given cuts under auto: each device's sets of recomputed chunks
     * whose dry run missed, tried no more (see choose_recompute) */
    const int refusing = split && cfg->rc == BRG_RECOMPUTE_AUTO && verify && cfg->v <= EXACT_CHUNKS;
    uint64_t *refused = refusing ? brg_calloc((size_t)p * REFUSED_WORDS, sizeof *refused, "a plan") : NULL;
    brg_status ret = BRG_OK;
    if (!r->last || !r->rc || !r->budget || !r->vbudget || !r->holds || !r->n_holds || !r->stages || !dev_budget ||
        !cand_last || !cand_rc || (refusing && !refused)) {
        ret = BRG_ERR_HOST_MEMORY;
        goto exit;
    }
    BRG_CHECK_GOTO(brg_schedule_build(cfg->kind, p, cfg->m, cfg->v, &r->sched), ret, exit);
    ret = get_cost(x, r->u, &devs[0], &r->cost);
    if (ret == BRG_ERR_SHAPE) { /* a configuration that does not work, like one that does not fit */
        r->untrainable = 1;
        const size_t len = (size_t)snprintf(r->why, sizeof r->why, "%s", brg_last_error());
        if (r->u < x->min_u && len < sizeof r->why) /* what would train */
            snprintf(r->why + len, sizeof r->why - len, "; give %s %d", cfg->batch >= x->min_u ?
                     "--microbatches M with batch/M >=" : "a batch of at least", x->min_u);
        brg_clear_error();
        ret = BRG_OK;
    }
    if (ret != BRG_OK || r->untrainable) goto exit;
    for (int d = 0; d < p; d++) r->budget[d] = dev_budget[d] = budget_of(&devs[d], x->opt->headroom);
    for (int vs = 0; vs < V; vs++)
        BRG_CHECK_GOTO(brg_schedule_holds(r->sched, brg_schedule_device_of(r->sched, vs), vs / p, &r->holds[vs],
                                          &r->n_holds[vs]),
                       ret, exit);
    brg_partition_problem pb = {r->cost, V, r->vbudget, r->holds, r->n_holds, cfg->rc, 1.0 / x->opt->device_flops};
    int found = 0;
    if ((brg_schedule_kind_is_v(cfg->kind) || cfg->kind == BRG_SCHEDULE_ZB_H2) && !split) {
        BRG_CHECK_GOTO(unlimited_cut(x, r, &pb, cand_last, cand_rc, &found), ret, exit);
        if (found) BRG_CHECK_GOTO(retime_schedule(x, r, cand_last, cand_rc), ret, exit);
    }
    if (cfg->v > 1 && !split) {
        /* the chunks' needs under the unlimited cut (for the memory-capped
         * kinds again with the new order's holds); the same every round */
        BRG_CHECK_GOTO(unlimited_cut(x, r, &pb, cand_last, cand_rc, &found), ret, exit);
        if (found && (!(chunk_need = brg_calloc((size_t)V, sizeof *chunk_need, "a plan's budget shares")) ||
                      !(free_cut = brg_malloc((size_t)V * sizeof *free_cut, "a plan's budget shares")))) {
            ret = BRG_ERR_HOST_MEMORY;
            goto exit;
        }
        if (found) {
            chunk_needs(r, cand_last, cand_rc, chunk_need);
            memcpy(free_cut, cand_last, (size_t)V * sizeof *free_cut);
        }
    }
    for (int round = 0; round < MAX_ROUNDS; round++) {
        share_budgets(r, dev_budget, chunk_need);
        brg_partition part = {0, 0.0, cand_last, cand_rc};
        r->searches++;
        if (split) {
            memcpy(cand_last, split, (size_t)(V - 1) * sizeof *cand_last);
            cand_last[V - 1] = x->nb - 1;
            BRG_CHECK_GOTO(judge_manual_cut(r, dev_budget, cand_last, refused, cand_rc, &part.feasible), ret,
                           exit);
            /* a tighter budget that recomputes nothing more, or no set left
             * that was not refused: the last round's answer stands */
            if (round > 0 && memcmp(cand_rc, r->rc, (size_t)V) == 0) break;
            int spent = 0;
            for (int d = 0; refused && d < p; d++) {
                const unsigned set = recompute_set(r, cand_rc, d);
                spent |= (int)(refused[(size_t)d * REFUSED_WORDS + set / 64] >> set % 64 & 1u);
            }
            if (spent) break;
        } else {
            BRG_CHECK_GOTO(brg_partition_search(&pb, x->opt->search, &part), ret, exit);
            if (!part.feasible && chunk_need) { /* then the equal share */
                share_budgets(r, dev_budget, NULL);
                BRG_CHECK_GOTO(brg_partition_search(&pb, x->opt->search, &part), ret, exit);
            }
            if (!part.feasible && cfg->v > 1) /* then others */
                BRG_CHECK_GOTO(search_shares(x, r, &pb, dev_budget, chunk_need, &part), ret, exit);
            if (!part.feasible && cfg->v > 1) /* then a repaired cut's */
                BRG_CHECK_GOTO(search_repaired(x, r, &pb, dev_budget, free_cut, &part), ret, exit);
            if (!part.feasible) {
                const int in_flight = brg_schedule_max_in_flight(r->sched, 0, -1);
                if (!r->partitioned && cfg->v == 1) /* the search is exact: no cut fits */
                    snprintf(r->why, sizeof r->why,
                             "no cut of the %d blocks into %d stage%s fits: some block, or the stash of up to "
                             "%d micro-batch%s in flight, is too large",
                             x->nb, V, V == 1 ? "" : "s", in_flight, in_flight == 1 ? "" : "es");
                else if (!r->partitioned) /* the shares were guesses, the repair a local search */
                    snprintf(r->why, sizeof r->why,
                             "no cut of the %d blocks into %d stages was found that fits each device's chunks "
                             "together in its budget: some block, or the stash of up to %d micro-batch%s in "
                             "flight, is too large, or the search missed a cut (with several chunks per device "
                             "it does not try every cut)",
                             x->nb, V, in_flight, in_flight == 1 ? "" : "es");
                break; /* keep the last partition that was found, if any */
            }
        }
        memcpy(r->last, cand_last, (size_t)V * sizeof *cand_last);
        memcpy(r->rc, cand_rc, (size_t)V);
        r->partitioned = 1;
        BRG_CHECK_GOTO(fill_stages(x, r), ret, exit);
        /* The dry runs decide when there are any; else the estimates. */
        int all_fit = verify ? 1 : part.feasible;
        if (verify) BRG_CHECK_GOTO(dry_run_all(x, r), ret, exit);
        for (int d = 0; d < p; d++) all_fit &= r->stages[d].fits;
        if (all_fit) {
            r->feasible = 1;
            r->why[0] = '\0';
            break;
        }
        /* The first device that misses in full, and every other one too
         * (one alone named made a cut look one device short). */
        int named = 0;
        for (int d = 0; d < p; d++) {
            if (r->stages[d].fits) continue;
            if (!named++) {
                describe_miss(&r->stages[d], x->opt->headroom, r->why, sizeof r->why);
                continue;
            }
            const brg_plan_stage *st = &r->stages[d];
            const size_t need = st->peak_bytes > st->arena_bytes ? st->peak_bytes : st->arena_bytes;
            char peak[32], budget[32];
            const size_t len = strlen(r->why);
            snprintf(r->why + len, sizeof r->why - len, "; device %d too: %s%s against %s", d,
                     st->verified ? "" : "about ", fmt_bytes(need, peak), fmt_bytes(st->budget_bytes, budget));
        }
        /* Hand-given cuts are retried only for what auto may recompute:
         * another set of chunks on each device that missed. */
        if (!verify || (split && r->cfg.rc != BRG_RECOMPUTE_AUTO)) break;
        if (refused) {
            for (int d = 0; d < p; d++) {
                const unsigned set = recompute_set(r, r->rc, d);
                if (!r->stages[d].fits) refused[(size_t)d * REFUSED_WORDS + set / 64] |= (uint64_t)1 << set % 64;
            }
            const size_t len = strlen(r->why);
            snprintf(r->why + len, sizeof r->why - len, ", and other choices of chunks to recompute did not fit");
            continue;
        }
        /* The dry run is the authority: lower the budget of each device
         * that did not fit by what the estimate missed (counting the arena
         * it needs, fragmentation included, so that the current cut no
         * longer passes), and search again. */
        for (int d = 0; d < p; d++) {
            const brg_plan_stage *st = &r->stages[d];
            if (st->fits) continue;
            const size_t need = st->arena_bytes > st->peak_bytes ? st->arena_bytes : st->peak_bytes;
            size_t miss = need > st->estimate_bytes ? need - st->estimate_bytes : 0;
            miss += BRG_ARENA_ALIGN;
            dev_budget[d] = dev_budget[d] > miss ? dev_budget[d] - miss : 0;
        }
        const size_t len = strlen(r->why);
        snprintf(r->why + len, sizeof r->why - len, ", and tighter searches found nothing that fits");
    }
    if (r->partitioned) BRG_CHECK_GOTO(simulate(x, r), ret, exit);
exit:
    free(dev_budget);
    free(cand_last);
    free(cand_rc);
    free(chunk_need);
    free(free_cut);
    free(refused);
    return ret;
}

/* ---- the automatic choice ---- */

typedef struct candidate {
    config cfg;
    double sps;
} candidate;

static int cmp_candidate(const void *a, const void *b)
{
    const candidate *x = a, *y = b;
    if (x->sps != y->sps) return x->sps > y->sps ? -1 : 1;
    if (x->cfg.m != y->cfg.m) return x->cfg.m < y->cfg.m ? -1 : 1;
    return (int)x->cfg.kind - (int)y->cfg.kind;
}

static const brg_schedule_kind auto_kinds[] = {BRG_SCHEDULE_1F1B, BRG_SCHEDULE_GPIPE,  BRG_SCHEDULE_ZB_H1,
                                               BRG_SCHEDULE_INTERLEAVED, BRG_SCHEDULE_ZB_V, BRG_SCHEDULE_V_HALF,
                                               BRG_SCHEDULE_V_MIN, BRG_SCHEDULE_ZB_H2};

static void describe_config(const result *r, char *buf, size_t size)
{
    int n_rc = 0;
    for (int vs = 0; vs < r->V; vs++) n_rc += r->rc[vs];
    char chunks[32] = "";
    if (r->cfg.kind == BRG_SCHEDULE_INTERLEAVED) snprintf(chunks, sizeof chunks, " x%d chunks", r->cfg.v);
    char rc[64];
    if (n_rc == 0) snprintf(rc, sizeof rc, "no recomputation");
    else if (n_rc == r->V) snprintf(rc, sizeof rc, "recomputation on every stage");
    else snprintf(rc, sizeof rc, "recomputation on %d of %d stages", n_rc, r->V);
    snprintf(buf, size, "%s%s with %d micro-batch%s of %d, %s", brg_schedule_kind_name(r->cfg.kind), chunks,
             r->cfg.m, r->cfg.m == 1 ? "" : "es", r->u, rc);
}

/* Try every schedule kind and micro-batch count (micro_batches when
 * given, else the divisors of batch up to AUTO_MAX_MICRO_BATCHES) on the
 * estimates, then verify the best ones in order of predicted throughput
 * until one passes its dry runs. */
static brg_status solve_auto(ctx *x, int batch, int micro_batches, const brg_device_spec *devs, int p, int verify,
                             result *best, char *note, int *tried)
{
    const int m_lo = micro_batches > 0 ? micro_batches : 1;
    const int m_hi = micro_batches > 0 ? micro_batches : AUTO_MAX_MICRO_BATCHES;
    const brg_plan_options *o = x->opt;
    const int n_kinds = (int)(sizeof auto_kinds / sizeof auto_kinds[0]);
    memset(best, 0, sizeof *best); /* the caller frees it, whatever happens */
    candidate *cands = brg_calloc((size_t)n_kinds * AUTO_MAX_MICRO_BATCHES, sizeof *cands, "the automatic search");
    if (!cands) return BRG_ERR_HOST_MEMORY;
    int n = 0, total = 0;
    brg_status ret = BRG_OK;
    /* The fastest combination on the estimates that does not fit: what the
     * choice gave up, and why. */
    candidate unfit = {{0}, 0.0};
    char unfit_why[512] = "";
    int skipped = 0; /* combinations some layer cannot train (e.g. BatchNorm on micro-batches of 1), */
    char skipped_why[512] = ""; /* and the first one's reason */
    for (int k = 0; k < n_kinds; k++) {
        const brg_schedule_kind kind = auto_kinds[k];
        const int v = brg_plan_chunks_of(kind, o->chunks);
        if (x->nb < p * v || p * v > BRG_SCHEDULE_MAX_VIRTUAL_STAGES || (v > 1 && p == 1)) continue;
        for (int m = m_lo; m <= batch && m <= m_hi; m++) {
            if (batch % m) continue;
            if ((double)p * v * m > (double)BRG_SCHEDULE_MAX_UNITS) continue;
            config cfg = {kind, v, m, batch, o->recompute};
            result r;
            total++;
            ret = run_config(x, &cfg, devs, p, NULL, 0, &r);
            if (ret == BRG_OK && r.feasible) cands[n++] = (candidate){cfg, r.sps};
            else if (ret == BRG_OK && r.untrainable) {
                if (!skipped++) snprintf(skipped_why, sizeof skipped_why, "%s", r.why);
            } else if (ret == BRG_OK && r.partitioned && r.sps > unfit.sps) {
                unfit = (candidate){cfg, r.sps};
                snprintf(unfit_why, sizeof unfit_why, "%s", r.why);
            }
            result_free(&r);
            if (ret != BRG_OK) goto exit;
        }
    }
    if (tried) *tried = total;
    qsort(cands, (size_t)n, sizeof *cands, cmp_candidate);
    int chosen = -1;
    for (int i = 0; i < n; i++) {
        result r;
        ret = run_config(x, &cands[i].cfg, devs, p, NULL, verify, &r);
        if (ret != BRG_OK) {
            result_free(&r);
            goto exit;
        }
        if (r.feasible) {
            result_free(best);
            *best = r;
            chosen = i;
            break;
        }
        if (!best->partitioned) {
            result_free(best);
            *best = r;
        } else {
            result_free(&r);
        }
    }
    if (note && chosen >= 0) {
        char what[160];
        describe_config(best, what, sizeof what);
        note_add(note, "auto: %s: %.4g samples/s predicted, the best of %d combinations that fit (of %d tried)", what,
                 best->sps, n, total);
        if (skipped) note_add(note, "      %d skipped, they cannot train: %s", skipped, skipped_why);
        if (unfit.sps > best->sps)
            note_add(note, "      %s with %d micro-batches would be %.0f%% faster but does not fit: %s",
                     brg_schedule_kind_name(unfit.cfg.kind), unfit.cfg.m, 100.0 * (unfit.sps / best->sps - 1.0),
                     unfit_why);
        /* The runner-up of another kind says what the choice beat. */
        for (int i = chosen + 1; i < n; i++) {
            if (cands[i].cfg.kind == best->cfg.kind) continue;
            note_add(note, "      next best: %s with %d micro-batches, %.4g samples/s",
                     brg_schedule_kind_name(cands[i].cfg.kind), cands[i].cfg.m, cands[i].sps);
            break;
        }
    }
    if (n == 0 && total > skipped) {
        /* Nothing fits, not even on the estimates: explain the leanest
         * combination tried (1F1B with the smallest micro-batch that
         * trains), as a fixed schedule would be explained, so that the
         * culprit block, the fewest devices and the largest batch are found
         * on a configuration. */
        int m_lean = m_lo;
        for (int m = m_lo; m <= batch && m <= m_hi; m++)
            if (batch % m == 0 && (double)p * m <= (double)BRG_SCHEDULE_MAX_UNITS && batch / m >= x->min_u)
                m_lean = m;
        const config lean = {BRG_SCHEDULE_1F1B, 1, m_lean, batch, o->recompute};
        result_free(best);
        ret = run_config(x, &lean, devs, p, NULL, verify, best);
        if (ret != BRG_OK) goto exit;
    }
    best->untrainable = n == 0 && skipped == total; /* then a plan is refused, not explained */
    if (n == 0 && skipped == total)
        snprintf(best->why, sizeof best->why,
                 "none of the %d combinations of schedule and micro-batch count can train: %s", total, skipped_why);
    else if (n == 0)
        snprintf(best->why, sizeof best->why,
                 "none of the %d combinations of schedule and micro-batch count fits these devices%s%.400s", total,
                 skipped ? "; some cannot train: " : "", skipped ? skipped_why : "");
exit:
    free(cands);
    return ret;
}

/* Plan batch on devs: the automatic search, or the configured schedule with
 * micro_batches (0: the default for the batch). */
static brg_status solve(ctx *x, int batch, int micro_batches, const brg_device_spec *devs, int p, int verify,
                        result *r)
{
    const brg_plan_options *o = x->opt;
    if (o->schedule_auto) return solve_auto(x, batch, micro_batches, devs, p, verify, r, NULL, NULL);
    const config cfg = fixed_config(x, batch, micro_batches, p);
    return run_config(x, &cfg, devs, p, NULL, verify, r);
}

/* Whether batch fits devs[0..p) (solve's arguments) into *ok, and into *m
 * (when not NULL) the micro-batch count it was planned with. */
static brg_status fits(ctx *x, int batch, int micro_batches, const brg_device_spec *devs, int p, int verify, int *ok,
                       int *m)
{
    result r;
    const brg_status ret = solve(x, batch, micro_batches, devs, p, verify, &r);
    *ok = ret == BRG_OK && r.feasible;
    if (m) *m = r.cfg.m;
    result_free(&r);
    return ret;
}

/* ---- when nothing fits ---- */

/* The block that fits no stage even alone, by the estimates, with the
 * largest excess; -1 if every block fits somewhere alone. */
static void find_culprit(const ctx *x, const result *r, const brg_schedule *sched, brg_plan_info *info)
{
    if (!r->cost || !r->holds) return;
    size_t worst = 0;
    for (int b = 0; b < x->nb; b++) {
        brg_cost_range rg;
        brg_cost_range_of(r->cost, b, b, &rg);
        size_t best_need = 0, best_budget = 0, best_excess = (size_t)-1;
        int best_device = -1;
        /* Block b can only be on the stages that leave a block for each
         * stage before and after it. */
        const int lo = r->V - (x->nb - b) > 0 ? r->V - (x->nb - b) : 0, hi = b < r->V - 1 ? b : r->V - 1;
        for (int vs = lo; vs <= hi; vs++) {
            /* alone, a block may take its device's whole budget, whatever
             * the device's other chunks hold */
            const int d = brg_schedule_device_of(sched, vs);
            size_t budget = r->budget[d];
            size_t need = (size_t)-1;
            if (r->cfg.rc != BRG_RECOMPUTE_ALL)
                need = brg_cost_range_peak(r->cost, &rg, r->holds[vs], r->n_holds[vs], 0);
            if (r->cfg.rc != BRG_RECOMPUTE_NONE) {
                size_t n2 = brg_cost_range_peak(r->cost, &rg, r->holds[vs], r->n_holds[vs], 1);
                if (n2 < need) need = n2;
            }
            size_t excess = need > budget ? need - budget : 0;
            if (excess < best_excess) {
                best_excess = excess;
                best_need = need;
                best_budget = budget;
                best_device = d;
            }
        }
        if (best_excess > 0 && best_excess > worst) {
            worst = best_excess;
            info->culprit_block = b;
            info->culprit_bytes = best_need;
            info->culprit_budget = best_budget;
            info->culprit_device = best_device;
        }
    }
}

/* The largest device given (the first of them). */
static const brg_device_spec *largest_device(const brg_plan_options *o)
{
    const brg_device_spec *big = &o->devices[0];
    for (int d = 1; d < o->n_devices; d++)
        if (o->devices[d].capacity > big->capacity) big = &o->devices[d];
    return big;
}

/* The fewest devices of the largest size given that a plan fits on,
 * assuming more devices never make it harder: doubling, then bisection,
 * on the estimates; the answer is then checked with dry runs. */
static brg_status fewest_devices(ctx *x, const result *r0, int *answer)
{
    *answer = 0;
    const brg_plan_options *o = x->opt;
    const brg_device_spec big = *largest_device(o);
    /* The given list does not fit: when all its devices are of the largest
     * size, neither do fewer of them; else any count may. */
    int uniform = 1;
    for (int d = 0; d < o->n_devices; d++)
        uniform &= o->devices[d].capacity == big.capacity && o->devices[d].backend == big.backend;
    const int v = r0->cfg.v;
    int cap = x->nb / v;
    if (cap > BRG_PLAN_MAX_DEVICES) cap = BRG_PLAN_MAX_DEVICES;
    if (cap > BRG_SCHEDULE_MAX_VIRTUAL_STAGES / v) cap = BRG_SCHEDULE_MAX_VIRTUAL_STAGES / v;
    int lo = uniform ? o->n_devices : 0, hi = -1; /* lo does not fit */
    if (cap <= lo) return BRG_OK;
    brg_device_spec *devs = brg_malloc((size_t)cap * sizeof *devs, "the device search");
    if (!devs) return BRG_ERR_HOST_MEMORY;
    for (int d = 0; d < cap; d++) devs[d] = big;
    brg_status ret = BRG_OK;
    const int fixed_m = o->micro_batches; /* 0: the default for each device count */
    for (int q = lo + 1;; q = q * 2 > cap ? cap : q * 2) {
        int ok;
        ret = fits(x, o->batch, fixed_m, devs, q, 0, &ok, NULL);
        if (ret != BRG_OK) goto exit;
        if (ok) {
            hi = q;
            break;
        }
        lo = q;
        if (q == cap) break;
    }
    if (hi < 0) goto exit;
    while (hi - lo > 1) {
        int mid = lo + (hi - lo) / 2;
        int ok;
        ret = fits(x, o->batch, fixed_m, devs, mid, 0, &ok, NULL);
        if (ret != BRG_OK) goto exit;
        if (ok) hi = mid;
        else lo = mid;
    }
    /* Confirm with dry runs, stepping up if they disagree. */
    for (int q = hi; q <= cap && q < hi + 4; q++) {
        int ok;
        ret = fits(x, o->batch, fixed_m, devs, q, o->verify, &ok, NULL);
        if (ret != BRG_OK) goto exit;
        if (ok) {
            *answer = q;
            break;
        }
    }
exit:
    free(devs);
    return ret;
}

/* The largest batch the given devices take: bisection on the estimates
 * (with micro_batches fixed over its multiples, else over every batch below
 * the one asked for with the default micro-batch count), then the answer
 * confirmed with dry runs, bisecting below it while they disagree. */
static brg_status largest_batch(ctx *x, int *batch_out, int *m_out)
{
    const brg_plan_options *o = x->opt;
    *batch_out = *m_out = 0;
    const int fixed_m = o->micro_batches;
    const int step = fixed_m > 0 ? fixed_m : 1;
    /* In units of step: lo fits (trivially below x->min_u: a unit is a
     * micro-batch's samples with fixed_m, else the batch, whose default M
     * leaves micro-batches that train from min_u samples), hi does not. */
    const int floor_q = x->min_u - 1;
    int lo = floor_q, hi = o->batch / step;
    while (hi - lo > 1) {
        int mid = lo + (hi - lo) / 2;
        int ok;
        BRG_CHECK(fits(x, mid * step, fixed_m, o->devices, o->n_devices, 0, &ok, NULL));
        if (ok) lo = mid;
        else hi = mid;
    }
    /* Confirm with dry runs. They can refuse what the estimate allows (free
     * memory in pieces), so bisect again below lo with dry runs deciding. */
    int good = floor_q, bad = lo + 1, good_m = 0;
    for (int first = 1; bad - good > 1 || first; first = 0) {
        int q = first ? lo : good + (bad - good) / 2;
        if (q <= floor_q) break;
        int ok, m;
        BRG_CHECK(fits(x, q * step, fixed_m, o->devices, o->n_devices, o->verify, &ok, &m));
        if (ok) {
            good = q;
            good_m = m;
        } else {
            bad = q;
        }
    }
    if (good_m > 0) {
        *batch_out = good * step;
        *m_out = good_m;
    }
    return BRG_OK;
}

static brg_status explain(ctx *x, const result *r, brg_plan *plan)
{
    brg_plan_info *info = &plan->info;
    const brg_plan_options *o = x->opt;
    char b1[32], b2[32], b3[32], b4[32];
    find_culprit(x, r, plan->schedule, info); /* the plan holds r's schedule now */
    const size_t big = largest_device(o)->capacity;
    if (info->culprit_block >= 0) {
        const size_t cap = o->devices[info->culprit_device].capacity;
        note_add(plan->note,
                 "block '%s' does not fit even alone: at best it needs about %s, and device %d (%s), where it comes "
                 "closest, allows %s (capacity less %.0f%% headroom): %s too much",
                 brg_model_block_name(x->model, info->culprit_block), fmt_bytes(info->culprit_bytes, b1),
                 info->culprit_device, fmt_bytes(cap, b4), fmt_bytes(info->culprit_budget, b2), o->headroom * 100.0,
                 fmt_bytes(info->culprit_bytes - info->culprit_budget, b3));
    }
    BRG_CHECK(fewest_devices(x, r, &info->fewest_devices));
    /* A culprit held to a smaller device says nothing of the largest. */
    const int culprit_big = info->culprit_block >= 0 && o->devices[info->culprit_device].capacity == big;
    if (info->fewest_devices > 0)
        note_add(plan->note, "%d device%s of %s would fit this batch", info->fewest_devices,
                 info->fewest_devices == 1 ? "" : "s", fmt_bytes(big, b1));
    else if (culprit_big)
        note_add(plan->note, "no number of %s devices fits this batch: block '%s' does not fit even alone",
                 fmt_bytes(big, b1), brg_model_block_name(x->model, info->culprit_block));
    else
        note_add(plan->note, "no number of %s devices fits this batch with %d micro-batches", fmt_bytes(big, b1),
                 r->cfg.m);
    BRG_CHECK(largest_batch(x, &info->largest_batch, &info->largest_batch_micro_batches));
    if (info->largest_batch > 0)
        note_add(plan->note, "the largest batch these devices take is %d (%d micro-batch%s of %d)",
                 info->largest_batch, info->largest_batch_micro_batches,
                 info->largest_batch_micro_batches == 1 ? "" : "es",
                 info->largest_batch / info->largest_batch_micro_batches);
    else
        note_add(plan->note, "no batch fits these devices, not even %d sample%s%s", x->min_u, x->min_u == 1 ? "" : "s",
                 o->micro_batches > 0 ? " per micro-batch" : "");
    return BRG_OK;
}

/* ---- the plan ---- */

brg_status brg_plan_create(const brg_model *model, const brg_plan_options *options, brg_plan **out)
{
    if (!out) return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_plan_create: out is NULL");
    *out = NULL;
    if (!model || !options)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_plan_create: model and options must be given");
    BRG_CHECK(brg_plan_check_options(model, options));
    ctx x;
    memset(&x, 0, sizeof x);
    x.model = model;
    x.opt = options;
    x.nb = brg_model_block_count(model);
    x.min_u = min_micro_batch(model, &x.min_u_layer);
    brg_plan *plan = brg_calloc(1, sizeof *plan, "a plan");
    if (!plan) return BRG_ERR_HOST_MEMORY;
    plan->model = model;
    plan->optimizer = options->optimizer;
    result r;
    memset(&r, 0, sizeof r);
    brg_status ret = BRG_OK;
    int tried = 0;
    if (options->profile_path) {
        x.measure = strcmp(options->profile_path, BRG_PROFILE_AUTO) == 0;
        if (x.measure && cpu_devices(options) < options->n_devices) {
            ret = brg_error(BRG_ERR_INVALID_ARGUMENT, "--profile auto measures the layers on this machine's CPU, "
                            "so it plans CPU devices only: for GPUs give a profile measured on them (--profile FILE)");
            goto fail;
        }
        if (!x.measure) BRG_CHECK_GOTO(brg_profile_load(model, options->profile_path, &x.profile), ret, fail);
        plan->profile = brg_malloc(strlen(options->profile_path) + 1, "a plan");
        if (!plan->profile) {
            ret = BRG_ERR_HOST_MEMORY;
            goto fail;
        }
        strcpy(plan->profile, options->profile_path);
    } else if (options->cpu_calibration && cpu_devices(options) == options->n_devices) {
        BRG_CHECK_GOTO(brg_cpu_speed_get(options->n_devices, &options->optimizer, &x.speed), ret, fail);
        x.calibrated = 1;
        snprintf(plan->speed_cache, sizeof plan->speed_cache, "%s", x.speed.cache);
    }
    if (options->schedule_auto) {
        BRG_CHECK_GOTO(solve_auto(&x, options->batch, options->micro_batches, options->devices, options->n_devices,
                                  options->verify, &r, plan->note, &tried),
                       ret, fail);
    } else {
        const config cfg = fixed_config(&x, options->batch, options->micro_batches, options->n_devices);
        BRG_CHECK_GOTO(run_config(&x, &cfg, options->devices, options->n_devices, options->split, options->verify, &r),
                       ret, fail);
    }

    if (r.untrainable) { /* what the options ask for cannot work: like an option error */
        ret = brg_error(BRG_ERR_INVALID_ARGUMENT, "%s", r.why);
        goto fail;
    }
    brg_plan_info *info = &plan->info;
    info->feasible = r.feasible;
    info->partitioned = r.partitioned;
    info->manual = options->split != NULL;
    info->devices = options->n_devices;
    info->blocks = x.nb;
    info->batch = options->batch;
    info->replicas = options->replicas > 1 ? options->replicas : 1;
    info->sync_batchnorm = options->sync_batchnorm != 0;
    info->recompute = options->recompute;
    info->headroom = options->headroom;
    info->device_flops = options->device_flops;
    info->link_bytes_per_s = options->link_bytes_per_s;
    info->profile = plan->profile;
    info->times = x.calibrated ? BRG_PLAN_TIMES_CALIBRATED
                  : x.measure  ? BRG_PLAN_TIMES_MEASURED
                  : x.profile  ? BRG_PLAN_TIMES_PROFILE
                               : BRG_PLAN_TIMES_FLOPS;
    info->cpu_speed_cache = x.calibrated ? plan->speed_cache : NULL;
    info->cpu_speed_cached = x.calibrated && x.speed.cached;
    info->candidates = tried;
    info->culprit_block = info->culprit_device = -1;
    if (r.sched || r.partitioned) {
        info->schedule = r.cfg.kind;
        info->chunks = r.cfg.v;
        info->micro_batches = r.cfg.m;
        info->micro_batch = r.u;
    } else {
        info->schedule = options->schedule_auto ? BRG_SCHEDULE_1F1B : options->schedule;
        info->chunks = 1;
    }
    info->searches = r.searches;
    if (r.partitioned) {
        info->bottleneck_s = r.bottleneck;
        info->step_s = r.step_s;
        info->allreduce_s = r.allreduce_s;
        info->bubble = r.bubble;
        info->samples_per_s = r.sps;
        plan->stages = r.stages;
        r.stages = NULL;
        plan->times = r.times;
        r.times = NULL;
        plan->parts = brg_calloc((size_t)info->devices, sizeof *plan->parts, "a plan");
        if (!plan->parts) {
            ret = BRG_ERR_HOST_MEMORY;
            goto fail;
        }
        for (int d = 0; d < info->devices; d++) plan->parts[d] = plan->stages[d].part;
    }
    plan->schedule = r.sched;
    r.sched = NULL;
    if (!r.feasible) {
        note_add(plan->note, "%s: %s", options->split ? "the cuts do not fit" : "nothing fits",
                 r.why[0] ? r.why : "see the stages");
        if (options->explain && !options->split) BRG_CHECK_GOTO(explain(&x, &r, plan), ret, fail);
    }
    info->note = plan->note;
    *out = plan;
    plan = NULL;
exit:
    result_free(&r);
    for (int i = 0; i < x.n_costs; i++) brg_cost_destroy(x.costs[i].cost);
    free(x.costs);
    brg_profile_destroy(x.profile);
    return ret;
fail:
    brg_plan_destroy(plan);
    goto exit;
}

void brg_plan_destroy(brg_plan *plan)
{
    if (!plan) return;
    free(plan->stages);
    free(plan->parts);
    free(plan->times);
    brg_schedule_destroy(plan->schedule);
    free(plan->profile);
    free(plan);
}

const brg_plan_info *brg_plan_get_info(const brg_plan *plan) { return plan ? &plan->info : NULL; }

const brg_plan_stage *brg_plan_get_stage(const brg_plan *plan, int device)
{
    if (!plan || !plan->info.partitioned || device < 0 || device >= plan->info.devices) return NULL;
    return &plan->stages[device];
}

const brg_schedule *brg_plan_schedule(const brg_plan *plan) { return plan ? plan->schedule : NULL; }

brg_status brg_plan_schedule_times(const brg_plan *plan, brg_schedule_times *times)
{
    if (!plan || !times)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_plan_schedule_times: plan and times must be given");
    if (!plan->times || !plan->info.partitioned)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "the plan has no partition, so no simulated stage times");
    const int V = plan->info.devices * plan->info.chunks;
    times->forward = plan->times;
    times->backward_input = plan->times + V;
    times->backward_weight = plan->times + 2 * V;
    times->transfer = plan->times + 3 * V;
    return BRG_OK;
}
const brg_model *brg_plan_model(const brg_plan *plan) { return plan ? plan->model : NULL; }
const brg_optimizer_config *brg_plan_get_optimizer(const brg_plan *plan) { return plan ? &plan->optimizer : NULL; }

void brg_plan_set_workspace_ceilings(const brg_plan *plan, brg_device *const *devs, int n)
{
    for (int d = 0; plan && devs && d < n; d++) {
        const brg_plan_stage *st = brg_plan_get_stage(plan, d);
        if (devs[d] && st && st->verified) brg_device_set_workspace_ceiling(devs[d], st->peak_bytes);
    }
}

brg_status brg_plan_pipeline_desc(const brg_plan *plan, brg_pipeline_desc *desc)
{
    if (!plan || !desc)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_plan_pipeline_desc: plan and desc must be given");
    memset(desc, 0, sizeof *desc);
    if (!plan->info.partitioned || !plan->schedule)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "the plan has no partition%s%s (nothing to run: see its note)",
                         plan->note[0] ? ": " : "", plan->note);
    desc->model = plan->model;
    desc->schedule = plan->schedule;
    desc->parts = plan->parts;
    desc->micro_batch = plan->info.micro_batch;
    desc->optimizer = plan->optimizer;
    return BRG_OK;
}

