/* libFuzzer target: the per-layer profile reader (--profile), through the
 * planner as brigade plan uses it, for fmnist-cnn on one CPU device. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

#include "brigade.h"

static char path[64];
static brg_model *model;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!model && brg_zoo_build("fmnist-cnn", NULL, &model) != BRG_OK) return 0;
    if (!path[0]) snprintf(path, sizeof path, "/tmp/brigade-fuzz-profile-%ld.json", (long)getpid());
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    if (size && fwrite(data, 1, size, f) != size) {
        fclose(f);
        return 0;
    }
    fclose(f);
    brg_device_spec dev = {.backend = BRG_BACKEND_CPU, .gpu = -1, .capacity = (size_t)64 << 20};
    brg_plan_options o = brg_plan_options_init();
    o.devices = &dev;
    o.n_devices = 1;
    o.batch = 8;
    o.profile_path = path;
    brg_plan *plan = NULL;
    const brg_status st = brg_plan_create(model, &o, &plan);
    if (st != BRG_OK && !brg_last_error()[0]) __builtin_trap();
    brg_plan_destroy(plan);
    unlink(path);
    return 0;
}
