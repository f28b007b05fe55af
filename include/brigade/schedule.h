/* brigade: pipeline schedules.
 *
 * One representation serves the verifier, the simulator, the memory planner
 * and the executor: per device (pipeline stage worker) an ordered array of
 * actions that the device runs one after the other.
 *
 * Terms. p devices, m micro-batches, v model chunks per device. The model is
 * cut into p*v virtual stages; chunk c holds virtual stages c*p .. c*p+p-1.
 * Where a schedule places them is its placement:
 *   - loop (every kind but the V-shapes): stage j = c*p + d is chunk c of
 *     device d (Megatron-LM's interleaved placement; with v = 1 stage j is
 *     device j);
 *   - V (zb-v, v-half, v-min; 2 chunks): chunk 0 runs down the devices and
 *     chunk 1 back up, stage c*p + d on device d for even c and on device
 *     p-1-d for odd c, so device 0 holds the first and the last stage.
 * brg_schedule_stage_of and brg_schedule_device_of convert. Micro-batch b's
 * activation flows from virtual stage j to j+1, its gradient from j+1 back
 * to j. Where two consecutive virtual stages sit on different devices the
 * lists carry an explicit SEND on one side and a RECV on the other; where
 * they sit on the same device (p = 1 with v > 1, and the V's turn on device
 * p-1) the tensor is handed over in place and no message exists: program
 * order alone carries the dependency.
 *
 * A schedule is immutable once built. See docs/schedules.md for each
 * schedule's construction, its bubble and its in-flight counts.
 */
#ifndef BRIGADE_SCHEDULE_H
#define BRIGADE_SCHEDULE_H

#include <stddef.h>

#include "brigade/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Limits: p*v virtual stages, and virtual stages x micro-batches (which
 * bounds the number of actions and the verifier's tables). */
#define BRG_SCHEDULE_MAX_VIRTUAL_STAGES 1024
#define BRG_SCHEDULE_MAX_UNITS (1 << 20)

typedef enum brg_schedule_kind {
    BRG_SCHEDULE_GPIPE = 0,       /* "gpipe": all forwards, then all backwards */
    BRG_SCHEDULE_1F1B = 1,        /* "1f1b": one-forward-one-backward with flush (PipeDream-Flush) */
    BRG_SCHEDULE_INTERLEAVED = 2, /* "interleaved": interleaved 1F1B, v >= 2 chunks per device */
    BRG_SCHEDULE_ZB_H1 = 3,       /* "zb-h1": zero-bubble H1, backward split into B and W */
    BRG_SCHEDULE_ZB_V = 4,        /* "zb-v": V placement, split backward, 1F1B's activation memory */
    BRG_SCHEDULE_V_HALF = 5,      /* "v-half": V placement, about half of 1F1B's activation memory */
    BRG_SCHEDULE_V_MIN = 6,       /* "v-min": V placement, about a third of 1F1B's activation memory */
    BRG_SCHEDULE_ZB_H2 = 7,       /* "zb-h2": zero-bubble H2, split backward, twice 1F1B's activation memory */
    BRG_SCHEDULE_CUSTOM = 8       /* "custom": lists given to brg_schedule_create */
} brg_schedule_kind;

/* The kinds brg_schedule_build makes are 0 .. BRG_SCHEDULE_KIND_COUNT - 1. */
#define BRG_SCHEDULE_KIND_COUNT 8

/* "gpipe", "1f1b", "interleaved", "zb-h1", "zb-v", "v-half", "v-min",
 * "zb-h2", "custom"; "unknown" otherwise. Never NULL. */
BRG_API const char *brg_schedule_kind_name(brg_schedule_kind kind);

/* Parse one of the buildable names (case-insensitive) into *kind.
 * Anything else is BRG_ERR_INVALID_ARGUMENT with a message that lists them. */
BRG_API brg_status brg_schedule_kind_parse(const char *name, brg_schedule_kind *kind);

/* 1 for the kinds with the V placement (zb-v, v-half, v-min), 0 otherwise. */
BRG_API int brg_schedule_kind_is_v(brg_schedule_kind kind);

