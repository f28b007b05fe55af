/* brigade: JSON model files (format: docs/model-format.md).
 *
 * A model file holds the same graph as the C builder: the input shape,
 * blocks in order, each with its layers, their parameters and the names of
 * the tensors they read and write, and the output. Reading goes through the
 * builder, so a file gets the same shape checks as code; every error names
 * the file and the JSON location (line, column and path such as
 * blocks[3].layers[2].kernel) and the reason.
 */
#ifndef BRIGADE_MODELFILE_H
#define BRIGADE_MODELFILE_H

#include <stddef.h>

#include "brigade/model.h"
#include "brigade/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Read a model file. BRG_ERR_IO if it cannot be read, BRG_ERR_FORMAT for
 * malformed JSON or content, BRG_ERR_SHAPE when shapes do not fit,
 * BRG_ERR_INVALID_ARGUMENT for a file that is clearly of another kind (an
 * image, a PyTorch or HDF5 file, weights), named as such. */
BRG_API brg_status brg_model_load_json(const char *path, brg_model **out);

/* The same from text in memory; source names it in messages. */
BRG_API brg_status brg_model_parse_json(const char *text, size_t length, const char *source, brg_model **out);

/* Write a finalized model; brg_model_load_json reads it back to an equal
 * model (brg_model_equal). */
BRG_API brg_status brg_model_save_json(const brg_model *model, const char *path);

/* The JSON text of a finalized model; the caller frees *text with brg_free(). */
BRG_API brg_status brg_model_to_json(const brg_model *model, char **text);

#ifdef __cplusplus
}
#endif

#endif /* BRIGADE_MODELFILE_H */
