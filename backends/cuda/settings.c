/* The settings CUDA devices take from the environment when they are made
 * (exec.c reads them into each device's state), public so that tools can
 * report what ran (gpu_bench, `brigade model profile`). Plain C, built in
 * every build, GPU or not. See docs/cuda.md. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <stdlib.h>
#include <string.h>

#include "brigade/device.h"

int brg_cuda_tf32_enabled(void)
{
    const char *v = getenv("BRG_CUDA_TF32");
    return v && strcmp(v, "1") == 0;
}

const char *brg_cuda_conv_algo(void)
{
    const char *v = getenv("BRG_CUDA_CONV_ALGO");
    return v && strcmp(v, "measure") == 0 ? "measure" : "heuristic";
}
