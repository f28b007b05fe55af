/* The schedule simulator: an event-driven run of the action lists with
 * given durations. It uses only the public schedule API. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "brigade/schedule.h"
#include "core/internal.h"

void brg_schedule_sim_destroy(brg_schedule_sim *sim) { free(sim); }

static brg_status check_times(const double *x, int n, const char *what)
{
    if (!x && n > 0) return brg_error(BRG_ERR_INVALID_ARGUMENT, "schedule simulation: no %s times", what);
    for (int i = 0; i < n; i++)
        if (!isfinite(x[i]) || x[i] < 0)
            return brg_error(BRG_ERR_INVALID_ARGUMENT,
                             "schedule simulation: %s time of %s %d is %g (must be finite and >= 0)", what,
                             strcmp(what, "transfer") == 0 ? "boundary" : "stage", i, x[i]);
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

brg_status brg_schedule_simulate(const brg_schedule *s, const brg_schedule_times *times, brg_schedule_sim **out)
{
    if (!out) return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_schedule_simulate: NULL out");
    *out = NULL;
    if (!s) return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_schedule_simulate: NULL schedule");
    if (!times) return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_schedule_simulate: NULL times");
    int p = brg_schedule_devices(s), v = brg_schedule_chunks(s), m = brg_schedule_micro_batches(s);
    int V = p * v;
    BRG_CHECK(check_times(times->forward, V, "forward"));
    BRG_CHECK(check_times(times->backward_input, V, "backward_input"));
    BRG_CHECK(check_times(times->backward_weight, V, "backward_weight"));
    if (times->transfer) BRG_CHECK(check_times(times->transfer, V - 1, "transfer"));
    BRG_CHECK(brg_schedule_verify(s, 0, NULL, 0));

    brg_schedule_sim *r = sim_alloc(s);
    if (!r) return BRG_ERR_HOST_MEMORY;

    /* arrival[grad][boundary][b]: when the message across boundary (j, j+1)
     * for micro-batch b is there; -1 until it is sent */
    size_t msgs = V > 1 ? (size_t)(V - 1) * m : 1;
    brg_status ret = BRG_OK;
    double *arrival = malloc(2 * msgs * sizeof(double));
    double *now = calloc((size_t)p, sizeof(double));
    int *pc = calloc((size_t)p, sizeof(int));
    int *stack = malloc((size_t)p * sizeof(int));
    char *queued = calloc((size_t)p, 1);
    int *in_flight = calloc((size_t)p * (v + 1), sizeof(int)); /* [d][v]: all chunks */
    if (!arrival || !now || !pc || !stack || !queued || !in_flight) {
        ret = brg_error(BRG_ERR_HOST_MEMORY, "cannot allocate the schedule simulator's state");
        goto fail;
    }
    for (size_t i = 0; i < 2 * msgs; i++) arrival[i] = -1.0;
    for (int d = 0; d < p; d++) step_push(r, d, 0.0, 0);

    /* Devices run until they finish or wait for a message that has not been
     * sent yet; the send wakes the receiver. Sends never block here, so with
     * a schedule that verifies with unbounded channels every device finishes. */
    int top = 0;
    for (int d = p - 1; d >= 0; d--) {
        stack[top++] = d;
        queued[d] = 1;
    }
    while (top > 0) {
        int d = stack[--top];
        queued[d] = 0;
        int n = r->action_count[d];
        while (pc[d] < n) {
            int i = pc[d];
            const brg_action *a = brg_schedule_action(s, d, i);
            int j = a->chunk * p + d, b = a->micro_batch, wake = -1;
            int *flight = &in_flight[(size_t)d * (v + 1)];
            double t = now[d];
            r->start[d][i] = t;
            switch (a->type) {
            case BRG_ACTION_FORWARD:
            case BRG_ACTION_BACKWARD:
            case BRG_ACTION_BACKWARD_INPUT:
            case BRG_ACTION_BACKWARD_WEIGHT: {
                double dur = a->type == BRG_ACTION_FORWARD          ? times->forward[j]
                             : a->type == BRG_ACTION_BACKWARD_INPUT ? times->backward_input[j]
                             : a->type == BRG_ACTION_BACKWARD_WEIGHT
                                 ? times->backward_weight[j]
                                 : times->backward_input[j] + times->backward_weight[j];
                now[d] = t + dur;
                r->busy[d] += dur;
                if (a->type == BRG_ACTION_FORWARD) {
                    flight[a->chunk]++;
                    flight[v]++;
                    if (flight[a->chunk] > r->max_in_flight_chunk[d * v + a->chunk])
                        r->max_in_flight_chunk[d * v + a->chunk] = flight[a->chunk];
                    if (flight[v] > r->max_in_flight[d]) r->max_in_flight[d] = flight[v];
                    step_push(r, d, t, flight[v]);
                } else if (a->type != BRG_ACTION_BACKWARD_INPUT) {
                    flight[a->chunk]--;
                    flight[v]--;
                    step_push(r, d, now[d], flight[v]);
                }
                break;
            }
            case BRG_ACTION_SEND_ACT:
            case BRG_ACTION_SEND_GRAD: {
                int grad = a->type == BRG_ACTION_SEND_GRAD, boundary = grad ? j - 1 : j;
                double transfer = times->transfer ? times->transfer[boundary] : 0.0;
                arrival[(size_t)grad * msgs + (size_t)boundary * m + b] = t + transfer;
                wake = a->peer;
                break;
            }
            case BRG_ACTION_RECV_ACT:
            case BRG_ACTION_RECV_GRAD: {
                int grad = a->type == BRG_ACTION_RECV_GRAD, boundary = grad ? j : j - 1;
                double at = arrival[(size_t)grad * msgs + (size_t)boundary * m + b];
                if (at < 0) goto blocked;
                if (at > t) now[d] = at;
                break;
            }
            default: break;
            }
            r->end[d][i] = now[d];
            pc[d]++;
            if (wake >= 0 && wake != d && !queued[wake] && pc[wake] < r->action_count[wake]) {
                stack[top++] = wake;
                queued[wake] = 1;
            }
        }
    blocked:;
    }
    for (int d = 0; d < p; d++) {
        if (pc[d] < r->action_count[d]) {
            ret = brg_error(BRG_ERR_INTERNAL, "schedule simulation: dev%d stopped at action %d of a verified schedule",
                            d, pc[d]);
            goto fail;
        }
        for (int i = 0; i < r->action_count[d]; i++)
            if (r->end[d][i] > r->makespan) r->makespan = r->end[d][i];
    }
    double busy = 0;
    for (int d = 0; d < p; d++) {
        busy += r->busy[d];
        r->idle[d] = r->makespan > 0 ? 1.0 - r->busy[d] / r->makespan : 0.0;
    }
    r->bubble = r->makespan > 0 ? 1.0 - busy / (p * r->makespan) : 0.0;
    *out = r;
    r = NULL;
exit:
    free(arrival);
    free(now);
    free(pc);
    free(stack);
    free(queued);
    free(in_flight);
    return ret;
fail:
    brg_schedule_sim_destroy(r);
    goto exit;
}
