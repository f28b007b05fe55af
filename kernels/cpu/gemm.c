/* The sgemm call shared by the CPU convolution and linear kernels. */
#include <string.h>

#include "gemm.h"

void brg_cpu_gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int64_t m, int64_t n, int64_t k, const float *a,
                  int64_t lda, const float *b, int64_t ldb, float beta, float *c, int64_t ldc)
{
    if (m == 0 || n == 0) return;
    if (k == 0) {
        if (beta == 0.0f)
            for (int64_t i = 0; i < m; i++) memset(c + i * ldc, 0, (size_t)n * sizeof(float));
        return;
    }
    cblas_sgemm(CblasRowMajor, ta, tb, (int)m, (int)n, (int)k, 1.0f, a, (int)lda, b, (int)ldb, beta, c, (int)ldc);
}
