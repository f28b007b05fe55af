/* brigade: pipelined training across devices.
 *
 * A pipeline runs a description (brg_pipeline_desc: a model, what each
 * device holds of it, a schedule's action lists, the micro-batch size and
 * the optimizer) on caller-given devices: one program per device (the
 * stages its part holds), run by the executor, one worker thread per
 * device, with activations and gradients sent device to device. A plan
 * (brigade/plan.h) produces such a description (brg_plan_pipeline_desc),
 * and because a pipeline's programs are the ones the plan dry-ran, every
 * device's arena peak during training is the plan's peak_bytes for that
 * device, to the byte. A caller can also build one without the planner,
 * for example with a custom schedule (brg_schedule_create).
 *
 * A step takes one mini-batch of exactly micro-batches x micro-batch size
 * samples and ends with one optimizer step on every device after the
 * flush. Gradients equal those of a single device running the whole batch
 * (within rounding), for every schedule.
 *
 * Not thread-safe: one thread drives a pipeline (which runs its own
 * workers).
 */
#ifndef BRIGADE_PIPELINE_H
#define BRIGADE_PIPELINE_H

#include <stddef.h>
#include <stdint.h>

#include "brigade/device.h"
#include "brigade/distributed.h"
#include "brigade/metrics.h"
#include "brigade/program.h"
#include "brigade/schedule.h"
#include "brigade/status.h"
#include "brigade/train.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct brg_pipeline brg_pipeline;

/* What a pipeline runs. Device d of the schedule holds parts[d] (the
 * schedule's chunks: one block range per chunk, virtual stage c * p + d for
 * chunk c, in model order: virtual stage 0 starts at block 0 and the last
 * ends at the model's last block). A mini-batch is the schedule's
 * micro-batches of micro_batch samples each. */
typedef struct brg_pipeline_desc {
    const brg_model *model;          /* finalized */
    const brg_schedule *schedule;    /* p devices, v chunks, m micro-batches */
    const brg_device_part *parts;    /* [p] */
    int micro_batch;                 /* >= 1 */
    brg_optimizer_config optimizer;
} brg_pipeline_desc;

typedef struct brg_pipeline_options {
    uint64_t seed;            /* parameter initialization and dropout masks (as brg_stage_config) */
    /* 1: BatchNorm still normalizes each micro-batch with its own statistics,
     * but the running averages are updated once per mini-batch, in the
     * optimizer step, from statistics accumulated over all its micro-batches
     * (a deferred BatchNorm): they then equal those of a single device
     * running the whole batch. 0 (default): every micro-batch updates them. */
    int deferred_batchnorm;
    /* Messages a channel between two devices holds, 1..4, each in a
     * receive buffer in the receiving device's arena; 0: the parts'
     * (the plan's), BRG_CHANNEL_CAPACITY_DEFAULT (1) unless they say
     * otherwise. A capacity other than the plan's changes each device's
     * memory from what the plan says. */
    int channel_capacity;
    /* 1: keep each action's start and end time of the latest step
     * (brg_pipeline_action_times); costs two clock reads per action. */
    int record_times;
    /* Labels equal to it count nowhere (no loss, no gradient, not in the
     * accuracy): the void of segmentation masks, such as 255. Only a value
     * outside [0, classes) ignores anything; the default 0 ignores nothing. */
    int32_t ignore_label;
    /* The processes this pipeline spans (brigade/distributed.h); NULL: this
     * one holds every device. With several ranks, the devices given are
     * NULL where another rank holds them, every rank creates the pipeline
     * from the same description (checked: a hash compared over the
     * ranks), and steps, evaluations and predictions are collective:
     * every rank calls them in the same order, with the images and labels
     * needed only on the rank of virtual stage 0. Their results (loss,
     * counts, metrics, outputs, every device's memory) are every rank's.
     * A replica's world (brg_world_split_replicas, D replicas) makes this
     * pipeline one of D copies: a step then takes D x the description's
     * mini-batch, the same samples given on every replica's rank of
     * virtual stage 0 (or that rank's share alone: the description's
     * mini-batch of samples, brg_pipeline_share_sample saying which, so
     * that each replica reads only its own); replica r runs
     * micro-batches r, r + D, r + 2D, ... of it, every device's gradients are summed over its replicas before
     * the update (the loss is the mean over the whole mini-batch, so the
     * gradients and the step are one device's on all of it, within
     * rounding), and BatchNorm statistics are merged (deferred: exactly as
     * one device's; otherwise the running averages are averaged).
     * Evaluations and predictions run on each replica by itself: give
     * each its own samples and add the figures up with
     * brg_pipeline_merge_replicas (or give every replica all of them). */
    const brg_world *world;
} brg_pipeline_options;

/* seed 1, no deferred BatchNorm, the parts' channel capacity, no times,
 * no ignored label. */
BRG_API brg_pipeline_options brg_pipeline_options_init(void);

