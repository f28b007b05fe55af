/* brigade partitioner: private declarations shared by cost.c (the per-block
 * cost model), partition.c (the cut search) and plan.c (plans). Nothing
 * here is part of the public API.
 *
 * The cost model answers, for any block range [i, j] run as one stage at a
 * fixed micro-batch size, an upper bound of that stage's peak memory with
 * k micro-batches in flight, in O(1) amortized per block added to the range
 * (see brg_cost_range_extend), and its forward/backward FLOPs. The bound
 * and why it holds are in docs/planning.md ("The estimate"). */
#ifndef BRIGADE_PARTITIONER_IMPL_H
#define BRIGADE_PARTITIONER_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "brigade/device.h"
#include "brigade/model.h"
#include "brigade/plan.h"
#include "brigade/schedule.h"
#include "brigade/train.h"
#include "base/internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What one block costs at the cost model's micro-batch size. Bytes are
 * arena bytes (every tensor rounded with brg_arena_rounded). */
typedef struct brg_cost_block {
    size_t weights, grads, optimizer; /* its three persistent slabs, each rounded */
    int64_t params;                   /* trainable parameters */
    int64_t bn_widest;                /* channels of its widest BatchNorm (0: none) */
    size_t stash_new;   /* stash bytes charged to this block: tensors whose first backward reader (from
                         * the left) is here, BatchNorm statistics, the loss's probabilities and labels */
    size_t peak_fwd;    /* peak of one micro-batch's forward through the block run alone as a stage */
    size_t peak_bwd;    /* ... of its backward (output gradients received first) */
    size_t inside_fwd, inside_bwd; /* the same when the block is not first in its range */
    /* ... of its input-gradient part when the backward is split (ZB-H1),
     * [not first in its range][not last in its range] */
    size_t bwd_in[2][2];
    size_t residue;     /* kept from the input part for the weight part: conv2d/linear x and dy */
    size_t ws_weight;   /* largest weight-gradient workspace of its layers */
    size_t in_bytes;    /* tensors entering the block (its inputs if a stage starts here) */
    size_t out_bytes;   /* tensors leaving it (0 for the last block) */
    double fwd_flops, bwd_in_flops, bwd_w_flops;
} brg_cost_block;

/* A stash tensor read backward by blocks prev < cur with none between:
 * counted once in a range holding both (see brg_cost_range_extend). */
typedef struct brg_cost_pair {
    int prev, cur;
    size_t bytes;
} brg_cost_pair;

typedef struct brg_cost {
    const brg_model *model;
    int n_blocks;
    int micro_batch;
    brg_cost_block *blocks;
    brg_cost_pair *pairs;  /* sorted by cur */
    int n_pairs;
    int *pair_start;       /* [n_blocks + 1]: pairs with cur == b are [pair_start[b], pair_start[b+1]) */
    size_t loss_stash;     /* probabilities and labels of one micro-batch */
    int sync_batchnorm;    /* ranges hold synchronized BatchNorm's sums (train/syncbn.c) */
} brg_cost;

/* Build the cost model of a finalized model for micro-batches of
 * micro_batch samples, the optimizer's state count and the workspace sizes
 * of target's backend (through a planning device), with or without
 * synchronized BatchNorm. */
brg_status brg_cost_create(const brg_model *model, int micro_batch, const brg_optimizer_config *optimizer,
                           const brg_device_spec *target, int sync_batchnorm, brg_cost **out);
void brg_cost_destroy(brg_cost *cost);

