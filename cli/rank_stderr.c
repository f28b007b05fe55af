/* The standard error of the ranks of an mpirun job. Every rank runs the
 * same command on the same inputs, so a refusal in the setup (an option,
 * a plan that does not fit) is written by every rank alike: four ranks,
 * four copies. During the setup the ranks other than 0 hold what they
 * write, rank 0 writes it and keeps a copy; then the ranks compare: text
 * like rank 0's is dropped, and any other is printed with each line
 * headed "rank N: ". A rank about to end the job alone prints what it
 * holds first (brg_world_abort's hook), so that nothing it said is lost;
 * a rank the abort of another kills loses what it held. */
#define _GNU_SOURCE /* fopencookie */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "brigade/distributed.h"
#include "cli.h"

static struct {
    FILE *stream; /* the held stream: stderr from brg_cli_stderr_hold to the end of the hold */
    FILE *real;   /* the process's standard error, while stderr holds */
    char *text;   /* what this rank wrote while holding */
    size_t length, room;
    int rank;
    int started; /* on every rank from brg_cli_stderr_hold to the comparison */
    int lost;    /* text that could not be kept went to the real one */
} held;

static void write_all(const char *buf, size_t size)
{
    while (size > 0) {
        const ssize_t n = write(STDERR_FILENO, buf, size);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return;
        buf += n;
        size -= (size_t)n;
    }
}

/* fopencookie's write, under the stream's lock: rank 0 writes through and
 * keeps a copy; the others keep it only (and write it through once the
 * hold ended, or memory ran out). */
static ssize_t hold_write(void *cookie, const char *buf, size_t size)
{
    (void)cookie;
    if (held.rank == 0 || held.lost) write_all(buf, size);
    if (held.lost) return (ssize_t)size;
    if (held.length + size > held.room) {
        const size_t room = 2 * (held.length + size) + 256;
        char *more = realloc(held.text, room);
        if (!more) {
            if (held.rank != 0) write_all(buf, size);
            held.lost = 1;
            return (ssize_t)size;
        }
        held.text = more;
        held.room = room;
    }
    memcpy(held.text + held.length, buf, size);
    held.length += size;
    return (ssize_t)size;
}

void brg_cli_stderr_hold(void)
{
    if (held.started || brg_world_size(brg_cli_world) < 2) return;
    held.started = 1;
    held.rank = brg_world_rank(brg_cli_world);
    const cookie_io_functions_t io = {NULL, hold_write, NULL, NULL};
    FILE *f = fopencookie(NULL, "w", io);
    if (!f) { /* this rank writes for itself, and the others print theirs */
        held.lost = 1;
        return;
    }
    setvbuf(f, NULL, _IONBF, 0);
    fflush(stderr);
    held.real = stderr;
    held.stream = f;
    stderr = f;
    /* Whoever ends the job (the watchdog, a worker's failure, the command)
     * does it through brg_world_abort: what this rank held comes first. */
    brg_world_set_abort_hook(brg_cli_stderr_release);
}

/* Back to the real standard error, this rank's text from byte `from` on
 * printed there first, each line headed with the rank (rank 0 printed its
 * own as it came). The held stream stays open: a thread may be writing to it (an
 * executor's worker), and what it writes from now on goes through. Under
 * the stream's lock, so that the watchdog's thread and the main one end
 * it once. */
static void end_hold(size_t from)
{
    FILE *f = held.stream;
    if (!f) return;
    flockfile(f);
    if (held.real) {
        stderr = held.real;
        held.real = NULL;
        char head[32];
        const int n = snprintf(head, sizeof head, "rank %d: ", held.rank);
        for (size_t at = from; held.rank != 0 && at < held.length;) {
            const char *nl = memchr(held.text + at, '\n', held.length - at);
            const size_t line = nl ? (size_t)(nl - held.text) + 1 - at : held.length - at;
            write_all(head, (size_t)n);
            write_all(held.text + at, line);
            if (!nl) write_all("\n", 1);
            at += line;
        }
        free(held.text);
        held.text = NULL;
        held.length = held.room = 0;
        held.lost = 1;
    }
    funlockfile(f);
}

/* FNV-1a, 64 bits, of the first n bytes held. */
static uint64_t held_hash(size_t n)
{
    uint64_t h = 14695981039346656037ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)held.text[i]) * 1099511628211ull;
    return h;
}

void brg_cli_stderr_compare(void)
{
    /* Every rank started to hold at the start and compares once, at the
     * same point, so every rank makes this sum or none does. */
    if (!held.started) return;
    held.started = 0;
    if (held.stream) flockfile(held.stream);
    const size_t hashed = held.length;
    const uint64_t mine = held_hash(hashed);
    const int lost = held.lost || !held.real;
    if (held.stream) funlockfile(held.stream);
    /* Rank 0's hash to every rank, in two exact 32-bit halves, and whether
     * any rank could not keep its text. */
    double first[3] = {held.rank == 0 ? (double)(mine >> 32) : 0.0, held.rank == 0 ? (double)(mine & 0xffffffffu) : 0.0,
                       lost ? 1.0 : 0.0};
    if (brg_world_sum(brg_cli_world, first, 3) != BRG_OK) {
        end_hold(0);
        return;
    }
    const uint64_t theirs = ((uint64_t)first[0] << 32) | (uint64_t)first[1];
    /* Alike: only what came after the hash (a thread's) is this rank's. */
    end_hold(mine == theirs && first[2] == 0.0 ? hashed : 0);
}

void brg_cli_stderr_release(void) { end_hold(0); }
