/* brigade command line: what 'brigade plan' and 'brigade train' share about
 * plans: the schedule options, --split, and the printed plan. Messages go
 * to stderr through brg_cli_error (cli.h), the plan to stdout. */
#ifndef BRIGADE_CLI_PLAN_PRINT_H
#define BRIGADE_CLI_PLAN_PRINT_H

#include <stddef.h>
#include <stdint.h>

#include "brigade.h"

/* The planner's numbers, name being "--headroom" (a fraction in 0..0.9 or
 * a percentage) into o->headroom, "--device-speed" (GFLOP/s > 0) into
 * o->device_flops, or "--link-speed" (GB/s >= 0, 0 free) into
 * o->link_bytes_per_s. Prints why not and returns 0; 1 otherwise. */
int brg_cli_plan_number(const char *cmd, const char *name, const char *text, brg_plan_options *o);

/* The planner's settings that 'brigade plan' and 'brigade train' both
 * take: --schedule, --chunks, --recompute, --split, --headroom,
 * --device-speed, --link-speed and --profile. Their getopt values (above
 * the commands' own and the zoo options'), the rows of the commands'
 * option tables (getopt.h), and what they hold. */
enum {
    BRG_CLI_OPT_SCHEDULE = 1100,
    BRG_CLI_OPT_CHUNKS,
    BRG_CLI_OPT_RECOMPUTE,
    BRG_CLI_OPT_SPLIT,
    BRG_CLI_OPT_HEADROOM,
    BRG_CLI_OPT_DEVICE_SPEED,
    BRG_CLI_OPT_LINK_SPEED,
    BRG_CLI_OPT_PROFILE,
    BRG_CLI_OPT_REPLICAS,
    BRG_CLI_OPT_SYNC_BN,
};
#define BRG_CLI_PLAN_OPTIONS                                                                       \
    {"schedule", required_argument, NULL, BRG_CLI_OPT_SCHEDULE},                                   \
    {"chunks", required_argument, NULL, BRG_CLI_OPT_CHUNKS},                                       \
    {"recompute", required_argument, NULL, BRG_CLI_OPT_RECOMPUTE},                                 \
    {"split", required_argument, NULL, BRG_CLI_OPT_SPLIT},                                         \
    {"headroom", required_argument, NULL, BRG_CLI_OPT_HEADROOM},                                   \
    {"device-speed", required_argument, NULL, BRG_CLI_OPT_DEVICE_SPEED},                           \
    {"link-speed", required_argument, NULL, BRG_CLI_OPT_LINK_SPEED},                               \
    {"profile", required_argument, NULL, BRG_CLI_OPT_PROFILE},                                     \
    {"replicas", required_argument, NULL, BRG_CLI_OPT_REPLICAS},                                   \
    {"sync-bn", no_argument, NULL, BRG_CLI_OPT_SYNC_BN}

typedef struct brg_cli_plan_args {
    const char *schedule;     /* "1f1b" unless given */
    const char *recompute;    /* NULL: not given */
    const char *split;        /* NULL: not given (brg_cli_parse_split reads it once there is a model) */
    int64_t chunks;           /* 0: not given */
    brg_plan_options numbers; /* headroom, device and link speeds, profile_path, replicas, sync_batchnorm */
} brg_cli_plan_args;

/* Where the plan's times come from: given's profile_path, device_flops
 * and cpu_calibration (on unless --device-speed was given) into o; the
 * calibration is off with ranks > 1 (mpirun), where --profile auto is refused (each
 * rank would measure its own). Prints why and returns 0 when refused. */
int brg_cli_plan_times(const char *cmd, const brg_plan_options *given, int ranks, brg_plan_options *o);

/* --replicas D: the devices given (*n of them) are D replicas' of n / D
 * each, replica r's stage s being device r * (n / D) + s; the plan is one
 * replica's. Checks that D divides n and the batch, and that every
 * replica's devices have replica 0's kinds and sizes; *n becomes n / D
 * (the first n / D specs are replica 0's) and *replica_batch batch / D.
 * Prints why not and returns 0; 1 otherwise (D <= 1: nothing changes). */
int brg_cli_plan_replicas(const char *cmd, int replicas, const brg_device_spec *specs, int *n, int64_t batch,
                          int64_t *replica_batch);

brg_cli_plan_args brg_cli_plan_args_init(void);

/* One of those options (getopt value opt, its text) into p: 1, or 0 after
 * printing why not; -1 (and nothing printed) when opt is not one of them,
 * so that a command's switch can hand them over in its default case. */
int brg_cli_plan_option(const char *cmd, int opt, const char *text, brg_cli_plan_args *p);

/* p into o, all but --split's cuts: the schedule's options
 * (brg_cli_plan_schedule), the numbers and where the times come from
 * (brg_cli_plan_times, ranks the processes of the launch). Prints why not
 * and returns 0; 1 otherwise. */
int brg_cli_plan_apply(const char *cmd, const brg_cli_plan_args *p, int ranks, brg_plan_options *o);

/* --recompute: none, all or auto into *mode. Prints why not and returns 0;
 * 1 otherwise. */
int brg_cli_parse_recompute(const char *cmd, const char *text, brg_recompute *mode);

/* --schedule (a schedule name or "auto"), --chunks (0: not given),
 * --recompute (NULL: not given) and whether --split is given, into o.
 * Prints why not and returns 0 for an unknown name or a combination that
 * makes no sense; 1 otherwise. */
int brg_cli_plan_schedule(const char *cmd, const char *schedule, int chunks, const char *recompute, int split,
                          brg_plan_options *o);

/* Block indices of the names in text ("mixed2,mixed5"): a stage ends after
 * each. *cuts is malloc'ed (the caller frees it). Prints why not and
 * returns 0 on an empty or unknown name or the last block; 1 otherwise. */
int brg_cli_parse_split(const char *cmd, const brg_model *m, const char *text, int **cuts, int *n);

/* A count in a few characters (931, 12.3K, 4.56M) and seconds as ns, us,
 * ms or s with 3 significant digits ("<1 ns" below), into buf. Return buf. */
char *brg_cli_format_count(int64_t v, char *buf, size_t size);
char *brg_cli_format_time(double s, char *buf, size_t size);
/* A rate (samples/s) with 4 significant digits, whole numbers from 10,000
 * on (390125, not 3.901e+05), into buf. Return buf. */
char *brg_cli_format_rate(double v, char *buf, size_t size);
/* FLOP/s as "50 GFLOP/s" or "10 TFLOP/s" into buf. Return buf. */
char *brg_cli_format_speed(double flops, char *buf, size_t size);

/* What a stage's row says when it does not fit, into buf: "DOES NOT FIT",
 * or "DOES NOT FIT: fragmented, needs an arena of 11.63 MiB" when its peak
 * is within its budget but its buffers fragment the arena (arena_bytes);
 * "" when it fits or st is NULL. 'brigade plan' and 'brigade bench' mark
 * their rows with it. Returns buf. */
const char *brg_cli_fit_marker(const brg_plan_stage *st, char *buf, size_t size);

/* The plan (partitioned) as 'brigade plan' shows it: the settings, a row
 * per device (blocks, parameters, stash, planned peak against capacity),
 * the predicted throughput and the peaks as bars. o gives the optimizer. */
void brg_cli_print_plan(const brg_plan *plan, const brg_plan_options *o);

#endif /* BRIGADE_CLI_PLAN_PRINT_H */
