/* The one single-threaded interpreter of action lists: see walk.h. */
#include <stdio.h>
#include <stdlib.h>

#include "base/internal.h"
#include "schedule/schedule-impl.h"
#include "schedule/walk.h"

/* The channel a message uses: (sender, direction to the receiver: next
 * device or previous device, activation or gradient). For p = 2 both
 * directions reach the same device and share one channel, as they should. */
static int channel_of(int p, int from, int to, int grad)
{
    const int dir = to == (from + 1) % p ? 0 : 1;
    return (from * 2 + dir) * 2 + grad;
}

typedef struct walk {
    const brg_schedule *s;
    int p, v, m, V, capacity;
    size_t msgs;     /* per direction: (V - 1) boundaries x m micro-batches */
    int *pc;         /* [p] next action of each device */
    int *stack;      /* [p] devices that may move */
    int top;
    char *queued;    /* [p] on the stack */
    int *occupied;   /* [4p] undelivered messages per channel */
    char *sent;      /* [2][V-1][m]: 0 not yet, 1 sent, 2 delivered */
} walk;

static int is_send(brg_action_type t) { return t == BRG_ACTION_SEND_ACT || t == BRG_ACTION_SEND_GRAD; }
static int is_recv(brg_action_type t) { return t == BRG_ACTION_RECV_ACT || t == BRG_ACTION_RECV_GRAD; }
static int is_grad(brg_action_type t) { return t == BRG_ACTION_SEND_GRAD || t == BRG_ACTION_RECV_GRAD; }

/* The message flag of a SEND or RECV of device d, or NULL when it crosses
 * no stage boundary (the schedule is not complete). */
static char *message_of(const walk *w, int d, const brg_action *a)
{
    const int j = a->chunk >= 0 && a->chunk < w->v ? brg_sched_stage(w->p, w->s->vshape, d, a->chunk) : -1;
    const int grad = is_grad(a->type);
    /* Activations cross j -> j+1 when sent by j; gradients j+1 -> j. */
    const int boundary = (a->type == BRG_ACTION_SEND_ACT || a->type == BRG_ACTION_RECV_GRAD) ? j : j - 1;
    if (j < 0 || boundary < 0 || boundary >= w->V - 1 || a->micro_batch < 0 || a->micro_batch >= w->m) return NULL;
    return &w->sent[(size_t)grad * w->msgs + (size_t)boundary * w->m + a->micro_batch];
}

static void wake(walk *w, int d)
{
    if (d >= 0 && d < w->p && !w->queued[d] && w->pc[d] < w->s->count[d]) {
        w->stack[w->top++] = d;
        w->queued[d] = 1;
    }
}

/* Run device d until it finishes or blocks. The schedule's struct is read
 * directly: the exported accessors' calls were a good part of a walk over
 * millions of actions. */
static brg_status run_device(walk *w, int d, brg_schedule_step_fn step, void *ctx)
{
    const int n = w->s->count[d];
    const brg_action *list = w->s->actions[d];
    while (w->pc[d] < n) {
        const int i = w->pc[d];
        const brg_action *a = &list[i];
        char *msg = NULL;
        int channel = -1;
        if (is_send(a->type) || is_recv(a->type)) {
            msg = message_of(w, d, a);
            if (!msg || a->peer < 0 || a->peer >= w->p)
                return brg_error(BRG_ERR_FORMAT, "dev%d action %d sends or receives across no stage boundary", d, i);
            channel = is_send(a->type) ? channel_of(w->p, d, a->peer, is_grad(a->type))
                                       : channel_of(w->p, a->peer, d, is_grad(a->type));
            if (is_send(a->type) && w->capacity > 0 && w->occupied[channel] >= w->capacity) return BRG_OK;
            if (is_recv(a->type) && *msg != 1) return BRG_OK;
        }
        if (step) BRG_CHECK(step(ctx, d, i, a));
        if (msg) {
            *msg = is_send(a->type) ? 1 : 2;
            w->occupied[channel] += is_send(a->type) ? 1 : -1;
            if (a->peer != d) wake(w, a->peer);
        }
        w->pc[d]++;
    }
    return BRG_OK;
}

/* The report of a walk that stopped early: every stuck device, the action
 * it waits at and what for. */
static void stuck_report(const walk *w, char *buf, size_t size)
{
    size_t at = 0;
#define PUT(...)                                                                                   \
    do {                                                                                           \
        if (at < size) at += (size_t)snprintf(buf + at, size - at, __VA_ARGS__);                   \
    } while (0)
    if (w->capacity > 0) PUT("deadlock with channel capacity %d:", w->capacity);
    else PUT("deadlock with unbounded channels:");
    int stuck = 0;
    for (int d = 0; d < w->p; d++) {
        if (w->pc[d] >= brg_schedule_action_count(w->s, d)) continue;
        const brg_action *a = brg_schedule_action(w->s, d, w->pc[d]);
        char token[48];
        brg_action_format(a, w->v, token, sizeof token);
        PUT("%s dev%d action %d (%s) waits", stuck++ ? ";" : "", d, w->pc[d], token);
        const int grad = is_grad(a->type);
        if (is_recv(a->type))
            PUT(" for dev%d to send the %s of micro-batch %d", a->peer, grad ? "gradient" : "activation",
                a->micro_batch);
        else
            PUT(": channel dev%d->dev%d (%s) holds %d undelivered", d, a->peer, grad ? "gradients" : "activations",
                w->occupied[channel_of(w->p, d, a->peer, grad)]);
    }
    PUT(" (%d of %d devices stuck)", stuck, w->p);
#undef PUT
}

brg_status brg_schedule_walk(const brg_schedule *s, int capacity, brg_schedule_step_fn step, void *ctx, char *stuck,
                             size_t stuck_size)
{
    if (stuck && stuck_size) stuck[0] = '\0';
    if (!s) return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_schedule_walk: NULL schedule");
    walk w = {.s = s, .p = brg_schedule_devices(s), .v = brg_schedule_chunks(s), .m = brg_schedule_micro_batches(s),
              .capacity = capacity};
    w.V = w.p * w.v;
    w.msgs = w.V > 1 ? (size_t)(w.V - 1) * (size_t)w.m : 1;
    w.pc = calloc((size_t)w.p, sizeof *w.pc);
    w.stack = malloc((size_t)w.p * sizeof *w.stack);
    w.queued = calloc((size_t)w.p, 1);
    w.occupied = calloc((size_t)w.p * 4, sizeof *w.occupied);
    w.sent = calloc(2 * w.msgs, 1);
    brg_status ret = BRG_OK;
    if (!w.pc || !w.stack || !w.queued || !w.occupied || !w.sent) {
        ret = brg_error(BRG_ERR_HOST_MEMORY, "cannot allocate the schedule walk's state");
        goto exit;
    }
    for (int d = w.p - 1; d >= 0; d--) wake(&w, d);
    while (w.top > 0 && ret == BRG_OK) {
        const int d = w.stack[--w.top];
        w.queued[d] = 0;
        ret = run_device(&w, d, step, ctx);
    }
    if (ret == BRG_OK)
        for (int d = 0; d < w.p; d++)
            if (w.pc[d] < brg_schedule_action_count(s, d)) {
                if (stuck && stuck_size) stuck_report(&w, stuck, stuck_size);
                ret = BRG_ERR_FORMAT;
                break;
            }
exit:
    free(w.pc);
    free(w.stack);
    free(w.queued);
    free(w.occupied);
    free(w.sent);
    return ret;
}
