/* brigade: programs, one device's part of a pipeline schedule (private).
 *
 * A program is the stages one device holds (one per model chunk) and the
 * interpretation of that device's action list over them. The dry run
 * (brg_program_dry_run, plan/dryrun.c) runs it on a planning device with no transfers; the
 * single-threaded local driver below runs all devices' programs with real
 * data; the pipeline executor runs each device's program on its own
 * thread with channels plugged into the transfer callbacks. All three call
 * the same brg_program_run_action, so they allocate and free the same
 * buffers in the same order.
 *
 * What each action does on the device's chunk c for micro-batch b, using
 * stage slot b mod slots(c), slots(c) = brg_schedule_max_in_flight(schedule,
 * device, c):
 *
 *   RECV_ACT   allocate the chunk's input buffers (brg_stage_input);
 *              io->recv_act fills them
 *   FORWARD    virtual stage 0: allocate the model input and copy
 *              micro-batch b of io->images in; last virtual stage: allocate
 *              the labels and copy b's of io->labels in; a same-device predecessor chunk
 *              (p = 1): allocate the inputs, copy its outputs in, release
 *              them; then brg_stage_forward in train mode; a loss that is
 *              not finite is BRG_ERR_NUMERIC
 *   SEND_ACT   io->send_act with the outputs, then brg_stage_release_outputs
 *   RECV_GRAD  allocate the output gradients; io->recv_grad fills them
 *   BACKWARD   brg_stage_backward with loss scale 1 / (m * micro_batch);
 *              BACKWARD_INPUT the same with brg_stage_backward_input; then,
 *              for a same-device predecessor chunk, its output gradients are
 *              allocated, the input gradients copied in and released
 *   SEND_GRAD  io->send_grad with the input gradients, then
 *              brg_stage_release_input_grads
 *   BACKWARD_WEIGHT  brg_stage_backward_weight
 *
 * A micro-batch holds its slot from its first buffer until its stage slot
 * is empty again; a micro-batch that finds its slot held by another is a
 * schedule/slot-count bug and fails with BRG_ERR_INTERNAL naming both.
 */
#ifndef BRIGADE_PROGRAM_IMPL_H
#define BRIGADE_PROGRAM_IMPL_H

#include <stdint.h>

#include "brigade/program.h"
#include "train/stage.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct brg_program brg_program;

/* Moves the tensors of one action: `tensors[0..count)` live on the
 * program's device, in the order of brg_stage_input_tensor (activations and
 * their gradients at the chunk's input boundary) or brg_stage_output_tensor
 * (at its output boundary). A receive fills them; a send reads them
 * and must be done with them when it returns (they are released then). */
typedef brg_status (*brg_program_transfer)(void *ctx, brg_program *program, const brg_action *action,
                                           brg_tensor *tensors, int count);

/* The program's link to the world. Any callback or array may be NULL: it
 * then does nothing, or nothing is loaded (the dry run passes no io at all). */
typedef struct brg_program_io {
    void *ctx;
    brg_program_transfer recv_act, send_act, recv_grad, send_grad;
    const float *images;   /* the mini-batch's model input, m micro-batches of [n, C, H, W] */
    const int32_t *labels; /* its labels, m x n */
} brg_program_io;

/* A program for `device` of schedule: one stage per chunk c on dev, over
 * blocks part->first_block[c] .. last_block[c] with part->recompute[c],
 * stage index (in tags and messages) its virtual stage (brg_schedule_stage_of),
 * micro-batches of micro_batch samples, the optimizer, seed and
 * deferred_batchnorm as in brg_stage_config. part->chunks must be the schedule's v; virtual stage 0
 * must start at block 0 and only it, the last must end at the model's last
 * block and only it; with p = 1 consecutive chunks must be adjacent ranges.
 * Fails like brg_stage_create (an out-of-memory names the block and what
 * was allocated). model, schedule and dev must outlive the program. */
brg_status brg_program_create(const brg_model *model, const brg_schedule *schedule, int device,
                              const brg_device_part *part, int micro_batch, const brg_optimizer_config *optimizer,
                              uint64_t seed, int deferred_batchnorm, brg_device *dev, brg_program **out);

/* Destroys the stages (freeing their memory). Accepts NULL. */
void brg_program_destroy(brg_program *program);

/* Start a mini-batch: the optimizer step its micro-batches belong to
 * (dropout masks) and zero loss sums. Every slot must be free. */
brg_status brg_program_begin(brg_program *program, int64_t step);

/* Run one action of the program's device (see the table above). On
 * failure the message starts with the device, the action's position since
 * brg_program_begin (its index in the list when the list is run in order)
 * and its token, e.g. "device 1, action 17 (B3.1): stage 3, layer ...". */
brg_status brg_program_run_action(brg_program *program, const brg_action *action, const brg_program_io *io);

/* After the last action: every micro-batch must have left its slot
 * (BRG_ERR_INTERNAL naming the first that did not). */
brg_status brg_program_finish(brg_program *program);

