/* brigade: timelines of pipeline steps as Chrome traces and SVG pictures,
 * and peak memory per device as an SVG bar chart (brigade/trace.h).
 *
 * The writers only read the timeline; everything is built in memory first
 * (the trace with jansson, the SVG in a growing buffer) and then written
 * in one go, so a failed write names the path and the reason and a partly
 * built picture is never left half-written by a formatting error. */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brigade/arena.h"
#include "brigade/trace.h"
#include "base/internal.h"

/* ---- checks shared by the writers ---- */

static int unit_is_seconds(const brg_timeline *t) { return !t->time_unit || strcmp(t->time_unit, "s") == 0; }

/* BRG_OK when every action of every device has finite times with
 * end >= start >= 0; sets *makespan to the latest end. */
static brg_status check_timeline(const brg_timeline *t, const char *path, double *makespan)
{
    if (!t || !path) return brg_error(BRG_ERR_INVALID_ARGUMENT, "timeline writer: timeline and path must be given");
    if (!t->schedule || !t->start || !t->end)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "timeline for %s: the schedule and the start and end times must "
                                                   "be given", path);
    if (t->time_unit && strcmp(t->time_unit, "s") != 0 && strcmp(t->time_unit, "unit") != 0)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "timeline for %s: time unit '%s' is neither \"s\" nor \"unit\"",
                         path, t->time_unit);
    const int p = brg_schedule_devices(t->schedule);
    double last = 0.0;
    for (int d = 0; d < p; d++) {
        const int n = brg_schedule_action_count(t->schedule, d);
        if (n > 0 && (!t->start[d] || !t->end[d]))
            return brg_error(BRG_ERR_INVALID_ARGUMENT, "timeline for %s: device %d has %d actions but no times",
                             path, d, n);
        for (int i = 0; i < n; i++) {
            const double s = t->start[d][i], e = t->end[d][i];
            if (!isfinite(s) || !isfinite(e) || s < 0.0 || e < s)
                return brg_error(BRG_ERR_INVALID_ARGUMENT,
                                 "timeline for %s: action %d of device %d runs from %g to %g; times must be finite "
                                 "with end >= start >= 0", path, i, d, s, e);
            if (e > last) last = e;
        }
    }
    *makespan = last;
    return BRG_OK;
}

static const char *device_name(const brg_timeline *t, int d, char *buf, size_t size)
{
    if (t->device_names && t->device_names[d]) return t->device_names[d];
    snprintf(buf, size, "device %d", d);
    return buf;
}

/* Kind names as the trace shows them, and whether the action computes. */
static const char *action_kind_name(brg_action_type type)
{
    switch (type) {
    case BRG_ACTION_FORWARD: return "forward";
    case BRG_ACTION_BACKWARD: return "backward";
    case BRG_ACTION_BACKWARD_INPUT: return "backward-input";
    case BRG_ACTION_BACKWARD_WEIGHT: return "weight-gradient";
    case BRG_ACTION_SEND_ACT: return "send-activation";
    case BRG_ACTION_RECV_ACT: return "recv-activation";
    case BRG_ACTION_SEND_GRAD: return "send-gradient";
    case BRG_ACTION_RECV_GRAD: return "recv-gradient";
    default: return "unknown";
    }
}

static int is_compute(brg_action_type type) { return type <= BRG_ACTION_BACKWARD_WEIGHT; }

/* ---- Chrome trace ---- */

static int add(json_t *obj, const char *key, json_t *value)
{
    return value && json_object_set_new(obj, key, value) == 0;
}

static int append(json_t *arr, json_t *value) { return value && json_array_append_new(arr, value) == 0; }

/* A metadata event (process or thread name, sort index). */
static json_t *meta_event(const char *name, int tid, const char *key, json_t *value)
{
    json_t *e = json_object(), *args = json_object();
    int ok = e && args && add(e, "name", json_string(name)) && add(e, "ph", json_string("M")) &&
             add(e, "pid", json_integer(0)) && (tid < 0 || add(e, "tid", json_integer(tid))) && add(args, key, value);
    if (ok && add(e, "args", args)) return e;
    json_decref(args);
    json_decref(e);
    return NULL;
}

