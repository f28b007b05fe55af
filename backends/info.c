/* System and build information for `brigade info`: CPU topology from hwloc,
 * GPUs from the CUDA runtime, versions of the libraries found at run time. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <cblas.h>
#include <hwloc.h>
#include <jansson.h>
#include <spng.h>
#include <stdio.h>
#include <string.h>
#include <zlib.h>
/* TurboJPEG has no version call; libjpeg-turbo's jconfig.h (beside
 * turbojpeg.h) names the version built against. */
#if defined(__has_include)
#if __has_include(<jconfig.h>)
#include <jconfig.h>
#endif
#endif
#define BRG_STRINGIFY_(x) #x
#define BRG_STRINGIFY(x) BRG_STRINGIFY_(x)

#include "backends/cpu/cpu-kernels.h"
#include "backends/cuda/cuda-device.h"
#include "brigade/info.h"
#include "base/device-impl.h"
#include "base/internal.h"

#ifdef BRG_HAVE_CUDA
#include <cublas_api.h>
#include "backends/cuda/cuda-kernels.h"
#endif
#ifdef BRG_HAVE_CUDNN
#include <cudnn.h>
#endif
#ifdef BRG_HAVE_NCCL
#include <nccl.h>
#endif
#ifdef BRG_HAVE_ONEDNN
#include <dnnl.h>
#endif

#ifndef PACKAGE_VERSION
#define PACKAGE_VERSION "unknown"
#endif

const char *brg_version(void) { return PACKAGE_VERSION; }

static void add_lib(brg_system_info *info, const char *name, const char *version)
{
    if (info->lib_count >= BRG_INFO_MAX_LIBS) return;
    brg_library_version *l = &info->libs[info->lib_count++];
    snprintf(l->name, sizeof l->name, "%s", name);
    snprintf(l->version, sizeof l->version, "%s", version);
}

static void numeric_version(char *buf, size_t size, unsigned major, unsigned minor, unsigned patch)
{
    snprintf(buf, size, "%u.%u.%u", major, minor, patch);
}

static brg_status read_topology(brg_system_info *info)
{
    hwloc_topology_t topo;
    if (hwloc_topology_init(&topo) != 0 || hwloc_topology_load(topo) != 0)
        return brg_error(BRG_ERR_BACKEND, "hwloc could not load this machine's topology");
    info->packages = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PACKAGE);
    info->cores = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE);
    info->pus = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PU);
    hwloc_obj_t root = hwloc_get_root_obj(topo);
    info->host_memory = (size_t)root->total_memory;
    hwloc_obj_t pkg = hwloc_get_obj_by_type(topo, HWLOC_OBJ_PACKAGE, 0);
    const char *model = pkg ? hwloc_obj_get_info_by_name(pkg, "CPUModel") : NULL;
    snprintf(info->cpu_model, sizeof info->cpu_model, "%s", model ? model : "unknown CPU");
    int nn = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE);
    info->numa_count = nn;
    for (int i = 0; i < nn && i < BRG_INFO_MAX_NUMA; i++) {
        hwloc_obj_t node = hwloc_get_obj_by_type(topo, HWLOC_OBJ_NUMANODE, (unsigned)i);
        brg_numa_info *n = &info->numa[i];
        n->os_index = (int)node->os_index;
        n->memory = (size_t)node->attr->numanode.local_memory;
        n->cores = hwloc_get_nbobjs_inside_cpuset_by_type(topo, node->cpuset, HWLOC_OBJ_CORE);
        hwloc_bitmap_list_snprintf(n->cpuset, sizeof n->cpuset, node->cpuset);
    }
    hwloc_topology_destroy(topo);
    return BRG_OK;
}

