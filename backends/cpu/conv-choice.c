/* Which implementation runs the CPU convolutions (conv2d-onednn.c or
 * conv2d.c): chosen once per process from BRG_CPU_CONV, or by
 * brg_cpu_set_convolution (tests, benchmarks, programs); and the layout of
 * activations between layers, from BRG_CPU_LAYOUT or brg_cpu_set_layout. */
#include "config.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "brigade/device.h"
#include "cpu-kernels.h"

static int conv_impl = -1;
static int layout_blocked = -1;
static pthread_mutex_t impl_lock = PTHREAD_MUTEX_INITIALIZER;

#ifdef BRG_HAVE_ONEDNN
#define DEFAULT_IMPL BRG_CPU_CONV_ONEDNN
#else
#define DEFAULT_IMPL BRG_CPU_CONV_IM2COL
#endif

brg_cpu_conv_impl brg_cpu_conv_selected(void)
{
    pthread_mutex_lock(&impl_lock);
    if (conv_impl < 0) {
        const char *e = getenv("BRG_CPU_CONV");
        conv_impl = DEFAULT_IMPL;
        if (e && strcmp(e, "im2col") == 0) conv_impl = BRG_CPU_CONV_IM2COL;
    }
    const int impl = conv_impl;
    pthread_mutex_unlock(&impl_lock);
    return (brg_cpu_conv_impl)impl;
}

brg_status brg_cpu_conv_select(const char *name)
{
    int impl;
    if (strcmp(name, "im2col") == 0) impl = BRG_CPU_CONV_IM2COL;
    else if (strcmp(name, "onednn") == 0) {
#ifndef BRG_HAVE_ONEDNN
        return brg_error(BRG_ERR_UNSUPPORTED, "CPU convolution 'onednn': this build has no oneDNN (configure found "
                                              "no libdnnl-dev); use im2col");
#endif
        impl = BRG_CPU_CONV_ONEDNN;
    } else {
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "CPU convolution '%s': choose onednn or im2col", name);
    }
    pthread_mutex_lock(&impl_lock);
    conv_impl = impl;
    pthread_mutex_unlock(&impl_lock);
    return BRG_OK;
}

brg_status brg_cpu_set_convolution(const char *name)
{
    if (!name) return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_cpu_set_convolution: name is NULL");
    return brg_cpu_conv_select(name);
}

const char *brg_cpu_convolution(void) { return brg_cpu_conv_name(brg_cpu_conv_selected()); }

const char *brg_cpu_conv_name(brg_cpu_conv_impl impl)
{
    return impl == BRG_CPU_CONV_ONEDNN ? "onednn" : "im2col";
}


int brg_cpu_layout_selected_blocked(void)
{
    pthread_mutex_lock(&impl_lock);
    if (layout_blocked < 0) {
        const char *e = getenv("BRG_CPU_LAYOUT");
        layout_blocked = !(e && strcmp(e, "plain") == 0);
    }
    const int blocked = layout_blocked;
    pthread_mutex_unlock(&impl_lock);
    return blocked;
}

brg_status brg_cpu_set_layout(const char *name)
{
    if (!name) return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_cpu_set_layout: name is NULL");
    int blocked;
    if (strcmp(name, "plain") == 0) blocked = 0;
    else if (strcmp(name, "blocked") == 0) blocked = 1;
    else return brg_error(BRG_ERR_INVALID_ARGUMENT, "CPU layout '%s': choose blocked or plain", name);
    pthread_mutex_lock(&impl_lock);
    layout_blocked = blocked;
    pthread_mutex_unlock(&impl_lock);
    return BRG_OK;
}
