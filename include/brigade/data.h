/* brigade: data sets in host memory, and the IDX files they come from.
 *
 * Fashion-MNIST ships as four IDX files (Debian: dataset-fashion-mnist, in
 * /usr/share/datasets/fashion-mnist). The readers here take them gzip
 * compressed or plain, check every field of the header and every byte count,
 * and turn the pixels into float32 NCHW in [0, 1] and the labels into int32.
 * A data set lives in ordinary host memory (malloc), not in a device arena;
 * a training step copies its micro-batches out with brg_dataset_batch or
 * brg_dataset_gather. See docs/data.md.
 */
#ifndef BRIGADE_DATA_H
#define BRIGADE_DATA_H

#include <stdint.h>

#include "brigade/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Fashion-MNIST: 28x28 grey images in 10 classes. */
#define BRG_FASHION_MNIST_SIDE 28
#define BRG_FASHION_MNIST_CLASSES 10

/* Limits a header must respect before anything is allocated: at most this
 * many items in one IDX file, and at most this many bytes per item. */
#define BRG_IDX_MAX_COUNT INT64_C(2147483647)
#define BRG_IDX_MAX_ITEM_BYTES INT64_C(67108864)

/* A labelled image set. images holds count x channels x height x width
 * floats (NCHW, contiguous, sample i at images + i * C*H*W), scaled from
 * bytes so that 0 -> 0.0f and 255 -> 1.0f exactly; labels holds count class
 * indices in 0..classes-1. Both arrays belong to the data set. */
typedef struct brg_dataset {
    int64_t count;
    int channels, height, width;
    int classes;
    float *images;
    int32_t *labels;
} brg_dataset;

typedef enum brg_split {
    BRG_SPLIT_TRAIN = 0, /* train-*: 60000 samples */
    BRG_SPLIT_TEST = 1,  /* t10k-*: 10000 samples */
} brg_split;

/* Read an IDX image file (magic 0x00000803: unsigned bytes, dimensions
 * count x height x width), gzip compressed or not, of any size within
 * BRG_IDX_MAX_*. On success *images is a new array of count*height*width
 * floats in [0, 1] that the caller releases with brg_free(). On failure all
 * outputs are zero/NULL and the last-error message names path and what is
 * wrong: BRG_ERR_IO when the file cannot be opened or read, BRG_ERR_FORMAT
 * for a bad magic number, bad dimensions, a truncated or corrupt gzip
 * stream, a payload shorter than the header declares, or bytes after it;
 * BRG_ERR_HOST_MEMORY when malloc fails. Memory grows with the data actually
 * read, so a header that lies about its size cannot make it allocate much
 * more than the file holds. */
BRG_API brg_status brg_idx_read_images(const char *path, int64_t *count, int *height, int *width,
                                       float **images);

/* Read an IDX label file (magic 0x00000801: unsigned bytes, one dimension),
 * gzip compressed or not. On success *labels is a new array of count values
 * in 0..255 that the caller releases with brg_free(). Errors as for
 * brg_idx_read_images. */
BRG_API brg_status brg_idx_read_labels(const char *path, int64_t *count, int32_t **labels);

/* The folder brg_fashion_mnist_load reads when given none: $BRIGADE_DATA_DIR
 * when it is set and not empty, otherwise the folder chosen at configure
 * time (--with-fashion-mnist, default /usr/share/datasets/fashion-mnist).
 * Never NULL; the string is the environment's or a constant, so it changes
 * only when the environment does. */
BRG_API const char *brg_fashion_mnist_default_dir(void);

/* Load one split of Fashion-MNIST from dir (NULL or "": the default folder
 * above): <prefix>-images-idx3-ubyte.gz and <prefix>-labels-idx1-ubyte.gz with
 * prefix "train" or "t10k"; where a .gz file is missing its uncompressed twin
 * (same name without .gz) is used. Checks that images are 28x28, that both
 * files hold the same number of samples and that every label is in 0..9;
 * any number of samples is accepted, so cut-down copies load too. On success
 * *out is a new data set with channels 1 and classes 10, for
 * brg_dataset_destroy. On failure *out is NULL and the message names the
 * file: a missing file says how to install the package or where to point
 * --data-dir / BRIGADE_DATA_DIR. Statuses as for brg_idx_read_images, plus
 * BRG_ERR_INVALID_ARGUMENT for a NULL out or an unknown split. */
BRG_API brg_status brg_fashion_mnist_load(const char *dir, brg_split split, brg_dataset **out);

/* Free a data set and its arrays. Accepts NULL. */
BRG_API void brg_dataset_destroy(brg_dataset *ds);

/* Floats in one sample: channels * height * width. */
BRG_API int64_t brg_dataset_sample_size(const brg_dataset *ds);

/* Copy samples [start, start + n) into caller memory: images gets
 * n * brg_dataset_sample_size(ds) floats, labels n values; either may be
 * NULL to skip it. Fails with BRG_ERR_INVALID_ARGUMENT, writing nothing,
 * when the range does not lie inside 0..count or n is negative. */
BRG_API brg_status brg_dataset_batch(const brg_dataset *ds, int64_t start, int64_t n, float *images,
                                     int32_t *labels);

/* As brg_dataset_batch for the samples index[0..n), in that order (a window
 * of a shuffled order, for example). Every index is checked before anything
 * is copied: one outside 0..count-1 fails with BRG_ERR_INVALID_ARGUMENT,
 * naming its position, and writes nothing. */
BRG_API brg_status brg_dataset_gather(const brg_dataset *ds, const int64_t *index, int64_t n, float *images,
                                      int32_t *labels);

/* Fill order[0..n) with a permutation of 0..n-1 that depends only on seed
 * and n (Fisher-Yates on a splitmix64 stream), so a run can be repeated on
 * any machine. Fails with BRG_ERR_INVALID_ARGUMENT for a negative n or a
 * NULL order with n > 0. */
BRG_API brg_status brg_shuffle_indices(int64_t *order, int64_t n, uint64_t seed);

#ifdef __cplusplus
}
#endif

#endif /* BRIGADE_DATA_H */
