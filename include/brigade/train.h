/* brigade: training. Optimizers, stages (a block range of a model bound
 * to one device) as pipelines and trainers expose them, and the
 * single-device trainer.
 *
 * A stage holds, in its device's arena, the parameters of its layers, their
 * gradients and the optimizer state (the persistent memory), and per
 * micro-batch in flight what its backward will read (the stash, see
 * docs/training.md for the exact rule). It never allocates device memory
 * anywhere else, so a capped device caps it; running out names the stage,
 * the layer and what was being allocated. Here a stage can be read: its
 * range, its parameters, gradients, optimizer state and memory. How
 * micro-batches go through one (the slot protocol programs drive) is
 * internal: train/stage.h.
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

/* "sgd" or "adam", and back: BRG_ERR_INVALID_ARGUMENT with a message for
 * an unknown name. */
BRG_API const char *brg_optimizer_name(brg_optimizer_kind kind);
BRG_API brg_status brg_optimizer_parse(const char *name, brg_optimizer_kind *kind);

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
    /* 1: synchronized BatchNorm. A train forward normalizes with the
     * statistics of the micro-batch of every replica at once (each
     * replica's micro-batch of the same index), merged on the host, and
     * the backward goes through them with sums over the replicas, so D
     * replicas of micro-batch n compute what one device does with
     * micro-batch D x n. The replicas are joined by a gather hook (the
     * executor's; without one the stage is its own only replica). The
     * stage then holds 2 x its widest BatchNorm's channels of device
     * memory more, for the sums. */
    int sync_batchnorm;
    /* Last stage: labels equal to it count nowhere (no loss, no gradient;
     * the void of segmentation masks, such as 255) when it is outside
     * [0, classes); one inside, such as the 0 of a zeroed config, ignores
     * nothing. */
    int32_t ignore_label;
    /* The channel block the tensors entering and leaving the stage may
     * travel in: 0 (they are plain NCHW, and so is everything tied to them
     * in the stage), or the device's block (brg_device_channel_block) when
     * the stages on both sides of every edge compute in that block. Then
     * each tensor takes the layout it has in the whole model (every stage
     * decides it alike, so sender and receiver agree), and messages carry
     * blocked bytes as they are: nothing is converted at the edges. */
    int edge_block;
} brg_stage_config;

BRG_API brg_device *brg_stage_device(const brg_stage *stage);
BRG_API const brg_model *brg_stage_model(const brg_stage *stage);
BRG_API const brg_stage_config *brg_stage_get_config(const brg_stage *stage);
BRG_API int brg_stage_is_first(const brg_stage *stage); /* holds block 0: its input is the model input */
BRG_API int brg_stage_is_last(const brg_stage *stage);  /* holds the last block: it computes the loss */

/* Parameter `index` of model layer `layer` (brg_layer_param's order) as a
 * tensor on the stage's device, and its gradient (trainable parameters
 * only) or optimizer tensor `which` (0: velocity or m, 1: v). The layer must
 * belong to the stage. Views: valid while the stage lives. */
BRG_API brg_status brg_stage_param(const brg_stage *stage, int layer, int index, brg_tensor *out);
BRG_API brg_status brg_stage_grad(const brg_stage *stage, int layer, int index, brg_tensor *out);
BRG_API brg_status brg_stage_optimizer_state(const brg_stage *stage, int layer, int index, int which,
                                             brg_tensor *out);

/* The channel block (brigade/tensor.h) the stage keeps model tensor t's
 * activation and gradient in: 0 for plain NCHW, always for the stage's
 * inputs and outputs and for tensors outside it. */
BRG_API int brg_stage_tensor_layout(const brg_stage *stage, int t);

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
    int32_t ignore_label; /* as brg_stage_config's: outside [0, classes) it counts nowhere; 0 ignores nothing */
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
