/* The schedule verifier (brg_schedule_verify): completeness from the
 * positions of the actions, then deadlock freedom by the walk (walk.c). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/internal.h"
#include "schedule/schedule-impl.h"
#include "schedule/walk.h"

/* The verifier's tables: for every action type, virtual stage j and
 * micro-batch b, the index of that action in its device's list (-1: none).
 * The device is implied: the schedule's placement (dev_of). */
typedef struct vtables {
    const brg_schedule *s;
    int V;
    int *pos;  /* [type][j][b] */
    char *msg; /* the failure, BRG_ERROR_MAX bytes */
} vtables;

#define VERIFY_MSG_MAX 1024

static int *pos_at(const vtables *t, brg_action_type type, int j, int b)
{
    return &t->pos[((size_t)type * t->V + (size_t)j) * t->s->m + (size_t)b];
}

static int dev_of(const brg_schedule *s, int j) { return brg_sched_device(s->p, s->vshape, j); }

/* "stage 5 (dev 1, chunk 1)" or, with one chunk, "stage 1". */
static void stage_name(const brg_schedule *s, int j, char *buf, size_t size)
{
    if (s->v > 1) snprintf(buf, size, "stage %d (dev%d chunk %d)", j, dev_of(s, j), j / s->p);
    else snprintf(buf, size, "stage %d", j);
}

/* "dev1 action 7 (SA3>2)" */
static void action_name(const brg_schedule *s, int d, int i, char *buf, size_t size)
{
    char tok[48];
    brg_action_format(&s->actions[d][i], s->v, tok, sizeof tok);
    snprintf(buf, size, "dev%d action %d (%s)", d, i, tok);
}

static brg_status vfail(vtables *t, const char *fmt, ...) BRG_PRINTF(2, 3);
static brg_status vfail(vtables *t, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->msg, VERIFY_MSG_MAX, fmt, ap);
    va_end(ap);
    return BRG_ERR_FORMAT;
}

static const char *const type_words[BRG_ACTION_TYPE_COUNT] = {
    [BRG_ACTION_FORWARD] = "forward",
    [BRG_ACTION_BACKWARD] = "backward",
    [BRG_ACTION_BACKWARD_INPUT] = "input-gradient backward (B)",
    [BRG_ACTION_BACKWARD_WEIGHT] = "weight-gradient backward (W)",
    [BRG_ACTION_SEND_ACT] = "activation send",
    [BRG_ACTION_RECV_ACT] = "activation receive",
    [BRG_ACTION_SEND_GRAD] = "gradient send",
    [BRG_ACTION_RECV_GRAD] = "gradient receive",
};

/* Record every action in the tables; reject messages that have no place
 * (wrong end of the pipeline, a same-device boundary, a wrong peer) and
 * duplicates. */
static brg_status verify_fill(vtables *t)
{
    const brg_schedule *s = t->s;
    int p = s->p, V = t->V;
    char an[96], sn[64];
    for (int d = 0; d < p; d++) {
        for (int i = 0; i < s->count[d]; i++) {
            const brg_action *a = &s->actions[d][i];
            int j = brg_sched_stage(p, s->vshape, d, a->chunk), b = a->micro_batch;
            if (brg_action_is_comm(a->type)) {
                /* the stage at the other end of the message */
                int other = a->type == BRG_ACTION_SEND_ACT || a->type == BRG_ACTION_RECV_GRAD ? j + 1 : j - 1;
                const int misplaced = other < 0 || other >= V || dev_of(s, other) == d || a->peer != dev_of(s, other);
                /* Names only for a failure: formatting them for every message
                 * took most of the verifier's time on long schedules. */
                if (misplaced) {
                    action_name(s, d, i, an, sizeof an);
                    stage_name(s, j, sn, sizeof sn);
                }
                if (other < 0 || other >= V)
                    return vfail(t, "%s: %s is the %s stage; it has no %s stage to exchange with", an, sn,
                                 other < 0 ? "first" : "last", other < 0 ? "previous" : "next");
                if (dev_of(s, other) == d)
                    return vfail(t,
                                 "%s: stages %d and %d are both on dev%d; the tensor is handed over in place, "
                                 "without a message",
                                 an, j < other ? j : other, j < other ? other : j, d);
                if (a->peer != dev_of(s, other))
                    return vfail(t, "%s: the peer of %s for stage %d must be dev%d, not dev%d", an, sn, other,
                                 dev_of(s, other), a->peer);
            }
            int *slot = pos_at(t, a->type, j, b);
            if (*slot >= 0) {
                action_name(s, d, i, an, sizeof an);
                stage_name(s, j, sn, sizeof sn);
                return vfail(t, "%s: a second %s of micro-batch %d on %s (the first is action %d)", an,
                             type_words[a->type], b, sn, *slot);
            }
            *slot = i;
        }
    }
    return BRG_OK;
}

