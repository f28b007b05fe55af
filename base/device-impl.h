/* brigade: the device interface that backends implement (private).
 *
 * A device is {iface, context}: the table below plus the backend's own
 * state. Suballocation is common to all backends (base/device.c over the
 * arena); a backend provides the slab and the operations on it. Backends
 * live in backends/ and are reached only through this table; the registry
 * (backends/registry.c) creates a device of any backend from its spec.
 */
#ifndef BRIGADE_DEVICE_IMPL_H
#define BRIGADE_DEVICE_IMPL_H

#include "brigade/arena.h"
#include "brigade/device.h"
#include "brigade/ops.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A kernel runs one validated op on its device (op->workspace set as the
 * device's workspace_bytes said). Every backend keeps a table of them
 * indexed by op kind, all with this one signature (backends/cpu/dispatch.c,
 * backends/cuda/dispatch.c), and its run slot hands the op to
 * brg_kernel_run with that table. */
typedef brg_status (*brg_kernel)(brg_device *dev, const brg_op *op);

/* Run op with table[op->kind]; BRG_ERR_UNSUPPORTED naming the device and
 * the kind where the table has no kernel for it. */
brg_status brg_kernel_run(const brg_kernel *table, brg_device *dev, const brg_op *op);

typedef struct brg_device_iface {
    brg_backend backend;
    /* Release the slab and the context. Required. */
    void (*destroy)(brg_device *dev);
    /* Copies: host -> device, device -> host, device -> device of the same
     * backend (src_dev may differ from dst_dev). Required. */
    brg_status (*copy_in)(brg_device *dev, void *dst, const void *src, size_t bytes);
    brg_status (*copy_out)(brg_device *dev, void *dst, const void *src, size_t bytes);
    brg_status (*copy_peer)(brg_device *dst_dev, void *dst, brg_device *src_dev, const void *src,
                            size_t bytes);
    brg_status (*memset_zero)(brg_device *dev, void *dst, size_t bytes);
    /* Run a validated op; op->workspace is set if workspace_bytes said so. Required. */
    brg_status (*run)(brg_device *dev, const brg_op *op);
    /* Workspace a validated op needs. Optional: NULL means none. */
    size_t (*workspace_bytes)(brg_device *dev, const brg_op *op);
    /* Wait for queued work. Optional: NULL for synchronous backends. */
    brg_status (*synchronize)(brg_device *dev);
    /* The PCI address ("0000:65:00.0") of the device's hardware, for
     * placing threads near it. Optional: NULL where it has none (CPU). */
    brg_status (*pci_bus_id)(const brg_device *dev, char *buf, size_t size);
    /* `devices` devices of this table are about to compute at once and share
     * the machine's cores: set the process-wide thread count of the
     * backend's libraries to a share each, and return what restore_cores
     * takes to put it back (0: nothing changed). Optional, in pairs. */
    int (*share_cores)(int devices);
    void (*restore_cores)(int saved);
} brg_device_iface;

struct brg_device {
    const brg_device_iface *iface;
    void *context;   /* backend state */
    char name[32];   /* "cpu:0", "cuda:0.3", "plan:2" */
    brg_arena *arena;
    char *base;      /* start of the slab; allocations are base + arena offset */
    /* 1 for a planning device (backends/planning): the slab is reserved
     * address space that nothing may touch, and the backend only keeps the
     * books (ops do nothing, copies out yield zeros). iface->backend is then
     * the target's backend, whose workspace sizes it reports. Set by the
     * constructor; 0 for devices with real memory. */
    int planning;
};

/* The common part of every backend's constructor: a device with the given
 * table, a zeroed context of context_bytes, its name and an arena of the
 * given capacity. On failure nothing is left allocated and *out is NULL.
 * The backend then fills in its context and base. */
brg_status brg_device_new(const brg_device_iface *iface, size_t context_bytes, const char *name, size_t capacity,
                          brg_device **out);

/* What brg_devices_share_cores changed, for brg_devices_restore_cores. */
#define BRG_CORE_SHARE_MAX 4
typedef struct brg_core_share {
    int n;
    void (*restore[BRG_CORE_SHARE_MAX])(int saved);
    int saved[BRG_CORE_SHARE_MAX];
} brg_core_share;

/* devs[0..n) are about to compute at once: each backend with share_cores
 * gives its devices among them an equal share of the cores (planning
 * devices compute nothing and do not count). Process-wide state: the caller
 * puts it back with brg_devices_restore_cores when they are done. */
void brg_devices_share_cores(brg_device *const *devs, int n, brg_core_share *saved);
void brg_devices_restore_cores(const brg_core_share *saved);

/* Highest GPU ordinal a device list may name. */
#define BRG_DEVICE_MAX_GPU 63

/* The syntax of a device list (brg_device_spec_parse's), without what
 * needs the backends: whole GPUs get capacity 0, virtual devices vdev 0
 * and CUDA devices conv_workspace 0, for the registry to complete. */
brg_status brg_device_spec_parse_syntax(const char *text, brg_device_spec *specs, int max, int *count);

/* Bind the calling thread to the cores nearest the device (hwloc): for a
 * device with a PCI address (a GPU), the cores of its NUMA node; for a CPU
 * device, its share of the machine's cores, devices spread over NUMA nodes
 * and cores by index. The executor's worker for a device calls it first.
 * Best effort: where the topology or binding is unavailable it does nothing
 * and returns BRG_OK (base/placement.c). */
brg_status brg_device_bind_thread(const brg_device *dev, int index, int count);

/* Locality of the PCI device at bus id busid ("0000:65:00.0") from hwloc
 * (base/placement.c): the OS index of its NUMA node (-1 when it is not one
 * node) and the list of its nearest CPUs ("0-15"). BRG_ERR_UNSUPPORTED when
 * hwloc does not see the device. */
brg_status brg_pci_locality(const char *busid, int *numa_node, char *cpus, size_t cpus_size);

#ifdef __cplusplus
}
#endif

#endif /* BRIGADE_DEVICE_IMPL_H */
