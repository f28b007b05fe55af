/* brigade: devices.
 *
 * A device is one place where a pipeline stage runs: a set of CPU cores, a
 * GPU, or a capped slice of a GPU. Every device owns an arena with a hard
 * capacity; all memory it uses comes from that arena, so a device never
 * holds more than its cap. Backends (CPU now, CUDA later) implement the same
 * table of functions behind this interface.
 */
#ifndef BRIGADE_DEVICE_H
#define BRIGADE_DEVICE_H

#include <stddef.h>

#include "brigade/arena.h"
#include "brigade/status.h"
#include "brigade/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum brg_backend {
    BRG_BACKEND_CPU = 0,
    BRG_BACKEND_CUDA = 1,
} brg_backend;

typedef struct brg_op brg_op; /* see brigade/ops.h */

/* One device of a device list. */
typedef struct brg_device_spec {
    brg_backend backend;
    int gpu;         /* GPU ordinal for BRG_BACKEND_CUDA; -1 otherwise */
    size_t capacity; /* arena capacity in bytes */
} brg_device_spec;

/* Parse a device list: comma-separated items, each "[cpu:][Nx]SIZE", for
 * example "4x8MiB" (four CPU devices of 8 MiB) or "2x24GiB,5x12GiB".
 * Writes at most max specs and sets *count to the number of devices.
 * A list that makes no sense (zero devices, zero size, a count of 0, an
 * unknown suffix or backend) is BRG_ERR_INVALID_ARGUMENT with a message that
 * quotes the offending item. */
BRG_API brg_status brg_device_spec_parse(const char *text, brg_device_spec *specs, int max, int *count);

/* Name of a backend ("cpu", "cuda"). */
BRG_API const char *brg_backend_name(brg_backend backend);

/* Whether a backend is compiled into this build. */
BRG_API int brg_backend_available(brg_backend backend);

/* Create the device described by spec. index is its position in the list and
 * becomes part of its name ("cpu:2"). The arena's slab is reserved now; on
 * the CPU backend pages are committed only when touched. */
BRG_API brg_status brg_device_create(const brg_device_spec *spec, int index, brg_device **out);

/* Shorthand: a CPU device with the given capacity. */
BRG_API brg_status brg_device_create_cpu(size_t capacity, int index, brg_device **out);

/* Release the device. Accepts NULL. */
BRG_API void brg_device_destroy(brg_device *dev);

BRG_API const char *brg_device_name(const brg_device *dev);
BRG_API brg_backend brg_device_backend(const brg_device *dev);
BRG_API brg_arena *brg_device_arena(brg_device *dev);
BRG_API size_t brg_device_capacity(const brg_device *dev);
BRG_API size_t brg_device_in_use(const brg_device *dev);
BRG_API size_t brg_device_peak(const brg_device *dev);

/* Allocate bytes from the device's arena (aligned to BRG_ARENA_ALIGN). tag
 * names the allocation in out-of-memory messages. */
BRG_API brg_status brg_device_alloc(brg_device *dev, size_t bytes, const char *tag, void **ptr);

/* Return an allocation to the arena. Accepts NULL. */
BRG_API brg_status brg_device_free(brg_device *dev, void *ptr);

/* Copies. copy_in: host -> device; copy_out: device -> host; copy_between:
 * from one device's memory to another's (a peer copy between GPUs, a memcpy
 * between CPU devices, staged through the host across backends). */
BRG_API brg_status brg_device_copy_in(brg_device *dev, void *dst, const void *host_src, size_t bytes);
BRG_API brg_status brg_device_copy_out(brg_device *dev, void *host_dst, const void *src, size_t bytes);
BRG_API brg_status brg_device_copy_between(brg_device *dst_dev, void *dst, brg_device *src_dev,
                                           const void *src, size_t bytes);

/* Set bytes of device memory to zero. */
BRG_API brg_status brg_device_memset_zero(brg_device *dev, void *dst, size_t bytes);

/* Run one op (see brigade/ops.h) on the device. If the op needs workspace
 * and op->workspace is NULL, the device takes it from its own arena for the
 * duration of the call under the tag "<op name> workspace". */
BRG_API brg_status brg_device_run(brg_device *dev, const brg_op *op);

/* Bytes of workspace the op needs on this device (0 if none). */
BRG_API brg_status brg_device_workspace_bytes(brg_device *dev, const brg_op *op, size_t *bytes);

/* Wait until all work queued on the device has finished. */
BRG_API brg_status brg_device_synchronize(brg_device *dev);

#ifdef __cplusplus
}
#endif

#endif /* BRIGADE_DEVICE_H */
