/* libFuzzer target: the safetensors reader (brg_safetensors_open) on
 * arbitrary bytes, through a file as the API reads them. What opens must
 * hold together: every tensor found by its name, the data of those
 * brigade computes in readable to its last byte (AddressSanitizer watches
 * the reads), a failure always with a message. The header alone
 * (brg_safetensors_open_header) must be refused exactly when the whole
 * file is, and give no data. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "brigade.h"

static char path[64];
/* Where the sums of the data go, so that the reads are not optimised away. */
static volatile unsigned sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!path[0]) snprintf(path, sizeof path, "/tmp/brigade-fuzz-safetensors-%ld", (long)getpid());
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    if (size && fwrite(data, 1, size, f) != size) {
        fclose(f);
        return 0;
    }
    fclose(f);
    brg_safetensors *file = NULL;
    brg_clear_error();
    const brg_status head = brg_safetensors_open_header(path, &file);
    if ((head != BRG_OK) != (file == NULL) || (head != BRG_OK && !brg_last_error()[0])) __builtin_trap();
    for (int i = 0; i < brg_safetensors_count(file); i++) {
        brg_safetensor t;
        (void)brg_safetensors_get(file, i, &t);
        if (t.data) __builtin_trap();
    }
    brg_safetensors_close(file);
    file = NULL;
    brg_clear_error();
    const brg_status whole = brg_safetensors_open(path, &file);
    if (whole != head) __builtin_trap();
    if (whole != BRG_OK) {
        if (file || !brg_last_error()[0]) __builtin_trap();
        unlink(path);
        return 0;
    }
    unsigned sum = 0;
    for (int i = 0; i < brg_safetensors_count(file); i++) {
        brg_safetensor t;
        const brg_status st = brg_safetensors_get(file, i, &t);
        if (!t.name || brg_safetensors_find(file, t.name) != i || !brg_safetensors_dtype_name(file, i))
            __builtin_trap();
        if (t.ndim < 0 || t.ndim > BRG_SAFETENSORS_MAX_DIMS) __builtin_trap();
        if (st == BRG_OK)
            for (size_t k = 0; k < t.bytes; k++) sum += ((const unsigned char *)t.data)[k];
        else if (st != BRG_ERR_UNSUPPORTED || t.data || !brg_last_error()[0])
            __builtin_trap();
    }
    sink = sum;
    brg_safetensors_close(file);
    unlink(path);
    return 0;
}
