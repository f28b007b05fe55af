/* brigade: memory plans. Which blocks go on which device, what each device
 * will hold, and how fast the pipeline should run, without running it.
 *
 * A plan cuts a model into contiguous block ranges, one per device (v per
 * device for interleaved schedules), on an ordered list of devices whose
 * capacities may differ. The search minimizes the slowest stage's
 * forward+backward time (FLOP-based, or measured per layer with a profile)
 * subject to every device's peak memory
 * fitting its capacity less a headroom. It estimates peaks with a per-block
 * cost model (an upper bound, see docs/planning.md), then dry-runs every
 * device's real program (brg_program_dry_run), so the peak a plan reports
 * is the one training allocates, by construction; when a dry run exceeds
 * its budget the search runs again with that device's budget tightened.
 *
 * brg_plan_create returns BRG_OK for a plan that does not fit too: the
 * plan then says why (feasible = 0 and a note; with `explain`, also the
 * block that cannot fit even alone, the fewest devices that would do and
 * the largest batch that fits). Errors are for requests that make no
 * sense: see brg_plan_create.
 */
#ifndef BRIGADE_PLAN_H
#define BRIGADE_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "brigade/device.h"
#include "brigade/model.h"
#include "brigade/pipeline.h"
#include "brigade/program.h"
#include "brigade/schedule.h"
#include "brigade/status.h"
#include "brigade/train.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Most devices a plan takes (one stage each). */
#define BRG_PLAN_MAX_DEVICES 1024

/* Recomputation (activation checkpointing) per stage. */
typedef enum brg_recompute {
    BRG_RECOMPUTE_NONE = 0, /* "none": every stage keeps its stash */
    BRG_RECOMPUTE_ALL = 1,  /* "all": every stage keeps only its inputs and rebuilds in the backward */
    BRG_RECOMPUTE_AUTO = 2, /* "auto": per stage, only where the stage would not fit otherwise */
} brg_recompute;

/* "none", "all", "auto"; "unknown" otherwise. Never NULL. */
BRG_API const char *brg_recompute_name(brg_recompute mode);
/* Parse one of those names; anything else is BRG_ERR_INVALID_ARGUMENT. */
BRG_API brg_status brg_recompute_parse(const char *name, brg_recompute *mode);

/* How cuts are searched. */
typedef enum brg_plan_search {
    BRG_PLAN_SEARCH_DP = 0,         /* dynamic programming, O(stages x blocks^2) at worst */
    BRG_PLAN_SEARCH_EXHAUSTIVE = 1, /* every placement of the cuts: for checking on small models
                                     * (at most 2^24 placements, else BRG_ERR_INVALID_ARGUMENT) */
} brg_plan_search;

/* brg_plan_options.profile_path: measure the layers here. */
#define BRG_PROFILE_AUTO "auto"

typedef struct brg_plan_options {
    const brg_device_spec *devices; /* the ordered device list; stage d runs on devices[d] */
    int n_devices;                  /* 1 .. BRG_PLAN_MAX_DEVICES, at most the number of blocks (x chunks) */
    int batch;                      /* samples per optimizer step, >= 1 */
    int micro_batches;              /* M, a divisor of batch; 0: the largest divisor of batch <= 4 x devices */
    brg_schedule_kind schedule;     /* gpipe, 1f1b, interleaved or zb-h1 */
    int schedule_auto;              /* 1: search schedule x M x recomputation for the best throughput */
    int chunks;                     /* interleaved (and auto's interleaved candidates): v in
                                     * 2..BRG_PROGRAM_MAX_CHUNKS, 0 for 2; other schedules: 0 */
    brg_recompute recompute;
    brg_optimizer_config optimizer;
    double headroom;                /* fraction of each capacity kept free, in [0, 0.9]; default 0.05 */
    double device_flops;            /* FLOP/s one device is assumed to run; default 10e12 */
    double link_bytes_per_s;        /* bandwidth between stages for transfer times; 0: free; default 10e9 */
    /* A per-layer profile (JSON, docs/planning.md "Measured times"): its
     * measured times replace the FLOP-based ones everywhere (the search's
     * objective, stage times, the simulated step). NULL (default): times
     * are flops / device_flops. A profile that cannot be read is
     * BRG_ERR_IO, one that is malformed or does not match the model
     * BRG_ERR_FORMAT. BRG_PROFILE_AUTO ("auto") measures the profile here
     * instead: the model's layers on this machine's CPU at the plan's
     * micro-batch size (for schedule_auto, the first one tried), with a
     * core share as the devices will have it; CPU devices only
     * (BRG_ERR_INVALID_ARGUMENT otherwise). A file named "auto" is
     * "./auto". */
    const char *profile_path;
    /* 1: when every device is a CPU device and no profile is given, times
     * come from this machine's calibration (rates per layer kind for a
     * layer's FLOPs, size and parameters, measured once on a small model
     * and cached in $XDG_CACHE_HOME/brigade/cpu-speed.json;
     * docs/planning.md "Times on CPU devices") instead of device_flops.
     * 0 (default): FLOP-based. The CLI turns it on unless --device-speed
     * or --profile is given, BRG_CPU_CALIBRATION is off or 0, or it runs
     * under mpirun. */
    int cpu_calibration;
    /* Manual cuts: split[k] is the last block of stage k (virtual stage k
     * for interleaved schedules), increasing, n_split = stages - 1. NULL
     * to search. */
    const int *split;
    int n_split;
    brg_plan_search search;
    int explain;                    /* when nothing fits: find the culprit, fewest devices, largest batch */
    int verify;                     /* 1 (default): dry-run every device; 0: estimates only */
    /* Data-parallel replicas of the planned pipeline (brg_world_split_replicas),
     * 0 or 1: none. The plan is one replica's (batch is its share); the
     * predicted step adds each device's gradient sum over the replicas (a
     * ring all-reduce, 2 (D - 1) / D x its gradient bytes at
     * link_bytes_per_s) from the end of its last backward, and
     * samples_per_s counts every replica's samples. */
    int replicas;
    /* 1: BatchNorm synchronized over the replicas (brg_device_part's
     * sync_batchnorm): each stage holds the sums of its widest BatchNorm. */
    int sync_batchnorm;
} brg_plan_options;

