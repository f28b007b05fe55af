/* Which importer reads a file: by its name's ending, ONNX (onnx.c),
 * Keras JSON (keras.c) or a .keras archive (keras-archive.c). Only this
 * file calls across to them, so each reader calls only the shared helpers
 * of import.c. */
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "model/import/import-impl.h"

/* A Keras model JSON larger than this is not a model. */
#define KERAS_JSON_MAX_BYTES ((size_t)256 << 20)

/* A Keras model: model.to_json()'s text, or a .keras archive. */
brg_status brg_import_keras(const char *path, brg_import **out)
{
    if (!out) return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_import_keras: out is NULL");
    *out = NULL;
    if (!path) return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_import_keras: path is NULL");
    const size_t n = strlen(path);
    if (n > 6 && strcmp(path + n - 6, ".keras") == 0) return keras_archive_import(path, out);
    char *text = NULL;
    size_t len = 0;
    BRG_CHECK(brg_read_file(path, "Keras model file", KERAS_JSON_MAX_BYTES, &text, &len));
    const brg_status st = brg_import_keras_json(text, len, path, out);
    free(text);
    return st;
}

brg_status brg_import_file(const char *path, brg_import **out)
{
    if (!out) return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_import_file: out is NULL");
    *out = NULL;
    if (!path) return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_import_file: path is NULL");
    const size_t n = strlen(path);
    if (n > 5 && strcmp(path + n - 5, ".onnx") == 0) return brg_import_onnx(path, out);
    if ((n > 5 && strcmp(path + n - 5, ".json") == 0) || (n > 6 && strcmp(path + n - 6, ".keras") == 0))
        return brg_import_keras(path, out);
    return brg_error(BRG_ERR_INVALID_ARGUMENT, "%s: brigade imports ONNX (.onnx) and Keras (.json, .keras) files",
                     path);
}