/* The chunks per device a kind runs with, given the chunks asked for
 * (0: the default): interleaved takes chunks (default 2), the V-shapes 2,
 * every other kind 1. */
BRG_API int brg_schedule_kind_chunks(brg_schedule_kind kind, int chunks);

/* How many actions, all devices together, brg_schedule_build(kind,
 * devices, micro_batches, chunks) makes, without building it (to size what
 * a schedule's output will take first): per virtual stage and micro-batch a
 * forward and a backward (B and W where the backward is split), and per
 * boundary between stages on different devices a send and a receive each
 * way. chunks as brg_schedule_kind_chunks takes it. 0 for a kind it cannot
 * build, fewer than 1 device or micro-batch, or more than
 * BRG_SCHEDULE_MAX_VIRTUAL_STAGES virtual stages or BRG_SCHEDULE_MAX_UNITS
 * of them times micro-batches (no schedule is built past those). */
BRG_API long long brg_schedule_kind_actions(brg_schedule_kind kind, int devices, int micro_batches, int chunks);

typedef enum brg_action_type {
    BRG_ACTION_FORWARD = 0,         /* F: forward of (micro_batch, chunk) */
    BRG_ACTION_BACKWARD = 1,        /* B+W together: input and weight gradients */
    BRG_ACTION_BACKWARD_INPUT = 2,  /* B alone: the input gradient (what the previous stage waits for) */
    BRG_ACTION_BACKWARD_WEIGHT = 3, /* W alone: the weight gradient, after B */
    BRG_ACTION_SEND_ACT = 4,        /* send this chunk's output activation to virtual stage j+1 */
    BRG_ACTION_RECV_ACT = 5,        /* receive this chunk's input activation from virtual stage j-1 */
    BRG_ACTION_SEND_GRAD = 6,       /* send this chunk's input gradient to virtual stage j-1 */
    BRG_ACTION_RECV_GRAD = 7,       /* receive this chunk's output gradient from virtual stage j+1 */
    BRG_ACTION_TYPE_COUNT = 8
} brg_action_type;

/* One step of one device. chunk is the chunk on the device running the
 * action (for a RECV: the chunk the data is for; for a SEND: the chunk that
 * produced it), so the action's virtual stage is chunk * p + device. peer is
 * the device at the other end of a SEND or RECV and -1 for computations. */
typedef struct brg_action {
    brg_action_type type;
    int micro_batch;
    int chunk;
    int peer;
} brg_action;

typedef struct brg_schedule brg_schedule;

/* Build a schedule of the given kind for p = devices, m = micro_batches and
 * v = chunks. chunks must be 1 except for BRG_SCHEDULE_INTERLEAVED, which
 * needs chunks >= 2, and the V-shapes, which need 2. Every m >= 1 is
 * accepted by every kind (interleaved included: see docs/schedules.md for
 * how a remainder m % p != 0 is placed).
 * Fails with BRG_ERR_INVALID_ARGUMENT and a message for values out of range
 * or beyond the limits above, BRG_ERR_HOST_MEMORY if allocation fails. The
 * result passes brg_schedule_verify with any channel capacity >= 1. */
BRG_API brg_status brg_schedule_build(brg_schedule_kind kind, int devices, int micro_batches, int chunks,
                                      brg_schedule **out);

/* The same, with the order of the memory-capped kinds (zb-h2 and the
 * V-shapes) built for these stage times (brg_schedule_times below; NULL:
 * every computation 1) rather than for equal ones: each device runs, when
 * it is free, the ready computation the construction picks (see
 * docs/schedules.md), and of the constructions the one shortest at these
 * times is kept. The cap on what a device holds is the same at any times.
 * The other kinds ignore times. BRG_ERR_INVALID_ARGUMENT for times with a
 * missing array or a negative or non-finite value. */
struct brg_schedule_times;
BRG_API brg_status brg_schedule_build_timed(brg_schedule_kind kind, int devices, int micro_batches, int chunks,
                                            const struct brg_schedule_times *times, brg_schedule **out);

