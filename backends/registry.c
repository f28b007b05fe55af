/* The registry: a device of any backend from its spec. The only place that
 * knows every backend; everything above it reaches devices through
 * base/device-impl.h's table.
 *
 * It also completes what a device list's syntax leaves open where that needs
 * a backend (a whole GPU's size, whether an ordinal exists), and makes the
 * planning device of a target with the target backend's workspace sizes. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <stdio.h>
#include <stdlib.h>

#include "backends/cpu/cpu-device.h"
#include "backends/cuda/cuda-device.h"
#include "backends/planning/planning-device.h"
#include "base/device-impl.h"
#include "base/internal.h"

int brg_backend_available(brg_backend backend)
{
    switch (backend) {
    case BRG_BACKEND_CPU: return 1;
    case BRG_BACKEND_CUDA: return brg_cuda_gpu_count(NULL, 0) > 0;
    }
    return 0;
}
brg_status brg_device_create(const brg_device_spec *spec, int index, brg_device **out)
{
    *out = NULL;
    switch (spec->backend) {
    case BRG_BACKEND_CPU:
        if (spec->async) return brg_cpu_async_device_create(spec->capacity, index, out);
        return brg_cpu_device_create(spec->capacity, index, out);
    case BRG_BACKEND_CUDA:
        if (spec->gpu == BRG_GPU_LOCAL)
            return brg_error(BRG_ERR_INVALID_ARGUMENT, "device %d is cuda:local, the GPU of the rank that holds it: "
                             "resolve it with brg_world_device_spec first", index);
        return brg_cuda_device_create(spec, out);
    }
    return brg_error(BRG_ERR_INVALID_ARGUMENT, "device %d: unknown backend %d", index, (int)spec->backend);
}

brg_status brg_device_create_cpu(size_t capacity, int index, brg_device **out)
{
    brg_device_spec spec = {.backend = BRG_BACKEND_CPU, .gpu = -1, .capacity = capacity};
    return brg_device_create(&spec, index, out);
}
/* The GPU a spec's sizes are checked against: cuda:local (a list of its
 * own) against GPU 0, the node's GPUs taken to be alike. */
static int checked_gpu(const brg_device_spec *spec) { return spec->gpu == BRG_GPU_LOCAL ? 0 : spec->gpu; }

/* Complete and check the CUDA devices of a parsed list: whole GPUs get the
 * card's memory less the reserve (a card named with @CARD, or the GPU's
 * own), virtual devices their numbers per GPU; where GPUs are visible,
 * ordinals must exist and virtual devices fit. */
