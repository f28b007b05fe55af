/* brigade: a device's program, the part of a pipeline schedule one device
 * runs, and its dry run.
 *
 * A program binds the action list of one device of a schedule
 * (brigade/schedule.h) to the stages that device holds: one stage per model
 * chunk (v chunks for interleaved schedules, else one). Running an action
 * calls the stage functions of brigade/train.h in the order the executor
 * uses, so the memory a program allocates is the memory training allocates.
 *
 * A dry run executes the program on a planning device: an arena with the
 * target's capacity and the target backend's workspace sizes, but no memory
 * behind it and no kernels. Every allocation and free happens as in
 * training, so its peak is the training peak by construction: this is how
 * `brigade plan` knows, without a GPU, what each device will hold.
 */
#ifndef BRIGADE_PROGRAM_H
#define BRIGADE_PROGRAM_H

#include <stddef.h>

#include "brigade/device.h"
#include "brigade/model.h"
#include "brigade/schedule.h"
#include "brigade/status.h"
#include "brigade/train.h"

#ifdef __cplusplus
extern "C" {
#endif

#define BRG_PROGRAM_MAX_CHUNKS 16

/* What one device holds of a model under a schedule. */
typedef struct brg_device_part {
    int chunks;                                /* the schedule's v */
    int first_block[BRG_PROGRAM_MAX_CHUNKS];   /* per chunk, inclusive */
    int last_block[BRG_PROGRAM_MAX_CHUNKS];
    int recompute[BRG_PROGRAM_MAX_CHUNKS];     /* 1: stash only the chunk's inputs, rebuild in the backward */
    /* Messages each channel into this device holds: the device keeps that
     * many receive buffers per direction in its arena (1..4; 0:
     * BRG_CHANNEL_CAPACITY_DEFAULT). One lets a sender run one message
     * ahead of its receiver; each more costs a message's bytes. */
    int channel_capacity;
    /* 1: BatchNorm synchronized over the pipeline's replicas
     * (brg_stage_config.sync_batchnorm): each chunk holds 2 x its widest
     * BatchNorm's channels of floats more. */
    int sync_batchnorm;
    /* brg_stage_config.edge_block of every chunk: 0, or the block that
     * every device of the pipeline computes in. The executor sets it when
     * all devices are in this process and report one block. */
    int edge_block;
} brg_device_part;

/* Messages a channel holds when the part says 0. */
#define BRG_CHANNEL_CAPACITY_DEFAULT 1
#define BRG_CHANNEL_CAPACITY_MAX 4

/* Memory of one device's program, from a dry run (or measured in training). */
typedef struct brg_memory_report {
    size_t peak_bytes;        /* arena high-water mark, kernel workspace included */
    size_t persistent_bytes;  /* held between mini-batches: weights + gradients + optimizer state + receive buffers */
    size_t param_bytes, grad_bytes, optimizer_bytes;
    size_t receive_bytes;     /* buffers that messages from other devices arrive in, and the flag
                               * of the finite check of those sent (an int32, arena-rounded) */
    size_t activation_peak_bytes; /* peak_bytes - persistent_bytes */
    int max_in_flight;        /* micro-batches stashed at once (all chunks) */
} brg_memory_report;

/* Dry-run device `device` of schedule with the given part of model,
 * micro-batches of micro_batch samples and optimizer: creates the stages on
 * a planning device of target's capacity, runs every action of the device's
 * list in order, and reports the memory. A program that does not fit fails
 * with BRG_ERR_OUT_OF_MEMORY and the named message of the allocation that
 * did not fit (report is still filled with the peak up to that point). */
BRG_API brg_status brg_program_dry_run(const brg_model *model, const brg_schedule *schedule, int device,
                                       const brg_device_part *part, int micro_batch,
                                       const brg_optimizer_config *optimizer, const brg_device_spec *target,
                                       brg_memory_report *report);

#ifdef __cplusplus
}
#endif

#endif /* BRIGADE_PROGRAM_H */
