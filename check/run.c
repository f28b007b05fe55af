/* The kernel check harness's entry points (brigade/check.h): set a run up,
 * run the case's family (families.c) with the steps of check.c, clean up and
 * check for leaks. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check/check-impl.h"

brg_status brg_check_run_opts(brg_device *dev, const brg_check_case *c, uint64_t seed, const brg_check_options *opts,
                              brg_check_result *res)
{
    if (!res) return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_check_run: result is NULL");
    memset(res, 0, sizeof *res);
    res->seed = seed;
    res->status = BRG_OK;
    if (!dev || !c) {
        res->status = brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_check_run: device or case is NULL");
        snprintf(res->message, sizeof res->message, "%s", brg_last_error());
        return res->status;
    }
    double t0 = brg_now_seconds();
    ck k;
    memset(&k, 0, sizeof k);
    k.dev = dev;
    brg_check_normalize_case(c, &k.c);
    if (opts) k.opt = *opts;
    k.res = res;
    k.rng.s = seed * 0xd1342543de82ef95ULL + 0x2545f4914f6cdd1dULL;
    res->family = k.c.family;
    brg_check_case_label(&k.c, res->label, sizeof res->label);
    brg_check_tolerances(k.c.family, &res->forward_tol, &res->backward_tol, &res->accumulate_tol);
    double scale = k.opt.tolerance_scale > 0 ? k.opt.tolerance_scale : 1.0;
    res->forward_tol *= scale;
    res->backward_tol *= scale;
    res->accumulate_tol *= scale;
    res->has_backward = k.c.family != BRG_CHECK_BATCHNORM_INFER && k.c.family != BRG_CHECK_SGD &&
                        k.c.family != BRG_CHECK_ADAM && k.c.family != BRG_CHECK_COUNT_CORRECT &&
                        k.c.family != BRG_CHECK_CHECK_FINITE;
    res->passed = 1;

    brg_status st = brg_check_validate_case(&k.c);
    if (st != BRG_OK) {
        res->passed = 0;
        res->status = st;
        snprintf(res->message, sizeof res->message, "%s", brg_last_error());
        return st;
    }
    size_t in_use = brg_device_in_use(dev);
    k.poison = brg_ck_host(&k, POISON_CHUNK, sizeof(float));
    if (k.poison) {
        const uint32_t bits = POISON;
        for (int i = 0; i < POISON_CHUNK; i++) memcpy(&k.poison[i], &bits, sizeof bits);
        brg_ck_run_family(&k);
    }
    /* Keep the message of a failed call while the cleanup runs. */
    char saved[sizeof res->message];
    snprintf(saved, sizeof saved, "%s", brg_last_error());
    for (int i = k.n_tens - 1; i >= 0; i--) brg_device_free(dev, k.tens[i]->mem);
    for (size_t i = 0; i < k.n_host; i++) free(k.host[i]);
    free(k.host);
    if (k.st != BRG_OK) {
        res->passed = 0;
        res->status = k.st;
        if (!res->message[0]) snprintf(res->message, sizeof res->message, "%s", saved);
        brg_error(k.st, "%s", res->message);
    }
    size_t after = brg_device_in_use(dev);
    if (after != in_use) {
        char b[32];
        brg_ck_fail(&k, "device memory leaked: %s %s in use after the case than before",
                    brg_format_bytes(after > in_use ? after - in_use : in_use - after, b, sizeof b),
                after > in_use ? "more" : "less");
        brg_ck_blame(&k, "arena");
    }
    res->seconds = brg_now_seconds() - t0;
    return k.st;
}

brg_status brg_check_run(brg_device *dev, const brg_check_case *c, uint64_t seed, brg_check_result *res)
{
    return brg_check_run_opts(dev, c, seed, NULL, res);
}
