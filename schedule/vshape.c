/* The computation orders of the memory-capped zero-bubble schedules: the
 * V-shapes (zb-v, v-half, v-min) and ZB-H2.
 *
 * Qi et al., "Pipeline Parallelism with Controllable Memory" (2024), place
 * two chunks per device in a V (schedule.h) and bound the activations a
 * device holds: about 1F1B's for ZB-V, half for V-Half, a third for V-Min.
 * The bound here is a cap on the chunk micro-batches a device holds between
 * a forward and its weight gradient (two make one micro-batch of a 1F1B
 * stage), the paper's figures in 1F1B micro-batches: ZB-V p, V-Half
 * floor((p + 2) / 2), V-Min floor((p + 4) / 3).
 *
 * These constructions give a device's order of its 6m computations (F, B,
 * W of two chunks; 3m with ZB-H2's one chunk):
 *   - the timetable (unit costs, V-shapes only): a pattern that repeats
 *     every 6 steps, each device running one computation in each of the 6
 *     slots (step mod 6), forwards down the stages and backwards back up,
 *     each at the first free slot of its device after its input, each W at
 *     the first free slot after its B. Micro-batch b runs the pattern 6b
 *     steps after micro-batch 0. It holds the least memory (its peak is
 *     V-Min's cap for p = 2..8) and its bubble is the pipeline's fill and
 *     drain only;
 *   - the list schedule: whenever a device is free it runs, of what is
 *     ready, an input gradient (B, oldest micro-batch first: it is on the
 *     critical path back to the first stage), else a forward that fits
 *     under the cap (the second chunk's first: it brings its micro-batch
 *     closer to the backward that frees it), else a weight gradient (W,
 *     oldest first: the filler). A forward of chunk 0 leaves one unit free,
 *     so the second chunk's forward of the oldest unfinished micro-batch
 *     always fits and that micro-batch can always move: the construction
 *     never stalls for a cap >= 2. With room it fills the fill and drain
 *     with forwards and deferred Ws, as ZB-V does. A second variant starts
 *     a computation only when the channel its message takes is empty, so
 *     that its order runs with one-message channels; that variant always
 *     qualifies. Both run at unit costs or at given times
 *     (brg_schedule_build_timed), event-driven.
 * build.c builds them all and keeps the one that holds at most the cap,
 * passes the verifier with one-message channels and is shortest at the
 * times given (unit costs by default). Every order follows the data, so
 * any durations run it without deadlock, and the planner counts the
 * memory from the order (brg_schedule_max_in_flight).
 *
 * ZB-H2 (Qi et al. 2023, "Zero Bubble Pipeline Parallelism") is the list
 * schedule with one chunk per device and a cap of 2p - 1 micro-batches,
 * about twice 1F1B's: the zero-bubble paper's H2, which fills the warm-up
 * with forwards and the cool-down with Ws.
 */
#include <stdlib.h>
#include <string.h>

#include "base/internal.h"
#include "schedule/schedule-impl.h"

