/* Channels between devices' programs: see transfer.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/device-impl.h"
#include "base/internal.h"
#include "transfer.h"
#include "world-impl.h"

typedef struct slot_tag {
    int micro_batch, boundary;
    size_t bytes;
} slot_tag;

struct brg_channel {
    brg_device *src_dev, *dst_dev;
    int src, dst, grad;
    int capacity, head, count;
    unsigned char *slots; /* in dst's arena: capacity slots of slot_bytes */
    size_t slot_bytes;
    slot_tag tag[BRG_CHANNEL_CAPACITY_MAX];
    brg_event *ready;                                /* sender's compute */
    brg_event *msg_ready[BRG_CHANNEL_CAPACITY_MAX]; /* sender's copy stream */
    brg_event *slot_free[BRG_CHANNEL_CAPACITY_MAX]; /* receiver's compute */
    /* Another process holds the other end (exec/world-impl.h). Between
     * CPU devices, MPI: the receiver keeps a receive posted on every free
     * slot, so the sender's MPI send lands in the receiver's arena and
     * blocks while every slot is full, as a local send waits for room.
     * Between devices with communicators (CUDA: NCCL; cpu-async: its
     * twin), comm: see send_by_comm and recv_by_comm. */
    brg_link *link;
    brg_comm *comm;
    brg_wire wire;           /* the link's, for a communicator that sends through host memory */
    /* comm: this step's messages (micro-batch, boundary, bytes), for brg_transfer_channels_agree */
    uint64_t digest;
    int link_sends;          /* 1: this process is the sender */
    int V, tag_limit;        /* virtual stages, tags MPI allows */
};

brg_status brg_channel_create(brg_program *src, brg_program *dst, int grad, brg_channel **out)
{
    *out = NULL;
    brg_channel *ch = brg_calloc(1, sizeof *ch, "a channel between devices");
    if (!ch) return BRG_ERR_HOST_MEMORY;
    ch->src_dev = brg_program_device(src);
    ch->dst_dev = brg_program_device(dst);
    ch->src = brg_program_device_index(src);
    ch->dst = brg_program_device_index(dst);
    ch->grad = grad != 0;
    brg_status st = BRG_OK;
    brg_program_receive_buffers(dst, ch->grad, ch->src, &ch->slots, &ch->slot_bytes, &ch->capacity);
    if (!ch->slots) {
        st = brg_error(BRG_ERR_INTERNAL, "device %d has no receive buffers for %s from device %d", ch->dst,
                       ch->grad ? "gradients" : "activations", ch->src);
        goto fail;
    }
    BRG_CHECK_GOTO(brg_device_copy_prepare(ch->dst_dev, ch->src_dev), st, fail);
    BRG_CHECK_GOTO(brg_event_create(ch->src_dev, &ch->ready), st, fail);
    for (int k = 0; k < ch->capacity; k++) {
        BRG_CHECK_GOTO(brg_event_create(ch->src_dev, &ch->msg_ready[k]), st, fail);
        BRG_CHECK_GOTO(brg_event_create(ch->dst_dev, &ch->slot_free[k]), st, fail);
    }
    *out = ch;
    return BRG_OK;
fail:
    brg_channel_destroy(ch);
    return st;
}

void brg_channel_destroy(brg_channel *ch)
{
    if (!ch) return;
    brg_comm_destroy(ch->comm); /* first: it waits for its stream, which records the events below */
    brg_link_destroy(ch->link);
    brg_event_destroy(ch->ready);
    for (int k = 0; k < BRG_CHANNEL_CAPACITY_MAX; k++) {
        brg_event_destroy(ch->msg_ready[k]);
        brg_event_destroy(ch->slot_free[k]);
    }
    free(ch);
}

int brg_channel_capacity(const brg_channel *ch) { return ch->capacity; }
int brg_channel_count(const brg_channel *ch) { return ch->count; }
int brg_channel_source(const brg_channel *ch) { return ch->src; }
int brg_channel_destination(const brg_channel *ch) { return ch->dst; }
int brg_channel_is_grad(const brg_channel *ch) { return ch->grad; }
int brg_channel_is_remote(const brg_channel *ch) { return ch->link != NULL; }

