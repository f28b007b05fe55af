/* The CUDA path: GPU discovery, the first kernel against the CPU, and CUDA
 * devices (virtual devices on GPU 0: one slab each, copies in, out and
 * between them byte for byte, stream ordering, the arena's out-of-memory
 * message, a slab the GPU cannot give, peer copies where there are two GPUs,
 * the caller's current GPU kept, a thread without one given none but the
 * device's, the driver's kernel loading mode).
 * Exits 77 (skip) where no CUDA backend is compiled in or no GPU is visible. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <pthread.h>
#include <stdint.h>

#include "testutil.h"

#ifdef BRG_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "backends/cuda/cuda-kernels.h"
#include "base/device-impl.h"

#define MiB ((size_t)1 << 20)

/* Whether this test has the GPU to itself (BRG_TEST_GPU_ALONE=1, as
 * bench/gpu/run.sh runs it): only then do changes of the GPU's free memory
 * tell what our devices took. Under make -j check the other GPU tests
 * allocate at the same time. */
static int gpu_alone;

/* Free memory on GPU gpu now. */
static size_t gpu_free(int gpu)
{
    size_t free_bytes = 0, total = 0;
    CHECK(cudaSetDevice(gpu) == cudaSuccess);
    CHECK(cudaMemGetInfo(&free_bytes, &total) == cudaSuccess);
    return free_bytes;
}

static void fill(unsigned char *p, size_t n, uint64_t seed)
{
    uint64_t x = seed;
    for (size_t i = 0; i < n; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        p[i] = (unsigned char)(x >> 56);
    }
}

static void test_axpy(void)
{
    enum { N = 1 << 20 };
    float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y), *got = malloc(N * sizeof *got);
    for (int i = 0; i < N; i++) {
        x[i] = (float)(((int64_t)i * 7919) % 1000) / 250.0f - 2.0f;
        y[i] = (float)(((int64_t)i * 104729) % 1000) / 500.0f - 1.0f;
    }
    void *dx = NULL, *dy = NULL;
    CHECK(brg_cuda_malloc(&dx, N * sizeof *x) == 0);
    CHECK(brg_cuda_malloc(&dy, N * sizeof *y) == 0);
    CHECK(brg_cuda_copy_to_device(dx, x, N * sizeof *x) == 0);
    CHECK(brg_cuda_copy_to_device(dy, y, N * sizeof *y) == 0);
    CHECK(brg_cuda_axpy(0.75f, dx, dy, N) == 0);
    CHECK(brg_cuda_copy_to_host(got, dy, N * sizeof *got) == 0);
    double worst = 0;
    for (int i = 0; i < N; i++) {
        double want = 0.75 * x[i] + y[i];
        double e = fabs(got[i] - want);
        if (e > worst) worst = e;
    }
    CHECK_MSG(worst < 1e-6, "axpy max error %g", worst);
    brg_cuda_free(dx);
    brg_cuda_free(dy);
    free(x);
    free(y);
    free(got);
}

/* Bytes in, between and out of two devices come back exactly. Sizes cover
 * a small copy and one larger than the 32 MiB staging chunk. */
