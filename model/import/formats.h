/* What a file given as a model is when brigade reads no model from it. */
#ifndef BRIGADE_MODEL_IMPORT_FORMATS_H
#define BRIGADE_MODEL_IMPORT_FORMATS_H

#include <stddef.h>

#include "brigade/status.h"

/* From the file's name and its first n bytes (head): what kind of file it
 * is and how to bring its model in ("an HDF5 file, as Keras 2's ..."), or
 * NULL when it looks like no kind known here. Can't fail. */
const char *brg_foreign_model_hint(const char *path, const void *head, size_t n);

/* BRG_ERR_INVALID_ARGUMENT, said, when path is a folder (a model is one
 * file: reading a folder failed as "Is a directory", as if the file were
 * broken); BRG_OK otherwise, also when path is not there (its reader says). */
brg_status brg_refuse_model_folder(const char *path);

#endif /* BRIGADE_MODEL_IMPORT_FORMATS_H */
