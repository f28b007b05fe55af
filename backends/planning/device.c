/* The planning backend: a device that keeps the books and nothing else.
 *
 * A planning device has the capacity of a target device (CPU or CUDA) and
 * an arena exactly like the target's, so every allocation, free and
 * out-of-memory happens as it would in training. Its slab is address space
 * reserved with mmap(PROT_NONE, MAP_NORESERVE): it costs no memory, and any
 * host access to it faults at once, which is how a stray dereference of
 * device memory in the library shows up. Ops do nothing, but brg_device_run
 * still validates them and lends their workspace from the arena, with the
 * target backend's workspace sizes, so workspace is counted too. Copies in
 * and between devices do nothing; copies out fill the host buffer with
 * zeros (the loss read back by the last stage is 0).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <sys/mman.h>
#include <sys/resource.h>

#include "base/device-impl.h"
#include "base/internal.h"
#include "planning-device.h"

typedef struct planning_context {
    size_t slab_bytes;
    brg_device_spec target;          /* what the workspace sizes are for */
    brg_spec_workspace_fn workspace; /* the target backend's sizes */
    brg_spec_workspace_fn wanted;    /* its wider ones, or NULL */
} planning_context;

static void planning_destroy(brg_device *dev)
{
    planning_context *ctx = dev->context;
    if (dev->base) munmap(dev->base, ctx->slab_bytes);
    free(ctx);
    free(dev);
}

static brg_status planning_copy_in(brg_device *dev, void *dst, const void *src, size_t bytes)
{
    (void)dev;
    (void)dst;
    (void)src;
    (void)bytes;
    return BRG_OK;
}

/* The host buffer is real: it gets zeros, so callers that read results
 * back (the loss, the probabilities) see defined values. */
static brg_status planning_copy_out(brg_device *dev, void *dst, const void *src, size_t bytes)
{
    (void)dev;
    (void)src;
    memset(dst, 0, bytes);
    return BRG_OK;
}

static brg_status planning_copy_peer(brg_device *dst_dev, void *dst, brg_device *src_dev, const void *src,
                                     size_t bytes)
{
    (void)dst_dev;
    (void)dst;
    (void)src_dev;
    (void)src;
    (void)bytes;
    return BRG_OK;
}

static brg_status planning_memset_zero(brg_device *dev, void *dst, size_t bytes)
{
    (void)dev;
    (void)dst;
    (void)bytes;
    return BRG_OK;
}

static brg_status planning_run(brg_device *dev, const brg_op *op)
{
    (void)dev;
    (void)op;
    return BRG_OK;
}

/* Workspace as the target backend would ask for it: the same pure
 * functions the real devices call, so a plan counts exactly what a run
 * takes (a CUDA target's with its convolution budget). */
static size_t planning_workspace_bytes(brg_device *dev, const brg_op *op)
{
    const planning_context *ctx = dev->context;
    return ctx->workspace(op, &ctx->target);
}

static size_t planning_workspace_wanted(brg_device *dev, const brg_op *op)
{
    const planning_context *ctx = dev->context;
    return ctx->wanted ? ctx->wanted(op, &ctx->target) : 0;
}

/* One table per target backend: brg_device_backend reports the target's. */
static const brg_device_iface planning_cpu_iface = {
    /* .backend         = */ BRG_BACKEND_CPU,
    /* .destroy         = */ planning_destroy,
    /* .copy_in         = */ planning_copy_in,
    /* .copy_out        = */ planning_copy_out,
    /* .copy_peer       = */ planning_copy_peer,
    /* .memset_zero     = */ planning_memset_zero,
    /* .run             = */ planning_run,
    /* .workspace_bytes = */ planning_workspace_bytes,
    /* .workspace_wanted = */ planning_workspace_wanted,
    /* .synchronize     = */ NULL,
    /* .pci_bus_id      = */ NULL,
    /* .share_cores     = */ NULL,
    /* .restore_cores   = */ NULL,
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
    /* .channel_block     = */ NULL,
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

static const brg_device_iface planning_cuda_iface = {
    /* .backend         = */ BRG_BACKEND_CUDA,
    /* .destroy         = */ planning_destroy,
    /* .copy_in         = */ planning_copy_in,
    /* .copy_out        = */ planning_copy_out,
    /* .copy_peer       = */ planning_copy_peer,
    /* .memset_zero     = */ planning_memset_zero,
    /* .run             = */ planning_run,
    /* .workspace_bytes = */ planning_workspace_bytes,
    /* .workspace_wanted = */ planning_workspace_wanted,
    /* .synchronize     = */ NULL,
    /* .pci_bus_id      = */ NULL,
    /* .share_cores     = */ NULL,
    /* .restore_cores   = */ NULL,
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
    /* .channel_block     = */ NULL,
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

brg_status brg_planning_device_create(const brg_device_spec *target, int index, brg_spec_workspace_fn workspace,
                                      brg_spec_workspace_fn wanted, brg_device **out)
{
    *out = NULL;
    const brg_device_iface *iface = NULL;
    switch (target->backend) {
    case BRG_BACKEND_CPU: iface = &planning_cpu_iface; break;
    case BRG_BACKEND_CUDA: iface = &planning_cuda_iface; break;
    }
    if (!iface)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "planning device %d: unknown target backend %d", index,
                         (int)target->backend);
    char name[32];
    snprintf(name, sizeof name, "plan:%d", index);
    brg_device *dev;
    brg_status st = brg_device_new(iface, sizeof(planning_context), name, target->capacity, &dev);
    if (st != BRG_OK) return st;
    planning_context *ctx = dev->context;
    dev->planning = 1;
    ctx->target = *target;
    ctx->workspace = workspace;
    ctx->wanted = wanted;
    ctx->slab_bytes = brg_arena_capacity(dev->arena);
    /* PROT_NONE: no access at all, and nothing committed or reserved in swap. */
    void *slab = mmap(NULL, ctx->slab_bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (slab == MAP_FAILED) {
        /* Address space, not memory: nothing is committed. What limits it
         * is a ulimit -v (login nodes set one) or the 47 bits of a user
         * address space, and the message says which. */
        char b[32], limit[32], why[200] = "";
        struct rlimit rl;
        if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
            snprintf(why, sizeof why, ": this process may map %s in all (ulimit -v); the dry run needs address "
                     "space as large as each device, though no memory behind it, so raise the limit",
                     brg_format_bytes((size_t)rl.rlim_cur, limit, sizeof limit));
        else
            snprintf(why, sizeof why, " (%s); give a smaller device", strerror(errno));
        brg_arena_destroy(dev->arena);
        free(ctx);
        free(dev);
        return brg_error(BRG_ERR_HOST_MEMORY, "planning device '%s': cannot reserve %s of address space for its "
                         "arena%s", name, brg_format_bytes(target->capacity, b, sizeof b), why);
    }
    dev->base = slab;
    *out = dev;
    return BRG_OK;
}
