/* brigade: training. Stages (a block range of a model bound to one device)
 * and the single-device trainer built from one stage.
 *
 * A stage holds, in its device's arena, the parameters of its layers, their
 * gradients and the optimizer state (the persistent memory), and per
 * micro-batch in flight what its backward will read (the stash, see
 * docs/training.md for the exact rule). It never allocates device memory
 * anywhere else, so a capped device caps it; running out names the stage,
 * the layer and what was being allocated.
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
 * tensors between them with brg_device_copy_between; the trainer below runs
 * one stage holding the whole model.
 *
 * Nothing here is thread-safe per stage: one thread drives one stage (the
 * devices and arenas themselves are thread-safe).
 */
#ifndef BRIGADE_TRAIN_H
#define BRIGADE_TRAIN_H

#include <stddef.h>
#include <stdint.h>

#include "brigade/device.h"
#include "brigade/model.h"
#include "brigade/status.h"
#include "brigade/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- optimizers (PyTorch's conventions, see SGD_UPDATE / ADAM_UPDATE) ---- */

typedef enum brg_optimizer_kind {
    BRG_OPTIMIZER_SGD = 0,  /* with momentum > 0 it keeps a velocity per parameter */
    BRG_OPTIMIZER_ADAM = 1, /* keeps m and v per parameter */
} brg_optimizer_kind;

typedef struct brg_optimizer_config {
    brg_optimizer_kind kind;
    float momentum;              /* SGD, in [0, 1); 0: no velocity state */
    float weight_decay;          /* >= 0, L2 added to the gradient of every trainable parameter */
    float beta1, beta2, epsilon; /* Adam */
} brg_optimizer_config;

/* PyTorch's defaults for kind: momentum 0, weight decay 0, betas 0.9 and
 * 0.999, epsilon 1e-8. */
BRG_API brg_optimizer_config brg_optimizer_config_init(brg_optimizer_kind kind);

/* "sgd" or "adam", and back (-1 for an unknown name). */
BRG_API const char *brg_optimizer_name(brg_optimizer_kind kind);
BRG_API int brg_optimizer_from_name(const char *name);

/* Optimizer tensors per parameter: 0 (plain SGD), 1 (SGD momentum) or 2 (Adam). */
BRG_API int brg_optimizer_state_count(const brg_optimizer_config *config);

/* ---- stages ---- */

typedef struct brg_stage brg_stage;

typedef struct brg_stage_config {
    int index;                      /* stage number, for tags and messages ("stage 2") */
    int first_block, last_block;    /* the range, inclusive */
    int max_batch;                  /* largest micro-batch, >= 1 */
    int slots;                      /* micro-batches that may be in flight at once, >= 1 */
    brg_optimizer_config optimizer;
    uint64_t seed;                  /* parameter initialization and dropout masks */
    int recompute;                  /* 1: a train forward keeps only the inputs; the backward recomputes the rest */
    /* 1: deferred BatchNorm. A train forward still normalizes with the
     * micro-batch's statistics but leaves the running statistics alone; it
     * merges the micro-batch's mean and variance into host-side sums
     * (once per micro-batch, not again when recomputing), and
     * brg_stage_step moves the running statistics once with the whole
     * mini-batch's mean and unbiased variance, as a single forward over the
     * mini-batch would; brg_stage_zero_grads before it (an abandoned
     * mini-batch) puts them back as the mini-batch found them. Device
     * memory is the same either way. */
    int deferred_batchnorm;
} brg_stage_config;

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
    float loss;      /* mean cross-entropy over the micro-batch */
    int64_t correct; /* samples whose largest logit is their label */
} brg_stage_result;

/* Create a stage for blocks [first_block, last_block] of a finalized model on
 * dev, allocating its parameters (initialized with brg_layer_init_param and
 * config->seed, so values do not depend on the partition), gradients (zero)
 * and optimizer state (zero) from dev's arena, one slab each per block,
 * tagged "stage S / BLOCK / weights|grads|optimizer". On a planning device
 * (brigade/program.h) the same memory is allocated but no values are
 * generated or written. The last stage needs
 * a model output of [classes, 1, 1] (BRG_ERR_UNSUPPORTED otherwise: per-pixel
 * losses are not supported yet). model must outlive the stage. On failure
 * *out is NULL and nothing stays allocated. */
BRG_API brg_status brg_stage_create(const brg_model *model, brg_device *dev, const brg_stage_config *config,
                                    brg_stage **out);

/* Free everything the stage holds, micro-batches in flight included.
 * Accepts NULL. */
BRG_API void brg_stage_destroy(brg_stage *stage);

