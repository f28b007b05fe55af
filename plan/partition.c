/* The partition search: contiguous block ranges onto an ordered list of
 * (virtual) stages, minimizing the slowest stage's time subject to every
 * stage's estimated peak fitting its budget.
 *
 * Dynamic programming over (stage, first block): g[s][i] is the smallest
 * bottleneck with which blocks i..n-1 can be placed on stages s..S-1, each
 * stage getting at least one block:
 *
 *     g[S][n] = 0,   g[S][i < n] = inf
 *     g[s][i] = min over j of max(time(i..j), g[s+1][j+1])
 *               over the j for which [i, j] fits stage s
 *
 * For a fixed i the time of [i, j] and a floor of its estimate only grow
 * with j (the cost model's bounds are built so; the estimate itself can
 * shrink, since a later cut may leave a smaller boundary to receive), so
 * the walk over j stops at the first j whose floor does not fit, or whose
 * time alone already reaches the best found: O(S n^2) range extensions at worst, and in practice about
 * n^2 ln S, each O(1) amortized. The exhaustive search tries every
 * placement of the cuts with the same estimates, for the tests. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "brigade/program.h"
#include "plan-impl.h"

int brg_partition_range_fits(const brg_partition_problem *pb, int s, const brg_cost_range *r, int *rc,
                             double *seconds)
{
    const brg_hold *h = pb->holds[s];
    const int nh = pb->n_holds[s];
    if (pb->recompute != BRG_RECOMPUTE_ALL && brg_cost_range_peak(pb->cost, r, h, nh, 0) <= pb->budget[s]) {
        *rc = 0;
        *seconds = brg_cost_range_flops(r, 0) * pb->seconds_per_flop;
        return 1;
    }
    if (pb->recompute != BRG_RECOMPUTE_NONE && brg_cost_range_peak(pb->cost, r, h, nh, 1) <= pb->budget[s]) {
        *rc = 1;
        *seconds = brg_cost_range_flops(r, 1) * pb->seconds_per_flop;
        return 1;
    }
    return 0;
}

/* ---- moments of an action list ---- */

enum { NONE = 0, AT_REST, AFTER_INPUT };

static int hold_type(brg_action_type t)
{
    switch (t) {
    case BRG_ACTION_FORWARD: return BRG_HOLD_FORWARD;
    case BRG_ACTION_BACKWARD: return BRG_HOLD_BACKWARD;
    case BRG_ACTION_BACKWARD_INPUT: return BRG_HOLD_BACKWARD_INPUT;
    case BRG_ACTION_BACKWARD_WEIGHT: return BRG_HOLD_BACKWARD_WEIGHT;
    default: return -1;
    }
}

/* A micro-batch's state after a computation of type t. The schedule's
 * receives come right before their computation and its sends right after
 * (true of every built schedule), so between actions a micro-batch is
 * either at rest or waiting for its weight part. */
static int state_after(int type)
{
    switch (type) {
    case BRG_HOLD_FORWARD: return AT_REST;
    case BRG_HOLD_BACKWARD_INPUT: return AFTER_INPUT;
    default: return NONE;
    }
}

/* Walk device's list; call visit at each computation of a counted chunk
 * (chunk < 0: all) with the others' counts before it. */
typedef void (*moment_fn)(void *ctx, const brg_action *a, int type, const int *rest, const int *residue);

static brg_status walk_moments(const brg_schedule *s, int device, int chunk, moment_fn visit, void *ctx)
{
    const int v = brg_schedule_chunks(s), m = brg_schedule_micro_batches(s);
    unsigned char *state = brg_calloc((size_t)v * (size_t)m, 1, "schedule moments");
    int *counts = brg_calloc(2 * (size_t)v, sizeof *counts, "schedule moments");
    if (!state || !counts) {
        free(state);
        free(counts);
        return BRG_ERR_HOST_MEMORY;
    }
    int *rest = counts, *residue = counts + v;
    const int n = brg_schedule_action_count(s, device);
    for (int i = 0; i < n; i++) {
        const brg_action *a = brg_schedule_action(s, device, i);
        const int type = hold_type(a->type);
        if (type < 0 || (chunk >= 0 && a->chunk != chunk)) continue;
        unsigned char *st = &state[(size_t)a->chunk * (size_t)m + (size_t)a->micro_batch];
        /* Not counting the working micro-batch itself. */
        if (*st == AT_REST) rest[a->chunk]--;
        if (*st == AFTER_INPUT) residue[a->chunk]--;
        visit(ctx, a, type, rest, residue);
        *st = (unsigned char)state_after(type);
        if (*st == AT_REST) rest[a->chunk]++;
        if (*st == AFTER_INPUT) residue[a->chunk]++;
    }
    free(state);
    free(counts);
    return BRG_OK;
}

typedef struct holds_ctx {
    brg_hold *h;
    int n, cap, chunk, failed;
} holds_ctx;

