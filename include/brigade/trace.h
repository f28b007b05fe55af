/* brigade: timelines of pipeline steps, written as Chrome traces and SVG.
 *
 * A timeline is a schedule (brigade/schedule.h) with a start and an end time
 * for every action of every device: measured by a pipeline
 * (brg_pipeline_action_times) or simulated (brg_schedule_sim's start and
 * end). The writers below turn it into
 *   - a Chrome trace / Perfetto JSON file ("traceEvents", one track per
 *     device, every action one complete event ("ph": "X") named by its kind
 *     with the micro-batch and chunk in "args"), which chrome://tracing and
 *     ui.perfetto.dev open;
 *   - an SVG picture: devices as rows, actions as coloured boxes labelled
 *     with their micro-batch, idle time left blank, a time axis;
 * and a list of per-device memory figures into an SVG bar chart of peak
 * memory (measured and planned) against capacity and what the headroom
 * leaves of it.
 */
#ifndef BRIGADE_TRACE_H
#define BRIGADE_TRACE_H

#include <stddef.h>

#include "brigade/schedule.h"
#include "brigade/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct brg_timeline {
    const brg_schedule *schedule;
    /* start[d][i], end[d][i]: action i of device d (the schedule's order),
     * end >= start >= 0. */
    const double *const *start;
    const double *const *end;
    /* "s" for measured times in seconds (written as microseconds in the
     * trace), "unit" for simulated unit costs; NULL is "s". */
    const char *time_unit;
    const char *title;        /* shown at the top of the SVG and in the trace's metadata; may be NULL */
    const char *const *device_names; /* per device, e.g. "cpu:0"; NULL for "device d" */
} brg_timeline;

/* Write the timeline as Chrome trace JSON to path. BRG_ERR_INVALID_ARGUMENT
 * for a timeline with missing or inconsistent times, BRG_ERR_IO (with the
 * path and the reason) when the file cannot be written. */
BRG_API brg_status brg_timeline_write_chrome(const brg_timeline *timeline, const char *path);

/* Write the timeline as an SVG picture to path; errors as above. */
BRG_API brg_status brg_timeline_write_svg(const brg_timeline *timeline, const char *path);

/* One device of a memory chart. */
typedef struct brg_memory_bar {
    const char *name;     /* "cpu:0" */
    size_t capacity;      /* > 0 */
    size_t planned;       /* the plan's peak; 0 if none */
    size_t measured;      /* the measured arena peak; 0 if none */
    size_t persistent;    /* weights + gradients + optimizer state (drawn as the bar's lower part); may be 0 */
    size_t budget;        /* capacity less the plan's headroom (a dashed line); 0 or >= capacity: none */
} brg_memory_bar;

/* Write a bar chart of peak memory per device against its capacity to path
 * as SVG. Errors as above. */
BRG_API brg_status brg_memory_chart_write_svg(const char *title, const brg_memory_bar *bars, int count,
                                              const char *path);

#ifdef __cplusplus
}
#endif

#endif /* BRIGADE_TRACE_H */