static void round_trips(brg_device *a, brg_device *b)
{
    const size_t sizes[] = {1000, 40 * MiB + 12345};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        size_t n = sizes[k];
        unsigned char *host = malloc(n), *back = malloc(n), *want = malloc(n);
        fill(want, n, 17 + k);
        memcpy(host, want, n);
        void *pa = NULL, *pb = NULL, *pa2 = NULL;
        CHECK_OK(brg_device_alloc(a, n, "test / a", &pa));
        CHECK_OK(brg_device_alloc(b, n, "test / b", &pb));
        CHECK_OK(brg_device_alloc(a, n, "test / a2", &pa2));
        if (pa && pb && pa2) {
            CHECK_OK(brg_device_copy_in(a, pa, host, n));
            /* The host buffer may be reused at once: the copy took it already. */
            memset(host, 0xEE, n);
            CHECK_OK(brg_device_copy_between(b, pb, a, pa, n));
            memset(back, 0, n);
            CHECK_OK(brg_device_copy_out(b, back, pb, n));
            CHECK_MSG(memcmp(want, back, n) == 0, "%zu bytes a -> b -> host differ", n);
            /* Back again, and within one device. */
            CHECK_OK(brg_device_memset_zero(a, pa, n));
            CHECK_OK(brg_device_copy_between(a, pa, b, pb, n));
            CHECK_OK(brg_device_copy_between(a, pa2, a, pa, n));
            memset(back, 0, n);
            CHECK_OK(brg_device_copy_out(a, back, pa2, n));
            CHECK_MSG(memcmp(want, back, n) == 0, "%zu bytes b -> a -> a -> host differ", n);
            /* A memset on the compute stream is seen by the next copy out. */
            CHECK_OK(brg_device_memset_zero(b, pb, n));
            CHECK_OK(brg_device_copy_out(b, back, pb, n));
            size_t nonzero = 0;
            for (size_t i = 0; i < n; i++) nonzero += back[i] != 0;
            CHECK_MSG(nonzero == 0, "%zu bytes not zero after memset", nonzero);
        }
        /* From pinned memory of brg_device_host_alloc the copy is a direct
         * DMA, in order with the device's work: the source stays as it is
         * until the device synchronizes, then the copy is complete. */
        unsigned char *pinned = NULL;
        CHECK(brg_device_host_pinned(a));
        CHECK_OK(brg_device_host_alloc(a, n, (void **)&pinned));
        if (pinned && pa) {
            memcpy(pinned, want, n);
            CHECK_OK(brg_device_memset_zero(a, pa, n));
            CHECK_OK(brg_device_copy_in(a, pa, pinned, n));
            CHECK_OK(brg_device_synchronize(a));
            memset(pinned, 0xEE, n);
            memset(back, 0, n);
            CHECK_OK(brg_device_copy_out(a, back, pa, n));
            CHECK_MSG(memcmp(want, back, n) == 0, "%zu bytes in from pinned memory differ", n);
            /* Part of it, from inside the allocation. */
            memcpy(pinned, want, n);
            CHECK_OK(brg_device_copy_in(a, pa, pinned + 8, n - 8));
            CHECK_OK(brg_device_synchronize(a));
            CHECK_OK(brg_device_copy_out(a, back, pa, n - 8));
            CHECK(memcmp(want + 8, back, n - 8) == 0);
        }
        brg_device_host_free(a, pinned);
        CHECK_OK(brg_device_free(a, pa));
        CHECK_OK(brg_device_free(a, pa2));
        CHECK_OK(brg_device_free(b, pb));
        free(host);
        free(back);
        free(want);
    }
    CHECK_OK(brg_device_synchronize(a));
    CHECK_OK(brg_device_synchronize(b));
}

typedef struct bind_arg {
    brg_device *dev;
    brg_status st;
} bind_arg;

static void *bind_worker(void *p)
{
    bind_arg *a = p;
    a->st = brg_device_bind_thread(a->dev, 0, 2);
    return NULL;
}

/* One round of test_virtual_devices; release_checked: whether destroying
 * the devices must give back all they took. */
static void virtual_devices_round(int gpus, int release_checked)
{
    brg_device_spec specs[2];
    int n = 0;
    const size_t cap = 160 * MiB;
    CHECK_OK(brg_device_spec_parse("cuda:0:2x160MiB", specs, 2, &n));
    CHECK(n == 2);
    if (n != 2) return;

    brg_device *a = NULL, *b = NULL;
    size_t before = gpu_free(0);
    CHECK_OK(brg_device_create(&specs[0], 0, &a));
    size_t after_a = gpu_free(0);
    CHECK_OK(brg_device_create(&specs[1], 1, &b));
    if (!a || !b) {
        brg_device_destroy(a);
        brg_device_destroy(b);
        return;
    }
    CHECK(strcmp(brg_device_name(a), "cuda:0.0") == 0 && strcmp(brg_device_name(b), "cuda:0.1") == 0);
    CHECK(brg_device_capacity(a) == cap && brg_device_backend(a) == BRG_BACKEND_CUDA);
    size_t drop = before - after_a;
    if (gpu_alone)
        CHECK_MSG(drop >= cap && drop <= cap + 96 * MiB, "creating a 160 MiB device took %zu MiB", drop / MiB);
    else
        fprintf(stderr, "the GPU's free memory is not checked: BRG_TEST_GPU_ALONE is not 1\n");
    size_t settled = gpu_free(0);
    void *blocks[64] = {0};
    for (int i = 0; i < 64; i++) CHECK_OK(brg_device_alloc(a, 2 * MiB, "test / block", &blocks[i]));
    size_t used = settled - gpu_free(0);
    if (gpu_alone) CHECK_MSG(used < 2 * MiB, "128 MiB of arena allocations took %zu bytes from the GPU", used);
    for (int i = 0; i < 64; i++) CHECK_OK(brg_device_free(a, blocks[i]));

    round_trips(a, b);

    /* Out of memory: the arena's message, named, as on the CPU. */
    void *big = NULL;
    CHECK_STATUS(brg_device_alloc(a, cap + MiB, "stage 3 / mixed7 / activations", &big), BRG_ERR_OUT_OF_MEMORY);
    CHECK(big == NULL);
    CHECK_ERROR_HAS("cuda:0.0");
    CHECK_ERROR_HAS("stage 3 / mixed7 / activations");
    CHECK_ERROR_HAS("free");

    /* The thread of a GPU device binds near the GPU (best effort: OK). */
    bind_arg ba = {.dev = a, .st = BRG_ERR_INTERNAL};
    pthread_t th;
    CHECK(pthread_create(&th, NULL, bind_worker, &ba) == 0);
    pthread_join(th, NULL);
    CHECK_OK(ba.st);

    /* Peer copies between GPUs, where there are two. */
    if (gpus >= 2) {
        brg_device_spec s1 = {.backend = BRG_BACKEND_CUDA, .gpu = 1, .capacity = cap, .vdev = 0};
        brg_device *c = NULL;
        CHECK_OK(brg_device_create(&s1, 2, &c));
        if (c) {
            CHECK(strcmp(brg_device_name(c), "cuda:1.0") == 0);
            round_trips(a, c);
            round_trips(c, b);
        }
        brg_device_destroy(c);
    }

    brg_device_destroy(a);
    brg_device_destroy(b);
    size_t back = gpu_free(0);
    if (gpu_alone && release_checked)
        CHECK_MSG(back + 16 * MiB >= before, "destroying the devices left %zu MiB taken", (before - back) / MiB);
}

