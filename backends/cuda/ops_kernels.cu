// The CUDA backend's own kernels (see cuda-launch.h for the contracts).
//
// Written to be obviously equivalent to the CPU kernels rather than fast:
// elementwise kernels are grid-stride loops with one thread per output
// element; reductions (batch-norm statistics, bias gradients, the loss) give
// one block to each channel or row and sum in double through shared memory
// in a fixed order, so results are deterministic; backward passes that
// scatter on the CPU (pools, upsampling) gather here, one thread per input
// element, so no atomics and no zeroing pass are needed.
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include "cuda-launch.h"
#include "base/rng.h"
#include "pool-window.h"

#define THREADS 256        // elementwise blocks
#define REDUCE_THREADS 256 // reduction blocks; a power of two (tree reduction)
#define MAX_BLOCKS 65536   // grid-stride loops cover the rest
#define FINITE_MAX_BLOCKS 1024 // the finite check's grid (a reduction: each thread takes many elements)

// Every index below is 64-bit: activations pass 2^31 elements.
#define FOR_EACH(i, n)                                                                                     \
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

static unsigned blocks_for(int64_t n)
{
    int64_t b = (n + THREADS - 1) / THREADS;
    return (unsigned)(b > MAX_BLOCKS ? MAX_BLOCKS : b);
}

// Memory-bound kernels take UNROLL elements a thread a turn, a grid (or
// row) stride apart, and issue all their loads before the first is used:
// with one load in flight a thread, an H200 moved 1.7 TB/s through ReLU,
// 40% of its copy bandwidth (bench/README.md). AT(i, u) is the u-th index
// of the turn starting at i; the loads of a turn all come before its
// stores, so an output may alias an input element for element.
#define UNROLL 4
#define FOR_EACH_TURN(i, n)                                                                                \
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x, stride_ = (int64_t)gridDim.x * blockDim.x; \
         i < (n); i += UNROLL * stride_)
#define AT(i, u) ((i) + (int64_t)(u) * stride_)

// A turn's loads: v[u] = src[i + u * stride] for the indices under n, 0
// past it (and everywhere when on is 0: an accumulator not asked for).
__device__ static inline void load_turn(float *v, const float *src, int64_t i, int64_t stride, int64_t n, int on = 1)
{
#pragma unroll
    for (int u = 0; u < UNROLL; u++) v[u] = on && i + u * stride < n ? src[i + u * stride] : 0.0f;
}

// A turn's stores: dst[i + u * stride] = v[u] for the indices under n.
__device__ static inline void store_turn(float *dst, const float *v, int64_t i, int64_t stride, int64_t n)
{
#pragma unroll
    for (int u = 0; u < UNROLL; u++)
        if (i + u * stride < n) dst[i + u * stride] = v[u];
}

// A backward turn: dx = grad(a, dy) element by element, added to dx when
// acc (and written as it is otherwise, so that -0 stays -0).
template <class F>
__device__ static inline void backward_turn(const float *a, const float *dy, float *dx, int64_t i, int64_t stride,
                                            int64_t n, int acc, F grad)
{
    float av[UNROLL], g[UNROLL], old[UNROLL];
    load_turn(av, a, i, stride, n);
    load_turn(g, dy, i, stride, n);
    load_turn(old, dx, i, stride, n, acc);
#pragma unroll
    for (int u = 0; u < UNROLL; u++) {
        const float gu = grad(av[u], g[u]);
        g[u] = acc ? old[u] + gu : gu;
    }
    store_turn(dx, g, i, stride, n);
}

// Launch a grid-stride kernel over n elements; nothing when n is 0 (a grid
// of 0 blocks is a launch error).
#define LAUNCH_FLAT(kernel, n, stream, ...)                                                                \
    do {                                                                                                   \
        if ((n) <= 0) return cudaSuccess;                                                                  \
        kernel<<<blocks_for(n), THREADS, 0, (stream)>>>(__VA_ARGS__);                                      \
        return cudaGetLastError();                                                                         \
    } while (0)

// The same for a FOR_EACH_TURN kernel: a grid of a quarter the threads.
#define LAUNCH_TURNS(kernel, n, stream, ...)                                                               \
    do {                                                                                                   \
        if ((n) <= 0) return cudaSuccess;                                                                  \
        kernel<<<blocks_for(((n) + UNROLL - 1) / UNROLL), THREADS, 0, (stream)>>>(__VA_ARGS__);            \
        return cudaGetLastError();                                                                         \
    } while (0)

// Sum of v over the block, returned to every thread. sh holds
// REDUCE_THREADS doubles; the tree order is fixed, so the result is
// deterministic. Every thread of the block must call it.
__device__ static double block_sum(double v, double *sh)
{
    sh[threadIdx.x] = v;
    __syncthreads();
    for (int s = REDUCE_THREADS / 2; s > 0; s >>= 1) {
        if ((int)threadIdx.x < s) sh[threadIdx.x] += sh[threadIdx.x + s];
        __syncthreads();
    }
    double r = sh[0];
    __syncthreads(); // sh is reused by the next call
    return r;
}

// Maximum of v over the block (strict >, as the CPU's running maximum).
__device__ static float block_max(float v, float *sh)
{
    sh[threadIdx.x] = v;
    __syncthreads();
    for (int s = REDUCE_THREADS / 2; s > 0; s >>= 1) {
        if ((int)threadIdx.x < s && sh[threadIdx.x + s] > sh[threadIdx.x]) sh[threadIdx.x] = sh[threadIdx.x + s];
        __syncthreads();
    }
    float r = sh[0];
    __syncthreads();
    return r;
}

// Visit this thread's share of channel c of a contiguous [batch, channels,
// plane] tensor: `at` runs over the offsets of the channel's block in each
// sample, the block's threads side by side (coalesced, no division).
#define FOR_CHANNEL(at, c, channels, plane, batch)                                                         \
    for (int64_t b_ = 0; b_ < (batch); b_++)                                                               \
        for (int64_t at = (b_ * (channels) + (c)) * (plane) + threadIdx.x,                                 \
                     end_ = (b_ * (channels) + (c) + 1) * (plane);                                         \
             at < end_; at += REDUCE_THREADS)

// ---------------------------------------------------------------- elementwise

// y = max(x, 0) with NaN passing through (x < 0 is false for NaN).
__global__ static void relu_forward_kernel(const float *x, float *y, int64_t n)
{
    FOR_EACH_TURN(i, n)
    {
        float v[UNROLL];
        load_turn(v, x, i, stride_, n);
#pragma unroll
        for (int u = 0; u < UNROLL; u++) v[u] = v[u] < 0.0f ? 0.0f : v[u];
        store_turn(y, v, i, stride_, n);
    }
}

__global__ static void relu_backward_kernel(const float *y, const float *dy, float *dx, int64_t n, int acc)
{
    FOR_EACH_TURN(i, n)
    {
        backward_turn(y, dy, dx, i, stride_, n, acc, [](float yv, float g) { return yv > 0.0f ? g : 0.0f; });
    }
}

// A dropped element is exactly 0, even when src holds Inf or NaN.
__global__ static void dropout_kernel(const float *src, float *dst, int64_t n, uint64_t seed, uint64_t offset,
                                      float rate, float scale, int acc)
{
    FOR_EACH(i, n)
    {
        float v = src[i] * scale;
        float g = brg_dropout_keep_inline(seed, offset + (uint64_t)i, rate) ? v : 0.0f;
        dst[i] = acc ? dst[i] + g : g;
    }
}