/* A block range [first, last] being grown one block at a time. */
typedef struct brg_cost_range {
    int first, last;     /* last = first - 1 while empty */
    size_t persistent;   /* weights + grads + optimizer slabs + receive buffers + sync */
    /* synchronized BatchNorm's buffer: BRG_BATCHNORM_SYNC_VECTORS x the widest BatchNorm's channels */
    size_t sync;
    int64_t bn_widest;
    size_t receive;      /* receive buffers: BRG_CHANNEL_CAPACITY_DEFAULT messages in at first (receive_in)
                          * and out at last (receive_out), unless that is the model's edge; with
                          * either, the int32 flag of the messages' finite check */
    size_t receive_in, receive_out;
    size_t weights, grads, optimizer;
    int64_t params;
    size_t stash;        /* S: kept per micro-batch between forward and backward */
    size_t residue;      /* R: kept per micro-batch between the split backward's two parts */
    /* peak[b] below is the block's peak_* for b = first, inside_* after */
    size_t work_fwd;     /* max over b of S(first..b-1) + peak_fwd[b] */
    size_t work_bwd;     /* max over b of S(first..b-1) + peak_bwd[b] */
    size_t work_bwd_in;  /* max over b of S(first..b-1) + R(b+1..last) + bwd_in[b] */
    size_t bwd_in_closed, bwd_in_pending; /* its terms for b < last, and b = last as if not last */
    size_t ws_weight;    /* max ws_weight */
    size_t max_peak_fwd; /* max peak_fwd over b > first */
    double fwd_flops, bwd_in_flops, bwd_w_flops;
} brg_cost_range;

void brg_cost_range_start(const brg_cost *cost, int first, brg_cost_range *r);
/* Add block r->last + 1 (which must exist). */
void brg_cost_range_extend(const brg_cost *cost, brg_cost_range *r);
/* The range [first, last] from scratch. */
void brg_cost_range_of(const brg_cost *cost, int first, int last, brg_cost_range *r);

/* What one micro-batch keeps between its forward and its (first) backward
 * action: the stash, or with recomputation the range's inputs (and on the
 * last stage the loss's probabilities and labels). Between the two parts of
 * a split backward it keeps r->residue instead. */
size_t brg_cost_range_rest(const brg_cost *cost, const brg_cost_range *r, int recompute);

/* The kinds of computation a micro-batch can be in. */
enum { BRG_HOLD_FORWARD = 0, BRG_HOLD_BACKWARD, BRG_HOLD_BACKWARD_INPUT, BRG_HOLD_BACKWARD_WEIGHT };

/* One moment of a stage's action list: one micro-batch runs a computation
 * of `type` while `rest` other micro-batches of the stage wait between
 * their forward and their backward and `residue` between the two parts of
 * a split backward. A stage's peak is the largest over its moments of
 * rest x rest bytes + residue x residue bytes + the working micro-batch's
 * memory (brg_cost_range_working), on top of the persistent memory. */
typedef struct brg_hold {
    int type, rest, residue;
} brg_hold;

/* The largest memory of the one micro-batch running a computation of
 * `type`, its own stash included: see docs/planning.md. */
size_t brg_cost_range_working(const brg_cost *cost, const brg_cost_range *r, int recompute, int type);

/* Upper bound of the peak of a stage running range r through the moments
 * holds[0..n_holds). Grows with the range when recompute is 0. */
size_t brg_cost_range_peak(const brg_cost *cost, const brg_cost_range *r, const brg_hold *holds, int n_holds,
                           int recompute);

/* A lower bound of brg_cost_range_peak that grows with the range in both
 * modes, for the search to know when longer ranges cannot fit. */
size_t brg_cost_range_peak_floor(const brg_cost *cost, const brg_cost_range *r, const brg_hold *holds, int n_holds,
                                 int recompute);

/* Forward + backward FLOPs of one micro-batch through r, with the
 * recomputed forward when recompute. */
double brg_cost_range_flops(const brg_cost_range *r, int recompute);

/* ---- partition search (partition.c) ---- */

/* The search problem: n_blocks blocks onto n_stages virtual stages in
 * order, stage s with a memory budget, an in-flight count and a FLOP
 * scale (seconds per FLOP of its device). */
typedef struct brg_partition_problem {
    const brg_cost *cost;
    int n_stages;
    const size_t *budget;     /* [n_stages] */
    brg_hold *const *holds;   /* [n_stages]: each stage's moments (brg_schedule_holds) */
    const int *n_holds;       /* [n_stages] */
    brg_recompute recompute;
    double seconds_per_flop;
} brg_partition_problem;

/* The moments of chunk `chunk` of device `device` in its action list, with
 * only that chunk's micro-batches counted (with one chunk per device: all
 * of them), duplicates and dominated moments left out. *holds is
 * allocated (free()). */
brg_status brg_schedule_holds(const brg_schedule *schedule, int device, int chunk, brg_hold **holds, int *n_holds);

