/* brigade: the CPU backend's device (private to backends/). */
#ifndef BRIGADE_CPU_DEVICE_H
#define BRIGADE_CPU_DEVICE_H

#include <stddef.h>

#include "brigade/device.h"
#include "brigade/ops.h"

typedef struct brg_device_iface brg_device_iface; /* base/device-impl.h */

#ifdef __cplusplus
extern "C" {
#endif

/* A CPU device "cpu:INDEX" whose arena is a slab of capacity bytes of
 * reserved address space (backends/cpu/device.c). */
brg_status brg_cpu_device_create(size_t capacity, int index, brg_device **out);

/* An asynchronous CPU device "cpu-async:INDEX" (backends/cpu/async.c): the
 * same slab, with a compute and a copy stream that are threads running
 * queued work in order, the CPU twin of a GPU's streams. Reads
 * BRG_DEBUG_DELAYS (brigade/device.h). */
brg_status brg_cpu_async_device_create(size_t capacity, int index, brg_device **out);

/* Wait until everything queued on a cpu-async device has run, and return
 * its pending asynchronous failure, if any (kept: only synchronize clears
 * it). BRG_OK at once for any other device. */
brg_status brg_cpu_async_drain(brg_device *dev);

/* The slab both CPU devices share: a device of iface (brg_device_new's
 * arguments) whose base is capacity bytes of reserved address space, and
 * its release (the slab, the context and dev; the arena is the caller's,
 * as in iface->destroy). */
brg_status brg_cpu_device_new(const brg_device_iface *iface, size_t context_bytes, const char *name,
                              size_t capacity, brg_device **out);
void brg_cpu_device_release(brg_device *dev);

/* Workspace of a validated op on a CPU device of spec (a pure function:
 * the planning device of a CPU target asks it). */
size_t brg_cpu_spec_workspace_bytes(const brg_op *op, const brg_device_spec *spec);

#ifdef __cplusplus
}
#endif

#endif /* BRIGADE_CPU_DEVICE_H */
