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

#include <stdint.h>

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

/* The two streams of a device: kernels, memsets, copies within the device
 * and from and to the host go on the compute stream; copies to other
 * devices on the source device's copy stream. */
typedef enum brg_stream { BRG_STREAM_COMPUTE = 0, BRG_STREAM_COPY = 1 } brg_stream;
typedef struct brg_event brg_event;

/* Run op with table[op->kind]; BRG_ERR_UNSUPPORTED naming the device and
 * the kind where the table has no kernel for it. */
brg_status brg_kernel_run(const brg_kernel *table, brg_device *dev, const brg_op *op);

/* What a communicator between processes carries: messages from member 0
 * to member 1 of two (a channel of the pipeline), or sums over its members
 * (a device's replicas). brg_comm_create connects the members for it as
 * the communicator is made, not at its first use: NCCL connects a peer at
 * the first message to or from it, with a handshake on the host that
 * waits for the peer's first call, and within a step a host thread that
 * waits for a peer can deadlock a pipeline whose host threads also wait
 * for their own streams (docs/distributed.md, "Connections"). */
typedef enum brg_comm_use { BRG_COMM_MESSAGES, BRG_COMM_SUMS } brg_comm_use;

/* The host transport between the members of a communicator (below),
 * which exec provides (MPI, exec/world.c) for backends that move bytes
 * through host memory. Each call blocks its caller (a stream's thread;
 * the creating thread for the twin's connection handshake) until it is
 * done; messages between two members arrive in the order they were sent. */

