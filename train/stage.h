/* brigade: the stage slot protocol (internal: programs, the trainer and
 * white-box tests drive it; include/brigade/train.h has what a caller may
 * read of a stage).
 *
 * One micro-batch goes through a stage in this order, using a slot id in
 * 0..slots-1 that stays with it until its backward has finished:
 *
 *     brg_stage_input (and brg_stage_labels on the last stage)   fill them
 *     brg_stage_forward
 *     brg_stage_output ... brg_stage_release_outputs             not on the last stage
 *     brg_stage_output_grad, fill, brg_stage_backward            (train mode)
 *     brg_stage_input_grad ... brg_stage_release_input_grads     not on the first stage
 *
 * where the backward may instead run in two parts (ZB-H1's B and W):
 * brg_stage_backward_input, the input gradients sent on and released, then
 * later brg_stage_backward_weight; the slot is free once both are done.
 *
 * and after the micro-batches of a mini-batch, brg_stage_step. A pipeline
 * executor runs several stages on several devices and moves the boundary
 * tensors between them with brg_device_copy_between; the trainer runs one
 * stage holding the whole model.
 *
 * Nothing here is thread-safe per stage: one thread drives one stage (the
 * devices and arenas themselves are thread-safe).
 */
#ifndef BRIGADE_TRAIN_STAGE_H
#define BRIGADE_TRAIN_STAGE_H

#include <stddef.h>
#include <stdint.h>

#include "brigade/metrics.h"
#include "brigade/train.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum brg_pass_mode {
    BRG_PASS_TRAIN = 0, /* BatchNorm on batch statistics (updating running ones), dropout on, stash kept */
    BRG_PASS_EVAL = 1,  /* BatchNorm on running statistics, dropout off, nothing kept */
} brg_pass_mode;

/* What a forward pass needs to know besides its data. */
typedef struct brg_pass {
    brg_pass_mode mode;
    int64_t step;          /* the optimizer step the micro-batch belongs to (dropout masks) */
    int64_t sample_offset; /* index of the micro-batch's first sample in its mini-batch (dropout masks) */
} brg_pass;

/* The last stage's report of one forward pass. */
typedef struct brg_stage_result {
    float loss;      /* mean cross-entropy over the micro-batch's counted labels */
    int64_t correct; /* labels (samples, or pixels of per-pixel outputs) whose first largest probability
                      * is the label (counted on the device) */
    int64_t top5;    /* inference passes only, class outputs: samples whose label is among the five
                      * largest probabilities, ties going to the lower class as for correct (counted on
                      * the host from a copy of the probabilities: evaluation is off the training path) */
    brg_metrics *metrics; /* inference passes: where the host adds the micro-batch's probabilities and
                           * loss (NULL: not wanted) */
} brg_stage_result;

/* Create a stage for blocks [first_block, last_block] of a finalized model on
 * dev, allocating its parameters (initialized with brg_layer_init_param and
 * config->seed, so values do not depend on the partition), gradients (zero)
 * and optimizer state (zero) from dev's arena, one slab each per block,
 * tagged "stage S / BLOCK / weights|grads|optimizer". On a planning device
 * (brigade/program.h) the same memory is allocated but no values are
 * generated or written. The last stage's loss is per sample for a model
 * output [classes, 1, 1] and per pixel for [classes, H, W] (segmentation).
 * model must outlive the stage. On failure
 * *out is NULL and nothing stays allocated. */
brg_status brg_stage_create(const brg_model *model, brg_device *dev, const brg_stage_config *config,
                            brg_stage **out);

/* Free everything the stage holds, micro-batches in flight included.
 * Accepts NULL. */
void brg_stage_destroy(brg_stage *stage);

/* The stage's inputs: the model tensors entering its range (the model input
 * for the first stage, else brg_model_boundary_tensors(first_block - 1)),
 * and its outputs: those leaving it (brg_model_boundary_tensors(last_block);
 * none for the last stage, whose output feeds the loss). Indices are model
 * tensor indices, in increasing order. */
int brg_stage_input_count(const brg_stage *stage);
int brg_stage_input_tensor(const brg_stage *stage, int i);
int brg_stage_output_count(const brg_stage *stage);
int brg_stage_output_tensor(const brg_stage *stage, int i);

/* The buffer of input i of the micro-batch in slot, [n, C, H, W] on the
 * stage's device, allocated on the first call (tag "stage S / inputs /
 * TENSOR mb SLOT"); the caller fills it before brg_stage_forward. Every
 * input and the labels of one micro-batch share n, 1 <= n <= max_batch. */
brg_status brg_stage_input(brg_stage *stage, int slot, int i, int n, brg_tensor *out);

/* Last stage: the int32 labels of the micro-batch in slot, [n] for class
 * logits or [n, H, W] for per-pixel logits [n, classes, H, W], allocated on
 * the first call; fill before brg_stage_forward (required in both modes). */