/* Require that `type` exists for (j, b) and report it missing otherwise. */
static brg_status need(vtables *t, brg_action_type type, int j, int b)
{
    if (*pos_at(t, type, j, b) >= 0) return BRG_OK;
    char sn[64];
    stage_name(t->s, j, sn, sizeof sn);
    return vfail(t, "dev%d has no %s of micro-batch %d for %s", dev_of(t->s, j), type_words[type], b, sn);
}

/* Require that action `first` comes before `then` (both on stage j's device,
 * both present) for micro-batch b. `why` completes the message. */
static brg_status before(vtables *t, brg_action_type first, int j1, brg_action_type then, int j2, int b,
                         const char *why)
{
    int a = *pos_at(t, first, j1, b), c = *pos_at(t, then, j2, b);
    if (a < c) return BRG_OK;
    const brg_schedule *s = t->s;
    int d = dev_of(s, j2);
    char an[96], bn[96];
    action_name(s, d, a, an, sizeof an);
    action_name(s, d, c, bn, sizeof bn);
    return vfail(t, "%s comes after %s, but %s", an, bn, why);
}

/* Completeness and the order of dependent actions on one device. */
static brg_status verify_complete(vtables *t)
{
    const brg_schedule *s = t->s;
    int V = t->V;
    for (int j = 0; j < V; j++) {
        int d = dev_of(s, j);
        int cross_prev = j > 0 && dev_of(s, j - 1) != d, cross_next = j < V - 1 && dev_of(s, j + 1) != d;
        for (int b = 0; b < s->m; b++) {
            BRG_CHECK(need(t, BRG_ACTION_FORWARD, j, b));
            int whole = *pos_at(t, BRG_ACTION_BACKWARD, j, b) >= 0;
            int in = *pos_at(t, BRG_ACTION_BACKWARD_INPUT, j, b) >= 0;
            int wt = *pos_at(t, BRG_ACTION_BACKWARD_WEIGHT, j, b) >= 0;
            if ((whole && (in || wt)) || (!whole && !in && !wt)) {
                char sn[64];
                stage_name(s, j, sn, sizeof sn);
                if (whole)
                    return vfail(t, "dev%d runs the backward of micro-batch %d for %s both whole and split", d, b,
                                 sn);
                return vfail(t, "dev%d has no backward of micro-batch %d for %s", d, b, sn);
            }
            if (!whole) {
                BRG_CHECK(need(t, BRG_ACTION_BACKWARD_INPUT, j, b));
                BRG_CHECK(need(t, BRG_ACTION_BACKWARD_WEIGHT, j, b));
            }
            brg_action_type back = whole ? BRG_ACTION_BACKWARD : BRG_ACTION_BACKWARD_INPUT;
            BRG_CHECK(before(t, BRG_ACTION_FORWARD, j, back, j, b, "a backward needs its forward first"));
            if (!whole)
                BRG_CHECK(before(t, BRG_ACTION_BACKWARD_INPUT, j, BRG_ACTION_BACKWARD_WEIGHT, j, b,
                                 "W runs after B of the same micro-batch"));
            if (cross_prev) {
                BRG_CHECK(need(t, BRG_ACTION_RECV_ACT, j, b));
                BRG_CHECK(need(t, BRG_ACTION_SEND_GRAD, j, b));
                BRG_CHECK(before(t, BRG_ACTION_RECV_ACT, j, BRG_ACTION_FORWARD, j, b,
                                 "a forward needs its input activation received first"));
                BRG_CHECK(before(t, back, j, BRG_ACTION_SEND_GRAD, j, b,
                                 "an input gradient can only be sent after the backward computed it"));
            } else if (j > 0) {
                BRG_CHECK(before(t, BRG_ACTION_FORWARD, j - 1, BRG_ACTION_FORWARD, j, b,
                                 "the previous stage on the same device must run its forward first"));
            }
            if (cross_next) {
                BRG_CHECK(need(t, BRG_ACTION_SEND_ACT, j, b));
                BRG_CHECK(need(t, BRG_ACTION_RECV_GRAD, j, b));
                BRG_CHECK(before(t, BRG_ACTION_FORWARD, j, BRG_ACTION_SEND_ACT, j, b,
                                 "an activation can only be sent after the forward computed it"));
                BRG_CHECK(before(t, BRG_ACTION_RECV_GRAD, j, back, j, b,
                                 "a backward needs its output gradient received first"));
            } else if (j < V - 1) {
                brg_action_type next_back =
                    *pos_at(t, BRG_ACTION_BACKWARD, j + 1, b) >= 0 ? BRG_ACTION_BACKWARD : BRG_ACTION_BACKWARD_INPUT;
                if (*pos_at(t, next_back, j + 1, b) >= 0)
                    BRG_CHECK(before(t, next_back, j + 1, back, j, b,
                                     "the next stage on the same device must run its backward first"));
            }
        }
    }
    return BRG_OK;
}

