/* The V-shape schedules' computation orders (zb-v, v-half, v-min).
 *
 * Qi et al., "Pipeline Parallelism with Controllable Memory" (2024), place
 * two chunks per device in a V (schedule.h) and bound the activations a
 * device holds: about 1F1B's for ZB-V, half for V-Half, a third for V-Min.
 * The bound here is a cap on the chunk micro-batches a device holds between
 * a forward and its weight gradient (two make one micro-batch of a 1F1B
 * stage), the paper's figures in 1F1B micro-batches: ZB-V p, V-Half
 * floor((p + 2) / 2), V-Min floor((p + 4) / 3).
 *
 * Two constructions give a device's order of its 6m computations (F, B, W
 * of two chunks), both at unit costs (F = B = W = 1, free messages):
 *   - the timetable: a pattern that repeats every 6 steps, each device
 *     running one computation in each of the 6 slots (step mod 6), forwards
 *     down the stages and backwards back up, each at the first free slot of
 *     its device after its input, each W at the first free slot after its
 *     B. Micro-batch b runs the pattern 6b steps after micro-batch 0. It
 *     holds the least memory (its peak is V-Min's cap for p = 2..8) and its
 *     bubble is the pipeline's fill and drain only;
 *   - the list schedule: at every step each idle device runs, of what is
 *     ready, an input gradient (B, oldest micro-batch first: it is on the
 *     critical path back to the first stage), else a forward that fits
 *     under the cap (the second chunk's first: it brings its micro-batch
 *     closer to the backward that frees it), else a weight gradient (W,
 *     oldest first: the filler). A forward of chunk 0 leaves one unit free,
 *     so the second chunk's forward of the oldest unfinished micro-batch
 *     always fits and that micro-batch can always move: the construction
 *     never stalls for a cap >= 2. With room it fills the fill and drain
 *     with forwards and deferred Ws, as ZB-V does.
 * schedule.c builds both, and keeps the one that holds at most the cap,
 * passes the verifier with one-message channels and is shorter at unit
 * costs. Either order follows the data, so any durations run it without
 * deadlock, and the planner counts the memory from the order
 * (brg_schedule_max_in_flight).
 */
#include <stdlib.h>
#include <string.h>

#include "base/internal.h"
#include "schedule/schedule-impl.h"

int brg_vshape_cap(brg_schedule_kind kind, int p)
{
    switch (kind) {
    case BRG_SCHEDULE_ZB_V: return 2 * p;
    case BRG_SCHEDULE_V_HALF: return 2 * ((p + 2) / 2);
    case BRG_SCHEDULE_V_MIN: return 2 * ((p + 4) / 3);
    default: return 0;
    }
}

enum { F_ = 0, B_ = 1, W_ = 2 };

static const brg_action_type types[3] = {BRG_ACTION_FORWARD, BRG_ACTION_BACKWARD_INPUT, BRG_ACTION_BACKWARD_WEIGHT};

/* ---- the timetable ---- */

/* off[k * V + j]: the pattern's step of computation k (F_, B_, W_) of stage j. */
static void make_pattern(int p, int *off)
{
    const int V = 2 * p;
    char(*used)[6] = (char(*)[6])calloc((size_t)p, sizeof *used);
    if (!used) return;
    int *f = off, *bk = off + V, *w = off + 2 * V;
    for (int j = 0, t = 0; j < V; j++, t++) {
        const int d = brg_sched_device(p, 1, j);
        while (used[d][t % 6]) t++;
        used[d][t % 6] = 1;
        f[j] = t;
    }
    for (int j = V - 1, t = f[V - 1] + 1; j >= 0; j--, t++) {
        const int d = brg_sched_device(p, 1, j);
        while (used[d][t % 6]) t++;
        used[d][t % 6] = 1;
        bk[j] = t;
    }
    for (int j = V - 1; j >= 0; j--) {
        const int d = brg_sched_device(p, 1, j);
        int t = bk[j] + 1;
        while (used[d][t % 6]) t++;
        used[d][t % 6] = 1;
        w[j] = t;
    }
    free(used);
}

typedef struct timed {
    long long at; /* 6b + the pattern's step */
    brg_action a;
} timed;

static int by_time(const void *x, const void *y)
{
    const long long a = ((const timed *)x)->at, b = ((const timed *)y)->at;
    return (a > b) - (a < b);
}

static brg_status timetable_order(int p, int m, brg_action *order)
{
    const int V = 2 * p, per_device = 6 * m;
    int *off = calloc((size_t)V * 3, sizeof *off);
    timed *row = calloc((size_t)per_device, sizeof *row);
    if (!off || !row) {
        free(off);
        free(row);
        return brg_error(BRG_ERR_HOST_MEMORY, "cannot allocate the V-shape timetable");
    }
    make_pattern(p, off);
    for (int d = 0; d < p; d++) {
        int n = 0;
        for (int b = 0; b < m; b++)
            for (int c = 0; c < 2; c++)
                for (int k = F_; k <= W_; k++)
                    row[n++] = (timed){.at = 6LL * b + off[k * V + brg_sched_stage(p, 1, d, c)],
                                       .a = {.type = types[k], .micro_batch = b, .chunk = c, .peer = -1}};
        /* a device's slots are distinct, so no two share a time */
        qsort(row, (size_t)n, sizeof *row, by_time);
        for (int i = 0; i < n; i++) order[(size_t)d * per_device + i] = row[i].a;
    }
    free(off);
    free(row);
    return BRG_OK;
}