brg_status brg_stage_labels(brg_stage *stage, int slot, int n, brg_tensor *out);

/* Change the config's ignore_label (between mini-batches). */
void brg_stage_set_ignore_label(brg_stage *stage, int32_t ignore_label);

/* Labels per sample: the model output's H x W (1 for class logits). */
int64_t brg_stage_label_count(const brg_stage *stage);

/* Of n samples' labels (n x brg_stage_label_count) in host memory, those
 * the loss counts: all but the ones equal to the config's ignore label. */
int64_t brg_stage_counted_labels(const brg_stage *stage, const int32_t *labels, int64_t n);

/* Run the stage's layers on the micro-batch in slot, whose inputs (and
 * labels) are filled. Keeps what the backward reads (train mode) and frees
 * every other intermediate after its last forward reader. With
 * config->recompute a train forward keeps only the inputs (and on the last
 * stage the loss's probabilities and labels), and the backward first runs
 * the layers again (BatchNorm's running statistics are not moved a second
 * time; dropout masks are the same), so gradients are unchanged. The last
 * stage computes the loss and, if result is not NULL, reports it. On failure
 * the slot is emptied. */
brg_status brg_stage_forward(brg_stage *stage, int slot, const brg_pass *pass, brg_stage_result *result);

/* brg_stage_forward that also hands out the model output: on the last
 * stage, the output of the model's last layer (the logits the loss reads,
 * [n, classes]) is copied to outputs (n x classes floats of host memory)
 * before it is freed; outputs NULL is brg_stage_forward. Not on other
 * stages (BRG_ERR_INVALID_ARGUMENT). */
brg_status brg_stage_forward_outputs(brg_stage *stage, int slot, const brg_pass *pass, brg_stage_result *result,
                                     float *outputs);

/* Output i of the micro-batch in slot after brg_stage_forward (not on the
 * last stage); valid until brg_stage_release_outputs. */
brg_status brg_stage_output(brg_stage *stage, int slot, int i, brg_tensor *out);

/* The caller is done with the outputs (sent them on): free those the
 * backward does not read. In eval mode this empties the slot. */
brg_status brg_stage_release_outputs(brg_stage *stage, int slot);

/* Not on the last stage, after a train-mode forward: the buffer for the
 * gradient of output i (same shape), allocated on the first call; fill it
 * before brg_stage_backward. An output whose gradient is never asked for
 * counts as zero. */
brg_status brg_stage_output_grad(brg_stage *stage, int slot, int i, brg_tensor *out);

/* Backpropagate the micro-batch in slot (after a train-mode forward; the
 * outputs are released implicitly). The last stage starts from the softmax
 * cross-entropy with dlogits = (probs - onehot) * loss_scale (0 at ignored
 * labels); use 1 / (the mini-batch's counted labels: its size for class
 * logits without ignored labels) so that micro-batch gradients add up to
 * the mini-batch's.
 * Other stages start from their output gradients and ignore loss_scale.
 * Parameter gradients are added to (accumulated across micro-batches until
 * brg_stage_step). Every stash and gradient buffer is freed as soon as it is
 * dead; on the first stage the slot is then empty, on others it holds the
 * input gradients. On failure the slot is emptied and the parameter
 * gradients may hold part of the micro-batch: brg_stage_zero_grads before
 * going on. */
brg_status brg_stage_backward(brg_stage *stage, int slot, float loss_scale);

/* brg_stage_backward in two parts, for schedules that split it (ZB-H1).
 * backward_input computes every activation gradient (so the input
 * gradients can be sent on at once) and BatchNorm's gamma and beta
 * gradients, which come with its input gradient; it keeps, for each conv2d
 * and linear layer, the layer's input and output gradient. backward_weight
 * then adds those layers' weight and bias gradients and frees what was
 * kept. Together they give brg_stage_backward's gradients bit for bit;
 * between them the slot holds more than brg_stage_backward ever does. The
 * slot is empty once backward_weight has run and (not on the first stage)
 * the input gradients have been released, in either order. On failure the
 * slot is emptied, as for brg_stage_backward. */
brg_status brg_stage_backward_input(brg_stage *stage, int slot, float loss_scale);
brg_status brg_stage_backward_weight(brg_stage *stage, int slot);

/* Not on the first stage, after brg_stage_backward (or _input): the
 * gradient of input i; valid until brg_stage_release_input_grads, which
 * empties the slot (unless the weight part is still to run). */
brg_status brg_stage_input_grad(brg_stage *stage, int slot, int i, brg_tensor *out);
brg_status brg_stage_release_input_grads(brg_stage *stage, int slot);

/* Empty a slot whatever its state (an abandoned micro-batch). Cannot fail. */
void brg_stage_discard(brg_stage *stage, int slot);

