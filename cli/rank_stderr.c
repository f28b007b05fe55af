/* The standard error of the ranks of an mpirun job. Every rank runs the
 * same command on the same inputs, so a refusal in the setup (an option,
 * a plan that does not fit) is written by every rank alike: four ranks,
 * four copies. During the setup the ranks other than 0 hold what they
 * write, rank 0 writes it and keeps a copy; then the ranks compare, line
 * by line: a line rank 0 wrote too is dropped, and any other is printed
 * headed "rank N: " (brg_cli_stderr_compare says how lines are matched).
 * A rank about to end the job alone prints what it holds first
 * (brg_world_abort's hook). So does one that another rank's abort ends:
 * mpirun sends it SIGTERM, then SIGKILL a second later, and the SIGTERM
 * prints what it held (brg_cli_stderr_signalled). */
#define _GNU_SOURCE /* fopencookie */
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "brigade/distributed.h"
#include "cli.h"

/* Who may print the held text: anyone (HOLDING), the one that moved it
 * to BUSY (a signal handler, or end_hold under the stream's lock), or
 * nobody (ENDED: printed, or dropped as rank 0's). */
enum { HOLDING, BUSY, ENDED };

/* The buffers the text outgrew. A signal handler may be reading one (it
 * runs on any thread, in the middle of hold_write too), so they are freed
 * only where no handler can read them, in end_hold. Each is at least
 * twice the one before: 48 are more than any memory. */
#define MAX_OLD 48

static struct {
    FILE *stream; /* the held stream: stderr from brg_cli_stderr_hold to the end of the hold */
    FILE *real;   /* the process's standard error, while stderr holds */
    char *text;   /* what this rank wrote while holding (under the stream's lock) */
    size_t length, room;
    char *old[MAX_OLD];
    int n_old;
    /* The text as a signal handler sees it, without the lock: a buffer
     * is published (`shown`) once it holds the whole text so far, and
     * shown_length once the new bytes are in, so a handler that loads
     * the length, then the buffer, reads written bytes only. `printed`:
     * the bytes a handler printed already. Lock-free atomics, which a
     * handler may use. */
    _Atomic(char *) shown;
    atomic_size_t shown_length, printed;
    atomic_int state;
    atomic_int term_pending; /* SIGTERM came while end_hold printed: it ends the process after */
    char head[32];           /* "rank N: " */
    size_t head_length;
    int rank;
    int started; /* on every rank from brg_cli_stderr_hold to the comparison */
    int lost;    /* text that could not be kept went to the real one */
} held;

/* Async-signal-safe: write(2) only. */
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

/* text[from..end) on the real standard error, each line headed with the
 * rank and ended with a newline. By hand rather than with memchr and
 * snprintf: signal handlers call it, where only what POSIX calls
 * async-signal-safe may run. */
static void write_lines(const char *text, size_t from, size_t end)
{
    for (size_t at = from; at < end;) {
        size_t next = at;
        while (next < end && text[next] != '\n') next++;
        write_all(held.head, held.head_length);
        write_all(text + at, next - at);
        write_all("\n", 1);
        at = next + 1;
    }
}

/* sig's default action, now; raised in its handler (where sig is blocked)
 * it ends the process as the handler returns. */
static void die_of(int sig)
{
    signal(sig, SIG_DFL);
    raise(sig);
}

int brg_cli_stderr_signalled(void)
{
    int was = HOLDING;
    if (!atomic_compare_exchange_strong(&held.state, &was, BUSY)) return 0;
    /* The length first: the buffer loaded after it holds at least that. */
    const size_t n = atomic_load(&held.shown_length);
    const char *text = atomic_load(&held.shown);
    const size_t from = atomic_load(&held.printed);
    if (held.rank != 0 && text && from < n) write_lines(text, from, n);
    atomic_store(&held.printed, n);
    atomic_store(&held.state, HOLDING);
    return 1;
}

/* SIGTERM, while a rank other than 0 holds and nothing else handles it:
 * mpirun ends the job (another rank's abort, or mpirun's own SIGTERM).
 * What it held goes out, then the default action ends the process. If
 * end_hold is printing, the printing ends first (term_pending); if it
 * ended already, there is nothing to print. */
static void on_term(int sig)
{
    const int saved = errno;
    if (brg_cli_stderr_signalled() || atomic_load(&held.state) == ENDED) {
        die_of(sig);
    } else {
        /* BUSY: end_hold prints (and ends the process once done), or
         * another thread's handler does (and ends it); unless it ended
         * meanwhile. */
        atomic_store(&held.term_pending, 1);
        if (atomic_load(&held.state) != BUSY) die_of(sig);
    }
    errno = saved;
}