static json_t *action_event(const brg_timeline *t, int d, int i, double scale)
{
    const brg_schedule *s = t->schedule;
    const int v = brg_schedule_chunks(s);
    const brg_action *a = brg_schedule_action(s, d, i);
    char label[48];
    brg_action_format(a, v, label, sizeof label);
    json_t *e = json_object(), *args = json_object();
    int ok = e && args && add(e, "name", json_string(action_kind_name(a->type))) &&
             add(e, "cat", json_string(is_compute(a->type) ? "compute" : "transfer")) &&
             add(e, "ph", json_string("X")) && add(e, "pid", json_integer(0)) && add(e, "tid", json_integer(d)) &&
             add(e, "ts", json_real(t->start[d][i] * scale)) &&
             add(e, "dur", json_real((t->end[d][i] - t->start[d][i]) * scale)) &&
             add(args, "micro_batch", json_integer(a->micro_batch)) && add(args, "chunk", json_integer(a->chunk)) &&
             add(args, "virtual_stage", json_integer(brg_schedule_stage_of(s, d, a->chunk))) &&
             add(args, "action", json_string(label)) && (a->peer < 0 || add(args, "peer", json_integer(a->peer)));
    if (ok && add(e, "args", args)) return e;
    json_decref(args);
    json_decref(e);
    return NULL;
}

brg_status brg_timeline_write_chrome(const brg_timeline *t, const char *path)
{
    double makespan;
    BRG_CHECK(check_timeline(t, path, &makespan));
    const brg_schedule *s = t->schedule;
    const int p = brg_schedule_devices(s);
    /* The trace format counts microseconds; simulated unit costs are shown
     * as milliseconds (1 unit = 1000 "us") so the viewer's labels stay short. */
    const double scale = unit_is_seconds(t) ? 1e6 : 1e3;
    json_t *root = json_object(), *events = json_array(), *other = json_object();
    int ok = root && events && other;
    ok = ok && add(other, "title", json_string(t->title ? t->title : "brigade timeline")) &&
         add(other, "time_unit",
             json_string(unit_is_seconds(t) ? "s (trace microseconds)" : "unit (1 unit = 1 trace millisecond)")) &&
         add(other, "schedule", json_string(brg_schedule_kind_name(brg_schedule_get_kind(s)))) &&
         add(other, "devices", json_integer(p)) &&
         add(other, "micro_batches", json_integer(brg_schedule_micro_batches(s))) &&
         add(other, "chunks", json_integer(brg_schedule_chunks(s))) && add(other, "makespan", json_real(makespan));
    ok = ok && append(events, meta_event("process_name", -1, "name", json_string(t->title ? t->title : "brigade")));
    for (int d = 0; ok && d < p; d++) {
        char buf[32];
        ok = append(events, meta_event("thread_name", d, "name", json_string(device_name(t, d, buf, sizeof buf)))) &&
             append(events, meta_event("thread_sort_index", d, "sort_index", json_integer(d)));
        const int n = brg_schedule_action_count(s, d);
        for (int i = 0; ok && i < n; i++) ok = append(events, action_event(t, d, i, scale));
    }
    char *text = NULL;
    if (ok && add(root, "traceEvents", events)) {
        events = NULL;
        ok = add(root, "displayTimeUnit", json_string("ms")) && add(root, "otherData", other);
        if (ok) other = NULL;
        text = ok ? json_dumps(root, JSON_COMPACT) : NULL;
    }
    json_decref(events);
    json_decref(other);
    json_decref(root);
    if (!text) return brg_error(BRG_ERR_HOST_MEMORY, "cannot build the trace for %s: out of host memory", path);
    /* Compact keeps big traces small; a final newline keeps tools happy. */
    size_t len = strlen(text);
    char *withnl = realloc(text, len + 2);
    if (!withnl) {
        free(text);
        return brg_error(BRG_ERR_HOST_MEMORY, "cannot build the trace for %s: out of host memory", path);
    }
    withnl[len] = '\n';
    withnl[len + 1] = '\0';
    brg_status st = brg_write_file(path, NULL, withnl, len + 1);
    free(withnl);
    return st;
}

/* ---- SVG text building ---- */