typedef struct brg_wire {
    void *ctx;
    brg_status (*send)(void *ctx, int peer, const void *buf, size_t bytes);
    brg_status (*recv)(void *ctx, int peer, void *buf, size_t bytes);
    brg_status (*sum)(void *ctx, float *values, size_t n);
} brg_wire;

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
    /* Workspace with which the op could run faster (cuDNN's convolution
     * gradients: algorithms that want more than the planned budget), when
     * larger than workspace_bytes. brg_device_run lends it instead only
     * where the bytes in use stay within the device's workspace ceiling
     * (the plan's peak; none set, never: brg_arena_alloc_within), so a
     * device's peak, and its plan, stay what
     * workspace_bytes gives, provided no other thread allocates from the
     * arena meanwhile (one worker a device does all of a step's). A pure
     * function of the op and the settings the device was made with, as
     * workspace_bytes. Optional: NULL means never more. */
    size_t (*workspace_wanted)(brg_device *dev, const brg_op *op);
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

    /* Streams and events, for backends that run work after the call that
     * queued it (CUDA, cpu-async). Optional as a group: where event_record
     * is NULL the backend is synchronous (every call has finished when it
     * returns) and base/device.c keeps its events itself, with the host's
     * clock. ev->impl is the backend's. A wait sees the records made on ev
     * before it was queued, never later ones (CUDA's rule). */
    brg_status (*event_create)(brg_device *dev, brg_event *ev);
    void (*event_destroy)(brg_device *dev, brg_event *ev);
    brg_status (*event_record)(brg_device *dev, brg_event *ev, brg_stream stream);
    /* Work queued on dev's stream from now on waits for ev, an event of
     * this device or of another device of the same backend. */
    brg_status (*stream_wait)(brg_device *dev, brg_stream stream, const brg_event *ev);
    /* The host waits for ev; an asynchronous failure of the work before it
     * is returned (and stays: the device is broken until synchronized). */
    brg_status (*event_synchronize)(brg_device *dev, brg_event *ev);
    /* Seconds between two completed events of dev. */
    brg_status (*event_elapsed)(brg_device *dev, const brg_event *from, const brg_event *to, double *seconds);
    /* Copy on src_dev's copy stream, queued after what that stream waits
     * for; dst_dev is of the same backend (possibly src_dev). */
    brg_status (*copy_async)(brg_device *dst_dev, void *dst, brg_device *src_dev, const void *src, size_t bytes);
    /* Make ready now what copy_async from src_dev to dst_dev (of the same
     * backend) would otherwise set up at its first copy, during a step:
     * CUDA enables peer access or pins its staging buffers, both of which
     * synchronize the GPU. Optional: NULL means nothing to make. */
    brg_status (*copy_prepare)(brg_device *dst_dev, brg_device *src_dev);
    /* Page-locked host memory for fast copies (brg_device_host_alloc).
     * Optional, in pairs: NULL means ordinary aligned memory. */
    brg_status (*host_alloc)(brg_device *dev, size_t bytes, void **ptr);
    void (*host_free)(brg_device *dev, void *ptr);
    /* The channel block the device's kernels prefer for activations
     * between layers (brigade/tensor.h), 0 for plain NCHW. Optional: NULL
     * means 0. It must not change the workspace any op needs, so that
     * plans made without it stay exact. */
    int (*channel_block)(brg_device *dev);

    /* Communicators with devices of other processes (NCCL on CUDA), for
     * messages and sums that stay in device memory. Optional as a group:
     * where comm_create is NULL, messages between processes go through
     * host memory and MPI (exec/world.c). A communicator has a stream of
     * its own on its device. comm_id makes a fresh id (BRG_COMM_ID_BYTES)
     * that one member makes and the others are given out of band (MPI);
     * comm_create makes this device member `rank` of `ranks` (collective:
     * every member calls it with the same id). A backend that moves
     * bytes through host memory (cpu-async, the CPU twin of NCCL) sends
     * them over `wire`; NCCL has its own and ignores it. comm_connect,
     * right after (for two members or more), connects the members for
     * `use` by a first message or sum of its own (collective too), so
     * that no connection is made in a step. */
    brg_status (*comm_id)(brg_device *dev, unsigned char *id);
    brg_status (*comm_create)(brg_device *dev, const unsigned char *id, int ranks, int rank, const brg_wire *wire,
                              void **comm);
    brg_status (*comm_connect)(brg_device *dev, void *comm, int rank, brg_comm_use use);
    void (*comm_destroy)(brg_device *dev, void *comm);
    /* pieces[0..count) as one message to member peer, queued on dev's
     * `stream` after what it waits for; a receive of the same pieces'
     * sizes, on the communicator's stream; a sum of values[0..n) over
     * the members, in place, on the communicator's stream. */
    brg_status (*comm_send)(brg_device *dev, void *comm, brg_stream stream, int peer, void *const *pieces,
                            const size_t *bytes, int count);
    brg_status (*comm_recv)(brg_device *dev, void *comm, int peer, void *const *pieces, const size_t *bytes,
                            int count);
    brg_status (*comm_sum)(brg_device *dev, void *comm, float *values, size_t n);
    /* The communicator's stream waits for ev (of any device of the
     * backend); ev (of dev) is recorded on the communicator's stream. */
    brg_status (*comm_wait)(brg_device *dev, void *comm, const brg_event *ev);
    brg_status (*comm_record)(brg_device *dev, void *comm, brg_event *ev);
} brg_device_iface;

/* The size of a communicator's id (NCCL's ncclUniqueId). */
#define BRG_COMM_ID_BYTES 128

/* An event: a point in one stream's work (see the iface above). */
struct brg_event {
    brg_device *dev;   /* the device it was created on */
    int recorded;      /* records so far */
    double host_time;  /* synchronous devices: brg_now_seconds() of the latest record */
    void *impl;        /* the backend's, for asynchronous backends */
};

/* Ranges of a device's memory that its copy stream may still read (the
 * sources of brg_device_copy_async since the last fence). An allocation
 * that overlaps one first makes the compute stream wait for the copies:
 * the books free memory at once, the device reuses it only when no copy
 * reads it any more. */
