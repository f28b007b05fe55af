/* brigade: models from other frameworks (docs/import.md).
 *
 * An imported model is a brg_model like any other: its layers are the
 * file's nodes translated one by one (some folded: a Pad into the next
 * convolution, a MatMul and its Add into one linear layer; some dropped: a
 * final Softmax, Identity, Flatten), and its blocks are found from the
 * graph, cut where one tensor alone crosses (for Inception and ResNet,
 * the module boundaries). The file's weights come with it, rearranged
 * into brigade's layout for each layer's parameters (brg_layer_param),
 * ready for a weights file (brg_model_save_weights).
 *
 * Anything the importer cannot translate exactly is refused, never
 * approximated: BRG_ERR_UNSUPPORTED naming the node, its op type and the
 * attribute, and listing what is supported; BRG_ERR_FORMAT for a file that
 * is not a well-formed model (truncated, wrong attribute types, a cycle, a
 * missing initializer). Nothing is half imported: on an error *out is NULL.
 */
#ifndef BRIGADE_IMPORT_H
#define BRIGADE_IMPORT_H

#include <stddef.h>
#include <stdint.h>

#include "brigade/model.h"
#include "brigade/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct brg_import brg_import;

/* Whether this build reads ONNX files (configure found protobuf-c and
 * onnx.proto). Without, brg_import_onnx returns BRG_ERR_UNSUPPORTED saying
 * what to install. */
BRG_API int brg_import_onnx_available(void);

/* Read an ONNX model (opsets up to 21; ops in docs/import.md). The
 * model's name is the file's base name without ".onnx". */
BRG_API brg_status brg_import_onnx(const char *path, brg_import **out);
/* The same from bytes in memory; source names it in messages. */
BRG_API brg_status brg_import_onnx_bytes(const void *data, size_t size, const char *source, brg_import **out);

/* Read a Keras model: the JSON of model.to_json() (Keras 2 and 3,
 * Functional and Sequential; layers in docs/import.md). Channels-last
 * models become channels-first; the weights are named "<layer>/kernel",
 * "<layer>/bias", "<layer>/gamma", "<layer>/beta", "<layer>/moving_mean",
 * "<layer>/moving_variance", in Keras's layouts, to bind (a JSON file holds
 * no values). The model's name is the Keras model's. */
BRG_API brg_status brg_import_keras(const char *path, brg_import **out);
BRG_API brg_status brg_import_keras_json(const char *text, size_t length, const char *source, brg_import **out);

/* By the file's name: ".onnx" brg_import_onnx, ".json" and ".keras"
 * brg_import_keras. BRG_ERR_INVALID_ARGUMENT, naming what the file is and
 * what is imported, for another name or a file clearly of another kind (an
 * image, a PyTorch or HDF5 file, weights) whatever its name. */
BRG_API brg_status brg_import_file(const char *path, brg_import **out);

BRG_API void brg_import_free(brg_import *import);

/* The imported model (finalized), owned by the import... */
BRG_API const brg_model *brg_import_model(const brg_import *import);
/* ...or handed to the caller, who then destroys it. */
BRG_API brg_model *brg_import_take_model(brg_import *import);

/* What the import changed on the way, one sentence each ("dropped the
 * final Softmax 'prob': brigade trains on logits"). */
BRG_API int brg_import_note_count(const brg_import *import);
BRG_API const char *brg_import_note(const brg_import *import, int index);

/* The model's parameters, as the file gives them. */
typedef struct brg_import_weight {
    int layer;           /* brg_model_get_layer index */
    int param;           /* brg_layer_param index */
    const char *source;  /* the file's tensor ("layer1.0.conv1.weight") */
    const float *values; /* brg_layer_param's shape and layout; NULL until bound (below) */
    int64_t count;
} brg_import_weight;

BRG_API int brg_import_weight_count(const brg_import *import);
BRG_API brg_status brg_import_get_weight(const brg_import *import, int index, brg_import_weight *out);

/* A file may declare a weight as a graph input instead of giving its
 * values (ONNX's node tests do). Give them here, in the file's layout (the
 * import rearranges them as it rearranges stored ones); count must be the
 * tensor's element count. BRG_ERR_INVALID_ARGUMENT when source is no such
 * input; BRG_ERR_FORMAT when a value is NaN or infinite (as for weights
 * stored in the file). */
BRG_API brg_status brg_import_bind(brg_import *import, const char *source, const float *values, int64_t count);

/* Whether every parameter has values (stored in the file or bound). */
BRG_API int brg_import_has_weights(const brg_import *import);

#ifdef __cplusplus
}
#endif

#endif /* BRIGADE_IMPORT_H */