/* Text with &, <, >, " escaped for XML content and attributes. */
static void sb_escaped(brg_text *b, const char *text)
{
    for (const char *c = text ? text : ""; *c; c++) {
        switch (*c) {
        case '&': brg_text_printf(b, "&amp;"); break;
        case '<': brg_text_printf(b, "&lt;"); break;
        case '>': brg_text_printf(b, "&gt;"); break;
        case '"': brg_text_printf(b, "&quot;"); break;
        default:
            /* Control characters are not allowed in XML 1.0. */
            if ((unsigned char)*c < 0x20 && *c != '\t' && *c != '\n') brg_text_printf(b, "?");
            else brg_text_printf(b, "%c", *c);
        }
    }
}

/* An SVG document's start: the root element, the title (also drawn as a
 * heading at x = left), a white background. */
static void svg_begin(brg_text *b, double width, double height, const char *title, double left)
{
    brg_text_printf(b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    brg_text_printf(b,
              "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
              "font-family=\"sans-serif\" font-size=\"11\">\n",
              width, height, width, height);
    brg_text_printf(b, "<title>");
    sb_escaped(b, title);
    brg_text_printf(b, "</title>\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
    brg_text_printf(b, "<text x=\"%.0f\" y=\"18\" font-size=\"14\" font-weight=\"bold\">", left);
    sb_escaped(b, title);
    brg_text_printf(b, "</text>\n");
}

static brg_status sb_finish(brg_text *b, const char *path)
{
    brg_status st = b->failed ? brg_error(BRG_ERR_HOST_MEMORY, "cannot build %s: out of host memory", path)
                              : brg_write_file(path, NULL, b->data, b->len);
    free(b->data);
    return st;
}

/* A "nice" tick step (1, 2 or 5 x 10^k) giving about `want` ticks over span. */
static double tick_step(double span, int want)
{
    if (!(span > 0.0)) return 1.0;
    double raw = span / want, mag = pow(10.0, floor(log10(raw)));
    double f = raw / mag;
    return (f <= 1.0 ? 1.0 : f <= 2.0 ? 2.0 : f <= 5.0 ? 5.0 : 10.0) * mag;
}

/* A time for the axis: seconds as s, ms, us or ns; units as plain numbers. */
static void fmt_axis_time(double t, int seconds, double span, char *buf, size_t size)
{
    if (!seconds) snprintf(buf, size, "%g", t);
    else if (span >= 2.0) snprintf(buf, size, "%g s", t);
    else if (span >= 2e-3) snprintf(buf, size, "%g ms", t * 1e3);
    else if (span >= 2e-6) snprintf(buf, size, "%g us", t * 1e6);
    else snprintf(buf, size, "%g ns", t * 1e9);
}

/* A duration as s, ms, us or ns (not "0.0001234 us"); 0 as "0 s". */
static void fmt_duration(double t, int seconds, char *buf, size_t size)
{
    if (!seconds) snprintf(buf, size, "%.4g", t);
    else if (t >= 1.0 || t <= 0.0) snprintf(buf, size, "%.4g s", t);
    else if (t >= 1e-3) snprintf(buf, size, "%.4g ms", t * 1e3);
    else if (t >= 1e-6) snprintf(buf, size, "%.4g us", t * 1e6);
    else snprintf(buf, size, "%.4g ns", t * 1e9);
}

/* Box colours per action type (colour-blind friendly Tableau-like set). */
static const char *action_colour(brg_action_type type)
{
    switch (type) {
    case BRG_ACTION_FORWARD: return "#4e79a7";
    case BRG_ACTION_BACKWARD: return "#59a14f";
    case BRG_ACTION_BACKWARD_INPUT: return "#f28e2b";
    case BRG_ACTION_BACKWARD_WEIGHT: return "#b07aa1";
    case BRG_ACTION_SEND_ACT:
    case BRG_ACTION_SEND_GRAD: return "#555555";
    default: return "#aaaaaa";
    }
}

#define SVG_LEFT 90.0   /* room for the device names */
#define SVG_RIGHT 70.0  /* room for each row's idle share */
#define SVG_TOP 58.0    /* title and legend */
#define SVG_ROW 30.0
#define SVG_BOX 22.0    /* computation box height within a row */
#define SVG_COMM 4.0    /* height of the send/receive strip under the boxes */
#define SVG_AXIS 34.0

brg_status brg_timeline_write_svg(const brg_timeline *t, const char *path)
{
    double makespan;
    BRG_CHECK(check_timeline(t, path, &makespan));
    const brg_schedule *s = t->schedule;
    const int p = brg_schedule_devices(s), v = brg_schedule_chunks(s);
    const int seconds = unit_is_seconds(t);
    const double span = makespan > 0.0 ? makespan : 1.0;
    /* Wide enough that a box of the shortest kind of computation (on
     * average) has room for a label like "12.1", within bounds a browser
     * shows comfortably. */
    double sum[BRG_ACTION_TYPE_COUNT] = {0};
    int cnt[BRG_ACTION_TYPE_COUNT] = {0};
    for (int d = 0; d < p; d++)
        for (int i = 0; i < brg_schedule_action_count(s, d); i++) {
            const brg_action_type ty = brg_schedule_action(s, d, i)->type;
            sum[ty] += t->end[d][i] - t->start[d][i];
            cnt[ty]++;
        }
    double shortest = 0.0;
    for (int k = 0; k <= BRG_ACTION_BACKWARD_WEIGHT; k++)
        if (cnt[k] && sum[k] > 0.0 && (shortest == 0.0 || sum[k] / cnt[k] < shortest)) shortest = sum[k] / cnt[k];
    double plot = shortest > 0.0 ? span / shortest * 26.0 : 1000.0;
    plot = plot < 1000.0 ? 1000.0 : plot > 2400.0 ? 2400.0 : plot;
    const double xs = plot / span;
    const double width = SVG_LEFT + plot + SVG_RIGHT;
    const double height = SVG_TOP + p * SVG_ROW + SVG_AXIS;
    brg_text b = {0};
    svg_begin(&b, width, height, t->title ? t->title : "brigade timeline", SVG_LEFT);
    /* Legend: only the kinds this schedule uses. */
    int used[BRG_ACTION_TYPE_COUNT] = {0};
    for (int d = 0; d < p; d++)
        for (int i = 0; i < brg_schedule_action_count(s, d); i++) used[brg_schedule_action(s, d, i)->type] = 1;
    static const char *const legend_text[] = {"forward", "backward (B+W)", "input gradient (B)", "weight gradient (W)"};
    double lx = SVG_LEFT;
    brg_text_printf(&b, "<g class=\"legend\">\n");
    for (int k = 0; k <= BRG_ACTION_BACKWARD_WEIGHT; k++) {
        if (!used[k]) continue;
        brg_text_printf(&b, "<rect x=\"%.1f\" y=\"28\" width=\"12\" height=\"12\" fill=\"%s\"/>", lx,
                  action_colour((brg_action_type)k));
        brg_text_printf(&b, "<text x=\"%.1f\" y=\"38\">%s</text>\n", lx + 16, legend_text[k]);
        lx += 30 + 6.5 * (double)strlen(legend_text[k]);
    }
    if (used[BRG_ACTION_SEND_ACT] || used[BRG_ACTION_RECV_ACT]) {
        brg_text_printf(&b, "<rect x=\"%.1f\" y=\"32\" width=\"12\" height=\"%.0f\" fill=\"%s\"/>", lx, SVG_COMM,
                  action_colour(BRG_ACTION_SEND_ACT));
        brg_text_printf(&b, "<text x=\"%.1f\" y=\"38\">send (incl. waiting for room)</text>\n", lx + 16);
        lx += 210;
        brg_text_printf(&b, "<rect x=\"%.1f\" y=\"32\" width=\"12\" height=\"%.0f\" fill=\"%s\"/>", lx, SVG_COMM,
                  action_colour(BRG_ACTION_RECV_ACT));
        brg_text_printf(&b, "<text x=\"%.1f\" y=\"38\">receive (incl. waiting)</text>\n", lx + 16);
        lx += 160;
    }
    brg_text_printf(&b, "<text x=\"%.1f\" y=\"38\" fill=\"#666\">blank: idle</text>\n", lx);
    brg_text_printf(&b, "</g>\n");
    /* Time axis grid first, so the boxes draw over it. */
    const double step = tick_step(span, 8);
    const double axis_y = SVG_TOP + p * SVG_ROW;
    brg_text_printf(&b, "<g class=\"axis\" stroke=\"#dddddd\">\n");
    for (int k = 0; k * step <= span * (1 + 1e-9) && k < 100; k++) {
        const double x = SVG_LEFT + k * step * xs;
        brg_text_printf(&b, "<line x1=\"%.2f\" y1=\"%.0f\" x2=\"%.2f\" y2=\"%.0f\"/>", x, SVG_TOP - 4, x, axis_y + 4);
        char tl[32];
        fmt_axis_time(k * step, seconds, span, tl, sizeof tl);
        brg_text_printf(&b,
                        "<text x=\"%.2f\" y=\"%.0f\" text-anchor=\"middle\" stroke=\"none\" fill=\"#333\">%s</text>\n",
                        x, axis_y + 16, tl);
    }
    brg_text_printf(&b, "<text x=\"%.1f\" y=\"%.0f\" text-anchor=\"middle\" stroke=\"none\" fill=\"#333\">%s</text>\n",
              SVG_LEFT + plot / 2, axis_y + 30, seconds ? "time" : "time (unit costs: F = B = W = 1)");
    brg_text_printf(&b, "</g>\n");
    for (int d = 0; d < p; d++) {
        const double y = SVG_TOP + d * SVG_ROW;
        const int n = brg_schedule_action_count(s, d);
        char nbuf[32];
        double busy = 0.0;
        brg_text_printf(&b, "<g class=\"row\" data-device=\"%d\">\n", d);
        brg_text_printf(&b, "<rect x=\"%.0f\" y=\"%.1f\" width=\"%.2f\" height=\"%.0f\" "
                            "fill=\"#f7f7f7\" stroke=\"#cccccc\"/>\n",
                        SVG_LEFT, y, plot, SVG_BOX);
        brg_text_printf(&b, "<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\">", SVG_LEFT - 8, y + SVG_BOX / 2 + 4);
        sb_escaped(&b, device_name(t, d, nbuf, sizeof nbuf));
        brg_text_printf(&b, "</text>\n");
        for (int i = 0; i < n; i++) {
            const brg_action *a = brg_schedule_action(s, d, i);
            const double st0 = t->start[d][i], en = t->end[d][i];
            const double x = SVG_LEFT + st0 * xs, w = (en - st0) * xs;
            char label[48], d0[32], d1[32];
            brg_action_format(a, v, label, sizeof label);
            fmt_duration(st0, seconds, d0, sizeof d0);
            fmt_duration(en - st0, seconds, d1, sizeof d1);
            const int comp = is_compute(a->type);
            if (comp) busy += en - st0;
            /* Computations fill the row; transfers are a thin strip under it
             * so that waiting in a receive does not hide the idle time. */
            brg_text_printf(&b,
                      "<rect class=\"action %s\" data-device=\"%d\" data-index=\"%d\" data-micro-batch=\"%d\" "
                      "data-chunk=\"%d\" x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.0f\" fill=\"%s\"%s><title>",
                      action_kind_name(a->type), d, i, a->micro_batch, a->chunk, x, comp ? y : y + SVG_BOX + 1,
                      w > 0.0 ? w : 0.0, comp ? SVG_BOX : SVG_COMM, action_colour(a->type),
                      !comp ? "" : a->chunk % 2 ? " fill-opacity=\"0.7\" stroke=\"white\" stroke-width=\"0.5\""
                                                : " stroke=\"white\" stroke-width=\"0.5\"");
            sb_escaped(&b, label); /* "SA3>1" */
            brg_text_printf(&b, ": %s, micro-batch %d, chunk %d, at %s for %s</title></rect>\n",
                            action_kind_name(a->type), a->micro_batch, a->chunk, d0, d1);
            /* The micro-batch (".chunk" when interleaved) where it fits. */
            char text[24];
            int tl = v > 1 ? snprintf(text, sizeof text, "%d.%d", a->micro_batch, a->chunk)
                           : snprintf(text, sizeof text, "%d", a->micro_batch);
            if (comp && w >= 6.5 * tl + 2)
                brg_text_printf(&b, "<text x=\"%.2f\" y=\"%.1f\" text-anchor=\"middle\" fill=\"white\" "
                                    "font-size=\"10\">%s</text>\n",
                                x + w / 2, y + SVG_BOX / 2 + 4, text);
        }
        brg_text_printf(&b, "<text x=\"%.2f\" y=\"%.1f\" fill=\"#666\">idle %.0f%%</text>\n", SVG_LEFT + plot + 6,
                  y + SVG_BOX / 2 + 4, makespan > 0 ? 100.0 * (1.0 - busy / makespan) : 0.0);
        brg_text_printf(&b, "</g>\n");
    }
    brg_text_printf(&b, "</svg>\n");
    return sb_finish(&b, path);
}

/* ---- memory chart ---- */

#define MEM_LEFT 80.0
#define MEM_TOP 56.0
#define MEM_PLOT_H 240.0
#define MEM_GROUP 120.0
#define MEM_MIN_WIDTH 760.0 /* the legend's width */

/* The headroom's line: the capacity's red, dashed. */
#define BUDGET_STROKE "stroke=\"#d62728\" stroke-width=\"1.5\" stroke-dasharray=\"5 3\""

static int has_budget(const brg_memory_bar *m) { return m->budget > 0 && m->budget < m->capacity; }

brg_status brg_memory_chart_write_svg(const char *title, const brg_memory_bar *bars, int count, const char *path)
{
    if (!bars || count < 1 || !path)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "memory chart: bars, a count >= 1 and a path must be given");
    size_t top = 0;
    for (int i = 0; i < count; i++) {
        const brg_memory_bar *m = &bars[i];
        if (m->capacity == 0)
            return brg_error(BRG_ERR_INVALID_ARGUMENT, "memory chart for %s: device %d has no capacity", path, i);
        if (m->capacity > top) top = m->capacity;
        if (m->planned > top) top = m->planned;
        if (m->measured > top) top = m->measured;
    }
    const double ys = MEM_PLOT_H / (double)top;
    double width = MEM_LEFT + count * MEM_GROUP + 40;
    if (width < MEM_MIN_WIDTH) width = MEM_MIN_WIDTH;
    const double height = MEM_TOP + MEM_PLOT_H + 70;
    brg_text b = {0};
    svg_begin(&b, width, height, title ? title : "peak memory per device", MEM_LEFT);
    /* The legend names only what is drawn: a simulated bench has no
     * measured peaks, and its chart said 'measured peak' beside none. */
    int any_planned = 0, any_measured = 0, any_budget = 0;
    for (int i = 0; i < count; i++) {
        any_planned |= bars[i].planned > 0;
        any_measured |= bars[i].measured > 0;
        any_budget |= has_budget(&bars[i]);
    }
    double lx = MEM_LEFT;
    brg_text_printf(&b, "<g class=\"legend\">");
    if (any_planned) {
        brg_text_printf(&b, "<rect x=\"%.0f\" y=\"28\" width=\"12\" height=\"12\" fill=\"#4e79a7\"/>"
                            "<text x=\"%.0f\" y=\"38\">planned peak</text>", lx, lx + 16);
        lx += 110;
    }
    if (any_measured) {
        brg_text_printf(&b, "<rect x=\"%.0f\" y=\"28\" width=\"12\" height=\"12\" fill=\"#f28e2b\"/>"
                            "<text x=\"%.0f\" y=\"38\">measured peak</text>", lx, lx + 16);
        lx += 120;
    }
    brg_text_printf(&b, "<rect x=\"%.0f\" y=\"28\" width=\"12\" height=\"12\" fill=\"#333\" fill-opacity=\"0.35\"/>"
                        "<text x=\"%.0f\" y=\"38\">persistent (weights, gradients, optimizer)</text>"
                        "<line x1=\"%.0f\" y1=\"34\" x2=\"%.0f\" y2=\"34\" stroke=\"#d62728\" stroke-width=\"2\"/>"
                        "<text x=\"%.0f\" y=\"38\">capacity</text>",
                    lx, lx + 16, lx + 270, lx + 290, lx + 296);
    if (any_budget)
        brg_text_printf(&b, "<line x1=\"%.0f\" y1=\"34\" x2=\"%.0f\" y2=\"34\" %s/>"
                            "<text x=\"%.0f\" y=\"38\">capacity less headroom</text>",
                        lx + 350, lx + 370, BUDGET_STROKE, lx + 376);
    brg_text_printf(&b, "</g>\n");
    const double base = MEM_TOP + MEM_PLOT_H;
    /* Axis: 0 and the largest value. */
    char t0[32];
    brg_text_printf(&b, "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"#333\"/>\n", MEM_LEFT - 4, base,
              MEM_LEFT + count * MEM_GROUP, base);
    brg_text_printf(&b, "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"end\">0</text>\n", MEM_LEFT - 6, base + 4);
    brg_text_printf(&b, "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"end\">%s</text>\n", MEM_LEFT - 6, MEM_TOP + 4,
              brg_format_bytes(top, t0, sizeof t0));
    for (int i = 0; i < count; i++) {
        const brg_memory_bar *m = &bars[i];
        const double gx = MEM_LEFT + i * MEM_GROUP + 25;
        char c[32], pl[32], me[32];
        brg_text_printf(&b, "<g class=\"device\" data-device=\"%d\">\n", i);
        /* planned and measured side by side; the persistent part darkened */
        const size_t values[2] = {m->planned, m->measured};
        static const char *const colours[2] = {"#4e79a7", "#f28e2b"};
        static const char *const names[2] = {"planned", "measured"};
        for (int k = 0; k < 2; k++) {
            if (!values[k]) continue;
            const double h = (double)values[k] * ys, x = gx + k * 32;
            brg_text_printf(&b, "<rect class=\"%s\" x=\"%.1f\" y=\"%.2f\" width=\"30\" height=\"%.2f\" fill=\"%s\">"
                          "<title>%s peak %s</title></rect>\n",
                      names[k], x, base - h, h, colours[k], names[k], brg_format_bytes(values[k], pl, sizeof pl));
            /* the value above its bar, turned to fit the narrow column */
            brg_text_printf(&b, "<text x=\"%.1f\" y=\"%.2f\" font-size=\"10\" "
                                "transform=\"rotate(-90 %.1f %.2f)\">%s</text>\n",
                            x + 19, base - h - 4, x + 19, base - h - 4, pl);
            if (m->persistent) {
                const size_t pers = m->persistent < values[k] ? m->persistent : values[k];
                const double hp = (double)pers * ys;
                brg_text_printf(&b, "<rect x=\"%.1f\" y=\"%.2f\" width=\"30\" height=\"%.2f\" fill=\"#333\" "
                              "fill-opacity=\"0.35\"/>\n", x, base - hp, hp);
            }
        }
        if (has_budget(m)) {
            const double by = base - (double)m->budget * ys;
            brg_text_printf(&b, "<line class=\"budget\" x1=\"%.1f\" y1=\"%.2f\" x2=\"%.1f\" y2=\"%.2f\" %s>"
                                "<title>capacity less headroom %s</title></line>\n",
                            gx - 4, by, gx + 66, by, BUDGET_STROKE, brg_format_bytes(m->budget, c, sizeof c));
        }
        const double cy = base - (double)m->capacity * ys;
        brg_text_printf(&b,
                        "<line class=\"capacity\" x1=\"%.1f\" y1=\"%.2f\" x2=\"%.1f\" y2=\"%.2f\" stroke=\"#d62728\" "
                        "stroke-width=\"2\"><title>capacity %s</title></line>\n",
                        gx - 4, cy, gx + 66, cy, brg_format_bytes(m->capacity, c, sizeof c));
        brg_text_printf(&b, "<text x=\"%.1f\" y=\"%.0f\" text-anchor=\"middle\">", gx + 31, base + 16);
        sb_escaped(&b, m->name ? m->name : "");
        brg_text_printf(&b, "</text>\n");
        const size_t shown = m->measured ? m->measured : m->planned;
        brg_text_printf(&b, "<text x=\"%.1f\" y=\"%.0f\" text-anchor=\"middle\" fill=\"#555\">%.1f%% of</text>\n",
                  gx + 31, base + 32, 100.0 * (double)shown / (double)m->capacity);
        brg_text_printf(&b, "<text x=\"%.1f\" y=\"%.0f\" text-anchor=\"middle\" fill=\"#555\">%s</text>\n", gx + 31,
                  base + 46, brg_format_bytes(m->capacity, me, sizeof me));
        brg_text_printf(&b, "</g>\n");
    }
    brg_text_printf(&b, "</svg>\n");
    return sb_finish(&b, path);
}
