/* brigade: data-parallel replicas of a pipeline, the gradient side
 * (private).
 *
 * With D replicas (brg_world_split_replicas) every device of the pipeline
 * has a twin in each other replica, holding the same stages. Each replica
 * runs its share of the mini-batch; before the optimizer step each
 * device's parameter gradients are summed over its twins (the loss is
 * scaled by the whole mini-batch's counted labels, so the sum is the
 * gradient of one device running every replica's samples).
 *
 * Each device has a reducer: a communicator over its twins and a thread.
 * During a chunk's last backward of the step, as the backward finishes
 * each block's layers, the block's gradient slab (a bucket) is posted with
 * an event recorded on the compute stream; the reducer waits for the event
 * and sums the slab while the backward goes on with the blocks before it,
 * and the devices upstream with theirs: the sums overlap the backward of
 * earlier layers, even on one stage. The run ends after every reducer has
 * finished. Every replica posts the same chunks in the
 * same order (one schedule), so the collectives match.
 *
 * CPU devices sum through MPI on host memory (the thread waits for each
 * bucket's event first). CUDA devices sum through NCCL, and cpu-async
 * devices through its twin (base/device-impl.h, communicators): the
 * thread only queues, on the device's communicator stream, a wait for
 * the bucket's event and an all-reduce of the slab in device memory; the
 * run's end waits for the communicator's stream, so the update sees the
 * sums.
 */
#ifndef BRIGADE_REPLICAS_H
#define BRIGADE_REPLICAS_H

#include "base/device-impl.h"
#include "program-impl.h"
#include "world-impl.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct brg_grad_reducer brg_grad_reducer;

/* A reducer of program g's gradients over the world's replicas; *out is
 * NULL with one replica. Collective: every rank creates its devices'
 * reducers in device order. CPU devices, or CUDA devices where the
 * build has NCCL (BRG_ERR_UNSUPPORTED otherwise). */
brg_status brg_grad_reducer_create(const brg_world *world, brg_program *g, brg_grad_reducer **out);
void brg_grad_reducer_destroy(brg_grad_reducer *r); /* accepts NULL */

/* Run begins: starts the thread. */
brg_status brg_grad_reducer_begin(brg_grad_reducer *r);
/* run(arg) is the step's last backward action of the chunk, after which
 * its gradients are final: as the action finishes each block (on the
 * compute stream) the block's slab is queued for its sum. */
brg_status brg_grad_reducer_run_last(brg_grad_reducer *r, int chunk, brg_status (*run)(void *), void *arg);
/* No more chunks this run: waits for the sums; the first error. */
brg_status brg_grad_reducer_end(brg_grad_reducer *r);

#ifdef __cplusplus
}
#endif

#endif /* BRIGADE_REPLICAS_H */
