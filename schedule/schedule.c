/* Pipeline schedules: the classic kinds' lists, the placement, accessors,
 * in-flight counts and text. The constructions and their bubble and memory
 * figures are explained in docs/schedules.md; building (build.c) picks
 * among the memory-capped kinds' orders (vshape.c) with the verifier
 * (verify.c) and the simulator (simulate.c), both over the one
 * interpreter of walk.c. */
#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brigade/schedule.h"
#include "base/internal.h"
#include "schedule/schedule-impl.h"


/* ---- names ---- */

static const char *const kind_names[] = {
    [BRG_SCHEDULE_GPIPE] = "gpipe",
    [BRG_SCHEDULE_1F1B] = "1f1b",
    [BRG_SCHEDULE_INTERLEAVED] = "interleaved",
    [BRG_SCHEDULE_ZB_H1] = "zb-h1",
    [BRG_SCHEDULE_ZB_V] = "zb-v",
    [BRG_SCHEDULE_V_HALF] = "v-half",
    [BRG_SCHEDULE_V_MIN] = "v-min",
    [BRG_SCHEDULE_ZB_H2] = "zb-h2",
    [BRG_SCHEDULE_CUSTOM] = "custom",
};

const char *brg_schedule_kind_name(brg_schedule_kind kind)
{
    if ((int)kind < 0 || (int)kind > (int)BRG_SCHEDULE_CUSTOM) return "unknown";
    return kind_names[kind];
}

/* ASCII case-insensitive equality (no strcasecmp: plain C11). */
static int same_name(const char *a, const char *b)
{
    for (; *a && *b; a++, b++)
        if (tolower((unsigned char)*a) != tolower((unsigned char)*b)) return 0;
    return *a == *b;
}

brg_status brg_schedule_kind_parse(const char *name, brg_schedule_kind *kind)
{
    if (!kind) return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_schedule_kind_parse: NULL kind");
    if (name) {
        for (int k = 0; k < BRG_SCHEDULE_KIND_COUNT; k++) {
            if (same_name(name, kind_names[k])) {
                *kind = (brg_schedule_kind)k;
                return BRG_OK;
            }
        }
    }
    return brg_error(BRG_ERR_INVALID_ARGUMENT,
                     "unknown schedule '%.100s' (expected gpipe, 1f1b, interleaved, zb-h1, zb-h2, zb-v, v-half or "
                     "v-min)", name ? name : "(null)");
}

int brg_schedule_kind_is_v(brg_schedule_kind kind)
{
    return kind == BRG_SCHEDULE_ZB_V || kind == BRG_SCHEDULE_V_HALF || kind == BRG_SCHEDULE_V_MIN;
}

int brg_schedule_kind_chunks(brg_schedule_kind kind, int chunks)
{
    if (kind == BRG_SCHEDULE_INTERLEAVED) return chunks > 0 ? chunks : 2;
    return brg_schedule_kind_is_v(kind) ? 2 : 1;
}

long long brg_schedule_kind_actions(brg_schedule_kind kind, int devices, int micro_batches, int chunks)
{
    if ((int)kind < 0 || (int)kind >= BRG_SCHEDULE_KIND_COUNT || devices < 1 || micro_batches < 1) return 0;
    const long long V = (long long)devices * brg_schedule_kind_chunks(kind, chunks);
    /* past what a schedule is built for, the count could pass 64 bits */
    if (V > BRG_SCHEDULE_MAX_VIRTUAL_STAGES || V * micro_batches > BRG_SCHEDULE_MAX_UNITS) return 0;
    const int split = kind != BRG_SCHEDULE_GPIPE && kind != BRG_SCHEDULE_1F1B && kind != BRG_SCHEDULE_INTERLEAVED;
    /* one device hands every tensor over in place; so does the V's turn */
    const long long crossing = devices == 1 ? 0 : V - 1 - brg_schedule_kind_is_v(kind);
    return micro_batches * ((2 + split) * V + 4 * crossing);
}

