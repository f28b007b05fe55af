/* brigade: the dropout mask as a pure function of (seed, index), shared by
 * the C library and the CUDA kernels (private).
 *
 * splitmix64 of seed ^ (index * golden ratio) gives a well-mixed 64-bit value;
 * its top 24 bits against rate * 2^24 decide. No state, so the backward and
 * every backend regenerate the same mask. */
#ifndef BRIGADE_DROPOUT_MASK_H
#define BRIGADE_DROPOUT_MASK_H

#include <stdint.h>

#if defined(__CUDACC__)
#define BRG_HOST_DEVICE __host__ __device__
#else
#define BRG_HOST_DEVICE
#endif

static inline BRG_HOST_DEVICE uint64_t brg_splitmix64(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static inline BRG_HOST_DEVICE int brg_dropout_keep_inline(uint64_t seed, uint64_t index, float rate)
{
    uint32_t r = (uint32_t)(brg_splitmix64(seed ^ (index * 0x9e3779b97f4a7c15ULL)) >> 40);
    uint32_t threshold = (uint32_t)(rate * 16777216.0f);
    return r >= threshold;
}

#endif /* BRIGADE_DROPOUT_MASK_H */
