/* brigade: the CUDA backend's device and GPU queries (private to backends/).
 *
 * These functions exist in every build; without the CUDA runtime and cuDNN
 * they report no GPU and refuse to create devices with a message that says
 * why. The registry (backends/registry.c) and `brigade info` call them.
 */
#ifndef BRIGADE_CUDA_DEVICE_H
#define BRIGADE_CUDA_DEVICE_H

#include <stddef.h>

#include "brigade/device.h"
#include "brigade/ops.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Create the CUDA device of spec (spec->backend is BRG_BACKEND_CUDA); the
 * name comes from spec->gpu and spec->vdev, capacity 0 means the whole GPU
 * less brg_cuda_reserve_bytes. */
brg_status brg_cuda_device_create(const brg_device_spec *spec, brg_device **out);

/* Number of GPUs visible; 0 without a driver, a GPU or the backend. When
 * why is not NULL and the answer is 0, it gets the reason. */
int brg_cuda_gpu_count(char *why, size_t why_size);

/* Total memory of GPU gpu in *bytes; BRG_ERR_UNSUPPORTED when it is not
 * visible (the message says how many are). */
brg_status brg_cuda_gpu_memory(int gpu, size_t *bytes);

/* Whether GPU a can read GPU b's memory directly (cudaDeviceCanAccessPeer). */
int brg_cuda_can_access_peer(int a, int b);

/* PCI address "0000:65:00.0" of GPU gpu into buf; BRG_ERR_UNSUPPORTED when
 * unknown. */
brg_status brg_cuda_gpu_pci_bus_id(int gpu, char *buf, size_t size);

/* The GPU ordinal of a CUDA device; -1 for other devices. */
int brg_cuda_device_gpu(const brg_device *dev);

/* Test hook: on (1) makes every copy between two CUDA devices take the
 * staged path (through pinned host buffers), even between devices of one
 * GPU, so that one GPU can test it; 0 puts peer access and same-GPU copies
 * back. BRG_CUDA_FORCE_STAGED=1 in the environment sets it at the first
 * copy. A no-op in builds without the backend. */
void brg_cuda_force_staged(int on);

/* The arena of a whole GPU of spec whose memory (the card's, or the GPU's
 * own) is total: total less brg_cuda_reserve_bytes; refused, naming the
 * device, where that leaves nothing. Plain C, no GPU asked. */
brg_status brg_cuda_whole_arena(const brg_device_spec *spec, size_t total, size_t *arena);

/* Whether a whole GPU taken as a card (spec->card, cuda:G@CARD) holds the
 * card, total being the GPU's own memory: refused, naming both and the
 * largest card to name instead. Plain C, no GPU asked. */
brg_status brg_cuda_card_fits(const brg_device_spec *spec, size_t total);

/* BRG_CUDA_CONV_LOG=1: each device logs its convolution choices on stderr
 * (conv.c); read when a device is made, as settings.c's public ones. */
int brg_cuda_conv_log_enabled(void);

/* Workspace of a validated op on a device of spec, without a GPU (a pure
 * function: the planning device of a CUDA target asks it). */
size_t brg_cuda_spec_workspace_bytes(const brg_op *op, const brg_device_spec *spec);
/* And the wider workspace such a device takes where it has room, when
 * BRG_CUDA_CONV_WORKSPACE_GROW=1 (brg_cuda_workspace_wanted; the registry
 * gives a planning device this function only then). */
size_t brg_cuda_spec_workspace_wanted(const brg_op *op, const brg_device_spec *spec);

#ifdef __cplusplus
}
#endif

#endif /* BRIGADE_CUDA_DEVICE_H */
