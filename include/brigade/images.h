/* brigade: images from files. JPEG and PNG decoding, the resize-crop-flip-
 * normalize transform, and class folders in the layout of torchvision's
 * ImageFolder and Keras's image_dataset_from_directory:
 *
 *     DIR/cat/001.jpg   DIR/cat/002.png   DIR/dog/xyz.jpeg   ...
 *
 * one subfolder per class, classes numbered in the sorted order of their
 * names; and segmentation folders, images beside PNG label maps:
 *
 *     DIR/images/001.jpg   DIR/masks/001.png   ...
 *
 * See docs/data.md.
 */
#ifndef BRIGADE_IMAGES_H
#define BRIGADE_IMAGES_H

#include <stddef.h>
#include <stdint.h>

#include "brigade/loader.h"
#include "brigade/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Images larger than this many pixels are refused before anything is
 * allocated for them (a corrupt header can claim 65535 x 65535). */
#define BRG_IMAGE_MAX_PIXELS (INT64_C(1) << 28)

/* A decoded image: height x width x channels bytes, row-major, channels
 * interleaved (1: grey, 3: RGB). pixels is malloc'd; brg_image_free. */
typedef struct brg_image {
    int width, height, channels;
    uint8_t *pixels;
} brg_image;

/* Decode a JPEG (libjpeg-turbo's TurboJPEG) or PNG (libspng) held in
 * memory, recognised by its first bytes, into `channels` (1 or 3)
 * channels: grey, RGB, RGBA (alpha dropped), palette and 16-bit PNGs, and
 * grey, YCbCr and CMYK/YCCK JPEGs (taken as Adobe's inverted CMYK) are
 * converted; grey from colour is ITU-R 601 luma. min_side > 0 lets a JPEG
 * decode at a reduced scale (its DCT scaling: 7/8, 3/4, ... 1/8) as long as
 * the shorter side stays at least min_side, and a PNG of more than 2^22
 * pixels reduced by the largest integer factor that does (k x k boxes
 * averaged while its rows stream, so it is never held whole); 0 decodes at
 * full size. name (a path, or NULL) is put in messages. A corrupt or
 * truncated file (any libjpeg warning included), an empty buffer, a file
 * that is neither format, or one above BRG_IMAGE_MAX_PIXELS gives
 * BRG_ERR_FORMAT naming it, with *out zeroed. */
BRG_API brg_status brg_image_decode(const void *bytes, size_t size, int channels, int min_side, const char *name,
                                    brg_image *out);

/* Read a whole file and decode it as above; BRG_ERR_IO when it cannot be
 * read. */
BRG_API brg_status brg_image_read(const char *path, int channels, int min_side, brg_image *out);

/* Free an image's pixels and zero it. Accepts NULL. */
BRG_API void brg_image_free(brg_image *image);

/* Decode a segmentation mask held in memory: a PNG label map, grey or
 * palette, 1 to 8 bits a pixel, into a 1-channel image whose bytes are the
 * stored values (a grey level or a palette index, unscaled: a 1-bit mask
 * gives 0 and 1). RGB, alpha and 16-bit PNGs, JPEGs (lossy), empty and
 * corrupt files give BRG_ERR_FORMAT naming name (a path, or NULL), with
 * *out zeroed. */
BRG_API brg_status brg_mask_decode(const void *bytes, size_t size, const char *name, brg_image *out);

/* Read a whole file and decode it as a mask; BRG_ERR_IO when it cannot be
 * read. */
BRG_API brg_status brg_mask_read(const char *path, brg_image *out);

/* Encode height x width x channels bytes (1, 3 or 4 channels) as a PNG
 * file (8-bit grey, RGB or RGBA). */
BRG_API brg_status brg_image_write_png(const char *path, const uint8_t *pixels, int width, int height, int channels);

/* Encode height x width x channels bytes (1 or 3 channels) as a baseline
 * JPEG of the given quality (1..100; 4:2:0 for colour). */
BRG_API brg_status brg_image_write_jpeg(const char *path, const uint8_t *pixels, int width, int height, int channels,
                                        int quality);

/* How an image becomes a model's input: the shorter side is resized to
 * `resize` pixels (the longer in proportion, truncated as torchvision's
 * Resize does; bilinear with antialiasing when shrinking, as PIL's), then
 * a height x width window is cut (a random one when `random`, else the
 * centre), flipped left-right half the time when `random` and `flip`, and
 * each channel c written as (value / 255 - mean[c]) / std[c] in CHW order.
 * resize 0 keeps the image's size. Only the window is resampled, not the
 * whole resized image. */
typedef struct brg_image_transform {
    int channels, height, width; /* the model's input */
    int resize;                  /* the shorter side's length before the crop; 0: as it is */
    int random;                  /* 1: random crop (and flip); 0: centre crop */
    int flip;                    /* with random: mirror half the images */
    float mean[3], std[3];
} brg_image_transform;