/* fopencookie's write, under the stream's lock: rank 0 writes through and
 * keeps a copy; the others keep it only (and write it through once the
 * hold ended, or memory ran out). A bigger buffer is a copy; the one it
 * replaces stays until end_hold (MAX_OLD). */
static ssize_t hold_write(void *cookie, const char *buf, size_t size)
{
    (void)cookie;
    if (held.rank == 0 || held.lost) write_all(buf, size);
    if (held.lost) return (ssize_t)size;
    if (held.length + size > held.room) {
        const size_t room = 2 * (held.length + size) + 256;
        char *more = held.n_old < MAX_OLD ? malloc(room) : NULL;
        if (!more) {
            if (held.rank != 0) write_all(buf, size);
            held.lost = 1;
            return (ssize_t)size;
        }
        if (held.length) memcpy(more, held.text, held.length);
        if (held.text) held.old[held.n_old++] = held.text;
        held.text = more;
        held.room = room;
        atomic_store(&held.shown, more);
    }
    memcpy(held.text + held.length, buf, size);
    held.length += size;
    atomic_store(&held.shown_length, held.length);
    return (ssize_t)size;
}

void brg_cli_stderr_hold(void)
{
    if (held.started || brg_world_size(brg_cli_world) < 2) return;
    held.started = 1;
    held.rank = brg_world_rank(brg_cli_world);
    const int n = snprintf(held.head, sizeof held.head, "rank %d: ", held.rank);
    held.head_length = n > 0 && (size_t)n < sizeof held.head ? (size_t)n : 0;
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
    /* Another rank's abort ends this one with SIGTERM. Rank 0 printed its
     * text as it came; a SIGTERM that is ignored or handled already stays
     * so. A handler installed later (train's) calls
     * brg_cli_stderr_signalled itself. */
    struct sigaction sa, was;
    if (held.rank != 0 && sigaction(SIGTERM, NULL, &was) == 0 && !(was.sa_flags & SA_SIGINFO) &&
        was.sa_handler == SIG_DFL) {
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_term;
        sa.sa_flags = SA_RESTART;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGTERM, &sa, NULL);
    }
}

/* Rank 0's held lines as a multiset: each distinct line, with how many
 * lines of this rank's it can still answer for (brg_cli_stderr_compare).
 * Open addressing on the lines' hashes, at most half full, so comparing
 * takes time in proportion to the texts, not their product. */
typedef struct {
    const char *text; /* NULL: an empty slot */
    size_t n;         /* without its newline */
    uint64_t hash;
    size_t left;
} line_slot;

typedef struct {
    line_slot *slots; /* NULL: no lines */
    size_t mask;      /* slots - 1, a power of two less one */
} line_set;

/* FNV-1a, 64 bits. */
static uint64_t fnv1a(const char *s, size_t n)
{
    uint64_t h = 14695981039346656037ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h;
}

/* The slot of line[0..n): its own, or the empty one where it would go. */
static line_slot *slot_of(const line_set *set, const char *line, size_t n, uint64_t h)
{
    for (size_t i = (size_t)h & set->mask;; i = (i + 1) & set->mask) {
        line_slot *s = &set->slots[i];
        if (!s->text || (s->hash == h && s->n == n && memcmp(s->text, line, n) == 0)) return s;
    }
}

/* The lines of text[0..n), pointing into it; no slots for no text, or
 * no memory for them. */
static line_set line_set_of(const char *text, size_t n)
{
    line_set set = {NULL, 0};
    size_t lines = 0;
    for (size_t at = 0; at < n; at++)
        if (text[at] == '\n' || at + 1 == n) lines++;
    if (!lines) return set;
    size_t size = 2;
    while (size < 2 * lines) size *= 2;
    set.slots = calloc(size, sizeof *set.slots);
    if (!set.slots) return set;
    set.mask = size - 1;
    for (size_t at = 0; at < n;) {
        size_t next = at;
        while (next < n && text[next] != '\n') next++;
        const uint64_t h = fnv1a(text + at, next - at);
        line_slot *s = slot_of(&set, text + at, next - at, h);
        if (!s->text) *s = (line_slot){text + at, next - at, h, 0};
        s->left++;
        at = next + 1;
    }
    return set;
}