__global__ static void add_kernel(const float *a, const float *b, float *y, int64_t n)
{
    FOR_EACH_TURN(i, n)
    {
        float va[UNROLL], vb[UNROLL];
        load_turn(va, a, i, stride_, n);
        load_turn(vb, b, i, stride_, n);
#pragma unroll
        for (int u = 0; u < UNROLL; u++) va[u] += vb[u];
        store_turn(y, va, i, stride_, n);
    }
}

__global__ static void copy_blocks_kernel(float *dst, int64_t dst_stride, const float *src, int64_t src_stride,
                                          int64_t block, int64_t total, int acc)
{
    FOR_EACH(j, total)
    {
        int64_t b = j / block, i = j % block;
        float v = src[b * src_stride + i];
        float *d = dst + b * dst_stride + i;
        *d = acc ? *d + v : v;
    }
}

__global__ static void bias_add_kernel(float *y, const float *bias, int64_t channels, int64_t plane, int64_t n)
{
    FOR_EACH(i, n) y[i] += bias[(i / plane) % channels];
}

// One block per channel.
__global__ static void bias_grad_kernel(const float *dy, float *db, int64_t batch, int64_t channels, int64_t plane,
                                        int acc)
{
    __shared__ double sh[REDUCE_THREADS];
    const int64_t c = blockIdx.x;
    double s = 0.0;
    FOR_CHANNEL(at, c, channels, plane, batch) s += dy[at];
    s = block_sum(s, sh);
    if (threadIdx.x == 0) db[c] = acc ? db[c] + (float)s : (float)s;
}

// ---------------------------------------------------------------- batch normalization
// Training BatchNorm runs in three launches so that the whole GPU works on
// it: per-channel sums over `splits` chunks of each channel (grid channels x
// splits), one thread per channel adding its chunks in order (so results
// are deterministic) into the statistics and the per-channel coefficients,
// then the elementwise pass with one block row per (sample, channel) plane.
// One block per channel, as before, left most of the GPU idle: 32 to 192
// blocks on 132 multiprocessors for Inception-v3. The sums are shifted by
// a value of the channel (its first element forward, the saved mean
// backward) and kept in double; the formulas are those of
// backends/cpu/batchnorm.c.

// Chunk s of the m = batch * plane elements of one channel.
__device__ static void bn_chunk(int64_t m, int splits, int s, int64_t *j0, int64_t *j1)
{
    const int64_t chunk = (m + splits - 1) / splits;
    *j0 = s * chunk;
    *j1 = *j0 + chunk < m ? *j0 + chunk : m;
}

// f(at, k) for the elements j0 <= j < j1 of channel c, this thread's
// share, UNROLL at a time in order: at[0..k) their offsets (k < UNROLL only
// at the end), so that f can issue their loads together.
template <class F>
__device__ static void bn_for_chunk(int64_t c, int64_t channels, int64_t plane, int64_t j0, int64_t j1, F f)
{
    int64_t j = j0 + threadIdx.x;
    if (j >= j1) return;
    int64_t b = j / plane, p = j % plane;
    while (j < j1) {
        int64_t at[UNROLL];
        int k = 0;
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
            at[u] = (b * channels + c) * plane + p;
            if (j < j1) k = u + 1;
            j += REDUCE_THREADS;
            p += REDUCE_THREADS;
            if (p >= plane) {
                b += p / plane;
                p %= plane;
            }
        }
        f(at, k);
    }
}

// Block rows of the elementwise passes: row r = b * channels + c is one
// plane; the threads of a block take `stride` apart elements of it.
static void bn_rows_grid(int64_t rows, int64_t plane, dim3 *grid, dim3 *block)
{
    const int64_t threads = plane >= THREADS ? THREADS : (plane + 31) / 32 * 32;
    int64_t per_row = (plane + UNROLL * threads - 1) / (UNROLL * threads);
    if (per_row > 65535) per_row = 65535;
    *block = dim3((unsigned)threads);
    *grid = dim3((unsigned)rows, (unsigned)(per_row < 1 ? 1 : per_row));
}

// A row in turns of UNROLL elements (FOR_EACH_TURN's AT).
#define FOR_ROW_TURN(p, plane)                                                                             \
    for (int64_t p = (int64_t)blockIdx.y * blockDim.x + threadIdx.x, stride_ = (int64_t)gridDim.y * blockDim.x; \
         p < (plane); p += UNROLL * stride_)

// partial[(c * splits + s) * BRG_CUDA_BN_FORWARD_SUMS + {0, 1}] = sums of (x - k) and (x - k)^2
// over chunk s of channel c, k = the channel's first element.
__global__ static void bn_stats_partial_kernel(const float *x, double *partial, int64_t channels, int64_t plane,
                                               int64_t m, int splits)
{
    __shared__ double sh[REDUCE_THREADS];
    const int64_t c = blockIdx.x;
    const int s = blockIdx.y;
    const double k = x[c * plane];
    int64_t j0, j1;
    bn_chunk(m, splits, s, &j0, &j1);
    double s1 = 0.0, s2 = 0.0;
    bn_for_chunk(c, channels, plane, j0, j1, [&](const int64_t *at, int n) {
        float v[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; u++) v[u] = u < n ? x[at[u]] : 0.0f;
#pragma unroll
        for (int u = 0; u < UNROLL; u++)
            if (u < n) {
                const double d = (double)v[u] - k;
                s1 += d;
                s2 += d * d;
            }
    });
    s1 = block_sum(s1, sh);
    s2 = block_sum(s2, sh);
    if (threadIdx.x == 0) {
        partial[(c * splits + s) * BRG_CUDA_BN_FORWARD_SUMS] = s1;
        partial[(c * splits + s) * BRG_CUDA_BN_FORWARD_SUMS + 1] = s2;
    }
}

// The statistics, running averages and the coefficients of y = ((x -
// mean_hi) - mean_lo) * scale + shift of each channel.
__global__ static void bn_train_finish_kernel(const float *x, const double *partial, int splits, const float *gamma,
                                              const float *beta, float *running_mean, float *running_var,
                                              float *saved_mean, float *saved_invstd, float4 *coef, int64_t channels,
                                              int64_t plane, int64_t m, double eps, double momentum)
{
    FOR_EACH(c, channels)
    {
        double s1 = 0.0, s2 = 0.0;
        for (int s = 0; s < splits; s++) {
            s1 += partial[(c * splits + s) * BRG_CUDA_BN_FORWARD_SUMS];
            s2 += partial[(c * splits + s) * BRG_CUDA_BN_FORWARD_SUMS + 1];
        }
        const double dm = (double)m, d = s1 / dm;
        const double mean = (double)x[c * plane] + d;
        double ssd = s2 - s1 * d;
        ssd = ssd > 0.0 ? ssd : 0.0;
        const double invstd = 1.0 / sqrt(ssd / dm + eps);
        const double g = gamma ? gamma[c] : 1.0;
        const float mean_hi = (float)mean;
        coef[c] = make_float4(mean_hi, (float)(mean - mean_hi), (float)(g * invstd), beta ? beta[c] : 0.0f);
        saved_mean[c] = mean_hi;
        saved_invstd[c] = (float)invstd;
        running_mean[c] = (float)((1.0 - momentum) * running_mean[c] + momentum * mean);
        running_var[c] = (float)((1.0 - momentum) * running_var[c] + momentum * (ssd / (dm - 1.0)));
    }
}

