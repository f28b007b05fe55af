/* brigade: one pipeline across processes (and nodes), launched by mpirun.
 *
 * A world is the processes of a run. Started by `mpirun -np R` (or srun
 * with PMIx), brg_world_init initializes MPI and the world has R ranks;
 * started without a launcher it is a world of one process and nothing
 * about brigade changes. Every rank runs the same program with the same
 * arguments: it makes the same plan and the same pipeline description,
 * and the ranks take the description's devices in order, each the same
 * number: with p devices and R ranks, rank r holds devices r*p/R ..
 * (r+1)*p/R - 1 and creates only those (brg_world_holds); the others are
 * NULL in the array it gives brg_pipeline_create, with the world in the
 * pipeline's options.
 *
 * Messages between devices of different ranks go through MPI from arena
 * to arena (docs/distributed.md): the receiver's slots are the receive
 * buffers its program planned, so measured still equals planned. A
 * failure on any rank during a step ends the whole job (MPI_Abort) with
 * the rank, the device and the cause on standard error: the other ranks
 * wait in receives that would never complete.
 *
 * Built without MPI, a launched run fails in brg_world_init saying so.
 */
#ifndef BRIGADE_DISTRIBUTED_H
#define BRIGADE_DISTRIBUTED_H

#include <stddef.h>

#include "brigade/device.h"
#include "brigade/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct brg_world brg_world;

/* 1 when this process was started by an MPI launcher (mpirun, or srun with
 * PMIx), from its environment; MPI is not touched. */
BRG_API int brg_world_launched(void);

/* The world of this process: initializes MPI (MPI_THREAD_MULTIPLE) when
 * launched, else a world of one. One world per process: a second call
 * returns the same one. argc and argv may be NULL. */
BRG_API brg_status brg_world_init(int *argc, char ***argv, brg_world **out);
/* Finalizes MPI after the last pipeline is destroyed (a replica's world:
 * frees it). Accepts NULL. */
BRG_API void brg_world_finalize(brg_world *world);

/* Heartbeats, so that a rank stopped (SIGSTOP, a debugger) or gone is
 * told from a live one that is only slow: start runs a thread that beats
 * to the next rank (in a ring) four times a second, whatever the rank's
 * other threads do, and listens for the previous rank's, until
 * brg_world_finalize, which says goodbye (a rank done is not silent).
 * Not collective; a world of one has none. silence: seconds since the
 * previous rank's last beat (or since the start), 0 when none is watched
 * (no heartbeat, or that rank has said goodbye) or while this rank's own
 * beat thread has not run for a second (this process was stopped too,
 * or starved: it could not have heard); *rank: the rank watched.
 * Nothing ends the job here: that is the caller's to decide. */
BRG_API brg_status brg_world_heartbeat_start(brg_world *world);
BRG_API double brg_world_heartbeat_silence(const brg_world *world, int *rank);

BRG_API int brg_world_rank(const brg_world *world);       /* 0 for NULL */
BRG_API int brg_world_size(const brg_world *world);       /* 1 for NULL */
BRG_API int brg_world_local_rank(const brg_world *world); /* the rank among those on this node */
BRG_API int brg_world_local_size(const brg_world *world); /* the ranks on this node (1 for NULL) */

/* Device d of n_devices (held by this rank) among the devices that this
 * node's ranks hold: *index of *count. Every rank holds n/R devices, so
 * this rank's come after those of the node's lower local ranks, whichever
 * replica or node the rank is in. Worker threads bind to that share of
 * the node's cores; (d, n) in a world of one. */
BRG_API void brg_world_node_share(const brg_world *world, int device, int n_devices, int *index, int *count);

/* The rank holding device d of n_devices (ranks take them in order, n/R
 * each); every device is rank 0's in a world of one or for NULL. */