#ifdef BRG_HAVE_CUDA
static void read_gpus(brg_system_info *info)
{
    int count = 0;
    int err = brg_cuda_device_count(&count);
    if (err != 0) {
        snprintf(info->gpu_note, sizeof info->gpu_note, "no GPU visible (%s)", brg_cuda_error_string(err));
        return;
    }
    if (count == 0) snprintf(info->gpu_note, sizeof info->gpu_note, "no GPU visible");
    for (int i = 0; i < count && info->gpu_count < BRG_INFO_MAX_GPUS; i++) {
        brg_cuda_device_props p;
        if (brg_cuda_device_props_get(i, &p) != 0) continue;
        brg_gpu_info *g = &info->gpus[info->gpu_count++];
        g->index = i;
        snprintf(g->name, sizeof g->name, "%s", p.name);
        g->total_memory = p.total_memory;
        snprintf(g->pci_bus_id, sizeof g->pci_bus_id, "%s", p.pci_bus_id);
        g->compute_major = p.compute_major;
        g->compute_minor = p.compute_minor;
        g->multiprocessors = p.multiprocessors;
        g->numa_node = -1;
        if (g->pci_bus_id[0] && brg_pci_locality(g->pci_bus_id, &g->numa_node, g->cpus, sizeof g->cpus) != BRG_OK)
            g->cpus[0] = '\0';
    }
    for (int i = 0; i < info->gpu_count; i++)
        for (int j = 0; j < info->gpu_count; j++)
            info->peer_access[i][j] = i != j && brg_cuda_can_access_peer(info->gpus[i].index, info->gpus[j].index);
}

static void cuda_versions(brg_system_info *info)
{
    char buf[64];
    int driver = 0, runtime = 0;
    brg_cuda_versions(&driver, &runtime);
    numeric_version(buf, sizeof buf, (unsigned)runtime / 1000, ((unsigned)runtime % 1000) / 10, 0);
    add_lib(info, "CUDA runtime", buf);
    if (driver > 0) {
        numeric_version(buf, sizeof buf, (unsigned)driver / 1000, ((unsigned)driver % 1000) / 10, 0);
        add_lib(info, "CUDA driver", buf);
    } else {
        add_lib(info, "CUDA driver", "not found");
    }
    int major = 0, minor = 0, patch = 0;
    if (cublasGetProperty(MAJOR_VERSION, &major) == CUBLAS_STATUS_SUCCESS &&
        cublasGetProperty(MINOR_VERSION, &minor) == CUBLAS_STATUS_SUCCESS &&
        cublasGetProperty(PATCH_LEVEL, &patch) == CUBLAS_STATUS_SUCCESS) {
        numeric_version(buf, sizeof buf, (unsigned)major, (unsigned)minor, (unsigned)patch);
        add_lib(info, "cuBLAS", buf);
    }
#ifdef BRG_HAVE_CUDNN
    size_t v = cudnnGetVersion();
    /* cuDNN 9 encodes major*10000 + minor*100 + patch. */
    numeric_version(buf, sizeof buf, (unsigned)(v / 10000), (unsigned)(v % 10000 / 100), (unsigned)(v % 100));
    add_lib(info, "cuDNN", buf);
#endif
#ifdef BRG_HAVE_NCCL
    int nv = 0;
    if (ncclGetVersion(&nv) == ncclSuccess) {
        numeric_version(buf, sizeof buf, (unsigned)(nv / 10000), (unsigned)(nv % 10000 / 100),
                        (unsigned)(nv % 100));
        add_lib(info, "NCCL", buf);
    }
#endif
}
#endif

/* A "Name:   123 kB" line of /proc/meminfo, in bytes (0 if missing). */
static size_t meminfo_bytes(const char *name)
{
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) return 0;
    char line[256];
    unsigned long long kb = 0;
    const size_t n = strlen(name);
    while (fgets(line, sizeof line, f))
        if (strncmp(line, name, n) == 0 && line[n] == ':' && sscanf(line + n + 1, "%llu", &kb) == 1) break;
    fclose(f);
    return (size_t)kb * 1024;
}

/* A number in a file ("max" and absurdly large values: no limit, 0). */
static size_t limit_file(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    unsigned long long v = 0;
    const int ok = fscanf(f, "%llu", &v) == 1;
    fclose(f);
    return ok && v < ((unsigned long long)1 << 60) ? (size_t)v : 0;
}