__global__ static void bn_apply_kernel(const float *x, float *y, const float4 *coef, int64_t channels, int64_t plane)
{
    const int64_t r = blockIdx.x;
    const float4 k = coef[r % channels];
    const float *xr = x + r * plane;
    float *yr = y + r * plane;
    FOR_ROW_TURN(p, plane)
    {
        float v[UNROLL];
        load_turn(v, xr, p, stride_, plane);
#pragma unroll
        for (int u = 0; u < UNROLL; u++) v[u] = ((v[u] - k.x) - k.y) * k.z + k.w;
        store_turn(yr, v, p, stride_, plane);
    }
}

__global__ static void bn_infer_kernel(const float *x, const float *gamma, const float *beta,
                                       const float *running_mean, const float *running_var, const float *mean_lo,
                                       float *y, int64_t channels, int64_t plane, double eps)
{
    const int64_t r = blockIdx.x, c = r % channels;
    const double invstd = 1.0 / sqrt((double)running_var[c] + eps);
    const double g = gamma ? gamma[c] : 1.0;
    const float hi = running_mean[c], lo = mean_lo ? mean_lo[c] : 0.0f, scale = (float)(g * invstd);
    const float shift = beta ? beta[c] : 0.0f;
    const float *xr = x + r * plane;
    float *yr = y + r * plane;
    FOR_ROW_TURN(p, plane)
    {
        float v[UNROLL];
        load_turn(v, xr, p, stride_, plane);
#pragma unroll
        for (int u = 0; u < UNROLL; u++) v[u] = ((v[u] - hi) - lo) * scale + shift;
        store_turn(yr, v, p, stride_, plane);
    }
}

// Training-mode backward; statistics recomputed from x in double, shifted
// by saved_mean (see brg_cpu_batchnorm_backward for why). Partial sums of
// xc = x - saved_mean, xc^2, dy and dy * xc per chunk.
__global__ static void bn_backward_partial_kernel(const float *x, const float *dy, const float *saved_mean,
                                                  double *partial, int64_t channels, int64_t plane, int64_t m,
                                                  int splits)
{
    __shared__ double sh[REDUCE_THREADS];
    const int64_t c = blockIdx.x;
    const int s = blockIdx.y;
    const float shift = saved_mean[c];
    int64_t j0, j1;
    bn_chunk(m, splits, s, &j0, &j1);
    double sxc = 0.0, sxc2 = 0.0, sdy = 0.0, sdyxc = 0.0;
    bn_for_chunk(c, channels, plane, j0, j1, [&](const int64_t *at, int n) {
        float xv[UNROLL], dyv[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
            xv[u] = u < n ? x[at[u]] : 0.0f;
            dyv[u] = u < n ? dy[at[u]] : 0.0f;
        }
#pragma unroll
        for (int u = 0; u < UNROLL; u++)
            if (u < n) {
                const double xc = (double)xv[u] - shift, d = dyv[u];
                sxc += xc;
                sxc2 += xc * xc;
                sdy += d;
                sdyxc += d * xc;
            }
    });
    double *out = partial + (c * splits + s) * BRG_CUDA_BN_BACKWARD_SUMS;
    sxc = block_sum(sxc, sh);
    sxc2 = block_sum(sxc2, sh);
    sdy = block_sum(sdy, sh);
    sdyxc = block_sum(sdyxc, sh);
    if (threadIdx.x == 0) {
        out[0] = sxc;
        out[1] = sxc2;
        out[2] = sdy;
        out[3] = sdyxc;
    }
}

// Per channel: dgamma, dbeta and the coefficients of dx
// (BRG_CUDA_BN_BACKWARD_COEFS doubles: shift, mean_lo, invstd, k, mean_dy,
// mean_dy_xhat).
__global__ static void bn_backward_finish_kernel(const double *partial, int splits, const float *gamma,
                                                 const float *saved_mean, float *dgamma, float *dbeta, double *coef,
                                                 int64_t channels, int64_t m, double eps, int acc)
{
    FOR_EACH(c, channels)
    {
        double sxc = 0.0, sxc2 = 0.0, sdy = 0.0, sdyxc = 0.0;
        for (int s = 0; s < splits; s++) {
            const double *q = partial + (c * splits + s) * BRG_CUDA_BN_BACKWARD_SUMS;
            sxc += q[0];
            sxc2 += q[1];
            sdy += q[2];
            sdyxc += q[3];
        }
        const double dm = (double)m;
        const double mean_lo = sxc / dm;
        const double var = sxc2 / dm - mean_lo * mean_lo;
        const double invstd = 1.0 / sqrt((var > 0.0 ? var : 0.0) + eps);
        const double sum_dy_xhat = (sdyxc - mean_lo * sdy) * invstd;
        if (dgamma) dgamma[c] = (float)(acc ? dgamma[c] + sum_dy_xhat : sum_dy_xhat);
        if (dbeta) dbeta[c] = (float)(acc ? dbeta[c] + sdy : sdy);
        double *k = coef + c * BRG_CUDA_BN_BACKWARD_COEFS;
        k[0] = saved_mean[c];
        k[1] = mean_lo;
        k[2] = invstd;
        k[3] = (gamma ? gamma[c] : 1.0) * invstd;
        k[4] = sdy / dm;
        k[5] = sum_dy_xhat / dm;
    }
}

// dx may alias dy: each element is read before it is written, by one thread.
__global__ static void bn_backward_apply_kernel(const float *x, const float *dy, float *dx, const double *coef,
                                                int64_t channels, int64_t plane, int acc)
{
    const int64_t r = blockIdx.x;
    const double *k = coef + (r % channels) * BRG_CUDA_BN_BACKWARD_COEFS;
    const double shift = k[0], mean_lo = k[1], invstd = k[2], scale = k[3], mean_dy = k[4], mean_dy_xhat = k[5];
    const float *xr = x + r * plane, *dyr = dy + r * plane;
    float *dxr = dx + r * plane;
    FOR_ROW_TURN(p, plane)
    {
        backward_turn(xr, dyr, dxr, p, stride_, plane, acc, [&](float xv, float g) {
            const double xhat = (((double)xv - shift) - mean_lo) * invstd;
            return (float)(scale * (g - mean_dy - xhat * mean_dy_xhat));
        });
    }
}

// Synchronized BatchNorm's pieces (brigade/ops.h): a replica's statistics,
// its backward sums, and dx from every replica's sums.
__global__ static void bn_stats_kernel(const float *x, float *mean_out, float *var_out, float *lo_out,
                                       int64_t batch, int64_t channels, int64_t plane)
{
    __shared__ double sh[REDUCE_THREADS];
    const int64_t c = blockIdx.x, m = batch * plane;
    double s = 0.0;
    FOR_CHANNEL(at, c, channels, plane, batch) s += x[at];
    const double mean = m > 0 ? block_sum(s, sh) / (double)m : 0.0;
    double ssd = 0.0;
    FOR_CHANNEL(at, c, channels, plane, batch)
    {
        double d = (double)x[at] - mean;
        ssd += d * d;
    }
    ssd = block_sum(ssd, sh);
    if (threadIdx.x == 0) {
        mean_out[c] = (float)mean;
        if (lo_out) lo_out[c] = (float)(mean - (double)mean_out[c]);
        var_out[c] = (float)(m > 0 ? ssd / (double)m : 0.0);
    }
}