int brg_vshape_cap(brg_schedule_kind kind, int p)
{
    switch (kind) {
    case BRG_SCHEDULE_ZB_H2: return 2 * p - 1 > 1 ? 2 * p - 1 : 1;
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
static brg_status make_pattern(int p, int *off)
{
    const int V = 2 * p;
    char(*used)[6] = (char(*)[6])calloc((size_t)p, sizeof *used);
    if (!used) return brg_error(BRG_ERR_HOST_MEMORY, "cannot allocate the V-shape timetable");
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
    return BRG_OK;
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
    const brg_status st = make_pattern(p, off);
    for (int d = 0; d < p && st == BRG_OK; d++) {
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
    return st;
}

/* ---- the list schedule ---- */

typedef struct vs_state {
    int p, m, V, cap;
    int chunks, vshape;    /* 2 in a V, or 1 (ZB-H2) */
    const brg_schedule_times *times; /* NULL: every computation 1 */
    int one_slot;          /* 1: a message waits until the previous one across its boundary was taken */
    double *end;           /* [k][j][b]: when computation k of (j, b) ends; < 0: not started */
    int *next;             /* [k][j]: the next micro-batch of computation k of stage j */
    int *held;             /* [d]: chunk micro-batches between F and W */
} vs_state;

static double *end_of(const vs_state *x, int k, int j, int b)
{
    return &x->end[((size_t)k * x->V + (size_t)j) * (size_t)x->m + (size_t)b];
}

static int *next_of(const vs_state *x, int k, int j) { return &x->next[k * x->V + j]; }

static double duration(const vs_state *x, int k, int j)
{
    if (!x->times) return 1.0;
    return k == F_ ? x->times->forward[j] : k == B_ ? x->times->backward_input[j] : x->times->backward_weight[j];
}

/* Computation k of (j, b) has ended by time t. */
static int done(const vs_state *x, int k, int j, int b, double t)
{
    const double e = *end_of(x, k, j, b);
    return e >= 0.0 && e <= t;
}

/* Whether the message computation k of (j, b) produces finds its channel
 * empty, as one-message channels need: the previous micro-batch's message
 * across the same boundary was taken (its consumer started). A message to
 * the same device is no message. */
static int room_to_send(const vs_state *x, int k, int j, int b)
{
    const int to = k == F_ ? j + 1 : j - 1;
    if (!x->one_slot || to < 0 || to >= x->V || b == 0) return 1;
    if (brg_sched_device(x->p, x->vshape, to) == brg_sched_device(x->p, x->vshape, j)) return 1;
    return *next_of(x, k, to) >= b;
}

/* What device d starts at time t (header: B, else F under the cap, else
 * W), into *a; 0 when nothing is ready. */
static int pick(const vs_state *x, int d, double t, brg_action *a)
{
    int chunk = -1, mb = 0;
    for (int c = x->chunks - 1; c >= 0; c--) {
        const int j = brg_sched_stage(x->p, x->vshape, d, c), b = *next_of(x, B_, j);
        if (b >= x->m || !done(x, F_, j, b, t) || (j < x->V - 1 && !done(x, B_, j + 1, b, t)) ||
            !room_to_send(x, B_, j, b))
            continue;
        if (chunk < 0 || b < mb) chunk = c, mb = b;
    }
    if (chunk >= 0) {
        *a = (brg_action){.type = BRG_ACTION_BACKWARD_INPUT, .micro_batch = mb, .chunk = chunk, .peer = -1};
        return 1;
    }
    for (int c = x->chunks - 1; c >= 0; c--) {
        const int j = brg_sched_stage(x->p, x->vshape, d, c), b = *next_of(x, F_, j);
        const int reserve = x->chunks > 1 && c == 0; /* room for chunk 1's forward */
        if (b >= x->m || x->held[d] + 1 + reserve > x->cap || (j > 0 && !done(x, F_, j - 1, b, t)) ||
            !room_to_send(x, F_, j, b))
            continue;
        *a = (brg_action){.type = BRG_ACTION_FORWARD, .micro_batch = b, .chunk = c, .peer = -1};
        return 1;
    }
    for (int c = x->chunks - 1; c >= 0; c--) {
        const int j = brg_sched_stage(x->p, x->vshape, d, c), b = *next_of(x, W_, j);
        if (b >= *next_of(x, B_, j) || !done(x, B_, j, b, t)) continue;
        if (chunk < 0 || b < mb) chunk = c, mb = b;
    }
    if (chunk < 0) return 0;
    *a = (brg_action){.type = BRG_ACTION_BACKWARD_WEIGHT, .micro_batch = mb, .chunk = chunk, .peer = -1};
    return 1;
}

/* The busy devices by the time they come free: a binary min-heap. */
typedef struct ends_heap {
    struct busy {
        double at;
        int d;
    } *a;
    int n;
} ends_heap;

static void ends_push(ends_heap *h, double at, int d)
{
    int i = h->n++;
    for (; i > 0 && at < h->a[(i - 1) / 2].at; i = (i - 1) / 2) h->a[i] = h->a[(i - 1) / 2];
    h->a[i] = (struct busy){at, d};
}

static int ends_pop(ends_heap *h)
{
    const int top = h->a[0].d;
    const struct busy last = h->a[--h->n];
    int i = 0;
    for (int c; (c = 2 * i + 1) < h->n; i = c) {
        if (c + 1 < h->n && h->a[c + 1].at < h->a[c].at) c++;
        if (!(h->a[c].at < last.at)) break;
        h->a[i] = h->a[c];
    }
    if (h->n > 0) h->a[i] = last;
    return top;
}

/* Which devices the sweeps at the current time still visit. A sweep goes
 * up the devices; `pos` is the device it is at (-1 before it starts). A
 * device touched above pos is visited later in this sweep (cur), one at or
 * below pos in the next sweep (nxt): the visits of a sweep over every
 * device in order, less those whose pick cannot have changed since they
 * last picked nothing. */
typedef struct visits {
    char *cur, *nxt; /* [p] */
    int p, pos, n_nxt;
} visits;

static void touch(visits *w, int d)
{
    if (d > w->pos) w->cur[d] = 1;
    else if (!w->nxt[d]) {
        w->nxt[d] = 1;
        w->n_nxt++;
    }
}

/* A computation of stage j started or ended: pick reads its end time and
 * its stage's next micro-batch on the devices of stages j - 1 and j + 1
 * (done, room_to_send), so their choice may change. */
static void touch_around(const vs_state *x, visits *w, int j)
{
    if (j > 0) touch(w, brg_sched_device(x->p, x->vshape, j - 1));
    if (j < x->V - 1) touch(w, brg_sched_device(x->p, x->vshape, j + 1));
}

/* The next device to visit at this time, or -1 when the sweeps are over
 * (a sweep that starts nothing touches nobody, and ends them). */
static int next_visit(visits *w)
{
    const char *at = w->pos + 1 < w->p ? memchr(w->cur + w->pos + 1, 1, (size_t)(w->p - w->pos - 1)) : NULL;
    if (!at) {
        if (w->n_nxt == 0) return -1;
        char *swap = w->cur; /* all 0 now */
        w->cur = w->nxt;
        w->nxt = swap;
        w->n_nxt = 0;
        at = memchr(w->cur, 1, (size_t)w->p);
    }
    w->pos = (int)(at - w->cur);
    w->cur[w->pos] = 0;
    return w->pos;
}

/* An event-driven list schedule: at each moment a device is free it
 * starts what pick chooses; time then moves to the next end of anything.
 * Decisions at t see what ended by t; with positive durations nothing
 * starting at t ends at t, and a zero-length computation ends at t and
 * frees its device at once. Devices are swept in order until a sweep
 * starts nothing; the order matters (a start makes room on a channel, and
 * a device swept before it picks something else), so the sweeps keep it,
 * but visit only the devices whose pick may have changed since they last
 * picked nothing: the one that came free and the neighbours of what ended
 * or started. Each end costs O(log p) on the heap and a sweep one memchr
 * over p flags, where every moment used to pick on every free device and
 * scan all p for the next end (each pick reads tables far apart in memory:
 * most of the time 1000 x 1000 zb-h2 took). */
static brg_status list_order(brg_schedule_kind kind, int p, int m, const brg_schedule_times *times, int one_slot,
                             brg_action *order)
{
    const int chunks = brg_schedule_kind_chunks(kind, 0);
    vs_state x = {.p = p, .m = m, .V = chunks * p, .cap = brg_vshape_cap(kind, p), .chunks = chunks,
                  .vshape = brg_schedule_kind_is_v(kind), .times = times, .one_slot = one_slot};
    const int per_device = 3 * chunks * m;
    const size_t cells = (size_t)3 * x.V * (size_t)m;
    x.end = malloc(cells * sizeof *x.end);
    x.next = calloc((size_t)3 * x.V + (size_t)p, sizeof *x.next);
    double *free_at = calloc((size_t)p, sizeof *free_at);
    int *placed = calloc((size_t)p, sizeof *placed), *running = calloc((size_t)p, sizeof *running);
    ends_heap ends = {.a = malloc((size_t)p * sizeof *ends.a)};
    visits w = {.cur = calloc((size_t)p, 1), .nxt = calloc((size_t)p, 1), .p = p, .pos = -1};
    brg_status ret = BRG_OK;
    if (!x.end || !x.next || !free_at || !placed || !running || !ends.a || !w.cur || !w.nxt) {
        ret = brg_error(BRG_ERR_HOST_MEMORY, "cannot allocate the list schedule");
        goto exit;
    }
    for (size_t i = 0; i < cells; i++) x.end[i] = -1.0;
    x.held = x.next + 3 * x.V;
    int left = p * per_device;
    for (int d = 0; d < p; d++) touch(&w, d);
    for (double t = 0.0; left > 0;) {
        for (int d; (d = next_visit(&w)) >= 0;) {
            brg_action a;
            while (free_at[d] <= t && pick(&x, d, t, &a)) {
                const int j = brg_sched_stage(p, x.vshape, d, a.chunk);
                const int k = a.type == BRG_ACTION_FORWARD ? F_ : a.type == BRG_ACTION_BACKWARD_INPUT ? B_ : W_;
                const double dur = duration(&x, k, j);
                free_at[d] = *end_of(&x, k, j, a.micro_batch) = t + (dur > 0.0 ? dur : 0.0);
                (*next_of(&x, k, j))++;
                x.held[d] += k == F_ ? 1 : k == W_ ? -1 : 0;
                order[(size_t)d * per_device + (size_t)placed[d]++] = a;
                left--;
                touch_around(&x, &w, j);
                if (free_at[d] > t) {
                    running[d] = j;
                    ends_push(&ends, free_at[d], d);
                }
            }
        }
        if (left == 0) break;
        /* The next moment anything ends: what ends later runs now, on a
         * device busy until then. None means nothing runs and nothing is
         * ready: the header's argument would be wrong. */
        if (ends.n == 0) {
            ret = brg_error(BRG_ERR_INTERNAL, "%s schedule (%d devices, %d micro-batches): the list schedule "
                            "stalled at time %g", brg_schedule_kind_name(kind), p, m, t);
            goto exit;
        }
        t = ends.a[0].at;
        w.pos = -1;
        while (ends.n > 0 && ends.a[0].at == t) {
            const int d = ends_pop(&ends);
            touch(&w, d);
            touch_around(&x, &w, running[d]);
        }
    }
exit:
    free(x.end);
    free(x.next);
    free(free_at);
    free(placed);
    free(running);
    free(ends.a);
    free(w.cur);
    free(w.nxt);
    return ret;
}

brg_status brg_vshape_order(brg_schedule_kind kind, int construction, int p, int m, const brg_schedule_times *times,
                            brg_action *order)
{
    if (brg_vshape_cap(kind, p) < 1)
        return brg_error(BRG_ERR_INTERNAL, "brg_vshape_order: %s has no cap", brg_schedule_kind_name(kind));
    if (construction == 0)
        return brg_schedule_kind_is_v(kind) ? timetable_order(p, m, order) : BRG_ERR_UNSUPPORTED;
    return list_order(kind, p, m, times, construction == 2, order);
}
