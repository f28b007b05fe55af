/* libFuzzer target: the Keras importer (brg_import_keras_json) on
 * arbitrary bytes, held to fuzz_import.h. */
#include <stddef.h>
#include <stdint.h>

#include "fuzz_import.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    brg_import *imp = (brg_import *)(uintptr_t)1; /* must come back NULL on failure */
    brg_clear_error();
    const brg_status st = brg_import_keras_json((const char *)data, size, "fuzz.json", &imp);
    fuzz_check_import(st, imp);
    return 0;
}