#define BRG_COPY_READS_MAX 16
typedef struct brg_copy_reads {
    int n;
    size_t offset[BRG_COPY_READS_MAX], bytes[BRG_COPY_READS_MAX];
    brg_event *fence; /* recorded on the copy stream when needed */
} brg_copy_reads;

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
    brg_copy_reads copy_reads;
    /* Bytes moved between host memory and this device (copy_in, copy_out,
     * copies staged through the host), for host_bytes_per_step. Only the
     * thread that drives the device touches them. */
    uint64_t host_bytes;
    /* Test hooks (brg_device_set_fault): fail the N-th allocation, copy or
     * kernel launch from now on (1 = the next one; 0 = never). */
    int64_t fault_alloc, fault_copy, fault_run;
    /* Allocations, copies and kernel launches so far (what the fault hooks count). */
    uint64_t n_alloc, n_copy, n_run;
    /* Workspaces lent at the size workspace_wanted asked (brg_device_run),
     * and the bytes in use they must stay within (0: none is lent;
     * brg_device_set_workspace_ceiling). */
    uint64_t n_wider;
    size_t workspace_ceiling;
    /* The warm-up (brg_device_set_warming): on while it runs, ended once it
     * has; the keys (op_shape_key in device.c) of the op shapes it lent
     * wider, which alone a warmed device lends wider after it. */
    int warming, warmed;
    uint64_t *wide_keys;
    int n_wide_keys, wide_keys_cap;
};

/* The common part of every backend's constructor: a device with the given
 * table, a zeroed context of context_bytes, its name and an arena of the
 * given capacity. On failure nothing is left allocated and *out is NULL.
 * The backend then fills in its context and base. */
brg_status brg_device_new(const brg_device_iface *iface, size_t context_bytes, const char *name, size_t capacity,
                          brg_device **out);

/* ---- events and asynchronous copies (every backend) ---- */

/* Whether the device queues work (CUDA, cpu-async) rather than finishing
 * it in the call. */
int brg_device_is_async(const brg_device *dev);

brg_status brg_event_create(brg_device *dev, brg_event **out);
void brg_event_destroy(brg_event *ev); /* accepts NULL */
/* ev completes when the work queued on its device's stream so far has. */
brg_status brg_event_record(brg_event *ev, brg_stream stream);
/* dev's stream waits for ev from now on. ev may belong to another device;
 * across backends the host waits for ev instead. */
brg_status brg_device_wait_event(brg_device *dev, brg_stream stream, const brg_event *ev);
brg_status brg_event_synchronize(brg_event *ev);
/* Seconds from `from` to `to`, two completed events of one device. */
brg_status brg_event_elapsed(const brg_event *from, const brg_event *to, double *seconds);

/* Copy bytes from src_dev's memory to dst_dev's on src_dev's copy stream,
 * after what that stream already waits for and nothing else: the caller
 * orders it with events (record on the producer, wait on the copy stream)
 * and records an event after it for the consumer. The source range is
 * remembered (brg_copy_reads) so that memory freed meanwhile is not reused
 * under the copy. Across backends the copy is staged through the host and
 * has finished when the call returns. */
brg_status brg_device_copy_async(brg_device *dst_dev, void *dst, brg_device *src_dev, const void *src,
                                 size_t bytes);

/* Sets up, before the steps, what copies from src_dev to dst_dev need
 * (the iface's copy_prepare); the channels between devices call it when
 * they are made. */
brg_status brg_device_copy_prepare(brg_device *dst_dev, brg_device *src_dev);

/* ---- communicators between processes (backends with comm_create) ---- */

typedef struct brg_comm brg_comm;

/* Whether dev's backend has communicators (CUDA built with NCCL, and
 * cpu-async, its twin). */
int brg_device_has_comm(const brg_device *dev);
/* A fresh id for a communicator (BRG_COMM_ID_BYTES), made by one member
 * and handed to the others. */
brg_status brg_comm_make_id(brg_device *dev, unsigned char *id);
/* dev as member `rank` of `ranks` of the communicator with that id,
 * connected for `use` (BRG_COMM_MESSAGES: two members, member 0 sends);
 * collective over the members (each in its own process). wire: the host
 * transport between the members, for backends without their own (kept
 * by the caller while the communicator lives). */
