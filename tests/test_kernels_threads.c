/* The CPU kernels that split their work over threads (BatchNorm, pooling,
 * ReLU, dropout, upsampling, concatenation, addition and the optimizer
 * updates: backends/cpu,
 * brg_cpu_kernel_threads) give the same bits on one
 * thread and on several: each op runs twice on the same inputs, once with
 * the device's share cut to one thread, and the outputs are compared with
 * memcmp. Skips (77) where the kernels would not split: a build without
 * OpenMP or oneDNN, im2col chosen, or one core. */
#include <stdint.h>

#include "testutil.h"
#include "backends/cpu/cpu-kernels.h"

#define N 4
#define C 16
#define H 40
#define W 40
#define MAX_OUT 5

static brg_device *dev;
static int fails, runs;

/* A device tensor of shape, filled from a fixed stream (values in [-2, 2),
 * none exactly 0 so that ReLU's cases are all clear). */
static brg_tensor make(int ndim, const int64_t *shape, uint64_t seed)
{
    brg_tensor t;
    memset(&t, 0, sizeof t);
    if (brg_tensor_alloc(dev, BRG_F32, ndim, shape, "test", &t) != BRG_OK) return t;
    const int64_t n = brg_tensor_numel(&t);
    float *host = malloc((size_t)n * sizeof *host);
    uint64_t z = seed * 0x9e3779b97f4a7c15ull + 1;
    for (int64_t i = 0; host && i < n; i++) {
        z ^= z << 13;
        z ^= z >> 7;
        z ^= z << 17;
        host[i] = (float)((double)(z >> 40) / (double)(1ull << 24)) * 4.0f - 2.0f + 1e-3f;
    }
    if (host) brg_device_copy_in(dev, t.data, host, (size_t)n * sizeof *host);
    free(host);
    return t;
}

/* Run op twice, on all of the share's threads and on one, with every
 * output (and in-place input) put back to its starting bytes before each
 * run; the outputs must be equal to the bit. */
static void same_bits(const char *what, brg_op *op)
{
    runs++;
    void *start[MAX_OUT], *got[MAX_OUT];
    size_t bytes[MAX_OUT];
    for (int i = 0; i < op->n_out; i++) {
        bytes[i] = brg_tensor_bytes(op->out[i]);
        start[i] = malloc(bytes[i]);
        got[i] = malloc(bytes[i]);
        memcpy(start[i], op->out[i]->data, bytes[i]);
    }
    CHECK(brg_cpu_kernel_threads((int64_t)N * C * H * W) > 1);
    CHECK_OK(brg_device_run(dev, op));
    for (int i = 0; i < op->n_out; i++) {
        memcpy(got[i], op->out[i]->data, bytes[i]);
        memcpy(op->out[i]->data, start[i], bytes[i]);
    }
    const int saved = brg_cpu_threads_share(brg_cpu_all_threads()); /* one thread each */
    CHECK(brg_cpu_kernel_threads((int64_t)N * C * H * W) == 1);
    CHECK_OK(brg_device_run(dev, op));
    brg_cpu_threads_restore(saved);
    for (int i = 0; i < op->n_out; i++) {
        if (memcmp(got[i], op->out[i]->data, bytes[i]) != 0) {
            printf("FAIL: %s: output %d differs between one thread and several\n", what, i);
            fails++;
        }
        free(start[i]);
        free(got[i]);
    }
}

