/* Failed CUDA, cuDNN and cuBLAS calls as brigade statuses (cuda-check.h).
 *
 * Messages read "CALL failed: TEXT (NAME) at FILE:LINE", where TEXT is the
 * library's description and NAME its symbol for the code. Running out of
 * memory the library allocates itself (outside our arenas) is
 * BRG_ERR_OUT_OF_MEMORY; everything else is BRG_ERR_BACKEND. */
#include "config.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#ifdef BRG_HAVE_CUDNN
#include <cudnn.h>
#endif

#include "cuda-check.h"
#include "base/internal.h"

brg_status brg_cuda_fail(const char *what, cudaError_t err, const char *file, int line)
{
    /* Reset the runtime's last error so that the next check does not see
     * this one again (sticky errors, such as an illegal address, stay). */
    (void)cudaGetLastError();
    brg_status st = err == cudaErrorMemoryAllocation ? BRG_ERR_OUT_OF_MEMORY : BRG_ERR_BACKEND;
    return brg_error(st, "%s failed: %s (%s) at %s:%d", what, cudaGetErrorString(err), cudaGetErrorName(err), file,
                     line);
}

#ifdef BRG_HAVE_CUDNN
brg_status brg_cudnn_fail(const char *what, cudnnStatus_t st, const char *file, int line)
{
    /* cuDNN 9 keeps a more detailed message than the status's name (and
     * clears it when read). */
    char detail[256] = "";
    cudnnGetLastErrorString(detail, sizeof detail);
    return brg_cudnn_fail_detail(what, st, detail, file, line);
}

brg_status brg_cudnn_fail_detail(const char *what, cudnnStatus_t st, const char *detail, const char *file, int line)
{
#if CUDNN_MAJOR >= 9
    /* cuDNN 9 splits the old ALLOC_FAILED (now the host's) from running out
     * of device memory; both are the library running out of its own. */
    const int oom = st == CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED ||
                    st == CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED;
#else
    const int oom = st == CUDNN_STATUS_ALLOC_FAILED;
#endif
    brg_status ret = oom ? BRG_ERR_OUT_OF_MEMORY : BRG_ERR_BACKEND;
    return brg_error(ret, "%s failed: %s (%s) at %s:%d", what, detail && detail[0] ? detail : "cuDNN error",
                     cudnnGetErrorString(st), file, line);
}
#endif

brg_status brg_cublas_fail(const char *what, cublasStatus_t st, const char *file, int line)
{
    brg_status ret = st == CUBLAS_STATUS_ALLOC_FAILED ? BRG_ERR_OUT_OF_MEMORY : BRG_ERR_BACKEND;
    return brg_error(ret, "%s failed: %s (%s) at %s:%d", what, cublasGetStatusString(st), cublasGetStatusName(st),
                     file, line);
}