/* The receive buffers of a device holding ranges[0..v): the largest
 * message of each direction, as the program allocates them. */
size_t brg_cost_device_receive(const brg_cost_range *ranges, const brg_schedule *s, int device);

/* Upper bound of a device's peak over its whole action list, all chunks
 * together: ranges[c] is chunk c's range and recompute[c] its mode. */
brg_status brg_device_estimate(const brg_cost *cost, const brg_schedule *schedule, int device,
                               const brg_cost_range *ranges, const unsigned char *recompute, size_t *bytes);

typedef struct brg_partition {
    int feasible;
    double bottleneck;       /* the slowest stage's seconds per micro-batch */
    int *last;               /* [n_stages]: last block of each stage */
    unsigned char *recompute; /* [n_stages] */
} brg_partition;

/* Whether range [first, last] fits stage s, and with or without
 * recomputation (*rc), and its time. Returns 0 if it fits neither way. */
int brg_partition_range_fits(const brg_partition_problem *pb, int s, const brg_cost_range *r, int *rc,
                             double *seconds);

/* Find the cuts minimizing the bottleneck subject to every stage's
 * estimated peak within its budget. out->last and out->recompute must have
 * room for n_stages entries. out->feasible = 0 when no cut fits. */
brg_status brg_partition_search(const brg_partition_problem *pb, brg_plan_search method, brg_partition *out);

/* Fill out for given cuts (last[] already in out), choosing recomputation
 * per stage as the problem allows; feasible says whether all fit. */
void brg_partition_evaluate(const brg_partition_problem *pb, brg_partition *out);

/* Replace cost's per-block FLOPs by the profile's times scaled to the cost
 * model's micro-batch, expressed in FLOPs at device_flops (so that
 * flops / device_flops is the measured time everywhere). */
void brg_profile_apply(const brg_profile *profile, brg_cost *cost, double device_flops);
/* A profile of n_layers zero times (NULL when out of memory, the error
 * set), and a copy of one. */
brg_profile *brg_profile_new(int n_layers, int micro_batch);
brg_profile *brg_profile_copy(const brg_profile *profile);

/* The CPU calibration (plan/calibrate.c): per layer kind, layout (plain
 * or channel-blocked; for a convolution on small planes, its kernel taps:
 * base/conv-taps-rule.h) and part (forward, input gradient, weight gradient)
 * the rates of the terms a layer's time is made of (seconds per FLOP, per
 * unit of size, per parameter, per call), from the cache file or measured
 * now with one of sharing_devices shares of the cores (and then cached).
 * block is the channel block the CPU device lays tensors out by (0: all
 * plain), cache the file ("" when neither XDG_CACHE_HOME nor HOME is set),
 * cached whether the rates came from it. */
#define BRG_CPU_SPEED_TERMS 4
enum { BRG_CPU_SPEED_PLAIN, BRG_CPU_SPEED_BLOCKED, BRG_CPU_SPEED_TAPS, BRG_CPU_SPEED_LAYOUTS };
typedef struct brg_cpu_speed {
    double rate[BRG_LAYER_KIND_COUNT][BRG_CPU_SPEED_LAYOUTS][3][BRG_CPU_SPEED_TERMS];
    int block;
    int cached;
    char cache[512];
} brg_cpu_speed;
brg_status brg_cpu_speed_get(int sharing_devices, const brg_optimizer_config *optimizer, brg_cpu_speed *speed);
/* A profile of model at micro-batch u from the rates: each layer's terms
 * times the rates of its kind in the layout it runs in (the whole model's,
 * model/layout-rule.h). */
brg_status brg_cpu_speed_profile(const brg_model *model, int u, const brg_cpu_speed *speed, brg_profile **out);

/* Check a plan's model and options before anything is planned
 * (options.c): BRG_ERR_INVALID_ARGUMENT with a message naming the option. */
brg_status brg_plan_check_options(const brg_model *model, const brg_plan_options *options);

/* Model chunks per device of schedule kind: chunks (0: 2) for interleaved,
 * else 1. */
int brg_plan_chunks_of(brg_schedule_kind kind, int chunks);

#ifdef __cplusplus
}
#endif

#endif /* BRIGADE_PARTITIONER_IMPL_H */