/* Defaults: no devices, batch 0 (both must be set), M 0, 1F1B, chunks 0,
 * no recomputation, SGD with momentum 0.9, headroom 0.05, 10 TFLOP/s,
 * 10 GB/s, no profile, DP search, explain 1, verify 1. */
BRG_API brg_plan_options brg_plan_options_init(void);

/* One device of a plan: what it holds and how long it works. */
typedef struct brg_plan_stage {
    int device;                 /* index in the device list */
    brg_device_spec spec;
    size_t capacity_bytes;
    size_t budget_bytes;        /* floor(capacity x (1 - headroom)): the most its peak may be */
    brg_device_part part;       /* its block range per chunk and recomputation flags */
    int64_t params;             /* trainable parameters held */
    size_t param_bytes, grad_bytes, optimizer_bytes; /* persistent memory, as the arena counts it */
    size_t receive_bytes;       /* persistent too: buffers the messages from other devices arrive in */
    size_t stash_bytes;         /* kept per micro-batch in flight between its forward and backward (all chunks) */
    int in_flight;              /* brg_schedule_max_in_flight(schedule, device, -1) */
    /* The same per chunk (part.chunks of them): a micro-batch in flight in
     * chunk c holds chunk_stash_bytes[c], at most chunk_in_flight[c] at
     * once. With several chunks the device-wide figures above do not
     * multiply: in_flight counts every chunk's micro-batches, each holding
     * its own chunk's stash, not all of stash_bytes. */
    size_t chunk_stash_bytes[BRG_PROGRAM_MAX_CHUNKS];
    int chunk_in_flight[BRG_PROGRAM_MAX_CHUNKS];
    size_t estimate_bytes;      /* the cost model's peak (an upper bound of peak_bytes by design) */
    size_t peak_bytes;          /* the dry run's peak; estimate_bytes when not verified */
    size_t activation_bytes;    /* peak_bytes less the persistent memory (receive buffers included) */
    int verified;               /* peak_bytes comes from a dry run */
    int fits;                   /* verified: the dry run completes in an arena of budget_bytes (the
                                 * arena never compacts, so a peak below the budget may not be
                                 * enough); else estimate_bytes <= budget_bytes */
    size_t arena_bytes;         /* verified and not fitting: the smallest arena the program runs in
                                 * (a multiple of BRG_ARENA_ALIGN), peak_bytes plus what
                                 * fragmentation costs; above budget_bytes even when peak_bytes is
                                 * not. 0 when not measured: the device fits (it runs in its
                                 * budget), is not verified, or its peak is beyond what a dry run
                                 * tries (2 x max(capacity, estimate), at most 64 TiB) */
    double flops;               /* forward + backward (+ recomputation) of one micro-batch, all chunks;
                                 * with a profile, its measured time x device_flops */
    double time_s;              /* flops / device_flops (with a profile: the measured time) */
    double idle;                /* the simulator's idle fraction of this device in one step */
    size_t send_bytes;          /* activations sent on per micro-batch (0 on the last stage) */
} brg_plan_stage;

