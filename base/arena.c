/* Arena bookkeeping: a sorted array of extents covering [0, capacity).
 *
 * Each extent is either free or one live allocation. Allocation is best fit
 * (the smallest free extent that is large enough, lowest offset on ties),
 * which keeps fragmentation low for the stack-like lifetimes of a training
 * step. Freeing merges the extent with free neighbours, so free extents are
 * never adjacent. Lookups by offset are binary searches; inserting and
 * removing extents moves the tail of the array, which is fine for the
 * hundreds of live blocks a stage holds.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brigade/arena.h"
#include "internal.h"

/* Extents stay small (the tag lives on the heap) because inserting and
 * removing one moves the tail of the array: dry runs of large models do
 * that hundreds of thousands of times. */
typedef struct extent {
    size_t offset;
    size_t size;
    int free;
    char *tag; /* NULL when free */
} extent;

struct brg_arena {
    char name[64];
    size_t capacity;
    size_t in_use;
    size_t peak;
    extent *ext;
    size_t n_ext, cap_ext;
    pthread_mutex_t lock;
};

size_t brg_arena_rounded(size_t bytes)
{
    if (bytes == 0) return BRG_ARENA_ALIGN;
    if (bytes > (size_t)-1 - BRG_ARENA_ALIGN) return (size_t)-1 & ~(BRG_ARENA_ALIGN - 1);
    return (bytes + BRG_ARENA_ALIGN - 1) & ~(BRG_ARENA_ALIGN - 1);
}

brg_status brg_arena_create(const char *name, size_t capacity, brg_arena **out)
{
    *out = NULL;
    capacity &= ~(BRG_ARENA_ALIGN - 1);
    if (capacity == 0)
        return brg_error(BRG_ERR_INVALID_ARGUMENT,
                         "arena '%s': capacity must be at least %zu bytes", name ? name : "?", BRG_ARENA_ALIGN);
    brg_arena *a = brg_calloc(1, sizeof *a, "an arena");
    if (!a) return BRG_ERR_HOST_MEMORY;
    snprintf(a->name, sizeof a->name, "%s", name ? name : "arena");
    a->capacity = capacity;
    a->cap_ext = 16;
    a->ext = brg_malloc(a->cap_ext * sizeof *a->ext, "arena extents");
    if (!a->ext) {
        free(a);
        return BRG_ERR_HOST_MEMORY;
    }
    a->ext[0] = (extent){.offset = 0, .size = capacity, .free = 1, .tag = NULL};
    a->n_ext = 1;
    pthread_mutex_init(&a->lock, NULL);
    *out = a;
    return BRG_OK;
}

void brg_arena_destroy(brg_arena *arena)
{
    if (!arena) return;
    pthread_mutex_destroy(&arena->lock);
    for (size_t i = 0; i < arena->n_ext; i++) free(arena->ext[i].tag);
    free(arena->ext);
    free(arena);
}

static size_t largest_free_locked(const brg_arena *a)
{
    size_t best = 0;
    for (size_t i = 0; i < a->n_ext; i++)
        if (a->ext[i].free && a->ext[i].size > best) best = a->ext[i].size;
    return best;
}

/* Append the largest live allocations to msg, so an out-of-memory message
 * says what is holding the memory. */
static void describe_holders_locked(const brg_arena *a, char *msg, size_t size)
{
    enum { SHOW = 3 };
    size_t top[SHOW] = {0};
    size_t idx[SHOW] = {0};
    int n = 0;
    for (size_t i = 0; i < a->n_ext; i++) {
        if (a->ext[i].free) continue;
        size_t s = a->ext[i].size;
        int pos = n < SHOW ? n : SHOW;
        while (pos > 0 && top[pos - 1] < s) pos--;
        if (pos >= SHOW) continue;
        for (int j = (n < SHOW ? n : SHOW - 1); j > pos; j--) {
            top[j] = top[j - 1];
            idx[j] = idx[j - 1];
        }
        top[pos] = s;
        idx[pos] = i;
        if (n < SHOW) n++;
    }
    if (n == 0) return;
    size_t len = strlen(msg);
    snprintf(msg + len, size - len, "; largest holders:");
    for (int j = 0; j < n; j++) {
        char b[32];
        len = strlen(msg);
        snprintf(msg + len, size - len, "%s '%s' %s", j ? "," : "", a->ext[idx[j]].tag,
                 brg_format_bytes(top[j], b, sizeof b));
    }
}

static int grow_locked(brg_arena *a)
{
    if (a->n_ext < a->cap_ext) return 1;
    size_t cap = a->cap_ext * 2;
    extent *e = realloc(a->ext, cap * sizeof *e);
    if (!e) return 0;
    a->ext = e;
    a->cap_ext = cap;
    return 1;
}

