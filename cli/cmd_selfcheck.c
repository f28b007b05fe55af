/* brigade selfcheck: run the kernel correctness harness (brigade/check.h)
 * over the default cases, and optionally random ones, on a CPU device or
 * any other (a GPU, with the CPU backend as an extra oracle), and print one
 * row per case. Exit 0 if every case passes, 1 if any fails, 2 on
 * a bad command line or a device too small for some case (NO ROOM). */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: brigade selfcheck [--random N] [--seed S] [--family NAME] [--device DEVICE]\n"
            "                         [--verbose] [--help]\n"
            "\n"
            "Check every kernel of a backend (the CPU's by default): forward ops against\n"
            "plain double-precision reference loops, every gradient against central finite\n"
            "differences, each backward again with accumulate into a prefilled buffer, with\n"
            "guard bands around every tensor and a device-memory leak check. Prints one row\n"
            "per case and exits 0 if all pass, 1 if any fails, 2 if none fails but the device\n"
            "had no room for some (NO ROOM: give a larger --device).\n"
            "\n"
            "  --random N     also run N random cases per family (default 0)\n"
            "  --seed S       seed of the inputs and of the random cases (default 1)\n"
            "  --family NAME  only this family:");
    for (int f = 0, col = 31; f < BRG_CHECK_FAMILY_COUNT; f++) {
        const char *name = brg_check_family_name((brg_check_family)f);
        int len = (int)strlen(name) + 2;
        if (col + len > 86) {
            fprintf(out, "\n                ");
            col = 16;
        }
        fprintf(out, " %s%s", name, f + 1 < BRG_CHECK_FAMILY_COUNT ? "," : "");
        col += len;
    }
    fprintf(out,
            "\n"
            "  --device DEVICE  the device the kernels run on: a size for a CPU device (default\n"
            "                 64MiB), or one item of a device list such as cuda:0:1GiB; a device\n"
            "                 that is not a CPU is also compared, op by op and element by element,\n"
            "                 with the CPU backend running the same ops (an extra oracle)\n"
            "  --verbose      also print the accumulate error, the worst tensor and the time\n"
            "  --help         show this text\n"
            "\n"
            "docs/kernels.md describes what each check measures and its tolerances.\n");
}

/* A non-negative integer argument; 0 and a message on stderr if malformed. */
static int parse_count(const char *opt, const char *text, uint64_t max, uint64_t *out)
{
    char *end = NULL;
    errno = 0;
    if (!text[0] || text[0] == '-') goto bad;
    unsigned long long v = strtoull(text, &end, 10);
    if (errno || *end != '\0' || v > max) goto bad;
    *out = (uint64_t)v;
    return 1;
bad:
    fprintf(stderr, "brigade selfcheck: %s expects a whole number up to %" PRIu64 ", not '%s'\n", opt, max, text);
    return 0;
}

typedef struct tally {
    int run, passed;
    int no_room; /* cases the device was too small for: not a kernel's failure */
    double seconds;
} tally;

static void print_header(void)
{
    printf("%-15s %-44s %9s %9s %15s  %s\n", "family", "case", "forward", "backward", "tolerance", "result");
}

static void print_row(const brg_check_result *r, int verbose, tally *t)
{
    const char *fam = brg_check_family_name(r->family);
    const char *label = r->label;
    size_t n = strlen(fam);
    if (strncmp(label, fam, n) == 0 && label[n] == ' ') label += n + 1;
    /* A case that did not fit ran nothing: no errors to show (0 read as a pass). */
    const int no_room = !r->passed && r->status == BRG_ERR_OUT_OF_MEMORY;
    char fwd[16] = "-", bwd[16] = "-", tol[32];
    if (!no_room) snprintf(fwd, sizeof fwd, "%.2e", r->forward_error);
    if (r->has_backward && !no_room) snprintf(bwd, sizeof bwd, "%.2e", r->backward_error);
    if (r->has_backward)
        snprintf(tol, sizeof tol, "%.0e/%.0e", r->forward_tol, r->backward_tol);
    else
        snprintf(tol, sizeof tol, "%.0e", r->forward_tol);
    printf("%-15s %-44s %9s %9s %15s  %s\n", fam, label, fwd, bwd, tol,
           r->passed ? "OK" : no_room ? "NO ROOM" : "FAIL");
    if (verbose) {
        char acc[16] = "-";
        if (r->has_backward) snprintf(acc, sizeof acc, "%.2e", r->accumulate_error);
        printf("%15s   accumulate %s (tolerance %.0e), worst tensor %s, %d finite differences, seed %" PRIu64
               ", %.3f s\n",
               "", acc, r->accumulate_tol, r->worst[0] ? r->worst : "-", r->fd_points, r->seed, r->seconds);
    }
    if (!r->passed) printf("%15s   %s\n", "", r->message[0] ? r->message : "failed");
    t->run++;
    t->passed += r->passed;
    t->no_room += no_room;
    t->seconds += r->seconds;
}

/* The device --device names (a size: a CPU device of that arena), and for
 * a device that is not a synchronous CPU (a GPU, cpu-async), a CPU device of
 * the same capacity as the extra oracle. -1 to go on, else the exit code. */
