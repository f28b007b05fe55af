/* brigade: the pipeline executor (private).
 *
 * One mini-batch step of a pipeline schedule on p devices, one worker
 * thread per device. Worker d runs device d's program (exec/program-impl.h)
 * over its action list in order; the multi-threaded twin of
 * brg_program_run_local, using the same brg_program_run_action, so every
 * device allocates and frees exactly what its dry run does.
 *
 * Messages. Activations and gradients travel device to device through
 * bounded FIFO channels (exec/transfer.h), one per ordered device pair and
 * direction (activations d -> d+1 mod p, gradients d -> d-1 mod p): the
 * sender's copy stream copies its tensors from its arena into a receive
 * buffer in the receiver's arena, and the receiver copies that into the
 * buffers its program allocated. Receive buffers are the receiving
 * program's, `capacity` per direction (the parts' channel_capacity), so
 * device memory is exactly what each program allocates, as in its dry run;
 * only the inputs, the labels and the loss cross host memory. A send
 * blocks while its channel holds `capacity` messages, a receive while it
 * is empty; streams are ordered by events, so no thread waits for a copy.
 * The schedule verifier guarantees each channel's messages are received in
 * the order they are sent; every message carries its (micro-batch,
 * boundary) and a mismatch is BRG_ERR_INTERNAL.
 *
 * All channels share one mutex; each has one condition variable. A worker
 * about to wait first checks whether every unfinished worker waits on a
 * channel that cannot move (a deadlock: a schedule bug, or a capacity too
 * small for it); the step then fails with BRG_ERR_INTERNAL naming the
 * waiting devices, instead of hanging.
 *
 * Each worker first binds itself near its device (brg_device_bind_thread,
 * best effort) and names each action on its device (brg_device_set_activity)
 * before running it. Every message is checked before it is sent: a NaN or
 * Inf in an activation or gradient fails the step with BRG_ERR_NUMERIC
 * naming the tensor (as does a non-finite loss, in the program). A worker
 * synchronizes its device after its last action, so the step ends when
 * every device has done its work and an asynchronous failure is reported
 * with the action that queued it. With brg_executor_record_times each
 * action's start and end are kept, from events recorded on the device's
 * compute stream around it (so on an asynchronous device they are when
 * the work ran, not when it was queued), in seconds since the run began.
 *
 * Failure. The first failing action records its status and message with
 * context ("pipeline step S: device d (virtual stage j), micro-batch i:
 * device d, action k (TOKEN): stage j, layer ..."), sets the shared cancel
 * flag and broadcasts every condition variable; blocked workers wake and
 * stop with BRG_ERR_CANCELLED (not recorded), running ones stop before
 * their next action. After joining, channels are emptied, every stage
 * slot is discarded (each device is back to its persistent bytes) and the
 * gradients are zeroed; the step returns the first error, with its message
 * set on the calling thread. The executor can run the next step.
 */
#ifndef BRIGADE_EXECUTOR_IMPL_H
#define BRIGADE_EXECUTOR_IMPL_H

#include <stdint.h>

#include "program-impl.h"
#include "world-impl.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct brg_executor brg_executor;


/* For tests: make one action fail as if it had. The action of `device`
 * with this micro-batch, type and chunk (chunk -1: any) fails, before it
 * runs, with `status` and the message "injected fault". */
typedef struct brg_executor_fault {
    int device;
    int micro_batch;
    brg_action_type type;
    int chunk;
    brg_status status;
} brg_executor_fault;

/* An executor for schedule on devices[0..p): program d on devices[d] over
 * parts[d] (see brg_program_create for the rest). The model, schedule and
 * devices must outlive it; the devices must be distinct. world NULL (or
 * of one rank): every device is here. Else devices[d] is NULL where
 * another rank holds d (brg_world_holds), only this rank's programs are
 * made, and channels to other ranks' devices go through MPI; a step then
 * needs images and labels only on the first stage's rank, returns the
 * loss on every rank, and a failure ends the job (brg_world_abort).
 * Creates every program or none. */
brg_status brg_executor_create(const brg_model *model, const brg_schedule *schedule, brg_device *const *devices,
                               const brg_device_part *parts, int micro_batch,
                               const brg_optimizer_config *optimizer, uint64_t seed, int deferred_batchnorm,
                               const brg_world *world, brg_executor **out);

