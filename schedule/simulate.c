/* The schedule simulator: the schedule walk (walk.h) with durations, each
 * device keeping its own clock. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "brigade/schedule.h"
#include "base/internal.h"
#include "schedule/schedule-impl.h"
#include "schedule/walk.h"

void brg_schedule_sim_destroy(brg_schedule_sim *sim) { free(sim); }

static brg_status check_times(const char *who, const double *x, int n, const char *what)
{
    if (!x && n > 0) return brg_error(BRG_ERR_INVALID_ARGUMENT, "%s: no %s times", who, what);
    for (int i = 0; i < n; i++)
        if (!isfinite(x[i]) || x[i] < 0)
            return brg_error(BRG_ERR_INVALID_ARGUMENT, "%s: %s time of %s %d is %g (must be finite and >= 0)", who,
                             what, strcmp(what, "transfer") == 0 ? "boundary" : "stage", i, x[i]);
    return BRG_OK;
}

brg_status brg_schedule_check_times(const brg_schedule_times *times, int V, const char *who)
{
    BRG_CHECK(check_times(who, times->forward, V, "forward"));
    BRG_CHECK(check_times(who, times->backward_input, V, "backward_input"));
    BRG_CHECK(check_times(who, times->backward_weight, V, "backward_weight"));
    if (times->transfer) BRG_CHECK(check_times(who, times->transfer, V - 1, "transfer"));
    return BRG_OK;
}

/* Room for device d's step points: the start, and one change at each
 * forward and at the backward that retires it. */
static size_t step_room(const brg_schedule *s, int d)
{
    int n = brg_schedule_action_count(s, d), forwards = 0;
    for (int i = 0; i < n; i++) forwards += brg_schedule_action(s, d, i)->type == BRG_ACTION_FORWARD;
    return 1 + 2 * (size_t)forwards;
}

/* The result in one allocation: the struct, the pointer tables, the
 * doubles, the ints (in that order, so every part is aligned for its
 * type). */
static brg_schedule_sim *sim_alloc(const brg_schedule *s)
{
    int p = brg_schedule_devices(s), v = brg_schedule_chunks(s);
    size_t actions = 0, steps = 0; /* sums over devices */
    for (int d = 0; d < p; d++) {
        actions += (size_t)brg_schedule_action_count(s, d);
        steps += step_room(s, d);
    }
    size_t bytes = sizeof(brg_schedule_sim) + 4 * (size_t)p * sizeof(void *) +
                   (2 * (size_t)p + 2 * actions + steps) * sizeof(double) +
                   (3 * (size_t)p + (size_t)p * v + steps) * sizeof(int);
    brg_schedule_sim *r = brg_calloc(1, bytes, "the schedule simulation's result");
    if (!r) return NULL;
    r->devices = p;
    r->chunks = v;
    r->start = (double **)(r + 1);
    r->end = r->start + p;
    r->step_time = r->end + p;
    r->step_count = (int **)(r->step_time + p);
    double *dbl = (double *)(r->step_count + p);
    r->busy = dbl;
    r->idle = dbl + p;
    dbl += 2 * (size_t)p;
    int *ints = (int *)(dbl + 2 * actions + steps);
    r->action_count = ints;
    r->max_in_flight = ints + p;
    r->steps = ints + 2 * (size_t)p;
    r->max_in_flight_chunk = ints + 3 * (size_t)p;
    ints += 3 * (size_t)p + (size_t)p * v;
    double *step_times = dbl + 2 * actions;
    for (int d = 0; d < p; d++) {
        int n = brg_schedule_action_count(s, d);
        size_t room = step_room(s, d);
        r->action_count[d] = n;
        r->start[d] = dbl;
        r->end[d] = dbl + n;
        dbl += 2 * (size_t)n;
        r->step_time[d] = step_times;
        r->step_count[d] = ints;
        step_times += room;
        ints += room;
    }
    return r;
}

/* Append a change of the in-flight count at time `at` to device d's step
 * function; a change at the same time as the last point replaces it (a
 * micro-batch leaving and another entering at one instant is one step). */
static void step_push(brg_schedule_sim *r, int d, double at, int count)
{
    int k = r->steps[d];
    if (k > 0 && r->step_time[d][k - 1] == at) {
        r->step_count[d][k - 1] = count;
        return;
    }
    r->step_time[d][k] = at;
    r->step_count[d][k] = count;
    r->steps[d] = k + 1;
}

/* The simulation's state while the walk runs: each device's clock, when
 * each message arrives, and the micro-batches in flight per chunk. */
typedef struct sim_run {
    const brg_schedule *s;
    const brg_schedule_times *times;
    brg_schedule_sim *r;
    int p, v, m;
    size_t msgs;       /* per direction: (V - 1) boundaries x m micro-batches */
    double *arrival;   /* [grad][boundary][b]: when the message is there */
    double *now;       /* [p] */
    int *in_flight;    /* [p][v + 1]: per chunk, then all chunks */
} sim_run;

/* A computation's duration on virtual stage j. */
static double duration(const brg_schedule_times *times, brg_action_type type, int j)
{
    switch (type) {
    case BRG_ACTION_FORWARD: return times->forward[j];
    case BRG_ACTION_BACKWARD_INPUT: return times->backward_input[j];
    case BRG_ACTION_BACKWARD_WEIGHT: return times->backward_weight[j];
    default: return times->backward_input[j] + times->backward_weight[j];
    }
}

