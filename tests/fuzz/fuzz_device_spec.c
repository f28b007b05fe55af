/* libFuzzer target: the device-list and size parsers (--devices, sizes). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "brigade.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    brg_device_spec specs[16];
    int n = -1;
    if (brg_device_spec_parse(text, specs, 16, &n) == BRG_OK) {
        if (n < 1 || n > 16) __builtin_trap();
        for (int i = 0; i < n; i++) {
            char name[64];
            brg_device_spec_name(&specs[i], i, name, sizeof name);
            const brg_device_spec *d = &specs[i];
            /* A card is a whole GPU sized by its name: the card less its reserve. */
            if (d->card && (d->backend != BRG_BACKEND_CUDA || d->vdev != -1 || d->card <= d->capacity ||
                            d->capacity != d->card - brg_cuda_reserve_bytes(d->card)))
                __builtin_trap();
            /* Every device has a size here (no GPU is visible to size a whole one). */
            if (d->capacity == 0) __builtin_trap();
        }
    } else if (!brg_last_error()[0]) {
        __builtin_trap();
    }
    size_t bytes = 0;
    (void)brg_parse_bytes(text, &bytes);
    free(text);
    return 0;
}