/* ---- allocation ---- */

/* An empty schedule whose device d has room for count[d] actions: the
 * struct, the per-device arrays and all actions in one allocation. */
static brg_schedule *schedule_alloc(brg_schedule_kind kind, int p, int m, int v, const int *count)
{
    size_t total = 0;
    for (int d = 0; d < p; d++) total += (size_t)count[d];
    size_t bytes = sizeof(brg_schedule) + (size_t)p * sizeof(brg_action *) + total * sizeof(brg_action) +
                   (size_t)p * sizeof(int);
    brg_schedule *s = brg_malloc(bytes, "a pipeline schedule");
    if (!s) return NULL;
    s->kind = kind;
    s->p = p;
    s->m = m;
    s->v = v;
    s->vshape = brg_schedule_kind_is_v(kind);
    s->actions = (brg_action **)(s + 1);
    brg_action *slab = (brg_action *)(s->actions + p);
    s->count = (int *)(slab + total);
    for (int d = 0; d < p; d++) {
        s->actions[d] = slab;
        s->count[d] = count[d];
        slab += count[d];
    }
    return s;
}

void brg_schedule_destroy(brg_schedule *schedule) { free(schedule); }

/* ---- construction ---- */

/* Emits one device's list; with out == NULL it only counts, so a builder
 * runs twice: once to size the slab, once to fill it. */
typedef struct emitter {
    int p, m, v, d;
    int vshape;               /* the V placement */
    const brg_action *order;  /* V-shapes: this device's computations (brg_vshape_order) */
    brg_action *out;
    int n;
} emitter;

static void emit(emitter *e, brg_action_type type, int mb, int chunk, int peer)
{
    if (e->out) e->out[e->n] = (brg_action){.type = type, .micro_batch = mb, .chunk = chunk, .peer = peer};
    e->n++;
}

/* A forward with its receive just before and its send just after: the
 * receive is placed where the data is consumed, so a device never blocks
 * on it earlier than it must. */
/* The devices of the stages before and after chunk's on this device
 * (-1 at the ends of the pipeline). */
static void neighbours(const emitter *e, int chunk, int *prev, int *next)
{
    const int j = brg_sched_stage(e->p, e->vshape, e->d, chunk), last = e->p * e->v - 1;
    *prev = j > 0 ? brg_sched_device(e->p, e->vshape, j - 1) : -1;
    *next = j < last ? brg_sched_device(e->p, e->vshape, j + 1) : -1;
}

static void emit_forward(emitter *e, int mb, int chunk)
{
    int prev, next;
    neighbours(e, chunk, &prev, &next);
    if (prev >= 0 && prev != e->d) emit(e, BRG_ACTION_RECV_ACT, mb, chunk, prev);
    emit(e, BRG_ACTION_FORWARD, mb, chunk, -1);
    if (next >= 0 && next != e->d) emit(e, BRG_ACTION_SEND_ACT, mb, chunk, next);
}

/* BACKWARD or BACKWARD_INPUT, framed like emit_forward. */
static void emit_backward(emitter *e, brg_action_type type, int mb, int chunk)
{
    int prev, next;
    neighbours(e, chunk, &prev, &next);
    if (next >= 0 && next != e->d) emit(e, BRG_ACTION_RECV_GRAD, mb, chunk, next);
    emit(e, type, mb, chunk, -1);
    if (prev >= 0 && prev != e->d) emit(e, BRG_ACTION_SEND_GRAD, mb, chunk, prev);
}

static int imin(int a, int b) { return a < b ? a : b; }

/* GPipe: all forwards in micro-batch order, then all backwards in the same
 * order. */
static void build_gpipe(emitter *e)
{
    for (int b = 0; b < e->m; b++) emit_forward(e, b, 0);
    for (int b = 0; b < e->m; b++) emit_backward(e, BRG_ACTION_BACKWARD, b, 0);
}

/* 1F1B with flush: p-d-1 warm-up forwards, then alternate one forward and
 * one backward, then the remaining backwards. */
