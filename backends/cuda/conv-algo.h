/* brigade: which cuDNN convolution algorithm to try next, and which failed
 * runs to retry with another (private).
 *
 * The convolutions (conv.c) take the first algorithm of cuDNN's ranking
 * that fits the planned workspace, and when cuDNN then refuses to run it,
 * the next. The choice itself is plain C on plain values, so that
 * tests/test_cuda_kernels checks it on any machine, GPU or not.
 */
#ifndef BRIGADE_CONV_ALGO_H
#define BRIGADE_CONV_ALGO_H

#include <stddef.h>

/* Algorithms are bits of an unsigned set; cuDNN has at most 8 of a kind. */
#define BRG_CONV_ALGO_MAX 16

/* One entry of cuDNN's ranking (cudnnGet*Algorithm_v7), as the choice
 * needs it. */
typedef struct brg_conv_rank {
    int algo;        /* the kind's algorithm number, in [0, BRG_CONV_ALGO_MAX) */
    int runnable;    /* cuDNN rated it CUDNN_STATUS_SUCCESS */
    int tensor_math; /* it reported tensor-core math */
    size_t memory;   /* the workspace it reported, in bytes */
} brg_conv_rank;

/* The next algorithm to try for one convolution, of the `all` algorithms
 * of its kind, leaving out those in skip (bit a: algorithm a is known to
 * fail on this shape, or was already looked at). First the ranked entries
 * rank[0..n) in order that are runnable, report a workspace of at most
 * limit and need no tensor-core math unless allow_tensor; failing those,
 * the lowest-numbered algorithm in [0, all), ranked or not, since the
 * heuristics may rate badly one that runs. *ranked is the pick's index in
 * rank, or -1 when it came from the second pass. Returns -1 when every
 * algorithm is in skip. The caller still asks cuDNN what the pick needs
 * with the math it will run, and adds it to skip when it does not fit. */
static inline int brg_conv_algo_next(const brg_conv_rank *rank, int n, int all, size_t limit, int allow_tensor,
                                     unsigned skip, int *ranked)
{
    *ranked = -1;
    for (int i = 0; i < n; i++) {
        const brg_conv_rank *r = &rank[i];
        if (r->algo < 0 || r->algo >= BRG_CONV_ALGO_MAX || (skip >> r->algo & 1u)) continue;
        if (!r->runnable || r->memory > limit || (r->tensor_math && !allow_tensor)) continue;
        *ranked = i;
        return r->algo;
    }
    for (int a = 0; a < all && a < BRG_CONV_ALGO_MAX; a++)
        if (!(skip >> a & 1u)) return a;
    return -1;
}

/* The algorithms cuDNN ranked ahead of the one picked (rank index ranked,
 * or all n of them when the pick was unranked: -1) that would have
 * qualified but for the workspace they report needing over limit
 * (runnable, with the allowed math): the faster choices the planned
 * workspace shut out (BRG_CUDA_CONV_LOG). Those in skip (known to fail)
 * are left out. */
static inline unsigned brg_conv_shut_out(const brg_conv_rank *rank, int n, int ranked, size_t limit,
                                         int allow_tensor, unsigned skip)
{
    unsigned out = 0;
    for (int i = 0; i < (ranked >= 0 && ranked < n ? ranked : n); i++) {
        const brg_conv_rank *r = &rank[i];
        if (r->algo < 0 || r->algo >= BRG_CONV_ALGO_MAX || (skip >> r->algo & 1u)) continue;
        if (r->runnable && r->memory > limit && !(r->tensor_math && !allow_tensor)) out |= 1u << r->algo;
    }
    return out;
}

#ifdef CUDNN_MAJOR
/* Whether a convolution call that returned st may be run again with another
 * algorithm: only when cuDNN refused it before launching any work, so that
 * an output being accumulated into (beta = 1) is still untouched. cuDNN
 * checks its parameters (BAD_PARAM) and whether the algorithm supports the
 * configuration (NOT_SUPPORTED) before it launches; EXECUTION_FAILED means
 * a launch failed, possibly after earlier kernels of the same algorithm had
 * written the output, and allocation and internal errors are not the
 * algorithm's. cuda_error is what cudaPeekAtLastError() says after the
 * call: anything but cudaSuccess (0) is a launch error or a broken context
 * that no other algorithm would fix. */
static inline int brg_conv_retryable(cudnnStatus_t st, int cuda_error)
{
    if (cuda_error != 0) return 0;
#ifdef CUDNN_STATUS_CATEGORY
    /* cuDNN 9: sub-codes such as NOT_SUPPORTED_SHAPE share the category. */
    const int category = CUDNN_STATUS_CATEGORY(st);
#else
    const int category = (int)st;
#endif
    return category == CUDNN_STATUS_BAD_PARAM || category == CUDNN_STATUS_NOT_SUPPORTED;
}
#endif

#endif /* BRIGADE_CONV_ALGO_H */
