/* brigade: the CPU backend's device (private to backends/). */
#ifndef BRIGADE_CPU_DEVICE_H
#define BRIGADE_CPU_DEVICE_H

#include <stddef.h>

#include "brigade/device.h"
#include "brigade/ops.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A CPU device "cpu:INDEX" whose arena is a slab of capacity bytes of
 * reserved address space (backends/cpu/device.c). */
brg_status brg_cpu_device_create(size_t capacity, int index, brg_device **out);

/* Workspace of a validated op on a CPU device of spec (a pure function:
 * the planning device of a CPU target asks it). */
size_t brg_cpu_spec_workspace_bytes(const brg_op *op, const brg_device_spec *spec);

#ifdef __cplusplus
}
#endif

#endif /* BRIGADE_CPU_DEVICE_H */