/* ---- the list schedule ---- */

typedef struct vs_state {
    int p, m, V, cap;
    int *end;              /* [k][j][b]: the step after computation k of (j, b) ran; 0: not yet */
    int *next;             /* [k][j]: the next micro-batch of computation k of stage j */
    int *held;             /* [d]: chunk micro-batches between F and W */
} vs_state;

static int *end_of(const vs_state *x, int k, int j, int b)
{
    return &x->end[((size_t)k * x->V + (size_t)j) * (size_t)x->m + (size_t)b];
}

static int *next_of(const vs_state *x, int k, int j) { return &x->next[k * x->V + j]; }

/* Computation k of (j, b) has run by step t. */
static int done(const vs_state *x, int k, int j, int b, int t)
{
    const int e = *end_of(x, k, j, b);
    return e != 0 && e <= t;
}

/* What device d starts at step t (header: B, else F under the cap, else
 * W), into *a; 0 when nothing is ready. */
static int pick(const vs_state *x, int d, int t, brg_action *a)
{
    int chunk = -1, mb = 0;
    for (int c = 1; c >= 0; c--) {
        const int j = brg_sched_stage(x->p, 1, d, c), b = *next_of(x, B_, j);
        if (b >= x->m || !done(x, F_, j, b, t) || (j < x->V - 1 && !done(x, B_, j + 1, b, t))) continue;
        if (chunk < 0 || b < mb) chunk = c, mb = b;
    }
    if (chunk >= 0) {
        *a = (brg_action){.type = BRG_ACTION_BACKWARD_INPUT, .micro_batch = mb, .chunk = chunk, .peer = -1};
        return 1;
    }
    for (int c = 1; c >= 0; c--) {
        const int j = brg_sched_stage(x->p, 1, d, c), b = *next_of(x, F_, j);
        if (b >= x->m || x->held[d] + 1 + (c == 0) > x->cap || (j > 0 && !done(x, F_, j - 1, b, t))) continue;
        *a = (brg_action){.type = BRG_ACTION_FORWARD, .micro_batch = b, .chunk = c, .peer = -1};
        return 1;
    }
    for (int c = 1; c >= 0; c--) {
        const int j = brg_sched_stage(x->p, 1, d, c), b = *next_of(x, W_, j);
        if (b >= *next_of(x, B_, j) || !done(x, B_, j, b, t)) continue;
        if (chunk < 0 || b < mb) chunk = c, mb = b;
    }
    if (chunk < 0) return 0;
    *a = (brg_action){.type = BRG_ACTION_BACKWARD_WEIGHT, .micro_batch = mb, .chunk = chunk, .peer = -1};
    return 1;
}

static brg_status list_order(brg_schedule_kind kind, int p, int m, brg_action *order)
{
    vs_state x = {.p = p, .m = m, .V = 2 * p, .cap = brg_vshape_cap(kind, p)};
    const int per_device = 6 * m;
    x.end = calloc((size_t)3 * x.V * (size_t)m, sizeof *x.end);
    x.next = calloc((size_t)3 * x.V + (size_t)p, sizeof *x.next);
    int *placed = calloc((size_t)p, sizeof *placed);
    brg_status ret = BRG_OK;
    if (!x.end || !x.next || !placed) {
        ret = brg_error(BRG_ERR_HOST_MEMORY, "cannot allocate the V-shape list schedule");
        goto exit;
    }
    x.held = x.next + 3 * x.V;
    for (int t = 0, left = p * per_device; left > 0; t++) {
        int moved = 0;
        /* Decisions at step t see only what ended by t, and whatever
         * starts at t ends at t + 1: the device order does not matter. */
        for (int d = 0; d < p; d++) {
            brg_action a;
            if (!pick(&x, d, t, &a)) continue;
            const int j = brg_sched_stage(p, 1, d, a.chunk);
            const int k = a.type == BRG_ACTION_FORWARD ? F_ : a.type == BRG_ACTION_BACKWARD_INPUT ? B_ : W_;
            *end_of(&x, k, j, a.micro_batch) = t + 1;
            (*next_of(&x, k, j))++;
            x.held[d] += k == F_ ? 1 : k == W_ ? -1 : 0;
            order[(size_t)d * per_device + (size_t)placed[d]++] = a;
            left--;
            moved = 1;
        }
        /* Work ran at t - 1 (so something can be ready now) or at t; a step
         * with neither would mean the header's argument is wrong. */
        if (!moved && t > 0) {
            int ran = 0;
            for (size_t i = 0; i < (size_t)3 * x.V * (size_t)m && !ran; i++) ran = x.end[i] == t;
            if (!ran) {
                ret = brg_error(BRG_ERR_INTERNAL, "%s schedule (%d devices, %d micro-batches): the list schedule "
                                "stalled at step %d", brg_schedule_kind_name(kind), p, m, t);
                goto exit;
            }
        }
    }
exit:
    free(x.end);
    free(x.next);
    free(placed);
    return ret;
}

brg_status brg_vshape_order(brg_schedule_kind kind, int construction, int p, int m, brg_action *order)
{
    if (brg_vshape_cap(kind, p) < 2)
        return brg_error(BRG_ERR_INTERNAL, "brg_vshape_order: %s is no V-shape", brg_schedule_kind_name(kind));
    return construction == 0 ? timetable_order(p, m, order) : list_order(kind, p, m, order);
}
