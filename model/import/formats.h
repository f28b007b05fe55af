/* What a file given as a model is when brigade reads no model from it. */
#ifndef BRIGADE_MODEL_IMPORT_FORMATS_H
#define BRIGADE_MODEL_IMPORT_FORMATS_H

#include <stddef.h>

/* From the file's name and its first n bytes (head): what kind of file it
 * is and how to bring its model in ("an HDF5 file, as Keras 2's ..."), or
 * NULL when it looks like no kind known here. Can't fail. */
const char *brg_foreign_model_hint(const char *path, const void *head, size_t n);

#endif /* BRIGADE_MODEL_IMPORT_FORMATS_H */