__global__ static void bn_backward_reduce_kernel(const float *x, const float *dy, const float *mean,
                                                 const float *invstd, const float *mean_lo, float *sum_dy,
                                                 float *sum_dy_xhat,
                                                 float *dgamma, float *dbeta, int64_t batch, int64_t channels,
                                                 int64_t plane, int acc)
{
    __shared__ double sh[REDUCE_THREADS];
    const int64_t c = blockIdx.x;
    const float mu = mean[c];
    double sdy = 0.0, sdyxc = 0.0;
    FOR_CHANNEL(at, c, channels, plane, batch)
    {
        double d = dy[at];
        sdy += d;
        sdyxc += d * ((double)x[at] - mu);
    }
    sdy = block_sum(sdy, sh);
    const double lo = mean_lo ? mean_lo[c] : 0.0;
    const double sdyx = (block_sum(sdyxc, sh) - lo * sdy) * (double)invstd[c];
    if (threadIdx.x == 0) {
        sum_dy[c] = (float)sdy;
        sum_dy_xhat[c] = (float)sdyx;
        if (dgamma) dgamma[c] = (float)(acc ? dgamma[c] + sdyx : sdyx);
        if (dbeta) dbeta[c] = (float)(acc ? dbeta[c] + sdy : sdy);
    }
}

__global__ static void bn_backward_elemt_kernel(const float *x, const float *dy, const float *gamma,
                                                const float *mean, const float *invstd, const float *sum_dy,
                                                const float *sum_dy_xhat, const float *mean_lo, float *dx,
                                                int64_t batch, int64_t channels, int64_t plane, double count, int acc)
{
    const int64_t c = blockIdx.x;
    const double inv = invstd[c], k = (gamma ? gamma[c] : 1.0) * inv;
    const double mean_dy = sum_dy[c] / count, mean_dy_xhat = sum_dy_xhat[c] / count;
    const float mu = mean[c];
    const double lo = mean_lo ? mean_lo[c] : 0.0;
    FOR_CHANNEL(at, c, channels, plane, batch)
    {
        double xhat = (((double)x[at] - mu) - lo) * inv;
        float g = (float)(k * (dy[at] - mean_dy - xhat * mean_dy_xhat));
        dx[at] = acc ? dx[at] + g : g;
    }
}

// ---------------------------------------------------------------- pools
// One thread per element of a plane (grid x), the planes along grid y; the
// arithmetic is pool-window.h's, in int inside a plane, shared with the
// host so that tests check it on any machine. Its geometry is copied out of
// the parameter space first, so that the helpers' pointer to it stays in
// registers.

#define POOL_MAX_PLANE_BLOCKS 65535 // grid y's limit; more planes loop

static dim3 pool_grid(int64_t planes, int elements, unsigned threads)
{
    return dim3((unsigned)((elements + threads - 1) / threads),
                (unsigned)(planes < POOL_MAX_PLANE_BLOCKS ? planes : POOL_MAX_PLANE_BLOCKS));
}

// Small planes (8x8 in Inception's last blocks) get fewer threads a block.
static unsigned pool_threads(int elements)
{
    return elements >= THREADS ? THREADS : (unsigned)((elements + 31) / 32 * 32);
}

__global__ static void pool_forward_kernel(brg_cuda_pool_geom geom, const float *x, float *y, int is_max)
{
    const brg_cuda_pool_geom g = geom;
    const int pq = g.p * g.q, e = blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= pq) return;
    const int oh = e / g.q, ow = e - oh * g.q;
    for (int64_t pl = blockIdx.y; pl < g.planes; pl += gridDim.y)
        y[pl * pq + e] = brg_pool_forward_px(&g, x + pl * g.h * g.w, oh, ow, is_max);
}

// Gathering from the windows that cover the element; the max pool looks
// for a window's argmax only where the element is the window's maximum y.
__global__ static void pool_backward_kernel(brg_cuda_pool_geom geom, const float *x, const float *y, const float *dy,
                                            float *dx, int is_max, int acc)
{
    const brg_cuda_pool_geom g = geom;
    const int hw = g.h * g.w, pq = g.p * g.q, e = blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= hw) return;
    const int ih = e / g.w, iw = e - ih * g.w;
    for (int64_t pl = blockIdx.y; pl < g.planes; pl += gridDim.y) {
        float sum = brg_pool_backward_px(&g, is_max ? x + pl * hw : NULL, y ? y + pl * pq : NULL, dy + pl * pq, ih,
                                         iw, is_max);
        dx[pl * hw + e] = acc ? dx[pl * hw + e] + sum : sum;
    }
}

// The backward by tiles (pool-window.h): a block of th x tw threads takes
// a tile of th x tw input elements; its windows' table (each max window's
// argmax, each average window's share of its gradient) is filled once in
// shared memory, then every element gathers from it.
__global__ static void pool_backward_tiled_kernel(brg_cuda_pool_geom geom, int th, int tw, const float *x,
                                                  const float *dy, float *dx, int is_max, int acc)
{
    extern __shared__ int pool_table[]; // int argmaxes or float shares
    const brg_cuda_pool_geom g = geom;
    const int tiles_w = (g.w + tw - 1) / tw;
    const int r0 = (int)blockIdx.x / tiles_w * th, c0 = (int)blockIdx.x % tiles_w * tw;
    const brg_pool_tile t = brg_pool_tile_of(&g, r0, c0, th, tw);
    const int count = t.wh * t.ww;
    const int ih = r0 + (int)threadIdx.x / tw, iw = c0 + (int)threadIdx.x % tw;
    const int64_t hw = (int64_t)g.h * g.w, pq = (int64_t)g.p * g.q;
    int *argmax = is_max ? pool_table : NULL;
    float *share = is_max ? NULL : (float *)pool_table;
    for (int64_t pl = blockIdx.y; pl < g.planes; pl += gridDim.y) {
        const float *dyp = dy + pl * pq;
        for (int k = (int)threadIdx.x; k < count; k += (int)blockDim.x) {
            if (is_max) argmax[k] = brg_pool_tile_argmax(&g, &t, x + pl * hw, k);
            else share[k] = brg_pool_tile_share(&g, &t, dyp, k);
        }
        __syncthreads();
        if (ih < g.h && iw < g.w) {
            const float sum = brg_pool_tile_gather(&g, &t, argmax, share, dyp, ih, iw);
            float *d = dx + pl * hw + (int64_t)ih * g.w + iw;
            *d = acc ? *d + sum : sum;
        }
        __syncthreads(); // the table is filled again for the next plane
    }
}

#define POOL_TILE_TABLE_BYTES (32 << 10) // larger windows take the per-element kernel

// A tile 32 columns wide (a warp's loads along a row), 16 or 8 for narrower
// planes, with rows up to 256 threads, no more than the plane has.
static void pool_tile_shape(const brg_cuda_pool_geom *g, int *th, int *tw)
{
    int w = 32, h;
    while (w > 8 && w / 2 >= g->w) w /= 2;
    h = THREADS / w;
    while (h > 1 && h / 2 >= g->h) h /= 2;
    *th = h;
    *tw = w;
}

static cudaError_t pool_forward(cudaStream_t s, const brg_cuda_pool_geom *g, const float *x, float *y, int is_max)
{
    const int pq = g->p * g->q;
    if (g->planes <= 0 || pq <= 0) return cudaSuccess;
    const unsigned threads = pool_threads(pq);
    pool_forward_kernel<<<pool_grid(g->planes, pq, threads), threads, 0, s>>>(*g, x, y, is_max);
    return cudaGetLastError();
}

