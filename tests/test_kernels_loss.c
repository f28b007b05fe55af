/* Softmax cross-entropy: forward (mean loss and probabilities) and backward
 * (dlogits with grad_scale 1/N) through the harness, plus hand-computed
 * values the reference must also agree with: equal logits give log K, and
 * logits of +-1000 give finite losses (the log-sum-exp, not log of an
 * underflowed probability).
 *
 * The reductions beside the loss: count_correct (correct predictions, the
 * first maximum on ties, NaN never winning, labels outside the classes never
 * correct, accumulate) and check_finite (the flag set to the tag only while
 * it is 0), through the harness and with exact hand-computed values. */
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

/* count_correct of rows x k scores against labels into a count that holds
 * `start` before (accumulate) or poison (not); returns the count. */
static int32_t count_correct(const float *scores, const int32_t *labels, int64_t rows, int64_t k, int accumulate,
                             int32_t start)
{
    brg_tensor ts, tl, tc;
    const int64_t ss[2] = {rows, k}, one = 1;
    CHECK_OK(brg_tensor_alloc(kt_dev, BRG_F32, 2, ss, "scores", &ts));
    CHECK_OK(brg_tensor_alloc(kt_dev, BRG_I32, 1, &rows, "labels", &tl));
    CHECK_OK(brg_tensor_alloc(kt_dev, BRG_I32, 1, &one, "count", &tc));
    CHECK_OK(brg_device_copy_in(kt_dev, ts.data, scores, brg_tensor_bytes(&ts)));
    CHECK_OK(brg_device_copy_in(kt_dev, tl.data, labels, brg_tensor_bytes(&tl)));
    const int32_t before = accumulate ? start : -12345;
    CHECK_OK(brg_device_copy_in(kt_dev, tc.data, &before, sizeof before));
    brg_op op;
    memset(&op, 0, sizeof op);
    op.kind = BRG_OP_COUNT_CORRECT;
    op.n_in = 2, op.in[0] = &ts, op.in[1] = &tl, op.n_out = 1, op.out[0] = &tc;
    op.accumulate = accumulate;
    int32_t got = -1;
    CHECK_OK(brg_device_run(kt_dev, &op));
    CHECK_OK(brg_device_copy_out(kt_dev, &got, tc.data, sizeof got));
    brg_tensor_free(&tc);
    brg_tensor_free(&tl);
    brg_tensor_free(&ts);
    return got;
}

static void count_correct_values(void)
{
    const float nan = NAN, inf = INFINITY;
    /* Row 0: a tie between classes 1 and 3: the first (1) wins.
     * Row 1: a NaN in the middle is passed over: 2.
     * Row 2: a NaN first: the scan never moves, 0.
     * Row 3: +inf last: 3.  Row 4: all -inf: 0.  Row 5: -0 then +0: equal, 0. */
    const float s[6 * 4] = {0.1f, 0.7f, 0.1f, 0.7f,   0.5f, nan,  0.9f, 0.2f, nan,   5.0f, 6.0f, 7.0f,
                            1.0f, 2.0f, 3.0f, inf,    -inf, -inf, -inf, -inf, -0.0f, 0.0f, 0.0f, 0.0f};
    const int32_t right[6] = {1, 2, 0, 3, 0, 0};
    CHECK(count_correct(s, right, 6, 4, 0, 0) == 6);
    const int32_t second_tie[6] = {3, 2, 3, 3, 1, 1}; /* the later tie, the max after a leading NaN, ... */
    CHECK(count_correct(s, second_tie, 6, 4, 0, 0) == 2);
    const int32_t outside[6] = {-1, 4, 0, 3, 100, -7}; /* outside [0, 4): never correct */
    CHECK(count_correct(s, outside, 6, 4, 0, 0) == 2);
    /* accumulate adds to what is there. */
    CHECK(count_correct(s, right, 6, 4, 1, 40) == 46);
    CHECK(count_correct(s, outside, 6, 4, 1, 0) == 2);
    /* One class: every label 0 is right. */
    const float one_class[3] = {-1.0f, nan, 2.0f};
    const int32_t zeros[3] = {0, 0, 0};
    CHECK(count_correct(one_class, zeros, 3, 1, 0, 0) == 3);
    /* An empty batch: 0, or what was there. */
    CHECK(count_correct(s, right, 0, 4, 0, 0) == 0);
    CHECK(count_correct(s, right, 0, 4, 1, 9) == 9);
}

/* check_finite of x (n floats) into a flag holding `flag` before, with tag. */
static int32_t check_finite(const float *x, int64_t n, int32_t flag, int32_t tag)
{
    brg_tensor tx, tf;
    const int64_t one = 1;
    CHECK_OK(brg_tensor_alloc(kt_dev, BRG_F32, 1, &n, "x", &tx));
    CHECK_OK(brg_tensor_alloc(kt_dev, BRG_I32, 1, &one, "flag", &tf));
    CHECK_OK(brg_device_copy_in(kt_dev, tx.data, x, brg_tensor_bytes(&tx)));
    CHECK_OK(brg_device_copy_in(kt_dev, tf.data, &flag, sizeof flag));
    brg_op op;
    memset(&op, 0, sizeof op);
    op.kind = BRG_OP_CHECK_FINITE;
    op.p.finite.tag = tag;
    op.n_in = 1, op.in[0] = &tx, op.n_out = 1, op.out[0] = &tf;
    int32_t got = -1;
    CHECK_OK(brg_device_run(kt_dev, &op));
    CHECK_OK(brg_device_copy_out(kt_dev, &got, tf.data, sizeof got));
    brg_tensor_free(&tf);
    brg_tensor_free(&tx);
    return got;
}

