/* brigade command line: synthetic data ('brigade train --data synthetic',
 * 'brigade bench', bench/gpu/gpu_bench), made on demand from a seed and a
 * sample's index so that no data set needs to fit in memory. */
#include <stdint.h>

#include "cli-lib.h"

uint64_t brg_cli_mix64(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static float unit(uint64_t h) { return (float)((double)(h >> 40) / 16777216.0); } /* [0, 1) */

/* The label from the hash of the index; the pixels half a fixed random
 * pattern of the label, half noise, so that a model can learn something. */
void brg_cli_synth_sample(uint64_t seed, uint64_t index, int64_t sample, int classes, float *image, int32_t *label)
{
    const int32_t y = (int32_t)(brg_cli_mix64(seed ^ brg_cli_mix64(index)) % (uint64_t)classes);
    const uint64_t pattern = brg_cli_mix64(seed ^ 0x5041545445524eULL ^ brg_cli_mix64((uint64_t)y));
    const uint64_t noise = brg_cli_mix64(seed ^ 0x4e4f495345ULL ^ brg_cli_mix64(index));
    for (int64_t j = 0; j < sample; j++)
        image[j] = 0.5f * unit(brg_cli_mix64(pattern ^ (uint64_t)j)) + 0.5f * unit(brg_cli_mix64(noise + (uint64_t)j));
    *label = y;
}

void brg_cli_synth_batch(uint64_t seed, int64_t n, int64_t sample, int classes, int64_t pixels, float *images,
                         int32_t *labels)
{
    for (int64_t i = 0; i < n; i++) {
        int32_t *map = labels + i * pixels;
        brg_cli_synth_sample(seed, (uint64_t)i, sample, classes, images + i * sample, map);
        for (int64_t p = 1; p < pixels; p++) map[p] = map[0];
    }
}
