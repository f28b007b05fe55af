/* brigade: the ONNX reader's internals (model/import/onnx*.c): the C code
 * protoc-c generates from onnx.proto at build time, and tensor contents. */
#ifndef BRIGADE_ONNX_IMPL_H
#define BRIGADE_ONNX_IMPL_H

#include "model/import/import-impl.h"
#include "model/import/onnx.pb-c.h"

/* A TensorProto's values (what names it in messages). */
brg_status onnx_tensor_read(const Onnx__TensorProto *t, const char *what, onnx_tensor *out);

#endif /* BRIGADE_ONNX_IMPL_H */