static void build_1f1b(emitter *e)
{
    int w = imin(e->p - e->d - 1, e->m);
    for (int b = 0; b < w; b++) emit_forward(e, b, 0);
    for (int i = 0; i < e->m - w; i++) {
        emit_forward(e, w + i, 0);
        emit_backward(e, BRG_ACTION_BACKWARD, i, 0);
    }
    for (int b = e->m - w; b < e->m; b++) emit_backward(e, BRG_ACTION_BACKWARD, b, 0);
}

/* ZB-H1: min(p-d, m) warm-up forwards; then for each micro-batch b in order
 * its B, the W of micro-batch b-d (W runs d micro-batches late, which is
 * what fills the cool-down), and the next forward if any; finally the d
 * deferred W. Every device keeps at most min(m, p) micro-batches between F
 * and W, and at most min(m, p-d) between F and B, as 1F1B. */
static void build_zb_h1(emitter *e)
{
    int w = imin(e->p - e->d, e->m);
    for (int b = 0; b < w; b++) emit_forward(e, b, 0);
    for (int b = 0; b < e->m; b++) {
        emit_backward(e, BRG_ACTION_BACKWARD_INPUT, b, 0);
        if (b >= e->d) emit(e, BRG_ACTION_BACKWARD_WEIGHT, b - e->d, 0, -1);
        if (b + w < e->m) emit_forward(e, b + w, 0);
    }
    for (int b = e->m - e->d > 0 ? e->m - e->d : 0; b < e->m; b++) emit(e, BRG_ACTION_BACKWARD_WEIGHT, b, 0, -1);
}

/* Megatron-LM's order of (micro-batch, chunk) steps for interleaving, over
 * mp micro-batches (a multiple of p): micro-batches go in groups of p; a
 * group runs chunk 0 for its p micro-batches, then chunk 1, ...; backwards
 * run the chunks from v-1 down to 0. Emits step k of that order, leaving
 * out the first `skip` (phantom) micro-batches. */
static void emit_interleaved_step(emitter *e, int skip, int k, int backward)
{
    int p = e->p, v = e->v;
    int group = k / (p * v), r = k % (p * v);
    int chunk = backward ? v - 1 - r / p : r / p;
    int mb = group * p + r % p - skip;
    if (mb < 0) return;
    if (backward) emit_backward(e, BRG_ACTION_BACKWARD, mb, chunk);
    else emit_forward(e, mb, chunk);
}

/* Interleaved 1F1B (Megatron-LM): 2(p-d-1) + (v-1)p warm-up forward steps,
 * then alternate one forward step and one backward step, then the remaining
 * backward steps. For m not a multiple of p the order is built for
 * mp = p * ceil(m/p) micro-batches and the first mp - m of them (phantoms)
 * are left out: removing whole micro-batches keeps a deadlock-free order
 * deadlock-free, at the price of a longer bubble (docs/schedules.md). */
static void build_interleaved(emitter *e)
{
    int p = e->p, v = e->v;
    int mp = (e->m + p - 1) / p * p, skip = mp - e->m, total = mp * v;
    int w = imin(total, 2 * (p - e->d - 1) + (v - 1) * p);
    for (int k = 0; k < w; k++) emit_interleaved_step(e, skip, k, 0);
    for (int i = 0; i < total - w; i++) {
        emit_interleaved_step(e, skip, w + i, 0);
        emit_interleaved_step(e, skip, i, 1);
    }
    for (int k = total - w; k < total; k++) emit_interleaved_step(e, skip, k, 1);
}

/* The V-shapes and ZB-H2: the device's computation order (vshape.c),
 * framed with its messages. */
static void build_from_order(emitter *e)
{
    for (int k = 0; k < 3 * e->v * e->m; k++) {
        const brg_action *a = &e->order[k];
        if (a->type == BRG_ACTION_FORWARD) emit_forward(e, a->micro_batch, a->chunk);
        else if (a->type == BRG_ACTION_BACKWARD_INPUT) emit_backward(e, a->type, a->micro_batch, a->chunk);
        else emit(e, a->type, a->micro_batch, a->chunk, -1);
    }
}

