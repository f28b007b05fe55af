/* brigade: the device interface that backends implement (private).
 *
 * A device is {iface, context}: the table below plus the backend's own
 * state. Suballocation is common to all backends (lib/device.c over the
 * arena); a backend provides the slab and the operations on it.
 */
#ifndef BRIGADE_DEVICE_IMPL_H
#define BRIGADE_DEVICE_IMPL_H

#include "brigade/arena.h"
#include "brigade/device.h"
#include "brigade/ops.h"

#ifdef __cplusplus
extern "C" {
#endif

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
} brg_device_iface;

struct brg_device {
    const brg_device_iface *iface;
    void *context;   /* backend state */
    char name[32];   /* "cpu:0", "cuda:0.3", "plan:2" */
    brg_arena *arena;
    char *base;      /* start of the slab; allocations are base + arena offset */
    /* 1 for a planning device (device_planning.c): the slab is reserved
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

/* Bind the calling thread to the cores nearest the device (hwloc): for a
 * GPU, the cores of its NUMA node; for a CPU device, its share of the
 * machine's cores, devices spread over NUMA nodes and cores by index. The
 * executor's worker for a device calls it first. Best effort: where the
 * topology or binding is unavailable it does nothing and returns BRG_OK
 * (lib/placement.c). */
brg_status brg_device_bind_thread(const brg_device *dev, int index, int count);

/* Backends' constructors. (The planning device's is public:
 * brg_device_create_planning in brigade/program.h.) */
brg_status brg_cpu_device_create(size_t capacity, int index, brg_device **out);

/* The CUDA backend (lib/device_cuda.c). Its functions exist in every build;
 * without the CUDA runtime and cuDNN they report no GPU and refuse to
 * create devices with a message that says why. */
/* Create the CUDA device of spec (spec->backend is BRG_BACKEND_CUDA); the
 * name comes from spec->gpu and spec->vdev, capacity 0 means the whole GPU
 * less brg_cuda_reserve_bytes. */
brg_status brg_cuda_device_create(const brg_device_spec *spec, brg_device **out);
/* Number of GPUs visible; 0 without a driver, a GPU or the backend. When
 * why is not NULL and the answer is 0, it gets the reason. */
int brg_cuda_gpu_count(char *why, size_t why_size);
/* Total memory of GPU gpu in *bytes; BRG_ERR_UNSUPPORTED when it is not
 * visible (the message says how many are). */
brg_status brg_cuda_gpu_memory(int gpu, size_t *bytes);
/* Whether GPU a can read GPU b's memory directly (cudaDeviceCanAccessPeer). */
int brg_cuda_can_access_peer(int a, int b);
/* PCI address "0000:65:00.0" of GPU gpu into buf; BRG_ERR_UNSUPPORTED when
 * unknown. */
brg_status brg_cuda_gpu_pci_bus_id(int gpu, char *buf, size_t size);
/* The GPU ordinal of a CUDA device; -1 for other devices. */
int brg_cuda_device_gpu(const brg_device *dev);

/* Locality of the PCI device at bus id busid ("0000:65:00.0") from hwloc
 * (lib/placement.c): the OS index of its NUMA node (-1 when it is not one
 * node) and the list of its nearest CPUs ("0-15"). BRG_ERR_UNSUPPORTED when
 * hwloc does not see the device. */
brg_status brg_pci_locality(const char *busid, int *numa_node, char *cpus, size_t cpus_size);

#ifdef __cplusplus
}
#endif

#endif /* BRIGADE_DEVICE_IMPL_H */
