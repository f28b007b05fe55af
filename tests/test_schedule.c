/* Pipeline schedules: construction, verifier, in-flight counts, simulator.
 * The formulas checked here are derived in docs/schedules.md. */
#include <stdint.h>
#include "testutil.h"

#define MAXV 64 /* virtual stages used by these tests */

static int imax(int a, int b) { return a > b ? a : b; }
static int imin(int a, int b) { return a < b ? a : b; }

/* Unit times: F = B = W = 1 on every virtual stage (an unsplit backward
 * then takes 2), transfers 0. */
static double ones[MAXV];
static brg_schedule_times unit_times(void)
{
    for (int i = 0; i < MAXV; i++) ones[i] = 1.0;
    brg_schedule_times t = {.forward = ones, .backward_input = ones, .backward_weight = ones, .transfer = NULL};
    return t;
}

/* A custom schedule from a built one with device d's list edited: the
 * caller gets a copy of every list in lists[] (room for one extra action
 * each) to change, then calls make_custom. */
typedef struct editable {
    int p, m, v;
    int count[MAXV];
    brg_action *lists[MAXV];
} editable;

static void edit_begin(editable *e, const brg_schedule *s)
{
    e->p = brg_schedule_devices(s);
    e->m = brg_schedule_micro_batches(s);
    e->v = brg_schedule_chunks(s);
    for (int d = 0; d < e->p; d++) {
        e->count[d] = brg_schedule_action_count(s, d);
        e->lists[d] = malloc(sizeof(brg_action) * (size_t)(e->count[d] + 1));
        for (int i = 0; i < e->count[d]; i++) e->lists[d][i] = *brg_schedule_action(s, d, i);
    }
}

static void edit_swap(editable *e, int d, int i, int k)
{
    brg_action t = e->lists[d][i];
    e->lists[d][i] = e->lists[d][k];
    e->lists[d][k] = t;
}

static void edit_remove(editable *e, int d, int i)
{
    memmove(&e->lists[d][i], &e->lists[d][i + 1], sizeof(brg_action) * (size_t)(e->count[d] - i - 1));
    e->count[d]--;
}

/* Index of the first action of device d with this type and micro-batch. */
static int edit_find(const editable *e, int d, brg_action_type type, int mb)
{
    for (int i = 0; i < e->count[d]; i++)
        if (e->lists[d][i].type == type && e->lists[d][i].micro_batch == mb) return i;
    return -1;
}

static brg_schedule *edit_end(editable *e)
{
    brg_schedule *s = NULL;
    CHECK_OK(brg_schedule_create(e->p, e->m, e->v, e->count, (const brg_action *const *)e->lists, &s));
    for (int d = 0; d < e->p; d++) free(e->lists[d]);
    return s;
}

/* s fails verification with channel capacity cap, with a reason that
 * contains text; destroys s. Messages name the text, as the line of a
 * failed check is this function's. */
static void check_refused(brg_schedule *s, int cap, const char *text)
{
    char why[1024] = "";
    brg_status st = brg_schedule_verify(s, cap, why, sizeof why);
    CHECK_MSG(st == BRG_ERR_FORMAT, "verify returned %s, expected %s with \"%s\"", brg_status_string(st),
              brg_status_string(BRG_ERR_FORMAT), text);
    CHECK_MSG(strstr(why, text) != NULL, "\"%s\" lacks \"%s\"", why, text);
    brg_schedule_destroy(s);
}

/* Every message travels in order: for each ordered device pair and
 * direction, the receiver takes the messages in the order they were sent
 * (so an executor may use plain FIFO channels, NCCL-style). */
static int channels_in_order(const brg_schedule *s)
{
    int p = brg_schedule_devices(s);
    for (int src = 0; src < p; src++) {
        for (int dst = 0; dst < p; dst++) {
            for (int grad = 0; grad < 2; grad++) {
                brg_action_type st = grad ? BRG_ACTION_SEND_GRAD : BRG_ACTION_SEND_ACT;
                brg_action_type rt = grad ? BRG_ACTION_RECV_GRAD : BRG_ACTION_RECV_ACT;
                int i = 0, k = 0, ns = brg_schedule_action_count(s, src), nr = brg_schedule_action_count(s, dst);
                for (;;) {
                    while (i < ns && !(brg_schedule_action(s, src, i)->type == st &&
                                       brg_schedule_action(s, src, i)->peer == dst))
                        i++;
                    while (k < nr && !(brg_schedule_action(s, dst, k)->type == rt &&
                                       brg_schedule_action(s, dst, k)->peer == src))
                        k++;
                    if (i == ns || k == nr) {
                        if (i != ns || k != nr) return 0;
                        break;
                    }
                    const brg_action *a = brg_schedule_action(s, src, i), *b = brg_schedule_action(s, dst, k);
                    /* boundary of the message: sender's stage for activations,
                     * receiver's stage for gradients */
                    int ja = brg_schedule_stage_of(s, src, a->chunk), jb = brg_schedule_stage_of(s, dst, b->chunk);
                    int boundary_a = grad ? ja - 1 : ja, boundary_b = grad ? jb : jb - 1;
                    if (a->micro_batch != b->micro_batch || boundary_a != boundary_b) return 0;
                    i++;
                    k++;
                }
            }
        }
    }
    return 1;
}

/* Count of actions of a type on device d, chunk c. */
static int count_type(const brg_schedule *s, int d, int c, brg_action_type type)
{
    int n = 0;
    for (int i = 0; i < brg_schedule_action_count(s, d); i++) {
        const brg_action *a = brg_schedule_action(s, d, i);
        n += a->type == type && a->chunk == c;
    }
    return n;
}

/* Largest number of micro-batches between their F and their B (or whole
 * backward) on device d: the full-stash count, as opposed to the F..W count
 * that brg_schedule_max_in_flight gives. */
static int max_before_input_grad(const brg_schedule *s, int d)
{
    int n = 0, peak = 0;
    for (int i = 0; i < brg_schedule_action_count(s, d); i++) {
        brg_action_type t = brg_schedule_action(s, d, i)->type;
        if (t == BRG_ACTION_FORWARD) peak = imax(peak, ++n);
        if (t == BRG_ACTION_BACKWARD || t == BRG_ACTION_BACKWARD_INPUT) n--;
    }
    return peak;
}

static void check_sim_consistent(const brg_schedule *s, const brg_schedule_sim *r, const char *tag)
{
    int p = brg_schedule_devices(s), v = brg_schedule_chunks(s);
    CHECK(r->devices == p && r->chunks == v);
    double latest = 0;
    for (int d = 0; d < p; d++) {
        CHECK(r->action_count[d] == brg_schedule_action_count(s, d));
        CHECK_MSG(r->max_in_flight[d] == brg_schedule_max_in_flight(s, d, -1), "%s dev%d: sim %d, order %d", tag, d,
                  r->max_in_flight[d], brg_schedule_max_in_flight(s, d, -1));
        for (int c = 0; c < v; c++)
            CHECK_MSG(r->max_in_flight_chunk[d * v + c] == brg_schedule_max_in_flight(s, d, c), "%s dev%d chunk %d",
                      tag, d, c);
        double prev_end = 0;
        int ordered = 1;
        for (int i = 0; i < r->action_count[d]; i++) {
            ordered &= r->start[d][i] >= prev_end && r->end[d][i] >= r->start[d][i];
            prev_end = r->end[d][i];
            if (r->end[d][i] > latest) latest = r->end[d][i];
        }
        CHECK_MSG(ordered, "%s dev%d: actions overlap or run backwards in time", tag, d);
        /* the step function starts at 0, moves forward in time, ends empty,
         * and peaks at the in-flight maximum */
        int peak = 0, increasing = 1;
        for (int k = 0; k < r->steps[d]; k++) {
            peak = imax(peak, r->step_count[d][k]);
            if (k > 0) increasing &= r->step_time[d][k] > r->step_time[d][k - 1];
        }
        CHECK(r->steps[d] >= 1 && r->step_time[d][0] == 0.0);
        CHECK_MSG(increasing, "%s dev%d: step times not increasing", tag, d);
        CHECK_MSG(r->step_count[d][r->steps[d] - 1] == 0, "%s dev%d: micro-batches left in flight", tag, d);
        CHECK_MSG(peak == r->max_in_flight[d], "%s dev%d: step peak %d vs %d", tag, d, peak, r->max_in_flight[d]);
    }
    CHECK(latest == r->makespan);
}