static brg_status finish_cuda(brg_device_spec *specs, int n)
{
    char why[160] = "";
    int visible = -1; /* asked once, only for lists with CUDA devices */
    char b1[32], b2[32], b3[32], b4[32];
    for (int g = 0; g <= BRG_DEVICE_MAX_GPU; g++) {
        int whole = 0, virt = 0;
        size_t sum = 0;
        int w = -1; /* the whole GPU's index */
        for (int i = 0; i < n; i++) {
            if (specs[i].backend != BRG_BACKEND_CUDA || checked_gpu(&specs[i]) != g) continue;
            if (specs[i].vdev < 0) {
                whole++;
                w = i;
            } else {
                specs[i].vdev = virt++;
                sum += specs[i].capacity;
            }
        }
        if (!whole && !virt) continue;
        if (whole > 1)
            return brg_error(BRG_ERR_INVALID_ARGUMENT, "GPU %d is named twice as a whole device (cuda:%d)", g, g);
        if (whole && virt)
            return brg_error(BRG_ERR_INVALID_ARGUMENT,
                             "GPU %d is used whole (cuda:%d) and also carved into virtual devices (cuda:%d:...); "
                             "use one or the other",
                             g, g, g);
        /* A card is sized by its name, and checked against the GPU only
         * where devices are made (brg_device_spec_check_here before the
         * plan, brg_cuda_device_create): a plan for a node of cards holds
         * on any machine, with GPUs or not. */
        if (whole && specs[w].card) {
            BRG_CHECK(brg_cuda_whole_arena(&specs[w], specs[w].card, &specs[w].capacity));
            continue;
        }
        if (visible < 0) visible = brg_cuda_gpu_count(why, sizeof why);
        if (visible == 0 && whole && specs[0].gpu == BRG_GPU_LOCAL)
            return brg_error(BRG_ERR_INVALID_ARGUMENT,
                             "device 'cuda:local' takes each rank's whole GPU, whose size is known only where a GPU "
                             "is visible, and none is here (%s); name its card's memory instead, e.g. cuda:local@12GiB "
                             "(as brigade info shows it where the card is), or carve it, e.g. cuda:local:12GiB",
                             why);
        if (visible == 0 && whole)
            return brg_error(BRG_ERR_INVALID_ARGUMENT,
                             "device 'cuda:%d' takes the whole GPU, whose size is known only where the GPU is "
                             "visible, and none is here (%s); name its card's memory instead, e.g. cuda:%d@12GiB (as "
                             "brigade info shows it where the card is), or carve a device of a size, e.g. "
                             "cuda:%d:12GiB",
                             g, why, g, g);
        if (visible == 0) continue; /* planning for GPUs elsewhere: the sizes are the spec's */
        if (g >= visible)
            return brg_error(BRG_ERR_INVALID_ARGUMENT,
                             "device 'cuda:%d': there is no GPU %d here; the GPUs visible are cuda:0 to cuda:%d", g, g,
                             visible - 1);
        size_t total = 0;
        BRG_CHECK(brg_cuda_gpu_memory(g, &total));
        const size_t reserve = brg_cuda_reserve_bytes(total), usable = total > reserve ? total - reserve : 0;
        if (whole) {
            BRG_CHECK(brg_cuda_whole_arena(&specs[w], total, &specs[w].capacity));
        } else if (sum > usable) {
            return brg_error(BRG_ERR_INVALID_ARGUMENT,
                             "the virtual devices on GPU %d ask for %s in all, but it has %s, of which %s are usable "
                             "(%s are kept for the CUDA context and libraries); make them smaller or fewer",
                             g, brg_format_bytes(sum, b1, sizeof b1), brg_format_bytes(total, b2, sizeof b2),
                             brg_format_bytes(usable, b3, sizeof b3), brg_format_bytes(reserve, b4, sizeof b4));
        }
    }
    return BRG_OK;
}

brg_status brg_device_spec_check_here(const brg_device_spec *spec)
{
    if (spec->backend != BRG_BACKEND_CUDA || spec->vdev >= 0 || !spec->card) return BRG_OK;
    brg_device_spec here = *spec;
    here.gpu = checked_gpu(spec);
    if (here.gpu >= brg_cuda_gpu_count(NULL, 0)) return BRG_OK; /* brg_device_create says what is missing */
    size_t total = 0;
    BRG_CHECK(brg_cuda_gpu_memory(here.gpu, &total));
    return brg_cuda_card_fits(&here, total);
}

brg_status brg_device_spec_parse(const char *text, brg_device_spec *specs, int max, int *count)
{
    int n = 0;
    *count = 0;
    BRG_CHECK(brg_device_spec_parse_syntax(text, specs, max, &n));
    size_t budget = 0;
    BRG_CHECK(brg_cuda_conv_workspace(&budget));
    for (int i = 0; i < n; i++)
        if (specs[i].backend == BRG_BACKEND_CUDA) specs[i].conv_workspace = budget;
    BRG_CHECK(finish_cuda(specs, n));
    *count = n;
    return BRG_OK;
}

brg_status brg_device_create_planning(const brg_device_spec *target, int index, brg_device **out)
{
    if (!out) return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_device_create_planning: out is NULL");
    *out = NULL;
    if (!target) return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_device_create_planning: no target device");
    switch (target->backend) {
    case BRG_BACKEND_CPU: return brg_planning_device_create(target, index, brg_cpu_spec_workspace_bytes, NULL, out);
    case BRG_BACKEND_CUDA:
        /* The setting read now, once, as a real device reads it when made. */
        return brg_planning_device_create(target, index, brg_cuda_spec_workspace_bytes,
                                          brg_cuda_conv_workspace_grows() ? brg_cuda_spec_workspace_wanted : NULL, out);
    }
    return brg_error(BRG_ERR_INVALID_ARGUMENT, "planning device %d: unknown target backend %d", index,
                     (int)target->backend);
}