static void check_finite_values(void)
{
    enum { N = 3 * 4096 + 17 }; /* full CPU blocks and a tail */
    static float x[N];
    for (int i = 0; i < N; i++) x[i] = (float)(i % 97) * 1e30f - 3e31f; /* large, finite */
    x[5] = 3.4028235e38f;                                              /* FLT_MAX is finite */
    x[6] = -3.4028235e38f;
    x[7] = 1e-45f; /* a denormal too */
    CHECK(check_finite(x, N, 0, 9) == 0);
    const float bad[3] = {NAN, INFINITY, -INFINITY};
    const int64_t at[5] = {0, 4095, 4096, N / 2, N - 1};
    for (int b = 0; b < 3; b++)
        for (int a = 0; a < 5; a++) {
            const float keep = x[at[a]];
            x[at[a]] = bad[b];
            int32_t got = check_finite(x, N, 0, 9);
            CHECK_MSG(got == 9, "%g at %lld: flag %d, expected 9", (double)bad[b], (long long)at[a], (int)got);
            got = check_finite(x, N, 4, 9); /* set already: kept */
            CHECK_MSG(got == 4, "%g at %lld over flag 4: flag %d", (double)bad[b], (long long)at[a], (int)got);
            x[at[a]] = keep;
        }
    /* A flag set by an earlier check stays set after a clean one. */
    CHECK(check_finite(x, N, 3, 9) == 3);
    /* One element, and an empty tensor (nothing to find). */
    const float one_nan = NAN;
    CHECK(check_finite(&one_nan, 1, 0, 1) == 1);
    CHECK(check_finite(x, 0, 0, 1) == 0);
}

/* The harness fails count_correct and check_finite when their result is
 * off by one (injected), forward and accumulate. */
static void reductions_detected(void)
{
    const brg_check_case cc = {.family = BRG_CHECK_COUNT_CORRECT, .ndim = 2, .x_shape = {8, 10}, .ties = 1};
    const brg_check_case cf = {.family = BRG_CHECK_CHECK_FINITE, .ndim = 1, .x_shape = {100}, .nonfinite = 2};
    brg_check_result r;
    brg_check_options o;
    memset(&o, 0, sizeof o);
    o.inject_forward = 1e-2;
    brg_check_run_opts(kt_dev, &cc, 5, &o, &r);
    CHECK_MSG(!r.passed && r.forward_error >= 1.0, "count_correct: injected error not caught: %s", r.message);
    brg_check_run_opts(kt_dev, &cf, 5, &o, &r);
    CHECK_MSG(!r.passed && r.forward_error >= 1.0, "check_finite: injected error not caught: %s", r.message);
    memset(&o, 0, sizeof o);
    o.inject_accumulate = 1e-2;
    brg_check_run_opts(kt_dev, &cc, 5, &o, &r);
    CHECK_MSG(!r.passed && r.accumulate_error >= 1.0, "count_correct: injected accumulate error not caught: %s",
              r.message);
}

static const brg_check_case reduction_cases[] = {
    {.family = BRG_CHECK_COUNT_CORRECT, .ndim = 2, .x_shape = {1, 1}},
    {.family = BRG_CHECK_COUNT_CORRECT, .ndim = 2, .x_shape = {32, 10}, .ties = 1, .nonfinite = 1},
    {.family = BRG_CHECK_COUNT_CORRECT, .ndim = 2, .x_shape = {3, 700}, .nonfinite = 1, .label_mode = 1},
    {.family = BRG_CHECK_COUNT_CORRECT, .ndim = 2, .x_shape = {64, 3}, .ties = 1, .label_mode = 2},
    {.family = BRG_CHECK_CHECK_FINITE, .ndim = 4, .x_shape = {2, 3, 4, 5}, .nonfinite = 1, .tag = 1},
    {.family = BRG_CHECK_CHECK_FINITE, .ndim = 1, .x_shape = {4096}, .nonfinite = 3},
    {.family = BRG_CHECK_CHECK_FINITE, .ndim = 1, .x_shape = {4097}, .nonfinite = 3, .preset = 2},
    {.family = BRG_CHECK_CHECK_FINITE, .ndim = 3, .x_shape = {5, 6, 7}},
};

int main(void)
{
    kt_open();
    kt_cases(cases, (int)(sizeof cases / sizeof cases[0]));
    kt_defaults(BRG_CHECK_SOFTMAX_XENT);
    kt_random(BRG_CHECK_SOFTMAX_XENT, 30);
    kt_detects(&cases[0]);
    hand_values();
    kt_cases(reduction_cases, (int)(sizeof reduction_cases / sizeof reduction_cases[0]));
    kt_defaults(BRG_CHECK_COUNT_CORRECT);
    kt_defaults(BRG_CHECK_CHECK_FINITE);
    kt_random(BRG_CHECK_COUNT_CORRECT, 30);
    kt_random(BRG_CHECK_CHECK_FINITE, 30);
    count_correct_values();
    check_finite_values();
    reductions_detected();
    return kt_finish("test_kernels_loss");
}
