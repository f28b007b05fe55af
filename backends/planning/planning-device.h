/* brigade: the planning backend's device (private to backends/). */
#ifndef BRIGADE_PLANNING_DEVICE_H
#define BRIGADE_PLANNING_DEVICE_H

#include <stddef.h>

#include "brigade/device.h"
#include "brigade/ops.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The workspace a validated op takes on a real device of spec: the target
 * backend's pure function, which the registry hands in. */
typedef size_t (*brg_spec_workspace_fn)(const brg_op *op, const brg_device_spec *spec);

/* A planning device "plan:INDEX" with target's capacity whose ops take the
 * workspace that workspace(op, target) says, or where the arena has room
 * under its peak the wider one that wanted(op, target) says (NULL: none,
 * as for CPU targets), as the target's devices do; it reports target's
 * backend (backends/planning/device.c). */
brg_status brg_planning_device_create(const brg_device_spec *target, int index, brg_spec_workspace_fn workspace,
                                      brg_spec_workspace_fn wanted, brg_device **out);

#ifdef __cplusplus
}
#endif

#endif /* BRIGADE_PLANNING_DEVICE_H */