/* The evaluation transform for a channels x height x width input: resize
 * to round(max(height, width) / 0.875) (342 for 299, 256 for 224: the
 * ImageNet convention), centre crop; ImageNet's mean and std for 3
 * channels, mean 0 and std 1 (pixels in [0, 1]) for 1. Set random and
 * flip for training. */
BRG_API brg_image_transform brg_image_transform_init(int channels, int height, int width);

/* Apply t to image, writing t->channels * t->height * t->width floats to
 * out. seed alone chooses the window and the flip, so the same seed gives
 * the same pixels. BRG_ERR_INVALID_ARGUMENT when the channels differ or
 * the resized image is smaller than the window (naming both sizes). */
BRG_API brg_status brg_image_transform_apply(const brg_image *image, const brg_image_transform *t, uint64_t seed,
                                             float *out);

/* The segmentation transform: brg_image_transform_init's, but the resize
 * makes the shorter side the input's longer side (max(height, width)), so
 * a square image is cropped to exactly the input and a wider or taller one
 * only loses its slack along the longer axis (labels are lost at the
 * borders, unlike a classification crop that may drop some margin). Set
 * random and flip for training. */
BRG_API brg_image_transform brg_seg_transform_init(int channels, int height, int width);

/* Apply t to an image and its label mask together: the image as
 * brg_image_transform_apply does, the mask (1 channel, the image's size)
 * through the same window and flip from the same seed, resampled by
 * nearest neighbour (output pixel x of a resized axis takes source pixel
 * floor((x + 0.5) * in / out), PIL's NEAREST), so every label is one of
 * the mask's values and lies on the pixel it labels. Writes
 * t->channels x H x W floats to out and H x W labels (row-major) to
 * labels. BRG_ERR_FORMAT when the mask's size differs from the image's;
 * otherwise the errors of brg_image_transform_apply. The values are not
 * checked (brg_seg_source_create's source does that). */
BRG_API brg_status brg_image_transform_apply_mask(const brg_image *image, const brg_image *mask,
                                                  const brg_image_transform *t, uint64_t seed, float *out,
                                                  int32_t *labels);

/* The class folders under a folder. */
typedef struct brg_image_folder brg_image_folder;

/* Scan dir: its subfolders (dot-names left out, symbolic links followed)
 * are the classes, in strcmp order of their names; the .jpg, .jpeg and .png
 * files anywhere below a class folder (any case of the extension) are its
 * samples, a folder's files in name order before its subfolders' (the
 * order of torchvision's ImageFolder). Other files below the class
 * folders, and images directly in dir (they have no class), are left out
 * and listed as ignored, each with its reason. Fails with BRG_ERR_IO naming the folder that cannot be read,
 * and with BRG_ERR_FORMAT when dir holds no class folder (saying whether
 * it holds images directly). A class folder without images is kept (its
 * class number stays) and reported by brg_image_folder_class_count. */
BRG_API brg_status brg_image_folder_open(const char *dir, brg_image_folder **out);

/* Split a folder's samples into a training and a validation part: in every
 * class, a seeded shuffle puts round(fraction * count) samples in *val and
 * the rest in *train, each part in the folder's order. fraction in (0, 1). */
BRG_API brg_status brg_image_folder_split(const brg_image_folder *folder, double fraction, uint64_t seed,
                                          brg_image_folder **train, brg_image_folder **val);

BRG_API void brg_image_folder_destroy(brg_image_folder *folder);
BRG_API const char *brg_image_folder_dir(const brg_image_folder *folder);
BRG_API int brg_image_folder_classes(const brg_image_folder *folder);
BRG_API const char *brg_image_folder_class_name(const brg_image_folder *folder, int k);
BRG_API int64_t brg_image_folder_class_count(const brg_image_folder *folder, int k);
BRG_API int64_t brg_image_folder_count(const brg_image_folder *folder);
/* Sample i's path (dir/class/...) and class number. */
BRG_API const char *brg_image_folder_path(const brg_image_folder *folder, int64_t i);
BRG_API int32_t brg_image_folder_label(const brg_image_folder *folder, int64_t i);
/* Files left out: the path, and in *why (may be NULL) the reason. */
BRG_API int64_t brg_image_folder_ignored_count(const brg_image_folder *folder);
BRG_API const char *brg_image_folder_ignored(const brg_image_folder *folder, int64_t i, const char **why);

/* ---- segmentation folders ---- */

/* The label that marks a pixel to be ignored (no loss, not counted), by
 * default: 255, as in Pascal VOC's object outlines. */
#define BRG_SEG_IGNORE_LABEL 255

/* Images with their label maps: dir/images/NAME.jpg (or .jpeg, .png)
 * paired with dir/masks/NAME.png by the name without its extension. */
