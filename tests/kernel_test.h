/* Shared driver of the kernel tests (tests/test_kernels_*.c).
 *
 * Each test main opens one CPU device, runs fixed cases with several seeds,
 * the library's default cases and a number of random cases of its families
 * through the public harness (brigade/check.h), prints one line per run and
 * counts a failure for every case that does not pass. The harness only uses
 * the public device API, so the same driver checks any backend.
 *
 * Environment knobs, for fuzzing by hand:
 *   BRG_CHECK_RANDOM  random cases per family (default: what the test asks)
 *   BRG_CHECK_SEED    base seed of the random cases (default 1)
 *   BRG_CHECK_VERBOSE 1 prints passing cases too (failures always print)
 */
#ifndef BRIGADE_KERNEL_TEST_H
#define BRIGADE_KERNEL_TEST_H

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#define KT_DEVICE_BYTES ((size_t)64 << 20)
#define KT_SEEDS 2 /* seeds per fixed case */

static brg_device *kt_dev = NULL;
static size_t kt_in_use_at_open = 0;
static int kt_runs = 0;
static double kt_seconds = 0.0;

static inline long kt_env_long(const char *name, long fallback)
{
    const char *v = getenv(name);
    if (!v || !*v) return fallback;
    char *end = NULL;
    long n = strtol(v, &end, 10);
    return (end && *end == '\0') ? n : fallback;
}

/* Open the test device; exits 1 (a test failure, not a skip) if the CPU
 * backend cannot make one, since every build has it. */
static inline void kt_open(void)
{
    brg_status st = brg_device_create_cpu(KT_DEVICE_BYTES, 0, &kt_dev);
    if (st != BRG_OK) {
        fprintf(stderr, "cannot create a CPU device: %s\n", brg_last_error());
        exit(1);
    }
    kt_in_use_at_open = brg_device_in_use(kt_dev);
}

/* Print one result and count it. */
static inline void kt_report(const brg_check_result *r)
{
    kt_runs++;
    kt_seconds += r->seconds;
    CHECK_MSG(r->passed, "%s (seed %" PRIu64 "): %s", r->label, r->seed, r->message);
    if (!r->passed || kt_env_long("BRG_CHECK_VERBOSE", 0)) {
        char bwd[16] = "-", acc[16] = "-";
        if (r->has_backward) {
            snprintf(bwd, sizeof bwd, "%.2e", r->backward_error);
            snprintf(acc, sizeof acc, "%.2e", r->accumulate_error);
        }
        printf("%-4s %-52s seed %-4" PRIu64 " fwd %.2e bwd %-8s acc %-8s worst %s%s%s\n", r->passed ? "ok" : "FAIL",
               r->label, r->seed, r->forward_error, bwd, acc, r->worst[0] ? r->worst : "-",
               r->message[0] ? ": " : "", r->message);
    }
}

/* Run one case with `seeds` different seeds and the given options (NULL:
 * defaults). */
static inline void kt_case_opts(const brg_check_case *c, int seeds, const brg_check_options *opts)
{
    for (int s = 0; s < seeds; s++) {
        brg_check_result r;
        brg_check_run_opts(kt_dev, c, (uint64_t)(1 + 7919 * s), opts, &r);
        kt_report(&r);
    }
}

static inline void kt_case(const brg_check_case *c, int seeds) { kt_case_opts(c, seeds, NULL); }

static inline void kt_cases(const brg_check_case *cases, int n)
{
    for (int i = 0; i < n; i++) kt_case(&cases[i], KT_SEEDS);
}

/* The library's default cases of one family (what `brigade selfcheck` runs). */
static inline void kt_defaults(brg_check_family family)
{
    const brg_check_case *cases = NULL;
    int n = brg_check_default_cases(&cases), found = 0;
    for (int i = 0; i < n; i++)
        if (cases[i].family == family) {
            kt_case(&cases[i], 1);
            found++;
        }
    CHECK_MSG(found > 0, "no default cases for %s", brg_check_family_name(family));
}

/* count random cases of a family (overridden by BRG_CHECK_RANDOM), each
 * drawn from its own seed and run with another. */
static inline void kt_random(brg_check_family family, int count)
{
    long n = kt_env_long("BRG_CHECK_RANDOM", count);
    uint64_t base = (uint64_t)kt_env_long("BRG_CHECK_SEED", 1);
    for (long i = 0; i < n; i++) {
        brg_check_case c;
        uint64_t seed = base * 1000003u + (uint64_t)i;
        CHECK_OK(brg_check_random_case(family, seed, &c));
        brg_check_result r;
        brg_check_run(kt_dev, &c, seed ^ 0xabcdefu, &r);
        kt_report(&r);
    }
}

/* The harness must be able to fail on this case: its errors are real
 * (positive, from the data), and each injected fault is caught. */
static inline void kt_detects(const brg_check_case *c)
{
    char label[128];
    brg_check_case_label(c, label, sizeof label);
    brg_check_result r;
    brg_check_options o;

    CHECK_OK(brg_check_run(kt_dev, c, 5, &r));
    CHECK_MSG(r.passed, "%s: %s", label, r.message);
    CHECK_MSG(!r.has_backward || r.backward_error > 0.0,
              "%s: a backward error of exactly 0 against finite differences is not a measurement", label);
    CHECK_MSG(r.fd_points > 0 || !r.has_backward || c->ties, "%s: no finite differences were evaluated", label);

    /* Tolerances shrunk to nothing: real, non-zero errors must now fail. */
    memset(&o, 0, sizeof o);
    o.tolerance_scale = 1e-30;
    brg_check_run_opts(kt_dev, c, 5, &o, &r);
    CHECK_MSG(!r.passed, "%s passes with all tolerances scaled by 1e-30", label);

    memset(&o, 0, sizeof o);
    o.inject_forward = 1e-2;
    brg_check_run_opts(kt_dev, c, 5, &o, &r);
    CHECK_MSG(!r.passed && r.forward_error >= 1e-3, "%s: an injected forward error was not caught (fwd %.3g)", label,
              r.forward_error);
    CHECK_MSG(r.message[0] != '\0', "%s: a failed case has no message", label);

    if (r.has_backward) {
        memset(&o, 0, sizeof o);
        o.inject_backward = 1e-2;
        brg_check_run_opts(kt_dev, c, 5, &o, &r);
        CHECK_MSG(!r.passed && r.backward_error >= 1e-3, "%s: an injected gradient error was not caught (bwd %.3g)",
                  label, r.backward_error);
        memset(&o, 0, sizeof o);
        o.inject_accumulate = 1e-2;
        brg_check_run_opts(kt_dev, c, 5, &o, &r);
        CHECK_MSG(!r.passed && r.accumulate_error >= 1e-3,
                  "%s: an injected accumulate error was not caught (acc %.3g)", label, r.accumulate_error);
    }
}

/* Close the device (checking the arena is back where it started) and
 * return the test's exit status. */
static inline int kt_finish(const char *name)
{
    CHECK_MSG(brg_device_in_use(kt_dev) == kt_in_use_at_open, "%zu bytes still in use on the test device",
              brg_device_in_use(kt_dev) - kt_in_use_at_open);
    brg_device_destroy(kt_dev);
    kt_dev = NULL;
    printf("%s: %d runs, %d failed, %.2f s in the harness\n", name, kt_runs, test_failures, kt_seconds);
    TEST_EXIT();
}

#endif /* BRIGADE_KERNEL_TEST_H */
