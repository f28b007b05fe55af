/* The CPU calibration's per-layer times take each layer's layout
 * (plan/calibrate.c, model/layout-rule.h), without measuring anything:
 *
 * - the layout rule on fmnist-cnn: with a channel block of 8 its first
 *   block's activations are blocked, the second's (tied to the linear
 *   layer after them) and the model input plain; kept-plain tensors pull
 *   their whole class plain; block 0 leaves everything plain;
 * - brg_cpu_speed_profile with rates made up per kind and layout: each
 *   layer's time is its own layout's rate (conv1.pool blocked, conv2.pool
 *   plain; a convolution by its input: conv1 on the plain model input,
 *   conv2 on blocked conv1.pool), and with no block every layer takes the
 *   plain rates;
 * - on resnet18 at 3x64x64, the convolutions on 4x4 and 2x2 planes take
 *   the kernel taps' rates in either layout (base/conv-taps-rule.h), the
 *   1x1 ones there and those on 8x8 planes their layout's. */
#include "testutil.h"
#include "model/layout-rule.h"
#include "plan/plan-impl.h"

static int tensor_of(const brg_model *m, const char *layer)
{
    const int l = brg_model_find_layer(m, layer);
    return l < 0 ? -1 : brg_model_get_layer(m, l)->output;
}

static void test_layout_rule(const brg_model *m)
{
    const int nt = brg_model_tensor_count(m), L = brg_model_layer_count(m);
    int *layout = calloc((size_t)nt, sizeof *layout);
    unsigned char *keep = calloc((size_t)nt, 1);
    if (!layout || !keep) abort();
    CHECK_OK(brg_model_choose_layouts(m, 8, 0, L, NULL, layout));
    CHECK(layout[brg_model_input(m)] == 0);
    CHECK(layout[tensor_of(m, "conv1.conv")] == 8);
    CHECK(layout[tensor_of(m, "conv1.bn")] == 8);
    CHECK(layout[tensor_of(m, "conv1.pool")] == 8);
    CHECK(layout[tensor_of(m, "conv2.conv")] == 0); /* one class with conv2.pool, which fc1 reads plain */
    CHECK(layout[tensor_of(m, "conv2.pool")] == 0);
    CHECK(layout[tensor_of(m, "fc1")] == 0);
    /* Keeping conv1.relu plain keeps its class (conv1's output to its pool) plain. */
    keep[tensor_of(m, "conv1.relu")] = 1;
    CHECK_OK(brg_model_choose_layouts(m, 8, 0, L, keep, layout));
    CHECK(layout[tensor_of(m, "conv1.conv")] == 0);
    CHECK(layout[tensor_of(m, "conv1.pool")] == 0);
    CHECK_OK(brg_model_choose_layouts(m, 0, 0, L, NULL, layout));
    for (int t = 0; t < nt; t++) CHECK(layout[t] == 0);
    free(keep);
    free(layout);
}

/* Times per call only: kind k in layout lay takes `seconds` a part. */
static void set_rate(brg_cpu_speed *s, brg_layer_kind k, int lay, double seconds)
{
    for (int q = 0; q < 3; q++) s->rate[k][lay][q][BRG_CPU_SPEED_TERMS - 1] = seconds;
}

