/* brigade: channels, the messages between two devices' programs (private).
 *
 * A channel carries one direction (activations or gradients) from one
 * device to another. Its messages live in the receiver's arena: the
 * receiving program's receive buffers (brg_program_receive_buffers), one
 * slot per message the channel may hold, planned by the dry run like every
 * other buffer. Nothing crosses host memory:
 *
 *   write  the sender's compute stream records `ready` after the tensors
 *          were produced; its copy stream waits for `ready` and for
 *          `slot_free` of the slot (the receiver's last read of it), copies
 *          the tensors one after another into the slot (brg_device_copy_async:
 *          same GPU, peer, or staged; memmove on CPU devices) and records
 *          `msg_ready` of the slot;
 *   read   the receiver's compute stream waits for the slot's `msg_ready`,
 *          copies the slot into the buffers its program allocated, and
 *          records the slot's `slot_free`.
 *
 * No host thread waits for a copy: the sender goes on computing while its
 * copy stream sends (the memory it frees meanwhile is fenced by
 * base/device.c's copy reads). On synchronous devices every step has
 * finished when its call returns and the events only keep the time.
 *
 * The ring (which slot is next, how many are full) is the caller's to
 * guard: under its lock reserve names the slot after the full ones and
 * push makes it the newest message, peek names the oldest and pop frees
 * it; write and read copy outside the lock. Between reserve and push, and
 * between peek and pop, the slot belongs to the one thread that writes or
 * reads it.
 * Every message carries its micro-batch and boundary; reading another than
 * the one expected is BRG_ERR_INTERNAL (messages out of order).
 */
#ifndef BRIGADE_TRANSFER_H
#define BRIGADE_TRANSFER_H

#include "base/device-impl.h"
#include "program-impl.h"
#include "world-impl.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct brg_channel brg_channel;

/* The channel from src's program to dst's, of gradients (grad = 1) or
 * activations. dst must have receive buffers for that direction. */
brg_status brg_channel_create(brg_program *src, brg_program *dst, int grad, brg_channel **out);
void brg_channel_destroy(brg_channel *ch); /* accepts NULL */

int brg_channel_capacity(const brg_channel *ch);
int brg_channel_count(const brg_channel *ch); /* messages written and pushed, not yet popped */
int brg_channel_source(const brg_channel *ch);
int brg_channel_destination(const brg_channel *ch);
int brg_channel_is_grad(const brg_channel *ch);

/* The slot the next message goes into, or -1 while the channel is full
 * (under the caller's lock). */
int brg_channel_reserve(const brg_channel *ch);

/* Copy tensors[0..count) of the sender's device into `slot` (from
 * reserve), tagged (micro_batch, boundary); outside the lock. copy_begin
 * and copy_end (events of the sender, or NULL) are recorded on its copy
 * stream around the copies, after its waits: when the bytes moved. */
brg_status brg_channel_write(brg_channel *ch, int slot, const brg_tensor *tensors, int count, int micro_batch,
                             int boundary, brg_event *copy_begin, brg_event *copy_end);
void brg_channel_push(brg_channel *ch); /* under the lock: the written slot is the newest message */

/* The slot of the oldest message, or -1 while the channel is empty (under
 * the caller's lock). */
int brg_channel_peek(const brg_channel *ch);

/* Copy the message in `slot` (from peek) into tensors[0..count) of the
 * receiver's device; it must be (micro_batch, boundary) and as large as
 * they are together. Outside the lock. */
brg_status brg_channel_read(brg_channel *ch, int slot, brg_tensor *tensors, int count, int micro_batch,
                            int boundary);
void brg_channel_pop(brg_channel *ch); /* under the lock: the oldest message's slot is free */

/* Another process holds the other end (exec/world-impl.h). Such a channel
 * is used without the caller's lock or ring: send and receive block until
 * the message is delivered (or buffered by MPI) or has arrived. A send
 * reads the tensors once the sender's compute stream has made them; a
 * receive waits for the oldest slot's message, checks its micro-batch,
 * boundary and size, copies it out and, once the copy is done, posts the
 * slot's receive again. */
int brg_channel_is_remote(const brg_channel *ch);
brg_status brg_channel_send_remote(brg_channel *ch, const brg_tensor *tensors, int count, int micro_batch,
                                   int boundary);
brg_status brg_channel_recv_remote(brg_channel *ch, brg_tensor *tensors, int count, int micro_batch, int boundary);

/* Forget every message (after a failed step; the devices are synchronized).
 * A remote channel keeps its posted receives. */
void brg_channel_clear(brg_channel *ch);

/* Every channel of a pipeline of p programs (programs[d] on device d), in
 * one array [grad][src][dst] with NULL where nothing flows: activations go
 * d -> d+1 mod p, gradients d -> d-1 mod p, into the receive buffers each
 * program has. With a world of several ranks programs[d] is NULL where
 * another rank holds device d: channels between two devices of this rank
 * are local, those with one end here remote, others NULL; every rank must
 * call this at the same point (links are made collectively). Creates all
 * or none. */
brg_status brg_transfer_channels_create(const brg_world *world, brg_program *const *programs, int p,
                                        brg_channel ***out);
void brg_transfer_channels_destroy(brg_channel **channels, int p); /* accepts NULL */

/* After a step: the two ends of each channel between ranks that goes
 * through communicators compare what they sent and received (messages
 * there carry no tag, unlike MPI's): BRG_ERR_INTERNAL naming the channel
 * where they differ. Every rank calls it after every step it finished,
 * in the same order (a message to the other end of each such channel). */
brg_status brg_transfer_channels_agree(brg_channel **channels, int p);

/* The channel a transfer action of program g sends on or receives from
 * (NULL for other actions, or where the schedule sends across no
 * boundary), and the boundary its message crosses: activations cross
 * boundary j from virtual stage j, gradients boundary j-1 from stage j. */
brg_channel *brg_transfer_channel(brg_channel **channels, int p, const brg_program *g, const brg_action *a,
                                  int *boundary);

#ifdef __cplusplus
}
#endif

#endif /* BRIGADE_TRANSFER_H */