/* A message's tensors sit one after another at the arena's alignment. */
static size_t tensors_bytes(const brg_tensor *t, int count)
{
    size_t bytes = 0;
    for (int i = 0; i < count; i++) bytes += brg_arena_rounded(brg_tensor_bytes(&t[i]));
    return bytes;
}

int brg_channel_reserve(const brg_channel *ch)
{
    return ch->count < ch->capacity ? (ch->head + ch->count) % ch->capacity : -1;
}

int brg_channel_peek(const brg_channel *ch) { return ch->count > 0 ? ch->head : -1; }

brg_status brg_channel_write(brg_channel *ch, int k, const brg_tensor *t, int count, int micro_batch, int boundary,
                             brg_event *copy_begin, brg_event *copy_end)
{
    if (k < 0 || k >= ch->capacity) return brg_error(BRG_ERR_INTERNAL, "writing to a full channel");
    const size_t bytes = tensors_bytes(t, count);
    if (bytes > ch->slot_bytes)
        return brg_error(BRG_ERR_INTERNAL, "a message of %zu bytes for device %d, whose receive buffers hold %zu",
                         bytes, ch->dst, ch->slot_bytes);
    unsigned char *slot = ch->slots + (size_t)k * ch->slot_bytes;
    BRG_CHECK(brg_event_record(ch->ready, BRG_STREAM_COMPUTE));
    BRG_CHECK(brg_device_wait_event(ch->src_dev, BRG_STREAM_COPY, ch->ready));
    BRG_CHECK(brg_device_wait_event(ch->src_dev, BRG_STREAM_COPY, ch->slot_free[k]));
    if (copy_begin) BRG_CHECK(brg_event_record(copy_begin, BRG_STREAM_COPY));
    size_t at = 0;
    for (int i = 0; i < count; i++) {
        const size_t b = brg_tensor_bytes(&t[i]);
        BRG_CHECK(brg_device_copy_async(ch->dst_dev, slot + at, ch->src_dev, t[i].data, b));
        at += brg_arena_rounded(b);
    }
    if (copy_end) BRG_CHECK(brg_event_record(copy_end, BRG_STREAM_COPY));
    BRG_CHECK(brg_event_record(ch->msg_ready[k], BRG_STREAM_COPY));
    ch->tag[k] = (slot_tag){micro_batch, boundary, bytes};
    return BRG_OK;
}

void brg_channel_push(brg_channel *ch) { ch->count++; }

brg_status brg_channel_read(brg_channel *ch, int k, brg_tensor *t, int count, int micro_batch, int boundary)
{
    if (k < 0 || k >= ch->capacity) return brg_error(BRG_ERR_INTERNAL, "reading from an empty channel");
    const slot_tag *tag = &ch->tag[k];
    if (tag->micro_batch != micro_batch || tag->boundary != boundary)
        return brg_error(BRG_ERR_INTERNAL, "the %s channel from device %d delivered micro-batch %d of boundary %d, but "
                         "micro-batch %d of boundary %d was expected (messages out of order)",
                         ch->grad ? "gradient" : "activation", ch->src, tag->micro_batch, tag->boundary, micro_batch,
                         boundary);
    const size_t want = tensors_bytes(t, count);
    if (want != tag->bytes)
        return brg_error(BRG_ERR_INTERNAL, "the message holds %zu bytes but the receiver's %d buffers %zu: do the "
                         "two chunks meet at the same block boundary?", tag->bytes, count, want);
    const unsigned char *slot = ch->slots + (size_t)k * ch->slot_bytes;
    BRG_CHECK(brg_device_wait_event(ch->dst_dev, BRG_STREAM_COMPUTE, ch->msg_ready[k]));
    size_t at = 0;
    for (int i = 0; i < count; i++) {
        const size_t b = brg_tensor_bytes(&t[i]);
        BRG_CHECK(brg_device_copy_between(ch->dst_dev, t[i].data, ch->dst_dev, slot + at, b));
        at += brg_arena_rounded(b);
    }
    return brg_event_record(ch->slot_free[k], BRG_STREAM_COMPUTE);
}