brg_status brg_schedule_verify_walk(const brg_schedule *s, int channel_capacity, brg_schedule_step_fn step,
                                    void *ctx, char *why, size_t why_size)
{
    if (why && why_size) why[0] = '\0';
    if (!s) return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_schedule_verify: NULL schedule");
    if (channel_capacity < 0)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_schedule_verify: channel capacity %d (0 means unbounded)",
                         channel_capacity);
    char msg[VERIFY_MSG_MAX];
    msg[0] = '\0';
    vtables t = {.s = s, .V = s->p * s->v, .pos = NULL, .msg = msg};
    size_t cells = (size_t)BRG_ACTION_TYPE_COUNT * (size_t)t.V * (size_t)s->m;
    t.pos = malloc(cells * sizeof(int));
    if (!t.pos) return brg_error(BRG_ERR_HOST_MEMORY, "cannot allocate the schedule verifier's tables");
    memset(t.pos, 0xff, cells * sizeof(int)); /* all -1 */
    brg_status ret = verify_fill(&t);
    if (ret == BRG_OK) ret = verify_complete(&t);
    free(t.pos);
    /* Complete: now run the lists with bounded channels. */
    if (ret == BRG_OK) ret = brg_schedule_walk(s, channel_capacity, step, ctx, msg, sizeof msg);
    if (ret == BRG_ERR_FORMAT) {
        if (why && why_size) snprintf(why, why_size, "%s", msg);
        return brg_error(ret, "%s schedule (%d devices, %d micro-batches, %d chunk%s per device): %s",
                         brg_schedule_kind_name(s->kind), s->p, s->m, s->v, s->v == 1 ? "" : "s", msg);
    }
    return ret;
}

brg_status brg_schedule_verify(const brg_schedule *s, int channel_capacity, char *why, size_t why_size)
{
    return brg_schedule_verify_walk(s, channel_capacity, NULL, NULL, why, why_size);
}
