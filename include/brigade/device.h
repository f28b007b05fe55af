/* brigade: devices.
 *
 * A device is one place where a pipeline stage runs: a set of CPU cores, a
 * GPU, or a capped slice of a GPU. Every device owns an arena with a hard
 * capacity; all memory it uses comes from that arena, so a device never
 * holds more than its cap. Backends (CPU, CUDA, planning) implement the same
 * table of functions behind this interface.
 */
#ifndef BRIGADE_DEVICE_H
#define BRIGADE_DEVICE_H

#include <stddef.h>
#include <stdint.h>

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

/* The GPU of the rank that holds the device, by its local rank on the
 * node ("cuda:local"): every rank plans with the same list, and each
 * resolves its own devices to its own GPU (brg_world_device_spec) before
 * it creates them. */
#define BRG_GPU_LOCAL (-2)

/* One device of a device list. */
typedef struct brg_device_spec {
    brg_backend backend;
    int gpu;         /* GPU ordinal for BRG_BACKEND_CUDA (or BRG_GPU_LOCAL); -1 otherwise */
    size_t capacity; /* arena capacity in bytes */
    /* CUDA only (0 elsewhere). vdev: the number of this virtual device among
     * those carved out of its GPU ("cuda:0.3" is 3), or -1 for a whole GPU
     * ("cuda:1"). conv_workspace: the budget for one convolution's workspace
     * in bytes; 0 means BRG_CUDA_CONV_WORKSPACE_DEFAULT (64 MiB). */
    int vdev;
    size_t conv_workspace;
    /* CPU only (0 elsewhere): 1 for an asynchronous CPU device ("cpu-async:"),
     * whose compute and copy streams are threads that run queued work in
     * order, as a GPU's streams do; 0 for the synchronous one. */
    int async;
    /* Whole GPUs only (0 elsewhere): the memory of the card the device
     * stands for ("cuda:0@12GiB"), as CUDA counts it (totalGlobalMem, a
     * little under nvidia-smi's memory.total); its capacity is that less
     * brg_cuda_reserve_bytes of it. 0: the GPU's own memory. */
    size_t card;
} brg_device_spec;

/* Memory a whole-GPU device leaves to the CUDA context and the libraries'
 * handles, outside its arena: 512 MiB plus 5% of the card's memory. */
BRG_API size_t brg_cuda_reserve_bytes(size_t card_memory);

/* What CUDA devices created now take from the environment (docs/cuda.md):
 * whether TF32 tensor cores are allowed (BRG_CUDA_TF32=1), how their
 * convolutions choose cuDNN's algorithm: "measure" (BRG_CUDA_CONV_ALGO=measure,
 * cuDNN's timings) or "heuristic" (the default), which cuDNN API runs
 * them: "graph" (BRG_CUDA_CONV_API=graph, the backend API's engines; opt-in,
 * shapes it cannot build fall back) or "legacy" (the default), and whether a
 * convolution gradient's workspace grows past the budget to its whole
 * bound (the im2col matrix or x, w and y together) where the bytes in use
 * stay within the device's workspace ceiling (brg_device_set_workspace_ceiling;
 * BRG_CUDA_CONV_WORKSPACE_GROW=1; off by default until its gain is
 * measured: docs/cuda.md). Any build, GPU or not. */
BRG_API int brg_cuda_tf32_enabled(void);
BRG_API const char *brg_cuda_conv_algo(void);
BRG_API const char *brg_cuda_conv_api(void);
BRG_API int brg_cuda_conv_workspace_grows(void);
/* How 1x1 convolutions' gradients run: "cudnn" (the default) or "gemm"
 * (BRG_CUDA_CONV_1X1=gemm: cuBLAS, the filter gradient as one GEMM over
 * the batch; docs/cuda.md). */
BRG_API const char *brg_cuda_conv_1x1(void);
/* The budget for one convolution's workspace that CUDA devices parsed now
 * get: BRG_CUDA_CONV_WORKSPACE (a size, e.g. 256MiB) where set, else 64 MiB.
 * brg_device_spec_parse puts it into the specs, so that plans and devices
 * use the same. BRG_ERR_INVALID_ARGUMENT, naming the value, when it is not
 * a positive size; *bytes is then the default. */
BRG_API brg_status brg_cuda_conv_workspace(size_t *bytes);