static cudaError_t pool_backward(cudaStream_t s, const brg_cuda_pool_geom *g, const float *x, const float *y,
                                 const float *dy, float *dx, int is_max, int acc)
{
    const int hw = g->h * g->w;
    if (g->planes <= 0 || hw <= 0) return cudaSuccess;
    int th, tw;
    pool_tile_shape(g, &th, &tw);
    const int64_t table = brg_pool_tile_most(g, th, tw) * (int64_t)sizeof(int);
    if (table <= POOL_TILE_TABLE_BYTES) {
        const int tiles = ((g->h + th - 1) / th) * ((g->w + tw - 1) / tw);
        const dim3 grid = pool_grid(g->planes, tiles, 1);
        pool_backward_tiled_kernel<<<grid, (unsigned)(th * tw), (size_t)table, s>>>(*g, th, tw, x, dy, dx, is_max,
                                                                                   acc);
        return cudaGetLastError();
    }
    const unsigned threads = pool_threads(hw);
    pool_backward_kernel<<<pool_grid(g->planes, hw, threads), threads, 0, s>>>(*g, x, y, dy, dx, is_max, acc);
    return cudaGetLastError();
}

// One thread per plane: global pools see small maps (7x7 to 14x14).
__global__ static void global_avgpool_forward_kernel(const float *x, float *y, int64_t planes, int64_t hw)
{
    FOR_EACH(pl, planes)
    {
        double s = 0.0;
        for (int64_t i = 0; i < hw; i++) s += x[pl * hw + i];
        y[pl] = (float)(s / (double)hw);
    }
}

__global__ static void global_avgpool_backward_kernel(const float *dy, float *dx, int64_t planes, int64_t hw, int acc)
{
    FOR_EACH(i, planes * hw)
    {
        float g = (float)((double)dy[i / hw] / (double)hw);
        dx[i] = acc ? dx[i] + g : g;
    }
}

// ---------------------------------------------------------------- upsample

__global__ static void upsample_forward_kernel(const float *x, float *y, int64_t planes, int64_t h, int64_t w, int f)
{
    const int64_t wf = w * f, hf = h * f;
    FOR_EACH(i, planes * hf * wf)
    {
        int64_t pl = i / (hf * wf), oi = (i / wf) % hf, oj = i % wf;
        y[i] = x[pl * h * w + (oi / f) * w + oj / f];
    }
}

__global__ static void upsample_backward_kernel(const float *dy, float *dx, int64_t planes, int64_t h, int64_t w,
                                                int f, int acc)
{
    const int64_t wf = w * f;
    FOR_EACH(i, planes * h * w)
    {
        int64_t pl = i / (h * w), ii = (i / w) % h, jj = i % w;
        const float *gp = dy + pl * h * w * f * f;
        float s = 0.0f;
        for (int r = 0; r < f; r++)
            for (int k = 0; k < f; k++) s += gp[(ii * f + r) * wf + jj * f + k];
        dx[i] = acc ? dx[i] + s : s;
    }
}

// ---------------------------------------------------------------- loss

__device__ static void report_label(brg_cuda_flags *flags, int kind, int64_t row, int label, int64_t k, int64_t px,
                                    int ignore)
{
    if (atomicCAS(&flags->bad, 0, 1) == 0) {
        flags->kind = kind;
        flags->row = (int)row;
        flags->label = label;
        flags->classes = (int)k;
        flags->pixels = (int)px;
        flags->ignore = ignore;
    }
}

// One block per row: probs = softmax(z), row_loss = max + log sum exp(z -
// max) - z[label] in double. A bad label is reported and its row skipped
// (the whole block returns together, before any barrier).
__device__ static bool xent_ignored(int label, int ignore, int64_t k)
{
    return label == ignore && (ignore < 0 || ignore >= k);
}

__global__ static void xent_rows_kernel(const float *logits, const int32_t *labels, float *probs, int64_t k,
                                        int ignore, double *row_loss, brg_cuda_flags *flags, int kind)
{
    __shared__ double sh[REDUCE_THREADS];
    __shared__ float shf[REDUCE_THREADS];
    const int64_t r = blockIdx.x;
    const int label = labels[r];
    const bool skip = xent_ignored(label, ignore, k);
    if (!skip && (label < 0 || label >= k)) {
        if (threadIdx.x == 0) {
            report_label(flags, kind, r, label, k, 1, ignore);
            row_loss[r] = 0.0;
        }
        return;
    }
    const float *z = logits + r * k;
    float *pr = probs + r * k;
    float zmax = z[0];
    for (int64_t j = threadIdx.x; j < k; j += REDUCE_THREADS) zmax = z[j] > zmax ? z[j] : zmax;
    zmax = block_max(zmax, shf);
    double s = 0.0;
    for (int64_t j = threadIdx.x; j < k; j += REDUCE_THREADS) {
        pr[j] = expf(z[j] - zmax);
        s += pr[j];
    }
    s = block_sum(s, sh);
    const float inv = (float)(1.0 / s);
    for (int64_t j = threadIdx.x; j < k; j += REDUCE_THREADS) pr[j] *= inv; // this thread's own pr[j]
    if (threadIdx.x == 0) row_loss[r] = skip ? 0.0 : (double)zmax + log(s) - (double)z[label];
}

// One block: loss = the row losses' sum over the counted rows (labels not
// ignored), 0 when none counts.
__global__ static void xent_mean_kernel(const double *row_loss, const int32_t *labels, int64_t rows, int64_t k,
                                        int ignore, float *loss)
{
    __shared__ double sh[REDUCE_THREADS];
    double s = 0.0, c = 0.0;
    for (int64_t r = threadIdx.x; r < rows; r += REDUCE_THREADS) {
        s += row_loss[r];
        c += xent_ignored(labels[r], ignore, k) ? 0.0 : 1.0;
    }
    s = block_sum(s, sh);
    c = block_sum(c, sh);
    if (threadIdx.x == 0) loss[0] = c > 0.0 ? (float)(s / c) : 0.0f;
}

// Per pixel: logits [n, k, px], one thread per (sample, pixel) in a grid
// stride over rows = n * px, the k classes px apart. Each block leaves
// its sums of losses and of counted pixels in partial[block] and
// partial[gridDim.x + block] (fixed assignment and tree: deterministic).
__global__ static void xent_pixels_kernel(const float *logits, const int32_t *labels, float *probs, int64_t k,
                                          int64_t px, int64_t rows, int ignore, double *partial,
                                          brg_cuda_flags *flags, int kind)
{
    __shared__ double sh[REDUCE_THREADS];
    double s = 0.0, c = 0.0;
    for (int64_t r = (int64_t)blockIdx.x * REDUCE_THREADS + threadIdx.x; r < rows;
         r += (int64_t)gridDim.x * REDUCE_THREADS) {
        const int64_t base = r / px * k * px + r % px;
        const float *z = logits + base;
        float *pr = probs + base;
        const int label = labels[r];
        const bool skip = xent_ignored(label, ignore, k);
        if (!skip && (label < 0 || label >= k)) {
            report_label(flags, kind, r, label, k, px, ignore);
            continue;
        }
        float zmax = z[0];
        for (int64_t j = 1; j < k; j++) zmax = z[j * px] > zmax ? z[j * px] : zmax;
        double sum = 0.0;
        for (int64_t j = 0; j < k; j++) {
            pr[j * px] = expf(z[j * px] - zmax);
            sum += pr[j * px];
        }
        const float inv = (float)(1.0 / sum);
        for (int64_t j = 0; j < k; j++) pr[j * px] *= inv;
        if (skip) continue;
        s += (double)zmax + log(sum) - (double)z[label * px];
        c += 1.0;
    }
    s = block_sum(s, sh);
    c = block_sum(c, sh);
    if (threadIdx.x == 0) {
        partial[blockIdx.x] = s;
        partial[gridDim.x + blockIdx.x] = c;
    }
}

