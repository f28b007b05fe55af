/* brigade: what the importers (ONNX today, Keras next) share (internal to
 * the model room and the tests).
 *
 * An importer translates the file's nodes one by one into a flat list of
 * layers through import_add_layer, which adds each to a one-block probe
 * model so that shapes are inferred and checked exactly as brg_model_add
 * does, and the importer reads them back (import_tensor). Parameters are
 * registered with the file's values rearranged into brigade's layout, or
 * left to be bound (brg_import_bind). import_finish then finds the cut
 * points of the probe's layers (model/cuts.c), builds the final model
 * block by block and hands it to the brg_import. */
#ifndef BRIGADE_IMPORT_IMPL_H
#define BRIGADE_IMPORT_IMPL_H

#include <stdint.h>

#include "base/internal.h"
#include "brigade/import.h"
#include "brigade/model.h"

#ifdef __cplusplus
extern "C" {
#endif

/* How a file's tensor becomes a brigade parameter. */
typedef enum import_layout {
    IMPORT_AS_IS,     /* the same elements in the same order */
    IMPORT_TRANSPOSE, /* the file holds [rows, cols] of brigade's [cols, rows] */
    IMPORT_HWIO,      /* a convolution's [kh, kw, in, out] (Keras) of brigade's [out, in, kh, kw] */
    IMPORT_HWC_ROWS,  /* a dense kernel [h * w * c, out] after a channels-last Flatten, of brigade's
                       * [out, c * h * w] */
} import_layout;

/* One layer of the flat list: brg_model_add's arguments. */
typedef struct import_layer {
    char name[BRG_NAME_MAX];
    brg_layer_desc desc;
    int n_inputs;
    char inputs[BRG_LAYER_MAX_INPUTS][BRG_NAME_MAX]; /* tensors: "input" or earlier layers' names */
} import_layer;

typedef struct import_param {
    int layer, param; /* brg_model_get_layer / brg_layer_param indices */
    char *source;     /* the file's name for it */
    import_layout layout;
    int64_t dims[4];  /* the file's shape: TRANSPOSE [rows, cols], HWIO [kh, kw, in, out],
                       * HWC_ROWS [h, w, c, out] */
    int64_t count;
    float *values;    /* brigade's layout; NULL until bound */
} import_param;

struct brg_import {
    char name[BRG_NAME_MAX];
    brg_model *probe; /* one block "all": shapes while translating */
    brg_model *model; /* the result, after import_finish */
    import_layer *layers;
    int n_layers, cap_layers;
    import_param *params;
    int n_params, cap_params;
    char **notes;
    int n_notes, cap_notes;
    char (*reserved)[BRG_NAME_MAX]; /* the file's own layer names, kept from made-up ones */
    int n_reserved, cap_reserved;
};

/* A new import whose model is called name with input [c, h, w]. */
brg_status import_begin(const char *name, int64_t c, int64_t h, int64_t w, brg_import **out);

/* Record a note for the summary. */
void import_note(brg_import *imp, const char *fmt, ...) BRG_PRINTF(2, 3);

/* Keep name (a layer the file names, added later) from import_unique_name. */
brg_status import_reserve_name(brg_import *imp, const char *name);

/* A name no layer has yet and none reserved: base, else base_2, base_3, ...
 * (cut to fit). */
void import_unique_name(const brg_import *imp, const char *base, char *out);

/* Append a layer (brg_model_add's checks and shape inference); its index
 * in *index when not NULL. */
brg_status import_add_layer(brg_import *imp, const char *name, const brg_layer_desc *desc,
                            const char *const *inputs, int n_inputs, int *index);

/* The shape of a tensor made so far ("input" or a layer's name), as a
 * copy: the probe model's tables move as layers are added. */
typedef struct import_shape {
    int64_t c, h, w;
} import_shape;
import_shape import_tensor(const brg_import *imp, const char *name);

/* Register parameter `param` ("weight", "gamma", ...) of layer `layer`
 * from the file's tensor source, of shape dims (see import_layout; unused
 * for IMPORT_AS_IS), with its values in the file's layout (or NULL: bound
 * later). The caller has checked the file's shape; count is its element
 * count, which must be the parameter's. */
brg_status import_add_param(brg_import *imp, int layer, const char *param, const char *source,
                            import_layout layout, const int64_t dims[4], const float *values, int64_t count);

/* What to do about an op or layer an importer does not translate: its
 * names (op types or class names, comma-separated) and the advice. */
typedef struct import_remedy {
    const char *names;
    const char *advice;
} import_remedy;

/* The advice of the entry in table (n entries) that lists name, or a
 * general one (what the supported list is for). Can't fail. */
const char *import_remedy_for(const import_remedy *table, size_t n, const char *name);

/* Cut the flat list into blocks, build and finalize the model (its output:
 * tensor output). */
brg_status import_finish(brg_import *imp, const char *output);

/* ---- ONNX (onnx-tensor.c; only when built with BRG_HAVE_ONNX) ---- */

#define IMPORT_MAX_DIMS 8

/* A TensorProto's contents: float for every numeric type, and int64 too
 * for integer ones. */
typedef struct onnx_tensor {
    int ndim;
    int64_t dims[IMPORT_MAX_DIMS];
    int64_t count;
    int integer;  /* an integer type: i holds the exact values */
    float *f;
    int64_t *i;
} onnx_tensor;

void onnx_tensor_free(onnx_tensor *t);

/* A serialized TensorProto file (the node tests' input_0.pb, output_0.pb). */
brg_status onnx_tensor_read_file(const char *path, onnx_tensor *out, char *name, size_t name_size);

/* ---- Keras (keras-archive.c) ---- */

/* A .keras archive: its config.json through brg_import_keras_json, its
 * weights from model.weights.h5. formats.c's brg_import_keras chooses
 * between the two forms, so that the JSON reader (keras.c) and the archive
 * reader each call only downwards. */
brg_status keras_archive_import(const char *path, brg_import **out);

#ifdef __cplusplus
}
#endif

#endif /* BRIGADE_IMPORT_IMPL_H */
