/* Devices: list parsing (CPU and CUDA specs, no GPU needed), capped
 * arenas, copies and their misuse, binding threads near devices. */
#include <hwloc.h>
#include <pthread.h>

#include "backends/cuda/cuda-device.h"
#include "base/device-impl.h"
#include "brigade/info.h"
#include "testutil.h"

#define GiB ((size_t)1 << 30)
#define MiB ((size_t)1 << 20)

static void test_spec_parse(void)
{
    brg_device_spec specs[16];
    int n = 0;
    CHECK_OK(brg_device_spec_parse("4x8MiB", specs, 16, &n));
    CHECK(n == 4);
    for (int i = 0; i < n; i++) CHECK(specs[i].backend == BRG_BACKEND_CPU && specs[i].capacity == 8u << 20);

    CHECK_OK(brg_device_spec_parse("2x24GiB,5x12GiB", specs, 16, &n));
    CHECK(n == 7);
    CHECK(specs[0].capacity == (size_t)24 << 30 && specs[1].capacity == (size_t)24 << 30);
    CHECK(specs[2].capacity == (size_t)12 << 30 && specs[6].capacity == (size_t)12 << 30);

    CHECK_OK(brg_device_spec_parse("cpu:1GiB, 512MiB", specs, 16, &n));
    CHECK(n == 2 && specs[0].capacity == (size_t)1 << 30 && specs[1].capacity == (size_t)512 << 20);

    struct {
        const char *text;
        brg_status want;
        const char *mention;
    } bad[] = {
        {"", BRG_ERR_INVALID_ARGUMENT, "empty"},
        {"0x8MiB", BRG_ERR_INVALID_ARGUMENT, "0x8MiB"},
        {"4x0", BRG_ERR_INVALID_ARGUMENT, "4x0"},
        {"4xMiB", BRG_ERR_INVALID_ARGUMENT, "4xMiB"},
        {"x8MiB", BRG_ERR_INVALID_ARGUMENT, "x8MiB"},
        {"4x8Mb", BRG_ERR_INVALID_ARGUMENT, "Mb"},
        {"-2x8MiB", BRG_ERR_INVALID_ARGUMENT, "-2x8MiB"},
        {"4x100", BRG_ERR_INVALID_ARGUMENT, "4x100"}, /* smaller than one arena unit */
        /* An empty item is a typo, not a device less (issue 19). */
        {",", BRG_ERR_INVALID_ARGUMENT, "item 1 is empty"},
        {"12GiB,,12GiB", BRG_ERR_INVALID_ARGUMENT, "item 2 is empty"},
        {"12GiB,", BRG_ERR_INVALID_ARGUMENT, "item 2 is empty"},
        {" , 1GiB", BRG_ERR_INVALID_ARGUMENT, "item 1 is empty"},
        {"tpu:4x8MiB", BRG_ERR_INVALID_ARGUMENT, "known: cpu, cpu-async, cuda"},
        {"9x1GiB,9x1GiB", BRG_ERR_INVALID_ARGUMENT, "more than 16"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK_STATUS(brg_device_spec_parse(bad[i].text, specs, 16, &n), bad[i].want);
        CHECK_ERROR_HAS(bad[i].mention);
    }
}

static const char *name_of(const brg_device_spec *spec, int index)
{
    static char buf[32];
    return brg_device_spec_name(spec, index, buf, sizeof buf);
}

/* CUDA device lists. Sized ("virtual") devices parse without a GPU, so a
 * laptop can plan for a GPU machine; whole GPUs need the GPU to be sized. */
static void test_cuda_spec_parse(void)
{
    brg_device_spec specs[16];
    int n = 0;
    int gpus = brg_backend_available(BRG_BACKEND_CUDA);

    CHECK_OK(brg_device_spec_parse("cuda:0:3x1GiB", specs, 16, &n));
    CHECK(n == 3);
    for (int i = 0; i < n && i < 3; i++) {
        CHECK(specs[i].backend == BRG_BACKEND_CUDA && specs[i].gpu == 0 && specs[i].vdev == i);
        CHECK(specs[i].capacity == GiB && specs[i].conv_workspace == 64 * MiB);
    }
    CHECK(strcmp(name_of(&specs[2], 2), "cuda:0.2") == 0);

    /* Virtual devices are numbered per GPU across the list; CPU items mix in. */
    CHECK_OK(brg_device_spec_parse("cuda:0:2x1GiB, 4x8MiB,cuda:0:512MiB,cpu:2x1GiB", specs, 16, &n));
    CHECK(n == 9);
    if (n == 9) {
        CHECK(specs[1].vdev == 1 && specs[1].capacity == GiB);
        CHECK(specs[2].backend == BRG_BACKEND_CPU && specs[2].gpu == -1 && specs[2].capacity == 8 * MiB);
        CHECK(specs[6].backend == BRG_BACKEND_CUDA && specs[6].vdev == 2 && specs[6].capacity == 512 * MiB);
        CHECK(strcmp(name_of(&specs[6], 6), "cuda:0.2") == 0);
        CHECK(specs[8].backend == BRG_BACKEND_CPU && specs[8].capacity == GiB && specs[8].conv_workspace == 0);
        CHECK(strcmp(name_of(&specs[8], 8), "cpu:8") == 0);
    }

    /* The reserve kept outside a whole GPU's arena: 512 MiB + 5%. */
    CHECK(brg_cuda_reserve_bytes((size_t)80 * GiB) == 512 * MiB + 4 * GiB);
    CHECK(brg_cuda_reserve_bytes(0) == 512 * MiB);

    if (!gpus) {
        /* Planning for GPUs that are not here: sizes come from the spec. */
        CHECK_OK(brg_device_spec_parse("cuda:7:2x12GiB,cuda:1:7x12GiB", specs, 16, &n));
        CHECK(n == 9 && specs[0].gpu == 7 && specs[8].gpu == 1 && specs[8].vdev == 6);
        CHECK(specs[0].capacity == 12 * GiB);
        /* A whole GPU cannot be sized without it. */
        CHECK_STATUS(brg_device_spec_parse("cuda:0", specs, 16, &n), BRG_ERR_INVALID_ARGUMENT);
        CHECK_ERROR_HAS("name its card's memory");
        CHECK_ERROR_HAS("cuda:0@12GiB");
        CHECK_ERROR_HAS("cuda:0:12GiB");
        CHECK(n == 0);
        CHECK_STATUS(brg_device_spec_parse("4x8MiB,cuda:1,2", specs, 16, &n), BRG_ERR_INVALID_ARGUMENT);
        CHECK_ERROR_HAS("'cuda:1'");
    } else {
        /* Whole GPUs: the card's memory less the reserve. */
        CHECK_OK(brg_device_spec_parse("cuda:0", specs, 16, &n));
        CHECK(n == 1 && specs[0].vdev == -1 && specs[0].capacity > 0);
        CHECK(strcmp(name_of(&specs[0], 0), "cuda:0") == 0);
        /* An ordinal that is not there, and more than the card holds. */
        CHECK_STATUS(brg_device_spec_parse("cuda:63:1GiB", specs, 16, &n), BRG_ERR_INVALID_ARGUMENT);
        CHECK_ERROR_HAS("no GPU 63");
        CHECK_STATUS(brg_device_spec_parse("cuda:0:1000x1TiB", specs, 16, &n), BRG_ERR_INVALID_ARGUMENT);
        CHECK_ERROR_HAS("usable");
        CHECK_ERROR_HAS("GPU 0");
    }

    /* Whole GPUs taken as cards of a size (@CARD), by ranges or one by one:
     * each the card less the card's reserve, GPU or not (the ordinal and
     * the card are checked against the GPU when the device is made). */
    const size_t card12 = 12 * GiB - brg_cuda_reserve_bytes(12 * GiB);
    CHECK(card12 <= 12 * GiB - 512 * MiB - (12 * GiB) / 20 && card12 + 256 > 12 * GiB - 512 * MiB - (12 * GiB) / 20);
    if (!gpus) {
        CHECK_OK(brg_device_spec_parse("cuda:0-2@12GiB,3@24GiB,cuda:5@12GiB,2x1GiB", specs, 16, &n));
        CHECK(n == 7);
        if (n == 7) {
            for (int i = 0; i < 3; i++)
                CHECK(specs[i].gpu == i && specs[i].vdev == -1 && specs[i].card == 12 * GiB &&
                      specs[i].capacity == card12 && specs[i].conv_workspace == 64 * MiB);
            CHECK(specs[3].gpu == 3 && specs[3].card == 24 * GiB &&
                  specs[3].capacity == 24 * GiB - brg_cuda_reserve_bytes(24 * GiB));
            CHECK(specs[4].gpu == 5 && specs[4].capacity == card12);
            CHECK(specs[5].backend == BRG_BACKEND_CPU && specs[5].card == 0 && specs[5].capacity == GiB);
            CHECK(strcmp(name_of(&specs[2], 2), "cuda:2") == 0 && strcmp(name_of(&specs[4], 4), "cuda:5") == 0);
        }
        CHECK_OK(brg_device_spec_parse("cuda:local@12GiB", specs, 16, &n));
        CHECK(n == 1 && specs[0].gpu == BRG_GPU_LOCAL && specs[0].vdev == -1 && specs[0].capacity == card12);
        /* A range of whole GPUs still needs them, unless they are cards. */
        CHECK_STATUS(brg_device_spec_parse("cuda:0-6", specs, 16, &n), BRG_ERR_INVALID_ARGUMENT);
        CHECK_ERROR_HAS("cuda:0@12GiB");
        CHECK_STATUS(brg_device_spec_parse("cuda:0@12GiB,1", specs, 16, &n), BRG_ERR_INVALID_ARGUMENT);
        CHECK_ERROR_HAS("'cuda:1'");
        CHECK_STATUS(brg_device_spec_parse("cuda:local", specs, 16, &n), BRG_ERR_INVALID_ARGUMENT);
        CHECK_ERROR_HAS("cuda:local@12GiB");
    } else {
        /* A card no larger than the GPU acts as that card; a larger one is refused. */
        CHECK_OK(brg_device_spec_parse("cuda:0@12GiB", specs, 16, &n));
        CHECK(n == 1 && specs[0].capacity == card12);
        /* Checked where the device is made, so that plans for cards hold anywhere. */
        CHECK_OK(brg_device_spec_parse("cuda:0@1TiB,cuda:60@12GiB", specs, 16, &n));
        /* The card to name instead, in whole MiB (brigade info's figure): a
         * rounded 79.18 GiB would itself be over an H100's 81079 MiB. */
        static brg_system_info info;
        CHECK_OK(brg_system_info_get(&info));
        char want[64];
        snprintf(want, sizeof want, "at most cuda:0@%zuMiB", info.gpu_count ? info.gpus[0].total_memory >> 20 : 0);
        brg_device *dev = NULL;
        CHECK_STATUS(brg_device_create(&specs[0], 0, &dev), BRG_ERR_INVALID_ARGUMENT);
        CHECK_ERROR_HAS("less than the card of 1.00 TiB named");
        CHECK_ERROR_HAS(want);
        /* A spec made by hand with a card and no capacity is sized by the card, as a parsed one. */
        const brg_device_spec by_hand = {.backend = BRG_BACKEND_CUDA, .gpu = 0, .vdev = -1, .card = GiB};
        CHECK_OK(brg_device_create(&by_hand, 0, &dev));
        CHECK(dev && brg_device_capacity(dev) == GiB - brg_cuda_reserve_bytes(GiB));
        brg_device_destroy(dev);
        dev = NULL;
        CHECK_STATUS(brg_device_create(&specs[1], 1, &dev), BRG_ERR_INVALID_ARGUMENT);
        CHECK_ERROR_HAS("no GPU 60");
        CHECK(dev == NULL);
        /* Commands that make devices ask before they plan, in the same words. */
        CHECK_STATUS(brg_device_spec_check_here(&specs[0]), BRG_ERR_INVALID_ARGUMENT);
        CHECK_ERROR_HAS(want);
        CHECK_OK(brg_device_spec_check_here(&specs[1])); /* no GPU 60: brg_device_create says so */
    }
    /* Without the GPU (or any GPU) nothing is refused before the device is made. */
    if (!gpus) {
        CHECK_OK(brg_device_spec_parse("cuda:0@1TiB", specs, 16, &n));
        CHECK_OK(brg_device_spec_check_here(&specs[0]));
    }
    /* The whole-GPU arithmetic, one helper for parsing, planning and making
     * devices: the card or GPU less its reserve, refused when that leaves
     * nothing; a card the GPU does not hold refused naming the largest that
     * it does, in whole MiB. */
    {
        const brg_device_spec card = {.backend = BRG_BACKEND_CUDA, .gpu = 2, .vdev = -1, .card = 12 * GiB};
        const brg_device_spec own = {.backend = BRG_BACKEND_CUDA, .gpu = 2, .vdev = -1};
        size_t arena = 1;
        CHECK_OK(brg_cuda_whole_arena(&card, 12 * GiB, &arena));
        CHECK(arena == card12);
        CHECK_STATUS(brg_cuda_whole_arena(&card, 512 * MiB, &arena), BRG_ERR_INVALID_ARGUMENT);
        CHECK(arena == 0);
        CHECK_ERROR_HAS("a card of 512.00 MiB leaves nothing");
        CHECK_STATUS(brg_cuda_whole_arena(&own, 300 * MiB, &arena), BRG_ERR_INVALID_ARGUMENT);
        CHECK_ERROR_HAS("device 'cuda:2': the GPU's 300.00 MiB are less than");
        CHECK_OK(brg_cuda_card_fits(&card, 12 * GiB));
        CHECK_STATUS(brg_cuda_card_fits(&card, 11 * GiB + 5 * MiB + 7), BRG_ERR_INVALID_ARGUMENT);
        CHECK_ERROR_HAS("GPU 2 has 11269 MiB");
        CHECK_ERROR_HAS("at most cuda:2@11269MiB");
    }
    /* A range counts one device per GPU against the room given (selfcheck's one). */
    CHECK_STATUS(brg_device_spec_parse("cuda:0-1@12GiB", specs, 1, &n), BRG_ERR_INVALID_ARGUMENT);
    CHECK_ERROR_HAS("names more than 1 device");
    CHECK(strstr(brg_last_error(), "1 devices") == NULL && n == 0);
    /* After a whole GPU, a bare COUNTxSIZE is still CPU devices. */
    if (!gpus) {
        CHECK_OK(brg_device_spec_parse("cuda:0@12GiB,4x8MiB", specs, 16, &n));
        CHECK(n == 5 && specs[1].backend == BRG_BACKEND_CPU && specs[4].capacity == 8 * MiB);
    }

    struct {
        const char *text;
        const char *mention;
    } bad[] = {
        {"cuda:", "expected cuda:GPU"},
        {"cuda:3-1@12GiB", "runs backwards"},
        {"cuda:0-@12GiB", "a range of GPUs"},
        {"cuda:0-3:2GiB", "expected cuda:GPU"},
        {"cuda:0@12GiB:2GiB", "nothing may follow the card's memory"},
        {"cuda:local@12GiB:2x1GiB", "nothing may follow the card's memory"},
        {"4x8MiB,1@12GiB", "write cuda:1@12GiB"}, /* no whole GPU before it to continue */
        {"cuda:0:1GiB,1-3", "write cuda:1-3"},
        {"cuda:0@", "the card's memory"},
        {"cuda:0@0", "is not a size"},
        {"cuda:0@500MiB", "leaves nothing"},
        {"cuda:60-64@12GiB", "from 0 to 63"},
        {"cuda:99-3", "from 0 to 63"}, /* not "runs backwards (64 to 3)" */
        {"cuda:0-2@12GiB,2@12GiB", "named twice"},
        {"cuda:local-1", "expected cuda:GPU"},
        {"cuda:x", "expected cuda:GPU"},
        {"cuda:-1", "expected cuda:GPU"},
        {"cuda:0.1", "expected cuda:GPU"},
        {"cuda:0:", "cuda:0:"},
        {"cuda:0:0x1GiB", "between 1 and 1024"},
        {"cuda:0:4x0", "is not a size"},
        {"cuda:0:4xGiB", "is not a size"},
        {"cuda:0:1GiB:2", "cuda:0:1GiB:2"},
        {"cuda:64:1GiB", "from 0 to 63"},
        {"cuda:99999999999999999999", "from 0 to 63"},
        {"cuda:0,0", "named twice"},
        {"cuda:2,cuda:2:1GiB", "used whole"},
        {"cuda:1:1GiB,cuda:1", "used whole"},
        {"cuda:0:1GiB,1", "at least 256 bytes"}, /* a bare number continues only a list of whole GPUs */
        {"gpu:0", "unknown backend"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK_STATUS(brg_device_spec_parse(bad[i].text, specs, 16, &n), BRG_ERR_INVALID_ARGUMENT);
        CHECK_ERROR_HAS(bad[i].mention);
        CHECK(n == 0);
    }
}

/* The cores a thread is bound to, as hwloc sees them. */
typedef struct bind_case {
    const brg_device *dev;
    int index, count;
    hwloc_bitmap_t got;
    brg_status st;
} bind_case;

static void *bind_worker(void *arg)
{
    bind_case *c = arg;
    c->st = brg_device_bind_thread(c->dev, c->index, c->count);
    hwloc_topology_t t;
    if (hwloc_topology_init(&t) == 0 && hwloc_topology_load(t) == 0) {
        if (hwloc_get_cpubind(t, c->got, HWLOC_CPUBIND_THREAD) != 0) hwloc_bitmap_zero(c->got);
        hwloc_topology_destroy(t);
    }
    return NULL;
}

static void bound_set(const brg_device *dev, int index, int count, hwloc_bitmap_t got)
{
    bind_case c = {.dev = dev, .index = index, .count = count, .got = got, .st = BRG_ERR_INTERNAL};
    pthread_t th;
    CHECK(pthread_create(&th, NULL, bind_worker, &c) == 0);
    pthread_join(th, NULL);
    CHECK_OK(c.st);
}

/* CPU devices: device i of n gets a contiguous share of the cores (a thread
 * of its own, so the test's main thread stays unbound). */
static void test_bind_thread(void)
{
    hwloc_topology_t t;
    if (hwloc_topology_init(&t) != 0 || hwloc_topology_load(t) != 0) {
        fprintf(stderr, "hwloc cannot load the topology: binding not tested\n");
        return;
    }
    brg_device *dev = NULL;
    CHECK_OK(brg_device_create_cpu(1 << 20, 0, &dev));
    int cores = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_CORE);
    hwloc_bitmap_t got = hwloc_bitmap_alloc(), want = hwloc_bitmap_alloc();
    hwloc_const_cpuset_t all = hwloc_topology_get_topology_cpuset(t);
    /* Binding is refused in some containers; the library then leaves the
     * thread alone, and there is nothing to compare. */
    bound_set(dev, 0, 1, got);
    if (dev && cores > 0 && hwloc_bitmap_isequal(got, all)) {
        /* One device per core: exactly that core. */
        for (int i = 0; i < cores; i++) {
            bound_set(dev, i, cores, got);
            hwloc_obj_t core = hwloc_get_obj_by_type(t, HWLOC_OBJ_CORE, (unsigned)i);
            CHECK_MSG(hwloc_bitmap_isequal(got, core->cpuset), "device %d of %d not bound to core %d", i, cores, i);
        }
        /* Twice as many devices as cores: two per core, in order. */
        bound_set(dev, 3 % (2 * cores), 2 * cores, got);
        hwloc_obj_t core = hwloc_get_obj_by_type(t, HWLOC_OBJ_CORE, (unsigned)((3 % (2 * cores)) / 2));
        CHECK(hwloc_bitmap_isequal(got, core->cpuset));
        if (cores >= 2) {
            /* Two devices: the first and the second half of the cores. */
            hwloc_bitmap_zero(want);
            for (int i = cores / 2; i < cores; i++)
                hwloc_bitmap_or(want, want, hwloc_get_obj_by_type(t, HWLOC_OBJ_CORE, (unsigned)i)->cpuset);
            bound_set(dev, 1, 2, got);
            CHECK(hwloc_bitmap_isequal(got, want));
            CHECK(!hwloc_bitmap_intersects(got, hwloc_get_obj_by_type(t, HWLOC_OBJ_CORE, 0)->cpuset));
        }
    } else {
        fprintf(stderr, "thread binding refused here: shares not compared\n");
    }
    /* A PCI device hwloc does not see has no locality, and says so. */
    int node = 7;
    char cpus[64] = "x";
    CHECK_STATUS(brg_pci_locality("ffff:ff:1f.7", &node, cpus, sizeof cpus), BRG_ERR_UNSUPPORTED);
    CHECK(node == -1 && cpus[0] == '\0');
    /* Nonsense indices bind nothing and still succeed (best effort). */
    CHECK_OK(brg_device_bind_thread(dev, 5, 2));
    CHECK_OK(brg_device_bind_thread(NULL, 0, 1));
    hwloc_bitmap_free(got);
    hwloc_bitmap_free(want);
    hwloc_topology_destroy(t);
    brg_device_destroy(dev);
}

static void test_capped_devices(void)
{
    /* Seven 12 GiB devices reserve address space only; creating them is cheap. */
    brg_device_spec specs[7];
    int n = 0;
    CHECK_OK(brg_device_spec_parse("7x12GiB", specs, 7, &n));
    brg_device *devs[7] = {0};
    for (int i = 0; i < n; i++) CHECK_OK(brg_device_create(&specs[i], i, &devs[i]));
    if (devs[6]) {
        CHECK(strcmp(brg_device_name(devs[6]), "cpu:6") == 0);
        CHECK(brg_device_capacity(devs[6]) == (size_t)12 << 30);
        CHECK(brg_device_backend(devs[6]) == BRG_BACKEND_CPU);
    }
    for (int i = 0; i < n; i++) brg_device_destroy(devs[i]);
    brg_device_destroy(NULL);
}

static void test_memory_and_copies(void)
{
    brg_device *a = NULL, *b = NULL;
    CHECK_OK(brg_device_create_cpu(1 << 20, 0, &a));
    CHECK_OK(brg_device_create_cpu(1 << 20, 1, &b));
    if (!a || !b) return;

    float host[1000], back[1000];
    for (int i = 0; i < 1000; i++) host[i] = (float)i * 0.5f - 3.0f;
    void *pa = NULL, *pb = NULL;
    CHECK_OK(brg_device_alloc(a, sizeof host, "stage 0 / input", &pa));
    CHECK_OK(brg_device_alloc(b, sizeof host, "stage 1 / received activations", &pb));
    CHECK(brg_device_in_use(a) == brg_arena_rounded(sizeof host));
    CHECK_OK(brg_device_copy_in(a, pa, host, sizeof host));
    CHECK_OK(brg_device_copy_between(b, pb, a, pa, sizeof host));
    memset(back, 0, sizeof back);
    CHECK_OK(brg_device_copy_out(b, back, pb, sizeof host));
    CHECK(memcmp(host, back, sizeof host) == 0);
    CHECK_OK(brg_device_memset_zero(b, pb, sizeof host));
    CHECK_OK(brg_device_copy_out(b, back, pb, sizeof host));
    CHECK(back[0] == 0.0f && back[999] == 0.0f);

    /* Host memory passed where device memory belongs is refused. */
    CHECK_STATUS(brg_device_copy_in(a, host, back, sizeof host), BRG_ERR_INVALID_ARGUMENT);
    CHECK_ERROR_HAS("cpu:0");
    CHECK_STATUS(brg_device_copy_between(b, pb, a, host, sizeof host), BRG_ERR_INVALID_ARGUMENT);
    /* A copy running past the end of the arena is refused. */
    CHECK_STATUS(brg_device_copy_out(a, back, (char *)pa + (1 << 20) - 16, 64), BRG_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(brg_device_free(a, host), BRG_ERR_INVALID_ARGUMENT);

    /* Out of memory names the device, the tag, the request and what is free. */
    void *big = NULL;
    CHECK_STATUS(brg_device_alloc(b, 2 << 20, "stage 2 / mixed5 / activations", &big), BRG_ERR_OUT_OF_MEMORY);
    CHECK(big == NULL);
    CHECK_ERROR_HAS("cpu:1");
    CHECK_ERROR_HAS("stage 2 / mixed5 / activations");
    CHECK_ERROR_HAS("2.00 MiB");
    CHECK_ERROR_HAS("free");

    /* Host memory for copies: ordinary and aligned on a CPU device, outside
     * the arena; a round trip through it. */
    float *staging = NULL;
    CHECK(!brg_device_host_pinned(a));
    CHECK_OK(brg_device_host_alloc(a, sizeof host, (void **)&staging));
    CHECK(staging && (uintptr_t)staging % BRG_ARENA_ALIGN == 0);
    CHECK(brg_device_in_use(a) == brg_arena_rounded(sizeof host));
    if (staging) {
        memcpy(staging, host, sizeof host);
        CHECK_OK(brg_device_copy_in(a, pa, staging, sizeof host));
        CHECK_OK(brg_device_synchronize(a));
        CHECK_OK(brg_device_copy_out(a, back, pa, sizeof host));
        CHECK(memcmp(host, back, sizeof host) == 0);
    }
    brg_device_host_free(a, staging);
    brg_device_host_free(a, NULL);
    CHECK_STATUS(brg_device_host_alloc(NULL, 16, (void **)&staging), BRG_ERR_INVALID_ARGUMENT);

    CHECK_OK(brg_device_free(a, pa));
    CHECK_OK(brg_device_free(b, pb));
    CHECK_OK(brg_device_free(b, NULL));
    CHECK(brg_device_in_use(a) == 0 && brg_device_in_use(b) == 0);
    CHECK(brg_device_peak(a) == brg_arena_rounded(sizeof host));
    CHECK_OK(brg_device_synchronize(a));
    brg_device_destroy(a);
    brg_device_destroy(b);
}

static void test_backends(void)
{
    CHECK(brg_backend_available(BRG_BACKEND_CPU));
    CHECK(strcmp(brg_backend_name(BRG_BACKEND_CPU), "cpu") == 0);
    CHECK(strcmp(brg_backend_name(BRG_BACKEND_CUDA), "cuda") == 0);
    brg_device_spec spec = {.backend = BRG_BACKEND_CUDA, .gpu = 0, .capacity = 1 << 20, .vdev = 3};
    brg_device *d = NULL;
    if (!brg_backend_available(BRG_BACKEND_CUDA)) {
        /* No GPU or no CUDA backend: a clear refusal that names the device. */
        CHECK_STATUS(brg_device_create(&spec, 0, &d), BRG_ERR_UNSUPPORTED);
        CHECK(d == NULL);
        CHECK_ERROR_HAS("cuda:0.3");
        CHECK_ERROR_HAS("GPU");
    } else {
        CHECK_OK(brg_device_create(&spec, 0, &d));
        if (d) {
            CHECK(strcmp(brg_device_name(d), "cuda:0.3") == 0);
            CHECK(brg_device_backend(d) == BRG_BACKEND_CUDA && brg_device_capacity(d) == 1 << 20);
        }
        brg_device_destroy(d);
    }
}

/* Without a visible GPU, asking for a GPU's memory is refused by name
 * (test_cuda checks the answer where there is one). */
static void test_gpu_memory_without_gpu(void)
{
    brg_system_info info;
    CHECK_OK(brg_system_info_get(&info));
    size_t used = 1, total = 1;
    if (info.gpu_count == 0) {
        CHECK_STATUS(brg_gpu_memory(0, &used, &total), BRG_ERR_UNSUPPORTED);
        CHECK(used == 0 && total == 0);
        CHECK_ERROR_HAS("GPU 0");
    }
}

/* The CUDA settings devices take from the environment, read in one place
 * (the library) for the devices, gpu_bench and `model profile` alike. */
static void test_cuda_settings(void)
{
    unsetenv("BRG_CUDA_TF32");
    unsetenv("BRG_CUDA_CONV_ALGO");
    unsetenv("BRG_CUDA_CONV_API");
    unsetenv("BRG_CUDA_CONV_1X1");
    unsetenv("BRG_CUDA_CONV_WORKSPACE_GROW");
    CHECK(!brg_cuda_tf32_enabled() && strcmp(brg_cuda_conv_algo(), "heuristic") == 0);
    CHECK(strcmp(brg_cuda_conv_api(), "legacy") == 0);
    CHECK(strcmp(brg_cuda_conv_1x1(), "cudnn") == 0 && !brg_cuda_conv_workspace_grows());
    setenv("BRG_CUDA_TF32", "1", 1);
    setenv("BRG_CUDA_CONV_ALGO", "measure", 1);
    setenv("BRG_CUDA_CONV_API", "graph", 1);
    setenv("BRG_CUDA_CONV_1X1", "gemm", 1);
    setenv("BRG_CUDA_CONV_WORKSPACE_GROW", "1", 1);
    CHECK(brg_cuda_tf32_enabled() && strcmp(brg_cuda_conv_algo(), "measure") == 0);
    CHECK(strcmp(brg_cuda_conv_api(), "graph") == 0);
    CHECK(strcmp(brg_cuda_conv_1x1(), "gemm") == 0 && brg_cuda_conv_workspace_grows());
    setenv("BRG_CUDA_TF32", "0", 1);
    setenv("BRG_CUDA_CONV_ALGO", "fastest", 1);
    setenv("BRG_CUDA_CONV_API", "backend", 1);
    setenv("BRG_CUDA_CONV_1X1", "cublas", 1);
    setenv("BRG_CUDA_CONV_WORKSPACE_GROW", "yes", 1);
    CHECK(!brg_cuda_tf32_enabled() && strcmp(brg_cuda_conv_algo(), "heuristic") == 0);
    CHECK(strcmp(brg_cuda_conv_api(), "legacy") == 0);
    CHECK(strcmp(brg_cuda_conv_1x1(), "cudnn") == 0 && !brg_cuda_conv_workspace_grows());
    unsetenv("BRG_CUDA_TF32");
    unsetenv("BRG_CUDA_CONV_ALGO");
    unsetenv("BRG_CUDA_CONV_API");
    unsetenv("BRG_CUDA_CONV_1X1");
    unsetenv("BRG_CUDA_CONV_WORKSPACE_GROW");
}

int main(void)
{
    test_cuda_settings();
    test_gpu_memory_without_gpu();
    test_spec_parse();
    test_cuda_spec_parse();
    test_bind_thread();
    test_capped_devices();
    test_memory_and_copies();
    test_backends();
    TEST_EXIT();
}