/* A schedule from caller-given lists (kind BRG_SCHEDULE_CUSTOM), for
 * experiments and tests: counts[d] actions in actions[d] for each device d.
 * The lists are copied. Only ranges are checked here (type, micro_batch in
 * [0, m), chunk in [0, v), peer in [0, p) for sends and receives and -1
 * otherwise); whether the lists make a schedule is brg_schedule_verify's
 * job. A device may have no actions (counts[d] = 0, actions[d] ignored). */
BRG_API brg_status brg_schedule_create(int devices, int micro_batches, int chunks, const int *counts,
                                       const brg_action *const *actions, brg_schedule **out);

/* Accepts NULL. */
BRG_API void brg_schedule_destroy(brg_schedule *schedule);

BRG_API brg_schedule_kind brg_schedule_get_kind(const brg_schedule *schedule);
BRG_API int brg_schedule_devices(const brg_schedule *schedule);
BRG_API int brg_schedule_micro_batches(const brg_schedule *schedule);
BRG_API int brg_schedule_chunks(const brg_schedule *schedule);

/* The placement (see the top of this file): the virtual stage that chunk
 * runs on device, and the device that runs virtual stage j (its chunk is
 * j / p). -1 for a NULL schedule or an argument out of range. */
BRG_API int brg_schedule_stage_of(const brg_schedule *schedule, int device, int chunk);
BRG_API int brg_schedule_device_of(const brg_schedule *schedule, int stage);

/* Number of actions of device (0 if device is out of range). */
BRG_API int brg_schedule_action_count(const brg_schedule *schedule, int device);

/* Action index of device, or NULL if either is out of range. The pointer
 * lives as long as the schedule. */
BRG_API const brg_action *brg_schedule_action(const brg_schedule *schedule, int device, int index);

/* The largest number of micro-batches in flight on device, from the action
 * order alone: over every prefix of the device's list, the number of
 * forwards done minus the number of last backward actions done (BACKWARD,
 * or BACKWARD_WEIGHT where the backward is split: a micro-batch holds its
 * stash until its weight gradient is computed). chunk in [0, v) counts that
 * chunk only; chunk = -1 counts all chunks of the device together. This is
 * the number of stash slots the memory planner gives the stage. Returns -1
 * for a NULL schedule or an out-of-range device or chunk. */
BRG_API int brg_schedule_max_in_flight(const brg_schedule *schedule, int device, int chunk);

/* The index of device's last backward action (BACKWARD, BACKWARD_INPUT or
 * BACKWARD_WEIGHT) of chunk in its list: after it the chunk's gradients of
 * a step are final. -1 when there is none or an argument is out of range. */
BRG_API int brg_schedule_last_backward(const brg_schedule *schedule, int device, int chunk);

/* Proves the schedule complete and free of deadlock; returns BRG_OK, or
 * BRG_ERR_FORMAT with the reason in why (if why is not NULL and why_size > 0,
 * truncated to fit) and in brg_last_error().
 *
 * Complete: every virtual stage runs exactly one FORWARD and one backward
 * (BACKWARD, or BACKWARD_INPUT and BACKWARD_WEIGHT) of every micro-batch, in
 * the order F, then B, then W; a stage's F comes after its RECV_ACT (or,
 * for a same-device predecessor, after that stage's F) and before its
 * SEND_ACT; its B after its RECV_GRAD (or the same-device successor's B)
 * and before its SEND_GRAD; every cross-device boundary carries exactly one
 * SEND and one RECV per micro-batch and direction, with the right peers,
 * and there are no other messages.
 *
 * Deadlock-free: the devices run their lists in order; a RECV blocks until
 * its SEND has happened; a SEND blocks while its channel already holds
 * channel_capacity undelivered messages (a channel is one ordered pair of
 * devices and one direction: activations or gradients; messages are matched
 * by micro-batch and stage, not by arrival order). channel_capacity 0 means
 * unbounded. If the devices stop before all lists are done, the message
 * names every stuck device, the action it waits at and what it waits for.
 * Each channel has one writer and one reader, so whether the run finishes
 * does not depend on the order in which the devices are stepped.
 *
 * BRG_ERR_INVALID_ARGUMENT for a NULL schedule or a negative capacity. */