static void build_device(brg_schedule_kind kind, emitter *e)
{
    switch (kind) {
    case BRG_SCHEDULE_GPIPE: build_gpipe(e); break;
    case BRG_SCHEDULE_1F1B: build_1f1b(e); break;
    case BRG_SCHEDULE_INTERLEAVED: build_interleaved(e); break;
    case BRG_SCHEDULE_ZB_H1: build_zb_h1(e); break;
    case BRG_SCHEDULE_ZB_H2:
    case BRG_SCHEDULE_ZB_V:
    case BRG_SCHEDULE_V_HALF:
    case BRG_SCHEDULE_V_MIN: build_from_order(e); break;
    default: break;
    }
}

/* Shape checks shared by build and create. */
brg_status brg_schedule_check_shape(const char *what, int p, int m, int v)
{
    if (p < 1) return brg_error(BRG_ERR_INVALID_ARGUMENT, "%s: devices must be at least 1, not %d", what, p);
    if (m < 1) return brg_error(BRG_ERR_INVALID_ARGUMENT, "%s: micro-batches must be at least 1, not %d", what, m);
    if (v < 1) return brg_error(BRG_ERR_INVALID_ARGUMENT, "%s: chunks must be at least 1, not %d", what, v);
    if ((int64_t)p * v > BRG_SCHEDULE_MAX_VIRTUAL_STAGES)
        return brg_error(BRG_ERR_INVALID_ARGUMENT,
                         "%s: %d devices x %d chunks = %lld virtual stages, more than the limit of %d", what, p, v,
                         (long long)p * v, BRG_SCHEDULE_MAX_VIRTUAL_STAGES);
    if ((int64_t)p * v * m > BRG_SCHEDULE_MAX_UNITS)
        return brg_error(BRG_ERR_INVALID_ARGUMENT,
                         "%s: %d virtual stages x %d micro-batches = %lld, more than the limit of %d", what, p * v, m,
                         (long long)p * v * m, BRG_SCHEDULE_MAX_UNITS);
    return BRG_OK;
}

/* The lists of every device, counted in one pass and written in a second;
 * order: the capped kinds' computation orders (brg_vshape_order), else NULL. */
brg_status brg_schedule_emit(brg_schedule_kind kind, int p, int m, int v, const brg_action *order,
                                brg_schedule **out)
{
    int *count = brg_calloc((size_t)p, sizeof(int), "schedule action counts");
    brg_schedule *s = NULL;
    brg_status ret = count ? BRG_OK : BRG_ERR_HOST_MEMORY;
    for (int pass = 0; pass < 2 && ret == BRG_OK; pass++) {
        if (pass == 1 && !(s = schedule_alloc(kind, p, m, v, count))) ret = BRG_ERR_HOST_MEMORY;
        for (int d = 0; d < p && ret == BRG_OK; d++) {
            emitter e = {.p = p, .m = m, .v = v, .d = d, .vshape = brg_schedule_kind_is_v(kind),
                         .order = order ? order + (size_t)d * 3 * (size_t)v * (size_t)m : NULL,
                         .out = pass ? s->actions[d] : NULL, .n = 0};
            build_device(kind, &e);
            if (!pass) count[d] = e.n;
            else if (e.n != s->count[d])
                ret = brg_error(BRG_ERR_INTERNAL, "%s schedule: device %d's list changed length between passes",
                                kind_names[kind], d);
        }
    }
    free(count);
    if (ret != BRG_OK) {
        brg_schedule_destroy(s);
        return ret;
    }
    *out = s;
    return BRG_OK;
}