/* Parse a device list: comma-separated items, each one of
 *   [cpu:][Nx]SIZE   N CPU devices of SIZE ("4x8MiB", "cpu:2x1GiB");
 *   cpu-async:[Nx]SIZE  N asynchronous CPU devices of SIZE
 *                    ("cpu-async:4x10MiB", named "cpu-async:I"): their
 *                    work runs on a compute and a copy thread each, ordered
 *                    by events as on a GPU's streams, so that the event
 *                    protocol is exercised without a GPU. The environment
 *                    variable BRG_DEBUG_DELAYS=MAX_US[:SEED], read when one
 *                    is created, makes each stream thread sleep a random 0 to
 *                    MAX_US microseconds before each operation, so that a
 *                    missing wait shows as wrong data;
 *   cuda:G           GPU G whole; its capacity is the card's memory less
 *                    brg_cuda_reserve_bytes, so the GPU must be visible;
 *                    bare ordinals that follow continue the list of whole
 *                    GPUs ("cuda:0,1,2"); cuda:A-B is GPUs A to B whole;
 *   cuda:G@CARD, cuda:A-B@CARD  whole GPUs taken as cards of CARD memory
 *                    ("cuda:0-6@12GiB"): capacity CARD less the reserve of
 *                    CARD. Needs no GPU, and is not checked against the
 *                    GPUs here; brg_device_create refuses a GPU that is not
 *                    there or has less than CARD (a larger GPU acts as the
 *                    card);
 *   cuda:G:[Nx]SIZE  N virtual devices of SIZE carved out of GPU G
 *                    ("cuda:0:7x12GiB"), numbered across the list per GPU
 *                    and named "cuda:G.V". Needs no GPU: a machine without
 *                    one can plan for it;
 *   cuda:local[:[Nx]SIZE|@CARD]  under mpirun, each rank's own GPU (by its
 *                    local rank): whole, or N virtual devices of SIZE on
 *                    it. Alone in its list; it names one rank's devices,
 *                    and brg_world_expand_devices makes the list of every
 *                    rank's (gpu BRG_GPU_LOCAL). A whole one takes the size
 *                    of GPU 0 (the node's GPUs alike), so a GPU must be
 *                    visible, unless @CARD names it; named "cuda:local" and
 *                    "cuda:local.V".
 * Items mix ("cuda:0:2x12GiB,4x8MiB"). Writes at most max specs and sets
 * *count to the number of devices. A list that makes no sense (zero
 * devices, zero size, a count of 0, an unknown suffix or backend, a GPU used
 * whole and carved too, an ordinal not present where GPUs are visible, more
 * virtual capacity than the card has) is BRG_ERR_INVALID_ARGUMENT with a
 * message that quotes the offending item. */
BRG_API brg_status brg_device_spec_parse(const char *text, brg_device_spec *specs, int max, int *count);

/* The name a device of spec gets at position index in its list: "cpu:2",
 * "cpu-async:2", "cuda:1", "cuda:0.3". Returns buf. */
BRG_API const char *brg_device_spec_name(const brg_device_spec *spec, int index, char *buf, size_t size);

/* Whether this machine can make the device of spec, as far as can be told
 * before making it: a whole GPU taken as a card (cuda:G@CARD; cuda:local
 * checks GPU 0) must hold the card where that GPU is visible. A plan needs
 * no such check (cards are planned anywhere); commands that make devices
 * call it before they plan, so that a card larger than its GPU is refused
 * before a plan is printed. brg_device_create checks the same. */
BRG_API brg_status brg_device_spec_check_here(const brg_device_spec *spec);

/* Name of a backend ("cpu", "cuda"). */
BRG_API const char *brg_backend_name(brg_backend backend);

/* Whether a backend can create devices here: the CPU always; CUDA when this
 * build has the CUDA runtime and cuDNN and a GPU is visible. */
BRG_API int brg_backend_available(brg_backend backend);

/* Create the device described by spec. index is its position in the list and
 * becomes part of a CPU device's name ("cpu:2", "cpu-async:2"). The arena's slab is
 * allocated now, in one piece: on the CPU backend address space whose pages
 * are committed only when touched, on a GPU one cudaMalloc of the whole
 * capacity. */
BRG_API brg_status brg_device_create(const brg_device_spec *spec, int index, brg_device **out);

/* Shorthand: a CPU device with the given capacity. */
BRG_API brg_status brg_device_create_cpu(size_t capacity, int index, brg_device **out);

/* How CPU devices convolve: "onednn" (oneDNN, the default where built) or
 * "im2col" (im2col + OpenBLAS sgemm). Read once from the environment
 * variable BRG_CPU_CONV where set, else the default; choose before planning
 * or creating devices, since the choice sets the workspace sizes. */