/* After the device has synchronized at the end of a step: BRG_OK if every
 * message it sent was finite, else BRG_ERR_NUMERIC naming the first that
 * was not (its micro-batch, tensor and receiver) with *found_grad 1 for a
 * gradient, 0 for an activation (-1 when all were finite or found_grad is
 * unused). Each send queues BRG_OP_CHECK_FINITE into one flag on the device
 * (zeroed by brg_program_begin), so this reads 4 bytes: the one copy to the
 * host the check costs per step. */
brg_status brg_program_check_messages(brg_program *program, int *found_grad);

/* Abandon the mini-batch after a failure: empty every slot of every chunk
 * and forget which micro-batch held it, so the next brg_program_begin
 * starts clean. Cannot fail. */
void brg_program_abort(brg_program *program);

/* Runs every kernel a step of this program launches once, with the
 * step's shapes and no transfers: one micro-batch of zeros through each
 * chunk and back (its backward whole or split as the schedule runs it,
 * its sends' checks of messages), BatchNorm's running statistics and
 * deferred sums untouched, the gradients zeroed after, the device
 * synchronized. For ranks that exchange through communicators
 * (exec/executor.c): a GPU loads a kernel's code at its first launch and
 * synchronizes while it does, which in a step with a peer's message
 * pending can wait forever (docs/distributed.md, "Lazy kernel loading").
 * Call between steps (every slot free). */
brg_status brg_program_warm_up(brg_program *program);

/* brg_stage_step on every chunk (after brg_program_finish). */
brg_status brg_program_step(brg_program *program, float lr, int64_t step);

/* The program's receive buffers for gradients (grad = 1) or activations
 * from device `from`: *slots slots of *slot_bytes each from *base, or
 * *base NULL where none arrive from there (the model's edge, a stage on
 * the same device, or no neighbour there). See exec/transfer.h. */
void brg_program_receive_buffers(const brg_program *program, int grad, int from, unsigned char **base,
                                 size_t *slot_bytes, int *slots);
size_t brg_program_receive_bytes(const brg_program *program);

brg_device *brg_program_device(const brg_program *program);
int brg_program_device_index(const brg_program *program);
const brg_schedule *brg_program_schedule(const brg_program *program);
int brg_program_micro_batch(const brg_program *program);
int brg_program_capacity(const brg_program *program); /* messages per channel direction */
brg_stage *brg_program_stage(const brg_program *program, int chunk);

/* The last virtual stage's sums since brg_program_begin: the loss times
 * the labels it counted, the labels predicted right, and the labels
 * counted (samples, or pixels of per-pixel outputs, less ignored labels;
 * 0 on other devices). Any pointer may be NULL. */
void brg_program_loss(const brg_program *program, double *loss_sum, int64_t *correct, int64_t *counted);

/* The loss's ignore label on every stage (brg_stage_config.ignore_label). */
void brg_program_set_ignore_label(brg_program *program, int32_t ignore_label);

int brg_program_chunks(const brg_program *program);

/* Replica `replica` of `replicas` (exec/replicas.h): its micro-batch i is
 * the whole mini-batch's micro-batch i * replicas + replica (the samples
 * dropout masks are drawn for). Default 0 of 1. */
void brg_program_set_replica(brg_program *program, int replica, int replicas);
/* Synchronized BatchNorm: every stage's gather over the replicas
 * (brg_stage_set_gather). */
brg_status brg_program_set_gather(brg_program *program, brg_stage_gather_fn fn, void *ctx, int replicas);

/* The loss's backward divides by `counted` labels (those of every
 * replica's share of the mini-batch) instead of the run's own; 0: its
 * own. Set before brg_program_begin's run, kept until changed. */
void brg_program_set_loss_count(brg_program *program, int64_t counted);

/* What the program holds between mini-batches (total: weights, gradients,
 * optimizer state and receive buffers) and the stages' parts of it. */
void brg_program_persistent(const brg_program *program, size_t *total, size_t *weights, size_t *grads,
                            size_t *optimizer);

/* One mini-batch through all devices' programs (programs[d] runs device d;
 * p of them, one per device of their common schedule) in one thread: the
 * devices take turns, each running actions until it reaches a receive whose
 * message has not been sent. Messages go device to device through the
 * channels of exec/transfer.h, into the receive buffers each program
 * holds, so device memory is exactly what each program allocates, as in a
 * dry run; the walk keeps every channel within their capacity and every
 * device is synchronized at the end. images holds m * micro_batch
 * samples (NCHW) and labels as many class indices. Calls brg_program_begin
 * with step and brg_program_finish on each; no optimizer step. Fails with
 * BRG_ERR_INTERNAL if the schedule stops (deadlock) before every list is
 * done, or with the failing action's status and message. */
brg_status brg_program_run_local(brg_program *const *programs, int p, int64_t step, const float *images,
                                 const int32_t *labels);

#ifdef __cplusplus
}
#endif

#endif /* BRIGADE_PROGRAM_IMPL_H */