/* Count a micro-batch entering (FORWARD) or leaving (the backward that
 * retires it) device d's chunk at time `at`. */
static void track_in_flight(sim_run *x, int d, const brg_action *a, double at)
{
    brg_schedule_sim *r = x->r;
    int *flight = &x->in_flight[(size_t)d * (x->v + 1)];
    const int v = x->v, delta = a->type == BRG_ACTION_FORWARD ? 1 : -1;
    flight[a->chunk] += delta;
    flight[v] += delta;
    if (flight[a->chunk] > r->max_in_flight_chunk[d * v + a->chunk])
        r->max_in_flight_chunk[d * v + a->chunk] = flight[a->chunk];
    if (flight[v] > r->max_in_flight[d]) r->max_in_flight[d] = flight[v];
    step_push(r, d, at, flight[v]);
}

/* The walk's step: an action starts when its device is free (and, for a
 * receive, when its message has arrived) and lasts its duration; a send
 * takes no device time, its message arrives after the boundary's transfer
 * time. */
static brg_status sim_step(void *ctx, int d, int i, const brg_action *a)
{
    sim_run *x = ctx;
    brg_schedule_sim *r = x->r;
    const int j = brg_sched_stage(x->p, x->s->vshape, d, a->chunk), b = a->micro_batch; /* verified: in range */
    const double t = x->now[d];
    r->start[d][i] = t;
    switch (a->type) {
    case BRG_ACTION_FORWARD:
    case BRG_ACTION_BACKWARD:
    case BRG_ACTION_BACKWARD_INPUT:
    case BRG_ACTION_BACKWARD_WEIGHT: {
        const double dur = duration(x->times, a->type, j);
        x->now[d] = t + dur;
        r->busy[d] += dur;
        if (a->type == BRG_ACTION_FORWARD) track_in_flight(x, d, a, t);
        else if (a->type != BRG_ACTION_BACKWARD_INPUT) track_in_flight(x, d, a, x->now[d]);
        break;
    }
    case BRG_ACTION_SEND_ACT:
    case BRG_ACTION_SEND_GRAD: {
        const int grad = a->type == BRG_ACTION_SEND_GRAD, boundary = grad ? j - 1 : j;
        const double transfer = x->times->transfer ? x->times->transfer[boundary] : 0.0;
        x->arrival[(size_t)grad * x->msgs + (size_t)boundary * x->m + b] = t + transfer;
        break;
    }
    case BRG_ACTION_RECV_ACT:
    case BRG_ACTION_RECV_GRAD: {
        const int grad = a->type == BRG_ACTION_RECV_GRAD, boundary = grad ? j : j - 1;
        const double at = x->arrival[(size_t)grad * x->msgs + (size_t)boundary * x->m + b];
        if (at > t) x->now[d] = at;
        break;
    }
    default: break;
    }
    r->end[d][i] = x->now[d];
    return BRG_OK;
}

brg_status brg_schedule_simulate(const brg_schedule *s, const brg_schedule_times *times, brg_schedule_sim **out)
{
    if (!out) return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_schedule_simulate: NULL out");
    *out = NULL;
    if (!s) return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_schedule_simulate: NULL schedule");
    if (!times) return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_schedule_simulate: NULL times");
    const int p = brg_schedule_devices(s), v = brg_schedule_chunks(s), m = brg_schedule_micro_batches(s);
    const int V = p * v;
    BRG_CHECK(brg_schedule_check_times(times, V, "schedule simulation"));

    sim_run x = {.s = s, .times = times, .p = p, .v = v, .m = m};
    x.msgs = V > 1 ? (size_t)(V - 1) * m : 1;
    x.r = sim_alloc(s);
    x.arrival = calloc(2 * x.msgs, sizeof *x.arrival);
    x.now = calloc((size_t)p, sizeof *x.now);
    x.in_flight = calloc((size_t)p * (v + 1), sizeof *x.in_flight);
    brg_status ret = BRG_OK;
    if (!x.r || !x.arrival || !x.now || !x.in_flight) {
        ret = brg_error(BRG_ERR_HOST_MEMORY, "cannot allocate the schedule simulator's state");
        goto fail;
    }
    brg_schedule_sim *r = x.r;
    for (int d = 0; d < p; d++) step_push(r, d, 0.0, 0);
    /* Sends never block here (unbounded channels). The verifier's walk is
     * the simulation's: a second walk only to verify first took a third of
     * the time of a large simulation. */
    ret = brg_schedule_verify_walk(s, 0, sim_step, &x, NULL, 0);
    if (ret != BRG_OK) goto fail;
    for (int d = 0; d < p; d++)
        for (int i = 0; i < r->action_count[d]; i++)
            if (r->end[d][i] > r->makespan) r->makespan = r->end[d][i];
    double busy = 0;
    for (int d = 0; d < p; d++) {
        busy += r->busy[d];
        r->idle[d] = r->makespan > 0 ? 1.0 - r->busy[d] / r->makespan : 0.0;
    }
    r->bubble = r->makespan > 0 ? 1.0 - busy / (p * r->makespan) : 0.0;
    *out = r;
    x.r = NULL;
exit:
    free(x.arrival);
    free(x.now);
    free(x.in_flight);
    return ret;
fail:
    brg_schedule_sim_destroy(x.r);
    goto exit;
}