void brg_channel_pop(brg_channel *ch)
{
    ch->head = (ch->head + 1) % ch->capacity;
    ch->count--;
}

void brg_channel_clear(brg_channel *ch)
{
    if (ch->link) return; /* the ring of posted receives goes on across steps */
    ch->head = ch->count = 0;
    memset(ch->tag, 0, sizeof ch->tag);
}

/* ---- channels whose other end is another process ---- */

/* The tag of a message: its micro-batch and boundary, checked on arrival
 * (modulo what MPI's tags hold). */
static int message_tag(const brg_channel *ch, int micro_batch, int boundary)
{
    const long long tag = (long long)micro_batch * ch->V + boundary;
    return (int)(tag % ch->tag_limit);
}

static brg_status post_slot(brg_channel *ch, int k)
{
    return brg_link_post(ch->link, k, ch->slots + (size_t)k * ch->slot_bytes, ch->slot_bytes);
}

/* How two devices of different processes exchange messages: through
 * their backend's communicators where both have them and are of one
 * backend (CUDA: NCCL; cpu-async: its twin, over the link), else through
 * host memory and MPI where both are CPU devices; between a GPU and a CPU,
 * or GPUs without NCCL, not at all. Both ends decide alike from what
 * they tell each other first. */
enum { TRANSPORT_NONE = -1, TRANSPORT_MPI = 0, TRANSPORT_COMM = 1 };

typedef struct link_hello {
    int backend, has_comm;
    int id_ok; /* the sender made the communicator's id */
    unsigned char id[BRG_COMM_ID_BYTES];
} link_hello;

static int transport_between(const link_hello *a, const link_hello *b)
{
    if (a->has_comm && b->has_comm && a->backend == b->backend) return TRANSPORT_COMM;
    if (a->backend == BRG_BACKEND_CPU && b->backend == BRG_BACKEND_CPU) return TRANSPORT_MPI;
    return TRANSPORT_NONE;
}

/* The ends agree on the transport (*transport); for a communicator both
 * get the sender's id. */
static brg_status greet(brg_channel *ch, brg_device *dev, int d, int other, int peer, int *transport,
                        unsigned char *id)
{
    link_hello mine, theirs;
    memset(&mine, 0, sizeof mine);
    mine.backend = (int)brg_device_backend(dev);
    mine.has_comm = brg_device_has_comm(dev);
    brg_status made = BRG_OK;
    if (mine.has_comm && ch->link_sends) {
        made = brg_comm_make_id(dev, mine.id);
        mine.id_ok = made == BRG_OK;
    }
    /* Exchanged even when the id failed: the other end waits for it. */
    BRG_CHECK(brg_link_exchange(ch->link, &mine, &theirs, sizeof mine));
    BRG_CHECK(made);
    *transport = transport_between(&mine, &theirs);
    if (*transport == TRANSPORT_NONE)
        return brg_error(BRG_ERR_UNSUPPORTED,
                         "device %d (%s) exchanges %s with device %d on rank %d: between processes a channel joins two "
                         "CPU devices (through MPI) or two CUDA devices (through NCCL)%s",
                         d, brg_device_name(dev), ch->grad ? "gradients" : "activations", other, peer,
                         mine.backend == theirs.backend ? ", and CUDA devices only where brigade was built with NCCL "
                                                          "(configure says NCCL: yes)"
                                                        : "");
    const link_hello *sender = ch->link_sends ? &mine : &theirs;
    if (*transport == TRANSPORT_COMM && !sender->id_ok)
        return brg_error(BRG_ERR_CANCELLED, "device %d on rank %d could not set up its channel", other, peer);
    memcpy(id, sender->id, sizeof sender->id);
    return BRG_OK;
}

