/* The CPU backend's synchronous device: a capped slab of host memory
 * (slab.c) whose operations run on the calling thread. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    /* .workspace_wanted = */ NULL,
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
    /* .copy_prepare      = */ NULL,
    /* .host_alloc        = */ NULL,
    /* .host_free         = */ NULL,
    /* .channel_block     = */ brg_cpu_channel_block,
    /* .comm_id           = */ NULL,
    /* .comm_create       = */ NULL,
    /* .comm_connect      = */ NULL,
    /* .comm_destroy      = */ NULL,
    /* .comm_send         = */ NULL,
    /* .comm_recv         = */ NULL,
    /* .comm_sum          = */ NULL,
    /* .comm_wait         = */ NULL,
    /* .comm_record       = */ NULL,
};

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