static void collect_hold(void *vctx, const brg_action *a, int type, const int *rest, const int *residue)
{
    holds_ctx *x = vctx;
    const int c = x->chunk < 0 ? 0 : a->chunk;
    brg_hold h = {type, rest[c], residue[c]};
    /* Keep only moments no other moment of the same type dominates. */
    for (int i = 0; i < x->n; i++) {
        brg_hold *o = &x->h[i];
        if (o->type != type) continue;
        if (o->rest >= h.rest && o->residue >= h.residue) return;
        if (o->rest <= h.rest && o->residue <= h.residue) {
            *o = h;
            return;
        }
    }
    if (x->n == x->cap) {
        int cap = x->cap ? 2 * x->cap : 8;
        brg_hold *p = realloc(x->h, (size_t)cap * sizeof *p);
        if (!p) {
            x->failed = 1;
            return;
        }
        x->h = p;
        x->cap = cap;
    }
    x->h[x->n++] = h;
}

brg_status brg_schedule_holds(const brg_schedule *s, int device, int chunk, brg_hold **holds, int *n_holds)
{
    *holds = NULL;
    *n_holds = 0;
    holds_ctx x = {NULL, 0, 0, brg_schedule_chunks(s) > 1 ? chunk : -1, 0};
    brg_status st = walk_moments(s, device, x.chunk, collect_hold, &x);
    if (st == BRG_OK && x.failed)
        st = brg_error(BRG_ERR_HOST_MEMORY, "cannot allocate host memory for schedule moments");
    if (st != BRG_OK) {
        free(x.h);
        return st;
    }
    *holds = x.h;
    *n_holds = x.n;
    return BRG_OK;
}

typedef struct device_ctx {
    const brg_cost *cost;
    const brg_cost_range *ranges;
    const unsigned char *rc;
    int v;
    size_t rest[BRG_PROGRAM_MAX_CHUNKS], most;
} device_ctx;

static void device_moment(void *vctx, const brg_action *a, int type, const int *rest, const int *residue)
{
    device_ctx *x = vctx;
    size_t v = brg_cost_range_working(x->cost, &x->ranges[a->chunk], x->rc[a->chunk], type);
    for (int c = 0; c < x->v; c++)
        v += (size_t)rest[c] * x->rest[c] + (size_t)residue[c] * x->ranges[c].residue;
    if (v > x->most) x->most = v;
}

brg_status brg_device_estimate(const brg_cost *cost, const brg_schedule *s, int device, const brg_cost_range *ranges,
                               const unsigned char *recompute, size_t *bytes)
{
    device_ctx x;
    memset(&x, 0, sizeof x);
    x.cost = cost;
    x.ranges = ranges;
    x.rc = recompute;
    x.v = brg_schedule_chunks(s);
    size_t persistent = 0;
    for (int c = 0; c < x.v; c++) {
        x.rest[c] = brg_cost_range_rest(cost, &ranges[c], recompute[c]);
        persistent += ranges[c].persistent - ranges[c].receive;
    }
    persistent += brg_cost_device_receive(ranges, s, device);
    BRG_CHECK(walk_moments(s, device, -1, device_moment, &x));
    *bytes = persistent + x.most;
    return BRG_OK;
}

static brg_status search_dp(const brg_partition_problem *pb, brg_partition *out)
{
    const int n = pb->cost->n_blocks, S = pb->n_stages;
    const size_t cols = (size_t)n + 1;
    double *g = brg_malloc(((size_t)S + 1) * cols * sizeof *g, "the partition search");
    int *choice = brg_malloc((size_t)S * cols * sizeof *choice, "the partition search");
    unsigned char *rcs = brg_calloc((size_t)S * cols, 1, "the partition search");
    if (!g || !choice || !rcs) {
        free(g);
        free(choice);
        free(rcs);
        return BRG_ERR_HOST_MEMORY;
    }
    for (size_t x = 0; x < ((size_t)S + 1) * cols; x++) g[x] = INFINITY;
    g[(size_t)S * cols + (size_t)n] = 0.0;
    brg_cost_range r;
    for (int s = S - 1; s >= 0; s--) {
        const int jmax = n - (S - s); /* leave a block for each later stage */
        for (int i = s; i <= jmax; i++) {
            double best = INFINITY;
            int best_j = -1, best_rc = 0;
            brg_cost_range_start(pb->cost, i, &r);
            for (int j = i; j <= jmax; j++) {
                brg_cost_range_extend(pb->cost, &r);
                /* Times only grow with j, and recomputation adds to them. */
                if (brg_cost_range_flops(&r, 0) * pb->seconds_per_flop >= best) break;
                int rc;
                double t;
                if (!brg_partition_range_fits(pb, s, &r, &rc, &t)) {
                    /* The estimate itself can shrink as j grows (a smaller
                     * boundary to receive gradients through); its floor
                     * cannot, so stop once no mode's floor fits. */
                    const brg_hold *h = pb->holds[s];
                    const int nh = pb->n_holds[s];
                    const int plain_done = pb->recompute == BRG_RECOMPUTE_ALL ||
                                           brg_cost_range_peak_floor(pb->cost, &r, h, nh, 0) > pb->budget[s];
                    const int replay_done = pb->recompute == BRG_RECOMPUTE_NONE ||
                                            brg_cost_range_peak_floor(pb->cost, &r, h, nh, 1) > pb->budget[s];
                    if (plain_done && replay_done) break;
                    continue;
                }
                double rest = g[(size_t)(s + 1) * cols + (size_t)j + 1];
                double v = t > rest ? t : rest;
                if (v < best) {
                    best = v;
                    best_j = j;
                    best_rc = rc;
                }
            }
            g[(size_t)s * cols + (size_t)i] = best;
            choice[(size_t)s * cols + (size_t)i] = best_j;
            rcs[(size_t)s * cols + (size_t)i] = (unsigned char)best_rc;
        }
    }
    out->bottleneck = g[0];
    out->feasible = isfinite(g[0]);
    if (out->feasible) {
        int i = 0;
        for (int s = 0; s < S; s++) {
            int j = choice[(size_t)s * cols + (size_t)i];
            out->last[s] = j;
            out->recompute[s] = rcs[(size_t)s * cols + (size_t)i];
            i = j + 1;
        }
    }
    free(g);
    free(choice);
    free(rcs);
    return BRG_OK;
}