/* The best fit for need (the smallest free extent that holds it, lowest
 * offset on ties); n_ext when none does. */
static size_t best_fit_locked(const brg_arena *a, size_t need)
{
    size_t best = a->n_ext;
    for (size_t i = 0; i < a->n_ext; i++) {
        if (!a->ext[i].free || a->ext[i].size < need) continue;
        if (best == a->n_ext || a->ext[i].size < a->ext[best].size) best = i;
    }
    return best;
}

/* Make free extent best (at least need bytes) a live block of need bytes. */
static brg_status take_locked(brg_arena *a, size_t best, size_t need, const char *tag, size_t *offset)
{
    char *tag_copy = strdup(tag);
    if (!tag_copy) return brg_error(BRG_ERR_HOST_MEMORY, "arena '%s': cannot copy an allocation's tag", a->name);
    if (a->ext[best].size > need) {
        if (!grow_locked(a)) {
            free(tag_copy);
            return brg_error(BRG_ERR_HOST_MEMORY, "arena '%s': cannot grow its extent table", a->name);
        }
        memmove(&a->ext[best + 2], &a->ext[best + 1], (a->n_ext - best - 1) * sizeof *a->ext);
        a->ext[best + 1] = (extent){.offset = a->ext[best].offset + need,
                                    .size = a->ext[best].size - need,
                                    .free = 1,
                                    .tag = NULL};
        a->n_ext++;
        a->ext[best].size = need;
    }
    a->ext[best].free = 0;
    a->ext[best].tag = tag_copy;
    a->in_use += need;
    if (a->in_use > a->peak) a->peak = a->in_use;
    *offset = a->ext[best].offset;
    return BRG_OK;
}

brg_status brg_arena_alloc(brg_arena *a, size_t bytes, const char *tag, size_t *offset)
{
    if (!tag) tag = "untagged";
    size_t need = brg_arena_rounded(bytes);
    pthread_mutex_lock(&a->lock);
    const size_t best = best_fit_locked(a, need);
    if (best == a->n_ext) {
        char msg[768], b1[32], b2[32], b3[32], b4[32];
        snprintf(msg, sizeof msg,
                 "device '%s' is out of memory: '%s' needs %s but only %s of %s is free "
                 "(largest free block %s)",
                 a->name, tag, brg_format_bytes(need, b1, sizeof b1),
                 brg_format_bytes(a->capacity - a->in_use, b2, sizeof b2),
                 brg_format_bytes(a->capacity, b3, sizeof b3),
                 brg_format_bytes(largest_free_locked(a), b4, sizeof b4));
        describe_holders_locked(a, msg, sizeof msg);
        pthread_mutex_unlock(&a->lock);
        return brg_error(BRG_ERR_OUT_OF_MEMORY, "%s", msg);
    }
    const brg_status st = take_locked(a, best, need, tag, offset);
    pthread_mutex_unlock(&a->lock);
    return st;
}

brg_status brg_arena_alloc_within(brg_arena *a, size_t bytes, size_t ceiling, const char *tag, size_t *offset,
                                  int *granted)
{
    if (!tag) tag = "untagged";
    *granted = 0;
    const size_t need = brg_arena_rounded(bytes);
    pthread_mutex_lock(&a->lock);
    const size_t top = ceiling ? ceiling : a->peak;
    const size_t best = a->in_use <= top && need <= top - a->in_use ? best_fit_locked(a, need) : a->n_ext;
    brg_status st = BRG_OK;
    if (best < a->n_ext) {
        st = take_locked(a, best, need, tag, offset);
        *granted = st == BRG_OK;
    }
    pthread_mutex_unlock(&a->lock);
    return st;
}