/* Every kind, p = 1..8, m = 1..32: build, structure, verify with capacity
 * 1 and unbounded, the unit-time makespan and bubble formulas, and the
 * in-flight counts. */
static void test_all_shapes(void)
{
    brg_schedule_times unit = unit_times();
    char why[1024];
    for (int kind = 0; kind < BRG_SCHEDULE_KIND_COUNT; kind++) {
        const int v_lo = brg_schedule_kind_chunks((brg_schedule_kind)kind, 0),
                  v_hi = kind == BRG_SCHEDULE_INTERLEAVED ? 3 : v_lo;
        for (int v = v_lo; v <= v_hi; v++) {
            for (int p = 1; p <= 8; p++) {
                for (int m = 1; m <= 32; m++) {
                    char tag[64];
                    snprintf(tag, sizeof tag, "%s p=%d m=%d v=%d", brg_schedule_kind_name((brg_schedule_kind)kind), p,
                             m, v);
                    brg_schedule *s = NULL;
                    brg_status st = brg_schedule_build((brg_schedule_kind)kind, p, m, v, &s);
                    CHECK_MSG(st == BRG_OK, "%s: %s", tag, brg_last_error());
                    if (st != BRG_OK) continue;
                    CHECK(brg_schedule_get_kind(s) == (brg_schedule_kind)kind);
                    CHECK(brg_schedule_devices(s) == p && brg_schedule_micro_batches(s) == m &&
                          brg_schedule_chunks(s) == v);
                    st = brg_schedule_verify(s, 1, why, sizeof why);
                    CHECK_MSG(st == BRG_OK, "%s capacity 1: %s", tag, why);
                    st = brg_schedule_verify(s, 0, why, sizeof why);
                    CHECK_MSG(st == BRG_OK, "%s unbounded: %s", tag, why);
                    CHECK_MSG(channels_in_order(s), "%s: a channel delivers out of order", tag);
                    long long actions = 0;
                    for (int d = 0; d < p; d++) actions += brg_schedule_action_count(s, d);
                    CHECK_MSG(brg_schedule_kind_actions((brg_schedule_kind)kind, p, m, v) == actions,
                              "%s: brg_schedule_kind_actions says %lld, the schedule has %lld", tag,
                              brg_schedule_kind_actions((brg_schedule_kind)kind, p, m, v), actions);

                    /* per device and chunk: m forwards and m backwards */
                    const int vshape = brg_schedule_kind_is_v((brg_schedule_kind)kind);
                    int split = kind == BRG_SCHEDULE_ZB_H1 || kind == BRG_SCHEDULE_ZB_H2 || vshape;
                    for (int d = 0; d < p; d++)
                        for (int c = 0; c < v; c++) {
                            CHECK(count_type(s, d, c, BRG_ACTION_FORWARD) == m);
                            CHECK(count_type(s, d, c, BRG_ACTION_BACKWARD) == (split ? 0 : m));
                            CHECK(count_type(s, d, c, BRG_ACTION_BACKWARD_INPUT) == (split ? m : 0));
                            CHECK(count_type(s, d, c, BRG_ACTION_BACKWARD_WEIGHT) == (split ? m : 0));
                        }

                    /* in flight, from the order */
                    for (int d = 0; d < p; d++) {
                        int got = brg_schedule_max_in_flight(s, d, -1), want = -1;
                        switch (kind) {
                        case BRG_SCHEDULE_GPIPE: want = m; break;
                        case BRG_SCHEDULE_1F1B: want = imin(m, p - d); break;
                        case BRG_SCHEDULE_ZB_H1:
                            want = imin(m, p);
                            CHECK_MSG(max_before_input_grad(s, d) == imin(m, p - d), "%s dev%d: F..B count %d", tag,
                                      d, max_before_input_grad(s, d));
                            break;
                        case BRG_SCHEDULE_INTERLEAVED: {
                            int bound = imin(v * m, 2 * (p - d - 1) + (v - 1) * p + 1);
                            if (m % p == 0) want = bound;
                            else CHECK_MSG(got <= bound, "%s dev%d: %d in flight > %d", tag, d, got, bound);
                            break;
                        }
                        case BRG_SCHEDULE_ZB_H2:
                            CHECK_MSG(got <= imin(m, 2 * p - 1), "%s dev%d: %d in flight", tag, d, got);
                            break;
                        default: {
                            /* the paper's activation memory, in chunk micro-batches (two per 1F1B one) */
                            const int cap = kind == BRG_SCHEDULE_ZB_V     ? 2 * p
                                            : kind == BRG_SCHEDULE_V_HALF ? 2 * ((p + 2) / 2)
                                                                           : 2 * ((p + 4) / 3);
                            CHECK_MSG(got <= imin(cap, 2 * m), "%s dev%d: %d in flight > %d", tag, d, got, cap);
                            break;
                        }
                        }
                        if (want >= 0) CHECK_MSG(got == want, "%s dev%d: %d in flight, expected %d", tag, d, got, want);
                    }

                    /* unit-time simulation */
                    brg_schedule_sim *r = NULL;
                    st = brg_schedule_simulate(s, &unit, &r);
                    CHECK_MSG(st == BRG_OK, "%s: simulate: %s", tag, brg_last_error());
                    if (st == BRG_OK) {
                        check_sim_consistent(s, r, tag);
                        for (int d = 0; d < p; d++) CHECK(r->busy[d] == 3.0 * m * v);
                        double mk = r->makespan, want_mk = 0, want_bubble = -1;
                        switch (kind) {
                        case BRG_SCHEDULE_GPIPE:
                        case BRG_SCHEDULE_1F1B:
                            want_mk = 3.0 * (m + p - 1);
                            want_bubble = (double)(p - 1) / (m + p - 1);
                            break;
                        case BRG_SCHEDULE_ZB_H1:
                        case BRG_SCHEDULE_ZB_H2: /* at unit costs the least there is, as ZB-H1 */
                            want_mk = 2.0 * m + p - 1 + imax(m, p);
                            want_bubble = m >= p ? (double)(p - 1) / (3 * m + p - 1) : 1.0 - 3.0 * m / want_mk;
                            break;
                        case BRG_SCHEDULE_ZB_V:
                        case BRG_SCHEDULE_V_HALF:
                        case BRG_SCHEDULE_V_MIN:
                            /* compared with the other kinds in test_vshape */
                            CHECK_MSG(mk >= 6.0 * m, "%s: makespan %g below the work", tag, mk);
                            want_mk = mk;
                            break;
                        case BRG_SCHEDULE_INTERLEAVED:
                            if (m % p == 0) {
                                want_mk = 3.0 * (v * m + p - 1);
                                want_bubble = (double)(p - 1) / (v * m + p - 1);
                            } else {
                                int mp = (m + p - 1) / p * p;
                                CHECK_MSG(mk >= 3.0 * (v * m + p - 1) && mk <= 3.0 * (v * mp + p - 1),
                                          "%s: makespan %g outside [%d, %d]", tag, mk, 3 * (v * m + p - 1),
                                          3 * (v * mp + p - 1));
                                want_mk = mk;
                            }
                            break;
                        }
                        CHECK_MSG(mk == want_mk, "%s: makespan %g, expected %g", tag, mk, want_mk);
                        if (want_bubble >= 0) {
                            CHECK_NEAR(r->bubble, want_bubble, 1e-12);
                            for (int d = 0; d < p; d++) CHECK_NEAR(r->idle[d], want_bubble, 1e-12);
                        }
                        brg_schedule_sim_destroy(r);
                    }
                    brg_schedule_destroy(s);
                }
            }
        }
    }
}