void brg_partition_evaluate(const brg_partition_problem *pb, brg_partition *out)
{
    brg_cost_range r;
    int first = 0;
    out->feasible = 1;
    out->bottleneck = 0.0;
    for (int s = 0; s < pb->n_stages; s++) {
        brg_cost_range_of(pb->cost, first, out->last[s], &r);
        int rc = 0;
        double t;
        if (!brg_partition_range_fits(pb, s, &r, &rc, &t)) {
            out->feasible = 0;
            /* Report it the way that comes closest to fitting. */
            rc = pb->recompute == BRG_RECOMPUTE_ALL ||
                 (pb->recompute == BRG_RECOMPUTE_AUTO &&
                  brg_cost_range_peak(pb->cost, &r, pb->holds[s], pb->n_holds[s], 1) <
                      brg_cost_range_peak(pb->cost, &r, pb->holds[s], pb->n_holds[s], 0));
            t = brg_cost_range_flops(&r, rc) * pb->seconds_per_flop;
        }
        out->recompute[s] = (unsigned char)rc;
        if (t > out->bottleneck) out->bottleneck = t;
        first = out->last[s] + 1;
    }
    if (!out->feasible) out->bottleneck = INFINITY;
}

/* Every placement of S-1 cuts among the n-1 block boundaries, in
 * lexicographic order; keeps the first with the smallest bottleneck. */
static brg_status search_exhaustive(const brg_partition_problem *pb, brg_partition *out)
{
    const int n = pb->cost->n_blocks, S = pb->n_stages;
    /* C(n-1, S-1), capped. */
    double combos = 1.0;
    for (int k = 1; k <= S - 1; k++) combos = combos * (double)(n - S + k) / (double)k;
    if (combos > (double)(1 << 24))
        return brg_error(BRG_ERR_INVALID_ARGUMENT,
                         "exhaustive search: %d blocks on %d stages is %.3g placements, more than %d; use the DP "
                         "search", n, S, combos, 1 << 24);
    int *cut = brg_malloc((size_t)S * sizeof *cut, "the partition search");
    brg_partition trial = {0, 0.0, cut, NULL};
    trial.recompute = brg_malloc((size_t)S, "the partition search");
    if (!cut || !trial.recompute) {
        free(cut);
        free(trial.recompute);
        return BRG_ERR_HOST_MEMORY;
    }
    for (int s = 0; s < S; s++) cut[s] = s; /* stage s ends at block s; the last stage ends at n-1 */
    cut[S - 1] = n - 1;
    out->feasible = 0;
    out->bottleneck = INFINITY;
    for (;;) {
        brg_partition_evaluate(pb, &trial);
        if (trial.feasible && trial.bottleneck < out->bottleneck) {
            out->feasible = 1;
            out->bottleneck = trial.bottleneck;
            memcpy(out->last, cut, (size_t)S * sizeof *cut);
            memcpy(out->recompute, trial.recompute, (size_t)S);
        }
        /* Next combination of cut[0..S-2] in [0, n-2], increasing. */
        int k = S - 2;
        while (k >= 0 && cut[k] == n - 2 - (S - 2 - k)) k--;
        if (k < 0) break;
        cut[k]++;
        for (int q = k + 1; q <= S - 2; q++) cut[q] = cut[q - 1] + 1;
    }
    free(cut);
    free(trial.recompute);
    return BRG_OK;
}

brg_status brg_partition_search(const brg_partition_problem *pb, brg_plan_search method, brg_partition *out)
{
    out->feasible = 0;
    out->bottleneck = INFINITY;
    if (pb->n_stages < 1 || pb->cost->n_blocks < pb->n_stages) return BRG_OK;
    if (method == BRG_PLAN_SEARCH_EXHAUSTIVE) return search_exhaustive(pb, out);
    return search_dp(pb, out);
}
