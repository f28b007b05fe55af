/* libFuzzer target: the Keras importer (brg_import_keras_json) on
 * arbitrary bytes. What imports must hold together: a finalized model with layers,
 * every weight's layer and parameter in the model with the parameter's
 * element count, its values readable to the last (AddressSanitizer watches);
 * a failure always with a message and no result. */
#include <stddef.h>
#include <stdint.h>

#include "brigade.h"

static volatile float sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    brg_import *imp = (brg_import *)(uintptr_t)1;
    brg_clear_error();
    if (brg_import_keras_json((const char *)data, size, "fuzz.json", &imp) != BRG_OK) {
        if (imp || !brg_last_error()[0]) __builtin_trap();
        return 0;
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
    sink = sum;
    brg_import_free(imp);
    return 0;
}
