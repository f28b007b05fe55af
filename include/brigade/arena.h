/* brigade: arenas.
 *
 * An arena is the bookkeeping of one device's memory: a range [0, capacity)
 * of bytes handed out as aligned blocks. It never touches memory itself; the
 * device adds its base address. Every block size is rounded up to
 * BRG_ARENA_ALIGN, and "in use" and "peak" count rounded bytes, so the planner
 * can predict them exactly. Freed neighbours coalesce. All calls are
 * thread-safe.
 */
#ifndef BRIGADE_ARENA_H
#define BRIGADE_ARENA_H

#include <stddef.h>

#include "brigade/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define BRG_ARENA_ALIGN ((size_t)256)

typedef struct brg_arena brg_arena;

/* Bytes an allocation of size bytes really takes in an arena (a multiple of
 * BRG_ARENA_ALIGN; a request of 0 bytes takes one unit). */
BRG_API size_t brg_arena_rounded(size_t bytes);

/* name appears in messages ("cpu:1"); capacity must be positive. */
BRG_API brg_status brg_arena_create(const char *name, size_t capacity, brg_arena **out);
BRG_API void brg_arena_destroy(brg_arena *arena);

/* Reserve a block; *offset receives its start. On exhaustion returns
 * BRG_ERR_OUT_OF_MEMORY with a message naming the arena, the tag, the bytes
 * requested, the bytes free and the largest free block. */
BRG_API brg_status brg_arena_alloc(brg_arena *arena, size_t bytes, const char *tag, size_t *offset);

/* Reserve a block only if the arena's bytes in use stay within ceiling
 * (0: the arena's peak so far) and a free extent holds it: *granted is
 * then 1 and *offset its start. Otherwise *granted is 0 and nothing
 * changes; an error is returned only when host memory for the books runs
 * out. For buffers that are welcome but not needed (a larger workspace):
 * with the peak so far, or a ceiling at most the peak the arena reaches
 * anyway (a plan's), taking them never raises the peak, so a plan's peak
 * holds whether they are granted or not, as long as no other thread
 * allocates from the arena while the block is held (that could then push
 * the use past it). */
BRG_API brg_status brg_arena_alloc_within(brg_arena *arena, size_t bytes, size_t ceiling, const char *tag,
                                          size_t *offset, int *granted);

/* Release the block that starts at offset. Freeing an offset that is not the
 * start of a live block is BRG_ERR_INVALID_ARGUMENT. */
BRG_API brg_status brg_arena_free(brg_arena *arena, size_t offset);

BRG_API const char *brg_arena_name(const brg_arena *arena);
BRG_API size_t brg_arena_capacity(const brg_arena *arena);
BRG_API size_t brg_arena_in_use(const brg_arena *arena);
BRG_API size_t brg_arena_peak(const brg_arena *arena);
BRG_API size_t brg_arena_largest_free(const brg_arena *arena);
/* Number of free extents: 1 for an empty arena, more when fragmented. */
BRG_API size_t brg_arena_free_blocks(const brg_arena *arena);
/* Number of live allocations. */
BRG_API size_t brg_arena_live_blocks(const brg_arena *arena);
/* Start a new peak measurement at the current use. */
BRG_API void brg_arena_reset_peak(brg_arena *arena);

/* Parse a byte count such as "512", "8MiB", "1.5GiB", "100MB" (binary
 * suffixes KiB MiB GiB TiB, decimal kB MB GB TB, plain B). */
BRG_API brg_status brg_parse_bytes(const char *text, size_t *bytes);

/* Format bytes for people ("8.00 MiB", "512 B") into buf; returns buf. */
BRG_API char *brg_format_bytes(size_t bytes, char *buf, size_t size);

#ifdef __cplusplus
}
#endif

#endif /* BRIGADE_ARENA_H */
