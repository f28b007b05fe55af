/* brigade: what the executor needs of the world (private; MPI stays in
 * exec/world.c, so nothing else includes mpi.h).
 *
 * Control messages (labels, losses, evaluation's boundary tensors) go
 * through the world's own communicator, blocking, every rank in the same
 * order. Channel messages go through links: one communicator per channel
 * that crosses ranks, so a receive posted for "the next message of this
 * channel" (any tag) can only match that channel's sends, in the order
 * they were sent (MPI's non-overtaking rule); the tag carries the
 * message's micro-batch and boundary, checked on arrival.
 */
#ifndef BRIGADE_WORLD_IMPL_H
#define BRIGADE_WORLD_IMPL_H

#include <stddef.h>

#include "base/device-impl.h"
#include "brigade/distributed.h"

#ifdef __cplusplus
extern "C" {
#endif

/* More than one rank: messages and control go through MPI. */
int brg_world_is_distributed(const brg_world *world);
/* The job's number of this world's rank `rank` (a replica's world numbers
 * its own ranks from 0), for messages; -1 for this process. */
int brg_world_job_rank(const brg_world *world, int rank);

/* Control, on every rank in the same order; errors name the peer (and
 * brg_world_bcast, in brigade/distributed.h). */
brg_status brg_world_send(const brg_world *world, int to, const void *buf, size_t bytes);
brg_status brg_world_recv(const brg_world *world, int from, void *buf, size_t bytes);

/* One channel's link to the process at its other end. Creating one is
 * collective: every rank calls brg_link_create for every cross-rank
 * channel in the same order, with peer = the other end's rank where it
 * is an end, else -1 (then *out is NULL). */
typedef struct brg_link brg_link;
brg_status brg_link_create(const brg_world *world, int peer, int slots, brg_link **out);
void brg_link_destroy(brg_link *link); /* cancels posted receives; accepts NULL */

/* Receiving end: post slot's receive of at most bytes into buf (the next
 * message not yet matched goes there), and wait for it: *tag and *bytes
 * of what arrived. */
brg_status brg_link_post(brg_link *link, int slot, void *buf, size_t bytes);
brg_status brg_link_wait(brg_link *link, int slot, int *tag, size_t *bytes);

/* Both ends at once, before any message: this end's bytes for the
 * other's (as many; a few KiB at most). */
brg_status brg_link_exchange(brg_link *link, const void *mine, void *theirs, size_t bytes);

/* The link as a wire (base/device-impl.h) for a communicator of its two
 * ends: messages of their own tag, each received at the size expected. */
brg_wire brg_link_wire(brg_link *link);

/* Sending end: the pieces (pointers and byte counts) as one message,
 * blocking until it is delivered or buffered. */
brg_status brg_link_send(brg_link *link, void *const *pieces, const size_t *bytes, int count, int tag);

/* Replicas (brg_world_split_replicas): values[0..n) summed over the ranks
 * that hold the same devices in every replica, in place; a collective call
 * of the calling thread (the one driving the pipeline). */
brg_status brg_world_replicas_sum(const brg_world *world, double *values, int n);

/* A communicator of its own over those ranks, for one device's gradients:
 * each device's thread sums on its own one, so the collectives of
 * different devices never interleave. Creating one is collective (every
 * rank, for each of its devices in order); *out is NULL with one replica. */
typedef struct brg_replica_comm brg_replica_comm;
brg_status brg_replica_comm_create(const brg_world *world, brg_replica_comm **out);
void brg_replica_comm_destroy(brg_replica_comm *comm); /* accepts NULL */
/* This rank's replica (its rank among the twins), and buf (a few KiB at
 * most) from replica 0 to every replica: collective. */
int brg_replica_comm_rank(const brg_replica_comm *comm);
int brg_replica_comm_size(const brg_replica_comm *comm);
brg_status brg_replica_comm_bcast(brg_replica_comm *comm, void *buf, size_t bytes);
/* The communicator as a wire that sums (brg_replica_comm_sum). */
brg_wire brg_replica_comm_wire(brg_replica_comm *comm);
/* values[0..n) summed over the replicas, in place. */
brg_status brg_replica_comm_sum(brg_replica_comm *comm, float *values, size_t n);
/* Every replica's mine[0..n) into all[replicas * n], in replica order. */
brg_status brg_replica_comm_gather(brg_replica_comm *comm, const double *mine, double *all, size_t n);

/* Tags a link message may carry: 0 .. brg_world_tag_limit() - 1. */
int brg_world_tag_limit(const brg_world *world);

#ifdef __cplusplus
}
#endif

#endif /* BRIGADE_WORLD_IMPL_H */
