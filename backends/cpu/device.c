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

typedef struct cpu_context {
    size_t slab_bytes;
} cpu_context;

static void cpu_destroy(brg_device *dev)
{
    cpu_context *ctx = dev->context;
    if (dev->base) munmap(dev->base, ctx->slab_bytes);
    free(ctx);
    free(dev);
}

static brg_status cpu_copy(brg_device *dev, void *dst, const void *src, size_t bytes)
{
    (void)dev;
    memmove(dst, src, bytes);
    return BRG_OK;
}

static brg_status cpu_copy_peer(brg_device *dst_dev, void *dst, brg_device *src_dev, const void *src, size_t bytes)
{
    (void)dst_dev;
    (void)src_dev;
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

brg_status brg_cpu_device_create(size_t capacity, int index, brg_device **out)
{
    *out = NULL;
    char name[32];
    snprintf(name, sizeof name, "cpu:%d", index);
    brg_device *dev;
    brg_status st = brg_device_new(&cpu_iface, sizeof(cpu_context), name, capacity, &dev);
    if (st != BRG_OK) return st;
    cpu_context *ctx = dev->context;
    ctx->slab_bytes = brg_arena_capacity(dev->arena);
    void *slab = mmap(NULL, ctx->slab_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                      -1, 0);
    if (slab == MAP_FAILED) {
        char b[32];
        brg_arena_destroy(dev->arena);
        free(ctx);
        free(dev);
        return brg_error(BRG_ERR_HOST_MEMORY, "device '%s': cannot reserve %s of address space for its arena",
                         name, brg_format_bytes(capacity, b, sizeof b));
    }
    dev->base = slab;
    *out = dev;
    return BRG_OK;
}

size_t brg_cpu_spec_workspace_bytes(const brg_op *op, const brg_device_spec *spec)
{
    (void)spec;
    return brg_cpu_workspace_bytes(op);
}
