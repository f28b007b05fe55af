/* brigade: what this build and this machine offer (`brigade info`). */
#ifndef BRIGADE_INFO_H
#define BRIGADE_INFO_H

#include <stddef.h>

#include "brigade/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define BRG_INFO_MAX_GPUS 16
#define BRG_INFO_MAX_LIBS 16
#define BRG_INFO_MAX_NUMA 16

typedef struct brg_gpu_info {
    int index;
    char name[128];
    size_t total_memory;   /* bytes */
    char pci_bus_id[32];   /* "0000:65:00.0" */
    int compute_major, compute_minor;
    int multiprocessors;
    /* Locality from hwloc: the NUMA node the GPU hangs off (-1 if unknown
     * or not a single node) and its nearest CPUs ("0-15", "" if unknown). */
    int numa_node;
    char cpus[64];
} brg_gpu_info;

typedef struct brg_library_version {
    char name[32];         /* "OpenBLAS", "cuDNN" */
    char version[128];
} brg_library_version;

typedef struct brg_numa_info {
    int os_index;
    int cores;             /* physical cores in the node */
    size_t memory;         /* bytes local to the node, 0 if unknown */
    char cpuset[64];       /* OS processor list, e.g. "0-15" */
} brg_numa_info;

typedef struct brg_system_info {
    /* build */
    char version[32];
    int cuda_compiled, cudnn_compiled, nccl_compiled;
    /* CPU topology from hwloc */
    int packages, cores, pus, numa_count;
    brg_numa_info numa[BRG_INFO_MAX_NUMA];
    size_t host_memory;    /* bytes, as hwloc counts them (its NUMA nodes' memory) */
    char cpu_model[128];
    /* what this process can use: /proc/meminfo's MemTotal and MemAvailable,
     * the memory cgroup's limit (0: none), and the smaller of the last two */
    size_t memory_total, memory_available, cgroup_limit, memory_usable;
    char cpu_convolution[16]; /* "onednn" or "im2col" (BRG_CPU_CONV) */
    /* GPUs visible now; gpu_note says why none are ("no CUDA driver", ...) */
    int gpu_count;
    brg_gpu_info gpus[BRG_INFO_MAX_GPUS];
    char gpu_note[160];
    /* peer_access[i][j]: GPU i can read GPU j's memory directly
     * (cudaDeviceCanAccessPeer); 0 on the diagonal. */
    int peer_access[BRG_INFO_MAX_GPUS][BRG_INFO_MAX_GPUS];
    /* library versions found at run time */
    int lib_count;
    brg_library_version libs[BRG_INFO_MAX_LIBS];
} brg_system_info;

/* Fill info. Never fails for lack of a GPU: gpu_count is 0 and gpu_note says
 * why. Returns an error only when hwloc cannot load the topology. */
BRG_API brg_status brg_system_info_get(brg_system_info *info);

/* GPU gpu's memory as the driver counts it (cudaMemGetInfo): bytes in use
 * by every process and the card's total. BRG_ERR_UNSUPPORTED without the
 * CUDA backend or without such a GPU. */
BRG_API brg_status brg_gpu_memory(int gpu, size_t *used, size_t *total);

/* brigade's version string. */
BRG_API const char *brg_version(void);

#ifdef __cplusplus
}
#endif

#endif /* BRIGADE_INFO_H */