// One block: loss = sum of the partial losses / sum of the partial counts.
__global__ static void xent_partials_kernel(const double *partial, int blocks, float *loss)
{
    __shared__ double sh[REDUCE_THREADS];
    double s = 0.0, c = 0.0;
    for (int b = threadIdx.x; b < blocks; b += REDUCE_THREADS) {
        s += partial[b];
        c += partial[blocks + b];
    }
    s = block_sum(s, sh);
    c = block_sum(c, sh);
    if (threadIdx.x == 0) loss[0] = c > 0.0 ? (float)(s / c) : 0.0f;
}

// Element i of probs [n, k, px]: its row (sample, pixel) and class.
__global__ static void xent_backward_kernel(const float *probs, const int32_t *labels, float *dlogits, int64_t n,
                                            int64_t k, int64_t px, float scale, int acc, int ignore,
                                            brg_cuda_flags *flags, int kind)
{
    FOR_EACH(i, n * k * px)
    {
        const int64_t sample = i / (k * px), j = i / px % k, p = i % px, r = sample * px + p;
        const int label = labels[r];
        const bool skip = xent_ignored(label, ignore, k);
        if (!skip && (label < 0 || label >= k)) {
            if (j == 0) report_label(flags, kind, r, label, k, px, ignore);
            continue;
        }
        const float g = skip ? 0.0f : (probs[i] - (j == label ? 1.0f : 0.0f)) * scale;
        dlogits[i] = acc ? dlogits[i] + g : g;
    }
}

// ---------------------------------------------------------------- reductions to one int32

// Is candidate (bv, bi) a better argmax than (av, ai)? Index INT32_MAX is
// "none yet"; values of real candidates are never NaN. The larger value
// wins, and of equal values (+0 == -0 included) the smaller index: with NaN
// skipped, that is the first maximum of a strict-> scan (when the row does
// not start with NaN, which the caller handles).
__device__ static bool argmax_better(float bv, int bi, float av, int ai)
{
    if (bi == INT32_MAX) return false;
    if (ai == INT32_MAX) return true;
    if (bv > av) return true;
    if (av > bv) return false;
    return bi < ai;
}

// Rows in a grid-stride over blocks, one block per row at a time: the
// row's first maximum, compared with its label; one atomicAdd per block of
// its count (integers: the sum does not depend on the order).
// Per pixel (scores [n, k, px]): a thread per (sample, pixel), the first
// maximum over the k classes px apart (a scan from class 0 moving on a
// strictly greater value, as the CPU's), one atomicAdd per block.
__global__ static void count_correct_pixels_kernel(const float *scores, const int32_t *labels, int32_t *count,
                                                   int64_t rows, int64_t k, int64_t px)
{
    int mine = 0;
    FOR_EACH(r, rows)
    {
        const float *z = scores + r / px * k * px + r % px;
        int64_t best = 0;
        for (int64_t j = 1; j < k; j++)
            if (z[j * px] > z[best * px]) best = j;
        mine += best == labels[r];
    }
    __shared__ int total;
    if (threadIdx.x == 0) total = 0;
    __syncthreads();
    if (mine) atomicAdd(&total, mine);
    __syncthreads();
    if (threadIdx.x == 0 && total) atomicAdd((int *)count, total);
}

__global__ static void count_correct_kernel(const float *scores, const int32_t *labels, int32_t *count, int64_t rows,
                                            int k)
{
    __shared__ float shv[REDUCE_THREADS];
    __shared__ int shi[REDUCE_THREADS];
    int32_t mine = 0; // thread 0's tally for this block
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const float *z = scores + r * k;
        float bv = 0.0f;
        int bi = INT32_MAX;
        for (int j = threadIdx.x; j < k; j += REDUCE_THREADS) {
            const float v = z[j];
            if (v == v && (bi == INT32_MAX || v > bv)) { // a thread's own j increase: strict > keeps the first
                bv = v;
                bi = j;
            }
        }
        shv[threadIdx.x] = bv;
        shi[threadIdx.x] = bi;
        __syncthreads();
        for (int s = REDUCE_THREADS / 2; s > 0; s >>= 1) {
            if ((int)threadIdx.x < s &&
                argmax_better(shv[threadIdx.x + s], shi[threadIdx.x + s], shv[threadIdx.x], shi[threadIdx.x])) {
                shv[threadIdx.x] = shv[threadIdx.x + s];
                shi[threadIdx.x] = shi[threadIdx.x + s];
            }
            __syncthreads();
        }
        if (threadIdx.x == 0) {
            // A row starting with NaN: the scan never moves off class 0.
            const int best = z[0] != z[0] ? 0 : shi[0];
            mine += best == labels[r];
        }
        __syncthreads(); // shv, shi are reused by the next row
    }
    if (threadIdx.x == 0 && mine) atomicAdd((int *)count, (int)mine);
}

// Any non-finite element in the block's share of x: one barrier-wide OR,
// then at most one compare-and-swap per block, which sets the flag only
// while it is 0 (the first failing check in stream order keeps its tag).
__global__ static void check_finite_kernel(const float *x, int64_t n, int32_t *flag, int32_t tag)
{
    int bad = 0;
    FOR_EACH(i, n) bad |= !isfinite(x[i]);
    bad = __syncthreads_or(bad);
    if (bad && threadIdx.x == 0) atomicCAS((int *)flag, 0, (int)tag);
}

// ---------------------------------------------------------------- optimizers

__global__ static void sgd_kernel(const float *grad, float *w, float *vel, int64_t n, float lr, float mu, float wd)
{
    FOR_EACH(i, n)
    {
        float d = grad[i] + wd * w[i];
        if (vel) {
            vel[i] = mu * vel[i] + d;
            d = vel[i];
        }
        w[i] -= lr * d;
    }
}

__global__ static void adam_kernel(const float *grad, float *w, float *m, float *v, int64_t n, float b1, float b2,
                                   float eps, float wd, float step, float inv_sqrt_c2)
{
    FOR_EACH(i, n)
    {
        float d = grad[i] + wd * w[i];
        m[i] = b1 * m[i] + (1.0f - b1) * d;
        v[i] = b2 * v[i] + (1.0f - b2) * d * d;
        w[i] -= step * m[i] / (sqrtf(v[i]) * inv_sqrt_c2 + eps);
    }
}

// ---------------------------------------------------------------- launchers