BRG_API brg_device *brg_stage_device(const brg_stage *stage);
BRG_API const brg_model *brg_stage_model(const brg_stage *stage);
BRG_API const brg_stage_config *brg_stage_get_config(const brg_stage *stage);
BRG_API int brg_stage_is_first(const brg_stage *stage); /* holds block 0: its input is the model input */
BRG_API int brg_stage_is_last(const brg_stage *stage);  /* holds the last block: it computes the loss */

/* The stage's inputs: the model tensors entering its range (the model input
 * for the first stage, else brg_model_boundary_tensors(first_block - 1)),
 * and its outputs: those leaving it (brg_model_boundary_tensors(last_block);
 * none for the last stage, whose output feeds the loss). Indices are model
 * tensor indices, in increasing order. */
BRG_API int brg_stage_input_count(const brg_stage *stage);
BRG_API int brg_stage_input_tensor(const brg_stage *stage, int i);
BRG_API int brg_stage_output_count(const brg_stage *stage);
BRG_API int brg_stage_output_tensor(const brg_stage *stage, int i);

/* The buffer of input i of the micro-batch in slot, [n, C, H, W] on the
 * stage's device, allocated on the first call (tag "stage S / inputs /
 * TENSOR mb SLOT"); the caller fills it before brg_stage_forward. Every
 * input and the labels of one micro-batch share n, 1 <= n <= max_batch. */
BRG_API brg_status brg_stage_input(brg_stage *stage, int slot, int i, int n, brg_tensor *out);

/* Last stage: the int32 labels [n] of the micro-batch in slot, allocated on
 * the first call; fill before brg_stage_forward (required in both modes). */
BRG_API brg_status brg_stage_labels(brg_stage *stage, int slot, int n, brg_tensor *out);

/* Run the stage's layers on the micro-batch in slot, whose inputs (and
 * labels) are filled. Keeps what the backward reads (train mode) and frees
 * every other intermediate after its last forward reader. With
 * config->recompute a train forward keeps only the inputs (and on the last
 * stage the loss's probabilities and labels), and the backward first runs
 * the layers again (BatchNorm's running statistics are not moved a second
 * time; dropout masks are the same), so gradients are unchanged. The last
 * stage computes the loss and, if result is not NULL, reports it. On failure
 * the slot is emptied. */
BRG_API brg_status brg_stage_forward(brg_stage *stage, int slot, const brg_pass *pass, brg_stage_result *result);

/* Output i of the micro-batch in slot after brg_stage_forward (not on the
 * last stage); valid until brg_stage_release_outputs. */
BRG_API brg_status brg_stage_output(brg_stage *stage, int slot, int i, brg_tensor *out);

/* The caller is done with the outputs (sent them on): free those the
 * backward does not read. In eval mode this empties the slot. */
BRG_API brg_status brg_stage_release_outputs(brg_stage *stage, int slot);

/* Not on the last stage, after a train-mode forward: the buffer for the
 * gradient of output i (same shape), allocated on the first call; fill it
 * before brg_stage_backward. An output whose gradient is never asked for
 * counts as zero. */
BRG_API brg_status brg_stage_output_grad(brg_stage *stage, int slot, int i, brg_tensor *out);

/* Backpropagate the micro-batch in slot (after a train-mode forward; the
 * outputs are released implicitly). The last stage starts from the softmax
 * cross-entropy with dlogits = (probs - onehot) * loss_scale; use 1 / (the
 * mini-batch size) so that micro-batch gradients add up to the mini-batch's.
 * Other stages start from their output gradients and ignore loss_scale.
 * Parameter gradients are added to (accumulated across micro-batches until
 * brg_stage_step). Every stash and gradient buffer is freed as soon as it is
 * dead; on the first stage the slot is then empty, on others it holds the
 * input gradients. On failure the slot is emptied and the parameter
 * gradients may hold part of the micro-batch: brg_stage_zero_grads before
 * going on. */
BRG_API brg_status brg_stage_backward(brg_stage *stage, int slot, float loss_scale);

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
BRG_API brg_status brg_stage_backward_input(brg_stage *stage, int slot, float loss_scale);
BRG_API brg_status brg_stage_backward_weight(brg_stage *stage, int slot);

/* Not on the first stage, after brg_stage_backward (or _input): the
 * gradient of input i; valid until brg_stage_release_input_grads, which
 * empties the slot (unless the weight part is still to run). */
BRG_API brg_status brg_stage_input_grad(brg_stage *stage, int slot, int i, brg_tensor *out);
BRG_API brg_status brg_stage_release_input_grads(brg_stage *stage, int slot);

