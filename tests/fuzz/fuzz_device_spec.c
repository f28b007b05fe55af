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
        }
    } else if (!brg_last_error()[0]) {
        __builtin_trap();
    }
    size_t bytes = 0;
    (void)brg_parse_bytes(text, &bytes);
    free(text);
    return 0;
}