/* The plan as a whole. */
/* Where a plan's times come from. */
typedef enum brg_plan_times {
    BRG_PLAN_TIMES_FLOPS = 0,      /* FLOPs / device_flops */
    BRG_PLAN_TIMES_PROFILE = 1,    /* a profile file (profile_path) */
    BRG_PLAN_TIMES_MEASURED = 2,   /* measured now (BRG_PROFILE_AUTO) */
    BRG_PLAN_TIMES_CALIBRATED = 3, /* the CPU calibration (cpu_calibration) */
} brg_plan_times;

typedef struct brg_plan_info {
    int feasible;               /* a partition whose every device fits (dry-run verified when verify) */
    int partitioned;            /* stages are filled in (a partition was found or given, fitting or not) */
    int manual;                 /* the cuts came from options->split */
    brg_schedule_kind schedule;
    int chunks, micro_batches, micro_batch, batch, devices, blocks;
    brg_recompute recompute;    /* the mode asked for; the stages say where it recomputes */
    double headroom, device_flops, link_bytes_per_s;
    const char *profile;        /* the profile's path when times are measured; NULL when FLOP-based */
    brg_plan_times times;       /* where the times come from */
    const char *cpu_speed_cache; /* BRG_PLAN_TIMES_CALIBRATED: the cache file ("" if none), else NULL */
    int cpu_speed_cached;       /* ... and whether the rates were read from it (0: measured now) */
    double bottleneck_s;        /* the slowest device's time per micro-batch */
    double step_s;              /* the simulated makespan of one mini-batch (with replicas, the
                                 * gradient sums over them included) */
    int replicas;               /* options->replicas, at least 1 */
    int sync_batchnorm;         /* options->sync_batchnorm */
    double allreduce_s;         /* of step_s, the time the replicas' gradient sums add */
    double bubble;              /* the simulator's idle fraction over all devices */
    double samples_per_s;       /* replicas x batch / step_s */
    int searches;               /* partition searches run (1 + tightenings after dry runs) */
    int candidates;             /* auto: schedule x M x recomputation combinations tried */
    const char *note;           /* auto: what was chosen and why; not feasible: why; else "" */
    /* When not feasible and explain: */
    int culprit_block;          /* a block that fits on no device even alone, or -1 */
    size_t culprit_bytes;       /* what it needs alone at best */
    size_t culprit_budget;      /* the budget (capacity less headroom) it was held to: */
    int culprit_device;         /* ... that of this device, where it comes closest to fitting */
    int fewest_devices;         /* devices of the largest size given that would fit; 0 if none would */
    int largest_batch;          /* the largest batch these devices take; 0 if none */
    int largest_batch_micro_batches; /* ... with this many micro-batches */
} brg_plan_info;

typedef struct brg_plan brg_plan;

/* Plan model (finalized) on options->devices. Fails with
 * BRG_ERR_INVALID_ARGUMENT and a message for options that make no sense (no
 * devices or more than the model has blocks for, batch < 1, M not
 * dividing the batch, a chunk count with a schedule other than
 * interleaved, a bad split, headroom out of range, an optimizer the stages
 * reject, micro-batches some layer cannot train on, e.g. one sample through
 * a BatchNorm on 1x1 planes; under schedule_auto when every combination
 * has such micro-batches), BRG_ERR_HOST_MEMORY, or whatever a dry run fails with other than
 * running out of memory (e.g. BRG_ERR_UNSUPPORTED for a model whose output
 * training cannot take). A plan that does not fit is BRG_OK with
 * info->feasible = 0. */
BRG_API brg_status brg_plan_create(const brg_model *model, const brg_plan_options *options, brg_plan **out);

/* Accepts NULL. */
BRG_API void brg_plan_destroy(brg_plan *plan);

/* Views valid while the plan lives. */
BRG_API const brg_plan_info *brg_plan_get_info(const brg_plan *plan);
/* Device d's part (NULL unless info->partitioned and 0 <= d < devices). */
BRG_API const brg_plan_stage *brg_plan_get_stage(const brg_plan *plan, int device);
/* The schedule the plan was made for (NULL when none could be built). */
BRG_API const brg_schedule *brg_plan_schedule(const brg_plan *plan);
/* The per-virtual-stage times (seconds) the plan's simulation took, as
 * brg_schedule_simulate takes them: forward, backward_input and
 * backward_weight of p*v entries, transfer of p*v - 1; FLOP-based or from
 * the profile. Valid while the plan lives. BRG_ERR_INVALID_ARGUMENT for a
 * plan without a partition. */
