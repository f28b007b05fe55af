/* Softmax cross-entropy: forward (mean loss and probabilities) and backward
 * (dlogits with grad_scale 1/N) through the harness, plus hand-computed
 * values the reference must also agree with: equal logits give log K, and
 * logits of +-1000 give finite losses (the log-sum-exp, not log of an
 * underflowed probability). */
#include <math.h>

#include "kernel_test.h"

static const brg_check_case cases[] = {
    {.family = BRG_CHECK_SOFTMAX_XENT, .ndim = 2, .x_shape = {4, 10}},
    {.family = BRG_CHECK_SOFTMAX_XENT, .ndim = 2, .x_shape = {1, 3}},
    {.family = BRG_CHECK_SOFTMAX_XENT, .ndim = 2, .x_shape = {8, 5}},
    {.family = BRG_CHECK_SOFTMAX_XENT, .ndim = 2, .x_shape = {3, 2}},
    {.family = BRG_CHECK_SOFTMAX_XENT, .ndim = 2, .x_shape = {2, 1000}},
    {.family = BRG_CHECK_SOFTMAX_XENT, .ndim = 2, .x_shape = {32, 10}},
};

/* Run the forward on rows x k logits with the given labels; fills loss and
 * probs (rows * k). */
static void xent_forward(const float *logits, const int32_t *labels, int64_t rows, int64_t k, float *loss,
                         float *probs)
{
    brg_tensor tl, tlab, tloss, tprobs;
    const int64_t ls[2] = {rows, k}, one = 1;
    CHECK_OK(brg_tensor_alloc(kt_dev, BRG_F32, 2, ls, "logits", &tl));
    CHECK_OK(brg_tensor_alloc(kt_dev, BRG_I32, 1, &rows, "labels", &tlab));
    CHECK_OK(brg_tensor_alloc(kt_dev, BRG_F32, 1, &one, "loss", &tloss));
    CHECK_OK(brg_tensor_alloc(kt_dev, BRG_F32, 2, ls, "probs", &tprobs));
    CHECK_OK(brg_device_copy_in(kt_dev, tl.data, logits, brg_tensor_bytes(&tl)));
    CHECK_OK(brg_device_copy_in(kt_dev, tlab.data, labels, brg_tensor_bytes(&tlab)));
    brg_op op;
    memset(&op, 0, sizeof op);
    op.kind = BRG_OP_SOFTMAX_XENT_FORWARD;
    op.n_in = 2;
    op.in[0] = &tl;
    op.in[1] = &tlab;
    op.n_out = 2;
    op.out[0] = &tloss;
    op.out[1] = &tprobs;
    CHECK_OK(brg_device_run(kt_dev, &op));
    CHECK_OK(brg_device_copy_out(kt_dev, loss, tloss.data, sizeof(float)));
    CHECK_OK(brg_device_copy_out(kt_dev, probs, tprobs.data, brg_tensor_bytes(&tprobs)));
    brg_tensor_free(&tprobs);
    brg_tensor_free(&tloss);
    brg_tensor_free(&tlab);
    brg_tensor_free(&tl);
}

static void hand_values(void)
{
    /* Equal logits: every probability 1/K and the loss log K, whatever the label. */
    float logits[2 * 7], probs[2 * 7], loss = -1.0f;
    for (int i = 0; i < 14; i++) logits[i] = 0.25f;
    const int32_t labels[2] = {0, 6};
    xent_forward(logits, labels, 2, 7, &loss, probs);
    CHECK_NEAR(loss, log(7.0), 1e-6);
    for (int i = 0; i < 14; i++) CHECK_NEAR(probs[i], 1.0 / 7.0, 1e-7);

    /* Extreme logits: row 0 is certain of its label (loss 0), row 1 puts its
     * label 2000 below the winner (loss 2000); the mean is 1000. */
    const float big[2 * 3] = {1000.0f, 0.0f, -1000.0f, 1000.0f, 0.0f, -1000.0f};
    const int32_t big_labels[2] = {0, 2};
    float big_probs[6];
    xent_forward(big, big_labels, 2, 3, &loss, big_probs);
    CHECK_MSG(isfinite(loss), "loss %g is not finite", (double)loss);
    CHECK_NEAR(loss, 1000.0, 1e-3);
    CHECK_NEAR(big_probs[0], 1.0, 1e-7);
    CHECK_NEAR(big_probs[2], 0.0, 1e-30);
}

int main(void)
{
    kt_open();
    kt_cases(cases, (int)(sizeof cases / sizeof cases[0]));
    kt_defaults(BRG_CHECK_SOFTMAX_XENT);
    kt_random(BRG_CHECK_SOFTMAX_XENT, 30);
    kt_detects(&cases[0]);
    hand_values();
    return kt_finish("test_kernels_loss");
}
