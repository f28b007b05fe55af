/* Channels between devices' programs: see transfer.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/device-impl.h"
#include "base/internal.h"
#include "transfer.h"

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
    brg_program_receive_buffers(dst, ch->grad, &ch->slots, &ch->slot_bytes, &ch->capacity);
    if (!ch->slots) {
        st = brg_error(BRG_ERR_INTERNAL, "device %d has no receive buffers for %s from device %d", ch->dst,
                       ch->grad ? "gradients" : "activations", ch->src);
        goto fail;
    }
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
    ch->head = ch->count = 0;
    memset(ch->tag, 0, sizeof ch->tag);
}

/* ---- the channels of a pipeline ---- */

/* The channel an action of g sends on or receives from, and the boundary
 * its message crosses: activations cross boundary j from stage j,
 * gradients boundary j-1 from stage j. NULL for other actions. */
brg_channel *brg_transfer_channel(brg_channel **channels, int p, const brg_program *g, const brg_action *a,
                                  int *boundary)
{
    const int d = brg_program_device_index(g), j = a->chunk * p + d;
    int grad = 0, src = d, dst = d;
    switch (a->type) {
    case BRG_ACTION_SEND_ACT: *boundary = j; dst = (d + 1) % p; break;
    case BRG_ACTION_RECV_ACT: *boundary = j - 1; src = (d + p - 1) % p; break;
    case BRG_ACTION_SEND_GRAD: grad = 1; *boundary = j - 1; dst = (d + p - 1) % p; break;
    case BRG_ACTION_RECV_GRAD: grad = 1; *boundary = j; src = (d + 1) % p; break;
    default: return NULL;
    }
    return channels[((size_t)grad * (size_t)p + (size_t)src) * (size_t)p + (size_t)dst];
}

brg_status brg_transfer_channels_create(brg_program *const *programs, int p, brg_channel ***out)
{
    *out = NULL;
    brg_channel **ch = brg_calloc(2 * (size_t)p * (size_t)p, sizeof *ch, "the channels between devices");
    if (!ch) return BRG_ERR_HOST_MEMORY;
    for (int d = 0; d < p && p > 1; d++)
        for (int grad = 0; grad < 2; grad++) {
            const int src = grad ? (d + 1) % p : (d + p - 1) % p;
            unsigned char *base;
            size_t bytes;
            int slots;
            brg_program_receive_buffers(programs[d], grad, &base, &bytes, &slots);
            if (!base) continue;
            brg_status st = brg_channel_create(programs[src], programs[d], grad,
                                               &ch[((size_t)grad * (size_t)p + (size_t)src) * (size_t)p + (size_t)d]);
            if (st != BRG_OK) {
                brg_transfer_channels_destroy(ch, p);
                return st;
            }
        }
    *out = ch;
    return BRG_OK;
}

void brg_transfer_channels_destroy(brg_channel **channels, int p)
{
    if (!channels) return;
    for (int i = 0; i < 2 * p * p; i++) brg_channel_destroy(channels[i]);
    free(channels);
}

