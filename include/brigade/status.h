/* brigade: status codes and the last-error message.
 *
 * Every library call that can fail returns a brg_status. On failure it also
 * leaves a message with context (device, tag, file and line of the input) in a
 * per-thread buffer that brg_last_error() returns. The library never exits or
 * aborts on bad input or an expected failure.
 */
#ifndef BRIGADE_STATUS_H
#define BRIGADE_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

#if defined(BRG_BUILDING_LIBRARY) && defined(__GNUC__)
#define BRG_API __attribute__((visibility("default")))
#else
#define BRG_API
#endif

typedef enum brg_status {
    BRG_OK = 0,
    BRG_ERR_INVALID_ARGUMENT, /* a caller passed something that makes no sense */
    BRG_ERR_OUT_OF_MEMORY,    /* a device arena cannot satisfy an allocation */
    BRG_ERR_HOST_MEMORY,      /* the host allocator failed (malloc, mmap) */
    BRG_ERR_IO,               /* a file could not be opened or read */
    BRG_ERR_FORMAT,           /* a file or model is malformed */
    BRG_ERR_SHAPE,            /* tensor shapes do not agree */
    BRG_ERR_UNSUPPORTED,      /* valid request this build or backend cannot do */
    BRG_ERR_BACKEND,          /* CUDA, cuDNN, cuBLAS, NCCL, hwloc, BLAS failure */
    BRG_ERR_NUMERIC,          /* NaN or Inf where a finite value is required */
    BRG_ERR_CANCELLED,        /* stopped because another part failed */
    BRG_ERR_INTERNAL,         /* a bug in brigade: please report it */
    BRG_STATUS_COUNT
} brg_status;

/* Short constant name of a status ("out of memory"). Never NULL. */
BRG_API const char *brg_status_string(brg_status status);

/* The message of the last failure on the calling thread, or "" if none.
 * The pointer stays valid until the next failing call on this thread. */
BRG_API const char *brg_last_error(void);

/* Forget the last message on the calling thread. */
BRG_API void brg_clear_error(void);

/* Release memory the library handed out (the text of brg_model_to_json and
 * brg_plan_to_json, the arrays of brg_idx_read_*): the library's allocator
 * may not be the caller's, so a program frees it here. Accepts NULL. */
BRG_API void brg_free(void *ptr);

#ifdef __cplusplus
}
#endif

#endif /* BRIGADE_STATUS_H */
