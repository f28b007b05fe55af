/* brigade: a loader fills batches ahead of training with a pool of threads.
 *
 * A source says how to make sample i (read and decode a file, copy from a
 * data set in memory, synthesise it); a loader runs passes over an order of
 * sample indices in batches, with `threads` workers filling up to `depth`
 * batches ahead of the one the caller holds, in host memory. Every sample's
 * pixels depend only on its index and the pass's seed, never on which
 * thread made it or when, so a run is repeatable with any thread count.
 */
#ifndef BRIGADE_LOADER_H
#define BRIGADE_LOADER_H

#include <stddef.h>
#include <stdint.h>

#include "brigade/device.h"
#include "brigade/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A source of samples. read makes sample `index` (0..count-1) into image
 * (sample_floats floats) and label (label_count int32 labels), choosing any
 * randomness from seed; it may be called from several threads at once. On
 * failure it returns a status and sets the calling thread's message
 * (brg_last_error). label_count 0 or 1 is one class label per sample (so a
 * source that leaves it out gets that); a segmentation source has one label
 * per pixel of the model's input, H x W in row-major order. */
typedef struct brg_sample_source {
    int64_t count;
    int64_t sample_floats;
    brg_status (*read)(void *ctx, int64_t index, uint64_t seed, float *image, int32_t *label);
    void *ctx;
    int64_t label_count; /* labels per sample; 0 or 1: one */
} brg_sample_source;

typedef struct brg_loader_options {
    int threads; /* worker threads; 0: each batch is made in the caller's thread when it asks */
    int depth;   /* batches made ahead of the one the caller holds (>= 1) */
    /* Where the batches live: NULL, ordinary host memory; a device, its
     * brg_device_host_alloc memory (page-locked for a CUDA device, which
     * then copies them in without staging). The device must outlive the
     * loader. A batch is refilled only after the caller's next call to
     * brg_loader_next, so a device that synchronizes before then (a
     * pipeline step does) has finished reading it. */
    brg_device *host_memory_of;
} brg_loader_options;

BRG_API brg_loader_options brg_loader_options_init(void); /* 1 thread, depth 2 */

typedef struct brg_loader brg_loader;

/* A loader of batches of at most `batch` samples from src (which must
 * outlive it). Its host memory is depth + 1 batches of images and labels,
 * batch x label_count labels each (brg_loader_host_bytes). */
BRG_API brg_status brg_loader_create(const brg_sample_source *src, int64_t batch, const brg_loader_options *options,
                                     brg_loader **out);

/* Stop the loader's threads and free it. Accepts NULL. */
BRG_API void brg_loader_destroy(brg_loader *loader);

/* Start a pass over order[0..count) (NULL: the samples 0..count-1), in
 * batches of `batch` samples (the last one shorter when count is not a
 * multiple), beginning at batch first_batch; sample order[p] is made with
 * the seed mix(seed, order[p]). The order is copied. A pass in progress is
 * abandoned first (its reads in flight finish and are dropped). */
BRG_API brg_status brg_loader_start(brg_loader *loader, const int64_t *order, int64_t count, int64_t first_batch,
                                    uint64_t seed);

/* The next batch of the pass: *images (n * sample_floats floats) and
 * *labels (n * label_count labels, sample by sample) stay valid until the next call to next or start. *n is 0 at the
 * end of the pass. *waited (may be NULL) gets the seconds this call spent
 * waiting for the batch. A source's failure is returned here, with its
 * message, for the first batch that holds the failed sample; the pass is
 * then over. */
BRG_API brg_status brg_loader_next(brg_loader *loader, const float **images, const int32_t **labels, int64_t *n,
                                   double *waited);

/* Host bytes the loader's batches take, images and labels. */
BRG_API size_t brg_loader_host_bytes(const brg_loader *loader);

/* The seed sample `index` gets in a pass started with seed. */
BRG_API uint64_t brg_loader_sample_seed(uint64_t seed, int64_t index);

#ifdef __cplusplus
}
#endif

#endif /* BRIGADE_LOADER_H */
