/* What class folders (folder.c) and segmentation folders (segfolder.c)
 * share: lists of names, reading a folder, the seeded validation split
 * (listing.c), and loading one segmentation sample for the source in
 * folder.c (segfolder.c). Private to data/. */
#ifndef BRIGADE_DATA_FOLDER_IMPL_H
#define BRIGADE_DATA_FOLDER_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "brigade/images.h"
#include "brigade/status.h"

/* A growing list of strings; start from {0}. */
typedef struct brg_names {
    char **v;
    int64_t n, cap;
} brg_names;

brg_status brg_names_add(brg_names *l, const char *s);
void brg_names_free(brg_names *l);

/* a/b into buf; BRG_ERR_IO naming both when it does not fit. */
brg_status brg_path_join(char *buf, size_t size, const char *a, const char *b);

/* Whether name ends in .jpg, .jpeg or .png (any case). */
int brg_is_image_name(const char *name);

/* The entries of dir (dot-names left out), each sorted in strcmp order, as
 * files or folders (symbolic links followed; a dangling one is a file).
 * BRG_ERR_IO naming dir when it cannot be read. */
brg_status brg_list_dir(const char *dir, brg_names *files, brg_names *dirs);

/* The validation part of a group of n samples (their indices in members,
 * shuffled in place): a Fisher-Yates shuffle on a splitmix64 stream of
 * (seed, group) puts round(fraction * n) of them in val (in_val[i] = 1).
 * Class folders split each class as a group; a segmentation folder is one
 * group. */
void brg_split_group(int64_t *members, int64_t n, double fraction, uint64_t seed, uint64_t group, char *in_val);

/* Segmentation sample i of f (segfolder.c): its image decoded at full size
 * into t->channels, its mask read, both checked (the mask has the image's
 * size; every value < classes or == ignore_label) and transformed together
 * under seed into image (t's C x H x W floats) and labels (H x W). On a
 * failure *culprit is the path of the file at fault (the image or the
 * mask). */
brg_status brg_seg_load(const brg_seg_folder *f, int64_t i, const brg_image_transform *t, int classes,
                        int32_t ignore_label, uint64_t seed, float *image, int32_t *labels, const char **culprit);

#endif
