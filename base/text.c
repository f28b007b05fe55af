/* brigade: a growing text buffer and whole-file writes (see internal.h),
 * shared by the JSON model writer and the timeline writers. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"

/* Room for `more` bytes and a NUL after the text; marks the buffer failed
 * when the host has none. */
static int text_room(brg_text *t, size_t more)
{
    if (t->failed) return 0;
    if (t->len + more + 1 <= t->cap) return 1;
    size_t cap = t->cap ? t->cap : 4096;
    while (cap < t->len + more + 1) cap *= 2;
    char *d = realloc(t->data, cap);
    if (!d) {
        t->failed = 1;
        return 0;
    }
    t->data = d;
    t->cap = cap;
    return 1;
}

void brg_text_put(brg_text *t, const char *s, size_t len)
{
    if (!text_room(t, len)) return;
    memcpy(t->data + t->len, s, len);
    t->len += len;
    t->data[t->len] = '\0';
}

void brg_text_printf(brg_text *t, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) {
        t->failed = 1;
        return;
    }
    if (!text_room(t, (size_t)n)) return;
    va_start(ap, fmt);
    vsnprintf(t->data + t->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    t->len += (size_t)n;
}

brg_status brg_write_file(const char *path, const char *what, const void *data, size_t len)
{
    const char *sep = what ? " " : "";
    what = what ? what : "";
    FILE *f = fopen(path, "wb");
    if (!f) return brg_error(BRG_ERR_IO, "cannot create %s%s%s: %s", what, sep, path, strerror(errno));
    size_t put = fwrite(data, 1, len, f);
    int err = put == len ? 0 : errno;
    if (fclose(f) != 0 && !err) err = errno;
    if (put != len || err) {
        remove(path); /* not left half-written, to be taken for whole (fopen emptied what was there) */
        return brg_error(BRG_ERR_IO, "cannot write %s%s%s: %s", what, sep, path, strerror(err ? err : EIO));
    }
    return BRG_OK;
}

const char *brg_file_kind(mode_t mode)
{
    return S_ISDIR(mode) ? "a folder" : S_ISFIFO(mode) ? "a FIFO" : S_ISSOCK(mode) ? "a socket"
           : S_ISCHR(mode) || S_ISBLK(mode) ? "a device" : "not a regular file";
}

brg_status brg_open_regular(const char *path, const char *what, FILE **out)
{
    *out = NULL;
    const int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return brg_error(BRG_ERR_IO, "cannot open %s %s: %s", what, path, strerror(errno));
    struct stat sb;
    brg_status st = BRG_OK;
    if (fstat(fd, &sb) != 0) st = brg_error(BRG_ERR_IO, "cannot read %s %s: %s", what, path, strerror(errno));
    else if (!S_ISREG(sb.st_mode))
        st = brg_error(BRG_ERR_IO, "cannot read %s %s: it is %s, not a file", what, path, brg_file_kind(sb.st_mode));
    /* Reads block again, as a file's do. */
    else if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0 || !(*out = fdopen(fd, "rb")))
        st = brg_error(BRG_ERR_IO, "cannot read %s %s: %s", what, path, strerror(errno));
    if (st != BRG_OK) close(fd);
    return st;
}

brg_status brg_read_file(const char *path, const char *what, size_t max_bytes, char **data, size_t *length)
{
    *data = NULL;
    *length = 0;
    FILE *f;
    BRG_CHECK(brg_open_regular(path, what, &f));
    size_t cap = 0, n = 0;
    char *buf = NULL;
    brg_status st = BRG_OK;
    for (;;) {
        if (n == cap) {
            if (cap >= max_bytes) {
                st = brg_error(BRG_ERR_FORMAT, "%s: larger than %zu MiB; not a %s", path, max_bytes >> 20, what);
                break;
            }
            size_t grow = cap ? cap * 2 : 65536;
            if (grow > max_bytes) grow = max_bytes;
            char *p = realloc(buf, grow + 1);
            if (!p) {
                st = brg_error(BRG_ERR_HOST_MEMORY, "cannot allocate %zu bytes to read %s", grow, path);
                break;
            }
            buf = p;
            cap = grow;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) {
            if (ferror(f)) st = brg_error(BRG_ERR_IO, "cannot read %s %s: %s", what, path, strerror(errno));
            break;
        }
    }
    fclose(f);
    if (st != BRG_OK) {
        free(buf);
        return st;
    }
    if (buf) buf[n] = '\0';
    *data = buf;
    *length = n;
    return BRG_OK;
}

/* Copy at most max bytes of s into buf (of size > max + 3), replacing
 * control characters by '?' and marking a cut with "...", so that text from
 * a file cannot garble a message. Never cuts inside a UTF-8 sequence. */
const char *brg_text_clean(const char *s, char *buf, size_t size, size_t max)
{
    size_t n = strlen(s), i;
    if (max + 4 > size) max = size - 4;
    size_t keep = n > max ? max : n;
    while (keep < n && keep > 0 && ((unsigned char)s[keep] & 0xC0) == 0x80) keep--;
    for (i = 0; i < keep; i++) buf[i] = (unsigned char)s[i] < 0x20 ? '?' : s[i];
    if (keep < n) {
        memcpy(buf + i, "...", 3);
        i += 3;
    }
    buf[i] = '\0';
    return buf;
}

/* Names longer than this are never typos worth suggesting a fix for. */
#define TEXT_NAME_MAX 64

/* Levenshtein distance, or a large number for strings too long to care. */
static int edit_distance(const char *a, const char *b)
{
    size_t n = strlen(a), m = strlen(b);
    int row[TEXT_NAME_MAX + 1];
    if (n > TEXT_NAME_MAX || m > TEXT_NAME_MAX) return 1000;
    for (size_t j = 0; j <= m; j++) row[j] = (int)j;
    for (size_t i = 1; i <= n; i++) {
        int diag = row[0];
        row[0] = (int)i;
        for (size_t j = 1; j <= m; j++) {
            int up = row[j];
            int best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best) best = up + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[m];
}

/* " (did you mean 'x'?)" for the closest of n names to word when it is
 * close enough to be a typo, else "". */
const char *brg_text_suggest(const char *word, brg_name_at_fn name_at, const void *ctx, int n, char *buf, size_t size)
{
    const char *best = NULL;
    int best_d = strlen(word) <= 4 ? 2 : 3;
    for (int i = 0; i < n; i++) {
        const char *c = name_at(ctx, i);
        if (!c) continue;
        int d = edit_distance(word, c);
        if (d < best_d) {
            best_d = d;
            best = c;
        }
    }
    buf[0] = '\0';
    if (best) snprintf(buf, size, " (did you mean '%s'?)", best);
    return buf;
}
