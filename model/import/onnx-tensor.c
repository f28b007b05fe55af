/* ONNX TensorProto contents as floats (and int64 for integer types), from
 * raw little-endian bytes or the typed fields, checked against the dims. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/import/import-impl.h"
#include "model/import/onnx-impl.h"

void onnx_tensor_free(onnx_tensor *t)
{
    if (!t) return;
    free(t->f);
    free(t->i);
    memset(t, 0, sizeof *t);
}

static const char *type_name(int32_t type)
{
    static const char *const names[] = {"UNDEFINED", "FLOAT",  "UINT8",  "INT8",   "UINT16",    "INT16",
                                        "INT32",     "INT64",  "STRING", "BOOL",   "FLOAT16",   "DOUBLE",
                                        "UINT32",    "UINT64", "COMPLEX64", "COMPLEX128", "BFLOAT16"};
    return type >= 0 && type < (int32_t)(sizeof names / sizeof names[0]) ? names[type] : "an unknown type";
}

/* Bytes per element in raw_data, 0 for a type read here not at all. */
static size_t raw_size(int32_t type)
{
    switch (type) {
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT:
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT32: return 4;
    case ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE:
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT64: return 8;
    case ONNX__TENSOR_PROTO__DATA_TYPE__BOOL:
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT8:
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT8: return 1;
    default: return 0;
    }
}

/* Element k of raw little-endian bytes as double and int64. */
static void raw_element(const uint8_t *p, int32_t type, double *d, int64_t *v)
{
    uint64_t u = 0;
    const size_t size = raw_size(type);
    for (size_t b = 0; b < size; b++) u |= (uint64_t)p[b] << (8 * b);
    switch (type) {
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT: {
        const uint32_t w = (uint32_t)u;
        float f;
        memcpy(&f, &w, sizeof f);
        *d = f;
        *v = 0; /* not an integer type: unused */
        return;
    }
    case ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE: memcpy(d, &u, sizeof *d); *v = 0; return;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT32: *v = (int32_t)(uint32_t)u; break;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT64: *v = (int64_t)u; break;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT8: *v = (int8_t)(uint8_t)u; break;
    default: *v = (int64_t)u; break; /* UINT8, BOOL */
    }
    *d = (double)*v;
}

brg_status onnx_tensor_read(const Onnx__TensorProto *t, const char *what, onnx_tensor *out)
{
    memset(out, 0, sizeof *out);
    const char *name = t->name && t->name[0] ? t->name : "(unnamed)";
    if (t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL)
        return brg_error(BRG_ERR_UNSUPPORTED,
                         "%s: tensor '%s' is stored outside the file (external data); export it with the weights "
                         "inside (torch.onnx.export does for models under 2 GB)",
                         what, name);
    if (t->segment) return brg_error(BRG_ERR_UNSUPPORTED, "%s: tensor '%s' is segmented", what, name);
    if (t->n_dims > IMPORT_MAX_DIMS)
        return brg_error(BRG_ERR_UNSUPPORTED, "%s: tensor '%s' has %zu dimensions; at most %d are read", what, name,
                         t->n_dims, IMPORT_MAX_DIMS);
    const int32_t type = t->data_type;
    if (!raw_size(type))
        return brg_error(BRG_ERR_UNSUPPORTED, "%s: tensor '%s' is %s; brigade reads FLOAT, DOUBLE and integer tensors",
                         what, name, type_name(type));
    int64_t count = 1;
    for (size_t d = 0; d < t->n_dims; d++) {
        if (t->dims[d] < 0 || (t->dims[d] > 0 && count > ((int64_t)1 << 40) / t->dims[d])) {
            char dims[160];
            size_t at = 0;
            for (size_t k = 0; k < t->n_dims && at < sizeof dims; k++)
                at += (size_t)snprintf(dims + at, sizeof dims - at, "%s%lld", k ? ", " : "", (long long)t->dims[k]);
            return brg_error(BRG_ERR_FORMAT, "%s: tensor '%s' is [%s]: %s", what, name, dims,
                             t->dims[d] < 0 ? "a dimension is negative" : "more than 2^40 values");
        }
        count *= t->dims[d];
        out->dims[d] = t->dims[d];
    }
    out->ndim = (int)t->n_dims;
    out->count = count;
    const int integer = type != ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT && type != ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE;
    /* Where the values are and how many there are. */
    size_t have;
    if (t->has_raw_data) have = t->raw_data.len / raw_size(type);
    else if (type == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT) have = t->n_float_data;
    else if (type == ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE) have = t->n_double_data;
    else if (type == ONNX__TENSOR_PROTO__DATA_TYPE__INT64) have = t->n_int64_data;
    else have = t->n_int32_data;
    if ((t->has_raw_data && t->raw_data.len % raw_size(type)) || have != (size_t)count)
        return brg_error(BRG_ERR_FORMAT, "%s: tensor '%s' of %lld %s values holds %zu", what, name, (long long)count,
                         type_name(type), have);
    out->integer = integer;
    out->f = brg_malloc((size_t)(count ? count : 1) * sizeof *out->f, "a tensor's values");
    out->i = integer ? brg_malloc((size_t)(count ? count : 1) * sizeof *out->i, "a tensor's values") : NULL;
    if (!out->f || (integer && !out->i)) {
        onnx_tensor_free(out);
        return BRG_ERR_HOST_MEMORY;
    }
    for (int64_t k = 0; k < count; k++) {
        double d = 0.0;
        int64_t v = 0;
        if (t->has_raw_data) raw_element(t->raw_data.data + (size_t)k * raw_size(type), type, &d, &v);
        else if (type == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT) d = t->float_data[k];
        else if (type == ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE) d = t->double_data[k];
        else if (type == ONNX__TENSOR_PROTO__DATA_TYPE__INT64) d = (double)(v = t->int64_data[k]);
        else d = (double)(v = t->int32_data[k]);
        out->f[k] = (float)d;
        if (integer) out->i[k] = v;
    }
    return BRG_OK;
}

brg_status onnx_tensor_read_file(const char *path, onnx_tensor *out, char *name, size_t name_size)
{
    memset(out, 0, sizeof *out);
    char *bytes = NULL;
    size_t len = 0;
    BRG_CHECK(brg_read_file(path, "tensor file", (size_t)1 << 31, &bytes, &len));
    Onnx__TensorProto *t = onnx__tensor_proto__unpack(NULL, len, (const uint8_t *)bytes);
    free(bytes);
    if (!t) return brg_error(BRG_ERR_FORMAT, "%s: not a serialized ONNX TensorProto", path);
    const brg_status st = onnx_tensor_read(t, path, out);
    if (name && name_size) snprintf(name, name_size, "%s", t->name ? t->name : "");
    onnx__tensor_proto__free_unpacked(t, NULL);
    return st;
}
