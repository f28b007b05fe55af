/* The sgemm call shared by the CPU convolution and linear kernels.
 *
 * Where oneDNN convolves (conv2d-onednn.c), sgemm is oneDNN's too: two
 * thread pools, OpenMP's for oneDNN and OpenBLAS's own, each spinning after
 * its work while the other runs, took turns on the cores; one pool measured
 * resnet18's step 1.2x and fmnist-cnn's 1.6x faster. */
#include "config.h"

#include <stdlib.h>
#include <string.h>
#ifdef BRG_HAVE_ONEDNN
#include <dnnl.h>
#endif

#include "cpu-kernels.h"
#include "gemm.h"

int brg_cpu_threads_share(int devices)
{
    if (devices < 2 || getenv("OPENBLAS_NUM_THREADS") || getenv("OMP_NUM_THREADS")) return 0;
    const int all = openblas_get_num_threads();
    const int share = all / devices;
    openblas_set_num_threads(share > 1 ? share : 1);
    return all;
}

/* OpenBLAS's count when the library loads, before any sharing. */
static int all_threads = 1;
__attribute__((constructor)) static void record_all_threads(void)
{
    const int n = openblas_get_num_threads();
    all_threads = n > 0 ? n : 1;
}

int brg_cpu_all_threads(void) { return all_threads; }

size_t brg_cpu_env_bytes(const char *name, size_t fallback)
{
    const char *e = getenv(name);
    const long long v = e ? atoll(e) : 0;
    return v > 0 ? (size_t)v : fallback;
}

int brg_cpu_blas_threads(void)
{
    const int n = openblas_get_num_threads();
    return n > 0 ? n : 1;
}

#ifdef BRG_HAVE_ONEDNN
void brg_cpu_onednn_threads(void) { omp_set_num_threads(brg_cpu_blas_threads()); }
#endif

/* Below this many elements a kernel runs on the calling thread: waking the
 * pool costs a few microseconds. */
#define KERNEL_MIN_ELEMS_PER_THREAD 32768

int brg_cpu_kernel_threads(int64_t elems)
{
#if defined(_OPENMP) && defined(BRG_HAVE_ONEDNN)
    if (brg_cpu_conv_selected() != BRG_CPU_CONV_ONEDNN) return 1;
    const int64_t most = elems / KERNEL_MIN_ELEMS_PER_THREAD;
    const int t = brg_cpu_blas_threads();
    return most < 1 ? 1 : most < t ? (int)most : t;
#else
    (void)elems;
    return 1;
#endif
}

void brg_cpu_split(const brg_op *op, int64_t n, brg_cpu_part_fn part)
{
    const int threads = brg_cpu_kernel_threads(n);
    /* pieces of whole 64-byte lines where n allows */
    int64_t per = (n + threads - 1) / threads;
    per = (per + 15) & ~(int64_t)15;
    BRG_CPU_PARALLEL_FOR(threads)
    for (int t = 0; t < threads; t++) {
        const int64_t lo = per * t < n ? per * t : n, hi = per * (t + 1) < n ? per * (t + 1) : n;
        part(op, lo, hi - lo);
    }
}

void brg_cpu_threads_restore(int threads)
{
    if (threads > 0) openblas_set_num_threads(threads);
}

void brg_cpu_gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int64_t m, int64_t n, int64_t k, const float *a,
                  int64_t lda, const float *b, int64_t ldb, float beta, float *c, int64_t ldc)
{
    if (m == 0 || n == 0) return;
    if (k == 0) {
        if (beta == 0.0f)
            for (int64_t i = 0; i < m; i++) memset(c + i * ldc, 0, (size_t)n * sizeof(float));
        return;
    }
#ifdef BRG_HAVE_ONEDNN
    if (brg_cpu_conv_selected() == BRG_CPU_CONV_ONEDNN) {
        brg_cpu_onednn_threads();
        if (dnnl_sgemm(ta == CblasTrans ? 'T' : 'N', tb == CblasTrans ? 'T' : 'N', m, n, k, 1.0f, a, lda, b, ldb, beta,
                       c, ldc) == dnnl_success)
            return;
    }
#endif
    cblas_sgemm(CblasRowMajor, ta, tb, (int)m, (int)n, (int)k, 1.0f, a, (int)lda, b, (int)ldb, beta, c, (int)ldc);
}
