/* brigade: a growing text buffer and whole-file writes (see internal.h),
 * shared by the JSON model writer and the timeline writers. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    if (put != len || err)
        return brg_error(BRG_ERR_IO, "cannot write %s%s%s: %s", what, sep, path, strerror(err ? err : EIO));
    return BRG_OK;
}