/* The per-chunk in-flight table of docs/schedules.md (interleaved, p = 4,
 * m = 8, v = 2). */
static void test_interleaved_table(void)
{
    brg_schedule *s = NULL;
    CHECK_OK(brg_schedule_build(BRG_SCHEDULE_INTERLEAVED, 4, 8, 2, &s));
    const int want[4][3] = {{8, 4, 11}, {8, 4, 9}, {7, 3, 7}, {5, 1, 5}}; /* chunk 0, chunk 1, all */
    for (int d = 0; d < 4; d++) {
        CHECK(brg_schedule_max_in_flight(s, d, 0) == want[d][0]);
        CHECK(brg_schedule_max_in_flight(s, d, 1) == want[d][1]);
        CHECK(brg_schedule_max_in_flight(s, d, -1) == want[d][2]);
    }
    brg_schedule_destroy(s);
}

/* The last backward action of each device and chunk: no backward of the
 * chunk after it, and it is one (a W where the backward is split). */
static void test_last_backward(void)
{
    const brg_schedule_kind kinds[3] = {BRG_SCHEDULE_1F1B, BRG_SCHEDULE_ZB_H1, BRG_SCHEDULE_INTERLEAVED};
    for (int k = 0; k < 3; k++) {
        brg_schedule *s = NULL;
        const int v = brg_schedule_kind_chunks(kinds[k], 0);
        CHECK_OK(brg_schedule_build(kinds[k], 4, 8, v, &s));
        for (int d = 0; s && d < 4; d++)
            for (int c = 0; c < v; c++) {
                const int i = brg_schedule_last_backward(s, d, c);
                const brg_action *a = brg_schedule_action(s, d, i);
                CHECK_MSG(a && a->chunk == c &&
                              a->type == (kinds[k] == BRG_SCHEDULE_ZB_H1 ? BRG_ACTION_BACKWARD_WEIGHT
                                                                         : BRG_ACTION_BACKWARD),
                          "%s device %d chunk %d: last backward at %d", brg_schedule_kind_name(kinds[k]), d, c, i);
                for (int j = i + 1; a && j < brg_schedule_action_count(s, d); j++) {
                    const brg_action *b = brg_schedule_action(s, d, j);
                    CHECK(!(b->chunk == c && b->type >= BRG_ACTION_BACKWARD && b->type <= BRG_ACTION_BACKWARD_WEIGHT));
                }
            }
        CHECK(brg_schedule_last_backward(s, 4, 0) == -1 && brg_schedule_last_backward(s, 0, v) == -1);
        brg_schedule_destroy(s);
    }
}

