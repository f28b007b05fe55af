/* Which importer reads a file: by its name's ending, ONNX (onnx.c),
 * Keras JSON (keras.c) or a .keras archive (keras-archive.c). Only this
 * file calls across to them, so each reader calls only the shared helpers
 * of import.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "config.h"
#include "model/import/formats.h"
#include "model/import/import-impl.h"

/* A Keras model JSON larger than this is not a model. */
#define KERAS_JSON_MAX_BYTES ((size_t)256 << 20)

static int named(const char *path, const char *tail)
{
    const size_t n = strlen(path), k = strlen(tail);
    return n > k && strcmp(path + n - k, tail) == 0;
}

const char *brg_foreign_model_hint(const char *path, const void *head, size_t n)
{
    static const unsigned char hdf5[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
    static const unsigned char png[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    static const unsigned char jpeg[3] = {0xff, 0xd8, 0xff};
    const int is_hdf5 = n >= sizeof hdf5 && memcmp(head, hdf5, sizeof hdf5) == 0;
    const int is_zip = n >= 4 && memcmp(head, "PK\003\004", 4) == 0;
    if (is_hdf5 || named(path, ".h5") || named(path, ".hdf5"))
        return "an HDF5 file, as Keras 2's model.save('model.h5') writes, which brigade does not read: save the "
               "model as a .keras archive (model.save('model.keras')) or its JSON (model.to_json())";
    if (named(path, ".pt") || named(path, ".pth") || named(path, ".pkl") || named(path, ".ckpt"))
        return "a PyTorch file, which brigade does not read: export the model to ONNX (torch.onnx.export, "
               "docs/import.md) and give the .onnx file";
    if (named(path, ".safetensors"))
        return "a safetensors file of weights: give the model as MODEL (a zoo name, a JSON model file, an ONNX or "
               "Keras file) and this file to 'brigade train --init-weights'";
    const int is_image = (n >= sizeof png && memcmp(head, png, sizeof png) == 0) ||
                         (n >= sizeof jpeg && memcmp(head, jpeg, sizeof jpeg) == 0);
    if (is_image)
        return "an image: images are data, given to train and eval as --data DIR (a folder of class folders)";
    if (is_zip && !named(path, ".keras")) /* a .keras archive is a zip */
        return "a zip archive: brigade reads one as a Keras archive when its name ends in .keras";
    return NULL;
}

brg_status brg_refuse_model_folder(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) return BRG_OK;
    return brg_error(BRG_ERR_INVALID_ARGUMENT, "%s is a folder, not a model file: give the model's file (a JSON "
                     "model file, an ONNX file (.onnx) or a Keras model (.json, .keras))", path);
}

/* A Keras model: model.to_json()'s text, or a .keras archive. */
brg_status brg_import_keras(const char *path, brg_import **out)
{
    if (!out) return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_import_keras: out is NULL");
    *out = NULL;
    if (!path) return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_import_keras: path is NULL");
    if (named(path, ".keras")) return keras_archive_import(path, out);
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
    BRG_CHECK(brg_refuse_model_folder(path));
    unsigned char head[8];
    size_t got = 0;
    /* Opened as a file only: a FIFO or a device would hold the read. */
    FILE *f;
    BRG_CHECK(brg_open_regular(path, "model file", &f));
    got = fread(head, 1, sizeof head, f);
    fclose(f);
    /* Another kind of file, whatever its name says, is the wrong file given
     * rather than a broken model: said as what it is. */
    const char *hint = brg_foreign_model_hint(path, head, got);
    if (hint)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "%s: brigade imports ONNX (.onnx) and Keras (.json, .keras) "
                         "files; this is %s", path, hint);
    if (named(path, ".onnx")) return brg_import_onnx(path, out);
    if (named(path, ".json") || named(path, ".keras")) return brg_import_keras(path, out);
    return brg_error(BRG_ERR_INVALID_ARGUMENT, "%s: brigade imports ONNX (.onnx) and Keras (.json, .keras) files, "
                     "by the name's ending", path);
}