/* A pipeline for desc on devices[0..n_devices), n_devices equal to the
 * schedule's devices; device d runs parts[d]. The devices must be
 * distinct and, with the model and the schedule, outlive the pipeline (the
 * parts and the optimizer are copied). Creates every device's program or
 * none (an out-of-memory names the device, the block and what was
 * allocated). The schedule is verified first (brg_schedule_verify with the
 * options' channel capacity): one that cannot run is
 * BRG_ERR_INVALID_ARGUMENT naming the devices that would wait and for
 * what. A device smaller than its part's peak but large enough for
 * its persistent memory is accepted: its steps then fail with
 * BRG_ERR_OUT_OF_MEMORY as described at brg_pipeline_step. */
BRG_API brg_status brg_pipeline_create(const brg_pipeline_desc *desc, brg_device *const *devices, int n_devices,
                                       const brg_pipeline_options *options, brg_pipeline **out);

/* Destroys the programs (not the devices, the model or the schedule).
 * Accepts NULL. */
BRG_API void brg_pipeline_destroy(brg_pipeline *pipeline);

/* One optimizer step on n samples in host memory, n = the mini-batch:
 * images n x C x H x W floats (NCHW), labels n class indices, or for a
 * model with per-pixel logits [classes, H, W] (segmentation) n x H x W
 * (brg_model_label_count per sample). *loss gets the mean loss over the
 * counted labels (all but the ignored ones) before the update, *correct
 * the labels predicted right (either may be NULL). On failure (any device: out of memory, a kernel
 * error; BRG_ERR_NUMERIC for a NaN or Inf loss, or in an activation or
 * gradient sent between devices) every worker stops, no update happens,
 * the step is not counted, every device is back to its persistent memory,
 * and the message names the device, the micro-batch and the layer (or the
 * tensor); the pipeline can take the next step. */
BRG_API brg_status brg_pipeline_step(brg_pipeline *pipeline, float lr, const float *images, const int32_t *labels,
                                     int n, double *loss, int64_t *correct);

/* With replicas (options.world), sample k (0 <= k < the description's
 * mini-batch) of this replica's share: its index in the whole mini-batch
 * of D x that (micro-batch k / m of the share is the mini-batch's
 * micro-batch (k / m) x D + replica, m the micro-batch size). A step
 * given n = the description's mini-batch takes the images and labels as
 * this share, in this order; given D x that, as the whole mini-batch. k
 * itself without replicas; -1 for NULL or k out of range. */
BRG_API int64_t brg_pipeline_share_sample(const brg_pipeline *pipeline, int64_t k);

/* brg_pipeline_step in two parts, e.g. to read the gradients between
 * them: forward_backward runs every micro-batch of n = the mini-batch's
 * samples and leaves the mini-batch's gradients in the stages (and, with
 * deferred BatchNorm, its statistics), failing as brg_pipeline_step does;
 * update then takes the optimizer step with learning rate lr (moving
 * deferred BatchNorm statistics), zeroes the gradients and counts the
 * step. */
BRG_API brg_status brg_pipeline_forward_backward(brg_pipeline *pipeline, const float *images,
                                                 const int32_t *labels, int n, double *loss, int64_t *correct);
BRG_API brg_status brg_pipeline_update(brg_pipeline *pipeline, float lr);

/* The labels the latest step's loss counted: n x labels per sample, less
 * the ignored ones (what *correct is out of). */
BRG_API int64_t brg_pipeline_counted_labels(const brg_pipeline *pipeline);

/* Mean loss and accuracy (0..1) over n >= 1 samples in inference mode
 * (running BatchNorm statistics, no dropout), through the devices in stage
 * order, in pieces of at most one micro-batch. Changes no parameter and no
 * statistic. Either output may be NULL. Labels as brg_pipeline_step's. */
BRG_API brg_status brg_pipeline_evaluate(brg_pipeline *pipeline, const float *images, const int32_t *labels,
                                         int64_t n, double *loss, double *accuracy);
/* The same, with top-1 and top-5 accuracy (0..1): the label among the five
 * largest probabilities, ties going to the lower class. Any output may be
 * NULL. */
BRG_API brg_status brg_pipeline_evaluate_top5(brg_pipeline *pipeline, const float *images, const int32_t *labels,
                                              int64_t n, double *loss, double *top1, double *top5);
/* The same evaluation, adding its loss and scores to metrics (made with
 * the model's classes and, usually, the options' ignore label): a test set
 * evaluated in pieces into one metrics object gives its pixel accuracy and
 * mean IoU (brigade/metrics.h). */
BRG_API brg_status brg_pipeline_evaluate_metrics(brg_pipeline *pipeline, const float *images, const int32_t *labels,
                                                 int64_t n, brg_metrics *metrics);

/* With replicas (options.world): metrics, each replica's own (from
 * evaluating its own samples), summed over the replicas, so that every
 * rank holds the whole evaluation's. A collective call over the job;
 * nothing to do without replicas. */
BRG_API brg_status brg_pipeline_merge_replicas(brg_pipeline *pipeline, brg_metrics *metrics);