BRG_API brg_status brg_schedule_verify(const brg_schedule *schedule, int channel_capacity, char *why,
                                       size_t why_size);

/* Text of one action into buf (snprintf rules: returns the length the full
 * text has, writes at most size bytes including the NUL). chunks is the
 * schedule's v: above 1 the chunk is shown. Tokens, for micro-batch 3:
 *   F3 forward, B3 backward (B+W), I3 input gradient (the paper's B),
 *   W3 weight gradient, SA3>1 / RA3<0 send / receive activation to / from
 *   device 1 / 0, SG3>0 / RG3<1 send / receive gradient;
 *   with chunks: F3.1 is micro-batch 3 of chunk 1. */
BRG_API size_t brg_action_format(const brg_action *action, int chunks, char *buf, size_t size);

/* Include sends and receives in brg_schedule_format. */
#define BRG_SCHEDULE_FORMAT_COMM 1u

/* The schedule as text, one line per device ("dev0: F0 F1 B0 B1\n"), with
 * computations only unless flags has BRG_SCHEDULE_FORMAT_COMM. snprintf
 * rules as brg_action_format; a NULL schedule gives "". */
BRG_API size_t brg_schedule_format(const brg_schedule *schedule, unsigned flags, char *buf, size_t size);

/* ---- simulation ---- */

/* Durations, in any unit, per virtual stage j (arrays of p*v entries):
 * forward, backward_input (B) and backward_weight (W); an unsplit BACKWARD
 * takes backward_input + backward_weight. transfer[j] (p*v - 1 entries, or
 * NULL for all 0) is the time a message takes across boundary j -> j+1, in
 * either direction. Every value must be finite and >= 0. */
typedef struct brg_schedule_times {
    const double *forward;
    const double *backward_input;
    const double *backward_weight;
    const double *transfer;
} brg_schedule_times;

/* What brg_schedule_simulate found. One allocation; free it with
 * brg_schedule_sim_destroy. Per-device arrays have `devices` entries. */
typedef struct brg_schedule_sim {
    int devices, chunks;
    double makespan;        /* the latest end of any action */
    double bubble;          /* 1 - sum(busy) / (devices * makespan) */
    double *busy;           /* time spent computing (F, B, I, W) */
    double *idle;           /* per device 1 - busy / makespan: its bubble fraction */
    int *action_count;      /* as brg_schedule_action_count */
    double **start, **end;  /* [d][i]: when action i of device d began and ended */
    int *max_in_flight;     /* all chunks; equals brg_schedule_max_in_flight(s, d, -1) */
    int *max_in_flight_chunk; /* [d * chunks + c] */
    /* In flight over time, a step function per device: from step_time[d][k]
     * on (until the next step) the device holds step_count[d][k] micro-batches
     * (all chunks). A micro-batch enters when its forward starts and leaves
     * when its last backward action ends; step_time[d][0] = 0. */
    int *steps;
    double **step_time;
    int **step_count;
} brg_schedule_sim;

/* Event-driven run of the schedule: each device runs its list in order and
 * starts an action when the device is free and its inputs are there.
 * Computations take their duration; a SEND takes no device time (a copy
 * engine moves the data, so sends never hold up compute) and its message
 * arrives transfer time after it was issued; a RECV waits (without counting
 * as busy) until its message has arrived. The schedule must pass
 * brg_schedule_verify with unbounded channels, else BRG_ERR_FORMAT.
 * BRG_ERR_INVALID_ARGUMENT for missing or invalid times. */
BRG_API brg_status brg_schedule_simulate(const brg_schedule *schedule, const brg_schedule_times *times,
                                         brg_schedule_sim **out);

/* Accepts NULL. */
BRG_API void brg_schedule_sim_destroy(brg_schedule_sim *sim);

#ifdef __cplusplus
}
#endif

#endif /* BRIGADE_SCHEDULE_H */