BRG_API brg_status brg_cpu_set_convolution(const char *name);
BRG_API const char *brg_cpu_convolution(void);

/* How CPU devices keep the activations between the layers of a stage:
 * "blocked" (oneDNN's channel-blocked layout wherever every layer around a
 * tensor takes it; the default where oneDNN convolves) or "plain" (NCHW
 * everywhere). Read once from BRG_CPU_LAYOUT where set. The results are the
 * same bits either way; only the reorders around oneDNN's convolutions
 * differ. Stages take the choice when they are created. */
BRG_API brg_status brg_cpu_set_layout(const char *name);
BRG_API const char *brg_cpu_layout(void);

/* A planning device: capacity and workspace sizes of `target` (a CPU or
 * CUDA device spec), bookkeeping only. Its memory cannot be touched; copies
 * and ops do nothing (copies out yield zeros). */
BRG_API brg_status brg_device_create_planning(const brg_device_spec *target, int index, brg_device **out);
BRG_API int brg_device_is_planning(const brg_device *dev); /* 0 for NULL */

/* Release the device. Accepts NULL. */
BRG_API void brg_device_destroy(brg_device *dev);

BRG_API const char *brg_device_name(const brg_device *dev);
BRG_API brg_backend brg_device_backend(const brg_device *dev);
BRG_API brg_arena *brg_device_arena(brg_device *dev);
BRG_API size_t brg_device_capacity(const brg_device *dev);
BRG_API size_t brg_device_in_use(const brg_device *dev);
BRG_API size_t brg_device_peak(const brg_device *dev);
/* How many ops' workspaces the device lent wider than planned since it was
 * made: CUDA convolution gradients given their whole bound within the
 * device's workspace ceiling (below; never raising the peak past the
 * plan's; brg_cuda_conv_workspace_grows). 0 on CPU devices. */
BRG_API uint64_t brg_device_wider_workspaces(const brg_device *dev);
/* The bytes in use under which the device may lend an op that wider
 * workspace: the plan's peak for the device (brg_plan_set_workspace_ceilings,
 * as brigade train and bench do). Each op's grant then depends only on its
 * bytes in use and the arena's layout, the same in every step, from the
 * first on, and in every process with the same devices, while the peak
 * stays the plan's. 0 (the default): no wider workspace at all. */
BRG_API void brg_device_set_workspace_ceiling(brg_device *dev, size_t bytes);
BRG_API size_t brg_device_workspace_ceiling(const brg_device *dev);

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

/* Host memory the device copies in from and out to at full speed:
 * page-locked (pinned, cudaHostAlloc) for a CUDA device, so that its
 * copies need no staging and can overlap computation; ordinary memory
 * (aligned to BRG_ARENA_ALIGN) for a CPU device. Outside the arena: the
 * plan does not count it. A copy in from it may still be reading it after
 * brg_device_copy_in returns (a CUDA device DMAs from it directly, in
 * order with its work): leave it unchanged until brg_device_synchronize
 * (which a pipeline step ends with). Free it with brg_device_host_free on
 * the same device before the device is destroyed; accepts NULL. */
BRG_API brg_status brg_device_host_alloc(brg_device *dev, size_t bytes, void **ptr);
BRG_API void brg_device_host_free(brg_device *dev, void *ptr);
/* Whether brg_device_host_alloc gives page-locked memory (1) or ordinary. */
BRG_API int brg_device_host_pinned(const brg_device *dev);

/* Set bytes of device memory to zero. */
BRG_API brg_status brg_device_memset_zero(brg_device *dev, void *dst, size_t bytes);

/* Run one op (see brigade/ops.h) on the device. If the op needs workspace
 * and op->workspace is NULL, the device takes it from its own arena for the
 * duration of the call under the tag "<op name> workspace". */
BRG_API brg_status brg_device_run(brg_device *dev, const brg_op *op);

/* Bytes of workspace the op needs on this device (0 if none). */
BRG_API brg_status brg_device_workspace_bytes(brg_device *dev, const brg_op *op, size_t *bytes);

/* The channel block the device wants activations in between layers
 * (brigade/tensor.h): 8 or 16 on CPU devices whose convolutions run on
 * oneDNN with the blocked layout chosen (brg_cpu_set_layout), else 0. */
BRG_API int brg_device_channel_block(brg_device *dev);

/* Wait until all work queued on the device has finished. */
BRG_API brg_status brg_device_synchronize(brg_device *dev);

#ifdef __cplusplus
}
#endif

#endif /* BRIGADE_DEVICE_H */
