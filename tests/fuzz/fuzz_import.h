/* What the importers' fuzz targets (fuzz_onnx.c, fuzz_keras.c) hold an
 * import to: on failure no result and a message; on success a finalized
 * model with layers, every weight's layer and parameter in it with the
 * parameter's element count, its values readable to the last (AddressSanitizer
 * watches). A breach traps. */
#ifndef BRIGADE_FUZZ_IMPORT_H
#define BRIGADE_FUZZ_IMPORT_H

#include <stdint.h>

#include "brigade.h"

static volatile float fuzz_import_sink;

static inline void fuzz_check_import(brg_status st, brg_import *imp)
{
    if (st != BRG_OK) {
        if (imp || !brg_last_error()[0]) __builtin_trap();
        return;
    }
    const brg_model *m = brg_import_model(imp);
    if (!m || !brg_model_is_final(m) || brg_model_layer_count(m) < 1) __builtin_trap();
    float sum = 0.0f;
    for (int i = 0; i < brg_import_weight_count(imp); i++) {
        brg_import_weight w;
        if (brg_import_get_weight(imp, i, &w) != BRG_OK) __builtin_trap();
        const brg_layer *l = brg_model_get_layer(m, w.layer);
        brg_param_info info;
        if (!l || brg_layer_param(l, m, w.param, &info) != BRG_OK || info.count != w.count || !w.source)
            __builtin_trap();
        for (int64_t k = 0; w.values && k < w.count; k++) sum += w.values[k];
    }
    fuzz_import_sink = sum;
    brg_import_free(imp);
}

#endif /* BRIGADE_FUZZ_IMPORT_H */