brg_status brg_schedule_create(int devices, int micro_batches, int chunks, const int *counts,
                               const brg_action *const *actions, brg_schedule **out)
{
    if (!out) return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_schedule_create: NULL out");
    *out = NULL;
    BRG_CHECK(brg_schedule_check_shape("custom schedule", devices, micro_batches, chunks));
    if (!counts || !actions) return brg_error(BRG_ERR_INVALID_ARGUMENT, "custom schedule: NULL counts or actions");
    int64_t limit = (int64_t)8 * BRG_SCHEDULE_MAX_UNITS;
    for (int d = 0; d < devices; d++) {
        if (counts[d] < 0 || counts[d] > limit)
            return brg_error(BRG_ERR_INVALID_ARGUMENT, "custom schedule: device %d has %d actions", d, counts[d]);
        if (counts[d] > 0 && !actions[d])
            return brg_error(BRG_ERR_INVALID_ARGUMENT, "custom schedule: device %d has %d actions but a NULL list", d,
                             counts[d]);
        for (int i = 0; i < counts[d]; i++) {
            const brg_action *a = &actions[d][i];
            const char *bad = NULL;
            if ((int)a->type < 0 || a->type >= BRG_ACTION_TYPE_COUNT) bad = "type";
            else if (a->micro_batch < 0 || a->micro_batch >= micro_batches) bad = "micro-batch";
            else if (a->chunk < 0 || a->chunk >= chunks) bad = "chunk";
            else if (brg_action_is_comm(a->type) && (a->peer < 0 || a->peer >= devices)) bad = "peer device";
            else if (!brg_action_is_comm(a->type) && a->peer != -1) bad = "peer (must be -1 for a computation)";
            if (bad)
                return brg_error(BRG_ERR_INVALID_ARGUMENT,
                                 "custom schedule: device %d action %d (type %d, micro-batch %d, chunk %d, peer %d): "
                                 "%s out of range for %d devices, %d micro-batches, %d chunks",
                                 d, i, (int)a->type, a->micro_batch, a->chunk, a->peer, bad, devices, micro_batches,
                                 chunks);
        }
    }
    brg_schedule *s = schedule_alloc(BRG_SCHEDULE_CUSTOM, devices, micro_batches, chunks, counts);
    if (!s) return BRG_ERR_HOST_MEMORY;
    for (int d = 0; d < devices; d++)
        if (counts[d] > 0) memcpy(s->actions[d], actions[d], (size_t)counts[d] * sizeof(brg_action));
    *out = s;
    return BRG_OK;
}

/* ---- accessors ---- */

brg_schedule_kind brg_schedule_get_kind(const brg_schedule *s) { return s ? s->kind : BRG_SCHEDULE_CUSTOM; }
int brg_schedule_devices(const brg_schedule *s) { return s ? s->p : 0; }
int brg_schedule_micro_batches(const brg_schedule *s) { return s ? s->m : 0; }
int brg_schedule_chunks(const brg_schedule *s) { return s ? s->v : 0; }

int brg_schedule_stage_of(const brg_schedule *s, int device, int chunk)
{
    if (!s || device < 0 || device >= s->p || chunk < 0 || chunk >= s->v) return -1;
    return brg_sched_stage(s->p, s->vshape, device, chunk);
}

int brg_schedule_device_of(const brg_schedule *s, int stage)
{
    if (!s || stage < 0 || stage >= s->p * s->v) return -1;
    return brg_sched_device(s->p, s->vshape, stage);
}

int brg_schedule_action_count(const brg_schedule *s, int device)
{
    if (!s || device < 0 || device >= s->p) return 0;
    return s->count[device];
}

const brg_action *brg_schedule_action(const brg_schedule *s, int device, int index)
{
    if (!s || device < 0 || device >= s->p || index < 0 || index >= s->count[device]) return NULL;
    return &s->actions[device][index];
}

int brg_schedule_last_backward(const brg_schedule *s, int device, int chunk)
{
    int last = -1;
    for (int i = 0; i < brg_schedule_action_count(s, device); i++) {
        const brg_action *a = brg_schedule_action(s, device, i);
        if (a->chunk == chunk && (a->type == BRG_ACTION_BACKWARD || a->type == BRG_ACTION_BACKWARD_INPUT ||
                                  a->type == BRG_ACTION_BACKWARD_WEIGHT))
            last = i;
    }
    return last;
}

