/* brigade: where a model can be cut into blocks (internal to the model
 * room): the importers cut their flat layer lists here, and
 * brg_model_split_blocks cuts a model's blocks finer. */
#ifndef BRIGADE_MODEL_CUTS_H
#define BRIGADE_MODEL_CUTS_H

#include "brigade/model.h"
#include "brigade/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* cut[i] = 1 for each layer first + i (0 <= i < count - 1) after which the
 * model may be cut within [first, first + count): one tensor alone is
 * alive across (made at or before it, read after it; the model's input
 * and tensors of other blocks count), and the next layer is not an
 * elementwise follower of it (BatchNorm, ReLU, Dropout), which stays with
 * the layer before. Works on a model being built. */
brg_status brg_model_cut_points(const brg_model *m, int first, int count, unsigned char *cut);

/* A name for layers [first, first + count): their names' longest common
 * prefix of whole components (separated by '.' or '_': "layer1.0" of
 * "layer1.0.conv1", "conv2_block1" of "conv2_block1_1_conv"), else the
 * name of the range's last Concat or Add ("mixed0"), else its first
 * layer's name. */
void brg_model_range_name(const brg_model *m, int first, int count, char out[BRG_NAME_MAX]);

/* base, or base_2, base_3, ... (cut to fit): a block name m has not yet,
 * nor has `reserved` (may be NULL) but for its block `own`. */
void brg_model_unique_block_name(const brg_model *m, const brg_model *reserved, int own, const char *base,
                                 char out[BRG_NAME_MAX]);

#ifdef __cplusplus
}
#endif

#endif /* BRIGADE_MODEL_CUTS_H */
