/* Status strings and the per-thread last-error message. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define BRG_ERROR_MAX 1024

static _Thread_local char last_error[BRG_ERROR_MAX];

static const char *const status_names[BRG_STATUS_COUNT] = {
    [BRG_OK] = "ok",
    [BRG_ERR_INVALID_ARGUMENT] = "invalid argument",
    [BRG_ERR_OUT_OF_MEMORY] = "out of memory",
    [BRG_ERR_HOST_MEMORY] = "host out of memory",
    [BRG_ERR_IO] = "input/output error",
    [BRG_ERR_FORMAT] = "malformed input",
    [BRG_ERR_SHAPE] = "shape mismatch",
    [BRG_ERR_UNSUPPORTED] = "unsupported",
    [BRG_ERR_BACKEND] = "backend error",
    [BRG_ERR_NUMERIC] = "non-finite value",
    [BRG_ERR_CANCELLED] = "cancelled",
    [BRG_ERR_INTERNAL] = "internal error",
};

const char *brg_status_string(brg_status status)
{
    if ((int)status < 0 || status >= BRG_STATUS_COUNT) return "unknown status";
    return status_names[status];
}

const char *brg_last_error(void) { return last_error; }

void brg_clear_error(void) { last_error[0] = '\0'; }

void brg_free(void *ptr) { free(ptr); }

brg_status brg_error(brg_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return status;
}

brg_status brg_error_context(brg_status status, const char *fmt, ...)
{
    char prefix[BRG_ERROR_MAX];
    char old[BRG_ERROR_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, last_error, sizeof old);
    if (old[0] != '\0')
        snprintf(last_error, sizeof last_error, "%.400s: %.600s", prefix, old);
    else
        snprintf(last_error, sizeof last_error, "%.400s: %.100s", prefix, brg_status_string(status));
    return status;
}

brg_status brg_error_call(brg_status status, const char *call, const char *file, int line,
                          const char *fmt, ...)
{
    char detail[BRG_ERROR_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    snprintf(last_error, sizeof last_error, "%.600s (in %.200s at %.150s:%d)", detail, call, file, line);
    return status;
}

void *brg_malloc(size_t bytes, const char *what)
{
    void *p = malloc(bytes ? bytes : 1);
    if (!p) brg_error(BRG_ERR_HOST_MEMORY, "cannot allocate %zu bytes of host memory for %s", bytes, what);
    return p;
}

void *brg_calloc(size_t count, size_t size, const char *what)
{
    void *p = calloc(count ? count : 1, size ? size : 1);
    if (!p)
        brg_error(BRG_ERR_HOST_MEMORY, "cannot allocate %zu x %zu bytes of host memory for %s", count, size,
                  what);
    return p;
}
