/* brigade: the schedule of copy_in's pinned staging ring (private).
 *
 * A CUDA device copies host memory that is not pinned to the GPU through
 * one pinned buffer of its own (backends/cuda/device.c, staged_in): chunk
 * by chunk, the host copies the chunk into the buffer and queues a DMA
 * from there on the compute stream, with an event after it. The buffer is
 * a ring: the chunks whose DMA may still read it are remembered oldest
 * first, each in a slot (device.c pairs slot k with event k); a new chunk
 * goes at the head, where the last one ended, when it fits before the
 * end, else at the start; the host waits, oldest first, only while a
 * chunk in flight overlaps the bytes the new one takes, or while every
 * slot is taken. DMAs on one stream finish in order, so waiting for the
 * oldest never waits for more than the overlapping chunks need.
 *
 * Plain C on plain values, so that tests/test_cuda_kernels checks the
 * schedule on any machine, GPU or not.
 */
#ifndef BRIGADE_STAGE_RING_H
#define BRIGADE_STAGE_RING_H

#include <stddef.h>

#define BRG_STAGE_RING_SLOTS 32

typedef struct brg_stage_ring {
    size_t size;      /* bytes of the buffer */
    int slots;        /* chunks in flight at most, in [1, BRG_STAGE_RING_SLOTS] */
    int first, count; /* the chunks in flight: slots first, first + 1, ... (mod slots), oldest first */
    size_t head;      /* where the latest chunk ended */
    struct brg_stage_chunk {
        size_t at, n;
    } chunk[BRG_STAGE_RING_SLOTS];
} brg_stage_ring;

/* An empty ring over a buffer of size bytes, with `slots` slots (clamped to
 * [1, BRG_STAGE_RING_SLOTS]). */
static inline void brg_stage_ring_init(brg_stage_ring *r, size_t size, int slots)
{
    r->size = size;
    r->slots = slots < 1 ? 1 : slots > BRG_STAGE_RING_SLOTS ? BRG_STAGE_RING_SLOTS : slots;
    r->first = r->count = 0;
    r->head = 0;
}

/* Where a chunk of n bytes (1 <= n <= size) goes: the head when it fits
 * before the end, else the start. */
static inline size_t brg_stage_ring_place(const brg_stage_ring *r, size_t n)
{
    return r->head <= r->size && n <= r->size - r->head ? r->head : 0;
}

/* Whether a chunk at [at, at + n) must wait for the oldest chunk in flight
 * first: every slot is taken, or a chunk in flight overlaps it. */
static inline int brg_stage_ring_busy(const brg_stage_ring *r, size_t at, size_t n)
{
    if (r->count >= r->slots) return 1;
    for (int i = 0; i < r->count; i++) {
        const struct brg_stage_chunk *c = &r->chunk[(r->first + i) % r->slots];
        if (c->at < at + n && at < c->at + c->n) return 1;
    }
    return 0;
}

/* Forget the oldest chunk in flight (the caller waits for its DMA) and
 * return its slot. The ring must hold one (count > 0). */
static inline int brg_stage_ring_retire(brg_stage_ring *r)
{
    const int k = r->first;
    r->first = (r->first + 1) % r->slots;
    r->count--;
    return k;
}

/* The slot the next chunk takes: where its event goes. The ring must have
 * a free slot (brg_stage_ring_busy said no). */
static inline int brg_stage_ring_next(const brg_stage_ring *r) { return (r->first + r->count) % r->slots; }

/* Chunk [at, at + n) is in flight in slot brg_stage_ring_next; the head
 * moves past it. */
static inline void brg_stage_ring_push(brg_stage_ring *r, size_t at, size_t n)
{
    struct brg_stage_chunk *c = &r->chunk[brg_stage_ring_next(r)];
    c->at = at;
    c->n = n;
    r->count++;
    r->head = at + n;
}

#endif /* BRIGADE_STAGE_RING_H */
