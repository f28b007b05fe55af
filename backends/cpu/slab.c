/* The slab both CPU devices (device.c, async.c) are made of.
 *
 * It is reserved with mmap(MAP_NORESERVE), so seven "12 GiB devices" cost
 * address space, not memory, until a stage touches its pages. */
#include <stdlib.h>
#include <sys/mman.h>

#include "cpu-device.h"
#include "base/device-impl.h"
#include "base/internal.h"

brg_status brg_cpu_device_new(const brg_device_iface *iface, size_t context_bytes, const char *name,
                              size_t capacity, brg_device **out)
{
    *out = NULL;
    brg_device *dev;
    BRG_CHECK(brg_device_new(iface, context_bytes, name, capacity, &dev));
    const size_t slab_bytes = brg_arena_capacity(dev->arena);
    void *slab = mmap(NULL, slab_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (slab == MAP_FAILED) {
        char b[32];
        brg_arena_destroy(dev->arena);
        free(dev->context);
        free(dev);
        return brg_error(BRG_ERR_HOST_MEMORY, "device '%s': cannot reserve %s of address space for its arena",
                         name, brg_format_bytes(capacity, b, sizeof b));
    }
    dev->base = slab;
    *out = dev;
    return BRG_OK;
}

void brg_cpu_device_release(brg_device *dev)
{
    if (dev->base) munmap(dev->base, brg_arena_capacity(dev->arena));
    free(dev->context);
    free(dev);
}