BRG_API brg_status brg_plan_schedule_times(const brg_plan *plan, brg_schedule_times *times);
BRG_API const brg_model *brg_plan_model(const brg_plan *plan);
/* The optimizer the plan was made with (its state is in the peaks). */
BRG_API const brg_optimizer_config *brg_plan_get_optimizer(const brg_plan *plan);

/* What a pipeline runs to train as planned (brigade/pipeline.h): the
 * model, the schedule, each device's part, the micro-batch and the
 * optimizer; views valid while the plan lives. A plan that is partitioned
 * but does not fit gives one too (its steps then run out of memory where
 * the plan said). BRG_ERR_INVALID_ARGUMENT, with the plan's note, for a
 * plan without a partition. */
BRG_API brg_status brg_plan_pipeline_desc(const brg_plan *plan, brg_pipeline_desc *desc);

/* Give each device of the plan held here (devs[d] not NULL, d < n) its
 * stage's dry-run peak as the ceiling of the wider workspaces it may lend
 * (brg_device_set_workspace_ceiling; CUDA with BRG_CUDA_CONV_WORKSPACE_GROW=1),
 * so that every grant is the same in every step and process and the peak
 * stays the plan's. Stages whose peak was not verified by a dry run are
 * left alone. */
BRG_API void brg_plan_set_workspace_ceilings(const brg_plan *plan, brg_device *const *devs, int n);

/* The plan as JSON text (see docs/planning.md): feasible, schedule,
 * chunks, microbatches, micro_batch, batch, recompute, bubble,
 * samples_per_s, ..., and stages[] with device, capacity_bytes,
 * first_block, last_block (names), chunks[], param_bytes,
 * activation_bytes, peak_bytes, ... The caller frees *text with brg_free(). */
BRG_API brg_status brg_plan_to_json(const brg_plan *plan, char **text);

/* ---- per-layer profiles (docs/planning.md, "Measured times") ---- */

/* Each layer's forward, input-gradient and weight-gradient seconds for a
 * micro-batch of micro_batch samples, in the model's layer order. */
typedef struct brg_profile {
    int micro_batch;
    int n_layers;
    double *fwd, *bwd_in, *bwd_w; /* [n_layers] seconds */
} brg_profile;

/* Load and check path against model: every layer present, no unknown name,
 * times finite and >= 0. BRG_ERR_IO when it cannot be read, BRG_ERR_FORMAT
 * (naming the file and the layer or field) when it is wrong. */
BRG_API brg_status brg_profile_load(const brg_model *model, const char *path, brg_profile **out);

/* Measure the profile here (`--profile auto`, `brigade model profile`):
 * the model's whole program on a CPU device with one of sharing_devices
 * equal shares of the cores (the CPU devices of the pipeline compute at
 * once; 1: all of them), a one-micro-batch ZB-H1 step of micro_batch
 * samples with the device synchronized around each layer; each time the
 * median of several runs after a warm-up (at least 3, more while they
 * take under a second). The loss counts as the last layer's. The
 * convolution is brg_cpu_convolution()'s. BRG_ERR_OUT_OF_MEMORY when the
 * run needs more host memory than this process can use. */
BRG_API brg_status brg_profile_measure(const brg_model *model, int micro_batch, int sharing_devices,
                                       const brg_optimizer_config *optimizer, brg_profile **out);

/* The same on another device: device->backend BRG_BACKEND_CPU (all the
 * cores) or BRG_BACKEND_CUDA (GPU device->gpu; a device of the program's
 * planned peak is made on it, so the times are the GPU's kernels', each
 * layer between two synchronizes; device->capacity is not used). */
BRG_API brg_status brg_profile_measure_on(const brg_model *model, int micro_batch, const brg_device_spec *device,
                                          const brg_optimizer_config *optimizer, brg_profile **out);

/* Write profile (of model) to path ("-": standard output) in the format
 * brg_profile_load reads, device the free-text "device" field (NULL: none).
 * BRG_ERR_IO when the file cannot be written. */
BRG_API brg_status brg_profile_save(const brg_model *model, const brg_profile *profile, const char *device,
                                    const char *path);

/* Accepts NULL. */
BRG_API void brg_profile_destroy(brg_profile *profile);

#ifdef __cplusplus
}
#endif

#endif /* BRIGADE_PLAN_H */