static size_t find_locked(const brg_arena *a, size_t offset)
{
    size_t lo = 0, hi = a->n_ext;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (a->ext[mid].offset < offset)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static void remove_locked(brg_arena *a, size_t i)
{
    memmove(&a->ext[i], &a->ext[i + 1], (a->n_ext - i - 1) * sizeof *a->ext);
    a->n_ext--;
}

brg_status brg_arena_free(brg_arena *a, size_t offset)
{
    pthread_mutex_lock(&a->lock);
    size_t i = find_locked(a, offset);
    if (i == a->n_ext || a->ext[i].offset != offset || a->ext[i].free) {
        pthread_mutex_unlock(&a->lock);
        return brg_error(BRG_ERR_INVALID_ARGUMENT,
                         "device '%s': offset %zu is not the start of a live allocation", a->name, offset);
    }
    a->in_use -= a->ext[i].size;
    a->ext[i].free = 1;
    free(a->ext[i].tag);
    a->ext[i].tag = NULL;
    if (i + 1 < a->n_ext && a->ext[i + 1].free) {
        a->ext[i].size += a->ext[i + 1].size;
        remove_locked(a, i + 1);
    }
    if (i > 0 && a->ext[i - 1].free) {
        a->ext[i - 1].size += a->ext[i].size;
        remove_locked(a, i);
    }
    pthread_mutex_unlock(&a->lock);
    return BRG_OK;
}

const char *brg_arena_name(const brg_arena *a) { return a->name; }
size_t brg_arena_capacity(const brg_arena *a) { return a->capacity; }

#define LOCKED_READ(type, expr)                                                                    \
    pthread_mutex_lock((pthread_mutex_t *)&a->lock);                                               \
    type v = (expr);                                                                               \
    pthread_mutex_unlock((pthread_mutex_t *)&a->lock);                                             \
    return v

size_t brg_arena_in_use(const brg_arena *a) { LOCKED_READ(size_t, a->in_use); }
size_t brg_arena_peak(const brg_arena *a) { LOCKED_READ(size_t, a->peak); }
size_t brg_arena_largest_free(const brg_arena *a) { LOCKED_READ(size_t, largest_free_locked(a)); }

static size_t count_locked(const brg_arena *a, int free_flag)
{
    size_t n = 0;
    for (size_t i = 0; i < a->n_ext; i++) n += (a->ext[i].free == free_flag);
    return n;
}

size_t brg_arena_free_blocks(const brg_arena *a) { LOCKED_READ(size_t, count_locked(a, 1)); }
size_t brg_arena_live_blocks(const brg_arena *a) { LOCKED_READ(size_t, count_locked(a, 0)); }

void brg_arena_reset_peak(brg_arena *a)
{
    pthread_mutex_lock(&a->lock);
    a->peak = a->in_use;
    pthread_mutex_unlock(&a->lock);
}

brg_status brg_parse_bytes(const char *text, size_t *bytes)
{
    static const struct {
        const char *suffix;
        double factor;
    } units[] = {
        {"", 1.0},           {"B", 1.0},
        {"KiB", 1024.0},     {"MiB", 1048576.0},     {"GiB", 1073741824.0}, {"TiB", 1099511627776.0},
        {"K", 1024.0},       {"M", 1048576.0},       {"G", 1073741824.0},   {"T", 1099511627776.0},
        {"kB", 1e3},         {"KB", 1e3},            {"MB", 1e6},           {"GB", 1e9},
        {"TB", 1e12},
    };
    if (!text || !*text) return brg_error(BRG_ERR_INVALID_ARGUMENT, "empty size: expected e.g. 512MiB");
    errno = 0;
    char *end = NULL;
    double value = strtod(text, &end);
    /* Decimal only: strtod reads "0x10" as 16, so '7x0x10GiB' (a mistyped
     * count) became seven 16 GiB devices. */
    const size_t digits = (size_t)(end - text);
    const int decimal = (isdigit((unsigned char)text[0]) || text[0] == '.') && !memchr(text, 'x', digits) &&
                        !memchr(text, 'X', digits);
    if (end == text || errno || !isfinite(value) || value <= 0 || !decimal)
        return brg_error(BRG_ERR_INVALID_ARGUMENT,
                         "'%s' is not a size: expected a positive number with an optional unit "
                         "(B, KiB, MiB, GiB, TiB, kB, MB, GB, TB), e.g. 12GiB",
                         text);
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        if (strcmp(end, units[i].suffix) != 0) continue;
        double b = value * units[i].factor;
        if (b >= 18446744073709551615.0)
            return brg_error(BRG_ERR_INVALID_ARGUMENT, "size '%s' is too large", text);
        if (b < 1.0) return brg_error(BRG_ERR_INVALID_ARGUMENT, "size '%s' is less than one byte", text);
        *bytes = (size_t)b;
        return BRG_OK;
    }
    return brg_error(BRG_ERR_INVALID_ARGUMENT,
                     "unknown unit '%s' in size '%s': use B, KiB, MiB, GiB, TiB, kB, MB, GB or TB", end, text);
}

char *brg_format_bytes(size_t bytes, char *buf, size_t size)
{
    static const char *const names[] = {"KiB", "MiB", "GiB", "TiB"};
    if (bytes < 1024) {
        snprintf(buf, size, "%zu B", bytes);
        return buf;
    }
    double v = (double)bytes / 1024.0;
    int u = 0;
    while (v >= 1024.0 && u < 3) {
        v /= 1024.0;
        u++;
    }
    snprintf(buf, size, "%.2f %s", v, names[u]);
    return buf;
}