/* A remote channel's end in this process: program g (the sender's when
 * sends, else the receiver's), the other end device `other` on rank
 * `peer`. Between CPU devices the receiver posts a receive on every
 * slot; with communicators the two ends make one of two members, the
 * sender member 0. */
static brg_status remote_channel_create(const brg_world *world, brg_program *g, int other, int peer, int grad,
                                        int sends, brg_channel **out)
{
    *out = NULL;
    brg_channel *ch = brg_calloc(1, sizeof *ch, "a channel between processes");
    if (!ch) return BRG_ERR_HOST_MEMORY;
    brg_device *dev = brg_program_device(g);
    const int d = brg_program_device_index(g);
    ch->link_sends = sends;
    ch->grad = grad != 0;
    ch->src = sends ? d : other;
    ch->dst = sends ? other : d;
    ch->capacity = brg_program_capacity(g);
    ch->V = brg_schedule_devices(brg_program_schedule(g)) * brg_schedule_chunks(brg_program_schedule(g));
    ch->tag_limit = brg_world_tag_limit(world);
    ch->digest = BRG_FNV1A_START;
    int transport = TRANSPORT_NONE;
    unsigned char id[BRG_COMM_ID_BYTES];
    brg_status st = brg_link_create(world, peer, ch->capacity, &ch->link);
    if (st == BRG_OK) st = greet(ch, dev, d, other, peer, &transport, id);
    if (st == BRG_OK && transport == TRANSPORT_COMM) {
        ch->wire = brg_link_wire(ch->link);
        st = brg_comm_create(dev, id, 2, sends ? 0 : 1, BRG_COMM_MESSAGES, &ch->wire, &ch->comm);
        if (st != BRG_OK)
            st = brg_error_context(st, "rank %d: the %s channel from device %d to device %d (on rank %d)",
                                   brg_world_job_rank(world, -1), ch->grad ? "gradients'" : "activations'", ch->src,
                                   ch->dst, brg_world_job_rank(world, peer));
    }
    if (st != BRG_OK) goto fail;
    if (sends) {
        ch->src_dev = dev;
        BRG_CHECK_GOTO(brg_event_create(dev, &ch->ready), st, fail);
    } else {
        ch->dst_dev = dev;
        brg_program_receive_buffers(g, ch->grad, other, &ch->slots, &ch->slot_bytes, &ch->capacity);
        if (!ch->slots) {
            st = brg_error(BRG_ERR_INTERNAL, "device %d has no receive buffers for %s from device %d", d,
                           ch->grad ? "gradients" : "activations", other);
            goto fail;
        }
        for (int k = 0; k < ch->capacity; k++) {
            BRG_CHECK_GOTO(brg_event_create(dev, &ch->slot_free[k]), st, fail);
            if (ch->comm) BRG_CHECK_GOTO(brg_event_create(dev, &ch->msg_ready[k]), st, fail);
            else BRG_CHECK_GOTO(post_slot(ch, k), st, fail);
        }
    }
    *out = ch;
    return BRG_OK;
fail:
    brg_channel_destroy(ch);
    return st;
}

/* A message's pieces: the tensors where they lie, or where they go in a
 * slot (packed one after another, as they arrive). 64 at most. */
#define MESSAGE_PIECES_MAX 64

static brg_status message_pieces(const brg_tensor *t, int count, void **pieces, size_t *bytes)
{
    if (count > MESSAGE_PIECES_MAX)
        return brg_error(BRG_ERR_UNSUPPORTED, "a message of %d tensors between processes (%d at most)", count,
                         MESSAGE_PIECES_MAX);
    for (int i = 0; i < count; i++) {
        pieces[i] = t[i].data;
        bytes[i] = brg_tensor_bytes(&t[i]);
    }
    return BRG_OK;
}

/* Where a message to tensors t[0..count) lies in slot k of a channel
 * between processes: its pieces packed one after another, as they arrive
 * (unlike a local channel's, at the arena's alignment). */