brg_status brg_comm_create(brg_device *dev, const unsigned char *id, int ranks, int rank, brg_comm_use use,
                           const brg_wire *wire, brg_comm **out);
void brg_comm_destroy(brg_comm *comm); /* accepts NULL; waits for its stream */
/* pieces[0..count) of comm's device memory to member peer as one message,
 * on the device's `stream` after what it waits for (on the copy stream
 * the ranges are remembered as copy_async's are, so that memory freed
 * meanwhile is not reused under the send). Blocks that stream, not the
 * host, until the peer receives. */
brg_status brg_comm_send(brg_comm *comm, brg_stream stream, int peer, void *const *pieces, const size_t *bytes,
                         int count);
/* The next message from peer into pieces[0..count) (the sender's sizes),
 * on the communicator's stream. */
brg_status brg_comm_recv(brg_comm *comm, int peer, void *const *pieces, const size_t *bytes, int count);
/* values[0..n) summed over the members, in place, on the communicator's stream. */
brg_status brg_comm_sum(brg_comm *comm, float *values, size_t n);
/* The communicator's stream waits for ev; ev is recorded on it. */
brg_status brg_comm_wait_event(brg_comm *comm, const brg_event *ev);
brg_status brg_comm_record_event(brg_comm *comm, brg_event *ev);

/* What the calling thread is doing on dev ("action 17 (F3.1) of pipeline
 * step 4"), set by whoever drives it (the executor's worker before each
 * action, a gradient reducer before each bucket): an asynchronous backend
 * stamps the work it queues with it, and a failure found later names it.
 * One per thread, not per device: a worker and its reducer queue work on
 * the same device at once, each under its own name. NULL or "" clears it. */
#define BRG_ACTIVITY_MAX 96
void brg_device_set_activity(const brg_device *dev, const char *what);
/* The calling thread's activity on dev; "" when it set none for dev. */
const char *brg_device_activity(const brg_device *dev);

/* Bytes this device has moved between host memory and itself so far. */
uint64_t brg_device_host_bytes(const brg_device *dev);

/* How many allocations, copies and kernel launches the device has seen. */
void brg_device_counts(const brg_device *dev, uint64_t *allocs, uint64_t *copies, uint64_t *runs);


/* The warm-up before the first step of ranks (brg_program_warm_up), where
 * nothing waits on a peer: while it is on, an op that may be lent a wider
 * workspace (a CUDA convolution gradient with BRG_CUDA_CONV_WORKSPACE_GROW=1
 * and the plan's peak as ceiling) runs with the wider one where the rule
 * grants it and, the first time its shape is lent wider, again with the
 * planned one, so that the backend makes its choices (cuDNN's algorithms:
 * timings, runtime-compiled engines, kernels loaded) for both sizes before
 * any step. Once it has ended, the device lends wider only to op shapes it
 * lent wider while warming: a step never meets a size first, whatever its
 * bytes in use. Run twice, an accumulating op adds twice; the warm-up's
 * gradients are zeroed after it. Until its first warm-up a device lends as
 * before; after it, the rule stays (for a later executor on it too, whose
 * own warm-up adds its shapes). */
void brg_device_set_warming(brg_device *dev, int on);
/* How many op shapes the warm-up lent wider (0 before one). */
int brg_device_warmed_wider(const brg_device *dev);

/* Test hook: the next `alloc`-th arena allocation, `copy`-th copy (in, out,
 * between devices, asynchronous) and `run`-th kernel launch fail with
 * BRG_ERR_OUT_OF_MEMORY, BRG_ERR_BACKEND and BRG_ERR_BACKEND ("injected
 * fault"); 0 arms nothing. Counted from this call. */
void brg_device_set_fault(brg_device *dev, int64_t alloc, int64_t copy, int64_t run);

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