/* Each device is one cudaMalloc of its capacity (plus its library
 * handles), allocating from it takes nothing more from the GPU, and
 * destroying it gives everything back. A first device loads the libraries;
 * the first round's copies and kernels load their code, which CUDA loads
 * lazily and keeps for the process (20 MiB on an H100, 2026-11-27): the
 * second round must give back all it took. */
static void test_virtual_devices(int gpus)
{
    brg_device_spec warm_spec = {.backend = BRG_BACKEND_CUDA, .gpu = 0, .capacity = 4 * MiB, .vdev = 7};
    brg_device *warm = NULL;
    CHECK_OK(brg_device_create(&warm_spec, 0, &warm));
    virtual_devices_round(gpus, 0);
    virtual_devices_round(gpus, 1);
    brg_device_destroy(warm);
}

/* A slab the GPU cannot give: out of memory, with what is free. */
static void test_slab_too_big(void)
{
    brg_cuda_device_props props;
    CHECK(brg_cuda_device_props_get(0, &props) == 0);
    brg_device_spec spec = {.backend = BRG_BACKEND_CUDA, .gpu = 0, .capacity = props.total_memory + 1024 * MiB,
                            .vdev = 5};
    brg_device *d = NULL;
    CHECK_STATUS(brg_device_create(&spec, 0, &d), BRG_ERR_OUT_OF_MEMORY);
    CHECK(d == NULL);
    CHECK_ERROR_HAS("cuda:0.5");
    CHECK_ERROR_HAS("are free");
    /* The GPU still works after the failed allocation. */
    brg_device_spec ok = {.backend = BRG_BACKEND_CUDA, .gpu = 0, .capacity = 4 * MiB, .vdev = 6};
    CHECK_OK(brg_device_create(&ok, 0, &d));
    brg_device_destroy(d);
}
#endif

#ifdef BRG_HAVE_CUDA
/* brigade's calls leave the calling thread's current GPU as they found it
 * (docs/architecture.md, API conventions): with the caller on GPU 1, a
 * device on GPU 0 is created, used and destroyed, and GPU 1 stays current.
 * Needs two GPUs; on one, the current GPU cannot tell. */
static void test_current_gpu_kept(int gpus)
{
    if (gpus < 2) {
        fprintf(stderr, "one GPU: the current-GPU check needs two, skipped\n");
        return;
    }
    int now = -1;
    brg_device_spec spec;
    int n = 0;
    brg_device *dev = NULL;
    void *p = NULL;
    unsigned char host[4096];
    fill(host, sizeof host, 3);
    CHECK(cudaSetDevice(1) == cudaSuccess);
    CHECK_OK(brg_device_spec_parse("cuda:0:16MiB", &spec, 1, &n));
    CHECK_OK(brg_device_create(&spec, 0, &dev));
    CHECK(cudaGetDevice(&now) == cudaSuccess && now == 1);
    if (dev) {
        CHECK_OK(brg_device_alloc(dev, sizeof host, "test / current gpu", &p));
        CHECK_OK(brg_device_memset_zero(dev, p, sizeof host));
        CHECK_OK(brg_device_copy_in(dev, p, host, sizeof host));
        CHECK_OK(brg_device_copy_out(dev, host, p, sizeof host));
        CHECK_OK(brg_device_synchronize(dev));
        CHECK(cudaGetDevice(&now) == cudaSuccess && now == 1);
        CHECK_OK(brg_device_free(dev, p));
        brg_device_destroy(dev);
        CHECK(cudaGetDevice(&now) == cudaSuccess && now == 1);
    }
    CHECK(cudaSetDevice(0) == cudaSuccess);
}
#endif