static brg_status packed_in_slot(const brg_channel *ch, int k, const brg_tensor *t, int count, void **pieces,
                                 size_t *bytes)
{
    BRG_CHECK(message_pieces(t, count, pieces, bytes));
    unsigned char *slot = ch->slots + (size_t)k * ch->slot_bytes;
    size_t at = 0;
    for (int i = 0; i < count; i++) {
        pieces[i] = slot + at;
        at += bytes[i];
    }
    if (at > ch->slot_bytes)
        return brg_error(BRG_ERR_INTERNAL, "a message of %zu bytes from device %d, whose receive buffers hold %zu",
                         at, ch->src, ch->slot_bytes);
    return BRG_OK;
}

/* The receiver's compute stream copies the pieces out of the slot into the tensors. */
static brg_status copy_out_of_slot(brg_channel *ch, brg_tensor *t, int count, void *const *pieces,
                                   const size_t *bytes)
{
    for (int i = 0; i < count; i++)
        BRG_CHECK(brg_device_copy_between(ch->dst_dev, t[i].data, ch->dst_dev, pieces[i], bytes[i]));
    return BRG_OK;
}

/* With a communicator: the copy stream sends once the compute stream has
 * made the tensors, and blocks (the host does not) until the receiver's
 * communicator stream takes the message, which it does as soon as a slot
 * is free. Memory freed meanwhile waits for the send (brg_comm_send on
 * the copy stream remembers what it reads). */
/* A message into the channel's digest: its micro-batch, boundary and size. */
static void digest_message(brg_channel *ch, int micro_batch, int boundary, const size_t *bytes, int count)
{
    uint64_t words[3] = {(uint64_t)micro_batch, (uint64_t)boundary, 0};
    for (int i = 0; i < count; i++) words[2] += bytes[i];
    ch->digest = brg_fnv1a(ch->digest, words, sizeof words);
}

static brg_status send_by_comm(brg_channel *ch, const brg_tensor *t, int count, int micro_batch, int boundary)
{
    void *pieces[MESSAGE_PIECES_MAX];
    size_t bytes[MESSAGE_PIECES_MAX];
    BRG_CHECK(message_pieces(t, count, pieces, bytes));
    digest_message(ch, micro_batch, boundary, bytes, count);
    BRG_CHECK(brg_event_record(ch->ready, BRG_STREAM_COMPUTE));
    BRG_CHECK(brg_device_wait_event(ch->src_dev, BRG_STREAM_COPY, ch->ready));
    return brg_comm_send(ch->comm, BRG_STREAM_COPY, 1, pieces, bytes, count);
}

/* With a communicator: the communicator's stream receives into the
 * oldest slot once its last reader is done (slot_free), the compute
 * stream copies out of it once it has arrived (msg_ready). The host
 * waits for neither; the receive runs ahead of the compute stream, so a
 * sender blocks only while every slot is full, as between CPU devices. */
static brg_status recv_by_comm(brg_channel *ch, brg_tensor *t, int count, int micro_batch, int boundary)
{
    const int k = ch->head;
    ch->head = (ch->head + 1) % ch->capacity;
    void *pieces[MESSAGE_PIECES_MAX];
    size_t bytes[MESSAGE_PIECES_MAX];
    BRG_CHECK(packed_in_slot(ch, k, t, count, pieces, bytes));
    digest_message(ch, micro_batch, boundary, bytes, count);
    BRG_CHECK(brg_comm_wait_event(ch->comm, ch->slot_free[k]));
    BRG_CHECK(brg_comm_recv(ch->comm, 0, pieces, bytes, count));
    BRG_CHECK(brg_comm_record_event(ch->comm, ch->msg_ready[k]));
    BRG_CHECK(brg_device_wait_event(ch->dst_dev, BRG_STREAM_COMPUTE, ch->msg_ready[k]));
    BRG_CHECK(copy_out_of_slot(ch, t, count, pieces, bytes));
    return brg_event_record(ch->slot_free[k], BRG_STREAM_COMPUTE);
}

