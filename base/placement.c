/* Binding worker threads near their devices, and where GPUs sit (hwloc).
 *
 * A GPU's nearest cores are the cpuset of the first non-I/O ancestor of its
 * PCI device in hwloc's tree (its NUMA node or package). CPU devices share
 * the machine: device `index` of `count` gets a contiguous share of the
 * cores in hwloc's logical order, which follows packages and NUMA nodes, so
 * consecutive devices land on consecutive cores and spread over the nodes.
 *
 * The topology, with the important PCI devices (GPUs, NICs), is loaded once
 * per process and then only read, which hwloc allows from many threads.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <hwloc.h>
#include <pthread.h>
#include <stdio.h>

#include "device-impl.h"
#include "internal.h"

static pthread_once_t topo_once = PTHREAD_ONCE_INIT;
static hwloc_topology_t topo; /* NULL when hwloc could not load it */

static void load_topology(void)
{
    hwloc_topology_t t;
    if (hwloc_topology_init(&t) != 0) return;
    /* PCI devices are filtered out by default; keep GPUs and their bridges. */
    hwloc_topology_set_io_types_filter(t, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
    if (hwloc_topology_load(t) != 0) {
        hwloc_topology_destroy(t);
        return;
    }
    topo = t;
}

static hwloc_topology_t topology(void)
{
    pthread_once(&topo_once, load_topology);
    return topo;
}

/* The non-I/O ancestor of the PCI device at busid, or NULL. */
static hwloc_obj_t pci_home(hwloc_topology_t t, const char *busid)
{
    hwloc_obj_t pci = hwloc_get_pcidev_by_busidstring(t, busid);
    return pci ? hwloc_get_non_io_ancestor_obj(t, pci) : NULL;
}

brg_status brg_pci_locality(const char *busid, int *numa_node, char *cpus, size_t cpus_size)
{
    *numa_node = -1;
    if (cpus_size) cpus[0] = '\0';
    hwloc_topology_t t = topology();
    if (!t) return brg_error(BRG_ERR_UNSUPPORTED, "hwloc could not load this machine's topology");
    hwloc_obj_t home = pci_home(t, busid);
    if (!home || !home->cpuset)
        return brg_error(BRG_ERR_UNSUPPORTED, "hwloc does not see the PCI device %s", busid);
    hwloc_bitmap_list_snprintf(cpus, cpus_size, home->cpuset);
    if (home->nodeset && hwloc_bitmap_weight(home->nodeset) == 1) *numa_node = hwloc_bitmap_first(home->nodeset);
    return BRG_OK;
}

/* Device index of count's contiguous share of the cores (of the PUs where
 * hwloc knows no cores), added to set. With more devices than cores,
 * devices share cores, spread evenly. */
static void core_share(hwloc_topology_t t, int index, int count, hwloc_bitmap_t set)
{
    hwloc_obj_type_t type = HWLOC_OBJ_CORE;
    int n = hwloc_get_nbobjs_by_type(t, type);
    if (n <= 0) {
        type = HWLOC_OBJ_PU;
        n = hwloc_get_nbobjs_by_type(t, type);
    }
    if (n <= 0) return;
    int first = (int)((long long)index * n / count);
    int last = count <= n ? (int)((long long)(index + 1) * n / count) : first + 1;
    for (int i = first; i < last; i++) {
        hwloc_obj_t o = hwloc_get_obj_by_type(t, type, (unsigned)i);
        if (o && o->cpuset) hwloc_bitmap_or(set, set, o->cpuset);
    }
}

/* The cores a device's worker belongs on, added to set (left empty when
 * unknown): near its PCI address when it has one, else a share of the
 * machine's cores. */
static void device_cores(hwloc_topology_t t, const brg_device *dev, int index, int count, hwloc_bitmap_t set)
{
    char busid[32];
    if (!dev->iface->pci_bus_id) {
        if (index >= 0 && count > 0 && index < count) core_share(t, index, count, set);
        return;
    }
    if (dev->iface->pci_bus_id(dev, busid, sizeof busid) != BRG_OK) return;
    hwloc_obj_t home = pci_home(t, busid);
    if (home && home->cpuset) hwloc_bitmap_copy(set, home->cpuset);
}

brg_status brg_device_bind_thread(const brg_device *dev, int index, int count)
{
    if (!dev || dev->planning) return BRG_OK; /* a planning device runs nothing worth placing */
    hwloc_topology_t t = topology();
    if (!t) return BRG_OK;
    hwloc_bitmap_t set = hwloc_bitmap_alloc();
    if (!set) return BRG_OK;
    device_cores(t, dev, index, count, set);
    /* Best effort: an empty set means we do not know, and a refused
     * binding (a restricted container) leaves the thread where it was. */
    if (!hwloc_bitmap_iszero(set)) (void)hwloc_set_cpubind(t, set, HWLOC_CPUBIND_THREAD);
    hwloc_bitmap_free(set);
    return BRG_OK;
}
