/* brigade: the sgemm call shared by the CPU convolution and linear kernels
 * (private). */
#ifndef BRIGADE_CPU_GEMM_H
#define BRIGADE_CPU_GEMM_H

#include <cblas.h>
#include <stdint.h>

/* C[m,n] = A.B + beta C, row-major; an empty inner dimension (which cblas
 * rejects) leaves beta C, i.e. zeros for beta 0. Dimensions must fit int. */
void brg_cpu_gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int64_t m, int64_t n, int64_t k, const float *a,
                  int64_t lda, const float *b, int64_t ldb, float beta, float *c, int64_t ldc);

#endif /* BRIGADE_CPU_GEMM_H */