brg_status brg_channel_send_remote(brg_channel *ch, const brg_tensor *t, int count, int micro_batch, int boundary)
{
    if (ch->comm) return send_by_comm(ch, t, count, micro_batch, boundary);
    void *pieces[MESSAGE_PIECES_MAX];
    size_t bytes[MESSAGE_PIECES_MAX];
    BRG_CHECK(message_pieces(t, count, pieces, bytes));
    /* The host hands MPI the tensors: the device must have made them. */
    BRG_CHECK(brg_event_record(ch->ready, BRG_STREAM_COMPUTE));
    BRG_CHECK(brg_event_synchronize(ch->ready));
    return brg_link_send(ch->link, pieces, bytes, count, message_tag(ch, micro_batch, boundary));
}

brg_status brg_channel_recv_remote(brg_channel *ch, brg_tensor *t, int count, int micro_batch, int boundary)
{
    if (ch->comm) return recv_by_comm(ch, t, count, micro_batch, boundary);
    const int k = ch->head;
    int tag = 0;
    size_t got = 0;
    BRG_CHECK(brg_link_wait(ch->link, k, &tag, &got));
    ch->head = (ch->head + 1) % ch->capacity;
    const int want_tag = message_tag(ch, micro_batch, boundary);
    if (tag != want_tag)
        return brg_error(BRG_ERR_INTERNAL, "the %s channel from device %d delivered message tag %d, but micro-batch %d "
                         "of boundary %d (tag %d) was expected (messages out of order)",
                         ch->grad ? "gradient" : "activation", ch->src, tag, micro_batch, boundary, want_tag);
    void *pieces[MESSAGE_PIECES_MAX];
    size_t bytes[MESSAGE_PIECES_MAX];
    BRG_CHECK(packed_in_slot(ch, k, t, count, pieces, bytes));
    size_t want = 0;
    for (int i = 0; i < count; i++) want += bytes[i];
    if (got != want)
        return brg_error(BRG_ERR_INTERNAL, "the message from device %d holds %zu bytes but the receiver's %d buffers "
                         "%zu: do the ranks run the same plan?", ch->src, got, count, want);
    BRG_CHECK(copy_out_of_slot(ch, t, count, pieces, bytes));
    /* The slot takes the next message once the copies out of it are done:
     * at once, or the sender, blocked on a full channel, could wait for a
     * receive this device only posts after sending to it (1F1B's steady
     * state). */
    BRG_CHECK(brg_event_record(ch->slot_free[k], BRG_STREAM_COMPUTE));
    BRG_CHECK(brg_event_synchronize(ch->slot_free[k]));
    return post_slot(ch, k);
}

/* ---- the channels of a pipeline ---- */

/* The channel an action of g sends on or receives from, and the boundary
 * its message crosses: activations cross boundary j from stage j,
 * gradients boundary j-1 from stage j. NULL for other actions. */
brg_channel *brg_transfer_channel(brg_channel **channels, int p, const brg_program *g, const brg_action *a,
                                  int *boundary)
{
    const int d = brg_program_device_index(g), j = brg_schedule_stage_of(brg_program_schedule(g), d, a->chunk);
    int grad = 0, src = d, dst = d;
    if (a->peer < 0 || a->peer >= p) return NULL;
    switch (a->type) {
    case BRG_ACTION_SEND_ACT: *boundary = j; dst = a->peer; break;
    case BRG_ACTION_RECV_ACT: *boundary = j - 1; src = a->peer; break;
    case BRG_ACTION_SEND_GRAD: grad = 1; *boundary = j - 1; dst = a->peer; break;
    case BRG_ACTION_RECV_GRAD: grad = 1; *boundary = j; src = a->peer; break;
    default: return NULL;
    }
    return channels[((size_t)grad * (size_t)p + (size_t)src) * (size_t)p + (size_t)dst];
}

/* Whether device src sends activations (grad 0) or gradients to dst. */
static int sends_to(const brg_schedule *s, int src, int dst, int grad)
{
    const brg_action_type type = grad ? BRG_ACTION_SEND_GRAD : BRG_ACTION_SEND_ACT;
    for (int i = 0; i < brg_schedule_action_count(s, src); i++) {
        const brg_action *a = brg_schedule_action(s, src, i);
        if (a->type == type && a->peer == dst) return 1;
    }
    return 0;
}