int brg_schedule_max_in_flight(const brg_schedule *s, int device, int chunk)
{
    if (!s || device < 0 || device >= s->p || chunk < -1 || chunk >= s->v) return -1;
    int n = 0, peak = 0;
    for (int i = 0; i < s->count[device]; i++) {
        const brg_action *a = &s->actions[device][i];
        if (chunk >= 0 && a->chunk != chunk) continue;
        if (a->type == BRG_ACTION_FORWARD) {
            if (++n > peak) peak = n;
        } else if (a->type == BRG_ACTION_BACKWARD || a->type == BRG_ACTION_BACKWARD_WEIGHT) {
            n--;
        }
    }
    return peak;
}

/* ---- text ---- */

/* snprintf into a growing string that may be truncated: len counts the full
 * text, only what fits in size (with its NUL) is written. */
typedef struct textbuf {
    char *buf;
    size_t size, len;
} textbuf;

static void tb_printf(textbuf *t, const char *fmt, ...) BRG_PRINTF(2, 3);
static void tb_printf(textbuf *t, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *at = t->buf && t->len < t->size ? t->buf + t->len : NULL;
    size_t room = at ? t->size - t->len : 0;
    int n = vsnprintf(at, room, fmt, ap);
    va_end(ap);
    if (n > 0) t->len += (size_t)n;
}

static const char *const action_letters[BRG_ACTION_TYPE_COUNT] = {
    [BRG_ACTION_FORWARD] = "F",          [BRG_ACTION_BACKWARD] = "B",  [BRG_ACTION_BACKWARD_INPUT] = "I",
    [BRG_ACTION_BACKWARD_WEIGHT] = "W",  [BRG_ACTION_SEND_ACT] = "SA", [BRG_ACTION_RECV_ACT] = "RA",
    [BRG_ACTION_SEND_GRAD] = "SG",       [BRG_ACTION_RECV_GRAD] = "RG",
};

static void tb_action(textbuf *t, const brg_action *a, int chunks)
{
    if ((int)a->type < 0 || a->type >= BRG_ACTION_TYPE_COUNT) {
        tb_printf(t, "?%d", (int)a->type);
        return;
    }
    tb_printf(t, "%s%d", action_letters[a->type], a->micro_batch);
    if (chunks > 1) tb_printf(t, ".%d", a->chunk);
    if (a->type == BRG_ACTION_SEND_ACT || a->type == BRG_ACTION_SEND_GRAD) tb_printf(t, ">%d", a->peer);
    if (a->type == BRG_ACTION_RECV_ACT || a->type == BRG_ACTION_RECV_GRAD) tb_printf(t, "<%d", a->peer);
}

size_t brg_action_format(const brg_action *action, int chunks, char *buf, size_t size)
{
    textbuf t = {.buf = buf, .size = size, .len = 0};
    if (buf && size) buf[0] = '\0';
    if (action) tb_action(&t, action, chunks);
    return t.len;
}

size_t brg_schedule_format(const brg_schedule *s, unsigned flags, char *buf, size_t size)
{
    textbuf t = {.buf = buf, .size = size, .len = 0};
    if (buf && size) buf[0] = '\0';
    if (!s) return 0;
    int width = snprintf(NULL, 0, "dev%d:", s->p - 1);
    for (int d = 0; d < s->p; d++) {
        char label[32];
        snprintf(label, sizeof label, "dev%d:", d);
        tb_printf(&t, "%-*s", width, label);
        for (int i = 0; i < s->count[d]; i++) {
            const brg_action *a = &s->actions[d][i];
            if (brg_action_is_comm(a->type) && !(flags & BRG_SCHEDULE_FORMAT_COMM)) continue;
            tb_printf(&t, " ");
            tb_action(&t, a, s->v);
        }
        tb_printf(&t, "\n");
    }
    return t.len;
}
