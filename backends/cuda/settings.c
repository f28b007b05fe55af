/* The settings CUDA devices take from the environment when they are made
 * (exec.c reads them into each device's state), public so that tools can
 * report what ran (gpu_bench, `brigade model profile`). Plain C, built in
 * every build, GPU or not. See docs/cuda.md. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <stdlib.h>
#include <string.h>

#include "base/internal.h"
#include "brigade/arena.h"
#include "brigade/device.h"
#include "cuda-device.h"
#include "cuda-ops.h"

/* Whether the environment variable name is set to value. */
static int env_is(const char *name, const char *value)
{
    const char *v = getenv(name);
    return v && strcmp(v, value) == 0;
}

int brg_cuda_tf32_enabled(void) { return env_is("BRG_CUDA_TF32", "1"); }

const char *brg_cuda_conv_algo(void) { return env_is("BRG_CUDA_CONV_ALGO", "measure") ? "measure" : "heuristic"; }

const char *brg_cuda_conv_api(void) { return env_is("BRG_CUDA_CONV_API", "graph") ? "graph" : "legacy"; }

int brg_cuda_conv_log_enabled(void) { return env_is("BRG_CUDA_CONV_LOG", "1"); }

int brg_cuda_conv_workspace_grows(void) { return env_is("BRG_CUDA_CONV_WORKSPACE_GROW", "1"); }

const char *brg_cuda_conv_1x1(void) { return env_is("BRG_CUDA_CONV_1X1", "gemm") ? "gemm" : "cudnn"; }

brg_status brg_cuda_conv_workspace(size_t *bytes)
{
    *bytes = BRG_CUDA_CONV_WORKSPACE_DEFAULT;
    const char *env = getenv("BRG_CUDA_CONV_WORKSPACE");
    if (!env || !*env) return BRG_OK;
    size_t parsed = 0;
    if (brg_parse_bytes(env, &parsed) != BRG_OK || parsed == 0)
        return brg_error(BRG_ERR_INVALID_ARGUMENT,
                         "BRG_CUDA_CONV_WORKSPACE=%s: expected a positive size, e.g. 256MiB (the default is 64MiB)",
                         env);
    *bytes = parsed;
    return BRG_OK;
}