/* Whether slot holds a micro-batch (anything from its first input buffer
 * until its backward is complete and its input gradients are released);
 * 0 for a slot out of range. */
int brg_stage_slot_in_use(const brg_stage *stage, int slot);

/* Apply SGD_UPDATE or ADAM_UPDATE with learning rate lr to every trainable
 * parameter (step >= 1 is Adam's t), then zero the gradients. */
brg_status brg_stage_step(brg_stage *stage, float lr, int64_t step);

/* Set every parameter gradient to zero (and, with deferred BatchNorm,
 * forget the statistics accumulated since the last step and restore the
 * running statistics: the mini-batch is abandoned). */
brg_status brg_stage_zero_grads(brg_stage *stage);

/* Data-parallel replicas (exec/replicas.c). The stage's parameter
 * gradients lie in one slab per block (in block order, 0 .. count - 1):
 * slab b, *floats of them (padding included, always zero), or NULL where
 * block b has no trainable parameter. */
int brg_stage_grad_slab_count(const brg_stage *stage);
float *brg_stage_grad_slab(const brg_stage *stage, int b, size_t *floats);

/* With fn set, the backward passes (whole, input or weight part) call
 * fn(ctx, b) as they finish each block b's layers, last block first, once
 * its ops are queued on the compute stream: set for the pass after which a
 * step's gradients are final (the stage's last backward of the step), a
 * block's gradient slab can then be summed while the pass goes on with
 * the blocks before it. A failure of fn fails the pass. NULL: no calls. */
typedef brg_status (*brg_stage_grads_done_fn)(void *ctx, int b);
void brg_stage_set_grads_done(brg_stage *stage, brg_stage_grads_done_fn fn, void *ctx);

/* frozen 1: train passes leave BatchNorm's running statistics and
 * deferred BatchNorm's sums as they are (as a recomputing replay does),
 * for a warm-up that must leave no trace but its gradients, which the
 * caller zeroes (brg_stage_zero_grads). 0: as usual. */
void brg_stage_freeze_statistics(brg_stage *stage, int frozen);

/* Per-layer seconds, indexed by model layer (each array as long as the
 * model's layer count): what a layer clock adds to. */
typedef struct brg_layer_clock {
    double *fwd, *bwd_in, *bwd_w;
} brg_layer_clock;

/* With clock set, the forward and backward passes record a device event
 * on the compute stream between layers, and brg_stage_read_layer_clock
 * adds each layer's time between its events to clock: the forward to fwd,
 * the input-gradient part to bwd_in, the weight part (ZB-H1's W) to bwd_w;
 * a whole backward adds both parts to bwd_in, a recomputing replay its
 * forward to fwd again. The loss counts as the last layer's: its forward
 * in fwd, its gradient in bwd_in. The times are the device's (the GPU's
 * own clock, a cpu-async stream's), taken without waiting for it between
 * layers, so the layers run as they do in training. For measuring
 * (plan/measure.c), never on the training path. NULL: no clock (laps not
 * yet read are dropped). clock must outlive its use. */
void brg_stage_set_layer_clock(brg_stage *stage, brg_layer_clock *clock);
/* Waits for the device to pass the clock's last event and adds the laps
 * recorded since the clock was set or last read to its arrays. */
brg_status brg_stage_read_layer_clock(brg_stage *stage);

/* Synchronized BatchNorm (brg_stage_config.sync_batchnorm): fn(ctx,
 * mine, all, n) gives every replica's n doubles in replica order,
 * all[replicas * n] (mine is this stage's); a collective over the
 * stage's twins, which call it in the same order (one schedule). The
 * stage calls it from the thread that runs its forwards and backwards,
 * twice per BatchNorm layer and micro-batch (three times with
 * recomputation: the replay gathers again). NULL: one replica. */
typedef brg_status (*brg_stage_gather_fn)(void *ctx, const double *mine, double *all, size_t n);
brg_status brg_stage_set_gather(brg_stage *stage, brg_stage_gather_fn fn, void *ctx, int replicas);

/* BatchNorm statistics kept in step across replicas before each optimizer
 * step: pack writes brg_stage_replica_stats_count values that add over
 * the replicas; merge takes their sums. With deferred BatchNorm they are
 * the mini-batch's accumulated statistics, so the step moves the running
 * statistics as one device running every replica's samples would;
 * otherwise the running statistics, averaged over the replicas. */
size_t brg_stage_replica_stats_count(const brg_stage *stage);
brg_status brg_stage_replica_stats_pack(brg_stage *stage, double *out);
brg_status brg_stage_replica_stats_merge(brg_stage *stage, const double *sums, int replicas);

#ifdef __cplusplus
}
#endif

#endif /* BRIGADE_TRAIN_STAGE_H */
