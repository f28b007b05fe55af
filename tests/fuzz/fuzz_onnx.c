/* libFuzzer target: the ONNX importer (brg_import_onnx_bytes) on arbitrary
 * bytes, held to fuzz_import.h. Built only where the importer is
 * (tests/test_fuzz.sh). */
#include <stddef.h>
#include <stdint.h>

#include "fuzz_import.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    brg_import *imp = (brg_import *)(uintptr_t)1; /* must come back NULL on failure */
    brg_clear_error();
    const brg_status st = brg_import_onnx_bytes(data, size, "fuzz.onnx", &imp);
    fuzz_check_import(st, imp);
    return 0;
}