/* The memory cgroup's limit of this process (v2, else v1), 0 for none. */
static size_t cgroup_memory_limit(void)
{
    FILE *f = fopen("/proc/self/cgroup", "r");
    char line[512], path[700];
    size_t limit = 0;
    while (f && fgets(line, sizeof line, f) && !limit) {
        line[strcspn(line, "\n")] = '\0';
        char *first = strchr(line, ':'), *second = first ? strchr(first + 1, ':') : NULL;
        if (!second) continue;
        *second = '\0';
        const char *controllers = first + 1, *dir = second + 1;
        if (strcmp(dir, "/") == 0) dir = "";
        if (controllers[0] == '\0') { /* v2 */
            snprintf(path, sizeof path, "/sys/fs/cgroup%s/memory.max", dir);
            limit = limit_file(path);
        } else if (strstr(controllers, "memory")) {
            snprintf(path, sizeof path, "/sys/fs/cgroup/memory%s/memory.limit_in_bytes", dir);
            limit = limit_file(path);
        }
    }
    if (f) fclose(f);
    /* In a container the process's own cgroup is often mounted as the root. */
    if (!limit) limit = limit_file("/sys/fs/cgroup/memory.max");
    if (!limit) limit = limit_file("/sys/fs/cgroup/memory/memory.limit_in_bytes");
    return limit;
}

brg_status brg_gpu_memory(int gpu, size_t *used, size_t *total)
{
    *used = *total = 0;
#ifdef BRG_HAVE_CUDA
    size_t free_b = 0;
    const int err = brg_cuda_mem_info(gpu, &free_b, total);
    if (err != 0)
        return brg_error(BRG_ERR_UNSUPPORTED, "the memory of GPU %d: %s", gpu, brg_cuda_error_string(err));
    *used = *total - free_b;
    return BRG_OK;
#else
    return brg_error(BRG_ERR_UNSUPPORTED, "the memory of GPU %d: the CUDA backend is not compiled in", gpu);
#endif
}

brg_status brg_system_info_get(brg_system_info *info)
{
    memset(info, 0, sizeof *info);
    snprintf(info->version, sizeof info->version, "%s", brg_version());
#ifdef BRG_HAVE_CUDA
    info->cuda_compiled = 1;
#endif
#ifdef BRG_HAVE_CUDNN
    info->cudnn_compiled = 1;
#endif
#ifdef BRG_HAVE_NCCL
    info->nccl_compiled = 1;
#endif
    BRG_CHECK(read_topology(info));
    info->memory_total = meminfo_bytes("MemTotal");
    info->memory_available = meminfo_bytes("MemAvailable");
    info->cgroup_limit = cgroup_memory_limit();
    info->memory_usable = info->memory_available;
    if (info->cgroup_limit && (!info->memory_usable || info->cgroup_limit < info->memory_usable))
        info->memory_usable = info->cgroup_limit;
    snprintf(info->cpu_convolution, sizeof info->cpu_convolution, "%s", brg_cpu_conv_name(brg_cpu_conv_selected()));

    char buf[128];
    add_lib(info, "OpenBLAS", openblas_get_config());
#ifdef BRG_HAVE_ONEDNN
    const dnnl_version_t *dv = dnnl_version();
    snprintf(buf, sizeof buf, "%d.%d.%d (%s threads)", dv->major, dv->minor, dv->patch,
             dv->cpu_runtime == DNNL_RUNTIME_OMP ? "OpenMP" : "other");
    add_lib(info, "oneDNN", buf);
#endif
    add_lib(info, "jansson", jansson_version_str());
    add_lib(info, "zlib", zlibVersion());
    unsigned hv = hwloc_get_api_version();
    numeric_version(buf, sizeof buf, hv >> 16, (hv >> 8) & 0xff, hv & 0xff);
    add_lib(info, "hwloc", buf);
    /* The image decoders of class and segmentation folders. */
#ifdef LIBJPEG_TURBO_VERSION
    add_lib(info, "libjpeg-turbo", BRG_STRINGIFY(LIBJPEG_TURBO_VERSION) " (built with)");
#else
    add_lib(info, "libjpeg-turbo", "version unknown");
#endif
    add_lib(info, "libspng", spng_version_string());
#ifdef BRG_HAVE_CUDA
    cuda_versions(info);
    read_gpus(info);
#else
    snprintf(info->gpu_note, sizeof info->gpu_note, "CUDA backend not compiled in (configure found no toolkit)");
#endif
    return BRG_OK;
}
