/* Run a convolution on a capped CPU device, then show what the arena held
 * and what happens when the cap is too small. Uses the public API only.
 *
 *   examples/conv_on_capped_device
 */
#include <stdio.h>
#include <stdlib.h>

#include "brigade.h"

static int fail(const char *what, brg_status st)
{
    fprintf(stderr, "%s: %s: %s\n", what, brg_status_string(st), brg_last_error());
    return 1;
}

/* One 3x3 convolution, 16 -> 32 channels, on a batch of 8 35x35 images. */
static brg_status run_conv(brg_device *dev, float *checksum)
{
    const int64_t xs[4] = {8, 16, 35, 35}, ws[4] = {32, 16, 3, 3}, bs[1] = {32}, ys[4] = {8, 32, 35, 35};
    brg_tensor x = {0}, w = {0}, b = {0}, y = {0};
    brg_status st;
    if ((st = brg_tensor_alloc(dev, BRG_F32, 4, xs, "example / input", &x)) != BRG_OK ||
        (st = brg_tensor_alloc(dev, BRG_F32, 4, ws, "example / weights", &w)) != BRG_OK ||
        (st = brg_tensor_alloc(dev, BRG_F32, 1, bs, "example / bias", &b)) != BRG_OK ||
        (st = brg_tensor_alloc(dev, BRG_F32, 4, ys, "example / output", &y)) != BRG_OK)
        goto done;
    /* On the CPU backend device memory is host memory; on a GPU these
     * would be brg_device_copy_in calls. */
    for (int64_t i = 0; i < brg_tensor_numel(&x); i++) ((float *)x.data)[i] = (float)(i % 17) / 17.0f;
    for (int64_t i = 0; i < brg_tensor_numel(&w); i++) ((float *)w.data)[i] = (float)(i % 5) / 50.0f - 0.04f;
    for (int64_t i = 0; i < 32; i++) ((float *)b.data)[i] = 0.01f * (float)i;

    brg_op op = {.kind = BRG_OP_CONV2D_FORWARD, .n_in = 3, .n_out = 1};
    op.p.conv = (brg_conv2d_params){.stride_h = 1, .stride_w = 1, .pad_h = 1, .pad_w = 1};
    op.in[0] = &x;
    op.in[1] = &w;
    op.in[2] = &b;
    op.out[0] = &y;
    st = brg_device_run(dev, &op); /* takes its im2col workspace from the arena */
    if (st == BRG_OK) {
        double s = 0;
        for (int64_t i = 0; i < brg_tensor_numel(&y); i++) s += ((float *)y.data)[i];
        *checksum = (float)s;
    }
done:
    brg_tensor_free(&y);
    brg_tensor_free(&b);
    brg_tensor_free(&w);
    brg_tensor_free(&x);
    return st;
}

int main(void)
{
    brg_device *dev = NULL;
    brg_status st = brg_device_create_cpu((size_t)8 << 20, 0, &dev);
    if (st != BRG_OK) return fail("create device", st);
    float checksum = 0;
    st = run_conv(dev, &checksum);
    if (st != BRG_OK) {
        brg_device_destroy(dev);
        return fail("conv on an 8 MiB device", st);
    }
    char peak[32], cap[32];
    printf("conv on %s: checksum %.4f, peak %s of %s\n", brg_device_name(dev), checksum,
           brg_format_bytes(brg_device_peak(dev), peak, sizeof peak),
           brg_format_bytes(brg_device_capacity(dev), cap, sizeof cap));
    brg_device_destroy(dev);

    /* The same work on a 2 MiB device does not fit: the error says where. */
    st = brg_device_create_cpu((size_t)2 << 20, 1, &dev);
    if (st != BRG_OK) return fail("create device", st);
    st = run_conv(dev, &checksum);
    printf("on a 2 MiB device: %s\n  %s\n", brg_status_string(st), brg_last_error());
    brg_device_destroy(dev);
    return st == BRG_ERR_OUT_OF_MEMORY ? 0 : 1;
}