int main(void)
{
    if (!getenv("OPENBLAS_NUM_THREADS") && !getenv("OMP_NUM_THREADS"))
        CHECK_OK(brg_device_create_cpu((size_t)256 << 20, 0, &dev));
    if (!dev || brg_cpu_kernel_threads((int64_t)N * C * H * W) < 2) {
        printf("SKIP: the CPU kernels run on one thread here (no OpenMP or oneDNN in this build, im2col, one "
               "core, or a thread count fixed in the environment)\n");
        brg_device_destroy(dev);
        return 77;
    }
    const int64_t x4[4] = {N, C, H, W}, c1[1] = {C}, p4[4] = {N, C, H / 2, W / 2}, g4[4] = {N, C, 1, 1};
    brg_tensor x = make(4, x4, 1), dy = make(4, x4, 2), y = make(4, x4, 3), dx = make(4, x4, 4);
    brg_tensor gamma = make(1, c1, 5), beta = make(1, c1, 6), rm = make(1, c1, 7), rv = make(1, c1, 8);
    brg_tensor sm = make(1, c1, 9), si = make(1, c1, 10), dg = make(1, c1, 11), db = make(1, c1, 12);
    brg_tensor py = make(4, p4, 13), pdy = make(4, p4, 14), gy = make(4, g4, 15), gdy = make(4, g4, 16);
    const brg_pool_params pool2 = {2, 2, 2, 2, 0, 0, 0};
    const brg_batchnorm_params bn = {.epsilon = 1e-5f, .momentum = 0.1f};
    brg_op op = {.kind = BRG_OP_RELU_FORWARD, .n_in = 1, .n_out = 1, .in = {&x}, .out = {&y}};
    same_bits("relu forward", &op);
    op.in[0] = op.out[0] = &y; /* in place */
    same_bits("relu forward in place", &op);

    op = (brg_op){.kind = BRG_OP_RELU_BACKWARD, .n_in = 2, .n_out = 1, .in = {&y, &dy}, .out = {&dx}};
    same_bits("relu backward", &op);
    op.accumulate = 1;
    same_bits("relu backward, accumulating", &op);

    op = (brg_op){.kind = BRG_OP_BATCHNORM_FORWARD_TRAIN, .p.bn = bn, .n_in = 3, .n_out = 5,
                  .in = {&x, &gamma, &beta}, .out = {&y, &rm, &rv, &sm, &si}};
    same_bits("batchnorm training forward", &op);

    op = (brg_op){.kind = BRG_OP_BATCHNORM_BACKWARD, .p.bn = bn, .n_in = 5, .n_out = 3,
                  .in = {&x, &dy, &gamma, &sm, &si}, .out = {&dx, &dg, &db}};
    same_bits("batchnorm backward", &op);

    op = (brg_op){.kind = BRG_OP_MAXPOOL_FORWARD, .p.pool = pool2, .n_in = 1, .n_out = 1, .in = {&x}, .out = {&py}};
    same_bits("maxpool forward", &op);
    op = (brg_op){.kind = BRG_OP_MAXPOOL_BACKWARD, .p.pool = pool2, .n_in = 3, .n_out = 1, .in = {&x, &py, &pdy},
                  .out = {&dx}};
    same_bits("maxpool backward", &op);

    op = (brg_op){.kind = BRG_OP_AVGPOOL_FORWARD, .p.pool = pool2, .n_in = 1, .n_out = 1, .in = {&x}, .out = {&py}};
    same_bits("avgpool forward", &op);
    op = (brg_op){.kind = BRG_OP_AVGPOOL_BACKWARD, .p.pool = pool2, .n_in = 1, .n_out = 1, .in = {&pdy}, .out = {&dx}};
    same_bits("avgpool backward", &op);

    op = (brg_op){.kind = BRG_OP_GLOBAL_AVGPOOL_FORWARD, .n_in = 1, .n_out = 1, .in = {&x}, .out = {&gy}};
    same_bits("global avgpool forward", &op);
    op = (brg_op){.kind = BRG_OP_GLOBAL_AVGPOOL_BACKWARD, .n_in = 1, .n_out = 1, .in = {&gdy}, .out = {&dx}};
    same_bits("global avgpool backward", &op);

    /* Concatenation of two halves of x's channels, in both directions. */
    const int64_t h4[4] = {N, C / 2, H, W};
    brg_tensor xa = make(4, h4, 17), xb = make(4, h4, 18), dxa = make(4, h4, 19), dxb = make(4, h4, 20);
    op = (brg_op){.kind = BRG_OP_CONCAT_FORWARD, .n_in = 2, .n_out = 1, .in = {&xa, &xb}, .out = {&y}};
    same_bits("concat forward", &op);
    op = (brg_op){.kind = BRG_OP_CONCAT_BACKWARD, .n_in = 1, .n_out = 2, .in = {&dy}, .out = {&dxa, &dxb}};
    same_bits("concat backward", &op);
    op.accumulate = 1;
    same_bits("concat backward, accumulating", &op);

    op = (brg_op){.kind = BRG_OP_ADD_FORWARD, .n_in = 2, .n_out = 1, .in = {&x, &dy}, .out = {&y}};
    same_bits("add forward", &op);
    op = (brg_op){.kind = BRG_OP_ADD_BACKWARD, .n_in = 1, .n_out = 2, .in = {&dy}, .out = {&dx, &y}};
    same_bits("add backward", &op);
    op.accumulate = 1;
    same_bits("add backward, accumulating", &op);

    /* Dropout (its mask from the element's index: each part must start
     * its stream where a single pass would be) and nearest upsampling. */
    op = (brg_op){.kind = BRG_OP_DROPOUT_FORWARD, .p.dropout = {.rate = 0.3f, .seed = 7, .offset = 1000}, .n_in = 1,
                  .n_out = 1, .in = {&x}, .out = {&y}};
    same_bits("dropout forward", &op);
    op.kind = BRG_OP_DROPOUT_BACKWARD;
    op.in[0] = &dy;
    op.out[0] = &dx;
    op.accumulate = 1;
    same_bits("dropout backward, accumulating", &op);
    const int64_t u4[4] = {N, C, 2 * H, 2 * W};
    brg_tensor up = make(4, u4, 22), dup = make(4, u4, 23);
    op = (brg_op){.kind = BRG_OP_UPSAMPLE_FORWARD, .p.upsample = {2}, .n_in = 1, .n_out = 1, .in = {&x}, .out = {&up}};
    same_bits("upsample forward", &op);
    op = (brg_op){.kind = BRG_OP_UPSAMPLE_BACKWARD, .p.upsample = {2}, .n_in = 1, .n_out = 1, .in = {&dup},
                  .out = {&dx}};
    same_bits("upsample backward", &op);

    /* The optimizers over a parameter as large as x (weights, gradient, state). */
    const brg_optim_params sgd = {.lr = 0.01f, .momentum = 0.9f, .weight_decay = 1e-4f, .step = 3};
    op = (brg_op){.kind = BRG_OP_SGD_UPDATE, .p.optim = sgd, .n_in = 1, .n_out = 2, .in = {&dy}, .out = {&x, &dx}};
    same_bits("sgd update with momentum", &op);
    op.p.optim.momentum = 0.0f;
    op.n_out = 1;
    same_bits("sgd update", &op);
    const brg_optim_params adam = {
        .lr = 0.001f, .beta1 = 0.9f, .beta2 = 0.999f, .epsilon = 1e-8f, .weight_decay = 1e-4f, .step = 3};
    brg_tensor v = make(4, x4, 21);
    op = (brg_op){.kind = BRG_OP_ADAM_UPDATE, .p.optim = adam, .n_in = 1, .n_out = 3, .in = {&dy},
                  .out = {&x, &dx, &v}};
    same_bits("adam update", &op);

    brg_tensor *all[] = {&x,  &dy, &y,  &dx, &gamma, &beta, &rm,  &rv,  &sm,  &si,  &dg,
                         &db, &py, &pdy, &gy, &gdy,   &xa,   &xb,  &dxa, &dxb, &v,  &up, &dup};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) brg_tensor_free(all[i]);
    brg_device_destroy(dev);
    printf("%d runs compared, %d differ\n", runs, fails);
    test_failures += fails;
    TEST_EXIT();
}
