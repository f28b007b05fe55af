/* libFuzzer target: the JSON model reader on arbitrary bytes. Any input
 * must give a model or a status with a message; the sanitizers catch the
 * rest. */
#include <stddef.h>
#include <stdint.h>

#include "brigade.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    brg_model *m = NULL;
    if (brg_model_parse_json((const char *)data, size, "fuzz", &m) == BRG_OK) {
        char *text = NULL;
        if (brg_model_to_json(m, &text) == BRG_OK) brg_free(text); /* what reads back must write */
    } else if (!brg_last_error()[0]) {
        __builtin_trap(); /* a failure must say why */
    }
    brg_model_destroy(m);
    return 0;
}