static int open_devices(const char *text, brg_device **dev, brg_device **oracle)
{
    brg_device_spec spec;
    size_t bytes = 0;
    int n = 0;
    if (brg_parse_bytes(text, &bytes) == BRG_OK) {
        spec = (brg_device_spec){.backend = BRG_BACKEND_CPU, .gpu = -1, .capacity = bytes};
    } else if (brg_device_spec_parse(text, &spec, 1, &n) != BRG_OK) {
        fprintf(stderr, "brigade selfcheck: --device: %s\n", brg_last_error());
        return BRG_EXIT_USAGE;
    }
    brg_status st = brg_device_create(&spec, 0, dev);
    if (st != BRG_OK) return brg_cli_fail("selfcheck: creating the device", st);
    if (spec.backend == BRG_BACKEND_CPU && !spec.async) return -1;
    st = brg_device_create_cpu(brg_device_capacity(*dev), 1, oracle);
    if (st != BRG_OK) {
        brg_device_destroy(*dev);
        return brg_cli_fail("selfcheck: creating the CPU oracle", st);
    }
    return -1;
}

int brg_cmd_selfcheck(int argc, char **argv)
{
    static const struct option opts[] = {
        {"random", required_argument, NULL, 'r'}, {"seed", required_argument, NULL, 's'},
        {"family", required_argument, NULL, 'f'}, {"device", required_argument, NULL, 'd'},
        {"verbose", no_argument, NULL, 'v'},      {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    uint64_t n_random = 0, seed = 1;
    const char *device = "64MiB";
    int verbose = 0, only = -1;
    int c;
    optind = 1;
    opterr = 0; /* brg_cli_bad_option says what was wrong, headed as every other message */
    while ((c = getopt_long(argc, argv, ":r:s:f:d:vh", opts, NULL)) != -1) {
        switch (c) {
        case 'r':
            if (!parse_count("--random", optarg, 1000000, &n_random)) return BRG_EXIT_USAGE;
            break;
        case 's':
            if (!parse_count("--seed", optarg, UINT64_MAX, &seed)) return BRG_EXIT_USAGE;
            break;
        case 'f': {
            brg_check_family f;
            if (brg_check_family_parse(optarg, &f) != BRG_OK) {
                fprintf(stderr, "brigade selfcheck: %s\n", brg_last_error());
                return BRG_EXIT_USAGE;
            }
            only = (int)f;
            break;
        }
        case 'd': device = optarg; break;
        case 'v': verbose = 1; break;
        case 'h': usage(stdout); return BRG_EXIT_OK;
        default: return brg_cli_bad_option("selfcheck", c, argv);
        }
    }
    if (optind < argc) {
        fprintf(stderr, "brigade selfcheck: unexpected argument '%s'\n", argv[optind]);
        return BRG_EXIT_USAGE;
    }

    brg_device *dev = NULL, *oracle = NULL;
    const int opened = open_devices(device, &dev, &oracle);
    if (opened >= 0) return opened;
    brg_check_options copts = {.oracle = oracle};
    brg_status st;

    char b[32];
    printf("brigade selfcheck on %s (%s arena), seed %" PRIu64 "%s%s\n\n", brg_device_name(dev),
           brg_format_bytes(brg_device_capacity(dev), b, sizeof b), seed, oracle ? ", oracle " : "",
           oracle ? brg_device_name(oracle) : "");
    print_header();
    tally t = {0, 0, 0, 0.0};
    const brg_check_case *cases = NULL;
    int n = brg_check_default_cases(&cases);
    for (int i = 0; i < n; i++) {
        if (only >= 0 && (int)cases[i].family != only) continue;
        brg_check_result r;
        brg_check_run_opts(dev, &cases[i], seed + (uint64_t)i, &copts, &r);
        print_row(&r, verbose, &t);
    }
    for (int f = 0; f < BRG_CHECK_FAMILY_COUNT; f++) {
        if (only >= 0 && f != only) continue;
        for (uint64_t j = 0; j < n_random; j++) {
            brg_check_case rc;
            uint64_t case_seed = seed * 1000003u + j;
            st = brg_check_random_case((brg_check_family)f, case_seed, &rc);
            if (st != BRG_OK) {
                brg_device_destroy(dev);
                brg_device_destroy(oracle);
                return brg_cli_fail("selfcheck", st);
            }
            brg_check_result r;
            brg_check_run_opts(dev, &rc, case_seed ^ 0x9e3779b97f4a7c15ULL, &copts, &r);
            print_row(&r, verbose, &t);
        }
    }
    brg_device_destroy(dev);
    brg_device_destroy(oracle);
    printf("\nselfcheck: %d of %d cases passed", t.passed, t.run);
    if (t.no_room) printf(", %d did not fit the device", t.no_room);
    printf(" (%.2f s)\n", t.seconds);
    /* A failed kernel outweighs a device too small to check the others. */
    if (t.passed + t.no_room < t.run) return BRG_EXIT_FAILURE;
    if (t.no_room) {
        fflush(stdout); /* the table first, where both streams are one file */
        fprintf(stderr, "brigade selfcheck: %d case%s did not fit in the %s device, so %s not checked; give a larger "
                "--device (the default is 64MiB)\n", t.no_room, t.no_room == 1 ? "" : "s", b,
                t.no_room == 1 ? "it was" : "they were");
        return BRG_EXIT_USAGE;
    }
    return BRG_EXIT_OK;
}