/* The channel from device src to dst of one direction into *slot, if
 * anything flows there: a local one, or a link to another rank (creating
 * a link is collective: every rank calls this in the same order). */
static brg_status create_channel(const brg_world *world, brg_program *const *programs, const brg_schedule *s, int p,
                                 int src, int dst, int grad, brg_channel **slot)
{
    const int src_rank = brg_world_device_rank(world, src, p), dst_rank = brg_world_device_rank(world, dst, p);
    if (src_rank != dst_rank) {
        if (!sends_to(s, src, dst, grad)) return BRG_OK;
        const int me = brg_world_rank(world);
        if (me == dst_rank) return remote_channel_create(world, programs[dst], src, src_rank, grad, 0, slot);
        if (me == src_rank) return remote_channel_create(world, programs[src], dst, dst_rank, grad, 1, slot);
        brg_link *none; /* not an end: only takes part in making it */
        return brg_link_create(world, -1, 1, &none);
    }
    if (!programs[dst]) return BRG_OK; /* both ends on another rank */
    unsigned char *base;
    size_t bytes;
    int slots;
    brg_program_receive_buffers(programs[dst], grad, src, &base, &bytes, &slots);
    return base ? brg_channel_create(programs[src], programs[dst], grad, slot) : BRG_OK;
}

brg_status brg_transfer_channels_create(const brg_world *world, brg_program *const *programs, int p,
                                        brg_channel ***out)
{
    *out = NULL;
    brg_channel **ch = brg_calloc(2 * (size_t)p * (size_t)p, sizeof *ch, "the channels between devices");
    if (!ch) return BRG_ERR_HOST_MEMORY;
    const brg_schedule *s = NULL;
    for (int d = 0; d < p && !s; d++)
        if (programs[d]) s = brg_program_schedule(programs[d]);
    brg_status st = BRG_OK;
    /* Messages come from a neighbour on the ring of devices: the one
     * before and the one after (the same one for p = 2). Every rank walks
     * the channels in the same order: creating a link is collective. */
    for (int d = 0; d < p && p > 1 && st == BRG_OK; d++)
        for (int grad = 0; grad < 2 && st == BRG_OK; grad++)
            for (int side = 0; side < (p > 2 ? 2 : 1) && st == BRG_OK; side++) {
                const int src = side ? (d + 1) % p : (d + p - 1) % p;
                st = create_channel(world, programs, s, p, src, d, grad,
                                    &ch[((size_t)grad * (size_t)p + (size_t)src) * (size_t)p + (size_t)d]);
            }
    if (st != BRG_OK) {
        brg_transfer_channels_destroy(ch, p);
        return st;
    }
    *out = ch;
    return BRG_OK;
}

brg_status brg_transfer_channels_agree(brg_channel **channels, int p)
{
    brg_status st = BRG_OK;
    for (int i = 0; channels && i < 2 * p * p; i++) {
        brg_channel *ch = channels[i];
        if (!ch || !ch->comm) continue;
        uint64_t theirs = 0;
        const brg_status x = brg_link_exchange(ch->link, &ch->digest, &theirs, sizeof theirs);
        if (x != BRG_OK && st == BRG_OK) st = x;
        if (x == BRG_OK && theirs != ch->digest && st == BRG_OK)
            st = brg_error(BRG_ERR_INTERNAL, "the %s channel from device %d to device %d: its two ends sent and "
                           "received other messages this step (micro-batches, boundaries or sizes; messages out of "
                           "order, or ranks with different plans)", ch->grad ? "gradient" : "activation", ch->src,
                           ch->dst);
        ch->digest = BRG_FNV1A_START;
    }
    return st;
}

void brg_transfer_channels_destroy(brg_channel **channels, int p)
{
    if (!channels) return;
    for (int i = 0; i < 2 * p * p; i++) brg_channel_destroy(channels[i]);
    free(channels);
}

