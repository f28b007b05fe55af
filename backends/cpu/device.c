/* The CPU backend: a device is a capped slab of host memory.
 *
 * The slab is reserved with mmap(MAP_NORESERVE), so seven "12 GiB devices"
 * cost address space, not memory, until a stage touches its pages. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "cpu-device.h"
#include "cpu-kernels.h"
#include "base/device-impl.h"
#include "base/internal.h"

static void cpu_destroy(brg_device *dev) { brg_cpu_device_release(dev); }

static brg_status cpu_copy(brg_device *dev, void *dst, const void *src, size_t bytes)
{
    (void)dev;
    memmove(dst, src, bytes);
    return BRG_OK;
}

static brg_status cpu_copy_peer(brg_device *dst_dev, void *dst, brg_device *src_dev, const void *src, size_t bytes)
{
    /* The other device may be a cpu-async one with work queued on either end. */
    BRG_CHECK(brg_cpu_async_drain(dst_dev));
    BRG_CHECK(brg_cpu_async_drain(src_dev));
    memmove(dst, src, bytes);
    return BRG_OK;
}

static brg_status cpu_memset_zero(brg_device *dev, void *dst, size_t bytes)
{
    (void)dev;
    memset(dst, 0, bytes);
    return BRG_OK;
}

static brg_status cpu_run(brg_device *dev, const brg_op *op)
{
    return brg_kernel_run(brg_cpu_kernels, dev, op);
}

static size_t cpu_workspace_bytes(brg_device *dev, const brg_op *op)
{
    (void)dev;
    return brg_cpu_workspace_bytes(op);
}

static const brg_device_iface cpu_iface = {
    /* .backend         = */ BRG_BACKEND_CPU,
    /* .destroy         = */ cpu_destroy,
    /* .copy_in         = */ cpu_copy,
    /* .copy_out        = */ cpu_copy,
    /* .copy_peer       = */ cpu_copy_peer,
    /* .memset_zero     = */ cpu_memset_zero,
    /* .run             = */ cpu_run,
    /* .workspace_bytes = */ cpu_workspace_bytes,
    /* .synchronize     = */ NULL,
    /* .pci_bus_id      = */ NULL,
    /* .share_cores     = */ brg_cpu_threads_share,
    /* .restore_cores   = */ brg_cpu_threads_restore,
    /* .event_create      = */ NULL,
    /* .event_destroy     = */ NULL,
    /* .event_record      = */ NULL,
    /* .stream_wait       = */ NULL,
    /* .event_synchronize = */ NULL,
    /* .event_elapsed     = */ NULL,
    /* .copy_async        = */ NULL,
};

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

brg_status brg_cpu_device_create(size_t capacity, int index, brg_device **out)
{
    char name[32];
    snprintf(name, sizeof name, "cpu:%d", index);
    /* No state of its own: the context is a placeholder. */
    return brg_cpu_device_new(&cpu_iface, 1, name, capacity, out);
}

size_t brg_cpu_spec_workspace_bytes(const brg_op *op, const brg_device_spec *spec)
{
    (void)spec;
    return brg_cpu_workspace_bytes(op);
}