/* 1 when set has line[0..n) left, which is then taken. */
static int take_line(const line_set *set, const char *line, size_t n)
{
    if (!set || !set->slots) return 0;
    line_slot *s = slot_of(set, line, n, fnv1a(line, n));
    if (!s->text || s->left == 0) return 0;
    s->left--;
    return 1;
}

/* Back to the real standard error, this rank's held text printed there
 * first, each line headed with the rank (rank 0 printed its own as it
 * came): of the lines that start in the first `compared` bytes, those
 * that rank 0's lines (rank0; NULL: none) do not answer for, and
 * every line after them; less what a signal printed already. The held
 * stream stays open: a thread may be writing to it (an executor's
 * worker), and what it writes from now on goes through. Under the
 * stream's lock, so that the watchdog's thread and the main one end it
 * once. */
static void end_hold(const line_set *rank0, size_t compared)
{
    FILE *f = held.stream;
    if (!f) return;
    flockfile(f);
    /* A handler on another thread may be printing (BUSY): it is done in
     * the time of a write. ENDED: the other thread ended the hold. */
    int was = HOLDING;
    while (!atomic_compare_exchange_strong(&held.state, &was, BUSY) && was == BUSY) {
        const struct timespec pause = {0, 1000000};
        nanosleep(&pause, NULL);
        was = HOLDING;
    }
    if (was == HOLDING) {
        if (held.real) stderr = held.real;
        held.real = NULL;
        for (size_t at = atomic_load(&held.printed); held.rank != 0 && at < held.length;) {
            size_t next = at;
            while (next < held.length && held.text[next] != '\n') next++;
            if (at >= compared || !take_line(rank0, held.text + at, next - at))
                write_lines(held.text, at, next);
            at = next + 1;
        }
        /* No handler reads the buffers now: it finds the state BUSY. */
        struct sigaction now;
        if (sigaction(SIGTERM, NULL, &now) == 0 && now.sa_handler == on_term) signal(SIGTERM, SIG_DFL);
        free(held.text);
        for (int i = 0; i < held.n_old; i++) free(held.old[i]);
        held.text = NULL;
        held.length = held.room = 0;
        held.n_old = 0;
        held.lost = 1;
        atomic_store(&held.state, ENDED);
        if (atomic_load(&held.term_pending)) die_of(SIGTERM);
    }
    funlockfile(f);
}

/* The ranks compare what they held, line by line: rank 0's held text
 * goes to every rank (a broadcast), and each prints only its lines that
 * rank 0 did not write. The rule: a line (its bytes up to the newline)
 * is dropped when rank 0 held the same line and that line of rank 0's
 * has not answered for an earlier line of this rank's yet; where the
 * lines stand does not matter. So with rank 0's A, B, C, rank 1's A, B
 * print nothing; with rank 0's A, rank 1's A, A, D print "rank 1: A" and
 * "rank 1: D". What rank 0 wrote but could not keep (memory ran out) did
 * reach standard error: a line of another rank's that only that part had
 * is printed again, never lost. */
void brg_cli_stderr_compare(void)
{
    /* Every rank started to hold at the start and compares once, at the
     * same point, so every rank makes these calls or none does. */
    if (!held.started) return;
    held.started = 0;
    /* What a thread writes from here on is printed whole, after the
     * compared part. Rank 0 sends a copy: its buffer may grow meanwhile. */
    if (held.stream) flockfile(held.stream);
    const size_t compared = held.length;
    char *theirs = held.rank == 0 ? malloc(compared + 1) : NULL;
    if (theirs && compared) memcpy(theirs, held.text, compared);
    if (held.stream) funlockfile(held.stream);
    double n = held.rank == 0 ? (double)compared : 0.0; /* exact below 2^53 */
    int ok = brg_world_sum(brg_cli_world, &n, 1) == BRG_OK;
    const size_t n_theirs = ok ? (size_t)n : 0;
    if (ok && held.rank != 0) theirs = malloc(n_theirs + 1);
    /* A rank without room for rank 0's text: none receives it (the
     * broadcast is collective), and every rank prints all it held. */
    double failed = theirs ? 0.0 : 1.0;
    ok = ok && brg_world_sum(brg_cli_world, &failed, 1) == BRG_OK && failed == 0.0;
    ok = ok && brg_world_bcast(brg_cli_world, 0, theirs, n_theirs) == BRG_OK;
    line_set rank0 = {NULL, 0};
    if (ok && held.rank != 0) rank0 = line_set_of(theirs, n_theirs);
    end_hold(&rank0, compared);
    free(rank0.slots);
    free(theirs);
}

void brg_cli_stderr_release(void) { end_hold(NULL, 0); }
