/* The CUDA path: GPU discovery and the first kernel against the CPU.
 * Exits 77 (skip) where no CUDA backend is compiled in or no GPU is visible. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "testutil.h"

#ifdef BRG_HAVE_CUDA
#include "cuda-kernels.h"
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

    brg_system_info info;
    CHECK_OK(brg_system_info_get(&info));
    CHECK(info.gpu_count == count);

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
    TEST_EXIT();
#endif
}
