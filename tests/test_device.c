/* Devices: list parsing, capped arenas, copies and their misuse. */
#include "testutil.h"

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
        {",", BRG_ERR_INVALID_ARGUMENT, "no device"},
        {"tpu:4x8MiB", BRG_ERR_INVALID_ARGUMENT, "unknown backend"},
        {"9x1GiB,9x1GiB", BRG_ERR_INVALID_ARGUMENT, "more than 16"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK_STATUS(brg_device_spec_parse(bad[i].text, specs, 16, &n), bad[i].want);
        CHECK_ERROR_HAS(bad[i].mention);
    }
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
    brg_device_spec spec = {.backend = BRG_BACKEND_CUDA, .gpu = 0, .capacity = 1 << 20};
    brg_device *d = NULL;
    /* Until the CUDA device lands, asking for one is a clear refusal. */
    CHECK_STATUS(brg_device_create(&spec, 0, &d), BRG_ERR_UNSUPPORTED);
    CHECK(d == NULL);
    CHECK_ERROR_HAS("CUDA");
}

int main(void)
{
    test_spec_parse();
    test_capped_devices();
    test_memory_and_copies();
    test_backends();
    TEST_EXIT();
}
