/* NCCL communicators of CUDA devices (private to backends/cuda): what
 * device.c's comm_* entries call (base/device-impl.h says what they do).
 * A communicator has its own non-blocking stream on its GPU; receives and
 * sums run there, sends on the stream the caller names. The caller makes
 * the communicator's GPU current first. Built only with NCCL
 * (BRG_HAVE_NCCL). */
#ifndef BRIGADE_NCCL_COMM_H
#define BRIGADE_NCCL_COMM_H

#include <stddef.h>

#include <cuda_runtime_api.h>

#include "brigade/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct brg_nccl brg_nccl;

brg_status brg_nccl_id(unsigned char *id); /* BRG_COMM_ID_BYTES */
brg_status brg_nccl_create(const unsigned char *id, int ranks, int rank, brg_nccl **out);
/* Connects member rank for sums, or else for messages from member 0 to
 * member 1 (base/device-impl.h, brg_comm_use): collective. */
brg_status brg_nccl_connect(brg_nccl *n, int rank, int sums);
void brg_nccl_destroy(brg_nccl *n); /* accepts NULL */
brg_status brg_nccl_send(brg_nccl *n, cudaStream_t stream, int peer, void *const *pieces, const size_t *bytes,
                         int count);
brg_status brg_nccl_recv(brg_nccl *n, int peer, void *const *pieces, const size_t *bytes, int count);
brg_status brg_nccl_sum(brg_nccl *n, float *values, size_t count);
brg_status brg_nccl_wait(brg_nccl *n, cudaEvent_t ev);
brg_status brg_nccl_record(brg_nccl *n, cudaEvent_t ev);

#ifdef __cplusplus
}
#endif

#endif /* BRIGADE_NCCL_COMM_H */
