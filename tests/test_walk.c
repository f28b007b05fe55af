/* The schedule walk (schedule/walk.h), the one interpreter the verifier,
 * the simulator and the local driver share:
 *   - on every built schedule each action is stepped exactly once, each
 *     device's in list order, every RECV after its SEND, and never more
 *     than `capacity` messages undelivered on a channel;
 *   - a step's failure stops the walk at once and comes back as it is;
 *   - a schedule whose receives come in another order than its sends
 *     needs two messages of room: with one it is stuck, and the report
 *     names both devices and what each waits for. */
#include <stdio.h>
#include <string.h>

#include "brigade/schedule.h"
#include "schedule/walk.h"
#include "testutil.h"

#define MAX_P 8
#define MAX_ACTIONS 512

typedef struct seen {
    const brg_schedule *s;
    int capacity;
    int calls, stop_at;
    int next[MAX_P];                 /* the index each device must step next */
    int sent[2][MAX_P * 2][16];      /* [grad][stage j][micro-batch]: sent, not yet received */
    int undelivered[MAX_P][MAX_P][2]; /* [from][to][grad] */
    int ok;
} seen;

static brg_status record(void *ctx, int d, int i, const brg_action *a)
{
    seen *x = ctx;
    x->calls++;
    if (x->stop_at && x->calls == x->stop_at) return BRG_ERR_NUMERIC;
    if (i != x->next[d]) x->ok = 0;
    x->next[d] = i + 1;
    const int j = brg_schedule_stage_of(x->s, d, a->chunk), b = a->micro_batch;
    switch (a->type) {
    case BRG_ACTION_SEND_ACT:
        x->sent[0][j][b] = 1;
        if (x->capacity && ++x->undelivered[d][a->peer][0] > x->capacity) x->ok = 0;
        break;
    case BRG_ACTION_SEND_GRAD:
        x->sent[1][j][b] = 1;
        if (x->capacity && ++x->undelivered[d][a->peer][1] > x->capacity) x->ok = 0;
        break;
    case BRG_ACTION_RECV_ACT: /* from stage j - 1 */
        if (!x->sent[0][j - 1][b]) x->ok = 0;
        x->undelivered[a->peer][d][0]--;
        break;
    case BRG_ACTION_RECV_GRAD: /* from stage j + 1 */
        if (!x->sent[1][j + 1][b]) x->ok = 0;
        x->undelivered[a->peer][d][1]--;
        break;
    default: break;
    }
    return BRG_OK;
}

static void test_built_schedules(void)
{
    int cases = 0;
    for (int k = 0; k < BRG_SCHEDULE_KIND_COUNT; k++)
        for (int p = 1; p <= 4; p++)
            for (int m = 1; m <= 8; m++)
                for (int capacity = 0; capacity <= 2; capacity++) {
                    const int v = brg_schedule_kind_chunks((brg_schedule_kind)k, 0);
                    brg_schedule *s = NULL;
                    CHECK_OK(brg_schedule_build((brg_schedule_kind)k, p, m, v, &s));
                    if (!s) continue;
                    seen x;
                    memset(&x, 0, sizeof x);
                    x.s = s;
                    x.capacity = capacity;
                    x.ok = 1;
                    char stuck[256];
                    CHECK_OK(brg_schedule_walk(s, capacity, record, &x, stuck, sizeof stuck));
                    int total = 0;
                    for (int d = 0; d < p; d++) {
                        total += brg_schedule_action_count(s, d);
                        CHECK(x.next[d] == brg_schedule_action_count(s, d));
                    }
                    CHECK_MSG(x.ok && x.calls == total, "%s p=%d m=%d capacity %d: %d calls of %d, order %s",
                              brg_schedule_kind_name((brg_schedule_kind)k), p, m, capacity, x.calls, total,
                              x.ok ? "kept" : "broken");
                    cases++;
                    brg_schedule_destroy(s);
                }
    CHECK(cases == BRG_SCHEDULE_KIND_COUNT * 4 * 8 * 3);
}

static void test_step_failure(void)
{
    brg_schedule *s = NULL;
    CHECK_OK(brg_schedule_build(BRG_SCHEDULE_1F1B, 3, 4, 1, &s));
    if (!s) return;
    seen x;
    memset(&x, 0, sizeof x);
    x.s = s;
    x.ok = 1;
    x.stop_at = 5;
    CHECK_STATUS(brg_schedule_walk(s, 2, record, &x, NULL, 0), BRG_ERR_NUMERIC);
    CHECK(x.calls == 5);
    brg_schedule_destroy(s);
}

#define A(type, mb, peer) {BRG_ACTION_##type, mb, 0, peer}

static void test_capacity_and_report(void)
{
    /* dev1 takes micro-batch 1's activation before micro-batch 0's: dev0
     * must have both in flight. */
    const brg_action dev0[] = {A(FORWARD, 0, -1),  A(SEND_ACT, 0, 1), A(FORWARD, 1, -1),   A(SEND_ACT, 1, 1),
                               A(RECV_GRAD, 1, 1), A(BACKWARD, 1, -1), A(RECV_GRAD, 0, 1), A(BACKWARD, 0, -1)};
    const brg_action dev1[] = {A(RECV_ACT, 1, 0),  A(FORWARD, 1, -1), A(RECV_ACT, 0, 0),  A(FORWARD, 0, -1),
                               A(BACKWARD, 1, -1), A(SEND_GRAD, 1, 0), A(BACKWARD, 0, -1), A(SEND_GRAD, 0, 0)};
    const int counts[2] = {8, 8};
    const brg_action *const lists[2] = {dev0, dev1};
    brg_schedule *s = NULL;
    CHECK_OK(brg_schedule_create(2, 2, 1, counts, lists, &s));
    if (!s) return;
    char stuck[512];
    CHECK_OK(brg_schedule_walk(s, 2, NULL, NULL, stuck, sizeof stuck));
    CHECK(stuck[0] == '\0');
    CHECK_OK(brg_schedule_walk(s, 0, NULL, NULL, stuck, sizeof stuck));
    CHECK_STATUS(brg_schedule_walk(s, 1, NULL, NULL, stuck, sizeof stuck), BRG_ERR_FORMAT);
    printf("capacity 1: %s\n", stuck);
    CHECK_MSG(strstr(stuck, "deadlock with channel capacity 1") &&
                  strstr(stuck, "dev0 action 3 (SA1>1) waits: channel dev0->dev1 (activations) holds 1") &&
                  strstr(stuck, "dev1 action 0 (RA1<0) waits for dev0 to send the activation of micro-batch 1") &&
                  strstr(stuck, "(2 of 2 devices stuck)"),
              "report: %s", stuck);
    /* The verifier is the walk after the completeness checks: same words. */
    char why[512];
    CHECK_STATUS(brg_schedule_verify(s, 1, why, sizeof why), BRG_ERR_FORMAT);
    CHECK_MSG(strcmp(why, stuck) == 0, "verifier: %s", why);
    brg_schedule_destroy(s);
}

int main(void)
{
    test_built_schedules();
    test_step_failure();
    test_capacity_and_report();
    TEST_EXIT();
}