typedef struct brg_seg_folder brg_seg_folder;

/* Whether dir is laid out for segmentation: 1 when it holds images/ and
 * masks/, 2 when dir/train does (dir/val may then hold its own), 0
 * otherwise. Looks at the folders only. */
BRG_API int brg_seg_folder_detect(const char *dir);

/* Scan dir/images and dir/masks (files only, dot-names left out, symbolic
 * links followed). The pairs are the images (.jpg, .jpeg, .png, any case)
 * in strcmp order of their names, each with the .png mask of its name
 * stem (images/a.jpg <-> masks/a.png). Left out and listed as ignored,
 * each with its reason: an image without a mask, a mask without an image,
 * two images (or two masks) of the same stem, files that are not images
 * or not .png masks, subfolders. Fails with BRG_ERR_FORMAT when images/
 * or masks/ is missing, BRG_ERR_IO naming a folder that cannot be read.
 * A folder with no pair opens (brg_seg_folder_count 0). */
BRG_API brg_status brg_seg_folder_open(const char *dir, brg_seg_folder **out);

/* Split the pairs into a training and a validation part: a seeded shuffle
 * puts round(fraction * count) pairs in *val, the rest in *train, each in
 * the folder's order (the class folders' split with a single class).
 * fraction in (0, 1). The parts list no ignored files. */
BRG_API brg_status brg_seg_folder_split(const brg_seg_folder *folder, double fraction, uint64_t seed,
                                        brg_seg_folder **train, brg_seg_folder **val);

BRG_API void brg_seg_folder_destroy(brg_seg_folder *folder);
BRG_API const char *brg_seg_folder_dir(const brg_seg_folder *folder);
BRG_API int64_t brg_seg_folder_count(const brg_seg_folder *folder);
/* Pair i's image path (dir/images/...) and mask path (dir/masks/...). */
BRG_API const char *brg_seg_folder_image(const brg_seg_folder *folder, int64_t i);
BRG_API const char *brg_seg_folder_mask(const brg_seg_folder *folder, int64_t i);
/* Files left out: the path, and in *why (may be NULL) the reason. */
BRG_API int64_t brg_seg_folder_ignored_count(const brg_seg_folder *folder);
BRG_API const char *brg_seg_folder_ignored(const brg_seg_folder *folder, int64_t i, const char **why);

/* ---- folders as sources of samples ---- */

/* A folder as a source of samples for a loader: sample i is file i read,
 * decoded (JPEG at the smallest scale that keeps the resize) and
 * transformed with t under the seed the loader gives. With skip_bad, a
 * file that cannot be read or decoded is recorded (brg_image_source_bad)
 * and the next readable file in folder order takes its place, with its own
 * label, so a batch stays full and no label is wrong; without it the
 * loader stops with the file's error. The folder must outlive the source. */
typedef struct brg_image_source brg_image_source;

BRG_API brg_status brg_image_source_create(const brg_image_folder *folder, const brg_image_transform *t, int skip_bad,
                                           brg_image_source **out);

/* A segmentation folder as a source: sample i is pair i, the image decoded
 * at full size, the mask read (brg_mask_read), and both transformed with t
 * (brg_image_transform_apply_mask); its labels are the H x W mask labels
 * (label_count = t->height * t->width). A mask whose size differs from its
 * image's, or with a value that is neither below classes nor ignore_label,
 * makes the pair bad (BRG_ERR_FORMAT naming the mask, and for a value the
 * value, its pixel and how many pixels are wrong), as does an image or
 * mask that cannot be read or decoded; bad pairs are skipped or stop the
 * loader as in brg_image_source_create, and listed by the same calls (the
 * path is the file at fault). classes 1..256. */
BRG_API brg_status brg_seg_source_create(const brg_seg_folder *folder, const brg_image_transform *t, int classes,
                                         int32_t ignore_label, int skip_bad, brg_image_source **out);
BRG_API void brg_image_source_destroy(brg_image_source *src);
/* The loader's view of it (valid while src lives). */
BRG_API const brg_sample_source *brg_image_source_samples(const brg_image_source *src);
/* Bad files met so far, each once, in the order they were met: the path
 * (of the file at fault) and what was wrong. Safe to call while a loader
 * reads. */
BRG_API int64_t brg_image_source_bad_count(const brg_image_source *src);
BRG_API brg_status brg_image_source_bad(const brg_image_source *src, int64_t k, char *path, size_t path_size,
                                        char *why, size_t why_size);
/* Reads that met a bad file (and took the next one) since the last call;
 * the counter restarts at 0. */
BRG_API int64_t brg_image_source_take_skipped(brg_image_source *src);

#ifdef __cplusplus
}
#endif

#endif /* BRIGADE_IMAGES_H */