BRG_API int brg_world_device_rank(const brg_world *world, int device, int n_devices);
/* 1 when this rank holds device d of n_devices. */
BRG_API int brg_world_holds(const brg_world *world, int device, int n_devices);
/* BRG_OK when n_devices can be shared out: a multiple of the ranks. */
BRG_API brg_status brg_world_check_devices(const brg_world *world, int n_devices);
/* A device list of one rank's devices on its own GPU ("cuda:local", gpu
 * BRG_GPU_LOCAL) becomes every rank's, one copy per rank in rank order
 * (at most max); other lists stay as they are. */
BRG_API brg_status brg_world_expand_devices(const brg_world *world, brg_device_spec *specs, int max, int *count);
/* The spec a rank creates its device from: BRG_GPU_LOCAL becomes the GPU
 * of its local rank; any other spec is copied. */
BRG_API void brg_world_device_spec(const brg_world *world, const brg_device_spec *spec, brg_device_spec *out);

/* Data parallelism: D replicas of one pipeline, each on its own ranks.
 * The world's R ranks split into D groups of R/D in order (replica r has
 * ranks r*R/D ..); *out is this rank's replica as a world of its own, to
 * give brg_pipeline_options.world: its ranks are numbered from 0 and take
 * the pipeline's devices as any world's do (brg_world_holds), and the
 * pipeline adds each device's gradients over the replicas before every
 * optimizer step (docs/distributed.md). A collective call; R % D == 0
 * (BRG_ERR_INVALID_ARGUMENT otherwise). D = 1 gives a replica world of
 * every rank. Free it with brg_world_finalize before the world. */
BRG_API brg_status brg_world_split_replicas(const brg_world *world, int replicas, brg_world **out);
BRG_API int brg_world_replicas(const brg_world *world); /* 1 for NULL or an unsplit world */
BRG_API int brg_world_replica(const brg_world *world);  /* this rank's replica, 0 .. replicas - 1 */

/* Every rank passes bytes it believes all share (a plan, the arguments);
 * BRG_ERR_INVALID_ARGUMENT on every rank when they differ, naming `what`
 * and the ranks that differ from rank 0. A collective call. */
BRG_API brg_status brg_world_agree(const brg_world *world, const void *bytes, size_t n, const char *what);

/* values[0..n) summed over every rank of world, in place. A collective
 * call; nothing to do in a world of one. */
BRG_API brg_status brg_world_sum(const brg_world *world, double *values, int n);

/* bytes of buf on rank root (of world: a replica's world, its own ranks)
 * copied into buf on every other rank. A collective call: every rank
 * passes the same root and bytes, and buf holds bytes on each; nothing to
 * do in a world of one. */
BRG_API brg_status brg_world_bcast(const brg_world *world, int root, void *buf, size_t bytes);

/* 1 on every rank when any rank passes a nonzero flag (a signal one rank
 * caught, a failure, say), else 0. A collective call, over the whole job
 * for a replica's world; flag itself in a world of one. */
BRG_API int brg_world_any(const brg_world *world, int flag);

/* At the end of a command that failed with code: 1 when every rank of
 * the job reaches this call within `seconds` (whatever its code), so
 * that none waits for another and all may finalize; 0 when some rank is
 * elsewhere (still waiting for this one, say), and the caller should end
 * the job with brg_world_abort. A collective call on MPI_COMM_WORLD,
 * which nothing else of brigade's uses after brg_world_init, so that it
 * cannot match a collective that a rank left behind. 1 in a world of
 * one. */
BRG_API int brg_world_end_together(const brg_world *world, int code, double seconds);

/* Ends every rank of the job: prints "brigade: rank R of N: message" on
 * standard error, then MPI_Abort with code (mpirun exits with it). In a
 * world of one it exits with code. */
BRG_API void brg_world_abort(const brg_world *world, int code, const char *message) __attribute__((noreturn));
/* A function brg_world_abort calls first, before it prints: the command
 * line's, which prints what this rank held back of its standard error
 * (NULL: none). */
BRG_API void brg_world_set_abort_hook(void (*hook)(void));

#ifdef __cplusplus
}
#endif

#endif /* BRIGADE_DISTRIBUTED_H */