#ifdef BRG_HAVE_CUDA
/* A thread that has not used CUDA has no current GPU, and brigade's calls
 * leave it on the device's GPU rather than "restoring" GPU 0, which would
 * make GPU 0's context in every rank of a node (cudaGetDevice says 0 on
 * such a thread). On one GPU the helper's answer tells; with two, a call on
 * a device of GPU 1 must leave GPU 1 current. */
typedef struct fresh_thread_args {
    brg_device *dev; /* on the last GPU */
    int before, after;
} fresh_thread_args;

static void *fresh_thread(void *p)
{
    fresh_thread_args *a = p;
    a->before = brg_cuda_thread_gpu();
    CHECK_OK(brg_device_synchronize(a->dev));
    a->after = brg_cuda_thread_gpu();
    return NULL;
}

static void test_fresh_thread(int gpus)
{
    char text[32];
    snprintf(text, sizeof text, "cuda:%d:16MiB", gpus - 1);
    brg_device_spec spec;
    int n = 0;
    fresh_thread_args a = {.before = -2, .after = -2};
    CHECK_OK(brg_device_spec_parse(text, &spec, 1, &n));
    CHECK_OK(brg_device_create(&spec, 0, &a.dev));
    if (!a.dev) return;
    pthread_t th;
    CHECK(pthread_create(&th, NULL, fresh_thread, &a) == 0);
    pthread_join(th, NULL);
    CHECK(a.before == -1);
    CHECK(a.after == gpus - 1);
    CHECK(cudaSetDevice(0) == cudaSuccess);
    CHECK(brg_cuda_thread_gpu() == 0);
    brg_device_destroy(a.dev);
    CHECK(brg_cuda_thread_gpu() == 0);

    /* The driver's loading mode, which the NCCL communicators check, as the
     * setting says (lazy unless EAGER, the default since CUDA 12.2). */
    const char *loading = getenv("CUDA_MODULE_LOADING");
    int driver = 0, runtime = 0;
    (void)brg_cuda_versions(&driver, &runtime);
    const int lazy = brg_cuda_lazy_loading();
    if (lazy < 0 || driver < 12020)
        fprintf(stderr, "driver %d cannot say how it loads kernels, or loads them eagerly by default: not checked\n",
                driver);
    else
        CHECK_MSG(lazy == !(loading && strcmp(loading, "EAGER") == 0), "driver %d loads %s, CUDA_MODULE_LOADING=%s",
                  driver, lazy ? "lazily" : "eagerly", loading ? loading : "(unset)");
}
#endif

int main(void)
{
#ifndef BRG_HAVE_CUDA
    fprintf(stderr, "CUDA backend not compiled in: skipped\n");
    return 77;
#else
    int count = 0;
    int err = brg_cuda_device_count(&count);
    if (err != 0 || count == 0) {
        fprintf(stderr, "no GPU visible (%s): skipped\n", err ? brg_cuda_error_string(err) : "0 devices");
        return 77;
    }
    brg_cuda_device_props props;
    CHECK(brg_cuda_device_props_get(0, &props) == 0);
    CHECK(props.total_memory > 0 && props.name[0] != '\0');

    /* The driver's count of GPU 0's memory, as gpu_bench reports it. */
    size_t used = 0, total = 0;
    CHECK_OK(brg_gpu_memory(0, &used, &total));
    CHECK(total == props.total_memory && used > 0 && used < total);
    CHECK_STATUS(brg_gpu_memory(count, &used, &total), BRG_ERR_UNSUPPORTED);

    brg_system_info info;
    CHECK_OK(brg_system_info_get(&info));
    CHECK(info.gpu_count == count);
    CHECK(info.gpus[0].pci_bus_id[0] != '\0');
    fprintf(stderr, "GPU 0: PCI %s, NUMA node %d, CPUs %s\n", info.gpus[0].pci_bus_id, info.gpus[0].numa_node,
            info.gpus[0].cpus);

    test_axpy();
    if (!brg_backend_available(BRG_BACKEND_CUDA)) {
        fprintf(stderr, "GPU visible but no CUDA backend (cuDNN missing at configure): devices skipped\n");
        TEST_EXIT();
    }
    const char *alone = getenv("BRG_TEST_GPU_ALONE");
    gpu_alone = alone && strcmp(alone, "1") == 0;
    test_virtual_devices(count);
    test_slab_too_big();
    test_current_gpu_kept(count);
    test_fresh_thread(count);
    TEST_EXIT();
#endif
}