/* Empty a slot whatever its state (an abandoned micro-batch). Cannot fail. */
BRG_API void brg_stage_discard(brg_stage *stage, int slot);

/* Whether slot holds a micro-batch (anything from its first input buffer
 * until its backward is complete and its input gradients are released);
 * 0 for a slot out of range. */
BRG_API int brg_stage_slot_in_use(const brg_stage *stage, int slot);

/* Apply SGD_UPDATE or ADAM_UPDATE with learning rate lr to every trainable
 * parameter (step >= 1 is Adam's t), then zero the gradients. */
BRG_API brg_status brg_stage_step(brg_stage *stage, float lr, int64_t step);

/* Set every parameter gradient to zero (and, with deferred BatchNorm,
 * forget the statistics accumulated since the last step and restore the
 * running statistics: the mini-batch is abandoned). */
BRG_API brg_status brg_stage_zero_grads(brg_stage *stage);

/* Parameter `index` of model layer `layer` (brg_layer_param's order) as a
 * tensor on the stage's device, and its gradient (trainable parameters
 * only) or optimizer tensor `which` (0: velocity or m, 1: v). The layer must
 * belong to the stage. Views: valid while the stage lives. */
BRG_API brg_status brg_stage_param(const brg_stage *stage, int layer, int index, brg_tensor *out);
BRG_API brg_status brg_stage_grad(const brg_stage *stage, int layer, int index, brg_tensor *out);
BRG_API brg_status brg_stage_optimizer_state(const brg_stage *stage, int layer, int index, int which,
                                             brg_tensor *out);

/* Bytes of the device's arena the stage holds for good (weights, gradients,
 * optimizer state; rounded as the arena counts them), and in all right now
 * (that plus the micro-batches in flight; kernel workspace not included). */
BRG_API size_t brg_stage_persistent_bytes(const brg_stage *stage);
BRG_API size_t brg_stage_bytes_in_use(const brg_stage *stage);

/* brg_stage_persistent_bytes by kind: the weights slabs (parameters and
 * BatchNorm running statistics), the gradients and the optimizer state,
 * rounded as the arena counts them. Any pointer may be NULL. */
BRG_API void brg_stage_persistent_breakdown(const brg_stage *stage, size_t *weights, size_t *grads,
                                            size_t *optimizer);

/* ---- the single-device trainer ---- */

typedef struct brg_trainer brg_trainer;

typedef struct brg_trainer_config {
    int batch;       /* samples per optimizer step, >= 1 */
    int micro_batch; /* samples per forward/backward, 1..batch; 0 = batch */
    float lr;        /* > 0 */
    brg_optimizer_config optimizer;
    uint64_t seed;
} brg_trainer_config;

/* batch 64, whole-batch micro-batches, Adam with lr 1e-3, seed 1. */
BRG_API brg_trainer_config brg_trainer_config_init(void);

/* A trainer for the whole model on one device: one stage over every block.
 * Fails like brg_stage_create, or with BRG_ERR_INVALID_ARGUMENT for a bad
 * config. model must outlive the trainer. */
BRG_API brg_status brg_trainer_create(const brg_model *model, brg_device *dev, const brg_trainer_config *config,
                                      brg_trainer **out);
BRG_API void brg_trainer_destroy(brg_trainer *trainer);

/* One optimizer step on n (1..batch) samples in host memory: images holds
 * n x C x H x W floats (NCHW, the model's input shape), labels n class
 * indices. Runs the micro-batches forward and backward, then the update.
 * *loss receives the mean loss over the n samples before the update and
 * *correct how many were classified right; either may be NULL. On failure
 * no update happens and the gradients are zeroed. */
BRG_API brg_status brg_trainer_step(brg_trainer *trainer, const float *images, const int32_t *labels, int n,
                                    float *loss, int64_t *correct);

/* Mean loss and accuracy (0..1) over n samples in inference mode (running
 * BatchNorm statistics, no dropout), in chunks of the micro-batch size.
 * Changes nothing. Either output may be NULL. */
BRG_API brg_status brg_trainer_evaluate(brg_trainer *trainer, const float *images, const int32_t *labels,
                                        int64_t n, double *loss, double *accuracy);

BRG_API brg_stage *brg_trainer_stage(brg_trainer *trainer);
BRG_API int64_t brg_trainer_steps(const brg_trainer *trainer); /* optimizer steps done */
BRG_API void brg_trainer_set_lr(brg_trainer *trainer, float lr);

#ifdef __cplusplus
}
#endif

#endif /* BRIGADE_TRAIN_H */
