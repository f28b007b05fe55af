/* brigade: internal helpers shared by every room of the library.
 * Nothing here is part of the public API. */
#ifndef BRIGADE_INTERNAL_H
#define BRIGADE_INTERNAL_H

#include <stddef.h>
#include <stdio.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "brigade/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define BRG_PRINTF(fmt_idx, arg_idx) __attribute__((format(printf, fmt_idx, arg_idx)))
/* A parameter a function takes for its signature's sake (a kernel table's
 * common signature) and does not read. */
#define BRG_UNUSED __attribute__((unused))
#else
#define BRG_PRINTF(fmt_idx, arg_idx)
#define BRG_UNUSED
#endif

/* Record a failure message for the calling thread and return status, so a
 * caller can write `return brg_error(BRG_ERR_SHAPE, "...", ...);`. */
brg_status brg_error(brg_status status, const char *fmt, ...) BRG_PRINTF(2, 3);

/* Put "context: " in front of the current message (for example the stage or
 * the file being read) and return status unchanged. */
brg_status brg_error_context(brg_status status, const char *fmt, ...) BRG_PRINTF(2, 3);

/* As brg_error, for a failing call into a backend library: the message
 * carries the call's text and the source file and line. */
brg_status brg_error_call(brg_status status, const char *call, const char *file, int line,
                          const char *fmt, ...) BRG_PRINTF(5, 6);

/* ret = call; on failure jump to label. The callee has already set the
 * message. Pattern: ret = BRG_OK; BRG_CHECK_GOTO(x, ret, fail); ...
 * exit: return ret; fail: goto exit; */
#define BRG_CHECK_GOTO(call, ret, label)                                                           \
    do {                                                                                           \
        (ret) = (call);                                                                            \
        if ((ret) != BRG_OK) goto label;                                                           \
    } while (0)

/* Return the status of call if it failed. */
#define BRG_CHECK(call)                                                                            \
    do {                                                                                           \
        brg_status brg_check_status_ = (call);                                                     \
        if (brg_check_status_ != BRG_OK) return brg_check_status_;                                 \
    } while (0)

/* Host allocations that set the message on failure. */
void *brg_malloc(size_t bytes, const char *what);
void *brg_calloc(size_t count, size_t size, const char *what);

/* A growing text buffer: start from {0}; after a failed host allocation it
 * keeps its text so far, ignores the rest and says so in `failed`. The
 * text is always NUL-terminated once anything was added (base/text.c). */
typedef struct brg_text {
    char *data;
    size_t len, cap;
    int failed;
} brg_text;

void brg_text_put(brg_text *t, const char *s, size_t len);
void brg_text_printf(brg_text *t, const char *fmt, ...) BRG_PRINTF(2, 3);

/* Copy at most max bytes of s into buf (of size > max + 3), control
 * characters replaced by '?' and a cut marked "...", never inside a UTF-8
 * sequence: text from a file cannot garble a message. Returns buf. */
const char *brg_text_clean(const char *s, char *buf, size_t size, size_t max);

/* The i-th of a list of names (NULL to skip it), for brg_text_suggest. */
typedef const char *(*brg_name_at_fn)(const void *ctx, int i);

/* " (did you mean 'x'?)" in buf for the closest of n names to word when it
 * is close enough to be a typo (edit distance), else "". Returns buf. */
const char *brg_text_suggest(const char *word, brg_name_at_fn name_at, const void *ctx, int n, char *buf, size_t size);

/* Write len bytes to path (created or truncated); BRG_ERR_IO with the
 * reason, naming the file as "WHAT PATH" (what may be NULL), and the file
 * removed rather than left half-written. */
brg_status brg_write_file(const char *path, const char *what, const void *data, size_t len);

/* All of path (at most max_bytes, else BRG_ERR_FORMAT "not a WHAT") into a
 * malloc'ed buffer *data of *length bytes, plus a NUL after them (NULL for
 * an empty file). BRG_ERR_IO, naming the file as "WHAT PATH", when it
 * cannot be opened or read (a folder included). */
brg_status brg_read_file(const char *path, const char *what, size_t max_bytes, char **data, size_t *length);
/* Open path for reading only when it is a regular file: it is opened
 * without blocking and looked at before a byte is read, since opening a
 * FIFO waits for a writer forever (and a device may never end).
 * BRG_ERR_IO naming what (e.g. "profile") and the path otherwise. */
brg_status brg_open_regular(const char *path, const char *what, FILE **out);
/* What a path that is not a regular file is ("a folder", "a FIFO", ...),
 * for messages that refuse it. */
const char *brg_file_kind(mode_t mode);

/* Seconds on the monotonic clock, for timing steps and actions. */
static inline double brg_now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* FNV-1a, 64 bits, of bytes[0..n) continued from h (BRG_FNV1A_START for
 * a fresh hash): agreement between ranks, not security. */
#define BRG_FNV1A_START 0xcbf29ce484222325ULL
static inline uint64_t brg_fnv1a(uint64_t h, const void *bytes, size_t n)
{
    const unsigned char *b = bytes;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ULL;
    return h;
}

#ifdef __cplusplus
}
#endif

#endif /* BRIGADE_INTERNAL_H */