extern "C" {

cudaError_t brg_cuda_relu_forward(cudaStream_t s, const float *x, float *y, int64_t n)
{
    LAUNCH_TURNS(relu_forward_kernel, n, s, x, y, n);
}

cudaError_t brg_cuda_relu_backward(cudaStream_t s, const float *y, const float *dy, float *dx, int64_t n, int acc)
{
    LAUNCH_TURNS(relu_backward_kernel, n, s, y, dy, dx, n, acc);
}

cudaError_t brg_cuda_dropout(cudaStream_t s, const float *src, float *dst, int64_t n, uint64_t seed, uint64_t offset,
                             float rate, float scale, int acc)
{
    LAUNCH_FLAT(dropout_kernel, n, s, src, dst, n, seed, offset, rate, scale, acc);
}

cudaError_t brg_cuda_add(cudaStream_t s, const float *a, const float *b, float *y, int64_t n)
{
    LAUNCH_TURNS(add_kernel, n, s, a, b, y, n);
}

cudaError_t brg_cuda_copy_or_add(cudaStream_t s, float *dst, const float *src, int64_t n, int acc)
{
    LAUNCH_FLAT(copy_blocks_kernel, n, s, dst, n, src, n, n, n, acc);
}

cudaError_t brg_cuda_copy_blocks(cudaStream_t s, float *dst, int64_t dst_stride, const float *src, int64_t src_stride,
                                 int64_t block, int64_t batch, int acc)
{
    if (block <= 0) return cudaSuccess;
    LAUNCH_FLAT(copy_blocks_kernel, block * batch, s, dst, dst_stride, src, src_stride, block, block * batch, acc);
}

cudaError_t brg_cuda_bias_add(cudaStream_t s, float *y, const float *bias, int64_t batch, int64_t channels,
                              int64_t plane)
{
    if (channels <= 0 || plane <= 0) return cudaSuccess;
    LAUNCH_FLAT(bias_add_kernel, batch * channels * plane, s, y, bias, channels, plane, batch * channels * plane);
}

cudaError_t brg_cuda_bias_grad(cudaStream_t s, const float *dy, float *db, int64_t batch, int64_t channels,
                               int64_t plane, int acc)
{
    if (channels <= 0) return cudaSuccess;
    bias_grad_kernel<<<(unsigned)channels, REDUCE_THREADS, 0, s>>>(dy, db, batch, channels, plane, acc);
    return cudaGetLastError();
}

cudaError_t brg_cuda_bn_forward_train(cudaStream_t s, const float *x, const float *gamma, const float *beta, float *y,
                                      float *running_mean, float *running_var, float *saved_mean,
                                      float *saved_invstd, int64_t batch, int64_t channels, int64_t plane,
                                      double eps, double momentum, int splits, void *workspace)
{
    const int64_t m = batch * plane;
    if (channels <= 0 || m <= 0) return cudaSuccess;
    // The layout cuda-ops.h gives, which brg_cuda_bn_workspace_bytes counts.
    static_assert(sizeof(float4) == BRG_CUDA_BN_FORWARD_COEFS * sizeof(float), "a channel's forward coefficients");
    double *partial = (double *)workspace;
    float4 *coef = (float4 *)(partial + channels * splits * BRG_CUDA_BN_FORWARD_SUMS);
    bn_stats_partial_kernel<<<dim3((unsigned)channels, (unsigned)splits), REDUCE_THREADS, 0, s>>>(x, partial, channels,
                                                                                                plane, m, splits);
    bn_train_finish_kernel<<<blocks_for(channels), THREADS, 0, s>>>(x, partial, splits, gamma, beta, running_mean,
                                                                   running_var, saved_mean, saved_invstd, coef,
                                                                   channels, plane, m, eps, momentum);
    dim3 grid, block;
    bn_rows_grid(batch * channels, plane, &grid, &block);
    bn_apply_kernel<<<grid, block, 0, s>>>(x, y, coef, channels, plane);
    return cudaGetLastError();
}

cudaError_t brg_cuda_bn_forward_infer(cudaStream_t s, const float *x, const float *gamma, const float *beta,
                                      const float *running_mean, const float *running_var, const float *mean_lo,
                                      float *y, int64_t batch, int64_t channels, int64_t plane, double eps)
{
    if (channels <= 0 || batch * plane <= 0) return cudaSuccess;
    dim3 grid, block;
    bn_rows_grid(batch * channels, plane, &grid, &block);
    bn_infer_kernel<<<grid, block, 0, s>>>(x, gamma, beta, running_mean, running_var, mean_lo, y, channels, plane,
                                           eps);
    return cudaGetLastError();
}

cudaError_t brg_cuda_bn_backward(cudaStream_t s, const float *x, const float *dy, const float *gamma,
                                 const float *saved_mean, float *dx, float *dgamma, float *dbeta, int64_t batch,
                                 int64_t channels, int64_t plane, double eps, int acc, int splits, void *workspace)
{
    const int64_t m = batch * plane;
    if (channels <= 0 || m <= 0) return cudaSuccess;
    double *partial = (double *)workspace;
    double *coef = partial + channels * splits * BRG_CUDA_BN_BACKWARD_SUMS;
    bn_backward_partial_kernel<<<dim3((unsigned)channels, (unsigned)splits), REDUCE_THREADS, 0, s>>>(
        x, dy, saved_mean, partial, channels, plane, m, splits);
    bn_backward_finish_kernel<<<blocks_for(channels), THREADS, 0, s>>>(partial, splits, gamma, saved_mean, dgamma,
                                                                      dbeta, coef, channels, m, eps, acc);
    dim3 grid, block;
    bn_rows_grid(batch * channels, plane, &grid, &block);
    bn_backward_apply_kernel<<<grid, block, 0, s>>>(x, dy, dx, coef, channels, plane, acc);
    return cudaGetLastError();
}

cudaError_t brg_cuda_bn_stats(cudaStream_t s, const float *x, float *mean, float *var, float *mean_lo,
                              int64_t batch, int64_t channels, int64_t plane)
{
    if (channels <= 0) return cudaSuccess;
    bn_stats_kernel<<<(unsigned)channels, REDUCE_THREADS, 0, s>>>(x, mean, var, mean_lo, batch, channels, plane);
    return cudaGetLastError();
}

cudaError_t brg_cuda_bn_backward_reduce(cudaStream_t s, const float *x, const float *dy, const float *mean,
                                        const float *invstd, const float *mean_lo, float *sum_dy,
                                        float *sum_dy_xhat, float *dgamma, float *dbeta, int64_t batch,
                                        int64_t channels, int64_t plane, int acc)
{
    if (channels <= 0) return cudaSuccess;
    bn_backward_reduce_kernel<<<(unsigned)channels, REDUCE_THREADS, 0, s>>>(
        x, dy, mean, invstd, mean_lo, sum_dy, sum_dy_xhat, dgamma, dbeta, batch, channels, plane, acc);
    return cudaGetLastError();
}

cudaError_t brg_cuda_bn_backward_elemt(cudaStream_t s, const float *x, const float *dy, const float *gamma,
                                       const float *mean, const float *invstd, const float *sum_dy,
                                       const float *sum_dy_xhat, const float *mean_lo, float *dx, int64_t batch,
                                       int64_t channels, int64_t plane, int64_t count, int acc)
{
    if (channels <= 0) return cudaSuccess;
    bn_backward_elemt_kernel<<<(unsigned)channels, REDUCE_THREADS, 0, s>>>(
        x, dy, gamma, mean, invstd, sum_dy, sum_dy_xhat, mean_lo, dx, batch, channels, plane, (double)count, acc);
    return cudaGetLastError();
}

// A 1x1 convolution's tensor packed for its GEMM (conv-gemm.h): a plane's
// pixels along x, the (sample, channel) planes along y, looping past grid
// y's limit as the pools do.
__global__ static void conv_pack_kernel(brg_conv_pack g, const float *src, float *dst)
{
    const int plane = g.p * g.q;
    const int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    if (i >= plane) return;
    for (int64_t pl = blockIdx.y; pl < g.n * g.ch; pl += gridDim.y) {
        const int64_t b = pl / g.ch, c = pl - b * g.ch;
        dst[brg_conv_pack_dst(&g, b, c, i)] = src[brg_conv_pack_src(&g, b, c, i)];
    }
}

cudaError_t brg_cuda_conv_pack(cudaStream_t s, const brg_conv_pack *g, const float *src, float *dst)
{
    const int64_t planes = g->n * g->ch;
    const int plane = g->p * g->q;
    if (planes <= 0 || plane <= 0) return cudaSuccess;
    const unsigned threads = pool_threads(plane);
    conv_pack_kernel<<<pool_grid(planes, plane, threads), threads, 0, s>>>(*g, src, dst);
    return cudaGetLastError();
}

cudaError_t brg_cuda_maxpool_forward(cudaStream_t s, const brg_cuda_pool_geom *g, const float *x, float *y)
{
    return pool_forward(s, g, x, y, 1);
}

cudaError_t brg_cuda_maxpool_backward(cudaStream_t s, const brg_cuda_pool_geom *g, const float *x, const float *y,
                                      const float *dy, float *dx, int acc)
{
    return pool_backward(s, g, x, y, dy, dx, 1, acc);
}

cudaError_t brg_cuda_avgpool_forward(cudaStream_t s, const brg_cuda_pool_geom *g, const float *x, float *y)
{
    return pool_forward(s, g, x, y, 0);
}

cudaError_t brg_cuda_avgpool_backward(cudaStream_t s, const brg_cuda_pool_geom *g, const float *dy, float *dx,
                                      int acc)
{
    return pool_backward(s, g, NULL, NULL, dy, dx, 0, acc);
}

cudaError_t brg_cuda_global_avgpool_forward(cudaStream_t s, const float *x, float *y, int64_t planes, int64_t hw)
{
    LAUNCH_FLAT(global_avgpool_forward_kernel, planes, s, x, y, planes, hw);
}

cudaError_t brg_cuda_global_avgpool_backward(cudaStream_t s, const float *dy, float *dx, int64_t planes, int64_t hw,
                                             int acc)
{
    LAUNCH_FLAT(global_avgpool_backward_kernel, planes * hw, s, dy, dx, planes, hw, acc);
}

cudaError_t brg_cuda_upsample_forward(cudaStream_t s, const float *x, float *y, int64_t planes, int64_t h, int64_t w,
                                      int f)
{
    LAUNCH_FLAT(upsample_forward_kernel, planes * h * w * f * f, s, x, y, planes, h, w, f);
}

cudaError_t brg_cuda_upsample_backward(cudaStream_t s, const float *dy, float *dx, int64_t planes, int64_t h,
                                       int64_t w, int f, int acc)
{
    LAUNCH_FLAT(upsample_backward_kernel, planes * h * w, s, dy, dx, planes, h, w, f, acc);
}

cudaError_t brg_cuda_xent_forward(cudaStream_t s, const float *logits, const int32_t *labels, float *loss,
                                  float *probs, int64_t n, int64_t k, int64_t px, int ignore, double *scratch,
                                  brg_cuda_flags *flags, int kind)
{
    const int64_t rows = n * px;
    if (rows <= 0) return cudaMemsetAsync(loss, 0, sizeof *loss, s); // the CPU's loss of an empty batch
    cudaError_t err;
    if (px == 1) {
        xent_rows_kernel<<<(unsigned)rows, REDUCE_THREADS, 0, s>>>(logits, labels, probs, k, ignore, scratch, flags,
                                                                    kind);
        if ((err = cudaGetLastError()) != cudaSuccess) return err;
        xent_mean_kernel<<<1, REDUCE_THREADS, 0, s>>>(scratch, labels, rows, k, ignore, loss);
        return cudaGetLastError();
    }
    const int blocks = brg_cuda_xent_pixel_blocks(rows);
    xent_pixels_kernel<<<(unsigned)blocks, REDUCE_THREADS, 0, s>>>(logits, labels, probs, k, px, rows, ignore, scratch,
                                                                    flags, kind);
    if ((err = cudaGetLastError()) != cudaSuccess) return err;
    xent_partials_kernel<<<1, REDUCE_THREADS, 0, s>>>(scratch, blocks, loss);
    return cudaGetLastError();
}

cudaError_t brg_cuda_xent_backward(cudaStream_t s, const float *probs, const int32_t *labels, float *dlogits,
                                   int64_t n, int64_t k, int64_t px, float scale, int acc, int ignore,
                                   brg_cuda_flags *flags, int kind)
{
    LAUNCH_FLAT(xent_backward_kernel, n * k * px, s, probs, labels, dlogits, n, k, px, scale, acc, ignore, flags,
                kind);
}

cudaError_t brg_cuda_count_correct(cudaStream_t s, const float *scores, const int32_t *labels, int32_t *count,
                                   int64_t n, int64_t k, int64_t px, int acc)
{
    if (!acc) {
        cudaError_t err = cudaMemsetAsync(count, 0, sizeof *count, s);
        if (err != cudaSuccess) return err;
    }
    const int64_t rows = n * px;
    if (rows <= 0 || k <= 0) return cudaSuccess;
    if (px > 1) {
        count_correct_pixels_kernel<<<blocks_for(rows), THREADS, 0, s>>>(scores, labels, count, rows, k, px);
        return cudaGetLastError();
    }
    const unsigned blocks = (unsigned)(rows > MAX_BLOCKS ? MAX_BLOCKS : rows);
    count_correct_kernel<<<blocks, REDUCE_THREADS, 0, s>>>(scores, labels, count, rows, (int)k);
    return cudaGetLastError();
}

cudaError_t brg_cuda_check_finite(cudaStream_t s, const float *x, int64_t n, int32_t *flag, int32_t tag)
{
    if (n <= 0) return cudaSuccess;
    // A reduction needs no more blocks than keep the GPU's memory busy;
    // the grid-stride loop covers the rest.
    const unsigned blocks = blocks_for(n) < FINITE_MAX_BLOCKS ? blocks_for(n) : FINITE_MAX_BLOCKS;
    check_finite_kernel<<<blocks, THREADS, 0, s>>>(x, n, flag, tag);
    return cudaGetLastError();
}

cudaError_t brg_cuda_sgd(cudaStream_t s, const float *grad, float *param, float *velocity, int64_t n, float lr,
                         float momentum, float weight_decay)
{
    // With momentum 0 the velocity is left untouched (ops.h).
    float *vel = momentum > 0.0f ? velocity : NULL;
    LAUNCH_FLAT(sgd_kernel, n, s, grad, param, vel, n, lr, momentum, weight_decay);
}

cudaError_t brg_cuda_adam(cudaStream_t s, const float *grad, float *param, float *m, float *v, int64_t n, float beta1,
                          float beta2, float eps, float weight_decay, float step, float inv_sqrt_c2)
{
    LAUNCH_FLAT(adam_kernel, n, s, grad, param, m, v, n, beta1, beta2, eps, weight_decay, step, inv_sqrt_c2);
}

} // extern "C"