static void test_profile_layouts(const brg_model *m)
{
    brg_cpu_speed s;
    memset(&s, 0, sizeof s);
    s.block = 8;
    set_rate(&s, BRG_LAYER_MAXPOOL, BRG_CPU_SPEED_PLAIN, 1e-3);
    set_rate(&s, BRG_LAYER_MAXPOOL, BRG_CPU_SPEED_BLOCKED, 2e-3);
    set_rate(&s, BRG_LAYER_CONV2D, BRG_CPU_SPEED_PLAIN, 3e-3);
    set_rate(&s, BRG_LAYER_CONV2D, BRG_CPU_SPEED_BLOCKED, 4e-3);
    brg_profile *p = NULL;
    CHECK_OK(brg_cpu_speed_profile(m, 16, &s, &p));
    if (!p) return;
    const int pool1 = brg_model_find_layer(m, "conv1.pool"), pool2 = brg_model_find_layer(m, "conv2.pool");
    const int conv1 = brg_model_find_layer(m, "conv1.conv"), conv2 = brg_model_find_layer(m, "conv2.conv");
    CHECK_MSG(p->fwd[pool1] == 2e-3 && p->bwd_in[pool1] == 2e-3, "conv1.pool %g %g", p->fwd[pool1], p->bwd_in[pool1]);
    CHECK_MSG(p->fwd[pool2] == 1e-3 && p->bwd_in[pool2] == 1e-3, "conv2.pool %g %g", p->fwd[pool2], p->bwd_in[pool2]);
    CHECK_MSG(p->fwd[conv1] == 3e-3 && p->bwd_w[conv1] == 3e-3, "conv1 %g %g", p->fwd[conv1], p->bwd_w[conv1]);
    CHECK(p->bwd_in[conv1] == 0.0); /* the model input has no gradient: no FLOPs, no time */
    CHECK_MSG(p->fwd[conv2] == 4e-3 && p->bwd_in[conv2] == 4e-3 && p->bwd_w[conv2] == 4e-3, "conv2 %g", p->fwd[conv2]);
    CHECK(p->fwd[brg_model_find_layer(m, "conv1.bn")] == 0.0); /* no rates given for BatchNorm */
    brg_profile_destroy(p);
    /* No block: every layer plain. */
    s.block = 0;
    CHECK_OK(brg_cpu_speed_profile(m, 16, &s, &p));
    if (!p) return;
    CHECK(p->fwd[pool1] == 1e-3 && p->fwd[pool2] == 1e-3);
    CHECK(p->fwd[conv1] == 3e-3 && p->fwd[conv2] == 3e-3);
    brg_profile_destroy(p);
}

static void test_profile_taps(void)
{
    const brg_zoo_options o = {3, 64, 64, 0, 0.0};
    brg_model *m = NULL;
    CHECK_OK(brg_zoo_build("resnet18", &o, &m));
    if (!m) return;
    brg_cpu_speed s;
    memset(&s, 0, sizeof s);
    set_rate(&s, BRG_LAYER_CONV2D, BRG_CPU_SPEED_PLAIN, 3e-3);
    set_rate(&s, BRG_LAYER_CONV2D, BRG_CPU_SPEED_BLOCKED, 4e-3);
    set_rate(&s, BRG_LAYER_CONV2D, BRG_CPU_SPEED_TAPS, 5e-3);
    static const struct {
        const char *layer;
        double blocked, plain; /* its time with a block of 8, and with none */
    } want[] = {
        {"layer2.1.conv1", 4e-3, 3e-3},        /* 8x8 */
        {"layer3.1.conv2", 5e-3, 5e-3},        /* 4x4 */
        {"layer4.0.conv1", 5e-3, 5e-3},        /* stride 2 into 2x2 */
        {"layer4.1.conv2", 5e-3, 5e-3},        /* 2x2 */
        {"layer4.0.downsample.0", 4e-3, 3e-3}, /* 1x1 into 2x2 */
    };
    for (int block = 8; block >= 0; block -= 8) {
        s.block = block;
        brg_profile *p = NULL;
        CHECK_OK(brg_cpu_speed_profile(m, 8, &s, &p));
        for (size_t i = 0; p && i < sizeof want / sizeof want[0]; i++) {
            const int l = brg_model_find_layer(m, want[i].layer);
            const double t = block ? want[i].blocked : want[i].plain;
            CHECK_MSG(l >= 0 && p->fwd[l] == t && p->bwd_w[l] == t, "%s with block %d: %g, not %g", want[i].layer,
                      block, l >= 0 ? p->fwd[l] : -1.0, t);
        }
        brg_profile_destroy(p);
    }
    brg_model_destroy(m);
}

int main(void)
{
    brg_model *m = NULL;
    CHECK_OK(brg_zoo_build("fmnist-cnn", NULL, &m));
    if (!m) TEST_EXIT();
    test_layout_rule(m);
    test_profile_layouts(m);
    brg_model_destroy(m);
    test_profile_taps();
    TEST_EXIT();
}