static void test_names_and_arguments(void)
{
    const char *names[] = {"gpipe", "1f1b", "interleaved", "zb-h1", "zb-v", "v-half", "v-min", "zb-h2"};
    for (int k = 0; k < BRG_SCHEDULE_KIND_COUNT; k++) {
        CHECK(strcmp(brg_schedule_kind_name((brg_schedule_kind)k), names[k]) == 0);
        brg_schedule_kind got = BRG_SCHEDULE_CUSTOM;
        CHECK_OK(brg_schedule_kind_parse(names[k], &got));
        CHECK(got == (brg_schedule_kind)k);
    }
    brg_schedule_kind got;
    CHECK_OK(brg_schedule_kind_parse("ZB-H1", &got));
    CHECK(got == BRG_SCHEDULE_ZB_H1);
    CHECK(strcmp(brg_schedule_kind_name(BRG_SCHEDULE_CUSTOM), "custom") == 0);
    /* what the count refuses (what it counts: test_all_shapes) */
    CHECK(brg_schedule_kind_actions(BRG_SCHEDULE_CUSTOM, 4, 8, 1) == 0);
    CHECK(brg_schedule_kind_actions(BRG_SCHEDULE_1F1B, 0, 8, 1) == 0);
    CHECK(brg_schedule_kind_actions(BRG_SCHEDULE_1F1B, 4, 0, 1) == 0);
    CHECK(brg_schedule_kind_actions(BRG_SCHEDULE_1F1B, 1024, 1024, 1) == 1024LL * (2 * 1024 + 4 * 1023));
    /* past the limits no schedule is built for: 0 (the count overflowed 64 bits) */
    CHECK(brg_schedule_kind_actions(BRG_SCHEDULE_INTERLEAVED, INT32_MAX, INT32_MAX, INT32_MAX) == 0);
    CHECK(brg_schedule_kind_actions(BRG_SCHEDULE_1F1B, 1024, 1025, 1) == 0);
    CHECK(strcmp(brg_schedule_kind_name((brg_schedule_kind)42), "unknown") == 0);
    CHECK_STATUS(brg_schedule_kind_parse("pipedream", &got), BRG_ERR_INVALID_ARGUMENT);
    CHECK_ERROR_HAS("pipedream");
    CHECK_ERROR_HAS("gpipe, 1f1b, interleaved, zb-h1, zb-h2, zb-v, v-half or v-min");
    CHECK_STATUS(brg_schedule_kind_parse("custom", &got), BRG_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(brg_schedule_kind_parse(NULL, &got), BRG_ERR_INVALID_ARGUMENT);

    brg_schedule *s = (brg_schedule *)&got; /* must be reset to NULL on failure */
    CHECK_STATUS(brg_schedule_build(BRG_SCHEDULE_1F1B, 0, 4, 1, &s), BRG_ERR_INVALID_ARGUMENT);
    CHECK(s == NULL);
    CHECK_ERROR_HAS("devices must be at least 1, not 0");
    CHECK_STATUS(brg_schedule_build(BRG_SCHEDULE_1F1B, 4, 0, 1, &s), BRG_ERR_INVALID_ARGUMENT);
    CHECK_ERROR_HAS("micro-batches must be at least 1, not 0");
    CHECK_STATUS(brg_schedule_build(BRG_SCHEDULE_INTERLEAVED, 4, 4, 0, &s), BRG_ERR_INVALID_ARGUMENT);
    CHECK_ERROR_HAS("chunks must be at least 1");
    CHECK_STATUS(brg_schedule_build(BRG_SCHEDULE_GPIPE, 4, 4, 2, &s), BRG_ERR_INVALID_ARGUMENT);
    CHECK_ERROR_HAS("gpipe schedule: takes 1 chunk per device, not 2");
    CHECK_STATUS(brg_schedule_build(BRG_SCHEDULE_INTERLEAVED, 4, 4, 1, &s), BRG_ERR_INVALID_ARGUMENT);
    CHECK_ERROR_HAS("at least 2 chunks");
    CHECK_STATUS(brg_schedule_build(BRG_SCHEDULE_INTERLEAVED, 600, 4, 2, &s), BRG_ERR_INVALID_ARGUMENT);
    CHECK_ERROR_HAS("1200 virtual stages");
    CHECK_STATUS(brg_schedule_build(BRG_SCHEDULE_1F1B, 8, 200000, 1, &s), BRG_ERR_INVALID_ARGUMENT);
    CHECK_ERROR_HAS("200000 micro-batches");
    CHECK_STATUS(brg_schedule_build(BRG_SCHEDULE_CUSTOM, 2, 2, 1, &s), BRG_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(brg_schedule_build((brg_schedule_kind)-3, 2, 2, 1, &s), BRG_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(brg_schedule_build(BRG_SCHEDULE_1F1B, 2, 2, 1, NULL), BRG_ERR_INVALID_ARGUMENT);

    /* accessors out of range */
    CHECK_OK(brg_schedule_build(BRG_SCHEDULE_1F1B, 2, 2, 1, &s));
    CHECK(brg_schedule_action(s, 2, 0) == NULL);
    CHECK(brg_schedule_action(s, 0, -1) == NULL);
    CHECK(brg_schedule_action(s, 0, brg_schedule_action_count(s, 0)) == NULL);
    CHECK(brg_schedule_action_count(s, -1) == 0);
    CHECK(brg_schedule_max_in_flight(s, 0, 1) == -1);
    CHECK(brg_schedule_max_in_flight(s, 5, 0) == -1);
    CHECK(brg_schedule_max_in_flight(NULL, 0, 0) == -1);
    CHECK_STATUS(brg_schedule_verify(s, -1, NULL, 0), BRG_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(brg_schedule_verify(NULL, 1, NULL, 0), BRG_ERR_INVALID_ARGUMENT);
    brg_schedule_destroy(s);
    brg_schedule_destroy(NULL);
    brg_schedule_sim_destroy(NULL);
}

static void test_format(void)
{
    brg_schedule *s = NULL;
    CHECK_OK(brg_schedule_build(BRG_SCHEDULE_GPIPE, 2, 2, 1, &s));
    char buf[256];
    size_t n = brg_schedule_format(s, 0, buf, sizeof buf);
    CHECK_MSG(strcmp(buf, "dev0: F0 F1 B0 B1\ndev1: F0 F1 B0 B1\n") == 0, "got \"%s\"", buf);
    CHECK(n == strlen(buf));
    n = brg_schedule_format(s, BRG_SCHEDULE_FORMAT_COMM, buf, sizeof buf);
    const char *comm = "dev0: F0 SA0>1 F1 SA1>1 RG0<1 B0 RG1<1 B1\ndev1: RA0<0 F0 RA1<0 F1 B0 SG0>0 B1 SG1>0\n";
    CHECK_MSG(strcmp(buf, comm) == 0, "got \"%s\"", buf);
    /* snprintf rules: the full length back, a terminated prefix written */
    char small[5];
    CHECK(brg_schedule_format(s, BRG_SCHEDULE_FORMAT_COMM, small, sizeof small) == strlen(comm));
    CHECK(strcmp(small, "dev0") == 0);
    CHECK(brg_schedule_format(s, 0, NULL, 0) == strlen("dev0: F0 F1 B0 B1\ndev1: F0 F1 B0 B1\n"));
    brg_schedule_destroy(s);

    CHECK_OK(brg_schedule_build(BRG_SCHEDULE_ZB_H1, 2, 2, 1, &s));
    brg_schedule_format(s, 0, buf, sizeof buf);
    CHECK_MSG(strcmp(buf, "dev0: F0 F1 I0 W0 I1 W1\ndev1: F0 I0 F1 I1 W0 W1\n") == 0, "got \"%s\"", buf);
    brg_schedule_destroy(s);

    CHECK_OK(brg_schedule_build(BRG_SCHEDULE_INTERLEAVED, 2, 2, 2, &s));
    brg_schedule_format(s, 0, buf, sizeof buf);
    CHECK_MSG(strcmp(buf, "dev0: F0.0 F1.0 F0.1 F1.1 B0.1 B1.1 B0.0 B1.0\n"
                          "dev1: F0.0 F1.0 F0.1 B0.1 F1.1 B1.1 B0.0 B1.0\n") == 0,
              "got \"%s\"", buf);
    brg_action a = {.type = BRG_ACTION_RECV_GRAD, .micro_batch = 3, .chunk = 1, .peer = 0};
    CHECK(brg_action_format(&a, 2, buf, sizeof buf) == 7 && strcmp(buf, "RG3.1<0") == 0);
    CHECK(brg_action_format(&a, 1, buf, sizeof buf) == 5 && strcmp(buf, "RG3<0") == 0);
    brg_schedule_destroy(s);

    /* labels line up for ten devices */
    CHECK_OK(brg_schedule_build(BRG_SCHEDULE_GPIPE, 11, 1, 1, &s));
    brg_schedule_format(s, 0, buf, sizeof buf);
    CHECK_MSG(strncmp(buf, "dev0:  F0 B0\n", 13) == 0, "got \"%s\"", buf);
    CHECK(strstr(buf, "\ndev10: F0 B0\n") != NULL);
    brg_schedule_destroy(s);
}

/* Broken schedules: each must fail with a message that says what is wrong. */
static void test_broken(void)
{
    char why[1024];
    brg_schedule *s = NULL, *b = NULL;
    editable e;

    /* A swap of two adjacent actions that deadlocks: dev0 waits for the
     * gradient of micro-batch 0 before sending micro-batch 1's activation,
     * which dev1 needs before it computes any backward. */
    CHECK_OK(brg_schedule_build(BRG_SCHEDULE_GPIPE, 2, 2, 1, &s));
    edit_begin(&e, s);
    edit_swap(&e, 0, edit_find(&e, 0, BRG_ACTION_SEND_ACT, 1), edit_find(&e, 0, BRG_ACTION_RECV_GRAD, 0));
    b = edit_end(&e);
    for (int cap = 0; cap <= 2; cap++) {
        CHECK_STATUS(brg_schedule_verify(b, cap, why, sizeof why), BRG_ERR_FORMAT);
        CHECK_MSG(strstr(why, "deadlock") != NULL, "%s", why);
        CHECK_MSG(strstr(why, "dev0 action 3 (RG0<1) waits for dev1 to send the gradient of micro-batch 0"), "%s", why);
        CHECK_MSG(strstr(why, "dev1 action 2 (RA1<0) waits for dev0 to send the activation of micro-batch 1"), "%s",
                  why);
        CHECK_MSG(strstr(why, "2 of 2 devices stuck"), "%s", why);
    }
    /* the last error names the schedule in front of the reason */
    CHECK_ERROR_HAS("custom schedule (2 devices, 2 micro-batches, 1 chunk per device): deadlock");
    brg_schedule_sim *r = (brg_schedule_sim *)&e;
    brg_schedule_times unit = unit_times();
    CHECK_STATUS(brg_schedule_simulate(b, &unit, &r), BRG_ERR_FORMAT);
    CHECK(r == NULL);
    /* the simulator's walk is the verifier's, and says the same */
    CHECK_ERROR_HAS("custom schedule (2 devices, 2 micro-batches, 1 chunk per device): deadlock with unbounded "
                    "channels: dev0 action 3 (RG0<1) waits");
    brg_schedule_destroy(b);

    /* A deadlock only bounded channels have: dev1 takes micro-batch 1's
     * activation before micro-batch 0's; with room for one message dev0
     * cannot send micro-batch 1 while micro-batch 0 sits undelivered. */
    edit_begin(&e, s);
    for (int i = 0; i < 2; i++) edit_swap(&e, 1, i, i + 2);
    b = edit_end(&e);
    CHECK_OK(brg_schedule_verify(b, 0, why, sizeof why));
    CHECK(why[0] == '\0');
    CHECK_OK(brg_schedule_verify(b, 2, why, sizeof why));
    CHECK_STATUS(brg_schedule_verify(b, 1, why, sizeof why), BRG_ERR_FORMAT);
    CHECK_MSG(strstr(why, "deadlock with channel capacity 1") != NULL, "%s", why);
    CHECK_MSG(strstr(why, "dev0 action 3 (SA1>1) waits: channel dev0->dev1 (activations) holds 1 undelivered"), "%s",
              why);
    CHECK_MSG(strstr(why, "dev1 action 0 (RA1<0) waits for dev0"), "%s", why);
    brg_schedule_destroy(b);

    /* A send before the forward that computes it. */
    edit_begin(&e, s);
    edit_swap(&e, 0, 0, 1);
    b = edit_end(&e);
    CHECK_STATUS(brg_schedule_verify(b, 0, why, sizeof why), BRG_ERR_FORMAT);
    CHECK_MSG(strstr(why, "dev0 action 1 (F0) comes after dev0 action 0 (SA0>1)") &&
                  strstr(why, "activation can only be sent after the forward"),
              "%s", why);
    brg_schedule_destroy(b);

    /* A removed send. */
    edit_begin(&e, s);
    edit_remove(&e, 0, edit_find(&e, 0, BRG_ACTION_SEND_ACT, 1));
    check_refused(edit_end(&e), 1, "dev0 has no activation send of micro-batch 1 for stage 0");

    /* A duplicated forward. */
    edit_begin(&e, s);
    e.lists[1][e.count[1]++] = (brg_action){.type = BRG_ACTION_FORWARD, .micro_batch = 0, .chunk = 0, .peer = -1};
    check_refused(edit_end(&e), 1,
                  "dev1 action 8 (F0): a second forward of micro-batch 0 on stage 1 (the first is action 1)");

    /* Sends to the wrong device, past the end, and messages that do not exist. */
    edit_begin(&e, s);
    e.lists[1][e.count[1]++] = (brg_action){.type = BRG_ACTION_SEND_ACT, .micro_batch = 0, .chunk = 0, .peer = 0};
    check_refused(edit_end(&e), 1, "stage 1 is the last stage; it has no next stage");
    brg_schedule_destroy(s);

    CHECK_OK(brg_schedule_build(BRG_SCHEDULE_1F1B, 3, 2, 1, &s));
    edit_begin(&e, s);
    e.lists[0][edit_find(&e, 0, BRG_ACTION_SEND_ACT, 1)].peer = 2;
    check_refused(edit_end(&e), 1, "the peer of stage 0 for stage 1 must be dev1, not dev2");
    brg_schedule_destroy(s);

    /* A removed backward (1F1B, p = 4, m = 8). */
    CHECK_OK(brg_schedule_build(BRG_SCHEDULE_1F1B, 4, 8, 1, &s));
    edit_begin(&e, s);
    edit_remove(&e, 1, edit_find(&e, 1, BRG_ACTION_BACKWARD, 3));
    check_refused(edit_end(&e), 1, "dev1 has no backward of micro-batch 3 for stage 1");

    /* A backward before the gradient it needs has been received. */
    edit_begin(&e, s);
    int rg = edit_find(&e, 2, BRG_ACTION_RECV_GRAD, 5);
    edit_swap(&e, 2, rg, rg + 1);
    check_refused(edit_end(&e), 1, "a backward needs its output gradient received first");
    brg_schedule_destroy(s);

    /* ZB-H1 with W before its B. */
    CHECK_OK(brg_schedule_build(BRG_SCHEDULE_ZB_H1, 2, 2, 1, &s));
    edit_begin(&e, s);
    edit_swap(&e, 0, edit_find(&e, 0, BRG_ACTION_BACKWARD_INPUT, 0), edit_find(&e, 0, BRG_ACTION_BACKWARD_WEIGHT, 0));
    check_refused(edit_end(&e), 1, "W runs after B of the same micro-batch");
    /* ... with a whole backward as well as B and W */
    edit_begin(&e, s);
    e.lists[0][e.count[0]++] = (brg_action){.type = BRG_ACTION_BACKWARD, .micro_batch = 1, .chunk = 0, .peer = -1};
    check_refused(edit_end(&e), 1, "dev0 runs the backward of micro-batch 1 for stage 0 both whole and split");
    /* ... and with a W missing */
    edit_begin(&e, s);
    edit_remove(&e, 1, edit_find(&e, 1, BRG_ACTION_BACKWARD_WEIGHT, 1));
    check_refused(edit_end(&e), 1, "dev1 has no weight-gradient backward (W) of micro-batch 1 for stage 1");
    brg_schedule_destroy(s);

    /* One device, two chunks: the chunks hand over in place. */
    const brg_action good[] = {
        {BRG_ACTION_FORWARD, 0, 0, -1}, {BRG_ACTION_FORWARD, 0, 1, -1},
        {BRG_ACTION_BACKWARD, 0, 1, -1}, {BRG_ACTION_BACKWARD, 0, 0, -1}};
    const brg_action bad_order[] = {
        {BRG_ACTION_FORWARD, 0, 1, -1}, {BRG_ACTION_FORWARD, 0, 0, -1},
        {BRG_ACTION_BACKWARD, 0, 1, -1}, {BRG_ACTION_BACKWARD, 0, 0, -1}};
    const brg_action with_send[] = {
        {BRG_ACTION_FORWARD, 0, 0, -1}, {BRG_ACTION_SEND_ACT, 0, 0, 0}, {BRG_ACTION_FORWARD, 0, 1, -1},
        {BRG_ACTION_BACKWARD, 0, 1, -1}, {BRG_ACTION_BACKWARD, 0, 0, -1}};
    int four = 4, five = 5;
    const brg_action *lists[1] = {good};
    CHECK_OK(brg_schedule_create(1, 1, 2, &four, lists, &s));
    CHECK(brg_schedule_get_kind(s) == BRG_SCHEDULE_CUSTOM);
    CHECK_OK(brg_schedule_verify(s, 1, why, sizeof why));
    brg_schedule_destroy(s);
    lists[0] = bad_order;
    CHECK_OK(brg_schedule_create(1, 1, 2, &four, lists, &s));
    check_refused(s, 1, "the previous stage on the same device must run its forward first");
    lists[0] = with_send;
    CHECK_OK(brg_schedule_create(1, 1, 2, &five, lists, &s));
    check_refused(s, 1, "stages 0 and 1 are both on dev0; the tensor is handed over in place");

    /* Ranges are checked when the lists are taken. */
    const brg_action out_of_range[] = {{BRG_ACTION_FORWARD, 1, 0, -1}};
    const brg_action send_no_peer[] = {{BRG_ACTION_SEND_ACT, 0, 0, -1}};
    const brg_action compute_peer[] = {{BRG_ACTION_FORWARD, 0, 0, 0}};
    int one = 1;
    s = NULL;
    lists[0] = out_of_range;
    CHECK_STATUS(brg_schedule_create(1, 1, 1, &one, lists, &s), BRG_ERR_INVALID_ARGUMENT);
    CHECK_ERROR_HAS("micro-batch out of range");
    lists[0] = send_no_peer;
    CHECK_STATUS(brg_schedule_create(1, 1, 1, &one, lists, &s), BRG_ERR_INVALID_ARGUMENT);
    CHECK_ERROR_HAS("peer device out of range");
    lists[0] = compute_peer;
    CHECK_STATUS(brg_schedule_create(1, 1, 1, &one, lists, &s), BRG_ERR_INVALID_ARGUMENT);
    CHECK_ERROR_HAS("must be -1 for a computation");
    CHECK_STATUS(brg_schedule_create(1, 1, 1, NULL, lists, &s), BRG_ERR_INVALID_ARGUMENT);
    CHECK(s == NULL);
    /* an empty device is allowed by create, and incomplete for the verifier */
    int none = 0;
    CHECK_OK(brg_schedule_create(1, 1, 1, &none, lists, &s));
    CHECK_STATUS(brg_schedule_verify(s, 0, why, sizeof why), BRG_ERR_FORMAT);
    CHECK_MSG(strstr(why, "dev0 has no forward of micro-batch 0 for stage 0"), "%s", why);
    /* a tiny why buffer is truncated, never overrun */
    char tiny[8];
    memset(tiny, 'x', sizeof tiny);
    CHECK_STATUS(brg_schedule_verify(s, 0, tiny, 4), BRG_ERR_FORMAT);
    CHECK(strcmp(tiny, "dev") == 0 && tiny[4] == 'x');
    brg_schedule_destroy(s);
}

/* Small timelines worked out by hand. */
static void test_sim_by_hand(void)
{
    brg_schedule_times unit = unit_times();
    brg_schedule *s = NULL;
    brg_schedule_sim *r = NULL;

    /* GPipe, p = 2, m = 2, F = 1, backward = 2:
     *   dev0: F0 [0,1] F1 [1,2]                   B0 [5,7] B1 [7,9]
     *   dev1:          F0 [1,2] F1 [2,3] B0 [3,5] B1 [5,7]             */
    CHECK_OK(brg_schedule_build(BRG_SCHEDULE_GPIPE, 2, 2, 1, &s));
    CHECK_OK(brg_schedule_simulate(s, &unit, &r));
    CHECK(r->makespan == 9.0);
    /* dev0: F0 SA0 F1 SA1 RG0 B0 RG1 B1 */
    const double s0[] = {0, 1, 1, 2, 2, 5, 7, 7}, e0[] = {1, 1, 2, 2, 5, 7, 7, 9};
    for (int i = 0; i < 8; i++) CHECK_MSG(r->start[0][i] == s0[i] && r->end[0][i] == e0[i], "dev0 action %d", i);
    /* dev1: RA0 F0 RA1 F1 B0 SG0 B1 SG1 */
    const double s1[] = {0, 1, 2, 2, 3, 5, 5, 7}, e1[] = {1, 2, 2, 3, 5, 5, 7, 7};
    for (int i = 0; i < 8; i++) CHECK_MSG(r->start[1][i] == s1[i] && r->end[1][i] == e1[i], "dev1 action %d", i);
    CHECK(r->busy[0] == 6.0 && r->busy[1] == 6.0);
    CHECK_NEAR(r->idle[0], 1.0 / 3.0, 1e-15);
    /* dev0 in flight: 1 from 0, 2 from 1, 1 from 7, 0 from 9 */
    const double st[] = {0, 1, 7, 9};
    const int sc[] = {1, 2, 1, 0};
    CHECK(r->steps[0] == 4);
    for (int k = 0; k < 4 && k < r->steps[0]; k++) CHECK(r->step_time[0][k] == st[k] && r->step_count[0][k] == sc[k]);
    brg_schedule_sim_destroy(r);
    brg_schedule_destroy(s);

    /* 1F1B, p = 2, m = 1, stage times F = (1, 2), B = (1, 3), W = (1, 1),
     * transfer 0.5:
     *   dev0: F0 [0,1]; send at 1, arrives 1.5; RG0 waits [1,8]; B0 [8,10]
     *   dev1: RA0 [0,1.5]; F0 [1.5,3.5]; B0 [3.5,7.5]; send at 7.5, arrives 8 */
    CHECK_OK(brg_schedule_build(BRG_SCHEDULE_1F1B, 2, 1, 1, &s));
    double f[] = {1, 2}, bi[] = {1, 3}, bw[] = {1, 1}, tr[] = {0.5};
    brg_schedule_times t = {.forward = f, .backward_input = bi, .backward_weight = bw, .transfer = tr};
    CHECK_OK(brg_schedule_simulate(s, &t, &r));
    CHECK(r->makespan == 10.0);
    CHECK(r->busy[0] == 3.0 && r->busy[1] == 6.0);
    CHECK_NEAR(r->idle[0], 0.7, 1e-15);
    CHECK_NEAR(r->idle[1], 0.4, 1e-15);
    CHECK_NEAR(r->bubble, 0.55, 1e-15);
    /* dev0: F0 SA0 RG0 B0; dev1: RA0 F0 B0 SG0 */
    CHECK(r->start[0][2] == 1.0 && r->end[0][2] == 8.0 && r->start[0][3] == 8.0);
    CHECK(r->start[1][0] == 0.0 && r->end[1][0] == 1.5 && r->end[1][2] == 7.5 && r->start[1][3] == 7.5);
    brg_schedule_sim_destroy(r);

    /* invalid times */
    double neg[] = {1, -1}, nan_[] = {1, NAN};
    t.forward = neg;
    CHECK_STATUS(brg_schedule_simulate(s, &t, &r), BRG_ERR_INVALID_ARGUMENT);
    CHECK_ERROR_HAS("forward time of stage 1 is -1");
    t.forward = f;
    t.transfer = nan_ + 1;
    CHECK_STATUS(brg_schedule_simulate(s, &t, &r), BRG_ERR_INVALID_ARGUMENT);
    CHECK_ERROR_HAS("transfer time of boundary 0");
    t.transfer = NULL;
    t.backward_weight = NULL;
    CHECK_STATUS(brg_schedule_simulate(s, &t, &r), BRG_ERR_INVALID_ARGUMENT);
    CHECK_ERROR_HAS("no backward_weight times");
    CHECK_STATUS(brg_schedule_simulate(s, NULL, &r), BRG_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(brg_schedule_simulate(NULL, &t, &r), BRG_ERR_INVALID_ARGUMENT);
    brg_schedule_destroy(s);

    /* ZB-H1, p = 2, m = 2, F = B = W = 1: makespan 3m + p - 1 = 7
     *   dev0: F0 [0,1] F1 [1,2]   .   I0 [3,4] W0 [4,5] I1 [5,6] W1 [6,7]
     *   dev1:    .     F0 [1,2] I0 [2,3] F1 [3,4] I1 [4,5] W0 [5,6] W1 [6,7] */
    CHECK_OK(brg_schedule_build(BRG_SCHEDULE_ZB_H1, 2, 2, 1, &s));
    CHECK_OK(brg_schedule_simulate(s, &unit, &r));
    CHECK(r->makespan == 7.0);
    {
        /* the computations of each device, in list order */
        const double want[2][6] = {{0, 1, 3, 4, 5, 6}, {1, 2, 3, 4, 5, 6}};
        for (int d = 0; d < 2; d++) {
            int k = 0;
            for (int i = 0; i < r->action_count[d]; i++) {
                brg_action_type ty = brg_schedule_action(s, d, i)->type;
                if (ty == BRG_ACTION_FORWARD || ty == BRG_ACTION_BACKWARD_INPUT || ty == BRG_ACTION_BACKWARD_WEIGHT) {
                    CHECK_MSG(k < 6 && r->start[d][i] == want[d][k] && r->end[d][i] == want[d][k] + 1,
                              "dev%d computation %d starts at %g", d, k, r->start[d][i]);
                    k++;
                }
            }
            CHECK(k == 6);
        }
    }
    /* dev1 holds both micro-batches from 3 (F1) to 6 (end of W0) */
    CHECK(r->max_in_flight[1] == 2);
    brg_schedule_sim_destroy(r);
    brg_schedule_destroy(s);

    /* Interleaved, p = 2, m = 2, v = 2 (stages: 0 = dev0.c0, 1 = dev1.c0,
     * 2 = dev0.c1, 3 = dev1.c1), F = 1, backward = 2: makespan
     * 3(vm + p - 1) = 15; dev0 ends with B1.0 [13,15]. */
    CHECK_OK(brg_schedule_build(BRG_SCHEDULE_INTERLEAVED, 2, 2, 2, &s));
    CHECK_OK(brg_schedule_simulate(s, &unit, &r));
    CHECK(r->makespan == 15.0);
    {
        int last = r->action_count[0] - 1;
        const brg_action *a = brg_schedule_action(s, 0, last);
        CHECK(a->type == BRG_ACTION_BACKWARD && a->micro_batch == 1 && a->chunk == 0);
        CHECK(r->start[0][last] == 13.0 && r->end[0][last] == 15.0);
        /* dev1: F0.1 [3,4] B0.1 [4,6] F1.1 [6,7] B1.1 [7,9] B0.0 [9,11] B1.0 [11,13] */
        const double want[] = {1, 2, 3, 4, 6, 7, 9, 11};
        int k = 0;
        for (int i = 0; i < r->action_count[1]; i++) {
            brg_action_type ty = brg_schedule_action(s, 1, i)->type;
            if (ty == BRG_ACTION_FORWARD || ty == BRG_ACTION_BACKWARD) {
                CHECK_MSG(k < 8 && r->start[1][i] == want[k], "dev1 computation %d starts at %g", k, r->start[1][i]);
                k++;
            }
        }
        CHECK(k == 8);
    }
    brg_schedule_sim_destroy(r);
    brg_schedule_destroy(s);

    /* Interleaved on one device: no messages, chunks hand over in place. */
    CHECK_OK(brg_schedule_build(BRG_SCHEDULE_INTERLEAVED, 1, 3, 3, &s));
    for (int i = 0; i < brg_schedule_action_count(s, 0); i++) {
        brg_action_type ty = brg_schedule_action(s, 0, i)->type;
        CHECK(ty == BRG_ACTION_FORWARD || ty == BRG_ACTION_BACKWARD);
    }
    CHECK_OK(brg_schedule_simulate(s, &unit, &r));
    CHECK(r->makespan == 27.0 && r->bubble == 0.0);
    brg_schedule_sim_destroy(r);
    brg_schedule_destroy(s);
}

/* Unit-cost bubble and the largest in-flight count of any device, in
 * micro-batches of a whole device's layers (chunk micro-batches / v). */
static double unit_bubble(brg_schedule_kind kind, int p, int m, double *peak)
{
    brg_schedule_times unit = unit_times();
    brg_schedule *s = NULL;
    brg_schedule_sim *r = NULL;
    double bubble = -1.0;
    *peak = 0.0;
    CHECK_OK(brg_schedule_build(kind, p, m, brg_schedule_kind_chunks(kind, 0), &s));
    if (s && brg_schedule_simulate(s, &unit, &r) == BRG_OK) {
        bubble = r->bubble;
        for (int d = 0; d < p; d++) {
            const double held = (double)brg_schedule_max_in_flight(s, d, -1) / brg_schedule_chunks(s);
            if (held > *peak) *peak = held;
        }
    }
    brg_schedule_sim_destroy(r);
    brg_schedule_destroy(s);
    return bubble;
}

/* The V-shapes: the placement, and what the paper promises at unit costs.
 * Memory: ZB-V 1F1B's p, V-Half floor((p + 2) / 2), V-Min floor((p + 4) /
 * 3), V-Min's reached once m >= 2p. Bubbles: V-Min at most 1F1B's, V-Half
 * at most V-Min's, ZB-V at most V-Half's and ZB-H1's. */
static void test_vshape(void)
{
    brg_schedule *s = NULL;
    CHECK_OK(brg_schedule_build(BRG_SCHEDULE_V_MIN, 4, 8, 2, &s));
    const int stage_of[4][2] = {{0, 7}, {1, 6}, {2, 5}, {3, 4}};
    for (int d = 0; d < 4; d++)
        for (int c = 0; c < 2; c++) {
            CHECK(brg_schedule_stage_of(s, d, c) == stage_of[d][c]);
            CHECK(brg_schedule_device_of(s, stage_of[d][c]) == d);
        }
    CHECK(brg_schedule_stage_of(s, 4, 0) == -1 && brg_schedule_stage_of(s, 0, 2) == -1);
    CHECK(brg_schedule_device_of(s, 8) == -1 && brg_schedule_device_of(s, -1) == -1);
    /* the turn on device 3 hands over in place; everything else is a message */
    for (int i = 0; i < brg_schedule_action_count(s, 3); i++) {
        const brg_action *a = brg_schedule_action(s, 3, i);
        CHECK(!(a->type == BRG_ACTION_SEND_ACT && a->chunk == 0) && !(a->type == BRG_ACTION_RECV_ACT && a->chunk == 1));
    }
    brg_schedule_destroy(s);
    CHECK_OK(brg_schedule_build(BRG_SCHEDULE_1F1B, 4, 8, 1, &s));
    CHECK(brg_schedule_stage_of(s, 3, 0) == 3 && brg_schedule_device_of(s, 2) == 2);
    brg_schedule_destroy(s);
    CHECK_STATUS(brg_schedule_build(BRG_SCHEDULE_ZB_V, 4, 8, 1, &s), BRG_ERR_INVALID_ARGUMENT);
    CHECK_ERROR_HAS("takes 2 chunks per device");
    CHECK_STATUS(brg_schedule_build(BRG_SCHEDULE_V_HALF, 4, 8, 3, &s), BRG_ERR_INVALID_ARGUMENT);

    for (int p = 1; p <= 8; p++)
        for (int m = 1; m <= 32; m++) {
            double pk_1f1b, pk_h1, pk_zbv, pk_half, pk_min;
            const double b_1f1b = unit_bubble(BRG_SCHEDULE_1F1B, p, m, &pk_1f1b),
                         b_h1 = unit_bubble(BRG_SCHEDULE_ZB_H1, p, m, &pk_h1),
                         b_zbv = unit_bubble(BRG_SCHEDULE_ZB_V, p, m, &pk_zbv),
                         b_half = unit_bubble(BRG_SCHEDULE_V_HALF, p, m, &pk_half),
                         b_min = unit_bubble(BRG_SCHEDULE_V_MIN, p, m, &pk_min);
            CHECK_MSG(b_min <= b_1f1b + 1e-12 && b_half <= b_min + 1e-12 && b_zbv <= b_half + 1e-12 &&
                          b_zbv <= b_h1 + 1e-12,
                      "p=%d m=%d bubbles: 1f1b %.4f zb-h1 %.4f zb-v %.4f v-half %.4f v-min %.4f", p, m, b_1f1b, b_h1,
                      b_zbv, b_half, b_min);
            CHECK_MSG(pk_zbv <= p && pk_half <= (p + 2) / 2 && pk_min <= (p + 4) / 3,
                      "p=%d m=%d peaks: zb-v %g v-half %g v-min %g", p, m, pk_zbv, pk_half, pk_min);
            if (m >= 2 * p) CHECK_MSG(pk_min == (p + 4) / 3, "p=%d m=%d: v-min holds %g", p, m, pk_min);
        }
    /* ZB-H2 pays its extra memory back where W is shorter than F and B:
     * at F = 1, B = 1.5, W = 0.5, p = 4, m = 16 it is shorter than ZB-H1. */
    {
        double f[4] = {1, 1, 1, 1}, b[4] = {1.5, 1.5, 1.5, 1.5}, w[4] = {0.5, 0.5, 0.5, 0.5};
        const brg_schedule_times t = {.forward = f, .backward_input = b, .backward_weight = w};
        double mk[2] = {0, 0};
        const brg_schedule_kind zb[2] = {BRG_SCHEDULE_ZB_H1, BRG_SCHEDULE_ZB_H2};
        for (int k = 0; k < 2; k++) {
            brg_schedule_sim *r = NULL;
            CHECK_OK(brg_schedule_build(zb[k], 4, 16, 1, &s));
            if (s && brg_schedule_simulate(s, &t, &r) == BRG_OK) mk[k] = r->makespan;
            brg_schedule_sim_destroy(r);
            brg_schedule_destroy(s);
        }
        CHECK_MSG(mk[1] > 0 && mk[1] < mk[0], "zb-h2 %g, zb-h1 %g", mk[1], mk[0]);
    }
    /* Built for stage times: zero-length computations (a stage with no
     * weights has W = 0; here every forward of stage 2 as well), uneven
     * stages; each kind still verifies with one-message channels and
     * keeps its cap. Times that cannot be are refused. */
    {
        double f[8] = {1, 2, 0, 1, 3, 1, 0.5, 1}, b[8] = {2, 2, 1, 0.5, 3, 2, 1, 2}, w[8] = {0, 1, 0, 1, 2, 0, 1, 0};
        const brg_schedule_times t = {.forward = f, .backward_input = b, .backward_weight = w};
        const brg_schedule_kind capped[4] = {BRG_SCHEDULE_ZB_H2, BRG_SCHEDULE_ZB_V, BRG_SCHEDULE_V_HALF,
                                             BRG_SCHEDULE_V_MIN};
        for (int k = 0; k < 4; k++)
            for (int m = 1; m <= 12; m++) {
                const int v = brg_schedule_kind_chunks(capped[k], 0);
                CHECK_OK(brg_schedule_build_timed(capped[k], 8 / v, m, v, &t, &s));
                if (!s) continue;
                CHECK_MSG(brg_schedule_verify(s, 1, NULL, 0) == BRG_OK, "%s m=%d timed",
                          brg_schedule_kind_name(capped[k]), m);
                brg_schedule_destroy(s);
            }
        /* The orders themselves, pinned: the makespan and a fingerprint of
         * every action's start (sum of start x (index + 1)) as the list
         * schedule built them before it became event-driven with a heap
         * (these times are multiples of 0.5, so the sums are exact). */
        const struct {
            int k, m;
            double makespan, starts;
        } pinned[8] = {{0, 5, 45.5, 113869}, {0, 12, 100, 1370794}, {1, 5, 55.5, 250203}, {1, 12, 129, 3454511.5},
                       {2, 5, 56.5, 252205}, {2, 12, 131, 3453467}, {3, 5, 64, 298178}, {3, 12, 137.5, 3783439.5}};
        for (int i = 0; i < 8; i++) {
            const brg_schedule_kind kind = capped[pinned[i].k];
            const int v = brg_schedule_kind_chunks(kind, 0);
            brg_schedule_sim *r = NULL;
            CHECK_OK(brg_schedule_build_timed(kind, 8 / v, pinned[i].m, v, &t, &s));
            if (s && brg_schedule_simulate(s, &t, &r) == BRG_OK) {
                double starts = 0;
                for (int d = 0; d < r->devices; d++)
                    for (int a = 0; a < r->action_count[d]; a++) starts += r->start[d][a] * (a + 1);
                CHECK_MSG(r->makespan == pinned[i].makespan && starts == pinned[i].starts,
                          "%s m=%d timed: makespan %.17g (want %g), starts %.17g (want %g)",
                          brg_schedule_kind_name(kind), pinned[i].m, r->makespan, pinned[i].makespan, starts,
                          pinned[i].starts);
            } else {
                CHECK_MSG(0, "%s m=%d timed: no schedule or no simulation", brg_schedule_kind_name(kind), pinned[i].m);
            }
            brg_schedule_sim_destroy(r);
            brg_schedule_destroy(s);
        }
        f[3] = -1.0;
        CHECK_STATUS(brg_schedule_build_timed(BRG_SCHEDULE_V_MIN, 4, 8, 2, &t, &s), BRG_ERR_INVALID_ARGUMENT);
        CHECK_ERROR_HAS("finite and >= 0");
    }
    /* The ratios to 1F1B at p = 4, m = 32 (docs/schedules.md's table). */
    double pk;
    const double b1 = unit_bubble(BRG_SCHEDULE_1F1B, 4, 32, &pk);
    CHECK_NEAR(unit_bubble(BRG_SCHEDULE_ZB_V, 4, 32, &pk) / b1, 0.015 / 0.086, 0.02);
    CHECK(pk == 4.0);
    CHECK_NEAR(unit_bubble(BRG_SCHEDULE_V_HALF, 4, 32, &pk) / b1, 0.41, 0.02);
    CHECK(pk == 3.0);
    CHECK_NEAR(unit_bubble(BRG_SCHEDULE_V_MIN, 4, 32, &pk) / b1, 0.63, 0.02);
    CHECK(pk == 2.0);
}

/* A larger pipeline verifies and simulates quickly. */
static void test_large(void)
{
    static double fw[128], bi[128], bw[128], tr[128];
    for (int i = 0; i < 128; i++) {
        fw[i] = 1.0 + 0.01 * i;
        bi[i] = 1.1;
        bw[i] = 0.9;
        tr[i] = 0.05;
    }
    brg_schedule_times t = {.forward = fw, .backward_input = bi, .backward_weight = bw, .transfer = tr};
    for (int kind = 0; kind < BRG_SCHEDULE_KIND_COUNT; kind++) {
        int v = brg_schedule_kind_chunks((brg_schedule_kind)kind, 4);
        brg_schedule *s = NULL;
        brg_schedule_sim *r = NULL;
        CHECK_OK(brg_schedule_build((brg_schedule_kind)kind, 16, 512, v, &s));
        CHECK_OK(brg_schedule_verify(s, 1, NULL, 0));
        CHECK_OK(brg_schedule_simulate(s, &t, &r));
        if (r) {
            check_sim_consistent(s, r, brg_schedule_kind_name((brg_schedule_kind)kind));
            CHECK(r->makespan > 0 && r->bubble > 0 && r->bubble < 0.2);
        }
        brg_schedule_sim_destroy(r);
        brg_schedule_destroy(s);
    }
}

int main(void)
{
    test_names_and_arguments();
    test_format();
    test_all_shapes();
    test_interleaved_table();
    test_vshape();
    test_last_backward();
    test_broken();
    test_sim_by_hand();
    test_large();
    TEST_EXIT();
}