/* The model's outputs for n >= 1 samples in host memory (images n x C x
 * H x W floats, NCHW), computed as brg_pipeline_evaluate computes them:
 * inference mode (running BatchNorm statistics, no dropout), through the
 * devices in stage order, in pieces of at most one micro-batch. outputs
 * gets the last layer's output, the logits before the softmax, n x
 * brg_model_classes(model) floats (x H x W for per-pixel logits, NCHW),
 * sample by sample. Changes no parameter
 * and no statistic; the outputs do not depend on the partition or the
 * devices (within rounding). A failure names the device and the samples,
 * as brg_pipeline_evaluate's does. */
BRG_API brg_status brg_pipeline_predict(brg_pipeline *pipeline, const float *images, int64_t n, float *outputs);

/* The description the pipeline runs (its parts are the pipeline's copy). */
BRG_API const brg_pipeline_desc *brg_pipeline_get_desc(const brg_pipeline *pipeline);
BRG_API int brg_pipeline_devices(const brg_pipeline *pipeline);
BRG_API brg_device *brg_pipeline_device(const brg_pipeline *pipeline, int device);
BRG_API int64_t brg_pipeline_steps(const brg_pipeline *pipeline); /* optimizer steps done */
/* Continue as if `steps` optimizer steps had been done (a resumed run):
 * the next step is steps + 1 for Adam's bias correction and the dropout
 * masks. steps >= 0; between steps. */
BRG_API brg_status brg_pipeline_set_steps(brg_pipeline *pipeline, int64_t steps);

/* The stage of device's chunk (0 unless interleaved), e.g. to read
 * parameters and gradients with brg_stage_param / brg_stage_grad; NULL for
 * indices out of range. The stage of the layer's block holds the layer. */
BRG_API brg_stage *brg_pipeline_stage(const brg_pipeline *pipeline, int device, int chunk);

/* The world the pipeline spans (its options'; NULL in one process). */
BRG_API const brg_world *brg_pipeline_world(const brg_pipeline *pipeline);

/* State tensors between a device and host memory (count floats, between
 * steps): parameter `param` of model layer `layer` in brg_layer_param's
 * order (a BatchNorm running statistic included) for which = -1, else the
 * optimizer's tensor `which` of it (brg_stage_optimizer_state). In one
 * process they copy the tensor out or in. In a distributed pipeline,
 * read is collective (every rank reads every tensor in the same order):
 * the values arrive in host on the job's rank 0 only, sent by the rank
 * holding the layer in replica 0 (replicas hold the same state), and host
 * is left as it was on the others; a failure is the holder's alone, so
 * the caller agrees on the outcome (brg_world_any). write copies host in
 * on the rank holding the layer and does nothing on the others: every
 * rank gives the same values. */
BRG_API brg_status brg_pipeline_read_state(const brg_pipeline *pipeline, int layer, int param, int which, float *host,
                                           size_t count);
BRG_API brg_status brg_pipeline_write_state(brg_pipeline *pipeline, int layer, int param, int which, const float *host,
                                            size_t count);

/* Device d's memory: persistent bytes (weights, gradients, optimizer
 * state) and its arena's peak since the device was made (kernel workspace
 * included; brg_device_in_use gives the bytes in use). After steps on
 * devices used for nothing else, peak_bytes is the dry run's (a plan's
 * peak_bytes). */
BRG_API brg_status brg_pipeline_memory(const brg_pipeline *pipeline, int device, brg_memory_report *report);

/* With options->record_times: when each action of device's list (the
 * schedule's order, brg_schedule_action_count entries) started and ended
 * in the latest successful step (or brg_pipeline_forward_backward), in
 * seconds since that step began (CLOCK_MONOTONIC; a receive's time
 * includes its wait for the message). *start
 * and *end stay valid until the next step. Under several ranks (a world),
 * every rank has every device's times, each since its own rank's start of
 * the step (the ranks start within a collective's latency of each other),
 * and every rank must record them. BRG_ERR_INVALID_ARGUMENT when times are
 * not recorded or no step has run. */
BRG_API brg_status brg_pipeline_action_times(const brg_pipeline *pipeline, int device, const double **start,
                                             const double **end);

/* Wall time of the latest successful step (seconds), forward and backward
 * of every micro-batch and the optimizer step. */
BRG_API double brg_pipeline_last_step_seconds(const brg_pipeline *pipeline);

/* Of device's sends in the latest step (options.record_times): the
 * seconds their copies ran, and how much of that the device was computing
 * meanwhile (transfer time hidden behind computation; 0 on synchronous
 * devices, where a send copies before the next action starts). */
BRG_API brg_status brg_pipeline_copy_times(const brg_pipeline *pipeline, int device, double *copy_s,
                                           double *hidden_s);

/* Bytes the latest step moved between host memory and the devices: the
 * inputs and labels in, and what the host reads back: per micro-batch its
 * loss and count of correct answers (8 bytes), per device of a pipeline the
 * flag of its messages' finite check (4 bytes). Messages between devices go
 * device to device and are not counted. */
BRG_API uint64_t brg_pipeline_host_bytes(const brg_pipeline *pipeline);

#ifdef __cplusplus
}
#endif

#endif /* BRIGADE_PIPELINE_H */