/* Labels of n samples where the last virtual stage needs them: in a world
 * of several ranks the first stage's rank sends its labels to the last
 * stage's, where *out is the copy received; elsewhere *out = labels. Every
 * rank calls it at the same point. */
brg_status brg_executor_share_labels(brg_executor *ex, const int32_t *labels, int64_t n, const int32_t **out);

/* Destroys the programs (not the devices). Accepts NULL. */
void brg_executor_destroy(brg_executor *ex);

/* Messages each channel holds: the parts' channel_capacity. */
int brg_executor_capacity(const brg_executor *ex);

/* Bytes the latest successful run moved between host memory and the
 * devices: the inputs, the labels and what the host reads back (the loss). */
uint64_t brg_executor_host_bytes(const brg_executor *ex);

/* Record (on = 1) or not each action's start and end time in every run,
 * in seconds since the run began (two events per action). */
void brg_executor_record_times(brg_executor *ex, int on);

/* The times of device's actions (its list, in order) in the latest run,
 * valid until the next run; BRG_ERR_INVALID_ARGUMENT unless times are
 * recorded and that run succeeded. */
brg_status brg_executor_action_times(const brg_executor *ex, int device, const double **start, const double **end);

/* Of device's sends in the latest run (times recorded): the seconds their
 * copies ran on the copy stream, and how much of that the device's compute
 * stream was running an action (forward or backward) meanwhile: transfer
 * time hidden behind computation. Errors as brg_executor_action_times. */
brg_status brg_executor_copy_times(const brg_executor *ex, int device, double *copy_s, double *hidden_s);

/* Arm (fault non-NULL) or clear (NULL) the injected fault. */
void brg_executor_inject_fault(brg_executor *ex, const brg_executor_fault *fault);

/* Forward and backward of one mini-batch, no optimizer step: images holds n
 * = m * micro_batch samples (NCHW), labels n class indices. The gradients
 * are accumulated in the stages (zero them with brg_executor_update or
 * brg_stage_zero_grads). loss (may be NULL): the mean loss over the
 * counted labels; correct (may be NULL): labels predicted right. labels
 * holds n x the model's labels per sample (brg_model_label_count). */
brg_status brg_executor_run(brg_executor *ex, const float *images, const int32_t *labels, int n, double *loss,
                            int64_t *correct);
/* The labels the latest run's loss counted (all but the ignored ones). */
int64_t brg_executor_counted(const brg_executor *ex);

/* brg_program_step on every device (optimizer step `step` counter of the
 * executor, starting at 1, then advanced), which zeroes the gradients. */
brg_status brg_executor_update(brg_executor *ex, float lr);

/* Work for one device, on its worker's thread (brg_executor_call). It
 * names its own failures (brg_error); on a device it has nothing for it
 * returns BRG_OK. */
typedef brg_status (*brg_executor_work)(void *arg, int device);

/* work(arg, d) for every device d of this rank, each on d's worker thread,
 * all at once with the devices' shares of the cores as in a step; returns
 * when all are done, with the first failure. Computing on the workers
 * keeps OpenMP's thread pools to theirs: a pool left on the calling thread
 * (libgomp keeps one per thread that starts parallel work) made more
 * pooled threads than cores, and libgomp then sleeps between regions. */
brg_status brg_executor_call(brg_executor *ex, brg_executor_work work, void *arg);

/* work(arg, device) on that device's worker thread alone (a device of
 * this rank), with every core of the node: the thread's count of them
 * unshared, and the worker bound to all of them while it works, so that
 * an OpenMP pool it grows meanwhile is not crowded onto its share. For
 * work that devices sharing the cores do one at a time. */
brg_status brg_executor_call_alone(brg_executor *ex, int device, brg_executor_work work, void *arg);

brg_program *brg_executor_program(const brg_executor *ex, int device);
int64_t brg_executor_step_count(const brg_executor *ex); /* the step the next run belongs to */
void brg_executor_set_step_count(brg_executor *ex, int64_t step);
/* The loss's ignore label on every stage (brg_stage_config.ignore_label). */
void brg_executor_set_ignore_label(brg_executor *ex, int32_t ignore_label);

#ifdef __cplusplus
}
#endif

#endif /* BRIGADE_EXECUTOR_IMPL_H */
